/* From files to numbers: the profiles (hps-profile(5)) of the devices the
 * cluster's types correspond to, reduced with the model into a plan_problem. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "plan/hps_plan.h"
#include "profile/hps_profile.h"

const char *const plan_objective_names[] = {"cost", "time", "energy", "edp", "cost-per-hour", NULL};

/* ---- the problem ---------------------------------------------------------- */

plan_problem *plan_problem_new(int n_layers, int n_types)
{
    HPS_CHECK(n_layers > 0 && n_types > 0 && n_types <= PLAN_MAX_TYPES);
    plan_problem *p = hps_calloc(1, sizeof *p);
    size_t L = (size_t)n_layers, LT = L * (size_t)n_types;
    p->n_layers = n_layers;
    p->n_types = n_types;
    p->layer_names = hps_calloc(L, sizeof *p->layer_names);
    p->type_names = hps_calloc((size_t)n_types, sizeof *p->type_names);
    p->kind = hps_calloc(L, sizeof *p->kind);
    p->flops = hps_calloc(L, sizeof(double));
    p->bytes_in = hps_calloc(L, sizeof(double));
    p->bytes_out = hps_calloc(L, sizeof(double));
    p->cut_bytes = hps_calloc(L + 1, sizeof(double));
    p->param_bytes = hps_calloc(L, sizeof(double));
    p->sparse_bytes = hps_calloc(L, sizeof(double));
    p->sparse_rows = hps_calloc(L, sizeof(double));
    p->t1_ms = hps_calloc(LT, sizeof(double));
    p->par = hps_calloc(LT, sizeof(double));
    p->fixed = hps_calloc(LT, sizeof(double));
    p->beside_ratio = hps_calloc(LT, sizeof(double));
    p->beside_fixed = hps_calloc(LT, sizeof(double));
    p->fwd = hps_malloc(LT * sizeof(double));
    for (size_t i = 0; i < LT; i++) p->fwd[i] = 0.5;
    p->fits = hps_malloc(LT);
    memset(p->fits, 1, LT);
    p->work_bytes = hps_calloc(L, sizeof(double));
    p->table_bytes = hps_calloc(L, sizeof(double));
    p->rows = hps_calloc(L, sizeof(double));
    p->row_bytes = hps_calloc(L, sizeof(double));
    p->hot = hps_calloc(L, sizeof(double));
    for (int t = 0; t < n_types; t++) p->units_per_instance[t] = 1;
    p->server_price = p->server_power = 0;
    p->server_bpms = 10 * PLAN_GBPS_TO_BPMS;
    p->max_servers = PLAN_MAX_SERVERS;
    p->server_type = -1;
    p->exchange_bytes_share = p->exchange_rows_share = 1;
    p->pre_serial = hps_calloc((L + 1) * (size_t)n_types, sizeof(double));
    p->pre_parallel = hps_calloc((L + 1) * (size_t)n_types, sizeof(double));
    p->pre_emb_serial = hps_calloc((L + 1) * (size_t)n_types, sizeof(double));
    p->pre_emb_parallel = hps_calloc((L + 1) * (size_t)n_types, sizeof(double));
    p->pre_fixed = hps_calloc((L + 1) * (size_t)n_types, sizeof(double));
    p->pre_emb_fixed = hps_calloc((L + 1) * (size_t)n_types, sizeof(double));
    p->pre_fwd = hps_calloc((L + 1) * (size_t)n_types, sizeof(double));
    p->host_type = -1;
    p->pre_param = hps_calloc(L + 1, sizeof(double));
    p->pre_sparse = hps_calloc(L + 1, sizeof(double));
    p->pre_rows = hps_calloc(L + 1, sizeof(double));
    p->pre_emb_out = hps_calloc(L + 1, sizeof(double));
    p->pre_work = hps_calloc(L + 1, sizeof(double));
    p->pre_table = hps_calloc(L + 1, sizeof(double));
    p->epochs = 1;
    p->samples = 1e8;
    return p;
}

void plan_problem_prepare(plan_problem *p)
{
    int L = p->n_layers, T = p->n_types;
    for (int t = 0; t < T; t++) {
        double *s = p->pre_serial + (size_t)t * (L + 1), *q = p->pre_parallel + (size_t)t * (L + 1);
        double *es = p->pre_emb_serial + (size_t)t * (L + 1), *eq = p->pre_emb_parallel + (size_t)t * (L + 1);
        double *f = p->pre_fixed + (size_t)t * (L + 1), *ef = p->pre_emb_fixed + (size_t)t * (L + 1);
        double *fw = p->pre_fwd + (size_t)t * (L + 1);
        s[0] = q[0] = es[0] = eq[0] = f[0] = ef[0] = fw[0] = 0;
        for (int l = 0; l < L; l++) {
            double t1 = p->t1_ms[l * T + t], a = p->par[l * T + t], x = t1 * p->fixed[l * T + t];
            int emb = p->kind[l] == HPS_LAYER_EMBEDDING;
            s[l + 1] = s[l] + t1 * (1 - a);
            q[l + 1] = q[l] + t1 * a;
            es[l + 1] = es[l] + emb * t1 * (1 - a);
            eq[l + 1] = eq[l] + emb * t1 * a;
            f[l + 1] = f[l] + x;
            ef[l + 1] = ef[l] + emb * x;
            fw[l + 1] = fw[l] + t1 * p->fwd[l * T + t];
        }
    }
    p->pre_param[0] = p->pre_sparse[0] = p->pre_rows[0] = p->pre_work[0] = p->pre_table[0] = 0;
    p->pre_emb_out[0] = 0;
    for (int l = 0; l < L; l++) {
        p->pre_param[l + 1] = p->pre_param[l] + p->param_bytes[l];
        p->pre_sparse[l + 1] = p->pre_sparse[l] + p->sparse_bytes[l];
        p->pre_rows[l + 1] = p->pre_rows[l] + p->sparse_rows[l];
        p->pre_emb_out[l + 1] = p->pre_emb_out[l] + (p->kind[l] == HPS_LAYER_EMBEDDING) * p->bytes_out[l];
        p->pre_work[l + 1] = p->pre_work[l] + p->work_bytes[l];
        p->pre_table[l + 1] = p->pre_table[l] + p->table_bytes[l];
    }
    plan_problem_cache_curves(p);
}

void plan_problem_chain_cuts(plan_problem *p)
{
    for (int c = 1; c < p->n_layers; c++) p->cut_bytes[c] = 2 * p->bytes_out[c - 1];
}

void plan_problem_model_cuts(plan_problem *p, const hps_model *m)
{
    for (int c = 1; c < m->n_layers; c++) {
        int act, grad;
        hps_model_cut_widths(m, c, &act, &grad);
        p->cut_bytes[c] = p->batch * (act + 1 + grad) * sizeof(float);
    }
    plan_problem_model_passes(p, m);
}

void plan_problem_free(plan_problem *p)
{
    if (!p) return;
    free(p->layer_names);
    free(p->type_names);
    free(p->kind);
    free(p->flops);
    free(p->bytes_in);
    free(p->bytes_out);
    free(p->cut_bytes);
    free(p->pass_bytes);
    free(p->param_bytes);
    free(p->sparse_bytes);
    free(p->sparse_rows);
    free(p->t1_ms);
    free(p->par);
    free(p->fixed);
    free(p->fwd);
    free(p->beside_ratio);
    free(p->beside_fixed);
    free(p->fits);
    free(p->work_bytes);
    free(p->table_bytes);
    free(p->row_bytes);
    free(p->rows);
    free(p->hot);
    free(p->slots);
    plan_problem_free_curves(p);
    free(p->pre_serial);
    free(p->pre_parallel);
    free(p->pre_emb_serial);
    free(p->pre_emb_parallel);
    free(p->pre_fixed);
    free(p->pre_emb_fixed);
    free(p->pre_fwd);
    free(p->pre_param);
    free(p->pre_sparse);
    free(p->pre_rows);
    free(p->pre_emb_out);
    free(p->pre_work);
    free(p->pre_table);
    free(p);
}

/* The device's exchange probe (hps-profile(5)); none (a profile from
 * before it, a GPU, a build without Open MPI): not charged.  Its rows and
 * bytes are the data's, not the device's: the first device's count
 * (*rows, *bytes still 0 before it). */
static void take_exchange(const hps_profile_device *d, plan_problem *p, int t, double *rows, double *bytes)
{
    if (!d->exchange.present) return;
    p->exchange_worker_ms[t] = d->exchange.worker_ms;
    p->exchange_server_ms[t] = d->exchange.server_ms;
    if (!(*rows > 0)) *rows = d->exchange.rows, *bytes = d->exchange.bytes;
}

/* What the profiled exchange sent against what every lookup's row both
 * ways would be (the model's lookups at the profile's batch; after
 * plan_problem_prepare, whose prefix sums hold them). */
static void exchange_shares(plan_problem *p, double rows, double bytes)
{
    double lookups = p->pre_rows[p->n_layers], row_bytes = p->pre_sparse[p->n_layers];
    if (!(rows > 0 && bytes > 0 && lookups > 0 && row_bytes > 0)) return;
    p->exchange_rows_share = rows / lookups;
    p->exchange_bytes_share = bytes / (2 * row_bytes);
}

/* A layer's batch_scaling (hps-profile(5)): the share of its time that
 * fewer samples do not shorten, measured at the most threads up to
 * `threads` (else the fewest); 0 when the profile has none. */
static double fixed_at(const hps_profile_batch_scaling *b, int threads)
{
    int pick = 0;
    for (int i = 0; i < b->n; i++)
        if (b->units[i] <= threads) pick = i;
    return b->n ? b->fixed_fraction[pick] : 0;
}

/* One layer of a device: time of a batch on one unit, the parallel
 * fraction, and the share of the time that fewer samples do not shorten
 * on a unit of `threads`. */
static int take_layer(plan_problem *p, int t, const hps_profile_layer *L, const hps_model *m, int l, int threads,
                      const char *dctx, hps_error *err)
{
    if (strcmp(L->name, m->layers[l].name) != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%.500s: layer %d '%s': profile names it '%s'", dctx, l,
                        m->layers[l].name, L->name);
    size_t i = (size_t)l * p->n_types + t;
    p->t1_ms[i] = L->forward_ms + L->backward_ms;
    p->par[i] = L->scaling.parallel_fraction;
    p->fwd[i] = p->t1_ms[i] > 0 ? L->forward_ms / p->t1_ms[i] : 0.5;
    p->fixed[i] = fixed_at(&L->batch_scaling, threads);
    return 0;
}

/* The layer's forward+backward ms that the profile's scaling measured at
 * `threads`, or 0 when it did not time that count. */
static double scaling_ms_at(const hps_profile_layer *L, int threads)
{
    for (int i = 0; i < L->scaling.n; i++)
        if (L->scaling.units[i] == threads && L->scaling.ms[i] > 0) return L->scaling.ms[i];
    return 0;
}

double plan_amdahl_ratio(double a, double to, double from)
{
    return ((1 - a) + a / to) / ((1 - a) + a / from);
}

/* A CPU unit of n threads, profiled on p: each layer's time scales by
 * Amdahl's law with its fitted parallel fraction a,
 * ((1 - a) + a / n) / ((1 - a) + a / p).  Where every fraction is 0 (not
 * measured, or a busy machine) the profiled times stay, and hps-plan says so.
 * A type of `threads` that the scaling timed takes that time, the profile's
 * own thread count included, so that the types of one device compare
 * figures of one pass (the Amdahl law applied to the main pass's times
 * mixed two passes: mlp-784's one-thread layers came out at 2.0 to 2.4 ms
 * where that pass measured 1.9 to 2.0, and a type at the profile's count
 * kept the main pass's medians while its neighbours took the scaling's);
 * other counts scale by the law.  The unit's layers on one core fewer, a
 * server beside it taking the other (plan_law_colocate), are the scaling's
 * figures there too, where it timed them (beside_ratio, beside_fixed). */
static void scale_to_threads(plan_problem *p, int t, const plan_rtype *r, const hps_profile_device *d,
                             const char *file)
{
    int T = p->n_types, any = 0;
    long long measured = d->threads;
    if (measured <= 0) return;
    for (int l = 0; l < p->n_layers; l++) {
        double a = p->par[l * T + t], at = scaling_ms_at(&d->layers[l], r->threads);
        if (at > 0)
            p->t1_ms[l * T + t] = at;
        else
            p->t1_ms[l * T + t] *= plan_amdahl_ratio(a, r->threads, (double)measured);
        any |= a > 0 || at > 0;
        /* with a server beside it, on one core fewer (plan_law_colocate) */
        double less = r->threads > 1 ? scaling_ms_at(&d->layers[l], r->threads - 1) : 0;
        if (less > 0 && p->t1_ms[l * T + t] > 0) {
            p->beside_ratio[l * T + t] = less / p->t1_ms[l * T + t];
            p->beside_fixed[l * T + t] = fixed_at(&d->layers[l].batch_scaling, r->threads - 1);
        }
    }
    if (measured == r->threads) return; /* nothing scaled: nothing to say */
    if (!any)
        hps_log(2, "hps-plan: %s: device '%s' has no fitted parallel fraction: resource '%s' (%d threads) "
                   "takes its times on %lld threads as they are\n", file, r->device, r->name, r->threads, measured);
    else
        hps_log(3, "hps-plan: resource '%s': times profiled on %lld threads taken at its %d where the scaling "
                   "timed them, else scaled by each layer's parallel fraction\n", r->name, measured, r->threads);
}

/* The profile of cluster type t's device must be of this model, at the
 * batch of the others. */
static int check_model(const hps_profile *pf, const hps_model *m, int *batch, hps_error *err)
{
    if (strcmp(pf->digest, m->digest) != 0)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: profiled model %.15s... is not %s (%.15s...); profile this model again",
                        pf->name, pf->digest, m->path, m->digest);
    if (*batch && *batch != pf->batch)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: batch %d differs from another profile's %d", pf->name,
                        pf->batch, *batch);
    *batch = pf->batch;
    return 0;
}

/* Fills column t of the problem from the profiled device of cluster type t;
 * exchange[2]: the rows and bytes of the first exchange read (take_exchange). */
static int read_device(plan_problem *p, const hps_model *m, const hps_cluster *c,
                       const hps_profiles *ps, int t, int *batch, double *exchange, hps_error *err)
{
    const plan_rtype *r = &c->types[t];
    const hps_profile *pf;
    const hps_profile_device *d = hps_profiles_find(ps, r->device, &pf);
    if (!d) {
        char *sheet = hps_spec_sheet_find(r->device, c->path);
        if (!sheet)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: resource '%s': device '%s' is in no profile",
                            c->path, r->name, r->device);
        /* the fix is known: a profile with the device estimated from its sheet */
        hps_fail(err, HPS_EXIT_USAGE,
                 "%s: resource '%s': device '%s' is in no profile; estimate it from its spec sheet: "
                 "hps-profile -m %s --estimate %s -o PROFILE, then add -p PROFILE",
                 c->path, r->name, r->device, m->path ? m->path : "MODEL", sheet);
        free(sheet);
        return -1;
    }
    if (check_model(pf, m, batch, err)) return -1;
    char ctx[512];
    snprintf(ctx, sizeof ctx, "%s: device '%s'", pf->name, r->device);
    if (d->is_gpu != (r->kind == PLAN_GPU))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: kind %s but resource '%s' in %s is %s", ctx,
                        d->is_gpu ? "gpu" : "cpu", r->name, c->path, r->kind == PLAN_CPU ? "cpu" : "gpu");
    if (d->n_layers != m->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: layers must hold the model's %d layers", ctx, m->n_layers);
    /* a unit's threads: the type's, else those it was profiled on (0 for a GPU: the first entry) */
    int threads = r->kind == PLAN_CPU && r->threads_given ? r->threads : d->threads;
    for (int l = 0; l < m->n_layers; l++)
        if (take_layer(p, t, &d->layers[l], m, l, threads, ctx, err)) return -1;
    if (r->kind == PLAN_CPU && r->threads_given) scale_to_threads(p, t, r, d, pf->name);
    /* absent or null: 0, the copy is not charged; the CPU backend's copies at its memory's rate */
    p->pcie_bpms[t] = hps_profile_host_link_gbps(d) * 1e6;
    p->reduce_bpms[t] = d->triad_gbps * 1e6;
    p->read_ms[t] = d->read_ms;          /* absent (profiled without --data): not charged */
    p->read_cpu_ms[t] = d->read_cpu_ms;  /* absent: not charged */
    p->handoff_ms[t] = d->handoff_us / 1000; /* absent or null: hand-offs are not charged */
    p->device_rows_ms[t] = d->device_rows_ms; /* absent: not charged */
    p->row_miss_ms[t] = d->device_row_miss_us / 1000; /* absent: a miss's bytes alone */
    p->link_in_memory[t] = d->is_gpu && !(d->pcie_gbps > 0) && p->pcie_bpms[t] > 0;
    take_exchange(d, p, t, &exchange[0], &exchange[1]);
    p->overhead_ms[t] = d->overhead_ms;
    return 0;
}

plan_problem *plan_problem_build(const hps_model *m, const hps_cluster *c,
                                 const hps_profiles *ps, hps_error *err)
{
    plan_problem *p = plan_problem_new(m->n_layers, c->n_types);
    int batch = 0;
    double exchange[2] = {0, 0};
    for (int t = 0; t < c->n_types; t++) {
        if (read_device(p, m, c, ps, t, &batch, exchange, err)) {
            plan_problem_free(p);
            return NULL;
        }
        const plan_rtype *r = &c->types[t];
        p->type_names[t] = r->name;
        p->price[t] = r->price_per_hour;
        p->power[t] = r->power_w;
        p->nic_bpms[t] = r->nic_gbps * PLAN_GBPS_TO_BPMS;
        p->nic_ms[t] = r->nic_latency_us / 1000.0;
        p->max_units[t] = r->max_units;
        p->units_per_instance[t] = r->units_per_instance;
        p->mem_bytes[t] = r->mem_bytes;
        p->is_gpu[t] = r->kind == PLAN_GPU;
        /* a unit's host, where servers may live beside it (hps-cluster(5)) */
        p->host_mem[t] = r->kind == PLAN_GPU ? r->host_mem_bytes : r->mem_bytes;
        p->cores[t] = r->threads;
    }
    p->server_bpms = c->server_gbps * PLAN_GBPS_TO_BPMS;
    p->server_type = c->server_type;
    /* the host CPU of a GPU unit: the servers' type, else the first CPU type */
    p->host_type = c->server_type >= 0 && c->types[c->server_type].kind == PLAN_CPU ? c->server_type : -1;
    for (int t = 0; t < c->n_types && p->host_type < 0; t++)
        if (c->types[t].kind == PLAN_CPU) p->host_type = t;
    if (c->server_type >= 0) {
        const plan_rtype *r = &c->types[c->server_type];
        p->server_mem = r->mem_bytes;
        p->server_price = r->price_per_hour;
        p->server_power = r->power_w;
        p->max_servers = r->max_units < PLAN_MAX_SERVERS ? r->max_units : PLAN_MAX_SERVERS;
        const hps_profile_device *d = hps_profiles_find(ps, r->device, NULL); /* read_device found it */
        p->server_rows_per_ms = d->gather_mrows_per_s * 1e3 / PLAN_SERVER_ROW_PASSES; /* 0 when null */
    }
    for (int i = 0; i < c->n_links; i++) {
        const plan_link *k = &c->links[i];
        p->link_bpms[k->a][k->b] = p->link_bpms[k->b][k->a] = k->gbps * PLAN_GBPS_TO_BPMS;
        p->link_ms[k->a][k->b] = p->link_ms[k->b][k->a] = k->latency_us / 1000.0;
    }
    p->batch = batch;
    for (int l = 0; l < m->n_layers; l++) {
        hps_layer_cost lc;
        hps_layer_costs(m, l, batch, &lc);
        p->layer_names[l] = m->layers[l].name;
        p->kind[l] = (int)m->layers[l].kind;
        p->flops[l] = lc.flops_fwd + lc.flops_bwd;
        p->bytes_in[l] = lc.bytes_in;
        p->bytes_out[l] = lc.bytes_out;
        p->param_bytes[l] = lc.param_bytes;
        p->sparse_bytes[l] = lc.sparse_bytes;
        p->sparse_rows[l] = lc.sparse_rows;
        /* Adam: weights, gradients and two moments (the model's work_bytes counts three) */
        p->work_bytes[l] = lc.work_bytes + lc.param_bytes;
        p->rows[l] = lc.table_bytes / (m->layers[l].kind == HPS_LAYER_EMBEDDING ? m->layers[l].dim * 4.0 : 1);
    }
    plan_problem_model_cuts(p, m);
    plan_problem_key_stats(p, m, NULL);
    plan_problem_tables(p, m);
    exchange_shares(p, exchange[0], exchange[1]);
    return p;
}
