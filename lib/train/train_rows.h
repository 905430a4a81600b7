/* train_rows: the embedding rows of a stage whose plan says `rows: hbm` or
 * `rows: cache`, kept in the backend's memory (hps-train(1) ROWS).
 *
 * The host tables (train_table) stay the map from (slot, key) to a host row,
 * the rows' first values and, for a cache, the home of every row that is not
 * on the device.  The device holds rows by slot, one arena (weights and
 * AdaGrad's accumulators) per embedding layer, all of them written and read
 * only through the backend's rows_put and rows_get, so a copy forgotten here
 * shows as a wrong loss on the CPU backend too.
 *
 * One rule for both: capacity C rows over the stage's layers together
 * (hbm: every row).  Each host row keeps a lookup count; a step's first
 * lookup of a row not on the device is a miss and fetches it; with the
 * cache full, the cached row with the lowest count (ties: the least
 * recently looked up) that the step has not used is evicted and written
 * back, unless the missing row's count is not higher: then the row is
 * staged for this step only and written back at its end.  Training reads
 * and updates the same values as with host tables, in the same order.
 *
 * A cache may have a home other than its host tables (train_rows_home:
 * under mpirun, the plan's servers): a row's state (weights and
 * accumulators) comes from the home into its host row just before it is
 * fetched, and goes from its host row to the home just after it is
 * written back, so the home always holds a row not on the device as the
 * host tables would.
 */
#ifndef HPS_TRAIN_ROWS_H
#define HPS_TRAIN_ROWS_H

#include <stdio.h>

#include "kernels/hps_backend.h"
#include "model/hps_model.h"
#include "train/hps_train.h"
#include "train/train_table.h"

typedef struct train_rows train_rows;

/* Where rows not on the device live beside the host tables.  get fills n
 * host rows of layer `layer` of host (weights and accumulators) from the
 * home; put sends them to it.  Neither returns an error: a home keeps its
 * own and reports it after the call (train_rows' copies cannot fail). */
typedef struct {
    void *ctx;
    void (*get)(void *ctx, hps_table *host, int layer, const int64_t *rows, int64_t n);
    void (*put)(void *ctx, hps_table *host, int layer, const int64_t *rows, int64_t n);
} train_rows_home;

/* Lookups (each key of each sample), the ones the cache served, the rows
 * fetched into it and the rows written back (evicted or staged). */
typedef struct {
    uint64_t lookups, hits, misses, write_backs;
} train_rows_stats;

/* Layers [first, end) of tables (NULL where a layer has none), capacity
 * rows on be (INT64_MAX: hbm). */
train_rows *train_rows_create(const hps_backend *be, const hps_model *m, hps_table **tables,
                              int first, int end, int64_t capacity);
void train_rows_free(train_rows *r);
/* Rows from and back to home (copied) instead of the host tables alone. */
void train_rows_set_home(train_rows *r, const train_rows_home *home);

/* The device slot of host row `row` of layer l, fetching it (evaluating:
 * read only, no counts, a staged copy until train_rows_step_end). */
int64_t train_rows_map(train_rows *r, int l, int64_t row, int evaluating);
/* After a load's lookups: evicted rows written back, missing rows fetched. */
void train_rows_prepare(train_rows *r);
/* The layer's arena, for the nets (valid until the next map). */
float *train_rows_weights(train_rows *r, int l);
float *train_rows_accum(train_rows *r, int l);
/* One step's sparse update of layer l: the sum of n gradients of its
 * slots, summed as hps_table_grad_sum sums them, then AdaGrad. */
void train_rows_apply(train_rows *r, int l, hps_sparse_grad *const *grads, int n, float lr,
                      float eps);
/* Several units of a stage with rows: hbm (under mpirun) sum a step's
 * gradients of layer l in worker order: part w of all is worker w's sum,
 * its rows named by key, and every row of the parts is updated here (a
 * replica: each worker's rows; a shard: the rows hps_dist_route gives this
 * unit).  A key no lookup of this process made is created as a lookup at
 * `step` would create it. */
int train_rows_apply_parts(train_rows *r, int l, const hps_row_grads *all, uint64_t step, float lr, float eps,
                           hps_error *err);
/* Replicas (rows: hbm under mpirun, every worker of the stage holding every
 * row): this process's sum of its n gradients goes to the others by key
 * through h->exchange_rows, and every process's updates the rows
 * (train_rows_apply_parts), so that the replicas stay equal.  Every process
 * calls it each step (n = 0 too). */
int train_rows_apply_replicas(train_rows *r, int l, hps_sparse_grad *const *grads, int n,
                              const hps_train_dist *h, uint64_t step, float lr, float eps, hps_error *err);
/* A shard's owner: the current values of n rows named by key (of any layers
 * of r), D floats each back to back into out (host memory).  Key i stands
 * for lookups[i] lookups (NULL: 1 each), a worker's lookups of it this
 * step: they count as that many train_rows_map calls in a row would (the
 * count and the lookups grow by all of them; with a cache the first is a
 * hit or a miss and decides, the others hit unless the row is staged), but
 * stamp the row once: ties of count follow the order of the keys read.  A
 * key not here is created as a lookup at `step` creates it.  The step's
 * gradients (train_rows_apply_parts) name only rows read in it; then
 * train_rows_step_end. */
int train_rows_read(train_rows *r, const hps_row_key *keys, const uint32_t *lookups, int64_t n, uint64_t step,
                    float *out, hps_error *err);
/* The end of a step (staged rows written back when write_back) or of an
 * evaluation batch (their copies dropped). */
void train_rows_step_end(train_rows *r, int write_back);
/* Every row on the device copied to its host row (and home): before
 * checkpoints and exports read the host tables (or the home). */
void train_rows_flush(train_rows *r);
/* The other way: every row on the device takes its host row's values. */
void train_rows_reload(train_rows *r);
const train_rows_stats *train_rows_stats_of(const train_rows *r);
int64_t train_rows_capacity(const train_rows *r);

/* Checkpoints: the counts, what is cached and the statistics (the rows'
 * values are in the host tables, flushed before).  A checkpoint without
 * them loads a cold cache; load after the host tables. */
int train_rows_save(const train_rows *r, FILE *f);
int train_rows_load(train_rows *r, FILE *f, hps_error *err, const char *name);

#endif
