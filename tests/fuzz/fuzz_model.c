/* A model file (hps-model(5)). */
#include "fuzz.h"
#include "model/hps_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hps_error err;
    hps_model_free(hps_model_load(fuzz_path(data, size), &err));
    return 0;
}
