#include "model/hps_model.h"

#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"

const char *const hps_layer_kind_names[] = {"embedding", "concat", "fc",  "dot_interaction",
                                            "loss",      "linear", "fm",  "cross",
                                            "add",       "dropout", NULL};
const char *const hps_act_names[] = {"none", "relu", "sigmoid", "tanh", NULL};
const char *const hps_pool_names[] = {"sum", "mean", NULL};
const char *const hps_loss_names[] = {"logloss", "softmax", NULL};

const char *const hps_cross_names[] = {"vector", "matrix", NULL};

/* What the parser knows while it walks the layers.  A chain (version 1, and
 * version-2 layers without "inputs") has two streams before its merge
 * (concat or dot_interaction): the pooled embedding vectors and the dense
 * features, through the bottom fc layers; after it, one flat vector, each
 * layer reading the previous one's output. */
typedef struct {
    int merged;         /* past the merge, or past a layer naming its inputs */
    int dense_prod;     /* the dense stream: HPS_TENSOR_DENSE or a bottom layer */
    int dense;          /* its width */
    int *slot_used;     /* per model slot: the embedding layer using it, or -1 */
    int *slot_linear;   /* per model slot: 1 when a linear layer reads it */
    json_t *jlayers;    /* the layers array, for names defined later */
} chain_state;

void hps_model_free(hps_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_layers; i++) {
        free(m->layers[i].slots);
        free(m->layers[i].inputs);
    }
    free(m->layers);
    free(m->slots);
    free(m->name);
    free(m->path);
    free(m);
}

static int parse_name(json_t *obj, const char *key, char out[HPS_NAME_MAX], const char *ctx,
                      hps_error *err)
{
    const char *s;
    if (hps_json_str(obj, key, HPS_REQUIRED, &s, ctx, err)) return -1;
    if (strlen(s) >= HPS_NAME_MAX)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s '%.20s...' is longer than %d characters",
                        ctx, key, s, HPS_NAME_MAX - 1);
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\')
            return hps_fail(err, HPS_EXIT_USAGE, "%s: %s contains a control or quote character",
                            ctx, key);
    strcpy(out, s);
    return 0;
}

static int parse_slot(json_t *js, int i, hps_slot *slot, const char *file, hps_error *err)
{
    static const char *const keys[] = {"name", "vocab", "buckets", "keys_per_sample", NULL};
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s: input slot %d", file, i);
    if (!json_is_object(js))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
    if (hps_json_known_keys(js, keys, ctx, err) || parse_name(js, "name", slot->name, ctx, err))
        return -1;
    snprintf(ctx, sizeof ctx, "%s: input slot %d '%s'", file, i, slot->name);
    int has_vocab = json_object_get(js, "vocab") != NULL;
    int has_buckets = json_object_get(js, "buckets") != NULL;
    if (has_vocab == has_buckets)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: give exactly one of 'vocab' or 'buckets'", ctx);
    slot->hashed = has_buckets;
    if (hps_json_int(js, has_buckets ? "buckets" : "vocab", HPS_REQUIRED, 1, HPS_MAX_BUCKETS,
                     &slot->rows, ctx, err))
        return -1;
    slot->keys_per_row = 1.0;
    return hps_json_num(js, "keys_per_sample", HPS_OPTIONAL, 0.0, 1e6, &slot->keys_per_row, ctx,
                        err);
}

static int parse_input(json_t *root, hps_model *m, const char *file, hps_error *err)
{
    static const char *const keys[] = {"dense", "slots", "label", NULL};
    static const char *const label_keys[] = {"kind", "classes", NULL};
    static const char *const label_kinds[] = {"binary", "multiclass", NULL};
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s: input", file);
    json_t *in = json_object_get(root, "input");
    if (!json_is_object(in))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: missing object 'input'", file);
    if (hps_json_known_keys(in, keys, ctx, err)) return -1;
    long long dense = 0;
    if (hps_json_int(in, "dense", HPS_OPTIONAL, 0, 65536, &dense, ctx, err)) return -1;
    m->n_dense = (int)dense;
    json_t *slots = json_object_get(in, "slots");
    if (slots && !json_is_array(slots))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: slots must be an array", ctx);
    m->n_slots = slots ? (int)json_array_size(slots) : 0;
    if (m->n_slots > HPS_MAX_SLOTS)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %d slots, at most %d", ctx, m->n_slots,
                        HPS_MAX_SLOTS);
    m->slots = hps_calloc(m->n_slots, sizeof *m->slots);
    for (int i = 0; i < m->n_slots; i++) {
        if (parse_slot(json_array_get(slots, i), i, &m->slots[i], file, err)) return -1;
        for (int j = 0; j < i; j++)
            if (strcmp(m->slots[i].name, m->slots[j].name) == 0)
                return hps_fail(err, HPS_EXIT_USAGE, "%s: slot name '%s' is used twice", ctx,
                                m->slots[i].name);
    }
    if (m->n_dense == 0 && m->n_slots == 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: needs dense features or sparse slots", ctx);
    json_t *label = json_object_get(in, "label");
    snprintf(ctx, sizeof ctx, "%s: input label", file);
    if (!json_is_object(label))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: missing object (e.g. {\"kind\": \"binary\"})",
                        ctx);
    int kind = 0;
    long long classes = 2;
    if (hps_json_known_keys(label, label_keys, ctx, err) ||
        hps_json_enum(label, "kind", HPS_REQUIRED, label_kinds, &kind, ctx, err))
        return -1;
    if (kind == HPS_LABEL_MULTICLASS &&
        hps_json_int(label, "classes", HPS_REQUIRED, 2, 1 << 20, &classes, ctx, err))
        return -1;
    m->label = kind;
    m->classes = (int)classes;
    return 0;
}

static int slot_index(const hps_model *m, const char *name)
{
    for (int i = 0; i < m->n_slots; i++)
        if (strcmp(m->slots[i].name, name) == 0) return i;
    return -1;
}

int hps_model_tensor_width(const hps_model *m, int p)
{
    return p == HPS_TENSOR_DENSE ? m->n_dense : p == HPS_TENSOR_LABELS ? 1 : m->layers[p].out_width;
}

int hps_model_tensor_grad(const hps_model *m, int p)
{
    return p >= 0 && m->layers[p].needs_grad;
}

static const char *tensor_name(const hps_model *m, int p)
{
    return p == HPS_TENSOR_DENSE ? "dense" : m->layers[p].name;
}

/* The slot claims: an embedding layer owns its slots (no two embed one
 * slot); a linear layer reads slots beside them. */
static int claim_slot(hps_model *m, hps_layer *L, int li, int s, chain_state *st,
                      const char *ctx, hps_error *err)
{
    if (L->kind == HPS_LAYER_LINEAR) {
        for (int i = 0; i < L->n_slots; i++)
            if (L->slots[i] == s)
                return hps_fail(err, HPS_EXIT_USAGE, "%s: slot '%s' is named twice", ctx,
                                m->slots[s].name);
        st->slot_linear[s] = 1;
    } else if (st->slot_used[s] >= 0) {
        return hps_fail(err, HPS_EXIT_USAGE, "%s: slot '%s' is already used by layer %d '%s'",
                        ctx, m->slots[s].name, st->slot_used[s],
                        m->layers[st->slot_used[s]].name);
    } else {
        st->slot_used[s] = li;
    }
    L->slots[L->n_slots++] = s;
    return 0;
}

/* "slots": omitted or "all" takes every slot no earlier embedding layer took
 * (a linear layer: every slot). */
static int parse_layer_slots(json_t *jl, hps_model *m, hps_layer *L, int li,
                             chain_state *st, const char *ctx, hps_error *err)
{
    json_t *js = json_object_get(jl, "slots");
    L->slots = hps_calloc(m->n_slots + 1, sizeof *L->slots);
    if (!js || (json_is_string(js) && strcmp(json_string_value(js), "all") == 0)) {
        for (int s = 0; s < m->n_slots; s++)
            if ((L->kind == HPS_LAYER_LINEAR || st->slot_used[s] < 0) &&
                claim_slot(m, L, li, s, st, ctx, err))
                return -1;
    } else if (json_is_array(js)) {
        size_t i;
        json_t *v;
        json_array_foreach(js, i, v) {
            int s = json_is_string(v) ? slot_index(m, json_string_value(v)) : -1;
            if (s < 0)
                return hps_fail(err, HPS_EXIT_USAGE,
                                "%s: slots[%zu] must name an input slot", ctx, i);
            if (claim_slot(m, L, li, s, st, ctx, err)) return -1;
        }
    } else {
        return hps_fail(err, HPS_EXIT_USAGE, "%s: slots must be \"all\" or an array of slot names",
                        ctx);
    }
    if (L->n_slots == 0 && !(L->kind == HPS_LAYER_LINEAR && L->linear_dense))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: no input slots left for this layer", ctx);
    return 0;
}

static int infer_embedding(json_t *jl, hps_model *m, hps_layer *L, int li, chain_state *st,
                           const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "slots", "dim", "pooling", "weighted",
                                       NULL};
    long long dim = 0;
    int pooling = HPS_POOL_SUM, weighted = 0;
    if (hps_json_known_keys(jl, keys, ctx, err) ||
        hps_json_int(jl, "dim", HPS_REQUIRED, 1, HPS_MAX_DIM, &dim, ctx, err) ||
        hps_json_enum(jl, "pooling", HPS_OPTIONAL, hps_pool_names, &pooling, ctx, err) ||
        hps_json_bool(jl, "weighted", HPS_OPTIONAL, &weighted, ctx, err))
        return -1;
    if (st->merged && !m->graph)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: embedding must come before concat/dot_interaction",
                        ctx);
    if (parse_layer_slots(jl, m, L, li, st, ctx, err)) return -1;
    L->dim = (int)dim;
    L->pooling = pooling;
    L->weighted = weighted;
    L->in_width = 0;
    if ((long long)L->n_slots * L->dim > HPS_MAX_WIDTH)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: pooled width exceeds %d", ctx, HPS_MAX_WIDTH);
    L->out_width = L->n_slots * L->dim;
    return 0;
}

static int infer_linear(json_t *jl, hps_model *m, hps_layer *L, int li, chain_state *st,
                        const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "slots", "dense", NULL};
    if (hps_json_known_keys(jl, keys, ctx, err) ||
        hps_json_bool(jl, "dense", HPS_OPTIONAL, &L->linear_dense, ctx, err))
        return -1;
    if (L->linear_dense && m->n_dense == 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: dense: the input has no dense features", ctx);
    if (parse_layer_slots(jl, m, L, li, st, ctx, err)) return -1;
    L->dim = 1;
    L->in_width = 0;
    L->out_width = 1;
    L->n_params = (size_t)(L->linear_dense ? m->n_dense : 0) + 1;
    return 0;
}

/* The width of the layer's one input; several are a branch it cannot take. */
static int one_input(const hps_model *m, const hps_layer *L, const char *ctx, hps_error *err)
{
    if (L->n_inputs != 1)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: inputs: %s takes one input, got %d (concat, add and "
                        "dot_interaction take several: concat them first)",
                        ctx, hps_layer_kind_names[L->kind], L->n_inputs);
    return hps_model_tensor_width(m, L->inputs[0]);
}

static int infer_fc(json_t *jl, hps_model *m, hps_layer *L, const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "inputs", "in", "out", "activation", NULL};
    long long out = 0, in = -1;
    int act = HPS_ACT_NONE;
    if (hps_json_known_keys(jl, keys, ctx, err) ||
        hps_json_int(jl, "out", HPS_REQUIRED, 1, HPS_MAX_WIDTH, &out, ctx, err) ||
        hps_json_int(jl, "in", HPS_OPTIONAL, 1, HPS_MAX_WIDTH, &in, ctx, err) ||
        hps_json_enum(jl, "activation", HPS_OPTIONAL, hps_act_names, &act, ctx, err))
        return -1;
    int prev = one_input(m, L, ctx, err);
    if (prev < 0) return -1;
    if (in >= 0 && in != prev)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: in=%lld does not match previous out=%d", ctx, in,
                        prev);
    L->act = act;
    L->in_width = prev;
    L->out_width = (int)out;
    /* in, out <= 2^20 so the product fits size_t on every 64-bit target */
    L->n_params = (size_t)L->in_width * (size_t)L->out_width + (size_t)L->out_width;
    return 0;
}

static int infer_concat(json_t *jl, hps_model *m, hps_layer *L, const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "inputs", NULL};
    if (hps_json_known_keys(jl, keys, ctx, err)) return -1;
    long long w = 0;
    for (int i = 0; i < L->n_inputs; i++) {
        w += hps_model_tensor_width(m, L->inputs[i]);
        if (L->inputs[i] == HPS_TENSOR_DENSE || m->layers[L->inputs[i]].kind != HPS_LAYER_EMBEDDING)
            L->dense_in += hps_model_tensor_width(m, L->inputs[i]);
    }
    if (w == 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: has nothing to concatenate", ctx);
    if (w > HPS_MAX_WIDTH)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: width %lld exceeds %d", ctx, w, HPS_MAX_WIDTH);
    L->in_width = L->out_width = (int)w;
    return 0;
}

/* dot_interaction: the pooled vectors of its embedding inputs interact
 * pairwise with each other and with at most one other input of their dim,
 * which also passes through (DLRM's bottom MLP output). */
static int infer_dot(json_t *jl, hps_model *m, hps_layer *L, const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "inputs", NULL};
    if (hps_json_known_keys(jl, keys, ctx, err)) return -1;
    int n_vec = 0, dim = 0, emb_width = 0;
    for (int i = 0; i < L->n_inputs; i++) {
        int p = L->inputs[i];
        if (p != HPS_TENSOR_DENSE && m->layers[p].kind == HPS_LAYER_EMBEDDING) {
            const hps_layer *E = &m->layers[p];
            dim = n_vec == 0 ? E->dim : (dim == E->dim ? dim : -1);
            n_vec += E->n_slots;
            emb_width += E->out_width;
        } else if (L->dense_in) {
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: inputs: at most one input besides embedding layers "
                            "('%s' and another)",
                            ctx, tensor_name(m, p));
        } else {
            L->dense_in = hps_model_tensor_width(m, p);
        }
    }
    if (n_vec == 0 || dim <= 0)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: needs embedding layers that all have the same dim", ctx);
    if (L->dense_in != 0 && L->dense_in != dim)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: dense width %d must equal the embedding dim %d "
                        "(add an fc with out=%d before it)",
                        ctx, L->dense_in, dim, dim);
    L->vec_dim = dim;
    L->n_vec = n_vec + (L->dense_in ? 1 : 0);
    L->in_width = emb_width + L->dense_in;
    long long pairs = (long long)L->n_vec * (L->n_vec - 1) / 2;
    if (pairs + L->dense_in > HPS_MAX_WIDTH)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %lld interactions exceed %d", ctx, pairs,
                        HPS_MAX_WIDTH);
    L->out_width = L->dense_in + (int)pairs;
    return 0;
}

static int infer_fm(json_t *jl, hps_model *m, hps_layer *L, const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "inputs", "vector", NULL};
    if (hps_json_known_keys(jl, keys, ctx, err) ||
        hps_json_bool(jl, "vector", HPS_OPTIONAL, &L->fm_vector, ctx, err) ||
        one_input(m, L, ctx, err) < 0)
        return -1;
    int p = L->inputs[0];
    if (p == HPS_TENSOR_DENSE || m->layers[p].kind != HPS_LAYER_EMBEDDING)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: inputs: fm reads one embedding layer's pooled vectors, "
                        "'%s' is not an embedding layer",
                        ctx, tensor_name(m, p));
    L->n_vec = m->layers[p].n_slots;
    L->vec_dim = m->layers[p].dim;
    L->in_width = m->layers[p].out_width;
    L->out_width = L->fm_vector ? L->vec_dim : 1;
    return 0;
}

static int infer_cross(json_t *jl, hps_model *m, hps_layer *L, const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "inputs", "kind", "depth", "rank", NULL};
    long long depth = 0, rank = 0;
    int kind = 0;
    if (hps_json_known_keys(jl, keys, ctx, err) ||
        hps_json_enum(jl, "kind", HPS_REQUIRED, hps_cross_names, &kind, ctx, err) ||
        hps_json_int(jl, "depth", HPS_REQUIRED, 1, HPS_MAX_CROSS_DEPTH, &depth, ctx, err))
        return -1;
    int w = one_input(m, L, ctx, err);
    if (w < 0) return -1;
    if (w == 0) return hps_fail(err, HPS_EXIT_USAGE, "%s: its input has width 0", ctx);
    if (json_object_get(jl, "rank") && kind != HPS_CROSS_MATRIX)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: rank is for kind \"matrix\" (DCN-v2)", ctx);
    if (hps_json_int(jl, "rank", HPS_OPTIONAL, 1, w, &rank, ctx, err)) return -1;
    L->cross = kind;
    L->depth = (int)depth;
    L->rank = (int)rank;
    L->in_width = L->out_width = w;
    size_t per = kind == HPS_CROSS_VECTOR ? 2 * (size_t)w
                 : rank ? 2 * (size_t)w * (size_t)rank + (size_t)w
                        : (size_t)w * (size_t)w + (size_t)w;
    L->n_params = per * (size_t)depth;
    if (L->n_params > (size_t)1 << 34)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %zu parameters are too many", ctx, L->n_params);
    return 0;
}

static int infer_add(json_t *jl, hps_model *m, hps_layer *L, const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "inputs", NULL};
    if (hps_json_known_keys(jl, keys, ctx, err)) return -1;
    if (L->n_inputs < 2)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: inputs: add sums two or more inputs, got %d",
                        ctx, L->n_inputs);
    int w = hps_model_tensor_width(m, L->inputs[0]);
    for (int i = 1; i < L->n_inputs; i++)
        if (hps_model_tensor_width(m, L->inputs[i]) != w)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: inputs[%d] '%s' has width %d, inputs[0] '%s' %d: add needs one "
                            "width",
                            ctx, i, tensor_name(m, L->inputs[i]),
                            hps_model_tensor_width(m, L->inputs[i]),
                            tensor_name(m, L->inputs[0]), w);
    L->in_width = w * L->n_inputs;
    L->out_width = w;
    return 0;
}

static int infer_dropout(json_t *jl, hps_model *m, hps_layer *L, const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "inputs", "rate", NULL};
    if (hps_json_known_keys(jl, keys, ctx, err) ||
        hps_json_num(jl, "rate", HPS_REQUIRED, 0.0, 0.99, &L->rate, ctx, err))
        return -1;
    int w = one_input(m, L, ctx, err);
    if (w < 0) return -1;
    L->in_width = L->out_width = w;
    return 0;
}

static int infer_loss(json_t *jl, hps_model *m, hps_layer *L, int li, chain_state *st,
                      const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "inputs", "loss", NULL};
    int loss = 0;
    if (hps_json_known_keys(jl, keys, ctx, err) ||
        hps_json_enum(jl, "loss", HPS_REQUIRED, hps_loss_names, &loss, ctx, err))
        return -1;
    if (li != m->n_layers - 1)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: the loss must be the last layer", ctx);
    if (!st->merged && !m->graph)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: needs a concat or dot_interaction before it",
                        ctx);
    int prev = one_input(m, L, ctx, err);
    if (prev < 0) return -1;
    L->loss = loss;
    if (loss == HPS_LOSS_LOGLOSS && (m->label != HPS_LABEL_BINARY || prev != 1))
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: logloss needs a binary label and previous out=1, got out=%d", ctx,
                        prev);
    if (loss == HPS_LOSS_SOFTMAX && (m->label != HPS_LABEL_MULTICLASS || prev != m->classes))
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: softmax needs a multiclass label and previous out=%d (classes), got %d",
                        ctx, m->classes, prev);
    L->in_width = L->out_width = prev;
    return 0;
}

static int layer_named(json_t *jlayers, const char *name, int from)
{
    for (int j = from; j < (int)json_array_size(jlayers); j++) {
        const char *n = json_string_value(json_object_get(json_array_get(jlayers, j), "name"));
        if (n && strcmp(n, name) == 0) return j;
    }
    return -1;
}

/* Whether layer j reads layer `target` through layers listed after it, by
 * the names in their "inputs" (seen: one mark a layer, so each is walked
 * once). */
static int reads_layer(json_t *jlayers, int j, int target, char *seen)
{
    if (seen[j]) return 0;
    seen[j] = 1;
    json_t *in = json_object_get(json_array_get(jlayers, j), "inputs");
    size_t i;
    json_t *v;
    json_array_foreach(in, i, v) {
        int k = json_is_string(v) ? layer_named(jlayers, json_string_value(v), 0) : -1;
        if (k == target || (k > target && reads_layer(jlayers, k, target, seen))) return 1;
    }
    return 0;
}

/* "inputs": names of earlier layers or "dense", each once. */
static int parse_inputs(json_t *ji, hps_model *m, hps_layer *L, int li, chain_state *st,
                        const char *ctx, hps_error *err)
{
    if (L->kind == HPS_LAYER_EMBEDDING || L->kind == HPS_LAYER_LINEAR)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: inputs: %s reads the input slots (\"slots\") and takes no inputs", ctx,
                        hps_layer_kind_names[L->kind]);
    if (!json_is_array(ji) || json_array_size(ji) == 0 || json_array_size(ji) > HPS_MAX_INPUTS)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: inputs must be an array of 1 to %d names of earlier layers or "
                        "\"dense\"",
                        ctx, HPS_MAX_INPUTS);
    L->inputs = hps_calloc(json_array_size(ji), sizeof *L->inputs);
    size_t i;
    json_t *v;
    json_array_foreach(ji, i, v) {
        const char *name = json_string_value(v);
        if (!name)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: inputs[%zu] must be a layer name", ctx, i);
        int p = -2;
        if (strcmp(name, "dense") == 0) {
            if (m->n_dense == 0)
                return hps_fail(err, HPS_EXIT_USAGE,
                                "%s: inputs[%zu]: 'dense', but the input has no dense features",
                                ctx, i);
            p = HPS_TENSOR_DENSE;
        } else {
            for (int j = 0; j < li; j++)
                if (strcmp(m->layers[j].name, name) == 0) p = j;
        }
        if (p == -2) {
            int later = layer_named(st->jlayers, name, li);
            char *seen = hps_calloc(json_array_size(st->jlayers), 1);
            int cycle = later >= 0 && reads_layer(st->jlayers, later, li, seen);
            free(seen);
            if (cycle)
                return hps_fail(err, HPS_EXIT_USAGE,
                                "%s: inputs[%zu]: '%s' makes a cycle (it reads this layer)", ctx,
                                i, name);
            if (later >= 0)
                return hps_fail(err, HPS_EXIT_USAGE,
                                "%s: inputs[%zu]: '%s' is used before it is defined (list the "
                                "layers in a topological order)",
                                ctx, i, name);
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: inputs[%zu]: no layer named '%s' (nor 'dense')", ctx, i, name);
        }
        if (p >= 0 && m->layers[p].kind == HPS_LAYER_LOSS)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: inputs[%zu]: the loss '%s' feeds nothing",
                            ctx, i, name);
        for (int k = 0; k < L->n_inputs; k++)
            if (L->inputs[k] == p)
                return hps_fail(err, HPS_EXIT_USAGE, "%s: inputs[%zu]: '%s' is named twice", ctx,
                                i, name);
        L->inputs[L->n_inputs++] = p;
    }
    return 0;
}

static void push_input(hps_layer *L, int p, int cap)
{
    if (!L->inputs) L->inputs = hps_calloc(cap + 1, sizeof *L->inputs);
    L->inputs[L->n_inputs++] = p;
}

/* A layer without "inputs" reads by the chain's rules: before the merge, fc
 * and dropout act on the dense stream, and the merge takes every embedding
 * layer and the dense stream; otherwise the previous layer's output. */
static int chain_inputs(hps_model *m, hps_layer *L, int li, chain_state *st, const char *ctx,
                        hps_error *err)
{
    if (L->kind == HPS_LAYER_EMBEDDING || L->kind == HPS_LAYER_LINEAR) return 0;
    if (!st->merged && (L->kind == HPS_LAYER_FC || L->kind == HPS_LAYER_DROPOUT)) {
        if (st->dense == 0)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: %s before concat/dot_interaction acts on the dense features, "
                            "but the input has none",
                            ctx, hps_layer_kind_names[L->kind]);
        L->on_dense = 1;
        push_input(L, st->dense_prod, 1);
        return 0;
    }
    if (!st->merged && (L->kind == HPS_LAYER_CONCAT || L->kind == HPS_LAYER_DOT)) {
        for (int j = 0; j < li; j++)
            if (m->layers[j].kind == HPS_LAYER_EMBEDDING) push_input(L, j, li);
        if (st->dense) push_input(L, st->dense_prod, li);
        return 0;
    }
    if (!st->merged && L->kind == HPS_LAYER_LOSS && !m->graph) return 0; /* infer_loss: why */
    if (li == 0)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: takes the previous layer's output, but it is the first layer "
                        "(name its inputs)",
                        ctx);
    push_input(L, li - 1, 1);
    return 0;
}

static int infer_kind(json_t *jl, hps_model *m, hps_layer *L, int li, chain_state *st,
                      const char *ctx, hps_error *err)
{
    switch (L->kind) {
    case HPS_LAYER_EMBEDDING: return infer_embedding(jl, m, L, li, st, ctx, err);
    case HPS_LAYER_LINEAR: return infer_linear(jl, m, L, li, st, ctx, err);
    case HPS_LAYER_FC: return infer_fc(jl, m, L, ctx, err);
    case HPS_LAYER_CONCAT: return infer_concat(jl, m, L, ctx, err);
    case HPS_LAYER_DOT: return infer_dot(jl, m, L, ctx, err);
    case HPS_LAYER_FM: return infer_fm(jl, m, L, ctx, err);
    case HPS_LAYER_CROSS: return infer_cross(jl, m, L, ctx, err);
    case HPS_LAYER_ADD: return infer_add(jl, m, L, ctx, err);
    case HPS_LAYER_DROPOUT: return infer_dropout(jl, m, L, ctx, err);
    case HPS_LAYER_LOSS: return infer_loss(jl, m, L, li, st, ctx, err);
    default: return hps_fail(err, HPS_EXIT_USAGE, "%s: unknown type", ctx);
    }
}

static int parse_layer(json_t *jl, hps_model *m, int li, chain_state *st, const char *file,
                       hps_error *err)
{
    hps_layer *L = &m->layers[li];
    char ctx[200];
    snprintf(ctx, sizeof ctx, "%s: layer %d", file, li);
    if (!json_is_object(jl)) return hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
    if (parse_name(jl, "name", L->name, ctx, err)) return -1;
    snprintf(ctx, sizeof ctx, "%s: layer %d '%s'", file, li, L->name);
    for (int j = 0; j < li; j++)
        if (strcmp(m->layers[j].name, L->name) == 0)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: name is used by layer %d too", ctx, j);
    if (m->graph && strcmp(L->name, "dense") == 0)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: name 'dense' is the dense features' in inputs; rename the layer", ctx);
    int kind = 0;
    if (hps_json_enum(jl, "type", HPS_REQUIRED, hps_layer_kind_names, &kind, ctx, err)) return -1;
    L->kind = kind;
    json_t *ji = json_object_get(jl, "inputs");
    if (ji ? parse_inputs(ji, m, L, li, st, ctx, err) : chain_inputs(m, L, li, st, ctx, err))
        return -1;
    if ((L->kind == HPS_LAYER_CONCAT || L->kind == HPS_LAYER_DOT) && st->merged && !m->graph)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: the features are already merged by layer %d",
                        ctx, m->merge_layer);
    if (infer_kind(jl, m, L, li, st, ctx, err)) return -1;
    L->needs_grad = L->n_params > 0 || L->kind == HPS_LAYER_EMBEDDING ||
                    L->kind == HPS_LAYER_LINEAR;
    for (int i = 0; i < L->n_inputs; i++)
        L->needs_grad |= hps_model_tensor_grad(m, L->inputs[i]);
    if (L->on_dense) {
        st->dense_prod = li;
        st->dense = L->out_width;
    }
    if (ji || ((L->kind == HPS_LAYER_CONCAT || L->kind == HPS_LAYER_DOT) && !st->merged)) {
        if (!ji) m->merge_layer = li;
        st->merged = 1;
    }
    return 0;
}

/* A graph: some layer names its inputs or is of a kind a chain cannot hold,
 * or the model has no slots and no merge: with nothing to merge, its first
 * fc reads the dense features and each later layer the one before it, as a
 * graph's layers without "inputs" do (a leading concat keeps it a chain). */
static int is_graph(json_t *layers, int n_slots)
{
    size_t i;
    json_t *jl;
    int merge = 0;
    json_array_foreach(layers, i, jl) {
        const char *t = json_string_value(json_object_get(jl, "type"));
        if (json_object_get(jl, "inputs")) return 1;
        if (t && (strcmp(t, "linear") == 0 || strcmp(t, "fm") == 0 || strcmp(t, "cross") == 0 ||
                  strcmp(t, "add") == 0))
            return 1;
        merge |= t && (strcmp(t, "concat") == 0 || strcmp(t, "dot_interaction") == 0);
    }
    return n_slots == 0 && !merge;
}

/* Every output feeds a later layer (the loss's feeds nothing), and every
 * input feature is read. */
static int check_used(hps_model *m, chain_state *st, const char *file, hps_error *err)
{
    int *used = hps_calloc((size_t)m->n_layers + 1, sizeof *used);
    int dense_used = 0, rc = 0;
    for (int l = 0; l < m->n_layers; l++) {
        /* a linear layer with "dense": true reads them without naming them
         * (LR, and the wide part of Wide&Deep) */
        if (m->layers[l].kind == HPS_LAYER_LINEAR && m->layers[l].linear_dense) dense_used = 1;
        for (int i = 0; i < m->layers[l].n_inputs; i++) {
            int p = m->layers[l].inputs[i];
            if (p == HPS_TENSOR_DENSE)
                dense_used = 1;
            else
                used[p] = 1;
        }
    }
    for (int l = 0; l < m->n_layers - 1 && rc == 0; l++)
        if (!used[l])
            rc = hps_fail(err, HPS_EXIT_USAGE,
                          "%s: layer %d '%s': its output is used by no later layer (name it in "
                          "a layer's inputs)",
                          file, l, m->layers[l].name);
    free(used);
    if (rc == 0 && m->n_dense && !dense_used)
        rc = hps_fail(err, HPS_EXIT_USAGE,
                      "%s: input: the dense features are used by no layer (name 'dense' in a "
                      "layer's inputs)",
                      file);
    for (int s = 0; s < m->n_slots && rc == 0; s++)
        if (st->slot_used[s] < 0 && !st->slot_linear[s])
            rc = hps_fail(err, HPS_EXIT_USAGE,
                          "%s: input slot '%s' is used by no embedding or linear layer", file,
                          m->slots[s].name);
    return rc;
}

static int parse_layers(json_t *root, hps_model *m, const char *file, hps_error *err)
{
    json_t *layers = json_object_get(root, "layers");
    if (!json_is_array(layers) || json_array_size(layers) == 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: missing array 'layers'", file);
    if (json_array_size(layers) > HPS_MAX_LAYERS)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: more than %d layers", file, HPS_MAX_LAYERS);
    m->n_layers = (int)json_array_size(layers);
    m->layers = hps_calloc(m->n_layers, sizeof *m->layers);
    m->graph = is_graph(layers, m->n_slots);
    chain_state st = {.dense_prod = HPS_TENSOR_DENSE, .dense = m->n_dense, .jlayers = layers};
    st.slot_used = hps_malloc((m->n_slots + 1) * sizeof *st.slot_used);
    st.slot_linear = hps_calloc(m->n_slots + 1, sizeof *st.slot_linear);
    for (int s = 0; s < m->n_slots; s++) st.slot_used[s] = -1;
    int rc = 0;
    for (int li = 0; li < m->n_layers && rc == 0; li++)
        rc = parse_layer(json_array_get(layers, li), m, li, &st, file, err);
    if (rc == 0 && m->layers[m->n_layers - 1].kind != HPS_LAYER_LOSS)
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: the last layer must be a loss", file);
    if (rc == 0) rc = check_used(m, &st, file, err);
    free(st.slot_used);
    free(st.slot_linear);
    if (m->graph) m->merge_layer = -1;
    return rc;
}


static void layout_params(hps_model *m)
{
    size_t off = 0;
    for (int i = 0; i < m->n_layers; i++) {
        m->layers[i].param_offset = off;
        off += m->layers[i].n_params;
    }
    m->n_params = off;
}

hps_model *hps_model_parse(json_t *root, const char *file, hps_error *err)
{
    static const char *const keys[] = {"format", "version", "name",    "batch",
                                       "input",  "layers",  "comment", NULL};
    hps_model *m = hps_calloc(1, sizeof *m);
    m->path = hps_strdup(file);
    m->merge_layer = -1;
    const char *name;
    long long batch = 0;
    /* format and version are optional, so models written before them still
     * load; a file of another kind (a plan given as -m) is refused as such. */
    if (hps_json_format(root, "hps-model", HPS_MODEL_VERSION, 0, NULL, file, err) ||
        hps_json_known_keys(root, keys, file, err) ||
        hps_json_str(root, "name", HPS_REQUIRED, &name, file, err) ||
        hps_json_int(root, "batch", HPS_REQUIRED, 1, HPS_MAX_BATCH, &batch, file, err))
        goto fail;
    m->name = hps_strdup(name);
    m->batch = (int)batch;
    if (parse_input(root, m, file, err) || parse_layers(root, m, file, err)) goto fail;
    layout_params(m);
    /* The digest is of the model, not of its label: naming the format keeps
     * the digest that profiles and plans recorded. */
    json_t *body = json_copy(root);
    HPS_CHECK(body);
    json_object_del(body, "format");
    json_object_del(body, "version");
    char *canon = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(body);
    HPS_CHECK(canon);
    hps_sha256_hex(canon, strlen(canon), m->digest);
    free(canon);
    return m;
fail:
    hps_model_free(m);
    return NULL;
}

hps_model *hps_model_load(const char *path, hps_error *err)
{
    json_t *root;
    if (hps_json_load(path, &root, err)) return NULL;
    hps_model *m = hps_model_parse(root, hps_path_name(path), err);
    json_decref(root);
    return m;
}

double hps_layer_keys_per_sample(const hps_model *m, const hps_layer *L)
{
    double k = 0;
    for (int i = 0; i < L->n_slots; i++) k += m->slots[L->slots[i]].keys_per_row;
    return k;
}

static double act_flops(hps_act a) { return a == HPS_ACT_NONE ? 0 : a == HPS_ACT_RELU ? 1 : 4; }

const char *const hps_row_dtype_names[] = {"fp32", "fp16", "bf16", NULL};

size_t hps_row_state_bytes(int dim, int rowwise, hps_row_dtype dtype)
{
    return (size_t)dim * (dtype == HPS_ROW_FP32 ? sizeof(float) : sizeof(uint16_t)) +
           (rowwise ? 1 : (size_t)dim) * sizeof(float);
}

void hps_layer_costs(const hps_model *m, int li, int batch, hps_layer_cost *c)
{
    const hps_layer *L = &m->layers[li];
    const double B = batch, f = sizeof(float);
    memset(c, 0, sizeof *c);
    c->bytes_in = B * L->in_width * f;
    c->bytes_out = B * L->out_width * f;
    c->param_bytes = (double)L->n_params * f;
    switch (L->kind) {
    case HPS_LAYER_EMBEDDING: {
        double keys = hps_layer_keys_per_sample(m, L);
        c->sparse_rows = B * keys;
        c->sparse_bytes = c->sparse_rows * L->dim * f;
        c->flops_fwd = B * keys * L->dim * (L->weighted ? 2 : 1);
        c->flops_bwd = c->flops_fwd;
        c->bytes_in = B * keys * (sizeof(uint64_t) + (L->weighted ? f : 0));
        for (int i = 0; i < L->n_slots; i++)
            c->table_bytes += (double)m->slots[L->slots[i]].rows * L->dim * f;
        break;
    }
    case HPS_LAYER_FC:
        c->flops_fwd = 2.0 * B * L->in_width * L->out_width + B * L->out_width * (1 + act_flops(L->act));
        c->flops_bwd = 4.0 * B * L->in_width * L->out_width + B * L->out_width * (1 + act_flops(L->act));
        break;
    case HPS_LAYER_DOT:
        c->flops_fwd = B * (double)L->n_vec * (L->n_vec - 1) / 2 * 2 * L->vec_dim;
        c->flops_bwd = 2 * c->flops_fwd;
        break;
    case HPS_LAYER_CONCAT: break;
    case HPS_LAYER_LINEAR: {
        double keys = hps_layer_keys_per_sample(m, L);
        int dense = L->linear_dense ? m->n_dense : 0;
        c->sparse_rows = B * keys;
        c->sparse_bytes = c->sparse_rows * f;
        c->flops_fwd = B * (keys + 2.0 * dense + 1);
        c->flops_bwd = B * (keys + 2.0 * dense);
        c->bytes_in = B * (keys * sizeof(uint64_t) + dense * f);
        for (int i = 0; i < L->n_slots; i++) c->table_bytes += (double)m->slots[L->slots[i]].rows * f;
        break;
    }
    case HPS_LAYER_FM:
        c->flops_fwd = B * (3.0 * L->n_vec * L->vec_dim + 3.0 * L->vec_dim);
        c->flops_bwd = B * 3.0 * L->n_vec * L->vec_dim;
        break;
    case HPS_LAYER_CROSS: {
        double w = L->in_width, r = L->rank;
        double per = L->cross == HPS_CROSS_VECTOR ? 5 * w : r ? 4 * w * r + 3 * w : 2 * w * w + 3 * w;
        c->flops_fwd = B * L->depth * per;
        c->flops_bwd = 2 * c->flops_fwd;
        c->bytes_out = B * L->depth * w * f; /* every layer's output is kept for backward */
        break;
    }
    case HPS_LAYER_ADD:
        c->flops_fwd = B * (double)L->out_width * (L->n_inputs - 1);
        c->flops_bwd = B * (double)L->in_width;
        break;
    case HPS_LAYER_DROPOUT:
        c->flops_fwd = B * 2.0 * L->out_width;
        c->flops_bwd = B * (double)L->out_width;
        break;
    case HPS_LAYER_LOSS:
        c->flops_fwd = B * L->in_width * 8.0;
        c->flops_bwd = B * L->in_width * 2.0;
        c->bytes_out = B * f;
        break;
    default: break;
    }
    c->work_bytes = 2 * (c->bytes_in + c->bytes_out) + 3 * c->param_bytes + 2 * c->sparse_bytes;
}

int hps_model_cut_live(const hps_model *m, int cut, int *producers, int max)
{
    HPS_CHECK(cut > 0 && cut < m->n_layers);
    int n = 0;
    for (int p = HPS_TENSOR_DENSE; p < cut; p++) {
        int live = 0;
        for (int l = cut; l < m->n_layers && !live; l++)
            for (int i = 0; i < m->layers[l].n_inputs; i++) live |= m->layers[l].inputs[i] == p;
        if (live && n < max) producers[n] = p;
        n += live;
    }
    if (n < max) producers[n] = HPS_TENSOR_LABELS;
    return n + 1;
}

size_t hps_model_cut_width(const hps_model *m, int cut)
{
    int *live = hps_malloc(((size_t)cut + 2) * sizeof *live);
    int n = hps_model_cut_live(m, cut, live, cut + 2);
    size_t w = 0;
    for (int i = 0; i < n; i++) w += (size_t)hps_model_tensor_width(m, live[i]);
    free(live);
    return w;
}

void hps_model_cut_widths(const hps_model *m, int c, int *act, int *grad)
{
    if (m->graph) {
        int *live = hps_malloc(((size_t)c + 2) * sizeof *live);
        int n = hps_model_cut_live(m, c, live, c + 2);
        *act = *grad = 0;
        for (int i = 0; i < n; i++) {
            if (live[i] == HPS_TENSOR_LABELS) continue;
            *act += hps_model_tensor_width(m, live[i]);
            if (hps_model_tensor_grad(m, live[i])) *grad += hps_model_tensor_width(m, live[i]);
        }
        free(live);
        return;
    }
    if (m->merge_layer < c) {
        *act = *grad = m->layers[c - 1].out_width;
        return;
    }
    int pooled = 0, dense = m->n_dense, ddense = 0;
    for (int l = 0; l < c; l++) {
        const hps_layer *L = &m->layers[l];
        if (L->on_dense) dense = ddense = L->out_width;
    }
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].kind == HPS_LAYER_EMBEDDING) pooled += m->layers[l].out_width;
    *act = pooled + dense;
    *grad = pooled + ddense;
}

int hps_model_embedding_dim(const hps_model *m)
{
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].kind == HPS_LAYER_EMBEDDING) return m->layers[l].dim;
    return 16;
}
