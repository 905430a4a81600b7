/* hps-train built without Open MPI (make MPI=0): one process only.  Under
 * mpirun every rank stops at the start saying so; the other entry points
 * are never reached without a started job. */
#include <stdlib.h>

#include "dist/hps_dist.h"

hps_dist *hps_dist_start(const char *plan_path, const hps_dist_opts *o, hps_error *err)
{
    (void)plan_path, (void)o;
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

void hps_dist_end(hps_dist *d) { (void)d; }

/* Nothing to time: this hps-profile has no worker or server code. */
json_t *hps_dist_probe_exchange(const hps_model *m, hps_source *src, int batch, int threads, int steps,
                                hps_error *err)
{
    (void)m, (void)src, (void)batch, (void)threads, (void)steps, (void)err;
    return json_null();
}

/* Unreachable: hps_dist_start never returns a job. */
static void no_job(void) { abort(); }
int hps_dist_is_server(const hps_dist *d) { (void)d, no_job(); return 0; }
int hps_dist_is_lead(const hps_dist *d) { (void)d, no_job(); return 0; }
int hps_dist_stages(const hps_dist *d) { (void)d, no_job(); return 1; }
int hps_dist_check_stages(hps_dist *d, const hps_model *m, const plan_file *p, int eval,
                          hps_error *err)
{
    (void)d, (void)m, (void)p, (void)eval, (void)err, no_job();
    return -1;
}
void hps_dist_attach(hps_dist *d, hps_trainer *t, const hps_model *m, const hps_train_opts *o)
{
    (void)d, (void)t, (void)m, (void)o, no_job();
}
int hps_dist_finish(hps_dist *d, hps_trainer *t, hps_error *err) { (void)d, (void)t, (void)err, no_job(); return -1; }
int hps_dist_gather_model(hps_dist *d, hps_trainer *t, hps_error *err) { (void)d, (void)t, (void)err, no_job(); return -1; }
int hps_dist_serve(hps_dist *d, const hps_model *m, const plan_file *plan,
                   const hps_train_opts *o, hps_error *err)
{
    (void)d, (void)m, (void)plan, (void)o, (void)err, no_job();
    return -1;
}
void hps_dist_abort(hps_dist *d, const hps_error *err) { (void)d, (void)err, no_job(); }
