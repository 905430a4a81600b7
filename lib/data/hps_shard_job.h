/* hps_shard_job: turning text inputs into a shard directory (hps-shard's
 * default mode), and the pieces it is made of: exact splits, key
 * statistics, the temporary directory, synthetic data. */
#ifndef HPS_SHARD_JOB_H
#define HPS_SHARD_JOB_H

#include <stdint.h>
#include <stdio.h>

#include "data/hps_data.h"
#include "data/hps_shard.h"

#define HPS_MAX_SHARDS 65536
#define HPS_MAX_SERVERS 65536

/* ---- splits ----------------------------------------------------------------
 * Splits n rows into k parts in proportion to shares (any non-negative
 * weights, not all zero) by the largest-remainder method: part i gets
 * floor(n*w_i/W), and the rows left over go one each to the parts with the
 * largest fractional remainders, lower index first on ties.  The counts
 * always sum to n, and each is within one row of n*w_i/W. */
void hps_split_counts(uint64_t n, const double *shares, int k, uint64_t *counts);

/* ---- key statistics --------------------------------------------------------
 * Per slot: lookups, a HyperLogLog distinct-key estimate (2^12 registers,
 * about 1.6% standard error) and the hottest keys, counted on a sample of
 * every 4th key of each block and merged block by block in input order, so
 * the figures are the same whatever the number of threads. */
#define HPS_HLL_BITS 12
#define HPS_HOT_PER_BLOCK 256
#define HPS_HOT_KEEP 4096

typedef struct {
    uint64_t key, count;
} hps_key_count;

typedef struct {
    int n_slots;
    uint8_t *hll;               /* n_slots x 2^HPS_HLL_BITS registers */
} hps_hll_set;

hps_hll_set *hps_hll_create(int n_slots);
void hps_hll_free(hps_hll_set *h);
void hps_hll_add_rows(hps_hll_set *h, const hps_rows *r);
void hps_hll_merge(hps_hll_set *into, const hps_hll_set *from);
double hps_hll_estimate(const hps_hll_set *h, int slot);

/* The hottest keys of one block, per slot (sampled), for hps_hot_merge. */
typedef struct {
    int n_slots;
    int *n;                     /* per slot, <= HPS_HOT_PER_BLOCK */
    hps_key_count *top;         /* n_slots x HPS_HOT_PER_BLOCK */
    uint64_t *sampled;          /* per slot: keys looked at */
    uint64_t *table;            /* scratch: open addressing (key, count) pairs */
    size_t table_cap;
} hps_hot_block;

hps_hot_block *hps_hot_block_create(int n_slots);
void hps_hot_block_free(hps_hot_block *h);
void hps_hot_block_count(hps_hot_block *h, const hps_rows *r);

typedef struct {
    int n_slots;
    uint64_t *lookups, *sampled; /* per slot */
    int *n;                      /* candidates per slot */
    hps_key_count *cand;         /* n_slots x 2*HPS_HOT_KEEP */
} hps_hot_set;

hps_hot_set *hps_hot_create(int n_slots);
void hps_hot_free(hps_hot_set *h);
void hps_hot_merge(hps_hot_set *h, const hps_hot_block *b, const hps_rows *r);
/* The top k of slot s, hottest first (ties by key); returns how many. */
int hps_hot_top(hps_hot_set *h, int slot, int k, hps_key_count *out);

/* ---- the temporary output directory ---------------------------------------------
 * Output goes to TARGET.tmp.PID.XXXXXX beside TARGET and is renamed into
 * place at the end.  Every file made inside is registered first, so that an
 * error, exit, SIGINT, SIGTERM or SIGHUP removes them all and the directory;
 * what a SIGKILL left (its PID gone) is removed by the next run.  An existing
 * TARGET is refused here, before any work, unless force (then it must be a
 * directory). */
typedef struct hps_tmpdir hps_tmpdir;
hps_tmpdir *hps_tmpdir_create(const char *target, int force, hps_error *err);
/* dir/name, registered for removal (malloc'd; the caller frees it). */
char *hps_tmpdir_file(hps_tmpdir *t, const char *name);
int hps_tmpdir_mkdir(hps_tmpdir *t, const char *name, hps_error *err);
/* Removes a file made earlier that must not end in the result. */
void hps_tmpdir_unlink(hps_tmpdir *t, const char *path);
/* Renames the directory to TARGET (replacing it when force). */
int hps_tmpdir_commit(hps_tmpdir *t, int force, hps_error *err);
void hps_tmpdir_remove(hps_tmpdir *t); /* removes what is left, frees t */

/* ---- sharding ---------------------------------------------------------------- */
typedef struct {
    hps_parse_opts parse;
    const char *const *inputs;  /* "-" = stdin */
    int n_inputs;
    const char *out_dir;
    int force;
    int n_shards;
    const double *shares;       /* n_shards weights, or NULL for equal */
    const char *split_method;   /* "shards", "weights", "plan" */
    const char *plan_path;
    const char *plan_digest;
    const char *model_name, *model_digest;
    char **slot_names;          /* n_slots names, or NULL for the format's */
    double holdout;             /* fraction of all rows, [0, 1) */
    int shuffle;
    uint64_t shuffle_seed;
    size_t shuffle_mem;         /* the most text one shuffle bucket may hold */
    int skip_bad;
    int threads;
    int level;
    int block_rows;
    int servers;                /* 0: no key lists */
    int progress;
} hps_shard_opts;

typedef struct {
    uint64_t rows, lines, skipped, bytes_in, bytes_out;
    uint64_t text_bytes; /* the input decompressed */
    double seconds;
    /* the largest |dense value| written and its feature (0-based; -1: no
     * dense features): hps-shard warns when raw values look unscaled */
    double dense_max_abs;
    int dense_max_col;
} hps_shard_result;

int hps_shard_run(const hps_shard_opts *o, hps_shard_result *res, hps_error *err);

/* The job's last two writes, in files of their own (hps_shard_run calls
 * them): manifest.json (data_manifest.c) and, with servers, each server's
 * key list (data_server_keys.c). */
int hps_manifest_write(const char *path, const hps_shard_opts *o, const char *const *names,
                       int n_files, const hps_shard_info *infos, const char *const *files,
                       const uint64_t *planned, int n_out, const hps_shard_result *res,
                       const hps_hll_set *hll, hps_hot_set *hot, const hps_server_keys_file *server_keys,
                       hps_error *err);
int hps_server_keys_write(hps_tmpdir *t, const hps_shard_opts *o, char **shard_paths, int n,
                          const hps_hll_set *hll, hps_server_keys_file *files, hps_error *err);

/* ---- synthetic Criteo data -----------------------------------------------------
 * See hps-shard(1), SYNTHETIC DATA.  Rows are generated in chunks of
 * HPS_SYNTH_CHUNK, each from its own seeded generator, so the output is the
 * same for any number of threads. */
#define HPS_SYNTH_CHUNK 4096
#define HPS_SYNTH_MAX_INTERACTIONS 8
typedef struct {
    uint64_t rows, seed;
    double zipf_s;          /* exponent of the categorical Zipf laws */
    double scale;           /* vocabulary sizes are Criteo's times scale */
    int kaggle;             /* --cardinality kaggle: a uniform tail beside the Zipf head */
    int interactions;       /* slot pairs with a planted interaction, 0..HPS_SYNTH_MAX_INTERACTIONS */
    int threads;
    int progress;
    int day;                /* --days: 1, 2, ... the day written (0: no days, no drift) */
    double drift;           /* share of each slot's values replaced by new ones a day */
} hps_synth_opts;

typedef struct {
    uint64_t rows, positives;
    double auc, logloss;    /* of the planted model's own probabilities */
    uint64_t bytes;
} hps_synth_result;

int hps_synth(const hps_synth_opts *o, FILE *out, const char *out_name, hps_synth_result *res,
              hps_error *err);

#endif
