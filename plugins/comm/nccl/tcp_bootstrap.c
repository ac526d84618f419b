/* The NCCL id exchange of a torchrun-style launch: rank 0 hands one blob to every rank.
 *
 * ncclCommInitRank needs the same ncclUniqueId (128 bytes, made by rank 0) on every
 * rank before any NCCL connection exists. Rank 0 listens on one port of every interface
 * (an IPv6 socket that also accepts IPv4, or plain IPv4 on a host without IPv6) and
 * answers the ranks one after another; the others connect to MASTER_ADDR, retrying with
 * a growing pause while rank 0 is not up yet or the name does not resolve yet. Every
 * step runs against one deadline (timeout_s from the start), so a rank that never
 * starts, a wrong address or a firewall ends in an error that says which, not a hang.
 *
 * Protocol, integers as big-endian u32: a rank sends {magic, version, rank, world};
 * rank 0 checks it and answers {magic, version} followed by the blob. The magic tells
 * both sides from any other service that listens on, or connects to, the port. A
 * connection that sends no greeting within HELLO_LIMIT_S is dropped, so a stray client
 * cannot hold up the launch.
 *
 * Deliberately left out: authentication and encryption (like MASTER_ADDR itself, the id
 * only says where rank 0's NCCL bootstrap listens, on a network the launch trusts), and
 * anything beyond this one broadcast.
 */
#include "tcp_bootstrap.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "monotonic.h"

#define WIRE_MAGIC 0x47424e49u   /* "GBNI": gearbox NCCL id */
#define WIRE_VERSION 1u
#define HELLO_BYTES 16           /* magic, version, rank, world */
#define REPLY_HEADER_BYTES 8     /* magic, version */
#define HELLO_LIMIT_S 5.0
#define CONNECT_FLOOR_S 0.1      /* the least time one connection attempt is given */

static void put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void sleep_s(double seconds)
{
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Waits until `fd` is ready for `events` or `deadline` passes: 1 ready (or failed, which
 * the next send or recv reports), 0 at the deadline, -1 when poll itself fails (errno). */
static int wait_ready(int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - monotonic_s();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left > 3600.0 ? 3600000 : (int)(left * 1000.0) + 1);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* Sends `out` or, when it is NULL, receives into `in`, exactly `bytes` on the non-blocking
 * socket before `deadline`; 0, or -1 with errno (ETIMEDOUT at the deadline, ECONNRESET
 * when the peer closed the connection before all of a receive came). */
static int transfer_all(int fd, const void *out, void *in, size_t bytes, double deadline)
{
    const char *from = out;
    char *into = in;
    size_t done = 0;
    while (done < bytes) {
        int ready = wait_ready(fd, out ? POLLOUT : POLLIN, deadline);
        if (ready <= 0) {
            if (ready == 0)
                errno = ETIMEDOUT;
            return -1;
        }
        ssize_t n = out ? send(fd, from + done, bytes - done, MSG_NOSIGNAL)
                        : recv(fd, into + done, bytes - done, 0);
        if (n == 0 && !out) {
            errno = ECONNRESET;
            return -1;
        }
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

/* ---- rank 0 ---------------------------------------------------------------------------- */

/* Binds `fd` to `addr` and listens on it: fd, or -1 with errno (fd closed). */
static int bind_listen(int fd, const struct sockaddr *addr, socklen_t len, int backlog)
{
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, addr, len) == 0 && listen(fd, backlog) == 0)
        return fd;
    int err = errno;
    close(fd);
    errno = err;
    return -1;
}

/* A listening socket on `port` of every interface: IPv6 that accepts IPv4 too, or IPv4
 * alone where the host has no IPv6. -1 with errno on failure. */
static int listen_any(int port, int backlog)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        const int zero = 0;
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                                  .sin6_addr = in6addr_any};
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (bind_listen(fd, (struct sockaddr *)&a6, sizeof a6, backlog) >= 0)
            return fd;
        if (errno != EADDRNOTAVAIL && errno != EAFNOSUPPORT)
            return -1;
    } else if (errno != EAFNOSUPPORT) {
        return -1;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_ANY)};
    return bind_listen(fd, (struct sockaddr *)&a4, sizeof a4, backlog);
}

/* accept() failures that concern one connection, not the listener (accept(2), Linux). */
static int accept_error_is_transient(int err)
{
    switch (err) {
    case EINTR: case EAGAIN: case ECONNABORTED: case EPROTO: case ENETDOWN: case ENOPROTOOPT:
    case EHOSTDOWN: case ENONET: case EHOSTUNREACH: case EOPNOTSUPP: case ENETUNREACH:
        return 1;
    }
    return err == EWOULDBLOCK;
}

/* Greets one connection and sends it the blob. Returns the rank served, 0 when the
 * connection was not a rank of a gearbox launch and was dropped, or -1 (error set) when
 * the launch itself is inconsistent or the rank went away. */
static int serve_peer(const gb_host *host, int fd, int world, const unsigned char *served,
                      const void *blob, size_t bytes, double deadline)
{
    unsigned char hello[HELLO_BYTES];
    double hello_deadline = monotonic_s() + HELLO_LIMIT_S;
    if (transfer_all(fd, NULL, hello, sizeof hello,
                     hello_deadline < deadline ? hello_deadline : deadline)) {
        host->log(host, GB_LOG_WARN, "rank 0: dropped a connection that sent no greeting (%s)",
                  strerror(errno));
        return 0;
    }
    if (get_u32(hello) != WIRE_MAGIC) {
        host->log(host, GB_LOG_WARN, "rank 0: dropped a connection that is not a gearbox rank");
        return 0;
    }
    uint32_t version = get_u32(hello + 4), rank = get_u32(hello + 8);
    uint32_t peer_world = get_u32(hello + 12);
    if (version != WIRE_VERSION) {
        host->set_error(host, "rank 0: a peer speaks id-exchange version %u, this build %u: run "
                        "the same gearbox build on every rank", version, WIRE_VERSION);
        return -1;
    }
    if (peer_world != (uint32_t)world) {
        host->set_error(host, "rank %u has WORLD_SIZE = %u but rank 0 has WORLD_SIZE = %d: every "
                        "rank needs the same WORLD_SIZE", rank, peer_world, world);
        return -1;
    }
    if (rank == 0 || rank >= (uint32_t)world) {
        host->set_error(host, "a peer says RANK = %u, outside 1 .. %d of WORLD_SIZE = %d", rank,
                        world - 1, world);
        return -1;
    }
    if (served[rank]) {
        host->set_error(host, "two processes say RANK = %u: every rank needs its own RANK", rank);
        return -1;
    }
    unsigned char header[REPLY_HEADER_BYTES];
    put_u32(header, WIRE_MAGIC);
    put_u32(header + 4, WIRE_VERSION);
    if (transfer_all(fd, header, NULL, sizeof header, deadline) ||
        transfer_all(fd, blob, NULL, bytes, deadline)) {
        host->set_error(host, "rank 0: sending the NCCL id to rank %u failed: %s (did rank %u "
                        "exit?)", rank, strerror(errno), rank);
        return -1;
    }
    return (int)rank;
}

/* The error for ranks that never connected: which ones, and where they should have. */
static void report_missing(const gb_host *host, const unsigned char *served, int world,
                           int port, double timeout_s)
{
    char list[128] = "";
    size_t used = 0;
    int missing = 0, listed = 0;
    for (int r = 1; r < world; r++) {
        if (served[r])
            continue;
        missing++;
        if (used + 16 < sizeof list) {
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%d",
                                     listed ? ", " : "", r);
            listed++;
        }
    }
    host->set_error(host, "rank 0: %d of %d other ranks (RANK %s%s) did not connect to port %d "
                    "(MASTER_PORT) within timeout_s = %g s: they did not start, crashed, or "
                    "cannot reach this host (check MASTER_ADDR on those ranks and firewalls)",
                    missing, world - 1, list, listed < missing ? ", ..." : "", port, timeout_s);
}

int tcp_bootstrap_serve(const gb_host *host, int port, int world, const void *blob,
                        size_t bytes, double timeout_s)
{
    const double deadline = monotonic_s() + timeout_s;
    int listener = listen_any(port, world < SOMAXCONN ? world : SOMAXCONN);
    if (listener < 0) {
        int err = errno;
        host->set_error(host, "rank 0 cannot listen on port %d (MASTER_PORT): %s%s", port,
                        strerror(err), err == EADDRINUSE ? "; another process holds it: choose "
                        "a free MASTER_PORT" : "");
        return -1;
    }
    unsigned char *served = host->alloc(host, (size_t)world);
    if (!served) {
        close(listener);
        host->set_error(host, "out of memory");
        return -1;
    }
    memset(served, 0, (size_t)world);
    int waiting = world - 1, status = 0;
    while (waiting > 0 && status == 0) {
        int ready = wait_ready(listener, POLLIN, deadline);
        if (ready <= 0) {
            if (ready == 0)
                report_missing(host, served, world, port, timeout_s);
            else
                host->set_error(host, "rank 0: waiting for connections on port %d failed: %s",
                                port, strerror(errno));
            status = -1;
            break;
        }
        int peer = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (peer < 0) {
            if (accept_error_is_transient(errno))
                continue;
            host->set_error(host, "rank 0: accepting a connection on port %d failed: %s", port,
                            strerror(errno));
            status = -1;
            break;
        }
        int rank = serve_peer(host, peer, world, served, blob, bytes, deadline);
        close(peer);
        if (rank < 0) {
            status = -1;
        } else if (rank > 0) {
            served[rank] = 1;
            waiting--;
        }
    }
    host->free(host, served);
    close(listener);
    return status;
}

/* ---- ranks 1 .. world-1 ---------------------------------------------------------------- */

/* One attempt to connect to addr:port before `deadline`. Returns the connected socket,
 * or -1 with the reason in `why` (rank 0 not listening yet, name not resolving yet...).
 * The first resolver failure is logged at once, so a misspelt MASTER_ADDR shows before
 * the timeout. */
static int connect_once(const gb_host *host, const char *addr, int port, double deadline,
                        char *why, size_t why_size, int *resolve_warned)
{
    char service[8];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *list = NULL;
    int gai = getaddrinfo(addr, service, &hints, &list);
    if (gai != 0) {
        snprintf(why, why_size, "MASTER_ADDR = %s does not resolve: %s", addr,
                 gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
        if (!*resolve_warned)
            host->log(host, GB_LOG_WARN, "%s; retrying until timeout_s", why);
        *resolve_warned = 1;
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = list; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            snprintf(why, why_size, "socket: %s", strerror(errno));
            continue;
        }
        int err = 0;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            err = errno;
            if (err == EINPROGRESS) {
                /* an attempt started just before the deadline still gets its answer */
                double floor = monotonic_s() + CONNECT_FLOOR_S;
                int ready = wait_ready(fd, POLLOUT, deadline > floor ? deadline : floor);
                socklen_t len = sizeof err;
                if (ready > 0)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                else
                    err = ready == 0 ? ETIMEDOUT : errno;
            }
        }
        if (err) {
            snprintf(why, why_size, "%s", strerror(err));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(list);
    return fd;
}

/* Greets rank 0 on the connected socket and receives the blob. */
static int exchange(const gb_host *host, int fd, const char *addr, int port, int rank,
                    int world, void *blob, size_t bytes, double deadline)
{
    unsigned char hello[HELLO_BYTES], header[REPLY_HEADER_BYTES];
    put_u32(hello, WIRE_MAGIC);
    put_u32(hello + 4, WIRE_VERSION);
    put_u32(hello + 8, (uint32_t)rank);
    put_u32(hello + 12, (uint32_t)world);
    if (transfer_all(fd, hello, NULL, sizeof hello, deadline) ||
        transfer_all(fd, NULL, header, sizeof header, deadline)) {
        host->set_error(host, "rank %d: %s:%d (MASTER_ADDR:MASTER_PORT) accepted the connection "
                        "but sent no NCCL id (%s): rank 0's own error says why, or another "
                        "service holds that port", rank, addr, port, strerror(errno));
        return -1;
    }
    if (get_u32(header) != WIRE_MAGIC || get_u32(header + 4) != WIRE_VERSION) {
        host->set_error(host, "rank %d: what answers at %s:%d (MASTER_ADDR:MASTER_PORT) is not "
                        "rank 0 of a launch of this gearbox build: check MASTER_ADDR and "
                        "MASTER_PORT", rank, addr, port);
        return -1;
    }
    if (transfer_all(fd, NULL, blob, bytes, deadline)) {
        host->set_error(host, "rank %d: the NCCL id from rank 0 at %s:%d was cut short: %s", rank,
                        addr, port, strerror(errno));
        return -1;
    }
    return 0;
}

int tcp_bootstrap_fetch(const gb_host *host, const char *addr, int port, int rank, int world,
                        void *blob, size_t bytes, double timeout_s)
{
    const double deadline = monotonic_s() + timeout_s;
    char why[192] = "no attempt";
    int resolve_warned = 0;
    for (double pause = 0.05;; pause = pause < 0.5 ? 2 * pause : 1.0) {
        int fd = connect_once(host, addr, port, deadline, why, sizeof why, &resolve_warned);
        if (fd >= 0) {
            int status = exchange(host, fd, addr, port, rank, world, blob, bytes, deadline);
            close(fd);
            return status;
        }
        double left = deadline - monotonic_s();
        if (left <= 0)
            break;
        sleep_s(pause < left ? pause : left);
        if (monotonic_s() >= deadline)
            break;
    }
    host->set_error(host, "rank %d: no answer from rank 0 at %s:%d (MASTER_ADDR:MASTER_PORT) "
                    "within timeout_s = %g s (last attempt: %s): check that rank 0 started and "
                    "that every rank has the same MASTER_ADDR and MASTER_PORT, or raise "
                    "[comm] timeout_s", rank, addr, port, timeout_s, why);
    return -1;
}
