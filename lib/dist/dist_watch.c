/* A dead rank named with its role.
 *
 * When a rank dies (SIGKILL, a crash), mpirun stops the survivors: it sends
 * them SIGTERM (then SIGKILL) and names the dead rank by number only.  So at
 * the start every rank learns the process ids of the ranks on its node and
 * formats, per rank, the line that names it with its role; the SIGTERM
 * handler then asks the kernel which of its node's ranks are gone
 * (kill(pid, 0) fails with ESRCH once mpirun reaped them) and the lowest
 * living rank of the node writes their lines.  Ranks on other nodes cannot
 * be checked this way; mpirun's own message names those by number.  The
 * handler calls only kill, write and raise, all async-signal-safe. */
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

static int gone(int r) { return w_pid[r] > 0 && kill(w_pid[r], 0) == -1 && errno == ESRCH; }

static void on_term(int sig)
{
    int saved = errno, lowest = 1;
    for (int r = 0; r < w_rank; r++)
        if (w_pid[r] > 0 && !gone(r)) lowest = 0;
    for (int r = 0; lowest && r < w_size; r++)
        if (r != w_rank && gone(r)) {
            ssize_t n = write(2, w_line[r], (size_t)w_len[r]);
            (void)n;
        }
    errno = saved;
    signal(sig, SIG_DFL);
    raise(sig);
}

void dist_watch(hps_dist *d)
{
    int pid = (int)getpid(), all[HPS_DIST_MAX_RANKS];
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
