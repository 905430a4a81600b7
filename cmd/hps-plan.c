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
#include "data/hps_shard.h"
#include "plan/hps_cluster.h"
#include "plan/hps_plan.h"
#include "plan/hps_plan_file.h"
#include "profile/hps_profile.h"
#include "train/hps_train.h"

enum { FMT_JSON, FMT_TABLE, FMT_DOT, FMT_SVG };

typedef struct {
    const char *model, *cluster, *output, *rankfile, *explain, *algo, *format_arg, *data_stats, *policy, *train_policy;
    const char *calibrate;
    const char **profiles;
    int n_profiles;
    double min_throughput, samples;
    long epochs, micro_batches;
    int objective, pareto, rows_on_servers;
    long instances;
    plan_search_opts search;
} options;

static const char usage_text[] =
    "usage: hps-plan -m MODEL -c CLUSTER [-p PROFILE]... --min-throughput N [options]\n"
    "       hps-plan show PLAN [-f json|table|dot|svg] [-o FILE] [-m MODEL] [-c CLUSTER] [-p PROFILE]...\n"
    "       hps-plan --explain PLAN [-f text|json] [-m MODEL] [-c CLUSTER] [-p PROFILE]...\n"
    "       hps-plan --train-policy FILE [--instances N] [--episodes N] [-s S]\n"
    "       hps-plan --calibrate RUN -m MODEL -c CLUSTER -p PROFILE... [-o FILE]\n"
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
    "      --objective WHAT     cost (default), time, energy or edp\n"
    "      --data-stats FILE    hps-shard's manifest.json: key statistics for the\n"
    "                           hot-row caches and the servers' skew\n"
    "      --rows WHERE         auto (default: servers, HBM or a hot-row cache) or servers\n"
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
       OPT_POLICY, OPT_TRAIN_POLICY, OPT_INSTANCES, OPT_MICRO };

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"cluster", required_argument, NULL, 'c'},
    {"profile", required_argument, NULL, 'p'},
    {"min-throughput", required_argument, NULL, 't'},
    {"objective", required_argument, NULL, OPT_OBJECTIVE},
    {"data-stats", required_argument, NULL, OPT_DATA_STATS},
    {"rows", required_argument, NULL, OPT_ROWS},
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
    o->profiles = hps_calloc((size_t)argc, sizeof *o->profiles);
    int c;
    while ((c = hps_cli_getopt(argc, argv, "m:c:p:t:a:s:f:o:qvhV", long_options)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'c': o->cluster = optarg; break;
        case 'p': o->profiles[o->n_profiles++] = optarg; break;
        case 't': o->min_throughput = hps_cli_positive("--min-throughput", optarg); break;
        case OPT_OBJECTIVE: o->objective = hps_cli_choice("--objective", optarg, plan_objective_names); break;
        case 'a': o->algo = optarg; break;
        case 's': o->search.seed = (uint64_t)hps_cli_long("--seed", optarg, 0, 2147483647L); break;
        case OPT_SAMPLES: o->samples = hps_cli_positive("--samples", optarg); break;
        case OPT_EPOCHS: o->epochs = hps_cli_long("--epochs", optarg, 1, 1000000); break;
        case OPT_MICRO: o->micro_batches = hps_cli_long("--micro-batches", optarg, 1, HPS_MAX_MICRO_BATCHES); break;
        case OPT_EPISODES: o->search.episodes = hps_cli_long("--episodes", optarg, 1, 100000000); break;
        case OPT_TIME_LIMIT: o->search.time_limit = hps_cli_positive("--time-limit", optarg); break;
        case OPT_BOUND_TIME: o->search.bound_time = hps_cli_positive("--bound-time", optarg); break;
        case OPT_NO_POLISH: o->search.polish = 0; break;
        case OPT_EVALUATIONS: o->search.evaluations = hps_cli_long("--evaluations", optarg, 1, 1000000000); break;
        case OPT_POLICY: o->policy = optarg; break;
        case OPT_TRAIN_POLICY: o->train_policy = optarg; break;
        case OPT_INSTANCES: o->instances = hps_cli_long("--instances", optarg, 1, 1000000); break;
        case 'f': o->format_arg = optarg; break;
        case 'o': o->output = optarg; break;
        case OPT_RANKFILE: o->rankfile = optarg; break;
        case OPT_PARETO: o->pareto = optarg ? (int)hps_cli_long("--pareto", optarg, 1, 1000) : 8; break;
        case OPT_EXPLAIN: o->explain = optarg; break;
        case OPT_CALIBRATE: o->calibrate = optarg; break;
        case OPT_DATA_STATS: o->data_stats = optarg; break;
        case OPT_ROWS: o->rows_on_servers = hps_cli_choice("--rows", optarg, rows_choices); break;
        case 'q': hps_cli_quiet(); break;
        case 'v': hps_cli_verbose(); break;
        case 'h': fputs(usage_text, stdout); exit(0);
        case 'V': hps_cli_version(stdout); exit(0);
        }
    }
    o->search.progress = hps_stderr_is_tty() && hps_display_level >= 2;
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
    if (o->pareto) {
        static const int map[] = {FMT_JSON, FMT_TABLE, FMT_SVG};
        return o->format_arg ? map[hps_cli_choice("--format", o->format_arg, pareto_formats)] : FMT_JSON;
    }
    return o->format_arg ? hps_cli_choice("--format", o->format_arg, plan_formats) : FMT_JSON;
}

/* Inputs: model, cluster and profiles, reduced to a problem. */
typedef struct {
    hps_model *model;
    hps_cluster *cluster;
    hps_profiles *profiles;
    plan_problem *problem;
} inputs;

/* --data-stats: the manifest hps-shard wrote (the file or its directory);
 * the model's slots take the statistics of the data's slots of the same
 * name, else of the same position. */
static void key_stats(const char *path, const hps_model *m, plan_problem *p)
{
    hps_error err;
    size_t n = strlen(path);
    char *dir = hps_strdup(path);
    if (n >= 13 && strcmp(path + n - 13, "manifest.json") == 0)
        snprintf(dir, n + 1, "%.*s", n > 13 ? (int)(n - 14) : 1, n > 13 ? path : ".");
    hps_manifest *mf = hps_manifest_load(dir, &err);
    free(dir);
    if (!mf) die(&err);
    if (!mf->slot_stats) {
        hps_fail(&err, HPS_EXIT_USAGE, "%s: holds no key statistics (slots); shard the data again", path);
        die(&err);
    }
    plan_key_stats *ks = hps_calloc((size_t)m->n_slots, sizeof *ks);
    for (int j = 0; j < m->n_slots; j++) {
        int d = -1;
        for (int i = 0; i < mf->schema.n_slots && d < 0; i++)
            if (strcmp(mf->slot_names[i], m->slots[j].name) == 0) d = i;
        if (d < 0 && mf->schema.n_slots == m->n_slots) d = j;
        if (d < 0) {
            hps_log(2, "hps-plan: %s: no slot '%s': its rows take the default skew\n", path, m->slots[j].name);
            continue;
        }
        const hps_slot_stats *st = &mf->slot_stats[d];
        static const double top_n[4] = {1, 10, 100, 1000};
        for (int i = 0; i < 4; i++)
            if (st->top_share[i] > 0 && top_n[i] < st->distinct) {
                ks[j].n[ks[j].n_points] = top_n[i];
                ks[j].share[ks[j].n_points++] = st->top_share[i];
            }
        if (st->distinct >= 1) { /* every distinct key cached: every lookup hits */
            ks[j].n[ks[j].n_points] = st->distinct;
            ks[j].share[ks[j].n_points++] = 1;
        }
    }
    plan_problem_key_stats(p, m, ks);
    free(ks);
    hps_manifest_free(mf);
}

static void load_inputs(const options *o, inputs *in)
{
    hps_error err;
    if (!o->model) hps_usage_error("missing -m MODEL");
    if (!o->cluster) hps_usage_error("missing -c CLUSTER");
    if (!(in->model = hps_model_load(o->model, &err))) die(&err);
    if (!(in->cluster = hps_cluster_load(o->cluster, &err))) die(&err);
    in->profiles = hps_profiles_new();
    int n = o->n_profiles ? o->n_profiles : 1;
    for (int i = 0; i < n; i++) {
        const char *path = o->n_profiles ? o->profiles[i] : "-";
        char *text;
        size_t len;
        if (hps_json_read(path, &text, &len, &err) ||
            hps_profiles_add(in->profiles, hps_path_name(path), text, len, &err))
            die(&err);
        free(text);
    }
    if (!(in->problem = plan_problem_build(in->model, in->cluster, in->profiles, &err))) die(&err);
    in->problem->rows_on_servers = o->rows_on_servers;
    if (o->data_stats) key_stats(o->data_stats, in->model, in->problem);
    for (int t = 0; t < in->cluster->n_types; t++)
        if (in->cluster->types[t].mem_bytes <= 0)
            hps_log(2, "hps-plan: %s: resource '%s' gives no mem_gib: its memory is not checked\n",
                    hps_path_name(o->cluster), in->cluster->types[t].name);
    if (plan_problem_check_memory(in->problem, &err)) die(&err);
}

static void free_inputs(inputs *in)
{
    plan_problem_free(in->problem);
    hps_profiles_free(in->profiles);
    hps_cluster_free(in->cluster);
    hps_model_free(in->model);
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

/* Infeasible: name the stage, link or type that cannot meet the limit. */
static _Noreturn void infeasible(const plan_problem *p, const plan_eval *e)
{
    int *a = hps_malloc((size_t)p->n_layers * sizeof *a);
    double best = plan_max_throughput(p, a);
    char why[300] = "";
    for (int s = 0; s < e->n_stages && !why[0]; s++) {
        const plan_stage *st = &e->stages[s];
        int t = st->type, least = plan_stage_servers(p, &st->law, 0);
        if ((st->short_of_limit & PLAN_SHORT_STAGE) && t == p->server_type && least > 0 &&
            p->max_units[t] - least < 1) { /* no rate is reachable: the best above does not hold */
            hps_errorf("no plan meets %.6g samples/s: stage %d ('%s'..'%s') on '%s' has no unit beside its "
                       "%d server%s: '%s' has %d unit%s, servers included",
                       p->min_throughput, s, p->layer_names[st->first], p->layer_names[st->end - 1],
                       p->type_names[t], least, least == 1 ? "" : "s", p->type_names[t], p->max_units[t],
                       p->max_units[t] == 1 ? "" : "s");
            free(a);
            exit(HPS_EXIT_RUNTIME);
        }
        if (st->short_of_limit & PLAN_SHORT_LINK)
            snprintf(why, sizeof why, "the link from '%s' into stage %d on '%s' carries at most %.6g samples/s",
                     p->type_names[e->stages[s - 1].type], s, p->type_names[st->type], st->link_throughput);
        else if (st->short_of_limit & PLAN_SHORT_STAGE)
            snprintf(why, sizeof why, "stage %d ('%s'..'%s') on '%s' reaches at most %.6g samples/s with %d unit%s%s",
                     s, p->layer_names[st->first], p->layer_names[st->end - 1], p->type_names[st->type],
                     st->best_throughput, st->best_units, st->best_units == 1 ? "" : "s",
                     st->type == p->server_type && st->servers ? " beside its servers" : "");
    }
    for (int t = 0; t < p->n_types && !why[0]; t++)
        if (e->used[t] > p->max_units[t])
            snprintf(why, sizeof why, "'%s' would need %d units%s and has %d", p->type_names[t], e->used[t],
                     t == p->server_type && e->servers ? " (servers included)" : "", p->max_units[t]);
    free(a);
    hps_errorf("no plan meets %.6g samples/s: %s; the best throughput reachable is %.6g samples/s",
               p->min_throughput, why, best);
    exit(HPS_EXIT_RUNTIME);
}

/* The inputs are recorded relative to the plan file (as given when it goes
 * to stdout), so that a plan moved with its inputs still finds them;
 * owned[] holds those paths, n_profiles + 3 of them, for the caller to free. */
static void fill_meta(const options *o, const inputs *in, plan_meta *m, const char **names,
                      const char **digests, char **owned)
{
    const char *out = o->output ? o->output : "-";
    int n = hps_profiles_count(in->profiles);
    for (int i = 0; i < n; i++) {
        const char *name = hps_profiles_name(in->profiles, i);
        owned[i] = strcmp(name, "<stdin>") == 0 ? hps_strdup(name) : hps_path_relative(out, name);
        names[i] = owned[i];
        digests[i] = hps_profiles_digest(in->profiles, i);
    }
    owned[n] = hps_path_relative(out, o->model);
    owned[n + 1] = hps_path_relative(out, o->cluster);
    owned[n + 2] = o->data_stats ? hps_path_relative(out, o->data_stats) : NULL;
    *m = (plan_meta){.model_path = owned[n], .cluster_path = owned[n + 1], .data_stats_path = owned[n + 2],
                     .model_digest = in->model->digest, .cluster_digest = in->cluster->digest,
                     .n_profiles = n, .profile_names = names, .profile_digests = digests,
                     .model_name = in->model->name, .algorithm = o->algo, .opts = o->search,
                     .exact_objective = -1};
}

/* A plan in the format -f names; json_doc is the plan as JSON when it is known already. */
static void write_output(const options *o, const inputs *in, const plan_eval *e, const plan_layout *l,
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

static int plan_once(const options *o, inputs *in)
{
    plan_problem *p = in->problem;
    plan_result r;
    plan_eval e;
    plan_layout l;
    plan_meta m;
    hps_error err;
    const char **names = hps_calloc((size_t)hps_profiles_count(in->profiles), sizeof *names);
    const char **digests = hps_calloc((size_t)hps_profiles_count(in->profiles), sizeof *digests);
    char **owned = hps_calloc((size_t)hps_profiles_count(in->profiles) + 3, sizeof *owned);
    plan_result_init(&r, p);
    plan_eval_init(&e, p);
    solve(p, in->cluster, o->algo, &o->search, &r);
    plan_evaluate(p, r.assign, &e);
    if (!e.feasible) infeasible(p, &e);
    fill_meta(o, in, &m, names, digests, owned);
    m.exact_objective = optimum(p, o->algo, &o->search, &r, &e);
    hps_log(3, "hps-plan: %s: %.6g in %.3f s (%ld episodes)\n", o->algo, e.objective, r.seconds, r.episodes);
    if (plan_layout_make(p, in->cluster, &e, &l, &err)) die(&err);
    if (o->rankfile && plan_rankfile_write(o->rankfile, in->cluster, &l, &err)) die(&err);
    write_output(o, in, &e, &l, &r, &m, NULL);
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    for (int i = 0; i < hps_profiles_count(in->profiles) + 3; i++) free(owned[i]);
    free(owned);
    free(names);
    free(digests);
    return 0;
}

static int pareto(const options *o, inputs *in)
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
    return 0;
}

/* A plan made before: its inputs default to the paths it records, their
 * digests must match, and its assignment is evaluated again. */
typedef struct {
    plan_file pf;
    inputs in;
    int *assign;
} reloaded;

static void reload(options *o, const char *path, reloaded *rl)
{
    hps_error err;
    plan_file *pf = &rl->pf;
    if (plan_file_load(path, pf, &err)) die(&err);
    if (!pf->assign || !pf->objective[0] || !pf->min_throughput || !pf->samples || !pf->epochs)
        bad_input("%s: needs assignment, objective, min_throughput, samples and epochs", path);
    if (!o->model) o->model = pf->model_path;
    if (!o->cluster) o->cluster = pf->cluster_path;
    if (!o->data_stats) o->data_stats = pf->data_stats_path;
    o->rows_on_servers |= pf->rows_on_servers;
    if (!o->n_profiles && pf->stdin_profile)
        hps_usage_error("%s: its profile was read from stdin; name it with -p PROFILE", hps_path_name(path));
    if (!o->n_profiles && pf->n_profiles) {
        free(o->profiles);
        o->profiles = hps_calloc((size_t)pf->n_profiles, sizeof *o->profiles);
        for (int i = 0; i < pf->n_profiles; i++) o->profiles[i] = pf->profile_paths[i];
        o->n_profiles = pf->n_profiles;
    }
    memset(&rl->in, 0, sizeof rl->in);
    load_inputs(o, &rl->in);
    if (strcmp(pf->model_digest, rl->in.model->digest) != 0)
        bad_input("%s: the plan was made for another model (digests differ)", o->model);
    if (strcmp(pf->cluster_digest, rl->in.cluster->digest) != 0)
        bad_input("%s: the plan was made for another cluster (digests differ)", o->cluster);
    plan_problem *p = rl->in.problem;
    int obj = -1;
    for (int i = 0; plan_objective_names[i]; i++)
        if (strcmp(pf->objective, plan_objective_names[i]) == 0) obj = i;
    if (obj < 0) bad_input("%s: objective '%s' is not cost, time, energy or edp", path, pf->objective);
    p->objective = obj;
    p->min_throughput = pf->min_throughput;
    p->samples = pf->samples;
    p->epochs = pf->epochs;
    p->micro_batches = pf->micro_batches;
    if (pf->n_layers != p->n_layers)
        bad_input("%s: the plan has %d layers, the model %d", path, pf->n_layers, p->n_layers);
    rl->assign = hps_malloc((size_t)p->n_layers * sizeof *rl->assign);
    for (int l = 0; l < p->n_layers; l++)
        if ((rl->assign[l] = hps_cluster_find(rl->in.cluster, pf->assign[l])) < 0)
            bad_input("%s: the plan names a type the cluster lacks", pf->assign[l]);
}

static void reloaded_free(reloaded *rl)
{
    free(rl->assign);
    plan_file_free(&rl->pf);
    free_inputs(&rl->in);
}

/* --explain PLAN: per layer, what the plan would cost with it on each type. */
static int explain(options *o)
{
    hps_error err;
    reloaded rl;
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
    reloaded_free(&rl);
    return 0;
}

/* The search facts the plan records.  They hold only for the plan as
 * hps-plan wrote it: one that evaluates to another objective (edited, or
 * other inputs) is neither optimal nor at a known gap, and show says so. */
static void recorded_search(const plan_file *pf, const plan_eval *e, plan_result *r, plan_meta *m)
{
    int same = plan_file_rechecked(pf, e);
    m->algorithm = pf->algorithm[0] ? pf->algorithm : "?";
    m->opts.seed = pf->seed;
    r->episodes = pf->episodes;
    r->timed_out = pf->timed_out;
    m->exact_objective = same ? pf->optimum : -1;
    r->optimal = same && pf->optimal && pf->optimum >= 0 && fabs(e->objective - pf->optimum) <= PLAN_FILE_TOLERANCE * pf->optimum;
    if (same || (!pf->optimal && pf->optimum < 0)) return;
    if (pf->predicted_objective < 0)
        hps_warnf("%s: records no predicted %s: its optimality is not known", pf->name, pf->objective);
    else
        hps_warnf("%s: evaluated again, its %s is %.6g, not the %.6g it records (edited, or other inputs): "
                  "its optimality is not known", pf->name, pf->objective, e->objective, pf->predicted_objective);
    /* the JSON shown is the file's: its claims go */
    json_t *s = json_object_get(pf->root, "search");
    if (json_is_object(s)) {
        json_object_set_new(s, "optimal", json_false());
        json_object_set_new(s, "gap", json_null());
    }
}

/* show PLAN: a plan made before, in any format. */
static int show(options *o, int argc, char **argv)
{
    if (optind >= argc) hps_usage_error("show: missing PLAN");
    if (optind + 1 < argc) hps_usage_error("show: unexpected argument '%s'", argv[optind + 1]);
    if (o->pareto || o->explain || o->min_throughput > 0)
        hps_usage_error("show: --pareto, --explain and --min-throughput make plans; show renders one");
    const char *path = argv[optind];
    format_of(o); /* a bad -f fails before any work */
    reloaded rl;
    reload(o, path, &rl);
    plan_problem *p = rl.in.problem;
    plan_result r;
    plan_eval e;
    plan_layout l;
    plan_meta m;
    hps_error err;
    const char **names = hps_calloc((size_t)hps_profiles_count(rl.in.profiles), sizeof *names);
    const char **digests = hps_calloc((size_t)hps_profiles_count(rl.in.profiles), sizeof *digests);
    char **owned = hps_calloc((size_t)hps_profiles_count(rl.in.profiles) + 3, sizeof *owned);
    plan_result_init(&r, p);
    plan_eval_init(&e, p);
    memcpy(r.assign, rl.assign, (size_t)p->n_layers * sizeof *r.assign);
    plan_evaluate(p, r.assign, &e);
    fill_meta(o, &rl.in, &m, names, digests, owned);
    recorded_search(&rl.pf, &e, &r, &m);
    if (plan_layout_make(p, rl.in.cluster, &e, &l, &err)) die(&err);
    if (o->rankfile && plan_rankfile_write(o->rankfile, rl.in.cluster, &l, &err)) die(&err);
    write_output(o, &rl.in, &e, &l, &r, &m, rl.pf.root);
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    for (int i = 0; i < hps_profiles_count(rl.in.profiles) + 3; i++) free(owned[i]);
    free(owned);
    free(names);
    free(digests);
    reloaded_free(&rl);
    return 0;
}

/* The run's stages on the problem's types; one process ran each stage on
 * one unit, whatever the plan's units. */
static int calib_stages(const options *o, const inputs *in, const hps_train_run *run, plan_calib_stage *st)
{
    const char *name = hps_path_name(o->calibrate);
    if (strcmp(run->model, in->model->name) != 0)
        bad_input("%s: a run of model '%s', not %s's '%s'", name, run->model, o->model, in->model->name);
    if (run->batch != (int)in->problem->batch)
        bad_input("%s: a run at batch %d, the profiles are of batch %d (profile at the run's batch)", name,
                  run->batch, (int)in->problem->batch);
    if (run->stages[run->n_stages - 1].end != in->model->n_layers)
        bad_input("%s: its stages end at layer %d of %d", name, run->stages[run->n_stages - 1].end - 1,
                  in->model->n_layers);
    for (int s = 0; s < run->n_stages; s++) {
        const hps_train_run_stage *r = &run->stages[s];
        int t = hps_cluster_find(in->cluster, r->type);
        if (t < 0) bad_input("%s: stage %d ran on type '%s', which %s lacks", name, s, r->type, o->cluster);
        st[s] = (plan_calib_stage){.type = t, .first = r->first, .end = r->end,
                                   .units = run->ranks ? r->units : 1, .measured_ms = r->measured_ms,
                                   .in_process = !run->ranks};
    }
    return run->n_stages;
}

/* The -p profiles as one document. */
static json_t *profiles_doc(const options *o)
{
    hps_error err;
    json_t **docs = hps_calloc((size_t)o->n_profiles, sizeof *docs);
    for (int i = 0; i < o->n_profiles; i++)
        if (hps_json_load(o->profiles[i], &docs[i], &err)) die(&err);
    json_t *doc = o->n_profiles == 1 ? json_incref(docs[0]) : hps_profile_merge(docs, o->profiles, o->n_profiles, &err);
    for (int i = 0; i < o->n_profiles; i++) json_decref(docs[i]);
    free(docs);
    if (!doc) die(&err);
    return doc;
}

/* --calibrate RUN: each stage's layers scaled so that the model's time of
 * the stage is the run's (hps-plan(1), CALIBRATION). */
static int calibrate(const options *o)
{
    hps_error err;
    hps_train_run run;
    if (!o->n_profiles) hps_usage_error("--calibrate needs the profiles as files: -p PROFILE");
    if (hps_train_run_load(o->calibrate, &run, &err)) die(&err);
    inputs in = {0};
    load_inputs(o, &in);
    plan_calib_stage st[HPS_TRAIN_MAX_STAGES];
    int n = calib_stages(o, &in, &run, st);
    double step_ms = 1000.0 * run.batch / run.samples_per_s;
    in.problem->micro_batches = run.micro_batches; /* the bubble the run had */
    plan_calib_targets(st, n, step_ms, plan_bubble(in.problem, n));
    plan_calibrate(in.problem, st, n);
    json_t *doc = profiles_doc(o);
    const char *name = hps_path_name(o->calibrate);
    for (int s = 0; s < n; s++) {
        const plan_rtype *r = &in.cluster->types[st[s].type];
        hps_profile_scale_layers(doc, r->device, st[s].first, st[s].end, st[s].factor, name);
        hps_log(2, "hps-plan: stage %d (layers %d-%d on '%s', %d unit%s): model %.3f ms, run %.3f ms "
                   "(%.3f computing): device '%s' layers x%.4g\n",
                s, st[s].first, st[s].end - 1, r->name, st[s].units, st[s].units == 1 ? "" : "s", st[s].before_ms,
                st[s].target_ms, st[s].measured_ms, r->device, st[s].factor);
        if (st[s].clamped)
            hps_warnf("%s: stage %d: the model's terms other than its layers take %.3f ms, more than the run's "
                      "%.3f: its layers only go down to x%g", name, s, st[s].after_ms, st[s].target_ms,
                      PLAN_CALIB_MIN_FACTOR);
    }
    int rc = hps_json_write(o->output ? o->output : "-", doc, &err);
    json_decref(doc);
    free_inputs(&in);
    if (rc) die(&err);
    return 0;
}

/* --train-policy FILE: the rl policy pre-trained over seeded random
 * instances (make plan-policy regenerates the built-in one this way). */
static int train_policy(const options *o)
{
    hps_error err;
    plan_policy *pol = plan_policy_pretrain(o->search.seed, (int)o->instances, o->search.episodes,
                                            hps_stderr_is_tty() && hps_display_level >= 2);
    int rc = plan_policy_save(pol, o->train_policy, &err);
    plan_policy_free(pol);
    if (rc) die(&err);
    return 0;
}

int main(int argc, char **argv)
{
    static const char *const commands[] = {"show", NULL};
    hps_set_progname("hps-plan");
    hps_blas_init(argv); /* may re-execute: before anything else happens */
    int is_show = 0;
    if (argc > 1 && argv[1][0] != '-') {
        if (strcmp(argv[1], "show") != 0) hps_cli_unknown_command(argv[1], commands);
        is_show = 1;
        argv[1] = argv[0];
        argv++, argc--;
    }
    options o;
    parse_options(argc, argv, &o);
    int rc;
    plan_policy *policy = NULL;
    if (is_show) rc = show(&o, argc, argv);
    else {
        if (optind < argc) hps_usage_error("unexpected argument '%s'", argv[optind]);
        format_of(&o); /* a bad -f fails before any work */
        if (o.explain) {
            rc = explain(&o);
            free(o.profiles); /* reload may have replaced it */
            return rc;
        }
        if (o.calibrate) {
            rc = calibrate(&o);
            free(o.profiles);
            return rc;
        }
        if (o.train_policy) {
            rc = train_policy(&o);
            free(o.profiles);
            return rc;
        }
        if (o.policy) {
            hps_error err;
            if (!(policy = plan_policy_load(o.policy, &err))) die(&err);
            o.search.policy = policy;
        }
        if (!(o.min_throughput > 0)) hps_usage_error("missing --min-throughput N");
        inputs in = {0};
        load_inputs(&o, &in);
        plan_problem *p = in.problem;
        p->min_throughput = o.min_throughput;
        p->samples = o.samples;
        p->epochs = (int)o.epochs;
        p->micro_batches = (int)o.micro_batches;
        p->objective = o.objective;
        check_power(p, in.cluster);
        rc = o.pareto ? pareto(&o, &in) : plan_once(&o, &in);
        free_inputs(&in);
    }
    plan_policy_free(policy);
    free(o.profiles);
    return rc;
}
