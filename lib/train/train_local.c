/* One process: the trainer's own hooks (hps_train_dist, hps_train.h).
 *
 * The trainer calls the same hooks every step whether it runs alone or as a
 * worker of a distributed run (lib/dist); alone, there is nothing to fetch,
 * sum or wait for: those hooks return at once (as llm.c's collectives do for
 * one process), the rows are updated in this process's tables, and the
 * checkpoints are the trainer's own files. */
#include <unistd.h>

#include "train/train_internal.h"

static void slice(void *ctx, int n, int *lo, int *hi)
{
    (void)ctx;
    *lo = 0, *hi = n;
}

/* The tables hold the rows' values: remote_rows is 0, so no load touches a
 * row to fetch. */
static int fetch_rows(void *ctx, const hps_row_key *rows, const uint32_t *lookups, int64_t n, float *out,
                      int peek, hps_error *err)
{
    (void)ctx, (void)rows, (void)lookups, (void)n, (void)out, (void)peek, (void)err;
    return 0;
}

static int update_rows(void *ctx, int layer, hps_table *table, hps_sparse_grad *const *grads, int n,
                       hps_sparse_grad **sum, hps_error *err)
{
    hps_trainer *t = ctx;
    (void)layer, (void)err;
    hps_table_apply(table, grads, n, sum, t->o.optim.lr_sparse, t->o.optim.adagrad_eps);
    return 0;
}

static int step_end(void *ctx, hps_error *err)
{
    (void)ctx, (void)err;
    return 0;
}

/* Nobody to sum with: the gradients and the loss are the whole step's. */
static int reduce_step(void *ctx, float *grads, size_t n, double *loss, int rows, double compute_s,
                       hps_error *err)
{
    (void)ctx, (void)grads, (void)n, (void)loss, (void)rows, (void)compute_s, (void)err;
    return 0;
}

static int save(void *ctx, hps_trainer *t, uint64_t step, hps_error *err)
{
    (void)ctx, (void)step;
    return hps_trainer_save(t, t->o.ckpt_dir, err);
}

/* Without --resume, never mix two runs' checkpoints in one directory. */
static int resume(void *ctx, hps_trainer *t, int *found, hps_error *err)
{
    (void)ctx;
    if (t->o.resume) return hps_trainer_load(t, t->o.ckpt_dir, found, err);
    char latest[4200];
    snprintf(latest, sizeof latest, "%s/latest", t->o.ckpt_dir);
    if (access(latest, F_OK) == 0)
        return hps_fail(err, HPS_EXIT_USAGE,
                        "%s: holds checkpoints of an earlier run: pass --resume to continue it, "
                        "or use another directory",
                        t->o.ckpt_dir);
    return 0;
}

/* Every layer is trained here. */
static int gather_params(void *ctx, hps_trainer *t, hps_error *err)
{
    (void)ctx, (void)t, (void)err;
    return 0;
}

void train_local_hooks(hps_trainer *t)
{
    t->local = (hps_train_dist){.ctx = t, .slice = slice, .fetch_rows = fetch_rows,
                                .update_rows = update_rows, .step_end = step_end,
                                .reduce_step = reduce_step, .save = save, .resume = resume,
                                .gather_params = gather_params, .remote_rows = 0, .in_process = 1};
    t->hooks = &t->local;
    t->remote_rows = 0;
}
