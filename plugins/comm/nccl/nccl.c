/* Communication over NCCL: the collectives of data-parallel training between GPUs, one
 * process per GPU, within a node (NVLink, PCIe) and across nodes (InfiniBand, RoCE, TCP).
 *
 * create() learns its rank and world from the launcher (launch.c: Open MPI's mpirun
 * variables, torchrun-style variables, or neither for a world of 1), carries rank 0's
 * ncclUniqueId to every rank over TCP (tcp_bootstrap.c: under mpirun too, so the plugin
 * links no MPI library; rank 0's address is MASTER_ADDR:MASTER_PORT, with the defaults
 * launch.c documents) and opens a non-blocking communicator on the device
 * context's GPU. Collectives are enqueued on the context's stream, so they follow the
 * kernels that produced their buffers and precede the kernels that read the results,
 * without a host synchronisation in between.
 *
 * Nothing waits without a limit. Every wait polls cudaEventQuery and
 * ncclCommGetAsyncError until the work is done, NCCL reports an error, or `timeout_s`
 * passes; on failure the communicator is aborted (ncclCommAbort also stops kernels stuck
 * waiting for a dead peer) and the message names the operation (#seq, count, dtype).
 * After an abort every call fails at once: a rank cannot go on without its peers.
 * Each all-reduce request owns one event of a pool created at create(), so
 * all_reduce_start allocates nothing; requests may complete in any order.
 *
 * The GPU is the device context's ordinal: the core picks it ([device] ordinal, else
 * LOCAL_RANK, or OMPI_COMM_WORLD_LOCAL_RANK under mpirun) and hands it to the device
 * plugin as gb_host.device_ordinal (ABI 1.2), which opens that GPU and reports it here;
 * two ranks on one GPU are refused by NCCL at setup.
 *
 * Deliberately left out: a separate communication stream (all-reduce runs in order with
 * the kernels of the context's stream), buffer registration, and recovery after a
 * failure (the core ends the run; a restart resumes from its checkpoint).
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "cuda_status.h"
#include "gearbox/comm.h"
#include "launch.h"
#include "monotonic.h"
#include "tcp_bootstrap.h"

enum { OPT_TIMEOUT_S };

static const gb_option nccl_options[] = {
    [OPT_TIMEOUT_S] = {"timeout_s", GB_OPT_FLOAT, "300", 1, 86400, NULL,
                       "seconds the rendezvous, or any one collective, may take before the run "
                       "is aborted (a peer rank died or hangs), in [1, 86400]"},
};

/* An all-reduce in flight; slot i of the pool records into event i. */
typedef struct request_slot {
    gb_comm_request request;   /* its id (= its #seq); 0 while the slot is free */
    int64_t count;
    gb_dtype dtype;
} request_slot;

typedef struct nccl_comm {
    const gb_host *host;
    double timeout_s;
    int rank, world, ordinal;
    cudaStream_t stream;          /* the device context's stream */
    ncclComm_t comm;              /* NULL before setup and after an abort */
    char failure[160];            /* after an abort: what failed */
    int32_t *barrier_word;        /* one device int, always 0, that barrier() all-reduces */
    int64_t seq;                  /* collectives issued so far on this communicator */
    int n_inflight;
    request_slot slots[GB_COMM_MAX_INFLIGHT];
    /* events[i] belongs to slots[i]; the last one serves broadcast and barrier */
    cudaEvent_t events[GB_COMM_MAX_INFLIGHT + 1];
} nccl_comm;

/* ---- describing failures --------------------------------------------------------------- */

typedef enum op_kind { OP_SETUP, OP_ALL_REDUCE, OP_BROADCAST, OP_BARRIER } op_kind;

/* One operation on the communicator, as error messages name it. */
typedef struct op_desc {
    op_kind kind;
    int64_t seq;      /* collectives: the how-manieth on this communicator, from 1 */
    int64_t count;    /* all_reduce: elements; broadcast: bytes */
    gb_dtype dtype;   /* all_reduce */
    int root;         /* broadcast */
} op_desc;

static void describe(const op_desc *op, char *out, size_t size)
{
    switch (op->kind) {
    case OP_SETUP:
        snprintf(out, size, "NCCL communicator setup");
        break;
    case OP_ALL_REDUCE:
        snprintf(out, size, "all_reduce #%lld (%lld x %s)", (long long)op->seq,
                 (long long)op->count, gb_dtype_name(op->dtype));
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

/* ---- waiting --------------------------------------------------------------------------- */

typedef enum wait_end { WAIT_DONE, WAIT_TIMEOUT, WAIT_NCCL_ERROR, WAIT_CUDA_ERROR } wait_end;

typedef struct wait_result {
    wait_end end;
    ncclResult_t nccl;   /* WAIT_NCCL_ERROR */
    cudaError_t cuda;    /* WAIT_CUDA_ERROR */
} wait_result;

static const wait_result wait_done = {WAIT_DONE, ncclSuccess, cudaSuccess};

static wait_result nccl_error(ncclResult_t r)
{
    return (wait_result){WAIT_NCCL_ERROR, r, cudaSuccess};
}

static wait_result cuda_error(cudaError_t e)
{
    return (wait_result){WAIT_CUDA_ERROR, ncclSuccess, e};
}

/* The communicator's state: ncclSuccess, ncclInProgress, or the error that broke it. */
static ncclResult_t comm_state(ncclComm_t comm)
{
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    return r == ncclSuccess ? state : r;
}

/* The first millisecond of a wait yields the core between polls, so a quick collective
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

/* Polls until `event` completes (with event NULL: until the communicator leaves
 * ncclInProgress, i.e. a setup, enqueue or finalize is done), NCCL reports an error, a
 * CUDA call fails, or timeout_s passes. */
static wait_result wait_for(nccl_comm *s, cudaEvent_t event)
{
    const double start = monotonic_s();
    for (;;) {
        ncclResult_t state = comm_state(s->comm);
        if (state != ncclSuccess && state != ncclInProgress)
            return nccl_error(state);
        if (!event) {
            if (state == ncclSuccess)
                return wait_done;
        } else {
            cudaError_t q = cudaEventQuery(event);
            if (q == cudaSuccess)
                return wait_done;
            if (q != cudaErrorNotReady)
                return cuda_error(q);
        }
        double waited = monotonic_s() - start;
        if (waited > s->timeout_s)
            return (wait_result){WAIT_TIMEOUT, ncclSuccess, cudaSuccess};
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

/* How an operation ended, as a status: GB_OK when its wait completed; otherwise writes
 * the error (before the abort, while ncclGetLastError still describes this
 * communicator), aborts the communicator and returns the failure's status. */
static gb_status finish_op(nccl_comm *s, const op_desc *op, wait_result why)
{
    const gb_host *host = s->host;
    char what[96];
    describe(op, what, sizeof what);
    gb_status status = GB_ERR_SYSTEM;
    switch (why.end) {
    case WAIT_DONE:
        return GB_OK;
    case WAIT_TIMEOUT:
        host->set_error(host, "%s did not complete within timeout_s = %g s on rank %d of %d: %s; "
                        "the communicator was aborted", what, s->timeout_s, s->rank, s->world,
                        timeout_hint(op->kind));
        snprintf(s->failure, sizeof s->failure, "%s timed out", what);
        break;
    case WAIT_NCCL_ERROR: {
        const char *detail = ncclGetLastError(s->comm);
        const char *hint = why.nccl == ncclRemoteError
                               ? " (a peer rank died or its network failed)"
                           : why.nccl == ncclInvalidUsage && op->kind == OP_SETUP
                               ? " (every rank needs a GPU of its own: ranks sharing a node need "
                                 "different device ordinals, usually LOCAL_RANK)"
                               : "";
        host->set_error(host, "%s failed on rank %d of %d: NCCL %s%s%s%s; the communicator was "
                        "aborted", what, s->rank, s->world, ncclGetErrorString(why.nccl),
                        detail && *detail ? ": " : "", detail ? detail : "", hint);
        snprintf(s->failure, sizeof s->failure, "%s failed (NCCL %s)", what,
                 ncclGetErrorString(why.nccl));
        status = status_of(why.nccl);
        break;
    }
    case WAIT_CUDA_ERROR:
        host->set_error(host, "%s failed on rank %d of %d (GPU %d): CUDA %s: %s; the communicator "
                        "was aborted", what, s->rank, s->world, s->ordinal,
                        cudaGetErrorName(why.cuda), cudaGetErrorString(why.cuda));
        snprintf(s->failure, sizeof s->failure, "%s failed (CUDA %s)", what,
                 cudaGetErrorName(why.cuda));
        status = GB_ERR_DEVICE;
        break;
    }
    abort_comm(s);
    return status;
}

/* What an NCCL call returned. A non-blocking communicator answers ncclInProgress while
 * it still prepares the operation (it connects to its peers on first use); only once
 * its state leaves ncclInProgress is the work on the stream for an event to follow. */
static gb_status check_enqueued(nccl_comm *s, ncclResult_t r, const op_desc *op)
{
    if (r == ncclSuccess)
        return GB_OK;
    return finish_op(s, op, r == ncclInProgress ? wait_for(s, NULL) : nccl_error(r));
}

/* Waits, on the spare event, for the collective just enqueued (broadcast, barrier). */
static gb_status wait_blocking(nccl_comm *s, const op_desc *op)
{
    cudaEvent_t event = s->events[GB_COMM_MAX_INFLIGHT];
    cudaError_t e = cudaEventRecord(event, s->stream);
    return finish_op(s, op, e == cudaSuccess ? wait_for(s, event) : cuda_error(e));
}

/* GB_OK while the communicator is usable; after an abort, says what broke it. */
static gb_status check_usable(nccl_comm *s, const char *call)
{
    if (s->comm)
        return GB_OK;
    s->host->set_error(s->host, "%s: the NCCL communicator was aborted after %s; this rank can "
                       "no longer communicate", call, s->failure);
    return GB_ERR_SYSTEM;
}

/* ---- create ---------------------------------------------------------------------------- */

/* The event pool and the barrier's device int: everything the collectives need later. */
static gb_status create_device_resources(nccl_comm *s)
{
    const gb_host *host = s->host;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i <= GB_COMM_MAX_INFLIGHT && e == cudaSuccess; i++)
        if ((e = cudaEventCreateWithFlags(&s->events[i], cudaEventDisableTiming)) != cudaSuccess)
            s->events[i] = NULL;
    void *word = NULL;
    if (e == cudaSuccess && (e = cudaMalloc(&word, sizeof *s->barrier_word)) == cudaSuccess)
        s->barrier_word = word;
    /* on the context's stream, so the first barrier is ordered after it */
    if (e == cudaSuccess)
        e = cudaMemsetAsync(s->barrier_word, 0, sizeof *s->barrier_word, s->stream);
    if (e == cudaSuccess)
        return GB_OK;
    host->set_error(host, "comm/nccl: creating its events and barrier word on GPU %d failed: %s "
                    "(%s)", s->ordinal, cudaGetErrorName(e), cudaGetErrorString(e));
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
 * join it. */
static gb_status open_comm(nccl_comm *s, const ncclUniqueId *id)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.commName = "gearbox";
    const op_desc setup = {.kind = OP_SETUP};
    ncclResult_t r = ncclCommInitRankConfig(&s->comm, s->world, *id, s->rank, &config);
    return finish_op(s, &setup, r == ncclSuccess || r == ncclInProgress ? wait_for(s, NULL)
                                                                      : nccl_error(r));
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
        .stream = (cudaStream_t)device->stream,
    };
    ncclUniqueId id;
    if ((st = create_device_resources(s)) != GB_OK ||
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
              "by %s", s->rank, s->world, s->ordinal, local_rank, version / 10000,
              version / 100 % 100, version % 100,
              plan.kind == LAUNCH_MPI   ? "mpirun (OMPI_COMM_WORLD_*)"
              : plan.kind == LAUNCH_TCP ? "RANK and WORLD_SIZE"
                                        : "no launcher");
    *self = s;
    return GB_OK;
}

/* ---- destroy --------------------------------------------------------------------------- */

/* The orderly end: finalize (completes outstanding work, agrees with the peers), then
 * destroy; abort instead when that fails or exceeds timeout_s, so shutdown cannot hang.
 * destroy() reports nothing to the core, so a failure here is only logged. */
static void close_comm(nccl_comm *s)
{
    ncclResult_t r = ncclCommFinalize(s->comm);
    wait_result w = r == ncclSuccess || r == ncclInProgress ? wait_for(s, NULL) : nccl_error(r);
    if (w.end == WAIT_DONE) {
        ncclCommDestroy(s->comm);
        s->comm = NULL;
        return;
    }
    s->host->log(s->host, GB_LOG_WARN, "rank %d: NCCL communicator shutdown %s%s; aborting it "
                 "instead", s->rank, w.end == WAIT_TIMEOUT ? "exceeded timeout_s" : "failed: ",
                 w.end == WAIT_TIMEOUT ? ""
                 : w.end == WAIT_NCCL_ERROR ? ncclGetErrorString(w.nccl)
                                            : cudaGetErrorString(w.cuda));
    abort_comm(s);
}

static void nccl_destroy(void *self)
{
    nccl_comm *s = self;
    if (!s)
        return;
    cudaSetDevice(s->ordinal);
    if (s->comm)
        close_comm(s);
    for (int i = 0; i <= GB_COMM_MAX_INFLIGHT; i++)
        if (s->events[i])
            cudaEventDestroy(s->events[i]);
    cudaFree(s->barrier_word);
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

static gb_status nccl_all_reduce_start(void *self, void *buf, int64_t count, gb_dtype dtype,
                                       gb_reduce_op op, gb_comm_request *request)
{
    nccl_comm *s = self;
    const gb_host *host = s->host;
    ncclDataType_t type;
    if (!request || count < 0 || (count > 0 && !buf)) {
        host->set_error(host, "all_reduce: needs a request pointer and a buffer of count >= 0");
        return GB_ERR_INVALID_ARG;
    }
    if (gb_dtype_size(dtype) == 0 || (op != GB_REDUCE_SUM && op != GB_REDUCE_AVG)) {
        host->set_error(host, "all_reduce: unknown dtype %d or reduce op %d", (int)dtype, (int)op);
        return GB_ERR_INVALID_ARG;
    }
    if (!nccl_type_of(dtype, &type)) {
        host->set_error(host, "all_reduce: NCCL has no reduction for dtype %s (f32, bf16, f16 and "
                        "i32 are supported)", gb_dtype_name(dtype));
        return GB_ERR_UNSUPPORTED;
    }
    if (s->n_inflight == GB_COMM_MAX_INFLIGHT) {
        host->set_error(host, "all_reduce: %d requests already outstanding (the limit)",
                        GB_COMM_MAX_INFLIGHT);
        return GB_ERR_INVALID_ARG;
    }
    gb_status st = check_usable(s, "all_reduce");
    if (st != GB_OK)
        return st;
    int slot = 0;
    while (s->slots[slot].request != 0)
        slot++;
    const op_desc desc = {.kind = OP_ALL_REDUCE, .seq = ++s->seq, .count = count, .dtype = dtype};
    ncclResult_t r = ncclAllReduce(buf, buf, (size_t)count, type,
                                   op == GB_REDUCE_AVG ? ncclAvg : ncclSum, s->comm, s->stream);
    if ((st = check_enqueued(s, r, &desc)) != GB_OK)
        return st;
    cudaError_t e = cudaEventRecord(s->events[slot], s->stream);
    if (e != cudaSuccess)
        return finish_op(s, &desc, cuda_error(e));
    s->slots[slot] = (request_slot){.request = desc.seq, .count = count, .dtype = dtype};
    s->n_inflight++;
    *request = desc.seq;
    return GB_OK;
}

static gb_status nccl_all_reduce_wait(void *self, gb_comm_request request)
{
    nccl_comm *s = self;
    int slot = 0;
    while (slot < GB_COMM_MAX_INFLIGHT && (request <= 0 || s->slots[slot].request != request))
        slot++;
    if (slot == GB_COMM_MAX_INFLIGHT) {
        s->host->set_error(s->host, "all_reduce_wait: request %lld is not outstanding",
                           (long long)request);
        return GB_ERR_INVALID_ARG;
    }
    const request_slot done = s->slots[slot];
    s->slots[slot].request = 0;
    s->n_inflight--;
    gb_status st = check_usable(s, "all_reduce_wait");
    if (st != GB_OK)
        return st;
    const op_desc desc = {.kind = OP_ALL_REDUCE, .seq = done.request, .count = done.count,
                          .dtype = done.dtype};
    return finish_op(s, &desc, wait_for(s, s->events[slot]));
}

static gb_status nccl_broadcast(void *self, void *buf, size_t bytes, int root)
{
    nccl_comm *s = self;
    if (root < 0 || root >= s->world) {
        s->host->set_error(s->host, "broadcast: root %d does not exist in a world of %d", root,
                           s->world);
        return GB_ERR_INVALID_ARG;
    }
    if (bytes > 0 && !buf) {
        s->host->set_error(s->host, "broadcast: NULL buffer of %zu bytes", bytes);
        return GB_ERR_INVALID_ARG;
    }
    gb_status st = check_usable(s, "broadcast");
    if (st != GB_OK)
        return st;
    const op_desc desc = {.kind = OP_BROADCAST, .seq = ++s->seq, .count = (int64_t)bytes,
                          .root = root};
    ncclResult_t r = ncclBroadcast(buf, buf, bytes, ncclUint8, root, s->comm, s->stream);
    if ((st = check_enqueued(s, r, &desc)) != GB_OK)
        return st;
    return wait_blocking(s, &desc);
}

/* Every rank adds its 0 to barrier_word: the all-reduce completes only once all ranks
 * have reached it, and the word stays 0. */
static gb_status nccl_barrier(void *self)
{
    nccl_comm *s = self;
    gb_status st = check_usable(s, "barrier");
    if (st != GB_OK)
        return st;
    const op_desc desc = {.kind = OP_BARRIER, .seq = ++s->seq};
    ncclResult_t r = ncclAllReduce(s->barrier_word, s->barrier_word, 1, ncclInt32, ncclSum,
                                   s->comm, s->stream);
    if ((st = check_enqueued(s, r, &desc)) != GB_OK)
        return st;
    return wait_blocking(s, &desc);
}

static const gb_comm_ops nccl_ops = {
    .struct_size = sizeof(gb_comm_ops),
    .create = nccl_create,
    .destroy = nccl_destroy,
    .rank = nccl_rank,
    .world = nccl_world,
    .all_reduce_start = nccl_all_reduce_start,
    .all_reduce_wait = nccl_all_reduce_wait,
    .broadcast = nccl_broadcast,
    .barrier = nccl_barrier,
};

GB_PLUGIN_DEFINE_CAPS(GB_KIND_COMM, "nccl", "1.0.0",
                      "NCCL collectives between GPUs, one process per GPU (mpirun or "
                      "torchrun-style launch)",
                      GB_DEVICE_CUDA,
                      GB_DTYPE_BIT(GB_F32) | GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16),
                      GB_CAP_DETERMINISTIC, GB_OPTIONS(nccl_options), nccl_ops)
