/* hps_rng: a small, seeded, portable random generator (xoshiro256**), so that
 * every "--seed S" in hps gives the same bytes on every machine. */
#ifndef HPS_RNG_H
#define HPS_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} hps_rng;

void hps_rng_seed(hps_rng *r, uint64_t seed);
uint64_t hps_rng_next(hps_rng *r);
double hps_rng_uniform(hps_rng *r);                 /* [0, 1) */
float hps_rng_range(hps_rng *r, float lo, float hi); /* [lo, hi) */
double hps_rng_normal(hps_rng *r);                  /* N(0, 1) */
uint64_t hps_rng_below(hps_rng *r, uint64_t n);     /* [0, n), n > 0 */

/* Zipf(s) over ranks 1..n by rejection-inversion (Hormann and Derflinger
 * 1996): O(1) per draw for any n, which matters for million-row tables. */
typedef struct {
    double n, s, h_x1, h_n, threshold;
} hps_zipf;
void hps_zipf_init(hps_zipf *z, uint64_t n, double s); /* s > 0, s != 1 handled too */
uint64_t hps_zipf_draw(const hps_zipf *z, hps_rng *r);  /* rank in [1, n] */

/* splitmix64 finaliser: a well-mixed 64-bit hash of x.  Inline: the
 * tables hash every key of every step with it, and a call cost as much as
 * the hash. */
static inline uint64_t hps_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

#endif
