/* Reading a plan back (hps-plan(5)): the one reader hps-shard, hps-train,
 * its ranks under mpirun, hps-plan show and --explain use.  Every index is
 * bounded here, so that no tool indexes past its arrays on a bad plan. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "plan/hps_plan.h"
#include "plan/hps_plan_file.h"

static int copy_str(char *dst, size_t n, const char *src, const char *what, const char *ctx, hps_error *err)
{
    if (strlen(src) >= n)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s is longer than %zu bytes", ctx, what, n - 1);
    strcpy(dst, src);
    return 0;
}

/* A path inside a plan names a file relative to the plan's directory, so a
 * moved plan still works; one that does not exist there is taken as given
 * (a plan written to stdout records paths from the current directory). */
static char *resolve(const char *plan_path, const char *p)
{
    const char *slash = strrchr(plan_path, '/');
    if (p[0] == '/' || !slash) return hps_strdup(p);
    size_t n = (size_t)(slash - plan_path) + strlen(p) + 2;
    char *r = hps_malloc(n);
    snprintf(r, n, "%.*s/%s", (int)(slash - plan_path), plan_path, p);
    if (access(r, F_OK) != 0 && access(p, F_OK) == 0) snprintf(r, n, "%s", p);
    return r;
}

static int read_tables(json_t *root, plan_file *pf, hps_error *err)
{
    json_t *t = json_object_get(root, "tables");
    char ctx[600];
    long long admit = 1;
    snprintf(ctx, sizeof ctx, "%s: tables", pf->name);
    if (t && !json_is_object(t)) return hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
    if (t && (hps_json_enum(t, "row_dtype", HPS_OPTIONAL, hps_row_dtype_names, &pf->row_dtype, ctx, err) ||
              hps_json_enum(t, "sparse_optimizer", HPS_OPTIONAL, plan_sparse_optimizer_names, &pf->rowwise, ctx,
                            err) ||
              hps_json_int(t, "admit_after", HPS_OPTIONAL, 1, 65535, &admit, ctx, err)))
        return -1;
    pf->admit_after = (int)admit;
    pf->has_tables = t != NULL;
    return 0;
}

static int read_inputs(json_t *root, plan_file *pf, hps_error *err)
{
    json_t *in = json_object_get(root, "inputs"), *profs = json_object_get(in, "profiles"), *v;
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: inputs", pf->name);
    if (!in) return 0;
    const char *model = NULL, *cluster = NULL, *stats = NULL;
    if (!json_is_object(in) || hps_json_str(in, "model", HPS_OPTIONAL, &model, ctx, err) ||
        hps_json_str(in, "cluster", HPS_OPTIONAL, &cluster, ctx, err) ||
        hps_json_str(in, "data_stats", HPS_OPTIONAL, &stats, ctx, err))
        return json_is_object(in) ? -1 : hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
    if (model) pf->model_path = resolve(pf->path, model);
    if (cluster) pf->cluster_path = resolve(pf->path, cluster);
    if (stats) pf->data_stats_path = resolve(pf->path, stats);
    size_t i;
    if (!json_is_array(profs)) return 0;
    pf->profile_paths = hps_calloc(json_array_size(profs) + 1, sizeof *pf->profile_paths);
    json_array_foreach(profs, i, v) {
        if (!json_is_string(v))
            return hps_fail(err, HPS_EXIT_USAGE, "%s: profiles[%zu] must be a path", ctx, i);
        if (strcmp(json_string_value(v), "<stdin>") != 0)
            pf->profile_paths[pf->n_profiles++] = resolve(pf->path, json_string_value(v));
        else pf->profile_paths[pf->n_profiles++] = hps_strdup("-"), pf->stdin_profile = 1;
    }
    /* the profile piped in, kept so that show and --explain need no -p */
    json_t *kept = json_object_get(in, "stdin_profile");
    if (kept && !json_is_object(kept))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: stdin_profile must be an object (a profile)", ctx);
    if (kept && pf->stdin_profile) pf->stdin_profile_text = json_dumps(kept, JSON_COMPACT);
    return 0;
}

static int read_head(json_t *root, plan_file *pf, hps_error *err)
{
    json_t *dg = json_object_get(root, "digests"), *model = json_object_get(root, "model");
    const char *md = NULL, *cd = NULL, *objective = NULL;
    long long epochs = 0, batch = 0, layers = 0;
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: digests", pf->name);
    if (dg && (!json_is_object(dg) || hps_json_str(dg, "model", HPS_OPTIONAL, &md, ctx, err) ||
               hps_json_str(dg, "cluster", HPS_OPTIONAL, &cd, ctx, err)))
        return json_is_object(dg) ? -1 : hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
    snprintf(ctx, sizeof ctx, "%s: model", pf->name);
    if (model && (!json_is_object(model) ||
                  hps_json_int(model, "batch", HPS_OPTIONAL, 1, HPS_MAX_BATCH, &batch, ctx, err) ||
                  hps_json_int(model, "layers", HPS_OPTIONAL, 1, HPS_MAX_LAYERS, &layers, ctx, err)))
        return json_is_object(model) ? -1 : hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
    static const char *const rows[] = {"auto", "servers", NULL};
    if (hps_json_enum(root, "rows", HPS_OPTIONAL, rows, &pf->rows_on_servers, pf->name, err) ||
        hps_json_str(root, "objective", HPS_OPTIONAL, &objective, pf->name, err) ||
        hps_json_num(root, "min_throughput", HPS_OPTIONAL, 1e-9, 1e15, &pf->min_throughput, pf->name, err) ||
        hps_json_num(root, "samples", HPS_OPTIONAL, 1, 1e18, &pf->samples, pf->name, err) ||
        hps_json_int(root, "epochs", HPS_OPTIONAL, 1, 1000000, &epochs, pf->name, err))
        return -1;
    if ((md && copy_str(pf->model_digest, sizeof pf->model_digest, md, "digests.model", pf->name, err)) ||
        (cd && copy_str(pf->cluster_digest, sizeof pf->cluster_digest, cd, "digests.cluster", pf->name, err)) ||
        (objective && copy_str(pf->objective, sizeof pf->objective, objective, "objective", pf->name, err)))
        return -1;
    pf->epochs = (int)epochs, pf->batch = (int)batch, pf->n_layers = (int)layers;
    /* what the plan promises, for hps-train's summary beside what it measures */
    json_t *pred = json_object_get(root, "predicted");
    snprintf(ctx, sizeof ctx, "%s: predicted", pf->name);
    if (json_is_object(pred) &&
        (hps_json_num(pred, "throughput", HPS_OPTIONAL, 0, 1e15, &pf->predicted_throughput, ctx, err) ||
         hps_json_num(pred, "in_process_throughput", HPS_OPTIONAL, 0, 1e15, &pf->predicted_in_process, ctx,
                      err)))
        return -1;
    json_t *pipe = json_object_get(root, "pipeline");
    long long micro = 0;
    snprintf(ctx, sizeof ctx, "%s: pipeline", pf->name);
    if (pipe && (!json_is_object(pipe) ||
                 hps_json_int(pipe, "micro_batches", HPS_OPTIONAL, 1, HPS_MAX_MICRO_BATCHES, &micro, ctx, err)))
        return json_is_object(pipe) ? -1 : hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
    pf->micro_batches = (int)micro;
    json_t *net = json_object_get(root, "network");
    return json_is_object(net) ? hps_json_num(net, "bytes_per_step", HPS_OPTIONAL, 0, 1e18, &pf->network_bytes,
                                              pf->name, err)
                               : 0;
}

static int read_assignment(json_t *root, plan_file *pf, hps_error *err)
{
    json_t *a = json_object_get(root, "assignment");
    if (!a) return 0;
    if (!json_is_array(a) || !pf->n_layers || (int)json_array_size(a) != pf->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: assignment must name a type for each of model.layers", pf->name);
    pf->assign = hps_calloc((size_t)pf->n_layers, sizeof *pf->assign);
    for (int l = 0; l < pf->n_layers; l++) {
        json_t *v = json_array_get(a, (size_t)l);
        if (!json_is_string(v)) return hps_fail(err, HPS_EXIT_USAGE, "%s: assignment %d must be a type name", pf->name, l);
        if (copy_str(pf->assign[l], HPS_NAME_MAX, json_string_value(v), "a type name", pf->name, err)) return -1;
    }
    return 0;
}

/* layers [first, last]: bounded before the end is computed (no overflow). */
static int read_stage(json_t *js, int i, plan_file *pf, int next, hps_error *err)
{
    static const char *const kinds[] = {"cpu", "gpu", NULL}, *const splits[] = {"replicas", "shards", NULL};
    plan_file_stage *s = &pf->stages[i];
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: stage %d", pf->name, i);
    const char *type;
    long long units = 0, servers = 0;
    int kind = 0, rows = PLAN_ROWS_SERVERS;
    json_t *layers = json_object_get(js, "layers");
    if (!json_is_object(js)) return hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
    if (hps_json_str(js, "type", HPS_REQUIRED, &type, ctx, err) ||
        copy_str(s->type, sizeof s->type, type, "type", ctx, err) ||
        hps_json_int(js, "units", HPS_REQUIRED, 0, PLAN_MAX_WORKERS, &units, ctx, err) ||
        hps_json_enum(js, "kind", HPS_OPTIONAL, kinds, &kind, ctx, err) ||
        hps_json_enum(js, "rows", HPS_OPTIONAL, plan_rows_names, &rows, ctx, err) ||
        hps_json_int(js, "servers", HPS_OPTIONAL, 0, PLAN_MAX_SERVERS, &servers, ctx, err) ||
        hps_json_bool(js, "servers_beside", HPS_OPTIONAL, &s->servers_beside, ctx, err) ||
        hps_json_num(js, "ms_per_batch", HPS_OPTIONAL, 0, 1e12, &s->ms_per_batch, ctx, err) ||
        hps_json_num(js, "servers_ms", HPS_OPTIONAL, 0, 1e12, &s->servers_ms, ctx, err) ||
        hps_json_num(js, "layers_ms", HPS_OPTIONAL, 0, 1e12, &s->layers_ms, ctx, err) ||
        hps_json_int(js, "cache_rows", HPS_OPTIONAL, 0, 1LL << 50, &s->cache_rows, ctx, err) ||
        hps_json_num(js, "cache_hit_rate", HPS_OPTIONAL, 0, 1, &s->cache_hit_rate, ctx, err) ||
        hps_json_enum(js, "rows_split", HPS_OPTIONAL, splits, &s->rows_shards, ctx, err))
        return -1;
    json_t *a = json_array_get(layers, 0), *b = json_array_get(layers, 1);
    if (!json_is_array(layers) || json_array_size(layers) != 2 || !json_is_integer(a) || !json_is_integer(b))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: layers must be [first, last]", ctx);
    long long first = json_integer_value(a), last = json_integer_value(b);
    int max = pf->n_layers ? pf->n_layers : HPS_MAX_LAYERS;
    if (first != next || last < first || last >= max)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: layers [%lld, %lld]: expected [%d, last] with last < %d",
                        ctx, first, last, next, max);
    s->first = (int)first, s->end = (int)last + 1;
    s->units = (int)units, s->servers = (int)servers;
    snprintf(s->kind, sizeof s->kind, "%s", kinds[kind]);
    snprintf(s->rows, sizeof s->rows, "%s", plan_rows_names[rows]);
    return 0;
}

static int read_stages(json_t *root, plan_file *pf, hps_error *err)
{
    json_t *st = json_object_get(root, "stages");
    if (!st) return 0;
    if (!json_is_array(st) || json_array_size(st) == 0 || json_array_size(st) > PLAN_MAX_STAGES)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: stages must be an array of 1 to %d stages", pf->name,
                        PLAN_MAX_STAGES);
    int next = 0;
    for (size_t i = 0; i < json_array_size(st); i++, pf->n_stages++) {
        if (read_stage(json_array_get(st, i), (int)i, pf, next, err)) return -1;
        next = pf->stages[i].end;
    }
    if (pf->n_layers && next != pf->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: stages end at layer %d of %d", pf->name, next - 1, pf->n_layers);
    return 0;
}

/* A worker's stage indexes the plan's stages (or, without them, at most PLAN_MAX_STAGES). */
static int read_workers(json_t *root, plan_file *pf, hps_error *err)
{
    json_t *ws = json_object_get(root, "workers"), *w;
    size_t i;
    if (!ws) return 0;
    if (!json_is_array(ws) || json_array_size(ws) > PLAN_MAX_WORKERS)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: workers must be an array of at most %d", pf->name,
                        PLAN_MAX_WORKERS);
    pf->workers = hps_calloc(json_array_size(ws) + 1, sizeof *pf->workers);
    int stages = pf->n_stages ? pf->n_stages : PLAN_MAX_STAGES;
    json_array_foreach(ws, i, w) {
        plan_file_worker *k = &pf->workers[i];
        char ctx[600];
        snprintf(ctx, sizeof ctx, "%s: workers[%zu]", pf->name, i);
        long long rank = 0, stage = 0;
        const char *type = "cpu";
        k->share = -1;
        if (!json_is_object(w)) return hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
        if (hps_json_int(w, "rank", HPS_REQUIRED, 0, PLAN_MAX_WORKERS + PLAN_MAX_SERVERS, &rank, ctx, err) ||
            hps_json_int(w, "stage", HPS_OPTIONAL, 0, stages - 1, &stage, ctx, err) ||
            hps_json_str(w, "type", HPS_OPTIONAL, &type, ctx, err) ||
            copy_str(k->type, sizeof k->type, type, "type", ctx, err) ||
            hps_json_num(w, "share", HPS_OPTIONAL, 0, 1, &k->share, ctx, err))
            return -1;
        const char *node = NULL;
        if (hps_json_str(w, "node", HPS_OPTIONAL, &node, ctx, err) ||
            (node && copy_str(k->node, sizeof k->node, node, "node", ctx, err)))
            return -1;
        k->rank = (int)rank, k->stage = (int)stage;
        pf->n_workers++;
    }
    return 0;
}

static int read_servers(json_t *root, plan_file *pf, hps_error *err)
{
    json_t *sv = json_object_get(root, "servers"), *ranks = json_object_get(sv, "ranks");
    json_t *routing = json_object_get(sv, "routing");
    char ctx[600];
    long long count = 0;
    const char *rule = NULL;
    snprintf(ctx, sizeof ctx, "%s: servers", pf->name);
    if (!sv) return 0;
    if (!json_is_object(sv)) return hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
    if (hps_json_int(sv, "count", HPS_REQUIRED, 0, PLAN_MAX_SERVERS, &count, ctx, err)) return -1;
    snprintf(ctx, sizeof ctx, "%s: servers.routing", pf->name);
    if (json_is_object(routing) && hps_json_str(routing, "rule", HPS_OPTIONAL, &rule, ctx, err)) return -1;
    if (rule && strcmp(rule, "mix64-mod") != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: rule: expected 'mix64-mod', got '%s'", ctx, rule);
    pf->n_servers = (int)count;
    if (!ranks) return 0;
    if (!json_is_array(ranks) || json_array_size(ranks) != (size_t)count)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: servers.ranks lists %zu ranks for %lld servers", pf->name,
                        json_is_array(ranks) ? json_array_size(ranks) : 0, count);
    pf->server_ranks = hps_calloc((size_t)count + 1, sizeof *pf->server_ranks);
    for (int s = 0; s < count; s++) {
        json_t *r = json_array_get(ranks, (size_t)s);
        if (!json_is_integer(r) || json_integer_value(r) < 0 ||
            json_integer_value(r) >= PLAN_MAX_WORKERS + PLAN_MAX_SERVERS)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: servers.ranks[%d] must be a rank", pf->name, s);
        pf->server_ranks[s] = (int)json_integer_value(r);
    }
    return 0;
}

/* placement: where the servers run, and the cross-node bytes predicted */
static int read_placement(json_t *root, plan_file *pf, hps_error *err)
{
    json_t *pl = json_object_get(root, "placement"), *ss, *v;
    char ctx[600];
    size_t i;
    pf->cross_node_bytes = -1;
    if (!json_is_object(pl)) return 0;
    snprintf(ctx, sizeof ctx, "%s: placement", pf->name);
    if (hps_json_num(pl, "cross_node_bytes_per_step", HPS_OPTIONAL, 0, 1e18, &pf->cross_node_bytes, ctx, err))
        return -1;
    ss = json_object_get(pl, "servers");
    if (!json_is_array(ss)) return 0;
    pf->server_places = hps_calloc(json_array_size(ss) + 1, sizeof *pf->server_places);
    json_array_foreach(ss, i, v) {
        plan_file_place *p = &pf->server_places[i];
        long long rank = 0;
        const char *node = "";
        snprintf(ctx, sizeof ctx, "%s: placement.servers[%zu]", pf->name, i);
        if (!json_is_object(v)) return hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
        if (hps_json_int(v, "rank", HPS_REQUIRED, 0, PLAN_MAX_WORKERS + PLAN_MAX_SERVERS, &rank, ctx, err) ||
            hps_json_str(v, "node", HPS_REQUIRED, &node, ctx, err) ||
            copy_str(p->node, sizeof p->node, node, "node", ctx, err))
            return -1;
        p->rank = (int)rank;
        pf->n_server_places++;
    }
    return 0;
}

/* search: what hps-plan show prints of it once the plan re-evaluates to
 * its prediction (plan_file_rechecked); and the prediction of the plan's
 * objective, read after the head (it names the objective) */
static int read_search(json_t *root, plan_file *pf, hps_error *err)
{
    json_t *s = json_object_get(root, "search"), *pred = json_object_get(root, "predicted");
    static const char *const field[] = {"cost", "time_s", "energy_j", "edp", "cost_per_hour"}; /* plan_objective */
    char ctx[600];
    const char *algo = NULL;
    long long seed = 0, episodes = 0;
    pf->optimum = pf->predicted_objective = -1;
    for (int i = 0; i < 5 && json_is_object(pred); i++)
        if (strcmp(pf->objective, plan_objective_names[i]) == 0) {
            snprintf(ctx, sizeof ctx, "%s: predicted", pf->name);
            if (hps_json_num(pred, field[i], HPS_OPTIONAL, 0, 1e300, &pf->predicted_objective, ctx, err)) return -1;
        }
    if (!s) return 0;
    snprintf(ctx, sizeof ctx, "%s: search", pf->name);
    if (!json_is_object(s)) return hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
    if (hps_json_str(s, "algorithm", HPS_OPTIONAL, &algo, ctx, err) ||
        (algo && copy_str(pf->algorithm, sizeof pf->algorithm, algo, "algorithm", ctx, err)) ||
        hps_json_int(s, "seed", HPS_OPTIONAL, INT64_MIN, INT64_MAX, &seed, ctx, err) ||
        hps_json_int(s, "episodes", HPS_OPTIONAL, 0, INT64_MAX, &episodes, ctx, err) ||
        hps_json_num(s, "optimum", HPS_OPTIONAL, 0, 1e300, &pf->optimum, ctx, err))
        return -1;
    pf->seed = (unsigned long long)seed;
    pf->episodes = (long)episodes;
    pf->optimal = json_is_true(json_object_get(s, "optimal"));
    pf->timed_out = json_is_true(json_object_get(s, "timed_out"));
    return 0;
}

int plan_file_rechecked(const plan_file *pf, const plan_eval *e)
{
    double v = pf->predicted_objective;
    return e->feasible && v >= 0 && fabs(e->objective - v) <= PLAN_FILE_TOLERANCE * v;
}

int plan_file_load(const char *path, plan_file *pf, hps_error *err)
{
    memset(pf, 0, sizeof *pf);
    pf->path = hps_strdup(path);
    pf->name = hps_strdup(hps_path_name(path));
    char *text;
    size_t len;
    json_t *root = NULL;
    int rc = hps_json_read(path, &text, &len, err);
    if (rc == 0) {
        hps_sha256_hex(text, len, pf->digest);
        rc = hps_json_loadb(pf->name, text, len, &root, err);
        free(text);
    }
    if (rc == 0)
        rc = hps_json_format(root, "hps-plan", PLAN_VERSION, HPS_REQUIRED, NULL, pf->name, err) ||
             read_inputs(root, pf, err) || read_tables(root, pf, err) || read_head(root, pf, err) || read_assignment(root, pf, err) ||
             read_stages(root, pf, err) || read_workers(root, pf, err) || read_servers(root, pf, err) ||
             read_placement(root, pf, err) || read_search(root, pf, err);
    if (rc == 0) pf->root = json_incref(root);
    json_decref(root);
    if (rc) plan_file_free(pf);
    return rc ? -1 : 0;
}

void plan_file_free(plan_file *pf)
{
    free(pf->path);
    free(pf->name);
    free(pf->model_path);
    free(pf->cluster_path);
    free(pf->data_stats_path);
    for (int i = 0; i < pf->n_profiles; i++) free(pf->profile_paths[i]);
    free(pf->profile_paths);
    free(pf->stdin_profile_text);
    free(pf->assign);
    free(pf->workers);
    free(pf->server_ranks);
    free(pf->server_places);
    json_decref(pf->root);
    memset(pf, 0, sizeof *pf);
}

int hps_plan_read(const char *path, double **shares, int *n_workers, int *servers,
                  char digest[72], hps_error *err)
{
    plan_file pf;
    if (plan_file_load(path, &pf, err)) return -1;
    int n = pf.n_workers, rc = 0;
    double sum = 0, *by_rank = NULL;
    if (n == 0 || n > PLAN_MAX_SHARDS) {
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: workers: expected a non-empty array of at most %d", pf.name,
                      PLAN_MAX_SHARDS);
        goto done;
    }
    by_rank = hps_malloc((size_t)n * sizeof *by_rank);
    for (int i = 0; i < n; i++) by_rank[i] = -1;
    for (int i = 0; i < n && rc == 0; i++) {
        const plan_file_worker *w = &pf.workers[i];
        if (w->share < 0) rc = hps_fail(err, HPS_EXIT_USAGE, "%s: workers[%d]: missing field 'share'", pf.name, i);
        else if (w->rank >= n || by_rank[w->rank] >= 0)
            rc = hps_fail(err, HPS_EXIT_USAGE, "%s: workers: rank %d missing or repeated", pf.name, w->rank);
        else by_rank[w->rank] = w->share, sum += w->share;
    }
    if (rc == 0 && fabs(sum - 1) > 1e-6)
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: workers: shares sum to %.9g, expected 1", pf.name, sum);
    if (rc == 0) {
        memcpy(digest, pf.digest, 72);
        *servers = pf.n_servers;
        *shares = by_rank;
        *n_workers = n;
        by_rank = NULL;
    }
done:
    free(by_rank);
    plan_file_free(&pf);
    return rc;
}
