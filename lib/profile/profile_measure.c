/* Measuring a model on one device: every layer's forward and backward time
 * over repetitions, the per-step overhead, the whole step, thread scaling
 * and energy, as a device object of hps-profile(5). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hps_blas.h"
#include "core/hps_json.h"
#include "net/hps_net.h"
#include "profile/hps_profile.h"

/* GPUs are measured one at a time, so a parallel fraction cannot be fitted;
 * the planner does not use it for data-parallel units, which split the batch
 * (hps-plan(1), COST MODEL). */
#define GPU_PARALLEL_FRACTION 0.95

/* A noisy machine (hps-profile(1), REPETITIONS): the warm-up goes on until
 * the last WARMUP_WINDOW layered steps are within WARMUP_STABLE of their
 * median (caches, clocks and the allocator settled), for WARMUP_MAX_S at
 * most; then enough repetitions that every layer's samples span
 * o->min_seconds, so a slow spell of the machine is one sample among many,
 * not the whole of a layer's time (REPS_MAX at most); the scaling and the
 * half batch as long, since their times are set against the step's. */
#define WARMUP_WINDOW 3
#define WARMUP_STABLE 0.05
#define WARMUP_MAX_S 0.5
#define REPS_MAX 5000

hps_profile_opts hps_profile_opts_default(void)
{
    return (hps_profile_opts){.batch = 0, .reps = 10, .warmup = 2, .min_seconds = 0.5,
                              .table_rows_cap = 1 << 20, .energy = 0, .scaling = 1, .seed = 1,
                              .progress = 0};
}

/* Samples of one measurement run: [layer][rep] times in seconds, joules. */
typedef struct {
    int n_layers, reps;
    double *fwd, *bwd, *fwd_j, *bwd_j, *overhead, *step, *step_j;
} samples;

static samples *samples_create(int n_layers, int reps)
{
    samples *s = hps_calloc(1, sizeof *s);
    s->n_layers = n_layers;
    s->reps = reps;
    size_t per = (size_t)n_layers * reps;
    s->fwd = hps_calloc(4 * per + 3 * (size_t)reps, sizeof(double));
    s->bwd = s->fwd + per;
    s->fwd_j = s->bwd + per;
    s->bwd_j = s->fwd_j + per;
    s->overhead = s->bwd_j + per;
    s->step = s->overhead + reps;
    s->step_j = s->step + reps;
    return s;
}

static void samples_free(samples *s)
{
    if (!s) return;
    free(s->fwd);
    free(s);
}

typedef struct {
    hps_net *net;
    const hps_batch *batch;
    int rows; /* of the batch, loaded each step */
    hps_optim opt;
    hps_energy *energy;
} bench;

static double joules(bench *b) { return b->energy ? hps_energy_joules(b->energy) : 0.0; }

/* Times one layer call; the backend is synchronised on both sides. */
static void time_layer(bench *b, int l, int backward, double *sec, double *j)
{
    b->net->be->sync();
    double j0 = joules(b), t0 = hps_now();
    if (backward)
        hps_net_layer_backward(b->net, l);
    else
        hps_net_layer_forward(b->net, l);
    b->net->be->sync();
    *sec = hps_now() - t0;
    *j = joules(b) - j0;
}

/* One training step, layer by layer, into column rep of s (rep < 0: warm-up,
 * s unused); its seconds. */
static double layered_step(bench *b, samples *s, int rep)
{
    hps_net *net = b->net;
    const int L = net->model->n_layers;
    double sec, j, t0 = hps_now(), start = t0;
    HPS_CHECK(hps_net_load_range(net, b->batch, 0, b->rows) == 0);
    net->be->memzero(net->grads, net->model->n_params * sizeof(float));
    net->be->sync();
    double overhead = hps_now() - t0;
    for (int l = 0; l < L; l++) {
        time_layer(b, l, 0, &sec, &j);
        if (rep >= 0) s->fwd[l * s->reps + rep] = sec, s->fwd_j[l * s->reps + rep] = j;
    }
    for (int l = L - 1; l >= 0; l--) {
        time_layer(b, l, 1, &sec, &j);
        if (rep >= 0) s->bwd[l * s->reps + rep] = sec, s->bwd_j[l * s->reps + rep] = j;
    }
    t0 = hps_now();
    hps_net_update(net, &b->opt);
    net->be->sync();
    if (rep >= 0) s->overhead[rep] = overhead + hps_now() - t0;
    return hps_now() - start;
}

/* One training step end to end, as hps-train runs it. */
static void whole_step(bench *b, samples *s, int rep)
{
    hps_net *net = b->net;
    net->be->sync();
    double j0 = joules(b), t0 = hps_now();
    hps_net_load_batch(net, b->batch);
    hps_net_forward(net);
    hps_net_backward(net);
    hps_net_update(net, &b->opt);
    net->be->sync();
    s->step[rep] = hps_now() - t0;
    s->step_j[rep] = joules(b) - j0;
}

/* Warm-up steps until the last WARMUP_WINDOW agree (at least `warmup` of
 * them): the seconds of a step, the median of that window. */
static double warm_up(bench *b, int warmup)
{
    double last[WARMUP_WINDOW] = {0}, t0 = hps_now();
    for (int i = 0;; i++) {
        last[i % WARMUP_WINDOW] = layered_step(b, NULL, -1);
        if (i + 1 < warmup || i + 1 < WARMUP_WINDOW) continue;
        double med = hps_median(last, WARMUP_WINDOW), worst = 0;
        for (int k = 0; k < WARMUP_WINDOW; k++) worst = fmax(worst, fabs(last[k] - med));
        if (worst <= WARMUP_STABLE * med || hps_now() - t0 > WARMUP_MAX_S) return med;
    }
}

/* reps layered steps (more where min_seconds asks for them, max_reps at
 * most), then as many whole ones when whole is set.  The warm-up waits for
 * stable times when stable is set, else it is `warmup` steps, the last
 * one's length sizing the repetitions. */
static samples *measure(bench *b, int reps, int max_reps, int warmup, int stable, double min_seconds, int whole)
{
    double step = 0;
    if (stable)
        step = warm_up(b, warmup);
    else
        for (int i = 0; i < warmup; i++) step = layered_step(b, NULL, -1);
    if (min_seconds > 0 && step > 0 && reps < max_reps)
        reps = (int)fmin(max_reps, fmax(reps, ceil(min_seconds / step)));
    samples *s = samples_create(b->net->model->n_layers, reps);
    for (int i = 0; i < reps; i++) layered_step(b, s, i);
    for (int i = 0; i < reps && whole; i++) whole_step(b, s, i);
    return s;
}

/* ---- statistics -------------------------------------------------------------- */

static double sum(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return s;
}

/* Layer l's forward+backward seconds, repetition by repetition, into
 * both[0 .. s->reps); returns s->reps. */
static int layer_both(const samples *s, int l, double *both)
{
    for (int i = 0; i < s->reps; i++) both[i] = s->fwd[l * s->reps + i] + s->bwd[l * s->reps + i];
    return s->reps;
}

/* ---- scaling ------------------------------------------------------------------- */

int hps_profile_rounds(int n, double min_seconds) { return n > 1 && min_seconds > 0 ? HPS_PROFILE_ROUNDS : 1; }

void hps_profile_take_turns(int n, int rounds, void (*turn)(void *ctx, int k, int round), void *ctx)
{
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < n; k++) turn(ctx, k, r);
}

/* The scaling's settings: each thread count on the whole batch (where
 * full is wanted), then each on half of it (where half is); a turn
 * measures one for a round's share of the repetitions and seconds, warming
 * up until stable in the first round only (after it the thread pools exist
 * and the caches hold the net). */
typedef struct {
    bench *b;
    const hps_profile_opts *o;
    const int *threads;
    int n, with_full, rounds, reps, settings;
    samples **got; /* [round][setting] */
} scaling_turns;

static int setting_is_half(const scaling_turns *c, int k) { return !c->with_full || k >= c->n; }

static void scaling_turn(void *ctx, int k, int round)
{
    scaling_turns *c = ctx;
    bench *b = c->b;
    hps_set_threads(c->threads[k % c->n]);
    b->rows = setting_is_half(c, k) ? b->batch->B / 2 : b->batch->B;
    c->got[(size_t)round * c->settings + k] =
        measure(b, c->reps, REPS_MAX / c->rounds, 1, round == 0 && c->o->min_seconds > 0, c->o->min_seconds / c->rounds,
                0);
}

/* Median forward+backward ms of every layer at each of n thread counts,
 * on the whole batch into full[layer][i] (unless full is NULL) and on its
 * first B / 2 samples into half[layer][i] (unless NULL), the settings
 * taking turns (hps_profile_take_turns), each as long as the step's own
 * times, which they are compared with. */
static void layer_ms(bench *b, const int *threads, int n, const hps_profile_opts *o, double *full, double *half)
{
    const int L = b->net->model->n_layers, reps = o->reps > 6 ? o->reps / 2 : 3;
    scaling_turns c = {.b = b, .o = o, .threads = threads, .n = n, .with_full = full != NULL,
                       .settings = (full ? n : 0) + (half ? n : 0)};
    c.rounds = hps_profile_rounds(c.settings, o->min_seconds);
    c.reps = (reps + c.rounds - 1) / c.rounds;
    c.got = hps_calloc((size_t)c.rounds * c.settings, sizeof *c.got);
    hps_profile_take_turns(c.settings, c.rounds, scaling_turn, &c);
    b->rows = b->batch->B;
    for (int k = 0; k < c.settings; k++) {
        int total = 0;
        for (int r = 0; r < c.rounds; r++) total += c.got[(size_t)r * c.settings + k]->reps;
        double *both = hps_malloc((size_t)total * sizeof *both), *into = setting_is_half(&c, k) ? half : full;
        for (int l = 0; l < L; l++) {
            int at = 0;
            for (int r = 0; r < c.rounds; r++) at += layer_both(c.got[(size_t)r * c.settings + k], l, both + at);
            into[(size_t)l * n + k % n] = hps_median(both, total) * 1e3;
        }
        free(both);
    }
    for (int i = 0; i < c.rounds * c.settings; i++) samples_free(c.got[i]);
    free(c.got);
}

/* The thread scaling of one layer: ms at 1..threads and its parallel
 * fraction (units freed by the caller). */
static hps_profile_scaling scaling_of(const double *ms, int threads, int is_gpu)
{
    hps_profile_scaling sc = {.n = threads, .units = hps_malloc((size_t)threads * sizeof(int)), .ms = (double *)ms};
    for (int k = 1; k <= threads; k++) sc.units[k - 1] = k;
    sc.parallel_fraction = is_gpu ? GPU_PARALLEL_FRACTION : hps_fit_parallel_fraction(sc.units, ms, threads);
    return sc;
}

void hps_scaling_suspect(const double *ms, int units, const double *fwd_sec, int reps,
                         int *no_gain, int *spread)
{
    int *u = hps_malloc((size_t)units * sizeof *u);
    double *dev = hps_malloc((size_t)reps * sizeof *dev);
    for (int k = 0; k < units; k++) u[k] = k + 1;
    *no_gain = hps_fit_parallel_fraction(u, ms, units) <= 0;
    double med = hps_median(fwd_sec, reps);
    for (int i = 0; i < reps; i++) dev[i] = fwd_sec[i] > med ? fwd_sec[i] - med : med - fwd_sec[i];
    *spread = med > 0 && hps_median(dev, reps) / med > HPS_SCALING_SPREAD_BOUND;
    free(dev);
    free(u);
}

/* One warning when the fc layers' scaling looks like noise (embeddings and
 * concat are memory-bound and may truly not scale; layers under 0.05 ms are
 * overhead, not parallel work): the planner would scale units of other
 * thread counts on it. */
static void warn_unreliable_scaling(const hps_model *m, const char *id, const samples *s,
                                    const double *scale, int units)
{
    int zero = 0, spread = 0, fc = 0;
    for (int l = 0; l < s->n_layers; l++) {
        const double *ms = scale + (size_t)l * units;
        if (m->layers[l].kind != HPS_LAYER_FC || ms[0] < 0.05) continue;
        int z, w;
        hps_scaling_suspect(ms, units, s->fwd + (size_t)l * s->reps, s->reps, &z, &w);
        fc++, zero += z, spread += w;
    }
    if (zero || spread)
        hps_log(2, "%s: warning: %s: thread scaling unreliable: %d of %d fc layers gain nothing from "
                   "more threads, %d spread over %.0f%% (a busy machine?); hps-plan scales CPU "
                   "units by these fractions\n",
                hps_progname(), id, zero, fc, spread, HPS_SCALING_SPREAD_BOUND * 100);
}

/* ---- the batch --------------------------------------------------------------- */

/* A layer's time at B and B / 2 samples at each thread count, and the
 * share of its time at B that fewer samples do not shorten (calls, thread
 * start-up, a matrix product's ramp-up: hps_fixed_fraction), which hps-plan
 * charges to every data-parallel unit whole, at the unit's threads
 * (fixed: n of them, the caller's). */
static hps_profile_batch_out batch_scaling_of(int batch, const int *threads, int n, const double *full_ms,
                                              const double *half_ms, double *fixed)
{
    for (int k = 0; k < n; k++) fixed[k] = hps_fixed_fraction(full_ms[k], half_ms[k]);
    return (hps_profile_batch_out){.n = n, .samples = batch, .units = threads, .full_ms = full_ms,
                                   .half_ms = half_ms, .fixed_fraction = fixed};
}

/* ---- the spread -------------------------------------------------------------- */

/* The relative interquartile range of n values: (q3 - q1) / median, each
 * quartile the median of its half (Tukey's hinges); 0 for fewer than 4. */
static double interquartile_range(const double *v, int n, double *median)
{
    double *t = hps_malloc((size_t)n * sizeof *t);
    memcpy(t, v, (size_t)n * sizeof *t);
    hps_sort_doubles(t, n);
    int half = (n + 1) / 2; /* the lower half holds the median when n is odd */
    double q1 = hps_median(t, half), q3 = hps_median(t + n - half, half);
    *median = hps_median(t, n);
    free(t);
    return q3 - q1;
}

double hps_profile_spread(const double *v, int n)
{
    if (n < 4) return 0;
    double med, iqr = interquartile_range(v, n, &med);
    return med > 0 ? iqr / med : 0;
}

int hps_profile_spread_wide(double spread) { return spread > HPS_PROFILE_SPREAD_BOUND; }

void hps_profile_warn_spread(const char *id, const char *what, double spread, const char *over, int runs,
                             const char *more)
{
    hps_log(2, "%s: warning: %s: %s spread %.0f%% (interquartile range over %s, %d runs%s): too wide to plan "
               "on (a busy machine?)\n",
            hps_progname(), id, what, 100 * spread, over, runs, more);
}

/* The differences' spread is set against b, not against their own median:
 * a difference near 0 (rows in device memory that cost nothing) would have
 * any noise spread without bound, while what a plan suffers is the step it
 * is added to moving. */
hps_profile_paired hps_profile_paired_of(const double *a_sec, const double *b_sec, int n)
{
    hps_profile_paired p = {.pairs = n};
    if (n < 1) return p;
    double *d = hps_malloc((size_t)n * sizeof *d);
    for (int i = 0; i < n; i++) d[i] = b_sec[i] - a_sec[i];
    double med_d, med_b = hps_median(b_sec, n), iqr = interquartile_range(d, n, &med_d);
    free(d);
    p.ms = med_d * 1e3;
    p.spread = n >= 4 && med_b > 0 ? iqr / med_b : 0;
    p.wide = hps_profile_spread_wide(p.spread) && iqr * 1e3 >= HPS_PROFILE_SPREAD_MIN_MS;
    return p;
}

hps_profile_paired hps_profile_paired_per(const double *a_sec, const double *b_sec, int n, double events)
{
    hps_profile_paired p = hps_profile_paired_of(a_sec, b_sec, n);
    p.ms = events > 0 ? p.ms / events : 0;
    return p;
}

/* A layer's forward+backward seconds over the repetitions: its spread. */
static double layer_spread(const samples *s, int l)
{
    double *both = hps_malloc((size_t)s->reps * sizeof *both);
    double r = hps_profile_spread(both, layer_both(s, l, both));
    free(both);
    return r;
}

/* One line when a layer that weighs in the step (at least
 * SPREAD_WEIGHT of the layers' time, and HPS_PROFILE_SPREAD_MIN_MS: shorter ones are
 * the clock's and the call's noise, not work) spread past
 * HPS_PROFILE_SPREAD_BOUND: a plan made on it may be off by as much. */
#define SPREAD_WEIGHT 0.05
static void warn_spread(const hps_model *m, const char *id, const samples *s, const double *spread)
{
    double total = 0, worst = 0;
    int worst_l = -1, wide = 0;
    for (int l = 0; l < s->n_layers; l++)
        total += hps_median(s->fwd + l * s->reps, s->reps) + hps_median(s->bwd + l * s->reps, s->reps);
    for (int l = 0; l < s->n_layers; l++) {
        double t = hps_median(s->fwd + l * s->reps, s->reps) + hps_median(s->bwd + l * s->reps, s->reps);
        if (t < SPREAD_WEIGHT * total || t * 1e3 < HPS_PROFILE_SPREAD_MIN_MS || !hps_profile_spread_wide(spread[l]))
            continue;
        wide++;
        if (spread[l] > worst) worst = spread[l], worst_l = l;
    }
    if (!wide) return;
    char what[160], more[64];
    snprintf(what, sizeof what, "layer '%.100s' times", m->layers[worst_l].name);
    snprintf(more, sizeof more, "; %d layer(s) over %.0f%%", wide, 100 * HPS_PROFILE_SPREAD_BOUND);
    hps_profile_warn_spread(id, what, worst, "median", s->reps, more);
}

/* ---- JSON -------------------------------------------------------------------- */

void hps_profile_layer_measured(hps_profile_layer_out *L, const hps_model *m, int l, int batch,
                                const double *fwd_sec, const double *bwd_sec, int reps)
{
    *L = (hps_profile_layer_out){.index = l, .name = m->layers[l].name,
                                 .type = hps_layer_kind_names[m->layers[l].kind], .source = "measured",
                                 .forward_ms = hps_profile_timing_of(fwd_sec, reps),
                                 .backward_ms = hps_profile_timing_of(bwd_sec, reps), .energy_j = NAN};
    hps_layer_costs(m, l, batch, &L->cost);
}

static json_t *layer_json(const hps_model *m, int l, int batch, const samples *s, hps_profile_scaling scaling,
                          hps_profile_batch_out batch_scaling, int have_energy, double spread)
{
    hps_profile_layer_out out;
    hps_profile_layer_measured(&out, m, l, batch, s->fwd + l * s->reps, s->bwd + l * s->reps, s->reps);
    out.scaling = scaling;
    out.batch_scaling = batch_scaling;
    if (have_energy)
        out.energy_j = (sum(s->fwd_j + l * s->reps, s->reps) + sum(s->bwd_j + l * s->reps, s->reps)) / s->reps;
    json_t *j = hps_profile_layer_json(&out);
    json_object_set_new(j, "spread", hps_json_real(spread));
    return j;
}

static double layers_sum_ms(const samples *s)
{
    double total = hps_median(s->overhead, s->reps);
    for (int l = 0; l < s->n_layers; l++)
        total += hps_median(s->fwd + l * s->reps, s->reps) + hps_median(s->bwd + l * s->reps, s->reps);
    return total * 1e3;
}

/* ---- the machine's figures --------------------------------------------------- */

/* The micro-benchmarks depend on the CPU and the threads, not on the
 * model, and cost about two CPU-seconds: a process measures them once a
 * thread count (hps-profile's engine probes reuse its device's), or takes
 * them from an earlier profile of this machine (--machine).  The gather's
 * rate is of the model's embedding width when measured here (dim), of the
 * file's model's when reused (dim 0: any). */
#define MACHINES_MAX 64
typedef struct {
    int threads, dim;
    double sgemm_gflops, triad_gbps, gather_mrows_per_s, handoff_us;
    char *from; /* NULL: measured by this process */
} machine_figures;
static machine_figures machines[MACHINES_MAX];
static int n_machines;

static machine_figures *machine_find(int threads, int dim)
{
    for (int i = 0; i < n_machines; i++)
        if (machines[i].threads == threads && (machines[i].dim == 0 || machines[i].dim == dim)) return &machines[i];
    return NULL;
}

static void machine_add(const machine_figures *f)
{
    machine_figures *at = machine_find(f->threads, f->dim);
    if (!at && n_machines == MACHINES_MAX) return; /* measured again: only slower */
    if (!at) at = &machines[n_machines++];
    free(at->from);
    *at = *f;
    at->from = f->from ? hps_strdup(f->from) : NULL;
}

void hps_profile_machine_use(const hps_profile_device *d, const char *from)
{
    machine_add(&(machine_figures){.threads = d->threads, .sgemm_gflops = d->sgemm_gflops,
                                   .triad_gbps = d->triad_gbps, .gather_mrows_per_s = d->gather_mrows_per_s,
                                   .handoff_us = d->handoff_us, .from = (char *)from});
}

/* The measured CPU device of p on threads whose four figures are there. */
static const hps_profile_device *machine_device(const hps_profile *p, int threads, const char *id, hps_error *err)
{
    static const char *const fields[] = {"sgemm_gflops", "triad_gbps", "gather_mrows_per_s", "handoff_us"};
    for (int i = 0; i < p->n_devices; i++) {
        const hps_profile_device *d = &p->devices[i];
        if (d->is_gpu || d->estimated || d->threads != threads) continue;
        const double v[4] = {d->sgemm_gflops, d->triad_gbps, d->gather_mrows_per_s, d->handoff_us};
        for (int k = 0; k < 4; k++)
            if (!(v[k] > 0))
                return hps_fail(err, HPS_EXIT_USAGE, "%s: device '%s': %s is missing (a measured CPU device's "
                                "sgemm_gflops, triad_gbps, gather_mrows_per_s and handoff_us are the machine's figures)",
                                p->name, d->id, fields[k]), NULL;
        return d;
    }
    hps_fail(err, HPS_EXIT_USAGE, "%s: no measured CPU device of %d threads to take %s's machine figures from "
             "(profile this machine with -D cpu:%d first)", p->name, threads, id, threads);
    return NULL;
}

int hps_profile_machine_load(const char *path, const hps_device_spec *devs, int n, hps_error *err)
{
    hps_profile *p = hps_profile_load(path, err);
    if (!p) return -1;
    char here[256], shown[128];
    hps_cpu_model_name(here, sizeof here);
    int rc = 0, warned = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (devs[i].kind != HPS_DEVICE_CPU) continue;
        const hps_profile_device *d = machine_device(p, hps_device_threads(&devs[i]), devs[i].id, err);
        if (!d) rc = -1;
        else hps_profile_machine_use(d, p->name);
        if (d && !warned && d->name && strcmp(d->name, here) != 0)
            warned = 1, hps_log(2, "%s: warning: %s: its CPU is '%s', this machine's '%s': its figures may not "
                                   "be this machine's\n",
                                hps_progname(), p->name, hps_printable(d->name, shown, sizeof shown), here);
    }
    hps_profile_free(p);
    return rc;
}

void hps_profile_device_measured(hps_profile_device_out *d, char *name, char *host, const hps_device_spec *dev,
                                 int threads, int embed_dim)
{
    double mem = 0;
    memset(host, 0, 256);
    strcpy(host, "unknown");
    gethostname(host, 255);
    if (dev->kind == HPS_DEVICE_CPU) {
        hps_cpu_model_name(name, 256);
        mem = hps_host_memory_bytes();
    } else if (hps_cuda_device_info(dev->ordinal, name, 256, &mem) != 0) {
        snprintf(name, 256, "unknown GPU");
    }
    *d = (hps_profile_device_out){.id = dev->id, .is_gpu = dev->kind == HPS_DEVICE_CUDA, .name = name, .host = host,
                                  .source = "measured", .threads = dev->kind == HPS_DEVICE_CPU ? threads : 0,
                                  .memory_bytes = mem, .sgemm_gflops = NAN, .triad_gbps = NAN,
                                  .gather_mrows_per_s = NAN, .handoff_us = NAN, .step_j = NAN};
    if (dev->kind == HPS_DEVICE_CPU) { /* GPU rates would need device-side benchmarks */
        d->blas_core = hps_blas_corename();
        d->clock_ghz = hps_cpu_clock_ghz();
        const machine_figures *f = machine_find(threads, embed_dim);
        machine_figures here;
        if (!f) {
            here = (machine_figures){.threads = threads, .dim = embed_dim,
                                     .sgemm_gflops = hps_bench_sgemm_gflops(1024, 5),
                                     .triad_gbps = hps_bench_triad_gbps(1 << 24, 5),
                                     .gather_mrows_per_s = hps_bench_gather_mrows(embed_dim, 1 << 20, 5),
                                     .handoff_us = hps_bench_handoff_us(2000, 5)};
            machine_add(&here);
            f = &here;
        }
        d->sgemm_gflops = f->sgemm_gflops;
        d->triad_gbps = f->triad_gbps;
        d->gather_mrows_per_s = f->gather_mrows_per_s;
        d->handoff_us = f->handoff_us;
        d->machine_from = f->from;
    }
}

static void progress(const hps_profile_opts *o, const char *id, const char *what)
{
    if (o->progress) hps_log(2, "%s: %s: %s\n", hps_progname(), id, what);
}

static const hps_backend *device_backend(const hps_device_spec *dev, int *threads,
                                         hps_error *err)
{
    if (dev->kind == HPS_DEVICE_CUDA) {
        *threads = 1;
        return hps_backend_cuda(dev->ordinal, err);
    }
    *threads = hps_device_threads(dev);
    hps_set_threads(*threads);
    return hps_backend_cpu();
}

/* Bytes the profiling net allocates with at most cap rows per slot: tables
 * and accumulators, parameters with gradients and Adam's moments, and the
 * activations with their gradients. */
static double net_bytes(const hps_model *m, int batch, int64_t cap, double *fixed)
{
    double tables = 0, rest = 4.0 * (double)m->n_params * sizeof(float);
    for (int l = 0; l < m->n_layers; l++) {
        const hps_layer *L = &m->layers[l];
        rest += 2.0 * batch * (L->in_width + L->out_width) * sizeof(float);
        for (int i = 0; hps_layer_has_table(L) && i < L->n_slots; i++) {
            double rows = (double)m->slots[L->slots[i]].rows;
            tables += 2.0 * (rows < (double)cap ? rows : (double)cap) * L->dim * sizeof(float);
        }
    }
    *fixed = rest;
    return rest + tables;
}

/* Huge tables are profiled on a sample of their rows: the cap shrinks until
 * the net fits half of this machine's memory; it says so.  Without room
 * even for one row per slot, an error instead of the allocator's abort. */
static int fit_rows(const hps_model *m, int batch, int64_t *cap, const char *id, hps_error *err)
{
    double budget = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / 2, fixed;
    int64_t c = *cap;
    while (c > 1 && net_bytes(m, batch, c, &fixed) > budget) c /= 2;
    double need = net_bytes(m, batch, c, &fixed);
    if (need > budget)
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "%s: %s: profiling needs %.1f GiB (parameters, optimizer state, activations of a "
                        "batch of %d), more than the %.1f GiB it may use (half this machine's memory)",
                        m->path, id, need / 1073741824.0, batch, budget / 1073741824.0);
    if (c < *cap)
        hps_log(2, "%s: %s: tables sampled to %lld rows per slot (%.1f GiB) to fit half this machine's memory\n",
                hps_progname(), id, (long long)c, need / 1073741824.0);
    *cap = c;
    return 0;
}

json_t *hps_profile_measure(const hps_model *m, const hps_device_spec *dev,
                            const hps_profile_opts *o, hps_error *err)
{
    int threads;
    const int batch = o->batch ? o->batch : m->batch, L = m->n_layers;
    int64_t cap = o->table_rows_cap;
    if (fit_rows(m, batch, &cap, dev->id, err)) return NULL;
    const hps_backend *be = device_backend(dev, &threads, err);
    if (!be) return NULL;
    progress(o, dev->id, "device benchmarks");
    hps_profile_device_out out;
    char name[256], host[256];
    hps_profile_device_measured(&out, name, host, dev, threads, hps_model_embedding_dim(m));
    char reason[256] = "not requested (use --energy)";
    hps_energy *energy = o->energy ? hps_energy_open(dev, reason, sizeof reason) : NULL;
    bench b = {.net = hps_net_create(m, be, batch, cap),
               .batch = hps_batch_synth(m, batch, o->seed), .rows = batch, .opt = hps_optim_default(),
               .energy = energy};
    hps_net_init(b.net, o->seed);
    hps_net_set_dropout(b.net, 1, o->seed); /* dropout timed as training runs it */
    progress(o, dev->id, "layers");
    samples *s = measure(&b, o->reps, REPS_MAX, o->warmup, o->min_seconds > 0, o->min_seconds, 1);
    /* thread scaling at 1..threads, else the device's threads alone */
    int units = dev->kind == HPS_DEVICE_CPU && o->scaling ? threads : 1;
    int *counts = hps_malloc((size_t)units * sizeof *counts);
    double *fixed = hps_malloc((size_t)units * sizeof *fixed);
    for (int k = 0; k < units; k++) counts[k] = units > 1 ? k + 1 : threads;
    progress(o, dev->id, "scaling and half batch");
    double *scale = units > 1 ? hps_calloc((size_t)L * units, sizeof *scale) : NULL;
    double *half = batch >= 2 ? hps_calloc((size_t)L * units, sizeof *half) : NULL;
    if (scale || half) layer_ms(&b, counts, units, o, scale, half);
    hps_set_threads(threads);
    if (scale) warn_unreliable_scaling(m, dev->id, s, scale, units);
    double *spread = hps_malloc((size_t)L * sizeof *spread);
    for (int l = 0; l < L; l++) spread[l] = layer_spread(s, l);
    warn_spread(m, dev->id, s, spread);
    json_t *layers = json_array();
    for (int l = 0; l < L; l++) {
        double one[1] = {(hps_median(s->fwd + l * s->reps, s->reps) +
                          hps_median(s->bwd + l * s->reps, s->reps)) * 1e3};
        const double *full = scale ? scale + (size_t)l * units : one;
        hps_profile_scaling sc = scaling_of(full, units, dev->kind == HPS_DEVICE_CUDA);
        hps_profile_batch_out bs = {0};
        if (half) bs = batch_scaling_of(batch, counts, units, full, half + (size_t)l * units, fixed);
        json_array_append_new(layers, layer_json(m, l, batch, s, sc, bs, energy != NULL, spread[l]));
        free(sc.units);
    }
    free(spread);
    free(half);
    free(fixed);
    free(counts);
    out.overhead_ms = hps_profile_timing_of(s->overhead, s->reps);
    out.step_ms = hps_profile_timing_of(s->step, s->reps);
    out.layers_sum_ms = layers_sum_ms(s);
    if (energy) {
        out.energy_source = hps_energy_source(energy);
        out.step_j = hps_median(s->step_j, s->reps);
    } else {
        out.energy_reason = reason;
    }
    json_t *dev_json = hps_profile_device_json(&out, layers);
    json_object_set_new(dev_json, "repetitions", json_integer(s->reps));
    free(scale);
    samples_free(s);
    hps_energy_close(energy);
    hps_batch_free((hps_batch *)b.batch);
    hps_net_free(b.net);
    return dev_json;
}
