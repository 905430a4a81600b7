/* The CTR layers' kernels (hps_kernels.h): linear, fm, cross, dropout, and
 * the column copies that join a graph's tensors.  Plain loops: these layers
 * are thin beside the fc GEMMs, and the matrix cross is fc_forward. */
#include <string.h>

#include "kernels/hps_kernels.h"

#define PAR_MIN 65536

void linear_forward(float *out, const float *pooled, int S, const float *dense, const float *w,
                    const float *b, int B, int W)
{
#pragma omp parallel for if ((int64_t)B * (S + W) > PAR_MIN)
    for (int r = 0; r < B; r++) {
        float z = b[0];
        const float *p = pooled + (int64_t)r * S, *x = dense ? dense + (int64_t)r * W : NULL;
        for (int s = 0; s < S; s++) z += p[s];
        for (int j = 0; x && j < W; j++) z += w[j] * x[j];
        out[r] = z;
    }
}

void linear_backward(float *dpooled, float *dw, float *db, const float *dout, const float *dense,
                     int B, int S, int W)
{
    for (int r = 0; r < B; r++) {
        const float g = dout[r];
        if (dpooled)
            for (int s = 0; s < S; s++) dpooled[(int64_t)r * S + s] = g;
        for (int j = 0; dense && j < W; j++) dw[j] += g * dense[(int64_t)r * W + j];
        db[0] += g;
    }
}

void fm_forward(float *out, const float *v, int B, int n, int D, int vector)
{
#pragma omp parallel for if ((int64_t)B * n * D > PAR_MIN)
    for (int r = 0; r < B; r++) {
        const float *x = v + (int64_t)r * n * D;
        float total = 0;
        for (int f = 0; f < D; f++) {
            float s = 0, q = 0;
            for (int i = 0; i < n; i++) {
                float e = x[(int64_t)i * D + f];
                s += e, q += e * e;
            }
            float o = 0.5f * (s * s - q);
            if (vector)
                out[(int64_t)r * D + f] = o;
            else
                total += o;
        }
        if (!vector) out[r] = total;
    }
}

void fm_backward(float *dv, const float *dout, const float *v, int B, int n, int D, int vector)
{
#pragma omp parallel for if ((int64_t)B * n * D > PAR_MIN)
    for (int r = 0; r < B; r++) {
        const float *x = v + (int64_t)r * n * D;
        float *dx = dv + (int64_t)r * n * D;
        for (int f = 0; f < D; f++) {
            float s = 0;
            for (int i = 0; i < n; i++) s += x[(int64_t)i * D + f];
            const float g = vector ? dout[(int64_t)r * D + f] : dout[r];
            /* d/dv_if of (s_f^2 - sum v^2)/2 is s_f - v_if */
            for (int i = 0; i < n; i++) dx[(int64_t)i * D + f] = g * (s - x[(int64_t)i * D + f]);
        }
    }
}

void cross_vector_forward(float *y, float *s, const float *x0, const float *x, const float *w,
                          const float *b, int B, int W)
{
#pragma omp parallel for if ((int64_t)B * W > PAR_MIN)
    for (int r = 0; r < B; r++) {
        const int64_t o = (int64_t)r * W;
        float t = 0;
        for (int j = 0; j < W; j++) t += x[o + j] * w[j];
        s[r] = t;
        for (int j = 0; j < W; j++) y[o + j] = x0[o + j] * t + b[j] + x[o + j];
    }
}

void cross_vector_backward(float *dx, float *dx0, float *dw, float *db, const float *dy,
                           const float *x0, const float *x, const float *s, const float *w, int B,
                           int W)
{
    for (int r = 0; r < B; r++) {
        const int64_t o = (int64_t)r * W;
        float g = 0; /* d loss / d s */
        for (int j = 0; j < W; j++) g += dy[o + j] * x0[o + j];
        for (int j = 0; j < W; j++) {
            dw[j] += g * x[o + j];
            db[j] += dy[o + j];
            if (dx0) dx0[o + j] += dy[o + j] * s[r];
            dx[o + j] = dy[o + j] + g * w[j];
        }
    }
}

void cross_gate_forward(float *y, const float *x0, const float *z, const float *x, int64_t n)
{
#pragma omp parallel for simd if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = x0[i] * z[i] + x[i];
}

void cross_gate_backward(float *dz, float *dx0, const float *dy, const float *x0, const float *z,
                         int64_t n)
{
#pragma omp parallel for simd if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        dz[i] = dy[i] * x0[i];
        if (dx0) dx0[i] += dy[i] * z[i];
    }
}

int dropout_keep(uint64_t seed, int64_t i, float rate)
{
    /* splitmix64 of (seed, i): the same mask on every backend and thread count */
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53 >= rate;
}

void dropout_forward(float *out, const float *in, int64_t n, float rate, uint64_t seed)
{
    const float scale = 1.0f / (1.0f - rate);
#pragma omp parallel for if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) out[i] = dropout_keep(seed, i, rate) ? in[i] * scale : 0.0f;
}

void dropout_backward(float *din, const float *dout, int64_t n, float rate, uint64_t seed)
{
    dropout_forward(din, dout, n, rate, seed);
}

void cols_copy(float *dst, int ldd, const float *src, int lds, int B, int W, int add)
{
#pragma omp parallel for if ((int64_t)B * W > PAR_MIN)
    for (int r = 0; r < B; r++) {
        float *d = dst + (int64_t)r * ldd;
        const float *s = src + (int64_t)r * lds;
        if (add)
            for (int j = 0; j < W; j++) d[j] += s[j];
        else
            memcpy(d, s, (size_t)W * sizeof *d);
    }
}
