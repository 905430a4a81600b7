/* hps_kernels: the layer kernels, a forward/backward pair per layer on plain
 * float arrays (CPU, OpenBLAS + OpenMP).  hps_backend.h wraps these and their
 * CUDA twins behind one table so that the executor runs either.
 *
 * Conventions (as in llm.c): row-major, batch first.  B is the batch, C and OC
 * an fc layer's input and output widths (I belongs to complex.h), S slots, D the embedding dim.  Backward functions
 * accumulate (+=) into parameter gradients and overwrite input gradients;
 * any input-gradient pointer may be NULL when nobody needs it.
 */
#ifndef HPS_KERNELS_H
#define HPS_KERNELS_H

#include <stdint.h>

#include "core/hps_core.h"
#include "kernels/hps_kernel_kinds.h"

/* Bags of embedding rows, CSR over (sample, slot) pairs: the bag of sample b
 * in slot s is rows[offsets[b*S+s] .. offsets[b*S+s+1]).  rows index one table
 * holding all of a layer's slots; weights (NULL: all 1) scale each row. */
typedef struct {
    int B, S;
    const int64_t *offsets; /* B*S+1 */
    const int64_t *rows;
    const float *weights;
} hps_bags;

/* A sparse gradient: unique rows (first-seen order) and their summed rows. */
typedef struct {
    int64_t n, cap;
    int D;
    int64_t *rows;
    float *grad;       /* n x D */
    int64_t *ht;       /* open addressing: row -> index+1, 2*cap slots */
    int64_t ht_mask;
    int64_t *at;       /* per index: its slot in ht, which the next reset clears */
} hps_sparse_grad;

hps_sparse_grad *hps_sparse_grad_create(int64_t cap, int D);
void hps_sparse_grad_free(hps_sparse_grad *g);
/* dst = the sum of n sparse gradients (CPU memory), rows in first-seen order;
 * dst->cap must hold the union of their rows. */
void hps_sparse_grad_merge(hps_sparse_grad *dst, hps_sparse_grad *const *src, int n);

/* Threads used by the kernels (OpenMP and OpenBLAS together). */
void hps_set_threads(int n);
int hps_max_threads(void);

/* fc: out[B,OC] = in[B,C] . w[OC,C]^T + b[OC] */
void fc_forward(float *out, const float *in, const float *w, const float *b, int B, int C, int OC);
void fc_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                 const float *w, int B, int C, int OC);

/* Activations; backward reads the forward *output* y (relu: y>0, sigmoid:
 * y(1-y), tanh: 1-y^2), so the pre-activation need not be kept. out may be in. */
void act_forward(float *out, const float *in, int64_t n, hps_act a);
void act_backward(float *din, const float *dout, const float *out, int64_t n, hps_act a);

/* Embedding bag: the pooled vector of sample b, slot s at out[b*ld + s*D]
 * (ld >= S*D lets several embedding layers fill one [B, E] buffer). */
void embedding_bag_forward(float *out, int ld, const float *table, const hps_bags *bags, int D,
                           hps_pool pool);
/* Fills g with the unique rows touched and their summed gradients; dout has
 * the same layout as the forward output. */
void embedding_bag_backward(hps_sparse_grad *g, const float *dout, int ld, const hps_bags *bags,
                            int D, hps_pool pool);
/* Sparse AdaGrad on the rows of g: accum[row] += grad^2 (per element),
 * table[row] -= lr * grad / (sqrt(accum[row]) + eps). */
void sparse_adagrad(float *table, float *accum, const hps_sparse_grad *g, float lr, float eps);
/* Row-wise AdaGrad (FBGEMM's rowwise adagrad): one accumulator a row,
 * accum[row] += mean over the row of grad^2 (summed in d order), then
 * table[row] -= lr * grad / (sqrt(accum[row]) + eps). */
void sparse_rowwise_adagrad(float *table, float *accum, const hps_sparse_grad *g, float lr, float eps);

/* concat: out[B, E+W] = [emb[B,E] | dense[B,W]] */
void concat_forward(float *out, const float *emb, const float *dense, int B, int E, int W);
void concat_backward(float *demb, float *ddense, const float *dout, int B, int E, int W);

/* dot_interaction (DLRM): vectors are [dense (if W>0, W==D)] + V embedding
 * vectors; out[B, W + n(n-1)/2] = [dense | v_i.v_j for i>j]. */
void dot_forward(float *out, const float *emb, const float *dense, int B, int V, int D, int W);
void dot_backward(float *demb, float *ddense, const float *dout, const float *emb,
                  const float *dense, int B, int V, int D, int W);

/* ---- the CTR layers (kernels_ctr.c) ---- */

/* linear (the first-order term): out[b] = sum_s pooled[b,s] + w.dense[b] + b[0],
 * pooled [B,S] being the slots' 1-wide rows summed (embedding_bag_forward with
 * D=1); dense may be NULL (W ignored).  Backward: dpooled[b,s] = dout[b]. */
void linear_forward(float *out, const float *pooled, int S, const float *dense, const float *w,
                    const float *b, int B, int W);
void linear_backward(float *dpooled, float *dw, float *db, const float *dout, const float *dense,
                     int B, int S, int W);

/* fm: over n vectors of D per sample, v[B, n*D]: out[b,f] = (s_f^2 - q_f)/2,
 * s_f = sum_i v_if, q_f = sum_i v_if^2 (vector: out [B,D]; else their sum [B]). */
void fm_forward(float *out, const float *v, int B, int n, int D, int vector);
void fm_backward(float *dv, const float *dout, const float *v, int B, int n, int D, int vector);

/* One DCN cross layer, vector kind: s[b] = x[b].w, y = x0 s + b + x.
 * Backward overwrites dx and accumulates into dx0 (may be NULL), dw and db. */
void cross_vector_forward(float *y, float *s, const float *x0, const float *x, const float *w,
                          const float *b, int B, int W);
void cross_vector_backward(float *dx, float *dx0, float *dw, float *db, const float *dy,
                           const float *x0, const float *x, const float *s, const float *w, int B,
                           int W);
/* The DCN-v2 gate after z = W x + b (fc_forward): y = x0 * z + x, elementwise.
 * Backward: dz = dy * x0 (overwritten), dx0 += dy * z (may be NULL); dx = dy
 * plus what fc_backward gives through z. */
void cross_gate_forward(float *y, const float *x0, const float *z, const float *x, int64_t n);
void cross_gate_backward(float *dz, float *dx0, const float *dy, const float *x0, const float *z,
                         int64_t n);

/* Inverted dropout: element i is kept when dropout_keep(seed, i, rate), a
 * hash of both, so a run's seed fixes every mask on any backend; kept
 * elements scale by 1/(1-rate).  Backward applies the same mask. */
int dropout_keep(uint64_t seed, int64_t i, float rate);
void dropout_forward(float *out, const float *in, int64_t n, float rate, uint64_t seed);
void dropout_backward(float *din, const float *dout, int64_t n, float rate, uint64_t seed);

/* dst[b, 0..W) (row stride ldd) = or += src[b, 0..W) (row stride lds): how a
 * graph gathers a layer's inputs and hands their gradients back. */
void cols_copy(float *dst, int ldd, const float *src, int lds, int B, int W, int add);

/* x[0..n) *= a (micro-batches rescale their loss gradient to the whole batch). */
void vec_scale(float *x, int64_t n, float a);
/* y[0..n) += a * x[0..n) (plain SGD is axpy with a = -lr). */
void vec_axpy(float *y, const float *x, int64_t n, float a);

/* Binary log loss on logits z[B], labels y in {0,1}: returns the mean loss;
 * prob (may be NULL) receives sigmoid(z). */
double logloss_forward(float *prob, const float *z, const float *y, int B);
void logloss_backward(float *dz, const float *z, const float *y, int B);

/* Softmax cross-entropy on logits z[B,C], labels y[b] = class index (as float). */
double softmax_forward(float *prob, const float *z, const float *y, int B, int C);
void softmax_backward(float *dz, const float *prob, const float *y, int B, int C);

#endif
