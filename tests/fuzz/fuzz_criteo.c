/* Criteo TSV lines, as hps-shard parses them into blocks of rows. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hps_parse_opts o = {.format = HPS_FMT_CRITEO,
                        .schema = {HPS_CRITEO_DENSE, HPS_CRITEO_SLOTS, 0, 0, 2},
                        .transform = size % 2 ? HPS_TRANSFORM_LOG : HPS_TRANSFORM_NONE,
                        .hash = HPS_HASH_MIX64,
                        .buckets = size % 3 ? 0 : 1000};
    fuzz_lines(data, size, &o, hps_criteo_parse);
    return 0;
}
