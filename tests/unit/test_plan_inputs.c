/* The planner's inputs (lib/plan/plan_inputs.c, plan_reload.c,
 * plan_calib_run.c, plan_diagnose.c): files to a problem, a plan read back
 * against its inputs, a run's stages on the problem's types, and why no plan
 * meets a limit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hps_json.h"
#include "plan/hps_plan_inputs.h"

#define TD HPS_TESTDATA "/"
#define MODEL TD "models/demo-ctr.json"
#define LAB TD "clusters/lab.json"
#define PROFILE TD "profiles/demo-ctr.json"

static const char *const profile_paths[] = {PROFILE};
static const plan_sources demo = {.model = MODEL, .cluster = LAB, .profiles = profile_paths, .n_profiles = 1};

static void load(const plan_sources *src, plan_inputs *in)
{
    hps_error err;
    memset(in, 0, sizeof *in);
    if (plan_inputs_load(src, in, &err)) fail_msg("%s", err.msg);
}

static void test_inputs_make_the_problem(void **state)
{
    (void)state;
    plan_inputs in;
    load(&demo, &in);
    assert_int_equal(in.problem->n_layers, in.model->n_layers);
    assert_int_equal(in.problem->n_types, in.cluster->n_types);
    plan_inputs_free(&in);
    assert_null(in.problem);
}

/* A missing profile: the error names it, and what was loaded is freed. */
static void test_inputs_error_frees(void **state)
{
    (void)state;
    static const char *const none[] = {TD "profiles/no-such.json"};
    plan_sources src = demo;
    src.profiles = none;
    plan_inputs in = {0};
    hps_error err;
    assert_int_equal(plan_inputs_load(&src, &in, &err), -1);
    assert_non_null(strstr(err.msg, "no-such.json"));
    assert_non_null(in.model);
    plan_inputs_free(&in);
}

/* --data-stats takes the manifest or its directory; a directory with none is an error. */
static void test_data_stats(void **state)
{
    (void)state;
    plan_inputs in;
    load(&demo, &in);
    hps_error err;
    assert_int_equal(plan_problem_data_stats(in.problem, in.model, TD "shards-v1/criteo-small", &err), 0);
    assert_int_equal(plan_problem_data_stats(in.problem, in.model, TD "shards-v1/criteo-small/manifest.json", &err), 0);
    assert_int_equal(plan_problem_data_stats(in.problem, in.model, TD "models", &err), -1);
    plan_inputs_free(&in);
}

/* demo-ctr's exact plan at limit, written to path with its inputs' absolute paths. */
static void write_plan(const char *path, double limit, int *assign)
{
    plan_inputs in;
    load(&demo, &in);
    plan_problem *p = in.problem;
    p->min_throughput = limit;
    p->samples = 1e6;
    p->epochs = 1;
    plan_result r;
    plan_eval e;
    plan_layout l;
    hps_error err;
    plan_result_init(&r, p);
    plan_eval_init(&e, p);
    plan_solve_exact(p, &(plan_search_opts){.bound_time = 5}, &r);
    plan_evaluate(p, r.assign, &e);
    assert_true(e.feasible);
    assert_int_equal(plan_layout_make(p, in.cluster, &e, &l, &err), 0);
    const char *names[] = {PROFILE}, *digests[] = {hps_profiles_digest(in.profiles, 0)};
    plan_meta m = {.model_path = MODEL, .cluster_path = LAB, .model_digest = in.model->digest,
                   .cluster_digest = in.cluster->digest, .n_profiles = 1, .profile_names = names,
                   .profile_digests = digests, .model_name = in.model->name, .algorithm = "exact",
                   .exact_objective = e.objective};
    json_t *root = plan_to_json(p, &e, &l, &r, &m, in.cluster);
    assert_int_equal(hps_json_write(path, root, &err), 0);
    json_decref(root);
    memcpy(assign, r.assign, (size_t)p->n_layers * sizeof *assign);
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    plan_inputs_free(&in);
}

/* A plan read back finds its inputs from its record and its assignment on them. */
static void test_reload_round_trip(void **state)
{
    (void)state;
    char path[] = "/tmp/hps-test-reload-XXXXXX";
    int fd = mkstemp(path), assign[64];
    assert_true(fd >= 0);
    close(fd);
    write_plan(path, 1000, assign);
    plan_reloaded rl;
    hps_error err;
    plan_sources src = {0};
    if (plan_reload_file(path, &rl, &err)) fail_msg("%s", err.msg);
    plan_reload_sources(&rl, &src);
    assert_string_equal(src.model, MODEL);
    assert_int_equal(src.n_profiles, 1);
    if (plan_reload_inputs(&rl, &src, &err)) fail_msg("%s", err.msg);
    plan_problem *p = rl.in.problem;
    assert_true(p->min_throughput == 1000);
    for (int l = 0; l < p->n_layers; l++) assert_int_equal(rl.assign[l], assign[l]);
    plan_result r;
    plan_eval e;
    plan_meta m = {0};
    plan_result_init(&r, p);
    plan_eval_init(&e, p);
    plan_evaluate(p, rl.assign, &e);
    plan_reload_search(&rl, &e, &r, &m);
    assert_string_equal(m.algorithm, "exact");
    assert_true(r.optimal);
    plan_eval_free(&e);
    plan_result_free(&r);
    plan_reloaded_free(&rl);
    /* on another cluster: the digests differ */
    plan_sources other = {.cluster = TD "clusters/aws.json"};
    assert_int_equal(plan_reload_file(path, &rl, &err), 0);
    plan_reload_sources(&rl, &other);
    assert_int_equal(plan_reload_inputs(&rl, &other, &err), -1);
    assert_int_equal(err.code, HPS_EXIT_USAGE);
    assert_string_equal(err.msg, TD "clusters/aws.json: the plan was made for another cluster (digests differ)");
    plan_reloaded_free(&rl);
    unlink(path);
}

/* A file that is no plan hps-plan can evaluate. */
static void test_reload_needs_a_plan(void **state)
{
    (void)state;
    plan_reloaded rl;
    hps_error err;
    assert_int_equal(plan_reload_file(MODEL, &rl, &err), -1);
    assert_int_equal(err.code, HPS_EXIT_USAGE);
}

/* A run's stages: checked against the inputs, on one unit when one process
 * ran them, and its rows where the run kept them (one process: every row
 * its own, no shards, no servers beside). */
static void test_calib_stages(void **state)
{
    (void)state;
    plan_inputs in;
    load(&demo, &in);
    int n = in.model->n_layers;
    plan_run_stage rs[1] = {{in.cluster->types[0].name, 0, n, 4, 2.5, .has_kept = 1,
                             .kept = {PLAN_ROWS_HBM, 0, -1, 4, 1}}};
    plan_run run = {.name = "m.jsonl", .model = in.model->name, .batch = (int)in.problem->batch, .n_stages = 1,
                    .stages = rs};
    plan_calib_stage st[1];
    hps_error err;
    assert_int_equal(plan_calib_stages(&in, &demo, &run, st, &err), 1);
    assert_int_equal(st[0].type, 0);
    assert_int_equal(st[0].units, 1);
    assert_true(st[0].in_process && st[0].measured_ms == 2.5);
    assert_true(st[0].has_kept && st[0].kept.rows == PLAN_ROWS_HBM && !st[0].kept.shards && !st[0].kept.beside);
    run.ranks = 3;
    assert_int_equal(plan_calib_stages(&in, &demo, &run, st, &err), 1);
    assert_int_equal(st[0].units, 4);
    assert_true(st[0].kept.shards == 4 && st[0].kept.beside);
    rs[0].type = "tpu";
    assert_int_equal(plan_calib_stages(&in, &demo, &run, st, &err), -1);
    assert_string_equal(err.msg, "m.jsonl: stage 0 ran on type 'tpu', which " LAB " lacks");
    run.batch++;
    assert_int_equal(plan_calib_stages(&in, &demo, &run, st, &err), -1);
    assert_non_null(strstr(err.msg, "m.jsonl: a run at batch"));
    plan_inputs_free(&in);
}

/* Above the fastest plan: the error says what cannot keep up, and the best reachable. */
static void test_infeasible(void **state)
{
    (void)state;
    plan_inputs in;
    load(&demo, &in);
    plan_problem *p = in.problem;
    int *a = malloc((size_t)p->n_layers * sizeof *a);
    double best = plan_max_throughput(p, a);
    p->min_throughput = best * 10;
    plan_eval e;
    plan_eval_init(&e, p);
    plan_evaluate(p, a, &e);
    assert_false(e.feasible);
    hps_error err;
    plan_infeasible(p, &e, &err);
    assert_int_equal(err.code, HPS_EXIT_RUNTIME);
    char head[64];
    snprintf(head, sizeof head, "no plan meets %.6g samples/s: ", p->min_throughput);
    assert_memory_equal(err.msg, head, strlen(head));
    assert_non_null(strstr(err.msg, "the best throughput reachable is"));
    plan_eval_free(&e);
    free(a);
    plan_inputs_free(&in);
}

/* The tables' bytes a row: weights of the row type and AdaGrad's state,
 * for every layer with a table, from the model's own dims and rows. */
static void test_tables_bytes_by_row_format(void **state)
{
    (void)state;
    for (int dtype = 0; dtype < 3; dtype++)
        for (int rowwise = 0; rowwise < 2; rowwise++) {
            plan_sources src = demo;
            src.row_dtype = dtype, src.rowwise = rowwise;
            plan_inputs in;
            load(&src, &in);
            const hps_model *m = in.model;
            int tabled = 0;
            for (int l = 0; l < m->n_layers; l++) {
                const hps_layer *L = &m->layers[l];
                if (L->kind != HPS_LAYER_EMBEDDING && L->kind != HPS_LAYER_LINEAR) continue;
                int dim = L->kind == HPS_LAYER_EMBEDDING ? L->dim : 1;
                double rows = 0, row = dim * (dtype ? 2.0 : 4.0) + (rowwise ? 4.0 : 4.0 * dim);
                for (int i = 0; i < L->n_slots; i++) rows += (double)m->slots[L->slots[i]].rows;
                assert_true(fabs(in.problem->table_bytes[l] - rows * row) <= 1e-9 * rows * row);
                tabled++;
            }
            assert_true(tabled > 0);
            plan_inputs_free(&in);
        }
}

/* Zipf-like counts of D keys: c_i = floor(A / i^s), i = 1..D. */
static double zipf_count(double a, double s, int i) { return floor(a / pow(i, s)); }

/* Admission after n lookups keeps the keys seen n times: against a brute
 * force count over the keys, the estimate from the manifest's statistics
 * (top 1, 10, 100, 1000 shares, distinct keys, lookups). */
static void test_admitted_rows_brute_force(void **state)
{
    (void)state;
    static const double skews[] = {0.8, 1.0, 1.2};
    static const int ns[] = {2, 3, 5, 10, 30};
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        const int D = 200000;
        double a = 2e5, lookups = 0, top[4] = {0}, distinct = 0;
        for (int i = 1; i <= D; i++) {
            double c = zipf_count(a, skews[k], i);
            if (c < 1) break;
            distinct++, lookups += c;
            for (int j = 0; j < 4; j++)
                if (i <= (int)pow(10, j)) top[j] += c;
        }
        hps_slot_stats st = {.lookups = lookups, .distinct = distinct};
        for (int j = 0; j < 4; j++) st.top_share[j] = top[j] / lookups;
        plan_slot s = {.layer = 0, .rows = 1 << 20, .share = 1};
        plan_slot_key_stats(&st, &s.keys);
        assert_true(plan_slot_admitted(&s, 1) == s.rows); /* every key a row */
        for (int q = 0; q < 5; q++) {
            double brute = 0;
            for (int i = 1; i <= distinct; i++) brute += zipf_count(a, skews[k], i) >= ns[q];
            double got = plan_slot_admitted(&s, ns[q]);
            worst = fmax(worst, fabs(got / brute - 1));
            if (fabs(got / brute - 1) > 0.35) /* the curve's points are few: see hps-plan(1), MEMORY */
                fail_msg("skew %g, after %d: %.0f rows admitted, brute force %.0f", skews[k], ns[q], got, brute);
        }
    }
    print_message("# worst relative error %.3f\n", worst);
    plan_slot none = {.layer = 0, .rows = 1000, .share = 1}; /* no statistics: all rows */
    assert_true(plan_slot_admitted(&none, 5) == 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inputs_make_the_problem),
        cmocka_unit_test(test_inputs_error_frees),
        cmocka_unit_test(test_data_stats),
        cmocka_unit_test(test_reload_round_trip),
        cmocka_unit_test(test_reload_needs_a_plan),
        cmocka_unit_test(test_calib_stages),
        cmocka_unit_test(test_infeasible),
        cmocka_unit_test(test_tables_bytes_by_row_format),
        cmocka_unit_test(test_admitted_rows_brute_force),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
