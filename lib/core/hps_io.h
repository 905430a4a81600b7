/* hps_io: whole-file reads and atomic writes.
 *
 * Outputs are never half-written: hps_out_open() writes to a temporary file
 * beside the target and hps_out_commit() renames it into place; a tool that
 * fails calls hps_out_abort() (or simply exits: the temporary is removed by an
 * atexit handler).  "-" means stdin for reads and stdout for writes.  A path
 * that names something other than a regular file (/dev/null, a FIFO, a
 * terminal) is written in place: a rename would replace it with a file.
 */
#ifndef HPS_IO_H
#define HPS_IO_H

#include "core/hps_core.h"

/* Reads all of path ("-" = stdin) into a NUL-terminated buffer. */
int hps_read_all(const char *path, char **data, size_t *len, hps_error *err);
/* The same, failing with a usage error once more than max bytes arrive. */
int hps_read_at_most(const char *path, size_t max, char **data, size_t *len, hps_error *err);

typedef struct hps_out hps_out;
hps_out *hps_out_open(const char *path, hps_error *err); /* NULL on error */
/* The same for binary data (what names it): refused on a terminal, as zstd
 * does; hps_out_is_tty() tells before any work is done. */
hps_out *hps_out_open_binary(const char *path, const char *what, hps_error *err);
int hps_out_is_tty(const char *path);
FILE *hps_out_file(hps_out *o);
const char *hps_out_name(const hps_out *o); /* for messages: "<stdout>" or the path */
int hps_out_commit(hps_out *o, hps_error *err); /* flush; a temporary: fsync, rename; frees o */
void hps_out_abort(hps_out *o);                 /* closes, removes a temporary; frees o */
/* Removes the temporaries of path (PATH.tmp.XXXXXX) that no running process
 * writes: a SIGKILL leaves them, and the next run writing path clears them.
 * A writer holds a lock on its temporary, so one beside us keeps its own. */
void hps_out_remove_stale(const char *path);

/* Before any work: can an output option's path be written?  A file ("-" is
 * stdout) needs an existing directory to land in and must not be one; a
 * directory (is_dir) must be one if it exists, else have its parent.  The
 * error names the option: "--export: nodir/m.safetensors: no directory 'nodir'". */
int hps_out_check(const char *opt, const char *path, int is_dir, hps_error *err);

/* A point between two steps of a commit, named "STEP:BASENAME": STEP says
 * where (hps_out_commit's before-rename and after-rename; hps-shard's
 * moved-aside, between --force's two renames), BASENAME is the output's
 * file name.  The test builds (HPS_TEST_HOOKS, HACKING.md) SIGKILL
 * themselves there when HPS_CRASH_AT names it, so that tests see what a
 * crash at that moment leaves; elsewhere it does nothing. */
void hps_crash_point(const char *step, const char *path);

/* Writes buf to path atomically ("-" = stdout). */
int hps_write_atomic(const char *path, const void *buf, size_t len, hps_error *err);

/* Display name of a path for messages: "<stdin>" for "-". */
const char *hps_path_name(const char *path);
/* path as seen from the directory of file `from` (malloc'd): what a file
 * records of another so that both can move together; path itself when
 * either does not resolve or from is "-". */
char *hps_path_relative(const char *from, const char *path);

/* SHA-256 through OpenSSL's libcrypto (the CPU's SHA extensions where it
 * has them): the raw 32 bytes, or "sha256:<64 hex>" (out must hold 72
 * bytes); or over pieces, with a context that init opens and final always
 * closes (every init is paired with a final). */
void hps_sha256(const void *data, size_t len, unsigned char out[32]);
typedef struct {
    void *md; /* EVP_MD_CTX, opaque here so that callers need no OpenSSL header */
} hps_sha256_ctx;
void hps_sha256_init(hps_sha256_ctx *c);
void hps_sha256_update(hps_sha256_ctx *c, const void *data, size_t len);
void hps_sha256_final(hps_sha256_ctx *c, unsigned char out[32]);
void hps_sha256_hex(const void *data, size_t len, char out[72]);

/* Whole-array binary I/O on FILE streams: true when all n items moved. */
#define HPS_FWRITE(f, p, n) ((size_t)(n) == 0 || fwrite((p), sizeof *(p), (size_t)(n), (f)) == (size_t)(n))
#define HPS_FREAD(f, p, n) ((size_t)(n) == 0 || fread((p), sizeof *(p), (size_t)(n), (f)) == (size_t)(n))

#endif
