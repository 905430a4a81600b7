/* hps_json: reading validated fields out of jansson objects, and writing.
 *
 * Each getter takes a context string that names where the field lives
 * ("model.json: layer 3 'fc2'") so that every error reads
 * "model.json: layer 3 'fc2': out must be an integer in [1, 1048576]".
 * Missing optional fields leave *out untouched and return 0.
 */
#ifndef HPS_JSON_H
#define HPS_JSON_H

#include <jansson.h>

#include "core/hps_core.h"

enum { HPS_OPTIONAL = 0, HPS_REQUIRED = 1 };

/* The most a JSON input may hold: a model, cluster or plan is kilobytes; a
 * limit turns `-m /dev/zero` into an error instead of an out-of-memory kill. */
#define HPS_JSON_MAX_BYTES ((size_t)64 << 20)

/* Reads the text of a JSON input ("-" = stdin), at most HPS_JSON_MAX_BYTES. */
int hps_json_read(const char *path, char **text, size_t *len, hps_error *err);
/* Parses path ("-" = stdin); errors name file, line and column. */
int hps_json_load(const char *path, json_t **root, hps_error *err);
int hps_json_loadb(const char *name, const char *buf, size_t len, json_t **root,
                   hps_error *err);

int hps_json_int(json_t *obj, const char *key, int required, long long min, long long max,
                 long long *out, const char *ctx, hps_error *err);
int hps_json_num(json_t *obj, const char *key, int required, double min, double max,
                 double *out, const char *ctx, hps_error *err);
int hps_json_str(json_t *obj, const char *key, int required, const char **out, const char *ctx,
                 hps_error *err);
int hps_json_bool(json_t *obj, const char *key, int required, int *out, const char *ctx,
                  hps_error *err);
/* A string that must be one of choices (NULL-terminated); *out is its index. */
int hps_json_enum(json_t *obj, const char *key, int required, const char *const *choices,
                  int *out, const char *ctx, hps_error *err);
/* The file's kind and version: "format" must be `format` (a file of another
 * kind is refused as such) and "version" at most `version`; *out gets the
 * version.  required 0 accepts a file that names neither. */
int hps_json_format(json_t *root, const char *format, int version, int required, int *out,
                    const char *ctx, hps_error *err);
/* Rejects keys of obj not in allowed (NULL-terminated): catches typos. */
int hps_json_known_keys(json_t *obj, const char *const *allowed, const char *ctx,
                        hps_error *err);

/* Serialises root with 2-space indent, and writes it atomically ("-" = stdout). */
int hps_json_write(const char *path, json_t *root, hps_error *err);
/* The same serialisation, as a malloc'd string (for digests). */
char *hps_json_text(json_t *root);

/* Real that becomes null when not finite (JSON has no NaN). */
json_t *hps_json_real(double v);

#endif
