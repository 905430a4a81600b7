/* hps-plan's schedulers: exact equals brute force on many seeded random
 * instances; rl is deterministic for a seed and learns; the baselines give
 * valid plans. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/hps_rng.h"
#include "plan/hps_plan.h"
#include "hps_testlib.h"

static double objective_of(const plan_problem *p, const int *assign, int *feasible)
{
    plan_eval e;
    plan_eval_init(&e, p);
    plan_evaluate(p, assign, &e);
    double v = e.objective;
    *feasible = e.feasible;
    plan_eval_free(&e);
    return v;
}

/* Solves p with exact and brute force: both optimal, the same objective;
 * returns whether the optimum is feasible. */
static int exact_equals_brute(const plan_problem *p, uint64_t seed, plan_result *exact, plan_result *brute)
{
    plan_search_opts o = {.bound_time = 10};
    hps_error err;
    plan_result_init(exact, p);
    plan_result_init(brute, p);
    assert_int_equal(plan_solve_exact(p, &o, exact), 0);
    assert_int_equal(plan_solve_brute(p, brute, &err), 0);
    assert_true(exact->optimal);
    int fe, fb;
    double ve = objective_of(p, exact->assign, &fe), vb = objective_of(p, brute->assign, &fb);
    if (fe != fb || (fb && fabs(ve - vb) > 1e-9 * vb))
        fail_msg("seed %llu: exact %g (feasible %d), brute %g (feasible %d)", (unsigned long long)seed, ve, fe,
                 vb, fb);
    return fb;
}

/* 600 instances of 2 to 6 layers and 2 or 3 types, loose and tight limits,
 * with and without unit limits, every objective. */
static void test_exact_equals_brute(void **state)
{
    (void)state;
    int feasible_count = 0, mixed = 0, unit_phase = 0;
    for (uint64_t seed = 1; seed <= 600; seed++) {
        int L = 2 + (int)(seed % 5), T = 2 + (int)(seed / 5 % 2);
        double tight = (double[]){0.3, 0.7, 0.95, 1.0, 1.05}[seed / 10 % 5];
        plan_problem *p = plan_problem_random(seed * 7919, L, T, tight, (int)(seed % 3 != 0));
        p->objective = (plan_objective)(seed / 40 % 4);
        plan_result exact, brute;
        int fb = exact_equals_brute(p, seed, &exact, &brute);
        feasible_count += fb;
        unit_phase += exact.unit_phase;
        for (int l = 1; l < L; l++) mixed += fb && brute.assign[l] != brute.assign[0] && l == 1;
        plan_result_free(&exact);
        plan_result_free(&brute);
        plan_problem_free(p);
    }
    /* the suite must exercise both feasible and infeasible, one-type and mixed plans */
    assert_true(feasible_count > 300 && feasible_count < 550);
    assert_true(mixed > 10);
    assert_true(unit_phase > 5); /* and the unit limits across stages */
    print_message("# %d feasible, %d mixed, %d needing the unit phase\n", feasible_count, mixed, unit_phase);
}

/* Memory that binds: random working sets, tables, unit and server
 * memories and key skew on the random instances, so that some stages do not
 * fit some types, some rows live in HBM or behind a cache, and servers are
 * priced; exact still equals brute force. */
static void test_exact_equals_brute_with_memory(void **state)
{
    (void)state;
    int feasible_count = 0, unfit = 0, cached = 0, hbm = 0, priced = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        int L = 2 + (int)(seed % 5), T = 2 + (int)(seed / 5 % 2);
        double tight = (double[]){0.3, 0.7, 0.95}[seed / 10 % 3];
        plan_problem *p = plan_problem_random(seed * 6151, L, T, tight, (int)(seed % 3 != 0));
        p->objective = (plan_objective)(seed / 30 % 4);
        plan_problem_random_memory(p, seed);
        hps_error err;
        if (plan_problem_check_memory(p, &err)) {
            plan_problem_free(p);
            continue;
        }
        plan_result exact, brute;
        int fb = exact_equals_brute(p, seed, &exact, &brute);
        feasible_count += fb;
        for (int l = 0; l < L; l++)
            for (int t = 0; t < T; t++) unfit += !p->fits[l * T + t];
        plan_eval e;
        plan_eval_init(&e, p);
        plan_evaluate(p, brute.assign, &e);
        for (int s = 0; fb && s < e.n_stages; s++) {
            cached += e.stages[s].law.rows == PLAN_ROWS_CACHE;
            hbm += e.stages[s].law.rows == PLAN_ROWS_HBM;
        }
        priced += fb && e.servers > 0;
        plan_eval_free(&e);
        plan_result_free(&exact);
        plan_result_free(&brute);
        plan_problem_free(p);
    }
    print_message("# %d feasible, %d layer-type pairs that do not fit, %d cached, %d in hbm, %d with servers\n",
                  feasible_count, unfit, cached, hbm, priced);
    assert_true(feasible_count > 50);
    assert_true(unfit > 20 && cached > 5 && hbm > 5 && priced > 20);
}

/* Limits that bind across stages with many units: the unrestricted optimum
 * is found first, then each type it uses in several stages gets a limit
 * between its largest stage and its total, so the unit phase and its
 * Lagrangian bounds must run. */
static void test_exact_equals_brute_binding_units(void **state)
{
    (void)state;
    int unit_phase = 0, feasible_count = 0;
    plan_search_opts o = {.bound_time = 10};
    for (uint64_t seed = 1; seed <= 400; seed++) {
        int L = 5 + (int)(seed % 4), T = 2 + (int)(seed / 4 % 2);
        double tight = (double[]){0.6, 0.8, 0.9, 0.95}[seed / 8 % 4];
        plan_problem *p = plan_problem_random(seed * 104729, L, T, tight, 0);
        p->objective = (plan_objective)(seed / 32 % 4);
        plan_result exact, brute;
        plan_result_init(&exact, p);
        plan_result_init(&brute, p);
        plan_solve_exact(p, &o, &exact);
        plan_eval e;
        plan_eval_init(&e, p);
        plan_evaluate(p, exact.assign, &e);
        for (int t = 0; t < T; t++) {
            int most = 0;
            for (int s = 0; s < e.n_stages; s++)
                if (e.stages[s].type == t && e.stages[s].units > most) most = e.stages[s].units;
            if (most && e.units[t] > most) p->max_units[t] = most + (e.units[t] - most) / 2;
        }
        plan_eval_free(&e);
        hps_error err;
        assert_int_equal(plan_solve_exact(p, &o, &exact), 0);
        assert_int_equal(plan_solve_brute(p, &brute, &err), 0);
        assert_true(exact.optimal);
        int fe, fb;
        double ve = objective_of(p, exact.assign, &fe), vb = objective_of(p, brute.assign, &fb);
        if (fe != fb || (fb && fabs(ve - vb) > 1e-9 * vb))
            fail_msg("seed %llu: exact %g (feasible %d), brute %g (feasible %d)", (unsigned long long)seed,
                     ve, fe, vb, fb);
        unit_phase += exact.unit_phase > 0;
        feasible_count += fb;
        plan_result_free(&exact);
        plan_result_free(&brute);
        plan_problem_free(p);
    }
    print_message("# %d feasible, %d needing the unit phase\n", feasible_count, unit_phase);
    assert_true(unit_phase > 40);
}

/* The benchmark's slowest instance before the suffix-front bounds (128
 * layers, 8 types, limits of 64 units binding for two types: 17 s then):
 * the optimum that solver proved, now well within the bound time. */
static void test_exact_binding_units_128(void **state)
{
    (void)state;
    plan_problem *p = plan_problem_random(1000003ull * 517, 128, 8, 0.9, 0);
    plan_search_opts o = {.bound_time = 60};
    plan_result r;
    plan_result_init(&r, p);
    double t0 = hps_now();
    plan_solve_exact(p, &o, &r);
    double sec = hps_now() - t0;
    int f;
    double v = objective_of(p, r.assign, &f);
    assert_true(r.optimal && f && r.unit_phase > 0);
    assert_true(fabs(v - 8.30362796) < 1e-8 * v);
    print_message("# 128 x 8 with binding unit limits: %.3f s\n", sec);
    plan_result_free(&r);
    plan_problem_free(p);
}

/* A budget that does not bind: the tests check what a search finds. */
static plan_budget *ample(void)
{
    static plan_budget b;
    plan_budget_init(&b, LONG_MAX, 60);
    return &b;
}

/* The DP moves of the polish never make a plan worse, and from a two-stage
 * local optimum of the local search (the second stage on the wrong type,
 * the cut too early) they reach the optimum, which no single run move does. */
static void test_dp_polish(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        plan_problem *p = plan_problem_random(seed * 613, 24, 2 + (int)(seed % 3), 0.5, (int)(seed % 2));
        int *a = malloc(24 * sizeof *a), f;
        for (int t = 0; t < p->n_types; t++) {
            for (int l = 0; l < 24; l++) a[l] = t;
            double before = objective_of(p, a, &f);
            int fb = f;
            plan_dp_polish(p, a, PLAN_POLISH_WINDOW, ample());
            double after = objective_of(p, a, &f);
            for (int l = 0; l < 24; l++) assert_true(a[l] >= 0 && a[l] < p->n_types);
            assert_true(f >= fb);
            assert_true(!fb || after <= before * (1 + 1e-12));
        }
        free(a);
        plan_problem_free(p);
    }
    plan_problem *p = plan_problem_random(1000003ull * (4 * 97 + 2 * 13 + 3 + 1 + 1), 64, 8, 0.3, 1);
    int a[64], f;
    for (int l = 0; l < 64; l++) a[l] = l < 15 ? 3 : 5;
    double v = objective_of(p, a, &f);
    plan_local_search(p, a, ample());
    assert_true(fabs(objective_of(p, a, &f) - v) < 1e-12 * v); /* a local optimum */
    plan_dp_polish(p, a, PLAN_POLISH_WINDOW, ample());
    plan_local_search(p, a, ample());
    plan_dp_polish(p, a, PLAN_POLISH_WINDOW, ample());
    v = objective_of(p, a, &f);
    assert_true(f && fabs(v - 0.370129364) < 1e-8 * v);
    plan_problem_free(p);
}

static void test_brute_refuses_large(void **state)
{
    (void)state;
    plan_problem *p = plan_problem_random(5, 64, 4, 0.5, 0);
    plan_result r;
    plan_result_init(&r, p);
    hps_error err;
    assert_int_equal(plan_solve_brute(p, &r, &err), -1);
    assert_string_equal(err.msg, "brute: 4^64 assignments are more than 10^7; use --algo exact");
    plan_result_free(&r);
    plan_problem_free(p);
}

/* The budget counts evaluations: two runs spend the same and find the same
 * plan (the same under load: tests/cli/plan.bats). */
static void test_rl_is_deterministic(void **state)
{
    (void)state;
    plan_problem *p = plan_problem_random(11, 12, 3, 0.6, 0);
    plan_search_opts o = {.seed = 42, .episodes = 256, .evaluations = 1024, .time_limit = 30, .polish = 1};
    plan_result a, b;
    plan_result_init(&a, p);
    plan_result_init(&b, p);
    plan_solve_rl(p, &o, &a);
    plan_solve_rl(p, &o, &b);
    assert_memory_equal(a.assign, b.assign, (size_t)p->n_layers * sizeof(int));
    assert_true(a.episodes >= 1024 && a.episodes == b.episodes && !a.timed_out);
    assert_true(a.mean_first == b.mean_first && a.mean_last == b.mean_last);
    assert_non_null(a.found_by);
    plan_result_free(&a);
    plan_result_free(&b);
    plan_problem_free(p);
}

/* The policy's sampled plans get better: from random weights, the mean
 * reward of the last batch beats the first's clearly, on several instances,
 * without the polish. */
static void test_rl_learns(void **state)
{
    (void)state;
    int better = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        plan_problem *p = plan_problem_random(seed * 31, 16, 4, 0.5, 0);
        plan_search_opts o = {.seed = seed, .episodes = 1024, .evaluations = 1024, .time_limit = 30,
                              .start = PLAN_START_RANDOM};
        plan_result r;
        plan_result_init(&r, p);
        plan_solve_rl(p, &o, &r);
        better += r.mean_last > r.mean_first + 0.1;
        print_message("# rl seed %llu: mean reward %.3f in the first batch, %.3f in the last\n",
                      (unsigned long long)seed, r.mean_first, r.mean_last);
        plan_result_free(&r);
        plan_problem_free(p);
    }
    assert_int_equal(better, 4);
}

static double rl_objective(const plan_problem *p, const plan_search_opts *o, double *mean_first)
{
    plan_result r;
    plan_result_init(&r, p);
    plan_solve_rl(p, o, &r);
    int f;
    double v = objective_of(p, r.assign, &f);
    if (mean_first) *mean_first = r.mean_first;
    plan_result_free(&r);
    return f ? v : HUGE_VAL;
}

/* The policy improves over its untrained self on a fixed instance: the same
 * random weights, the same seed and samples, once learning and once frozen
 * (learning rate 0), no polish; the learning run's best plan is better. */
static void test_rl_beats_untrained(void **state)
{
    (void)state;
    plan_problem *p = plan_problem_random(1000003ull * 7, 24, 4, 0.5, 0);
    plan_search_opts o = {.seed = 3, .episodes = 512, .evaluations = 512, .time_limit = 60,
                          .start = PLAN_START_RANDOM};
    double learned = rl_objective(p, &o, NULL);
    o.frozen = 1;
    double frozen = rl_objective(p, &o, NULL);
    print_message("# rl on 24 x 4: %.6g learning, %.6g frozen\n", learned, frozen);
    assert_true(learned < frozen * (1 - 1e-3));
    plan_problem_free(p);
}

/* The shipped policy, pre-trained on other instances, starts where a random
 * policy does not: its first batch's mean reward is higher on each of a few
 * unseen instances. */
static void test_rl_pretrained_generalises(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        plan_problem *p = plan_problem_random(seed * 7919 + 5, 32, 2 + (int)seed, 0.5, 0);
        plan_search_opts o = {.seed = seed, .episodes = 16, .evaluations = 64, .time_limit = 60};
        double shipped, random;
        rl_objective(p, &o, &shipped);
        o.start = PLAN_START_RANDOM;
        rl_objective(p, &o, &random);
        print_message("# rl seed %llu: first batch %.3f shipped, %.3f random\n", (unsigned long long)seed, shipped,
                      random);
        assert_true(shipped > random);
        plan_problem_free(p);
    }
}

/* A policy file round-trips, and a broken one is refused with its field. */
static void test_policy_file(void **state)
{
    (void)state;
    char path[] = "/tmp/hps-policy-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    hps_error err;
    plan_policy *a = plan_policy_pretrain(5, 2, 32, 0);
    assert_int_equal(plan_policy_save(a, path, &err), 0);
    plan_policy *b = plan_policy_load(path, &err);
    assert_non_null(b);
    plan_problem *p = plan_problem_random(77, 12, 3, 0.5, 0);
    plan_search_opts o = {.seed = 1, .episodes = 64, .evaluations = 64, .time_limit = 60, .policy = a};
    double va = rl_objective(p, &o, NULL);
    o.policy = b;
    assert_true(rl_objective(p, &o, NULL) == va);
    FILE *f = fopen(path, "w");
    fputs("{\"hps_plan_policy\": 1, \"features\": 16, \"hidden\": 8, \"weights\": [1, 2]}", f);
    fclose(f);
    assert_null(plan_policy_load(path, &err));
    assert_non_null(strstr(err.msg, "weights must be an array of"));
    unlink(path);
    plan_policy_free(a);
    plan_policy_free(b);
    plan_problem_free(p);
}

static void test_baselines_are_valid(void **state)
{
    (void)state;
    plan_problem *p = plan_problem_random(3, 10, 3, 0.4, 0);
    plan_search_opts o = {.seed = 1, .episodes = 500, .evaluations = 1000, .time_limit = 10, .bound_time = 10, .polish = 1};
    plan_result opt, r;
    plan_result_init(&opt, p);
    plan_result_init(&r, p);
    plan_solve_exact(p, &o, &opt);
    int f;
    double best = objective_of(p, opt.assign, &f);
    assert_true(f);
    for (int algo = 0; algo < 3; algo++) {
        if (algo == 0) plan_solve_greedy(p, &r);
        if (algo == 1) plan_solve_genetic(p, &o, &r);
        if (algo == 2) plan_solve_fixed(p, 1, &r);
        for (int l = 0; l < p->n_layers; l++) assert_true(r.assign[l] >= 0 && r.assign[l] < p->n_types);
        double v = objective_of(p, r.assign, &f);
        assert_true(!f || v >= best * (1 - 1e-9));
    }
    plan_result_free(&opt);
    plan_result_free(&r);
    plan_problem_free(p);
}

static void test_trace_stays_compact(void **state)
{
    (void)state;
    plan_problem *p = plan_problem_random(1, 2, 2, 0.5, 0);
    plan_result r;
    plan_result_init(&r, p);
    for (int i = 1; i <= 1000; i++) plan_trace_add(&r, i, 1000.0 / i);
    assert_true(r.n_trace <= 64 && r.n_trace >= 32);
    assert_true(r.trace[0].episode == 1);
    assert_true(r.trace[r.n_trace - 1].episode == 1000);
    for (int i = 1; i < r.n_trace; i++) assert_true(r.trace[i].episode > r.trace[i - 1].episode);
    plan_result_free(&r);
    plan_problem_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_equals_brute),
        cmocka_unit_test(test_exact_equals_brute_binding_units),
        cmocka_unit_test(test_exact_equals_brute_with_memory),
        cmocka_unit_test(test_exact_binding_units_128),
        cmocka_unit_test(test_dp_polish),
        cmocka_unit_test(test_brute_refuses_large),
        cmocka_unit_test(test_rl_is_deterministic),
        cmocka_unit_test(test_rl_learns),
        cmocka_unit_test(test_rl_beats_untrained),
        cmocka_unit_test(test_rl_pretrained_generalises),
        cmocka_unit_test(test_policy_file),
        cmocka_unit_test(test_baselines_are_valid),
        cmocka_unit_test(test_trace_stays_compact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
