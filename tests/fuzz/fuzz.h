/* Shared by the fuzz targets (tests/fuzz/fuzz_*.c): each defines
 * LLVMFuzzerTestOneInput over one parser of untrusted bytes, built with
 * libFuzzer by `make fuzz` and, with replay.c as main, by `make check`,
 * which feeds it the seeds and the regression inputs. */
#ifndef HPS_FUZZ_H
#define HPS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/hps_core.h"
#include "data/hps_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The loaders read paths: the input goes to an in-memory file, named by a
 * /proc/self/fd path that every open() of it reads from the start. */
static inline const char *fuzz_path(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("hps-fuzz", 0);
        HPS_CHECK(fd >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    HPS_CHECK(ftruncate(fd, 0) == 0);
    HPS_CHECK(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size);
    return path;
}

/* A second in-memory file, for what a target writes and reads back. */
static inline const char *fuzz_scratch_path(void)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("hps-fuzz-scratch", 0);
        HPS_CHECK(fd >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    HPS_CHECK(ftruncate(fd, 0) == 0);
    return path;
}

/* Every line of the input through parse (hps_criteo_parse, hps_libsvm_parse)
 * into blocks of 8 rows, as hps-shard's workers do. */
typedef int (*fuzz_line_parser)(const hps_parse_opts *o, const char *line, size_t len, hps_rows *r,
                                char *msg, size_t msg_len);
static inline void fuzz_lines(const uint8_t *data, size_t size, const hps_parse_opts *o,
                              fuzz_line_parser parse)
{
    hps_rows *r = hps_rows_create(&o->schema, 8);
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char msg[256];
        if (r->rows == 8) hps_rows_clear(r);
        parse(o, p, len, r, msg, sizeof msg);
        p += len + 1;
    }
    hps_rows_index(r);
    hps_rows_free(r);
}

/* testdata/NAME, for the models that plans and checkpoints are checked against. */
static inline const char *fuzz_testdata(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", HPS_TESTDATA, name);
    return path;
}

#endif
