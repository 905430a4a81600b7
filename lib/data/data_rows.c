/* hps_rows: a block of samples held column by column, and its payload. */
#include "data/hps_data.h"

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
    free(r);
}

void hps_rows_clear(hps_rows *r)
{
    r->rows = 0;
    r->tail_zero = 0;
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

/* ---- payload --------------------------------------------------------------- */

size_t hps_rows_payload_size(const hps_rows *r)
{
    const hps_schema *s = &r->schema;
    size_t R = (size_t)r->rows, nnz = (size_t)hps_rows_nnz(r);
    return R * 4 * (1 + (size_t)s->n_dense + (size_t)s->n_slots) + nnz * (s->weighted ? 12 : 8);
}

static uint8_t *put(uint8_t *out, const void *src, size_t n)
{
    if (n) memcpy(out, src, n);
    return out + n;
}

void hps_rows_encode(const hps_rows *r, uint8_t *out)
{
    const hps_schema *s = &r->schema;
    size_t R = (size_t)r->rows;
    out = put(out, r->labels, R * 4);
    for (int d = 0; d < s->n_dense; d++) out = put(out, r->dense + (size_t)d * r->cap, R * 4);
    for (int j = 0; j < s->n_slots; j++) out = put(out, r->counts + (size_t)j * r->cap, R * 4);
    for (int j = 0; j < s->n_slots; j++) out = put(out, r->keys[j], (size_t)r->nkeys[j] * 8);
    if (s->weighted)
        for (int j = 0; j < s->n_slots; j++) out = put(out, r->weights[j], (size_t)r->nkeys[j] * 4);
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

int hps_rows_decode(hps_rows *r, const uint8_t *in, size_t len, int rows)
{
    const hps_schema *s = &r->schema;
    size_t R = (size_t)rows, fixed = R * 4 * (1 + (size_t)s->n_dense + (size_t)s->n_slots);
    if (rows < 0 || len < fixed) return -1;
    hps_rows_clear(r);
    if (rows > r->cap) rows_alloc_columns(r, rows);
    r->rows = rows;
    r->tail_zero = 0;
    const uint8_t *p = in;
    memcpy(r->labels, p, R * 4), p += R * 4;
    for (int d = 0; d < s->n_dense; d++) memcpy(r->dense + (size_t)d * r->cap, p, R * 4), p += R * 4;
    size_t nnz = 0;
    for (int j = 0; j < s->n_slots; j++) {
        uint32_t *c = r->counts + (size_t)j * r->cap;
        memcpy(c, p, R * 4), p += R * 4;
        int64_t n = 0;
        for (size_t i = 0; i < R; i++) n += c[i];
        r->nkeys[j] = n;
        nnz += (size_t)n;
    }
    if (len != fixed + nnz * (s->weighted ? 12 : 8)) return -1;
    for (int j = 0; j < s->n_slots; j++) {
        hps_rows_reserve_keys(r, j, r->nkeys[j]);
        memcpy(r->keys[j], p, (size_t)r->nkeys[j] * 8), p += (size_t)r->nkeys[j] * 8;
    }
    if (s->weighted)
        for (int j = 0; j < s->n_slots; j++)
            memcpy(r->weights[j], p, (size_t)r->nkeys[j] * 4), p += (size_t)r->nkeys[j] * 4;
    hps_rows_index(r);
    return 0;
}
