/* hps_plan: which resource type runs each layer, and how many units each stage
 * gets, so that a throughput limit is met at the lowest cost (hps-plan(1)).
 *
 * The pieces, in the order a plan is made:
 *   cluster   the resource types one can rent (hps-cluster(5))
 *   problem   model + cluster + profiles reduced to numbers: per layer and
 *             type the time of a batch on one unit, per type price and limits
 *   eval      the cost model: an assignment (a type per layer) becomes stages,
 *             each provisioned with the fewest units that meet the limit
 *   solvers   rl (the default), exact, greedy, genetic, brute, fixed:TYPE
 *   plan      the result with servers, workers and placement (hps-plan(5))
 */
#ifndef HPS_PLAN_H
#define HPS_PLAN_H

#include <jansson.h>

#include "core/hps_core.h"
#include "model/hps_model.h"

#define PLAN_MAX_TYPES 16
#define PLAN_VERSION 1
/* Bandwidth in Gbit/s to bytes per millisecond. */
#define PLAN_GBPS_TO_BPMS 125000.0

/* ---- cluster (hps-cluster(5)) ------------------------------------------- */

typedef enum { PLAN_CPU, PLAN_GPU } plan_kind;

typedef struct {
    char name[HPS_NAME_MAX];
    plan_kind kind;
    char device[HPS_NAME_MAX]; /* the profile device it corresponds to */
    double price_per_hour;     /* dollars per unit and hour */
    int max_units;
    double nic_gbps;
    double power_w; /* 0 when not given */
    int threads;    /* cores of one unit, pinned together by the rankfile (default 1) */
} plan_rtype;

typedef struct {
    int a, b; /* type indices; a link is symmetric */
    double gbps, latency_us;
} plan_link;

typedef struct {
    char name[HPS_NAME_MAX];
    int units[PLAN_MAX_TYPES];
} plan_node;

typedef struct {
    char *path, *name;
    char digest[72]; /* of the file's canonical JSON */
    int n_types, n_links, n_nodes;
    plan_rtype types[PLAN_MAX_TYPES];
    plan_link *links;
    plan_node *nodes;
    double server_gbps; /* NIC of one parameter server */
} hps_cluster;

hps_cluster *hps_cluster_load(const char *path, hps_error *err);
hps_cluster *hps_cluster_parse(json_t *root, const char *name, hps_error *err);
void hps_cluster_free(hps_cluster *c);
int hps_cluster_find(const hps_cluster *c, const char *type_name); /* -1 if absent */

/* ---- the problem ---------------------------------------------------------- */

typedef enum { PLAN_OBJ_COST, PLAN_OBJ_TIME, PLAN_OBJ_ENERGY, PLAN_OBJ_EDP } plan_objective;
extern const char *const plan_objective_names[]; /* "cost", "time", "energy", "edp" */

typedef struct {
    int n_layers, n_types;
    double batch; /* samples per batch that every time refers to */
    const char **layer_names, **type_names;
    /* per layer */
    int *kind;                   /* hps_layer_kind */
    double *flops, *bytes_in, *bytes_out, *param_bytes, *sparse_bytes;
    /* per layer x type, [l * n_types + t] */
    double *t1_ms; /* forward + backward of one batch on one unit */
    double *par;   /* fitted parallel fraction a: t(k) = t1 ((1 - a) + a / k) */
    /* per type */
    double overhead_ms[PLAN_MAX_TYPES], price[PLAN_MAX_TYPES], power[PLAN_MAX_TYPES];
    double nic_bpms[PLAN_MAX_TYPES]; /* bytes per ms */
    int max_units[PLAN_MAX_TYPES];
    /* links between types: bytes per ms (0 = none listed) and latency in ms */
    double link_bpms[PLAN_MAX_TYPES][PLAN_MAX_TYPES], link_ms[PLAN_MAX_TYPES][PLAN_MAX_TYPES];
    /* what to meet and what to minimise */
    double min_throughput; /* samples per second */
    double samples;        /* per epoch */
    int epochs;
    plan_objective objective;
    /* prefix sums per type over layers, [t * (n_layers + 1) + i] */
    double *pre_serial, *pre_parallel;
    double *pre_param, *pre_sparse; /* [i] */
} plan_problem;

/* Allocates the per-layer arrays; the caller fills them, then prepares. */
plan_problem *plan_problem_new(int n_layers, int n_types);
void plan_problem_prepare(plan_problem *p); /* prefix sums; call after filling */
void plan_problem_free(plan_problem *p);
/* A seeded CTR-like instance for tests and the benchmark: the limit is
 * tightness times the largest throughput reachable; unit_limits gives each
 * type 1 to 6 units (else 64). */
plan_problem *plan_problem_random(uint64_t seed, int n_layers, int n_types, double tightness,
                                  int unit_limits);

/* The profiles hps-plan reads (hps-profile(5)), merged: one per device id. */
typedef struct hps_profiles hps_profiles;
hps_profiles *hps_profiles_new(void);
/* Adds the devices of one profile file (its text, for the digest); a device
 * id seen before is a conflict. */
int hps_profiles_add(hps_profiles *ps, const char *name, const char *text, size_t len,
                     hps_error *err);
int hps_profiles_count(const hps_profiles *ps);
const char *hps_profiles_digest(const hps_profiles *ps, int i);
const char *hps_profiles_name(const hps_profiles *ps, int i);
void hps_profiles_free(hps_profiles *ps);

/* Builds the problem: every cluster type's device must be profiled for this
 * model (same digest, same layers). */
plan_problem *plan_problem_build(const hps_model *m, const hps_cluster *c,
                                 const hps_profiles *ps, hps_error *err);

/* ---- the cost model ------------------------------------------------------- */

/* A stage's time per batch on k units is fixed_ms + scaled_ms / k. */
typedef struct {
    double fixed_ms, scaled_ms;
    double compute_ms;  /* on one unit, overhead included */
    double boundary_ms; /* activations in and out, and their gradients, on one unit */
    double ps_ms;       /* embedding rows pulled and gradients pushed, on one unit */
    double sync_ms;     /* ring allreduce factor: 2 P / nic, times (k - 1) / k */
} plan_law;

void plan_stage_law(const plan_problem *p, int first, int end, int type, plan_law *law);
double plan_law_ms(const plan_law *law, int units);
/* The fewest units within max_units meeting the limit, or 0 when none does. */
int plan_provision(const plan_problem *p, const plan_law *law, int type);
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
    int short_of_limit;       /* PLAN_SHORT_STAGE and/or PLAN_SHORT_LINK */
} plan_stage;

enum { PLAN_SHORT_STAGE = 1, PLAN_SHORT_LINK = 2 };

typedef struct {
    int n_stages;
    plan_stage *stages; /* n_layers slots */
    int units[PLAN_MAX_TYPES];
    int feasible;
    double violation; /* > 0 when infeasible: how far from feasible */
    double throughput, time_s, cost_per_hour, cost, power_w, energy_j, edp, objective;
    int bottleneck, bottleneck_is_link;
} plan_eval;

void plan_eval_init(plan_eval *e, const plan_problem *p);
void plan_eval_free(plan_eval *e);
/* Splits the assignment into stages, provisions them, and fills e. */
void plan_evaluate(const plan_problem *p, const int *assign, plan_eval *e);
/* Objective from the summed rates and the pipeline throughput. */
double plan_objective_value(const plan_problem *p, double cost_per_hour, double power_w,
                            double throughput);
/* Objective when feasible; a huge value growing with the violation otherwise,
 * so that searches can still move towards feasibility. */
double plan_score(const plan_eval *e);

/* ---- solvers -------------------------------------------------------------- */

typedef struct {
    uint64_t seed;
    long episodes;      /* rl: sampled plans; genetic: evaluations */
    double time_limit;  /* seconds; rl and genetic stop there */
    double bound_time;  /* seconds for the exact solver */
    int progress;       /* progress bar on stderr */
    int polish;         /* rl: local search on the best samples (default on) */
} plan_search_opts;

typedef struct {
    double episode, objective; /* best feasible objective after that many episodes */
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
    double mean_first, mean_last; /* rl: mean sampled score, first and last updates */
} plan_result;

void plan_result_init(plan_result *r, const plan_problem *p);
void plan_result_free(plan_result *r);
void plan_trace_add(plan_result *r, double episode, double objective);

int plan_solve_fixed(const plan_problem *p, int type, plan_result *r);
int plan_solve_greedy(const plan_problem *p, plan_result *r);
int plan_solve_brute(const plan_problem *p, plan_result *r, hps_error *err);
int plan_solve_exact(const plan_problem *p, const plan_search_opts *o, plan_result *r);
int plan_solve_genetic(const plan_problem *p, const plan_search_opts *o, plan_result *r);
int plan_solve_rl(const plan_problem *p, const plan_search_opts *o, plan_result *r);
/* The solver named by --algo (rl, exact, greedy, genetic, brute, fixed:TYPE). */
int plan_solve(const plan_problem *p, const hps_cluster *c, const char *algo, const plan_search_opts *so,
               plan_result *r, hps_error *err);
/* Steepest descent over single-layer and whole-stage type changes. */
void plan_local_search(const plan_problem *p, int *assign, double deadline);
/* Local search, then the DP moves (plan_dp_polish) and the local search
 * again while the DP moves improve the plan. */
#define PLAN_POLISH_WINDOW 12
void plan_descend(const plan_problem *p, int *assign, double deadline);
/* plan_descend, then `rounds` times: move a random run to a random type,
 * descend, keep the better plan. */
void plan_iterated_search(const plan_problem *p, int *assign, uint64_t seed, int rounds,
                          double deadline);
/* The rl polish's DP moves (plan_polish.c): re-choose the cut points of the
 * plan's stage sequence (also after retyping one stage), and the types of
 * windows of `window` layers, at a few throughput floors; keeps what the
 * cost model scores better.  Returns 1 when the plan improved. */
int plan_dp_polish(const plan_problem *p, int *assign, int window, double deadline);
/* Largest throughput any plan reaches (units shared by stages of one type are
 * not counted against each other, so this is an upper bound); assign gets it. */
double plan_max_throughput(const plan_problem *p, int *assign);

/* ---- the plan (hps-plan(5)) ----------------------------------------------- */

typedef struct {
    int rank, stage, type;
    double share;       /* fraction of the data set this worker reads */
    double batch_share; /* fraction of each batch it computes in its stage */
    int node, slot;     /* -1 when the cluster lists no nodes */
} plan_worker;

typedef struct {
    int rank, node, slot;
} plan_server;

typedef struct {
    int n_workers, n_servers;
    plan_worker *workers;
    plan_server *servers;
    double server_bytes_per_s; /* parameter-server traffic at the predicted throughput */
    double cross_node_bytes, round_robin_bytes; /* per step; < 0 when no nodes */
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
    const char *model_path, *cluster_path;
    const char *model_digest, *cluster_digest;
    int n_profiles;
    const char *const *profile_names, *const *profile_digests;
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

/* Reads the parts of a plan file that other tools rely on, checking them. */
typedef struct {
    json_t *root;
    const char *model_digest, *cluster_digest, *objective;
    double min_throughput, samples;
    int epochs, n_layers;
    const char **assign_names; /* n_layers type names */
} plan_file;
int plan_file_parse(json_t *root, const char *name, plan_file *pf, hps_error *err);
void plan_file_free(plan_file *pf);

/* "hps-plan --explain": per layer, what the plan would cost with that layer on
 * each type, everything else unchanged. */
void plan_explain(FILE *f, const plan_problem *p, const int *assign);
json_t *plan_explain_json(const plan_problem *p, const int *assign); /* "format": "hps-explain" */

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
