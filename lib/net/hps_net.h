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
 *
 * A graph (model->graph) gives every tensor its own contiguous [B, width]
 * buffer: a layer's out (and dout, its gradient), an embedding or linear
 * layer's pooled rows a block of the pooled buffer.  A tensor with several
 * consumers gets the sum of their gradients: the last consumer in the
 * topological order (the first to run backward) writes it, the others add.
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
    int col;                /* column of the layer's output in the pooled buffer
                             * (a graph: its block starts at cap * col) */
    float *work, *dwork;    /* a graph layer's scratch: cross's inner layers, gathers */
    hps_bags bags;          /* arrays in backend memory */
    int64_t *bag_offsets, *bag_rows;
    float *bag_weights;
    int64_t nnz_cap;
    hps_sparse_grad *grad;
} hps_net_layer;

/* Maps the n keys of layer `layer` that one load picked (key e of the
 * layer's slot_in_layer[e]-th slot) to table rows, in order: all at once,
 * so that the map can overlap their cache misses and spread them over
 * threads.  0, or -1 to fail the load (the map keeps its own error).
 * hps-train's parameter-server tables use it. */
typedef int (*hps_row_map)(void *ctx, int layer, const int *slot_in_layer, const uint64_t *keys, int64_t n,
                           int64_t *rows);

typedef struct {
    const hps_model *model;
    const hps_backend *be;
    const hps_backend *emb_be; /* the embedding layers' backend: be, or the CPU's */
    int host_embeddings;    /* HPS_NET_HOST_TABLES: emb_be is the CPU's */
    int shared;             /* parameters belong to another net */
    int shared_tables;      /* embedding tables belong to another net or to the caller */
    hps_row_map row_map;    /* NULL: key mod rows into the net's own tables */
    void *row_map_ctx;
    int keys_first, keys_end; /* the table layers whose keys a load maps (hps_net_set_key_layers) */
    int cap, B;             /* samples allocated, samples in the current batch */
    float loss_scale;       /* the loss gradient is multiplied by it (micro-batches) */
    int training;           /* dropout is active (hps_net_set_dropout) */
    uint64_t dropout_seed;  /* this batch's masks */
    int *last_use;          /* a graph: per layer, the last layer reading its output, or -1 */
    int *n_uses;            /* a graph: per layer, how many layers read its output */
    int E;                  /* pooled embedding width */
    float *params, *grads, *adam_m, *adam_v; /* n_params each, one allocation */
    float *acts;            /* every activation and gradient buffer */
    float *dense_in, *labels, *pooled, *dpooled;
    float *h_pooled, *h_dpooled; /* where embedding layers write: pooled itself, or host copies */
    hps_net_layer *layers;
    int adam_t;
    double loss;
    /* host staging for bags */
    int64_t *h_offsets, *h_rows;
    float *h_weights;
    uint64_t *h_keys; /* a layer's keys and their slot in the layer, before mapping */
    int *h_slot;
    int64_t h_cap;
} hps_net;

typedef enum { HPS_OPTIM_ADAM, HPS_OPTIM_SGD } hps_dense_optim;

typedef struct {
    hps_dense_optim dense; /* Adam (default) or plain SGD for the dense layers */
    float lr_dense;
    float beta1, beta2, eps;
    float lr_sparse;  /* AdaGrad */
    float adagrad_eps;
} hps_optim;

/* Defaults: Adam 1e-3 (0.9, 0.999, 1e-8), AdaGrad 0.05 (eps 1e-8). */
hps_optim hps_optim_default(void);

/* table_rows_cap > 0 caps every slot's rows (hps-profile uses it to keep the
 * tables in memory; keys then fold into fewer rows); HPS_NET_EXTERNAL_TABLES
 * allocates none: the caller sets a row map and each layer's table. */
#define HPS_NET_EXTERNAL_TABLES (-1)
/* External tables in host memory: the embedding layers then run on the CPU
 * beside them whatever the backend (the parameter-server side), the layers
 * after them on the backend, and the pooled rows and their gradient cross
 * between the two at the merge layer. */
#define HPS_NET_HOST_TABLES (-2)
hps_net *hps_net_create(const hps_model *m, const hps_backend *be, int cap,
                        int64_t table_rows_cap);
/* Another executor over the same parameters, gradients, optimizer state and
 * tables, with activations of its own: one per micro-batch in flight. */
hps_net *hps_net_create_shared(hps_net *owner, int cap);
void hps_net_set_row_map(hps_net *net, hps_row_map map, void *ctx);
/* A load maps the keys of the table layers in [first, end) only: a stage
 * in another process loads the others' (all of them by default). */
void hps_net_set_key_layers(hps_net *net, int first, int end);
/* Points an embedding layer at an external table and its AdaGrad accumulators. */
void hps_net_set_table(hps_net *net, int layer, float *table, float *accum);
void hps_net_free(hps_net *net);
/* fc: uniform(+-1/sqrt(in)) weights and biases, as PyTorch's Linear;
 * embeddings: uniform(+-0.05). */
void hps_net_init(hps_net *net, uint64_t seed);

/* Uploads samples [first, first+n) of a batch (n <= cap); keys become rows.
 * Returns -1 when the row map fails. */
int hps_net_load_range(hps_net *net, const hps_batch *b, int first, int n);
/* The whole batch (b->B <= cap); with the fold map it cannot fail. */
void hps_net_load_batch(hps_net *net, const hps_batch *b);

/* Dropout on (training) with the masks of seed, or off (evaluation): set
 * before each forward; a seed a micro-batch keeps runs reproducible. */
void hps_net_set_dropout(hps_net *net, int training, uint64_t seed);

/* A graph's tensor by producer (a layer index or HPS_TENSOR_DENSE): its
 * buffer [B, width] and its gradient's (NULL: it takes none). */
void hps_net_tensor(hps_net *net, int producer, float **x, float **dx);

void hps_net_layer_forward(hps_net *net, int l);
void hps_net_layer_backward(hps_net *net, int l);
double hps_net_forward(hps_net *net);  /* returns the mean loss */
void hps_net_backward(hps_net *net);   /* zeroes the dense gradients first */
void hps_net_update(hps_net *net, const hps_optim *opt);
/* The two halves of hps_net_update, for callers that merge sparse gradients
 * of several micro-batches first: Adam on the dense parameters (once per
 * batch), AdaGrad with one sparse gradient on a layer's table. */
void hps_net_update_dense(hps_net *net, const hps_optim *opt);
void hps_net_update_sparse(hps_net *net, int layer, const hps_sparse_grad *g,
                           const hps_optim *opt);

/* Output probabilities of the last batch (B x classes-or-1), to host memory. */
void hps_net_probs(hps_net *net, float *out);

#endif
