/* Several jobs on one cluster: the jobs file (hps-plan(5), JOBS FILE), each
 * job's candidate plans from the single-job planner, and the joint plan. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "plan/hps_plan_inputs.h"
#include "plan/hps_plan_jobs.h"

/* ---- the jobs file ---------------------------------------------------------- */

/* rel as seen from the directory of file (the files a jobs file names). */
static char *resolve(const char *file, const char *rel)
{
    const char *slash = strrchr(file, '/');
    if (rel[0] == '/' || !slash) return hps_strdup(rel);
    size_t n = (size_t)(slash - file) + 1, m = strlen(rel);
    char *s = hps_malloc(n + m + 1);
    memcpy(s, file, n);
    memcpy(s + n, rel, m + 1);
    return s;
}

static int parse_job(json_t *o, const char *file, int i, plan_job_spec *js, hps_error *err)
{
    static const char *const keys[] = {"name", "model", "profiles", "samples", "epochs", "min_throughput",
                                       "deadline_hours", "weight", "comment", NULL};
    char ctx[HPS_NAME_MAX + 600], buf[HPS_NAME_MAX];
    snprintf(ctx, sizeof ctx, "%s: job %d", file, i);
    if (!json_is_object(o)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object", ctx);
    const char *name, *model;
    if (hps_json_str(o, "name", HPS_REQUIRED, &name, ctx, err)) return -1;
    if (!*name || strlen(name) >= HPS_NAME_MAX)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: name must be 1 to %d characters", ctx, HPS_NAME_MAX - 1);
    /* it names the job's rankfile (--rankfile PREFIX.NAME) */
    if (name[0] == '.' || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(name))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: name '%s' must be letters, digits, '.', '_' and '-', not first '.'",
                        ctx, hps_printable(name, buf, sizeof buf));
    snprintf(ctx, sizeof ctx, "%s: job '%s'", file, name);
    js->name = hps_strdup(name);
    long long epochs = 1;
    double hours = 0;
    js->weight = 1;
    js->samples = 1e8;
    if (hps_json_known_keys(o, keys, ctx, err) || hps_json_str(o, "model", HPS_REQUIRED, &model, ctx, err) ||
        hps_json_num(o, "samples", HPS_OPTIONAL, 1, 1e18, &js->samples, ctx, err) ||
        hps_json_int(o, "epochs", HPS_OPTIONAL, 1, 1000000, &epochs, ctx, err) ||
        hps_json_num(o, "min_throughput", HPS_OPTIONAL, 1e-9, 1e15, &js->min_throughput, ctx, err) ||
        hps_json_num(o, "deadline_hours", HPS_OPTIONAL, 1e-9, 1e9, &hours, ctx, err) ||
        hps_json_num(o, "weight", HPS_OPTIONAL, 1e-9, 1e9, &js->weight, ctx, err))
        return -1;
    js->epochs = (int)epochs;
    js->deadline_s = hours > 0 ? hours * 3600 : HUGE_VAL;
    if (!(js->min_throughput > 0) && !(hours > 0))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: needs min_throughput (samples/s) or deadline_hours", ctx);
    js->model = resolve(file, model);
    json_t *ps = json_object_get(o, "profiles");
    if (!json_is_array(ps) || json_array_size(ps) == 0 || json_array_size(ps) > 64)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: profiles must be an array of 1 to 64 file names", ctx);
    js->profiles = hps_calloc(json_array_size(ps), sizeof *js->profiles);
    for (size_t k = 0; k < json_array_size(ps); k++) {
        json_t *v = json_array_get(ps, k);
        if (!json_is_string(v) || !*json_string_value(v))
            return hps_fail(err, HPS_EXIT_USAGE, "%s: profiles[%zu] must be a file name", ctx, k);
        js->profiles[js->n_profiles++] = resolve(file, json_string_value(v));
    }
    return 0;
}

int plan_jobs_file_parse(json_t *root, const char *path, plan_jobs_file *jf, hps_error *err)
{
    static const char *const keys[] = {"format", "version", "cluster", "budget", "jobs", "comment", NULL};
    const char *file = hps_path_name(path), *cluster;
    memset(jf, 0, sizeof *jf);
    jf->path = hps_strdup(path);
    jf->budget = HUGE_VAL;
    if (!json_is_object(root)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be a JSON object", file);
    if (hps_json_format(root, "hps-jobs", PLAN_JOBS_VERSION, HPS_REQUIRED, NULL, file, err) ||
        hps_json_known_keys(root, keys, file, err) || hps_json_str(root, "cluster", HPS_REQUIRED, &cluster, file, err) ||
        hps_json_num(root, "budget", HPS_OPTIONAL, 1e-9, 1e15, &jf->budget, file, err))
        return -1;
    jf->cluster = resolve(path, cluster);
    json_t *jobs = json_object_get(root, "jobs");
    if (!json_is_array(jobs) || json_array_size(jobs) == 0 || json_array_size(jobs) > PLAN_JOBS_MAX)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: jobs must be an array of 1 to %d jobs", file, PLAN_JOBS_MAX);
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        plan_job_spec *js = &jf->jobs[jf->n_jobs++];
        if (parse_job(json_array_get(jobs, i), path, (int)i, js, err)) return -1;
        for (int k = 0; k < jf->n_jobs - 1; k++)
            if (strcmp(jf->jobs[k].name, js->name) == 0) {
                char buf[HPS_NAME_MAX];
                return hps_fail(err, HPS_EXIT_USAGE, "%s: job %zu: name '%s' is job %d's too", file, i,
                                hps_printable(js->name, buf, sizeof buf), k);
            }
    }
    return 0;
}

int plan_jobs_file_load(const char *path, plan_jobs_file *jf, hps_error *err)
{
    json_t *root;
    memset(jf, 0, sizeof *jf);
    if (hps_json_load(path, &root, err)) return -1;
    int rc = plan_jobs_file_parse(root, path, jf, err);
    json_decref(root);
    return rc;
}

void plan_jobs_file_free(plan_jobs_file *jf)
{
    for (int i = 0; i < jf->n_jobs; i++) {
        plan_job_spec *js = &jf->jobs[i];
        for (int k = 0; k < js->n_profiles; k++) free(js->profiles[k]);
        free(js->profiles);
        free(js->name);
        free(js->model);
    }
    free(jf->path);
    free(jf->cluster);
    memset(jf, 0, sizeof *jf);
}

/* ---- candidates ------------------------------------------------------------- */

typedef struct {
    plan_inputs in;
    int n_candidates;
    int *assign[PLAN_JOBS_MAX_OPTIONS]; /* each candidate's type of each layer */
    double limit[PLAN_JOBS_MAX_OPTIONS]; /* the throughput floor it was planned at */
} job_plans;

struct plan_jobs {
    const plan_jobs_file *jf;
    hps_cluster *cluster; /* the first job's: every job's is the same file */
    job_plans jobs[PLAN_JOBS_MAX];
    plan_jobs_problem problem;
};

/* 1 when a is no better than b on units, time and cost. */
static int dominated(const plan_job_option *a, const plan_job_option *b, int n_types)
{
    for (int k = 0; k < n_types; k++)
        if (b->units[k] > a->units[k]) return 0;
    return b->duration_s <= a->duration_s && b->cost <= a->cost;
}

/* Adds the plan of assignment a (at the problem's floor) unless another
 * candidate dominates it; removes those it dominates. */
static void add_candidate(job_plans *jp, plan_job_choice *c, const plan_problem *p, const int *a)
{
    plan_eval e;
    plan_eval_init(&e, p);
    plan_evaluate(p, a, &e);
    plan_job_option o = {.duration_s = e.time_s, .cost = e.cost, .throughput = e.throughput,
                         .cost_per_hour = e.cost_per_hour};
    memcpy(o.units, e.used, sizeof o.units);
    int ok = e.feasible;
    plan_eval_free(&e);
    for (int i = 0; ok && i < c->n_options; i++)
        if (dominated(&o, &c->options[i], p->n_types)) ok = 0;
    if (!ok || c->n_options == PLAN_JOBS_MAX_OPTIONS) return;
    for (int i = 0; i < c->n_options;)
        if (dominated(&c->options[i], &o, p->n_types)) {
            free(jp->assign[i]);
            memmove(&c->options[i], &c->options[i + 1], (size_t)(c->n_options - i - 1) * sizeof o);
            memmove(&jp->assign[i], &jp->assign[i + 1], (size_t)(c->n_options - i - 1) * sizeof *jp->assign);
            memmove(&jp->limit[i], &jp->limit[i + 1], (size_t)(c->n_options - i - 1) * sizeof *jp->limit);
            c->n_options--;
        } else i++;
    /* the cheapest first: option 0 is the plan the job gets alone */
    int at = c->n_options;
    while (at > 0 && c->options[at - 1].cost > o.cost) at--;
    memmove(&c->options[at + 1], &c->options[at], (size_t)(c->n_options - at) * sizeof o);
    memmove(&jp->assign[at + 1], &jp->assign[at], (size_t)(c->n_options - at) * sizeof *jp->assign);
    memmove(&jp->limit[at + 1], &jp->limit[at], (size_t)(c->n_options - at) * sizeof *jp->limit);
    c->options[at] = o;
    jp->assign[at] = hps_malloc((size_t)p->n_layers * sizeof(int));
    memcpy(jp->assign[at], a, (size_t)p->n_layers * sizeof(int));
    jp->limit[at] = p->min_throughput;
    c->n_options++;
    jp->n_candidates = c->n_options;
}

/* The job's Pareto frontier of cost against throughput from its floor up,
 * and its cheapest plan on each type alone. */
static int plan_candidates(const plan_job_spec *js, job_plans *jp, plan_job_choice *c, double bound_s,
                           hps_error *err)
{
    plan_problem *p = jp->in.problem;
    p->samples = js->samples;
    p->epochs = js->epochs;
    p->objective = PLAN_OBJ_COST;
    p->min_throughput = fmax(js->min_throughput, js->deadline_s < HUGE_VAL ? js->samples * js->epochs / js->deadline_s : 0);
    plan_search_opts so = {.seed = 1, .bound_time = bound_s, .time_limit = bound_s};
    plan_frontier fr;
    char buf[HPS_NAME_MAX];
    if (plan_pareto(p, jp->in.cluster, "exact", &so, 6, &fr, err)) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return hps_fail(err, HPS_EXIT_RUNTIME, "job '%s': %s", hps_printable(js->name, buf, sizeof buf), msg);
    }
    double floor = p->min_throughput;
    int *a = hps_malloc((size_t)p->n_layers * sizeof *a);
    for (int i = 0; i < fr.n; i++) {
        for (int s = 0; s < fr.points[i].n_stages; s++)
            for (int l = fr.points[i].stages[s].first; l < fr.points[i].stages[s].end; l++)
                a[l] = fr.points[i].stages[s].type;
        p->min_throughput = fr.points[i].min_throughput;
        add_candidate(jp, c, p, a);
    }
    p->min_throughput = floor;
    for (int t = 0; t < p->n_types; t++) {
        plan_result r;
        plan_result_init(&r, p);
        if (plan_solve_fixed(p, t, &r) == 0 && r.found) add_candidate(jp, c, p, r.assign);
        plan_result_free(&r);
    }
    free(a);
    plan_frontier_free(&fr);
    return 0;
}

plan_jobs *plan_jobs_create(const plan_jobs_file *jf, double bound_s, hps_error *err)
{
    plan_jobs *j = hps_calloc(1, sizeof *j);
    j->jf = jf;
    plan_jobs_problem *jp = &j->problem;
    jp->n_jobs = jf->n_jobs;
    jp->budget = jf->budget;
    for (int i = 0; i < jf->n_jobs; i++) {
        const plan_job_spec *js = &jf->jobs[i];
        plan_sources src = {.model = js->model, .cluster = jf->cluster,
                            .profiles = (const char *const *)js->profiles, .n_profiles = js->n_profiles};
        int rc = plan_inputs_load(&src, &j->jobs[i].in, err);
        if (rc) { /* which job named the file */
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            hps_fail(err, err->code, "%s: job '%s': %s", hps_path_name(jf->path), js->name, msg);
        }
        /* the joint plan's rankfile puts servers on units of the servers' type */
        if (!rc) j->jobs[i].in.problem->separate_servers = 1;
        if (rc || plan_candidates(js, &j->jobs[i], &jp->jobs[i], bound_s, err)) {
            plan_jobs_free(j);
            return NULL;
        }
        jp->jobs[i].weight = js->weight;
        jp->jobs[i].deadline_s = js->deadline_s;
        hps_log(3, "hps-plan: job '%s': %d candidate plans\n", js->name, jp->jobs[i].n_options);
    }
    j->cluster = j->jobs[0].in.cluster;
    jp->n_types = j->cluster->n_types;
    for (int k = 0; k < jp->n_types; k++) jp->max_units[k] = j->cluster->types[k].max_units;
    return j;
}

void plan_jobs_free(plan_jobs *j)
{
    if (!j) return;
    for (int i = 0; i < PLAN_JOBS_MAX; i++) {
        for (int k = 0; k < j->jobs[i].n_candidates; k++) free(j->jobs[i].assign[k]);
        plan_inputs_free(&j->jobs[i].in);
    }
    free(j);
}

plan_jobs_problem *plan_jobs_problem_of(plan_jobs *j) { return &j->problem; }

/* ---- the joint plan ------------------------------------------------------- */

/* The units of each type a job holds: [k][i], its i-th unit of type k. */
typedef struct {
    int *of[PLAN_MAX_TYPES];
} job_units;

/* Which units of each type each job holds: the lowest free ones at its
 * start, freed at its end (the schedule never asks for more than there are). */
static void assign_units(const plan_jobs_problem *jp, const plan_jobs_schedule *s, job_units *ids)
{
    int order[PLAN_JOBS_MAX];
    for (int i = 0; i < jp->n_jobs; i++) order[i] = i;
    for (int i = 1; i < jp->n_jobs; i++) /* by start */
        for (int k = i; k > 0 && s->start_s[order[k]] < s->start_s[order[k - 1]]; k--) {
            int t = order[k];
            order[k] = order[k - 1], order[k - 1] = t;
        }
    for (int k = 0; k < jp->n_types; k++) {
        int *holder = hps_calloc((size_t)jp->max_units[k], sizeof *holder); /* the job holding each unit, + 1 */
        for (int i = 0; i < jp->n_jobs; i++) {
            int j = order[i], want = jp->jobs[j].options[s->option[j]].units[k], n = 0;
            ids[j].of[k] = hps_calloc((size_t)want + 1, sizeof(int));
            for (int u = 0; u < jp->max_units[k] && n < want; u++) {
                int h = holder[u] - 1;
                if (h >= 0 && s->end_s[h] > s->start_s[j]) continue;
                holder[u] = j + 1;
                ids[j].of[k][n++] = u;
            }
        }
        free(holder);
    }
}

static json_t *units_json(const hps_cluster *c, const int *units)
{
    json_t *o = json_object();
    for (int k = 0; k < c->n_types; k++)
        if (units[k]) json_object_set_new(o, c->types[k].name, json_integer(units[k]));
    return o;
}

/* Unit u of type k: its node, and its first core there (the units of a node
 * take its cores type by type, as plan_rankfile_write gives them). */
static int unit_node(const hps_cluster *c, int k, int u, int *core)
{
    for (int n = 0; n < c->n_nodes; n++) {
        if (u < c->nodes[n].units[k]) {
            *core = 0;
            for (int t = 0; t < k; t++) *core += c->nodes[n].units[t] * c->types[t].threads;
            *core += u * c->types[k].threads;
            return n;
        }
        u -= c->nodes[n].units[k];
    }
    return -1;
}

/* The job's units and, on a cluster with nodes, its ranks on them: workers
 * stage by stage on its units of their type, then its servers on its units
 * of the servers' type; where the servers are no type's, on the cores past
 * every unit's of a node (extra_cores[node]: the next, over all jobs). */
static void placement_json(const hps_cluster *c, const plan_eval *e, const job_units *ids, int *extra_cores,
                           json_t *job)
{
    json_t *units = json_object();
    for (int k = 0; k < c->n_types; k++) {
        if (!e->used[k]) continue;
        json_t *a = json_array();
        for (int i = 0; i < e->used[k]; i++) json_array_append_new(a, json_integer(ids->of[k][i]));
        json_object_set_new(units, c->types[k].name, a);
    }
    json_object_set_new(job, "unit_ids", units);
    if (!c->n_nodes) {
        json_object_set_new(job, "rankfile", json_null());
        return;
    }
    json_t *lines = json_array();
    int next[PLAN_MAX_TYPES] = {0}, rank = 0;
    char line[HPS_NAME_MAX + 64];
    for (int s = 0; s < e->n_stages; s++)
        for (int w = 0; w < e->stages[s].units; w++, rank++) {
            int k = e->stages[s].type, core, n = unit_node(c, k, ids->of[k][next[k]++], &core);
            int th = c->types[k].threads;
            if (th > 1) snprintf(line, sizeof line, "rank %d=%s slot=%d-%d", rank, c->nodes[n].name, core, core + th - 1);
            else snprintf(line, sizeof line, "rank %d=%s slot=%d", rank, c->nodes[n].name, core);
            json_array_append_new(lines, json_string(line));
        }
    for (int v = 0; v < e->servers; v++, rank++) {
        int k = c->server_type, core, n;
        if (k >= 0) n = unit_node(c, k, ids->of[k][next[k]++], &core);
        else { /* servers that are no type's units: a core past the units' on the first worker's node */
            n = unit_node(c, e->stages[0].type, ids->of[e->stages[0].type][0], &core);
            core = extra_cores[n]++;
        }
        snprintf(line, sizeof line, "rank %d=%s slot=%d", rank, c->nodes[n].name, core);
        json_array_append_new(lines, json_string(line));
    }
    json_object_set_new(job, "rankfile", lines);
}

/* The job's plan as hps-plan writes it alone (hps-plan(5)). */
static json_t *job_plan_json(const plan_job_spec *js, job_plans *jp, int option, const char *out, json_t *job,
                             const job_units *ids, int *extra_cores, hps_error *err)
{
    plan_problem *p = jp->in.problem;
    double floor = p->min_throughput;
    p->min_throughput = jp->limit[option];
    plan_eval e;
    plan_result r;
    plan_layout l;
    plan_eval_init(&e, p);
    plan_result_init(&r, p);
    memcpy(r.assign, jp->assign[option], (size_t)p->n_layers * sizeof *r.assign);
    r.found = 1;
    r.found_by = "exact";
    plan_evaluate(p, r.assign, &e);
    json_t *doc = NULL;
    if (plan_layout_make(p, jp->in.cluster, &e, &l, err) == 0) {
        int n = js->n_profiles;
        char **names = hps_calloc((size_t)n + 2, sizeof *names);
        const char **digests = hps_calloc((size_t)n, sizeof *digests);
        for (int i = 0; i < n; i++) {
            names[i] = hps_path_relative(out, js->profiles[i]);
            digests[i] = hps_profiles_digest(jp->in.profiles, i);
        }
        names[n] = hps_path_relative(out, js->model);
        names[n + 1] = hps_path_relative(out, jp->in.cluster->path);
        plan_meta m = {.model_path = names[n], .cluster_path = names[n + 1], .model_digest = jp->in.model->digest,
                       .cluster_digest = jp->in.cluster->digest, .n_profiles = n,
                       .profile_names = (const char *const *)names, .profile_digests = digests,
                       .model_name = jp->in.model->name, .algorithm = "exact",
                       .opts = {.seed = 1}, .exact_objective = -1};
        doc = plan_to_json(p, &e, &l, &r, &m, jp->in.cluster);
        placement_json(jp->in.cluster, &e, ids, extra_cores, job);
        for (int i = 0; i < n + 2; i++) free(names[i]);
        free(names);
        free(digests);
        plan_layout_free(&l);
    }
    plan_eval_free(&e);
    plan_result_free(&r);
    p->min_throughput = floor;
    return doc;
}

static json_t *totals_json(const plan_jobs_schedule *s)
{
    return json_pack("{s:o, s:o, s:o, s:b}", "cost", hps_json_real(s->cost), "completion_s",
                     hps_json_real(s->completion), "makespan_s", hps_json_real(s->makespan), "feasible",
                     s->feasible);
}

/* Between each two events: which jobs run, which wait, the units in use. */
static json_t *phases_json(const plan_jobs *j, const plan_jobs_schedule *s)
{
    const plan_jobs_problem *jp = &j->problem;
    double t[2 * PLAN_JOBS_MAX];
    int n = 0;
    for (int i = 0; i < jp->n_jobs; i++) t[n++] = s->start_s[i], t[n++] = s->end_s[i];
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && t[b] < t[b - 1]; b--) {
            double x = t[b];
            t[b] = t[b - 1], t[b - 1] = x;
        }
    json_t *phases = json_array();
    for (int a = 0; a + 1 < n; a++) {
        if (!(t[a + 1] > t[a])) continue;
        json_t *run = json_array(), *wait = json_array();
        int used[PLAN_MAX_TYPES] = {0};
        for (int i = 0; i < jp->n_jobs; i++) {
            if (s->start_s[i] <= t[a] && t[a] < s->end_s[i]) {
                json_array_append_new(run, json_string(j->jf->jobs[i].name));
                for (int k = 0; k < jp->n_types; k++) used[k] += jp->jobs[i].options[s->option[i]].units[k];
            } else if (s->start_s[i] > t[a])
                json_array_append_new(wait, json_string(j->jf->jobs[i].name));
        }
        json_array_append_new(phases, json_pack("{s:o, s:o, s:o, s:o, s:o}", "start_s", hps_json_real(t[a]), "end_s",
                                                hps_json_real(t[a + 1]), "running", run, "waiting", wait, "units",
                                                units_json(j->cluster, used)));
    }
    return phases;
}

json_t *plan_jobs_to_json(plan_jobs *j, const plan_jobs_schedule *s, const plan_jobs_schedule *separate,
                          const char *algo, const char *out, hps_error *err)
{
    const plan_jobs_problem *jp = &j->problem;
    json_t *root = json_object(), *jobs = json_array(), *limits = json_object();
    char *jobs_path = hps_path_relative(out, j->jf->path), *cluster = hps_path_relative(out, j->cluster->path);
    json_object_set_new(root, "format", json_string("hps-joint-plan"));
    json_object_set_new(root, "version", json_integer(PLAN_JOINT_VERSION));
    json_object_set_new(root, "tool", json_string("hps-plan " HPS_VERSION));
    json_object_set_new(root, "inputs", json_pack("{s:s, s:s}", "jobs", jobs_path, "cluster", cluster));
    free(jobs_path);
    free(cluster);
    json_object_set_new(root, "objective", json_string(plan_jobs_objective_names[jp->objective]));
    json_object_set_new(root, "algorithm", json_string(algo));
    json_object_set_new(root, "optimal", json_boolean(s->optimal && s->feasible));
    json_object_set_new(root, "schedules", json_integer(s->schedules));
    json_object_set_new(root, "budget", jp->budget < HUGE_VAL ? hps_json_real(jp->budget) : json_null());
    for (int k = 0; k < jp->n_types; k++)
        json_object_set_new(limits, j->cluster->types[k].name, json_integer(jp->max_units[k]));
    json_object_set_new(root, "max_units", limits);
    json_object_set_new(root, "totals", totals_json(s));
    json_object_set_new(root, "separate", totals_json(separate));
    job_units *ids = hps_calloc(PLAN_JOBS_MAX, sizeof *ids);
    assign_units(jp, s, ids);
    const hps_cluster *c = j->cluster;
    int *extra_cores = hps_calloc((size_t)c->n_nodes + 1, sizeof *extra_cores);
    for (int n = 0; n < c->n_nodes; n++)
        for (int k = 0; k < c->n_types; k++) extra_cores[n] += c->nodes[n].units[k] * c->types[k].threads;
    int rc = 0;
    for (int i = 0; i < jp->n_jobs && rc == 0; i++) {
        const plan_job_spec *js = &j->jf->jobs[i];
        const plan_job_option *o = &jp->jobs[i].options[s->option[i]];
        json_t *job = json_pack("{s:s, s:o, s:o, s:o, s:i, s:i, s:i}", "name", js->name, "weight",
                                hps_json_real(js->weight), "deadline_s",
                                js->deadline_s < HUGE_VAL ? hps_json_real(js->deadline_s) : json_null(),
                                "samples", hps_json_real(js->samples), "epochs", js->epochs, "candidates",
                                jp->jobs[i].n_options, "candidate", s->option[i]);
        json_object_set_new(job, "start_s", hps_json_real(s->start_s[i]));
        json_object_set_new(job, "end_s", hps_json_real(s->end_s[i]));
        json_object_set_new(job, "separate_end_s", hps_json_real(separate->end_s[i]));
        json_object_set_new(job, "throughput", hps_json_real(o->throughput));
        json_object_set_new(job, "cost", hps_json_real(o->cost));
        json_object_set_new(job, "cost_per_hour", hps_json_real(o->cost_per_hour));
        json_object_set_new(job, "units", units_json(j->cluster, o->units));
        json_t *plan = job_plan_json(js, &j->jobs[i], s->option[i], out, job, &ids[i], extra_cores, err);
        if (!plan) rc = -1;
        else json_object_set_new(job, "plan", plan);
        json_array_append_new(jobs, job);
    }
    for (int i = 0; i < jp->n_jobs; i++)
        for (int k = 0; k < jp->n_types; k++) free(ids[i].of[k]);
    free(ids);
    free(extra_cores);
    json_object_set_new(root, "jobs", jobs);
    json_object_set_new(root, "phases", phases_json(j, s));
    if (rc) json_decref(root);
    return rc ? NULL : root;
}
