/* The cluster file (hps-cluster(5)): the resource types one can rent, the
 * links between them, and the nodes ranks are placed on. */
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "plan/hps_cluster.h"

int hps_cluster_find(const hps_cluster *c, const char *type_name)
{
    for (int t = 0; t < c->n_types; t++)
        if (strcmp(c->types[t].name, type_name) == 0) return t;
    return -1;
}

/* Names echo in messages and plans; a node's becomes a rankfile line, so it
 * takes no ':' (resource and device names do: "cuda:0"). */
static int copy_name(char *dst, const char *src, const char *what, const char *extra,
                     const char *ctx, hps_error *err)
{
    if (strlen(src) >= HPS_NAME_MAX)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s '%.20s...' is longer than %d bytes", ctx,
                        what, src, HPS_NAME_MAX - 1);
    if (!hps_name_ok(src, extra)) {
        char shown[40];
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s '%s' must be letters, digits or '%s._-'", ctx,
                        what, hps_printable(src, shown, sizeof shown), extra);
    }
    strcpy(dst, src);
    return 0;
}

/* A type is priced per unit (price_per_hour) or per instance
 * (price_per_instance_hour, units_per_instance units): one or the other, so
 * that the two never disagree.  The per-unit price is the instance's over
 * its units either way (hps-cluster(5)). */
static int instance_pricing(json_t *o, long long *per_instance, double *instance_price, const char *ctx,
                            hps_error *err)
{
    if (hps_json_int(o, "units_per_instance", HPS_OPTIONAL, 1, 4096, per_instance, ctx, err) ||
        hps_json_num(o, "price_per_instance_hour", HPS_OPTIONAL, 0, 1e7, instance_price, ctx, err))
        return -1;
    int inst = json_object_get(o, "price_per_instance_hour") != NULL;
    if (inst && json_object_get(o, "price_per_hour"))
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: give price_per_hour (a unit's) or price_per_instance_hour (an instance's), not both",
                        ctx);
    if (inst && !(*instance_price > 0))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: price_per_instance_hour must be > 0", ctx);
    return 0;
}

static int parse_resource(json_t *o, hps_cluster *c, const char *file, int i, hps_error *err)
{
    static const char *const keys[] = {"name",     "kind",    "device",  "price_per_hour",
                                       "max_units", "nic_gbps", "power_w", "mem_gib",
                                       "threads",  "host_mem_gib", "nic_latency_us", "units_per_instance",
                                       "price_per_instance_hour", "comment", NULL};
    static const char *const kinds[] = {"cpu", "gpu", NULL};
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: resource %d", file, i);
    if (!json_is_object(o)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object", ctx);
    plan_rtype *r = &c->types[i];
    const char *name, *device = NULL;
    if (hps_json_str(o, "name", HPS_REQUIRED, &name, ctx, err) ||
        copy_name(r->name, name, "name", ":", ctx, err))
        return -1;
    snprintf(ctx, sizeof ctx, "%s: resource '%s'", file, r->name);
    if (hps_cluster_find(c, r->name) >= 0 && hps_cluster_find(c, r->name) < i)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: name appears twice", ctx);
    int kind = 0;
    long long max_units = 0, threads = 1, per_instance = 1;
    double mem_gib = 0, host_gib = 0, instance_price = 0;
    r->power_w = r->nic_latency_us = 0;
    if (hps_json_known_keys(o, keys, ctx, err) ||
        hps_json_enum(o, "kind", HPS_REQUIRED, kinds, &kind, ctx, err) ||
        hps_json_str(o, "device", HPS_REQUIRED, &device, ctx, err) ||
        copy_name(r->device, device, "device", ":", ctx, err) ||
        instance_pricing(o, &per_instance, &instance_price, ctx, err) ||
        hps_json_num(o, "price_per_hour", instance_price > 0 ? HPS_OPTIONAL : HPS_REQUIRED, 0, 1e6,
                     &r->price_per_hour, ctx, err) ||
        hps_json_int(o, "max_units", HPS_REQUIRED, 1, 100000, &max_units, ctx, err) ||
        hps_json_num(o, "nic_gbps", HPS_REQUIRED, 1e-3, 1e5, &r->nic_gbps, ctx, err) ||
        hps_json_num(o, "nic_latency_us", HPS_OPTIONAL, 0, 1e7, &r->nic_latency_us, ctx, err) ||
        hps_json_num(o, "power_w", HPS_OPTIONAL, 0, 1e6, &r->power_w, ctx, err) ||
        hps_json_num(o, "mem_gib", HPS_OPTIONAL, 1.0 / 1024, 1 << 20, &mem_gib, ctx, err) ||
        hps_json_int(o, "threads", HPS_OPTIONAL, 1, 4096, &threads, ctx, err) ||
        hps_json_num(o, "host_mem_gib", HPS_OPTIONAL, 1.0 / 1024, 1 << 20, &host_gib, ctx, err))
        return -1;
    if (instance_price > 0) r->price_per_hour = instance_price / (double)per_instance;
    r->units_per_instance = (int)per_instance;
    r->threads = (int)threads;
    r->threads_given = json_object_get(o, "threads") != NULL;
    if (r->price_per_hour <= 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: price_per_hour must be > 0", ctx);
    if (host_gib > 0 && kind != PLAN_GPU)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: host_mem_gib is for gpu resources (a cpu's is mem_gib)",
                        ctx);
    r->kind = kind;
    r->max_units = (int)max_units;
    r->mem_bytes = mem_gib * PLAN_GIB;
    r->host_mem_bytes = host_gib * PLAN_GIB;
    return 0;
}

static int type_of(hps_cluster *c, json_t *v, const char *ctx, hps_error *err)
{
    if (!json_is_string(v))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: resource names must be strings", ctx);
    int t = hps_cluster_find(c, json_string_value(v));
    if (t < 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: unknown resource '%s'", ctx,
                        json_string_value(v));
    return t;
}

static int parse_link(json_t *o, hps_cluster *c, const char *file, int i, hps_error *err)
{
    static const char *const keys[] = {"between", "gbps", "latency_us", "comment", NULL};
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: link %d", file, i);
    json_t *between = json_is_object(o) ? json_object_get(o, "between") : NULL;
    if (!json_is_array(between) || json_array_size(between) != 2)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: between must name two resources", ctx);
    plan_link *l = &c->links[i];
    l->latency_us = 0;
    if ((l->a = type_of(c, json_array_get(between, 0), ctx, err)) < 0 ||
        (l->b = type_of(c, json_array_get(between, 1), ctx, err)) < 0 ||
        hps_json_known_keys(o, keys, ctx, err) ||
        hps_json_num(o, "gbps", HPS_REQUIRED, 1e-3, 1e5, &l->gbps, ctx, err) ||
        hps_json_num(o, "latency_us", HPS_OPTIONAL, 0, 1e7, &l->latency_us, ctx, err))
        return -1;
    if (l->a == l->b)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: a link joins two different resources", ctx);
    return 0;
}

static int parse_node(json_t *o, hps_cluster *c, const char *file, int i, hps_error *err)
{
    static const char *const keys[] = {"name", "units", "comment", NULL};
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: node %d", file, i);
    plan_node *n = &c->nodes[i];
    const char *name;
    if (!json_is_object(o)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object", ctx);
    if (hps_json_known_keys(o, keys, ctx, err) ||
        hps_json_str(o, "name", HPS_REQUIRED, &name, ctx, err) ||
        copy_name(n->name, name, "name", "", ctx, err))
        return -1;
    snprintf(ctx, sizeof ctx, "%s: node '%s'", file, n->name);
    json_t *units = json_object_get(o, "units");
    if (!json_is_object(units) || json_object_size(units) == 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: units must map resource names to counts", ctx);
    const char *key;
    json_t *v;
    json_object_foreach(units, key, v) {
        int t = hps_cluster_find(c, key);
        long long k = 0;
        if (t < 0) return hps_fail(err, HPS_EXIT_USAGE, "%s: unknown resource '%s'", ctx, key);
        if (hps_json_int(units, key, HPS_REQUIRED, 0, 100000, &k, ctx, err)) return -1;
        n->units[t] = (int)k;
    }
    return 0;
}

/* With nodes listed, a type cannot have more units than the nodes hold.
 * The sum is wide: 100000 nodes of 100000 units overflow an int. */
static void cap_by_nodes(hps_cluster *c)
{
    if (!c->n_nodes) return;
    for (int t = 0; t < c->n_types; t++) {
        long long total = 0;
        for (int n = 0; n < c->n_nodes; n++) total += c->nodes[n].units[t];
        if (total < c->types[t].max_units) c->types[t].max_units = (int)total;
    }
}

/* Parameter servers are CPU processes on units of a CPU type (by default the
 * first one): that type's price, memory and NIC size and price them. */
static int parse_servers(json_t *servers, hps_cluster *c, const char *file, hps_error *err)
{
    static const char *const skeys[] = {"type", "gbps", "comment", NULL};
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: servers", file);
    c->server_type = -1;
    for (int t = c->n_types - 1; t >= 0; t--)
        if (c->types[t].kind == PLAN_CPU) c->server_type = t;
    c->server_gbps = 0;
    if (servers) {
        const char *type = NULL;
        if (!json_is_object(servers)) return hps_fail(err, HPS_EXIT_USAGE, "%s: must be an object", ctx);
        if (hps_json_known_keys(servers, skeys, ctx, err) ||
            hps_json_str(servers, "type", HPS_OPTIONAL, &type, ctx, err) ||
            hps_json_num(servers, "gbps", HPS_OPTIONAL, 1e-3, 1e5, &c->server_gbps, ctx, err))
            return -1;
        if (type && (c->server_type = hps_cluster_find(c, type)) < 0)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: type: unknown resource '%s'", ctx, type);
        if (type && c->types[c->server_type].kind != PLAN_CPU)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: type '%s' must be a cpu resource", ctx, type);
    }
    if (c->server_type < 0) {
        /* no CPU type: servers as fast as the first type's NIC, unpriced */
        if (!c->server_gbps) c->server_gbps = c->types[0].nic_gbps;
        return 0;
    }
    if (!c->server_gbps) c->server_gbps = c->types[c->server_type].nic_gbps;
    return 0;
}

static int parse_array(json_t *root, const char *key, int required, size_t max,
                       const char *file, json_t **out, hps_error *err)
{
    json_t *a = json_object_get(root, key);
    *out = NULL;
    if (!a || json_is_null(a)) {
        if (required) return hps_fail(err, HPS_EXIT_USAGE, "%s: missing field '%s'", file, key);
        return 0;
    }
    if (!json_is_array(a) || json_array_size(a) > max || (required && !json_array_size(a)))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s must be an array of 1 to %zu objects", file,
                        key, max);
    *out = a;
    return 0;
}

hps_cluster *hps_cluster_parse(json_t *root, const char *file, hps_error *err)
{
    static const char *const keys[] = {"format", "version", "name",  "prices", "resources",
                                       "links",  "servers", "nodes", "comment", NULL};
    hps_cluster *c = hps_calloc(1, sizeof *c);
    c->path = hps_strdup(file);
    const char *name;
    json_t *res, *links, *nodes, *servers = json_object_get(root, "servers");
    if (hps_json_format(root, "hps-cluster", PLAN_CLUSTER_VERSION, HPS_OPTIONAL, NULL, file, err) ||
        hps_json_known_keys(root, keys, file, err) ||
        hps_json_str(root, "name", HPS_REQUIRED, &name, file, err) ||
        parse_array(root, "resources", HPS_REQUIRED, PLAN_MAX_TYPES, file, &res, err) ||
        parse_array(root, "links", HPS_OPTIONAL, 1000, file, &links, err) ||
        parse_array(root, "nodes", HPS_OPTIONAL, 100000, file, &nodes, err))
        goto fail;
    c->name = hps_strdup(name);
    c->n_types = (int)json_array_size(res);
    for (int i = 0; i < c->n_types; i++)
        if (parse_resource(json_array_get(res, i), c, file, i, err)) goto fail;
    c->n_links = links ? (int)json_array_size(links) : 0;
    c->links = hps_calloc((size_t)c->n_links, sizeof *c->links);
    for (int i = 0; i < c->n_links; i++)
        if (parse_link(json_array_get(links, i), c, file, i, err)) goto fail;
    c->n_nodes = nodes ? (int)json_array_size(nodes) : 0;
    c->nodes = hps_calloc((size_t)c->n_nodes, sizeof *c->nodes);
    for (int i = 0; i < c->n_nodes; i++)
        if (parse_node(json_array_get(nodes, i), c, file, i, err)) goto fail;
    cap_by_nodes(c);
    if (parse_servers(servers, c, file, err)) goto fail;
    char *canon = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    HPS_CHECK(canon);
    hps_sha256_hex(canon, strlen(canon), c->digest);
    free(canon);
    return c;
fail:
    hps_cluster_free(c);
    return NULL;
}

hps_cluster *hps_cluster_load(const char *path, hps_error *err)
{
    json_t *root;
    if (hps_json_load(path, &root, err)) return NULL;
    hps_cluster *c = hps_cluster_parse(root, hps_path_name(path), err);
    json_decref(root);
    return c;
}

void hps_cluster_free(hps_cluster *c)
{
    if (!c) return;
    free(c->path);
    free(c->name);
    free(c->links);
    free(c->nodes);
    free(c);
}
