#include "core/hps_rng.h"

#include <math.h>

void hps_rng_seed(hps_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = seed = hps_mix64(seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t hps_rng_next(hps_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double hps_rng_uniform(hps_rng *r) { return (double)(hps_rng_next(r) >> 11) * 0x1.0p-53; }

float hps_rng_range(hps_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)hps_rng_uniform(r);
}

double hps_rng_normal(hps_rng *r)
{
    double u = hps_rng_uniform(r), v = hps_rng_uniform(r);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

uint64_t hps_rng_below(hps_rng *r, uint64_t n)
{
    /* Lemire's multiply-shift; the bias is below 2^-64 * n, invisible here */
    return (uint64_t)(((unsigned __int128)hps_rng_next(r) * n) >> 64);
}

/* H(x) = integral of x^-s, and its inverse, written to stay accurate at s=1 */
static double zipf_h(double x, double s)
{
    double lx = log(x), t = (1.0 - s) * lx;
    return fabs(t) > 1e-8 ? expm1(t) / (1.0 - s) : lx * (1.0 + t / 2.0);
}

static double zipf_h_inv(double y, double s)
{
    double t = y * (1.0 - s);
    if (t < -1.0) t = -1.0;
    return fabs(t) > 1e-8 ? exp(log1p(t) / (1.0 - s)) : exp(y * (1.0 - t / 2.0));
}

void hps_zipf_init(hps_zipf *z, uint64_t n, double s)
{
    z->n = (double)n;
    z->s = s;
    z->h_x1 = zipf_h(1.5, s) - 1.0;
    z->h_n = zipf_h(z->n + 0.5, s);
    z->threshold = 2.0 - zipf_h_inv(zipf_h(2.5, s) - exp(-s * log(2.0)), s);
}

uint64_t hps_zipf_draw(const hps_zipf *z, hps_rng *r)
{
    for (;;) {
        double u = z->h_n + hps_rng_uniform(r) * (z->h_x1 - z->h_n);
        double x = zipf_h_inv(u, z->s);
        double k = floor(x + 0.5);
        if (k < 1.0) k = 1.0;
        if (k > z->n) k = z->n;
        if (k - x <= z->threshold || u >= zipf_h(k + 0.5, z->s) - exp(-z->s * log(k)))
            return (uint64_t)k;
    }
}
