/* The probe: a few real training steps, timed per layer and per stage at
 * every thread count, written as a profile (hps-profile(5)) so that hps-plan
 * can plan again on measured figures instead of hps-profile's synthetic
 * batch.  The probe trains: run it apart from the real job. */
#include <stdlib.h>
#include <string.h>

#include "profile/hps_profile.h"
#include "train/train_internal.h"

/* Per-step samples of one thread count. */
typedef struct {
    int L, steps;
    double *fwd, *bwd; /* [layer][step], seconds */
    double *overhead, *step, *read;
} probe_samples;

static void samples_init(probe_samples *s, int L, int steps)
{
    s->L = L;
    s->steps = steps;
    s->fwd = hps_calloc((size_t)L * steps * 2 + 3 * (size_t)steps, sizeof(double));
    s->bwd = s->fwd + (size_t)L * steps;
    s->overhead = s->bwd + (size_t)L * steps;
    s->step = s->overhead + steps;
    s->read = s->step + steps;
}

/* `steps` steps on the next batches of src at the pipeline's current threads. */
static int probe_run(hps_trainer *t, hps_source *src, probe_samples *s, hps_error *err)
{
    for (int i = 0; i < s->steps; i++) {
        double r0 = hps_now();
        int got = src->read(src, t->batch, t->B, err);
        if (got < 0) return -1;
        if (got == 0 && (src->seek(src, 0, err) || (got = src->read(src, t->batch, t->B, err)) <= 0))
            return got < 0 ? -1 : hps_fail(err, HPS_EXIT_RUNTIME, "%s: no rows", src->name);
        double loss, t0 = hps_now();
        s->read[i] = t0 - r0; /* the wrap to row 0 at the end of the data counts too, as in a run */
        if (hps_trainer_step(t, t->batch, &loss, err)) return -1;
        s->step[i] = hps_now() - t0;
        double layers = 0;
        for (int l = 0; l < s->L; l++) {
            s->fwd[l * s->steps + i] = hps_pipeline_layer_fwd(t->pipe, l);
            s->bwd[l * s->steps + i] = hps_pipeline_layer_bwd(t->pipe, l);
            layers += s->fwd[l * s->steps + i] + s->bwd[l * s->steps + i];
        }
        /* with one stage the layers run back to back, and the rest of the step
         * is loading and updating; stages that overlap make this a lower bound */
        s->overhead[i] = s->step[i] > layers ? s->step[i] - layers : 0;
    }
    return 0;
}

static double median_ms(const double *v, int n) { return hps_median(v, n) * 1e3; }

static json_t *probe_device(hps_trainer *t, probe_samples *by_k, int T)
{
    const hps_model *m = t->m;
    hps_device_spec dev = {.kind = HPS_DEVICE_CPU, .threads = T};
    snprintf(dev.id, sizeof dev.id, "cpu:%d", T);
    if (strcmp(t->be->kind, "cuda") == 0) { /* the dense layers ran there */
        dev = (hps_device_spec){.kind = HPS_DEVICE_CUDA, .ordinal = t->be->device};
        snprintf(dev.id, sizeof dev.id, "cuda:%d", t->be->device);
    }
    hps_profile_device_out out;
    char name[256], host[256];
    hps_profile_device_measured(&out, name, host, &dev, T, hps_model_embedding_dim(m));
    json_t *layers = json_array();
    probe_samples *full = &by_k[T - 1];
    double *ms = hps_malloc((size_t)T * sizeof *ms), *both = hps_malloc((size_t)full->steps * sizeof *both);
    int *units = hps_malloc((size_t)T * sizeof *units);
    double sum_ms = median_ms(full->overhead, full->steps);
    for (int l = 0; l < m->n_layers; l++) {
        for (int k = 0; k < T; k++) {
            for (int i = 0; i < by_k[k].steps; i++)
                both[i] = by_k[k].fwd[l * by_k[k].steps + i] + by_k[k].bwd[l * by_k[k].steps + i];
            ms[k] = median_ms(both, by_k[k].steps);
            units[k] = k + 1;
        }
        sum_ms += ms[T - 1];
        hps_profile_layer_out L;
        hps_profile_layer_measured(&L, m, l, t->B, full->fwd + l * full->steps, full->bwd + l * full->steps,
                                   full->steps);
        L.scaling = (hps_profile_scaling){.n = T, .units = units, .ms = ms,
                                          .parallel_fraction = hps_fit_parallel_fraction(units, ms, T)};
        json_array_append_new(layers, hps_profile_layer_json(&L));
    }
    out.probe = 1;
    out.overhead_ms = hps_profile_timing_of(full->overhead, full->steps);
    out.read_ms = hps_profile_timing_of(full->read, full->steps);
    out.has_read = 1;
    out.step_ms = hps_profile_timing_of(full->step, full->steps);
    out.layers_sum_ms = sum_ms;
    out.energy_reason = "the probe reads no energy counters";
    free(units);
    free(ms);
    free(both);
    return hps_profile_device_json(&out, layers);
}

json_t *hps_trainer_probe(hps_trainer *t, hps_source *src, long steps, hps_error *err)
{
    if (hps_source_check(src, t->m, err)) return NULL;
    const int T = t->threads;
    probe_samples *by_k = hps_calloc((size_t)T, sizeof *by_k);
    int rc = src->seek(src, 0, err);
    for (int k = 1; k <= T && rc == 0; k++) {
        hps_set_threads(k);
        hps_pipeline_set_threads(t->pipe, k);
        samples_init(&by_k[k - 1], t->m->n_layers, (int)steps);
        rc = probe_run(t, src, &by_k[k - 1], err);
    }
    hps_set_threads(T);
    hps_pipeline_set_threads(t->pipe, T);
    json_t *doc = NULL;
    if (rc == 0) {
        hps_profile_opts o = hps_profile_opts_default();
        o.batch = t->B;
        o.reps = (int)steps;
        o.warmup = 0;
        o.table_rows_cap = 0;
        o.seed = t->o.seed;
        doc = hps_profile_doc(t->m, &o, json_pack("[o]", probe_device(t, by_k, T)));
    }
    for (int k = 0; k < T; k++) free(by_k[k].fwd);
    free(by_k);
    return doc;
}
