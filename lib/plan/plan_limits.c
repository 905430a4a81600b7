/* Planning with the unit limits across stages: the stage DP, the types it
 * tracks and the prices of the others (plan_limits.h). */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "plan/plan_limits.h"

void plan_tracked_init(plan_tracked *tr)
{
    memset(tr, 0, sizeof *tr);
    tr->nu = 1;
}

int plan_tracked_add(const plan_problem *p, plan_tracked *tr, const int *units, long base, long max_states)
{
    int added = 0;
    for (;;) {
        int next = -1;
        for (int t = 0; t < p->n_types; t++)
            if (units[t] > p->max_units[t] && !tr->stride[t] && !tr->priced[t] &&
                (next < 0 || p->max_units[t] < p->max_units[next]))
                next = t;
        if (next < 0) return added;
        if (base * tr->nu * (p->max_units[next] + 1) > max_states) {
            tr->priced[next] = 1;
            continue;
        }
        tr->stride[next] = tr->nu;
        tr->nu *= p->max_units[next] + 1;
        added++;
    }
}

/* The tracked units u after n more units of type x; -1 past its limit. */
static inline long take_one(const plan_problem *p, const plan_tracked *tr, long u, int x, int n)
{
    if (!n || !tr->stride[x]) return u;
    if (u / tr->stride[x] % (p->max_units[x] + 1) + n > p->max_units[x]) return -1;
    return u + n * tr->stride[x];
}

/* The tracked units u after stage s on t (its servers take units of the
 * servers' type, hps-cluster(5): plan_units_taken's rule); -1 past a limit.
 * Written out rather than through plan_units_taken: this runs for every
 * stage the DP looks at. */
static inline long take_units(const plan_problem *p, const plan_tracked *tr, long u, int t,
                              const plan_limits_stage *s)
{
    int st = p->server_type;
    u = take_one(p, tr, u, t, s->units + (st == t ? s->servers : 0));
    if (u >= 0 && st >= 0 && st != t) u = take_one(p, tr, u, st, s->servers);
    return u;
}

/* Stage [i, e) on t after the units u, at the floor: its priced rate, and
 * the state it leads to in *to; HUGE_VAL when it cannot be had. */
static inline double stage_step(const plan_limits_dp *d, int i, int e, int t, long u, plan_limits_stage *s, size_t *to)
{
    d->stage(d->ctx, i, e, t, s);
    long u2 = s->units && !(s->thr < d->theta) ? take_units(d->p, d->tr, u, t, s) : -1;
    if (u2 < 0) return HUGE_VAL;
    *to = plan_limits_at(d, e, t, u2);
    return s->rate + (d->tr->stride[t] ? 0 : s->units * d->lam[t]);
}

/* The link into layer i from w to t carries the floor (w = T: none). */
static double link_thr(const plan_problem *p, int i, int w, int t)
{
    double lm = w < p->n_types ? plan_link_ms(p, i, w, t) : 0;
    return lm > 0 ? 1000.0 * p->batch / lm : HUGE_VAL;
}

void plan_limits_togo(const plan_limits_dp *d, double *go, double *gt)
{
    const plan_problem *p = d->p;
    int L = p->n_layers, T = p->n_types;
    long nu = d->tr->nu;
    double via[PLAN_MAX_TYPES], via_thr[PLAN_MAX_TYPES];
    for (long x = 0; x < (T + 1) * nu; x++) {
        go[plan_limits_at(d, L, 0, x)] = 0;
        gt[plan_limits_at(d, L, 0, x)] = HUGE_VAL;
    }
    for (int i = L - 1; i >= 0; i--)
        for (long u = 0; u < nu; u++) {
            for (int t = 0; t < T; t++) { /* the best rest that starts with a stage on t */
                via[t] = HUGE_VAL;
                via_thr[t] = 0;
                for (int e = i + 1; e <= L; e++) {
                    plan_limits_stage s;
                    size_t at;
                    double r = stage_step(d, i, e, t, u, &s, &at);
                    if (!(r < HUGE_VAL)) continue;
                    double c = r + go[at], ct = fmin(s.thr, gt[at]);
                    if (c < via[t] * (1 - 1e-12) || (c <= via[t] * (1 + 1e-12) && ct > via_thr[t])) {
                        via[t] = c;
                        via_thr[t] = ct;
                    }
                }
            }
            for (int w = 0; w <= T; w++) {
                double best = HUGE_VAL, best_thr = 0;
                for (int t = 0; t < T; t++) {
                    double lt = link_thr(p, i, w, t);
                    if (t == w || lt < d->theta || !(via[t] < HUGE_VAL)) continue;
                    if (via[t] < best * (1 - 1e-12) || (via[t] <= best * (1 + 1e-12) && fmin(via_thr[t], lt) > best_thr)) {
                        best = via[t];
                        best_thr = fmin(via_thr[t], lt);
                    }
                }
                go[plan_limits_at(d, i, w, u)] = best;
                gt[plan_limits_at(d, i, w, u)] = best_thr;
            }
        }
}

int plan_limits_follow(const plan_limits_dp *d, const double *go, int *units)
{
    const plan_problem *p = d->p;
    int L = p->n_layers, T = p->n_types;
    memset(units, 0, PLAN_MAX_TYPES * sizeof *units);
    for (int i = 0, w = T; i < L;) {
        long u = 0;
        for (int t = 0; t < T; t++)
            if (d->tr->stride[t]) u += units[t] * d->tr->stride[t];
        double best = HUGE_VAL;
        plan_limits_stage bs = {0};
        int bt = -1, be = -1;
        for (int t = 0; t < T; t++) {
            if (t == w || link_thr(p, i, w, t) < d->theta) continue;
            for (int e = i + 1; e <= L; e++) {
                plan_limits_stage s;
                size_t at;
                double r = stage_step(d, i, e, t, u, &s, &at);
                if (!(r < HUGE_VAL)) continue;
                double c = r + go[at];
                if (c < best * (1 - 1e-12)) best = c, bt = t, be = e, bs = s;
            }
        }
        if (bt < 0) return 0;
        plan_take_units(p, bt, bs.units, bs.servers, units);
        i = be;
        w = bt;
    }
    return 1;
}

/* A partial plan's rate and bottleneck: of two of one rate (within
 * rounding) the faster is better. */
static int better(double c, double thr, double c0, double thr0)
{
    if (!(c < HUGE_VAL)) return 0;
    return c < c0 * (1 - 1e-12) || (c <= c0 * (1 + 1e-12) && thr > thr0);
}

int plan_limits_best(const plan_limits_dp *d, int *assign, int *units)
{
    const plan_problem *p = d->p;
    int L = p->n_layers, T = p->n_types;
    long NU = d->tr->nu, n = (long)(L + 1) * T * NU;
    /* g, gt: the best plan of layers [0, e) whose last stage is on t with the
     * tracked units u, at [(e T + t) NU + u]; from: the state before it */
    double *g = hps_malloc((size_t)n * sizeof *g), *gt = hps_malloc((size_t)n * sizeof *gt);
    long *from = hps_malloc((size_t)n * sizeof *from);
    for (long k = 0; k < n; k++) g[k] = HUGE_VAL, gt[k] = 0;
    char *reach = hps_malloc((size_t)NU); /* some state at layer i has units u */
    for (int i = 0; i < L; i++) {
        for (long u = 0; u < NU; u++) {
            reach[u] = i == 0 && u == 0;
            for (int q = 0; i > 0 && q < T && !reach[u]; q++) reach[u] = g[((long)i * T + q) * NU + u] < HUGE_VAL;
        }
        for (int t = 0; t < T; t++)
            for (long u = 0; u < NU; u++) {
                if (!reach[u]) continue;
                /* the best way to reach layer i with units u whose next stage is on t */
                double h = HUGE_VAL, ht = 0;
                long hf = -1;
                if (i == 0) h = 0, ht = HUGE_VAL;
                else
                    for (int q = 0; q < T; q++) {
                        long at = ((long)i * T + q) * NU + u;
                        double lt = link_thr(p, i, q, t);
                        if (q == t || !(g[at] < HUGE_VAL) || lt < d->theta) continue;
                        if (better(g[at], fmin(gt[at], lt), h, ht)) h = g[at], ht = fmin(gt[at], lt), hf = at;
                    }
                if (!(h < HUGE_VAL)) continue;
                for (int e = i + 1; e <= L; e++) {
                    plan_limits_stage s;
                    size_t to;
                    double r = stage_step(d, i, e, t, u, &s, &to);
                    if (!(r < HUGE_VAL)) continue;
                    long k = ((long)e * T + t) * NU + (long)(to % (size_t)NU);
                    if (better(h + r, fmin(ht, s.thr), g[k], gt[k])) {
                        g[k] = h + r;
                        gt[k] = fmin(ht, s.thr);
                        from[k] = hf;
                    }
                }
            }
    }
    free(reach);
    long best = -1;
    for (long k = (long)L * T * NU; k < n; k++)
        if (best < 0 ? g[k] < HUGE_VAL : better(g[k], gt[k], g[best], gt[best])) best = k;
    if (best >= 0) {
        memset(units, 0, PLAN_MAX_TYPES * sizeof *units);
        for (long at = best; at >= 0;) {
            int e = (int)(at / NU / T), t = (int)(at / NU % T);
            long was = from[at];
            int s = was < 0 ? 0 : (int)(was / NU / T);
            for (int l = s; l < e; l++) assign[l] = t;
            plan_limits_stage st;
            d->stage(d->ctx, s, e, t, &st);
            plan_take_units(p, t, st.units, st.servers, units);
            at = was;
        }
    }
    free(g);
    free(gt);
    free(from);
    return best >= 0;
}

int plan_limits_price_step(const plan_problem *p, const int *units, double step, const double *weight,
                           double over_floor, const int *priced, double *lam)
{
    int over = 0;
    for (int t = 0; t < p->n_types; t++) {
        if (priced && !priced[t]) continue;
        double g = (double)(units[t] - p->max_units[t]) / p->max_units[t], s = weight ? step * weight[t] : step;
        if (g > 0) {
            lam[t] += s * fmax(g, over_floor);
            over = 1;
        } else if (lam[t] > 0) lam[t] = fmax(lam[t] + s * g, 0);
    }
    return over;
}
