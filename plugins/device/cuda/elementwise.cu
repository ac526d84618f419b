/* Element-wise kernels of the CUDA device: the residual add, GELU forward and backward
 * in the exact (erf) and tanh forms, and dropout, whose mask (kernels/common/dropout.h)
 * is a function of the element's index alone, the CPU device's mask.
 *
 * One kernel strides over the n elements, widening each to f32, computing, and rounding
 * on store (kernels/cuda/act.cuh); the formulas are kernels/common/gelu.h's, so with this
 * plugin's -fmad=false every output has the CPU device's bits (the CPU has no tanh form
 * to compare with). Outputs may alias inputs: each element is read before it is written,
 * by the same thread. Left out: 128-bit vector loads (these kernels are a small share of
 * a step; the matmuls dominate).
 */
#include "act.cuh"
#include "cuda_device.h"
#include "cuda_status.h"
#include "dropout.h"
#include "gelu.h"

enum pointwise_op { OP_ADD, OP_GELU, OP_GELU_GRAD, OP_GELU_TANH, OP_GELU_TANH_GRAD };

/* out = a + b | gelu(a) | b * gelu'(a), with a = x and b = dout for the gradients. */
// out, a, b (n) act
static __global__ void pointwise_kernel(pointwise_op op, gb_dtype dtype, void *out,
                                        const void *a, const void *b, int64_t n)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const float x = gb_act_load(a, dtype, i);
        float v;
        switch (op) {
        case OP_ADD: v = x + gb_act_load(b, dtype, i); break;
        case OP_GELU: v = gb_gelu_erf(x); break;
        case OP_GELU_GRAD: v = gb_act_load(b, dtype, i) * gb_gelu_erf_grad(x); break;
        case OP_GELU_TANH: v = gb_gelu_tanh(x); break;
        default: v = gb_act_load(b, dtype, i) * gb_gelu_tanh_grad(x); break;
        }
        gb_act_store(out, dtype, i, v);
    }
}

static gb_status pointwise(void *self, const char *kernel, pointwise_op op, gb_dtype dtype,
                           void *out, const void *a, const void *b, int64_t n)
{
    cuda_device *dev = (cuda_device *)self;
    const gb_host *host = dev->host;
    gb_status st = cuda_begin(dev, kernel, dtype, n, 1);
    if (st != GB_OK || n == 0)
        return st;
    pointwise_kernel<<<cuda_blocks(n), CUDA_BLOCK, 0, dev->compute>>>(op, dtype, out, a, b, n);
    GB_CUDA_CHECK_LAUNCH("pointwise_kernel (add, GELU forms)");
    return GB_OK;
}

extern "C" gb_status cuda_add(void *self, gb_dtype dtype, void *out, const void *a,
                              const void *b, int64_t n)
{
    return pointwise(self, "add", OP_ADD, dtype, out, a, b, n);
}

extern "C" gb_status cuda_gelu_forward(void *self, gb_dtype dtype, void *out, const void *x,
                                       int64_t n)
{
    return pointwise(self, "gelu_forward", OP_GELU, dtype, out, x, NULL, n);
}

extern "C" gb_status cuda_gelu_backward(void *self, gb_dtype dtype, void *dx, const void *x,
                                        const void *dout, int64_t n)
{
    return pointwise(self, "gelu_backward", OP_GELU_GRAD, dtype, dx, x, dout, n);
}

extern "C" gb_status cuda_gelu_tanh_forward(void *self, gb_dtype dtype, void *out,
                                            const void *x, int64_t n)
{
    return pointwise(self, "gelu_tanh_forward", OP_GELU_TANH, dtype, out, x, NULL, n);
}

extern "C" gb_status cuda_gelu_tanh_backward(void *self, gb_dtype dtype, void *dx,
                                             const void *x, const void *dout, int64_t n)
{
    return pointwise(self, "gelu_tanh_backward", OP_GELU_TANH_GRAD, dtype, dx, x, dout, n);
}

// out, in (n) act; out may alias in
static __global__ void dropout_kernel(gb_dtype dtype, void *out, const void *in, int64_t n,
                                      uint64_t seed, uint64_t threshold, float scale)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        gb_act_store(out, dtype, i,
                     gb_dropout_apply(gb_act_load(in, dtype, i), seed, (uint64_t)i, threshold,
                                      scale));
}

extern "C" gb_status cuda_dropout(void *self, gb_dtype dtype, void *out, const void *in,
                                  int64_t n, float p, uint64_t seed)
{
    cuda_device *dev = (cuda_device *)self;
    const gb_host *host = dev->host;
    if (!(p >= 0.0f && p < 1.0f)) {
        host->set_error(host, "dropout: p = %g is outside [0, 1)", (double)p);
        return GB_ERR_INVALID_ARG;
    }
    gb_status st = cuda_begin(dev, "dropout", dtype, n, 1);
    if (st != GB_OK || n == 0)
        return st;
    dropout_kernel<<<cuda_blocks(n), CUDA_BLOCK, 0, dev->compute>>>(
        dtype, out, in, n, seed, gb_dropout_threshold(p), gb_dropout_scale(p));
    GB_CUDA_CHECK_LAUNCH("dropout_kernel");
    return GB_OK;
}
