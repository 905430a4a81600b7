/* hps_backend: one table of memory operations and layer kernels per device
 * kind, so the executor (lib/net) and everything above it run unchanged on
 * the CPU or on a CUDA device.
 *
 * Every pointer handed to a kernel lives in the backend's memory (host memory
 * for the CPU, device memory for CUDA), including the arrays inside hps_bags;
 * the hps_bags struct itself and the scalar arguments stay on the host.
 * The kernels have the semantics documented in hps_kernels.h.  Kernels may run
 * asynchronously: call sync() before reading a clock.
 */
#ifndef HPS_BACKEND_H
#define HPS_BACKEND_H

#include "kernels/hps_kernels.h"

typedef struct hps_backend {
    const char *kind; /* "cpu" or "cuda" */
    int device;       /* CUDA device ordinal; -1 for the CPU */

    void *(*alloc)(size_t bytes); /* zero-filled; aborts on out-of-memory */
    void (*release)(void *p);
    void (*upload)(void *dst, const void *src, size_t bytes);   /* host -> backend */
    void (*download)(void *dst, const void *src, size_t bytes); /* backend -> host */
    void (*sync)(void);
    void (*memzero)(void *p, size_t bytes);

    void (*fc_forward)(float *out, const float *in, const float *w, const float *b, int B, int C,
                       int OC);
    void (*fc_backward)(float *din, float *dw, float *db, const float *dout, const float *in,
                        const float *w, int B, int C, int OC);
    void (*act_forward)(float *out, const float *in, int64_t n, hps_act a);
    void (*act_backward)(float *din, const float *dout, const float *out, int64_t n, hps_act a);
    void (*embedding_bag_forward)(float *out, int ld, const float *table, const hps_bags *bags,
                                  int D, hps_pool pool);
    /* g from sparse_grad_create of the same backend; g->n is valid on the
     * host afterwards, g->rows and g->grad live in backend memory. */
    hps_sparse_grad *(*sparse_grad_create)(int64_t cap, int D);
    void (*sparse_grad_free)(hps_sparse_grad *g);
    void (*embedding_bag_backward)(hps_sparse_grad *g, const float *dout, int ld,
                                   const hps_bags *bags, int D, hps_pool pool);
    void (*sparse_adagrad)(float *table, float *accum, const hps_sparse_grad *g, float lr,
                           float eps);
    /* accum: one float a row (sparse_rowwise_adagrad, hps_kernels.h) */
    void (*sparse_rowwise_adagrad)(float *table, float *accum, const hps_sparse_grad *g, float lr,
                                   float eps);
    /* A table in the backend's memory (rows of D floats: weights, or AdaGrad's
     * accumulators) is written and read only through these: n rows by row id,
     * ids and the packed rows (n x D) in host memory.  hps-train keeps its
     * device-resident rows and its row cache this way (hps-train(1) ROWS). */
    void (*rows_put)(float *table, int D, const int64_t *ids, int64_t n, const float *rows);
    void (*rows_get)(float *rows, const float *table, int D, const int64_t *ids, int64_t n);
    void (*concat_forward)(float *out, const float *emb, const float *dense, int B, int E, int W);
    void (*concat_backward)(float *demb, float *ddense, const float *dout, int B, int E, int W);
    void (*dot_forward)(float *out, const float *emb, const float *dense, int B, int V, int D,
                        int W);
    void (*dot_backward)(float *demb, float *ddense, const float *dout, const float *emb,
                         const float *dense, int B, int V, int D, int W);
    void (*vec_scale)(float *x, int64_t n, float a);
    void (*vec_axpy)(float *y, const float *x, int64_t n, float a);
    /* the CTR layers (kernels_ctr.c) */
    void (*linear_forward)(float *out, const float *pooled, int S, const float *dense,
                           const float *w, const float *b, int B, int W);
    void (*linear_backward)(float *dpooled, float *dw, float *db, const float *dout,
                            const float *dense, int B, int S, int W);
    void (*fm_forward)(float *out, const float *v, int B, int n, int D, int vector);
    void (*fm_backward)(float *dv, const float *dout, const float *v, int B, int n, int D,
                        int vector);
    void (*cross_vector_forward)(float *y, float *s, const float *x0, const float *x,
                                 const float *w, const float *b, int B, int W);
    void (*cross_vector_backward)(float *dx, float *dx0, float *dw, float *db, const float *dy,
                                  const float *x0, const float *x, const float *s, const float *w,
                                  int B, int W);
    void (*cross_gate_forward)(float *y, const float *x0, const float *z, const float *x,
                               int64_t n);
    void (*cross_gate_backward)(float *dz, float *dx0, const float *dy, const float *x0,
                                const float *z, int64_t n);
    void (*dropout_forward)(float *out, const float *in, int64_t n, float rate, uint64_t seed);
    void (*dropout_backward)(float *din, const float *dout, int64_t n, float rate, uint64_t seed);
    void (*cols_copy)(float *dst, int ldd, const float *src, int lds, int B, int W, int add);
    /* losses return the mean loss on the host */
    double (*logloss_forward)(float *prob, const float *z, const float *y, int B);
    void (*logloss_backward)(float *dz, const float *z, const float *y, int B);
    double (*softmax_forward)(float *prob, const float *z, const float *y, int B, int C);
    void (*softmax_backward)(float *dz, const float *prob, const float *y, int B, int C);
    /* Adam on n parameters, step t >= 1 (bias-corrected). */
    void (*adam_update)(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                        float beta1, float beta2, float eps, int t);
} hps_backend;

const hps_backend *hps_backend_cpu(void);

/* The CUDA backend for device ordinal `device`, or NULL with err filled when
 * hps was built without CUDA, no driver or device is present, or the ordinal
 * is out of range.  One CUDA device is active per process. */
const hps_backend *hps_backend_cuda(int device, hps_error *err);

/* Number of usable CUDA devices: 0 without CUDA, driver or device. */
int hps_cuda_device_count(void);
/* Device name and memory; -1 when absent. */
int hps_cuda_device_info(int device, char *name, size_t name_len, double *mem_bytes);

/* CPU implementation of Adam, shared by the CPU backend and hps-train. */
void adam_update(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1,
                 float beta2, float eps, int t);

#endif
