/* The emulator's NCCL with several ranks, each a forked process with an emulated GPU of
 * its own: all-reduce of every op over the types comm/nccl uses (in place and not, larger
 * than one staging step, of nothing), broadcast from a rank other than 0, collectives in
 * stream order behind the kernels that write their buffers, a non-blocking setup that
 * waits for the last rank, and the failures: ranks that disagree on a collective, two ranks
 * on one GPU, a rank that exits or leaves while the others wait for it (the failed
 * collective then stays in flight until a watchdog thread aborts the communicator).
 *
 * Written as CUDA (it is compiled through cu2cc.py like the plugins' .cu files).
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "emu_test.h"
#include "gearbox/convert.h"

static __global__ void fill_rank_ramp(float *x, int n, int rank)
{
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        x[i] = (float)(rank + 1) * (float)(i % 1000);
}

/* Runs body(rank) in `world` forked processes; true when every one returned true. */
static bool run_ranks(int world, const std::function<bool(int)> &body)
{
    std::vector<pid_t> pids;
    fflush(stdout);
    for (int r = 0; r < world; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            bool ok = body(r);
            fflush(stdout);
            _exit(ok ? 0 : 1);
        }
        pids.push_back(pid);
    }
    bool all = true;
    for (pid_t pid : pids) {
        int status = 0;
        waitpid(pid, &status, 0);
        all = all && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    return all;
}

/* A blocking communicator of `world` for this rank, on GPU `device`; nullptr on failure. */
static ncclComm_t join(const ncclUniqueId &id, int world, int rank, int device)
{
    cudaSetDevice(device);
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRank(&comm, world, id, rank);
    if (r != ncclSuccess)
        printf("rank %d: ncclCommInitRank: %s: %s\n", rank, ncclGetErrorString(r),
               ncclGetLastError(nullptr));
    return r == ncclSuccess ? comm : nullptr;
}

/* Rank `rank`'s all-reduce of `n` elements of T, each rank holding value(rank, i): true
 * when every element equals want(i). Every copy is on `s` (pageable host memory: the copy
 * back is done when it returns). */
template <typename T>
static bool all_reduce_gives(ncclComm_t comm, cudaStream_t s, int rank, int n,
                             ncclDataType_t type, ncclRedOp_t op, bool in_place,
                             T (*value)(int, int), T (*want)(int))
{
    std::vector<T> host((size_t)n);
    for (int i = 0; i < n; i++)
        host[(size_t)i] = value(rank, i);
    T *send = nullptr, *recv = nullptr;
    cudaMalloc(&send, sizeof(T) * (size_t)(n ? n : 1));
    recv = send;
    if (!in_place)
        cudaMalloc(&recv, sizeof(T) * (size_t)(n ? n : 1));
    cudaMemcpyAsync(send, host.data(), sizeof(T) * (size_t)n, cudaMemcpyHostToDevice, s);
    bool ok = ncclAllReduce(send, recv, (size_t)n, type, op, comm, s) == ncclSuccess &&
              cudaMemcpyAsync(host.data(), recv, sizeof(T) * (size_t)n, cudaMemcpyDeviceToHost,
                              s) == cudaSuccess;
    for (int i = 0; ok && i < n; i++)
        ok = host[(size_t)i] == want(i);
    cudaFree(send);
    if (!in_place)
        cudaFree(recv);
    return ok;
}

static const int WORLD = 3;

static float f32_of(int rank, int i) { return (float)(rank + 1) * (float)(i % 1000); }
static float f32_sum(int i) { return 6.0f * (float)(i % 1000); }
static float f32_avg(int i) { return 6.0f * (float)(i % 1000) / 3.0f; }
static int32_t i32_of(int rank, int i) { return (rank - 1) * (i + 1); }
static int32_t i32_max(int i) { return i + 1; }
static int32_t i32_min(int i) { return -(i + 1); }
static int64_t i64_of(int rank, int i) { return (int64_t)(rank + 2) << (i % 8); }
static int64_t i64_prod(int i) { return (int64_t)24 << (3 * (i % 8)); }
static uint16_t f16_of(int rank, int i) { return gb_f16_from_f32((float)(rank + i % 3)); }
static uint16_t f16_sum(int i) { return gb_f16_from_f32((float)(3 * (i % 3) + 3)); }
static uint16_t bf16_of(int rank, int i) { return gb_bf16_from_f32((float)(rank * 4 + i % 5)); }
static uint16_t bf16_sum(int i) { return gb_bf16_from_f32((float)(12 + 3 * (i % 5))); }

/* Every collective of a world of WORLD, checked on each rank. */
static bool collectives(const ncclUniqueId &id, int rank)
{
    ncclComm_t comm = join(id, WORLD, rank, rank);
    if (!comm)
        return false;
    cudaStream_t s = emu_new_stream();
    char what[160];
    bool all = true;
    auto check = [&](bool ok, const char *name) {
        snprintf(what, sizeof what, "rank %d of %d: %s", rank, WORLD, name);
        emu_check(ok, what);
        all = all && ok;
    };
    /* an all-reduce of n elements, each rank holding value(rank, i), gives want(i) */
    auto reduce = [&](int n, ncclDataType_t type, ncclRedOp_t op, bool in_place, auto value,
                      auto want, const char *name) {
        check(all_reduce_gives(comm, s, rank, n, type, op, in_place, value, want), name);
    };
    const int big = (1 << 20) / 4 * 3 / 2;   /* 1.5 staging steps of f32 */
    reduce(big, ncclFloat32, ncclSum, true, f32_of, f32_sum,
           "f32 sum in place over 1.5 staging steps");
    reduce(1000, ncclFloat32, ncclAvg, false, f32_of, f32_avg, "f32 avg into another buffer");
    reduce(77, ncclInt32, ncclMax, true, i32_of, i32_max, "i32 max");
    reduce(77, ncclInt32, ncclMin, true, i32_of, i32_min, "i32 min");
    reduce(16, ncclInt64, ncclProd, true, i64_of, i64_prod, "i64 prod");
    reduce(9, ncclFloat16, ncclSum, true, f16_of, f16_sum, "f16 sum");
    reduce(10, ncclBfloat16, ncclSum, true, bf16_of, bf16_sum, "bf16 sum");
    reduce(0, ncclFloat32, ncclSum, true, f32_of, f32_sum,
           "an all-reduce of nothing still meets the other ranks");

    /* stream order: the kernel that writes the buffer runs before the all-reduce queued
     * behind it, though nothing waited in between */
    const int n = 5000;
    float *x = nullptr;
    cudaMalloc(&x, sizeof(float) * n);
    fill_rank_ramp<<<(n + 255) / 256, 256, 0, s>>>(x, n, rank);
    std::vector<float> got((size_t)n);
    bool ok = ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, s) == ncclSuccess &&
              cudaMemcpyAsync(got.data(), x, sizeof(float) * n, cudaMemcpyDeviceToHost, s) ==
                  cudaSuccess;
    for (int i = 0; ok && i < n; i++)
        ok = got[(size_t)i] == f32_sum(i);
    check(ok, "an all-reduce queued behind the kernel that writes its buffer reduces what it wrote");

    /* broadcast from rank 2 into another buffer */
    char *bytes = nullptr, *into = nullptr;
    cudaMalloc(&bytes, 300);
    cudaMalloc(&into, 300);
    char text[300];
    memset(text, 'a' + rank, sizeof text);
    cudaMemcpyAsync(bytes, text, sizeof text, cudaMemcpyHostToDevice, s);
    ok = ncclBroadcast(bytes, into, sizeof text, ncclUint8, 2, comm, s) == ncclSuccess &&
         cudaMemcpyAsync(text, into, sizeof text, cudaMemcpyDeviceToHost, s) == cudaSuccess;
    for (size_t i = 0; ok && i < sizeof text; i++)
        ok = text[i] == 'c';
    check(ok, "broadcast from rank 2");

    ncclResult_t state = ncclInProgress;
    check(ncclCommGetAsyncError(comm, &state) == ncclSuccess && state == ncclSuccess,
          "no asynchronous error");
    check(ncclCommFinalize(comm) == ncclSuccess && ncclCommDestroy(comm) == ncclSuccess,
          "finalize and destroy");
    emu_free(x, bytes, into);
    emu_destroy_streams(s);
    return all;
}

/* Runs the work queued so far as a program with a watchdog does: meanwhile another thread
 * polls ncclCommGetAsyncError and aborts the communicator on an error, which ends the
 * failed collective (it stays in flight until then, as on a GPU). The error, and
 * ncclGetLastError's message for it in *why. */
static ncclResult_t sync_with_watchdog(ncclComm_t comm, std::string *why)
{
    ncclResult_t error = ncclSuccess;
    std::atomic<bool> synced{false};
    std::thread watchdog([&] {
        while (!synced.load()) {
            ncclResult_t state = ncclSuccess;
            ncclCommGetAsyncError(comm, &state);
            if (state != ncclSuccess && state != ncclInProgress) {
                error = state;
                *why = ncclGetLastError(comm);
                ncclCommAbort(comm);
                return;
            }
            usleep(1000);
        }
    });
    cudaDeviceSynchronize();
    synced = true;
    watchdog.join();
    return error;
}

/* Rank 0's collective after its peer has gone (rank 1 runs `peer`): the all-reduce ends
 * with ncclRemoteError and a message containing `expected`. */
static void peer_gone(const char *what, const std::function<void(ncclComm_t)> &peer,
                      const char *expected)
{
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    bool ok = run_ranks(2, [&](int rank) {
        ncclComm_t comm = join(id, 2, rank, rank);
        if (!comm)
            return false;
        if (rank == 1) {
            peer(comm);
            return true;
        }
        float *x = nullptr;
        cudaMalloc(&x, 64);
        ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, comm, nullptr);
        std::string why;
        ncclResult_t state = sync_with_watchdog(comm, &why);
        printf("  rank 0: %s: %s\n", ncclGetErrorString(state), why.c_str());
        return state == ncclRemoteError && why.find(expected) != std::string::npos;
    });
    emu_check(ok, what);
}

/* Whether the shared memory that id names is still in /dev/shm (nccl_world.cc's name: the
 * token after the id's marker). */
static bool segment_remains(const ncclUniqueId &id)
{
    const char *token = strchr(id.internal, ' ');
    std::string path = std::string("/dev/shm/gearbox-emu-nccl-") + (token ? token + 1 : "");
    return access(path.c_str(), F_OK) == 0;
}

int main()
{
    setenv("GEARBOX_CUDA_EMU_DEVICES", "4", 1);   /* a GPU for each rank */
    ncclUniqueId id;
    emu_check(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
    emu_check(run_ranks(WORLD, [&](int rank) { return collectives(id, rank); }),
              "every rank of 3 saw every collective right");
    emu_check(!segment_remains(id), "the world's shared memory is gone from /dev/shm");

    ncclGetUniqueId(&id);
    emu_check(run_ranks(2, [&](int rank) {
        ncclComm_t comm = join(id, 2, rank, rank);
        float *x = nullptr;
        cudaMalloc(&x, 64);
        ncclAllReduce(x, x, rank == 0 ? 4 : 5, ncclFloat32, ncclSum, comm, nullptr);
        std::string why;
        ncclResult_t state = sync_with_watchdog(comm, &why);
        printf("  rank %d: %s\n", rank, why.c_str());
        return state == ncclInvalidUsage &&
               why.find("must call the same collectives") != std::string::npos;
    }), "ranks that call different collectives both get ncclInvalidUsage saying so");

    ncclGetUniqueId(&id);
    emu_check(run_ranks(2, [&](int rank) {
        cudaSetDevice(0);
        ncclComm_t comm = nullptr;
        ncclResult_t r = ncclCommInitRank(&comm, 2, id, rank);
        printf("  rank %d: %s\n", rank, ncclGetLastError(nullptr));
        return r == ncclInvalidUsage && strstr(ncclGetLastError(nullptr), "both use GPU 0");
    }), "two ranks on one GPU are refused");
    emu_check(!segment_remains(id), "a refused world leaves nothing in /dev/shm");

    ncclGetUniqueId(&id);
    emu_check(run_ranks(2, [&](int rank) {
        cudaSetDevice(rank);
        if (rank == 1)
            usleep(200000);
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclComm_t comm = nullptr;
        ncclResult_t r = ncclCommInitRankConfig(&comm, 2, id, rank, &config);
        ncclResult_t state = ncclInProgress;
        bool waited = false;
        while (r == ncclInProgress && ncclCommGetAsyncError(comm, &state) == ncclSuccess &&
               state == ncclInProgress) {
            waited = true;
            usleep(1000);
        }
        return r == ncclInProgress && state == ncclSuccess && (rank == 1 || waited) &&
               ncclCommDestroy(comm) == ncclSuccess;
    }), "a non-blocking setup is in progress until the last rank joins");

    peer_gone("a rank that exits makes the other's collective fail, naming it",
              [](ncclComm_t) { _exit(0); }, ") exited");
    peer_gone("a rank that destroys its communicator makes the other's collective fail",
              [](ncclComm_t comm) { ncclCommDestroy(comm); }, ") left the communicator");
    return emu_finish("test_nccl");
}
