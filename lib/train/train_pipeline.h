/* train_pipeline: a plan's stages as a pipeline of micro-batches.
 *
 * One thread per stage.  A batch is cut into M micro-batches, each with its
 * own executor (activations) over the shared parameters.  Stage s runs its
 * layers forward on micro-batch m, then hands m to stage s+1; the last stage
 * runs the loss and turns m around; backward flows back the same way.  A
 * stage takes backward work before forward work (1F1B), so activations do not
 * pile up, and every queue holds at most M items: it is bounded by
 * construction.  Each layer's gradients are touched by one thread only, in
 * micro-batch order, so a run is deterministic whatever the scheduling.
 *
 * Stages may run in other processes (hps-train(1), DISTRIBUTED): then this
 * process runs one stage, and the boundary tensors at its cuts go through a
 * link (lib/dist's).  Stage 0 loads every micro-batch, runs its layers and
 * sends each one's activations (with the labels) down before it waits for the
 * first gradient, so the next stage works on micro-batch m while stage 0
 * computes m + 1; a later stage takes its upstream partners in order and
 * their micro-batches in order, so a run is deterministic.  What crosses a
 * cut is the model's rule, hps_model_cut_widths.
 */
#ifndef HPS_TRAIN_PIPELINE_H
#define HPS_TRAIN_PIPELINE_H

#include "net/hps_net.h"

typedef struct {
    int first, end; /* layers [first, end) */
} hps_stage_range;

typedef struct hps_pipeline hps_pipeline;

/* nets: M executors sharing parameters; threads: kernel threads per stage. */
hps_pipeline *hps_pipeline_create(hps_net **nets, int M, const hps_stage_range *stages, int S,
                                  int threads);
void hps_pipeline_free(hps_pipeline *p);

/* Runs forward and backward of micro-batches 0..n-1 (n <= M) through every
 * stage; returns when all are done.  Losses are read from the nets. */
void hps_pipeline_run(hps_pipeline *p, int n);

/* How a stage reaches the stages in other processes: messages of a kind to
 * partner `to` of the stage above (up = 1) or of the next stage (up = 0, to
 * 0).  send may return before the bytes left (p stays valid until flush);
 * recv returns a buffer the caller frees, or NULL with err. */
enum { HPS_LINK_COUNT, HPS_LINK_ACT, HPS_LINK_GRAD };
typedef struct {
    void *ctx;
    int stage;  /* the one stage this process runs */
    int n_up;   /* processes of the stage above that send to this one */
    int down;   /* 1: a next stage exists, in another process */
    int (*send)(void *ctx, int up, int to, int kind, const void *p, size_t n, hps_error *err);
    char *(*recv)(void *ctx, int up, int from, int kind, size_t *n, hps_error *err);
    int (*flush)(void *ctx, hps_error *err);
} hps_stage_link;

/* From now on a training step (hps_pipeline_run_linked) runs link->stage
 * alone; the others are remote.  Forward-only runs stay local. */
void hps_pipeline_set_link(hps_pipeline *p, const hps_stage_link *link);
/* One step with a link: stage 0 runs micro-batches 0..n-1 (loaded here) and
 * sends them down; a later stage runs what its partners above send, each
 * micro-batch's loss weighted by its part of `total` rows, into nets 0..n-1
 * in the order they come when it loaded their keys (n > 0: it has table
 * layers; n = 0: all into nets[0]).  *loss: this
 * process's part of the batch loss (the last stage's), *rows: the samples it
 * ran; *wait_s: the time it waited for other processes. */
int hps_pipeline_run_linked(hps_pipeline *p, int n, int total, double *loss, int *rows,
                            double *wait_s, hps_error *err);

/* Kernel threads each stage uses from its next work item on. */
void hps_pipeline_set_threads(hps_pipeline *p, int threads);

/* Forward only, for evaluation: micro-batches 0..n-1. */
void hps_pipeline_forward(hps_pipeline *p, int n);

/* What each stage and layer spent, accumulated since create (seconds), and
 * the deepest queue seen per stage. */
typedef struct {
    double busy_s;      /* the stage thread computing */
    double idle_s;      /* waiting for work while a batch was in flight */
    int max_queue;
} hps_stage_stats;

const hps_stage_stats *hps_pipeline_stats(const hps_pipeline *p, int stage);
/* Per layer: seconds of the last run's forward and backward, summed over its
 * micro-batches (the probe reads them after each step). */
double hps_pipeline_layer_fwd(const hps_pipeline *p, int layer);
double hps_pipeline_layer_bwd(const hps_pipeline *p, int layer);

#endif
