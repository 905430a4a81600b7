/* A plan file (hps-plan(5)): as hps-train reads it against its model (the
 * seeds carry testdata's demo-ctr digest, so mutations get past the check),
 * and as the one reader reads it for every tool. */
#include "core/hps_json.h"
#include "fuzz.h"
#include "model/hps_model.h"
#include "plan/hps_plan_file.h"
#include "train/hps_train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static hps_model *m;
    hps_error err;
    if (!m) HPS_CHECK((m = hps_model_load(fuzz_testdata("models/demo-ctr.json"), &err)));
    const char *path = fuzz_path(data, size);
    plan_file plan;
    if (hps_train_plan_load(path, m, &plan, &err) == 0) plan_file_free(&plan);
    plan_file pf;
    if (plan_file_load(path, &pf, &err) == 0) plan_file_free(&pf);
    return 0;
}
