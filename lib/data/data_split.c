/* Exact row splits. */
#include "data/hps_shard_job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"

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
