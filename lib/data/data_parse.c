/* Text to samples: Criteo TSV and libsvm lines.  The hot path of hps-shard,
 * so fields are scanned by hand rather than with strtok/strtol. */
#include "data/hps_data.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *hps_slot_name(hps_data_format f, int slot, char *buf)
{
    if (f == HPS_FMT_CRITEO) snprintf(buf, 16, "C%d", slot + 1);
    else snprintf(buf, 16, "%s", slot == 0 ? "features" : "?");
    return buf;
}

static int bad_field(char *msg, size_t n, int field, const char *name, const char *what,
                     const char *p, size_t len)
{
    char q[36]; /* a longer field shows its first 32 bytes and "..." */
    snprintf(msg, n, "field %d (%s): expected %s, got '%s'", field, name, what, hps_printable_n(p, len, q, sizeof q));
    return -1;
}

/* Hex digit values plus one; 0 for any other byte. */
static const uint8_t hex_plus1[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
    ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
    ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

/* ---- Criteo ---------------------------------------------------------------
 * 40 tab-separated fields: label (0 or 1), I1..I13 (integers, may be negative
 * or empty), C1..C26 (1 to 16 hex digits, or empty). */

static int criteo_int(const char *p, size_t n, double *out)
{
    size_t i = 0;
    int neg = 0;
    if (n && (p[0] == '-' || p[0] == '+')) neg = p[0] == '-', i = 1;
    if (i == n || n - i > 18) return -1;
    int64_t v = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned)(p[i] - '0');
        if (d > 9) return -1;
        v = v * 10 + d;
    }
    *out = (double)(neg ? -v : v);
    return 0;
}

static int criteo_hex(const char *p, size_t n, uint64_t *out)
{
    if (n == 0 || n > 16) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = hex_plus1[(unsigned char)p[i]];
        if (!d) return -1;
        v = v << 4 | (d - 1);
    }
    *out = v;
    return 0;
}

/* A Criteo line's fields, scanned before anything is stored. */
typedef struct {
    float label;
    int has_int[HPS_CRITEO_DENSE];
    int64_t ints[HPS_CRITEO_DENSE];
    uint32_t has_hex; /* bit s: C(s+1) is present */
    uint64_t hex[HPS_CRITEO_SLOTS];
} criteo_fields;

/* ---- the common line, eight bytes at a time ------------------------------------ */

#define ONES 0x0101010101010101ULL

static uint64_t load8(const char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w; /* little-endian: p[0] is the low byte */
}

/* Where the first tab of w is, 8 when it has none.  (x - ONES) & ~x marks
 * the zero bytes of x; a borrow can only mark bytes after the first. */
static unsigned first_tab(uint64_t w)
{
    uint64_t x = w ^ (ONES * '\t'), z = (x - ONES) & ~x & (ONES * 0x80);
    return z ? (unsigned)__builtin_ctzll(z) / 8 : 8;
}

/* A decimal field of at most 7 digits ending in a tab within w: 1 with its
 * value and length, 0 for anything else (left to the byte loop).  The
 * digits are right-aligned, then combined in pairs, fours and eights. */
static int swar_decimal(uint64_t w, uint64_t *v, unsigned *n)
{
    unsigned k = first_tab(w);
    if (k == 8) return 0;
    *n = k;
    if (k == 0) return *v = 0, 1;
    uint64_t mask = (1ULL << (8 * k)) - 1, x = w & mask;
    /* every byte 0x30..0x39: high nibble 3, and adding 6 does not carry out of the low one */
    if ((x & (ONES * 0xF0 & mask)) != (ONES * 0x30 & mask)) return 0;
    x -= ONES * '0' & mask;
    if ((x + (ONES * 6 & mask)) & (ONES * 0xF0)) return 0;
    x <<= 8 * (8 - k); /* leading zeros in the low bytes */
    x = x * 10 + (x >> 8);
    x = ((x & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32)) +
         ((x >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32))) >> 32;
    *v = x;
    return 1;
}

/* Bytes of w (high bits clear) in [lo, hi]: 0x80 in each such byte. */
static uint64_t in_range(uint64_t w, unsigned lo, unsigned hi)
{
    return (w + ONES * (0x80 - lo)) & ~(w + ONES * (0x7F - hi)) & (ONES * 0x80);
}

/* An 8-digit hex field (Criteo's own, and 9 in 10 of its fields): 1 with
 * its value, 0 when one of the bytes is not a hex digit.  Each byte's value
 * is its low nibble, plus 9 for a letter; then nibbles pair up into bytes,
 * bytes into 16 and 32 bits, the first digit the most significant. */
static int hex8(uint64_t w, uint64_t *v)
{
    if (w & (ONES * 0x80)) return 0;
    uint64_t letter = in_range(w | (ONES * 0x20), 'a', 'f');
    if ((in_range(w, '0', '9') | letter) != ONES * 0x80) return 0;
    uint64_t x = (w & (ONES * 0x0F)) + (letter >> 7) * 9;
    x = (x & 0x000F000F000F000FULL) << 4 | (x >> 8 & 0x000F000F000F000FULL);
    x = (x & 0x000000FF000000FFULL) << 8 | (x >> 16 & 0x000000FF000000FFULL);
    *v = (x & 0xFFFF) << 16 | (x >> 32 & 0xFFFF);
    return 1;
}

/* The well-formed line, in one pass over its bytes: 1 when every field is
 * what criteo_parse_careful accepts, 0 for anything else, which is then left
 * to it (it names the field).  Fields are found eight bytes at a time, so
 * their varying lengths cost no mispredicted branch; memchr per field and a
 * check per byte made hps_criteo_parse 36% of hps-shard's time. */
static int criteo_scan(const char *p, const char *end, criteo_fields *f)
{
    if (end - p < 2 || (p[0] != '0' && p[0] != '1') || p[1] != '\t') return 0;
    f->label = (float)(p[0] - '0');
    p += 2;
    for (int i = 0; i < HPS_CRITEO_DENSE; i++) {
        int neg = 0, sign = p < end && (*p == '-' || *p == '+');
        if (sign) neg = *p++ == '-';
        uint64_t v = 0; /* unsigned: a 30-digit field wraps, then fails the length check */
        unsigned k;
        size_t n;
        if (end - p >= 8 && swar_decimal(load8(p), &v, &k)) {
            p += k, n = k;
        } else {
            const char *s = p;
            for (unsigned d; p < end && (d = (unsigned)(*p - '0')) <= 9; p++) v = v * 10 + d;
            n = (size_t)(p - s);
        }
        if (p == end || *p != '\t' || n > 18 || (sign && n == 0)) return 0;
        f->has_int[i] = n > 0;
        f->ints[i] = neg ? -(int64_t)v : (int64_t)v;
        p++;
    }
    f->has_hex = 0;
    for (int s = 0; s < HPS_CRITEO_SLOTS; s++) {
        const char *b = p;
        uint64_t v = 0;
        if (end - p >= 8 && (end - p == 8 || p[8] == '\t') && hex8(load8(p), &v)) {
            p += 8;
        } else {
            for (unsigned d; p < end && (d = hex_plus1[(unsigned char)*p]); p++) v = v << 4 | (d - 1);
        }
        size_t n = (size_t)(p - b);
        if (n > 16) return 0;
        int last = s == HPS_CRITEO_SLOTS - 1;
        if (last ? p != end : (p == end || *p != '\t')) return 0;
        p += !last;
        f->hex[s] = v;
        f->has_hex |= (uint32_t)(n > 0) << s;
    }
    return 1;
}

/* Field by field with a check at each, so that a bad line's message names
 * the field and what it holds. */
static int criteo_parse_careful(const hps_parse_opts *o, const char *line, size_t len, hps_rows *r,
                                char *msg, size_t msg_len)
{
    const char *p = line, *end = line + len;
    int row = hps_rows_begin(r);
    char name[16];
    for (int f = 0; f < 1 + HPS_CRITEO_DENSE + HPS_CRITEO_SLOTS; f++) {
        const char *q = memchr(p, '\t', (size_t)(end - p));
        int last = f == HPS_CRITEO_DENSE + HPS_CRITEO_SLOTS;
        if (!q && !last) {
            snprintf(msg, msg_len, "expected 40 tab-separated fields, got %d", f + 1);
            goto bad;
        }
        if (q && last) {
            int n = f + 1;
            for (; q; q = memchr(q + 1, '\t', (size_t)(end - q - 1))) n++;
            snprintf(msg, msg_len, "expected 40 tab-separated fields, got %d", n);
            goto bad;
        }
        if (!q) q = end;
        size_t n = (size_t)(q - p);
        if (f == 0) {
            if (n != 1 || (p[0] != '0' && p[0] != '1')) {
                bad_field(msg, msg_len, 1, "label", "0 or 1", p, n);
                goto bad;
            }
            r->labels[row] = (float)(p[0] - '0');
        } else if (f <= HPS_CRITEO_DENSE) {
            double x = 0;
            if (n && criteo_int(p, n, &x) != 0) {
                snprintf(name, sizeof name, "I%d", f);
                bad_field(msg, msg_len, f + 1, name, "an integer", p, n);
                goto bad;
            }
            r->dense[(size_t)(f - 1) * r->cap + row] = n ? hps_dense_transform(o->transform, x) : 0.0f;
        } else if (n) {
            int slot = f - 1 - HPS_CRITEO_DENSE;
            uint64_t v;
            if (criteo_hex(p, n, &v) != 0) {
                bad_field(msg, msg_len, f + 1, hps_slot_name(HPS_FMT_CRITEO, slot, name),
                          "1 to 16 hex digits", p, n);
                goto bad;
            }
            if (o->schema.n_slots) hps_rows_add_key(r, slot, hps_key_inline(o, slot, v), 1.0f);
        }
        p = q + 1;
    }
    return 0;
bad:
    hps_rows_drop_last(r);
    return -1;
}

int hps_criteo_parse(const hps_parse_opts *o, const char *line, size_t len, hps_rows *r,
                     char *msg, size_t msg_len)
{
    if (len && line[len - 1] == '\r') len--;
    criteo_fields f;
    if (!criteo_scan(line, line + len, &f)) return criteo_parse_careful(o, line, len, r, msg, msg_len);
    int row = hps_rows_begin(r);
    r->labels[row] = f.label;
    float dense[HPS_CRITEO_DENSE];
    hps_dense_transform_ints(o->transform, f.ints, f.has_int, dense, HPS_CRITEO_DENSE);
    for (int i = 0; i < HPS_CRITEO_DENSE; i++) r->dense[(size_t)i * r->cap + row] = dense[i];
    /* a dense-only schema reads the categorical fields and drops them */
    for (int s = 0; s < HPS_CRITEO_SLOTS && o->schema.n_slots; s++)
        if (f.has_hex >> s & 1) hps_rows_add_key(r, s, hps_key_inline(o, s, f.hex[s]), 1.0f);
    return 0;
}

/* ---- libsvm ---------------------------------------------------------------
 * label idx:val idx:val ... [# comment], separated by spaces or tabs. */

static int is_space(char c) { return c == ' ' || c == '\t'; }

static int libsvm_label(const hps_schema *s, const char *p, size_t n, float *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, p, n), buf[n] = '\0';
    char *e;
    errno = 0;
    if (s->multiclass) {
        long v = strtol(buf, &e, 10);
        if (errno || *e || v < 0 || v >= s->classes) return -1;
        *out = (float)v;
        return 0;
    }
    double v = strtod(buf, &e);
    if (errno || *e || (v != 0 && v != 1 && v != -1)) return -1;
    *out = v > 0 ? 1.0f : 0.0f; /* -1/+1 and 0/1 both mean negative/positive */
    return 0;
}

/* The common "idx:val" of decimal digits, a plain decimal value of at most 19
 * digits and no exponent, parsed in one pass: 1 when it matched, with the
 * value strtod would give (m < 2^53 and 10^k exact: one correctly rounded
 * division, Clinger's fast path); 0 for anything else, left to strtod. */
static int libsvm_feature_fast(const char *p, size_t n, uint64_t *idx, double *val)
{
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    size_t i = 0;
    uint64_t k = 0;
    for (; i < n && i < 19 && (unsigned)(p[i] - '0') <= 9; i++) k = k * 10 + (unsigned)(p[i] - '0');
    if (i == 0 || i == n || p[i] != ':') return 0;
    int neg = 0, digits = 0, frac = -1;
    uint64_t m = 0;
    if (++i < n && (p[i] == '-' || p[i] == '+')) neg = p[i++] == '-';
    for (; i < n; i++) {
        unsigned d = (unsigned)(p[i] - '0');
        if (d <= 9) {
            if (++digits > 19) return 0;
            m = m * 10 + d;
            frac += frac >= 0;
        } else if (p[i] == '.' && frac < 0) {
            frac = 0;
        } else {
            return 0;
        }
    }
    if (digits == 0 || m >> 53) return 0;
    double v = (double)m / pow10[frac > 0 ? frac : 0];
    *idx = k;
    *val = neg ? -v : v;
    return 1;
}

/* "idx:val" with idx a decimal integer and val a finite number that a float
 * holds: 1e39 is finite as a double but inf once stored, and one inf feature
 * turns every loss into NaN. */
static int libsvm_feature(const char *p, size_t n, uint64_t *idx, double *val)
{
    if (libsvm_feature_fast(p, n, idx, val)) return 0;
    char buf[96];
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, p, n), buf[n] = '\0';
    char *colon = strchr(buf, ':'), *e;
    if (!colon || colon == buf) return -1;
    *colon = '\0';
    for (char *c = buf; *c; c++)
        if (*c < '0' || *c > '9') return -1;
    errno = 0;
    *idx = strtoull(buf, &e, 10);
    if (errno) return -1;
    *val = strtod(colon + 1, &e);
    if (errno || e == colon + 1 || *e || !(fabs(*val) <= FLT_MAX)) return -1;
    return 0;
}

int hps_libsvm_parse(const hps_parse_opts *o, const char *line, size_t len, hps_rows *r,
                     char *msg, size_t msg_len)
{
    const hps_schema *s = &r->schema;
    if (len && line[len - 1] == '\r') len--;
    const char *hash = memchr(line, '#', len);
    const char *p = line, *end = hash ? hash : line + len;
    int row = hps_rows_begin(r), field = 0;
    for (;;) {
        while (p < end && is_space(*p)) p++;
        if (p == end) break;
        const char *q = p;
        while (q < end && !is_space(*q)) q++;
        size_t n = (size_t)(q - p);
        field++;
        if (field == 1) {
            if (libsvm_label(s, p, n, &r->labels[row]) != 0) {
                char what[64];
                if (s->multiclass) snprintf(what, sizeof what, "a class in [0, %d)", s->classes);
                else snprintf(what, sizeof what, "a label 0, 1, -1 or +1");
                bad_field(msg, msg_len, 1, "label", what, p, n);
                goto bad;
            }
        } else {
            uint64_t idx;
            double val;
            if (libsvm_feature(p, n, &idx, &val) != 0) {
                bad_field(msg, msg_len, field, "feature", "idx:value", p, n);
                goto bad;
            }
            if (s->n_slots == 0) { /* --dense N: indices 1..N are dense features */
                if (idx < 1 || idx > (uint64_t)s->n_dense) {
                    char what[64];
                    snprintf(what, sizeof what, "an index in [1, %d]", s->n_dense);
                    bad_field(msg, msg_len, field, "feature", what, p, n);
                    goto bad;
                }
                r->dense[(idx - 1) * (size_t)r->cap + row] = hps_dense_transform(o->transform, val);
            } else {
                hps_rows_add_key(r, 0, o->buckets ? idx % o->buckets : idx, (float)val);
            }
        }
        p = q;
    }
    if (field == 0) {
        snprintf(msg, msg_len, "field 1 (label): expected a label, got an empty line");
        goto bad;
    }
    return 0;
bad:
    hps_rows_drop_last(r);
    return -1;
}

int hps_parse_line(const hps_parse_opts *o, const char *line, size_t len, hps_rows *r,
                   char *msg, size_t msg_len)
{
    return o->format == HPS_FMT_CRITEO ? hps_criteo_parse(o, line, len, r, msg, msg_len)
                                       : hps_libsvm_parse(o, line, len, r, msg, msg_len);
}
