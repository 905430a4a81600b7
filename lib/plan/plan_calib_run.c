/* --calibrate: the stages of a run hps-train measured, on the planner's
 * types, checked against the inputs the profiles describe. */
#include <string.h>

#include "plan/hps_plan_inputs.h"

int plan_calib_stages(const plan_inputs *in, const plan_sources *src, const plan_run *run, plan_calib_stage *st,
                      hps_error *err)
{
    const char *name = run->name;
    char shown[128]; /* names from the run's file, echoed on one line (hps_printable) */
    if (strcmp(run->model, in->model->name) != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: a run of model '%s', not %s's '%s'", name,
                        hps_printable(run->model, shown, sizeof shown), src->model, in->model->name);
    if (run->batch != (int)in->problem->batch)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: a run at batch %d, the profiles are of batch %d (profile at the run's batch)", name,
                        run->batch, (int)in->problem->batch);
    if (run->stages[run->n_stages - 1].end != in->model->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: its stages end at layer %d of %d", name,
                        run->stages[run->n_stages - 1].end - 1, in->model->n_layers);
    for (int s = 0; s < run->n_stages; s++) {
        const plan_run_stage *r = &run->stages[s];
        int t = hps_cluster_find(in->cluster, r->type);
        if (t < 0)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: stage %d ran on type '%s', which %s lacks", name, s,
                            hps_printable(r->type, shown, sizeof shown), src->cluster);
        st[s] = (plan_calib_stage){.type = t, .first = r->first, .end = r->end,
                                   .units = run->ranks ? r->units : 1, .measured_ms = r->measured_ms,
                                   .in_process = !run->ranks, .has_kept = r->has_kept, .kept = r->kept};
        if (!run->ranks) st[s].kept.shards = 0, st[s].kept.beside = 0; /* one process: every row its own */
    }
    return run->n_stages;
}
