/* A source that keeps in memory what another source reads (hps-train
 * --in-memory): the rows of the first pass over an epoch, read whole from
 * row 0 on, go into one batch; later epochs copy them from there instead of
 * decoding the shards again, as a PyTorch loop reads tensors it holds.  Past
 * its budget, or where a reader takes parts of batches (workers under
 * mpirun), it lets the source stream. */
#include <stdio.h>
#include <stdlib.h>

#include "train/hps_train.h"

typedef enum { FILLING, KEPT, STREAMING } memory_state;

typedef struct {
    hps_source base;
    hps_source *inner;
    hps_batch *rows; /* the epoch's rows from row 0, as far as read; NULL once streaming */
    size_t max_bytes;
    memory_state state;
    uint64_t pos; /* KEPT: the epoch's next row */
} memory_source;

static size_t kept_bytes(const memory_source *s, int64_t rows, int64_t keys)
{
    const hps_source *in = s->inner;
    size_t row = (size_t)in->n_dense * sizeof(float) + sizeof(float) + (size_t)in->n_slots * sizeof(int64_t);
    return (size_t)rows * row + (size_t)keys * (sizeof(uint64_t) + (in->weighted ? sizeof(float) : 0));
}

static void stream(memory_source *s, const char *why)
{
    hps_batch_free(s->rows);
    s->rows = NULL;
    s->state = STREAMING;
    hps_log(2, "%s: --in-memory: %s: the training rows are decoded every epoch\n", hps_progname(), why);
}

/* After a read of got rows at epoch row `at`: keeps them where they go on
 * from the rows kept; whole: the read decoded every row of the batch. */
static void keep(memory_source *s, const hps_batch *b, uint64_t at, int whole)
{
    if (s->state != FILLING || at != (uint64_t)s->rows->B) return; /* not from row 0 on: the next pass fills */
    if (!whole) {
        stream(s, "workers read parts of each batch");
        return;
    }
    if (kept_bytes(s, s->rows->B + b->B, s->rows->nnz + b->nnz) > s->max_bytes) {
        char why[96];
        snprintf(why, sizeof why, "they need more than %zu MiB", s->max_bytes >> 20);
        stream(s, why);
        return;
    }
    hps_batch_append(s->rows, b);
}

/* The end of a pass: every row of the epoch kept, later epochs read them. */
static void epoch_end(memory_source *s)
{
    if (s->state != FILLING || (uint64_t)s->rows->B != s->inner->rows(s->inner)) return;
    s->state = KEPT;
    hps_log(3, "%s: --in-memory: %d rows kept (%.1f MiB): later epochs read them from memory\n", hps_progname(),
            s->rows->B, (double)kept_bytes(s, s->rows->B, s->rows->nnz) / 1048576.0);
}

/* KEPT: the next rows of the epoch into b, those outside [lo, hi) skipped. */
static int copy_kept(memory_source *s, hps_batch *b, int max, int lo, int hi)
{
    b->B = 0;
    b->nnz = 0;
    b->offsets[0] = 0;
    uint64_t left = (uint64_t)s->rows->B - s->pos;
    int n = left < (uint64_t)max ? (int)left : max;
    int a = lo < 0 ? 0 : lo > n ? n : lo, z = hi < a ? a : hi > n ? n : hi;
    hps_batch_skip_rows(b, a);
    hps_batch_append_rows(b, s->rows, (int)s->pos + a, z - a);
    hps_batch_skip_rows(b, n - z);
    s->pos += (uint64_t)n;
    return n;
}

static int memory_read_part(hps_source *src, hps_batch *b, int max, int lo, int hi, hps_error *err)
{
    memory_source *s = (memory_source *)src;
    if (s->state == KEPT) return copy_kept(s, b, max, lo, hi);
    uint64_t at = s->inner->tell(s->inner);
    int got = s->inner->read_part(s->inner, b, max, lo, hi, err);
    if (got > 0) keep(s, b, at, lo <= 0 && hi >= got);
    if (got == 0) epoch_end(s);
    return got;
}

static int memory_read(hps_source *src, hps_batch *b, int max, hps_error *err)
{
    memory_source *s = (memory_source *)src;
    if (s->state == KEPT) return copy_kept(s, b, max, 0, max);
    uint64_t at = s->inner->tell(s->inner);
    int got = s->inner->read(s->inner, b, max, err);
    if (got > 0) keep(s, b, at, 1);
    if (got == 0) epoch_end(s);
    return got;
}

static int memory_seek(hps_source *src, uint64_t row, hps_error *err)
{
    memory_source *s = (memory_source *)src;
    if (s->state != KEPT) {
        if (s->state == FILLING && row == 0) { /* a pass from the start fills afresh */
            s->rows->B = 0;
            s->rows->nnz = 0;
        }
        return s->inner->seek(s->inner, row, err);
    }
    if (row > (uint64_t)s->rows->B)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: row %llu is past the %d rows", src->name,
                        (unsigned long long)row, s->rows->B);
    s->pos = row;
    return 0;
}

static uint64_t memory_tell(const hps_source *src)
{
    const memory_source *s = (const memory_source *)src;
    return s->state == KEPT ? s->pos : s->inner->tell(s->inner);
}

static uint64_t memory_rows(const hps_source *src)
{
    const memory_source *s = (const memory_source *)src;
    return s->inner->rows(s->inner);
}

static void memory_close(hps_source *src)
{
    memory_source *s = (memory_source *)src;
    s->inner->close(s->inner);
    hps_batch_free(s->rows);
    free(s);
}

hps_source *hps_source_in_memory(hps_source *inner, size_t max_bytes)
{
    memory_source *s = hps_calloc(1, sizeof *s);
    s->inner = inner;
    s->max_bytes = max_bytes;
    s->base = *inner;
    s->base.read = memory_read;
    s->base.read_part = inner->read_part ? memory_read_part : NULL;
    s->base.seek = memory_seek;
    s->base.tell = memory_tell;
    s->base.rows = memory_rows;
    s->base.close = memory_close;
    uint64_t rows = inner->rows(inner);
    if (rows > (uint64_t)INT32_MAX || kept_bytes(s, (int64_t)rows, 0) > max_bytes) {
        s->state = FILLING; /* stream() says why */
        char why[96];
        snprintf(why, sizeof why, "%llu rows need more than %zu MiB", (unsigned long long)rows, max_bytes >> 20);
        stream(s, why);
        return &s->base;
    }
    s->rows = hps_batch_create((int)rows, inner->n_dense, inner->n_slots, 1024, inner->weighted);
    return &s->base;
}
