/* Token plus position embeddings on the CPU device, forward and backward.
 *
 * Forward rows are independent and split across threads. Backward must scatter rows of
 * dout into dwte where tokens repeat; instead of atomics or per-thread copies of dwte,
 * each thread owns a slice of the C columns and walks all positions in order, so every
 * element of dwte sums in one fixed order whatever the thread count. Token ids are
 * trusted to be in [0, V): the kernel is not told V and does not check.
 */
#include "cpu_device.h"

/* Column slices start on 16-float (cache line) boundaries so threads never share a line. */
static int64_t column_slice_begin(int64_t C, int slice, int slices)
{
    int64_t begin = (C * slice / slices + 15) / 16 * 16;
    return begin < C ? begin : C;
}

gb_status cpu_embed_forward(void *self, gb_dtype dtype, void *out_, const int32_t *tokens,
                            const float *wte, const float *wpe, int64_t B, int64_t T,
                            int64_t C)
{
    cpu_device *dev = self;
    gb_status status = cpu_check_call(dev, "embed_forward", dtype, B * T, C);
    if (status != GB_OK)
        return status;
    float *out = out_;   // (B, T, C)
    #pragma omp parallel for schedule(static) num_threads(dev->threads) \
        if (B * T * C >= CPU_PARALLEL_MIN)
    for (int64_t bt = 0; bt < B * T; bt++) {
        float *o = out + bt * C;
        const float *tok = wte + (int64_t)tokens[bt] * C;
        const float *pos = wpe + (bt % T) * C;
        for (int64_t c = 0; c < C; c++)
            o[c] = tok[c] + pos[c];
    }
    return GB_OK;
}

gb_status cpu_embed_backward(void *self, gb_dtype dtype, float *dwte, float *dwpe,
                             const void *dout_, const int32_t *tokens, int64_t B, int64_t T,
                             int64_t C)
{
    cpu_device *dev = self;
    gb_status status = cpu_check_call(dev, "embed_backward", dtype, B * T, C);
    if (status != GB_OK)
        return status;
    const float *dout = dout_;   // (B, T, C)
    int slices = dev->threads;
    #pragma omp parallel num_threads(dev->threads) if (B * T * C >= CPU_PARALLEL_MIN)
    {
        #pragma omp for schedule(static) nowait
        for (int slice = 0; slice < slices; slice++) {
            int64_t c0 = column_slice_begin(C, slice, slices);
            int64_t c1 = column_slice_begin(C, slice + 1, slices);
            for (int64_t bt = 0; bt < B * T; bt++) {
                float *dst = dwte + (int64_t)tokens[bt] * C;
                const float *src = dout + bt * C;
                for (int64_t c = c0; c < c1; c++)
                    dst[c] += src[c];
            }
        }
        #pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            float *dst = dwpe + t * C;
            for (int64_t b = 0; b < B; b++) {
                const float *src = dout + (b * T + t) * C;
                for (int64_t c = 0; c < C; c++)
                    dst[c] += src[c];
            }
        }
    }
    return GB_OK;
}
