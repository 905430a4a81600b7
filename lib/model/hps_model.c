#include "model/hps_model.h"

#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"

const char *const hps_layer_kind_names[] = {"embedding", "concat", "fc", "dot_interaction",
                                            "loss", NULL};
const char *const hps_act_names[] = {"none", "relu", "sigmoid", "tanh", NULL};
const char *const hps_pool_names[] = {"sum", "mean", NULL};
const char *const hps_loss_names[] = {"logloss", "softmax", NULL};

/* Shape of the activation flowing down the chain while it is parsed.  Before
 * the merge (concat or dot_interaction) there are two parts: pooled embedding
 * vectors and the dense features; after it, one flat vector. */
typedef struct {
    int merged;
    int n_vec, vec_dim; /* vec_dim -1: embedding layers of different dims */
    int emb_width;
    int dense;
    int flat;
    int *slot_used; /* per model slot: index of the embedding layer using it, or -1 */
} chain_state;

void hps_model_free(hps_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_layers; i++) free(m->layers[i].slots);
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

static int claim_slot(hps_model *m, hps_layer *L, int li, int s, chain_state *st,
                      const char *ctx, hps_error *err)
{
    if (st->slot_used[s] >= 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: slot '%s' is already used by layer %d '%s'",
                        ctx, m->slots[s].name, st->slot_used[s],
                        m->layers[st->slot_used[s]].name);
    st->slot_used[s] = li;
    L->slots[L->n_slots++] = s;
    return 0;
}

/* "slots": omitted or "all" takes every slot no earlier embedding layer took. */
static int parse_embedding_slots(json_t *jl, hps_model *m, hps_layer *L, int li,
                                 chain_state *st, const char *ctx, hps_error *err)
{
    json_t *js = json_object_get(jl, "slots");
    L->slots = hps_calloc(m->n_slots, sizeof *L->slots);
    if (!js || (json_is_string(js) && strcmp(json_string_value(js), "all") == 0)) {
        for (int s = 0; s < m->n_slots; s++)
            if (st->slot_used[s] < 0 && claim_slot(m, L, li, s, st, ctx, err)) return -1;
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
    if (L->n_slots == 0)
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
    if (st->merged)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: embedding must come before concat/dot_interaction",
                        ctx);
    if (parse_embedding_slots(jl, m, L, li, st, ctx, err)) return -1;
    L->dim = (int)dim;
    L->pooling = pooling;
    L->weighted = weighted;
    L->in_width = 0;
    L->out_width = L->n_slots * L->dim;
    if ((long long)st->emb_width + L->out_width > HPS_MAX_WIDTH)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: pooled width exceeds %d", ctx, HPS_MAX_WIDTH);
    st->vec_dim = st->n_vec == 0 ? L->dim : (st->vec_dim == L->dim ? L->dim : -1);
    st->n_vec += L->n_slots;
    st->emb_width += L->out_width;
    return 0;
}

static int infer_fc(json_t *jl, hps_layer *L, chain_state *st, const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "in", "out", "activation", NULL};
    long long out = 0, in = -1;
    int act = HPS_ACT_NONE;
    if (hps_json_known_keys(jl, keys, ctx, err) ||
        hps_json_int(jl, "out", HPS_REQUIRED, 1, HPS_MAX_WIDTH, &out, ctx, err) ||
        hps_json_int(jl, "in", HPS_OPTIONAL, 1, HPS_MAX_WIDTH, &in, ctx, err) ||
        hps_json_enum(jl, "activation", HPS_OPTIONAL, hps_act_names, &act, ctx, err))
        return -1;
    L->on_dense = !st->merged;
    int prev = st->merged ? st->flat : st->dense;
    if (prev == 0)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: fc before concat/dot_interaction acts on the dense features, "
                        "but the input has none",
                        ctx);
    if (in >= 0 && in != prev)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: in=%lld does not match previous out=%d", ctx, in,
                        prev);
    L->act = act;
    L->in_width = prev;
    L->out_width = (int)out;
    /* in, out <= 2^20 so the product fits size_t on every 64-bit target */
    L->n_params = (size_t)L->in_width * (size_t)L->out_width + (size_t)L->out_width;
    if (st->merged)
        st->flat = L->out_width;
    else
        st->dense = L->out_width;
    return 0;
}

static int infer_merge(json_t *jl, hps_model *m, hps_layer *L, int li, chain_state *st,
                       const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", NULL};
    if (hps_json_known_keys(jl, keys, ctx, err)) return -1;
    if (st->merged)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: the features are already merged by layer %d",
                        ctx, m->merge_layer);
    L->dense_in = st->dense;
    if (L->kind == HPS_LAYER_CONCAT) {
        L->in_width = st->emb_width + st->dense;
        L->out_width = L->in_width;
    } else {
        if (st->n_vec == 0 || st->vec_dim <= 0)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: needs embedding layers that all have the same dim", ctx);
        if (st->dense != 0 && st->dense != st->vec_dim)
            return hps_fail(err, HPS_EXIT_USAGE,
                            "%s: dense width %d must equal the embedding dim %d "
                            "(add an fc with out=%d before it)",
                            ctx, st->dense, st->vec_dim, st->vec_dim);
        L->vec_dim = st->vec_dim;
        L->n_vec = st->n_vec + (st->dense ? 1 : 0);
        L->in_width = st->emb_width + st->dense;
        long long pairs = (long long)L->n_vec * (L->n_vec - 1) / 2;
        if (pairs + st->dense > HPS_MAX_WIDTH)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: %lld interactions exceed %d", ctx, pairs,
                            HPS_MAX_WIDTH);
        L->out_width = st->dense + (int)pairs;
    }
    st->merged = 1;
    st->flat = L->out_width;
    m->merge_layer = li;
    return 0;
}

static int infer_loss(json_t *jl, hps_model *m, hps_layer *L, int li, chain_state *st,
                      const char *ctx, hps_error *err)
{
    static const char *const keys[] = {"name", "type", "loss", NULL};
    int loss = 0;
    if (hps_json_known_keys(jl, keys, ctx, err) ||
        hps_json_enum(jl, "loss", HPS_REQUIRED, hps_loss_names, &loss, ctx, err))
        return -1;
    if (li != m->n_layers - 1)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: the loss must be the last layer", ctx);
    int prev = st->merged ? st->flat : 0;
    L->loss = loss;
    if (!st->merged)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: needs a concat or dot_interaction before it",
                        ctx);
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
    int kind = 0;
    if (hps_json_enum(jl, "type", HPS_REQUIRED, hps_layer_kind_names, &kind, ctx, err)) return -1;
    L->kind = kind;
    switch (L->kind) {
    case HPS_LAYER_EMBEDDING: return infer_embedding(jl, m, L, li, st, ctx, err);
    case HPS_LAYER_FC: return infer_fc(jl, L, st, ctx, err);
    case HPS_LAYER_CONCAT:
    case HPS_LAYER_DOT: return infer_merge(jl, m, L, li, st, ctx, err);
    case HPS_LAYER_LOSS: return infer_loss(jl, m, L, li, st, ctx, err);
    default: return hps_fail(err, HPS_EXIT_USAGE, "%s: unknown type", ctx);
    }
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
    chain_state st = {0};
    st.slot_used = hps_malloc((m->n_slots + 1) * sizeof *st.slot_used);
    for (int s = 0; s < m->n_slots; s++) st.slot_used[s] = -1;
    st.dense = m->n_dense;
    int rc = 0;
    for (int li = 0; li < m->n_layers && rc == 0; li++)
        rc = parse_layer(json_array_get(layers, li), m, li, &st, file, err);
    for (int s = 0; s < m->n_slots && rc == 0; s++)
        if (st.slot_used[s] < 0)
            rc = hps_fail(err, HPS_EXIT_USAGE, "%s: input slot '%s' is used by no embedding layer",
                          file, m->slots[s].name);
    free(st.slot_used);
    if (rc == 0 && m->layers[m->n_layers - 1].kind != HPS_LAYER_LOSS)
        rc = hps_fail(err, HPS_EXIT_USAGE, "%s: the last layer must be a loss", file);
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
    case HPS_LAYER_LOSS:
        c->flops_fwd = B * L->in_width * 8.0;
        c->flops_bwd = B * L->in_width * 2.0;
        c->bytes_out = B * f;
        break;
    default: break;
    }
    c->work_bytes = 2 * (c->bytes_in + c->bytes_out) + 3 * c->param_bytes + 2 * c->sparse_bytes;
}

void hps_model_cut_widths(const hps_model *m, int c, int *act, int *grad)
{
    if (m->merge_layer < c) {
        *act = *grad = m->layers[c - 1].out_width;
        return;
    }
    int pooled = 0, dense = m->n_dense, ddense = 0;
    for (int l = 0; l < c; l++) {
        const hps_layer *L = &m->layers[l];
        if (L->kind == HPS_LAYER_FC && L->on_dense) dense = ddense = L->out_width;
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
