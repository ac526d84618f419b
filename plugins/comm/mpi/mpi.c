/* Communication over MPI (Open MPI): data-parallel collectives on host memory.
 *
 * Every collective is a non-blocking MPI call on a duplicate of MPI_COMM_WORLD:
 * all_reduce_start posts MPI_Iallreduce in place (AVG is SUM, then a division by the world
 * size when the request completes), broadcast posts MPI_Ibcast and barrier MPI_Ibarrier.
 * The sharded collectives (ABI 1.8): reduce_scatter_start posts MPI_Ireduce_scatter_block
 * (in place, MPI_IN_PLACE leaves the rank's shard at the start of the buffer, and
 * completion moves it to its place, after an average's division), all_gather
 * MPI_Iallgather in place, of bytes, and waits for it like a broadcast.
 * Waiting polls the requests with sched_yield() between polls, up to [comm] timeout_s;
 * on 2 ranks sharing 2 cores this costs about what MPI_Wait costs. Open MPI is asked for
 * its ring all-reduce (see prefer_ring_all_reduce).
 *
 * Progress. Open MPI moves a non-blocking collective forward only while the process is
 * inside an MPI call; it has no thread of its own doing so. Every collective entry of this
 * plugin therefore first tests all outstanding requests (progress()), so the all-reduces
 * the core starts during backward advance each time it starts the next one.
 *
 * Naming the rank at fault. Every collective gets a sequence number, the same on every
 * rank because MPI requires all ranks to call collectives in the same order. On starting
 * one, a rank sends its number to every peer (8 bytes on a second duplicate of
 * MPI_COMM_WORLD; one send per peer in flight, the latest number goes next) and keeps one
 * receive posted per peer, so each rank knows the latest collective every peer has
 * reached. When a collective times out, the peers whose latest number is below its own
 * are named with their hosts (exchanged at create()). A rank that reached the collective
 * and then stopped (SIGSTOP, a debugger, a stuck transfer thread) is found another way:
 * while waiting, a rank repeats its notice every heartbeat interval (a tenth of
 * timeout_s, at most a second) as a sign of life, and a timeout with every rank arrived
 * names the peers silent for several intervals.
 *
 * Ending the job. After a collective failed or timed out, or with collectives still
 * outstanding, destroy() calls MPI_Abort: the other ranks are blocked in (or will block
 * in) a collective this rank will never finish, and MPI_Finalize would wait for them
 * forever. MPI_Abort makes mpirun take every rank down and exit non-zero. It is the one
 * place a gearbox plugin ends the process. Otherwise destroy() releases the instance.
 * A rank that dies (killed, crashed) never reaches the timeout: mpirun notices the exit
 * within about a second and ends the whole job itself.
 *
 * MPI is initialised with MPI_THREAD_FUNNELED unless the process already did so (then it
 * is reused and not finalised here); all calls must come from the thread that created the
 * instance. MPI can be initialised only once per process, and a process under mpirun must
 * call MPI_Finalize before it exits, so MPI lives from the first create() to the exit of
 * the process, finalised by an exit handler (instances can come and go in between, as in
 * `gearbox test-plugin`). A process not started by mpirun is a world of 1 (Open MPI's
 * singleton mode).
 *
 * Left out: device memory (device = cuda uses comm/nccl), bf16/f16 reductions, counts
 * above INT_MAX in one collective, and surviving the loss of a rank.
 */
#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/toolkit/comm_checks.h"
#include "gearbox/comm.h"

enum { OPT_TIMEOUT_S };

static const gb_option mpi_options[] = {
    [OPT_TIMEOUT_S] = {"timeout_s", GB_OPT_FLOAT, "300", 0.1, 86400, NULL,
                       "seconds a collective may wait for the other ranks before the run "
                       "fails naming the ranks that did not arrive"},
};

/* The tag of sequence-number notices on their own communicator. */
#define NOTICE_TAG 1
/* Bytes per MPI_Ibcast: MPI counts are int. */
#define BROADCAST_CHUNK ((size_t)1 << 30)
/* Peers named one by one in a timeout message; the rest are counted. */
#define MAX_NAMED_PEERS 4

typedef enum collective_kind {
    ALL_REDUCE, BROADCAST, BARRIER, REDUCE_SCATTER, ALL_GATHER
} collective_kind;

/* One posted collective: what the timeout message describes and what completion does. */
typedef struct collective {
    collective_kind kind;
    uint64_t seq;             /* its sequence number (1 for the first collective) */
    gb_comm_request id;       /* ALL_REDUCE, REDUCE_SCATTER: the core's request; 0 when the
                                 slot is free */
    void *buf;                /* REDUCE_SCATTER: where MPI leaves this rank's shard */
    void *dest;               /* REDUCE_SCATTER: where the shard belongs */
    int64_t count;            /* ALL_REDUCE, REDUCE_SCATTER (the shard): elements;
                                 BROADCAST, ALL_GATHER (each rank's part): bytes */
    gb_dtype dtype;
    gb_reduce_op op;
    int root;                 /* BROADCAST */
} collective;

/* Outstanding collectives: the core's all-reduces in slots [0, GB_COMM_MAX_INFLIGHT),
 * the blocking broadcast or barrier of the moment in slot BLOCKING_SLOT. */
#define BLOCKING_SLOT GB_COMM_MAX_INFLIGHT
#define N_SLOTS (GB_COMM_MAX_INFLIGHT + 1)

/* What this rank knows of another, with the buffers of its notice traffic. */
typedef struct peer {
    uint64_t seen;            /* the latest sequence number it announced; 0 for none */
    double heard;             /* MPI_Wtime() of its latest notice (or of create()) */
    uint64_t incoming;        /* receive buffer of the posted notice receive */
    uint64_t outgoing;        /* the number last sent to it (buffer of the send) */
} peer;

typedef struct mpi_comm {
    const gb_host *host;
    gb_device_ctx device;     /* the device given to create(): collectives queue on its
                                 compute stream (gb_device_run_host), as comm.h orders */
    gb_comm_request pending[GB_COMM_MAX_INFLIGHT];   /* requests started and not waited */
    int n_pending;            /* for the caller's bookkeeping, kept at call time */
    MPI_Comm comm;            /* collectives */
    MPI_Comm notices;         /* sequence-number notices */
    int rank, world;
    double timeout_s;
    double beat_s;            /* heartbeat interval while waiting */
    double last_beat;         /* MPI_Wtime() of this rank's latest notices */
    int failed;               /* a collective failed: everything is refused, destroy aborts */
    uint64_t seq;             /* collectives started so far */
    gb_comm_request next_id;
    int n_inflight;           /* all-reduce slots in use */
    collective slots[N_SLOTS];
    MPI_Request requests[N_SLOTS];
    MPI_Status statuses[N_SLOTS];
    /* per rank, one block: */
    MPI_Request *recv_requests;   /* (world) notice receives; MPI_REQUEST_NULL for self */
    MPI_Request *send_requests;   /* (world) notice sends in flight */
    peer *peers;                  /* (world) */
    int *indices;                 /* (world) scratch for MPI_Testsome */
    char (*hosts)[MPI_MAX_PROCESSOR_NAME];   /* (world) processor names */
} mpi_comm;

/* Set with any instance's `failed`; read at exit. */
static int a_collective_failed;

/* ---- errors ------------------------------------------------------------------------ */

static void mark_failed(mpi_comm *m)
{
    m->failed = 1;
    a_collective_failed = 1;
}

/* Reports a failed MPI call and marks the instance failed (destroy will abort). */
static gb_status mpi_failed(mpi_comm *m, int rc, const char *call)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error code %d", rc);
    mark_failed(m);
    m->host->set_error(m->host, "%s failed: %s", call, text);
    return GB_ERR_SYSTEM;
}

/* The error of the first failed request when MPI_Testsome says MPI_ERR_IN_STATUS. */
static int status_error(int rc, const MPI_Status *statuses, int n)
{
    if (rc != MPI_ERR_IN_STATUS)
        return rc;
    for (int k = 0; k < n; k++)
        if (statuses[k].MPI_ERROR != MPI_SUCCESS)
            return statuses[k].MPI_ERROR;
    return rc;
}

static gb_status refuse_after_failure(mpi_comm *m)
{
    m->host->set_error(m->host, "an earlier collective failed, so the ranks are out of step; "
                                "the run cannot continue");
    return GB_ERR_SYSTEM;
}

/* ---- progress ---------------------------------------------------------------------- */

/* What completing a collective takes beyond MPI: the division of an average, and the
 * move of an in-place reduce-scatter's shard to its place. */
static void finish(mpi_comm *m, collective *c)
{
    if ((c->kind == ALL_REDUCE || c->kind == REDUCE_SCATTER) && c->op == GB_REDUCE_AVG) {
        float *x = c->buf;
        const float world = (float)m->world;
        for (int64_t i = 0; i < c->count; i++)
            x[i] /= world;
    }
    if (c->kind == REDUCE_SCATTER && c->dest != c->buf)
        memmove(c->dest, c->buf, (size_t)c->count * gb_dtype_size(c->dtype));
}

/* Posts the receive of peer p's next notice. */
static gb_status post_notice_receive(mpi_comm *m, int p)
{
    int rc = MPI_Irecv(&m->peers[p].incoming, 1, MPI_UINT64_T, p, NOTICE_TAG, m->notices,
                       &m->recv_requests[p]);
    return rc == MPI_SUCCESS ? GB_OK : mpi_failed(m, rc, "MPI_Irecv of a sequence number");
}

/* Records every notice that has arrived and re-posts the receives. */
static gb_status receive_notices(mpi_comm *m)
{
    for (;;) {
        int n = 0;
        int rc = MPI_Testsome(m->world, m->recv_requests, &n, m->indices, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_failed(m, rc, "MPI_Testsome on the sequence-number receives");
        if (n == MPI_UNDEFINED || n == 0)
            return GB_OK;
        for (int k = 0; k < n; k++) {
            int p = m->indices[k];
            m->peers[p].seen = m->peers[p].incoming;
            m->peers[p].heard = MPI_Wtime();
            gb_status st = post_notice_receive(m, p);
            if (st != GB_OK)
                return st;
        }
    }
}

/* Tells every peer the latest collective this rank has reached, where the previous notice
 * to it has gone out (a peer that does not receive gets the latest number later). With
 * `heartbeat` the number goes out even when the peer has it already. */
static gb_status send_notices(mpi_comm *m, int heartbeat)
{
    int n = 0;
    int rc = MPI_Testsome(m->world, m->send_requests, &n, m->indices, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS)
        return mpi_failed(m, rc, "MPI_Testsome on the sequence-number sends");
    for (int p = 0; p < m->world; p++) {
        if (p == m->rank || m->send_requests[p] != MPI_REQUEST_NULL ||
            (m->peers[p].outgoing == m->seq && !heartbeat))
            continue;
        m->peers[p].outgoing = m->seq;
        rc = MPI_Isend(&m->peers[p].outgoing, 1, MPI_UINT64_T, p, NOTICE_TAG, m->notices,
                       &m->send_requests[p]);
        if (rc != MPI_SUCCESS)
            return mpi_failed(m, rc, "MPI_Isend of a sequence number");
    }
    return GB_OK;
}

/* Moves every outstanding request forward, completes those that are done (dividing for
 * AVG) and exchanges notices. Called on entry to every collective and in every poll. */
static gb_status progress(mpi_comm *m)
{
    int n = 0;
    int done[N_SLOTS];
    int rc = MPI_Testsome(N_SLOTS, m->requests, &n, done, m->statuses);
    if (rc != MPI_SUCCESS)
        return mpi_failed(m, status_error(rc, m->statuses, n),
                          "a collective (MPI_Testsome)");
    for (int k = 0; n != MPI_UNDEFINED && k < n; k++)
        finish(m, &m->slots[done[k]]);
    gb_status st = receive_notices(m);
    return st != GB_OK ? st : send_notices(m, 0);
}

/* ---- timeouts ---------------------------------------------------------------------- */

/* "all-reduce #12 (4096 f32)" */
static void describe(const collective *c, char *out, size_t size)
{
    switch (c->kind) {
    case ALL_REDUCE:
        snprintf(out, size, "all-reduce #%llu (%lld %s)", (unsigned long long)c->seq,
                 (long long)c->count, gb_dtype_name(c->dtype));
        break;
    case BROADCAST:
        snprintf(out, size, "broadcast #%llu (%lld bytes from rank %d)",
                 (unsigned long long)c->seq, (long long)c->count, c->root);
        break;
    case BARRIER:
        snprintf(out, size, "barrier #%llu", (unsigned long long)c->seq);
        break;
    case REDUCE_SCATTER:
        snprintf(out, size, "reduce-scatter #%llu (%lld %s per rank)", (unsigned long long)c->seq,
                 (long long)c->count, gb_dtype_name(c->dtype));
        break;
    case ALL_GATHER:
        snprintf(out, size, "all-gather #%llu (%lld bytes per rank)", (unsigned long long)c->seq,
                 (long long)c->count);
        break;
    }
}

/* Appends "rank 1 (host node2, last seen at #11)" for each peer behind `seq`; returns how
 * many peers are behind. */
static int name_peers_behind(const mpi_comm *m, uint64_t seq, char *out, size_t size)
{
    int behind = 0;
    size_t len = strlen(out);
    for (int p = 0; p < m->world; p++) {
        if (p == m->rank || m->peers[p].seen >= seq)
            continue;
        if (++behind > MAX_NAMED_PEERS || len >= size)
            continue;
        char seen[48];
        if (m->peers[p].seen == 0)
            snprintf(seen, sizeof seen, "no collective seen yet");
        else
            snprintf(seen, sizeof seen, "last seen at #%llu",
                     (unsigned long long)m->peers[p].seen);
        len += (size_t)snprintf(out + len, size - len, "%srank %d (host %s, %s)",
                                behind > 1 ? ", " : "", p, m->hosts[p], seen);
    }
    if (behind > MAX_NAMED_PEERS && len < size)
        snprintf(out + len, size - len, " and %d more", behind - MAX_NAMED_PEERS);
    return behind;
}

/* Appends "rank 1 (host node2, silent for 4.1 s)" for each peer whose last notice is older
 * than three heartbeats; returns how many are. */
static int name_silent_peers(const mpi_comm *m, char *out, size_t size)
{
    int silent = 0;
    size_t len = strlen(out);
    double now = MPI_Wtime();
    for (int p = 0; p < m->world; p++) {
        if (p == m->rank || now - m->peers[p].heard <= 3.0 * m->beat_s)
            continue;
        if (++silent > MAX_NAMED_PEERS || len >= size)
            continue;
        len += (size_t)snprintf(out + len, size - len, "%srank %d (host %s, silent for %.1f s)",
                                silent > 1 ? ", " : "", p, m->hosts[p], now - m->peers[p].heard);
    }
    if (silent > MAX_NAMED_PEERS && len < size)
        snprintf(out + len, size - len, " and %d more", silent - MAX_NAMED_PEERS);
    return silent;
}

/* Fails the run with a message naming the collective and the ranks that did not reach it. */
static gb_status timed_out(mpi_comm *m, const collective *c)
{
    /* the latest notices decide who is named */
    (void)receive_notices(m);
    mark_failed(m);
    char what[96], who[640] = "";
    describe(c, what, sizeof what);
    int behind = name_peers_behind(m, c->seq, who, sizeof who);
    int silent = behind ? 0 : name_silent_peers(m, who, sizeof who);
    if (silent > 0)
        m->host->set_error(m->host,
                           "%s did not complete within timeout_s = %g: every rank reached it, "
                           "but %s %s stopped answering; %s stopped (SIGSTOP, a debugger) or "
                           "stuck. Raise [comm] timeout_s if %s only slow.",
                           what, m->timeout_s, who, silent == 1 ? "has" : "have",
                           silent == 1 ? "it is" : "they are", silent == 1 ? "it is" : "they are");
    else if (behind == 0)
        m->host->set_error(m->host,
                           "%s did not complete within timeout_s = %g although every rank "
                           "has reached it: a rank hangs inside it or the transfer is stuck "
                           "(network or MPI). Raise [comm] timeout_s if it is only slow.",
                           what, m->timeout_s);
    else
        m->host->set_error(m->host,
                           "%s did not complete within timeout_s = %g: %s %s not reached it; "
                           "%s died or %s. Raise [comm] timeout_s if %s only slow.",
                           what, m->timeout_s, who, behind == 1 ? "has" : "have",
                           behind == 1 ? "it has" : "they have", behind == 1 ? "hangs" : "hang",
                           behind == 1 ? "it is" : "they are");
    return GB_ERR_SYSTEM;
}

/* Polls until slot `slot` has completed or timeout_s has passed. */
static gb_status await(mpi_comm *m, int slot)
{
    const double start = MPI_Wtime();
    for (;;) {
        gb_status st = progress(m);
        if (st != GB_OK)
            return st;
        if (m->requests[slot] == MPI_REQUEST_NULL)
            return GB_OK;
        double now = MPI_Wtime();
        if (now - start > m->timeout_s)
            return timed_out(m, &m->slots[slot]);
        if (now - m->last_beat >= m->beat_s) {
            m->last_beat = now;
            if ((st = send_notices(m, 1)) != GB_OK)
                return st;
        }
        sched_yield();
    }
}

/* Gives the next collective its number and tells the peers. */
static gb_status begin_collective(mpi_comm *m, collective c, int slot)
{
    c.seq = ++m->seq;
    m->slots[slot] = c;
    m->last_beat = MPI_Wtime();
    return send_notices(m, 0);
}

/* ---- lifetime ---------------------------------------------------------------------- */

/* After a failed collective MPI_Finalize would wait for ranks that hang, so a process
 * that exits without destroy() after one aborts the job as destroy() would. */
static void finalize_mpi_at_exit(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return;
    if (a_collective_failed)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
}

/* Registers finalize_mpi_at_exit. The handler's code lives in this object, so the object
 * first takes a reference to itself that is never dropped (and is marked RTLD_NODELETE):
 * the core's dlclose() cannot unmap it before the process exits. */
static gb_status finalize_at_exit(const gb_host *host)
{
    static const char self_marker = 0;
    Dl_info info;
    if (!dladdr(&self_marker, &info) || !info.dli_fname ||
        !dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) {
        const char *why = dlerror();
        host->set_error(host, "cannot keep comm/mpi loaded until exit to finalise MPI: %s",
                        why ? why : "dladdr found no object");
        return GB_ERR_SYSTEM;
    }
    if (atexit(finalize_mpi_at_exit) != 0) {
        host->set_error(host, "cannot register the exit handler that finalises MPI");
        return GB_ERR_SYSTEM;
    }
    return GB_OK;
}

/* Initialises MPI once per process, unless someone else already did. */
static gb_status start_mpi(const gb_host *host)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized) {
        host->set_error(host, "MPI has already been finalised in this process and cannot be "
                              "started again");
        return GB_ERR_UNSUPPORTED;
    }
    if (initialized)
        return GB_OK;
    gb_status st = finalize_at_exit(host);
    if (st != GB_OK)
        return st;
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        host->set_error(host, "MPI_Init_thread failed: %s", text);
        return GB_ERR_SYSTEM;
    }
    return GB_OK;
}

/* Open MPI's libnbc reduces an in-place MPI_Iallreduce on fewer than 4 ranks (every one
 * of ours) over a binomial tree, to rank 0 and back: twice the traffic of a ring, and on
 * 2 ranks twice the time of the blocking MPI_Allreduce for 1 MiB and more. The ring
 * gives the same values on every rank and matches MPI_Allreduce, so it is chosen through
 * the MPI tool interface unless coll_libnbc_iallreduce_algorithm was set (mpirun --mca).
 * Every rank runs this before its first collective, so all of them use the same
 * algorithm. Another MPI (or a build without libnbc) has no such variable: nothing to do. */
static void prefer_ring_all_reduce(void)
{
    int provided = 0, index = 0, count = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return;
    MPI_T_cvar_handle handle;
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) == MPI_SUCCESS) {
        int algorithm = -1;
        const int ring = 1;
        if (MPI_T_cvar_read(handle, &algorithm) == MPI_SUCCESS && algorithm == 0)
            MPI_T_cvar_write(handle, &ring);
        MPI_T_cvar_handle_free(&handle);
    }
    MPI_T_finalize();
}

/* Duplicates MPI_COMM_WORLD (so no other MPI user's traffic mixes with ours) with errors
 * returned instead of aborting. */
static gb_status duplicate_world(mpi_comm *m, MPI_Comm *out)
{
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, out);
    if (rc != MPI_SUCCESS)
        return mpi_failed(m, rc, "MPI_Comm_dup");
    rc = MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    return rc == MPI_SUCCESS ? GB_OK : mpi_failed(m, rc, "MPI_Comm_set_errhandler");
}

/* Allocates the per-rank arrays (one block), gathers hostnames, posts notice receives. */
static gb_status meet_peers(mpi_comm *m)
{
    const size_t world = (size_t)m->world;
    size_t bytes = world * (2 * sizeof(MPI_Request) + sizeof(peer) + sizeof(int) +
                            MPI_MAX_PROCESSOR_NAME);
    char *block = m->host->alloc(m->host, bytes);
    if (!block) {
        m->host->set_error(m->host, "out of memory for the bookkeeping of %d ranks", m->world);
        return GB_ERR_NO_MEMORY;
    }
    memset(block, 0, bytes);
    m->recv_requests = (MPI_Request *)block;
    m->send_requests = m->recv_requests + world;
    m->peers = (peer *)(m->send_requests + world);
    m->indices = (int *)(m->peers + world);
    m->hosts = (char(*)[MPI_MAX_PROCESSOR_NAME])(m->indices + world);
    for (size_t p = 0; p < world; p++)
        m->recv_requests[p] = m->send_requests[p] = MPI_REQUEST_NULL;

    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_Get_processor_name(name, &len);
    int rc = MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, m->hosts,
                           MPI_MAX_PROCESSOR_NAME, MPI_CHAR, m->comm);
    if (rc != MPI_SUCCESS)
        return mpi_failed(m, rc, "MPI_Allgather of the hostnames");
    double now = MPI_Wtime();
    for (int p = 0; p < m->world; p++) {
        m->hosts[p][MPI_MAX_PROCESSOR_NAME - 1] = '\0';
        m->peers[p].heard = now;
        gb_status st = p == m->rank ? GB_OK : post_notice_receive(m, p);
        if (st != GB_OK)
            return st;
    }
    return GB_OK;
}

/* Cancels the notice receives, completes the sends, frees the communicators and the
 * instance. MPI itself stays up until the process exits. */
static void release(mpi_comm *m)
{
    if (m->recv_requests) {
        for (int p = 0; p < m->world; p++)
            if (m->recv_requests[p] != MPI_REQUEST_NULL) {
                MPI_Cancel(&m->recv_requests[p]);
                MPI_Wait(&m->recv_requests[p], MPI_STATUS_IGNORE);
            }
        MPI_Waitall(m->world, m->send_requests, MPI_STATUSES_IGNORE);
        m->host->free(m->host, m->recv_requests);
    }
    if (m->notices != MPI_COMM_NULL)
        MPI_Comm_free(&m->notices);
    if (m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    m->host->free(m->host, m);
}

static gb_status mpi_create(const gb_host *host, const gb_value *options,
                            const gb_device_ctx *device, void **self)
{
    if (!host || !options || !self)
        return GB_ERR_INVALID_ARG;
    if (device && !gb_device_memory_is_host(device)) {
        host->set_error(host, "comm/mpi reduces host memory; device = cuda needs "
                              "[comm] plugin = nccl");
        return GB_ERR_UNSUPPORTED;
    }
    gb_status st = start_mpi(host);
    if (st != GB_OK)
        return st;
    prefer_ring_all_reduce();
    mpi_comm *m = host->alloc(host, sizeof *m);
    if (!m) {
        host->set_error(host, "out of memory");
        return GB_ERR_NO_MEMORY;
    }
    *m = (mpi_comm){.host = host, .comm = MPI_COMM_NULL, .notices = MPI_COMM_NULL,
                    .timeout_s = options[OPT_TIMEOUT_S].f, .next_id = 1};
    if (device) {
        size_t n = device->struct_size < sizeof m->device ? device->struct_size
                                                          : sizeof m->device;
        memcpy(&m->device, device, n);
        m->device.struct_size = n;
    }
    m->beat_s = m->timeout_s / 10.0 < 1.0 ? m->timeout_s / 10.0 : 1.0;
    for (int i = 0; i < N_SLOTS; i++)
        m->requests[i] = MPI_REQUEST_NULL;
    st = duplicate_world(m, &m->comm);
    if (st == GB_OK)
        st = duplicate_world(m, &m->notices);
    if (st == GB_OK) {
        MPI_Comm_rank(m->comm, &m->rank);
        MPI_Comm_size(m->comm, &m->world);
        st = meet_peers(m);
    }
    if (st != GB_OK) {
        release(m);
        return st;
    }
    *self = m;
    return GB_OK;
}

static void mpi_destroy(void *self)
{
    mpi_comm *m = self;
    if (!m)
        return;
    if (m->failed || m->n_inflight > 0) {
        m->host->log(m->host, GB_LOG_ERROR,
                     "%s; calling MPI_Abort so that mpirun stops the other ranks too",
                     m->failed ? "a collective failed" : "collectives are still outstanding");
        MPI_Abort(m->comm, 1);
    }
    release(m);
}

/* ---- topology ---------------------------------------------------------------------- */

static int mpi_rank(void *self)
{
    return ((mpi_comm *)self)->rank;
}

static int mpi_world(void *self)
{
    return ((mpi_comm *)self)->world;
}

/* ---- collectives ------------------------------------------------------------------- */

static gb_status check_all_reduce(mpi_comm *m, const void *buf, int64_t count, gb_dtype dtype,
                                  gb_reduce_op op, const gb_comm_request *request)
{
    const gb_host *host = m->host;
    gb_status st = gb_comm_check_all_reduce(host, buf, count, dtype, op, request);
    if (st != GB_OK)
        return st;
    if (dtype != GB_F32 && dtype != GB_I32) {
        host->set_error(host, "all_reduce: comm/mpi reduces f32 and i32, not %s",
                        gb_dtype_name(dtype));
        return GB_ERR_UNSUPPORTED;
    }
    if (dtype == GB_I32 && op == GB_REDUCE_AVG) {
        host->set_error(host, "all_reduce: the average of i32 values is not an i32; use SUM");
        return GB_ERR_UNSUPPORTED;
    }
    if (count > INT_MAX) {
        host->set_error(host, "all_reduce: %lld elements exceed MPI's int count (%d); "
                              "reduce in smaller buckets", (long long)count, INT_MAX);
        return GB_ERR_UNSUPPORTED;
    }
    return gb_comm_check_room(host, m->n_pending);
}

/* ---- queued parts (comm.h "Ordering": in stream order on the compute stream) ---- */

/* What the queued parts of the collectives receive. */
typedef struct queued_collective {
    mpi_comm *m;
    void *send;               /* reduce-scatter, all-gather: the other buffer */
    void *buf;
    int64_t count;            /* all-reduce, reduce-scatter: elements; broadcast, all-gather:
                                 bytes (all-gather: each rank's) */
    gb_dtype dtype;
    gb_reduce_op op;
    gb_comm_request id;
    int root;
} queued_collective;

/* Numbers collective `c` of a request and takes a free request slot for it (in *slot). */
static gb_status begin_request(mpi_comm *m, collective c, int *slot)
{
    if (m->failed)
        return refuse_after_failure(m);
    gb_status st = progress(m);
    if (st != GB_OK)
        return st;
    *slot = 0;
    while (m->slots[*slot].id != 0)
        (*slot)++;
    return begin_collective(m, c, *slot);
}

static MPI_Datatype mpi_type_of(gb_dtype dtype)
{
    return dtype == GB_F32 ? MPI_FLOAT : MPI_INT;
}

/* A nonblocking collective just posted (rc: what its MPI call returned) is in flight. */
static gb_status in_flight(mpi_comm *m, int rc, const char *call)
{
    if (rc != MPI_SUCCESS)
        return mpi_failed(m, rc, call);
    m->n_inflight++;
    return GB_OK;
}

/* Begins blocking collective c in BLOCKING_SLOT, after what was posted before it. */
static gb_status begin_blocking(mpi_comm *m, collective c)
{
    if (m->failed)
        return refuse_after_failure(m);
    gb_status st = progress(m);
    return st != GB_OK ? st : begin_collective(m, c, BLOCKING_SLOT);
}

/* Waits for the blocking collective just posted in BLOCKING_SLOT (rc: what its MPI call
 * returned). */
static gb_status await_blocking(mpi_comm *m, int rc, const char *call)
{
    return rc != MPI_SUCCESS ? mpi_failed(m, rc, call) : await(m, BLOCKING_SLOT);
}

/* Posts the all-reduce of request `id`: buf holds what the work queued before it left. */
static gb_status all_reduce_start_run(void *arg)
{
    const queued_collective *q = arg;
    mpi_comm *m = q->m;
    int slot;
    gb_status st = begin_request(m, (collective){.kind = ALL_REDUCE, .id = q->id, .buf = q->buf,
                                                 .count = q->count, .dtype = q->dtype,
                                                 .op = q->op},
                                 &slot);
    if (st != GB_OK)
        return st;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, q->buf, (int)q->count, mpi_type_of(q->dtype), MPI_SUM,
                            m->comm, &m->requests[slot]);
    return in_flight(m, rc, "MPI_Iallreduce");
}

/* Posts the reduce-scatter of request `id` into buf (this rank's shard of send). In place,
 * MPI_IN_PLACE takes the input from send and leaves the shard at its start; finish() moves
 * it to buf. */
static gb_status reduce_scatter_start_run(void *arg)
{
    const queued_collective *q = arg;
    mpi_comm *m = q->m;
    const int in_place = (char *)q->buf == (char *)q->send + (size_t)m->rank *
                                                                 (size_t)q->count *
                                                                 gb_dtype_size(q->dtype);
    int slot;
    gb_status st = begin_request(m, (collective){.kind = REDUCE_SCATTER, .id = q->id,
                                                 .buf = in_place ? q->send : q->buf,
                                                 .dest = q->buf, .count = q->count,
                                                 .dtype = q->dtype, .op = q->op},
                                 &slot);
    if (st != GB_OK)
        return st;
    int rc = in_place ? MPI_Ireduce_scatter_block(MPI_IN_PLACE, q->send, (int)q->count,
                                                  mpi_type_of(q->dtype), MPI_SUM, m->comm,
                                                  &m->requests[slot])
                      : MPI_Ireduce_scatter_block(q->send, q->buf, (int)q->count,
                                                  mpi_type_of(q->dtype), MPI_SUM, m->comm,
                                                  &m->requests[slot]);
    return in_flight(m, rc, "MPI_Ireduce_scatter_block");
}

/* Completes request `id`, so the work queued after it sees the result. */
static gb_status all_reduce_wait_run(void *arg)
{
    const queued_collective *q = arg;
    mpi_comm *m = q->m;
    if (m->failed)
        return refuse_after_failure(m);
    int slot = 0;
    while (slot < GB_COMM_MAX_INFLIGHT && m->slots[slot].id != q->id)
        slot++;
    if (slot == GB_COMM_MAX_INFLIGHT) {
        m->host->set_error(m->host, "all_reduce_wait: request %lld was never posted",
                           (long long)q->id);
        return GB_ERR_INVALID_ARG;
    }
    gb_status st = await(m, slot);
    if (st != GB_OK)
        return st;
    m->slots[slot].id = 0;
    m->n_inflight--;
    return GB_OK;
}

static gb_status broadcast_run(void *arg)
{
    const queued_collective *q = arg;
    mpi_comm *m = q->m;
    void *buf = q->buf;
    size_t bytes = (size_t)q->count;
    gb_status st = begin_blocking(m, (collective){.kind = BROADCAST, .buf = buf,
                                                  .count = (int64_t)bytes, .root = q->root});
    if (st != GB_OK)
        return st;
    /* in chunks of int counts; one empty broadcast when bytes is 0, as on every rank */
    size_t done = 0;
    do {
        size_t n = bytes - done < BROADCAST_CHUNK ? bytes - done : BROADCAST_CHUNK;
        int rc = MPI_Ibcast((char *)buf + done, (int)n, MPI_BYTE, q->root, m->comm,
                            &m->requests[BLOCKING_SLOT]);
        st = await_blocking(m, rc, "MPI_Ibcast");
        done += n;
    } while (st == GB_OK && done < bytes);
    return st;
}

/* The all-gather into buf, each rank's part `count` bytes: this rank's part is copied to
 * its place first unless it is there (in place), then gathered in place. */
static gb_status all_gather_run(void *arg)
{
    const queued_collective *q = arg;
    mpi_comm *m = q->m;
    if (m->failed)
        return refuse_after_failure(m);
    char *mine = (char *)q->buf + (size_t)m->rank * (size_t)q->count;
    if (q->count > 0 && q->send != mine)
        memcpy(mine, q->send, (size_t)q->count);
    gb_status st = begin_blocking(m, (collective){.kind = ALL_GATHER, .buf = q->buf,
                                                  .count = q->count});
    if (st != GB_OK)
        return st;
    int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, q->buf, (int)q->count, MPI_BYTE,
                            m->comm, &m->requests[BLOCKING_SLOT]);
    return await_blocking(m, rc, "MPI_Iallgather");
}

static gb_status barrier_run(void *arg)
{
    const queued_collective *q = arg;
    mpi_comm *m = q->m;
    gb_status st = begin_blocking(m, (collective){.kind = BARRIER});
    if (st != GB_OK)
        return st;
    int rc = MPI_Ibarrier(m->comm, &m->requests[BLOCKING_SLOT]);
    return await_blocking(m, rc, "MPI_Ibarrier");
}

/* Queues a blocking collective and waits for it with the device's sync (at once on a
 * device without a queue). */
static gb_status run_blocking(mpi_comm *m, gb_host_fn fn, queued_collective *q)
{
    gb_status st = gb_device_run_host(&m->device, fn, q, sizeof *q);
    if (st == GB_OK &&
        m->device.struct_size >= offsetof(gb_device_ctx, self) + sizeof m->device.self &&
        m->device.ops && m->device.ops->sync)
        st = m->device.ops->sync(m->device.self);
    return st;
}

/* ---- the collectives ---- */

/* Queues the start of a reduction (all-reduce or reduce-scatter, `run`) with the next
 * request's id, after checking its arguments as an all-reduce's. */
static gb_status start_reduction(mpi_comm *m, gb_host_fn run, queued_collective q,
                                 gb_comm_request *request)
{
    if (m->failed)
        return refuse_after_failure(m);
    gb_status st = check_all_reduce(m, q.buf, q.count, q.dtype, q.op, request);
    if (st != GB_OK)
        return st;
    q.id = m->next_id;
    st = gb_device_run_host(&m->device, run, &q, sizeof q);
    if (st != GB_OK)
        return st;
    m->pending[m->n_pending++] = q.id;
    *request = m->next_id++;
    return GB_OK;
}

static gb_status mpi_all_reduce_start(void *self, void *buf, int64_t count, gb_dtype dtype,
                                      gb_reduce_op op, gb_comm_request *request)
{
    return start_reduction(self, all_reduce_start_run,
                           (queued_collective){.m = self, .buf = buf, .count = count,
                                               .dtype = dtype, .op = op},
                           request);
}

static gb_status mpi_reduce_scatter_start(void *self, void *send, void *recv, int64_t recv_count,
                                          gb_dtype dtype, gb_reduce_op op,
                                          gb_comm_request *request)
{
    mpi_comm *m = self;
    if (recv_count > 0 && !send) {
        m->host->set_error(m->host, "reduce_scatter_start: send is NULL");
        return GB_ERR_INVALID_ARG;
    }
    return start_reduction(m, reduce_scatter_start_run,
                           (queued_collective){.m = m, .send = send, .buf = recv,
                                               .count = recv_count, .dtype = dtype, .op = op},
                           request);
}

static gb_status mpi_all_reduce_wait(void *self, gb_comm_request request)
{
    mpi_comm *m = self;
    if (m->failed)
        return refuse_after_failure(m);
    int i = 0;
    while (i < m->n_pending && (request == 0 || m->pending[i] != request))
        i++;
    if (i == m->n_pending) {
        m->host->set_error(m->host, "all_reduce_wait: request %lld is not outstanding",
                           (long long)request);
        return GB_ERR_INVALID_ARG;
    }
    m->pending[i] = m->pending[--m->n_pending];
    queued_collective q = {.m = m, .id = request};
    return gb_device_run_host(&m->device, all_reduce_wait_run, &q, sizeof q);
}

static gb_status mpi_broadcast(void *self, void *buf, size_t bytes, int root)
{
    mpi_comm *m = self;
    if (m->failed)
        return refuse_after_failure(m);
    gb_status st = gb_comm_check_broadcast(m->host, buf, bytes, root, m->world);
    if (st != GB_OK)
        return st;
    queued_collective q = {.m = m, .buf = buf, .count = (int64_t)bytes, .root = root};
    return run_blocking(m, broadcast_run, &q);
}

static gb_status mpi_all_gather(void *self, const void *send, void *recv, int64_t send_count,
                                gb_dtype dtype)
{
    mpi_comm *m = self;
    if (m->failed)
        return refuse_after_failure(m);
    gb_status st = gb_comm_check_all_gather(m->host, send, recv, send_count, dtype);
    if (st != GB_OK)
        return st;
    size_t bytes = (size_t)send_count * gb_dtype_size(dtype);
    if (bytes > INT_MAX) {
        m->host->set_error(m->host, "all_gather: %zu bytes per rank exceed MPI's int count (%d)",
                           bytes, INT_MAX);
        return GB_ERR_UNSUPPORTED;
    }
    queued_collective q = {.m = m, .send = (void *)send, .buf = recv, .count = (int64_t)bytes};
    return run_blocking(m, all_gather_run, &q);
}

static gb_status mpi_barrier(void *self)
{
    mpi_comm *m = self;
    if (m->failed)
        return refuse_after_failure(m);
    queued_collective q = {.m = m};
    return run_blocking(m, barrier_run, &q);
}

GB_COMM_PLUGIN("mpi", "1.0.0",
               "Open MPI collectives on host memory, with a timeout that names the rank "
               "at fault",
               GB_DEVICE_CPU | GB_DEVICE_ANY_HOST, GB_DTYPE_BIT(GB_F32) | GB_DTYPE_BIT(GB_I32),
               GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY, GB_OPTIONS(mpi_options),
               .create = mpi_create, .destroy = mpi_destroy, .rank = mpi_rank, .world = mpi_world,
               .all_reduce_start = mpi_all_reduce_start, .all_reduce_wait = mpi_all_reduce_wait,
               .broadcast = mpi_broadcast, .barrier = mpi_barrier,
               .reduce_scatter_start = mpi_reduce_scatter_start, .all_gather = mpi_all_gather)
