/* hps_model: the model description every tool reads (see hps-model(5)).
 *
 * A model is an input schema (dense features, sparse slots, label) and a chain
 * of layers.  Parsing validates every field and infers every shape, so the
 * rest of hps can trust in_width/out_width and the parameter layout.
 */
#ifndef HPS_MODEL_H
#define HPS_MODEL_H

#include <jansson.h>

#include "core/hps_core.h"
#include "kernels/hps_kernel_kinds.h"

#define HPS_NAME_MAX 64
#define HPS_MAX_BATCH (1 << 20)
#define HPS_MAX_MICRO_BATCHES 4096 /* per batch, as hps-train and hps-plan take them */
/* The model file format this hps reads ("format": "hps-model", "version": 1
 * or 2; version 2 adds named inputs and the CTR layers, a version-1 chain
 * reads the same either way). */
#define HPS_MODEL_VERSION 2
#define HPS_MAX_DIM 4096
#define HPS_MAX_WIDTH (1 << 20)
#define HPS_MAX_SLOTS 4096
#define HPS_MAX_LAYERS 1024
#define HPS_MAX_BUCKETS (1LL << 40)
#define HPS_MAX_INPUTS 256
#define HPS_MAX_CROSS_DEPTH 64

/* A tensor of the graph is named by its producer: a layer index, or one of
 * these. */
#define HPS_TENSOR_DENSE (-1)  /* the raw dense features (no gradient) */
#define HPS_TENSOR_LABELS (-2) /* the labels: one float a sample, live at every cut */

typedef enum {
    HPS_LAYER_EMBEDDING,
    HPS_LAYER_CONCAT,
    HPS_LAYER_FC,
    HPS_LAYER_DOT,
    HPS_LAYER_LOSS,
    HPS_LAYER_LINEAR,  /* first-order term: 1-wide rows per key, w.dense, bias */
    HPS_LAYER_FM,      /* factorization machine over one embedding layer */
    HPS_LAYER_CROSS,   /* DCN / DCN-v2 cross network */
    HPS_LAYER_ADD,     /* elementwise sum of inputs of one width */
    HPS_LAYER_DROPOUT, /* training only */
    HPS_LAYER_KINDS
} hps_layer_kind;
typedef enum { HPS_LOSS_LOGLOSS, HPS_LOSS_SOFTMAX } hps_loss_kind;
typedef enum { HPS_LABEL_BINARY, HPS_LABEL_MULTICLASS } hps_label_kind;
typedef enum { HPS_CROSS_VECTOR, HPS_CROSS_MATRIX } hps_cross_kind;

extern const char *const hps_layer_kind_names[];  /* "embedding", ... */
extern const char *const hps_act_names[];
extern const char *const hps_pool_names[];
extern const char *const hps_loss_names[];
extern const char *const hps_cross_names[]; /* "vector", "matrix" */

typedef struct {
    char name[HPS_NAME_MAX];
    long long rows;     /* table rows: vocabulary size or hash buckets */
    int hashed;         /* 1: keys are folded into rows by hashing */
    double keys_per_row; /* mean keys per sample in this slot (bag size), for costs */
} hps_slot;

typedef struct {
    char name[HPS_NAME_MAX];
    hps_layer_kind kind;
    /* the tensors it reads, in order: producer layer indices or
     * HPS_TENSOR_DENSE; none for embedding and linear (they read the raw
     * sparse features).  A chain's layers get theirs by the chain's rules. */
    int n_inputs, *inputs;
    int needs_grad; /* its output needs a gradient: parameters at or before it */
    /* embedding; linear: the slots whose 1-wide rows it sums */
    int n_slots, *slots; /* indices into model->slots, in output order */
    int dim;
    hps_pool pooling;
    int weighted;
    /* fc */
    hps_act act;
    int on_dense; /* a chain's fc or dropout before the merge: on the dense stream (bottom MLP) */
    /* loss */
    hps_loss_kind loss;
    /* dot_interaction: vectors interacting, each of vec_dim; dense_in passes through;
     * fm: the n_vec pooled vectors of vec_dim of its embedding input */
    int n_vec, vec_dim, dense_in;
    /* linear: w.dense too (its n_dense weights lead its parameters, the bias last) */
    int linear_dense;
    /* fm: output the vector of width vec_dim instead of its sum */
    int fm_vector;
    /* cross: depth layers on a width in_width; rank 0: full W (matrix) */
    hps_cross_kind cross;
    int depth, rank;
    /* dropout */
    double rate;
    /* shapes per sample, inferred */
    int in_width, out_width;
    /* dense parameters: fc: [out_width x in_width] weights then out_width
     * biases; cross, per layer i: vector w[in] b[in]; matrix W[in x in] b[in];
     * rank r: u[in x r] v[r x in] b[in] (W = u v); linear: w[n_dense] b[1] */
    size_t n_params, param_offset;
} hps_layer;

typedef struct {
    char *name;
    char *path;
    char digest[72]; /* of the canonical JSON: whitespace and key order do not matter */
    int batch;
    int n_dense;
    int n_slots;
    hps_slot *slots;
    hps_label_kind label;
    int classes; /* 2 for binary */
    int n_layers;
    hps_layer *layers;
    size_t n_params; /* all dense parameters, one allocation */
    int merge_layer; /* index of the concat/dot layer of a chain; -1 in a graph */
    int graph;       /* a layer names its inputs or is of a kind a chain lacks */
} hps_model;

/* Parses and validates; errors name the file, the layer and the field. */
hps_model *hps_model_load(const char *path, hps_error *err);
hps_model *hps_model_parse(json_t *root, const char *name, hps_error *err);
void hps_model_free(hps_model *m);

/* Analytic per-layer costs for a batch of B samples. */
typedef struct {
    double flops_fwd, flops_bwd;
    double bytes_in, bytes_out;  /* activations crossing the layer's input and output */
    double param_bytes;          /* dense parameters */
    double sparse_bytes;         /* embedding rows touched per batch (pull; the push is equal) */
    double sparse_rows;          /* embedding rows looked up per batch */
    double table_bytes;          /* whole embedding tables owned by the layer */
    double work_bytes;           /* activations + gradients + parameters resident */
} hps_layer_cost;

/* How a table stores a row's weights (hps-train --row-dtype; the arithmetic
 * is fp32 whatever they are), named by hps_row_dtype_names. */
typedef enum { HPS_ROW_FP32, HPS_ROW_FP16, HPS_ROW_BF16 } hps_row_dtype;
extern const char *const hps_row_dtype_names[]; /* "fp32", "fp16", "bf16" */
/* A row's weights and its AdaGrad state (rowwise: one fp32 accumulator, else
 * one an element): what hps-train's tables hold of a row beside their
 * bookkeeping, and what hps-plan sizes the tables by. */
size_t hps_row_state_bytes(int dim, int rowwise, hps_row_dtype dtype);

void hps_layer_costs(const hps_model *m, int layer, int batch, hps_layer_cost *c);

/* Floats per sample that hps-train sends across the cut before layer c
 * (0 < c < n_layers): *act forward, *grad back; the label (one float a
 * sample) goes forward besides.  After the merge layer: layer c-1's output
 * both ways.  At or before it: every pooled embedding and the dense stream at
 * c (the last bottom fc's output, or the raw dense features, which have no
 * gradient), hps-model(5).  A graph: its live tensors (hps_model_cut_live)
 * less the labels, and those of them that take a gradient. */
void hps_model_cut_widths(const hps_model *m, int c, int *act, int *grad);

/* The tensors live across the cut before layer `cut` (0 < cut < n_layers) of
 * the topological order: each producer (a layer index < cut, or
 * HPS_TENSOR_DENSE) that a layer at or after `cut` reads, in ascending order
 * with HPS_TENSOR_DENSE first, then HPS_TENSOR_LABELS last.  Writes at most
 * max of them; returns how many there are. */
int hps_model_cut_live(const hps_model *m, int cut, int *producers, int max);
/* Floats per sample of those tensors (the labels count 1). */
size_t hps_model_cut_width(const hps_model *m, int cut);
/* Floats per sample of one tensor (a layer index, HPS_TENSOR_DENSE or _LABELS). */
int hps_model_tensor_width(const hps_model *m, int producer);
/* Whether the tensor takes a gradient back across a cut (the dense features
 * and labels never do). */
int hps_model_tensor_grad(const hps_model *m, int producer);

/* Whether the layer owns a table of rows per key (embedding; linear, whose
 * rows are 1 wide). */
static inline int hps_layer_has_table(const hps_layer *L)
{
    return L->kind == HPS_LAYER_EMBEDDING || L->kind == HPS_LAYER_LINEAR;
}

/* The dim of the model's first embedding layer (16 when it has none). */
int hps_model_embedding_dim(const hps_model *m);

/* Total embedding bag entries per sample for a layer (sum of keys_per_row). */
double hps_layer_keys_per_sample(const hps_model *m, const hps_layer *L);

#endif
