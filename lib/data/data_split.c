/* Exact row splits, and the plan's worker shares. */
#include "data/hps_shard_job.h"
#include "plan/hps_plan.h"

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

/* What hps-shard needs from a plan (read by lib/plan's one reader): every
 * worker's share, in rank order, and the server count. */
int hps_plan_read(const char *path, double **shares, int *n_workers, int *servers,
                  char digest[72], hps_error *err)
{
    plan_file pf;
    if (plan_file_load(path, &pf, err)) return -1;
    int n = pf.n_workers, rc = 0;
    double sum = 0, *by_rank = NULL;
    if (n == 0 || n > HPS_MAX_SHARDS) {
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: workers: expected a non-empty array of at most %d", pf.name,
                      HPS_MAX_SHARDS);
        goto done;
    }
    by_rank = hps_malloc((size_t)n * sizeof *by_rank);
    for (int i = 0; i < n; i++) by_rank[i] = -1;
    for (int i = 0; i < n && rc == 0; i++) {
        const plan_file_worker *w = &pf.workers[i];
        if (w->share < 0) rc = hps_fail(err, HPS_EXIT_USAGE, "%s: workers[%d]: missing field 'share'", pf.name, i);
        else if (w->rank >= n || by_rank[w->rank] >= 0)
            rc = hps_fail(err, HPS_EXIT_USAGE, "%s: workers: rank %d missing or repeated", pf.name, w->rank);
        else by_rank[w->rank] = w->share, sum += w->share;
    }
    if (rc == 0 && fabs(sum - 1) > 1e-6)
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: workers: shares sum to %.9g, expected 1", pf.name, sum);
    if (rc == 0) {
        memcpy(digest, pf.digest, 72);
        *servers = pf.n_servers;
        *shares = by_rank;
        *n_workers = n;
        by_rank = NULL;
    }
done:
    free(by_rank);
    plan_file_free(&pf);
    return rc;
}
