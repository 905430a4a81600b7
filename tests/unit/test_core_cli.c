/* The subcommand dispatch of lib/core/hps_cli.c: a command gets argv with
 * its name taken out, the default action gets argv as it is, and a word
 * that is no command is a usage error naming the nearest. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/hps_cli.h"

static const char *ran;
static int ran_argc;
static char **ran_argv;

static int record(const char *what, int argc, char **argv)
{
    ran = what, ran_argc = argc, ran_argv = argv;
    return 7;
}
static int cmd_show(int argc, char **argv) { return record("show", argc, argv); }
static int cmd_cat(int argc, char **argv) { return record("cat", argc, argv); }
static int cmd_default(int argc, char **argv) { return record("default", argc, argv); }

static const hps_cli_command commands[] = {{"show", cmd_show}, {"cat", cmd_cat}, {NULL, NULL}};

static int dispatch(int argc, char **argv, hps_cli_operands how)
{
    ran = NULL;
    return hps_cli_dispatch(argc, argv, commands, cmd_default, how);
}

static void test_command_gets_its_arguments(void **state)
{
    (void)state;
    char *argv[] = {"hps-x", "cat", "-o", "f", "a", NULL};
    assert_int_equal(dispatch(5, argv, HPS_CLI_OPTIONS), 7);
    assert_string_equal(ran, "cat");
    assert_int_equal(ran_argc, 4);
    assert_string_equal(ran_argv[0], "hps-x"); /* getopt and messages see the program */
    assert_string_equal(ran_argv[1], "-o");
    assert_null(ran_argv[4]);
}

static void test_default_action(void **state)
{
    (void)state;
    char *none[] = {"hps-x", NULL}, *opt[] = {"hps-x", "-m", "show", NULL};
    dispatch(1, none, HPS_CLI_OPTIONS);
    assert_string_equal(ran, "default");
    dispatch(3, opt, HPS_CLI_OPTIONS); /* a command's name after an option is an operand */
    assert_string_equal(ran, "default");
    assert_int_equal(ran_argc, 3);
    assert_ptr_equal(ran_argv, opt);
}

/* HPS_CLI_FILES: an existing file, or a word near no command, is the default's input. */
static void test_file_operands(void **state)
{
    (void)state;
    char *file[] = {"hps-x", HPS_TESTDATA "/models/tiny.json", NULL}, *far[] = {"hps-x", "input.tsv", NULL};
    char *empty[] = {"hps-x", "", NULL};
    dispatch(2, file, HPS_CLI_FILES);
    assert_string_equal(ran, "default");
    dispatch(2, far, HPS_CLI_FILES);
    assert_string_equal(ran, "default");
    dispatch(2, empty, HPS_CLI_FILES);
    assert_string_equal(ran, "default");
}

/* The usage error of a child that dispatches argv: its status, and stderr. */
static int unknown(char **argv, hps_cli_operands how, char *msg, size_t n)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        hps_set_progname("hps-x");
        dispatch(2, argv, how);
        _exit(0);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t got;
    while (len < n - 1 && (got = read(fds[0], msg + len, n - 1 - len)) > 0) len += (size_t)got; /* to EOF */
    msg[len] = '\0';
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_unknown_command(void **state)
{
    (void)state;
    char msg[512];
    char *typo[] = {"hps-x", "shwo", NULL}, *other[] = {"hps-x", "frobnicate", NULL}, *empty[] = {"hps-x", "", NULL};
    assert_int_equal(unknown(typo, HPS_CLI_OPTIONS, msg, sizeof msg), 2);
    assert_string_equal(msg, "hps-x: error: 'shwo' is not a command; did you mean 'show'?\ntry 'hps-x --help'\n");
    assert_int_equal(unknown(other, HPS_CLI_OPTIONS, msg, sizeof msg), 2);
    assert_string_equal(msg, "hps-x: error: 'frobnicate' is not a command (commands: show, cat)\n"
                             "try 'hps-x --help'\n");
    assert_int_equal(unknown(empty, HPS_CLI_OPTIONS, msg, sizeof msg), 2);
    /* HPS_CLI_FILES: a missing file near a command's name is a mistyped command */
    char *cta[] = {"hps-x", "cta", NULL};
    assert_int_equal(unknown(cta, HPS_CLI_FILES, msg, sizeof msg), 2);
    assert_string_equal(msg, "hps-x: error: 'cta' is not a command; did you mean 'cat'?\ntry 'hps-x --help'\n");
}

static void test_numbers_as_typed(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        double v;
    } good[] = {{"500", 500}, {"500k", 5e5}, {"500K", 5e5}, {"2e5", 2e5}, {"1.5M", 1.5e6}, {"2G", 2e9},
                {"1T", 1e12}, {".5k", 500}, {"+3", 3}, {"-2", -2}, {"1.25e3k", 1.25e6}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        double v = -1;
        assert_int_equal(hps_parse_number(good[i].s, &v), 0);
        assert_true(v == good[i].v);
    }
    static const char *const bad[] = {"", "k", "5kk", "5m", "5 k", "0x10", "inf", "nan", "1e400", "abc", ".", "5e"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double v = -1;
        assert_int_equal(hps_parse_number(bad[i], &v), -1);
        assert_true(v == -1); /* untouched */
    }
}

static void test_numbers_for_tables(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(hps_format_number(93542.7, 6, b, sizeof b), "93542.7");
    assert_string_equal(hps_format_number(3.93252e6, 6, b, sizeof b), "3.93252M");
    assert_string_equal(hps_format_number(1e8, 6, b, sizeof b), "100M");
    assert_string_equal(hps_format_number(2.5e9, 6, b, sizeof b), "2.5G");
    assert_string_equal(hps_format_number(0.0127107, 6, b, sizeof b), "0.0127107");
    assert_string_equal(hps_format_number(93542.7, 4, b, sizeof b), "93543"); /* no 9.354e+04 */
    assert_string_equal(hps_format_number(-5e6, 4, b, sizeof b), "-5M");
    /* what a table prints reads back as an option's value */
    static const double v[] = {20000, 1e6, 3.93252e6, 1e8, 7.5e12};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        double back;
        assert_int_equal(hps_parse_number(hps_format_number(v[i], 6, b, sizeof b), &back), 0);
        assert_true(fabs(back - v[i]) <= 1e-5 * v[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_command_gets_its_arguments),
        cmocka_unit_test(test_default_action),
        cmocka_unit_test(test_file_operands),
        cmocka_unit_test(test_unknown_command),
        cmocka_unit_test(test_numbers_as_typed),
        cmocka_unit_test(test_numbers_for_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
