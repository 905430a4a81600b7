/* From files to numbers: the profiles (hps-profile(5)) of the devices the
 * cluster's types correspond to, reduced with the model into a plan_problem. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "plan/hps_plan.h"
#include "profile/hps_profile.h"

const char *const plan_objective_names[] = {"cost", "time", "energy", "edp", NULL};

/* ---- profiles ------------------------------------------------------------- */

typedef struct {
    char *name;
    char digest[72];
    json_t *root;
} profile_file;

struct hps_profiles {
    int n;
    profile_file *files;
};

hps_profiles *hps_profiles_new(void) { return hps_calloc(1, sizeof(hps_profiles)); }

int hps_profiles_count(const hps_profiles *ps) { return ps->n; }
const char *hps_profiles_digest(const hps_profiles *ps, int i) { return ps->files[i].digest; }
const char *hps_profiles_name(const hps_profiles *ps, int i) { return ps->files[i].name; }

void hps_profiles_free(hps_profiles *ps)
{
    if (!ps) return;
    for (int i = 0; i < ps->n; i++) {
        free(ps->files[i].name);
        json_decref(ps->files[i].root);
    }
    free(ps->files);
    free(ps);
}

/* Finds a device by id: its object and the file it came from. */
static json_t *find_device(const hps_profiles *ps, const char *id, int *file)
{
    for (int i = 0; i < ps->n; i++) {
        json_t *devs = json_object_get(ps->files[i].root, "devices"), *d;
        size_t j;
        json_array_foreach(devs, j, d) {
            json_t *v = json_object_get(d, "id");
            if (json_is_string(v) && strcmp(json_string_value(v), id) == 0) {
                if (file) *file = i;
                return d;
            }
        }
    }
    return NULL;
}

/* The profile's own reader (lib/profile) checks the format; here only that
 * no device id appears in two files. */
int hps_profiles_add(hps_profiles *ps, const char *name, const char *text, size_t len,
                     hps_error *err)
{
    json_t *root;
    if (hps_json_loadb(name, text, len, &root, err)) return -1;
    json_t *devs = json_object_get(root, "devices"), *d;
    size_t j;
    if (hps_profile_validate(root, name, err)) goto fail;
    if (json_array_size(devs) == 0) {
        hps_fail(err, HPS_EXIT_USAGE, "%s: devices must be a non-empty array", name);
        goto fail;
    }
    json_array_foreach(devs, j, d) {
        const char *id = json_string_value(json_object_get(d, "id"));
        int other;
        if (find_device(ps, id, &other)) {
            hps_fail(err, HPS_EXIT_USAGE, "%s: device '%s' is also in %s", name, id,
                     ps->files[other].name);
            goto fail;
        }
    }
    ps->files = hps_realloc(ps->files, (size_t)(ps->n + 1) * sizeof *ps->files);
    profile_file *f = &ps->files[ps->n++];
    f->name = hps_strdup(name);
    f->root = root;
    hps_sha256_hex(text, len, f->digest);
    return 0;
fail:
    json_decref(root);
    return -1;
}

/* ---- the problem ---------------------------------------------------------- */

/* Without key statistics (plan_problem_key_stats): PLAN_DEFAULT_SKEW. */
static void default_hits(plan_problem *p, int l)
{
    for (int k = 0; k < PLAN_HIT_POINTS; k++)
        p->hit[(size_t)l * PLAN_HIT_POINTS + k] = pow(10.0, (k - (PLAN_HIT_POINTS - 1)) * PLAN_DEFAULT_SKEW);
}

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
    p->fwd = hps_malloc(LT * sizeof(double));
    for (size_t i = 0; i < LT; i++) p->fwd[i] = 0.5;
    p->fits = hps_malloc(LT);
    memset(p->fits, 1, LT);
    p->work_bytes = hps_calloc(L, sizeof(double));
    p->table_bytes = hps_calloc(L, sizeof(double));
    p->rows = hps_calloc(L, sizeof(double));
    p->hit = hps_calloc(L * PLAN_HIT_POINTS, sizeof(double));
    p->hot = hps_calloc(L, sizeof(double));
    for (int l = 0; l < n_layers; l++) default_hits(p, l);
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
}

void plan_problem_chain_cuts(plan_problem *p)
{
    for (int c = 1; c < p->n_layers; c++) p->cut_bytes[c] = 2 * p->bytes_out[c - 1];
}

/* What hps-train sends at each cut: the activations and the labels forward,
 * the gradients back. */
static void model_cuts(plan_problem *p, const hps_model *m)
{
    for (int c = 1; c < m->n_layers; c++) {
        int act, grad;
        hps_model_cut_widths(m, c, &act, &grad);
        p->cut_bytes[c] = p->batch * (act + 1 + grad) * sizeof(float);
    }
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
    free(p->param_bytes);
    free(p->sparse_bytes);
    free(p->sparse_rows);
    free(p->t1_ms);
    free(p->par);
    free(p->fixed);
    free(p->fwd);
    free(p->fits);
    free(p->work_bytes);
    free(p->table_bytes);
    free(p->rows);
    free(p->hit);
    free(p->hot);
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

static int median_of(json_t *obj, const char *key, double *out, const char *ctx, hps_error *err)
{
    char sub[700];
    snprintf(sub, sizeof sub, "%.640s: %s", ctx, key);
    json_t *t = json_object_get(obj, key);
    if (!json_is_object(t)) return hps_fail(err, HPS_EXIT_USAGE, "%s: missing timing object", sub);
    return hps_json_num(t, "median", HPS_REQUIRED, 0, 1e12, out, sub, err);
}

/* The device's exchange probe (hps-profile(5)); absent or null (a profile
 * from before it, a GPU, a build without Open MPI): not charged.  Its rows
 * and bytes are the data's, not the device's: the first device's count
 * (*rows, *bytes still 0 before it). */
static int read_exchange(json_t *d, plan_problem *p, int t, double *rows, double *bytes, const char *ctx,
                         hps_error *err)
{
    json_t *x = json_object_get(d, "exchange");
    if (!x || json_is_null(x)) return 0;
    char sub[700];
    snprintf(sub, sizeof sub, "%.640s: exchange", ctx);
    if (!json_is_object(x)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object or null", sub);
    double r, b;
    if (hps_json_num(x, "rows", HPS_REQUIRED, 0, 1e15, &r, sub, err) ||
        hps_json_num(x, "bytes", HPS_REQUIRED, 0, 1e18, &b, sub, err) ||
        median_of(x, "worker_ms", &p->exchange_worker_ms[t], sub, err) ||
        median_of(x, "server_ms", &p->exchange_server_ms[t], sub, err))
        return -1;
    if (!(*rows > 0)) *rows = r, *bytes = b;
    return 0;
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
static int read_fixed(json_t *dl, int threads, double *fixed, const char *ctx, hps_error *err)
{
    json_t *bs = json_object_get(dl, "batch_scaling");
    *fixed = 0;
    if (!bs) return 0;
    char bctx[700];
    snprintf(bctx, sizeof bctx, "%.640s: batch_scaling", ctx);
    if (!json_is_object(bs)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object", bctx);
    json_t *units = json_object_get(bs, "units"), *f = json_object_get(bs, "fixed_fraction");
    size_t n = json_array_size(units);
    if (!json_is_array(units) || !json_is_array(f) || n < 1 || json_array_size(f) != n)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: units and fixed_fraction must be arrays of one length", bctx);
    size_t pick = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *u = json_array_get(units, i), *x = json_array_get(f, i);
        if (!json_is_integer(u) || json_integer_value(u) < 1)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: units[%zu] must be an integer >= 1", bctx, i);
        if (!json_is_number(x) || !(json_number_value(x) >= 0 && json_number_value(x) <= 1))
            return hps_fail(err, HPS_EXIT_USAGE, "%s: fixed_fraction[%zu] must be a number in [0, 1]", bctx, i);
        if (json_integer_value(u) <= threads) pick = i;
    }
    *fixed = json_number_value(json_array_get(f, pick));
    return 0;
}

/* One layer entry of a device: time of a batch on one unit, the parallel
 * fraction, and (read_fixed) the share of the time that fewer samples do
 * not shorten on a unit of `threads`. */
static int read_layer(json_t *dl, const hps_model *m, int l, int threads, double *t1, double *a, double *fixed,
                      double *fwd_share, const char *dctx, hps_error *err)
{
    char ctx[640];
    snprintf(ctx, sizeof ctx, "%.500s: layer %d '%s'", dctx, l, m->layers[l].name);
    const char *name;
    double fwd, bwd;
    if (!json_is_object(dl)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object", ctx);
    if (hps_json_str(dl, "name", HPS_REQUIRED, &name, ctx, err)) return -1;
    if (strcmp(name, m->layers[l].name) != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: profile names it '%s'", ctx, name);
    if (median_of(dl, "forward_ms", &fwd, ctx, err) || median_of(dl, "backward_ms", &bwd, ctx, err))
        return -1;
    json_t *sc = json_object_get(dl, "scaling");
    *a = 0;
    if (!json_is_object(sc)) return hps_fail(err, HPS_EXIT_USAGE, "%s: missing scaling", ctx);
    char sctx[700];
    snprintf(sctx, sizeof sctx, "%.640s: scaling", ctx);
    if (hps_json_num(sc, "parallel_fraction", HPS_REQUIRED, 0, 1, a, sctx, err)) return -1;
    *t1 = fwd + bwd;
    *fwd_share = *t1 > 0 ? fwd / *t1 : 0.5;
    return read_fixed(dl, threads, fixed, ctx, err);
}

/* A CPU unit of n threads, profiled on p: each layer's time scales by
 * Amdahl's law with its fitted parallel fraction a,
 * ((1 - a) + a / n) / ((1 - a) + a / p).  Where every fraction is 0 (not
 * measured, or a busy machine) the profiled times stay, and hps-plan says so. */
/* The layer's forward+backward ms that the profile's scaling measured at
 * `threads`, or 0 when it did not time that count. */
static double scaling_ms_at(json_t *layer, int threads)
{
    json_t *sc = json_object_get(layer, "scaling"), *units = json_object_get(sc, "units");
    json_t *ms = json_object_get(sc, "ms");
    for (size_t i = 0; i < json_array_size(units) && i < json_array_size(ms); i++)
        if (json_integer_value(json_array_get(units, i)) == threads && json_number_value(json_array_get(ms, i)) > 0)
            return json_number_value(json_array_get(ms, i));
    return 0;
}

/* A type of `threads` that the scaling timed takes that time, so that each
 * thread count's figure comes from one pass of the profile (the Amdahl law
 * applied to the main pass's times mixed two passes: mlp-784's one-thread
 * layers came out at 2.0 to 2.4 ms where that pass measured 1.9 to 2.0);
 * other counts scale by the law. */
static void scale_to_threads(plan_problem *p, int t, const plan_rtype *r, json_t *d, const char *file)
{
    int T = p->n_types, any = 0;
    long long measured = json_integer_value(json_object_get(d, "threads"));
    if (measured <= 0 || measured == r->threads) return;
    json_t *layers = json_object_get(d, "layers");
    for (int l = 0; l < p->n_layers; l++) {
        double a = p->par[l * T + t], at = scaling_ms_at(json_array_get(layers, l), r->threads);
        if (at > 0)
            p->t1_ms[l * T + t] = at;
        else
            p->t1_ms[l * T + t] *= ((1 - a) + a / r->threads) / ((1 - a) + a / (double)measured);
        any |= a > 0 || at > 0;
    }
    if (!any)
        hps_log(2, "hps-plan: %s: device '%s' has no fitted parallel fraction: resource '%s' (%d threads) "
                   "takes its times on %lld threads as they are\n", file, r->device, r->name, r->threads, measured);
    else
        hps_log(3, "hps-plan: resource '%s': times profiled on %lld threads taken at its %d where the scaling "
                   "timed them, else scaled by each layer's parallel fraction\n", r->name, measured, r->threads);
}

/* Fills column t of the problem from the profiled device of cluster type t;
 * exchange[2]: the rows and bytes of the first exchange read (read_exchange). */
static int read_device(plan_problem *p, const hps_model *m, const hps_cluster *c,
                       const hps_profiles *ps, int t, int *batch, double *exchange, hps_error *err)
{
    const plan_rtype *r = &c->types[t];
    int fi;
    json_t *d = find_device(ps, r->device, &fi);
    if (!d)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: resource '%s': device '%s' is in no profile",
                        c->path, r->name, r->device);
    const char *file = ps->files[fi].name, *digest;
    json_t *pm = json_object_get(ps->files[fi].root, "model");
    char ctx[512];
    snprintf(ctx, sizeof ctx, "%s: model", file);
    long long b;
    if (!json_is_object(pm)) return hps_fail(err, HPS_EXIT_USAGE, "%s: missing field 'model'", file);
    if (hps_json_str(pm, "digest", HPS_REQUIRED, &digest, ctx, err) ||
        hps_json_int(pm, "batch", HPS_REQUIRED, 1, HPS_MAX_BATCH, &b, ctx, err))
        return -1;
    if (strcmp(digest, m->digest) != 0)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: profiled model %.15s... is not %s (%.15s...); profile this model again",
                        file, digest, m->path, m->digest);
    if (*batch && *batch != b)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: batch %lld differs from another profile's %d",
                        file, b, *batch);
    *batch = (int)b;
    snprintf(ctx, sizeof ctx, "%s: device '%s'", file, r->device);
    const char *kind;
    if (hps_json_str(d, "kind", HPS_REQUIRED, &kind, ctx, err)) return -1;
    if (strcmp(kind, r->kind == PLAN_CPU ? "cpu" : "gpu") != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: kind %s but resource '%s' in %s is %s", ctx, kind,
                        r->name, c->path, r->kind == PLAN_CPU ? "cpu" : "gpu");
    json_t *layers = json_object_get(d, "layers");
    if (!json_is_array(layers) || (int)json_array_size(layers) != m->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: layers must hold the model's %d layers", ctx,
                        m->n_layers);
    /* a unit's threads: the type's, else those it was profiled on (0 for a GPU: the first entry) */
    int threads = r->kind == PLAN_CPU && r->threads_given ? r->threads
                                                          : (int)json_integer_value(json_object_get(d, "threads"));
    for (int l = 0; l < m->n_layers; l++)
        if (read_layer(json_array_get(layers, l), m, l, threads, &p->t1_ms[l * p->n_types + t],
                       &p->par[l * p->n_types + t], &p->fixed[l * p->n_types + t], &p->fwd[l * p->n_types + t],
                       ctx, err))
            return -1;
    if (r->kind == PLAN_CPU && r->threads_given) scale_to_threads(p, t, r, d, file);
    /* absent or null: 0, the copy is not charged */
    p->pcie_bpms[t] = json_number_value(json_object_get(d, "pcie_gbps")) * 1e6;
    p->reduce_bpms[t] = json_number_value(json_object_get(d, "triad_gbps")) * 1e6;
    /* absent (profiled without --data): the read is not charged */
    if (json_object_get(d, "read_ms") && median_of(d, "read_ms", &p->read_ms[t], ctx, err)) return -1;
    double handoff = 0; /* absent or null: 0, hand-offs are not charged */
    json_t *h = json_object_get(d, "handoff_us");
    if (h && !json_is_null(h) && hps_json_num(d, "handoff_us", HPS_REQUIRED, 0, 1e6, &handoff, ctx, err))
        return -1;
    p->handoff_ms[t] = handoff / 1000;
    if (read_exchange(d, p, t, &exchange[0], &exchange[1], ctx, err)) return -1;
    return median_of(d, "overhead_ms", &p->overhead_ms[t], ctx, err);
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
        p->mem_bytes[t] = r->mem_bytes;
        p->is_gpu[t] = r->kind == PLAN_GPU;
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
        json_t *d = find_device(ps, r->device, NULL); /* read_device found it */
        double gather = json_number_value(json_object_get(d, "gather_mrows_per_s")); /* 0 when null */
        p->server_rows_per_ms = gather * 1e3 / PLAN_SERVER_ROW_PASSES;
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
        p->table_bytes[l] = 2 * lc.table_bytes; /* weights and AdaGrad's accumulators */
        p->rows[l] = lc.table_bytes / (m->layers[l].kind == HPS_LAYER_EMBEDDING ? m->layers[l].dim * 4.0 : 1);
    }
    model_cuts(p, m);
    plan_problem_key_stats(p, m, NULL);
    plan_problem_prepare(p);
    exchange_shares(p, exchange[0], exchange[1]);
    return p;
}
