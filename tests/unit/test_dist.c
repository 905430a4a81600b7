/* Unit tests of lib/dist's pure parts: the re-balancing law, slices, routing. */
#include "hps_test.h"

#include "dist/hps_dist.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slices_cover),
        cmocka_unit_test(test_rebalance_converges),
        cmocka_unit_test(test_rebalance_min_share),
        cmocka_unit_test(test_route_spreads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
