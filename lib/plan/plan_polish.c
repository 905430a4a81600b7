/* Dynamic-programming moves for the rl polish (hps-plan(1), rl).
 *
 * Both moves fix a throughput floor theta and look for the plan of least
 * summed rate (units x price, or x power for energy and EDP) in which every
 * stage and link is at least that fast, each stage on its fewest units; the
 * unit limits across stages are not modelled.  The plan found replaces the
 * current one only when the full cost model (plan_evaluate) scores it
 * better, so a move never makes a plan worse.
 *
 *   boundaries  the plan's sequence of stage types stays; the cut points
 *               between its stages are chosen by a DP over (stage, layer):
 *               O(m L^2) stage laws for m stages.  With one stage's type
 *               changed first, it also retypes a stage.
 *   window      the types of w consecutive layers are chosen afresh, all
 *               else fixed (the runs that cross the window's ends merge
 *               with what lies outside): a DP over (layer, type) in the
 *               window, O(w^2 T^2).
 *
 * Neither is the exact solver: the first keeps the type sequence, the second
 * sees w layers, and both ignore the limits across stages. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/hps_plan.h"
#include "plan/plan_internal.h"
#include "plan/plan_limits.h"

#define PLAN_RETYPE_STAGES 12

/* A partial plan's value: its rate, and its bottleneck to break ties (among
 * plans of one rate the fastest is best, for every objective). */
typedef struct {
    double c, thr;
} val;

static const val NONE = {HUGE_VAL, 0};

static int better(val x, val y)
{
    if (!(x.c < HUGE_VAL)) return 0;
    if (x.c < y.c * (1 - 1e-12)) return 1;
    return x.c <= y.c * (1 + 1e-12) && x.thr > y.thr;
}

static val plus(val x, val y)
{
    val v = {x.c + y.c, fmin(x.thr, y.thr)};
    if (!(x.c < HUGE_VAL) || !(y.c < HUGE_VAL)) v = NONE;
    return v;
}

/* Stage [first, end) on t at its fewest units, NONE when it cannot meet the
 * limit or is slower than theta. */
/* w[t]: the rate of a unit of t as the DPs price it. */
static val stage_val(const double *w, const plan_problem *p, int first, int end, int t, double theta)
{
    plan_law law;
    plan_stage_law(p, first, end, t, &law);
    int k = plan_provision(p, &law, t);
    if (!k) return NONE;
    val v = {k * w[t], 1000.0 * p->batch / plan_law_ms(&law, k)};
    return v.thr < theta ? NONE : v;
}

/* The link into layer i from a to b: its throughput as a value of rate 0,
 * NONE when slower than theta. */
static val link_val(const plan_problem *p, int i, int a, int b, double theta)
{
    double lm = plan_link_ms(p, i, a, b);
    val v = {0, lm > 0 ? 1000.0 * p->batch / lm : HUGE_VAL};
    return v.thr < theta ? NONE : v;
}

/* Replaces assign by cand when cand scores better; returns 1 then. */
static int accept(const plan_problem *p, int *assign, const int *cand, plan_eval *e, double *score,
                  plan_budget *b)
{
    plan_budget_evaluate(b, p, cand, e);
    double s = plan_score(e);
    if (!(s < *score * (1 - 1e-12))) return 0;
    *score = s;
    memcpy(assign, cand, (size_t)p->n_layers * sizeof *assign);
    return 1;
}

/* Cut points for the stage types ty[0..m) that minimise the rate at floor
 * theta, each within band layers of the plan's own cut[k] (cut[0] = 0,
 * cut[m] = L); writes the plan to out, returns 0 when none fits. */
static int boundaries_dp(const double *w, const plan_problem *p, const int *ty, const int *cut, int m, int band,
                         double theta, int *out)
{
    int L = p->n_layers;
    if (m > L) return 0;
    val *g = hps_malloc((size_t)(m + 1) * (L + 1) * sizeof *g);
    int *from = hps_malloc((size_t)(m + 1) * (L + 1) * sizeof *from);
    for (int k = 0; k <= m; k++)
        for (int e = 0; e <= L; e++) g[k * (L + 1) + e] = NONE;
    g[0] = (val){0, HUGE_VAL};
    for (int k = 0; k < m; k++)
        for (int s = k > 0 ? cut[k] - band : 0; s <= L - (m - k) && s <= cut[k] + band; s++) {
            if (s < k) continue;
            val base = g[k * (L + 1) + s];
            if (!(base.c < HUGE_VAL)) continue;
            if (k > 0) base = plus(base, link_val(p, s, ty[k - 1], ty[k], theta));
            if (!(base.c < HUGE_VAL)) continue;
            int last = k == m - 1;
            int e0 = last ? L : s + 1 > cut[k + 1] - band ? s + 1 : cut[k + 1] - band;
            for (int e = e0; e <= L - (m - k - 1) && (last || e <= cut[k + 1] + band); e++) {
                val v = plus(base, stage_val(w, p, s, e, ty[k], theta));
                if (better(v, g[(k + 1) * (L + 1) + e])) {
                    g[(k + 1) * (L + 1) + e] = v;
                    from[(k + 1) * (L + 1) + e] = s;
                }
            }
        }
    int ok = g[m * (L + 1) + L].c < HUGE_VAL;
    for (int k = m, e = L; ok && k > 0; k--) {
        int s = from[k * (L + 1) + e];
        for (int l = s; l < e; l++) out[l] = ty[k - 1];
        e = s;
    }
    free(g);
    free(from);
    return ok;
}

/* Types of layers [a, b) chosen afresh at floor theta, the rest fixed. */
static int window_dp(const double *w, const plan_problem *p, const int *assign, int a, int b, double theta, int *out)
{
    int L = p->n_layers, T = p->n_types, W = b - a;
    /* the run that crosses a starts at pf with type tp; the one that crosses b ends at sg with ts */
    int pf = a, tp = a > 0 ? assign[a - 1] : -1, sg = b, ts = b < L ? assign[b] : -1;
    while (pf > 0 && assign[pf - 1] == tp) pf--;
    while (sg < L && assign[sg] == ts) sg++;
    /* f[(i - a) * T + t], a < i < b: the best value of the stages from pf
     * (or a) that end at i, the last of them on t (constant stages outside
     * are left out) */
    val *f = hps_malloc((size_t)(W + 1) * T * sizeof *f);
    int *from = hps_malloc((size_t)(W + 1) * T * 2 * sizeof *from);
    for (int k = 0; k < (W + 1) * T; k++) f[k] = NONE;
    int best_s = -1, best_t = -1, best_u = -1;
    val best = NONE;
    for (int e = a + 1; e <= b; e++)
        for (int t = 0; t < T; t++) {
            /* the run [s, e) on t, after a run on u ending at s (u = -1: s = a) */
            int close = e == b, first_end = close && t == ts ? sg : e;
            for (int s = a; s < e; s++) {
                val st = s == a ? NONE : stage_val(w, p, s, first_end, t, theta);
                if (s > a && !(st.c < HUGE_VAL)) continue;
                for (int u = s == a ? -1 : 0; u < (s == a ? 0 : T); u++) {
                    if (u == t) continue;
                    val v;
                    if (s == a) {
                        if (tp < 0) v = stage_val(w, p, a, first_end, t, theta);
                        else if (t == tp) v = stage_val(w, p, pf, first_end, t, theta);
                        else v = plus(plus(stage_val(w, p, pf, a, tp, theta), link_val(p, a, tp, t, theta)),
                                      stage_val(w, p, a, first_end, t, theta));
                    } else {
                        v = f[(s - a) * T + u];
                        if (!(v.c < HUGE_VAL)) continue;
                        v = plus(plus(v, link_val(p, s, u, t, theta)), st);
                    }
                    if (close && ts >= 0 && t != ts)
                        v = plus(plus(v, link_val(p, b, t, ts, theta)), stage_val(w, p, b, sg, ts, theta));
                    if (close) {
                        if (better(v, best)) best = v, best_s = s, best_t = t, best_u = u;
                    } else if (better(v, f[(e - a) * T + t])) {
                        f[(e - a) * T + t] = v;
                        from[((e - a) * T + t) * 2] = s;
                        from[((e - a) * T + t) * 2 + 1] = u;
                    }
                }
            }
        }
    int ok = best.c < HUGE_VAL;
    if (ok) {
        memcpy(out, assign, (size_t)L * sizeof *out);
        for (int l = best_s; l < b; l++) out[l] = best_t;
        for (int e = best_s, t = best_u; e > a;) {
            int s = from[((e - a) * T + t) * 2], u = from[((e - a) * T + t) * 2 + 1];
            for (int l = s; l < e; l++) out[l] = t;
            e = s;
            t = u;
        }
    }
    free(f);
    free(from);
    return ok;
}

/* The floors tried: the plan's own bottleneck and a few below it, down to
 * the limit. */
static int floors(const plan_problem *p, const plan_eval *e, double *theta)
{
    double hi = e->throughput, lo = p->min_throughput * (1 - 1e-12);
    if (!(hi < HUGE_VAL) || hi < lo) hi = lo;
    int n = 0;
    theta[n++] = hi * 1.1;
    theta[n++] = hi * 1.03;
    theta[n++] = hi * (1 - 1e-12);
    for (int k = 1; k <= 3; k++) theta[n++] = lo * pow(hi / lo, 1 - k / 3.0);
    return n;
}

/* ---- planning with the unit limits ---------------------------------------
 *
 * The moves above see the unit limits across stages only as a price, and
 * where memory confines layers to a few types of 1 to 6 units that steers
 * badly.  plan_dp_limits plans with them (plan_limits.c): a DP over (layer,
 * type of the last stage, units used of the binding types) at a throughput floor, each stage
 * on the fewest units and servers carrying it.  The types it tracks are the
 * ones the plan without them takes past their limits, one or two at a time
 * (the state grows with the product of their limits); the rest are priced,
 * more each round they overflow. */

#define LIMITS_LADDER 8 /* floors from the limit to the fastest plan */
/* states x transitions of one DP at most: (L + 1) T x the tracked types'
 * unit combinations, x (L + T) */
#define LIMITS_MAX_WORK (1L << 24)
/* at the floor of the plan's own stage count, where the optimum most often
 * is: two types of 64 units both bind there (65 x 65 unit states) */
#define LIMITS_MAX_WORK_OWN (1L << 30)
#define LIMITS_MAX_STATES (1L << 23) /* 24 bytes each (plan_limits_best) */
#define LIMITS_ROUNDS 12

typedef struct {
    const plan_problem *p;
    int L, T;
    plan_law *law;  /* [plan_stage_index(row, first, end) T + t] */
    long *row;
    plan_option *opt; /* at the current floor; units 0 when none carries it */
    double w[PLAN_MAX_TYPES], server_w;
} limits_table;

long *plan_stage_rows(int n_layers)
{
    long *row = hps_malloc((size_t)(n_layers + 1) * sizeof *row);
    for (int i = 0, k = 0; i <= n_layers; k += n_layers - i, i++) row[i] = k;
    return row;
}

static void limits_table_init(limits_table *lt, const plan_problem *p)
{
    int L = p->n_layers, T = p->n_types;
    long n = (long)L * (L + 1) / 2;
    lt->p = p;
    lt->L = L;
    lt->T = T;
    lt->row = plan_stage_rows(L);
    lt->law = hps_malloc((size_t)n * T * sizeof *lt->law);
    lt->opt = hps_malloc((size_t)n * T * sizeof *lt->opt);
    for (int i = 0; i < L; i++)
        for (int e = i + 1; e <= L; e++)
            for (int t = 0; t < T; t++) plan_stage_law(p, i, e, t, &lt->law[plan_stage_index(lt->row, i, e) * T + t]);
    for (int t = 0; t < T; t++) lt->w[t] = plan_unit_weight(p, t);
    lt->server_w = plan_server_weight(p);
}

static void limits_table_free(limits_table *lt)
{
    free(lt->row);
    free(lt->law);
    free(lt->opt);
}

static void limits_table_floor(limits_table *lt, double theta)
{
    long n = lt->row[lt->L] * lt->T;
    for (long k = 0; k < n; k++)
        if (!plan_stage_at_level(lt->p, &lt->law[k], (int)(k % lt->T), theta, &lt->opt[k])) lt->opt[k].units = 0;
}

/* A stage at the table's floor, as plan_limits_togo prices it. */
static void limits_stage(const void *ctx, int first, int end, int t, plan_limits_stage *s)
{
    const limits_table *lt = ctx;
    const plan_option *o = &lt->opt[plan_stage_index(lt->row, first, end) * lt->T + t];
    s->units = o->units;
    s->servers = o->servers;
    s->thr = o->throughput;
    s->rate = o->units * lt->w[t] + o->servers * lt->server_w;
}

/* The plan of least rate at the DP's floor, into out with its units per
 * type; 0 when none, or when the state would pass max_work. */
static int limits_plan(const limits_table *lt, const plan_limits_dp *d, long max_work, int *out, int *units)
{
    long n = (long)(lt->L + 1) * lt->T * d->tr->nu;
    if (n * (lt->L + lt->T) > max_work || n > LIMITS_MAX_STATES) return 0;
    return plan_limits_best(d, out, units);
}

/* The floor a plan of n stages must carry at every stage: the limit through
 * its pipeline's bubble (as plan_evaluate asks). */
static double stage_floor(const plan_problem *p, int n) { return p->min_throughput / plan_bubble(p, n); }

static int stages_of(const int *a, int L)
{
    int n = 1;
    for (int l = 1; l < L; l++) n += a[l] != a[l - 1];
    return n;
}

/* At one floor: the plan with the unit limits planned, each round adding
 * the types that overflow to the tracked ones, smallest limit first, or
 * pricing them where the state would grow past max_work (then
 * subgradient steps on their prices, shrinking); each plan found is offered
 * to accept. */
static int limits_at_floor(limits_table *lt, double theta, long max_work, int *assign, int *cand, plan_eval *e,
                           double *score, plan_budget *b)
{
    const plan_problem *p = lt->p;
    int T = lt->T, units[PLAN_MAX_TYPES], improved = 0;
    double lam[PLAN_MAX_TYPES] = {0}, wmax = 0;
    /* the states of a unit combination, and of them what max_work allows */
    long base = (long)(lt->L + 1) * T, max_states = max_work / (lt->L + T);
    plan_tracked tr;
    plan_tracked_init(&tr);
    plan_limits_dp d = {p, theta, lam, &tr, limits_stage, lt};
    for (int t = 0; t < T; t++) wmax = fmax(wmax, lt->w[t]);
    limits_table_floor(lt, theta);
    for (int round = 0; round < LIMITS_ROUNDS && plan_budget_left(b); round++) {
        if (!limits_plan(lt, &d, max_work, cand, units)) break;
        improved |= accept(p, assign, cand, e, score, b);
        int any = 0, n_priced = 0, was[PLAN_MAX_TYPES];
        for (int t = 0; t < T; t++) {
            any |= units[t] > p->max_units[t];
            n_priced += was[t] = tr.priced[t];
        }
        if (!any && !n_priced) break;
        /* the priced types: a subgradient step, both ways (a plan within
         * the limits may still be priced too high), on the schedule of the
         * rl relaxation's prices (plan_limits_step_size) */
        plan_limits_price_step(p, units, plan_limits_step_size(wmax, round), NULL, PLAN_LIMITS_OVER_FLOOR, tr.priced, lam);
        plan_tracked_add(p, &tr, units, base, max_states < LIMITS_MAX_STATES ? max_states : LIMITS_MAX_STATES);
        /* a type priced now starts with a first step */
        for (int t = 0; t < T; t++) was[t] = tr.priced[t] && !was[t];
        plan_limits_price_step(p, units, plan_limits_step_size(wmax, 0), NULL, PLAN_LIMITS_OVER_FLOOR, was, lam);
    }
    return improved;
}

int plan_dp_limits(const plan_problem *p, int *assign, plan_budget *b)
{
    int L = p->n_layers, improved = 0;
    if (!plan_budget_left(b)) return 0;
    limits_table lt;
    limits_table_init(&lt, p);
    int *cand = hps_malloc((size_t)L * sizeof *cand);
    plan_eval e;
    plan_eval_init(&e, p);
    plan_budget_evaluate(b, p, assign, &e);
    double score = plan_score(&e), theta[LIMITS_LADDER + 8];
    int S = e.n_stages, n = 0;
    /* the floors of plans of about as many stages, the plan's own
     * bottleneck, and a ladder up to the fastest plan (the objective may pay
     * for speed) */
    theta[n++] = stage_floor(p, S);
    theta[n++] = stage_floor(p, 1);
    theta[n++] = stage_floor(p, S + 1);
    theta[n++] = stage_floor(p, S + 3);
    if (S > 1) theta[n++] = stage_floor(p, S - 1);
    if (e.feasible && e.throughput / e.bubble > theta[0] * 1.001) theta[n++] = e.throughput / e.bubble * (1 - 1e-12);
    double lo = theta[0], hi = plan_max_throughput(p, cand);
    for (int k = 1; k <= LIMITS_LADDER && hi > lo; k++) theta[n++] = lo * pow(hi / lo, (double)k / LIMITS_LADDER) * (1 - 1e-12);
    for (int k = 0; k < n && plan_budget_left(b); k++) {
        improved |= limits_at_floor(&lt, theta[k], k ? LIMITS_MAX_WORK : LIMITS_MAX_WORK_OWN, assign, cand, &e, &score, b);
        /* a plan of more stages than the floor assumed needs a higher one */
        int need = stages_of(assign, L);
        if (stage_floor(p, need) > theta[k] * (1 + 1e-9) && need != S)
            improved |= limits_at_floor(&lt, stage_floor(p, need), LIMITS_MAX_WORK, assign, cand, &e, &score, b);
    }
    plan_eval_free(&e);
    free(cand);
    limits_table_free(&lt);
    return improved;
}

int plan_dp_polish(const plan_problem *p, int *assign, int window, plan_budget *b)
{
    int L = p->n_layers, T = p->n_types, improved = 0;
    int *cand = hps_malloc((size_t)L * sizeof *cand), *ty = hps_malloc((size_t)L * sizeof *ty);
    int *cut = hps_malloc((size_t)(L + 1) * sizeof *cut);
    plan_eval e;
    plan_eval_init(&e, p);
    plan_budget_evaluate(b, p, assign, &e);
    double score = plan_score(&e), theta[8], w[PLAN_MAX_TYPES], wmax = 0;
    for (int t = 0; t < T; t++) wmax = fmax(wmax, plan_unit_weight(p, t));
    for (int round = 0, again = 1; again && round < 8 && plan_budget_left(b); round++) {
        again = 0;
        plan_budget_evaluate(b, p, assign, &e);
        int nt = floors(p, &e, theta);
        /* a type over its unit limit is priced up, so the DPs move units
         * off it (even rounds price every type plainly) */
        for (int t = 0; t < T; t++) {
            w[t] = plan_unit_weight(p, t);
            if (round % 2 && e.used[t] > p->max_units[t])
                w[t] += 4 * wmax * (e.used[t] - p->max_units[t]) / p->max_units[t];
        }
        /* boundaries, and boundaries after retyping one stage */
        int m = e.n_stages, band = L / 4 > 16 ? L / 4 : 16;
        for (int k = 0; k < m; k++) {
            ty[k] = e.stages[k].type;
            cut[k] = e.stages[k].first;
        }
        cut[m] = L;
        /* retyping tries m T sequences: only for short ones */
        int tries = m <= PLAN_RETYPE_STAGES ? m * T : 0;
        for (int z = -1; z < tries && plan_budget_left(b); z++) {
            int k = z < 0 ? 0 : z / T, u = z < 0 ? ty[0] : z % T, old = ty[k];
            if (z >= 0 && (u == old || (k > 0 && ty[k - 1] == u) || (k + 1 < m && ty[k + 1] == u))) continue;
            ty[k] = u;
            for (int q = 0; q < nt; q++)
                if (boundaries_dp(w, p, ty, cut, m, band, theta[q], cand) && accept(p, assign, cand, &e, &score, b)) again = 1;
            ty[k] = old;
            if (again) break; /* the stages changed */
        }
        /* windows, overlapping by half */
        int ww = window < L ? window : L, step = ww / 2 > 0 ? ww / 2 : 1;
        for (int a = 0; a < L && plan_budget_left(b); a += step) {
            int end = a + ww < L ? a + ww : L;
            for (int q = 0; q < nt; q++)
                if (window_dp(w, p, assign, a, end, theta[q], cand) && accept(p, assign, cand, &e, &score, b)) again = 1;
            if (end == L) break;
        }
        improved |= again;
        plan_budget_evaluate(b, p, assign, &e);
        if (!again && round % 2 == 0 && !e.feasible) again = 1; /* the priced-up round */
    }
    plan_eval_free(&e);
    free(cand);
    free(ty);
    free(cut);
    return improved;
}
