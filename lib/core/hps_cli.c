#include "core/hps_cli.h"
#include "core/hps_blas.h"

#include <cblas.h>
#include <math.h>
#ifdef HPS_MPI
#include <mpi.h>
#endif
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef HPS_COMMIT
#define HPS_COMMIT "unknown"
#endif

_Noreturn void hps_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", hps_progname());
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\ntry '%s --help'\n", hps_progname());
    exit(HPS_EXIT_USAGE);
}

void hps_cli_quiet(void) { hps_display_level = 1; }
void hps_cli_verbose(void) { hps_display_level++; }

/* ---- nearest name ----------------------------------------------------------- */

/* Optimal string alignment distance: a swapped pair counts as one edit, the
 * commonest typo of an option name. */
static int edit_distance(const char *a, const char *b)
{
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 64 || m > 64) return 1000;
    int d[65][65];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

const char *hps_cli_nearest(const char *word, const char *const *names)
{
    const char *best = NULL;
    int best_d = 1 + (int)strlen(word) / 4; /* a typo, not another word */
    if (best_d > 3) best_d = 3;
    for (int i = 0; names[i]; i++) {
        int d = edit_distance(word, names[i]);
        if (d <= best_d && d < (int)strlen(word)) best = names[i], best_d = d - 1;
    }
    return best;
}

static void append_choices(char *buf, size_t n, const char *const *names)
{
    for (int i = 0; names[i]; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", i ? ", " : "", names[i]);
    }
}

_Noreturn void hps_cli_unknown_command(const char *word, const char *const *names)
{
    const char *near = hps_cli_nearest(word, names);
    char list[512] = "";
    append_choices(list, sizeof list, names);
    if (near) hps_usage_error("'%s' is not a command; did you mean '%s'?", word, near);
    hps_usage_error("'%s' is not a command (commands: %s)", word, list);
}

/* ---- subcommands ------------------------------------------------------------- */

int hps_cli_dispatch(int argc, char **argv, const hps_cli_command *commands, hps_cli_fn default_action,
                     hps_cli_operands operands)
{
    const char *names[32];
    int n = 0;
    for (; commands[n].name && n < 31; n++) names[n] = commands[n].name;
    names[n] = NULL;
    const char *word = argc > 1 ? argv[1] : NULL;
    for (int i = 0; word && i < n; i++)
        if (strcmp(word, names[i]) == 0) {
            argv[1] = argv[0]; /* the command's argv: the program, then its arguments */
            return commands[i].run(argc - 1, argv + 1);
        }
    if (word && word[0] != '-') {
        if (operands == HPS_CLI_OPTIONS) hps_cli_unknown_command(word, names);
        /* an input file, unless it names none and looks like a mistyped command */
        if (word[0] && access(word, F_OK) != 0 && hps_cli_nearest(word, names)) hps_cli_unknown_command(word, names);
    }
    return default_action(argc, argv);
}

/* ---- options ---------------------------------------------------------------- */

static int long_names(const struct option *longopts, const char **names, int max)
{
    int n = 0;
    for (int i = 0; longopts[i].name && n < max - 1; i++) names[n++] = longopts[i].name;
    names[n] = NULL;
    return n;
}

static _Noreturn void unknown_long(const char *arg, const struct option *longopts)
{
    char word[128];
    const char *names[256];
    snprintf(word, sizeof word, "%s", arg + 2);
    word[strcspn(word, "=")] = '\0';
    int n = long_names(longopts, names, 256);
    char which[512] = "";
    int matches = 0;
    for (int i = 0; i < n; i++)
        if (strncmp(names[i], word, strlen(word)) == 0) {
            size_t len = strlen(which);
            snprintf(which + len, sizeof which - len, "%s--%s", matches++ ? ", " : "", names[i]);
        }
    if (matches > 1) hps_usage_error("option '--%s' is ambiguous: %s", word, which);
    const char *near = hps_cli_nearest(word, names);
    if (near) hps_usage_error("unknown option '--%s'; did you mean '--%s'?", word, near);
    hps_usage_error("unknown option '--%s'", word);
}

int hps_cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
    char opts[128];
    snprintf(opts, sizeof opts, ":%s", shortopts); /* ':' reports a missing value apart */
    opterr = 0;
    int c = getopt_long(argc, argv, opts, longopts, NULL);
    if (c == '?') {
        const char *arg = argv[optind - 1];
        if (optopt == 0 && strncmp(arg, "--", 2) == 0) unknown_long(arg, longopts);
        hps_usage_error("unknown option '-%c'", optopt);
    }
    if (c == ':') {
        const char *arg = argv[optind - 1];
        if (strncmp(arg, "--", 2) == 0) hps_usage_error("option '%s' needs a value", arg);
        hps_usage_error("option '-%c' needs a value", optopt);
    }
    return c;
}

void hps_cli_deprecated_letter(char letter, const char *long_name, char new_letter)
{
    if (new_letter)
        hps_warnf("-%c is deprecated for --%s and will go in the next release; use -%c or --%s (hps(7), OPTION LETTERS)",
                  letter, long_name, new_letter, long_name);
    else
        hps_warnf("-%c is deprecated for --%s and will go in the next release; use --%s (hps(7), OPTION LETTERS)",
                  letter, long_name, long_name);
}

long hps_cli_long(const char *opt, const char *arg, long min, long max)
{
    long v;
    if (hps_parse_long(arg, min, max, &v))
        hps_usage_error("%s: '%s' is not an integer in [%ld, %ld]", opt, arg, min, max);
    return v;
}

double hps_cli_double(const char *opt, const char *arg, double min, double max)
{
    double v;
    if (hps_parse_double(arg, &v) || !(v >= min && v <= max))
        hps_usage_error("%s: '%s' is not a number in [%g, %g]", opt, arg, min, max);
    return v;
}

double hps_cli_positive(const char *opt, const char *arg)
{
    double v;
    if (hps_parse_double(arg, &v) || !(v > 0) || !isfinite(v))
        hps_usage_error("%s: '%s' is not a positive number", opt, arg);
    return v;
}

long hps_cli_count(const char *opt, const char *arg, long min, long max)
{
    double v;
    if (hps_parse_number(arg, &v))
        hps_usage_error("%s: '%s' is not a count (digits, an exponent or a suffix: 500, 2e5, 500k, 1.5M)", opt, arg);
    if (v != floor(v)) hps_usage_error("%s: '%s' is not a whole number", opt, arg);
    if (!(v >= (double)min && v <= (double)max) || v >= 0x1p63) /* (double)LONG_MAX rounds up */
        hps_usage_error("%s: '%s' is not a count in [%ld, %ld]", opt, arg, min, max);
    return (long)v;
}

double hps_cli_rate(const char *opt, const char *arg)
{
    double v;
    if (hps_parse_number(arg, &v))
        hps_usage_error("%s: '%s' is not a number (digits, an exponent or a suffix: 500, 2e5, 500k, 1.5M)", opt, arg);
    if (!(v > 0)) hps_usage_error("%s: '%s' is not a positive number", opt, arg);
    return v;
}

int hps_cli_choice(const char *opt, const char *arg, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(arg, names[i]) == 0) return i;
    char list[512] = "";
    append_choices(list, sizeof list, names);
    const char *near = hps_cli_nearest(arg, names);
    if (near) hps_usage_error("%s: '%s' is not one of %s; did you mean '%s'?", opt, arg, list, near);
    hps_usage_error("%s: '%s' is not one of %s", opt, arg, list);
}

/* ---- version -------------------------------------------------- */

void hps_cli_version(FILE *out)
{
    fprintf(out, "%s (hps) %s\n", hps_progname(), HPS_VERSION);
    fprintf(out, "commit: %s\n", HPS_COMMIT);
    fprintf(out, "features: openblas zstd jansson%s%s\n",
#ifdef HPS_MPI
            " mpi",
#else
            "",
#endif
#ifdef HPS_CUDA
            " cuda"
#else
            ""
#endif
    );
    fprintf(out, "blas: openblas %s\n", hps_blas_corename()); /* the kernel set in use */
    fprintf(out, "blas-build: %s\n", openblas_get_config());
#if !defined(HPS_MPI)
    fprintf(out, "mpi: none (built with MPI=0: one process only)\n");
#elif defined(OMPI_MAJOR_VERSION)
    fprintf(out, "mpi: Open MPI %d.%d.%d (MPI %d.%d)\n", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
            OMPI_RELEASE_VERSION, MPI_VERSION, MPI_SUBVERSION);
#else
    fprintf(out, "mpi: MPI %d.%d\n", MPI_VERSION, MPI_SUBVERSION);
#endif
}
