/* hps_rows: a block of samples held column by column, and its payload. */
#include "data/hps_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hps shard payloads are little-endian and written with memcpy"
#endif

static void rows_alloc_columns(hps_rows *r, int cap)
{
    const hps_schema *s = &r->schema;
    r->cap = cap;
    r->labels = hps_realloc(r->labels, (size_t)cap * sizeof *r->labels);
    r->dense = hps_realloc(r->dense, (size_t)cap * (size_t)(s->n_dense ? s->n_dense : 1) * sizeof *r->dense);
    r->counts = hps_realloc(r->counts, (size_t)cap * (size_t)(s->n_slots ? s->n_slots : 1) * sizeof *r->counts);
    for (int j = 0; j < s->n_slots; j++)
        r->offsets[j] = hps_realloc(r->offsets[j], ((size_t)cap + 1) * sizeof **r->offsets);
}

hps_rows *hps_rows_create(const hps_schema *s, int cap)
{
    hps_rows *r = hps_calloc(1, sizeof *r);
    r->schema = *s;
    int S = s->n_slots ? s->n_slots : 1;
    r->keys = hps_calloc((size_t)S, sizeof *r->keys);
    r->weights = hps_calloc((size_t)S, sizeof *r->weights);
    r->nkeys = hps_calloc((size_t)S, sizeof *r->nkeys);
    r->kcap = hps_calloc((size_t)S, sizeof *r->kcap);
    r->offsets = hps_calloc((size_t)S, sizeof *r->offsets);
    for (int j = 0; j < s->n_slots; j++) {
        r->kcap[j] = cap > 0 ? cap : 16;
        r->keys[j] = hps_malloc((size_t)r->kcap[j] * sizeof **r->keys);
        if (s->weighted) r->weights[j] = hps_malloc((size_t)r->kcap[j] * sizeof **r->weights);
    }
    rows_alloc_columns(r, cap > 0 ? cap : 16);
    return r;
}

void hps_rows_free(hps_rows *r)
{
    if (!r) return;
    for (int j = 0; j < r->schema.n_slots; j++) {
        free(r->keys[j]);
        free(r->weights[j]);
        free(r->offsets[j]);
    }
    free(r->keys), free(r->weights), free(r->nkeys), free(r->kcap), free(r->offsets);
    free(r->labels), free(r->dense), free(r->counts);
    free(r->dense_bits), free(r->dense_vals), free(r->dense_at);
    free(r);
}

void hps_rows_clear(hps_rows *r)
{
    r->rows = 0;
    r->tail_zero = 0;
    r->dense_in_payload = 0;
    for (int j = 0; j < r->schema.n_slots; j++) r->nkeys[j] = 0;
}

/* Grows the columns to hold cap samples, keeping what they hold: the
 * columns are cap apart, so each moves to its new place, last first. */
static void rows_grow(hps_rows *r, int cap)
{
    int old = r->cap;
    rows_alloc_columns(r, cap);
    for (int d = r->schema.n_dense - 1; d > 0; d--)
        memmove(r->dense + (size_t)d * cap, r->dense + (size_t)d * old, (size_t)r->rows * sizeof *r->dense);
    for (int j = r->schema.n_slots - 1; j > 0; j--)
        memmove(r->counts + (size_t)j * cap, r->counts + (size_t)j * old, (size_t)r->rows * sizeof *r->counts);
    r->tail_zero = 0;
}

/* A row's fields are cap apart, column by column: zeroing them one row at a
 * time touched a page per field (29% of hps-shard's time on 784 dense
 * features).  The free rows are zeroed column by column instead, once. */
static void zero_tail(hps_rows *r)
{
    size_t from = (size_t)r->rows, n = (size_t)(r->cap - r->rows);
    for (int d = 0; d < r->schema.n_dense; d++) memset(r->dense + (size_t)d * r->cap + from, 0, n * sizeof *r->dense);
    for (int j = 0; j < r->schema.n_slots; j++) memset(r->counts + (size_t)j * r->cap + from, 0, n * sizeof *r->counts);
    r->tail_zero = 1;
}

int hps_rows_begin(hps_rows *r)
{
    if (r->rows == r->cap) rows_grow(r, r->cap * 2);
    if (!r->tail_zero) zero_tail(r);
    int row = r->rows++;
    r->labels[row] = 0;
    return row;
}

void hps_rows_reserve_keys(hps_rows *r, int slot, int64_t n)
{
    if (n <= r->kcap[slot]) return;
    while (r->kcap[slot] < n) r->kcap[slot] *= 2;
    r->keys[slot] = hps_realloc(r->keys[slot], (size_t)r->kcap[slot] * sizeof **r->keys);
    if (r->schema.weighted)
        r->weights[slot] = hps_realloc(r->weights[slot], (size_t)r->kcap[slot] * sizeof **r->weights);
}

void hps_rows_drop_last(hps_rows *r)
{
    if (r->rows == 0) return;
    int row = --r->rows;
    for (int j = 0; j < r->schema.n_slots; j++) {
        r->nkeys[j] -= r->counts[(size_t)j * r->cap + row];
        r->counts[(size_t)j * r->cap + row] = 0;
    }
    for (int d = 0; d < r->schema.n_dense; d++) r->dense[(size_t)d * r->cap + row] = 0;
}

void hps_rows_index(hps_rows *r)
{
    for (int j = 0; j < r->schema.n_slots; j++) {
        const uint32_t *c = r->counts + (size_t)j * r->cap;
        int64_t *o = r->offsets[j];
        o[0] = 0;
        for (int i = 0; i < r->rows; i++) o[i + 1] = o[i] + c[i];
    }
}

int64_t hps_rows_nnz(const hps_rows *r)
{
    int64_t n = 0;
    for (int j = 0; j < r->schema.n_slots; j++) n += r->nkeys[j];
    return n;
}

/* ---- payload ---------------------------------------------------------------
 * Version 1 stores every column as it is in memory.  Version 2 stores a
 * dense column as a bitmap of the rows whose value is not all zero bits and
 * those values in row order, and a count column as its four byte planes:
 * most dense values of sparse-ish features (MNIST's pixels, Criteo's
 * missing integers) are 0, and most counts are 0 or 1, so zstd gets a third
 * of the bytes to look at (libsvm with 784 dense features: 58% of
 * hps-shard's time was zstd on raw float columns).  The values are kept as
 * bits, so -0.0 and every NaN come back as they went in. */

uint64_t hps_payload_least(const hps_schema *s, uint64_t rows, int version)
{
    uint64_t dense = version == 1 ? rows * 4 : (rows + 7) / 8;
    return rows * 4 * (1 + (uint64_t)s->n_slots) + (uint64_t)s->n_dense * dense;
}

size_t hps_rows_payload_bound(const hps_rows *r)
{
    const hps_schema *s = &r->schema;
    size_t R = (size_t)r->rows, nnz = (size_t)hps_rows_nnz(r);
    return R * 4 * (1 + (size_t)s->n_dense + (size_t)s->n_slots) + (size_t)s->n_dense * ((R + 7) / 8) +
           nnz * (s->weighted ? 12 : 8) + 4; /* 4: put_sparse's one store past its values */
}

static uint8_t *put(uint8_t *out, const void *src, size_t n)
{
    if (n) memcpy(out, src, n);
    return out + n;
}

/* Bitmap, then the values whose bits are not all 0.  Branch-free: every
 * value is stored, and the next one overwrites it when it was 0. */
static uint8_t *put_sparse(uint8_t *out, const float *col, size_t R)
{
    uint8_t *bits = out;
    out += (R + 7) / 8;
    for (size_t i0 = 0; i0 < R; i0 += 8) {
        size_t m = R - i0 < 8 ? R - i0 : 8;
        unsigned byte = 0;
        for (size_t k = 0; k < m; k++) {
            uint32_t v;
            memcpy(&v, col + i0 + k, 4);
            unsigned nz = v != 0;
            memcpy(out, &v, 4);
            out += 4 * nz;
            byte |= nz << k;
        }
        *bits++ = (uint8_t)byte;
    }
    return out;
}

static uint8_t *put_planes(uint8_t *out, const uint32_t *col, size_t R)
{
    for (size_t i = 0; i < R; i++) {
        uint32_t v = col[i];
        out[i] = (uint8_t)v, out[R + i] = (uint8_t)(v >> 8);
        out[2 * R + i] = (uint8_t)(v >> 16), out[3 * R + i] = (uint8_t)(v >> 24);
    }
    return out + 4 * R;
}

size_t hps_rows_encode(const hps_rows *r, uint8_t *out)
{
    const hps_schema *s = &r->schema;
    size_t R = (size_t)r->rows;
    uint8_t *start = out;
    out = put(out, r->labels, R * 4);
    for (int d = 0; d < s->n_dense; d++) out = put_sparse(out, r->dense + (size_t)d * r->cap, R);
    for (int j = 0; j < s->n_slots; j++) out = put_planes(out, r->counts + (size_t)j * r->cap, R);
    for (int j = 0; j < s->n_slots; j++) out = put(out, r->keys[j], (size_t)r->nkeys[j] * 8);
    if (s->weighted)
        for (int j = 0; j < s->n_slots; j++) out = put(out, r->weights[j], (size_t)r->nkeys[j] * 4);
    return (size_t)(out - start);
}

int hps_rows_bad_label(const hps_rows *r)
{
    float top = (float)(r->schema.classes - 1); /* binary: 0 or 1 */
    for (int i = 0; i < r->rows; i++) {
        float y = r->labels[i];
        if (!(y >= 0 && y <= top) || y != (float)(int)y) return i; /* NaN fails both */
    }
    return -1;
}

static const uint8_t *skip_values(const uint8_t *bits, const uint8_t *v, size_t from, size_t to);

/* The bits set in nb bytes, eight bytes a count: without -mpopcnt each
 * count is a call (a byte a call was a tenth of the reader's instructions
 * on mlp-784's 784 columns). */
static size_t count_ones(const uint8_t *p, size_t nb)
{
    size_t ones = 0, b = 0;
    for (; b + 8 <= nb; b += 8) {
        uint64_t w;
        memcpy(&w, p + b, 8);
        ones += (size_t)__builtin_popcountll(w);
    }
    for (; b < nb; b++) ones += (size_t)__builtin_popcount(p[b]);
    return ones;
}

/* Whether the n floats at v (unaligned bytes) are all finite: a branchless
 * pass over the bits of the exponent.  The row of a bad one is looked for
 * only then: walking every column's bitmap row by row for it was 0.6 ms of
 * the reader's CPU a step of mlp-784's 784 columns, beside a 6 ms step. */
static int all_finite(const uint8_t *v, size_t n)
{
    uint32_t inf = 0x7f800000u, bad = 0;
#pragma omp simd reduction(| : bad)
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, v + 4 * i, 4);
        bad |= (u & inf) == inf;
    }
    return !bad;
}

int hps_rows_bad_dense(const hps_rows *r, int *col, float *value)
{
    int first = -1;
    for (int d = 0; d < r->schema.n_dense; d++) {
        int row = -1; /* this column's first; the lowest over the columns is kept */
        float x = 0;
        if (r->dense_in_payload) { /* the values of the bits set, in row order */
            const uint8_t *bits = r->dense_bits[d], *v = r->dense_vals[d];
            if (all_finite(v, (size_t)(skip_values(bits, v, 0, (size_t)r->rows) - v) / 4)) continue;
            for (int i = 0; i < r->rows && row < 0; i++) {
                if (!(bits[i >> 3] >> (i & 7) & 1)) continue;
                float y;
                memcpy(&y, v, 4), v += 4;
                if (!isfinite(y)) row = i, x = y;
            }
        } else {
            const float *c = r->dense + (size_t)d * r->cap;
            if (all_finite((const uint8_t *)c, (size_t)r->rows)) continue;
            for (int i = 0; i < r->rows && row < 0; i++) {
                if (!isfinite(c[i])) row = i, x = c[i];
            }
        }
        if (row >= 0 && (first < 0 || row < first)) first = row, *col = d, *value = x;
    }
    return first;
}

/* Reads payloads in order, never past their end. */
typedef struct {
    const uint8_t *p, *end;
} cursor;

static int take(cursor *c, void *dst, size_t n)
{
    if ((size_t)(c->end - c->p) < n) return -1;
    if (n) memcpy(dst, c->p, n);
    c->p += n;
    return 0;
}

/* A dense column's bitmap and values, checked (no bit past the rows, the
 * values all there) and stepped over. */
static int locate_sparse(cursor *c, size_t R, const uint8_t **bits, const uint8_t **vals)
{
    size_t nb = (R + 7) / 8, ones = 0;
    if ((size_t)(c->end - c->p) < nb) return -1;
    *bits = c->p;
    ones = count_ones(c->p, nb);
    if (R % 8 && c->p[nb - 1] >> (R % 8)) return -1; /* rows past the block's end */
    c->p += nb;
    if ((size_t)(c->end - c->p) / 4 < ones) return -1;
    *vals = c->p;
    c->p += 4 * ones;
    return 0;
}

/* A located column's value pointer v at row `from` moved on to row `to`. */
static const uint8_t *skip_values(const uint8_t *bits, const uint8_t *v, size_t from, size_t to)
{
    for (; from < to && from % 8; from++) v += 4 * (bits[from >> 3] >> (from & 7) & 1);
    v += 4 * count_ones(bits + from / 8, (to - from) / 8);
    from += (to - from) / 8 * 8;
    for (; from < to; from++) v += 4 * (bits[from >> 3] >> (from & 7) & 1);
    return v;
}

/* Rows [from, from + n) of a located column, v its value at row from, into
 * every stride-th float of out; returns the value at row from + n. */
static const uint8_t *expand_sparse(const uint8_t *bits, const uint8_t *v, size_t from, size_t n, float *out,
                                    size_t stride)
{
    for (size_t i = 0, row = from; i < n; i++, row++) {
        uint32_t x = 0;
        if (bits[row >> 3] >> (row & 7) & 1) memcpy(&x, v, 4), v += 4;
        memcpy(out + i * stride, &x, 4);
    }
    return v;
}

static int take_sparse(cursor *c, float *col, size_t R)
{
    const uint8_t *bits, *vals;
    if (locate_sparse(c, R, &bits, &vals)) return -1;
    expand_sparse(bits, vals, 0, R, col, 1);
    return 0;
}

static int take_planes(cursor *c, uint32_t *col, size_t R)
{
    if ((size_t)(c->end - c->p) / 4 < R) return -1;
    const uint8_t *p = c->p;
    for (size_t i = 0; i < R; i++)
        col[i] = (uint32_t)p[i] | (uint32_t)p[R + i] << 8 | (uint32_t)p[2 * R + i] << 16 |
                 (uint32_t)p[3 * R + i] << 24;
    c->p += 4 * R;
    return 0;
}

/* hps_rows_decode; in_payload: version 2's dense columns located, not copied. */
static int decode(hps_rows *r, const uint8_t *in, size_t len, int rows, int version, int in_payload)
{
    const hps_schema *s = &r->schema;
    size_t R = (size_t)rows;
    if (rows < 0 || (version != 1 && version != 2) || len < hps_payload_least(s, R, version)) return -1;
    hps_rows_clear(r);
    if (rows > r->cap) rows_alloc_columns(r, rows);
    r->rows = rows;
    r->tail_zero = 0;
    r->dense_in_payload = in_payload && version == 2;
    if (r->dense_in_payload && !r->dense_bits) {
        r->dense_bits = hps_calloc((size_t)s->n_dense + 1, sizeof *r->dense_bits);
        r->dense_vals = hps_calloc((size_t)s->n_dense + 1, sizeof *r->dense_vals);
        r->dense_at = hps_calloc((size_t)s->n_dense + 1, sizeof *r->dense_at);
    }
    r->dense_row = 0;
    cursor c = {in, in + len};
    int bad = take(&c, r->labels, R * 4);
    for (int d = 0; d < s->n_dense && !bad; d++) {
        float *col = r->dense + (size_t)d * r->cap;
        bad = version == 1           ? take(&c, col, R * 4)
              : r->dense_in_payload ? locate_sparse(&c, R, &r->dense_bits[d], &r->dense_vals[d])
                                    : take_sparse(&c, col, R);
    }
    size_t nnz = 0;
    for (int j = 0; j < s->n_slots && !bad; j++) {
        uint32_t *col = r->counts + (size_t)j * r->cap;
        bad = version == 1 ? take(&c, col, R * 4) : take_planes(&c, col, R);
        int64_t n = 0;
        for (size_t i = 0; i < R && !bad; i++) n += col[i];
        r->nkeys[j] = n;
        nnz += (size_t)n;
    }
    if (bad || (size_t)(c.end - c.p) != nnz * (s->weighted ? 12 : 8)) {
        for (int j = 0; j < s->n_slots; j++) r->nkeys[j] = 0;
        r->rows = 0;
        r->dense_in_payload = 0;
        return -1;
    }
    for (int j = 0; j < s->n_slots; j++) {
        hps_rows_reserve_keys(r, j, r->nkeys[j]);
        take(&c, r->keys[j], (size_t)r->nkeys[j] * 8);
    }
    if (s->weighted)
        for (int j = 0; j < s->n_slots; j++) take(&c, r->weights[j], (size_t)r->nkeys[j] * 4);
    if (r->dense_in_payload) memcpy(r->dense_at, r->dense_vals, (size_t)s->n_dense * sizeof *r->dense_at);
    hps_rows_index(r);
    return 0;
}

int hps_rows_decode(hps_rows *r, const uint8_t *in, size_t len, int rows, int version)
{
    return decode(r, in, len, rows, version, 0);
}

int hps_rows_decode_batched(hps_rows *r, const uint8_t *in, size_t len, int rows, int version)
{
    return decode(r, in, len, rows, version, 1);
}

void hps_rows_unpack_dense(hps_rows *r)
{
    if (!r->dense_in_payload) return;
    for (int d = 0; d < r->schema.n_dense; d++)
        expand_sparse(r->dense_bits[d], r->dense_vals[d], 0, (size_t)r->rows, r->dense + (size_t)d * r->cap, 1);
    r->dense_in_payload = 0;
}

/* From the columns, 16 rows at a time: a column's 16 values are one cache
 * line, and the 16 rows written stay in cache.  Row by row, 784 dense
 * features touched 784 pages a row and took 15% of a step.  From the
 * payload, column by column: the n rows written stay in cache across 16
 * columns. */
void hps_rows_dense_rows(hps_rows *r, int from, int n, float *out)
{
    const int D = r->schema.n_dense, TILE = 16;
    if (r->dense_in_payload) {
        int back = from < r->dense_row; /* behind where the last call stopped: from row 0 */
        size_t at = back ? 0 : (size_t)r->dense_row;
        for (int d = 0; d < D; d++) {
            const uint8_t *v = skip_values(r->dense_bits[d], back ? r->dense_vals[d] : r->dense_at[d], at,
                                           (size_t)from);
            r->dense_at[d] = expand_sparse(r->dense_bits[d], v, (size_t)from, (size_t)n, out + d, (size_t)D);
        }
        r->dense_row = from + n;
        return;
    }
    for (int i0 = 0; i0 < n; i0 += TILE) {
        int m = n - i0 < TILE ? n - i0 : TILE;
        float *o = out + (size_t)i0 * D;
        for (int d = 0; d < D; d++) {
            const float *col = r->dense + (size_t)d * r->cap + from + i0;
            for (int i = 0; i < m; i++) o[(size_t)i * D + d] = col[i];
        }
    }
}
