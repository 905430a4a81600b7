/* A plan made before, read back against its inputs: hps-plan show and
 * --explain. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/hps_plan_inputs.h"

int plan_reload_file(const char *path, plan_reloaded *rl, hps_error *err)
{
    memset(rl, 0, sizeof *rl);
    plan_file *pf = &rl->pf;
    if (plan_file_load(path, pf, err)) return -1;
    if (!pf->assign || !pf->objective[0] || !pf->min_throughput || !pf->samples || !pf->epochs)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: needs assignment, objective, min_throughput, samples and epochs",
                        path);
    return 0;
}

void plan_reload_sources(const plan_reloaded *rl, plan_sources *src)
{
    const plan_file *pf = &rl->pf;
    if (!src->model) src->model = pf->model_path;
    if (!src->cluster) src->cluster = pf->cluster_path;
    if (!src->data_stats) src->data_stats = pf->data_stats_path;
    src->rows_on_servers |= pf->rows_on_servers;
    /* the tables' rows it priced, unless given again */
    if (!src->row_dtype) src->row_dtype = pf->row_dtype;
    if (!src->rowwise) src->rowwise = pf->rowwise;
    if (!src->admit_after) src->admit_after = pf->admit_after;
    /* a profile read from stdin: the copy the plan kept (older plans kept none) */
    if (!src->n_profiles && pf->n_profiles && (!pf->stdin_profile || pf->stdin_profile_text)) {
        src->profiles = (const char *const *)pf->profile_paths;
        src->n_profiles = pf->n_profiles;
        src->stdin_profile = pf->stdin_profile_text;
    }
}

static int objective_index(const char *name)
{
    for (int i = 0; plan_objective_names[i]; i++)
        if (strcmp(name, plan_objective_names[i]) == 0) return i;
    return -1;
}

int plan_reload_inputs(plan_reloaded *rl, const plan_sources *src, hps_error *err)
{
    const plan_file *pf = &rl->pf;
    if (plan_inputs_load(src, &rl->in, err)) return -1;
    if (strcmp(pf->model_digest, rl->in.model->digest) != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: the plan was made for another model (digests differ)", src->model);
    if (strcmp(pf->cluster_digest, rl->in.cluster->digest) != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: the plan was made for another cluster (digests differ)",
                        src->cluster);
    plan_problem *p = rl->in.problem;
    int obj = objective_index(pf->objective);
    if (obj < 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: objective '%s' is not cost, time, energy or edp", pf->path,
                        pf->objective);
    p->objective = obj;
    p->min_throughput = pf->min_throughput;
    p->samples = pf->samples;
    p->epochs = pf->epochs;
    p->micro_batches = pf->micro_batches;
    if (pf->n_layers != p->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: the plan has %d layers, the model %d", pf->path, pf->n_layers,
                        p->n_layers);
    rl->assign = hps_malloc((size_t)p->n_layers * sizeof *rl->assign);
    for (int l = 0; l < p->n_layers; l++)
        if ((rl->assign[l] = hps_cluster_find(rl->in.cluster, pf->assign[l])) < 0)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: the plan names a type the cluster lacks", pf->assign[l]);
    return 0;
}

void plan_reload_search(plan_reloaded *rl, const plan_eval *e, plan_result *r, plan_meta *m)
{
    const plan_file *pf = &rl->pf;
    int same = plan_file_rechecked(pf, e);
    m->algorithm = pf->algorithm[0] ? pf->algorithm : "?";
    m->opts.seed = pf->seed;
    r->episodes = pf->episodes;
    r->timed_out = pf->timed_out;
    m->exact_objective = same ? pf->optimum : -1;
    r->optimal = same && pf->optimal && pf->optimum >= 0 &&
                 fabs(e->objective - pf->optimum) <= PLAN_FILE_TOLERANCE * pf->optimum;
    if (same || (!pf->optimal && pf->optimum < 0)) return;
    if (pf->predicted_objective < 0)
        hps_warnf("%s: records no predicted %s: its optimality is not known", pf->name, pf->objective);
    else
        hps_warnf("%s: evaluated again, its %s is %.6g, not the %.6g it records (edited, or other inputs): "
                  "its optimality is not known", pf->name, pf->objective, e->objective, pf->predicted_objective);
    /* the JSON shown is the file's: its claims go */
    json_t *s = json_object_get(pf->root, "search");
    if (json_is_object(s)) {
        json_object_set_new(s, "optimal", json_false());
        json_object_set_new(s, "gap", json_null());
    }
}

void plan_reloaded_free(plan_reloaded *rl)
{
    free(rl->assign);
    plan_file_free(&rl->pf);
    plan_inputs_free(&rl->in);
}
