/* Pictures of a plan: the model's data-flow graph with its stages as a
 * Graphviz drawing, the stages as an SVG bar chart, and the --pareto frontier
 * as an SVG chart. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_svg.h"
#include "plan/hps_plan.h"

static const char *const palette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                                      "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f",
                                      "#a6cee3", "#b2df8a", "#fb9a99", "#cab2d6"};

static const char *human(double v, const char *const *unit, double base, char *buf, size_t n)
{
    int u = 0;
    while (v >= base && unit[u + 1]) v /= base, u++;
    snprintf(buf, n, "%.3g %s", v, unit[u]);
    return buf;
}

static const char *bytes(double b, char *buf, size_t n)
{
    static const char *const unit[] = {"B", "kB", "MB", "GB", "TB", NULL};
    return human(b, unit, 1000, buf, n);
}

/* A name inside a double-quoted dot string. */
static void dot_name(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
}

static int stage_of(const plan_eval *e, int layer)
{
    for (int s = 0; s < e->n_stages; s++)
        if (layer >= e->stages[s].first && layer < e->stages[s].end) return s;
    return -1;
}

/* The data flows as a graph, whether the model names its layers' inputs or
 * is a chain: each embedding (and linear) layer reads the sparse slots, the
 * bottom MLP the dense features, the merge layer takes them all, a branch
 * its named inputs (hps_layer.inputs).  Returns the predecessors of layer l
 * (-1: the dense input, -2: the sparse input). */
static int inputs_of(const hps_model *m, int l, int *from, int max)
{
    const hps_layer *L = &m->layers[l];
    int n = 0;
    if (L->kind == HPS_LAYER_EMBEDDING || L->kind == HPS_LAYER_LINEAR) {
        from[n++] = -2;
        if (L->kind == HPS_LAYER_LINEAR && L->linear_dense) from[n++] = -1;
        return n;
    }
    if (!L->n_inputs) { /* a chain's loss reads the previous layer */
        from[n++] = l ? l - 1 : -1;
        return n;
    }
    for (int i = 0; i < L->n_inputs && n < max; i++) from[n++] = L->inputs[i] == HPS_TENSOR_DENSE ? -1 : L->inputs[i];
    return n;
}

static void dot_stage(FILE *f, const hps_model *m, const plan_problem *p, const plan_eval *e, int s)
{
    const plan_stage *st = &e->stages[s];
    int bott = e->bottleneck == s && !e->bottleneck_is_link;
    fprintf(f, "  subgraph cluster_stage%d {\n    label=\"stage %d: ", s, s);
    dot_name(f, p->type_names[st->type]);
    fprintf(f, " x %d\\n%.3f ms/batch, %.0f samples/s, $%.3f/hour%s\";\n", st->units, st->ms, st->throughput,
            st->units * p->price[st->type], bott ? "\\nbottleneck" : "");
    fprintf(f, "    style=rounded; color=\"%s\"; penwidth=%d;\n", bott ? "#d62728" : "#555555", bott ? 3 : 1);
    for (int l = st->first; l < st->end; l++) {
        fprintf(f, "    l%d [label=\"", l);
        dot_name(f, m->layers[l].name);
        fprintf(f, "\\n%s\", fillcolor=\"%s\"];\n", hps_layer_kind_names[m->layers[l].kind],
                palette[st->type % 16]);
    }
    fprintf(f, "  }\n");
}

static void dot_servers(FILE *f, const hps_model *m, const plan_problem *p, const plan_layout *l)
{
    long long rows = 0;
    double table = 0;
    for (int k = 0; k < m->n_layers; k++) {
        const hps_layer *L = &m->layers[k];
        if (L->kind != HPS_LAYER_EMBEDDING) continue;
        hps_layer_cost c;
        hps_layer_costs(m, k, m->batch, &c);
        table += c.table_bytes;
        for (int i = 0; i < L->n_slots; i++) rows += m->slots[L->slots[i]].rows;
    }
    if (!rows || !l->n_servers) return; /* no servers: every row lives in HBM */
    char b[32];
    fprintf(f, "  ps [shape=cylinder, fillcolor=\"#eeeeee\", label=\"parameter servers x %d\\n%lld rows, %s\"];\n",
            l->n_servers, rows, bytes(table, b, sizeof b));
    for (int k = 0; k < m->n_layers; k++)
        if (m->layers[k].kind == HPS_LAYER_EMBEDDING)
            fprintf(f, "  ps -> l%d [style=dashed, dir=both, label=\"%s/step\"];\n", k,
                    bytes(p->sparse_bytes[k], b, sizeof b));
}

static void dot_legend(FILE *f, const plan_problem *p, const plan_eval *e)
{
    fprintf(f, "  subgraph cluster_legend {\n    label=\"legend\"; style=dashed; color=\"#999999\";\n");
    for (int t = 0; t < p->n_types; t++)
        if (e->units[t]) {
            fprintf(f, "    legend_t%d [label=\"", t);
            dot_name(f, p->type_names[t]);
            fprintf(f, "\", fillcolor=\"%s\"];\n", palette[t % 16]);
        }
    fprintf(f, "    legend_b [label=\"bottleneck\", fillcolor=white, color=\"#d62728\", penwidth=3];\n"
               "    legend_link [label=\"cut between stages:\\nbytes per batch, both ways\", fillcolor=white];\n"
               "    legend_ps [label=\"dashed: embedding rows\\npulled and pushed\", fillcolor=white];\n  }\n");
}

void plan_print_dot(FILE *f, const hps_model *m, const plan_problem *p, const plan_eval *e, const plan_layout *l)
{
    fprintf(f, "digraph plan {\n  rankdir=LR;\n  node [shape=box, style=\"filled,rounded\", fontname=\"Helvetica\"];\n"
               "  edge [fontname=\"Helvetica\", fontsize=10];\n  label=\"");
    dot_name(f, m->name);
    fprintf(f, ": %.0f samples/s, $%.3f/hour\"; labelloc=t;\n", e->throughput, e->cost_per_hour);
    int uses_dense = 0, uses_sparse = 0;
    /* a cut's bytes (every stream hps-train sends there, both ways) label
     * the first edge into the stage after it */
    unsigned char labelled[HPS_MAX_LAYERS] = {0};
    for (int s = 0; s < e->n_stages; s++) dot_stage(f, m, p, e, s);
    for (int k = 0; k < m->n_layers; k++) {
        int from[HPS_MAX_LAYERS + 1];
        int n = inputs_of(m, k, from, HPS_MAX_LAYERS + 1);
        for (int i = 0; i < n; i++) {
            char b[32];
            if (from[i] == -1) fprintf(f, "  dense -> l%d;\n", k), uses_dense = 1;
            else if (from[i] == -2) fprintf(f, "  sparse -> l%d;\n", k), uses_sparse = 1;
            else if (stage_of(e, from[i]) != stage_of(e, k)) { /* a link between stages */
                int s = stage_of(e, k), first = !labelled[s]++;
                fprintf(f, "  l%d -> l%d [penwidth=2.5, label=\"%s%s\"];\n", from[i], k,
                        first ? bytes(p->cut_bytes[e->stages[s].first], b, sizeof b) : "", first ? "/batch" : "");
            }
            else fprintf(f, "  l%d -> l%d;\n", from[i], k);
        }
    }
    if (uses_dense)
        fprintf(f, "  dense [shape=ellipse, fillcolor=white, label=\"dense features (%d)\"];\n", m->n_dense);
    if (uses_sparse)
        fprintf(f, "  sparse [shape=ellipse, fillcolor=white, label=\"sparse slots (%d)\"];\n", m->n_slots);
    dot_servers(f, m, p, l);
    dot_legend(f, p, e);
    fprintf(f, "}\n");
}

/* ---- SVG ---------------------------------------------------------------------- */

static void svg_bar(FILE *f, double y, double frac, const char *fill, int bottleneck)
{
    hps_svg_rect(f, 250, y, 300, 22, "#f2f2f2", "#cccccc");
    hps_svg_rect(f, 250, y, 300 * fmin(frac, 1), 22, fill, bottleneck ? "#d62728" : "#555555");
}

void plan_draw_svg(FILE *f, const hps_model *m, const plan_problem *p, const plan_eval *e, const plan_layout *l)
{
    int rows = 0;
    for (int s = 0; s < e->n_stages; s++) rows += 1 + (e->stages[s].link_ms > 0);
    double top = 0;
    for (int s = 0; s < e->n_stages; s++)
        top = fmax(top, fmax(e->stages[s].throughput, e->stages[s].link_ms > 0 ? e->stages[s].link_throughput : 0));
    top = fmax(top, p->min_throughput) * 1.05;
    int h = 110 + 34 * rows + 86;
    hps_svg_begin(f, 1040, h, "hps plan");
    hps_svg_text(f, 20, 28, 16, "start", "bold", "#000000", "plan for %s: %s at >= %.0f samples/s", m->name,
                 plan_objective_names[p->objective], p->min_throughput);
    hps_svg_text(f, 20, 50, 13, "start", "normal", "#333333", "%.0f samples/s, $%.3f/hour, $%.4f in all", e->throughput,
                 e->cost_per_hour, e->cost);
    hps_svg_text(f, 250, 84, 12, "start", "normal", "#333333",
                 "samples/s of each stage and link (bar), the limit (dashed)");
    double y = 96;
    for (int s = 0; s < e->n_stages; s++) {
        const plan_stage *st = &e->stages[s];
        if (st->link_ms > 0) {
            int b = e->bottleneck == s && e->bottleneck_is_link;
            hps_svg_text(f, 20, y + 16, 12, "start", "normal", "#000000", "link into stage %d", s);
            svg_bar(f, y, st->link_throughput / top, "#bbbbbb", b);
            hps_svg_text(f, 560, y + 16, 12, "start", b ? "bold" : "normal", "#000000", "%.0f samples/s, %.3f ms%s",
                         st->link_throughput, st->link_ms, b ? "  bottleneck" : "");
            y += 34;
        }
        int b = e->bottleneck == s && !e->bottleneck_is_link;
        hps_svg_text(f, 20, y + 16, 12, "start", "bold", "#000000", "stage %d: %s x %d", s, p->type_names[st->type],
                     st->units);
        hps_svg_text(f, 20, y + 30, 10, "start", "normal", "#555555", "%s .. %s", p->layer_names[st->first],
                     p->layer_names[st->end - 1]);
        svg_bar(f, y, st->throughput / top, hps_svg_color(st->type), b);
        hps_svg_text(f, 560, y + 16, 12, "start", b ? "bold" : "normal", "#000000",
                     "%.0f samples/s, %.3f ms/batch, $%.3f/h%s", st->throughput, st->ms, st->units * p->price[st->type], b ? "  bottleneck" : "");
        y += 34;
    }
    /* the scale the bars are read on, a lone stage's too */
    hps_svg_xaxis(f, 250, y + 2, 300, 0, top, "samples/s");
    double lx = 250 + 300 * p->min_throughput / top;
    hps_svg_line(f, lx, 90, lx, y + 2, "#d62728", 1.5, 1);
    hps_svg_text(f, lx, y + 36, 11, "middle", "normal", "#d62728", "limit %.0f", p->min_throughput);
    if (l->n_servers)
        hps_svg_text(f, 20, y + 60, 12, "start", "normal", "#333333",
                     "parameter servers: %d, %.1f MB/s of embedding rows pulled and pushed", l->n_servers,
                     l->server_bytes_per_s / 1e6);
    hps_svg_end(f);
}

void plan_frontier_svg(FILE *f, const plan_problem *p, const plan_frontier *fr)
{
    double *x = hps_malloc((size_t)(fr->n + 1) * sizeof *x), *y = hps_malloc((size_t)(fr->n + 1) * sizeof *y);
    /* the objective the sweep minimised, per job as the table's */
    static const char *const unit[] = {"$ per job", "seconds per job", "joules per job", "joule-seconds per job",
                                        "$ per hour"};
    char title[96], ylabel[96];
    snprintf(title, sizeof title, "%s against throughput (--pareto)", plan_objective_names[p->objective]);
    snprintf(ylabel, sizeof ylabel, "%s (%s)", plan_objective_names[p->objective], unit[p->objective]);
    for (int i = 0; i < fr->n; i++) x[i] = fr->points[i].throughput, y[i] = fr->points[i].objective;
    hps_svg_begin(f, 800, 590, "hps-plan --pareto");
    hps_svg_axes ax = {.x = 90, .y = 50, .w = 660, .h = 380, .title = title, .xlabel = "samples/s",
                       .ylabel = ylabel, .ymin_zero = 1};
    /* the staircase fills the frame: its legend goes under the x label */
    hps_svg_series s[2] = {{.name = NULL, .color = hps_svg_color(0), .n = fr->n, .x = x, .y = y, .step = 1, .marks = 1}};
    /* --max-cost-per-hour, --max-cost: the budget across the frontier, dashed */
    char budget[64];
    double bx[2] = {fr->n ? x[0] : 0, fr->n ? x[fr->n - 1] : 0}, by[2] = {fr->budget, fr->budget};
    snprintf(budget, sizeof budget, "budget %.4g", fr->budget);
    s[1] = (hps_svg_series){.name = budget, .color = "#d62728", .n = 2, .x = bx, .y = by, .dashed = 1};
    hps_svg_chart(f, &ax, s, fr->budget > 0 && fr->n ? 2 : 1);
    hps_svg_line(f, 90, 482, 112, 482, s[0].color, 2.5, 0);
    hps_svg_text(f, 118, 486, 11, "start", "normal", "#000000", "the best plan reaching that throughput");
    /* each point's stages under the chart, in order */
    for (int i = 0; i < fr->n && i < 5; i++) {
        char line[256] = "";
        for (int k = 0; k < fr->points[i].n_stages; k++) {
            size_t len = strlen(line);
            snprintf(line + len, sizeof line - len, "%s%s x%d", k ? " | " : "",
                     p->type_names[fr->points[i].stages[k].type], fr->points[i].stages[k].units);
        }
        hps_svg_text(f, 90, 510 + 12 * i, 10, "start", "normal", "#333333", "%.0f samples/s, %s %.4g: %s",
                     x[i], plan_objective_names[p->objective], y[i], line);
    }
    if (fr->n > 5) hps_svg_text(f, 90, 510 + 60, 10, "start", "normal", "#333333", "... (%d points)", fr->n);
    hps_svg_end(f);
    free(x);
    free(y);
}
