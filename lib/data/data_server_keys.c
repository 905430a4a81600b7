/* --servers P: per parameter server, the distinct keys it will own, so that
 * it can size its tables before training.  Server p owns key k of every
 * slot when hps_mix64(k) mod P == p (the plan's "mix64-mod" rule).
 *
 * Memory stays bounded: the training shards are read once per group of
 * servers, the group sized from the HyperLogLog estimate of distinct keys
 * so that its hash set fits in SET_BUDGET. */
#include "data/hps_shard_job.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_rng.h"

#define SET_BUDGET (64u << 20)

typedef struct {
    uint64_t key;
    uint32_t slot, server; /* server + 1; 0 = empty */
} entry;

typedef struct {
    entry *e;
    size_t cap, n;
} key_set;

static void set_insert(key_set *s, entry x);

static void set_grow(key_set *s)
{
    key_set big = {hps_calloc(s->cap * 2, sizeof *big.e), s->cap * 2, 0};
    for (size_t i = 0; i < s->cap; i++)
        if (s->e[i].server) set_insert(&big, s->e[i]);
    free(s->e);
    *s = big;
}

static void set_insert(key_set *s, entry x)
{
    if (2 * (s->n + 1) > s->cap) set_grow(s);
    size_t p = hps_mix64(x.key ^ ((uint64_t)x.slot << 48)) & (s->cap - 1);
    while (s->e[p].server && (s->e[p].key != x.key || s->e[p].slot != x.slot)) p = (p + 1) & (s->cap - 1);
    if (!s->e[p].server) s->e[p] = x, s->n++;
}

static int by_server_slot_key(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->server != y->server) return x->server < y->server ? -1 : 1;
    if (x->slot != y->slot) return x->slot < y->slot ? -1 : 1;
    return (x->key > y->key) - (x->key < y->key);
}

/* File: "HPSKEYS\0", u32 version 1, u32 server, u32 servers, u32 slots,
 * u64 keys, u64 per slot, the keys slot by slot ascending, u32 CRC-32C of
 * all that (*crc_out, which the manifest records). */
#define KEYS_HEAD 32
static int write_keys(const char *path, int server, int servers, int n_slots, const entry *e, size_t n,
                      uint32_t *crc_out, hps_error *err)
{
    FILE *f = fopen(path, "wb");
    if (!f) return hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot create: %s", path, strerror(errno));
    size_t head_len = 32 + 8 * (size_t)n_slots;
    uint8_t *head = hps_calloc(1, head_len);
    uint32_t u[4] = {1, (uint32_t)server, (uint32_t)servers, (uint32_t)n_slots};
    uint64_t total = n;
    memcpy(head, "HPSKEYS", 8);
    memcpy(head + 8, u, 16);
    memcpy(head + 24, &total, 8);
    for (size_t i = 0; i < n; i++) ((uint64_t *)(void *)(head + 32))[e[i].slot]++;
    fwrite(head, 1, head_len, f);
    uint32_t crc = hps_crc32c(0, head, head_len);
    free(head);
    for (size_t i = 0; i < n; i++) {
        fwrite(&e[i].key, 8, 1, f);
        crc = hps_crc32c(crc, &e[i].key, 8);
    }
    fwrite(&crc, 4, 1, f);
    *crc_out = crc;
    if (fclose(f) != 0) return hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

/* Reads the shards and collects the keys of servers [lo, hi). */
static int collect(char **paths, int n, int lo, int hi, int servers, key_set *set, hps_error *err)
{
    for (int i = 0; i < n; i++) {
        hps_shard_reader *r = hps_shard_open(paths[i], NULL, err);
        if (!r) return -1;
        const hps_rows *rows;
        int rc;
        while ((rc = hps_shard_next_block(r, &rows, err)) > 0)
            for (int j = 0; j < rows->schema.n_slots; j++)
                for (int64_t k = 0; k < rows->nkeys[j]; k++) {
                    uint64_t key = rows->keys[j][k];
                    int p = (int)(hps_mix64(key) % (uint64_t)servers);
                    if (p >= lo && p < hi) set_insert(set, (entry){key, (uint32_t)j, (uint32_t)p + 1});
                }
        hps_shard_close(r);
        if (rc < 0) return -1;
    }
    return 0;
}

int hps_server_keys_write(hps_tmpdir *t, const hps_shard_opts *o, char **paths, int n,
                          const hps_hll_set *hll, hps_server_keys_file *files, hps_error *err)
{
    if (hps_tmpdir_mkdir(t, "keys", err) != 0) return -1;
    double distinct = 0;
    for (int j = 0; j < o->parse.schema.n_slots; j++) distinct += hps_hll_estimate(hll, j);
    double per_server = distinct * 1.1 / o->servers + 1; /* HLL errs by a few percent */
    int group = (int)(SET_BUDGET / (4 * sizeof(entry)) / per_server); /* set at most half full, and the sort copy */
    if (group < 1) group = 1;
    int rc = 0;
    for (int lo = 0; lo < o->servers && rc == 0; lo += group) {
        int hi = lo + group < o->servers ? lo + group : o->servers;
        key_set set = {hps_calloc(1024, sizeof(entry)), 1024, 0};
        rc = collect(paths, n, lo, hi, o->servers, &set, err);
        size_t m = 0;
        for (size_t i = 0; i < set.cap; i++)
            if (set.e[i].server) set.e[m++] = set.e[i];
        qsort(set.e, m, sizeof *set.e, by_server_slot_key);
        for (int p = lo, i = 0; p < hi && rc == 0; p++) {
            size_t start = (size_t)i;
            while ((size_t)i < m && set.e[i].server == (uint32_t)p + 1) i++;
            char name[64];
            snprintf(name, sizeof name, "keys/server-%05d.keys", p);
            char *path = hps_tmpdir_file(t, name);
            files[p].keys = (size_t)i - start;
            rc = write_keys(path, p, o->servers, o->parse.schema.n_slots, set.e + start, files[p].keys,
                            &files[p].checksum, err);
            free(path);
        }
        free(set.e);
    }
    return rc;
}

/* ---- reading one back (hps-shard stats --verify) ------------------------------- */

static int check_keys(const char *path, const uint8_t *b, size_t len, int server, int servers, int n_slots,
                      uint64_t keys, hps_error *err)
{
    uint32_t u[4];
    uint64_t total, sum = 0;
    size_t head = KEYS_HEAD + 8 * (size_t)n_slots;
    if (len < KEYS_HEAD || memcmp(b, "HPSKEYS", 8) != 0)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: not a server key list (expected \"HPSKEYS\")", path);
    memcpy(u, b + 8, 16);
    memcpy(&total, b + 24, 8);
    if (u[0] != 1 || u[1] != (uint32_t)server || u[2] != (uint32_t)servers || u[3] != (uint32_t)n_slots)
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "%s: version %u, server %u of %u, %u slots; expected version 1, server %d of %d, %d slots",
                        path, u[0], u[1], u[2], u[3], server, servers, n_slots);
    if (total != keys)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: holds %llu keys; the manifest says %llu", path,
                        (unsigned long long)total, (unsigned long long)keys);
    if (len < head + 4 || (len - head - 4) % 8 || (len - head - 4) / 8 != total)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: %zu bytes; %llu keys of %d slots take %zu + 8 per key", path,
                        len, (unsigned long long)total, n_slots, head + 4);
    const uint8_t *k = b + head;
    for (int j = 0; j < n_slots; j++) {
        uint64_t per, prev = 0, key;
        memcpy(&per, b + KEYS_HEAD + 8 * (size_t)j, 8);
        if (per > total - sum)
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: slot %d: its count runs past the %llu keys", path, j,
                            (unsigned long long)total);
        for (uint64_t i = 0; i < per; i++, k += 8) {
            memcpy(&key, k, 8);
            if ((i && key <= prev) || hps_mix64(key) % (uint64_t)servers != (uint64_t)server)
                return hps_fail(err, HPS_EXIT_RUNTIME,
                                "%s: slot %d key %llu: 0x%016llx is out of order or not this server's", path, j,
                                (unsigned long long)i, (unsigned long long)key);
            prev = key;
        }
        sum += per;
    }
    if (sum != total)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: the slots' counts add up to %llu, not %llu keys", path,
                        (unsigned long long)sum, (unsigned long long)total);
    return 0;
}

int hps_server_keys_verify(const char *path, int server, int servers, int n_slots, uint64_t keys,
                           uint32_t *checksum, hps_error *err)
{
    char *text;
    size_t len;
    if (hps_read_all(path, &text, &len, err)) return -1;
    const uint8_t *b = (const uint8_t *)text;
    int rc = 0;
    if (len >= KEYS_HEAD + 4) {
        uint32_t stored;
        memcpy(&stored, b + len - 4, 4);
        *checksum = hps_crc32c(0, b, len - 4);
        if (stored != *checksum)
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: checksum crc32c:%08x, the file says crc32c:%08x", path,
                          *checksum, stored);
    }
    if (rc == 0) rc = check_keys(path, b, len, server, servers, n_slots, keys, err);
    free(text);
    return rc;
}
