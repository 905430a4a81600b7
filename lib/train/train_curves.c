/* Training curves: the NDJSON metrics that train_metrics.c writes, read back
 * and drawn as one SVG picture of four charts (loss, evaluation, samples/s
 * per stage, each stage's measured ms per batch beside the plan's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "core/hps_svg.h"
#include "train/hps_train.h"

typedef struct {
    int n, cap;
    double *x, *y;
} curve;

static void curve_add(curve *c, double x, double y)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->x = hps_realloc(c->x, (size_t)c->cap * sizeof *c->x);
        c->y = hps_realloc(c->y, (size_t)c->cap * sizeof *c->y);
    }
    c->x[c->n] = x, c->y[c->n] = y, c->n++;
}

typedef struct {
    char model[HPS_NAME_MAX];
    int n_stages;
    curve loss, rate, auc, acc, logloss;
    curve stage_rate[HPS_TRAIN_MAX_STAGES], measured[HPS_TRAIN_MAX_STAGES], predicted[HPS_TRAIN_MAX_STAGES];
} curves;

static void add_step(curves *c, json_t *o)
{
    hps_train_step_record r;
    hps_train_step_read(o, &r);
    curve_add(&c->loss, r.step, r.loss);
    curve_add(&c->rate, r.step, r.samples_per_s);
    if (r.n_stages > c->n_stages) c->n_stages = r.n_stages;
    for (int i = 0; i < r.n_stages; i++) {
        curve_add(&c->stage_rate[i], r.step, r.stages[i].samples_per_s);
        curve_add(&c->measured[i], r.step, r.stages[i].measured_ms);
        curve_add(&c->predicted[i], r.step, r.stages[i].predicted_ms);
    }
}

static int on_record(void *ctx, const char *event, json_t *o, int line, hps_error *err)
{
    curves *c = ctx;
    (void)line, (void)err;
    if (strcmp(event, "start") == 0) {
        const char *m = hps_train_start_model(o);
        snprintf(c->model, sizeof c->model, "%s", m ? m : "?");
    } else if (strcmp(event, "step") == 0) {
        add_step(c, o);
    } else if (strcmp(event, "eval") == 0) {
        hps_train_eval_record e;
        hps_train_eval_read(o, &e);
        curve_add(&c->logloss, e.step, e.logloss);
        curve_add(&c->auc, e.step, e.auc);
        curve_add(&c->acc, e.step, e.accuracy);
    }
    return 0;
}

static int read_curves(const char *path, curves *c, hps_error *err)
{
    if (hps_train_metrics_each(path, on_record, c, err)) return -1;
    if (!c->loss.n && !c->logloss.n)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: no step or eval records to draw", hps_path_name(path));
    return 0;
}

static hps_svg_series series(const char *name, int color, const curve *c, int dashed)
{
    return (hps_svg_series){.name = name, .color = hps_svg_color(color), .n = c->n, .x = c->x, .y = c->y,
                            .dashed = dashed, .marks = c->n < 40};
}

static int has_finite(const curve *c)
{
    for (int i = 0; i < c->n; i++)
        if (isfinite(c->y[i])) return 1;
    return 0;
}

static void draw(FILE *f, curves *c)
{
    const double W = 520, H = 260, X0 = 90, X1 = 90 + W + 110, Y0 = 70, Y1 = 70 + H + 100;
    hps_svg_begin(f, (int)(X1 + W + 40), (int)(Y1 + H + 60), "hps-train metrics");
    hps_svg_text(f, 20, 30, 16, "start", "bold", "#000000", "training of %s", c->model);
    /* every chart over the steps trained, so that they line up */
    double x0 = c->loss.n ? c->loss.x[0] : 0, x1 = c->loss.n ? c->loss.x[c->loss.n - 1] : 0;
    for (int i = 0; i < c->logloss.n; i++) x0 = fmin(x0, c->logloss.x[i]), x1 = fmax(x1, c->logloss.x[i]);
    /* a run of one record: a step on either side, so that the point sits mid-chart in all four */
    if (!(x1 > x0)) x0 = x0 >= 1 ? x0 - 1 : 0, x1 = x0 + 2;
    hps_svg_axes a1 = {X0, Y0, W, H, "training loss", "step", "loss", 0, 0, x0, x1};
    hps_svg_series loss = series("loss of the last batch", 0, &c->loss, 0);
    hps_svg_chart(f, &a1, &loss, 1);

    int binary = has_finite(&c->auc);
    hps_svg_axes a2 = {X1, Y0, W, H, "evaluation", "step", binary ? "AUC, logloss" : "accuracy, logloss", 0, 0,
                       x0, x1};
    hps_svg_series ev[2] = {series(binary ? "AUC" : "accuracy", 2, binary ? &c->auc : &c->acc, 0),
                            series("logloss", 1, &c->logloss, 1)};
    ev[0].marks = ev[1].marks = 1;
    hps_svg_chart(f, &a2, ev, 2);

    char names[2 * HPS_TRAIN_MAX_STAGES][48];
    hps_svg_series rs[HPS_TRAIN_MAX_STAGES + 1], ms[2 * HPS_TRAIN_MAX_STAGES];
    static const curve none; /* a stage without a planned time */
    int n = c->n_stages;
    rs[0] = series("all stages (pipeline)", 7, &c->rate, 0);
    for (int s = 0; s < n; s++) {
        snprintf(names[s], sizeof names[s], "stage %d", s);
        rs[s + 1] = series(names[s], s, &c->stage_rate[s], 0);
        snprintf(names[n + s], sizeof names[n + s], "stage %d planned", s);
        ms[2 * s] = series(names[s], s, &c->measured[s], 0);
        ms[2 * s + 1] = series(names[n + s], s, has_finite(&c->predicted[s]) ? &c->predicted[s] : &none, 1);
    }
    hps_svg_axes a3 = {X0, Y1, W, H, "samples/s per stage (log scale)", "step", "samples/s", 0, 1,
                       x0, x1};
    hps_svg_chart(f, &a3, rs, n + 1);
    hps_svg_axes a4 = {X1, Y1, W, H, "ms per batch: measured (solid), planned (dashed), log scale", "step", "ms", 0, 1,
                       x0, x1};
    hps_svg_chart(f, &a4, ms, 2 * n);
    hps_svg_end(f);
}

static void free_curve(curve *c)
{
    free(c->x);
    free(c->y);
}

int hps_train_curves_svg(const char *metrics_path, const char *out_path, hps_error *err)
{
    curves c;
    memset(&c, 0, sizeof c);
    int rc = read_curves(metrics_path, &c, err);
    if (rc == 0) {
        hps_out *out = hps_out_open(out_path, err);
        if (!out) rc = -1;
        else {
            draw(hps_out_file(out), &c);
            rc = hps_out_commit(out, err);
        }
    }
    free_curve(&c.loss), free_curve(&c.rate), free_curve(&c.auc), free_curve(&c.acc), free_curve(&c.logloss);
    for (int s = 0; s < HPS_TRAIN_MAX_STAGES; s++)
        free_curve(&c.stage_rate[s]), free_curve(&c.measured[s]), free_curve(&c.predicted[s]);
    return rc;
}
