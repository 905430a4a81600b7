/* hps_testlib: what the unit tests and benchmarks build on and the tools
 * never call (libhps-test.a, linked into tests only). */
#ifndef HPS_TESTLIB_H
#define HPS_TESTLIB_H

#include "plan/hps_plan.h"
#include "train/hps_train.h"

/* Synthetic rows of the model's schema: labels from a planted logistic model
 * over the sparse keys and dense features, fixed by `planted`; `rows` rows
 * per epoch drawn with `seed`.  Train and eval sources share the planted seed
 * and differ in the row seed. */
hps_source *hps_source_synth(const hps_model *m, uint64_t rows, uint64_t planted, uint64_t seed);

/* A seeded CTR-like instance for tests and the benchmark: the limit is
 * tightness times the largest throughput reachable; unit_limits gives each
 * type 1 to 6 units (else 64). */
plan_problem *plan_problem_random(uint64_t seed, int n_layers, int n_types, double tightness,
                                  int unit_limits);

#endif
