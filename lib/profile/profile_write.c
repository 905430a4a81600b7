/* The one writer of hps-profile(5): structs into a document, every field
 * named here once (profile_read.c reads them), so that the measurement,
 * hps-train's probe, the exchange probe, the estimate and the edits tools
 * make to a profile write one format.  Numbers go through hps_json_real, so
 * a figure not measured (NAN) is null. */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "core/hps_json.h"
#include "profile/hps_profile.h"

/* ---- timings ------------------------------------------------------------------- */

hps_profile_timing hps_profile_timing_of(const double *sec, int n)
{
    double med = hps_median(sec, n), lo = sec[0], hi = sec[0];
    double *dev = hps_malloc((size_t)n * sizeof *dev);
    for (int i = 0; i < n; i++) {
        lo = sec[i] < lo ? sec[i] : lo;
        hi = sec[i] > hi ? sec[i] : hi;
        dev[i] = sec[i] > med ? sec[i] - med : med - sec[i];
    }
    double mad = hps_median(dev, n);
    free(dev);
    return (hps_profile_timing){.median = med * 1e3, .min = lo * 1e3, .max = hi * 1e3, .mad = mad * 1e3};
}

hps_profile_timing hps_profile_timing_point(double ms)
{
    return (hps_profile_timing){.median = ms, .min = ms, .max = ms, .mad = 0, .point = 1};
}

json_t *hps_profile_timing_json(const hps_profile_timing *t)
{
    return json_pack("{s:o, s:o, s:o, s:o}", "median", hps_json_real(t->median), "min", hps_json_real(t->min),
                     "max", hps_json_real(t->max), "mad", t->point ? json_integer(0) : hps_json_real(t->mad));
}

/* ---- layers -------------------------------------------------------------------- */

static json_t *ints(const int *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *reals(const double *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, hps_json_real(v[i]));
    return a;
}

json_t *hps_profile_scaling_json(const hps_profile_scaling *s)
{
    return json_pack("{s:o, s:o, s:o}", "units", ints(s->units, s->n), "ms", reals(s->ms, s->n),
                     "parallel_fraction", hps_json_real(s->parallel_fraction));
}

json_t *hps_profile_batch_scaling_json(const hps_profile_batch_out *b)
{
    if (!b->samples)
        return json_pack("{s:o, s:o}", "units", ints(b->units, b->n), "fixed_fraction",
                         reals(b->fixed_fraction, b->n));
    json_t *ms = json_array();
    for (int k = 0; k < b->n; k++)
        json_array_append_new(ms, json_pack("[o, o]", hps_json_real(b->full_ms[k]), hps_json_real(b->half_ms[k])));
    return json_pack("{s:[i, i], s:o, s:o, s:o}", "samples", b->samples, b->samples / 2, "units",
                     ints(b->units, b->n), "ms", ms, "fixed_fraction", reals(b->fixed_fraction, b->n));
}

json_t *hps_profile_batch_scaling_copy(json_t *layer)
{
    json_t *ref = json_object_get(layer, "batch_scaling");
    if (!ref) return json_pack("{s:[i], s:[i]}", "units", 1, "fixed_fraction", 0);
    return json_pack("{s:O, s:O}", "units", json_object_get(ref, "units"), "fixed_fraction",
                     json_object_get(ref, "fixed_fraction"));
}

json_t *hps_profile_layer_json(const hps_profile_layer_out *L)
{
    const hps_layer_cost *c = &L->cost;
    json_t *o = json_pack("{s:i, s:s, s:s}", "index", L->index, "name", L->name, "type", L->type);
    json_object_set_new(o, "forward_ms", hps_profile_timing_json(&L->forward_ms));
    json_object_set_new(o, "backward_ms", hps_profile_timing_json(&L->backward_ms));
    json_object_set_new(o, "flops_forward", hps_json_real(c->flops_fwd));
    json_object_set_new(o, "flops_backward", hps_json_real(c->flops_bwd));
    json_object_set_new(o, "bytes_in", hps_json_real(c->bytes_in));
    json_object_set_new(o, "bytes_out", hps_json_real(c->bytes_out));
    json_object_set_new(o, "param_bytes", hps_json_real(c->param_bytes));
    json_object_set_new(o, "sparse_rows", hps_json_real(c->sparse_rows));
    json_object_set_new(o, "sparse_bytes", hps_json_real(c->sparse_bytes));
    json_object_set_new(o, "table_bytes", hps_json_real(c->table_bytes));
    json_object_set_new(o, "work_bytes", hps_json_real(c->work_bytes));
    json_object_set_new(o, "scaling", hps_profile_scaling_json(&L->scaling));
    json_object_set_new(o, "energy_j", hps_json_real(L->energy_j));
    json_object_set_new(o, "source", json_string(L->source));
    if (L->batch_scaling.n) json_object_set_new(o, "batch_scaling", hps_profile_batch_scaling_json(&L->batch_scaling));
    return o;
}

void hps_profile_layer_set_estimate(json_t *layer, const hps_profile_layer_out *L, json_t *batch_scaling)
{
    json_object_set_new(layer, "batch_scaling", batch_scaling);
    json_object_set_new(layer, "forward_ms", hps_profile_timing_json(&L->forward_ms));
    json_object_set_new(layer, "backward_ms", hps_profile_timing_json(&L->backward_ms));
    json_object_set_new(layer, "scaling", hps_profile_scaling_json(&L->scaling));
    json_object_set_new(layer, "energy_j", hps_json_real(L->energy_j));
    json_object_set_new(layer, "source", json_string(L->source));
}

/* ---- devices ------------------------------------------------------------------- */

static json_t *string_or_null(const char *s) { return s ? json_string(s) : json_null(); }

json_t *hps_profile_device_json(const hps_profile_device_out *d, json_t *layers)
{
    /* a measured device records the benchmarks it ran (null on a GPU, which
     * has none); an estimate, the device it was calibrated on */
    int measured = !d->calibrated_on;
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "id", d->id, "kind", d->is_gpu ? "gpu" : "cpu", "name",
                          d->name, "host", d->host, "source", d->source, "threads", d->threads);
    if (!measured) json_object_set_new(o, "calibrated_on", json_string(d->calibrated_on));
    json_object_set_new(o, "memory_bytes", hps_json_real(d->memory_bytes));
    if (measured) json_object_set_new(o, "blas_core", string_or_null(d->blas_core));
    json_object_set_new(o, "sgemm_gflops", hps_json_real(d->sgemm_gflops));
    json_object_set_new(o, "triad_gbps", hps_json_real(d->triad_gbps));
    if (d->pcie_gbps > 0) json_object_set_new(o, "pcie_gbps", hps_json_real(d->pcie_gbps));
    if (d->clock_ghz > 0) json_object_set_new(o, "clock_ghz", hps_json_real(d->clock_ghz));
    json_object_set_new(o, "gather_mrows_per_s", hps_json_real(d->gather_mrows_per_s));
    if (measured) json_object_set_new(o, "handoff_us", hps_json_real(d->handoff_us));
    if (d->machine_from) json_object_set_new(o, "machine_from", json_string(d->machine_from));
    if (d->probe) json_object_set_new(o, "probe", json_true());
    json_object_set_new(o, "layers", layers);
    json_object_set_new(o, "overhead_ms", hps_profile_timing_json(&d->overhead_ms));
    if (d->has_read) json_object_set_new(o, "read_ms", hps_profile_timing_json(&d->read_ms));
    json_object_set_new(o, "step_ms", hps_profile_timing_json(&d->step_ms));
    json_object_set_new(o, "layers_sum_ms", hps_json_real(d->layers_sum_ms));
    json_object_set_new(o, "energy", json_pack("{s:o, s:o, s:o}", "source", string_or_null(d->energy_source),
                                               "step_j", hps_json_real(d->step_j), "reason",
                                               string_or_null(d->energy_reason)));
    return o;
}

json_t *hps_profile_exchange_json(const hps_profile_exchange_out *x)
{
    return json_pack("{s:o, s:o, s:o, s:o}", "rows", hps_json_real(x->rows), "bytes", hps_json_real(x->bytes),
                     "worker_ms", hps_profile_timing_json(&x->worker_ms), "server_ms",
                     hps_profile_timing_json(&x->server_ms));
}

/* ---- the document -------------------------------------------------------------- */

json_t *hps_profile_doc(const hps_model *m, const hps_profile_opts *o, json_t *devices)
{
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_t *doc = json_pack("{s:s, s:i, s:s+, s:s}", "format", "hps-profile", "version",
                            HPS_PROFILE_VERSION, "tool", "hps-profile ", HPS_VERSION, "created",
                            when);
    json_object_set_new(doc, "model",
                        json_pack("{s:s, s:s, s:i, s:i}", "name", m->name, "digest", m->digest,
                                  "batch", o->batch ? o->batch : m->batch, "layers", m->n_layers));
    json_object_set_new(doc, "settings",
                        json_pack("{s:i, s:i, s:I, s:I}", "reps", o->reps, "warmup", o->warmup,
                                  "table_rows_cap", (json_int_t)o->table_rows_cap, "seed",
                                  (json_int_t)o->seed));
    json_object_set_new(doc, "devices", devices);
    return doc;
}

json_t *hps_profile_doc_devices(json_t *doc) { return json_object_get(doc, "devices"); }

json_t *hps_profile_doc_device(json_t *doc, int i) { return json_array_get(hps_profile_doc_devices(doc), (size_t)i); }

void hps_profile_doc_set_merged_from(json_t *doc, const char **names, int n)
{
    json_t *from = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(from, json_string(names[i]));
    json_object_set_new(doc, "merged_from", from);
}

/* ---- what tools add to a profile they made -------------------------------------- */

void hps_profile_device_set_exchange(json_t *device, json_t *exchange)
{
    json_object_set_new(device, "exchange", exchange);
}

void hps_profile_device_set_engine(json_t *device, json_t *probe_doc, int on_data)
{
    json_t *pd = hps_profile_doc_device(probe_doc, 0);
    json_object_set(device, "overhead_ms", json_object_get(pd, "overhead_ms"));
    json_object_set_new(device, "overhead_from", json_string(on_data ? "engine on shards" : "engine"));
    if (on_data) json_object_set(device, "read_ms", json_object_get(pd, "read_ms")); /* generating is no read */
}

/* The reader decodes beside the step, on the unit's cores: the planner
 * charges it where the step's threads fill them (hps-plan(1), COST MODEL). */
void hps_profile_device_set_read_cpu(json_t *device, double ms)
{
    json_object_set_new(device, "read_cpu_ms", hps_json_real(ms > 0 ? ms : 0));
}

/* What hps-train's rows in device memory add to a step beside host tables
 * (hps-train(1) ROWS): each lookup's slot, the eviction order of the rows a
 * step touched, the rows moved into the arena; the planner charges it to a
 * stage with rows hbm or cache (hps-plan(1), COST MODEL). */
void hps_profile_device_set_device_rows(json_t *device, const hps_profile_paired *p)
{
    json_object_set_new(device, "device_rows_ms", hps_json_real(p->ms > 0 ? p->ms : 0));
    json_object_set_new(device, "device_rows_spread", hps_json_real(p->spread));
}

/* What a cache's miss costs hps-train's host beyond rows hbm (the slot
 * taken, the row fetched, an eviction: the order's upkeep and the row
 * written back); the planner charges it a miss to a stage with rows cache
 * (hps-plan(1), COST MODEL). */
void hps_profile_device_set_row_miss(json_t *device, const hps_profile_paired *p)
{
    json_object_set_new(device, "device_row_miss_us", hps_json_real(p->ms > 0 ? p->ms * 1e3 : 0));
    json_object_set_new(device, "device_row_miss_spread", hps_json_real(p->spread));
}

/* Multiplies the figures of a timing object ({median, min, max, mad}). */
static void scale_timing(json_t *t, double f)
{
    const char *key;
    json_t *v;
    json_object_foreach(t, key, v)
        if (json_is_number(v)) json_object_set_new(t, key, json_real(json_number_value(v) * f));
}

void hps_profile_layer_set_calibrated(const hps_profile_layer *L, double factor, const char *run)
{
    scale_timing(json_object_get(L->json, "forward_ms"), factor);
    scale_timing(json_object_get(L->json, "backward_ms"), factor);
    /* the curve moves with the times; its parallel fraction stays */
    json_t *ms = json_object_get(json_object_get(L->json, "scaling"), "ms");
    for (int k = 0; k < L->scaling.n; k++) json_array_set_new(ms, (size_t)k, json_real(L->scaling.ms[k] * factor));
    json_object_set_new(L->json, "calibrated", json_pack("{s:f, s:s}", "factor", factor * L->calibrated, "run", run));
}
