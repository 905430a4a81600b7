/* A dead rank named with its role.
 *
 * When a rank dies (SIGKILL, a crash), mpirun stops the survivors: it sends
 * them SIGTERM (then SIGKILL) and names the dead rank by number only.  So at
 * the start every rank learns the process ids of the ranks on its node and
 * formats, per rank, the line that names it with its role; the SIGTERM
 * handler then asks the kernel which of its node's ranks are gone
 * (kill(pid, 0) fails with ESRCH once mpirun reaped them) and the lowest
 * living rank of the node writes their lines.  A rank that leaves on its own
 * (an error it reported, or the end) first sets its flag in memory shared by
 * the node's ranks (an MPI shared window), so only ranks that vanished
 * without it are named.  Ranks on other nodes cannot be checked this way;
 * mpirun's own message names those by number.  The handler reads memory and
 * calls only kill, write and raise, all async-signal-safe. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/hps_io.h"
#include "dist/dist_internal.h"

#define LINE_MAX_ 192

static int w_size, w_rank;
static pid_t w_pid[HPS_DIST_MAX_RANKS];          /* 0: on another node */
static char w_line[HPS_DIST_MAX_RANKS][LINE_MAX_];
static int w_len[HPS_DIST_MAX_RANKS];

static volatile char *w_leaving; /* per world rank, shared by the node's ranks */
static MPI_Win w_win = MPI_WIN_NULL;
static MPI_Comm w_node = MPI_COMM_NULL;
static volatile sig_atomic_t w_quiet; /* all ranks reached the end together */

static int gone(int r) { return w_pid[r] > 0 && kill(w_pid[r], 0) == -1 && errno == ESRCH; }
static int dead(int r) { return gone(r) && !(w_leaving && w_leaving[r]); }

static void on_term(int sig)
{
    int saved = errno, lowest = !w_quiet;
    for (int r = 0; r < w_rank; r++)
        if (w_pid[r] > 0 && !gone(r)) lowest = 0;
    for (int r = 0; lowest && r < w_size; r++)
        if (r != w_rank && dead(r)) {
            ssize_t n = write(2, w_line[r], (size_t)w_len[r]);
            (void)n;
        }
    errno = saved;
    signal(sig, SIG_DFL);
    raise(sig);
}

void dist_watch(hps_dist *d)
{
    int pid = (int)getpid(), all[HPS_DIST_MAX_RANKS], local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &w_node);
    MPI_Comm_rank(w_node, &local);
    void *base;
    MPI_Aint bytes;
    int unit;
    if (MPI_Win_allocate_shared(local == 0 ? HPS_DIST_MAX_RANKS : 0, 1, MPI_INFO_NULL, w_node, &base,
                                &w_win) == MPI_SUCCESS &&
        MPI_Win_shared_query(w_win, 0, &bytes, &unit, &base) == MPI_SUCCESS &&
        bytes >= HPS_DIST_MAX_RANKS) {
        if (local == 0) memset(base, 0, HPS_DIST_MAX_RANKS);
        w_leaving = base;
    }
    MPI_Barrier(w_node); /* the flags are zero before anyone may set one */
    MPI_Allgather(&pid, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    w_size = d->size, w_rank = d->rank;
    for (int r = 0; r < d->size; r++) {
        char role[128];
        w_pid[r] = d->node[r] == d->node[d->rank] ? (pid_t)all[r] : 0;
        w_len[r] = snprintf(w_line[r], LINE_MAX_, "%s: error: rank %d (%s) stopped responding\n",
                            hps_progname(), r, dist_role_name(d, r, role, sizeof role));
        if (w_len[r] >= LINE_MAX_) w_len[r] = LINE_MAX_ - 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
}

void dist_watch_leave(void)
{
    if (w_leaving) w_leaving[w_rank] = 1;
}

void dist_watch_end(void)
{
    dist_watch_leave();
    /* collective: once it returns every rank of the node came here, so
     * none of them is to be named from now on (the shared flags go) */
    if (w_win != MPI_WIN_NULL) MPI_Win_free(&w_win);
    w_quiet = 1;
    w_leaving = NULL;
    if (w_node != MPI_COMM_NULL) MPI_Comm_free(&w_node);
}
