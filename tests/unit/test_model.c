/* The model format (lib/model/hps_model.c): version-1 chains keep their
 * meaning and digests, version-2 graphs resolve named inputs, the live set
 * across a cut, and every error a graph can make names its layer and field. */
#include <string.h>

#include "hps_test.h"
#include "core/hps_json.h"
#include "model/hps_model.h"

#define TD HPS_TESTDATA "/models/"

static hps_model *load(const char *name)
{
    char path[512];
    hps_error err;
    snprintf(path, sizeof path, TD "%s", name);
    hps_model *m = hps_model_load(path, &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

/* The digests profiles and plans recorded for these models before version 2
 * (written by the version-1 parser): a chain must read as it did. */
static void test_chain_digests_unchanged(void **state)
{
    (void)state;
    static const char *const want[][2] = {
        {"big-ctr.json", "340938238afc1fd9cbcba90b2c106f7d5786fe245e6fa001658532ce53f6c4b1"},
        {"criteo-small.json", "7b2fc5589f744bd3a549c46593e86ce0c05a4485097557b4389ac16808723b6c"},
        {"demo-ctr.json", "7d787627b2a9dc84705e40025377c46ec15ca1d56908ea4dd46cd9ca58200198"},
        {"dlrm-criteo.json", "6ebac65feb2bfd10d8435fd680e237d48c1ad055304ee7ce2e12c7d05bece3ae"},
        {"dlrm-small.json", "26947db2ac8efe5ee30477f03a62cc2f3d2979f5106bba0fc7a53fcc72d3d27f"},
        {"libsvm-logreg.json", "a53dd5a3d24c34683881c3a8bba40d9a3793a030cdb1eaba4c68d4fe29a7fb1c"},
        {"libsvm-multiclass.json", "a2b380fd191f0e4d9b98a92b6bf6830c8bc426dadcebedcd3818401fe627d48f"},
        {"mlp-784.json", "5656661400a4ef593bca2c8790b172fdfe7fed4b6118e2a9371e77bec9e6dbc5"},
        {"tiny.json", "e7a1d4a6b2e02774f14918d0d9180a5a90f8d783a78035a15ed1125d98bbda83"},
        {"two-tables.json", "4004a0d29ea15f4933e52393a2543446f4627f434479d7b879bf5182845042e0"},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        hps_model *m = load(want[i][0]);
        if (strcmp(m->digest + 7, want[i][1]) != 0)
            fail_msg("%s: digest %s, was sha256:%s", want[i][0], m->digest, want[i][1]);
        assert_int_equal(m->graph, 0);
        hps_model_free(m);
    }
}

/* A chain's layers get their inputs by the chain's rules. */
static void test_chain_inputs(void **state)
{
    (void)state;
    hps_model *m = load("dlrm-small.json"); /* emb bottom1 bottom2 interact top1 top2 loss */
    const int want[][3] = {{0, 0, 0}, {1, HPS_TENSOR_DENSE, 0}, {1, 1, 0}, {2, 0, 2},
                           {1, 3, 0}, {1, 4, 0},                {1, 5, 0}};
    for (int l = 0; l < m->n_layers; l++) {
        assert_int_equal(m->layers[l].n_inputs, want[l][0]);
        for (int i = 0; i < want[l][0]; i++) assert_int_equal(m->layers[l].inputs[i], want[l][1 + i]);
    }
    assert_int_equal(m->merge_layer, 3);
    int live[8];
    /* before bottom2: the embeddings and bottom1's output, and the labels */
    assert_int_equal(hps_model_cut_live(m, 2, live, 8), 3);
    assert_int_equal(live[0], 0);
    assert_int_equal(live[1], 1);
    assert_int_equal(live[2], HPS_TENSOR_LABELS);
    assert_int_equal(hps_model_cut_width(m, 2), 48 + 16 + 1);
    /* before bottom1: the raw dense features too, which take no gradient */
    assert_int_equal(hps_model_cut_live(m, 1, live, 8), 3);
    assert_int_equal(live[0], HPS_TENSOR_DENSE);
    assert_int_equal(hps_model_tensor_grad(m, HPS_TENSOR_DENSE), 0);
    assert_int_equal(hps_model_tensor_grad(m, 0), 1);
    /* too small an array: the count is still whole */
    assert_int_equal(hps_model_cut_live(m, 1, live, 1), 3);
    hps_model_free(m);
}

/* DeepFM: the wide, FM and deep parts meet in an add. */
static void test_graph_deepfm(void **state)
{
    (void)state;
    hps_model *m = load("deepfm.json");
    assert_int_equal(m->graph, 1);
    assert_int_equal(m->merge_layer, -1);
    const hps_layer *fm = &m->layers[2], *add = &m->layers[7];
    assert_int_equal(fm->kind, HPS_LAYER_FM);
    assert_int_equal(fm->n_vec, 26);
    assert_int_equal(fm->vec_dim, 8);
    assert_int_equal(fm->out_width, 1);
    assert_int_equal(m->layers[1].n_params, 13 + 1);
    assert_int_equal(m->layers[1].n_slots, 26);
    assert_int_equal(add->n_inputs, 3);
    assert_int_equal(add->inputs[0], 1);
    assert_int_equal(add->inputs[2], 6);
    int live[16];
    /* before fc1: the linear and fm outputs wait for the add beside the deep part */
    int n = hps_model_cut_live(m, 4, live, 16);
    assert_int_equal(n, 4);
    assert_int_equal(live[0], 1);
    assert_int_equal(live[1], 2);
    assert_int_equal(live[2], 3);
    assert_int_equal(hps_model_cut_width(m, 4), 1 + 1 + 221 + 1);
    int act, grad;
    hps_model_cut_widths(m, 1, &act, &grad); /* emb and dense */
    assert_int_equal(act, 208 + 13);
    assert_int_equal(grad, 208);
    hps_model_free(m);
}

static void test_graph_cross(void **state)
{
    (void)state;
    hps_model *m = load("dcn-v2-parallel.json");
    const hps_layer *c = &m->layers[2];
    assert_int_equal(c->kind, HPS_LAYER_CROSS);
    assert_int_equal(c->cross, HPS_CROSS_MATRIX);
    assert_int_equal(c->in_width, 221);
    assert_int_equal(c->n_params, 2 * (2 * 221 * 32 + 221));
    hps_model_free(m);
    m = load("dcn.json");
    assert_int_equal(m->layers[2].n_params, 3 * 2 * 221);
    hps_model_free(m);
}

/* A small graph with one layer replaced; returns the error or "" */
static const char *parse_with(const char *layers, hps_error *err)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"format\": \"hps-model\", \"version\": 2, \"name\": \"g\", \"batch\": 4,"
             " \"input\": {\"dense\": 3, \"slots\": [{\"name\": \"a\", \"vocab\": 10},"
             " {\"name\": \"b\", \"vocab\": 10}], \"label\": {\"kind\": \"binary\"}},"
             " \"layers\": [%s]}",
             layers);
    json_t *root = NULL;
    assert_int_equal(hps_json_loadb("g.json", text, strlen(text), &root, err), 0);
    hps_model *m = hps_model_parse(root, "g.json", err);
    json_decref(root);
    if (m) {
        hps_model_free(m);
        return "";
    }
    return err->msg;
}

#define EMB "{\"name\": \"emb\", \"type\": \"embedding\", \"dim\": 3}, "
#define LOSS ", {\"name\": \"loss\", \"type\": \"loss\", \"loss\": \"logloss\"}"

static void test_graph_errors(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        /* a wide & deep that parses: the check of the fixture itself */
        {EMB "{\"name\": \"lin\", \"type\": \"linear\", \"dense\": true},"
             "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"emb\", \"dense\"]},"
             "{\"name\": \"d\", \"type\": \"fc\", \"out\": 1},"
             "{\"name\": \"s\", \"type\": \"add\", \"inputs\": [\"lin\", \"d\"]}" LOSS,
         ""},
        /* LR: a linear layer alone reads the slots and, with "dense": true,
         * the dense features (it takes no inputs) */
        {"{\"name\": \"lr\", \"type\": \"linear\", \"slots\": \"all\", \"dense\": true}" LOSS, ""},
        {EMB "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"emb\", \"y\"]},"
             "{\"name\": \"y\", \"type\": \"fc\", \"out\": 3, \"inputs\": [\"dense\"]}" LOSS,
         "layer 1 'x': inputs[1]: 'y' is used before it is defined (list the layers in a "
         "topological order)"},
        {EMB "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"emb\", \"y\"]},"
             "{\"name\": \"y\", \"type\": \"fc\", \"out\": 3, \"inputs\": [\"x\"]}" LOSS,
         "layer 1 'x': inputs[1]: 'y' makes a cycle (it reads this layer)"},
        {EMB "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"x\", \"emb\"]}" LOSS,
         "layer 1 'x': inputs[0]: 'x' makes a cycle (it reads this layer)"},
        {EMB "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"emb\", \"zz\"]}" LOSS,
         "layer 1 'x': inputs[1]: no layer named 'zz' (nor 'dense')"},
        {EMB "{\"name\": \"x\", \"type\": \"fc\", \"out\": 1, \"inputs\": [\"emb\", \"dense\"]}" LOSS,
         "layer 1 'x': inputs: fc takes one input, got 2 (concat, add and dot_interaction take "
         "several: concat them first)"},
        {EMB "{\"name\": \"l\", \"type\": \"linear\"},"
             "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"emb\", \"dense\"]},"
             "{\"name\": \"d\", \"type\": \"fc\", \"out\": 1}" LOSS,
         "layer 1 'l': its output is used by no later layer (name it in a layer's inputs)"},
        {EMB "{\"name\": \"x\", \"type\": \"fc\", \"out\": 1, \"inputs\": [\"emb\"]}" LOSS,
         "input: the dense features are used by no layer (name 'dense' in a layer's inputs)"},
        {EMB "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"emb\", \"dense\"]},"
             "{\"name\": \"s\", \"type\": \"add\", \"inputs\": [\"x\", \"emb\"]},"
             "{\"name\": \"d\", \"type\": \"fc\", \"out\": 1}" LOSS,
         "layer 2 's': inputs[1] 'emb' has width 6, inputs[0] 'x' 9: add needs one width"},
        {EMB "{\"name\": \"f\", \"type\": \"fm\", \"inputs\": [\"dense\"]}" LOSS,
         "layer 1 'f': inputs: fm reads one embedding layer's pooled vectors, 'dense' is not an "
         "embedding layer"},
        {"{\"name\": \"emb\", \"type\": \"embedding\", \"dim\": 3, \"inputs\": [\"dense\"]}" LOSS,
         "layer 0 'emb': inputs: embedding reads the input slots (\"slots\") and takes no inputs"},
        {EMB "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"emb\", \"dense\"]},"
             "{\"name\": \"c\", \"type\": \"cross\", \"kind\": \"vector\", \"depth\": 2, \"rank\": 2},"
             "{\"name\": \"d\", \"type\": \"fc\", \"out\": 1}" LOSS,
         "layer 2 'c': rank is for kind \"matrix\" (DCN-v2)"},
        {EMB "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"emb\", \"dense\"]},"
             "{\"name\": \"c\", \"type\": \"cross\", \"kind\": \"matrix\", \"depth\": 2, \"rank\": 10},"
             "{\"name\": \"d\", \"type\": \"fc\", \"out\": 1}" LOSS,
         "layer 2 'c': rank=10 must be in [1, 9]"},
        {EMB "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"emb\", \"emb\", \"dense\"]},"
             "{\"name\": \"d\", \"type\": \"fc\", \"out\": 1}" LOSS,
         "layer 1 'x': inputs[1]: 'emb' is named twice"},
        {EMB "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"emb\", \"dense\"]},"
             "{\"name\": \"d\", \"type\": \"dropout\", \"rate\": 1}" LOSS,
         "layer 2 'd': rate=1 must be in [0, 0.99]"},
        {EMB "{\"name\": \"dense\", \"type\": \"concat\", \"inputs\": [\"emb\"]}" LOSS,
         "layer 1 'dense': name 'dense' is the dense features' in inputs; rename the layer"},
        {EMB "{\"name\": \"x\", \"type\": \"concat\", \"inputs\": [\"emb\", \"dense\"]},"
             "{\"name\": \"d\", \"type\": \"fc\", \"out\": 1},"
             "{\"name\": \"e\", \"type\": \"fc\", \"out\": 1, \"inputs\": [\"x\"]},"
             "{\"name\": \"loss\", \"type\": \"loss\", \"loss\": \"logloss\", \"inputs\": [\"d\"]}",
         "layer 3 'e': its output is used by no later layer (name it in a layer's inputs)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        hps_error err;
        const char *got = parse_with(cases[i][0], &err);
        if (cases[i][1][0] == 0 ? got[0] != 0 : !strstr(got, cases[i][1]))
            fail_msg("case %zu: got '%s', want '%s'", i, got, cases[i][1]);
        if (got[0] && strncmp(got, "g.json: ", 8) != 0) fail_msg("case %zu: '%s'", i, got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_digests_unchanged), cmocka_unit_test(test_chain_inputs),
        cmocka_unit_test(test_graph_deepfm),             cmocka_unit_test(test_graph_cross),
        cmocka_unit_test(test_graph_errors),
    };
    return cmocka_run_group_tests_name("model", tests, NULL, NULL);
}
