/* Roles from the plan (hps-plan(5): workers[] and servers): which rank is
 * a worker of which stage and share, which ranks are servers. */
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "dist/dist_internal.h"
#include "plan/hps_plan_file.h"

static int take_rank(hps_dist *d, long long r, int *used, const char *name, hps_error *err)
{
    if (r < 0 || r >= HPS_DIST_MAX_RANKS)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: rank %lld is out of range (0 to %d)", name, r,
                        HPS_DIST_MAX_RANKS - 1);
    if (used[r]) return hps_fail(err, HPS_EXIT_USAGE, "%s: rank %lld has two roles", name, r);
    used[r] = 1;
    (void)d;
    return 0;
}

static int read_workers(hps_dist *d, const plan_file *pf, int *used, hps_error *err)
{
    if (!pf->n_workers) {
        /* a plan for one machine: one worker on rank 0 */
        d->workers = 1;
        d->roles[0] = (dist_role){.kind = ROLE_WORKER, .share = 1, .type = "cpu"};
        return take_rank(d, 0, used, pf->name, err);
    }
    for (int i = 0; i < pf->n_workers; i++) {
        const plan_file_worker *w = &pf->workers[i];
        if (take_rank(d, w->rank, used, pf->name, err)) return -1;
        dist_role *r = &d->roles[w->rank];
        *r = (dist_role){.kind = ROLE_WORKER, .stage = w->stage, .share = w->share < 0 ? 1 : w->share};
        snprintf(r->type, sizeof r->type, "%s", w->type);
        snprintf(d->plan_node[w->rank], sizeof d->plan_node[w->rank], "%s", w->node);
        d->workers++;
    }
    return 0;
}

/* 1 when some stage pulls embedding rows from servers: rows "servers" (also
 * what a plan that does not say means); "hbm" and "cache" keep them in
 * the workers (read_device_rows). */
static int pulls_rows(const plan_file *pf)
{
    for (int i = 0; i < pf->n_stages; i++)
        if (strcmp(pf->stages[i].rows, "servers") == 0)
            return 1;
    return pf->n_stages == 0;
}

/* rows: hbm runs as replicas, one a worker of the stage, whose gradients
 * are exchanged each step, or, where the plan says rows_split "shards" on
 * several units, as shards, each worker holding the rows the routing rule
 * gives it (dist_shard.c); rows: cache as shards too, each unit's shard
 * behind a cache of the plan's cache_rows, in its host table or, where the
 * plan has servers, on them.  With stages across ranks, replicas and shards
 * alike exchange among the stage's own workers (dist_rows_group), and only
 * the lead's stage may hold them (dist_check_device_rows). */
static int read_device_rows(hps_dist *d, const plan_file *pf, hps_error *err)
{
    for (int i = 0; i < pf->n_stages; i++) {
        const plan_file_stage *st = &pf->stages[i];
        int cache = strcmp(st->rows, "cache") == 0;
        if (!cache && strcmp(st->rows, "hbm") != 0) continue;
        int shards = cache || (st->rows_shards && st->units > 1);
        if (cache && st->cache_rows <= 0)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: stage %d: rows: cache without cache_rows (> 0 expected)",
                            pf->name, i);
        d->shard_capacity = cache ? st->cache_rows : INT64_MAX;
        d->shard_stage = i;
        /* the planner's cache with servers behind it: they hold the rows */
        d->shard_home = cache && pf->n_servers > 0;
        if (shards) d->shards = 1;
        else d->replicas = 1;
    }
    /* a worker's rows are its device's or its servers', not some of each */
    for (int i = 0; (d->replicas || d->shards) && i < pf->n_stages; i++)
        if (strcmp(pf->stages[i].rows, "servers") == 0)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: stage %d keeps its embedding rows on servers (rows: %s) beside another stage's "
                            "in device memory: hps-train under mpirun runs one or the other: plan with --rows "
                            "servers, or run it in one process",
                            pf->name, i, pf->stages[i].rows);
    return 0;
}

/* Servers: the ranks listed, else the lowest ranks no worker has.  A plan
 * without servers whose stages pull no rows (a dense-only model) runs
 * workers only; one whose stages keep rows on servers but counts none still
 * gets one, which holds the rows.  dist_check_servers checks the model
 * agrees once it is loaded. */
static int read_servers(hps_dist *d, const plan_file *pf, int *used, hps_error *err)
{
    int count = pf->n_servers;
    if (read_device_rows(d, pf, err)) return -1;
    if (!count && pulls_rows(pf)) count = 1;
    for (int s = 0, next = 0; s < count; s++) {
        long long r;
        if (s < pf->n_servers && pf->server_ranks) { /* listed (a count may come without ranks) */
            r = pf->server_ranks[s];
        } else {
            while (next < HPS_DIST_MAX_RANKS && used[next]) next++;
            r = next;
        }
        if (take_rank(d, r, used, pf->name, err)) return -1;
        d->roles[r] = (dist_role){.kind = ROLE_SERVER, .index = s, .type = "server"};
    }
    d->servers = count;
    return 0;
}

/* Each stage's table layers over its own servers, where the plan's
 * stages count servers adding up to the servers' count (hps-plan sizes
 * and prices a stage's servers for that stage's tables): the servers of
 * their own first, stage by stage, then those beside a stage's units,
 * stage by stage, as hps-plan lists them (hps-plan(5), SERVERS: routing).
 * A plan whose stages do not count them (older plans, hand-written) keeps
 * every layer over all of them (route_n 0). */
static void read_routing(hps_dist *d, const plan_file *pf)
{
    int sum = 0;
    for (int s = 0; s < pf->n_stages; s++) sum += pf->stages[s].servers;
    if (pf->n_stages < 2 || d->servers == 0 || sum != d->servers) return;
    d->by_stage = 1;
    for (int beside = 0, at = 0; beside < 2; beside++)
        for (int s = 0; s < pf->n_stages; s++) {
            const plan_file_stage *st = &pf->stages[s];
            if (!st->servers_beside != !beside) continue;
            for (int l = st->first; l < st->end && l < HPS_MAX_LAYERS; l++)
                d->route_first[l] = at, d->route_n[l] = st->servers;
            at += st->servers;
        }
}

int dist_server_of(const hps_dist *d, int layer, uint64_t key)
{
    int n = d->route_n[layer];
    return n ? d->route_first[layer] + hps_dist_route(key, n) : hps_dist_route(key, d->servers);
}

int dist_serves(const hps_dist *d, int s, int layer)
{
    int n = d->route_n[layer];
    return !n || (s >= d->route_first[layer] && s < d->route_first[layer] + n);
}

/* Ranks must be 0 .. needed-1 with no gap, and mpirun must start that many. */
static int check_ranks(hps_dist *d, const int *used, const char *name, hps_error *err)
{
    int needed = d->workers + d->servers;
    for (int r = 0; r < needed; r++)
        if (!used[r])
            return hps_fail(err, HPS_EXIT_USAGE, "%s: no role for rank %d of its %d ranks", name, r,
                            needed);
    if (d->size != needed)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: the plan needs %d ranks (%d worker%s, %d server%s), but mpirun started "
                        "%d: run mpirun -np %d",
                        name, needed, d->workers, d->workers == 1 ? "" : "s", d->servers, d->servers == 1 ? "" : "s", d->size, needed);
    return 0;
}

/* Worker indices by rank: the lead is the lowest rank; shares sum to 1. */
static void number_roles(hps_dist *d)
{
    double total = 0;
    for (int r = 0, w = 0; r < d->size; r++) {
        if (d->roles[r].kind == ROLE_SERVER) {
            d->server_rank[d->roles[r].index] = r;
            continue;
        }
        d->roles[r].index = w;
        d->worker_rank[w++] = r;
        total += d->roles[r].share;
    }
    for (int w = 0; w < d->workers; w++) {
        dist_role *r = &d->roles[d->worker_rank[w]];
        d->share[w] = total > 0 ? r->share / total : 1.0 / d->workers;
    }
}

/* The plan's placement of ranks on nodes (hps-plan(5), placement), if any:
 * its cross-node bytes are what the run's are measured against. */
static void read_placement(hps_dist *d, const plan_file *pf)
{
    d->predicted_cross = pf->cross_node_bytes;
    for (int i = 0; i < pf->n_server_places; i++) {
        const plan_file_place *p = &pf->server_places[i];
        if (p->rank < HPS_DIST_MAX_RANKS) snprintf(d->plan_node[p->rank], sizeof d->plan_node[p->rank], "%s", p->node);
    }
}

int dist_read_roles(hps_dist *d, const char *plan_path, hps_error *err)
{
    plan_file pf;
    if (plan_file_load(plan_path, &pf, err)) return -1;
    int used[HPS_DIST_MAX_RANKS] = {0};
    int rc = read_workers(d, &pf, used, err) || read_servers(d, &pf, used, err) ||
             check_ranks(d, used, pf.name, err);
    d->predicted_bytes = pf.network_bytes;
    memcpy(d->plan_digest, pf.digest, sizeof d->plan_digest);
    if (rc == 0) read_placement(d, &pf), read_routing(d, &pf);
    char name[512];
    snprintf(name, sizeof name, "%s", pf.name);
    plan_file_free(&pf);
    if (rc) return -1;
    number_roles(d);
    return dist_stages_setup(d, name, err);
}

/* Under by_stage a table layer in a stage that counts no servers would
 * have none (a hand-written plan: hps-plan counts every such stage's). */
static int check_stage_servers(const hps_dist *d, const hps_model *m, const plan_file *p, hps_error *err)
{
    for (int s = 0; d->by_stage && s < p->n_stages; s++)
        for (int l = p->stages[s].first; l < p->stages[s].end && l < m->n_layers; l++)
            if (hps_layer_has_table(&m->layers[l]) && p->stages[s].servers == 0)
                return hps_fail(err, HPS_EXIT_USAGE,
                                "%s: stage %d runs table layer %d ('%s') but counts no servers (stages[%d]."
                                "servers 0), while the other stages count their own: give it servers, or "
                                "drop the stages' counts to spread every table over all %d servers",
                                p->name, s, l, m->layers[l].name, s, d->servers);
    return 0;
}

int dist_check_servers(const hps_dist *d, const hps_model *m, const plan_file *p, hps_error *err)
{
    const char *plan_name = p->name;
    if (d->servers) return check_stage_servers(d, m, p, err);
    if (d->replicas || d->shards) return 0;
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].kind == HPS_LAYER_EMBEDDING)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: the plan has no parameter servers and its stages pull no embedding rows, "
                            "but layer %d ('%s') of %s is an embedding: plan for this model",
                            plan_name, l, m->layers[l].name, m->name);
    return 0;
}

int dist_check_device_rows(const hps_dist *d, const hps_model *m, const plan_file *p, hps_error *err)
{
    int lead_stage = d->roles[d->worker_rank[0]].stage;
    for (int s = 0; p->n_stages > 1 && s < p->n_stages; s++) {
        const char *rows = p->stages[s].rows;
        int cache = strcmp(rows, "cache") == 0;
        if (s == lead_stage || (!cache && strcmp(rows, "hbm") != 0)) continue;
        for (int l = p->stages[s].first; l < p->stages[s].end && l < m->n_layers; l++)
            if (hps_layer_has_table(&m->layers[l]))
                return hps_fail(err, HPS_EXIT_USAGE,
                                "%s: stage %d keeps the rows of layer %d ('%s') in %s (rows: %s): hps-train under "
                                "mpirun runs device rows in a plan of several stages in the lead's stage (%d) "
                                "only, which evaluates and exports: plan with --rows servers, or run it in one "
                                "process",
                                hps_path_name(p->path), s, l, m->layers[l].name, cache ? "a cache" : "HBM", rows,
                                lead_stage);
    }
    return 0;
}

const char *dist_role_name(const hps_dist *d, int rank, char *buf, size_t n)
{
    const dist_role *r = &d->roles[rank];
    if (r->kind == ROLE_SERVER) snprintf(buf, n, "server %d", r->index);
    else snprintf(buf, n, "worker %d of stage %d, %s", r->index, r->stage, r->type);
    return buf;
}
