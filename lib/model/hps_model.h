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
/* The model file format this hps reads ("format": "hps-model", "version": 1). */
#define HPS_MODEL_VERSION 1
#define HPS_MAX_DIM 4096
#define HPS_MAX_WIDTH (1 << 20)
#define HPS_MAX_SLOTS 4096
#define HPS_MAX_LAYERS 1024
#define HPS_MAX_BUCKETS (1LL << 40)

typedef enum {
    HPS_LAYER_EMBEDDING,
    HPS_LAYER_CONCAT,
    HPS_LAYER_FC,
    HPS_LAYER_DOT,
    HPS_LAYER_LOSS,
    HPS_LAYER_KINDS
} hps_layer_kind;
typedef enum { HPS_LOSS_LOGLOSS, HPS_LOSS_SOFTMAX } hps_loss_kind;
typedef enum { HPS_LABEL_BINARY, HPS_LABEL_MULTICLASS } hps_label_kind;

extern const char *const hps_layer_kind_names[];  /* "embedding", ... */
extern const char *const hps_act_names[];
extern const char *const hps_pool_names[];
extern const char *const hps_loss_names[];

typedef struct {
    char name[HPS_NAME_MAX];
    long long rows;     /* table rows: vocabulary size or hash buckets */
    int hashed;         /* 1: keys are folded into rows by hashing */
    double keys_per_row; /* mean keys per sample in this slot (bag size), for costs */
} hps_slot;

typedef struct {
    char name[HPS_NAME_MAX];
    hps_layer_kind kind;
    /* embedding */
    int n_slots, *slots; /* indices into model->slots, in output order */
    int dim;
    hps_pool pooling;
    int weighted;
    /* fc */
    hps_act act;
    int on_dense; /* fc before the merge: acts on the dense features (bottom MLP) */
    /* loss */
    hps_loss_kind loss;
    /* dot_interaction: vectors interacting, each of vec_dim; dense_in passes through */
    int n_vec, vec_dim, dense_in;
    /* shapes per sample, inferred */
    int in_width, out_width;
    /* dense parameters: [out_width x in_width] weights then out_width biases */
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
    int merge_layer; /* index of the concat/dot layer, or -1 */
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

void hps_layer_costs(const hps_model *m, int layer, int batch, hps_layer_cost *c);

/* Floats per sample that hps-train sends across the cut before layer c
 * (0 < c < n_layers): *act forward, *grad back; the label (one float a
 * sample) goes forward besides.  After the merge layer: layer c-1's output
 * both ways.  At or before it: every pooled embedding and the dense stream at
 * c (the last bottom fc's output, or the raw dense features, which have no
 * gradient), hps-model(5). */
void hps_model_cut_widths(const hps_model *m, int c, int *act, int *grad);

/* The dim of the model's first embedding layer (16 when it has none). */
int hps_model_embedding_dim(const hps_model *m);

/* Total embedding bag entries per sample for a layer (sum of keys_per_row). */
double hps_layer_keys_per_sample(const hps_model *m, const hps_layer *L);

#endif
