/* libsvm lines: binary or multi-class labels, sparse keys or --dense. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int dense = size % 2, multi = size % 3 == 0;
    hps_parse_opts o = {.format = HPS_FMT_LIBSVM,
                        .schema = {dense ? 8 : 0, dense ? 0 : 1, !dense, multi, multi ? 5 : 2},
                        .transform = HPS_TRANSFORM_LOG,
                        .hash = HPS_HASH_NONE,
                        .buckets = size % 5 ? 0 : 97};
    fuzz_lines(data, size, &o, hps_libsvm_parse);
    return 0;
}
