/* The training engine: parameter-server tables, the pipeline of stages,
 * checkpoints and resume, learning on planted data. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "core/hps_io.h"
#include "core/hps_rng.h"
#include "hps_test.h"
#include "plan/hps_plan_file.h"
#include "train/train_internal.h"
#include "hps_testlib.h"

static hps_model *load(const char *name)
{
    char path[512];
    hps_error err;
    snprintf(path, sizeof path, "%s/models/%s", HPS_TESTDATA, name);
    hps_model *m = hps_model_load(path, &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

/* ---- tables ---------------------------------------------------------------------- */

static void test_table_rows_are_stable(void **state)
{
    (void)state;
    hps_error err;
    hps_table *a = hps_table_create(0, 4, 0, HPS_TABLE_FULL_ERROR, 7);
    hps_table *b = hps_table_create(0, 4, 0, HPS_TABLE_FULL_ERROR, 7);
    /* the same keys in another order get the same initial values */
    int64_t ra = hps_table_lookup(a, 1, 42, 1, &err), rb;
    hps_table_lookup(b, 0, 5, 1, &err);
    rb = hps_table_lookup(b, 1, 42, 1, &err);
    assert_memory_equal(hps_table_weights(a) + ra * 4, hps_table_weights(b) + rb * 4, 4 * sizeof(float));
    /* a key seen again keeps its row; another slot is another row */
    assert_int_equal(hps_table_lookup(a, 1, 42, 2, &err), ra);
    assert_int_not_equal(hps_table_lookup(a, 2, 42, 2, &err), ra);
    /* growth past the first slab keeps every key */
    for (uint64_t k = 0; k < 5000; k++) hps_table_lookup(a, 0, k, 3, &err);
    assert_int_equal(hps_table_rows(a), 5002);
    assert_int_equal(hps_table_lookup(a, 1, 42, 4, &err), ra);
    hps_table_free(a);
    hps_table_free(b);
}

/* Three steps of distinct keys (new ones and those of the step before)
 * into t, each step's gradients (a function of the key) applied. */
static void train_keys(hps_table *t, uint64_t keys_a_step)
{
    hps_error err = {0};
    const int D = 4;
    hps_sparse_grad *g = hps_sparse_grad_create((int64_t)keys_a_step, D), *sum = NULL;
    for (uint64_t step = 1; step <= 3; step++) {
        hps_table_stage_begin(t);
        g->n = 0;
        for (uint64_t i = 0; i < keys_a_step; i++) {
            uint64_t key = hps_mix64((step - 1) * keys_a_step / 2 + i); /* half of them seen the step before */
            int64_t r = hps_table_lookup(t, (int)(key % 3), key, step, &err);
            assert_true(r >= 0);
            g->rows[g->n] = r;
            for (int d = 0; d < D; d++) g->grad[g->n * D + d] = (float)(key >> (8 * d) & 0xff) / 256.0f - 0.5f;
            g->n++;
        }
        hps_sparse_grad *parts[] = {g};
        hps_table_apply(t, parts, 1, &sum, 0.1f, 1e-8f);
    }
    hps_sparse_grad_free(g);
    hps_sparse_grad_free(sum);
}

/* A table sized ahead (hps_table_presize) never rehashes up to its size
 * and holds the same rows, in the same order, with the same values as one
 * that doubles its way there: fp32 and compact rows, and past its size it
 * grows as before. */
static void test_table_presize_never_rehashes(void **state)
{
    (void)state;
    const hps_row_dtype dtypes[] = {HPS_ROW_FP32, HPS_ROW_FP16};
    for (int i = 0; i < 2; i++) {
        hps_table *sized = hps_table_create(0, 4, 0, HPS_TABLE_FULL_ERROR, 7);
        hps_table *grown = hps_table_create(0, 4, 0, HPS_TABLE_FULL_ERROR, 7);
        hps_table_set_dtype(sized, dtypes[i]);
        hps_table_set_dtype(grown, dtypes[i]);
        hps_table_presize(sized, 12000, 600); /* the 12000 keys below, and 600 spare */
        train_keys(sized, 6000);
        train_keys(grown, 6000);
        assert_int_equal(hps_table_rows(sized), 12000);
        assert_int_equal(hps_table_rehashes(sized), 0);
        assert_true(hps_table_rehashes(grown) > 0); /* 1024 rows doubled to 16384: 4 rehashes */
        assert_int_equal(hps_table_rows(grown), hps_table_rows(sized));
        for (int64_t r = 0; r < hps_table_rows(sized); r++) {
            int sa, sb;
            uint64_t ka, kb;
            float wa[4], wb[4];
            hps_table_row_key(sized, r, &sa, &ka);
            hps_table_row_key(grown, r, &sb, &kb);
            assert_true(sa == sb && ka == kb);
            hps_table_row_values(sized, r, wa);
            hps_table_row_values(grown, r, wb);
            assert_memory_equal(wa, wb, sizeof wa);
        }
        /* past its size the table doubles, and rehashes for it */
        hps_error err = {0};
        for (uint64_t k = 0; k < 1000; k++) assert_true(hps_table_lookup(sized, 5, k, 4, &err) >= 0);
        assert_int_equal(hps_table_rehashes(sized), 1);
        assert_int_equal(hps_table_find(sized, 5, 999), 12999);
        hps_table_free(sized);
        hps_table_free(grown);
    }
    /* the spare rows share the hash sized for the rows: not twice its slots
     * where they cross a power of two */
    hps_table *a = hps_table_create(0, 4, 0, HPS_TABLE_FULL_ERROR, 7);
    hps_table *b = hps_table_create(0, 4, 0, HPS_TABLE_FULL_ERROR, 7);
    hps_table_presize(a, 16384, 819);
    hps_table_presize(b, 16384 + 819, 0);
    assert_int_equal(hps_table_bytes(b) - hps_table_bytes(a), 32768 * 8);
    hps_table_free(a);
    hps_table_free(b);
    /* a cap bounds the size asked for */
    size_t cap = 5000 * hps_table_row_bytes(4, 0, HPS_ROW_FP32);
    hps_table *t = hps_table_create(0, 4, cap, HPS_TABLE_FULL_EVICT, 7);
    hps_table_presize(t, 1000000, 50000);
    assert_true(hps_table_bytes(t) <= cap);
    hps_table_free(t);
}

/* One step's update: the gradients of a row summed in order, then one
 * AdaGrad step on the sum (what one process and a server both do). */
static void test_table_apply_sums_then_adagrad(void **state)
{
    (void)state;
    hps_error err;
    hps_table *t = hps_table_create(0, 2, 0, HPS_TABLE_FULL_ERROR, 7);
    int64_t r0 = hps_table_lookup(t, 0, 1, 1, &err), r1 = hps_table_lookup(t, 0, 2, 1, &err);
    float before[4];
    memcpy(before, hps_table_weights(t), sizeof before);
    int64_t rows_a[] = {r0}, rows_b[] = {r1, r0};
    float grad_a[] = {1, 2}, grad_b[] = {3, 4, 0.5f, -1};
    hps_sparse_grad a = {.n = 1, .cap = 1, .D = 2, .rows = rows_a, .grad = grad_a};
    hps_sparse_grad b = {.n = 2, .cap = 2, .D = 2, .rows = rows_b, .grad = grad_b};
    hps_sparse_grad *parts[] = {&a, &b}, *sum = NULL;
    hps_table_apply(t, parts, 2, &sum, 0.1f, 1e-8f);
    const float g[4] = {1 + 0.5f, 2 - 1, 3, 4}; /* rows r0, r1: each once */
    for (int i = 0; i < 4; i++) {
        float acc = g[i] * g[i];
        assert_float_equal(hps_table_accum(t)[i], acc, 1e-6);
        assert_float_equal(hps_table_weights(t)[i], before[i] - 0.1f * g[i] / (sqrtf(acc) + 1e-8f), 1e-6);
    }
    /* one gradient is applied as it is, no copy */
    assert_ptr_equal(hps_table_grad_sum(parts, 1, 2, &sum), &a);
    hps_sparse_grad_free(sum);
    hps_table_free(t);
}

static void test_table_cap_error_and_eviction(void **state)
{
    (void)state;
    hps_error err = {0};
    size_t cap = 200 * hps_table_row_bytes(8, 0, HPS_ROW_FP32);
    hps_table *t = hps_table_create(3, 8, cap, HPS_TABLE_FULL_ERROR, 1);
    int64_t n = hps_table_max_rows(t);
    assert_true(n > 60 && n <= 200);
    for (uint64_t k = 0; k < (uint64_t)n; k++) assert_true(hps_table_lookup(t, 0, k, 1, &err) >= 0);
    assert_int_equal(hps_table_lookup(t, 0, 100000, 1, &err), -1);
    char want[64];
    snprintf(want, sizeof want, "embedding layer 3: table full at %lld rows", (long long)n);
    assert_non_null(strstr(err.msg, want));
    assert_true(hps_table_bytes(t) <= cap); /* the cap counts everything */
    hps_table_free(t);

    t = hps_table_create(3, 8, cap, HPS_TABLE_FULL_EVICT, 1);
    for (uint64_t k = 0; k < (uint64_t)n; k++) hps_table_lookup(t, 0, k, 1, &err);
    /* step 2 touches keys 0..9, then 50 new keys must evict cold ones only */
    int64_t hot[10];
    for (uint64_t k = 0; k < 10; k++) hot[k] = hps_table_lookup(t, 0, k, 2, &err);
    for (uint64_t k = 1000; k < 1050; k++) assert_true(hps_table_lookup(t, 0, k, 2, &err) >= 0);
    assert_int_equal(hps_table_rows(t), n);
    assert_int_equal(hps_table_evictions(t), 50);
    for (uint64_t k = 0; k < 10; k++) assert_int_equal(hps_table_lookup(t, 0, k, 2, &err), hot[k]);
    for (uint64_t k = 1000; k < 1050; k++) assert_true(hps_table_lookup(t, 0, k, 2, &err) >= 0);
    assert_int_equal(hps_table_evictions(t), 50); /* all still present */
    /* a step that touches more rows than the cap holds is an error, not a silent loss */
    int failed = 0;
    for (uint64_t k = 5000; k < 5000 + 2 * (uint64_t)n && !failed; k++)
        failed = hps_table_lookup(t, 0, k, 3, &err) < 0;
    assert_true(failed);
    hps_table_free(t);
}

/* A table configured by kind: 0 unbounded, 1 a cap that fills (error),
 * 2 a cap that evicts, 3 admission after 2 lookups, 4 fp16 rows. */
static hps_table *table_kind(int kind)
{
    size_t cap = 7000 * hps_table_row_bytes(4, 0, HPS_ROW_FP32);
    hps_table *t = hps_table_create(0, 4, kind == 1 || kind == 2 ? cap : 0,
                                    kind == 2 ? HPS_TABLE_FULL_EVICT : HPS_TABLE_FULL_ERROR, 5);
    if (kind == 3) hps_table_set_admission(t, 2);
    if (kind == 4) hps_table_set_dtype(t, HPS_ROW_FP16);
    return t;
}

static void table_bytes(const hps_table *t, char **buf, size_t *len)
{
    FILE *f = open_memstream(buf, len);
    assert_int_equal(hps_table_save(t, f), 0);
    fclose(f);
}

/* hps_table_lookup_many on two threads gives the rows and leaves the table
 * (saved bytes, counters) as one lookup after another does, whatever the
 * table's rules: batches with repeats, keys already present and new ones,
 * a table that grows, fills, evicts, admits or stages compact rows. */
static void test_table_lookup_many_as_one_by_one(void **state)
{
    (void)state;
    omp_set_num_threads(2);
    enum { N = 6000, STEPS = 6 };
    int *slots = malloc(N * sizeof *slots);
    uint64_t *keys = malloc(N * sizeof *keys);
    int64_t *many = malloc(N * sizeof *many), *one = malloc(N * sizeof *one);
    for (int kind = 0; kind < 5; kind++) {
        hps_table *a = table_kind(kind), *b = table_kind(kind);
        hps_rng r;
        hps_rng_seed(&r, 11 + (uint64_t)kind);
        int failed = 0;
        for (uint64_t step = 1; step <= STEPS && !failed; step++) {
            for (int e = 0; e < N; e++) { /* skewed: low keys repeat, the vocabulary grows a step */
                double u = hps_rng_uniform(&r);
                keys[e] = (uint64_t)(u * u * (double)(2000 * step + 2000 * (kind == 1) * step));
                slots[e] = (int)(hps_rng_next(&r) % 4);
                many[e] = -7;
            }
            hps_error ea = {0}, eb = {0};
            int rc = hps_table_lookup_many(a, slots, keys, N, step, many, &ea);
            int at = N;
            for (int e = 0; e < N && at == N; e++)
                if ((one[e] = hps_table_lookup(b, slots[e], keys[e], step, &eb)) < 0) at = e;
            assert_int_equal(rc, at < N ? -1 : 0);
            for (int e = 0; e < at; e++) assert_int_equal(many[e], one[e]);
            if (at < N) { /* the same first failure, the same words; the table is then left */
                assert_int_equal(many[at], -1);
                assert_string_equal(ea.msg, eb.msg);
                failed = 1;
            }
            for (int e = 0; e < at && kind != 1; e++) hps_table_weights(a)[many[e] * 4] += 0.25f;
            for (int e = 0; e < at && kind != 1; e++) hps_table_weights(b)[one[e] * 4] += 0.25f;
        }
        if (kind == 1) assert_true(failed);
        if (!failed) {
            uint64_t la[2], lb[2];
            hps_table_lookups(a, &la[0], &la[1]);
            hps_table_lookups(b, &lb[0], &lb[1]);
            assert_memory_equal(la, lb, sizeof la);
            assert_int_equal(hps_table_rows(a), hps_table_rows(b));
            assert_int_equal(hps_table_evictions(a), hps_table_evictions(b));
            char *ba = NULL, *bb = NULL;
            size_t na = 0, nb = 0;
            table_bytes(a, &ba, &na);
            table_bytes(b, &bb, &nb);
            assert_int_equal(na, nb);
            assert_memory_equal(ba, bb, na);
            free(ba), free(bb);
        }
        if (kind == 2) assert_true(hps_table_evictions(a) > 0);
        hps_table_free(a), hps_table_free(b);
    }
    free(slots), free(keys), free(many), free(one);
}

static void test_table_save_load(void **state)
{
    (void)state;
    hps_error err;
    hps_table *a = hps_table_create(0, 3, 0, HPS_TABLE_FULL_ERROR, 9);
    for (uint64_t k = 0; k < 300; k++) hps_table_lookup(a, (int)(k % 3), k * 7919, 1, &err);
    hps_table_weights(a)[5] = 1.5f;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(hps_table_save(a, f), 0);
    fclose(f);
    hps_table *b = hps_table_create(0, 3, 0, HPS_TABLE_FULL_ERROR, 9);
    f = fmemopen(buf, len, "rb");
    assert_int_equal(hps_table_load(b, f, (const int[]){0, 1, 2}, 3, &err, "mem"), 0);
    fclose(f);
    assert_int_equal(hps_table_rows(b), 300);
    assert_memory_equal(hps_table_weights(a), hps_table_weights(b), 300 * 3 * sizeof(float));
    for (uint64_t k = 0; k < 300; k++)
        assert_int_equal(hps_table_lookup(b, (int)(k % 3), k * 7919, 2, &err),
                         hps_table_lookup(a, (int)(k % 3), k * 7919, 2, &err));
    free(buf);
    hps_table_free(a);
    hps_table_free(b);
}

/* A payload that claims 2^40 rows is refused before the table grows to them. */
static void test_table_load_checks_rows_exist(void **state)
{
    (void)state;
    hps_error err;
    hps_table *a = hps_table_create(0, 3, 0, HPS_TABLE_FULL_ERROR, 9);
    for (uint64_t k = 0; k < 10; k++) hps_table_lookup(a, 0, k, 1, &err);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(hps_table_save(a, f), 0);
    fclose(f);
    int64_t rows = (int64_t)1 << 40;
    memcpy(buf + sizeof rows, &rows, sizeof rows); /* head[1]: the row count */
    hps_table *b = hps_table_create(0, 3, 0, HPS_TABLE_FULL_ERROR, 9);
    f = fmemopen(buf, len, "rb");
    assert_int_equal(hps_table_load(b, f, (const int[]){0, 1, 2}, 3, &err, "mem"), -1);
    fclose(f);
    assert_string_equal(err.msg, "mem: embedding layer 0: truncated table");
    assert_true(hps_table_bytes(b) < (1u << 20));
    free(buf);
    hps_table_free(a);
    hps_table_free(b);
}

/* A saved table of 4 rows (dim 2, slots 0 and 1) with row `row`'s field
 * forged (valid otherwise, as a checkpoint whose digest was recomputed),
 * loaded into a table of the layer's slots {0, 1}: 0 or -1 with err. */
enum forged { FORGE_KEY_TWICE, FORGE_SLOT, FORGE_WEIGHT, FORGE_ACCUM };

static int load_forged(enum forged what, int64_t value_bits, float value, hps_error *err, int64_t *rows_after)
{
    hps_error e0;
    hps_table *a = hps_table_create(0, 2, 0, HPS_TABLE_FULL_ERROR, 9);
    for (uint64_t k = 0; k < 4; k++) hps_table_lookup(a, (int)(k % 2), 100 + k, 1, &e0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(hps_table_save(a, f), 0);
    fclose(f);
    /* the layout hps_table_save writes: head[4], key[4], slot[4], step[4], ref[4], weights, accum */
    char *key = buf + 32, *slot = key + 4 * 8, *weights = slot + 4 * 4 + 4 * 8 + 4;
    uint64_t k2;
    int32_t s2;
    switch (what) {
    case FORGE_KEY_TWICE: /* row 2 becomes row 0's (slot 0, key 100) */
        memcpy(&k2, key, 8), memcpy(key + 2 * 8, &k2, 8);
        break;
    case FORGE_SLOT:
        s2 = (int32_t)value_bits;
        memcpy(slot + 3 * 4, &s2, 4);
        break;
    case FORGE_WEIGHT:
        memcpy(weights + 5 * 4, &value, 4); /* row 2, column 1 */
        break;
    case FORGE_ACCUM:
        memcpy(weights + 8 * 4 + 1 * 4, &value, 4); /* row 0, column 1 */
        break;
    }
    hps_table *b = hps_table_create(0, 2, 0, HPS_TABLE_FULL_EVICT, 9);
    f = fmemopen(buf, len, "rb");
    int rc = hps_table_load(b, f, (const int[]){0, 1}, 2, err, "ck");
    fclose(f);
    *rows_after = hps_table_rows(b);
    if (rc == 0) /* what a refused table would have risked: looking rows up, evicting */
        for (uint64_t k = 0; k < 8; k++) assert_true(hps_table_lookup(b, (int)(k % 2), 100 + k, 2, &e0) >= 0);
    free(buf);
    hps_table_free(a);
    hps_table_free(b);
    return rc;
}

/* A checkpoint's table is refused unless every row is well-formed (issue
 * 26: a duplicate key aborted an evicting table, NaN rows trained on). */
static void test_table_load_refuses_bad_rows(void **state)
{
    (void)state;
    hps_error err;
    int64_t rows;
    assert_int_equal(load_forged(FORGE_SLOT, 1, 0, &err, &rows), 0); /* the unforged value */
    assert_int_equal(rows, 4);
    assert_int_equal(load_forged(FORGE_KEY_TWICE, 0, 0, &err, &rows), -1);
    assert_string_equal(err.msg, "ck: embedding layer 0: rows 0 and 2 have the same slot 0 and key 100");
    assert_int_equal(rows, 0);
    assert_int_equal(load_forged(FORGE_SLOT, 1 << 24, 0, &err, &rows), -1);
    assert_string_equal(err.msg, "ck: embedding layer 0: row 3 (slot 16777216, key 103) has a slot the layer does not have");
    assert_int_equal(rows, 0);
    assert_int_equal(load_forged(FORGE_SLOT, 2, 0, &err, &rows), -1); /* in range of the tag, not the layer's */
    assert_int_equal(load_forged(FORGE_SLOT, -1, 0, &err, &rows), -1);
    assert_int_equal(load_forged(FORGE_WEIGHT, 0, NAN, &err, &rows), -1);
    assert_string_equal(err.msg, "ck: embedding layer 0: row 2 (slot 0, key 102) has a weight that is not finite");
    assert_int_equal(load_forged(FORGE_WEIGHT, 0, -INFINITY, &err, &rows), -1);
    assert_int_equal(load_forged(FORGE_WEIGHT, 0, -3e38f, &err, &rows), 0); /* large is finite */
    assert_int_equal(load_forged(FORGE_ACCUM, 0, -1.0f, &err, &rows), -1);
    assert_string_equal(err.msg,
                        "ck: embedding layer 0: row 0 (slot 0, key 100) has an AdaGrad accumulator that is negative or not finite");
    assert_int_equal(load_forged(FORGE_ACCUM, 0, INFINITY, &err, &rows), -1);
    assert_int_equal(load_forged(FORGE_ACCUM, 0, 2.0f, &err, &rows), 0);
}

/* ---- the trainer --------------------------------------------------------------------- */

/* A plan of S stages cutting the model's layers at `cuts`. */
static void plan_of(const hps_model *m, plan_file *p, const int *cuts, int S)
{
    hps_train_plan_single(m, p);
    p->n_stages = S;
    for (int s = 0; s < S; s++) {
        p->stages[s] = p->stages[0];
        p->stages[s].first = s ? cuts[s - 1] : 0;
        p->stages[s].end = s + 1 < S ? cuts[s] : m->n_layers;
    }
}

static hps_trainer *trainer_threads(const hps_model *m, const plan_file *p, int micro, int threads)
{
    hps_train_opts o = hps_train_opts_default();
    o.micro_batches = micro;
    o.threads = threads;
    hps_error err;
    hps_trainer *t = hps_trainer_create(m, p, &o, &err);
    if (!t) fail_msg("%s", err.msg);
    return t;
}

static hps_trainer *trainer(const hps_model *m, const plan_file *p, int micro)
{
    return trainer_threads(m, p, micro, 1);
}

/* Loss of each of n steps on the synthetic source. */
static void losses(hps_trainer *t, hps_source *src, double *loss, int n)
{
    hps_error err;
    src->seek(src, 0, &err);
    for (int i = 0; i < n; i++) {
        assert_true(src->read(src, t->batch, t->B, &err) > 0);
        assert_int_equal(hps_trainer_step(t, t->batch, &loss[i], &err), 0);
    }
}

/* Three stages and three micro-batches follow the one-stage run: the pipeline
 * changes where and when layers run, not what is computed (up to the float
 * rounding of smaller matrix products). */
static void test_pipeline_matches_single_stage(void **state)
{
    (void)state;
    hps_model *m = load("dlrm-small.json");
    hps_source *src = hps_source_synth(m, 64 * 20, 1, 5);
    plan_file one, three;
    int cuts[2] = {3, 5};
    plan_of(m, &one, NULL, 1);
    plan_of(m, &three, cuts, 3);
    hps_trainer *a = trainer(m, &one, 1), *b = trainer(m, &three, 3);
    assert_int_equal(b->M, 3);
    double la[20], lb[20];
    losses(a, src, la, 20);
    losses(b, src, lb, 20);
    for (int i = 0; i < 20; i++) assert_close(la[i], lb[i], 1e-4, "loss", i);
    assert_true(la[19] < la[0]);
    hps_trainer_free(a);
    hps_trainer_free(b);
    src->close(src);
    hps_model_free(m);
}

/* End to end through stages and micro-batches: the gradient the pipeline
 * accumulates is the derivative of the batch loss. */
static void test_pipeline_gradients(void **state)
{
    (void)state;
    hps_model *m = load("tiny.json");
    hps_source *src = hps_source_synth(m, 8, 1, 3);
    plan_file p;
    int cuts[1] = {3};
    plan_of(m, &p, cuts, 2);
    hps_trainer *t = trainer(m, &p, 2);
    hps_error err;
    assert_int_equal(src->read(src, t->batch, t->B, &err), 8);
    int k = train_load_micro(t, t->batch, 0, t->batch->B, t->batch->B, &err);
    assert_int_equal(k, 2);
    t->be->memzero(t->owner->grads, m->n_params * sizeof(float));
    hps_pipeline_run(t->pipe, k);
    float *g = malloc(m->n_params * sizeof *g);
    memcpy(g, t->owner->grads, m->n_params * sizeof *g);
    for (size_t i = 0; i < m->n_params; i += 7) {
        float keep = t->owner->params[i];
        double up, down;
        t->owner->params[i] = keep + 1e-3f;
        hps_pipeline_forward(t->pipe, k);
        up = t->nets[0]->loss * t->nets[0]->B / 8 + t->nets[1]->loss * t->nets[1]->B / 8;
        t->owner->params[i] = keep - 1e-3f;
        hps_pipeline_forward(t->pipe, k);
        down = t->nets[0]->loss * t->nets[0]->B / 8 + t->nets[1]->loss * t->nets[1]->B / 8;
        t->owner->params[i] = keep;
        assert_close(g[i], (up - down) / 2e-3, 2e-2, "pipeline grad", i);
    }
    free(g);
    hps_trainer_free(t);
    src->close(src);
    hps_model_free(m);
}

/* ---- stages in other processes: the pipeline's link -------------------------------- */

/* Two stages joined by queues in memory, as lib/dist joins ranks: each
 * direction a FIFO of (kind, bytes). */
typedef struct msg {
    int kind;
    size_t n;
    char *p;
    struct msg *next;
} msg;
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    msg *head[2], *tail[2]; /* [0]: towards the next stage, [1]: back up */
} wire;
typedef struct {
    wire *w;
    int stage;
} end;

static int wire_send(void *ctx, int up, int to, int kind, const void *p, size_t n, hps_error *err)
{
    end *e = ctx;
    (void)to, (void)err;
    msg *m = calloc(1, sizeof *m);
    m->kind = kind, m->n = n, m->p = malloc(n + 1);
    memcpy(m->p, p, n);
    pthread_mutex_lock(&e->w->lock);
    int q = up; /* stage 1 sends up on queue 1, stage 0 down on queue 0 */
    if (e->w->tail[q]) e->w->tail[q]->next = m;
    else e->w->head[q] = m;
    e->w->tail[q] = m;
    pthread_cond_broadcast(&e->w->cond);
    pthread_mutex_unlock(&e->w->lock);
    return 0;
}

static char *wire_recv(void *ctx, int up, int from, int kind, size_t *n, hps_error *err)
{
    end *e = ctx;
    (void)from, (void)err;
    int q = !up; /* from above: what stage 0 sent down */
    pthread_mutex_lock(&e->w->lock);
    while (!e->w->head[q]) pthread_cond_wait(&e->w->cond, &e->w->lock);
    msg *m = e->w->head[q];
    e->w->head[q] = m->next;
    if (!m->next) e->w->tail[q] = NULL;
    pthread_mutex_unlock(&e->w->lock);
    assert_int_equal(m->kind, kind);
    char *p = m->p;
    *n = m->n;
    free(m);
    return p;
}

static int wire_flush(void *ctx, hps_error *err)
{
    (void)ctx, (void)err;
    return 0;
}

typedef struct {
    hps_trainer *t;
    int k;
    double loss, wait;
    int rows, rc;
} stage_run;

static void *run_stage(void *arg)
{
    stage_run *r = arg;
    hps_error err;
    r->rc = hps_pipeline_run_linked(r->t->pipe, r->k, r->t->batch->B, &r->loss, &r->rows, &r->wait, &err);
    return NULL;
}

/* A cut at layer c between two trainers joined by the link: stage 0's
 * gradients, stage 1's and its loss are one process's two-stage pipeline's.
 * With dropout, each micro-batch masks from its own seed, which stage 1 only
 * learns from the link. */
static void linked_matches_local(const hps_model *m, hps_source *src, int c, int dropout)
{
    plan_file p;
    int cuts[1] = {c};
    plan_of(m, &p, cuts, 2);
    hps_trainer *one = trainer(m, &p, 3), *a = trainer(m, &p, 3), *b = trainer(m, &p, 3);
    hps_error err;
    hps_trainer *ts[3] = {one, a, b};
    int k = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(src->seek(src, 0, &err), 0);
        assert_int_equal(src->read(src, ts[i]->batch, ts[i]->B, &err), ts[i]->B);
        ts[i]->be->memzero(ts[i]->owner->grads, m->n_params * sizeof(float));
    }
    k = train_load_micro(one, one->batch, 0, one->B, one->B, &err);
    assert_int_equal(train_load_micro(a, a->batch, 0, a->B, a->B, &err), k);
    for (int i = 0; dropout && i < k; i++) {
        hps_net_set_dropout(one->nets[i], 1, 1000 + (uint64_t)i);
        hps_net_set_dropout(a->nets[i], 1, 1000 + (uint64_t)i);
    }
    hps_pipeline_run(one->pipe, k);
    wire w = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    end ea = {&w, 0}, eb = {&w, 1};
    hps_stage_link la = {.ctx = &ea, .stage = 0, .n_up = 0, .down = 1, .send = wire_send,
                         .recv = wire_recv, .flush = wire_flush};
    hps_stage_link lb = {.ctx = &eb, .stage = 1, .n_up = 1, .down = 0, .send = wire_send,
                         .recv = wire_recv, .flush = wire_flush};
    hps_pipeline_set_link(a->pipe, &la);
    hps_pipeline_set_link(b->pipe, &lb);
    /* a table layer in stage 1: stage 1 loads the keys of the micro-batches
     * stage 0 sends (else it loads nothing) */
    int later_tables = 0;
    for (int l = c; l < m->n_layers; l++) later_tables |= hps_layer_has_table(&m->layers[l]);
    stage_run ra = {.t = a, .k = k}, rb = {.t = b, .k = later_tables ? train_load_micro(b, b->batch, 0, b->B, b->B, &err) : 0};
    assert_int_equal(rb.k, later_tables ? k : 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_stage, &ra), 0);
    run_stage(&rb);
    pthread_join(th, NULL);
    assert_int_equal(ra.rc, 0);
    assert_int_equal(rb.rc, 0);
    assert_int_equal(ra.rows, one->B);
    assert_int_equal(rb.rows, one->B);
    double loss = 0;
    for (int i = 0; i < k; i++) loss += one->nets[i]->loss * one->nets[i]->B / one->B;
    assert_close(rb.loss, loss, 1e-5, "stage 1's loss", c);
    for (int l = 0; l < m->n_layers; l++) {
        const hps_layer *L = &m->layers[l];
        const float *g = (l < c ? a : b)->owner->grads;
        for (size_t i = L->param_offset; i < L->param_offset + L->n_params; i++)
            assert_close(g[i], one->owner->grads[i], 1e-4, "gradient", (int)i);
    }
    /* the first stage's embedding gradient came back through the cut; a
     * table layer of stage 1 has one process's rows and gradient there */
    for (int l = 0; l < c; l++)
        if (m->layers[l].kind == HPS_LAYER_EMBEDDING)
            assert_true(a->nets[0]->layers[l].grad->n > 0);
    for (int l = c; l < m->n_layers; l++)
        for (int i = 0; hps_layer_has_table(&m->layers[l]) && i < k; i++) {
            const hps_sparse_grad *g = b->nets[i]->layers[l].grad, *want = one->nets[i]->layers[l].grad;
            assert_true(want->n > 0);
            assert_int_equal(g->n, want->n);
            for (int64_t r = 0; r < g->n; r++) {
                assert_int_equal(g->rows[r], want->rows[r]);
                for (int j = 0; j < g->D; j++)
                    assert_close(g->grad[r * g->D + j], want->grad[r * g->D + j], 1e-4, "row gradient", (int)r);
            }
        }
    for (int i = 0; i < 3; i++) hps_trainer_free(ts[i]);
}

/* Every cut of a model, those before a table layer (embedding, linear: it
 * reads the keys, which stage 1 then loads too) among them; returns how
 * many. */
static int linked_every_cut(const char *name, int dropout)
{
    hps_model *m = load(name);
    hps_source *src = hps_source_synth(m, (uint64_t)m->batch, 1, 7);
    int n = 0;
    for (int c = 1; c < m->n_layers; c++, n++) linked_matches_local(m, src, c, dropout);
    src->close(src);
    hps_model_free(m);
    return n;
}

/* A chain: cuts before the merge layer (two streams cross) and after it
 * (one).  Graphs: the live set crosses, tensors that skip the next stage's
 * first layer included (deepfm's wide and FM logits beside its deep part,
 * dcn-v2's x0 read by both towers); dcn-v2 stacked with its dropout on. */
static void test_linked_stages_follow_one_process(void **state)
{
    (void)state;
    hps_model *m = load("dlrm-small.json");
    hps_source *src = hps_source_synth(m, 64, 1, 7);
    linked_matches_local(m, src, 2, 0);
    linked_matches_local(m, src, 4, 0);
    src->close(src);
    hps_model_free(m);
    assert_int_equal(linked_every_cut("dcn-v2-parallel.json", 0), 7);
    assert_int_equal(linked_every_cut("dcn-v2-stacked.json", 1), 7);
    assert_int_equal(linked_every_cut("deepfm.json", 0), 8);
}

static void test_learns_planted_model(void **state)
{
    (void)state;
    hps_model *m = load("two-tables.json");
    hps_source *train = hps_source_synth(m, 16 * 400, 1, 11), *eval = hps_source_synth(m, 2000, 1, 12);
    plan_file p;
    hps_train_plan_single(m, &p);
    hps_train_opts o = hps_train_opts_default();
    o.epochs = 3;
    o.threads = 1;
    o.optim.lr_dense = 3e-3f;
    hps_error err;
    hps_trainer *t = hps_trainer_create(m, &p, &o, &err);
    hps_eval_result before, after;
    assert_int_equal(hps_trainer_eval(t, eval, &before, &err), 0);
    assert_int_equal(hps_trainer_run(t, train, eval, &err), 0);
    after = hps_trainer_summary(t)->eval;
    assert_int_equal(after.rows, 2000);
    print_message("# AUC %.3f -> %.3f, logloss %.3f -> %.3f\n", before.auc, after.auc, before.loss,
                  after.loss);
    assert_true(after.auc > before.auc + 0.1);
    assert_true(after.loss < before.loss);
    hps_trainer_free(t);
    train->close(train);
    eval->close(eval);
    hps_model_free(m);
}

static void test_auc(void **state)
{
    (void)state;
    float s1[4] = {0.1f, 0.4f, 0.35f, 0.8f}, y1[4] = {0, 0, 1, 1};
    assert_close(hps_auc(s1, y1, 4), 0.75, 1e-12, "auc", 0);
    float s2[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    assert_close(hps_auc(s2, y1, 4), 0.5, 1e-12, "auc ties", 0);
    float s3[3] = {0.2f, 0.9f, 0.7f}, y3[3] = {0, 1, 1};
    assert_close(hps_auc(s3, y3, 3), 1.0, 1e-12, "auc perfect", 0);
    /* a diverged model's NaN scores give NaN, not an endless loop */
    float s4[3] = {0.2f, NAN, 0.7f};
    assert_true(isnan(hps_auc(s4, y3, 3)));
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

static void train_steps(hps_trainer *t, hps_source *src, int from, int n)
{
    hps_error err;
    double loss;
    src->seek(src, (uint64_t)from * t->B, &err);
    for (int i = 0; i < n; i++) {
        assert_true(src->read(src, t->batch, t->B, &err) > 0);
        assert_int_equal(hps_trainer_step(t, t->batch, &loss, &err), 0);
        t->epoch_row = src->tell(src);
    }
}

static void assert_same_state(hps_trainer *a, hps_trainer *b)
{
    const hps_model *m = a->m;
    assert_memory_equal(a->owner->params, b->owner->params, m->n_params * sizeof(float));
    assert_memory_equal(a->owner->adam_v, b->owner->adam_v, m->n_params * sizeof(float));
    for (int l = 0; l < m->n_layers; l++) {
        if (!a->tables[l]) continue;
        assert_int_equal(hps_table_rows(a->tables[l]), hps_table_rows(b->tables[l]));
        assert_memory_equal(hps_table_weights(a->tables[l]), hps_table_weights(b->tables[l]),
                            (size_t)hps_table_rows(a->tables[l]) * m->layers[l].dim * sizeof(float));
    }
}

static void test_checkpoint_resume_is_bitwise(void **state)
{
    (void)state;
    char dir[] = "/tmp/hps-ckpt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    hps_model *m = load("dlrm-small.json");
    hps_source *src = hps_source_synth(m, 64 * 12, 1, 21);
    plan_file p;
    int cuts[1] = {4};
    plan_of(m, &p, cuts, 2);
    hps_error err;
    hps_trainer *straight = trainer(m, &p, 2), *first = trainer(m, &p, 2), *second = trainer(m, &p, 2);
    train_steps(straight, src, 0, 12);
    train_steps(first, src, 0, 5);
    assert_int_equal(hps_trainer_save(first, dir, &err), 0);
    int found = 0;
    assert_int_equal(hps_trainer_load(second, dir, &found, &err), 0);
    assert_true(found);
    assert_int_equal(second->step, 5);
    assert_int_equal(second->epoch_row, 5 * 64);
    train_steps(second, src, 5, 7);
    assert_same_state(straight, second);
    hps_trainer_free(straight);
    hps_trainer_free(first);
    hps_trainer_free(second);
    src->close(src);
    hps_model_free(m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_corrupt_checkpoint_is_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/hps-ckpt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    hps_model *m = load("tiny.json");
    hps_source *src = hps_source_synth(m, 80, 1, 2);
    plan_file p;
    hps_train_plan_single(m, &p);
    hps_trainer *t = trainer(m, &p, 1);
    train_steps(t, src, 0, 3);
    hps_error err;
    assert_int_equal(hps_trainer_save(t, dir, &err), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/ckpt-000000000003.hpsckpt", dir);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 100, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 100, SEEK_SET);
    fputc(c ^ 0x20, f);
    fclose(f);
    int found;
    assert_int_equal(hps_trainer_load(t, dir, &found, &err), -1);
    assert_non_null(strstr(err.msg, "checksum mismatch: the checkpoint is corrupted"));
    /* the digest covers the header too: each reserved byte (56..63), flipped
     * alone, is caught (they went unnoticed before) */
    f = fopen(path, "r+b");
    fseek(f, 100, SEEK_SET);
    fputc(c, f);
    for (int at = 56; at < 64; at++) {
        fseek(f, at, SEEK_SET);
        int r = fgetc(f);
        fseek(f, at, SEEK_SET);
        fputc(r ^ 0x01, f);
        fflush(f);
        assert_int_equal(hps_trainer_load_file(t, path, &err), -1);
        assert_non_null(strstr(err.msg, "checksum mismatch"));
        fseek(f, at, SEEK_SET);
        fputc(r, f);
        fflush(f);
    }
    fclose(f);
    assert_int_equal(hps_trainer_load_file(t, path, &err), 0);
    hps_trainer_free(t);
    src->close(src);
    hps_model_free(m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Checkpoint files written by hand: a header, then `frame` as the payload,
 * with the digest computed as hps-train does (the whole file, digest zeroed). */
static void write_ckpt(const char *path, uint64_t size, const void *frame, size_t frame_len)
{
    size_t n = 64 + frame_len;
    unsigned char *file = calloc(1, n);
    memcpy(file, "HPSCKPT2", 8);
    for (int i = 0; i < 8; i++) file[8 + i] = (unsigned char)(size >> (8 * i));
    for (int i = 0; i < 8; i++) file[16 + i] = (unsigned char)((uint64_t)frame_len >> (8 * i));
    memcpy(file + 64, frame, frame_len);
    hps_sha256(file, n, file + 24);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(file, 1, n, f), n);
    fclose(f);
    free(file);
}

/* A forged checkpoint (its digest recomputed) whose zstd frame carries no
 * content size and whose header claims 2^64-1 bytes: refused, not a 1-byte
 * buffer decompressed into (heap overflow under ASan before). */
static void test_forged_checkpoint_size_is_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/hps-ckpt-XXXXXX", path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ckpt-000000000001.hpsckpt", dir);
    char payload[4096];
    memset(payload, 'x', sizeof payload);
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
    char frame[8192];
    ZSTD_outBuffer out = {frame, sizeof frame, 0};
    ZSTD_inBuffer in = {payload, sizeof payload, 0};
    assert_int_equal(ZSTD_compressStream2(c, &out, &in, ZSTD_e_end), 0);
    ZSTD_freeCCtx(c);
    assert_true(ZSTD_getFrameContentSize(frame, out.pos) == ZSTD_CONTENTSIZE_UNKNOWN);
    write_ckpt(path, UINT64_MAX, frame, out.pos);
    hps_model *m = load("tiny.json");
    plan_file p;
    hps_train_plan_single(m, &p);
    hps_trainer *t = trainer(m, &p, 1);
    hps_error err;
    assert_int_equal(hps_trainer_load_file(t, path, &err), -1);
    assert_non_null(strstr(err.msg, "the header's size disagrees with its payload"));
    write_ckpt(path, (uint64_t)1 << 40, frame, out.pos); /* more than the frame can hold */
    assert_int_equal(hps_trainer_load_file(t, path, &err), -1);
    assert_non_null(strstr(err.msg, "the header's size disagrees with its payload"));
    hps_trainer_free(t);
    hps_model_free(m);
    unlink(path);
    rmdir(dir);
}

/* An export reads back whole; a truncated file, an impossible header length,
 * offsets that leave a gap and a flipped data byte (against FILE.sha256) are
 * each refused. */
static void test_export_reads_back(void **state)
{
    (void)state;
    char dir[] = "/tmp/hps-export-XXXXXX", path[256], cmd[300];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    hps_model *m = load("tiny.json");
    hps_source *src = hps_source_synth(m, 80, 1, 2);
    plan_file p;
    hps_train_plan_single(m, &p);
    hps_trainer *t = trainer(m, &p, 1);
    train_steps(t, src, 0, 3);
    hps_error err;
    assert_int_equal(hps_trainer_export(t, path, &err), 0);
    int n = 0;
    assert_int_equal(hps_safetensors_verify(path, &n, &err), 0);
    assert_true(n >= 4); /* two fc layers' weight and bias, and the tables */
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    unsigned char *buf = malloc(len);
    fseek(f, 0, SEEK_SET);
    assert_int_equal(fread(buf, 1, len, f), len);
    fclose(f);
    assert_int_equal(hps_safetensors_check("x", buf, len, &n, &err), 0);
    assert_int_equal(hps_safetensors_check("x", buf, len - 1, &n, &err), -1);
    assert_non_null(strstr(err.msg, "the tensors end at byte"));
    unsigned char h0 = buf[7];
    buf[7] = 0x40; /* a header of 2^62 bytes */
    assert_int_equal(hps_safetensors_check("x", buf, len, &n, &err), -1);
    assert_string_equal(err.msg, "x: not a safetensors file, or truncated");
    buf[7] = h0;
    char *off = strstr((char *)buf + 8, "\"data_offsets\":[0,");
    assert_non_null(off);
    off[16] = '1'; /* the first tensor starts at byte 1 (the header's JSON keeps its length) */
    assert_int_equal(hps_safetensors_check("x", buf, len, &n, &err), -1);
    assert_non_null(strstr(err.msg, "x: tensor"));
    f = fopen(path, "r+b");
    fseek(f, (long)len - 2, SEEK_SET);
    fputc(buf[len - 2] ^ 0x10, f);
    fclose(f);
    assert_int_equal(hps_safetensors_verify(path, &n, &err), -1);
    assert_non_null(strstr(err.msg, "m.safetensors.sha256: the file is corrupted"));
    free(buf);
    hps_trainer_free(t);
    src->close(src);
    hps_model_free(m);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A run whose loss turns to NaN or inf stops with an error naming the step
 * (it exited 0 with a NaN loss before). */
static void test_diverged_run_stops(void **state)
{
    (void)state;
    hps_model *m = load("tiny.json");
    hps_source *src = hps_source_synth(m, 8 * 200, 1, 4);
    plan_file p;
    hps_train_plan_single(m, &p);
    hps_train_opts o = hps_train_opts_default();
    o.threads = 1;
    o.optim.dense = HPS_OPTIM_SGD;
    o.optim.lr_dense = 3e38f; /* beyond what the CLI accepts: weights overflow in a few steps */
    hps_error err;
    hps_trainer *t = hps_trainer_create(m, &p, &o, &err);
    assert_non_null(t);
    int rc = hps_trainer_run(t, src, NULL, &err);
    assert_int_equal(rc, -1);
    print_message("# %s\n", err.msg);
    assert_non_null(strstr(err.msg, "training diverged"));
    assert_true(strncmp(err.msg, "step ", 5) == 0);
    assert_true(hps_trainer_summary(t)->steps == 0); /* it stopped inside the loop */
    hps_trainer_free(t);
    src->close(src);
    hps_model_free(m);
}

/* Evaluation reads the tables without adding rows: unseen keys read zeros. */
static void test_eval_adds_no_rows(void **state)
{
    (void)state;
    hps_model *m = load("tiny.json");
    hps_source *train = hps_source_synth(m, 64, 1, 1), *eval = hps_source_synth(m, 400, 1, 2);
    plan_file p;
    hps_train_plan_single(m, &p);
    hps_trainer *t = trainer(m, &p, 1);
    hps_error err;
    train_steps(t, train, 0, 8);
    int64_t rows = hps_table_rows(t->tables[0]);
    hps_eval_result r;
    assert_int_equal(hps_trainer_eval(t, eval, &r, &err), 0);
    assert_int_equal(r.rows, 400);
    assert_int_equal(hps_table_rows(t->tables[0]), rows);
    assert_true(r.auc == r.auc);
    hps_trainer_free(t);
    train->close(train);
    eval->close(eval);
    hps_model_free(m);
}

/* A plan of two stages, the first holding both tables of two-tables.json
 * (dims 6 and 4) with `rows` (a cache of cache_rows rows). */
static void rows_plan(const hps_model *m, plan_file *p, const char *rows, long long cache_rows)
{
    int cuts[1] = {2};
    plan_of(m, p, cuts, 2);
    snprintf(p->stages[0].rows, sizeof p->stages[0].rows, "%s", rows);
    p->stages[0].cache_rows = cache_rows;
}

static void assert_same_rows_stats(const hps_trainer *a, const hps_trainer *b)
{
    const train_rows_stats *x = train_rows_stats_of(a->stage_rows[0]), *y = train_rows_stats_of(b->stage_rows[0]);
    assert_true(x->lookups == y->lookups && x->hits == y->hits && x->misses == y->misses &&
                x->write_backs == y->write_backs);
}

/* Rows in the backend's memory, all of them or a cache of a few over two
 * layers, train bit for bit as host tables: the same values, updated by the
 * same float operations in the same order (three micro-batches summed). */
static void test_device_rows_match_host_tables(void **state)
{
    (void)state;
    hps_model *m = load("two-tables.json");
    hps_source *src = hps_source_synth(m, 64 * 10, 1, 5), *eval = hps_source_synth(m, 300, 1, 6);
    plan_file host, hbm, cache;
    rows_plan(m, &host, "servers", 0);
    rows_plan(m, &hbm, "hbm", 0);
    rows_plan(m, &cache, "cache", 24);
    hps_trainer *h = trainer(m, &host, 3), *d = trainer(m, &hbm, 3), *c = trainer(m, &cache, 3);
    assert_null(h->stage_rows[0]);
    assert_non_null(d->stage_rows[0]);
    double lh[10], ld[10], lc[10];
    losses(h, src, lh, 10);
    losses(d, src, ld, 10);
    losses(c, src, lc, 10);
    assert_memory_equal(lh, ld, sizeof lh);
    assert_memory_equal(lh, lc, sizeof lh);
    train_rows_sync(d), train_rows_sync(c); /* the host tables as trained */
    assert_same_state(h, d);
    assert_same_state(h, c);
    const train_rows_stats *st = train_rows_stats_of(c->stage_rows[0]);
    assert_true(st->write_backs > 0 && st->hits > 0 && st->hits < st->lookups);
    assert_true(st->misses - st->write_backs <= 24); /* what stays cached fits */
    hps_eval_result rh, rc;
    hps_error err;
    assert_int_equal(hps_trainer_eval(h, eval, &rh, &err), 0);
    assert_int_equal(hps_trainer_eval(c, eval, &rc, &err), 0);
    assert_true(rh.loss == rc.loss && rh.auc == rc.auc);
    assert_int_equal(hps_table_rows(c->tables[0]), hps_table_rows(h->tables[0]));
    hps_trainer_free(h), hps_trainer_free(d), hps_trainer_free(c);
    src->close(src), eval->close(eval);
    hps_model_free(m);
}

/* A checkpoint keeps the cache's counts and contents: a resumed trainer
 * follows a straight one, its statistics too. */
static void test_cache_resumes_warm(void **state)
{
    (void)state;
    char dir[] = "/tmp/hps-ckpt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    hps_model *m = load("two-tables.json");
    hps_source *src = hps_source_synth(m, 64 * 12, 1, 7);
    plan_file p;
    rows_plan(m, &p, "cache", 30);
    hps_trainer *straight = trainer(m, &p, 2), *first = trainer(m, &p, 2), *second = trainer(m, &p, 2);
    train_steps(straight, src, 0, 12);
    train_steps(first, src, 0, 5);
    hps_error err;
    assert_int_equal(hps_trainer_save(first, dir, &err), 0);
    int found = 0;
    assert_int_equal(hps_trainer_load(second, dir, &found, &err), 0);
    assert_true(found);
    assert_same_rows_stats(first, second);
    train_steps(second, src, 5, 7);
    assert_same_rows_stats(straight, second);
    train_rows_sync(straight), train_rows_sync(second);
    assert_same_state(straight, second);
    hps_trainer_free(straight), hps_trainer_free(first), hps_trainer_free(second);
    src->close(src);
    hps_model_free(m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}


/* The cache's rule (train_rows.h) kept the plain way: every row's count and
 * stamp, and on a miss into a full cache a scan for the least (count,
 * stamp) of the cached rows the step has not used.  Beside its counts, the
 * rows it evicts, written down in order at each ref_prepare as the cache
 * writes them back at each train_rows_prepare (log). */
enum { REF_LAYERS = 4, REF_ROWS = 160, REF_LOG = 1 << 16 };
typedef struct {
    uint64_t count[REF_LAYERS][REF_ROWS], stamp[REF_LAYERS][REF_ROWS], touched[REF_LAYERS][REF_ROWS];
    int cached[REF_LAYERS][REF_ROWS], staged[REF_LAYERS][REF_ROWS];
    uint64_t seq, step, n_cached, capacity;
    train_rows_stats st;
    int64_t evicted[REF_LAYERS][REF_ROWS], n_evicted[REF_LAYERS]; /* since the last ref_prepare */
    int64_t log[REF_LOG][2], n_log;
} ref_cache;

static void log_row(int64_t log[][2], int64_t *n, int l, int64_t row)
{
    assert_true(*n < REF_LOG);
    log[*n][0] = l, log[*n][1] = row;
    (*n)++;
}

static void ref_lookup(ref_cache *c, int l, int64_t row)
{
    c->count[l][row]++;
    c->stamp[l][row] = ++c->seq;
    c->st.lookups++;
    if (c->touched[l][row] == c->step + 1) {
        c->st.hits += !c->staged[l][row];
        return;
    }
    c->touched[l][row] = c->step + 1;
    if (c->cached[l][row]) {
        c->st.hits++;
        return;
    }
    c->st.misses++;
    int vl = -1;
    int64_t vr = -1;
    for (int k = 0; k < REF_LAYERS && c->n_cached == c->capacity; k++)
        for (int64_t i = 0; i < REF_ROWS; i++) {
            if (!c->cached[k][i] || c->touched[k][i] == c->step + 1) continue;
            if (vl < 0 || c->count[k][i] < c->count[vl][vr] ||
                (c->count[k][i] == c->count[vl][vr] && c->stamp[k][i] < c->stamp[vl][vr]))
                vl = k, vr = i;
        }
    if (vl >= 0 && c->count[l][row] > c->count[vl][vr]) {
        c->cached[vl][vr] = 0;
        c->n_cached--;
        c->st.write_backs++;
        assert_true(c->n_evicted[vl] < REF_ROWS);
        c->evicted[vl][c->n_evicted[vl]++] = vr;
    }
    if (c->n_cached == c->capacity) {
        c->staged[l][row] = 1;
        return;
    }
    c->cached[l][row] = 1;
    c->n_cached++;
}

/* The rows evicted since the last one, layer by layer, into the log. */
static void ref_prepare(ref_cache *c)
{
    for (int l = 0; l < REF_LAYERS; l++) {
        for (int64_t i = 0; i < c->n_evicted[l]; i++) log_row(c->log, &c->n_log, l, c->evicted[l][i]);
        c->n_evicted[l] = 0;
    }
}

static void ref_step_end(ref_cache *c)
{
    for (int k = 0; k < REF_LAYERS; k++)
        for (int64_t i = 0; i < REF_ROWS; i++) c->st.write_backs += (uint64_t)c->staged[k][i], c->staged[k][i] = 0;
    c->step++;
}

/* The rows' records (count, stamp, cached) of r's two layers as
 * train_rows_save writes them, layer by layer into rec (at most cap): n[l]
 * of layer l. */
static void saved_rows(const train_rows *r, int64_t n[2], uint64_t (*rec)[3], int64_t cap)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(train_rows_save(r, f), 0);
    rewind(f);
    uint32_t magic;
    uint64_t head[6];
    int64_t at = 0;
    assert_int_equal(fread(&magic, sizeof magic, 1, f), 1);
    assert_int_equal(fread(head, sizeof *head, 6, f), 6);
    for (int l = 0; l < 2; l++) {
        assert_int_equal(fread(&n[l], sizeof n[l], 1, f), 1);
        for (int64_t i = 0; i < n[l]; i++, at++) {
            assert_true(at < cap);
            assert_int_equal(fread(rec[at], sizeof *rec[at], 3, f), 3);
        }
    }
    fclose(f);
}

/* What train_rows_save says of each row (count, stamp, cached) equals c's. */
static void assert_rows_as_ref(const train_rows *r, const ref_cache *c, hps_table **tables)
{
    int64_t n[2];
    uint64_t(*recs)[3] = hps_malloc(2 * REF_ROWS * sizeof *recs);
    saved_rows(r, n, recs, 2 * REF_ROWS);
    const uint64_t(*rec)[3] = recs;
    for (int l = 0; l < 2; l++) {
        assert_true(n[l] == hps_table_rows(tables[l]) && n[l] <= REF_ROWS);
        for (int64_t i = 0; i < n[l]; i++, rec++)
            if ((*rec)[0] != c->count[l][i] || (*rec)[1] != c->stamp[l][i] || (int)(*rec)[2] != c->cached[l][i])
                fail_msg("step %llu: layer %d row %lld: (%llu, %llu, cached %llu), the rule's (%llu, %llu, %d)",
                         (unsigned long long)c->step, l, (long long)i, (unsigned long long)(*rec)[0],
                         (unsigned long long)(*rec)[1], (unsigned long long)(*rec)[2],
                         (unsigned long long)c->count[l][i], (unsigned long long)c->stamp[l][i], c->cached[l][i]);
    }
    free(recs);
}

/* The cache evicts, stages and keeps exactly the rows its rule names, lookup
 * by lookup: a stream over two layers with ties of count (stamps decide),
 * keys repeated within a step, a cache full mid-step, and rows the step
 * used kept out of its eviction order until the step ends. */
static void test_cache_evicts_by_its_rule(void **state)
{
    (void)state;
    hps_model *m = load("two-tables.json");
    uint64_t x = 0x9e3779b97f4a7c15ull, evicted = 0, staged = 0;
    hps_error err;
    /* an LFU cache churns while its counts are young: many short runs */
    for (int run = 0; run < 20; run++) {
        hps_table *tables[2];
        for (int l = 0; l < 2; l++) tables[l] = hps_table_create(l, m->layers[l].dim, 0, HPS_TABLE_FULL_ERROR, 7);
        ref_cache *c = hps_calloc(1, sizeof *c);
        c->capacity = run % 2 ? 40 : 6; /* a heap of a few levels, and of several */
        train_rows *r = train_rows_create(hps_backend_cpu(), m, tables, 0, 2, (int64_t)c->capacity);
        for (uint64_t step = 0; step < 40; step++) {
            for (int k = 0; k < 32; k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                unsigned u = (unsigned)(x >> 20) % 100;
                /* 6 or 24 hot keys of twice as many a layer, which ones moving
                 * every 5 steps; 40 rare */
                uint64_t hot = c->capacity < 10 ? 6 : 24;
                uint64_t key = u < 80 ? (u % hot + step / 5) % (2 * hot) : 2 * hot + u % 40;
                int l = (int)(x >> 40) & 1;
                int64_t row = hps_table_lookup(tables[l], 0, key, step, &err);
                assert_true(row >= 0 && row < REF_ROWS);
                train_rows_map(r, l, row, 0);
                ref_lookup(c, l, row);
                const train_rows_stats *st = train_rows_stats_of(r);
                if (st->hits != c->st.hits || st->misses != c->st.misses || st->write_backs != c->st.write_backs)
                    fail_msg("run %d step %llu lookup %d: hits %llu misses %llu write-backs %llu, the rule's "
                             "%llu %llu %llu", run, (unsigned long long)step, k, (unsigned long long)st->hits,
                             (unsigned long long)st->misses, (unsigned long long)st->write_backs,
                             (unsigned long long)c->st.hits, (unsigned long long)c->st.misses,
                             (unsigned long long)c->st.write_backs);
            }
            uint64_t before = c->st.write_backs;
            ref_step_end(c);
            staged += c->st.write_backs - before;
            train_rows_prepare(r);
            ref_prepare(c);
            train_rows_step_end(r, 1);
            assert_true(train_rows_stats_of(r)->write_backs == c->st.write_backs);
            assert_rows_as_ref(r, c, tables);
        }
        evicted += c->st.write_backs;
        train_rows_free(r);
        free(c);
        for (int l = 0; l < 2; l++) hps_table_free(tables[l]);
    }
    evicted -= staged;
    /* the stream reached every case: rows evicted and rows staged */
    print_message("# %llu rows evicted, %llu staged\n", (unsigned long long)evicted, (unsigned long long)staged);
    assert_true(evicted > 200 && staged > 200);
    hps_model_free(m);
}

/* The victims by brute force (ref_cache), in the order the cache writes
 * rows back: the evicted rows of each layer at each train_rows_prepare, the
 * staged ones at each step's end.  Three layers of tables (and one without,
 * the second), their rows named (layer, row) in one log as the home sees
 * them. */
/* The home of the cache under test: its host tables hold the values, so
 * it only writes down what is put back. */
typedef struct {
    hps_table **tables;
    int64_t log[REF_LOG][2], n_log;
} logging_home;

static void logging_get(void *ctx, hps_table *host, int layer, const int64_t *rows, int64_t n)
{
    (void)ctx, (void)host, (void)layer, (void)rows, (void)n;
}

static void logging_put(void *ctx, hps_table *host, int layer, const int64_t *rows, int64_t n)
{
    logging_home *h = ctx;
    assert_ptr_equal(host, h->tables[layer]);
    for (int64_t i = 0; i < n; i++) log_row(h->log, &h->n_log, layer, rows[i]);
}

static void assert_same_log(const logging_home *h, const ref_cache *c, const char *when)
{
    for (int64_t i = 0; i < h->n_log || i < c->n_log; i++)
        if (i >= h->n_log || i >= c->n_log || h->log[i][0] != c->log[i][0] || h->log[i][1] != c->log[i][1])
            fail_msg("step %llu %s: write-back %lld is (%lld, %lld), the rule's (%lld, %lld)",
                     (unsigned long long)c->step, when, (long long)i, i < h->n_log ? (long long)h->log[i][0] : -1,
                     i < h->n_log ? (long long)h->log[i][1] : -1, i < c->n_log ? (long long)c->log[i][0] : -1,
                     i < c->n_log ? (long long)c->log[i][1] : -1);
}

/* The rows the step staged go back in the order they were staged. */
static void log_staged(ref_cache *c, const int64_t staged_order[][2], int64_t n)
{
    for (int l = 0; l < REF_LAYERS; l++)
        for (int64_t i = 0; i < n; i++)
            if (staged_order[i][0] == l) log_row(c->log, &c->n_log, l, staged_order[i][1]);
}

/* The cache writes back exactly the rows its rule names, in order, on a
 * stream made to reach every turn of its eviction order: three layers,
 * hot rows looked up several times a step (counts jumping), a ring of rows
 * looked up once a turn (counts tied, stamps deciding), rare rows coming
 * back to be admitted below every count the cache holds, evaluation
 * batches between steps, and a checkpoint saved and loaded mid-stream
 * (the order rebuilt from the counts and stamps). */
static void test_cache_victims_by_brute_force(void **state)
{
    (void)state;
    hps_layer layers[REF_LAYERS] = {{.dim = 3}, {.dim = 0}, {.dim = 5}, {.dim = 2}};
    hps_model m = {.n_layers = REF_LAYERS, .layers = layers};
    uint64_t x = 0x2545f4914f6cdd1dull;
    hps_error err;
    for (int run = 0; run < 6; run++) {
        hps_table *tables[REF_LAYERS] = {0};
        for (int l = 0; l < REF_LAYERS; l++)
            if (layers[l].dim) tables[l] = hps_table_create(l, layers[l].dim, 0, HPS_TABLE_FULL_ERROR, 11);
        ref_cache *c = hps_calloc(1, sizeof *c);
        logging_home *home = hps_calloc(1, sizeof *home);
        home->tables = tables;
        c->capacity = (uint64_t[]){5, 12, 30}[run % 3];
        train_rows_home hh = {home, logging_get, logging_put};
        train_rows *r = train_rows_create(hps_backend_cpu(), &m, tables, 0, REF_LAYERS, (int64_t)c->capacity);
        train_rows_set_home(r, &hh);
        int64_t(*staged)[2] = hps_malloc(REF_ROWS * REF_LAYERS * sizeof *staged), n_staged = 0;
        for (uint64_t step = 0; step < 60; step++) {
            for (int k = 0; k < 40; k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                unsigned u = (unsigned)(x >> 24) % 100, pick = (unsigned)(x >> 8);
                int l = (int[]){0, 2, 3}[pick % 3];
                uint64_t key;
                if (u < 45) key = pick % 4 + step / 15 * 4;              /* hot, moving every 15 steps */
                else if (u < 75) key = 100 + (step * 3 + (uint64_t)k % 3) % 24; /* the ring: once a turn */
                else key = 200 + pick % 40 + (run & 1 ? 0 : step / 20 * 20); /* rare */
                int64_t row = hps_table_lookup(tables[l], 0, key, step, &err);
                assert_true(row >= 0 && row < REF_ROWS);
                /* a hot row again, at once: several lookups of it in a step */
                for (int rep = 0; rep < (u < 45 ? 1 + (int)(pick >> 12) % 3 : 1); rep++) {
                    int was = c->staged[l][row] || c->cached[l][row] || c->touched[l][row] == c->step + 1;
                    train_rows_map(r, l, row, 0);
                    ref_lookup(c, l, row);
                    if (!was && c->staged[l][row]) staged[n_staged][0] = l, staged[n_staged++][1] = row;
                }
                if (k % 13 == 12) { /* several loads a step: their evictions logged at each */
                    train_rows_prepare(r);
                    ref_prepare(c);
                    assert_same_log(home, c, "prepare");
                }
            }
            train_rows_prepare(r);
            ref_prepare(c);
            assert_same_log(home, c, "prepare");
            train_rows_step_end(r, 1);
            log_staged(c, (const int64_t(*)[2])staged, n_staged);
            ref_step_end(c);
            n_staged = 0;
            assert_same_log(home, c, "step end");
            if (step % 7 == 3) { /* an evaluation batch: reads, counts and moves nothing */
                for (int k = 0; k < 12; k++) {
                    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                    int l = (int[]){0, 2, 3}[x % 3];
                    int64_t row = hps_table_lookup(tables[l], 0, (x >> 16) % 260, step, &err);
                    assert_true(row >= 0 && row < REF_ROWS);
                    train_rows_map(r, l, row, 1);
                }
                train_rows_prepare(r);
                train_rows_step_end(r, 0);
                assert_same_log(home, c, "evaluation");
            }
            if (step == 31) { /* a checkpoint: a new cache takes the old one's counts */
                FILE *f = tmpfile();
                assert_non_null(f);
                train_rows_flush(r); /* every cached row to the home, in row order */
                for (int l = 0; l < REF_LAYERS; l++)
                    for (int64_t i = 0; i < REF_ROWS; i++)
                        if (c->cached[l][i]) log_row(c->log, &c->n_log, l, i);
                assert_same_log(home, c, "flush");
                assert_int_equal(train_rows_save(r, f), 0);
                train_rows_stats before = *train_rows_stats_of(r);
                train_rows_free(r);
                rewind(f);
                r = train_rows_create(hps_backend_cpu(), &m, tables, 0, REF_LAYERS, (int64_t)c->capacity);
                train_rows_set_home(r, &hh);
                assert_int_equal(train_rows_load(r, f, &err, "ckpt"), 0);
                fclose(f);
                assert_memory_equal(train_rows_stats_of(r), &before, sizeof before);
                assert_same_log(home, c, "load");
            }
        }
        const train_rows_stats *st = train_rows_stats_of(r);
        assert_true(st->write_backs > st->misses / 4); /* a cache that churned */
        print_message("# run %d: %lld rows written back\n", run, (long long)c->n_log);
        train_rows_free(r);
        free(staged), free(home), free(c);
        for (int l = 0; l < REF_LAYERS; l++) hps_table_free(tables[l]);
    }
}

/* The rows' (count, cached) of r as train_rows_save writes them, layer by
 * layer: two caches that took the same lookups compare equal. */
static void rows_counts(const train_rows *r, uint64_t *out, int64_t cap)
{
    int64_t n[2];
    uint64_t(*rec)[3] = hps_malloc((size_t)(cap / 2 + 1) * sizeof *rec);
    saved_rows(r, n, rec, cap / 2);
    for (int64_t i = 0; i < n[0] + n[1]; i++) out[2 * i] = rec[i][0], out[2 * i + 1] = rec[i][2];
    free(rec);
}

/* A shard's owner reads a key for a worker's n lookups of it
 * (train_rows_read's lookups, under mpirun): the cache counts them, hits,
 * misses, evicts and stages as n lookups in a row (train_rows_map) would,
 * so that its statistics and its order are those of the lookups, not of
 * the reads.  Keys repeat within a step (two workers' reads of a row), and
 * counts tie. */
static void test_cache_read_counts_each_lookup(void **state)
{
    (void)state;
    hps_model *m = load("two-tables.json");
    uint64_t x = 0x2545f4914f6cdd1dull, weighted = 0, staged = 0;
    hps_error err;
    enum { KEYS = 24, CAP = 2 * 2 * 128 };
    for (int run = 0; run < 8; run++) {
        hps_table *ta[2], *tb[2];
        for (int l = 0; l < 2; l++) {
            ta[l] = hps_table_create(l, m->layers[l].dim, 0, HPS_TABLE_FULL_ERROR, 7);
            tb[l] = hps_table_create(l, m->layers[l].dim, 0, HPS_TABLE_FULL_ERROR, 7);
        }
        int64_t capacity = run % 2 ? 30 : 5;
        train_rows *a = train_rows_create(hps_backend_cpu(), m, ta, 0, 2, capacity);
        train_rows *b = train_rows_create(hps_backend_cpu(), m, tb, 0, 2, capacity);
        for (uint64_t step = 1; step <= 30; step++) {
            hps_row_key keys[KEYS];
            uint32_t lookups[KEYS];
            float out[KEYS * 6];
            for (int i = 0; i < KEYS; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                unsigned u = (unsigned)(x >> 20) % 100;
                uint64_t hot = (uint64_t)capacity + 2;
                keys[i] = (hps_row_key){.layer = (int32_t)((x >> 40) & 1), .slot = 0,
                                        .key = u < 70 ? (u + step / 4) % hot : hot + u % 50};
                lookups[i] = 1 + (uint32_t)((x >> 50) % 4); /* 1 to 4 */
                weighted += lookups[i] > 1;
            }
            assert_int_equal(train_rows_read(a, keys, lookups, KEYS, step, out, &err), 0);
            for (int i = 0; i < KEYS; i++) {
                int64_t row = hps_table_lookup(tb[keys[i].layer], keys[i].slot, keys[i].key, step, &err);
                assert_true(row >= 0);
                for (uint32_t k = 0; k < lookups[i]; k++) train_rows_map(b, keys[i].layer, row, 0);
            }
            train_rows_prepare(b);
            train_rows_step_end(a, 1), train_rows_step_end(b, 1);
            const train_rows_stats *sa = train_rows_stats_of(a), *sb = train_rows_stats_of(b);
            if (memcmp(sa, sb, sizeof *sa))
                fail_msg("run %d step %llu: read: lookups %llu hits %llu misses %llu write-backs %llu, one by "
                         "one: %llu %llu %llu %llu", run, (unsigned long long)step,
                         (unsigned long long)sa->lookups, (unsigned long long)sa->hits,
                         (unsigned long long)sa->misses, (unsigned long long)sa->write_backs,
                         (unsigned long long)sb->lookups, (unsigned long long)sb->hits,
                         (unsigned long long)sb->misses, (unsigned long long)sb->write_backs);
            uint64_t ca[CAP] = {0}, cb[CAP] = {0};
            rows_counts(a, ca, CAP), rows_counts(b, cb, CAP);
            assert_memory_equal(ca, cb, sizeof ca);
        }
        staged += train_rows_stats_of(a)->write_backs;
        train_rows_free(a), train_rows_free(b);
        for (int l = 0; l < 2; l++) hps_table_free(ta[l]), hps_table_free(tb[l]);
    }
    /* the stream reached the cases: weighted reads, rows written back */
    assert_true(weighted > 1000 && staged > 100);
    hps_model_free(m);
}

/* The probe times each thread count on batches no earlier count read, as a
 * run meets new keys: a pass over batches read before finds their rows in
 * the tables already (dlrm-criteo's engine took 0.44 ms a step so, 0.70 on
 * new batches, where a run took 0.68-0.92; Xeon family 6 model 207). */
static void test_probe_reads_new_batches(void **state)
{
    (void)state;
    hps_model *m = load("tiny.json");
    hps_source *src = hps_source_synth(m, 8 * 200, 1, 4);
    plan_file p;
    hps_train_plan_single(m, &p);
    hps_trainer *t = trainer_threads(m, &p, 1, 2);
    hps_error err;
    json_t *doc = hps_trainer_probe(t, src, 3, &err);
    assert_non_null(doc);
    assert_int_equal(src->tell(src), 2 * 3 * t->B); /* 1 thread, then 2: 3 steps each */
    json_decref(doc);
    hps_trainer_free(t);
    src->close(src);
    hps_model_free(m);
}


/* ---- admission and expiry (issue 32) ---------------------------------------------- */

/* A key gets a row on its Nth lookup, never before; until then it reads the
 * zero row, and a step's gradient on the zero row leaves it at zeros. */
static void test_table_admits_after_n_lookups(void **state)
{
    (void)state;
    hps_error err;
    hps_table *t = hps_table_create(0, 4, 0, HPS_TABLE_FULL_ERROR, 7);
    hps_table_set_admission(t, 3);
    int64_t zero = hps_table_zero_row(t);
    assert_int_equal(hps_table_lookup(t, 0, 11, 1, &err), zero); /* 11: 1st */
    assert_int_equal(hps_table_lookup(t, 0, 22, 1, &err), zero); /* 22: 1st */
    assert_int_equal(hps_table_lookup(t, 0, 11, 1, &err), zero); /* 11: 2nd */
    assert_int_equal(hps_table_lookup(t, 1, 11, 1, &err), zero); /* another slot: its own count */
    assert_int_equal(hps_table_rows(t), 0);
    assert_int_equal(hps_table_find(t, 0, 11), -1);
    /* the zero row's gradient is dropped */
    int64_t rows[] = {zero};
    float grad[] = {1, 2, 3, 4};
    hps_sparse_grad g = {.n = 1, .cap = 1, .D = 4, .rows = rows, .grad = grad}, *parts[] = {&g}, *sum = NULL;
    hps_table_apply(t, parts, 1, &sum, 0.1f, 1e-8f);
    for (int d = 0; d < 4; d++) assert_true(hps_table_weights(t)[zero * 4 + d] == 0.0f);
    /* 11: 3rd: admitted, its row made, but this load reads zeros for it
     * to the end (every lookup of a key in a load reads the same values,
     * as a server answers a worker's load) */
    hps_table_stage_begin(t);
    assert_int_equal(hps_table_lookup(t, 0, 11, 2, &err), zero);
    assert_int_equal(hps_table_rows(t), 1);
    int64_t r = hps_table_find(t, 0, 11);
    assert_true(r >= 0 && r != zero);
    assert_int_equal(hps_table_lookup(t, 0, 11, 2, &err), zero);
    assert_int_equal(hps_table_recall(t, 0, 11), zero);
    assert_int_equal(hps_table_recall(t, 0, 22), zero); /* a candidate: zeros, and not counted */
    hps_table_apply(t, parts, 1, &sum, 0.1f, 1e-8f);     /* the step ends: the next load reads the row */
    assert_int_equal(hps_table_lookup(t, 0, 11, 3, &err), r);
    assert_int_equal(hps_table_recall(t, 0, 11), r);
    assert_int_equal(hps_table_lookup(t, 0, 22, 3, &err), zero); /* 22: 2nd (recall counted nothing) */
    /* the admitted row starts from the key's own initial values */
    hps_table *plain = hps_table_create(0, 4, 0, HPS_TABLE_FULL_ERROR, 7);
    int64_t p = hps_table_lookup(plain, 0, 11, 1, &err);
    assert_memory_equal(hps_table_weights(t) + r * 4, hps_table_weights(plain) + p * 4, 4 * sizeof(float));
    uint64_t lookups, admitted;
    hps_table_lookups(t, &lookups, &admitted);
    assert_int_equal(lookups, 8);
    assert_int_equal(admitted, 1);
    /* many keys seen twice: none gets a row (a full bucket loses counts, never adds) */
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t k = 1000; k < 300000; k++) assert_int_equal(hps_table_lookup(t, 2, k, 3, &err), hps_table_zero_row(t));
    assert_int_equal(hps_table_rows(t), 1);
    /* the counts come out of the cap */
    hps_table *capped = hps_table_create(0, 4, 4u << 20, HPS_TABLE_FULL_ERROR, 7);
    int64_t all = hps_table_max_rows(capped);
    hps_table_set_admission(capped, 2);
    assert_true(hps_table_max_rows(capped) < all);
    hps_sparse_grad_free(sum);
    hps_table_free(capped);
    hps_table_free(plain);
    hps_table_free(t);
}

/* A new day removes the rows untouched for D days; an expired key that
 * comes back is a new row (its initial values, not its trained ones). */
static void test_table_expiry_by_days(void **state)
{
    (void)state;
    hps_error err;
    hps_table *t = hps_table_create(0, 2, 0, HPS_TABLE_FULL_ERROR, 7);
    int64_t a = hps_table_lookup(t, 0, 1, 1, &err), b = hps_table_lookup(t, 0, 2, 1, &err);
    float init_b[2];
    memcpy(init_b, hps_table_weights(t) + b * 2, sizeof init_b);
    hps_table_weights(t)[b * 2] = 9.0f; /* trained */
    assert_int_equal(hps_table_start_day(t, 2, 1), 0); /* day 1's rows are one day old */
    hps_table_lookup(t, 0, 1, 2, &err);                 /* day 2 touches key 1 only */
    assert_int_equal(hps_table_start_day(t, 3, 1), 1);   /* key 2: untouched on day 2 */
    assert_int_equal(hps_table_rows(t), 1);
    assert_int_equal(hps_table_expired(t), 1);
    hps_table_stats st; /* what the metrics report, and a server sends its lead */
    hps_table_stats_get(t, &st);
    assert_true(st.rows == 1 && st.expired == 1 && st.day_expired == 1);
    assert_int_equal(hps_table_find(t, 0, 1), a);
    assert_int_equal(hps_table_find(t, 0, 2), -1);
    int64_t again = hps_table_lookup(t, 0, 2, 3, &err);
    assert_int_equal(hps_table_rows(t), 2);
    assert_memory_equal(hps_table_weights(t) + again * 2, init_b, sizeof init_b);
    /* no expiry: days only stamp */
    assert_int_equal(hps_table_start_day(t, 30, 0), 0);
    assert_int_equal(hps_table_rows(t), 2);
    /* the day's figure is the last day's start alone; the servers' add up */
    hps_table_stats sum = st;
    hps_table_stats_get(t, &st);
    assert_true(st.rows == 2 && st.expired == 1 && st.day_expired == 0 && st.lookups == 4);
    hps_table_stats_add(&sum, &st);
    assert_true(sum.rows == 3 && sum.expired == 2 && sum.day_expired == 1 && sum.lookups == 7);
    hps_table_free(t);
}

/* Days and admission counts go through a checkpoint: the loaded table
 * expires and admits as the saved one would. */
static void test_table_save_load_days_and_counts(void **state)
{
    (void)state;
    hps_error err;
    hps_table *a = hps_table_create(0, 2, 0, HPS_TABLE_FULL_ERROR, 7);
    hps_table_set_admission(a, 2);
    for (uint64_t k = 0; k < 50; k++) hps_table_lookup(a, 0, k, 1, &err); /* candidates */
    for (uint64_t k = 0; k < 20; k++) hps_table_lookup(a, 0, k, 1, &err); /* 0..19 admitted */
    hps_table_start_day(a, 2, 0);
    for (uint64_t k = 0; k < 5; k++) hps_table_lookup(a, 0, k, 2, &err);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(hps_table_save(a, f), 0);
    fclose(f);
    hps_table *b = hps_table_create(0, 2, 0, HPS_TABLE_FULL_ERROR, 7);
    hps_table_set_admission(b, 2);
    f = fmemopen(buf, len, "rb");
    assert_int_equal(hps_table_load(b, f, (const int[]){0}, 1, &err, "mem"), 0);
    fclose(f);
    assert_int_equal(hps_table_rows(b), 20);
    hps_table_start_day(b, 2, 0); /* the day is the checkpoint's, as the trainer sets it */
    uint64_t la, aa, lb, ab;
    hps_table_lookups(a, &la, &aa);
    hps_table_lookups(b, &lb, &ab);
    assert_int_equal(la, lb);
    assert_int_equal(aa, ab);
    /* key 30 was seen once: its next lookup admits it in both */
    assert_int_equal(hps_table_lookup(b, 0, 30, 3, &err), hps_table_lookup(a, 0, 30, 3, &err));
    assert_int_equal(hps_table_start_day(a, 3, 1), 15); /* 5..19: last touched on day 1 */
    assert_int_equal(hps_table_start_day(b, 3, 1), 15);
    free(buf);
    hps_table_free(a);
    hps_table_free(b);
}

/* Row-wise AdaGrad against a double-precision reference of FBGEMM's rule:
 * a += mean(g^2); w -= lr * g / (sqrt(a) + eps), over two steps (the second
 * reads the first's accumulator), through the table's update. */
static void test_table_rowwise_adagrad_matches_reference(void **state)
{
    (void)state;
    hps_error err;
    enum { D = 5 };
    hps_table *t = hps_table_create(0, D, 0, HPS_TABLE_FULL_ERROR, 3);
    hps_table_set_rowwise(t);
    int64_t r0 = hps_table_lookup(t, 0, 1, 1, &err), r1 = hps_table_lookup(t, 0, 2, 1, &err);
    double w[2][D], a[2] = {0, 0};
    for (int r = 0; r < 2; r++)
        for (int d = 0; d < D; d++) w[r][d] = hps_table_weights(t)[(r ? r1 : r0) * D + d];
    const float lr = 0.05f, eps = 1e-8f;
    hps_sparse_grad *sum = NULL;
    for (int step = 0; step < 2; step++) {
        int64_t rows[] = {r1, r0};
        float grad[2 * D];
        for (int i = 0; i < 2 * D; i++) grad[i] = (float)((i * 7 + step * 3) % 11) / 10.0f - 0.4f;
        hps_sparse_grad g = {.n = 2, .cap = 2, .D = D, .rows = rows, .grad = grad}, *parts[] = {&g};
        hps_table_apply(t, parts, 1, &sum, lr, eps);
        for (int i = 0; i < 2; i++) {
            int r = rows[i] == r0 ? 0 : 1;
            double sq = 0;
            for (int d = 0; d < D; d++) sq += (double)grad[i * D + d] * grad[i * D + d];
            a[r] += sq / D;
            for (int d = 0; d < D; d++) w[r][d] -= lr * grad[i * D + d] / (sqrt(a[r]) + eps);
        }
    }
    for (int r = 0; r < 2; r++) {
        int64_t row = r ? r1 : r0;
        assert_float_equal(hps_table_accum(t)[row], a[r], 1e-6);
        for (int d = 0; d < D; d++) assert_float_equal(hps_table_weights(t)[row * D + d], w[r][d], 1e-6);
    }
    /* the accumulator is one float a row: the bytes a row says so */
    assert_int_equal(hps_table_row_bytes(D, 0, HPS_ROW_FP32) - hps_table_row_bytes(D, 1, HPS_ROW_FP32), (D - 1) * sizeof(float));
    /* a checkpoint of one kind does not load into a table of the other */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(hps_table_save(t, f), 0);
    fclose(f);
    hps_table *plain = hps_table_create(0, D, 0, HPS_TABLE_FULL_ERROR, 3), *same = hps_table_create(0, D, 0, HPS_TABLE_FULL_ERROR, 3);
    hps_table_set_rowwise(same);
    f = fmemopen(buf, len, "rb");
    assert_int_equal(hps_table_load(plain, f, (const int[]){0}, 1, &err, "mem"), -1);
    fclose(f);
    assert_non_null(strstr(err.msg, "mem: embedding layer 0 was trained with row-wise AdaGrad, this run asks for per-element"));
    f = fmemopen(buf, len, "rb");
    assert_int_equal(hps_table_load(same, f, (const int[]){0}, 1, &err, "mem"), 0);
    fclose(f);
    assert_memory_equal(hps_table_accum(same), hps_table_accum(t), 2 * sizeof(float));
    assert_memory_equal(hps_table_weights(same), hps_table_weights(t), 2 * D * sizeof(float));
    free(buf);
    hps_sparse_grad_free(sum);
    hps_table_free(plain);
    hps_table_free(same);
    hps_table_free(t);
}

/* fp16 and bf16 rows: what the type holds round-trips exactly; other
 * values go to the nearest, ties to the even one. */
static void test_row_dtypes_round_trip(void **state)
{
    (void)state;
    const hps_row_dtype types[] = {HPS_ROW_FP16, HPS_ROW_BF16};
    const int mant[] = {10, 7}; /* stored mantissa bits */
    for (int k = 0; k < 2; k++) {
        hps_row_dtype ty = types[k];
        float ulp = ldexpf(1, -mant[k]); /* at 1 */
        const float held[] = {0.0f, -0.0f, 1.0f, -2.5f, 0.046875f, 1.0f + ulp, 255.0f};
        for (size_t i = 0; i < sizeof held / sizeof *held; i++)
            assert_true(hps_row_widen(hps_row_round(held[i], ty), ty) == held[i]);
        /* each 16-bit pattern of a finite value comes back as itself */
        for (uint32_t v = 0; v < 0x10000; v++) {
            float x = hps_row_widen((uint16_t)v, ty);
            if (isfinite(x)) assert_int_equal(hps_row_round(x, ty), v);
        }
        /* ties: 1 + ulp/2 goes down to 1 (even), 1 + 3 ulp/2 up to 1 + 2 ulp */
        assert_true(hps_row_widen(hps_row_round(1.0f + ulp / 2, ty), ty) == 1.0f);
        assert_true(hps_row_widen(hps_row_round(1.0f + 3 * ulp / 2, ty), ty) == 1.0f + 2 * ulp);
        /* otherwise the nearest: within half an ulp */
        hps_rng rng;
        hps_rng_seed(&rng, 5);
        for (int i = 0; i < 10000; i++) {
            float x = hps_rng_range(&rng, -0.5f, 0.5f), y = hps_row_widen(hps_row_round(x, ty), ty);
            int e;
            frexpf(x, &e);
            assert_true(fabsf(y - x) <= ldexpf(1, e - 1 - mant[k] - 1));
        }
    }
}

/* A table of fp16 rows: each load works on fp32 copies, the update is the
 * fp32 one rounded into the row, and a checkpoint keeps the rows' type. */
static void test_table_fp16_rows(void **state)
{
    (void)state;
    hps_error err;
    enum { D = 4 };
    hps_table *h = hps_table_create(0, D, 0, HPS_TABLE_FULL_ERROR, 3), *f = hps_table_create(0, D, 0, HPS_TABLE_FULL_ERROR, 3);
    hps_table_set_dtype(h, HPS_ROW_FP16);
    assert_int_equal(hps_table_row_bytes(16, 1, HPS_ROW_FP16), hps_table_row_bytes(16, 1, HPS_ROW_FP32) - 16 * 2);
    hps_table_stage_begin(h);
    int64_t a = hps_table_lookup(h, 0, 7, 1, &err), b = hps_table_lookup(h, 0, 8, 1, &err);
    int64_t fa = hps_table_lookup(f, 0, 7, 1, &err), fb = hps_table_lookup(f, 0, 8, 1, &err);
    assert_int_not_equal(a, hps_table_zero_row(h));
    assert_int_equal(hps_table_lookup(h, 0, 7, 1, &err), a); /* one copy a row per load */
    for (int d = 0; d < D; d++) { /* the copies: the initial values, rounded */
        assert_true(hps_table_weights(h)[a * D + d] ==
                    hps_row_widen(hps_row_round(hps_table_weights(f)[fa * D + d], HPS_ROW_FP16), HPS_ROW_FP16));
        assert_true(hps_table_weights(h)[hps_table_zero_row(h) * D + d] == 0.0f);
    }
    float want[D];
    for (int d = 0; d < D; d++) want[d] = hps_table_weights(h)[b * D + d];
    int64_t rows[] = {b};
    float grad[D] = {0.5f, -0.25f, 1, 2};
    hps_sparse_grad g = {.n = 1, .cap = 1, .D = D, .rows = rows, .grad = grad}, *parts[] = {&g}, *sum = NULL;
    hps_table_apply(h, parts, 1, &sum, 0.01f, 1e-8f);
    for (int d = 0; d < D; d++) want[d] -= 0.01f * grad[d] / (sqrtf(grad[d] * grad[d]) + 1e-8f);
    float got[D];
    hps_table_row_values(h, 1, got); /* key 8: the second row */
    for (int d = 0; d < D; d++) assert_true(got[d] == hps_row_widen(hps_row_round(want[d], HPS_ROW_FP16), HPS_ROW_FP16));
    /* a new load reads the rounded row */
    hps_table_stage_begin(h);
    int64_t again = hps_table_lookup(h, 0, 8, 2, &err);
    assert_memory_equal(hps_table_weights(h) + again * D, got, sizeof got);
    /* checkpoints: the same rows back; a table of another type refuses them */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_int_equal(hps_table_save(h, m), 0);
    fclose(m);
    hps_table *back = hps_table_create(0, D, 0, HPS_TABLE_FULL_ERROR, 3);
    hps_table_set_dtype(back, HPS_ROW_FP16);
    m = fmemopen(buf, len, "rb");
    assert_int_equal(hps_table_load(back, m, (const int[]){0}, 1, &err, "mem"), 0);
    fclose(m);
    float v[D];
    hps_table_row_values(back, 1, v);
    assert_memory_equal(v, got, sizeof got);
    m = fmemopen(buf, len, "rb");
    assert_int_equal(hps_table_load(f, m, (const int[]){0}, 1, &err, "mem"), -1);
    fclose(m);
    assert_non_null(strstr(err.msg, "mem: embedding layer 0 has fp16 rows, this run asks for fp32 (--row-dtype)"));
    (void)fb;
    free(buf);
    hps_sparse_grad_free(sum);
    hps_table_free(back);
    hps_table_free(h);
    hps_table_free(f);
}

/* Compact rows at dim 16 (fp16, row-wise AdaGrad) cost at most 80 bytes a
 * row all-in, both as counted against the cap and as allocated for 1M keys
 * (slab and hash doubling included); the hash finds every key, before and
 * after evictions move keys between rows. */
static void test_table_compact_row_bytes(void **state)
{
    (void)state;
    hps_error err;
    enum { D = 16, KEYS = 1000000, BATCH = 4096 };
    assert_true(hps_table_row_bytes(D, 1, HPS_ROW_FP16) <= 80);
    hps_table *t = hps_table_create(0, D, 0, HPS_TABLE_FULL_ERROR, 3);
    hps_table_set_rowwise(t);
    hps_table_set_dtype(t, HPS_ROW_FP16);
    for (int64_t k = 0; k < KEYS; k++) {
        if (k % BATCH == 0) hps_table_stage_begin(t); /* a batch's copies */
        assert_true(hps_table_lookup(t, (int)(k % 3), (uint64_t)k * 0x9e3779b97f4a7c15ULL, (uint64_t)k / BATCH + 1, &err) > 0);
    }
    assert_int_equal(hps_table_rows(t), KEYS);
    assert_true(hps_table_bytes(t) <= (size_t)80 * KEYS);
    for (int64_t k = 0; k < KEYS; k += 7) {
        int slot;
        uint64_t key;
        int64_t r = hps_table_find(t, (int)(k % 3), (uint64_t)k * 0x9e3779b97f4a7c15ULL);
        assert_true(r >= 0);
        hps_table_row_key(t, r, &slot, &key);
        assert_int_equal(slot, k % 3);
        assert_true(key == (uint64_t)k * 0x9e3779b97f4a7c15ULL);
        assert_int_equal(hps_table_find(t, (int)(k % 3) + 3, key), -1); /* same key, another slot */
    }
    hps_table_free(t);
    /* a capped table evicting: every key it holds is found at its row */
    enum { CAP_KEYS = 20000 };
    t = hps_table_create(0, D, 2000 * hps_table_row_bytes(D, 0, HPS_ROW_FP32), HPS_TABLE_FULL_EVICT, 3);
    for (uint64_t k = 0; k < CAP_KEYS; k++) assert_true(hps_table_lookup(t, 0, k % 5000, k + 1, &err) >= 0);
    assert_true(hps_table_evictions(t) > 0);
    for (int64_t r = 0; r < hps_table_rows(t); r++) {
        int slot;
        uint64_t key;
        hps_table_row_key(t, r, &slot, &key);
        assert_int_equal(hps_table_find(t, slot, key), r);
    }
    hps_table_free(t);
}

/* A checkpoint holds each row's step in full (64 bits), across the 2^32
 * wrap of the low bits the table keeps; loading and saving again gives the
 * same bytes. */
/* A checkpoint holds the rows a column at a time (keys, slots, steps, clock
 * bits, weights, accumulators, days), whatever the table keeps together in
 * memory: the columns checked at their offsets, over more rows than one
 * chunk of the writer (1024). */
static void test_table_save_columns(void **state)
{
    (void)state;
    hps_error err;
    enum { D = 2, N = 1500 };
    hps_table *t = hps_table_create(0, D, 0, HPS_TABLE_FULL_ERROR, 3);
    hps_table_start_day(t, 5, 0);
    for (int k = 0; k < N; k++) hps_table_lookup(t, k % 3, UINT64_C(7) * (uint64_t)k + 1, 10 + (uint64_t)k, &err);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_int_equal(hps_table_save(t, m), 0);
    fclose(m);
    const char *at = buf + 4 * sizeof(int64_t);
    for (int64_t r = 0; r < N; r++) {
        int slot, saved_slot;
        uint64_t key, saved_key, step;
        hps_table_row_key(t, r, &slot, &key);
        assert_int_equal(key, UINT64_C(7) * (uint64_t)r + 1);
        memcpy(&saved_key, at + r * 8, 8);
        memcpy(&saved_slot, at + N * 8 + r * 4, 4);
        memcpy(&step, at + N * 12 + r * 8, 8);
        assert_int_equal(saved_key, key);
        assert_int_equal(saved_slot, slot);
        assert_int_equal(step, 10 + (uint64_t)r);
        assert_int_equal(at[N * 20 + r], 1); /* the clock's bit */
        assert_memory_equal(at + N * 21 + r * D * 4, hps_table_weights(t) + r * D, D * 4);
        assert_memory_equal(at + N * (21 + D * 4) + r * D * 4, hps_table_accum(t) + r * D, D * 4);
        uint32_t day;
        memcpy(&day, at + N * (21 + 2 * D * 4) + r * 4, 4);
        assert_int_equal(day, 5);
    }
    free(buf);
    hps_table_free(t);
}

static void test_table_save_keeps_steps(void **state)
{
    (void)state;
    hps_error err;
    enum { D = 4 };
    const uint64_t steps[] = {(UINT64_C(1) << 33) + 5, (UINT64_C(1) << 33) - 1, (UINT64_C(1) << 33) + 9};
    hps_table *t = hps_table_create(0, D, 0, HPS_TABLE_FULL_ERROR, 3);
    for (int k = 0; k < 3; k++) hps_table_lookup(t, 0, (uint64_t)k + 10, steps[k], &err);
    char *buf = NULL, *again = NULL;
    size_t len = 0, again_len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_int_equal(hps_table_save(t, m), 0);
    fclose(m);
    /* head (4 x 8 bytes), keys (3 x 8), slots (3 x 4), then the steps */
    uint64_t saved[3];
    memcpy(saved, buf + 32 + 3 * 8 + 3 * 4, sizeof saved);
    assert_memory_equal(saved, steps, sizeof saved);
    hps_table *back = hps_table_create(0, D, 0, HPS_TABLE_FULL_ERROR, 3);
    m = fmemopen(buf, len, "rb");
    assert_int_equal(hps_table_load(back, m, (const int[]){0}, 1, &err, "mem"), 0);
    fclose(m);
    m = open_memstream(&again, &again_len);
    assert_int_equal(hps_table_save(back, m), 0);
    fclose(m);
    assert_int_equal(again_len, len);
    assert_memory_equal(again, buf, len);
    free(buf), free(again);
    hps_table_free(back);
    hps_table_free(t);
}

/* ---- the run record hps-plan --calibrate reads ------------------------------------ */

#define RUN_START "{\"event\":\"start\",\"model\":\"m\",\"batch\":8,\"micro_batches\":1,\"stages\":[" \
                  "{\"type\":\"gpu\",\"layers\":[0,1],\"units\":2},{\"type\":\"gpu\",\"layers\":[2,3],\"units\":2}]}\n"

/* Loads a start record and a summary whose two stages' own fields are s0 and s1. */
static int load_run(const char *s0, const char *s1, hps_train_run *r, hps_error *err)
{
    char path[] = "/tmp/hps-run-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, RUN_START "{\"event\":\"summary\",\"steps\":4,\"samples_per_s\":100,\"stages\":["
               "{\"measured_ms\":1%s%s},{\"measured_ms\":2%s%s}]}\n",
            *s0 ? "," : "", s0, *s1 ? "," : "", s1);
    fclose(f);
    int rc = hps_train_run_load(path, r, err);
    unlink(path);
    return rc;
}

/* Where each stage kept its rows reads back, each rows value; a record
 * without it (an hps-train before it) still reads, saying so. */
static void test_run_record_rows(void **state)
{
    (void)state;
    hps_train_run r;
    hps_error err;
    if (load_run("\"rows\":\"cache\",\"cache_rows\":1000,\"hit_rate\":0.75,\"shards\":0,\"servers\":\"beside\"",
                 "\"rows\":\"hbm\",\"cache_rows\":null,\"hit_rate\":null,\"shards\":2,\"servers\":null", &r, &err))
        fail_msg("%s", err.msg);
    assert_true(r.has_rows);
    assert_string_equal(r.stages[0].rows, "cache");
    assert_true(r.stages[0].cache_rows == 1000 && r.stages[0].hit_rate == 0.75 && r.stages[0].servers_beside);
    assert_string_equal(r.stages[1].rows, "hbm");
    assert_true(r.stages[1].shards == 2 && r.stages[1].hit_rate < 0 && !r.stages[1].servers_beside);
    if (load_run("\"rows\":\"servers\",\"shards\":0,\"servers\":\"apart\"", "\"rows\":\"none\",\"shards\":0", &r,
                 &err))
        fail_msg("%s", err.msg);
    assert_string_equal(r.stages[0].rows, "servers");
    assert_string_equal(r.stages[1].rows, "none");
    assert_false(r.stages[0].servers_beside);
    if (load_run("", "", &r, &err)) fail_msg("%s", err.msg);
    assert_false(r.has_rows);
}

/* A malformed rows field: one line naming the file, the record, the stage
 * and the field. */
static void test_run_record_bad_rows(void **state)
{
    (void)state;
    static const struct {
        const char *s0, *s1, *msg;
    } bad[] = {
        {"\"rows\":\"disk\",\"shards\":0", "", "summary: stage 0: rows 'disk' must be one of none|servers|hbm|cache"},
        {"\"rows\":\"cache\",\"shards\":0", "", "summary: stage 0: missing field 'cache_rows'"},
        {"\"rows\":\"cache\",\"cache_rows\":10,\"hit_rate\":1.5,\"shards\":0", "",
         "summary: stage 0: hit_rate=1.5 must be in [0, 1]"},
        {"\"rows\":\"hbm\",\"shards\":1", "", "summary: stage 0: shards=1: expected 0, or at least 2 with rows hbm"},
        {"\"rows\":\"servers\",\"shards\":2", "", "summary: stage 0: shards=2: expected 0, or at least 2 with rows hbm"},
        {"\"rows\":\"hbm\"", "", "summary: stage 0: missing field 'shards'"},
        {"\"rows\":\"servers\",\"shards\":0,\"servers\":\"near\"", "",
         "summary: stage 0: servers 'near' must be one of apart|beside"},
        {"\"rows\":\"hbm\",\"shards\":0", "", "summary: stage 1: rows: expected in every stage or in none"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        hps_train_run r;
        hps_error err;
        assert_int_equal(load_run(bad[i].s0, bad[i].s1, &r, &err), -1);
        assert_int_equal(err.code, HPS_EXIT_USAGE);
        if (!strstr(err.msg, bad[i].msg) || !strstr(err.msg, "hps-run-") || !strstr(err.msg, ":2: summary"))
            fail_msg("%zu: %s", i, err.msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_rows_are_stable),
        cmocka_unit_test(test_table_apply_sums_then_adagrad),
        cmocka_unit_test(test_table_presize_never_rehashes),
        cmocka_unit_test(test_table_cap_error_and_eviction),
        cmocka_unit_test(test_table_lookup_many_as_one_by_one),
        cmocka_unit_test(test_table_save_load),
        cmocka_unit_test(test_table_load_checks_rows_exist),
        cmocka_unit_test(test_table_load_refuses_bad_rows),
        cmocka_unit_test(test_pipeline_matches_single_stage),
        cmocka_unit_test(test_pipeline_gradients),
        cmocka_unit_test(test_linked_stages_follow_one_process),
        cmocka_unit_test(test_learns_planted_model),
        cmocka_unit_test(test_auc),
        cmocka_unit_test(test_checkpoint_resume_is_bitwise),
        cmocka_unit_test(test_corrupt_checkpoint_is_refused),
        cmocka_unit_test(test_forged_checkpoint_size_is_refused),
        cmocka_unit_test(test_export_reads_back),
        cmocka_unit_test(test_run_record_rows),
        cmocka_unit_test(test_run_record_bad_rows),
        cmocka_unit_test(test_diverged_run_stops),
        cmocka_unit_test(test_eval_adds_no_rows),
        cmocka_unit_test(test_probe_reads_new_batches),
        cmocka_unit_test(test_device_rows_match_host_tables),
        cmocka_unit_test(test_cache_resumes_warm),
        cmocka_unit_test(test_cache_evicts_by_its_rule),
        cmocka_unit_test(test_cache_victims_by_brute_force),
        cmocka_unit_test(test_cache_read_counts_each_lookup),
        cmocka_unit_test(test_table_admits_after_n_lookups),
        cmocka_unit_test(test_table_expiry_by_days),
        cmocka_unit_test(test_table_save_load_days_and_counts),
        cmocka_unit_test(test_table_rowwise_adagrad_matches_reference),
        cmocka_unit_test(test_row_dtypes_round_trip),
        cmocka_unit_test(test_table_fp16_rows),
        cmocka_unit_test(test_table_compact_row_bytes),
        cmocka_unit_test(test_table_save_columns),
        cmocka_unit_test(test_table_save_keeps_steps),
    };
    return cmocka_run_group_tests_name("train", tests, NULL, NULL);
}

