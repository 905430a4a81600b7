#include "core/hps_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

const char *hps_path_name(const char *path)
{
    return strcmp(path, "-") == 0 ? "<stdin>" : path;
}

char *hps_path_relative(const char *from, const char *path)
{
    char dir[PATH_MAX], *target = realpath(path, NULL);
    const char *slash = strrchr(from, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - from) : 1, slash ? from : ".");
    char *base = strcmp(from, "-") == 0 ? NULL : realpath(slash == from ? "/" : dir, NULL);
    if (!target || !base) {
        free(target);
        free(base);
        return hps_strdup(path);
    }
    /* the longest common prefix ending in '/' of base + "/" and target */
    size_t nb = strlen(base), common = 0, ups = 0;
    char *bb = hps_malloc(nb + 2);
    snprintf(bb, nb + 2, "%s%s", base, strcmp(base, "/") == 0 ? "" : "/");
    for (size_t j = 0; bb[j] && bb[j] == target[j]; j++)
        if (bb[j] == '/') common = j;
    for (const char *c = bb + common + 1; *c; c++) ups += *c == '/';
    free(bb);
    size_t n = 3 * ups + strlen(target) + 1;
    char *rel = hps_malloc(n), *w = rel;
    for (size_t i = 0; i < ups; i++) w += sprintf(w, "../");
    snprintf(w, n - (size_t)(w - rel), "%s", target + common + 1);
    free(target);
    free(base);
    return rel;
}

int hps_read_all(const char *path, char **data, size_t *len, hps_error *err)
{
    return hps_read_at_most(path, SIZE_MAX - 1, data, len, err);
}

int hps_read_at_most(const char *path, size_t max, char **data, size_t *len, hps_error *err)
{
    int is_stdin = strcmp(path, "-") == 0;
    /* Waiting on a terminal looks like a hang: say what is missing instead. */
    if (is_stdin && isatty(STDIN_FILENO))
        return hps_fail(err, HPS_EXIT_USAGE, "<stdin>: is a terminal; pipe the input in or name a file");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = hps_malloc(cap);
    int too_big = 0;
    for (;;) {
        if (n + 1 >= cap) buf = hps_realloc(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
        if (n > max) { /* /dev/zero as a model: stop here, not at the OOM killer */
            too_big = 1;
            break;
        }
    }
    int bad = ferror(f);
    int saved = errno;
    if (!is_stdin) fclose(f);
    if (bad || too_big) {
        free(buf);
        if (too_big)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: larger than %zu MiB, the most this input may hold",
                            hps_path_name(path), max >> 20);
        return hps_fail(err, HPS_EXIT_USAGE, "%s: cannot read: %s", hps_path_name(path),
                        strerror(saved));
    }
    buf[n] = '\0';
    *data = buf;
    if (len) *len = n;
    return 0;
}

/* ---- atomic output ------------------------------------------------------ */

struct hps_out {
    char *path, *tmp; /* tmp == NULL: written in place (stdout, a device, a FIFO) */
    FILE *f;
    struct hps_out *next;
};

/* Open temporaries, removed at exit or on a fatal signal if not committed. */
static hps_out *open_outs;

static void remove_open_temporaries(void)
{
    for (hps_out *o = open_outs; o; o = o->next)
        if (o->tmp) unlink(o->tmp);
}

/* The handlers installed before ours (hps-train's dead-rank report under
 * mpirun) run next: ours restores them and raises the signal again. */
static struct sigaction prev_int, prev_term, prev_hup;

static void on_fatal_signal(int sig)
{
    remove_open_temporaries();
    struct sigaction *prev = sig == SIGINT ? &prev_int : sig == SIGTERM ? &prev_term : &prev_hup;
    if (prev->sa_handler == SIG_IGN) prev->sa_handler = SIG_DFL; /* it was fatal to us */
    sigaction(sig, prev, NULL);
    raise(sig);
}

static void install_cleanup(void)
{
    static int installed;
    if (installed) return;
    installed = 1;
    atexit(remove_open_temporaries);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &prev_int);
    sigaction(SIGTERM, &sa, &prev_term);
    sigaction(SIGHUP, &sa, &prev_hup);
}

static void unlink_out(hps_out *o)
{
    for (hps_out **p = &open_outs; *p; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            return;
        }
}

/* Only a regular file (or none yet) may be replaced by a rename: renaming
 * over /dev/null, a FIFO or a terminal would turn it into a plain file. */
static int replaceable(const char *path)
{
    struct stat st;
    return stat(path, &st) != 0 || S_ISREG(st.st_mode);
}

hps_out *hps_out_open(const char *path, hps_error *err)
{
    hps_out *o = hps_calloc(1, sizeof *o);
    o->path = hps_strdup(path);
    if (strcmp(path, "-") == 0) {
        o->f = stdout;
        return o;
    }
    if (!replaceable(path)) {
        if (!(o->f = fopen(path, "wb"))) {
            hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
            free(o->path), free(o);
            return NULL;
        }
        return o;
    }
    size_t n = strlen(path) + 32;
    o->tmp = hps_malloc(n);
    snprintf(o->tmp, n, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot create: %s", path, strerror(errno));
        free(o->tmp), free(o->path), free(o);
        return NULL;
    }
    fchmod(fd, 0644);
    flock(fd, LOCK_EX); /* ours while we live: hps_out_remove_stale passes it by */
    o->f = fdopen(fd, "wb");
    HPS_CHECK(o->f);
    install_cleanup();
    o->next = open_outs;
    open_outs = o;
    return o;
}

int hps_out_is_tty(const char *path) { return strcmp(path, "-") == 0 && isatty(STDOUT_FILENO); }

hps_out *hps_out_open_binary(const char *path, const char *what, hps_error *err)
{
    if (hps_out_is_tty(path)) {
        hps_fail(err, HPS_EXIT_USAGE, "not writing %s to a terminal; redirect stdout or name a file", what);
        return NULL;
    }
    return hps_out_open(path, err);
}

FILE *hps_out_file(hps_out *o) { return o->f; }

const char *hps_out_name(const hps_out *o) { return o->f == stdout ? "<stdout>" : o->path; }

static void out_free(hps_out *o)
{
    unlink_out(o);
    free(o->tmp);
    free(o->path);
    free(o);
}

int hps_out_commit(hps_out *o, hps_error *err)
{
    int rc = 0;
    if (!o->tmp) {
        const char *name = hps_out_name(o);
        if (fflush(o->f) != 0 || ferror(o->f))
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", name, strerror(errno));
        if (o->f != stdout && fclose(o->f) != 0 && rc == 0)
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", name, strerror(errno));
        out_free(o);
        return rc;
    }
    if (fflush(o->f) != 0 || fsync(fileno(o->f)) != 0 || ferror(o->f))
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", o->path, strerror(errno));
    if (rc == 0) hps_crash_point("before-rename", o->path);
    /* renamed before it is closed: the lock covers the temporary until it
     * has its name (the data is already on disk: fsync) */
    if (rc == 0 && rename(o->tmp, o->path) != 0)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot rename into place: %s", o->path,
                      strerror(errno));
    if (rc == 0) hps_crash_point("after-rename", o->path);
    if (fclose(o->f) != 0 && rc == 0)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", o->path, strerror(errno));
    if (rc != 0) unlink(o->tmp);
    out_free(o);
    return rc;
}

void hps_out_abort(hps_out *o)
{
    if (!o) return;
    if (o->f != stdout) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    out_free(o);
}

/* The directory of path and its file name; dir is malloc'd. */
static char *split_path(const char *path, const char **base)
{
    char *dir = hps_strdup(path), *slash = strrchr(dir, '/');
    *base = slash ? path + (slash - dir) + 1 : path;
    if (!slash) strcpy(dir, ".");
    else slash[slash == dir] = '\0'; /* "/x" lies in "/" */
    return dir;
}

void hps_out_remove_stale(const char *path)
{
    if (strcmp(path, "-") == 0 || !replaceable(path)) return;
    const char *base;
    char *dir = split_path(path, &base);
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *rest = e->d_name + blen; /* ".tmp." and mkstemp's six characters */
        if (strncmp(e->d_name, base, blen) != 0 || strncmp(rest, ".tmp.", 5) != 0 || strlen(rest) != 11)
            continue;
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *p = hps_malloc(n);
        snprintf(p, n, "%s/%s", dir, e->d_name);
        int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlink(p);
        if (fd >= 0) close(fd);
        free(p);
    }
    if (d) closedir(d);
    free(dir);
}

int hps_out_check(const char *opt, const char *path, int is_dir, hps_error *err)
{
    struct stat st;
    if (!is_dir && strcmp(path, "-") == 0) return 0;
    if (stat(path, &st) == 0) {
        if (is_dir && !S_ISDIR(st.st_mode))
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: %s: exists and is not a directory", opt, path);
        if (!is_dir && S_ISDIR(st.st_mode))
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: %s: is a directory", opt, path);
        if (is_dir && access(path, W_OK | X_OK) != 0)
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: %s: cannot write into it: %s", opt, path,
                            strerror(errno));
        if (is_dir || !S_ISREG(st.st_mode)) return 0; /* a device or FIFO is written in place */
    } else if (errno != ENOENT && errno != ENOTDIR) {
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: %s: %s", opt, path, strerror(errno));
    }
    /* a new file, or a file replaced by a rename: made in its directory */
    const char *base;
    char *dir = split_path(path, &base);
    int rc = 0;
    if (stat(dir, &st) != 0)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: %s: no directory '%s'", opt, path, dir);
    else if (!S_ISDIR(st.st_mode))
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: %s: '%s' is not a directory", opt, path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: %s: cannot write into '%s': %s", opt, path, dir,
                      strerror(errno));
    free(dir);
    return rc;
}

void hps_crash_point(const char *step, const char *path)
{
#ifdef HPS_TEST_HOOKS
    const char *at = getenv("HPS_CRASH_AT"), *slash = strrchr(path, '/');
    size_t n = strlen(step);
    if (at && strncmp(at, step, n) == 0 && at[n] == ':' && strcmp(at + n + 1, slash ? slash + 1 : path) == 0)
        raise(SIGKILL);
#else
    (void)step, (void)path;
#endif
}

int hps_write_atomic(const char *path, const void *buf, size_t len, hps_error *err)
{
    hps_out *o = hps_out_open(path, err);
    if (!o) return -1;
    if (fwrite(buf, 1, len, hps_out_file(o)) != len) {
        hps_out_abort(o);
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", path, strerror(errno));
    }
    return hps_out_commit(o, err);
}

/* ---- SHA-256 (FIPS 180-4), for the digests that tie plans to inputs ----- */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROR32(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR32(w[i - 15], 7) ^ ROR32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR32(w[i - 2], 17) ^ ROR32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ROR32(e, 6) ^ ROR32(e, 11) ^ ROR32(e, 25)) + ((e & f) ^ (~e & g)) +
                      sha_k[i] + w[i];
        uint32_t t2 = (ROR32(a, 2) ^ ROR32(a, 13) ^ ROR32(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void hps_sha256_init(hps_sha256_ctx *c)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->n = 0;
    c->len = 0;
}

void hps_sha256_update(hps_sha256_ctx *c, const void *data, size_t len)
{
    const unsigned char *p = data;
    c->len += len;
    while (len) {
        if (c->n == 0 && len >= 64) { /* whole blocks straight from the input */
            sha256_block(c->h, p);
            p += 64, len -= 64;
            continue;
        }
        size_t k = 64 - c->n < len ? 64 - c->n : len;
        memcpy(c->buf + c->n, p, k);
        c->n += k, p += k, len -= k;
        if (c->n == 64) sha256_block(c->h, c->buf), c->n = 0;
    }
}

void hps_sha256_final(hps_sha256_ctx *c, unsigned char out[32])
{
    unsigned char tail[128] = {0};
    memcpy(tail, c->buf, c->n);
    tail[c->n] = 0x80;
    size_t tail_len = c->n + 9 <= 64 ? 64 : 128;
    uint64_t bits = c->len * 8;
    for (int i = 0; i < 8; i++) tail[tail_len - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha256_block(c->h, tail);
    if (tail_len == 128) sha256_block(c->h, tail + 64);
    for (int i = 0; i < 32; i++) out[i] = (unsigned char)(c->h[i / 4] >> (24 - 8 * (i % 4)));
}

void hps_sha256(const void *data, size_t len, unsigned char out[32])
{
    hps_sha256_ctx c;
    hps_sha256_init(&c);
    hps_sha256_update(&c, data, len);
    hps_sha256_final(&c, out);
}

void hps_sha256_hex(const void *data, size_t len, char out[72])
{
    unsigned char raw[32];
    hps_sha256(data, len, raw);
    strcpy(out, "sha256:");
    for (int i = 0; i < 32; i++) snprintf(out + 7 + 2 * i, 3, "%02x", raw[i]);
}
