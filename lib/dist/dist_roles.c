/* Roles from the plan (hps-plan(5): workers[] and servers): which rank is
 * a worker of which stage and share, which ranks are servers. */
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "dist/dist_internal.h"

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

static int read_workers(hps_dist *d, json_t *root, int *used, const char *name, hps_error *err)
{
    json_t *ws = json_object_get(root, "workers"), *w;
    size_t i;
    if (!json_is_array(ws) || json_array_size(ws) == 0) {
        /* a plan for one machine: one worker on rank 0 */
        d->workers = 1;
        d->roles[0] = (dist_role){.kind = ROLE_WORKER, .share = 1, .type = "cpu"};
        return take_rank(d, 0, used, name, err);
    }
    json_array_foreach(ws, i, w) {
        char ctx[600];
        snprintf(ctx, sizeof ctx, "%s: workers[%zu]", name, i);
        long long rank = 0, stage = 0;
        double share = 1;
        const char *type = "cpu";
        if (hps_json_int(w, "rank", HPS_REQUIRED, 0, 1 << 20, &rank, ctx, err) ||
            hps_json_int(w, "stage", HPS_OPTIONAL, 0, HPS_TRAIN_MAX_STAGES, &stage, ctx, err) ||
            hps_json_str(w, "type", HPS_OPTIONAL, &type, ctx, err) ||
            hps_json_num(w, "share", HPS_OPTIONAL, 0, 1, &share, ctx, err) ||
            take_rank(d, rank, used, name, err))
            return -1;
        dist_role *r = &d->roles[rank];
        *r = (dist_role){.kind = ROLE_WORKER, .stage = (int)stage, .share = share};
        const char *node = json_string_value(json_object_get(w, "node"));
        snprintf(d->plan_node[rank], sizeof d->plan_node[rank], "%s", node ? node : "");
        snprintf(r->type, sizeof r->type, "%s", type);
        d->workers++;
    }
    return 0;
}

/* Servers: the ranks listed, else the lowest ranks no worker has. */
static int read_servers(hps_dist *d, json_t *root, int *used, const char *name, hps_error *err)
{
    json_t *sv = json_object_get(root, "servers"), *ranks = json_object_get(sv, "ranks");
    long long count = 1;
    if (json_is_object(sv) && hps_json_int(sv, "count", HPS_OPTIONAL, 1, HPS_DIST_MAX_RANKS, &count,
                                           name, err))
        return -1;
    if (json_is_array(ranks) && json_array_size(ranks) != (size_t)count)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: servers.ranks lists %zu ranks for %lld servers",
                        name, json_array_size(ranks), count);
    for (int s = 0, next = 0; s < count; s++) {
        long long r;
        if (json_is_array(ranks)) {
            r = json_integer_value(json_array_get(ranks, (size_t)s));
        } else {
            while (next < HPS_DIST_MAX_RANKS && used[next]) next++;
            r = next;
        }
        if (take_rank(d, r, used, name, err)) return -1;
        d->roles[r] = (dist_role){.kind = ROLE_SERVER, .index = s, .type = "server"};
    }
    d->servers = (int)count;
    return 0;
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
static void read_placement(hps_dist *d, json_t *root)
{
    json_t *pl = json_object_get(root, "placement"), *v;
    json_t *cross = json_object_get(pl, "cross_node_bytes_per_step");
    size_t i;
    d->predicted_cross = json_is_number(cross) ? json_number_value(cross) : -1;
    json_array_foreach(json_object_get(pl, "servers"), i, v) {
        json_int_t r = json_integer_value(json_object_get(v, "rank"));
        const char *node = json_string_value(json_object_get(v, "node"));
        if (node && r >= 0 && r < HPS_DIST_MAX_RANKS)
            snprintf(d->plan_node[r], sizeof d->plan_node[r], "%s", node);
    }
}

int dist_read_roles(hps_dist *d, const char *plan_path, hps_error *err)
{
    json_t *root;
    if (hps_json_load(plan_path, &root, err)) return -1;
    const char *name = hps_path_name(plan_path);
    int used[HPS_DIST_MAX_RANKS] = {0};
    int rc = read_workers(d, root, used, name, err) || read_servers(d, root, used, name, err) ||
             check_ranks(d, used, name, err);
    json_t *net = json_object_get(root, "network");
    double bytes = 0;
    if (rc == 0 && json_is_object(net))
        rc = hps_json_num(net, "bytes_per_step", HPS_OPTIONAL, 0, 1e18, &bytes, name, err);
    d->predicted_bytes = bytes;
    if (rc == 0) read_placement(d, root);
    json_decref(root);
    if (rc) return -1;
    number_roles(d);
    return dist_stages_setup(d, name, err);
}

const char *dist_role_name(const hps_dist *d, int rank, char *buf, size_t n)
{
    const dist_role *r = &d->roles[rank];
    if (r->kind == ROLE_SERVER) snprintf(buf, n, "server %d", r->index);
    else snprintf(buf, n, "worker %d of stage %d, %s", r->index, r->stage, r->type);
    return buf;
}
