/* Planning with the unit limits across stages (internal to lib/plan).
 *
 * The stage DP that the polish (plan_dp_limits) and the rl scheduler's
 * relaxation (its cost to go) share: at a throughput floor, the plan of least
 * summed rate whose every stage and link carries the floor, each stage on the
 * provisioning the caller gives.  A type's limit is kept in one of two ways:
 * its units are tracked in the DP's state (exact, but the state grows with
 * the product of the tracked limits), or its units are priced (a Lagrange
 * multiplier a unit, moved by projected subgradient steps).  hps-plan(1)
 * describes both callers. */
#ifndef HPS_PLAN_LIMITS_H
#define HPS_PLAN_LIMITS_H

#include <math.h>

#include "plan/plan_internal.h"

/* Which types the DP's state tracks and which are priced. */
typedef struct {
    long stride[PLAN_MAX_TYPES]; /* the tracked units as one number, mixed radix; 0: not tracked */
    long nu;                     /* combinations of the tracked units (1: none tracked) */
    int priced[PLAN_MAX_TYPES];  /* its limit would grow the state too far: priced */
} plan_tracked;

void plan_tracked_init(plan_tracked *tr);
/* Adds the types that units (a relaxed plan's units per type) takes past
 * their limits, smallest limit first (the most types fit in the state):
 * tracked while base x nu stays within max_states, priced past it.  Returns
 * how many it tracked. */
int plan_tracked_add(const plan_problem *p, plan_tracked *tr, const int *units, long base, long max_states);

/* A stage as the DP sees it at its floor: its rate (units and servers at
 * their weights), units (0: it cannot carry the floor), servers and
 * throughput. */
typedef struct {
    double rate, thr;
    int units, servers;
} plan_limits_stage;

typedef void plan_limits_stage_fn(const void *ctx, int first, int end, int t, plan_limits_stage *s);

/* The DP's problem: at floor theta, stages from stage(ctx, ...), the
 * tracked types' units within their limits and the units of any other type
 * t costing lam[t] more a unit. */
typedef struct {
    const plan_problem *p;
    double theta;
    const double *lam;
    const plan_tracked *tr;
    plan_limits_stage_fn *stage;
    const void *ctx;
} plan_limits_dp;

/* go and gt hold (L + 1) (T + 1) nu entries each: [(i (T + 1) + prev) nu + u]. */
static inline size_t plan_limits_at(const plan_limits_dp *d, int i, int prev, long u)
{
    return ((size_t)i * (d->p->n_types + 1) + prev) * d->tr->nu + u;
}

/* The cost to go, from the last layer back: go[at(i, prev, u)] the least
 * rate of layers [i, L) after a stage on prev (T: none) with the tracked
 * units u used before, HUGE_VAL when none; gt its bottleneck (among
 * completions of one rate the fastest). */
void plan_limits_togo(const plan_limits_dp *d, double *go, double *gt);
/* The relaxed plan the cost to go leads to from the first layer (of equal
 * rates the first found): its units per type, servers on the servers' type;
 * returns 0 when there is none. */
int plan_limits_follow(const plan_limits_dp *d, const double *go, int *units);
/* The plan of least rate at the floor, forward (of equal rates the fastest,
 * then the first found): its types into assign and its units per type into
 * units; 0 when none.  Its state is (L + 1) T nu.  The polish plans by it
 * rather than by following the cost to go: among plans of one rate the two
 * directions pick different ones, and the polish's plans would move (3 of
 * 40 random instances, same score, other types). */
int plan_limits_best(const plan_limits_dp *d, int *assign, int *units);

/* The prices' steps: wmax (the dearest unit's rate) at round 0, shrinking
 * by 0.9 a round; an overflow counts as a quarter at least, so that a type
 * just past its limit still moves.  The polish and the rl relaxation step
 * by it; the exact solver's dual bound steps its own way (halving where a
 * step finds no better bound, per type at its own rate): it prunes by the
 * bound, and only a bound that rises prunes more. */
#define PLAN_LIMITS_OVER_FLOOR 0.25
static inline double plan_limits_step_size(double wmax, int round) { return wmax * pow(0.9, round); }

/* One projected subgradient step on the prices of the types priced[t]
 * (NULL: every type), at the relaxed plan's units: each moves by step (times
 * weight[t] unless NULL) times its overflow (units - limit) / limit, at
 * least over_floor when it is over, and stays at or above 0.  The schedule
 * of steps is the caller's (see each caller for why).  Returns 1 when any
 * of them is over. */
int plan_limits_price_step(const plan_problem *p, const int *units, double step, const double *weight,
                           double over_floor, const int *priced, double *lam);

#endif
