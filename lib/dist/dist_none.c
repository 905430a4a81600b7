/* hps-train built without Open MPI (make MPI=0): one process only.  Under
 * mpirun every rank stops at the start saying so; alone, hps_dist_start
 * gives the one-process job, whose entry points return at once. */
#include <stdlib.h>

#include "dist/hps_dist.h"

/* One process is the only job such a build runs. */
struct hps_dist {
    int alone; /* always 1: a struct needs a member */
};

hps_dist *hps_dist_start(const char *plan_path, const hps_dist_opts *o, hps_error *err)
{
    (void)plan_path, (void)o;
    if (!hps_dist_launched()) {
        hps_dist *d = hps_calloc(1, sizeof *d);
        d->alone = 1;
        return d;
    }
    hps_fail(err, HPS_EXIT_USAGE, "this hps-train was built without Open MPI (make MPI=0): it "
                                  "cannot run as a rank of an mpirun job");
    return NULL;
}

/* The rank mpirun gave this process: only rank 0 reports the refusal. */
int hps_dist_rank(const hps_dist *d)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    (void)d;
    return r ? atoi(r) : 0;
}

void hps_dist_end(hps_dist *d) { free(d); }

/* Nothing to time: this hps-profile has no worker or server code. */
json_t *hps_dist_probe_exchange(const hps_model *m, hps_source *src, int batch, int threads, int steps,
                                hps_error *err)
{
    (void)m, (void)src, (void)batch, (void)threads, (void)steps, (void)err;
    return json_null();
}

/* One process: the lead and only worker, with every stage and its tables;
 * the trainer keeps its own hooks (train_local.c). */
int hps_dist_is_server(const hps_dist *d) { (void)d; return 0; }
int hps_dist_is_lead(const hps_dist *d) { (void)d; return 1; }
int hps_dist_stages(const hps_dist *d) { (void)d; return 1; }
int hps_dist_check_stages(hps_dist *d, const hps_model *m, const plan_file *p, int eval,
                          hps_error *err)
{
    (void)d, (void)m, (void)p, (void)eval, (void)err;
    return 0;
}
void hps_dist_attach(hps_dist *d, hps_trainer *t, const hps_model *m, const hps_train_opts *o)
{
    (void)d, (void)t, (void)m, (void)o;
}
int hps_dist_finish(hps_dist *d, hps_trainer *t, hps_error *err) { (void)d, (void)t, (void)err; return 0; }
int hps_dist_gather_model(hps_dist *d, hps_trainer *t, hps_error *err) { (void)d, (void)t, (void)err; return 0; }
/* No other rank waits: the caller reports. */
void hps_dist_abort(hps_dist *d, const hps_error *err) { (void)d, (void)err; }

/* Unreachable: one process is never a server. */
int hps_dist_serve(hps_dist *d, const hps_model *m, const plan_file *plan,
                   const hps_train_opts *o, hps_error *err)
{
    (void)d, (void)m, (void)plan, (void)o, (void)err;
    abort();
    return -1;
}
