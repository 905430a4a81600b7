/* A shard directory as a batch source: its training shards one after the
 * other, in manifest order, through the background-decoding shard reader. */
#include <stdlib.h>
#include <string.h>

#include "data/hps_shard.h"
#include "train/hps_train.h"

typedef struct {
    hps_source base;
    hps_manifest *manifest;
    int *shards, n;        /* indices of the shards read, in order */
    uint64_t *first_row;   /* epoch row at which each starts */
    uint64_t rows;
    int cur;               /* shard being read, or -1 at the epoch's end */
    int held;              /* shard open in reader (parked at its start when cur is -1), or -1 */
    hps_shard_reader *reader;
    double *slot_distinct; /* the manifest's slot statistics', or NULL */
    char name[512];
} shard_source;

/* The reader at the start of shard i: the one it holds is kept when it is
 * there already, else rewound (its thread and buffers kept), another shard
 * opened. */
static int hold_shard(shard_source *s, int i, hps_error *err)
{
    if (i == s->held) return hps_shard_tell(s->reader) == 0 ? 0 : hps_shard_seek(s->reader, 0, err);
    if (s->reader) hps_shard_close(s->reader), s->reader = NULL;
    s->held = -1;
    char *path = hps_manifest_shard_path(s->manifest, s->shards[i]);
    hps_shard_read_opts o = {.ahead = HPS_SHARD_AHEAD, .batches = 1};
    s->reader = hps_shard_open(path, &o, err);
    int rc = s->reader ? hps_manifest_check_shard(s->manifest, s->shards[i], path,
                                                  hps_shard_reader_info(s->reader), err)
                       : -1;
    free(path);
    if (rc) return -1;
    s->held = i;
    return 0;
}

/* Reads shard i from its start; past the last, the epoch ends with the
 * first shard parked in the reader, decoding the next epoch's first blocks
 * while this one ends (closing and reopening it made every epoch wait for
 * its first block). */
static int open_shard(shard_source *s, int i, hps_error *err)
{
    s->cur = -1;
    if (hold_shard(s, i < s->n ? i : 0, err)) return -1;
    if (i < s->n) s->cur = i;
    return 0;
}

/* Fills b across shard boundaries: a batch may take rows from two shards.
 * Only rows [lo, hi) of it are decoded (hps_shard_read_part). */
static int shards_read_part(hps_source *src, hps_batch *b, int max, int lo, int hi, hps_error *err)
{
    shard_source *s = (shard_source *)src;
    hps_batch *part = NULL;
    int total = 0;
    b->B = 0;
    b->nnz = 0;
    b->offsets[0] = 0;
    while (total < max && s->cur >= 0) {
        hps_batch *into = total == 0 ? b : part ? part
                          : (part = hps_batch_create(max, b->n_dense, b->n_slots, 1024, b->weights != NULL));
        int got = hps_shard_read_part(s->reader, into, max - total, lo - total, hi - total, err);
        if (got < 0 || (got == 0 && open_shard(s, s->cur + 1, err))) {
            total = -1; /* a shard that fails to read or open ends the run, not the epoch */
            break;
        }
        if (got > 0 && into != b) hps_batch_append(b, into);
        total = b->B;
    }
    hps_batch_free(part);
    return total < 0 ? -1 : b->B;
}

static int shards_read(hps_source *src, hps_batch *b, int max, hps_error *err)
{
    return shards_read_part(src, b, max, 0, max, err);
}

static int shards_seek(hps_source *src, uint64_t row, hps_error *err)
{
    shard_source *s = (shard_source *)src;
    if (row > s->rows)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: row %llu is past the %llu rows", s->name,
                        (unsigned long long)row, (unsigned long long)s->rows);
    int i = 0;
    while (i < s->n && row >= s->first_row[i] + s->manifest->shards[s->shards[i]].rows) i++;
    if (i < s->n && i == s->held && hps_shard_tell(s->reader) == row - s->first_row[i]) {
        s->cur = i; /* there already: what it decoded ahead stays */
        return 0;
    }
    if (open_shard(s, i, err)) return -1;
    return s->cur >= 0 ? hps_shard_seek(s->reader, row - s->first_row[i], err) : 0;
}

static uint64_t shards_tell(const hps_source *src)
{
    const shard_source *s = (const shard_source *)src;
    if (s->cur < 0) return s->rows;
    return s->first_row[s->cur] + hps_shard_tell(s->reader);
}

static uint64_t shards_rows(const hps_source *src) { return ((const shard_source *)src)->rows; }

static void shards_close(hps_source *src)
{
    shard_source *s = (shard_source *)src;
    if (s->reader) hps_shard_close(s->reader);
    hps_manifest_free(s->manifest);
    free(s->shards);
    free(s->first_row);
    free(s->slot_distinct);
    free(s);
}

hps_source *hps_source_shards(const char *dir, int holdout, hps_error *err)
{
    hps_manifest *man = hps_manifest_load(dir, err);
    if (!man) return NULL;
    shard_source *s = hps_calloc(1, sizeof *s);
    s->manifest = man;
    s->shards = hps_malloc((size_t)(man->n_shards + 1) * sizeof *s->shards);
    s->first_row = hps_malloc((size_t)(man->n_shards + 1) * sizeof *s->first_row);
    const char *role = holdout ? "holdout" : "train";
    int any_holdout = 0;
    for (int i = 0; i < man->n_shards; i++) any_holdout |= strcmp(man->shards[i].role, "holdout") == 0;
    if (holdout && !any_holdout) role = "train"; /* a directory written for evaluation */
    for (int i = 0; i < man->n_shards; i++) {
        if (strcmp(man->shards[i].role, role) != 0) continue;
        s->first_row[s->n] = s->rows;
        s->shards[s->n++] = i;
        s->rows += man->shards[i].rows;
    }
    snprintf(s->name, sizeof s->name, "%s", dir);
    const hps_schema *sc = &man->schema;
    s->base = (hps_source){.read = shards_read, .read_part = shards_read_part, .seek = shards_seek, .tell = shards_tell,
                           .rows = shards_rows, .close = shards_close, .n_dense = sc->n_dense,
                           .n_slots = sc->n_slots, .weighted = sc->weighted,
                           .classes = sc->classes, .name = s->name,
                           .digest = man->digest[0] ? man->digest : NULL};
    if (man->slot_stats) {
        s->slot_distinct = hps_malloc((size_t)sc->n_slots * sizeof *s->slot_distinct);
        for (int j = 0; j < sc->n_slots; j++) s->slot_distinct[j] = man->slot_stats[j].distinct;
        s->base.slot_distinct = s->slot_distinct;
    }
    s->cur = s->held = -1;
    if (s->n == 0) {
        hps_fail(err, HPS_EXIT_USAGE, "%s: holds no %s shards", dir, role);
        shards_close(&s->base);
        return NULL;
    }
    if (s->rows == 0) { /* 0 steps would report nan ms and exit 0 */
        hps_fail(err, HPS_EXIT_USAGE, "%s: its %s shards hold no rows: nothing to %s", dir, role,
                 holdout ? "evaluate" : "train on");
        shards_close(&s->base);
        return NULL;
    }
    if (open_shard(s, 0, err)) {
        shards_close(&s->base);
        return NULL;
    }
    return &s->base;
}
