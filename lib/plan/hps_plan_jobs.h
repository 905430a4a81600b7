/* hps_plan_jobs: several training jobs on one shared cluster (hps-plan(1),
 * JOBS; the outer problem of SMD, Yu et al., INFOCOM 2021).
 *
 * Each job is planned alone first: its candidates are single-job plans
 * (the cost-optimal Pareto frontier from its throughput floor up, and the
 * cheapest plan on each type alone), each a vector of units per type, a
 * throughput, a duration and a cost.  The joint problem picks one candidate
 * per job and a start time for each, so that the units in use never exceed
 * a type's max_units, the budget holds and every deadline is met, at the
 * lowest total cost, weighted sum of completion times or makespan.
 *
 * A schedule is built from an order of the jobs by the serial schedule
 * generation scheme: each job in turn starts at the earliest time its units
 * are free for its whole duration, given the jobs placed before it.  For
 * the regular objectives here some order gives an optimal schedule, so the
 * exact solver enumerates orders and candidates (with a bound); the greedy
 * one starts from each job's cheapest candidate in Smith's order and moves
 * by the best marginal gain (a candidate changed, two jobs swapped).
 *
 * plan_jobs.c reads the jobs file and writes the joint plan; plan_jobs_solve.c
 * schedules and solves; plan_jobs_draw.c reads a joint plan back and draws it. */
#ifndef HPS_PLAN_JOBS_H
#define HPS_PLAN_JOBS_H

#include <jansson.h>
#include <stdio.h>

#include "core/hps_core.h"
#include "plan/hps_cluster.h"
#include "plan/hps_plan.h"

#define PLAN_JOBS_VERSION 1      /* the jobs file (hps-jobs) */
#define PLAN_JOINT_VERSION 1     /* the joint plan (hps-joint-plan) */
#define PLAN_JOBS_MAX 64
#define PLAN_JOBS_MAX_OPTIONS 24 /* candidates kept per job */
#define PLAN_JOBS_EXACT_MAX 8    /* --algo auto: exact up to this many jobs */

typedef enum { PLAN_JOBS_COST, PLAN_JOBS_COMPLETION, PLAN_JOBS_MAKESPAN } plan_jobs_objective;
extern const char *const plan_jobs_objective_names[]; /* "cost", "completion", "makespan" */

/* ---- the numbers the solvers see ------------------------------------------ */

typedef struct {
    int units[PLAN_MAX_TYPES]; /* taken from each type's max_units while it runs */
    double duration_s, cost;   /* cost: dollars for the whole job */
    double throughput, cost_per_hour;
    int index;                 /* where the job's plan came from (its candidate list) */
} plan_job_option;

typedef struct {
    int n_options;
    plan_job_option options[PLAN_JOBS_MAX_OPTIONS]; /* the cheapest first */
    double weight;
    double deadline_s; /* completion must be at most this; HUGE_VAL: none */
} plan_job_choice;

typedef struct {
    int n_jobs, n_types;
    int max_units[PLAN_MAX_TYPES];
    plan_job_choice jobs[PLAN_JOBS_MAX];
    plan_jobs_objective objective;
    double budget; /* dollars over all jobs; HUGE_VAL: none */
} plan_jobs_problem;

typedef struct {
    int option[PLAN_JOBS_MAX];   /* the candidate each job runs */
    int order[PLAN_JOBS_MAX];    /* the order its schedule was built in */
    double start_s[PLAN_JOBS_MAX], end_s[PLAN_JOBS_MAX];
    double cost, completion, makespan; /* completion: sum of weight x end */
    double objective;
    int feasible;  /* budget and deadlines met (units always are) */
    int optimal;   /* proven by the exact solver */
    long schedules; /* schedules built by the search */
} plan_jobs_schedule;

/* Starts in the given order (serial schedule generation), then the totals. */
void plan_jobs_schedule_build(const plan_jobs_problem *jp, const int *order, const int *option,
                              plan_jobs_schedule *s);
/* The exact search (orders x candidates, bounded); time_s caps it (the
 * best found so far stays, optimal 0). */
void plan_jobs_solve_exact(const plan_jobs_problem *jp, double time_s, plan_jobs_schedule *s);
void plan_jobs_solve_greedy(const plan_jobs_problem *jp, plan_jobs_schedule *s);
/* Each job's first candidate, the plan it gets planned alone, in file order:
 * what separate plans contending for the same units come to. */
void plan_jobs_separate(const plan_jobs_problem *jp, plan_jobs_schedule *s);
/* A seeded random instance for the tests and the bench: integer durations. */
void plan_jobs_random(plan_jobs_problem *jp, uint64_t seed, int n_jobs, int n_types, int n_options);

/* ---- the jobs file and the joint plan --------------------------------------- */

typedef struct {
    char *name, *model, *cluster_path; /* model: resolved against the jobs file */
    int n_profiles;
    char **profiles;
    double samples, min_throughput, deadline_s, weight;
    int epochs;
} plan_job_spec;

typedef struct {
    char *path, *cluster;   /* cluster: resolved against the jobs file */
    double budget;          /* HUGE_VAL: none */
    int n_jobs;
    plan_job_spec jobs[PLAN_JOBS_MAX];
} plan_jobs_file;

/* Reads and checks JOBS.json (hps-plan(5), JOBS FILE); errors name the file,
 * the job and the field, status 2. */
int plan_jobs_file_load(const char *path, plan_jobs_file *jf, hps_error *err);
int plan_jobs_file_parse(json_t *root, const char *path, plan_jobs_file *jf, hps_error *err);
void plan_jobs_file_free(plan_jobs_file *jf);

typedef struct plan_jobs plan_jobs; /* the jobs' inputs, candidates and plans */

/* Loads every job's inputs and plans its candidates (the exact single-job
 * solver within bound_s each). */
plan_jobs *plan_jobs_create(const plan_jobs_file *jf, double bound_s, hps_error *err);
void plan_jobs_free(plan_jobs *j);
plan_jobs_problem *plan_jobs_problem_of(plan_jobs *j);
/* The joint plan (hps-plan(5), JOINT PLAN): out names the file it goes to,
 * whose directory the recorded paths are relative to. */
json_t *plan_jobs_to_json(plan_jobs *j, const plan_jobs_schedule *s, const plan_jobs_schedule *separate,
                          const char *algo, const char *out, hps_error *err);

/* ---- a joint plan read back (plan_jobs_draw.c) ------------------------------- */

/* 1 when root is a joint plan (its "format"). */
int plan_joint_is(json_t *root);
typedef struct plan_joint plan_joint;
plan_joint *plan_joint_parse(json_t *root, const char *path, hps_error *err);
void plan_joint_free(plan_joint *jt);
void plan_joint_table(FILE *f, const plan_joint *jt);
void plan_joint_svg(FILE *f, const plan_joint *jt);

#endif
