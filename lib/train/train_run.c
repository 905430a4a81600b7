/* The trainer: batches through the pipeline, optimizer updates, metrics,
 * evaluation and checkpoints (hps-train(1)). */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_blas.h"
#include "core/hps_json.h"
#include "core/hps_rng.h"
#include "train/train_internal.h"

hps_train_opts hps_train_opts_default(void)
{
    return (hps_train_opts){.epochs = 1, .seed = 1, .table_policy = HPS_TABLE_FULL_ERROR,
                            .optim = hps_optim_default(), .metrics_interval = 10.0};
}

/* ---- parameter-server lookups ------------------------------------------------- */

/* Rows that live elsewhere (remote_rows) are fetched once per load each. */
static void train_touch(hps_trainer *t, int layer, int64_t row)
{
    if (row >= t->cap_mark[layer]) {
        int64_t cap = t->cap_mark[layer], want = (row + 1) * 2;
        t->mark[layer] = hps_realloc(t->mark[layer], (size_t)want * sizeof **t->mark);
        memset(t->mark[layer] + cap, 0, (size_t)(want - cap) * sizeof **t->mark);
        t->uses[layer] = hps_realloc(t->uses[layer], (size_t)want * sizeof **t->uses);
        t->cap_mark[layer] = want;
    }
    /* with admission the servers count every lookup: each one is fetched */
    if (t->mark[layer][row] == t->load_id && !hps_train_admits(&t->o)) {
        t->uses[layer][row]++;
        return;
    }
    t->mark[layer][row] = t->load_id;
    t->uses[layer][row] = 1;
    if (t->n_touched[layer] == t->cap_touched[layer]) {
        t->cap_touched[layer] = t->cap_touched[layer] ? t->cap_touched[layer] * 2 : 1024;
        t->touched[layer] = hps_realloc(t->touched[layer],
                                        (size_t)t->cap_touched[layer] * sizeof **t->touched);
    }
    t->touched[layer][t->n_touched[layer]++] = row;
}

/* The row of an evaluation's key: read only, an unseen key reads zeros,
 * the table stays as trained. */
static int64_t eval_row(hps_trainer *t, int layer, int slot, uint64_t key)
{
    int64_t r = hps_table_stage(t->tables[layer], hps_table_find(t->tables[layer], slot, key));
    if (r < 0) r = hps_table_zero_row(t->tables[layer]);
    return t->rows_of[layer] && r >= 0 ? train_rows_map(t->rows_of[layer], layer, r, 1) : r;
}

static int table_rows(void *ctx, int layer, const int *slot_in_layer, const uint64_t *keys, int64_t n,
                      int64_t *rows)
{
    hps_trainer *t = ctx;
    const int *slot_of = t->m->layers[layer].slots;
    if (n > t->cap_slots) {
        t->cap_slots = 2 * n;
        t->slots = hps_realloc(t->slots, (size_t)t->cap_slots * sizeof *t->slots);
    }
    for (int64_t e = 0; e < n; e++) t->slots[e] = slot_of[slot_in_layer[e]];
    if (t->evaluating && !t->remote_rows) {
        for (int64_t e = 0; e < n; e++)
            if ((rows[e] = eval_row(t, layer, t->slots[e], keys[e])) < 0) return -1;
        return 0;
    }
    /* A table of remote rows only maps keys to rows: during evaluation it
     * maps keys other workers trained too, and the fetch reads them
     * read-only from their servers (zeros for keys no worker trained). */
    if (hps_table_lookup_many(t->tables[layer], t->slots, keys, n, t->step + 1, rows, &t->map_err)) return -1;
    train_rows *dev = t->rows_of[layer];
    if (t->remote_rows)
        for (int64_t e = 0; e < n; e++) train_touch(t, layer, rows[e]);
    else if (dev)
        for (int64_t e = 0; e < n; e++) rows[e] = train_rows_map(dev, layer, rows[e], 0);
    return 0;
}

/* Tables may move while a batch's keys are looked up: point every net at them
 * after, the device's rows once fetched. */
static void refresh_tables(hps_trainer *t)
{
    for (int s = 0; s < t->plan->n_stages; s++)
        if (t->stage_rows[s]) train_rows_prepare(t->stage_rows[s]);
    for (int l = 0; l < t->m->n_layers; l++) {
        if (!t->tables[l]) continue;
        train_rows *dev = t->rows_of[l];
        for (int k = 0; k < t->n_nets; k++)
            hps_net_set_table(t->nets[k], l, dev ? train_rows_weights(dev, l) : hps_table_weights(t->tables[l]),
                              dev ? train_rows_accum(dev, l) : hps_table_accum(t->tables[l]));
    }
}

/* The end of a step (write_back) or of an evaluation batch on the device's rows. */
static void rows_step_end(hps_trainer *t, int write_back)
{
    for (int s = 0; s < t->plan->n_stages; s++)
        if (t->stage_rows[s]) train_rows_step_end(t->stage_rows[s], write_back);
}

void train_rows_sync(hps_trainer *t)
{
    for (int s = 0; s < t->plan->n_stages; s++)
        if (t->stage_rows[s]) train_rows_flush(t->stage_rows[s]);
}

void hps_trainer_tables_written(hps_trainer *t)
{
    for (int s = 0; s < t->plan->n_stages; s++)
        if (t->stage_rows[s]) train_rows_reload(t->stage_rows[s]);
}

/* ---- creation ------------------------------------------------------------------ */

/* Where the dense layers run: on cuda:0 when the plan has a GPU stage (the
 * embedding layers stay on the CPU, beside the parameter-server tables), on
 * the CPU otherwise or with --cpu-fallback. */
static const hps_backend *stage_backend(const plan_file *plan, const hps_train_opts *o,
                                        hps_error *err)
{
    int gpu = -1;
    for (int s = 0; s < plan->n_stages && gpu < 0; s++)
        if (strcmp(plan->stages[s].kind, "gpu") == 0) gpu = s;
    if (gpu < 0) return hps_backend_cpu();
    if (o->cpu_fallback) {
        hps_log(3, "%s: --cpu-fallback: stage %d ('%s') runs on the CPU\n", hps_progname(), gpu,
                plan->stages[gpu].type);
        return hps_backend_cpu();
    }
    hps_error why;
    const hps_backend *be = hps_backend_cuda(0, &why);
    if (!be)
        hps_fail(err, HPS_EXIT_RUNTIME,
                 "%s: stage %d runs on '%s', a GPU type, but %s; pass --cpu-fallback to run it "
                 "on the CPU",
                 plan->name, gpu, plan->stages[gpu].type, why.msg);
    return be;
}

/* rows: hbm or cache: the stage's rows in its backend's memory. */
static int device_rows(const plan_file_stage *st)
{
    return strcmp(st->rows, "hbm") == 0 || strcmp(st->rows, "cache") == 0;
}

static int has_tables(const hps_model *m, const plan_file_stage *st)
{
    for (int l = st->first; l < st->end; l++)
        if (hps_layer_has_table(&m->layers[l])) return 1;
    return 0;
}

/* What this hps-train cannot run is refused before any work, naming the
 * stage (hps-train(1) ROWS). */
static int check_rows(const hps_model *m, const plan_file *plan, const hps_train_opts *o,
                      const hps_backend *be, hps_error *err)
{
    int device = -1, host = -1;
    for (int s = 0; s < plan->n_stages; s++) {
        const plan_file_stage *st = &plan->stages[s];
        if (!has_tables(m, st)) continue;
        if (!device_rows(st)) {
            host = s;
            continue;
        }
        device = s;
        if (strcmp(st->rows, "cache") == 0 && st->cache_rows <= 0)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: stage %d: rows: cache without cache_rows: re-run hps-plan", plan->name, s);
        if (o->max_table_bytes && o->table_policy == HPS_TABLE_FULL_EVICT)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: stage %d: rows: %s keeps rows in device memory: --evict cannot run with it",
                            plan->name, s, st->rows);
        if (hps_train_admits(o) || o->expire_after_days > 0 || o->rowwise_adagrad || o->row_dtype != HPS_ROW_FP32)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: stage %d: rows: %s keeps rows in device memory: %s cannot run with it yet",
                            plan->name, s, st->rows,
                            hps_train_admits(o)        ? "--admit-after"
                            : o->expire_after_days > 0 ? "--expire-after-days"
                            : o->rowwise_adagrad       ? "--sparse-optimizer rowwise-adagrad"
                                                       : "--row-dtype");
    }
    if (device >= 0 && host >= 0 && be != hps_backend_cpu())
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: stage %d keeps its rows on the GPU (rows: %s), stage %d in host tables: "
                        "hps-train runs one or the other on a GPU, not both",
                        plan->name, device, plan->stages[device].rows, host);
    return 0;
}

/* The device rows of every stage whose plan asks for them, and per layer the
 * ones holding its rows. */
static void create_rows(hps_trainer *t)
{
    t->rows_of = hps_calloc((size_t)t->m->n_layers, sizeof *t->rows_of);
    for (int s = 0; s < t->plan->n_stages; s++) {
        const plan_file_stage *st = &t->plan->stages[s];
        if (!device_rows(st) || !has_tables(t->m, st)) continue;
        int64_t cap = strcmp(st->rows, "cache") == 0 ? (int64_t)st->cache_rows : INT64_MAX;
        t->stage_rows[s] = train_rows_create(t->be, t->m, t->tables, st->first, st->end, cap);
        for (int l = st->first; l < st->end; l++)
            if (t->tables[l]) t->rows_of[l] = t->stage_rows[s];
    }
}

static int any_device_rows(const hps_model *m, const plan_file *plan)
{
    for (int s = 0; s < plan->n_stages; s++)
        if (device_rows(&plan->stages[s]) && has_tables(m, &plan->stages[s])) return 1;
    return 0;
}

static void create_nets(hps_trainer *t)
{
    const hps_model *m = t->m;
    /* host tables live in host memory, where a GPU backend takes the pooled
     * rows over; device rows are the backend's own */
    int external = t->be == hps_backend_cpu() || any_device_rows(m, t->plan);
    t->owner = hps_net_create(m, t->be, t->cap_micro,
                              external ? HPS_NET_EXTERNAL_TABLES : HPS_NET_HOST_TABLES);
    hps_net_set_row_map(t->owner, table_rows, t);
    hps_net_init(t->owner, t->o.seed);
    /* room for a later stage's load: each partner's slice may end in a part
     * micro-batch (train_load_slices makes those nets when needed) */
    t->nets = hps_calloc((size_t)(t->M + HPS_TRAIN_MAX_SLICES), sizeof *t->nets);
    t->nets[0] = t->owner;
    for (int k = 1; k < t->M; k++) t->nets[k] = hps_net_create_shared(t->owner, t->cap_micro);
    t->n_nets = t->M;
    t->tables = hps_calloc((size_t)m->n_layers, sizeof *t->tables);
    t->merged = hps_calloc((size_t)m->n_layers, sizeof *t->merged);
    t->micro_grads = hps_calloc((size_t)(t->M + HPS_TRAIN_MAX_SLICES), sizeof *t->micro_grads);
    for (int l = 0; l < m->n_layers; l++)
        if (hps_layer_has_table(&m->layers[l])) t->tables[l] = hps_train_table_create(m, l, &t->o);
    t->epoch_lookups = hps_calloc((size_t)m->n_layers, sizeof *t->epoch_lookups);
    int L = m->n_layers;
    t->touched = hps_calloc((size_t)L, sizeof *t->touched);
    t->mark = hps_calloc((size_t)L, sizeof *t->mark);
    t->uses = hps_calloc((size_t)L, sizeof *t->uses);
    t->n_touched = hps_calloc((size_t)L, sizeof *t->n_touched);
    t->cap_touched = hps_calloc((size_t)L, sizeof *t->cap_touched);
    t->cap_mark = hps_calloc((size_t)L, sizeof *t->cap_mark);
    create_rows(t);
}

hps_trainer *hps_trainer_create(const hps_model *m, const plan_file *plan,
                                const hps_train_opts *o, hps_error *err)
{
    const hps_backend *be = stage_backend(plan, o, err);
    if (!be || check_rows(m, plan, o, be, err)) return NULL;
    hps_trainer *t = hps_calloc(1, sizeof *t);
    t->m = m;
    t->plan = plan;
    t->o = *o;
    t->day = 1;
    t->be = be;
    for (int s = 0; s < plan->n_stages; s++) {
        t->sum.stage_on_cpu[s] = be == hps_backend_cpu() && strcmp(plan->stages[s].kind, "gpu") == 0;
        t->sum.gpu_on_cpu |= t->sum.stage_on_cpu[s];
    }
    t->B = plan->batch;
    int S = plan->n_stages;
    /* --micro-batches, else what the plan priced, else one per stage */
    t->M = o->micro_batches > 0 ? o->micro_batches : plan->micro_batches > 0 ? plan->micro_batches : S;
    if (t->M > t->B) t->M = t->B;
    t->cap_micro = (t->B + t->M - 1) / t->M;
    int threads = o->threads > 0 ? o->threads : hps_max_threads() / S;
    t->threads = threads < 1 ? 1 : threads;
    hps_set_threads(t->threads);
    /* each stage's thread runs its products at once, each with an OpenBLAS
     * buffer: had now, or one line; later, OpenBLAS would spin */
    int fit = hps_blas_reserve_callers(S);
    if (fit < S) {
        free(t);
        hps_fail(err, HPS_EXIT_RUNTIME, "out of memory: the address-space limit (ulimit -v) leaves room for "
                                        "OpenBLAS's buffers of %d of the %d stages",
                 fit, S);
        return NULL;
    }
    create_nets(t);
    hps_stage_range ranges[HPS_TRAIN_MAX_STAGES];
    for (int s = 0; s < S; s++) ranges[s] = (hps_stage_range){plan->stages[s].first, plan->stages[s].end};
    t->pipe = hps_pipeline_create(t->nets, t->M, ranges, S, t->threads);
    t->batch = hps_batch_create(t->B, m->n_dense, m->n_slots, (int64_t)t->B * (m->n_slots + 1), 1);
    train_local_hooks(t);
#ifdef HPS_TEST_HOOKS
    const char *kill = getenv("HPS_TRAIN_KILL_AT_STEP");
    t->kill_at_step = kill ? strtoull(kill, NULL, 10) : 0;
#endif
    return t;
}

void hps_trainer_free(hps_trainer *t)
{
    if (!t) return;
    hps_pipeline_free(t->pipe);
    for (int k = t->n_nets - 1; k >= 0; k--) hps_net_free(t->nets[k]);
    for (int s = 0; s < t->plan->n_stages; s++) train_rows_free(t->stage_rows[s]);
    for (int l = 0; l < t->m->n_layers; l++) {
        hps_table_free(t->tables[l]);
        hps_sparse_grad_free(t->merged[l]);
        free(t->touched[l]), free(t->mark[l]), free(t->uses[l]);
    }
    if (t->metrics && t->metrics != stdout) fclose(t->metrics);
    free(t->touched), free(t->slots), free(t->epoch_lookups), free(t->n_touched), free(t->cap_touched), free(t->mark), free(t->uses), free(t->cap_mark);
    free(t->nets), free(t->tables), free(t->merged), free(t->micro_grads), free(t->rows_of);
    hps_batch_free(t->batch);
    free(t);
}

/* ---- one step -------------------------------------------------------------------- */

void hps_trainer_set_dist(hps_trainer *t, const hps_train_dist *d)
{
    t->hooks = d;
    t->remote_rows = d->remote_rows;
    /* rows that live elsewhere are not this trainer's device rows (the
     * shards of rows: hbm live with their owners, lib/dist) */
    for (int s = 0; d->remote_rows && s < t->plan->n_stages; s++) {
        train_rows_free(t->stage_rows[s]);
        t->stage_rows[s] = NULL;
    }
    for (int l = 0; d->remote_rows && l < t->m->n_layers; l++) t->rows_of[l] = NULL;
    /* rows on servers: the servers' tables admit, expire and store compact
     * rows; a worker's only map keys to the fp32 values of a load */
    for (int l = 0; d->remote_rows && l < t->m->n_layers; l++)
        if (t->tables[l]) {
            hps_table_free(t->tables[l]);
            t->tables[l] = hps_table_create(l, t->m->layers[l].dim, t->o.max_table_bytes, t->o.table_policy,
                                            t->o.seed);
        }
    if (d->link) hps_pipeline_set_link(t->pipe, d->link);
}

/* The servers' names of n rows of layer l's local table, into keys. */
static void row_keys(const hps_trainer *t, int l, const int64_t *rows, int64_t n, hps_row_key *keys)
{
    for (int64_t i = 0; i < n; i++) {
        int slot;
        hps_table_row_key(t->tables[l], rows[i], &slot, &keys[i].key);
        keys[i].layer = l, keys[i].slot = slot;
    }
}

/* The rows this load touched get their current values from where they
 * live (remote_rows: the local tables only map keys to rows and stage one
 * step's values; else no row was touched and this fetches nothing). */
static int fetch_rows(hps_trainer *t, hps_error *err)
{
    int64_t n = 0, floats = 0;
    for (int l = 0; l < t->m->n_layers; l++)
        if (t->tables[l]) n += t->n_touched[l], floats += t->n_touched[l] * t->m->layers[l].dim;
    hps_row_key *keys = hps_malloc((size_t)(n + 1) * sizeof *keys);
    uint32_t *uses = hps_malloc((size_t)(n + 1) * sizeof *uses);
    float *out = hps_malloc((size_t)(floats + 1) * sizeof *out);
    int64_t i = 0;
    for (int l = 0; l < t->m->n_layers; l++) {
        if (!t->tables[l]) continue;
        row_keys(t, l, t->touched[l], t->n_touched[l], keys + i);
        for (int64_t r = 0; r < t->n_touched[l]; r++) uses[i + r] = t->uses[l][t->touched[l][r]];
        i += t->n_touched[l];
    }
    int rc = t->hooks->fetch_rows(t->hooks->ctx, keys, uses, n, out, t->evaluating, err);
    const float *at = out;
    for (int l = 0; rc == 0 && l < t->m->n_layers; l++) {
        int D = t->m->layers[l].dim;
        for (int64_t r = 0; t->tables[l] && r < t->n_touched[l]; r++, at += D)
            memcpy(hps_table_weights(t->tables[l]) + t->touched[l][r] * D, at, (size_t)D * sizeof *at);
    }
    free(keys), free(uses), free(out);
    return rc;
}

/* The layers whose keys this process maps, whose rows it fetches and whose
 * gradients it pushes: with stages in other processes its own stage's
 * (evaluation runs every stage here), else all. */
static hps_stage_range own_layers(const hps_trainer *t)
{
    const hps_stage_link *link = t->hooks->link;
    if (!link || t->evaluating) return (hps_stage_range){0, t->m->n_layers};
    return (hps_stage_range){t->plan->stages[link->stage].first, t->plan->stages[link->stage].end};
}

/* Micro-batch k's executor, made the first time a load needs it. */
static hps_net *micro_net(hps_trainer *t, int k)
{
    HPS_CHECK(k < t->M + HPS_TRAIN_MAX_SLICES);
    for (; t->n_nets <= k; t->n_nets++) t->nets[t->n_nets] = hps_net_create_shared(t->owner, t->cap_micro);
    return t->nets[k];
}

/* Cuts rows [lo, hi) of b into micro-batches and loads them; returns how many, or -1. */
int train_load_micro(hps_trainer *t, const hps_batch *b, int lo, int hi, int total, hps_error *err)
{
    return train_load_slices(t, b, 1, &lo, &hi, total, err);
}

int train_load_slices(hps_trainer *t, const hps_batch *b, int n_slices, const int *lo, const int *hi, int total,
                      hps_error *err)
{
    int k = 0;
    hps_stage_range own = own_layers(t);
    t->load_id++;
    for (int l = 0; l < t->m->n_layers; l++)
        if (t->tables[l]) hps_table_stage_begin(t->tables[l]);
    if (!t->evaluating) { /* a key not admitted reads the zero row: it must not move during the load */
        int64_t keys = 0;
        for (int i = 0; i < n_slices; i++)
            keys += b->offsets[(int64_t)hi[i] * b->n_slots] - b->offsets[(int64_t)lo[i] * b->n_slots];
        for (int l = 0; l < t->m->n_layers; l++)
            if (t->tables[l] && hps_train_admits(&t->o)) hps_table_reserve(t->tables[l], keys);
    }
    memset(t->n_touched, 0, (size_t)t->m->n_layers * sizeof *t->n_touched);
    for (int i = 0; i < n_slices; i++) {
        for (int first = lo[i]; first < hi[i]; first += t->cap_micro, k++) {
            int n = hi[i] - first < t->cap_micro ? hi[i] - first : t->cap_micro;
            hps_net *net = micro_net(t, k);
            net->loss_scale = (float)n / (float)total;
            /* dropout's masks: a function of the run's seed, the step and the
             * micro-batch, so a resumed run draws the ones it would have */
            hps_net_set_dropout(net, !t->evaluating,
                                hps_mix64(t->o.seed ^ hps_mix64(t->step * HPS_MAX_MICRO_BATCHES + (uint64_t)k)));
            hps_net_set_key_layers(net, own.first, own.end);
            if (hps_net_load_range(net, b, first, n)) {
                *err = t->map_err;
                refresh_tables(t); /* lookups before the failure may have moved them */
                return -1;
            }
        }
    }
    refresh_tables(t);
    if (fetch_rows(t, err)) return -1;
    return k;
}

static double batch_loss(hps_trainer *t, int k, int B)
{
    double loss = 0;
    for (int i = 0; i < k; i++) loss += t->nets[i]->loss * t->nets[i]->B;
    return loss / B;
}

/* Each layer's sparse gradients of the k micro-batches loaded here go to
 * where its rows live (k == 0: a worker with no rows this step, whose
 * servers still wait for its empty part). */
static int update_sparse(hps_trainer *t, int n_loaded, hps_error *err)
{
    hps_stage_range own = own_layers(t);
    for (int l = 0; l < t->m->n_layers; l++) {
        if (!t->tables[l]) continue;
        /* another stage's layer: that stage's processes push it, this one an empty part */
        int k = l >= own.first && l < own.end ? n_loaded : 0;
        for (int i = 0; i < k; i++) t->micro_grads[i] = t->nets[i]->layers[l].grad;
        if (t->rows_of[l] && t->hooks->exchange_rows) { /* a replica of them: every process's sum */
            if (train_rows_apply_replicas(t->rows_of[l], l, t->micro_grads, k, t->hooks, t->step + 1,
                                          t->o.optim.lr_sparse, t->o.optim.adagrad_eps, err))
                return -1;
            continue;
        }
        if (t->rows_of[l]) { /* rows on this process's device */
            if (k > 0)
                train_rows_apply(t->rows_of[l], l, t->micro_grads, k, t->o.optim.lr_sparse,
                                 t->o.optim.adagrad_eps);
            continue;
        }
        if (t->hooks->update_rows(t->hooks->ctx, l, t->tables[l], t->micro_grads, k, &t->merged[l], err))
            return -1;
    }
    return 0;
}

/* A later stage loads the micro-batches its partners above send, to map
 * its table layers' keys and fetch their rows as stage 0 does; without
 * table layers it loads nothing (the activations carry all it needs). */
static int load_later(hps_trainer *t, const hps_batch *b, hps_error *err)
{
    int lo[HPS_TRAIN_MAX_SLICES], hi[HPS_TRAIN_MAX_SLICES];
    int n = t->hooks->up_slices ? t->hooks->up_slices(t->hooks->ctx, b->B, lo, hi) : 0;
    return n > 0 ? train_load_slices(t, b, n, lo, hi, b->B, err) : 0;
}

/* This process's part of a step's compute: every stage through the
 * pipeline, or with stages in other processes its own, loading rows [lo, hi)
 * when it is stage 0 (a later stage: load_later).  Returns the micro-batches loaded here (their sparse
 * gradients are pushed), or -1; *rows: the samples it ran, *wait_s: what of
 * the time was loading and waiting, not compute. */
static int compute(hps_trainer *t, const hps_batch *b, int lo, int hi, double *loss, int *rows,
                   double *wait_s, hps_error *err)
{
    double t0 = hps_now();
    const hps_stage_link *link = t->hooks->link;
    int k = link && link->stage > 0 ? load_later(t, b, err) : train_load_micro(t, b, lo, hi, b->B, err);
    if (k < 0) return -1;
    *wait_s = hps_now() - t0; /* the load's own time is noise beside the fetch */
    t->be->memzero(t->owner->grads, t->m->n_params * sizeof(float));
    if (link) {
        double waits, p0 = hps_now();
        if (hps_pipeline_run_linked(t->pipe, k, b->B, loss, rows, &waits, err)) return -1;
        t->engine_s -= hps_now() - p0 - waits; /* the stage's compute; its waits are the engine's */
        *wait_s += waits;
        return k;
    }
    double p0 = hps_now();
    if (k > 0) hps_pipeline_run(t->pipe, k);
    t->engine_s -= hps_now() - p0;
    *loss = batch_loss(t, k, b->B);
    *rows = hi - lo;
    return k;
}

int hps_trainer_step(hps_trainer *t, const hps_batch *b, double *loss, hps_error *err)
{
    const hps_train_dist *h = t->hooks;
    int lo, hi, rows;
    h->slice(h->ctx, b->B, &lo, &hi);
    double t0 = hps_now(), wait_s;
    int k = compute(t, b, lo, hi, loss, &rows, &wait_s, err);
    if (k < 0) return -1;
    if (h->reduce_step(h->ctx, t->owner->grads, t->m->n_params, loss, rows, hps_now() - t0 - wait_s, err))
        return -1;
    hps_net_update_dense(t->owner, &t->o.optim);
    if (update_sparse(t, k, err) || h->step_end(h->ctx, err)) return -1;
    rows_step_end(t, 1);
    t->engine_s += hps_now() - t0;
    t->step++;
    t->samples += (uint64_t)b->B;
    t->samples_run += b->B;
    return 0;
}

/* ---- evaluation ---------------------------------------------------------------------- */

static void eval_collect(hps_trainer *t, int k, float *score, float *label, int *correct)
{
    const int C = t->m->classes, binary = t->m->label == HPS_LABEL_BINARY;
    float *probs = hps_malloc((size_t)t->cap_micro * (binary ? 1 : C) * sizeof *probs);
    float *labels = hps_malloc((size_t)t->cap_micro * sizeof *labels);
    int at = 0;
    for (int i = 0; i < k; i++) {
        hps_net *net = t->nets[i];
        hps_net_probs(net, probs);
        t->be->download(labels, net->labels, (size_t)net->B * sizeof *labels);
        for (int r = 0; r < net->B; r++, at++) {
            label[at] = labels[r];
            if (binary) {
                score[at] = probs[r];
                continue;
            }
            int best = 0;
            for (int c = 1; c < C; c++) best = probs[(size_t)r * C + c] > probs[(size_t)r * C + best] ? c : best;
            *correct += best == (int)labels[r];
        }
    }
    free(probs);
    free(labels);
}

int hps_trainer_eval(hps_trainer *t, hps_source *src, hps_eval_result *res, hps_error *err)
{
    uint64_t n_all = src->rows(src);
    float *score = hps_malloc((size_t)(n_all + 1) * sizeof *score);
    float *label = hps_malloc((size_t)(n_all + 1) * sizeof *label);
    double loss = 0;
    uint64_t n = 0;
    int correct = 0, got, rc = src->seek(src, 0, err);
    t->evaluating = 1;
    while (rc == 0 && (got = src->read(src, t->batch, t->B, err)) > 0) {
        int k = train_load_micro(t, t->batch, 0, got, got, err);
        if (k < 0 || n + (uint64_t)got > n_all) {
            rc = k < 0 ? -1 : hps_fail(err, HPS_EXIT_RUNTIME, "%s: more rows than announced", src->name);
            break;
        }
        hps_pipeline_forward(t->pipe, k);
        rows_step_end(t, 0);
        loss += batch_loss(t, k, got) * got;
        eval_collect(t, k, score + n, label + n, &correct);
        n += (uint64_t)got;
    }
    t->evaluating = 0;
    if (rc == 0 && got < 0) rc = -1;
    if (rc == 0) {
        res->rows = n;
        res->loss = n ? loss / (double)n : NAN;
        res->auc = t->m->label == HPS_LABEL_BINARY ? hps_auc(score, label, n) : NAN;
        res->accuracy = t->m->label == HPS_LABEL_BINARY ? NAN : n ? (double)correct / (double)n : NAN;
    }
    free(score);
    free(label);
    return rc;
}

static int cmp_score(const void *a, const void *b)
{
    float x = ((const float *)a)[0], y = ((const float *)b)[0];
    return (x > y) - (x < y);
}

double hps_auc(const float *score, const float *label, size_t n)
{
    /* rank-sum (Mann-Whitney) with tied scores sharing their mean rank */
    for (size_t i = 0; i < n; i++)
        if (score[i] != score[i]) return NAN; /* a diverged model: no ranking */
    float *pairs = hps_malloc((n + 1) * 2 * sizeof *pairs);
    double pos = 0, rank_sum = 0;
    for (size_t i = 0; i < n; i++) pairs[2 * i] = score[i], pairs[2 * i + 1] = label[i];
    qsort(pairs, n, 2 * sizeof *pairs, cmp_score);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double positives = 0;
        while (j < n && pairs[2 * j] == pairs[2 * i]) positives += pairs[2 * j + 1] > 0.5f, j++;
        rank_sum += positives * (i + 1 + j) / 2.0; /* mean of ranks i+1 .. j */
        pos += positives;
        i = j;
    }
    free(pairs);
    double neg = (double)n - pos;
    return pos > 0 && neg > 0 ? (rank_sum - pos * (pos + 1) / 2) / (pos * neg) : NAN;
}

/* ---- the loop -------------------------------------------------------------------------- */

static int open_metrics(hps_trainer *t, hps_error *err)
{
    if (!t->o.metrics_path) return 0;
    t->metrics = strcmp(t->o.metrics_path, "-") == 0 ? stdout
                 : fopen(t->o.metrics_path, t->o.resume ? "a" : "w");
    if (!t->metrics)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot write metrics", t->o.metrics_path);
    return 0;
}

static int evaluate(hps_trainer *t, hps_source *eval, hps_error *err)
{
    if (!eval) return 0; /* under mpirun only the lead holds the eval source */
    double t0 = hps_now();
    if (hps_trainer_eval(t, eval, &t->sum.eval, err)) return -1;
    t->sum.eval_seconds += hps_now() - t0;
    t->sum.have_eval = 1;
    train_metrics_eval(t);
    return 0;
}

void hps_trainer_params(hps_trainer *t, float *host, int put)
{
    size_t n = t->m->n_params * sizeof *host;
    if (put && n) t->be->upload(t->owner->params, host, n);
    else if (n) t->be->download(host, t->owner->params, n);
}

/* Before evaluating: the weights of layers other processes train (every
 * process takes part, though only the lead holds the eval source). */
static int gather_and_evaluate(hps_trainer *t, hps_source *eval, hps_error *err)
{
    if (t->hooks->gather_params(t->hooks->ctx, t, err)) return -1;
    return evaluate(t, eval, err);
}

static int finish_epoch(hps_trainer *t, hps_source *eval, hps_error *err)
{
    t->epoch++;
    t->epoch_row = 0;
    t->sum.epochs_done = (int)t->epoch;
    train_metrics_epoch(t);
    return gather_and_evaluate(t, eval, err);
}

static int train_save(hps_trainer *t, hps_error *err)
{
    return t->hooks->save(t->hooks->ctx, t, t->step, err);
}

static int after_step(hps_trainer *t, hps_source *src, hps_error *err)
{
    t->epoch_row = src->tell(src);
    train_metrics_step(t, 0);
    train_progress(t, src, 0);
    /* the test build's (make test) kill at a step; 0 in what users run */
    if (t->kill_at_step && t->step == t->kill_at_step) raise(SIGKILL);
    if (t->o.ckpt_dir && t->o.ckpt_every > 0 && t->step % (uint64_t)t->o.ckpt_every == 0)
        return train_save(t, err);
    return 0;
}

static int continue_day(hps_trainer *t, hps_error *err)
{
    if (t->hooks->continue_day) return t->hooks->continue_day(t->hooks->ctx, t, err);
    return hps_trainer_continue(t, t->o.continue_from, err);
}

static int resume(hps_trainer *t, hps_error *err)
{
    int found = 0;
    if (!t->o.ckpt_dir) return t->o.continue_from ? continue_day(t, err) : 0;
    /* without --resume, the hook only checks the directory */
    if (t->hooks->resume(t->hooks->ctx, t, &found, err)) return -1;
    /* --continue-from: a new day, unless --resume found this day's own checkpoint */
    if (t->o.continue_from && !found) return continue_day(t, err);
    if (t->o.continue_from) train_day_steps(t); /* a continued day resumed */
    if (!t->o.resume) return 0;
    if (!found) hps_log(2, "%s: %s: no checkpoint yet, starting afresh\n", hps_progname(), t->o.ckpt_dir);
    else hps_log(2, "%s: resuming at step %llu (epoch %llu, row %llu)\n", hps_progname(),
                 (unsigned long long)t->step, (unsigned long long)t->epoch + 1,
                 (unsigned long long)t->epoch_row);
    return 0;
}

/* The next batch, of which only the rows this process trains are decoded:
 * its slice of the rows due (all of them alone), which the step takes
 * again. */
static int read_batch(hps_trainer *t, hps_source *src, hps_error *err)
{
    if (!src->read_part) return src->read(src, t->batch, t->B, err);
    uint64_t left = src->rows(src) - src->tell(src);
    int due = left < (uint64_t)t->B ? (int)left : t->B, lo, hi;
    if (due == 0) return src->read(src, t->batch, t->B, err); /* the epoch's end */
    t->hooks->slice(t->hooks->ctx, due, &lo, &hi);
    int got = src->read_part(src, t->batch, t->B, lo, hi, err);
    if (got > 0 && got != due)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: %d rows read where %d were due", src->name, got, due);
    return got;
}

/* Steps between step records: the run's steps over TRAIN_CURVE_POINTS, so
 * that the curves of hps-train show have points whatever the run's length. */
#define TRAIN_CURVE_POINTS 100
static uint64_t metrics_every(const hps_trainer *t, hps_source *src)
{
    uint64_t per_epoch = (src->rows(src) + (uint64_t)t->B - 1) / (uint64_t)t->B;
    uint64_t steps = per_epoch * (uint64_t)t->o.epochs;
    if (t->o.max_steps && (uint64_t)t->o.max_steps < steps) steps = (uint64_t)t->o.max_steps;
    return steps / TRAIN_CURVE_POINTS > 1 ? steps / TRAIN_CURVE_POINTS : 1;
}

/* The manifest's distinct keys are an estimate (1.6% standard error a
 * slot): with this share of them spare, a table rarely outgrows it. */
#define PRESIZE_SPARE 0.05

/* One process's tables get a row for every key of the data (admission
 * aside, which keeps fewer): sized once for the rows they hold and the
 * data's keys, they never stop the run to rehash as they grow. */
static void presize_tables(hps_trainer *t, const hps_source *src)
{
    if (!src->slot_distinct || t->hooks != &t->local || hps_train_admits(&t->o)) return;
    for (int l = 0; l < t->m->n_layers; l++) {
        if (!t->tables[l]) continue;
        double keys = 0;
        for (int j = 0; j < t->m->layers[l].n_slots; j++) keys += src->slot_distinct[t->m->layers[l].slots[j]];
        int64_t rows = hps_table_rows(t->tables[l]) + (int64_t)keys;
        hps_table_presize(t->tables[l], rows, (int64_t)(keys * PRESIZE_SPARE));
        hps_log(3, "%s: embedding layer %d: table sized for %lld rows (%s's distinct keys)\n", hps_progname(), l,
                (long long)rows, src->name);
    }
}

/* What the tables' growth cost the run (-v): each rehash a pause. */
static void log_rehashes(const hps_trainer *t)
{
    for (int l = 0; l < t->m->n_layers; l++)
        if (t->tables[l])
            hps_log(3, "%s: embedding layer %d: %lld rows, rehashed %lld times as it grew\n", hps_progname(), l,
                    (long long)hps_table_rows(t->tables[l]), (long long)hps_table_rehashes(t->tables[l]));
}

int hps_trainer_run(hps_trainer *t, hps_source *src, hps_source *eval, hps_error *err)
{
    if (hps_source_check(src, t->m, err) || (eval && hps_source_check(eval, t->m, err)))
        return -1;
    for (int s = 0; s < t->plan->n_stages; s++)
        if (t->stage_rows[s] && t->hooks != &t->local && !t->hooks->exchange_rows)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: stage %d: rows: %s under mpirun: this hps-train keeps device rows in "
                            "one process, or as replicas of rows: hbm (plan with --rows servers)",
                            t->plan->name, s, t->plan->stages[s].rows);
    snprintf(t->data_digest, sizeof t->data_digest, "%s", src->digest ? src->digest : "");
    if (open_metrics(t, err) || resume(t, err)) return -1;
    presize_tables(t, src);
    t->t_start = t->t_last = hps_now();
    t->metrics_every = metrics_every(t, src);
    train_metrics_start(t);
    train_metrics_mark_epoch(t);
    int stop = t->o.max_steps && t->step >= (uint64_t)t->o.max_steps; /* a resume may be done */
    while (!stop && t->epoch < (uint64_t)t->o.epochs) {
        if (src->seek(src, t->epoch_row, err)) return -1;
        int got;
        double r0 = hps_now();
        while ((got = read_batch(t, src, err)) > 0) {
            t->read_s += hps_now() - r0;
            if (hps_trainer_step(t, t->batch, &t->sum.last_loss, err)) return -1;
            if (!isfinite(t->sum.last_loss)) /* nothing after it can recover */
                return hps_fail(err, HPS_EXIT_RUNTIME, "step %llu: the loss is %s: training diverged",
                                (unsigned long long)t->step, isnan(t->sum.last_loss) ? "nan" : "inf");
            if (after_step(t, src, err)) return -1;
            if (t->o.max_steps && t->step >= (uint64_t)t->o.max_steps) {
                stop = 1;
                break;
            }
            r0 = hps_now();
        }
        if (got < 0) return -1;
        if (!stop && finish_epoch(t, eval, err)) return -1;
    }
    /* --steps ended the run inside an epoch: evaluate what was trained, as
     * --eval asks, rather than nothing */
    if (stop && gather_and_evaluate(t, eval, err)) return -1;
    train_progress(t, src, 1);
    t->sum.steps = t->step;
    t->sum.samples = t->samples;
    t->sum.seconds = hps_now() - t->t_start;
    double training = t->sum.seconds - t->sum.eval_seconds; /* the rate of training alone */
    t->sum.samples_per_s = training > 0 ? t->samples_run / training : 0;
    train_metrics_summary(t);
    log_rehashes(t);
    if (t->metrics_errno)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s",
                        strcmp(t->o.metrics_path, "-") == 0 ? "<stdout>" : t->o.metrics_path,
                        strerror(t->metrics_errno));
    if (t->o.ckpt_dir && train_save(t, err)) return -1;
    return 0;
}

const hps_train_summary *hps_trainer_summary(const hps_trainer *t) { return &t->sum; }
int hps_trainer_batch(const hps_trainer *t) { return t->B; }
uint64_t hps_trainer_steps(const hps_trainer *t) { return t->step; }
const hps_backend *hps_trainer_backend(const hps_trainer *t) { return t->be; }
hps_table *hps_trainer_table(hps_trainer *t, int layer)
{
    train_rows_sync(t);
    return t->tables[layer];
}
