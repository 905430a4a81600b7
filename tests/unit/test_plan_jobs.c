/* Several jobs on one cluster (lib/plan/plan_jobs*.c): the exact solver
 * against a brute force over start times on random instances, the
 * heuristic against the exact one, the jobs file's errors, and the three
 * testdata jobs against separate plans. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_json.h"
#include "plan/hps_plan_jobs.h"

#define TD HPS_TESTDATA "/"

/* 1 when the starts keep every type within max_units: usage only rises at
 * a start, so the starts are the instants to check. */
static int within_units(const plan_jobs_problem *jp, const int *option, const double *start)
{
    for (int i = 0; i < jp->n_jobs; i++)
        for (int k = 0; k < jp->n_types; k++) {
            int used = 0;
            for (int q = 0; q < jp->n_jobs; q++) {
                const plan_job_option *o = &jp->jobs[q].options[option[q]];
                if (start[q] <= start[i] && start[i] < start[q] + o->duration_s) used += o->units[k];
            }
            if (used > jp->max_units[k]) return 0;
        }
    return 1;
}

typedef struct {
    const plan_jobs_problem *jp;
    int option[PLAN_JOBS_MAX];
    double start[PLAN_JOBS_MAX];
    double best;
} brute;

/* Every start of each job among the sums of other jobs' durations (some
 * optimal schedule starts each job at the end of a chain of others), every
 * candidate of each: no order, no schedule generation. */
static void brute_jobs(brute *b, int j)
{
    const plan_jobs_problem *jp = b->jp;
    if (j == jp->n_jobs) {
        if (!within_units(jp, b->option, b->start)) return;
        double cost = 0, comp = 0, mk = 0;
        for (int i = 0; i < jp->n_jobs; i++) {
            const plan_job_option *o = &jp->jobs[i].options[b->option[i]];
            double end = b->start[i] + o->duration_s;
            if (end > jp->jobs[i].deadline_s) return;
            cost += o->cost, comp += jp->jobs[i].weight * end, mk = fmax(mk, end);
        }
        if (cost > jp->budget) return;
        double v = jp->objective == PLAN_JOBS_COST ? cost : jp->objective == PLAN_JOBS_COMPLETION ? comp : mk;
        b->best = fmin(b->best, v);
        return;
    }
    for (int k = 0; k < jp->jobs[j].n_options; k++) {
        b->option[j] = k;
        for (unsigned m = 0; m < 1u << jp->n_jobs; m++) {
            if (m >> j & 1) continue;
            /* the chain's jobs take the candidates chosen so far, or any */
            double sums[1 << 4];
            int n = 1;
            sums[0] = 0;
            for (int q = 0; q < jp->n_jobs; q++) {
                if (!(m >> q & 1)) continue;
                int nn = 0;
                double next[1 << 4];
                for (int s = 0; s < n; s++)
                    for (int o = 0; o < jp->jobs[q].n_options && nn < 16; o++)
                        if (q < j ? o == b->option[q] : 1) next[nn++] = sums[s] + jp->jobs[q].options[o].duration_s;
                memcpy(sums, next, sizeof(double) * (size_t)nn);
                n = nn;
            }
            for (int s = 0; s < n; s++) {
                b->start[j] = sums[s];
                brute_jobs(b, j + 1);
            }
        }
    }
}

static void test_exact_matches_brute_force(void **state)
{
    (void)state;
    int checked = 0, constrained = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        plan_jobs_problem jp;
        int n = 2 + (int)(seed % 2), types = 1 + (int)(seed % 3), options = 1 + (int)(seed % 2);
        plan_jobs_random(&jp, seed, n, types, options);
        jp.objective = (plan_jobs_objective)(seed % 3);
        if (seed % 4 == 0) { /* a deadline or a budget that binds now and then */
            jp.jobs[0].deadline_s = jp.jobs[0].options[0].duration_s * 1.5;
            jp.budget = 0;
            for (int j = 0; j < n; j++) jp.budget += jp.jobs[j].options[options - 1].cost;
            constrained++;
        }
        brute b = {.jp = &jp, .best = HUGE_VAL};
        brute_jobs(&b, 0);
        plan_jobs_schedule s;
        plan_jobs_solve_exact(&jp, 10, &s);
        if (b.best == HUGE_VAL) {
            assert_false(s.feasible);
            continue;
        }
        assert_true(s.feasible);
        assert_true(s.optimal);
        assert_true(within_units(&jp, s.option, s.start_s));
        if (fabs(s.objective - b.best) > 1e-9 * fmax(1, b.best))
            fail_msg("seed %llu (%s): exact %.9g, brute force %.9g", (unsigned long long)seed,
                     plan_jobs_objective_names[jp.objective], s.objective, b.best);
        checked++;
    }
    assert_true(checked >= 40);
    assert_true(constrained >= 10);
}

/* Larger instances: the heuristic's schedules keep the units and come
 * within a few percent of the optimum (the bench measures it closely). */
static void test_greedy_against_exact(void **state)
{
    (void)state;
    double worst = 0;
    for (uint64_t seed = 100; seed < 130; seed++) {
        plan_jobs_problem jp;
        plan_jobs_random(&jp, seed, 5, 3, 3);
        jp.objective = (plan_jobs_objective)(seed % 3);
        plan_jobs_schedule g, x;
        plan_jobs_solve_greedy(&jp, &g);
        plan_jobs_solve_exact(&jp, 30, &x);
        assert_true(g.feasible && x.feasible && x.optimal);
        assert_true(within_units(&jp, g.option, g.start_s));
        assert_true(g.objective >= x.objective * (1 - 1e-12));
        worst = fmax(worst, g.objective / x.objective - 1);
    }
    print_message("greedy: worst gap %.2f%% over 30 instances\n", 100 * worst);
    assert_true(worst < 0.05);
}

static void expect_error(const char *text, const char *what)
{
    hps_error err;
    plan_jobs_file jf;
    json_t *root = json_loads(text, 0, NULL);
    assert_non_null(root);
    int rc = plan_jobs_file_parse(root, "dir/jobs.json", &jf, &err);
    json_decref(root);
    plan_jobs_file_free(&jf);
    assert_int_equal(rc, -1);
    assert_int_equal(err.code, HPS_EXIT_USAGE);
    if (!strstr(err.msg, what)) fail_msg("'%s' lacks '%s'", err.msg, what);
}

#define JOB(extra) "{\"name\": \"a\", \"model\": \"m.json\", \"profiles\": [\"p.json\"]" extra "}"
#define FILE_OF(jobs) "{\"format\": \"hps-jobs\", \"version\": 1, \"cluster\": \"c.json\", \"jobs\": [" jobs "]}"

static void test_jobs_file(void **state)
{
    (void)state;
    hps_error err;
    plan_jobs_file jf;
    json_t *root = json_loads(FILE_OF(JOB(", \"min_throughput\": 5, \"weight\": 2, \"deadline_hours\": 1.5")), 0, NULL);
    assert_int_equal(plan_jobs_file_parse(root, "dir/jobs.json", &jf, &err), 0);
    json_decref(root);
    assert_string_equal(jf.cluster, "dir/c.json");
    assert_string_equal(jf.jobs[0].model, "dir/m.json");
    assert_string_equal(jf.jobs[0].profiles[0], "dir/p.json");
    assert_true(jf.jobs[0].deadline_s == 5400 && jf.jobs[0].weight == 2 && jf.budget == HUGE_VAL);
    plan_jobs_file_free(&jf);
    expect_error(FILE_OF(JOB("")), "jobs.json: job 'a': needs min_throughput (samples/s) or deadline_hours");
    expect_error(FILE_OF(JOB(", \"min_throughput\": 5, \"weight\": 0")), "job 'a': weight");
    expect_error(FILE_OF(JOB(", \"min_throughput\": 5, \"wieght\": 1")), "job 'a'");
    expect_error(FILE_OF(JOB(", \"min_throughput\": 5") "," JOB(", \"min_throughput\": 5")), "job 1: name 'a' is job 0's too");
    expect_error(FILE_OF("{\"name\": \"../x\", \"model\": \"m\", \"profiles\": [\"p\"], \"min_throughput\": 1}"),
                 "name '../x' must be letters");
    expect_error(FILE_OF(JOB(", \"min_throughput\": 5, \"profiles\": []")), "profiles must be an array");
    expect_error(FILE_OF(""), "jobs must be an array of 1 to");
    expect_error("{\"format\": \"hps-plan\", \"version\": 1}", "jobs.json");
    expect_error("{\"format\": \"hps-jobs\", \"version\": 1, \"cluster\": \"c\", \"budget\": -1, \"jobs\": []}",
                 "budget");
}

/* The three testdata jobs planned together beat their separate plans,
 * which all want the A100s: lower weighted completion, and at the same
 * cost under --objective cost. */
static void test_three_jobs_beat_separate_plans(void **state)
{
    (void)state;
    hps_error err;
    plan_jobs_file jf;
    if (plan_jobs_file_load(TD "jobs/three.json", &jf, &err)) fail_msg("%s", err.msg);
    plan_jobs *j = plan_jobs_create(&jf, 5, &err);
    if (!j) fail_msg("%s", err.msg);
    plan_jobs_problem *jp = plan_jobs_problem_of(j);
    plan_jobs_schedule sep, s;
    plan_jobs_separate(jp, &sep);
    jp->objective = PLAN_JOBS_COMPLETION;
    plan_jobs_solve_exact(jp, 10, &s);
    assert_true(s.feasible && s.optimal);
    assert_true(s.completion < 0.9 * sep.completion);
    jp->objective = PLAN_JOBS_COST;
    plan_jobs_solve_exact(jp, 10, &s);
    assert_true(s.cost <= sep.cost * (1 + 1e-12));
    /* the joint plan reads back */
    json_t *root = plan_jobs_to_json(j, &s, &sep, "exact", TD "jobs/out.json", &err);
    assert_non_null(root);
    plan_joint *jt = plan_joint_parse(root, "out.json", &err);
    if (!jt) fail_msg("%s", err.msg);
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    plan_joint_table(f, jt);
    plan_joint_svg(f, jt);
    fclose(f);
    assert_non_null(strstr(buf, "separate"));
    assert_non_null(strstr(buf, "</svg>"));
    free(buf);
    plan_joint_free(jt);
    json_t *stage0 = json_array_get(json_object_get(json_object_get(json_array_get(json_object_get(root, "jobs"), 2),
                                                                    "plan"), "stages"), 0);
    json_object_set_new(stage0, "units", json_string("8"));
    assert_null(plan_joint_parse(root, "out.json", &err));
    if (!strstr(err.msg, "out.json: job 2: plan: stage 0: units")) fail_msg("%s", err.msg);
    json_object_set_new(stage0, "units", json_integer(8));
    json_object_del(json_array_get(json_object_get(root, "jobs"), 1), "end_s");
    assert_null(plan_joint_parse(root, "out.json", &err));
    if (!strstr(err.msg, "out.json: job 1: missing field 'end_s'")) fail_msg("%s", err.msg);
    json_decref(root);
    plan_jobs_free(j);
    plan_jobs_file_free(&jf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_matches_brute_force),
        cmocka_unit_test(test_greedy_against_exact),
        cmocka_unit_test(test_jobs_file),
        cmocka_unit_test(test_three_jobs_beat_separate_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
