#include "net/hps_batch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_rng.h"

hps_batch *hps_batch_create(int cap, int n_dense, int n_slots, int64_t nnz_cap, int weighted)
{
    hps_batch *b = hps_calloc(1, sizeof *b);
    b->cap = cap;
    b->n_dense = n_dense;
    b->n_slots = n_slots;
    b->dense = hps_calloc((size_t)cap * (n_dense ? n_dense : 1), sizeof *b->dense);
    b->labels = hps_calloc((size_t)cap, sizeof *b->labels);
    b->offsets = hps_calloc((size_t)cap * n_slots + 1, sizeof *b->offsets);
    b->nnz_cap = nnz_cap > 0 ? nnz_cap : 1;
    b->keys = hps_malloc((size_t)b->nnz_cap * sizeof *b->keys);
    if (weighted) b->weights = hps_malloc((size_t)b->nnz_cap * sizeof *b->weights);
    return b;
}

void hps_batch_free(hps_batch *b)
{
    if (!b) return;
    free(b->dense);
    free(b->labels);
    free(b->offsets);
    free(b->keys);
    free(b->weights);
    free(b);
}

void hps_batch_reserve_keys(hps_batch *b, int64_t nnz)
{
    if (nnz <= b->nnz_cap) return;
    while (b->nnz_cap < nnz) b->nnz_cap *= 2;
    b->keys = hps_realloc(b->keys, (size_t)b->nnz_cap * sizeof *b->keys);
    if (b->weights) b->weights = hps_realloc(b->weights, (size_t)b->nnz_cap * sizeof *b->weights);
}

void hps_batch_append_rows(hps_batch *dst, const hps_batch *src, int from, int n)
{
    HPS_CHECK(from >= 0 && n >= 0 && from + n <= src->B && dst->B + n <= dst->cap && dst->n_dense == src->n_dense &&
              dst->n_slots == src->n_slots);
    const size_t S = (size_t)dst->n_slots, at = (size_t)dst->B, nd = (size_t)dst->n_dense;
    memcpy(dst->dense + at * nd, src->dense + (size_t)from * nd, (size_t)n * nd * sizeof(float));
    memcpy(dst->labels + at, src->labels + from, (size_t)n * sizeof(float));
    int64_t base = dst->offsets[at * S], k0 = src->offsets[(size_t)from * S];
    int64_t k = src->offsets[(size_t)(from + n) * S] - k0;
    hps_batch_reserve_keys(dst, base + k);
    memcpy(dst->keys + base, src->keys + k0, (size_t)k * sizeof *dst->keys);
    if (dst->weights)
        for (int64_t q = 0; q < k; q++) dst->weights[base + q] = src->weights ? src->weights[k0 + q] : 1.0f;
    const int64_t *in = src->offsets + (size_t)from * S;
    for (size_t i = 1; i <= (size_t)n * S; i++) dst->offsets[at * S + i] = base + in[i] - k0;
    dst->B += n;
    dst->nnz = base + k;
}

void hps_batch_append(hps_batch *dst, const hps_batch *src) { hps_batch_append_rows(dst, src, 0, src->B); }

void hps_batch_skip_rows(hps_batch *b, int n)
{
    HPS_CHECK(n >= 0 && b->B + n <= b->cap);
    const int S = b->n_slots;
    for (int i = 0; i < n; i++, b->B++) {
        b->labels[b->B] = 0;
        for (int j = 0; j < S; j++) b->offsets[(size_t)b->B * S + j + 1] = b->nnz;
    }
}

/* Bag size with mean k: k itself when k is whole, else floor/ceil at random. */
static int bag_size(double k, hps_rng *r)
{
    int lo = (int)floor(k);
    return lo + (hps_rng_uniform(r) < k - lo ? 1 : 0);
}

hps_batch *hps_batch_synth(const hps_model *m, int B, uint64_t seed)
{
    int weighted = 0;
    for (int l = 0; l < m->n_layers; l++) weighted |= m->layers[l].weighted;
    double keys = 0;
    for (int s = 0; s < m->n_slots; s++) keys += m->slots[s].keys_per_row;
    hps_batch *b = hps_batch_create(B, m->n_dense, m->n_slots, (int64_t)(B * (keys + 1)) + 16,
                                    weighted);
    hps_rng r;
    hps_rng_seed(&r, seed);
    hps_zipf *zipf = hps_malloc((size_t)(m->n_slots ? m->n_slots : 1) * sizeof *zipf);
    for (int s = 0; s < m->n_slots; s++) hps_zipf_init(&zipf[s], (uint64_t)m->slots[s].rows, 1.05);
    b->B = B;
    int64_t nnz = 0;
    for (int i = 0; i < B; i++) {
        for (int d = 0; d < m->n_dense; d++) b->dense[(size_t)i * m->n_dense + d] = (float)hps_rng_normal(&r);
        b->labels[i] = (float)hps_rng_below(&r, (uint64_t)m->classes);
        for (int s = 0; s < m->n_slots; s++) {
            int n = bag_size(m->slots[s].keys_per_row, &r);
            hps_batch_reserve_keys(b, nnz + n);
            for (int k = 0; k < n; k++, nnz++) {
                b->keys[nnz] = hps_zipf_draw(&zipf[s], &r) - 1;
                if (b->weights) b->weights[nnz] = (float)hps_rng_uniform(&r) + 0.5f;
            }
            b->offsets[(size_t)i * m->n_slots + s + 1] = nnz;
        }
    }
    b->nnz = nnz;
    free(zipf);
    return b;
}
