/* hps-plan: which resource type runs each layer and how many units each stage
 * gets, so that a throughput limit is met at the lowest cost.  See hps-plan(1).
 * This file is options and I/O; the work is in lib/plan. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "data/hps_shard.h"
#include "plan/hps_plan.h"

enum { FMT_JSON, FMT_TABLE, FMT_DOT };

typedef struct {
    const char *model, *cluster, *output, *rankfile, *explain, *algo, *data_stats;
    const char **profiles;
    int n_profiles;
    double min_throughput, samples;
    long epochs;
    int objective, format, pareto, rows_on_servers;
    plan_search_opts search;
} options;

static const char usage_text[] =
    "usage: hps-plan -m MODEL -c CLUSTER [-p PROFILE]... --min-throughput N [options]\n"
    "       hps-plan --explain PLAN [-m MODEL] [-c CLUSTER] [-p PROFILE]...\n"
    "\n"
    "Decides which resource type runs each layer of MODEL and how many units each\n"
    "stage gets, so that at least N samples/s are trained at the lowest cost.\n"
    "With no -p the profile is read from stdin.\n"
    "\n"
    "  -m, --model FILE         the model (hps-model(5))\n"
    "  -c, --cluster FILE       the resource types (hps-cluster(5))\n"
    "  -p, --profile FILE       a profile (hps-profile(5)); repeatable; default stdin\n"
    "  -t, --min-throughput N   samples per second the plan must reach\n"
    "      --objective WHAT     cost (default), time, energy or edp\n"
    "      --data-stats FILE    hps-shard's manifest.json: key statistics for the\n"
    "                           hot-row caches and the servers' skew\n"
    "      --rows WHERE         auto (default: servers, HBM or a hot-row cache) or servers\n"
    "  -a, --algo ALGO          rl (default), exact, greedy, genetic, brute, fixed:TYPE\n"
    "  -s, --seed S             seed of rl and genetic (default 1)\n"
    "      --samples N          samples per epoch (default 100000000)\n"
    "      --epochs E           epochs (default 1)\n"
    "      --episodes N         plans rl samples, or genetic evaluates (default 2048)\n"
    "      --time-limit S       seconds rl or genetic may take (default 10)\n"
    "      --bound-time S       seconds for the exact solver, alone or for the gap (default 5)\n"
    "      --no-polish          rl: keep the best sampled plan as it is\n"
    "  -f, --format FMT         json (default), table or dot\n"
    "  -o, --output FILE        write the plan there (default stdout)\n"
    "      --rankfile FILE      write an Open MPI rankfile for the plan's ranks\n"
    "      --pareto[=N]         sweep the limit up to the fastest plan; N points (default 8)\n"
    "      --explain PLAN       per layer, what PLAN would cost with it on each type\n"
    "  -q, --quiet              errors only\n"
    "  -v, --verbose            more on stderr\n"
    "  -h, --help               this text\n"
    "  -V, --version            version and features\n";

enum { OPT_OBJECTIVE = 256, OPT_SAMPLES, OPT_EPOCHS, OPT_EPISODES, OPT_TIME_LIMIT, OPT_BOUND_TIME,
       OPT_NO_POLISH, OPT_RANKFILE, OPT_PARETO, OPT_EXPLAIN, OPT_DATA_STATS, OPT_ROWS };

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
    {"episodes", required_argument, NULL, OPT_EPISODES},
    {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
    {"bound-time", required_argument, NULL, OPT_BOUND_TIME},
    {"no-polish", no_argument, NULL, OPT_NO_POLISH},
    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    {"rankfile", required_argument, NULL, OPT_RANKFILE},
    {"pareto", optional_argument, NULL, OPT_PARETO},
    {"explain", required_argument, NULL, OPT_EXPLAIN},
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

static _Noreturn void usage_error(const char *fmt, const char *arg)
{
    hps_error err;
    hps_fail(&err, HPS_EXIT_USAGE, fmt, arg);
    hps_report(&err);
    fprintf(stderr, "try 'hps-plan --help'\n");
    exit(HPS_EXIT_USAGE);
}

static double positive(const char *opt, const char *s)
{
    double v;
    if (hps_parse_double(s, &v) || !(v > 0) || !isfinite(v))
        usage_error("%s must be a positive number", opt);
    return v;
}

static long count_arg(const char *opt, const char *s, long max)
{
    long v;
    if (hps_parse_long(s, 1, max, &v)) usage_error("%s must be a positive integer", opt);
    return v;
}

static int choice(const char *opt, const char *s, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0) return i;
    hps_error err;
    hps_fail(&err, HPS_EXIT_USAGE, "%s '%s' is not one of the choices (see --help)", opt, s);
    die(&err);
}

static void parse_options(int argc, char **argv, options *o)
{
    static const char *const formats[] = {"json", "table", "dot", NULL};
    static const char *const rows_choices[] = {"auto", "servers", NULL};
    memset(o, 0, sizeof *o);
    o->samples = 1e8;
    o->epochs = 1;
    o->algo = "rl";
    o->search = (plan_search_opts){.seed = 1, .episodes = 2048, .time_limit = 10, .bound_time = 5,
                                   .polish = 1};
    o->profiles = hps_calloc((size_t)argc, sizeof *o->profiles);
    int c;
    while ((c = getopt_long(argc, argv, "m:c:p:t:a:s:f:o:qvhV", long_options, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'c': o->cluster = optarg; break;
        case 'p': o->profiles[o->n_profiles++] = optarg; break;
        case 't': o->min_throughput = positive("--min-throughput", optarg); break;
        case OPT_OBJECTIVE: o->objective = choice("--objective", optarg, plan_objective_names); break;
        case 'a': o->algo = optarg; break;
        case 's': {
            long v;
            if (hps_parse_long(optarg, 0, 2147483647L, &v)) usage_error("--seed must be an integer >= 0", optarg);
            o->search.seed = (uint64_t)v;
            break;
        }
        case OPT_SAMPLES: o->samples = positive("--samples", optarg); break;
        case OPT_EPOCHS: o->epochs = count_arg("--epochs", optarg, 1000000); break;
        case OPT_EPISODES: o->search.episodes = count_arg("--episodes", optarg, 100000000); break;
        case OPT_TIME_LIMIT: o->search.time_limit = positive("--time-limit", optarg); break;
        case OPT_BOUND_TIME: o->search.bound_time = positive("--bound-time", optarg); break;
        case OPT_NO_POLISH: o->search.polish = 0; break;
        case 'f': o->format = choice("--format", optarg, formats); break;
        case 'o': o->output = optarg; break;
        case OPT_RANKFILE: o->rankfile = optarg; break;
        case OPT_PARETO: o->pareto = optarg ? (int)count_arg("--pareto", optarg, 1000) : 8; break;
        case OPT_EXPLAIN: o->explain = optarg; break;
        case OPT_DATA_STATS: o->data_stats = optarg; break;
        case OPT_ROWS: o->rows_on_servers = choice("--rows", optarg, rows_choices); break;
        case 'q': hps_display_level = 1; break;
        case 'v': hps_display_level++; break;
        case 'h': fputs(usage_text, stdout); exit(0);
        case 'V': hps_print_version(stdout); exit(0);
        default: fprintf(stderr, "try 'hps-plan --help'\n"); exit(HPS_EXIT_USAGE);
        }
    }
    if (optind < argc) usage_error("unexpected argument '%s'", argv[optind]);
    if (o->pareto > 1 && o->format == FMT_DOT) usage_error("%s", "--pareto prints json or table, not dot");
    o->search.progress = hps_stderr_is_tty() && hps_display_level >= 2;
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
    if (!o->model) usage_error("%s", "missing -m MODEL");
    if (!o->cluster) usage_error("%s", "missing -c CLUSTER");
    if (!(in->model = hps_model_load(o->model, &err))) die(&err);
    if (!(in->cluster = hps_cluster_load(o->cluster, &err))) die(&err);
    in->profiles = hps_profiles_new();
    int n = o->n_profiles ? o->n_profiles : 1;
    for (int i = 0; i < n; i++) {
        const char *path = o->n_profiles ? o->profiles[i] : "-";
        char *text;
        size_t len;
        if (hps_read_all(path, &text, &len, &err) ||
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

static void check_power(const plan_problem *p, const hps_cluster *c)
{
    if (p->objective != PLAN_OBJ_ENERGY && p->objective != PLAN_OBJ_EDP) return;
    for (int t = 0; t < p->n_types; t++)
        if (p->power[t] <= 0) {
            hps_error err;
            hps_fail(&err, HPS_EXIT_USAGE, "%s: resource '%s': power_w is needed for --objective %s",
                     c->path, p->type_names[t], plan_objective_names[p->objective]);
            die(&err);
        }
}

/* Runs the scheduler named by --algo. */
static void solve(const plan_problem *p, const hps_cluster *c, const char *algo,
                  const plan_search_opts *so, plan_result *r)
{
    hps_error err;
    int rc = 0;
    if (strcmp(algo, "rl") == 0) rc = plan_solve_rl(p, so, r);
    else if (strcmp(algo, "exact") == 0) rc = plan_solve_exact(p, so, r);
    else if (strcmp(algo, "greedy") == 0) rc = plan_solve_greedy(p, r);
    else if (strcmp(algo, "genetic") == 0) rc = plan_solve_genetic(p, so, r);
    else if (strcmp(algo, "brute") == 0) rc = plan_solve_brute(p, r, &err);
    else if (strncmp(algo, "fixed:", 6) == 0) {
        int t = hps_cluster_find(c, algo + 6);
        if (t < 0) usage_error("--algo fixed:TYPE: '%s' is no resource of the cluster", algo + 6);
        rc = plan_solve_fixed(p, t, r);
    } else usage_error("--algo '%s' is not rl, exact, greedy, genetic, brute or fixed:TYPE", algo);
    if (rc) die(&err);
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
        if (st->short_of_limit & PLAN_SHORT_LINK)
            snprintf(why, sizeof why, "the link from '%s' into stage %d on '%s' carries at most %.6g samples/s",
                     p->type_names[e->stages[s - 1].type], s, p->type_names[st->type], st->link_throughput);
        else if (st->short_of_limit & PLAN_SHORT_STAGE)
            snprintf(why, sizeof why, "stage %d ('%s'..'%s') on '%s' reaches at most %.6g samples/s with %d units",
                     s, p->layer_names[st->first], p->layer_names[st->end - 1], p->type_names[st->type],
                     st->best_throughput, st->best_units);
    }
    for (int t = 0; t < p->n_types && !why[0]; t++)
        if (e->units[t] > p->max_units[t])
            snprintf(why, sizeof why, "'%s' would need %d units and has %d", p->type_names[t], e->units[t],
                     p->max_units[t]);
    free(a);
    hps_errorf("no plan meets %.6g samples/s: %s; the best throughput reachable is %.6g samples/s",
               p->min_throughput, why, best);
    exit(HPS_EXIT_RUNTIME);
}

/* The inputs are recorded relative to the plan file (as given when it goes
 * to stdout), so that a plan moved with its inputs still finds them;
 * owned[] holds those paths, n_profiles + 2 of them, for the caller to free. */
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
    *m = (plan_meta){.model_path = owned[n], .cluster_path = owned[n + 1],
                     .model_digest = in->model->digest, .cluster_digest = in->cluster->digest,
                     .n_profiles = n, .profile_names = names, .profile_digests = digests,
                     .model_name = in->model->name, .algorithm = o->algo, .opts = o->search,
                     .exact_objective = -1};
}

static void write_output(const options *o, const inputs *in, const plan_eval *e,
                         const plan_layout *l, const plan_result *r, const plan_meta *m)
{
    hps_error err;
    const char *path = o->output ? o->output : "-";
    if (o->format == FMT_JSON) {
        json_t *root = plan_to_json(in->problem, e, l, r, m, in->cluster);
        int rc = hps_json_write(path, root, &err);
        json_decref(root);
        if (rc) die(&err);
        return;
    }
    hps_out *out = hps_out_open(path, &err);
    if (!out) die(&err);
    if (o->format == FMT_TABLE) plan_print_table(hps_out_file(out), in->problem, e, l, r, m);
    else plan_print_dot(hps_out_file(out), in->problem, e);
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
    char **owned = hps_calloc((size_t)hps_profiles_count(in->profiles) + 2, sizeof *owned);
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
    write_output(o, in, &e, &l, &r, &m);
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    for (int i = 0; i < hps_profiles_count(in->profiles) + 2; i++) free(owned[i]);
    free(owned);
    free(names);
    free(digests);
    return 0;
}

/* --pareto: the limit swept geometrically from --min-throughput up to the
 * fastest plan; the points that no other point beats on both axes. */
static int pareto(const options *o, inputs *in)
{
    plan_problem *p = in->problem;
    int *a = hps_malloc((size_t)p->n_layers * sizeof *a), n = o->pareto;
    double lo = p->min_throughput, hi = plan_max_throughput(p, a);
    if (hi < lo) {
        plan_eval e;
        plan_eval_init(&e, p);
        plan_evaluate(p, a, &e);
        infeasible(p, &e);
    }
    json_t *points = json_array();
    double last_cost = HUGE_VAL;
    hps_out *out = NULL;
    hps_error err;
    for (int i = n - 1; i >= 0; i--) { /* fastest first, so that dominated points drop out */
        p->min_throughput = n > 1 ? lo * pow(hi / lo, (double)i / (n - 1)) * (1 - 1e-9) : lo;
        plan_result r;
        plan_eval e;
        plan_result_init(&r, p);
        plan_eval_init(&e, p);
        solve(p, in->cluster, o->algo, &o->search, &r);
        plan_evaluate(p, r.assign, &e);
        if (e.feasible && e.objective < last_cost) {
            last_cost = e.objective;
            char stages[512] = "";
            for (int s = 0; s < e.n_stages; s++) {
                size_t len = strlen(stages);
                snprintf(stages + len, sizeof stages - len, "%s%s x%d", s ? " | " : "",
                         p->type_names[e.stages[s].type], e.stages[s].units);
            }
            json_array_insert_new(points, 0,
                                  json_pack("{s:o, s:o, s:o, s:o, s:o, s:s}", "min_throughput",
                                            hps_json_real(p->min_throughput), "throughput",
                                            hps_json_real(e.throughput), "cost", hps_json_real(e.cost),
                                            "cost_per_hour", hps_json_real(e.cost_per_hour), "objective",
                                            hps_json_real(e.objective), "stages", stages));
        }
        plan_result_free(&r);
        plan_eval_free(&e);
    }
    free(a);
    const char *path = o->output ? o->output : "-";
    if (o->format == FMT_JSON) {
        json_t *root = json_pack("{s:s, s:i, s:s, s:s, s:o}", "format", "hps-pareto", "version", PLAN_VERSION,
                                 "objective", plan_objective_names[p->objective], "algorithm", o->algo,
                                 "points", points);
        int rc = hps_json_write(path, root, &err);
        json_decref(root);
        if (rc) die(&err);
        return 0;
    }
    if (!(out = hps_out_open(path, &err))) die(&err);
    FILE *f = hps_out_file(out);
    fprintf(f, "%14s  %14s  %12s  %10s  %s\n", "limit", "samples/s", "cost $", "$/hour", "stages");
    size_t i;
    json_t *pt;
    json_array_foreach(points, i, pt)
        fprintf(f, "%14.1f  %14.1f  %12.4f  %10.3f  %s\n",
                json_real_value(json_object_get(pt, "min_throughput")),
                json_real_value(json_object_get(pt, "throughput")), json_real_value(json_object_get(pt, "cost")),
                json_real_value(json_object_get(pt, "cost_per_hour")),
                json_string_value(json_object_get(pt, "stages")));
    json_decref(points);
    if (hps_out_commit(out, &err)) die(&err);
    return 0;
}

/* --explain PLAN: inputs default to the paths the plan records; digests must match. */
static int explain(options *o)
{
    hps_error err;
    plan_file pf;
    if (plan_file_load(o->explain, &pf, &err)) die(&err);
    if (!pf.assign || !pf.objective[0] || !pf.min_throughput || !pf.samples || !pf.epochs) {
        hps_fail(&err, HPS_EXIT_USAGE, "%s: needs assignment, objective, min_throughput, samples and epochs",
                 pf.name);
        die(&err);
    }
    if (!o->model) o->model = pf.model_path;
    if (!o->cluster) o->cluster = pf.cluster_path;
    if (!o->n_profiles && pf.n_profiles) {
        free(o->profiles);
        o->profiles = hps_calloc((size_t)pf.n_profiles, sizeof *o->profiles);
        for (int i = 0; i < pf.n_profiles; i++) o->profiles[i] = pf.profile_paths[i];
        o->n_profiles = pf.n_profiles;
    }
    inputs in = {0};
    load_inputs(o, &in);
    if (strcmp(pf.model_digest, in.model->digest) != 0)
        usage_error("%s: the plan was made for another model (digests differ)", o->model);
    if (strcmp(pf.cluster_digest, in.cluster->digest) != 0)
        usage_error("%s: the plan was made for another cluster (digests differ)", o->cluster);
    plan_problem *p = in.problem;
    p->objective = choice("objective", pf.objective, plan_objective_names);
    p->min_throughput = pf.min_throughput;
    p->samples = pf.samples;
    p->epochs = pf.epochs;
    int *a = hps_malloc((size_t)p->n_layers * sizeof *a);
    if (pf.n_layers != p->n_layers) usage_error("%s: the plan has another number of layers", pf.name);
    for (int l = 0; l < p->n_layers; l++)
        if ((a[l] = hps_cluster_find(in.cluster, pf.assign[l])) < 0)
            usage_error("%s: the plan names a type the cluster lacks", pf.assign[l]);
    hps_out *out = hps_out_open(o->output ? o->output : "-", &err);
    if (!out) die(&err);
    plan_explain(hps_out_file(out), p, a);
    if (hps_out_commit(out, &err)) die(&err);
    free(a);
    plan_file_free(&pf);
    plan_problem_free(in.problem);
    hps_profiles_free(in.profiles);
    hps_cluster_free(in.cluster);
    hps_model_free(in.model);
    free(o->profiles);
    return 0;
}

int main(int argc, char **argv)
{
    hps_set_progname("hps-plan");
    options o;
    parse_options(argc, argv, &o);
    if (o.explain) return explain(&o);
    if (!(o.min_throughput > 0)) usage_error("%s", "missing --min-throughput N");
    inputs in = {0};
    load_inputs(&o, &in);
    plan_problem *p = in.problem;
    p->min_throughput = o.min_throughput;
    p->samples = o.samples;
    p->epochs = (int)o.epochs;
    p->objective = o.objective;
    check_power(p, in.cluster);
    int rc = o.pareto ? pareto(&o, &in) : plan_once(&o, &in);
    plan_problem_free(in.problem);
    hps_profiles_free(in.profiles);
    hps_cluster_free(in.cluster);
    hps_model_free(in.model);
    free(o.profiles);
    return rc;
}
