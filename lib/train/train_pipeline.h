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
