/* The emulator's streams, events, copies and memory rules: lazy streams (a missing
 * cudaStreamWaitEvent gives stale data), events and what they capture, CUDA's rules for
 * pageable and pinned host memory, device memory that host code cannot touch, host
 * functions that may not call CUDA, the errors of misused calls, and the seeded
 * interleaving of streams. Every check pairs a broken use, which must give the stale value
 * or be stopped with a message, with the correct use, which must give the right value.
 *
 * The streams are non-blocking, so the legacy default stream (which cudaMemcpy uses) does
 * not synchronize with them on a GPU either: what each check reads is what CUDA promises.
 *
 * Written as CUDA (it is compiled through cu2cc.py like the plugins' .cu files).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include "emu_test.h"

/* ---- kernels ------------------------------------------------------------------------- */

static __global__ void fill(float *x, int n, float v)
{
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        x[i] = v;
}

static __global__ void ramp(float *x, int n, float from)
{
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        x[i] = from + (float)i;
}

static __global__ void add_one(float *x, int n)
{
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        x[i] += 1.0f;
}

static __global__ void read_at(const float *x, float *out, int at)
{
    out[0] = x[at];
}

/* Every block but block 0 (which the launching host thread takes first, and which spins
 * meanwhile) reads one element past the end: the fault happens on the executor's helper
 * threads. */
static __global__ void read_past_end_on_helpers(const float *x, float *out, int n)
{
    if (blockIdx.x == 0) {
        volatile int spin = 0;
        while (spin < 50000000)
            spin = spin + 1;
        return;
    }
    out[blockIdx.x] = x[n];
}

/* ---- host side ------------------------------------------------------------------------ */

constexpr int N = 256;   /* floats per buffer: 1 KiB, a multiple of 256 bytes */
constexpr size_t BYTES = N * sizeof(float);

static unsigned mallocs = 0;              /* cudaMalloc calls: the emulator's allocation ids */

template <class T> static T *device_array(size_t n, unsigned *id = nullptr)
{
    T *p = nullptr;
    if (cudaMalloc((void **)&p, n * sizeof(T)) == cudaSuccess)
        mallocs++;
    if (id)
        *id = mallocs;
    return p;
}

template <class T> static std::vector<T> host_copy(const T *d, size_t n)
{
    std::vector<T> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
}

static bool all_nan(const std::vector<float> &h)
{
    for (float f : h)
        if (!std::isnan(f))
            return false;
    return true;
}

static bool all_equal(const std::vector<float> &h, float v)
{
    for (float f : h)
        if (f != v)
            return false;
    return true;
}

static bool is_ramp(const float *h, int n, float from)
{
    for (int i = 0; i < n; i++)
        if (h[i] != from + (float)i)
            return false;
    return true;
}

static std::string at_line(const char *marker, const char *after)
{
    return "test_streams.cu:" + std::to_string(emu_line_of(__FILE__, marker)) + after;
}

/* `body` runs in a child and must finish without the emulator stopping it, returning true
 * (its answer travels on the child's stderr). */
static void expect_runs(const char *what, const std::function<bool()> &body)
{
    bool aborted = false;
    std::string err = emu_run_child([&] {
        const bool right = body();
        fprintf(stderr, "child finished: %s\n", right ? "right" : "wrong");
    }, &aborted);
    const bool ok = !aborted && err.find("child finished: right") != std::string::npos;
    emu_check(ok, what);
    if (!ok)
        printf("  (aborted %s; stderr: %s)\n", aborted ? "yes" : "no",
               err.empty() ? "empty" : err.c_str());
}

/* 1. Work queued on a stream runs only when something waits for it. */
static void lazy_streams()
{
    cudaStream_t a = emu_new_stream(), b = emu_new_stream();
    float *x = device_array<float>(N), *y = device_array<float>(N);
    fill<<<1, N, 0, a>>>(x, N, 1.0f);
    cudaMemcpyAsync(y, x, BYTES, cudaMemcpyDeviceToDevice, b);   // no cudaStreamWaitEvent
    cudaStreamSynchronize(b);
    emu_check(all_nan(host_copy(y, N)), "lazy streams: without cudaStreamWaitEvent, stream B's "
              "copy of stream A's output gives the stale contents (NaN, as cudaMalloc leaves it)");
    emu_check(all_nan(host_copy(x, N)), "lazy streams: synchronizing B (and a blocking copy) "
              "did not run A's kernel: nothing waited for A");
    cudaStreamSynchronize(a);
    emu_check(all_equal(host_copy(x, N), 1.0f), "lazy streams: cudaStreamSynchronize(A) ran "
              "A's kernel");

    float *x2 = device_array<float>(N), *y2 = device_array<float>(N);
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    fill<<<1, N, 0, a>>>(x2, N, 1.0f);
    cudaEventRecord(e, a);
    cudaStreamWaitEvent(b, e, 0);
    cudaMemcpyAsync(y2, x2, BYTES, cudaMemcpyDeviceToDevice, b);
    cudaStreamSynchronize(b);
    emu_check(all_equal(host_copy(y2, N), 1.0f), "lazy streams: with cudaEventRecord(A) and "
              "cudaStreamWaitEvent(B), B's copy gives A's 1.0");
    cudaDeviceSynchronize();
    cudaEventDestroy(e);
    emu_free(x, y, x2, y2);
    emu_destroy_streams(a, b);
}

/* 2. cudaEventQuery: not ready while the work is pending, and polling makes progress. */
static void event_query()
{
    cudaStream_t a = emu_new_stream();
    float *x = device_array<float>(N);
    cudaEvent_t e;
    cudaEventCreate(&e);
    emu_check(cudaEventQuery(e) == cudaSuccess, "cudaEventQuery of an event never recorded: "
              "cudaSuccess");
    fill<<<1, N, 0, a>>>(x, N, 3.0f);
    cudaEventRecord(e, a);
    emu_check(cudaEventQuery(e) == cudaErrorNotReady, "cudaEventQuery after a kernel and a "
              "record: cudaErrorNotReady");
    emu_check(cudaEventSynchronize(e) == cudaSuccess && cudaEventQuery(e) == cudaSuccess,
              "after cudaEventSynchronize, cudaEventQuery: cudaSuccess");
    emu_check(all_equal(host_copy(x, N), 3.0f), "after cudaEventSynchronize the kernel before "
              "the record has run");

    fill<<<1, N, 0, a>>>(x, N, 4.0f);
    add_one<<<1, N, 0, a>>>(x, N);
    cudaEventRecord(e, a);
    int polls = 0;
    cudaError_t r;
    while ((r = cudaEventQuery(e)) == cudaErrorNotReady && polls < 1000)
        polls++;
    std::string what = "polling cudaEventQuery makes progress: cudaSuccess after " +
                       std::to_string(polls) + " cudaErrorNotReady answers";
    emu_check(r == cudaSuccess && polls >= 1, what.c_str());
    emu_check(all_equal(host_copy(x, N), 5.0f), "after the polls the kernels before the record "
              "have run, in order");

    fill<<<1, N, 0, a>>>(x, N, 6.0f);
    polls = 0;
    while ((r = cudaStreamQuery(a)) == cudaErrorNotReady && polls < 1000)
        polls++;
    emu_check(r == cudaSuccess && polls >= 1 && all_equal(host_copy(x, N), 6.0f),
              "polling cudaStreamQuery: cudaErrorNotReady, then cudaSuccess with the work done");
    cudaEventDestroy(e);
    cudaFree(x);
    cudaStreamDestroy(a);
}

/* 3. cudaStreamWaitEvent waits for the record made before it, not a later one. */
static void event_captures_record()
{
    cudaStream_t a = emu_new_stream(), b = emu_new_stream();
    float *x = device_array<float>(N), *y = device_array<float>(N), *z = device_array<float>(N);
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    fill<<<1, N, 0, a>>>(x, N, 1.0f);   // K1
    cudaEventRecord(e, a);
    cudaStreamWaitEvent(b, e, 0);
    fill<<<1, N, 0, a>>>(z, N, 2.0f);   // K2
    cudaEventRecord(e, a);              // e re-recorded: B's wait does not move
    cudaMemcpyAsync(y, x, BYTES, cudaMemcpyDeviceToDevice, b);
    cudaStreamSynchronize(b);
    /* Read on B into pageable memory: done when the call returns, and only what B's work
     * depends on runs (the default stream would not say anything about A either). */
    std::vector<float> hy(N), hz(N);
    cudaMemcpyAsync(hy.data(), y, BYTES, cudaMemcpyDeviceToHost, b);
    cudaMemcpyAsync(hz.data(), z, BYTES, cudaMemcpyDeviceToHost, b);
    emu_check(all_equal(hy, 1.0f), "an event captures its stream at record time: B's wait ran "
              "K1, and B's copy gives K1's 1.0");
    emu_check(all_nan(hz), "B's wait was satisfied by the first record: K2, queued on A after "
              "it, has not run (its output is still NaN)");
    cudaEventSynchronize(e);
    cudaMemcpyAsync(hz.data(), z, BYTES, cudaMemcpyDeviceToHost, b);
    emu_check(all_equal(hz, 2.0f), "cudaEventSynchronize of the re-recorded event ran K2");
    cudaEventDestroy(e);
    emu_free(x, y, z);
    emu_destroy_streams(a, b);
}

/* 4 and 5. Pageable host memory: a source is staged, a destination filled, at the call. */
static void pageable_copies()
{
    cudaStream_t a = emu_new_stream();
    float *x = device_array<float>(N);
    std::vector<float> v(N);
    for (int i = 0; i < N; i++)
        v[(size_t)i] = (float)i;
    cudaMemcpyAsync(x, v.data(), BYTES, cudaMemcpyHostToDevice, a);
    for (float &f : v)
        f = -1.0f;
    cudaStreamSynchronize(a);
    std::vector<float> h = host_copy(x, N);
    emu_check(is_ramp(h.data(), N, 0.0f), "a pageable source is staged by cudaMemcpyAsync: "
              "overwritten at once, the device still gets the original values");

    ramp<<<1, N, 0, a>>>(x, N, 100.0f);
    std::vector<float> d(N, -1.0f);
    cudaMemcpyAsync(d.data(), x, BYTES, cudaMemcpyDeviceToHost, a);
    emu_check(is_ramp(d.data(), N, 100.0f), "a pageable destination is complete when "
              "cudaMemcpyAsync returns: the kernel before it ran and the values are there "
              "without a synchronize");
    cudaFree(x);
    cudaStreamDestroy(a);
}

/* n floats of pinned host memory (cudaMallocHost) holding from, from + 1, ... */
static float *pinned_ramp(int n, float from)
{
    float *p = nullptr;
    cudaMallocHost((void **)&p, (size_t)n * sizeof(float));
    for (int i = 0; i < n; i++)
        p[i] = from + (float)i;
    return p;
}

/* 6. Pinned memory is truly asynchronous: hands off while its copy is pending. */
static void pinned_copies()
{
    cudaStream_t a = emu_new_stream();
    float *x = device_array<float>(N);
    float *p = pinned_ramp(N, 10.0f);
    cudaMemcpyAsync(x, p, BYTES, cudaMemcpyHostToDevice, a);
    emu_expect_stop("a host write to a pinned source while its cudaMemcpyAsync is pending", [&] {
        volatile float *q = p;
        q[0] = 0.0f;
    }, {"pinned memory", "pending", "a cudaMemcpyAsync of 1024 bytes"});
    expect_runs("a host read of a pinned source while its copy is pending is allowed", [&] {
        volatile float *q = p;
        return q[5] == 15.0f;
    });
    expect_runs("after cudaStreamSynchronize a host write to the pinned source is fine", [&] {
        cudaStreamSynchronize(a);
        volatile float *q = p;
        q[0] = 0.0f;
        return q[0] == 0.0f;
    });
    cudaStreamSynchronize(a);
    emu_check(is_ramp(host_copy(x, N).data(), N, 10.0f), "the pinned source reached the device");

    add_one<<<1, N, 0, a>>>(x, N);
    cudaMemcpyAsync(p, x, BYTES, cudaMemcpyDeviceToHost, a);
    emu_expect_stop("a host read of a pinned destination while its cudaMemcpyAsync is pending",
                    [&] {
        volatile float *q = p;
        const float v = q[0];
        (void)v;
    }, {"pinned memory", "pending", "a cudaMemcpyAsync of 1024 bytes"});
    emu_expect_stop("a host write to a pinned destination while its cudaMemcpyAsync is pending",
                    [&] {
        volatile float *q = p;
        q[N - 1] = 0.0f;
    }, {"pinned memory", "pending"});
    expect_runs("after cudaStreamSynchronize a host read of the pinned destination is fine and "
                "gives the copy", [&] {
        cudaStreamSynchronize(a);
        return is_ramp(p, N, 11.0f);
    });
    cudaStreamSynchronize(a);
    emu_check(is_ramp(p, N, 11.0f), "the device's values reached the pinned destination");
    cudaFreeHost(p);
    cudaFree(x);
    cudaStreamDestroy(a);
}

/* CUDA forbids host access to the bytes of a pending copy, not to the rest of the pinned
 * allocation: one pinned buffer of two halves (fill one while the other is copied) is a
 * common pattern, and here both halves share one page, which is protected as a whole. */
static void pinned_outside_pending_copy()
{
    cudaStream_t a = emu_new_stream();
    float *x = device_array<float>(N);
    float *p = pinned_ramp(2 * N, 0.0f);   /* two halves of 1 KiB in one page */
    cudaMemcpyAsync(x, p, BYTES, cudaMemcpyHostToDevice, a);   /* reads the first half */
    expect_runs("a host write to the other half of a pinned buffer, outside the pending "
                "copy's bytes, is allowed", [&] {
        volatile float *q = p + N;
        q[0] = -1.0f;
        return q[0] == -1.0f;
    });
    cudaStreamSynchronize(a);
    cudaMemcpyAsync(p, x, BYTES, cudaMemcpyDeviceToHost, a);   /* writes the first half */
    expect_runs("a host read of the other half of a pinned buffer, outside the pending "
                "copy's bytes, is allowed", [&] {
        volatile float *q = p + N;
        return q[0] == (float)N;
    });
    cudaStreamSynchronize(a);
    cudaFreeHost(p);
    cudaFree(x);
    cudaStreamDestroy(a);
}

/* 7. Device memory is not host memory, and an allocation ends at a guard. */
static void device_memory()
{
    unsigned id = 0;
    float *x = device_array<float>(N / 4, &id);   /* 64 floats: 256 bytes */
    float *out = device_array<float>(16);
    const std::string named = "byte 12 of allocation #" + std::to_string(id) + ", 256 bytes";
    emu_expect_stop("host code dereferencing a cudaMalloc pointer", [&] {
        volatile float *q = x;
        const float v = q[3];
        (void)v;
    }, {"host code accessed device memory", named.c_str()});
    ramp<<<1, 64>>>(x, 64, 0.0f);
    read_at<<<1, 1>>>(x, out, 63);
    emu_check(host_copy(out, 1)[0] == 63.0f, "a kernel reads the last element of a 256-byte "
              "allocation");
    const std::string past = "byte 256 of device allocation #" + std::to_string(id) +
                             ", which has 256 bytes: out of bounds";
    const std::string site = at_line("PAST_END", ")");
    emu_expect_stop("a kernel reading one element past the end of a 256-byte allocation", [&] {
        read_at<<<1, 1>>>(x, out, 64);   // PAST_END
        cudaDeviceSynchronize();
    }, {past.c_str(), "kernel read_at (launched at", site.c_str()});
    emu_free(out, x);
}

/* The same fault where a real program meets it: a process that never forked, whose kernel
 * blocks run on the executor's helper threads (the forked children above run every block
 * on their calling thread). Runs in a fresh process: this program again, exec'd.
 * EMULATOR BUG (reported; this check shows it until fixed): on_fault looks the address up
 * only when it can take state_lock, which the host thread draining the queue holds while
 * the helpers run blocks, so a helper's fault falls through to the default action: the
 * process dies of SIGSEGV without a message. */
static int past_end_on_helpers()
{
    float *x = device_array<float>(64);
    float *out = device_array<float>(64);
    read_past_end_on_helpers<<<16, 1>>>(x, out, 64);
    cudaDeviceSynchronize();
    return 0;
}

static void device_memory_on_helpers()
{
    emu_expect_stop("a kernel reading past the end on the executor's helper threads (a process "
                    "that never forked, 4 executor threads)", [&] {
        setenv("GEARBOX_CUDA_EMU_THREADS", "4", 1);
        execl("/proc/self/exe", "test-cuda-emu-streams", "--past-end-on-helpers", (char *)nullptr);
        _exit(127);
    }, {"out of bounds", "kernel read_past_end_on_helpers"});
}

/* 8. Host functions run in stream order, lazily, and may not call CUDA. */
static void set_flag(void *arg)
{
    *static_cast<int *>(arg) = 1;
}

static void calls_cuda(void *arg)
{
    cudaMemsetAsync(arg, 0, sizeof(float), nullptr);
}

static void reads_device(void *arg)
{
    volatile float *q = static_cast<float *>(arg);
    const float v = q[0];
    (void)v;
}

static void host_functions()
{
    cudaStream_t a = emu_new_stream();
    float *x = device_array<float>(N);
    int flag = 0;
    fill<<<1, N, 0, a>>>(x, N, 1.0f);
    cudaLaunchHostFunc(a, set_flag, &flag);
    emu_check(flag == 0, "a queued host function has not run before anything waits");
    cudaStreamSynchronize(a);
    emu_check(flag == 1, "cudaStreamSynchronize ran the host function");
    emu_expect_stop("a host function that calls CUDA", [&] {
        cudaLaunchHostFunc(a, calls_cuda, x);
        cudaStreamSynchronize(a);
    }, {"cudaMemsetAsync called from a host function", "must not call CUDA"});
    emu_expect_stop("a host function that reads device memory", [&] {
        cudaLaunchHostFunc(a, reads_device, x);
        cudaStreamSynchronize(a);
    }, {"host code accessed device memory"});
    cudaFree(x);
    cudaStreamDestroy(a);
}

/* 9. Misused calls return CUDA's errors (and queue nothing). */
static void refused_calls()
{
    cudaStream_t a = emu_new_stream();
    float *x = device_array<float>(N), *y = device_array<float>(N);
    fill<<<1, N, 0, a>>>(x, N, 1.0f);
    fill<<<1, N, 0, a>>>(y, N, 2.0f);
    cudaStreamSynchronize(a);
    std::vector<float> host(N, 7.0f);
    float not_device[4] = {0, 0, 0, 0};
    cudaGetLastError();
    emu_check(cudaFree(not_device) == cudaErrorInvalidDevicePointer,
              "cudaFree of a pointer not from cudaMalloc: cudaErrorInvalidDevicePointer");
    emu_check(cudaFree(host.data()) == cudaErrorInvalidDevicePointer,
              "cudaFree of heap memory: cudaErrorInvalidDevicePointer");
    cudaGetLastError();
    emu_check(cudaMemcpyAsync(y, x, BYTES, cudaMemcpyHostToDevice, a) == cudaErrorInvalidValue &&
                  cudaGetLastError() == cudaErrorInvalidValue,
              "cudaMemcpyAsync cudaMemcpyHostToDevice from a device source: "
              "cudaErrorInvalidValue (and the last error)");
    emu_check(cudaMemcpyAsync(host.data(), x, BYTES, cudaMemcpyHostToDevice, a) ==
                  cudaErrorInvalidValue,
              "cudaMemcpyAsync cudaMemcpyHostToDevice into host memory: cudaErrorInvalidValue");
    emu_check(cudaMemcpyAsync(x + N - 4, host.data(), 8 * sizeof(float), cudaMemcpyHostToDevice,
                              a) == cudaErrorInvalidValue,
              "cudaMemcpyAsync of 8 floats to the last 4 of an allocation: "
              "cudaErrorInvalidValue");
    emu_check(cudaMemcpyAsync(y, x + 1, BYTES, cudaMemcpyDeviceToDevice, a) ==
                  cudaErrorInvalidValue,
              "cudaMemcpyAsync whose device source runs one float past its allocation: "
              "cudaErrorInvalidValue");
    cudaStreamSynchronize(a);
    emu_check(all_equal(host_copy(x, N), 1.0f) && all_equal(host_copy(y, N), 2.0f),
              "the refused copies queued nothing");
    cudaGetLastError();
    emu_free(x, y);
    cudaStreamDestroy(a);
}

/* 10. Independent streams drain in an interleaving, each in its own order. */
struct log_entry {
    std::vector<int> *log;
    int value;
};

static void append(void *arg)
{
    const log_entry *e = static_cast<const log_entry *>(arg);
    e->log->push_back(e->value);
}

static void interleaving()
{
    cudaStream_t a = emu_new_stream(), b = emu_new_stream();
    float *x = device_array<float>(N), *y = device_array<float>(N);
    cudaMemsetAsync(x, 0, BYTES, a);
    cudaMemsetAsync(y, 0, BYTES, b);
    std::vector<int> log;
    std::vector<log_entry> entries;
    entries.reserve(32);
    for (int i = 0; i < 16; i++) {
        entries.push_back({&log, i});
        entries.push_back({&log, 100 + i});
    }
    for (int i = 0; i < 16; i++) {
        add_one<<<1, N, 0, a>>>(x, N);
        cudaLaunchHostFunc(a, append, &entries[(size_t)(2 * i)]);
        add_one<<<1, N, 0, b>>>(y, N);
        cudaLaunchHostFunc(b, append, &entries[(size_t)(2 * i + 1)]);
    }
    cudaDeviceSynchronize();
    emu_check(cudaStreamQuery(a) == cudaSuccess && cudaStreamQuery(b) == cudaSuccess &&
                  all_equal(host_copy(x, N), 16.0f) && all_equal(host_copy(y, N), 16.0f),
              "cudaDeviceSynchronize completes two independent streams' work");
    int next_a = 0, next_b = 100, switches = 0;
    bool ordered = log.size() == 32;
    for (size_t i = 0; ordered && i < log.size(); i++) {
        if (log[i] < 100)
            ordered = log[i] == next_a++;
        else
            ordered = log[i] == next_b++;
        switches += i > 0 && (log[i] < 100) != (log[i - 1] < 100);
    }
    emu_check(ordered, "each stream's operations ran in its own order");
    std::string what = "the two streams ran interleaved (" + std::to_string(switches) +
                       " switches between them in 32 host functions)";
    emu_check(switches > 1, what.c_str());
    emu_free(x, y);
    emu_destroy_streams(a, b);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--past-end-on-helpers") == 0)
        return past_end_on_helpers();
    /* lazy_streams runs kernels in this process first: the forked children below then run
     * every block on their calling thread (device_memory_on_helpers covers the other case). */
    lazy_streams();
    event_query();
    event_captures_record();
    pageable_copies();
    pinned_copies();
    pinned_outside_pending_copy();
    device_memory();
    device_memory_on_helpers();
    host_functions();
    refused_calls();
    interleaving();
    return emu_finish("test_streams");
}
