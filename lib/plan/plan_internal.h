/* plan_internal: what the planner's files share and nobody else calls
 * (the planner's unit tests and benchmark aside): the cost model's parts,
 * the provisioning steps, and the solvers' budget, local searches and DPs. */
#ifndef PLAN_INTERNAL_H
#define PLAN_INTERNAL_H

#include "plan/hps_plan.h"

/* ---- the cost model's parts ----------------------------------------------- */

/* The memory part of the law: where the rows live (way: where they fit,
 * in HBM shards over the units, plan_law_shard, with least_units 0 when no
 * count within max_units holds them, on the servers, or where a run kept
 * them, kept: plan_stage_law_kept; NULL for the other ways), the working set. */
enum { PLAN_WAY_AUTO, PLAN_WAY_SHARDS, PLAN_WAY_SERVERS, PLAN_WAY_KEPT };
void plan_stage_memory(const plan_problem *p, int first, int end, int type, int way, const plan_kept *kept,
                       plan_law *law);
/* The fewest units and servers carrying `level`, the units within
 * max_units less the servers when the stage is on the servers' type; 0 when
 * none do (or the working set does not fit a unit). */
int plan_stage_at_level(const plan_problem *p, const plan_law *law, int type, double level, plan_option *o);
/* The fastest provisioning of the stage alone within its type's limit
 * (units and servers sharing it on the servers' type; servers up to
 * max_servers otherwise). */
void plan_stage_fastest(const plan_problem *p, const plan_law *law, int type, plan_option *o);
/* The next provisioning above cur: the fewest units and servers that carry
 * more than cur does; 0 when none does. */
int plan_stage_next(const plan_problem *p, const plan_law *law, int type, const plan_option *cur,
                    plan_option *next);
/* What a unit of type t and a server cost the objective per hour: the price,
 * or the power for energy and EDP (the rate the DPs of rl and its polish
 * minimise). */
static inline double plan_unit_weight(const plan_problem *p, int t)
{
    return p->objective == PLAN_OBJ_ENERGY || p->objective == PLAN_OBJ_EDP ? p->power[t] : p->price[t];
}
static inline double plan_server_weight(const plan_problem *p)
{
    return p->objective == PLAN_OBJ_ENERGY || p->objective == PLAN_OBJ_EDP ? p->server_power : p->server_price;
}

/* ---- the solvers' helpers ------------------------------------------------- */

/* What a search may spend: evaluations of the cost model, counted so that a
 * seed gives one plan on a busy machine and a quiet one, and a wall-clock
 * cap (--time-limit) that only guards against the pathological; cut says
 * that the cap, not the count, ended the search. */
typedef struct {
    long evals, max_evals;
    double deadline;
    int cut;
} plan_budget;

void plan_budget_init(plan_budget *b, long max_evals, double seconds);
/* 1 while evaluations and time are left (sets cut when the time is not). */
int plan_budget_left(plan_budget *b);
/* plan_evaluate, counted. */
void plan_budget_evaluate(plan_budget *b, const plan_problem *p, const int *assign, plan_eval *e);

/* The result's trace: the best feasible objective after so many evaluations. */
void plan_trace_add(plan_result *r, double episode, double objective);
/* Steepest descent over single-layer and whole-stage type changes. */
void plan_local_search(const plan_problem *p, int *assign, plan_budget *b);
/* The DP moves (plan_dp_polish), the local search, and both again while the
 * DP moves improve the plan. */
#define PLAN_POLISH_WINDOW 12
void plan_descend(const plan_problem *p, int *assign, plan_budget *b);
/* plan_descend, then until the budget is spent or PLAN_ILS_PATIENCE rounds
 * in a row gain nothing: move a random run to a random type, descend, keep
 * the better plan. */
#define PLAN_ILS_PATIENCE 200
void plan_iterated_search(const plan_problem *p, int *assign, uint64_t seed, plan_budget *b);
/* The rl polish's DP moves (plan_polish.c): re-choose the cut points of the
 * plan's stage sequence (also after retyping one stage), and the types of
 * windows of `window` layers, at a few throughput floors; keeps what the
 * cost model scores better.  Returns 1 when the plan improved. */
int plan_dp_polish(const plan_problem *p, int *assign, int window, plan_budget *b);
/* A DP that plans with the unit limits across stages (the binding types'
 * units in its state) at a few throughput floors; keeps what the cost model
 * scores better.  Returns 1 when the plan improved. */
int plan_dp_limits(const plan_problem *p, int *assign, plan_budget *b);
/* The stages [first, end) of n layers numbered row by row (the table of
 * stage laws of plan_dp_limits and of the rl policy): row[0..n] from
 * plan_stage_rows (row[n] is how many stages; free it), a stage's number
 * from plan_stage_index. */
long *plan_stage_rows(int n_layers);
static inline long plan_stage_index(const long *row, int first, int end) { return row[first] + end - first - 1; }

#endif
