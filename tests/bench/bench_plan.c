/* bench-plan: the schedulers, and the rl scheduler's parts apart, at equal
 * budgets of cost-model evaluations, on a fixed suite of seeded instances
 * (4 to 128 layers, 2 to 8 types, tight and loose limits, with and without
 * unit limits), against the exact optimum; then instances the exact solver
 * does not finish within its bound (many types, large unit limits), against
 * the best plan any algorithm found; then deeper instances at 0.95 of the
 * fastest plan's throughput (12 to 40 layers, memory that binds: where rl
 * alone once left gaps and answered no plan, issue 29).  Per row: the share of instances within
 * 1% of the optimum, the share feasible, median and worst gap, evaluations,
 * seconds.  Built and run by tests/bench/bench-plan.sh.
 *
 *   --quick      one seed per cell instead of two
 *   --small      instances up to 32 layers only (for a quick look)
 *   --evals N    the budget of the rows at equal budgets (default 4096)
 *   --verbose    on stderr, per instance, the rows that miss 1%
 *   --only LIST  run only the rows named in LIST (comma-separated, e.g.
 *                exact,rl-defaults; the names are algo_keys), and only the
 *                suites in it when one of main, memory, larger, deep is named
 *   --match STR  only the instances whose name (as --verbose prints it)
 *                contains STR
 *   --validation the same cells drawn from other seeds: where the rl
 *                scheduler's design choices are tried, so that they are not
 *                tuned to the instances this bench reports
 *   --seeds N    N seeds per cell of the larger suite, 1 to 32 (default 1;
 *                the first is always the one the default draws)
 *   --help       this list; any other argument is refused (exit 2)
 * Progress goes to stderr with carriage returns only when it is a terminal. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plan/hps_plan.h"
#include "hps_testlib.h"

enum {
    ALGO_EXACT,
    ALGO_RL,
    ALGO_POLICY,
    ALGO_POLISH,
    ALGO_UNTRAINED,
    ALGO_RANDOM,
    ALGO_GENETIC,
    ALGO_GREEDY,
    ALGO_RL_DEFAULT,
    ALGO_POLISH_DEFAULT,
    N_ALGOS
};
static const char *const algo_names[N_ALGOS] = {
    "exact", "rl (policy + polish)", "policy alone", "polish alone", "untrained policy",
    "random search", "genetic", "greedy", "rl, defaults", "polish alone, 1M"};
/* --only's names of the rows */
static const char *const algo_keys[N_ALGOS] = {
    "exact", "rl", "policy", "polish", "untrained", "random", "genetic", "greedy", "rl-defaults", "polish-1m"};
#define DEFAULT_EVALS 1000000 /* hps-plan's --evaluations */

#define MAX_INSTANCES 512

static int row_on[N_ALGOS]; /* --only */
static const char *match;   /* --match */
static uint64_t seed_shift; /* --validation: added to every instance's seed */

/* A line of progress, rewritten in place: only on a terminal (in a log,
 * carriage returns are noise); done ends it. */
static void progress(const char *what, int n, int done)
{
    if (!isatty(STDERR_FILENO)) return;
    if (done) fputc('\n', stderr);
    else fprintf(stderr, "\rbench-plan: %d %s", n, what);
}

typedef struct {
    double gap[MAX_INSTANCES], seconds[MAX_INSTANCES], evals[MAX_INSTANCES];
    int n, solvable, feasible, within;
    int proved, within_proved; /* instances whose optimum exact proved, and those within 1% of it */
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

/* CPU seconds of this process: the schedulers run on one thread, and on a
 * shared machine the wall clock measures the other jobs too. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs one algorithm at budget `evals`; returns its objective (inf when
 * infeasible); *seconds gets its CPU time, *wall its wall-clock time;
 * *exact_done says whether exact proved its plan optimal. */
static double run(const plan_problem *p, int algo, long evals, double bound, double *seconds, double *wall,
                  double *used, int *exact_done)
{
    plan_search_opts o = {.seed = 1, .episodes = evals, .evaluations = evals, .time_limit = 600,
                          .bound_time = bound, .polish = 0};
    plan_result r;
    plan_eval e;
    plan_result_init(&r, p);
    plan_eval_init(&e, p);
    double t0 = hps_now(), c0 = cpu_now();
    switch (algo) {
    case ALGO_EXACT: plan_solve_exact(p, &o, &r); break;
    case ALGO_RL:
        o.polish = 1;
        o.episodes = evals / 2;
        plan_solve_rl(p, &o, &r);
        break;
    case ALGO_POLICY: plan_solve_rl(p, &o, &r); break;
    case ALGO_POLISH: plan_solve_polish(p, &o, &r); break;
    case ALGO_UNTRAINED:
        o.start = PLAN_START_RANDOM;
        o.frozen = 1;
        plan_solve_rl(p, &o, &r);
        break;
    case ALGO_RANDOM:
        o.start = PLAN_START_UNIFORM;
        plan_solve_rl(p, &o, &r);
        break;
    case ALGO_GENETIC: plan_solve_genetic(p, &o, &r); break;
    case ALGO_GREEDY: plan_solve_greedy(p, &r); break;
    case ALGO_RL_DEFAULT:
        o.polish = 1;
        o.episodes = 2048;
        o.evaluations = DEFAULT_EVALS;
        plan_solve_rl(p, &o, &r);
        break;
    case ALGO_POLISH_DEFAULT:
        o.evaluations = DEFAULT_EVALS;
        plan_solve_polish(p, &o, &r);
        break;
    }
    *seconds = cpu_now() - c0;
    *wall = hps_now() - t0;
    *used = (double)r.episodes;
    plan_evaluate(p, r.assign, &e);
    double v = e.feasible ? e.objective : HUGE_VAL;
    if (algo == ALGO_EXACT) *exact_done = r.optimal;
    plan_eval_free(&e);
    plan_result_free(&r);
    return v;
}

/* proved: opt is exact's proved optimum, not the best plan of any row. */
static void record(stats *x, double v, double opt, int proved, double sec, double used)
{
    x->seconds[x->n] = sec;
    x->evals[x->n] = used;
    if (isfinite(opt)) {
        double gap = isfinite(v) ? v / opt - 1 : HUGE_VAL;
        x->gap[x->solvable++] = gap;
        x->feasible += isfinite(v);
        x->within += gap <= 0.01;
        x->proved += proved;
        x->within_proved += proved && gap <= 0.01;
    }
    x->n++;
}

/* Instances with a feasible plan: every row that ran counts them alike. */
static int solvable_of(const stats *st)
{
    int n = 0;
    for (int a = 0; a < N_ALGOS; a++) n = n > st[a].solvable ? n : st[a].solvable;
    return n;
}

/* "within 1%" counts every instance with a feasible plan; where exact did
 * not finish, against the best plan of any row (no optimum is known there),
 * so a suite with such instances also gets the share of those whose optimum
 * exact proved. */
static void print_table(const char *title, stats *st, int n_algos_from, int instances, int solvable)
{
    int proved = 0;
    for (int a = n_algos_from; a < N_ALGOS; a++) proved = proved > st[a].proved ? proved : st[a].proved;
    int split = proved < solvable;
    printf("%s\n\n", title);
    printf("%-22s  %9s  %9s  %10s  %10s  %8s  %9s  %9s", "algorithm", "within 1%", "feasible", "median gap",
           "worst gap", "evals", "median s", "max s");
    if (split) printf("  %9s", "of proved");
    putchar('\n');
    for (int a = n_algos_from; a < N_ALGOS; a++) {
        stats *x = &st[a];
        if (!row_on[a]) continue;
        double med = median(x->gap, x->solvable), worst = maximum(x->gap, x->solvable);
        char gm[32] = "none", gw[32] = "none";
        if (isfinite(med)) snprintf(gm, sizeof gm, "%.3f%%", 100 * med);
        if (isfinite(worst)) snprintf(gw, sizeof gw, "%.3f%%", 100 * worst);
        else if (x->solvable) snprintf(gw, sizeof gw, "infeasible");
        printf("%-22s  %8.1f%%  %8.1f%%  %10s  %10s  %8.0f  %9.4f  %9.4f", algo_names[a],
               100.0 * x->within / (solvable ? solvable : 1), 100.0 * x->feasible / (solvable ? solvable : 1), gm,
               gw, median(x->evals, x->n), median(x->seconds, x->n), maximum(x->seconds, x->n));
        if (split) printf("  %8.1f%%", 100.0 * x->within_proved / (proved ? proved : 1));
        putchar('\n');
    }
    printf("(%d instances, %d with a feasible plan", instances, solvable);
    if (split) printf("; of proved: within 1%% of the optimum on the %d whose optimum exact proved", proved);
    printf(")\n\n");
}

/* One instance: every row's objective, recorded as gaps against exact's
 * optimum when exact proved it, else (beyond its bound) against the best plan
 * of any row; returns 1 when exact did not finish, -1 when --match leaves
 * the instance out. */
static int instance(const plan_problem *p, const char *name, long evals, double bound, stats *st, int verbose,
                    double sec_rl[2], double sec_exact[2])
{
    double v[N_ALGOS], sec[N_ALGOS], wall[N_ALGOS], used[N_ALGOS], best = HUGE_VAL;
    int done = 1;
    if (match && !strstr(name, match)) return -1;
    for (int a = 0; a < N_ALGOS; a++) {
        v[a] = sec[a] = wall[a] = used[a] = 0;
        if (!row_on[a]) continue;
        v[a] = run(p, a, evals, bound, &sec[a], &wall[a], &used[a], a == ALGO_EXACT ? &done : &(int){0});
        best = fmin(best, v[a]);
    }
    done &= row_on[ALGO_EXACT]; /* else against the best row that ran */
    double ref = done ? v[ALGO_EXACT] : best;
    for (int a = 0; a < N_ALGOS; a++)
        if (row_on[a]) record(&st[a], v[a], ref, done, sec[a], used[a]);
    if (verbose) { /* the rows that miss 1% */
        fprintf(stderr, "\n%s%s:", name, done ? "" : " (exact unfinished)");
        for (int a = 0; a < N_ALGOS; a++)
            if (row_on[a] && isfinite(ref) && !(v[a] <= ref * 1.01))
                fprintf(stderr, " [%s: %.2f%%]", algo_names[a], 100 * (v[a] / ref - 1));
        fputc('\n', stderr);
    }
    sec_rl[0] = fmax(sec_rl[0], sec[ALGO_RL_DEFAULT]);
    sec_rl[1] = fmax(sec_rl[1], wall[ALGO_RL_DEFAULT]);
    sec_exact[0] = fmax(sec_exact[0], sec[ALGO_EXACT]);
    sec_exact[1] = fmax(sec_exact[1], wall[ALGO_EXACT]);
    return !done;
}

/* Which rows and suites --only names (all when it names none of a kind). */
static void only_rows(const char *only, int suite[4])
{
    static const char *const suites[4] = {"main", "memory", "larger", "deep"};
    int rows = 0, suites_named = 0;
    for (int a = 0; a < N_ALGOS; a++) row_on[a] = !only;
    for (const char *s = only; s && *s;) {
        size_t n = strcspn(s, ",");
        for (int a = 0; a < N_ALGOS; a++)
            if (strlen(algo_keys[a]) == n && strncmp(s, algo_keys[a], n) == 0) row_on[a] = 1, rows++;
        for (int k = 0; k < 4; k++)
            if (strlen(suites[k]) == n && strncmp(s, suites[k], n) == 0) {
                if (!suites_named++) suite[0] = suite[1] = suite[2] = suite[3] = 0;
                suite[k] = 1;
            }
        s += n + (s[n] == ',');
    }
    if (only && !rows)
        for (int a = 0; a < N_ALGOS; a++) row_on[a] = 1;
}

/* A suite's count: instances run, and those exact did not finish. */
typedef struct {
    int n, unfinished;
} tally;

/* One instance of a suite: run it, count it, free it, show the progress. */
static void tally_instance(tally *t, plan_problem *p, const char *name, long evals, double bound, stats *st,
                           int verbose, double sec_rl[2], double sec_exact[2], const char *what)
{
    int u = instance(p, name, evals, bound, st, verbose, sec_rl, sec_exact);
    t->unfinished += u > 0;
    t->n += u >= 0;
    plan_problem_free(p);
    progress(what, t->n, 0);
}

static const char usage[] =
    "usage: bench_plan [--quick] [--small] [--evals N] [--verbose] [--only LIST] [--match STR]\n"
    "                  [--validation] [--seeds N]\n";

int main(int argc, char **argv)
{
    int quick = 0, small = 0, verbose = 0, suite[4] = {1, 1, 1, 1}, hard_seeds = 1;
    const char *only = NULL;
    long evals = 4096;
    for (int i = 1; i < argc; i++) {
        int more = i + 1 < argc;
        const char *arg = argv[i]; /* for the error: i moves past a value */
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--only") == 0 && more) only = argv[++i];
        else if (strcmp(argv[i], "--match") == 0 && more) match = argv[++i];
        else if (strcmp(argv[i], "--small") == 0) small = 1;
        else if (strcmp(argv[i], "--verbose") == 0) verbose = 1;
        else if (strcmp(argv[i], "--validation") == 0) seed_shift = 0x5eed0000ull;
        else if (strcmp(argv[i], "--evals") == 0 && more && (evals = atol(argv[++i])) > 0) continue;
        else if (strcmp(argv[i], "--seeds") == 0 && more && (hard_seeds = atoi(argv[++i])) > 0 &&
                 hard_seeds <= MAX_INSTANCES / 16)
            continue;
        else if (strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_plan: error: argument '%s': unknown, or an option without a valid value\n%s",
                    arg, usage);
            return 2;
        }
    }
    only_rows(only, suite);
    static const int layers[] = {4, 8, 16, 32, 64, 128}, types[] = {2, 4, 8};
    static const double tight[] = {0.3, 0.9};
    int seeds = quick ? 1 : 2, n_layers = small ? 4 : 6;
    static stats st[N_ALGOS], mem[N_ALGOS], hard[N_ALGOS], deep[N_ALGOS];
    double exact_128x8[2] = {0}, rl_128x8[2] = {0}, sink[2] = {0}; /* CPU and wall seconds */
    tally main_suite = {0};
    char name[64], title[512];
    for (int li = 0; suite[0] && li < n_layers; li++)
        for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
            for (int tg = 0; tg < 2; tg++)
                for (int ul = 0; ul < 2; ul++)
                    for (int s = 0; s < seeds; s++) {
                        uint64_t seed = 1000003ull * ((uint64_t)li * 97 + ti * 13 + tg * 5 + ul * 3 + s + 1) + seed_shift;
                        plan_problem *p = plan_problem_random(seed, layers[li], types[ti], tight[tg], ul);
                        int big = layers[li] == 128 && types[ti] == 8;
                        snprintf(name, sizeof name, "%dx%d tight %.1f limits %d seed %d", layers[li], types[ti],
                                 tight[tg], ul, s);
                        tally_instance(&main_suite, p, name, evals, 60, st, verbose, big ? rl_128x8 : sink,
                                       big ? exact_128x8 : sink, "instances");
                    }
    progress(NULL, 0, 1);
    snprintf(title, sizeof title,
             "%d instances: layers 4..%d, types 2..8, limits at 0.3 and 0.9 of the fastest plan, with and\n"
             "without unit limits (exact finished on %d); the rows down to genetic at %ld evaluations each,\n"
             "the last two at hps-plan's default budget (rl: 2048 episodes, 1000000 evaluations in all)",
             main_suite.n, layers[n_layers - 1], main_suite.n - main_suite.unfinished, evals);
    if (main_suite.n) print_table(title, st, 0, main_suite.n, solvable_of(st));
    fflush(stdout);
    /* Memory that binds (plan_problem_random_memory): layers that fit only
     * some types, tables only on the servers or in HBM or a cache. */
    static const int mem_layers[] = {8, 32, 128}, mem_types[] = {4, 8};
    tally memory = {0};
    int mem_invalid = 0;
    for (int li = 0; suite[1] && li < (small ? 2 : 3); li++)
        for (int ti = 0; ti < 2; ti++)
            for (int tg = 0; tg < 2; tg++)
                for (int ul = 0; ul < 2; ul++) {
                    uint64_t seed = 5000011ull * ((uint64_t)li * 31 + ti * 7 + tg * 3 + ul + 1) + seed_shift;
                    plan_problem *p =
                        plan_problem_random_with_memory(seed, mem_layers[li], mem_types[ti], tight[tg], ul);
                    if (!p) {
                        mem_invalid++; /* a layer fits no type, or the tables no servers */
                        continue;
                    }
                    snprintf(name, sizeof name, "memory %dx%d tight %.1f limits %d", mem_layers[li],
                             mem_types[ti], tight[tg], ul);
                    tally_instance(&memory, p, name, evals, 60, mem, verbose, sink, sink, "instances with memory");
                }
    progress(NULL, 0, 1);
    snprintf(title, sizeof title,
             "%d instances where memory binds: layers 8..%d, 4 and 8 types, units of 1 to 8 GiB, tables of\n"
             "1 to 16 GiB (%d drawn were refused: a layer or the tables fit nowhere); exact finished on %d",
             memory.n, small ? 32 : 128, mem_invalid, memory.n - memory.unfinished);
    if (memory.n) print_table(title, mem, 0, memory.n, solvable_of(mem));
    fflush(stdout);
    /* Beyond the exact solver's bound: 12 and 16 types, 64 and 128 layers,
     * 64 units a type or 8 to 40 that bind across stages; gaps against
     * exact's optimum where it finished, else the best plan of any row. */
    static const int hard_layers[] = {64, 128}, hard_types[] = {12, 16};
    tally larger = {0};
    for (int li = 0; suite[2] && !small && li < 2; li++)
        for (int ti = 0; ti < 2; ti++)
            for (int tg = 0; tg < 2; tg++)
                for (int ul = 0; ul < 2; ul++)
                    for (int s = 0; s < hard_seeds; s++) {
                        uint64_t seed = 7000003ull * ((uint64_t)li * 31 + ti * 7 + tg * 3 + ul + 1) + seed_shift +
                                        0x10000000ull * (uint64_t)s;
                        plan_problem *p =
                            plan_problem_random(seed, hard_layers[li], hard_types[ti], tight[tg], ul ? 2 : 0);
                        /* the first seed's name as before --seeds */
                        int at = snprintf(name, sizeof name, "hard %dx%d tight %.1f limits %d", hard_layers[li],
                                          hard_types[ti], tight[tg], ul ? 2 : 0);
                        if (s) snprintf(name + at, sizeof name - (size_t)at, " seed %d", s);
                        tally_instance(&larger, p, name, evals, 10, hard, verbose, sink, sink,
                                       "instances beyond exact");
                    }
    progress(NULL, 0, 1);
    if (larger.n) {
        snprintf(title, sizeof title,
                 "%d larger instances: 64 and 128 layers, 12 and 16 types, 64 units a type or 8 to 40;\n"
                 "exact bounded at 10 s (it finished on %d); gaps against its optimum where it finished,\n"
                 "else against the best plan of any row",
                 larger.n, larger.n - larger.unfinished);
        print_table(title, hard, 0, larger.n, solvable_of(hard));
    }
    /* Deeper instances at 0.95 of the fastest plan (the independent check
     * of issue 29: 28 instances of 12 to 40 layers, where rl alone left
     * gaps of 37% and 15% and answered no plan on 2): 3 to 5 types, memory
     * that binds, unit limits of each kind. */
    tally deeper = {0};
    int deep_invalid = 0;
    for (int i = 0; suite[3] && i < (small ? 8 : 28); i++) {
        uint64_t seed = 9000011ull * (uint64_t)(i + 1) + seed_shift;
        int L = 12 + (int)((uint64_t)i * 7 % 29), T = 3 + i % 3, ul = i % 3;
        plan_problem *p = plan_problem_random_with_memory(seed, L, T, 0.95, ul);
        if (!p) {
            deep_invalid++;
            continue;
        }
        snprintf(name, sizeof name, "deep %dx%d tight 0.95 limits %d", L, T, ul);
        tally_instance(&deeper, p, name, evals, 60, deep, verbose, sink, sink, "deeper instances");
    }
    progress(NULL, 0, 1);
    if (deeper.n) {
        snprintf(title, sizeof title,
                 "%d deeper instances: 12 to 40 layers, 3 to 5 types, memory that binds, limits at 0.95 of\n"
                 "the fastest plan (%d drawn were refused: a layer, the tables or every plan fit nowhere);\n"
                 "exact finished on %d",
                 deeper.n, deep_invalid, deeper.n - deeper.unfinished);
        print_table(title, deep, 0, deeper.n, solvable_of(deep));
    }
    printf("gap: objective / optimum - 1 where a feasible plan exists; within 1%%: feasible and at most\n"
           "1%% above; evals: median cost-model evaluations (exact and greedy count none); seconds:\n"
           "CPU time of the planning (one thread) on this machine.  rl: half the budget for the policy's samples, the rest\n"
           "for the polish; policy alone: the best plan the policy sampled; polish alone: the\n"
           "iterated search from the fastest plan; untrained policy: random weights, no learning;\n"
           "random search: uniform over the policy's actions (stages)\n");
    printf("at 128 layers x 8 types: exact at most %.3f s of CPU (%.3f s wall), rl at its defaults at most\n"
           "%.3f s of CPU (%.3f s wall)\n", exact_128x8[0], exact_128x8[1], rl_128x8[0], rl_128x8[1]);
    return 0;
}
