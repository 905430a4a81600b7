/* hps_blas: cpuid against openblas_get_corename, and the re-exec that fixes it. */
#include "core/hps_blas.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/hps_core.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

char *openblas_get_corename(void);

/* Set in the environment of the re-executed tool only: it must not try again. */
#define REEXEC_MARK "HPS_BLAS_REEXEC"

#if defined(__x86_64__) || defined(__i386__)
static unsigned long long xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

void hps_cpu_features_detect(hps_cpu_features *f)
{
    unsigned a, b, c, d;
    memset(f, 0, sizeof *f);
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    int osxsave = (c >> 27) & 1;
    f->avx = (c >> 28) & 1;
    f->fma = (c >> 12) & 1;
    if (osxsave) {
        unsigned long long xcr0 = xgetbv0();
        f->os_ymm = (xcr0 & 0x6) == 0x6;   /* xmm and ymm state */
        f->os_zmm = (xcr0 & 0xe6) == 0xe6; /* and opmask, zmm0-15 hi, zmm16-31 */
    }
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    f->avx2 = (b >> 5) & 1;
    f->avx512f = (b >> 16) & 1;
    f->avx512dq = (b >> 17) & 1;
    f->avx512cd = (b >> 28) & 1;
    f->avx512bw = (b >> 30) & 1;
    f->avx512vl = (b >> 31) & 1;
}
#else
void hps_cpu_features_detect(hps_cpu_features *f) { memset(f, 0, sizeof *f); }
#endif

int hps_cpu_features_level(const hps_cpu_features *f)
{
    if (!f->avx || !f->os_ymm) return 0;
    /* OpenBLAS's SkylakeX kernels use all five AVX-512 subsets */
    if (f->avx2 && f->fma && f->os_zmm && f->avx512f && f->avx512cd && f->avx512bw && f->avx512dq &&
        f->avx512vl)
        return 3;
    if (f->avx2 && f->fma) return 2;
    return 1;
}

/* OpenBLAS's x86 core names by kernel class; unknown names (other
 * architectures, newer cores) count as good enough: never "fix" what we do not know. */
int hps_blas_core_level(const char *corename)
{
    static const char *const sse[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                                      "Atom", "Athlon", "Opteron", "Opteron(SSE3)", "Barcelona",
                                      "Bobcat", "Katmai", "Coppermine", "Northwood", "Banias"};
    static const char *const avx[] = {"Sandybridge", "Bulldozer", "Piledriver", "Steamroller"};
    static const char *const avx2[] = {"Haswell", "Zen", "Excavator"};
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    if (!corename) return 3;
    for (size_t i = 0; i < sizeof sse / sizeof *sse; i++)
        if (!strcasecmp(corename, sse[i])) return 0;
    for (size_t i = 0; i < sizeof avx / sizeof *avx; i++)
        if (!strcasecmp(corename, avx[i])) return 1;
    for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
        if (!strcasecmp(corename, avx2[i])) return 2;
    for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
        if (!strcasecmp(corename, avx512[i])) return 3;
    return 3;
}

const char *hps_blas_core_for(const hps_cpu_features *f)
{
    static const char *const by_level[] = {NULL, "Sandybridge", "Haswell", "SkylakeX"};
    return by_level[hps_cpu_features_level(f)];
}

const char *hps_blas_corename(void)
{
    const char *name = openblas_get_corename();
    return name && *name ? name : "unknown";
}

/* After the re-exec: did the kernels we asked for arrive? */
static void check_reexec(const char *asked, const char *have)
{
    if (*asked && hps_blas_core_level(have) < hps_blas_core_level(asked))
        hps_warnf("openblas kept its %s kernels with OPENBLAS_CORETYPE=%s; this CPU runs %s: "
                  "matrix products run several times slower",
                  have, asked, asked);
}

void hps_blas_init(char **argv)
{
    const char *have = hps_blas_corename(), *mark = getenv(REEXEC_MARK);
    if (mark) {
        char asked[64];
        snprintf(asked, sizeof asked, "%s", mark);
        unsetenv(REEXEC_MARK); /* the tool's own children start afresh */
        check_reexec(asked, have);
        return;
    }
    hps_cpu_features f;
    hps_cpu_features_detect(&f);
    const char *want = hps_blas_core_for(&f), *user = getenv("OPENBLAS_CORETYPE");
    int fix_core = want && hps_blas_core_level(have) < hps_blas_core_level(want);
    if (fix_core && user) {
        hps_log(3, "%s: OPENBLAS_CORETYPE=%s chooses %s kernels; this CPU runs %s\n", hps_progname(),
                user, have, want);
        fix_core = 0;
    }
    /* Kernels and OpenBLAS share one OpenMP pool.  Threads that spin between
     * kernels (libgomp's default) take the cores from the shard decoder and
     * from other stages; on a busy 2-core machine a 2-thread step ran 5-10x
     * slower than with passive waits. */
    int fix_wait = getenv("OMP_WAIT_POLICY") == NULL;
    if (!fix_core && !fix_wait) return;
    /* OpenBLAS and libgomp read these in their constructors: only a fresh
     * process sees them */
    if (fix_core) setenv("OPENBLAS_CORETYPE", want, 1);
    if (fix_wait) setenv("OMP_WAIT_POLICY", "passive", 1);
    setenv(REEXEC_MARK, fix_core ? want : "", 1);
    execv("/proc/self/exe", argv);
    int e = errno;
    if (fix_core) unsetenv("OPENBLAS_CORETYPE");
    if (fix_wait) unsetenv("OMP_WAIT_POLICY");
    unsetenv(REEXEC_MARK);
    if (fix_core)
        hps_warnf("cannot re-execute with openblas's %s kernels (%s); running on its %s kernels, "
                  "several times slower",
                  want, strerror(e), have);
}
