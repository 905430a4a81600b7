/* The CUDA backend against the CPU backend: each kernel runs on both with the
 * same random inputs (fixed seed, small sizes) and the results must agree
 * within 1e-4 (absolute, or relative for values above 1).  Sparse gradients
 * are compared as sets of rows: the CUDA backend sorts them by row, the CPU
 * keeps first-seen order.
 *
 * Without a CUDA device (or in a build without CUDA) every test checks that
 * hps_backend_cuda() refuses with a message, then reports itself skipped.
 * Only the public hps_backend.h API is used, so this file builds either way.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/hps_backend.h"
#include "model/hps_model.h"

#define TOL 1e-4

static const hps_backend *cpu, *gpu;

/* The CUDA backend, or skip() the calling test when there is no device. */
static void need_cuda(void)
{
    hps_error err = {{0}, 0};
    if (hps_cuda_device_count() == 0) {
        /* the no-device path must refuse cleanly, with a message */
        assert_null(hps_backend_cuda(0, &err));
        assert_true(strncmp(err.msg, "cuda:0: ", 8) == 0);
        assert_int_equal(err.code, HPS_EXIT_RUNTIME);
        fprintf(stderr, "skipped: no CUDA device (%s)\n", err.msg);
        skip();
    }
    cpu = hps_backend_cpu();
    if (!gpu) {
        gpu = hps_backend_cuda(0, &err);
        if (!gpu) fail_msg("hps_backend_cuda(0): %s", err.msg);
    }
}

/* ---- helpers ---------------------------------------------------------------------- */

static uint64_t seed;

static float frand(void) /* uniform in [-1, 1) */
{
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)(seed >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static int irand(int n) { return (int)((frand() + 1.0f) * 0.5f * (float)n) % n; }

static float *randv(int64_t n)
{
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) x[i] = frand();
    return x;
}

static void *to_gpu(const void *h, size_t bytes)
{
    void *d = gpu->alloc(bytes);
    gpu->upload(d, h, bytes);
    return d;
}

static int close_enough(double want, double got)
{
    return fabs(want - got) <= TOL * fmax(1.0, fabs(want));
}

static void expect_close(const float *want, const float *got, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (!close_enough(want[i], got[i]))
            fail_msg("%s[%lld]: cpu %.7g, cuda %.7g", what, (long long)i, want[i], got[i]);
}

/* Compares host array want with n floats of device array dev. */
static void expect_gpu(const float *want, const float *dev, int64_t n, const char *what)
{
    float *got = malloc((size_t)(n ? n : 1) * sizeof *got);
    assert_non_null(got);
    gpu->download(got, dev, (size_t)n * sizeof *got);
    expect_close(want, got, n, what);
    free(got);
}

/* ---- memory ----------------------------------------------------------------------- */

static void test_memory(void **state)
{
    (void)state;
    need_cuda();
    assert_string_equal(gpu->kind, "cuda");
    assert_int_equal(gpu->device, 0);
    const int n = 1000;
    float *d = gpu->alloc(n * sizeof(float)), zeros[1000] = {0}, *x = randv(n);
    expect_gpu(zeros, d, n, "alloc zero-fill");
    gpu->upload(d, x, n * sizeof(float));
    expect_gpu(x, d, n, "upload/download");
    gpu->memzero(d, n * sizeof(float));
    gpu->sync();
    expect_gpu(zeros, d, n, "memzero");
    gpu->release(d);
    free(x);

    char name[256] = "";
    double mem = 0;
    assert_int_equal(hps_cuda_device_info(0, name, sizeof name, &mem), 0);
    assert_true(name[0] != '\0' && mem > 0);
    hps_error err = {{0}, 0};
    const int count = hps_cuda_device_count();
    assert_null(hps_backend_cuda(count, &err));
    assert_non_null(strstr(err.msg, "no such device"));
    assert_int_equal(hps_cuda_device_info(count, name, sizeof name, &mem), -1);
}

/* ---- fc --------------------------------------------------------------------------- */

static void check_fc(int B, int C, int OC, int with_bias, int with_din)
{
    float *in = randv((int64_t)B * C), *w = randv((int64_t)OC * C), *b = randv(OC);
    float *dout = randv((int64_t)B * OC), *dw = randv((int64_t)OC * C), *db = randv(OC);
    float *out = randv((int64_t)B * OC), *din = randv((int64_t)B * C);
    float *d_in = to_gpu(in, B * C * 4), *d_w = to_gpu(w, OC * C * 4), *d_b = to_gpu(b, OC * 4);
    float *d_dout = to_gpu(dout, B * OC * 4), *d_dw = to_gpu(dw, OC * C * 4);
    float *d_db = to_gpu(db, OC * 4), *d_out = to_gpu(out, B * OC * 4);
    float *d_din = to_gpu(din, B * C * 4);

    cpu->fc_forward(out, in, w, with_bias ? b : NULL, B, C, OC);
    gpu->fc_forward(d_out, d_in, d_w, with_bias ? d_b : NULL, B, C, OC);
    expect_gpu(out, d_out, (int64_t)B * OC, "fc out");

    /* dw and db start non-zero: backward must accumulate into them */
    cpu->fc_backward(with_din ? din : NULL, dw, db, dout, in, w, B, C, OC);
    gpu->fc_backward(with_din ? d_din : NULL, d_dw, d_db, d_dout, d_in, d_w, B, C, OC);
    expect_gpu(din, d_din, (int64_t)B * C, "fc din");
    expect_gpu(dw, d_dw, (int64_t)OC * C, "fc dw");
    expect_gpu(db, d_db, OC, "fc db");

    float *bufs[] = {in, w, b, dout, dw, db, out, din};
    float *dbufs[] = {d_in, d_w, d_b, d_dout, d_dw, d_db, d_out, d_din};
    for (int i = 0; i < 8; i++) free(bufs[i]), gpu->release(dbufs[i]);
}

static void test_fc(void **state)
{
    (void)state;
    need_cuda();
    seed = 1;
    check_fc(5, 7, 3, 1, 1);
    check_fc(5, 7, 3, 0, 0);
    check_fc(1, 1, 1, 1, 1);
    check_fc(37, 65, 19, 1, 1);
}

/* ---- activations ---------------------------------------------------------------------- */

static void test_activations(void **state)
{
    (void)state;
    need_cuda();
    seed = 2;
    const int64_t n = 37;
    for (int a = HPS_ACT_NONE; a <= HPS_ACT_TANH; a++) {
        float *in = randv(n), *dout = randv(n), *out = randv(n), *din = randv(n);
        for (int64_t i = 0; i < n; i++) in[i] *= 4.0f; /* reach the saturated parts */
        float *d_in = to_gpu(in, n * 4), *d_dout = to_gpu(dout, n * 4);
        float *d_out = to_gpu(out, n * 4), *d_din = to_gpu(din, n * 4);
        char what[64];

        cpu->act_forward(out, in, n, (hps_act)a);
        gpu->act_forward(d_out, d_in, n, (hps_act)a);
        snprintf(what, sizeof what, "%s forward", hps_act_names[a]);
        expect_gpu(out, d_out, n, what);

        cpu->act_backward(din, dout, out, n, (hps_act)a);
        gpu->act_backward(d_din, d_dout, d_out, n, (hps_act)a);
        snprintf(what, sizeof what, "%s backward", hps_act_names[a]);
        expect_gpu(din, d_din, n, what);

        /* in place, as the executor may run it */
        gpu->act_forward(d_in, d_in, n, (hps_act)a);
        snprintf(what, sizeof what, "%s forward in place", hps_act_names[a]);
        expect_gpu(out, d_in, n, what);

        free(in), free(dout), free(out), free(din);
        gpu->release(d_in), gpu->release(d_dout), gpu->release(d_out), gpu->release(d_din);
    }
}

/* ---- embedding bags ----------------------------------------------------------------------- */

#define MAX_BAGS 64
#define MAX_ENTRIES (MAX_BAGS * 3)

typedef struct {
    int64_t offsets[MAX_BAGS + 1], rows[MAX_ENTRIES];
    float weights[MAX_ENTRIES];
    hps_bags host, dev; /* dev: arrays uploaded */
    int64_t nnz;
} test_bags;

/* Bags of 0..3 rows out of R (few rows: many repeats); the first bag is
 * empty and the second full so that both edge cases always occur. */
static void bags_make(test_bags *t, int B, int S, int64_t R, int weighted)
{
    const int n = B * S;
    assert_true(n <= MAX_BAGS);
    t->offsets[0] = 0;
    for (int i = 0; i < n; i++) {
        int size = i == 0 ? 0 : i == 1 ? 3 : irand(4);
        for (int k = 0; k < size; k++) {
            t->rows[t->offsets[i] + k] = irand((int)R);
            t->weights[t->offsets[i] + k] = 0.1f + (frand() + 1.0f) * 0.5f;
        }
        t->offsets[i + 1] = t->offsets[i] + size;
    }
    t->nnz = t->offsets[n];
    t->host = (hps_bags){B, S, t->offsets, t->rows, weighted ? t->weights : NULL};
    t->dev = (hps_bags){B, S, to_gpu(t->offsets, (size_t)(n + 1) * 8),
                        to_gpu(t->rows, (size_t)(t->nnz ? t->nnz : 1) * 8),
                        weighted ? to_gpu(t->weights, (size_t)(t->nnz ? t->nnz : 1) * 4) : NULL};
}

static void bags_free(test_bags *t)
{
    gpu->release((void *)t->dev.offsets);
    gpu->release((void *)t->dev.rows);
    if (t->dev.weights) gpu->release((void *)t->dev.weights);
}

static void check_embedding_forward(int weighted, hps_pool pool)
{
    const int B = 5, S = 3, D = 4, ld = S * D + 2; /* ld > S*D: columns left alone */
    const int64_t R = 11;
    test_bags t;
    bags_make(&t, B, S, R, weighted);
    float *table = randv(R * D), *out = randv((int64_t)B * ld);
    float *d_table = to_gpu(table, R * D * 4), *d_out = to_gpu(out, (size_t)B * ld * 4);

    cpu->embedding_bag_forward(out, ld, table, &t.host, D, pool);
    gpu->embedding_bag_forward(d_out, ld, d_table, &t.dev, D, pool);
    expect_gpu(out, d_out, (int64_t)B * ld, weighted ? "weighted bag out" : "bag out");

    free(table), free(out);
    gpu->release(d_table), gpu->release(d_out);
    bags_free(&t);
}

static void test_embedding_forward(void **state)
{
    (void)state;
    need_cuda();
    seed = 3;
    for (int weighted = 0; weighted <= 1; weighted++) {
        check_embedding_forward(weighted, HPS_POOL_SUM);
        check_embedding_forward(weighted, HPS_POOL_MEAN);
    }
}

/* Rows and gradients of g (host copies), ordered by row. */
typedef struct {
    int64_t row;
    float grad[16];
} grad_row;

static int grad_row_cmp(const void *a, const void *b)
{
    int64_t x = ((const grad_row *)a)->row, y = ((const grad_row *)b)->row;
    return (x > y) - (x < y);
}

static grad_row *sorted_grad(const hps_backend *be, const hps_sparse_grad *g)
{
    const int D = g->D;
    assert_true(D <= 16);
    int64_t *rows = malloc((size_t)(g->n + 1) * sizeof *rows);
    float *grad = malloc((size_t)(g->n + 1) * D * sizeof *grad);
    be->download(rows, g->rows, (size_t)g->n * sizeof *rows);
    be->download(grad, g->grad, (size_t)g->n * D * sizeof *grad);
    grad_row *r = calloc((size_t)g->n + 1, sizeof *r);
    for (int64_t i = 0; i < g->n; i++) {
        r[i].row = rows[i];
        memcpy(r[i].grad, grad + i * D, (size_t)D * sizeof *grad);
    }
    qsort(r, (size_t)g->n, sizeof *r, grad_row_cmp);
    free(rows), free(grad);
    return r;
}

/* embedding_bag_backward on both backends, then sparse_adagrad on copies of
 * one table; g_cpu and g_gpu are reused across calls (as in training). */
static void check_embedding_backward(hps_sparse_grad *g_cpu, hps_sparse_grad *g_gpu, int weighted,
                                     hps_pool pool)
{
    const int B = 5, S = 3, D = 4, ld = S * D + 3;
    const int64_t R = 11;
    test_bags t;
    bags_make(&t, B, S, R, weighted);
    float *dout = randv((int64_t)B * ld), *d_dout = to_gpu(dout, (size_t)B * ld * 4);

    cpu->embedding_bag_backward(g_cpu, dout, ld, &t.host, D, pool);
    gpu->embedding_bag_backward(g_gpu, d_dout, ld, &t.dev, D, pool);
    assert_int_equal(g_gpu->n, g_cpu->n);

    grad_row *want = sorted_grad(cpu, g_cpu), *got = sorted_grad(gpu, g_gpu);
    int64_t *gpu_rows = malloc((size_t)(g_gpu->n + 1) * sizeof *gpu_rows);
    gpu->download(gpu_rows, g_gpu->rows, (size_t)g_gpu->n * sizeof *gpu_rows);
    for (int64_t i = 0; i < g_cpu->n; i++) {
        if (i > 0) assert_true(gpu_rows[i - 1] < gpu_rows[i]); /* documented: sorted by row */
        assert_int_equal(want[i].row, got[i].row);
        expect_close(want[i].grad, got[i].grad, D, "sparse grad");
    }

    float *table = randv(R * D), *accum = randv(R * D);
    for (int64_t i = 0; i < R * D; i++) accum[i] = fabsf(accum[i]);
    float *d_table = to_gpu(table, R * D * 4), *d_accum = to_gpu(accum, R * D * 4);
    cpu->sparse_adagrad(table, accum, g_cpu, 0.05f, 1e-8f);
    gpu->sparse_adagrad(d_table, d_accum, g_gpu, 0.05f, 1e-8f);
    expect_gpu(table, d_table, R * D, "adagrad table");
    expect_gpu(accum, d_accum, R * D, "adagrad accum");
    /* row-wise: one accumulator a row (the first R floats of accum) */
    gpu->upload(d_table, table, (size_t)(R * D * 4));
    gpu->upload(d_accum, accum, (size_t)(R * 4));
    cpu->sparse_rowwise_adagrad(table, accum, g_cpu, 0.05f, 1e-8f);
    gpu->sparse_rowwise_adagrad(d_table, d_accum, g_gpu, 0.05f, 1e-8f);
    expect_gpu(table, d_table, R * D, "rowwise adagrad table");
    expect_gpu(accum, d_accum, R, "rowwise adagrad accum");

    free(want), free(got), free(gpu_rows), free(dout), free(table), free(accum);
    gpu->release(d_dout), gpu->release(d_table), gpu->release(d_accum);
    bags_free(&t);
}

/* A device table written and read by row id (hps-train's device rows):
 * rows put on the GPU come back as the CPU's table holds them, and a
 * forward pass over the GPU's copy pools what the CPU's does. */
static void test_rows_put_get(void **state)
{
    (void)state;
    need_cuda();
    seed = 6;
    const int D = 5, B = 4, S = 2;
    const int64_t R = 13, ids[] = {12, 0, 7, 3, 5};
    const int64_t n = sizeof ids / sizeof *ids;
    float *rows = randv(n * D), *table = calloc((size_t)R * D, sizeof *table);
    float *d_table = gpu->alloc((size_t)R * D * sizeof *table);
    cpu->rows_put(table, D, ids, n, rows);
    gpu->rows_put(d_table, D, ids, n, rows);
    expect_gpu(table, d_table, R * D, "rows_put");
    float *back = calloc((size_t)n * D, sizeof *back);
    gpu->rows_get(back, d_table, D, ids, n);
    for (int64_t i = 0; i < n * D; i++) assert_true(back[i] == rows[i]);
    test_bags t;
    bags_make(&t, B, S, R, 0);
    float *out = calloc((size_t)B * S * D, sizeof *out);
    float *d_out = gpu->alloc((size_t)B * S * D * sizeof *out);
    cpu->embedding_bag_forward(out, S * D, table, &t.host, D, HPS_POOL_SUM);
    gpu->embedding_bag_forward(d_out, S * D, d_table, &t.dev, D, HPS_POOL_SUM);
    expect_gpu(out, d_out, (int64_t)B * S * D, "pooled device rows");
    bags_free(&t);
    free(rows), free(table), free(back), free(out);
    gpu->release(d_table), gpu->release(d_out);
}

static void test_embedding_backward(void **state)
{
    (void)state;
    need_cuda();
    seed = 4;
    /* cap 11 bounds the unique rows (R = 11) but not the bag entries (up to
     * 45): the CUDA scratch must grow beyond cap */
    hps_sparse_grad *g_cpu = cpu->sparse_grad_create(11, 4);
    hps_sparse_grad *g_gpu = gpu->sparse_grad_create(11, 4);
    for (int round = 0; round < 2; round++)
        for (int weighted = 0; weighted <= 1; weighted++) {
            check_embedding_backward(g_cpu, g_gpu, weighted, HPS_POOL_SUM);
            check_embedding_backward(g_cpu, g_gpu, weighted, HPS_POOL_MEAN);
        }
    cpu->sparse_grad_free(g_cpu);
    gpu->sparse_grad_free(g_gpu);
}

/* ---- concat ----------------------------------------------------------------------------------- */

static void check_concat(int B, int E, int W, int with_ddense)
{
    float *emb = randv((int64_t)B * E), *dense = randv((int64_t)B * W);
    float *out = randv((int64_t)B * (E + W)), *dout = randv((int64_t)B * (E + W));
    float *demb = randv((int64_t)B * E), *ddense = randv((int64_t)B * W);
    float *d_emb = to_gpu(emb, (size_t)B * E * 4), *d_dense = to_gpu(dense, (size_t)B * W * 4 + 4);
    float *d_out = to_gpu(out, (size_t)B * (E + W) * 4);
    float *d_dout = to_gpu(dout, (size_t)B * (E + W) * 4);
    float *d_demb = to_gpu(demb, (size_t)B * E * 4);
    float *d_ddense = to_gpu(ddense, (size_t)B * W * 4 + 4);

    cpu->concat_forward(out, emb, dense, B, E, W);
    gpu->concat_forward(d_out, d_emb, d_dense, B, E, W);
    expect_gpu(out, d_out, (int64_t)B * (E + W), "concat out");

    cpu->concat_backward(demb, with_ddense ? ddense : NULL, dout, B, E, W);
    gpu->concat_backward(d_demb, with_ddense ? d_ddense : NULL, d_dout, B, E, W);
    expect_gpu(demb, d_demb, (int64_t)B * E, "concat demb");
    expect_gpu(ddense, d_ddense, (int64_t)B * W, "concat ddense");

    float *bufs[] = {emb, dense, out, dout, demb, ddense};
    float *dbufs[] = {d_emb, d_dense, d_out, d_dout, d_demb, d_ddense};
    for (int i = 0; i < 6; i++) free(bufs[i]), gpu->release(dbufs[i]);
}

static void test_concat(void **state)
{
    (void)state;
    need_cuda();
    seed = 5;
    check_concat(5, 6, 3, 1);
    check_concat(5, 6, 3, 0);
    check_concat(5, 6, 0, 1);
}

/* ---- dot interaction -------------------------------------------------------------------------- */

static void check_dot(int B, int V, int D, int W, int with_demb, int with_ddense)
{
    const int n = V + (W ? 1 : 0), width = W + n * (n - 1) / 2;
    float *emb = randv((int64_t)B * V * D), *dense = randv((int64_t)B * W);
    float *out = randv((int64_t)B * width), *dout = randv((int64_t)B * width);
    float *demb = randv((int64_t)B * V * D), *ddense = randv((int64_t)B * W);
    float *d_emb = to_gpu(emb, (size_t)B * V * D * 4), *d_dense = to_gpu(dense, (size_t)B * W * 4 + 4);
    float *d_out = to_gpu(out, (size_t)B * width * 4), *d_dout = to_gpu(dout, (size_t)B * width * 4);
    float *d_demb = to_gpu(demb, (size_t)B * V * D * 4);
    float *d_ddense = to_gpu(ddense, (size_t)B * W * 4 + 4);

    cpu->dot_forward(out, emb, W ? dense : NULL, B, V, D, W);
    gpu->dot_forward(d_out, d_emb, W ? d_dense : NULL, B, V, D, W);
    expect_gpu(out, d_out, (int64_t)B * width, W ? "dot out (dense)" : "dot out");

    cpu->dot_backward(with_demb ? demb : NULL, with_ddense ? ddense : NULL, dout, emb,
                      W ? dense : NULL, B, V, D, W);
    gpu->dot_backward(with_demb ? d_demb : NULL, with_ddense ? d_ddense : NULL, d_dout, d_emb,
                      W ? d_dense : NULL, B, V, D, W);
    expect_gpu(demb, d_demb, (int64_t)B * V * D, "dot demb");
    expect_gpu(ddense, d_ddense, (int64_t)B * W, "dot ddense");

    float *bufs[] = {emb, dense, out, dout, demb, ddense};
    float *dbufs[] = {d_emb, d_dense, d_out, d_dout, d_demb, d_ddense};
    for (int i = 0; i < 6; i++) free(bufs[i]), gpu->release(dbufs[i]);
}

static void test_dot(void **state)
{
    (void)state;
    need_cuda();
    seed = 6;
    check_dot(5, 3, 4, 0, 1, 1);  /* embeddings only */
    check_dot(5, 3, 4, 4, 1, 1);  /* dense first */
    check_dot(5, 3, 4, 4, 1, 0);  /* no ddense */
    check_dot(5, 3, 4, 4, 0, 1);  /* no demb */
    check_dot(3, 26, 4, 4, 1, 1); /* many pairs: the column-to-pair inversion */
    check_dot(2, 1, 4, 0, 1, 1);  /* one vector: no pairs */
}

/* ---- losses ------------------------------------------------------------------------------- */

static void test_logloss(void **state)
{
    (void)state;
    need_cuda();
    seed = 7;
    const int B = 5;
    float *z = randv(B), *y = randv(B), *prob = randv(B), *dz = randv(B);
    for (int b = 0; b < B; b++) z[b] *= 20.0f, y[b] = (float)(b % 2);
    z[0] = 40.0f, z[1] = -40.0f; /* the large-|z| branches */
    float *d_z = to_gpu(z, B * 4), *d_y = to_gpu(y, B * 4), *d_prob = to_gpu(prob, B * 4);
    float *d_dz = to_gpu(dz, B * 4);

    double want = cpu->logloss_forward(prob, z, y, B);
    double got = gpu->logloss_forward(d_prob, d_z, d_y, B);
    if (!close_enough(want, got)) fail_msg("logloss: cpu %.9g, cuda %.9g", want, got);
    expect_gpu(prob, d_prob, B, "logloss prob");
    got = gpu->logloss_forward(NULL, d_z, d_y, B);
    if (!close_enough(want, got)) fail_msg("logloss without prob: cpu %.9g, cuda %.9g", want, got);

    cpu->logloss_backward(dz, z, y, B);
    gpu->logloss_backward(d_dz, d_z, d_y, B);
    expect_gpu(dz, d_dz, B, "logloss dz");

    free(z), free(y), free(prob), free(dz);
    gpu->release(d_z), gpu->release(d_y), gpu->release(d_prob), gpu->release(d_dz);
}

static void test_softmax(void **state)
{
    (void)state;
    need_cuda();
    seed = 8;
    const int B = 5, C = 4;
    float *z = randv(B * C), *y = randv(B), *prob = randv(B * C), *dz = randv(B * C);
    for (int i = 0; i < B * C; i++) z[i] *= 5.0f;
    for (int b = 0; b < B; b++) y[b] = (float)irand(C);
    float *d_z = to_gpu(z, B * C * 4), *d_y = to_gpu(y, B * 4);
    float *d_prob = to_gpu(prob, B * C * 4), *d_dz = to_gpu(dz, B * C * 4);

    double want = cpu->softmax_forward(prob, z, y, B, C);
    double got = gpu->softmax_forward(d_prob, d_z, d_y, B, C);
    if (!close_enough(want, got)) fail_msg("softmax: cpu %.9g, cuda %.9g", want, got);
    expect_gpu(prob, d_prob, B * C, "softmax prob");

    cpu->softmax_backward(dz, prob, y, B, C);
    gpu->softmax_backward(d_dz, d_prob, d_y, B, C);
    expect_gpu(dz, d_dz, B * C, "softmax dz");

    free(z), free(y), free(prob), free(dz);
    gpu->release(d_z), gpu->release(d_y), gpu->release(d_prob), gpu->release(d_dz);
}

/* ---- Adam ------------------------------------------------------------------------------------- */

static void test_adam(void **state)
{
    (void)state;
    need_cuda();
    seed = 9;
    const int64_t n = 37;
    float *p = randv(n), *m = randv(n), *v = randv(n);
    for (int64_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    float *d_p = to_gpu(p, n * 4), *d_m = to_gpu(m, n * 4), *d_v = to_gpu(v, n * 4);
    for (int t = 1; t <= 3; t++) { /* the bias correction changes with t */
        float *g = randv(n), *d_g = to_gpu(g, n * 4);
        cpu->adam_update(p, g, m, v, n, 1e-2f, 0.9f, 0.999f, 1e-8f, t);
        gpu->adam_update(d_p, d_g, d_m, d_v, n, 1e-2f, 0.9f, 0.999f, 1e-8f, t);
        free(g), gpu->release(d_g);
    }
    expect_gpu(p, d_p, n, "adam p");
    expect_gpu(m, d_m, n, "adam m");
    expect_gpu(v, d_v, n, "adam v");
    free(p), free(m), free(v);
    gpu->release(d_p), gpu->release(d_m), gpu->release(d_v);
}

/* ---- the CTR layers: each kernel on the same random inputs, cpu against cuda ------------ */

typedef struct {
    float *h, *d;
    int64_t n;
} pair;

static pair mk(int64_t n)
{
    pair p = {randv(n), NULL, n};
    p.d = to_gpu(p.h, (size_t)(n ? n : 1) * sizeof(float));
    return p;
}

static void check_free(pair *ps, int n, const char *const *what)
{
    for (int i = 0; i < n; i++) {
        if (what && what[i]) expect_gpu(ps[i].h, ps[i].d, ps[i].n, what[i]);
        free(ps[i].h);
        gpu->release(ps[i].d);
    }
}

static void test_ctr_layers(void **state)
{
    (void)state;
    need_cuda();
    seed = 31;
    const int B = 37, S = 5, W = 13, D = 6, n = 4, R = 3;
    { /* linear */
        pair p[] = {mk(B), mk((int64_t)B * S), mk((int64_t)B * W), mk(W), mk(1), mk(W), mk(1)};
        cpu->linear_forward(p[0].h, p[1].h, S, p[2].h, p[3].h, p[4].h, B, W);
        gpu->linear_forward(p[0].d, p[1].d, S, p[2].d, p[3].d, p[4].d, B, W);
        cpu->linear_backward(p[1].h, p[5].h, p[6].h, p[0].h, p[2].h, B, S, W);
        gpu->linear_backward(p[1].d, p[5].d, p[6].d, p[0].d, p[2].d, B, S, W);
        const char *what[] = {"linear out", "linear dpooled", NULL, NULL, NULL, "linear dw",
                              "linear db"};
        check_free(p, 7, what);
    }
    for (int vector = 0; vector <= 1; vector++) { /* fm */
        pair p[] = {mk((int64_t)B * D), mk((int64_t)B * n * D), mk((int64_t)B * n * D)};
        cpu->fm_forward(p[0].h, p[1].h, B, n, D, vector);
        gpu->fm_forward(p[0].d, p[1].d, B, n, D, vector);
        cpu->fm_backward(p[2].h, p[0].h, p[1].h, B, n, D, vector);
        gpu->fm_backward(p[2].d, p[0].d, p[1].d, B, n, D, vector);
        const char *what[] = {"fm out", NULL, "fm dv"};
        check_free(p, 3, what);
    }
    { /* cross, vector kind: y s x0 x w b | dx dx0 dw db dy */
        pair p[] = {mk((int64_t)B * W), mk(B), mk((int64_t)B * W), mk((int64_t)B * W), mk(W),
                    mk(W), mk((int64_t)B * W), mk((int64_t)B * W), mk(W), mk(W), mk((int64_t)B * W)};
        cpu->cross_vector_forward(p[0].h, p[1].h, p[2].h, p[3].h, p[4].h, p[5].h, B, W);
        gpu->cross_vector_forward(p[0].d, p[1].d, p[2].d, p[3].d, p[4].d, p[5].d, B, W);
        cpu->cross_vector_backward(p[6].h, p[7].h, p[8].h, p[9].h, p[10].h, p[2].h, p[3].h, p[1].h,
                                   p[4].h, B, W);
        gpu->cross_vector_backward(p[6].d, p[7].d, p[8].d, p[9].d, p[10].d, p[2].d, p[3].d, p[1].d,
                                   p[4].d, B, W);
        const char *what[] = {"cross y", "cross s", NULL, NULL, NULL, NULL,
                              "cross dx", "cross dx0", "cross dw", "cross db", NULL};
        check_free(p, 11, what);
    }
    { /* the DCN-v2 gate: y x0 z x | dz dx0 dy */
        const int64_t m = (int64_t)B * W;
        pair p[] = {mk(m), mk(m), mk(m), mk(m), mk(m), mk(m), mk(m)};
        cpu->cross_gate_forward(p[0].h, p[1].h, p[2].h, p[3].h, m);
        gpu->cross_gate_forward(p[0].d, p[1].d, p[2].d, p[3].d, m);
        cpu->cross_gate_backward(p[4].h, p[5].h, p[6].h, p[1].h, p[2].h, m);
        gpu->cross_gate_backward(p[4].d, p[5].d, p[6].d, p[1].d, p[2].d, m);
        const char *what[] = {"gate y", NULL, NULL, NULL, "gate dz", "gate dx0", NULL};
        check_free(p, 7, what);
    }
    { /* dropout: the same mask on both */
        const int64_t m = (int64_t)B * W;
        pair p[] = {mk(m), mk(m), mk(m)};
        cpu->dropout_forward(p[0].h, p[1].h, m, 0.25f, 1234);
        gpu->dropout_forward(p[0].d, p[1].d, m, 0.25f, 1234);
        cpu->dropout_backward(p[2].h, p[1].h, m, 0.25f, 1234);
        gpu->dropout_backward(p[2].d, p[1].d, m, 0.25f, 1234);
        const char *what[] = {"dropout out", NULL, "dropout din"};
        check_free(p, 3, what);
    }
    for (int add = 0; add <= 1; add++) { /* column copies between strides */
        pair p[] = {mk((int64_t)B * W), mk((int64_t)B * (W + R))};
        cpu->cols_copy(p[0].h + 2, W, p[1].h + 1, W + R, B, W - 4, add);
        gpu->cols_copy(p[0].d + 2, W, p[1].d + 1, W + R, B, W - 4, add);
        const char *what[] = {add ? "cols add" : "cols copy", NULL};
        check_free(p, 2, what);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_fc),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_embedding_forward),
        cmocka_unit_test(test_embedding_backward),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_dot),
        cmocka_unit_test(test_logloss),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_rows_put_get),
        cmocka_unit_test(test_ctr_layers),
    };
    return cmocka_run_group_tests_name("cuda", tests, NULL, NULL);
}
