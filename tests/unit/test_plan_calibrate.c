/* hps-plan --calibrate (lib/plan/plan_calibrate.c): on synthetic problems
 * and synthetic run figures, the calibrated model's stage times are the run's
 * and the plan of the run's layout predicts the run's samples/s. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_rng.h"
#include "plan/hps_plan.h"

#define TOLERANCE 1e-6 /* relative; the model is linear in t1 */

static double stage_ms(const plan_problem *p, const plan_calib_stage *st)
{
    plan_law law;
    plan_stage_law(p, st->first, st->end, st->type, &law);
    return plan_law_ms(&law, st->units);
}

/* The rest of a step beyond the slowest stage goes to every stage. */
static void test_targets(void **state)
{
    (void)state;
    plan_calib_stage st[3] = {{.measured_ms = 2}, {.measured_ms = 5}, {.measured_ms = 1}};
    plan_calib_targets(st, 3, 6.5, 1);
    assert_true(st[0].target_ms == 3.5 && st[1].target_ms == 6.5 && st[2].target_ms == 2.5);
    plan_calib_targets(st, 3, 8, 0.75); /* the slowest stage's time is the step's share outside the bubble */
    assert_true(st[0].target_ms == 3 && st[1].target_ms == 6 && st[2].target_ms == 2);
    plan_calib_targets(st, 3, 4.5, 1); /* a step shorter than a stage: the others lose the difference */
    assert_true(st[0].target_ms == 1.5 && st[1].target_ms == 4.5 && st[2].target_ms == 0.5);
}

/* Random instances, random layouts of 1 to 3 stages on one unit each, and
 * measured times between a third and three times the model's: after
 * calibrating, each stage takes its target and the layout's plan predicts the
 * run's samples/s. */
static void test_calibrated_model_predicts_the_run(void **state)
{
    (void)state;
    int checked = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        hps_rng r;
        hps_rng_seed(&r, seed);
        plan_problem *p = plan_problem_random(seed, 8, 3, 0.5, 0);
        for (int a = 0; a < p->n_types; a++) /* a run in one process crosses no links */
            for (int b = 0; b < p->n_types; b++) p->link_bpms[a][b] = 0, p->link_ms[a][b] = 0;
        p->server_bpms = 1e30; /* the stages, not the servers, bound the run */
        for (int t = 0; t < p->n_types; t++) p->max_units[t] = 1; /* the run's units */
        p->min_throughput = 1e-9; /* each stage's fewest units: one */
        int n = 1 + (int)(hps_rng_next(&r) % 3), *assign = malloc((size_t)p->n_layers * sizeof *assign);
        plan_calib_stage st[3];
        double slowest = 0;
        for (int s = 0; s < n; s++) {
            st[s] = (plan_calib_stage){.type = (s + (int)(seed % 3)) % p->n_types, .units = 1,
                                       .first = s * p->n_layers / n, .end = (s + 1) * p->n_layers / n};
            for (int l = st[s].first; l < st[s].end; l++) assign[l] = st[s].type;
            st[s].measured_ms = stage_ms(p, &st[s]) * (0.33 + 2.67 * hps_rng_uniform(&r));
            slowest = fmax(slowest, st[s].measured_ms);
        }
        p->micro_batches = seed % 2 ? PLAN_NO_BUBBLE : 1 + (int)(seed % 4); /* with and without a bubble */
        /* a pipeline's step: its slowest stage through the bubble, and more */
        double bubble = plan_bubble(p, n), step_ms = slowest * (1 + 0.5 * hps_rng_uniform(&r)) / bubble;
        plan_calib_targets(st, n, step_ms, bubble);
        plan_calibrate(p, st, n);
        for (int s = 0; s < n; s++) {
            if (st[s].clamped) continue; /* fixed terms above the target: said, not met */
            assert_true(fabs(stage_ms(p, &st[s]) / st[s].target_ms - 1) <= TOLERANCE);
            assert_true(fabs(st[s].after_ms / st[s].target_ms - 1) <= TOLERANCE);
        }
        int clamped = 0;
        for (int s = 0; s < n; s++) clamped |= st[s].clamped;
        if (!clamped) {
            plan_eval e;
            plan_eval_init(&e, p);
            plan_evaluate(p, assign, &e);
            double measured = 1000 * p->batch / step_ms;
            if (fabs(e.throughput / measured - 1) > TOLERANCE)
                fail_msg("seed %llu: %d stages: predicted %g samples/s, run %g", (unsigned long long)seed, n,
                         e.throughput, measured);
            plan_eval_free(&e);
            checked++;
        }
        free(assign);
        plan_problem_free(p);
    }
    if (checked < 30) fail_msg("only %d of 40 runs unclamped", checked); /* most are within reach of their layers */
}

/* A run in one process made no exchange with servers: its stage time is
 * matched by the model's without it, which the plan's in-process
 * prediction then gives. */
static void test_in_process_run_without_exchange(void **state)
{
    (void)state;
    plan_problem *p = plan_problem_random(3, 4, 2, 0.5, 0);
    for (int l = 0; l < p->n_layers; l++) p->sparse_rows[l] = p->sparse_bytes[l] / 64;
    p->server_type = 0, p->exchange_server_ms[0] = 1, p->exchange_worker_ms[0] = 0.25;
    /* a unit and its server: type 0 has 2 units */
    p->server_bpms = 1e30, p->max_units[0] = 2, p->min_throughput = 1e-9, p->micro_batches = PLAN_NO_BUBBLE;
    plan_problem_prepare(p);
    plan_calib_stage st = {.type = 0, .first = 0, .end = 4, .units = 1, .in_process = 1};
    plan_law law;
    plan_stage_law(p, 0, 4, 0, &law);
    assert_true(plan_law_servers_ms(&law, 1) > 1.25); /* the exchange is priced */
    st.measured_ms = plan_law_ms(&law, 1) - plan_law_servers_ms(&law, 1) + 3; /* 3 ms more of layers */
    plan_calib_targets(&st, 1, st.measured_ms, 1);
    plan_calibrate(p, &st, 1);
    assert_false(st.clamped);
    plan_stage_law(p, 0, 4, 0, &law);
    assert_true(fabs(plan_law_ms(&law, 1) - plan_law_servers_ms(&law, 1) - st.measured_ms) <= 1e-9 * st.measured_ms);
    int assign[4] = {0, 0, 0, 0};
    plan_eval e;
    plan_eval_init(&e, p);
    plan_evaluate(p, assign, &e);
    assert_true(fabs(plan_in_process_throughput(p, &e) / (1000 * p->batch / st.measured_ms) - 1) <= TOLERANCE);
    plan_eval_free(&e);
    plan_problem_free(p);
}

/* A stage whose other terms alone exceed the run's time: the factor stops
 * at its floor and says so. */
static void test_clamped(void **state)
{
    (void)state;
    plan_problem *p = plan_problem_random(7, 4, 2, 0.5, 0);
    plan_calib_stage st = {.type = 0, .first = 0, .end = 4, .units = 1, .measured_ms = 1e-9};
    plan_calib_targets(&st, 1, 1e-9, 1);
    plan_calibrate(p, &st, 1);
    assert_true(st.clamped && st.factor == PLAN_CALIB_MIN_FACTOR);
    plan_problem_free(p);
}

/* A problem with a GPU type (1) whose stage of every layer has tables: the
 * rows can live anywhere, and the servers beside its units. */
static plan_problem *rows_problem(void)
{
    plan_problem *p = plan_problem_random(11, 4, 2, 0.5, 0);
    for (int l = 0; l < p->n_layers; l++) p->sparse_rows[l] = p->sparse_bytes[l] / 64;
    plan_problem_random_memory(p, 11);
    p->server_type = 0, p->exchange_server_ms[0] = 1, p->exchange_worker_ms[0] = 0.25;
    p->exchange_worker_ms[1] = 0.25; /* the packing, on the host's cores a server beside takes one of */
    p->pcie_bpms[1] = 1e6, p->cores[1] = 8, p->host_mem[1] = 64 * PLAN_GIB;
    plan_problem_prepare(p);
    return p;
}

static double kept_ms(const plan_problem *p, const plan_calib_stage *st)
{
    plan_law law;
    plan_stage_law_kept(p, st->first, st->end, st->type, &st->kept, &law);
    return st->in_process ? plan_law_in_process_ms(&law, st->units) : plan_law_ms(&law, st->units);
}

/* A run that says where each stage kept its rows is priced so: for each
 * rows value (servers apart and beside, hbm whole and in shards, a cache
 * at two measured hit rates), the calibrated model's time of the stage kept
 * that way is the run's target, and that time is not the one of the rows
 * where the planner would keep them (which --calibrate took before). */
static void test_priced_as_the_run_kept_its_rows(void **state)
{
    (void)state;
    const plan_kept kept[] = {
        {.rows = PLAN_ROWS_SERVERS, .hit_rate = -1},
        {.rows = PLAN_ROWS_SERVERS, .hit_rate = -1, .beside = 1},
        {.rows = PLAN_ROWS_HBM, .hit_rate = -1},
        {.rows = PLAN_ROWS_HBM, .hit_rate = -1, .shards = 2},
        {.rows = PLAN_ROWS_CACHE, .cache_rows = 1000, .hit_rate = 0.9},
        {.rows = PLAN_ROWS_CACHE, .cache_rows = 1000, .hit_rate = 0.2},
    };
    double before[6];
    for (int i = 0; i < 6; i++) {
        plan_problem *p = rows_problem();
        plan_calib_stage st = {.type = 1, .first = 0, .end = p->n_layers, .units = 2, .has_kept = 1,
                               .kept = kept[i]};
        assert_true(p->pre_table[p->n_layers] > 0);
        before[i] = kept_ms(p, &st);
        for (int j = 0; j < i; j++) /* each way has a price of its own */
            if (fabs(before[j] / before[i] - 1) <= TOLERANCE) fail_msg("rows ways %d and %d priced alike", j, i);
        st.measured_ms = 1.5 * before[i];
        plan_calib_targets(&st, 1, st.measured_ms, 1);
        plan_calibrate(p, &st, 1);
        assert_false(st.clamped);
        assert_int_equal(st.priced_rows, kept[i].rows);
        assert_true(fabs(kept_ms(p, &st) / st.target_ms - 1) <= TOLERANCE);
        assert_true(fabs(st.after_ms / st.target_ms - 1) <= TOLERANCE);
        plan_law law;
        plan_stage_law(p, st.first, st.end, st.type, &law); /* the planner's way is another price */
        if (law.rows != kept[i].rows || !law.shards != !kept[i].shards || kept[i].beside || kept[i].hit_rate >= 0)
            assert_true(fabs(plan_law_ms(&law, st.units) / st.target_ms - 1) > TOLERANCE);
        plan_problem_free(p);
    }
}

/* A cache at the run's measured hit rate: its law says that rate, and the
 * rows the servers serve are the misses at it. */
static void test_cache_at_the_measured_hit_rate(void **state)
{
    (void)state;
    plan_problem *p = rows_problem();
    plan_kept servers = {.rows = PLAN_ROWS_SERVERS, .hit_rate = -1};
    plan_law on_servers, cache;
    plan_stage_law_kept(p, 0, p->n_layers, 1, &servers, &on_servers);
    for (double m = 0; m <= 1; m += 0.25) {
        plan_kept k = {.rows = PLAN_ROWS_CACHE, .cache_rows = 5000, .hit_rate = m};
        plan_stage_law_kept(p, 0, p->n_layers, 1, &k, &cache);
        assert_int_equal(cache.rows, PLAN_ROWS_CACHE);
        assert_true(cache.hit_rate == m && cache.cache_rows == 5000);
        assert_true(fabs(cache.server_rows - (1 - m) * on_servers.server_rows) <= 1e-9 * on_servers.server_rows);
    }
    plan_problem_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_targets),
        cmocka_unit_test(test_calibrated_model_predicts_the_run),
        cmocka_unit_test(test_clamped),
        cmocka_unit_test(test_in_process_run_without_exchange),
        cmocka_unit_test(test_priced_as_the_run_kept_its_rows),
        cmocka_unit_test(test_cache_at_the_measured_hit_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
