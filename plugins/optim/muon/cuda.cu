/* Muon on CUDA: the hidden matrices orthogonalised in bf16, AdamW for the rest.
 *
 * The step is muon_step.h's, as on the CPU; the Newton-Schulz products are the device's
 * matmul (cuBLASLt on device/cuda) in bf16 with f32 accumulation, the dtype the published
 * Muon iterates in on a GPU, and its element-wise passes are the kernels below, one
 * grid-stride loop each over kernels/common/muon.h's and adamw.h's formulas on the
 * compute stream. The clip factor is computed inside the kernels from the device scalar
 * grad_norm_sq (grad_scale.h), so the host never waits. The momentum, AdamW's moments and
 * the parameters are f32 as on the CPU; only X, A and B are bf16, so the update differs
 * from the CPU's f32 iteration by bf16's rounding (tests/optim/test_muon.c bounds it).
 *
 * Deliberately left out: batching matrices of one shape into one product, and fusing the
 * passes. Not yet run on a GPU.
 */
#include "adamw.h"
#include "adamw_instance.h"
#include "cuda_status.h"
#include "gearbox/convert.h"
#include "gearbox/optim.h"
#include "muon.h"
#include "muon_step.h"
#include "optim_cuda.h"
#include "stochastic_round.h"

// Where a kernel writes the working copy of the parameters, if anywhere.
typedef struct lowp_target {
    uint16_t *lowp;        // (n) bf16 or f16 patterns, or NULL
    gb_dtype dtype;
    int32_t stochastic;
    uint64_t seed;
    int64_t step;
} lowp_target;

static lowp_target lowp_target_of(const gb_optim_step_args *args)
{
    lowp_target l = {(uint16_t *)args->params_lowp, args->lowp_dtype, gb_optim_lowp_stochastic(args),
                     args->lowp_seed, args->step};
    return l;
}

static __device__ void store_lowp(const lowp_target *l, float p, int64_t i)
{
    if (l->lowp)
        l->lowp[i] = gb_lowp_at(p, l->dtype, l->stochastic, l->seed, l->step, i);
}

// One non-matrix tensor [off, off + count): AdamW on p, m (n) and vt (indexed like p).
static __global__ void adamw_kernel(float *p, float *m, float *vt, const float *grads,
                                    int64_t off, int64_t count, float decay, adamw_coeffs c,
                                    optim_cuda_clip clip, lowp_target lowp)
{
    c.g_scale = optim_cuda_grad_scale(&clip);
    for (int64_t i = off + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < off + count;
         i += (int64_t)gridDim.x * blockDim.x) {
        adamw_element(&p[i], &m[i], &vt[i], grads[i], decay, &c);
        store_lowp(&lowp, p[i], i);
    }
}

// mom, grad, u (numel): the momentum moved and the update written
static __global__ void momentum_kernel(float *mom, const float *grad, float *u, int64_t numel,
                                       muon_coeffs c, optim_cuda_clip clip)
{
    c.g_scale = optim_cuda_grad_scale(&clip);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float m = muon_momentum(mom[i], grad[i], &c);
        mom[i] = m;
        u[i] = muon_update(m, grad[i], &c);
    }
}

// x (numel) bf16 = u / (sqrt(*norm_sq) + eps)
static __global__ void normalize_kernel(uint16_t *x, const float *u, const float *norm_sq,
                                        int64_t numel)
{
    const float ns = *norm_sq;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < numel;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = gb_bf16_from_f32(muon_normalized(u[i], ns));
}

// p (numel, at flat offset off) moved by x (numel) bf16
static __global__ void apply_kernel(float *p, const uint16_t *x, int64_t off, int64_t numel,
                                    muon_apply_coeffs c, lowp_target lowp)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float q = muon_apply(p[off + i], gb_f32_from_bf16(x[i]), &c);
        p[off + i] = q;
        store_lowp(&lowp, q, off + i);
    }
}

static cudaStream_t stream_of(const muon_base *mu)
{
    return optim_cuda_stream(&mu->adamw.inst.device);
}

static gb_status cuda_adamw(const muon_base *mu, const gb_optim_step_args *args)
{
    const gb_host *host = mu->adamw.inst.host;
    float *m = (float *)args->state, *v = m + args->n;
    const adamw_coeffs c = adamw_step_coeffs(&mu->adamw.h, args->lr, args->step, 1.0f);
    const float decay = adamw_decay_factor(&mu->adamw.h, args->lr);
    for (int64_t k = 0; k < mu->n_tensors; k++) {
        const muon_tensor *t = &mu->tensors[k];
        if (muon_is_matrix(t))
            continue;
        const int64_t count = t->rows * t->cols;
        adamw_kernel<<<optim_cuda_blocks(count), OPTIM_CUDA_THREADS, 0, stream_of(mu)>>>(
            args->params, m, v + t->v_offset - t->offset, args->grads, t->offset, count,
            t->decay ? decay : 1.0f, c, optim_cuda_clip_of(args), lowp_target_of(args));
        GB_CUDA_CHECK_LAUNCH("muon adamw_kernel (tensor count)");
    }
    return GB_OK;
}

static gb_status cuda_momentum(const muon_base *mu, const gb_optim_step_args *args,
                               const muon_tensor *t, const muon_coeffs *c, float *u)
{
    const gb_host *host = mu->adamw.inst.host;
    const int64_t numel = t->rows * t->cols;
    momentum_kernel<<<optim_cuda_blocks(numel), OPTIM_CUDA_THREADS, 0, stream_of(mu)>>>(
        (float *)args->state + t->offset, args->grads + t->offset, u, numel, *c,
        optim_cuda_clip_of(args));
    GB_CUDA_CHECK_LAUNCH("muon momentum_kernel (matrix numel)");
    return GB_OK;
}

static gb_status cuda_normalize(const muon_base *mu, void *x, const float *u,
                                const float *norm_sq, int64_t numel)
{
    const gb_host *host = mu->adamw.inst.host;
    normalize_kernel<<<optim_cuda_blocks(numel), OPTIM_CUDA_THREADS, 0, stream_of(mu)>>>(
        (uint16_t *)x, u, norm_sq, numel);
    GB_CUDA_CHECK_LAUNCH("muon normalize_kernel (matrix numel)");
    return GB_OK;
}

static gb_status cuda_apply(const muon_base *mu, const gb_optim_step_args *args,
                            const muon_tensor *t, const void *x, const muon_apply_coeffs *c)
{
    const gb_host *host = mu->adamw.inst.host;
    const int64_t numel = t->rows * t->cols;
    apply_kernel<<<optim_cuda_blocks(numel), OPTIM_CUDA_THREADS, 0, stream_of(mu)>>>(
        args->params, (const uint16_t *)x, t->offset, numel, *c, lowp_target_of(args));
    GB_CUDA_CHECK_LAUNCH("muon apply_kernel (matrix numel)");
    return GB_OK;
}

static const muon_passes cuda_passes = {cuda_adamw, cuda_momentum, cuda_normalize, cuda_apply};

static gb_status muon_create(const gb_host *host, const gb_value *options,
                             const gb_device_ctx *device, void **self)
{
    return muon_base_create(host, options, device, optim_cuda_device_ok, GB_BF16,
                            sizeof(muon_base), self);
}

static gb_status muon_step(void *self, const gb_optim_step_args *args)
{
    return muon_step_with((const muon_base *)self, args, &cuda_passes);
}

/* C linkage: the loader looks the entry up by its plain name. */
extern "C" {
GB_OPTIM_PLUGIN("muon", "1.0.0",
                "Muon: hidden matrices orthogonalised by 5 Newton-Schulz iterations in bf16 "
                "on the device, AdamW for embeddings, biases and norms",
                GB_DEVICE_CUDA, GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16),
                GB_CAP_DETERMINISTIC | GB_CAP_LOWP_COPY | GB_CAP_STOCHASTIC_ROUNDING |
                    GB_CAP_QUEUED_MEMORY,
                GB_OPTIONS(muon_options), muon_create, muon_destroy, muon_state_bytes,
                muon_step, NULL, muon_bind_params)
}
