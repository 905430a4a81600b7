/* A server rank: owns the embedding rows routed to it (hps_dist_route),
 * answers fetches with their current values, and applies a step's sparse
 * AdaGrad update once every worker pushed its gradients for it.  It builds
 * its tables and nothing else of the model: no net, no pipeline, no data.
 * Its tables are one process's (hps_train_table_create: admission, expiry
 * by day, row-wise AdaGrad, compact rows), and a step is one load of them:
 * the workers' fetches look keys up, their pushes recall the rows, the
 * apply ends the load. */
#include <stdlib.h>
#include <string.h>

#include "core/hps_json.h"
#include "dist/dist_internal.h"

/* One worker's gradients of one layer, on this server's rows. */
typedef struct {
    int64_t n, cap;
    int64_t *rows;
    float *grad;
} part;

/* The table a request entry names, or NULL with err. */
static hps_table *entry_table(dist_server *sv, const dist_entry *e, hps_error *err)
{
    if (e->layer >= 0 && e->layer < sv->m->n_layers && sv->tables[e->layer]) return sv->tables[e->layer];
    hps_fail(err, HPS_EXIT_RUNTIME, "a request names layer %d, not a table layer whose rows this server holds",
             (int)e->layer);
    return NULL;
}

/* A key not admitted reads the zero row: it must not move during a fetch. */
static void reserve_rows(dist_server *sv, size_t count)
{
    for (int l = 0; hps_train_admits(&sv->o) && l < sv->m->n_layers; l++)
        if (sv->tables[l]) hps_table_reserve(sv->tables[l], (int64_t)count);
}

static int serve_rows(hps_dist *d, dist_server *sv, const char *msg, size_t n, int to, int peek,
                      hps_error *err)
{
    double t0 = hps_now();
    size_t count = n / sizeof(dist_entry);
    int64_t *rows = hps_malloc((count + 1) * sizeof *rows);
    size_t floats = 0;
    if (!peek) reserve_rows(sv, count);
    for (size_t i = 0; i < count; i++) {
        dist_entry e;
        memcpy(&e, msg + i * sizeof e, sizeof e);
        /* training looks each key up as one process's load does (an entry a
         * lookup: admission counts them); a peek (evaluation) creates
         * nothing, and a key never trained (-1) reads zeros */
        hps_table *tab = entry_table(sv, &e, err);
        rows[i] = !tab ? -1
                  : peek ? hps_table_find(tab, e.slot, e.key)
                         : hps_table_lookup(tab, e.slot, e.key, sv->step + 1, err);
        if (!tab || (!peek && rows[i] < 0)) {
            free(rows);
            return -1;
        }
        floats += (size_t)sv->m->layers[e.layer].dim;
    }
    /* the slabs may have moved during the lookups: copy after them */
    float *out = hps_malloc((floats + 1) * sizeof *out);
    for (size_t i = 0, at = 0; i < count; i++) {
        dist_entry e;
        memcpy(&e, msg + i * sizeof e, sizeof e);
        int D = sv->m->layers[e.layer].dim;
        hps_table *tab = sv->tables[e.layer];
        if (!peek) memcpy(out + at, hps_table_weights(tab) + rows[i] * D, (size_t)D * sizeof *out);
        else if (rows[i] >= 0) hps_table_row_values(tab, rows[i], out + at); /* compact rows widened */
        else memset(out + at, 0, (size_t)D * sizeof *out);
        at += (size_t)D;
    }
    d->st.serve_s += hps_now() - t0;
    dist_send(d, out, floats * sizeof *out, to, TAG_ROWS);
    d->st.rows_served += (double)count;
    free(out);
    free(rows);
    return 0;
}

/* A cache in front of the servers (dist_shard.c) keeps rows' whole state:
 * TAG_STATE_GET's entries get their weights then accumulators (a key not
 * yet here is created as a fetch creates it), TAG_STATE_PUT's entries, each
 * followed by those 2 x dim floats, are stored as they come: the unit
 * applied AdaGrad to them. */
static int row_state(hps_dist *d, dist_server *sv, const char *msg, size_t n, int to, int put, hps_error *err)
{
    double t0 = hps_now();
    dist_buf out = {0};
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < n;) {
        dist_entry e;
        if (at + sizeof e > n) {
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "a truncated row state message");
            break;
        }
        memcpy(&e, msg + at, sizeof e);
        at += sizeof e;
        hps_table *tab = entry_table(sv, &e, err);
        int64_t row = tab ? hps_table_lookup(tab, e.slot, e.key, sv->step + 1, err) : -1;
        if (row < 0) {
            rc = -1;
            break;
        }
        size_t D = (size_t)sv->m->layers[e.layer].dim, bytes = D * sizeof(float);
        float *w = hps_table_weights(tab) + row * (int64_t)D, *acc = hps_table_accum(tab) + row * (int64_t)D;
        if (!put) {
            dist_buf_add(&out, w, bytes), dist_buf_add(&out, acc, bytes);
            d->st.rows_served++;
            continue;
        }
        if (at + 2 * bytes > n) {
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "a truncated row state message");
            break;
        }
        memcpy(w, msg + at, bytes), memcpy(acc, msg + at + bytes, bytes);
        at += 2 * bytes;
    }
    d->st.serve_s += hps_now() - t0;
    if (rc == 0) dist_send(d, out.buf, out.len, to, TAG_ROWS);
    free(out.buf);
    return rc;
}

static void part_add(part *p, int64_t row, const float *g, int D)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 256;
        p->rows = hps_realloc(p->rows, (size_t)p->cap * sizeof *p->rows);
        p->grad = hps_realloc(p->grad, (size_t)p->cap * D * sizeof *p->grad);
    }
    p->rows[p->n] = row;
    memcpy(p->grad + p->n * D, g, (size_t)D * sizeof *g);
    p->n++;
}

/* One push: (layer, slot, key) then dim floats, entry after entry. */
static int parse_push(dist_server *sv, const char *msg, size_t n, part *parts, hps_error *err)
{
    for (size_t at = 0; at < n;) {
        dist_entry e;
        if (at + sizeof e > n) return hps_fail(err, HPS_EXIT_RUNTIME, "a truncated push");
        memcpy(&e, msg + at, sizeof e);
        hps_table *tab = entry_table(sv, &e, err);
        if (!tab) return -1;
        /* the row this step's fetch gave: the zero row (its gradient
         * dropped) for a key not admitted */
        int64_t row = hps_table_recall(tab, e.slot, e.key);
        int D = sv->m->layers[e.layer].dim;
        at += sizeof e;
        if (at + (size_t)D * sizeof(float) > n) return hps_fail(err, HPS_EXIT_RUNTIME, "a truncated push");
        float *g = hps_malloc((size_t)D * sizeof *g);
        memcpy(g, msg + at, (size_t)D * sizeof *g);
        part_add(&parts[e.layer], row, g, D);
        free(g);
        at += (size_t)D * sizeof(float);
    }
    return 0;
}

/* The tables' figures at a step's end, which the lead's request (TAG_STATS)
 * gets: another worker's fetches of the next step may reach this server
 * before the request does, and must not count in them. */
static void dist_server_snapshot(dist_server *sv)
{
    for (int l = 0; l < sv->m->n_layers; l++)
        if (sv->tables[l]) hps_table_stats_get(sv->tables[l], &sv->stats[l]);
}

static void send_stats(hps_dist *d, const dist_server *sv, int to)
{
    dist_send(d, sv->stats, (size_t)sv->m->n_layers * sizeof *sv->stats, to, TAG_STATS);
}

int dist_table_stats(void *ctx, hps_table_stats *per_layer)
{
    hps_dist *d = ctx;
    if (!hps_dist_is_lead(d) || d->servers == 0 || d->replicas || (d->shards && !d->shard_home)) return 0;
    int L = d->m->n_layers;
    for (int s = 0; s < d->servers; s++) dist_send(d, NULL, 0, d->server_rank[s], TAG_STATS);
    for (int s = 0; s < d->servers; s++) {
        size_t n;
        hps_table_stats *got = (hps_table_stats *)dist_recv(d->server_rank[s], TAG_STATS, &n, NULL, NULL);
        for (int l = 0; l < L && n == (size_t)L * sizeof *got; l++) hps_table_stats_add(&per_layer[l], &got[l]);
        free(got);
    }
    return 1;
}

/* The step: each layer's gradients summed in worker order (as the
 * micro-batches of one process are), then one AdaGrad update, as one
 * process updates its tables (hps_table_apply). */
static int apply_step(hps_dist *d, dist_server *sv, char **pushes, size_t *lens, hps_error *err)
{
    double t0 = hps_now();
    int W = d->workers, L = sv->m->n_layers, rc = 0;
    part *parts = hps_calloc((size_t)W * L, sizeof *parts);
    for (int w = 0; w < W && rc == 0; w++) rc = parse_push(sv, pushes[w], lens[w], parts + (size_t)w * L, err);
    for (int l = 0; l < L && rc == 0; l++) {
        if (!sv->tables[l]) continue;
        hps_sparse_grad views[HPS_DIST_MAX_RANKS], *src[HPS_DIST_MAX_RANKS];
        for (int w = 0; w < W; w++) {
            part *p = &parts[(size_t)w * L + l];
            views[w] = (hps_sparse_grad){.n = p->n, .cap = p->n, .D = sv->m->layers[l].dim,
                                         .rows = p->rows, .grad = p->grad};
            src[w] = &views[w];
        }
        hps_table_apply(sv->tables[l], src, W, &sv->merged[l], sv->o.optim.lr_sparse,
                        sv->o.optim.adagrad_eps);
    }
    for (size_t i = 0; i < (size_t)W * L; i++) free(parts[i].rows), free(parts[i].grad);
    free(parts);
    for (int l = 0; l < L; l++) /* the next step's fetches are a new load */
        if (sv->tables[l]) hps_table_stage_begin(sv->tables[l]);
    dist_server_snapshot(sv);
    sv->step++;
    d->st.steps++;
    d->st.apply_s += hps_now() - t0;
    return rc;
}

void dist_pack_rows(const hps_model *m, hps_table *const *tables, dist_buf *b)
{
    for (int l = 0; l < m->n_layers; l++) {
        if (!tables[l]) continue;
        int D = m->layers[l].dim;
        float *w = hps_malloc((size_t)D * sizeof *w);
        for (int64_t r = 0; r < hps_table_rows(tables[l]); r++) {
            int slot;
            uint64_t key;
            hps_table_row_key(tables[l], r, &slot, &key);
            dist_entry e = {.layer = l, .slot = slot, .key = key};
            dist_buf_add(b, &e, sizeof e);
            hps_table_row_values(tables[l], r, w); /* compact rows as fp32 */
            dist_buf_add(b, w, (size_t)D * sizeof *w);
        }
        free(w);
    }
}

/* Every row this server holds. */
static void dump_rows(hps_dist *d, dist_server *sv, int to)
{
    dist_buf b = {0};
    dist_pack_rows(sv->m, sv->tables, &b);
    dist_send(d, b.buf, b.len, to, TAG_ROWS);
    free(b.buf);
}

static int on_push(hps_dist *d, dist_server *sv, dist_server_state *s, int w, char *msg, size_t n,
                   hps_error *err)
{
    if (s->push[w]) {
        free(msg);
        return hps_fail(err, HPS_EXIT_RUNTIME, "worker %d pushed twice in one step", w);
    }
    s->push[w] = msg, s->len[w] = n;
    if (++s->pushed < d->workers) return 0;
    int rc = apply_step(d, sv, s->push, s->len, err);
    for (int i = 0; i < d->workers; i++) free(s->push[i]), s->push[i] = NULL;
    s->pushed = 0;
    for (int i = 0; rc == 0 && i < d->workers; i++) dist_send(d, NULL, 0, d->worker_rank[i], TAG_ACK);
    return rc;
}

/* The server's tables, as one process has them: one per table layer whose
 * rows the routing gives it, so that it holds what the plan sized it for
 * and a request for another layer's rows is an error (entry_table). */
void dist_server_create(dist_server *sv, const hps_dist *d, int s, const hps_model *m, const plan_file *plan,
                        const hps_train_opts *o)
{
    *sv = (dist_server){.m = m, .o = *o, .day = 1};
    snprintf(sv->plan_digest, sizeof sv->plan_digest, "%s", plan->digest);
    sv->tables = hps_calloc((size_t)m->n_layers, sizeof *sv->tables);
    sv->merged = hps_calloc((size_t)m->n_layers, sizeof *sv->merged);
    sv->stats = hps_calloc((size_t)m->n_layers, sizeof *sv->stats);
    for (int l = 0; l < m->n_layers; l++)
        if (hps_layer_has_table(&m->layers[l]) && dist_serves(d, s, l))
            sv->tables[l] = hps_train_table_create(m, l, o);
    dist_server_snapshot(sv);
}

void dist_server_free(dist_server *sv)
{
    for (int l = 0; l < sv->m->n_layers; l++) {
        hps_table_free(sv->tables[l]);
        hps_sparse_grad_free(sv->merged[l]);
    }
    free(sv->tables), free(sv->merged), free(sv->stats);
}

int dist_server_handle(hps_dist *d, dist_server *sv, dist_server_state *s, char *msg, size_t n, int from,
                       int tag, hps_error *err)
{
    int rc = 0;
    if (tag == TAG_PUSH) return on_push(d, sv, s, d->roles[from].index, msg, n, err);
    if (tag == TAG_FETCH || tag == TAG_PEEK) rc = serve_rows(d, sv, msg, n, from, tag == TAG_PEEK, err);
    else if (tag == TAG_SAVE) rc = dist_save_server(d, sv, err);
    else if (tag == TAG_DUMP) dump_rows(d, sv, from);
    else if (tag == TAG_STATS) send_stats(d, sv, from);
    else if (tag == TAG_STATE_GET || tag == TAG_STATE_PUT) rc = row_state(d, sv, msg, n, from, tag == TAG_STATE_PUT, err);
    else if (tag == TAG_DONE) s->done++;
    free(msg);
    return rc;
}

void dist_server_state_free(hps_dist *d, dist_server_state *s)
{
    for (int i = 0; i < d->workers; i++) free(s->push[i]), s->push[i] = NULL;
}

static int serve(hps_dist *d, dist_server *sv, hps_error *err)
{
    int found = 0;
    if (sv->o.resume && sv->o.ckpt_dir && dist_resume_server(d, sv, &found, err)) return -1;
    /* --continue-from: a new day, unless --resume found this day's own checkpoint */
    if (sv->o.continue_from && !found && dist_continue_server(d, sv, err)) return -1;
    dist_server_snapshot(sv); /* the day's tables as loaded */
    dist_server_state s = {0};
    int rc = 0;
    while (rc == 0 && s.done < d->workers) {
        size_t n;
        int from, tag;
        char *msg = dist_recv(MPI_ANY_SOURCE, MPI_ANY_TAG, &n, &from, &tag);
        rc = dist_server_handle(d, sv, &s, msg, n, from, tag, err);
    }
    dist_server_state_free(d, &s);
    if (rc == 0) dist_gather_stats(d, NULL, sv);
    return rc;
}

int hps_dist_serve(hps_dist *d, const hps_model *m, const plan_file *plan,
                   const hps_train_opts *o, hps_error *err)
{
    dist_server sv;
    d->m = m;
    dist_server_create(&sv, d, d->me->index, m, plan, o);
    int rc = serve(d, &sv, err);
    dist_server_free(&sv);
    return rc;
}

/* ---- the job's figures ------------------------------------------------------------- */

/* A server's rows per layer it holds ("table_rows"; -1 in held: none of
 * that layer's rows are routed to it). */
static json_t *held_json(const hps_dist *d, const double *held)
{
    json_t *o = json_object();
    for (int l = 0; l < d->m->n_layers; l++)
        if (held[l] >= 0) json_object_set_new(o, d->m->layers[l].name, json_integer((json_int_t)held[l]));
    return o;
}

static json_t *rank_json(hps_dist *d, int r, const dist_stats *st, const double *held, double seconds)
{
    char role[128];
    const dist_role *ro = &d->roles[r];
    double steps = st->steps > 0 ? st->steps : 1;
    json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:o, s:o, s:o}", "rank", r, "role",
                          ro->kind == ROLE_SERVER ? "server" : "worker", "name",
                          dist_role_name(d, r, role, sizeof role), "host", d->host[r], "bytes_sent",
                          hps_json_real(st->bytes_sent), "bytes_cross_node",
                          hps_json_real(st->bytes_cross_node),
                          "bytes_per_step", hps_json_real(st->bytes_sent / steps));
    json_object_set_new(o, "cores", json_integer((json_int_t)st->cores));
    if (ro->kind == ROLE_SERVER) {
        json_object_set_new(o, "rows_served", hps_json_real(st->rows_served));
        json_object_set_new(o, "rows_per_s", hps_json_real(seconds > 0 ? st->rows_served / seconds : 0));
        json_object_set_new(o, "serve_ms", hps_json_real(st->serve_s * 1e3 / steps));
        json_object_set_new(o, "apply_ms", hps_json_real(st->apply_s * 1e3 / steps));
        json_object_set_new(o, "table_rows", held_json(d, held));
    } else {
        json_object_set_new(o, "share", hps_json_real(d->share[ro->index]));
        json_object_set_new(o, "samples", hps_json_real(st->samples));
        json_object_set_new(o, "compute_s", hps_json_real(st->compute_s));
        json_object_set_new(o, "wait_s", hps_json_real(st->wait_s));
        json_object_set_new(o, "samples_per_s",
                            hps_json_real(st->compute_s > 0 ? st->samples / st->compute_s : 0));
        json_object_set_new(o, "fetch_ms", hps_json_real(st->fetch_s * 1e3 / steps));
        json_object_set_new(o, "push_ms", hps_json_real(st->push_s * 1e3 / steps));
    }
    return o;
}

/* 1 when every rank runs on the node the plan placed it on. */
static int placed_as_planned(const hps_dist *d)
{
    for (int r = 0; r < d->size; r++)
        if (strcmp(d->plan_node[r], d->host[r]) != 0) return 0;
    return 1;
}

/* Bytes sent to other hosts, measured per rank, beside the plan's figure. */
static void report_cross(const hps_dist *d, const dist_stats *all, double steps, double cross)
{
    char pred[96] = "the plan predicts none (no placement: cluster without nodes)";
    if (d->predicted_cross >= 0)
        snprintf(pred, sizeof pred, "the plan predicts %.0f%s", d->predicted_cross,
                 placed_as_planned(d) ? "" : " for its own placement, not this one");
    hps_log(2, "%s: bytes/step to other hosts: %.0f measured, %s\n", hps_progname(), cross, pred);
    for (int r = 0; r < d->size; r++)
        hps_log(2, "%s:   rank %d on %s: %.0f\n", hps_progname(), r, d->host[r],
                all[r].bytes_cross_node / (steps > 0 ? steps : 1));
}

static void report(hps_dist *d, hps_trainer *t, const dist_stats *all, const double *held)
{
    double seconds = hps_now() - d->t_start, total = 0, cross = 0, steps = all[d->rank].steps;
    json_t *ranks = json_array();
    for (int r = 0; r < d->size; r++) {
        json_array_append_new(ranks, rank_json(d, r, &all[r], held + (size_t)r * d->m->n_layers, seconds));
        total += all[r].bytes_sent;
        cross += all[r].bytes_cross_node;
    }
    double per_step = steps > 0 ? total / steps : 0;
    cross = steps > 0 ? cross / steps : 0;
    json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o}", "event", "dist",
                          "ranks", d->size, "workers", d->workers, "servers", d->servers,
                          "bytes_per_step", hps_json_real(per_step), "predicted_bytes_per_step",
                          d->predicted_bytes > 0 ? hps_json_real(d->predicted_bytes) : json_null(),
                          "critical_s", hps_json_real(d->critical_s), "idle_s",
                          hps_json_real(d->idle_s), "rebalance", json_boolean(d->o.rebalance),
                          "per_rank", ranks);
    json_object_set_new(o, "cross_host_bytes_per_step", hps_json_real(cross));
    json_object_set_new(o, "predicted_cross_host_bytes_per_step",
                        d->predicted_cross >= 0 ? hps_json_real(d->predicted_cross) : json_null());
    json_object_set_new(o, "placed_as_planned", json_boolean(placed_as_planned(d)));
    json_object_set_new(o, "yield_when_idle", d->yields < 0 ? json_null() : json_boolean(d->yields));
    hps_trainer_record(t, o);
    hps_log(2, "%s: %d ranks: %.0f bytes/step between ranks; slowest worker's compute %.3f s, "
               "others idle %.3f s\n", hps_progname(), d->size, per_step, d->critical_s, d->idle_s);
    report_cross(d, all, steps, cross);
    for (int w = 0; w < d->workers; w++)
        hps_log(2, "%s: worker %d (rank %d): share %.3f\n", hps_progname(), w, d->worker_rank[w],
                d->share[w]);
}

void dist_gather_stats(hps_dist *d, hps_trainer *t, const dist_server *sv)
{
    int lead = d->worker_rank[0], L = d->m->n_layers;
    dist_stats *all = hps_malloc((size_t)d->size * sizeof *all);
    MPI_Gather(&d->st, DIST_STATS_N, MPI_DOUBLE, all, DIST_STATS_N, MPI_DOUBLE, lead, MPI_COMM_WORLD);
    /* which layers' rows each server holds, and how many: what the plan
     * sized its memory for (a worker's are all -1) */
    double *mine = hps_malloc((size_t)L * sizeof *mine), *held = NULL;
    for (int l = 0; l < L; l++) mine[l] = sv && sv->tables[l] ? (double)hps_table_rows(sv->tables[l]) : -1;
    if (d->rank == lead) held = hps_malloc((size_t)d->size * L * sizeof *held);
    MPI_Gather(mine, L, MPI_DOUBLE, held, L, MPI_DOUBLE, lead, MPI_COMM_WORLD);
    if (d->rank == lead) report(d, t, all, held);
    free(all), free(mine), free(held);
}
