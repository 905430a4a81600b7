/* Shared helpers for the cmocka unit tests. */
#ifndef HPS_TEST_H
#define HPS_TEST_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/hps_rng.h"

/* Fills a float and a double array with the same uniform values in [-1, 1). */
static inline void fill_random(hps_rng *r, float *f, double *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = hps_rng_range(r, -1.0f, 1.0f);
        if (f) f[i] = v;
        if (d) d[i] = v;
    }
}

/* |a - b| <= tol * max(1, |a|, |b|), with a message naming what differs. */
#define assert_close(a, b, tol, what, idx)                                                \
    do {                                                                                  \
        double a_ = (a), b_ = (b), s_ = fmax(1.0, fmax(fabs(a_), fabs(b_)));              \
        if (!(fabs(a_ - b_) <= (tol) * s_))                                               \
            fail_msg("%s[%d]: %.9g vs %.9g (tol %g)", (what), (int)(idx), a_, b_, (tol)); \
    } while (0)

#endif
