/* The CUDA device plugin: one NVIDIA GPU, its memory, streams and events, its description,
 * and the vtable that gathers the kernels of this folder's .cu files and the cuBLASLt
 * matmul (matmul.c).
 *
 * The GPU is gb_host.device_ordinal (the core's choice from [device] ordinal or the
 * launcher's local rank). Every kernel, memset and copy of the vtable is queued on the
 * instance's compute stream, a non-blocking stream of its own that other plugins reach
 * through gb_device_ctx.stream; a call returns once its work is queued, except where
 * device.h says a copy returns later. Device memory is cudaMalloc's (the core allocates
 * everything before the first step), pinned host memory cudaMallocHost's. Queued host work
 * (enqueue_host) is cudaLaunchHostFunc, so it runs on a CUDA thread in stream order and
 * must not call CUDA itself. Graphs (ABI 1.4) are CUDA graphs captured from the compute
 * stream. Left out: memory pools or an arena of our own (the core already plans one
 * allocation per buffer), peer access between GPUs, and unified memory.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cuda_device.h"
#include "cuda_status.h"
#include "gearbox/plugin.h"

#define FITS(out, type, field) \
    ((out)->struct_size >= offsetof(type, field) + sizeof((out)->field))

/* ---- helpers -------------------------------------------------------------------------- */

/* The first failure of queued host work, which waits return (device.h). */
static gb_status host_work_status(cuda_device *dev)
{
    return (gb_status)__atomic_load_n(&dev->host_failed, __ATOMIC_ACQUIRE);
}

static cudaStream_t stream_of(cuda_device *dev, void *stream)
{
    return stream ? (cudaStream_t)stream : dev->compute;
}

/* Releases return nothing to the core: a failure is logged. */
static void log_release_failure(const cuda_device *dev, cudaError_t err, const char *call)
{
    if (err != cudaSuccess)
        dev->host->log(dev->host, GB_LOG_ERROR, "device/cuda: %s failed: %s", call,
                       cudaGetErrorString(err));
}

/* The body of an entry that is one CUDA runtime call on the instance's GPU: cuda_enter,
 * then `call`, returning the status of whichever fails. */
#define ENTER_AND_CALL(dev, call)                                                           \
    do {                                                                                    \
        const gb_host *host = (dev)->host;                                                  \
        gb_status entered_ = cuda_enter(dev);                                               \
        if (entered_ != GB_OK)                                                              \
            return entered_;                                                                \
        GB_CUDA_CHECK(call);                                                                \
    } while (0)

/* ---- lifetime ------------------------------------------------------------------------- */

static void cuda_destroy(void *self)
{
    cuda_device *dev = self;
    if (!dev)
        return;
    const gb_host *host = dev->host;
    /* nothing may still run on what is freed below; errors here can only be logged */
    cudaError_t err = cudaSetDevice(dev->ordinal);
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    if (err != cudaSuccess)
        host->log(host, GB_LOG_ERROR, "device/cuda: waiting for the GPU before closing: %s",
                  cudaGetErrorString(err));
    cuda_matmul_close(dev);
    if (dev->lt)
        cublasLtDestroy(dev->lt);
    cudaFree(dev->workspace);
    cudaFree(dev->scratch);
    if (dev->compute)
        cudaStreamDestroy(dev->compute);
    host->free(host, dev);
}

/* Everything after the GPU is selected: description, stream, cuBLASLt, workspace. */
static gb_status open_gpu(cuda_device *dev)
{
    const gb_host *host = dev->host;
    struct cudaDeviceProp prop;
    GB_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev->ordinal));
    snprintf(dev->name, sizeof dev->name, "%.*s", (int)sizeof dev->name - 1, prop.name);
    dev->cc_major = prop.major;
    dev->cc_minor = prop.minor;
    dev->sm_count = prop.multiProcessorCount;
    dev->smem_optin = prop.sharedMemPerBlockOptin;
    dev->memory_bytes = prop.totalGlobalMem;
    if (prop.major < 8) {
        host->set_error(host, "device/cuda needs a GPU of compute capability 8.0 (Ampere) or "
                        "newer for bf16 and its kernels are built for sm_80 and sm_90; GPU %d "
                        "(%s) is %d.%d", dev->ordinal, prop.name, prop.major, prop.minor);
        return GB_ERR_DEVICE;
    }
    GB_CUDA_CHECK(cudaStreamCreateWithFlags(&dev->compute, cudaStreamNonBlocking));
    GB_CUDA_LIB_CHECK(cublasStatus_t, cublasLtCreate(&dev->lt), cublasLtGetStatusString);
    GB_CUDA_CHECK(cudaMalloc(&dev->workspace, CUDA_LT_WORKSPACE));
    GB_CUDA_CHECK(cudaMalloc(&dev->scratch, CUDA_SCRATCH_BYTES));
    dev->scratch_bytes = CUDA_SCRATCH_BYTES;
    return cuda_matmul_open(dev);
}

static gb_status cuda_create(const gb_host *host, const gb_value *options, void **self)
{
    (void)options;
    int ordinal = FITS(host, gb_host, device_ordinal) ? host->device_ordinal : 0;
    gb_status st = gb_cuda_select_gpu(host, "device/cuda", ordinal, "[device] plugin = cpu");
    if (st != GB_OK)
        return st;
    cuda_device *dev = host->alloc(host, sizeof *dev);
    if (!dev) {
        host->set_error(host, "cannot allocate the cuda device instance");
        return GB_ERR_NO_MEMORY;
    }
    memset(dev, 0, sizeof *dev);
    dev->host = host;
    dev->ordinal = ordinal;
    if ((st = open_gpu(dev)) != GB_OK) {
        cuda_destroy(dev);
        return st;
    }
    host->log(host, GB_LOG_DEBUG, "GPU %d: %s, compute capability %d.%d, %d SMs", ordinal,
              dev->name, dev->cc_major, dev->cc_minor, dev->sm_count);
    *self = dev;
    return GB_OK;
}

/* ---- description ---------------------------------------------------------------------- */

static const gb_device_ops GB_PLUGIN_OPS;

/* What this device implements (plugin.h's GB_CAP_*): every kernel gives the same bits run
 * after run (fixed reduction orders, one cuBLASLt algorithm per shape), and the 1.2
 * matmul features and the tanh GELU are all served. */
#define CUDA_CAPS (GB_CAP_DETERMINISTIC | GB_CAP_MATMUL_BATCHED | GB_CAP_MATMUL_EPILOGUES | \
                   GB_CAP_GELU_TANH | GB_CAP_TF32)

static gb_status cuda_context(void *self, gb_device_ctx *out)
{
    cuda_device *dev = self;
    out->device = GB_DEVICE_CUDA;
    out->ordinal = dev->ordinal;
    out->stream = dev->compute;
    if (!FITS(out, gb_device_ctx, caps))
        return GB_OK; /* a caller built before 1.2 */
    out->ops = &GB_PLUGIN_OPS;
    out->self = dev;
    out->host_access = 0;
    out->cc_major = dev->cc_major;
    out->cc_minor = dev->cc_minor;
    out->caps = CUDA_CAPS;
    return GB_OK;
}

/* The clock NVIDIA rates Hopper's dense tensor-core peak at: 989.4 TFLOP/s bf16 on an H100
 * SXM or an H200 is 132 SMs x 4096 FLOP x 1.83 GHz. The driver reports the maximum boost
 * (1.98 GHz), which would give 1070 and an MFU no sustained run is measured against. */
#define HOPPER_TENSOR_RATED_KHZ 1830000

/* Peak FLOP/s from the SM count and the clock the driver reports (its maximum boost, so an
 * upper bound; on Hopper the tensor cores' rated clock when lower), for the architectures
 * whose per-SM rates are known here: A100 (8.0) and H100/H200 (9.0). FP32 FMA lanes per SM
 * and dense bf16 tensor FLOP per SM per clock. */
static void peak_flops(cuda_device *dev, double *f32, double *bf16)
{
    *f32 = *bf16 = 0.0;
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev->ordinal) != cudaSuccess)
        return;
    double per_sm_f32, per_sm_bf16;
    if (dev->cc_major == 8 && dev->cc_minor == 0) {
        per_sm_f32 = 64 * 2;
        per_sm_bf16 = 2048;
    } else if (dev->cc_major == 9 && dev->cc_minor == 0) {
        per_sm_f32 = 128 * 2;
        per_sm_bf16 = 4096;
    } else {
        return;
    }
    int tensor_khz = khz;
    if (dev->cc_major == 9 && tensor_khz > HOPPER_TENSOR_RATED_KHZ)
        tensor_khz = HOPPER_TENSOR_RATED_KHZ;
    *f32 = per_sm_f32 * ((double)khz * 1e3 * dev->sm_count);
    *bf16 = per_sm_bf16 * ((double)tensor_khz * 1e3 * dev->sm_count);
}

static gb_status cuda_info(void *self, gb_device_info *out)
{
    cuda_device *dev = self;
    const gb_host *host = dev->host;
    gb_status st = cuda_enter(dev);
    if (st != GB_OK)
        return st;
    snprintf(out->name, sizeof out->name, "%s", dev->name);
    out->memory_bytes = dev->memory_bytes;
    peak_flops(dev, &out->peak_flops_f32, &out->peak_flops_bf16);
    if (FITS(out, gb_device_info, libraries)) {
        int runtime = 0;
        GB_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
        size_t lt = cublasLtGetVersion();
        snprintf(out->libraries, sizeof out->libraries, "CUDA runtime %d.%d, cuBLASLt %zu.%zu.%zu",
                 runtime / 1000, runtime % 1000 / 10, lt / 10000, lt / 100 % 100, lt % 100);
    }
    if (FITS(out, gb_device_info, free_bytes)) {
        size_t free_bytes = 0, total = 0;
        GB_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
        out->free_bytes = free_bytes;
    }
    if (FITS(out, gb_device_info, cc_minor)) {
        out->cc_major = dev->cc_major;
        out->cc_minor = dev->cc_minor;
    }
    if (FITS(out, gb_device_info, driver)) {
        int driver = 0;
        GB_CUDA_CHECK(cudaDriverGetVersion(&driver));
        snprintf(out->driver, sizeof out->driver, "CUDA %d.%d (driver API)", driver / 1000,
                 driver % 1000 / 10);
    }
    if (FITS(out, gb_device_info, pci_bus_id))
        GB_CUDA_CHECK(cudaDeviceGetPCIBusId(out->pci_bus_id, (int)sizeof out->pci_bus_id,
                                            dev->ordinal));
    return GB_OK;
}

/* Said without opening a GPU (describe() runs before create()): gearbox's CUDA path needs
 * sm_80 or later, whose tensor cores multiply bf16 and f16 natively. */
static gb_status cuda_describe(const gb_host *host, gb_device_desc *out)
{
    (void)host;
    snprintf(out->family, sizeof out->family, "cuda");
    out->memory = GB_MEMORY_DEVICE;
    out->native_dtypes = GB_DTYPE_BIT(GB_F32) | GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16);
    out->asynchronous = 1;
    snprintf(out->preferred_precision, sizeof out->preferred_precision, "bf16");
    snprintf(out->preferred_why, sizeof out->preferred_why,
             "CUDA tensor cores (sm_80 and later) multiply bf16 natively");
    return GB_OK;
}

/* ---- memory --------------------------------------------------------------------------- */

static gb_status cuda_alloc(void *self, size_t bytes, void **ptr)
{
    cuda_device *dev = self;
    const gb_host *host = dev->host;
    gb_status st = cuda_enter(dev);
    if (st != GB_OK)
        return st;
    *ptr = NULL;
    /* cudaMalloc aligns to 256 bytes; a zero-byte request still gets a distinct pointer */
    cudaError_t err = cudaMalloc(ptr, bytes ? bytes : 1);
    if (err == cudaErrorMemoryAllocation) {
        size_t free_bytes = 0, total = 0;
        cudaGetLastError();   /* the failed allocation is not sticky; do not report it twice */
        cudaMemGetInfo(&free_bytes, &total);
        host->set_error(host, "device/cuda: cannot allocate %zu bytes on GPU %d (%s): %zu of "
                        "%zu bytes free", bytes, dev->ordinal, dev->name, free_bytes, total);
        return GB_ERR_NO_MEMORY;
    }
    GB_CUDA_CHECK(err);
    return GB_OK;
}

static void cuda_free(void *self, void *ptr)
{
    log_release_failure(self, ptr ? cudaFree(ptr) : cudaSuccess, "cudaFree");
}

static gb_status copy_kind(cuda_device *dev, gb_copy_kind kind, enum cudaMemcpyKind *out)
{
    switch (kind) {
    case GB_COPY_HOST_TO_DEVICE: *out = cudaMemcpyHostToDevice; return GB_OK;
    case GB_COPY_DEVICE_TO_HOST: *out = cudaMemcpyDeviceToHost; return GB_OK;
    case GB_COPY_DEVICE_TO_DEVICE: *out = cudaMemcpyDeviceToDevice; return GB_OK;
    }
    dev->host->set_error(dev->host, "copy: unknown copy kind %d", (int)kind);
    return GB_ERR_INVALID_ARG;
}

/* device.h's copy(): queued on the compute stream. To the device it returns once `src`
 * may be reused: at once for pageable memory (the driver stages it before returning),
 * after the copy for pinned memory (which the DMA reads later); to the host it returns
 * with `dst` filled, after everything queued before it. */
static gb_status cuda_copy(void *self, void *dst, const void *src, size_t bytes,
                           gb_copy_kind kind)
{
    cuda_device *dev = self;
    const gb_host *host = dev->host;
    enum cudaMemcpyKind how;
    gb_status st = copy_kind(dev, kind, &how);
    if (st == GB_OK)
        st = cuda_enter(dev);
    if (st != GB_OK || bytes == 0)
        return st;
    GB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, how, dev->compute));
    int wait = kind == GB_COPY_DEVICE_TO_HOST;
    if (kind == GB_COPY_HOST_TO_DEVICE) {
        struct cudaPointerAttributes attr;
        GB_CUDA_CHECK(cudaPointerGetAttributes(&attr, src));
        wait = attr.type == cudaMemoryTypeHost;
    }
    if (wait)
        GB_CUDA_CHECK(cudaStreamSynchronize(dev->compute));
    return kind == GB_COPY_DEVICE_TO_HOST ? host_work_status(dev) : GB_OK;
}

static gb_status cuda_memset_zero(void *self, void *ptr, size_t bytes)
{
    cuda_device *dev = self;
    const gb_host *host = dev->host;
    gb_status st = cuda_enter(dev);
    if (st != GB_OK || bytes == 0)
        return st;
    GB_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, dev->compute));
    return GB_OK;
}

/* Every stream of the GPU, the other plugins' included. */
static gb_status cuda_sync(void *self)
{
    cuda_device *dev = self;
    ENTER_AND_CALL(dev, cudaDeviceSynchronize());
    return host_work_status(dev);
}

static gb_status cuda_alloc_host(void *self, size_t bytes, void **ptr)
{
    cuda_device *dev = self;
    *ptr = NULL;
    ENTER_AND_CALL(dev, cudaMallocHost(ptr, bytes ? bytes : 1));   /* page-aligned */
    return GB_OK;
}

static void cuda_free_host(void *self, void *ptr)
{
    log_release_failure(self, ptr ? cudaFreeHost(ptr) : cudaSuccess, "cudaFreeHost");
}

static gb_status cuda_copy_async(void *self, void *dst, const void *src, size_t bytes,
                                 gb_copy_kind kind, void *stream)
{
    cuda_device *dev = self;
    const gb_host *host = dev->host;
    enum cudaMemcpyKind how;
    gb_status st = copy_kind(dev, kind, &how);
    if (st == GB_OK)
        st = cuda_enter(dev);
    if (st != GB_OK || bytes == 0)
        return st;
    GB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, how, stream_of(dev, stream)));
    return GB_OK;
}

/* ---- streams, events, queued host work ------------------------------------------------ */

static gb_status cuda_stream_create(void *self, void **stream)
{
    cuda_device *dev = self;
    cudaStream_t s = NULL;
    ENTER_AND_CALL(dev, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream = s;
    return GB_OK;
}

static void cuda_stream_destroy(void *self, void *stream)
{
    log_release_failure(self, stream ? cudaStreamDestroy((cudaStream_t)stream) : cudaSuccess,
                        "cudaStreamDestroy");
}

static gb_status cuda_event_create(void *self, void **event)
{
    cuda_device *dev = self;
    cudaEvent_t e = NULL;
    ENTER_AND_CALL(dev, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    *event = e;
    return GB_OK;
}

static void cuda_event_destroy(void *self, void *event)
{
    log_release_failure(self, event ? cudaEventDestroy((cudaEvent_t)event) : cudaSuccess,
                        "cudaEventDestroy");
}

static gb_status cuda_event_record(void *self, void *event, void *stream)
{
    cuda_device *dev = self;
    ENTER_AND_CALL(dev, cudaEventRecord((cudaEvent_t)event, stream_of(dev, stream)));
    return GB_OK;
}

static gb_status cuda_stream_wait_event(void *self, void *stream, void *event)
{
    cuda_device *dev = self;
    ENTER_AND_CALL(dev, cudaStreamWaitEvent(stream_of(dev, stream), (cudaEvent_t)event, 0));
    return GB_OK;
}

static gb_status cuda_event_query(void *self, void *event)
{
    cuda_device *dev = self;
    const gb_host *host = dev->host;
    cudaError_t err = cudaEventQuery((cudaEvent_t)event);
    if (err == cudaErrorNotReady)
        return GB_ERR_NOT_READY;
    GB_CUDA_CHECK(err);
    return GB_OK;
}

static gb_status cuda_event_sync(void *self, void *event)
{
    cuda_device *dev = self;
    const gb_host *host = dev->host;
    GB_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)event));
    return host_work_status(dev);
}

/* A host function queued with its copied argument (16-byte aligned: it follows two
 * pointers in 64-byte aligned host memory); freed by the CUDA thread that runs it. */
typedef struct host_call {
    cuda_device *dev;
    gb_host_fn fn;
    unsigned char arg[];
} host_call;

static void CUDART_CB run_host_call(void *data)
{
    host_call *call = data;
    gb_status st = call->fn(call->arg);
    if (st != GB_OK) {
        int none = 0;
        __atomic_compare_exchange_n(&call->dev->host_failed, &none, (int)st, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    call->dev->host->free(call->dev->host, call);
}

static gb_status cuda_enqueue_host(void *self, void *stream, gb_host_fn fn, const void *arg,
                                   size_t arg_bytes)
{
    cuda_device *dev = self;
    const gb_host *host = dev->host;
    gb_status st = cuda_enter(dev);
    if (st != GB_OK)
        return st;
    if (dev->recording) {
        host->set_error(host, "enqueue_host while the compute stream is recorded into a graph: "
                        "queued host work frees its argument when it has run, so a graph "
                        "could not run it again");
        return GB_ERR_UNSUPPORTED;
    }
    host_call *call = host->alloc(host, sizeof *call + arg_bytes);
    if (!call) {
        host->set_error(host, "enqueue_host: cannot allocate %zu bytes for the argument",
                        arg_bytes);
        return GB_ERR_NO_MEMORY;
    }
    call->dev = dev;
    call->fn = fn;
    if (arg_bytes)
        memcpy(call->arg, arg, arg_bytes);
    cudaError_t err = cudaLaunchHostFunc(stream_of(dev, stream), run_host_call, call);
    if (err != cudaSuccess)
        host->free(host, call);
    GB_CUDA_CHECK(err);
    return GB_OK;
}

/* ---- graphs ----------------------------------------------------------------------------- */

/* Thread-local capture: calls of this thread that CUDA forbids while capturing (a
 * synchronisation, an allocation) fail, and so does cudaStreamEndCapture after them;
 * other threads (NCCL's, a data thread) are not affected. */
static gb_status cuda_graph_begin(void *self)
{
    cuda_device *dev = self;
    ENTER_AND_CALL(dev, cudaStreamBeginCapture(dev->compute, cudaStreamCaptureModeThreadLocal));
    dev->recording = 1;
    return GB_OK;
}

static gb_status cuda_graph_end(void *self, void **graph)
{
    cuda_device *dev = self;
    const gb_host *host = dev->host;
    cudaGraph_t captured = NULL;
    cudaGraphExec_t exec = NULL;
    *graph = NULL;
    dev->recording = 0;
    cudaError_t err = cudaStreamEndCapture(dev->compute, &captured);
    if (err != cudaSuccess) {
        cudaGetLastError();
        host->set_error(host, "device/cuda: recording the compute stream into a CUDA graph "
                        "failed (%s: %s): a call made while recording waited for the GPU, "
                        "allocated, copied pageable memory or waited on work outside the "
                        "recording", cudaGetErrorName(err), cudaGetErrorString(err));
        return GB_ERR_DEVICE;
    }
    err = cudaGraphInstantiate(&exec, captured, 0);
    cudaGraphDestroy(captured);
    GB_CUDA_CHECK(err);
    *graph = exec;
    return GB_OK;
}

static gb_status cuda_graph_launch(void *self, void *graph)
{
    cuda_device *dev = self;
    ENTER_AND_CALL(dev, cudaGraphLaunch((cudaGraphExec_t)graph, dev->compute));
    return GB_OK;
}

static void cuda_graph_destroy(void *self, void *graph)
{
    log_release_failure(self, graph ? cudaGraphExecDestroy((cudaGraphExec_t)graph) : cudaSuccess,
                        "cudaGraphExecDestroy");
}

/* ---- the vtable ----------------------------------------------------------------------- */

GB_DEVICE_PLUGIN("cuda", "1.2.0",
                 "one NVIDIA GPU (sm_80+): cuBLASLt matmul with epilogues, deterministic "
                 "kernels with the CPU device's summation orders",
                 GB_DEVICE_CUDA, GB_DTYPE_BIT(GB_F32) | GB_DTYPE_BIT(GB_BF16) |
                 GB_DTYPE_BIT(GB_F16), CUDA_CAPS, GB_NO_OPTIONS,
                 .create = cuda_create, .destroy = cuda_destroy, .context = cuda_context,
                 .info = cuda_info, .alloc = cuda_alloc, .free = cuda_free, .copy = cuda_copy,
                 .memset_zero = cuda_memset_zero, .sync = cuda_sync, .matmul = cuda_matmul,
                 .embed_forward = cuda_embed_forward, .embed_backward = cuda_embed_backward,
                 .layernorm_forward = cuda_layernorm_forward,
                 .layernorm_backward = cuda_layernorm_backward, .gelu_forward = cuda_gelu_forward,
                 .gelu_backward = cuda_gelu_backward, .add = cuda_add,
                 .bias_backward = cuda_bias_backward, .cross_entropy = cuda_cross_entropy,
                 .sum_squares = cuda_sum_squares, .gelu_tanh_forward = cuda_gelu_tanh_forward,
                 .gelu_tanh_backward = cuda_gelu_tanh_backward, .alloc_host = cuda_alloc_host,
                 .free_host = cuda_free_host, .copy_async = cuda_copy_async,
                 .stream_create = cuda_stream_create, .stream_destroy = cuda_stream_destroy,
                 .event_create = cuda_event_create, .event_destroy = cuda_event_destroy,
                 .event_record = cuda_event_record, .stream_wait_event = cuda_stream_wait_event,
                 .event_query = cuda_event_query, .event_sync = cuda_event_sync,
                 .enqueue_host = cuda_enqueue_host, .cross_entropy_ld = cuda_cross_entropy_ld,
                 .cross_entropy_scaled = cuda_cross_entropy_scaled,
                 .loss_scaler_update = cuda_loss_scaler_update, .graph_begin = cuda_graph_begin,
                 .graph_end = cuda_graph_end, .graph_launch = cuda_graph_launch,
                 .graph_destroy = cuda_graph_destroy,
                 .add_layernorm_forward = cuda_add_layernorm_forward, .describe = cuda_describe,
                 .dropout = cuda_dropout)
