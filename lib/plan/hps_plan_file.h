/* hps_plan_file: a plan (hps-plan(5)) read back, the one reader that
 * hps-shard, hps-train, its ranks under mpirun, hps-plan show and --explain
 * use, and the bounds every tool indexes a plan by. */
#ifndef HPS_PLAN_FILE_H
#define HPS_PLAN_FILE_H

#include <jansson.h>

#include "core/hps_core.h"
#include "model/hps_model.h" /* HPS_NAME_MAX */

#define PLAN_VERSION 1
#define PLAN_MAX_SERVERS 65536 /* as hps-shard's --servers */
#define PLAN_MAX_STAGES 64
#define PLAN_MAX_WORKERS (1 << 20)

typedef struct {
    char type[HPS_NAME_MAX], kind[8], rows[8]; /* kind "cpu" or "gpu"; rows plan_rows_names */
    int first, end; /* layers [first, end) */
    int units, servers;
    int servers_beside;  /* its servers on its units' hosts, one a unit; 0 when not given */
    double ms_per_batch; /* 0 when not given */
    double servers_ms;   /* what of it is the exchange with the servers; 0 when not given */
    double layers_ms;    /* what of it its layers compute; 0 when not given */
    /* rows "cache": the rows the cache holds, all the stage's tables
     * together (the hottest by lookups, hps-plan(1) MEMORY); 0 when not given */
    long long cache_rows;
    double cache_hit_rate; /* rows: cache: the share of lookups predicted to hit; 0 when not given */
    /* rows "hbm" on several units (rows_split): 1 "shards", each unit holds
     * the rows the routing rule sends it; 0 "replicas" (also when not
     * given), each unit holds every row */
    int rows_shards;
} plan_file_stage;

typedef struct {
    int rank, stage;
    char type[HPS_NAME_MAX];
    double share; /* < 0 when not given */
    char node[HPS_NAME_MAX]; /* where the plan placed it; "" when the cluster lists no nodes */
} plan_file_worker;

typedef struct {
    int rank;
    char node[HPS_NAME_MAX];
} plan_file_place; /* placement.servers[] */

/* Every field a tool may need, checked and bounded; what a plan may omit is
 * 0, NULL or empty, and each tool checks what it needs. */
typedef struct {
    json_t *root;                  /* the document, for what only hps-plan show prints */
    char *path, *name;             /* as given, and its last component for messages */
    char digest[72];               /* of the file's bytes */
    char *model_path, *cluster_path, *data_stats_path; /* inputs, resolved against the plan's directory; NULL if absent */
    int rows_on_servers; /* made with --rows servers */
    /* tables: the rows it priced (hps_row_dtype, rowwise AdaGrad, admission
     * after admit_after lookups); a plan without them (has_tables 0): fp32,
     * adagrad, 1 */
    int row_dtype, rowwise, admit_after, has_tables;
    int n_profiles, stdin_profile; /* stdin_profile: a profile was read from stdin */
    char **profile_paths;          /* "-" for the one read from stdin */
    char *stdin_profile_text;      /* inputs.stdin_profile, the profile read from stdin, as JSON text; or NULL */
    char model_digest[72], cluster_digest[72]; /* "" when absent */
    char objective[16];
    double min_throughput, samples, network_bytes;
    double predicted_throughput; /* predicted.throughput, samples/s; 0 when absent */
    double predicted_in_process; /* predicted.in_process_throughput; 0 when absent */
    int epochs, batch, n_layers; /* 0 when absent */
    int micro_batches;           /* pipeline.micro_batches; 0 when absent */
    char (*assign)[HPS_NAME_MAX]; /* n_layers type names, or NULL */
    int n_stages, n_workers, n_servers;
    plan_file_stage stages[PLAN_MAX_STAGES];
    plan_file_worker *workers;
    int *server_ranks; /* n_servers, or NULL when the plan lists none */
    /* placement (a cluster with nodes): servers' nodes and the cross-node
     * bytes per step predicted for it; -1 when absent */
    int n_server_places;
    plan_file_place *server_places;
    double cross_node_bytes;
    /* search: how the plan was found, as hps-plan recorded it */
    char algorithm[HPS_NAME_MAX]; /* "" when absent */
    unsigned long long seed;
    long episodes;
    int optimal, timed_out;
    double optimum;             /* search.optimum: exact's objective; < 0 when absent */
    double predicted_objective; /* predicted value of the plan's objective; < 0 when absent */
} plan_file;

/* Reads and checks a plan (hps-plan(5)); a file of another kind is refused. */
int plan_file_load(const char *path, plan_file *pf, hps_error *err);
void plan_file_free(plan_file *pf);

/* What hps-shard needs of a plan: its worker shares (workers[].share, in
 * rank order; at most PLAN_MAX_SHARDS, hps-shard's shards) and its server
 * count (servers.count, 0 when absent); errors name the field. */
#define PLAN_MAX_SHARDS 65536
int hps_plan_read(const char *path, double **shares, int *n_workers, int *servers,
                  char digest[72], hps_error *err);

#endif
