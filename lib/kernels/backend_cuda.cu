/* The CUDA backend: the hps_backend table (hps_backend.h) on one CUDA device,
 * with the semantics of the CPU kernels in hps_kernels.h.
 *
 * One CUDA device is active per process: hps_backend_cuda() picks it once and
 * creates the process's only stream and cuBLAS handle; every kernel, copy and
 * memset below is issued on that stream, so they run in issue order.
 *
 * fc goes through cuBLAS; everything else is a small kernel, one per layer
 * operation, written as a grid-stride loop over the output elements so that
 * each output is computed by one thread in the same order as on the CPU.
 *
 * Sparse gradients (embedding_bag_backward) come out sorted by row, not in
 * the CPU's first-seen order: the (row, bag entry) pairs are radix-sorted by
 * row (a stable sort, so each row's entries keep their order and the sums are
 * deterministic), run-length encoded into unique rows, then summed per row.
 * The hash table fields of hps_sparse_grad (ht, ht_mask) are unused: NULL/0.
 *
 * Failures of CUDA or cuBLAS calls after start-up are programming errors or
 * out-of-memory and abort through hps_panic; a missing driver or device is
 * reported through hps_error by hps_backend_cuda().
 */
#ifdef HPS_CUDA

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mutex>

#include <cublas_v2.h>
#include <cub/cub.cuh>
#include <cuda_runtime.h>

/* The hps headers are C11: give them C linkage, and spell _Noreturn the C++ way. */
#define _Noreturn [[noreturn]]
extern "C" {
#include "kernels/hps_backend.h"
}
#undef _Noreturn

#define THREADS 256 /* threads per block everywhere; block_sum relies on it */

/* ---- error checks, device state --------------------------------------------- */

static void cuda_check(cudaError_t e, const char *call, const char *file, int line)
{
    if (e == cudaSuccess) return;
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s", call, cudaGetErrorString(e));
    hps_panic(file, line, msg);
}

static void cublas_check(cublasStatus_t s, const char *call, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS) return;
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s", call, cublasGetStatusString(s));
    hps_panic(file, line, msg);
}

#define CUDA_CHECK(call) cuda_check((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) cublas_check((call), #call, __FILE__, __LINE__)
/* After a kernel launch: catches bad launch configurations at once. */
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

static std::mutex g_init_lock;
static int g_device = -1;        /* the process's device, -1 before hps_backend_cuda() */
static cudaStream_t g_stream;    /* every operation goes on this stream */
static cublasHandle_t g_blas;    /* bound to g_stream */

/* The current device is a per-host-thread setting in the CUDA runtime, so a
 * thread other than the one that called hps_backend_cuda() must select the
 * device before its first call; every entry point of the table does this. */
static void use_device(void)
{
    static thread_local bool bound = false;
    if (bound) return;
    CUDA_CHECK(cudaSetDevice(g_device));
    bound = true;
}

/* Blocks for a grid-stride loop over n items. */
static unsigned blocks_for(int64_t n)
{
    int64_t b = (n + THREADS - 1) / THREADS;
    if (b < 1) b = 1;
    return (unsigned)(b < 65536 ? b : 65536);
}

#define GRID_STRIDE(i, n)                                                                 \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);             \
         i += (int64_t)gridDim.x * blockDim.x)

/* Sum of v over the block (blockDim.x == THREADS), returned to every thread. */
template <typename T> __device__ T block_sum(T v)
{
    __shared__ T buf[THREADS];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    return buf[0];
}

/* ---- memory -------------------------------------------------------------------- */

static void *cuda_alloc(size_t bytes)
{
    use_device();
    void *p = NULL;
    size_t n = bytes ? bytes : 1; /* a valid, distinct pointer even for 0 bytes */
    if (cudaMalloc(&p, n) != cudaSuccess) {
        cudaGetLastError(); /* clear it: out-of-memory is reported, then we abort */
        char msg[128];
        snprintf(msg, sizeof msg, "cudaMalloc(%zu bytes): out of device memory", n);
        hps_panic(__FILE__, __LINE__, msg);
    }
    CUDA_CHECK(cudaMemsetAsync(p, 0, n, g_stream));
    return p;
}

static void cuda_release(void *p)
{
    if (!p) return;
    use_device();
    /* kernels still queued may use p */
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
    CUDA_CHECK(cudaFree(p));
}

/* Copies wait for completion, as cudaMemcpy does: the caller may reuse or
 * read its host buffer as soon as they return. */
static void cuda_upload(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    use_device();
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g_stream));
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
}

static void cuda_download(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    use_device();
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g_stream));
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
}

static void cuda_sync(void)
{
    use_device();
    CUDA_CHECK(cudaDeviceSynchronize());
}

static void cuda_memzero(void *p, size_t bytes)
{
    if (!bytes) return;
    use_device();
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, g_stream));
}

/* Device-to-device copy of a [rows x width] block between row strides. */
static void copy_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows, int width)
{
    if (rows <= 0 || width <= 0) return;
    CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)dst_ld * sizeof(float), src,
                                 (size_t)src_ld * sizeof(float), (size_t)width * sizeof(float),
                                 (size_t)rows, cudaMemcpyDeviceToDevice, g_stream));
}

/* ---- fc --------------------------------------------------------------------------- */

/* cuBLAS is column-major: a row-major [R, K] matrix is the column-major
 * [K, R] one, i.e. its transpose.  So each row-major product X = A.B below is
 * computed as the column-major X^T = B^T.A^T, operands swapped. */

__global__ void bias_add_kernel(float *out, const float *b, int64_t n, int OC)
{
    GRID_STRIDE(i, n) out[i] += b[i % OC];
}

/* db[j] += sum over rows of dout[r, j]: one block per column, a fixed-order
 * tree sum so that the result does not depend on scheduling. */
__global__ void bias_grad_kernel(float *db, const float *dout, int B, int OC)
{
    const int j = blockIdx.x;
    float s = 0.0f;
    for (int r = threadIdx.x; r < B; r += THREADS) s += dout[(int64_t)r * OC + j];
    s = block_sum(s);
    if (threadIdx.x == 0) db[j] += s;
}

static void cuda_fc_forward(float *out, const float *in, const float *w, const float *b, int B,
                            int C, int OC)
{
    if (B <= 0 || OC <= 0) return;
    use_device();
    const float one = 1.0f, zero = 0.0f;
    const int ldk = C > 0 ? C : 1; /* cuBLAS wants ld >= 1 even for C == 0 */
    /* out^T[OC,B] = w[OC,C] . in^T[C,B]; w is stored as w^T column-major */
    CUBLAS_CHECK(cublasSgemm(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, OC, B, C, &one, w, ldk, in, ldk,
                             &zero, out, OC));
    if (!b) return;
    const int64_t n = (int64_t)B * OC;
    bias_add_kernel<<<blocks_for(n), THREADS, 0, g_stream>>>(out, b, n, OC);
    LAUNCH_CHECK();
}

static void cuda_fc_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                             const float *w, int B, int C, int OC)
{
    if (B <= 0 || OC <= 0) return;
    use_device();
    const float one = 1.0f, zero = 0.0f;
    const int ldk = C > 0 ? C : 1;
    if (din && C > 0) /* din^T[C,B] = w^T[C,OC] . dout^T[OC,B] */
        CUBLAS_CHECK(cublasSgemm(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, C, B, OC, &one, w, C, dout, OC,
                                 &zero, din, C));
    if (dw && C > 0) /* dw^T[C,OC] += in^T[C,B] . dout[B,OC] */
        CUBLAS_CHECK(cublasSgemm(g_blas, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, B, &one, in, ldk, dout,
                                 OC, &one, dw, C));
    if (db) {
        bias_grad_kernel<<<OC, THREADS, 0, g_stream>>>(db, dout, B, OC);
        LAUNCH_CHECK();
    }
}

/* ---- activations -------------------------------------------------------------------- */

__global__ void act_forward_kernel(float *out, const float *in, int64_t n, hps_act a)
{
    GRID_STRIDE(i, n)
    {
        const float x = in[i];
        switch (a) {
        case HPS_ACT_RELU: out[i] = x > 0.0f ? x : 0.0f; break;
        case HPS_ACT_SIGMOID: out[i] = 1.0f / (1.0f + expf(-x)); break;
        case HPS_ACT_TANH: out[i] = tanhf(x); break;
        default: out[i] = x; break;
        }
    }
}

/* Reads the forward output y, as the CPU kernel does. */
__global__ void act_backward_kernel(float *din, const float *dout, const float *y, int64_t n,
                                    hps_act a)
{
    GRID_STRIDE(i, n)
    {
        switch (a) {
        case HPS_ACT_RELU: din[i] = y[i] > 0.0f ? dout[i] : 0.0f; break;
        case HPS_ACT_SIGMOID: din[i] = dout[i] * y[i] * (1.0f - y[i]); break;
        case HPS_ACT_TANH: din[i] = dout[i] * (1.0f - y[i] * y[i]); break;
        default: din[i] = dout[i]; break;
        }
    }
}

static void cuda_act_forward(float *out, const float *in, int64_t n, hps_act a)
{
    if (n <= 0) return;
    use_device();
    if (a == HPS_ACT_NONE) {
        if (out != in)
            CUDA_CHECK(cudaMemcpyAsync(out, in, (size_t)n * sizeof(float),
                                       cudaMemcpyDeviceToDevice, g_stream));
        return;
    }
    act_forward_kernel<<<blocks_for(n), THREADS, 0, g_stream>>>(out, in, n, a);
    LAUNCH_CHECK();
}

static void cuda_act_backward(float *din, const float *dout, const float *out, int64_t n, hps_act a)
{
    if (n <= 0 || !din) return;
    use_device();
    if (a == HPS_ACT_NONE) {
        if (din != dout)
            CUDA_CHECK(cudaMemcpyAsync(din, dout, (size_t)n * sizeof(float),
                                       cudaMemcpyDeviceToDevice, g_stream));
        return;
    }
    act_backward_kernel<<<blocks_for(n), THREADS, 0, g_stream>>>(din, dout, out, n, a);
    LAUNCH_CHECK();
}

/* ---- embedding bag ---------------------------------------------------------------- */

/* The factor of every entry of bag [lo, hi), as bag_scale() in kernels_cpu.c:
 * mean pooling divides by the bag size, or by the total weight of a weighted bag. */
__device__ float bag_scale(const hps_bags &bags, int64_t lo, int64_t hi, hps_pool pool)
{
    if (pool == HPS_POOL_SUM || hi == lo) return 1.0f;
    if (!bags.weights) return 1.0f / (float)(hi - lo);
    float total = 0.0f;
    for (int64_t k = lo; k < hi; k++) total += bags.weights[k];
    return total != 0.0f ? 1.0f / total : 0.0f;
}

/* Offset of bag `bag`'s vector in an [B, ld] buffer of S slots of D. */
__device__ int64_t bag_at(int64_t bag, int S, int ld, int D)
{
    return (bag / S) * ld + (bag % S) * D;
}

/* One thread per output element (bag, d): consecutive threads read
 * consecutive floats of the same table row. */
__global__ void embedding_bag_forward_kernel(float *out, int ld, const float *table, hps_bags bags,
                                             int D, hps_pool pool)
{
    const int64_t n = (int64_t)bags.B * bags.S * D;
    GRID_STRIDE(i, n)
    {
        const int64_t bag = i / D;
        const int d = (int)(i % D);
        const int64_t lo = bags.offsets[bag], hi = bags.offsets[bag + 1];
        const float scale = bag_scale(bags, lo, hi, pool);
        float acc = 0.0f;
        for (int64_t k = lo; k < hi; k++) {
            const float w = scale * (bags.weights ? bags.weights[k] : 1.0f);
            acc += w * table[bags.rows[k] * D + d];
        }
        out[bag_at(bag, bags.S, ld, D) + d] = acc;
    }
}

static void cuda_embedding_bag_forward(float *out, int ld, const float *table,
                                       const hps_bags *bags, int D, hps_pool pool)
{
    const int64_t n = (int64_t)bags->B * bags->S * D;
    if (n <= 0) return;
    use_device();
    embedding_bag_forward_kernel<<<blocks_for(n), THREADS, 0, g_stream>>>(out, ld, table, *bags,
                                                                           D, pool);
    LAUNCH_CHECK();
}

/* The CUDA sparse gradient: the public struct first (the table hands out
 * &pub), then the device scratch of embedding_bag_backward, sized for
 * `entries` bag entries and grown on demand. */
typedef struct {
    hps_sparse_grad pub;
    int64_t entries;
    int64_t *keys, *keys_sorted; /* row of each entry, before/after the sort */
    int *vals, *vals_sorted;     /* entry index, carried along by the sort */
    int64_t *dout_at;            /* entry -> offset of its bag's vector in dout */
    float *coef;                 /* entry -> scale * weight */
    int64_t *uniq;               /* unique rows (may exceed cap before the check) */
    int *counts, *starts;        /* entries per unique row, and the exclusive sum */
    int *n_uniq;                 /* one int: number of unique rows */
    void *temp;                  /* CUB's temporary storage */
    size_t temp_bytes;
} cuda_sparse_grad;

static cuda_sparse_grad *cuda_grad_of(const hps_sparse_grad *g)
{
    return (cuda_sparse_grad *)g; /* pub is the first member */
}

static void grad_free_scratch(cuda_sparse_grad *s)
{
    void *bufs[] = {s->keys, s->keys_sorted, s->vals,   s->vals_sorted, s->dout_at,
                    s->coef, s->uniq,        s->counts, s->starts,      s->n_uniq};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cuda_release(bufs[i]);
    s->keys = s->keys_sorted = s->dout_at = s->uniq = NULL;
    s->vals = s->vals_sorted = s->counts = s->starts = s->n_uniq = NULL;
    s->coef = NULL;
    s->entries = 0;
}

/* Makes room for n bag entries (n fits an int: CUB's run-length encoder counts in int). */
static void grad_reserve(cuda_sparse_grad *s, int64_t n)
{
    if (n <= s->entries) return;
    HPS_CHECK(n <= INT32_MAX);
    grad_free_scratch(s);
    s->keys = (int64_t *)cuda_alloc((size_t)n * sizeof(int64_t));
    s->keys_sorted = (int64_t *)cuda_alloc((size_t)n * sizeof(int64_t));
    s->vals = (int *)cuda_alloc((size_t)n * sizeof(int));
    s->vals_sorted = (int *)cuda_alloc((size_t)n * sizeof(int));
    s->dout_at = (int64_t *)cuda_alloc((size_t)n * sizeof(int64_t));
    s->coef = (float *)cuda_alloc((size_t)n * sizeof(float));
    s->uniq = (int64_t *)cuda_alloc((size_t)n * sizeof(int64_t));
    s->counts = (int *)cuda_alloc((size_t)n * sizeof(int));
    s->starts = (int *)cuda_alloc((size_t)n * sizeof(int));
    s->n_uniq = (int *)cuda_alloc(sizeof(int));
    s->entries = n;
}

static void grad_reserve_temp(cuda_sparse_grad *s, size_t bytes)
{
    if (bytes <= s->temp_bytes) return;
    cuda_release(s->temp);
    s->temp = cuda_alloc(bytes);
    s->temp_bytes = bytes;
}

static hps_sparse_grad *cuda_sparse_grad_create(int64_t cap, int D)
{
    use_device();
    cuda_sparse_grad *s = (cuda_sparse_grad *)hps_calloc(1, sizeof *s);
    s->pub.cap = cap;
    s->pub.D = D;
    s->pub.rows = (int64_t *)cuda_alloc((size_t)(cap ? cap : 1) * sizeof(int64_t));
    s->pub.grad = (float *)cuda_alloc((size_t)(cap ? cap : 1) * D * sizeof(float));
    s->pub.ht = NULL; /* unused: deduplication sorts instead of hashing */
    s->pub.ht_mask = 0;
    if (cap > 0) grad_reserve(s, cap < INT32_MAX ? cap : INT32_MAX);
    return &s->pub;
}

static void cuda_sparse_grad_free(hps_sparse_grad *g)
{
    if (!g) return;
    cuda_sparse_grad *s = cuda_grad_of(g);
    grad_free_scratch(s);
    cuda_release(s->temp);
    cuda_release(g->rows);
    cuda_release(g->grad);
    free(s);
}

/* One thread per bag: lays out its entries (row, entry index, where its
 * gradient comes from, its factor); `base` is offsets[0]. */
__global__ void bag_entries_kernel(int64_t *keys, int *vals, int64_t *dout_at, float *coef,
                                   hps_bags bags, int64_t base, int ld, int D, hps_pool pool)
{
    const int64_t n_bags = (int64_t)bags.B * bags.S;
    GRID_STRIDE(bag, n_bags)
    {
        const int64_t lo = bags.offsets[bag], hi = bags.offsets[bag + 1];
        const float scale = bag_scale(bags, lo, hi, pool);
        const int64_t at = bag_at(bag, bags.S, ld, D);
        for (int64_t k = lo; k < hi; k++) {
            const int64_t e = k - base;
            keys[e] = bags.rows[k];
            vals[e] = (int)e;
            dout_at[e] = at;
            coef[e] = scale * (bags.weights ? bags.weights[k] : 1.0f);
        }
    }
}

/* One thread per (unique row u, d): sums the row's entries in sorted order,
 * which the stable sort keeps as the entries' original order. */
__global__ void row_sum_kernel(int64_t *rows, float *grad, const int64_t *uniq, const int *starts,
                               const int *counts, const int *entry, const int64_t *dout_at,
                               const float *coef, const float *dout, int64_t n, int D)
{
    GRID_STRIDE(i, n * D)
    {
        const int64_t u = i / D;
        const int d = (int)(i % D);
        const int lo = starts[u], hi = lo + counts[u];
        float acc = 0.0f;
        for (int p = lo; p < hi; p++) {
            const int e = entry[p];
            acc += coef[e] * dout[dout_at[e] + d];
        }
        grad[i] = acc;
        if (d == 0) rows[u] = uniq[u];
    }
}

static int64_t download_i64(const int64_t *p)
{
    int64_t v = 0;
    cuda_download(&v, p, sizeof v);
    return v;
}

static void cuda_embedding_bag_backward(hps_sparse_grad *g, const float *dout, int ld,
                                        const hps_bags *bags, int D, hps_pool pool)
{
    HPS_CHECK(g->D == D);
    use_device();
    cuda_sparse_grad *s = cuda_grad_of(g);
    g->n = 0;
    const int64_t n_bags = (int64_t)bags->B * bags->S;
    if (n_bags <= 0) return;
    const int64_t base = download_i64(bags->offsets);
    const int64_t nnz = download_i64(bags->offsets + n_bags) - base;
    HPS_CHECK(nnz >= 0);
    if (nnz == 0) return;
    grad_reserve(s, nnz);
    const int n = (int)nnz;

    bag_entries_kernel<<<blocks_for(n_bags), THREADS, 0, g_stream>>>(
        s->keys, s->vals, s->dout_at, s->coef, *bags, base, ld, D, pool);
    LAUNCH_CHECK();

    /* sort the entries by row, then one run per unique row */
    size_t sort_bytes = 0, rle_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, s->keys, s->keys_sorted, s->vals,
                                               s->vals_sorted, n, 0, 64, g_stream));
    CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(NULL, rle_bytes, s->keys_sorted, s->uniq,
                                                  s->counts, s->n_uniq, n, g_stream));
    grad_reserve_temp(s, sort_bytes > rle_bytes ? sort_bytes : rle_bytes);
    sort_bytes = rle_bytes = s->temp_bytes;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s->temp, sort_bytes, s->keys, s->keys_sorted,
                                               s->vals, s->vals_sorted, n, 0, 64, g_stream));
    CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(s->temp, rle_bytes, s->keys_sorted, s->uniq,
                                                  s->counts, s->n_uniq, n, g_stream));
    int n_uniq = 0;
    cuda_download(&n_uniq, s->n_uniq, sizeof n_uniq);
    HPS_CHECK(n_uniq <= g->cap);

    size_t scan_bytes = 0;
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, s->counts, s->starts, n_uniq,
                                             g_stream));
    grad_reserve_temp(s, scan_bytes);
    scan_bytes = s->temp_bytes;
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(s->temp, scan_bytes, s->counts, s->starts, n_uniq,
                                             g_stream));

    const int64_t m = (int64_t)n_uniq * D;
    row_sum_kernel<<<blocks_for(m), THREADS, 0, g_stream>>>(g->rows, g->grad, s->uniq, s->starts,
                                                            s->counts, s->vals_sorted, s->dout_at,
                                                            s->coef, dout, n_uniq, D);
    LAUNCH_CHECK();
    g->n = n_uniq;
}

/* One thread per (unique row, d): the rows of g are distinct, so no races. */
__global__ void sparse_adagrad_kernel(float *table, float *accum, const int64_t *rows,
                                      const float *grad, int64_t n, int D, float lr, float eps)
{
    GRID_STRIDE(i, n * D)
    {
        const int64_t at = rows[i / D] * D + i % D;
        const float gr = grad[i];
        accum[at] += gr * gr;
        table[at] -= lr * gr / (sqrtf(accum[at]) + eps);
    }
}

static void cuda_sparse_adagrad(float *table, float *accum, const hps_sparse_grad *g, float lr,
                                float eps)
{
    const int64_t n = g->n * g->D;
    if (n <= 0) return;
    use_device();
    sparse_adagrad_kernel<<<blocks_for(n), THREADS, 0, g_stream>>>(table, accum, g->rows, g->grad,
                                                                   g->n, g->D, lr, eps);
    LAUNCH_CHECK();
}

/* One thread per unique row: its squares summed in d order, as the CPU's. */
__global__ void sparse_rowwise_adagrad_kernel(float *table, float *accum, const int64_t *rows,
                                              const float *grad, int64_t n, int D, float lr, float eps)
{
    GRID_STRIDE(i, n)
    {
        float *w = table + rows[i] * D;
        const float *gr = grad + i * D;
        float sq = 0;
        for (int d = 0; d < D; d++) sq += gr[d] * gr[d];
        float *a = accum + rows[i];
        *a += sq / (float)D;
        const float step = lr / (sqrtf(*a) + eps);
        for (int d = 0; d < D; d++) w[d] -= step * gr[d];
    }
}

static void cuda_sparse_rowwise_adagrad(float *table, float *accum, const hps_sparse_grad *g,
                                        float lr, float eps)
{
    if (g->n <= 0) return;
    use_device();
    sparse_rowwise_adagrad_kernel<<<blocks_for(g->n), THREADS, 0, g_stream>>>(
        table, accum, g->rows, g->grad, g->n, g->D, lr, eps);
    LAUNCH_CHECK();
}

/* ---- rows in and out of a device table --------------------------------------------- */

/* The packed rows and their ids go through device buffers kept between
 * calls (grown as needed): one copy each way, one scatter or gather. */
static int64_t *g_row_ids;
static float *g_row_buf;
static int64_t g_row_cap;
static size_t g_row_floats;

static void rows_reserve(int64_t n, int D)
{
    if (n > g_row_cap) {
        cuda_release(g_row_ids);
        g_row_ids = (int64_t *)cuda_alloc((size_t)n * sizeof(int64_t));
        g_row_cap = n;
    }
    if ((size_t)n * D > g_row_floats) {
        cuda_release(g_row_buf);
        g_row_floats = (size_t)n * D;
        g_row_buf = (float *)cuda_alloc(g_row_floats * sizeof(float));
    }
}

__global__ void rows_scatter_kernel(float *table, const int64_t *ids, const float *rows, int64_t n,
                                    int D)
{
    GRID_STRIDE(i, n * D) table[ids[i / D] * D + i % D] = rows[i];
}

__global__ void rows_gather_kernel(float *rows, const float *table, const int64_t *ids, int64_t n,
                                   int D)
{
    GRID_STRIDE(i, n * D) rows[i] = table[ids[i / D] * D + i % D];
}

static void cuda_rows_put(float *table, int D, const int64_t *ids, int64_t n, const float *rows)
{
    if (n <= 0) return;
    rows_reserve(n, D);
    cuda_upload(g_row_ids, ids, (size_t)n * sizeof *ids);
    cuda_upload(g_row_buf, rows, (size_t)n * D * sizeof *rows);
    rows_scatter_kernel<<<blocks_for(n * D), THREADS, 0, g_stream>>>(table, g_row_ids, g_row_buf, n, D);
    LAUNCH_CHECK();
}

static void cuda_rows_get(float *rows, const float *table, int D, const int64_t *ids, int64_t n)
{
    if (n <= 0) return;
    rows_reserve(n, D);
    cuda_upload(g_row_ids, ids, (size_t)n * sizeof *ids);
    rows_gather_kernel<<<blocks_for(n * D), THREADS, 0, g_stream>>>(g_row_buf, table, g_row_ids, n, D);
    LAUNCH_CHECK();
    cuda_download(rows, g_row_buf, (size_t)n * D * sizeof *rows);
}

/* ---- concat: strided copies ------------------------------------------------------- */

static void cuda_concat_forward(float *out, const float *emb, const float *dense, int B, int E,
                                int W)
{
    use_device();
    copy_2d(out, E + W, emb, E, B, E);
    if (dense) copy_2d(out + E, E + W, dense, W, B, W);
}

static void cuda_concat_backward(float *demb, float *ddense, const float *dout, int B, int E, int W)
{
    use_device();
    if (demb) copy_2d(demb, E, dout, E + W, B, E);
    if (ddense) copy_2d(ddense, W, dout + E, E + W, B, W);
}

/* ---- dot interaction ------------------------------------------------------------------ */

/* Vector t of sample b: the dense part first when W > 0 (then W == D). */
__device__ const float *dot_vec(const float *emb, const float *dense, int64_t b, int t, int V,
                                int D, int W)
{
    if (W) {
        if (t == 0) return dense + b * W;
        t -= 1;
    }
    return emb + (b * V + t) * D;
}

/* Output column of the pair (i, j), i > j: the loop i = 1..n-1, j = 0..i-1. */
__device__ int dot_col(int i, int j, int W) { return W + i * (i - 1) / 2 + j; }

/* One thread per output element (b, k). */
__global__ void dot_forward_kernel(float *out, const float *emb, const float *dense, int B, int V,
                                   int D, int W, int n, int width)
{
    GRID_STRIDE(x, (int64_t)B * width)
    {
        const int64_t b = x / width;
        const int k = (int)(x % width);
        if (k < W) {
            out[x] = dense[b * W + k];
            continue;
        }
        /* invert k = W + i(i-1)/2 + j: i from the square root, then fixed up
         * for rounding */
        const int p = k - W;
        int i = (int)((1.0 + sqrt(1.0 + 8.0 * p)) / 2.0);
        while (i * (i - 1) / 2 > p) i--;
        while ((i + 1) * i / 2 <= p) i++;
        const int j = p - i * (i - 1) / 2;
        const float *vi = dot_vec(emb, dense, b, i, V, D, W);
        const float *vj = dot_vec(emb, dense, b, j, V, D, W);
        float s = 0.0f;
        for (int d = 0; d < D; d++) s += vi[d] * vj[d];
        out[x] = s;
    }
}

/* One thread per (b, vector t, d): the gradient of vector t gathers the
 * pairs it belongs to in increasing column order, as the CPU loop adds them;
 * the dense vector also receives its pass-through columns. */
__global__ void dot_backward_kernel(float *demb, float *ddense, const float *dout,
                                    const float *emb, const float *dense, int B, int V, int D,
                                    int W, int n, int width)
{
    GRID_STRIDE(x, (int64_t)B * n * D)
    {
        const int d = (int)(x % D);
        const int t = (int)(x / D % n);
        const int64_t b = x / ((int64_t)D * n);
        const bool is_dense = W && t == 0;
        float *dv = is_dense ? ddense : demb;
        if (!dv) continue;
        const float *g = dout + b * width;
        float acc = is_dense ? g[d] : 0.0f;
        for (int j = 0; j < n; j++) {
            if (j == t) continue;
            const int k = j < t ? dot_col(t, j, W) : dot_col(j, t, W);
            acc += g[k] * dot_vec(emb, dense, b, j, V, D, W)[d];
        }
        if (is_dense)
            ddense[b * W + d] = acc;
        else
            demb[(b * V + t - (W ? 1 : 0)) * D + d] = acc;
    }
}

static void cuda_dot_forward(float *out, const float *emb, const float *dense, int B, int V, int D,
                             int W)
{
    const int n = V + (W ? 1 : 0), width = W + n * (n - 1) / 2;
    const int64_t total = (int64_t)B * width;
    if (total <= 0) return;
    use_device();
    dot_forward_kernel<<<blocks_for(total), THREADS, 0, g_stream>>>(out, emb, dense, B, V, D, W, n,
                                                                    width);
    LAUNCH_CHECK();
}

static void cuda_dot_backward(float *demb, float *ddense, const float *dout, const float *emb,
                              const float *dense, int B, int V, int D, int W)
{
    const int n = V + (W ? 1 : 0), width = W + n * (n - 1) / 2;
    const int64_t total = (int64_t)B * n * D;
    if (total <= 0 || (!demb && !(ddense && W))) return;
    use_device();
    dot_backward_kernel<<<blocks_for(total), THREADS, 0, g_stream>>>(
        demb, W ? ddense : NULL, dout, emb, dense, B, V, D, W, n, width);
    LAUNCH_CHECK();
}

/* ---- losses ------------------------------------------------------------------------- */

/* Per-sample losses go to a device buffer, then one block sums them in a
 * fixed order (deterministic) into the slot after them, which is downloaded.
 * The buffer is shared, hence the lock. */
static std::mutex g_loss_lock;
static double *g_loss;     /* cap + 1 doubles */
static int64_t g_loss_cap;

static double *loss_buffer(int B)
{
    if (B <= g_loss_cap) return g_loss;
    cuda_release(g_loss);
    g_loss = (double *)cuda_alloc(((size_t)B + 1) * sizeof(double));
    g_loss_cap = B;
    return g_loss;
}

__global__ void sum_kernel(double *total, const double *x, int n)
{
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += THREADS) s += x[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *total = s;
}

/* Mean of the B per-sample losses in buf. */
static double loss_mean(double *buf, int B)
{
    sum_kernel<<<1, THREADS, 0, g_stream>>>(buf + B, buf, B);
    LAUNCH_CHECK();
    double total = 0.0;
    cuda_download(&total, buf + B, sizeof total);
    return total / B;
}

/* log(1+e^z) - y z, written to stay finite for large |z| (as on the CPU). */
__global__ void logloss_forward_kernel(double *loss, float *prob, const float *z, const float *y,
                                       int B)
{
    GRID_STRIDE(b, B)
    {
        const double zb = z[b];
        const double softplus = zb > 0 ? zb + log1p(exp(-zb)) : log1p(exp(zb));
        loss[b] = softplus - y[b] * zb;
        if (prob) prob[b] = (float)(1.0 / (1.0 + exp(-zb)));
    }
}

__global__ void logloss_backward_kernel(float *dz, const float *z, const float *y, int B)
{
    GRID_STRIDE(b, B) dz[b] = (float)((1.0 / (1.0 + exp(-(double)z[b])) - y[b]) / B);
}

/* One thread per sample; an out-of-range label gives a NaN loss rather than
 * reading outside z. */
__global__ void softmax_forward_kernel(double *loss, float *prob, const float *z, const float *y,
                                       int B, int C)
{
    GRID_STRIDE(b, B)
    {
        const float *zb = z + b * C;
        float mx = zb[0];
        for (int c = 1; c < C; c++) mx = zb[c] > mx ? zb[c] : mx;
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += exp((double)zb[c] - mx);
        if (prob)
            for (int c = 0; c < C; c++) prob[b * C + c] = (float)(exp((double)zb[c] - mx) / sum);
        const int label = (int)y[b];
        loss[b] = label >= 0 && label < C ? -((double)zb[label] - mx - log(sum)) : (double)NAN;
    }
}

__global__ void softmax_backward_kernel(float *dz, const float *prob, const float *y, int B, int C)
{
    GRID_STRIDE(i, (int64_t)B * C)
    {
        const int c = (int)(i % C);
        dz[i] = (prob[i] - (c == (int)y[i / C] ? 1.0f : 0.0f)) / (float)B;
    }
}

static double cuda_logloss_forward(float *prob, const float *z, const float *y, int B)
{
    if (B <= 0) return 0.0 / B; /* NaN, as the CPU's empty mean */
    use_device();
    std::lock_guard<std::mutex> lock(g_loss_lock);
    double *buf = loss_buffer(B);
    logloss_forward_kernel<<<blocks_for(B), THREADS, 0, g_stream>>>(buf, prob, z, y, B);
    LAUNCH_CHECK();
    return loss_mean(buf, B);
}

static void cuda_logloss_backward(float *dz, const float *z, const float *y, int B)
{
    if (B <= 0) return;
    use_device();
    logloss_backward_kernel<<<blocks_for(B), THREADS, 0, g_stream>>>(dz, z, y, B);
    LAUNCH_CHECK();
}

static double cuda_softmax_forward(float *prob, const float *z, const float *y, int B, int C)
{
    if (B <= 0) return 0.0 / B;
    HPS_CHECK(C > 0);
    use_device();
    std::lock_guard<std::mutex> lock(g_loss_lock);
    double *buf = loss_buffer(B);
    softmax_forward_kernel<<<blocks_for(B), THREADS, 0, g_stream>>>(buf, prob, z, y, B, C);
    LAUNCH_CHECK();
    return loss_mean(buf, B);
}

static void cuda_softmax_backward(float *dz, const float *prob, const float *y, int B, int C)
{
    const int64_t n = (int64_t)B * C;
    if (n <= 0) return;
    use_device();
    softmax_backward_kernel<<<blocks_for(n), THREADS, 0, g_stream>>>(dz, prob, y, B, C);
    LAUNCH_CHECK();
}

/* ---- Adam ------------------------------------------------------------------------------ */

/* c1, c2: the bias corrections 1 - beta^t, computed once on the host as in adam_update(). */
__global__ void adam_kernel(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                            float beta1, float beta2, float eps, float c1, float c2)
{
    GRID_STRIDE(i, n)
    {
        m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
        v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
        p[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
}

static void cuda_adam_update(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                             float beta1, float beta2, float eps, int t)
{
    if (n <= 0) return;
    use_device();
    const float c1 = 1.0f - powf(beta1, (float)t), c2 = 1.0f - powf(beta2, (float)t);
    adam_kernel<<<blocks_for(n), THREADS, 0, g_stream>>>(p, g, m, v, n, lr, beta1, beta2, eps, c1,
                                                         c2);
    LAUNCH_CHECK();
}

/* ---- scale ------------------------------------------------------------------------------ */

static void cuda_vec_scale(float *x, int64_t n, float a)
{
    if (n <= 0) return;
    use_device();
    HPS_CHECK(n <= INT32_MAX); /* cublasSscal counts in int */
    CUBLAS_CHECK(cublasSscal(g_blas, (int)n, &a, x, 1));
}

static void cuda_vec_axpy(float *y, const float *x, int64_t n, float a)
{
    if (n <= 0) return;
    use_device();
    HPS_CHECK(n <= INT32_MAX); /* cublasSaxpy counts in int */
    CUBLAS_CHECK(cublasSaxpy(g_blas, (int)n, &a, x, 1, y, 1));
}

/* ---- the CTR layers: linear, fm, cross, dropout, column copies ------------------------- */

__global__ void linear_forward_kernel(float *out, const float *pooled, int S, const float *dense,
                                      const float *w, const float *b, int B, int W)
{
    GRID_STRIDE(r, B)
    {
        float z = b[0];
        for (int s = 0; s < S; s++) z += pooled[r * S + s];
        for (int j = 0; dense && j < W; j++) z += w[j] * dense[r * W + j];
        out[r] = z;
    }
}

static void cuda_linear_forward(float *out, const float *pooled, int S, const float *dense,
                                const float *w, const float *b, int B, int W)
{
    if (B <= 0) return;
    use_device();
    linear_forward_kernel<<<blocks_for(B), THREADS, 0, g_stream>>>(out, pooled, S, dense, w, b, B,
                                                                   W);
    LAUNCH_CHECK();
}

__global__ void broadcast_rows_kernel(float *dst, const float *v, int B, int S)
{
    GRID_STRIDE(i, (int64_t)B * S) dst[i] = v[i / S];
}

/* col[j] += sum over rows r of a[r] * x[r, j] (a NULL: of x alone): one block
 * a column, a fixed-order tree sum. */
__global__ void weighted_col_sum_kernel(float *col, const float *a, const float *x, int B, int W)
{
    const int j = blockIdx.x;
    float s = 0.0f;
    for (int r = threadIdx.x; r < B; r += THREADS)
        s += (a ? a[r] : 1.0f) * x[(int64_t)r * W + j];
    s = block_sum(s);
    if (threadIdx.x == 0) col[j] += s;
}

static void cuda_linear_backward(float *dpooled, float *dw, float *db, const float *dout,
                                 const float *dense, int B, int S, int W)
{
    if (B <= 0) return;
    use_device();
    if (dpooled && S)
        broadcast_rows_kernel<<<blocks_for((int64_t)B * S), THREADS, 0, g_stream>>>(dpooled, dout,
                                                                                    B, S);
    if (dense && W) weighted_col_sum_kernel<<<W, THREADS, 0, g_stream>>>(dw, dout, dense, B, W);
    weighted_col_sum_kernel<<<1, THREADS, 0, g_stream>>>(db, NULL, dout, B, 1);
    LAUNCH_CHECK();
}

__global__ void fm_forward_kernel(float *out, const float *v, int B, int n, int D, int vector)
{
    GRID_STRIDE(r, B)
    {
        const float *x = v + r * n * D;
        float total = 0;
        for (int f = 0; f < D; f++) {
            float s = 0, q = 0;
            for (int i = 0; i < n; i++) {
                float e = x[i * D + f];
                s += e, q += e * e;
            }
            float o = 0.5f * (s * s - q);
            if (vector)
                out[r * D + f] = o;
            else
                total += o;
        }
        if (!vector) out[r] = total;
    }
}

__global__ void fm_backward_kernel(float *dv, const float *dout, const float *v, int B, int n,
                                   int D, int vector)
{
    GRID_STRIDE(k, (int64_t)B * D)
    {
        const int64_t r = k / D;
        const int f = (int)(k % D);
        const float *x = v + r * n * D;
        float s = 0;
        for (int i = 0; i < n; i++) s += x[i * D + f];
        const float g = vector ? dout[r * D + f] : dout[r];
        for (int i = 0; i < n; i++) dv[r * n * D + i * D + f] = g * (s - x[i * D + f]);
    }
}

static void cuda_fm_forward(float *out, const float *v, int B, int n, int D, int vector)
{
    if (B <= 0) return;
    use_device();
    fm_forward_kernel<<<blocks_for(B), THREADS, 0, g_stream>>>(out, v, B, n, D, vector);
    LAUNCH_CHECK();
}

static void cuda_fm_backward(float *dv, const float *dout, const float *v, int B, int n, int D,
                             int vector)
{
    if (B <= 0) return;
    use_device();
    fm_backward_kernel<<<blocks_for((int64_t)B * D), THREADS, 0, g_stream>>>(dv, dout, v, B, n, D,
                                                                            vector);
    LAUNCH_CHECK();
}

/* out[r] = sum_j a[r, j] * (b ? b[r, j] : w[j]) */
__global__ void row_dot_kernel(float *out, const float *a, const float *b, const float *w, int B,
                               int W)
{
    GRID_STRIDE(r, B)
    {
        float t = 0;
        for (int j = 0; j < W; j++) t += a[r * W + j] * (b ? b[r * W + j] : w[j]);
        out[r] = t;
    }
}

__global__ void cross_vector_out_kernel(float *y, const float *s, const float *x0, const float *x,
                                        const float *b, int B, int W)
{
    GRID_STRIDE(i, (int64_t)B * W) y[i] = x0[i] * s[i / W] + b[i % W] + x[i];
}

static void cuda_cross_vector_forward(float *y, float *s, const float *x0, const float *x,
                                      const float *w, const float *b, int B, int W)
{
    if (B <= 0) return;
    use_device();
    row_dot_kernel<<<blocks_for(B), THREADS, 0, g_stream>>>(s, x, NULL, w, B, W);
    cross_vector_out_kernel<<<blocks_for((int64_t)B * W), THREADS, 0, g_stream>>>(y, s, x0, x, b,
                                                                                 B, W);
    LAUNCH_CHECK();
}

/* d loss / d s per sample, between the backward kernels */
static std::mutex g_cross_lock;
static float *g_cross_g;
static int64_t g_cross_cap;

__global__ void cross_vector_dx_kernel(float *dx, float *dx0, const float *dy, const float *g,
                                       const float *s, const float *w, int B, int W)
{
    GRID_STRIDE(i, (int64_t)B * W)
    {
        if (dx0) dx0[i] += dy[i] * s[i / W];
        dx[i] = dy[i] + g[i / W] * w[i % W];
    }
}

static void cuda_cross_vector_backward(float *dx, float *dx0, float *dw, float *db,
                                       const float *dy, const float *x0, const float *x,
                                       const float *s, const float *w, int B, int W)
{
    if (B <= 0) return;
    use_device();
    std::lock_guard<std::mutex> hold(g_cross_lock);
    if (B > g_cross_cap) {
        if (g_cross_g) CUDA_CHECK(cudaFree(g_cross_g));
        CUDA_CHECK(cudaMalloc(&g_cross_g, (size_t)B * sizeof(float)));
        g_cross_cap = B;
    }
    row_dot_kernel<<<blocks_for(B), THREADS, 0, g_stream>>>(g_cross_g, dy, x0, NULL, B, W);
    weighted_col_sum_kernel<<<W, THREADS, 0, g_stream>>>(dw, g_cross_g, x, B, W);
    weighted_col_sum_kernel<<<W, THREADS, 0, g_stream>>>(db, NULL, dy, B, W);
    cross_vector_dx_kernel<<<blocks_for((int64_t)B * W), THREADS, 0, g_stream>>>(
        dx, dx0, dy, g_cross_g, s, w, B, W);
    LAUNCH_CHECK();
}

__global__ void cross_gate_forward_kernel(float *y, const float *x0, const float *z,
                                          const float *x, int64_t n)
{
    GRID_STRIDE(i, n) y[i] = x0[i] * z[i] + x[i];
}

__global__ void cross_gate_backward_kernel(float *dz, float *dx0, const float *dy,
                                           const float *x0, const float *z, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        dz[i] = dy[i] * x0[i];
        if (dx0) dx0[i] += dy[i] * z[i];
    }
}

static void cuda_cross_gate_forward(float *y, const float *x0, const float *z, const float *x,
                                    int64_t n)
{
    if (n <= 0) return;
    use_device();
    cross_gate_forward_kernel<<<blocks_for(n), THREADS, 0, g_stream>>>(y, x0, z, x, n);
    LAUNCH_CHECK();
}

static void cuda_cross_gate_backward(float *dz, float *dx0, const float *dy, const float *x0,
                                     const float *z, int64_t n)
{
    if (n <= 0) return;
    use_device();
    cross_gate_backward_kernel<<<blocks_for(n), THREADS, 0, g_stream>>>(dz, dx0, dy, x0, z, n);
    LAUNCH_CHECK();
}

/* dropout_keep of kernels_ctr.c, bit for bit */
__device__ int dropout_keep_dev(uint64_t seed, int64_t i, float rate)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53 >= rate;
}

__global__ void dropout_kernel(float *out, const float *in, int64_t n, float rate, float scale,
                               uint64_t seed)
{
    GRID_STRIDE(i, n) out[i] = dropout_keep_dev(seed, i, rate) ? in[i] * scale : 0.0f;
}

static void cuda_dropout_forward(float *out, const float *in, int64_t n, float rate,
                                 uint64_t seed)
{
    if (n <= 0) return;
    use_device();
    dropout_kernel<<<blocks_for(n), THREADS, 0, g_stream>>>(out, in, n, rate, 1.0f / (1.0f - rate),
                                                           seed);
    LAUNCH_CHECK();
}

__global__ void cols_add_kernel(float *dst, int ldd, const float *src, int lds, int B, int W)
{
    GRID_STRIDE(i, (int64_t)B * W) dst[(i / W) * ldd + i % W] += src[(i / W) * lds + i % W];
}

static void cuda_cols_copy(float *dst, int ldd, const float *src, int lds, int B, int W, int add)
{
    if (B <= 0 || W <= 0) return;
    use_device();
    if (!add) {
        copy_2d(dst, ldd, src, lds, B, W);
        return;
    }
    cols_add_kernel<<<blocks_for((int64_t)B * W), THREADS, 0, g_stream>>>(dst, ldd, src, lds, B, W);
    LAUNCH_CHECK();
}

/* ---- the table, device selection ------------------------------------------------------ */

static hps_backend g_backend;

static void fill_backend(hps_backend *be, int device)
{
    memset(be, 0, sizeof *be);
    be->kind = "cuda";
    be->device = device;
    be->alloc = cuda_alloc;
    be->release = cuda_release;
    be->upload = cuda_upload;
    be->download = cuda_download;
    be->sync = cuda_sync;
    be->memzero = cuda_memzero;
    be->fc_forward = cuda_fc_forward;
    be->fc_backward = cuda_fc_backward;
    be->act_forward = cuda_act_forward;
    be->act_backward = cuda_act_backward;
    be->embedding_bag_forward = cuda_embedding_bag_forward;
    be->sparse_grad_create = cuda_sparse_grad_create;
    be->sparse_grad_free = cuda_sparse_grad_free;
    be->embedding_bag_backward = cuda_embedding_bag_backward;
    be->sparse_adagrad = cuda_sparse_adagrad;
    be->sparse_rowwise_adagrad = cuda_sparse_rowwise_adagrad;
    be->rows_put = cuda_rows_put;
    be->rows_get = cuda_rows_get;
    be->concat_forward = cuda_concat_forward;
    be->concat_backward = cuda_concat_backward;
    be->dot_forward = cuda_dot_forward;
    be->dot_backward = cuda_dot_backward;
    be->linear_forward = cuda_linear_forward;
    be->linear_backward = cuda_linear_backward;
    be->fm_forward = cuda_fm_forward;
    be->fm_backward = cuda_fm_backward;
    be->cross_vector_forward = cuda_cross_vector_forward;
    be->cross_vector_backward = cuda_cross_vector_backward;
    be->cross_gate_forward = cuda_cross_gate_forward;
    be->cross_gate_backward = cuda_cross_gate_backward;
    be->dropout_forward = cuda_dropout_forward;
    be->dropout_backward = cuda_dropout_forward; /* the same mask on the gradient */
    be->cols_copy = cuda_cols_copy;
    be->logloss_forward = cuda_logloss_forward;
    be->logloss_backward = cuda_logloss_backward;
    be->softmax_forward = cuda_softmax_forward;
    be->softmax_backward = cuda_softmax_backward;
    be->adam_update = cuda_adam_update;
    be->vec_scale = cuda_vec_scale;
    be->vec_axpy = cuda_vec_axpy;
}

/* Devices present, or -1 with err filled (no driver, no device) for `device`. */
static int device_count(int device, hps_error *err)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* not sticky, but leave no error behind */
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "cuda:%d: no CUDA device is available (cudaGetDeviceCount: %s)", device,
                        cudaGetErrorString(e));
    }
    if (n <= 0)
        return hps_fail(err, HPS_EXIT_RUNTIME, "cuda:%d: no CUDA device is available", device);
    return n;
}

/* Creates the stream and cuBLAS handle on `device`; 0, or -1 with err. */
static int start_device(int device, hps_error *err)
{
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaStreamCreate(&g_stream);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return hps_fail(err, HPS_EXIT_RUNTIME, "cuda:%d: cannot start the device: %s", device,
                        cudaGetErrorString(e));
    }
    cublasStatus_t s = cublasCreate(&g_blas);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetStream(g_blas, g_stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(g_stream);
        return hps_fail(err, HPS_EXIT_RUNTIME, "cuda:%d: cannot start cuBLAS: %s", device,
                        cublasGetStatusString(s));
    }
    return 0;
}

extern "C" const hps_backend *hps_backend_cuda(int device, hps_error *err)
{
    std::lock_guard<std::mutex> lock(g_init_lock);
    const int n = device_count(device, err);
    if (n < 0) return NULL;
    if (device < 0 || device >= n) {
        hps_fail(err, HPS_EXIT_RUNTIME, "cuda:%d: no such device (%d present)", device, n);
        return NULL;
    }
    if (g_device >= 0) { /* one device per process */
        if (device == g_device) return &g_backend;
        hps_fail(err, HPS_EXIT_RUNTIME,
                 "cuda:%d: this process already uses cuda:%d (one CUDA device per process)",
                 device, g_device);
        return NULL;
    }
    if (start_device(device, err) < 0) return NULL;
    fill_backend(&g_backend, device);
    g_device = device;
    return &g_backend;
}

extern "C" int hps_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n > 0 ? n : 0;
}

extern "C" int hps_cuda_device_info(int device, char *name, size_t name_len, double *mem_bytes)
{
    if (device < 0 || device >= hps_cuda_device_count()) return -1;
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    if (name && name_len) snprintf(name, name_len, "%s", prop.name);
    if (mem_bytes) *mem_bytes = (double)prop.totalGlobalMem;
    return 0;
}

#endif /* HPS_CUDA */
