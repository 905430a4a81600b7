/* This machine's CPU spec sheet (hps-profile --describe-cpu): the figures
 * the CPU device model reads (hps-profile(1), ESTIMATES), from
 * /proc/cpuinfo and sysconf, and its two rates measured rather than taken
 * from a vendor's page, so that the sheet predicts what this machine runs. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/hps_kernels.h"
#include "profile/hps_profile.h"

typedef struct {
    double mhz;           /* the fastest core's */
    int vector_width;     /* fp32 lanes of the widest vector unit */
    int fma;
    int cores_per_socket, sockets;
} cpuinfo;

/* Whether the flags line (" fpu vme ... avx2 ...") has the flag. */
static int has_flag(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = strstr(flags, flag); p; p = strstr(p + 1, flag))
        if ((p == flags || isspace((unsigned char)p[-1])) && (p[n] == '\0' || isspace((unsigned char)p[n])))
            return 1;
    return 0;
}

static void read_flags(const char *flags, cpuinfo *c)
{
    c->vector_width = has_flag(flags, "avx512f") ? 16 : has_flag(flags, "avx") ? 8 : 4;
    c->fma = has_flag(flags, "fma") || has_flag(flags, "asimd");
}

static cpuinfo read_cpuinfo(void)
{
    cpuinfo c = {.vector_width = 4};
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return c;
    char line[8192];
    int seen_flags = 0, max_socket = -1;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        const char *v = colon + 1 + strspn(colon + 1, " \t");
        double x = atof(v);
        if (strncmp(line, "cpu MHz", 7) == 0 && x > c.mhz) c.mhz = x;
        else if (strncmp(line, "cpu cores", 9) == 0) c.cores_per_socket = (int)x;
        else if (strncmp(line, "physical id", 11) == 0 && (int)x > max_socket) max_socket = (int)x;
        else if (!seen_flags && (strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0))
            read_flags(v, &c), seen_flags = 1;
    }
    fclose(f);
    c.sockets = max_socket + 1;
    return c;
}

double hps_cpu_clock_ghz(void) { return read_cpuinfo().mhz / 1000; }

/* A cache's size from sysconf in units (1024: KiB), 0 when not known. */
static double cache_size(int name, double unit)
{
    long v = sysconf(name);
    return v > 0 ? v / unit : 0;
}

/* "cpu-HOST", the host name as a device id may spell it. */
static void sheet_name(char *out, size_t n)
{
    char host[256] = "host";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.' && *p != '_') *p = '-';
    snprintf(out, n, "cpu-%.200s", host);
}

static void set_positive(json_t *o, const char *key, double v)
{
    if (v > 0) json_object_set_new(o, key, json_real(round(v * 1000) / 1000));
}

json_t *hps_cpu_describe(const char *name, int threads)
{
    cpuinfo c = read_cpuinfo();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int cores = c.cores_per_socket > 0 && c.sockets > 0 ? c.cores_per_socket * c.sockets : (int)online;
    if (threads < cores) cores = threads; /* measured on fewer: the sheet is of those */
    hps_set_threads(threads);
    double gflops = hps_bench_sgemm_gflops(1024, 5), gbps = hps_bench_triad_gbps(1 << 24, 5);
    char model[256], id[256], comment[512];
    hps_cpu_model_name(model, sizeof model);
    if (!name) sheet_name(id, sizeof id), name = id;
    snprintf(comment, sizeof comment,
             "measured by hps-profile --describe-cpu on %d threads: peak_gflops is the best of five 1024^3 "
             "sgemm, mem_gbps of five STREAM triads (attainable 1: rates reached, not published); the rest from "
             "/proc/cpuinfo and sysconf", threads);
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i}", "name", name, "kind", "cpu", "model", model, "cores", cores,
                          "threads", threads);
    set_positive(o, "clock_ghz", c.mhz / 1000);
    json_object_set_new(o, "vector_width", json_integer(c.vector_width));
    json_object_set_new(o, "flops_per_cycle", json_integer(c.vector_width * (c.fma ? 4 : 2)));
    set_positive(o, "peak_gflops", gflops);
    set_positive(o, "mem_gbps", gbps);
    json_object_set_new(o, "attainable", json_integer(1));
    set_positive(o, "memory_gb", hps_host_memory_bytes() / 1073741824.0);
    set_positive(o, "l1d_kib", cache_size(_SC_LEVEL1_DCACHE_SIZE, 1024));
    set_positive(o, "l2_kib", cache_size(_SC_LEVEL2_CACHE_SIZE, 1024));
    set_positive(o, "l3_mib", cache_size(_SC_LEVEL3_CACHE_SIZE, 1048576));
    json_object_set_new(o, "comment", json_string(comment));
    return o;
}
