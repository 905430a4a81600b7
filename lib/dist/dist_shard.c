/* rows: hbm sharded over a stage's units (hps-train(1) ROWS, several units).
 *
 * Each worker owns the rows hps_dist_route(key, workers) gives it (the
 * plan's routing rule, as servers own theirs), in its backend's memory: a
 * train_rows over tables of its own, which map its keys to rows as a
 * server's do.  Its trainer's tables only map the keys its loads touch and
 * stage a step's values (remote_rows), as with servers.  Each step:
 *   - fetch_rows: the keys a worker's load touched go to their owners, each
 *     with the load's number of lookups of it, and the rows' values come
 *     back (an all-to-all each way): an owner counts a worker's lookups of
 *     its rows as one process counts its own (train_rows_read), so the
 *     units' counts and a cache's order are those of the lookups, not of
 *     the reads;
 *   - update_rows: each layer's gradient, summed over the worker's
 *     micro-batches, goes to the owners by key (an all-to-all), and each
 *     owner sums the workers' parts in worker order and applies AdaGrad
 *     (train_rows_apply_parts): the floats hbm replicas add, so a sharded
 *     run follows a replicated one bit for bit.
 * Only the lead evaluates: before it does, every shard's rows are gathered
 * into a copy it reads (a key no shard holds reads zeros, as in one
 * process).  An export gathers them into the lead's tables; a checkpoint
 * keeps each worker's shard in its own rank's directory.
 *
 * rows: cache in front of the plan's servers (shard_home): the same
 * shards, each unit's cache keeping its hottest rows, but the rows it does
 * not cache live on the servers, each on the one dist_server_of(layer, key)
 * gives it as with rows: servers.  A miss gets the row's whole
 * state from its server (TAG_STATE_GET), a write-back puts it there
 * (TAG_STATE_PUT, acknowledged), and the servers apply nothing: the owner
 * unit applies AdaGrad to its cached rows as a shard does.  Only the owner
 * ever moves a key, so the servers hold each row as the unit last wrote
 * it: the run is a cache over shards' bit for bit.  Evaluation, --export
 * and checkpoints read the servers after every unit wrote back its cache
 * (dist_shard_write_back).  The unit's host tables still map its keys and
 * carry rows between the device and the servers. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dist/dist_internal.h"

struct dist_shard {
    const hps_model *m; /* freed before the shard: n_layers is kept */
    int n_layers;
    hps_train_opts o;
    hps_table **tables, **seen; /* per layer: this worker's shard; the lead's copy of all of them */
    train_rows *rows;           /* the shard in the backend's memory */
    uint64_t step;              /* the step being trained, as the trainer stamps lookups */
    int (*step_end)(void *ctx, hps_error *err); /* a worker's own */
    int (*fetch_rows)(void *ctx, const hps_row_key *rows, const uint32_t *lookups, int64_t n, float *out, int peek,
                      hps_error *err);
    dist_buf *to_server;        /* shard_home: per server, a state message */
    int64_t **sent, *n_sent, *cap_sent; /* per server: the host rows of its message, in order */
    int home_rc;                /* the first failure of a get or put, kept in home_err */
    hps_error home_err;
    dist_buf *out;              /* per worker: what goes to it */
    int64_t **asked, *n_asked, *cap_asked; /* per owner: the index of each key asked of it */
    int64_t ends[HPS_DIST_MAX_RANKS], part_end[HPS_DIST_MAX_RANKS];
    char *in;
    size_t cap_in;
    hps_row_key *keys;
    uint32_t *lookups; /* per key asked of this unit: the asking worker's lookups of it */
    float *vals;
    int64_t cap_keys, cap_lookups, cap_vals;
};

/* A key asked of its owner: the key, then the asking load's lookups of it. */
#define ASK_BYTES (sizeof(hps_row_key) + sizeof(uint32_t))

static void *grow(void *p, int64_t *cap, int64_t need, size_t size)
{
    if (need <= *cap) return p;
    *cap = need * 2 + 16;
    return hps_realloc(p, (size_t)*cap * size);
}

static hps_table **shard_tables(const hps_model *m, const hps_train_opts *o)
{
    hps_table **tables = hps_calloc((size_t)m->n_layers, sizeof *tables);
    for (int l = 0; l < m->n_layers; l++)
        if (hps_layer_has_table(&m->layers[l])) {
            tables[l] = hps_table_create(l, m->layers[l].dim, o->max_table_bytes, o->table_policy, o->seed);
            if (o->rowwise_adagrad) hps_table_set_rowwise(tables[l]);
        }
    return tables;
}

static void tables_free(int n_layers, hps_table **tables)
{
    for (int l = 0; tables && l < n_layers; l++) hps_table_free(tables[l]);
    free(tables);
}

/* ---- the servers as the cache's home (shard_home) ------------------------------ */

/* n host rows of layer l into per-server messages: each row's entry, with
 * its 2 x D floats of state for a put. */
static void home_requests(hps_dist *d, dist_shard *s, hps_table *host, int l, const int64_t *rows, int64_t n,
                          int put)
{
    int D = s->m->layers[l].dim;
    for (int v = 0; v < d->servers; v++) s->to_server[v].len = 0, s->n_sent[v] = 0;
    for (int64_t i = 0; i < n; i++) {
        int slot;
        dist_entry e = {.layer = l};
        hps_table_row_key(host, rows[i], &slot, &e.key);
        e.slot = slot;
        int v = dist_server_of(d, l, e.key);
        dist_buf_add(&s->to_server[v], &e, sizeof e);
        if (put) {
            dist_buf_add(&s->to_server[v], hps_table_weights(host) + rows[i] * D, (size_t)D * sizeof(float));
            dist_buf_add(&s->to_server[v], hps_table_accum(host) + rows[i] * D, (size_t)D * sizeof(float));
        }
        s->sent[v] = grow(s->sent[v], &s->cap_sent[v], s->n_sent[v] + 1, sizeof **s->sent);
        s->sent[v][s->n_sent[v]++] = rows[i];
    }
}

/* The messages sent, each server's answer taken: a get's state into the
 * host rows, a put's empty acknowledgement (the rows are stored when it
 * comes, so a later save or dump by any rank finds them). */
static void home_exchange(hps_dist *d, dist_shard *s, hps_table *host, int l, int put)
{
    int D = s->m->layers[l].dim;
    size_t row_bytes = 2 * (size_t)D * sizeof(float);
    for (int v = 0; v < d->servers; v++) {
        if (!s->n_sent[v]) continue;
        dist_send(d, s->to_server[v].buf, s->to_server[v].len, d->server_rank[v], put ? TAG_STATE_PUT : TAG_STATE_GET);
        size_t n;
        char *got = dist_recv(d->server_rank[v], TAG_ROWS, &n, NULL, NULL);
        if (n != (put ? 0 : (size_t)s->n_sent[v] * row_bytes)) {
            if (!s->home_rc)
                s->home_rc = hps_fail(&s->home_err, HPS_EXIT_RUNTIME,
                                      "server %d answered %zu bytes for %lld rows of layer %d's state", v, n,
                                      (long long)s->n_sent[v], l);
        } else if (!put) {
            for (int64_t i = 0; i < s->n_sent[v]; i++) {
                memcpy(hps_table_weights(host) + s->sent[v][i] * D, got + i * row_bytes, row_bytes / 2);
                memcpy(hps_table_accum(host) + s->sent[v][i] * D, got + i * row_bytes + row_bytes / 2,
                       row_bytes / 2);
            }
        }
        free(got);
    }
}

static void home_get(void *ctx, hps_table *host, int l, const int64_t *rows, int64_t n)
{
    hps_dist *d = ctx;
    home_requests(d, d->shard, host, l, rows, n, 0);
    home_exchange(d, d->shard, host, l, 0);
}

static void home_put(void *ctx, hps_table *host, int l, const int64_t *rows, int64_t n)
{
    hps_dist *d = ctx;
    home_requests(d, d->shard, host, l, rows, n, 1);
    home_exchange(d, d->shard, host, l, 1);
}

static void shard_home_create(hps_dist *d, dist_shard *s)
{
    s->to_server = hps_calloc((size_t)d->servers, sizeof *s->to_server);
    s->sent = hps_calloc((size_t)d->servers, sizeof *s->sent);
    s->n_sent = hps_calloc((size_t)d->servers, sizeof *s->n_sent);
    s->cap_sent = hps_calloc((size_t)d->servers, sizeof *s->cap_sent);
    train_rows_set_home(s->rows, &(train_rows_home){.ctx = d, .get = home_get, .put = home_put});
}

/* A get or put that failed since the last check: its error. */
static int home_failed(dist_shard *s, hps_error *err)
{
    if (!s->home_rc) return 0;
    if (err) *err = s->home_err;
    return -1;
}

int dist_shard_write_back(hps_dist *d, hps_error *err)
{
    train_rows_flush(d->shard->rows);
    int ok = home_failed(d->shard, err) == 0, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, d->wcomm);
    if (ok && !all) return hps_fail(err, HPS_EXIT_RUNTIME, "another worker could not write its cache back to the servers");
    return ok ? 0 : -1;
}

void dist_shard_create(hps_dist *d, hps_trainer *t, const hps_train_opts *o)
{
    dist_shard *s = hps_calloc(1, sizeof *s);
    s->m = d->m, s->n_layers = d->m->n_layers, s->o = *o, s->step = 1;
    s->tables = shard_tables(d->m, o);
    s->rows = train_rows_create(hps_trainer_backend(t), d->m, s->tables, 0, d->m->n_layers, d->shard_capacity);
    s->out = hps_calloc((size_t)d->workers, sizeof *s->out);
    s->asked = hps_calloc((size_t)d->workers, sizeof *s->asked);
    s->n_asked = hps_calloc((size_t)d->workers, sizeof *s->n_asked);
    s->cap_asked = hps_calloc((size_t)d->workers, sizeof *s->cap_asked);
    d->shard = s;
    if (d->shard_home) shard_home_create(d, s);
}

void dist_shard_free(hps_dist *d)
{
    dist_shard *s = d->shard;
    if (!s) return;
    train_rows_free(s->rows);
    tables_free(s->n_layers, s->tables), tables_free(s->n_layers, s->seen);
    for (int w = 0; w < d->workers; w++) free(s->out[w].buf), free(s->asked[w]);
    free(s->out), free(s->asked), free(s->n_asked), free(s->cap_asked);
    free(s->in), free(s->keys), free(s->lookups), free(s->vals);
    for (int v = 0; s->to_server && v < d->servers; v++) free(s->to_server[v].buf), free(s->sent[v]);
    free(s->to_server), free(s->sent), free(s->n_sent), free(s->cap_sent);
    free(s);
    d->shard = NULL;
}

static int dim_of(const dist_shard *s, const hps_row_key *k) { return s->m->layers[k->layer].dim; }

/* ---- a load's rows ------------------------------------------------------------- */

/* The lead evaluating alone: every row from the copy gathered before. */
static void peek_rows(dist_shard *s, const hps_row_key *rows, int64_t n, float *out)
{
    HPS_CHECK(s->seen);
    for (int64_t i = 0; i < n; i++) {
        int D = dim_of(s, &rows[i]);
        int64_t r = hps_table_find(s->seen[rows[i].layer], rows[i].slot, rows[i].key);
        if (r >= 0) memcpy(out, hps_table_weights(s->seen[rows[i].layer]) + r * D, (size_t)D * sizeof *out);
        else memset(out, 0, (size_t)D * sizeof *out);
        out += D;
    }
}

/* The keys asked of this worker (s->in, parts in worker order) into s->keys
 * and their lookups into s->lookups; their values, read from the shard in
 * that order, into s->out by asking worker. */
static int answer(hps_dist *d, dist_shard *s, hps_error *err)
{
    int W = dist_rows_group(d).n;
    int64_t n = s->ends[W - 1] / (int64_t)ASK_BYTES;
    s->keys = grow(s->keys, &s->cap_keys, n + 1, sizeof *s->keys);
    s->lookups = grow(s->lookups, &s->cap_lookups, n + 1, sizeof *s->lookups);
    for (int64_t i = 0; i < n; i++) {
        memcpy(&s->keys[i], s->in + i * ASK_BYTES, sizeof *s->keys);
        memcpy(&s->lookups[i], s->in + i * ASK_BYTES + sizeof *s->keys, sizeof *s->lookups);
    }
    int64_t floats = 0;
    for (int64_t i = 0; i < n; i++) floats += dim_of(s, &s->keys[i]);
    s->vals = grow(s->vals, &s->cap_vals, floats + 1, sizeof *s->vals);
    if (train_rows_read(s->rows, s->keys, s->lookups, n, s->step, s->vals, err) || home_failed(s, err)) return -1;
    const char *at = (const char *)s->vals;
    int64_t i = 0;
    for (int w = 0; w < W; w++) {
        size_t bytes = 0;
        for (int64_t e = s->ends[w] / (int64_t)ASK_BYTES; i < e; i++)
            bytes += (size_t)dim_of(s, &s->keys[i]) * sizeof(float);
        s->out[w].len = 0;
        dist_buf_add(&s->out[w], at, bytes);
        at += bytes;
    }
    return 0;
}

static void ask(dist_shard *s, int w, int64_t i)
{
    s->asked[w] = grow(s->asked[w], &s->cap_asked[w], s->n_asked[w] + 1, sizeof **s->asked);
    s->asked[w][s->n_asked[w]++] = i;
}

static int shard_fetch(void *ctx, const hps_row_key *rows, const uint32_t *lookups, int64_t n, float *out, int peek,
                       hps_error *err)
{
    hps_dist *d = ctx;
    dist_shard *s = d->shard;
    if (peek && d->shard_home) return s->fetch_rows(ctx, rows, lookups, n, out, peek, err); /* the servers' rows */
    if (peek) {
        peek_rows(s, rows, n, out);
        return 0;
    }
    double t0 = hps_now();
    int W = dist_rows_group(d).n;
    int64_t *at = hps_malloc((size_t)(n + 1) * sizeof *at), floats = 0;
    for (int w = 0; w < W; w++) s->out[w].len = 0, s->n_asked[w] = 0;
    for (int64_t i = 0; i < n; i++) {
        int w = hps_dist_route(rows[i].key, W);
        dist_buf_add(&s->out[w], &rows[i], sizeof rows[i]);
        dist_buf_add(&s->out[w], &lookups[i], sizeof lookups[i]);
        ask(s, w, i);
        at[i] = floats, floats += dim_of(s, &rows[i]);
    }
    int rc = dist_alltoall(d, s->out, &s->in, &s->cap_in, s->ends, err) || answer(d, s, err) ||
             dist_alltoall(d, s->out, &s->in, &s->cap_in, s->ends, err);
    /* owner w's values: the keys asked of it, in the order asked */
    for (int w = 0; rc == 0 && w < W; w++) {
        const char *v = s->in + (w ? s->ends[w - 1] : 0);
        for (int64_t j = 0; j < s->n_asked[w]; j++) {
            int64_t i = s->asked[w][j];
            size_t bytes = (size_t)dim_of(s, &rows[i]) * sizeof(float);
            memcpy(out + at[i], v, bytes);
            v += bytes;
        }
    }
    free(at);
    d->st.fetch_s += hps_now() - t0;
    return rc ? -1 : 0;
}

/* ---- a step's gradients ---------------------------------------------------------- */

static int shard_update(void *ctx, int layer, hps_table *table, hps_sparse_grad *const *grads, int n,
                        hps_sparse_grad **sum, hps_error *err)
{
    hps_dist *d = ctx;
    dist_shard *s = d->shard;
    double t0 = hps_now();
    int D = d->m->layers[layer].dim, W = dist_rows_group(d).n;
    const hps_sparse_grad *g = hps_table_grad_sum(grads, n, D, sum);
    for (int w = 0; w < W; w++) s->out[w].len = 0;
    for (int64_t i = 0; i < g->n; i++) {
        int slot;
        hps_row_key k = {.layer = layer};
        hps_table_row_key(table, g->rows[i], &slot, &k.key);
        k.slot = slot;
        dist_buf *b = &s->out[hps_dist_route(k.key, W)];
        dist_buf_add(b, &k, sizeof k);
        dist_buf_add(b, g->grad + i * D, (size_t)D * sizeof *g->grad);
    }
    if (dist_alltoall(d, s->out, &s->in, &s->cap_in, s->ends, err)) return -1;
    size_t entry = sizeof *s->keys + (size_t)D * sizeof(float);
    int64_t total = s->ends[W - 1] / (int64_t)entry;
    s->keys = grow(s->keys, &s->cap_keys, total + 1, sizeof *s->keys);
    s->vals = grow(s->vals, &s->cap_vals, (total + 1) * D, sizeof *s->vals);
    for (int64_t i = 0; i < total; i++) {
        memcpy(&s->keys[i], s->in + i * entry, sizeof *s->keys);
        memcpy(s->vals + i * D, s->in + i * entry + sizeof *s->keys, (size_t)D * sizeof *s->vals);
    }
    for (int w = 0; w < W; w++) s->part_end[w] = s->ends[w] / (int64_t)entry;
    hps_row_grads all = {.parts = W, .end = s->part_end, .keys = s->keys, .grad = s->vals};
    int rc = train_rows_apply_parts(s->rows, layer, &all, s->step, s->o.optim.lr_sparse, s->o.optim.adagrad_eps,
                                    err);
    double waited = hps_now() - t0;
    d->st.wait_s += waited, d->st.push_s += waited;
    return rc;
}

/* The step ends as a worker's does (its counts); the next stamps anew. */
static int shard_step_end(void *ctx, hps_error *err)
{
    hps_dist *d = ctx;
    dist_shard *s = d->shard;
    double t0 = hps_now();
    train_rows_step_end(s->rows, 1); /* rows staged past a full cache written back */
    d->st.push_s += hps_now() - t0;  /* to the servers, with a cache in front of them */
    if (home_failed(s, err)) return -1;
    s->step++;
    return s->step_end(ctx, err);
}

/* ---- checkpoints ------------------------------------------------------------------- */

/* DIR/rank-R/shard: this worker's shard, beside its own checkpoint. */
static int shard_dir(const hps_dist *d, char *dir, size_t n, hps_error *err)
{
    const char *base = d->shard->o.ckpt_dir;
    snprintf(dir, n, "%s/rank-%d", base, d->rank);
    if ((mkdir(base, 0755) && errno != EEXIST) || (mkdir(dir, 0755) && errno != EEXIST))
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot create: %s", dir, strerror(errno));
    snprintf(dir, n, "%s/rank-%d/shard", base, d->rank);
    return 0;
}

static int shard_save(void *ctx, hps_trainer *t, uint64_t step, hps_error *err)
{
    hps_dist *d = ctx;
    char dir[4200];
    /* with servers behind the cache, they save the rows: written back first */
    if (!d->shard_home) train_rows_flush(d->shard->rows);
    else if (dist_shard_write_back(d, err)) return -1;
    if (shard_dir(d, dir, sizeof dir, err) ||
        hps_tables_save(d->m, d->shard->tables, d->plan_digest, step, d->shard->o.seed, hps_trainer_day(t), dir,
                        err))
        return -1;
    return dist_save(ctx, t, step, err);
}

static int shard_resume(void *ctx, hps_trainer *t, int *found, hps_error *err)
{
    hps_dist *d = ctx;
    if (dist_resume(ctx, t, found, err)) return -1;
    if (!d->resume || !*found) return 0;
    char dir[4200], path[4400];
    uint64_t step = hps_trainer_steps(t), got, day;
    if (shard_dir(d, dir, sizeof dir, err)) return -1;
    snprintf(path, sizeof path, "%s/ckpt-%012llu.hpsckpt", dir, (unsigned long long)step);
    if (hps_tables_load_file(d->m, d->shard->tables, d->plan_digest, d->shard->o.seed, path, 0, &got, &day, err))
        return -1;
    d->shard->step = step + 1;
    return 0;
}

/* A next day (--continue-from): the dense state as every worker's, then this
 * unit's shard of the day before (its rank-R/shard/ beside the committed
 * checkpoint), which takes its next day as one process's tables do.  Without
 * it the shards would start the day empty. */
static int shard_continue(void *ctx, hps_trainer *t, hps_error *err)
{
    hps_dist *d = ctx;
    char dense[4300], path[4400];
    uint64_t step, day;
    if (dist_continue(ctx, t, err) || dist_day_file(d, d->continue_from, dense, sizeof dense, err)) return -1;
    const char *name = strrchr(dense, '/');
    snprintf(path, sizeof path, "%.*s/shard%s", (int)(name - dense), dense, name);
    if (hps_tables_load_file(d->m, d->shard->tables, d->plan_digest, d->shard->o.seed, path, 1, &step, &day, err))
        return -1;
    hps_tables_next_day(d->m, d->shard->tables, day + 1, d->shard->o.expire_after_days, 0);
    d->shard->step = hps_trainer_steps(t) + 1;
    return 0;
}

void dist_shard_hook(hps_dist *d, hps_train_dist *h)
{
    d->shard->step_end = h->step_end, d->shard->fetch_rows = h->fetch_rows;
    h->fetch_rows = shard_fetch, h->update_rows = shard_update, h->step_end = shard_step_end;
    h->save = shard_save, h->resume = shard_resume, h->continue_day = shard_continue;
    h->remote_rows = 1, h->exchange_rows = NULL;
}

int64_t dist_shard_rows(const hps_dist *d)
{
    int64_t n = 0;
    for (int l = 0; l < d->m->n_layers; l++)
        if (d->shard->tables[l]) n += hps_table_rows(d->shard->tables[l]);
    return n;
}

const train_rows_stats *dist_shard_mine(const hps_dist *d) { return train_rows_stats_of(d->shard->rows); }

/* ---- every shard at the lead --------------------------------------------------------- */

/* MPI counts are ints: a unit's shard passes 2 GiB with tables that a cache
 * or shards exist for, so each unit's bytes go to the lead in pieces. */
static int64_t gather_piece(void)
{
    int64_t piece = (int64_t)1 << 30;
#ifdef HPS_TEST_HOOKS /* the test build's HPS_TRAIN_GATHER_PIECE=N: pieces of N bytes */
    const char *e = getenv("HPS_TRAIN_GATHER_PIECE");
    if (e && atoll(e) > 0) piece = atoll(e);
#endif
    return piece;
}

char *dist_shard_gather(hps_dist *d, size_t *n)
{
    dist_shard *s = d->shard;
    dist_buf b = {0};
    train_rows_flush(s->rows);
    dist_pack_rows(d->m, s->tables, &b);
    int64_t mine = (int64_t)b.len, lens[HPS_DIST_MAX_RANKS], piece = gather_piece();
    MPI_Gather(&mine, 1, MPI_INT64_T, lens, 1, MPI_INT64_T, 0, d->wcomm);
    char *all = NULL;
    int64_t total = 0;
    if (hps_dist_is_lead(d)) {
        for (int w = 0; w < d->workers; w++) total += lens[w];
        all = hps_malloc((size_t)total + 1);
        if (mine) memcpy(all, b.buf, (size_t)mine);
        int64_t at = lens[0];
        for (int w = 1; w < d->workers; at += lens[w], w++)
            for (int64_t off = 0; off < lens[w]; off += piece) {
                int len = (int)(lens[w] - off < piece ? lens[w] - off : piece);
                MPI_Recv(all + at + off, len, MPI_BYTE, w, 0, d->wcomm, MPI_STATUS_IGNORE);
            }
    } else {
        for (int64_t off = 0; off < mine; off += piece) {
            int len = (int)(mine - off < piece ? mine - off : piece);
            MPI_Send(b.buf + off, len, MPI_BYTE, 0, 0, d->wcomm);
        }
        d->st.bytes_sent += (double)mine;
    }
    free(b.buf);
    *n = (size_t)total;
    return all;
}

int dist_shard_gather_eval(hps_dist *d, hps_error *err)
{
    dist_shard *s = d->shard;
    if (d->shard_home) return dist_shard_write_back(d, err); /* the lead peeks at the servers */
    size_t n;
    char *all = dist_shard_gather(d, &n);
    if (!hps_dist_is_lead(d)) return 0;
    /* unlimited: the lead's copy holds every unit's rows */
    hps_train_opts o = s->o;
    o.max_table_bytes = 0;
    tables_free(s->n_layers, s->seen);
    s->seen = shard_tables(s->m, &o);
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < n;) {
        dist_entry e;
        memcpy(&e, all + at, sizeof e);
        int D = s->m->layers[e.layer].dim;
        int64_t r = hps_table_lookup(s->seen[e.layer], e.slot, e.key, s->step, err);
        if (r < 0) rc = -1;
        else memcpy(hps_table_weights(s->seen[e.layer]) + r * D, all + at + sizeof e, (size_t)D * sizeof(float));
        at += sizeof e + (size_t)D * sizeof(float);
    }
    free(all);
    return rc;
}
