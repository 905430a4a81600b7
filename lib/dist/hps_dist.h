/* hps_dist: hps-train across ranks of Open MPI (hps-train(1), DISTRIBUTED).
 *
 * The same binary runs alone or as one rank under mpirun.  Each rank takes
 * the role the plan gives it:
 *   worker   trains its share of every batch, sums dense gradients with
 *            the other workers (MPI_Allreduce) and fetches/pushes the
 *            embedding rows it touches from/to the servers; when the plan's
 *            workers name several stages, a worker runs its stage's layers
 *            only: the trainer's pipeline, whose boundary activations and
 *            their gradients go to the next and previous stages' workers
 *            through this module's link (dist_stage.c)
 *   server   owns the embedding rows routed to it, server = mix64(key) %
 *            servers over its stage's servers where the plan gives each
 *            stage its own (else over all), and applies the summed sparse
 *            AdaGrad updates once all workers pushed a step (synchronous
 *            training); it builds the tables of the layers routed to it
 *            and nothing else of the model; a plan for a model without
 *            embedding layers has none (workers only)
 * A worker reaches the job only through hps_train_dist (hps_train.h); this
 * module calls the trainer only through hps_train.h.
 * Workers' shares of a batch are re-balanced from measured compute times
 * (dist_rebalance.c).  Checkpoints are per rank, committed together.
 */
#ifndef HPS_DIST_H
#define HPS_DIST_H

#include "plan/hps_plan_file.h"
#include "train/hps_train.h"

#define HPS_DIST_MAX_RANKS 256

typedef struct {
    int slow_rank;      /* --slowdown RANK=FACTOR (test builds only); -1: none */
    double slow_factor;
    int rebalance;      /* 0: keep the plan's shares */
} hps_dist_opts;

typedef struct hps_dist hps_dist;

/* 1 when this process is a rank of an mpirun job of more than one rank:
 * one process alone never initialises MPI (no singleton start-up). */
int hps_dist_launched(void);

/* Under mpirun (hps_dist_launched): initialises MPI and takes this rank's
 * role from the plan file; NULL with err (exit 2) when the job's rank count
 * does not fit the plan.  After a failure call hps_dist_end(NULL) all the
 * same.  Alone: a job of one process, MPI never started, the lead and only
 * worker, whose calls below return at once (its trainer keeps its own
 * hooks, train_local.c). */
hps_dist *hps_dist_start(const char *plan_path, const hps_dist_opts *o, hps_error *err);
/* This rank (d may be NULL after a failed start: the world rank, or 0). */
int hps_dist_rank(const hps_dist *d);
int hps_dist_is_server(const hps_dist *d);
/* The lead worker (lowest worker rank) reports: metrics, summary, eval. */
int hps_dist_is_lead(const hps_dist *d);

/* Stages among the workers (1: every worker runs all layers). */
int hps_dist_stages(const hps_dist *d);
/* The model fits the roles: a plan without servers has no embedding layer
 * to serve; with stages on different ranks, the plan's layer ranges fit the
 * workers' stages (table layers in any of them).  Every rank finds
 * the same answer.  eval: the lead evaluates after each epoch (--eval). */
int hps_dist_check_stages(hps_dist *d, const hps_model *m, const plan_file *p, int eval,
                          hps_error *err);
/* A worker: hooks the trainer's steps, loads and checkpoints. */
void hps_dist_attach(hps_dist *d, hps_trainer *t, const hps_model *m, const hps_train_opts *o);
/* A worker after training: tells the servers it is done, then the job's
 * statistics are gathered and the lead writes them to the metrics. */
int hps_dist_finish(hps_dist *d, hps_trainer *t, hps_error *err);
/* A worker after training, with --export: the lead gets the whole model,
 * every stage's weights and every server's rows (all workers call it). */
int hps_dist_gather_model(hps_dist *d, hps_trainer *t, hps_error *err);
/* A server: builds its tables (and nothing else of the model), serves rows
 * and applies updates until every worker is done. */
int hps_dist_serve(hps_dist *d, const hps_model *m, const plan_file *plan,
                   const hps_train_opts *o, hps_error *err);

/* hps-profile's exchange probe (hps-profile(5), "exchange"): `steps`
 * steps (after 2 of warm-up) of batches from src, a worker and a server of
 * the model in this process, MPI not started; per step the rows the server
 * served, the bytes both sent, and the worker's and the server's ms.  A
 * build without Open MPI has no such code: json null. */
json_t *hps_dist_probe_exchange(const hps_model *m, hps_source *src, int batch, int threads, int steps,
                                hps_error *err);

/* Ends the job on an error: the message, then MPI_Abort so no rank waits. */
void hps_dist_abort(hps_dist *d, const hps_error *err);
/* MPI_Finalize; frees d (may be NULL). */
void hps_dist_end(hps_dist *d);

/* The re-balancing law (dist_rebalance.c), pure functions for tests:
 * speeds (rows/s, an average over steps) move each share towards its part
 * of the total speed by `damping`, no share below `min_share`, sum 1. */
void hps_dist_rebalance(double *share, double *speed, const double *rows, const double *secs,
                        int workers, double damping, double min_share);
/* Rows [lo, hi) of an n-row batch for worker w: disjoint, covering [0, n). */
void hps_dist_slice(const double *share, int workers, int w, int n, int *lo, int *hi);
/* The server of a key (the routing rule). */
int hps_dist_route(uint64_t key, int servers);

#endif
