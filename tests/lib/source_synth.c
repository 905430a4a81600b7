/* Synthetic rows with a planted model, a batch source for the unit tests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_rng.h"
#include "hps_testlib.h"

/* ---- synthetic rows ----------------------------------------------------------- */

typedef struct {
    hps_source base;
    const hps_model *m;
    uint64_t rows, next, seed, planted; /* rows drawn with seed, labels by the planted model */
    hps_zipf *zipf;
    float *dense_w;
} synth;

/* The planted effect of a key: fixed by (seed, slot, key), N(0, 1). */
static double key_effect(uint64_t seed, int slot, uint64_t key)
{
    hps_rng r;
    hps_rng_seed(&r, seed ^ hps_mix64(key * 0x9e3779b97f4a7c15ULL + (uint64_t)slot));
    return hps_rng_normal(&r);
}

/* Row i is a function of (seed, i) alone, so seeking is free. */
static void synth_row(synth *s, hps_batch *b, uint64_t i)
{
    const hps_model *m = s->m;
    hps_rng r;
    hps_rng_seed(&r, hps_mix64(s->seed ^ (i * 0xbf58476d1ce4e5b9ULL)));
    int at = b->B++;
    double z = -0.5;
    for (int d = 0; d < m->n_dense; d++) {
        float x = (float)hps_rng_normal(&r);
        b->dense[(size_t)at * m->n_dense + d] = x;
        z += s->dense_w[d] * x;
    }
    int64_t nnz = b->offsets[(size_t)at * m->n_slots];
    for (int slot = 0; slot < m->n_slots; slot++) {
        int n = (int)m->slots[slot].keys_per_row;
        n = n < 1 ? 1 : n;
        hps_batch_reserve_keys(b, nnz + n);
        for (int k = 0; k < n; k++, nnz++) {
            uint64_t key = hps_zipf_draw(&s->zipf[slot], &r) - 1;
            b->keys[nnz] = key;
            if (b->weights) b->weights[nnz] = 1.0f;
            z += key_effect(s->planted, slot, key) / sqrt((double)m->n_slots * n);
        }
        b->offsets[(size_t)at * m->n_slots + slot + 1] = nnz;
    }
    b->nnz = nnz;
    if (m->label == HPS_LABEL_BINARY) {
        b->labels[at] = hps_rng_uniform(&r) < 1.0 / (1.0 + exp(-2.0 * z)) ? 1.0f : 0.0f;
    } else { /* class from the planted score, folded into the classes */
        double u = z + 0.5 * hps_rng_normal(&r);
        int c = (int)floor((u + 3.0) / 6.0 * m->classes);
        b->labels[at] = (float)(c < 0 ? 0 : c >= m->classes ? m->classes - 1 : c);
    }
}

static int synth_read(hps_source *src, hps_batch *b, int max, hps_error *err)
{
    (void)err;
    synth *s = (synth *)src;
    b->B = 0;
    b->nnz = 0;
    b->offsets[0] = 0;
    while (b->B < max && s->next < s->rows) synth_row(s, b, s->next++);
    return b->B;
}

static int synth_seek(hps_source *src, uint64_t row, hps_error *err)
{
    synth *s = (synth *)src;
    if (row > s->rows) return hps_fail(err, HPS_EXIT_RUNTIME, "synthetic: no row %llu", (unsigned long long)row);
    s->next = row;
    return 0;
}

static uint64_t synth_tell(const hps_source *src) { return ((const synth *)src)->next; }
static uint64_t synth_rows(const hps_source *src) { return ((const synth *)src)->rows; }

static void synth_close(hps_source *src)
{
    synth *s = (synth *)src;
    free(s->zipf);
    free(s->dense_w);
    free(s);
}

hps_source *hps_source_synth(const hps_model *m, uint64_t rows, uint64_t planted, uint64_t seed)
{
    synth *s = hps_calloc(1, sizeof *s);
    int weighted = 0;
    for (int l = 0; l < m->n_layers; l++) weighted |= m->layers[l].weighted;
    s->base = (hps_source){.read = synth_read, .seek = synth_seek, .tell = synth_tell,
                           .rows = synth_rows, .close = synth_close, .n_dense = m->n_dense,
                           .n_slots = m->n_slots, .weighted = weighted, .classes = m->classes,
                           .name = "synthetic"};
    s->m = m;
    s->rows = rows;
    s->seed = seed;
    s->planted = planted;
    s->zipf = hps_calloc((size_t)m->n_slots + 1, sizeof *s->zipf);
    for (int i = 0; i < m->n_slots; i++)
        hps_zipf_init(&s->zipf[i], (uint64_t)(m->slots[i].rows < 1000 ? m->slots[i].rows : 1000), 1.1);
    s->dense_w = hps_calloc((size_t)m->n_dense + 1, sizeof *s->dense_w);
    hps_rng r;
    hps_rng_seed(&r, planted + 1);
    for (int d = 0; d < m->n_dense; d++) s->dense_w[d] = (float)(hps_rng_normal(&r) / sqrt(m->n_dense + 1.0));
    return &s->base;
}
