/* hps_input: reading text inputs line by line, zstd decoded on the fly.
 *
 * "-" is stdin.  A stream that starts with the zstd frame magic is
 * decompressed whatever its name, so `zstd -c x | hps-shard -` works as well
 * as `hps-shard x.zst`.  Lines end at '\n'; a last line without one counts.
 */
#ifndef HPS_INPUT_H
#define HPS_INPUT_H

#include <stdint.h>
#include <sys/types.h>

#include "core/hps_core.h"

#define HPS_MAX_LINE (64u << 20) /* longer lines are an error, not a memory blowup */

typedef struct hps_input hps_input;
hps_input *hps_input_open(const char *path, hps_error *err);
/* Reads up to n decoded bytes; 0 at the end, -1 on error. */
ssize_t hps_input_read(hps_input *in, void *buf, size_t n, hps_error *err);
uint64_t hps_input_raw_bytes(const hps_input *in); /* bytes read from the file itself */
int hps_input_is_zstd(const hps_input *in);
void hps_input_close(hps_input *in);

typedef struct hps_lines hps_lines;
hps_lines *hps_lines_open(const char *path, hps_error *err);
/* 1 with the next line (without '\n', valid until the next call), 0 at the
 * end, -1 on error.  *line_no is 1-based. */
int hps_lines_next(hps_lines *l, const char **line, size_t *len, uint64_t *line_no, hps_error *err);
void hps_lines_close(hps_lines *l);

#endif
