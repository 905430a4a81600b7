/* Checkpoints of a distributed run (hps-train(1), DISTRIBUTED).
 *
 * Every rank writes its own checkpoint, DIR/rank-R/ckpt-STEP.hpsckpt (the
 * one-process format: a worker's dense weights and optimizer state, a
 * server's tables).  Then the ranks agree that all of them succeeded (an
 * allreduce), and only then the lead worker replaces DIR/committed, a small
 * JSON file naming the step, the rank count and the workers' shares.  A kill
 * at any moment leaves the previous committed step in force: each rank keeps
 * its two newest files, and at most one of them is newer than the commit.
 * The temporary of a commit a kill interrupted (committed.tmp.XXXXXX) goes
 * at the next commit. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/hps_io.h"
#include "core/hps_json.h"
#include "dist/dist_internal.h"

static int make_dir(const char *dir, hps_error *err)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: cannot create: %s", dir, strerror(errno));
    return 0;
}

/* DIR/rank-R, created with DIR. */
static int rank_dir(const hps_dist *d, const char *ckpt_dir, char *dir, size_t n, hps_error *err)
{
    snprintf(dir, n, "%s/rank-%d", ckpt_dir, d->rank);
    return make_dir(ckpt_dir, err);
}

static int write_committed(hps_dist *d, uint64_t step, const char *ckpt_dir, hps_error *err)
{
    json_t *shares = json_array();
    for (int w = 0; w < d->workers; w++) json_array_append_new(shares, json_real(d->share[w]));
    json_t *o = json_pack("{s:s, s:i, s:I, s:i, s:o}", "format", "hps-dist-checkpoint", "version",
                          1, "step", (json_int_t)step, "ranks", d->size, "shares", shares);
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    char path[4200];
    snprintf(path, sizeof path, "%s/committed", ckpt_dir);
    size_t n = strlen(text);
    text = hps_realloc(text, n + 2);
    strcpy(text + n, "\n");
    hps_out_remove_stale(path); /* a commit a kill interrupted left its temporary */
    int rc = hps_write_atomic(path, text, n + 1, err);
    free(text);
    return rc;
}

/* After this rank wrote its part (ok) or failed: the step is committed only
 * when every rank's part is written. */
static int commit(hps_dist *d, int ok, uint64_t step, const char *ckpt_dir, hps_error *err)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok && !all)
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "%s: another rank could not write its checkpoint of step %llu; the last "
                        "committed one stays in force",
                        ckpt_dir, (unsigned long long)step);
    if (!ok) return -1;
    if (d->me->kind == ROLE_WORKER && hps_dist_is_lead(d)) return write_committed(d, step, ckpt_dir, err);
    return 0;
}

/* A worker's hook, called by every worker at the same step; the lead first
 * asks the servers to save (each does once it applied that step). */
int dist_save(void *ctx, hps_trainer *t, uint64_t step, hps_error *err)
{
    hps_dist *d = ctx;
    if (hps_dist_is_lead(d))
        for (int s = 0; s < d->servers; s++) dist_send(d, NULL, 0, d->server_rank[s], TAG_SAVE);
    char dir[4200];
    int ok = rank_dir(d, d->ckpt_dir, dir, sizeof dir, err) == 0 && hps_trainer_save(t, dir, err) == 0;
    return commit(d, ok, step, d->ckpt_dir, err);
}

int dist_save_server(hps_dist *d, dist_server *sv, hps_error *err)
{
    char dir[4200];
    int ok = rank_dir(d, sv->o.ckpt_dir, dir, sizeof dir, err) == 0 &&
             hps_tables_save(sv->m, sv->tables, sv->plan_digest, sv->step, sv->o.seed, sv->day, dir, err) == 0;
    return commit(d, ok, sv->step, sv->o.ckpt_dir, err);
}

static int read_committed(hps_dist *d, const char *path, uint64_t *step, hps_error *err)
{
    json_t *root;
    if (hps_json_load(path, &root, err)) return -1;
    long long s = 0, ranks = 0;
    json_t *shares = json_object_get(root, "shares");
    int rc = hps_json_int(root, "step", HPS_REQUIRED, 0, INT64_MAX, &s, path, err) ||
             hps_json_int(root, "ranks", HPS_REQUIRED, 1, HPS_DIST_MAX_RANKS, &ranks, path, err);
    if (rc == 0 && (ranks != d->size || json_array_size(shares) != (size_t)d->workers))
        rc = hps_fail(err, HPS_EXIT_USAGE,
                      "%s: a checkpoint of %lld ranks; resume it with mpirun -np %lld and the same plan",
                      path, ranks, ranks);
    for (int w = 0; rc == 0 && w < d->workers; w++) {
        double v = json_number_value(json_array_get(shares, (size_t)w));
        if (v > 0) d->share[w] = v;
    }
    *step = (uint64_t)s;
    json_decref(root);
    return rc ? -1 : 0;
}

/* One process's checkpoints (DIR/latest, lib/train/train_ckpt.c) are not
 * a job's: the ranks cannot resume them, and starting afresh there would
 * mix two runs. */
static int one_process_dir(const char *ckpt_dir, hps_error *err)
{
    char latest[4200];
    snprintf(latest, sizeof latest, "%s/latest", ckpt_dir);
    if (access(latest, F_OK) != 0) return 0;
    return hps_fail(err, HPS_EXIT_USAGE,
                    "%s: holds the checkpoints of one process (%s), not of an mpirun job: resume it "
                    "without mpirun, or use another directory",
                    ckpt_dir, latest);
}

/* This rank's file of the committed step, or *found = 0 without a commit. */
static int committed_file(hps_dist *d, const char *ckpt_dir, char *path, size_t n, int *found,
                          hps_error *err)
{
    uint64_t step;
    snprintf(path, n, "%s/committed", ckpt_dir);
    *found = access(path, F_OK) == 0;
    if (!*found) return one_process_dir(ckpt_dir, err);
    if (read_committed(d, path, &step, err)) return -1;
    snprintf(path, n, "%s/rank-%d/ckpt-%012llu.hpsckpt", ckpt_dir, d->rank, (unsigned long long)step);
    return 0;
}

/* Without --resume, nothing to load. */
int dist_resume(void *ctx, hps_trainer *t, int *found, hps_error *err)
{
    hps_dist *d = ctx;
    char path[4300];
    if (!d->resume) return 0;
    if (committed_file(d, d->ckpt_dir, path, sizeof path, found, err)) return -1;
    return *found ? hps_trainer_load_file(t, path, err) : 0;
}

int dist_resume_server(hps_dist *d, dist_server *sv, int *found, hps_error *err)
{
    char path[4300];
    if (committed_file(d, sv->o.ckpt_dir, path, sizeof path, found, err)) return -1;
    if (!*found) return 0;
    if (hps_tables_load_file(sv->m, sv->tables, sv->plan_digest, sv->o.seed, path, 0, &sv->step, &sv->day, err))
        return -1;
    for (int l = 0; l < sv->m->n_layers; l++)
        if (sv->tables[l]) hps_table_start_day(sv->tables[l], sv->day, 0);
    return 0;
}

/* DIR/committed's step, this rank's file of it: the job that made DIR had
 * this plan's ranks (read_committed says so otherwise). */
int dist_day_file(hps_dist *d, const char *from, char *path, size_t n, hps_error *err)
{
    int found = 0;
    if (committed_file(d, from, path, n, &found, err)) return -1;
    if (!found)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "--continue-from: %s: holds no committed checkpoint of an mpirun job (%s/committed)",
                        from, from);
    return 0;
}

int dist_continue(void *ctx, hps_trainer *t, hps_error *err)
{
    hps_dist *d = ctx;
    char path[4300];
    return dist_day_file(d, d->continue_from, path, sizeof path, err) ? -1 : hps_trainer_continue(t, path, err);
}

/* As hps_trainer_continue does to one process's tables: the next day, and
 * the rows untouched for --expire-after-days removed. */
int dist_continue_server(hps_dist *d, dist_server *sv, hps_error *err)
{
    char path[4300];
    if (dist_day_file(d, sv->o.continue_from, path, sizeof path, err) ||
        hps_tables_load_file(sv->m, sv->tables, sv->plan_digest, sv->o.seed, path, 1, &sv->step, &sv->day, err))
        return -1;
    hps_tables_next_day(sv->m, sv->tables, ++sv->day, sv->o.expire_after_days, 1);
    return 0;
}
