/* Delta exports (hps-train(1), DELTA EXPORTS): the rows of an export that
 * changed or went since an earlier export, and applying a chain of them.
 *
 * A delta is a safetensors file.  Its __metadata__: "format": "hps-delta",
 * "base": the SHA-256 of the export it applies to, "result": the SHA-256 of
 * the export it makes, and "result.K" for each metadata entry K of that
 * export.  Its tensors: per embedding slot P of the export (P.keys, I64 [n]
 * and P.weight, F32 [n, dim], in ascending key order), P.keys and P.weight
 * with the rows added or changed and P.removed (I64 [r]) with the keys gone,
 * each only when not empty; every other tensor whole, when any byte of it
 * changed.  The digests chain deltas: applying one to the wrong export, or
 * in the wrong order, is an error, and what applying makes is checked
 * against "result", so base + deltas is the later export byte for byte.
 * Rows are compared by their bytes, through the export, so the delta needs
 * nothing of the table's storage. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "train/train_internal.h"

typedef struct {
    const char *name;
    json_t *meta;      /* __metadata__ (or NULL) */
    train_tensor *ts;  /* in the file's order; data inside buf */
    int n;
    char digest[72];   /* "sha256:HEX" of the whole file */
} st_file;

static void st_free(st_file *f)
{
    json_decref(f->meta);
    free(f->ts);
    memset(f, 0, sizeof *f);
}

typedef struct {
    train_tensor t;
    uint64_t begin;
} placed;

static int cmp_placed(const void *a, const void *b)
{
    uint64_t x = ((const placed *)a)->begin, y = ((const placed *)b)->begin;
    return x < y ? -1 : x > y;
}

/* A safetensors file in memory, checked (hps_safetensors_check), its tensors
 * in the order of their data. */
static int st_parse(const char *name, const unsigned char *buf, size_t len, st_file *f, hps_error *err)
{
    memset(f, 0, sizeof *f);
    f->name = name;
    if (hps_safetensors_check(name, buf, len, NULL, err)) return -1;
    uint64_t hlen = train_get_u64(buf);
    json_t *h;
    if (hps_json_loadb(name, (const char *)buf + 8, (size_t)hlen, &h, err)) return -1;
    placed *p = hps_calloc(json_object_size(h) + 1, sizeof *p);
    const char *key;
    json_t *e;
    int n = 0;
    json_object_foreach(h, key, e) {
        if (strcmp(key, "__metadata__") == 0) {
            f->meta = json_incref(e);
            continue;
        }
        train_tensor *t = &p[n].t;
        if (strlen(key) >= sizeof t->name) { /* never written by hps-train; truncated, two could meet */
            char shown[40];
            hps_printable(key, shown, sizeof shown);
            json_decref(h), json_decref(f->meta), free(p);
            f->meta = NULL;
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: tensor '%s...': a name of %zu bytes: at most %zu",
                            name, shown, strlen(key), sizeof t->name - 1);
        }
        snprintf(t->name, sizeof t->name, "%s", key);
        const char *dtype = json_string_value(json_object_get(e, "dtype"));
        t->dtype = strcmp(dtype, "I64") == 0 ? "I64" : "F32";
        json_t *shape = json_object_get(e, "shape");
        t->dims = (int)json_array_size(shape);
        for (int d = 0; d < t->dims; d++) t->shape[d] = json_integer_value(json_array_get(shape, (size_t)d));
        uint64_t b = (uint64_t)json_integer_value(json_array_get(json_object_get(e, "data_offsets"), 0));
        uint64_t x = (uint64_t)json_integer_value(json_array_get(json_object_get(e, "data_offsets"), 1));
        t->data = (void *)(buf + 8 + hlen + b);
        t->bytes = (size_t)(x - b);
        p[n++].begin = b;
    }
    json_decref(h);
    qsort(p, (size_t)n, sizeof *p, cmp_placed);
    f->ts = hps_calloc((size_t)n + 1, sizeof *f->ts);
    for (int i = 0; i < n; i++) f->ts[i] = p[i].t;
    f->n = n;
    free(p);
    hps_sha256_hex(buf, len, f->digest);
    if (f->meta && !json_is_object(f->meta)) {
        st_free(f);
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: __metadata__ is not an object", name);
    }
    return 0;
}

static const train_tensor *st_find(const st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->ts[i].name, name) == 0) return &f->ts[i];
    return NULL;
}

static const char *meta_str(const st_file *f, const char *key)
{
    return f->meta ? json_string_value(json_object_get(f->meta, key)) : NULL;
}

/* An embedding slot: P.keys (I64 [n]) beside P.weight (F32 [n, dim]); *dim. */
static const train_tensor *pair_weight(const st_file *f, const train_tensor *keys, char *prefix, size_t cap)
{
    size_t len = strlen(keys->name);
    if (len < 5 || strcmp(keys->name + len - 5, ".keys") != 0 || strcmp(keys->dtype, "I64") != 0 ||
        keys->dims != 1 || len - 5 >= cap - 16)
        return NULL;
    snprintf(prefix, cap, "%.*s", (int)(len - 5), keys->name);
    char name[200];
    snprintf(name, sizeof name, "%s.weight", prefix);
    const train_tensor *w = st_find(f, name);
    return w && strcmp(w->dtype, "F32") == 0 && w->dims == 2 && w->shape[0] == keys->shape[0] ? w : NULL;
}

static int is_pair_weight(const st_file *f, const train_tensor *t)
{
    size_t len = strlen(t->name);
    if (len < 7 || strcmp(t->name + len - 7, ".weight") != 0) return 0;
    char name[200], prefix[180];
    snprintf(name, sizeof name, "%.*s.keys", (int)(len - 7), t->name);
    const train_tensor *k = st_find(f, name);
    return k && pair_weight(f, k, prefix, sizeof prefix) == t;
}

static uint64_t key_at(const train_tensor *keys, int64_t i)
{
    int64_t k;
    memcpy(&k, (const char *)keys->data + i * 8, 8);
    return (uint64_t)k;
}

/* Keys strictly ascending (as unsigned numbers), as exports and deltas hold them. */
static int check_sorted(const st_file *f, const train_tensor *keys, hps_error *err)
{
    for (int64_t i = 1; i < keys->shape[0]; i++)
        if (key_at(keys, i - 1) >= key_at(keys, i))
            return hps_fail(err, HPS_EXIT_RUNTIME,
                            "%s: tensor '%s': keys not in ascending order at %lld (an export of an older "
                            "hps-train? export again)",
                            f->name, keys->name, (long long)i);
    return 0;
}

static char *buf_of(int64_t n, size_t each) { return hps_malloc((size_t)(n > 0 ? n : 1) * each); }

/* ---- making a delta ------------------------------------------------------------------- */

/* One slot's rows added or changed from a to b, and its keys gone. */
static int diff_pair(const st_file *a, const st_file *b, const train_tensor *bk, const train_tensor *bw,
                     const char *prefix, train_tensor **ts, int *n, hps_error *err)
{
    const train_tensor *ak = st_find(a, bk->name), *aw = NULL;
    char pa[180];
    if (!ak || !(aw = pair_weight(a, ak, pa, sizeof pa)) || aw->shape[1] != bw->shape[1])
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: no slot '%s' of %lld floats a row, as %s has", a->name,
                        prefix, (long long)bw->shape[1], b->name);
    if (check_sorted(a, ak, err) || check_sorted(b, bk, err)) return -1;
    size_t row = (size_t)bw->shape[1] * sizeof(float);
    int64_t na = ak->shape[0], nb = bk->shape[0], i = 0, j = 0, nu = 0, nr = 0;
    int64_t *uk = (int64_t *)buf_of(nb, 8), *rk = (int64_t *)buf_of(na, 8);
    char *uw = buf_of(nb, row);
    while (i < na || j < nb) {
        uint64_t x = i < na ? key_at(ak, i) : UINT64_MAX, y = j < nb ? key_at(bk, j) : UINT64_MAX;
        if (j >= nb || (i < na && x < y)) rk[nr++] = (int64_t)key_at(ak, i++);
        else {
            const char *rb = (const char *)bw->data + (size_t)j * row;
            if (i >= na || x > y || memcmp((const char *)aw->data + (size_t)i * row, rb, row) != 0)
                uk[nu] = (int64_t)y, memcpy(uw + (size_t)nu * row, rb, row), nu++;
            if (i < na && x == y) i++;
            j++;
        }
    }
    char name[200];
    if (nu) {
        snprintf(name, sizeof name, "%s.keys", prefix);
        train_add_tensor(ts, n, name, "I64", 1, nu, 0, uk, (size_t)nu * 8), uk = NULL;
        snprintf(name, sizeof name, "%s.weight", prefix);
        train_add_tensor(ts, n, name, "F32", 2, nu, bw->shape[1], uw, (size_t)nu * row), uw = NULL;
    }
    if (nr) {
        snprintf(name, sizeof name, "%s.removed", prefix);
        train_add_tensor(ts, n, name, "I64", 1, nr, 0, rk, (size_t)nr * 8), rk = NULL;
    }
    free(uk), free(uw), free(rk);
    return 0;
}

static int same_shape(const train_tensor *x, const train_tensor *y)
{
    return strcmp(x->dtype, y->dtype) == 0 && x->dims == y->dims && x->shape[0] == y->shape[0] &&
           (x->dims < 2 || x->shape[1] == y->shape[1]);
}

/* The delta's tensors: b against a. */
static int diff(const st_file *a, const st_file *b, train_tensor **ts, int *n, hps_error *err)
{
    const char *ma = meta_str(a, "model_digest"), *mb = meta_str(b, "model_digest");
    if (!ma || !mb || strcmp(ma, mb) != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: an export of model %.19s..., but %s is of %.19s...", a->name,
                        ma ? ma : "(none)", b->name, mb ? mb : "(none)");
    for (int i = 0; i < b->n; i++) {
        const train_tensor *t = &b->ts[i], *w, *old;
        char prefix[180];
        if ((w = pair_weight(b, t, prefix, sizeof prefix))) {
            if (diff_pair(a, b, t, w, prefix, ts, n, err)) return -1;
        } else if (!is_pair_weight(b, t)) {
            if (!(old = st_find(a, t->name)) || !same_shape(old, t))
                return hps_fail(err, HPS_EXIT_RUNTIME, "%s: no tensor '%s' of the shape %s has", a->name,
                                t->name, b->name);
            if (memcmp(old->data, t->data, t->bytes) != 0)
                train_add_tensor(ts, n, t->name, t->dtype, t->dims, t->shape[0], t->shape[1], t->data, t->bytes),
                    (*ts)[*n - 1].owned = 0;
        }
    }
    return 0;
}

static json_t *delta_meta(const st_file *a, const st_file *b)
{
    json_t *m = json_pack("{s:s, s:s, s:s}", "format", "hps-delta", "base", a->digest, "result", b->digest);
    const char *key;
    json_t *v;
    if (b->meta) json_object_foreach(b->meta, key, v) {
            char name[200];
            snprintf(name, sizeof name, "result.%s", key);
            json_object_set(m, name, v);
        }
    return m;
}

int hps_export_delta(const char *since, const char *export_path, const char *delta_path, hps_error *err)
{
    char *abuf = NULL, *bbuf = NULL;
    size_t alen, blen;
    st_file a = {0}, b = {0};
    int rc = hps_read_all(since, &abuf, &alen, err) || hps_read_all(export_path, &bbuf, &blen, err) ||
                     st_parse(since, (unsigned char *)abuf, alen, &a, err) ||
                     st_parse(export_path, (unsigned char *)bbuf, blen, &b, err)
                 ? -1 : 0;
    train_tensor *ts = NULL;
    int n = 0;
    if (rc == 0) rc = diff(&a, &b, &ts, &n, err);
    if (rc == 0) {
        json_t *meta = delta_meta(&a, &b);
        rc = train_safetensors_write(delta_path, ts, n, meta, err);
        json_decref(meta);
    }
    train_tensors_free(ts, n);
    st_free(&a), st_free(&b);
    free(abuf), free(bbuf);
    return rc;
}

/* ---- applying a delta ----------------------------------------------------------------- */

/* A delta's tensor, checked: name, dtype and the row width it must have. */
static const train_tensor *delta_tensor(const st_file *d, const char *prefix, const char *what,
                                        const char *dtype, int dims, int64_t dim, hps_error *err, int *bad)
{
    char name[200];
    snprintf(name, sizeof name, "%s.%s", prefix, what);
    const train_tensor *t = st_find(d, name);
    if (t && (strcmp(t->dtype, dtype) != 0 || t->dims != dims || (dims == 2 && t->shape[1] != dim))) {
        *bad = 1;
        hps_fail(err, HPS_EXIT_RUNTIME, "%s: tensor '%s': expected %s of %d dims%s", d->name, name, dtype, dims,
                 dims == 2 ? " with the base's row width" : "");
        return NULL;
    }
    return t;
}

/* One slot of the base with the delta's rows and removals. */
static int apply_pair(const st_file *base, const st_file *d, const train_tensor *bk, const train_tensor *bw,
                      const char *prefix, char *used, train_tensor **ts, int *n, hps_error *err)
{
    int bad = 0;
    int64_t dim = bw->shape[1];
    const train_tensor *uk = delta_tensor(d, prefix, "keys", "I64", 1, 0, err, &bad);
    const train_tensor *uw = bad ? NULL : delta_tensor(d, prefix, "weight", "F32", 2, dim, err, &bad);
    const train_tensor *rk = bad ? NULL : delta_tensor(d, prefix, "removed", "I64", 1, 0, err, &bad);
    if (bad) return -1;
    if (!uk != !uw || (uk && uk->shape[0] != uw->shape[0]))
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: slot '%s': keys and rows do not match", d->name, prefix);
    if (check_sorted(base, bk, err) || (uk && check_sorted(d, uk, err)) || (rk && check_sorted(d, rk, err)))
        return -1;
    for (int i = 0; i < d->n; i++)
        if (&d->ts[i] == uk || &d->ts[i] == uw || &d->ts[i] == rk) used[i] = 1;
    size_t row = (size_t)dim * sizeof(float);
    int64_t nb = bk->shape[0], nu = uk ? uk->shape[0] : 0, nr = rk ? rk->shape[0] : 0;
    int64_t *keys = (int64_t *)buf_of(nb + nu, 8);
    char *vals = buf_of(nb + nu, row);
    int64_t i = 0, j = 0, r = 0, k = 0;
    int rc = 0;
    while (rc == 0 && (i < nb || j < nu)) {
        uint64_t x = i < nb ? key_at(bk, i) : UINT64_MAX, y = j < nu ? key_at(uk, j) : UINT64_MAX;
        uint64_t gone = r < nr ? key_at(rk, r) : 0;
        if (i < nb && (j >= nu || x < y)) {
            if (r < nr && gone < x) break; /* a removal of a key the base lacks */
            if (r < nr && gone == x) r++, i++;
            else keys[k] = (int64_t)x, memcpy(vals + (size_t)k * row, (const char *)bw->data + (size_t)i * row, row), k++, i++;
        } else {
            if (r < nr && gone == y)
                rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: slot '%s': key %llu both changed and removed",
                              d->name, prefix, (unsigned long long)y);
            keys[k] = (int64_t)y, memcpy(vals + (size_t)k * row, (const char *)uw->data + (size_t)j * row, row);
            k++, j++;
            if (i < nb && x == y) i++;
        }
    }
    if (rc == 0 && r < nr)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: slot '%s': removes key %llu, which %s does not hold", d->name,
                      prefix, (unsigned long long)key_at(rk, r), base->name);
    if (rc == 0) {
        train_add_tensor(ts, n, bk->name, "I64", 1, k, 0, keys, (size_t)k * 8);
        train_add_tensor(ts, n, bw->name, "F32", 2, k, dim, vals, (size_t)k * row);
    } else free(keys), free(vals);
    return rc;
}

/* The result's metadata: the delta's "result.K" entries. */
static json_t *result_meta(const st_file *d)
{
    json_t *m = json_object(), *v;
    const char *key;
    json_object_foreach(d->meta, key, v) if (strncmp(key, "result.", 7) == 0) json_object_set(m, key + 7, v);
    return m;
}

/* base + d: the new export's tensors and metadata (data owned or in base's or d's buffers). */
static int apply(const st_file *base, const st_file *d, train_tensor **ts, int *n, hps_error *err)
{
    char *used = hps_calloc((size_t)d->n + 1, 1);
    int rc = 0;
    for (int i = 0; rc == 0 && i < base->n; i++) {
        const train_tensor *t = &base->ts[i], *w, *nt;
        char prefix[180];
        if ((w = pair_weight(base, t, prefix, sizeof prefix))) rc = apply_pair(base, d, t, w, prefix, used, ts, n, err);
        else if (is_pair_weight(base, t)) continue;
        else {
            if ((nt = st_find(d, t->name))) {
                if (!same_shape(nt, t))
                    rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: tensor '%s': not the shape %s has", d->name,
                                  t->name, base->name);
                used[nt - d->ts] = 1;
            } else nt = t;
            if (rc == 0)
                train_add_tensor(ts, n, t->name, t->dtype, t->dims, t->shape[0], t->shape[1], nt->data, nt->bytes),
                    (*ts)[*n - 1].owned = 0;
        }
    }
    for (int i = 0; rc == 0 && i < d->n; i++)
        if (!used[i])
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: tensor '%s' is in no slot or tensor of %s", d->name,
                          d->ts[i].name, base->name);
    free(used);
    return rc;
}

/* The delta's own fields: format, base, result. */
static int check_delta(const st_file *d, hps_error *err)
{
    const char *fmt = meta_str(d, "format"), *b = meta_str(d, "base"), *r = meta_str(d, "result");
    if (!fmt || strcmp(fmt, "hps-delta") != 0 || !b || !r)
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "%s: not a delta export: expected __metadata__ format \"hps-delta\", base and result",
                        d->name);
    return 0;
}

int hps_delta_apply_buf(const char *base_name, const unsigned char *base, size_t blen, const char *delta_name,
                        const unsigned char *delta, size_t dlen, char **out, size_t *olen, hps_error *err)
{
    st_file b, d;
    if (st_parse(base_name, base, blen, &b, err)) return -1;
    if (st_parse(delta_name, delta, dlen, &d, err)) return st_free(&b), -1;
    int rc = check_delta(&d, err);
    if (rc == 0 && !hps_checksum_ok(strcmp(meta_str(&d, "base"), b.digest) == 0))
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: applies to %.19s..., but %s is %.19s...", delta_name,
                      meta_str(&d, "base"), base_name, b.digest);
    train_tensor *ts = NULL;
    int n = 0;
    if (rc == 0) rc = apply(&b, &d, &ts, &n, err);
    if (rc == 0) {
        json_t *meta = result_meta(&d);
        unsigned char sum[32];
        FILE *f = open_memstream(out, olen);
        HPS_CHECK(f);
        rc = train_safetensors_put(f, ts, n, meta, sum);
        fclose(f);
        json_decref(meta);
        char hex[72];
        hps_sha256_hex(*out, *olen, hex);
        if (rc == 0 && !hps_checksum_ok(strcmp(hex, meta_str(&d, "result")) == 0))
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: makes %.19s..., not the %.19s... it names: the delta is corrupted",
                          delta_name, hex, meta_str(&d, "result"));
        if (rc) free(*out), *out = NULL;
    }
    train_tensors_free(ts, n);
    st_free(&b), st_free(&d);
    return rc;
}

/* "base" of the delta at path (for the chain's messages), or "". */
static void delta_base(const char *path, char out[72])
{
    char *buf;
    size_t len;
    st_file d;
    hps_error e;
    out[0] = '\0';
    if (hps_read_all(path, &buf, &len, &e)) return;
    if (st_parse(path, (unsigned char *)buf, len, &d, &e) == 0) {
        const char *b = meta_str(&d, "base");
        if (b) snprintf(out, 72, "%s", b);
        st_free(&d);
    }
    free(buf);
}

/* Why delta k does not follow: another delta of the chain does, it was
 * applied already, or one is missing. */
static int chain_error(char *const *deltas, int n, int k, const char *at, char *const *seen, int n_seen,
                       hps_error *err)
{
    char b[72];
    delta_base(deltas[k], b);
    for (int j = k + 1; j < n; j++) {
        char o[72];
        delta_base(deltas[j], o);
        if (strcmp(o, at) == 0)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: out of order: %s comes before it", deltas[k], deltas[j]);
    }
    for (int j = 0; j < n_seen; j++)
        if (strcmp(seen[j], b) == 0)
            return hps_fail(err, HPS_EXIT_USAGE, "%s: applies to an earlier export of the chain (%.19s...): out of order",
                            deltas[k], b);
    if (k == 0)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: applies to %.19s..., but the base is %.19s...: another base",
                        deltas[k], b[0] ? b : "(none)", at);
    return hps_fail(err, HPS_EXIT_USAGE, "%s: applies to %.19s..., but the chain is at %.19s...: a delta is missing",
                    deltas[k], b[0] ? b : "(none)", at);
}

int hps_export_apply(const char *base, char *const *deltas, int n, const char *out, hps_error *err)
{
    char *cur = NULL, **seen = hps_calloc((size_t)n + 1, sizeof *seen);
    size_t len;
    int rc = hps_read_all(base, &cur, &len, err), n_seen = 0;
    if (rc == 0 && hps_safetensors_check(base, (unsigned char *)cur, len, NULL, err)) rc = -1;
    const char *name = base;
    for (int k = 0; rc == 0 && k < n; k++) {
        char at[72], *dbuf, *next = NULL;
        size_t dlen, nlen;
        hps_sha256_hex(cur, len, at);
        if (hps_read_all(deltas[k], &dbuf, &dlen, err)) {
            rc = -1;
            break;
        }
        char b[72];
        st_file d;
        if (st_parse(deltas[k], (unsigned char *)dbuf, dlen, &d, err) || check_delta(&d, err)) rc = -1;
        else snprintf(b, sizeof b, "%s", meta_str(&d, "base")), st_free(&d);
        if (rc == 0 && strcmp(b, at) != 0) rc = chain_error(deltas, n, k, at, seen, n_seen, err);
        if (rc == 0)
            rc = hps_delta_apply_buf(name, (unsigned char *)cur, len, deltas[k], (unsigned char *)dbuf, dlen, &next,
                                     &nlen, err);
        free(dbuf);
        if (rc == 0) seen[n_seen++] = hps_strdup(at), free(cur), cur = next, len = nlen, name = deltas[k];
    }
    if (rc == 0) {
        /* the last export, written as exports are */
        st_file f;
        rc = st_parse(name, (unsigned char *)cur, len, &f, err);
        if (rc == 0) rc = train_safetensors_write(out, f.ts, f.n, f.meta, err);
        if (rc == 0) st_free(&f);
    }
    for (int i = 0; i < n_seen; i++) free(seen[i]);
    free(seen);
    free(cur);
    return rc;
}
