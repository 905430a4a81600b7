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

static void run_layers(hps_pipeline *p, int s, int m, int backward)
{
    const hps_stage_range *r = &p->ranges[s];
    hps_net *net = p->nets[m];
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
