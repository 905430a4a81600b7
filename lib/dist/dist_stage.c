/* Stages across ranks: the plan's stages run on different workers.
 *
 * The workers of stage s run the layers [first, end) of that stage, data-
 * parallel among themselves (dense gradients are summed over the stage's
 * communicator only).  Only stage 0 loads rows (its shares of the batch; its
 * embedding layers fetch from the servers as before).  Worker i of stage s
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

/* The last layer with a table (embedding, linear). */
static int last_table(const hps_model *m)
{
    int last = -1;
    for (int l = 0; l < m->n_layers; l++)
        if (hps_layer_has_table(&m->layers[l])) last = l;
    return last;
}

/* The plan's layer ranges against the workers' stages: every layer with a
 * table (embedding, linear) in stage 0, where the keys are loaded and the
 * rows fetched; any other cut is fine, its live set crossing
 * (train_pipeline.c).  Not a limit of the cut: a later stage's workers read
 * the batches too, but loading a table layer's keys there, fetching its rows
 * and pushing its gradients from there (and stage 0 leaving them) is not
 * written yet; in one process the stages share the rows, so any cut runs. */
int hps_dist_check_stages(hps_dist *d, const hps_model *m, const plan_file *p, int eval,
                          hps_error *err)
{
    d->eval = eval;
    if (d->alone) return 0; /* its one process runs every stage, beside its tables */
    if (dist_check_servers(d, m, hps_path_name(p->path), err)) return -1;
    if (d->n_stages < 2) return 0;
    if (d->n_stages != p->n_stages)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: workers run %d stages, but the plan has %d",
                        hps_path_name(p->path), d->n_stages, p->n_stages);
    for (int s = 1; s < p->n_stages; s++)
        for (int l = p->stages[s].first; l < p->stages[s].end; l++)
            if (hps_layer_has_table(&m->layers[l]))
                return hps_fail(err, HPS_EXIT_USAGE,
                                "%s: %s layer %d ('%s') is in stage %d: stages on different ranks "
                                "need every embedding and linear layer (they read the keys) in stage 0 "
                                "(a later stage fetches no rows yet: run this plan in one process, or cut after layer %d)",
                                hps_path_name(p->path), hps_layer_kind_names[m->layers[l].kind], l,
                                m->layers[l].name, s, last_table(m));
    for (int s = 0; s < p->n_stages; s++) d->range[s] = (hps_stage_range){p->stages[s].first, p->stages[s].end};
    return 0;
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
}

void dist_stages_free(hps_dist *d)
{
    if (d->scomm != MPI_COMM_NULL) MPI_Comm_free(&d->scomm);
    free(d->pending);
}
