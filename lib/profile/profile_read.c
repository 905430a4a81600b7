/* The one reader of hps-profile(5): a document into hps_profile, every
 * field checked here once, so that the planner, the table, the merge and
 * the estimate read numbers, not JSON.  Errors name the file, the device,
 * the layer and the field ("p.json: device 'cpu': layer 1 'fc1':
 * scaling: parallel_fraction must be a number"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "profile/hps_profile.h"

/* The median of a timing object ({median, min, max, mad}). */
static int read_median(json_t *obj, const char *key, double *out, const char *ctx, hps_error *err)
{
    char sub[768];
    snprintf(sub, sizeof sub, "%.700s: %s", ctx, key);
    json_t *t = json_object_get(obj, key);
    if (!json_is_object(t)) return hps_fail(err, HPS_EXIT_USAGE, "%s: missing timing object", sub);
    return hps_json_num(t, "median", HPS_REQUIRED, 0, 1e12, out, sub, err);
}

/* An optional timing object: absent leaves *out and *has at 0. */
static int read_median_opt(json_t *obj, const char *key, double *out, int *has, const char *ctx,
                           hps_error *err)
{
    if (!json_object_get(obj, key)) return 0;
    if (has) *has = 1;
    return read_median(obj, key, out, ctx, err);
}

/* Two arrays of one length n >= 1: units (integers >= 1) and numbers in
 * [0, max] (their message: `values`[i] must be a number in [0, 1] when max
 * is 1). */
static int read_curve(json_t *o, const char *values, double max, int **units, double **v, int *n,
                      const char *ctx, hps_error *err)
{
    json_t *u = json_object_get(o, "units"), *x = json_object_get(o, values);
    size_t len = json_array_size(u);
    if (!json_is_array(u) || !json_is_array(x) || len < 1 || json_array_size(x) != len)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: units and %s must be arrays of one length", ctx, values);
    *units = hps_malloc(len * sizeof **units);
    *v = hps_malloc(len * sizeof **v);
    *n = (int)len;
    for (size_t i = 0; i < len; i++) {
        json_t *ui = json_array_get(u, i), *xi = json_array_get(x, i);
        if (!json_is_integer(ui) || json_integer_value(ui) < 1 || json_integer_value(ui) > 1 << 20)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: units[%zu] must be an integer >= 1", ctx, i);
        if (!json_is_number(xi) || !(json_number_value(xi) >= 0 && json_number_value(xi) <= max)) {
            if (max == 1)
                return hps_fail(err, HPS_EXIT_USAGE, "%s: %s[%zu] must be a number in [0, 1]", ctx, values, i);
            return hps_fail(err, HPS_EXIT_USAGE, "%s: %s[%zu] must be a number >= 0", ctx, values, i);
        }
        (*units)[i] = (int)json_integer_value(ui);
        (*v)[i] = json_number_value(xi);
    }
    return 0;
}

/* scaling: required, with its parallel fraction; its curve where given. */
static int read_scaling(json_t *layer, hps_profile_scaling *s, const char *ctx, hps_error *err)
{
    json_t *sc = json_object_get(layer, "scaling");
    if (!json_is_object(sc)) return hps_fail(err, HPS_EXIT_USAGE, "%s: missing scaling", ctx);
    char sub[768];
    snprintf(sub, sizeof sub, "%.700s: scaling", ctx);
    if (hps_json_num(sc, "parallel_fraction", HPS_REQUIRED, 0, 1, &s->parallel_fraction, sub, err)) return -1;
    if (!json_object_get(sc, "units") && !json_object_get(sc, "ms")) return 0;
    return read_curve(sc, "ms", 1e12, &s->units, &s->ms, &s->n, sub, err);
}

/* batch_scaling: absent (a profile from before it) is none. */
static int read_batch_scaling(json_t *layer, hps_profile_batch_scaling *b, const char *ctx, hps_error *err)
{
    json_t *bs = json_object_get(layer, "batch_scaling");
    if (!bs) return 0;
    char sub[768];
    snprintf(sub, sizeof sub, "%.700s: batch_scaling", ctx);
    if (!json_is_object(bs)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object", sub);
    return read_curve(bs, "fixed_fraction", 1, &b->units, &b->fixed_fraction, &b->n, sub, err);
}

/* A number in [0, max], NAN when absent or null (not recorded). */
static int read_optional_number(json_t *o, const char *key, double max, double *out, const char *ctx,
                                hps_error *err)
{
    *out = NAN;
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? hps_json_num(o, key, HPS_REQUIRED, 0, max, out, ctx, err) : 0;
}

static int read_layer(json_t *o, hps_profile_layer *L, const char *lctx, hps_error *err)
{
    static const char *const numbers[] = {"flops_forward", "flops_backward", "bytes_in",
                                          "bytes_out", "param_bytes", "sparse_bytes", NULL};
    double *const into[] = {&L->flops_forward, &L->flops_backward, &L->bytes_in,
                            &L->bytes_out, &L->param_bytes, &L->sparse_bytes};
    L->json = o;
    L->calibrated = 1;
    if (!json_is_object(o) || hps_json_str(o, "name", HPS_REQUIRED, &L->name, lctx, err))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: expected a layer object with a name", lctx);
    char ctx[768];
    snprintf(ctx, sizeof ctx, "%.500s '%.200s'", lctx, L->name);
    if (read_median(o, "forward_ms", &L->forward_ms, ctx, err) ||
        read_median(o, "backward_ms", &L->backward_ms, ctx, err))
        return -1;
    for (int i = 0; numbers[i]; i++)
        if (hps_json_num(o, numbers[i], HPS_REQUIRED, 0, 1e30, into[i], ctx, err)) return -1;
    if (hps_json_str(o, "type", HPS_OPTIONAL, &L->type, ctx, err) ||
        read_scaling(o, &L->scaling, ctx, err) || read_batch_scaling(o, &L->batch_scaling, ctx, err))
        return -1;
    /* spread: optional (a profile from before it, an estimate: not recorded) */
    if (read_optional_number(o, "spread", 1e6, &L->spread, ctx, err)) return -1;
    json_t *cal = json_object_get(o, "calibrated");
    if (!cal || json_is_null(cal)) return 0;
    char sub[800];
    snprintf(sub, sizeof sub, "%.760s: calibrated", ctx);
    if (!json_is_object(cal)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object", sub);
    return hps_json_num(cal, "factor", HPS_OPTIONAL, 0, 1e12, &L->calibrated, sub, err);
}

/* The exchange probe: absent or null (a profile from before it, a GPU, a
 * build without Open MPI) is none. */
static int read_exchange(json_t *d, hps_profile_exchange *x, const char *ctx, hps_error *err)
{
    json_t *o = json_object_get(d, "exchange");
    if (!o || json_is_null(o)) return 0;
    char sub[768];
    snprintf(sub, sizeof sub, "%.700s: exchange", ctx);
    if (!json_is_object(o)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object or null", sub);
    x->present = 1;
    return hps_json_num(o, "rows", HPS_REQUIRED, 0, 1e15, &x->rows, sub, err) ||
                   hps_json_num(o, "bytes", HPS_REQUIRED, 0, 1e18, &x->bytes, sub, err) ||
                   read_median(o, "worker_ms", &x->worker_ms, sub, err) ||
                   read_median(o, "server_ms", &x->server_ms, sub, err)
               ? -1
               : 0;
}

/* energy: an object or null; its step_j a number or null. */
static int read_energy(json_t *d, hps_profile_device *dev, const char *ctx, hps_error *err)
{
    json_t *e = json_object_get(d, "energy");
    if (!e || json_is_null(e)) return 0;
    char sub[768];
    snprintf(sub, sizeof sub, "%.700s: energy", ctx);
    if (!json_is_object(e)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object or null", sub);
    dev->has_step_j = json_is_number(json_object_get(e, "step_j"));
    return hps_json_num(e, "step_j", HPS_OPTIONAL, 0, 1e18, &dev->step_j, sub, err);
}

/* The device's figures besides its layers, each 0 when absent or null. */
static int read_rates(json_t *d, hps_profile_device *dev, const char *ctx, hps_error *err)
{
    static const char *const rates[] = {"sgemm_gflops", "triad_gbps", "gather_mrows_per_s", "pcie_gbps",
                                        "clock_ghz", NULL};
    double *const into[] = {&dev->sgemm_gflops, &dev->triad_gbps, &dev->gather_mrows_per_s, &dev->pcie_gbps,
                            &dev->clock_ghz};
    long long threads = 0;
    for (int i = 0; rates[i]; i++)
        if (hps_json_num(d, rates[i], HPS_OPTIONAL, 0, 1e15, into[i], ctx, err)) return -1;
    if (hps_json_int(d, "threads", HPS_OPTIONAL, 0, 1 << 20, &threads, ctx, err) ||
        hps_json_str(d, "name", HPS_OPTIONAL, &dev->name, ctx, err) ||
        hps_json_num(d, "layers_sum_ms", HPS_OPTIONAL, 0, 1e12, &dev->layers_sum_ms, ctx, err))
        return -1;
    dev->threads = (int)threads;
    return 0;
}

/* "FILE: device 'ID'", the id as hps_printable shows a name from a file. */
static void device_ctx(char *ctx, size_t n, const char *name, const char *id)
{
    char shown[128];
    snprintf(ctx, n, "%s: device '%s'", name, hps_printable(id, shown, sizeof shown));
}

static int read_device(json_t *d, hps_profile_device *dev, int n_layers, const char *name, int i,
                       hps_error *err)
{
    static const char *const kinds[] = {"cpu", "gpu", NULL};
    static const char *const sources[] = {"measured", "estimated", NULL};
    char ctx[300];
    int kind, source;
    dev->json = d;
    snprintf(ctx, sizeof ctx, "%s: device %d", name, i);
    if (!json_is_object(d) || hps_json_str(d, "id", HPS_REQUIRED, &dev->id, ctx, err))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: expected a device object with an id", ctx);
    device_ctx(ctx, sizeof ctx, name, dev->id);
    if (hps_json_enum(d, "kind", HPS_REQUIRED, kinds, &kind, ctx, err) ||
        hps_json_enum(d, "source", HPS_REQUIRED, sources, &source, ctx, err))
        return -1;
    dev->is_gpu = kind == 1;
    dev->estimated = source == 1;
    dev->source = sources[source];
    json_t *layers = json_object_get(d, "layers");
    if (!json_is_array(layers) || (int)json_array_size(layers) != n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: layers must be an array of %d entries", ctx, n_layers);
    dev->layers = hps_calloc((size_t)n_layers, sizeof *dev->layers);
    dev->n_layers = n_layers;
    for (int l = 0; l < n_layers; l++) {
        char lctx[320];
        snprintf(lctx, sizeof lctx, "%s: layer %d", ctx, l);
        if (read_layer(json_array_get(layers, (size_t)l), &dev->layers[l], lctx, err)) return -1;
    }
    return 0;
}

/* What the planner prices besides the layers; handoff_us absent or null:
 * hand-offs are not charged, read_ms absent (profiled without --data): the
 * read is not charged, read_cpu_ms absent: nor the reader's thread, device_rows_ms absent: rows in device memory add
 * nothing, device_row_miss_us absent: a cache's misses cost their bytes alone. */
static int read_device_costs(hps_profile_device *dev, const char *name, hps_error *err)
{
    char ctx[300];
    json_t *d = dev->json;
    device_ctx(ctx, sizeof ctx, name, dev->id);
    return read_rates(d, dev, ctx, err) ||
                   read_median_opt(d, "read_ms", &dev->read_ms, &dev->has_read, ctx, err) ||
                   hps_json_num(d, "read_cpu_ms", HPS_OPTIONAL, 0, 1e9, &dev->read_cpu_ms, ctx, err) ||
                   hps_json_num(d, "handoff_us", HPS_OPTIONAL, 0, 1e6, &dev->handoff_us, ctx, err) ||
                   hps_json_num(d, "device_rows_ms", HPS_OPTIONAL, 0, 1e9, &dev->device_rows_ms, ctx, err) ||
                   read_optional_number(d, "device_rows_spread", 1e6, &dev->device_rows_spread, ctx, err) ||
                   hps_json_num(d, "device_row_miss_us", HPS_OPTIONAL, 0, 1e9, &dev->device_row_miss_us, ctx, err) ||
                   read_optional_number(d, "device_row_miss_spread", 1e6, &dev->device_row_miss_spread, ctx, err) ||
                   hps_json_str(d, "machine_from", HPS_OPTIONAL, &dev->machine_from, ctx, err) ||
                   read_exchange(d, &dev->exchange, ctx, err) ||
                   read_median(d, "overhead_ms", &dev->overhead_ms, ctx, err) ||
                   read_median_opt(d, "step_ms", &dev->step_ms, NULL, ctx, err) || read_energy(d, dev, ctx, err)
               ? -1
               : 0;
}

static int read_model(hps_profile *p, hps_error *err)
{
    json_t *model = json_object_get(p->doc, "model");
    char ctx[300];
    long long batch, n_layers;
    snprintf(ctx, sizeof ctx, "%s: model", p->name);
    if (!json_is_object(model)) return hps_fail(err, HPS_EXIT_USAGE, "%s: missing object", ctx);
    if (hps_json_str(model, "digest", HPS_REQUIRED, &p->digest, ctx, err) ||
        hps_json_int(model, "batch", HPS_REQUIRED, 1, HPS_MAX_BATCH, &batch, ctx, err) ||
        hps_json_int(model, "layers", HPS_REQUIRED, 1, HPS_MAX_LAYERS, &n_layers, ctx, err) ||
        hps_json_str(model, "name", HPS_OPTIONAL, &p->model_name, ctx, err))
        return -1;
    p->batch = (int)batch;
    p->n_layers = (int)n_layers;
    return 0;
}

static int read_doc(hps_profile *p, hps_error *err)
{
    const char *format = NULL, *name = p->name;
    long long version = 0;
    if (hps_json_str(p->doc, "format", HPS_REQUIRED, &format, name, err)) return -1;
    if (strcmp(format, "hps-profile") != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: format is '%s', expected 'hps-profile'", name,
                        hps_printable(format, (char[128]){0}, 128));
    if (hps_json_int(p->doc, "version", HPS_REQUIRED, 1, 1 << 30, &version, name, err)) return -1;
    if (version != HPS_PROFILE_VERSION)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: profile version %lld, this hps reads version %d", name,
                        version, HPS_PROFILE_VERSION);
    if (read_model(p, err)) return -1;
    json_t *devices = json_object_get(p->doc, "devices");
    if (!json_is_array(devices)) return hps_fail(err, HPS_EXIT_USAGE, "%s: missing array 'devices'", name);
    p->devices = hps_calloc(json_array_size(devices) + 1, sizeof *p->devices);
    for (size_t i = 0; i < json_array_size(devices); i++) {
        hps_profile_device *dev = &p->devices[p->n_devices++];
        if (read_device(json_array_get(devices, i), dev, p->n_layers, name, (int)i, err)) return -1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(dev->id, p->devices[j].id) == 0)
                return hps_fail(err, HPS_EXIT_USAGE, "%s: device '%s' appears twice", name,
                                hps_printable(dev->id, (char[128]){0}, 128));
    }
    for (int i = 0; i < p->n_devices; i++)
        if (read_device_costs(&p->devices[i], name, err)) return -1;
    return 0;
}

hps_profile *hps_profile_read(json_t *doc, const char *name, hps_error *err)
{
    hps_profile *p = hps_calloc(1, sizeof *p);
    p->doc = json_incref(doc);
    p->name = hps_strdup(name);
    if (read_doc(p, err) == 0) return p;
    hps_profile_free(p);
    return NULL;
}

hps_profile *hps_profile_parse(const char *name, const char *text, size_t len, hps_error *err)
{
    json_t *doc;
    if (hps_json_loadb(name, text, len, &doc, err)) return NULL;
    hps_profile *p = hps_profile_read(doc, name, err);
    json_decref(doc);
    return p;
}

hps_profile *hps_profile_load(const char *path, hps_error *err)
{
    json_t *doc;
    if (hps_json_load(path, &doc, err)) return NULL;
    hps_profile *p = hps_profile_read(doc, hps_path_name(path), err);
    json_decref(doc);
    return p;
}

void hps_profile_free(hps_profile *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_devices; i++) {
        hps_profile_device *d = &p->devices[i];
        for (int l = 0; d->layers && l < d->n_layers; l++) {
            free(d->layers[l].scaling.units);
            free(d->layers[l].scaling.ms);
            free(d->layers[l].batch_scaling.units);
            free(d->layers[l].batch_scaling.fixed_fraction);
        }
        free(d->layers);
    }
    free(p->devices);
    free((char *)p->name);
    json_decref(p->doc);
    free(p);
}

const hps_profile_device *hps_profile_device_find(const hps_profile *p, const char *id)
{
    for (int i = 0; i < p->n_devices; i++)
        if (strcmp(p->devices[i].id, id) == 0) return &p->devices[i];
    return NULL;
}

/* A CUDA device is profiled without CPU threads (and without a triad: GPU
 * rates would need device-side benchmarks), so threads tell the CPU
 * backend's "device" apart: its uploads, downloads and row moves are
 * memcpy in host memory (lib/kernels/backend_cpu.c). */
double hps_profile_host_link_gbps(const hps_profile_device *d)
{
    if (!d->is_gpu) return 0;
    if (d->pcie_gbps > 0) return d->pcie_gbps;
    return d->threads > 0 && d->triad_gbps > 0 ? d->triad_gbps / 2 : 0;
}
