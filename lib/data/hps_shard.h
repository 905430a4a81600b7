/* hps_shard: shard files and shard directories (see hps-shard(5)).
 *
 * A shard file is a 64-byte header, independently zstd-compressed blocks of
 * at most block_rows samples, and a block index at the end, every part with
 * a CRC-32C.  A shard directory is the shard files plus manifest.json.
 *
 * Writing: compress blocks anywhere (hps_block_compress is thread-safe with
 * one ZSTD_CCtx per thread), append them in order with hps_shard_writer_add.
 *
 * Reading, for hps-train:
 *
 *     hps_shard_reader *r = hps_shard_open(path, NULL, &err);
 *     hps_batch *b = hps_batch_create(B, s->n_dense, s->n_slots, ...);
 *     while ((n = hps_shard_read(r, b, B, &err)) > 0) train(b);
 *     if (n < 0) fail(err);
 *     hps_shard_close(r);
 *
 * A background thread reads, checks and decodes the next blocks while the
 * caller works on the current one; memory is bounded by `ahead` blocks.
 */
#ifndef HPS_SHARD_H
#define HPS_SHARD_H

#include <stdint.h>

#include "data/hps_data.h"
#include "net/hps_batch.h"

#define HPS_SHARD_MAGIC "HPSSHARD"
#define HPS_SHARD_INDEX_MAGIC "HPSINDEX"
#define HPS_SHARD_VERSION 2 /* written; version 1 is still read */
#define HPS_SHARD_HEADER_SIZE 64
#define HPS_SHARD_ENTRY_SIZE 32
#define HPS_SHARD_MAX_BLOCK_ROWS (1 << 20)

/* A compressed block, ready to append. */
typedef struct {
    uint8_t *data;
    size_t len, cap;
    uint32_t rows, usize, crc; /* samples, payload bytes, CRC-32C of data[0..len) */
    uint32_t nnz;
} hps_block;

/* Encodes and compresses r into out.  cctx is a ZSTD_CCtx *, one per thread;
 * scratch holds the payload between the two steps (grown as needed). */
void hps_block_compress(const hps_rows *r, void *cctx, int level, hps_block *out,
                        uint8_t **scratch, size_t *scratch_cap);
void hps_block_free(hps_block *b);

/* What a written or opened shard holds. */
typedef struct {
    hps_schema schema;
    uint32_t block_rows, blocks;
    uint64_t rows, nnz, bytes;
    uint32_t checksum; /* CRC-32C of every byte after the header */
} hps_shard_info;

typedef struct hps_shard_writer hps_shard_writer;
hps_shard_writer *hps_shard_writer_create(const char *path, const hps_schema *s,
                                          uint32_t block_rows, hps_error *err);
int hps_shard_writer_add(hps_shard_writer *w, const hps_block *b, hps_error *err);
/* Writes index and final header, fsyncs, closes; frees w in every case. */
int hps_shard_writer_close(hps_shard_writer *w, hps_shard_info *info, hps_error *err);
void hps_shard_writer_abort(hps_shard_writer *w); /* closes and frees; the caller removes the file */

/* ---- reading ------------------------------------------------------------ */
/* Blocks a reader decodes ahead in the background where its opts do not say
 * (hps-train's sources read so, and hps-profile times the read so). */
#define HPS_SHARD_AHEAD 4

typedef struct {
    int ahead;      /* blocks decoded ahead in the background; 0: decode in the caller */
    int batches;    /* read with hps_shard_read: decode every block for it (else from its first call) */
} hps_shard_read_opts;

typedef struct hps_shard_reader hps_shard_reader;
/* Opens and checks header and index (CRCs, offsets, row counts). */
hps_shard_reader *hps_shard_open(const char *path, const hps_shard_read_opts *opts,
                                 hps_error *err);
const hps_shard_info *hps_shard_reader_info(const hps_shard_reader *r);
/* Fills b (b->B reset) with up to max samples (max <= b->cap); returns the
 * number read, 0 at the end, -1 on error (a corrupt block names the shard
 * and the block).  Weights are 1 where b has them and the shard does not. */
int hps_shard_read(hps_shard_reader *r, hps_batch *b, int max, hps_error *err);
/* The same, but only rows [lo, hi) of the up to max are decoded: the others
 * are counted with label 0, no keys, and dense values left as they were (a
 * data-parallel worker trains its slice of a batch and reads only that). */
int hps_shard_read_part(hps_shard_reader *r, hps_batch *b, int max, int lo, int hi, hps_error *err);
/* The next whole block, column by column: 1, 0 at the end, -1 on error.
 * *rows stays valid until the next call. */
int hps_shard_next_block(hps_shard_reader *r, const hps_rows **rows, hps_error *err);
/* Positions the reader at sample `row` (0-based; rows = the end): resume. */
int hps_shard_seek(hps_shard_reader *r, uint64_t row, hps_error *err);
uint64_t hps_shard_tell(const hps_shard_reader *r); /* next sample to be read */
void hps_shard_close(hps_shard_reader *r);

/* Reads every block and checks it; also the whole-file checksum. */
int hps_shard_verify(const char *path, hps_shard_info *info, hps_error *err);

/* ---- the manifest -------------------------------------------------------- */
typedef struct {
    char *file;        /* relative to the directory */
    char role[16];     /* "train" or "holdout" */
    double share;      /* of the training rows (holdout: of all rows) */
    uint64_t rows, bytes, blocks, nnz;
    uint32_t checksum;
} hps_manifest_shard;

/* A server's key list, keys/server-NNNNN.keys (hps-shard(5)): what the
 * manifest records of it. */
typedef struct {
    uint64_t keys;     /* distinct keys the server owns */
    uint32_t checksum; /* the file's own trailing CRC-32C */
    int has_checksum;  /* 0: a manifest from before checksums were recorded */
} hps_server_keys_file;

/* Key statistics of one slot: lookups, distinct keys (estimated), and the
 * share of the lookups the hottest 1, 10, 100, 1000 keys take. */
typedef struct {
    double lookups, distinct;
    double top_share[4];
} hps_slot_stats;

typedef struct {
    char *dir;
    int version;
    hps_data_format format;
    hps_schema schema;
    char **slot_names;
    hps_transform transform;
    hps_hash_kind hash;
    uint64_t hash_seed, buckets;
    uint64_t rows;
    int n_shards;
    hps_manifest_shard *shards;
    int servers; /* 0 when no key lists were written */
    hps_server_keys_file *server_files; /* servers of them */
    hps_slot_stats *slot_stats; /* schema.n_slots, or NULL when the manifest has none */
    double input_bytes;   /* input.bytes: the text read (0 when not recorded) */
    long long skipped;    /* input.skipped: lines skipped as bad (0 when not recorded) */
    char digest[72]; /* sha256 of manifest.json as written */
} hps_manifest;

hps_manifest *hps_manifest_load(const char *dir, hps_error *err);
void hps_manifest_free(hps_manifest *m);
/* dir/file for shard i (malloc'd). */
char *hps_manifest_shard_path(const hps_manifest *m, int i);
/* Shard i's file (at path, its header and index read into info) against the
 * manifest: schema, rows and bytes.  A shard copied in from another
 * directory would otherwise train silently on labels the model cannot hold. */
int hps_manifest_check_shard(const hps_manifest *m, int i, const char *path,
                             const hps_shard_info *info, hps_error *err);

/* For people (data_view.c): a shard's rows as text again, TSV (keys in hex,
 * key:weight when weighted) or libsvm; a directory's statistics table from
 * the manifest; and every shard checked against the manifest's rows, bytes
 * and checksum. */
int hps_shard_cat(const char *path, int libsvm, FILE *out, hps_error *err);
void hps_manifest_print_stats(FILE *f, const hps_manifest *m);
int hps_manifest_verify(const hps_manifest *m, hps_error *err);
/* Reads a server's key list whole (data_server_keys.c, its writer): its
 * header as server `server` of `servers` with n_slots slots and `keys`
 * keys, each slot's keys ascending and the server's by the mix64-mod rule,
 * and its CRC-32C; *checksum gets that CRC. */
int hps_server_keys_verify(const char *path, int server, int servers, int n_slots, uint64_t keys,
                           uint32_t *checksum, hps_error *err);

#endif
