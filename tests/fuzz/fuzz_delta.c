/* A delta export applied to a base, as hps-train export-apply does: the
 * input is the base's length (4 bytes, little-endian), the base, then the
 * delta (seeds: tests/fuzz/make-seeds.sh).  The fuzz build lets digest
 * mismatches pass, so mutations reach the merge behind them. */
#include "fuzz.h"
#include "train/hps_train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    size_t blen = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (blen > size - 4) return 0;
    hps_error err;
    char *out = NULL;
    size_t olen = 0;
    if (hps_delta_apply_buf("base", data + 4, blen, "delta", data + 4 + blen, size - 4 - blen, &out, &olen,
                            &err) == 0)
        HPS_CHECK(hps_safetensors_check("out", (const unsigned char *)out, olen, NULL, &err) == 0);
    free(out);
    return 0;
}
