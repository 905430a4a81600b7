/* Profiles as documents: merging, the table for people and calibration
 * (their edits written by profile_write.c). */
#include <stdlib.h>
#include <string.h>

#include "core/hps_json.h"
#include "core/hps_io.h"
#include "profile/hps_profile.h"

/* A string of the profile as the table shows it: a missing one as glibc's
 * printf shows it (what the table printed when it read the JSON itself),
 * bytes a terminal would act on as '?' (hps_printable). */
typedef char shown_buf[256];
static const char *shown(const char *s, shown_buf buf)
{
    return s ? hps_printable(s, buf, sizeof(shown_buf)) : "(null)";
}

/* Combines documents already read: the first's, with the others' devices
 * after its own. */
static json_t *merge_read(hps_profile **ps, const char **names, int n, hps_error *err)
{
    for (int i = 1; i < n; i++) {
        if (strcmp(ps[i]->digest, ps[0]->digest) != 0 || ps[i]->batch != ps[0]->batch)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: profiles model '%s' (batch %d), but %s profiles '%s' (batch %d)", names[i],
                            shown(ps[i]->model_name, (char[256]){0}), ps[i]->batch, names[0],
                            shown(ps[0]->model_name, (char[256]){0}), ps[0]->batch),
                   NULL;
        for (int k = 0; k < ps[i]->n_devices; k++)
            for (int j = 0; j < i; j++)
                if (hps_profile_device_find(ps[j], ps[i]->devices[k].id))
                    return hps_fail(err, HPS_EXIT_USAGE, "%s: device '%s' is already profiled by an earlier input",
                                    names[i], shown(ps[i]->devices[k].id, (char[256]){0})),
                           NULL;
    }
    json_t *out = json_deep_copy(ps[0]->doc), *devices = hps_profile_doc_devices(out);
    for (int i = 1; i < n; i++)
        for (int k = 0; k < ps[i]->n_devices; k++) json_array_append(devices, ps[i]->devices[k].json);
    hps_profile_doc_set_merged_from(out, names, n);
    return out;
}

json_t *hps_profile_merge(json_t **docs, const char **names, int n, hps_error *err)
{
    hps_profile **ps = hps_calloc((size_t)n, sizeof *ps);
    json_t *out = NULL;
    int ok = 1;
    for (int i = 0; i < n && ok; i++) ok = (ps[i] = hps_profile_read(docs[i], names[i], err)) != NULL;
    if (ok) out = merge_read(ps, names, n, err);
    for (int i = 0; i < n; i++) hps_profile_free(ps[i]);
    free(ps);
    return out;
}

/* ---- the table for people ------------------------------------------------------ */

static void print_device(const hps_profile_device *d, FILE *out)
{
    shown_buf id, source, name, type;
    const char *nm = shown(d->name, name);
    /* threads are a CPU's (a GPU's are 0), and a measured CPU's name already says them */
    if (d->is_gpu || strstr(nm, " threads"))
        fprintf(out, "device %s (%s, %s): %s\n", shown(d->id, id), d->is_gpu ? "gpu" : "cpu",
                shown(d->source, source), nm);
    else
        fprintf(out, "device %s (cpu, %s): %s, %d thread%s\n", shown(d->id, id), shown(d->source, source), nm,
                d->threads, d->threads == 1 ? "" : "s");
    fprintf(out, "  sgemm %.1f GFLOP/s, triad %.1f GB/s, gather %.1f Mrows/s\n", d->sgemm_gflops, d->triad_gbps,
            d->gather_mrows_per_s);
    fprintf(out, "  %-3s %-16s %-15s %10s %10s %9s %10s %10s %10s %6s %6s\n", "#", "layer", "type",
            "fwd ms", "bwd ms", "GFLOP", "in KiB", "out KiB", "param KiB", "a", "f");
    for (int i = 0; i < d->n_layers; i++) {
        const hps_profile_layer *L = &d->layers[i];
        const hps_profile_batch_scaling *b = &L->batch_scaling;
        double f = b->n ? b->fixed_fraction[b->n - 1] : 0; /* at the device's threads: the last measured */
        fprintf(out, "  %-3d %-16.16s %-15s %10.3f %10.3f %9.3f %10.1f %10.1f %10.1f %6.2f %6.2f\n", i,
                shown(L->name, name), shown(L->type, type), L->forward_ms, L->backward_ms, (L->flops_forward + L->flops_backward) / 1e9,
                L->bytes_in / 1024, L->bytes_out / 1024, L->param_bytes / 1024, L->scaling.parallel_fraction, f);
    }
    fprintf(out, "  overhead %.3f ms, layers + overhead %.3f ms, whole step %.3f ms", d->overhead_ms,
            d->layers_sum_ms, d->step_ms);
    if (d->has_step_j) fprintf(out, ", %.3f J/step", d->step_j);
    fprintf(out, "\n");
    if (d->has_read && d->read_cpu_ms > 0)
        fprintf(out, "  read %.3f ms a batch, its reader's thread %.3f ms of CPU beside the step\n", d->read_ms,
                d->read_cpu_ms);
    else if (d->has_read) fprintf(out, "  read %.3f ms a batch\n", d->read_ms);
    const hps_profile_exchange *x = &d->exchange;
    if (x->present)
        fprintf(out, "  exchange with a server: %.0f rows, %.1f KiB both ways, worker %.3f ms, server %.3f ms\n",
                x->rows, x->bytes / 1024, x->worker_ms, x->server_ms);
}

void hps_profile_print_table(const hps_profile *p, FILE *out)
{
    shown_buf model;
    fprintf(out, "model %s, batch %d\n", shown(p->model_name, model), p->batch);
    for (int i = 0; i < p->n_devices; i++) {
        fputc('\n', out);
        print_device(&p->devices[i], out);
    }
}

int hps_profile_scale_layers(json_t *doc, const char *device_id, int first, int end, double factor,
                             const char *run)
{
    hps_error err;
    hps_profile *p = hps_profile_read(doc, "-", &err);
    const hps_profile_device *d = p ? hps_profile_device_find(p, device_id) : NULL;
    int rc = d && end <= d->n_layers ? 0 : -1;
    for (int l = first; rc == 0 && l < end; l++) hps_profile_layer_set_calibrated(&d->layers[l], factor, run);
    hps_profile_free(p);
    return rc;
}
