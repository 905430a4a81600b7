/* The plan hps-train runs: the plan file as lib/plan reads it (hps-plan(5)),
 * checked against the model it was made for, or one stage for runs without
 * a plan file. */
#include <stdio.h>
#include <stdlib.h>
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
    if ((given & HPS_TRAIN_GIVEN_ADMIT_AFTER) && o->n_admit_slots)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: tables: admit_after is %d for every slot, but --admit-after asks for thresholds per "
                        "slot: %s",
                        plan->name, plan_admit, fix);
    if ((given & HPS_TRAIN_GIVEN_ADMIT_AFTER) && admit != plan_admit)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: tables: admit_after is %d, but --admit-after asks for %d: %s",
                        plan->name, plan_admit, admit, fix);
    o->row_dtype = (hps_row_dtype)plan->row_dtype;
    o->rowwise_adagrad = plan->rowwise != 0;
    o->admit_after = plan_admit;
    return 0;
}

/* "N" into *n, 1 to 65535; -1 otherwise. */
static int threshold_of(const char *text, int *n)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < 1 || v > 65535) return -1;
    *n = (int)v;
    return 0;
}

static int slot_index(const hps_model *m, const char *name)
{
    for (int i = 0; i < m->n_slots; i++)
        if (strcmp(m->slots[i].name, name) == 0) return i;
    return -1;
}

/* One item of the list: N, or SLOT=N. */
static int admit_item(const hps_model *m, char *item, hps_train_opts *o, hps_error *err)
{
    char *eq = strchr(item, '='), shown[128];
    int n, slot = -1;
    if (eq) *eq = '\0';
    if (threshold_of(eq ? eq + 1 : item, &n)) {
        if (eq) *eq = '=';
        return hps_fail(err, HPS_EXIT_USAGE, "--admit-after: '%s': expected N or SLOT=N, N from 1 to 65535",
                        hps_printable(item, shown, sizeof shown));
    }
    if (!eq) {
        o->admit_after = n;
        return 0;
    }
    if ((slot = slot_index(m, item)) < 0)
        return hps_fail(err, HPS_EXIT_USAGE, "--admit-after: '%s': %s has no slot of that name", hps_printable(item, shown, sizeof shown),
                        m->path);
    for (int i = 0; i < o->n_admit_slots; i++)
        if (o->admit_slot[i].slot == slot)
            return hps_fail(err, HPS_EXIT_USAGE, "--admit-after: slot '%s' is given twice", hps_printable(item, shown, sizeof shown));
    if (o->n_admit_slots == HPS_TRAIN_MAX_ADMIT_SLOTS)
        return hps_fail(err, HPS_EXIT_USAGE, "--admit-after: more than %d slots with a threshold of their own",
                        HPS_TRAIN_MAX_ADMIT_SLOTS);
    o->admit_slot[o->n_admit_slots].slot = slot;
    o->admit_slot[o->n_admit_slots++].after = n;
    return 0;
}

int hps_train_admit_slots(const hps_model *m, hps_train_opts *o, hps_error *err)
{
    if (!o->admit_spec) return 0;
    char *list = hps_strdup(o->admit_spec), *save = NULL;
    int rc = 0;
    o->n_admit_slots = 0;
    for (char *item = strtok_r(list, ",", &save); item && rc == 0; item = strtok_r(NULL, ",", &save))
        rc = admit_item(m, item, o, err);
    free(list);
    return rc;
}
