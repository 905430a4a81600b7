/* hps_batch: one batch of samples as the tools exchange it on the host.
 *
 * Sparse features are CSR over (sample, slot): the keys of sample b in slot s
 * are keys[offsets[b*S+s] .. offsets[b*S+s+1]), each with an optional weight
 * (libsvm values; NULL means 1).  Keys are raw 64-bit feature keys; the
 * executor folds them into table rows (see hps_net_row_of_key).
 */
#ifndef HPS_BATCH_H
#define HPS_BATCH_H

#include <stdint.h>

#include "model/hps_model.h"

typedef struct {
    int B, cap;       /* samples held, samples allocated */
    int n_dense, n_slots;
    float *dense;     /* cap x n_dense */
    float *labels;    /* cap: 0/1, or the class index */
    int64_t *offsets; /* cap*n_slots + 1 */
    uint64_t *keys;
    float *weights;   /* NULL unless the batch carries weights */
    int64_t nnz, nnz_cap;
} hps_batch;

hps_batch *hps_batch_create(int cap, int n_dense, int n_slots, int64_t nnz_cap, int weighted);
void hps_batch_free(hps_batch *b);
/* Makes room for nnz keys (keys and weights are reallocated). */
void hps_batch_reserve_keys(hps_batch *b, int64_t nnz);

/* Appends src's samples to dst (dst->B + src->B <= dst->cap, same schema). */
void hps_batch_append(hps_batch *dst, const hps_batch *src);
/* Appends src's samples [from, from+n) to dst (dst->B + n <= dst->cap, same schema). */
void hps_batch_append_rows(hps_batch *dst, const hps_batch *src, int from, int n);
/* Appends n samples that a reader of part of a batch left out: label 0, no
 * keys, their dense values as they were. */
void hps_batch_skip_rows(hps_batch *b, int n);

/* A synthetic batch for a model: dense ~ N(0,1), keys Zipf(1.05) per slot over
 * its rows, bag sizes around the slot's keys_per_sample, random labels.  Used by
 * hps-profile, whose timings need realistic key reuse but no real data. */
hps_batch *hps_batch_synth(const hps_model *m, int B, uint64_t seed);

#endif
