/* hps_blas: cpuid against openblas_get_corename, and the re-exec that fixes it. */
#include "core/hps_blas.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/resource.h>
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

/* ---- the environment OpenBLAS and OpenMP start with ---------------------------
 *
 * Both read it in their constructors, before main(), so only a fresh process
 * sees a change: blas_preinit sets what is missing and re-executes the tool
 * at once, from .preinit_array (an executable's preinit functions run before
 * any library's constructor; what setenv adds there is lost when libc's
 * own start resets the environment, an exec keeps it).  What the user set is kept.
 *
 * - Kernels and OpenBLAS share one OpenMP pool.  Threads that spin between
 *   kernels (libgomp's default) take the cores from the shard decoder and
 *   from other stages; on a busy 2-core machine a 2-thread step ran 5-10x
 *   slower than with passive waits: OMP_WAIT_POLICY=passive.
 * - OpenBLAS's constructor allocates one buffer of BUFFER_SIZE (128 MiB on
 *   x86-64: address space, not resident memory) for each thread it starts
 *   with, one a core by default (8 GiB on a 64-core host), and when a limit
 *   on the address space (ulimit -v) refuses one it retries forever at 100%
 *   CPU.  The tools set their threads themselves (hps_set_threads; OpenBLAS
 *   then allocates the buffers of the threads used), so OpenBLAS and OpenMP
 *   start with one thread (OMP_NUM_THREADS, which an OpenMP build of
 *   OpenBLAS follows, and OPENBLAS_NUM_THREADS), and restore_start_env gives
 *   them back; a limit too small for the buffers is one line and exit 1.
 *
 * HPS_BLAS_START, in the re-executed tool's environment only, says which of
 * the three it set (W, O, B). */
#define START_MARK "HPS_BLAS_START"
#define BLAS_BUFFER_BYTES ((size_t)128 << 20)
#define TOOL_START_BYTES ((size_t)32 << 20) /* the tool's own start, beside the buffers */

static const struct {
    char flag;
    const char *name, *value;
} start_env[] = {{'W', "OMP_WAIT_POLICY", "passive"}, {'O', "OMP_NUM_THREADS", "1"},
                 {'B', "OPENBLAS_NUM_THREADS", "1"}};

/* The threads OpenBLAS's constructor will start, by the environment. */
static size_t start_threads(void)
{
    long n = 1;
    for (int i = 1; i < 3; i++) {
        const char *v = getenv(start_env[i].name);
        long k = v ? strtol(v, NULL, 10) : 0;
        if (k > n) n = k;
    }
    return (size_t)(n > 1024 ? 1024 : n);
}

/* Whether bytes more of address space can be had now. */
static int address_space_for(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return 0;
    munmap(p, bytes);
    return 1;
}

/* Exits with one line when the address space cannot hold what OpenBLAS's
 * constructor is about to allocate: it would spin instead. */
static void check_start_memory(char **argv)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
    size_t threads = start_threads(), need = threads * BLAS_BUFFER_BYTES + TOOL_START_BYTES;
    if (address_space_for(need)) return;
    const char *name = argv && argv[0] ? strrchr(argv[0], '/') : NULL;
    name = name ? name + 1 : argv && argv[0] ? argv[0] : "hps";
    fprintf(stderr, "%s: error: the address-space limit (ulimit -v %llu) leaves less than the %zu MiB "
                    "that OpenBLAS (%zu thread%s) and the tool need to start\n",
            name, (unsigned long long)(rl.rlim_cur >> 10), need >> 20, threads, threads > 1 ? "s" : "");
    _exit(HPS_EXIT_RUNTIME);
}

static void blas_preinit(int argc, char **argv, char **envp)
{
    (void)argc;
    environ = envp; /* libc's start sets it later: getenv and setenv need it now */
    char set[4] = "";
    int k = 0;
    if (!getenv(START_MARK))
        for (int i = 0; i < 3; i++)
            if (!getenv(start_env[i].name) && setenv(start_env[i].name, start_env[i].value, 1) == 0)
                set[k++] = start_env[i].flag;
    check_start_memory(argv);
    if (!k || setenv(START_MARK, set, 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* no /proc: run as we are (libc's start drops what we set) */
}

__attribute__((used, section(".preinit_array"))) static void (*const preinit_blas)(int, char **, char **) =
    blas_preinit;

/* OpenBLAS's own buffer pool (exported, not in cblas.h): a product takes
 * a buffer from it for its run; one taken and given back stays allocated
 * for the next product. */
void *blas_memory_alloc(int procpos);
void blas_memory_free(void *buffer);

/* Threads whose buffers OpenBLAS holds (it never frees one), and the pool
 * buffers reserved for callers. */
static int blas_threads_held, blas_callers_held;

int hps_blas_threads_fit(int n)
{
    if (!blas_threads_held) blas_threads_held = (int)start_threads();
    struct rlimit rl;
    int limited = getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
    while (limited && n > 1 && n > blas_threads_held &&
           !address_space_for((size_t)(n - blas_threads_held) * BLAS_BUFFER_BYTES + TOOL_START_BYTES))
        n--;
    if (n > blas_threads_held) blas_threads_held = n;
    return n;
}

int hps_blas_reserve_callers(int n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return n;
    void *taken[256];
    int k = 0;
    /* taken all at once, so that each is a buffer of its own */
    while (k < n && k < 256 && (k < blas_callers_held || address_space_for(BLAS_BUFFER_BYTES + TOOL_START_BYTES)))
        taken[k++] = blas_memory_alloc(0);
    for (int i = 0; i < k; i++) blas_memory_free(taken[i]);
    if (k > blas_callers_held) blas_callers_held = k;
    return k;
}

/* What blas_preinit set for the constructors only goes once they ran (the
 * executable's constructors run after its libraries'): OpenMP's threads are
 * its default again, and the tool's children start as it did.  The wait
 * policy stays: it is what the tool runs with. */
__attribute__((constructor)) static void restore_start_env(void)
{
    const char *set = getenv(START_MARK);
    if (!set) return;
    for (int i = 1; i < 3; i++)
        if (strchr(set, start_env[i].flag)) unsetenv(start_env[i].name);
    blas_threads_held = (int)start_threads();
    if (strchr(set, 'O')) omp_set_num_threads(omp_get_num_procs());
    unsetenv(START_MARK);
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
    if (!fix_core) return;
    /* OpenBLAS reads it in its constructor: only a fresh process sees it */
    setenv("OPENBLAS_CORETYPE", want, 1);
    setenv(REEXEC_MARK, want, 1);
    execv("/proc/self/exe", argv);
    int e = errno;
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(REEXEC_MARK);
    hps_warnf("cannot re-execute with openblas's %s kernels (%s); running on its %s kernels, "
              "several times slower",
              want, strerror(e), have);
}
