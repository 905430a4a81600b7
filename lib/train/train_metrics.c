/* Metrics as NDJSON (one object per line, "event" first), and the progress
 * bar that appears only on a terminal. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_blas.h"
#include "core/hps_json.h"
#include "train/train_internal.h"

static void emit(hps_trainer *t, json_t *o)
{
    if (!t->metrics) {
        json_decref(o);
        return;
    }
    char *line = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(7));
    if ((fprintf(t->metrics, "%s\n", line) < 0 || fflush(t->metrics) != 0) && !t->metrics_errno)
        t->metrics_errno = errno ? errno : EIO;
    free(line);
    json_decref(o);
}

void hps_trainer_record(hps_trainer *t, json_t *o) { emit(t, o); }

/* Seconds stage s computed so far: this process's pipeline thread, or the
 * stage's ranks (stages across ranks: the hooks time them). */
static double stage_busy(hps_trainer *t, int s)
{
    if (t->hooks->stage_busy) return t->hooks->stage_busy(t->hooks->ctx, s);
    return hps_pipeline_stats(t->pipe, s)->busy_s;
}

/* The plan prices the plan's ranks, whose workers exchange rows with their
 * servers every step; one process keeps the tables beside it and does no
 * exchange, so its samples/s are compared with the plan's in-process figure
 * (the hooks say which: in_process). */
static int one_process(const hps_trainer *t) { return t->hooks->in_process; }

/* A stage is timed by its layers (stage_busy), so it is compared with what
 * the plan says they compute; a plan from before that figure: its stage
 * time (one process: less the exchange). */
static double predicted_stage_ms(const hps_trainer *t, int s)
{
    const plan_file_stage *st = &t->plan->stages[s];
    if (st->layers_ms > 0) return st->layers_ms;
    return st->ms_per_batch > 0 && one_process(t) ? st->ms_per_batch - st->servers_ms : st->ms_per_batch;
}

static double predicted_rate(const hps_trainer *t)
{
    return one_process(t) && t->plan->predicted_in_process > 0 ? t->plan->predicted_in_process
                                                               : t->plan->predicted_throughput;
}

void train_metrics_start(hps_trainer *t)
{
    t->step_last = t->step; /* rates count from here, also after a resume */
    t->eval_s_last = t->sum.eval_seconds;
    t->progress_start = NAN; /* set at the first progress line */
    t->step_start = t->step;
    for (int s = 0; s < t->plan->n_stages; s++) t->busy_start[s] = t->busy_last[s] = stage_busy(t, s);
    json_t *stages = json_array();
    for (int s = 0; s < t->plan->n_stages; s++) {
        const plan_file_stage *st = &t->plan->stages[s];
        double pred = predicted_stage_ms(t, s);
        json_array_append_new(stages, json_pack("{s:i, s:s, s:s, s:s, s:[ii], s:i, s:o}", "index", s,
                                                "type", st->type, "kind", st->kind, "runs_on",
                                                t->be->kind, "layers",
                                                st->first, st->end - 1, "units", st->units,
                                                "predicted_ms", pred > 0 ? hps_json_real(pred) : json_null()));
    }
    emit(t, json_pack("{s:s, s:s, s:o, s:i, s:i, s:i, s:i, s:I, s:s, s:o}", "event", "start", "model",
                      t->m->name, "plan", t->plan->name ? json_string(t->plan->name) : json_null(), "batch", t->B, "micro_batches", t->M,
                      "threads_per_stage", t->threads, "epochs", t->o.epochs, "step",
                      (json_int_t)t->step, "blas_core", hps_blas_corename(), "stages", stages));
}

/* Per stage: measured ms per batch since the last record, beside the plan's. */
static json_t *stage_rates(hps_trainer *t, uint64_t steps)
{
    json_t *a = json_array();
    for (int s = 0; s < t->plan->n_stages; s++) {
        const hps_stage_stats *st = hps_pipeline_stats(t->pipe, s);
        double now = stage_busy(t, s), busy = now - t->busy_last[s];
        t->busy_last[s] = now;
        double ms = steps ? busy * 1e3 / (double)steps : NAN;
        double pred = predicted_stage_ms(t, s);
        json_array_append_new(
            a, json_pack("{s:i, s:o, s:o, s:o, s:i}", "index", s, "measured_ms", hps_json_real(ms),
                         "predicted_ms", pred > 0 ? hps_json_real(pred) : json_null(),
                         "samples_per_s", hps_json_real(ms > 0 ? t->B * 1e3 / ms : NAN),
                         "max_queue", st->max_queue));
    }
    return a;
}

void train_metrics_step(hps_trainer *t, int force)
{
    double now = hps_now();
    /* every metrics_every steps, so that a short run draws a curve too;
     * at most metrics_interval seconds apart, so that a long one is watched */
    if (!force && now - t->t_last < t->o.metrics_interval && t->step - t->step_last < t->metrics_every) return;
    uint64_t steps = t->step - t->step_last;
    /* training alone: evaluations since the last record do not count */
    double busy = now - t->t_last - (t->sum.eval_seconds - t->eval_s_last);
    double rate = busy > 0 ? (t->samples_run - t->samples_last) / busy : 0;
    /* the epoch of the last step: after the last epoch, t->epoch is past it */
    uint64_t epoch = t->epoch < (uint64_t)t->o.epochs ? t->epoch + 1 : t->epoch;
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:o, s:o, s:o}", "event", "step", "step",
                          (json_int_t)t->step, "epoch", (json_int_t)epoch, "samples",
                          (json_int_t)t->samples, "loss", hps_json_real(t->sum.last_loss),
                          "samples_per_s", hps_json_real(rate), "elapsed_s",
                          hps_json_real(now - t->t_start));
    json_object_set_new(o, "stages", stage_rates(t, steps));
    if (t->hooks->metrics) json_object_set_new(o, "dist", t->hooks->metrics(t->hooks->ctx));
    emit(t, o);
    t->t_last = now;
    t->step_last = t->step;
    t->samples_last = t->samples_run;
    t->eval_s_last = t->sum.eval_seconds;
}

static json_t *eval_json(const hps_eval_result *r)
{
    return json_pack("{s:I, s:o, s:o, s:o}", "rows", (json_int_t)r->rows, "logloss",
                     hps_json_real(r->loss), "auc", hps_json_real(r->auc), "accuracy",
                     hps_json_real(r->accuracy));
}

void train_metrics_eval(hps_trainer *t)
{
    json_t *o = json_pack("{s:s, s:I, s:I}", "event", "eval", "epoch", (json_int_t)t->epoch,
                          "step", (json_int_t)t->step);
    json_t *e = eval_json(&t->sum.eval);
    json_object_update(o, e);
    json_decref(e);
    emit(t, o);
}

double hps_train_error(double measured, double predicted)
{
    return predicted > 0 && measured > 0 ? measured / predicted - 1 : NAN;
}

static int stage_tables(const hps_trainer *t, int s)
{
    const plan_file_stage *st = &t->plan->stages[s];
    for (int l = st->first; l < st->end; l++)
        if (t->tables[l]) return 1;
    return 0;
}

/* Stage s keeps its rows in device memory (rows: hbm or cache, ROWS): in
 * this process's train_rows, or under mpirun in its units' replicas or
 * shards; the plan says so alike on every rank. */
static int device_stage(const hps_trainer *t, int s)
{
    const char *rows = t->plan->stages[s].rows;
    return (strcmp(rows, "hbm") == 0 || strcmp(rows, "cache") == 0) && stage_tables(t, s);
}

/* Each device stage's counts over the run so far into x, summed over the
 * units that hold its rows (hps-train(1) ROWS): under mpirun a reduction,
 * which every process makes at the same records (an epoch's end, the
 * summary), not at every step. */
static void rows_totals(hps_trainer *t, train_rows_stats *x)
{
    uint64_t c[HPS_TRAIN_MAX_STAGES][4] = {{0}};
    int any = 0;
    for (int s = 0; s < t->plan->n_stages; s++) {
        any |= device_stage(t, s);
        if (!t->stage_rows[s]) continue;
        const train_rows_stats *m = train_rows_stats_of(t->stage_rows[s]);
        c[s][0] = m->lookups, c[s][1] = m->hits, c[s][2] = m->misses, c[s][3] = m->write_backs;
    }
    if (any && t->hooks->rows_totals) t->hooks->rows_totals(t->hooks->ctx, &c[0][0], t->plan->n_stages);
    for (int s = 0; s < t->plan->n_stages; s++) x[s] = (train_rows_stats){c[s][0], c[s][1], c[s][2], c[s][3]};
}

/* Where stage s kept its rows (hps-train(1), Metrics): where the plan
 * put them, which is where hps-train runs them (it refuses a plan it cannot
 * run); a cache with its rows and the share of its units' lookups that hit
 * (x: the totals); shards and servers beside or apart under mpirun, one
 * process holding every row itself (hps-plan --calibrate prices each stage
 * so). */
static void rows_kept(const hps_trainer *t, int s, const train_rows_stats *x, json_t *o)
{
    const plan_file_stage *st = &t->plan->stages[s];
    int tables = stage_tables(t, s);
    const char *rows = tables ? st->rows : "none";
    /* a cache under mpirun is in front of the plan's servers, or of each
     * unit's shard in its host table where the plan has none (ROWS) */
    int cache = tables && strcmp(rows, "cache") == 0,
        on_servers = strcmp(rows, "servers") == 0 || (cache && (st->servers > 0 || st->servers_beside));
    json_object_set_new(o, "rows", json_string(rows));
    json_object_set_new(o, "cache_rows", cache ? json_integer((json_int_t)st->cache_rows) : json_null());
    json_object_set_new(o, "hit_rate", cache && x->lookups ? hps_json_real((double)x->hits / (double)x->lookups)
                                                           : json_null());
    int shards = !one_process(t) && tables && strcmp(rows, "hbm") == 0 && st->rows_shards ? st->units : 0;
    json_object_set_new(o, "shards", json_integer(shards));
    json_object_set_new(o, "servers", one_process(t) || !on_servers ? json_null()
                                      : json_string(st->servers_beside ? "beside" : "apart"));
}

/* The plan's figures beside the run's: samples/s, and each stage's ms per
 * batch over the whole run (the step records give them per interval). */
static json_t *fidelity(hps_trainer *t, const train_rows_stats *totals)
{
    hps_train_summary *s = &t->sum;
    uint64_t steps = t->step - t->step_start;
    s->predicted_samples_per_s = predicted_rate(t);
    s->predicted_for = one_process(t) ? "one process" : "ranks";
    s->n_stages = t->plan->n_stages;
    json_t *a = json_array();
    for (int i = 0; i < s->n_stages; i++) {
        double busy = stage_busy(t, i) - t->busy_start[i];
        s->stage_ms[i] = steps ? busy * 1e3 / (double)steps : NAN;
        s->stage_predicted_ms[i] = predicted_stage_ms(t, i);
        double pred = s->stage_predicted_ms[i];
        double e = s->stage_on_cpu[i] ? NAN : hps_train_error(s->stage_ms[i], pred);
        json_t *o = json_pack("{s:i, s:o, s:o, s:o, s:b}", "index", i, "measured_ms", hps_json_real(s->stage_ms[i]),
                              "predicted_ms", pred > 0 ? hps_json_real(pred) : json_null(), "error",
                              hps_json_real(e), "ran_on_cpu", s->stage_on_cpu[i]);
        rows_kept(t, i, &totals[i], o);
        json_array_append_new(a, o);
    }
    double pred = s->predicted_samples_per_s;
    s->step_ms = s->samples_per_s > 0 ? t->B * 1e3 / s->samples_per_s : NAN;
    s->read_ms = steps ? t->read_s * 1e3 / (double)steps : NAN;
    s->engine_ms = steps ? t->engine_s * 1e3 / (double)steps : NAN;
    /* GPU stages run on the CPU measure the CPU, not the plan: no error */
    double e = s->gpu_on_cpu ? NAN : hps_train_error(s->samples_per_s, pred);
    return json_pack("{s:o, s:s, s:o, s:b, s:o, s:o, s:o, s:o}", "predicted_samples_per_s",
                     pred > 0 ? hps_json_real(pred) : json_null(), "predicted_for", s->predicted_for,
                     "error", hps_json_real(e), "cpu_fallback", s->gpu_on_cpu, "step_ms",
                     hps_json_real(s->step_ms), "read_ms", hps_json_real(s->read_ms), "engine_ms",
                     hps_json_real(s->engine_ms), "stages", a);
}

uint64_t hps_trainer_row_misses(const hps_trainer *t)
{
    uint64_t n = 0;
    for (int s = 0; s < t->plan->n_stages; s++)
        if (t->stage_rows[s]) n += train_rows_stats_of(t->stage_rows[s])->misses;
    return n;
}

/* Per stage with device rows: the counts over the run so far, summed over
 * its units (totals), beside the plan's predicted hit rate (hps-train(1)
 * ROWS). */
static json_t *rows_json(const hps_trainer *t, const train_rows_stats *totals)
{
    json_t *a = json_array();
    for (int s = 0; s < t->plan->n_stages; s++) {
        if (!device_stage(t, s)) continue;
        const plan_file_stage *st = &t->plan->stages[s];
        const train_rows_stats *x = &totals[s];
        int cache = strcmp(st->rows, "cache") == 0;
        json_t *o = json_pack("{s:i, s:s, s:I, s:I, s:I, s:I}", "stage", s, "rows", st->rows,
                              "lookups", (json_int_t)x->lookups, "hits", (json_int_t)x->hits,
                              "misses", (json_int_t)x->misses, "write_backs", (json_int_t)x->write_backs);
        json_object_set_new(o, "capacity", cache ? json_integer((json_int_t)st->cache_rows) : json_null());
        json_object_set_new(o, "hit_rate",
                            x->lookups ? hps_json_real((double)x->hits / (double)x->lookups) : json_null());
        json_object_set_new(o, "predicted_hit_rate",
                            cache && st->cache_hit_rate > 0 ? hps_json_real(st->cache_hit_rate) : json_null());
        json_array_append_new(a, o);
    }
    return a;
}

/* Each table's figures where its rows live: the servers' (summed over
 * them, as the last step applied left them) when the hooks give them, else
 * this process's tables; asked only where the records go.  Per layer,
 * zero but for embedding layers. */
static hps_table_stats *tables_stats(hps_trainer *t)
{
    hps_table_stats *s = hps_calloc((size_t)t->m->n_layers, sizeof *s);
    if (t->metrics && t->hooks->table_stats && t->hooks->table_stats(t->hooks->ctx, s)) return s;
    for (int l = 0; l < t->m->n_layers; l++)
        if (t->tables[l]) hps_table_stats_get(t->tables[l], &s[l]);
    return s;
}

/* With since (per layer: lookups, admitted), the admitted share of the
 * lookups after it, else of all. */
static json_t *tables_json(const hps_trainer *t, const hps_table_stats *s, uint64_t (*since)[2])
{
    json_t *a = json_array();
    for (int l = 0; l < t->m->n_layers; l++) {
        if (!t->tables[l]) continue;
        uint64_t lookups = (uint64_t)s[l].lookups, admitted = (uint64_t)s[l].admitted;
        if (since) lookups -= since[l][0], admitted -= since[l][1];
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:f}", "layer", t->m->layers[l].name, "rows",
                              (json_int_t)s[l].rows, "evictions", (json_int_t)s[l].evictions, "expired",
                              (json_int_t)s[l].expired, "mib", (double)s[l].bytes / 1048576.0);
        json_object_set_new(o, "admitted_share",
                            lookups ? hps_json_real((double)admitted / (double)lookups) : json_null());
        json_array_append_new(a, o);
    }
    return a;
}

static void mark_epoch(hps_trainer *t, const hps_table_stats *s)
{
    for (int l = 0; l < t->m->n_layers; l++)
        t->epoch_lookups[l][0] = (uint64_t)s[l].lookups, t->epoch_lookups[l][1] = (uint64_t)s[l].admitted;
}

void train_metrics_mark_epoch(hps_trainer *t)
{
    hps_table_stats *s = tables_stats(t);
    mark_epoch(t, s);
    free(s);
}

void train_metrics_epoch(hps_trainer *t)
{
    train_rows_stats totals[HPS_TRAIN_MAX_STAGES];
    rows_totals(t, totals);
    json_t *rows = rows_json(t, totals);
    int admission = hps_train_admits(&t->o) || t->o.expire_after_days > 0;
    if (!json_array_size(rows) && !admission) {
        json_decref(rows);
        return;
    }
    json_t *o = json_pack("{s:s, s:I, s:I}", "event", "epoch", "epoch", (json_int_t)t->epoch, "step",
                          (json_int_t)t->step);
    if (json_array_size(rows)) json_object_set_new(o, "rows", rows);
    else json_decref(rows);
    if (admission) {
        hps_table_stats *s = tables_stats(t);
        json_object_set_new(o, "tables", tables_json(t, s, t->epoch_lookups));
        mark_epoch(t, s);
        free(s);
    }
    emit(t, o);
}

void train_say_expired(const hps_model *m, int layer, uint64_t day, int64_t gone, int expire_after_days)
{
    hps_log(2, "%s: day %llu: embedding layer '%s': %lld rows untouched for %d days expired\n",
            hps_progname(), (unsigned long long)day, m->layers[layer].name, (long long)gone, expire_after_days);
}

void train_metrics_day(hps_trainer *t)
{
    hps_table_stats *s = hps_calloc((size_t)t->m->n_layers, sizeof *s);
    if (t->hooks->table_stats && t->hooks->table_stats(t->hooks->ctx, s))
        for (int l = 0; l < t->m->n_layers; l++)
            if (s[l].day_expired) train_say_expired(t->m, l, t->day, s[l].day_expired, t->o.expire_after_days);
    free(s);
}

void train_metrics_summary(hps_trainer *t)
{
    train_rows_stats totals[HPS_TRAIN_MAX_STAGES];
    rows_totals(t, totals); /* every process, before the step record some skip */
    if (t->step > t->step_last) train_metrics_step(t, 1);
    json_t *fid = fidelity(t, totals);
    const hps_train_summary *s = &t->sum;
    json_t *o = json_pack("{s:s, s:I, s:I, s:i, s:o, s:o, s:o, s:o}", "event", "summary", "steps",
                          (json_int_t)s->steps, "samples", (json_int_t)s->samples, "epochs",
                          s->epochs_done, "loss", hps_json_real(s->last_loss), "seconds",
                          hps_json_real(s->seconds), "eval_seconds", hps_json_real(s->eval_seconds),
                          "samples_per_s", hps_json_real(s->samples_per_s));
    hps_table_stats *tables = tables_stats(t);
    json_object_set_new(o, "tables", tables_json(t, tables, NULL));
    free(tables);
    json_object_set_new(o, "rows", rows_json(t, totals));
    json_object_set_new(o, "day", json_integer((json_int_t)t->day)); /* hps-train(1), DAY BY DAY */
    json_object_update(o, fid);
    json_decref(fid);
    if (s->have_eval) json_object_set_new(o, "eval", eval_json(&s->eval));
    emit(t, o);
}

/* How far the whole run is, 0 to 1: by steps under --steps, else by rows
 * over all epochs. */
static double run_fraction(const hps_trainer *t, hps_source *src)
{
    uint64_t rows = src->rows(src), done = src->tell(src);
    double epochs = t->o.epochs > 0 ? t->o.epochs : 1;
    double by_rows = rows ? ((double)t->epoch + (double)done / (double)rows) / epochs : 0;
    if (t->o.max_steps > 0) {
        double by_steps = (double)t->step / (double)t->o.max_steps;
        return fmin(fmax(by_steps, by_rows), 1); /* whichever ends the run first */
    }
    return fmin(by_rows, 1);
}

static void format_eta(char *buf, size_t n, double s)
{
    if (!isfinite(s) || s < 0) snprintf(buf, n, "--:--");
    else if (s >= 3600) snprintf(buf, n, "%d:%02d:%02d", (int)(s / 3600), (int)fmod(s / 60, 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%02d:%02d", (int)(s / 60), (int)fmod(s, 60));
}

void train_progress(hps_trainer *t, hps_source *src, int final)
{
    if (!t->o.progress) return;
    double now = hps_now();
    if (!final && now - t->t_bar < 0.2) return;
    t->t_bar = now;
    double frac = final ? 1 : run_fraction(t, src);
    if (isnan(t->progress_start)) t->progress_start = frac;
    double start = t->progress_start;
    char bar[31], eta[32];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
    bar[30] = '\0';
    double rate = now > t->t_start ? t->samples_run / (now - t->t_start) : 0;
    /* the rest at the pace since this run (or resume) began */
    format_eta(eta, sizeof eta, frac > start ? (now - t->t_start) * (1 - frac) / (frac - start) : NAN);
    fprintf(stderr, "\r[%s] %3.0f%% epoch %llu/%d step %llu", bar, 100 * frac,
            (unsigned long long)(t->epoch < (uint64_t)t->o.epochs ? t->epoch + 1 : t->epoch), t->o.epochs,
            (unsigned long long)t->step);
    if (t->o.max_steps > 0) fprintf(stderr, "/%ld", t->o.max_steps);
    fprintf(stderr, " loss %.4f %.0f samples/s ETA %s ", t->sum.last_loss, rate, final ? "00:00" : eta);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}
