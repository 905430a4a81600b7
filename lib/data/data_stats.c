/* Key statistics for the manifest: distinct keys (HyperLogLog) and the
 * hottest keys per slot.  Both merge in a way that does not depend on which
 * thread saw which block, so the manifest is as reproducible as the shards. */
#include "data/hps_shard_job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_rng.h"

#define HLL_M (1u << HPS_HLL_BITS)
#define CAND_CAP (4 * HPS_HOT_KEEP) /* open addressing, pruned at half full */

hps_hll_set *hps_hll_create(int n_slots)
{
    hps_hll_set *h = hps_calloc(1, sizeof *h);
    h->n_slots = n_slots;
    h->hll = hps_calloc((size_t)(n_slots ? n_slots : 1) * HLL_M, 1);
    return h;
}

void hps_hll_free(hps_hll_set *h)
{
    if (!h) return;
    free(h->hll);
    free(h);
}

void hps_hll_add_rows(hps_hll_set *h, const hps_rows *r)
{
    for (int j = 0; j < h->n_slots; j++) {
        uint8_t *reg = h->hll + (size_t)j * HLL_M;
        const uint64_t *k = r->keys[j];
        for (int64_t i = 0; i < r->nkeys[j]; i++) {
            uint64_t x = hps_mix64(k[i]); /* keys may be raw indices: mix them */
            uint32_t idx = (uint32_t)(x >> (64 - HPS_HLL_BITS));
            uint64_t w = x << HPS_HLL_BITS;
            uint8_t rank = w ? (uint8_t)(__builtin_clzll(w) + 1) : (uint8_t)(64 - HPS_HLL_BITS + 1);
            if (rank > reg[idx]) reg[idx] = rank;
        }
    }
}

void hps_hll_merge(hps_hll_set *into, const hps_hll_set *from)
{
    size_t n = (size_t)into->n_slots * HLL_M;
    for (size_t i = 0; i < n; i++)
        if (from->hll[i] > into->hll[i]) into->hll[i] = from->hll[i];
}

double hps_hll_estimate(const hps_hll_set *h, int slot)
{
    const uint8_t *reg = h->hll + (size_t)slot * HLL_M;
    double m = HLL_M, sum = 0;
    int zeros = 0;
    for (uint32_t i = 0; i < HLL_M; i++) {
        sum += ldexp(1.0, -reg[i]);
        zeros += reg[i] == 0;
    }
    double e = 0.7213 / (1 + 1.079 / m) * m * m / sum;
    if (e <= 2.5 * m && zeros) e = m * log(m / zeros); /* linear counting for small sets */
    return e;
}

/* ---- hot keys, per block ------------------------------------------------------ */

hps_hot_block *hps_hot_block_create(int n_slots)
{
    hps_hot_block *h = hps_calloc(1, sizeof *h);
    int S = n_slots ? n_slots : 1;
    h->n_slots = n_slots;
    h->n = hps_calloc((size_t)S, sizeof *h->n);
    h->top = hps_calloc((size_t)S * HPS_HOT_PER_BLOCK, sizeof *h->top);
    h->sampled = hps_calloc((size_t)S, sizeof *h->sampled);
    return h;
}

void hps_hot_block_free(hps_hot_block *h)
{
    if (!h) return;
    free(h->n), free(h->top), free(h->sampled), free(h->table);
    free(h);
}

/* Hotter first; equal counts by key, so the order is total. */
static int hotter(const hps_key_count *a, const hps_key_count *b)
{
    return a->count != b->count ? a->count > b->count : a->key < b->key;
}

static int cmp_hot(const void *a, const void *b)
{
    const hps_key_count *x = a, *y = b;
    if (x->key == y->key && x->count == y->count) return 0;
    return hotter(x, y) ? -1 : 1;
}

/* The HPS_HOT_PER_BLOCK hottest entries of a block's count table, in O(n):
 * a histogram of the counts finds the threshold; entries at the threshold
 * are taken in table order, which is fixed by the block's content. */
static void block_top(const uint64_t *t, size_t cap, uint64_t most, hps_key_count *top, int *n)
{
    enum { MAXC = 4096 };
    static _Thread_local uint32_t hist[MAXC + 1];
    /* no count exceeds `most`: clearing all of hist for every slot of
     * every block cost more than the counting */
    uint64_t top_c = most < MAXC ? most : MAXC;
    memset(hist, 0, (top_c + 1) * sizeof *hist);
    for (size_t p = 0; p < cap; p++)
        if (t[2 * p + 1]) hist[t[2 * p + 1] < MAXC ? t[2 * p + 1] : MAXC]++;
    uint64_t above = 0, c = top_c;
    for (; c > 0 && above + hist[c] <= HPS_HOT_PER_BLOCK; c--) above += hist[c];
    /* every entry with count > c fits; room is left for some of count c */
    int room = HPS_HOT_PER_BLOCK - (int)above;
    for (size_t p = 0; p < cap; p++) {
        uint64_t k = t[2 * p + 1], b = k < MAXC ? k : MAXC;
        if (!k || b < c || (b == c && c > 0 && room-- <= 0)) continue;
        top[(*n)++] = (hps_key_count){t[2 * p], k};
    }
}

void hps_hot_block_count(hps_hot_block *h, const hps_rows *r)
{
    for (int j = 0; j < h->n_slots; j++) {
        int64_t nk = r->nkeys[j], samples = (nk + 3) / 4;
        size_t cap = 64;
        while (cap < (size_t)samples * 2) cap *= 2;
        if (cap > h->table_cap) {
            h->table_cap = cap;
            h->table = hps_realloc(h->table, cap * 2 * sizeof *h->table);
        }
        uint64_t *t = h->table; /* pairs: key, count (0 = empty) */
        memset(t, 0, cap * 2 * sizeof *t);
        for (int64_t i = 0; i < nk; i += 4) {
            uint64_t key = r->keys[j][i];
            size_t p = hps_mix64(key) & (cap - 1);
            while (t[2 * p + 1] && t[2 * p] != key) p = (p + 1) & (cap - 1);
            t[2 * p] = key;
            t[2 * p + 1]++;
        }
        h->sampled[j] = (uint64_t)samples;
        h->n[j] = 0;
        block_top(t, cap, (uint64_t)samples, h->top + (size_t)j * HPS_HOT_PER_BLOCK, &h->n[j]);
    }
}

/* ---- hot keys, merged in input order -------------------------------------------- */

hps_hot_set *hps_hot_create(int n_slots)
{
    hps_hot_set *h = hps_calloc(1, sizeof *h);
    int S = n_slots ? n_slots : 1;
    h->n_slots = n_slots;
    h->lookups = hps_calloc((size_t)S, sizeof *h->lookups);
    h->sampled = hps_calloc((size_t)S, sizeof *h->sampled);
    h->n = hps_calloc((size_t)S, sizeof *h->n);
    h->cand = hps_calloc((size_t)S * CAND_CAP, sizeof *h->cand);
    return h;
}

void hps_hot_free(hps_hot_set *h)
{
    if (!h) return;
    free(h->lookups), free(h->sampled), free(h->n), free(h->cand);
    free(h);
}

static void cand_add(hps_key_count *t, int *n, hps_key_count c)
{
    size_t p = hps_mix64(c.key) & (CAND_CAP - 1);
    while (t[p].count && t[p].key != c.key) p = (p + 1) & (CAND_CAP - 1);
    if (!t[p].count) t[p].key = c.key, (*n)++;
    t[p].count += c.count;
}

/* A slot's candidates, hottest first (malloc'd; *n of them). */
static hps_key_count *cand_sorted(const hps_key_count *t, int *n)
{
    hps_key_count *all = hps_malloc((size_t)(*n ? *n : 1) * sizeof *all);
    int k = 0;
    for (size_t p = 0; p < CAND_CAP; p++)
        if (t[p].count) all[k++] = t[p];
    qsort(all, (size_t)k, sizeof *all, cmp_hot);
    *n = k;
    return all;
}

/* Keeps the HPS_HOT_KEEP hottest candidates: keys that stay hot keep
 * arriving from later blocks, cold ones fall out. */
static void cand_prune(hps_key_count *t, int *n)
{
    int k = *n;
    hps_key_count *all = cand_sorted(t, &k);
    memset(t, 0, CAND_CAP * sizeof *t);
    *n = 0;
    for (int i = 0; i < k && i < HPS_HOT_KEEP; i++) cand_add(t, n, all[i]);
    free(all);
}

void hps_hot_merge(hps_hot_set *h, const hps_hot_block *b, const hps_rows *r)
{
    for (int j = 0; j < h->n_slots; j++) {
        hps_key_count *t = h->cand + (size_t)j * CAND_CAP;
        h->lookups[j] += (uint64_t)r->nkeys[j];
        h->sampled[j] += b->sampled[j];
        for (int i = 0; i < b->n[j]; i++) cand_add(t, &h->n[j], b->top[(size_t)j * HPS_HOT_PER_BLOCK + i]);
        if (h->n[j] > CAND_CAP / 2) cand_prune(t, &h->n[j]);
    }
}

/* Sorted once: offering each candidate to a sorted top 4096 by insertion
 * took 6% of hps-shard's time, all of it on one thread at the end. */
int hps_hot_top(hps_hot_set *h, int slot, int k, hps_key_count *out)
{
    int n = h->n[slot];
    hps_key_count *all = cand_sorted(h->cand + (size_t)slot * CAND_CAP, &n);
    if (n > k) n = k;
    memcpy(out, all, (size_t)n * sizeof *out);
    free(all);
    return n;
}
