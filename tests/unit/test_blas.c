/* The BLAS kernel choice: CPU features to an OpenBLAS core, and when
 * OpenBLAS's own choice counts as worse. */
#include "hps_test.h"

#include <string.h>

#include "core/hps_blas.h"

static hps_cpu_features with(const char *flags)
{
    hps_cpu_features f = {0};
    const struct {
        const char *name;
        int *bit;
    } map[] = {{"avx", &f.avx},         {"avx2", &f.avx2},         {"fma", &f.fma},
               {"avx512f", &f.avx512f}, {"avx512cd", &f.avx512cd}, {"avx512bw", &f.avx512bw},
               {"avx512dq", &f.avx512dq}, {"avx512vl", &f.avx512vl}, {"ymm", &f.os_ymm},
               {"zmm", &f.os_zmm}};
    char buf[256];
    snprintf(buf, sizeof buf, "%s", flags);
    for (char *save, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save))
        for (size_t i = 0; i < sizeof map / sizeof *map; i++)
            if (!strcmp(w, map[i].name)) *map[i].bit = 1;
    return f;
}

#define AVX512 "avx avx2 fma avx512f avx512cd avx512bw avx512dq avx512vl"

static void test_core_for_features(void **state)
{
    (void)state;
    const struct {
        const char *flags, *core;
    } table[] = {
        {"", NULL},
        {"avx", NULL},                        /* the OS saves no ymm: SSE only */
        {"avx ymm", "Sandybridge"},
        {"avx avx2 ymm", "Sandybridge"},      /* AVX2 without FMA */
        {"avx avx2 fma ymm", "Haswell"},
        {AVX512 " ymm", "Haswell"},           /* the OS saves no zmm */
        {AVX512 " ymm zmm", "SkylakeX"},      /* Xeon family 6 model 207 */
        {"avx avx2 fma avx512f ymm zmm", "Haswell"}, /* Knights Landing: no BW/VL */
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        hps_cpu_features f = with(table[i].flags);
        const char *got = hps_blas_core_for(&f);
        if (!table[i].core ? got != NULL : !got || strcmp(got, table[i].core))
            fail_msg("'%s': %s, expected %s", table[i].flags, got ? got : "none",
                     table[i].core ? table[i].core : "none");
    }
}

static void test_core_levels(void **state)
{
    (void)state;
    assert_int_equal(hps_blas_core_level("Prescott"), 0);
    assert_int_equal(hps_blas_core_level("nehalem"), 0);
    assert_int_equal(hps_blas_core_level("Sandybridge"), 1);
    assert_int_equal(hps_blas_core_level("Haswell"), 2);
    assert_int_equal(hps_blas_core_level("Zen"), 2);
    assert_int_equal(hps_blas_core_level("SkylakeX"), 3);
    assert_int_equal(hps_blas_core_level("Cooperlake"), 3);
    /* a core hps does not know is never "fixed" */
    assert_int_equal(hps_blas_core_level("NeoverseN1"), 3);
    /* OpenBLAS's Prescott on an AVX-512 CPU is the mismatch re-executing fixes */
    hps_cpu_features f = with(AVX512 " ymm zmm");
    assert_true(hps_blas_core_level("Prescott") < hps_blas_core_level(hps_blas_core_for(&f)));
    assert_false(hps_blas_core_level("Cooperlake") < hps_blas_core_level(hps_blas_core_for(&f)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_core_for_features),
        cmocka_unit_test(test_core_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
