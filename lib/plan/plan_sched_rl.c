/* The rl scheduler.  HeterPS trains a recurrent policy that emits a type per
 * layer; measured, such a policy learned nothing in 2048 episodes (the polish
 * did the work), because a per-layer chain of 128 choices is a needle in a
 * haystack of T^128 plans.  This policy acts at the level of stages:
 *
 *   state   the first layer i still to place, the previous stage's type,
 *           the units each type already runs
 *   action  a stage: a type t and an end e, the layers [i, e) on t; types
 *           that cannot hold a layer of the run (the problem's fits mask)
 *           and the previous type are masked out
 *   policy  a softmax over the actions of a small MLP's score of each
 *           action's features: what the stage costs at its fewest units
 *           against a reference plan, per layer and with the rest of the
 *           chain on one type, its headroom, its link, the unit limits,
 *           and the same costs relative to the state's best action (so
 *           the weights carry over from one instance to another); one
 *           looks ahead, the objective of the whole plan through the
 *           action by a relaxation (togo_objective), and one says whether
 *           the action is on the relaxation's best plan
 *   reward  -log(objective / reference plan's), or a penalty growing with
 *           the violation when infeasible; advantages normalised over a
 *           batch of samples; PPO's clipped ratio over a few epochs per
 *           batch, an entropy bonus that decays, Adam.
 *
 * The weights start from a policy pre-trained over seeded random instances
 * (plan_policy_pretrain, hps-plan --train-policy; the shipped file is
 * lib/plan/rl-policy.json, built in) and go on learning on the instance.
 * Every step is counted in cost-model evaluations, not seconds, and runs on
 * one thread: the same seed gives the same plan on any machine (unless
 * --time-limit cuts the run, which hps-plan then says).  The rest of the
 * budget goes to the polish, from the best plans the policy sampled: a DP
 * that plans with the unit limits across stages (plan_dp_limits), then the
 * descent and the iterated search (plan_iterated_search); the plan's search
 * record says which part found it. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "core/hps_rng.h"
#include "plan/plan_limits.h"

#define RL_F 16 /* features per action */
#define RL_H 8 /* hidden units of the scorer */
#define RL_NP (RL_H * RL_F + RL_H + RL_H + RL_F)
#define RL_BATCH 16
#define RL_EPOCHS 2
#define RL_CLIP 0.2f
#define RL_LR 0.01f
/* Exploration: a sample follows the softmax with probability 1 - eps and
 * is uniform over the unmasked actions otherwise (the policy is that
 * mixture, in the updates too), eps falling linearly from RL_EPS0 to RL_EPS1
 * over a run, and the softmax's entropy earns a bonus that decays linearly
 * to a tenth.  A policy pre-trained without them collapsed onto one plan per
 * instance and sampled worse than random search; with eps at a quarter to
 * the end, a plan of 60 stages almost never followed the policy's choice at
 * every step. */
#define RL_EPS0 0.25f
#define RL_EPS1 0.02f
#define RL_ENTROPY0 0.2f
#define RL_GREEDY_EVERY 16 /* updates between two evaluations of the policy's likeliest plan */
#define RL_ELITE 4        /* best sampled plans the polish starts from */
#define RL_LIMITS_STARTS 2 /* of them, those planned afresh with the unit limits (plan_dp_limits) */
#define RL_PRUNE 70       /* relaxed cost in percent above the state's best past which a stage is left out */
#define RL_PRICE_ROUNDS 24
/* Throughput floors of the cost to go: RL_COARSE from the limit to the
 * fastest plan, then the rest between the neighbours of the coarse floor
 * whose relaxed plan scores best (the optimum's bottleneck lies anywhere
 * between, and a plan of least rate at a floor far below it is another plan) */
#define RL_COARSE 8
#define RL_FLOORS 16
#define RL_MAX_GO (1L << 18) /* states of the cost to go at one floor at most */
#define RL_TRACK_ROUNDS 4 /* rounds of the cost to go adding the types past their limits */

struct plan_policy {
    float w[RL_NP]; /* w1 [RL_H][RL_F], b1 [RL_H], w2 [RL_H], v [RL_F] */
    uint64_t seed;
    long instances, episodes; /* of its pre-training; 0 when untrained */
};

static float *w1(float *w) { return w; }
static float *b1(float *w) { return w + RL_H * RL_F; }
static float *w2(float *w) { return w + RL_H * RL_F + RL_H; }
static float *v(float *w) { return w + RL_H * RL_F + 2 * RL_H; }

/* ---- one instance, as the policy sees it ---------------------------------- */

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
static double stage_rate(const rl_instance *in, int first, int end, int t, int *units, double *thr)
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
        /* many small steps, shrinking geometrically, the best bound kept: a
         * round is one DP, and the prices steer every action's cost to go */
        int over = plan_limits_price_step(p, units, wmax * pow(0.9, round), NULL, 0.25, NULL, lam);
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

/* What the stages placed so far take at each floor of the cost to go: their
 * units per type, their summed rate and their bottleneck; rate HUGE_VAL once
 * a stage cannot carry the floor. */
typedef struct {
    int used[RL_FLOORS][PLAN_MAX_TYPES];
    double rate[RL_FLOORS], thr[RL_FLOORS];
} rl_prefix;

static void prefix_init(rl_prefix *pre)
{
    memset(pre, 0, sizeof *pre);
    for (int j = 0; j < RL_FLOORS; j++) pre->thr[j] = HUGE_VAL;
}

static void prefix_add(const rl_instance *in, rl_prefix *pre, int i, int e, int t)
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
static double togo_objective(const rl_instance *in, int i, int e, int t, const rl_prefix *pre)
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
static void instance_init(rl_instance *in, const plan_problem *p, plan_budget *b)
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
            double thr, r = stage_rate(in, s, L, t, &in->rest_units[s * T + t], &thr);
            in->rest[s * T + t] = in->rest_units[s * T + t] ? r : HUGE_VAL;
        }
    in->misfit = hps_calloc((size_t)T * (L + 1), sizeof *in->misfit);
    for (int t = 0; t < T; t++)
        for (int l = 0; l < L; l++)
            in->misfit[t * (L + 1) + l + 1] = in->misfit[t * (L + 1) + l] + (p->fits && !p->fits[l * T + t]);
    plan_eval_free(&e);
    free(a);
}

static void instance_free(rl_instance *in)
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

static double reward_of(const rl_instance *in, const plan_eval *e)
{
    if (e->feasible) return -log(e->objective / in->ref_objective);
    return -2 - log1p(e->violation);
}

/* ---- actions and their features ------------------------------------------- */

typedef struct {
    int type, end;
    float f[RL_F];
} rl_action;

static float clampf(double x, double lo, double hi) { return (float)(x < lo ? lo : x > hi ? hi : x); }

/* The actions of state (i, prev, used) into out (room for T (L - i));
 * returns how many.  Masked out, as long as anything is left: stages that
 * cannot meet the limit, that take a type past its units, or whose link in
 * is too slow (mask 0); then types a layer does not fit and the previous
 * type (mask 1).  Mask 2 keeps the chain going whatever it costs. */
static int actions_of(const rl_instance *in, int i, int prev, const int *used, const rl_prefix *pre, rl_action *out)
{
    const plan_problem *p = in->p;
    int L = in->L, T = in->T, n = 0;
    int level = 0;
    for (int mask = 0; mask < 3 && n == 0; mask++) {
        level = mask;
        for (int t = 0; t < T; t++) {
            if (t == prev && mask < 2) continue;
            double lm = prev >= 0 ? plan_link_ms(p, i, prev, t) : 0;
            int slow_link = lm > 0 && 1000.0 * p->batch / lm < p->min_throughput;
            if (slow_link && mask == 0) continue;
            for (int e = i + 1; e <= L; e++) {
                if (mask < 2 && in->misfit[t * (L + 1) + e] > in->misfit[t * (L + 1) + i]) break;
                int k;
                double thr, rate = stage_rate(in, i, e, t, &k, &thr);
                int kk = k ? k : p->max_units[t];
                if (mask == 0 && (!k || used[t] + k > p->max_units[t])) continue;
                /* the rest of the chain as one stage on another type, within
                 * the units left if it can be (wide: else) */
                double rest = e < L ? HUGE_VAL : 0, wide = rest;
                for (int u = 0; e < L && u < T; u++) {
                    if (u == t) continue;
                    double r = in->rest[e * T + u];
                    wide = fmin(wide, r);
                    if (used[u] + in->rest_units[e * T + u] <= p->max_units[u]) rest = fmin(rest, r);
                }
                double share = rate / in->ref_rate;
                double whole = share + (rest < HUGE_VAL ? rest : wide) / in->ref_rate;
                rl_action *a = &out[n++];
                float *f = a->f;
                a->type = t;
                a->end = e;
                f[0] = 0; /* on the relaxation's best plan: set below */
                f[1] = k > 0;
                f[2] = clampf(share, 0, 4);
                f[3] = clampf(log(share * L / (e - i)) / 3, -3, 3);
                f[4] = (float)(e - i) / L;
                f[5] = e == L;
                f[6] = clampf(log(thr / p->min_throughput), -2, 2);
                f[7] = lm > 0 ? (slow_link ? -1 : 1) : 0;
                f[8] = used[t] + kk > p->max_units[t];
                f[9] = clampf((double)(used[t] + kk) / p->max_units[t], 0, 2);
                f[10] = (float)i / L;
                f[11] = clampf(log(in->w[t] / in->wmin) / 3, 0, 3);
                f[12] = clampf(whole, 0, 8);
                f[13] = rest < HUGE_VAL;
                f[14] = clampf(log(share * L / (e - i)), -10, 10); /* made relative below */
                /* the relaxed optimum's cost of the plan through this stage */
                double go = k ? togo_objective(in, i, e, t, pre) : HUGE_VAL;
                f[15] = clampf(go < HUGE_VAL ? log(go / in->ref_objective) : log(whole) + 5, -10, 10);
            }
        }
    }
    /* per-layer and whole-plan cost against the state's best */
    float best14 = 10, best15 = 10;
    for (int c = 0; c < n; c++)
        if (out[c].f[1] > 0) {
            best14 = fminf(best14, out[c].f[14]);
            best15 = fminf(best15, out[c].f[15]);
        }
    int kept = 0;
    for (int c = 0; c < n; c++) {
        out[c].f[14] = fminf(out[c].f[14] - best14, 4);
        /* in percent: the relaxation tells plans apart by a percent or
         * less, and the weights learnt on log ratios left its choice soft */
        out[c].f[15] = fminf(100 * (out[c].f[15] - best15), 100);
        /* the relaxation's best action (a plan of 60 stages followed it to
         * the optimum where the scorer's soft preference strayed) */
        out[c].f[0] = out[c].f[15] <= 0.01f;
        /* among the stages that can be had (mask 0), those whose plan
         * through them is RL_PRUNE percent above the best's by the relaxation are
         * left out: scoring them is most of a sample's time, and neither
         * the policy nor its exploration gains by them */
        if (level > 0 || out[c].f[15] <= RL_PRUNE) out[kept++] = out[c];
    }
    return kept;
}

/* tanh by one expf: libm's tanhf was 40% of a sample's time. */
static float fast_tanh(float z)
{
    float t = expf(-2 * fabsf(z)), y = (1 - t) / (1 + t);
    return z < 0 ? -y : y;
}

/* Scores of n actions, v.f + w2.tanh(w1 f + b1): the linear part learns
 * from any start (even all zero, where the hidden layer has no gradient).
 * h gets the hidden layer when not NULL ([n][RL_H]). */
static void score(const float *w, const rl_action *a, int n, float *s, float *h)
{
    float hb[RL_H];
    const float *lin = w + RL_H * RL_F + 2 * RL_H;
    for (int c = 0; c < n; c++) {
        float *hc = h ? h + (size_t)c * RL_H : hb, acc = 0;
        for (int k = 0; k < RL_F; k++) acc += lin[k] * a[c].f[k];
        for (int j = 0; j < RL_H; j++) {
            float z = w[RL_H * RL_F + j];
            for (int k = 0; k < RL_F; k++) z += w[j * RL_F + k] * a[c].f[k];
            hc[j] = fast_tanh(z);
            acc += w[RL_H * RL_F + RL_H + j] * hc[j];
        }
        s[c] = acc;
    }
}

/* Softmax of s in place; returns the entropy. */
static float softmax(float *s, int n)
{
    float mx = s[0], sum = 0, ent = 0;
    for (int c = 1; c < n; c++) mx = fmaxf(mx, s[c]);
    for (int c = 0; c < n; c++) sum += s[c] = expf(s[c] - mx);
    for (int c = 0; c < n; c++) {
        s[c] /= sum;
        if (s[c] > 0) ent -= s[c] * logf(s[c]);
    }
    return ent;
}

/* ---- episodes -------------------------------------------------------------- */

/* The steps of a batch of episodes, kept for the updates: each step's
 * actions, the one taken and its probability when sampled. */
typedef struct {
    rl_action *act;
    size_t n_act, cap_act;
    int *first, *taken, *episode; /* per step: its actions start at first */
    float *logp;
    int n_steps, cap_steps;
    float *s, *h; /* scratch for one step's scores and hidden layers */
    int cap_scratch;
} rl_steps;

static void steps_reserve(rl_steps *st, int L, int T)
{
    size_t need = st->n_act + (size_t)L * T;
    if (need > st->cap_act) {
        st->cap_act = need * 2;
        st->act = hps_realloc(st->act, st->cap_act * sizeof *st->act);
    }
    if (st->n_steps + 1 >= st->cap_steps) {
        st->cap_steps = st->cap_steps ? 2 * st->cap_steps : 256;
        st->first = hps_realloc(st->first, (size_t)(st->cap_steps + 1) * sizeof *st->first);
        st->taken = hps_realloc(st->taken, (size_t)st->cap_steps * sizeof *st->taken);
        st->episode = hps_realloc(st->episode, (size_t)st->cap_steps * sizeof *st->episode);
        st->logp = hps_realloc(st->logp, (size_t)st->cap_steps * sizeof *st->logp);
    }
    if (L * T > st->cap_scratch) {
        st->cap_scratch = L * T;
        st->s = hps_realloc(st->s, (size_t)L * T * sizeof *st->s);
        st->h = hps_realloc(st->h, (size_t)L * T * RL_H * sizeof *st->h);
    }
}

static void steps_free(rl_steps *st)
{
    free(st->act);
    free(st->first);
    free(st->taken);
    free(st->episode);
    free(st->logp);
    free(st->s);
    free(st->h);
}

/* One plan from the policy into assign (greedy: the likeliest action at
 * every step); its steps are appended to st when st is not NULL. */
static void episode(const rl_instance *in, const float *w, float eps, hps_rng *rng, int greedy, int *assign,
                    rl_steps *st, int id, rl_action *scratch, float *s)
{
    int used[PLAN_MAX_TYPES] = {0}, prev = -1;
    rl_prefix pre; /* at each floor of the cost to go */
    prefix_init(&pre);
    for (int i = 0; i < in->L;) {
        rl_action *a = scratch;
        if (st) {
            steps_reserve(st, in->L, in->T);
            a = st->act + st->n_act;
            s = st->s;
        }
        int n = actions_of(in, i, prev, used, &pre, a);
        score(w, a, n, s, NULL);
        softmax(s, n);
        for (int k = 0; k < n; k++) s[k] = (1 - eps) * s[k] + eps / n;
        int c = 0;
        if (greedy) {
            for (int k = 1; k < n; k++)
                if (s[k] > s[c]) c = k;
        } else {
            double u = hps_rng_uniform(rng), acc = 0;
            for (c = 0; c < n - 1; c++)
                if (u < (acc += s[c])) break;
        }
        if (st) {
            st->first[st->n_steps] = (int)st->n_act;
            st->taken[st->n_steps] = c;
            st->episode[st->n_steps] = id;
            st->logp[st->n_steps] = logf(s[c] + 1e-30f);
            st->n_steps++;
            st->n_act += (size_t)n;
            st->first[st->n_steps] = (int)st->n_act;
        }
        int t = a[c].type, e = a[c].end, k;
        double thr;
        stage_rate(in, i, e, t, &k, &thr);
        used[t] += k ? k : in->p->max_units[t];
        prefix_add(in, &pre, i, e, t);
        for (int l = i; l < e; l++) assign[l] = t;
        prev = t;
        i = e;
    }
}

/* ---- learning -------------------------------------------------------------- */

typedef struct {
    float m[RL_NP], v[RL_NP];
    long t;
} rl_adam;

static void adam_step(float *w, const float *g, rl_adam *ad)
{
    double norm = 0;
    for (int i = 0; i < RL_NP; i++) norm += (double)g[i] * g[i];
    float clip = norm > 1.0 ? (float)(1.0 / sqrt(norm)) : 1.0f; /* global norm <= 1 */
    ad->t++;
    float c1 = 1 - powf(0.9f, (float)ad->t), c2 = 1 - powf(0.999f, (float)ad->t);
    for (int i = 0; i < RL_NP; i++) {
        float gi = g[i] * clip;
        ad->m[i] = 0.9f * ad->m[i] + 0.1f * gi;
        ad->v[i] = 0.999f * ad->v[i] + 0.001f * gi * gi;
        w[i] -= RL_LR * (ad->m[i] / c1) / (sqrtf(ad->v[i] / c2) + 1e-8f);
    }
}

/* PPO: RL_EPOCHS passes over the batch, each one Adam step on the clipped
 * surrogate -min(ratio adv, clip(ratio) adv) minus the entropy bonus. */
static void update(float *w, rl_adam *ad, rl_steps *st, const float *adv, int n_episodes, float entropy, float eps)
{
    float g[RL_NP];
    for (int epoch = 0; epoch < RL_EPOCHS; epoch++) {
        memset(g, 0, sizeof g);
        for (int k = 0; k < st->n_steps; k++) {
            const rl_action *a = st->act + st->first[k];
            int n = st->first[k + 1] - st->first[k], c = st->taken[k];
            float A = adv[st->episode[k]], *s = st->s, *h = st->h;
            score(w, a, n, s, h);
            float ent = softmax(s, n), mixed = (1 - eps) * s[c] + eps / n;
            float ratio = expf(logf(mixed + 1e-30f) - st->logp[k]);
            /* outside the clip range on the side the advantage pushes, the
             * surrogate is flat: only the entropy term remains */
            int flat = (A > 0 && ratio > 1 + RL_CLIP) || (A < 0 && ratio < 1 - RL_CLIP);
            /* d log mixed / d s[q] = (1 - eps) s[c] (1[q = c] - s[q]) / mixed */
            float dlogp = flat ? 0 : -A * ratio / n_episodes * (1 - eps) * s[c] / mixed;
            for (int q = 0; q < n; q++) {
                float ds = dlogp * ((q == c) - s[q]);
                if (s[q] > 0) ds += entropy * s[q] * (logf(s[q]) + ent) / n_episodes;
                if (ds == 0) continue;
                const float *hq = h + (size_t)q * RL_H;
                for (int f = 0; f < RL_F; f++) v(g)[f] += ds * a[q].f[f];
                for (int j = 0; j < RL_H; j++) {
                    w2(g)[j] += ds * hq[j];
                    float dz = ds * w2(w)[j] * (1 - hq[j] * hq[j]);
                    b1(g)[j] += dz;
                    for (int f = 0; f < RL_F; f++) w1(g)[j * RL_F + f] += dz * a[q].f[f];
                }
            }
        }
        adam_step(w, g, ad);
    }
}

/* The best distinct plans sampled, best first. */
typedef struct {
    int n;
    double score[RL_ELITE];
    int *assign[RL_ELITE];
} elite;

static void elite_offer(elite *el, const int *a, int L, double s)
{
    for (int i = 0; i < el->n; i++)
        if (memcmp(el->assign[i], a, (size_t)L * sizeof *a) == 0) return;
    int i;
    if (el->n < RL_ELITE) i = el->n++;
    else if (s < el->score[RL_ELITE - 1]) i = RL_ELITE - 1;
    else return;
    for (; i > 0 && el->score[i - 1] > s; i--) {
        el->score[i] = el->score[i - 1];
        memcpy(el->assign[i], el->assign[i - 1], (size_t)L * sizeof *a);
    }
    el->score[i] = s;
    memcpy(el->assign[i], a, (size_t)L * sizeof *a);
}

/* What one run of the policy on an instance keeps. */
typedef struct {
    elite el;
    double best; /* plan_score of the best plan sampled */
    double mean_first, mean_last;
} rl_run;

static void progress(int on, const char *what, long ep, long total, double best)
{
    if (!on) return;
    fprintf(stderr, "\rrl: %s %ld/%ld  best %.6g   ", what, ep, total, best);
    if (ep >= total) fputc('\n', stderr);
}

/* The policy's likeliest plan. */
static void greedy_plan(const rl_instance *in, const float *w, int *assign)
{
    rl_action *a = hps_malloc((size_t)in->L * in->T * sizeof *a);
    float *s = hps_malloc((size_t)in->L * in->T * sizeof *s);
    episode(in, w, 0, NULL, 1, assign, NULL, 0, a, s);
    free(a);
    free(s);
}

/* A plan the policy made, to the elite and the trace. */
static void offer(rl_run *run, plan_result *r, const plan_budget *b, const int *assign, int L, const plan_eval *e)
{
    elite_offer(&run->el, assign, L, plan_score(e));
    if (plan_score(e) < run->best) {
        run->best = plan_score(e);
        if (e->feasible && r) plan_trace_add(r, (double)b->evals, e->objective);
    }
}

/* Samples `episodes` plans in batches, learning from each batch unless
 * frozen; offers every plan to run->el and traces the best into r. */
static void train(const rl_instance *in, float *w, rl_adam *ad, long episodes, int frozen, hps_rng *rng,
                  plan_budget *b, rl_run *run, plan_result *r, int show)
{
    const plan_problem *p = in->p;
    int L = in->L;
    rl_steps st = {0};
    plan_eval e;
    plan_eval_init(&e, p);
    int *assign = hps_malloc((size_t)L * sizeof *assign);
    float adv[RL_BATCH];
    double rew[RL_BATCH];
    long ep = 0, updates = (episodes + RL_BATCH - 1) / RL_BATCH;
    for (long u = 0; ep < episodes && plan_budget_left(b); u++) {
        int n = episodes - ep < RL_BATCH ? (int)(episodes - ep) : RL_BATCH;
        st.n_act = 0;
        st.n_steps = 0;
        double mean = 0, var = 0;
        float done = (float)u / (float)(updates > 1 ? updates - 1 : 1);
        if (u % RL_GREEDY_EVERY == 0) { /* the likeliest plan, as the policy now stands */
            greedy_plan(in, w, assign);
            plan_budget_evaluate(b, p, assign, &e);
            offer(run, r, b, assign, L, &e);
        }
        float eps = RL_EPS0 + (RL_EPS1 - RL_EPS0) * done;
        for (int k = 0; k < n; k++) {
            episode(in, w, eps, rng, 0, assign, &st, k, NULL, NULL);
            plan_budget_evaluate(b, p, assign, &e);
            rew[k] = reward_of(in, &e);
            mean += rew[k] / n;
            offer(run, r, b, assign, L, &e);
        }
        for (int k = 0; k < n; k++) var += (rew[k] - mean) * (rew[k] - mean) / n;
        for (int k = 0; k < n; k++) adv[k] = (float)((rew[k] - mean) / (sqrt(var) + 1e-6));
        if (u == 0) run->mean_first = mean;
        run->mean_last = mean;
        float entropy = RL_ENTROPY0 * (1 - 0.9f * done);
        if (!frozen && var > 1e-12) update(w, ad, &st, adv, n, entropy, eps);
        ep += n;
        progress(show, "episode", ep, episodes, run->best < 1e30 ? run->best : NAN);
    }
    free(assign);
    plan_eval_free(&e);
    steps_free(&st);
}

static void init_random(float *w, hps_rng *rng)
{
    float s1 = 1.0f / sqrtf((float)RL_F), s2 = 1.0f / sqrtf((float)RL_H);
    for (int i = 0; i < RL_H * RL_F; i++) w1(w)[i] = hps_rng_range(rng, -s1, s1);
    for (int i = 0; i < RL_H; i++) {
        b1(w)[i] = 0;
        w2(w)[i] = hps_rng_range(rng, -s2, s2);
    }
    for (int i = 0; i < RL_F; i++) v(w)[i] = hps_rng_range(rng, -s1, s1);
}

int plan_solve_rl(const plan_problem *p, const plan_search_opts *o, plan_result *r)
{
    int L = p->n_layers;
    double t0 = hps_now();
    long total = o->evaluations > 0 ? o->evaluations : 1000000;
    long episodes = o->episodes > 0 ? o->episodes : 2048;
    plan_budget b;
    plan_budget_init(&b, total, o->time_limit);
    hps_rng rng;
    hps_rng_seed(&rng, o->seed);
    float w[RL_NP];
    if (o->start == PLAN_START_RANDOM) init_random(w, &rng);
    else if (o->start == PLAN_START_UNIFORM) memset(w, 0, sizeof w);
    else {
        plan_policy *shipped = o->policy ? NULL : plan_policy_shipped();
        memcpy(w, (o->policy ? o->policy : shipped)->w, sizeof w);
        plan_policy_free(shipped);
    }
    rl_instance in;
    instance_init(&in, p, &b);
    rl_adam ad = {0};
    rl_run run = {.best = HUGE_VAL};
    for (int i = 0; i < RL_ELITE; i++) run.el.assign[i] = hps_malloc((size_t)L * sizeof(int));
    /* the policy keeps at most what the polish needs to start from */
    long own = o->polish ? total / 2 : total;
    train(&in, w, &ad, episodes < own ? episodes : own, o->frozen || o->start == PLAN_START_UNIFORM, &rng, &b,
          &run, r, o->progress);
    plan_eval e;
    plan_eval_init(&e, p);
    int *a = hps_malloc((size_t)L * sizeof *a);
    greedy_plan(&in, w, a);
    plan_budget_evaluate(&b, p, a, &e);
    elite_offer(&run.el, a, L, plan_score(&e));
    memcpy(r->assign, run.el.assign[0], (size_t)L * sizeof *a);
    double policy_best = run.el.score[0];
    if (policy_best < run.best && e.feasible) plan_trace_add(r, (double)b.evals, e.objective);
    r->found_by = "policy";
    if (o->polish) {
        /* each of the best samples plans with the unit limits (the moves
         * of the descent see them only as prices), then descends; then,
         * best first, each goes on with the iterated search while
         * evaluations are left (one whose search stalls leaves the budget
         * to the next start).  A descent may spend the budget: the best
         * plan so far is kept at every step. */
        double sc[RL_ELITE], best = HUGE_VAL;
        int order[RL_ELITE], n = 0;
        int *trial = hps_malloc((size_t)L * sizeof *trial);
        if (!(policy_best < 1e30)) { /* none feasible: the polish alone's start in the last place */
            plan_max_throughput(p, trial);
            plan_budget_evaluate(&b, p, trial, &e);
            run.el.n = run.el.n < RL_ELITE ? run.el.n : RL_ELITE - 1;
            elite_offer(&run.el, trial, L, plan_score(&e));
        }
        /* the two best, and the fastest plan when it is a start */
        for (int i = 0; i < run.el.n; i++)
            if (i < RL_LIMITS_STARTS || !(policy_best < 1e30)) plan_dp_limits(p, run.el.assign[i], &b);
        for (int i = 0; i < run.el.n; i++) {
            int seen = 0; /* where they led to one plan, it descends once */
            for (int q = 0; q < i && !seen; q++) seen = !memcmp(run.el.assign[q], run.el.assign[i], (size_t)L * sizeof *a);
            if (seen) continue;
            plan_descend(p, run.el.assign[i], &b);
            plan_budget_evaluate(&b, p, run.el.assign[i], &e);
            sc[i] = plan_score(&e);
            int k = n++;
            for (; k > 0 && sc[order[k - 1]] > sc[i]; k--) order[k] = order[k - 1];
            order[k] = i;
        }
        for (int k = 0; k < n; k++) {
            memcpy(trial, run.el.assign[order[k]], (size_t)L * sizeof *trial);
            if (plan_budget_left(&b)) plan_iterated_search(p, trial, o->seed + (uint64_t)k, &b);
            plan_budget_evaluate(&b, p, trial, &e);
            if (plan_score(&e) < best) {
                best = plan_score(&e);
                memcpy(a, trial, (size_t)L * sizeof *a);
            }
        }
        free(trial);
        if (best < policy_best * (1 - 1e-12)) {
            plan_budget_evaluate(&b, p, a, &e);
            memcpy(r->assign, a, (size_t)L * sizeof *a);
            r->found_by = "polish";
            if (e.feasible) plan_trace_add(r, (double)b.evals, e.objective);
        }
    }
    r->found = 1;
    r->episodes = b.evals;
    r->timed_out = b.cut;
    r->mean_first = run.mean_first;
    r->mean_last = run.mean_last;
    r->seconds = hps_now() - t0;
    free(a);
    plan_eval_free(&e);
    for (int i = 0; i < RL_ELITE; i++) free(run.el.assign[i]);
    instance_free(&in);
    return 0;
}

/* ---- pre-training and the policy file ------------------------------------- */

plan_policy *plan_policy_pretrain(uint64_t seed, int instances, long episodes, int show)
{
    static const int layers[] = {4, 8, 12, 16, 24, 32, 48, 64, 96, 128};
    plan_policy *pol = hps_calloc(1, sizeof *pol);
    hps_rng rng;
    hps_rng_seed(&rng, seed);
    init_random(pol->w, &rng);
    pol->seed = seed;
    pol->instances = instances;
    pol->episodes = episodes;
    rl_adam ad = {0};
    for (int k = 0; k < instances; k++) {
        /* not bench-plan's instances: seeds through hps_mix64, limits drawn
         * from an interval */
        int L = layers[hps_rng_below(&rng, sizeof layers / sizeof *layers)];
        int T = 2 + (int)hps_rng_below(&rng, 15);
        double tight = 0.2 + 0.75 * hps_rng_uniform(&rng);
        int limits = (int)hps_rng_below(&rng, 3), memory = hps_rng_below(&rng, 3) == 0;
        uint64_t at = hps_mix64(seed * 1000003u + (uint64_t)k);
        plan_problem *p = memory ? plan_problem_random_with_memory(at, L, T, tight, limits)
                                 : plan_problem_random(at, L, T, tight, limits);
        if (!p) continue; /* memory that fits nowhere */
        plan_budget b;
        plan_budget_init(&b, LONG_MAX, 0);
        rl_instance in;
        instance_init(&in, p, &b);
        rl_run run = {.best = HUGE_VAL};
        for (int i = 0; i < RL_ELITE; i++) run.el.assign[i] = hps_malloc((size_t)L * sizeof(int));
        train(&in, pol->w, &ad, episodes, 0, &rng, &b, &run, NULL, 0);
        for (int i = 0; i < RL_ELITE; i++) free(run.el.assign[i]);
        instance_free(&in);
        plan_problem_free(p);
        progress(show, "instance", k + 1, instances, run.best < 1e30 ? run.best : NAN);
    }
    return pol;
}

void plan_policy_free(plan_policy *pol) { free(pol); }

static const char *const policy_keys[] = {"hps_plan_policy", "features", "hidden", "weights", "trained", NULL};

plan_policy *plan_policy_parse(json_t *root, const char *name, hps_error *err)
{
    long long version, nf, nh;
    if (!json_is_object(root)) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: expected an object (an rl policy)", name);
        return NULL;
    }
    if (hps_json_known_keys(root, policy_keys, name, err) ||
        hps_json_int(root, "hps_plan_policy", HPS_REQUIRED, 1, 1, &version, name, err) ||
        hps_json_int(root, "features", HPS_REQUIRED, RL_F, RL_F, &nf, name, err) ||
        hps_json_int(root, "hidden", HPS_REQUIRED, RL_H, RL_H, &nh, name, err))
        return NULL;
    json_t *ws = json_object_get(root, "weights");
    if (!json_is_array(ws) || json_array_size(ws) != RL_NP) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: weights must be an array of %d numbers", name, RL_NP);
        return NULL;
    }
    plan_policy *pol = hps_calloc(1, sizeof *pol);
    for (size_t i = 0; i < RL_NP; i++) {
        json_t *v = json_array_get(ws, i);
        if (!json_is_number(v) || !isfinite(json_number_value(v))) {
            hps_fail(err, HPS_EXIT_RUNTIME, "%s: weights[%zu] must be a finite number", name, i);
            free(pol);
            return NULL;
        }
        pol->w[i] = (float)json_number_value(v);
    }
    json_t *tr = json_object_get(root, "trained");
    if (json_is_object(tr)) {
        pol->seed = (uint64_t)json_integer_value(json_object_get(tr, "seed"));
        pol->instances = (long)json_integer_value(json_object_get(tr, "instances"));
        pol->episodes = (long)json_integer_value(json_object_get(tr, "episodes"));
    }
    return pol;
}

plan_policy *plan_policy_load(const char *path, hps_error *err)
{
    json_t *root;
    if (hps_json_load(path, &root, err)) return NULL;
    plan_policy *pol = plan_policy_parse(root, hps_path_name(path), err);
    json_decref(root);
    return pol;
}

int plan_policy_save(const plan_policy *pol, const char *path, hps_error *err)
{
    json_t *ws = json_array();
    for (int i = 0; i < RL_NP; i++) json_array_append_new(ws, json_real(pol->w[i]));
    json_t *root = json_pack("{s:i, s:i, s:i, s:o, s:{s:I, s:I, s:I}}", "hps_plan_policy", 1, "features", RL_F,
                             "hidden", RL_H, "weights", ws, "trained", "seed", (json_int_t)pol->seed,
                             "instances", (json_int_t)pol->instances, "episodes", (json_int_t)pol->episodes);
    int rc = hps_json_write(path, root, err);
    json_decref(root);
    return rc;
}

extern const char plan_policy_text[]; /* lib/plan/rl-policy.json, built in by the Makefile */

plan_policy *plan_policy_shipped(void)
{
    hps_error err;
    json_t *root;
    plan_policy *pol = NULL;
    if (!hps_json_loadb("rl-policy.json", plan_policy_text, strlen(plan_policy_text), &root, &err)) {
        pol = plan_policy_parse(root, "rl-policy.json", &err);
        json_decref(root);
    }
    if (!pol) { /* a build error, not the user's: the file is built in */
        hps_report(&err);
        abort();
    }
    return pol;
}
