/* A checkpoint file (hps-train(1), CHECKPOINTS), loaded into a trainer of the
 * model its seed was written for (testdata's libsvm-logreg). */
#include "fuzz.h"
#include "model/hps_model.h"
#include "plan/hps_plan_file.h"
#include "train/hps_train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static hps_model *m;
    static hps_trainer *t;
    hps_error err;
    if (!t) {
        HPS_CHECK((m = hps_model_load(fuzz_testdata("models/libsvm-logreg.json"), &err)));
        static plan_file plan; /* the trainer keeps a pointer to it */
        hps_train_plan_single(m, &plan);
        hps_train_opts o = hps_train_opts_default();
        o.threads = 1;
        HPS_CHECK((t = hps_trainer_create(m, &plan, &o, &err)));
    }
    hps_trainer_load_file(t, fuzz_path(data, size), &err);
    return 0;
}
