/* A dead rank named with its role and host, on any host.
 *
 * When a rank dies, mpirun names it by number only, and when a host's link
 * goes down nobody may notice for minutes (TCP retries; MPI calls simply
 * wait).  So every rank keeps a TCP connection to every other rank, beside
 * MPI, and a thread watches them:
 *   - a closed connection (the kernel closes a dead process's sockets at
 *     once) is a dead rank, unless that rank said first that it leaves on
 *     its own (an error it reported, or the end): byte 'L';
 *   - every rank sends a heartbeat byte each WATCH_BEAT_S; a connection
 *     silent for WATCH_SILENT_S is a rank that can no longer be reached
 *     (its host or its link is down).
 * On either, a rank tells the others which rank it lost ('X' and the
 * rank's number in a byte), the lowest rank still alive in its view writes
 * the line naming the dead rank, its role and its host, and every rank that
 * heard of it exits; so every survivor stops within WATCH_SILENT_S and a
 * beat, and the line is said once.
 *
 * Addresses: each rank listens on its host's address (its host name as
 * resolved there, else its first non-loopback IPv4 address) on a port of
 * the kernel's choosing; the addresses go round with MPI_Allgather. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/hps_io.h"
#include "dist/dist_internal.h"

#define WATCH_BEAT_S 0.5
#define WATCH_SILENT_S 4.0
#define LINE_MAX_ 256

static int w_size, w_rank;
static int w_fd[HPS_DIST_MAX_RANKS];            /* -1: this rank, or closed */
static double w_heard[HPS_DIST_MAX_RANKS];      /* when each peer was last heard */
static char w_left[HPS_DIST_MAX_RANKS];         /* said 'L' */
static char w_gone[HPS_DIST_MAX_RANKS];         /* its connection closed */
static char w_lost[HPS_DIST_MAX_RANKS];         /* gone, as this rank or another one found */
static char w_next_is_rank[HPS_DIST_MAX_RANKS]; /* its last byte was 'X' */
static char w_line[HPS_DIST_MAX_RANKS][LINE_MAX_];
static pthread_t w_thread;
static int w_running;
static volatile sig_atomic_t w_stop, w_named;

static void say_all(const char *msg, size_t n)
{
    for (int r = 0; r < w_size; r++)
        if (w_fd[r] >= 0 && !w_gone[r]) {
            ssize_t k = send(w_fd[r], msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)k;
        }
}

/* Rank `dead` is gone (w_lost): the others hear it, the lowest rank alive
 * in this rank's view says it, and this rank stops. */
static void stop_for(int dead)
{
    char msg[2] = {'X', (char)dead};
    int lowest = 1;
    for (int r = 0; r < w_rank; r++)
        if (!w_lost[r] && !w_left[r]) lowest = 0;
    w_named = 1;
    say_all(msg, sizeof msg);
    if (lowest) {
        ssize_t n = write(2, w_line[dead], strlen(w_line[dead]));
        (void)n;
    }
    /* mpirun ends the job when the first rank exits, and may drop output
     * still on its way from another host: the rank with the line exits
     * first, the others a moment later */
    struct timespec ts = {0, lowest ? 200000000L : 600000000L};
    nanosleep(&ts, NULL);
    _exit(HPS_EXIT_RUNTIME);
}

/* What peer r sent; 0 when it is still alive. */
static int read_peer(int r)
{
    char buf[64];
    ssize_t n = recv(w_fd[r], buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (n <= 0) {
        w_gone[r] = 1; /* closed at the end, so that no other thread sends to a reused fd */
        return w_left[r] ? 0 : 1;
    }
    w_heard[r] = hps_now();
    for (ssize_t i = 0; i < n; i++) {
        if (w_next_is_rank[r]) { /* another rank lost this one */
            int dead = (unsigned char)buf[i];
            w_next_is_rank[r] = 0;
            if (dead < w_size && dead != w_rank) w_lost[dead] = 1, stop_for(dead);
            continue;
        }
        if (buf[i] == 'L') w_left[r] = 1;
        if (buf[i] == 'X') w_next_is_rank[r] = 1;
    }
    return 0;
}

static void *watch_loop(void *arg)
{
    (void)arg;
    struct pollfd pf[HPS_DIST_MAX_RANKS];
    int who[HPS_DIST_MAX_RANKS];
    double beat = 0;
    while (!w_stop) {
        int n = 0;
        for (int r = 0; r < w_size; r++)
            if (w_fd[r] >= 0 && !w_gone[r]) pf[n] = (struct pollfd){.fd = w_fd[r], .events = POLLIN}, who[n++] = r;
        poll(pf, (nfds_t)n, (int)(WATCH_BEAT_S * 1000 / 2));
        if (w_stop) break;
        int first = -1;
        for (int i = 0; i < n; i++)
            if (pf[i].revents && read_peer(who[i])) w_lost[who[i]] = 1;
        double t = hps_now();
        for (int r = 0; r < w_size; r++) {
            if (r != w_rank && !w_left[r] && t - w_heard[r] > WATCH_SILENT_S) w_lost[r] = 1;
            if (w_lost[r] && first < 0) first = r;
        }
        if (first >= 0) stop_for(first);
        if (t - beat >= WATCH_BEAT_S) say_all("H", 1), beat = t;
    }
    return NULL;
}

/* mpirun stops the survivors of a dead rank with SIGTERM: give the watch
 * (which sees the closed connection at the same moment) time to name it. */
static void on_term(int sig)
{
    struct timespec ts = {0, 20 * 1000 * 1000};
    for (int i = 0; i < 40 && w_running && !w_named; i++) nanosleep(&ts, NULL);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The IPv4 address other hosts reach this one at. */
static uint32_t my_address(const char *host)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    uint32_t a = 0;
    if (getaddrinfo(host, NULL, &hints, &ai) == 0 && ai) {
        a = ((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr;
        freeaddrinfo(ai);
    }
    if (a && (ntohl(a) >> 24) != 127) return a;
    struct ifaddrs *ifs, *i;
    if (getifaddrs(&ifs) == 0) {
        for (i = ifs; i; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !(i->ifa_flags & IFF_LOOPBACK) &&
                (i->ifa_flags & IFF_UP)) {
                a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
                break;
            }
        freeifaddrs(ifs);
    }
    return a ? a : htonl(INADDR_LOOPBACK);
}

static int connect_to(uint32_t addr, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = addr};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

/* Each rank connects to the ranks above it, and accepts the ranks below
 * (a connection waits in the listen queue, so no order can deadlock). */
static int connect_all(hps_dist *d, int lfd, const uint32_t *addr, const uint16_t *port, hps_error *err)
{
    for (int r = d->rank + 1; r < d->size; r++) {
        int32_t me = d->rank;
        if ((w_fd[r] = connect_to(addr[r], port[r])) < 0 ||
            send(w_fd[r], &me, sizeof me, MSG_NOSIGNAL) != (ssize_t)sizeof me)
            return hps_fail(err, HPS_EXIT_RUNTIME, "the watch cannot reach rank %d on %s: %s", r,
                            d->host[r], strerror(errno));
    }
    for (int i = 0; i < d->rank; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        int32_t from = -1;
        if (fd < 0 || recv(fd, &from, sizeof from, MSG_WAITALL) != (ssize_t)sizeof from || from < 0 ||
            from >= d->rank || w_fd[from] >= 0) {
            if (fd >= 0) close(fd);
            return hps_fail(err, HPS_EXIT_RUNTIME, "the watch got a stray connection");
        }
        w_fd[from] = fd;
    }
    return 0;
}

int dist_watch(hps_dist *d, hps_error *err)
{
    w_size = d->size, w_rank = d->rank;
    for (int r = 0; r < d->size; r++) {
        char role[128];
        w_fd[r] = -1;
        snprintf(w_line[r], LINE_MAX_, "%s: error: rank %d (%s) on host %s stopped responding\n",
                 hps_progname(), r, dist_role_name(d, r, role, sizeof role), d->host[r]);
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof sa;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int ok = lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(lfd, HPS_DIST_MAX_RANKS) == 0 &&
             getsockname(lfd, (struct sockaddr *)&sa, &len) == 0;
    uint32_t addr[HPS_DIST_MAX_RANKS], mine_a = my_address(d->host[d->rank]);
    uint16_t port[HPS_DIST_MAX_RANKS], mine_p = ok ? sa.sin_port : 0;
    MPI_Allgather(&mine_a, 1, MPI_UINT32_T, addr, 1, MPI_UINT32_T, MPI_COMM_WORLD);
    MPI_Allgather(&mine_p, 1, MPI_UINT16_T, port, 1, MPI_UINT16_T, MPI_COMM_WORLD);
    int rc = 0;
    for (int r = 0; r < d->size && !rc; r++)
        if (!port[r]) rc = hps_fail(err, HPS_EXIT_RUNTIME, "rank %d on %s cannot listen for the watch", r, d->host[r]);
    if (!rc) rc = connect_all(d, lfd, addr, port, err);
    if (lfd >= 0) close(lfd);
    if (rc) return -1;
    double t = hps_now();
    for (int r = 0; r < d->size; r++) {
        w_heard[r] = t;
        if (w_fd[r] >= 0) fcntl(w_fd[r], F_SETFL, fcntl(w_fd[r], F_GETFL) | O_NONBLOCK);
    }
    if (pthread_create(&w_thread, NULL, watch_loop, NULL) != 0)
        return hps_fail(err, HPS_EXIT_RUNTIME, "cannot start the watch thread");
    w_running = 1;
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_term;
    sigemptyset(&act.sa_mask);
    sigaction(SIGTERM, &act, NULL);
    return 0;
}

void dist_watch_leave(void)
{
    say_all("L", 1);
}

void dist_watch_end(void)
{
    dist_watch_leave();
    if (w_running) {
        w_stop = 1;
        pthread_join(w_thread, NULL);
        w_running = 0;
    }
    for (int r = 0; r < w_size; r++)
        if (w_fd[r] >= 0) close(w_fd[r]), w_fd[r] = -1;
}
