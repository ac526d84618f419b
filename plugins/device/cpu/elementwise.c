/* Element-wise kernels on the CPU device: exact (erf) GELU forward and backward, and the
 * residual add.
 *
 * Each is one flat range split statically across threads. GELU runs the instance's
 * vectorised loops (cpu_kernels.h) on each thread's slice, the per-element math being
 * pointwise.h's in every build. Nothing is reduced, so results do not depend on the
 * thread count at all.
 */
#include "cpu_device.h"

/* Slice `part` of `parts` of n elements: [begin, end), cut on multiples of CPU_VEC so
 * that vector loops see whole vectors everywhere but at the very end. */
static void slice_of(int64_t n, int part, int parts, int64_t *begin, int64_t *end)
{
    *begin = n * part / parts / CPU_VEC * CPU_VEC;
    *end = part + 1 == parts ? n : n * (part + 1) / parts / CPU_VEC * CPU_VEC;
}

gb_status cpu_gelu_forward(void *self, gb_dtype dtype, void *out_, const void *x_, int64_t n)
{
    cpu_device *dev = self;
    gb_status status = cpu_check_call(dev, "gelu_forward", dtype, n, 1);
    if (status != GB_OK)
        return status;
    float *out = out_;       // (n)
    const float *x = x_;     // (n)
    const int parts = n >= CPU_PARALLEL_MIN ? dev->threads : 1;
    #pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
    for (int part = 0; part < parts; part++) {
        int64_t begin, end;
        slice_of(n, part, parts, &begin, &end);
        dev->kernels->gelu_forward(out + begin, x + begin, end - begin);
    }
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
    const int parts = n >= CPU_PARALLEL_MIN ? dev->threads : 1;
    #pragma omp parallel for schedule(static) num_threads(parts) if (parts > 1)
    for (int part = 0; part < parts; part++) {
        int64_t begin, end;
        slice_of(n, part, parts, &begin, &end);
        dev->kernels->gelu_backward(dx + begin, x + begin, dout + begin, end - begin);
    }
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
