/* hps-shard's main job: text in, a shard directory out.
 *
 *   1. count the lines (stdin is first spooled to a file in the output's
 *      temporary directory), or, with --shuffle, scatter them into buckets;
 *   2. split the count exactly into the shards' row ranges;
 *   3. the main thread cuts the lines into chunks of at most block_rows that
 *      never straddle a shard; worker threads parse, hash, gather key
 *      statistics and compress each chunk into a block; the main thread
 *      writes the blocks in input order, so the bytes do not depend on the
 *      number of threads;
 *   4. write manifest.json and rename the directory into place.
 *
 * Memory is bounded by the jobs in flight (2 per thread + 2, each a chunk of
 * at most 4 MiB of text and its block) and, with --shuffle, one bucket.
 */
#include "data/hps_shard_job.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "core/hps_io.h"
#include "core/hps_rng.h"
#include "data/hps_input.h"

#define CHUNK_BYTES (4u << 20)
#define MAX_WARNINGS 10

/* ---- inputs --------------------------------------------------------------------- */

typedef struct {
    int n;
    char **paths;        /* what to open (stdin: its spool) */
    const char **names;  /* what messages say */
    uint64_t lines, bytes_in;
    uint64_t text_bytes; /* decoded, an estimate before counting */
} inputs;

/* Copies stdin to a file in the temporary directory, so that it can be read
 * twice (once to count, once to shard). */
static int spool_stdin(hps_tmpdir *t, char **path, hps_error *err)
{
    *path = hps_tmpdir_file(t, "stdin.spool");
    FILE *f = fopen(*path, "wb");
    if (!f) return hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot create: %s", *path, strerror(errno));
    size_t cap = 1 << 20, n;
    char *buf = hps_malloc(cap);
    while ((n = fread(buf, 1, cap, stdin)) > 0) fwrite(buf, 1, n, f);
    int bad = ferror(stdin), wbad = fclose(f) != 0;
    free(buf);
    if (bad) return hps_fail(err, HPS_EXIT_RUNTIME, "<stdin>: cannot read: %s", strerror(errno));
    if (wbad) return hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", *path, strerror(errno));
    return 0;
}

static int inputs_open(inputs *in, const hps_shard_opts *o, hps_tmpdir *t, hps_error *err)
{
    in->n = o->n_inputs;
    in->paths = hps_calloc((size_t)in->n, sizeof *in->paths);
    in->names = hps_calloc((size_t)in->n, sizeof *in->names);
    for (int i = 0; i < in->n; i++) {
        in->names[i] = hps_path_name(o->inputs[i]);
        if (strcmp(o->inputs[i], "-") == 0) {
            for (int j = 0; j < i; j++)
                if (strcmp(o->inputs[j], "-") == 0)
                    return hps_fail(err, HPS_EXIT_USAGE, "stdin given more than once");
            if (spool_stdin(t, &in->paths[i], err) != 0) return -1;
        } else {
            in->paths[i] = hps_strdup(o->inputs[i]);
        }
    }
    return 0;
}

static void inputs_free(inputs *in)
{
    for (int i = 0; i < in->n; i++) free(in->paths[i]);
    free(in->paths);
    free(in->names);
}

/* Counts the lines of a plain regular file through mmap: no copy into user
 * space, which matters when the count is a whole extra pass.  0 when done,
 * 1 when the file is not one for this (zstd, a pipe), -1 on error. */
static int count_mapped(inputs *in, int i)
{
    int fd = open(in->paths[i], O_RDONLY);
    struct stat st;
    if (fd < 0) return 1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 4) {
        close(fd);
        return 1; /* (a file this short costs nothing to read the usual way) */
    }
    size_t n = (size_t)st.st_size;
    unsigned char head[4];
    if (pread(fd, head, 4, 0) != 4 || memcmp(head, "\x28\xb5\x2f\xfd", 4) == 0) {
        close(fd);
        return 1;
    }
    /* in windows, so that the mapped pages never add up to much resident memory */
    const size_t window = 64u << 20;
    char last = '\n';
    for (size_t off = 0; off < n; off += window) {
        size_t len = n - off < window ? n - off : window;
        const char *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t)off);
        if (p == MAP_FAILED) {
            close(fd);
            return -1;
        }
        madvise((void *)p, len, MADV_SEQUENTIAL);
        for (const char *q = p, *end = p + len; (q = memchr(q, '\n', (size_t)(end - q))); q++) in->lines++;
        last = p[len - 1];
        munmap((void *)p, len);
    }
    close(fd);
    if (last != '\n') in->lines++;
    in->text_bytes += n;
    in->bytes_in += n;
    return 0;
}

/* Pass 1 without --shuffle: how many lines, so that the split is exact. */
static int count_lines(inputs *in, hps_error *err)
{
    size_t cap = 1 << 20;
    char *buf = hps_malloc(cap);
    int rc = 0;
    for (int i = 0; i < in->n && rc == 0; i++) {
        int m = count_mapped(in, i);
        if (m == 0) continue;
        if (m < 0) {
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot map: %s", in->names[i], strerror(errno));
            break;
        }
        hps_input *f = hps_input_open(in->paths[i], err);
        if (!f) {
            rc = -1;
            break;
        }
        ssize_t got;
        char last = '\n';
        while ((got = hps_input_read(f, buf, cap, err)) > 0) {
            for (char *p = buf, *end = buf + got; (p = memchr(p, '\n', (size_t)(end - p))); p++) in->lines++;
            last = buf[got - 1];
            in->text_bytes += (uint64_t)got;
        }
        if (got < 0) rc = -1;
        if (last != '\n') in->lines++;
        in->bytes_in += hps_input_raw_bytes(f);
        hps_input_close(f);
    }
    free(buf);
    return rc;
}

/* ---- the line feeder: inputs in order, or shuffled buckets ------------------------ */

typedef struct {
    uint32_t len, file;
    uint64_t line_no;
    const char *text;
} record;

typedef struct {
    inputs *in;
    int file;
    hps_lines *lines;
    /* --shuffle */
    int shuffle;
    uint64_t seed;
    int n_buckets, bucket;
    char **bucket_paths;
    char *data;
    record *recs;
    size_t n_recs, next;
} feeder;

static int feeder_next(feeder *f, const char **line, size_t *len, int *file, uint64_t *line_no,
                       hps_error *err);

/* Pass 1 with --shuffle: line i of the input goes to bucket
 * mix64(seed ^ mix64(i)) mod K, as a record (length, file, line number, text). */
static int shuffle_scatter(feeder *f, hps_tmpdir *t, size_t bucket_mem, hps_error *err)
{
    inputs *in = f->in;
    uint64_t est = 0;
    for (int i = 0; i < in->n; i++) {
        struct stat st;
        hps_input *x = hps_input_open(in->paths[i], err);
        if (!x) return -1;
        if (stat(in->paths[i], &st) == 0) est += (uint64_t)st.st_size * (hps_input_is_zstd(x) ? 5 : 1);
        hps_input_close(x);
    }
    uint64_t k = est / (bucket_mem / 2) + 1; /* half: the buckets come out uneven */
    f->n_buckets = (int)(k > 4096 ? 4096 : k);
    if (hps_tmpdir_mkdir(t, "shuffle", err) != 0) return -1;
    f->bucket_paths = hps_calloc((size_t)f->n_buckets, sizeof *f->bucket_paths);
    FILE **out = hps_calloc((size_t)f->n_buckets, sizeof *out);
    int rc = 0;
    for (int b = 0; b < f->n_buckets && rc == 0; b++) {
        char name[64];
        snprintf(name, sizeof name, "shuffle/bucket-%04d", b);
        f->bucket_paths[b] = hps_tmpdir_file(t, name);
        if (!(out[b] = fopen(f->bucket_paths[b], "wb")))
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot create: %s", f->bucket_paths[b], strerror(errno));
    }
    const char *line;
    size_t len;
    int file;
    uint64_t line_no, i = 0;
    f->shuffle = 0; /* read the inputs in order while scattering */
    while (rc == 0 && (rc = feeder_next(f, &line, &len, &file, &line_no, err)) == 1) {
        uint64_t b = hps_mix64(f->seed ^ hps_mix64(i++)) % (uint64_t)f->n_buckets;
        uint32_t head[4] = {(uint32_t)len, (uint32_t)file, (uint32_t)line_no, (uint32_t)(line_no >> 32)};
        fwrite(head, sizeof head, 1, out[b]);
        fwrite(line, 1, len, out[b]);
        in->text_bytes += len + 1; /* the decoded size, newline included */
        rc = 0;
    }
    for (int b = 0; b < f->n_buckets; b++)
        if (out[b] && fclose(out[b]) != 0 && rc == 0)
            rc = hps_fail(err, HPS_EXIT_RUNTIME, "%s: write failed: %s", f->bucket_paths[b], strerror(errno));
    free(out);
    in->lines = i;
    f->shuffle = 1;
    f->file = in->n;
    return rc < 0 ? -1 : 0;
}

/* Loads bucket b and puts its records in a random order (Fisher-Yates). */
static int shuffle_load(feeder *f, int b, hps_error *err)
{
    char *data;
    size_t len;
    free(f->data);
    f->data = NULL;
    if (hps_read_all(f->bucket_paths[b], &data, &len, err) != 0) return -1;
    unlink(f->bucket_paths[b]); /* read: its disk space can go */
    f->data = data;
    size_t n = 0, cap = 1024;
    f->recs = hps_realloc(f->recs, cap * sizeof *f->recs);
    for (size_t p = 0; p + 16 <= len;) {
        uint32_t head[4];
        memcpy(head, data + p, 16);
        if (n == cap) f->recs = hps_realloc(f->recs, (cap *= 2) * sizeof *f->recs);
        f->recs[n++] = (record){head[0], head[1], (uint64_t)head[3] << 32 | head[2], data + p + 16};
        p += 16 + head[0];
    }
    hps_rng r;
    hps_rng_seed(&r, f->seed ^ hps_mix64((uint64_t)b + 1));
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)hps_rng_below(&r, i);
        record x = f->recs[i - 1];
        f->recs[i - 1] = f->recs[j], f->recs[j] = x;
    }
    f->n_recs = n;
    f->next = 0;
    return 0;
}

static int feeder_next(feeder *f, const char **line, size_t *len, int *file, uint64_t *line_no,
                       hps_error *err)
{
    if (f->shuffle) {
        while (f->next == f->n_recs) {
            if (f->bucket == f->n_buckets) return 0;
            if (shuffle_load(f, f->bucket++, err) != 0) return -1;
        }
        const record *r = &f->recs[f->next++];
        *line = r->text, *len = r->len, *file = (int)r->file, *line_no = r->line_no;
        return 1;
    }
    for (;;) {
        if (!f->lines) {
            if (f->file == f->in->n) return 0;
            if (!(f->lines = hps_lines_open(f->in->paths[f->file], err))) return -1;
        }
        int rc = hps_lines_next(f->lines, line, len, line_no, err);
        if (rc != 0) {
            *file = f->file;
            return rc;
        }
        hps_lines_close(f->lines);
        f->lines = NULL;
        f->file++;
    }
}

static void feeder_free(feeder *f)
{
    hps_lines_close(f->lines);
    for (int b = 0; b < f->n_buckets; b++) free(f->bucket_paths[b]);
    free(f->bucket_paths);
    free(f->data);
    free(f->recs);
}

/* ---- jobs and workers --------------------------------------------------------------- */

typedef struct {
    int64_t seq;
    int shard;
    char *text;
    size_t len, cap;
    int n_lines, lines_cap;
    int *file;
    uint32_t *line_len; /* the main thread found each line: no second search */
    uint64_t *line_no;
    /* results */
    hps_rows *rows;
    hps_block block;
    uint8_t *scratch;
    size_t scratch_cap;
    hps_hot_block *hot;
    int failed, done;
    hps_error err;
    uint64_t skipped;
    char first_skip[600];
} job;

typedef struct pipeline pipeline;

typedef struct {
    pipeline *p;
    pthread_t thread;
    ZSTD_CCtx *cctx;
    hps_hll_set *hll;
} worker;

struct pipeline {
    const hps_shard_opts *o;
    const inputs *in;
    int n_jobs;
    job *jobs;
    int n_workers;
    worker *workers;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    job **queue;        /* ring of n_jobs */
    int q_head, q_len;
    int quit;
};

static void job_add_line(job *j, const char *line, size_t len, int file, uint64_t line_no)
{
    if (j->len + len + 1 > j->cap) {
        while (j->len + len + 1 > j->cap) j->cap *= 2;
        j->text = hps_realloc(j->text, j->cap);
    }
    memcpy(j->text + j->len, line, len);
    j->text[j->len + len] = '\n';
    j->len += len + 1;
    if (j->n_lines == j->lines_cap) {
        j->lines_cap *= 2;
        j->file = hps_realloc(j->file, (size_t)j->lines_cap * sizeof *j->file);
        j->line_len = hps_realloc(j->line_len, (size_t)j->lines_cap * sizeof *j->line_len);
        j->line_no = hps_realloc(j->line_no, (size_t)j->lines_cap * sizeof *j->line_no);
    }
    j->file[j->n_lines] = file;
    j->line_len[j->n_lines] = (uint32_t)len;
    j->line_no[j->n_lines++] = line_no;
}

/* Parse, count and compress one chunk: the work the threads share. */
static void job_run(pipeline *p, worker *w, job *j)
{
    const hps_shard_opts *o = p->o;
    char msg[400];
    hps_rows_clear(j->rows);
    j->failed = 0;
    j->skipped = 0;
    const char *line = j->text;
    for (int i = 0; i < j->n_lines; i++) {
        if (hps_parse_line(&o->parse, line, j->line_len[i], j->rows, msg, sizeof msg) != 0) {
            const char *name = p->in->names[j->file[i]];
            unsigned long long ln = (unsigned long long)j->line_no[i];
            if (!o->skip_bad) {
                j->failed = 1;
                hps_fail(&j->err, HPS_EXIT_RUNTIME, "%s:%llu: %s", name, ln, msg);
                return;
            }
            if (j->skipped++ == 0) snprintf(j->first_skip, sizeof j->first_skip, "%s:%llu: %s", name, ln, msg);
        }
        line += j->line_len[i] + 1;
    }
    if (j->rows->rows == 0) return;
    hps_hll_add_rows(w->hll, j->rows);
    hps_hot_block_count(j->hot, j->rows);
    hps_block_compress(j->rows, w->cctx, o->level, &j->block, &j->scratch, &j->scratch_cap);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    pipeline *p = w->p;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->q_len == 0) pthread_cond_wait(&p->work, &p->mu);
        if (p->quit) break;
        job *j = p->queue[p->q_head];
        p->q_head = (p->q_head + 1) % p->n_jobs;
        p->q_len--;
        pthread_mutex_unlock(&p->mu);
        job_run(p, w, j);
        pthread_mutex_lock(&p->mu);
        j->done = 1;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pipeline_init(pipeline *p, const hps_shard_opts *o, const inputs *in)
{
    memset(p, 0, sizeof *p);
    p->o = o;
    p->in = in;
    p->n_workers = o->threads > 0 ? o->threads : 1;
    p->n_jobs = 2 * p->n_workers + 2;
    p->jobs = hps_calloc((size_t)p->n_jobs, sizeof *p->jobs);
    p->queue = hps_calloc((size_t)p->n_jobs, sizeof *p->queue);
    for (int i = 0; i < p->n_jobs; i++) {
        job *j = &p->jobs[i];
        j->seq = -1;
        j->cap = 1 << 16;
        j->text = hps_malloc(j->cap);
        j->lines_cap = 1024;
        j->file = hps_malloc((size_t)j->lines_cap * sizeof *j->file);
        j->line_len = hps_malloc((size_t)j->lines_cap * sizeof *j->line_len);
        j->line_no = hps_malloc((size_t)j->lines_cap * sizeof *j->line_no);
        j->rows = hps_rows_create(&o->parse.schema, o->block_rows);
        j->hot = hps_hot_block_create(o->parse.schema.n_slots);
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->workers = hps_calloc((size_t)p->n_workers, sizeof *p->workers);
    for (int i = 0; i < p->n_workers; i++) {
        worker *w = &p->workers[i];
        w->p = p;
        w->cctx = ZSTD_createCCtx();
        w->hll = hps_hll_create(o->parse.schema.n_slots);
        HPS_CHECK(pthread_create(&w->thread, NULL, worker_main, w) == 0);
    }
}

static void pipeline_stop(pipeline *p)
{
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_workers; i++) pthread_join(p->workers[i].thread, NULL);
}

static void pipeline_free(pipeline *p)
{
    for (int i = 0; i < p->n_workers; i++) {
        ZSTD_freeCCtx(p->workers[i].cctx);
        hps_hll_free(p->workers[i].hll);
    }
    for (int i = 0; i < p->n_jobs; i++) {
        job *j = &p->jobs[i];
        free(j->text), free(j->file), free(j->line_len), free(j->line_no), free(j->scratch);
        hps_rows_free(j->rows);
        hps_block_free(&j->block);
        hps_hot_block_free(j->hot);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p->jobs), free(p->queue), free(p->workers);
}

static void pipeline_submit(pipeline *p, job *j)
{
    pthread_mutex_lock(&p->mu);
    p->queue[(p->q_head + p->q_len) % p->n_jobs] = j;
    p->q_len++;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
}

static void pipeline_wait(pipeline *p, job *j)
{
    pthread_mutex_lock(&p->mu);
    while (!j->done) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* ---- output: shards in order ---------------------------------------------------------- */

typedef struct {
    const hps_shard_opts *o;
    hps_tmpdir *tmp;
    int n_out;              /* training shards + holdout */
    char **files, **paths;
    uint64_t *planned;
    hps_shard_info *infos;
    int open;               /* shard being written, -1 before the first */
    hps_shard_writer *w;
    hps_hot_set *hot;
    hps_shard_result *res;
    int warnings;
    double t0, last_progress;
    uint64_t lines_total, lines_done;
} output;

static int output_advance(output *out, int shard, hps_error *err)
{
    while (out->open < shard) {
        if (out->w && hps_shard_writer_close(out->w, &out->infos[out->open], err) != 0) {
            out->w = NULL;
            return -1;
        }
        out->w = NULL;
        if (++out->open == out->n_out) break;
        out->w = hps_shard_writer_create(out->paths[out->open], &out->o->parse.schema,
                                         (uint32_t)out->o->block_rows, err);
        if (!out->w) return -1;
    }
    return 0;
}

static void output_progress(output *out, int final)
{
    if (!out->o->progress) return;
    double now = hps_now();
    if (!final && now - out->last_progress < 0.25) return;
    out->last_progress = now;
    double pct = out->lines_total ? 100.0 * (double)out->lines_done / (double)out->lines_total : 100;
    fprintf(stderr, "\r%s: %5.1f%%  %llu rows  %.1f s ", hps_progname(), pct,
            (unsigned long long)out->lines_done, now - out->t0);
    if (final) fputc('\n', stderr);
}

/* The largest |dense value| of a block, into the result. */
static void dense_extent(hps_shard_result *res, const hps_rows *r)
{
    for (int d = 0; d < r->schema.n_dense; d++)
        for (int i = 0; i < r->rows; i++) {
            double x = fabs((double)r->dense[(size_t)d * (size_t)r->cap + (size_t)i]);
            if (x > res->dense_max_abs) res->dense_max_abs = x, res->dense_max_col = d;
        }
}

/* A finished job: its error, its skipped lines, its block. */
static int output_job(output *out, job *j, hps_error *err)
{
    if (j->failed) {
        *err = j->err;
        return -1;
    }
    out->lines_done += (uint64_t)j->n_lines;
    if (j->skipped) {
        out->res->skipped += j->skipped;
        if (out->warnings++ < MAX_WARNINGS) hps_warnf("%s (skipped)", j->first_skip);
    }
    if (output_advance(out, j->shard, err) != 0) return -1;
    if (j->rows->rows) {
        if (hps_shard_writer_add(out->w, &j->block, err) != 0) return -1;
        hps_hot_merge(out->hot, j->hot, j->rows);
        dense_extent(out->res, j->rows);
        out->res->rows += (uint64_t)j->rows->rows;
    }
    output_progress(out, 0);
    return 0;
}

/* Waits for job slot of seq to be free, writing the job it held. */
static job *acquire_job(pipeline *p, output *out, int64_t seq, int shard, hps_error *err)
{
    job *j = &p->jobs[seq % p->n_jobs];
    if (j->seq >= 0) {
        pipeline_wait(p, j);
        if (output_job(out, j, err) != 0) return NULL;
    }
    j->seq = seq;
    j->shard = shard;
    j->len = 0;
    j->n_lines = 0;
    j->done = 0;
    return j;
}

static int drain(pipeline *p, output *out, int64_t next_seq, hps_error *err)
{
    for (int64_t s = next_seq - p->n_jobs; s < next_seq; s++) {
        if (s < 0) continue;
        job *j = &p->jobs[s % p->n_jobs];
        pipeline_wait(p, j);
        if (output_job(out, j, err) != 0) return -1;
        j->seq = -1;
    }
    return output_advance(out, out->n_out, err);
}

/* Feeds every line through the pipeline, cutting chunks at block_rows,
 * CHUNK_BYTES and shard boundaries. */
static int run_lines(pipeline *p, output *out, feeder *f, hps_error *err)
{
    const char *line;
    size_t len;
    int file, rc, shard = 0;
    uint64_t line_no, in_shard = 0;
    int64_t seq = 0;
    job *j = NULL;
    while (shard < out->n_out && out->planned[shard] == 0) shard++;
    while ((rc = feeder_next(f, &line, &len, &file, &line_no, err)) == 1) {
        if (shard == out->n_out)
            return hps_fail(err, HPS_EXIT_RUNTIME, "%s: input grew while being read", f->in->names[file]);
        if (!j && !(j = acquire_job(p, out, seq, shard, err))) return -1;
        job_add_line(j, line, len, file, line_no);
        int shard_full = ++in_shard == out->planned[shard];
        if (shard_full || j->n_lines == p->o->block_rows || j->len >= CHUNK_BYTES) {
            pipeline_submit(p, j);
            j = NULL;
            seq++;
        }
        if (shard_full) {
            in_shard = 0;
            for (shard++; shard < out->n_out && out->planned[shard] == 0;) shard++;
        }
    }
    if (rc < 0) return -1;
    if (shard < out->n_out) return hps_fail(err, HPS_EXIT_RUNTIME, "input shrank while being read");
    return drain(p, out, seq, err);
}

/* ---- the whole job ---------------------------------------------------------------------- */

static void plan_outputs(output *out, const hps_shard_opts *o, uint64_t lines)
{
    out->n_out = o->n_shards + (o->holdout > 0 ? 1 : 0);
    out->files = hps_calloc((size_t)out->n_out, sizeof *out->files);
    out->paths = hps_calloc((size_t)out->n_out, sizeof *out->paths);
    out->planned = hps_calloc((size_t)out->n_out, sizeof *out->planned);
    out->infos = hps_calloc((size_t)out->n_out, sizeof *out->infos);
    uint64_t hold = o->holdout > 0 ? (uint64_t)((long double)lines * o->holdout + 0.5L) : 0;
    hps_split_counts(lines - hold, o->shares, o->n_shards, out->planned);
    for (int i = 0; i < out->n_out; i++) {
        char name[64];
        if (i == o->n_shards) {
            snprintf(name, sizeof name, "holdout.hps");
            out->planned[i] = hold;
        } else {
            snprintf(name, sizeof name, "shard-%05d.hps", i);
        }
        out->files[i] = hps_strdup(name);
        out->paths[i] = hps_tmpdir_file(out->tmp, name);
    }
    out->open = -1;
}

static void output_free(output *out)
{
    if (out->w) hps_shard_writer_abort(out->w);
    for (int i = 0; i < out->n_out; i++) free(out->files[i]), free(out->paths[i]);
    free(out->files), free(out->paths), free(out->planned), free(out->infos);
    hps_hot_free(out->hot);
}

static int finish(output *out, const hps_hll_set *hll, inputs *in, hps_shard_result *res,
                  hps_error *err)
{
    const hps_shard_opts *o = out->o;
    hps_server_keys_file *server_keys = NULL;
    int rc = 0;
    if (o->servers) { /* from the training shards: eval-only keys need no room */
        server_keys = hps_calloc((size_t)o->servers, sizeof *server_keys);
        rc = hps_server_keys_write(out->tmp, o, out->paths, o->n_shards, hll, server_keys, err);
    }
    res->bytes_out = 0;
    for (int i = 0; i < out->n_out; i++) res->bytes_out += out->infos[i].bytes;
    res->seconds = hps_now() - out->t0;
    char *manifest = hps_tmpdir_file(out->tmp, "manifest.json");
    if (rc == 0)
        rc = hps_manifest_write(manifest, o, in->names, in->n, out->infos, (const char *const *)out->files,
                                out->planned, out->n_out, res, hll, out->hot, server_keys, err);
    free(manifest);
    free(server_keys);
    return rc;
}

/* Shards of no rows would train for 0 steps and report nan: an input with no
 * row is refused, by the name of the input. */
static int no_rows(const inputs *in, const hps_shard_result *res, hps_error *err)
{
    char names[256] = "";
    for (int i = 0; i < in->n; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", in->names[i]);
    }
    if (res->skipped)
        return hps_fail(err, HPS_EXIT_USAGE, "%s: no rows: all %llu line%s malformed (skipped); nothing to shard", names,
                        (unsigned long long)res->skipped, res->skipped == 1 ? " was" : "s were");
    return hps_fail(err, HPS_EXIT_USAGE, "%s: no rows (the input is empty); nothing to shard", names);
}

int hps_shard_run(const hps_shard_opts *o, hps_shard_result *res, hps_error *err)
{
    memset(res, 0, sizeof *res);
    res->dense_max_col = -1;
    hps_tmpdir *tmp = hps_tmpdir_create(o->out_dir, o->force, err);
    if (!tmp) return -1;
    inputs in = {0};
    feeder f = {.in = &in, .seed = o->shuffle_seed};
    output out = {.o = o, .tmp = tmp, .res = res, .t0 = hps_now()};
    pipeline p;
    int rc = inputs_open(&in, o, tmp, err);
    if (rc == 0) rc = o->shuffle ? shuffle_scatter(&f, tmp, o->shuffle_mem, err) : count_lines(&in, err);
    if (rc != 0) goto fail;
    if (o->shuffle) {
        f.shuffle = 1;
        for (int i = 0; i < in.n; i++) { /* the raw byte count, for the manifest */
            struct stat st;
            if (stat(in.paths[i], &st) == 0) in.bytes_in += (uint64_t)st.st_size;
        }
    } else {
        f.file = 0;
    }
    res->lines = in.lines;
    res->bytes_in = in.bytes_in;
    res->text_bytes = in.text_bytes;
    out.lines_total = in.lines;
    plan_outputs(&out, o, in.lines);
    out.hot = hps_hot_create(o->parse.schema.n_slots);
    pipeline_init(&p, o, &in);
    rc = run_lines(&p, &out, &f, err);
    pipeline_stop(&p);
    hps_hll_set *hll = hps_hll_create(o->parse.schema.n_slots);
    for (int i = 0; i < p.n_workers; i++) hps_hll_merge(hll, p.workers[i].hll);
    pipeline_free(&p); /* before the key lists, which take memory of their own */
    output_progress(&out, 1);
    if (rc == 0) rc = finish(&out, hll, &in, res, err);
    hps_hll_free(hll);
    if (rc == 0 && res->rows == 0) rc = no_rows(&in, res, err);
    if (rc != 0) goto fail;
    for (int i = 0; i < in.n; i++) /* the stdin spool is not part of the result */
        if (strcmp(o->inputs[i], "-") == 0) hps_tmpdir_unlink(tmp, in.paths[i]);
    if (o->shuffle) {
        char *d = hps_tmpdir_file(tmp, "shuffle");
        rmdir(d);
        free(d);
    }
    rc = hps_tmpdir_commit(tmp, o->force, err);
    if (rc != 0) goto fail;
    feeder_free(&f);
    inputs_free(&in);
    output_free(&out);
    return 0;
fail:
    hps_tmpdir_remove(tmp);
    feeder_free(&f);
    inputs_free(&in);
    output_free(&out);
    return -1;
}
