/* What the CPU kernels' files share and nothing outside lib/kernels sees. */
#ifndef HPS_KERNELS_INTERNAL_H
#define HPS_KERNELS_INTERNAL_H

/* The loops outside BLAS (activations, bias, optimizer updates, gathers and
 * pooling) compiled three times, for the baseline x86-64 (SSE2), for AVX2
 * with FMA (x86-64-v3) and for AVX-512 (x86-64-v4); the loader picks the
 * one this CPU runs (GCC's function multiversioning: an ifunc resolver that
 * reads cpuid once, as OpenBLAS's kernels are chosen).  The semantics do not
 * change: C11 mode keeps a * b + c unfused (-ffp-contract=off), and no loop
 * reassociates a sum, so every clone computes the same floats (test_kernels).
 * Elsewhere (clang, other machines) one plain build. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 12 && \
    !defined(HPS_NO_CLONES)
#define HPS_VECTOR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define HPS_VECTOR_CLONES
#endif

#endif
