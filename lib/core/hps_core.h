/* hps_core: error reporting, display levels, allocation, time, versions.
 *
 * Every tool reports errors the git way: "PROG: error: SUBJECT: what", one
 * line on stderr.  Library code does not exit; it formats the message into an
 * hps_error and returns -1 so that the tool decides the exit code
 * (HPS_EXIT_USAGE for bad input, HPS_EXIT_RUNTIME for failures while working).
 */
#ifndef HPS_CORE_H
#define HPS_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The version is the Makefile's VERSION, passed as -DHPS_VERSION: one string. */
#ifndef HPS_VERSION
#error "HPS_VERSION is defined by the Makefile (VERSION)"
#endif

enum { HPS_EXIT_OK = 0, HPS_EXIT_RUNTIME = 1, HPS_EXIT_USAGE = 2 };

/* A formatted, one-line error message and the exit code it deserves. */
typedef struct {
    char msg[512];
    int code; /* HPS_EXIT_USAGE or HPS_EXIT_RUNTIME */
} hps_error;

/* Fills err (may be NULL) and returns -1, so callers can `return hps_fail(...)`. */
int hps_fail(hps_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Program name used as the prefix of every message ("hps-profile"). */
void hps_set_progname(const char *name);
const char *hps_progname(void);

/* Display levels, as in zstd's programs/: 0 silent, 1 errors, 2 normal
 * (default: warnings too), 3 verbose, 4 debug.  Messages go to stderr.
 * -q is level 1 and each -v adds one, in every tool (core/hps_cli.h). */
extern int hps_display_level;
void hps_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hps_report(const hps_error *err); /* "PROG: error: MSG" */
void hps_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hps_warnf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Fail-fast checks for programming errors: print file and line, then
 * abort.  Never used for bad user input.  The allocators below end the
 * tool when memory runs out: one error line and exit 1 (not an abort). */
#define HPS_CHECK(cond)                                                        \
    do {                                                                       \
        if (!(cond)) hps_panic(__FILE__, __LINE__, #cond);                     \
    } while (0)
_Noreturn void hps_panic(const char *file, int line, const char *what);

_Noreturn void hps_out_of_memory(size_t n, const char *file, int line);
void *hps_malloc_(size_t n, const char *file, int line);
void *hps_calloc_(size_t count, size_t size, const char *file, int line);
void *hps_realloc_(void *p, size_t n, const char *file, int line);
#define hps_malloc(n) hps_malloc_((n), __FILE__, __LINE__)
#define hps_calloc(c, s) hps_calloc_((c), (s), __FILE__, __LINE__)
#define hps_realloc(p, n) hps_realloc_((p), (n), __FILE__, __LINE__)
char *hps_strdup(const char *s);
/* Memory read at random over many MiB (an embedding table's rows, its
 * hash): asks the kernel for 2 MiB pages for the whole 2 MiB pages inside
 * [p, p+n), where transparent huge pages are left to madvise (the kernel's
 * "madvise" mode); with 4 KiB pages a lookup in a table of GBs misses the
 * TLB on each of its cache lines.  Nothing where the kernel does not know
 * the advice or n is below 4 MiB; call it again after a realloc moves p. */
void hps_advise_random(void *p, size_t n);

/* Text from an input, made safe to echo in a one-line message: at most n-4
 * bytes, anything outside printable ASCII as '?', "..." when cut. */
const char *hps_printable(const char *s, char *buf, size_t n);
/* The same for the len bytes at s (a field inside a line). */
const char *hps_printable_n(const char *s, size_t len, char *buf, size_t n);
/* A name that goes into files other tools read (a rankfile's hosts): 1 or
 * more letters, digits, '.', '-', '_' or one of `extra`.  1 when s is one. */
int hps_name_ok(const char *s, const char *extra);

/* A checksum or digest check: 1 when it matched.  The fuzz build (`make
 * fuzz`, and only it, defines FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION as
 * zstd's and OSS-Fuzz's do) lets every mismatch pass, so that mutated inputs
 * reach the parsers behind the CRCs and SHA-256s; the sum is still computed. */
int hps_checksum_ok(int matched);

/* Overflow-checked size addition: 0 on success, -1 on overflow. */
int hps_add_size(size_t a, size_t b, size_t *out);

/* Sorts n doubles ascending, in place; the median of n > 0 values (a copy is sorted). */
void hps_sort_doubles(double *v, int n);
double hps_median(const double *v, int n);

/* Monotonic clock in seconds. */
double hps_now(void);

/* Is stderr a terminal (progress bars only then)? */
int hps_stderr_is_tty(void);

/* Parses a non-negative integer / positive double from an option argument. */
int hps_parse_long(const char *s, long min, long max, long *out);
int hps_parse_double(const char *s, double *out);

/* A rate or a count as people type them: decimal digits with an optional
 * exponent (2e5) and an optional SI suffix, k or K (10^3), M (10^6),
 * G (10^9), T (10^12): "500k", "1.5M".  Finite, no hex, no inf or nan;
 * 0 on success, -1 otherwise. */
int hps_parse_number(const char *s, double *out);
/* The other way, for tables: at most `digits` significant digits and never an
 * exponent, a million and more with the suffix hps_parse_number reads back
 * ("93542.7", "3.93252M", "100M"), so that a column reads one way. */
const char *hps_format_number(double v, int digits, char *buf, size_t n);

#endif
