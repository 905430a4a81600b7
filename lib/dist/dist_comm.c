/* Starting and ending a distributed run, messages, and what a rank says when
 * the job is stopped under it. */
#include <dirent.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hps_io.h"
#include "dist/dist_internal.h"



/* When a rank dies, mpirun stops the others at once and names the dead rank
 * by number only (its SIGKILL leaves no rank time to speak); so the lead
 * says at the start which rank has which role, for that message to be read
 * against. */
static void say_roles(hps_dist *d)
{
    char role[128];
    size_t n = (size_t)snprintf(d->fail_msg, sizeof d->fail_msg, "%s: %d ranks:", hps_progname(),
                                d->size);
    for (int r = 0; r < d->size && n < sizeof d->fail_msg - 160; r++)
        n += (size_t)snprintf(d->fail_msg + n, sizeof d->fail_msg - n, "%s rank %d %s on %s",
                              r ? ";" : "", r, dist_role_name(d, r, role, sizeof role), d->host[r]);
    if (d->rank == d->worker_rank[0]) hps_log(2, "%s\n", d->fail_msg);
}

/* Each rank's host name, and a number per host, so that bytes to another
 * host can be counted. */
static void number_nodes(hps_dist *d)
{
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len;
    MPI_Get_processor_name(name, &len);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, d->host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
    for (int r = 0; r < d->size; r++) {
        d->host[r][MPI_MAX_PROCESSOR_NAME - 1] = '\0';
        d->node[r] = r;
        for (int q = 0; q < r; q++)
            if (strcmp(d->host[q], d->host[r]) == 0) {
                d->node[r] = d->node[q];
                break;
            }
    }
}

/* The one MPI error policy: an MPI call that fails ends the job, naming
 * this rank, its role and MPI's reason (no call site checks a result). */
static hps_dist *err_dist;

static void on_mpi_error(MPI_Comm *comm, int *code, ...)
{
    char why[MPI_MAX_ERROR_STRING], role[128] = "starting";
    int len = 0;
    (void)comm;
    MPI_Error_string(*code, why, &len);
    if (err_dist) dist_role_name(err_dist, err_dist->rank, role, sizeof role);
    fprintf(stderr, "%s: error: rank %d (%s): MPI: %s\n", hps_progname(), hps_dist_rank(err_dist),
            role, why);
    fflush(stderr);
    dist_watch_leave();
    MPI_Abort(MPI_COMM_WORLD, HPS_EXIT_RUNTIME);
}

/* A rank that waits (a server between requests, a worker for its rows or
 * its ack) spins in Open MPI's progress loop by default, holding a core.
 * On a node with no core to spare (a worker and a server on 2 cores, or
 * other jobs beside them) the spinning rank takes the core from the rank it
 * waits for: bench-fidelity measured a worker and a server 2-3x slower than
 * with yielding.  So ranks yield while idle, unless the user set it
 * (mpirun --mca mpi_yield_when_idle 0, or OMPI_MCA_mpi_yield_when_idle). */
static void wait_politely(void) { setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0); }

/* Open MPI binds each rank to one core by default (np <= 2; a socket
 * above), and every thread of the rank with it: a worker's pipeline, OpenMP
 * and OpenBLAS threads then share one core, and on a node with other jobs
 * the rank cannot move off a busy core.  bench-fidelity measured a worker
 * and a server on 2 cores 1.5x faster unbound.  So a rank bound by that
 * default (no --bind-to, no rankfile) runs on the cores mpirun's daemon, its
 * parent, may use; a binding the user asked for stays, and so does a
 * rankfile's (hps-plan --rankfile gives a unit of N threads N cores).  Every
 * thread of the process, since OpenBLAS starts its threads before main. */
static void unbind_default(void)
{
    const char *bound = getenv("OMPI_MCA_orte_bound_at_launch");
    if (!bound || strcmp(bound, "1") != 0 || getenv("OMPI_MCA_hwloc_base_binding_policy") ||
        getenv("OMPI_MCA_orte_rankfile"))
        return;
    cpu_set_t all;
    if (sched_getaffinity(getppid(), sizeof all, &all) != 0) return;
    DIR *tasks = opendir("/proc/self/task");
    for (struct dirent *e; tasks && (e = readdir(tasks));)
        if (e->d_name[0] != '.') sched_setaffinity((pid_t)atoi(e->d_name), sizeof all, &all);
    if (tasks) closedir(tasks);
}

static int cores_allowed(void)
{
    cpu_set_t mine;
    return sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : -1;
}

/* The setting as Open MPI runs it (MPI_T), for the "dist" record; -1 when
 * the MPI library has no such variable. */
static int yields_when_idle(void)
{
    int provided, n = 0, found = -1;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return -1;
    MPI_T_cvar_get_num(&n);
    for (int i = 0; i < n && found < 0; i++) {
        char name[128], desc[8];
        int name_len = sizeof name, desc_len = sizeof desc, verbosity, bind, scope, count;
        MPI_Datatype type;
        MPI_T_enum values;
        if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &values, desc, &desc_len, &bind,
                                &scope) != MPI_SUCCESS ||
            strcmp(name, "mpi_yield_when_idle") != 0 || type != MPI_C_BOOL)
            continue;
        MPI_T_cvar_handle h;
        _Bool on = 0;
        if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) != MPI_SUCCESS) break;
        if (MPI_T_cvar_read(h, &on) == MPI_SUCCESS) found = on;
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return found;
}

/* One process, MPI never started: a job of one worker, the lead, and no
 * servers, whose trainer keeps its own hooks (train_local.c). */
static hps_dist *dist_alone(const hps_dist_opts *o)
{
    hps_dist *d = hps_calloc(1, sizeof *d);
    d->o = *o;
    d->alone = 1;
    d->size = d->workers = d->n_stages = 1;
    d->roles[0] = (dist_role){.kind = ROLE_WORKER};
    d->me = &d->roles[0];
    d->wcomm = d->scomm = MPI_COMM_NULL;
    return d;
}

hps_dist *hps_dist_start(const char *plan_path, const hps_dist_opts *o, hps_error *err)
{
    if (!hps_dist_launched()) return dist_alone(o);
    hps_dist *d = hps_calloc(1, sizeof *d);
    d->o = *o;
    d->t_start = hps_now();
    d->wcomm = d->scomm = MPI_COMM_NULL;
    wait_politely();
    MPI_Init(NULL, NULL);
    unbind_default(); /* after MPI_Init: its threads too */
    d->yields = yields_when_idle();
    d->st.cores = cores_allowed();
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(on_mpi_error, &eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh); /* communicators split from it inherit it */
    MPI_Errhandler_free(&eh);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    if (!plan_path || d->size > HPS_DIST_MAX_RANKS) {
        if (!plan_path)
            hps_fail(err, HPS_EXIT_USAGE, "a run under mpirun needs --plan (the roles of its ranks)");
        else
            hps_fail(err, HPS_EXIT_USAGE, "mpirun started %d ranks; hps-train handles up to %d",
                     d->size, HPS_DIST_MAX_RANKS);
        free(d);
        return NULL;
    }
    if (dist_read_roles(d, plan_path, err)) {
        free(d);
        return NULL;
    }
    if (o->slow_rank >= d->size) {
        hps_fail(err, HPS_EXIT_USAGE, "--slowdown: rank %d is not among the job's %d ranks",
                 o->slow_rank, d->size);
        free(d);
        return NULL;
    }
    d->me = &d->roles[d->rank];
    err_dist = d;
    MPI_Comm_split(MPI_COMM_WORLD, d->me->kind == ROLE_WORKER ? 0 : 1, d->rank, &d->wcomm);
    dist_stages_place(d);
    number_nodes(d);
    say_roles(d);
    if (dist_watch(d, err)) {
        hps_dist_abort(d, err);
        return NULL;
    }
    return d;
}

int hps_dist_rank(const hps_dist *d)
{
    int rank = 0, on = 0;
    if (d) return d->rank;
    MPI_Initialized(&on);
    if (on) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}
int hps_dist_is_server(const hps_dist *d) { return d->me->kind == ROLE_SERVER; }
int hps_dist_is_lead(const hps_dist *d) { return d->rank == d->worker_rank[0]; }

void hps_dist_abort(hps_dist *d, const hps_error *err)
{
    char role[128];
    if (d->alone) return; /* no other rank waits: the caller reports */
    fprintf(stderr, "%s: error: rank %d (%s): %s\n", hps_progname(), d->rank,
            dist_role_name(d, d->rank, role, sizeof role), err->msg);
    fflush(stderr);
    dist_watch_leave();
    MPI_Abort(MPI_COMM_WORLD, err->code);
}

void hps_dist_end(hps_dist *d)
{
    int on = 0;
    MPI_Initialized(&on);
    if (on) {
        if (d && d->wcomm != MPI_COMM_NULL) MPI_Comm_free(&d->wcomm);
        if (d) dist_stages_free(d);
        if (d) dist_shard_free(d);
        if (d) dist_watch_end();
        MPI_Finalize();
    }
    if (!d) return;
    err_dist = NULL;
    for (int s = 0; d->req && s < d->servers; s++) {
        free(d->req[s].buf), free(d->push[s].buf), free(d->req_rows[s]);
    }
    free(d->req), free(d->push), free(d->req_rows), free(d->n_req_rows), free(d->cap_req_rows);
    free(d->xsend.buf), free(d->xrecv), free(d->xkeys), free(d->xgrad);
    free(d);
}

/* ---- messages ------------------------------------------------------------------ */

void dist_buf_add(dist_buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 256;
        b->buf = hps_realloc(b->buf, b->cap);
    }
    memcpy(b->buf + b->len, p, n);
    b->len += n;
}

static void count_sent(hps_dist *d, size_t n, int to)
{
    d->st.bytes_sent += (double)n;
    if (d->node[to] != d->node[d->rank]) d->st.bytes_cross_node += (double)n;
}

/* The probe's loopback (dist_probe.c): the job in this process, if any. */
static hps_dist *loop_dist;

void dist_loop(hps_dist *d) { loop_dist = d; }

/* In the loopback a message to the server is handled at once; the server's
 * answer waits for the worker's receive. */
static char *loop_copy(const void *p, size_t n)
{
    char *msg = hps_malloc(n + 1);
    if (n) memcpy(msg, p, n); /* an ack, or an empty push, has no bytes (and may be NULL) */
    return msg;
}

static void loop_deliver(hps_dist *d, const void *p, size_t n, int to, int tag)
{
    if (to != d->server_rank[0]) {
        free(d->loop_msg);
        d->loop_msg = loop_copy(p, n);
        d->loop_len = n;
        return;
    }
    char *msg = loop_copy(p, n);
    hps_error err;
    if (dist_server_handle(d, d->loop, d->loop_state, msg, n, d->rank, tag, &err)) {
        hps_log(1, "%s: error: the exchange probe's server: %s\n", hps_progname(), err.msg);
        abort(); /* a bug: the probe sends only what a worker sends */
    }
}

void dist_send(hps_dist *d, const void *p, size_t n, int to, int tag)
{
    count_sent(d, n, to);
    if (d->loop) loop_deliver(d, p, n, to, tag);
    else MPI_Send(p, (int)n, MPI_BYTE, to, tag, MPI_COMM_WORLD);
}

void dist_isend(hps_dist *d, const void *p, size_t n, int to, int tag, MPI_Request *r)
{
    count_sent(d, n, to);
    if (d->loop) {
        loop_deliver(d, p, n, to, tag);
        *r = MPI_REQUEST_NULL;
    } else {
        MPI_Isend(p, (int)n, MPI_BYTE, to, tag, MPI_COMM_WORLD, r);
    }
}

void dist_waitall(hps_dist *d, int n, MPI_Request *r)
{
    if (!d->loop) MPI_Waitall(n, r, MPI_STATUSES_IGNORE);
}

char *dist_recv(int from, int tag, size_t *n, int *source, int *got_tag)
{
    if (loop_dist) { /* the server answered already */
        char *buf = loop_dist->loop_msg ? loop_dist->loop_msg : hps_malloc(1);
        *n = loop_dist->loop_msg ? loop_dist->loop_len : 0;
        loop_dist->loop_msg = NULL;
        if (source) *source = from;
        if (got_tag) *got_tag = tag;
        return buf;
    }
    MPI_Status st;
    int count;
    MPI_Probe(from, tag, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_BYTE, &count);
    char *buf = hps_malloc((size_t)count + 1);
    MPI_Recv(buf, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    *n = (size_t)count;
    if (source) *source = st.MPI_SOURCE;
    if (got_tag) *got_tag = st.MPI_TAG;
    return buf;
}

/* ---- collectives among the workers ----------------------------------------------- */

dist_group dist_rows_group(const hps_dist *d)
{
    if (d->n_stages < 2) return (dist_group){.comm = d->wcomm, .n = d->workers, .me = d->me->index};
    int s = d->me->stage;
    return (dist_group){.comm = d->scomm, .n = d->stage_n[s], .me = d->sidx, .w = d->stage_w[s]};
}

int dist_alltoall(hps_dist *d, const dist_buf *parts, char **in, size_t *cap, int64_t *ends, hps_error *err)
{
    dist_group g = dist_rows_group(d);
    int W = g.n;
    int64_t out_sizes[HPS_DIST_MAX_RANKS] = {0}, in_sizes[HPS_DIST_MAX_RANKS] = {0}, sent = 0, got = 0;
    for (int w = 0; w < W; w++) out_sizes[w] = (int64_t)parts[w].len, sent += out_sizes[w];
    /* the sizes first, as 64-bit: a part too large for MPI's int counts
     * fails on every worker alike, none left waiting in the exchange */
    MPI_Alltoall(out_sizes, 1, MPI_INT64_T, in_sizes, 1, MPI_INT64_T, g.comm);
    for (int w = 0; w < W; w++) got += in_sizes[w], ends[w] = got;
    int big = sent > INT_MAX || got > INT_MAX, any = 0;
    MPI_Allreduce(&big, &any, 1, MPI_INT, MPI_MAX, g.comm);
    if (any)
        return hps_fail(err, HPS_EXIT_RUNTIME,
                        "the workers' exchange of a step's rows is %lld bytes or more on one of them, too "
                        "many to send at once (at most %d)",
                        (long long)(sent > got ? sent : got), INT_MAX);
    int scount[HPS_DIST_MAX_RANKS], sdisp[HPS_DIST_MAX_RANKS], rcount[HPS_DIST_MAX_RANKS], rdisp[HPS_DIST_MAX_RANKS];
    char *out = hps_malloc((size_t)sent + 1);
    for (int w = 0, at = 0; w < W; w++) {
        if (parts[w].len) memcpy(out + at, parts[w].buf, parts[w].len); /* a rank with no rows may have no buffer */
        scount[w] = (int)parts[w].len, sdisp[w] = at, at += scount[w];
        rcount[w] = (int)in_sizes[w], rdisp[w] = (int)(ends[w] - in_sizes[w]);
        if (w != g.me) count_sent(d, parts[w].len, d->worker_rank[dist_group_worker(&g, w)]);
    }
    if ((size_t)got + 1 > *cap) {
        *cap = (size_t)got * 2 + 1;
        *in = hps_realloc(*in, *cap);
    }
    MPI_Alltoallv(out, scount, sdisp, MPI_BYTE, *in, rcount, rdisp, MPI_BYTE, g.comm);
    free(out);
    return 0;
}
