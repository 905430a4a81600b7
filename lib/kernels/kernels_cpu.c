#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_blas.h"
#include "kernels/hps_kernels.h"
#include "kernels/kernels_internal.h"

/* Loops shorter than this stay on one thread: waking the team costs more. */
#define PAR_MIN 32768

void hps_set_threads(int n)
{
    static int warned;
    if (n < 1) n = 1;
    /* OpenBLAS follows OpenMP's count and spins when its buffers do not fit */
    int fit = hps_blas_threads_fit(n);
    if (fit < n && fit != warned)
        hps_warnf("the address-space limit (ulimit -v) leaves room for OpenBLAS's buffers of %d thread%s, "
                  "not %d: running %d",
                  fit, fit > 1 ? "s" : "", n, fit);
    if (fit < n) warned = fit;
    omp_set_num_threads(fit);
    openblas_set_num_threads(fit);
}

int hps_max_threads(void) { return omp_get_num_procs(); }

/* ---- fc ----------------------------------------------------------------- */

void fc_forward(float *out, const float *in, const float *w, const float *b, int B, int C, int OC)
{
    /* out = bias rows + in . w^T: the GEMM adds onto the bias, which saves
     * its own pass zeroing out and a second pass adding the bias */
    float beta = 0.0f;
    if (b) {
#pragma omp parallel for if ((int64_t)B * OC > PAR_MIN)
        for (int r = 0; r < B; r++) memcpy(out + (int64_t)r * OC, b, (size_t)OC * sizeof *out);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, OC, C, 1.0f, in, C, w, C, beta, out, OC);
}

HPS_VECTOR_CLONES
void fc_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                 const float *w, int B, int C, int OC)
{
    if (din) /* din[B,C] = dout[B,OC] . w[OC,C] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, C, OC, 1.0f, dout, OC, w, C, 0.0f,
                    din, C);
    if (dw) /* dw[OC,C] += dout^T . in */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, B, 1.0f, dout, OC, in, C, 1.0f,
                    dw, C);
    if (db)
        for (int r = 0; r < B; r++) {
            const float *d = dout + (int64_t)r * OC;
#pragma omp simd
            for (int j = 0; j < OC; j++) db[j] += d[j];
        }
}

/* ---- activations ---------------------------------------------------------- */

HPS_VECTOR_CLONES
void act_forward(float *out, const float *in, int64_t n, hps_act a)
{
    switch (a) {
    case HPS_ACT_NONE:
        if (out != in) memcpy(out, in, (size_t)n * sizeof *out);
        break;
    case HPS_ACT_RELU:
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
        for (int64_t i = 0; i < n; i++) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
        break;
    case HPS_ACT_SIGMOID:
#pragma omp parallel for if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++) out[i] = 1.0f / (1.0f + expf(-in[i]));
        break;
    case HPS_ACT_TANH:
#pragma omp parallel for if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++) out[i] = tanhf(in[i]);
        break;
    }
}

HPS_VECTOR_CLONES
void act_backward(float *din, const float *dout, const float *out, int64_t n, hps_act a)
{
    switch (a) {
    case HPS_ACT_NONE:
        if (din != dout) memcpy(din, dout, (size_t)n * sizeof *din);
        break;
    case HPS_ACT_RELU:
        /* dout loaded unconditionally: a select the compiler vectorizes, not a
         * branch mispredicted on every other element */
#pragma omp parallel for simd if (parallel: n > PAR_MIN)
        for (int64_t i = 0; i < n; i++) {
            float g = dout[i];
            din[i] = out[i] > 0.0f ? g : 0.0f;
        }
        break;
    case HPS_ACT_SIGMOID:
#pragma omp parallel for if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++) din[i] = dout[i] * out[i] * (1.0f - out[i]);
        break;
    case HPS_ACT_TANH:
#pragma omp parallel for if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++) din[i] = dout[i] * (1.0f - out[i] * out[i]);
        break;
    }
}

/* ---- embedding bag -------------------------------------------------------- */

static float bag_scale(const hps_bags *bags, int64_t lo, int64_t hi, hps_pool pool)
{
    if (pool == HPS_POOL_SUM || hi == lo) return 1.0f;
    if (!bags->weights) return 1.0f / (float)(hi - lo);
    /* mean of a weighted bag: divide by the total weight, as EmbeddingBag does */
    float total = 0.0f;
    for (int64_t k = lo; k < hi; k++) total += bags->weights[k];
    return total != 0.0f ? 1.0f / total : 0.0f;
}

/* Rows a gather starts loading ahead of the one it adds: the table is far
 * larger than the caches, and each row is a miss of its own. */
#define ROW_PREFETCH 16

/* x (times w unless plain: a weight of 1.0f changes no bit, so none is
 * applied) into o: stored from zero when first (0.0f + x, the sum from zero
 * bit for bit, signed zeros included, in the pass that would have read the
 * zeros), else added.  Always inlined, as its callers. */
__attribute__((always_inline)) static inline void row_into(float *restrict o, const float *restrict x, float w,
                                                           int plain, int first, int D)
{
    if (first && plain)
        for (int d = 0; d < D; d++) o[d] = 0.0f + x[d];
    else if (first)
        for (int d = 0; d < D; d++) o[d] = 0.0f + w * x[d];
    else if (plain)
        for (int d = 0; d < D; d++) o[d] += x[d];
    else
        for (int d = 0; d < D; d++) o[d] += w * x[d];
}

/* A bag's pooled vector: o = sum over its rows of w_k * row_k, from zero.
 * Unweighted sum pooling (every demo-ctr bag) skips the multiply by 1.0f,
 * which changes no bit: x * 1.0f is x.  The first row is stored from zero
 * (row_into): a zeroing loop of its own became a memset call a bag, a third
 * of the gather's instructions. */
/* Always inlined: each clone of the gather then runs its own vector loops
 * (a call reached the baseline build's). */
__attribute__((always_inline)) static inline void bag_pool(float *restrict o, const float *table,
                                                           const hps_bags *bags, int64_t lo,
                                                           int64_t hi, int64_t nnz, int D,
                                                           float scale)
{
    if (hi == lo) {
        for (int d = 0; d < D; d++) o[d] = 0.0f;
        return;
    }
    const int plain = !bags->weights && scale == 1.0f;
    for (int64_t k = lo; k < hi; k++) {
        if (k + ROW_PREFETCH < nnz) __builtin_prefetch(table + bags->rows[k + ROW_PREFETCH] * D);
        const float *restrict row = table + bags->rows[k] * D;
        const float w = plain ? 1.0f : scale * (bags->weights ? bags->weights[k] : 1.0f);
        row_into(o, row, w, plain, k == lo, D);
    }
}

HPS_VECTOR_CLONES
void embedding_bag_forward(float *out, int ld, const float *table, const hps_bags *bags, int D,
                           hps_pool pool)
{
    /* sample by sample, slot by slot: no division a bag to find its place,
     * and a bag of one 16-float row costs a few vector instructions */
    const int S = bags->S;
    const int64_t nnz = bags->offsets[(int64_t)bags->B * S];
#pragma omp parallel for schedule(static) if ((int64_t)bags->B * S * D > PAR_MIN)
    for (int b = 0; b < bags->B; b++)
        for (int s = 0; s < S; s++) {
            const int64_t bag = (int64_t)b * S + s, lo = bags->offsets[bag], hi = bags->offsets[bag + 1];
            bag_pool(out + (int64_t)b * ld + (int64_t)s * D, table, bags, lo, hi, nnz, D,
                     bag_scale(bags, lo, hi, pool));
        }
}

hps_sparse_grad *hps_sparse_grad_create(int64_t cap, int D)
{
    hps_sparse_grad *g = hps_calloc(1, sizeof *g);
    int64_t slots = 16;
    while (slots < 2 * cap) slots *= 2;
    g->cap = cap;
    g->D = D;
    g->rows = hps_malloc((size_t)(cap ? cap : 1) * sizeof *g->rows);
    g->grad = hps_malloc((size_t)(cap ? cap : 1) * D * sizeof *g->grad);
    g->ht = hps_calloc((size_t)slots, sizeof *g->ht);
    g->at = hps_malloc((size_t)(cap ? cap : 1) * sizeof *g->at);
    g->ht_mask = slots - 1;
    return g;
}

void hps_sparse_grad_free(hps_sparse_grad *g)
{
    if (!g) return;
    free(g->rows);
    free(g->grad);
    free(g->ht);
    free(g->at);
    free(g);
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* Index of row in g, adding it on first sight (*fresh = 1): its gradient
 * row is then unset, and the caller's first add stores 0.0f + x, the sum
 * from zero bit for bit, in the pass that would have read the zeros. */
static int64_t sparse_slot(hps_sparse_grad *g, int64_t row, int *fresh)
{
    int64_t h = (int64_t)(mix64((uint64_t)row) & (uint64_t)g->ht_mask);
    for (;; h = (h + 1) & g->ht_mask) {
        int64_t v = g->ht[h];
        if (v == 0) {
            HPS_CHECK(g->n < g->cap);
            int64_t idx = g->n++;
            g->ht[h] = idx + 1;
            g->at[idx] = h;
            g->rows[idx] = row;
            *fresh = 1;
            return idx;
        }
        if (g->rows[v - 1] == row) {
            *fresh = 0;
            return v - 1;
        }
    }
}

/* Empties g, clearing only the hash slots used last time: cheaper than the
 * whole table.  Each index took one slot, noted when it did: no row is
 * hashed or probed a second time. */
static void sparse_grad_reset(hps_sparse_grad *g)
{
    for (int64_t i = 0; i < g->n; i++) g->ht[g->at[i]] = 0;
    g->n = 0;
}

HPS_VECTOR_CLONES
void hps_sparse_grad_merge(hps_sparse_grad *dst, hps_sparse_grad *const *src, int n)
{
    sparse_grad_reset(dst);
    for (int k = 0; k < n; k++) {
        HPS_CHECK(src[k]->D == dst->D);
        for (int64_t i = 0; i < src[k]->n; i++) {
            int fresh;
            float *gr = dst->grad + sparse_slot(dst, src[k]->rows[i], &fresh) * dst->D;
            const float *add = src[k]->grad + i * dst->D;
            row_into(gr, add, 1.0f, 1, fresh, dst->D);
        }
    }
}

HPS_VECTOR_CLONES
void embedding_bag_backward(hps_sparse_grad *g, const float *dout, int ld, const hps_bags *bags,
                            int D, hps_pool pool)
{
    HPS_CHECK(g->D == D);
    sparse_grad_reset(g);
    const int S = bags->S;
    for (int b = 0; b < bags->B; b++)
        for (int s = 0; s < S; s++) {
            const float *restrict d = dout + (int64_t)b * ld + (int64_t)s * D;
            const int64_t bag = (int64_t)b * S + s, lo = bags->offsets[bag], hi = bags->offsets[bag + 1];
            const float scale = bag_scale(bags, lo, hi, pool);
            /* as in bag_pool: a weight of 1.0f changes no bit, so none is applied */
            const int plain = !bags->weights && scale == 1.0f;
            for (int64_t k = lo; k < hi; k++) {
                int fresh;
                float *restrict gr = g->grad + sparse_slot(g, bags->rows[k], &fresh) * D;
                const float w = plain ? 1.0f : scale * (bags->weights ? bags->weights[k] : 1.0f);
                row_into(gr, d, w, plain, fresh, D);
            }
        }
}

HPS_VECTOR_CLONES
void sparse_adagrad(float *table, float *accum, const hps_sparse_grad *g, float lr, float eps)
{
    const int D = g->D;
#pragma omp parallel for if (g->n * D > PAR_MIN)
    for (int64_t i = 0; i < g->n; i++) {
        if (i + ROW_PREFETCH < g->n) {
            __builtin_prefetch(table + g->rows[i + ROW_PREFETCH] * D, 1);
            __builtin_prefetch(accum + g->rows[i + ROW_PREFETCH] * D, 1);
        }
        float *w = table + g->rows[i] * D, *a = accum + g->rows[i] * D;
        const float *gr = g->grad + i * D;
#pragma omp simd
        for (int d = 0; d < D; d++) {
            a[d] += gr[d] * gr[d];
            w[d] -= lr * gr[d] / (sqrtf(a[d]) + eps);
        }
    }
}

void sparse_rowwise_adagrad(float *table, float *accum, const hps_sparse_grad *g, float lr, float eps)
{
    const int D = g->D;
#pragma omp parallel for if (g->n * D > PAR_MIN)
    for (int64_t i = 0; i < g->n; i++) {
        float *w = table + g->rows[i] * D;
        const float *gr = g->grad + i * D;
        float sq = 0;
        for (int d = 0; d < D; d++) sq += gr[d] * gr[d];
        float *a = accum + g->rows[i];
        *a += sq / (float)D;
        const float step = lr / (sqrtf(*a) + eps);
        for (int d = 0; d < D; d++) w[d] -= step * gr[d];
    }
}

/* ---- concat ---------------------------------------------------------------- */

void concat_forward(float *out, const float *emb, const float *dense, int B, int E, int W)
{
    for (int b = 0; b < B; b++) {
        float *o = out + (int64_t)b * (E + W);
        memcpy(o, emb + (int64_t)b * E, (size_t)E * sizeof *o);
        if (W) memcpy(o + E, dense + (int64_t)b * W, (size_t)W * sizeof *o);
    }
}

void concat_backward(float *demb, float *ddense, const float *dout, int B, int E, int W)
{
    for (int b = 0; b < B; b++) {
        const float *d = dout + (int64_t)b * (E + W);
        if (demb) memcpy(demb + (int64_t)b * E, d, (size_t)E * sizeof *d);
        if (ddense && W) memcpy(ddense + (int64_t)b * W, d + E, (size_t)W * sizeof *d);
    }
}

/* ---- dot interaction ------------------------------------------------------- */

/* Sample b's n vectors side by side: v[i] points at vector i, the dense part
 * first when W > 0 (then W == D). */
static void dot_vectors(const float **v, const float *emb, const float *dense, int b, int V,
                        int D, int W)
{
    int i = 0;
    if (W) v[i++] = dense + (int64_t)b * W;
    for (int e = 0; e < V; e++) v[i++] = emb + ((int64_t)b * V + e) * D;
}

/* Lanes of the dot interaction's register blocks: 8 floats, which the
 * compiler keeps in vector registers across the loop that fills them. */
#define DOT_LANES 8

HPS_VECTOR_CLONES
void dot_forward(float *out, const float *emb, const float *dense, int B, int V, int D, int W)
{
    const int n = V + (W ? 1 : 0), width = W + n * (n - 1) / 2;
    const int np = (n + DOT_LANES - 1) / DOT_LANES * DOT_LANES;
#pragma omp parallel if ((int64_t)B * width * D > PAR_MIN)
    {
        /* the vectors transposed, t[d*np + j], zero past n: the dots of
         * vector i with DOT_LANES vectors j at once are then a block of
         * registers that every d adds v_i[d] * t[d][j..] into */
        const float **v = hps_malloc((size_t)n * sizeof *v);
        float *t = hps_calloc((size_t)np * D, sizeof *t);
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            float *o = out + (int64_t)b * width;
            dot_vectors(v, emb, dense, b, V, D, W);
            for (int j = 0; j < n; j++)
                for (int d = 0; d < D; d++) t[(int64_t)d * np + j] = v[j][d];
            if (W) memcpy(o, v[0], (size_t)W * sizeof *o);
            for (int i = 1; i < n; i++) {
                float *z = o + W + i * (i - 1) / 2; /* pairs (i, 0..i-1) */
                for (int j0 = 0; j0 < i; j0 += DOT_LANES) {
                    float acc[DOT_LANES] = {0};
                    for (int d = 0; d < D; d++) {
                        const float a = v[i][d], *td = t + (int64_t)d * np + j0;
                        for (int k = 0; k < DOT_LANES; k++) acc[k] += a * td[k];
                    }
                    int w = i - j0 < DOT_LANES ? i - j0 : DOT_LANES;
                    memcpy(z + j0, acc, (size_t)w * sizeof *z);
                }
            }
        }
        free(t);
        free(v);
    }
}

/* dv[0..D) = sum over j of G[j] v[j]: DOT_LANES columns at a time in registers. */
static void dot_gather_rows(float *dv, const float *G, const float **v, int n, int D)
{
    int d0 = 0;
    for (; d0 + DOT_LANES <= D; d0 += DOT_LANES) {
        float acc[DOT_LANES] = {0};
        for (int j = 0; j < n; j++) {
            const float a = G[j], *vj = v[j] + d0;
            for (int k = 0; k < DOT_LANES; k++) acc[k] += a * vj[k];
        }
        memcpy(dv + d0, acc, sizeof acc);
    }
    for (; d0 < D; d0++) {
        float s = 0.0f;
        for (int j = 0; j < n; j++) s += G[j] * v[j][d0];
        dv[d0] = s;
    }
}

HPS_VECTOR_CLONES
void dot_backward(float *demb, float *ddense, const float *dout, const float *emb,
                  const float *dense, int B, int V, int D, int W)
{
    const int n = V + (W ? 1 : 0), width = W + n * (n - 1) / 2;
#pragma omp parallel if ((int64_t)B * width * D > PAR_MIN)
    {
        /* dv_i = sum over j != i of g(i,j) v_j: the pair gradients spread
         * into a symmetric n x n matrix G with a zero diagonal, then dV = G V */
        const float **v = hps_malloc((size_t)n * sizeof *v);
        float *G = hps_malloc((size_t)n * n * sizeof *G);
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            const float *g = dout + (int64_t)b * width;
            dot_vectors(v, emb, dense, b, V, D, W);
            for (int i = 0; i < n; i++) G[(int64_t)i * n + i] = 0.0f;
            for (int i = 1; i < n; i++) {
                const float *gi = g + W + i * (i - 1) / 2;
                for (int j = 0; j < i; j++) G[(int64_t)i * n + j] = G[(int64_t)j * n + i] = gi[j];
            }
            if (W && ddense) { /* the dense vector also passes straight through */
                float *dv = ddense + (int64_t)b * W;
                dot_gather_rows(dv, G, v, n, D);
                for (int d = 0; d < D; d++) dv[d] += g[d];
            }
            if (demb)
                for (int i = W ? 1 : 0; i < n; i++)
                    dot_gather_rows(demb + ((int64_t)b * V + i - (W ? 1 : 0)) * D,
                                    G + (int64_t)i * n, v, n, D);
        }
        free(G);
        free(v);
    }
}

HPS_VECTOR_CLONES
void vec_scale(float *x, int64_t n, float a)
{
#pragma omp parallel for if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) x[i] *= a;
}

HPS_VECTOR_CLONES
void vec_axpy(float *y, const float *x, int64_t n, float a)
{
#pragma omp parallel for if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

/* ---- losses ------------------------------------------------------------------ */

double logloss_forward(float *prob, const float *z, const float *y, int B)
{
    double total = 0.0;
    for (int b = 0; b < B; b++) {
        /* log(1+e^z) - y z, written to stay finite for large |z| */
        double zb = z[b];
        double softplus = zb > 0 ? zb + log1p(exp(-zb)) : log1p(exp(zb));
        total += softplus - y[b] * zb;
        if (prob) prob[b] = (float)(1.0 / (1.0 + exp(-zb)));
    }
    return total / B;
}

void logloss_backward(float *dz, const float *z, const float *y, int B)
{
    for (int b = 0; b < B; b++) dz[b] = (float)((1.0 / (1.0 + exp(-(double)z[b])) - y[b]) / B);
}

double softmax_forward(float *prob, const float *z, const float *y, int B, int C)
{
    double total = 0.0;
    for (int b = 0; b < B; b++) {
        const float *zb = z + (int64_t)b * C;
        float *pb = prob + (int64_t)b * C;
        float mx = zb[0];
        for (int c = 1; c < C; c++) mx = zb[c] > mx ? zb[c] : mx;
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += exp((double)zb[c] - mx);
        for (int c = 0; c < C; c++) pb[c] = (float)(exp((double)zb[c] - mx) / sum);
        int label = (int)y[b];
        total += -((double)zb[label] - mx - log(sum));
    }
    return total / B;
}

void softmax_backward(float *dz, const float *prob, const float *y, int B, int C)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            dz[(int64_t)b * C + c] =
                (prob[(int64_t)b * C + c] - (c == (int)y[b] ? 1.0f : 0.0f)) / (float)B;
}
