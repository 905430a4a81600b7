/* Stages across ranks: the plan's stages run on different workers.
 *
 * The workers of stage s run the layers [first, end) of that stage, data-
 * parallel among themselves (dense gradients are summed over the stage's
 * communicator only).  Only stage 0 loads rows (its shares of the batch; its
 * embedding layers fetch from the servers as before).  Worker i of stage s
 * sends to worker i mod n(s+1) of the next stage; per step it first sends
 * how many micro-batches follow, then each micro-batch's boundary activations
 * (the output of layer first(s+1) - 1) with the labels behind them, and gets
 * the gradient of those activations back.  Stage 0 sends all its micro-
 * batches forward before it waits for the first gradient, so the next stage
 * works on micro-batch m while stage 0 computes m + 1.  A later stage takes
 * its upstream partners in rank order and their micro-batches in order, so a
 * run is deterministic; the step stays synchronous (the servers apply it
 * once every worker pushed, as before).  A cut before the merge layer sends
 * both of the chain's streams there (hps-model(5)): the pooled embeddings and
 * the dense stream, and gets both gradients back (the raw dense features have
 * none). */
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "dist/dist_internal.h"

enum { TAG_NMICRO = 31, TAG_ACT, TAG_DACT, TAG_PARAMS };

int hps_dist_stages(const hps_dist *d) { return d->n_stages; }

/* From the roles: stages 0 .. S-1 each with a worker, indices within them. */
int dist_stages_setup(hps_dist *d, const char *plan_name, hps_error *err)
{
    int S = 0;
    for (int w = 0; w < d->workers; w++) {
        int s = d->roles[d->worker_rank[w]].stage;
        S = s + 1 > S ? s + 1 : S;
    }
    d->n_stages = S;
    for (int w = 0; w < d->workers; w++) {
        dist_role *r = &d->roles[d->worker_rank[w]];
        d->stage_w[r->stage][d->stage_n[r->stage]++] = w;
    }
    for (int s = 0; s < S; s++)
        if (!d->stage_n[s])
            return hps_fail(err, HPS_EXIT_USAGE, "%s: no worker runs stage %d (workers[].stage)",
                            plan_name, s);
    if (S < 2) return 0;
    /* shares count within a stage: only stage 0's slice the batch */
    for (int s = 0; s < S; s++) {
        double total = 0;
        for (int i = 0; i < d->stage_n[s]; i++) total += d->share[d->stage_w[s][i]];
        for (int i = 0; i < d->stage_n[s]; i++)
            d->share[d->stage_w[s][i]] = total > 0 ? d->share[d->stage_w[s][i]] / total
                                                   : 1.0 / d->stage_n[s];
    }
    return 0;
}

/* After the roles: this rank's place among the stages (all ranks call it:
 * the stage communicators are split from the world). */
void dist_stages_place(hps_dist *d)
{
    d->scomm = MPI_COMM_NULL;
    d->down_rank = -1;
    if (d->n_stages < 2) return;
    int s = d->me->kind == ROLE_WORKER ? d->me->stage : -1;
    MPI_Comm_split(MPI_COMM_WORLD, s < 0 ? MPI_UNDEFINED : s, d->rank, &d->scomm);
    if (s < 0) return;
    for (int i = 0; i < d->stage_n[s]; i++)
        if (d->stage_w[s][i] == d->me->index) d->sidx = i;
    if (s + 1 < d->n_stages)
        d->down_rank = d->worker_rank[d->stage_w[s + 1][d->sidx % d->stage_n[s + 1]]];
    if (s > 0)
        for (int i = 0; i < d->stage_n[s - 1]; i++)
            if (i % d->stage_n[s] == d->sidx) d->up_rank[d->n_up++] = d->worker_rank[d->stage_w[s - 1][i]];
}

/* The plan's layer ranges against the workers' stages: every embedding layer
 * in stage 0, where the rows are loaded and fetched. */
int hps_dist_check_stages(hps_dist *d, const hps_trainer *t, int eval, hps_error *err)
{
    const hps_train_plan *p = &t->plan;
    d->eval = eval;
    if (d->n_stages < 2) return 0;
    if (d->n_stages != p->n_stages)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: workers run %d stages, but the plan has %d",
                        hps_path_name(p->path), d->n_stages, p->n_stages);
    for (int s = 1; s < p->n_stages; s++)
        for (int l = p->stages[s].first; l < p->stages[s].end; l++)
            if (t->m->layers[l].kind == HPS_LAYER_EMBEDDING)
                return hps_fail(err, HPS_EXIT_USAGE,
                                "%s: embedding layer %d ('%s') is in stage %d: stages on "
                                "different ranks need every embedding layer in stage 0",
                                hps_path_name(p->path), l, t->m->layers[l].name, s);
    if (d->me->kind == ROLE_WORKER) {
        d->first = p->stages[d->me->stage].first;
        d->end = p->stages[d->me->stage].end;
    }
    return 0;
}

/* What crosses the cut before layer c, per sample.  After the merge layer:
 * the one stream, layer c-1's output.  Before it: the pooled embeddings and
 * the dense stream at c (the last bottom fc's output, or the raw dense
 * features, which have no gradient). */
typedef struct {
    float *x, *dx;
    size_t width;
    const hps_backend *be;
} cut_part;
typedef struct {
    int n;
    cut_part part[2];
} cut;

static cut cut_at(hps_net *net, int c)
{
    const hps_model *m = net->model;
    cut k = {0};
    /* the model's rule (hps_model_cut_widths), which hps-plan charges */
    if (m->merge_layer < c) {
        hps_net_layer *N = &net->layers[c - 1];
        k.part[k.n++] = (cut_part){N->out, N->dout, (size_t)m->layers[c - 1].out_width, net->be};
        return k;
    }
    k.part[k.n++] = (cut_part){net->h_pooled, net->h_dpooled, (size_t)net->E, net->emb_be};
    float *x = net->dense_in, *dx = NULL;
    size_t w = (size_t)m->n_dense;
    for (int l = 0; l < c; l++)
        if (m->layers[l].kind == HPS_LAYER_FC && m->layers[l].on_dense)
            x = net->layers[l].out, dx = net->layers[l].dout, w = (size_t)m->layers[l].out_width;
    k.part[k.n++] = (cut_part){x, dx, w, net->be};
    return k;
}

/* Floats per sample of the activations (grad = 0) or of their gradient. */
static size_t cut_width(const cut *k, int grad)
{
    size_t w = 0;
    for (int i = 0; i < k->n; i++) w += grad && !k->part[i].dx ? 0 : k->part[i].width;
    return w;
}

/* B rows of the cut's activations (grad = 0) or gradients to b, or from p. */
static void cut_download(const cut *k, int grad, int B, char *b)
{
    for (int i = 0; i < k->n; i++) {
        float *src = grad ? k->part[i].dx : k->part[i].x;
        size_t n = (size_t)B * k->part[i].width * sizeof(float);
        if (!src || !n) continue;
        k->part[i].be->download(b, src, n);
        b += n;
    }
}

static void cut_upload(const cut *k, int grad, int B, const char *p)
{
    for (int i = 0; i < k->n; i++) {
        float *dst = grad ? k->part[i].dx : k->part[i].x;
        size_t n = (size_t)B * k->part[i].width * sizeof(float);
        if (!dst || !n) continue;
        k->part[i].be->upload(dst, p, n);
        p += n;
    }
}

static void buf_reserve(dist_buf *b, size_t n)
{
    if (b->cap < n) {
        b->cap = n + 64;
        b->buf = hps_realloc(b->buf, b->cap);
    }
}

/* Activations and labels of net's B rows at the cut before layer c, into b. */
static void pack(const hps_trainer *t, hps_net *net, int c, dist_buf *b)
{
    cut k = cut_at(net, c);
    size_t n = (size_t)net->B * cut_width(&k, 0) * sizeof(float);
    buf_reserve(b, n + (size_t)net->B * sizeof(float));
    cut_download(&k, 0, net->B, b->buf);
    if (net->B) t->be->download(b->buf + n, net->labels, (size_t)net->B * sizeof(float));
    b->len = n + (size_t)net->B * sizeof(float);
}

static void grow_sbuf(hps_dist *d, int k)
{
    if (k <= d->n_sbuf) return;
    d->sbuf = hps_realloc(d->sbuf, (size_t)k * sizeof *d->sbuf);
    memset(d->sbuf + d->n_sbuf, 0, (size_t)(k - d->n_sbuf) * sizeof *d->sbuf);
    d->n_sbuf = k;
}

static void forward(hps_net *net, int first, int end)
{
    for (int l = first; l < end; l++) hps_net_layer_forward(net, l);
}
static void backward(hps_net *net, int first, int end)
{
    for (int l = end - 1; l >= first; l--) hps_net_layer_backward(net, l);
}

/* Sends k micro-batches of nets[0..k-1] (forward done up to `end`) down,
 * then runs each one's backward once its gradient came back. */
static int exchange_down(hps_dist *d, hps_trainer *t, hps_net **nets, int k, int first, int end,
                         hps_error *err)
{
    int32_t nk = k;
    dist_send(d, &nk, sizeof nk, d->down_rank, TAG_NMICRO);
    grow_sbuf(d, k);
    MPI_Request reqs[HPS_DIST_MAX_MICRO];
    for (int m = 0; m < k; m++) {
        forward(nets[m], first, end);
        pack(t, nets[m], end, &d->sbuf[m]);
        dist_isend(d, d->sbuf[m].buf, d->sbuf[m].len, d->down_rank, TAG_ACT, &reqs[m]);
    }
    int rc = 0;
    for (int m = 0; m < k; m++) {
        size_t n;
        double w0 = hps_now();
        char *g = dist_recv(d->down_rank, TAG_DACT, &n, NULL, NULL);
        d->xwait += hps_now() - w0;
        cut c = cut_at(nets[m], end);
        size_t want = (size_t)nets[m]->B * cut_width(&c, 1) * sizeof(float);
        if (n != want && rc == 0)
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "rank %d sent %zu bytes of gradient, not %zu",
                          d->down_rank, n, want);
        if (rc == 0) {
            cut_upload(&c, 1, nets[m]->B, g);
            backward(nets[m], first, end);
        }
        free(g);
    }
    double w0 = hps_now();
    MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
    d->xwait += hps_now() - w0;
    return rc;
}

/* A later stage: each upstream partner's micro-batches, one at a time. */
static int stage_on(hps_dist *d, hps_trainer *t, int total, double *loss, hps_error *err)
{
    hps_net *net = t->nets[0];
    cut c = cut_at(net, d->first);
    size_t W = cut_width(&c, 0), Wg = cut_width(&c, 1);
    int last = d->down_rank < 0;
    *loss = 0;
    d->slice_rows = 0;
    for (int p = 0; p < d->n_up; p++) {
        size_t n;
        double w0 = hps_now();
        int32_t *nk = (int32_t *)dist_recv(d->up_rank[p], TAG_NMICRO, &n, NULL, NULL);
        d->xwait += hps_now() - w0;
        int k = n == sizeof *nk ? *nk : -1;
        free(nk);
        if (k < 0 || k > HPS_DIST_MAX_MICRO)
            return hps_fail(err, HPS_EXIT_RUNTIME, "rank %d announced a bad micro-batch count",
                            d->up_rank[p]);
        for (int m = 0; m < k; m++) {
            w0 = hps_now();
            char *msg = dist_recv(d->up_rank[p], TAG_ACT, &n, NULL, NULL);
            d->xwait += hps_now() - w0;
            size_t rows = n / ((W + 1) * sizeof(float));
            if (rows * (W + 1) * sizeof(float) != n || rows > (size_t)t->cap_micro) {
                free(msg);
                return hps_fail(err, HPS_EXIT_RUNTIME, "rank %d sent %zu bytes of activations",
                                d->up_rank[p], n);
            }
            size_t act = rows * W * sizeof(float);
            d->slice_rows += (int)rows;
            net->B = (int)rows;
            net->loss_scale = (float)rows / (float)total;
            cut_upload(&c, 0, net->B, msg);
            if (rows) t->be->upload(net->labels, msg + act, rows * sizeof(float));
            free(msg);
            if (last) {
                forward(net, d->first, d->end);
                *loss += net->loss * (double)rows / total;
                backward(net, d->first, d->end);
            } else {
                /* a middle stage passes it on and waits for its gradient */
                int rc = exchange_down(d, t, &net, 1, d->first, d->end, err);
                if (rc) return rc;
            }
            buf_reserve(&d->gbuf, rows * Wg * sizeof(float));
            cut_download(&c, 1, net->B, d->gbuf.buf);
            w0 = hps_now();
            dist_send(d, d->gbuf.buf, rows * Wg * sizeof(float), d->up_rank[p], TAG_DACT);
            d->xwait += hps_now() - w0;
        }
    }
    return 0;
}

/* The compute hook (train_internal.h). */
static int compute(void *ctx, hps_trainer *t, const hps_batch *b, int lo, int hi, double *loss,
                   double *fetch_s, hps_error *err)
{
    hps_dist *d = ctx;
    double t0 = hps_now();
    *loss = 0;
    d->xwait = 0; /* not compute: neither the rebalancing nor the stage times count it */
    if (d->me->stage > 0) {
        t->be->memzero(t->owner->grads, t->m->n_params * sizeof(float));
        int rc = stage_on(d, t, b->B, loss, err);
        *fetch_s = d->xwait;
        d->st.wait_s += d->xwait;
        return rc ? -1 : 0;
    }
    int k = train_load_micro(t, b, lo, hi, b->B, err);
    if (k < 0) return -1;
    if (k > HPS_DIST_MAX_MICRO) return hps_fail(err, HPS_EXIT_USAGE, "more than %d micro-batches", HPS_DIST_MAX_MICRO);
    *fetch_s = hps_now() - t0;
    t->be->memzero(t->owner->grads, t->m->n_params * sizeof(float));
    int rc = exchange_down(d, t, t->nets, k, d->first, d->end, err);
    *fetch_s += d->xwait;
    d->st.wait_s += d->xwait;
    return rc ? -1 : k;
}

/* The dense parameters of layers [first, end): one contiguous range. */
static void param_range(const hps_model *m, int first, int end, size_t *lo, size_t *hi)
{
    *lo = *hi = 0;
    for (int l = first; l < end; l++) {
        const hps_layer *L = &m->layers[l];
        if (!L->n_params) continue;
        if (*hi == *lo) *lo = L->param_offset;
        *hi = L->param_offset + L->n_params;
    }
}

/* The before_eval hook: the lead evaluates the whole chain but trains only
 * its own stage's layers, so the first worker of every other stage sends it
 * that stage's current weights (into the lead's copy of layers it never
 * trains). */
static int gather_weights(void *ctx, hps_trainer *t, hps_error *err)
{
    return dist_stages_gather_weights(ctx, t, err);
}

int dist_stages_gather_weights(hps_dist *d, hps_trainer *t, hps_error *err)
{
    const hps_train_plan *p = &t->plan;
    int lead = d->worker_rank[0], lead_stage = d->roles[lead].stage;
    size_t lo, hi;
    if (d->me->stage != lead_stage && d->sidx == 0) {
        param_range(t->m, d->first, d->end, &lo, &hi);
        size_t n = (hi - lo) * sizeof(float);
        buf_reserve(&d->gbuf, n);
        if (n) t->be->download(d->gbuf.buf, t->owner->params + lo, n);
        dist_send(d, d->gbuf.buf, n, lead, TAG_PARAMS);
    }
    if (!hps_dist_is_lead(d)) return 0;
    for (int s = 0; s < d->n_stages; s++) {
        if (s == lead_stage) continue;
        int from = d->worker_rank[d->stage_w[s][0]];
        size_t n;
        char *w = dist_recv(from, TAG_PARAMS, &n, NULL, NULL);
        param_range(t->m, p->stages[s].first, p->stages[s].end, &lo, &hi);
        int bad = n != (hi - lo) * sizeof(float);
        if (!bad && n) t->be->upload(t->owner->params + lo, w, n);
        free(w);
        if (bad)
            return hps_fail(err, HPS_EXIT_RUNTIME, "rank %d sent %zu bytes of stage %d's weights",
                            from, n, s);
    }
    return 0;
}

static double stage_busy(void *ctx, int s)
{
    hps_dist *d = ctx;
    return s < d->n_stages ? d->stage_busy[s] : 0;
}

void dist_stages_hook(hps_dist *d, hps_train_dist *h)
{
    if (d->n_stages < 2) return;
    h->compute = compute;
    h->stage_busy = stage_busy;
    if (d->eval) h->before_eval = gather_weights;
}

void dist_stages_free(hps_dist *d)
{
    if (d->scomm != MPI_COMM_NULL) MPI_Comm_free(&d->scomm);
    for (int m = 0; m < d->n_sbuf; m++) free(d->sbuf[m].buf);
    free(d->sbuf);
    free(d->gbuf.buf);
}
