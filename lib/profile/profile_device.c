/* Device micro-benchmarks, device names and the parsing of device lists. */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hps_rng.h"
#include "kernels/hps_backend.h"
#include "profile/hps_profile.h"

int hps_device_parse(const char *list, hps_device_spec *specs, int max, int *n, hps_error *err)
{
    char *copy = hps_strdup(list), *save = NULL;
    int count = 0, rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && rc == 0;
         tok = strtok_r(NULL, ",", &save)) {
        hps_device_spec d = {0};
        long v = 0;
        if (count == max) {
            rc = hps_fail(err, HPS_EXIT_USAGE, "--devices: at most %d devices", max);
        } else if (strcmp(tok, "cpu") == 0) {
            d.kind = HPS_DEVICE_CPU;
        } else if (strncmp(tok, "cpu:", 4) == 0 && hps_parse_long(tok + 4, 1, 4096, &v) == 0) {
            d.kind = HPS_DEVICE_CPU;
            d.threads = (int)v;
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            /* more threads than cores times contention, not the layer */
            if (cores > 0 && v > cores)
                hps_warnf("--devices: '%s' asks for %ld threads on %ld cores; the times will include waiting "
                          "for cores", tok, v, cores);
        } else if (strncmp(tok, "cuda:", 5) == 0 && hps_parse_long(tok + 5, 0, 255, &v) == 0) {
            d.kind = HPS_DEVICE_CUDA;
            d.ordinal = (int)v;
        } else {
            rc = hps_fail(err, HPS_EXIT_USAGE,
                          "--devices: '%s' is not a device (expected cpu, cpu:N or cuda:K)", tok);
        }
        for (int i = 0; i < count && rc == 0; i++)
            if (strcmp(specs[i].id, tok) == 0)
                rc = hps_fail(err, HPS_EXIT_USAGE, "--devices: '%s' is given twice", tok);
        if (rc == 0) {
            snprintf(d.id, sizeof d.id, "%s", tok);
            specs[count++] = d;
        }
    }
    free(copy);
    if (rc == 0 && count == 0) rc = hps_fail(err, HPS_EXIT_USAGE, "--devices: empty list");
    *n = count;
    return rc;
}

void hps_cpu_model_name(char *out, size_t n)
{
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon += 1 + strspn(colon + 1, " \t");
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(out, n, "%s", colon);
        break;
    }
    fclose(f);
}

double hps_host_memory_bytes(void)
{
    return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

void hps_device_list(FILE *out)
{
    char name[256];
    hps_cpu_model_name(name, sizeof name);
    fprintf(out, "cpu\t%s\t%d threads\t%.1f GiB\n", name, hps_max_threads(),
            hps_host_memory_bytes() / (1 << 30));
    for (int k = 0; k < hps_cuda_device_count(); k++) {
        double mem = 0;
        if (hps_cuda_device_info(k, name, sizeof name, &mem) == 0)
            fprintf(out, "cuda:%d\t%s\t-\t%.1f GiB\n", k, name, mem / (1 << 30));
    }
}

/* Best of reps: micro-benchmarks report the rate the device can reach. */
static double best_of(double *t, int reps)
{
    hps_sort_doubles(t, reps);
    return t[0];
}

double hps_bench_sgemm_gflops(int n, int reps)
{
    size_t nn = (size_t)n * n;
    float *a = hps_malloc(3 * nn * sizeof *a), *b = a + nn, *c = b + nn;
    hps_rng r;
    hps_rng_seed(&r, 1);
    for (size_t i = 0; i < 2 * nn; i++) a[i] = hps_rng_range(&r, -1, 1);
    double *t = hps_malloc((size_t)reps * sizeof *t);
    for (int i = -2; i < reps; i++) { /* untimed runs first wake the thread pool */
        double t0 = hps_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        if (i >= 0) t[i] = hps_now() - t0;
    }
    double best = best_of(t, reps);
    free(a);
    free(t);
    return 2.0 * n * (double)n * n / best / 1e9;
}

double hps_bench_triad_gbps(size_t n, int reps)
{
    float *a = hps_malloc(3 * n * sizeof *a), *b = a + n, *c = b + n;
    for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2;
    double *t = hps_malloc((size_t)reps * sizeof *t);
    const float s = 3.0f;
    for (int i = -1; i < reps; i++) {
        double t0 = hps_now();
#pragma omp parallel for schedule(static)
        for (size_t j = 0; j < n; j++) a[j] = b[j] + s * c[j];
        if (i >= 0) t[i] = hps_now() - t0;
    }
    double best = best_of(t, reps);
    HPS_CHECK(a[n / 2] == 7.0f); /* keeps the loop from being optimised away */
    free(a);
    free(t);
    return 3.0 * n * sizeof(float) / best / 1e9;
}

/* Two threads hand a token back and forth under one mutex and condition
 * variable, as hps-train's stage threads hand on micro-batches
 * (lib/train/train_pipeline.c). */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int turn, rounds;
} handoff;

static void *handoff_partner(void *arg)
{
    handoff *h = arg;
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < h->rounds; i++) {
        while (h->turn != 1) pthread_cond_wait(&h->wake, &h->lock);
        h->turn = 0;
        pthread_cond_broadcast(&h->wake);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

double hps_bench_handoff_us(int rounds, int reps)
{
    double *t = hps_malloc((size_t)reps * sizeof *t);
    for (int r = 0; r < reps; r++) {
        handoff h = {.turn = 0, .rounds = rounds};
        pthread_t partner;
        pthread_mutex_init(&h.lock, NULL);
        pthread_cond_init(&h.wake, NULL);
        HPS_CHECK(pthread_create(&partner, NULL, handoff_partner, &h) == 0);
        double t0 = hps_now();
        pthread_mutex_lock(&h.lock);
        for (int i = 0; i < rounds; i++) {
            h.turn = 1;
            pthread_cond_broadcast(&h.wake);
            while (h.turn != 0) pthread_cond_wait(&h.wake, &h.lock);
        }
        pthread_mutex_unlock(&h.lock);
        t[r] = (hps_now() - t0) / (2.0 * rounds);
        pthread_join(partner, NULL);
        pthread_mutex_destroy(&h.lock);
        pthread_cond_destroy(&h.wake);
    }
    double med = hps_median(t, reps);
    free(t);
    return med * 1e6;
}

double hps_bench_gather_mrows(int dim, int64_t rows, int reps)
{
    const int n = 1 << 16;
    float *table = hps_calloc((size_t)rows * dim, sizeof *table);
    float *out = hps_calloc((size_t)n * dim, sizeof *out);
    int64_t *idx = hps_malloc((size_t)n * sizeof *idx), *offsets = hps_malloc((n + 1) * sizeof *offsets);
    hps_rng r;
    hps_rng_seed(&r, 2);
    hps_zipf z;
    hps_zipf_init(&z, (uint64_t)rows, 1.05);
    for (int i = 0; i < n; i++) {
        /* scatter Zipf ranks over the table so hot rows are not neighbours */
        idx[i] = (int64_t)(hps_mix64(hps_zipf_draw(&z, &r)) % (uint64_t)rows);
        offsets[i] = i;
    }
    offsets[n] = n;
    hps_bags bags = {.B = n, .S = 1, .offsets = offsets, .rows = idx, .weights = NULL};
    double *t = hps_malloc((size_t)reps * sizeof *t);
    for (int i = -1; i < reps; i++) {
        double t0 = hps_now();
        embedding_bag_forward(out, dim, table, &bags, dim, HPS_POOL_SUM);
        if (i >= 0) t[i] = hps_now() - t0;
    }
    double best = best_of(t, reps);
    free(table), free(out), free(idx), free(offsets), free(t);
    return n / best / 1e6;
}

double hps_fixed_fraction(double full_ms, double half_ms)
{
    double f = full_ms > 0 ? (2 * half_ms - full_ms) / full_ms : 0;
    return f < 0 ? 0 : f > 1 ? 1 : f;
}

double hps_fit_parallel_fraction(const int *units, const double *ms, int n)
{
    /* t(k) = t1 - a t1 (1 - 1/k): regress (t1 - t(k)) on t1 (1 - 1/k) */
    if (n < 2 || ms[0] <= 0) return 0.0;
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        double x = ms[0] * (1.0 - 1.0 / units[i]), y = ms[0] - ms[i];
        num += x * y;
        den += x * x;
    }
    double a = den > 0 ? num / den : 0.0;
    return a < 0 ? 0.0 : a > 1 ? 1.0 : a;
}

int hps_device_threads(const hps_device_spec *dev) { return dev->threads ? dev->threads : hps_max_threads(); }
