/* A shard file (hps-shard(5)), two ways in:
 *
 * - a whole file ("HPSSHARD..."): read block by block with and without the
 *   decoding thread, in batches as hps-train reads it (hps_shard_read: the
 *   batched decoding and hps_rows_dense_rows), seeked, then verified whole;
 * - else one block's payload behind an 8-byte prefix (flags: bit 0 weighted,
 *   bit 1 multiclass, bit 2 version 2; n_dense, n_slots, classes; rows, 1 to
 *   4096, as u16; 2 zero bytes): decoded both ways, its dense rows taken in batches,
 *   then written as a one-block shard and read back as hps-train does.
 *   zstd and the CRCs would stop most mutations of a whole file before the
 *   payload; this way they reach the decoders.
 * tests/fuzz/make-seeds.sh writes seeds of both. */
#include <zstd.h>

#include "data/hps_shard.h"
#include "fuzz.h"

#define BATCH 7

/* hps-train's reading: batches, each from a slice, then a seek back. */
static void read_batches(const char *path, int ahead)
{
    hps_error err;
    hps_shard_read_opts o = {.ahead = ahead, .batches = 1};
    hps_shard_reader *r = hps_shard_open(path, &o, &err);
    if (!r) return;
    const hps_shard_info *info = hps_shard_reader_info(r);
    const hps_schema *s = &info->schema;
    hps_batch *b = hps_batch_create(BATCH, s->n_dense, s->n_slots, 64, s->weighted);
    int n;
    while ((n = hps_shard_read(r, b, BATCH, &err)) > 0) {}
    if (n == 0 && hps_shard_seek(r, info->rows / 3, &err) == 0)
        while ((n = hps_shard_read_part(r, b, BATCH, 2, 5, &err)) > 0) {}
    hps_batch_free(b);
    hps_shard_close(r);
}

static void fuzz_file(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path(data, size);
    hps_error err;
    for (int ahead = 0; ahead <= 1; ahead++) {
        hps_shard_read_opts o = {.ahead = ahead};
        hps_shard_reader *r = hps_shard_open(path, &o, &err);
        if (!r) return;
        const hps_rows *rows;
        while (hps_shard_next_block(r, &rows, &err) > 0) {}
        hps_shard_seek(r, hps_shard_reader_info(r)->rows / 2, &err);
        hps_shard_close(r);
    }
    read_batches(path, 0);
    read_batches(path, 4);
    hps_shard_info info;
    hps_shard_verify(path, &info, &err);
}

/* The payload as a shard's only block, compressed and summed as the writer
 * does, read back in batches. */
static void payload_as_shard(const hps_schema *s, const uint8_t *payload, size_t len, int rows,
                             int64_t nnz)
{
    hps_error err;
    const char *path = fuzz_scratch_path();
    hps_shard_writer *w = hps_shard_writer_create(path, s, (uint32_t)rows, &err);
    HPS_CHECK(w);
    size_t cap = ZSTD_compressBound(len);
    hps_block b = {.data = hps_malloc(cap), .cap = cap, .rows = (uint32_t)rows, .usize = (uint32_t)len,
                   .nnz = (uint32_t)nnz};
    b.len = ZSTD_compress(b.data, cap, payload, len, 1);
    HPS_CHECK(!ZSTD_isError(b.len));
    b.crc = hps_crc32c(0, b.data, b.len);
    hps_shard_info info;
    HPS_CHECK(hps_shard_writer_add(w, &b, &err) == 0 && hps_shard_writer_close(w, &info, &err) == 0);
    free(b.data);
    read_batches(path, 0);
    read_batches(path, 4);
}

static void fuzz_payload(const uint8_t *data, size_t size)
{
    if (size < 8 || data[6] || data[7]) return;
    hps_schema s = {.weighted = data[0] & 1, .multiclass = (data[0] >> 1) & 1, .n_dense = data[1],
                    .n_slots = data[2], .classes = data[3]};
    int version = (data[0] >> 2) & 1 ? 2 : 1;
    int rows = data[4] | data[5] << 8;
    if (rows == 0 || rows > 4096 || s.classes < 2 || (!s.multiclass && s.classes != 2)) return;
    const uint8_t *payload = data + 8;
    size_t len = size - 8;
    hps_rows *r = hps_rows_create(&s, rows);
    int64_t nnz = -1;
    if (hps_rows_decode(r, payload, len, rows, version) == 0) {
        hps_rows_index(r);
        nnz = hps_rows_nnz(r);
    }
    /* as the shard reader decodes for batches: dense columns left in the
     * payload, taken a batch of rows at a time, then from behind */
    if (hps_rows_decode_batched(r, payload, len, rows, version) == 0) {
        float *out = hps_malloc(((size_t)rows * s.n_dense + 1) * sizeof *out);
        for (int from = 0; from < rows; from += BATCH)
            hps_rows_dense_rows(r, from, rows - from < BATCH ? rows - from : BATCH, out);
        hps_rows_dense_rows(r, rows / 2, rows - rows / 2, out);
        hps_rows_unpack_dense(r);
        free(out);
        HPS_CHECK(nnz == hps_rows_nnz(r)); /* the two decoders agree */
    } else {
        HPS_CHECK(nnz < 0);
    }
    hps_rows_free(r);
    if (nnz >= 0 && nnz <= UINT32_MAX) payload_as_shard(&s, payload, len, rows, nnz);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 8 && memcmp(data, HPS_SHARD_MAGIC, 8) == 0) fuzz_file(data, size);
    else fuzz_payload(data, size);
    return 0;
}
