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
 * once every worker pushed, as before).  A cut must lie after the merge
 * layer: before it the chain has two streams (hps-model(5)). */
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "dist/dist_internal.h"

enum { TAG_NMICRO = 31, TAG_ACT, TAG_DACT };

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

/* The plan's layer ranges against the workers' stages; cuts after the merge. */
int hps_dist_check_stages(hps_dist *d, const hps_trainer *t, int eval, hps_error *err)
{
    const hps_train_plan *p = &t->plan;
    if (d->n_stages < 2) return 0;
    if (d->n_stages != p->n_stages)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: workers run %d stages, but the plan has %d",
                        hps_path_name(p->path), d->n_stages, p->n_stages);
    for (int s = 1; s < p->n_stages; s++) {
        int l = p->stages[s].first - 1;
        const hps_layer *L = &t->m->layers[l];
        if (L->kind == HPS_LAYER_EMBEDDING || (L->kind == HPS_LAYER_FC && L->on_dense))
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: stage %d starts at layer %d ('%s'), before the merge layer: "
                            "stages on different ranks must be cut after it",
                            hps_path_name(p->path), s, l + 1, t->m->layers[l + 1].name);
    }
    for (int l = p->stages[1].first; l < t->m->n_layers; l++)
        if (t->m->layers[l].kind == HPS_LAYER_EMBEDDING)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: embedding layer %d is not in stage 0",
                            hps_path_name(p->path), l);
    if (eval)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "--eval is not available with stages on different ranks in this version");
    if (d->me->kind == ROLE_WORKER) {
        d->first = p->stages[d->me->stage].first;
        d->end = p->stages[d->me->stage].end;
    }
    return 0;
}

static int width_at(const hps_trainer *t, int l) { return t->m->layers[l].out_width; }

/* Activations and labels of net's B rows, into b (host floats). */
static void pack(const hps_trainer *t, hps_net *net, int l, dist_buf *b)
{
    size_t n = (size_t)net->B * (size_t)width_at(t, l) * sizeof(float);
    b->len = 0;
    if (b->cap < n + (size_t)net->B * sizeof(float)) {
        b->cap = n + (size_t)net->B * sizeof(float) + 64;
        b->buf = hps_realloc(b->buf, b->cap);
    }
    if (n) t->be->download(b->buf, net->layers[l].out, n);
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
    int l = end - 1, W = width_at(t, l);
    int32_t nk = k;
    dist_send(d, &nk, sizeof nk, d->down_rank, TAG_NMICRO);
    grow_sbuf(d, k);
    MPI_Request reqs[HPS_DIST_MAX_MICRO];
    for (int m = 0; m < k; m++) {
        forward(nets[m], first, end);
        pack(t, nets[m], l, &d->sbuf[m]);
        dist_isend(d, d->sbuf[m].buf, d->sbuf[m].len, d->down_rank, TAG_ACT, &reqs[m]);
    }
    int rc = 0;
    for (int m = 0; m < k; m++) {
        size_t n;
        float *g = (float *)dist_recv(d->down_rank, TAG_DACT, &n, NULL, NULL);
        size_t want = (size_t)nets[m]->B * (size_t)W * sizeof(float);
        if (n != want && rc == 0)
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "rank %d sent %zu bytes of gradient, not %zu",
                          d->down_rank, n, want);
        if (rc == 0) {
            if (n) t->be->upload(nets[m]->layers[l].dout, g, n);
            backward(nets[m], first, end);
        }
        free(g);
    }
    MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
    return rc;
}

/* A later stage: each upstream partner's micro-batches, one at a time. */
static int stage_on(hps_dist *d, hps_trainer *t, int total, double *loss, hps_error *err)
{
    hps_net *net = t->nets[0];
    int l_in = d->first - 1, W = width_at(t, l_in), last = d->down_rank < 0;
    *loss = 0;
    for (int p = 0; p < d->n_up; p++) {
        size_t n;
        int32_t *nk = (int32_t *)dist_recv(d->up_rank[p], TAG_NMICRO, &n, NULL, NULL);
        int k = n == sizeof *nk ? *nk : -1;
        free(nk);
        if (k < 0 || k > HPS_DIST_MAX_MICRO)
            return hps_fail(err, HPS_EXIT_RUNTIME, "rank %d announced a bad micro-batch count",
                            d->up_rank[p]);
        for (int m = 0; m < k; m++) {
            char *msg = dist_recv(d->up_rank[p], TAG_ACT, &n, NULL, NULL);
            size_t rows = n / (((size_t)W + 1) * sizeof(float));
            if (rows * ((size_t)W + 1) * sizeof(float) != n || rows > (size_t)t->cap_micro) {
                free(msg);
                return hps_fail(err, HPS_EXIT_RUNTIME, "rank %d sent %zu bytes of activations",
                                d->up_rank[p], n);
            }
            size_t act = rows * (size_t)W * sizeof(float);
            net->B = (int)rows;
            net->loss_scale = (float)rows / (float)total;
            if (rows) {
                t->be->upload(net->layers[l_in].out, msg, act);
                t->be->upload(net->labels, msg + act, rows * sizeof(float));
            }
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
            dist_send(d, rows ? net->layers[l_in].dout : NULL, act, d->up_rank[p], TAG_DACT);
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
    if (d->me->stage > 0) {
        t->be->memzero(t->owner->grads, t->m->n_params * sizeof(float));
        *fetch_s = 0;
        return stage_on(d, t, b->B, loss, err) ? -1 : 0;
    }
    int k = train_load_micro(t, b, lo, hi, b->B, err);
    if (k < 0) return -1;
    if (k > HPS_DIST_MAX_MICRO) return hps_fail(err, HPS_EXIT_USAGE, "more than %d micro-batches", HPS_DIST_MAX_MICRO);
    *fetch_s = hps_now() - t0;
    t->be->memzero(t->owner->grads, t->m->n_params * sizeof(float));
    return exchange_down(d, t, t->nets, k, d->first, d->end, err) ? -1 : k;
}

void dist_stages_hook(hps_dist *d, hps_train_dist *h)
{
    if (d->n_stages > 1) h->compute = compute;
}

void dist_stages_free(hps_dist *d)
{
    if (d->scomm != MPI_COMM_NULL) MPI_Comm_free(&d->scomm);
    for (int m = 0; m < d->n_sbuf; m++) free(d->sbuf[m].buf);
    free(d->sbuf);
}
