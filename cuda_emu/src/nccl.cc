/* The NCCL double: the entry points of nccl.h that plugins/comm/nccl calls, for a world
 * of one rank on the emulated GPU.
 *
 * Covered: ncclGetVersion (the header's NCCL_VERSION_CODE), ncclGetUniqueId (random
 * bytes), ncclCommInitRank, ncclCommInitRankConfig, ncclCommGetAsyncError,
 * ncclCommFinalize, ncclCommDestroy, ncclCommAbort, ncclCommCount, ncclCommUserRank,
 * ncclCommCuDevice, ncclGetErrorString, ncclGetLastError, ncclAllReduce (sum, prod, max,
 * min, avg) and ncclBroadcast. With one rank every reduction and the broadcast leave
 * recvbuff equal to sendbuff, so a collective is a copy (none when in place), queued on
 * its stream with gb_emu::enqueue: it runs in order with the kernels around it and is the
 * only code here that touches device memory.
 *
 * A world of more than one rank is refused with ncclInvalidUsage. A non-blocking
 * communicator (config.blocking = 0) behaves as NCCL allows: ncclCommInitRankConfig and
 * ncclCommFinalize answer ncclInProgress, and the next ncclCommGetAsyncError completes
 * the operation and reports ncclSuccess; until then the communicator may not be used
 * (ncclInvalidArgument, as NCCL says for a communicator used too early). Collectives
 * answer ncclSuccess in both modes.
 *
 * Checks, made when a call is made (what a GPU would only show later, if at all): the
 * communicator is one made here and neither destroyed nor aborted (handles are never
 * freed, so a stale one is recognised), datatype and op are NCCL's built-in ones, the
 * byte count does not overflow, sendbuff and recvbuff are device memory large enough
 * (gb_emu::find_allocation) and, unless equal, do not overlap. A failure returns
 * ncclInvalidArgument (ncclInvalidUsage for a finalized communicator) and
 * ncclGetLastError says which argument was wrong and why. The last error is kept per
 * thread: NCCL keeps one per process, but a caller reads it on the thread that failed.
 *
 * Left out: every other entry point (groups, split, send/recv, user reduction ops, buffer
 * registration), and asynchronous errors (there is no peer to lose).
 */
#include <nccl.h>

#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <random>
#include <set>

#include "emu.h"

/* The opaque type behind ncclComm_t. */
struct ncclComm {
    enum class phase { live, finalized, destroyed, aborted };
    int rank;
    int nranks;
    int device;          /* the current CUDA device at initialization */
    bool blocking;
    bool in_progress;    /* answered ncclInProgress; the next ncclCommGetAsyncError ends it */
    phase state;
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

/* Settled and not finalized: ready for a collective. Takes the registry's lock. */
ncclResult_t check_ready(const char *fn, const ncclComm *comm)
{
    std::lock_guard<std::mutex> hold(comms().lock);
    ncclResult_t r = check_settled(fn, comm);
    if (r == ncclSuccess && comm->state == ncclComm::phase::finalized)
        r = fail(ncclInvalidUsage, "%s: comm %p was finalized (ncclCommFinalize); only "
                 "ncclCommDestroy may follow", fn, (const void *)comm);
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

ncclResult_t init(const char *fn, ncclComm_t *out, int nranks, int rank,
                  const ncclConfig_t *config)
{
    if (!out)
        return fail(ncclInvalidArgument, "%s: comm (where the communicator goes) is NULL", fn);
    *out = nullptr;
    if (nranks != 1)
        return fail(ncclInvalidUsage, "%s: the emulated NCCL runs a world of 1 only (nranks %d)",
                    fn, nranks);
    if (rank != 0)
        return fail(ncclInvalidArgument, "%s: rank %d is not in [0, nranks = 1)", fn, rank);
    bool blocking = true;
    ncclResult_t r = blocking_of(fn, config, &blocking);
    if (r != ncclSuccess)
        return r;
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess)
        return fail(ncclUnhandledCudaError, "%s: cudaGetDevice failed: %s", fn,
                    cudaGetErrorString(e));
    ncclComm *comm = new (std::nothrow) ncclComm{0, 1, device, blocking, false,
                                                  ncclComm::phase::live};
    if (!comm || !remember(comm)) {
        delete comm;
        return fail(ncclSystemError, "%s: out of memory", fn);
    }
    *out = comm;
    return answer(comm);
}

/* Ends a communicator's life (destroy or abort); a NULL comm is accepted, as by NCCL. */
ncclResult_t end_comm(const char *fn, ncclComm_t comm, ncclComm::phase how)
{
    if (!comm)
        return ncclSuccess;
    std::lock_guard<std::mutex> hold(comms().lock);
    ncclResult_t r = check_alive(fn, comm);
    if (r == ncclSuccess)
        comm->state = how;
    return r;
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

/* One collective's buffers, as checked: `bytes` to copy from send to recv. */
struct transfer {
    const void *send;
    void *recv;
    size_t bytes;
};

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

/* Both buffers device memory, equal (in place) or apart. */
ncclResult_t check_transfer(const char *fn, const transfer &t)
{
    ncclResult_t r = check_buffer(fn, "sendbuff", t.send, t.bytes);
    if (r == ncclSuccess)
        r = check_buffer(fn, "recvbuff", t.recv, t.bytes);
    if (r != ncclSuccess || t.bytes == 0 || t.send == t.recv)
        return r;
    const uintptr_t s = (uintptr_t)t.send, d = (uintptr_t)t.recv;
    if (s < d + t.bytes && d < s + t.bytes)
        return fail(ncclInvalidArgument, "%s: sendbuff %p and recvbuff %p (%zu bytes each) "
                    "overlap without being equal (in place means the same pointer)", fn, t.send,
                    t.recv, t.bytes);
    return ncclSuccess;
}

/* Queues the copy that is the collective's whole effect in a world of one. */
ncclResult_t enqueue_copy(const char *fn, cudaStream_t stream, const transfer &t)
{
    const transfer copy = t;
    cudaError_t e = gb_emu::enqueue(stream, fn, [copy] {
        if (copy.bytes != 0 && copy.send != copy.recv)
            std::memcpy(copy.recv, copy.send, copy.bytes);
    });
    if (e != cudaSuccess)
        return fail(ncclUnhandledCudaError, "%s: stream %p cannot take work: %s (%s)", fn,
                    (void *)stream, cudaGetErrorName(e), cudaGetErrorString(e));
    return ncclSuccess;
}

/* Checks a collective's arguments and queues its copy. */
ncclResult_t collective(const char *fn, const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t type, ncclComm_t comm, cudaStream_t stream)
{
    transfer t = {sendbuff, recvbuff, 0};
    ncclResult_t r = check_ready(fn, comm);
    if (r == ncclSuccess)
        r = bytes_of(fn, count, type, &t.bytes);
    if (r == ncclSuccess)
        r = check_transfer(fn, t);
    if (r == ncclSuccess)
        r = enqueue_copy(fn, stream, t);
    return r;
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
    try {
        std::random_device source;
        for (char &c : uniqueId->internal)
            c = (char)(source() & 0xff);
    } catch (const std::exception &e) {   /* no entropy source: exceptions stop at the C ABI */
        return fail(ncclSystemError, "ncclGetUniqueId: no random source: %s", e.what());
    }
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    (void)commId;   /* one rank: nobody to meet */
    return init("ncclCommInitRankConfig", comm, nranks, rank, config);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    (void)commId;
    return init("ncclCommInitRank", comm, nranks, rank, nullptr);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!asyncError)
        return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    std::lock_guard<std::mutex> hold(comms().lock);
    ncclResult_t r = check_alive("ncclCommGetAsyncError", comm);
    if (r != ncclSuccess)
        return r;
    comm->in_progress = false;   /* an operation in progress completes when looked at */
    *asyncError = ncclSuccess;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    const char *fn = "ncclCommFinalize";
    std::lock_guard<std::mutex> hold(comms().lock);
    ncclResult_t r = check_settled(fn, comm);
    if (r != ncclSuccess)
        return r;
    if (comm->state == ncclComm::phase::finalized)
        return fail(ncclInvalidUsage, "%s: comm %p was already finalized", fn, (void *)comm);
    /* nothing to flush: collectives only queue copies on their streams */
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
    (void)comm;   /* as in NCCL: the last error of any communicator (here: of this thread) */
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
    /* sum, prod, max, min and avg over one rank all equal its own data */
    return collective(fn, sendbuff, recvbuff, count, datatype, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    const char *fn = "ncclBroadcast";
    if (root != 0)
        return fail(ncclInvalidArgument, "%s: root %d is not a rank of this world of 1", fn,
                    root);
    return collective(fn, sendbuff, recvbuff, count, datatype, comm, stream);
}
