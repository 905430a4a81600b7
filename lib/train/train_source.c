/* The schema check every batch source goes through before training starts. */
#include <stdlib.h>

#include "train/hps_train.h"

int hps_source_check(const hps_source *s, const hps_model *m, hps_error *err)
{
    if (s->n_dense != m->n_dense)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: rows have %d dense features, %s expects %d",
                        s->name, s->n_dense, m->path, m->n_dense);
    if (s->n_slots != m->n_slots)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: rows have %d sparse slots, %s expects %d",
                        s->name, s->n_slots, m->path, m->n_slots);
    if (s->classes != m->classes)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: labels have %d classes, %s expects %d",
                        s->name, s->classes, m->path, m->classes);
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].weighted && !s->weighted)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: rows carry no feature weights, but layer '%s' is weighted",
                            s->name, m->layers[l].name);
    return 0;
}

/* ---- hps-profile's batches ---------------------------------------------------- */
/* Not tests/lib's planted rows (keys from at most 1000 per slot, so that the
 * tests learn): the keys hps-profile times the layers with (hps_batch_synth,
 * Zipf over each slot's rows), so the engine's lookups create rows as a run's
 * do. */

typedef struct {
    hps_source base;
    const hps_model *m;
    uint64_t seed, read;
} synth_source;

static int synth_read(hps_source *src, hps_batch *b, int max, hps_error *err)
{
    (void)err;
    synth_source *s = (synth_source *)src;
    hps_batch *one = hps_batch_synth(s->m, max, s->seed + s->read++); /* new keys each batch, as data brings */
    b->B = 0;
    b->nnz = 0;
    b->offsets[0] = 0;
    hps_batch_append(b, one);
    hps_batch_free(one);
    return max;
}

static int synth_seek(hps_source *src, uint64_t row, hps_error *err)
{
    (void)row, (void)err;
    ((synth_source *)src)->read = 0;
    return 0;
}

static uint64_t synth_tell(const hps_source *src) { return ((const synth_source *)src)->read; }
static uint64_t synth_rows(const hps_source *src) { (void)src; return UINT64_MAX; }
static void synth_close(hps_source *src) { free(src); }

hps_source *hps_source_profile_batches(const hps_model *m, uint64_t seed)
{
    synth_source *s = hps_calloc(1, sizeof *s);
    int weighted = 0;
    for (int l = 0; l < m->n_layers; l++) weighted |= m->layers[l].weighted;
    s->base = (hps_source){.read = synth_read, .seek = synth_seek, .tell = synth_tell, .rows = synth_rows,
                           .close = synth_close, .n_dense = m->n_dense, .n_slots = m->n_slots,
                           .weighted = weighted, .classes = m->classes, .name = "hps-profile's synthetic batches"};
    s->m = m;
    s->seed = seed;
    return &s->base;
}
