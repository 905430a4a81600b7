/* hps-plan: which resource type runs each layer and how many units each stage
 * gets, so that a throughput limit is met at the lowest cost.  See hps-plan(1).
 * This file is options and I/O; the work is in lib/plan. */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_cli.h"
#include "core/hps_blas.h"
#include "core/hps_io.h"
#include "core/hps_json.h"
#include "plan/hps_cluster.h"
#include "plan/hps_plan.h"
#include "plan/hps_plan_inputs.h"
#include "plan/hps_plan_jobs.h"
#include "profile/hps_profile.h"
#include "train/hps_train.h"

enum { FMT_JSON, FMT_TABLE, FMT_DOT, FMT_SVG };

typedef struct {
    plan_sources src; /* -m, -c, -p, --data-stats, --rows */
    const char **profile_args; /* the -p paths src.profiles names, until show or --explain takes the plan's */
    const char *output, *rankfile, *explain, *algo, *format_arg, *policy, *train_policy, *calibrate;
    const char *jobs, *objective_arg; /* --jobs; --objective's choices depend on it */
    double min_throughput, samples;
    double max_cost_per_hour, max_cost; /* the budget; 0: none */
    long epochs, micro_batches;
    int objective, objective_given, pareto;
    long instances;
    plan_search_opts search;
} options;

static const char usage_text[] =
    "usage: hps-plan -m MODEL -c CLUSTER [-p PROFILE]... --min-throughput N [options]\n"
    "       hps-plan -m MODEL -c CLUSTER [-p PROFILE]... --max-cost-per-hour X | --max-cost X [options]\n"
    "       hps-plan show PLAN [-f json|table|dot|svg] [-o FILE] [-m MODEL] [-c CLUSTER] [-p PROFILE]...\n"
    "       hps-plan --explain PLAN [-f text|json] [-m MODEL] [-c CLUSTER] [-p PROFILE]...\n"
    "       hps-plan --train-policy FILE [--instances N] [--episodes N] [-s S]\n"
    "       hps-plan --calibrate RUN -m MODEL -c CLUSTER -p PROFILE... [-o FILE]\n"
    "       hps-plan --jobs JOBS [--objective cost|completion|makespan] [-a exact|greedy] [-f json|table|svg]\n"
    "\n"
    "Decides which resource type runs each layer of MODEL and how many units each\n"
    "stage gets, so that at least N samples/s are trained at the lowest cost.\n"
    "With no -p the profile is read from stdin.  'show' renders a plan made\n"
    "before, from the inputs it records (or those given).\n"
    "\n"
    "  -m, --model FILE         the model (hps-model(5))\n"
    "  -c, --cluster FILE       the resource types (hps-cluster(5))\n"
    "  -p, --profile FILE       a profile (hps-profile(5)); repeatable; default stdin\n"
    "  -t, --min-throughput N   samples per second the plan must reach\n"
    "      --objective WHAT     cost (default), time, energy, edp or cost-per-hour; --jobs:\n"
    "                           cost, completion (weighted sum of completion times) or makespan\n"
    "      --jobs FILE          plan several jobs on one shared cluster (hps-plan(5), JOBS FILE)\n"
    "      --max-cost-per-hour X  the fastest plan of at most X $/hour (with or without\n"
    "                           --min-throughput)\n"
    "      --max-cost X         the fastest plan whose job costs at most X $\n"
    "      --data-stats FILE    hps-shard's manifest.json: key statistics for the\n"
    "                           hot-row caches and the servers' skew\n"
    "      --rows WHERE         auto (default: servers, HBM or a hot-row cache) or servers\n"
    "      --row-dtype TYPE     fp32 (default), fp16 or bf16: the tables' rows as hps-train stores them\n"
    "      --sparse-optimizer NAME  adagrad (default) or rowwise-adagrad (one accumulator a row)\n"
    "      --admit-after N      rows only for keys seen N times (their share from --data-stats)\n"
    "      --micro-batches N    micro-batches hps-train pipelines a batch in (default one per stage)\n"
    "  -a, --algo ALGO          rl (default), exact, greedy, genetic, polish, brute, fixed:TYPE\n"
    "  -s, --seed S             seed of rl, genetic and polish (default 1)\n"
    "      --samples N          samples per epoch (default 100000000)\n"
    "      --epochs E           epochs (default 1)\n"
    "      --episodes N         plans rl's policy samples (default 2048)\n"
    "      --evaluations N      cost-model evaluations rl, genetic or polish may make (default 1000000)\n"
    "      --time-limit S       safety cap in seconds on rl, genetic and polish (default 60)\n"
    "      --bound-time S       seconds for the exact solver, alone or for the gap (default 5)\n"
    "      --no-polish          rl: keep the best sampled plan as it is\n"
    "      --policy FILE        rl: start from this policy instead of the built-in one\n"
    "      --train-policy FILE  pre-train an rl policy over random instances, write it to FILE\n"
    "      --instances N        --train-policy: instances to train over (default 512)\n"
    "  -f, --format FMT         json (default), table, dot or svg; --pareto: json, table or svg;\n"
    "                           --explain: text (default) or json\n"
    "  -o, --output FILE        write the plan there (default stdout)\n"
    "      --rankfile FILE      write an Open MPI rankfile for the plan's ranks\n"
    "      --pareto[=N]         sweep the limit up to the fastest plan; N points (default 8)\n"
    "      --explain PLAN       per layer, what PLAN would cost with it on each type\n"
    "      --calibrate RUN      fold the stage times an hps-train run measured (its\n"
    "                           metrics file) into the profiles; print the calibrated profile\n"
    "  -q, --quiet              errors only\n"
    "  -v, --verbose            more on stderr\n"
    "  -h, --help               this text\n"
    "  -V, --version            version and features\n";

enum { OPT_OBJECTIVE = 256, OPT_SAMPLES, OPT_EPOCHS, OPT_EPISODES, OPT_TIME_LIMIT, OPT_BOUND_TIME,
       OPT_NO_POLISH, OPT_RANKFILE, OPT_PARETO, OPT_EXPLAIN, OPT_CALIBRATE, OPT_DATA_STATS, OPT_ROWS, OPT_EVALUATIONS,
       OPT_POLICY, OPT_TRAIN_POLICY, OPT_INSTANCES, OPT_MICRO, OPT_JOBS, OPT_MAX_RATE, OPT_MAX_COST,
       OPT_ROW_DTYPE, OPT_SPARSE_OPTIMIZER, OPT_ADMIT_AFTER };

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"cluster", required_argument, NULL, 'c'},
    {"profile", required_argument, NULL, 'p'},
    {"min-throughput", required_argument, NULL, 't'},
    {"objective", required_argument, NULL, OPT_OBJECTIVE},
    {"max-cost-per-hour", required_argument, NULL, OPT_MAX_RATE},
    {"max-cost", required_argument, NULL, OPT_MAX_COST},
    {"data-stats", required_argument, NULL, OPT_DATA_STATS},
    {"rows", required_argument, NULL, OPT_ROWS},
    {"row-dtype", required_argument, NULL, OPT_ROW_DTYPE},
    {"sparse-optimizer", required_argument, NULL, OPT_SPARSE_OPTIMIZER},
    {"admit-after", required_argument, NULL, OPT_ADMIT_AFTER},
    {"algo", required_argument, NULL, 'a'},
    {"seed", required_argument, NULL, 's'},
    {"samples", required_argument, NULL, OPT_SAMPLES},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"micro-batches", required_argument, NULL, OPT_MICRO},
    {"episodes", required_argument, NULL, OPT_EPISODES},
    {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
    {"bound-time", required_argument, NULL, OPT_BOUND_TIME},
    {"no-polish", no_argument, NULL, OPT_NO_POLISH},
    {"evaluations", required_argument, NULL, OPT_EVALUATIONS},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"train-policy", required_argument, NULL, OPT_TRAIN_POLICY},
    {"instances", required_argument, NULL, OPT_INSTANCES},
    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    {"rankfile", required_argument, NULL, OPT_RANKFILE},
    {"pareto", optional_argument, NULL, OPT_PARETO},
    {"explain", required_argument, NULL, OPT_EXPLAIN},
    {"calibrate", required_argument, NULL, OPT_CALIBRATE},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static _Noreturn void die(const hps_error *err)
{
    hps_report(err);
    exit(err->code);
}

/* Bad input files (not the command line): the error alone, status 2. */
static _Noreturn __attribute__((format(printf, 1, 2))) void bad_input(const char *fmt, ...)
{
    hps_error err = {.code = HPS_EXIT_USAGE};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err.msg, sizeof err.msg, fmt, ap);
    va_end(ap);
    die(&err);
}

static void parse_options(int argc, char **argv, options *o)
{
    static const char *const rows_choices[] = {"auto", "servers", NULL};
    memset(o, 0, sizeof *o);
    o->samples = 1e8;
    o->epochs = 1;
    o->algo = "rl";
    o->search = (plan_search_opts){.seed = 1, .episodes = 2048, .evaluations = 1000000, .time_limit = 60,
                                   .bound_time = 5, .polish = 1};
    o->instances = 512;
    o->profile_args = hps_calloc((size_t)argc, sizeof *o->profile_args);
    o->src.profiles = o->profile_args;
    int c;
    while ((c = hps_cli_getopt(argc, argv, "m:c:p:t:a:s:f:o:qvhV", long_options)) != -1) {
        switch (c) {
        case 'm': o->src.model = optarg; break;
        case 'c': o->src.cluster = optarg; break;
        case 'p': o->profile_args[o->src.n_profiles++] = optarg; break;
        case 't': o->min_throughput = hps_cli_rate("--min-throughput", optarg); break;
        case OPT_OBJECTIVE:
            o->objective_arg = optarg;
            o->objective_given = 1;
            break;
        case OPT_JOBS: o->jobs = optarg; break;
        case OPT_MAX_RATE: o->max_cost_per_hour = hps_cli_positive("--max-cost-per-hour", optarg); break;
        case OPT_MAX_COST: o->max_cost = hps_cli_positive("--max-cost", optarg); break;
        case 'a': o->algo = optarg; break;
        case 's': o->search.seed = (uint64_t)hps_cli_long("--seed", optarg, 0, 2147483647L); break;
        case OPT_SAMPLES: o->samples = hps_cli_rate("--samples", optarg); break;
        case OPT_EPOCHS: o->epochs = hps_cli_count("--epochs", optarg, 1, 1000000); break;
        case OPT_MICRO: o->micro_batches = hps_cli_long("--micro-batches", optarg, 1, HPS_MAX_MICRO_BATCHES); break;
        case OPT_EPISODES: o->search.episodes = hps_cli_count("--episodes", optarg, 1, 100000000); break;
        case OPT_TIME_LIMIT: o->search.time_limit = hps_cli_positive("--time-limit", optarg); break;
        case OPT_BOUND_TIME: o->search.bound_time = hps_cli_positive("--bound-time", optarg); break;
        case OPT_NO_POLISH: o->search.polish = 0; break;
        case OPT_EVALUATIONS: o->search.evaluations = hps_cli_count("--evaluations", optarg, 1, 1000000000); break;
        case OPT_POLICY: o->policy = optarg; break;
        case OPT_TRAIN_POLICY: o->train_policy = optarg; break;
        case OPT_INSTANCES: o->instances = hps_cli_count("--instances", optarg, 1, 1000000); break;
        case 'f': o->format_arg = optarg; break;
        case 'o': o->output = optarg; break;
        case OPT_RANKFILE: o->rankfile = optarg; break;
        case OPT_PARETO: o->pareto = optarg ? (int)hps_cli_long("--pareto", optarg, 1, 1000) : 8; break;
        case OPT_EXPLAIN: o->explain = optarg; break;
        case OPT_CALIBRATE: o->calibrate = optarg; break;
        case OPT_DATA_STATS: o->src.data_stats = optarg; break;
        case OPT_ROWS: o->src.rows_on_servers = hps_cli_choice("--rows", optarg, rows_choices); break;
        case OPT_ROW_DTYPE: o->src.row_dtype = hps_cli_choice("--row-dtype", optarg, hps_row_dtype_names); break;
        case OPT_SPARSE_OPTIMIZER:
            o->src.rowwise = hps_cli_choice("--sparse-optimizer", optarg, plan_sparse_optimizer_names);
            break;
        case OPT_ADMIT_AFTER: o->src.admit_after = (int)hps_cli_count("--admit-after", optarg, 1, 65535); break;
        case 'q': hps_cli_quiet(); break;
        case 'v': hps_cli_verbose(); break;
        case 'h': fputs(usage_text, stdout); exit(0);
        case 'V': hps_cli_version(stdout); exit(0);
        }
    }
    o->search.progress = hps_stderr_is_tty() && hps_display_level >= 2;
    if (o->objective_arg)
        o->objective = hps_cli_choice("--objective", o->objective_arg,
                                      o->jobs ? plan_jobs_objective_names : plan_objective_names);
}

/* -f: its choices depend on what is printed. */
static int format_of(const options *o)
{
    static const char *const plan_formats[] = {"json", "table", "dot", "svg", NULL};
    static const char *const pareto_formats[] = {"json", "table", "svg", NULL};
    static const char *const explain_formats[] = {"text", "json", NULL};
    if (o->explain) {
        int f = o->format_arg ? hps_cli_choice("--format", o->format_arg, explain_formats) : 0;
        return f ? FMT_JSON : FMT_TABLE;
    }
    if (o->pareto || o->jobs) {
        static const int map[] = {FMT_JSON, FMT_TABLE, FMT_SVG};
        return o->format_arg ? map[hps_cli_choice("--format", o->format_arg, pareto_formats)] : FMT_JSON;
    }
    return o->format_arg ? hps_cli_choice("--format", o->format_arg, plan_formats) : FMT_JSON;
}

/* The files -m, -c, -p and --data-stats name, which must include a model
 * and a cluster. */
static void load_inputs(const options *o, plan_inputs *in)
{
    hps_error err;
    if (!o->src.model) hps_usage_error("missing -m MODEL");
    if (!o->src.cluster) hps_usage_error("missing -c CLUSTER");
    if (plan_inputs_load(&o->src, in, &err)) die(&err);
}

static void check_power(const plan_problem *p, const hps_cluster *c)
{
    if (p->objective != PLAN_OBJ_ENERGY && p->objective != PLAN_OBJ_EDP) return;
    for (int t = 0; t < p->n_types; t++)
        if (p->power[t] <= 0)
            bad_input("%s: resource '%s': power_w is needed for --objective %s", c->path, p->type_names[t],
                            plan_objective_names[p->objective]);
}

static void solve(const plan_problem *p, const hps_cluster *c, const char *algo, const plan_search_opts *so,
                  plan_result *r)
{
    hps_error err;
    if (plan_solve(p, c, algo, so, r, &err) == 0) {
        if (r->timed_out && strcmp(algo, "exact") != 0)
            hps_warnf("--time-limit %g s cut the %s search after %ld evaluations; the plan depends on this "
                      "machine's speed", so->time_limit, algo, r->episodes);
        return;
    }
    if (err.code == HPS_EXIT_USAGE) hps_usage_error("%s", err.msg); /* --algo */
    die(&err);
}

/* --max-cost-per-hour, --max-cost: the fastest plan within; p's limit and
 * objective become those the plan was found at (a plan file's record). */
static void solve_budget(const options *o, plan_problem *p, const hps_cluster *c, plan_result *r)
{
    hps_error err;
    int per_hour = o->max_cost_per_hour > 0;
    double most = per_hour ? o->max_cost_per_hour : o->max_cost;
    if (plan_solve_budget(p, c, o->algo, &o->search, per_hour, most, r, &err) == 0) return;
    if (err.code == HPS_EXIT_USAGE) hps_usage_error("%s", err.msg); /* --algo */
    die(&err);
}

/* The optimum for the gap, when the exact solver finishes in --bound-time. */
static double optimum(const plan_problem *p, const char *algo, const plan_search_opts *so,
                      const plan_result *r, const plan_eval *e)
{
    if (strcmp(algo, "exact") == 0 || strcmp(algo, "brute") == 0)
        return r->optimal && e->feasible ? e->objective : -1;
    plan_result x;
    plan_eval xe;
    plan_result_init(&x, p);
    plan_eval_init(&xe, p);
    plan_solve_exact(p, so, &x);
    plan_evaluate(p, x.assign, &xe);
    double v = x.optimal && xe.feasible ? xe.objective : -1;
    plan_result_free(&x);
    plan_eval_free(&xe);
    return v;
}

/* No plan meets the limit: the error names what cannot. */
static _Noreturn void infeasible(const plan_problem *p, const plan_eval *e)
{
    hps_error err;
    plan_infeasible(p, e, &err);
    die(&err);
}

/* The inputs a plan records, relative to the plan file (as given when it
 * goes to stdout), so that a plan moved with its inputs still finds them. */
typedef struct {
    int n;                 /* profiles */
    const char **names, **digests;
    char **owned;          /* n + 3: the profiles', the model's, the cluster's, the data stats' */
} recorded_inputs;

static void fill_meta(const options *o, const plan_inputs *in, plan_meta *m, recorded_inputs *ri)
{
    const char *out = o->output ? o->output : "-";
    int n = ri->n = hps_profiles_count(in->profiles);
    ri->names = hps_calloc((size_t)n, sizeof *ri->names);
    ri->digests = hps_calloc((size_t)n, sizeof *ri->digests);
    ri->owned = hps_calloc((size_t)n + 3, sizeof *ri->owned);
    for (int i = 0; i < n; i++) {
        const char *name = hps_profiles_name(in->profiles, i);
        ri->owned[i] = strcmp(name, "<stdin>") == 0 ? hps_strdup(name) : hps_path_relative(out, name);
        ri->names[i] = ri->owned[i];
        ri->digests[i] = hps_profiles_digest(in->profiles, i);
    }
    ri->owned[n] = hps_path_relative(out, o->src.model);
    ri->owned[n + 1] = hps_path_relative(out, o->src.cluster);
    ri->owned[n + 2] = o->src.data_stats ? hps_path_relative(out, o->src.data_stats) : NULL;
    *m = (plan_meta){.model_path = ri->owned[n], .cluster_path = ri->owned[n + 1],
                     .data_stats_path = ri->owned[n + 2], .model_digest = in->model->digest,
                     .cluster_digest = in->cluster->digest, .n_profiles = n, .profile_names = ri->names,
                     .profile_digests = ri->digests, .stdin_profile = in->stdin_profile, .model_name = in->model->name, .algorithm = o->algo,
                     .opts = o->search, .exact_objective = -1};
}

static void recorded_inputs_free(recorded_inputs *ri)
{
    for (int i = 0; i < ri->n + 3; i++) free(ri->owned[i]);
    free(ri->owned);
    free(ri->names);
    free(ri->digests);
}

/* A plan in the format -f names; json_doc is the plan as JSON when it is known already. */
static void write_output(const options *o, const plan_inputs *in, const plan_eval *e, const plan_layout *l,
                         const plan_result *r, const plan_meta *m, json_t *json_doc)
{
    hps_error err;
    const char *path = o->output ? o->output : "-";
    int format = format_of(o);
    if (format == FMT_JSON) {
        json_t *root = json_doc ? json_incref(json_doc) : plan_to_json(in->problem, e, l, r, m, in->cluster);
        int rc = hps_json_write(path, root, &err);
        json_decref(root);
        if (rc) die(&err);
        return;
    }
    hps_out *out = hps_out_open(path, &err);
    if (!out) die(&err);
    FILE *f = hps_out_file(out);
    if (format == FMT_TABLE) plan_print_table(f, in->problem, e, l, r, m);
    else if (format == FMT_DOT) plan_print_dot(f, in->model, in->problem, e, l);
    else plan_draw_svg(f, in->model, in->problem, e, l);
    if (hps_out_commit(out, &err)) die(&err);
}


/* The layout of the plan e evaluates, --rankfile, and the plan itself. */
static void emit_plan(const options *o, const plan_inputs *in, const plan_eval *e, const plan_result *r,
                      const plan_meta *m, json_t *json_doc)
{
    hps_error err;
    plan_layout l;
    if (plan_layout_make(in->problem, in->cluster, e, &l, &err)) die(&err);
    if (o->rankfile && plan_rankfile_write(o->rankfile, in->cluster, &l, &err)) die(&err);
    write_output(o, in, e, &l, r, m, json_doc);
    plan_layout_free(&l);
}

static void plan_once(const options *o, plan_inputs *in)
{
    plan_problem *p = in->problem;
    plan_result r;
    plan_eval e;
    plan_meta m;
    recorded_inputs ri;
    plan_result_init(&r, p);
    plan_eval_init(&e, p);
    if (o->max_cost_per_hour > 0 || o->max_cost > 0) solve_budget(o, p, in->cluster, &r);
    else solve(p, in->cluster, o->algo, &o->search, &r);
    plan_evaluate(p, r.assign, &e);
    if (!e.feasible) infeasible(p, &e);
    fill_meta(o, in, &m, &ri);
    m.exact_objective = optimum(p, o->algo, &o->search, &r, &e);
    hps_log(3, "hps-plan: %s: %.6g in %.3f s (%ld episodes)\n", o->algo, e.objective, r.seconds, r.episodes);
    emit_plan(o, in, &e, &r, &m, NULL);
    plan_eval_free(&e);
    plan_result_free(&r);
    recorded_inputs_free(&ri);
}

static void pareto(const options *o, plan_inputs *in)
{
    plan_problem *p = in->problem;
    plan_frontier fr;
    hps_error err;
    int *a = hps_malloc((size_t)p->n_layers * sizeof *a);
    if (plan_max_throughput(p, a) < p->min_throughput) {
        plan_eval e;
        plan_eval_init(&e, p);
        plan_evaluate(p, a, &e);
        infeasible(p, &e);
    }
    free(a);
    if (plan_pareto(p, in->cluster, o->algo, &o->search, o->pareto, &fr, &err)) {
        if (err.code == HPS_EXIT_USAGE) hps_usage_error("%s", err.msg);
        die(&err);
    }
    fr.budget = o->max_cost_per_hour > 0 ? o->max_cost_per_hour : o->max_cost; /* the objective's unit */
    const char *path = o->output ? o->output : "-";
    int format = format_of(o), rc = 0;
    if (format == FMT_JSON) {
        json_t *root = plan_frontier_json(p, &fr, o->algo);
        rc = hps_json_write(path, root, &err);
        json_decref(root);
    } else {
        hps_out *out = hps_out_open(path, &err);
        if (!out) die(&err);
        if (format == FMT_TABLE) plan_frontier_table(hps_out_file(out), p, &fr);
        else plan_frontier_svg(hps_out_file(out), p, &fr);
        rc = hps_out_commit(out, &err);
    }
    plan_frontier_free(&fr);
    if (rc) die(&err);
}

/* A plan made before, on the inputs given or, those not given, the ones it
 * records. */
static void reload(options *o, const char *path, plan_reloaded *rl)
{
    hps_error err;
    if (plan_reload_file(path, rl, &err)) die(&err);
    plan_reload_sources(rl, &o->src);
    if (!o->src.n_profiles && rl->pf.stdin_profile) /* a plan of an hps-plan that kept no copy */
        hps_usage_error("%s: its profile was read from stdin and the plan holds no copy; name the profile: "
                        "hps-plan show %s -p PROFILE (the file hps-profile -o wrote)", hps_path_name(path),
                        path);
    if (!o->src.model) hps_usage_error("missing -m MODEL");
    if (!o->src.cluster) hps_usage_error("missing -c CLUSTER");
    if (plan_reload_inputs(rl, &o->src, &err)) die(&err);
}

/* --explain PLAN: per layer, what the plan would cost with it on each type. */
static void explain(options *o)
{
    hps_error err;
    plan_reloaded rl;
    reload(o, o->explain, &rl);
    const char *path = o->output ? o->output : "-";
    int rc;
    if (format_of(o) == FMT_JSON) {
        json_t *root = plan_explain_json(rl.in.problem, rl.assign);
        rc = hps_json_write(path, root, &err);
        json_decref(root);
    } else {
        hps_out *out = hps_out_open(path, &err);
        if (!out) die(&err);
        plan_explain(hps_out_file(out), rl.in.problem, rl.assign);
        rc = hps_out_commit(out, &err);
    }
    if (rc) die(&err);
    plan_reloaded_free(&rl);
}

/* The run as lib/plan takes it (lib/train, above lib/plan, reads the file). */
static plan_run run_of(const hps_train_run *run, const char *name, plan_run_stage *st)
{
    for (int s = 0; s < run->n_stages; s++) {
        const hps_train_run_stage *r = &run->stages[s];
        st[s] = (plan_run_stage){r->type, r->first, r->end, r->units, r->measured_ms, .has_kept = run->has_rows};
        for (int k = 0; run->has_rows && plan_rows_names[k]; k++)
            if (strcmp(r->rows, plan_rows_names[k]) == 0)
                st[s].kept = (plan_kept){k, (double)r->cache_rows, r->hit_rate, r->shards, r->servers_beside};
    }
    return (plan_run){.name = name, .model = run->model, .batch = run->batch, .ranks = run->ranks,
                      .n_stages = run->n_stages, .stages = st};
}

/* The -p profiles as one document. */
static json_t *profiles_doc(const options *o)
{
    hps_error err;
    int n = o->src.n_profiles;
    json_t **docs = hps_calloc((size_t)n, sizeof *docs);
    for (int i = 0; i < n; i++)
        if (hps_json_load(o->profile_args[i], &docs[i], &err)) die(&err);
    json_t *doc = n == 1 ? json_incref(docs[0]) : hps_profile_merge(docs, o->profile_args, n, &err);
    for (int i = 0; i < n; i++) json_decref(docs[i]);
    free(docs);
    if (!doc) die(&err);
    return doc;
}

/* Where the model's time of a calibrated stage kept its rows, for its line:
 * ", rows cache of 2000 at the run's hit rate 0.8123". */
static void priced_rows(const plan_calib_stage *st, char *buf, size_t n)
{
    const plan_kept *k = &st->kept;
    int len = snprintf(buf, n, ", rows %s", plan_rows_names[st->priced_rows]);
    if (len < 0 || (size_t)len >= n) return;
    if (!st->has_kept) snprintf(buf + len, n - (size_t)len, " (the planner's; the run does not say)");
    else if (k->rows == PLAN_ROWS_CACHE && k->hit_rate >= 0)
        snprintf(buf + len, n - (size_t)len, " of %.0f at the run's hit rate %.4f", k->cache_rows, k->hit_rate);
    else if (k->rows == PLAN_ROWS_CACHE) snprintf(buf + len, n - (size_t)len, " of %.0f", k->cache_rows);
    else if (k->shards) snprintf(buf + len, n - (size_t)len, " in %d shards", k->shards);
    else if (k->rows == PLAN_ROWS_SERVERS && !st->in_process)
        snprintf(buf + len, n - (size_t)len, k->beside ? " beside" : " apart");
}

/* --calibrate RUN: each stage's layers scaled so that the model's time of
 * the stage, its rows where the run kept them, is the run's (hps-plan(1),
 * CALIBRATION). */
static void calibrate(const options *o)
{
    hps_error err;
    hps_train_run run;
    if (!o->src.n_profiles) hps_usage_error("--calibrate needs the profiles as files: -p PROFILE");
    if (hps_train_run_load(o->calibrate, &run, &err)) die(&err);
    plan_inputs in = {0};
    load_inputs(o, &in);
    const char *name = hps_path_name(o->calibrate);
    plan_run_stage rs[HPS_TRAIN_MAX_STAGES];
    plan_run pr = run_of(&run, name, rs);
    plan_calib_stage st[HPS_TRAIN_MAX_STAGES];
    int n = plan_calib_stages(&in, &o->src, &pr, st, &err);
    if (n < 0) die(&err);
    if (!run.has_rows)
        hps_log(2, "hps-plan: %s: its summary does not say where the stages kept their rows (an hps-train before "
                   "it): each stage priced with its rows where the planner would keep them\n", name);
    double step_ms = 1000.0 * run.batch / run.samples_per_s;
    in.problem->micro_batches = run.micro_batches; /* the bubble the run had */
    plan_calib_targets(st, n, step_ms, plan_bubble(in.problem, n));
    plan_calibrate(in.problem, st, n);
    json_t *doc = profiles_doc(o);
    for (int s = 0; s < n; s++) {
        const plan_rtype *r = &in.cluster->types[st[s].type];
        hps_profile_scale_layers(doc, r->device, st[s].first, st[s].end, st[s].factor, name);
        char rows[96];
        priced_rows(&st[s], rows, sizeof rows);
        hps_log(2, "hps-plan: stage %d (layers %d-%d on '%s', %d unit%s%s): model %.3f ms, run %.3f ms "
                   "(%.3f computing): device '%s' layers x%.4g\n",
                s, st[s].first, st[s].end - 1, r->name, st[s].units, st[s].units == 1 ? "" : "s", rows,
                st[s].before_ms, st[s].target_ms, st[s].measured_ms, r->device, st[s].factor);
        if (st[s].clamped)
            hps_warnf("%s: stage %d: the model's terms other than its layers take %.3f ms, more than the run's "
                      "%.3f: its layers only go down to x%g", name, s, st[s].after_ms, st[s].target_ms,
                      PLAN_CALIB_MIN_FACTOR);
    }
    int rc = hps_json_write(o->output ? o->output : "-", doc, &err);
    json_decref(doc);
    plan_inputs_free(&in);
    if (rc) die(&err);
}

/* --train-policy FILE: the rl policy pre-trained over seeded random
 * instances (make plan-policy regenerates the built-in one this way). */
static void train_policy(const options *o)
{
    hps_error err;
    plan_policy *pol = plan_policy_pretrain(o->search.seed, (int)o->instances, o->search.episodes,
                                            hps_stderr_is_tty() && hps_display_level >= 2);
    int rc = plan_policy_save(pol, o->train_policy, &err);
    plan_policy_free(pol);
    if (rc) die(&err);
}

/* The plan, or the --pareto frontier, of the inputs at the options' limit. */
static void plan_new(options *o)
{
    hps_error err;
    plan_policy *policy = NULL;
    if (o->policy) {
        if (!(policy = plan_policy_load(o->policy, &err))) die(&err);
        o->search.policy = policy;
    }
    int budget = o->max_cost_per_hour > 0 || o->max_cost > 0;
    if (o->max_cost_per_hour > 0 && o->max_cost > 0)
        hps_usage_error("--max-cost-per-hour and --max-cost: give one budget");
    if (budget && o->objective_given)
        hps_usage_error("--objective: a budget (--max-cost-per-hour, --max-cost) asks for the fastest plan within it");
    if (!(o->min_throughput > 0) && (!budget || o->pareto)) hps_usage_error("missing --min-throughput N (or a budget: --max-cost-per-hour X)");
    plan_inputs in = {0};
    load_inputs(o, &in);
    plan_problem *p = in.problem;
    p->min_throughput = o->min_throughput;
    p->samples = o->samples;
    p->epochs = (int)o->epochs;
    p->micro_batches = (int)o->micro_batches;
    p->objective = o->objective;
    if (budget) p->objective = o->max_cost_per_hour > 0 ? PLAN_OBJ_RATE : PLAN_OBJ_COST;
    check_power(p, in.cluster);
    if (o->pareto) pareto(o, &in);
    else plan_once(o, &in);
    plan_inputs_free(&in);
    plan_policy_free(policy);
}

/* A joint plan in the format -f names (JSON, or read back and drawn). */
static void write_joint(const options *o, json_t *root, const char *name)
{
    hps_error err;
    const char *path = o->output ? o->output : "-";
    int format = format_of(o);
    if (format == FMT_JSON) {
        if (hps_json_write(path, root, &err)) die(&err);
        return;
    }
    plan_joint *jt = plan_joint_parse(root, name, &err);
    if (!jt) die(&err);
    hps_out *out = hps_out_open(path, &err);
    if (!out) die(&err);
    if (format == FMT_TABLE) plan_joint_table(hps_out_file(out), jt);
    else plan_joint_svg(hps_out_file(out), jt);
    plan_joint_free(jt);
    if (hps_out_commit(out, &err)) die(&err);
}

/* --rankfile PREFIX with --jobs: each job's ranks in PREFIX.JOB. */
static void write_job_rankfiles(const char *prefix, json_t *root, const char *cluster)
{
    hps_error err;
    json_t *jobs = json_object_get(root, "jobs"), *job;
    size_t i;
    json_array_foreach(jobs, i, job) {
        json_t *lines = json_object_get(job, "rankfile"), *line;
        if (!json_is_array(lines)) hps_usage_error("--rankfile: %s lists no nodes to place ranks on", cluster);
        char *path = hps_malloc(strlen(prefix) + HPS_NAME_MAX + 2);
        sprintf(path, "%s.%s", prefix, json_string_value(json_object_get(job, "name")));
        hps_out *out = hps_out_open(path, &err);
        if (!out) die(&err);
        size_t k;
        json_array_foreach(lines, k, line) fprintf(hps_out_file(out), "%s\n", json_string_value(line));
        free(path);
        if (hps_out_commit(out, &err)) die(&err);
    }
}

/* --jobs JOBS: several jobs on one cluster (hps-plan(1), JOBS). */
static void plan_jobs_new(const options *o)
{
    hps_error err;
    const char *algo = strcmp(o->algo, "rl") == 0 ? "auto" : o->algo;
    if (strcmp(algo, "auto") != 0 && strcmp(algo, "exact") != 0 && strcmp(algo, "greedy") != 0)
        hps_usage_error("--algo: '%s' is not one of exact, greedy with --jobs", algo);
    if (o->src.model || o->src.cluster || o->src.n_profiles || o->src.data_stats || o->min_throughput > 0 ||
        o->pareto || o->explain || o->calibrate || o->train_policy || o->max_cost_per_hour > 0 ||
        o->max_cost > 0)
        hps_usage_error("--jobs: the jobs file names each job's model, profiles and limit, the cluster and "
                        "the budget; -m, -c, -p, -t, --data-stats, --pareto, --explain, --calibrate, "
                        "--train-policy, --max-cost-per-hour and --max-cost go without it");
    plan_jobs_file jf;
    if (plan_jobs_file_load(o->jobs, &jf, &err)) die(&err);
    plan_jobs *j = plan_jobs_create(&jf, o->search.bound_time, &err);
    if (!j) die(&err);
    plan_jobs_problem *jp = plan_jobs_problem_of(j);
    jp->objective = o->objective;
    if (strcmp(algo, "auto") == 0) algo = jp->n_jobs <= PLAN_JOBS_EXACT_MAX ? "exact" : "greedy";
    plan_jobs_schedule s, sep;
    if (strcmp(algo, "exact") == 0) plan_jobs_solve_exact(jp, o->search.bound_time, &s);
    else plan_jobs_solve_greedy(jp, &s);
    plan_jobs_separate(jp, &sep);
    if (!s.feasible) {
        double cheapest = 0;
        for (int i = 0; i < jp->n_jobs; i++) cheapest += jp->jobs[i].options[0].cost;
        hps_error e = {.code = HPS_EXIT_RUNTIME};
        if (cheapest > jp->budget)
            snprintf(e.msg, sizeof e.msg, "%s: budget $%.6g is below the jobs' cheapest plans, $%.6g in all",
                     hps_path_name(o->jobs), jp->budget, cheapest);
        else
            snprintf(e.msg, sizeof e.msg, "%s: no joint plan meets every deadline%s (the jobs' candidates at "
                     "their fastest, one after another where the units are short)", hps_path_name(o->jobs),
                     jp->budget < HUGE_VAL ? " within the budget" : "");
        die(&e);
    }
    json_t *root = plan_jobs_to_json(j, &s, &sep, algo, o->output ? o->output : "-", &err);
    if (!root) die(&err);
    if (o->rankfile) write_job_rankfiles(o->rankfile, root, jf.cluster);
    write_joint(o, root, o->jobs);
    json_decref(root);
    plan_jobs_free(j);
    plan_jobs_file_free(&jf);
}

/* hps-plan [options]: a plan, a frontier, an explanation, a calibrated
 * profile or a pre-trained policy, as the options say. */
static int cmd_plan(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    if (optind < argc) hps_usage_error("unexpected argument '%s'", argv[optind]);
    format_of(&o); /* a bad -f fails before any work */
    hps_error err = {.code = HPS_EXIT_RUNTIME}; /* and an output that cannot be written */
    if ((o.output && hps_out_check("--output", o.output, 0, &err)) ||
        (o.rankfile && hps_out_check("--rankfile", o.rankfile, 0, &err)))
        die(&err);
    if (o.jobs) plan_jobs_new(&o);
    else if (o.explain) explain(&o);
    else if (o.calibrate) calibrate(&o);
    else if (o.train_policy) train_policy(&o);
    else plan_new(&o);
    free(o.profile_args);
    return 0;
}

/* show of a joint plan (hps-plan --jobs): 1 when path is one. */
static int show_joint(options *o, const char *path)
{
    hps_error err;
    json_t *root;
    if (hps_json_load(path, &root, &err)) die(&err);
    int joint = plan_joint_is(root);
    if (joint) {
        o->jobs = path; /* its formats */
        write_joint(o, root, path);
    }
    json_decref(root);
    return joint;
}

/* hps-plan show PLAN: a plan made before, in any format. */
static int cmd_show(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    if (optind >= argc) hps_usage_error("show: missing PLAN");
    if (optind + 1 < argc) hps_usage_error("show: unexpected argument '%s'", argv[optind + 1]);
    if (o.pareto || o.explain || o.min_throughput > 0)
        hps_usage_error("show: --pareto, --explain and --min-throughput make plans; show renders one");
    format_of(&o); /* a bad -f fails before any work */
    if (show_joint(&o, argv[optind])) {
        free(o.profile_args);
        return 0;
    }
    plan_reloaded rl;
    reload(&o, argv[optind], &rl);
    plan_problem *p = rl.in.problem;
    plan_result r;
    plan_eval e;
    plan_meta m;
    recorded_inputs ri;
    plan_result_init(&r, p);
    plan_eval_init(&e, p);
    memcpy(r.assign, rl.assign, (size_t)p->n_layers * sizeof *r.assign);
    plan_evaluate(p, r.assign, &e);
    fill_meta(&o, &rl.in, &m, &ri);
    plan_reload_search(&rl, &e, &r, &m);
    emit_plan(&o, &rl.in, &e, &r, &m, rl.pf.root);
    plan_eval_free(&e);
    plan_result_free(&r);
    recorded_inputs_free(&ri);
    plan_reloaded_free(&rl);
    free(o.profile_args);
    return 0;
}

int main(int argc, char **argv)
{
    static const hps_cli_command commands[] = {{"show", cmd_show}, {NULL, NULL}};
    hps_set_progname("hps-plan");
    hps_blas_init(argv); /* may re-execute: before anything else happens */
    return hps_cli_dispatch(argc, argv, commands, cmd_plan, HPS_CLI_OPTIONS);
}
