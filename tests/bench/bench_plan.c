/* bench-plan: every scheduler on a fixed suite of seeded instances (4 to 128
 * layers, 2 to 8 types, tight and loose limits, with and without unit limits),
 * against the exact optimum.  Prints per algorithm the median gap, the share
 * of instances within 1% of the optimum, the share where a feasible plan was
 * found, and the planning time.  Built and run by tests/bench/bench-plan.sh. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/hps_plan.h"
#include "hps_testlib.h"

enum { ALGO_EXACT, ALGO_RL, ALGO_GENETIC, ALGO_GREEDY, ALGO_CPU, ALGO_BEST_FIXED, N_ALGOS };
static const char *const algo_names[N_ALGOS] = {"exact", "rl", "genetic", "greedy", "fixed:cpu", "best fixed"};

typedef struct {
    double gap[2048], seconds[2048]; /* gap: on instances with a feasible plan */
    int n, solvable, feasible, within;
} stats;

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (!n) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double maximum(const double *v, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, v[i]);
    return m;
}

/* Runs one algorithm; returns its objective (inf when infeasible). */
static double run(const plan_problem *p, int algo, const plan_search_opts *o, double *seconds)
{
    plan_result r;
    plan_eval e;
    plan_result_init(&r, p);
    plan_eval_init(&e, p);
    double t0 = hps_now(), best = HUGE_VAL;
    switch (algo) {
    case ALGO_EXACT: plan_solve_exact(p, o, &r); break;
    case ALGO_RL: plan_solve_rl(p, o, &r); break;
    case ALGO_GENETIC: plan_solve_genetic(p, o, &r); break;
    case ALGO_GREEDY: plan_solve_greedy(p, &r); break;
    case ALGO_CPU: plan_solve_fixed(p, 0, &r); break;
    case ALGO_BEST_FIXED:
        for (int t = 0; t < p->n_types; t++) {
            plan_solve_fixed(p, t, &r);
            plan_evaluate(p, r.assign, &e);
            if (e.feasible) best = fmin(best, e.objective);
        }
        break;
    }
    *seconds = hps_now() - t0;
    if (algo != ALGO_BEST_FIXED) {
        plan_evaluate(p, r.assign, &e);
        best = e.feasible ? e.objective : HUGE_VAL;
    }
    if (algo == ALGO_EXACT && !r.optimal) fprintf(stderr, "bench-plan: exact did not finish\n");
    plan_eval_free(&e);
    plan_result_free(&r);
    return best;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    static const int layers[] = {4, 8, 16, 32, 64, 128}, types[] = {2, 4, 8};
    static const double tight[] = {0.3, 0.9};
    int seeds = quick ? 1 : 2;
    plan_search_opts o = {.seed = 1, .episodes = 2048, .time_limit = 10, .bound_time = 60, .polish = 1};
    static stats st[N_ALGOS];
    double exact_128x8 = 0;
    int instances = 0, infeasible = 0;
    for (size_t li = 0; li < sizeof layers / sizeof *layers; li++)
        for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
            for (int tg = 0; tg < 2; tg++)
                for (int ul = 0; ul < 2; ul++)
                    for (int s = 0; s < seeds; s++) {
                        uint64_t seed = 1000003ull * (li * 97 + ti * 13 + tg * 5 + ul * 3 + s + 1);
                        plan_problem *p = plan_problem_random(seed, layers[li], types[ti], tight[tg], ul);
                        double opt = 0;
                        instances++;
                        for (int a = 0; a < N_ALGOS; a++) {
                            double sec, v = run(p, a, &o, &sec);
                            if (a == ALGO_EXACT) {
                                opt = v;
                                if (layers[li] == 128 && types[ti] == 8) exact_128x8 = fmax(exact_128x8, sec);
                                if (!isfinite(opt)) infeasible++;
                            }
                            stats *x = &st[a];
                            x->seconds[x->n] = sec;
                            if (isfinite(opt)) {
                                double gap = isfinite(v) ? v / opt - 1 : HUGE_VAL;
                                x->gap[x->solvable++] = gap;
                                x->feasible += isfinite(v);
                                x->within += gap <= 0.01;
                            }
                            x->n++;
                        }
                        plan_problem_free(p);
                        fprintf(stderr, "\rbench-plan: %d instances", instances);
                    }
    fprintf(stderr, "\n");
    int solvable = instances - infeasible;
    printf("%d instances (%d with no feasible plan, left out of the gaps); layers 4..128, types 2..8,\n"
           "limits at 0.3 and 0.9 of the fastest plan, with and without unit limits; rl: %ld episodes\n\n",
           instances, infeasible, o.episodes);
    printf("%-11s  %10s  %9s  %9s  %10s  %10s\n", "algorithm", "median gap", "within 1%", "feasible",
           "median s", "max s");
    for (int a = 0; a < N_ALGOS; a++) {
        stats *x = &st[a];
        double med = median(x->gap, x->solvable);
        char gap[32] = "none";
        if (isfinite(med)) snprintf(gap, sizeof gap, "%.3f%%", 100 * med);
        printf("%-11s  %10s  %8.1f%%  %8.1f%%  %10.4f  %10.4f\n", algo_names[a], gap,
               100.0 * x->within / solvable, 100.0 * x->feasible / solvable, median(x->seconds, x->n),
               maximum(x->seconds, x->n));
    }
    printf("\ngap: objective / exact optimum - 1 on instances with a feasible plan (none: no feasible\n"
           "plan found on at least half); within 1%%: share of those instances where the plan is\n"
           "feasible and at most 1%% above the optimum; rl includes its polish (local search and\n"
           "DP moves on the best samples, then %s); times are planning seconds on this machine\n",
           "an iterated local search on the best");
    printf("exact at 128 layers x 8 types: at most %.3f s\n", exact_128x8);
    return 0;
}
