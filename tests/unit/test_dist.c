/* Unit tests of lib/dist's pure parts: the re-balancing law, slices, routing;
 * with Open MPI, a server's row state messages through the probe's loopback. */
#include "hps_test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    memset(d, 0, sizeof *d);
    d->size = 2, d->workers = 1, d->servers = 1;
    d->roles[1] = (dist_role){.kind = ROLE_SERVER};
    d->worker_rank[0] = 0, d->server_rank[0] = 1;
    dist_server_create(sv, d, 0, *m, &plan, &o);
    plan_file_free(&plan);
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
    assert_non_null(strstr(err.msg, "not a table layer whose rows this server holds"));
    free(got);
    free(put);
    dist_server_state_free(&d, &ss);
    dist_server_free(&sv);
    hps_model_free(m);
}

/* The roles of a 5-rank job (workers: rank 0 stage 0, rank 1 stage 1;
 * servers: ranks 2-4) from a plan whose two stages, layers [0, 0] and
 * [1, 3], say `stages` of their servers. */
static void roles_of(hps_dist *d, const char *stages)
{
    char path[] = "/tmp/hps-dist-route-XXXXXX", text[1024];
    snprintf(text, sizeof text,
             "{\"format\": \"hps-plan\", \"version\": 1, \"stages\": [%s], "
             "\"workers\": [{\"rank\": 0, \"stage\": 0}, {\"rank\": 1, \"stage\": 1}], "
             "\"servers\": {\"count\": 3, \"ranks\": [2, 3, 4]}}",
             stages);
    int fd = mkstemp(path);
    assert_true(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    hps_error err;
    memset(d, 0, sizeof *d);
    d->size = 5;
    assert_int_equal(dist_read_roles(d, path, &err), 0);
    unlink(path);
}

/* Each stage's layers over the servers `first`, `first` + 1, ... of its own. */
static void routes_over(const hps_dist *d, int layer, int first, int n)
{
    int seen[3] = {0};
    for (uint64_t k = 0; k < 300; k++) {
        int s = dist_server_of(d, layer, k);
        assert_true(s >= first && s < first + n);
        assert_int_equal(s, first + hps_dist_route(k, n));
        seen[s]++;
    }
    for (int s = 0; s < 3; s++) {
        assert_int_equal(dist_serves(d, s, layer), s >= first && s < first + n);
        assert_true(!seen[s] == !(s >= first && s < first + n));
    }
}

/* The routing a plan's per-stage servers give: those of their own first,
 * stage by stage, then those beside; without per-stage counts adding up
 * to servers.count, every layer over all of them. */
static void test_route_by_stage(void **state)
{
    (void)state;
    hps_dist *d = hps_malloc(sizeof *d);
    roles_of(d, "{\"type\": \"cpu\", \"units\": 1, \"layers\": [0, 0], \"servers\": 2},"
                "{\"type\": \"cpu\", \"units\": 1, \"layers\": [1, 3], \"servers\": 1, \"servers_beside\": true}");
    assert_true(d->by_stage);
    routes_over(d, 0, 0, 2);
    for (int l = 1; l < 4; l++) routes_over(d, l, 2, 1);
    /* stage 0 beside its unit, stage 1 apart: stage 1's come first */
    roles_of(d, "{\"type\": \"cpu\", \"units\": 1, \"layers\": [0, 0], \"servers\": 1, \"servers_beside\": true},"
                "{\"type\": \"cpu\", \"units\": 1, \"layers\": [1, 3], \"servers\": 2}");
    routes_over(d, 0, 2, 1);
    routes_over(d, 3, 0, 2);
    /* older and hand-written plans: no counts, or counts that do not add up */
    roles_of(d, "{\"type\": \"cpu\", \"units\": 1, \"layers\": [0, 0]},"
                "{\"type\": \"cpu\", \"units\": 1, \"layers\": [1, 3]}");
    assert_false(d->by_stage);
    routes_over(d, 0, 0, 3);
    routes_over(d, 3, 0, 3);
    roles_of(d, "{\"type\": \"cpu\", \"units\": 1, \"layers\": [0, 0], \"servers\": 2},"
                "{\"type\": \"cpu\", \"units\": 1, \"layers\": [1, 3], \"servers\": 2}");
    assert_false(d->by_stage);
    routes_over(d, 1, 0, 3);
    free(d);
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
        cmocka_unit_test(test_route_by_stage),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
