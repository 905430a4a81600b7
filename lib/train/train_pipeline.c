#include "train/train_pipeline.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A stage's inbox: forward and backward micro-batch indices, FIFO each. */
typedef struct {
    int *fwd, *bwd;
    int fwd_head, fwd_tail, bwd_head, bwd_tail; /* tails grow during a run */
} inbox;

typedef struct {
    hps_pipeline *p;
    int index;
    pthread_t thread;
    inbox in;
    hps_stage_stats stats;
} stage;

struct hps_pipeline {
    hps_net **nets;
    int M, S, threads;
    hps_stage_range *ranges;
    stage *stages;
    pthread_mutex_t lock;
    pthread_cond_t wake, done_cond;
    int run_id, n_micro, done, backward, quit;
    double *layer_fwd, *layer_bwd; /* per layer, this run */
    /* with stages in other processes: the link, this step's waits, and the
     * boundary tensors in flight (one buffer per micro-batch sent down) */
    const hps_stage_link *link;
    double wait_s;
    char **sbuf, *gbuf;
    size_t *scap, gcap;
    int n_sbuf;
};

static void inbox_reset(inbox *b)
{
    b->fwd_head = b->fwd_tail = b->bwd_head = b->bwd_tail = 0;
}

/* Called with the lock held. */
static void push(hps_pipeline *p, int s, int m, int backward)
{
    inbox *b = &p->stages[s].in;
    if (backward)
        b->bwd[b->bwd_tail++] = m;
    else
        b->fwd[b->fwd_tail++] = m;
    int depth = (b->fwd_tail - b->fwd_head) + (b->bwd_tail - b->bwd_head);
    if (depth > p->stages[s].stats.max_queue) p->stages[s].stats.max_queue = depth;
    pthread_cond_broadcast(&p->wake);
}

static void run_net(hps_pipeline *p, int s, hps_net *net, int backward)
{
    const hps_stage_range *r = &p->ranges[s];
    if (!backward) {
        for (int l = r->first; l < r->end; l++) {
            double t0 = hps_now();
            hps_net_layer_forward(net, l);
            p->layer_fwd[l] += hps_now() - t0;
        }
        return;
    }
    for (int l = r->end - 1; l >= r->first; l--) {
        double t0 = hps_now();
        hps_net_layer_backward(net, l);
        p->layer_bwd[l] += hps_now() - t0;
    }
}

static void run_layers(hps_pipeline *p, int s, int m, int backward) { run_net(p, s, p->nets[m], backward); }

/* Where micro-batch m goes after stage s finished a pass; lock held. */
static void hand_on(hps_pipeline *p, int s, int m, int backward)
{
    if (!backward && !p->backward) { /* forward-only run */
        if (s + 1 < p->S) push(p, s + 1, m, 0);
        else if (++p->done == p->n_micro) pthread_cond_broadcast(&p->done_cond);
        return;
    }
    if (!backward) { /* the last stage turns m around at once (below) */
        push(p, s + 1, m, 0);
        return;
    }
    if (s > 0) push(p, s - 1, m, 1);
    else if (++p->done == p->n_micro) pthread_cond_broadcast(&p->done_cond);
}

/* Takes the next work item, backward first; -1 when told to quit. */
static int take(stage *st, int *backward)
{
    hps_pipeline *p = st->p;
    inbox *b = &st->in;
    double t0 = hps_now();
    while (!p->quit && b->bwd_head == b->bwd_tail && b->fwd_head == b->fwd_tail)
        pthread_cond_wait(&p->wake, &p->lock);
    if (p->quit) return -1;
    st->stats.idle_s += hps_now() - t0;
    *backward = b->bwd_head < b->bwd_tail;
    return *backward ? b->bwd[b->bwd_head++] : b->fwd[b->fwd_head++];
}

static void *stage_main(void *arg)
{
    stage *st = arg;
    hps_pipeline *p = st->p;
    const int last = st->index == p->S - 1;
    int threads = p->threads;
    omp_set_num_threads(threads);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        int backward, m = take(st, &backward);
        if (m < 0) break;
        if (threads != p->threads) omp_set_num_threads(threads = p->threads);
        pthread_mutex_unlock(&p->lock);
        double t0 = hps_now();
        run_layers(p, st->index, m, backward);
        if (last && !backward && p->backward) { /* the loss is here: turn around */
            run_layers(p, st->index, m, 1);
            backward = 1;
        }
        st->stats.busy_s += hps_now() - t0;
        pthread_mutex_lock(&p->lock);
        hand_on(p, st->index, m, backward);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

hps_pipeline *hps_pipeline_create(hps_net **nets, int M, const hps_stage_range *ranges, int S,
                                  int threads)
{
    hps_pipeline *p = hps_calloc(1, sizeof *p);
    int L = nets[0]->model->n_layers;
    p->nets = nets;
    p->M = M;
    p->S = S;
    p->threads = threads > 0 ? threads : 1;
    p->ranges = hps_malloc((size_t)S * sizeof *p->ranges);
    memcpy(p->ranges, ranges, (size_t)S * sizeof *p->ranges);
    p->layer_fwd = hps_calloc((size_t)L, sizeof *p->layer_fwd);
    p->layer_bwd = hps_calloc((size_t)L, sizeof *p->layer_bwd);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done_cond, NULL);
    p->stages = hps_calloc((size_t)S, sizeof *p->stages);
    for (int s = 0; s < S; s++) {
        stage *st = &p->stages[s];
        st->p = p;
        st->index = s;
        st->in.fwd = hps_malloc((size_t)M * sizeof(int));
        st->in.bwd = hps_malloc((size_t)M * sizeof(int));
        if (S > 1) HPS_CHECK(pthread_create(&st->thread, NULL, stage_main, st) == 0);
    }
    return p;
}

void hps_pipeline_free(hps_pipeline *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int s = 0; s < p->S; s++) {
        if (p->S > 1) pthread_join(p->stages[s].thread, NULL);
        free(p->stages[s].in.fwd);
        free(p->stages[s].in.bwd);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done_cond);
    for (int m = 0; m < p->n_sbuf; m++) free(p->sbuf[m]);
    free(p->sbuf), free(p->scap), free(p->gbuf);
    free(p->stages), free(p->ranges), free(p->layer_fwd), free(p->layer_bwd), free(p);
}

/* One stage needs no hand-offs: the caller runs it, and its thread pool is
 * the one that stays warm between steps. */
static void run_inline(hps_pipeline *p, int n, int backward)
{
    double t0 = hps_now();
    for (int m = 0; m < n; m++) {
        run_layers(p, 0, m, 0);
        if (backward) run_layers(p, 0, m, 1);
    }
    p->stages[0].stats.busy_s += hps_now() - t0;
}

static void run(hps_pipeline *p, int n, int backward)
{
    HPS_CHECK(n >= 1 && n <= p->M);
    int L = p->nets[0]->model->n_layers;
    memset(p->layer_fwd, 0, (size_t)L * sizeof *p->layer_fwd);
    memset(p->layer_bwd, 0, (size_t)L * sizeof *p->layer_bwd);
    if (p->S == 1) {
        run_inline(p, n, backward);
        return;
    }
    pthread_mutex_lock(&p->lock);
    for (int s = 0; s < p->S; s++) inbox_reset(&p->stages[s].in);
    p->n_micro = n;
    p->done = 0;
    p->backward = backward;
    for (int m = 0; m < n; m++) push(p, 0, m, 0);
    while (p->done < n) pthread_cond_wait(&p->done_cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

void hps_pipeline_set_threads(hps_pipeline *p, int threads)
{
    pthread_mutex_lock(&p->lock);
    p->threads = threads > 0 ? threads : 1;
    pthread_mutex_unlock(&p->lock);
}

void hps_pipeline_run(hps_pipeline *p, int n) { run(p, n, 1); }
void hps_pipeline_forward(hps_pipeline *p, int n) { run(p, n, 0); }

const hps_stage_stats *hps_pipeline_stats(const hps_pipeline *p, int s)
{
    return &p->stages[s].stats;
}

double hps_pipeline_layer_fwd(const hps_pipeline *p, int l) { return p->layer_fwd[l]; }
double hps_pipeline_layer_bwd(const hps_pipeline *p, int l) { return p->layer_bwd[l]; }

/* ---- stages in other processes ------------------------------------------------- */

/* The stage threads stay: evaluation (the lead's) still runs every stage
 * here, with the weights the other ranks trained. */
void hps_pipeline_set_link(hps_pipeline *p, const hps_stage_link *link) { p->link = link; }

/* The tensors that cross the cut before layer c, forward and back: the
 * model's live set (hps_model_cut_live), which hps-plan charges
 * (hps_model_cut_widths).  A graph: every tensor produced before c that a
 * layer at or after c reads, each in its own buffer (the dense features and
 * tensors before every parameter have no gradient).  A chain, as it always
 * ran: after the merge layer the one stream, layer c-1's output; before it
 * the pooled embeddings and the dense stream at c (the last bottom fc's
 * output, or the raw dense features).  The labels go forward besides. */
typedef struct {
    float *x, *dx;
    size_t width;
    const hps_backend *be;
} cut_part;
typedef struct {
    int n;
    cut_part *part;
    size_t act, grad; /* floats per sample forward and back */
} cut;

static void graph_cut(hps_net *net, int c, cut *k)
{
    const hps_model *m = net->model;
    int *live = hps_malloc(((size_t)c + 2) * sizeof *live);
    int n = hps_model_cut_live(m, c, live, c + 2);
    k->part = hps_malloc((size_t)n * sizeof *k->part);
    for (int i = 0; i < n; i++) {
        if (live[i] == HPS_TENSOR_LABELS) continue;
        cut_part *q = &k->part[k->n++];
        hps_net_tensor(net, live[i], &q->x, &q->dx);
        q->width = (size_t)hps_model_tensor_width(m, live[i]);
        q->be = net->be;
    }
    free(live);
}

static void chain_cut(hps_net *net, int c, cut *k)
{
    const hps_model *m = net->model;
    k->part = hps_malloc(2 * sizeof *k->part);
    if (m->merge_layer < c) {
        hps_net_layer *N = &net->layers[c - 1];
        k->part[k->n++] = (cut_part){N->out, N->dout, k->act, net->be};
        return;
    }
    /* the rule's width less the pooled embeddings is the dense stream's */
    k->part[k->n++] = (cut_part){net->h_pooled, net->h_dpooled, (size_t)net->E, net->emb_be};
    float *x = net->dense_in, *dx = NULL;
    for (int l = 0; l < c; l++)
        if (m->layers[l].kind == HPS_LAYER_FC && m->layers[l].on_dense)
            x = net->layers[l].out, dx = net->layers[l].dout;
    k->part[k->n++] = (cut_part){x, dx, k->act - (size_t)net->E, net->be};
}

/* cut_free releases it. */
static cut cut_at(hps_net *net, int c)
{
    cut k = {0};
    int act, grad;
    hps_model_cut_widths(net->model, c, &act, &grad);
    k.act = (size_t)act, k.grad = (size_t)grad;
    if (net->model->graph) graph_cut(net, c, &k);
    else chain_cut(net, c, &k);
    return k;
}

static void cut_free(cut *k) { free(k->part); }

/* B rows of the cut's activations (grad = 0) or gradients to b, or from b. */
static void cut_copy(const cut *k, int grad, int B, char *b, int out)
{
    for (int i = 0; i < k->n; i++) {
        float *dev = grad ? k->part[i].dx : k->part[i].x;
        size_t n = (size_t)B * k->part[i].width * sizeof(float);
        if (!dev || !n) continue;
        if (out) k->part[i].be->download(b, dev, n);
        else k->part[i].be->upload(dev, b, n);
        b += n;
    }
}

static char *reserve(char **buf, size_t *cap, size_t n)
{
    if (*cap < n) {
        *cap = n + 64;
        *buf = hps_realloc(*buf, *cap);
    }
    return *buf;
}

/* What a micro-batch's dropout masks are drawn from (hps_net_set_dropout):
 * it goes with the activations, so that a stage in another process masks as
 * the one process would. */
typedef struct {
    uint64_t seed;
    int64_t training;
} dropout_state;

/* Activations, labels and dropout state of net's B rows at the cut before
 * layer c, into send buffer m; its length. */
static size_t pack(hps_pipeline *p, hps_net *net, int c, int m)
{
    if (m >= p->n_sbuf) {
        p->sbuf = hps_realloc(p->sbuf, (size_t)(m + 1) * sizeof *p->sbuf);
        p->scap = hps_realloc(p->scap, (size_t)(m + 1) * sizeof *p->scap);
        for (; p->n_sbuf <= m; p->n_sbuf++) p->sbuf[p->n_sbuf] = NULL, p->scap[p->n_sbuf] = 0;
    }
    cut k = cut_at(net, c);
    size_t n = (size_t)net->B * k.act * sizeof(float), labels = (size_t)net->B * sizeof(float);
    dropout_state d = {net->dropout_seed, net->training};
    char *b = reserve(&p->sbuf[m], &p->scap[m], n + labels + sizeof d);
    cut_copy(&k, 0, net->B, b, 1);
    cut_free(&k);
    if (net->B) net->be->download(b + n, net->labels, labels);
    memcpy(b + n + labels, &d, sizeof d);
    return n + labels + sizeof d;
}

static char *timed_recv(hps_pipeline *p, int up, int from, int kind, size_t *n, hps_error *err)
{
    double t0 = hps_now();
    char *msg = p->link->recv(p->link->ctx, up, from, kind, n, err);
    p->wait_s += hps_now() - t0;
    return msg;
}

static int timed_flush(hps_pipeline *p, hps_error *err)
{
    double t0 = hps_now();
    int rc = p->link->flush(p->link->ctx, err);
    p->wait_s += hps_now() - t0;
    return rc;
}

/* Tells the next stage how many micro-batches this step sends it. */
static int send_count(hps_pipeline *p, int k, hps_error *err)
{
    int32_t nk = k;
    return p->link->send(p->link->ctx, 0, 0, HPS_LINK_COUNT, &nk, sizeof nk, err);
}

/* Sends k micro-batches of nets[0..k-1] down (their count went before),
 * forward done up to layer `end` as each goes, then runs each one's
 * backward once its gradient came back. */
static int exchange_down(hps_pipeline *p, hps_net **nets, int k, hps_error *err)
{
    const hps_stage_link *L = p->link;
    const hps_stage_range *r = &p->ranges[L->stage];
    for (int m = 0; m < k; m++) {
        run_net(p, L->stage, nets[m], 0);
        size_t n = pack(p, nets[m], r->end, m);
        if (L->send(L->ctx, 0, 0, HPS_LINK_ACT, p->sbuf[m], n, err)) return -1;
    }
    for (int m = 0; m < k; m++) {
        size_t n;
        char *g = timed_recv(p, 0, 0, HPS_LINK_GRAD, &n, err);
        if (!g) return -1;
        cut c = cut_at(nets[m], r->end);
        size_t want = (size_t)nets[m]->B * c.grad * sizeof(float);
        if (n == want) cut_copy(&c, 1, nets[m]->B, g, 0);
        cut_free(&c);
        free(g);
        if (n != want)
            return hps_fail(err, HPS_EXIT_RUNTIME, "stage %d sent %zu bytes of gradient, not %zu",
                            L->stage + 1, n, want);
        run_net(p, L->stage, nets[m], 1);
    }
    return timed_flush(p, err);
}

/* One micro-batch from the stage above into net, run through this stage
 * (and the ones below), and its gradient sent back.  loaded: net holds the
 * micro-batch's keys already (this stage has table layers), so its rows
 * must be as many as loaded. */
static int take_micro(hps_pipeline *p, hps_net *net, int loaded, int from, int total, double *loss,
                      int *rows, hps_error *err)
{
    const hps_stage_link *L = p->link;
    const hps_stage_range *r = &p->ranges[L->stage];
    int cap = loaded ? net->B : net->cap;
    size_t n;
    char *msg = timed_recv(p, 1, from, HPS_LINK_ACT, &n, err);
    if (!msg) return -1;
    cut c = cut_at(net, r->first);
    dropout_state d;
    size_t row = (c.act + 1) * sizeof(float), got = n >= sizeof d ? (n - sizeof d) / row : 0;
    if (n < sizeof d || got * row + sizeof d != n || got > (size_t)cap || (loaded && got != (size_t)cap)) {
        free(msg);
        cut_free(&c);
        return hps_fail(err, HPS_EXIT_RUNTIME, "stage %d sent %zu bytes of activations", L->stage - 1, n);
    }
    net->B = (int)got;
    net->loss_scale = (float)got / (float)total;
    cut_copy(&c, 0, net->B, msg, 0);
    if (got) net->be->upload(net->labels, msg + got * c.act * sizeof(float), got * sizeof(float));
    memcpy(&d, msg + got * row, sizeof d);
    hps_net_set_dropout(net, (int)d.training, d.seed);
    free(msg);
    *rows += (int)got;
    if (!L->down) {
        run_net(p, L->stage, net, 0);
        *loss += net->loss * (double)got / total;
        run_net(p, L->stage, net, 1);
    } else if (exchange_down(p, &net, 1, err)) { /* a middle stage passes it on */
        cut_free(&c);
        return -1;
    }
    size_t gn = got * c.grad * sizeof(float);
    reserve(&p->gbuf, &p->gcap, gn + 1);
    cut_copy(&c, 1, net->B, p->gbuf, 1);
    cut_free(&c);
    if (L->send(L->ctx, 1, from, HPS_LINK_GRAD, p->gbuf, gn, err)) return -1;
    return timed_flush(p, err);
}

/* The micro-batch counts of the partners above, into k[]; their sum. */
static int recv_counts(hps_pipeline *p, int total, int *k, hps_error *err)
{
    const hps_stage_link *L = p->link;
    int sum = 0;
    for (int from = 0; from < L->n_up; from++) {
        size_t n;
        int32_t *nk = (int32_t *)timed_recv(p, 1, from, HPS_LINK_COUNT, &n, err);
        if (!nk) return -1;
        k[from] = n == sizeof *nk ? *nk : -1;
        free(nk);
        if (k[from] < 0 || k[from] > total)
            return hps_fail(err, HPS_EXIT_RUNTIME, "stage %d announced a bad micro-batch count",
                            L->stage - 1);
        sum += k[from];
    }
    return sum;
}

/* A later stage: each partner above says how many micro-batches follow (a
 * middle stage passes their sum on before the first).  With `loaded` > 0
 * they go into nets 0..loaded-1 in the order they come, each loaded with its
 * rows' keys (else all into nets[0]). */
static int run_later(hps_pipeline *p, int loaded, int total, double *loss, int *rows, hps_error *err)
{
    const hps_stage_link *L = p->link;
    int *k = hps_malloc((size_t)L->n_up * sizeof *k), next = 0;
    int sum = recv_counts(p, total, k, err), rc = sum < 0 ? -1 : 0;
    if (rc == 0 && loaded && sum != loaded)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "stage %d sends %d micro-batches, this stage loaded %d",
                      L->stage - 1, sum, loaded);
    if (rc == 0 && L->down) rc = send_count(p, sum, err);
    for (int from = 0; rc == 0 && from < L->n_up; from++)
        for (int m = 0; rc == 0 && m < k[from]; m++)
            rc = take_micro(p, p->nets[loaded ? next++ : 0], loaded > 0, from, total, loss, rows, err);
    free(k);
    return rc;
}

int hps_pipeline_run_linked(hps_pipeline *p, int n, int total, double *loss, int *rows,
                            double *wait_s, hps_error *err)
{
    int L = p->nets[0]->model->n_layers;
    memset(p->layer_fwd, 0, (size_t)L * sizeof *p->layer_fwd);
    memset(p->layer_bwd, 0, (size_t)L * sizeof *p->layer_bwd);
    *loss = 0;
    *rows = 0;
    p->wait_s = 0;
    double t0 = hps_now();
    int rc;
    if (p->link->stage == 0) {
        HPS_CHECK(n >= 0 && n <= p->M);
        for (int m = 0; m < n; m++) *rows += p->nets[m]->B;
        rc = send_count(p, n, err) ? -1 : exchange_down(p, p->nets, n, err);
    } else {
        rc = run_later(p, n, total, loss, rows, err);
    }
    *wait_s = p->wait_s;
    p->stages[p->link->stage].stats.busy_s += hps_now() - t0 - p->wait_s;
    return rc;
}
