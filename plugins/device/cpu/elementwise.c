/* Element-wise kernels on the CPU device: exact (erf) GELU forward and backward, and the
 * residual add.
 *
 * Each is one flat loop split statically across threads; the per-element math lives in
 * pointwise.h so that the loops vectorise and other devices can share it. Nothing is
 * reduced, so results do not depend on the thread count at all.
 */
#include "cpu_device.h"
#include "pointwise.h"

gb_status cpu_gelu_forward(void *self, gb_dtype dtype, void *out_, const void *x_, int64_t n)
{
    cpu_device *dev = self;
    gb_status status = cpu_check_call(dev, "gelu_forward", dtype, n, 1);
    if (status != GB_OK)
        return status;
    float *out = out_;       // (n)
    const float *x = x_;     // (n)
    #pragma omp parallel for simd schedule(static) num_threads(dev->threads) \
        if (n >= CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = gelu_erf(x[i]);
    return GB_OK;
}

gb_status cpu_gelu_backward(void *self, gb_dtype dtype, void *dx_, const void *x_,
                            const void *dout_, int64_t n)
{
    cpu_device *dev = self;
    gb_status status = cpu_check_call(dev, "gelu_backward", dtype, n, 1);
    if (status != GB_OK)
        return status;
    float *dx = dx_;             // (n), may alias dout
    const float *x = x_;         // (n)
    const float *dout = dout_;   // (n)
    #pragma omp parallel for simd schedule(static) num_threads(dev->threads) \
        if (n >= CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++)
        dx[i] = dout[i] * gelu_erf_grad(x[i]);
    return GB_OK;
}

gb_status cpu_add(void *self, gb_dtype dtype, void *out_, const void *a_, const void *b_,
                  int64_t n)
{
    cpu_device *dev = self;
    gb_status status = cpu_check_call(dev, "add", dtype, n, 1);
    if (status != GB_OK)
        return status;
    float *out = out_;       // (n), may alias a or b
    const float *a = a_;     // (n)
    const float *b = b_;     // (n)
    #pragma omp parallel for simd schedule(static) num_threads(dev->threads) \
        if (n >= CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
    return GB_OK;
}
