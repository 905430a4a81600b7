/* hps_data: samples as hps-shard parses, stores and reads them.
 *
 * A sample is a label, n_dense floats and, per sparse slot, a bag of 64-bit
 * keys (each with a weight when the data carries weights, as libsvm does).
 * hps_rows holds a block of samples column by column, which is both how a
 * shard block is laid out on disk (see hps-shard(5)) and what compresses
 * well: keys of one slot sit together, so zstd finds the hot ones repeated.
 *
 * Text formats: Criteo TSV (label, 13 integers, 26 hex categoricals) and
 * libsvm/svmlight (label idx:val ...).  Parsers take one line and append one
 * sample, or return -1 with a message naming the field.
 */
#ifndef HPS_DATA_H
#define HPS_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "core/hps_core.h"
#include "core/hps_rng.h"

#define HPS_CRITEO_DENSE 13
#define HPS_CRITEO_SLOTS 26
#define HPS_DATA_MAX_SLOTS 4096
#define HPS_DATA_MAX_DENSE 65536
#define HPS_DATA_MAX_CLASSES 65536

typedef enum { HPS_FMT_CRITEO, HPS_FMT_LIBSVM } hps_data_format;
typedef enum { HPS_TRANSFORM_NONE, HPS_TRANSFORM_LOG } hps_transform;
typedef enum { HPS_HASH_MIX64, HPS_HASH_NONE } hps_hash_kind;

extern const char *const hps_data_format_names[]; /* "criteo", "libsvm" */
extern const char *const hps_transform_names[];   /* "none", "log" */
extern const char *const hps_hash_names[];        /* "mix64", "none" */

/* What every sample of a data set looks like. */
typedef struct {
    int n_dense;
    int n_slots;
    int weighted;  /* keys carry float weights */
    int multiclass;
    int classes;   /* 2 for binary */
} hps_schema;

/* How text becomes samples. */
typedef struct {
    hps_data_format format;
    hps_schema schema;
    hps_transform transform;
    hps_hash_kind hash;
    uint64_t seed;    /* of the key hash */
    uint64_t buckets; /* 0: keys are not folded */
} hps_parse_opts;

/* ---- keys ---------------------------------------------------------------
 * A Criteo categorical field is a hex string of 1..16 digits, read as the
 * unsigned integer v.  Its key in slot s (0-based) is
 *     key = hps_mix64(v ^ hps_mix64(seed + s))      (--hash mix64, default)
 *     key = v                                       (--hash none)
 * then, with --buckets N, key = key mod N.  For a fixed seed and slot the
 * mix64 form is a bijection of v, so hashing itself never merges two values;
 * only folding into N buckets does.  libsvm feature indices are keys as they
 * are (the index is already the identity of the feature). */
uint64_t hps_key_of(const hps_parse_opts *o, int slot, uint64_t value);

static inline uint64_t hps_key_inline(const hps_parse_opts *o, int slot, uint64_t value)
{
    uint64_t key = o->hash == HPS_HASH_MIX64 ? hps_mix64(value ^ hps_mix64(o->seed + (uint64_t)slot))
                                             : value;
    return o->buckets ? key % o->buckets : key;
}

/* ---- dense transform ----------------------------------------------------
 * log: x -> sign(x) * ln(1 + |x|), so counts spanning decades land in a few
 * units and the negative values Criteo has in I2 stay distinct; none: x.
 * A missing value is 0 under either. */
float hps_dense_transform(hps_transform t, double x);
/* The same for n integers (|x| < 2^53) at once, 0 where !present: the
 * Criteo parser's 13 a line without a call and a check each. */
void hps_dense_transform_ints(hps_transform t, const int64_t *x, const int *present, float *out, int n);

/* ---- checksums ----------------------------------------------------------
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial value and
 * final xor 0xFFFFFFFF: the iSCSI/ext4 CRC), using the SSE4.2 instruction
 * where the CPU has it.  crc = hps_crc32c(0, ...) starts a checksum;
 * hps_crc32c(crc, more) continues it. */
uint32_t hps_crc32c(uint32_t crc, const void *data, size_t len);

/* ---- a block of samples, column by column ------------------------------- */
typedef struct {
    hps_schema schema;
    int rows, cap;       /* samples held, samples allocated */
    float *labels;       /* cap */
    float *dense;        /* n_dense columns of cap: dense[d * cap + row] */
    uint32_t *counts;    /* n_slots columns of cap: keys of row r in slot s */
    uint64_t **keys;     /* per slot, in row order */
    float **weights;     /* per slot, when weighted */
    int64_t *nkeys, *kcap; /* per slot */
    int64_t **offsets;   /* per slot, rows+1 prefix sums; filled by hps_rows_index */
    int tail_zero;       /* rows >= rows are zero in every dense and count column */
    /* hps_rows_decode_batched of a version 2 payload: the dense columns left
     * in it, per column its bitmap and its first value (dense unused) */
    const uint8_t **dense_bits, **dense_vals;
    int dense_in_payload;
    /* where hps_rows_dense_rows stopped: row, and each column's next value
     * (batches read on, so each starts there, not at row 0) */
    const uint8_t **dense_at;
    int dense_row;
} hps_rows;

hps_rows *hps_rows_create(const hps_schema *s, int cap);
void hps_rows_free(hps_rows *r);
void hps_rows_clear(hps_rows *r);
/* Starts a new sample (dense zeroed, bags empty); returns its row index. */
int hps_rows_begin(hps_rows *r);
/* Room for n keys in a slot, kept (grown by doubling). */
void hps_rows_reserve_keys(hps_rows *r, int slot, int64_t n);
/* Appends a key to the sample begun last (inline: the parsers' inner loop). */
static inline void hps_rows_add_key(hps_rows *r, int slot, uint64_t key, float weight)
{
    if (r->nkeys[slot] == r->kcap[slot]) hps_rows_reserve_keys(r, slot, r->nkeys[slot] + 1);
    int64_t k = r->nkeys[slot]++;
    r->keys[slot][k] = key;
    if (r->schema.weighted) r->weights[slot][k] = weight;
    r->counts[(size_t)slot * r->cap + r->rows - 1]++;
}
/* Drops the sample begun last (a bad line skipped with --skip-bad). */
void hps_rows_drop_last(hps_rows *r);
/* Builds per-slot row offsets (needed before hps_rows_key_range). */
void hps_rows_index(hps_rows *r);
int64_t hps_rows_nnz(const hps_rows *r);

/* Block payload, the uncompressed bytes of a shard block (hps-shard(5)):
 * labels, dense columns, count columns, key columns, weight columns, all
 * little-endian.  encode writes version 2 (dense columns as a bitmap and
 * their non-zero values, counts as byte planes) to out, which holds
 * hps_rows_payload_bound(r) bytes, and returns the bytes written. */
size_t hps_rows_payload_bound(const hps_rows *r);
/* The fewest bytes a payload of `rows` samples can take: no keys, and in
 * version 2 no non-zero dense values. */
uint64_t hps_payload_least(const hps_schema *s, uint64_t rows, int version);
size_t hps_rows_encode(const hps_rows *r, uint8_t *out);
/* Decodes a payload of len bytes holding `rows` samples, written in
 * `version` (1 or 2) into r (cleared first); -1 when the bytes do not add
 * up to the schema. */
int hps_rows_decode(hps_rows *r, const uint8_t *in, size_t len, int rows, int version);
/* The same checks, but a version 2 payload's dense columns stay in `in`
 * (which must outlive r's next decode): hps_rows_dense_rows then decodes
 * the rows a batch takes straight into it.  Decoding every column of a
 * block and transposing it whole was most of a batch's read, and a
 * data-parallel worker needs only its slice of the rows. */
int hps_rows_decode_batched(hps_rows *r, const uint8_t *in, size_t len, int rows, int version);
/* The dense columns left in the payload decoded into r->dense (no-op when they are there). */
void hps_rows_unpack_dense(hps_rows *r);
/* Rows [from, from + n) of the dense columns as rows (n x n_dense) at out. */
void hps_rows_dense_rows(hps_rows *r, int from, int n, float *out);
/* The first row whose label is not a class of the schema (NaN, 1e6, 0.5), or -1. */
int hps_rows_bad_label(const hps_rows *r);
/* The first row with a dense value that is not finite (NaN, inf), its
 * column at *col and the value at *value, or -1; the text parsers refuse them, a forged shard may
 * not.  Reads the columns where hps_rows_decode_batched left them. */
int hps_rows_bad_dense(const hps_rows *r, int *col, float *value);

/* ---- parsing ------------------------------------------------------------
 * Parses one line (without its newline; a trailing '\r' is ignored) and
 * appends one sample to r.  On a malformed line returns -1, leaves r as it
 * was, and writes "field N (NAME): expected ..., got '...'" into msg. */
int hps_parse_line(const hps_parse_opts *o, const char *line, size_t len, hps_rows *r,
                   char *msg, size_t msg_len);
int hps_criteo_parse(const hps_parse_opts *o, const char *line, size_t len, hps_rows *r,
                     char *msg, size_t msg_len);
int hps_libsvm_parse(const hps_parse_opts *o, const char *line, size_t len, hps_rows *r,
                     char *msg, size_t msg_len);
/* Name of slot s for a format ("C1".."C26", "features"); buf >= 16 bytes. */
const char *hps_slot_name(hps_data_format f, int slot, char *buf);

/* Formats a float as the shortest decimal that reads back to the same float. */
int hps_format_float(char *buf, size_t n, float v);

#endif
