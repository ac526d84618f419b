/* The CPU device plugin: host memory, device description, and the vtable that gathers
 * the kernels from the other files of this folder.
 *
 * Device memory is host memory here, so copies of every kind are memcpy and sync has
 * nothing to wait for, except in the GPU-like mode (queue.h), which queues the work and
 * protects the memory to prove the plugin contract where no GPU is. All kernels run on the process's one OpenMP pool (which oneDNN
 * shares) with at most host->num_threads threads. Activations may be f32, bf16 or f16:
 * kernels widen 16-bit rows into per-thread f32 scratch rows (cpu_row_scratch), compute
 * in f32 and round on store (dtype_rows.h). Peak FLOP/s are not measured (reported as 0).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#include "cpu_device.h"
#include "deferred.h"
#include "gearbox/cpu_isa.h"
#include "gearbox/plugin.h"

static const gb_option cpu_options[] = {
    {"emulate_gpu", GB_OPT_BOOL, "false", 0, 0, NULL,
     "behave like a GPU, for tests: device memory faults when the host touches it outside "
     "queued work, and kernels run only when something waits for them"},
};

static gb_status cpu_create(const gb_host *host, const gb_value *options, void **self)
{
    cpu_device *dev = host->alloc(host, sizeof *dev);
    if (!dev) {
        host->set_error(host, "cannot allocate the cpu device instance");
        return GB_ERR_NO_MEMORY;
    }
    memset(dev, 0, sizeof *dev);
    dev->host = host;
    dev->queue.gpu_like = (int)options[0].i;
    dev->threads = host->num_threads > 0 ? host->num_threads : 1;
    dev->kernels = cpu_kernels_best();
    host->log(host, GB_LOG_DEBUG, "%s kernels", dev->kernels->name);
    gb_status status = cpu_matmul_open(dev);
    if (status != GB_OK) {
        host->free(host, dev);
        return status;
    }
    *self = dev;
    return GB_OK;
}

static void cpu_destroy(void *self)
{
    cpu_device *dev = self;
    if (!dev)
        return;
    cpu_queue_close(dev);
    cpu_matmul_close(dev);
    dev->host->free(dev->host, dev->scratch);
    dev->host->free(dev->host, dev->rows);
    dev->host->free(dev->host, dev);
}

static const gb_device_ops GB_PLUGIN_OPS;

#define CPU_CAPS (GB_CAP_DETERMINISTIC | GB_CAP_GELU_TANH)
#define FITS(out, type, field) \
    ((out)->struct_size >= offsetof(type, field) + sizeof((out)->field))

static gb_status cpu_context(void *self, gb_device_ctx *out)
{
    cpu_device *dev = self;
    out->device = GB_DEVICE_CPU;
    out->ordinal = 0;
    /* in the GPU-like mode the compute stream is a handle, as on a GPU */
    out->stream = dev->queue.gpu_like ? &dev->queue.compute : NULL;
    if (!FITS(out, gb_device_ctx, caps))
        return GB_OK; /* a caller built before 1.2 */
    out->ops = &GB_PLUGIN_OPS;
    out->self = dev;
    out->host_access = !dev->queue.gpu_like;
    out->cc_major = out->cc_minor = 0;
    out->caps = CPU_CAPS;
    return GB_OK;
}

/* The "model name" line of /proc/cpuinfo, or "unknown CPU" where there is none. */
static void read_cpu_model(char *name, size_t cap)
{
    snprintf(name, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *value = strchr(line, ':');
        if (!value)
            continue;
        value += strspn(value + 1, " \t") + 1;
        snprintf(name, cap, "%.*s", (int)strcspn(value, "\n"), value);
        break;
    }
    fclose(f);
}

static gb_status cpu_info(void *self, gb_device_info *out)
{
    cpu_device *dev = self;
    char model[96];
    read_cpu_model(model, sizeof model);
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    out->memory_bytes = pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : 0;
    out->peak_flops_f32 = 0.0;
    out->peak_flops_bf16 = 0.0;
    snprintf(out->name, sizeof out->name, "%s, %d thread%s", model, dev->threads,
             dev->threads == 1 ? "" : "s");
    if (out->struct_size >= offsetof(gb_device_info, libraries) + sizeof out->libraries)
        cpu_matmul_library(out->libraries, sizeof out->libraries);
    return GB_OK;
}

/* What this CPU computes natively, and whether oneDNN's matmuls use its AMX tiles
 * (ONEDNN_MAX_CPU_ISA may hold oneDNN below the CPU's best). */
typedef struct cpu_native {
    int amx_bf16, onednn_amx, avx512_bf16, avx512_fp16;
} cpu_native;

static cpu_native cpu_native_now(void)
{
    cpu_native n = {cpu_feature_injected("amx_bf16"), 0, cpu_feature_injected("avx512_bf16"),
                    cpu_feature_injected("avx512_fp16")};
    if (n.amx_bf16 >= 0) { /* an injected list: what it names is what oneDNN would use */
        n.onednn_amx = n.amx_bf16;
        return n;
    }
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    gb_cpu_isa has;
    gb_cpu_isa_detect(&has);
    n.amx_bf16 = has.amx_bf16;
    n.onednn_amx = (isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx;
    n.avx512_bf16 = has.avx512_bf16;
    n.avx512_fp16 = has.avx512_fp16;
    return n;
}

/* The precision a run should take here, and why (docs/precision.md has the figures):
 * bf16 where oneDNN multiplies it on AMX tiles, or with AVX512_BF16 on a CPU without AMX
 * (Zen 4 and 5, where vdpbf16ps runs at twice the f32 FMA rate); fp32 on an AMX CPU with
 * oneDNN held off AMX (its vdpbf16ps runs at half that rate: bf16 measured 0.74-0.80x) and
 * wherever f16 alone is native (fp16 measured 1.6x fp32's time), or nothing is. */
static const char *cpu_preference(const cpu_native *n, const char **why)
{
    if (n->onednn_amx) {
        *why = "oneDNN multiplies bf16 on AMX tiles";
        return "bf16";
    }
    if (n->avx512_bf16 && !n->amx_bf16) {
        *why = "AVX512_BF16 multiplies bf16 at twice the f32 rate on a CPU without AMX";
        return "bf16";
    }
    *why = n->amx_bf16 ? "oneDNN is held off AMX, and this CPU's AVX512_BF16 is slower "
                         "than its f32"
           : n->avx512_fp16 ? "oneDNN's f16 matmul is slower than f32 on this CPU"
                            : "no bf16 or fp16 arithmetic: 16-bit types would only be "
                              "converted in software";
    return "fp32";
}

static gb_status cpu_describe(const gb_host *host, gb_device_desc *out)
{
    (void)host;
    cpu_native n = cpu_native_now();
    char model[96];
    read_cpu_model(model, sizeof model);
    snprintf(out->family, sizeof out->family, "cpu");
    out->memory = GB_MEMORY_HOST;
    out->native_dtypes = GB_DTYPE_BIT(GB_F32) |
                         (n.amx_bf16 || n.avx512_bf16 ? GB_DTYPE_BIT(GB_BF16) : 0u) |
                         (n.avx512_fp16 ? GB_DTYPE_BIT(GB_F16) : 0u);
    out->asynchronous = 1; /* its GPU-like mode queues work */
    const char *why, *choice = cpu_preference(&n, &why);
    snprintf(out->preferred_precision, sizeof out->preferred_precision, "%s", choice);
    snprintf(out->preferred_why, sizeof out->preferred_why,
             "%s (%.60s: amx_bf16 %s, avx512_bf16 %s, avx512_fp16 %s%s)", why, model,
             n.amx_bf16 ? "yes" : "no", n.avx512_bf16 ? "yes" : "no",
             n.avx512_fp16 ? "yes" : "no",
             getenv("GEARBOX_CPU_FEATURES") ? ", from GEARBOX_CPU_FEATURES" : "");
    return GB_OK;
}

GB_DEVICE_PLUGIN("cpu", "1.3.0",
                 "host memory, oneDNN matmul, OpenMP kernels; reproducible per thread "
                 "count; a GPU-like mode for tests",
                 GB_DEVICE_CPU, GB_DTYPE_BIT(GB_F32) | GB_DTYPE_BIT(GB_BF16) |
                 GB_DTYPE_BIT(GB_F16), CPU_CAPS, GB_OPTIONS(cpu_options),
                 .create = cpu_create, .destroy = cpu_destroy, .context = cpu_context,
                 .info = cpu_info, .alloc = cpu_alloc, .free = cpu_free, .copy = cpu_copy,
                 .memset_zero = cpu_memset_zero, .sync = cpu_sync, .matmul = cpu_q_matmul,
                 .embed_forward = cpu_q_embed_forward, .embed_backward = cpu_q_embed_backward,
                 .layernorm_forward = cpu_q_layernorm_forward,
                 .layernorm_backward = cpu_q_layernorm_backward,
                 .gelu_forward = cpu_q_gelu_forward, .gelu_backward = cpu_q_gelu_backward,
                 .add = cpu_q_add, .bias_backward = cpu_q_bias_backward,
                 .cross_entropy = cpu_q_cross_entropy, .sum_squares = cpu_q_sum_squares,
                 .gelu_tanh_forward = cpu_q_gelu_tanh_forward,
                 .gelu_tanh_backward = cpu_q_gelu_tanh_backward, .alloc_host = cpu_alloc_host,
                 .free_host = cpu_free_host, .copy_async = cpu_copy_async,
                 .stream_create = cpu_stream_create, .stream_destroy = cpu_stream_destroy,
                 .event_create = cpu_event_create, .event_destroy = cpu_event_destroy,
                 .event_record = cpu_event_record, .stream_wait_event = cpu_stream_wait_event,
                 .event_query = cpu_event_query, .event_sync = cpu_event_sync,
                 .enqueue_host = cpu_enqueue_host, .cross_entropy_ld = cpu_q_cross_entropy_ld,
                 .cross_entropy_scaled = cpu_q_cross_entropy_scaled,
                 .loss_scaler_update = cpu_q_loss_scaler_update, .describe = cpu_describe,
                 .dropout = cpu_q_dropout)
