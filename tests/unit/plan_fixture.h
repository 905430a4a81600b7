/* A plan problem from testdata files, for the unit tests of lib/plan. */
#ifndef PLAN_FIXTURE_H
#define PLAN_FIXTURE_H

#include <stdlib.h>

#include "core/hps_io.h"
#include "plan/hps_cluster.h"
#include "plan/hps_plan.h"

typedef struct {
    hps_model *m;
    hps_cluster *c;
    hps_profiles *ps;
    plan_problem *p;
} plan_fixture;

static inline void plan_fixture_load(plan_fixture *f, const char *model, const char *cluster, const char *profile,
                                     double limit)
{
    hps_error err;
    char *text;
    size_t len;
    f->m = hps_model_load(model, &err);
    f->c = hps_cluster_load(cluster, &err);
    f->ps = hps_profiles_new();
    assert_non_null(f->m);
    assert_non_null(f->c);
    assert_int_equal(hps_read_all(profile, &text, &len, &err), 0);
    assert_int_equal(hps_profiles_add(f->ps, profile, text, len, &err), 0);
    free(text);
    f->p = plan_problem_build(f->m, f->c, f->ps, &err);
    if (!f->p) fail_msg("%s", err.msg);
    f->p->min_throughput = limit;
}

static inline void plan_fixture_free(plan_fixture *f)
{
    plan_problem_free(f->p);
    hps_profiles_free(f->ps);
    hps_cluster_free(f->c);
    hps_model_free(f->m);
}

#endif
