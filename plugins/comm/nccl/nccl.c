/* Communication over NCCL: the collectives of data-parallel training between GPUs, one
 * process per GPU, within a node (NVLink, PCIe) and across nodes (InfiniBand, RoCE, TCP).
 *
 * create() learns its rank and world from the launcher (launch.c: Open MPI's mpirun
 * variables, torchrun-style variables, or neither for a world of 1), carries rank 0's
 * ncclUniqueId to every rank over TCP (tcp_bootstrap.c: under mpirun too, so the plugin
 * links no MPI library; rank 0's address is MASTER_ADDR:MASTER_PORT, with the defaults
 * launch.c documents) and opens a non-blocking communicator on the device
 * context's GPU.
 *
 * Streams. Collectives run on a stream of their own, so they overlap the kernels of the
 * compute stream (the device context's): each one is queued behind an event recorded on
 * the compute stream when it is started (the work that produced its buffer), and an event
 * recorded behind it marks its end. all_reduce_wait makes the compute stream wait on that
 * event and returns without blocking the host, so only the work queued after the wait (the
 * optimizer, which reads the averaged gradients) waits for the reduction; the kernels of
 * the rest of backward run while it does. broadcast and barrier are blocking: the host
 * waits on the end event (cudaEventSynchronize). The sharded collectives (ABI 1.8) follow the
 * all-reduce: reduce_scatter_start queues ncclReduceScatter behind the same event and its
 * request is waited for by all_reduce_wait; all_gather queues ncclAllGather and makes the
 * compute stream wait for it at once, without blocking the host. `overlap = false` queues the collectives
 * on the compute stream instead, in order with the kernels (for A/B comparisons).
 *
 * Nothing waits without a limit. A watchdog thread holds every collective's deadline, the
 * moment it was queued plus `timeout_s`: when the oldest collective not yet seen complete is
 * still not done at its deadline (cudaEventQuery on its end event), or NCCL reports an
 * asynchronous error (ncclCommGetAsyncError, looked at every 100 ms while collectives are
 * watched), it aborts the communicator and logs what failed. ncclCommAbort from another
 * thread is NCCL's way out of a hung collective: it also stops the kernels stuck waiting for
 * a dead peer, so the host's waits on the streams (a blocking broadcast, the device's sync)
 * return. The failure reaches the core through the next call on this rank, which fails with
 * the message naming the operation (#seq, count, dtype); after an abort every call fails at
 * once: a rank cannot go on without its peers. Setup, the enqueueing of a collective and
 * finalize poll ncclCommGetAsyncError, sleeping between polls, only while NCCL answers
 * ncclInProgress, up to timeout_s, on the calling thread.
 *
 * The GPU is the device context's ordinal: the core picks it ([device] ordinal, else
 * LOCAL_RANK, or OMPI_COMM_WORLD_LOCAL_RANK under mpirun) and hands it to the device
 * plugin as gb_host.device_ordinal (ABI 1.2), which opens that GPU and reports it here;
 * two ranks on one GPU are refused by NCCL at setup.
 *
 * Deliberately left out: stream priorities, buffer registration, and recovery after a
 * failure (the core ends the run; a restart resumes from its checkpoint).
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gearbox/toolkit/comm_checks.h"
#include "cuda_status.h"
#include "gearbox/comm.h"
#include "launch.h"
#include "monotonic.h"
#include "tcp_bootstrap.h"

enum { OPT_TIMEOUT_S, OPT_OVERLAP };

static const gb_option nccl_options[] = {
    [OPT_TIMEOUT_S] = {"timeout_s", GB_OPT_FLOAT, "300", 1, 86400, NULL,
                       "seconds the rendezvous, or any one collective, may take before the run "
                       "is aborted (a peer rank died or hangs), in [1, 86400]"},
    [OPT_OVERLAP] = {"overlap", GB_OPT_BOOL, "true", 0, 0, NULL,
                     "collectives on a stream of their own, overlapping the rest of backward; "
                     "false: on the compute stream, in order with the kernels"},
};

/* Collectives the watchdog tracks at once; one more waits for the oldest to complete. */
#define WATCH_SLOTS 256
/* How often the watchdog asks NCCL for asynchronous errors while collectives are watched. */
#define ASYNC_ERROR_POLL_S 0.1

/* ---- describing operations and failures ------------------------------------------------ */

typedef enum op_kind {
    OP_SETUP, OP_ALL_REDUCE, OP_BROADCAST, OP_BARRIER, OP_REDUCE_SCATTER, OP_ALL_GATHER
} op_kind;

/* One operation on the communicator, as error messages name it. */
typedef struct op_desc {
    op_kind kind;
    int64_t seq;      /* collectives: the how-manieth on this communicator, from 1 */
    int64_t count;    /* all_reduce: elements; reduce_scatter, all_gather: elements per
                         rank; broadcast: bytes */
    gb_dtype dtype;   /* all_reduce, reduce_scatter, all_gather */
    int root;         /* broadcast */
} op_desc;

/* A collective queued and not yet seen complete, as the watchdog tracks it. */
typedef struct watched {
    op_desc op;
    double deadline_s;   /* monotonic_s() by which it must be done */
    cudaEvent_t done;    /* recorded on the collectives' stream behind it */
} watched;

typedef struct nccl_comm {
    const gb_host *host;
    double timeout_s;
    int rank, world, ordinal;
    cudaStream_t compute;         /* the device context's stream */
    cudaStream_t stream;          /* where collectives run: their own, or `compute` */
    cudaEvent_t ready;            /* recorded on `compute` as each collective is queued */
    int32_t *barrier_word;        /* one device int, always 0, that barrier() all-reduces */
    int n_inflight;
    gb_comm_request requests[GB_COMM_MAX_INFLIGHT];   /* outstanding all-reduces; 0: free */
    /* Shared with the watchdog thread, under `lock`. */
    pthread_mutex_t lock;
    pthread_cond_t wake;          /* a collective was queued, or the watchdog must stop */
    pthread_t watchdog;
    int watchdog_started, stopping;
    ncclComm_t comm;              /* NULL before setup and after an abort */
    char failure[640];            /* after an abort: what failed, and why */
    int64_t seq;                  /* collectives queued so far */
    int64_t oldest;               /* the oldest collective watched; seq + 1 when none is */
    watched ring[WATCH_SLOTS];    /* collective #n is ring[(n - 1) % WATCH_SLOTS] */
} nccl_comm;

static watched *watched_of(nccl_comm *s, int64_t seq)
{
    return &s->ring[(seq - 1) % WATCH_SLOTS];
}

static void describe(const op_desc *op, char *out, size_t size)
{
    switch (op->kind) {
    case OP_SETUP:
        snprintf(out, size, "NCCL communicator setup");
        break;
    case OP_ALL_REDUCE:
    case OP_REDUCE_SCATTER:
    case OP_ALL_GATHER:
        snprintf(out, size, "%s #%lld (%lld x %s%s)",
                 op->kind == OP_ALL_REDUCE       ? "all_reduce"
                 : op->kind == OP_REDUCE_SCATTER ? "reduce_scatter"
                                                 : "all_gather",
                 (long long)op->seq, (long long)op->count, gb_dtype_name(op->dtype),
                 op->kind == OP_ALL_REDUCE ? "" : " per rank");
        break;
    case OP_BROADCAST:
        snprintf(out, size, "broadcast #%lld (%lld bytes from rank %d)", (long long)op->seq,
                 (long long)op->count, op->root);
        break;
    case OP_BARRIER:
        snprintf(out, size, "barrier #%lld", (long long)op->seq);
        break;
    }
}

/* What most likely stalled an operation that ran out of time. */
static const char *timeout_hint(op_kind kind)
{
    if (kind == OP_SETUP)
        return "a rank did not start or cannot reach the others (NCCL_SOCKET_IFNAME picks the "
               "network interface); if ranks legitimately start that far apart, raise "
               "[comm] timeout_s";
    return "a peer rank died or hangs (its own log says why); if this step is legitimately "
           "that slow, raise [comm] timeout_s";
}

static gb_status status_of(ncclResult_t r)
{
    switch (r) {
    case ncclUnhandledCudaError: return GB_ERR_DEVICE;
    case ncclInvalidArgument: case ncclInvalidUsage: return GB_ERR_INVALID_ARG;
    default: return GB_ERR_SYSTEM;   /* system, internal, remote: the network or a peer */
    }
}

/* ---- how an operation ended ------------------------------------------------------------ */

typedef enum op_end { OP_DONE, OP_TIMEOUT, OP_NCCL_ERROR, OP_CUDA_ERROR } op_end;

typedef struct op_result {
    op_end end;
    ncclResult_t nccl;   /* OP_NCCL_ERROR */
    cudaError_t cuda;    /* OP_CUDA_ERROR */
} op_result;

static const op_result op_done = {OP_DONE, ncclSuccess, cudaSuccess};
static const op_result op_timeout = {OP_TIMEOUT, ncclSuccess, cudaSuccess};

static op_result nccl_error(ncclResult_t r)
{
    return (op_result){OP_NCCL_ERROR, r, cudaSuccess};
}

static op_result cuda_error(cudaError_t e)
{
    return (op_result){OP_CUDA_ERROR, ncclSuccess, e};
}

/* The communicator's state: ncclSuccess, ncclInProgress, or the error that broke it. */
static ncclResult_t comm_state(ncclComm_t comm)
{
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    return r == ncclSuccess ? state : r;
}

/* The first millisecond of a wait yields the core between polls, so a quick operation
 * is seen at once; after that each poll sleeps, so a long wait costs no CPU. */
static void pause_between_polls(double waited_s)
{
    if (waited_s < 1e-3) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, waited_s < 0.1 ? 50000 : 500000};
    nanosleep(&ts, NULL);
}

/* Polls until the communicator leaves ncclInProgress (a setup, enqueue or finalize is
 * done), NCCL reports an error, or timeout_s passes. */
static op_result wait_settled(nccl_comm *s)
{
    const double start = monotonic_s();
    for (;;) {
        ncclResult_t state = comm_state(s->comm);
        if (state == ncclSuccess)
            return op_done;
        if (state != ncclInProgress)
            return nccl_error(state);
        double waited = monotonic_s() - start;
        if (waited > s->timeout_s)
            return op_timeout;
        pause_between_polls(waited);
    }
}

static void abort_comm(nccl_comm *s)
{
    if (s->comm) {
        ncclCommAbort(s->comm);
        s->comm = NULL;
    }
}

/* Says how `op` failed (into `message`: the full text; into s->failure: what later calls
 * repeat) while ncclGetLastError still describes this communicator, then aborts it.
 * The failure's status. Called with the lock held. */
static gb_status fail_and_abort(nccl_comm *s, const op_desc *op, op_result why, char *message,
                                size_t size)
{
    char what[96];
    describe(op, what, sizeof what);
    gb_status status = GB_ERR_SYSTEM;
    switch (why.end) {
    case OP_DONE:
        return GB_OK;
    case OP_TIMEOUT:
        snprintf(s->failure, sizeof s->failure, "%s did not complete within timeout_s = %g s "
                 "on rank %d of %d: %s", what, s->timeout_s, s->rank, s->world,
                 timeout_hint(op->kind));
        break;
    case OP_NCCL_ERROR: {
        const char *detail = s->comm ? ncclGetLastError(s->comm) : NULL;
        const char *hint = why.nccl == ncclRemoteError
                               ? " (a peer rank died or its network failed)"
                           : why.nccl == ncclInvalidUsage && op->kind == OP_SETUP
                               ? " (every rank needs a GPU of its own: ranks sharing a node need "
                                 "different device ordinals, usually LOCAL_RANK)"
                               : "";
        snprintf(s->failure, sizeof s->failure, "%s failed on rank %d of %d: NCCL %s%s%s%s", what,
                 s->rank, s->world, ncclGetErrorString(why.nccl), detail && *detail ? ": " : "",
                 detail ? detail : "", hint);
        status = status_of(why.nccl);
        break;
    }
    case OP_CUDA_ERROR:
        snprintf(s->failure, sizeof s->failure, "%s failed on rank %d of %d (GPU %d): CUDA %s: %s",
                 what, s->rank, s->world, s->ordinal, cudaGetErrorName(why.cuda),
                 cudaGetErrorString(why.cuda));
        status = GB_ERR_DEVICE;
        break;
    }
    snprintf(message, size, "%s; the communicator was aborted", s->failure);
    abort_comm(s);
    return status;
}

/* How an operation of the calling thread ended, as a status: GB_OK when it completed;
 * otherwise sets the error and aborts the communicator. Called with the lock held. */
static gb_status finish_op(nccl_comm *s, const op_desc *op, op_result why)
{
    char message[sizeof s->failure + 64];
    gb_status st = fail_and_abort(s, op, why, message, sizeof message);
    if (st != GB_OK)
        s->host->set_error(s->host, "%s", message);
    return st;
}

/* GB_OK while the communicator is usable; after an abort, says what broke it. Called with
 * the lock held. */
static gb_status check_usable(nccl_comm *s, const char *call)
{
    if (s->comm)
        return GB_OK;
    s->host->set_error(s->host, "%s: the NCCL communicator was aborted after %s; this rank can "
                       "no longer communicate", call, s->failure);
    return GB_ERR_SYSTEM;
}

/* What an NCCL call returned. A non-blocking communicator answers ncclInProgress while
 * it still prepares the operation (it connects to its peers on first use); only once
 * its state leaves ncclInProgress is the work on the stream for an event to follow. */
static gb_status check_enqueued(nccl_comm *s, ncclResult_t r, const op_desc *op)
{
    if (r == ncclSuccess)
        return GB_OK;
    return finish_op(s, op, r == ncclInProgress ? wait_settled(s) : nccl_error(r));
}

/* ---- the watchdog ---------------------------------------------------------------------- */

/* Sleeps on s->wake until `deadline_s` (monotonic), or until signalled. */
static void sleep_until(nccl_comm *s, double deadline_s)
{
    double left = deadline_s - monotonic_s();
    if (left <= 0)
        return;
    struct timespec at;
    clock_gettime(CLOCK_MONOTONIC, &at);
    long long ns = (long long)at.tv_nsec + (long long)(left * 1e9);
    at.tv_sec += (time_t)(ns / 1000000000LL);
    at.tv_nsec = (long)(ns % 1000000000LL);
    pthread_cond_timedwait(&s->wake, &s->lock, &at);
}

/* Aborts the communicator from the watchdog: logs the failure (the caller's next call
 * returns it). Called with the lock held. */
static void watchdog_abort(nccl_comm *s, const op_desc *op, op_result why)
{
    char message[sizeof s->failure + 64];
    if (fail_and_abort(s, op, why, message, sizeof message) != GB_OK)
        s->host->log(s->host, GB_LOG_ERROR, "comm/nccl: %s", message);
}

/* The collective an asynchronous error of NCCL belongs to: the oldest watched one not yet
 * complete (the watchdog forgets complete ones only at their deadlines, so the oldest
 * watched may long be done). */
static watched *first_unfinished(nccl_comm *s)
{
    while (s->oldest < s->seq && cudaEventQuery(watched_of(s, s->oldest)->done) == cudaSuccess)
        s->oldest++;
    return watched_of(s, s->oldest);
}

/* One look at the oldest collective watched: forgets it once complete, aborts when it
 * is overdue or NCCL reports an error. 1 when it should look again at once. */
static int watch_oldest(nccl_comm *s)
{
    watched *w = watched_of(s, s->oldest);
    if (monotonic_s() >= w->deadline_s) {
        cudaError_t q = cudaEventQuery(w->done);
        if (q == cudaSuccess) {
            s->oldest++;
            return 1;
        }
        watchdog_abort(s, &w->op, q == cudaErrorNotReady ? op_timeout : cuda_error(q));
        return 0;
    }
    ncclResult_t state = comm_state(s->comm);
    if (state != ncclSuccess && state != ncclInProgress) {
        watchdog_abort(s, &first_unfinished(s)->op, nccl_error(state));
        return 0;
    }
    double poll = monotonic_s() + ASYNC_ERROR_POLL_S;
    sleep_until(s, w->deadline_s < poll ? w->deadline_s : poll);
    return 1;
}

static void *watchdog_main(void *arg)
{
    nccl_comm *s = arg;
    cudaSetDevice(s->ordinal);   /* the current GPU is per thread */
    pthread_mutex_lock(&s->lock);
    while (!s->stopping && s->comm) {
        if (s->oldest > s->seq)
            pthread_cond_wait(&s->wake, &s->lock);
        else if (!watch_oldest(s))
            break;
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- queueing collectives -------------------------------------------------------------- */

/* Makes the collectives' stream, when it is not the compute stream, wait for the work
 * queued on the compute stream so far (what produced the buffer). */
static cudaError_t order_after_compute(nccl_comm *s)
{
    if (s->stream == s->compute)
        return cudaSuccess;
    cudaError_t e = cudaEventRecord(s->ready, s->compute);
    return e == cudaSuccess ? cudaStreamWaitEvent(s->stream, s->ready, 0) : e;
}

/* Room in the ring for one more collective: the oldest is forgotten once complete, waited
 * for when not (the lock is let go meanwhile, so the watchdog can abort a hung one). */
static gb_status make_room(nccl_comm *s, const char *call)
{
    while (s->comm && s->seq - s->oldest + 1 >= WATCH_SLOTS) {
        watched *w = watched_of(s, s->oldest);
        cudaError_t e = cudaEventQuery(w->done);
        if (e == cudaErrorNotReady) {
            pthread_mutex_unlock(&s->lock);
            e = cudaEventSynchronize(w->done);
            pthread_mutex_lock(&s->lock);
        }
        if (e != cudaSuccess && s->comm)
            return finish_op(s, &w->op, cuda_error(e));
        if (s->oldest == w->op.seq)
            s->oldest++;
    }
    return check_usable(s, call);
}

/* Hands the collective just queued to the watchdog: its end event and its deadline. */
static gb_status watch(nccl_comm *s, const op_desc *op)
{
    watched *w = watched_of(s, op->seq);
    cudaError_t e = cudaEventRecord(w->done, s->stream);
    if (e != cudaSuccess)
        return finish_op(s, op, cuda_error(e));
    w->op = *op;
    w->deadline_s = monotonic_s() + s->timeout_s;
    pthread_cond_signal(&s->wake);
    return GB_OK;
}

/* Blocks until the collective `op` (queued and watched) completes, after which the compute
 * stream needs no wait for it; after an abort by the watchdog meanwhile, fails with its
 * message. Called with the lock held; lets it go while waiting. */
static gb_status wait_blocking(nccl_comm *s, const op_desc *op, const char *call)
{
    cudaEvent_t done = watched_of(s, op->seq)->done;
    pthread_mutex_unlock(&s->lock);
    cudaError_t e = cudaEventSynchronize(done);
    pthread_mutex_lock(&s->lock);
    gb_status st = check_usable(s, call);
    if (st == GB_OK && e != cudaSuccess)
        st = finish_op(s, op, cuda_error(e));
    return st;
}

/* ---- create ---------------------------------------------------------------------------- */

/* The collectives' stream and events, and the barrier's device int: everything the
 * collectives need later. */
static gb_status create_device_resources(nccl_comm *s, int overlap)
{
    const gb_host *host = s->host;
    /* blocking sync: a host waiting in cudaEventSynchronize sleeps instead of spinning */
    const unsigned flags = cudaEventDisableTiming | cudaEventBlockingSync;
    cudaError_t e = cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming);
    if (e != cudaSuccess)
        s->ready = NULL;
    for (int i = 0; i < WATCH_SLOTS && e == cudaSuccess; i++)
        if ((e = cudaEventCreateWithFlags(&s->ring[i].done, flags)) != cudaSuccess)
            s->ring[i].done = NULL;
    s->stream = s->compute;
    if (e == cudaSuccess && overlap) {
        cudaStream_t own = NULL;
        if ((e = cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking)) == cudaSuccess)
            s->stream = own;
    }
    void *word = NULL;
    if (e == cudaSuccess && (e = cudaMalloc(&word, sizeof *s->barrier_word)) == cudaSuccess)
        s->barrier_word = word;
    /* on the compute stream, which every collective is ordered after */
    if (e == cudaSuccess)
        e = cudaMemsetAsync(s->barrier_word, 0, sizeof *s->barrier_word, s->compute);
    if (e == cudaSuccess)
        return GB_OK;
    host->set_error(host, "comm/nccl: creating its stream, events and barrier word on GPU %d "
                    "failed: %s (%s)", s->ordinal, cudaGetErrorName(e), cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? GB_ERR_NO_MEMORY : GB_ERR_DEVICE;
}

/* Rank 0's ncclGetUniqueId, with NCCL's explanation on failure. */
static gb_status make_unique_id(const gb_host *host, ncclUniqueId *id)
{
    ncclResult_t r = ncclGetUniqueId(id);
    if (r == ncclSuccess)
        return GB_OK;
    const char *detail = ncclGetLastError(NULL);
    host->set_error(host, "rank 0: ncclGetUniqueId failed: %s%s%s (NCCL_SOCKET_IFNAME picks the "
                    "network interface it listens on)", ncclGetErrorString(r),
                    detail && *detail ? ": " : "", detail ? detail : "");
    return status_of(r);
}

/* Gets rank 0's unique id to this rank, as the launch prescribes. */
static gb_status share_unique_id(nccl_comm *s, const launch_plan *plan, ncclUniqueId *id)
{
    const gb_host *host = s->host;
    if (plan->port != plan->master_port)
        host->log(host, GB_LOG_INFO, "comm/nccl: torchrun's agent serves its store on MASTER_PORT "
                  "%d (TORCHELASTIC_USE_AGENT_STORE=True), so the NCCL id goes through port %d",
                  plan->master_port, plan->port);
    if (s->rank == 0) {
        gb_status st = make_unique_id(host, id);
        if (st != GB_OK || s->world == 1)
            return st;
        return tcp_bootstrap_serve(host, plan->port, s->world, id, sizeof *id, s->timeout_s)
                   ? GB_ERR_SYSTEM : GB_OK;
    }
    return tcp_bootstrap_fetch(host, plan->master_addr, plan->port, s->rank, s->world, id,
                               sizeof *id, s->timeout_s) ? GB_ERR_SYSTEM : GB_OK;
}

/* Creates the non-blocking communicator and waits, up to timeout_s, for every rank to
 * join it; then starts the watchdog. */
static gb_status open_comm(nccl_comm *s, const ncclUniqueId *id)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.commName = "gearbox";
    const op_desc setup = {.kind = OP_SETUP};
    ncclResult_t r = ncclCommInitRankConfig(&s->comm, s->world, *id, s->rank, &config);
    gb_status st = finish_op(s, &setup, r == ncclSuccess || r == ncclInProgress
                                            ? wait_settled(s) : nccl_error(r));
    if (st != GB_OK)
        return st;
    int e = pthread_create(&s->watchdog, NULL, watchdog_main, s);
    if (e == 0) {
        s->watchdog_started = 1;
        return GB_OK;
    }
    s->host->set_error(s->host, "comm/nccl: cannot start its watchdog thread: %s", strerror(e));
    return GB_ERR_SYSTEM;
}

static void nccl_destroy(void *self);

static gb_status nccl_create(const gb_host *host, const gb_value *options,
                             const gb_device_ctx *device, void **self)
{
    if (!host || !options || !device || !self)
        return GB_ERR_INVALID_ARG;
    if (device->device != GB_DEVICE_CUDA) {
        host->set_error(host, "comm/nccl runs on device = cuda; this run's device is %s: use "
                        "[comm] plugin = single or mpi",
                        device->device == GB_DEVICE_CPU ? "cpu" : "not a CUDA GPU");
        return GB_ERR_UNSUPPORTED;
    }
    gb_status st = gb_cuda_select_gpu(host, "comm/nccl", device->ordinal,
                                      "[comm] plugin = single or mpi");
    if (st != GB_OK)
        return st;
    launch_plan plan;
    if (launch_read_env(host, &plan) != 0)
        return GB_ERR_CONFIG;

    nccl_comm *s = host->alloc(host, sizeof *s);
    if (!s) {
        host->set_error(host, "out of memory");
        return GB_ERR_NO_MEMORY;
    }
    *s = (nccl_comm){
        .host = host,
        .timeout_s = options[OPT_TIMEOUT_S].f,
        .rank = plan.rank,
        .world = plan.world,
        .ordinal = device->ordinal,
        .compute = (cudaStream_t)device->stream,
        .oldest = 1,
    };
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &monotonic);
    pthread_condattr_destroy(&monotonic);
    ncclUniqueId id;
    if ((st = create_device_resources(s, options[OPT_OVERLAP].i != 0)) != GB_OK ||
        (st = share_unique_id(s, &plan, &id)) != GB_OK || (st = open_comm(s, &id)) != GB_OK) {
        nccl_destroy(s);
        return st;
    }
    int version = 0;
    ncclGetVersion(&version);
    char local_rank[32] = "";
    if (plan.local_rank >= 0)
        snprintf(local_rank, sizeof local_rank, " (LOCAL_RANK %d)", plan.local_rank);
    host->log(host, GB_LOG_INFO, "comm/nccl: rank %d of %d on GPU %d%s, NCCL %d.%d.%d, started "
              "by %s, collectives %s", s->rank, s->world, s->ordinal, local_rank,
              version / 10000, version / 100 % 100, version % 100,
              plan.kind == LAUNCH_MPI   ? "mpirun (OMPI_COMM_WORLD_*)"
              : plan.kind == LAUNCH_TCP ? "RANK and WORLD_SIZE"
                                        : "no launcher",
              s->stream == s->compute ? "on the compute stream" : "on a stream of their own");
    *self = s;
    return GB_OK;
}

/* ---- destroy --------------------------------------------------------------------------- */

static void stop_watchdog(nccl_comm *s)
{
    if (!s->watchdog_started)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->watchdog, NULL);
    s->watchdog_started = 0;
}

/* The orderly end: finalize (completes outstanding work, agrees with the peers), then
 * destroy; abort instead when that fails or exceeds timeout_s, so shutdown cannot hang.
 * destroy() reports nothing to the core, so a failure here is only logged. */
static void close_comm(nccl_comm *s)
{
    ncclResult_t r = ncclCommFinalize(s->comm);
    op_result w = r == ncclSuccess || r == ncclInProgress ? wait_settled(s) : nccl_error(r);
    if (w.end == OP_DONE) {
        ncclCommDestroy(s->comm);
        s->comm = NULL;
        return;
    }
    s->host->log(s->host, GB_LOG_WARN, "rank %d: NCCL communicator shutdown %s%s; aborting it "
                 "instead", s->rank, w.end == OP_TIMEOUT ? "exceeded timeout_s" : "failed: ",
                 w.end == OP_TIMEOUT ? ""
                 : w.end == OP_NCCL_ERROR ? ncclGetErrorString(w.nccl)
                                          : cudaGetErrorString(w.cuda));
    abort_comm(s);
}

static void nccl_destroy(void *self)
{
    nccl_comm *s = self;
    if (!s)
        return;
    cudaSetDevice(s->ordinal);
    stop_watchdog(s);
    if (s->comm)
        close_comm(s);
    if (s->stream && s->stream != s->compute)
        cudaStreamDestroy(s->stream);
    if (s->ready)
        cudaEventDestroy(s->ready);
    for (int i = 0; i < WATCH_SLOTS; i++)
        if (s->ring[i].done)
            cudaEventDestroy(s->ring[i].done);
    cudaFree(s->barrier_word);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    s->host->free(s->host, s);
}

/* ---- topology and collectives ---------------------------------------------------------- */

static int nccl_rank(void *self)
{
    return ((nccl_comm *)self)->rank;
}

static int nccl_world(void *self)
{
    return ((nccl_comm *)self)->world;
}

/* NCCL's name for `dtype`; 0 when NCCL cannot reduce it. */
static int nccl_type_of(gb_dtype dtype, ncclDataType_t *type)
{
    switch (dtype) {
    case GB_F32: *type = ncclFloat32; return 1;
    case GB_BF16: *type = ncclBfloat16; return 1;
    case GB_F16: *type = ncclFloat16; return 1;
    case GB_I32: *type = ncclInt32; return 1;
    case GB_U16: return 0;
    }
    return 0;
}

/* The arguments of all_reduce_start, checked; GB_OK with NCCL's type in *type. */
static gb_status check_all_reduce(nccl_comm *s, const void *buf, int64_t count, gb_dtype dtype,
                                  gb_reduce_op op, const gb_comm_request *request,
                                  ncclDataType_t *type)
{
    const gb_host *host = s->host;
    gb_status st = gb_comm_check_all_reduce(host, buf, count, dtype, op, request);
    if (st != GB_OK)
        return st;
    if (!nccl_type_of(dtype, type)) {
        host->set_error(host, "all_reduce: NCCL has no reduction for dtype %s (f32, bf16, f16 and "
                        "i32 are supported)", gb_dtype_name(dtype));
        return GB_ERR_UNSUPPORTED;
    }
    return gb_comm_check_room(host, s->n_inflight);
}

/* One collective's buffers and NCCL arguments, as the queueing below takes them. */
typedef struct nccl_call {
    const void *send;
    void *recv;
    ncclDataType_t type;
    ncclRedOp_t op;
} nccl_call;

/* Queues collective `desc` (all-reduce, reduce-scatter or all-gather) after the compute
 * stream's work so far and watches it. Called with the lock held. */
static gb_status queue_collective(nccl_comm *s, const nccl_call *c, const op_desc *desc)
{
    cudaError_t e = order_after_compute(s);
    if (e != cudaSuccess)
        return finish_op(s, desc, cuda_error(e));
    size_t count = (size_t)desc->count;
    ncclResult_t r;
    if (desc->kind == OP_REDUCE_SCATTER)
        r = ncclReduceScatter(c->send, c->recv, count, c->type, c->op, s->comm, s->stream);
    else if (desc->kind == OP_ALL_GATHER)
        r = ncclAllGather(c->send, c->recv, count, c->type, s->comm, s->stream);
    else
        r = ncclAllReduce(c->send, c->recv, count, c->type, c->op, s->comm, s->stream);
    gb_status st = check_enqueued(s, r, desc);
    return st == GB_OK ? watch(s, desc) : st;
}

static ncclRedOp_t nccl_op_of(gb_reduce_op op)
{
    return op == GB_REDUCE_AVG ? ncclAvg : ncclSum;
}

/* Queues a reduction (`kind`: all-reduce or reduce-scatter, `count` elements per rank)
 * and hands out its request, which all_reduce_wait completes. */
static gb_status start_reduction(nccl_comm *s, op_kind kind, const nccl_call *c, int64_t count,
                                 gb_dtype dtype, gb_comm_request *request)
{
    pthread_mutex_lock(&s->lock);
    gb_status st = make_room(s, kind == OP_ALL_REDUCE ? "all_reduce" : "reduce_scatter");
    if (st == GB_OK) {
        const op_desc desc = {.kind = kind, .seq = ++s->seq, .count = count, .dtype = dtype};
        if ((st = queue_collective(s, c, &desc)) == GB_OK) {
            int slot = 0;
            while (s->requests[slot] != 0)
                slot++;
            s->requests[slot] = desc.seq;
            s->n_inflight++;
            *request = desc.seq;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

static gb_status nccl_all_reduce_start(void *self, void *buf, int64_t count, gb_dtype dtype,
                                       gb_reduce_op op, gb_comm_request *request)
{
    nccl_comm *s = self;
    ncclDataType_t type;
    gb_status st = check_all_reduce(s, buf, count, dtype, op, request, &type);
    if (st != GB_OK)
        return st;
    const nccl_call c = {buf, buf, type, nccl_op_of(op)};
    return start_reduction(s, OP_ALL_REDUCE, &c, count, dtype, request);
}

static gb_status nccl_reduce_scatter_start(void *self, void *send, void *recv,
                                           int64_t recv_count, gb_dtype dtype, gb_reduce_op op,
                                           gb_comm_request *request)
{
    nccl_comm *s = self;
    ncclDataType_t type;
    gb_status st = check_all_reduce(s, recv, recv_count, dtype, op, request, &type);
    if (st != GB_OK)
        return st;
    if (recv_count > 0 && !send) {
        s->host->set_error(s->host, "reduce_scatter_start: send is NULL");
        return GB_ERR_INVALID_ARG;
    }
    const nccl_call c = {send, recv, type, nccl_op_of(op)};
    return start_reduction(s, OP_REDUCE_SCATTER, &c, recv_count, dtype, request);
}

/* Work queued on the compute stream from now on starts after collective #seq: a wait on
 * its end event, unless it runs on the compute stream or was already seen complete. */
static gb_status compute_waits_for(nccl_comm *s, int64_t seq)
{
    if (s->stream == s->compute || seq < s->oldest)
        return GB_OK;
    watched *w = watched_of(s, seq);
    cudaError_t e = cudaStreamWaitEvent(s->compute, w->done, 0);
    return e == cudaSuccess ? GB_OK : finish_op(s, &w->op, cuda_error(e));
}

static gb_status nccl_all_reduce_wait(void *self, gb_comm_request request)
{
    nccl_comm *s = self;
    int slot = 0;
    while (slot < GB_COMM_MAX_INFLIGHT && (request <= 0 || s->requests[slot] != request))
        slot++;
    if (slot == GB_COMM_MAX_INFLIGHT) {
        s->host->set_error(s->host, "all_reduce_wait: request %lld is not outstanding",
                           (long long)request);
        return GB_ERR_INVALID_ARG;
    }
    s->requests[slot] = 0;
    s->n_inflight--;
    pthread_mutex_lock(&s->lock);
    gb_status st = check_usable(s, "all_reduce_wait");
    if (st == GB_OK)
        st = compute_waits_for(s, request);
    pthread_mutex_unlock(&s->lock);
    return st;
}

static gb_status nccl_broadcast(void *self, void *buf, size_t bytes, int root)
{
    nccl_comm *s = self;
    gb_status st = gb_comm_check_broadcast(s->host, buf, bytes, root, s->world);
    if (st != GB_OK)
        return st;
    pthread_mutex_lock(&s->lock);
    st = make_room(s, "broadcast");
    if (st == GB_OK) {
        const op_desc desc = {.kind = OP_BROADCAST, .seq = ++s->seq, .count = (int64_t)bytes,
                              .root = root};
        cudaError_t e = order_after_compute(s);
        if (e != cudaSuccess) {
            st = finish_op(s, &desc, cuda_error(e));
        } else {
            ncclResult_t r = ncclBroadcast(buf, buf, bytes, ncclUint8, root, s->comm, s->stream);
            if ((st = check_enqueued(s, r, &desc)) == GB_OK && (st = watch(s, &desc)) == GB_OK)
                st = wait_blocking(s, &desc, "broadcast");
        }
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* Queued like an all-reduce; the compute stream waits for it at once (comm.h). */
static gb_status nccl_all_gather(void *self, const void *send, void *recv, int64_t send_count,
                                 gb_dtype dtype)
{
    nccl_comm *s = self;
    ncclDataType_t type;
    gb_status st = gb_comm_check_all_gather(s->host, send, recv, send_count, dtype);
    if (st != GB_OK)
        return st;
    if (!nccl_type_of(dtype, &type)) {
        s->host->set_error(s->host, "all_gather: dtype %s has no NCCL type (f32, bf16, f16 and "
                           "i32 are supported)", gb_dtype_name(dtype));
        return GB_ERR_UNSUPPORTED;
    }
    pthread_mutex_lock(&s->lock);
    if ((st = make_room(s, "all_gather")) == GB_OK) {
        const op_desc desc = {.kind = OP_ALL_GATHER, .seq = ++s->seq, .count = send_count,
                              .dtype = dtype};
        const nccl_call c = {send, recv, type, ncclSum};
        if ((st = queue_collective(s, &c, &desc)) == GB_OK)
            st = compute_waits_for(s, desc.seq);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* Every rank adds its 0 to barrier_word: the all-reduce completes only once all ranks
 * have reached it, and the word stays 0. */
static gb_status nccl_barrier(void *self)
{
    nccl_comm *s = self;
    pthread_mutex_lock(&s->lock);
    gb_status st = make_room(s, "barrier");
    if (st == GB_OK) {
        const op_desc desc = {.kind = OP_BARRIER, .seq = ++s->seq, .count = 1};
        const nccl_call c = {s->barrier_word, s->barrier_word, ncclInt32, ncclSum};
        if ((st = queue_collective(s, &c, &desc)) == GB_OK)
            st = wait_blocking(s, &desc, "barrier");
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

GB_COMM_PLUGIN("nccl", "1.0.0",
               "NCCL collectives between GPUs, one process per GPU (mpirun or "
               "torchrun-style launch)",
               GB_DEVICE_CUDA, GB_DTYPE_BIT(GB_F32) | GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16),
               GB_CAP_DETERMINISTIC, GB_OPTIONS(nccl_options), .create = nccl_create,
               .destroy = nccl_destroy, .rank = nccl_rank, .world = nccl_world,
               .all_reduce_start = nccl_all_reduce_start, .all_reduce_wait = nccl_all_reduce_wait,
               .broadcast = nccl_broadcast, .barrier = nccl_barrier,
               .reduce_scatter_start = nccl_reduce_scatter_start, .all_gather = nccl_all_gather)
