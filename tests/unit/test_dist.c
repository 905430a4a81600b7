/* Unit tests of lib/dist's pure parts: the re-balancing law, slices, routing;
 * with Open MPI, a server's row state messages through the probe's loopback. */
#include <string.h>

#include "hps_test.h"

#include "dist/hps_dist.h"
#if HPS_MPI
#include "dist/dist_internal.h"
#endif

/* Slices are disjoint, cover the batch, and follow the shares. */
static void test_slices_cover(void **state)
{
    (void)state;
    const double share[3] = {0.2, 0.5, 0.3};
    for (int n = 0; n < 200; n++) {
        int next = 0;
        for (int w = 0; w < 3; w++) {
            int lo, hi;
            hps_dist_slice(share, 3, w, n, &lo, &hi);
            assert_int_equal(lo, next);
            assert_true(hi >= lo);
            next = hi;
        }
        assert_int_equal(next, n);
    }
    int lo, hi;
    hps_dist_slice(share, 3, 1, 1000, &lo, &hi);
    assert_int_equal(lo, 200);
    assert_int_equal(hi, 700);
}

/* A worker 3x slower ends near a quarter of the rows, damped on the way. */
static void test_rebalance_converges(void **state)
{
    (void)state;
    double share[2] = {0.5, 0.5}, speed[2] = {0, 0};
    double prev = share[1];
    for (int step = 0; step < 20; step++) {
        /* compute time proportional to rows, worker 1 three times slower */
        double rows[2] = {share[0] * 1000, share[1] * 1000};
        double secs[2] = {rows[0] * 1e-3, rows[1] * 3e-3};
        hps_dist_rebalance(share, speed, rows, secs, 2, 0.5, 0.05);
        assert_true(share[1] <= prev + 1e-12); /* moves one way, no overshoot */
        assert_true(share[1] >= 0.25 - 1e-9);
        prev = share[1];
        assert_close(share[0] + share[1], 1.0, 1e-12, "sum of shares", step);
    }
    assert_close(share[1], 0.25, 1e-3, "slow worker's share", 0);
}

/* No share falls below the minimum, even for a very slow worker. */
static void test_rebalance_min_share(void **state)
{
    (void)state;
    double share[2] = {0.5, 0.5}, speed[2] = {0, 0};
    for (int step = 0; step < 40; step++) {
        double rows[2] = {share[0] * 1000, share[1] * 1000};
        double secs[2] = {rows[0] * 1e-3, rows[1] * 1.0};
        hps_dist_rebalance(share, speed, rows, secs, 2, 0.5, 0.05);
    }
    assert_true(share[1] >= 0.045); /* the minimum, then normalised */
    assert_true(share[1] < 0.06);
}

static void test_route_spreads(void **state)
{
    (void)state;
    int count[4] = {0};
    for (uint64_t k = 0; k < 4000; k++) count[hps_dist_route(k, 4)]++;
    for (int s = 0; s < 4; s++) assert_true(count[s] > 800 && count[s] < 1200);
    assert_int_equal(hps_dist_route(12345, 1), 0);
}

#if HPS_MPI
/* A worker (rank 0) and a server (rank 1) in this process, as the exchange
 * probe has them: the server's answers wait in d->loop_msg. */
static void state_job(hps_dist *d, dist_server *sv, dist_server_state *ss, hps_model **m)
{
    hps_error err;
    char path[512];
    snprintf(path, sizeof path, "%s/models/criteo-small.json", HPS_TESTDATA);
    *m = hps_model_load(path, &err);
    if (!*m) fail_msg("%s", err.msg);
    plan_file plan;
    hps_train_plan_single(*m, &plan);
    hps_train_opts o = hps_train_opts_default();
    dist_server_create(sv, *m, &plan, &o);
    plan_file_free(&plan);
    memset(d, 0, sizeof *d);
    d->size = 2, d->workers = 1, d->servers = 1;
    d->roles[1] = (dist_role){.kind = ROLE_SERVER};
    d->worker_rank[0] = 0, d->server_rank[0] = 1;
    d->loop = sv, d->loop_state = ss;
    *ss = (dist_server_state){0};
}

/* The server's answer to msg (tag) from the worker: 0 or -1, its bytes in *got. */
static int state_ask(hps_dist *d, dist_server *sv, dist_server_state *ss, const void *msg, size_t n, int tag,
                     char **got, size_t *len, hps_error *err)
{
    char *copy = hps_malloc(n + 1);
    memcpy(copy, msg, n);
    free(d->loop_msg), d->loop_msg = NULL;
    int rc = dist_server_handle(d, sv, ss, copy, n, 0, tag, err);
    *got = d->loop_msg, *len = d->loop_len;
    d->loop_msg = NULL;
    return rc;
}

/* A put stores a row's weights and accumulators as sent, applying nothing;
 * a get returns them; a truncated put is an error, not a crash. */
static void test_server_row_state(void **state)
{
    (void)state;
    hps_dist d;
    dist_server sv;
    dist_server_state ss;
    hps_model *m;
    state_job(&d, &sv, &ss, &m);
    int D = m->layers[0].dim;
    dist_entry e = {.layer = 0, .slot = 1, .key = 424242};
    size_t n = sizeof e + 2 * (size_t)D * sizeof(float);
    char *put = hps_malloc(n);
    memcpy(put, &e, sizeof e);
    for (int i = 0; i < 2 * D; i++) ((float *)(put + sizeof e))[i] = 0.25f * (float)(i + 1);
    char *got;
    size_t len;
    hps_error err;
    assert_int_equal(state_ask(&d, &sv, &ss, put, n, TAG_STATE_PUT, &got, &len, &err), 0);
    assert_int_equal(len, 0); /* the acknowledgement */
    free(got);
    assert_int_equal(state_ask(&d, &sv, &ss, &e, sizeof e, TAG_STATE_GET, &got, &len, &err), 0);
    assert_int_equal(len, 2 * (size_t)D * sizeof(float));
    assert_memory_equal(got, put + sizeof e, len);
    free(got);
    assert_int_equal(d.st.rows_served, 1);
    /* a key never put: its first values, an accumulator of zeros */
    dist_entry fresh = {.layer = 0, .slot = 1, .key = 7};
    assert_int_equal(state_ask(&d, &sv, &ss, &fresh, sizeof fresh, TAG_STATE_GET, &got, &len, &err), 0);
    assert_int_equal(len, 2 * (size_t)D * sizeof(float));
    free(got);
    /* truncated: the entry alone, then half of it */
    assert_int_equal(state_ask(&d, &sv, &ss, put, sizeof e + 4, TAG_STATE_PUT, &got, &len, &err), -1);
    assert_non_null(strstr(err.msg, "truncated"));
    free(got);
    assert_int_equal(state_ask(&d, &sv, &ss, put, sizeof e / 2, TAG_STATE_GET, &got, &len, &err), -1);
    free(got);
    /* a layer that has no table */
    dist_entry bad = {.layer = 3, .slot = 0, .key = 1};
    assert_int_equal(state_ask(&d, &sv, &ss, &bad, sizeof bad, TAG_STATE_GET, &got, &len, &err), -1);
    assert_non_null(strstr(err.msg, "not an embedding layer"));
    free(got);
    free(put);
    dist_server_state_free(&d, &ss);
    dist_server_free(&sv);
    hps_model_free(m);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slices_cover),
        cmocka_unit_test(test_rebalance_converges),
        cmocka_unit_test(test_rebalance_min_share),
        cmocka_unit_test(test_route_spreads),
#if HPS_MPI
        cmocka_unit_test(test_server_row_state),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
