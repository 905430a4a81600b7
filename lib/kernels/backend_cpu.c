#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/hps_backend.h"
#include "kernels/kernels_internal.h"

static void *cpu_alloc(size_t bytes)
{
    /* 64-byte aligned for the vector units; zero-filled like the CUDA side */
    void *p = NULL;
    size_t n = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, n ? n : 64) != 0) hps_out_of_memory(n, __FILE__, __LINE__);
    memset(p, 0, n);
    return p;
}

static void cpu_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void cpu_sync(void) {}
static void cpu_memzero(void *p, size_t bytes) { memset(p, 0, bytes); }

/* The CPU's tables are host memory too, but go through these all the same:
 * one code path for every backend, and a copy the trainer forgets shows. */
static void cpu_rows_put(float *table, int D, const int64_t *ids, int64_t n, const float *rows)
{
    for (int64_t i = 0; i < n; i++)
        memcpy(table + ids[i] * D, rows + i * D, (size_t)D * sizeof *rows);
}

static void cpu_rows_get(float *rows, const float *table, int D, const int64_t *ids, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        memcpy(rows + i * D, table + ids[i] * D, (size_t)D * sizeof *rows);
}

HPS_VECTOR_CLONES
void adam_update(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                 int64_t n, float lr, float beta1, float beta2, float eps, int t)
{
    /* the bias corrections folded into two constants: one division a parameter */
    const float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);
    const float step = lr / c1, rsqrt_c2 = 1.0f / sqrtf(c2);
#pragma omp parallel for simd if (parallel: n > 65536)
    for (int64_t i = 0; i < n; i++) {
        float mi = beta1 * m[i] + (1.0f - beta1) * g[i];
        float vi = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
        m[i] = mi, v[i] = vi;
        p[i] -= step * mi / (sqrtf(vi) * rsqrt_c2 + eps);
    }
}

static const hps_backend cpu_backend = {
    .kind = "cpu",
    .device = -1,
    .alloc = cpu_alloc,
    .release = free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .sync = cpu_sync,
    .memzero = cpu_memzero,
    .fc_forward = fc_forward,
    .fc_backward = fc_backward,
    .act_forward = act_forward,
    .act_backward = act_backward,
    .embedding_bag_forward = embedding_bag_forward,
    .sparse_grad_create = hps_sparse_grad_create,
    .sparse_grad_free = hps_sparse_grad_free,
    .embedding_bag_backward = embedding_bag_backward,
    .sparse_adagrad = sparse_adagrad,
    .sparse_rowwise_adagrad = sparse_rowwise_adagrad,
    .rows_put = cpu_rows_put,
    .rows_get = cpu_rows_get,
    .concat_forward = concat_forward,
    .concat_backward = concat_backward,
    .dot_forward = dot_forward,
    .dot_backward = dot_backward,
    .vec_scale = vec_scale,
    .vec_axpy = vec_axpy,
    .linear_forward = linear_forward,
    .linear_backward = linear_backward,
    .fm_forward = fm_forward,
    .fm_backward = fm_backward,
    .cross_vector_forward = cross_vector_forward,
    .cross_vector_backward = cross_vector_backward,
    .cross_gate_forward = cross_gate_forward,
    .cross_gate_backward = cross_gate_backward,
    .dropout_forward = dropout_forward,
    .dropout_backward = dropout_backward,
    .cols_copy = cols_copy,
    .logloss_forward = logloss_forward,
    .logloss_backward = logloss_backward,
    .softmax_forward = softmax_forward,
    .softmax_backward = softmax_backward,
    .adam_update = adam_update,
};

const hps_backend *hps_backend_cpu(void) { return &cpu_backend; }
