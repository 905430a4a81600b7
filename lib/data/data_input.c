/* Text inputs: files or stdin, plain or zstd, split into lines. */
#include "data/hps_input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "core/hps_io.h"

struct hps_input {
    const char *name; /* for messages */
    int fd, own_fd;
    int zstd;
    ZSTD_DCtx *dctx;
    uint8_t *zbuf;     /* compressed bytes waiting for the decoder */
    size_t zcap, zpos, zlen;
    int frame_open;    /* the decoder is inside a frame (EOF there = truncated) */
    uint8_t sniff[4];  /* the first bytes, read to look for the zstd magic */
    size_t sniff_len, sniff_pos;
    uint64_t raw;
};

static ssize_t raw_read(hps_input *in, void *buf, size_t n, hps_error *err)
{
    if (in->sniff_pos < in->sniff_len) {
        size_t k = in->sniff_len - in->sniff_pos;
        if (k > n) k = n;
        memcpy(buf, in->sniff + in->sniff_pos, k);
        in->sniff_pos += k;
        return (ssize_t)k;
    }
    for (;;) {
        ssize_t got = read(in->fd, buf, n);
        if (got >= 0) {
            in->raw += (uint64_t)got;
            return got;
        }
        if (errno != EINTR)
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot read: %s", in->name, strerror(errno));
    }
}

hps_input *hps_input_open(const char *path, hps_error *err)
{
    int is_stdin = strcmp(path, "-") == 0;
    int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY);
    if (fd < 0) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    hps_input *in = hps_calloc(1, sizeof *in);
    in->name = hps_path_name(path);
    in->fd = fd;
    in->own_fd = !is_stdin;
    while (in->sniff_len < 4) {
        ssize_t got = raw_read(in, in->sniff + in->sniff_len, 4 - in->sniff_len, err);
        if (got < 0) {
            hps_input_close(in);
            return NULL;
        }
        if (got == 0) break;
        in->sniff_len += (size_t)got;
    }
    static const uint8_t magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
    if (in->sniff_len == 4 && memcmp(in->sniff, magic, 4) == 0) {
        in->zstd = 1;
        in->dctx = ZSTD_createDCtx();
        in->zcap = ZSTD_DStreamInSize();
        in->zbuf = hps_malloc(in->zcap);
    }
    return in;
}

static ssize_t zstd_read(hps_input *in, void *buf, size_t n, hps_error *err)
{
    ZSTD_outBuffer out = {buf, n, 0};
    while (out.pos == 0) {
        if (in->zpos == in->zlen) {
            ssize_t got = raw_read(in, in->zbuf, in->zcap, err);
            if (got < 0) return -1;
            if (got == 0) {
                if (in->frame_open)
                    return hps_fail(err, HPS_EXIT_RUNTIME, "%s: truncated zstd stream", in->name);
                return 0;
            }
            in->zpos = 0, in->zlen = (size_t)got;
        }
        ZSTD_inBuffer zin = {in->zbuf, in->zlen, in->zpos};
        size_t rc = ZSTD_decompressStream(in->dctx, &out, &zin);
        in->zpos = zin.pos;
        if (ZSTD_isError(rc))
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: bad zstd data: %s", in->name,
                            ZSTD_getErrorName(rc));
        in->frame_open = rc != 0;
    }
    return (ssize_t)out.pos;
}

ssize_t hps_input_read(hps_input *in, void *buf, size_t n, hps_error *err)
{
    return in->zstd ? zstd_read(in, buf, n, err) : raw_read(in, buf, n, err);
}

uint64_t hps_input_raw_bytes(const hps_input *in) { return in->raw; }
int hps_input_is_zstd(const hps_input *in) { return in->zstd; }

void hps_input_close(hps_input *in)
{
    if (!in) return;
    if (in->own_fd) close(in->fd);
    ZSTD_freeDCtx(in->dctx);
    free(in->zbuf);
    free(in);
}

/* ---- lines ----------------------------------------------------------------- */

struct hps_lines {
    hps_input *in;
    char *buf;
    size_t cap, pos, end;
    int eof;
    uint64_t line_no;
};

hps_lines *hps_lines_open(const char *path, hps_error *err)
{
    hps_input *in = hps_input_open(path, err);
    if (!in) return NULL;
    hps_lines *l = hps_calloc(1, sizeof *l);
    l->in = in;
    l->cap = 1u << 20;
    l->buf = hps_malloc(l->cap);
    return l;
}

/* Moves the partial line to the front and reads more after it. */
static int lines_fill(hps_lines *l, hps_error *err)
{
    if (l->pos > 0) {
        memmove(l->buf, l->buf + l->pos, l->end - l->pos);
        l->end -= l->pos, l->pos = 0;
    }
    if (l->end == l->cap) {
        if (l->cap >= HPS_MAX_LINE)
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s:%llu: line longer than %u MiB", l->in->name,
                            (unsigned long long)l->line_no + 1, HPS_MAX_LINE >> 20);
        l->cap *= 2;
        l->buf = hps_realloc(l->buf, l->cap);
    }
    ssize_t got = hps_input_read(l->in, l->buf + l->end, l->cap - l->end, err);
    if (got < 0) return -1;
    if (got == 0) l->eof = 1;
    l->end += (size_t)got;
    return 0;
}

int hps_lines_next(hps_lines *l, const char **line, size_t *len, uint64_t *line_no, hps_error *err)
{
    for (;;) {
        char *nl = memchr(l->buf + l->pos, '\n', l->end - l->pos);
        if (nl || (l->eof && l->pos < l->end)) {
            size_t n = nl ? (size_t)(nl - (l->buf + l->pos)) : l->end - l->pos;
            *line = l->buf + l->pos;
            *len = n;
            *line_no = ++l->line_no;
            l->pos += n + (nl ? 1 : 0);
            return 1;
        }
        if (l->eof) return 0;
        if (lines_fill(l, err) != 0) return -1;
    }
}

void hps_lines_close(hps_lines *l)
{
    if (!l) return;
    hps_input_close(l->in);
    free(l->buf);
    free(l);
}
