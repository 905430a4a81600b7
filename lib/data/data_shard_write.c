/* Shard files, the writing side: block compression and the file layout. */
#include "data/hps_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

void hps_block_compress(const hps_rows *r, void *cctx, int level, hps_block *out,
                        uint8_t **scratch, size_t *scratch_cap)
{
    size_t bound = hps_rows_payload_bound(r);
    HPS_CHECK(bound <= UINT32_MAX && hps_rows_nnz(r) <= UINT32_MAX);
    if (bound > *scratch_cap) {
        *scratch_cap = bound + bound / 4;
        *scratch = hps_realloc(*scratch, *scratch_cap);
    }
    size_t usize = hps_rows_encode(r, *scratch);
    size_t zbound = ZSTD_compressBound(usize);
    if (zbound > out->cap) {
        out->cap = zbound + zbound / 4;
        out->data = hps_realloc(out->data, out->cap);
    }
    ZSTD_CCtx *c = cctx;
    ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
    /* zstd's own content checksum covers the decoded bytes; our CRC covers
     * the stored bytes, so a flipped byte is caught before decoding. */
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    size_t n = ZSTD_compress2(c, out->data, out->cap, *scratch, usize);
    HPS_CHECK(!ZSTD_isError(n));
    out->len = n;
    out->rows = (uint32_t)r->rows;
    out->usize = (uint32_t)usize;
    out->nnz = (uint32_t)hps_rows_nnz(r);
    out->crc = hps_crc32c(0, out->data, n);
}

void hps_block_free(hps_block *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* ---- little-endian fields --------------------------------------------------- */
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

typedef struct {
    uint64_t offset;
    uint32_t csize, usize, rows, nnz, crc;
} block_entry;

struct hps_shard_writer {
    char *path;
    int fd;
    hps_schema schema;
    uint32_t block_rows;
    uint64_t offset, rows, nnz;
    uint32_t crc; /* of everything after the header */
    block_entry *index;
    size_t n_blocks, cap;
};

static int write_all(hps_shard_writer *w, const void *buf, size_t n, hps_error *err)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", w->path, strerror(errno));
        p += k, n -= (size_t)k;
    }
    return 0;
}

hps_shard_writer *hps_shard_writer_create(const char *path, const hps_schema *s,
                                          uint32_t block_rows, hps_error *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot create: %s", path, strerror(errno));
        return NULL;
    }
    hps_shard_writer *w = hps_calloc(1, sizeof *w);
    w->path = hps_strdup(path);
    w->fd = fd;
    w->schema = *s;
    w->block_rows = block_rows;
    uint8_t zero[HPS_SHARD_HEADER_SIZE] = {0}; /* the real header comes last */
    if (write_all(w, zero, sizeof zero, err) != 0) {
        hps_shard_writer_abort(w);
        return NULL;
    }
    w->offset = HPS_SHARD_HEADER_SIZE;
    return w;
}

int hps_shard_writer_add(hps_shard_writer *w, const hps_block *b, hps_error *err)
{
    if (w->n_blocks == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->index = hps_realloc(w->index, w->cap * sizeof *w->index);
    }
    if (write_all(w, b->data, b->len, err) != 0) return -1;
    w->index[w->n_blocks++] = (block_entry){w->offset, (uint32_t)b->len, b->usize, b->rows, b->nnz, b->crc};
    w->crc = hps_crc32c(w->crc, b->data, b->len);
    w->offset += b->len;
    w->rows += b->rows;
    w->nnz += b->nnz;
    return 0;
}

static void encode_header(const hps_shard_writer *w, uint64_t index_offset, uint8_t h[64])
{
    memset(h, 0, HPS_SHARD_HEADER_SIZE);
    memcpy(h, HPS_SHARD_MAGIC, 8);
    put32(h + 8, HPS_SHARD_VERSION);
    put32(h + 12, HPS_SHARD_HEADER_SIZE);
    put32(h + 16, (w->schema.weighted ? 1u : 0u) | (w->schema.multiclass ? 2u : 0u));
    put32(h + 20, (uint32_t)w->schema.n_dense);
    put32(h + 24, (uint32_t)w->schema.n_slots);
    put32(h + 28, (uint32_t)w->schema.classes);
    put32(h + 32, w->block_rows);
    put32(h + 36, (uint32_t)w->n_blocks);
    put64(h + 40, w->rows);
    put64(h + 48, index_offset);
    put32(h + 60, hps_crc32c(0, h, 60));
}

static uint8_t *encode_index(const hps_shard_writer *w, size_t *len)
{
    size_t n = 16 + HPS_SHARD_ENTRY_SIZE * w->n_blocks + 8;
    uint8_t *x = hps_calloc(1, n), *p = x + 16;
    memcpy(x, HPS_SHARD_INDEX_MAGIC, 8);
    put32(x + 8, HPS_SHARD_ENTRY_SIZE);
    put32(x + 12, (uint32_t)w->n_blocks);
    for (size_t i = 0; i < w->n_blocks; i++, p += HPS_SHARD_ENTRY_SIZE) {
        const block_entry *e = &w->index[i];
        put64(p, e->offset);
        put32(p + 8, e->csize);
        put32(p + 12, e->usize);
        put32(p + 16, e->rows);
        put32(p + 20, e->nnz);
        put32(p + 24, e->crc);
    }
    put32(p, hps_crc32c(0, x, (size_t)(p - x)));
    *len = n;
    return x;
}

static void writer_free(hps_shard_writer *w)
{
    if (w->fd >= 0) close(w->fd);
    free(w->index);
    free(w->path);
    free(w);
}

int hps_shard_writer_close(hps_shard_writer *w, hps_shard_info *info, hps_error *err)
{
    size_t len;
    uint8_t *index = encode_index(w, &len), header[HPS_SHARD_HEADER_SIZE];
    int rc = write_all(w, index, len, err);
    w->crc = hps_crc32c(w->crc, index, len);
    free(index);
    encode_header(w, w->offset, header);
    if (rc == 0 && pwrite(w->fd, header, sizeof header, 0) != (ssize_t)sizeof header)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", w->path, strerror(errno));
    if (rc == 0 && fsync(w->fd) != 0)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: fsync failed: %s", w->path, strerror(errno));
    if (rc == 0 && info) {
        *info = (hps_shard_info){w->schema, w->block_rows, (uint32_t)w->n_blocks, w->rows, w->nnz,
                                 w->offset + len, w->crc};
    }
    if (close(w->fd) != 0 && rc == 0)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", w->path, strerror(errno));
    w->fd = -1;
    writer_free(w);
    return rc;
}

void hps_shard_writer_abort(hps_shard_writer *w)
{
    if (w) writer_free(w);
}
