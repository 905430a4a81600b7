/* Shards for people: rows as text again (hps-shard cat) and a shard
 * directory's statistics (hps-shard stats), with the check of every shard
 * against its manifest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_json.h"
#include "data/hps_shard.h"

/* ---- cat ------------------------------------------------------------------------ */

static void put_label(FILE *f, float v)
{
    if (v == floorf(v)) fprintf(f, "%d", (int)v);
    else fprintf(f, "%.9g", (double)v);
}

static void put_float(FILE *f, float v)
{
    char buf[32];
    hps_format_float(buf, sizeof buf, v);
    fputs(buf, f);
}

/* TSV: label, dense values, then one field per slot: keys as hex separated
 * by spaces (key:weight when weighted).  For Criteo data this is Criteo. */
static void cat_tsv(FILE *f, const hps_rows *r)
{
    const hps_schema *s = &r->schema;
    for (int i = 0; i < r->rows; i++) {
        put_label(f, r->labels[i]);
        for (int d = 0; d < s->n_dense; d++) fputc('\t', f), put_float(f, r->dense[(size_t)d * r->cap + i]);
        for (int j = 0; j < s->n_slots; j++) {
            fputc('\t', f);
            for (int64_t k = r->offsets[j][i]; k < r->offsets[j][i + 1]; k++) {
                if (k > r->offsets[j][i]) fputc(' ', f);
                fprintf(f, "%08llx", (unsigned long long)r->keys[j][k]);
                if (s->weighted) fputc(':', f), put_float(f, r->weights[j][k]);
            }
        }
        fputc('\n', f);
    }
}

/* libsvm: label idx:val, from the weighted slot's keys or the dense values. */
static void cat_libsvm(FILE *f, const hps_rows *r)
{
    const hps_schema *s = &r->schema;
    for (int i = 0; i < r->rows; i++) {
        put_label(f, r->labels[i]);
        for (int d = 0; d < s->n_dense; d++) {
            float v = r->dense[(size_t)d * r->cap + i];
            if (v != 0) fprintf(f, " %d:", d + 1), put_float(f, v);
        }
        for (int j = 0; j < s->n_slots; j++)
            for (int64_t k = r->offsets[j][i]; k < r->offsets[j][i + 1]; k++) {
                fprintf(f, " %llu:", (unsigned long long)r->keys[j][k]);
                put_float(f, s->weighted ? r->weights[j][k] : 1.0f);
            }
        fputc('\n', f);
    }
}

int hps_shard_cat(const char *path, int libsvm, FILE *out, hps_error *err)
{
    hps_shard_reader *r = hps_shard_open(path, NULL, err);
    if (!r) return -1;
    const hps_rows *rows;
    int rc;
    while ((rc = hps_shard_next_block(r, &rows, err)) > 0) (libsvm ? cat_libsvm : cat_tsv)(out, rows);
    hps_shard_close(r);
    return rc;
}

/* ---- stats ----------------------------------------------------------------------- */

/* Each server's key list whole, and its CRC against the manifest's where
 * the manifest records one. */
static int verify_server_keys(const hps_manifest *m, hps_error *err)
{
    for (int s = 0; s < m->servers; s++) {
        size_t n = strlen(m->dir) + 32;
        char *p = hps_malloc(n);
        snprintf(p, n, "%s/keys/server-%05d.keys", m->dir, s);
        const hps_server_keys_file *f = &m->server_files[s];
        uint32_t crc;
        int rc = hps_server_keys_verify(p, s, m->servers, m->schema.n_slots, f->keys, &crc, err);
        if (rc == 0 && f->has_checksum && crc != f->checksum)
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: checksum crc32c:%08x, the manifest says crc32c:%08x", p, crc,
                          f->checksum);
        free(p);
        if (rc != 0) return -1;
    }
    return 0;
}

int hps_manifest_verify(const hps_manifest *m, hps_error *err)
{
    for (int s = 0; s < m->n_shards; s++) {
        char *p = hps_manifest_shard_path(m, s);
        hps_shard_info info;
        int rc = hps_shard_verify(p, &info, err);
        const hps_manifest_shard *e = &m->shards[s];
        if (rc == 0) rc = hps_manifest_check_shard(m, s, p, &info, err);
        if (rc == 0 && info.checksum != e->checksum)
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: checksum crc32c:%08x, the manifest says crc32c:%08x", p,
                          info.checksum, e->checksum);
        free(p);
        if (rc != 0) return -1;
    }
    return verify_server_keys(m, err);
}

void hps_manifest_print_stats(FILE *f, const hps_manifest *m)
{
    fprintf(f, "%s: %llu row%s, %s input, %d dense, %d slot%s, %s label (%d classes)\n", m->dir,
           (unsigned long long)m->rows, m->rows == 1 ? "" : "s", hps_data_format_names[m->format], m->schema.n_dense, m->schema.n_slots,
           m->schema.n_slots == 1 ? "" : "s", m->schema.multiclass ? "multiclass" : "binary", m->schema.classes);
    fprintf(f, "\n%-18s %-8s %8s %12s %8s %12s  %s\n", "shard", "role", "share", "rows", "blocks", "bytes", "checksum");
    uint64_t bytes = 0;
    for (int s = 0; s < m->n_shards; s++) {
        const hps_manifest_shard *e = &m->shards[s];
        fprintf(f, "%-18s %-8s %8.4f %12llu %8llu %12llu  crc32c:%08x\n", e->file, e->role, e->share,
               (unsigned long long)e->rows, (unsigned long long)e->blocks, (unsigned long long)e->bytes, e->checksum);
        bytes += e->bytes;
    }
    double in_bytes = m->input_bytes;
    fprintf(f, "\ninput %.1f MB, shards %.1f MB (ratio %.2f), %lld lines skipped\n", in_bytes / 1e6,
           (double)bytes / 1e6, bytes ? in_bytes / (double)bytes : 0, m->skipped);
    int n_slots = m->slot_stats ? m->schema.n_slots : 0;
    if (n_slots) fprintf(f, "\n%-12s %14s %14s %9s %9s %9s\n", "slot", "lookups", "distinct~", "top10", "top100", "top1000");
    for (int j = 0; j < n_slots; j++) {
        const hps_slot_stats *st = &m->slot_stats[j];
        fprintf(f, "%-12s %14lld %14lld %8.1f%% %8.1f%% %8.1f%%\n", m->slot_names[j], (long long)st->lookups,
               (long long)st->distinct, 100 * st->top_share[1], 100 * st->top_share[2], 100 * st->top_share[3]);
    }
}

