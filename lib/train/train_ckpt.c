/* Checkpoints (hps-train(1), CHECKPOINTS) and safetensors export.
 *
 * A checkpoint is one file, DIR/ckpt-STEP.hpsckpt:
 *     bytes 0..7    "HPSCKPT2"
 *     bytes 8..15   size of the uncompressed payload, little-endian
 *     bytes 16..23  size of the compressed payload
 *     bytes 24..55  SHA-256 of the whole file with these 32 bytes zeroed
 *     bytes 56..63  zero
 *     then the payload as one zstd frame (with zstd's own content checksum).
 * The digest covers the header too, so a flipped size or reserved byte is
 * caught; since anyone can recompute it, the sizes are still checked against
 * the frame before anything is allocated.
 * It is written to a temporary file and renamed; then DIR/latest, a one-line
 * file naming it, is replaced the same way, so a kill at any moment leaves
 * the previous checkpoint in force.  The two newest checkpoints are kept.
 * The payload (read_payload) names the model, the plan and the training data
 * by digest, then the state, the dense part and the tables.
 * A parameter server's checkpoint (hps-train(1), DISTRIBUTED) is the same
 * file with no dense part (0 parameters): its tables alone.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_decompressBound */
#include <zstd.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "train/train_internal.h"

#define CKPT_MAGIC "HPSCKPT2"
#define CKPT_DIGEST 24 /* offset of the SHA-256 in the header */
#define CKPT_HEADER 64
#define CKPT_KEEP 2
/* The payload layout's version: "HPS2" adds the training data's digest after
 * the state, "HPS3" the day and the step it began at after it; "HPS1" payloads (no digest) and
 * "HPS2" (day 1) still load. */
#define PAYLOAD_MAGIC1 0x48505331u /* "HPS1" */
#define PAYLOAD_MAGIC2 0x48505332u /* "HPS2" */
#define PAYLOAD_MAGIC 0x48505333u  /* "HPS3" */


/* Dense parameters and Adam's moments, through the host. */
static int save_dense(hps_trainer *t, FILE *f)
{
    size_t n = t->m->n_params;
    float *buf = hps_malloc((n + 1) * sizeof *buf);
    float *const src[3] = {t->owner->params, t->owner->adam_m, t->owner->adam_v};
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++) {
        t->be->download(buf, src[i], n * sizeof *buf);
        ok = HPS_FWRITE(f, buf, n);
    }
    free(buf);
    return ok ? 0 : -1;
}

/* What one checkpoint file holds: a trainer's whole state, or a server's
 * tables alone (t == NULL). */
typedef struct {
    hps_trainer *t;
    const hps_model *m;
    const char *plan_digest;
    uint64_t state[6]; /* step, epoch, epoch_row, samples, seed, adam_t */
    const char *data_digest; /* the training data's, "" when unknown or a server's */
    hps_table *const *tables;
    uint64_t day[2];         /* the run's day and the step it began at (a server's: 0) */
    int same_plan;           /* --continue-from: another plan is an error, not a warning */
} ckpt_part;

static ckpt_part trainer_part(hps_trainer *t)
{
    return (ckpt_part){t, t->m, t->plan->digest,
                       {t->step, t->epoch, t->epoch_row, t->samples, t->o.seed,
                        (uint64_t)t->owner->adam_t},
                       t->data_digest, t->tables, {t->day, t->day_start}, 0};
}

static int write_payload(const ckpt_part *c, FILE *f)
{
    uint32_t magic = PAYLOAD_MAGIC;
    uint64_t n_params = c->t ? c->m->n_params : 0;
    char data[72] = {0};
    snprintf(data, sizeof data, "%s", c->data_digest);
    if (!HPS_FWRITE(f, &magic, 1) || !HPS_FWRITE(f, c->m->digest, 72) || !HPS_FWRITE(f, c->plan_digest, 72) ||
        !HPS_FWRITE(f, c->state, 6) || !HPS_FWRITE(f, data, 72) || !HPS_FWRITE(f, c->day, 2) ||
        !HPS_FWRITE(f, &n_params, 1) ||
        (c->t && save_dense(c->t, f)))
        return -1;
    for (int l = 0; l < c->m->n_layers; l++)
        if (c->tables[l] && hps_table_save(c->tables[l], f)) return -1;
    for (int s = 0; c->t && s < c->t->plan->n_stages; s++) /* a warm cache resumes warm */
        if (c->t->stage_rows[s] && train_rows_save(c->t->stage_rows[s], f)) return -1;
    return 0;
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void *compress(const void *src, size_t n, size_t *out_len)
{
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    HPS_CHECK(cctx);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    size_t cap = ZSTD_compressBound(n);
    unsigned char *dst = hps_malloc(CKPT_HEADER + cap);
    size_t got = ZSTD_compress2(cctx, dst + CKPT_HEADER, cap, src, n);
    HPS_CHECK(!ZSTD_isError(got));
    ZSTD_freeCCtx(cctx);
    memcpy(dst, CKPT_MAGIC, 8);
    put_u64(dst + 8, n);
    put_u64(dst + 16, got);
    memset(dst + CKPT_DIGEST, 0, 40);
    hps_sha256(dst, CKPT_HEADER + got, dst + CKPT_DIGEST);
    *out_len = CKPT_HEADER + got;
    return dst;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Removes all but the newest CKPT_KEEP checkpoints (names sort by step),
 * and never `keep`, the one just written; and every checkpoint temporary
 * and `latest`'s, which only a killed run leaves: ours were renamed before
 * this, and each rank saves in its own directory, so none of them is still
 * being written (a killed run that got to step S left one of S, which a
 * resumed run ending at S must clear too). */
static void prune(const char *dir, const char *keep)
{
    DIR *d = opendir(dir);
    if (!d) return;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if ((!strncmp(e->d_name, "ckpt-", 5) && strstr(e->d_name, ".hpsckpt.tmp.")) ||
            !strncmp(e->d_name, "latest.tmp.", 11)) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
            continue;
        }
        if (strncmp(e->d_name, "ckpt-", 5) || len < 8 || strcmp(e->d_name + len - 8, ".hpsckpt"))
            continue;
        names = hps_realloc(names, (n + 1) * sizeof *names);
        names[n++] = hps_strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        if (i + CKPT_KEEP < n && strcmp(names[i], keep) != 0) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            unlink(path);
        }
        free(names[i]);
    }
    free(names);
}

static int save_part(const ckpt_part *c, const char *dir, hps_error *err)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot create: %s", dir, strerror(errno));
    char *payload = NULL;
    size_t len = 0, clen;
    FILE *mem = open_memstream(&payload, &len);
    HPS_CHECK(mem);
    int ok = write_payload(c, mem) == 0;
    fclose(mem);
    HPS_CHECK(ok);
    void *file = compress(payload, len, &clen);
    free(payload);
    char name[64], path[4200], latest[4200];
    snprintf(name, sizeof name, "ckpt-%012llu.hpsckpt", (unsigned long long)c->state[0]);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(latest, sizeof latest, "%s/latest", dir);
    int rc = hps_write_atomic(path, file, clen, err);
    free(file);
    char line[80];
    snprintf(line, sizeof line, "%s\n", name);
    if (rc == 0) rc = hps_write_atomic(latest, line, strlen(line), err);
    if (rc == 0) prune(dir, name);
    return rc;
}

int hps_trainer_save(hps_trainer *t, const char *dir, hps_error *err)
{
    train_rows_sync(t);
    ckpt_part c = trainer_part(t);
    return save_part(&c, dir, err);
}

int hps_tables_save(const hps_model *m, hps_table *const *tables, const char *plan_digest,
                    uint64_t step, uint64_t seed, uint64_t day, const char *dir, hps_error *err)
{
    ckpt_part c = {NULL, m, plan_digest, {step, 0, 0, 0, seed, 0}, "", tables, {day, 0}, 0};
    return save_part(&c, dir, err);
}

/* ---- loading ----------------------------------------------------------------- */

/* A directory of an mpirun job's checkpoints (DIR/committed and DIR/rank-R/,
 * lib/dist/dist_ckpt.c) has no DIR/latest: one process cannot resume it,
 * and starting afresh there would mix two runs. */
static int mpirun_dir(const char *dir, hps_error *err)
{
    char committed[4200];
    snprintf(committed, sizeof committed, "%s/committed", dir);
    if (access(committed, F_OK) != 0) return 0;
    return hps_fail(err, HPS_EXIT_USAGE,
                    "%s: holds the checkpoints of an mpirun job (%s), not of one process: resume it "
                    "under mpirun with the plan and rank count that wrote it, or use another directory",
                    dir, committed);
}

static int read_latest(const char *dir, char *path, size_t n, int *found, hps_error *err)
{
    char latest[4200], *text;
    snprintf(latest, sizeof latest, "%s/latest", dir);
    if (access(latest, F_OK) != 0) {
        *found = 0;
        return mpirun_dir(dir, err);
    }
    if (hps_read_all(latest, &text, NULL, err)) return -1;
    text[strcspn(text, "\n")] = '\0';
    int bad = strchr(text, '/') != NULL || strncmp(text, "ckpt-", 5) != 0;
    snprintf(path, n, "%s/%s", dir, text);
    free(text);
    if (bad) return hps_fail(err, HPS_EXIT_RUNTIME, "%s: does not name a checkpoint", latest);
    *found = 1;
    return 0;
}

/* Digest of a checkpoint file: the whole of it with the digest's own bytes
 * read as zeros (file is modified and restored). */
static int digest_matches(unsigned char *file, size_t n)
{
    unsigned char stored[32], sum[32];
    memcpy(stored, file + CKPT_DIGEST, 32);
    memset(file + CKPT_DIGEST, 0, 32);
    hps_sha256(file, n, sum);
    memcpy(file + CKPT_DIGEST, stored, 32);
    return memcmp(sum, stored, 32) == 0;
}

/* Checks the header and the digest, then decompresses. */
static int unpack(const char *path, char **payload, size_t *len, hps_error *err)
{
    char *file;
    size_t n;
    if (hps_read_all(path, &file, &n, err)) return -1;
    unsigned char *h = (unsigned char *)file;
    int rc = 0;
    if (n < CKPT_HEADER || memcmp(h, CKPT_MAGIC, 8) != 0 || train_get_u64(h + 16) != n - CKPT_HEADER)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: not a checkpoint, or truncated", path);
    if (rc == 0 && !hps_checksum_ok(digest_matches(h, n)))
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: checksum mismatch: the checkpoint is corrupted", path);
    /* a forged file passes the digest: the size must be the frame's own, and
     * no more than its blocks can hold, before it is allocated */
    const void *frame = h + CKPT_HEADER;
    size_t frame_len = n - CKPT_HEADER;
    unsigned long long size = rc == 0 ? ZSTD_getFrameContentSize(frame, frame_len) : 0;
    if (rc == 0 && (size == ZSTD_CONTENTSIZE_UNKNOWN || size == ZSTD_CONTENTSIZE_ERROR ||
                    size != train_get_u64(h + 8) || size > ZSTD_decompressBound(frame, frame_len) ||
                    size >= SIZE_MAX))
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: the header's size disagrees with its payload",
                      path);
    if (rc == 0) {
        *len = (size_t)size;
        *payload = hps_malloc(*len + 1);
        size_t got = ZSTD_decompress(*payload, *len, frame, frame_len);
        if (ZSTD_isError(got) || got != *len) {
            free(*payload);
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot decompress: %s", path,
                          ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short payload");
        }
    }
    free(file);
    return rc;
}

/* The first of n values that is not finite, or negative where it must not
 * be (Adam's second moment), or n. */
static size_t bad_value(const float *v, size_t n, int nonnegative)
{
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]) || (nonnegative && v[i] < 0)) return i;
    }
    return n;
}

/* The dense parameters and Adam's moments, each checked before it is used:
 * a forged checkpoint's NaN would train on as one. */
static int load_dense(hps_trainer *t, FILE *f, const char *path, hps_error *err)
{
    size_t n = t->m->n_params, bad = n;
    float *buf = hps_malloc((n + 1) * sizeof *buf);
    float *const dst[3] = {t->owner->params, t->owner->adam_m, t->owner->adam_v};
    static const char *const what[3] = {"dense parameter", "Adam's first moment of dense parameter",
                                        "Adam's second moment of dense parameter"};
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++) {
        if (!HPS_FREAD(f, buf, n)) rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: truncated dense parameters", path);
        else if ((bad = bad_value(buf, n, i == 2)) < n)
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: %s %zu is %g: expected a finite number%s", path, what[i],
                          bad, (double)buf[bad], i == 2 ? " >= 0" : "");
        else t->be->upload(dst[i], buf, n * sizeof *buf);
    }
    free(buf);
    return rc;
}

/* The header, then the dense part (a trainer's) or none (a server's), then
 * the tables; c->state gets the file's. */
/* Resuming on other data of the same schema is allowed (a next day's shards
 * continue a model), but never silent: both sides' digests are named. */
static void other_data(const ckpt_part *c, const char *data, const char *path)
{
    if (!c->t || !data[0] || !c->data_digest[0] || strcmp(data, c->data_digest) == 0) return;
    hps_warnf("%s: made on other data (manifest.json %.19s...), resuming on manifest.json %.19s...: "
              "the tables and optimizer state carry over, the epoch goes on at row %llu",
              path, data, c->data_digest, (unsigned long long)c->state[2]);
}

static int read_payload(ckpt_part *c, FILE *f, const char *path, hps_error *err)
{
    uint32_t magic = 0;
    char model[72], plan[72], data[72] = {0};
    uint64_t n_params = 0, seed = c->state[4];
    c->day[0] = 1, c->day[1] = 0;
    if (!HPS_FREAD(f, &magic, 1) ||
        (magic != PAYLOAD_MAGIC && magic != PAYLOAD_MAGIC2 && magic != PAYLOAD_MAGIC1) ||
        !HPS_FREAD(f, model, 72) || !HPS_FREAD(f, plan, 72) || !HPS_FREAD(f, c->state, 6) ||
        (magic != PAYLOAD_MAGIC1 && !HPS_FREAD(f, data, 72)) ||
        (magic == PAYLOAD_MAGIC && !HPS_FREAD(f, c->day, 2)) || !HPS_FREAD(f, &n_params, 1))
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: unknown checkpoint layout", path);
    model[71] = plan[71] = data[71] = '\0';
    if (strcmp(model, c->m->digest) != 0 || (n_params && n_params != c->m->n_params))
        return hps_fail(err, HPS_EXIT_USAGE, "%s: made for model %.19s..., but %s is %.19s...",
                        path, model, c->m->path, c->m->digest);
    if (!n_params != !c->t)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: %s checkpoint, not %s", path,
                        n_params ? "a trainer's" : "a parameter server's",
                        c->t ? "a trainer's" : "a parameter server's");
    if (strcmp(plan, c->plan_digest) != 0 && c->same_plan) {
        char was[96], is[96];
        snprintf(was, sizeof was, plan[0] ? "under plan %.19s..." : "without a plan (--model alone)", plan);
        snprintf(is, sizeof is, c->plan_digest[0] ? "under plan %.19s..." : "without a plan (--model alone)",
                 c->plan_digest);
        return hps_fail(err, HPS_EXIT_USAGE, "%s: made %s, this run is %s: a next day continues under the "
                        "plan that trained the tables", path, was, is);
    }
    if (strcmp(plan, c->plan_digest) != 0)
        hps_warnf("%s: made under another plan; resuming under %s", path,
                  c->t && c->t->plan->name ? c->t->plan->name : "this one");
    if (c->t && load_dense(c->t, f, path, err)) return -1;
    for (int l = 0; l < c->m->n_layers; l++) {
        const hps_layer *L = &c->m->layers[l];
        if (c->tables[l] && hps_table_load(c->tables[l], f, L->slots, L->n_slots, err, path)) return -1;
    }
    for (int s = 0; c->t && s < c->t->plan->n_stages; s++)
        if (c->t->stage_rows[s] && train_rows_load(c->t->stage_rows[s], f, err, path)) return -1;
    if (!c->same_plan) other_data(c, data, path);
    if (c->state[4] != seed)
        hps_warnf("%s: made with --seed %llu, resuming with %llu: new keys start from other rows",
                  path, (unsigned long long)c->state[4], (unsigned long long)seed);
    return 0;
}

static int load_part(ckpt_part *c, const char *path, hps_error *err)
{
    char *payload;
    size_t len;
    if (unpack(path, &payload, &len, err)) return -1;
    FILE *f = fmemopen(payload, len, "rb");
    HPS_CHECK(f);
    int rc = read_payload(c, f, path, err);
    fclose(f);
    free(payload);
    return rc;
}

int hps_trainer_load(hps_trainer *t, const char *dir, int *found, hps_error *err)
{
    char path[4300];
    if (read_latest(dir, path, sizeof path, found, err)) return -1;
    return *found ? hps_trainer_load_file(t, path, err) : 0;
}

int hps_trainer_load_file(hps_trainer *t, const char *path, hps_error *err)
{
    ckpt_part c = trainer_part(t);
    if (load_part(&c, path, err)) return -1;
    t->step = c.state[0], t->epoch = c.state[1], t->epoch_row = c.state[2], t->samples = c.state[3];
    t->sum.epochs_done = (int)t->epoch;
    t->owner->adam_t = (int)c.state[5];
    t->day = c.day[0], t->day_start = c.day[1];
    for (int l = 0; l < t->m->n_layers; l++)
        if (t->tables[l]) hps_table_start_day(t->tables[l], t->day, 0);
    return 0;
}

uint64_t hps_trainer_day(const hps_trainer *t) { return t->day; }

void train_day_steps(hps_trainer *t)
{
    if (t->o.max_steps) t->o.max_steps += (long)t->day_start; /* --steps counts this day's */
}

int hps_trainer_continue(hps_trainer *t, const char *path, hps_error *err)
{
    char file[4300];
    struct stat st;
    int found = 1;
    if (stat(path, &st) != 0)
        return hps_fail(err, HPS_EXIT_USAGE, "--continue-from: %s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode) && read_latest(path, file, sizeof file, &found, err)) return -1;
    if (!found) return hps_fail(err, HPS_EXIT_USAGE, "--continue-from: %s: holds no checkpoint", path);
    if (!S_ISDIR(st.st_mode)) snprintf(file, sizeof file, "%s", path);
    ckpt_part c = trainer_part(t);
    c.same_plan = 1;
    if (load_part(&c, file, err)) return -1;
    /* the tables, parameters, optimizers and step go on; the new data's
     * epoch starts at its first row */
    t->step = c.state[0], t->samples = c.state[3], t->epoch = 0, t->epoch_row = 0;
    t->owner->adam_t = (int)c.state[5];
    t->day = c.day[0] + 1, t->day_start = t->step;
    train_day_steps(t);
    /* a worker's tables only map keys: the lead says what its servers expired */
    hps_tables_next_day(t->m, t->tables, t->day, t->o.expire_after_days, !t->remote_rows);
    if (t->remote_rows) train_metrics_day(t);
    hps_log(2, "%s: continuing %s: day %llu, from step %llu\n", hps_progname(), file,
            (unsigned long long)t->day, (unsigned long long)t->step);
    return 0;
}

void hps_tables_next_day(const hps_model *m, hps_table *const *tables, uint64_t day, int expire_after_days,
                         int say)
{
    for (int l = 0; l < m->n_layers; l++) {
        if (!tables[l]) continue;
        int64_t gone = hps_table_start_day(tables[l], day, expire_after_days);
        if (gone && say) train_say_expired(m, l, day, gone, expire_after_days);
    }
}

int hps_tables_load_file(const hps_model *m, hps_table *const *tables, const char *plan_digest,
                         uint64_t seed, const char *path, int next_day, uint64_t *step, uint64_t *day,
                         hps_error *err)
{
    ckpt_part c = {NULL, m, plan_digest, {0, 0, 0, 0, seed, 0}, "", tables, {0, 0}, next_day};
    if (load_part(&c, path, err)) return -1;
    *step = c.state[0];
    *day = c.day[0] ? c.day[0] : 1; /* a server's checkpoint before its day was kept: 0 */
    return 0;
}

/* ---- safetensors ---------------------------------------------------------------- */

void train_add_tensor(train_tensor **ts, int *n, const char *name, const char *dtype, int dims,
                       int64_t d0, int64_t d1, void *data, size_t bytes)
{
    *ts = hps_realloc(*ts, (size_t)(*n + 1) * sizeof **ts);
    train_tensor *x = &(*ts)[(*n)++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->dtype = dtype, x->dims = dims, x->shape[0] = d0, x->shape[1] = d1;
    x->data = data, x->bytes = bytes, x->owned = 1;
}

static void add_fc(hps_trainer *t, int l, train_tensor **ts, int *n)
{
    const hps_layer *L = &t->m->layers[l];
    size_t nw = (size_t)L->in_width * L->out_width;
    float *w = hps_malloc(L->n_params * sizeof *w);
    t->be->download(w, t->owner->params + L->param_offset, L->n_params * sizeof *w);
    char name[160];
    snprintf(name, sizeof name, "%s.weight", L->name);
    train_add_tensor(ts, n, name, "F32", 2, L->out_width, L->in_width, w, nw * sizeof *w);
    snprintf(name, sizeof name, "%s.bias", L->name);
    train_add_tensor(ts, n, name, "F32", 1, L->out_width, 0, NULL, (size_t)L->out_width * sizeof *w);
    (*ts)[*n - 1].data = w + nw; /* inside the weight's allocation */
    (*ts)[*n - 1].owned = 0;
}

/* A slice [d0] or [d0, d1] of a layer's dense parameters, inside the
 * allocation `all` (the first tensor of the layer owns it). */
static void add_slice(train_tensor **ts, int *n, const char *name, float *all, size_t at, int64_t d0,
                      int64_t d1, int owner)
{
    size_t count = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    train_add_tensor(ts, n, name, "F32", d1 ? 2 : 1, d0, d1, NULL, count * sizeof(float));
    (*ts)[*n - 1].data = all + at;
    (*ts)[*n - 1].owned = owner;
}

/* linear: NAME.dense.weight [1, dense] (with "dense": true), NAME.bias [1];
 * cross, per inner layer I: NAME.I.weight ([w] vector, [w, w] matrix) or
 * NAME.I.u [w, r] and NAME.I.v [r, w], then NAME.I.bias [w] (hps-model(5)). */
static void add_dense_params(hps_trainer *t, int l, train_tensor **ts, int *n)
{
    const hps_layer *L = &t->m->layers[l];
    float *w = hps_malloc(L->n_params * sizeof *w);
    t->be->download(w, t->owner->params + L->param_offset, L->n_params * sizeof *w);
    char name[200];
    int owner = 1;
    if (L->kind == HPS_LAYER_LINEAR) {
        size_t dense = L->linear_dense ? (size_t)t->m->n_dense : 0;
        if (dense) {
            snprintf(name, sizeof name, "%s.dense.weight", L->name);
            add_slice(ts, n, name, w, 0, 1, (int64_t)dense, owner), owner = 0;
        }
        snprintf(name, sizeof name, "%s.bias", L->name);
        add_slice(ts, n, name, w, dense, 1, 0, owner);
        return;
    }
    const int64_t W = L->in_width, r = L->rank;
    size_t at = 0;
    for (int i = 0; i < L->depth; i++) {
        if (L->cross == HPS_CROSS_VECTOR || r == 0) {
            snprintf(name, sizeof name, "%s.%d.weight", L->name, i);
            add_slice(ts, n, name, w, at, W, L->cross == HPS_CROSS_VECTOR ? 0 : W, owner);
            at += (size_t)W * (L->cross == HPS_CROSS_VECTOR ? 1 : (size_t)W);
        } else {
            snprintf(name, sizeof name, "%s.%d.u", L->name, i);
            add_slice(ts, n, name, w, at, W, r, owner);
            snprintf(name, sizeof name, "%s.%d.v", L->name, i);
            add_slice(ts, n, name, w, at + (size_t)(W * r), r, W, 0);
            at += 2 * (size_t)(W * r);
        }
        owner = 0;
        snprintf(name, sizeof name, "%s.%d.bias", L->name, i);
        add_slice(ts, n, name, w, at, W, 0, 0);
        at += (size_t)W;
    }
}

static int cmp_key_row(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Per slot: its keys (I64 [n]) and rows (F32 [n, dim]) in ascending order
 * of the key as an unsigned number, whatever the table's order: an export
 * is the same bytes for the same rows, which delta exports rely on. */
static void add_embedding(hps_trainer *t, int l, train_tensor **ts, int *n)
{
    const hps_layer *L = &t->m->layers[l];
    hps_table *tab = t->tables[l];
    int64_t rows = hps_table_rows(tab);
    uint64_t *order = hps_malloc((size_t)(rows + 1) * 2 * sizeof *order); /* (key, row) pairs */
    for (int j = 0; j < L->n_slots; j++) {
        int slot = L->slots[j], s;
        int64_t count = 0;
        uint64_t key;
        for (int64_t r = 0; r < rows; r++) {
            hps_table_row_key(tab, r, &s, &key);
            if (s == slot) order[2 * count] = key, order[2 * count + 1] = (uint64_t)r, count++;
        }
        qsort(order, (size_t)count, 2 * sizeof *order, cmp_key_row);
        int64_t *keys = hps_malloc((size_t)(count + 1) * sizeof *keys);
        float *vals = hps_malloc((size_t)(count + 1) * L->dim * sizeof *vals);
        for (int64_t k = 0; k < count; k++) {
            keys[k] = (int64_t)order[2 * k];
            hps_table_row_values(tab, (int64_t)order[2 * k + 1], vals + k * L->dim);
        }
        char name[160];
        snprintf(name, sizeof name, "%s.%s.keys", L->name, t->m->slots[slot].name);
        train_add_tensor(ts, n, name, "I64", 1, count, 0, keys, (size_t)count * sizeof *keys);
        snprintf(name, sizeof name, "%s.%s.weight", L->name, t->m->slots[slot].name);
        train_add_tensor(ts, n, name, "F32", 2, count, L->dim, vals, (size_t)count * L->dim * sizeof *vals);
    }
    free(order);
}

static char *safetensors_header(const train_tensor *ts, int n, json_t *meta, size_t *len)
{
    json_t *h = json_object();
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < ts[i].dims; d++) json_array_append_new(shape, json_integer(ts[i].shape[d]));
        json_object_set_new(h, ts[i].name,
                            json_pack("{s:s, s:o, s:[II]}", "dtype", ts[i].dtype, "shape", shape,
                                      "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + ts[i].bytes)));
        off += ts[i].bytes;
    }
    if (meta) json_object_set(h, "__metadata__", meta);
    char *text = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(h);
    /* pad with spaces so the data starts 8-byte aligned, as the format advises */
    size_t n0 = strlen(text), padded = (n0 + 7) & ~(size_t)7;
    text = hps_realloc(text, padded + 1);
    memset(text + n0, ' ', padded - n0);
    text[padded] = '\0';
    *len = padded;
    return text;
}

/* Bytes to the export and to its digest. */
static int put_hashed(FILE *f, hps_sha256_ctx *c, const void *p, size_t n)
{
    hps_sha256_update(c, p, n);
    return n == 0 || fwrite(p, 1, n, f) == n;
}

/* Only a regular file (or a new one) gets a sidecar and is read back: not
 * stdout, a device or a FIFO. */
static int gets_sidecar(const char *path)
{
    struct stat st;
    return strcmp(path, "-") != 0 && (stat(path, &st) != 0 || S_ISREG(st.st_mode));
}

/* PATH.sha256 beside the export, in sha256sum(1)'s format, so that
 * `sha256sum -c PATH.sha256` (run in PATH's directory) catches a corrupted
 * copy; written to its temporary, committed by commit_pair. */
static hps_out *open_sidecar(const char *path, const unsigned char sum[32], hps_error *err)
{
    const char *slash = strrchr(path, '/');
    char side[4200];
    snprintf(side, sizeof side, "%s.sha256", path);
    hps_out *o = hps_out_open(side, err);
    if (!o) return NULL;
    FILE *f = hps_out_file(o);
    for (int i = 0; i < 32; i++) fprintf(f, "%02x", sum[i]);
    fprintf(f, "  %s\n", slash ? slash + 1 : path);
    return o;
}

/* The export and its sidecar replace an earlier pair so that a crash at any
 * moment leaves the old pair, the new pair or an export without a sidecar,
 * never an export beside another's digest (hps-train(1), FILES): both are
 * whole in their temporaries first, then the old sidecar goes, the export
 * is renamed into place, and its sidecar after it. */
static int commit_pair(hps_out *o, hps_out *side, const char *path, hps_error *err)
{
    if (!side) return hps_out_commit(o, err);
    char old[4200];
    snprintf(old, sizeof old, "%s.sha256", path);
    if (unlink(old) != 0 && errno != ENOENT) {
        int e = errno;
        hps_out_abort(o), hps_out_abort(side);
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot replace it: %s", old, strerror(e));
    }
    if (hps_out_commit(o, err)) {
        hps_out_abort(side);
        return -1;
    }
    return hps_out_commit(side, err);
}

/* What a killed export left: the temporaries of the export and of its sidecar. */
static void remove_stale_export(const char *path)
{
    char side[4200];
    snprintf(side, sizeof side, "%s.sha256", path);
    hps_out_remove_stale(path);
    hps_out_remove_stale(side);
}

int train_safetensors_put(FILE *f, const train_tensor *ts, int n, json_t *meta, unsigned char sum[32])
{
    size_t hlen;
    char *header = safetensors_header(ts, n, meta, &hlen);
    unsigned char len8[8];
    put_u64(len8, hlen);
    hps_sha256_ctx c;
    hps_sha256_init(&c);
    int ok = put_hashed(f, &c, len8, 8) && put_hashed(f, &c, header, hlen);
    for (int i = 0; i < n && ok; i++) ok = put_hashed(f, &c, ts[i].data, ts[i].bytes);
    hps_sha256_final(&c, sum);
    free(header);
    return ok ? 0 : -1;
}

int train_safetensors_write(const char *path, const train_tensor *ts, int n, json_t *meta, hps_error *err)
{
    int sidecar = gets_sidecar(path);
    if (sidecar) remove_stale_export(path);
    hps_out *o = hps_out_open_binary(path, "safetensors", err);
    if (!o) return -1;
    unsigned char sum[32];
    int rc = 0;
    hps_out *side = NULL;
    if (train_safetensors_put(hps_out_file(o), ts, n, meta, sum))
        hps_out_abort(o), rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", path, strerror(errno));
    else if (sidecar && !(side = open_sidecar(path, sum, err))) hps_out_abort(o), rc = -1;
    else rc = commit_pair(o, side, path, err);
    if (rc == 0 && sidecar) /* read back: what landed on disk is whole */
        rc = hps_safetensors_verify(path, NULL, err);
    return rc;
}

void train_tensors_free(train_tensor *ts, int n)
{
    for (int i = 0; i < n; i++)
        if (ts[i].owned) free(ts[i].data);
    free(ts);
}

int hps_trainer_export(hps_trainer *t, const char *path, hps_error *err)
{
    train_tensor *ts = NULL;
    int n = 0;
    train_rows_sync(t);
    for (int l = 0; l < t->m->n_layers; l++) {
        if (t->m->layers[l].kind == HPS_LAYER_FC) add_fc(t, l, &ts, &n);
        if (t->tables[l]) add_embedding(t, l, &ts, &n);
        if (t->m->layers[l].kind == HPS_LAYER_LINEAR || t->m->layers[l].kind == HPS_LAYER_CROSS)
            add_dense_params(t, l, &ts, &n);
    }
    json_t *meta = json_pack("{s:s, s:s, s:s, s:s}", "format", "pt", "producer", "hps-train " HPS_VERSION,
                             "model", t->m->name, "model_digest", t->m->digest);
    int rc = train_safetensors_write(path, ts, n, meta, err);
    json_decref(meta);
    train_tensors_free(ts, n);
    return rc;
}

/* ---- reading an export back --------------------------------------------------- */

/* Bytes of one element of the dtypes hps-train writes; 0 for any other. */
static uint64_t dtype_size(const char *dtype)
{
    return !strcmp(dtype, "F32") ? 4 : !strcmp(dtype, "I64") ? 8 : 0;
}

typedef struct {
    uint64_t begin, end;
} span;

static int cmp_span(const void *a, const void *b)
{
    uint64_t x = ((const span *)a)->begin, y = ((const span *)b)->begin;
    return x < y ? -1 : x > y;
}

/* One tensor's entry: {"dtype", "shape": up to 2 dims, "data_offsets": [b, e]}
 * with e - b the bytes its dtype and shape take. */
static int read_entry(const char *name, const char *key, json_t *e, span *s, hps_error *err)
{
    json_t *shape = json_object_get(e, "shape"), *off = json_object_get(e, "data_offsets");
    const char *dtype = json_string_value(json_object_get(e, "dtype"));
    char shown[40];
    hps_printable(key, shown, sizeof shown);
    if (!json_is_object(e) || !dtype || !dtype_size(dtype) || !json_is_array(shape) ||
        json_array_size(shape) > 2 || !json_is_array(off) || json_array_size(off) != 2)
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "%s: tensor '%s': expected dtype F32 or I64, a shape of at most 2 dims "
                        "and data_offsets [begin, end]",
                        name, shown);
    uint64_t bytes = dtype_size(dtype);
    for (size_t d = 0; d < json_array_size(shape); d++) {
        json_t *v = json_array_get(shape, d);
        json_int_t dim = json_integer_value(v);
        if (!json_is_integer(v) || dim < 0 || dim > ((json_int_t)1 << 40) ||
            (dim && bytes > UINT64_MAX / (uint64_t)dim))
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: tensor '%s': impossible shape", name, shown);
        bytes *= (uint64_t)dim;
    }
    json_t *b = json_array_get(off, 0), *x = json_array_get(off, 1);
    if (!json_is_integer(b) || !json_is_integer(x) || json_integer_value(b) < 0 ||
        json_integer_value(x) < json_integer_value(b) ||
        (uint64_t)(json_integer_value(x) - json_integer_value(b)) != bytes)
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "%s: tensor '%s': data_offsets do not hold its dtype and shape", name, shown);
    s->begin = (uint64_t)json_integer_value(b), s->end = (uint64_t)json_integer_value(x);
    return 0;
}

int hps_safetensors_check(const char *name, const unsigned char *buf, size_t len, int *n_tensors,
                          hps_error *err)
{
    uint64_t hlen = len >= 8 ? train_get_u64(buf) : 0;
    if (len < 8 || hlen > len - 8 || hlen > HPS_JSON_MAX_BYTES)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: not a safetensors file, or truncated", name);
    json_t *h;
    if (hps_json_loadb(name, (const char *)buf + 8, (size_t)hlen, &h, err)) return -1;
    span *spans = hps_calloc(json_object_size(h) + 1, sizeof *spans);
    size_t n = 0;
    int rc = 0;
    const char *key;
    json_t *e;
    json_object_foreach(h, key, e) {
        if (strcmp(key, "__metadata__") == 0) continue;
        if ((rc = read_entry(name, key, e, &spans[n++], err))) break;
    }
    /* the data: the tensors back to back from 0 to the end of the file */
    qsort(spans, n, sizeof *spans, cmp_span);
    uint64_t at = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (spans[i].begin != at)
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: tensors overlap or leave a gap at byte %llu",
                          name, (unsigned long long)at);
        at = spans[i].end;
    }
    if (rc == 0 && at != len - 8 - hlen)
        rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: the tensors end at byte %llu of %llu", name,
                      (unsigned long long)at, (unsigned long long)(len - 8 - hlen));
    if (rc == 0 && n_tensors) *n_tensors = (int)n;
    free(spans);
    json_decref(h);
    return rc;
}

/* The first word of PATH.sha256, when there is one, against the file. */
static int check_sidecar(const char *path, const char *buf, size_t len, hps_error *err)
{
    char side[4200], *text;
    snprintf(side, sizeof side, "%s.sha256", path);
    if (access(side, F_OK) != 0) return 0;
    if (hps_read_at_most(side, 4096, &text, NULL, err)) return -1;
    char hex[72];
    hps_sha256_hex(buf, len, hex);
    int ok = hps_checksum_ok(strlen(text) >= 64 && strncmp(text, hex + 7, 64) == 0);
    free(text);
    return ok ? 0 : hps_fail(err, HPS_EXIT_RUNTIME, "%s: does not match %s: the file is corrupted", path, side);
}

int hps_safetensors_verify(const char *path, int *n_tensors, hps_error *err)
{
    char *buf;
    size_t len;
    if (hps_read_all(path, &buf, &len, err)) return -1;
    int rc = check_sidecar(path, buf, len, err);
    if (rc == 0) rc = hps_safetensors_check(path, (const unsigned char *)buf, len, n_tensors, err);
    free(buf);
    return rc;
}
