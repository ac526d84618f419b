/* What the CUDA optimizers of this tree share (nvcc only): the check that the run's
 * device is CUDA, the stream they queue on, the launch shape of their element-wise
 * kernels, and the clip factor as a kernel computes it from the device scalar
 * grad_norm_sq, so that the host never reads device memory and never waits.
 *
 * Element-wise kernels walk their range with a grid-stride loop over a capped grid;
 * every element's result depends on that element alone, so the launch shape changes no
 * bit. Header-only.
 */
#ifndef GB_PLUGINS_OPTIM_CUDA_H
#define GB_PLUGINS_OPTIM_CUDA_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "gearbox/optim.h"
#include "grad_scale.h"
#include "step_args.h"

#define OPTIM_CUDA_THREADS 256
/* Enough blocks to fill any current GPU several times over; the loop covers the rest. */
#define OPTIM_CUDA_MAX_BLOCKS 8192

/* Blocks of OPTIM_CUDA_THREADS for n elements (n > 0). */
static inline unsigned optim_cuda_blocks(int64_t n)
{
    int64_t blocks = (n + OPTIM_CUDA_THREADS - 1) / OPTIM_CUDA_THREADS;
    return (unsigned)(blocks < OPTIM_CUDA_MAX_BLOCKS ? blocks : OPTIM_CUDA_MAX_BLOCKS);
}

/* The compute stream of the device a plugin was created on. */
static inline cudaStream_t optim_cuda_stream(const gb_device_ctx *device)
{
    return (cudaStream_t)device->stream;
}

/* 1 when `device` is a CUDA device; else 0 with the host told why `plugin` cannot run. */
static inline int optim_cuda_device_ok(const gb_host *host, const gb_device_ctx *device,
                                       const char *plugin)
{
    if (device && device->device == GB_DEVICE_CUDA &&
        device->struct_size >= offsetof(gb_device_ctx, stream) + sizeof device->stream)
        return 1;
    host->set_error(host, "%s (cuda) runs on the CUDA device only; this run's device is %s "
                    "(use the plugin built for it)", plugin,
                    !device ? "unknown" : device->device == GB_DEVICE_CPU ? "cpu" : "not CUDA");
    return 0;
}

/* What a kernel needs to compute the clip factor itself (grad_scale.h), and whether the
 * step is skipped for a loss scale kept on the device (ABI 1.4). */
typedef struct optim_cuda_clip {
    const float *norm_sq;      /* device scalar, or NULL */
    float max_norm, inv_loss_scale;
    const float *loss_scale;   /* device scalar, or NULL: inv_loss_scale holds */
} optim_cuda_clip;

static inline optim_cuda_clip optim_cuda_clip_of(const gb_optim_step_args *args)
{
    optim_cuda_clip clip = {args->grad_norm_sq, args->max_norm, args->inv_loss_scale,
                            gb_optim_loss_scale(args)};
    return clip;
}

/* The factor of optim.h, in a kernel: every thread reads the same scalars. */
static __device__ inline float optim_cuda_grad_scale(const optim_cuda_clip *clip)
{
    return gb_grad_scale(clip->norm_sq, clip->max_norm,
                         gb_inv_loss_scale(clip->loss_scale, clip->inv_loss_scale));
}

/* Whether every thread of the step leaves its elements as they are: the gradients
 * overflowed under a loss scale on the device. */
static __device__ inline int optim_cuda_skipped(const optim_cuda_clip *clip)
{
    return gb_step_overflowed(clip->loss_scale, clip->norm_sq);
}

#endif /* GB_PLUGINS_OPTIM_CUDA_H */
