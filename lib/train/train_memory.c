/* A source that holds another's rows in memory (hps-train --in-memory): it
 * reads them all once, before the first epoch, into one batch, and every
 * epoch copies its batches from there instead of decoding the shards on a
 * thread that takes a core's share from the step, as a PyTorch loop reads
 * tensors it read before.  Past its budget it gives the source back. */
#include <stdio.h>
#include <stdlib.h>

#include "train/hps_train.h"

typedef struct {
    hps_source base;
    hps_source *inner; /* kept open: the name, digest and statistics are its */
    hps_batch *rows;   /* every row of an epoch, in order */
    uint64_t pos;      /* the epoch's next row */
} memory_source;

static size_t held_bytes(const hps_source *in, int64_t rows, int64_t keys)
{
    size_t row = (size_t)in->n_dense * sizeof(float) + sizeof(float) + (size_t)in->n_slots * sizeof(int64_t);
    return (size_t)rows * row + (size_t)keys * (sizeof(uint64_t) + (in->weighted ? sizeof(float) : 0));
}

/* The next rows of the epoch into b, those outside [lo, hi) skipped. */
static int memory_read_part(hps_source *src, hps_batch *b, int max, int lo, int hi, hps_error *err)
{
    (void)err;
    memory_source *s = (memory_source *)src;
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

static int memory_read(hps_source *src, hps_batch *b, int max, hps_error *err)
{
    return memory_read_part(src, b, max, 0, max, err);
}

static int memory_seek(hps_source *src, uint64_t row, hps_error *err)
{
    memory_source *s = (memory_source *)src;
    if (row > (uint64_t)s->rows->B)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: row %llu is past the %d rows", src->name,
                        (unsigned long long)row, s->rows->B);
    s->pos = row;
    return 0;
}

static uint64_t memory_tell(const hps_source *src) { return ((const memory_source *)src)->pos; }

static uint64_t memory_rows(const hps_source *src) { return (uint64_t)((const memory_source *)src)->rows->B; }

static void memory_close(hps_source *src)
{
    memory_source *s = (memory_source *)src;
    s->inner->close(s->inner);
    hps_batch_free(s->rows);
    free(s);
}

/* Every row of inner's epoch into rows: 1, 0 where they need more than
 * max_bytes, -1 on a read's error. */
static int read_all(hps_source *inner, hps_batch *rows, size_t max_bytes, hps_error *err)
{
    hps_batch *b = hps_batch_create(4096, inner->n_dense, inner->n_slots, 4096, inner->weighted);
    int got, rc = 1;
    while ((got = inner->read(inner, b, b->cap, err)) > 0) {
        if (rows->B + b->B > rows->cap) {
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: its shards hold more than the %d rows its manifest counts",
                          inner->name, rows->cap);
            break;
        }
        if (held_bytes(inner, rows->B + b->B, rows->nnz + b->nnz) > max_bytes) {
            rc = 0;
            break;
        }
        hps_batch_append(rows, b);
    }
    hps_batch_free(b);
    return got < 0 ? -1 : rc;
}

static void stream(const char *why)
{
    hps_log(2, "%s: --in-memory: %s: the training rows are decoded every epoch\n", hps_progname(), why);
}

hps_source *hps_source_in_memory(hps_source *inner, size_t max_bytes, hps_error *err)
{
    uint64_t rows = inner->rows(inner);
    char why[128];
    if (rows > (uint64_t)INT32_MAX || held_bytes(inner, (int64_t)rows, 0) > max_bytes) {
        snprintf(why, sizeof why, "%llu rows need more than %zu MiB", (unsigned long long)rows, max_bytes >> 20);
        stream(why);
        return inner;
    }
    double t0 = hps_now();
    memory_source *s = hps_calloc(1, sizeof *s);
    s->rows = hps_batch_create((int)rows, inner->n_dense, inner->n_slots, 1024, inner->weighted);
    int rc = read_all(inner, s->rows, max_bytes, err);
    if (rc > 0 && (uint64_t)s->rows->B != rows)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: %d rows read where its manifest counts %llu", inner->name,
                      s->rows->B, (unsigned long long)rows);
    if (rc == 0 && inner->seek(inner, 0, err)) rc = -1; /* given back at its start */
    if (rc <= 0) {
        hps_batch_free(s->rows);
        free(s);
        if (rc < 0) {
            inner->close(inner);
            return NULL;
        }
        snprintf(why, sizeof why, "%llu rows and their keys need more than %zu MiB", (unsigned long long)rows,
                 max_bytes >> 20);
        stream(why);
        return inner;
    }
    s->inner = inner;
    s->base = *inner;
    s->base.read = memory_read;
    s->base.read_part = memory_read_part;
    s->base.seek = memory_seek;
    s->base.tell = memory_tell;
    s->base.rows = memory_rows;
    s->base.close = memory_close;
    hps_log(2, "%s: --in-memory: %d rows (%.1f MiB) read into memory in %.2f s\n", hps_progname(), s->rows->B,
            (double)held_bytes(inner, s->rows->B, s->rows->nnz) / 1048576.0, hps_now() - t0);
    return &s->base;
}
