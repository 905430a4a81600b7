/* Shard files: parsing, exact splits, block round trips through the reader
 * (with and without its background thread), seeking, corruption. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "core/hps_io.h"
#include "core/hps_rng.h"
#include "data/hps_data.h"
#include "data/hps_shard.h"
#include "data/hps_shard_job.h"
#include "plan/hps_plan_file.h"
#include "net/hps_batch.h"

static const hps_schema criteo = {HPS_CRITEO_DENSE, HPS_CRITEO_SLOTS, 0, 0, 2};

static hps_parse_opts criteo_opts(void)
{
    hps_parse_opts o = {HPS_FMT_CRITEO, criteo, HPS_TRANSFORM_NONE, HPS_HASH_NONE, 0, 0};
    return o;
}

static void test_crc32c(void **state)
{
    (void)state;
    assert_int_equal(hps_crc32c(0, "123456789", 9), 0xE3069283u); /* the standard check value */
    uint32_t c = hps_crc32c(0, "1234", 4);
    assert_int_equal(hps_crc32c(c, "56789", 5), 0xE3069283u);
}

/* SHA-256 over pieces of every size equals the one-shot digest, which
 * matches FIPS 180-4's "abc" vector. */
static void test_sha256_pieces(void **state)
{
    (void)state;
    unsigned char one[32], many[32], data[1000];
    char hex[72];
    hps_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7 + 3);
    for (size_t len = 0; len <= sizeof data; len += 37) {
        hps_sha256(data, len, one);
        for (size_t piece = 1; piece <= 130; piece += 43) {
            hps_sha256_ctx c;
            hps_sha256_init(&c);
            for (size_t at = 0; at < len; at += piece)
                hps_sha256_update(&c, data + at, len - at < piece ? len - at : piece);
            hps_sha256_final(&c, many);
            assert_memory_equal(one, many, 32);
        }
    }
}

static void test_key_hash(void **state)
{
    (void)state;
    hps_parse_opts o = criteo_opts();
    o.hash = HPS_HASH_MIX64;
    o.seed = 7;
    /* the documented definition */
    assert_true(hps_key_of(&o, 3, 0xabcd) == hps_mix64(0xabcd ^ hps_mix64(7 + 3)));
    assert_true(hps_key_of(&o, 3, 0xabcd) != hps_key_of(&o, 4, 0xabcd));
    o.buckets = 1000;
    assert_true(hps_key_of(&o, 3, 0xabcd) == hps_mix64(0xabcd ^ hps_mix64(10)) % 1000);
    o.hash = HPS_HASH_NONE;
    o.buckets = 0;
    assert_true(hps_key_of(&o, 3, 0xabcd) == 0xabcd);
}

static void test_criteo_parse(void **state)
{
    (void)state;
    hps_parse_opts o = criteo_opts();
    hps_rows *r = hps_rows_create(&criteo, 4);
    char msg[256];
    const char *good = "1\t5\t-3\t\t0\t1\t2\t3\t4\t5\t6\t7\t8\t9\t68fd1e64\t\tABC\t"
                       "1\t2\t3\t4\t5\t6\t7\t8\t9\ta\tb\tc\td\te\tf\t10\t11\t12\t13\t14\t15\t16\t17\r";
    assert_int_equal(hps_parse_line(&o, good, strlen(good), r, msg, sizeof msg), 0);
    assert_int_equal(r->rows, 1);
    assert_true(r->labels[0] == 1.0f);
    assert_true(r->dense[0 * r->cap] == 5.0f && r->dense[1 * r->cap] == -3.0f && r->dense[2 * r->cap] == 0.0f);
    assert_int_equal(r->nkeys[0], 1);
    assert_int_equal(r->nkeys[1], 0); /* empty C2 */
    assert_true(r->keys[0][0] == 0x68fd1e64 && r->keys[2][0] == 0xabc && r->keys[25][0] == 0x17);
    const char *bad = "1\t5\t-3\t\t0\t1\t2\t3\t4\t5\t6\t7\t8\t9\t68fd1e64\txyz";
    assert_int_equal(hps_parse_line(&o, bad, strlen(bad), r, msg, sizeof msg), -1);
    assert_string_equal(msg, "expected 40 tab-separated fields, got 16");
    char line[512];
    snprintf(line, sizeof line, "%s", good);
    memcpy(strstr(line, "ABC"), "AxC", 3);
    assert_int_equal(hps_parse_line(&o, line, strlen(line), r, msg, sizeof msg), -1);
    assert_string_equal(msg, "field 17 (C3): expected 1 to 16 hex digits, got 'AxC'");
    assert_int_equal(r->rows, 1); /* the bad line left nothing behind */
    assert_int_equal(r->nkeys[0], 1);
    hps_rows_free(r);
}

/* A Criteo line with field f (0-based, 0..39) replaced by text. */
static void criteo_line(char *buf, size_t n, int f, const char *text)
{
    size_t k = 0;
    for (int i = 0; i < 40; i++) {
        const char *v = i == f ? text : i == 0 ? "1" : i <= 13 ? "7" : "a1";
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "\t" : "", v);
    }
}

/* The one-pass scanner takes exactly what the field-by-field parser takes,
 * with the same values; anything else gets the field-by-field message. */
static void test_criteo_parse_edges(void **state)
{
    (void)state;
    hps_parse_opts o = criteo_opts();
    hps_rows *r = hps_rows_create(&criteo, 4);
    char line[1024], msg[256];
    const struct {
        int field;
        const char *text, *msg; /* msg NULL: accepted */
        float i1;               /* accepted: I1 */
        uint64_t c1;            /* and C1's key */
        int nnz;
    } cases[] = {
        {1, "999999999999999999", NULL, 999999999999999999.0f, 0xa1, 26},
        {1, "1000000000000000000", "field 2 (I1): expected an integer, got '1000000000000000000'", 0, 0, 0},
        {1, "123456789012345678901234567890", "field 2 (I1): expected an integer, got '123456789012345678901234567890'", 0, 0, 0},
        {1, "+5", NULL, 5, 0xa1, 26},
        {1, "-0", NULL, 0, 0xa1, 26},
        {1, "-", "field 2 (I1): expected an integer, got '-'", 0, 0, 0},
        {1, "+-5", "field 2 (I1): expected an integer, got '+-5'", 0, 0, 0},
        {1, "5 ", "field 2 (I1): expected an integer, got '5 '", 0, 0, 0},
        {1, "", NULL, 0, 0xa1, 26},
        {14, "FFFFFFFFFFFFFFFF", NULL, 7, UINT64_MAX, 26},
        {14, "1ffffffffffffffff", "field 15 (C1): expected 1 to 16 hex digits, got '1ffffffffffffffff'", 0, 0, 0},
        {14, "", NULL, 7, 0, 25},
        {14, "0x1", "field 15 (C1): expected 1 to 16 hex digits, got '0x1'", 0, 0, 0},
        {39, "", NULL, 7, 0xa1, 25},
        {39, "g", "field 40 (C26): expected 1 to 16 hex digits, got 'g'", 0, 0, 0},
        {39, "a1\t", "expected 40 tab-separated fields, got 41", 0, 0, 0},
        {0, "2", "field 1 (label): expected 0 or 1, got '2'", 0, 0, 0},
        {14, "0123456789abcdef0123456789abcdef0123", "field 15 (C1): expected 1 to 16 hex digits, got '0123456789abcdef0123456789abcdef...'", 0, 0, 0},
        {14, "a\001\177", "field 15 (C1): expected 1 to 16 hex digits, got 'a?" "?'", 0, 0, 0},
        {0, "", "field 1 (label): expected 0 or 1, got ''", 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        criteo_line(line, sizeof line, cases[i].field, cases[i].text);
        hps_rows_clear(r);
        int rc = hps_parse_line(&o, line, strlen(line), r, msg, sizeof msg);
        if (cases[i].msg) {
            assert_int_equal(rc, -1);
            assert_string_equal(msg, cases[i].msg);
            assert_int_equal(r->rows, 0);
            assert_int_equal(hps_rows_nnz(r), 0);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(r->rows, 1);
        assert_true(r->dense[0] == cases[i].i1);
        assert_int_equal(hps_rows_nnz(r), cases[i].nnz);
        if (r->nkeys[0]) assert_true(r->keys[0][0] == cases[i].c1);
    }
    criteo_line(line, sizeof line, -1, "");
    line[strlen(line) - 3] = '\0'; /* C26 and its tab gone: 39 fields */
    assert_int_equal(hps_parse_line(&o, line, strlen(line), r, msg, sizeof msg), -1);
    assert_string_equal(msg, "expected 40 tab-separated fields, got 39");
    hps_rows_free(r);
}

static void test_libsvm_parse(void **state)
{
    (void)state;
    hps_schema s = {0, 1, 1, 1, 5};
    hps_parse_opts o = {HPS_FMT_LIBSVM, s, HPS_TRANSFORM_NONE, HPS_HASH_NONE, 0, 0};
    hps_rows *r = hps_rows_create(&s, 2);
    char msg[256];
    const char *l1 = "4 3:0.5 10:2 # comment";
    assert_int_equal(hps_parse_line(&o, l1, strlen(l1), r, msg, sizeof msg), 0);
    assert_true(r->labels[0] == 4.0f);
    assert_int_equal(r->nkeys[0], 2);
    assert_true(r->keys[0][1] == 10 && r->weights[0][1] == 2.0f);
    const char *l2 = "5 1:1";
    assert_int_equal(hps_parse_line(&o, l2, strlen(l2), r, msg, sizeof msg), -1);
    assert_string_equal(msg, "field 1 (label): expected a class in [0, 5), got '5'");
    /* --dense 4: indices are dense features */
    hps_schema d = {4, 0, 0, 0, 2};
    hps_parse_opts od = {HPS_FMT_LIBSVM, d, HPS_TRANSFORM_NONE, HPS_HASH_NONE, 0, 0};
    hps_rows *rd = hps_rows_create(&d, 2);
    const char *l3 = "-1 2:1.5 4:3";
    assert_int_equal(hps_parse_line(&od, l3, strlen(l3), rd, msg, sizeof msg), 0);
    assert_true(rd->labels[0] == 0.0f && rd->dense[1 * rd->cap] == 1.5f && rd->dense[3 * rd->cap] == 3.0f);
    const char *l4 = "+1 5:1";
    assert_int_equal(hps_parse_line(&od, l4, strlen(l4), rd, msg, sizeof msg), -1);
    assert_string_equal(msg, "field 2 (feature): expected an index in [1, 4], got '5:1'");
    /* a line refused after some of its features were stored leaves no trace
     * in the row that takes its place */
    const char *l5 = "1 1:7 3:9 5:1", *l6 = "0 2:2";
    assert_int_equal(hps_parse_line(&od, l5, strlen(l5), rd, msg, sizeof msg), -1);
    assert_int_equal(hps_parse_line(&od, l6, strlen(l6), rd, msg, sizeof msg), 0);
    assert_int_equal(rd->rows, 2);
    assert_true(rd->dense[0 * rd->cap + 1] == 0.0f && rd->dense[1 * rd->cap + 1] == 2.0f &&
                rd->dense[2 * rd->cap + 1] == 0.0f);
    hps_rows_free(r);
    hps_rows_free(rd);
}

/* Feature values take a fast path for plain decimals: every form gives what
 * strtod gives, and every malformed one is still refused. */
static void test_libsvm_values_as_strtod(void **state)
{
    (void)state;
    hps_schema s = {0, 1, 1, 0, 0};
    hps_parse_opts o = {HPS_FMT_LIBSVM, s, HPS_TRANSFORM_NONE, HPS_HASH_NONE, 0, 0};
    hps_rows *r = hps_rows_create(&s, 2);
    char msg[256], line[128];
    static const char *const good[] = {
        "0.5", "1", "-0.094", "+2.25", "1.", ".75", "-0", "0.1", "0.3333333333333333",
        "123456789.123456789", "1e3", "2.5E-3", "0x10", "12345678901234567890",
        "9007199254740993", "0.00000000000000000000000123", "3.4028234663852886e38", "007"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        hps_rows_clear(r);
        snprintf(line, sizeof line, "1 0042:%s", good[i]);
        if (hps_parse_line(&o, line, strlen(line), r, msg, sizeof msg) != 0) fail_msg("%s: %s", line, msg);
        assert_true(r->keys[0][0] == 42);
        if (r->weights[0][0] != (float)strtod(good[i], NULL))
            fail_msg("%s: %.9g, strtod %.9g", good[i], r->weights[0][0], (float)strtod(good[i], NULL));
    }
    static const char *const bad[] = {"", ".", "-", "1e", "--1", "1.2.3", "1,5", "inf", "nan", "0x",
                                      "1e999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        hps_rows_clear(r);
        snprintf(line, sizeof line, "1 3:%s", bad[i]);
        if (hps_parse_line(&o, line, strlen(line), r, msg, sizeof msg) == 0) fail_msg("'%s' accepted", line);
    }
    hps_rows_free(r);
}

static void test_split_exact(void **state)
{
    (void)state;
    uint64_t c[5];
    hps_split_counts(10, NULL, 3, c);
    assert_true(c[0] == 4 && c[1] == 3 && c[2] == 3);
    double w[3] = {3, 1, 1};
    hps_split_counts(1000, w, 3, c);
    assert_true(c[0] == 600 && c[1] == 200 && c[2] == 200);
    double p[3] = {0.5, 0.3, 0.2};
    hps_split_counts(7, p, 3, c); /* 3.5, 2.1, 1.4 -> 3 + 2 + 1, one left: to the .5 */
    assert_true(c[0] == 4 && c[1] == 2 && c[2] == 1);
    hps_rng r;
    hps_rng_seed(&r, 1);
    for (int t = 0; t < 200; t++) {
        double ws[5];
        int k = 1 + (int)hps_rng_below(&r, 5);
        for (int i = 0; i < k; i++) ws[i] = hps_rng_uniform(&r) + (i == 0);
        uint64_t n = hps_rng_below(&r, 100000), sum = 0;
        hps_split_counts(n, ws, k, c);
        double tot = 0;
        for (int i = 0; i < k; i++) tot += ws[i];
        for (int i = 0; i < k; i++) {
            sum += c[i];
            double exact = (double)n * ws[i] / tot;
            assert_true((double)c[i] > exact - 1 && (double)c[i] < exact + 1);
        }
        assert_true(sum == n);
    }
}

static void test_plan_read(void **state)
{
    (void)state;
    double *shares;
    int n, servers;
    char digest[72];
    hps_error err;
    assert_int_equal(hps_plan_read(HPS_TESTDATA "/plans/plan-3workers.json", &shares, &n, &servers, digest, &err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(servers, 2);
    assert_true(shares[0] == 0.5 && shares[1] == 0.3 && shares[2] == 0.2); /* rank order */
    free(shares);
}

/* A random block: some empty bags, some long ones, weights when asked. */
static void fill_random(hps_rows *r, int rows, hps_rng *g)
{
    hps_rows_clear(r);
    for (int i = 0; i < rows; i++) {
        int row = hps_rows_begin(r);
        r->labels[row] = (float)hps_rng_below(g, (uint64_t)r->schema.classes);
        for (int d = 0; d < r->schema.n_dense; d++) r->dense[(size_t)d * r->cap + row] = (float)hps_rng_normal(g);
        for (int j = 0; j < r->schema.n_slots; j++) {
            int n = (int)hps_rng_below(g, 4);
            for (int k = 0; k < n; k++) hps_rows_add_key(r, j, hps_rng_next(g), (float)hps_rng_uniform(g));
        }
    }
    hps_rows_index(r);
}

static const char *tmp_shard(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/test_shard.%d.hps", (int)getpid());
    return buf;
}

/* Writes `blocks` random blocks; keeps their content in `keep` for comparing. */
static void write_shard(const char *path, const hps_schema *s, int blocks, int rows_per, hps_rows **keep)
{
    hps_error err;
    hps_shard_writer *w = hps_shard_writer_create(path, s, (uint32_t)rows_per, &err);
    assert_non_null(w);
    void *cctx = ZSTD_createCCtx();
    hps_rng g;
    hps_rng_seed(&g, 42);
    hps_block b = {0};
    uint8_t *scratch = NULL;
    size_t scap = 0;
    for (int i = 0; i < blocks; i++) {
        keep[i] = hps_rows_create(s, rows_per);
        fill_random(keep[i], rows_per - i % 3, &g);
        hps_block_compress(keep[i], cctx, 1, &b, &scratch, &scap);
        assert_int_equal(hps_shard_writer_add(w, &b, &err), 0);
    }
    hps_shard_info info;
    assert_int_equal(hps_shard_writer_close(w, &info, &err), 0);
    assert_int_equal(info.blocks, blocks);
    hps_block_free(&b);
    free(scratch);
    ZSTD_freeCCtx(cctx);
}

/* Reads the whole shard in batches of `batch` and compares with keep. */
static void check_round_trip(const char *path, hps_rows **keep, int blocks, int ahead, int batch)
{
    hps_error err;
    hps_shard_read_opts o = {.ahead = ahead};
    hps_shard_reader *r = hps_shard_open(path, &o, &err);
    assert_non_null(r);
    const hps_schema *s = &hps_shard_reader_info(r)->schema;
    hps_batch *b = hps_batch_create(batch, s->n_dense, s->n_slots, 16, 1);
    int blk = 0, row = 0, n;
    while ((n = hps_shard_read(r, b, batch, &err)) > 0) {
        for (int i = 0; i < n; i++) {
            if (row == keep[blk]->rows) blk++, row = 0;
            const hps_rows *k = keep[blk];
            assert_true(b->labels[i] == k->labels[row]);
            for (int d = 0; d < s->n_dense; d++)
                assert_true(b->dense[(size_t)i * s->n_dense + d] == k->dense[(size_t)d * k->cap + row]);
            for (int j = 0; j < s->n_slots; j++) {
                int64_t lo = b->offsets[(size_t)i * s->n_slots + j], hi = b->offsets[(size_t)i * s->n_slots + j + 1];
                int64_t klo = k->offsets[j][row];
                assert_int_equal(hi - lo, k->offsets[j][row + 1] - klo);
                for (int64_t q = 0; q < hi - lo; q++) {
                    assert_true(b->keys[lo + q] == k->keys[j][klo + q]);
                    assert_true(b->weights[lo + q] == (s->weighted ? k->weights[j][klo + q] : 1.0f));
                }
            }
            row++;
        }
    }
    assert_int_equal(n, 0);
    assert_int_equal(blk, blocks - 1);
    assert_int_equal(row, keep[blocks - 1]->rows);
    hps_batch_free(b);
    hps_shard_close(r);
}

/* A worker's part of each batch: rows [lo, hi) as a whole read gives them,
 * the others counted with label 0 and no keys. */
static void check_read_part(const char *path, int ahead, int batch, int lo, int hi)
{
    hps_error err;
    hps_shard_read_opts o = {.ahead = ahead, .batches = 1};
    hps_shard_reader *whole = hps_shard_open(path, &o, &err), *part = hps_shard_open(path, &o, &err);
    assert_non_null(whole);
    assert_non_null(part);
    const hps_schema *s = &hps_shard_reader_info(whole)->schema;
    hps_batch *a = hps_batch_create(batch, s->n_dense, s->n_slots, 16, 1);
    hps_batch *b = hps_batch_create(batch, s->n_dense, s->n_slots, 16, 1);
    int n, S = s->n_slots, D = s->n_dense;
    while ((n = hps_shard_read(whole, a, batch, &err)) > 0) {
        assert_int_equal(hps_shard_read_part(part, b, batch, lo, hi, &err), n);
        assert_int_equal(hps_shard_tell(part), hps_shard_tell(whole));
        for (int i = 0; i < n; i++) {
            int in = i >= lo && i < hi;
            assert_true(b->labels[i] == (in ? a->labels[i] : 0));
            if (in) assert_memory_equal(b->dense + (size_t)i * D, a->dense + (size_t)i * D, (size_t)D * 4);
            for (int j = 0; j < S; j++) {
                const int64_t *oa = a->offsets + (size_t)i * S + j, *ob = b->offsets + (size_t)i * S + j;
                assert_int_equal(ob[1] - ob[0], in ? oa[1] - oa[0] : 0);
                for (int64_t q = 0; in && q < oa[1] - oa[0]; q++) assert_true(b->keys[ob[0] + q] == a->keys[oa[0] + q]);
            }
        }
    }
    assert_int_equal(n, 0);
    assert_int_equal(hps_shard_read_part(part, b, batch, lo, hi, &err), 0);
    hps_batch_free(a), hps_batch_free(b);
    hps_shard_close(whole), hps_shard_close(part);
}

static void test_round_trip(void **state)
{
    (void)state;
    char path[128];
    tmp_shard(path, sizeof path);
    hps_schema schemas[2] = {{3, 4, 0, 0, 2}, {0, 1, 1, 1, 7}};
    for (int t = 0; t < 2; t++) {
        hps_rows *keep[6];
        write_shard(path, &schemas[t], 6, 100, keep);
        check_round_trip(path, keep, 6, 0, 37);  /* in the caller */
        check_round_trip(path, keep, 6, 3, 64);  /* background thread */
        check_round_trip(path, keep, 6, 1, 500); /* batches span blocks */
        check_read_part(path, 0, 37, 10, 20);    /* a worker's part of each batch */
        check_read_part(path, 3, 64, 0, 32);
        check_read_part(path, 1, 500, 250, 500); /* parts that span blocks */
        check_read_part(path, 2, 64, 0, 0);      /* a later stage's worker decodes nothing */
        hps_shard_info info;
        hps_error err;
        assert_int_equal(hps_shard_verify(path, &info, &err), 0);
        assert_int_equal(info.rows, 100 + 99 + 98 + 100 + 99 + 98);
        for (int i = 0; i < 6; i++) hps_rows_free(keep[i]);
    }
    unlink(path);
}

/* Two blocks hold the same samples, bit for bit (-0.0 is not 0.0 here). */
static void assert_rows_identical(const hps_rows *a, const hps_rows *b)
{
    const hps_schema *s = &a->schema;
    assert_int_equal(a->rows, b->rows);
    size_t R = (size_t)a->rows;
    assert_memory_equal(a->labels, b->labels, R * 4);
    for (int d = 0; d < s->n_dense; d++)
        assert_memory_equal(a->dense + (size_t)d * a->cap, b->dense + (size_t)d * b->cap, R * 4);
    for (int j = 0; j < s->n_slots; j++) {
        assert_memory_equal(a->counts + (size_t)j * a->cap, b->counts + (size_t)j * b->cap, R * 4);
        assert_int_equal(a->nkeys[j], b->nkeys[j]);
        if (a->nkeys[j]) assert_memory_equal(a->keys[j], b->keys[j], (size_t)a->nkeys[j] * 8);
        if (s->weighted && a->nkeys[j]) assert_memory_equal(a->weights[j], b->weights[j], (size_t)a->nkeys[j] * 4);
    }
}

/* A reader decoding for batches still gives whole blocks with their dense columns. */
static void test_blocks_of_a_batched_reader(void **state)
{
    (void)state;
    char path[128];
    tmp_shard(path, sizeof path);
    hps_schema s = {3, 4, 0, 0, 2};
    hps_rows *keep[3];
    write_shard(path, &s, 3, 100, keep);
    hps_error err;
    hps_shard_read_opts o = {.ahead = 2, .batches = 1};
    hps_shard_reader *r = hps_shard_open(path, &o, &err);
    assert_non_null(r);
    const hps_rows *rows;
    int n = 0;
    while (hps_shard_next_block(r, &rows, &err) > 0) assert_rows_identical(keep[n++], rows);
    assert_int_equal(n, 3);
    hps_shard_close(r);
    for (int i = 0; i < 3; i++) hps_rows_free(keep[i]);
    unlink(path);
}

/* A block's columns copied as they are (the reader reuses its own). */
static hps_rows *copy_block(const hps_rows *src)
{
    const hps_schema *s = &src->schema;
    hps_rows *r = hps_rows_create(s, src->rows);
    size_t R = (size_t)src->rows;
    r->rows = src->rows;
    memcpy(r->labels, src->labels, R * 4);
    for (int d = 0; d < s->n_dense; d++) memcpy(r->dense + (size_t)d * r->cap, src->dense + (size_t)d * src->cap, R * 4);
    for (int j = 0; j < s->n_slots; j++) {
        memcpy(r->counts + (size_t)j * r->cap, src->counts + (size_t)j * src->cap, R * 4);
        hps_rows_reserve_keys(r, j, src->nkeys[j]);
        r->nkeys[j] = src->nkeys[j];
        memcpy(r->keys[j], src->keys[j], (size_t)src->nkeys[j] * 8);
        if (s->weighted) memcpy(r->weights[j], src->weights[j], (size_t)src->nkeys[j] * 4);
    }
    hps_rows_index(r);
    return r;
}

/* Every block of a shard, decoded (the caller frees each). */
static int read_blocks(const char *path, hps_rows **out, int max, hps_schema *schema)
{
    hps_error err;
    hps_shard_reader *r = hps_shard_open(path, NULL, &err);
    assert_non_null(r);
    *schema = hps_shard_reader_info(r)->schema;
    const hps_rows *rows;
    int n = 0, rc;
    while ((rc = hps_shard_next_block(r, &rows, &err)) > 0) {
        assert_true(n < max);
        out[n++] = copy_block(rows);
    }
    assert_int_equal(rc, 0);
    hps_shard_close(r);
    return n;
}

static void write_blocks(const char *path, const hps_schema *s, hps_rows **blocks, int n)
{
    hps_error err;
    hps_shard_writer *w = hps_shard_writer_create(path, s, HPS_SHARD_MAX_BLOCK_ROWS, &err);
    assert_non_null(w);
    void *cctx = ZSTD_createCCtx();
    hps_block b = {0};
    uint8_t *scratch = NULL;
    size_t scap = 0;
    for (int i = 0; i < n; i++) {
        hps_block_compress(blocks[i], cctx, 1, &b, &scratch, &scap);
        assert_int_equal(hps_shard_writer_add(w, &b, &err), 0);
    }
    assert_int_equal(hps_shard_writer_close(w, NULL, &err), 0);
    hps_block_free(&b);
    free(scratch);
    ZSTD_freeCCtx(cctx);
}

/* Shards written by hps-shard 0.1.0's version 1 (testdata/shards-v1: -0.0,
 * a denormal, FLT_MAX, blocks of 4 and 7 rows) still read, and the same
 * samples written as version 2 read back bit for bit. */
static void test_version_1_and_2_decode_alike(void **state)
{
    (void)state;
    const char *v1[] = {HPS_TESTDATA "/shards-v1/libsvm-dense/shard-00000.hps",
                        HPS_TESTDATA "/shards-v1/criteo-small/shard-00000.hps"};
    char path[128];
    tmp_shard(path, sizeof path);
    for (int t = 0; t < 2; t++) {
        hps_rows *old[16], *now[16];
        hps_schema s, s2;
        int n = read_blocks(v1[t], old, 16, &s);
        assert_true(n >= 2);
        write_blocks(path, &s, old, n);
        FILE *f = fopen(path, "rb");
        uint8_t head[12];
        assert_int_equal(fread(head, 1, 12, f), 12);
        fclose(f);
        assert_int_equal(head[8], 2); /* the version written */
        assert_int_equal(read_blocks(path, now, 16, &s2), n);
        for (int i = 0; i < n; i++) {
            assert_rows_identical(old[i], now[i]);
            hps_rows_free(old[i]), hps_rows_free(now[i]);
        }
    }
    unlink(path);
}

/* Version 2 payloads: every bit pattern of a dense value comes back (zeros
 * of both signs, NaNs, denormals), at row counts that leave the bitmap's
 * last byte part empty; a payload whose bitmap or values do not add up is
 * refused. */
static void test_payload_version_2(void **state)
{
    (void)state;
    hps_schema s = {5, 2, 1, 0, 2};
    const uint32_t bits[] = {0, 0x80000000u, 0x7fc00001u, 0xffffffffu, 1, 0x3f800000u, 0, 0};
    hps_rng g;
    hps_rng_seed(&g, 9);
    for (int rows = 1; rows <= 19; rows++) {
        hps_rows *a = hps_rows_create(&s, rows), *b = hps_rows_create(&s, 4);
        fill_random(a, rows, &g);
        for (int i = 0; i < rows; i++)
            for (int d = 0; d < s.n_dense; d++)
                memcpy(a->dense + (size_t)d * a->cap + i, &bits[hps_rng_below(&g, 8)], 4);
        size_t bound = hps_rows_payload_bound(a);
        uint8_t *buf = malloc(bound);
        size_t len = hps_rows_encode(a, buf);
        assert_true(len <= bound);
        assert_true(len >= hps_payload_least(&s, (uint64_t)rows, 2));
        assert_int_equal(hps_rows_decode(b, buf, len, rows, 2), 0);
        assert_rows_identical(a, b);
        /* batched: the dense columns left in the payload give every row range alike */
        hps_rows *c = hps_rows_create(&s, 4);
        assert_int_equal(hps_rows_decode_batched(c, buf, len, rows, 2), 0);
        assert_true(c->dense_in_payload);
        float want[19 * 5], got[19 * 5];
        for (int from = 0; from < rows; from++)
            for (int n = 1; from + n <= rows; n++) {
                hps_rows_dense_rows(b, from, n, want);
                hps_rows_dense_rows(c, from, n, got);
                assert_memory_equal(want, got, (size_t)n * 5 * 4);
                for (int i = 0; i < n; i++)
                    for (int d = 0; d < 5; d++)
                        assert_memory_equal(&want[i * 5 + d], a->dense + (size_t)d * a->cap + from + i, 4);
            }
        assert_int_equal(hps_rows_decode_batched(c, buf, len - 1, rows, 2), -1);
        hps_rows_free(c);
        assert_int_equal(hps_rows_decode(b, buf, len - 1, rows, 2), -1);
        assert_int_equal(hps_rows_decode(b, buf, len, rows, 1), -1); /* read as the other layout */
        if (rows % 8) { /* a bit for a row past the end */
            uint8_t *last = buf + 4 * (size_t)rows + (size_t)(rows + 7) / 8 - 1;
            *last |= 0x80;
            assert_int_equal(hps_rows_decode(b, buf, len, rows, 2), -1);
            assert_int_equal(hps_rows_decode_batched(b, buf, len, rows, 2), -1);
        }
        free(buf);
        hps_rows_free(a), hps_rows_free(b);
    }
}

static void test_seek_and_early_close(void **state)
{
    (void)state;
    char path[128];
    tmp_shard(path, sizeof path);
    hps_schema s = {2, 2, 0, 0, 2};
    hps_rows *keep[5];
    write_shard(path, &s, 5, 50, keep); /* blocks of 50, 49, 48, 50, 49 rows */
    hps_error err;
    hps_shard_reader *r = hps_shard_open(path, NULL, &err);
    assert_non_null(r);
    hps_batch *b = hps_batch_create(8, 2, 2, 16, 0);
    assert_int_equal(hps_shard_seek(r, 120, &err), 0); /* block 2, row 21 */
    assert_int_equal(hps_shard_read(r, b, 1, &err), 1);
    assert_true(b->dense[0] == keep[2]->dense[21] && b->labels[0] == keep[2]->labels[21]);
    assert_true(hps_shard_tell(r) == 121);
    assert_int_equal(hps_shard_seek(r, 246, &err), 0);
    assert_int_equal(hps_shard_read(r, b, 8, &err), 0);
    assert_int_equal(hps_shard_seek(r, 0, &err), 0);
    assert_int_equal(hps_shard_read(r, b, 8, &err), 8);
    assert_true(b->labels[7] == keep[0]->labels[7]);
    hps_shard_close(r); /* with the thread still decoding ahead */
    hps_batch_free(b);
    for (int i = 0; i < 5; i++) hps_rows_free(keep[i]);
    unlink(path);
}

static void flip_byte(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static void test_corruption(void **state)
{
    (void)state;
    char path[128];
    tmp_shard(path, sizeof path);
    hps_schema s = {3, 4, 0, 0, 2};
    hps_rows *keep[4];
    write_shard(path, &s, 4, 64, keep);
    hps_error err;
    hps_shard_reader *r = hps_shard_open(path, NULL, &err);
    assert_non_null(r);
    hps_shard_close(r);
    /* a byte inside block 2: found by the reader, naming shard and block */
    hps_shard_info info;
    assert_int_equal(hps_shard_verify(path, &info, &err), 0);
    flip_byte(path, (long)(info.bytes / 2));
    for (int ahead = 0; ahead <= 2; ahead += 2) {
        hps_shard_read_opts o = {.ahead = ahead};
        r = hps_shard_open(path, &o, &err);
        assert_non_null(r);
        hps_batch *b = hps_batch_create(32, 3, 4, 16, 0);
        int n;
        while ((n = hps_shard_read(r, b, 32, &err)) > 0) {}
        assert_int_equal(n, -1);
        assert_non_null(strstr(err.msg, path));
        assert_non_null(strstr(err.msg, ": block "));
        assert_non_null(strstr(err.msg, "checksum mismatch"));
        hps_batch_free(b);
        hps_shard_close(r);
    }
    flip_byte(path, (long)(info.bytes / 2)); /* undo; now the header */
    flip_byte(path, 20);
    assert_null(hps_shard_open(path, NULL, &err));
    assert_non_null(strstr(err.msg, "header: checksum mismatch"));
    flip_byte(path, 20);
    flip_byte(path, (long)info.bytes - 20); /* the index */
    assert_null(hps_shard_open(path, NULL, &err));
    assert_non_null(strstr(err.msg, "index"));
    for (int i = 0; i < 4; i++) hps_rows_free(keep[i]);
    unlink(path);
}

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* Rewrites bytes of a shard, then its header's and index's CRCs, as a forger
 * would: the checks that remain are the reader's sanity checks. */
static void forge(const char *path, long off, uint32_t v)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    uint8_t *buf = malloc((size_t)n);
    fseek(f, 0, SEEK_SET);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    put_u32(buf + off, v);
    uint64_t index;
    memcpy(&index, buf + 48, 8);
    put_u32(buf + 60, hps_crc32c(0, buf, 60));
    put_u32(buf + n - 8, hps_crc32c(0, buf + index, (size_t)(n - 8 - (long)index)));
    fseek(f, 0, SEEK_SET);
    assert_int_equal(fwrite(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    free(buf);
}

/* Headers and indexes with consistent CRCs but impossible sizes are refused
 * before anything is allocated (negative counts passed, and a small file
 * could ask for 256 GiB, before). */
static void test_hostile_header(void **state)
{
    (void)state;
    char path[128];
    tmp_shard(path, sizeof path);
    hps_schema s = {3, 4, 0, 0, 2};
    hps_rows *keep[1];
    hps_error err;
    write_shard(path, &s, 1, 8, keep);
    forge(path, 20, 0xffffffffu); /* n_dense -1 */
    assert_null(hps_shard_open(path, NULL, &err));
    assert_non_null(strstr(err.msg, "header: impossible schema or block size"));
    forge(path, 20, 3);
    forge(path, 24, 0x80000000u); /* n_slots INT_MIN */
    assert_null(hps_shard_open(path, NULL, &err));
    assert_non_null(strstr(err.msg, "header: impossible schema or block size"));
    forge(path, 24, 4);
    assert_non_null(keep[0]);
    hps_shard_reader *r = hps_shard_open(path, NULL, &err);
    assert_non_null(r);
    uint64_t index = 0;
    FILE *f = fopen(path, "rb");
    fseek(f, 48, SEEK_SET);
    assert_int_equal(fread(&index, 8, 1, f), 1);
    fclose(f);
    hps_shard_close(r);
    /* 65536 dense features and a block of 2^20 rows, in a file of a few hundred bytes */
    forge(path, 20, HPS_DATA_MAX_DENSE);
    forge(path, 32, HPS_SHARD_MAX_BLOCK_ROWS);
    forge(path, 40, HPS_SHARD_MAX_BLOCK_ROWS);
    forge(path, (long)index + 16 + 16, HPS_SHARD_MAX_BLOCK_ROWS); /* block 0's rows */
    assert_null(hps_shard_open(path, NULL, &err));
    assert_non_null(strstr(err.msg, "index: block 0: impossible entry"));
    hps_rows_free(keep[0]);
    unlink(path);
}

/* Labels outside the schema's classes (NaN, 1e6, 7 of 5) stop the read,
 * naming the block and row: the softmax read out of bounds on them before. */
static void test_bad_labels(void **state)
{
    (void)state;
    char path[128];
    tmp_shard(path, sizeof path);
    const float bad[] = {NAN, 1e6f, 7.0f, -1.0f, 0.5f};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        hps_schema s = {1, 1, 0, 1, 5};
        hps_error err;
        hps_shard_writer *w = hps_shard_writer_create(path, &s, 16, &err);
        assert_non_null(w);
        hps_rows *rows = hps_rows_create(&s, 16);
        hps_rng g;
        hps_rng_seed(&g, 1);
        fill_random(rows, 16, &g);
        rows->labels[9] = bad[k];
        void *cctx = ZSTD_createCCtx();
        hps_block b = {0};
        uint8_t *scratch = NULL;
        size_t scap = 0;
        hps_block_compress(rows, cctx, 1, &b, &scratch, &scap);
        assert_int_equal(hps_shard_writer_add(w, &b, &err), 0);
        hps_shard_info info;
        assert_int_equal(hps_shard_writer_close(w, &info, &err), 0);
        hps_block_free(&b);
        free(scratch);
        ZSTD_freeCCtx(cctx);
        hps_shard_reader *r = hps_shard_open(path, NULL, &err);
        assert_non_null(r);
        hps_batch *batch = hps_batch_create(16, 1, 1, 16, 0);
        assert_int_equal(hps_shard_read(r, batch, 16, &err), -1);
        assert_non_null(strstr(err.msg, ": block 0: row 9: label "));
        hps_batch_free(batch);
        hps_shard_close(r);
        hps_rows_free(rows);
    }
    unlink(path);
}

/* A dense value that is not finite (a forged shard: the text parsers refuse
 * them) stops the read, naming the file and the shard's row, on every path
 * that decodes blocks: batches, whole blocks, --verify.  It trained on into
 * NaN weights before (issue 26). */
static void test_bad_dense(void **state)
{
    (void)state;
    char path[128];
    tmp_shard(path, sizeof path);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    const char *shown[] = {"nan", "inf", "-inf"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        hps_schema s = {3, 1, 0, 0, 2};
        hps_error err;
        hps_shard_writer *w = hps_shard_writer_create(path, &s, 16, &err);
        assert_non_null(w);
        hps_rows *rows = hps_rows_create(&s, 16);
        hps_rng g;
        hps_rng_seed(&g, 1);
        void *cctx = ZSTD_createCCtx();
        hps_block b = {0};
        uint8_t *scratch = NULL;
        size_t scap = 0;
        for (int blk = 0; blk < 2; blk++) { /* block 1, row 5: the shard's row 21 */
            fill_random(rows, 16, &g);
            /* column 3's row 5 is the block's first bad row; column 1's row 7 comes later */
            if (blk == 1)
                rows->dense[2 * (size_t)rows->cap + 5] = bad[k], rows->dense[2 * (size_t)rows->cap + 9] = NAN,
                rows->dense[7] = -INFINITY;
            hps_block_compress(rows, cctx, 1, &b, &scratch, &scap);
            assert_int_equal(hps_shard_writer_add(w, &b, &err), 0);
        }
        assert_int_equal(hps_shard_writer_close(w, NULL, &err), 0);
        hps_block_free(&b);
        free(scratch);
        ZSTD_freeCCtx(cctx);
        char want[256];
        snprintf(want, sizeof want, "%s: row 21 (block 1, row 5): dense feature 3 is %s: expected a finite number", path,
                 shown[k]);
        hps_shard_reader *r = hps_shard_open(path, NULL, &err); /* batches: the values read in the payload */
        assert_non_null(r);
        hps_batch *batch = hps_batch_create(16, 3, 1, 64, 0);
        assert_int_equal(hps_shard_read(r, batch, 16, &err), 16);
        assert_int_equal(hps_shard_read(r, batch, 16, &err), -1);
        assert_string_equal(err.msg, want);
        hps_batch_free(batch);
        hps_shard_close(r);
        r = hps_shard_open(path, &(hps_shard_read_opts){.ahead = 0}, &err); /* whole blocks, no thread */
        const hps_rows *got;
        assert_int_equal(hps_shard_next_block(r, &got, &err), 1);
        assert_int_equal(hps_shard_next_block(r, &got, &err), -1);
        assert_string_equal(err.msg, want);
        hps_shard_close(r);
        assert_int_equal(hps_shard_verify(path, NULL, &err), -1);
        assert_string_equal(err.msg, want);
        hps_rows_free(rows);
    }
    unlink(path);
}

static void test_format_float(void **state)
{
    (void)state;
    char buf[32];
    hps_format_float(buf, sizeof buf, 0.1f);
    assert_string_equal(buf, "0.1");
    hps_format_float(buf, sizeof buf, -3.0f);
    assert_string_equal(buf, "-3");
    hps_rng g;
    hps_rng_seed(&g, 3);
    for (int i = 0; i < 1000; i++) {
        float v = (float)(hps_rng_normal(&g) * 1e3);
        hps_format_float(buf, sizeof buf, v);
        assert_true(strtof(buf, NULL) == v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c),          cmocka_unit_test(test_key_hash),
        cmocka_unit_test(test_criteo_parse),    cmocka_unit_test(test_criteo_parse_edges),
        cmocka_unit_test(test_libsvm_parse),
        cmocka_unit_test(test_libsvm_values_as_strtod),
        cmocka_unit_test(test_split_exact),     cmocka_unit_test(test_plan_read),
        cmocka_unit_test(test_round_trip),      cmocka_unit_test(test_seek_and_early_close),
        cmocka_unit_test(test_blocks_of_a_batched_reader),
        cmocka_unit_test(test_version_1_and_2_decode_alike), cmocka_unit_test(test_payload_version_2),
        cmocka_unit_test(test_corruption),      cmocka_unit_test(test_format_float),
        cmocka_unit_test(test_hostile_header),  cmocka_unit_test(test_bad_labels), cmocka_unit_test(test_bad_dense),
        cmocka_unit_test(test_sha256_pieces),
    };
    return cmocka_run_group_tests_name("shard", tests, NULL, NULL);
}
