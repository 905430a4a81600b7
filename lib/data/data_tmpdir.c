/* The temporary output directory: nothing half-written is ever left behind.
 *
 * Paths are registered before their files are made, in a fixed-size table
 * that a signal handler can walk: it calls only unlink and rmdir, which are
 * async-signal-safe, then re-raises the signal with the default action. */
#include "data/hps_shard_job.h"

#include "core/hps_io.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ENTRIES (1 << 18)

struct hps_tmpdir {
    char *target, *path;
    char **files;       /* registered paths; dirs are marked in is_dir */
    char *is_dir;
    volatile sig_atomic_t n;
};

static hps_tmpdir *volatile active; /* the one the handlers clean */

static void remove_entries(hps_tmpdir *t)
{
    for (sig_atomic_t i = t->n; i-- > 0;)
        if (t->files[i]) t->is_dir[i] ? rmdir(t->files[i]) : unlink(t->files[i]);
    rmdir(t->path);
}

static void on_signal(int sig)
{
    if (active) remove_entries(active);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_exit_cleanup(void)
{
    if (active) remove_entries(active);
}

static void remove_tree(const char *path);

/* An existing target: refused unless force, and then only a directory (a
 * file is not what --force means to replace). */
static int check_target(const char *target, int force, hps_error *err)
{
    struct stat st;
    if (lstat(target, &st) != 0) return 0;
    if (!force) return hps_fail(err, HPS_EXIT_RUNTIME, "%s: already exists (--force replaces it)", target);
    if (!S_ISDIR(st.st_mode))
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: exists and is not a directory: --force replaces only a directory",
                        target);
    return 0;
}

/* What a run killed by SIGKILL left beside TARGET, found by the PID in its
 * name once that process is gone: TARGET.tmp.PID.* (a half-written set) is
 * removed; TARGET.old.PID.* (the set --force moved aside) is put back when
 * the kill came before the new set took its place, else removed. */
static void remove_stale(const char *target)
{
    char *dir = hps_strdup(target);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : target;
    if (slash) *slash = '\0';
    DIR *d = opendir(slash ? (*dir ? dir : "/") : ".");
    size_t blen = strlen(base);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *rest = e->d_name + blen;
        int tmp = strncmp(rest, ".tmp.", 5) == 0, old = strncmp(rest, ".old.", 5) == 0;
        if (strncmp(e->d_name, base, blen) != 0 || !(tmp || old)) continue;
        char *end;
        long pid = strtol(rest + 5, &end, 10);
        if (end == rest + 5 || *end != '.' || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *p = hps_malloc(n);
        snprintf(p, n, "%s/%s", slash ? dir : ".", e->d_name);
        struct stat st;
        if (!old || lstat(target, &st) == 0 || rename(p, target) != 0) remove_tree(p);
        free(p);
    }
    if (d) closedir(d);
    free(dir);
}

hps_tmpdir *hps_tmpdir_create(const char *target, int force, hps_error *err)
{
    HPS_CHECK(!active);
    remove_stale(target); /* first: it may put back the set a killed --force moved aside */
    if (check_target(target, force, err)) return NULL;
    size_t n = strlen(target) + 40;
    char *path = hps_malloc(n);
    snprintf(path, n, "%s.tmp.%ld.XXXXXX", target, (long)getpid());
    if (!mkdtemp(path)) {
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot create a directory beside it: %s", target,
                 strerror(errno));
        free(path);
        return NULL;
    }
    chmod(path, 0755);
    hps_tmpdir *t = hps_calloc(1, sizeof *t);
    t->target = hps_strdup(target);
    t->path = path;
    t->files = hps_calloc(MAX_ENTRIES, sizeof *t->files);
    t->is_dir = hps_calloc(MAX_ENTRIES, 1);
    active = t;
    static int installed;
    if (!installed) {
        installed = 1;
        atexit(on_exit_cleanup);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        signal(SIGHUP, on_signal);
    }
    return t;
}

static char *add_entry(hps_tmpdir *t, const char *name, int dir)
{
    HPS_CHECK(t->n < MAX_ENTRIES);
    size_t n = strlen(t->path) + strlen(name) + 2;
    char *p = hps_malloc(n);
    snprintf(p, n, "%s/%s", t->path, name);
    t->files[t->n] = hps_strdup(p); /* stored before it is counted */
    t->is_dir[t->n] = (char)dir;
    t->n = t->n + 1;
    return p;
}

char *hps_tmpdir_file(hps_tmpdir *t, const char *name) { return add_entry(t, name, 0); }

int hps_tmpdir_mkdir(hps_tmpdir *t, const char *name, hps_error *err)
{
    char *p = add_entry(t, name, 1);
    int rc = 0;
    if (mkdir(p, 0755) != 0)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot create: %s", p, strerror(errno));
    free(p);
    return rc;
}

void hps_tmpdir_unlink(hps_tmpdir *t, const char *path)
{
    unlink(path);
    (void)t;
}

/* Removes a directory tree that we moved out of the way (with --force). */
static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t n = strlen(path) + strlen(e->d_name) + 2;
        char *p = hps_malloc(n);
        snprintf(p, n, "%s/%s", path, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(p);
        else unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(path);
}

static void tmpdir_free(hps_tmpdir *t)
{
    if (active == t) active = NULL;
    for (sig_atomic_t i = 0; i < t->n; i++) free(t->files[i]);
    free(t->files), free(t->is_dir), free(t->path), free(t->target);
    free(t);
}

int hps_tmpdir_commit(hps_tmpdir *t, int force, hps_error *err)
{
    struct stat st;
    char *old = NULL;
    if (check_target(t->target, force, err)) return -1; /* made while we worked */
    if (lstat(t->target, &st) == 0) {
        size_t n = strlen(t->target) + 40;
        old = hps_malloc(n);
        snprintf(old, n, "%s.old.%ld.XXXXXX", t->target, (long)getpid()); /* for remove_stale */
        int made = mkdtemp(old) != NULL;
        if (!made || rename(t->target, old) != 0) { /* a directory renames over the empty one */
            int e = errno;
            if (made) rmdir(old);
            free(old);
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot move it aside: %s", t->target, strerror(e));
        }
    }
    hps_crash_point("moved-aside", t->target);
    if (rename(t->path, t->target) != 0) {
        int e = errno;
        if (old) rename(old, t->target), free(old);
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot rename into place: %s", t->target, strerror(e));
    }
    active = NULL; /* committed: nothing to clean any more */
    hps_crash_point("after-rename", t->target);
    if (old) remove_tree(old), free(old);
    tmpdir_free(t);
    return 0;
}

void hps_tmpdir_remove(hps_tmpdir *t)
{
    if (!t) return;
    remove_entries(t);
    tmpdir_free(t);
}
