/* hps_net: runs a model's layer chain forward and backward on one backend.
 *
 * All dense parameters live in one allocation (params, with grads, and Adam's
 * m and v beside it), all activations and their gradients in another.  Each
 * embedding layer owns a table whose rows hold all of its slots, slot after
 * slot; a key k of slot s lands on row base(s) + k mod rows(s).
 *
 * Before the merge layer the chain has two streams, as hps-model(5) says: the
 * pooled embeddings (one [B, E] buffer that every embedding layer fills at its
 * column) and the dense features (through the bottom fc layers).
 */
#ifndef HPS_NET_H
#define HPS_NET_H

#include "kernels/hps_backend.h"
#include "net/hps_batch.h"

typedef struct {
    float *in, *din;        /* input of an fc or loss layer, and its gradient (may be NULL) */
    float *out, *dout;      /* fc/merge output (after activation) and its gradient; loss: probs */
    float *emb, *demb;      /* merge layer: pooled embeddings */
    float *dense, *ddense;  /* merge layer: the dense stream (ddense NULL for raw input) */
    /* embedding layer */
    float *table, *accum;   /* rows x dim, and AdaGrad's accumulators */
    int64_t rows, *slot_base, *slot_rows; /* per slot of the layer */
    int col;                /* column of the layer's output in the pooled buffer */
    hps_bags bags;          /* arrays in backend memory */
    int64_t *bag_offsets, *bag_rows;
    float *bag_weights;
    int64_t nnz_cap;
    hps_sparse_grad *grad;
} hps_net_layer;

typedef struct {
    const hps_model *model;
    const hps_backend *be;
    int cap, B;             /* samples allocated, samples in the current batch */
    int E;                  /* pooled embedding width */
    float *params, *grads, *adam_m, *adam_v; /* n_params each, one allocation */
    float *acts;            /* every activation and gradient buffer */
    float *dense_in, *labels, *pooled, *dpooled;
    hps_net_layer *layers;
    int adam_t;
    double loss;
    /* host staging for bags */
    int64_t *h_offsets, *h_rows;
    float *h_weights;
    int64_t h_cap;
} hps_net;

typedef struct {
    float lr_dense;   /* Adam */
    float beta1, beta2, eps;
    float lr_sparse;  /* AdaGrad */
    float adagrad_eps;
} hps_optim;

/* Defaults: Adam 1e-3 (0.9, 0.999, 1e-8), AdaGrad 0.05 (eps 1e-8). */
hps_optim hps_optim_default(void);

/* table_rows_cap > 0 caps every slot's rows (hps-profile uses it to keep the
 * tables in memory; keys then fold into fewer rows). */
hps_net *hps_net_create(const hps_model *m, const hps_backend *be, int cap,
                        int64_t table_rows_cap);
void hps_net_free(hps_net *net);
/* fc: uniform(+-1/sqrt(in)) weights and biases, as PyTorch's Linear;
 * embeddings: uniform(+-0.05). */
void hps_net_init(hps_net *net, uint64_t seed);

/* Uploads a batch (b->B <= cap); keys become rows. */
void hps_net_load_batch(hps_net *net, const hps_batch *b);

void hps_net_layer_forward(hps_net *net, int l);
void hps_net_layer_backward(hps_net *net, int l);
double hps_net_forward(hps_net *net);  /* returns the mean loss */
void hps_net_backward(hps_net *net);   /* zeroes the dense gradients first */
void hps_net_update(hps_net *net, const hps_optim *opt);

/* Output probabilities of the last batch (B x classes-or-1), to host memory. */
void hps_net_probs(hps_net *net, float *out);

#endif
