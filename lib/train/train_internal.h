/* The trainer's state, shared by the train_*.c files and nobody else. */
#ifndef HPS_TRAIN_INTERNAL_H
#define HPS_TRAIN_INTERNAL_H

#include <stdio.h>

#include "train/hps_train.h"
#include "train/train_rows.h"

struct hps_trainer {
    const hps_model *m;
    const plan_file *plan;         /* the caller's, kept until hps_trainer_free */
    char data_digest[72];          /* the training data's (hps_source.digest), "" when unknown */
    hps_train_opts o;
    const hps_backend *be;
    int B, M, cap_micro, threads;  /* batch, micro-batches, samples each, threads per stage */
    hps_net *owner, **nets;        /* nets[0] == owner: parameters live there */
    int n_nets;                    /* nets made: M, more where a later stage loads its partners' slices */
    hps_table **tables;            /* per layer; NULL but for embedding layers */
    hps_sparse_grad **merged;      /* per layer: micro-batch gradients summed */
    /* stages whose plan keeps rows in the backend's memory (rows: hbm or
     * cache), and per layer the one holding its rows (NULL: host tables) */
    train_rows *stage_rows[HPS_TRAIN_MAX_STAGES];
    train_rows **rows_of;
    hps_sparse_grad **micro_grads; /* n_nets: one layer's micro-batch gradients, to merge */
    int evaluating;                /* lookups read only: no new rows, unseen keys read zeros */
    hps_pipeline *pipe;
    hps_batch *batch;
    /* where training stands: what a checkpoint saves */
    uint64_t step, epoch, epoch_row, samples;
    /* the day this run is (hps-train(1), DAY BY DAY): 1, or one more than
     * the checkpoint --continue-from continued; expiry counts these */
    uint64_t day, day_start;       /* ... and the step the day began at */
    uint64_t kill_at_step;         /* test build: HPS_TRAIN_KILL_AT_STEP: SIGKILL itself there */
    /* a lookup that failed inside the row map; the table layer's slot ids
     * of one load's keys (table_rows) */
    hps_error map_err;
    int *slots;
    int64_t cap_slots;
    /* reporting */
    hps_train_summary sum;
    uint64_t (*epoch_lookups)[2]; /* per layer: its table's lookups, admitted, when the epoch began */
    double samples_run;            /* samples trained by this process (resumes start at 0) */
    FILE *metrics;
    int metrics_errno; /* the first failed write: reported at the end */
    double t_start, t_last, t_bar;
    uint64_t step_last;
    uint64_t metrics_every;        /* steps between step records, from the run's size (a curve of ~100 points) */
    double samples_last;
    double eval_s_last;            /* sum.eval_seconds at the last step record */
    double progress_start;         /* run fraction at the first progress line (NAN before) */
    double busy_last[HPS_TRAIN_MAX_STAGES];
    double busy_start[HPS_TRAIN_MAX_STAGES]; /* at the start record: the summary's per-stage ms */
    uint64_t step_start;
    /* seconds of training steps spent reading batches, and in the engine's
     * work around the stages (lookups, optimizers, waits for servers) */
    double read_s, engine_s;
    /* how the step reaches the rest of the run (hps_train_dist): &local,
     * one process's (train_local.c), unless hps_trainer_set_dist gave
     * others; remote_rows copied from them for the lookups' hot path */
    hps_train_dist local;
    const hps_train_dist *hooks;
    int remote_rows;
    /* with remote_rows: the local rows each load touched (per layer, each
     * row once: mark[l][row] == load_id), and uses[l][row] the load's
     * lookups of it, which the fetch passes on (a shard's cache counts them) */
    int64_t **touched, *n_touched, *cap_touched;
    uint32_t **mark, **uses, load_id;
    int64_t *cap_mark;
};

/* Cuts rows [lo, hi) of b into micro-batches and loads them (keys become
 * table rows), each micro-batch's loss weighted by its part of `total` rows;
 * returns how many, or -1 when a table is full. */
int train_load_micro(hps_trainer *t, const hps_batch *b, int lo, int hi, int total, hps_error *err);
/* The same for n slices [lo[i], hi[i]) of b, each cut into micro-batches
 * (a later stage's load: its partners' slices, hps_train_dist.up_slices). */
int train_load_slices(hps_trainer *t, const hps_batch *b, int n, const int *lo, const int *hi, int total,
                      hps_error *err);

/* Every row on the device copied to its host table: before the host tables
 * are read (checkpoints, export). */
void train_rows_sync(hps_trainer *t);

/* train_local.c: one process's hooks, into t->local */
void train_local_hooks(hps_trainer *t);

/* train_metrics.c */
void train_metrics_start(hps_trainer *t);
void train_metrics_step(hps_trainer *t, int force);
void train_metrics_eval(hps_trainer *t);
void train_metrics_epoch(hps_trainer *t); /* with device rows: their counts at an epoch's end */
void train_metrics_summary(hps_trainer *t);
/* A day continued on tables that live elsewhere (parameter servers): the
 * rows they expired, said as one process says its own (train_say_expired). */
void train_metrics_day(hps_trainer *t);
void train_say_expired(const hps_model *m, int layer, uint64_t day, int64_t gone, int expire_after_days);
void train_progress(hps_trainer *t, hps_source *src, int final);

/* ---- safetensors, written (train_ckpt.c) and patched (train_delta.c) ------- */

/* One tensor of an export: its name, dtype, shape and bytes (host memory). */
typedef struct {
    char name[160];
    const char *dtype; /* "F32" or "I64" */
    int64_t shape[2];
    int dims;
    void *data;
    size_t bytes;
    int owned; /* data was allocated for this tensor */
} train_tensor;

/* --steps of a continued day counts the day's steps: from day_start. */
void train_day_steps(hps_trainer *t);
/* The tables' lookups so far: the next epoch record's admitted share counts from here. */
void train_metrics_mark_epoch(hps_trainer *t);

void train_add_tensor(train_tensor **ts, int *n, const char *name, const char *dtype, int dims, int64_t d0,
                      int64_t d1, void *data, size_t bytes);
void train_tensors_free(train_tensor *ts, int n);
/* The safetensors bytes of ts (in that order; meta as __metadata__) to f;
 * sum: their SHA-256. */
int train_safetensors_put(FILE *f, const train_tensor *ts, int n, json_t *meta, unsigned char sum[32]);
/* ... to path, as an export is written: atomically, with PATH.sha256 beside
 * a regular file, read back. */
int train_safetensors_write(const char *path, const train_tensor *ts, int n, json_t *meta, hps_error *err);

/* Little-endian u64 of checkpoint headers and safetensors lengths, whatever
 * the host's order (train_ckpt.c, train_delta.c). */
static inline uint64_t train_get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
