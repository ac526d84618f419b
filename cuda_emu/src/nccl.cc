/* The NCCL double: the entry points of nccl.h that plugins/comm/nccl calls, for worlds of
 * one process per rank, each an emulated GPU.
 *
 * Covered: ncclGetVersion (the header's NCCL_VERSION_CODE), ncclGetUniqueId (a marker and
 * a random token), ncclCommInitRank, ncclCommInitRankConfig, ncclCommGetAsyncError,
 * ncclCommFinalize, ncclCommDestroy, ncclCommAbort, ncclCommCount, ncclCommUserRank,
 * ncclCommCuDevice, ncclGetErrorString, ncclGetLastError, ncclAllReduce (sum, prod, max,
 * min, avg), ncclBroadcast, ncclReduceScatter and ncclAllGather. A collective is queued on its stream with gb_emu::enqueue:
 * it runs in order with the kernels around it, when something waits for the stream, and
 * is the only code here that touches device memory. With one rank every reduction and the
 * broadcast leave recvbuff equal to sendbuff, so it is a copy (none when in place); with
 * several, the ranks meet in shared memory named by the unique id and exchange the data
 * (nccl_world.cc), the reductions in rank order, so every rank gets the same bits.
 *
 * A non-blocking communicator (config.blocking = 0) behaves as NCCL allows:
 * ncclCommInitRankConfig and ncclCommFinalize answer ncclInProgress, and
 * ncclCommGetAsyncError reports ncclSuccess once the operation is done (a finalize at
 * once; a setup once every rank has joined); until then the communicator may not be used
 * (ncclInvalidArgument, as NCCL says for a communicator used too early). Collectives
 * answer ncclSuccess in both modes. A blocking setup waits for every rank to join.
 *
 * Asynchronous errors: a collective that cannot complete because a rank died or left
 * (ncclRemoteError, naming the rank), or because the ranks called different collectives
 * (ncclInvalidUsage), leaves its error on the communicator: ncclCommGetAsyncError reports
 * it, ncclGetLastError(comm) says why and later calls to queue a collective return it. As
 * on a GPU, where NCCL's kernels stay stuck on a lost peer, the failed collective stays in
 * flight (recvbuff unfinished) until ncclCommAbort, and so does one waiting for a rank
 * that hangs; the collectives queued after it then do nothing.
 *
 * Checks, made when a call is made (what a GPU would only show later, if at all): the
 * communicator is one made here and neither destroyed nor aborted (handles are never
 * freed, so a stale one is recognised), datatype and op are NCCL's built-in ones, the
 * byte count does not overflow, sendbuff and recvbuff are device memory large enough
 * (gb_emu::find_allocation) and, unless in place (equal; for ncclReduceScatter recvbuff at
 * sendbuff + rank * recvcount, for ncclAllGather sendbuff at recvbuff + rank * sendcount),
 * do not overlap. A failure returns
 * ncclInvalidArgument (ncclInvalidUsage for a finalized communicator) and
 * ncclGetLastError says which argument was wrong and why. The last error is kept per
 * thread: NCCL keeps one per process, but a caller reads it on the thread that failed.
 *
 * Left out: every other entry point (groups, split, send/recv, user reduction ops, buffer
 * registration), and fp8 reductions between ranks.
 */
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <set>
#include <string>

#include "counters.h"
#include "emu.h"
#include "nccl_world.h"

/* The opaque type behind ncclComm_t. */
struct ncclComm {
    enum class phase { live, finalized, destroyed, aborted };
    int rank = 0;
    int nranks = 1;
    int device = 0;            /* the current CUDA device at initialization */
    bool blocking = true;
    bool in_progress = false;  /* answered ncclInProgress; ncclCommGetAsyncError ends it */
    bool joining = false;      /* a non-blocking setup waits for the other ranks */
    phase state = phase::live;
    gb_emu::nccl_world *world = nullptr;   /* the other ranks; none in a world of 1 */
    unsigned long long collectives = 0;    /* queued so far, numbering them in messages */
    std::atomic<bool> stopped{false};      /* destroyed or aborted: queued work does nothing */
    /* The first asynchronous error, set by queued work; the message is written once, before
     * the result is published. */
    std::atomic<ncclResult_t> async_result{ncclSuccess};
    std::mutex async_lock;
    char async_message[512] = "";
};

namespace {

/* ---- errors ----------------------------------------------------------------------------- */

thread_local char last_error[512];

/* Records what went wrong for ncclGetLastError and returns `result`. */
ncclResult_t fail(ncclResult_t result, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t fail(ncclResult_t result, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return result;
}

/* ---- communicators ------------------------------------------------------------------------ */

/* Every communicator ever made. None is freed, so a handle used after ncclCommDestroy or
 * ncclCommAbort is still recognised as such rather than read as freed memory. The
 * registry itself is never destroyed: no static destructor can race a late call. */
struct registry {
    std::mutex lock;
    std::set<const ncclComm *> made;
};

registry &comms()
{
    static registry *r = new registry;
    return *r;
}

/* Adds comm to the registry; false when out of memory (exceptions stop at the C ABI). */
bool remember(const ncclComm *comm)
{
    std::lock_guard<std::mutex> hold(comms().lock);
    try {
        comms().made.insert(comm);
    } catch (const std::bad_alloc &) {
        return false;
    }
    return true;
}

/* ncclSuccess when comm was made here and is neither destroyed nor aborted. The caller
 * holds the registry's lock. */
ncclResult_t check_alive(const char *fn, const ncclComm *comm)
{
    if (!comm)
        return fail(ncclInvalidArgument, "%s: comm is NULL", fn);
    if (!comms().made.count(comm))
        return fail(ncclInvalidArgument, "%s: comm %p is not a communicator made by "
                    "ncclCommInitRank or ncclCommInitRankConfig", fn, (const void *)comm);
    if (comm->state == ncclComm::phase::destroyed)
        return fail(ncclInvalidArgument, "%s: comm %p was destroyed (ncclCommDestroy)", fn,
                    (const void *)comm);
    if (comm->state == ncclComm::phase::aborted)
        return fail(ncclInvalidArgument, "%s: comm %p was aborted (ncclCommAbort)", fn,
                    (const void *)comm);
    return ncclSuccess;
}

/* Alive, and its last operation seen complete: usable for a query or a collective. */
ncclResult_t check_settled(const char *fn, const ncclComm *comm)
{
    ncclResult_t r = check_alive(fn, comm);
    if (r == ncclSuccess && comm->in_progress)
        r = fail(ncclInvalidArgument, "%s: comm %p is used before its previous operation "
                 "completed: a non-blocking communicator must be polled with "
                 "ncclCommGetAsyncError until it reports ncclSuccess", fn, (const void *)comm);
    return r;
}

/* Settled, not finalized and without an asynchronous error (NCCL returns that error to
 * every call that queues work): ready for a collective. Takes the registry's lock. */
ncclResult_t check_ready(const char *fn, const ncclComm *comm)
{
    std::lock_guard<std::mutex> hold(comms().lock);
    ncclResult_t r = check_settled(fn, comm);
    if (r == ncclSuccess && comm->state == ncclComm::phase::finalized)
        r = fail(ncclInvalidUsage, "%s: comm %p was finalized (ncclCommFinalize); only "
                 "ncclCommDestroy may follow", fn, (const void *)comm);
    if (r == ncclSuccess && comm->async_result.load() != ncclSuccess)
        r = fail(comm->async_result.load(), "%s: comm %p has failed: %s", fn,
                 (const void *)comm, comm->async_message);
    return r;
}

/* What a call that may complete asynchronously answers: ncclInProgress on a non-blocking
 * communicator (the next ncclCommGetAsyncError completes it), else ncclSuccess. */
ncclResult_t answer(ncclComm *comm)
{
    comm->in_progress = !comm->blocking;
    return comm->blocking ? ncclSuccess : ncclInProgress;
}

/* config.blocking, checking what NCCL_CONFIG_INITIALIZER set up (NULL: blocking). */
ncclResult_t blocking_of(const char *fn, const ncclConfig_t *config, bool *blocking)
{
    *blocking = true;
    if (!config)
        return ncclSuccess;
    if (config->magic != 0xcafebeef)
        return fail(ncclInvalidArgument, "%s: config was not set up with "
                    "NCCL_CONFIG_INITIALIZER (magic 0x%x)", fn, config->magic);
    if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 0 &&
        config->blocking != 1)
        return fail(ncclInvalidArgument, "%s: config.blocking is %d (0 or 1)", fn,
                    config->blocking);
    *blocking = config->blocking != 0;
    return ncclSuccess;
}

/* Ends a communicator's life (destroy or abort); a NULL comm is accepted, as by NCCL. Its
 * rank leaves the world, and work still queued for it does nothing. */
ncclResult_t end_comm(const char *fn, ncclComm_t comm, ncclComm::phase how)
{
    if (!comm)
        return ncclSuccess;
    std::lock_guard<std::mutex> hold(comms().lock);
    ncclResult_t r = check_alive(fn, comm);
    if (r != ncclSuccess)
        return r;
    comm->state = how;
    comm->stopped.store(true);
    if (comm->world)
        gb_emu::nccl_world_leave(comm->world);
    return ncclSuccess;
}

/* Records the first asynchronous error of comm, from its queued work. */
void set_async_error(ncclComm *comm, ncclResult_t result, const std::string &why)
{
    std::lock_guard<std::mutex> hold(comm->async_lock);
    if (comm->async_result.load() != ncclSuccess)
        return;
    snprintf(comm->async_message, sizeof comm->async_message, "%s", why.c_str());
    comm->async_result.store(result);
}

/* While a setup is in progress: whether every rank has joined (ncclInProgress while not),
 * recording the error that ends it. The caller holds the registry's lock. */
ncclResult_t setup_state(ncclComm *comm)
{
    std::string why;
    ncclResult_t r = gb_emu::nccl_world_ready(comm->world, &why);
    if (r != ncclSuccess && r != ncclInProgress)
        set_async_error(comm, r, why);
    return r;
}

/* A blocking setup: waits (without a limit, as NCCL does) until every rank has joined. */
ncclResult_t wait_for_ranks(const char *fn, ncclComm *comm)
{
    for (;;) {
        ncclResult_t r;
        {
            std::lock_guard<std::mutex> hold(comms().lock);
            r = setup_state(comm);
        }
        if (r == ncclSuccess)
            return r;
        if (r != ncclInProgress)
            return fail(r, "%s: %s", fn, comm->async_message);
        usleep(1000);
    }
}

ncclResult_t init(const char *fn, ncclComm_t *out, int nranks, const ncclUniqueId &id, int rank,
                  const ncclConfig_t *config)
{
    if (!out)
        return fail(ncclInvalidArgument, "%s: comm (where the communicator goes) is NULL", fn);
    *out = nullptr;
    if (nranks < 1 || nranks > gb_emu::NCCL_WORLD_MAX_RANKS)
        return fail(ncclInvalidArgument, "%s: nranks %d is not in [1, %d] (the emulated "
                    "NCCL's largest world)", fn, nranks, gb_emu::NCCL_WORLD_MAX_RANKS);
    if (rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "%s: rank %d is not in [0, nranks = %d)", fn, rank,
                    nranks);
    bool blocking = true;
    ncclResult_t r = blocking_of(fn, config, &blocking);
    if (r != ncclSuccess)
        return r;
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess)
        return fail(ncclUnhandledCudaError, "%s: cudaGetDevice failed: %s", fn,
                    cudaGetErrorString(e));
    ncclComm *comm = new (std::nothrow) ncclComm;
    if (!comm)
        return fail(ncclSystemError, "%s: out of memory", fn);
    comm->rank = rank;
    comm->nranks = nranks;
    comm->device = device;
    comm->blocking = blocking;
    std::string why;
    if (nranks > 1 && !(comm->world = gb_emu::nccl_world_join(id, nranks, rank, device, &why))) {
        delete comm;
        return fail(ncclInvalidUsage, "%s: %s", fn, why.c_str());
    }
    if (!remember(comm)) {
        if (comm->world)
            gb_emu::nccl_world_leave(comm->world);
        delete comm;
        return fail(ncclSystemError, "%s: out of memory", fn);
    }
    comm->joining = comm->world != nullptr;
    if (comm->joining && blocking) {
        comm->joining = false;
        if ((r = wait_for_ranks(fn, comm)) != ncclSuccess) {
            end_comm(fn, comm, ncclComm::phase::aborted);   /* the caller gets no handle */
            return r;
        }
    }
    *out = comm;
    return answer(comm);
}

/* One query of a settled communicator into *out. */
ncclResult_t query(const char *fn, const ncclComm *comm, int *out, int ncclComm::*field)
{
    if (!out)
        return fail(ncclInvalidArgument, "%s: the output pointer is NULL", fn);
    std::lock_guard<std::mutex> hold(comms().lock);
    ncclResult_t r = check_settled(fn, comm);
    if (r == ncclSuccess)
        *out = comm->*field;
    return r;
}

/* ---- collectives -------------------------------------------------------------------------- */

struct type_info {
    const char *name;
    size_t size;
};

/* Indexed by ncclDataType_t. */
constexpr type_info types[] = {
    {"ncclInt8", 1},    {"ncclUint8", 1},   {"ncclInt32", 4},      {"ncclUint32", 4},
    {"ncclInt64", 8},   {"ncclUint64", 8},  {"ncclFloat16", 2},    {"ncclFloat32", 4},
    {"ncclFloat64", 8}, {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
};
static_assert(sizeof types / sizeof types[0] == ncclNumTypes, "one entry per ncclDataType_t");

/* One collective's buffers, as checked: send_bytes read, recv_bytes written (the same
 * but for the sharded forms), in place when send is `in_place_send`. */
struct transfer {
    const void *send;
    void *recv;
    size_t send_bytes, recv_bytes;
    const void *in_place_send;
};

/* The transfer of `count` elements (`bytes`) per rank for a collective of form `form`. */
transfer transfer_of(gb_emu::exchange_form form, const void *send, void *recv, size_t bytes,
                     const ncclComm *comm)
{
    const size_t all = bytes * (size_t)comm->nranks, mine = bytes * (size_t)comm->rank;
    switch (form) {
    case gb_emu::exchange_form::reduce_scatter:
        return {send, recv, all, bytes, static_cast<const char *>(recv) - mine};
    case gb_emu::exchange_form::all_gather:
        return {send, recv, bytes, all, static_cast<const char *>(recv) + mine};
    case gb_emu::exchange_form::whole:
        break;
    }
    return {send, recv, bytes, bytes, recv};
}

/* The byte count of `count` elements of `type`, checking both. */
ncclResult_t bytes_of(const char *fn, size_t count, ncclDataType_t type, size_t *bytes)
{
    const long long t = (long long)type;
    if (t < 0 || t >= ncclNumTypes)
        return fail(ncclInvalidArgument, "%s: datatype %lld is not an ncclDataType_t", fn, t);
    if (count > SIZE_MAX / types[t].size)
        return fail(ncclInvalidArgument, "%s: count %zu of %s overflows a byte count", fn, count,
                    types[t].name);
    *bytes = count * types[t].size;
    return ncclSuccess;
}

/* ncclSuccess when [p, p + bytes) is device memory; else says what p is. */
ncclResult_t check_buffer(const char *fn, const char *name, const void *p, size_t bytes)
{
    if (bytes == 0 || gb_emu::find_allocation(p, bytes))
        return ncclSuccess;
    if (!p)
        return fail(ncclInvalidArgument, "%s: %s is NULL (%zu bytes to move)", fn, name, bytes);
    const gb_emu::allocation *a = gb_emu::find_allocation(p, 1);
    if (!a)
        return fail(ncclInvalidArgument, "%s: %s = %p is not device memory (cudaMalloc); the "
                    "collective moves %zu bytes", fn, name, p, bytes);
    return fail(ncclInvalidArgument, "%s: %s = %p needs %zu bytes, but device allocation #%u "
                "(%zu bytes at %p) holds only %zu from there", fn, name, p, bytes, a->id,
                a->bytes, (const void *)a->base, (size_t)(a->base + a->bytes - (const char *)p));
}

/* Both buffers device memory, in place or apart. */
ncclResult_t check_transfer(const char *fn, const transfer &t)
{
    ncclResult_t r = check_buffer(fn, "sendbuff", t.send, t.send_bytes);
    if (r == ncclSuccess)
        r = check_buffer(fn, "recvbuff", t.recv, t.recv_bytes);
    if (r != ncclSuccess || t.send_bytes == 0 || t.send == t.in_place_send)
        return r;
    const uintptr_t s = (uintptr_t)t.send, d = (uintptr_t)t.recv;
    if (s < d + t.recv_bytes && d < s + t.send_bytes)
        return fail(ncclInvalidArgument, "%s: sendbuff %p (%zu bytes) and recvbuff %p (%zu "
                    "bytes) overlap without being in place (sendbuff %p)", fn, t.send,
                    t.send_bytes, t.recv, t.recv_bytes, t.in_place_send);
    return ncclSuccess;
}

/* The collective's effect on this rank: a copy in a world of one; the exchange with the
 * other ranks otherwise, whose failure becomes the communicator's asynchronous error. */
void run_collective(ncclComm *comm, const gb_emu::nccl_exchange &x, const transfer &t)
{
    if (comm->stopped.load() || comm->async_result.load() != ncclSuccess)
        return;   /* destroyed, aborted or broken: nobody to meet */
    if (!comm->world) {   /* one rank: every form is a copy of the same bytes */
        if (t.recv_bytes != 0 && t.send != t.recv)
            std::memcpy(t.recv, t.send, t.recv_bytes);
        gb_emu::mark_device_written(t.recv, t.recv_bytes);
        return;
    }
    std::string why;
    ncclResult_t r = gb_emu::nccl_world_exchange(comm->world, x, comm->stopped, &why);
    if (r == ncclSuccess)
        gb_emu::mark_device_written(t.recv, t.recv_bytes);   /* the initcheck's shadow */
    else if (!comm->stopped.load()) {
        set_async_error(comm, r, why);
        gb_emu::nccl_world_hold_until_abort(comm->stopped);
    }
}

/* The collective's name in the counting mode's records. */
const char *collective_name(const gb_emu::nccl_exchange &x)
{
    switch (x.form) {
    case gb_emu::exchange_form::reduce_scatter:
        return "reducescatter";
    case gb_emu::exchange_form::all_gather:
        return "allgather";
    case gb_emu::exchange_form::whole:
        break;
    }
    return x.root < 0 ? "allreduce" : "broadcast";
}

/* Checks a collective's arguments and queues it on `stream`. root: a broadcast's, or -1
 * for a reduction with `op` or an all-gather; count: per rank for the sharded forms. */
ncclResult_t collective(const char *fn, const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream,
                        gb_emu::exchange_form form = gb_emu::exchange_form::whole)
{
    transfer t = {};
    size_t bytes = 0;
    ncclResult_t r = check_ready(fn, comm);
    if (r == ncclSuccess && root >= comm->nranks)
        r = fail(ncclInvalidArgument, "%s: root %d is not a rank of this world of %d", fn, root,
                 comm->nranks);
    if (r == ncclSuccess && root < 0 && form != gb_emu::exchange_form::all_gather &&
        comm->nranks > 1 && !gb_emu::nccl_world_reduces(type))
        r = fail(ncclInvalidArgument, "%s: the emulated NCCL reduces no fp8 (datatype %d) "
                 "between ranks", fn, (int)type);
    if (r == ncclSuccess && (r = bytes_of(fn, count, type, &bytes)) == ncclSuccess &&
        form != gb_emu::exchange_form::whole && bytes > SIZE_MAX / (size_t)comm->nranks)
        r = fail(ncclInvalidArgument, "%s: count %zu per rank times %d ranks overflows a byte "
                 "count", fn, count, comm->nranks);
    if (r == ncclSuccess)
        r = check_transfer(fn, t = transfer_of(form, sendbuff, recvbuff, bytes, comm));
    if (r != ncclSuccess)
        return r;
    const gb_emu::nccl_exchange x = {fn, ++comm->collectives, sendbuff, recvbuff, count, type,
                                     op, root, form};
    cudaError_t e = gb_emu::enqueue(stream, fn, [comm, x, t] {
        if (gb_emu::counting)
            gb_emu::count_record("nccl", std::string("\"op\":\"") + collective_name(x) +
                                 "\",\"bytes\":" +
                                 std::to_string(std::max(t.send_bytes, t.recv_bytes)) +
                                 ",\"ranks\":" + std::to_string(comm->nranks));
        run_collective(comm, x, t);
    });
    if (e != cudaSuccess)
        return fail(ncclUnhandledCudaError, "%s: stream %p cannot take work: %s (%s)", fn,
                    (void *)stream, cudaGetErrorName(e), cudaGetErrorString(e));
    return ncclSuccess;
}

}  // namespace

/* ---- the API ---------------------------------------------------------------------------- */

ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (!uniqueId)
        return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    std::string why;
    if (!gb_emu::nccl_world_make_id(uniqueId, &why))
        return fail(ncclSystemError, "ncclGetUniqueId: %s", why.c_str());
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    return init("ncclCommInitRankConfig", comm, nranks, commId, rank, config);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return init("ncclCommInitRank", comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!asyncError)
        return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    std::lock_guard<std::mutex> hold(comms().lock);
    ncclResult_t r = check_alive("ncclCommGetAsyncError", comm);
    if (r != ncclSuccess)
        return r;
    if (comm->joining) {   /* a setup: done once every rank has joined */
        ncclResult_t state = setup_state(comm);
        comm->joining = state == ncclInProgress;
    }
    if (!comm->joining)
        comm->in_progress = false;   /* a finalize completes when looked at */
    *asyncError = comm->async_result.load();
    if (*asyncError == ncclSuccess && comm->in_progress)
        *asyncError = ncclInProgress;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    const char *fn = "ncclCommFinalize";
    {
        std::lock_guard<std::mutex> hold(comms().lock);
        ncclResult_t r = check_settled(fn, comm);
        if (r != ncclSuccess)
            return r;
        if (comm->state == ncclComm::phase::finalized)
            return fail(ncclInvalidUsage, "%s: comm %p was already finalized", fn, (void *)comm);
    }
    /* The collectives still queued run now, as NCCL's finalize completes them: the other
     * ranks wait for this one's part. Outside the registry's lock, so that calls on other
     * threads (a watchdog's ncclCommGetAsyncError) do not wait for the other ranks too. */
    if (comm->world)
        cudaDeviceSynchronize();
    std::lock_guard<std::mutex> hold(comms().lock);
    comm->state = ncclComm::phase::finalized;
    return answer(comm);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    return end_comm("ncclCommDestroy", comm, ncclComm::phase::destroyed);
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    /* copies already queued still run: they touch only their buffers */
    return end_comm("ncclCommAbort", comm, ncclComm::phase::aborted);
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    return query("ncclCommCount", comm, count, &ncclComm::nranks);
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    return query("ncclCommUserRank", comm, rank, &ncclComm::rank);
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    return query("ncclCommCuDevice", comm, device, &ncclComm::device);
}

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclNumResults: break;
    }
    return "unknown result code";
}

const char *ncclGetLastError(ncclComm_t comm)
{
    /* a communicator's asynchronous error; else, as in NCCL, the last error of any
     * communicator (here: of this thread) */
    std::lock_guard<std::mutex> hold(comms().lock);
    if (comm && comms().made.count(comm) && comm->async_result.load() != ncclSuccess)
        return comm->async_message;
    return last_error;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    const char *fn = "ncclAllReduce";
    const long long o = (long long)op;
    if (o < 0 || o >= ncclNumOps)   /* user ops (ncclRedOpCreate*) are not emulated */
        return fail(ncclInvalidArgument, "%s: op %lld is not a built-in ncclRedOp_t", fn, o);
    return collective(fn, sendbuff, recvbuff, count, datatype, op, -1, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    const char *fn = "ncclBroadcast";
    if (root < 0)
        return fail(ncclInvalidArgument, "%s: root %d is negative", fn, root);
    return collective(fn, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    const char *fn = "ncclReduceScatter";
    const long long o = (long long)op;
    if (o < 0 || o >= ncclNumOps)
        return fail(ncclInvalidArgument, "%s: op %lld is not a built-in ncclRedOp_t", fn, o);
    return collective(fn, sendbuff, recvbuff, recvcount, datatype, op, -1, comm, stream,
                      gb_emu::exchange_form::reduce_scatter);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return collective("ncclAllGather", sendbuff, recvbuff, sendcount, datatype, ncclSum, -1,
                      comm, stream, gb_emu::exchange_form::all_gather);
}
