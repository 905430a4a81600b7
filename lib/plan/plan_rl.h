/* The rl scheduler's parts (internal to lib/plan): the policy's weights,
 * the instance as the policy sees it and its relaxation (plan_rl_relax.c),
 * the policy file (plan_policy_file.c).  hps-plan(1), rl, describes the
 * algorithm. */
#ifndef HPS_PLAN_RL_H
#define HPS_PLAN_RL_H

#include "plan/plan_limits.h"

#define RL_F 16 /* features per action */
#define RL_H 8 /* hidden units of the scorer */
#define RL_NP (RL_H * RL_F + RL_H + RL_H + RL_F)

struct plan_policy {
    float w[RL_NP]; /* w1 [RL_H][RL_F], b1 [RL_H], w2 [RL_H], v [RL_F] */
    uint64_t seed;
    long instances, episodes; /* of its pre-training; 0 when untrained */
};

/* Throughput floors of the cost to go: RL_COARSE from the limit to the
 * fastest plan, then the rest between the neighbours of the coarse floor
 * whose relaxed plan scores best (the optimum's bottleneck lies anywhere
 * between, and a plan of least rate at a floor far below it is another plan) */
#define RL_COARSE 8
#define RL_FLOORS 16

typedef struct {
    double rate, thr;
    int units;
} rl_stage;

typedef struct {
    const plan_problem *p;
    int L, T;
    double w[PLAN_MAX_TYPES], wmin; /* a unit's rate: price, or power for energy and EDP */
    double server_w;                 /* a server's */
    double ref_rate, ref_objective;  /* the reference plan's */
    double *rest;                    /* [e * T + t]: rate of [e, L) as one stage on t; HUGE_VAL when none */
    int *rest_units;                 /* [e * T + t]: its units (0 when none meets the limit) */
    int *misfit;                     /* [t * (L + 1) + i]: layers before i that do not fit t */
    /* Every stage's rate, units and throughput at every floor,
     * [(j row[L] + plan_stage_index(row, first, end)) T + t]: the episodes ask for
     * each many times (NULL when L is too large to keep them) */
    rl_stage *stages;
    long *row;
    /* togo[j] [(i (T + 1) + prev) nu[j] + u]: the least rate of
     * layers [i, L) after a stage on prev (T: none) with the units u used
     * before, each stage on the fewest units and servers carrying floor[j]
     * and every link as fast: a relaxation, at a few throughput floors, as
     * the actions' cost to go; HUGE_VAL when none.  The types the plain
     * relaxation takes past their limits are tracked, as many as RL_MAX_GO
     * allows (tr[j], plan_limits.h); the limits of any others are priced,
     * lam[j][t] a unit (unit_prices) */
    double floor[RL_FLOORS], lam[RL_FLOORS][PLAN_MAX_TYPES];
    plan_tracked tr[RL_FLOORS];
    double *togo[RL_FLOORS], *togo_thr[RL_FLOORS];
} rl_instance;

/* The reference for rewards and features: the best single-type plan, else
 * the fastest plan; then the relaxation's cost to go at every floor. */
void plan_rl_instance_init(rl_instance *in, const plan_problem *p, plan_budget *b);
void plan_rl_instance_free(rl_instance *in);
/* The stage [first, end) on t at the limit: its rate, *units (0 when no
 * number meets the limit) and *thr. */
double plan_rl_stage_rate(const rl_instance *in, int first, int end, int t, int *units, double *thr);

/* What the stages placed so far take at each floor of the cost to go: their
 * units per type, their summed rate and their bottleneck; rate HUGE_VAL once
 * a stage cannot carry the floor. */
typedef struct {
    int used[RL_FLOORS][PLAN_MAX_TYPES];
    double rate[RL_FLOORS], thr[RL_FLOORS];
} rl_prefix;

void plan_rl_prefix_init(rl_prefix *pre);
/* Adds the stage [i, e) on t. */
void plan_rl_prefix_add(const rl_instance *in, rl_prefix *pre, int i, int e, int t);
/* The action's best estimate of the objective of the plan through the stage
 * [i, e) on t after the stages pre (the relaxation's cost to go). */
double plan_rl_togo_objective(const rl_instance *in, int i, int e, int t, const rl_prefix *pre);

#endif
