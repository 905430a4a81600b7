/* Criteo TSV lines, as hps-shard parses them into blocks of rows. */
#include "data/hps_data.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hps_parse_opts o = {.format = HPS_FMT_CRITEO,
                        .schema = {HPS_CRITEO_DENSE, HPS_CRITEO_SLOTS, 0, 0, 2},
                        .transform = size % 2 ? HPS_TRANSFORM_LOG : HPS_TRANSFORM_NONE,
                        .hash = HPS_HASH_MIX64,
                        .buckets = size % 3 ? 0 : 1000};
    hps_rows *r = hps_rows_create(&o.schema, 8);
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char msg[256];
        if (r->rows == 8) hps_rows_clear(r);
        hps_criteo_parse(&o, p, len, r, msg, sizeof msg);
        p += len + 1;
    }
    hps_rows_index(r);
    hps_rows_free(r);
    return 0;
}
