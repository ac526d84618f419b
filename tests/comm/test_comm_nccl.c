/* Tests for comm-nccl.
 *
 * Without arguments beyond the module (any machine): loading it, the descriptor and its
 * timeout_s option, create() refusing a CPU device context with GB_ERR_UNSUPPORTED and a
 * message, and, where cudaGetDeviceCount finds no GPU, create() on a CUDA context failing
 * with GB_ERR_DEVICE and a message that names the CUDA error.
 *
 * With `gpu` (exits 77, which meson reports as SKIP, when there is no GPU): a world of 1
 * on GPU 0 - a bad RANK refused, all-reduce SUM and AVG of f32, bf16, f16 and i32 device
 * buffers ordered on the context's stream, broadcast, barrier and the request
 * bookkeeping. With two or more GPUs it then starts one process per GPU (up to 8) from
 * this binary with torchrun-style variables: all-reduce SUM and AVG over the world,
 * reduce-scatter and all-gather (ABI 1.8), broadcast from the last rank, barrier, and finally a collective the last rank never
 * joins: all_reduce_wait returns at once (it only queues a wait on the GPU), and the barrier
 * queued behind it fails on the others once the watchdog aborts the communicator, within
 * timeout_s of the collective, naming it.
 *
 * Usage: test_comm_nccl PLUGIN.so [gpu]
 *        (test_comm_nccl PLUGIN.so rank: one rank of the multi-GPU part, started by `gpu`)
 */
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gearbox/comm.h"
#include "test_host.h"

#define SKIP 77
#define MAX_RANKS 8
#define RANK_TIMEOUT_S 20.0   /* timeout_s of the multi-GPU ranks */

static const char *const launch_variables[] = {
    "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
    "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"};

static void clear_launch_env(void)
{
    for (size_t i = 0; i < sizeof launch_variables / sizeof launch_variables[0]; i++)
        unsetenv(launch_variables[i]);
}

/* Option values: the defaults, with timeout_s replaced when `timeout_s` > 0. */
static void option_values(const gb_plugin_desc *desc, gb_value *values, double timeout_s)
{
    gb_test_default_values(desc, values);
    int t = gb_test_option_index(desc, "timeout_s");
    if (t >= 0 && timeout_s > 0)
        values[t].f = timeout_s;
}

/* ---- any machine ----------------------------------------------------------------------- */

static int check_refusals(const gb_plugin_desc *desc)
{
    int failures = 0;
    const gb_comm_ops *ops = desc->ops;
    gb_value values[4];
    option_values(desc, values, 0);
    void *self = NULL;

    gb_test_clear_error();
    gb_status st = ops->create(gb_test_host(), values, gb_test_cpu_ctx(), &self);
    GB_TEST_CHECK(failures,
                  st == GB_ERR_UNSUPPORTED && strstr(gb_test_last_error(), "device = cuda"),
                  "create on the CPU returned %d: \"%s\"", st, gb_test_last_error());
    printf("CPU context refused: %s\n", gb_test_last_error());

    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count > 0) {
        printf("%d GPU(s) here: the no-GPU refusal is not tested (run with `gpu`)\n", count);
        return failures;
    }
    const gb_device_ctx cuda = {.struct_size = sizeof cuda, .device = GB_DEVICE_CUDA};
    gb_test_clear_error();
    st = ops->create(gb_test_host(), values, &cuda, &self);
    const char *expected = e == cudaSuccess ? "found none" : cudaGetErrorName(e);
    GB_TEST_CHECK(failures, st == GB_ERR_DEVICE && strstr(gb_test_last_error(), expected),
                  "create on a CUDA context without a GPU returned %d: \"%s\" (expected "
                  "GB_ERR_DEVICE naming %s)", st, gb_test_last_error(), expected);
    printf("no GPU (cudaGetDeviceCount: %s): %s\n", cudaGetErrorName(e), gb_test_last_error());
    return failures;
}

/* ---- device buffers -------------------------------------------------------------------- */

/* Element i of a test buffer as raw bits: finite values every dtype reduces exactly. */
static void fill_host(gb_dtype dtype, void *host, int n, int scale)
{
    for (int i = 0; i < n; i++) {
        switch (dtype) {
        case GB_F32: ((float *)host)[i] = (float)(scale * (i % 64)); break;
        case GB_I32: ((int32_t *)host)[i] = scale * (i % 64) - 7; break;
        case GB_BF16: {   /* small integers: the top half of their binary32 */
            float f = (float)(scale * (i % 8));
            uint32_t bits;
            memcpy(&bits, &f, sizeof bits);
            ((uint16_t *)host)[i] = (uint16_t)(bits >> 16);
            break;
        }
        case GB_F16:   /* 1 + k/1024 for k < 64, times 1 (a world of 1 only) */
            ((uint16_t *)host)[i] = (uint16_t)(0x3C00 + i % 64);
            break;
        default: break;
        }
    }
}

typedef struct stream_ctx {
    cudaStream_t stream;
    gb_device_ctx ctx;
} stream_ctx;

static int open_stream(int ordinal, stream_ctx *sc)
{
    cudaError_t e = cudaSetDevice(ordinal);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&sc->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        printf("FAIL: GPU %d: %s\n", ordinal, cudaGetErrorString(e));
        return 1;
    }
    sc->ctx = (gb_device_ctx){.struct_size = sizeof sc->ctx, .device = GB_DEVICE_CUDA,
                              .ordinal = ordinal, .stream = sc->stream};
    return 0;
}

/* Copies `host` in, all-reduces it with `op` on the context's stream and copies it back
 * on the same stream, so the result is right only if the collective is stream-ordered. */
static int all_reduce_roundtrip(const gb_comm_ops *ops, void *self, cudaStream_t stream,
                                void *dev, void *host, int n, gb_dtype dtype, gb_reduce_op op)
{
    int failures = 0;
    size_t bytes = (size_t)n * gb_dtype_size(dtype);
    gb_comm_request req = 0;
    cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream);
    gb_status st = ops->all_reduce_start(self, dev, n, dtype, op, &req);
    GB_TEST_CHECK(failures, st == GB_OK, "all_reduce_start %s op %d: %s", gb_dtype_name(dtype),
                  op, gb_test_last_error());
    if (st == GB_OK) {
        st = ops->all_reduce_wait(self, req);
        GB_TEST_CHECK(failures, st == GB_OK, "all_reduce_wait %s op %d: %s",
                      gb_dtype_name(dtype), op, gb_test_last_error());
    }
    cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, stream);
    cudaError_t e = cudaStreamSynchronize(stream);
    GB_TEST_CHECK(failures, e == cudaSuccess, "stream: %s", cudaGetErrorString(e));
    return failures;
}

/* ---- a world of 1 ---------------------------------------------------------------------- */

static int check_identity(const gb_comm_ops *ops, void *self, cudaStream_t stream, void *dev)
{
    enum { N = 1000 };
    int failures = 0;
    static const gb_dtype dtypes[] = {GB_F32, GB_BF16, GB_F16, GB_I32};
    static const gb_reduce_op reduce_ops[] = {GB_REDUCE_SUM, GB_REDUCE_AVG};
    for (int d = 0; d < 4; d++)
        for (int o = 0; o < 2; o++) {
            /* 16-bit dtypes fill half of host: zeroed, so no path reads unset bytes
             * (gcc 13 warns otherwise), and only the bytes filled are compared */
            uint32_t host[N] = {0}, expected[N];
            size_t bytes = (size_t)N * gb_dtype_size(dtypes[d]);
            fill_host(dtypes[d], host, N, 3);
            memcpy(expected, host, bytes);
            failures += all_reduce_roundtrip(ops, self, stream, dev, host, N, dtypes[d],
                                             reduce_ops[o]);
            GB_TEST_CHECK(failures, memcmp(host, expected, bytes) == 0,
                          "all-reduce %s op %d over one rank changed the buffer",
                          gb_dtype_name(dtypes[d]), reduce_ops[o]);
        }
    printf("world of 1: all-reduce SUM and AVG of f32, bf16, f16, i32 leave buffers as they are\n");
    return failures;
}

static int check_broadcast_and_barrier(const gb_comm_ops *ops, void *self, cudaStream_t stream,
                                       unsigned char *dev)
{
    int failures = 0;
    unsigned char host[64], saved[64];
    for (int i = 0; i < 64; i++)
        host[i] = saved[i] = (unsigned char)(i * 13);
    cudaMemcpyAsync(dev, host, sizeof host, cudaMemcpyHostToDevice, stream);
    gb_status st = ops->broadcast(self, dev, sizeof host, 0);
    GB_TEST_CHECK(failures, st == GB_OK, "broadcast from root 0: %s", gb_test_last_error());
    cudaMemcpyAsync(host, dev, sizeof host, cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    GB_TEST_CHECK(failures, memcmp(host, saved, sizeof host) == 0, "broadcast changed the buffer");
    gb_test_clear_error();
    st = ops->broadcast(self, dev, sizeof host, 1);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "broadcast from root 1 of 1 returned %d", st);
    for (int i = 0; i < 3; i++)
        GB_TEST_CHECK(failures, ops->barrier(self) == GB_OK, "barrier %d: %s", i,
                      gb_test_last_error());
    printf("broadcast and barrier over one rank\n");
    return failures;
}

static int check_bad_launch(const gb_plugin_desc *desc, const gb_device_ctx *ctx)
{
    int failures = 0;
    const gb_comm_ops *ops = desc->ops;
    gb_value values[4];
    option_values(desc, values, 0);
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "2", 1);
    void *self = NULL;
    gb_test_clear_error();
    gb_status st = ops->create(gb_test_host(), values, ctx, &self);
    GB_TEST_CHECK(failures, st == GB_ERR_CONFIG && strstr(gb_test_last_error(), "RANK = 3"),
                  "RANK=3 WORLD_SIZE=2 returned %d: \"%s\"", st, gb_test_last_error());
    printf("bad launch refused: %s\n", gb_test_last_error());
    clear_launch_env();
    return failures;
}

static int check_world_of_one(const gb_plugin_desc *desc)
{
    int failures = 0;
    const gb_comm_ops *ops = desc->ops;
    stream_ctx sc;
    if (open_stream(0, &sc))
        return 1;
    clear_launch_env();
    failures += check_bad_launch(desc, &sc.ctx);
    gb_value values[4];
    option_values(desc, values, 0);
    void *self = NULL;
    gb_status st = ops->create(gb_test_host(), values, &sc.ctx, &self);
    GB_TEST_CHECK(failures, st == GB_OK, "create on GPU 0 returned %d: %s", st,
                  gb_test_last_error());
    if (st != GB_OK)
        return failures;
    GB_TEST_CHECK(failures, ops->rank(self) == 0 && ops->world(self) == 1, "rank %d of %d",
                  ops->rank(self), ops->world(self));
    void *dev = NULL;
    cudaMalloc(&dev, 16 * GB_COMM_MAX_INFLIGHT * sizeof(float) + 4096);
    failures += check_identity(ops, self, sc.stream, dev);
    failures += gb_test_check_requests(ops, self, dev);
    gb_comm_request req;
    st = ops->all_reduce_start(self, dev, 1, GB_U16, GB_REDUCE_SUM, &req);
    GB_TEST_CHECK(failures, st == GB_ERR_UNSUPPORTED, "u16 all-reduce returned %d", st);
    failures += check_broadcast_and_barrier(ops, self, sc.stream, dev);
    ops->destroy(self);
    cudaFree(dev);
    cudaStreamDestroy(sc.stream);
    return failures;
}

/* ---- one process per GPU --------------------------------------------------------------- */

static int env_int(const char *name)
{
    const char *v = getenv(name);
    return v ? atoi(v) : -1;
}

/* All-reduce over the world: rank r contributes (r + 1) * base[i]. */
static int check_world_reduce(const gb_comm_ops *ops, void *self, cudaStream_t stream, void *dev,
                              int rank, int world)
{
    enum { N = 4096 };
    int failures = 0;
    float f[N];
    for (int i = 0; i < N; i++)
        f[i] = (float)((rank + 1) * (i % 100));
    failures += all_reduce_roundtrip(ops, self, stream, dev, f, N, GB_F32, GB_REDUCE_SUM);
    const float ranks_sum = (float)(world * (world + 1) / 2);
    for (int i = 0; i < N && failures == 0; i++)
        GB_TEST_CHECK(failures, f[i] == ranks_sum * (float)(i % 100),
                      "rank %d: f32 SUM element %d is %g, expected %g", rank, i, f[i],
                      ranks_sum * (float)(i % 100));
    for (int i = 0; i < N; i++)
        f[i] = (float)(rank + 1);
    failures += all_reduce_roundtrip(ops, self, stream, dev, f, N, GB_F32, GB_REDUCE_AVG);
    const float mean = (float)(world + 1) / 2.0f;
    for (int i = 0; i < N && failures == 0; i++)
        GB_TEST_CHECK(failures, f[i] > mean - 1e-5f * mean && f[i] < mean + 1e-5f * mean,
                      "rank %d: f32 AVG element %d is %g, expected %g", rank, i, f[i], mean);
    uint16_t b[N];
    fill_host(GB_BF16, b, N, rank + 1);
    failures += all_reduce_roundtrip(ops, self, stream, dev, b, N, GB_BF16, GB_REDUCE_SUM);
    uint16_t expected[N];
    fill_host(GB_BF16, expected, N, world * (world + 1) / 2);
    GB_TEST_CHECK(failures, memcmp(b, expected, sizeof b) == 0, "rank %d: bf16 SUM is wrong", rank);
    return failures;
}

/* The sharded collectives (ABI 1.8) over the world: each rank contributes (r + 1) * (i %
 * 100) to the 4096 f32 of run_rank's buffer, reduce-scatters them in place, checks its
 * part, then all-gathers the parts back in place, each step ordered on the stream. */
static int check_world_sharded(const gb_comm_ops *ops, void *self, cudaStream_t stream,
                               float *dev, int rank, int world)
{
    enum { N = 4096 };
    const int part = N / world, n = part * world;
    int failures = 0;
    float f[N];
    for (int i = 0; i < n; i++)
        f[i] = (float)((rank + 1) * (i % 100));
    cudaMemcpyAsync(dev, f, (size_t)n * sizeof(float), cudaMemcpyHostToDevice, stream);
    gb_comm_request req = 0;
    gb_status st = ops->reduce_scatter_start(self, dev, dev + rank * part, part, GB_F32,
                                             GB_REDUCE_SUM, &req);
    if (st == GB_OK)
        st = ops->all_reduce_wait(self, req);
    GB_TEST_CHECK(failures, st == GB_OK, "rank %d: reduce-scatter: %s", rank,
                  gb_test_last_error());
    cudaMemcpyAsync(f, dev + rank * part, part * sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    const float ranks_sum = (float)(world * (world + 1) / 2);
    for (int i = 0; i < part && failures == 0; i++)
        GB_TEST_CHECK(failures, f[i] == ranks_sum * (float)((rank * part + i) % 100),
                      "rank %d: element %d of its reduce-scattered part is %g", rank, i, f[i]);
    st = ops->all_gather(self, dev + rank * part, dev, part, GB_F32);
    GB_TEST_CHECK(failures, st == GB_OK, "rank %d: all-gather: %s", rank, gb_test_last_error());
    cudaMemcpyAsync(f, dev, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    for (int i = 0; i < n && failures == 0; i++)
        GB_TEST_CHECK(failures, f[i] == ranks_sum * (float)(i % 100),
                      "rank %d: element %d after the all-gather is %g", rank, i, f[i]);
    return failures;
}

static int check_world_broadcast(const gb_comm_ops *ops, void *self, cudaStream_t stream,
                                 unsigned char *dev, int rank, int world)
{
    int failures = 0;
    unsigned char host[1000];
    memset(host, rank, sizeof host);
    cudaMemcpyAsync(dev, host, sizeof host, cudaMemcpyHostToDevice, stream);
    gb_status st = ops->broadcast(self, dev, sizeof host, world - 1);
    GB_TEST_CHECK(failures, st == GB_OK, "rank %d: broadcast: %s", rank, gb_test_last_error());
    cudaMemcpyAsync(host, dev, sizeof host, cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    for (size_t i = 0; i < sizeof host && failures == 0; i++)
        GB_TEST_CHECK(failures, host[i] == world - 1, "rank %d: byte %zu is %d after a broadcast "
                      "from rank %d", rank, i, host[i], world - 1);
    st = ops->barrier(self);
    GB_TEST_CHECK(failures, st == GB_OK, "rank %d: barrier: %s", rank, gb_test_last_error());
    return failures;
}

/* The last rank skips one all-reduce: every other rank must time out on it and say which. */
static int check_peer_hangs(const gb_comm_ops *ops, void *self, float *dev, int rank, int world)
{
    int failures = 0;
    if (rank == world - 1) {
        sleep((unsigned)RANK_TIMEOUT_S + 5);
        return 0;
    }
    gb_comm_request req;
    gb_test_clear_error();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gb_status st = ops->all_reduce_start(self, dev, 256, GB_F32, GB_REDUCE_SUM, &req);
    if (st == GB_OK)
        st = ops->all_reduce_wait(self, req);
    if (st == GB_OK)
        st = ops->barrier(self);   /* behind the hung collective: ends with the abort */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    GB_TEST_CHECK(failures, st != GB_OK && strstr(gb_test_last_error(), "all_reduce #") &&
                                strstr(gb_test_last_error(), "timeout_s"),
                  "rank %d: a collective rank %d never joined returned %d: \"%s\"", rank,
                  world - 1, st, gb_test_last_error());
    GB_TEST_CHECK(failures, took < 3 * RANK_TIMEOUT_S, "rank %d: the failure took %.1f s", rank,
                  took);
    printf("rank %d, after %.1f s: %s\n", rank, took, gb_test_last_error());
    gb_test_clear_error();
    st = ops->barrier(self);
    GB_TEST_CHECK(failures, st != GB_OK && gb_test_last_error()[0],
                  "rank %d: a barrier after the abort returned %d", rank, st);
    return failures;
}

/* One rank of the multi-GPU part, configured by the variables `gpu` mode set. */
static int run_rank(const gb_plugin_desc *desc)
{
    int failures = 0, rank = env_int("RANK"), world = env_int("WORLD_SIZE");
    const gb_comm_ops *ops = desc->ops;
    stream_ctx sc;
    if (open_stream(env_int("LOCAL_RANK"), &sc))
        return 1;
    gb_value values[4];
    option_values(desc, values, RANK_TIMEOUT_S);
    void *self = NULL;
    gb_status st = ops->create(gb_test_host(), values, &sc.ctx, &self);
    GB_TEST_CHECK(failures, st == GB_OK, "rank %d: create returned %d: %s", rank, st,
                  gb_test_last_error());
    if (st != GB_OK)
        return failures;
    GB_TEST_CHECK(failures, ops->rank(self) == rank && ops->world(self) == world,
                  "rank %d of %d says it is rank %d of %d", rank, world, ops->rank(self),
                  ops->world(self));
    void *dev = NULL;
    cudaMalloc(&dev, 4096 * sizeof(float));
    failures += check_world_reduce(ops, self, sc.stream, dev, rank, world);
    failures += check_world_sharded(ops, self, sc.stream, dev, rank, world);
    failures += check_world_broadcast(ops, self, sc.stream, dev, rank, world);
    failures += check_peer_hangs(ops, self, dev, rank, world);
    ops->destroy(self);
    cudaFree(dev);
    printf("rank %d of %d: %d failure(s)\n", rank, world, failures);
    return failures ? 1 : 0;
}

/* Starts `world` ranks of this binary (one per GPU) and waits for them, killing what is
 * left after a generous deadline. Re-executing keeps CUDA out of forked children. */
static int check_multi_gpu(const char *plugin, int world)
{
    int failures = 0;
    char port[16];
    snprintf(port, sizeof port, "%d", gb_test_free_port());
    pid_t pids[MAX_RANKS];
    fflush(stdout);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            char text[16];
            clear_launch_env();
            snprintf(text, sizeof text, "%d", r);
            setenv("RANK", text, 1);
            setenv("LOCAL_RANK", text, 1);
            snprintf(text, sizeof text, "%d", world);
            setenv("WORLD_SIZE", text, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            setenv("MASTER_PORT", port, 1);
            execl("/proc/self/exe", "test_comm_nccl", plugin, "rank", (char *)NULL);
            perror("execl");
            _exit(127);
        }
    }
    int left = world;
    for (int waited_s = 0; left > 0 && waited_s < 240; waited_s++) {
        for (int r = 0; r < world; r++) {
            int status;
            if (pids[r] > 0 && waitpid(pids[r], &status, WNOHANG) == pids[r]) {
                GB_TEST_CHECK(failures, WIFEXITED(status) && WEXITSTATUS(status) == 0,
                              "rank %d of %d ended with status 0x%x", r, world, status);
                pids[r] = 0;
                left--;
            }
        }
        if (left > 0)
            sleep(1);
    }
    for (int r = 0; r < world; r++)
        if (pids[r] > 0) {
            GB_TEST_CHECK(failures, 0, "rank %d of %d still runs after 240 s: killed", r, world);
            kill(pids[r], SIGKILL);
            waitpid(pids[r], NULL, 0);
        }
    printf("%d ranks, one per GPU: %d failure(s)\n", world, failures);
    return failures;
}

int main(int argc, char **argv)
{
    const char *mode = argc == 3 ? argv[2] : "";
    const int mode_ok = !strcmp(mode, "") || !strcmp(mode, "gpu") || !strcmp(mode, "rank");
    gb_test_usage_unless(argc >= 2 && argc <= 3 && mode_ok, argv[0], "comm-nccl.so [gpu]");
    const gb_plugin_desc *desc = gb_test_load_plugin(argv[1]);
    if (strcmp(mode, "rank") == 0)
        return run_rank(desc);

    int failures = gb_test_check_descriptor(desc, GB_KIND_COMM, "nccl", GB_DEVICE_CUDA,
                                            sizeof(gb_comm_ops));
    failures += gb_test_check_option(desc, "timeout_s", GB_OPT_FLOAT, "300");
    GB_TEST_CHECK(failures, desc->n_options <= 4, "%zu options; the test expects at most 4",
                  desc->n_options);
    const gb_comm_ops *ops = desc->ops;
    failures += gb_test_check_comm_entries(ops);
    if (failures) {
        printf("%s: %d failure(s)\n", argv[0], failures);
        return 1;
    }
    if (strcmp(mode, "gpu") != 0) {
        failures += check_refusals(desc);
        printf("%s: %d failure(s)\n", argv[0], failures);
        return failures ? 1 : 0;
    }

    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        printf("SKIP: no GPU (cudaGetDeviceCount: %s, %d devices)\n", cudaGetErrorName(e), count);
        return SKIP;
    }
    failures += check_world_of_one(desc);
    if (count >= 2 && failures == 0)
        failures += check_multi_gpu(argv[1], count < MAX_RANKS ? count : MAX_RANKS);
    else if (count < 2)
        printf("1 GPU: the multi-process part needs 2 or more\n");
    printf("%s gpu: %d failure(s)\n", argv[0], failures);
    return failures ? 1 : 0;
}
