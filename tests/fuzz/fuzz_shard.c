/* A shard file (hps-shard(5)): header, index and blocks, read block by block
 * with and without the decoding thread, then verified whole. */
#include "data/hps_shard.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path(data, size);
    hps_error err;
    for (int ahead = 0; ahead <= 1; ahead++) {
        hps_shard_read_opts o = {.ahead = ahead};
        hps_shard_reader *r = hps_shard_open(path, &o, &err);
        if (!r) return 0;
        const hps_rows *rows;
        while (hps_shard_next_block(r, &rows, &err) > 0) {}
        hps_shard_seek(r, hps_shard_reader_info(r)->rows / 2, &err);
        hps_shard_close(r);
    }
    hps_shard_info info;
    hps_shard_verify(path, &info, &err);
    return 0;
}
