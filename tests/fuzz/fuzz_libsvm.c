/* libsvm lines: binary or multi-class labels, sparse keys or --dense. */
#include "data/hps_data.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int dense = size % 2, multi = size % 3 == 0;
    hps_parse_opts o = {.format = HPS_FMT_LIBSVM,
                        .schema = {dense ? 8 : 0, dense ? 0 : 1, !dense, multi, multi ? 5 : 2},
                        .transform = HPS_TRANSFORM_LOG,
                        .hash = HPS_HASH_NONE,
                        .buckets = size % 5 ? 0 : 97};
    hps_rows *r = hps_rows_create(&o.schema, 8);
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char msg[256];
        if (r->rows == 8) hps_rows_clear(r);
        hps_libsvm_parse(&o, p, len, r, msg, sizeof msg);
        p += len + 1;
    }
    hps_rows_index(r);
    hps_rows_free(r);
    return 0;
}
