/* The plan as JSON (hps-plan(5)) and as a table for people; reading a plan
 * back; and --explain.  The pictures are in plan_draw.c. */
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
    json_object_set_new(o, "throughput", hps_json_real(st->throughput));
    json_object_set_new(o, "bytes_in", hps_json_real(st->first ? p->bytes_out[st->first - 1] : 0));
    json_object_set_new(o, "bytes_out", hps_json_real(st->end < p->n_layers ? p->bytes_out[st->end - 1] : 0));
    json_object_set_new(o, "link_ms", st->link_ms > 0 ? hps_json_real(st->link_ms) : json_null());
    json_object_set_new(o, "cost_per_hour", hps_json_real(st->units * p->price[st->type]));
    json_object_set_new(o, "bottleneck", json_boolean(e->bottleneck == s));
    return o;
}

static json_t *servers_json(const plan_layout *l, const hps_cluster *c)
{
    json_t *ranks = json_array();
    for (int v = 0; v < l->n_servers; v++) json_array_append_new(ranks, json_integer(l->servers[v].rank));
    return json_pack("{s:i, s:o, s:o, s:f, s:{s:s, s:s, s:s}}", "count", l->n_servers, "ranks", ranks,
                     "bytes_per_s", hps_json_real(l->server_bytes_per_s), "gbps_each", c->server_gbps,
                     "routing", "rule", "mix64-mod", "key", "key", "expr", ROUTING_EXPR);
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

/* Energy is known only when every type in the plan has a power figure. */
static int energy_known(const plan_problem *p, const plan_eval *e)
{
    for (int t = 0; t < p->n_types; t++)
        if (e->units[t] && p->power[t] <= 0) return 0;
    return 1;
}

static double gap_of(const plan_eval *e, const plan_meta *m)
{
    if (m->exact_objective < 0 || !e->feasible) return NAN;
    return m->exact_objective > 0 ? e->objective / m->exact_objective - 1 : 0;
}

static json_t *search_json(const plan_eval *e, const plan_result *r, const plan_meta *m)
{
    json_t *trace = json_array();
    for (int i = 0; i < r->n_trace; i++)
        json_array_append_new(trace, json_pack("[fo]", r->trace[i].episode, hps_json_real(r->trace[i].objective)));
    json_t *o = json_pack("{s:s, s:I, s:I, s:o, s:o, s:b, s:b}", "algorithm", m->algorithm, "seed",
                          (json_int_t)m->opts.seed, "episodes", (json_int_t)r->episodes, "seconds",
                          hps_json_real(r->seconds), "trace", trace, "optimal", r->optimal, "timed_out",
                          r->timed_out);
    json_object_set_new(o, "polished", json_boolean(strcmp(m->algorithm, "rl") == 0 && m->opts.polish));
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
    json_object_set_new(root, "inputs", json_pack("{s:s, s:s, s:o}", "model", m->model_path, "cluster",
                                                  m->cluster_path, "profiles", str_array(m->n_profiles, m->profile_names)));
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
    for (int t = 0; t < p->n_types; t++)
        if (e->units[t]) json_object_set_new(units, p->type_names[t], json_integer(e->units[t]));
    json_object_set_new(root, "units", units);
    json_object_set_new(root, "servers", servers_json(l, c));
    json_object_set_new(root, "workers", workers_json(p, l, c));
    json_object_set_new(root, "placement", placement_json(l, c));
    int ek = energy_known(p, e);
    json_object_set_new(root, "predicted",
                        json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "throughput", hps_json_real(e->throughput),
                                  "time_s", hps_json_real(e->time_s), "cost", hps_json_real(e->cost),
                                  "cost_per_hour", hps_json_real(e->cost_per_hour), "energy_j",
                                  ek ? hps_json_real(e->energy_j) : json_null(), "edp",
                                  ek ? hps_json_real(e->edp) : json_null()));
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

void plan_print_table(FILE *f, const plan_problem *p, const plan_eval *e, const plan_layout *l,
                      const plan_result *r, const plan_meta *m)
{
    fprintf(f, "plan for %s: %s at >= %.6g samples/s, %.6g samples x %d epoch%s%s\n", m->model_name,
            plan_objective_names[p->objective], p->min_throughput, p->samples, p->epochs,
            p->epochs == 1 ? "" : "s", e->feasible ? "" : " (NOT FEASIBLE)");
    fprintf(f, "%-5s  %-12s  %-22s  %5s  %10s  %12s  %9s\n", "stage", "type", "layers", "units",
            "ms/batch", "samples/s", "$/hour");
    for (int s = 0; s < e->n_stages; s++) {
        const plan_stage *st = &e->stages[s];
        char span[128];
        layer_span(span, sizeof span, p, st);
        if (st->link_ms > 0)
            fprintf(f, "%-5s  %-12s  %-22s  %5s  %10.3f  %12.1f  %9s%s\n", "link", "", "", "", st->link_ms,
                    st->link_throughput, "", e->bottleneck == s && e->bottleneck_is_link ? "  <- bottleneck" : "");
        fprintf(f, "%-5d  %-12s  %-22s  %5d  %10.3f  %12.1f  %9.3f%s\n", s, p->type_names[st->type], span,
                st->units, st->ms, st->throughput, st->units * p->price[st->type],
                e->bottleneck == s && !e->bottleneck_is_link ? "  <- bottleneck" : "");
    }
    int total = 0;
    for (int t = 0; t < p->n_types; t++) total += e->units[t];
    fprintf(f, "total  %d units, %.1f samples/s, %.1f s, $%.4f ($%.3f/hour)", total, e->throughput,
            e->time_s, e->cost, e->cost_per_hour);
    if (energy_known(p, e)) fprintf(f, ", %.4g kWh", e->energy_j / 3.6e6);
    fputc('\n', f);
    if (l->n_servers)
        fprintf(f, "servers %d (server = hps_mix64(key) %% %d), %.1f MB/s of embedding traffic\n",
                l->n_servers, l->n_servers, l->server_bytes_per_s / 1e6);
    char b1[32], b2[32];
    if (l->cross_node_bytes >= 0)
        fprintf(f, "placement %s/step across nodes (round robin: %s/step)\n",
                human_bytes(l->cross_node_bytes, b1, sizeof b1), human_bytes(l->round_robin_bytes, b2, sizeof b2));
    fprintf(f, "search %s, seed %llu, %ld episodes", m->algorithm, (unsigned long long)m->opts.seed, r->episodes);
    double gap = gap_of(e, m);
    if (r->optimal) fprintf(f, ", optimal\n");
    else if (isfinite(gap)) fprintf(f, ", %.2f%% above the optimum\n", 100 * gap);
    else fprintf(f, ", optimum not known\n");
}

/* ---- reading a plan back -------------------------------------------------- */

int plan_file_parse(json_t *root, const char *name, plan_file *pf, hps_error *err)
{
    memset(pf, 0, sizeof *pf);
    const char *format;
    long long version, epochs, layers;
    json_t *dg = json_object_get(root, "digests"), *model = json_object_get(root, "model");
    json_t *assign = json_object_get(root, "assignment");
    char ctx[300];
    if (hps_json_str(root, "format", HPS_REQUIRED, &format, name, err)) return -1;
    if (strcmp(format, "hps-plan") != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: format '%s' is not hps-plan", name, format);
    if (hps_json_int(root, "version", HPS_REQUIRED, 0, 1000000, &version, name, err)) return -1;
    if (version != PLAN_VERSION)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: plan version %lld is not known (this hps-plan reads %d)",
                        name, version, PLAN_VERSION);
    if (!json_is_object(dg) || !json_is_object(model))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: missing field 'digests' or 'model'", name);
    snprintf(ctx, sizeof ctx, "%s: digests", name);
    if (hps_json_str(dg, "model", HPS_REQUIRED, &pf->model_digest, ctx, err) ||
        hps_json_str(dg, "cluster", HPS_REQUIRED, &pf->cluster_digest, ctx, err))
        return -1;
    snprintf(ctx, sizeof ctx, "%s: model", name);
    if (hps_json_int(model, "layers", HPS_REQUIRED, 1, HPS_MAX_LAYERS, &layers, ctx, err) ||
        hps_json_str(root, "objective", HPS_REQUIRED, &pf->objective, name, err) ||
        hps_json_num(root, "min_throughput", HPS_REQUIRED, 1e-9, 1e15, &pf->min_throughput, name, err) ||
        hps_json_num(root, "samples", HPS_REQUIRED, 1, 1e18, &pf->samples, name, err) ||
        hps_json_int(root, "epochs", HPS_REQUIRED, 1, 1000000, &epochs, name, err))
        return -1;
    pf->epochs = (int)epochs;
    pf->n_layers = (int)layers;
    if (!json_is_array(assign) || (int)json_array_size(assign) != pf->n_layers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: assignment must name a type for each of %d layers", name,
                        pf->n_layers);
    pf->assign_names = hps_calloc((size_t)pf->n_layers, sizeof *pf->assign_names);
    for (int l = 0; l < pf->n_layers; l++) {
        json_t *v = json_array_get(assign, (size_t)l);
        if (!json_is_string(v)) {
            plan_file_free(pf);
            return hps_fail(err, HPS_EXIT_USAGE, "%s: assignment %d must be a type name", name, l);
        }
        pf->assign_names[l] = json_string_value(v);
    }
    pf->root = json_incref(root);
    return 0;
}

void plan_file_free(plan_file *pf)
{
    free(pf->assign_names);
    json_decref(pf->root);
    memset(pf, 0, sizeof *pf);
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
    fprintf(f, "%s of the plan: %.6g%s; each cell: one unit's ms per batch, then the plan's %s with the\n"
               "layer moved there (* the layer's type now, - no plan meets the limit)\n",
            what, e.objective, e.feasible ? "" : " (not feasible)", what);
    fprintf(f, "%-14s", "layer");
    for (int t = 0; t < T; t++) fprintf(f, "  %23s", p->type_names[t]);
    fputc('\n', f);
    for (int l = 0; l < L; l++) {
        fprintf(f, "%-14s", p->layer_names[l]);
        for (int t = 0; t < T; t++) {
            char cell[64];
            char value[32] = "-";
            if (isfinite(v[l * T + t])) snprintf(value, sizeof value, "%.4g", v[l * T + t]);
            snprintf(cell, sizeof cell, "%8.3f ms %10s%c", p->t1_ms[l * T + t], value, t == assign[l] ? '*' : ' ');
            fprintf(f, "  %23s", cell);
        }
        fputc('\n', f);
    }
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
