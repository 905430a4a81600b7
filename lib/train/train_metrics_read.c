/* Reading a metrics file back (hps-train(1), Metrics): the one reader of the
 * NDJSON that train_metrics.c writes.  hps-train show draws its records
 * (train_curves.c); hps-plan --calibrate takes the run's figures from its
 * start and summary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "train/hps_train.h"

int hps_train_metrics_each(const char *path, hps_metrics_record_fn fn, void *ctx, hps_error *err)
{
    char *text;
    size_t len;
    if (hps_read_all(path, &text, &len, err)) return -1;
    int line = 0, rc = 0;
    for (char *p = text, *next; p && *p && rc == 0; p = next) {
        next = strchr(p, '\n');
        if (next) *next++ = '\0';
        line++;
        if (!*p) continue;
        json_t *o = json_loads(p, 0, NULL);
        const char *event = json_string_value(json_object_get(o, "event"));
        if (!event)
            rc = hps_fail(err, HPS_EXIT_USAGE, "%s:%d: expected a metrics record (a JSON object with \"event\")",
                          hps_path_name(path), line);
        else rc = fn(ctx, event, o, line, err);
        json_decref(o);
    }
    free(text);
    return rc;
}

/* A number field, NAN when absent or null. */
static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

void hps_train_step_read(json_t *o, hps_train_step_record *r)
{
    r->step = num(o, "step");
    r->loss = num(o, "loss");
    r->samples_per_s = num(o, "samples_per_s");
    json_t *stages = json_object_get(o, "stages"), *st;
    size_t i;
    r->n_stages = 0;
    json_array_foreach(stages, i, st) {
        if (i >= HPS_TRAIN_MAX_STAGES) break;
        r->stages[i] = (hps_train_step_stage){num(st, "samples_per_s"), num(st, "measured_ms"),
                                              num(st, "predicted_ms")};
        r->n_stages = (int)i + 1;
    }
}

void hps_train_eval_read(json_t *o, hps_train_eval_record *r)
{
    *r = (hps_train_eval_record){num(o, "step"), num(o, "logloss"), num(o, "auc"), num(o, "accuracy")};
}

const char *hps_train_start_model(json_t *o) { return json_string_value(json_object_get(o, "model")); }

typedef struct {
    hps_train_run *run;
    const char *name;
    int have_start;
} run_reader;

/* A stage's [first, last] layers: indices a model can have, so that nothing
 * computed from them overflows (a forged 2^31 - 1 did). */
static int layer_range(json_t *layers, long long *first, long long *last)
{
    json_t *a = json_array_get(layers, 0), *b = json_array_get(layers, 1);
    if (json_array_size(layers) != 2 || !json_is_integer(a) || !json_is_integer(b)) return -1;
    *first = json_integer_value(a), *last = json_integer_value(b);
    return *first < 0 || *first >= HPS_MAX_LAYERS || *last < 0 || *last >= HPS_MAX_LAYERS ? -1 : 0;
}

static int read_start(run_reader *rr, json_t *o, int line, hps_error *err)
{
    hps_train_run *r = rr->run;
    char ctx[600];
    const char *model;
    long long batch, micro;
    snprintf(ctx, sizeof ctx, "%s:%d: start", rr->name, line);
    if (hps_json_str(o, "model", HPS_REQUIRED, &model, ctx, err) ||
        hps_json_int(o, "batch", HPS_REQUIRED, 1, HPS_MAX_BATCH, &batch, ctx, err) ||
        hps_json_int(o, "micro_batches", HPS_REQUIRED, 1, 1 << 20, &micro, ctx, err))
        return -1;
    snprintf(r->model, sizeof r->model, "%s", model);
    r->batch = (int)batch, r->micro_batches = (int)micro;
    json_t *stages = json_object_get(o, "stages");
    size_t n = json_array_size(stages);
    if (!json_is_array(stages) || n < 1 || n > HPS_TRAIN_MAX_STAGES)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: stages must be an array of 1 to %d stages", ctx,
                        HPS_TRAIN_MAX_STAGES);
    r->n_stages = (int)n;
    for (int s = 0; s < r->n_stages; s++) {
        json_t *st = json_array_get(stages, (size_t)s), *layers = json_object_get(st, "layers");
        hps_train_run_stage *rs = &r->stages[s];
        const char *type;
        long long units;
        char sctx[700];
        snprintf(sctx, sizeof sctx, "%.600s: stage %d", ctx, s);
        if (!json_is_object(st) || hps_json_str(st, "type", HPS_REQUIRED, &type, sctx, err) ||
            hps_json_int(st, "units", HPS_REQUIRED, 1, 1 << 20, &units, sctx, err))
            return json_is_object(st) ? -1 : hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", sctx);
        long long first, last;
        if (layer_range(layers, &first, &last))
            return hps_fail(err, HPS_EXIT_USAGE, "%s: layers must be [first, last], layer indices from 0 to %d",
                            sctx, HPS_MAX_LAYERS - 1);
        snprintf(rs->type, sizeof rs->type, "%s", type);
        rs->first = (int)first, rs->end = (int)last + 1;
        rs->units = (int)units;
        if (rs->first < 0 || rs->end <= rs->first || (s && rs->first != r->stages[s - 1].end))
            return hps_fail(err, HPS_EXIT_USAGE, "%s: layers [%d, %d] do not follow the stage before", sctx,
                            rs->first, rs->end - 1);
    }
    rr->have_start = 1;
    return 0;
}

/* Where a summary's stage kept its rows: all of it, or (a run of an
 * hps-train before it) none of it; 1 when there. */
static int read_rows(json_t *st, hps_train_run_stage *rs, const char *ctx, hps_error *err)
{
    static const char *const where[] = {"none", "servers", "hbm", "cache", NULL},
                             *const servers[] = {"apart", "beside", NULL};
    int rows;
    long long cache_rows = 0, shards;
    if (!json_object_get(st, "rows")) return 0;
    if (hps_json_enum(st, "rows", HPS_REQUIRED, where, &rows, ctx, err) ||
        hps_json_int(st, "shards", HPS_REQUIRED, 0, 1 << 20, &shards, ctx, err) ||
        hps_json_enum(st, "servers", HPS_OPTIONAL, servers, &rs->servers_beside, ctx, err))
        return -1;
    int cache = strcmp(where[rows], "cache") == 0;
    rs->hit_rate = -1;
    if (cache && (hps_json_int(st, "cache_rows", HPS_REQUIRED, 1, 1LL << 50, &cache_rows, ctx, err) ||
                  hps_json_num(st, "hit_rate", HPS_OPTIONAL, 0, 1, &rs->hit_rate, ctx, err)))
        return -1;
    if (shards == 1 || (shards && strcmp(where[rows], "hbm") != 0))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: shards=%lld: expected 0, or at least 2 with rows hbm", ctx,
                        shards);
    snprintf(rs->rows, sizeof rs->rows, "%s", where[rows]);
    rs->cache_rows = cache_rows, rs->shards = (int)shards;
    return 1;
}

static int read_summary(run_reader *rr, json_t *o, int line, hps_error *err)
{
    hps_train_run *r = rr->run;
    char ctx[600];
    long long steps;
    snprintf(ctx, sizeof ctx, "%s:%d: summary", rr->name, line);
    if (!rr->have_start) return hps_fail(err, HPS_EXIT_USAGE, "%s: comes before the start record", ctx);
    if (hps_json_int(o, "steps", HPS_REQUIRED, 0, 1LL << 62, &steps, ctx, err) ||
        hps_json_num(o, "samples_per_s", HPS_REQUIRED, 0, 1e15, &r->samples_per_s, ctx, err))
        return -1;
    r->steps = (uint64_t)steps;
    json_t *stages = json_object_get(o, "stages");
    if (!json_is_array(stages) || (int)json_array_size(stages) != r->n_stages)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: stages must hold the start record's %d stages (a run of this "
                        "version of hps-train)", ctx, r->n_stages);
    for (int s = 0; s < r->n_stages; s++) {
        char sctx[700];
        snprintf(sctx, sizeof sctx, "%.600s: stage %d", ctx, s);
        json_t *st = json_array_get(stages, (size_t)s);
        if (!json_is_object(st)) return hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", sctx);
        if (hps_json_num(st, "measured_ms", HPS_REQUIRED, 0, 1e12, &r->stages[s].measured_ms, sctx, err))
            return -1;
        int kept = read_rows(st, &r->stages[s], sctx, err);
        if (kept < 0) return -1;
        if (s && kept != r->has_rows)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: rows: expected in every stage or in none", sctx);
        r->has_rows = kept;
    }
    r->have_summary = 1;
    return 0;
}

static int on_record(void *ctx, const char *event, json_t *o, int line, hps_error *err)
{
    run_reader *rr = ctx;
    if (strcmp(event, "start") == 0) return read_start(rr, o, line, err);
    if (strcmp(event, "summary") == 0) return read_summary(rr, o, line, err);
    if (strcmp(event, "dist") == 0) {
        char where[600];
        long long ranks;
        snprintf(where, sizeof where, "%s:%d: dist", rr->name, line);
        if (hps_json_int(o, "ranks", HPS_REQUIRED, 1, INT32_MAX, &ranks, where, err)) return -1;
        rr->run->ranks = (int)ranks;
    }
    return 0;
}

int hps_train_run_load(const char *path, hps_train_run *r, hps_error *err)
{
    memset(r, 0, sizeof *r);
    run_reader rr = {.run = r, .name = hps_path_name(path)};
    if (hps_train_metrics_each(path, on_record, &rr, err)) return -1;
    if (!r->have_summary)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: no summary record: the run did not finish", rr.name);
    if (!r->steps || !(r->samples_per_s > 0))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: summary: the run trained no steps", rr.name);
    /* the bound measured_ms has: a forged rate made calibrated times a profile refuses */
    if (1000.0 * r->batch / r->samples_per_s > 1e12)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: summary: samples_per_s=%g at batch %d: a step of more than 1e12 ms",
                        rr.name, r->samples_per_s, r->batch);
    return 0;
}
