/* The whole executor on every model in testdata: analytic gradients of the
 * mean loss against central finite differences of the float forward pass
 * (a double-precision check of each kernel is in test_kernels.c; here the
 * point is the wiring: buffers, streams, strides, the merge, the loss). */
#include <dirent.h>
#include <math.h>
#include <string.h>

#include "hps_test.h"
#include "core/hps_json.h"
#include "net/hps_net.h"

#define NET_STEP 1e-3
#define NET_TOL 1e-2

static int n_checked, n_kinks;

static double loss_at(hps_net *net, float *p, float v)
{
    float keep = *p;
    *p = v;
    double L = hps_net_forward(net);
    *p = keep;
    return L;
}

/* Compares d loss / d *p with the analytic value; returns 1 on mismatch. */
static int check_param(hps_net *net, float *p, float analytic, const char *model, const char *what,
                       int idx)
{
    double mid = loss_at(net, p, *p);
    double up = loss_at(net, p, *p + (float)NET_STEP), down = loss_at(net, p, *p - (float)NET_STEP);
    double numeric = (up - down) / (2 * NET_STEP);
    /* a relu switching inside the step bends the loss: the one-sided slopes
     * disagree there, and no finite difference is meaningful */
    double right = (up - mid) / NET_STEP, left = (mid - down) / NET_STEP;
    if (fabs(right - left) > 1e-2 * fmax(fabs(right), fabs(left)) + 3e-4) {
        n_kinks++;
        return 0;
    }
    n_checked++;
    double scale = fmax(fabs(numeric), fabs(analytic));
    if (fabs(numeric - analytic) <= NET_TOL * scale + 1e-4) return 0;
    print_error("%s: %s[%d]: analytic %.6g, numeric %.6g\n", model, what, idx, analytic, numeric);
    return 1;
}

static int check_fc(hps_net *net, const hps_layer *L, const char *model, hps_rng *r)
{
    int bad = 0;
    float *w = net->params + L->param_offset, *g = net->grads + L->param_offset;
    for (int k = 0; k < 6; k++) {
        size_t i = (size_t)hps_rng_below(r, L->n_params);
        bad += check_param(net, &w[i], g[i], model, L->name, (int)i);
    }
    size_t bias = L->n_params - 1; /* the last bias */
    return bad + check_param(net, &w[bias], g[bias], model, L->name, (int)bias);
}

static int check_embedding(hps_net *net, int l, const char *model)
{
    const hps_layer *L = &net->model->layers[l];
    hps_net_layer *N = &net->layers[l];
    hps_sparse_grad *g = N->grad;
    int bad = 0;
    /* copy the sparse gradient: every forward pass below leaves it alone, but be safe */
    int64_t n = g->n < 4 ? g->n : 4;
    for (int64_t i = 0; i < n; i++)
        for (int d = 0; d < L->dim; d += 3)
            bad += check_param(net, &N->table[g->rows[i] * L->dim + d], g->grad[i * L->dim + d],
                               model, L->name, (int)(g->rows[i] * L->dim + d));
    return bad;
}

static int check_model(const char *path)
{
    hps_error err;
    hps_model *m = hps_model_load(path, &err);
    if (!m) {
        print_error("%s\n", err.msg);
        return 1;
    }
    const int B = 6;
    hps_net *net = hps_net_create(m, hps_backend_cpu(), B, 64);
    hps_net_init(net, 11);
    hps_net_set_dropout(net, 1, 77); /* fixed masks: the loss stays a function of the parameters */
    hps_batch *batch = hps_batch_synth(m, B, 12);
    hps_net_load_batch(net, batch);
    hps_net_forward(net);
    hps_net_backward(net);
    hps_rng r;
    hps_rng_seed(&r, 13);
    int bad = 0;
    for (int l = 0; l < m->n_layers; l++) {
        if (m->layers[l].n_params) bad += check_fc(net, &m->layers[l], m->name, &r);
        if (hps_layer_has_table(&m->layers[l])) bad += check_embedding(net, l, m->name);
    }
    hps_batch_free(batch);
    hps_net_free(net);
    hps_model_free(m);
    return bad;
}

static void test_every_model_gradients(void **state)
{
    (void)state;
    DIR *dir = opendir(HPS_TESTDATA "/models");
    assert_non_null(dir);
    int bad = 0, models = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/models/%s", HPS_TESTDATA, e->d_name);
        bad += check_model(path);
        models++;
    }
    closedir(dir);
    assert_true(models >= 5);
    /* the kink rule must not quietly skip the check */
    assert_true(n_checked > 4 * n_kinks);
    assert_int_equal(bad, 0);
}

/* Training the tiny model on a fixed batch must drive its loss down: the
 * optimizers and the update wiring, not only the gradients. */
static void test_training_lowers_loss(void **state)
{
    (void)state;
    hps_error err;
    hps_model *m = hps_model_load(HPS_TESTDATA "/models/tiny.json", &err);
    assert_non_null(m);
    hps_net *net = hps_net_create(m, hps_backend_cpu(), 8, 0);
    hps_net_init(net, 1);
    hps_batch *b = hps_batch_synth(m, 8, 2);
    hps_net_load_batch(net, b);
    hps_optim opt = hps_optim_default();
    opt.lr_dense = 0.01f;
    double first = hps_net_forward(net), last = first;
    for (int step = 0; step < 200; step++) {
        hps_net_backward(net);
        hps_net_update(net, &opt);
        last = hps_net_forward(net);
    }
    assert_true(last < 0.5 * first);
    hps_batch_free(b);
    hps_net_free(net);
    hps_model_free(m);
}

/* Host tables (embedding layers on the CPU, the rest on the backend, pooled
 * rows copied across) compute what external tables do.  On the CPU backend
 * the copies are plain memcpy, which is what this checks: the wiring. */
static int fold_row(void *ctx, int layer, const int *j, const uint64_t *keys, int64_t n, int64_t *rows)
{
    (void)ctx, (void)layer;
    for (int64_t e = 0; e < n; e++) rows[e] = (int64_t)j[e] * 64 + (int64_t)(keys[e] % 64);
    return 0;
}

/* Host tables (the embedding layers on the CPU beside them, the pooled rows
 * crossing over) train bit for bit as external tables on the same backend. */
static void check_host_tables(const char *path)
{
    hps_error err;
    hps_model *m = hps_model_load(path, &err);
    assert_non_null(m);
    const hps_backend *cpu = hps_backend_cpu();
    hps_net *a = hps_net_create(m, cpu, 16, HPS_NET_EXTERNAL_TABLES);
    hps_net *b = hps_net_create(m, cpu, 16, HPS_NET_HOST_TABLES);
    assert_true(b->host_embeddings && !a->host_embeddings);
    hps_net_init(a, 3);
    hps_net_init(b, 3);
    hps_net_set_row_map(a, fold_row, NULL);
    hps_net_set_row_map(b, fold_row, NULL);
    float *mem[4][HPS_MAX_LAYERS / 64] = {{0}};
    size_t bytes[HPS_MAX_LAYERS / 64] = {0};
    int k = 0;
    hps_rng r;
    hps_rng_seed(&r, 4);
    for (int l = 0; l < m->n_layers; l++) {
        const hps_layer *L = &m->layers[l];
        if (!hps_layer_has_table(L)) continue;
        size_t n = (size_t)L->n_slots * 64 * L->dim;
        for (int j = 0; j < 4; j++) mem[j][k] = calloc(n, sizeof(float));
        fill_random(&r, mem[0][k], NULL, n);
        memcpy(mem[1][k], mem[0][k], n * sizeof(float));
        hps_net_set_table(a, l, mem[0][k], mem[2][k]);
        hps_net_set_table(b, l, mem[1][k], mem[3][k]);
        bytes[k++] = n * sizeof(float);
    }
    hps_batch *batch = hps_batch_synth(m, 16, 5);
    hps_optim opt = hps_optim_default();
    for (int step = 0; step < 3; step++) {
        assert_int_equal(hps_net_load_range(a, batch, 0, 16), 0);
        assert_int_equal(hps_net_load_range(b, batch, 0, 16), 0);
        assert_true(hps_net_forward(a) == hps_net_forward(b));
        hps_net_backward(a);
        hps_net_backward(b);
        hps_net_update(a, &opt);
        hps_net_update(b, &opt);
    }
    assert_memory_equal(a->params, b->params, m->n_params * sizeof(float));
    for (int i = 0; i < k; i++) {
        assert_memory_equal(mem[0][i], mem[1][i], bytes[i]);
        for (int j = 0; j < 4; j++) free(mem[j][i]);
    }
    hps_batch_free(batch);
    hps_net_free(a);
    hps_net_free(b);
    hps_model_free(m);
}

static void test_host_tables_match(void **state)
{
    (void)state;
    check_host_tables(HPS_TESTDATA "/models/dlrm-small.json");
    check_host_tables(HPS_TESTDATA "/models/deepfm.json"); /* a graph, a linear layer's table */
}

/* The first fc after the merge computes an input gradient only when
 * something before the merge takes it: not in a dense-only MLP. */
static void test_input_gradient_only_when_taken(void **state)
{
    (void)state;
    static const struct {
        const char *model;
        int fc, wants;
    } cases[] = {{"/models/mlp-784.json", 1, 0}, {"/models/demo-ctr.json", 2, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[512];
        hps_error err;
        snprintf(path, sizeof path, "%s%s", HPS_TESTDATA, cases[i].model);
        hps_model *m = hps_model_load(path, &err);
        assert_non_null(m);
        assert_int_equal(m->layers[cases[i].fc].kind, HPS_LAYER_FC);
        hps_net *net = hps_net_create(m, hps_backend_cpu(), 4, 64);
        if ((net->layers[cases[i].fc].din != NULL) != cases[i].wants)
            fail_msg("%s: input gradient of layer %d %s", cases[i].model, cases[i].fc,
                     cases[i].wants ? "missing" : "computed for nothing");
        hps_net_free(net);
        hps_model_free(m);
    }
}

/* A chain written as a graph (named inputs) runs the graph executor: the
 * same parameters give the same loss and gradients as the chain's. */
static void test_graph_runs_as_its_chain(void **state)
{
    (void)state;
    hps_error err;
    json_t *root = NULL;
    assert_int_equal(hps_json_load(HPS_TESTDATA "/models/dlrm-small.json", &root, &err), 0);
    hps_model *chain = hps_model_parse(root, "dlrm-small", &err);
    /* interact reads emb and bottom2; top1 the interaction */
    json_t *layers = json_object_get(root, "layers");
    json_object_set_new(json_array_get(layers, 3), "inputs", json_pack("[ss]", "emb", "bottom2"));
    json_object_set_new(json_array_get(layers, 4), "inputs", json_pack("[s]", "interact"));
    hps_model *graph = hps_model_parse(root, "dlrm-graph", &err);
    json_decref(root);
    assert_non_null(chain);
    assert_non_null(graph);
    assert_true(graph->graph && !chain->graph);
    hps_net *a = hps_net_create(chain, hps_backend_cpu(), 8, 64);
    hps_net *b = hps_net_create(graph, hps_backend_cpu(), 8, 64);
    hps_net_init(a, 5);
    hps_net_init(b, 5);
    hps_batch *batch = hps_batch_synth(chain, 8, 6);
    hps_net_load_batch(a, batch);
    hps_net_load_batch(b, batch);
    assert_true(hps_net_forward(a) == hps_net_forward(b));
    hps_net_backward(a);
    hps_net_backward(b);
    assert_memory_equal(a->grads, b->grads, chain->n_params * sizeof(float));
    assert_int_equal(a->layers[0].grad->n, b->layers[0].grad->n);
    assert_memory_equal(a->layers[0].grad->grad, b->layers[0].grad->grad,
                        (size_t)a->layers[0].grad->n * 8 * sizeof(float));
    hps_batch_free(batch);
    hps_net_free(a);
    hps_net_free(b);
    hps_model_free(chain);
    hps_model_free(graph);
}

/* A model without slots needs no merge: mlp-784 without its leading concat
 * reads the dense features in its first fc and computes what the chain
 * with the concat computes. */
static void test_dense_only_needs_no_concat(void **state)
{
    (void)state;
    hps_error err;
    json_t *root = NULL;
    assert_int_equal(hps_json_load(HPS_TESTDATA "/models/mlp-784.json", &root, &err), 0);
    hps_model *chain = hps_model_parse(root, "mlp-784", &err);
    assert_non_null(chain);
    assert_int_equal(json_array_remove(json_object_get(root, "layers"), 0), 0);
    hps_model *bare = hps_model_parse(root, "mlp-bare", &err);
    json_decref(root);
    if (!bare) fail_msg("%s", err.msg);
    assert_int_equal(bare->n_layers, chain->n_layers - 1);
    assert_int_equal(bare->layers[0].n_inputs, 1);
    assert_int_equal(bare->layers[0].inputs[0], HPS_TENSOR_DENSE);
    assert_int_equal(bare->n_params, chain->n_params);
    hps_net *a = hps_net_create(chain, hps_backend_cpu(), 8, 0);
    hps_net *b = hps_net_create(bare, hps_backend_cpu(), 8, 0);
    hps_net_init(a, 5);
    memcpy(b->params, a->params, chain->n_params * sizeof(float));
    hps_batch *batch = hps_batch_synth(chain, 8, 6);
    hps_net_load_batch(a, batch);
    hps_net_load_batch(b, batch);
    assert_true(hps_net_forward(a) == hps_net_forward(b));
    hps_net_backward(a);
    hps_net_backward(b);
    assert_memory_equal(a->grads, b->grads, chain->n_params * sizeof(float));
    hps_batch_free(batch);
    hps_net_free(a);
    hps_net_free(b);
    hps_model_free(chain);
    hps_model_free(bare);
}

/* A cross layer starts as TorchRec's CrossNet, VectorCrossNet and
 * LowRankCrossNet start theirs (and DeepCTR-Torch's, and the DCN-v2 paper's
 * code): every bias zero, every kernel xavier_normal_, deviation
 * sqrt(2 / (fan_in + fan_out)) of its [w, 1], [w, w], [w, r] or [r, w] shape.
 * They started as fc layers do (uniform +-1/sqrt(w), biases too). */
static void test_cross_starts_as_torchrec(void **state)
{
    (void)state;
    const char *models[] = {"dcn.json", "dcn-v2-stacked.json", "dcn-v2-parallel.json"};
    for (int k = 0; k < 3; k++) {
        char path[512];
        snprintf(path, sizeof path, HPS_TESTDATA "/models/%s", models[k]);
        hps_error err;
        hps_model *m = hps_model_load(path, &err);
        assert_non_null(m);
        hps_net *net = hps_net_create(m, hps_backend_cpu(), 4, 64);
        hps_net_init(net, 5);
        int crosses = 0;
        for (int l = 0; l < m->n_layers; l++) {
            const hps_layer *L = &m->layers[l];
            if (L->kind != HPS_LAYER_CROSS) continue;
            crosses++;
            const size_t w = (size_t)L->in_width, r = (size_t)L->rank, per = L->n_params / L->depth;
            const size_t kernel = per - w;
            const double fans = L->cross == HPS_CROSS_VECTOR ? w + 1 : r ? w + r : 2 * w;
            double sum = 0, sq = 0;
            for (int i = 0; i < L->depth; i++) {
                const float *p = net->params + L->param_offset + i * per;
                for (size_t j = 0; j < kernel; j++) sum += p[j], sq += (double)p[j] * p[j];
                for (size_t j = kernel; j < per; j++) assert_true(p[j] == 0.0f);
            }
            const double n = (double)kernel * L->depth, mean = sum / n;
            const double sd = sqrt(sq / n - mean * mean), want = sqrt(2.0 / fans);
            print_message("# %s: %s kernels sd %.4f, xavier_normal %.4f (n %.0f)\n", models[k], L->name,
                          sd, want, n);
            assert_true(fabs(mean) < 0.2 * want);
            assert_true(fabs(sd - want) < 0.1 * want);
        }
        assert_int_equal(crosses, 1);
        hps_net_free(net);
        hps_model_free(m);
    }
}

/* A batch of B samples, 2 dense and 2 slots, sample i holding i % 3 keys in
 * slot 0 and one in slot 1, each value a function of where it sits. */
static hps_batch *numbered_batch(int B, int weighted)
{
    hps_batch *b = hps_batch_create(B, 2, 2, 4, weighted);
    for (int i = 0; i < B; i++, b->B++) {
        b->dense[2 * i] = (float)i, b->dense[2 * i + 1] = -(float)i;
        b->labels[i] = (float)(i % 2);
        for (int j = 0; j < 2; j++) {
            int keys = j == 0 ? i % 3 : 1;
            hps_batch_reserve_keys(b, b->nnz + keys);
            for (int q = 0; q < keys; q++, b->nnz++) {
                b->keys[b->nnz] = (uint64_t)(100 * i + 10 * j + q);
                if (b->weights) b->weights[b->nnz] = 0.5f * (float)(q + 1);
            }
            b->offsets[(size_t)i * 2 + j + 1] = b->nnz;
        }
    }
    return b;
}

/* Rows [from, from+n) appended, between skipped ones, are those rows; the
 * skipped ones carry no keys and label 0; appending the whole batch is
 * appending its rows 0..B. */
static void test_batch_append_rows(void **state)
{
    (void)state;
    for (int weighted = 0; weighted < 2; weighted++) {
        hps_batch *src = numbered_batch(9, weighted), *dst = hps_batch_create(8, 2, 2, 1, weighted);
        hps_batch_skip_rows(dst, 2);
        hps_batch_append_rows(dst, src, 4, 5);
        hps_batch_skip_rows(dst, 1);
        assert_int_equal(dst->B, 8);
        for (int i = 0; i < 8; i++) {
            int from = i >= 2 && i < 7 ? i + 2 : -1; /* the source row, or -1: skipped */
            assert_true(dst->labels[i] == (from < 0 ? 0.0f : (float)(from % 2)));
            if (from >= 0) assert_true(dst->dense[2 * i] == (float)from && dst->dense[2 * i + 1] == -(float)from);
            for (int j = 0; j < 2; j++) {
                int64_t lo = dst->offsets[(size_t)i * 2 + j], hi = dst->offsets[(size_t)i * 2 + j + 1];
                assert_int_equal(hi - lo, from < 0 ? 0 : j == 0 ? from % 3 : 1);
                for (int64_t q = 0; q < hi - lo; q++) {
                    assert_int_equal(dst->keys[lo + q], 100 * from + 10 * j + q);
                    if (weighted) assert_true(dst->weights[lo + q] == 0.5f * (float)(q + 1));
                }
            }
        }
        assert_int_equal(dst->nnz, dst->offsets[16]);
        hps_batch *whole = hps_batch_create(9, 2, 2, 1, weighted);
        hps_batch_append(whole, src);
        assert_int_equal(whole->nnz, src->nnz);
        assert_memory_equal(whole->offsets, src->offsets, (9 * 2 + 1) * sizeof *src->offsets);
        assert_memory_equal(whole->keys, src->keys, (size_t)src->nnz * sizeof *src->keys);
        hps_batch_free(src), hps_batch_free(dst), hps_batch_free(whole);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_model_gradients),
        cmocka_unit_test(test_batch_append_rows),
        cmocka_unit_test(test_training_lowers_loss),
        cmocka_unit_test(test_host_tables_match),
        cmocka_unit_test(test_input_gradient_only_when_taken),
        cmocka_unit_test(test_graph_runs_as_its_chain),
        cmocka_unit_test(test_dense_only_needs_no_concat),
        cmocka_unit_test(test_cross_starts_as_torchrec),
    };
    return cmocka_run_group_tests_name("net", tests, NULL, NULL);
}
