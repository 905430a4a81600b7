#include "core/hps_io.h"

#include <dirent.h>
#include <errno.h>
#include <openssl/evp.h>
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

/* ---- SHA-256, for the digests that tie plans to inputs ------------------- */

/* libcrypto fails here only when out of memory or misbuilt: like malloc's
 * failure elsewhere, not an error a caller can act on. */
static void sha_check(int ok)
{
    if (!ok) {
        fprintf(stderr, "hps: fatal: libcrypto's SHA-256 failed\n");
        abort();
    }
}

void hps_sha256_init(hps_sha256_ctx *c)
{
    c->md = EVP_MD_CTX_new();
    sha_check(c->md && EVP_DigestInit_ex(c->md, EVP_sha256(), NULL));
}

void hps_sha256_update(hps_sha256_ctx *c, const void *data, size_t len)
{
    sha_check(len == 0 || EVP_DigestUpdate(c->md, data, len));
}

void hps_sha256_final(hps_sha256_ctx *c, unsigned char out[32])
{
    unsigned int n = 0;
    sha_check(EVP_DigestFinal_ex(c->md, out, &n) && n == 32);
    EVP_MD_CTX_free(c->md);
    c->md = NULL;
}

void hps_sha256(const void *data, size_t len, unsigned char out[32])
{
    unsigned int n = 0;
    sha_check(EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) && n == 32);
}

void hps_sha256_hex(const void *data, size_t len, char out[72])
{
    unsigned char raw[32];
    hps_sha256(data, len, raw);
    strcpy(out, "sha256:");
    for (int i = 0; i < 32; i++) snprintf(out + 7 + 2 * i, 3, "%02x", raw[i]);
}
