/* The state of a distributed run, shared by lib/dist's files only. */
#ifndef HPS_DIST_INTERNAL_H
#define HPS_DIST_INTERNAL_H

#include <mpi.h>

#include "dist/hps_dist.h"
#include "train/hps_train.h"
#include "train/train_rows.h"

/* Message tags between workers and servers. */
/* TAG_PEEK: a fetch during evaluation, which creates no rows */
/* TAG_DUMP: the lead asks for every row a server holds (--export) */
enum { TAG_FETCH = 11, TAG_ROWS, TAG_PUSH, TAG_ACK, TAG_SAVE, TAG_DONE, TAG_PEEK, TAG_DUMP };
/* TAG_STATS: the lead asks a server for its tables' figures (the metrics),
 * and the server answers with the same tag */
enum { TAG_STATS = 40 };
/* A cache in front of the servers (dist_shard.c): TAG_STATE_GET asks for
 * rows' whole state (weights then accumulators, answered with TAG_ROWS);
 * TAG_STATE_PUT stores it, the server applying nothing, and is answered
 * with an empty TAG_ROWS once stored */
enum { TAG_STATE_GET = 41, TAG_STATE_PUT };

typedef enum { ROLE_WORKER, ROLE_SERVER } dist_role_kind;

typedef struct {
    dist_role_kind kind;
    int index;          /* among workers, or among servers */
    int stage;          /* workers: the plan's stage */
    char type[HPS_NAME_MAX];
    double share;       /* workers: the plan's share */
} dist_role;

/* What a request or push entry names: a row of a layer's table. */
typedef hps_row_key dist_entry;

typedef struct {
    char *buf;
    size_t len, cap;
} dist_buf;

/* A server rank's state: its tables, and where the step stands. */
typedef struct {
    const hps_model *m;
    hps_train_opts o;
    char plan_digest[72];
    hps_table **tables;       /* per layer; NULL but for embedding layers */
    hps_sparse_grad **merged; /* per layer: the workers' gradients summed */
    uint64_t step;
    uint64_t day;             /* the tables' day (hps-train(1), DAY BY DAY) */
    hps_table_stats *stats;   /* per layer: the tables' figures when the last step was applied */
} dist_server;

/* Where a server's step stands: the pushes received, the workers done. */
typedef struct {
    char *push[HPS_DIST_MAX_RANKS];
    size_t len[HPS_DIST_MAX_RANKS];
    int pushed, done;
} dist_server_state;

/* Counters each rank keeps; the lead gathers them at the end as they are,
 * DIST_STATS_N doubles a rank.  fetch_s and push_s: a worker's two round
 * trips a step to its servers (the rows, then the gradients until
 * acknowledged); serve_s and apply_s: a server's gathering of the rows
 * asked and applying of the step; cores: the cores the rank may run on,
 * after unbind_default. */
typedef struct {
    double bytes_sent, bytes_cross_node, rows_served, steps, compute_s, wait_s, fetch_s, samples;
    double push_s, serve_s, apply_s, cores;
} dist_stats;
#define DIST_STATS_N 12
_Static_assert(sizeof(dist_stats) == DIST_STATS_N * sizeof(double), "dist_stats is gathered as doubles");

typedef struct dist_shard dist_shard;

struct hps_dist {
    hps_dist_opts o;
    int alone;                    /* one process, MPI never started (hps_dist_start) */
    int rank, size, workers, servers;
    dist_role roles[HPS_DIST_MAX_RANKS];
    int worker_rank[HPS_DIST_MAX_RANKS], server_rank[HPS_DIST_MAX_RANKS];
    int node[HPS_DIST_MAX_RANKS]; /* a number per host name, for cross-node bytes */
    char host[HPS_DIST_MAX_RANKS][MPI_MAX_PROCESSOR_NAME]; /* each rank's host name */
    /* where each layer's rows live (dist_roles.c, read_routing): servers
     * [route_first, route_first + route_n); route_n 0: all of them.
     * by_stage: each stage's over its own servers, as the plan sized them */
    int by_stage, route_first[HPS_MAX_LAYERS], route_n[HPS_MAX_LAYERS];
    double predicted_bytes;       /* the plan's network.bytes_per_step (0: none) */
    double predicted_cross;       /* the plan's placement.cross_node_bytes_per_step (-1: none) */
    char plan_node[HPS_DIST_MAX_RANKS][HPS_NAME_MAX]; /* where the plan places each rank ("": nowhere) */
    MPI_Comm wcomm;               /* the workers */
    const dist_role *me;
    hps_train_dist hooks;
    /* worker: shares, speeds, this step's request and push buffers per server */
    double share[HPS_DIST_MAX_RANKS], speed[HPS_DIST_MAX_RANKS];
    double last_compute[HPS_DIST_MAX_RANKS];
    int slice_rows;              /* rows of this step's slice */
    double critical_s, idle_s;   /* sums over steps: slowest worker, others' waits */
    int yields;                  /* Open MPI's mpi_yield_when_idle as this rank runs it (-1: unknown) */
    double stage_busy[HPS_DIST_MAX_RANKS]; /* stages across ranks: sums of each one's slowest */
    dist_buf *req, *push;
    int64_t **req_rows;          /* per server: where each request entry's values go */
    int64_t *n_req_rows, *cap_req_rows;
    /* rows: hbm: every worker holds a replica of the rows (no servers for
     * them); a step's gradients are exchanged among the workers */
    int replicas;
    dist_buf xsend;
    char *xrecv;
    size_t cap_xrecv;
    int64_t xend[HPS_DIST_MAX_RANKS], cap_xrows;
    hps_row_key *xkeys;
    float *xgrad;
    size_t cap_xgrad;
    /* rows: hbm sharded over the workers (dist_shard.c): each holds the
     * rows hps_dist_route(key, workers) gives it */
    int shards;
    int64_t shard_capacity;      /* rows a unit's device holds (INT64_MAX: hbm, all of its shard) */
    int shard_home;              /* rows: cache in front of the plan's servers: they hold the rows */
    int shard_stage;             /* the stage whose rows the shards hold */
    /* every unit's device rows' counts summed: at each step's dense
     * reduction (reduce_step), which carries them, and exactly at the
     * records that sum them (rows_totals) */
    train_rows_stats device_rows;
    char plan_digest[72];        /* the plan's, which a shard's checkpoint records */
    dist_shard *shard;
    dist_stats st;
    /* stages across ranks (dist_stage.c): n_stages > 1 */
    int n_stages, stage_n[HPS_TRAIN_MAX_STAGES];
    int stage_w[HPS_TRAIN_MAX_STAGES][HPS_DIST_MAX_RANKS]; /* worker indices per stage */
    hps_stage_range range[HPS_TRAIN_MAX_STAGES];           /* their layers */
    MPI_Comm scomm;              /* the workers of this rank's stage */
    int sidx;                    /* index in the stage */
    int eval;                    /* the lead evaluates after every epoch (--eval) */
    int down_rank, n_up, up_rank[HPS_DIST_MAX_RANKS]; /* partners: next stage, previous */
    hps_stage_link link;         /* the trainer pipeline's way to them */
    MPI_Request *pending;        /* link messages not yet flushed */
    int n_pending, cap_pending;
    char fail_msg[4096];         /* the roles of all ranks, said at the start */
    double t_start;
    const hps_model *m;          /* the model (a server's too); workers: where checkpoints go */
    const char *ckpt_dir;
    const char *continue_from;   /* --continue-from */
    int resume;                  /* --resume */
    /* hps-profile's probe (dist_probe.c): a worker and a server in one
     * process, MPI never started; messages to the server are handled at
     * once, its answer waits in loop_msg for the worker's receive */
    dist_server *loop;
    dist_server_state *loop_state;
    char *loop_msg;
    size_t loop_len;
};

/* dist_roles.c */
int dist_read_roles(hps_dist *d, const char *plan_path, hps_error *err);
const char *dist_role_name(const hps_dist *d, int rank, char *buf, size_t n);
/* A plan without servers (workers only) for a model with embedding layers,
 * whose rows would have nowhere to live: an error; so is, where each stage
 * has servers of its own, a stage with a table layer and none. */
int dist_check_servers(const hps_dist *d, const hps_model *m, const plan_file *p, hps_error *err);
/* Device rows (rows: hbm or cache) in a plan of several stages: the lead's
 * stage alone may keep a table layer's rows there (its replicas, or its
 * shards gathered, are what the lead evaluates and exports). */
int dist_check_device_rows(const hps_dist *d, const hps_model *m, const plan_file *p, hps_error *err);
/* The server of layer's row `key` (the routing rule over the layer's
 * servers), and whether server s holds any of layer's rows. */
int dist_server_of(const hps_dist *d, int layer, uint64_t key);
int dist_serves(const hps_dist *d, int s, int layer);

/* dist_watch.c: a rank that dies or cannot be reached is named with its role
 * and host, and every rank stops */
int dist_watch(hps_dist *d, hps_error *err);
void dist_watch_leave(void); /* this rank leaves on its own: do not name it */
void dist_watch_end(void);   /* at the end, before MPI_Finalize */

/* dist_stage.c */
int dist_stages_setup(hps_dist *d, const char *plan_name, hps_error *err);
void dist_stages_place(hps_dist *d);
void dist_stages_hook(hps_dist *d, hps_train_dist *h);
void dist_stages_free(hps_dist *d);
/* A later stage with table layers: the rows [lo, hi) of an n-row batch that
 * cover its partners' slices (what it reads); 0 elsewhere. */
int dist_stages_up_hull(const hps_dist *d, int n, int *lo, int *hi);
/* The lead's params (n floats, host memory) get the weights of the stages it
 * does not train (all workers call it). */
int dist_stages_gather_params(hps_dist *d, float *params, size_t n, hps_error *err);

/* dist_worker.c: the rows [lo, hi) of an n-row batch that worker `worker`
 * slices (none: lo = hi = 0, a later stage's worker) */
void dist_slice_of(const hps_dist *d, int worker, int n, int *lo, int *hi);

/* dist_comm.c */
void dist_buf_add(dist_buf *b, const void *p, size_t n);
void dist_send(hps_dist *d, const void *p, size_t n, int to, int tag);
void dist_isend(hps_dist *d, const void *p, size_t n, int to, int tag, MPI_Request *r);
/* Receives a message of unknown size from `from` (MPI_ANY_SOURCE allowed). */
char *dist_recv(int from, int tag, size_t *n, int *source, int *got_tag);
/* MPI_Waitall, nothing in the probe's loopback. */
void dist_waitall(hps_dist *d, int n, MPI_Request *r);
/* The workers a rank's device rows are exchanged among: with stages across
 * ranks its own stage's (scomm: another stage holds none of its rows), else
 * all of them; n of them, this rank the me-th, the i-th worker
 * dist_group_worker(g, i). */
typedef struct {
    MPI_Comm comm;
    int n, me;
    const int *w; /* their worker indices (NULL: 0 .. n-1) */
} dist_group;
dist_group dist_rows_group(const hps_dist *d);
static inline int dist_group_worker(const dist_group *g, int i) { return g->w ? g->w[i] : i; }
/* Among the workers of dist_rows_group (every one calls it): parts[i] to
 * its i-th; *in (grown to *cap) gets the parts to this one in their order,
 * ends[i] the end of the i-th's bytes there. */
int dist_alltoall(hps_dist *d, const dist_buf *parts, char **in, size_t *cap, int64_t *ends, hps_error *err);
/* The probe's loopback: d's worker and server in this process (NULL: off). */
void dist_loop(hps_dist *d);

/* dist_server.c: the job's counters, and each server's rows per layer
 * (sv: this rank's server, or NULL), gathered at the lead (all ranks call it). */
void dist_gather_stats(hps_dist *d, hps_trainer *t, const dist_server *sv);
/* Server s's tables (one per table layer whose rows it holds,
 * dist_serves), and one message handled: msg (freed here) from rank
 * `from` with its tag. */
void dist_server_create(dist_server *sv, const hps_dist *d, int s, const hps_model *m, const plan_file *plan,
                        const hps_train_opts *o);
void dist_server_free(dist_server *sv);
int dist_server_handle(hps_dist *d, dist_server *sv, dist_server_state *s, char *msg, size_t n, int from,
                       int tag, hps_error *err);
void dist_server_state_free(hps_dist *d, dist_server_state *s);
/* A worker's table_stats hook (hps_train_dist): the lead asks every server
 * for its tables' figures and sums them per layer; 0 elsewhere. */
int dist_table_stats(void *ctx, hps_table_stats *per_layer);
/* Every row of tables (per layer, NULL but for embedding layers) into b,
 * as (layer, slot, key) then dim floats: a server's dump, a replica's. */
void dist_pack_rows(const hps_model *m, hps_table *const *tables, dist_buf *b);

/* dist_shard.c: a worker's shard of the rows, its hooks (fetch_rows,
 * update_rows, step_end, save, resume), and every shard's rows gathered at
 * the lead (all workers call it; NULL elsewhere) */
void dist_shard_create(hps_dist *d, hps_trainer *t, const hps_train_opts *o);
void dist_shard_hook(hps_dist *d, hps_train_dist *h);
void dist_shard_free(hps_dist *d);
int64_t dist_shard_rows(const hps_dist *d); /* the rows this worker's shard holds */
/* A cache in front of servers: every cached row written back to them, and
 * every worker past that (all workers call it), before the servers' rows
 * are read or saved. */
int dist_shard_write_back(hps_dist *d, hps_error *err);
/* This unit's own device rows' statistics (summed over the units: d->device_rows). */
const train_rows_stats *dist_shard_mine(const hps_dist *d);
char *dist_shard_gather(hps_dist *d, size_t *n);
/* The lead, before evaluating: a copy of every shard's rows, which its
 * evaluation reads (all workers call it). */
int dist_shard_gather_eval(hps_dist *d, hps_error *err);

/* dist_ckpt.c: a worker's through the trainer's hooks, a server's of its tables */
int dist_save(void *ctx, hps_trainer *t, uint64_t step, hps_error *err);
int dist_resume(void *ctx, hps_trainer *t, int *found, hps_error *err);
int dist_save_server(hps_dist *d, dist_server *sv, hps_error *err);
int dist_resume_server(hps_dist *d, dist_server *sv, int *found, hps_error *err);
/* --continue-from DIR, an mpirun job's checkpoints: this rank's file of its
 * committed step begins a next day (a worker's hook; a server's tables). */
/* --continue-from DIR: this rank's file of DIR's committed step (DIR made by
 * an mpirun job of this plan's ranks). */
int dist_day_file(hps_dist *d, const char *from, char *path, size_t n, hps_error *err);
int dist_continue(void *ctx, hps_trainer *t, hps_error *err);
int dist_continue_server(hps_dist *d, dist_server *sv, hps_error *err);

#endif
