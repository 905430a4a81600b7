/* hps-profile's exchange probe (hps-profile(5), "exchange"): what a worker
 * and its server compute for the two round trips of a step, timed on this
 * device.  The worker's own hooks (dist_worker.c) and the server's handler
 * (dist_server.c) run in one process, their messages handed over in memory
 * (dist_comm.c's loopback), so the figures are hps-train's code under
 * mpirun less the transfers and the waits for the other rank, which the
 * cluster's NIC and latency price (hps-plan(1), COST MODEL). */
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"
#include "net/hps_batch.h"
#include "profile/hps_profile.h"

/* Per step: the worker's packing and unpacking, the server's gathering and
 * applying, the rows it served and the bytes both sent. */
typedef struct {
    double *worker, *server, *rows, *bytes;
} probe_steps;

static void loop_job(hps_dist *d, dist_server *sv, dist_server_state *ss)
{
    d->rank = 0, d->size = 2, d->workers = 1, d->servers = 1;
    d->roles[0] = (dist_role){.kind = ROLE_WORKER};
    d->roles[1] = (dist_role){.kind = ROLE_SERVER};
    d->worker_rank[0] = 0, d->server_rank[0] = 1;
    d->me = &d->roles[0];
    d->share[0] = 1;
    d->n_stages = 1;
    d->loop = sv, d->loop_state = ss;
    dist_loop(d);
}

/* One step from src (wrapping at its end), the counters' growth into s[i]. */
static int probe_step(hps_trainer *t, hps_dist *d, hps_source *src, hps_batch *b, int B, probe_steps *s,
                      int i, hps_error *err)
{
    int got = src->read(src, b, B, err);
    if (got == 0 && (src->seek(src, 0, err) || (got = src->read(src, b, B, err)) == 0))
        return hps_fail(err, HPS_EXIT_RUNTIME, "%s: no rows", src->name);
    if (got < 0) return -1;
    dist_stats was = d->st;
    double loss;
    if (hps_trainer_step(t, b, &loss, err)) return -1;
    if (i < 0) return 0; /* warm-up */
    double server = d->st.serve_s - was.serve_s + d->st.apply_s - was.apply_s;
    s->server[i] = server;
    s->worker[i] = d->st.fetch_s - was.fetch_s + d->st.push_s - was.push_s - server;
    s->rows[i] = d->st.rows_served - was.rows_served;
    s->bytes[i] = d->st.bytes_sent - was.bytes_sent;
    return 0;
}

static json_t *probe_json(probe_steps *s, int steps)
{
    hps_profile_exchange_out x = {.rows = hps_median(s->rows, steps), .bytes = hps_median(s->bytes, steps),
                                  .worker_ms = hps_profile_timing_of(s->worker, steps),
                                  .server_ms = hps_profile_timing_of(s->server, steps)};
    return hps_profile_exchange_json(&x);
}

json_t *hps_dist_probe_exchange(const hps_model *m, hps_source *src, int batch, int threads, int steps,
                                hps_error *err)
{
    plan_file plan;
    hps_train_plan_single(m, &plan);
    plan.batch = batch;
    hps_train_opts o = hps_train_opts_default();
    o.threads = threads;
    hps_trainer *t = hps_trainer_create(m, &plan, &o, err);
    if (!t) return NULL;
    hps_dist *d = hps_calloc(1, sizeof *d);
    dist_server sv;
    dist_server_state ss = {0};
    dist_server_create(&sv, d, 0, m, &plan, &o); /* one server: every table */
    loop_job(d, &sv, &ss);
    hps_dist_attach(d, t, m, &o);
    hps_batch *b = hps_batch_create(batch, m->n_dense, m->n_slots, (int64_t)batch * (m->n_slots + 1), 1);
    probe_steps s;
    double *all = hps_calloc(4 * (size_t)steps, sizeof *all);
    s = (probe_steps){all, all + steps, all + 2 * steps, all + 3 * steps};
    int rc = src->seek(src, 0, err);
    for (int i = -2; rc == 0 && i < steps; i++) rc = probe_step(t, d, src, b, batch, &s, i, err);
    json_t *out = rc == 0 ? probe_json(&s, steps) : NULL;
    free(all);
    hps_batch_free(b);
    dist_loop(NULL);
    dist_server_state_free(d, &ss);
    dist_server_free(&sv);
    free(d->loop_msg);
    hps_trainer_free(t);
    hps_dist_end(d);
    return out;
}
