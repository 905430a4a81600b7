/* hps_blas: the right OpenBLAS kernels for this CPU.
 *
 * Debian's OpenBLAS 0.3.21 is built with DYNAMIC_ARCH and picks its kernels in
 * a library constructor, before main().  On CPUs it does not know (an AVX-512
 * Xeon of family 6 model 207, for one) it falls back to the SSE3 "Prescott"
 * kernels, 4-6x slower at sgemm.  hps_blas_init() compares OpenBLAS's choice
 * with the CPU's vector extensions and, when OpenBLAS chose worse, re-executes
 * the tool with OPENBLAS_CORETYPE set, so the constructor chooses again.
 * Before that, from .preinit_array, the tool starts OpenMP and OpenBLAS with
 * one thread (hps_blas.c says why): start-up memory does not grow with the
 * cores, and an address-space limit too small is an error, not a hang.
 */
#ifndef HPS_BLAS_H
#define HPS_BLAS_H

/* The vector extensions that decide the kernel set (cpuid and, for the
 * register state, xgetbv: the OS must save ymm/zmm for AVX/AVX-512 to work). */
typedef struct {
    int avx, avx2, fma;
    int avx512f, avx512cd, avx512bw, avx512dq, avx512vl;
    int os_ymm, os_zmm;
} hps_cpu_features;

void hps_cpu_features_detect(hps_cpu_features *f);

/* The vector width class of a kernel set: 0 SSE, 1 AVX, 2 AVX2+FMA, 3 AVX-512. */
int hps_cpu_features_level(const hps_cpu_features *f);
int hps_blas_core_level(const char *corename);

/* The OpenBLAS core to ask for on a CPU with these features, NULL when the
 * generic SSE kernels are the best it can run. */
const char *hps_blas_core_for(const hps_cpu_features *f);

/* First thing in main(), after hps_set_progname: may exec the tool again
 * (same argv, OPENBLAS_CORETYPE and OMP_WAIT_POLICY=passive set) and so never
 * return.  What the user set in either is kept; slower kernels it cannot fix
 * are one warning. */
void hps_blas_init(char **argv);

/* OpenBLAS needs a buffer of 128 MiB of address space for each of its
 * threads and for each product running at once, allocates them when first
 * needed and retries forever, at 100% CPU, when the address-space limit
 * (ulimit -v) refuses one.  hps_blas_threads_fit: how many of n threads
 * fit (at least 1); hps_blas_reserve_callers: allocates the buffers of n
 * products at once (the pipeline's stages) while they fit, and returns how
 * many it has.  Both are n where there is no limit. */
int hps_blas_threads_fit(int n);
int hps_blas_reserve_callers(int n);

/* The kernel set OpenBLAS runs with ("SkylakeX"). */
const char *hps_blas_corename(void);

#endif
