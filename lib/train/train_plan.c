/* The plan hps-train runs: the plan file as lib/plan reads it (hps-plan(5)),
 * checked against the model it was made for, or one stage for runs without
 * a plan file. */
#include <stdio.h>
#include <string.h>

#include "plan/hps_plan_file.h"
#include "train/hps_train.h"

void hps_train_plan_single(const hps_model *m, plan_file *plan)
{
    memset(plan, 0, sizeof *plan);
    /* name stays NULL: no plan file ("plan": null in the metrics) */
    snprintf(plan->model_digest, sizeof plan->model_digest, "%s", m->digest);
    plan->batch = m->batch;
    plan->n_layers = m->n_layers;
    plan->n_stages = 1;
    plan_file_stage *s = &plan->stages[0];
    snprintf(s->type, sizeof s->type, "cpu");
    snprintf(s->kind, sizeof s->kind, "cpu");
    s->first = 0;
    s->end = m->n_layers;
    s->units = 1;
    snprintf(s->rows, sizeof s->rows, "servers");
}

/* The plan must be for this model: its digest, its layers, stages that
 * cover them. */
static int check_model(const plan_file *pf, const hps_model *m, hps_error *err)
{
    if (!pf->model_digest[0]) return hps_fail(err, HPS_EXIT_USAGE, "%s: missing digests.model", pf->name);
    if (strcmp(pf->model_digest, m->digest) != 0)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: made for model %.19s..., but %s is %.19s... (re-run hps-plan)", pf->name,
                        pf->model_digest, m->path, m->digest);
    if (pf->n_layers && pf->n_layers != m->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: plans %d layers, the model has %d", pf->name, pf->n_layers,
                        m->n_layers);
    if (!pf->n_stages)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: stages must be an array of 1 to %d stages", pf->name,
                        PLAN_MAX_STAGES);
    if (pf->stages[pf->n_stages - 1].end != m->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: stages end at layer %d of %d", pf->name,
                        pf->stages[pf->n_stages - 1].end - 1, m->n_layers);
    return 0;
}

int hps_train_plan_load(const char *path, const hps_model *m, plan_file *plan, hps_error *err)
{
    if (plan_file_load(path, plan, err)) return -1;
    if (check_model(plan, m, err)) {
        plan_file_free(plan);
        return -1;
    }
    /* what the plan may omit, the model says */
    if (!plan->batch) plan->batch = m->batch;
    plan->n_layers = m->n_layers;
    return 0;
}

static const char *optimizer_name(int rowwise) { return rowwise ? "rowwise-adagrad" : "adagrad"; }

int hps_train_plan_tables(const plan_file *plan, hps_train_opts *o, unsigned given, hps_error *err)
{
    if (!plan->has_tables) return 0;
    const char *fix = "leave it out to train the rows the plan priced, or re-run hps-plan with it";
    int admit = o->admit_after > 1 ? o->admit_after : 1, plan_admit = plan->admit_after > 1 ? plan->admit_after : 1;
    if ((given & HPS_TRAIN_GIVEN_ROW_DTYPE) && (int)o->row_dtype != plan->row_dtype)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: tables: row_dtype is '%s', but --row-dtype asks for '%s': %s",
                        plan->name, hps_row_dtype_names[plan->row_dtype], hps_row_dtype_names[o->row_dtype], fix);
    if ((given & HPS_TRAIN_GIVEN_SPARSE_OPTIMIZER) && !o->rowwise_adagrad != !plan->rowwise)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: tables: sparse_optimizer is '%s', but --sparse-optimizer asks for '%s': %s", plan->name,
                        optimizer_name(plan->rowwise), optimizer_name(o->rowwise_adagrad), fix);
    if ((given & HPS_TRAIN_GIVEN_ADMIT_AFTER) && admit != plan_admit)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: tables: admit_after is %d, but --admit-after asks for %d: %s",
                        plan->name, plan_admit, admit, fix);
    o->row_dtype = (hps_row_dtype)plan->row_dtype;
    o->rowwise_adagrad = plan->rowwise != 0;
    o->admit_after = plan_admit;
    return 0;
}
