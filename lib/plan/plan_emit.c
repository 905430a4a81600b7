/* The plan as JSON (hps-plan(5)) and as a table for people; and --explain.
 * The pictures are in plan_draw.c; plan_read.c reads a plan back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_json.h"
#include "plan/hps_plan.h"

#define ROUTING_EXPR "server = hps_mix64(key) % count"

static json_t *str_array(int n, const char *const *s)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_string(s[i]));
    return a;
}

/* Used and capacity in bytes, and the share (null when the capacity is not given). */
static json_t *memory_json(double used, double capacity)
{
    return json_pack("{s:I, s:o, s:o}", "used_bytes", (json_int_t)llround(used), "capacity_bytes",
                     capacity > 0 ? json_integer((json_int_t)llround(capacity)) : json_null(), "percent",
                     capacity > 0 ? hps_json_real(100 * used / capacity) : json_null());
}

/* Tables and accumulators the fullest server of the servers' type holds
 * (with the headroom): each stage's tables spread over its own servers by
 * the routing rule, as hps-train routes them. */
static double server_used(const plan_eval *e)
{
    double most = 0;
    for (int s = 0; s < e->n_stages; s++) {
        const plan_stage *st = &e->stages[s];
        if (!st->coloc && st->servers > 0)
            most = fmax(most, st->law.server_table_bytes * PLAN_SERVER_HEADROOM / st->servers);
    }
    return most;
}

/* What one server beside a unit of stage st holds of the unit's host. */
static double beside_used(const plan_stage *st)
{
    return st->law.server_table_bytes * PLAN_SERVER_HEADROOM / st->units;
}

/* Where this hps-train keeps a stage's rows: every value the planner
 * chooses (hps-train(1) ROWS); one place to say it, should that change. */
static const char *executed_as(const plan_stage *st)
{
    return plan_rows_names[st->law.rows];
}

/* Where a stage's rows live, for people: hbm, a cache of C rows and its
 * hit rate, the servers it needs, or - (no rows); and what this hps-train
 * runs instead when that differs. */
static const char *rows_cell(const plan_stage *st, char *buf, size_t n)
{
    char c[32];
    int k = 0;
    switch (st->law.rows) {
    case PLAN_ROWS_NONE: return snprintf(buf, n, "-"), buf;
    case PLAN_ROWS_HBM: k = snprintf(buf, n, st->shards ? "hbm %d shards" : "hbm", st->units); break;
    case PLAN_ROWS_CACHE:
        k = snprintf(buf, n, "cache %s rows (hit %.2f)", hps_format_number(st->law.cache_rows, 4, c, sizeof c),
                     st->law.hit_rate);
        break;
    default: k = st->coloc ? snprintf(buf, n, "servers %d beside", st->units) : snprintf(buf, n, "servers %d", st->servers);
    }
    if (k >= 0 && (size_t)k < n && strcmp(executed_as(st), plan_rows_names[st->law.rows]) != 0)
        snprintf(buf + k, n - (size_t)k, " [runs as %s]", executed_as(st));
    return buf;
}

/* Where a stage's time per batch on its units goes (plan_law_ms, term by
 * term): its layers with the engine's per-step work and the read; the
 * exchange with the servers; its cuts; the ring allreduce. */
typedef struct {
    double compute_ms, servers_ms, cuts_ms, allreduce_ms;
} time_split;

static time_split split_of(const plan_stage *st)
{
    const plan_law *law = &st->law;
    int k = st->units;
    time_split x;
    x.servers_ms = plan_law_servers_ms(law, k);
    x.cuts_ms = law->boundary_ms / k;
    x.allreduce_ms = law->sync_ms * (k - 1) / k + law->hop_ms * (k - 1);
    x.compute_ms = plan_law_ms(law, k) - x.servers_ms - x.cuts_ms - x.allreduce_ms;
    return x;
}

static json_t *stage_json(const plan_problem *p, const plan_eval *e, int s, const hps_cluster *c)
{
    const plan_stage *st = &e->stages[s];
    const int t = hps_cluster_find(c, p->type_names[st->type]);
    json_t *o = json_object(), *names = json_array();
    for (int l = st->first; l < st->end; l++) json_array_append_new(names, json_string(p->layer_names[l]));
    json_object_set_new(o, "index", json_integer(s));
    json_object_set_new(o, "type", json_string(p->type_names[st->type]));
    /* hps-train runs a stage by its kind and device */
    json_object_set_new(o, "kind", json_string(t >= 0 && c->types[t].kind == PLAN_GPU ? "gpu" : "cpu"));
    json_object_set_new(o, "device", t >= 0 ? json_string(c->types[t].device) : json_null());
    json_object_set_new(o, "layers", json_pack("[ii]", st->first, st->end - 1));
    json_object_set_new(o, "layer_names", names);
    json_object_set_new(o, "units", json_integer(st->units));
    json_object_set_new(o, "ms_per_batch", hps_json_real(st->ms));
    json_object_set_new(o, "servers_ms", hps_json_real(plan_law_servers_ms(&st->law, st->units)));
    json_object_set_new(o, "in_process_ms", hps_json_real(plan_law_in_process_ms(&st->law, st->units)));
    json_object_set_new(o, "layers_ms", hps_json_real(plan_law_layers_ms(&st->law, st->units)));
    time_split x = split_of(st);
    json_object_set_new(o, "time_split", json_pack("{s:o, s:o, s:o, s:o}", "compute_ms", hps_json_real(x.compute_ms),
                                                   "servers_ms", hps_json_real(x.servers_ms), "cuts_ms",
                                                   hps_json_real(x.cuts_ms), "allreduce_ms",
                                                   hps_json_real(x.allreduce_ms)));
    json_object_set_new(o, "throughput", hps_json_real(st->throughput));
    /* what hps-train sends across the stage's cuts a batch, both ways */
    json_object_set_new(o, "bytes_in", hps_json_real(st->first ? p->cut_bytes[st->first] : 0));
    json_object_set_new(o, "bytes_out", hps_json_real(st->end < p->n_layers ? p->cut_bytes[st->end] : 0));
    json_object_set_new(o, "link_ms", st->link_ms > 0 ? hps_json_real(st->link_ms) : json_null());
    /* its units' share of the instances (predicted.cost_per_hour bills them whole) */
    json_object_set_new(o, "cost_per_hour", hps_json_real(st->units * p->price[st->type]));
    json_object_set_new(o, "bottleneck", json_boolean(e->bottleneck == s));
    json_object_set_new(o, "memory", memory_json(st->law.mem_bytes, p->mem_bytes[st->type]));
    json_object_set_new(o, "rows", json_string(plan_rows_names[st->law.rows]));
    json_object_set_new(o, "cache_hit_rate",
                        st->law.rows == PLAN_ROWS_CACHE ? hps_json_real(st->law.hit_rate) : json_null());
    json_object_set_new(o, "cache_rows", st->law.rows == PLAN_ROWS_CACHE
                                             ? json_integer((json_int_t)st->law.cache_rows) : json_null());
    /* hbm: each unit every row, or a shard of them (plan_law_shard) */
    json_object_set_new(o, "rows_split", st->law.rows != PLAN_ROWS_HBM ? json_null()
                                         : json_string(st->shards ? "shards" : "replicas"));
    json_object_set_new(o, "servers", json_integer(st->coloc ? st->units : st->servers));
    /* its servers on its own units' hosts, one a unit (none billed) */
    json_object_set_new(o, "servers_beside", json_boolean(st->coloc));
    /* hps-train runs every rows value the planner chooses (hps-train(1)
     * ROWS): where it executes them is where the plan priced them */
    json_object_set_new(o, "executed_as", json_string(executed_as(st)));
    return o;
}

static json_t *servers_json(const plan_problem *p, const plan_eval *e, const plan_layout *l,
                            const hps_cluster *c)
{
    json_t *ranks = json_array(), *where = json_array(), *beside = json_array();
    for (int v = 0; v < l->n_servers; v++) {
        json_array_append_new(ranks, json_integer(l->servers[v].rank));
        json_array_append_new(where, l->servers[v].instance >= 0 ? json_integer(l->servers[v].instance) : json_null());
        json_array_append_new(beside, l->servers[v].worker >= 0 ? json_integer(l->servers[v].worker) : json_null());
    }
    json_t *o = json_pack("{s:i, s:o, s:o, s:f, s:{s:s, s:s, s:s}}", "count", l->n_servers, "ranks", ranks,
                          "bytes_per_s", hps_json_real(l->server_bytes_per_s), "gbps_each", c->server_gbps,
                          "routing", "rule", "mix64-mod", "key", "key", "expr", ROUTING_EXPR);
    json_object_set_new(o, "type", c->server_type >= 0 ? json_string(c->types[c->server_type].name) : json_null());
    json_object_set_new(o, "price_per_hour", hps_json_real(p->server_price));
    json_object_set_new(o, "cost_per_hour", hps_json_real(e->server_cost_per_hour));
    json_object_set_new(o, "memory", memory_json(server_used(e), p->server_mem));
    /* where each lives: the instance of the servers' type (instances), or
     * beside a worker's unit, on its host (beside: that worker's rank) */
    json_object_set_new(o, "instances", where);
    json_object_set_new(o, "beside", beside);
    return o;
}

static json_t *workers_json(const plan_problem *p, const plan_layout *l, const hps_cluster *c)
{
    json_t *a = json_array();
    for (int w = 0; w < l->n_workers; w++) {
        const plan_worker *k = &l->workers[w];
        json_t *o = json_pack("{s:i, s:i, s:s, s:o, s:o}", "rank", k->rank, "stage", k->stage, "type",
                              p->type_names[k->type], "share", hps_json_real(k->share), "batch_share",
                              hps_json_real(k->batch_share));
        json_object_set_new(o, "node", k->node >= 0 ? json_string(c->nodes[k->node].name) : json_null());
        json_object_set_new(o, "slot", k->node >= 0 ? json_integer(k->slot) : json_null());
        json_object_set_new(o, "instance", json_integer(k->instance));
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *placement_json(const plan_layout *l, const hps_cluster *c)
{
    if (l->cross_node_bytes < 0) return json_null();
    json_t *servers = json_array();
    for (int v = 0; v < l->n_servers; v++)
        json_array_append_new(servers, json_pack("{s:i, s:s, s:i}", "rank", l->servers[v].rank, "node",
                                                 c->nodes[l->servers[v].node].name, "slot", l->servers[v].slot));
    return json_pack("{s:o, s:o, s:o}", "servers", servers, "cross_node_bytes_per_step",
                     hps_json_real(l->cross_node_bytes), "round_robin_bytes_per_step",
                     hps_json_real(l->round_robin_bytes));
}

/* The instances a plan rents, per type (hps-plan(5), instances): how many,
 * of how many units, the units its workers (and servers) fill, and what they
 * cost an hour. */
static int filled(const plan_problem *p, const plan_eval *e, int t)
{
    int shared = p->server_type == t && p->units_per_instance[t] > 1;
    return e->units[t] + (shared ? e->servers : 0);
}

static json_t *instances_json(const plan_problem *p, const plan_eval *e)
{
    json_t *o = json_object();
    for (int t = 0; t < p->n_types; t++) {
        int n = filled(p, e, t), k = p->units_per_instance[t];
        if (!n) continue;
        json_object_set_new(o, p->type_names[t],
                            json_pack("{s:i, s:i, s:i, s:o, s:o}", "count", plan_instances(p, t, n),
                                      "units_per_instance", k, "units_used", n, "price_per_hour",
                                      hps_json_real(k * p->price[t]), "cost_per_hour",
                                      hps_json_real(plan_instances(p, t, n) * k * p->price[t])));
    }
    return o;
}

/* Energy is known only when every type in the plan has a power figure. */
static int energy_known(const plan_problem *p, const plan_eval *e)
{
    for (int t = 0; t < p->n_types; t++)
        if (e->units[t] && p->power[t] <= 0) return 0;
    return 1;
}

/* A plan of another assignment can come out a rounding error below the
 * optimum (the exact solver's tolerance is 1e-12): that is no gap, and no
 * "-0.00%". */
static double gap_of(const plan_eval *e, const plan_meta *m)
{
    if (m->exact_objective < 0 || !e->feasible) return NAN;
    double gap = m->exact_objective > 0 ? e->objective / m->exact_objective - 1 : 0;
    return fabs(gap) < 1e-9 ? 0 : gap;
}

static json_t *search_json(const plan_eval *e, const plan_result *r, const plan_meta *m)
{
    json_t *trace = json_array();
    for (int i = 0; i < r->n_trace; i++)
        json_array_append_new(trace, json_pack("[fo]", r->trace[i].episode, hps_json_real(r->trace[i].objective)));
    json_t *o = json_pack("{s:s, s:I, s:I, s:o, s:o, s:b, s:b}", "algorithm", m->algorithm, "seed",
                          (json_int_t)m->opts.seed, "episodes", (json_int_t)r->episodes, "seconds",
                          hps_json_real(r->seconds), "trace", trace, "optimal", r->optimal && e->feasible, "timed_out",
                          r->timed_out);
    json_object_set_new(o, "polished", json_boolean(strcmp(m->algorithm, "rl") == 0 && m->opts.polish));
    json_object_set_new(o, "found_by", r->found_by ? json_string(r->found_by) : json_null());
    json_object_set_new(o, "optimum", m->exact_objective >= 0 ? hps_json_real(m->exact_objective) : json_null());
    json_object_set_new(o, "gap", hps_json_real(gap_of(e, m)));
    return o;
}

json_t *plan_to_json(const plan_problem *p, const plan_eval *e, const plan_layout *l,
                     const plan_result *r, const plan_meta *m, const hps_cluster *c)
{
    json_t *root = json_object(), *stages = json_array(), *assign = json_array(), *units = json_object();
    json_object_set_new(root, "format", json_string("hps-plan"));
    json_object_set_new(root, "version", json_integer(PLAN_VERSION));
    json_object_set_new(root, "tool", json_string("hps-plan " HPS_VERSION));
    json_t *inputs = json_pack("{s:s, s:s, s:o}", "model", m->model_path, "cluster", m->cluster_path, "profiles",
                               str_array(m->n_profiles, m->profile_names));
    json_object_set_new(inputs, "data_stats", m->data_stats_path ? json_string(m->data_stats_path) : json_null());
    json_t *piped = m->stdin_profile ? json_loads(m->stdin_profile, 0, NULL) : NULL; /* read and checked before */
    if (piped) json_object_set_new(inputs, "stdin_profile", piped);
    json_object_set_new(root, "inputs", inputs);
    json_object_set_new(root, "rows", json_string(p->rows_on_servers ? "servers" : "auto"));
    json_object_set_new(root, "tables", json_pack("{s:s, s:s, s:i}", "row_dtype", hps_row_dtype_names[p->row_dtype],
                                                  "sparse_optimizer", plan_sparse_optimizer_names[p->rowwise],
                                                  "admit_after", p->admit_after > 1 ? p->admit_after : 1));
    json_object_set_new(root, "digests", json_pack("{s:s, s:s, s:o}", "model", m->model_digest, "cluster",
                                                   m->cluster_digest, "profiles", str_array(m->n_profiles, m->profile_digests)));
    json_object_set_new(root, "model", json_pack("{s:s, s:i, s:i}", "name", m->model_name, "batch",
                                                  (int)p->batch, "layers", p->n_layers));
    json_object_set_new(root, "objective", json_string(plan_objective_names[p->objective]));
    json_object_set_new(root, "min_throughput", json_real(p->min_throughput));
    json_object_set_new(root, "samples", json_real(p->samples));
    json_object_set_new(root, "epochs", json_integer(p->epochs));
    json_object_set_new(root, "feasible", json_boolean(e->feasible));
    for (int l = 0; l < p->n_layers; l++)
        json_array_append_new(assign, json_string(p->type_names[r->assign[l]]));
    json_object_set_new(root, "assignment", assign);
    for (int s = 0; s < e->n_stages; s++) json_array_append_new(stages, stage_json(p, e, s, c));
    json_object_set_new(root, "stages", stages);
    json_object_set_new(root, "bottleneck", json_pack("{s:i, s:s}", "stage", e->bottleneck, "what",
                                                      e->bottleneck_is_link ? "link" : "stage"));
    /* hps-train runs the step with this many micro-batches (hps-plan(1), COST MODEL) */
    json_object_set_new(root, "pipeline", json_pack("{s:i, s:o}", "micro_batches", e->micro_batches, "bubble",
                                                    hps_json_real(e->bubble)));
    for (int t = 0; t < p->n_types; t++)
        if (e->units[t]) json_object_set_new(units, p->type_names[t], json_integer(e->units[t]));
    json_object_set_new(root, "units", units);
    json_object_set_new(root, "instances", instances_json(p, e));
    json_object_set_new(root, "servers", servers_json(p, e, l, c));
    json_object_set_new(root, "workers", workers_json(p, l, c));
    json_object_set_new(root, "placement", placement_json(l, c));
    /* what the ranks send a step, as hps-train's dist record counts it */
    json_object_set_new(root, "network", json_pack("{s:o}", "bytes_per_step", hps_json_real(l->bytes_per_step)));
    int ek = energy_known(p, e);
    json_object_set_new(root, "predicted",
                        json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "throughput", hps_json_real(e->throughput),
                                  "time_s", hps_json_real(e->time_s), "cost", hps_json_real(e->cost),
                                  "cost_per_hour", hps_json_real(e->cost_per_hour), "energy_j",
                                  ek ? hps_json_real(e->energy_j) : json_null(), "edp",
                                  ek ? hps_json_real(e->edp) : json_null(), "in_process_throughput",
                                  hps_json_real(plan_in_process_throughput(p, e))));
    json_object_set_new(root, "search", search_json(e, r, m));
    return root;
}

/* ---- for people ----------------------------------------------------------- */

static void layer_span(char *buf, size_t n, const plan_problem *p, const plan_stage *st)
{
    if (st->end - st->first == 1) snprintf(buf, n, "%s", p->layer_names[st->first]);
    else snprintf(buf, n, "%s..%s", p->layer_names[st->first], p->layer_names[st->end - 1]);
}

static const char *human_bytes(double b, char *buf, size_t n)
{
    const char *unit[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (b >= 1000 && u < 4) b /= 1000, u++;
    snprintf(buf, n, "%.1f %s", b, unit[u]);
    return buf;
}

/* "3.2/16.0 GiB 20%", or the use alone when the capacity is not given. */
static void memory_cell(char *buf, size_t n, double used, double capacity)
{
    if (capacity > 0)
        snprintf(buf, n, "%.1f/%.1f GiB %.0f%%", used / PLAN_GIB, capacity / PLAN_GIB, 100 * used / capacity);
    else snprintf(buf, n, "%.1f GiB", used / PLAN_GIB);
}

/* Each stage's time per batch, term by term (split_of). */
static void print_time_split(FILE *f, const plan_eval *e)
{
    for (int s = 0; s < e->n_stages; s++) {
        time_split x = split_of(&e->stages[s]);
        fprintf(f, "time   stage %d: %.3f ms = compute %.3f + servers %.3f + cuts %.3f + allreduce %.3f\n", s,
                e->stages[s].ms, x.compute_ms, x.servers_ms, x.cuts_ms, x.allreduce_ms);
    }
}

/* What the plan is billed: the instances of each type (stages of a type
 * share them), the servers on theirs; the lines add up to the total. */
static void print_bill(FILE *f, const plan_problem *p, const plan_eval *e)
{
    int shared = p->server_type >= 0 && p->units_per_instance[p->server_type] > 1;
    for (int t = 0; t < p->n_types; t++) {
        int n = filled(p, e, t), k = p->units_per_instance[t], i = plan_instances(p, t, n);
        if (!n) continue;
        fprintf(f, "rent   %s: %d instance%s x $%.3f/hour", p->type_names[t], i, i == 1 ? "" : "s", k * p->price[t]);
        if (k > 1) fprintf(f, " (%d units each, %d used)", k, n);
        fprintf(f, " = $%.3f/hour\n", i * k * p->price[t]);
    }
    if (e->servers && !shared)
        fprintf(f, "rent   %d server%s%s%s x $%.3f/hour = $%.3f/hour\n", e->servers, e->servers == 1 ? "" : "s",
                p->server_type >= 0 ? " on " : "", p->server_type >= 0 ? p->type_names[p->server_type] : "",
                p->server_price, e->servers * p->server_price);
    for (int s = 0; s < e->n_stages; s++) { /* servers beside a stage's units: no instance of their own */
        const plan_stage *st = &e->stages[s];
        if (st->coloc)
            fprintf(f, "rent   %d server%s beside stage %d, on its %s hosts: 1 of %d cores each (stage %+.3f ms) "
                       "= $0.000/hour\n", st->units, st->units == 1 ? "" : "s", s, p->type_names[st->type],
                    p->cores[st->type], plan_law_beside_ms(&st->law, st->units));
    }
}

/* The routing rule: over all the servers, or, where several stages have
 * servers, each stage's tables over its own (hps-train routes them so). */
static void print_routing(FILE *f, const plan_eval *e, const plan_layout *l)
{
    int with = 0;
    for (int s = 0; s < e->n_stages; s++) with += e->stages[s].servers > 0 || e->stages[s].coloc;
    if (with < 2) {
        fprintf(f, "servers %d (server = hps_mix64(key) %% %d)", l->n_servers, l->n_servers);
        return;
    }
    fprintf(f, "servers %d, each stage's tables on its own (", l->n_servers);
    for (int s = 0, k = 0; s < e->n_stages; s++) {
        const plan_stage *st = &e->stages[s];
        int n = st->coloc ? st->units : st->servers;
        if (n) fprintf(f, "%sstage %d: hps_mix64(key) %% %d%s", k++ ? ", " : "", s, n, st->coloc ? " beside" : "");
    }
    fputc(')', f);
}

void plan_print_table(FILE *f, const plan_problem *p, const plan_eval *e, const plan_layout *l,
                      const plan_result *r, const plan_meta *m)
{
    char limit[32], samples[32];
    fprintf(f, "plan for %s: %s at >= %s samples/s, %s samples x %d epoch%s%s\n", m->model_name,
            plan_objective_names[p->objective], hps_format_number(p->min_throughput, 6, limit, sizeof limit),
            hps_format_number(p->samples, 6, samples, sizeof samples), p->epochs,
            p->epochs == 1 ? "" : "s", e->feasible ? "" : " (NOT FEASIBLE)");
    fprintf(f, "%-5s  %-12s  %-22s  %5s  %10s  %12s  %9s  %-22s  %s\n", "stage", "type", "layers", "units",
            "ms/batch", "samples/s", "$/hour", "memory/unit", "rows");
    for (int s = 0; s < e->n_stages; s++) {
        const plan_stage *st = &e->stages[s];
        char span[128], mem[64], rows[96];
        layer_span(span, sizeof span, p, st);
        memory_cell(mem, sizeof mem, st->law.mem_bytes, p->mem_bytes[st->type]);
        rows_cell(st, rows, sizeof rows);
        if (st->link_ms > 0)
            fprintf(f, "%-5s  %-12s  %-22s  %5s  %10.3f  %12.1f  %9s%s\n", "link", "", "", "", st->link_ms,
                    st->link_throughput, "", e->bottleneck == s && e->bottleneck_is_link ? "  <- bottleneck" : "");
        int neck = e->bottleneck == s && !e->bottleneck_is_link;
        fprintf(f, "%-5d  %-12s  %-22s  %5d  %10.3f  %12.1f  %9.3f  %-22s  %-*s%s\n", s, p->type_names[st->type],
                span, st->units, st->ms, st->throughput, st->units * p->price[st->type], mem, neck ? 12 : 0,
                rows, neck ? "  <- bottleneck" : "");
    }
    if (e->servers) {
        char mem[64];
        memory_cell(mem, sizeof mem, server_used(e), p->server_mem);
        fprintf(f, "%-5s  %-12s  %-22s  %5d  %10s  %12s  %9.3f  %s\n", "ps",
                p->server_type >= 0 ? p->type_names[p->server_type] : "", "embedding rows",
                e->servers, "", "", e->server_cost_per_hour, mem);
    }
    for (int s = 0; s < e->n_stages; s++) {
        const plan_stage *st = &e->stages[s];
        char mem[64], where[32];
        if (!st->coloc) continue;
        memory_cell(mem, sizeof mem, beside_used(st), p->host_mem[st->type]);
        snprintf(where, sizeof where, "beside stage %d", s);
        fprintf(f, "%-5s  %-12s  %-22s  %5d  %10s  %12s  %9.3f  %s host\n", "ps", p->type_names[st->type], where,
                st->units, "", "", 0.0, mem);
    }
    print_time_split(f, e);
    print_bill(f, p, e);
    int total = 0;
    for (int t = 0; t < p->n_types; t++) total += e->units[t];
    fprintf(f, "total  %d unit%s", total, total == 1 ? "" : "s");
    if (e->servers) fprintf(f, " + %d server%s", e->servers, e->servers == 1 ? "" : "s");
    if (e->coloc_servers)
        fprintf(f, " + %d server%s beside them", e->coloc_servers, e->coloc_servers == 1 ? "" : "s");
    fprintf(f, ", %.1f samples/s, %.1f s, $%.4f ($%.3f/hour)", e->throughput, e->time_s, e->cost, e->cost_per_hour);
    if (energy_known(p, e)) fprintf(f, ", %.4g kWh", e->energy_j / 3.6e6);
    fputc('\n', f);
    if (l->n_servers) {
        print_routing(f, e, l);
        fprintf(f, ", %.1f MB/s of embedding traffic, $%.3f/hour\n", l->server_bytes_per_s / 1e6,
                e->server_cost_per_hour);
    }
    char b1[32], b2[32];
    if (l->cross_node_bytes >= 0)
        fprintf(f, "placement %s/step across nodes (round robin: %s/step)\n",
                human_bytes(l->cross_node_bytes, b1, sizeof b1), human_bytes(l->round_robin_bytes, b2, sizeof b2));
    fprintf(f, "search %s, seed %llu, %ld episode%s", m->algorithm, (unsigned long long)m->opts.seed, r->episodes,
            r->episodes == 1 ? "" : "s");
    if (r->found_by) fprintf(f, ", found by the %s", r->found_by);
    double gap = gap_of(e, m);
    if (r->optimal && e->feasible) fprintf(f, ", optimal\n");
    else if (isfinite(gap) && 100 * gap < 0.005) /* a rounding of the optimum, not a plan below it */
        fprintf(f, ", at the optimum (within 0.01%%)\n");
    else if (isfinite(gap)) fprintf(f, ", %.2f%% above the optimum\n", 100 * gap);
    else fprintf(f, ", optimum not known\n");
}

/* --explain's cells: per layer and type, one unit's ms per batch and the
 * plan's objective with the layer moved there (NAN: no plan meets the limit). */
static double *explain_cells(const plan_problem *p, const int *assign, plan_eval *e)
{
    int L = p->n_layers, T = p->n_types;
    int *a = hps_malloc((size_t)L * sizeof *a);
    double *v = hps_malloc((size_t)L * T * sizeof *v);
    for (int l = 0; l < L; l++)
        for (int t = 0; t < T; t++) {
            memcpy(a, assign, (size_t)L * sizeof *a);
            a[l] = t;
            plan_evaluate(p, a, e);
            v[l * T + t] = e->feasible ? e->objective : NAN;
        }
    plan_evaluate(p, assign, e);
    free(a);
    return v;
}

void plan_explain(FILE *f, const plan_problem *p, const int *assign)
{
    int L = p->n_layers, T = p->n_types;
    plan_eval e;
    plan_eval_init(&e, p);
    double *v = explain_cells(p, assign, &e);
    const char *what = plan_objective_names[p->objective];
    char objective[32];
    fprintf(f, "%s of the plan: %s%s; each cell: one unit's ms per batch, then the plan's %s with the\n"
               "layer moved there (* the layer's type now, - no plan meets the limit)\n",
            what, hps_format_number(e.objective, 6, objective, sizeof objective), e.feasible ? "" : " (not feasible)", what);
    fprintf(f, "%-14s", "layer");
    for (int t = 0; t < T; t++) fprintf(f, "  %23s", p->type_names[t]);
    fputc('\n', f);
    for (int l = 0; l < L; l++) {
        fprintf(f, "%-14s", p->layer_names[l]);
        for (int t = 0; t < T; t++) {
            char cell[64];
            char value[32] = "-";
            if (isfinite(v[l * T + t])) hps_format_number(v[l * T + t], 4, value, sizeof value);
            snprintf(cell, sizeof cell, "%8.3f ms %10s%c", p->t1_ms[l * T + t], value, t == assign[l] ? '*' : ' ');
            fprintf(f, "  %23s", cell);
        }
        fputc('\n', f);
    }
    for (int s = 0; s < e.n_stages; s++) { /* where each stage's rows live */
        char span[128], rows[96];
        layer_span(span, sizeof span, p, &e.stages[s]);
        fprintf(f, "stage %d (%s on %s): rows %s\n", s, span, p->type_names[e.stages[s].type],
                rows_cell(&e.stages[s], rows, sizeof rows));
    }
    print_time_split(f, &e);
    print_bill(f, p, &e);
    fprintf(f, "total  $%.3f/hour\n", e.cost_per_hour);
    plan_eval_free(&e);
    free(v);
}

json_t *plan_explain_json(const plan_problem *p, const int *assign)
{
    int L = p->n_layers, T = p->n_types;
    plan_eval e;
    plan_eval_init(&e, p);
    double *v = explain_cells(p, assign, &e);
    json_t *layers = json_array();
    for (int l = 0; l < L; l++) {
        json_t *types = json_object();
        for (int t = 0; t < T; t++)
            json_object_set_new(types, p->type_names[t],
                                json_pack("{s:o, s:o}", "ms_per_batch", hps_json_real(p->t1_ms[l * T + t]),
                                          "objective", hps_json_real(v[l * T + t])));
        json_array_append_new(layers, json_pack("{s:s, s:s, s:o}", "name", p->layer_names[l], "type",
                                                p->type_names[assign[l]], "on", types));
    }
    json_t *root = json_pack("{s:s, s:i, s:s, s:o, s:b, s:o}", "format", "hps-explain", "version", 1, "objective",
                             plan_objective_names[p->objective], "value", hps_json_real(e.objective), "feasible",
                             e.feasible, "layers", layers);
    plan_eval_free(&e);
    free(v);
    return root;
}
