/* train_table: a parameter server's embedding table for one embedding layer.
 *
 * Rows are keyed by (slot, 64-bit key) and created on first touch, with
 * values drawn from a generator seeded by (seed, layer, slot, key): the same
 * key gets the same initial row whatever the order it arrives in, which keeps
 * runs, resumes and ranks in step.  Weights and AdaGrad accumulators live in
 * two slabs of rows x dim floats that grow by doubling up to the memory cap.
 *
 * When the cap is reached a new key either fails (HPS_TABLE_FULL_ERROR, the
 * default) or takes the row of a cold key (HPS_TABLE_FULL_EVICT: a clock
 * sweep with a reference bit per row; rows touched in the current step are
 * never evicted).
 *
 * Admission (hps_table_set_admission): a key gets a row on its Nth lookup.
 * Until then it is a candidate, counted in a bounded set-associative hash
 * (16 bytes a candidate, 131072 of them, 2 MiB per table, taken from the
 * cap); a lookup returns the zero row and the step drops its gradient.
 * The lookup that admits a key makes its row, but the key reads the zero
 * row for the rest of that load (until hps_table_apply or the next
 * hps_table_stage_begin): every lookup of a key in one load reads the same
 * values, whether the load is one process's or a server's. A
 * candidate whose bucket is full is displaced by a new key (the least-counted
 * goes) and starts over when it comes back: a key is admitted late, never
 * before its Nth lookup.
 *
 * Days (hps_table_start_day): each row keeps the day that last touched it;
 * a new day removes the rows untouched for the days given.
 */
#ifndef HPS_TRAIN_TABLE_H
#define HPS_TRAIN_TABLE_H

#include <stdio.h>

#include "core/hps_core.h"
#include "kernels/hps_kernels.h"
#include "model/hps_model.h" /* hps_row_dtype */

typedef enum { HPS_TABLE_FULL_ERROR, HPS_TABLE_FULL_EVICT } hps_table_policy;

typedef struct hps_table hps_table;

/* max_bytes counts weights, accumulators and bookkeeping (see
 * hps_table_row_bytes); 0 means no cap. */
hps_table *hps_table_create(int layer, int dim, size_t max_bytes, hps_table_policy policy,
                            uint64_t seed);
void hps_table_free(hps_table *t);

/* Bytes one row costs against the cap (rowwise: one accumulator, not dim);
 * the admission counts' bytes. */
size_t hps_table_row_bytes(int dim, int rowwise, hps_row_dtype dtype);
size_t hps_table_admission_bytes(void);

/* Row-wise AdaGrad (one accumulator a row: the mean of the squared
 * gradient over the row, as FBGEMM's rowwise adagrad), before the first row. */
void hps_table_set_rowwise(hps_table *t);
int hps_table_rowwise(const hps_table *t);
/* Compact rows (before the first row): the rows are stored as fp16 or bf16,
 * rounded to nearest even; each load works on fp32 copies of its rows
 * (hps_table_stage_begin, then every row a lookup or hps_table_stage gives
 * is a copy's index into hps_table_weights/accum), which hps_table_apply
 * updates and writes back.  With fp32 rows (the default) a row is its own
 * copy and both calls do nothing. */
void hps_table_set_dtype(hps_table *t, hps_row_dtype dtype);
void hps_table_stage_begin(hps_table *t); /* a load begins (fp32 rows too) */
int64_t hps_table_stage(hps_table *t, int64_t row);
/* Row `row`'s weights as fp32 (exports). */
void hps_table_row_values(const hps_table *t, int64_t row, float *out);
/* The rounding to and from the compact types (round trips are exact for
 * values the type holds). */
uint16_t hps_row_round(float x, hps_row_dtype dtype);
float hps_row_widen(uint16_t v, hps_row_dtype dtype);
/* admit_after <= 1: every key gets a row at once (the default). */
void hps_table_set_admission(hps_table *t, int admit_after);
/* Slot `slot`'s own threshold (a model slot index), instead of the table's. */
void hps_table_set_slot_admission(hps_table *t, int slot, int admit_after);
/* Day day begins (1 for a new table; a loaded one is the caller's to set):
 * lookups stamp rows with it, and with
 * expire_after_days > 0 the rows last touched before day - expire_after_days
 * are removed.  Returns how many. */
int64_t hps_table_start_day(hps_table *t, uint64_t day, int expire_after_days);
/* Makes room for n new rows before a batch's lookups, so that the table
 * does not grow during them (the zero row a key not admitted reads stays
 * where it is). */
void hps_table_reserve(hps_table *t, int64_t n);
/* Sizes the table for `rows` rows in all (within the cap), in one growth:
 * a table that would otherwise double its way there rehashes every row it
 * holds at each doubling (and faults in the new hash), a pause of the run
 * that grows with the table.  The slabs take `spare` rows more (an
 * estimate's error) in a hash sized for `rows` (up to half full at rows,
 * a little over with the spare: not twice the hash for a few rows more);
 * their pages are touched only as rows fill them.  A table past
 * rows + spare doubles as before. */
void hps_table_presize(hps_table *t, int64_t rows, int64_t spare);
/* How many growths rehashed rows (the run's, not saved in checkpoints). */
int64_t hps_table_rehashes(const hps_table *t);

/* Row of (slot, key), creating it (the zero row, hps_table_zero_row, while
 * the key is not admitted); -1 with err when the table is full.
 * step stamps the row as in use (never evicted during that step).  The slab
 * may move: fetch hps_table_weights() after the last lookup of a batch. */
int64_t hps_table_lookup(hps_table *t, int slot, uint64_t key, uint64_t step, hps_error *err);
/* The row the lookups of this load gave (slot, key), counting nothing: the
 * zero row for a key not admitted, or admitted in this load (a server's
 * push names the rows its fetch looked up). */
int64_t hps_table_recall(hps_table *t, int slot, uint64_t key);
/* n lookups (slots[e], keys[e]) of one step at once: rows[e] and the
 * table after are those of n hps_table_lookup calls in order; 0, or -1 with
 * err at the first that fails (its row -1, the rows after it and the
 * table's stamps of them unspecified: the load fails).  Where no lookup can
 * admit, evict or stage a row (fp32 rows, no admission threshold, no
 * eviction), the rows already present are found on every OpenMP thread. */
int hps_table_lookup_many(hps_table *t, const int *slots, const uint64_t *keys, int64_t n, uint64_t step,
                          int64_t *rows, hps_error *err);

/* Evaluation reads without inserting: the row of (slot, key) or -1, and a
 * row of zeros for keys training never saw (valid until the table grows). */
int64_t hps_table_find(const hps_table *t, int slot, uint64_t key);
int64_t hps_table_zero_row(hps_table *t);

float *hps_table_weights(hps_table *t);
float *hps_table_accum(hps_table *t);           /* rows x dim, or rows x 1 row-wise */
int64_t hps_table_rows(const hps_table *t);      /* rows in use */
int64_t hps_table_max_rows(const hps_table *t);  /* under the cap (INT64_MAX: none) */
int64_t hps_table_evictions(const hps_table *t);
int64_t hps_table_expired(const hps_table *t);   /* rows removed by hps_table_start_day */
/* Training lookups so far, and those that found (or made) a row. */
void hps_table_lookups(const hps_table *t, uint64_t *lookups, uint64_t *admitted);
size_t hps_table_bytes(const hps_table *t);      /* allocated now */
/* A table's figures as the metrics report them (hps-train(1), METRICS:
 * tables): rows in use, evicted, expired (all days), expired when this day
 * began, training lookups and those admitted, bytes allocated.  All int64:
 * a parameter server sends them as they are, and the lead sums its servers'
 * (hps_table_stats_add). */
typedef struct {
    int64_t rows, evictions, expired, day_expired, lookups, admitted, bytes;
} hps_table_stats;
#define HPS_TABLE_STATS_N 7
_Static_assert(sizeof(hps_table_stats) == HPS_TABLE_STATS_N * sizeof(int64_t), "sent as int64s");
void hps_table_stats_get(const hps_table *t, hps_table_stats *s);
void hps_table_stats_add(hps_table_stats *sum, const hps_table_stats *s);

/* Every row removed (the counters stay): a worker's map of keys before it
 * takes its servers' rows. */
void hps_table_clear(hps_table *t);

/* Row i (0 <= i < hps_table_rows) of the table in creation order: its slot
 * and key.  Export and checkpoints walk the rows with it. */
void hps_table_row_key(const hps_table *t, int64_t row, int *slot, uint64_t *key);

/* The sum of n sparse gradients of the table's rows, summed in their order
 * (a process's micro-batches, a server's workers): grads[0] itself when
 * n == 1, else *sum, scratch the caller keeps between steps (grown here). */
const hps_sparse_grad *hps_table_grad_sum(hps_sparse_grad *const *grads, int n, int dim,
                                          hps_sparse_grad **sum);
/* One step's update of the rows: the sum of n sparse gradients (as above)
 * applied with AdaGrad (per element or row-wise).  One process and a parameter server both update
 * their rows here. */
void hps_table_apply(hps_table *t, hps_sparse_grad *const *grads, int n, hps_sparse_grad **sum,
                     float lr, float eps);

/* Checkpoints: the whole table (keys, rows, accumulators, clock state,
 * days, admission counts).
 * A loaded table is refused (an error naming name, the layer and the row;
 * the table left empty) unless every row is well-formed: its slot one of
 * the layer's n_slots slots, no (slot, key) twice, its values finite. */
int hps_table_save(const hps_table *t, FILE *f);
int hps_table_load(hps_table *t, FILE *f, const int *slots, int n_slots, hps_error *err,
                   const char *name);

#endif
