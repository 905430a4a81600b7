/* --calibrate: a run's measured stage times folded back into the problem
 * (hps-plan(1), CALIBRATION).  Each stage's layers on its type get one factor
 * on their time t1, chosen so that the cost model's time of the stage, on
 * the units it ran on, is the time the run measured. */
#include <math.h>

#include "plan/hps_plan.h"

/* The model's pipeline runs at the bubble's share of its slowest stage's
 * rate, so that stage's time must be the step times the bubble; the rest of
 * that (reading, lookups, optimizer steps: what no stage computes) is charged
 * to every stage, as the model charges its per-step overhead to every stage.
 * A stage measured slower than that keeps a hundredth of its own time. */
void plan_calib_targets(plan_calib_stage *st, int n, double step_ms, double bubble)
{
    double slowest = 0;
    for (int s = 0; s < n; s++) slowest = fmax(slowest, st[s].measured_ms);
    double rest = step_ms * bubble - slowest;
    for (int s = 0; s < n; s++) st[s].target_ms = fmax(st[s].measured_ms + rest, 0.01 * st[s].measured_ms);
}

/* The model's time of the stage as the run ran it: its rows where it kept
 * them (a cache at its measured hit rate); one process keeps its tables and
 * hands its cuts over in memory (plan_law_in_process_ms). */
static double stage_ms(const plan_problem *p, plan_calib_stage *st)
{
    plan_law law;
    if (st->has_kept) plan_stage_law_kept(p, st->first, st->end, st->type, &st->kept, &law);
    else plan_stage_law(p, st->first, st->end, st->type, &law);
    st->priced_rows = law.rows;
    return st->in_process ? plan_law_in_process_ms(&law, st->units) : plan_law_ms(&law, st->units);
}

static void scale_layers(plan_problem *p, const plan_calib_stage *st, double f)
{
    for (int l = st->first; l < st->end; l++) p->t1_ms[l * p->n_types + st->type] *= f;
    plan_problem_prepare(p);
}

/* The time is linear in the layers' t1 (compute(k) in hps-plan(1)): one
 * secant step finds the factor; a second one covers a model that is not. */
static void calibrate_stage(plan_problem *p, plan_calib_stage *st)
{
    double f = 1, t = stage_ms(p, st);
    st->before_ms = t;
    st->clamped = 0;
    for (int i = 0; i < 2 && fabs(t - st->target_ms) > 1e-9 * st->target_ms; i++) {
        scale_layers(p, st, 2);
        double t2 = stage_ms(p, st), slope = (t2 - t) / f; /* per unit of factor */
        scale_layers(p, st, 0.5);
        if (!(slope > 0)) break; /* the layers' time does not move the stage */
        double next = f + (st->target_ms - t) / slope;
        if (next < PLAN_CALIB_MIN_FACTOR) next = PLAN_CALIB_MIN_FACTOR, st->clamped = 1;
        scale_layers(p, st, next / f);
        f = next;
        t = stage_ms(p, st);
        if (st->clamped) break;
    }
    st->factor = f;
    st->after_ms = t;
}

void plan_calibrate(plan_problem *p, plan_calib_stage *st, int n)
{
    for (int s = 0; s < n; s++) calibrate_stage(p, &st[s]);
}
