/* Beyond the assignment: parameter servers, worker shares, and where each rank
 * runs.  Ranks: the workers first, stage by stage (one per unit), then the
 * servers: those of their own type, then those beside a stage's units, one
 * on each unit's host, stage by stage. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hps_io.h"
#include "plan/hps_plan.h"

static void make_workers(const plan_problem *p, const plan_eval *e, plan_layout *out)
{
    out->n_workers = 0;
    for (int s = 0; s < e->n_stages; s++) out->n_workers += e->stages[s].units;
    out->workers = hps_calloc((size_t)out->n_workers, sizeof *out->workers);
    /* Only the first stage reads the data set; its workers take shares in
     * proportion to their predicted speed (equal within a stage). */
    double readers_speed = e->stages[0].throughput;
    int rank = 0, filled[PLAN_MAX_TYPES] = {0};
    for (int s = 0; s < e->n_stages; s++) {
        const plan_stage *st = &e->stages[s];
        for (int k = 0; k < st->units; k++, rank++) {
            plan_worker *w = &out->workers[rank];
            w->rank = rank;
            w->stage = s;
            w->type = st->type;
            w->batch_share = 1.0 / st->units;
            w->share = s == 0 ? (st->throughput / st->units) / readers_speed : 0;
            w->node = w->slot = -1;
            /* a type's instances fill in rank order: a stage takes what
             * the one before it on the type left free (they share it) */
            w->instance = filled[st->type]++ / p->units_per_instance[st->type];
        }
    }
}

/* The servers the stages' rows need (plan_stage_servers, and one beside
 * each unit of a stage whose servers live there): those of their own
 * first, stage by stage, then those beside, stage by stage, the order
 * hps-train takes them in to route each stage's tables over its own. */
static void make_servers(const plan_problem *p, const plan_eval *e, plan_layout *out)
{
    double steps_per_s = e->throughput / p->batch, bytes = 0;
    for (int s = 0; s < e->n_stages; s++) bytes += e->stages[s].law.server_bytes;
    out->server_bytes_per_s = bytes * steps_per_s;
    out->n_servers = e->servers + e->coloc_servers;
    out->servers = hps_calloc((size_t)out->n_servers + 1, sizeof *out->servers);
    /* on the servers' type, after its workers (sharing their last
     * instance where the type has several units an instance) */
    int t = p->server_type, k = t >= 0 ? p->units_per_instance[t] : 1, after = t >= 0 ? e->units[t] : 0;
    for (int i = 0; i < out->n_servers; i++) {
        out->servers[i].rank = out->n_workers + i;
        out->servers[i].node = out->servers[i].slot = -1;
        out->servers[i].instance = t >= 0 ? (after + i) / k : -1;
        out->servers[i].worker = -1;
    }
    for (int s = 0, i = 0; s < e->n_stages; s++)
        for (int a = 0; a < e->stages[s].servers; a++) out->servers[i++].stage = s;
    /* beside a stage's units: on the host of each, in its instance */
    for (int s = 0, w = 0, i = e->servers; s < e->n_stages; w += e->stages[s++].units)
        for (int a = 0; e->stages[s].coloc && a < e->stages[s].units; a++, i++) {
            out->servers[i].worker = w + a;
            out->servers[i].instance = out->workers[w + a].instance;
            out->servers[i].stage = s;
        }
}

/* A server beside a unit goes where that unit's worker goes. */
static void servers_beside(const plan_layout *l, const int *wnode, int *snode)
{
    for (int v = 0; v < l->n_servers; v++)
        if (l->servers[v].worker >= 0) snode[v] = wnode[l->servers[v].worker];
}

/* Predicted bytes per step that cross nodes, for a given placement. */
static double cross_bytes(const plan_problem *p, const plan_eval *e, const plan_layout *l,
                          const int *wnode, const int *snode)
{
    double total = 0;
    int base = 0;
    for (int s = 0; s < e->n_stages; s++) {
        const plan_stage *st = &e->stages[s];
        int k = st->units;
        /* activations to the next stage and gradients back, spread over all pairs */
        if (s + 1 < e->n_stages) {
            int k2 = e->stages[s + 1].units, split = 0;
            for (int a = 0; a < k; a++)
                for (int b = 0; b < k2; b++) split += wnode[base + a] != wnode[base + k + b];
            total += p->cut_bytes[st->end] * split / ((double)k * k2);
        }
        /* ring allreduce: each worker sends 2 (k - 1) / k P to the next */
        double P = p->pre_param[st->end] - p->pre_param[st->first];
        for (int a = 0; k > 1 && a < k; a++)
            if (wnode[base + a] != wnode[base + (a + 1) % k]) total += 2.0 * (k - 1) / k * P;
        /* hbm replicas: each sends its slice's rows, 1 / k of them, to every other */
        for (int a = 0; k > 1 && a < k; a++)
            for (int b = 0; b < k; b++)
                if (b != a && wnode[base + a] != wnode[base + b]) total += st->law.replica_bytes / k;
        /* rows pulled and gradients pushed (none where HBM holds them),
         * spread evenly over the stage's own servers */
        double E = st->law.server_bytes;
        int mine = 0;
        for (int v = 0; v < l->n_servers; v++) mine += l->servers[v].stage == s;
        for (int a = 0; E > 0 && a < k; a++)
            for (int v = 0; v < l->n_servers; v++)
                if (l->servers[v].stage == s && wnode[base + a] != snode[v]) total += E / k / mine;
        base += k;
    }
    return total;
}

/* A server takes a unit of the servers' type on node `want`, else on the
 * next node with one; -1 when none is left.  Clusters without a CPU type
 * have no such units: servers then share the nodes' slots. */
static int take_server_unit(const hps_cluster *c, int *free_units, int want)
{
    int t = c->server_type;
    if (t < 0) return want;
    for (int i = 0; i < c->n_nodes; i++) {
        int n = (want + i) % c->n_nodes;
        if (free_units[n * PLAN_MAX_TYPES + t] > 0) {
            free_units[n * PLAN_MAX_TYPES + t]--;
            return n;
        }
    }
    return -1;
}

/* Round robin: each rank on the next node (cyclically) with a free unit of its type. */
static int place_round_robin(const hps_cluster *c, const plan_layout *l, int *wnode, int *snode)
{
    int *free_units = hps_malloc((size_t)c->n_nodes * PLAN_MAX_TYPES * sizeof(int));
    for (int n = 0; n < c->n_nodes; n++) memcpy(free_units + n * PLAN_MAX_TYPES, c->nodes[n].units, sizeof c->nodes[n].units);
    int next = 0, rc = 0;
    for (int w = 0; w < l->n_workers && !rc; w++) {
        int t = l->workers[w].type, tries = 0;
        while (tries < c->n_nodes && free_units[next * PLAN_MAX_TYPES + t] == 0) next = (next + 1) % c->n_nodes, tries++;
        if (tries == c->n_nodes) rc = -1;
        else {
            wnode[w] = next;
            free_units[next * PLAN_MAX_TYPES + t]--;
            next = (next + 1) % c->n_nodes;
        }
    }
    for (int v = 0; v < l->n_servers && !rc; v++) {
        if (l->servers[v].worker >= 0) continue;
        int n = take_server_unit(c, free_units, v % c->n_nodes);
        if (n < 0) rc = -1;
        snode[v] = n;
    }
    servers_beside(l, wnode, snode);
    free(free_units);
    return rc;
}

/* Servers of their own, `count` of them from snode[*placed] on, to nodes
 * in proportion to ps, their stage's embedding traffic on each node
 * (largest remainder; ps is used up). */
static void place_in_proportion(int N, double *ps, int count, int *snode, int *placed)
{
    double total = 0;
    int end = *placed + count;
    for (int n = 0; n < N; n++) total += ps[n];
    for (int n = 0; n < N && total > 0; n++) {
        int q = (int)floor(ps[n] / total * count);
        for (int i = 0; i < q; i++) snode[(*placed)++] = n;
        ps[n] = ps[n] / total * count - q; /* the remainder */
    }
    while (*placed < end) {
        int best = 0;
        for (int n = 1; n < N; n++)
            if (ps[n] > ps[best]) best = n;
        ps[best] = -1;
        snode[(*placed)++] = best;
    }
}

/* Co-location: a stage's workers go where the previous stage's and their own
 * stage's workers already are; a stage's servers go to nodes in proportion
 * to the embedding traffic of its workers there (largest remainder), which
 * keeps most of that traffic local without piling every server onto one
 * NIC. */
static int place_colocated(const hps_cluster *c, const plan_eval *e, const plan_layout *l, int *wnode, int *snode)
{
    int N = c->n_nodes, base = 0, rc = 0;
    int *free_units = hps_malloc((size_t)N * PLAN_MAX_TYPES * sizeof(int));
    int *near = hps_calloc((size_t)N, sizeof(int));
    double *ps = hps_calloc((size_t)N, sizeof(double));
    for (int n = 0; n < N; n++) memcpy(free_units + n * PLAN_MAX_TYPES, c->nodes[n].units, sizeof c->nodes[n].units);
    for (int s = 0; s < e->n_stages && !rc; s++) {
        const plan_stage *st = &e->stages[s];
        for (int a = 0; a < st->units; a++) {
            int best = -1;
            for (int n = 0; n < N; n++) {
                int f = free_units[n * PLAN_MAX_TYPES + st->type];
                if (!f) continue;
                if (best < 0 || near[n] > near[best] ||
                    (near[n] == near[best] && f > free_units[best * PLAN_MAX_TYPES + st->type]))
                    best = n;
            }
            if (best < 0) {
                rc = -1;
                break;
            }
            wnode[base + a] = best;
            near[best]++; /* the rest of the stage follows: its ring stays local */
            free_units[best * PLAN_MAX_TYPES + st->type]--;
        }
        /* the next stage is drawn to this stage's nodes only */
        memset(near, 0, (size_t)N * sizeof(int));
        for (int a = 0; !rc && a < st->units; a++) near[wnode[base + a]]++;
        base += st->units;
    }
    /* the servers of their own type come first, stage by stage (make_servers) */
    int placed = 0, own = e->servers;
    for (int s = 0, w = 0; s < e->n_stages && !rc; w += e->stages[s++].units) {
        const plan_stage *st = &e->stages[s];
        memset(ps, 0, (size_t)N * sizeof *ps);
        for (int a = 0; a < st->units; a++) ps[wnode[w + a]] += st->law.server_bytes / st->units;
        place_in_proportion(N, ps, st->servers, snode, &placed);
    }
    for (int v = 0; v < own && !rc; v++)
        if ((snode[v] = take_server_unit(c, free_units, snode[v])) < 0) rc = -1;
    servers_beside(l, wnode, snode);
    free(free_units);
    free(near);
    free(ps);
    return rc;
}

/* Slots count the ranks on each node in rank order. */
static void assign_slots(const hps_cluster *c, plan_layout *l, const int *wnode, const int *snode)
{
    int *used = hps_calloc((size_t)c->n_nodes, sizeof(int));
    for (int w = 0; w < l->n_workers; w++) {
        l->workers[w].node = wnode[w];
        l->workers[w].slot = used[wnode[w]]++;
    }
    for (int v = 0; v < l->n_servers; v++) {
        l->servers[v].node = snode[v];
        l->servers[v].slot = used[snode[v]]++;
    }
    free(used);
}

int plan_layout_make(const plan_problem *p, const hps_cluster *c, const plan_eval *e,
                     plan_layout *out, hps_error *err)
{
    memset(out, 0, sizeof *out);
    make_workers(p, e, out);
    make_servers(p, e, out);
    out->cross_node_bytes = out->round_robin_bytes = -1;
    int *wnode = hps_calloc((size_t)out->n_workers + 1, sizeof(int));
    int *snode = hps_calloc((size_t)out->n_servers + 1, sizeof(int));
    /* every rank on a node of its own: every byte crosses one */
    for (int w = 0; w < out->n_workers; w++) wnode[w] = w;
    for (int v = 0; v < out->n_servers; v++) snode[v] = out->n_workers + v;
    out->bytes_per_step = cross_bytes(p, e, out, wnode, snode);
    if (!c->n_nodes) {
        free(wnode), free(snode);
        return 0;
    }
    int rc = place_round_robin(c, out, wnode, snode);
    if (!rc) {
        out->round_robin_bytes = cross_bytes(p, e, out, wnode, snode);
        rc = place_colocated(c, e, out, wnode, snode);
    }
    if (!rc) {
        out->cross_node_bytes = cross_bytes(p, e, out, wnode, snode);
        assign_slots(c, out, wnode, snode);
    }
    free(wnode);
    free(snode);
    if (rc)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: the nodes do not hold the plan's units and %d server%s",
                        c->path, out->n_servers, out->n_servers == 1 ? "" : "s");
    return 0;
}

void plan_layout_free(plan_layout *l)
{
    free(l->workers);
    free(l->servers);
    l->workers = NULL;
    l->servers = NULL;
}

/* A slot names a core, and mpirun (Open MPI 4) exits 1 without a word on
 * one its host lacks: that is checked where it can be, on a node that is
 * this machine. */
static void warn_beyond_cores(const char *path, const hps_cluster *c, const int *slots)
{
    char host[256] = "";
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    gethostname(host, sizeof host - 1);
    for (int n = 0; n < c->n_nodes && cores > 0; n++)
        if ((strcmp(c->nodes[n].name, "localhost") == 0 || strcmp(c->nodes[n].name, host) == 0) &&
            slots[n] > cores)
            hps_warnf("%s: node '%s' is this machine, whose %ld cores its %d slots exceed: mpirun exits 1, with no "
                      "message, on a slot its host lacks; give the node fewer units or threads in %s",
                      path, c->nodes[n].name, cores, slots[n], c->path);
}

int plan_rankfile_write(const char *path, const hps_cluster *c, const plan_layout *l,
                        hps_error *err)
{
    if (!c->n_nodes)
        return hps_fail(err, HPS_EXIT_USAGE, "--rankfile: %s lists no nodes to place ranks on", c->path);
    hps_out *o = hps_out_open(path, err);
    if (!o) return -1;
    FILE *f = hps_out_file(o);
    /* Each worker gets its unit's cores, one after the other on its node (the
     * slots were given out in this order: workers, then servers); a server
     * gets one core: past the units' on its node, or beside a unit, the
     * last of that unit's, which its worker then goes without. */
    int *next = hps_calloc((size_t)c->n_nodes, sizeof *next);
    int *core = hps_malloc(((size_t)l->n_workers + 1) * sizeof *core); /* the core of a server beside worker w */
    for (int w = 0; w < l->n_workers; w++) core[w] = -1;
    for (int v = 0; v < l->n_servers; v++)
        if (l->servers[v].worker >= 0) core[l->servers[v].worker] = 0;
    for (int w = 0; w < l->n_workers; w++) {
        const plan_worker *k = &l->workers[w];
        int first = next[k->node], n = c->types[k->type].threads;
        next[k->node] += n;
        if (core[w] == 0) core[w] = first + --n;
        if (n > 1) fprintf(f, "rank %d=%s slot=%d-%d\n", k->rank, c->nodes[k->node].name, first, first + n - 1);
        else fprintf(f, "rank %d=%s slot=%d\n", k->rank, c->nodes[k->node].name, first);
    }
    for (int v = 0; v < l->n_servers; v++) {
        const plan_server *sv = &l->servers[v];
        fprintf(f, "rank %d=%s slot=%d\n", sv->rank, c->nodes[sv->node].name,
                sv->worker >= 0 ? core[sv->worker] : next[sv->node]++);
    }
    free(core);
    warn_beyond_cores(path, c, next);
    free(next);
    return hps_out_commit(o, err);
}
