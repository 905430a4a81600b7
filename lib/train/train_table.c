#include "train/train_table.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_rng.h"
#include "train/hps_train.h"

#define INIT_BOUND 0.05f /* as hps_net_init: rows start uniform in +-0.05 */

/* A hash slot is 8 bytes, two a row (the hash is kept half full): the row
 * + 1 in the low ROW_BITS (0: empty) under the top bits of the (slot, key)
 * hash, so that a probe reads a row's key and slot (row_meta) only for a row whose
 * bits match (one in 2^24 of the others), not for every row it passes.
 * Beside the key itself (16 bytes a slot) this saves 16 bytes a row. */
#define ROW_BITS 40
#define ROW_MASK ((UINT64_C(1) << ROW_BITS) - 1)

typedef uint64_t hash_entry;

/* A key not yet admitted and how often it was looked up (0: a free way). */
typedef struct {
    uint64_t key;
    int32_t slot;
    uint32_t count;
} admit_entry;

#define ADMIT_WAYS 8
#define ADMIT_BUCKETS (INT64_C(1) << 14) /* 131072 candidates, 2 MiB */

/* ref's second bit: a row admission made in this load, which reads the zero
 * row until the load's step is applied */
#define ROW_BORN 2

/* A row's key and bookkeeping in one place: a lookup that finds its hash
 * slot's bits matching confirms the key and stamps the row in one cache
 * line (a quarter of the rows straddle two), where five arrays (key, slot,
 * step, ref, day) cost five: a lookup of a present key at 5M rows made 4.4
 * last-level misses in callgrind's cache model, 2.1 so (the hash slot and
 * this), for 3 bytes of padding a row.  Checkpoints keep the columns. */
typedef struct {
    uint64_t key;
    int32_t slot;
    uint32_t last_step; /* the step that last touched the row, its low 32 bits (only
                         * "this step or not" is asked: a row untouched for a multiple
                         * of 2^32 steps passes for touched, is spared one sweep, never
                         * evicted early) */
    uint32_t last_day;  /* the day (hps-train run) that last touched it */
    uint8_t ref;        /* the clock's reference bit, and ROW_BORN */
} row_meta;

static hash_entry entry_of(uint64_t hash, int64_t row)
{
    return (hash & ~ROW_MASK) | (uint64_t)(row + 1);
}

static int64_t entry_row(hash_entry e) { return (int64_t)(e & ROW_MASK) - 1; }

struct hps_table {
    int layer, dim;
    int acc_dim;                      /* accumulators a row: dim, or 1 (row-wise AdaGrad) */
    /* compact rows (fp16 or bf16): the rows live in half (cap_rows x dim)
     * and acc_rows; weights and accum are then the fp32 copies of the rows
     * of one load (stage_row[s]: the row of copy s; copy 0: the zero row),
     * found by row through stage_ht, written back by hps_table_apply */
    hps_row_dtype dtype;
    uint16_t *half;
    float *acc_rows;
    int64_t n_stage, cap_stage, *stage_row, *stage_ht, stage_mask;
    hps_table_policy policy;
    uint64_t seed;
    int64_t rows, cap_rows, max_rows; /* in use, allocated, allowed */
    float *weights, *accum;           /* cap_rows x dim */
    row_meta *meta;                   /* per row */
    uint64_t step;                    /* the latest step a lookup gave: the high bits of last_step */
    int64_t *born, n_born, cap_born;  /* the rows admission made in this load (ROW_BORN set) */
    int64_t hand, evictions, expired;
    int64_t rehashes;                 /* growths that rehashed rows (not saved) */
    int64_t day_expired;              /* removed by the last hps_table_start_day (not saved) */
    uint32_t day;                     /* this run's day: what a lookup stamps */
    size_t max_bytes;
    /* admission (admit_after > 1): the candidates' counts, a bounded
     * set-associative hash (ADMIT_BUCKETS x ADMIT_WAYS), allocated on the
     * first candidate */
    int admit_after;
    uint16_t *slot_admit;             /* per slot < n_slot_admit: its own threshold (0: admit_after's) */
    int n_slot_admit, admits;         /* admits: some threshold above 1 */
    admit_entry *cand;
    uint64_t lookups, admitted;       /* training lookups, those that found a row */
    hash_entry *ht;                   /* open addressing, linear probing */
    int64_t ht_mask;
    uint64_t *hashes;                 /* hps_table_lookup_many's keys' slot_hash */
    int64_t cap_hashes;
};

/* weights + accumulators (the planner's row too, hps_row_state_bytes) +
 * key, slot, step, day, ref bit (row_meta, 24 bytes with its padding) + two
 * hash slots: at dim 16, 168 bytes (fp32, per element), 108 (row-wise), 76
 * (fp16 or bf16, row-wise), of which 40 are bookkeeping */
size_t hps_table_row_bytes(int dim, int rowwise, hps_row_dtype dtype)
{
    return hps_row_state_bytes(dim, rowwise, dtype) + sizeof(row_meta) + 2 * sizeof(hash_entry);
}

size_t hps_table_admission_bytes(void)
{
    return (size_t)(ADMIT_BUCKETS * ADMIT_WAYS) * sizeof(admit_entry);
}

static uint64_t slot_hash(int slot, uint64_t key)
{
    return hps_mix64(key ^ hps_mix64((uint64_t)slot + 0x51ed270b27a5c3d1ULL));
}

/* Hash slots for a slab of cap rows: a power of two, at least twice cap. */
static int64_t hash_slots(int64_t cap)
{
    int64_t slots = 16;
    while (slots < 2 * cap) slots *= 2;
    return slots;
}

/* What a full slab of n rows costs: slabs, per-row bookkeeping and a hash
 * of `slots` (compact rows: not their fp32 copies, one load's, which come
 * and go). */
static size_t slab_bytes(const hps_table *t, int64_t n, int64_t slots)
{
    return (size_t)n * (hps_table_row_bytes(t->dim, t->acc_dim != t->dim, t->dtype) - 2 * sizeof(hash_entry)) +
           ((size_t)t->dim + (size_t)t->acc_dim) * sizeof(float) + /* the zero row */
           (size_t)slots * sizeof(hash_entry);
}

/* The most rows whose slab, hash rounded up to a power of two, fits max_bytes. */
static int64_t rows_within(const hps_table *t, size_t max_bytes)
{
    int64_t n = (int64_t)(max_bytes / hps_table_row_bytes(t->dim, t->acc_dim != t->dim, t->dtype));
    while (n > 0 && slab_bytes(t, n, hash_slots(n)) > max_bytes) n -= n / 64 + 1;
    return n;
}

hps_table *hps_table_create(int layer, int dim, size_t max_bytes, hps_table_policy policy,
                            uint64_t seed)
{
    hps_table *t = hps_calloc(1, sizeof *t);
    t->layer = layer;
    t->dim = dim;
    t->policy = policy;
    t->seed = seed;
    t->acc_dim = dim;
    t->max_bytes = max_bytes;
    t->max_rows = max_bytes ? rows_within(t, max_bytes) : INT64_MAX;
    t->ht_mask = -1; /* no hash table until the first row */
    t->day = 1;
    return t;
}

/* The candidates' counts come out of the cap first. */
static void set_max_rows(hps_table *t)
{
    size_t counts = t->admits ? hps_table_admission_bytes() : 0;
    if (t->max_bytes)
        t->max_rows = t->max_bytes > counts ? rows_within(t, t->max_bytes - counts) : 0;
}

void hps_table_set_admission(hps_table *t, int admit_after)
{
    t->admit_after = admit_after;
    t->admits |= admit_after > 1;
    set_max_rows(t);
}

void hps_table_set_slot_admission(hps_table *t, int slot, int admit_after)
{
    if (slot >= t->n_slot_admit) {
        t->slot_admit = hps_realloc(t->slot_admit, (size_t)(slot + 1) * sizeof *t->slot_admit);
        memset(t->slot_admit + t->n_slot_admit, 0, (size_t)(slot + 1 - t->n_slot_admit) * sizeof *t->slot_admit);
        t->n_slot_admit = slot + 1;
    }
    t->slot_admit[slot] = (uint16_t)(admit_after < 1 ? 1 : admit_after);
    t->admits |= admit_after > 1;
    set_max_rows(t);
}

/* The lookups that admit a key of slot `slot`. */
static int threshold(const hps_table *t, int slot)
{
    return slot >= 0 && slot < t->n_slot_admit && t->slot_admit[slot] ? t->slot_admit[slot] : t->admit_after;
}

void hps_table_set_rowwise(hps_table *t)
{
    HPS_CHECK(t->cap_rows == 0); /* the accumulators' slab is laid out from here on */
    t->acc_dim = 1;
    set_max_rows(t);
}

int hps_table_rowwise(const hps_table *t) { return t->acc_dim != t->dim; }

void hps_table_set_dtype(hps_table *t, hps_row_dtype dtype)
{
    HPS_CHECK(t->cap_rows == 0); /* the rows' slab is laid out from here on */
    t->dtype = dtype;
    set_max_rows(t);
}

void hps_table_free(hps_table *t)
{
    if (!t) return;
    free(t->weights), free(t->accum), free(t->meta);
    free(t->half), free(t->acc_rows), free(t->stage_row), free(t->stage_ht);
    free(t->slot_admit), free(t->born), free(t->cand), free(t->ht), free(t->hashes), free(t);
}

static int64_t probe(const hps_table *t, uint64_t hash, int slot, uint64_t key, int64_t *at);
static int64_t find(const hps_table *t, int slot, uint64_t key, int64_t *at);

/* Hashes the rows anew; returns the first row whose (slot, key) an earlier
 * row has (left out of the hash), or -1.  Only a loaded table can have one. */
static int64_t rehash(hps_table *t, int64_t slots)
{
    free(t->ht);
    t->ht = hps_calloc((size_t)slots, sizeof *t->ht);
    hps_advise_random(t->ht, (size_t)slots * sizeof *t->ht);
    t->ht_mask = slots - 1;
    int64_t twice = -1;
    for (int64_t r = 0; r < t->rows; r++) {
        int64_t h;
        const row_meta *m = &t->meta[r];
        const uint64_t hash = slot_hash(m->slot, m->key);
        if (probe(t, hash, m->slot, m->key, &h) >= 0) {
            if (twice < 0) twice = r;
            continue;
        }
        t->ht[h] = entry_of(hash, r);
    }
    return twice;
}

/* ---- compact rows ---------------------------------------------------------------- */

/* IEEE binary16 by hand, not _Float16: clang 14 (make fuzz's compiler)
 * has no _Float16 on x86-64.  Rounded to nearest, ties to even, as a
 * conversion of the C type is; overflow gives infinity, a NaN stays one. */
static uint16_t fp16_round(float x)
{
    uint32_t u, sign, a, m, rem;
    memcpy(&u, &x, sizeof u);
    sign = u >> 16 & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | (a >> 13 & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* 65520 and up: infinity */
    if (a < 0x38800000u) {                                  /* under 2^-14: subnormal */
        if (a < 0x33000000u) return (uint16_t)sign;           /* under 2^-25: zero */
        uint32_t shift = 126 - (a >> 23), half = 1u << (shift - 1);
        m = (a & 0x7fffffu) | 0x800000u, rem = m & ((1u << shift) - 1), m >>= shift;
        return (uint16_t)(sign | (m + (rem > half || (rem == half && (m & 1)))));
    }
    a -= 0x38000000u; /* the exponent's bias from 127 to 15 */
    m = a >> 13, rem = a & 0x1fffu;
    return (uint16_t)(sign | (m + (rem > 0x1000u || (rem == 0x1000u && (m & 1)))));
}

static float fp16_widen(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h >> 10 & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1f) u = sign | 0x7f800000u | m << 13 | (m ? 0x400000u : 0);
    else if (e) u = sign | (e + 112) << 23 | m << 13;
    else if (!m) u = sign;
    else { /* subnormal: m x 2^-24, normalised */
        int s = 0;
        while (!(m & 0x400u)) m <<= 1, s++;
        u = sign | (uint32_t)(113 - s) << 23 | (m & 0x3ffu) << 13;
    }
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* fp32 to fp16 or bf16, rounded to nearest, ties to even: the same bits for
 * the same value whatever the order of the steps (a resumed run stays bit
 * for bit; stochastic rounding would need its random state checkpointed),
 * and no bias for the mean of many rounded updates. */
uint16_t hps_row_round(float x, hps_row_dtype dtype)
{
    if (dtype == HPS_ROW_FP16) return fp16_round(x);
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40); /* a NaN stays one */
    u += 0x7fffu + (u >> 16 & 1);
    return (uint16_t)(u >> 16);
}

float hps_row_widen(uint16_t v, hps_row_dtype dtype)
{
    if (dtype == HPS_ROW_FP16) return fp16_widen(v);
    uint32_t u = (uint32_t)v << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Doubles the copies (and their hash, kept half empty). */
static void stage_grow(hps_table *t)
{
    int64_t cap = t->cap_stage ? 2 * t->cap_stage : 256;
    t->weights = hps_realloc(t->weights, (size_t)cap * (size_t)t->dim * sizeof *t->weights);
    t->accum = hps_realloc(t->accum, (size_t)cap * (size_t)t->acc_dim * sizeof *t->accum);
    t->stage_row = hps_realloc(t->stage_row, (size_t)cap * sizeof *t->stage_row);
    free(t->stage_ht);
    t->stage_mask = 2 * cap - 1;
    t->stage_ht = hps_malloc((size_t)(2 * cap) * sizeof *t->stage_ht);
    memset(t->stage_ht, 0xff, (size_t)(2 * cap) * sizeof *t->stage_ht);
    for (int64_t s = 1; s < t->n_stage; s++) {
        int64_t h = (int64_t)(hps_mix64((uint64_t)t->stage_row[s]) & (uint64_t)t->stage_mask);
        while (t->stage_ht[h] >= 0) h = (h + 1) & t->stage_mask;
        t->stage_ht[h] = s;
    }
    t->cap_stage = cap;
    if (t->n_stage == 0) { /* copy 0: the zero row */
        memset(t->weights, 0, (size_t)t->dim * sizeof *t->weights);
        memset(t->accum, 0, (size_t)t->acc_dim * sizeof *t->accum);
        t->n_stage = 1;
    }
}

/* The rows admitted in the load that ends read their own values from the next. */
static void born_end(hps_table *t)
{
    for (int64_t i = 0; i < t->n_born; i++) t->meta[t->born[i]].ref &= (uint8_t)~ROW_BORN;
    t->n_born = 0;
}

void hps_table_stage_begin(hps_table *t)
{
    born_end(t);
    if (t->dtype == HPS_ROW_FP32 || !t->cap_stage) return;
    memset(t->stage_ht, 0xff, (size_t)(t->stage_mask + 1) * sizeof *t->stage_ht);
    memset(t->weights, 0, (size_t)t->dim * sizeof *t->weights);
    memset(t->accum, 0, (size_t)t->acc_dim * sizeof *t->accum);
    t->n_stage = 1;
}

/* The fp32 copy of row r for this load (its index for the kernels). */
int64_t hps_table_stage(hps_table *t, int64_t r)
{
    if (t->dtype == HPS_ROW_FP32 || r < 0) return r;
    int64_t h = (int64_t)(hps_mix64((uint64_t)r) & (uint64_t)t->stage_mask);
    for (; t->stage_ht[h] >= 0; h = (h + 1) & t->stage_mask)
        if (t->stage_row[t->stage_ht[h]] == r) return t->stage_ht[h];
    if (2 * (t->n_stage + 1) > t->stage_mask + 1) {
        stage_grow(t);
        return hps_table_stage(t, r);
    }
    int64_t s = t->n_stage++;
    t->stage_ht[h] = s;
    t->stage_row[s] = r;
    const size_t d = (size_t)t->dim, a = (size_t)t->acc_dim;
    for (size_t i = 0; i < d; i++) t->weights[(size_t)s * d + i] = hps_row_widen(t->half[(size_t)r * d + i], t->dtype);
    memcpy(t->accum + (size_t)s * a, t->acc_rows + (size_t)r * a, a * sizeof *t->accum);
    return s;
}

/* The copies back into their rows, rounded (after a step's update). */
static void stage_write_back(hps_table *t)
{
    const size_t d = (size_t)t->dim, a = (size_t)t->acc_dim;
    for (int64_t s = 1; s < t->n_stage; s++) {
        size_t r = (size_t)t->stage_row[s];
        for (size_t i = 0; i < d; i++) t->half[r * d + i] = hps_row_round(t->weights[(size_t)s * d + i], t->dtype);
        memcpy(t->acc_rows + r * a, t->accum + (size_t)s * a, a * sizeof *t->accum);
    }
}

void hps_table_row_values(const hps_table *t, int64_t r, float *out)
{
    const size_t d = (size_t)t->dim;
    if (t->dtype == HPS_ROW_FP32) memcpy(out, t->weights + (size_t)r * d, d * sizeof *out);
    else
        for (size_t i = 0; i < d; i++) out[i] = hps_row_widen(t->half[(size_t)r * d + i], t->dtype);
}

/* Lookups and the kernels read the slabs at random: 2 MiB pages (hps_core.h). */
static void advise_slabs(hps_table *t)
{
    const size_t cap = (size_t)t->cap_rows, d = (size_t)t->dim, a = (size_t)t->acc_dim;
    if (t->dtype != HPS_ROW_FP32) {
        hps_advise_random(t->half, cap * d * sizeof *t->half);
        hps_advise_random(t->acc_rows, cap * a * sizeof *t->acc_rows);
    } else {
        hps_advise_random(t->weights, (cap + 1) * d * sizeof *t->weights);
        hps_advise_random(t->accum, (cap + 1) * a * sizeof *t->accum);
    }
    hps_advise_random(t->meta, cap * sizeof *t->meta);
}

/* Grows the slabs to cap rows (within max_rows) and the hash to `slots`
 * (at least hash_slots(cap) but for a table sized ahead): a rehash of every
 * row when the hash grows. */
static void grow_to(hps_table *t, int64_t cap, int64_t slots)
{
    if (cap > t->max_rows) cap = t->max_rows;
    HPS_CHECK(cap < (int64_t)ROW_MASK); /* a hash slot's row field */
    size_t d = (size_t)t->dim, a = (size_t)t->acc_dim;
    if (t->dtype != HPS_ROW_FP32) {
        t->half = hps_realloc(t->half, (size_t)cap * d * sizeof *t->half);
        t->acc_rows = hps_realloc(t->acc_rows, (size_t)cap * a * sizeof *t->acc_rows);
        if (!t->cap_stage) stage_grow(t);
    } else {
        /* one row more than cap: the zero row that unseen keys read in evaluation */
        t->weights = hps_realloc(t->weights, (size_t)(cap + 1) * d * sizeof *t->weights);
        t->accum = hps_realloc(t->accum, (size_t)(cap + 1) * a * sizeof *t->accum);
        memset(t->weights + cap * d, 0, d * sizeof *t->weights);
        memset(t->accum + cap * a, 0, a * sizeof *t->accum);
    }
    t->meta = hps_realloc(t->meta, (size_t)cap * sizeof *t->meta);
    t->cap_rows = cap;
    advise_slabs(t);
    if (slots - 1 <= t->ht_mask) return;
    t->rehashes += t->rows > 0;
    HPS_CHECK(rehash(t, slots) < 0);
}

/* Doubling: n rows cost at most 2n rows' rehashes over the table's life. */
static void grow(hps_table *t)
{
    int64_t cap = t->cap_rows ? 2 * t->cap_rows : 1024;
    grow_to(t, cap, hash_slots(cap < t->max_rows ? cap : t->max_rows));
}

/* The row of (slot, key), whose slot_hash is hash, or -1; *at: its hash
 * slot, or the free one it would take.  The callers that go on to hash or
 * seed the row hash it once. */
static int64_t probe(const hps_table *t, uint64_t hash, int slot, uint64_t key, int64_t *at)
{
    const uint64_t want = hash & ~ROW_MASK;
    int64_t h = (int64_t)(hash & (uint64_t)t->ht_mask);
    for (;; h = (h + 1) & t->ht_mask) {
        hash_entry e = t->ht[h];
        int64_t r = entry_row(e);
        if (e == 0 || ((e & ~ROW_MASK) == want && t->meta[r].key == key && t->meta[r].slot == slot)) {
            *at = h;
            return r;
        }
    }
}

static int64_t find(const hps_table *t, int slot, uint64_t key, int64_t *at)
{
    return probe(t, slot_hash(slot, key), slot, key, at);
}

/* Removes hash slot h by shifting later members of its cluster back, so no
 * tombstones accumulate (linear probing's backward-shift deletion). */
static void unhash(hps_table *t, int64_t h)
{
    int64_t j = h;
    for (;;) {
        t->ht[h] = 0;
        for (;;) {
            j = (j + 1) & t->ht_mask;
            if (t->ht[j] == 0) return;
            int64_t r = entry_row(t->ht[j]);
            int64_t home = (int64_t)(slot_hash(t->meta[r].slot, t->meta[r].key) & (uint64_t)t->ht_mask);
            /* keep j where it is if its home lies cyclically in (h, j] */
            if (h <= j ? (h < home && home <= j) : (h < home || home <= j)) continue;
            break;
        }
        t->ht[h] = t->ht[j];
        h = j;
    }
}

static void init_row(hps_table *t, int64_t r, int slot, uint64_t key, uint64_t hash)
{
    hps_rng rng;
    hps_rng_seed(&rng, t->seed ^ hps_mix64((uint64_t)t->layer) ^ hash);
    if (t->dtype != HPS_ROW_FP32) {
        for (int d = 0; d < t->dim; d++)
            t->half[r * t->dim + d] = hps_row_round(hps_rng_range(&rng, -INIT_BOUND, INIT_BOUND), t->dtype);
        memset(t->acc_rows + r * t->acc_dim, 0, (size_t)t->acc_dim * sizeof *t->acc_rows);
    } else {
        float *w = t->weights + r * t->dim;
        for (int d = 0; d < t->dim; d++) w[d] = hps_rng_range(&rng, -INIT_BOUND, INIT_BOUND);
        memset(t->accum + r * t->acc_dim, 0, (size_t)t->acc_dim * sizeof *t->accum);
    }
    t->meta[r].key = key;
    t->meta[r].slot = slot;
}

/* A cold row to reuse, by the clock: -1 when every row is in this step. */
static int64_t evict(hps_table *t, uint64_t step)
{
    for (int64_t seen = 0; seen < 2 * t->rows; seen++) {
        int64_t r = t->hand;
        t->hand = (t->hand + 1) % t->rows;
        row_meta *m = &t->meta[r];
        if (m->last_step == (uint32_t)step) continue;
        if (m->ref) {
            m->ref = 0; /* second chance */
            continue;
        }
        int64_t at;
        HPS_CHECK(find(t, m->slot, m->key, &at) == r);
        unhash(t, at);
        t->evictions++;
        return r;
    }
    return -1;
}

/* Counts a lookup of a key without a row: 1 when this one admits it (its
 * admit_after-th since it became a candidate), else 0.  A key that finds
 * its bucket full takes the way of the least-counted candidate, which
 * starts over when it comes back: counts are never over, only under.
 * hash: the key's slot_hash. */
static int admit(hps_table *t, int slot, uint64_t key, uint64_t hash)
{
    const int after = threshold(t, slot);
    if (after <= 1) return 1;
    if (!t->cand) t->cand = hps_calloc((size_t)(ADMIT_BUCKETS * ADMIT_WAYS), sizeof *t->cand);
    /* the high bits: the row hash takes the low ones */
    admit_entry *b = t->cand + (int64_t)(hash >> 40 & (uint64_t)(ADMIT_BUCKETS - 1)) * ADMIT_WAYS;
    admit_entry *low = b;
    for (int i = 0; i < ADMIT_WAYS; i++) {
        if (b[i].count && b[i].key == key && b[i].slot == slot) {
            if (++b[i].count < (uint32_t)after) return 0;
            b[i] = (admit_entry){0, 0, 0};
            return 1;
        }
        if (b[i].count < low->count) low = &b[i];
    }
    *low = (admit_entry){key, slot, 1};
    return 0;
}

static int64_t new_row(hps_table *t, uint64_t step, hps_error *err)
{
    if (t->rows == t->cap_rows && t->cap_rows < t->max_rows) grow(t);
    if (t->rows < t->cap_rows) return t->rows++;
    int64_t r = t->policy == HPS_TABLE_FULL_EVICT ? evict(t, step) : -1;
    if (r < 0)
        hps_fail(err, HPS_EXIT_RUNTIME,
                 "embedding layer %d: table full at %lld rows (%.2f MiB); raise --max-table-mb%s",
                 t->layer, (long long)t->rows, (double)hps_table_bytes(t) / 1048576.0,
                 t->policy == HPS_TABLE_FULL_EVICT ? " (one step touches more rows than it holds)"
                                                   : " or use --evict");
    return r;
}

/* A row admission just made: it reads the zero row for the rest of this
 * load, so that every lookup of a key in one load reads the same values
 * (as a worker maps a key to one row a load, and its server answers once). */
static void born(hps_table *t, int64_t r)
{
    if (t->n_born == t->cap_born) {
        t->cap_born = t->cap_born ? 2 * t->cap_born : 256;
        t->born = hps_realloc(t->born, (size_t)t->cap_born * sizeof *t->born);
    }
    t->born[t->n_born++] = r;
    t->meta[r].ref |= ROW_BORN;
}

int64_t hps_table_lookup(hps_table *t, int slot, uint64_t key, uint64_t step, hps_error *err)
{
    if (t->cap_rows == 0) {
        if (t->max_rows == 0)
            return hps_fail(err, HPS_EXIT_RUNTIME, "embedding layer %d: --max-table-mb holds no row",
                            t->layer);
        grow(t);
    }
    const uint64_t hash = slot_hash(slot, key);
    int64_t at, r = probe(t, hash, slot, key, &at);
    t->lookups++;
    if (r >= 0 && (t->meta[r].ref & ROW_BORN)) return hps_table_zero_row(t);
    if (r < 0 && !admit(t, slot, key, hash)) return hps_table_zero_row(t); /* its gradient is dropped */
    int new_key = r < 0;
    if (new_key) {
        const int64_t mask = t->ht_mask, evictions = t->evictions;
        r = new_row(t, step, err);
        if (r < 0) return -1;
        init_row(t, r, slot, key, hash);
        /* the free slot moves only with a rehash (grow) or an eviction's
         * unhash: probing again for every new key cost a second probe */
        if (t->ht_mask != mask || t->evictions != evictions) probe(t, hash, slot, key, &at);
        t->ht[at] = entry_of(hash, r);
    }
    row_meta *m = &t->meta[r];
    m->last_step = (uint32_t)step;
    if (step > t->step) t->step = step;
    m->ref = 1;
    m->last_day = t->day;
    if (new_key && threshold(t, slot) > 1) {
        born(t, r);
        return hps_table_zero_row(t);
    }
    t->admitted++;
    return hps_table_stage(t, r);
}

int64_t hps_table_recall(hps_table *t, int slot, uint64_t key)
{
    int64_t r = hps_table_find(t, slot, key);
    if (r < 0 || (t->meta[r].ref & ROW_BORN)) return hps_table_zero_row(t);
    return hps_table_stage(t, r);
}

void hps_table_reserve(hps_table *t, int64_t n)
{
    if (t->cap_rows == 0 && t->max_rows > 0) grow(t);
    while (t->cap_rows > 0 && t->cap_rows < t->max_rows && t->cap_rows - t->rows < n) grow(t);
}

void hps_table_presize(hps_table *t, int64_t rows, int64_t spare)
{
    if (rows < 1024) rows = 1024;
    if (rows > t->max_rows) rows = t->max_rows;
    if (rows + spare > t->cap_rows && t->cap_rows < t->max_rows) grow_to(t, rows + spare, hash_slots(rows));
}

int64_t hps_table_rehashes(const hps_table *t) { return t->rehashes; }

/* Below this many keys a parallel region costs more than it saves. */
#define LOOKUP_PAR_MIN 4096

/* Where a present key's lookup only stamps its row and counts, and a
 * lookup of a new key can neither take nor move a row that an earlier
 * lookup of the same step found: admission (a row born reads the zero row),
 * eviction (the clock skips rows this step touched, so stamping ahead
 * would change its victims) and compact rows (staged in order) rule it out. */
static int lookups_commute(const hps_table *t)
{
    return t->dtype == HPS_ROW_FP32 && !t->admits && t->policy != HPS_TABLE_FULL_EVICT && t->cap_rows > 0;
}

/* The rows of the keys present, stamped as hps_table_lookup stamps them;
 * rows[e] = -1 for the others.  The threads split the keys; two lookups of
 * one key on two threads stamp the same values, with relaxed atomic stores
 * (no order is needed: the region's end orders them before any reader).
 * Each thread's passes start loading every hash slot, then the rows of the
 * slots that match, then probe: its cache misses overlap. */
static void find_present(hps_table *t, const int *slots, const uint64_t *keys, int64_t n, uint64_t step,
                         int64_t *rows)
{
    if (n > t->cap_hashes) {
        t->cap_hashes = 2 * n;
        free(t->hashes);
        t->hashes = hps_malloc((size_t)t->cap_hashes * sizeof *t->hashes);
    }
    uint64_t *hash = t->hashes;
    const uint64_t mask = (uint64_t)t->ht_mask;
    const uint32_t low_step = (uint32_t)step, day = t->day;
    int64_t found = 0;
#pragma omp parallel reduction(+ : found)
    {
#pragma omp for schedule(static) nowait
        for (int64_t e = 0; e < n; e++) {
            hash[e] = slot_hash(slots[e], keys[e]);
            __builtin_prefetch(&t->ht[hash[e] & mask]);
        }
#pragma omp for schedule(static) nowait
        for (int64_t e = 0; e < n; e++) {
            hash_entry first = t->ht[hash[e] & mask];
            if (first) __builtin_prefetch(&t->meta[entry_row(first)]);
        }
#pragma omp for schedule(static) nowait
        for (int64_t e = 0; e < n; e++) {
            int64_t at, r = probe(t, hash[e], slots[e], keys[e], &at);
            rows[e] = r;
            if (r < 0) continue;
            row_meta *m = &t->meta[r];
            __atomic_store_n(&m->last_step, low_step, __ATOMIC_RELAXED);
            __atomic_store_n(&m->ref, (uint8_t)1, __ATOMIC_RELAXED);
            __atomic_store_n(&m->last_day, day, __ATOMIC_RELAXED);
            found++;
        }
    }
    t->lookups += (uint64_t)found;
    t->admitted += (uint64_t)found;
    if (found && step > t->step) t->step = step;
}

int hps_table_lookup_many(hps_table *t, const int *slots, const uint64_t *keys, int64_t n, uint64_t step,
                          int64_t *rows, hps_error *err)
{
    if (n >= LOOKUP_PAR_MIN && omp_get_max_threads() > 1 && lookups_commute(t))
        find_present(t, slots, keys, n, step, rows);
    else {
        for (int64_t e = 0; e < n; e++) {
            if (t->ht) __builtin_prefetch(&t->ht[slot_hash(slots[e], keys[e]) & (uint64_t)t->ht_mask]);
            rows[e] = -1;
        }
    }
    /* in order: the new keys, and any the parallel pass did not take */
    for (int64_t e = 0; e < n; e++)
        if (rows[e] < 0 && (rows[e] = hps_table_lookup(t, slots[e], keys[e], step, err)) < 0) return -1;
    return 0;
}

int64_t hps_table_find(const hps_table *t, int slot, uint64_t key)
{
    int64_t at;
    return t->cap_rows ? find(t, slot, key, &at) : -1;
}

int64_t hps_table_zero_row(hps_table *t)
{
    if (t->cap_rows == 0 && t->max_rows > 0) grow(t);
    if (!t->cap_rows) return -1;
    return t->dtype == HPS_ROW_FP32 ? t->cap_rows : 0; /* compact: copy 0 */
}

float *hps_table_weights(hps_table *t) { return t->weights; }
float *hps_table_accum(hps_table *t) { return t->accum; }
int64_t hps_table_rows(const hps_table *t) { return t->rows; }
int64_t hps_table_max_rows(const hps_table *t) { return t->max_rows; }
int64_t hps_table_evictions(const hps_table *t) { return t->evictions; }

int64_t hps_table_expired(const hps_table *t) { return t->expired; }

void hps_table_lookups(const hps_table *t, uint64_t *lookups, uint64_t *admitted)
{
    *lookups = t->lookups;
    *admitted = t->admitted;
}

void hps_table_stats_get(const hps_table *t, hps_table_stats *s)
{
    *s = (hps_table_stats){.rows = t->rows, .evictions = t->evictions, .expired = t->expired,
                           .day_expired = t->day_expired, .lookups = (int64_t)t->lookups,
                           .admitted = (int64_t)t->admitted, .bytes = (int64_t)hps_table_bytes(t)};
}

void hps_table_stats_add(hps_table_stats *sum, const hps_table_stats *s)
{
    sum->rows += s->rows, sum->evictions += s->evictions, sum->expired += s->expired;
    sum->day_expired += s->day_expired, sum->lookups += s->lookups, sum->admitted += s->admitted;
    sum->bytes += s->bytes;
}

size_t hps_table_bytes(const hps_table *t)
{
    return (t->cap_rows ? slab_bytes(t, t->cap_rows, t->ht_mask + 1) : 0) + (t->cand ? hps_table_admission_bytes() : 0);
}

/* ---- days ------------------------------------------------------------------------ */

static void move_row(hps_table *t, int64_t to, int64_t from)
{
    size_t d = (size_t)t->dim;
    t->meta[to] = t->meta[from];
    size_t a = (size_t)t->acc_dim;
    if (t->dtype != HPS_ROW_FP32) {
        memmove(t->half + (size_t)to * d, t->half + (size_t)from * d, d * sizeof *t->half);
        memmove(t->acc_rows + (size_t)to * a, t->acc_rows + (size_t)from * a, a * sizeof *t->acc_rows);
        return;
    }
    memmove(t->weights + (size_t)to * d, t->weights + (size_t)from * d, d * sizeof *t->weights);
    memmove(t->accum + (size_t)to * a, t->accum + (size_t)from * a, a * sizeof *t->accum);
}

/* The rows left keep their creation order (exports and checkpoints walk
 * it); the clock's hand starts over. */
int64_t hps_table_start_day(hps_table *t, uint64_t day, int expire_after_days)
{
    t->day = (uint32_t)day;
    t->day_expired = 0;
    hps_table_stage_begin(t); /* rows move: no copy of one stays */
    if (expire_after_days <= 0 || t->rows == 0) return 0;
    int64_t kept = 0;
    for (int64_t r = 0; r < t->rows; r++) {
        if ((uint64_t)t->meta[r].last_day + (uint64_t)expire_after_days < day) continue;
        if (kept != r) move_row(t, kept, r);
        kept++;
    }
    int64_t gone = t->rows - kept;
    if (gone == 0) return 0;
    t->rows = kept, t->hand = 0, t->expired += gone, t->day_expired = gone;
    HPS_CHECK(rehash(t, t->ht_mask + 1) < 0);
    return gone;
}

void hps_table_clear(hps_table *t)
{
    born_end(t);
    hps_table_stage_begin(t);
    t->rows = 0, t->hand = 0;
    if (t->ht) memset(t->ht, 0, (size_t)(t->ht_mask + 1) * sizeof *t->ht);
}

void hps_table_row_key(const hps_table *t, int64_t row, int *slot, uint64_t *key)
{
    *slot = t->meta[row].slot;
    *key = t->meta[row].key;
}

/* ---- checkpoints ------------------------------------------------------------ */

/* Bytes left in a seekable stream (a checkpoint's payload in memory). */
static uint64_t bytes_left(FILE *f)
{
    long at = ftell(f);
    if (at < 0 || fseek(f, 0, SEEK_END) != 0) return 0;
    long end = ftell(f);
    fseek(f, at, SEEK_SET);
    return end > at ? (uint64_t)(end - at) : 0;
}

/* Layout 1 marks its head's dim with TABLE_LAYOUT << 32 and adds, after the
 * accumulators, each row's day, then the counters and the admission
 * candidates; layout 0 (no mark) is what checkpoints before them hold. */
#define TABLE_LAYOUT INT64_C(1)
#define ROWWISE_BIT 40 /* set in layout 1's head: one accumulator a row */
#define DTYPE_BIT 41   /* and 2 bits of the rows' hps_row_dtype */

/* A candidate as a checkpoint holds it: its place in the hash, then it. */
typedef struct {
    uint64_t at;
    admit_entry e;
} saved_candidate;

/* The candidates: 0 when none were ever counted, else 1 + how many are
 * held, then each with its place (the hash is mostly empty). */
static int save_candidates(const hps_table *t, FILE *f)
{
    uint64_t held = 0, all = t->cand ? (uint64_t)(ADMIT_BUCKETS * ADMIT_WAYS) : 0;
    for (uint64_t i = 0; i < all; i++) held += t->cand[i].count != 0;
    uint64_t n = t->cand ? held + 1 : 0;
    if (!HPS_FWRITE(f, &n, 1)) return -1;
    for (uint64_t i = 0; i < all; i++) {
        saved_candidate c = {i, t->cand[i]};
        if (t->cand[i].count && !HPS_FWRITE(f, &c, 1)) return -1;
    }
    return 0;
}

#define STEP_CHUNK 1024

/* Checkpoints hold the rows' key, slot, ref and day a column each (the
 * arrays the table kept before row_meta), written and read a chunk at a
 * time: the same bytes whatever the table's layout in memory. */
typedef struct {
    size_t at, size;
} meta_column;
#define META_COLUMN(field) ((meta_column){offsetof(row_meta, field), sizeof(((row_meta *)0)->field)})

static int save_column(const hps_table *t, FILE *f, meta_column c)
{
    unsigned char chunk[STEP_CHUNK * sizeof(uint64_t)];
    for (int64_t r = 0; r < t->rows; r += STEP_CHUNK) {
        size_t n = t->rows - r < STEP_CHUNK ? (size_t)(t->rows - r) : STEP_CHUNK;
        for (size_t i = 0; i < n; i++)
            memcpy(chunk + i * c.size, (const unsigned char *)&t->meta[(size_t)r + i] + c.at, c.size);
        if (fwrite(chunk, c.size, n, f) != n) return 0;
    }
    return 1;
}

static int load_column(hps_table *t, FILE *f, size_t rows, meta_column c)
{
    unsigned char chunk[STEP_CHUNK * sizeof(uint64_t)];
    for (size_t r = 0; r < rows; r += STEP_CHUNK) {
        size_t n = rows - r < STEP_CHUNK ? rows - r : STEP_CHUNK;
        if (fread(chunk, c.size, n, f) != n) return 0;
        for (size_t i = 0; i < n; i++) memcpy((unsigned char *)&t->meta[r + i] + c.at, chunk + i * c.size, c.size);
    }
    return 1;
}

/* The rows' steps as checkpoints hold them, 64 bits a row: the table keeps
 * their low 32 bits (what it compares), the high ones are the latest step's
 * (exact for a row touched in the last 2^32 steps). */

static int save_steps(const hps_table *t, FILE *f)
{
    uint64_t chunk[STEP_CHUNK];
    for (int64_t r = 0; r < t->rows; r += STEP_CHUNK) {
        size_t n = t->rows - r < STEP_CHUNK ? (size_t)(t->rows - r) : STEP_CHUNK;
        for (size_t i = 0; i < n; i++)
            chunk[i] = t->step - (uint32_t)((uint32_t)t->step - t->meta[(size_t)r + i].last_step);
        if (!HPS_FWRITE(f, chunk, n)) return 0;
    }
    return 1;
}

static int load_steps(hps_table *t, FILE *f, size_t rows)
{
    uint64_t chunk[STEP_CHUNK];
    for (size_t r = 0; r < rows; r += STEP_CHUNK) {
        size_t n = rows - r < STEP_CHUNK ? rows - r : STEP_CHUNK;
        if (!HPS_FREAD(f, chunk, n)) return 0;
        for (size_t i = 0; i < n; i++) {
            t->meta[r + i].last_step = (uint32_t)chunk[i];
            if (chunk[i] > t->step) t->step = chunk[i];
        }
    }
    return 1;
}

int hps_table_save(const hps_table *t, FILE *f)
{
    int64_t head[4] = {t->dim | TABLE_LAYOUT << 32 | (int64_t)hps_table_rowwise(t) << ROWWISE_BIT |
                           (int64_t)t->dtype << DTYPE_BIT,
                       t->rows, t->hand, t->evictions};
    int compact = t->dtype != HPS_ROW_FP32;
    uint64_t counters[3] = {(uint64_t)t->expired, t->lookups, t->admitted};
    size_t d = (size_t)t->dim, n = (size_t)t->rows;
    return HPS_FWRITE(f, head, 4) && save_column(t, f, META_COLUMN(key)) && save_column(t, f, META_COLUMN(slot)) &&
                   save_steps(t, f) && save_column(t, f, META_COLUMN(ref)) &&
                   (compact ? HPS_FWRITE(f, t->half, n * d) && HPS_FWRITE(f, t->acc_rows, n * (size_t)t->acc_dim)
                            : HPS_FWRITE(f, t->weights, n * d) && HPS_FWRITE(f, t->accum, n * (size_t)t->acc_dim)) &&
                   save_column(t, f, META_COLUMN(last_day)) && HPS_FWRITE(f, counters, 3) && save_candidates(t, f) == 0
               ? 0
               : -1;
}

/* What is wrong with loaded row r, or NULL: a slot that is not one of the
 * layer's, a weight that is not finite, an AdaGrad accumulator that is not
 * finite or is negative (its square root divides the step). */
static const char *bad_row(const hps_table *t, int64_t r, const int *slots, int n_slots)
{
    int in_layer = 0;
    for (int j = 0; j < n_slots && !in_layer; j++) in_layer = t->meta[r].slot == slots[j];
    if (!in_layer) return "a slot the layer does not have";
    const float *a = t->dtype != HPS_ROW_FP32 ? t->acc_rows + r * t->acc_dim : t->accum + r * t->acc_dim;
    for (int d = 0; d < t->dim; d++) {
        float w = t->dtype != HPS_ROW_FP32 ? hps_row_widen(t->half[r * t->dim + d], t->dtype)
                                           : t->weights[r * t->dim + d];
        if (!isfinite(w)) return "a weight that is not finite";
    }
    for (int d = 0; d < t->acc_dim; d++)
        if (!isfinite(a[d]) || a[d] < 0) return "an AdaGrad accumulator that is negative or not finite";
    return NULL;
}

/* A loaded table's rows, checked before any is used: a forged checkpoint
 * (its digest recomputed) could hold two rows of one key (the hash would
 * find one, export both, and an eviction of the other would find neither),
 * a slot past what a hash slot's tag holds, or values that train as NaN.
 * On failure the table is left empty. */
static int check_loaded(hps_table *t, const int *slots, int n_slots, const char *name, hps_error *err)
{
    for (int64_t r = 0; r < t->rows; r++) {
        const char *why = bad_row(t, r, slots, n_slots);
        if (why) {
            hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: row %lld (slot %d, key %llu) has %s",
                     name, t->layer, (long long)r, (int)t->meta[r].slot, (unsigned long long)t->meta[r].key, why);
            t->rows = 0;
            return -1;
        }
    }
    int64_t twice = rehash(t, t->ht_mask + 1);
    if (twice >= 0) {
        const row_meta *m = &t->meta[twice];
        int64_t at, first = find(t, m->slot, m->key, &at);
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: rows %lld and %lld have the same slot %d and key %llu",
                 name, t->layer, (long long)first, (long long)twice, (int)m->slot,
                 (unsigned long long)m->key);
        t->rows = 0;
        rehash(t, t->ht_mask + 1);
        return -1;
    }
    return 0;
}

/* Layout 1's days, counters and candidates (hps_table_save). */
static int load_days(hps_table *t, FILE *f, size_t n, const char *name, hps_error *err)
{
    uint64_t tail[4]; /* expired, lookups, admitted, candidates (save_candidates) */
    const uint64_t all = (uint64_t)(ADMIT_BUCKETS * ADMIT_WAYS);
    if (!load_column(t, f, n, META_COLUMN(last_day)) || !HPS_FREAD(f, tail, 4))
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: truncated table", name, t->layer);
    if (tail[0] > INT64_MAX || tail[2] > tail[1] || tail[3] > all + 1)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: bad admission counts", name,
                        t->layer);
    t->expired = (int64_t)tail[0], t->lookups = tail[1], t->admitted = tail[2];
    free(t->cand);
    t->cand = NULL;
    if (!tail[3]) return 0;
    if (tail[3] - 1 > bytes_left(f) / sizeof(saved_candidate))
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: truncated table", name, t->layer);
    t->cand = hps_calloc((size_t)all, sizeof *t->cand);
    for (uint64_t i = 0; i + 1 < tail[3]; i++) {
        saved_candidate c;
        if (!HPS_FREAD(f, &c, 1))
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: truncated table", name, t->layer);
        if (c.at >= all || c.e.count == 0)
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: bad admission counts", name,
                            t->layer);
        t->cand[c.at] = c.e;
    }
    return 0;
}

int hps_table_load(hps_table *t, FILE *f, const int *slots, int n_slots, hps_error *err, const char *name)
{
    int64_t head[4];
    if (!HPS_FREAD(f, head, 4)) head[0] = -1;
    int64_t layout = head[0] >> 32 & 0xff, rowwise = head[0] >> ROWWISE_BIT & 1, dtype = head[0] >> DTYPE_BIT;
    head[0] &= 0xffffffff;
    static const char *const dtypes[] = {"fp32", "fp16", "bf16"};
    if (head[0] == t->dim && dtype >= HPS_ROW_FP32 && dtype <= HPS_ROW_BF16 && dtype != (int64_t)t->dtype)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: embedding layer %d has %s rows, this run asks for %s (--row-dtype)",
                        name, t->layer, dtypes[dtype], dtypes[t->dtype]);
    if (head[0] == t->dim && rowwise != hps_table_rowwise(t))
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: embedding layer %d was trained with %s AdaGrad, this run asks for %s "
                        "(--sparse-optimizer)", name, t->layer, rowwise ? "row-wise" : "per-element",
                        rowwise ? "per-element" : "row-wise");
    if (layout < 0 || layout > TABLE_LAYOUT || dtype != (int64_t)t->dtype || head[0] != t->dim || head[1] < 0 || head[2] < 0 ||
        head[2] >= (head[1] > 0 ? head[1] : 1) || head[3] < 0)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: bad table header", name,
                        t->layer);
    if (head[1] > t->max_rows)
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "%s: embedding layer %d has %lld rows, more than --max-table-mb holds",
                        name, t->layer, (long long)head[1]);
    /* the rows a payload claims must be there before the table grows to them */
    uint64_t row_bytes = META_COLUMN(key).size + META_COLUMN(slot).size + sizeof(uint64_t) /* step */ + META_COLUMN(ref).size +
                         (uint64_t)t->dim * (t->dtype != HPS_ROW_FP32 ? sizeof *t->half : sizeof *t->weights) +
                         (uint64_t)t->acc_dim * sizeof *t->accum +
                         (layout ? META_COLUMN(last_day).size : 0);
    if ((uint64_t)head[1] > bytes_left(f) / row_bytes)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: truncated table", name,
                        t->layer);
    while (t->cap_rows < head[1]) grow(t);
    if (t->cap_rows == 0) grow(t);
    size_t d = (size_t)t->dim, n = (size_t)head[1];
    if (!load_column(t, f, n, META_COLUMN(key)) || !load_column(t, f, n, META_COLUMN(slot)) || !load_steps(t, f, n) ||
        !load_column(t, f, n, META_COLUMN(ref)) || (t->dtype != HPS_ROW_FP32
             ? !HPS_FREAD(f, t->half, n * d) || !HPS_FREAD(f, t->acc_rows, n * (size_t)t->acc_dim)
             : !HPS_FREAD(f, t->weights, n * d) || !HPS_FREAD(f, t->accum, n * (size_t)t->acc_dim)))
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: embedding layer %d: truncated table", name,
                        t->layer);
    if (layout && load_days(t, f, n, name, err)) return -1;
    if (!layout)
        for (size_t r = 0; r < n; r++) t->meta[r].last_day = t->day;
    t->rows = head[1];
    t->hand = head[2];
    t->evictions = head[3];
    hps_table_stage_begin(t);
    return check_loaded(t, slots, n_slots, name, err);
}

/* ---- updates ------------------------------------------------------------------- */

const hps_sparse_grad *hps_table_grad_sum(hps_sparse_grad *const *grads, int n, int dim,
                                          hps_sparse_grad **sum)
{
    if (n == 1) return grads[0]; /* nothing to add it to: spare the copy */
    int64_t need = 0;
    for (int i = 0; i < n; i++) need += grads[i]->n;
    if (!*sum || (*sum)->cap < need) {
        hps_sparse_grad_free(*sum);
        *sum = hps_sparse_grad_create(need * 2 + 16, dim);
    }
    hps_sparse_grad_merge(*sum, grads, n);
    return *sum;
}

/* Keys not admitted read the zero row: their gradients are dropped (zeroed,
 * AdaGrad then leaves the row at zeros). */
static void drop_zero_row(hps_table *t, hps_sparse_grad *g)
{
    const int64_t zero = hps_table_zero_row(t);
    for (int64_t i = 0; i < g->n; i++)
        if (g->rows[i] == zero) memset(g->grad + i * g->D, 0, (size_t)g->D * sizeof *g->grad);
}

void hps_table_apply(hps_table *t, hps_sparse_grad *const *grads, int n, hps_sparse_grad **sum,
                     float lr, float eps)
{
    if (t->admits)
        for (int i = 0; i < n; i++) drop_zero_row(t, grads[i]);
    const hps_sparse_grad *g = hps_table_grad_sum(grads, n, t->dim, sum);
    if (hps_table_rowwise(t)) sparse_rowwise_adagrad(t->weights, t->accum, g, lr, eps);
    else sparse_adagrad(t->weights, t->accum, g, lr, eps);
    if (t->dtype != HPS_ROW_FP32) stage_write_back(t);
    born_end(t);
}

hps_table *hps_train_table_create(const hps_model *m, int l, const hps_train_opts *o)
{
    hps_table *t = hps_table_create(l, m->layers[l].dim, o->max_table_bytes, o->table_policy, o->seed);
    hps_table_set_admission(t, o->admit_after);
    for (int i = 0; i < o->n_admit_slots; i++)
        for (int j = 0; j < m->layers[l].n_slots; j++)
            if (m->layers[l].slots[j] == o->admit_slot[i].slot)
                hps_table_set_slot_admission(t, o->admit_slot[i].slot, o->admit_slot[i].after);
    if (o->rowwise_adagrad) hps_table_set_rowwise(t);
    hps_table_set_dtype(t, o->row_dtype);
    return t;
}

int hps_train_admits(const hps_train_opts *o)
{
    for (int i = 0; i < o->n_admit_slots; i++)
        if (o->admit_slot[i].after > 1) return 1;
    return o->admit_after > 1;
}
