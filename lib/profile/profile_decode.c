/* The shard reader's CPU beside the step (hps-profile(5), read_cpu_ms).
 *
 * hps-train's reader decodes and checks each block (zstd, every dense value
 * for NaN or infinity) in a thread of its own while the step runs; the
 * caller only fills its batch from the decoded block.  read_ms times the
 * caller's wait; the decoding thread's CPU is not in it, yet it takes a core
 * share from the step wherever the step's threads fill the unit's cores
 * (hps-plan(1), COST MODEL).  It is timed as CPU time, so a busy machine
 * stretches it less than it does wall time: the caller's CPU reading batches
 * with the blocks decoded in its own thread (ahead 0), less its CPU reading
 * them as hps-train does (decoded ahead in the background), is what the
 * background thread does for a batch.  Each pass reads the same batches of
 * the first training shard; the median of the rounds' differences counts. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/hps_shard.h"
#include "profile/hps_profile.h"

#define DECODE_ROUNDS 5
#define DECODE_BLOCKS 8

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The caller's CPU seconds for `batches` batches of B read from path with
 * `ahead` blocks decoded in the background (0: in the caller); the shard
 * read again from its start when it ends.  -1 on error. */
static double pass_cpu_s(const char *path, int ahead, hps_batch *b, int B, int batches, hps_error *err)
{
    hps_shard_read_opts o = {.ahead = ahead, .batches = 1};
    hps_shard_reader *r = hps_shard_open(path, &o, err);
    if (!r) return -1;
    double t0 = thread_cpu_s();
    for (int i = 0; i < batches; i++) {
        int got = hps_shard_read(r, b, B, err);
        if (got == 0 && (hps_shard_seek(r, 0, err) || (got = hps_shard_read(r, b, B, err)) == 0))
            got = hps_fail(err, HPS_EXIT_RUNTIME, "%s: no rows", path);
        if (got < 0) {
            hps_shard_close(r);
            return -1;
        }
    }
    double s = thread_cpu_s() - t0;
    hps_shard_close(r);
    return s;
}

int hps_profile_read_cpu_ms(const char *data, int B, int min_batches, double *ms, hps_error *err)
{
    hps_manifest *m = hps_manifest_load(data, err);
    if (!m) return -1;
    int first = 0;
    while (first < m->n_shards && strcmp(m->shards[first].role, "train") != 0) first++;
    if (first == m->n_shards) {
        hps_manifest_free(m);
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: no training shard", data);
    }
    /* whole blocks, at least DECODE_BLOCKS of them where the shard has as
     * many: the caller decodes a block where a batch first reaches it, so a
     * pass of few blocks would count a part-read one whole */
    const hps_manifest_shard *sh = &m->shards[first];
    uint64_t blocks = sh->blocks < DECODE_BLOCKS ? sh->blocks : DECODE_BLOCKS;
    uint64_t rows = sh->blocks ? sh->rows * blocks / sh->blocks : sh->rows;
    int batches = (int)((rows + (uint64_t)B - 1) / (uint64_t)B);
    if (batches < min_batches) batches = min_batches;
    if (batches < 1) batches = 1;
    char *path = hps_manifest_shard_path(m, first);
    const hps_schema *s = &m->schema;
    hps_batch *b = hps_batch_create(B, s->n_dense, s->n_slots, (int64_t)B * (s->n_slots + 1), 1);
    double diff[DECODE_ROUNDS];
    int rc = 0;
    for (int k = 0; k < DECODE_ROUNDS && rc == 0; k++) {
        double in_caller = pass_cpu_s(path, 0, b, B, batches, err);
        double beside = in_caller < 0 ? -1 : pass_cpu_s(path, HPS_SHARD_AHEAD, b, B, batches, err);
        if (beside < 0) rc = -1;
        else diff[k] = (in_caller - beside) * 1e3 / batches;
    }
    if (rc == 0) {
        double med = hps_median(diff, DECODE_ROUNDS);
        *ms = med > 0 ? med : 0;
    }
    hps_batch_free(b);
    free(path);
    hps_manifest_free(m);
    return rc;
}
