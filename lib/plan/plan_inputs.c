/* The planner's inputs: model, cluster and profiles reduced to a problem,
 * with the key statistics of hps-shard's manifest. */
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "data/hps_shard.h"
#include "plan/hps_plan_inputs.h"

void plan_slot_key_stats(const hps_slot_stats *st, plan_key_stats *ks)
{
    static const double top_n[4] = {1, 10, 100, 1000};
    for (int i = 0; i < 4; i++)
        if (st->top_share[i] > 0 && top_n[i] < st->distinct) {
            ks->n[ks->n_points] = top_n[i];
            ks->share[ks->n_points++] = st->top_share[i];
        }
    ks->lookups = st->lookups;
    if (st->distinct >= 1) {
        ks->n[ks->n_points] = st->distinct;
        ks->share[ks->n_points++] = 1;
    }
}

/* The data's slot the model's slot j takes its statistics from, or -1. */
static int data_slot(const hps_manifest *mf, const hps_model *m, int j)
{
    for (int i = 0; i < mf->schema.n_slots; i++)
        if (strcmp(mf->slot_names[i], m->slots[j].name) == 0) return i;
    return mf->schema.n_slots == m->n_slots ? j : -1;
}

int plan_problem_data_stats(plan_problem *p, const hps_model *m, const char *path, hps_error *err)
{
    size_t n = strlen(path);
    char *dir = hps_strdup(path);
    if (n >= 13 && strcmp(path + n - 13, "manifest.json") == 0)
        snprintf(dir, n + 1, "%.*s", n > 13 ? (int)(n - 14) : 1, n > 13 ? path : ".");
    hps_manifest *mf = hps_manifest_load(dir, err);
    free(dir);
    if (!mf) return -1;
    if (!mf->slot_stats) {
        hps_manifest_free(mf);
        return hps_fail(err, HPS_EXIT_USAGE, "%s: holds no key statistics (slots); shard the data again", path);
    }
    plan_key_stats *ks = hps_calloc((size_t)m->n_slots, sizeof *ks);
    for (int j = 0; j < m->n_slots; j++) {
        int d = data_slot(mf, m, j);
        if (d < 0) hps_log(2, "hps-plan: %s: no slot '%s': its rows take the default skew\n", path, m->slots[j].name);
        else {
            plan_slot_key_stats(&mf->slot_stats[d], &ks[j]);
            ks[j].rows = (double)mf->rows; /* the run's epochs are of them (a cache's first lookups) */
        }
    }
    plan_problem_key_stats(p, m, ks);
    free(ks);
    hps_manifest_free(mf);
    return 0;
}

static int load_profiles(const plan_sources *src, plan_inputs *in, hps_error *err)
{
    int n = src->n_profiles ? src->n_profiles : 1;
    for (int i = 0; i < n; i++) {
        const char *path = src->n_profiles ? src->profiles[i] : "-";
        int piped = strcmp(path, "-") == 0;
        char *text;
        size_t len;
        if (piped && src->stdin_profile) text = hps_strdup(src->stdin_profile), len = strlen(text);
        else if (hps_json_read(path, &text, &len, err)) return -1;
        int rc = hps_profiles_add(in->profiles, hps_path_name(path), text, len, err);
        if (piped && !in->stdin_profile) in->stdin_profile = text;
        else free(text);
        if (rc) return -1;
    }
    return 0;
}

int plan_inputs_load(const plan_sources *src, plan_inputs *in, hps_error *err)
{
    if (!(in->model = hps_model_load(src->model, err))) return -1;
    if (!(in->cluster = hps_cluster_load(src->cluster, err))) return -1;
    in->profiles = hps_profiles_new();
    if (load_profiles(src, in, err)) return -1;
    if (!(in->problem = plan_problem_build(in->model, in->cluster, in->profiles, err))) return -1;
    plan_problem *p = in->problem;
    p->rows_on_servers = src->rows_on_servers;
    p->row_dtype = src->row_dtype, p->rowwise = src->rowwise, p->admit_after = src->admit_after;
    if (src->data_stats && plan_problem_data_stats(p, in->model, src->data_stats, err)) return -1;
    if (plan_problem_tables(p, in->model) && p->admit_after > 1)
        hps_log(2, "hps-plan: --admit-after: slots without key statistics (--data-stats) count all their rows\n");
    for (int t = 0; t < in->cluster->n_types; t++)
        if (in->cluster->types[t].mem_bytes <= 0)
            hps_log(2, "hps-plan: %s: resource '%s' gives no mem_gib: its memory is not checked\n",
                    hps_path_name(src->cluster), in->cluster->types[t].name);
    return plan_problem_check_memory(p, err);
}

void plan_inputs_free(plan_inputs *in)
{
    plan_problem_free(in->problem);
    hps_profiles_free(in->profiles);
    free(in->stdin_profile);
    hps_cluster_free(in->cluster);
    hps_model_free(in->model);
    memset(in, 0, sizeof *in);
}
