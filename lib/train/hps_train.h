/* hps_train: executes a plan (hps-train(1)).
 *
 * The pieces:
 *   plan       the plan file (lib/plan's plan_file) checked against its
 *              model, or one stage without a plan file
 *   source     where batches come from (shards, or synthetic for tests)
 *   table      parameter-server embedding tables (train_table.h)
 *   pipeline   the stages as threads over micro-batches (train_pipeline.h)
 *   trainer    the loop: batches, updates, metrics, eval, checkpoints
 *   export     safetensors
 */
#ifndef HPS_TRAIN_H
#define HPS_TRAIN_H

#include <jansson.h>

#include "net/hps_net.h"
#include "plan/hps_plan_file.h"
#include "train/train_pipeline.h"
#include "train/train_table.h"

/* ---- the plan ------------------------------------------------------------- */

/* hps-train runs the plan file as lib/plan reads it (plan_file); the trainer
 * keeps a pointer to it, so it lives until hps_trainer_free. */
#define HPS_TRAIN_MAX_STAGES PLAN_MAX_STAGES
#define HPS_TRAIN_MAX_SLICES 256 /* a later stage's partners' slices (up_slices) */
#define HPS_TRAIN_MAX_ADMIT_SLOTS 64 /* slots with a threshold of their own */

/* Reads a plan (hps-plan(5)) and checks it against the model: its digest,
 * layers and stages; batch and n_layers default to the model's.  Free it
 * with plan_file_free. */
int hps_train_plan_load(const char *path, const hps_model *m, plan_file *plan, hps_error *err);
/* One stage of all layers on the CPU, for runs without a plan file (name
 * NULL; nothing to free). */
void hps_train_plan_single(const hps_model *m, plan_file *plan);

/* ---- where batches come from ---------------------------------------------- */

typedef struct hps_source hps_source;
struct hps_source {
    /* Fills b with up to max samples; 0 at the end of the epoch, -1 on error. */
    int (*read)(hps_source *s, hps_batch *b, int max, hps_error *err);
    /* The same, decoding only rows [lo, hi) of the batch (the others: label
     * 0, no keys, dense as it was); NULL where a source cannot. */
    int (*read_part)(hps_source *s, hps_batch *b, int max, int lo, int hi, hps_error *err);
    int (*seek)(hps_source *s, uint64_t row, hps_error *err); /* row of the epoch */
    uint64_t (*tell)(const hps_source *s);
    uint64_t (*rows)(const hps_source *s); /* per epoch */
    void (*close)(hps_source *s);
    int n_dense, n_slots, weighted, classes;
    const char *name;
    const char *digest; /* what identifies the data (the SHA-256 of its manifest.json), or NULL */
    /* per slot: its distinct keys (the manifest's estimate, every row of
     * the data), or NULL where the source does not know them */
    const double *slot_distinct;
};

/* A shard directory's training shards, in manifest order (hps-shard(5));
 * with holdout, its holdout shards, or its training shards when it has none
 * (a directory sharded for evaluation). */
hps_source *hps_source_shards(const char *dir, int holdout, hps_error *err);
/* inner's rows, read into memory now (up to max_bytes): every epoch reads
 * them there (hps-train --in-memory); closing it closes inner.  Where they
 * need more, inner itself, back at its start; NULL on a read's error (inner
 * closed). */
hps_source *hps_source_in_memory(hps_source *inner, size_t max_bytes, hps_error *err);
/* Endless synthetic batches of the model's schema, those hps-profile times
 * the layers on (hps_batch_synth, seeds seed, seed + 1, ...): what it times
 * the engine on too. */
hps_source *hps_source_profile_batches(const hps_model *m, uint64_t seed);
/* Checks that the source carries the model's schema; names what differs. */
int hps_source_check(const hps_source *s, const hps_model *m, hps_error *err);

/* ---- the trainer ----------------------------------------------------------- */

typedef struct {
    int epochs;
    long max_steps;          /* stop after this many steps in all (0: no limit) */
    uint64_t seed;
    int threads;             /* kernel threads per stage (0: all cores / stages) */
    int micro_batches;       /* 0: the plan's, else one per stage */
    size_t max_table_bytes;  /* per embedding layer; 0: no cap */
    hps_table_policy table_policy;
    int admit_after;         /* a key gets a row on its Nth lookup (<= 1: at once) */
    /* per slot (model slot index): its own threshold instead of admit_after
     * (--admit-after SLOT=N,...: hps_train_admit_slots reads admit_spec) */
    int n_admit_slots;
    struct {
        int slot, after;
    } admit_slot[HPS_TRAIN_MAX_ADMIT_SLOTS];
    const char *admit_spec;
    int expire_after_days;   /* a new day removes rows untouched for as many days (0: never) */
    int rowwise_adagrad;     /* the tables' AdaGrad: one accumulator a row, not one an element */
    hps_row_dtype row_dtype; /* how the tables store their rows' weights */
    int cpu_fallback;        /* run GPU stages on the CPU where no device exists */
    hps_optim optim;
    const char *ckpt_dir;
    long ckpt_every;         /* steps; 0: only at the end */
    int resume;
    const char *continue_from; /* a checkpoint file or directory: a new day on from it; NULL: none */
    const char *metrics_path; /* NDJSON; NULL: none */
    double metrics_interval;  /* seconds between step records */
    int progress;             /* a progress bar on stderr */
} hps_train_opts;

hps_train_opts hps_train_opts_default(void);
/* Whether any table admits (a threshold above 1, for all slots or one). */
int hps_train_admits(const hps_train_opts *o);
/* --admit-after's list, o->admit_spec (NULL: nothing to do): items N (the
 * default threshold) and SLOT=N (a slot of m by name), comma-separated,
 * into o; an error (exit status 2) names the item. */
int hps_train_admit_slots(const hps_model *m, hps_train_opts *o, hps_error *err);
/* The table options of o against the plan's tables (hps-train(1), TABLES):
 * each one given on the command line (a bit of `given`) must be the plan's,
 * else an error naming the option and the plan's value; one not given takes
 * the plan's.  A plan without tables (older, or written by hand) sets
 * nothing. */
#define HPS_TRAIN_GIVEN_ROW_DTYPE 1u
#define HPS_TRAIN_GIVEN_SPARSE_OPTIMIZER 2u
#define HPS_TRAIN_GIVEN_ADMIT_AFTER 4u
int hps_train_plan_tables(const plan_file *plan, hps_train_opts *o, unsigned given, hps_error *err);
/* Layer l's table as the run's options make it (cap, policy, seed,
 * admission, sparse optimizer, row type): one process's tables and a
 * parameter server's are made here alike. */
hps_table *hps_train_table_create(const hps_model *m, int l, const hps_train_opts *o);

typedef struct hps_trainer hps_trainer;

/* The trainer keeps pointers to m and plan, as to the model: both must
 * outlive it (hps_trainer_free). */
hps_trainer *hps_trainer_create(const hps_model *m, const plan_file *plan,
                                const hps_train_opts *o, hps_error *err);
void hps_trainer_free(hps_trainer *t);

/* Trains on src for the configured epochs (resuming when asked and a
 * checkpoint exists), evaluating on eval (may be NULL) after each epoch. */
int hps_trainer_run(hps_trainer *t, hps_source *src, hps_source *eval, hps_error *err);

/* Forward passes over a whole source: mean loss and AUC (binary) or accuracy
 * (multi-class). */
typedef struct {
    double loss, auc, accuracy;
    uint64_t rows;
} hps_eval_result;
int hps_trainer_eval(hps_trainer *t, hps_source *src, hps_eval_result *r, hps_error *err);

/* Runs `steps` training steps at each thread count 1..threads and returns a
 * profile document (hps-profile(5)) of what was measured. */
json_t *hps_trainer_probe(hps_trainer *t, hps_source *src, long steps, hps_error *err);
/* One training step on batch b (hps-profile's probes drive the trainer
 * step by step); *loss: the batch's. */
int hps_trainer_step(hps_trainer *t, const hps_batch *b, double *loss, hps_error *err);

/* The final state, for callers and tests. */
typedef struct {
    uint64_t steps, samples;
    int epochs_done;
    double last_loss, seconds, samples_per_s; /* samples_per_s: training, evaluation excluded */
    double eval_seconds;
    hps_eval_result eval;
    int have_eval;
    /* fidelity: the plan's figures beside this run's (predicted 0: unknown);
     * stage_ms: each stage's computing per batch over the whole run */
    double predicted_samples_per_s;
    /* which execution the prediction is for: "ranks" (under mpirun, the
     * exchanges with the servers priced) or "one process" (the tables in
     * this process: the plan's in-process figures) */
    const char *predicted_for;
    int n_stages;
    double stage_ms[HPS_TRAIN_MAX_STAGES], stage_predicted_ms[HPS_TRAIN_MAX_STAGES];
    /* --cpu-fallback ran the plan's GPU stages on the CPU: the prediction is
     * for the GPUs, no measure of the plan's error */
    int gpu_on_cpu;
    int stage_on_cpu[HPS_TRAIN_MAX_STAGES]; /* this stage is one of them */
    /* per step, ms: the wall time of training, what of it went to reading
     * the batch, and to the engine's work around the stages (loading rows,
     * the optimizers, waiting for servers and ranks) */
    double step_ms, read_ms, engine_ms;
} hps_train_summary;
const hps_train_summary *hps_trainer_summary(const hps_trainer *t);
int hps_trainer_batch(const hps_trainer *t); /* samples a step */
uint64_t hps_trainer_steps(const hps_trainer *t); /* steps trained so far, a resumed run's included */
const hps_backend *hps_trainer_backend(const hps_trainer *t); /* where its layers run */
/* Rows fetched into device memory so far (hps-train(1) ROWS: rows hbm or
 * cache), all stages: a cache's misses, hbm's new rows (0: no device rows). */
uint64_t hps_trainer_row_misses(const hps_trainer *t);
/* A measured figure against the plan's: measured / predicted - 1; NAN when
 * either is unknown (not positive). */
double hps_train_error(double measured, double predicted);
hps_table *hps_trainer_table(hps_trainer *t, int layer);
/* After rows written into hps_trainer_table's tables: the device's copies
 * of them (rows: hbm or cache) take their values. */
void hps_trainer_tables_written(hps_trainer *t);
/* One more record in the metrics (--metrics), if any; takes o. */
void hps_trainer_record(hps_trainer *t, json_t *o);

/* Dense parameters through host memory: n_params floats out of the trainer
 * (put = 0) or into it (put = 1). */
void hps_trainer_params(hps_trainer *t, float *host, int put);

/* ---- the rest of the run: one process, or a rank of many ------------------ */

/* An embedding row as the parameter servers know it. */
typedef struct {
    int32_t layer, slot;
    uint64_t key;
} hps_row_key;

/* Rows' gradients of several processes, in worker order: part w is
 * entries [end[w - 1], end[w]) (from 0), each a key and D floats. */
typedef struct {
    int parts;
    const int64_t *end;
    const hps_row_key *keys;
    const float *grad;
} hps_row_grads;

/* How the trainer reaches the rest of its run, in the trainer's terms only.
 * Every step calls every hook (llm.c's collectives: one code path); one
 * process is an implementation whose hooks return at once or act on its own
 * tables (train_local.c), a worker of a distributed run (lib/dist,
 * hps-train(1) DISTRIBUTED) another.
 *   slice        the rows [lo, hi) of an n-row batch that this process loads
 *   fetch_rows   the current values of n rows, dims back to back into out;
 *                lookups[i]: how many of the load's lookups row i stands for
 *                (where they are counted, they count as one process's);
 *                peek: evaluation, which creates no rows
 *   update_rows  a layer's sparse gradient, the sum of n (the micro-batches';
 *                sum: the caller's scratch for it, hps_table_grad_sum): applied
 *                to the rows where they live
 *   step_end     returns once the step's row updates are applied
 *   reduce_step  n dense gradients summed over the processes of this stage;
 *                the loss summed over all of them; rows and compute_s are this
 *                process's part of the step (rows trained, compute seconds),
 *                from which the shares of the batch are re-balanced
 *   link         NULL, or the boundary tensors to stages in other processes
 *                (train_pipeline.h): this process runs link->stage only,
 *                and loads, fetches and pushes its own table layers' rows
 *   up_slices    NULL, or for a later stage (link->stage > 0) with table
 *                layers: the rows [lo[i], hi[i]) of an n-row batch that
 *                stage 0's processes load and whose micro-batches reach this
 *                process, in the order they arrive; returns how many (at
 *                most HPS_TRAIN_MAX_SLICES).  slice then covers them all
 *   save         a checkpoint of the step (every rank's, committed together)
 *   resume       with --resume, this process's part of the latest checkpoint
 *                (*found: there was one); without, refuses a directory it
 *                must not write into
 *   continue_day NULL (one process: hps_trainer_continue on --continue-from),
 *                or this process's part of the checkpoint --continue-from
 *                names begins the next day
 *   gather_params  before evaluation or export: the trainer gets the weights
 *                of layers other processes train (every process calls it)
 *   exchange_rows  NULL, or, where each process of the stage holds the
 *                whole of its device rows (rows: hbm, one replica a worker):
 *                this process's summed gradient of a layer, n rows named by
 *                key, D floats each, out: every process's, in worker order
 *                (this one's among them), valid until the next call; every
 *                process of the stage calls it each step, n = 0 too
 *   metrics      NULL, or figures for the step records
 *   table_stats  NULL, or where the rows live elsewhere (parameter servers):
 *                each table's figures there (hps_table_stats, per layer,
 *                summed over the servers) as the last step applied left
 *                them; returns 1 when it gave them (the lead), 0 where the
 *                local tables' are the figures
 *   stage_busy   NULL when this process's pipeline times every stage
 *   rows_totals  NULL (one process: its device rows' counts are the run's),
 *                or the counts of the stages' device rows (rows: hbm or
 *                cache; lookups, hits, misses, write_backs: 4 a stage, in
 *                stage order) summed over the processes that hold them: in,
 *                this process's trainer's; out, the totals.  A collective:
 *                every process calls it at the same records (an epoch's end,
 *                the summary)
 * Properties of where the rows live:
 *   remote_rows  the local tables only map keys to rows: each load tracks the
 *                rows it touched and fetches their values, and evaluation maps
 *                unseen keys too (fetched with peek); 0: the tables hold the
 *                values, and evaluation reads them without creating rows
 *   in_process   the plan's in-process figures are this run's prediction
 *                (tables beside the trainer, no exchange); 0: its figures
 *                for the ranks */
typedef struct {
    void *ctx;
    void (*slice)(void *ctx, int n, int *lo, int *hi);
    int (*fetch_rows)(void *ctx, const hps_row_key *rows, const uint32_t *lookups, int64_t n, float *out,
                      int peek, hps_error *err);
    int (*update_rows)(void *ctx, int layer, hps_table *table, hps_sparse_grad *const *grads, int n,
                       hps_sparse_grad **sum, hps_error *err);
    int (*step_end)(void *ctx, hps_error *err);
    int (*reduce_step)(void *ctx, float *grads, size_t n, double *loss, int rows, double compute_s,
                       hps_error *err);
    const hps_stage_link *link;
    int (*save)(void *ctx, hps_trainer *t, uint64_t step, hps_error *err);
    int (*resume)(void *ctx, hps_trainer *t, int *found, hps_error *err);
    int (*continue_day)(void *ctx, hps_trainer *t, hps_error *err);
    int (*gather_params)(void *ctx, hps_trainer *t, hps_error *err);
    int (*up_slices)(void *ctx, int n, int *lo, int *hi);
    int (*exchange_rows)(void *ctx, int layer, const hps_row_key *keys, const float *grad, int64_t n,
                         hps_row_grads *out, hps_error *err);
    json_t *(*metrics)(void *ctx);
    int (*table_stats)(void *ctx, hps_table_stats *per_layer);
    double (*stage_busy)(void *ctx, int stage);
    void (*rows_totals)(void *ctx, uint64_t *counts, int n_stages);
    int remote_rows, in_process;
} hps_train_dist;
/* Replaces the trainer's own hooks (one process, the default) with d. */
void hps_trainer_set_dist(hps_trainer *t, const hps_train_dist *d);

/* ---- checkpoints and export ------------------------------------------------ */

int hps_trainer_save(hps_trainer *t, const char *dir, hps_error *err);
/* Loads dir's latest checkpoint; 0 and *found = 0 when there is none. */
int hps_trainer_load(hps_trainer *t, const char *dir, int *found, hps_error *err);
/* --continue-from: path (a checkpoint file, or a directory's latest) made
 * for the same model and plan gives the tables, the dense parameters, the
 * optimizers' state and the step count; the epoch starts afresh on this
 * run's data, and the day is the checkpoint's plus one. */
int hps_trainer_continue(hps_trainer *t, const char *path, hps_error *err);
/* The day a trainer's run is (1 unless continued). */
uint64_t hps_trainer_day(const hps_trainer *t);
/* Loads one checkpoint file (a rank's part of a distributed checkpoint). */
int hps_trainer_load_file(hps_trainer *t, const char *path, hps_error *err);
/* A parameter server's checkpoint: its tables (per layer, NULL but for
 * embedding layers) alone, in the same format, DIR/ckpt-STEP.hpsckpt, with
 * the step and the day.  next_day: the load begins a next day
 * (--continue-from), which another plan cannot (as hps_trainer_continue);
 * the caller starts the tables' day. */
int hps_tables_save(const hps_model *m, hps_table *const *tables, const char *plan_digest,
                    uint64_t step, uint64_t seed, uint64_t day, const char *dir, hps_error *err);
/* A next day begins for tables (per layer, NULL but for embedding layers):
 * the rows untouched for expire_after_days removed, and with say a line a
 * layer that lost some. */
void hps_tables_next_day(const hps_model *m, hps_table *const *tables, uint64_t day, int expire_after_days,
                         int say);
int hps_tables_load_file(const hps_model *m, hps_table *const *tables, const char *plan_digest,
                         uint64_t seed, const char *path, int next_day, uint64_t *step, uint64_t *day,
                         hps_error *err);
/* Writes the weights as safetensors and, beside a regular file, PATH.sha256;
 * then reads the file back with hps_safetensors_verify. */
int hps_trainer_export(hps_trainer *t, const char *path, hps_error *err);
/* A safetensors file as hps-train writes it: the header's length, its JSON,
 * each tensor F32 or I64 of at most 2 dims whose data_offsets hold exactly
 * its bytes, the tensors back to back up to the end.  *n_tensors when OK. */
int hps_safetensors_check(const char *name, const unsigned char *buf, size_t len, int *n_tensors,
                          hps_error *err);
/* The file at path: its PATH.sha256 when there is one, then the above. */
int hps_safetensors_verify(const char *path, int *n_tensors, hps_error *err);

/* Delta exports (train_delta.c, hps-train(1) DELTA EXPORTS): delta_path gets
 * the rows of export_path added, changed or removed since the export `since`,
 * and its other tensors that changed, chained to both by digest. */
int hps_export_delta(const char *since, const char *export_path, const char *delta_path, hps_error *err);
/* base, then each delta in turn (each must apply to what the one before
 * made), written to out as an export is. */
int hps_export_apply(const char *base, char *const *deltas, int n, const char *out, hps_error *err);
/* One delta on a base in memory: *out (malloc'ed), the export it makes. */
int hps_delta_apply_buf(const char *base_name, const unsigned char *base, size_t blen, const char *delta_name,
                        const unsigned char *delta, size_t dlen, char **out, size_t *olen, hps_error *err);

/* AUC of scores against 0/1 labels (ties count half). */
double hps_auc(const float *score, const float *label, size_t n);

/* ---- metrics files, read back (train_metrics_read.c) ----------------------- */

/* Calls fn on each record of a metrics file (--metrics) in order; a line that
 * is no record is an error naming it; fn's nonzero return stops the walk. */
typedef int (*hps_metrics_record_fn)(void *ctx, const char *event, json_t *record, int line,
                                     hps_error *err);
int hps_train_metrics_each(const char *path, hps_metrics_record_fn fn, void *ctx, hps_error *err);

/* What a finished run measured: its start record's stages and its summary. */
typedef struct {
    char type[HPS_NAME_MAX];
    int first, end, units; /* layers [first, end) */
    double measured_ms;    /* computing per batch over the run */
    /* where the stage kept its rows (the summary's rows, hps-train(1)
     * Metrics); rows "" for a run of an hps-train before it */
    char rows[8];          /* "none", "servers", "hbm" or "cache" */
    long long cache_rows;  /* rows cache: the rows its cache held */
    double hit_rate;       /* rows cache: the share of lookups that hit; < 0 when none were made */
    int shards;            /* rows hbm in shards over this many units; 0: whole on each */
    int servers_beside;    /* its rows' servers on its units' hosts (rows on servers under mpirun) */
} hps_train_run_stage;
typedef struct {
    char model[HPS_NAME_MAX];
    int batch, micro_batches, n_stages;
    hps_train_run_stage stages[HPS_TRAIN_MAX_STAGES];
    uint64_t steps;
    double samples_per_s; /* training alone */
    int have_summary;
    int ranks;            /* under mpirun (its dist record); 0: one process */
    int has_rows;         /* its summary says where each stage kept its rows */
} hps_train_run;
int hps_train_run_load(const char *path, hps_train_run *r, hps_error *err);

/* The figures of one record as hps-train show draws them, each NAN when
 * absent or null: a step record (its first HPS_TRAIN_MAX_STAGES stages), an
 * eval record, and a start record's model name (NULL when absent). */
typedef struct {
    double samples_per_s, measured_ms, predicted_ms;
} hps_train_step_stage;
typedef struct {
    double step, loss, samples_per_s;
    int n_stages;
    hps_train_step_stage stages[HPS_TRAIN_MAX_STAGES];
} hps_train_step_record;
typedef struct {
    double step, logloss, auc, accuracy;
} hps_train_eval_record;
void hps_train_step_read(json_t *record, hps_train_step_record *r);
void hps_train_eval_read(json_t *record, hps_train_eval_record *r);
const char *hps_train_start_model(json_t *record);

/* Training curves from a metrics file (--metrics) as one SVG picture written
 * to out_path ("-" = stdout): loss, evaluation, samples/s per stage, measured
 * against planned ms per batch (train_curves.c). */
int hps_train_curves_svg(const char *metrics_path, const char *out_path, hps_error *err);

#endif
