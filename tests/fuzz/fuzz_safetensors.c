/* A safetensors file as hps-train's export reads it back. */
#include "fuzz.h"
#include "train/hps_train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hps_error err;
    int n;
    hps_safetensors_check("fuzz", data, size, &n, &err);
    return 0;
}
