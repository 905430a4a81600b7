/* manifest.json: what a shard directory holds (see hps-shard(5)). */
#include "data/hps_shard_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/hps_io.h"
#include "core/hps_json.h"

#define HOT_LISTED 10

static json_t *key_hex(uint64_t k)
{
    char buf[24];
    snprintf(buf, sizeof buf, "0x%016llx", (unsigned long long)k);
    return json_string(buf);
}

static json_t *checksum_str(uint32_t crc)
{
    char buf[24];
    snprintf(buf, sizeof buf, "crc32c:%08x", crc);
    return json_string(buf);
}

static json_t *schema_json(const hps_shard_opts *o)
{
    const hps_schema *s = &o->parse.schema;
    json_t *slots = json_array();
    for (int j = 0; j < s->n_slots; j++) {
        char name[16];
        const char *n = o->slot_names ? o->slot_names[j] : hps_slot_name(o->parse.format, j, name);
        json_array_append_new(slots, json_pack("{s:s, s:b}", "name", n, "weighted", s->weighted));
    }
    json_t *label = json_pack("{s:s, s:i}", "kind", s->multiclass ? "multiclass" : "binary", "classes", s->classes);
    return json_pack("{s:i, s:o, s:o}", "dense", s->n_dense, "slots", slots, "label", label);
}

static json_t *split_json(const hps_shard_opts *o)
{
    json_t *sp = json_pack("{s:s, s:b}", "method", o->split_method, "shuffle", o->shuffle);
    if (o->shuffle) json_object_set_new(sp, "shuffle_seed", json_integer((json_int_t)o->shuffle_seed));
    json_object_set_new(sp, "holdout", json_real(o->holdout));
    if (o->plan_path)
        json_object_set_new(sp, "plan", json_pack("{s:s, s:s}", "path", o->plan_path, "digest", o->plan_digest));
    return sp;
}

static json_t *shards_json(const hps_shard_opts *o, const hps_shard_info *infos, const char *const *files,
                           const uint64_t *planned, int n_out)
{
    json_t *a = json_array();
    double total = 0;
    for (int i = 0; i < o->n_shards; i++) total += o->shares ? o->shares[i] : 1;
    uint64_t all = 0;
    for (int i = 0; i < n_out; i++) all += planned[i];
    for (int i = 0; i < n_out; i++) {
        const hps_shard_info *s = &infos[i];
        int hold = i == o->n_shards;
        double share = hold ? (all ? (double)planned[i] / (double)all : 0)
                            : (o->shares ? o->shares[i] : 1) / total;
        json_t *e = json_pack("{s:s, s:s}", "file", files[i], "role", hold ? "holdout" : "train");
        if (!hold) json_object_set_new(e, "rank", json_integer(i));
        json_object_set_new(e, "share", json_real(share));
        json_object_set_new(e, "rows", json_integer((json_int_t)s->rows));
        json_object_set_new(e, "blocks", json_integer(s->blocks));
        json_object_set_new(e, "bytes", json_integer((json_int_t)s->bytes));
        json_object_set_new(e, "keys", json_integer((json_int_t)s->nnz));
        json_object_set_new(e, "checksum", checksum_str(s->checksum));
        json_array_append_new(a, e);
    }
    return a;
}

static json_t *slots_json(const hps_shard_opts *o, const hps_hll_set *hll, hps_hot_set *hot)
{
    json_t *a = json_array();
    hps_key_count *top = hps_malloc(HPS_HOT_KEEP * sizeof *top);
    for (int j = 0; j < o->parse.schema.n_slots; j++) {
        char name[16];
        const char *n = o->slot_names ? o->slot_names[j] : hps_slot_name(o->parse.format, j, name);
        int k = hps_hot_top(hot, j, HPS_HOT_KEEP, top);
        double sampled = hot->sampled[j] ? (double)hot->sampled[j] : 1, cum = 0;
        json_t *keys = json_array(), *shares = json_object();
        for (int i = 0; i < k; i++) {
            double share = (double)top[i].count / sampled;
            if (i < HOT_LISTED)
                json_array_append_new(keys, json_pack("{s:o, s:o}", "key", key_hex(top[i].key), "share", hps_json_real(share)));
        }
        /* share of all lookups that the hottest 10, 100, 1000 keys take */
        for (int t = 10, i = 0; t <= 1000; t *= 10) {
            for (; i < k && i < t; i++) cum += (double)top[i].count / sampled;
            char label[16];
            snprintf(label, sizeof label, "%d", t);
            json_object_set_new(shares, label, hps_json_real(cum));
        }
        json_t *e = json_pack("{s:s, s:I}", "name", n, "lookups", (json_int_t)hot->lookups[j]);
        json_object_set_new(e, "distinct_estimate", json_integer((json_int_t)(hps_hll_estimate(hll, j) + 0.5)));
        json_object_set_new(e, "hot_keys", keys);
        json_object_set_new(e, "top_share", shares);
        json_array_append_new(a, e);
    }
    free(top);
    return a;
}

static json_t *servers_json(const hps_shard_opts *o, const hps_server_keys_file *server_keys)
{
    json_t *files = json_array();
    for (int p = 0; p < o->servers; p++) {
        char f[64];
        snprintf(f, sizeof f, "keys/server-%05d.keys", p);
        json_array_append_new(files, json_pack("{s:i, s:s, s:I, s:o}", "server", p, "file", f, "keys",
                                               (json_int_t)server_keys[p].keys, "checksum",
                                               checksum_str(server_keys[p].checksum)));
    }
    return json_pack("{s:i, s:s, s:o}", "count", o->servers, "rule", "mix64-mod", "files", files);
}

/* ---- the manifest's own digest ----------------------------------------------
 * Version 2 ends with "sha256": the SHA-256 of the file as written with
 * those 64 hex digits as zeros.  Readers check it, so a flipped byte anywhere
 * (the hot-key statistics included, which nothing else reads back) is caught. */

#define ZERO_DIGEST "sha256:0000000000000000000000000000000000000000000000000000000000000000"

/* The digest text holds, found at its value's last occurrence (the key is
 * written last); 0 when it does not match or is not found. */
static int digest_matches(char *text, size_t len, const char *value)
{
    if (strlen(value) != strlen(ZERO_DIGEST) || strncmp(value, "sha256:", 7) != 0) return 0;
    char *at = NULL;
    for (char *p = text; (p = strstr(p, value)); p++) at = p;
    if (!at) return 0;
    char saved[sizeof ZERO_DIGEST], sum[72];
    memcpy(saved, at, sizeof ZERO_DIGEST - 1);
    memcpy(at, ZERO_DIGEST, sizeof ZERO_DIGEST - 1);
    hps_sha256_hex(text, len, sum);
    memcpy(at, saved, sizeof ZERO_DIGEST - 1);
    return strcmp(sum, value) == 0;
}

static int write_with_digest(const char *path, json_t *root, hps_error *err)
{
    json_object_set_new(root, "sha256", json_string(ZERO_DIGEST));
    char *s = hps_json_text(root);
    size_t n = strlen(s);
    s = hps_realloc(s, n + 2);
    strcpy(s + n++, "\n");
    char *at = strstr(s, ZERO_DIGEST), sum[72];
    HPS_CHECK(at);
    hps_sha256_hex(s, n, sum);
    memcpy(at, sum, strlen(sum));
    int rc = hps_write_atomic(path, s, n, err);
    free(s);
    return rc;
}

int hps_manifest_write(const char *path, const hps_shard_opts *o, const char *const *names,
                       int n_files, const hps_shard_info *infos, const char *const *files,
                       const uint64_t *planned, int n_out, const hps_shard_result *res,
                       const hps_hll_set *hll, hps_hot_set *hot, const hps_server_keys_file *server_keys,
                       hps_error *err)
{
    json_t *in_files = json_array();
    for (int i = 0; i < n_files; i++) json_array_append_new(in_files, json_string(names[i]));
    json_t *root = json_pack("{s:s, s:i, s:s}", "format", "hps-shards", "version", 2, "tool",
                             "hps-shard " HPS_VERSION);
    json_object_set_new(root, "input", json_pack("{s:s, s:o, s:I, s:I, s:I}", "format",
                                                 hps_data_format_names[o->parse.format], "files", in_files,
                                                 "bytes", (json_int_t)res->bytes_in, "lines",
                                                 (json_int_t)res->lines, "skipped", (json_int_t)res->skipped));
    json_t *keys = json_pack("{s:s, s:I}", "hash", o->parse.format == HPS_FMT_LIBSVM ? "index" : hps_hash_names[o->parse.hash],
                             "seed", (json_int_t)o->parse.seed);
    json_object_set_new(keys, "buckets", o->parse.buckets ? json_integer((json_int_t)o->parse.buckets) : json_null());
    json_object_set_new(root, "keys", keys);
    json_object_set_new(root, "dense_transform", json_string(hps_transform_names[o->parse.transform]));
    json_object_set_new(root, "schema", schema_json(o));
    if (o->model_digest)
        json_object_set_new(root, "model", json_pack("{s:s, s:s}", "name", o->model_name, "digest", o->model_digest));
    json_object_set_new(root, "split", split_json(o));
    json_object_set_new(root, "block_rows", json_integer(o->block_rows));
    json_object_set_new(root, "compression", json_pack("{s:s, s:i}", "codec", "zstd", "level", o->level));
    uint64_t blocks = 0, nnz = 0;
    for (int i = 0; i < n_out; i++) blocks += infos[i].blocks, nnz += infos[i].nnz;
    json_object_set_new(root, "totals", json_pack("{s:I, s:i, s:I, s:I, s:I}", "rows", (json_int_t)res->rows,
                                                  "shards", n_out, "blocks", (json_int_t)blocks, "bytes",
                                                  (json_int_t)res->bytes_out, "keys", (json_int_t)nnz));
    json_object_set_new(root, "shards", shards_json(o, infos, files, planned, n_out));
    json_object_set_new(root, "slots", slots_json(o, hll, hot));
    if (o->servers) json_object_set_new(root, "servers", servers_json(o, server_keys));
    int rc = write_with_digest(path, root, err);
    json_decref(root);
    return rc;
}

/* ---- loading ------------------------------------------------------------------ */

static int enum_of(const char *const *names, const char *s)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

static int load_shards(hps_manifest *m, json_t *a, const char *ctx0, hps_error *err)
{
    if (!json_is_array(a) || json_array_size(a) > HPS_MAX_SHARDS + 1)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: shards: expected an array", ctx0);
    m->n_shards = (int)json_array_size(a);
    m->shards = hps_calloc((size_t)m->n_shards + 1, sizeof *m->shards);
    for (int i = 0; i < m->n_shards; i++) {
        json_t *e = json_array_get(a, (size_t)i);
        char ctx[600];
        snprintf(ctx, sizeof ctx, "%s: shards[%d]", ctx0, i);
        hps_manifest_shard *s = &m->shards[i];
        const char *file, *role, *sum;
        long long rows, bytes, blocks, keys;
        if (!json_is_object(e) || hps_json_str(e, "file", HPS_REQUIRED, &file, ctx, err) != 0 ||
            hps_json_str(e, "role", HPS_REQUIRED, &role, ctx, err) != 0 ||
            hps_json_num(e, "share", HPS_REQUIRED, 0, 1, &s->share, ctx, err) != 0 ||
            hps_json_int(e, "rows", HPS_REQUIRED, 0, INT64_MAX, &rows, ctx, err) != 0 ||
            hps_json_int(e, "bytes", HPS_REQUIRED, 0, INT64_MAX, &bytes, ctx, err) != 0 ||
            hps_json_int(e, "blocks", HPS_REQUIRED, 0, UINT32_MAX, &blocks, ctx, err) != 0 ||
            hps_json_int(e, "keys", HPS_REQUIRED, 0, INT64_MAX, &keys, ctx, err) != 0 ||
            hps_json_str(e, "checksum", HPS_REQUIRED, &sum, ctx, err) != 0) {
            if (!json_is_object(e)) hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
            return -1;
        }
        if (strchr(file, '/') || file[0] == '.' || strlen(role) >= sizeof s->role ||
            sscanf(sum, "crc32c:%8x", &s->checksum) != 1)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: bad file name, role or checksum", ctx);
        s->file = hps_strdup(file);
        strcpy(s->role, role);
        s->rows = (uint64_t)rows, s->bytes = (uint64_t)bytes, s->blocks = (uint64_t)blocks, s->nnz = (uint64_t)keys;
    }
    return 0;
}

static int load_schema(hps_manifest *m, json_t *root, const char *ctx0, hps_error *err)
{
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: schema", ctx0);
    json_t *s = json_object_get(root, "schema"), *slots = json_object_get(s, "slots");
    json_t *label = json_object_get(s, "label");
    long long dense, classes;
    static const char *const kinds[] = {"binary", "multiclass", NULL};
    int kind;
    if (!json_is_object(s) || !json_is_array(slots) || !json_is_object(label) ||
        json_array_size(slots) > HPS_DATA_MAX_SLOTS)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: expected dense, slots and label", ctx);
    if (hps_json_int(s, "dense", HPS_REQUIRED, 0, HPS_DATA_MAX_DENSE, &dense, ctx, err) != 0 ||
        hps_json_enum(label, "kind", HPS_REQUIRED, kinds, &kind, ctx, err) != 0 ||
        hps_json_int(label, "classes", HPS_REQUIRED, 2, HPS_DATA_MAX_CLASSES, &classes, ctx, err) != 0)
        return -1;
    m->schema.n_dense = (int)dense;
    m->schema.n_slots = (int)json_array_size(slots);
    m->schema.multiclass = kind == 1;
    m->schema.classes = (int)classes;
    m->slot_names = hps_calloc((size_t)m->schema.n_slots + 1, sizeof *m->slot_names);
    for (int j = 0; j < m->schema.n_slots; j++) {
        json_t *e = json_array_get(slots, (size_t)j);
        const char *name = "";
        int weighted = 0;
        if (hps_json_str(e, "name", HPS_REQUIRED, &name, ctx, err) != 0 ||
            hps_json_bool(e, "weighted", HPS_OPTIONAL, &weighted, ctx, err) != 0)
            return -1;
        m->slot_names[j] = hps_strdup(name);
        m->schema.weighted |= weighted;
    }
    return 0;
}

/* The slots' key statistics (written by slots_json), when present. */
static int load_slot_stats(hps_manifest *m, json_t *a, const char *ctx0, hps_error *err)
{
    if (!a) return 0;
    if (!json_is_array(a) || (int)json_array_size(a) != m->schema.n_slots)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: slots: expected one entry per schema slot", ctx0);
    m->slot_stats = hps_calloc((size_t)m->schema.n_slots + 1, sizeof *m->slot_stats);
    for (int j = 0; j < m->schema.n_slots; j++) {
        json_t *e = json_array_get(a, (size_t)j), *top = json_object_get(e, "top_share");
        json_t *hot = json_array_get(json_object_get(e, "hot_keys"), 0);
        hps_slot_stats *st = &m->slot_stats[j];
        char ctx[600];
        long long lookups = 0, distinct = 0;
        snprintf(ctx, sizeof ctx, "%s: slots[%d]", ctx0, j);
        if (!json_is_object(e) || !json_is_object(top))
            return hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object with top_share", ctx);
        if (hps_json_int(e, "lookups", HPS_REQUIRED, 0, INT64_MAX, &lookups, ctx, err) ||
            hps_json_int(e, "distinct_estimate", HPS_REQUIRED, 0, INT64_MAX, &distinct, ctx, err) ||
            (hot && hps_json_num(hot, "share", HPS_REQUIRED, 0, 1, &st->top_share[0], ctx, err)) ||
            hps_json_num(top, "10", HPS_REQUIRED, 0, 1, &st->top_share[1], ctx, err) ||
            hps_json_num(top, "100", HPS_REQUIRED, 0, 1, &st->top_share[2], ctx, err) ||
            hps_json_num(top, "1000", HPS_REQUIRED, 0, 1, &st->top_share[3], ctx, err))
            return -1;
        st->lookups = (double)lookups;
        st->distinct = (double)distinct;
    }
    return 0;
}

/* servers.files: one entry a server, in order, each naming the file the
 * server's index gives (a forged name reaches no other file); checksum
 * optional, as manifests before it did not record one. */
static int load_server_files(hps_manifest *m, json_t *files, const char *path, hps_error *err)
{
    if (!json_is_array(files) || json_array_size(files) != (size_t)m->servers)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: servers.files must be an array of the %d servers", path, m->servers);
    m->server_files = hps_calloc((size_t)m->servers, sizeof *m->server_files);
    for (int p = 0; p < m->servers; p++) {
        json_t *e = json_array_get(files, (size_t)p);
        char ctx[600], want[64];
        const char *file, *sum = NULL;
        long long server, keys;
        hps_server_keys_file *f = &m->server_files[p];
        snprintf(ctx, sizeof ctx, "%s: servers.files[%d]", path, p);
        snprintf(want, sizeof want, "keys/server-%05d.keys", p);
        if (!json_is_object(e)) return hps_fail(err, HPS_EXIT_USAGE, "%s: expected an object", ctx);
        if (hps_json_int(e, "server", HPS_REQUIRED, p, p, &server, ctx, err) != 0 ||
            hps_json_str(e, "file", HPS_REQUIRED, &file, ctx, err) != 0 ||
            hps_json_int(e, "keys", HPS_REQUIRED, 0, INT64_MAX, &keys, ctx, err) != 0 ||
            hps_json_str(e, "checksum", HPS_OPTIONAL, &sum, ctx, err) != 0)
            return -1;
        if (strcmp(file, want) != 0) return hps_fail(err, HPS_EXIT_USAGE, "%s: file must be '%s'", ctx, want);
        if (sum && (strlen(sum) != 15 || sscanf(sum, "crc32c:%8x", &f->checksum) != 1))
            return hps_fail(err, HPS_EXIT_USAGE, "%s: checksum must be crc32c: and 8 hex digits", ctx);
        f->keys = (uint64_t)keys, f->has_checksum = sum != NULL;
    }
    return 0;
}

/* --data given a file where the directory hps-shard wrote is expected: say
 * what the file is and what to give instead. */
static int not_a_shard_dir(const char *dir, hps_error *err)
{
    char head[8] = {0};
    FILE *f = fopen(dir, "rb");
    size_t n = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
    const char *slash = strrchr(dir, '/');
    int up = slash ? (int)(slash - dir) : 1;
    const char *parent = slash ? dir : ".";
    if (strcmp(slash ? slash + 1 : dir, "manifest.json") == 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: give the directory of the shards, not its manifest (%.*s)", dir, up,
                        parent);
    if (n == sizeof head && memcmp(head, HPS_SHARD_MAGIC, sizeof head) == 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: is one shard file; give the directory that holds it and its "
                        "manifest.json (%.*s)", dir, up, parent);
    return hps_fail(err, HPS_EXIT_USAGE, "%s: is a file, not a directory of shards; if it is Criteo TSV or libsvm "
                    "text, shard it first: hps-shard -o DIR %s", dir, dir);
}

hps_manifest *hps_manifest_load(const char *dir, hps_error *err)
{
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        not_a_shard_dir(dir, err);
        return NULL;
    }
    size_t n = strlen(dir) + 32;
    char *path = hps_malloc(n), *text = NULL;
    size_t len = 0;
    snprintf(path, n, "%s/manifest.json", dir);
    json_t *root = NULL;
    hps_manifest *m = hps_calloc(1, sizeof *m);
    m->dir = hps_strdup(dir);
    int rc = hps_json_read(path, &text, &len, err);
    if (rc == 0) {
        hps_sha256_hex(text, len, m->digest);
        rc = hps_json_loadb(path, text, len, &root, err);
    }
    const char *sum = NULL;
    long long version = 0;
    if (rc == 0 && (hps_json_int(root, "version", HPS_REQUIRED, 1, 2, &version, path, err) != 0 ||
                    hps_json_str(root, "sha256", version >= 2, &sum, path, err) != 0))
        rc = -1;
    if (rc == 0 && sum && !hps_checksum_ok(digest_matches(text, len, sum)))
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: sha256 mismatch: the manifest is corrupted", path);
    free(text);
    const char *fmt = NULL, *transform = "none", *hash = "none";
    long long rows = 0, seed = 0, buckets = 0;
    json_t *keys = root ? json_object_get(root, "keys") : NULL, *input = root ? json_object_get(root, "input") : NULL;
    if (rc == 0 && (hps_json_format(root, "hps-shards", 2, HPS_REQUIRED, NULL, path, err) != 0 ||
                    hps_json_str(input, "format", HPS_REQUIRED, &fmt, path, err) != 0 ||
                    hps_json_num(input, "bytes", HPS_OPTIONAL, 0, 1e19, &m->input_bytes, path, err) != 0 ||
                    hps_json_int(input, "skipped", HPS_OPTIONAL, 0, INT64_MAX, &m->skipped, path, err) != 0 ||
                    hps_json_str(root, "dense_transform", HPS_OPTIONAL, &transform, path, err) != 0 ||
                    hps_json_str(keys, "hash", HPS_OPTIONAL, &hash, path, err) != 0 ||
                    hps_json_int(keys, "seed", HPS_OPTIONAL, 0, INT64_MAX, &seed, path, err) != 0 ||
                    hps_json_int(keys, "buckets", HPS_OPTIONAL, 0, INT64_MAX, &buckets, path, err) != 0 ||
                    hps_json_int(json_object_get(root, "totals"), "rows", HPS_REQUIRED, 0, INT64_MAX, &rows,
                                 path, err) != 0 ||
                    load_schema(m, root, path, err) != 0 || load_shards(m, json_object_get(root, "shards"), path, err) != 0 ||
                    load_slot_stats(m, json_object_get(root, "slots"), path, err) != 0))
        rc = -1;
    if (rc == 0) {
        m->version = (int)version;
        m->format = enum_of(hps_data_format_names, fmt) == 1 ? HPS_FMT_LIBSVM : HPS_FMT_CRITEO;
        m->transform = enum_of(hps_transform_names, transform) == 1 ? HPS_TRANSFORM_LOG : HPS_TRANSFORM_NONE;
        m->hash = strcmp(hash, "mix64") == 0 ? HPS_HASH_MIX64 : HPS_HASH_NONE;
        m->hash_seed = (uint64_t)seed, m->buckets = (uint64_t)buckets, m->rows = (uint64_t)rows;
        json_t *sv = json_object_get(root, "servers");
        long long count = 0;
        if (json_is_object(sv) && hps_json_int(sv, "count", HPS_REQUIRED, 1, HPS_MAX_SERVERS, &count, path, err) != 0)
            rc = -1;
        m->servers = (int)count;
        if (rc == 0 && count) rc = load_server_files(m, json_object_get(sv, "files"), path, err);
    }
    json_decref(root);
    free(path);
    if (rc != 0) {
        hps_manifest_free(m);
        return NULL;
    }
    return m;
}

void hps_manifest_free(hps_manifest *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_shards; i++) free(m->shards[i].file);
    if (m->slot_names)
        for (int j = 0; j < m->schema.n_slots; j++) free(m->slot_names[j]);
    free(m->slot_names);
    free(m->slot_stats);
    free(m->server_files);
    free(m->shards);
    free(m->dir);
    free(m);
}

char *hps_manifest_shard_path(const hps_manifest *m, int i)
{
    size_t n = strlen(m->dir) + strlen(m->shards[i].file) + 2;
    char *p = hps_malloc(n);
    snprintf(p, n, "%s/%s", m->dir, m->shards[i].file);
    return p;
}

int hps_manifest_check_shard(const hps_manifest *m, int i, const char *path,
                             const hps_shard_info *info, hps_error *err)
{
    const hps_schema *a = &m->schema, *b = &info->schema;
    if (a->n_dense != b->n_dense || a->n_slots != b->n_slots || a->classes != b->classes ||
        a->multiclass != b->multiclass || a->weighted != b->weighted)
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "%s: holds %d dense, %d slots, %d classes%s; the manifest says %d dense, "
                        "%d slots, %d classes%s",
                        path, b->n_dense, b->n_slots, b->classes, b->weighted ? ", weighted" : "",
                        a->n_dense, a->n_slots, a->classes, a->weighted ? ", weighted" : "");
    const hps_manifest_shard *e = &m->shards[i];
    if (info->rows != e->rows || info->bytes != e->bytes)
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "%s: holds %llu rows in %llu bytes; the manifest says %llu rows in %llu bytes",
                        path, (unsigned long long)info->rows, (unsigned long long)info->bytes,
                        (unsigned long long)e->rows, (unsigned long long)e->bytes);
    return 0;
}
