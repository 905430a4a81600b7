/* Every CPU kernel against a double-precision reference: the forward output
 * must match, and the backward must match central finite differences of the
 * reference loss L = sum(out * r) (r random), computed in double. */
#include <string.h>

#include "hps_test.h"
#include "kernels/hps_backend.h"
#include "kernels/hps_kernels.h"
#include "model/hps_model.h"

#define FD_STEP 1e-5
#define TOL 2e-4

typedef double (*ref_loss_fn)(void *ctx, const double *x);

/* Central differences of f at x, into g (n values). */
static void finite_diff(ref_loss_fn f, void *ctx, double *x, size_t n, double *g)
{
    for (size_t j = 0; j < n; j++) {
        double keep = x[j];
        x[j] = keep + FD_STEP;
        double up = f(ctx, x);
        x[j] = keep - FD_STEP;
        double down = f(ctx, x);
        x[j] = keep;
        g[j] = (up - down) / (2 * FD_STEP);
    }
}

static void check_grad(ref_loss_fn f, void *ctx, double *x, const float *analytic, size_t n,
                       const char *what)
{
    double *g = malloc(n * sizeof *g);
    finite_diff(f, ctx, x, n, g);
    for (size_t j = 0; j < n; j++) assert_close(analytic[j], g[j], TOL, what, j);
    free(g);
}

static double dot_r(const double *out, const double *r, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += out[i] * r[i];
    return s;
}

/* ---- fc --------------------------------------------------------------------- */

typedef struct {
    int B, C, OC;
    double *r;
} fc_ctx;

static double fc_ref(void *vctx, const double *x)
{
    fc_ctx *c = vctx;
    const double *in = x, *w = x + c->B * c->C, *b = w + c->OC * c->C;
    double L = 0;
    for (int i = 0; i < c->B; i++)
        for (int o = 0; o < c->OC; o++) {
            double s = b[o];
            for (int k = 0; k < c->C; k++) s += in[i * c->C + k] * w[o * c->C + k];
            L += s * c->r[i * c->OC + o];
        }
    return L;
}

static void test_fc(void **state)
{
    (void)state;
    hps_rng rng;
    hps_rng_seed(&rng, 1);
    fc_ctx c = {.B = 5, .C = 7, .OC = 3};
    size_t n_in = 5 * 7, n_w = 3 * 7, n = n_in + n_w + 3;
    double *x = malloc(n * sizeof *x);
    float *xf = malloc(n * sizeof *xf), *out = malloc(15 * sizeof *out);
    float *grad = calloc(n, sizeof *grad), *rf = malloc(15 * sizeof *rf);
    c.r = malloc(15 * sizeof *c.r);
    fill_random(&rng, xf, x, n);
    fill_random(&rng, rf, c.r, 15);
    fc_forward(out, xf, xf + n_in, xf + n_in + n_w, c.B, c.C, c.OC);
    double ref_out = 0;
    for (int i = 0; i < 15; i++) ref_out += out[i] * c.r[i];
    assert_close(ref_out, fc_ref(&c, x), TOL, "fc forward", 0);
    fc_backward(grad, grad + n_in, grad + n_in + n_w, rf, xf, xf + n_in, c.B, c.C, c.OC);
    check_grad(fc_ref, &c, x, grad, n, "fc grad");
    free(x), free(xf), free(out), free(grad), free(rf), free(c.r);
}

/* ---- activations --------------------------------------------------------------- */

typedef struct {
    hps_act act;
    double *r;
    int n;
} act_ctx;

static double act_ref1(hps_act a, double v)
{
    switch (a) {
    case HPS_ACT_RELU: return v > 0 ? v : 0;
    case HPS_ACT_SIGMOID: return 1 / (1 + exp(-v));
    case HPS_ACT_TANH: return tanh(v);
    default: return v;
    }
}

static double act_ref(void *vctx, const double *x)
{
    act_ctx *c = vctx;
    double L = 0;
    for (int i = 0; i < c->n; i++) L += act_ref1(c->act, x[i]) * c->r[i];
    return L;
}

static void test_activations(void **state)
{
    (void)state;
    hps_rng rng;
    hps_rng_seed(&rng, 2);
    enum { N = 40 };
    for (int a = HPS_ACT_NONE; a <= HPS_ACT_TANH; a++) {
        act_ctx c = {.act = a, .n = N};
        double x[N], r[N];
        float xf[N], out[N], rf[N], din[N];
        c.r = r;
        fill_random(&rng, xf, x, N);
        for (int i = 0; i < N; i++) /* keep away from relu's kink */
            if (fabs(x[i]) < 1e-3) x[i] = xf[i] = 0.5f;
        fill_random(&rng, rf, r, N);
        act_forward(out, xf, N, a);
        for (int i = 0; i < N; i++) assert_close(out[i], act_ref1(a, x[i]), 1e-6, hps_act_names[a], i);
        act_backward(din, rf, out, N, a);
        check_grad(act_ref, &c, x, din, N, hps_act_names[a]);
        /* in place, as the executor calls it */
        act_forward(xf, xf, N, a);
        for (int i = 0; i < N; i++) assert_close(xf[i], out[i], 0, "in-place", i);
    }
}

/* ---- embedding bag ----------------------------------------------------------------- */

enum { EB = 4, ES = 3, ED = 5, EROWS = 9 };

typedef struct {
    hps_bags bags;
    hps_pool pool;
    double *r;
} emb_ctx;

static double emb_ref(void *vctx, const double *table)
{
    emb_ctx *c = vctx;
    double L = 0;
    for (int bag = 0; bag < EB * ES; bag++) {
        int64_t lo = c->bags.offsets[bag], hi = c->bags.offsets[bag + 1];
        double total = 0;
        for (int64_t k = lo; k < hi; k++) total += c->bags.weights ? c->bags.weights[k] : 1.0;
        double scale = c->pool == HPS_POOL_MEAN && hi > lo && total != 0 ? 1.0 / total : 1.0;
        for (int d = 0; d < ED; d++) {
            double s = 0;
            for (int64_t k = lo; k < hi; k++)
                s += (c->bags.weights ? c->bags.weights[k] : 1.0) * table[c->bags.rows[k] * ED + d];
            L += scale * s * c->r[bag * ED + d];
        }
    }
    return L;
}

static void test_embedding_bag(void **state)
{
    (void)state;
    hps_rng rng;
    hps_rng_seed(&rng, 3);
    int64_t offsets[EB * ES + 1], rows[64];
    float weights[64];
    offsets[0] = 0;
    for (int bag = 0; bag < EB * ES; bag++) { /* bags of 0..3 rows, repeats included */
        int size = (int)hps_rng_below(&rng, 4);
        for (int k = 0; k < size; k++) {
            rows[offsets[bag] + k] = (int64_t)hps_rng_below(&rng, EROWS);
            weights[offsets[bag] + k] = hps_rng_range(&rng, 0.5f, 2.0f);
        }
        offsets[bag + 1] = offsets[bag] + size;
    }
    for (int pool = HPS_POOL_SUM; pool <= HPS_POOL_MEAN; pool++)
        for (int weighted = 0; weighted <= 1; weighted++) {
            emb_ctx c = {.bags = {.B = EB, .S = ES, .offsets = offsets, .rows = rows,
                                  .weights = weighted ? weights : NULL},
                         .pool = pool};
            double table[EROWS * ED], r[EB * ES * ED];
            float tf[EROWS * ED], rf[EB * ES * ED], out[EB * ES * ED], dense_grad[EROWS * ED];
            c.r = r;
            fill_random(&rng, tf, table, EROWS * ED);
            fill_random(&rng, rf, r, EB * ES * ED);
            embedding_bag_forward(out, ES * ED, tf, &c.bags, ED, pool);
            double L = 0;
            for (int i = 0; i < EB * ES * ED; i++) L += out[i] * r[i];
            assert_close(L, emb_ref(&c, table), TOL, "embedding forward", pool * 2 + weighted);
            hps_sparse_grad *g = hps_sparse_grad_create(offsets[EB * ES], ED);
            for (int rep = 0; rep < 2; rep++) { /* the second pass reuses the hash table */
                embedding_bag_backward(g, rf, ES * ED, &c.bags, ED, pool);
                memset(dense_grad, 0, sizeof dense_grad);
                for (int64_t i = 0; i < g->n; i++) {
                    for (int64_t j = 0; j < i; j++) assert_true(g->rows[i] != g->rows[j]);
                    for (int d = 0; d < ED; d++) dense_grad[g->rows[i] * ED + d] = g->grad[i * ED + d];
                }
                check_grad(emb_ref, &c, table, dense_grad, EROWS * ED, "embedding grad");
            }
            hps_sparse_grad_free(g);
        }
}

/* A sparse gradient reused over batches of other rows (its hash table
 * nearly full, so clusters form and wrap) equals a fresh one each time, bit
 * for bit: the reset clears every slot the last batch took and no other. */
static void test_sparse_grad_reuse(void **state)
{
    (void)state;
    enum { B = 7, S = 3, D = 5, CAP = 3 * B * S };
    hps_rng rng;
    hps_rng_seed(&rng, 11);
    hps_sparse_grad *reused = hps_sparse_grad_create(CAP, D);
    float dout[B * S * D];
    for (int i = 0; i < B * S * D; i++) dout[i] = hps_rng_range(&rng, -1.0f, 1.0f);
    for (int batch = 0; batch < 6; batch++) {
        int64_t offsets[B * S + 1], rows[CAP];
        offsets[0] = 0;
        /* 1 to 3 rows a bag, then one a bag, of rows a batch before may have
         * held at other indices; repeats included */
        for (int bag = 0; bag < B * S; bag++) {
            int size = batch % 2 ? 1 : 1 + (int)hps_rng_below(&rng, 3);
            for (int k = 0; k < size; k++) rows[offsets[bag] + k] = (int64_t)hps_rng_below(&rng, 50);
            offsets[bag + 1] = offsets[bag] + size;
        }
        hps_bags bags = {.B = B, .S = S, .offsets = offsets, .rows = rows};
        hps_sparse_grad *fresh = hps_sparse_grad_create(CAP, D);
        embedding_bag_backward(fresh, dout, S * D, &bags, D, HPS_POOL_SUM);
        embedding_bag_backward(reused, dout, S * D, &bags, D, HPS_POOL_SUM);
        assert_int_equal(reused->n, fresh->n);
        assert_memory_equal(reused->rows, fresh->rows, (size_t)fresh->n * sizeof *fresh->rows);
        assert_memory_equal(reused->grad, fresh->grad, (size_t)fresh->n * D * sizeof *fresh->grad);
        hps_sparse_grad_free(fresh);
    }
    hps_sparse_grad_free(reused);
}

/* A bag's sum starts from +0.0f, as the first row's store is 0.0f + x: a
 * bag of negative zeros pools to +0.0f, an empty bag to zeros, and a new
 * gradient row of negative zeros is +0.0f too (a copy would keep the sign). */
static void test_embedding_sum_from_zero(void **state)
{
    (void)state;
    enum { D = 5 };
    const float table[3 * D] = {-0.0f, -0.0f, -0.0f, -0.0f, -0.0f, 1, 2, 3, 4, 5,
                                -0.0f, -0.0f, -0.0f, -0.0f, -0.0f};
    const int64_t offsets[] = {0, 1, 1, 3, 4}, rows[] = {0, 0, 2, 1};
    for (int weighted = 0; weighted <= 1; weighted++) {
        const float weights[] = {2.0f, 1.0f, 3.0f, 0.5f};
        hps_bags bags = {.B = 2, .S = 2, .offsets = offsets, .rows = rows,
                         .weights = weighted ? weights : NULL};
        float out[4 * D], want[4 * D] = {0};
        for (int d = 0; d < D; d++) want[3 * D + d] = (weighted ? 0.5f : 1.0f) * table[D + d];
        memset(out, 0xff, sizeof out);
        embedding_bag_forward(out, 2 * D, table, &bags, D, HPS_POOL_SUM);
        assert_memory_equal(out, want, sizeof want); /* +0.0f, not -0.0f, in bags 0 to 2 */
        hps_sparse_grad *g = hps_sparse_grad_create(4, D);
        float dout[4 * D];
        for (int i = 0; i < 4 * D; i++) dout[i] = -0.0f;
        embedding_bag_backward(g, dout, 2 * D, &bags, D, HPS_POOL_SUM);
        assert_int_equal(g->n, 3);
        const float zeros[3 * D] = {0};
        assert_memory_equal(g->grad, zeros, sizeof zeros);
        hps_sparse_grad_free(g);
    }
}

static void test_sparse_adagrad(void **state)
{
    (void)state;
    hps_sparse_grad *g = hps_sparse_grad_create(2, 2);
    float table[3 * 2] = {1, 1, 1, 1, 1, 1}, accum[3 * 2] = {0};
    g->n = 1;
    g->rows[0] = 2;
    g->grad[0] = 2.0f, g->grad[1] = -1.0f;
    sparse_adagrad(table, accum, g, 0.1f, 0.0f);
    /* accum = g^2; step = lr * g / |g| = +-lr; untouched rows stay */
    assert_close(table[4], 0.9, 1e-6, "adagrad", 4);
    assert_close(table[5], 1.1, 1e-6, "adagrad", 5);
    assert_close(accum[4], 4.0, 1e-6, "accum", 4);
    for (int i = 0; i < 4; i++) assert_close(table[i], 1.0, 0, "untouched", i);
    hps_sparse_grad_free(g);
}

/* ---- concat and dot interaction ----------------------------------------------------------- */

typedef struct {
    int B, V, D, W;
    double *r;
} merge_ctx;

static double concat_ref(void *vctx, const double *x)
{
    merge_ctx *c = vctx;
    int E = c->V * c->D;
    double L = 0;
    for (int b = 0; b < c->B; b++) {
        for (int e = 0; e < E; e++) L += x[b * E + e] * c->r[b * (E + c->W) + e];
        for (int w = 0; w < c->W; w++) L += x[c->B * E + b * c->W + w] * c->r[b * (E + c->W) + E + w];
    }
    return L;
}

static void test_concat(void **state)
{
    (void)state;
    hps_rng rng;
    hps_rng_seed(&rng, 4);
    merge_ctx c = {.B = 3, .V = 2, .D = 3, .W = 4};
    enum { N = 3 * 6 + 3 * 4, OUT = 3 * 10 };
    double x[N], r[OUT];
    float xf[N], rf[OUT], out[OUT], grad[N];
    c.r = r;
    fill_random(&rng, xf, x, N);
    fill_random(&rng, rf, r, OUT);
    concat_forward(out, xf, xf + 18, 3, 6, 4);
    double L = 0;
    for (int i = 0; i < OUT; i++) L += out[i] * r[i];
    assert_close(L, concat_ref(&c, x), TOL, "concat forward", 0);
    concat_backward(grad, grad + 18, rf, 3, 6, 4);
    check_grad(concat_ref, &c, x, grad, N, "concat grad");
}

static double dot_ref(void *vctx, const double *x)
{
    merge_ctx *c = vctx;
    const double *emb = x, *dense = x + c->B * c->V * c->D;
    int n = c->V + (c->W ? 1 : 0), width = c->W + n * (n - 1) / 2;
    double L = 0;
    for (int b = 0; b < c->B; b++) {
        const double *r = c->r + b * width;
        for (int w = 0; w < c->W; w++) L += dense[b * c->W + w] * r[w];
        int k = c->W;
        for (int i = 1; i < n; i++)
            for (int j = 0; j < i; j++, k++) {
                const double *vi = c->W && i == 0 ? dense + b * c->W
                                                  : emb + (b * c->V + i - (c->W ? 1 : 0)) * c->D;
                const double *vj = c->W && j == 0 ? dense + b * c->W
                                                  : emb + (b * c->V + j - (c->W ? 1 : 0)) * c->D;
                L += dot_r(vi, vj, c->D) * r[k];
            }
    }
    return L;
}

/* A gradient taken alone (the other pointer NULL) equals the one taken together. */
static void check_dot_alone(const merge_ctx *c, const float *xf, const float *rf,
                            const float *grad)
{
    size_t ne = (size_t)c->B * c->V * c->D, nd = (size_t)c->B * c->W;
    float *alone = malloc((ne + nd + 1) * sizeof *alone);
    const float *dense = xf + ne;
    dot_backward(alone, NULL, rf, xf, dense, c->B, c->V, c->D, c->W);
    assert_memory_equal(alone, grad, ne * sizeof *alone);
    if (c->W) {
        dot_backward(NULL, alone + ne, rf, xf, dense, c->B, c->V, c->D, c->W);
        assert_memory_equal(alone + ne, grad + ne, nd * sizeof *alone);
    }
    free(alone);
}

static void test_dot_interaction(void **state)
{
    (void)state;
    hps_rng rng;
    hps_rng_seed(&rng, 5);
    /* a small case, and dlrm-criteo's shape: 26 vectors of 8 and the dense one */
    const int shapes[][3] = {{3, 4, 3}, {2, 26, 8}};
    for (int s = 0; s < 2; s++)
        for (int with_dense = 0; with_dense <= 1; with_dense++) {
            merge_ctx c = {.B = shapes[s][0], .V = shapes[s][1], .D = shapes[s][2]};
            c.W = with_dense ? c.D : 0;
            int n = c.V + with_dense, width = c.W + n * (n - 1) / 2;
            size_t nx = (size_t)c.B * c.V * c.D + (size_t)c.B * c.W, nout = (size_t)c.B * width;
            double *x = malloc(nx * sizeof *x), *r = malloc(nout * sizeof *r);
            float *xf = malloc(nx * sizeof *xf), *rf = malloc(nout * sizeof *rf);
            float *out = malloc(nout * sizeof *out), *grad = malloc(nx * sizeof *grad);
            c.r = r;
            fill_random(&rng, xf, x, nx);
            fill_random(&rng, rf, r, nout);
            float *dense = xf + c.B * c.V * c.D;
            dot_forward(out, xf, dense, c.B, c.V, c.D, c.W);
            double L = 0;
            for (size_t i = 0; i < nout; i++) L += out[i] * r[i];
            assert_close(L, dot_ref(&c, x), TOL, "dot forward", 2 * s + with_dense);
            dot_backward(grad, grad + c.B * c.V * c.D, rf, xf, dense, c.B, c.V, c.D, c.W);
            check_grad(dot_ref, &c, x, grad, nx, "dot grad");
            check_dot_alone(&c, xf, rf, grad);
            free(x), free(r), free(xf), free(rf), free(out), free(grad);
        }
}

/* ---- losses -------------------------------------------------------------------------------- */

typedef struct {
    int B, C;
    const float *y;
} loss_ctx;

static double logloss_ref(void *vctx, const double *z)
{
    loss_ctx *c = vctx;
    double L = 0;
    for (int b = 0; b < c->B; b++) {
        double p = 1 / (1 + exp(-z[b]));
        L -= c->y[b] * log(p) + (1 - c->y[b]) * log(1 - p);
    }
    return L / c->B;
}

static void test_logloss(void **state)
{
    (void)state;
    hps_rng rng;
    hps_rng_seed(&rng, 6);
    enum { B = 9 };
    double z[B];
    float zf[B], y[B], prob[B], dz[B];
    fill_random(&rng, zf, z, B);
    for (int b = 0; b < B; b++) y[b] = (float)hps_rng_below(&rng, 2), z[b] = zf[b] *= 4;
    loss_ctx c = {.B = B, .y = y};
    assert_close(logloss_forward(prob, zf, y, B), logloss_ref(&c, z), 1e-6, "logloss", 0);
    for (int b = 0; b < B; b++) assert_close(prob[b], 1 / (1 + exp(-z[b])), 1e-6, "prob", b);
    logloss_backward(dz, zf, y, B);
    check_grad(logloss_ref, &c, z, dz, B, "logloss grad");
    /* large logits stay finite */
    float big[2] = {200.0f, -200.0f}, yb[2] = {0.0f, 1.0f};
    assert_close(logloss_forward(NULL, big, yb, 2), 200.0, 1e-6, "logloss big", 0);
}

static double softmax_ref(void *vctx, const double *z)
{
    loss_ctx *c = vctx;
    double L = 0;
    for (int b = 0; b < c->B; b++) {
        double sum = 0;
        for (int k = 0; k < c->C; k++) sum += exp(z[b * c->C + k]);
        L -= z[b * c->C + (int)c->y[b]] - log(sum);
    }
    return L / c->B;
}

static void test_softmax(void **state)
{
    (void)state;
    hps_rng rng;
    hps_rng_seed(&rng, 7);
    enum { B = 4, C = 5 };
    double z[B * C];
    float zf[B * C], y[B], prob[B * C], dz[B * C];
    fill_random(&rng, zf, z, B * C);
    for (int b = 0; b < B; b++) y[b] = (float)hps_rng_below(&rng, C);
    loss_ctx c = {.B = B, .C = C, .y = y};
    assert_close(softmax_forward(prob, zf, y, B, C), softmax_ref(&c, z), 1e-6, "softmax", 0);
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int k = 0; k < C; k++) s += prob[b * C + k];
        assert_close(s, 1.0, 1e-6, "softmax sums to 1", b);
    }
    softmax_backward(dz, prob, y, B, C);
    check_grad(softmax_ref, &c, z, dz, B * C, "softmax grad");
}

/* ---- the vector clones -------------------------------------------------------------- */

/* The loops outside BLAS run as the AVX2 or AVX-512 clone this CPU picks
 * (kernels_internal.h); each must compute what the plain loop written here
 * (this file is compiled for the baseline x86-64) computes, on lengths with
 * a tail past any vector width, and past the length that goes parallel. */
static float lcg(uint32_t *s) { return (float)((*s = *s * 1664525u + 1013904223u) >> 8) / 8388608.0f - 1.0f; }

static void assert_same(const float *got, const float *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (fabsf(got[i] - want[i]) > 1e-6f * fmaxf(1.0f, fabsf(want[i])))
            fail_msg("%s[%lld]: %.9g, the plain loop %.9g", what, (long long)i, got[i], want[i]);
}

static void test_vector_clones(void **state)
{
    (void)state;
    const int64_t lengths[] = {1, 7, 67, 100003};
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        int64_t n = lengths[li];
        float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
        float *got = malloc((size_t)n * sizeof *got), *want = malloc((size_t)n * sizeof *want);
        float *m = malloc((size_t)n * sizeof *m), *v = malloc((size_t)n * sizeof *v);
        float *m2 = malloc((size_t)n * sizeof *m2), *v2 = malloc((size_t)n * sizeof *v2);
        uint32_t seed = 7;
        for (int64_t i = 0; i < n; i++) x[i] = 4 * lcg(&seed), y[i] = lcg(&seed);
        for (int a = HPS_ACT_RELU; a <= HPS_ACT_TANH; a++) {
            act_forward(got, x, n, (hps_act)a);
            for (int64_t i = 0; i < n; i++)
                want[i] = a == HPS_ACT_RELU      ? (x[i] > 0.0f ? x[i] : 0.0f)
                          : a == HPS_ACT_SIGMOID ? 1.0f / (1.0f + expf(-x[i]))
                                                 : tanhf(x[i]);
            assert_same(got, want, n, hps_act_names[a]);
            act_backward(got, y, want, n, (hps_act)a);
            for (int64_t i = 0; i < n; i++) {
                float o = want[i];
                want[i] = a == HPS_ACT_RELU      ? (o > 0.0f ? y[i] : 0.0f)
                          : a == HPS_ACT_SIGMOID ? y[i] * o * (1.0f - o)
                                                 : y[i] * (1.0f - o * o);
            }
            assert_same(got, want, n, "act_backward");
        }
        memcpy(got, y, (size_t)n * sizeof *got);
        vec_axpy(got, x, n, 0.3f);
        for (int64_t i = 0; i < n; i++) want[i] = y[i] + 0.3f * x[i];
        assert_same(got, want, n, "vec_axpy");
        vec_scale(got, n, -1.7f);
        for (int64_t i = 0; i < n; i++) want[i] *= -1.7f;
        assert_same(got, want, n, "vec_scale");
        /* Adam, step 3, from the same moments */
        for (int64_t i = 0; i < n; i++) m[i] = m2[i] = 0.1f * y[i], v[i] = v2[i] = 0.01f * x[i] * x[i];
        memcpy(got, y, (size_t)n * sizeof *got);
        memcpy(want, y, (size_t)n * sizeof *want);
        adam_update(got, x, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 3);
        const float c1 = 1.0f - powf(0.9f, 3.0f), c2 = 1.0f - powf(0.999f, 3.0f);
        const float step = 1e-3f / c1, rsqrt_c2 = 1.0f / sqrtf(c2);
        for (int64_t i = 0; i < n; i++) {
            float mi = 0.9f * m2[i] + (1.0f - 0.9f) * x[i];
            float vi = 0.999f * v2[i] + (1.0f - 0.999f) * x[i] * x[i];
            m2[i] = mi, v2[i] = vi;
            want[i] -= step * mi / (sqrtf(vi) * rsqrt_c2 + 1e-8f);
        }
        assert_same(got, want, n, "adam p");
        assert_same(m, m2, n, "adam m");
        assert_same(v, v2, n, "adam v");
        free(x), free(y), free(got), free(want), free(m), free(v), free(m2), free(v2);
    }
    /* gathers, pooling and AdaGrad on rows of 13 floats (a tail past every width) */
    enum { D = 13, ROWS = 50, B = 300, S = 3 };
    float *table = malloc(ROWS * D * sizeof *table), *accum = calloc(ROWS * D, sizeof *accum);
    float *out = malloc(B * S * D * sizeof *out), *ref = calloc(B * S * D, sizeof *ref);
    int64_t offsets[B * S + 1], rows[B * S * 2];
    float weights[B * S * 2];
    uint32_t seed = 11;
    for (int i = 0; i < ROWS * D; i++) table[i] = lcg(&seed);
    offsets[0] = 0;
    for (int bag = 0; bag < B * S; bag++) {
        int k = bag % 3; /* 0, 1 or 2 rows */
        offsets[bag + 1] = offsets[bag] + k;
        for (int j = 0; j < k; j++) {
            rows[offsets[bag] + j] = (int64_t)((lcg(&seed) + 1.0f) * 0.5f * (ROWS - 1));
            weights[offsets[bag] + j] = lcg(&seed) + 2.0f;
        }
    }
    hps_bags bags = {.B = B, .S = S, .offsets = offsets, .rows = rows, .weights = weights};
    embedding_bag_forward(out, S * D, table, &bags, D, HPS_POOL_SUM);
    for (int bag = 0; bag < B * S; bag++)
        for (int64_t k = offsets[bag]; k < offsets[bag + 1]; k++)
            for (int d = 0; d < D; d++) ref[bag * D + d] += weights[k] * table[rows[k] * D + d];
    assert_same(out, ref, B * S * D, "embedding_bag_forward");
    hps_sparse_grad *g = hps_sparse_grad_create(ROWS, D);
    embedding_bag_backward(g, out, S * D, &bags, D, HPS_POOL_SUM);
    float *t2 = malloc(ROWS * D * sizeof *t2), *a2 = calloc(ROWS * D, sizeof *a2);
    memcpy(t2, table, ROWS * D * sizeof *t2);
    sparse_adagrad(table, accum, g, 0.05f, 1e-8f);
    for (int64_t i = 0; i < g->n; i++)
        for (int d = 0; d < D; d++) {
            float gr = g->grad[i * D + d], *a = a2 + g->rows[i] * D + d;
            *a += gr * gr;
            t2[g->rows[i] * D + d] -= 0.05f * gr / (sqrtf(*a) + 1e-8f);
        }
    assert_same(table, t2, ROWS * D, "sparse_adagrad table");
    assert_same(accum, a2, ROWS * D, "sparse_adagrad accum");
    hps_sparse_grad_free(g);
    free(table), free(accum), free(out), free(ref), free(t2), free(a2);
}

/* Unweighted sum pooling skips its weight of 1.0f (bag_pool): forward and
 * backward must give the bits of the weighted loops with every weight 1.0f,
 * on rows of 16 floats (demo-ctr's) and of 13 (a tail past every width). */
static void test_embedding_unweighted_bits(void **state)
{
    (void)state;
    enum { ROWS = 40, B = 97, S = 5 };
    int64_t offsets[B * S + 1], rows[B * S * 3];
    float ones[B * S * 3];
    uint32_t seed = 5;
    offsets[0] = 0;
    for (int bag = 0; bag < B * S; bag++) { /* 0..3 rows, repeats included */
        int k = (bag * 7 + bag / 3) % 4;
        offsets[bag + 1] = offsets[bag] + k;
        for (int j = 0; j < k; j++) {
            rows[offsets[bag] + j] = (int64_t)((lcg(&seed) + 1.0f) * 0.5f * (ROWS - 1));
            ones[offsets[bag] + j] = 1.0f;
        }
    }
    const int dims[] = {16, 13};
    for (int di = 0; di < 2; di++) {
        const int D = dims[di];
        float *table = malloc(ROWS * D * sizeof *table);
        float *plain = malloc(B * S * D * sizeof *plain), *weighted = malloc(B * S * D * sizeof *weighted);
        for (int i = 0; i < ROWS * D; i++) table[i] = 3 * lcg(&seed);
        hps_bags pb = {.B = B, .S = S, .offsets = offsets, .rows = rows, .weights = NULL};
        hps_bags wb = pb;
        wb.weights = ones;
        embedding_bag_forward(plain, S * D, table, &pb, D, HPS_POOL_SUM);
        embedding_bag_forward(weighted, S * D, table, &wb, D, HPS_POOL_SUM);
        assert_memory_equal(plain, weighted, B * S * D * sizeof *plain);
        hps_sparse_grad *gp = hps_sparse_grad_create(offsets[B * S], D);
        hps_sparse_grad *gw = hps_sparse_grad_create(offsets[B * S], D);
        embedding_bag_backward(gp, plain, S * D, &pb, D, HPS_POOL_SUM); /* any dout will do */
        embedding_bag_backward(gw, plain, S * D, &wb, D, HPS_POOL_SUM);
        assert_int_equal(gp->n, gw->n);
        assert_memory_equal(gp->rows, gw->rows, (size_t)gp->n * sizeof *gp->rows);
        assert_memory_equal(gp->grad, gw->grad, (size_t)gp->n * D * sizeof *gp->grad);
        hps_sparse_grad_free(gp), hps_sparse_grad_free(gw);
        free(table), free(plain), free(weighted);
    }
}

/* ---- the CTR layers (kernels_ctr.c) ----------------------------------------------- */

/* A layer's reference: the loss sum(out * r) in double over packed inputs x. */
typedef struct {
    int B, S, W, n, D, vector;
    const double *dense, *r;
} ctr_ctx;

static double linear_ref(void *vctx, const double *x)
{
    const ctr_ctx *c = vctx;
    const double *p = x, *w = x + c->B * c->S, *b = w + c->W;
    double L = 0;
    for (int r = 0; r < c->B; r++) {
        double z = b[0];
        for (int s = 0; s < c->S; s++) z += p[r * c->S + s];
        for (int j = 0; j < c->W; j++) z += w[j] * c->dense[r * c->W + j];
        L += z * c->r[r];
    }
    return L;
}

static void test_linear(void **state)
{
    (void)state;
    hps_rng rng;
    hps_rng_seed(&rng, 21);
    enum { B = 4, S = 3, W = 5, N = B * S + W + 1 };
    double x[N], dense[B * W], r[B];
    float xf[N], densef[B * W], rf[B], out[B], grad[N] = {0};
    fill_random(&rng, xf, x, N);
    fill_random(&rng, densef, dense, B * W);
    fill_random(&rng, rf, r, B);
    ctr_ctx c = {.B = B, .S = S, .W = W, .dense = dense, .r = r};
    linear_forward(out, xf, S, densef, xf + B * S, xf + B * S + W, B, W);
    double L = 0;
    for (int i = 0; i < B; i++) L += out[i] * r[i];
    assert_close(L, linear_ref(&c, x), TOL, "linear forward", 0);
    linear_backward(grad, grad + B * S, grad + B * S + W, rf, densef, B, S, W);
    check_grad(linear_ref, &c, x, grad, N, "linear grad");
}

static double fm_ref(void *vctx, const double *v)
{
    const ctr_ctx *c = vctx;
    double L = 0;
    for (int r = 0; r < c->B; r++)
        for (int f = 0; f < c->D; f++) {
            double o = 0;
            for (int i = 0; i < c->n; i++)
                for (int j = i + 1; j < c->n; j++) /* the pairwise form: sum_{i<j} v_if v_jf */
                    o += v[(r * c->n + i) * c->D + f] * v[(r * c->n + j) * c->D + f];
            L += o * (c->vector ? c->r[r * c->D + f] : c->r[r]);
        }
    return L;
}

static void test_fm(void **state)
{
    (void)state;
    hps_rng rng;
    hps_rng_seed(&rng, 22);
    enum { B = 3, n = 4, D = 5, N = B * n * D };
    for (int vector = 0; vector <= 1; vector++) {
        double v[N], r[B * D];
        float vf[N], rf[B * D], out[B * D], grad[N];
        fill_random(&rng, vf, v, N);
        fill_random(&rng, rf, r, B * D);
        ctr_ctx c = {.B = B, .n = n, .D = D, .vector = vector, .r = r};
        fm_forward(out, vf, B, n, D, vector);
        double L = 0;
        for (int i = 0; i < (vector ? B * D : B); i++) L += out[i] * r[i];
        assert_close(L, fm_ref(&c, v), TOL, vector ? "fm vector forward" : "fm forward", 0);
        fm_backward(grad, rf, vf, B, n, D, vector);
        check_grad(fm_ref, &c, v, grad, N, vector ? "fm vector grad" : "fm grad");
    }
}

/* x = [x0 | x | w | b] */
static double cross_vector_ref(void *vctx, const double *x)
{
    const ctr_ctx *c = vctx;
    const int B = c->B, W = c->W;
    const double *x0 = x, *xl = x + B * W, *w = xl + B * W, *b = w + W;
    double L = 0;
    for (int r = 0; r < B; r++) {
        double s = 0;
        for (int j = 0; j < W; j++) s += xl[r * W + j] * w[j];
        for (int j = 0; j < W; j++)
            L += (x0[r * W + j] * s + b[j] + xl[r * W + j]) * c->r[r * W + j];
    }
    return L;
}

static void test_cross_vector(void **state)
{
    (void)state;
    hps_rng rng;
    hps_rng_seed(&rng, 23);
    enum { B = 3, W = 6, N = 2 * B * W + 2 * W };
    double x[N], r[B * W];
    float xf[N], rf[B * W], y[B * W], s[B], grad[N] = {0};
    fill_random(&rng, xf, x, N);
    fill_random(&rng, rf, r, B * W);
    ctr_ctx c = {.B = B, .W = W, .r = r};
    float *x0 = xf, *xl = xf + B * W, *w = xl + B * W, *b = w + W;
    cross_vector_forward(y, s, x0, xl, w, b, B, W);
    double L = 0;
    for (int i = 0; i < B * W; i++) L += y[i] * r[i];
    assert_close(L, cross_vector_ref(&c, x), TOL, "cross vector forward", 0);
    cross_vector_backward(grad + B * W, grad, grad + 2 * B * W, grad + 2 * B * W + W, rf, x0, xl,
                          s, w, B, W);
    check_grad(cross_vector_ref, &c, x, grad, N, "cross vector grad");
}

/* x = [x0 | z | x]: y = x0 z + x */
static double cross_gate_ref(void *vctx, const double *x)
{
    const ctr_ctx *c = vctx;
    const int n = c->n;
    double L = 0;
    for (int i = 0; i < n; i++) L += (x[i] * x[n + i] + x[2 * n + i]) * c->r[i];
    return L;
}

static void test_cross_gate(void **state)
{
    (void)state;
    hps_rng rng;
    hps_rng_seed(&rng, 24);
    enum { n = 17, N = 3 * n };
    double x[N], r[n];
    float xf[N], rf[n], y[n], grad[N] = {0};
    fill_random(&rng, xf, x, N);
    fill_random(&rng, rf, r, n);
    ctr_ctx c = {.n = n, .r = r};
    cross_gate_forward(y, xf, xf + n, xf + 2 * n, n);
    double L = 0;
    for (int i = 0; i < n; i++) L += y[i] * r[i];
    assert_close(L, cross_gate_ref(&c, x), TOL, "cross gate forward", 0);
    cross_gate_backward(grad + n, grad, rf, xf, xf + n, n);
    memcpy(grad + 2 * n, rf, sizeof rf); /* dx = dy: the residual, the net adds it */
    check_grad(cross_gate_ref, &c, x, grad, N, "cross gate grad");
}

static void test_dropout(void **state)
{
    (void)state;
    enum { n = 20000 };
    float *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    float *again = malloc(n * sizeof *again), *din = malloc(n * sizeof *din);
    for (int i = 0; i < n; i++) in[i] = 1.0f + (float)(i % 7);
    const float rate = 0.3f;
    dropout_forward(out, in, n, rate, 99);
    int dropped = 0;
    for (int i = 0; i < n; i++) {
        int keep = dropout_keep(99, i, rate);
        dropped += !keep;
        assert_true(out[i] == (keep ? in[i] * (1.0f / (1.0f - rate)) : 0.0f));
    }
    /* a fixed seed: the count is deterministic, and near the rate */
    assert_true(dropped > 0.28 * n && dropped < 0.32 * n);
    dropout_forward(again, in, n, rate, 99);
    assert_memory_equal(out, again, n * sizeof *out);
    dropout_forward(again, in, n, rate, 100);
    assert_true(memcmp(out, again, n * sizeof *out) != 0);
    /* backward: the same mask and scale on the gradient */
    dropout_backward(din, in, n, rate, 99);
    assert_memory_equal(din, out, n * sizeof *out);
    free(in), free(out), free(again), free(din);
}

static void test_cols_copy(void **state)
{
    (void)state;
    float src[3 * 5], dst[3 * 4];
    for (int i = 0; i < 15; i++) src[i] = (float)i;
    for (int i = 0; i < 12; i++) dst[i] = -1;
    cols_copy(dst + 1, 4, src + 2, 5, 3, 2, 0); /* columns 2..3 of src into 1..2 of dst */
    for (int r = 0; r < 3; r++) {
        assert_true(dst[r * 4] == -1 && dst[r * 4 + 3] == -1);
        assert_true(dst[r * 4 + 1] == src[r * 5 + 2] && dst[r * 4 + 2] == src[r * 5 + 3]);
    }
    cols_copy(dst + 1, 4, src + 2, 5, 3, 2, 1);
    for (int r = 0; r < 3; r++) assert_true(dst[r * 4 + 2] == 2 * src[r * 5 + 3]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fc),           cmocka_unit_test(test_activations),
        cmocka_unit_test(test_embedding_bag), cmocka_unit_test(test_sparse_adagrad),
        cmocka_unit_test(test_sparse_grad_reuse), cmocka_unit_test(test_embedding_sum_from_zero),
        cmocka_unit_test(test_concat),       cmocka_unit_test(test_dot_interaction),
        cmocka_unit_test(test_logloss),      cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_vector_clones), cmocka_unit_test(test_embedding_unweighted_bits),
        cmocka_unit_test(test_linear),       cmocka_unit_test(test_fm),
        cmocka_unit_test(test_cross_vector), cmocka_unit_test(test_cross_gate),
        cmocka_unit_test(test_dropout),      cmocka_unit_test(test_cols_copy),
    };
    return cmocka_run_group_tests_name("kernels", tests, NULL, NULL);
}
