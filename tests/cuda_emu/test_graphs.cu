/* The emulator's stream capture and graphs: work queued on a capturing stream is recorded,
 * not run; each launch of the instantiated graph runs a copy of it with the arguments the
 * calls had when recorded; and what CUDA refuses during a capture is refused, with the
 * capture then invalid: synchronizing the stream, allocating, blocking copies, copies with
 * pageable memory, waits that cross the capture's boundary, and waiting on an event
 * recorded in a capture.
 *
 * Written as CUDA (it is compiled through cu2cc.py like the plugins' .cu files).
 */
#include <cuda_runtime.h>
#include <math.h>

#include <cmath>
#include <thread>
#include <vector>

#include "emu_test.h"

static __global__ void fill(float *x, int n, float v)
{
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        x[i] = v;
}

static __global__ void add_one(float *x, int n)
{
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        x[i] += 1.0f;
}

constexpr int N = 256;
constexpr size_t BYTES = N * sizeof(float);

static float *device_array()
{
    float *p = nullptr;
    cudaMalloc((void **)&p, BYTES);
    return p;
}

static std::vector<float> host_copy(const float *d)
{
    std::vector<float> h(N);
    cudaMemcpy(h.data(), d, BYTES, cudaMemcpyDeviceToHost);
    return h;
}

static bool all_equal(const std::vector<float> &h, float v)
{
    for (float f : h)
        if (f != v && !(std::isnan(v) && std::isnan(f)))
            return false;
    return true;
}

/* Begins a thread-local capture of `s`, as device/cuda does. */
static void begin(cudaStream_t s)
{
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
}

/* 1. Recorded, not run; each launch runs the recording again, arguments as recorded. */
static void record_and_replay()
{
    cudaStream_t a = emu_new_stream();
    float *x = device_array(), *y = device_array();
    fill<<<1, N, 0, a>>>(x, N, 5.0f);
    cudaStreamSynchronize(a);
    float value = 1.0f;
    begin(a);
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(a, &status);
    emu_check(status == cudaStreamCaptureStatusActive, "cudaStreamIsCapturing: active after "
              "cudaStreamBeginCapture");
    add_one<<<1, N, 0, a>>>(x, N);
    fill<<<1, N, 0, a>>>(y, N, value);
    cudaMemcpyAsync(y, x, BYTES / 2, cudaMemcpyDeviceToDevice, a);
    cudaMemsetAsync(x + N / 2, 0, BYTES / 2, a);
    value = 9.0f;   /* after recording: the graph keeps 1.0 */
    cudaGraph_t graph = nullptr;
    emu_check(cudaStreamEndCapture(a, &graph) == cudaSuccess && graph,
              "cudaStreamEndCapture returns the graph");
    cudaStreamIsCapturing(a, &status);
    emu_check(status == cudaStreamCaptureStatusNone, "cudaStreamIsCapturing: none after the end");
    emu_check(all_equal(host_copy(x), 5.0f), "a kernel, a copy and a memset queued during the "
              "capture were recorded, not run: x still 5.0 after the stream drained");
    cudaGraphExec_t exec = nullptr;
    emu_check(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess && exec,
              "cudaGraphInstantiate");
    cudaGraphDestroy(graph);   /* the executable graph is its own copy */
    cudaGraphLaunch(exec, a);
    cudaStreamSynchronize(a);
    std::vector<float> hx = host_copy(x), hy = host_copy(y);
    bool first = true;
    for (int i = 0; i < N; i++)
        first = first && hx[i] == (i < N / 2 ? 6.0f : 0.0f) && hy[i] == (i < N / 2 ? 6.0f : 1.0f);
    emu_check(first, "one launch: every recorded operation ran once, in order, with the values "
              "it was recorded with (1.0, not the 9.0 set after)");
    cudaGraphLaunch(exec, a);
    cudaGraphLaunch(exec, a);
    cudaStreamSynchronize(a);
    hx = host_copy(x);
    emu_check(hx[0] == 8.0f && hx[N - 1] == 0.0f, "two more launches: the kernel ran twice more "
              "(6.0 to 8.0 where the memset does not reach)");
    emu_check(cudaGraphExecDestroy(exec) == cudaSuccess, "cudaGraphExecDestroy");
    emu_free(x, y);
    cudaStreamDestroy(a);
}

/* 2. A launch is ordered with the stream's other work, and lazy like it. */
static void launch_in_stream_order()
{
    cudaStream_t a = emu_new_stream(), b = emu_new_stream();
    float *x = device_array();
    begin(a);
    add_one<<<1, N, 0, a>>>(x, N);
    cudaGraph_t graph;
    cudaStreamEndCapture(a, &graph);
    cudaGraphExec_t exec;
    cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    fill<<<1, N, 0, b>>>(x, N, 2.0f);
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    cudaEventRecord(e, b);
    cudaStreamWaitEvent(a, e, 0);   /* outside the capture: the launch waits */
    cudaGraphLaunch(exec, a);
    cudaStreamSynchronize(a);
    emu_check(all_equal(host_copy(x), 3.0f), "a launch after a cudaStreamWaitEvent on another "
              "stream runs after that stream's kernel (2.0 + 1)");
    cudaGraphExecDestroy(exec);
    cudaEventDestroy(e);
    cudaFree(x);
    emu_destroy_streams(a, b);
}

/* A capture that `breaking` breaks: the call fails with `code`, cudaStreamEndCapture with
 * cudaErrorStreamCaptureInvalidated and no graph. */
static void expect_broken(const char *what, cudaError_t code,
                          const std::function<cudaError_t(cudaStream_t)> &breaking)
{
    cudaStream_t a = emu_new_stream();
    float *x = device_array();
    begin(a);
    add_one<<<1, N, 0, a>>>(x, N);
    cudaError_t got = breaking(a);
    cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&got);
    cudaError_t end = cudaStreamEndCapture(a, &graph);
    const bool ok = got == code && end == cudaErrorStreamCaptureInvalidated && !graph;
    std::string line = std::string(what) + ": " + cudaGetErrorName(code) +
                       ", then cudaStreamEndCapture: cudaErrorStreamCaptureInvalidated";
    emu_check(ok, line.c_str());
    if (!ok)
        printf("  (the call: %s, the end: %s)\n", cudaGetErrorName(got), cudaGetErrorName(end));
    cudaGetLastError();
    cudaFree(x);
    cudaStreamDestroy(a);
}

static float *spare;                    /* device memory the refused copies name */
static std::vector<float> pageable(N, 1.0f);

/* 3. What a capture refuses. */
static void refused_during_capture()
{
    spare = device_array();
    expect_broken("cudaStreamSynchronize of the capturing stream",
                  cudaErrorStreamCaptureUnsupported,
                  [](cudaStream_t a) { return cudaStreamSynchronize(a); });
    expect_broken("cudaStreamQuery of the capturing stream", cudaErrorStreamCaptureUnsupported,
                  [](cudaStream_t a) { return cudaStreamQuery(a); });
    expect_broken("cudaMalloc during a capture", cudaErrorStreamCaptureUnsupported,
                  [](cudaStream_t) {
                      void *p = nullptr;
                      return cudaMalloc(&p, 64);
                  });
    expect_broken("cudaDeviceSynchronize during a capture", cudaErrorStreamCaptureUnsupported,
                  [](cudaStream_t) { return cudaDeviceSynchronize(); });
    expect_broken("a blocking cudaMemcpy during a capture", cudaErrorStreamCaptureUnsupported,
                  [](cudaStream_t) {
                      return cudaMemcpy(pageable.data(), spare, BYTES, cudaMemcpyDeviceToHost);
                  });
    expect_broken("cudaMemcpyAsync from pageable memory on the capturing stream",
                  cudaErrorStreamCaptureUnsupported, [](cudaStream_t a) {
                      return cudaMemcpyAsync(spare, pageable.data(), BYTES,
                                             cudaMemcpyHostToDevice, a);
                  });
    expect_broken("waiting on an event recorded outside the capture",
                  cudaErrorStreamCaptureIsolation, [](cudaStream_t a) {
                      cudaStream_t b = emu_new_stream();
                      cudaEvent_t e;
                      cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
                      cudaEventRecord(e, b);
                      return cudaStreamWaitEvent(a, e, 0);
                  });

    cudaStream_t a = emu_new_stream();
    float *x = device_array();
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    begin(a);
    add_one<<<1, N, 0, a>>>(x, N);
    cudaEventRecord(e, a);
    cudaStreamWaitEvent(a, e, 0);
    const cudaError_t sync = cudaEventSynchronize(e), query = cudaEventQuery(e);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(a, &graph);
    emu_check(sync == cudaErrorCapturedEvent && query == cudaErrorCapturedEvent,
              "cudaEventSynchronize and cudaEventQuery of an event recorded in the capture: "
              "cudaErrorCapturedEvent");
    emu_check(end == cudaSuccess && graph, "a wait on an event of the same capture is its own "
              "order, and leaves the capture valid");
    cudaEventRecord(e, a);
    emu_check(cudaEventSynchronize(e) == cudaSuccess, "recorded again outside a capture, the "
              "event can be waited on");
    cudaGetLastError();
    emu_check(cudaStreamEndCapture(a, &graph) == cudaErrorStreamCaptureUnmatched,
              "cudaStreamEndCapture of a stream not capturing: cudaErrorStreamCaptureUnmatched");
    emu_check(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal) ==
                  cudaErrorStreamCaptureUnsupported,
              "the legacy default stream cannot be captured");
    begin(a);
    emu_check(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal) == cudaErrorIllegalState,
              "a second cudaStreamBeginCapture of a capturing stream: cudaErrorIllegalState");
    cudaStreamEndCapture(a, &graph);
    cudaGetLastError();
    cudaEventDestroy(e);
    emu_free(x, spare);
    cudaStreamDestroy(a);
}

/* 4. A host function recorded in a graph runs at each launch, under the same rules. */
static void count(void *arg)
{
    ++*static_cast<int *>(arg);
}

static void calls_cuda(void *)
{
    int device = 0;
    cudaGetDevice(&device);
}

static void recorded_host_functions()
{
    cudaStream_t a = emu_new_stream();
    int runs = 0;
    begin(a);
    cudaLaunchHostFunc(a, count, &runs);
    cudaGraph_t graph;
    cudaStreamEndCapture(a, &graph);
    cudaGraphExec_t exec;
    cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    cudaStreamSynchronize(a);
    const int recorded = runs;
    cudaGraphLaunch(exec, a);
    cudaGraphLaunch(exec, a);
    cudaStreamSynchronize(a);
    emu_check(recorded == 0 && runs == 2, "a host function recorded in a capture did not run "
              "then, and ran once per launch");
    cudaGraphExecDestroy(exec);
    emu_expect_stop("a recorded host function that calls CUDA, when the graph runs", [] {
        cudaStream_t s = emu_new_stream();
        begin(s);
        cudaLaunchHostFunc(s, calls_cuda, nullptr);
        cudaGraph_t g;
        cudaStreamEndCapture(s, &g);
        cudaGraphExec_t x;
        cudaGraphInstantiate(&x, g, 0);
        cudaGraphLaunch(x, s);
        cudaStreamSynchronize(s);
    }, {"cudaGetDevice called from a host function"});
    cudaStreamDestroy(a);
}

/* 5. Relaxed mode lets allocations through; thread-local mode only stops its own thread. */
static void capture_modes()
{
    cudaStream_t a = emu_new_stream();
    cudaStreamBeginCapture(a, cudaStreamCaptureModeRelaxed);
    void *p = nullptr;
    const cudaError_t relaxed = cudaMalloc(&p, 64);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(a, &graph);
    emu_check(relaxed == cudaSuccess && end == cudaSuccess && graph,
              "a relaxed capture allows cudaMalloc and stays valid");
    cudaGraphDestroy(graph);
    cudaFree(p);

    begin(a);
    cudaError_t other = cudaErrorUnknown;
    std::thread([&] { other = cudaMalloc(&p, 64); }).join();
    const cudaError_t own = cudaMalloc(&p, 64);
    cudaStreamEndCapture(a, &graph);
    emu_check(other == cudaSuccess && own == cudaErrorStreamCaptureUnsupported,
              "a thread-local capture refuses cudaMalloc on its own thread only");
    cudaGetLastError();
    cudaStreamDestroy(a);
}

int main()
{
    record_and_replay();
    launch_in_stream_order();
    refused_during_capture();
    recorded_host_functions();
    capture_modes();
    return emu_finish("test_graphs");
}
