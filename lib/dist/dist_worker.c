/* A worker rank: the trainer's hooks (hps_train.h, hps_train_dist).
 * Each step the worker trains its slice of the batch,
 * fetches the rows it touches from their servers, sums dense gradients with
 * the other workers, pushes its sparse gradients and waits for the servers
 * to apply the step, so every step is synchronous. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hps_json.h"
#include "dist/dist_internal.h"

static hps_dist *ctx_dist(void *ctx) { return ctx; }

/* The workers that slice the batch: all, or stage 0's with stages across
 * ranks (the others get their rows from the stage before). */
static int slicers(const hps_dist *d, int *w)
{
    int n = d->n_stages > 1 ? d->stage_n[0] : d->workers;
    for (int i = 0; i < n; i++) w[i] = d->n_stages > 1 ? d->stage_w[0][i] : i;
    return n;
}

void dist_slice_of(const hps_dist *d, int worker, int n, int *lo, int *hi)
{
    int w[HPS_DIST_MAX_RANKS], nw = slicers(d, w), me = -1;
    double share[HPS_DIST_MAX_RANKS];
    for (int i = 0; i < nw; i++) {
        share[i] = d->share[w[i]];
        if (w[i] == worker) me = i;
    }
    if (me < 0) *lo = *hi = 0;
    else hps_dist_slice(share, nw, me, n, lo, hi);
}

/* A later stage with table layers reads the rows its partners above load
 * (dist_stage.c). */
static void slice(void *ctx, int n, int *lo, int *hi)
{
    hps_dist *d = ctx_dist(ctx);
    if (!dist_stages_up_hull(d, n, lo, hi)) dist_slice_of(d, d->me->index, n, lo, hi);
    d->slice_rows = *hi - *lo;
}

static void add_req_row(hps_dist *d, int s, int64_t at)
{
    if (d->n_req_rows[s] == d->cap_req_rows[s]) {
        d->cap_req_rows[s] = d->cap_req_rows[s] ? 2 * d->cap_req_rows[s] : 1024;
        d->req_rows[s] = hps_realloc(d->req_rows[s], (size_t)d->cap_req_rows[s] * sizeof **d->req_rows);
    }
    d->req_rows[s][d->n_req_rows[s]++] = at;
}

/* Requests per server: the rows routed to it, and where each one's values
 * go in out. */
static void build_requests(hps_dist *d, const hps_row_key *rows, int64_t n)
{
    for (int s = 0; s < d->servers; s++) d->req[s].len = 0, d->n_req_rows[s] = 0;
    for (int64_t i = 0, at = 0; i < n; i++) {
        int s = dist_server_of(d, rows[i].layer, rows[i].key);
        dist_buf_add(&d->req[s], &rows[i], sizeof rows[i]);
        add_req_row(d, s, at);
        at += d->m->layers[rows[i].layer].dim;
    }
}

/* One server's answer: its rows' values in the order they were asked. */
static int take_answer(hps_dist *d, int s, const float *vals, size_t n, float *out, hps_error *err)
{
    const dist_entry *e = (const dist_entry *)d->req[s].buf;
    size_t at = 0;
    for (int64_t i = 0; i < d->n_req_rows[s]; i++) {
        int D = d->m->layers[e[i].layer].dim;
        if ((at + (size_t)D) * sizeof(float) > n)
            return hps_fail(err, HPS_EXIT_RUNTIME, "server %d sent %zu bytes, too few rows", s, n);
        memcpy(out + d->req_rows[s][i], vals + at, (size_t)D * sizeof(float));
        at += (size_t)D;
    }
    return 0;
}

static int fetch_rows(void *ctx, const hps_row_key *rows, const uint32_t *lookups, int64_t n, float *out,
                      int peek, hps_error *err)
{
    hps_dist *d = ctx_dist(ctx);
    double t0 = hps_now();
    (void)lookups; /* a server's tables count the fetches, as they always have */
    build_requests(d, rows, n);
    MPI_Request reqs[HPS_DIST_MAX_RANKS];
    int n_reqs = 0, rc = 0;
    for (int s = 0; s < d->servers; s++)
        if (d->req[s].len)
            dist_isend(d, d->req[s].buf, d->req[s].len, d->server_rank[s], peek ? TAG_PEEK : TAG_FETCH,
                       &reqs[n_reqs++]);
    for (int s = 0; s < d->servers; s++) {
        if (!d->req[s].len) continue;
        size_t len;
        float *vals = (float *)dist_recv(d->server_rank[s], TAG_ROWS, &len, NULL, NULL);
        if (rc == 0) rc = take_answer(d, s, vals, len, out, err);
        free(vals);
    }
    dist_waitall(d, n_reqs, reqs);
    d->st.fetch_s += hps_now() - t0;
    return rc;
}

/* --slowdown (the test build's, make test): the rank sleeps (FACTOR - 1)
 * times its compute time.  In what users run slow_rank stays -1. */
static double slow_down(hps_dist *d, double compute_s)
{
    if (d->o.slow_rank != d->rank || d->o.slow_factor <= 1) return compute_s;
    double extra = (d->o.slow_factor - 1) * compute_s;
    struct timespec ts = {(time_t)extra, (long)((extra - floor(extra)) * 1e9)};
    nanosleep(&ts, NULL);
    return compute_s * d->o.slow_factor;
}

/* What each worker adds to a step's gather: its loss, rows and compute
 * seconds, then its shard's device rows' counts (lookups, hits, misses,
 * write_backs; zeros without one), so that the step records sum them at
 * no collective of their own (doubles: exact to 2^53). */
enum { GATHERED = 7 };

static void sum_device_rows(hps_dist *d, const double *all)
{
    uint64_t c[4] = {0};
    for (int w = 0; w < d->workers; w++)
        for (int i = 0; i < 4; i++) c[i] += (uint64_t)all[GATHERED * w + 3 + i];
    d->device_rows = (train_rows_stats){c[0], c[1], c[2], c[3]};
}

/* Dense gradients summed over the workers; the loss and the compute times
 * gathered, and the shares re-balanced from them. */
static int reduce_step(void *ctx, float *grads, size_t n, double *loss, int rows_run, double compute_s,
                     hps_error *err)
{
    hps_dist *d = ctx_dist(ctx);
    compute_s = slow_down(d, compute_s);
    double t0 = hps_now();
    int W = d->workers;
    d->slice_rows = rows_run;
    /* with stages across ranks, among the workers of this rank's stage */
    MPI_Comm gcomm = d->n_stages > 1 ? d->scomm : d->wcomm;
    int G = d->n_stages > 1 ? d->stage_n[d->me->stage] : W;
    (void)err;
    MPI_Allreduce(MPI_IN_PLACE, grads, (int)n, MPI_FLOAT, MPI_SUM, gcomm);
    /* what a ring allreduce sends from each rank, to the next in the ring
     * (the plan's model of it: plan_place.c) */
    double ring = G > 1 ? 2.0 * (G - 1) / G * (double)n * sizeof(float) : 0;
    int next = d->n_stages > 1 ? d->worker_rank[d->stage_w[d->me->stage][(d->sidx + 1) % G]]
                               : d->worker_rank[(d->me->index + 1) % W];
    d->st.bytes_sent += ring;
    if (d->node[next] != d->node[d->rank]) d->st.bytes_cross_node += ring;
    double mine[GATHERED] = {*loss, (double)d->slice_rows, compute_s}, all[GATHERED * HPS_DIST_MAX_RANKS];
    if (d->shard) {
        const train_rows_stats *x = dist_shard_mine(d);
        mine[3] = (double)x->lookups, mine[4] = (double)x->hits, mine[5] = (double)x->misses,
        mine[6] = (double)x->write_backs;
    }
    MPI_Allgather(mine, GATHERED, MPI_DOUBLE, all, GATHERED, MPI_DOUBLE, d->wcomm);
    sum_device_rows(d, all);
    d->st.wait_s += hps_now() - t0;
    d->st.compute_s += compute_s;
    d->st.samples += d->slice_rows;
    double rows[HPS_DIST_MAX_RANKS], secs[HPS_DIST_MAX_RANKS], slowest = 0;
    *loss = 0;
    for (int w = 0; w < W; w++) {
        *loss += all[GATHERED * w];
        rows[w] = all[GATHERED * w + 1], secs[w] = all[GATHERED * w + 2];
        d->last_compute[w] = secs[w];
        slowest = secs[w] > slowest ? secs[w] : slowest;
    }
    d->critical_s += slowest;
    for (int w = 0; w < W; w++) d->idle_s += slowest - secs[w];
    for (int s = 0; d->n_stages > 1 && s < d->n_stages; s++) {
        double m = 0;
        for (int i = 0; i < d->stage_n[s]; i++) m = fmax(m, secs[d->stage_w[s][i]]);
        d->stage_busy[s] += m;
    }
    if (d->o.rebalance) {
        /* among the workers that slice the batch, from compute alone:
         * counting fetches too (a slow link shows there) gained nothing in
         * bench-cluster, where the allreduce is the wait, and added the
         * servers' queueing noise */
        int w[HPS_DIST_MAX_RANKS], nw = slicers(d, w);
        double sh[HPS_DIST_MAX_RANKS], sp[HPS_DIST_MAX_RANKS], r[HPS_DIST_MAX_RANKS], sc[HPS_DIST_MAX_RANKS];
        for (int i = 0; i < nw; i++)
            sh[i] = d->share[w[i]], sp[i] = d->speed[w[i]], r[i] = rows[w[i]],
            sc[i] = secs[w[i]];
        hps_dist_rebalance(sh, sp, r, sc, nw, 0.5, 0.1 / nw);
        for (int i = 0; i < nw; i++) d->share[w[i]] = sh[i], d->speed[w[i]] = sp[i];
    }
    return 0;
}

/* The probe's one worker has nothing to sum with. */
static int loop_reduce_step(void *ctx, float *grads, size_t n, double *loss, int rows_run,
                            double compute_s, hps_error *err)
{
    (void)ctx, (void)grads, (void)n, (void)loss, (void)rows_run, (void)compute_s, (void)err;
    return 0;
}

/* A layer's gradient summed over the micro-batches, into the pushes by
 * server: (layer, slot, key) then D floats a row; step_end sends them. */
static int update_rows(void *ctx, int layer, hps_table *table, hps_sparse_grad *const *grads, int n,
                       hps_sparse_grad **sum, hps_error *err)
{
    hps_dist *d = ctx_dist(ctx);
    const hps_sparse_grad *g = hps_table_grad_sum(grads, n, d->m->layers[layer].dim, sum);
    (void)err;
    for (int64_t i = 0; i < g->n; i++) {
        int slot;
        hps_row_key row = {.layer = layer};
        hps_table_row_key(table, g->rows[i], &slot, &row.key);
        row.slot = slot;
        int s = dist_server_of(d, layer, row.key);
        dist_buf_add(&d->push[s], &row, sizeof row);
        dist_buf_add(&d->push[s], g->grad + i * g->D, (size_t)g->D * sizeof(float));
    }
    return 0;
}

/* Every server gets a push from every worker (maybe empty), applies the
 * step once it has them all, and acknowledges. */
static int step_end(void *ctx, hps_error *err)
{
    hps_dist *d = ctx_dist(ctx);
    (void)err;
    double t0 = hps_now();
    MPI_Request reqs[HPS_DIST_MAX_RANKS];
    for (int s = 0; s < d->servers; s++)
        dist_isend(d, d->push[s].buf, d->push[s].len, d->server_rank[s], TAG_PUSH, &reqs[s]);
    for (int s = 0; s < d->servers; s++) {
        size_t n;
        free(dist_recv(d->server_rank[s], TAG_ACK, &n, NULL, NULL));
    }
    dist_waitall(d, d->servers, reqs);
    for (int s = 0; s < d->servers; s++) d->push[s].len = 0;
    double waited = hps_now() - t0;
    d->st.wait_s += waited;
    d->st.push_s += waited;
    d->st.steps++;
    return 0;
}

/* The gathered parts (d->xrecv) into keys and gradients, D floats a row. */
static void unpack_parts(hps_dist *d, int W, int D, size_t entry)
{
    int64_t rows = W ? d->xend[W - 1] : 0;
    if (rows + 1 > d->cap_xrows) {
        d->cap_xrows = rows * 2 + 1;
        d->xkeys = hps_realloc(d->xkeys, (size_t)d->cap_xrows * sizeof *d->xkeys);
    }
    if ((size_t)(rows + 1) * D > d->cap_xgrad) { /* layers differ in D */
        d->cap_xgrad = (size_t)(rows * 2 + 1) * D;
        d->xgrad = hps_realloc(d->xgrad, d->cap_xgrad * sizeof *d->xgrad);
    }
    for (int64_t i = 0; i < rows; i++) {
        memcpy(&d->xkeys[i], d->xrecv + i * entry, sizeof *d->xkeys);
        memcpy(d->xgrad + i * D, d->xrecv + i * entry + sizeof *d->xkeys, (size_t)D * sizeof *d->xgrad);
    }
}

/* rows: hbm, a replica a worker of the stage: each worker's sum of a
 * layer's gradient, (layer, slot, key) then D floats a row, gathered by
 * every worker of the stage in worker order (MPI_Allgatherv: the same bytes
 * everywhere).  With stages across ranks, the stage's workers alone (scomm):
 * another stage's, which never loads the layer, exchanges its empty parts
 * among its own and holds none of these rows. */
static int exchange_rows(void *ctx, int layer, const hps_row_key *keys, const float *grad, int64_t n,
                         hps_row_grads *out, hps_error *err)
{
    hps_dist *d = ctx_dist(ctx);
    double t0 = hps_now();
    dist_group g = dist_rows_group(d);
    int D = d->m->layers[layer].dim, W = g.n;
    size_t entry = sizeof *keys + (size_t)D * sizeof *grad;
    d->xsend.len = 0;
    for (int64_t i = 0; i < n; i++) {
        dist_buf_add(&d->xsend, &keys[i], sizeof *keys);
        dist_buf_add(&d->xsend, grad + i * D, (size_t)D * sizeof *grad);
    }
    /* the sizes first, so that every worker finds the same total */
    int64_t sent = (int64_t)d->xsend.len, sizes[HPS_DIST_MAX_RANKS];
    MPI_Allgather(&sent, 1, MPI_INT64_T, sizes, 1, MPI_INT64_T, g.comm);
    int lens[HPS_DIST_MAX_RANKS], at[HPS_DIST_MAX_RANKS];
    int64_t total = 0;
    for (int w = 0; w < W; w++) {
        if (sizes[w] < 0 || (size_t)sizes[w] % entry)
            return hps_fail(err, HPS_EXIT_RUNTIME, "worker %d sends %lld bytes of layer %d's gradient, not whole rows",
                            w, (long long)sizes[w], layer);
        at[w] = (int)total;
        lens[w] = (int)sizes[w];
        total += sizes[w];
        if (total > INT_MAX)
            return hps_fail(err, HPS_EXIT_RUNTIME,
                            "embedding layer %d: the replicas' gradients of a step are %lld bytes or more, too "
                            "many to exchange at once (at most %d)",
                            layer, (long long)total, INT_MAX);
        d->xend[w] = total / (int64_t)entry;
    }
    int mine = (int)sent;
    if ((size_t)total + 1 > d->cap_xrecv) {
        d->cap_xrecv = (size_t)total * 2 + 1;
        d->xrecv = hps_realloc(d->xrecv, d->cap_xrecv);
    }
    MPI_Allgatherv(d->xsend.buf, mine, MPI_BYTE, d->xrecv, lens, at, MPI_BYTE, g.comm);
    unpack_parts(d, W, D, entry);
    *out = (hps_row_grads){.parts = W, .end = d->xend, .keys = d->xkeys, .grad = d->xgrad};
    /* this worker's part reaches every other worker of the stage */
    for (int i = 0; i < W; i++) {
        int w = dist_group_worker(&g, i);
        if (w == d->me->index) continue;
        d->st.bytes_sent += mine;
        if (d->node[d->worker_rank[w]] != d->node[d->rank]) d->st.bytes_cross_node += mine;
    }
    double waited = hps_now() - t0;
    d->st.wait_s += waited;
    d->st.push_s += waited;
    return 0;
}

static json_t *metrics(void *ctx)
{
    hps_dist *d = ctx_dist(ctx);
    json_t *shares = json_array(), *ms = json_array();
    for (int w = 0; w < d->workers; w++) {
        json_array_append_new(shares, hps_json_real(d->share[w]));
        json_array_append_new(ms, hps_json_real(d->last_compute[w] * 1e3));
    }
    json_t *o = json_pack("{s:o, s:o, s:o, s:o}", "shares", shares, "compute_ms", ms, "critical_s",
                          hps_json_real(d->critical_s), "idle_s", hps_json_real(d->idle_s));
    /* rows: hbm in shards: the rows the lead's own shard holds */
    if (d->shards) {
        const train_rows_stats *x = &d->device_rows;
        json_object_set_new(o, "shard_rows", json_integer((json_int_t)dist_shard_rows(d)));
        /* every unit's device rows, as the last step's gather summed them (a
         * step's staged rows are written back after it) or a record since:
         * a unit's read of a row for a unit is a lookup */
        json_object_set_new(o, "device_rows",
                            json_pack("{s:o, s:I, s:I, s:I, s:I}", "capacity",
                                      d->shard_capacity == INT64_MAX ? json_null()
                                                                     : json_integer((json_int_t)d->shard_capacity),
                                      "lookups", (json_int_t)x->lookups, "hits", (json_int_t)x->hits, "misses",
                                      (json_int_t)x->misses, "write_backs", (json_int_t)x->write_backs));
    }
    return o;
}

/* The trainer's rows_totals: every worker's counts summed per stage (all
 * call it at the same records), a shard's added to its stage's; it is
 * exact, so the step records take it too until the next step's gather. */
static void rows_totals(void *ctx, uint64_t *counts, int n_stages)
{
    hps_dist *d = ctx_dist(ctx);
    if (d->shard && d->shard_stage < n_stages) {
        const train_rows_stats *x = dist_shard_mine(d);
        uint64_t *c = counts + 4 * d->shard_stage;
        c[0] += x->lookups, c[1] += x->hits, c[2] += x->misses, c[3] += x->write_backs;
    }
    MPI_Allreduce(MPI_IN_PLACE, counts, 4 * n_stages, MPI_UINT64_T, MPI_SUM, d->wcomm);
    if (d->shard && d->shard_stage < n_stages) {
        const uint64_t *c = counts + 4 * d->shard_stage;
        d->device_rows = (train_rows_stats){c[0], c[1], c[2], c[3]};
    }
}

/* The other stages' weights, through host memory (all workers call it). */
static int gather_stage_params(hps_dist *d, hps_trainer *t, hps_error *err)
{
    float *host = hps_malloc((d->m->n_params + 1) * sizeof *host);
    hps_trainer_params(t, host, 0);
    int rc = dist_stages_gather_params(d, host, d->m->n_params, err);
    if (rc == 0 && hps_dist_is_lead(d)) hps_trainer_params(t, host, 1);
    free(host);
    return rc;
}

/* Before the lead evaluates (--eval): with stages across ranks it trains
 * only its own stage's layers. */
static int gather_params(void *ctx, hps_trainer *t, hps_error *err)
{
    hps_dist *d = ctx_dist(ctx);
    if (!d->eval) return 0;
    if (d->n_stages > 1 && gather_stage_params(d, t, err)) return -1;
    return d->shards ? dist_shard_gather_eval(d, err) : 0;
}

void hps_dist_attach(hps_dist *d, hps_trainer *t, const hps_model *m, const hps_train_opts *o)
{
    if (d->alone) return; /* the trainer's own hooks are one process's */
    d->m = m;
    d->ckpt_dir = o->ckpt_dir;
    d->continue_from = o->continue_from;
    d->resume = o->resume;
    d->req = hps_calloc((size_t)d->servers, sizeof *d->req);
    d->push = hps_calloc((size_t)d->servers, sizeof *d->push);
    d->req_rows = hps_calloc((size_t)d->servers, sizeof *d->req_rows);
    d->n_req_rows = hps_calloc((size_t)d->servers, sizeof *d->n_req_rows);
    d->cap_req_rows = hps_calloc((size_t)d->servers, sizeof *d->cap_req_rows);
    d->hooks = (hps_train_dist){.ctx = d, .slice = slice, .fetch_rows = fetch_rows,
                                .update_rows = update_rows, .step_end = step_end,
                                .reduce_step = d->loop ? loop_reduce_step : reduce_step,
                                .save = dist_save, .resume = dist_resume, .continue_day = dist_continue,
                                .gather_params = gather_params, .metrics = metrics,
                                .table_stats = dist_table_stats, .rows_totals = d->loop ? NULL : rows_totals,
                                .exchange_rows = d->replicas ? exchange_rows : NULL,
                                .remote_rows = !d->replicas, .in_process = 0};
    dist_stages_hook(d, &d->hooks);
    if (d->shards) dist_shard_create(d, t, o), dist_shard_hook(d, &d->hooks);
    hps_trainer_set_dist(t, &d->hooks);
}

static int take_entries(hps_dist *d, hps_trainer *t, hps_table **tables, const char *msg, size_t n,
                        hps_error *err)
{
    for (size_t at = 0; at < n;) {
        dist_entry e;
        if (at + sizeof e > n) return hps_fail(err, HPS_EXIT_RUNTIME, "a truncated row dump");
        memcpy(&e, msg + at, sizeof e);
        at += sizeof e;
        hps_table *tab = e.layer >= 0 && e.layer < d->m->n_layers ? tables[e.layer] : NULL;
        if (!tab) return hps_fail(err, HPS_EXIT_RUNTIME, "a row dump names layer %d", (int)e.layer);
        int D = d->m->layers[e.layer].dim;
        if (at + (size_t)D * sizeof(float) > n) return hps_fail(err, HPS_EXIT_RUNTIME, "a truncated row dump");
        /* stamped as the step after training's last, as a lookup then would be */
        int64_t row = hps_table_lookup(tab, e.slot, e.key, hps_trainer_summary(t)->steps + 1, err);
        if (row < 0) return -1;
        memcpy(hps_table_weights(tab) + row * D, msg + at, (size_t)D * sizeof(float));
        at += (size_t)D * sizeof(float);
    }
    return 0;
}

/* One server's rows into the lead's tables (which then hold the model). */
static int take_rows(hps_dist *d, hps_trainer *t, const char *msg, size_t n, hps_error *err)
{
    /* each layer's table once: taking it copies the device's rows back */
    hps_table **tables = hps_malloc((size_t)d->m->n_layers * sizeof *tables);
    for (int l = 0; l < d->m->n_layers; l++) tables[l] = hps_trainer_table(t, l);
    int rc = take_entries(d, t, tables, msg, n, err);
    free(tables);
    return rc;
}

/* rows: hbm: the lead's replica is the model's rows.  The test build's
 * HPS_TRAIN_EXPORT_REPLICA=W (make test) has the lead take worker W's
 * instead, so that a test compares the replicas' exports. */
static int take_replica(hps_dist *d, hps_trainer *t, hps_error *err)
{
    int from = 0;
#ifdef HPS_TEST_HOOKS
    const char *w = getenv("HPS_TRAIN_EXPORT_REPLICA");
    from = w ? atoi(w) : 0;
    if (from < 0 || from >= d->workers) from = 0;
#endif
    if (from == 0) return 0;
    if (d->me->index == from) {
        hps_table **tables = hps_calloc((size_t)d->m->n_layers, sizeof *tables);
        for (int l = 0; l < d->m->n_layers; l++)
            if (hps_layer_has_table(&d->m->layers[l])) tables[l] = hps_trainer_table(t, l);
        dist_buf b = {0};
        dist_pack_rows(d->m, tables, &b);
        dist_send(d, b.buf, b.len, d->worker_rank[0], TAG_ROWS);
        free(b.buf), free(tables);
    }
    if (!hps_dist_is_lead(d)) return 0;
    size_t n;
    char *rows = dist_recv(d->worker_rank[from], TAG_ROWS, &n, NULL, NULL);
    int rc = take_rows(d, t, rows, n, err);
    free(rows);
    if (rc == 0) hps_trainer_tables_written(t); /* the export reads the device's rows */
    return rc;
}

/* rows: hbm in shards: every worker's into the lead's tables. */
static int take_shards(hps_dist *d, hps_trainer *t, hps_error *err)
{
    size_t n;
    char *rows = dist_shard_gather(d, &n);
    int rc = hps_dist_is_lead(d) ? take_rows(d, t, rows, n, err) : 0;
    free(rows);
    return rc;
}

int hps_dist_gather_model(hps_dist *d, hps_trainer *t, hps_error *err)
{
    if (d->n_stages > 1 && gather_stage_params(d, t, err)) return -1;
    if (d->replicas) return take_replica(d, t, err);
    if (d->shards && !d->shard_home) return take_shards(d, t, err);
    /* a cache in front of the servers: they hold every row once it is written back */
    if (d->shard_home && dist_shard_write_back(d, err)) return -1;
    if (!hps_dist_is_lead(d)) return 0;
    /* the lead's tables mapped every key its loads saw; the model's rows
     * are the servers' (admission leaves keys without one) */
    for (int l = 0; d->servers > 0 && l < d->m->n_layers; l++)
        if (hps_layer_has_table(&d->m->layers[l])) hps_table_clear(hps_trainer_table(t, l));
    for (int s = 0; s < d->servers; s++) {
        dist_send(d, NULL, 0, d->server_rank[s], TAG_DUMP);
        size_t n;
        char *rows = dist_recv(d->server_rank[s], TAG_ROWS, &n, NULL, NULL);
        int rc = take_rows(d, t, rows, n, err);
        free(rows);
        if (rc) return -1;
    }
    return 0;
}

int hps_dist_finish(hps_dist *d, hps_trainer *t, hps_error *err)
{
    (void)err;
    if (d->alone) return 0; /* no servers to tell, no job's figures to gather */
    for (int s = 0; s < d->servers; s++) dist_send(d, NULL, 0, d->server_rank[s], TAG_DONE);
    dist_gather_stats(d, t, NULL);
    return 0;
}
