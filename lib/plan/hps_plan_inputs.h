/* What the planner reads from files before it plans: the model, cluster and
 * profiles reduced to a problem (plan_inputs.c), with the key statistics of
 * hps-shard's manifest; a plan made before, read back against its inputs
 * (plan_reload.c); the stages of a run hps-train measured, for --calibrate
 * (plan_calib_run.c); and, when the plan found misses the limit, what cannot
 * meet it (plan_diagnose.c).  hps-plan's options name the files; the errors
 * here are the files' (status 2 for bad input), and the tool says what a
 * missing option is. */
#ifndef HPS_PLAN_INPUTS_H
#define HPS_PLAN_INPUTS_H

#include "core/hps_core.h"
#include "data/hps_shard.h"
#include "plan/hps_plan.h"

/* ---- the inputs (plan_inputs.c) --------------------------------------------- */

/* The files that make a problem, as given. */
typedef struct {
    const char *model, *cluster;
    const char *data_stats;          /* hps-shard's manifest.json (or its directory), or NULL */
    const char *const *profiles;     /* n_profiles paths; none: one profile from stdin */
    int n_profiles;
    int rows_on_servers;             /* --rows servers */
    int row_dtype, rowwise;          /* --row-dtype (hps_row_dtype), --sparse-optimizer rowwise-adagrad */
    int admit_after;                 /* --admit-after; 0: not given (every key a row) */
    const char *stdin_profile;       /* the text "-" stands for (a plan kept it); NULL: read stdin */
} plan_sources;

typedef struct {
    hps_model *model;
    hps_cluster *cluster;
    hps_profiles *profiles;
    plan_problem *problem;
    char *stdin_profile; /* the text of the profile read from stdin, for the plan to keep; or NULL */
} plan_inputs;

/* Loads the files src names (model and cluster must be given) into a
 * problem whose memory is checked; on error what was loaded stays in `in`
 * for plan_inputs_free.  in starts zeroed. */
int plan_inputs_load(const plan_sources *src, plan_inputs *in, hps_error *err);
void plan_inputs_free(plan_inputs *in);

/* --data-stats: the manifest hps-shard wrote at path (the file or its
 * directory); the model's slots take the statistics of the data's slot of
 * the same name, else of the same position. */
int plan_problem_data_stats(plan_problem *p, const hps_model *m, const char *path, hps_error *err);
/* One slot's cache curve from its manifest statistics: the shares of its top 1, 10, 100 and 1000 keys, and
 * every distinct key cached serving every lookup.  ks starts zeroed. */
void plan_slot_key_stats(const hps_slot_stats *st, plan_key_stats *ks);

/* ---- a plan made before (plan_reload.c) ------------------------------------- */

/* Its inputs default to the paths it records, their digests must match, and
 * its assignment is evaluated again. */
typedef struct {
    plan_file pf;
    plan_inputs in;
    int *assign; /* the plan's type of each layer, on in.cluster */
} plan_reloaded;

/* Reads the plan at path and checks it records what evaluating it needs. */
int plan_reload_file(const char *path, plan_reloaded *rl, hps_error *err);
/* What src does not name, from the plan's record. */
void plan_reload_sources(const plan_reloaded *rl, plan_sources *src);
/* Loads the inputs and the plan's problem (objective, limit, samples,
 * epochs, micro-batches) and assignment on them. */
int plan_reload_inputs(plan_reloaded *rl, const plan_sources *src, hps_error *err);
/* The search facts the plan records, in r and m.  They hold only for the
 * plan as hps-plan wrote it: one that evaluates to another objective
 * (edited, or other inputs) is neither optimal nor at a known gap; that is
 * warned of and its JSON's claims go. */
void plan_reload_search(plan_reloaded *rl, const plan_eval *e, plan_result *r, plan_meta *m);
void plan_reloaded_free(plan_reloaded *rl);

/* ---- the run --calibrate folds in (plan_calib_run.c) ----------------------- */

/* What hps-train measured (lib/train reads its metrics file: hps_train_run;
 * this module is below lib/train, so the tool hands the figures over). */
typedef struct {
    const char *type;      /* the resource type's name */
    int first, end, units; /* layers [first, end) */
    double measured_ms;    /* computing per batch over the run */
    int has_kept;          /* 0: a run that did not record where its rows were */
    plan_kept kept;        /* where it kept its rows */
} plan_run_stage;
typedef struct {
    const char *name;  /* the metrics file's name, for messages */
    const char *model; /* the model's name the run records */
    int batch, ranks;  /* ranks: under mpirun; 0: one process */
    int n_stages;
    const plan_run_stage *stages;
} plan_run;

/* The run's stages on in's types, checked against in (model, batch, layers,
 * types; src names the files in messages); one process ran each stage on one
 * unit, whatever the plan's units, and its rows in its own memory.  Returns
 * the count, or -1. */
int plan_calib_stages(const plan_inputs *in, const plan_sources *src, const plan_run *run, plan_calib_stage *st,
                      hps_error *err);

/* ---- no plan meets the limit (plan_diagnose.c) ------------------------------ */

/* e, the plan found, is infeasible: err names the stage, link or type that
 * cannot meet p->min_throughput, and the best throughput reachable. */
void plan_infeasible(const plan_problem *p, const plan_eval *e, hps_error *err);

#endif
