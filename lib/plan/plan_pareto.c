/* The solver named on the command line, and the --pareto sweep of the limit:
 * cost against throughput, the points no other point beats on both. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_json.h"
#include "plan/hps_plan.h"
#include "plan/hps_plan_inputs.h"



int plan_solve(const plan_problem *p, const hps_cluster *c, const char *algo, const plan_search_opts *so,
               plan_result *r, hps_error *err)
{
    if (strcmp(algo, "rl") == 0) return plan_solve_rl(p, so, r);
    if (strcmp(algo, "exact") == 0) return plan_solve_exact(p, so, r);
    if (strcmp(algo, "greedy") == 0) return plan_solve_greedy(p, r);
    if (strcmp(algo, "genetic") == 0) return plan_solve_genetic(p, so, r);
    if (strcmp(algo, "polish") == 0) return plan_solve_polish(p, so, r);
    if (strcmp(algo, "brute") == 0) return plan_solve_brute(p, r, err);
    if (strncmp(algo, "fixed:", 6) == 0) {
        int t = hps_cluster_find(c, algo + 6);
        if (t < 0)
            return hps_fail(err, HPS_EXIT_USAGE, "--algo fixed:TYPE: '%s' is no resource of the cluster", algo + 6);
        return plan_solve_fixed(p, t, r);
    }
    return hps_fail(err, HPS_EXIT_USAGE, "--algo: '%s' is not one of rl, exact, greedy, genetic, polish, brute, fixed:TYPE",
                    algo);
}

double plan_spend(const plan_eval *e, int per_hour)
{
    return per_hour ? e->cost_per_hour : e->cost;
}

/* The solver's plan at limit `level`: 1 when it is feasible and within the
 * budget; its assignment in r, its throughput in *thr. */
static int within_at(plan_problem *p, const hps_cluster *c, const char *algo, const plan_search_opts *so,
                     int per_hour, double most, double level, plan_result *r, plan_eval *e, double *thr,
                     hps_error *err)
{
    p->min_throughput = level;
    r->n_trace = 0; /* the trace of the last search, not of all */
    if (plan_solve(p, c, algo, so, r, err)) return -1;
    plan_evaluate(p, r->assign, e);
    *thr = e->throughput;
    return e->feasible && plan_spend(e, per_hour) <= most * (1 + 1e-12);
}

int plan_solve_budget(plan_problem *p, const hps_cluster *c, const char *algo, const plan_search_opts *so,
                      int per_hour, double most, plan_result *r, hps_error *err)
{
    int L = p->n_layers, *best = hps_malloc((size_t)L * sizeof *best), rc = 0;
    double hi = plan_max_throughput(p, best), floor_given = p->min_throughput;
    p->objective = per_hour ? PLAN_OBJ_RATE : PLAN_OBJ_COST;
    /* with no limit, the cheapest plan of any use: a millionth of the
     * fastest (rl's features lose the plans far below, at 1e-9) */
    double lo = floor_given > 0 ? floor_given : hi * 1e-6, at = lo, thr = 0;
    plan_eval e;
    plan_eval_init(&e, p);
    int ok = hi > 0 ? within_at(p, c, algo, so, per_hour, most, lo, r, &e, &thr, err) : 0;
    if (ok < 0) rc = -1;
    else if (!ok && (hi <= 0 || !e.feasible)) {
        if (hi > 0) plan_infeasible(p, &e, err);
        else hps_fail(err, HPS_EXIT_RUNTIME, "no plan's stages fit their units");
        rc = -1;
    } else if (!ok) {
        char what[64] = "";
        if (floor_given > 0) snprintf(what, sizeof what, " at >= %.6g samples/s", floor_given);
        hps_fail(err, HPS_EXIT_RUNTIME,
                 per_hour ? "no plan within $%.6g/hour: the cheapest plan%s costs $%.6g/hour"
                          : "no plan within $%.6g for the job: the cheapest plan%s costs $%.6g",
                 most, what, plan_spend(&e, per_hour));
        rc = -1;
    }
    if (rc == 0) memcpy(best, r->assign, (size_t)L * sizeof *best);
    lo = thr;
    /* bisection on a log scale while the gap is wide, then just past the
     * plan found: a plan faster than lo within the budget would be found there */
    while (rc == 0 && hi > lo * (1 + 1e-9)) {
        double level = hi > lo * (1 + 1e-3) ? sqrt(lo * hi) : lo * (1 + 1e-9);
        ok = within_at(p, c, algo, so, per_hour, most, level, r, &e, &thr, err);
        if (ok < 0) rc = -1;
        else if (ok && thr > lo) {
            memcpy(best, r->assign, (size_t)L * sizeof *best);
            lo = thr;
            at = level;
        } else
            hi = level;
    }
    if (rc == 0) {
        /* the plan's own throughput as its limit, where it gives the plan
         * again (it does: the fewest units carrying `at` carry lo), a
         * little below so that a plan file's 9 digits do not round it up */
        p->min_throughput = lo * (1 - 1e-8);
        plan_evaluate(p, best, &e);
        if (!e.feasible || e.throughput < lo * (1 - 1e-12) || plan_spend(&e, per_hour) > most * (1 + 1e-12))
            p->min_throughput = at;
        memcpy(r->assign, best, (size_t)L * sizeof *best);
        r->found = 1;
    } else
        p->min_throughput = floor_given;
    plan_eval_free(&e);
    free(best);
    return rc;
}

static void point_from(plan_point *pt, const plan_problem *p, const plan_eval *e)
{
    pt->min_throughput = p->min_throughput;
    pt->throughput = e->throughput;
    pt->cost = e->cost;
    pt->cost_per_hour = e->cost_per_hour;
    pt->objective = e->objective;
    pt->n_stages = e->n_stages;
    pt->stages = hps_malloc((size_t)e->n_stages * sizeof *pt->stages);
    memcpy(pt->stages, e->stages, (size_t)e->n_stages * sizeof *pt->stages);
}

int plan_pareto(plan_problem *p, const hps_cluster *c, const char *algo, const plan_search_opts *so, int n,
                plan_frontier *out, hps_error *err)
{
    memset(out, 0, sizeof *out);
    int *a = hps_malloc((size_t)p->n_layers * sizeof *a);
    double lo = p->min_throughput, hi = plan_max_throughput(p, a);
    free(a);
    if (hi < lo) return hps_fail(err, HPS_EXIT_RUNTIME, "no plan meets %.6g samples/s; the best throughput "
                                 "reachable is %.6g samples/s", lo, hi);
    out->points = hps_calloc((size_t)n, sizeof *out->points);
    double last = HUGE_VAL;
    int rc = 0;
    /* Fastest first, so that dominated points drop out.  A lower limit that
     * gives the same cost (to rounding) adds no row but lowers the point's
     * limit: each point shows the lowest limit swept that gives it, so that
     * the first row is what hps-plan gives at --min-throughput. */
    for (int i = n - 1; i >= 0 && rc == 0; i--) {
        /* just below the fastest, so that rounding never makes it infeasible */
        p->min_throughput = i > 0 ? lo * pow(hi / lo, (double)i / (n - 1)) * (1 - 1e-9) : lo;
        plan_result r;
        plan_eval e;
        plan_result_init(&r, p);
        plan_eval_init(&e, p);
        rc = plan_solve(p, c, algo, so, &r, err);
        plan_evaluate(p, r.assign, &e);
        if (rc == 0 && e.feasible && out->n && fabs(e.objective - last) <= 1e-9 * last)
            out->points[0].min_throughput = p->min_throughput;
        else if (rc == 0 && e.feasible && e.objective < last) {
            last = e.objective;
            memmove(out->points + 1, out->points, (size_t)out->n * sizeof *out->points);
            point_from(&out->points[0], p, &e);
            out->n++;
        }
        plan_result_free(&r);
        plan_eval_free(&e);
    }
    p->min_throughput = lo;
    if (rc) plan_frontier_free(out);
    return rc;
}

void plan_frontier_free(plan_frontier *f)
{
    for (int i = 0; i < f->n; i++) free(f->points[i].stages);
    free(f->points);
    memset(f, 0, sizeof *f);
}

json_t *plan_frontier_json(const plan_problem *p, const plan_frontier *f, const char *algo)
{
    json_t *points = json_array();
    for (int i = 0; i < f->n; i++) {
        const plan_point *pt = &f->points[i];
        json_t *stages = json_array();
        for (int s = 0; s < pt->n_stages; s++) {
            const plan_stage *st = &pt->stages[s];
            json_array_append_new(stages, json_pack("{s:s, s:[ii], s:i, s:o}", "type", p->type_names[st->type],
                                                    "layers", st->first, st->end - 1, "units", st->units,
                                                    "throughput", hps_json_real(st->throughput)));
        }
        json_array_append_new(points, json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "min_throughput",
                                                hps_json_real(pt->min_throughput), "throughput",
                                                hps_json_real(pt->throughput), "cost", hps_json_real(pt->cost),
                                                "cost_per_hour", hps_json_real(pt->cost_per_hour), "objective",
                                                hps_json_real(pt->objective), "stages", stages));
    }
    return json_pack("{s:s, s:i, s:s, s:s, s:o, s:o}", "format", "hps-pareto", "version", PLAN_PARETO_VERSION,
                     "objective", plan_objective_names[p->objective], "algorithm", algo, "budget",
                     f->budget > 0 ? hps_json_real(f->budget) : json_null(), "points", points);
}

void plan_frontier_table(FILE *f, const plan_problem *p, const plan_frontier *fr)
{
    fprintf(f, "%14s  %14s  %12s  %10s  %s\n", "limit", "samples/s", "cost $", "$/hour", "stages");
    for (int i = 0; i < fr->n; i++) {
        const plan_point *pt = &fr->points[i];
        fprintf(f, "%14.1f  %14.1f  %12.4f  %10.3f  ", pt->min_throughput, pt->throughput, pt->cost,
                pt->cost_per_hour);
        for (int s = 0; s < pt->n_stages; s++)
            fprintf(f, "%s%s x%d", s ? " | " : "", p->type_names[pt->stages[s].type], pt->stages[s].units);
        if (fr->budget > 0 && pt->objective > fr->budget * (1 + 1e-12)) fputs("  (over the budget)", f);
        fputc('\n', f);
    }
    if (fr->budget > 0)
        fprintf(f, "budget %.6g %s (without --pareto, hps-plan gives the fastest plan within it)\n", fr->budget,
                p->objective == PLAN_OBJ_RATE ? "$/hour" : "$ for the job");
}
