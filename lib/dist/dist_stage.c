/* Stages across ranks: the plan's stages run on different workers.
 *
 * The workers of stage s run the layers [first, end) of that stage, data-
 * parallel among themselves (dense gradients are summed over the stage's
 * communicator only).  Stage 0's workers slice the batch by their shares;
 * a later stage with table layers (embedding, linear) loads the slices whose
 * micro-batches reach it, for its layers' keys, and fetches and pushes their
 * rows as stage 0 does (the trainer's own code, hps_train_dist.up_slices);
 * every worker pushes only its own stage's layers.  Worker i of stage s
 * sends to worker i mod n(s+1) of the next stage.  The trainer's pipeline
 * runs this rank's stage and says what crosses the cuts (train_pipeline.h);
 * this file is its link: the boundary tensors as MPI messages, one tag per
 * kind, sent without blocking and waited for at the pipeline's flush.  The
 * step stays synchronous (the servers apply it once every worker pushed). */
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "dist/dist_internal.h"

/* a link message of kind k has tag TAG_LINK + k */
enum { TAG_LINK = 31, TAG_PARAMS = 40 };

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

/* The plan's layer ranges against the workers' stages: any cut runs, its
 * live set crossing (train_pipeline.c), table layers in any stage. */
int hps_dist_check_stages(hps_dist *d, const hps_model *m, const plan_file *p, int eval,
                          hps_error *err)
{
    d->eval = eval;
    if (d->alone) return 0; /* its one process runs every stage, beside its tables */
    if (dist_check_servers(d, m, p, err) || dist_check_device_rows(d, m, p, err)) return -1;
    if (d->n_stages < 2) return 0;
    if (d->n_stages != p->n_stages)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: workers run %d stages, but the plan has %d",
                        hps_path_name(p->path), d->n_stages, p->n_stages);
    for (int s = 0; s < p->n_stages; s++) d->range[s] = (hps_stage_range){p->stages[s].first, p->stages[s].end};
    return 0;
}

/* ---- a later stage's table layers ------------------------------------------------ */

/* Appends to w the stage 0 workers whose micro-batches reach worker sidx of
 * stage s, in the order they arrive there (partners in index order, as
 * dist_stages_place pairs them, each passing its own on in order). */
static int stage0_sources(const hps_dist *d, int s, int sidx, int *w, int n)
{
    if (s == 0) {
        w[n] = d->stage_w[0][sidx];
        return n + 1;
    }
    for (int i = 0; i < d->stage_n[s - 1]; i++)
        if (i % d->stage_n[s] == sidx) n = stage0_sources(d, s - 1, i, w, n);
    return n;
}

static int stage_has_tables(const hps_dist *d, int s)
{
    for (int l = d->range[s].first; l < d->range[s].end; l++)
        if (hps_layer_has_table(&d->m->layers[l])) return 1;
    return 0;
}

_Static_assert(HPS_TRAIN_MAX_SLICES >= HPS_DIST_MAX_RANKS, "a slice per stage 0 worker");

/* A later stage with table layers loads the slices of the stage 0 workers
 * its micro-batches come from (hps_train_dist.up_slices). */
static int up_slices_of(const hps_dist *d, int n, int *lo, int *hi)
{
    int s = d->me->stage;
    if (s == 0 || !stage_has_tables(d, s)) return 0;
    int w[HPS_DIST_MAX_RANKS], k = stage0_sources(d, s, d->sidx, w, 0);
    for (int i = 0; i < k; i++) dist_slice_of(d, w[i], n, &lo[i], &hi[i]);
    return k;
}

static int up_slices(void *ctx, int n, int *lo, int *hi) { return up_slices_of(ctx, n, lo, hi); }

int dist_stages_up_hull(const hps_dist *d, int n, int *lo, int *hi)
{
    int a[HPS_DIST_MAX_RANKS], b[HPS_DIST_MAX_RANKS];
    int k = d->n_stages > 1 ? up_slices_of(d, n, a, b) : 0;
    *lo = n, *hi = 0;
    for (int i = 0; i < k; i++)
        if (a[i] < b[i]) *lo = a[i] < *lo ? a[i] : *lo, *hi = b[i] > *hi ? b[i] : *hi;
    if (*lo >= *hi) *lo = *hi = 0;
    return k > 0;
}

/* ---- the pipeline's link ------------------------------------------------------- */

static int link_rank(const hps_dist *d, int up, int to) { return up ? d->up_rank[to] : d->down_rank; }

static int link_send(void *ctx, int up, int to, int kind, const void *p, size_t n, hps_error *err)
{
    hps_dist *d = ctx;
    (void)err;
    if (d->n_pending == d->cap_pending) {
        d->cap_pending = d->cap_pending ? 2 * d->cap_pending : 64;
        d->pending = hps_realloc(d->pending, (size_t)d->cap_pending * sizeof *d->pending);
    }
    dist_isend(d, p, n, link_rank(d, up, to), TAG_LINK + kind, &d->pending[d->n_pending++]);
    return 0;
}

static char *link_recv(void *ctx, int up, int from, int kind, size_t *n, hps_error *err)
{
    hps_dist *d = ctx;
    double t0 = hps_now();
    (void)err;
    char *msg = dist_recv(link_rank(d, up, from), TAG_LINK + kind, n, NULL, NULL);
    d->st.wait_s += hps_now() - t0;
    return msg;
}

static int link_flush(void *ctx, hps_error *err)
{
    hps_dist *d = ctx;
    double t0 = hps_now();
    (void)err;
    MPI_Waitall(d->n_pending, d->pending, MPI_STATUSES_IGNORE);
    d->n_pending = 0;
    d->st.wait_s += hps_now() - t0;
    return 0;
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

/* Before the lead evaluates or exports: it trains only its own stage's
 * layers, so the first worker of every other stage sends it that stage's
 * current weights (into the lead's copy of layers it never trains). */
int dist_stages_gather_params(hps_dist *d, float *params, size_t n_params, hps_error *err)
{
    int lead = d->worker_rank[0], lead_stage = d->roles[lead].stage;
    size_t lo, hi;
    (void)n_params;
    if (d->me->stage != lead_stage && d->sidx == 0) {
        param_range(d->m, d->range[d->me->stage].first, d->range[d->me->stage].end, &lo, &hi);
        dist_send(d, params + lo, (hi - lo) * sizeof(float), lead, TAG_PARAMS);
    }
    if (!hps_dist_is_lead(d)) return 0;
    for (int s = 0; s < d->n_stages; s++) {
        if (s == lead_stage) continue;
        int from = d->worker_rank[d->stage_w[s][0]];
        size_t n;
        char *w = dist_recv(from, TAG_PARAMS, &n, NULL, NULL);
        param_range(d->m, d->range[s].first, d->range[s].end, &lo, &hi);
        int bad = n != (hi - lo) * sizeof(float);
        if (!bad && n) memcpy(params + lo, w, n);
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
    d->link = (hps_stage_link){.ctx = d, .stage = d->me->stage, .n_up = d->n_up,
                               .down = d->down_rank >= 0, .send = link_send, .recv = link_recv,
                               .flush = link_flush};
    h->link = &d->link;
    h->stage_busy = stage_busy;
    h->up_slices = up_slices;
}

void dist_stages_free(hps_dist *d)
{
    if (d->scomm != MPI_COMM_NULL) MPI_Comm_free(&d->scomm);
    free(d->pending);
}
