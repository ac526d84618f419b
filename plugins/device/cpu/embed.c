/* Token plus position embeddings on the CPU device, forward and backward.
 *
 * Forward rows are independent and split across threads. Backward must scatter rows of
 * dout into dwte where tokens repeat; instead of atomics or per-thread copies of dwte,
 * each thread owns a slice of the C columns and walks all positions in order, so every
 * element of dwte sums in one fixed order whatever the thread count. Token ids are
 * trusted to be in [0, V): the kernel is not told V and does not check. 16-bit
 * activations go through a per-thread f32 row (dtype_rows.h); the sums stay f32.
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
    float *rows;   // (threads, C) when 16-bit
    gb_status status = cpu_check_rows(dev, "embed_forward", dtype, B * T, C, C, &rows);
    if (status != GB_OK)
        return status;
    // out_ (B, T, C) act
    const int team = cpu_team(dev);
    #pragma omp parallel for schedule(dynamic, gb_omp_piece(B * T, team)) num_threads(team) \
        if (B * T * C >= CPU_PARALLEL_MIN)
    for (int64_t bt = 0; bt < B * T; bt++) {
        float *o = dtype_write_row(out_, dtype, bt * C, cpu_thread_rows(rows, C, 0));
        const float *tok = wte + (int64_t)tokens[bt] * C;
        const float *pos = wpe + (bt % T) * C;
        for (int64_t c = 0; c < C; c++)
            o[c] = tok[c] + pos[c];
        dtype_store_row(out_, dtype, bt * C, o, C);
    }
    return GB_OK;
}

gb_status cpu_embed_backward(void *self, gb_dtype dtype, float *dwte, float *dwpe,
                             const void *dout_, const int32_t *tokens, int64_t B, int64_t T,
                             int64_t C)
{
    cpu_device *dev = self;
    float *rows;   // (threads, C) when 16-bit
    gb_status status = cpu_check_rows(dev, "embed_backward", dtype, B * T, C, C, &rows);
    if (status != GB_OK)
        return status;
    // dout_ (B, T, C) act
    const int slices = cpu_team(dev);
    #pragma omp parallel num_threads(slices) if (B * T * C >= CPU_PARALLEL_MIN)
    {
        float *row = cpu_thread_rows(rows, C, 0);
        #pragma omp for schedule(static) nowait
        for (int slice = 0; slice < slices; slice++) {
            int64_t c0 = column_slice_begin(C, slice, slices);
            int64_t c1 = column_slice_begin(C, slice + 1, slices);
            for (int64_t bt = 0; bt < B * T; bt++) {
                float *dst = dwte + (int64_t)tokens[bt] * C + c0;
                const float *src = dtype_read_row(dout_, dtype, bt * C + c0, c1 - c0, row);
                for (int64_t c = 0; c < c1 - c0; c++)
                    dst[c] += src[c];
            }
        }
        #pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            float *dst = dwpe + t * C;
            for (int64_t b = 0; b < B; b++) {
                const float *src = dtype_read_row(dout_, dtype, (b * T + t) * C, C, row);
                for (int64_t c = 0; c < C; c++)
                    dst[c] += src[c];
            }
        }
    }
    return GB_OK;
}
