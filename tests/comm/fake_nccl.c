/* A stand-in for the CUDA runtime and NCCL calls comm-nccl makes, preloaded (LD_PRELOAD)
 * so the plugin's host logic - launch, waits, timeouts, aborts, messages - runs in CI on
 * machines without a GPU. Its definitions come first in symbol lookup, ahead of
 * libcudart and libnccl, which stay loaded for everything not faked here (error strings,
 * ncclGetVersion).
 *
 * One GPU. Device memory is host memory. Events complete as soon as they are queried or
 * synchronized, unless FAKE_NCCL_HANG is set: then they never do, like a collective a peer
 * never joins, until the communicator is aborted (ncclCommAbort also ends NCCL's stuck
 * kernels); a cudaEventSynchronize gives up after 30 s (cudaErrorLaunchTimeout) so a
 * broken plugin cannot hang the test. Stream and event calls are logged in order.
 * The communicator behaves like a non-blocking one: init, the first collective and
 * finalize answer ncclInProgress and the state stays so for a few polls of
 * ncclCommGetAsyncError. With FAKE_NCCL_ASYNC_ERROR set the state turns to
 * ncclRemoteError instead, as when a peer dies. Collectives move no data (a world of 1
 * would not either); they are logged, with init, finalize, destroy and abort, for the
 * test to read (fake_nccl.h). The id of ncclGetUniqueId is made from the process id, so
 * ranks that received it over the bootstrap can be checked against rank 0's.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_nccl.h"

#define EXPORT __attribute__((visibility("default")))
#define POLLS_IN_PROGRESS 3

static fake_nccl_log log_;

EXPORT fake_nccl_log *fake_nccl_get_log(void)
{
    return &log_;
}

/* ---- CUDA runtime ---------------------------------------------------------------------- */

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 1;
    return cudaSuccess;
}

EXPORT cudaError_t cudaSetDevice(int device)
{
    log_.device = device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    (void)flags;
    *event = (cudaEvent_t)malloc(1);
    return *event ? cudaSuccess : cudaErrorMemoryAllocation;
}

EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    free(event);
    return cudaSuccess;
}

/* Appends a call to the ordered log; the watchdog thread calls too, hence the lock. */
static void log_call(fake_call_kind kind, const void *event, const void *stream)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    log_.calls[log_.n_calls++ % FAKE_NCCL_CALLS] = (fake_call){kind, event, stream};
    pthread_mutex_unlock(&lock);
}

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    (void)flags;
    *stream = (cudaStream_t)malloc(1);
    if (!*stream)
        return cudaErrorMemoryAllocation;
    log_.streams_created++;
    log_.created_stream = *stream;
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    log_.streams_destroyed++;
    free(stream);
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    log_call(FAKE_RECORD, event, stream);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    (void)flags;
    log_call(FAKE_WAIT, event, stream);
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventQuery(cudaEvent_t event)
{
    (void)event;
    return getenv("FAKE_NCCL_HANG") ? cudaErrorNotReady : cudaSuccess;
}

EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    log_call(FAKE_EVENT_SYNC, event, NULL);
    const int aborts = __atomic_load_n(&log_.aborts, __ATOMIC_SEQ_CST);
    for (int ms = 0; getenv("FAKE_NCCL_HANG"); ms++) {
        if (__atomic_load_n(&log_.aborts, __ATOMIC_SEQ_CST) != aborts)
            return cudaSuccess;   /* the abort ended the collective */
        if (ms == 30000)
            return cudaErrorLaunchTimeout;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return cudaSuccess;
}

EXPORT cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    *ptr = malloc(bytes);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

EXPORT cudaError_t cudaFree(void *ptr)
{
    free(ptr);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream)
{
    (void)stream;
    memset(ptr, value, bytes);
    return cudaSuccess;
}

/* ---- NCCL ------------------------------------------------------------------------------ */

struct ncclComm {
    int polls_in_progress;   /* ncclInProgress for this many more state queries */
};

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    pid_t pid = getpid();
    for (size_t i = 0; i < sizeof id->internal; i++)
        id->internal[i] = (char)((unsigned)pid >> (8 * (i % sizeof pid)) ^ (unsigned)i);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                           int rank, ncclConfig_t *config)
{
    log_.inits++;
    log_.init_blocking = config->blocking;
    log_.init_nranks = nranks;
    log_.init_rank = rank;
    memcpy(log_.init_id, id.internal, sizeof log_.init_id);
    *comm = calloc(1, sizeof **comm);
    if (!*comm)
        return ncclSystemError;
    (*comm)->polls_in_progress = POLLS_IN_PROGRESS;
    return ncclInProgress;
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state)
{
    if (comm->polls_in_progress > 0) {
        comm->polls_in_progress--;
        *state = ncclInProgress;
    } else {
        *state = getenv("FAKE_NCCL_ASYNC_ERROR") ? ncclRemoteError : ncclSuccess;
    }
    return ncclSuccess;
}

static ncclResult_t collective(const void *send, void *recv, size_t count, int type, int op,
                               int root, ncclComm_t comm, cudaStream_t stream)
{
    log_.send = send;
    log_.recv = recv;
    log_.count = count;
    log_.type = type;
    log_.op = op;
    log_.root = root;
    log_.stream = stream;
    log_call(FAKE_COLLECTIVE, NULL, stream);
    if (log_.collectives++ > 0)
        return ncclSuccess;
    comm->polls_in_progress = POLLS_IN_PROGRESS;   /* the first one connects to the peers */
    return ncclInProgress;
}

EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                                  ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                  cudaStream_t stream)
{
    return collective(send, recv, count, type, op, -1, comm, stream);
}

EXPORT ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                                  ncclDataType_t type, int root, ncclComm_t comm,
                                  cudaStream_t stream)
{
    return collective(send, recv, count, type, -1, root, comm, stream);
}

EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    log_.finalizes++;
    comm->polls_in_progress = POLLS_IN_PROGRESS;
    return ncclInProgress;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    log_.destroys++;
    free(comm);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    __atomic_add_fetch(&log_.aborts, 1, __ATOMIC_SEQ_CST);
    free(comm);
    return ncclSuccess;
}

EXPORT const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return "the fake peer went away";
}
