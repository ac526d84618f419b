/* AdamW on CUDA in one pass over memory: optim/adamw_fused's step as one kernel.
 *
 * Each element's p, g, m and v are read once and p, m and v written once (28 bytes per
 * parameter), with the bf16 or f16 working copy (params_lowp) written in the same pass
 * (2 more). The clip and loss-scale factor is computed by every thread from the device
 * scalar grad_norm_sq (grad_scale.h), so the step never reads device memory on the host
 * and never waits for the GPU; with the loss scale on the device too (ABI 1.4) every
 * thread reads it there, and leaves its elements as they are when the gradients
 * overflowed. The update is kernels/common/adamw.h's adamw_element, each
 * operation rounded on its own, so p, m and v are bit-identical to optim/adamw's and
 * optim/adamw_fused's on the CPU for the same squared norm; the low-precision copy uses
 * gearbox/convert.h's conversions and, for stochastic rounding, stochastic_round.h's
 * random bits of (seed, step, element index), so every rounding decision is the CPU's.
 *
 * Parameter groups (one per tensor, host memory) reach the kernel as its argument: sorted
 * by offset and merged where neighbours share their decay flag, up to FUSED_SPANS spans
 * per launch (one launch for the models gearbox builds); each thread finds its element's
 * span by binary search.
 *
 * grad_norm_sq sums the squares in double in a fixed partition (NORM_BLOCKS blocks of
 * NORM_THREADS threads, each block a fixed grid-stride subset of segments that it copies
 * to shared memory in 16-byte units, each thread fixed elements of those, tree sums in shared
 * memory, then one block over the partial sums), so it is deterministic on any GPU,
 * without atomics. It rounds a double to f32 once, as the CPU's does, but adds in another
 * order: the two agree except when the double lies within a few ulps of an f32 rounding
 * boundary, and then differ by one ulp. Its partial sums live in NORM_BLOCKS doubles that
 * create() allocates through the device.
 *
 * Deliberately left out: vector loads in the step (the spans' offsets have any alignment,
 * and the time model already puts its scalar loads at the DRAM roofline), AMSGrad,
 * maximize. Not yet run on a GPU.
 *
 * State layout: m (n) f32 followed by v (n) f32, as on the CPU.
 */
#include <stdlib.h>

#include "adamw.h"
#include "adamw_instance.h"
#include "cuda_status.h"
#include "gearbox/convert.h"
#include "gearbox/optim.h"
#include "optim_cuda.h"
#include "rows.cuh"
#include "step_args.h"
#include "stochastic_round.h"

/* Spans per launch: the kernel argument stays well under the 4 KB CUDA allows. */
#define FUSED_SPANS 128
/* grad_norm_sq's fixed partition. */
#define NORM_BLOCKS 512
#define NORM_THREADS 256

typedef struct adamw_fused_cuda {
    adamw_base base;
    double *partials;       /* (NORM_BLOCKS) device memory for grad_norm_sq */
} adamw_fused_cuda;

/* One launch's share of the flat buffers: spans k = 0 .. count-1, span k covering
 * [k ? end[k-1] : begin, end[k]), with its group's decay flag. */
typedef struct fused_spans {
    int64_t begin;
    int64_t end[FUSED_SPANS];
    uint8_t decays[FUSED_SPANS];
    int32_t count;
} fused_spans;

/* The buffers and the low-precision copy's settings. */
typedef struct fused_buffers {
    float *p;              // (n)
    const float *g;        // (n)
    float *m, *v;          // (n)
    uint16_t *lowp;        // (n) bf16 or f16 bit patterns, or NULL
    gb_dtype lowp_dtype;   // GB_BF16 or GB_F16 when lowp is set
    int32_t stochastic;    // 1: the bf16 copy rounded stochastically
    uint64_t seed;
    int64_t step;
} fused_buffers;

/* The span that holds element i (begin <= i < end[count - 1]). */
static __device__ int span_of(const fused_spans *s, int64_t i)
{
    int lo = 0, hi = s->count - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (i < s->end[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static __global__ void fused_kernel(fused_buffers b, fused_spans spans, adamw_coeffs c,
                                    float decay, optim_cuda_clip clip)
{
    if (optim_cuda_skipped(&clip))
        return;
    c.g_scale = optim_cuda_grad_scale(&clip);
    const int64_t end = spans.end[spans.count - 1];
    for (int64_t i = spans.begin + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < end;
         i += (int64_t)gridDim.x * blockDim.x) {
        float p = b.p[i], m = b.m[i], v = b.v[i];
        adamw_element(&p, &m, &v, b.g[i], spans.decays[span_of(&spans, i)] ? decay : 1.0f, &c);
        b.p[i] = p;
        b.m[i] = m;
        b.v[i] = v;
        if (!b.lowp)
            continue;
        b.lowp[i] = gb_lowp_at(p, b.lowp_dtype, b.stochastic, b.seed, b.step, i);
    }
}

/* The sum of every thread's x, added in a fixed tree in sums (the block's `threads`
 * entries, a power of two); every thread of the block calls it. */
static __device__ double block_tree_sum(double *sums, double x, int threads)
{
    sums[threadIdx.x] = x;
    __syncthreads();
    for (int width = threads / 2; width > 0; width /= 2) {
        if ((int)threadIdx.x < width)
            sums[threadIdx.x] += sums[threadIdx.x + width];
        __syncthreads();
    }
    return sums[0];
}

/* x * x in double: exact, so the order of the sums alone fixes the bits. */
static __host__ __device__ inline double square(float x)
{
    const double d = x;
    return d * d;
}

/* Elements per segment of x that a block copies to shared memory at once: four per
 * thread. */
#define NORM_SEGMENT (4 * NORM_THREADS)

/* Sums of squares of a fixed subset of x per block: partials (NORM_BLOCKS); x (n). Block
 * b takes the segments b, b + NORM_BLOCKS, ... of NORM_SEGMENT elements, each copied to
 * shared memory in 16-byte units (rows.cuh), and thread t adds the squares of the
 * segment's elements t, t + NORM_THREADS, ... in that order. */
static __global__ void norm_partials_kernel(double *partials, const float *x, int64_t n)
{
    __shared__ double sums[NORM_THREADS];
    __shared__ __align__(16) float segment[NORM_SEGMENT];
    double acc = 0.0;
    for (int64_t s0 = blockIdx.x * (int64_t)NORM_SEGMENT; s0 < n;
         s0 += (int64_t)NORM_BLOCKS * NORM_SEGMENT) {
        const int64_t count = n - s0 < NORM_SEGMENT ? n - s0 : NORM_SEGMENT;
        __syncthreads();   // the previous segment is summed
        gb_block_copy_rows(segment, 0, x + s0, 0, 1, count * (int64_t)sizeof(float));
        __syncthreads();
        for (int64_t i = threadIdx.x; i < count; i += NORM_THREADS)
            acc += square(segment[i]);
    }
    const double total = block_tree_sum(sums, acc, NORM_THREADS);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = total;
}

/* *out = the partial sums added in a fixed tree, rounded to f32 once. One block of
 * NORM_BLOCKS threads. */
static __global__ void norm_total_kernel(float *out, const double *partials)
{
    __shared__ double sums[NORM_BLOCKS];
    const double total = block_tree_sum(sums, partials[threadIdx.x], NORM_BLOCKS);
    if (threadIdx.x == 0)
        *out = (float)total;
}

/* A CUDA device of ABI 1.2 or later: grad_norm_sq's memory comes from its ops. */
static int fused_device_ok(const gb_host *host, const gb_device_ctx *device, const char *plugin)
{
    if (!optim_cuda_device_ok(host, device, plugin))
        return 0;
    if (device->struct_size >= offsetof(gb_device_ctx, self) + sizeof device->self &&
        device->ops)
        return 1;
    host->set_error(host, "%s (cuda) needs a device of ABI 1.2 or later, whose context "
                    "carries its ops (for the memory of grad_norm_sq)", plugin);
    return 0;
}

static gb_status fused_create(const gb_host *host, const gb_value *options,
                              const gb_device_ctx *device, void **self)
{
    gb_status st = adamw_base_create(host, options, device, fused_device_ok, "adamw_fused",
                                     sizeof(adamw_fused_cuda), self);
    if (st != GB_OK)
        return st;
    adamw_fused_cuda *a = (adamw_fused_cuda *)*self;
    void *partials = NULL;
    st = device->ops->alloc(device->self, NORM_BLOCKS * sizeof(double), &partials);
    if (st != GB_OK) {
        host->set_error(host, "cannot allocate %zu bytes of device memory for grad_norm_sq",
                        NORM_BLOCKS * sizeof(double));
        gb_plugin_instance_destroy(a);
        *self = NULL;
        return st;
    }
    a->partials = (double *)partials;
    return GB_OK;
}

static void fused_destroy(void *self)
{
    adamw_fused_cuda *a = (adamw_fused_cuda *)self;
    if (!a)
        return;
    a->base.inst.device.ops->free(a->base.inst.device.self, a->partials);
    gb_plugin_instance_destroy(a);
}

static int by_offset(const void *x, const void *y)
{
    const gb_param_group *a = (const gb_param_group *)x, *b = (const gb_param_group *)y;
    return (a->offset > b->offset) - (a->offset < b->offset);
}

/* The groups as runs of one decay flag, in order of offset, into runs (n_groups entries);
 * returns how many. The groups cover [0, n) exactly (checked), so the runs tile it. */
static int64_t merge_runs(const gb_optim_step_args *args, gb_param_group *runs)
{
    memcpy(runs, args->groups, (size_t)args->n_groups * sizeof *runs);
    qsort(runs, (size_t)args->n_groups, sizeof *runs, by_offset);
    int64_t count = 0;
    for (int64_t k = 0; k < args->n_groups; k++) {
        if (runs[k].count == 0)
            continue;
        if (count > 0 && (runs[count - 1].decay != 0) == (runs[k].decay != 0))
            runs[count - 1].count += runs[k].count;
        else
            runs[count++] = runs[k];
    }
    return count;
}

static gb_status launch_runs(const adamw_fused_cuda *a, const gb_optim_step_args *args,
                             const gb_param_group *runs, int64_t n_runs)
{
    const gb_host *host = a->base.inst.host;
    cudaStream_t stream = optim_cuda_stream(&a->base.inst.device);
    const int stochastic = args->params_lowp && gb_optim_lowp_stochastic(args);
    fused_buffers b = {args->params, args->grads, (float *)args->state,
                       (float *)args->state + args->n, (uint16_t *)args->params_lowp,
                       args->lowp_dtype, stochastic, stochastic ? args->lowp_seed : 0,
                       args->step};
    // g_scale is filled in by the kernel, from the device scalar
    const adamw_coeffs c = adamw_step_coeffs(&a->base.h, args->lr, args->step, 1.0f);
    const float decay = adamw_decay_factor(&a->base.h, args->lr);
    const optim_cuda_clip clip = optim_cuda_clip_of(args);
    for (int64_t first = 0; first < n_runs; first += FUSED_SPANS) {
        fused_spans spans;
        memset(&spans, 0, sizeof spans);
        spans.begin = runs[first].offset;
        while (spans.count < FUSED_SPANS && first + spans.count < n_runs) {
            const gb_param_group *r = &runs[first + spans.count];
            spans.end[spans.count] = r->offset + r->count;
            spans.decays[spans.count] = r->decay != 0;
            spans.count++;
        }
        fused_kernel<<<optim_cuda_blocks(spans.end[spans.count - 1] - spans.begin),
                       OPTIM_CUDA_THREADS, 0, stream>>>(b, spans, c, decay, clip);
        GB_CUDA_CHECK_LAUNCH("adamw_fused fused_kernel (spans of n)");
    }
    return GB_OK;
}

static gb_status fused_step(void *self, const gb_optim_step_args *args)
{
    const adamw_fused_cuda *a = (const adamw_fused_cuda *)self;
    if (!a)
        return GB_ERR_INVALID_ARG;
    gb_status st = adamw_check_step_args(&a->base, args, 1);
    if (st != GB_OK || args->n == 0)
        return st;
    const gb_host *host = a->base.inst.host;
    gb_param_group *runs =
        (gb_param_group *)host->alloc(host, (size_t)args->n_groups * sizeof *runs);
    if (!runs) {
        host->set_error(host, "out of memory sorting %lld parameter groups",
                        (long long)args->n_groups);
        return GB_ERR_NO_MEMORY;
    }
    st = launch_runs(a, args, runs, merge_runs(args, runs));
    host->free(host, runs);
    return st;
}

static gb_status fused_grad_norm_sq(void *self, float *out, const float *grads, int64_t n)
{
    const adamw_fused_cuda *a = (const adamw_fused_cuda *)self;
    if (!a)
        return GB_ERR_INVALID_ARG;
    gb_status st = adamw_check_norm_args(&a->base, out, grads, n);
    if (st != GB_OK)
        return st;
    const gb_host *host = a->base.inst.host;   // GB_CUDA_CHECK_LAUNCH reports through it
    cudaStream_t stream = optim_cuda_stream(&a->base.inst.device);
    norm_partials_kernel<<<NORM_BLOCKS, NORM_THREADS, 0, stream>>>(a->partials, grads, n);
    GB_CUDA_CHECK_LAUNCH("adamw_fused norm_partials_kernel (n)");
    norm_total_kernel<<<1, NORM_BLOCKS, 0, stream>>>(out, a->partials);
    GB_CUDA_CHECK_LAUNCH("adamw_fused norm_total_kernel (NORM_BLOCKS)");
    return GB_OK;
}

/* C linkage: the loader looks the entry up by its plain name. */
extern "C" {
GB_OPTIM_PLUGIN("adamw_fused", "1.0.0",
                "AdamW in one kernel per step, bit-identical to adamw; deterministic "
                "grad_norm_sq; writes the bf16/f16 working copy",
                GB_DEVICE_CUDA, GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16),
                GB_CAP_DETERMINISTIC | GB_CAP_LOWP_COPY | GB_CAP_STOCHASTIC_ROUNDING |
                    GB_CAP_QUEUED_MEMORY | GB_CAP_DEVICE_LOSS_SCALE | GB_CAP_RANGE_STEP,
                GB_OPTIONS(adamw_options), fused_create, fused_destroy, adamw_state_bytes,
                fused_step, fused_grad_norm_sq, NULL)
}
