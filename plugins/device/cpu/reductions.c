/* Reductions across rows on the CPU device: bias gradients and the sum of squares behind
 * the global gradient norm, plus the ordered combine that layernorm_backward shares.
 *
 * Every cross-thread sum is split the same way: the rows (or elements) are cut into
 * chunks of a fixed size (gb_chunk_count), each chunk sums in double into its own slot of
 * the instance's scratch, threads take whole chunks, and the slots are added in chunk
 * order. No atomics, no dependence on which thread ran which chunk or on how many threads
 * there are, so results are bit-identical run to run and for any thread count. A 16-bit
 * dout is widened a row at a time into per-thread f32 rows (dtype_rows.h).
 */
#include "cpu_device.h"
#include "rowreduce.h"

/* Columns summed together: the chunks' partials are read a row of 64 doubles at a time
 * rather than one column at a time down a stride that is often a multiple of 4 KiB
 * (which maps every read to the same L1 set). */
#define COMBINE_COLUMNS 64

void cpu_add_partials(cpu_device *dev, float *dst, const double *partials, int chunks,
                      int64_t stride, int64_t cols)
{
    const int64_t blocks = (cols + COMBINE_COLUMNS - 1) / COMBINE_COLUMNS;
    const int team = cpu_team(dev);
    #pragma omp parallel for schedule(dynamic, gb_omp_piece(blocks, team)) num_threads(team) \
        if (chunks * cols >= CPU_PARALLEL_MIN)
    for (int64_t block = 0; block < blocks; block++) {
        const int64_t c0 = block * COMBINE_COLUMNS;
        const int64_t n = cols - c0 < COMBINE_COLUMNS ? cols - c0 : COMBINE_COLUMNS;
        double sum[COMBINE_COLUMNS] = {0};
        for (int p = 0; p < chunks; p++)
            for (int64_t c = 0; c < n; c++)
                sum[c] += partials[p * stride + c0 + c];
        for (int64_t c = 0; c < n; c++)
            dst[c0 + c] += (float)sum[c];
    }
}

gb_status cpu_bias_backward(void *self, gb_dtype dtype, float *dbias, const void *dout_,
                            int64_t N, int64_t C)
{
    cpu_device *dev = self;
    float *rows;   // (threads, C) when 16-bit
    gb_status status = cpu_check_rows(dev, "bias_backward", dtype, N, C, C, &rows);
    if (status != GB_OK || C == 0)
        return status;
    // dout_ (N, C) act
    const int chunks = (int)gb_chunk_count(N, GB_CHUNK_ROWS);
    double *partials = cpu_scratch(dev, "bias_backward", (size_t)chunks * C);   // (chunks, C)
    if (!partials)
        return GB_ERR_NO_MEMORY;
    #pragma omp parallel for schedule(dynamic, 1) num_threads(cpu_team(dev)) \
        if (N * C >= CPU_PARALLEL_MIN)
    for (int chunk = 0; chunk < chunks; chunk++) {
        double *p = partials + (int64_t)chunk * C;
        for (int64_t c = 0; c < C; c++)
            p[c] = 0.0;
        int64_t end = gb_chunk_begin(N, chunk + 1, chunks);
        for (int64_t row = gb_chunk_begin(N, chunk, chunks); row < end; row++) {
            const float *d = dtype_read_row(dout_, dtype, row * C, C,
                                            cpu_thread_rows(rows, C, 0));
            for (int64_t c = 0; c < C; c++)
                p[c] += (double)d[c];
        }
    }
    cpu_add_partials(dev, dbias, partials, chunks, C, C);
    return GB_OK;
}

gb_status cpu_sum_squares(void *self, float *out, const float *x, int64_t n)
{
    cpu_device *dev = self;
    gb_status status = cpu_check_call(dev, "sum_squares", GB_F32, n, 1);
    if (status != GB_OK)
        return status;
    const int chunks = (int)gb_chunk_count(n, GB_CHUNK_ELEMENTS);
    double *partials = cpu_scratch(dev, "sum_squares", (size_t)chunks);   // (chunks)
    if (!partials)
        return GB_ERR_NO_MEMORY;
    #pragma omp parallel for schedule(dynamic, 1) num_threads(cpu_team(dev)) \
        if (n >= CPU_PARALLEL_MIN)
    for (int chunk = 0; chunk < chunks; chunk++) {
        int64_t begin = gb_chunk_begin(n, chunk, chunks);
        int64_t end = gb_chunk_begin(n, chunk + 1, chunks);
        partials[chunk] = row_sum_sq_f64(x + begin, end - begin);
    }
    double total = 0.0;
    for (int chunk = 0; chunk < chunks; chunk++)
        total += partials[chunk];
    *out = (float)total;
    return GB_OK;
}
