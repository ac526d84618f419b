/* AdamW on CUDA: the readable reference optimizer, optim/adamw's passes as kernels.
 *
 * The same mathematics and the same order as the CPU version (weight decay, first
 * moment, second moment, update), one element-wise kernel per pass on the device's
 * compute stream, each thread applying kernels/common/adamw.h's formulas to the elements
 * of its grid-stride loop. Every operation is rounded on its own, as on the CPU, so p, m
 * and v come out bit-identical to optim/adamw's for the same squared gradient norm.
 * The clip factor is computed inside the kernels from the device scalar grad_norm_sq
 * (grad_scale.h): the host neither reads device memory nor waits.
 *
 * Deliberately left out: fusing the passes (optim/adamw_fused does that), a low-precision
 * copy of the parameters (refused, as on the CPU), its own grad_norm_sq (the core uses the
 * device's sum_squares), AMSGrad and maximize. Not yet run on a GPU.
 *
 * State layout: m (n) f32 followed by v (n) f32, as on the CPU, so checkpoints move
 * between the two.
 */
#include "adamw.h"
#include "adamw_instance.h"
#include "cuda_status.h"
#include "gearbox/optim.h"
#include "optim_cuda.h"
#include "step_args.h"

typedef adamw_base adamw_cuda;

// p (n): p *= factor
static __global__ void decay_kernel(float *p, int64_t n, float factor)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        p[i] = gb_fmul_rn(p[i], factor);
}

// moment, grad (n), with g = grad * g_scale: the first moment m = b1 m + (1 - b1) g, or
// (Second) the second v = b2 v + (1 - b2) g g
template <bool Second>
static __global__ void moment_kernel(float *moment, const float *grad, int64_t n,
                                     adamw_coeffs c, optim_cuda_clip clip)
{
    c.g_scale = optim_cuda_grad_scale(&clip);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float g = adamw_grad(grad[i], &c);
        moment[i] = Second ? adamw_moment2(moment[i], g, &c) : adamw_moment1(moment[i], g, &c);
    }
}

// p, m, v (n): p -= step_size m / (sqrt(v) / sqrt(bc2) + eps)
static __global__ void update_kernel(float *p, const float *m, const float *v, int64_t n,
                                     adamw_coeffs c)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        p[i] = gb_fsub_rn(p[i], adamw_delta(m[i], v[i], &c));
}

static gb_status adamw_create(const gb_host *host, const gb_value *options,
                              const gb_device_ctx *device, void **self)
{
    return adamw_base_create(host, options, device, optim_cuda_device_ok, "adamw",
                             sizeof(adamw_cuda), self);
}

static gb_status adamw_step(void *self, const gb_optim_step_args *args)
{
    const adamw_cuda *a = (const adamw_cuda *)self;
    if (!a)
        return GB_ERR_INVALID_ARG;
    const gb_host *host = a->inst.host;
    gb_status st = adamw_check_step_args(a, args, 0);
    if (st != GB_OK)
        return st;
    const int64_t n = args->n;
    if (n == 0)
        return GB_OK;
    cudaStream_t stream = optim_cuda_stream(&a->inst.device);
    float *m = (float *)args->state, *v = m + n;
    // g_scale is filled in by the kernels that need it, from the device scalar
    adamw_coeffs c = adamw_step_coeffs(&a->h, args->lr, args->step, 1.0f);
    const float decay = adamw_decay_factor(&a->h, args->lr);
    const optim_cuda_clip clip = optim_cuda_clip_of(args);
    for (int64_t k = 0; k < args->n_groups; k++) {
        const gb_param_group *grp = &args->groups[k];
        if (!grp->decay || grp->count == 0)
            continue;
        decay_kernel<<<optim_cuda_blocks(grp->count), OPTIM_CUDA_THREADS, 0, stream>>>(
            args->params + grp->offset, grp->count, decay);
        GB_CUDA_CHECK_LAUNCH("adamw decay_kernel (group count)");
    }
    const unsigned blocks = optim_cuda_blocks(n);
    moment_kernel<false><<<blocks, OPTIM_CUDA_THREADS, 0, stream>>>(m, args->grads, n, c, clip);
    GB_CUDA_CHECK_LAUNCH("adamw moment_kernel<first> (n)");
    moment_kernel<true><<<blocks, OPTIM_CUDA_THREADS, 0, stream>>>(v, args->grads, n, c, clip);
    GB_CUDA_CHECK_LAUNCH("adamw moment_kernel<second> (n)");
    update_kernel<<<blocks, OPTIM_CUDA_THREADS, 0, stream>>>(args->params, m, v, n, c);
    GB_CUDA_CHECK_LAUNCH("adamw update_kernel (n)");
    return GB_OK;
}

/* C linkage: the loader looks the entry up by its plain name. */
extern "C" {
GB_OPTIM_PLUGIN("adamw", "1.0.0",
                "AdamW (torch.optim.AdamW math), readable reference: one kernel per term; "
                "bit-identical to adamw on the CPU",
                GB_DEVICE_CUDA, 0u,
                GB_CAP_DETERMINISTIC | GB_CAP_QUEUED_MEMORY | GB_CAP_RANGE_STEP,
                GB_OPTIONS(adamw_options), adamw_create, gb_plugin_instance_destroy,
                adamw_state_bytes, adamw_step, NULL, NULL)
}
