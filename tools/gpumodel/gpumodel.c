/* The GPU table and the time model; see gpumodel.h, and docs/gpu.md for the formulas. */
#include "gpumodel.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The measured H100 of docs/gpu.md (../shared figures of 2026-11-26, commit f299353): the
 * milliseconds of each matmul pass and of cuDNN's attention in `bench step --profile` over
 * GPT-2 124M at B16 T1024, and the GFLOP/s they make. The profile synchronised around each
 * of the step's 326 timed calls (80.61 ms a step against 73.87 unprofiled): the fitted
 * rates are net of that cost per call, as every kernel's prediction is. */
#define MEASURED_PEAK_16BIT 989.4e12
#define PROFILE_OVERHEAD_S ((80.61e-3 - 73.87e-3) / 326)
#define NET_SECONDS(ms, calls) ((ms) * 1e-3 - (calls) * PROFILE_OVERHEAD_S)
#define MEASURED_CUDNN_FORWARD (214.780e12 * 1.441e-3 / NET_SECONDS(1.441, 12))
#define MEASURED_CUDNN_BACKWARD (133.468e12 * 4.638e-3 / NET_SECONDS(4.638, 12))
/* Each matmul pass was 49 products: the 48 of the 12 layers (QKV, projection, MLP up and
 * down: 2 BT C 12C FLOPs a layer) and the LM head's at the odd V = 50257. The pass of the
 * weight gradients, 526 GFLOP/s as a whole, is taken as the rate of every product whose
 * dimensions are whole 16-byte units (the layers' products) and of the head's weight
 * gradient (its odd m costs nothing measurable in that pass); the forward and input-gradient passes, 216 and 269, leave the rest
 * of their time to the head, whose n (forward) or k (input gradient) is odd: cuBLASLt's
 * kernels for such operands load them an element at a time. The split is an assumption
 * the profile cannot check (it timed passes, not products): docs/gpu.md. */
#define GPT2_LAYER_FLOPS (12 * 2.0 * 16384 * 768 * 12 * 768)
#define GPT2_HEAD_FLOPS (2.0 * 16384 * 768 * 50257)
#define MEASURED_MATMUL_ALIGNED ((GPT2_LAYER_FLOPS + GPT2_HEAD_FLOPS) / NET_SECONDS(7.691, 49))
#define MEASURED_HEAD_RATE(ms)                                                             \
    (GPT2_HEAD_FLOPS / (NET_SECONDS(ms, 49) - GPT2_LAYER_FLOPS / MEASURED_MATMUL_ALIGNED))

/* The H100 SXM and the H200 share the GH100 chip, its clocks and its L2. Sources: NVIDIA's
 * H100 and H200 datasheets (SMs, HBM, L2 size, dense tensor FLOP/s, FP32 67 TFLOP/s); the
 * clocks of public spec listings (1.98 GHz boost: the FP32 figure is 132 SMs x 128 lanes x
 * 2 x 1.98 GHz); shared memory from its 32 banks of 4 bytes (one wavefront per clock per
 * SM); the copy bandwidth measured on our H100 (3.0 of 3.35 TB/s, assumed the same share on
 * the H200); PCIe 5.0 x16's 64 GB/s less its usual fifth; the L2 bandwidth, the latencies
 * and the launch overhead are microbenchmarks' orders of magnitude, to be refitted from the
 * pairs scripts/gpu-check.sh records. A warp keeps 4 independent global loads in flight
 * where the record does not say (nvcc's default unrolling of a loop whose trip count it
 * does not know is 4, and the loads of the unrolled body are issued before the first is
 * used); 4 schedulers per SM; a
 * dependent instruction issues 4 clocks after the one it waits on (the FMA pipe's
 * latency on Volta and later, microbenchmarks). */
#define GH100_SXM                                                                          \
    .sms = 132, .boost_ghz = 1.98, .base_ghz = 1.59, .hbm_efficiency = 3.0 / 3.35,         \
    .l2_bytes = 50e6, .l2_bytes_s = 5.5e12, .smem_wavefronts_per_clock = 1.0,              \
    .tensor_bf16_flops = 989.4e12, .tensor_tf32_flops = 494.7e12, .fp32_flops = 66.9e12,   \
    .sfu_per_clock = 16.0, .launch_s = 2.5e-6, .pcie_bytes_s = 50e9,                       \
    .dram_latency_s = 0.55e-6, .smem_latency_s = 15e-9, .loads_in_flight = 4.0,           \
    .schedulers_per_sm = 4, .dependent_issue_clocks = 4.0, .max_threads_per_sm = 2048,     \
    .max_warps_per_sm = 64, .max_blocks_per_sm = 32, .smem_per_sm = 228.0 * 1024,          \
    .smem_reserved_per_block = 1024

static const gb_gpu_spec gpus[] = {
    {.name = "H100", .full_name = "NVIDIA H100 SXM5 80GB", .hbm_bytes_s = 3.35e12, GH100_SXM},
    {.name = "H200", .full_name = "NVIDIA H200 SXM 141GB", .hbm_bytes_s = 4.8e12, GH100_SXM},
};

const gb_gpu_spec *gb_gpu_find(const char *name)
{
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++)
        if (strcasecmp(name, gpus[i].name) == 0)
            return &gpus[i];
    return NULL;
}

const char *gb_gpu_names(void)
{
    return "H100, H200";
}

const char *gb_gpu_bound_name(gb_gpu_bound b)
{
    static const char *const names[GB_BOUND_COUNT] = {
        [GB_BOUND_COMPUTE] = "compute", [GB_BOUND_DRAM] = "DRAM", [GB_BOUND_L2] = "L2",
        [GB_BOUND_SHARED] = "shared", [GB_BOUND_LATENCY] = "latency",
        [GB_BOUND_FITTED] = "fitted", [GB_BOUND_PCIE] = "PCIe", [GB_BOUND_ISSUE] = "issue"};
    return (unsigned)b < GB_BOUND_COUNT ? names[b] : "unknown";
}

double gb_gpu_peak_flops(const gb_gpu_spec *gpu, const char *compute)
{
    if (strcmp(compute, "tf32") == 0)
        return gpu->tensor_tf32_flops;
    if (strcmp(compute, "f32") == 0)
        return gpu->fp32_flops;
    return gpu->tensor_bf16_flops;
}

/* ---- kernels ------------------------------------------------------------------------- */

static double dram_rate(const gb_gpu_spec *gpu)
{
    return gpu->hbm_bytes_s * gpu->hbm_efficiency;
}

/* Blocks resident on one SM by CUDA's rules for what the record says (threads and shared
 * memory; registers only through the emulator's occupancy, when it has them). */
static double blocks_per_sm(const gb_gpu_spec *gpu, const gb_kernel_counts *k, int *estimated)
{
    *estimated = k->occupancy_blocks_per_sm < 0;
    if (!*estimated)
        return k->occupancy_blocks_per_sm;
    double threads = (double)(k->block[0] * k->block[1] * k->block[2]);
    double warps = ceil(threads / 32.0);
    double by_warps = floor(gpu->max_warps_per_sm / warps);
    double by_smem = floor(gpu->smem_per_sm /
                           (k->dyn_smem + k->static_smem + gpu->smem_reserved_per_block));
    return fmax(1.0, fmin(gpu->max_blocks_per_sm, fmin(by_warps, by_smem)));
}

/* The global load latencies a warp waits out one after another: its loads, as many at a
 * time as an iteration of the kernel's loading loops issues (the record's loads_in_flight,
 * else the GPU table's), and never fewer than its barrier-delimited phases with a load (a
 * barrier waits for every load before it). Without the phases counted, every load alone. */
static double serial_loads_per_warp(const gb_gpu_spec *gpu, const gb_kernel_counts *k,
                                    double warps)
{
    if (k->gld_phases < 0)
        return k->gld_requests / warps;
    double in_flight = k->loads_in_flight > 0 ? fmax(1.0, k->loads_in_flight)
                                              : gpu->loads_in_flight;
    return fmax(k->gld_phases, k->gld_requests / in_flight) / warps;
}

/* Seconds to issue the kernel's warp instructions: each scheduler issues one a clock when
 * it has dependent_issue_clocks warps to choose from, proportionally fewer with fewer
 * (the SM's resident warps, no more than the grid gives it). 0 when not counted. */
static double issue_seconds(const gb_gpu_spec *gpu, const gb_kernel_counts *k,
                            double resident_warps, double blocks)
{
    if (k->instructions <= 0)
        return 0.0;
    double threads = (double)(k->block[0] * k->block[1] * k->block[2]);
    double warps_per_sm = fmin(resident_warps, ceil(blocks / gpu->sms) * ceil(threads / 32.0));
    double per_scheduler = warps_per_sm / gpu->schedulers_per_sm;
    double rate = gpu->sms * gpu->schedulers_per_sm *
                  fmin(1.0, per_scheduler / gpu->dependent_issue_clocks) * gpu->boost_ghz * 1e9;
    return k->instructions / rate;
}

gb_gpu_bound gb_gpu_largest_bound(const double *bound_s)
{
    gb_gpu_bound best = GB_BOUND_COMPUTE;
    for (int b = 1; b < GB_BOUND_COUNT; b++)
        if (bound_s[b] > bound_s[best])
            best = (gb_gpu_bound)b;
    return best;
}

gb_gpu_estimate gb_gpu_predict_kernel(const gb_gpu_spec *gpu, const gb_kernel_counts *k)
{
    gb_gpu_estimate e = {.launch_s = gpu->launch_s};
    double clock = gpu->boost_ghz * 1e9, sms = gpu->sms;
    double threads = (double)(k->block[0] * k->block[1] * k->block[2]);
    double warps_per_block = ceil(threads / 32.0);
    double blocks = k->blocks_total > 0 ? k->blocks_total : 1.0;
    double warps = blocks * warps_per_block;
    double resident = blocks_per_sm(gpu, k, &e.occupancy_estimated);
    e.occupancy = e.occupancy_estimated ? resident * warps_per_block / gpu->max_warps_per_sm
                                        : k->occupancy_fraction;
    /* the busiest SM runs ceil(blocks / SMs) blocks: the throughput of the others idles */
    double utilisation = blocks / (sms * ceil(blocks / sms));
    double waves = ceil(blocks / (sms * resident));

    double tensor_s = k->tensor_flops_16 / gpu->tensor_bf16_flops +
                      k->tensor_flops_tf32 / gpu->tensor_tf32_flops;
    double lanes_s = k->fp32_ops / (gpu->fp32_flops / 2.0);
    double sfu_s = k->sfu_ops / (sms * gpu->sfu_per_clock * clock);
    double compute_s = fmax(tensor_s, fmax(lanes_s, sfu_s));
    e.bound_s[GB_BOUND_COMPUTE] = compute_s / utilisation;

    double sector_bytes = 32.0 * (k->gld_sectors + k->gst_sectors);
    /* the L2 rule: the blocks resident at once, a wave, re-read from L2 what they share
     * when their share of the launch's distinct sectors fits in it, and DRAM reads each
     * distinct sector once (the tree's tiled kernels give neighbouring blocks the same
     * data: a head's query tiles its K and V) */
    double wave_bytes = 32.0 * k->unique_sectors / waves;
    double dram_bytes = k->unique_sectors >= 0 && wave_bytes <= gpu->l2_bytes
                            ? 32.0 * k->unique_sectors
                            : sector_bytes;
    e.bound_s[GB_BOUND_DRAM] = dram_bytes / dram_rate(gpu);
    e.bound_s[GB_BOUND_L2] = sector_bytes / gpu->l2_bytes_s;
    e.bound_s[GB_BOUND_SHARED] = (k->shld_wavefronts + k->shst_wavefronts) /
                                 (sms * gpu->smem_wavefronts_per_clock * clock) / utilisation;
    e.bound_s[GB_BOUND_LATENCY] = waves * (serial_loads_per_warp(gpu, k, warps) *
                                               gpu->dram_latency_s +
                                           (k->shld_requests - k->wgmma_requests) / warps *
                                               gpu->smem_latency_s);
    e.bound_s[GB_BOUND_ISSUE] = issue_seconds(gpu, k, resident * warps_per_block, blocks) /
                                utilisation;
    e.bound = gb_gpu_largest_bound(e.bound_s);
    e.seconds = e.bound_s[e.bound] + e.launch_s;
    e.roofline_s = fmax(compute_s, dram_bytes / dram_rate(gpu));
    e.flops = k->tensor_flops_16 + k->tensor_flops_tf32 + k->fp32_ops;
    e.bytes_requested = k->gld_bytes + k->gst_bytes;
    e.sector_bytes = sector_bytes;
    e.smem_requests = k->shld_requests + k->shst_requests;
    e.smem_wavefronts = k->shld_wavefronts + k->shst_wavefronts;
    return e;
}

/* ---- library calls ------------------------------------------------------------------- */

static double dtype_bytes(const char *t)
{
    return strcmp(t, "f32") == 0 || strcmp(t, "tf32") == 0 ? 4.0 : 2.0;
}

/* A call timed at a fitted rate, never faster than moving `bytes` through DRAM, plus a
 * launch (the fitted rates come from large products, where a launch is noise). */
static gb_gpu_estimate fitted(const gb_gpu_spec *gpu, double flops, double rate, double peak,
                              double bytes)
{
    gb_gpu_estimate e = {.flops = flops, .occupancy = -1.0, .launch_s = gpu->launch_s};
    e.bound_s[GB_BOUND_FITTED] = flops / rate;
    e.bound_s[GB_BOUND_DRAM] = bytes / dram_rate(gpu);
    e.bound = gb_gpu_largest_bound(e.bound_s);
    e.seconds = e.bound_s[e.bound] + e.launch_s;
    e.roofline_s = fmax(flops / peak, e.bound_s[GB_BOUND_DRAM]);
    return e;
}

/* Whether every dimension of the product is a whole number of 16-byte units of its
 * operands' type (8 16-bit or 4 f32 elements), which cuBLASLt's vectorised kernels need. */
static int matmul_aligned(const gb_matmul_shape *s)
{
    const double per_unit = 16.0 / dtype_bytes(s->a_type);
    return fmod(s->m, per_unit) == 0.0 && fmod(s->n, per_unit) == 0.0 &&
           fmod(s->k, per_unit) == 0.0;
}

gb_gpu_estimate gb_gpu_predict_matmul(const gb_gpu_spec *gpu, const gb_matmul_shape *s,
                                      gb_matmul_pass pass)
{
    static const double misaligned[] = {[GB_PASS_FORWARD] = MEASURED_HEAD_RATE(18.751),
                                        [GB_PASS_DX] = MEASURED_HEAD_RATE(15.065),
                                        [GB_PASS_DW] = MEASURED_MATMUL_ALIGNED};
    double peak = gb_gpu_peak_flops(gpu, s->compute);
    double batch = s->batch > 1 ? s->batch : 1.0;
    double flops = 2.0 * s->m * s->n * s->k * batch;
    double bytes = batch * ((s->m * s->k + s->k * s->n) * dtype_bytes(s->a_type) +
                            s->m * s->n * dtype_bytes(s->c_type));
    double measured = matmul_aligned(s) ? MEASURED_MATMUL_ALIGNED : misaligned[pass];
    /* the H100's measured share of its 16-bit peak, taken to hold for every dtype and GPU */
    double rate = peak * measured / MEASURED_PEAK_16BIT;
    return fitted(gpu, flops, rate, peak, bytes);
}

gb_gpu_estimate gb_gpu_predict_copy(const gb_gpu_spec *gpu, const gb_copy *c)
{
    gb_gpu_estimate e = {.occupancy = -1.0, .launch_s = gpu->launch_s};
    int host = strcmp(c->kind, "HtoD") == 0 || strcmp(c->kind, "DtoH") == 0 ||
               strcmp(c->kind, "HtoH") == 0;
    double dram_bytes = strcmp(c->kind, "DtoD") == 0 ? 2.0 * c->bytes : c->bytes;
    e.bound = host ? GB_BOUND_PCIE : GB_BOUND_DRAM;
    e.bound_s[e.bound] = host ? c->bytes / gpu->pcie_bytes_s : dram_bytes / dram_rate(gpu);
    e.roofline_s = host ? e.bound_s[e.bound] : dram_bytes / dram_rate(gpu);
    e.seconds = e.bound_s[e.bound] + e.launch_s;
    return e;
}

gb_gpu_estimate gb_gpu_predict_cudnn_attn(const gb_gpu_spec *gpu, double flops, int backward)
{
    double share = (backward ? MEASURED_CUDNN_BACKWARD : MEASURED_CUDNN_FORWARD) /
                   MEASURED_PEAK_16BIT;
    return fitted(gpu, flops, gpu->tensor_bf16_flops * share, gpu->tensor_bf16_flops, 0.0);
}

/* ---- records ------------------------------------------------------------------------- */

typedef struct reader {
    json_t *obj;
    const char *missing;   /* the first required field absent, or NULL */
} reader;

static double number(reader *r, const char *key, double fallback, int required)
{
    json_t *v = json_object_get(r->obj, key);
    if (json_is_number(v))
        return json_number_value(v);
    if (required && !r->missing)
        r->missing = key;
    return fallback;
}

static void text(reader *r, const char *key, char *out, size_t cap, int required)
{
    json_t *v = json_object_get(r->obj, key);
    if (json_is_string(v))
        snprintf(out, cap, "%s", json_string_value(v));
    else if (required && !r->missing)
        r->missing = key;
}

static void dims(reader *r, const char *key, int64_t *out)
{
    json_t *v = json_object_get(r->obj, key);
    for (size_t i = 0; i < 3; i++) {
        json_t *d = json_array_get(v, i);
        out[i] = json_is_integer(d) ? (int64_t)json_integer_value(d) : 1;
    }
    if (!json_is_array(v) && !r->missing)
        r->missing = key;
}

/* "mma": {"m16n16k16.bf16.f32": count, ...}: 2 m n k FLOPs per operation, by input dtype. */
static int mma_flops(json_t *mma, gb_kernel_counts *k, char *why, size_t cap)
{
    const char *shape;
    json_t *count;
    json_object_foreach(mma, shape, count) {
        int m, n, kk;
        char dtype[16];
        if (sscanf(shape, "m%dn%dk%d.%15[^.]", &m, &n, &kk, dtype) != 4 ||
            !json_is_number(count)) {
            snprintf(why, cap, "mma shape '%s': expected mMnNkK.DTYPE.ACC with a count", shape);
            return -1;
        }
        double flops = 2.0 * m * n * kk * json_number_value(count);
        if (strcmp(dtype, "tf32") == 0)
            k->tensor_flops_tf32 += flops;
        else
            k->tensor_flops_16 += flops;
    }
    return 0;
}

/* "unique_sectors": {"loads": N, "stores": M} summed; -1 when absent. */
static double unique_sectors(json_t *record)
{
    reader u = {.obj = json_object_get(record, "unique_sectors")};
    if (!json_is_object(u.obj))
        return -1.0;
    double loads = number(&u, "loads", -1, 1), stores = number(&u, "stores", -1, 1);
    return u.missing ? -1.0 : loads + stores;
}

static int parse_kernel(reader *r, gb_kernel_counts *k, char *why, size_t cap)
{
    text(r, "kernel", k->kernel, sizeof k->kernel, 1);
    dims(r, "grid", k->grid);
    dims(r, "block", k->block);
    k->dyn_smem = number(r, "dyn_smem", 0, 1);
    k->static_smem = number(r, "static_smem", 0, 0);
    k->blocks_total = number(r, "blocks_total", 0, 1);
    k->gld_requests = number(r, "gld_requests", 0, 1);
    k->gld_bytes = number(r, "gld_bytes", 0, 1);
    k->gld_sectors = number(r, "gld_sectors", 0, 1);
    k->gst_requests = number(r, "gst_requests", 0, 1);
    k->gst_bytes = number(r, "gst_bytes", 0, 1);
    k->gst_sectors = number(r, "gst_sectors", 0, 1);
    k->unique_sectors = unique_sectors(r->obj);
    k->gld_phases = number(r, "gld_phases", -1, 0);
    k->instructions = number(r, "instructions", -1, 0);
    k->loads_in_flight = number(r, "loads_in_flight", -1, 0);
    k->shld_requests = number(r, "shld_requests", 0, 1);
    k->shld_wavefronts = number(r, "shld_wavefronts", 0, 1);
    k->shst_requests = number(r, "shst_requests", 0, 1);
    k->shst_wavefronts = number(r, "shst_wavefronts", 0, 1);
    k->wgmma_requests = number(r, "wgmma_requests", 0, 0);
    k->fp32_ops = number(r, "fp32_ops", 0, 0);   /* null: the emulator does not count it */
    k->sfu_ops = number(r, "sfu_ops", 0, 0);
    k->barriers = number(r, "barriers", 0, 0);
    if (r->missing) {
        snprintf(why, cap, "kernel record without \"%s\"", r->missing);
        return -1;
    }
    json_t *occ = json_object_get(r->obj, "occupancy");
    k->occupancy_blocks_per_sm = -1.0;
    k->occupancy_fraction = -1.0;
    if (json_is_object(occ)) {
        reader o = {.obj = occ};
        k->occupancy_blocks_per_sm = number(&o, "blocks_per_sm", -1, 1);
        k->occupancy_fraction = number(&o, "fraction", -1, 1);
        text(&o, "limiter", k->occupancy_limiter, sizeof k->occupancy_limiter, 0);
        if (o.missing) {
            snprintf(why, cap, "kernel record's occupancy without \"%s\"", o.missing);
            return -1;
        }
    }
    json_t *mma = json_object_get(r->obj, "mma");
    return json_is_object(mma) ? mma_flops(mma, k, why, cap) : 0;
}

static int parse_matmul(reader *r, gb_matmul_shape *s, char *why, size_t cap)
{
    s->m = number(r, "m", 0, 1);
    s->n = number(r, "n", 0, 1);
    s->k = number(r, "k", 0, 1);
    s->batch = number(r, "batch", 1, 0);
    text(r, "a_type", s->a_type, sizeof s->a_type, 1);
    text(r, "c_type", s->c_type, sizeof s->c_type, 0);
    char compute[32] = "";
    text(r, "compute", compute, sizeof compute, 0);
    text(r, "epilogue", s->epilogue, sizeof s->epilogue, 0);
    if (!s->c_type[0])
        snprintf(s->c_type, sizeof s->c_type, "%s", s->a_type);
    /* cuBLASLt's compute type: f32 inputs run on TF32 tensor cores only when asked */
    int f32 = strcmp(s->a_type, "f32") == 0;
    snprintf(s->compute, sizeof s->compute, "%s",
             !f32 ? s->a_type : strstr(compute, "TF32") ? "tf32" : "f32");
    if (strcmp(s->epilogue, "DEFAULT") == 0)
        s->epilogue[0] = '\0';
    if (r->missing)
        snprintf(why, cap, "cublaslt record without \"%s\"", r->missing);
    return r->missing ? -1 : 0;
}

int gb_record_parse(const char *line, gb_record *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    json_error_t err;
    reader r = {.obj = json_loads(line, 0, &err)};
    if (!json_is_object(r.obj)) {
        snprintf(why, cap, "not a JSON object (%s)", r.obj ? "another JSON value" : err.text);
        json_decref(r.obj);
        return -1;
    }
    char type[16] = "";
    text(&r, "type", type, sizeof type, 0);
    int rc = 0;
    if (strcmp(type, "kernel") == 0) {
        out->type = GB_RECORD_KERNEL;
        rc = parse_kernel(&r, &out->kernel, why, cap);
    } else if (strcmp(type, "cublaslt") == 0) {
        out->type = GB_RECORD_MATMUL;
        rc = parse_matmul(&r, &out->matmul, why, cap);
    } else if (strcmp(type, "memcpy") == 0) {
        out->type = GB_RECORD_COPY;
        out->copy.bytes = number(&r, "bytes", 0, 1);
        text(&r, "kind", out->copy.kind, sizeof out->copy.kind, 1);
        if (r.missing)
            snprintf(why, cap, "memcpy record without \"%s\"", r.missing);
        rc = r.missing ? -1 : 0;
    }
    json_decref(r.obj);
    return rc;
}
