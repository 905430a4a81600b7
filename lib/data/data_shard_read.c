/* Shard files, the reading side: header and index checks, block decoding in
 * a background thread, and filling hps_batch for the trainer. */
#include "data/hps_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define MAX_BLOCK_BYTES (1u << 30) /* a larger block in an index means corruption */

static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

typedef struct {
    uint64_t offset, first_row;
    uint32_t csize, usize, rows, nnz, crc;
} block_entry;

/* A decoded block, or the error met decoding it. */
typedef struct {
    hps_rows *rows;
    uint8_t *payload;   /* when batched: the block's, its dense columns still in it */
    size_t payload_cap;
    int ready;
    int failed;
    hps_error err;
} slot;

/* What decoding needs: owned by the background thread, or by the caller
 * when there is none. */
typedef struct {
    ZSTD_DCtx *dctx;
    uint8_t *cbuf, *ubuf;
    size_t ccap, ucap;
} decoder;

struct hps_shard_reader {
    char *path;
    int fd;
    hps_shard_info info;
    int version;        /* of the file: how its payloads are laid out */
    block_entry *index;
    int ahead;          /* 0: no thread */
    int n_slots;
    slot *slots;
    decoder dec;
    pthread_t thread;
    int running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;           /* under mu */
    uint32_t produce;   /* next block to decode, under mu */
    int batches;        /* hps_shard_read was called: decode dense rows too, under mu */
    uint32_t consume;   /* next block the caller takes */
    slot *cur;          /* block being consumed */
    uint32_t cur_block;
    int cur_row;
    int skip_rows;      /* rows to skip in the next block (after a seek) */
    uint64_t pos;
    uint32_t max_block_rows; /* of the blocks the index lists */
};

/* ---- opening ----------------------------------------------------------------- */

static int pread_all(int fd, void *buf, size_t n, uint64_t off)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t k = pread(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, n -= (size_t)k, off += (uint64_t)k;
    }
    return 0;
}

static int read_header(hps_shard_reader *r, uint64_t file_size, uint64_t *index_offset, hps_error *err)
{
    uint8_t h[HPS_SHARD_HEADER_SIZE];
    if (file_size < HPS_SHARD_HEADER_SIZE || pread_all(r->fd, h, sizeof h, 0) != 0)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: header: file too short", r->path);
    if (memcmp(h, HPS_SHARD_MAGIC, 8) != 0)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: header: bad magic (not an hps shard)", r->path);
    if (!hps_checksum_ok(get32(h + 60) == hps_crc32c(0, h, 60)))
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: header: checksum mismatch", r->path);
    r->version = (int)get32(h + 8);
    if (r->version < 1 || r->version > HPS_SHARD_VERSION)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: header: version %u, this reader knows 1 to %d",
                        r->path, get32(h + 8), HPS_SHARD_VERSION);
    hps_shard_info *i = &r->info;
    uint32_t flags = get32(h + 16);
    i->schema.weighted = flags & 1;
    i->schema.multiclass = (flags >> 1) & 1;
    i->schema.n_dense = (int)get32(h + 20);
    i->schema.n_slots = (int)get32(h + 24);
    i->schema.classes = (int)get32(h + 28);
    i->block_rows = get32(h + 32);
    i->blocks = get32(h + 36);
    i->rows = get64(h + 40);
    *index_offset = get64(h + 48);
    const hps_schema *s = &i->schema; /* counts are stored unsigned: above INT_MAX reads negative */
    if (s->n_dense < 0 || s->n_dense > HPS_DATA_MAX_DENSE || s->n_slots < 0 ||
        s->n_slots > HPS_DATA_MAX_SLOTS || s->classes < 2 || s->classes > HPS_DATA_MAX_CLASSES ||
        (!s->multiclass && s->classes != 2) || i->block_rows == 0 ||
        i->block_rows > HPS_SHARD_MAX_BLOCK_ROWS)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: header: impossible schema or block size", r->path);
    uint64_t need = 16 + (uint64_t)HPS_SHARD_ENTRY_SIZE * i->blocks + 8;
    if (*index_offset < HPS_SHARD_HEADER_SIZE || *index_offset > file_size ||
        file_size - *index_offset != need)
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "%s: header: index at %llu does not end the file (%llu bytes): truncated?",
                        r->path, (unsigned long long)*index_offset, (unsigned long long)file_size);
    i->bytes = file_size;
    return 0;
}

static int read_index(hps_shard_reader *r, uint64_t index_offset, hps_error *err)
{
    hps_shard_info *i = &r->info;
    size_t len = 16 + (size_t)HPS_SHARD_ENTRY_SIZE * i->blocks + 8;
    uint8_t *x = hps_malloc(len);
    int rc = 0;
    if (pread_all(r->fd, x, len, index_offset) != 0)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: index: cannot read: %s", r->path, strerror(errno));
    else if (memcmp(x, HPS_SHARD_INDEX_MAGIC, 8) != 0 || get32(x + 8) != HPS_SHARD_ENTRY_SIZE ||
             get32(x + 12) != i->blocks)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: index: bad magic or size", r->path);
    else if (!hps_checksum_ok(get32(x + len - 8) == hps_crc32c(0, x, len - 8)))
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: index: checksum mismatch", r->path);
    r->index = hps_calloc(i->blocks ? i->blocks : 1, sizeof *r->index);
    uint64_t row = 0, off = HPS_SHARD_HEADER_SIZE;
    for (uint32_t b = 0; rc == 0 && b < i->blocks; b++) {
        const uint8_t *p = x + 16 + (size_t)HPS_SHARD_ENTRY_SIZE * b;
        block_entry *e = &r->index[b];
        *e = (block_entry){get64(p), row, get32(p + 8), get32(p + 12), get32(p + 16), get32(p + 20), get32(p + 24)};
        if (e->offset != off || e->csize == 0 || e->csize > MAX_BLOCK_BYTES || e->usize > MAX_BLOCK_BYTES ||
            e->rows == 0 || e->rows > i->block_rows ||
            e->usize < hps_payload_least(&i->schema, e->rows, r->version))
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: index: block %u: impossible entry", r->path, b);
        off += e->csize;
        row += e->rows;
        i->nnz += e->nnz;
        if (e->rows > r->max_block_rows) r->max_block_rows = e->rows;
    }
    if (rc == 0 && (off != index_offset || row != i->rows))
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: index: blocks do not add up to the header", r->path);
    free(x);
    return rc;
}

static void *producer(void *arg);

hps_shard_reader *hps_shard_open(const char *path, const hps_shard_read_opts *opts, hps_error *err)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    hps_shard_reader *r = hps_calloc(1, sizeof *r);
    r->path = hps_strdup(path);
    r->fd = fd;
    r->ahead = opts ? opts->ahead : HPS_SHARD_AHEAD;
    r->batches = opts && opts->batches;
    if (r->ahead < 0) r->ahead = 0;
    struct stat st;
    uint64_t index_offset = 0;
    if (fstat(fd, &st) != 0 || read_header(r, (uint64_t)st.st_size, &index_offset, err) != 0 ||
        read_index(r, index_offset, err) != 0) {
        hps_shard_close(r);
        return NULL;
    }
    r->n_slots = r->ahead ? r->ahead : 1;
    r->slots = hps_calloc((size_t)r->n_slots, sizeof *r->slots);
    /* the blocks as listed, not the header's block size: a header alone
     * must not make a small file ask for gigabytes */
    int cap = (int)r->max_block_rows + 1;
    for (int s = 0; s < r->n_slots; s++) r->slots[s].rows = hps_rows_create(&r->info.schema, cap);
    r->dec.dctx = ZSTD_createDCtx();
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (r->ahead && r->info.blocks) {
        HPS_CHECK(pthread_create(&r->thread, NULL, producer, r) == 0);
        r->running = 1;
    }
    return r;
}

const hps_shard_info *hps_shard_reader_info(const hps_shard_reader *r) { return &r->info; }

/* ---- decoding ----------------------------------------------------------------- */

static void grow(uint8_t **buf, size_t *cap, size_t n)
{
    if (n <= *cap) return;
    *cap = n;
    *buf = hps_realloc(*buf, n);
}

/* Block b's dense values, all finite: one NaN would train on into every
 * weight it reaches.  The row is the shard's, counted from 0. */
static int check_dense(const hps_shard_reader *r, uint32_t b, const hps_rows *rows, hps_error *err)
{
    int col = 0;
    float x = 0;
    int bad = hps_rows_bad_dense(rows, &col, &x);
    if (bad < 0) return 0;
    return hps_fail(err, HPS_EXIT_RUNTIME, "%s: row %llu (block %u, row %d): dense feature %d is %s: expected a finite number",
                    r->path, (unsigned long long)(r->index[b].first_row + (uint64_t)bad), b, bad, col + 1,
                    x != x ? "nan" : x > 0 ? "inf" : "-inf");
}

/* Reads, checks and decodes block b into s (any thread; d is that thread's);
 * batched: for hps_shard_read, the dense columns left in s's own payload
 * (hps_rows_decode_batched). */
static void decode_block(const hps_shard_reader *r, decoder *d, uint32_t b, slot *s, int batched)
{
    const block_entry *e = &r->index[b];
    hps_error *err = &s->err;
    s->failed = 1;
    grow(&d->cbuf, &d->ccap, e->csize);
    uint8_t **ubuf = batched ? &s->payload : &d->ubuf;
    size_t *ucap = batched ? &s->payload_cap : &d->ucap;
    grow(ubuf, ucap, e->usize ? e->usize : 1);
    if (pread_all(r->fd, d->cbuf, e->csize, e->offset) != 0) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: block %u: cannot read: %s", r->path, b,
                 errno ? strerror(errno) : "file truncated");
        return;
    }
    uint32_t crc = hps_crc32c(0, d->cbuf, e->csize);
    if (!hps_checksum_ok(crc == e->crc)) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: block %u: checksum mismatch (stored %08x, computed %08x)",
                 r->path, b, e->crc, crc);
        return;
    }
    size_t n = ZSTD_decompressDCtx(d->dctx, *ubuf, e->usize, d->cbuf, e->csize);
    if (ZSTD_isError(n) || n != e->usize) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: block %u: cannot decompress: %s", r->path, b,
                 ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong size");
        return;
    }
    if ((batched ? hps_rows_decode_batched : hps_rows_decode)(s->rows, *ubuf, n, (int)e->rows, r->version) != 0 ||
        hps_rows_nnz(s->rows) != (int64_t)e->nnz) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: block %u: payload does not match the schema", r->path, b);
        return;
    }
    int bad = hps_rows_bad_label(s->rows);
    if (bad >= 0) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: block %u: row %d: label %g is not a class of %d",
                 r->path, b, bad, (double)s->rows->labels[bad], s->rows->schema.classes);
        return;
    }
    if (check_dense(r, b, s->rows, err)) return;
    s->failed = 0;
}

/* The background thread: decodes blocks in order into free slots. */
static void *producer(void *arg)
{
    hps_shard_reader *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->produce < r->info.blocks && r->slots[r->produce % r->n_slots].ready)
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->stop || r->produce >= r->info.blocks) break;
        uint32_t b = r->produce++;
        slot *s = &r->slots[b % r->n_slots];
        int batched = r->batches;
        pthread_mutex_unlock(&r->mu);
        decode_block(r, &r->dec, b, s, batched); /* s is ours until it is marked ready */
        pthread_mutex_lock(&r->mu);
        s->ready = 1;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void release_current(hps_shard_reader *r)
{
    if (!r->cur) return;
    pthread_mutex_lock(&r->mu);
    r->cur->ready = 0;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    r->cur = NULL;
}

/* Takes the next block: 1, 0 at the end, -1 with the block's error. */
static int take_block(hps_shard_reader *r, hps_error *err)
{
    release_current(r);
    if (r->consume >= r->info.blocks) return 0;
    uint32_t b = r->consume;
    slot *s = &r->slots[b % r->n_slots];
    if (r->ahead) {
        pthread_mutex_lock(&r->mu);
        while (!s->ready) pthread_cond_wait(&r->cv, &r->mu);
        pthread_mutex_unlock(&r->mu);
    } else {
        decode_block(r, &r->dec, b, s, r->batches);
        s->ready = 1;
    }
    if (s->failed) {
        *err = s->err; /* stays at this block: every later call fails the same way */
        return -1;
    }
    r->consume++;
    r->cur = s;
    r->cur_block = b;
    r->cur_row = r->skip_rows;
    r->skip_rows = 0;
    return 1;
}

int hps_shard_next_block(hps_shard_reader *r, const hps_rows **rows, hps_error *err)
{
    int rc = take_block(r, err);
    if (rc <= 0) return rc;
    hps_rows_unpack_dense(r->cur->rows); /* decoded for batches: a block's caller reads the columns */
    *rows = r->cur->rows;
    r->pos = r->index[r->cur_block].first_row + (uint64_t)r->cur->rows->rows;
    r->cur_row = r->cur->rows->rows;
    return 1;
}

/* Appends rows [from, from+n) of a decoded block to batch b. */
static void copy_rows(hps_batch *b, const slot *blk, int from, int n)
{
    const hps_rows *src = blk->rows;
    const hps_schema *s = &src->schema;
    int S = s->n_slots;
    hps_rows_dense_rows(blk->rows, from, n, b->dense + (size_t)b->B * s->n_dense);
    int64_t keys = 0; /* all the range's keys reserved at once */
    for (int j = 0; j < S; j++) keys += src->offsets[j][from + n] - src->offsets[j][from];
    hps_batch_reserve_keys(b, b->nnz + keys);
    for (int i = 0; i < n; i++) {
        int row = from + i, out = b->B + i;
        b->labels[out] = src->labels[row];
        for (int j = 0; j < S; j++) {
            /* mostly one key: a loop, not a call to memcpy */
            int64_t lo = src->offsets[j][row], k = src->offsets[j][row + 1] - lo;
            for (int64_t q = 0; q < k; q++) b->keys[b->nnz + q] = src->keys[j][lo + q];
            if (b->weights)
                for (int64_t q = 0; q < k; q++)
                    b->weights[b->nnz + q] = s->weighted ? src->weights[j][lo + q] : 1.0f;
            b->nnz += k;
            b->offsets[(size_t)out * S + j + 1] = b->nnz;
        }
    }
    b->B += n;
}

/* Rows [from, from+n) of the block at batch row b->B, those outside [lo, hi) skipped. */
static void take_rows(hps_batch *b, const slot *blk, int from, int n, int lo, int hi)
{
    int a = lo - b->B, z = hi - b->B; /* the part to decode, in the block's rows from `from` */
    a = a < 0 ? 0 : a > n ? n : a;
    z = z < a ? a : z > n ? n : z;
    hps_batch_skip_rows(b, a);
    if (z > a) copy_rows(b, blk, from + a, z - a);
    hps_batch_skip_rows(b, n - z);
}

int hps_shard_read_part(hps_shard_reader *r, hps_batch *b, int max, int lo, int hi, hps_error *err)
{
    const hps_schema *s = &r->info.schema;
    if (b->n_dense != s->n_dense || b->n_slots != s->n_slots || max > b->cap || max < 1)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: batch of %d dense and %d slots does not fit shard of %d dense and %d slots",
                        r->path, b->n_dense, b->n_slots, s->n_dense, s->n_slots);
    if (!r->batches) { /* blocks decoded from now on are decoded for batches */
        pthread_mutex_lock(&r->mu);
        r->batches = 1;
        pthread_mutex_unlock(&r->mu);
    }
    b->B = 0;
    b->nnz = 0;
    b->offsets[0] = 0;
    while (b->B < max) {
        if (!r->cur || r->cur_row == r->cur->rows->rows) {
            int rc = take_block(r, err);
            if (rc < 0) return -1;
            if (rc == 0) break;
        }
        int n = r->cur->rows->rows - r->cur_row;
        if (n > max - b->B) n = max - b->B;
        take_rows(b, r->cur, r->cur_row, n, lo, hi);
        r->cur_row += n;
        r->pos += (uint64_t)n;
    }
    return b->B;
}

int hps_shard_read(hps_shard_reader *r, hps_batch *b, int max, hps_error *err)
{
    return hps_shard_read_part(r, b, max, 0, max, err);
}

uint64_t hps_shard_tell(const hps_shard_reader *r) { return r->pos; }

static void stop_thread(hps_shard_reader *r)
{
    if (!r->running) return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    r->running = 0;
    r->stop = 0;
}

int hps_shard_seek(hps_shard_reader *r, uint64_t row, hps_error *err)
{
    if (row > r->info.rows)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: cannot seek to row %llu of %llu", r->path,
                        (unsigned long long)row, (unsigned long long)r->info.rows);
    stop_thread(r);
    r->cur = NULL;
    for (int s = 0; s < r->n_slots; s++) r->slots[s].ready = 0;
    uint32_t lo = 0, hi = r->info.blocks; /* the last block whose first row <= row */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->index[mid].first_row <= row) lo = mid;
        else hi = mid;
    }
    if (row == r->info.rows) lo = r->info.blocks;
    r->produce = r->consume = lo;
    r->skip_rows = lo < r->info.blocks ? (int)(row - r->index[lo].first_row) : 0;
    r->pos = row;
    if (r->ahead && lo < r->info.blocks) {
        HPS_CHECK(pthread_create(&r->thread, NULL, producer, r) == 0);
        r->running = 1;
    }
    return 0;
}

void hps_shard_close(hps_shard_reader *r)
{
    if (!r) return;
    stop_thread(r);
    if (r->slots) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        for (int s = 0; s < r->n_slots; s++) {
            hps_rows_free(r->slots[s].rows);
            free(r->slots[s].payload);
        }
    }
    free(r->slots);
    ZSTD_freeDCtx(r->dec.dctx);
    free(r->dec.cbuf);
    free(r->dec.ubuf);
    free(r->index);
    if (r->fd >= 0) close(r->fd);
    free(r->path);
    free(r);
}

/* ---- verification ---------------------------------------------------------------- */

int hps_shard_verify(const char *path, hps_shard_info *info, hps_error *err)
{
    hps_shard_read_opts o = {.ahead = 2};
    hps_shard_reader *r = hps_shard_open(path, &o, err);
    if (!r) return -1;
    const hps_rows *rows;
    int rc;
    while ((rc = hps_shard_next_block(r, &rows, err)) > 0) {}
    uint32_t crc = 0;
    if (rc == 0) { /* the whole-file checksum the manifest records */
        size_t cap = 1 << 20;
        uint8_t *buf = hps_malloc(cap);
        for (uint64_t off = HPS_SHARD_HEADER_SIZE; off < r->info.bytes;) {
            size_t n = r->info.bytes - off < cap ? (size_t)(r->info.bytes - off) : cap;
            if (pread_all(r->fd, buf, n, off) != 0) {
                rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot read: %s", path, strerror(errno));
                break;
            }
            crc = hps_crc32c(crc, buf, n);
            off += n;
        }
        free(buf);
    }
    if (rc == 0 && info) {
        *info = r->info;
        info->checksum = crc;
    }
    hps_shard_close(r);
    return rc;
}
