/* The simple schedulers: fixed:TYPE (the CPU-only and GPU-only plans),
 * greedy, brute force, and the local search that rl uses to polish. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_rng.h"
#include "plan/hps_plan.h"
#include "plan/plan_internal.h"

#define BRUTE_MAX 1e7

void plan_result_init(plan_result *r, const plan_problem *p)
{
    memset(r, 0, sizeof *r);
    r->assign = hps_calloc((size_t)p->n_layers, sizeof *r->assign);
}

void plan_result_free(plan_result *r)
{
    free(r->assign);
    r->assign = NULL;
}

/* Keeps the trace compact: when full, every other point is dropped. */
void plan_trace_add(plan_result *r, double episode, double objective)
{
    int cap = (int)(sizeof r->trace / sizeof r->trace[0]);
    if (r->n_trace == cap) {
        for (int i = 1; i < cap / 2; i++) r->trace[i] = r->trace[2 * i];
        r->trace[cap / 2 - 1] = r->trace[cap - 1];
        r->n_trace = cap / 2;
    }
    r->trace[r->n_trace].episode = episode;
    r->trace[r->n_trace].objective = objective;
    r->n_trace++;
}

int plan_solve_fixed(const plan_problem *p, int type, plan_result *r)
{
    for (int l = 0; l < p->n_layers; l++) r->assign[l] = type;
    r->found = 1;
    return 0;
}

/* Each layer alone, as its own stage, on the type where it costs least. */
int plan_solve_greedy(const plan_problem *p, plan_result *r)
{
    for (int l = 0; l < p->n_layers; l++) {
        double best = HUGE_VAL, fastest = -1;
        r->assign[l] = 0;
        for (int t = 0; t < p->n_types; t++) {
            plan_law law;
            plan_stage_law(p, l, l + 1, t, &law);
            int k = plan_provision(p, &law, t);
            double thr = 1000.0 * p->batch / plan_law_ms(&law, k ? k : p->max_units[t]);
            double v = k ? plan_objective_value(p, k * p->price[t], k * p->power[t], thr) : HUGE_VAL;
            if (v < best || (best == HUGE_VAL && thr > fastest)) r->assign[l] = t;
            if (v < best) best = v;
            if (thr > fastest) fastest = thr;
        }
    }
    r->found = 1;
    return 0;
}

int plan_solve_brute(const plan_problem *p, plan_result *r, hps_error *err)
{
    int L = p->n_layers, T = p->n_types;
    if (L * log((double)T) > log(BRUTE_MAX))
        return hps_fail(err, HPS_EXIT_USAGE,
                        "brute: %d^%d assignments are more than 10^7; use --algo exact", T, L);
    int *a = hps_calloc((size_t)L, sizeof *a);
    plan_eval e;
    plan_eval_init(&e, p);
    double best = HUGE_VAL;
    for (;;) {
        plan_evaluate(p, a, &e);
        double s = plan_score(&e);
        if (s < best) {
            best = s;
            memcpy(r->assign, a, (size_t)L * sizeof *a);
        }
        r->episodes++;
        int l = 0; /* odometer */
        while (l < L && ++a[l] == T) a[l++] = 0;
        if (l == L) break;
    }
    r->found = 1;
    r->optimal = 1;
    plan_eval_free(&e);
    free(a);
    return 0;
}

void plan_budget_init(plan_budget *b, long max_evals, double seconds)
{
    b->evals = 0;
    b->max_evals = max_evals > 0 ? max_evals : 1;
    b->deadline = hps_now() + (seconds > 0 ? seconds : 1e9);
    b->cut = 0;
}

int plan_budget_left(plan_budget *b)
{
    if (b->evals >= b->max_evals) return 0;
    if (hps_now() < b->deadline) return 1;
    b->cut = 1;
    return 0;
}

void plan_budget_evaluate(plan_budget *b, const plan_problem *p, const int *assign, plan_eval *e)
{
    b->evals++;
    plan_evaluate(p, assign, e);
}

/* Tries assign[lo, hi) = t; keeps it when the score improves. */
static int try_move(const plan_problem *p, int *assign, int *scratch, int lo, int hi, int t,
                    plan_eval *e, double *score, plan_budget *b)
{
    memcpy(scratch, assign, (size_t)p->n_layers * sizeof *assign);
    for (int l = lo; l < hi; l++) scratch[l] = t;
    plan_budget_evaluate(b, p, scratch, e);
    double s = plan_score(e);
    if (!(s < *score * (1 - 1e-12))) return 0;
    *score = s;
    memcpy(assign, scratch, (size_t)p->n_layers * sizeof *assign);
    return 1;
}

/* First-improvement descent: move a run of layers [lo, hi) to another type.
 * Runs of any length, not only single layers or whole stages, let a plan
 * move a stage boundary far or carve a new stage out of an old one in one
 * step; the cost is O(L^2 T) evaluations per sweep. */
void plan_local_search(const plan_problem *p, int *assign, plan_budget *b)
{
    int L = p->n_layers, T = p->n_types;
    int *scratch = hps_malloc((size_t)L * sizeof *scratch);
    plan_eval e;
    plan_eval_init(&e, p);
    plan_budget_evaluate(b, p, assign, &e);
    double score = plan_score(&e);
    for (int improved = 1; improved && plan_budget_left(b);) {
        improved = 0;
        for (int len = 1; len <= L && plan_budget_left(b); len++)
            for (int lo = 0; lo + len <= L && plan_budget_left(b); lo++)
                for (int t = 0; t < T; t++) {
                    int same = 1;
                    for (int l = lo; l < lo + len && same; l++) same = assign[l] == t;
                    if (!same) improved |= try_move(p, assign, scratch, lo, lo + len, t, &e, &score, b);
                }
    }
    plan_eval_free(&e);
    free(scratch);
}

/* The DP moves first: a few hundred evaluations move cuts and retype stages,
 * where one sweep of the local search costs O(L^2 T). */
void plan_descend(const plan_problem *p, int *assign, plan_budget *b)
{
    plan_dp_polish(p, assign, PLAN_POLISH_WINDOW, b);
    plan_local_search(p, assign, b);
    for (int k = 0; k < 4 && plan_budget_left(b); k++) {
        if (!plan_dp_polish(p, assign, PLAN_POLISH_WINDOW, b)) break;
        plan_local_search(p, assign, b);
    }
}

/* Iterated local search: from the best plan, move a random run of layers to
 * a random type and descend again (plan_descend); keep the result when it is
 * better; stop when the budget is spent or PLAN_ILS_PATIENCE rounds in a row
 * found nothing better.  The budget counts evaluations, so a seed gives one
 * plan (the deadline only guards against a pathological instance). */
void plan_iterated_search(const plan_problem *p, int *assign, uint64_t seed, plan_budget *b)
{
    int L = p->n_layers;
    int *trial = hps_malloc((size_t)L * sizeof *trial);
    plan_eval e;
    plan_eval_init(&e, p);
    hps_rng rng;
    hps_rng_seed(&rng, seed);
    plan_descend(p, assign, b);
    plan_budget_evaluate(b, p, assign, &e);
    double best = plan_score(&e);
    for (int idle = 0; idle < PLAN_ILS_PATIENCE && plan_budget_left(b); idle++) {
        memcpy(trial, assign, (size_t)L * sizeof *trial);
        for (int kick = 0; kick < 2; kick++) { /* two runs: a boundary moves as a new one appears */
            int lo = (int)hps_rng_below(&rng, (uint64_t)L), span = L / 8 > 4 ? L / 8 : 4;
            int len = 1 + (int)hps_rng_below(&rng, (uint64_t)(L - lo < span ? L - lo : span));
            int t = (int)hps_rng_below(&rng, (uint64_t)p->n_types);
            for (int l = lo; l < lo + len; l++) trial[l] = t;
        }
        plan_descend(p, trial, b);
        plan_budget_evaluate(b, p, trial, &e);
        if (plan_score(&e) < best * (1 - 1e-12)) {
            best = plan_score(&e);
            memcpy(assign, trial, (size_t)L * sizeof *trial);
            idle = -1;
        }
    }
    plan_eval_free(&e);
    free(trial);
}

int plan_solve_polish(const plan_problem *p, const plan_search_opts *o, plan_result *r)
{
    double t0 = hps_now();
    plan_budget b;
    plan_budget_init(&b, o->evaluations, o->time_limit);
    plan_max_throughput(p, r->assign);
    plan_iterated_search(p, r->assign, o->seed, &b);
    r->found = 1;
    r->found_by = "polish";
    r->episodes = b.evals;
    r->timed_out = b.cut;
    r->seconds = hps_now() - t0;
    return 0;
}
