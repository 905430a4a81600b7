/* The rl scheduler's instance: what the policy's features read of it, and
 * the relaxation whose cost to go they look ahead by (the stage DP of
 * plan_limits.c at a few throughput floors).  hps-plan(1), rl, describes
 * both. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_rl.h"

#define RL_PRICE_ROUNDS 24
#define RL_MAX_GO (1L << 18) /* states of the cost to go at one floor at most */
#define RL_TRACK_ROUNDS 4 /* rounds of the cost to go adding the types past their limits */



/* Stages kept per instance at most, over all floors (24 bytes each). */
#define RL_MAX_STAGES (1L << 22)

/* The stage [first, end) on t provisioned for floor j: at j = 0 its fewest
 * units for the limit (all it may have when no number meets it: then
 * *units is 0), above the fewest units and servers carrying floor[j] (as
 * plan_evaluate provisions a plan whose bottleneck is there; *units 0 and
 * HUGE_VAL when none do). */
static double stage_level_of(const rl_instance *in, const plan_law *law, int t, int j, int *units, double *thr)
{
    const plan_problem *p = in->p;
    plan_option o;
    if (plan_stage_at_level(p, law, t, j > 0 ? in->floor[j] : p->min_throughput, &o)) {
        *units = o.units;
        *thr = o.throughput;
        return o.units * in->w[t] + o.servers * in->server_w;
    }
    *units = 0;
    if (j > 0) {
        *thr = 0;
        return HUGE_VAL;
    }
    int servers = plan_stage_servers(p, law, p->min_throughput);
    servers = servers > 0 ? servers : 0;
    *thr = plan_stage_throughput(p, law, p->max_units[t], servers);
    return p->max_units[t] * in->w[t] + servers * in->server_w;
}

static double stage_at(const rl_instance *in, int j, int first, int end, int t, int *units, double *thr)
{
    if (!in->stages) {
        plan_law law;
        plan_stage_law(in->p, first, end, t, &law);
        return stage_level_of(in, &law, t, j, units, thr);
    }
    size_t k = (size_t)j * in->row[in->L] + plan_stage_index(in->row, first, end);
    const rl_stage *s = &in->stages[k * in->T + t];
    *units = s->units;
    *thr = s->thr;
    return s->rate;
}

/* The stage at the limit (floor 0). */
double plan_rl_stage_rate(const rl_instance *in, int first, int end, int t, int *units, double *thr)
{
    return stage_at(in, 0, first, end, t, units, thr);
}

static void stages_init(rl_instance *in)
{
    int L = in->L, T = in->T;
    long n = (long)L * (L + 1) / 2;
    if (n * T * RL_FLOORS > RL_MAX_STAGES) return;
    in->row = plan_stage_rows(L);
    in->stages = hps_malloc((size_t)n * T * RL_FLOORS * sizeof *in->stages);
}

/* Every stage at floors [j0, j1), when they are kept. */
static void stages_fill(rl_instance *in, int j0, int j1)
{
    int L = in->L, T = in->T;
    if (!in->stages) return;
    for (int i = 0; i < L; i++)
        for (int e = i + 1; e <= L; e++)
            for (int t = 0; t < T; t++) {
                plan_law law;
                plan_stage_law(in->p, i, e, t, &law);
                for (int j = j0; j < j1; j++) {
                    rl_stage *s = &in->stages[((size_t)j * in->row[L] + plan_stage_index(in->row, i, e)) * T + t];
                    s->rate = stage_level_of(in, &law, t, j, &s->units, &s->thr);
                }
            }
}

/* The stage DP of floor j (plan_limits.h): its stages at floor j, a stage's
 * units its own only (the policy's features count the units of the stages
 * placed so, and the cost to go must line up with them). */
typedef struct {
    const rl_instance *in;
    int j;
} rl_floor;

static void floor_stage(const void *ctx, int first, int end, int t, plan_limits_stage *s)
{
    const rl_floor *f = ctx;
    s->rate = stage_at(f->in, f->j, first, end, t, &s->units, &s->thr);
    s->servers = 0;
}

/* Prices for the unit limits across stages, which the relaxation leaves
 * out: projected subgradient steps at a floor raise the price of a type
 * whose units the relaxation's plan takes past its limit and lower that of
 * one it leaves units of, and the prices whose Lagrangian bound is highest
 * are kept (the exact solver's bound, used here only to steer).  Prices
 * that only rose overshot where several types bind at once: the plan left
 * types it could have filled to their limits. */
static void unit_prices(const rl_instance *in, int j, double *go, double *gt, double *lam)
{
    const plan_problem *p = in->p;
    int T = in->T;
    double wmax = 0, best[PLAN_MAX_TYPES], bound = -HUGE_VAL;
    for (int t = 0; t < T; t++) wmax = fmax(wmax, in->w[t]);
    memcpy(best, lam, sizeof best);
    plan_tracked none;
    plan_tracked_init(&none);
    rl_floor f = {in, j};
    plan_limits_dp d = {p, in->floor[j], lam, &none, floor_stage, &f};
    for (int round = 0; round < RL_PRICE_ROUNDS; round++) {
        int units[PLAN_MAX_TYPES];
        plan_limits_togo(&d, go, gt);
        plan_limits_follow(&d, go, units);
        double dual = go[plan_limits_at(&d, 0, T, 0)]; /* the relaxed rate from the first layer, the prices paid */
        for (int t = 0; t < T; t++) dual -= lam[t] * p->max_units[t];
        if (dual > bound) {
            bound = dual;
            memcpy(best, lam, sizeof best);
        }
        int over = plan_limits_price_step(p, units, plan_limits_step_size(wmax, round), NULL, PLAN_LIMITS_OVER_FLOOR,
                                          NULL, lam);
        if (!over && round == 0) break;
    }
    memcpy(lam, best, sizeof best);
}

/* The coarse floors, from the limit to the fastest plan. */
static void floors_init(rl_instance *in, double fastest)
{
    double lo = in->p->min_throughput, hi = fmax(fastest, lo);
    for (int j = 0; j < RL_COARSE; j++) in->floor[j] = lo * pow(hi / lo, (double)j / (RL_COARSE - 1)) * (1 - 1e-12);
}

/* The objective of the relaxation's plan at floor j (from the first layer). */
static double relaxed_objective(const rl_instance *in, int j)
{
    size_t at = (size_t)in->T * in->tr[j].nu;
    return plan_objective_value(in->p, in->togo[j][at], in->togo[j][at], in->togo_thr[j][at]);
}

/* The fine floors: between the neighbours of the best coarse one. */
static void floors_refine(rl_instance *in)
{
    int b = 0;
    for (int j = 1; j < RL_COARSE; j++)
        if (relaxed_objective(in, j) < relaxed_objective(in, b)) b = j;
    double lo = in->floor[b > 0 ? b - 1 : 0], hi = in->floor[b + 1 < RL_COARSE ? b + 1 : b];
    for (int k = 0; k < RL_FLOORS - RL_COARSE; k++)
        in->floor[RL_COARSE + k] = lo * pow(hi / lo, (k + 1.0) / (RL_FLOORS - RL_COARSE + 1));
}

/* The cost to go at floors [j0, j1): rounds of the relaxation, each adding
 * the types its plan takes past their limits to the tracked ones, smallest
 * limit first (the most types fit in the state), while the state stays
 * within RL_MAX_GO; the limits of any left over priced (unit_prices). */
static void togo_init(rl_instance *in, int j0, int j1)
{
    const plan_problem *p = in->p;
    int L = in->L, T = in->T;
    size_t base = (size_t)(L + 1) * (T + 1);
    double *go = hps_malloc(RL_MAX_GO * sizeof *go), *gt = hps_malloc(RL_MAX_GO * sizeof *gt);
    for (int j = j0; j < j1; j++) {
        int units[PLAN_MAX_TYPES], left = 0;
        plan_tracked *tr = &in->tr[j];
        double *lam = in->lam[j];
        rl_floor f = {in, j};
        plan_limits_dp d = {p, in->floor[j], lam, tr, floor_stage, &f};
        for (int t = 0; t < T; t++) lam[t] = 0;
        plan_tracked_init(tr);
        for (int round = 0; round < RL_TRACK_ROUNDS; round++) {
            plan_limits_togo(&d, go, gt);
            plan_limits_follow(&d, go, units);
            if (!plan_tracked_add(p, tr, units, (long)base, RL_MAX_GO)) break;
        }
        for (int t = 0; t < T; t++) left |= tr->priced[t];
        if (left) {
            unit_prices(in, j, go, gt, lam);
            for (int t = 0; t < T; t++)
                if (tr->stride[t]) lam[t] = 0;
        }
        in->togo[j] = hps_malloc(base * tr->nu * sizeof *in->togo[j]);
        in->togo_thr[j] = hps_malloc(base * tr->nu * sizeof *in->togo_thr[j]);
        plan_limits_togo(&d, in->togo[j], in->togo_thr[j]);
    }
    free(go);
    free(gt);
}



void plan_rl_prefix_init(rl_prefix *pre)
{
    memset(pre, 0, sizeof *pre);
    for (int j = 0; j < RL_FLOORS; j++) pre->thr[j] = HUGE_VAL;
}

void plan_rl_prefix_add(const rl_instance *in, rl_prefix *pre, int i, int e, int t)
{
    for (int j = 0; j < RL_FLOORS; j++) {
        int k;
        double thr, rate = stage_at(in, j, i, e, t, &k, &thr);
        if (!k || thr < in->floor[j]) rate = HUGE_VAL;
        pre->used[j][t] += k;
        pre->rate[j] += rate;
        pre->thr[j] = fmin(pre->thr[j], thr);
    }
}

/* The action's best estimate of the plan through it: over the floors the
 * stages before and the stage [i, e) on t carry, the objective of the
 * stages before, this stage and the relaxation's plan after it, within the
 * units the stages before leave (the whole plan, so that following the
 * best action at every step follows one floor's plan). */
double plan_rl_togo_objective(const rl_instance *in, int i, int e, int t, const rl_prefix *pre)
{
    const plan_problem *p = in->p;
    int T = in->T;
    double best = HUGE_VAL;
    for (int j = 0; j < RL_FLOORS; j++) {
        int k;
        double thr, rate = stage_at(in, j, i, e, t, &k, &thr);
        if (!k || thr < in->floor[j] || !(pre->rate[j] < HUGE_VAL)) continue;
        long u = 0;
        int fits = 1;
        for (int x = 0; x < T && fits; x++)
            if (in->tr[j].stride[x]) {
                int have = pre->used[j][x] + (x == t ? k : 0);
                fits = have <= p->max_units[x];
                u += have * in->tr[j].stride[x];
            }
        size_t at = ((size_t)e * (T + 1) + t) * in->tr[j].nu + u;
        if (!fits || !(in->togo[j][at] < HUGE_VAL)) continue;
        double c = pre->rate[j] + rate + in->togo[j][at] + (in->tr[j].stride[t] ? 0 : k * in->lam[j][t]);
        best = fmin(best, plan_objective_value(p, c, c, fmin(pre->thr[j], fmin(thr, in->togo_thr[j][at]))));
    }
    return best;
}

/* The reference for rewards and features: the best single-type plan, else
 * the fastest plan. */
void plan_rl_instance_init(rl_instance *in, const plan_problem *p, plan_budget *b)
{
    int L = p->n_layers, T = p->n_types;
    memset(in, 0, sizeof *in);
    in->p = p;
    in->L = L;
    in->T = T;
    in->wmin = HUGE_VAL;
    int by_power = p->objective == PLAN_OBJ_ENERGY || p->objective == PLAN_OBJ_EDP;
    for (int t = 0; t < T; t++) {
        in->w[t] = plan_unit_weight(p, t);
        if (!(in->w[t] > 0)) in->w[t] = 1e-9;
        in->wmin = fmin(in->wmin, in->w[t]);
    }
    in->server_w = plan_server_weight(p);
    int *a = hps_malloc((size_t)L * sizeof *a);
    plan_eval e;
    plan_eval_init(&e, p);
    double best = HUGE_VAL, rate = 0;
    for (int t = 0; t < T; t++) {
        for (int l = 0; l < L; l++) a[l] = t;
        plan_budget_evaluate(b, p, a, &e);
        if (e.feasible && e.objective < best) best = e.objective, rate = by_power ? e.power_w : e.cost_per_hour;
    }
    if (!(best < HUGE_VAL)) {
        plan_max_throughput(p, a);
        plan_budget_evaluate(b, p, a, &e);
        best = e.feasible ? e.objective : 1;
        rate = 0;
        for (int s = 0; s < e.n_stages; s++) rate += e.stages[s].units * in->w[e.stages[s].type];
    }
    in->ref_objective = best > 0 ? best : 1;
    in->ref_rate = rate > 0 ? rate : 1;
    floors_init(in, plan_max_throughput(p, a));
    stages_init(in);
    stages_fill(in, 0, RL_COARSE);
    togo_init(in, 0, RL_COARSE);
    floors_refine(in);
    stages_fill(in, RL_COARSE, RL_FLOORS);
    togo_init(in, RL_COARSE, RL_FLOORS);
    in->rest = hps_malloc((size_t)(L + 1) * T * sizeof *in->rest);
    in->rest_units = hps_calloc((size_t)(L + 1) * T, sizeof *in->rest_units);
    for (int s = 0; s < L; s++)
        for (int t = 0; t < T; t++) {
            double thr, r = plan_rl_stage_rate(in, s, L, t, &in->rest_units[s * T + t], &thr);
            in->rest[s * T + t] = in->rest_units[s * T + t] ? r : HUGE_VAL;
        }
    in->misfit = hps_calloc((size_t)T * (L + 1), sizeof *in->misfit);
    for (int t = 0; t < T; t++)
        for (int l = 0; l < L; l++)
            in->misfit[t * (L + 1) + l + 1] = in->misfit[t * (L + 1) + l] + (p->fits && !p->fits[l * T + t]);
    plan_eval_free(&e);
    free(a);
}

void plan_rl_instance_free(rl_instance *in)
{
    free(in->rest);
    free(in->rest_units);
    free(in->misfit);
    free(in->stages);
    free(in->row);
    for (int j = 0; j < RL_FLOORS; j++) {
        free(in->togo[j]);
        free(in->togo_thr[j]);
    }
}
