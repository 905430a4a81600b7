/* The exact solver: a proven optimum.
 *
 * Stages are contiguous, so a plan is a path through states (i, t): the first
 * i layers are planned and the last stage runs on type t.  Every objective
 * grows with the summed rate c (dollars or watts per hour of all units) and
 * falls with the bottleneck throughput, so a state keeps the Pareto front of
 * its partial plans in (c, throughput): a dominated partial plan can never
 * complete into a better plan than the one dominating it.
 *
 * Phase 1 ignores the per-type unit limits across stages (each stage alone
 * still fits its type, its servers included on theirs).  When its optimum
 * also fits the limits, it is the optimum.  Otherwise phase 2 repeats the
 * labelling with the units used per type in every label (every server
 * counted on the servers' type, hps-cluster(5)), dominance taking them into
 * account: exact, and slower.
 *
 * Both phases prune a partial plan by a lower bound on every completion
 * against the best plan known (or a guess a little above the best lower
 * bound, raised when a pass finds nothing under it).  The bound comes from
 * suffix fronts: for each (i, t), the Pareto front in (rate, throughput) of
 * the plans of layers [i, L) whose first stage is on t, built backwards with
 * the links and the alternation of types, only the unit limits relaxed
 * (fronts are capped by merging neighbours, which only weakens the bound).
 * Pairing a partial plan with every entry of a front couples the rate and the
 * bottleneck, where the cheapest and the fastest suffix need not be one plan.
 * For the tracked types, the fronts are also built with the rate priced up by
 * Lagrange multipliers lambda on their units (a few subgradient steps on the
 * dual at the root pick them): a completion keeping within the room r left
 * has rate at least its priced rate less sum lambda r (weak duality).  Per
 * type tables of the cheapest and fastest suffix within r units of that type
 * add the limits one type at a time, exactly.  Every bound is a relaxation,
 * so the optimum stays proven. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "plan/hps_plan.h"
#include "plan/plan_internal.h"
#include "plan/plan_limits.h"

#define EXACT_MAX_LABELS 20000000

typedef struct {
    double c, thr;
    double cf;       /* c with every unit at its share of an instance: a lower bound on any completion's */
    int prev;        /* the partial plan this one extends, or -1 */
    int first, end;  /* its last stage: layers [first, end) */
    int type, units; /* its last stage's type and units */
    int servers;     /* and its servers */
    int n_stages;    /* the pipeline's bubble grows with them */
} label;

/* A state's partial plans: their labels, and beside them what dominance
 * compares, so that it scans memory in order instead of chasing ids. */
typedef struct {
    int *ids, n, cap;
    double *c, *thr;
    int *n_stages;
    unsigned short *u; /* n_types per label */
} front;

/* A suffix plan's priced rate, bottleneck and tracked units. */
typedef struct {
    double c, thr;
    unsigned short u[PLAN_MAX_TYPES];
} sentry;

typedef struct {
    sentry *e;
    int n, cap;
} sfront;

#define EXACT_FAMILIES 3
#define EXACT_DUAL_ROUNDS 16
#define EXACT_FRONT_CAP 12
/* Evaluations the local search may spend on an incumbent (the proof does not
 * depend on it, only the time it takes): a count, so that a plan exact does
 * not finish within its bound is the same on any machine; the bound caps it. */
#define EXACT_INCUMBENT_EVALS 20000

/* Suffix fronts for one multiplier vector: at[i] is the Pareto front, in
 * (rate + sum of lambda x units, throughput), of the plans of layers [i, L)
 * (relaxed: no unit limits, no links, any type after any). */
typedef struct {
    double lambda[PLAN_MAX_TYPES];
    sfront *at;
    /* without links: [i * (T + 1) + t], the Pareto front of the union of
     * at[i * T + u] over u != t (t = T: over every u) */
    sfront *other;
} family;

typedef struct {
    const plan_problem *p;
    int with_units;
    int tracked[PLAN_MAX_TYPES]; /* types whose units the labels count */
    /* types rented in instances of several units, the objective the cost:
     * the labels count their units too, for the instances they fill */
    int inst[PLAN_MAX_TYPES];
    long ops;
    label *labels;
    unsigned short *units; /* n_types per label, when with_units */
    long n_labels, cap_labels;
    front *fronts;         /* (L + 1) x T */
    /* suffix fronts, one family per multiplier vector (see build_family) */
    int n_fam;
    family fam[EXACT_FAMILIES];
    /* for a tracked type t, the same bounds for suffixes that use at most r
     * units of t: [i * (max_units[t] + 1) + r] */
    double *cmin_t[PLAN_MAX_TYPES], *thrmax_t[PLAN_MAX_TYPES];
    /* per stage [j, i) on t, [(j * (L + 1) + i) * T + t]: its provisionings
     * at the levels from the limit up (plan_stage_next), rate and
     * throughput rising; n < 0 until computed */
    struct stage_opts {
        int n;
        double *c, *thr;
        int *k, *srv; /* units and servers */
        int n_groups, *group; /* their groups (cap_groups) for build_family; n_groups 0 until made */
    } *opts;
    int linked;            /* the cluster lists links (family.other is not built) */
    double upper;          /* best objective known */
    int best;              /* its label, or -1 */
    double deadline;
    int timed_out;
    int cut; /* the pass pruned a partial plan by the bound (not for lack of a completion) */
} exact_state;

/* Units of type u that option q of a stage on t takes from u's limit: its
 * own, and on the servers' type its servers (hps-cluster(5)). */
static int takes(const plan_problem *p, const struct stage_opts *so, int q, int t, int u)
{
    return plan_units_taken(p, t, so->k[q], so->srv[q], u);
}

/* The objective of a plan of n stages (at least 1) whose slowest stage or
 * link carries thr; for a partial plan of n stages a lower bound, as more
 * stages only widen the bubble. */
static double objective_of(const plan_problem *p, double c, double thr, int n)
{
    int power = p->objective == PLAN_OBJ_ENERGY || p->objective == PLAN_OBJ_EDP;
    return plan_objective_value(p, power ? 0 : c, power ? c : 0, thr * plan_bubble(p, n > 1 ? n : 1));
}

/* The provisionings of stage [j, i) on t that can be part of an optimum:
 * one per bottleneck level at or above the limit, each the fewest units and
 * servers carrying it (hps-plan(1), COST MODEL, provisioning), the cheapest
 * way its rows may live at that level.  A plan at its best provisioning has
 * every stage at one of them.  Rows in HBM shards need at least the units
 * that hold them (plan_law_shard: a stage's memory depends on its units), so
 * their options start at that count, whatever the level; the rate still
 * rises with the level (an option carrying a level carries every one
 * below), so the fronts and bounds built from these lists stay valid. */
static struct stage_opts *stage_options(exact_state *s, int j, int i, int t)
{
    const plan_problem *p = s->p;
    struct stage_opts *o = &s->opts[((size_t)j * (p->n_layers + 1) + i) * p->n_types + t];
    if (o->n >= 0) return o;
    plan_law law;
    plan_option x;
    int cap = 0;
    o->n = 0;
    plan_stage_law(p, j, i, t, &law);
    /* servers in the instances of their type are billed as its units */
    int st = p->server_type;
    double server_weight = st >= 0 && s->inst[st] ? plan_unit_weight(p, st) : plan_server_weight(p);
    for (int ok = plan_stage_at_level(p, &law, t, p->min_throughput, &x); ok;
         ok = plan_stage_next(p, &law, t, &x, &x)) {
        if (o->n == cap) {
            cap = cap ? 2 * cap : 4;
            o->c = hps_realloc(o->c, (size_t)cap * sizeof *o->c);
            o->thr = hps_realloc(o->thr, (size_t)cap * sizeof *o->thr);
            o->k = hps_realloc(o->k, (size_t)cap * sizeof *o->k);
            o->srv = hps_realloc(o->srv, (size_t)cap * sizeof *o->srv);
        }
        /* the stage's servers are a sum over stages too (plan_evaluate) */
        o->c[o->n] = x.units * plan_unit_weight(p, t) + x.servers * server_weight;
        o->thr[o->n] = x.throughput;
        o->k[o->n] = x.units;
        o->srv[o->n++] = x.servers;
    }
    return o;
}

/* Adds x to a front kept sorted by rate, throughput rising with it; drops
 * what x dominates. */
static void sfront_insert(sfront *f, const sentry *x)
{
    int pos = 0, hi = f->n; /* pos: the first entry dearer than x */
    while (pos < hi) {
        int mid = (pos + hi) / 2;
        if (f->e[mid].c <= x->c) pos = mid + 1;
        else hi = mid;
    }
    if (pos > 0 && f->e[pos - 1].thr >= x->thr) return; /* dominated */
    int end = pos;
    while (end < f->n && f->e[end].thr <= x->thr) end++;
    if (end == pos) {
        if (f->n == f->cap) f->e = hps_realloc(f->e, (size_t)(f->cap = f->cap ? 2 * f->cap : 8) * sizeof *f->e);
        memmove(f->e + pos + 1, f->e + pos, (size_t)(f->n - pos) * sizeof *f->e);
        f->n++;
    } else if (end > pos + 1) {
        memmove(f->e + pos + 1, f->e + end, (size_t)(f->n - end) * sizeof *f->e);
        f->n -= end - pos - 1;
    }
    f->e[pos] = *x;
}

/* Groups n entries of rate and throughput rising (thr) into at most cap
 * runs of neighbours, merging the two runs closest in throughput first: run
 * g is entries [first[g], first[g + 1]), and stands for them with its first
 * entry's rate and its last entry's throughput, a weaker but still valid
 * bound.  first has n + 1 slots; returns the number of runs. */
static int cap_groups(const double *thr, int n, int cap, int *first)
{
    double *r = hps_malloc((size_t)(n > 1 ? n : 1) * sizeof *r); /* r[g]: run g + 1's throughput over g's */
    int m = n;
    for (int g = 0; g < n; g++) first[g] = g;
    for (int g = 0; g + 1 < n; g++) r[g] = thr[g + 1] / thr[g];
    while (m > cap) {
        int k = 0;
        for (int g = 1; g + 1 < m; g++)
            if (r[g] < r[k]) k = g;
        memmove(first + k + 1, first + k + 2, (size_t)(m - k - 2) * sizeof *first);
        memmove(r + k, r + k + 1, (size_t)(m - k - 2) * sizeof *r);
        m--;
        first[m] = n;
        if (k > 0) r[k - 1] = thr[first[k + 1] - 1] / thr[first[k] - 1];
    }
    first[m] = n;
    free(r);
    return m;
}

/* Caps a front at n entries (cap_groups). */
static void sfront_cap(sfront *f, int n)
{
    if (f->n <= n) return;
    double *thr = hps_malloc((size_t)f->n * sizeof *thr);
    int *first = hps_malloc((size_t)(f->n + 1) * sizeof *first);
    for (int q = 0; q < f->n; q++) thr[q] = f->e[q].thr;
    int m = cap_groups(thr, f->n, n, first);
    for (int g = 0; g < m; g++) {
        f->e[g] = f->e[first[g]];
        f->e[g].thr = thr[first[g + 1] - 1];
    }
    f->n = m;
    free(thr);
    free(first);
}

/* Throughput of the link into a stage at layer i on b after one on a. */
static double link_thr(const plan_problem *p, int i, int a, int b)
{
    double lm = plan_link_ms(p, i, a, b);
    return lm > 0 ? 1000.0 * p->batch / lm : HUGE_VAL;
}

static void join_entry(sfront *dst, const sentry *x, const sentry *y, double thr, int T)
{
    sentry z = *y;
    z.c += x->c;
    z.thr = thr;
    for (int v = 0; v < T; v++) z.u[v] = (unsigned short)(z.u[v] + x->u[v]);
    sfront_insert(dst, &z);
}

/* Adds to dst the front of a stage (own) followed, across a link carrying
 * lt, by a suffix (nx): both sorted by rate and throughput rising.  A pair's
 * bottleneck is one side's (or the link's), and the cheapest entry of the
 * other side that reaches it does as well as any: so each entry of either
 * side pairs only with that one, |own| + |nx| candidates, not their product. */
static void join_fronts(sfront *dst, const sfront *own, const sfront *nx, double lt, int T)
{
    for (int q = 0, o = 0; q < nx->n; q++) { /* the suffix's (or the link's) bottleneck */
        double thr = fmin(nx->e[q].thr, lt);
        while (o < own->n && own->e[o].thr < thr) o++;
        if (o == own->n) break;
        join_entry(dst, &own->e[o], &nx->e[q], thr, T);
    }
    for (int o = 0, q = 0; o < own->n && own->e[o].thr < lt; o++) { /* the stage's */
        while (q < nx->n && nx->e[q].thr < own->e[o].thr) q++;
        if (q == nx->n) break;
        join_entry(dst, &own->e[o], &nx->e[q], own->e[o].thr, T);
    }
}

/* The front of stage [i, e) on t's provisionings in own, their rates priced
 * by lambda on the tracked types they take units of, in at most
 * EXACT_FRONT_CAP runs.  Units, servers and so the priced rate only grow
 * along the provisionings, so a run's first is its cheapest whatever lambda
 * is: the runs are grouped once, by throughput alone. */
static const sfront *stage_front(exact_state *s, int i, int e, int t, const double *lambda, sfront *own)
{
    const plan_problem *p = s->p;
    struct stage_opts *so = stage_options(s, i, e, t);
    if (so->n && !so->n_groups) {
        so->group = hps_malloc((size_t)(so->n + 1) * sizeof *so->group);
        so->n_groups = cap_groups(so->thr, so->n, EXACT_FRONT_CAP, so->group);
    }
    if (own->cap < so->n_groups) own->e = hps_realloc(own->e, (size_t)(own->cap = EXACT_FRONT_CAP) * sizeof *own->e);
    own->n = so->n ? so->n_groups : 0;
    for (int g = 0; g < own->n; g++) {
        int q = so->group[g];
        sentry *x = &own->e[g];
        memset(x->u, 0, sizeof x->u);
        x->c = so->c[q];
        x->thr = so->thr[so->group[g + 1] - 1];
        for (int v = 0; v < p->n_types; v++)
            if (s->tracked[v]) {
                x->u[v] = (unsigned short)takes(p, so, q, t, v);
                x->c += lambda[v] * x->u[v];
            }
    }
    return own;
}

static void sfront_add_all(sfront *dst, const sfront *src)
{
    for (int q = 0; q < src->n; q++) sfront_insert(dst, &src->e[q]);
}

/* fm->other: without links a completion's first stage on any type but the
 * partial plan's last pairs with one bottleneck, and the bound is monotone
 * in rate and throughput, so the least over all those types lies on the
 * Pareto front of their union: one front to scan instead of T.  Built from
 * unions of the types before t and after it. */
static void build_others(const exact_state *s, family *fm)
{
    int L = s->p->n_layers, T = s->p->n_types;
    sfront before = {0}, *after = hps_calloc((size_t)T + 1, sizeof *after);
    if (!fm->other) fm->other = hps_calloc((size_t)(L + 1) * (T + 1), sizeof *fm->other);
    for (int i = 0; i < L; i++) {
        after[T].n = 0;
        for (int t = T - 1; t >= 0; t--) {
            after[t].n = 0;
            sfront_add_all(&after[t], &after[t + 1]);
            sfront_add_all(&after[t], &fm->at[i * T + t]);
        }
        before.n = 0;
        for (int t = 0; t <= T; t++) {
            sfront *x = &fm->other[i * (T + 1) + t];
            x->n = 0;
            sfront_add_all(x, &before);
            if (t == T) break;
            sfront_add_all(x, &after[t + 1]);
            sfront_add_all(&before, &fm->at[i * T + t]);
        }
    }
    for (int t = 0; t <= T; t++) free(after[t].e);
    free(after);
    free(before.e);
}

/* Builds the suffix fronts for the multipliers lambda (0 on untracked types). */
static void build_family(exact_state *s, family *fm, const double *lambda)
{
    const plan_problem *p = s->p;
    int L = p->n_layers, T = p->n_types;
    double floor_thr = p->min_throughput * (1 - 1e-12);
    sfront own = {0}; /* one stage's provisionings */
    memcpy(fm->lambda, lambda, sizeof fm->lambda);
    if (!fm->at) fm->at = hps_calloc((size_t)(L + 1) * T, sizeof *fm->at);
    for (int k = 0; k < (L + 1) * T; k++) fm->at[k].n = 0;
    for (int i = L - 1; i >= 0; i--)
        for (int t = 0; t < T; t++) {
            sfront *dst = &fm->at[i * T + t];
            for (int e = i + 1; e <= L; e++) {
                const sfront *mine = stage_front(s, i, e, t, lambda, &own);
                if (!mine->n) continue; /* the stage cannot carry the limit */
                if (e == L) {
                    for (int o = 0; o < mine->n; o++) sfront_insert(dst, &mine->e[o]);
                    continue;
                }
                for (int u = 0; u < T; u++) {
                    if (u == t) continue;
                    double lt = link_thr(p, e, t, u);
                    if (lt < floor_thr) continue;
                    join_fronts(dst, mine, &fm->at[e * T + u], lt, T);
                    if (dst->n > 4 * EXACT_FRONT_CAP) sfront_cap(dst, EXACT_FRONT_CAP);
                }
            }
            sfront_cap(dst, EXACT_FRONT_CAP);
        }
    free(own.e);
    if (!s->linked) build_others(s, fm);
}

static void free_family(family *fm, int L, int T)
{
    for (int k = 0; fm->at && k < (L + 1) * T; k++) free(fm->at[k].e);
    for (int k = 0; fm->other && k < (L + 1) * (T + 1); k++) free(fm->other[k].e);
    free(fm->at);
    free(fm->other);
    fm->at = fm->other = NULL;
}

/* The least bound over front f's completions (see family_bound); stops at
 * the first at or below stop. */
static double front_bound(const plan_problem *p, const sfront *f, double c, double k, double th, int n,
                          double stop, sentry *arg)
{
    double best = HUGE_VAL;
    for (int q = 0; q < f->n; q++) {
        double v = objective_of(p, c + fmax(0, f->e[q].c - k), fmin(th, f->e[q].thr), n);
        if (v <= stop) return v;
        if (v < best) {
            best = v;
            if (arg) *arg = f->e[q];
        }
        if (f->e[q].thr >= th) break; /* past it the bottleneck stays th and only the rate grows */
    }
    return best;
}

/* The least objective a completion from layer i can reach by family fm, for
 * a partial plan of rate c and bottleneck thr whose last stage is on type
 * last (-1 at the start) with room left[t] in the tracked types: any
 * completion within the room has rate at least its priced rate less
 * sum lambda x room (weak duality), and at least 0.  Pruning asks only
 * whether the bound exceeds the best plan known: the first completion at or
 * below `stop` answers it, and is returned. */
static double family_bound(const exact_state *s, const family *fm, int i, int last, double c,
                           double thr, int n, const int *left, double stop, sentry *arg)
{
    const plan_problem *p = s->p;
    int T = p->n_types;
    if (i == p->n_layers) return objective_of(p, c, thr, n);
    double k = 0, best = HUGE_VAL;
    for (int t = 0; t < T; t++) k += fm->lambda[t] * left[t];
    if (fm->other) /* no links: every type but last in one front */
        return front_bound(p, &fm->other[i * (T + 1) + (last >= 0 ? last : T)], c, k, thr, n, stop, arg);
    for (int t = 0; t < T && best > stop; t++) {
        if (t == last) continue;
        sentry a;
        double th = last >= 0 ? fmin(thr, link_thr(p, i, last, t)) : thr;
        double v = front_bound(p, &fm->at[i * T + t], c, k, th, n, stop, arg ? &a : NULL);
        if (v < best) {
            best = v;
            if (arg) *arg = a;
        }
    }
    return best;
}

/* Suffix bounds for suffixes with at most r units of type t, r <= max_units[t]. */
static void suffix_bounds_limited(exact_state *s, int t)
{
    const plan_problem *p = s->p;
    int L = p->n_layers, R = p->max_units[t] + 1;
    double *cm = s->cmin_t[t] = hps_malloc((size_t)(L + 1) * R * sizeof(double));
    double *tm = s->thrmax_t[t] = hps_malloc((size_t)(L + 1) * R * sizeof(double));
    for (int r = 0; r < R; r++) {
        cm[L * R + r] = 0;
        tm[L * R + r] = HUGE_VAL;
    }
    for (int i = L - 1; i >= 0; i--) {
        for (int r = 0; r < R; r++) {
            cm[i * R + r] = HUGE_VAL;
            tm[i * R + r] = -1;
        }
        for (int e = i + 1; e <= L; e++)
            for (int u = 0; u < p->n_types; u++) {
                const struct stage_opts *so = stage_options(s, i, e, u);
                /* provisionings taking as many units of t: the first is the
                 * cheapest, the last the fastest (both grow along them) */
                for (int q = 0, end; q < so->n; q = end) {
                    int take = takes(p, so, q, u, t);
                    for (end = q + 1; end < so->n && takes(p, so, end, u, t) == take; end++) {}
                    for (int r = take; r < R; r++) {
                        cm[i * R + r] = fmin(cm[i * R + r], so->c[q] + cm[e * R + r - take]);
                        tm[i * R + r] = fmax(tm[i * R + r], fmin(so->thr[end - 1], tm[e * R + r - take]));
                    }
                }
            }
    }
}

/* A lower bound on the objective of any completion of a partial plan that
 * ends at layer i with rate c, bottleneck thr and the given units used;
 * exact only above the best plan known (family_bound stops below it). */
static double completion_bound(const exact_state *s, int i, int last, double c, double thr, int n,
                               const unsigned short *units)
{
    const plan_problem *p = s->p;
    int left[PLAN_MAX_TYPES] = {0};
    double cm = 0, tm = HUGE_VAL;
    for (int t = 0; s->with_units && t < p->n_types; t++) {
        if (!s->tracked[t]) continue;
        int R = p->max_units[t] + 1, r = left[t] = p->max_units[t] - units[t];
        cm = fmax(cm, s->cmin_t[t][i * R + r]);
        tm = fmin(tm, s->thrmax_t[t][i * R + r]);
    }
    if (!(cm < HUGE_VAL) || tm < 0) return HUGE_VAL; /* no completion fits */
    double b = objective_of(p, c + cm, fmin(thr, tm), n);
    for (int f = 0; f < s->n_fam && b <= s->upper * (1 + 1e-12); f++)
        b = fmax(b, family_bound(s, &s->fam[f], i, last, c, thr, n, left, s->upper * (1 + 1e-12), NULL));
    return b;
}

/* Units free in the instances that n units of type t fill. */
static int free_in_instances(const plan_problem *p, int t, int n)
{
    return plan_instances(p, t, n) * p->units_per_instance[t] - n;
}

/* Whatever completes b completes a for no more: a keeps within b's units
 * of the tracked types (their limits), and has at least b's units free in
 * the instances it pays for (its rate c counts whole instances, so the
 * completion's next units cost a no more than b). */
static int units_within(const exact_state *s, const unsigned short *a, const unsigned short *b)
{
    const plan_problem *p = s->p;
    for (int t = 0; s->with_units && t < p->n_types; t++) {
        if (s->tracked[t] && a[t] > b[t]) return 0;
        if (s->inst[t] && free_in_instances(p, t, a[t]) < free_in_instances(p, t, b[t])) return 0;
    }
    return 1;
}

/* Adds label l (with units u) to front f unless a label there dominates it
 * (no more rate, stages or units, no less throughput); drops what l
 * dominates.  The front is an antichain, so a label that is dominated
 * dominates none: one pass does both.  Without a bubble the stage count
 * changes nothing and is not compared. */
static void front_insert(exact_state *s, front *f, const label *l, const unsigned short *u)
{
    int T = s->p->n_types, staged = s->p->micro_batches != PLAN_NO_BUBBLE, n = 0;
    for (int k = 0; k < f->n; k++) {
        const unsigned short *fu = f->u + (size_t)k * T;
        if (f->c[k] <= l->c && f->thr[k] >= l->thr && (!staged || f->n_stages[k] <= l->n_stages) &&
            units_within(s, fu, u))
            return;
        if (!(l->c <= f->c[k] && l->thr >= f->thr[k] && (!staged || l->n_stages <= f->n_stages[k]) &&
              units_within(s, u, fu))) {
            if (n < k) {
                f->ids[n] = f->ids[k];
                f->c[n] = f->c[k];
                f->thr[n] = f->thr[k];
                f->n_stages[n] = f->n_stages[k];
                memcpy(f->u + (size_t)n * T, fu, (size_t)T * sizeof *fu);
            }
            n++;
        }
    }
    f->n = n;
    if (s->n_labels == s->cap_labels) {
        s->cap_labels = s->cap_labels ? 2 * s->cap_labels : 4096;
        s->labels = hps_realloc(s->labels, (size_t)s->cap_labels * sizeof *s->labels);
        if (s->with_units)
            s->units = hps_realloc(s->units, (size_t)s->cap_labels * s->p->n_types * sizeof *s->units);
    }
    int id = (int)s->n_labels++;
    s->labels[id] = *l;
    if (s->with_units) memcpy(s->units + (size_t)id * T, u, (size_t)T * sizeof *u);
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 8;
        f->ids = hps_realloc(f->ids, (size_t)f->cap * sizeof *f->ids);
        f->c = hps_realloc(f->c, (size_t)f->cap * sizeof *f->c);
        f->thr = hps_realloc(f->thr, (size_t)f->cap * sizeof *f->thr);
        f->n_stages = hps_realloc(f->n_stages, (size_t)f->cap * sizeof *f->n_stages);
        f->u = hps_realloc(f->u, (size_t)f->cap * T * sizeof *f->u);
    }
    f->ids[f->n] = id;
    f->c[f->n] = l->c;
    f->thr[f->n] = l->thr;
    f->n_stages[f->n] = l->n_stages;
    memcpy(f->u + (size_t)f->n * T, u, (size_t)T * sizeof *u);
    f->n++;
}

/* What n more units of type t cost beyond their share of an instance
 * (the stage options' rate) when `had` are rented: the rest of the
 * instances they open. */
static double instance_extra(const exact_state *s, int t, int had, int n)
{
    const plan_problem *p = s->p;
    if (!s->inst[t]) return 0;
    int k = p->units_per_instance[t];
    return ((plan_instances(p, t, had + n) - plan_instances(p, t, had)) * k - n) * plan_unit_weight(p, t);
}

/* Extends the partial plans of (j, u) by stage [j, i) on t, at each of its
 * provisionings that can matter: those below the partial plan's bottleneck
 * and the cheapest at or above it (more units there raise nothing). */
static void extend(exact_state *s, int j, int u, int i, int t, const struct stage_opts *so)
{
    const plan_problem *p = s->p;
    int T = p->n_types;
    front *dst = &s->fronts[i * T + t];
    unsigned short units[PLAN_MAX_TYPES] = {0};
    label l = {.prev = -1, .end = i, .type = t, .first = j, .n_stages = 1};
    int n = j == 0 ? 1 : s->fronts[j * T + u].n;
    double link_thr = HUGE_VAL, prev_c = 0, prev_cf = 0, prev_thr = HUGE_VAL;
    /* the counted types the stage takes units of: its own (ct, servers
     * included when it is the servers' type), the servers' otherwise (cs) */
    int st = p->server_type;
    int ct = s->tracked[t] || s->inst[t] ? t : -1;
    int cs = st >= 0 && st != t && (s->tracked[st] || s->inst[st]) ? st : -1;
    int lt = ct >= 0 && s->tracked[ct], ls = cs >= 0 && s->tracked[cs];
    if (j > 0) {
        double lm = plan_link_ms(p, j, u, t);
        if (lm > 0) link_thr = 1000.0 * p->batch / lm;
        if (link_thr < p->min_throughput * (1 - 1e-12)) return;
    }
    for (int q = 0; q < n; q++) {
        if (j > 0) {
            int id = s->fronts[j * T + u].ids[q];
            const label *prev = &s->labels[id];
            l.prev = id;
            l.n_stages = prev->n_stages + 1;
            prev_c = prev->c;
            prev_cf = prev->cf;
            prev_thr = prev->thr;
            if (s->with_units) memcpy(units, s->units + (size_t)id * T, T * sizeof *units);
        }
        double above = fmin(prev_thr, link_thr);
        for (int o = 0; o < so->n; o++) {
            int a = ct >= 0 ? takes(p, so, o, t, ct) : 0, b_srv = cs >= 0 ? takes(p, so, o, t, cs) : 0;
            /* a level past a limit may be followed by one within it: the
             * servers moving beside the stage's units free the servers' type */
            if ((lt && units[ct] + a > p->max_units[ct]) || (ls && units[cs] + b_srv > p->max_units[cs]))
                continue;
            l.units = so->k[o];
            l.servers = so->srv[o];
            l.cf = prev_cf + so->c[o];
            l.c = prev_c + so->c[o] + (ct >= 0 ? instance_extra(s, ct, units[ct], a) : 0) +
                  (cs >= 0 ? instance_extra(s, cs, units[cs], b_srv) : 0);
            l.thr = fmin(above, so->thr[o]);
            if (l.thr * plan_bubble(p, l.n_stages) < p->min_throughput * (1 - 1e-12)) continue;
            if (ct >= 0) units[ct] = (unsigned short)(units[ct] + a);
            if (cs >= 0) units[cs] = (unsigned short)(units[cs] + b_srv);
            double b = completion_bound(s, i, t, l.cf, l.thr, l.n_stages, units);
            if (b < HUGE_VAL && !(b <= s->upper * (1 + 1e-12))) s->cut = 1;
            if (b < HUGE_VAL && b <= s->upper * (1 + 1e-12))
                front_insert(s, dst, &l, units);
            if (ct >= 0) units[ct] = (unsigned short)(units[ct] - a);
            if (cs >= 0) units[cs] = (unsigned short)(units[cs] - b_srv);
            if ((++s->ops & 4095) == 0 && (hps_now() > s->deadline || s->n_labels > EXACT_MAX_LABELS)) {
                s->timed_out = 1;
                return;
            }
            if (so->thr[o] >= above) break;
        }
    }
}

static void reset_fronts(exact_state *s)
{
    for (int k = 0; k < (s->p->n_layers + 1) * s->p->n_types; k++) s->fronts[k].n = 0;
    s->n_labels = 0;
}

/* Runs one labelling pass; returns the best complete label, or -1. */
static int label_pass(exact_state *s)
{
    const plan_problem *p = s->p;
    int L = p->n_layers, T = p->n_types;
    reset_fronts(s);
    s->best = -1;
    s->cut = 0;
    for (int i = 1; i <= L; i++) {
        for (int t = 0; t < T; t++)
            for (int j = 0; j < i; j++) {
                const struct stage_opts *so = stage_options(s, j, i, t);
                if (!so->n) continue;
                for (int u = 0; u < (j ? T : 1); u++)
                    if (j == 0 || u != t) extend(s, j, u, i, t, so);
                if (s->timed_out || ((++s->ops & 4095) == 0 && hps_now() > s->deadline)) {
                    s->timed_out = 1;
                    return -1;
                }
            }
        if (i < L) continue;
        for (int t = 0; t < T; t++)
            for (int q = 0; q < s->fronts[L * T + t].n; q++) {
                int id = s->fronts[L * T + t].ids[q];
                const label *x = &s->labels[id];
                if (x->thr * plan_bubble(p, x->n_stages) < p->min_throughput * (1 - 1e-12)) continue;
                double f = objective_of(p, x->c, x->thr, x->n_stages);
                if (f < s->upper) {
                    s->upper = f;
                    s->best = id;
                }
            }
    }
    return s->best;
}

/* The plan of label id: its assignment and the units per type its stages take. */
static void trace_back(const exact_state *s, int id, int *assign, int *units)
{
    memset(units, 0, PLAN_MAX_TYPES * sizeof *units);
    for (; id >= 0; id = s->labels[id].prev) {
        plan_take_units(s->p, s->labels[id].type, s->labels[id].units, s->labels[id].servers, units);
        for (int l = s->labels[id].first; l < s->labels[id].end; l++) assign[l] = s->labels[id].type;
    }
}

/* A good plan to start from: the best of the fixed plans and greedy, polished. */
static double starting_plan(const plan_problem *p, int *assign, plan_eval *e, double deadline)
{
    plan_result r;
    plan_result_init(&r, p);
    double best = HUGE_VAL;
    for (int t = 0; t <= p->n_types; t++) {
        if (t < p->n_types) plan_solve_fixed(p, t, &r);
        else plan_solve_greedy(p, &r);
        plan_evaluate(p, r.assign, e);
        if (plan_score(e) < best) {
            best = plan_score(e);
            memcpy(assign, r.assign, (size_t)p->n_layers * sizeof *assign);
        }
    }
    plan_result_free(&r);
    plan_budget b;
    plan_budget_init(&b, EXACT_INCUMBENT_EVALS, fmax(deadline - hps_now(), 1e-6));
    plan_local_search(p, assign, &b);
    plan_evaluate(p, assign, e);
    return e->feasible ? e->objective : HUGE_VAL;
}

/* The suffix fronts that bound completions: multipliers 0 (the relaxation
 * itself) and, when units are tracked, the best two of a few subgradient
 * steps on the Lagrangian dual of the tracked limits at the root.  Returns
 * the best root bound: a lower bound on the optimum. */
/* Builds the family of multipliers lambda in *scratch and keeps it (first
 * after the unpriced one) when its root bound beats *best; the family it
 * displaces becomes the scratch.  Returns 1 when kept. */
static int try_family(exact_state *s, family *scratch, const double *lambda, const int *room, double *best,
                      sentry *arg)
{
    build_family(s, scratch, lambda);
    double lb = family_bound(s, scratch, 0, -1, 0, HUGE_VAL, 0, room, -HUGE_VAL, arg);
    if (!(lb > *best * (1 + 1e-9))) return 0;
    *best = lb;
    family old = s->fam[EXACT_FAMILIES - 1];
    for (int f = EXACT_FAMILIES - 1; f > 1; f--) s->fam[f] = s->fam[f - 1];
    s->fam[1] = *scratch;
    *scratch = old;
    if (s->n_fam < EXACT_FAMILIES) s->n_fam++;
    return 1;
}

static double dual_bounds(exact_state *s)
{
    const plan_problem *p = s->p;
    double lambda[PLAN_MAX_TYPES] = {0}, warm[PLAN_MAX_TYPES];
    int room[PLAN_MAX_TYPES] = {0}, any = 0, warmed = s->n_fam > 1;
    /* the last phase's best multipliers: the search starts from them */
    memcpy(warm, s->fam[1].lambda, sizeof warm);
    for (int t = 0; t < p->n_types; t++)
        if (s->tracked[t]) {
            room[t] = p->max_units[t];
            any = 1;
        }
    build_family(s, &s->fam[0], lambda);
    s->n_fam = 1;
    sentry arg, arg_warm;
    double best = family_bound(s, &s->fam[0], 0, -1, 0, HUGE_VAL, 0, room, -HUGE_VAL, &arg), mu = 1;
    if (!any || !(best < HUGE_VAL)) return best;
    family scratch = {0};
    if (warmed && try_family(s, &scratch, warm, room, &best, &arg_warm)) {
        memcpy(lambda, warm, sizeof lambda);
        arg = arg_warm;
    }
    double w[PLAN_MAX_TYPES];
    for (int t = 0; t < p->n_types; t++) w[t] = plan_unit_weight(p, t);
    /* steps halving where a step finds no better bound: each round builds
     * the suffix fronts anew, and only a bound that rises prunes more */
    for (int round = 0; round < EXACT_DUAL_ROUNDS && mu > 1e-3 && hps_now() < s->deadline; round++) {
        double was[PLAN_MAX_TYPES];
        int units[PLAN_MAX_TYPES];
        for (int t = 0; t < p->n_types; t++) units[t] = arg.u[t];
        memcpy(was, lambda, sizeof was);
        plan_limits_price_step(p, units, mu, w, 0, s->tracked, lambda);
        if (!memcmp(was, lambda, sizeof was)) break;
        if (!try_family(s, &scratch, lambda, room, &best, &arg)) mu /= 2;
    }
    free_family(&scratch, p->n_layers, p->n_types);
    return best;
}

/* Phase 2 and on: the labels count the units of the types whose limit the
 * last relaxed optimum broke (units per type at its provisioning); repeat
 * until the relaxed optimum keeps every limit.  Counting only those types
 * keeps the fronts small. */
static int track_violations(exact_state *s, const int *units)
{
    const plan_problem *p = s->p;
    int added = 0;
    for (int t = 0; t < p->n_types; t++)
        if (units[t] > p->max_units[t] && !s->tracked[t]) {
            s->tracked[t] = added = 1;
            suffix_bounds_limited(s, t);
        }
    if (added && !s->with_units) {
        s->with_units = 1;
        s->units = hps_malloc((size_t)(s->cap_labels ? s->cap_labels : 1) * p->n_types * sizeof *s->units);
    }
    return added;
}

int plan_solve_exact(const plan_problem *p, const plan_search_opts *o, plan_result *r)
{
    int L = p->n_layers, T = p->n_types;
    double t0 = hps_now();
    exact_state s = {.p = p, .deadline = t0 + (o && o->bound_time > 0 ? o->bound_time : 1e9)};
    for (int a = 0; a < T; a++)
        for (int b = 0; b < T; b++) s.linked |= p->link_bpms[a][b] > 0;
    s.fronts = hps_calloc((size_t)(L + 1) * T, sizeof *s.fronts);
    size_t n_opts = (size_t)L * (L + 1) * T + (size_t)(L + 1) * T;
    s.opts = hps_calloc(n_opts, sizeof *s.opts);
    for (size_t k = 0; k < n_opts; k++) s.opts[k].n = -1;
    plan_eval e;
    plan_eval_init(&e, p);
    double upper = starting_plan(p, r->assign, &e, s.deadline); /* feasible, or infinite */
    for (int t = 0; t < T; t++)
        if (p->objective == PLAN_OBJ_COST && p->units_per_instance[t] > 1) s.inst[t] = s.with_units = 1;
    if (s.with_units) s.units = hps_malloc(sizeof *s.units);
    double root = dual_bounds(&s);
    int *relaxed = hps_malloc((size_t)L * sizeof *relaxed);
    long labels = 0;
    /* Each pass prunes by a guess a little above the last relaxed optimum (a
     * lower bound): a pass that finds nothing under the guess raises it. */
    double lower = 0, slack = 0.01;
    for (;;) {
        if (root > lower && root < HUGE_VAL) lower = root;
        double guess = lower > 0 ? fmin(upper, lower * (1 + slack)) : upper;
        s.upper = guess;
        int id = label_pass(&s);
        labels += s.n_labels;
        if (s.timed_out) break;
        if (id < 0 && guess < upper && s.cut) { /* the optimum lies above the guess */
            lower = guess;
            slack *= 2;
            continue;
        }
        if (id < 0) break; /* none better than the plan in hand */
        lower = objective_of(p, s.labels[id].c, s.labels[id].thr, s.labels[id].n_stages);
        slack = 0.01;
        int used[PLAN_MAX_TYPES], over = 0;
        trace_back(&s, id, relaxed, used);
        for (int t = 0; t < T; t++) over |= used[t] > p->max_units[t];
        if (!over) { /* plan_evaluate provisions it as well or better: the optimum */
            memcpy(r->assign, relaxed, (size_t)L * sizeof *relaxed);
            break;
        }
        r->unit_phase++;
        if (!track_violations(&s, used)) break;
        root = dual_bounds(&s);
        /* a feasible plan near the relaxed optimum may tighten the bound */
        plan_budget b;
        plan_budget_init(&b, EXACT_INCUMBENT_EVALS / 2, fmax(s.deadline - hps_now(), 1e-6));
        plan_local_search(p, relaxed, &b);
        plan_evaluate(p, relaxed, &e);
        if (e.feasible && e.objective < upper) {
            upper = e.objective;
            memcpy(r->assign, relaxed, (size_t)L * sizeof *relaxed);
        }
    }
    int proven = !s.timed_out;
    r->found = 1;
    r->optimal = proven;
    r->timed_out = s.timed_out;
    r->episodes = labels;
    r->seconds = hps_now() - t0;
    for (int k = 0; k < (L + 1) * T; k++) {
        free(s.fronts[k].ids);
        free(s.fronts[k].c);
        free(s.fronts[k].thr);
        free(s.fronts[k].n_stages);
        free(s.fronts[k].u);
    }
    free(s.fronts);
    for (size_t k = 0; k < n_opts; k++) {
        free(s.opts[k].c);
        free(s.opts[k].thr);
        free(s.opts[k].k);
        free(s.opts[k].srv);
        free(s.opts[k].group);
    }
    free(s.opts);
    free(s.labels);
    free(s.units);
    for (int f = 0; f < EXACT_FAMILIES; f++) free_family(&s.fam[f], L, T);
    for (int t = 0; t < T; t++) {
        free(s.cmin_t[t]);
        free(s.thrmax_t[t]);
    }
    free(relaxed);
    plan_eval_free(&e);
    return 0;
}
