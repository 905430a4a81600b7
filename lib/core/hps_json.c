#include "core/hps_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_cli.h" /* hps_cli_nearest: one did-you-mean for options and fields */
#include "core/hps_io.h"

int hps_json_loadb(const char *name, const char *buf, size_t len, json_t **root,
                   hps_error *err)
{
    json_error_t je;
    *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!*root) {
        /* jansson quotes the token it stopped at: bytes of a file that may
         * not be JSON at all (a secret a plan pointed at); the position is enough */
        char *near = strstr(je.text, " near '");
        if (near) *near = '\0';
        /* one JSON value a line: hps-train's --metrics (NDJSON), given where one document is read */
        const char *nl = memchr(buf, '\n', len);
        json_t *first = nl && strcmp(je.text, "end of file expected") == 0
                            ? json_loadb(buf, (size_t)(nl - buf), JSON_DISABLE_EOF_CHECK, NULL)
                            : NULL;
        int ndjson = json_is_object(first);
        json_decref(first);
        if (ndjson)
            return hps_fail(err, HPS_EXIT_USAGE, "%s:%d: one JSON value a line (NDJSON, as hps-train --metrics "
                            "writes; 'hps-train show' draws it), where one JSON document is expected",
                            name, je.line);
        return hps_fail(err, HPS_EXIT_USAGE, "%s:%d:%d: invalid JSON: %s", name, je.line,
                        je.column, je.text);
    }
    if (!json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        return hps_fail(err, HPS_EXIT_USAGE, "%s: expected a JSON object at the top level", name);
    }
    return 0;
}

int hps_json_read(const char *path, char **text, size_t *len, hps_error *err)
{
    return hps_read_at_most(path, HPS_JSON_MAX_BYTES, text, len, err);
}

int hps_json_load(const char *path, json_t **root, hps_error *err)
{
    char *buf;
    size_t len;
    if (hps_json_read(path, &buf, &len, err)) return -1;
    int rc = hps_json_loadb(hps_path_name(path), buf, len, root, err);
    free(buf);
    return rc;
}

static json_t *field(json_t *obj, const char *key, int required, const char *ctx, hps_error *err,
                     int *rc)
{
    json_t *v = json_object_get(obj, key);
    *rc = 0;
    if ((!v || json_is_null(v)) && required)
        *rc = hps_fail(err, HPS_EXIT_USAGE, "%s: missing field '%s'", ctx, key);
    return json_is_null(v) ? NULL : v;
}

int hps_json_int(json_t *obj, const char *key, int required, long long min, long long max,
                 long long *out, const char *ctx, hps_error *err)
{
    int rc;
    json_t *v = field(obj, key, required, ctx, err, &rc);
    if (!v) return rc;
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9e15) {
        x = (long long)json_real_value(v);
    } else {
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s must be an integer in [%lld, %lld]", ctx,
                        key, min, max);
    }
    if (x < min || x > max)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s=%lld must be in [%lld, %lld]", ctx, key, x,
                        min, max);
    *out = x;
    return 0;
}

int hps_json_num(json_t *obj, const char *key, int required, double min, double max,
                 double *out, const char *ctx, hps_error *err)
{
    int rc;
    json_t *v = field(obj, key, required, ctx, err, &rc);
    if (!v) return rc;
    if (!json_is_number(v))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s must be a number", ctx, key);
    double x = json_number_value(v);
    if (!(x >= min && x <= max))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s=%g must be in [%g, %g]", ctx, key, x, min,
                        max);
    *out = x;
    return 0;
}

int hps_json_str(json_t *obj, const char *key, int required, const char **out, const char *ctx,
                 hps_error *err)
{
    int rc;
    json_t *v = field(obj, key, required, ctx, err, &rc);
    if (!v) return rc;
    if (!json_is_string(v) || json_string_length(v) == 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s must be a non-empty string", ctx, key);
    *out = json_string_value(v);
    return 0;
}

int hps_json_bool(json_t *obj, const char *key, int required, int *out, const char *ctx,
                  hps_error *err)
{
    int rc;
    json_t *v = field(obj, key, required, ctx, err, &rc);
    if (!v) return rc;
    if (!json_is_boolean(v))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s must be true or false", ctx, key);
    *out = json_is_true(v);
    return 0;
}

int hps_json_enum(json_t *obj, const char *key, int required, const char *const *choices,
                  int *out, const char *ctx, hps_error *err)
{
    const char *s = NULL;
    if (hps_json_str(obj, key, required, &s, ctx, err)) return -1;
    if (!s) return 0;
    char list[256] = "";
    for (int i = 0; choices[i]; i++) {
        if (strcmp(s, choices[i]) == 0) {
            *out = i;
            return 0;
        }
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", i ? "|" : "", choices[i]);
    }
    char shown[40];
    const char *near = hps_cli_nearest(s, choices);
    if (near)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s '%s' must be one of %s; did you mean '%s'?", ctx, key,
                        hps_printable(s, shown, sizeof shown), list, near);
    return hps_fail(err, HPS_EXIT_USAGE, "%s: %s '%s' must be one of %s", ctx, key,
                    hps_printable(s, shown, sizeof shown), list);
}

/* What a file of format f is, in words, for the error of a file given in the
 * wrong place: "a cluster given where a model is expected". */
static const char *format_noun(const char *f)
{
    static const char *const names[][2] = {{"hps-model", "a model"},      {"hps-cluster", "a cluster"},
                                           {"hps-profile", "a profile"},  {"hps-plan", "a plan"},
                                           {"hps-shards", "a shard manifest"}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(f, names[i][0]) == 0) return names[i][1];
    return NULL;
}

int hps_json_format(json_t *root, const char *format, int version, int required, int *out,
                    const char *ctx, hps_error *err)
{
    const char *f = NULL;
    long long v = version;
    const char *want = format_noun(format);
    if (!json_is_object(root))
        return want ? hps_fail(err, HPS_EXIT_USAGE, "%s: expected a JSON object: %s (%s(5))", ctx, want,
                               strcmp(format, "hps-shards") == 0 ? "hps-shard" : format)
                    : hps_fail(err, HPS_EXIT_USAGE, "%s: expected a JSON object", ctx);
    if (required && want && !json_object_get(root, "format"))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: missing field 'format': expected %s (\"format\": \"%s\")", ctx,
                        want, format);
    if (hps_json_str(root, "format", required, &f, ctx, err)) return -1;
    if (f && strcmp(f, format) != 0) {
        const char *is = format_noun(f);
        if (is && want)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: format is '%s', expected '%s': %s given where %s is expected",
                            ctx, f, format, is, want);
        return hps_fail(err, HPS_EXIT_USAGE, "%s: format is '%s', expected '%s'", ctx, f, format);
    }
    if (hps_json_int(root, "version", required, 0, 1 << 30, &v, ctx, err)) return -1;
    if (v < 1 || v > version)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s version %lld, this hps reads versions 1 to %d", ctx,
                        format, v, version);
    if (out) *out = (int)v;
    return 0;
}

int hps_json_known_keys(json_t *obj, const char *const *allowed, const char *ctx,
                        hps_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (int i = 0; allowed[i] && !ok; i++) ok = strcmp(key, allowed[i]) == 0;
        if (ok) continue;
        /* a misspelt field gets the did-you-mean a misspelt option gets */
        const char *near = hps_cli_nearest(key, allowed);
        char shown[64];
        hps_printable(key, shown, sizeof shown);
        if (near) return hps_fail(err, HPS_EXIT_USAGE, "%s: unknown field '%s'; did you mean '%s'?", ctx, shown, near);
        return hps_fail(err, HPS_EXIT_USAGE, "%s: unknown field '%s'", ctx, shown);
    }
    return 0;
}

char *hps_json_text(json_t *root)
{
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    HPS_CHECK(s);
    return s;
}

int hps_json_write(const char *path, json_t *root, hps_error *err)
{
    char *s = hps_json_text(root);
    size_t n = strlen(s);
    s = hps_realloc(s, n + 2);
    s[n] = '\n';
    s[n + 1] = '\0';
    int rc = hps_write_atomic(path, s, n + 1, err);
    free(s);
    return rc;
}

json_t *hps_json_real(double v) { return isfinite(v) ? json_real(v) : json_null(); }
