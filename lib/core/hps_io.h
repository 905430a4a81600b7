/* hps_io: whole-file reads and atomic writes.
 *
 * Outputs are never half-written: hps_out_open() writes to a temporary file
 * beside the target and hps_out_commit() renames it into place; a tool that
 * fails calls hps_out_abort() (or simply exits: the temporary is removed by an
 * atexit handler).  "-" means stdin for reads and stdout for writes.
 */
#ifndef HPS_IO_H
#define HPS_IO_H

#include "core/hps_core.h"

/* Reads all of path ("-" = stdin) into a NUL-terminated buffer. */
int hps_read_all(const char *path, char **data, size_t *len, hps_error *err);

typedef struct hps_out hps_out;
hps_out *hps_out_open(const char *path, hps_error *err); /* NULL on error */
FILE *hps_out_file(hps_out *o);
int hps_out_commit(hps_out *o, hps_error *err); /* flush, fsync, rename; frees o */
void hps_out_abort(hps_out *o);                 /* removes the temporary; frees o */

/* Writes buf to path atomically ("-" = stdout). */
int hps_write_atomic(const char *path, const void *buf, size_t len, hps_error *err);

/* Display name of a path for messages: "<stdin>" for "-". */
const char *hps_path_name(const char *path);
/* path as seen from the directory of file `from` (malloc'd): what a file
 * records of another so that both can move together; path itself when
 * either does not resolve or from is "-". */
char *hps_path_relative(const char *from, const char *path);

/* SHA-256: the raw 32 bytes, or "sha256:<64 hex>" (out must hold 72 bytes). */
void hps_sha256(const void *data, size_t len, unsigned char out[32]);
void hps_sha256_hex(const void *data, size_t len, char out[72]);

/* Whole-array binary I/O on FILE streams: true when all n items moved. */
#define HPS_FWRITE(f, p, n) ((size_t)(n) == 0 || fwrite((p), sizeof *(p), (size_t)(n), (f)) == (size_t)(n))
#define HPS_FREAD(f, p, n) ((size_t)(n) == 0 || fread((p), sizeof *(p), (size_t)(n), (f)) == (size_t)(n))

#endif
