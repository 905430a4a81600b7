/* hps_cli: the command-line layer the four tools share, so that they agree on
 * how a bad option is reported, what -q and -v mean, and what --version says.
 *
 * A usage error is two lines on stderr and exit status 2:
 *   hps-plan: error: --format: 'tabel' is not one of json, table, dot, svg; did you mean 'table'?
 *   try 'hps-plan --help'
 * -q means errors only (display level 1); each -v adds one level (3 verbose,
 * 4 debug).
 */
#ifndef HPS_CLI_H
#define HPS_CLI_H

#include <getopt.h>
#include <stdio.h>

#include "core/hps_core.h"

/* "PROG: error: MSG" and the "try --help" line, then exit 2. */
_Noreturn void hps_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* getopt_long that reports unknown options with the nearest known one and
 * missing values by name, as a usage error; returns like getopt_long. */
int hps_cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);

/* A short option letter that meant something else in this tool than it does
 * across the toolkit (hps(7), OPTION LETTERS): it keeps its old meaning for
 * one release, with a one-line warning naming what to type instead
 * (new_letter 0: the long option alone). */
void hps_cli_deprecated_letter(char letter, const char *long_name, char new_letter);

/* -q and -v: the one meaning of both across the tools. */
void hps_cli_quiet(void);
void hps_cli_verbose(void);

/* Value parsers: each exits with a usage error naming OPT and the range. */
long hps_cli_long(const char *opt, const char *arg, long min, long max);
double hps_cli_double(const char *opt, const char *arg, double min, double max);
double hps_cli_positive(const char *opt, const char *arg); /* finite and > 0 */
/* A count or a rate as people type them (hps_parse_number: 500k, 2e5,
 * 1.5M): a count is a whole number in [min, max], a rate finite and > 0. */
long hps_cli_count(const char *opt, const char *arg, long min, long max);
double hps_cli_rate(const char *opt, const char *arg);
/* Index of arg in names (NULL-terminated); otherwise the error lists the
 * choices and suggests the nearest. */
int hps_cli_choice(const char *opt, const char *arg, const char *const *names);

/* The name in names (NULL-terminated) nearest to word by edit distance, or
 * NULL when none is close enough to be a likely typo. */
const char *hps_cli_nearest(const char *word, const char *const *names);

/* An unknown subcommand: usage error with the nearest of names. */
_Noreturn void hps_cli_unknown_command(const char *word, const char *const *names);

/* One subcommand of a tool, as git.c's commands[]: "hps-plan show PLAN" runs
 * run(argc, argv) with "show" taken out of argv, argv[0] still the program,
 * so that the command parses its options with getopt as the tool's default
 * action does and its messages name the program alone. */
typedef int (*hps_cli_fn)(int argc, char **argv);
typedef struct {
    const char *name;
    hps_cli_fn run;
} hps_cli_command;

/* What the first argument may be when it names no command. */
typedef enum {
    HPS_CLI_OPTIONS, /* an option (or nothing): any other word is an unknown command */
    HPS_CLI_FILES,   /* also an operand of the default action, an input file: a word that
                        names no file and is near a command's name is a mistyped command */
} hps_cli_operands;

/* main's dispatch: the command of commands[] (ending {NULL, NULL}) that
 * argv[1] names, else the default action with argv as it is; returns what
 * it returns.  A word that is no command is hps_cli_unknown_command's error. */
int hps_cli_dispatch(int argc, char **argv, const hps_cli_command *commands, hps_cli_fn default_action,
                     hps_cli_operands operands);

/* --version: program, version, commit, and the features this binary was
 * built with (BLAS kernel set, MPI, CUDA). */
void hps_cli_version(FILE *out);

#endif
