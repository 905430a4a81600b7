/* The trainer's state, shared by the train_*.c files and nobody else. */
#ifndef HPS_TRAIN_INTERNAL_H
#define HPS_TRAIN_INTERNAL_H

#include <stdio.h>

#include "train/hps_train.h"

/* What a distributed run changes in a step (lib/dist fills it in):
 *   slice     the rows [lo, hi) of an n-row batch that this worker trains
 *   fetch     after a load: the touched rows of the local tables (trainer's
 *             touched lists) get their current values from the servers
 *   reduce    after backward: dense gradients and the loss summed over the
 *             workers (compute_s: this worker's compute time in the step)
 *   push      a layer's merged sparse gradient goes to the servers instead
 *             of a local AdaGrad update
 *   step_end  waits until the servers applied the step
 *   save, resume   checkpoints of all ranks, committed together
 *   metrics   an object for the step records (shares, times)
 *   compute   NULL, or the step's compute when this rank runs one stage of
 *             the plan (stages across ranks): loads rows [lo, hi) if the
 *             stage reads data, zeroes the dense gradients, runs forward and
 *             backward with the other stages' ranks, sets *loss (this rank's
 *             part of the batch loss) and *fetch_s; returns the micro-batches
 *             loaded here (their sparse gradients are pushed), or -1
 *   before_eval  NULL, or called on every worker at the end of each epoch
 *             when the lead evaluates: brings it the weights it lacks (stages
 *             across ranks)
 *   stage_busy   NULL, or the seconds a stage computed so far (each step its
 *             slowest worker), when the stages run on other ranks than this
 *             one's pipeline
 * evaluates: 0 on workers that leave --eval to the lead worker. */
struct hps_train_dist {
    void *ctx;
    void (*slice)(void *ctx, int n, int *lo, int *hi);
    int (*fetch)(void *ctx, hps_trainer *t, hps_error *err);
    int (*reduce)(void *ctx, hps_trainer *t, double *loss, double compute_s, hps_error *err);
    int (*push)(void *ctx, hps_trainer *t, int layer, const hps_sparse_grad *g, hps_error *err);
    int (*step_end)(void *ctx, hps_trainer *t, hps_error *err);
    int (*save)(void *ctx, hps_trainer *t, hps_error *err);
    int (*resume)(void *ctx, hps_trainer *t, int *found, hps_error *err);
    json_t *(*metrics)(void *ctx);
    int (*compute)(void *ctx, hps_trainer *t, const hps_batch *b, int lo, int hi, double *loss,
                   double *fetch_s, hps_error *err);
    int (*before_eval)(void *ctx, hps_trainer *t, hps_error *err);
    double (*stage_busy)(void *ctx, int stage);
    int evaluates;
};

struct hps_trainer {
    const hps_model *m;
    hps_train_plan plan;
    hps_train_opts o;
    const hps_backend *be;
    int B, M, cap_micro, threads;  /* batch, micro-batches, samples each, threads per stage */
    hps_net *owner, **nets;        /* nets[0] == owner: parameters live there */
    hps_table **tables;            /* per layer; NULL but for embedding layers */
    hps_sparse_grad **merged;      /* per layer: micro-batch gradients summed */
    hps_sparse_grad **micro_grads; /* M: one layer's micro-batch gradients, to merge */
    int evaluating;                /* lookups read only: no new rows, unseen keys read zeros */
    hps_pipeline *pipe;
    hps_batch *batch;
    /* where training stands: what a checkpoint saves */
    uint64_t step, epoch, epoch_row, samples;
    uint64_t kill_at_step;         /* test build: HPS_TRAIN_KILL_AT_STEP: SIGKILL itself there */
    /* lookups that failed inside the row map */
    hps_error map_err;
    int map_failed;
    /* reporting */
    hps_train_summary sum;
    double samples_run;            /* samples trained by this process (resumes start at 0) */
    FILE *metrics;
    int metrics_errno; /* the first failed write: reported at the end */
    double t_start, t_last, t_bar;
    uint64_t step_last;
    double samples_last;
    double eval_s_last;            /* sum.eval_seconds at the last step record */
    double progress_start;         /* run fraction at the first progress line (NAN before) */
    double busy_last[HPS_TRAIN_MAX_STAGES];
    double busy_start[HPS_TRAIN_MAX_STAGES]; /* at the start record: the summary's per-stage ms */
    uint64_t step_start;
    /* distributed runs: the hooks, and the local rows each load touched
     * (per layer, each row once: mark[l][row] == load_id) */
    const hps_train_dist *dist;
    int64_t **touched, *n_touched, *cap_touched;
    uint32_t **mark, load_id;
    int64_t *cap_mark;
};

int hps_trainer_step(hps_trainer *t, const hps_batch *b, double *loss, hps_error *err);
/* Cuts rows [lo, hi) of b into micro-batches and loads them (keys become
 * table rows), each micro-batch's loss weighted by its part of `total` rows;
 * returns how many, or -1 when a table is full. */
int train_load_micro(hps_trainer *t, const hps_batch *b, int lo, int hi, int total, hps_error *err);

/* train_metrics.c */
void train_metrics_start(hps_trainer *t);
void train_metrics_step(hps_trainer *t, int force);
void train_metrics_eval(hps_trainer *t);
void train_metrics_summary(hps_trainer *t);
void train_progress(hps_trainer *t, hps_source *src, int final);

#endif
