/* The pieces behind the views: the nearest-name suggestion of the shared
 * command line, the SVG writer's escaping, the --pareto sweep, and the dot
 * drawing's data-flow edges. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_cli.h"
#include "core/hps_io.h"
#include "core/hps_svg.h"
#include "plan/hps_plan.h"
#include "plan_fixture.h"

static void test_nearest_name(void **state)
{
    (void)state;
    static const char *const formats[] = {"json", "table", "dot", "svg", NULL};
    static const char *const opts[] = {"model", "verbose", "version", "min-throughput", NULL};
    assert_string_equal(hps_cli_nearest("tabel", formats), "table"); /* a swap is one edit */
    assert_string_equal(hps_cli_nearest("jsno", formats), "json");
    assert_string_equal(hps_cli_nearest("verbsoe", opts), "verbose");
    assert_string_equal(hps_cli_nearest("modle", opts), "model");
    assert_string_equal(hps_cli_nearest("min-througput", opts), "min-throughput");
    assert_null(hps_cli_nearest("yaml", formats)); /* another word, not a typo */
    assert_null(hps_cli_nearest("x", formats));
}

/* What f holds, as a string (f is rewound and closed). */
static char *slurp(FILE *f)
{
    long n = ftell(f);
    char *s = malloc((size_t)n + 1);
    rewind(f);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static void test_svg_escapes_text(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    hps_svg_begin(f, 100, 50, "a<b & \"c\"");
    hps_svg_text(f, 1, 2, 10, "start", "normal", "#000000", "layer %s", "x<y>\x01z");
    hps_svg_end(f);
    char *s = slurp(f);
    assert_non_null(strstr(s, "<title>a&lt;b &amp; &quot;c&quot;</title>"));
    assert_non_null(strstr(s, ">layer x&lt;y&gt;z</text>"));
    assert_null(strchr(s, '\x01'));
    free(s);
}

static void test_chart_without_points(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    hps_svg_axes ax = {.x = 10, .y = 10, .w = 200, .h = 100, .title = "t", .xlabel = "x", .ylabel = "y"};
    hps_svg_series s = {.name = "none", .color = hps_svg_color(0)};
    hps_svg_chart(f, &ax, &s, 1);
    char *text = slurp(f);
    assert_non_null(strstr(text, ">no data</text>"));
    assert_null(strstr(text, "nan"));
    free(text);
}

static void test_log_chart(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    const double x[] = {1, 2, 3, 4}, y[] = {1.5, 900, 0, -3}; /* 0 and -3 cannot be drawn */
    hps_svg_axes ax = {.x = 50, .y = 10, .w = 200, .h = 100, .title = "t", .xlabel = "x", .ylabel = "y", .logy = 1};
    hps_svg_series s = {.name = "ms", .color = hps_svg_color(1), .n = 4, .x = x, .y = y};
    hps_svg_chart(f, &ax, &s, 1);
    char *text = slurp(f);
    /* a tick each decade from 1 to 1000 */
    for (const char *t = ">1<\0>10<\0>100<\0>1000<\0"; *t; t += strlen(t) + 1) assert_non_null(strstr(text, t));
    assert_null(strstr(text, ">10000<"));
    assert_null(strstr(text, "nan"));
    /* two points drawn: the polyline has exactly two coordinates */
    const char *pl = strstr(text, "points=\"");
    assert_non_null(pl);
    int commas = 0;
    for (pl += 8; *pl != '"'; pl++) commas += *pl == ',';
    assert_int_equal(commas, 2);
    free(text);
}

/* The tick labels of one axis (x: anchored "middle", y: "end", both at size
 * 11), in order, into labels; their count. */
static int tick_labels(const char *svg, const char *anchor, char labels[][64], int max)
{
    char key[96];
    snprintf(key, sizeof key, "font-size=\"11\" text-anchor=\"%s\" font-weight=\"normal\" fill=\"#333333\">", anchor);
    int n = 0;
    for (const char *p = strstr(svg, key); p; p = strstr(p, key)) {
        p += strlen(key);
        size_t len = strcspn(p, "<");
        assert_true(n < max && len < 64);
        memcpy(labels[n], p, len);
        labels[n++][len] = '\0';
    }
    return n;
}

/* A chart of the two points drawn, whatever their values: the writer
 * returns, no coordinate is inf or nan, and each axis has 1 to 15 ticks
 * whose labels differ from their neighbours'. */
static void check_chart(double x0, double x1, double y0, double y1, int logy, double xmin, double xmax)
{
    FILE *f = tmpfile();
    const double x[] = {x0, x1}, y[] = {y0, y1};
    hps_svg_axes ax = {.x = 50, .y = 10, .w = 200, .h = 100, .title = "t", .xlabel = "x", .ylabel = "y",
                       .logy = logy, .xmin = xmin, .xmax = xmax};
    hps_svg_series s = {.name = "s", .color = hps_svg_color(0), .n = 2, .x = x, .y = y, .marks = 1};
    hps_svg_chart(f, &ax, &s, 1);
    char *text = slurp(f), labels[64][64];
    assert_null(strstr(text, "nan"));
    assert_null(strstr(text, "inf"));
    for (int a = 0; a < 2; a++) {
        int n = tick_labels(text, a ? "end" : "middle", labels, 64);
        assert_in_range(n, 1, 15);
        for (int i = 1; i < n; i++) assert_string_not_equal(labels[i], labels[i - 1]);
    }
    free(text);
}

/* One point (a one-record run's loss): the axis around it has a tick at
 * zero, labelled 0 and not -0 (a sum of steps just below zero). */
static void test_zero_tick_is_0(void **state)
{
    (void)state;
    const double ys[] = {0.6446, 0.3, 0.7, 0.05};
    for (size_t k = 0; k < sizeof ys / sizeof *ys; k++) {
        FILE *f = tmpfile();
        const double x[] = {1}, y[] = {ys[k]};
        hps_svg_axes ax = {.x = 50, .y = 10, .w = 200, .h = 100, .title = "t", .xlabel = "x", .ylabel = "y"};
        hps_svg_series s = {.name = "loss", .color = hps_svg_color(0), .n = 1, .x = x, .y = y, .marks = 1};
        hps_svg_chart(f, &ax, &s, 1);
        char *text = slurp(f), labels[64][64];
        int n = tick_labels(text, "end", labels, 64), zero = 0;
        for (int i = 0; i < n; i++) {
            if (strcmp(labels[i], "-0") == 0) fail_msg("y %g: a tick labelled -0", ys[k]);
            zero += strcmp(labels[i], "0") == 0;
        }
        assert_int_equal(zero, 1);
        free(text);
    }
}

static void test_chart_of_degenerate_ranges(void **state)
{
    (void)state;
    check_chart(1e17, 1e17 + 16, 0.5, 0.5, 0, 0, 0);     /* steps one ulp apart: the tick loop stood still */
    check_chart(1, 2, 1e17, 1e17 + 16, 0, 0, 0);          /* losses as close */
    check_chart(1e17, 1e17 + 16, 0.5, 0.5, 0, 1e17, 1e17 + 16); /* the range given, as hps-train show does */
    check_chart(3, 3, 7, 7, 0, 0, 0);                     /* one value each */
    check_chart(-DBL_MAX, DBL_MAX, -DBL_MAX, DBL_MAX, 0, 0, 0); /* the span overflows */
    check_chart(1, 2, 3, 4, 0, -DBL_MAX, DBL_MAX);
    check_chart(DBL_MAX, DBL_MAX, DBL_MAX, DBL_MAX, 0, 0, 0);
    check_chart(4.9e-324, 1e-323, 0, 4.9e-324, 0, 0, 0);  /* subnormals */
    check_chart(1, 2, 1e-300, 1e300, 1, 0, 0);            /* 600 decades on a log scale */
    check_chart(1, 2, DBL_MAX, DBL_MAX, 1, 0, 0);
}

static void test_pareto_frontier(void **state)
{
    (void)state;
    plan_fixture f;
    plan_fixture_load(&f, HPS_TESTDATA "/models/demo-ctr.json", HPS_TESTDATA "/clusters/aws.json",
                      HPS_TESTDATA "/profiles/demo-ctr.json",
         20000);
    plan_search_opts o = {.seed = 1, .bound_time = 5};
    plan_frontier fr;
    hps_error err;
    assert_int_equal(plan_pareto(f.p, f.c, "exact", &o, 8, &fr, &err), 0);
    assert_true(fr.n >= 2);
    assert_true(f.p->min_throughput == 20000); /* the sweep leaves the problem as it was */
    assert_true(fr.points[0].min_throughput == 20000); /* the first row: what --min-throughput gives */
    for (int i = 0; i < fr.n; i++) {
        const plan_point *pt = &fr.points[i];
        assert_true(pt->throughput >= pt->min_throughput);
        assert_true(pt->n_stages >= 1);
        if (i) { /* more throughput costs more, and each limit is above the last point's */
            assert_true(pt->throughput > fr.points[i - 1].throughput);
            assert_true(pt->cost > fr.points[i - 1].cost);
            assert_true(pt->min_throughput > fr.points[i - 1].throughput);
        }
    }
    json_t *j = plan_frontier_json(f.p, &fr, "exact");
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 2);
    json_t *st = json_array_get(json_object_get(json_array_get(json_object_get(j, "points"), 0), "stages"), 0);
    assert_true(json_is_object(st) && json_is_integer(json_object_get(st, "units")));
    json_decref(j);
    plan_frontier_free(&fr);
    assert_int_equal(plan_pareto(f.p, f.c, "fixed:tpu", &o, 4, &fr, &err), -1);
    assert_string_equal(err.msg, "--algo fixed:TYPE: 'tpu' is no resource of the cluster");
    assert_int_equal(fr.n, 0); /* nothing to free after a failure */
    plan_fixture_free(&f);
}

static void test_dot_follows_the_data_flow(void **state)
{
    (void)state;
    plan_fixture f;
    plan_fixture_load(&f, HPS_TESTDATA "/models/dlrm-criteo.json", HPS_TESTDATA "/clusters/aws.json",
                      HPS_TESTDATA "/profiles/dlrm-criteo.json",
         1e6);
    plan_search_opts o = {.seed = 1, .bound_time = 5};
    plan_result r;
    plan_eval e;
    plan_layout l;
    hps_error err;
    plan_result_init(&r, f.p);
    plan_eval_init(&e, f.p);
    assert_int_equal(plan_solve(f.p, f.c, "exact", &o, &r, &err), 0);
    /* A cut at the merge layer whatever the cost model prefers: the bottom of
     * the model on T4s (the embeddings on their hosts, the rows being on the
     * servers), the interaction and top on A100s (aws.json order), which
     * meets the limit with both streams charged at the cut. */
    for (int i = 0; i < f.p->n_layers; i++) r.assign[i] = i < 4 ? 2 : 4;
    f.p->rows_on_servers = 1; /* --rows servers: the drawing has servers to show */
    f.p->micro_batches = 64;  /* a bubble of 1/65: two stages still carry the limit */
    plan_evaluate(f.p, r.assign, &e);
    assert_true(e.feasible && e.n_stages == 2 && e.stages[1].first == 4);
    assert_int_equal(plan_layout_make(f.p, f.c, &e, &l, &err), 0);
    FILE *out = tmpfile();
    plan_print_dot(out, f.m, f.p, &e, &l);
    char *s = slurp(out);
    /* emb_a, emb_b and the bottom MLP each flow into the interaction, across stages */
    /* the cut's label: every stream sent there, both ways (hps-plan(5) bytes_in) */
    char label[96];
    snprintf(label, sizeof label, "  l0 -> l4 [penwidth=2.5, label=\"%.0f kB/batch\"]", f.p->cut_bytes[4] / 1e3);
    /* 26 pooled dims of 8 and bottom2's 8 forward with the label, as many gradients back */
    assert_true(fabs(f.p->cut_bytes[4] - 512 * (216 + 1 + 216) * 4.0) < 1);
    assert_non_null(strstr(s, label));
    assert_non_null(strstr(s, "  l1 -> l4 [penwidth=2.5"));
    assert_non_null(strstr(s, "  l3 -> l4 [penwidth=2.5"));
    assert_non_null(strstr(s, "  sparse -> l0;\n"));
    assert_non_null(strstr(s, "  sparse -> l1;\n"));
    assert_non_null(strstr(s, "  dense -> l2;\n"));
    assert_non_null(strstr(s, "  l2 -> l3;\n"));
    assert_null(strstr(s, "l0 -> l1")); /* not the execution chain */
    assert_null(strstr(s, "l1 -> l2"));
    assert_non_null(strstr(s, "subgraph cluster_legend"));
    assert_non_null(strstr(s, "ps -> l0 [style=dashed"));
    free(s);
    plan_layout_free(&l);
    plan_eval_free(&e);
    plan_result_free(&r);
    plan_fixture_free(&f);
}

/* A graph's branches: deepfm's wide and FM parts skip the deep part and
 * meet it at the add, so the drawing has their edges (not the execution
 * chain), and edges from a stage into a later one cross the cut. */
static void test_dot_draws_branches(void **state)
{
    (void)state;
    hps_error err;
    hps_model *m = hps_model_load(HPS_TESTDATA "/models/deepfm.json", &err);
    if (!m) fail_msg("%s", err.msg);
    plan_problem *p = plan_problem_new(m->n_layers, 2);
    static const char *types[] = {"cpu", "gpu"};
    memcpy(p->type_names, types, sizeof types);
    p->batch = m->batch;
    for (int l = 0; l < m->n_layers; l++) {
        p->layer_names[l] = m->layers[l].name;
        p->kind[l] = (int)m->layers[l].kind;
        p->t1_ms[l * 2] = p->t1_ms[l * 2 + 1] = 1;
    }
    for (int t = 0; t < 2; t++) p->price[t] = 1, p->nic_bpms[t] = PLAN_GBPS_TO_BPMS, p->max_units[t] = 4;
    p->min_throughput = 1;
    plan_problem_model_cuts(p, m);
    plan_problem_prepare(p);
    int assign[16];
    for (int l = 0; l < m->n_layers; l++) assign[l] = l >= 4; /* cut before fc1 */
    plan_eval e;
    plan_eval_init(&e, p);
    plan_evaluate(p, assign, &e);
    assert_int_equal(e.n_stages, 2);
    plan_layout lay = {0};
    FILE *out = tmpfile();
    plan_print_dot(out, m, p, &e, &lay);
    char *s = slurp(out);
    static const char *const edges[] = {"  sparse -> l0;\n", "  sparse -> l1;\n", "  dense -> l1;\n",
                                        "  l0 -> l2;\n",     "  l0 -> l3;\n",     "  dense -> l3;\n",
                                        "  l4 -> l5;\n",     "  l6 -> l7;\n",     "  l7 -> l8;\n"};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        if (!strstr(s, edges[i])) fail_msg("no edge %s", edges[i]);
    /* into stage 1: fc1 from deep_in with the cut's bytes, and the wide and
     * FM logits that skip the deep part */
    char label[96];
    snprintf(label, sizeof label, "  l3 -> l4 [penwidth=2.5, label=\"%.0f kB/batch\"]", p->cut_bytes[4] / 1e3);
    assert_non_null(strstr(s, label));
    assert_non_null(strstr(s, "  l1 -> l7 [penwidth=2.5"));
    assert_non_null(strstr(s, "  l2 -> l7 [penwidth=2.5"));
    assert_null(strstr(s, "l0 -> l1")); /* not the execution chain */
    assert_null(strstr(s, "l1 -> l2"));
    assert_null(strstr(s, "l2 -> l3"));
    free(s);
    plan_eval_free(&e);
    plan_problem_free(p);
    hps_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nearest_name),
        cmocka_unit_test(test_svg_escapes_text),
        cmocka_unit_test(test_chart_without_points),
        cmocka_unit_test(test_log_chart),
        cmocka_unit_test(test_chart_of_degenerate_ranges),
        cmocka_unit_test(test_zero_tick_is_0),
        cmocka_unit_test(test_pareto_frontier),
        cmocka_unit_test(test_dot_follows_the_data_flow),
        cmocka_unit_test(test_dot_draws_branches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
