/* hps_plan: which resource type runs each layer, and how many units each stage
 * gets, so that a throughput limit is met at the lowest cost (hps-plan(1)).
 *
 * The pieces, in the order a plan is made:
 *   cluster   the resource types one can rent (hps-cluster(5), hps_cluster.h)
 *   problem   model + cluster + profiles reduced to numbers: per layer and
 *             type the time of a batch on one unit, per type price and limits
 *   eval      the cost model: an assignment (a type per layer) becomes stages,
 *             provisioned at the bottleneck level that suits the objective
 *   solvers   rl (the default), exact, greedy, genetic, brute, fixed:TYPE
 *   plan      the result with servers, workers and placement (hps-plan(5));
 *             read back by hps_plan_file.h
 * The solvers' shared helpers are in plan_internal.h.
 */
#ifndef HPS_PLAN_H
#define HPS_PLAN_H

#include <jansson.h>
#include <math.h>

#include "core/hps_core.h"
#include "model/hps_model.h"
#include "plan/hps_cluster.h"
#include "plan/hps_plan_file.h"
#include "profile/hps_profile.h"

/* ---- the problem ---------------------------------------------------------- */

/* PLAN_OBJ_RATE: the $/hour alone, what --max-cost-per-hour bounds */
typedef enum { PLAN_OBJ_COST, PLAN_OBJ_TIME, PLAN_OBJ_ENERGY, PLAN_OBJ_EDP, PLAN_OBJ_RATE } plan_objective;
extern const char *const plan_objective_names[]; /* "cost", "time", "energy", "edp", "cost-per-hour" */
extern const char *const plan_sparse_optimizer_names[]; /* "adagrad", "rowwise-adagrad": hps-train's */

/* Key statistics of one slot (hps-shard's manifest): the share of its
 * lookups taken by its hottest n[i] keys, n rising; n_points 0 = none;
 * its lookups in the data and the data's rows (0: not known). */
typedef struct {
    int n_points;
    double n[6], share[6];
    double lookups, rows;
} plan_key_stats;
/* One slot of an embedding layer as the cache sees it: its rows, its share
 * of the layer's lookups, its key statistics. */
typedef struct {
    int layer;
    double rows, share;
    plan_key_stats keys;
} plan_slot;
/* Rows of one or more tables ordered by lookups, hottest first, as sums at
 * n + 1 points from 0: rows, lookups a batch, their bytes (dim x 4 each),
 * and the table bytes of their rows (weights and accumulators); and each of
 * the n blocks between them: a row's lookups an epoch of the data, the
 * epoch's batches (0: not known) and the model's lookups a batch over the
 * data's (the data may leave a slot empty). */
typedef struct {
    int n;
    double *rows, *lookups, *bytes, *table, *per_epoch, *epoch, *weight;
} plan_cache_curve;

typedef struct {
    int n_layers, n_types;
    double batch; /* samples per batch that every time refers to */
    const char **layer_names, **type_names;
    /* per layer */
    int *kind;                   /* hps_layer_kind */
    double *flops, *bytes_in, *bytes_out, *param_bytes, *sparse_bytes, *sparse_rows;
    /* per cut, [c] for the cut before layer c (0 and n_layers: none): bytes a
     * batch sends across it, both ways (hps-plan(1), COST MODEL) */
    double *cut_bytes;
    /* a graph's stage [first, end) also holds what crosses it unread (a
     * tensor produced before it and read after it, its gradient, the
     * labels): [first * (n_layers + 1) + end], bytes a batch; NULL for a
     * chain (plan_problem_model_cuts) */
    double *pass_bytes;
    /* per layer x type, [l * n_types + t] */
    double *t1_ms; /* forward + backward of one batch on one unit */
    double *par;   /* fitted parallel fraction a over threads: t(n) = t1 ((1 - a) + a / n) */
    /* the share f of t1 that fewer samples do not shorten: on b of the
     * batch's B samples a layer takes t1 (f + (1 - f) b / B) (profile's
     * batch_scaling; 0 when not measured) */
    double *fixed;
    double *fwd; /* forward's share of t1 (0.5 when not profiled) */
    /* a CPU unit's time with a server beside it, on one core fewer
     * (plan_law_colocate), over t1: the profile's scaling figure at the
     * type's cores - 1 threads over t1 where it timed that count
     * (plan_problem_build), else 0: Amdahl's law with par */
    double *beside_ratio;
    /* where beside_ratio is given: the share of that time that fewer
     * samples do not shorten (batch_scaling at cores - 1; else fixed) */
    double *beside_fixed;
    unsigned char *fits; /* [l * n_types + t]: 1 when layer l's working set fits one unit of type t */
    /* memory per layer (hps-plan(1), MEMORY): the working set of one unit
     * with the rows on servers, and the embedding tables with AdaGrad's
     * accumulators, and their rows */
    double *work_bytes, *table_bytes, *rows;
    /* a row's weights and AdaGrad state (hps_row_state_bytes), per layer;
     * 0: table_bytes / rows (a problem made by hand) */
    double *row_bytes;
    double *hot; /* share of layer l's lookups that its hottest key takes */
    /* the hot-row cache (plan_memory.c): the slots whose key statistics
     * plan_problem_key_stats gave (a layer with a table and none here is one
     * slot of the default skew), and per run of layers with tables, a
     * table's rank a to rank b, their rows hottest first:
     * curves[a * n_tabled + b]; built by plan_problem_prepare */
    int n_slots, n_tabled;
    plan_slot *slots;
    plan_cache_curve *curves;
    /* per type */
    double overhead_ms[PLAN_MAX_TYPES], price[PLAN_MAX_TYPES], power[PLAN_MAX_TYPES];
    double read_ms[PLAN_MAX_TYPES]; /* reading a batch from shards, where profiled (else 0) */
    /* the reader's background thread's CPU a batch (hps-profile(5), read_cpu_ms; else 0) */
    double read_cpu_ms[PLAN_MAX_TYPES];
    /* one thread waking another to hand it a micro-batch (the profile's
     * handoff_us; 0 when not profiled): hps-train's stages in one process */
    double handoff_ms[PLAN_MAX_TYPES];
    /* what keeping all of the model's rows in device memory (rows hbm or
     * cache) adds to a step on this type's host, where profiled
     * (hps-profile(5), device_rows_ms; else 0) */
    double device_rows_ms[PLAN_MAX_TYPES];
    /* what one miss of a cache adds to that on this type's host, beyond the
     * new rows that rows hbm fetch too (hps-profile(5), device_row_miss_us
     * / 1000; else 0: a miss costs its bytes alone) */
    double row_miss_ms[PLAN_MAX_TYPES];
    /* the type's host link is a copy in host memory (a gpu type profiled on
     * a CPU's threads: hps-train --cpu-fallback's CPU backend, pcie_bpms its
     * triad / 2), which row_miss_ms, timed there, already holds */
    int link_in_memory[PLAN_MAX_TYPES];
    /* the exchanges with the servers of a step that looks up all of the
     * model's rows there, where profiled (hps-profile(5), exchange; else
     * 0): a worker's packing and unpacking, and a server's gathering and
     * applying, on this type (the servers' type for the servers) */
    double exchange_worker_ms[PLAN_MAX_TYPES], exchange_server_ms[PLAN_MAX_TYPES];
    /* what that exchange sends per byte of the rows its lookups name (both
     * ways; a batch fetches each distinct row once, and keys and headers
     * go with them), and its distinct rows per lookup: measured at the
     * profile's batch by the first device profiled with an exchange, else
     * 1 and 1, every lookup's row both ways (hps-plan(1), COST MODEL) */
    double exchange_bytes_share, exchange_rows_share;
    double nic_bpms[PLAN_MAX_TYPES]; /* bytes per ms */
    double nic_ms[PLAN_MAX_TYPES];   /* latency of one message between two units */
    double pcie_bpms[PLAN_MAX_TYPES]; /* a GPU's host-to-device bytes per ms; 0 = not charged */
    /* bytes per ms a unit's memory moves (the profile's triad) as it adds the
     * gradients of the allreduce into its own; 0 = not charged */
    double reduce_bpms[PLAN_MAX_TYPES];
    int max_units[PLAN_MAX_TYPES];
    /* units rented together (hps-cluster(5)): a plan pays for whole
     * instances of units_per_instance units at price x units_per_instance;
     * 1 by default (plan_problem_new) */
    int units_per_instance[PLAN_MAX_TYPES];
    double mem_bytes[PLAN_MAX_TYPES]; /* one unit's memory; 0 = not checked */
    /* the host of one unit, where a stage's servers may live beside it
     * (plan_law_colocate): its RAM (a CPU type's mem_bytes, a GPU type's
     * host_mem_gib; 0 = not given: no server there) and its cores (threads) */
    double host_mem[PLAN_MAX_TYPES];
    int cores[PLAN_MAX_TYPES];
    int is_gpu[PLAN_MAX_TYPES];       /* only GPU types hold rows in HBM or a cache */
    /* parameter servers: one server's memory (0 = not checked), NIC in bytes
     * per ms, price and power per hour, and the most there can be */
    double server_mem, server_bpms, server_price, server_power;
    /* rows one server's CPU applies per ms (the profiled gather rate over
     * PLAN_SERVER_ROW_PASSES); 0 when not known: the NIC alone is priced */
    double server_rows_per_ms;
    int max_servers, server_type; /* server_type: -1 when the servers are no cluster type */
    int rows_on_servers;          /* --rows servers: no HBM tables, no caches */
    int separate_servers;         /* no servers on the stages' own hosts (plan_law_colocate) */
    /* the tables' rows as hps-train stores them (--row-dtype, --sparse-optimizer
     * rowwise-adagrad, --admit-after; plan_problem_tables) */
    int row_dtype, rowwise, admit_after;
    /* links between types: bytes per ms (0 = none listed) and latency in ms */
    double link_bpms[PLAN_MAX_TYPES][PLAN_MAX_TYPES], link_ms[PLAN_MAX_TYPES][PLAN_MAX_TYPES];
    /* what to meet and what to minimise */
    double min_throughput; /* samples per second */
    /* micro-batches per batch, as hps-train pipelines them: 0 one per stage
     * (hps-train's default); PLAN_NO_BUBBLE for the seeded instances of the
     * solvers' tests and benchmarks, an ideal pipeline */
    int micro_batches;
    double samples;        /* per epoch */
    int epochs;
    plan_objective objective;
    /* hps-train runs the embedding layers on the host CPU beside the tables
     * (rows on the servers): a GPU stage whose rows are there pays this CPU
     * type's embedding times, not its own; -1 when the cluster has none */
    int host_type;
    /* prefix sums per type over layers, [t * (n_layers + 1) + i]; emb_*
     * over the embedding layers alone */
    double *pre_serial, *pre_parallel, *pre_emb_serial, *pre_emb_parallel;
    double *pre_fixed, *pre_emb_fixed; /* of t1 fixed */
    double *pre_fwd;                   /* of t1 forward */
    double *pre_param, *pre_sparse, *pre_rows; /* [i] */
    double *pre_emb_out; /* [i]: the embedding layers' output bytes per batch */
    double *pre_work, *pre_table;   /* [i] */
} plan_problem;

/* Memory (hps-plan(1), MEMORY). */
#define PLAN_UNIT_RESERVE (0.5 * PLAN_GIB) /* runtime, CUDA context, kernels' buffers */
#define PLAN_SERVER_HEADROOM 1.25          /* keys, hash slots, growth */
/* Random row accesses a server makes per row and step: the pull's gather,
 * and AdaGrad's update of the weights and the accumulators. */
#define PLAN_SERVER_ROW_PASSES 3
/* Without key statistics: the hottest fraction f of a table's rows takes
 * f^PLAN_DEFAULT_SKEW of its lookups. */
#define PLAN_DEFAULT_SKEW 0.25
/* The cache's curve is sampled at this many points a decade of rows. */
#define PLAN_CACHE_POINTS_PER_DECADE 32
/* Takes the embedding layers' slots from the model with their per-slot
 * statistics, in the model's slot order (NULL, or a slot's n_points 0: the
 * default skew), and rebuilds the cache's curves. */
void plan_problem_key_stats(plan_problem *p, const hps_model *m, const plan_key_stats *slots);
/* The tables' bytes from the rows' format and, with admit_after > 1, the
 * rows admitted: per slot of an embedding layer the keys its statistics
 * say are seen admit_after times or more (all of a slot without them, and
 * of a linear layer's tables); returns the slots without them.  Prepares p. */
int plan_problem_tables(plan_problem *p, const hps_model *m);
/* Rows of slot s that admission after n lookups lets in. */
double plan_slot_admitted(const plan_slot *s, int n);
/* The cache's curves of every run of layers with tables (plan_memory.c):
 * build after the tables, rows and lookups are filled; free. */
void plan_problem_cache_curves(plan_problem *p);
void plan_problem_free_curves(plan_problem *p);
/* A cache of `rows` rows of the layers [first, end), all tables together,
 * keeps the rows with the most lookups: the share of the lookups it serves,
 * of their bytes, and the table bytes a batch's missed lookups name. */
typedef struct {
    double hit, bytes_hit, miss_table_bytes;
} plan_cache_hits;
void plan_cache_at(const plan_problem *p, int first, int end, double rows, plan_cache_hits *h);
/* Fills fits[]; 0 when every layer fits some type and every table fits the
 * servers, else an error naming the layer, the bytes and the capacity. */
int plan_problem_check_memory(plan_problem *p, hps_error *err);

/* A layer of parallel fraction a on `to` threads against `from`, by
 * Amdahl's law: t(to) / t(from), t(n) = t1 ((1 - a) + a / n). */
double plan_amdahl_ratio(double a, double to, double from);
/* Allocates the per-layer arrays; the caller fills them, then prepares. */
plan_problem *plan_problem_new(int n_layers, int n_types);
void plan_problem_prepare(plan_problem *p); /* prefix sums; call after filling */
/* cut_bytes of a chain without a model (synthetic and hand-made problems):
 * each layer's output forward and its gradient back. */
void plan_problem_chain_cuts(plan_problem *p);
/* cut_bytes of a model at p->batch: what hps-train sends across each cut,
 * the live set (hps_model_cut_live: every tensor produced before the cut
 * and read after it, not the last layer's output alone) and the labels
 * forward, the gradients of those that take one back. */
void plan_problem_model_cuts(plan_problem *p, const hps_model *m);
/* pass_bytes of a graph model at p->batch (called by the above). */
void plan_problem_model_passes(plan_problem *p, const hps_model *m);
void plan_problem_free(plan_problem *p);
/* A seeded CTR-like instance for the rl policy's pre-training, the tests and
 * the benchmark: the limit is tightness times the largest throughput
 * reachable; unit_limits 1 gives each type 1 to 6 units, 2 gives 8 to 40
 * (else 64). */
plan_problem *plan_problem_random(uint64_t seed, int n_layers, int n_types, double tightness,
                                  int unit_limits);
/* Seeded unit and server memories, working sets, tables and key skew on a
 * random instance; then plan_problem_check_memory says whether it is valid. */
void plan_problem_random_memory(plan_problem *p, uint64_t seed);
/* plan_problem_random with that memory, the limit at tightness times the
 * fastest plan that fits; NULL when a layer, the tables or every plan fit nowhere. */
plan_problem *plan_problem_random_with_memory(uint64_t seed, int n_layers, int n_types, double tightness,
                                              int unit_limits);
/* Builds the problem: every cluster type's device must be profiled for this
 * model (same digest, same layers). */
plan_problem *plan_problem_build(const hps_model *m, const hps_cluster *c,
                                 const hps_profiles *ps, hps_error *err);

/* ---- the cost model ------------------------------------------------------- */

/* A stage's time per batch on k units is fixed_ms + scaled_ms / k + hop_ms (k - 1). */
typedef struct {
    double fixed_ms, scaled_ms;
    double hop_ms;      /* the ring allreduce's 2 (k - 1) messages, per unit past the first */
    double compute_ms;  /* on one unit, overhead included */
    double layers_ms;   /* of it the layers alone (what hps-train times a stage by) */
    double layers_fixed_ms; /* of those what each unit takes whole (plan_problem.fixed) */
    double layers_fwd_ms;   /* of those the forward passes (on the stage's own type) */
    double boundary_ms; /* activations in and out, and their gradients, on one unit */
    double ps_ms;       /* embedding rows pulled and gradients pushed, on one unit */
    /* the step's two round trips to the servers, in series with it: the
     * servers' compute and 4 latencies (fixed), the worker's packing (scaled) */
    double exchange_ms, exchange_worker_ms;
    double sync_ms;     /* ring allreduce and hbm replicas' rows: times (k - 1) / k */
    /* hbm on k units: the rows' keys and gradients the replicas exchange, a
     * step; with shards, what the all-to-alls carry (keys, rows, gradients) */
    double replica_bytes;
    /* memory: where the stage's embedding rows live, one unit's working set */
    int rows;           /* plan_rows */
    /* rows hbm sharded over the units by key (rows_split: shards in
     * hps-plan(5); plan_law_shard): the fewest units whose HBM holds
     * shard_bytes / k each beside the working set, and shard_bytes, the
     * tables with the servers' headroom, which the units hold between them */
    int shards, least_units;
    double shard_bytes;
    int first, end, type; /* the stage it is the law of: layers [first, end) on type */
    int fits;           /* the working set fits one unit (with shards: at least_units) */
    double mem_bytes, hit_rate; /* with shards: a unit's at least_units (plan_law_mem_bytes) */
    double cache_rows;  /* with a cache: the rows it holds, all tables together */
    /* with a cache: bytes a batch's misses move over the host link (each
     * missed row fetched, a row written back), and the ms they take */
    double host_bytes, host_ms;
    /* with rows hbm or cache: hps-train's host work for them a batch, the
     * stage's share of device_rows_ms (split over the units) */
    double rows_host_ms;
    /* with a cache: hps-train's host work for its misses a batch beyond
     * rows_host_ms (row_miss_ms a distinct row missed, split over the units) */
    double miss_ms;
    double server_table_bytes; /* tables + accumulators the servers hold for the stage */
    double server_bytes;       /* bytes per batch to and from the servers */
    double server_rows;        /* rows per batch the servers serve and update */
    double server_hot;         /* share of that traffic on the hottest key */
    /* what of fixed_ms and scaled_ms runs on the unit's host cores: a CPU
     * unit's layers, read and packing; a GPU unit's embedding layers on the
     * host and packing (what a server beside it slows down) */
    double cpu_fixed_ms, cpu_scaled_ms;
    /* the stage's servers live on its own units' hosts, one a unit
     * (plan_law_colocate): its times are charged for the core each takes */
    int coloc;
    double coloc_bpms; /* then: the NIC its servers share with the units */
    /* then: what the core each server takes adds to fixed_ms and scaled_ms
     * (plan_law_beside_ms): the host work on one core fewer, less on all */
    double coloc_fixed_ms, coloc_scaled_ms;
    /* where provisioning may put the stage's rows: PLAN_PICK_ANY (each
     * level the cheapest way), or only on servers apart (of their own),
     * beside its units, in HBM shards over its units (plan_law_shard), or,
     * for rows that fit one unit, in its HBM whole (else they go to the
     * servers: plan_law_servers); plan_evaluate tries each stage every way
     * it has */
    int pick;
} plan_law;

enum { PLAN_PICK_ANY, PLAN_PICK_APART, PLAN_PICK_BESIDE, PLAN_PICK_SHARDS, PLAN_PICK_HBM };

typedef enum { PLAN_ROWS_NONE, PLAN_ROWS_SERVERS, PLAN_ROWS_HBM, PLAN_ROWS_CACHE } plan_rows;
extern const char *const plan_rows_names[]; /* "none", "servers", "hbm", "cache" */

void plan_stage_law(const plan_problem *p, int first, int end, int type, plan_law *law);
/* Where a run kept a stage's rows (hps-train's summary; --calibrate). */
typedef struct {
    int rows;          /* plan_rows */
    double cache_rows; /* rows cache: the rows the cache held, all the stage's tables together */
    double hit_rate;   /* rows cache: the share of lookups that hit, measured; < 0: the model's */
    int shards;        /* rows hbm in shards over this many units; 0: each unit holds every row */
    int beside;        /* rows on servers on the stage's units' hosts (plan_law_colocate) */
} plan_kept;
/* The stage's law with its rows where kept says, whatever the room the
 * model finds for them: the run is the fact, the model prices it.  A cache
 * at a measured hit rate has the model's misses (rows and bytes fetched and
 * written back, rows the servers serve) scaled to it. */
void plan_stage_law_kept(const plan_problem *p, int first, int end, int type, const plan_kept *kept,
                         plan_law *law);
double plan_law_ms(const plan_law *law, int units);
/* What of plan_law_ms is the exchange with the servers (their bytes, the
 * round trips): what a run with the tables in its own process does not do. */
double plan_law_servers_ms(const plan_law *law, int units);
/* What the servers beside a colocated stage's units add to plan_law_ms:
 * the stage's host work on one core fewer, less on all of them
 * (plan_law_colocate); 0 for a law not colocated. */
double plan_law_beside_ms(const plan_law *law, int units);
/* The stage's time in one process (hps-train's default): no exchange with
 * servers, and its cuts cost nothing, its stages being threads that share
 * the micro-batches' buffers; no server starts beside its unit, so it keeps
 * every core (no plan_law_beside_ms). */
double plan_law_in_process_ms(const plan_law *law, int units);
/* What the stage's layers take on B / n samples: each of n units, or one
 * of n micro-batches (the fixed share whole, the rest divided). */
double plan_law_layers_ms(const plan_law *law, int units);
/* The units within max that make the stage fastest (1 when more never help). */
int plan_law_best_units(const plan_law *law, int max);
/* The fewest units meeting the limit (plan_stage_at_level at the limit), or
 * 0 when none does (also when the working set does not fit a unit or no
 * number of servers carries the stage's rows). */
int plan_provision(const plan_problem *p, const plan_law *law, int type);
/* Servers the stage needs for its rows at a throughput: the larger of memory
 * and traffic (with the hottest key's skew); -1 when none suffice.  A plan
 * sizes them at the limit. */
int plan_stage_servers(const plan_problem *p, const plan_law *law, double throughput);
/* Samples/s that n servers carry for the stage (HUGE_VAL when it pulls no rows). */
double plan_servers_throughput(const plan_problem *p, const plan_law *law, int n);
/* The stage's law with its servers on its own units' hosts, one on each
 * unit's host, taking one of its n cores and its NIC (hps-plan(1), MEMORY,
 * servers beside the stage): its host-core work runs on n - 1 cores, a CPU
 * unit's layers at their n - 1 thread time (beside_ratio), a GPU unit's
 * host work (cpu_*_ms) n / (n - 1) as long.  0 when they cannot live
 * there: no rows on servers, a host of one core or of no memory given,
 * separate_servers.
 * plan_servers_throughput of a colocated law is that of n servers beside
 * n units. */
int plan_law_colocate(const plan_problem *p, const plan_law *law, int t, plan_law *out);
/* The stage's law with its rows in HBM sharded over its units by key
 * (hps-plan(1), MEMORY; hps-train runs it as rows_split: shards): where its
 * tables do not fit one unit beside the working set but 1.25 x tables / k
 * do on each of k units of a gpu type, k within max_units.  Each step the
 * units exchange the keys their slices touch, the rows and the rows'
 * gradients all-to-all (COST MODEL).  0 when that is not so (tables that
 * fit one unit, a cpu type, --rows servers, a law already colocated or
 * sharded); out->least_units is the fewest units that hold the shards. */
int plan_law_shard(const plan_problem *p, const plan_law *law, plan_law *out);
/* The law of a stage whose rows fit its HBM (rows hbm) with them on the
 * servers instead, as --rows servers prices them (its embedding layers on
 * its host's CPU); 0 for any other law.  Where both fit, the objective
 * chooses (hps-plan(1), MEMORY). */
int plan_law_servers(const plan_problem *p, const plan_law *law, plan_law *out);
/* One unit's memory with the law on k units: its working set and rows (a
 * shard of the tables with shards). */
double plan_law_mem_bytes(const plan_law *law, int units);
/* With law colocated on t: the fewest units whose hosts hold its servers'
 * tables (0 when none within max_units do). */
int plan_coloc_least_units(const plan_problem *p, const plan_law *law, int t);
/* The units of type x that a stage on type t takes from x's limit with
 * `units` units and `servers` servers: its own, and on the servers' type its
 * servers (hps-cluster(5)); plan_take_units adds them to used[] of every type. */
int plan_units_taken(const plan_problem *p, int t, int units, int servers, int x);
void plan_take_units(const plan_problem *p, int t, int units, int servers, int *used);
/* Instances of type t that hold n of its units; and what a plan is billed
 * an hour: whole instances holding units[t] workers of each type (stages of
 * one type share them; on the servers' type, when it comes in instances of
 * several units, its servers too), and the servers at server_price. */
int plan_instances(const plan_problem *p, int t, int n);
double plan_rent_per_hour(const plan_problem *p, const int *units, int servers);
/* A stage's samples/s on k units: its time, or its servers when they are slower. */
double plan_stage_throughput(const plan_problem *p, const plan_law *law, int k, int servers);
/* One way to provision a stage: the fewest units and servers that carry a
 * level of samples/s (hps-plan(1), COST MODEL, provisioning), and the
 * samples/s they carry, at least the level. */
typedef struct {
    int units, servers;
    double throughput;
    int coloc; /* the servers live on the units' hosts, one a unit; servers is 0 (none billed) */
    int shards; /* the rows live in the units' HBM sharded by key (plan_law_shard); servers is 0 */
    int on_servers; /* rows that fit HBM live on the servers instead (plan_law_servers) */
} plan_option;
/* Transfer time per batch of the link into a stage starting at layer `first`
 * (activations forward, gradients back), or 0 when no link is listed. */
double plan_link_ms(const plan_problem *p, int first, int from_type, int to_type);

typedef struct {
    int first, end, type, units; /* layers [first, end) */
    plan_law law;
    double ms, throughput;    /* at units; throughput 0 when infeasible */
    double link_ms, link_throughput; /* the link into the stage (0 = none) */
    double best_throughput;   /* reachable within max_units */
    int best_units;
    int servers;              /* parameter servers for the stage's rows, billed */
    int coloc;                /* its servers live on its units' hosts instead, one a unit (law.coloc) */
    int shards;               /* its rows live in its units' HBM, sharded by key (law.shards) */
    int on_servers;           /* rows that fit its HBM live on servers instead (plan_law_servers) */
    int short_of_limit;       /* PLAN_SHORT_STAGE and/or PLAN_SHORT_LINK */
} plan_stage;

enum { PLAN_SHORT_STAGE = 1, PLAN_SHORT_LINK = 2 };

typedef struct {
    int n_stages;
    plan_stage *stages; /* n_layers slots */
    int units[PLAN_MAX_TYPES]; /* the workers' */
    int servers; /* summed over stages: the cost stays a sum over stages */
    int coloc_servers; /* servers on the stages' own hosts, not billed (plan_stage.coloc) */
    /* units taken from each type's max_units: its workers' and, on the
     * servers' type, the servers' too (hps-cluster(5)) */
    int used[PLAN_MAX_TYPES];
    double server_cost_per_hour;
    int feasible;
    double violation; /* > 0 when infeasible: how far from feasible */
    double throughput, time_s, cost_per_hour, cost, power_w, energy_j, edp, objective;
    int micro_batches;
    double bubble; /* throughput = bubble x the slowest stage's or link's */
    int bottleneck, bottleneck_is_link;
    plan_option *scratch; /* 2 n_layers: the provisioning search's current and best */
} plan_eval;

/* Micro-batches M a plan of S stages runs with, and the share of the
 * bottleneck's rate its pipeline reaches: M / (M + S - 1), the bubble of
 * a synchronous step (hps-plan(1), COST MODEL). */
#define PLAN_NO_BUBBLE (-1)
int plan_micro_batches(const plan_problem *p, int n_stages);
double plan_bubble(const plan_problem *p, int n_stages);

void plan_eval_init(plan_eval *e, const plan_problem *p);
void plan_eval_free(plan_eval *e);
/* Splits the assignment into stages, provisions them for the objective (the
 * bottleneck level at or above the limit that scores best, each stage at the
 * fewest units and servers carrying it), and fills e. */
void plan_evaluate(const plan_problem *p, const int *assign, plan_eval *e);
/* Objective from the summed rates and the pipeline throughput (inline:
 * the exact solver's bounds evaluate it for every partial plan). */
static inline double plan_objective_value(const plan_problem *p, double cost_per_hour, double power_w,
                                          double throughput)
{
    double time_s = p->samples * p->epochs / throughput;
    switch (p->objective) {
    case PLAN_OBJ_COST: return time_s * cost_per_hour / 3600.0;
    case PLAN_OBJ_TIME: return time_s;
    case PLAN_OBJ_ENERGY: return time_s * power_w;
    case PLAN_OBJ_EDP: return time_s * power_w * time_s;
    case PLAN_OBJ_RATE: return cost_per_hour;
    }
    return HUGE_VAL;
}
/* Objective when feasible; a huge value growing with the violation otherwise,
 * so that searches can still move towards feasibility. */
double plan_score(const plan_eval *e);
/* The plan's throughput run in one process, its tables beside it
 * (hps-train's default; hps-plan(1), COST MODEL, "In one process"): the
 * engine's per-step work, then the step's micro-batches through the stages,
 * threads on one unit each that hand them on (plan_pipeline_ms); no
 * servers, no links between types.  An ideal pipeline (PLAN_NO_BUBBLE):
 * the slowest stage's plan_law_in_process_ms. */
double plan_in_process_throughput(const plan_problem *p, const plan_eval *e);
/* hps-train's schedule of one step in one process (lib/train/
 * train_pipeline.c): stage 0 gets M micro-batches, a stage takes backward
 * work before forward and hands each micro-batch on, the last stage turns
 * one around at once, the step ends when stage 0 has all back.  f[s], b[s]:
 * ms of a micro-batch's forward and backward pass through stage s.  The ms
 * from the first forward to the last backward, by an event simulation. */
double plan_pipeline_ms(const double *f, const double *b, int S, int M);

/* ---- solvers -------------------------------------------------------------- */

typedef struct plan_policy plan_policy; /* the rl policy's weights */

typedef struct {
    uint64_t seed;
    long episodes;      /* rl: plans the policy samples */
    long evaluations;   /* rl, genetic, polish: cost-model evaluations in all */
    double time_limit;  /* seconds; a safety cap on rl, genetic and polish */
    double bound_time;  /* seconds for the exact solver */
    int progress;       /* progress bar on stderr */
    int polish;         /* rl: local search on the best samples (default on) */
    int start;          /* rl: PLAN_START_* */
    const plan_policy *policy; /* rl, PLAN_START_TRAINED: these weights (NULL: the shipped ones) */
    int frozen;         /* rl: sample without learning (learning rate 0) */
} plan_search_opts;

/* Where the rl policy starts: pre-trained weights, random weights (the
 * untrained policy), or all zero (uniform over the actions: random search). */
enum { PLAN_START_TRAINED, PLAN_START_RANDOM, PLAN_START_UNIFORM };

typedef struct {
    double episode, objective; /* best feasible objective after that many evaluations */
} plan_trace_point;

typedef struct {
    int *assign; /* n_layers */
    int found;   /* an assignment is in assign (feasible or not) */
    int optimal; /* proven (exact, brute) */
    int timed_out;
    int unit_phase; /* exact: the unit limits bound across stages (phase 2 ran) */
    long episodes;
    double seconds;
    int n_trace;
    plan_trace_point trace[64];
    double mean_first, mean_last; /* rl: mean sampled reward, first and last updates */
    const char *found_by; /* which part found the plan: "policy", "polish", ... */
} plan_result;

void plan_result_init(plan_result *r, const plan_problem *p);
void plan_result_free(plan_result *r);

int plan_solve_fixed(const plan_problem *p, int type, plan_result *r);
int plan_solve_greedy(const plan_problem *p, plan_result *r);
int plan_solve_brute(const plan_problem *p, plan_result *r, hps_error *err);
int plan_solve_exact(const plan_problem *p, const plan_search_opts *o, plan_result *r);
int plan_solve_genetic(const plan_problem *p, const plan_search_opts *o, plan_result *r);
int plan_solve_rl(const plan_problem *p, const plan_search_opts *o, plan_result *r);
/* The rl polish alone, from the fastest plan: plan_iterated_search within
 * o->evaluations. */
int plan_solve_polish(const plan_problem *p, const plan_search_opts *o, plan_result *r);
/* The solver named by --algo (rl, exact, greedy, genetic, polish, brute, fixed:TYPE). */
int plan_solve(const plan_problem *p, const hps_cluster *c, const char *algo, const plan_search_opts *so,
               plan_result *r, hps_error *err);
/* The rl policy (plan_sched_rl.c): its file (hps-plan --train-policy) and
 * its pre-training over seeded random instances. */
plan_policy *plan_policy_load(const char *path, hps_error *err);
plan_policy *plan_policy_parse(json_t *root, const char *name, hps_error *err);
plan_policy *plan_policy_shipped(void); /* the one built in (lib/plan/rl-policy.json) */
int plan_policy_save(const plan_policy *pol, const char *path, hps_error *err);
void plan_policy_free(plan_policy *pol);
plan_policy *plan_policy_pretrain(uint64_t seed, int instances, long episodes, int progress);
/* Largest throughput any plan reaches (units shared by stages of one type are
 * not counted against each other, so this is an upper bound); assign gets it.
 * 0 when no plan's stages fit their units. */
double plan_max_throughput(const plan_problem *p, int *assign);

/* ---- the plan (hps-plan(5)) ----------------------------------------------- */

typedef struct {
    int rank, stage, type;
    double share;       /* fraction of the data set this worker reads */
    double batch_share; /* fraction of each batch it computes in its stage */
    int node, slot;     /* -1 when the cluster lists no nodes */
    int instance;       /* which of its type's instances holds it, from 0 */
} plan_worker;

typedef struct {
    int rank, node, slot;
    int instance; /* of the servers' type, after its workers'; -1 when no type */
    /* a server beside a stage: the worker whose unit's host holds it (its
     * instance is that worker's, of its type); -1 for one of its own */
    int worker;
    /* the stage whose table layers it holds: hps-train routes each stage's
     * rows over that stage's servers alone (hps-plan(5), SERVERS) */
    int stage;
} plan_server;

typedef struct {
    int n_workers, n_servers;
    plan_worker *workers;
    plan_server *servers;
    double server_bytes_per_s; /* parameter-server traffic at the predicted throughput */
    double cross_node_bytes, round_robin_bytes; /* per step; < 0 when no nodes */
    double bytes_per_step; /* every rank's sends a step, wherever it runs: allreduce, cuts, rows */
} plan_layout;

/* Servers, workers and (when the cluster lists nodes) their placement. */
int plan_layout_make(const plan_problem *p, const hps_cluster *c, const plan_eval *e,
                     plan_layout *out, hps_error *err);
void plan_layout_free(plan_layout *l);
/* Open MPI rankfile: "rank N=hostname slot=S", one line a rank. */
int plan_rankfile_write(const char *path, const hps_cluster *c, const plan_layout *l,
                        hps_error *err);

/* What a plan was made from and how. */
typedef struct {
    const char *model_path, *cluster_path, *data_stats_path; /* data_stats_path: NULL when not given */
    const char *model_digest, *cluster_digest;
    int n_profiles;
    const char *const *profile_names, *const *profile_digests;
    const char *stdin_profile; /* the text of the profile read from stdin, kept in the plan; or NULL */
    const char *model_name;
    const char *algorithm;
    plan_search_opts opts;
    double exact_objective; /* for the gap; < 0 when unknown */
} plan_meta;

json_t *plan_to_json(const plan_problem *p, const plan_eval *e, const plan_layout *l,
                     const plan_result *r, const plan_meta *m, const hps_cluster *c);
void plan_print_table(FILE *f, const plan_problem *p, const plan_eval *e,
                      const plan_layout *l, const plan_result *r, const plan_meta *m);
/* Pictures (plan_draw.c): the model's data-flow graph with the plan's stages,
 * servers and links as Graphviz dot; the stages as an SVG bar chart. */
void plan_print_dot(FILE *f, const hps_model *m, const plan_problem *p, const plan_eval *e,
                    const plan_layout *l);
void plan_draw_svg(FILE *f, const hps_model *m, const plan_problem *p, const plan_eval *e,
                   const plan_layout *l);

/* ---- --calibrate (plan_calibrate.c) ----------------------------------------- */

/* One stage of a run, as hps-train measured it: layers [first, end) on a
 * type and units; measured_ms its computing per batch.  target_ms is what the
 * cost model's time of the stage should become (plan_calib_targets), and
 * plan_calibrate fills the rest. */
typedef struct {
    int type, first, end, units;
    double measured_ms, target_ms;
    double before_ms, after_ms; /* the model's time of the stage, before and after */
    double factor;              /* on the t1 of the stage's layers on its type */
    int clamped;                /* the factor would be below PLAN_CALIB_MIN_FACTOR */
    int in_process;             /* a run in one process: no exchange with servers to match */
    /* where the run kept the stage's rows, which the model's time prices;
     * has_kept 0: a run that did not say, priced where the planner would put them */
    int has_kept;
    plan_kept kept;
    int priced_rows;            /* plan_rows: where the model's time priced them */
} plan_calib_stage;
#define PLAN_CALIB_MIN_FACTOR 0.01
/* target_ms of each stage from its measured_ms, the run's whole step and
 * the bubble of its micro-batches (plan_bubble). */
void plan_calib_targets(plan_calib_stage *st, int n, double step_ms, double bubble);
/* Scales the t1 of each stage's layers on its type in p (and prepares p). */
void plan_calibrate(plan_problem *p, plan_calib_stage *st, int n);

/* ---- a plan made before, evaluated again -------------------------------------- */

/* 1 when e, the plan's assignment evaluated again, is what the file
 * predicted (its objective to PLAN_FILE_TOLERANCE): the plan is as hps-plan
 * wrote it for these inputs, so what it records of its search still holds. */
#define PLAN_FILE_TOLERANCE 1e-8 /* files keep 9 significant digits (hps_json_write) */
int plan_file_rechecked(const plan_file *pf, const plan_eval *e);

/* "hps-plan --explain": per layer, what the plan would cost with that layer on
 * each type, everything else unchanged. */
void plan_explain(FILE *f, const plan_problem *p, const int *assign);
json_t *plan_explain_json(const plan_problem *p, const int *assign); /* "format": "hps-explain" */

/* ---- a budget (plan_pareto.c) ----------------------------------------------- */

/* --max-cost-per-hour (per_hour) or --max-cost (the job's $): the fastest
 * plan whose $/hour or $ is at most `most`, the dual of the limit.  The
 * cheapest plan at a limit costs more the higher the limit, so the limit
 * rises from p->min_throughput (0: a millionth of the fastest), by bisection and then just past
 * each plan found, while the solver's cheapest plan (objective
 * cost-per-hour or cost) stays within; exact makes it the fastest plan
 * within.  Leaves p->objective so and p->min_throughput at the limit that
 * gave the plan in r (plan_evaluate gives it again).  Fails naming the
 * cheapest plan's cost when even that is over. */
int plan_solve_budget(plan_problem *p, const hps_cluster *c, const char *algo, const plan_search_opts *so,
                      int per_hour, double most, plan_result *r, hps_error *err);
/* What a budget bounds: e's $/hour or $ per job. */
double plan_spend(const plan_eval *e, int per_hour);

/* ---- --pareto (plan_pareto.c) ---------------------------------------------- */

#define PLAN_PARETO_VERSION 2 /* 2: stages as objects */
typedef struct {
    double min_throughput; /* the limit that produced the point */
    double throughput, cost, cost_per_hour, objective;
    int n_stages;
    plan_stage *stages;
} plan_point;
typedef struct {
    int n;
    plan_point *points; /* slowest and cheapest first */
    double budget;      /* the objective's most (--max-cost-per-hour, --max-cost); 0: none */
} plan_frontier;
/* Sweeps the limit geometrically from p->min_throughput up to the fastest
 * plan in n steps and keeps the points no other point beats on both axes. */
int plan_pareto(plan_problem *p, const hps_cluster *c, const char *algo, const plan_search_opts *so, int n,
                plan_frontier *out, hps_error *err);
void plan_frontier_free(plan_frontier *f);
json_t *plan_frontier_json(const plan_problem *p, const plan_frontier *f, const char *algo);
void plan_frontier_table(FILE *f, const plan_problem *p, const plan_frontier *fr);
void plan_frontier_svg(FILE *f, const plan_problem *p, const plan_frontier *fr);

#endif
