/* bench-jobs: the joint planner's heuristic (greedy: marginal gain with
 * kicks) against its exact search on seeded random instances of several
 * jobs on one cluster (plan_jobs_random: each job 4 candidates on one type
 * each, integer durations), for each objective; then 16 jobs x 8 types,
 * where the exact search runs to its bound and the heuristic is timed.
 * Per row: instances, the share the exact search proved, the share where
 * the heuristic is within 1% of the exact one's, its median and worst gap,
 * and the CPU seconds of each.  Built and run by tests/bench/bench-jobs.sh.
 *
 *   --quick      2 seeds per cell instead of 8
 *   --bound S    seconds of the exact search per instance (default 10)
 *   --help       this list; any other argument is refused (exit 2)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/hps_plan_jobs.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One row: n jobs x types, every objective, seeds per objective. */
static void row(int n, int types, int options, int seeds, double bound)
{
    double gaps[3 * 64], t_exact = 0, t_greedy = 0;
    int count = 0, proved = 0, within = 0;
    for (int obj = 0; obj < 3; obj++)
        for (int s = 0; s < seeds; s++) {
            plan_jobs_problem jp;
            plan_jobs_random(&jp, (uint64_t)(1000 * n + 100 * types + s + 1), n, types, options);
            jp.objective = (plan_jobs_objective)obj;
            plan_jobs_schedule g, x;
            double t0 = cpu_now();
            plan_jobs_solve_greedy(&jp, &g);
            double t1 = cpu_now();
            plan_jobs_solve_exact(&jp, bound, &x);
            double t2 = cpu_now();
            t_greedy += t1 - t0, t_exact += t2 - t1;
            double gap = g.objective / x.objective - 1;
            gaps[count++] = gap;
            proved += x.optimal;
            within += gap <= 0.01;
        }
    qsort(gaps, (size_t)count, sizeof *gaps, cmp_double);
    printf("%5d x %-6d %10d %8.0f%% %10.0f%% %9.2f%% %9.2f%% %12.4f %12.4f\n", n, types, count,
           100.0 * proved / count, 100.0 * within / count, 100 * gaps[count / 2], 100 * gaps[count - 1],
           t_exact / count, t_greedy / count);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int seeds = 8;
    double bound = 10;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) seeds = 2;
        else if (strcmp(argv[i], "--bound") == 0 && i + 1 < argc) bound = atof(argv[++i]);
        else if (strcmp(argv[i], "--help") == 0) {
            puts("usage: bench_jobs [--quick] [--bound S]");
            return 0;
        } else {
            fprintf(stderr, "bench_jobs: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!(bound > 0)) {
        fprintf(stderr, "bench_jobs: --bound must be > 0\n");
        return 2;
    }
    printf("%-14s %10s %9s %11s %10s %10s %12s %12s\n", "jobs x types", "instances", "proved", "within 1%",
           "median", "worst", "exact s", "greedy s");
    static const int cells[][2] = {{3, 2}, {4, 2}, {5, 4}, {6, 4}, {7, 8}, {16, 8}};
    for (size_t c = 0; c < sizeof cells / sizeof *cells; c++) row(cells[c][0], cells[c][1], 4, seeds, bound);
    return 0;
}
