#include "core/hps_core.h"
#include "core/hps_blas.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int hps_display_level = 2;
static const char *progname = "hps";

/* Every tool calls this first, so the process-wide settings live here too:
 * past `ulimit -f` a write fails with EFBIG, reported and cleaned up like any
 * other write error, instead of SIGXFSZ killing the tool mid-file. */
void hps_set_progname(const char *name)
{
    signal(SIGXFSZ, SIG_IGN);
    const char *slash = strrchr(name, '/');
    progname = slash ? slash + 1 : name;
}

const char *hps_progname(void) { return progname; }

int hps_fail(hps_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return -1;
}

void hps_log(int level, const char *fmt, ...)
{
    if (level > hps_display_level) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

void hps_report(const hps_error *err)
{
    fprintf(stderr, "%s: error: %s\n", progname, err->msg);
}

void hps_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", progname);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void hps_warnf(const char *fmt, ...)
{
    if (hps_display_level < 2) return; /* -q: errors only */
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: warning: ", progname);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

_Noreturn void hps_panic(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s: fatal: %s:%d: check failed: %s\n", progname, file, line, what);
    abort();
}

/* Running out of memory is the machine's limit (ulimit -v, a container),
 * not a bug: one line and exit 1, and the atexit handlers remove the
 * temporaries, where an abort would dump core and leave them. */
_Noreturn void hps_out_of_memory(size_t n, const char *file, int line)
{
    fprintf(stderr, "%s: error: out of memory: %zu bytes more refused (%s:%d)\n", progname, n, file, line);
    exit(HPS_EXIT_RUNTIME);
}

void *hps_malloc_(size_t n, const char *file, int line)
{
    void *p = malloc(n ? n : 1);
    if (!p) hps_out_of_memory(n, file, line);
    return p;
}

void *hps_calloc_(size_t count, size_t size, const char *file, int line)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) hps_out_of_memory(count * size, file, line);
    return p;
}

void *hps_realloc_(void *p, size_t n, const char *file, int line)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) hps_out_of_memory(n, file, line);
    return q;
}

void hps_advise_random(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20, start = ((uintptr_t)p + huge - 1) & ~(huge - 1),
                    end = ((uintptr_t)p + n) & ~(huge - 1);
    if (n >= 2 * huge && end > start) (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}

char *hps_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = hps_malloc(n);
    memcpy(d, s, n);
    return d;
}

const char *hps_printable_n(const char *s, size_t len, char *buf, size_t n)
{
    size_t k = len + 1 <= n ? len : n - 4;
    for (size_t i = 0; i < k; i++) buf[i] = s[i] >= 32 && s[i] < 127 ? s[i] : '?';
    strcpy(buf + k, k < len ? "..." : "");
    return buf;
}

const char *hps_printable(const char *s, char *buf, size_t n)
{
    return hps_printable_n(s, strlen(s), buf, n);
}

int hps_name_ok(const char *s, const char *extra)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("._-", *s) && !strchr(extra, *s)) return 0;
    return 1;
}

int hps_checksum_ok(int matched)
{
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    (void)matched;
    return 1;
#else
    return matched;
#endif
}

int hps_add_size(size_t a, size_t b, size_t *out)
{
    if (b > SIZE_MAX - a) return -1;
    *out = a + b;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void hps_sort_doubles(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmp_double); }

double hps_median(const double *v, int n)
{
    double *t = hps_malloc((size_t)n * sizeof *t);
    memcpy(t, v, (size_t)n * sizeof *t);
    hps_sort_doubles(t, n);
    double m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}

double hps_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int hps_stderr_is_tty(void) { return isatty(STDERR_FILENO); }

int hps_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int hps_parse_number(const char *s, double *out)
{
    /* strtod would also take "inf", "nan" and hex: a number here is digits */
    const char *p = s + (*s == '+' || *s == '-');
    if (!(isdigit((unsigned char)p[0]) || (p[0] == '.' && isdigit((unsigned char)p[1])))) return -1;
    if (strpbrk(p, "xX")) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s) return -1;
    static const char suffixes[] = "kKMGT";
    static const double scale[] = {1e3, 1e3, 1e6, 1e9, 1e12};
    const char *at = *end ? strchr(suffixes, *end) : NULL;
    if (at) v *= scale[at - suffixes], end++;
    if (*end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

const char *hps_format_number(double v, int digits, char *buf, size_t n)
{
    static const char suffix[] = "MGT";
    double a = fabs(v);
    if (!isfinite(v) || a < 1e6) {
        /* below a million: %g's exponent only past `digits` digits: print those whole */
        if (isfinite(v) && a >= pow(10, digits)) snprintf(buf, n, "%.0f", v);
        else snprintf(buf, n, "%.*g", digits, v);
        return buf;
    }
    int k = a >= 1e12 ? 2 : a >= 1e9 ? 1 : 0;
    snprintf(buf, n, "%.*g%c", digits, v / pow(1e3, k + 2), suffix[k]);
    return buf;
}

int hps_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v != v) return -1;
    *out = v;
    return 0;
}
