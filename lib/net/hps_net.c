#include "net/hps_net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_rng.h"

hps_optim hps_optim_default(void)
{
    return (hps_optim){.lr_dense = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                       .lr_sparse = 0.05f, .adagrad_eps = 1e-8f};
}

/* Hands out n floats from one allocation (base NULL: only counts), keeping
 * every buffer 64-byte aligned. */
static float *carve(float *base, size_t *off, size_t n)
{
    float *p = base ? base + *off : NULL;
    *off += (n + 15) & ~(size_t)15;
    return p;
}

static size_t assign_graph_buffers(hps_net *net, float *base);

/* Points every layer at its buffers; returns the floats needed. */
static size_t assign_buffers(hps_net *net, float *base)
{
    const hps_model *m = net->model;
    const size_t cap = (size_t)net->cap;
    if (m->graph) return assign_graph_buffers(net, base);
    size_t off = 0;
    net->dense_in = carve(base, &off, cap * m->n_dense);
    net->labels = carve(base, &off, cap);
    net->pooled = carve(base, &off, cap * net->E);
    net->dpooled = carve(base, &off, cap * net->E);
    float *dense = net->dense_in, *ddense = NULL; /* the dense stream before the merge */
    float *flat = NULL, *dflat = NULL;            /* the single stream after it */
    for (int l = 0; l < m->n_layers; l++) {
        const hps_layer *L = &m->layers[l];
        hps_net_layer *N = &net->layers[l];
        switch (L->kind) {
        case HPS_LAYER_EMBEDDING: break;
        case HPS_LAYER_FC:
        case HPS_LAYER_DROPOUT:
            N->in = L->on_dense ? dense : flat;
            N->din = L->on_dense ? ddense : dflat;
            N->out = carve(base, &off, cap * L->out_width);
            N->dout = carve(base, &off, cap * L->out_width);
            if (L->on_dense)
                dense = N->out, ddense = N->dout;
            else
                flat = N->out, dflat = N->dout;
            break;
        case HPS_LAYER_CONCAT:
        case HPS_LAYER_DOT:
            N->emb = net->pooled, N->demb = net->dpooled;
            N->dense = dense, N->ddense = ddense;
            N->out = flat = carve(base, &off, cap * L->out_width);
            N->dout = dflat = carve(base, &off, cap * L->out_width);
            /* no embeddings and no fc before the merge: nothing takes its
             * gradient, so the first fc after it skips its input gradient
             * (a third of a dense-only MLP's backward GEMMs) */
            if (net->E == 0 && !ddense) dflat = NULL;
            break;
        case HPS_LAYER_LOSS:
            N->in = flat, N->din = dflat;
            N->out = carve(base, &off, cap * L->in_width);
            break;
        default: HPS_CHECK(0);
        }
    }
    return off;
}

/* ---- graphs ------------------------------------------------------------------ */

/* The floats a layer with a table fills per sample in the pooled buffer: an
 * embedding its pooled vectors, a linear layer one sum a slot. */
static int pooled_width(const hps_layer *L)
{
    return L->kind == HPS_LAYER_LINEAR ? L->n_slots : L->out_width;
}

static int reads_one(const hps_layer *L)
{
    return L->kind == HPS_LAYER_FC || L->kind == HPS_LAYER_FM || L->kind == HPS_LAYER_CROSS ||
           L->kind == HPS_LAYER_DROPOUT || L->kind == HPS_LAYER_LOSS;
}

void hps_net_tensor(hps_net *net, int p, float **x, float **dx)
{
    if (p == HPS_TENSOR_DENSE) {
        *x = net->dense_in, *dx = NULL;
        return;
    }
    *x = net->layers[p].out;
    *dx = net->model->layers[p].needs_grad ? net->layers[p].dout : NULL;
}

/* Who reads each layer's output: the count, and the last reader, which
 * writes the gradient that the others add to. */
static void graph_uses(hps_net *net)
{
    const hps_model *m = net->model;
    if (!m->graph) return;
    net->last_use = hps_malloc((size_t)m->n_layers * sizeof *net->last_use);
    net->n_uses = hps_calloc((size_t)m->n_layers, sizeof *net->n_uses);
    for (int l = 0; l < m->n_layers; l++) net->last_use[l] = -1;
    for (int l = 0; l < m->n_layers; l++)
        for (int i = 0; i < m->layers[l].n_inputs; i++) {
            int p = m->layers[l].inputs[i];
            if (p < 0) continue;
            net->last_use[p] = l;
            net->n_uses[p]++;
        }
}

/* Scratch of a cross layer: the inner layers' outputs, then their z (s for
 * the vector kind), then their t (low rank); backward: two gradients of the
 * running x, dz, dt. */
static size_t cross_work(const hps_layer *L, size_t cap)
{
    size_t w = (size_t)L->in_width, zw = L->cross == HPS_CROSS_VECTOR ? 1 : w;
    return cap * ((L->depth - 1) * w + L->depth * zw + L->depth * (size_t)L->rank);
}

static size_t assign_graph_buffers(hps_net *net, float *base)
{
    const hps_model *m = net->model;
    const size_t cap = (size_t)net->cap;
    size_t off = 0;
    net->dense_in = carve(base, &off, cap * m->n_dense);
    net->labels = carve(base, &off, cap);
    net->pooled = carve(base, &off, cap * net->E);
    net->dpooled = carve(base, &off, cap * net->E);
    for (int l = 0; l < m->n_layers; l++) {
        const hps_layer *L = &m->layers[l];
        hps_net_layer *N = &net->layers[l];
        float *region = base ? net->pooled + cap * N->col : NULL;
        float *dregion = base ? net->dpooled + cap * N->col : NULL;
        if (L->kind == HPS_LAYER_EMBEDDING) {
            N->out = region, N->dout = dregion;
            continue;
        }
        if (L->kind == HPS_LAYER_LINEAR) N->emb = region, N->demb = dregion;
        N->out = carve(base, &off, cap * L->out_width);
        N->dout = carve(base, &off, cap * L->out_width);
        if (reads_one(L)) {
            float *x, *dx;
            int p = L->inputs[0];
            if (base) hps_net_tensor(net, p, &x, &dx);
            else x = dx = NULL;
            N->in = x;
            /* a sole reader writes its input's gradient in place; one of
             * several into its own buffer, added to the input's after */
            int grad = hps_model_tensor_grad(m, p);
            N->din = !grad ? NULL : net->n_uses[p] == 1 ? dx : carve(base, &off, cap * L->in_width);
        }
        if (L->kind == HPS_LAYER_CROSS) {
            N->work = carve(base, &off, cross_work(L, cap));
            N->dwork = carve(base, &off, cap * (3 * (size_t)L->in_width + (size_t)L->rank));
        }
        if (L->kind == HPS_LAYER_DOT) {
            int emb_width = L->in_width - L->dense_in;
            N->work = carve(base, &off, cap * emb_width);  /* the vectors, gathered */
            N->dwork = carve(base, &off, cap * emb_width); /* and their gradient */
            N->ddense = carve(base, &off, cap * L->dense_in);
        }
    }
    return off;
}

/* Hands a gradient [B, w] (row stride lds) to producer p: the last reader
 * writes it, the others add. */
static void grad_to(hps_net *net, int l, int p, const float *src, int lds, int w)
{
    float *x, *dx;
    hps_net_tensor(net, p, &x, &dx);
    if (dx) net->be->cols_copy(dx, w, src, lds, net->B, w, net->last_use[p] != l);
}

/* A one-input layer that wrote its input's gradient into its own buffer. */
static void din_done(hps_net *net, int l)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    if (!net->model->graph || !N->din) return;
    float *x, *dx;
    hps_net_tensor(net, L->inputs[0], &x, &dx);
    if (N->din != dx) grad_to(net, l, L->inputs[0], N->din, L->in_width, L->in_width);
}

static uint64_t dropout_seed(const hps_net *net, int l)
{
    return net->dropout_seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(l + 1));
}

static void dropout_run(hps_net *net, int l, int backward)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    const int64_t n = (int64_t)net->B * L->out_width;
    float *dst = backward ? N->din : N->out;
    const float *src = backward ? N->dout : N->in;
    if (!dst) return;
    if (net->training && L->rate > 0)
        (backward ? net->be->dropout_backward : net->be->dropout_forward)(dst, src, n, (float)L->rate,
                                                                         dropout_seed(net, l));
    else
        net->be->cols_copy(dst, L->out_width, src, L->out_width, net->B, L->out_width, 0);
}

/* Where the pooled rows of a table layer are on the host side. */
static float *host_block(hps_net *net, float *base, int l)
{
    return base + (size_t)net->cap * net->layers[l].col;
}

static void table_forward(hps_net *net, int l, float *block)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    const int w = pooled_width(L);
    float *h = host_block(net, net->h_pooled, l);
    net->emb_be->embedding_bag_forward(h, w, N->table, &N->bags, L->dim, L->pooling);
    if (net->host_embeddings)
        net->be->upload(block, h, (size_t)net->B * w * sizeof(float));
}

static void table_backward(hps_net *net, int l, const float *dblock)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    const int w = pooled_width(L);
    float *h = host_block(net, net->h_dpooled, l);
    if (net->host_embeddings)
        net->be->download(h, dblock, (size_t)net->B * w * sizeof(float));
    net->emb_be->embedding_bag_backward(N->grad, h, w, &N->bags, L->dim, L->pooling);
}

static void linear_run(hps_net *net, int l, int backward)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    const int W = L->linear_dense ? net->model->n_dense : 0;
    const float *dense = W ? net->dense_in : NULL;
    const size_t off = L->param_offset;
    if (!backward) {
        table_forward(net, l, N->emb);
        net->be->linear_forward(N->out, N->emb, L->n_slots, dense, net->params + off,
                                net->params + off + W, net->B, W);
        return;
    }
    net->be->linear_backward(N->demb, net->grads + off, net->grads + off + W, N->dout, dense,
                             net->B, L->n_slots, W);
    table_backward(net, l, N->demb);
}

static void concat_run(hps_net *net, int l, int backward)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    int at = 0;
    for (int i = 0; i < L->n_inputs; i++) {
        int p = L->inputs[i], w = hps_model_tensor_width(net->model, p);
        float *x, *dx;
        hps_net_tensor(net, p, &x, &dx);
        if (backward)
            grad_to(net, l, p, N->dout + at, L->out_width, w);
        else
            net->be->cols_copy(N->out + at, L->out_width, x, w, net->B, w, 0);
        at += w;
    }
}

static void add_run(hps_net *net, int l, int backward)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    const int w = L->out_width;
    for (int i = 0; i < L->n_inputs; i++) {
        float *x, *dx;
        hps_net_tensor(net, L->inputs[i], &x, &dx);
        if (backward)
            grad_to(net, l, L->inputs[i], N->dout, w, w);
        else
            net->be->cols_copy(N->out, w, x, w, net->B, w, i > 0);
    }
}

/* dot_interaction of a graph: its embedding inputs gathered into one
 * [B, vectors] buffer, the other input (if any) passing through. */
static void dot_forward_graph(hps_net *net, int l)
{
    const hps_model *m = net->model;
    const hps_layer *L = &m->layers[l];
    hps_net_layer *N = &net->layers[l];
    const int emb_width = L->in_width - L->dense_in;
    float *dense = NULL;
    int at = 0;
    for (int i = 0; i < L->n_inputs; i++) {
        int p = L->inputs[i], w = hps_model_tensor_width(m, p);
        float *x, *dx;
        hps_net_tensor(net, p, &x, &dx);
        if (p != HPS_TENSOR_DENSE && m->layers[p].kind == HPS_LAYER_EMBEDDING) {
            net->be->cols_copy(N->work + at, emb_width, x, w, net->B, w, 0);
            at += w;
        } else {
            dense = x;
        }
    }
    net->be->dot_forward(N->out, N->work, dense, net->B, L->n_vec - (L->dense_in ? 1 : 0),
                         L->vec_dim, L->dense_in);
}

static void dot_backward_graph(hps_net *net, int l)
{
    const hps_model *m = net->model;
    const hps_layer *L = &m->layers[l];
    hps_net_layer *N = &net->layers[l];
    float *dense = NULL, *ddense = NULL;
    int dense_p = HPS_TENSOR_LABELS;
    for (int i = 0; i < L->n_inputs; i++) {
        int p = L->inputs[i];
        if (p == HPS_TENSOR_DENSE || m->layers[p].kind != HPS_LAYER_EMBEDDING) {
            float *dx;
            hps_net_tensor(net, p, &dense, &dx);
            ddense = dx ? N->ddense : NULL;
            dense_p = p;
        }
    }
    const int V = L->n_vec - (L->dense_in ? 1 : 0);
    net->be->dot_backward(N->dwork, ddense, N->dout, N->work, dense, net->B, V, L->vec_dim,
                          L->dense_in);
    if (ddense) grad_to(net, l, dense_p, ddense, L->dense_in, L->dense_in);
    int at = 0, emb_width = L->in_width - L->dense_in;
    for (int i = 0; i < L->n_inputs; i++) {
        int p = L->inputs[i];
        if (p == HPS_TENSOR_DENSE || m->layers[p].kind != HPS_LAYER_EMBEDDING) continue;
        int w = m->layers[p].out_width;
        grad_to(net, l, p, N->dwork + at, emb_width, w);
        at += w;
    }
}

/* Per inner layer i of a cross: its parameters' offset from the layer's. */
static size_t cross_per(const hps_layer *L)
{
    size_t w = (size_t)L->in_width, r = (size_t)L->rank;
    return L->cross == HPS_CROSS_VECTOR ? 2 * w : r ? 2 * w * r + w : w * w + w;
}

static void cross_forward_all(hps_net *net, int l)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    const hps_backend *be = net->be;
    const int B = net->B, w = L->in_width, r = L->rank, d = L->depth;
    const size_t cap = (size_t)net->cap, zw = L->cross == HPS_CROSS_VECTOR ? 1 : (size_t)w;
    float *X = N->work, *Z = X + (size_t)(d - 1) * cap * w, *T = Z + (size_t)d * cap * zw;
    const float *x0 = N->in, *x = x0;
    for (int i = 0; i < d; i++) {
        float *y = i == d - 1 ? N->out : X + (size_t)i * cap * w;
        float *z = Z + (size_t)i * cap * zw, *t = T + (size_t)i * cap * r;
        const float *p = net->params + L->param_offset + (size_t)i * cross_per(L);
        if (L->cross == HPS_CROSS_VECTOR) {
            be->cross_vector_forward(y, z, x0, x, p, p + w, B, w);
        } else {
            if (r == 0) {
                be->fc_forward(z, x, p, p + (size_t)w * w, B, w, w);
            } else { /* W x = u (v x): p holds u [w, r], v [r, w], b */
                be->fc_forward(t, x, p + (size_t)w * r, NULL, B, w, r);
                be->fc_forward(z, t, p, p + 2 * (size_t)w * r, B, r, w);
            }
            be->cross_gate_forward(y, x0, z, x, (int64_t)B * w);
        }
        x = y;
    }
}

static void cross_backward_all(hps_net *net, int l)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    const hps_backend *be = net->be;
    const int B = net->B, w = L->in_width, r = L->rank, d = L->depth;
    const int64_t n = (int64_t)B * w;
    const size_t cap = (size_t)net->cap, zw = L->cross == HPS_CROSS_VECTOR ? 1 : (size_t)w;
    float *X = N->work, *Z = X + (size_t)(d - 1) * cap * w, *T = Z + (size_t)d * cap * zw;
    float *gA = N->dwork, *gB = gA + cap * w, *dz = gB + cap * w, *dt = dz + cap * w;
    const float *x0 = N->in;
    float *dx0 = N->din; /* every inner layer adds its share */
    if (dx0) be->memzero(dx0, (size_t)n * sizeof(float));
    be->cols_copy(gA, w, N->dout, w, B, w, 0);
    for (int i = d - 1; i >= 0; i--) {
        const float *x = i == 0 ? x0 : X + (size_t)(i - 1) * cap * w;
        float *z = Z + (size_t)i * cap * zw, *t = T + (size_t)i * cap * r;
        const size_t at = L->param_offset + (size_t)i * cross_per(L);
        const float *p = net->params + at;
        float *dp = net->grads + at;
        if (L->cross == HPS_CROSS_VECTOR) {
            be->cross_vector_backward(gB, dx0, dp, dp + w, gA, x0, x, z, p, B, w);
        } else {
            be->cross_gate_backward(dz, dx0, gA, x0, z, n);
            if (r == 0) {
                be->fc_backward(gB, dp, dp + (size_t)w * w, dz, x, p, B, w, w);
            } else {
                be->fc_backward(dt, dp, dp + 2 * (size_t)w * r, dz, t, p, B, r, w);
                be->fc_backward(gB, dp + (size_t)w * r, NULL, dt, x, p + (size_t)w * r, B, w, r);
            }
            be->vec_axpy(gB, gA, n, 1.0f); /* the residual x */
        }
        float *swap = gA;
        gA = gB, gB = swap;
    }
    if (dx0) be->vec_axpy(dx0, gA, n, 1.0f); /* the first layer's x is x0 */
}

static void graph_forward(hps_net *net, int l)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    const hps_backend *be = net->be;
    switch (L->kind) {
    case HPS_LAYER_EMBEDDING: table_forward(net, l, N->out); break;
    case HPS_LAYER_LINEAR: linear_run(net, l, 0); break;
    case HPS_LAYER_CONCAT: concat_run(net, l, 0); break;
    case HPS_LAYER_ADD: add_run(net, l, 0); break;
    case HPS_LAYER_DOT: dot_forward_graph(net, l); break;
    case HPS_LAYER_FM:
        be->fm_forward(N->out, N->in, net->B, L->n_vec, L->vec_dim, L->fm_vector);
        break;
    case HPS_LAYER_CROSS: cross_forward_all(net, l); break;
    default: HPS_CHECK(0);
    }
}

static void graph_backward(hps_net *net, int l)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    switch (L->kind) {
    case HPS_LAYER_EMBEDDING: table_backward(net, l, N->dout); break;
    case HPS_LAYER_LINEAR: linear_run(net, l, 1); break;
    case HPS_LAYER_CONCAT: concat_run(net, l, 1); break;
    case HPS_LAYER_ADD: add_run(net, l, 1); break;
    case HPS_LAYER_DOT: dot_backward_graph(net, l); break;
    case HPS_LAYER_FM:
        net->be->fm_backward(N->din, N->dout, N->in, net->B, L->n_vec, L->vec_dim, L->fm_vector);
        din_done(net, l);
        break;
    case HPS_LAYER_CROSS:
        cross_backward_all(net, l);
        din_done(net, l);
        break;
    default: HPS_CHECK(0);
    }
}

void hps_net_set_dropout(hps_net *net, int training, uint64_t seed)
{
    net->training = training;
    net->dropout_seed = seed;
}

static void embedding_create(hps_net *net, int l, int64_t rows_cap, int col)
{
    const hps_model *m = net->model;
    const hps_layer *L = &m->layers[l];
    hps_net_layer *N = &net->layers[l];
    N->slot_base = hps_malloc((size_t)L->n_slots * sizeof *N->slot_base);
    N->slot_rows = hps_malloc((size_t)L->n_slots * sizeof *N->slot_rows);
    N->rows = 0;
    for (int i = 0; i < L->n_slots; i++) {
        int64_t r = m->slots[L->slots[i]].rows;
        if (rows_cap > 0 && r > rows_cap) r = rows_cap;
        N->slot_base[i] = N->rows;
        N->slot_rows[i] = r;
        N->rows += r;
    }
    N->col = col;
    if (rows_cap >= 0) { /* negative: the tables are the caller's */
        N->table = net->emb_be->alloc((size_t)N->rows * L->dim * sizeof(float));
        N->accum = net->emb_be->alloc((size_t)N->rows * L->dim * sizeof(float));
    }
    N->bags.B = 0;
    N->bags.S = L->n_slots;
    N->bag_offsets = net->emb_be->alloc(((size_t)net->cap * L->n_slots + 1) * sizeof(int64_t));
}

/* Grows the layer's key arrays (and its sparse gradient) to hold nnz keys. */
static void embedding_reserve(hps_net *net, int l, int64_t nnz)
{
    hps_net_layer *N = &net->layers[l];
    const hps_layer *L = &net->model->layers[l];
    if (nnz <= N->nnz_cap && N->grad) return;
    int64_t cap = N->nnz_cap ? N->nnz_cap : 1024;
    while (cap < nnz) cap *= 2;
    const hps_backend *be = net->emb_be;
    if (N->bag_rows) be->release(N->bag_rows);
    if (N->bag_weights) be->release(N->bag_weights);
    if (N->grad) be->sparse_grad_free(N->grad);
    N->bag_rows = be->alloc((size_t)cap * sizeof(int64_t));
    N->bag_weights = L->weighted ? be->alloc((size_t)cap * sizeof(float)) : NULL;
    N->grad = be->sparse_grad_create(cap, L->dim);
    N->nnz_cap = cap;
}

/* Host embeddings: the pooled rows go to the device before the merge, and
 * their gradient comes back after it.  Otherwise the two are one buffer. */
static void host_pooled_create(hps_net *net)
{
    if (!net->host_embeddings) {
        net->h_pooled = net->pooled;
        net->h_dpooled = net->dpooled;
        return;
    }
    size_t n = (size_t)net->cap * net->E + 1;
    net->h_pooled = net->emb_be->alloc(n * sizeof(float));
    net->h_dpooled = net->emb_be->alloc(n * sizeof(float));
}

static void pooled_to_device(hps_net *net)
{
    if (net->host_embeddings && net->E)
        net->be->upload(net->pooled, net->h_pooled, (size_t)net->B * net->E * sizeof(float));
}

static void dpooled_to_host(hps_net *net)
{
    if (net->host_embeddings && net->E)
        net->be->download(net->h_dpooled, net->dpooled, (size_t)net->B * net->E * sizeof(float));
}

hps_net *hps_net_create(const hps_model *m, const hps_backend *be, int cap,
                        int64_t table_rows_cap)
{
    hps_net *net = hps_calloc(1, sizeof *net);
    net->model = m;
    net->be = be;
    /* host tables: the embedding layers run on the CPU beside them (the
     * parameter-server side), the rest on be; the pooled rows cross over */
    net->host_embeddings = table_rows_cap == HPS_NET_HOST_TABLES;
    net->emb_be = net->host_embeddings ? hps_backend_cpu() : be;
    net->cap = cap;
    net->loss_scale = 1.0f;
    net->keys_end = m->n_layers;
    net->layers = hps_calloc((size_t)m->n_layers, sizeof *net->layers);
    for (int l = 0; l < m->n_layers; l++)
        if (hps_layer_has_table(&m->layers[l])) {
            embedding_create(net, l, table_rows_cap, net->E);
            net->E += pooled_width(&m->layers[l]);
        }
    graph_uses(net);
    size_t n = assign_buffers(net, NULL);
    net->acts = be->alloc(n * sizeof(float));
    assign_buffers(net, net->acts);
    if (table_rows_cap < 0) net->shared_tables = 1; /* external or host tables */
    host_pooled_create(net);
    /* params, grads, Adam m and v: one allocation, four views */
    size_t np = (m->n_params + 15) & ~(size_t)15;
    net->params = be->alloc(4 * np * sizeof(float));
    net->grads = net->params + np;
    net->adam_m = net->grads + np;
    net->adam_v = net->adam_m + np;
    return net;
}

hps_net *hps_net_create_shared(hps_net *owner, int cap)
{
    const hps_model *m = owner->model;
    hps_net *net = hps_calloc(1, sizeof *net);
    *net = (hps_net){.model = m, .be = owner->be, .emb_be = owner->emb_be,
                     .host_embeddings = owner->host_embeddings, .shared = 1, .shared_tables = 1,
                     .row_map = owner->row_map,
                     .row_map_ctx = owner->row_map_ctx, .keys_end = m->n_layers, .cap = cap,
                     .loss_scale = 1.0f, .E = owner->E, .params = owner->params,
                     .grads = owner->grads, .adam_m = owner->adam_m, .adam_v = owner->adam_v};
    net->layers = hps_calloc((size_t)m->n_layers, sizeof *net->layers);
    graph_uses(net);
    for (int l = 0; l < m->n_layers; l++) {
        if (!hps_layer_has_table(&m->layers[l])) continue;
        const hps_net_layer *O = &owner->layers[l];
        hps_net_layer *N = &net->layers[l];
        int S = m->layers[l].n_slots;
        N->table = O->table, N->accum = O->accum, N->rows = O->rows, N->col = O->col;
        N->slot_base = hps_malloc((size_t)S * sizeof *N->slot_base);
        N->slot_rows = hps_malloc((size_t)S * sizeof *N->slot_rows);
        memcpy(N->slot_base, O->slot_base, (size_t)S * sizeof *N->slot_base);
        memcpy(N->slot_rows, O->slot_rows, (size_t)S * sizeof *N->slot_rows);
        N->bags.S = S;
        N->bag_offsets = net->emb_be->alloc(((size_t)cap * S + 1) * sizeof(int64_t));
    }
    net->acts = net->be->alloc(assign_buffers(net, NULL) * sizeof(float));
    assign_buffers(net, net->acts);
    host_pooled_create(net);
    return net;
}

void hps_net_set_row_map(hps_net *net, hps_row_map map, void *ctx)
{
    net->row_map = map;
    net->row_map_ctx = ctx;
}

void hps_net_set_key_layers(hps_net *net, int first, int end)
{
    net->keys_first = first;
    net->keys_end = end;
}

void hps_net_set_table(hps_net *net, int layer, float *table, float *accum)
{
    HPS_CHECK(hps_layer_has_table(&net->model->layers[layer]) && net->shared_tables);
    net->layers[layer].table = table;
    net->layers[layer].accum = accum;
}

void hps_net_free(hps_net *net)
{
    if (!net) return;
    const hps_backend *be = net->emb_be;
    for (int l = 0; l < net->model->n_layers; l++) {
        hps_net_layer *N = &net->layers[l];
        if (!hps_layer_has_table(&net->model->layers[l])) continue;
        if (!net->shared_tables) {
            be->release(N->table);
            be->release(N->accum);
        }
        be->release(N->bag_offsets);
        if (N->bag_rows) be->release(N->bag_rows);
        if (N->bag_weights) be->release(N->bag_weights);
        if (N->grad) be->sparse_grad_free(N->grad);
        free(N->slot_base);
        free(N->slot_rows);
    }
    if (net->host_embeddings) {
        be->release(net->h_pooled);
        be->release(net->h_dpooled);
    }
    be = net->be;
    be->release(net->acts);
    if (!net->shared) be->release(net->params);
    free(net->layers);
    free(net->last_use);
    free(net->n_uses);
    free(net->h_offsets);
    free(net->h_rows);
    free(net->h_weights);
    free(net->h_keys);
    free(net->h_slot);
    free(net);
}

/* Fills n floats on the host, uniform in +-bound or (std > 0) normal with
 * that deviation, then uploads them. */
static void upload_random(const hps_backend *be, float *dst, size_t n, float bound, float std,
                          hps_rng *r)
{
    const size_t chunk = 1 << 20;
    float *tmp = hps_malloc((n < chunk ? n : chunk) * sizeof *tmp);
    for (size_t done = 0; done < n;) {
        size_t k = n - done < chunk ? n - done : chunk;
        for (size_t i = 0; i < k; i++)
            tmp[i] = std > 0 ? std * (float)hps_rng_normal(r) : hps_rng_range(r, -bound, bound);
        be->upload(dst + done, tmp, k * sizeof *tmp);
        done += k;
    }
    free(tmp);
}

/* xavier_normal_'s deviation for a [rows, cols] weight */
static float xavier_std(size_t rows, size_t cols) { return sqrtf(2.0f / (float)(rows + cols)); }

/* A cross layer as TorchRec's CrossNet, VectorCrossNet and LowRankCrossNet
 * (and DeepCTR-Torch's) start it: each kernel xavier_normal_ (a vector w as
 * a [w, 1] kernel; U [w, r] and V [r, w]), each bias zero. */
static void cross_init(hps_net *net, const hps_layer *L, hps_rng *r)
{
    const size_t w = (size_t)L->in_width, rk = (size_t)L->rank;
    for (int i = 0; i < L->depth; i++) {
        float *p = net->params + L->param_offset + (size_t)i * cross_per(L);
        const size_t kernel = cross_per(L) - w; /* then the bias */
        const float std = L->cross == HPS_CROSS_VECTOR ? xavier_std(w, 1)
                          : rk                         ? xavier_std(w, rk)
                                                       : xavier_std(w, w);
        upload_random(net->be, p, kernel, 0, std, r);
        net->be->memzero(p + kernel, w * sizeof(float));
    }
}

void hps_net_init(hps_net *net, uint64_t seed)
{
    const hps_model *m = net->model;
    hps_rng r;
    hps_rng_seed(&r, seed);
    for (int l = 0; l < m->n_layers; l++) {
        const hps_layer *L = &m->layers[l];
        hps_net_layer *N = &net->layers[l];
        /* fc: +-1/sqrt(in), as PyTorch's Linear; linear's dense weights
         * +-1/sqrt(dense) */
        int fan_in = L->kind == HPS_LAYER_LINEAR ? m->n_dense : L->in_width;
        if (L->kind == HPS_LAYER_CROSS)
            cross_init(net, L, &r);
        else if (L->n_params)
            upload_random(net->be, net->params + L->param_offset, L->n_params,
                          1.0f / sqrtf((float)(fan_in > 0 ? fan_in : 1)), 0, &r);
        if (hps_layer_has_table(L) && !net->shared_tables) {
            upload_random(net->emb_be, N->table, (size_t)N->rows * L->dim, 0.05f, 0, &r);
            net->emb_be->memzero(N->accum, (size_t)N->rows * L->dim * sizeof(float));
        }
    }
    size_t np = m->n_params;
    net->be->memzero(net->adam_m, np * sizeof(float));
    net->be->memzero(net->adam_v, np * sizeof(float));
    net->adam_t = 0;
}

static void stage_reserve(hps_net *net, int64_t nnz)
{
    int64_t need = (int64_t)net->cap * net->model->n_slots + 1;
    if (nnz + 1 > need) need = nnz + 1;
    if (need <= net->h_cap) return;
    net->h_cap = need;
    net->h_offsets = hps_realloc(net->h_offsets, (size_t)need * sizeof *net->h_offsets);
    net->h_rows = hps_realloc(net->h_rows, (size_t)need * sizeof *net->h_rows);
    net->h_weights = hps_realloc(net->h_weights, (size_t)need * sizeof *net->h_weights);
    net->h_keys = hps_realloc(net->h_keys, (size_t)need * sizeof *net->h_keys);
    net->h_slot = hps_realloc(net->h_slot, (size_t)need * sizeof *net->h_slot);
}

/* Picks the layer's slots of samples [first, first+n) out of the batch CSR and
 * maps their keys to rows. */
static int load_embedding(hps_net *net, int l, const hps_batch *b, int first, int n)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    const int S = b->n_slots;
    int64_t k = 0;
    net->h_offsets[0] = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < L->n_slots; j++) {
            const int64_t *at = b->offsets + (size_t)(first + i) * S + L->slots[j];
            for (int64_t e = at[0]; e < at[1]; e++, k++) {
                net->h_keys[k] = b->keys[e];
                net->h_slot[k] = j;
                net->h_weights[k] = b->weights ? b->weights[e] : 1.0f;
            }
            net->h_offsets[(size_t)i * L->n_slots + j + 1] = k;
        }
    if (net->row_map) {
        if (net->row_map(net->row_map_ctx, l, net->h_slot, net->h_keys, k, net->h_rows)) return -1;
    } else
        for (int64_t e = 0; e < k; e++) {
            int j = net->h_slot[e];
            net->h_rows[e] = N->slot_base[j] + (int64_t)(net->h_keys[e] % (uint64_t)N->slot_rows[j]);
        }
    embedding_reserve(net, l, k);
    const hps_backend *be = net->emb_be;
    be->upload(N->bag_offsets, net->h_offsets, ((size_t)n * L->n_slots + 1) * sizeof(int64_t));
    be->upload(N->bag_rows, net->h_rows, (size_t)k * sizeof(int64_t));
    if (N->bag_weights) be->upload(N->bag_weights, net->h_weights, (size_t)k * sizeof(float));
    N->bags = (hps_bags){.B = n, .S = L->n_slots, .offsets = N->bag_offsets,
                         .rows = N->bag_rows, .weights = L->weighted ? N->bag_weights : NULL};
    return 0;
}

int hps_net_load_range(hps_net *net, const hps_batch *b, int first, int n)
{
    const hps_model *m = net->model;
    HPS_CHECK(n <= net->cap && first + n <= b->B && b->n_dense == m->n_dense &&
              b->n_slots == m->n_slots);
    net->B = n;
    int64_t nnz = b->offsets[(size_t)(first + n) * m->n_slots] - b->offsets[(size_t)first * m->n_slots];
    stage_reserve(net, nnz);
    if (m->n_dense)
        net->be->upload(net->dense_in, b->dense + (size_t)first * m->n_dense,
                        (size_t)n * m->n_dense * sizeof(float));
    net->be->upload(net->labels, b->labels + first, (size_t)n * sizeof(float));
    for (int l = net->keys_first; l < net->keys_end; l++)
        if (hps_layer_has_table(&m->layers[l]) && load_embedding(net, l, b, first, n))
            return -1;
    return 0;
}

void hps_net_load_batch(hps_net *net, const hps_batch *b)
{
    HPS_CHECK(hps_net_load_range(net, b, 0, b->B) == 0);
}

void hps_net_layer_forward(hps_net *net, int l)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    const hps_backend *be = net->be;
    const int B = net->B;
    if (net->model->graph && L->kind != HPS_LAYER_FC && L->kind != HPS_LAYER_DROPOUT &&
        L->kind != HPS_LAYER_LOSS) {
        graph_forward(net, l);
        return;
    }
    switch (L->kind) {
    case HPS_LAYER_EMBEDDING:
        net->emb_be->embedding_bag_forward(net->h_pooled + N->col, net->E, N->table, &N->bags,
                                           L->dim, L->pooling);
        break;
    case HPS_LAYER_FC: {
        const float *w = net->params + L->param_offset;
        be->fc_forward(N->out, N->in, w, w + (size_t)L->in_width * L->out_width, B, L->in_width,
                       L->out_width);
        be->act_forward(N->out, N->out, (int64_t)B * L->out_width, L->act);
        break;
    }
    case HPS_LAYER_DROPOUT: dropout_run(net, l, 0); break;
    case HPS_LAYER_CONCAT:
        pooled_to_device(net);
        be->concat_forward(N->out, N->emb, N->dense, B, net->E, L->dense_in);
        break;
    case HPS_LAYER_DOT:
        pooled_to_device(net);
        be->dot_forward(N->out, N->emb, N->dense, B, L->n_vec - (L->dense_in ? 1 : 0), L->vec_dim,
                        L->dense_in);
        break;
    case HPS_LAYER_LOSS:
        net->loss = L->loss == HPS_LOSS_LOGLOSS
                        ? be->logloss_forward(N->out, N->in, net->labels, B)
                        : be->softmax_forward(N->out, N->in, net->labels, B, L->in_width);
        break;
    default: HPS_CHECK(0);
    }
}

void hps_net_layer_backward(hps_net *net, int l)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    const hps_backend *be = net->be;
    const int B = net->B;
    if (!L->needs_grad) return; /* nothing before it learns */
    if (net->model->graph && L->kind != HPS_LAYER_FC && L->kind != HPS_LAYER_DROPOUT &&
        L->kind != HPS_LAYER_LOSS) {
        graph_backward(net, l);
        return;
    }
    switch (L->kind) {
    case HPS_LAYER_EMBEDDING:
        net->emb_be->embedding_bag_backward(N->grad, net->h_dpooled + N->col, net->E, &N->bags,
                                            L->dim, L->pooling);
        break;
    case HPS_LAYER_FC: {
        const float *w = net->params + L->param_offset;
        float *dw = net->grads + L->param_offset;
        /* through the activation in place: dout becomes d(pre-activation) */
        be->act_backward(N->dout, N->dout, N->out, (int64_t)B * L->out_width, L->act);
        be->fc_backward(N->din, dw, dw + (size_t)L->in_width * L->out_width, N->dout, N->in, w, B,
                        L->in_width, L->out_width);
        din_done(net, l);
        break;
    }
    case HPS_LAYER_DROPOUT:
        dropout_run(net, l, 1);
        din_done(net, l);
        break;
    case HPS_LAYER_CONCAT:
        be->concat_backward(N->demb, N->ddense, N->dout, B, net->E, L->dense_in);
        dpooled_to_host(net);
        break;
    case HPS_LAYER_DOT:
        be->dot_backward(N->demb, N->ddense, N->dout, N->emb, N->dense, B,
                         L->n_vec - (L->dense_in ? 1 : 0), L->vec_dim, L->dense_in);
        dpooled_to_host(net);
        break;
    case HPS_LAYER_LOSS:
        if (L->loss == HPS_LOSS_LOGLOSS)
            be->logloss_backward(N->din, N->in, net->labels, B);
        else
            be->softmax_backward(N->din, N->out, net->labels, B, L->in_width);
        if (net->loss_scale != 1.0f)
            be->vec_scale(N->din, (int64_t)B * L->in_width, net->loss_scale);
        din_done(net, l);
        break;
    default: HPS_CHECK(0);
    }
}

double hps_net_forward(hps_net *net)
{
    for (int l = 0; l < net->model->n_layers; l++) hps_net_layer_forward(net, l);
    return net->loss;
}

void hps_net_backward(hps_net *net)
{
    net->be->memzero(net->grads, net->model->n_params * sizeof(float));
    for (int l = net->model->n_layers - 1; l >= 0; l--) hps_net_layer_backward(net, l);
}

void hps_net_update_dense(hps_net *net, const hps_optim *opt)
{
    const hps_model *m = net->model;
    net->adam_t++;
    if (m->n_params && opt->dense == HPS_OPTIM_SGD)
        net->be->vec_axpy(net->params, net->grads, (int64_t)m->n_params, -opt->lr_dense);
    else if (m->n_params)
        net->be->adam_update(net->params, net->grads, net->adam_m, net->adam_v,
                             (int64_t)m->n_params, opt->lr_dense, opt->beta1, opt->beta2,
                             opt->eps, net->adam_t);
}

void hps_net_update_sparse(hps_net *net, int layer, const hps_sparse_grad *g,
                           const hps_optim *opt)
{
    hps_net_layer *N = &net->layers[layer];
    net->emb_be->sparse_adagrad(N->table, N->accum, g, opt->lr_sparse, opt->adagrad_eps);
}

void hps_net_update(hps_net *net, const hps_optim *opt)
{
    const hps_model *m = net->model;
    hps_net_update_dense(net, opt);
    for (int l = 0; l < m->n_layers; l++)
        if (hps_layer_has_table(&m->layers[l]) && net->layers[l].grad)
            hps_net_update_sparse(net, l, net->layers[l].grad, opt);
}

void hps_net_probs(hps_net *net, float *out)
{
    const hps_layer *L = &net->model->layers[net->model->n_layers - 1];
    net->be->download(out, net->layers[net->model->n_layers - 1].out,
                      (size_t)net->B * L->in_width * sizeof(float));
}
