/* Shares of a batch among workers of unequal speed (hps-train(1),
 * DISTRIBUTED, "Rebalancing").  Every worker runs these on the same
 * all-gathered figures, so all compute the same shares without a message. */
#include <math.h>

#include "core/hps_rng.h"
#include "dist/hps_dist.h"

void hps_dist_rebalance(double *share, double *speed, const double *rows, const double *secs,
                        int workers, double damping, double min_share)
{
    double total = 0;
    for (int w = 0; w < workers; w++) {
        /* a worker without rows this step keeps its last speed */
        if (rows[w] > 0 && secs[w] > 0) {
            double v = rows[w] / secs[w];
            speed[w] = speed[w] > 0 ? 0.5 * speed[w] + 0.5 * v : v;
        }
        if (!(speed[w] > 0)) return; /* not measured yet */
        total += speed[w];
    }
    double sum = 0;
    for (int w = 0; w < workers; w++) {
        /* damped: one noisy step moves a share only part of the way */
        share[w] += damping * (speed[w] / total - share[w]);
        if (share[w] < min_share) share[w] = min_share;
        sum += share[w];
    }
    for (int w = 0; w < workers; w++) share[w] /= sum;
}

/* Where worker w's rows start: the same arithmetic on every rank, so that
 * one worker's end is exactly the next one's start. */
static int bound(const double *share, int workers, int w, int n)
{
    if (w >= workers) return n;
    double cum = 0;
    for (int i = 0; i < w; i++) cum += share[i];
    long b = lround(cum * n);
    return b < 0 ? 0 : b > n ? n : (int)b;
}

void hps_dist_slice(const double *share, int workers, int w, int n, int *lo, int *hi)
{
    *lo = bound(share, workers, w, n);
    *hi = bound(share, workers, w + 1, n);
    if (*hi < *lo) *hi = *lo;
}

int hps_dist_route(uint64_t key, int servers)
{
    return (int)(hps_mix64(key) % (uint64_t)servers);
}
