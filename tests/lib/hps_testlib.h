/* hps_testlib: what the unit tests and benchmarks build on and the tools
 * never call (libhps-test.a, linked into tests only). */
#ifndef HPS_TESTLIB_H
#define HPS_TESTLIB_H

#include "train/hps_train.h"

/* Synthetic rows of the model's schema: labels from a planted logistic model
 * over the sparse keys and dense features, fixed by `planted`; `rows` rows
 * per epoch drawn with `seed`.  Train and eval sources share the planted seed
 * and differ in the row seed. */
hps_source *hps_source_synth(const hps_model *m, uint64_t rows, uint64_t planted, uint64_t seed);

/* plan_problem_random is in the library (hps_plan.h): --train-policy uses it. */

#endif
