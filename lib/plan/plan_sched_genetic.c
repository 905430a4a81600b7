/* The genetic baseline: a population of assignments, tournament selection,
 * two-point crossover (stages are runs, so runs are what children inherit),
 * mutation of one layer or of one run, and the two best kept as they are. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_rng.h"
#include "plan/hps_plan.h"
#include "plan/plan_internal.h"

#define GA_POP 48
#define GA_ELITE 2
#define GA_TOURNAMENT 3

static int tournament(const double *score, hps_rng *rng)
{
    int best = (int)hps_rng_below(rng, GA_POP);
    for (int i = 1; i < GA_TOURNAMENT; i++) {
        int c = (int)hps_rng_below(rng, GA_POP);
        if (score[c] < score[best]) best = c;
    }
    return best;
}

static void crossover(const int *a, const int *b, int *child, int L, hps_rng *rng)
{
    int lo = (int)hps_rng_below(rng, (uint64_t)L), hi = (int)hps_rng_below(rng, (uint64_t)L);
    if (lo > hi) {
        int t = lo;
        lo = hi;
        hi = t;
    }
    for (int l = 0; l < L; l++) child[l] = l >= lo && l <= hi ? b[l] : a[l];
}

static void mutate(int *a, int L, int T, hps_rng *rng)
{
    int l = (int)hps_rng_below(rng, (uint64_t)L), t = (int)hps_rng_below(rng, (uint64_t)T);
    if (hps_rng_uniform(rng) < 0.5) {
        a[l] = t;
        return;
    }
    int first = l, end = l + 1, old = a[l]; /* the whole run around l */
    while (first > 0 && a[first - 1] == old) first--;
    while (end < L && a[end] == old) end++;
    for (int k = first; k < end; k++) a[k] = t;
}

static void sort_population(int *pop, double *score, int L)
{
    int *tmp = hps_malloc((size_t)L * sizeof *tmp);
    for (int i = 1; i < GA_POP; i++)
        for (int j = i; j > 0 && score[j] < score[j - 1]; j--) {
            double s = score[j];
            score[j] = score[j - 1];
            score[j - 1] = s;
            memcpy(tmp, pop + (size_t)j * L, (size_t)L * sizeof *tmp);
            memcpy(pop + (size_t)j * L, pop + (size_t)(j - 1) * L, (size_t)L * sizeof *tmp);
            memcpy(pop + (size_t)(j - 1) * L, tmp, (size_t)L * sizeof *tmp);
        }
    free(tmp);
}

int plan_solve_genetic(const plan_problem *p, const plan_search_opts *o, plan_result *r)
{
    int L = p->n_layers, T = p->n_types;
    double t0 = hps_now();
    plan_budget b;
    plan_budget_init(&b, o->evaluations > 0 ? o->evaluations : 1000000, o->time_limit);
    hps_rng rng;
    hps_rng_seed(&rng, o->seed);
    int *pop = hps_malloc((size_t)GA_POP * L * sizeof *pop), *next = hps_malloc((size_t)GA_POP * L * sizeof *next);
    double score[GA_POP], best = HUGE_VAL;
    plan_eval e;
    plan_eval_init(&e, p);
    /* Start from the single-type plans and random runs. */
    for (int i = 0; i < GA_POP; i++)
        for (int l = 0; l < L; l++) pop[(size_t)i * L + l] = i < T ? i : (int)hps_rng_below(&rng, (uint64_t)T);
    for (int gen = 0; gen == 0 || plan_budget_left(&b); gen++) {
        for (int i = 0; i < GA_POP; i++) {
            plan_budget_evaluate(&b, p, pop + (size_t)i * L, &e);
            score[i] = plan_score(&e);
            if (score[i] < best) {
                best = score[i];
                memcpy(r->assign, pop + (size_t)i * L, (size_t)L * sizeof *pop);
                if (e.feasible) plan_trace_add(r, (double)b.evals, e.objective);
            }
        }
        sort_population(pop, score, L);
        memcpy(next, pop, (size_t)GA_ELITE * L * sizeof *pop);
        for (int i = GA_ELITE; i < GA_POP; i++) {
            int *child = next + (size_t)i * L;
            crossover(pop + (size_t)tournament(score, &rng) * L, pop + (size_t)tournament(score, &rng) * L,
                      child, L, &rng);
            if (hps_rng_uniform(&rng) < 0.7) mutate(child, L, T, &rng);
        }
        int *swap = pop;
        pop = next;
        next = swap;
    }
    r->found = 1;
    r->found_by = "genetic";
    r->episodes = b.evals;
    r->timed_out = b.cut;
    r->seconds = hps_now() - t0;
    plan_eval_free(&e);
    free(pop);
    free(next);
    return 0;
}
