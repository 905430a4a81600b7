/* What hps-train reads of a plan (hps-plan(5)), and the checks that tie the
 * plan to the model it was made for. */
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "train/hps_train.h"

void hps_train_plan_single(const hps_model *m, hps_train_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    /* path stays empty: no plan file ("plan": null in the metrics) */
    snprintf(plan->model_digest, sizeof plan->model_digest, "%s", m->digest);
    plan->batch = m->batch;
    plan->n_layers = m->n_layers;
    plan->n_stages = 1;
    plan->servers = 1;
    hps_train_stage *s = &plan->stages[0];
    snprintf(s->type, sizeof s->type, "cpu");
    snprintf(s->kind, sizeof s->kind, "cpu");
    s->first = 0;
    s->end = m->n_layers;
    s->units = 1;
    snprintf(s->rows, sizeof s->rows, "servers");
}

/* The plan must be for this model: its digest, and its layers. */
static int check_model(const plan_file *pf, const hps_model *m, hps_train_plan *plan, hps_error *err)
{
    if (!pf->model_digest[0]) return hps_fail(err, HPS_EXIT_USAGE, "%s: missing digests.model", pf->name);
    if (strcmp(pf->model_digest, m->digest) != 0)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: made for model %.19s..., but %s is %.19s... (re-run hps-plan)", pf->name,
                        pf->model_digest, m->path, m->digest);
    if (pf->n_layers && pf->n_layers != m->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: plans %d layers, the model has %d", pf->name, pf->n_layers,
                        m->n_layers);
    snprintf(plan->model_digest, sizeof plan->model_digest, "%s", pf->model_digest);
    plan->batch = pf->batch ? pf->batch : m->batch;
    plan->micro_batches = pf->micro_batches;
    plan->n_layers = m->n_layers;
    return 0;
}

int hps_train_plan_load(const char *path, const hps_model *m, hps_train_plan *plan,
                        hps_error *err)
{
    memset(plan, 0, sizeof *plan);
    plan_file pf;
    if (plan_file_load(path, &pf, err)) return -1;
    int rc = check_model(&pf, m, plan, err);
    if (rc == 0 && !pf.n_stages) rc = hps_fail(err, HPS_EXIT_USAGE, "%s: stages must be an array of 1 to %d stages",
                                               pf.name, HPS_TRAIN_MAX_STAGES);
    if (rc == 0 && pf.stages[pf.n_stages - 1].end != m->n_layers)
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: stages end at layer %d of %d", pf.name,
                      pf.stages[pf.n_stages - 1].end - 1, m->n_layers);
    if (rc == 0) {
        snprintf(plan->path, sizeof plan->path, "%s", pf.name);
        memcpy(plan->digest, pf.digest, sizeof plan->digest);
        /* a plan whose rows all live in HBM has no servers: the rows are then
         * this process's own tables, one shard */
        plan->servers = pf.n_servers ? pf.n_servers : 1;
        plan->n_stages = pf.n_stages;
        plan->predicted_samples_per_s = pf.predicted_throughput;
        plan->predicted_in_process = pf.predicted_in_process;
        for (int i = 0; i < pf.n_stages; i++) {
            const plan_file_stage *f = &pf.stages[i];
            hps_train_stage *s = &plan->stages[i];
            snprintf(s->type, sizeof s->type, "%s", f->type);
            snprintf(s->kind, sizeof s->kind, "%s", f->kind);
            snprintf(s->rows, sizeof s->rows, "%s", f->rows);
            s->first = f->first, s->end = f->end, s->units = f->units;
            s->predicted_ms = f->ms_per_batch;
            s->servers_ms = f->servers_ms;
            s->layers_ms = f->layers_ms;
        }
    }
    plan_file_free(&pf);
    return rc ? -1 : 0;
}
