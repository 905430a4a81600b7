/* Exact row splits, and the plan's worker shares. */
#include "data/hps_shard_job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"

typedef struct {
    long double frac;
    int i;
} leftover;

static int by_remainder(const void *a, const void *b)
{
    const leftover *x = a, *y = b;
    if (x->frac != y->frac) return x->frac > y->frac ? -1 : 1;
    return x->i - y->i;
}

void hps_split_counts(uint64_t n, const double *shares, int k, uint64_t *counts)
{
    long double total = 0;
    for (int i = 0; i < k; i++) total += shares ? shares[i] : 1.0;
    leftover *rem = hps_malloc((size_t)k * sizeof *rem);
    uint64_t given = 0;
    for (int i = 0; i < k; i++) {
        long double exact = (long double)n * (shares ? shares[i] : 1.0) / total;
        counts[i] = (uint64_t)floorl(exact);
        if (counts[i] > n) counts[i] = n;
        given += counts[i];
        rem[i] = (leftover){exact - (long double)counts[i], i};
    }
    qsort(rem, (size_t)k, sizeof *rem, by_remainder);
    for (int j = 0; given < n; j = (j + 1) % k, given++) counts[rem[j].i]++;
    free(rem);
}

typedef struct {
    long long rank;
    double share;
} worker;

static int by_rank(const void *a, const void *b)
{
    const worker *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Reads what hps-shard needs from a plan: the one place that knows its shape. */
int hps_plan_read(const char *path, double **shares, int *n_workers, int *servers,
                  char digest[72], hps_error *err)
{
    char *text;
    size_t len;
    if (hps_read_all(path, &text, &len, err) != 0) return -1;
    hps_sha256_hex(text, len, digest);
    json_t *root;
    int rc = hps_json_loadb(hps_path_name(path), text, len, &root, err);
    free(text);
    if (rc != 0) return -1;
    const char *name = hps_path_name(path);
    json_t *ws = json_object_get(root, "workers");
    worker *w = NULL;
    size_t n = json_is_array(ws) ? json_array_size(ws) : 0;
    if (n == 0 || n > HPS_MAX_SHARDS) {
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: workers: expected a non-empty array of at most %d",
                      name, HPS_MAX_SHARDS);
        goto done;
    }
    w = hps_malloc(n * sizeof *w);
    char ctx[600];
    double sum = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        json_t *o = json_array_get(ws, i);
        snprintf(ctx, sizeof ctx, "%s: workers[%zu]", name, i);
        if (!json_is_object(o)) rc = hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
        else if (hps_json_int(o, "rank", HPS_REQUIRED, 0, (long long)n - 1, &w[i].rank, ctx, err) != 0 ||
                 hps_json_num(o, "share", HPS_REQUIRED, 0, 1, &w[i].share, ctx, err) != 0)
            rc = -1;
        else sum += w[i].share;
    }
    if (rc != 0) goto done;
    qsort(w, n, sizeof *w, by_rank);
    for (size_t i = 0; i < n; i++)
        if (w[i].rank != (long long)i) {
            rc = hps_fail(err, HPS_EXIT_USAGE, "%s: workers: rank %zu missing or repeated", name, i);
            goto done;
        }
    if (fabs(sum - 1) > 1e-6) {
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: workers: shares sum to %.9g, expected 1", name, sum);
        goto done;
    }
    *servers = 0;
    json_t *sv = json_object_get(root, "servers");
    if (json_is_object(sv)) {
        long long count = 0;
        snprintf(ctx, sizeof ctx, "%s: servers", name);
        if (hps_json_int(sv, "count", HPS_REQUIRED, 0, HPS_MAX_SERVERS, &count, ctx, err) != 0) {
            rc = -1;
            goto done;
        }
        json_t *routing = json_object_get(sv, "routing");
        const char *rule = NULL;
        snprintf(ctx, sizeof ctx, "%s: servers.routing", name);
        if (json_is_object(routing) &&
            (hps_json_str(routing, "rule", HPS_OPTIONAL, &rule, ctx, err) != 0 ||
             (rule && strcmp(rule, "mix64-mod") != 0))) {
            if (rule) hps_fail(err, HPS_EXIT_USAGE, "%s: rule: expected 'mix64-mod', got '%s'", ctx, rule);
            rc = -1;
            goto done;
        }
        *servers = (int)count;
    }
    *shares = hps_malloc(n * sizeof **shares);
    for (size_t i = 0; i < n; i++) (*shares)[i] = w[i].share;
    *n_workers = (int)n;
done:
    free(w);
    json_decref(root);
    return rc;
}
