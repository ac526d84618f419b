/* LayerNorm on the CPU device, forward and backward (the formulas of llm.c and PyTorch,
 * biased variance).
 *
 * Rows are independent in the forward pass and for dx, so rows are split across threads.
 * dweight and dbias sum over rows: the rows are cut into chunks of a fixed size (see
 * reductions.c), each chunk sums into its own row of double partials, and the partials
 * are added to dweight and dbias in chunk order, so the result is bit-identical run to
 * run and for any thread count. Per-row statistics are computed in f32 with the
 * fixed-order row helpers. 16-bit rows of x, dout, out and dx are widened into per-thread
 * f32 rows (dtype_rows.h); statistics and parameter gradients stay f32. The per-element
 * terms and the summation orders are kernels/common's (layernorm.h, reduce_order.h), which
 * the CUDA device computes with too.
 */
#include <math.h>

#include "cpu_device.h"
#include "layernorm.h"
#include "rowreduce.h"

gb_status cpu_layernorm_forward(void *self, gb_dtype dtype, void *out_, float *mean,
                                float *rstd, const void *x_, const float *weight,
                                const float *bias, int64_t N, int64_t C, float eps)
{
    cpu_device *dev = self;
    float *rows;   // (threads, 2C) when 16-bit: x, out
    gb_status status = cpu_check_rows(dev, "layernorm_forward", dtype, N, C, 2 * C, &rows);
    if (status != GB_OK || C == 0)
        return status;
    // out_, x_ (N, C) act
    const int team = cpu_team(dev);
    #pragma omp parallel for schedule(dynamic, gb_omp_piece(N, team)) num_threads(team) \
        if (N * C >= CPU_PARALLEL_MIN)
    for (int64_t row = 0; row < N; row++) {
        const float *xr = dtype_read_row(x_, dtype, row * C, C, cpu_thread_rows(rows, 2 * C, 0));
        float *o = dtype_write_row(out_, dtype, row * C, cpu_thread_rows(rows, 2 * C, C));
        float m = row_sum(xr, C) / (float)C;
        float s = gb_ln_rstd(row_sum_sq_dev(xr, m, C), C, eps);
        if (bias) {
            for (int64_t c = 0; c < C; c++)
                o[c] = gb_ln_norm(xr[c], m, s) * weight[c] + bias[c];
        } else {
            for (int64_t c = 0; c < C; c++)
                o[c] = gb_ln_norm(xr[c], m, s) * weight[c];
        }
        dtype_store_row(out_, dtype, row * C, o, C);
        mean[row] = m;
        rstd[row] = s;
    }
    return GB_OK;
}

/* sum over c of weight * dout * (x - mean): the numerator of mean(dnorm * norm). */
// weight, dout, x (C)
static float centred_dot(const float *weight, const float *dout, const float *x, float mean,
                         int64_t C)
{
    float acc[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= C; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++)
            acc[j] = fmaf(weight[i + j] * dout[i + j], x[i + j] - mean, acc[j]);
    for (int j = 0; i + j < C; j++)
        acc[j] = fmaf(weight[i + j] * dout[i + j], x[i + j] - mean, acc[j]);
    return fold_lanes_f32(acc);
}

/* dx += for one row; dnorm = weight * dout, norm = (x - mean) * rstd. */
// dx, dout, x, weight (C)
static void row_backward(float *dx, const float *dout, const float *x, const float *weight,
                         float mean, float rstd, int64_t C)
{
    float dnorm_mean = row_dot(weight, dout, C) / (float)C;
    float dnorm_norm_mean = centred_dot(weight, dout, x, mean, C) * rstd / (float)C;
    for (int64_t c = 0; c < C; c++)
        dx[c] += gb_ln_dx(weight[c] * dout[c], gb_ln_norm(x[c], mean, rstd), dnorm_mean,
                          dnorm_norm_mean, rstd);
}

gb_status cpu_layernorm_backward(void *self, gb_dtype dtype, void *dx_, float *dweight,
                                 float *dbias, const void *dout_, const void *x_,
                                 const float *weight, const float *mean, const float *rstd,
                                 int64_t N, int64_t C)
{
    cpu_device *dev = self;
    float *rows;   // (threads, 3C) when 16-bit: dx, dout, x
    gb_status status = cpu_check_rows(dev, "layernorm_backward", dtype, N, C, 3 * C, &rows);
    if (status != GB_OK || C == 0)
        return status;
    // dx_, dout_, x_ (N, C) act
    const int chunks = (int)gb_chunk_count(N, GB_CHUNK_ROWS);
    // (chunks, 2C): each chunk's dweight, then its dbias
    double *partials = cpu_scratch(dev, "layernorm_backward", (size_t)chunks * 2 * C);
    if (!partials)
        return GB_ERR_NO_MEMORY;

    #pragma omp parallel for schedule(dynamic, 1) num_threads(cpu_team(dev)) \
        if (N * C >= CPU_PARALLEL_MIN)
    for (int chunk = 0; chunk < chunks; chunk++) {
        double *pw = partials + (int64_t)chunk * 2 * C;
        double *pb = pw + C;
        for (int64_t c = 0; c < 2 * C; c++)
            pw[c] = 0.0;
        float *dx_row = cpu_thread_rows(rows, 3 * C, 0);
        float *dout_row = cpu_thread_rows(rows, 3 * C, C);
        float *x_row = cpu_thread_rows(rows, 3 * C, 2 * C);
        int64_t end = gb_chunk_begin(N, chunk + 1, chunks);
        for (int64_t row = gb_chunk_begin(N, chunk, chunks); row < end; row++) {
            float *dxr = dtype_update_row(dx_, dtype, row * C, C, dx_row);
            const float *dr = dtype_read_row(dout_, dtype, row * C, C, dout_row);
            const float *xr = dtype_read_row(x_, dtype, row * C, C, x_row);
            float m = mean[row], s = rstd[row];
            row_backward(dxr, dr, xr, weight, m, s, C);
            dtype_store_row(dx_, dtype, row * C, dxr, C);
            for (int64_t c = 0; c < C; c++) {
                pw[c] += (double)(gb_ln_norm(xr[c], m, s) * dr[c]);
                pb[c] += (double)dr[c];
            }
        }
    }
    cpu_add_partials(dev, dweight, partials, chunks, 2 * C, C);
    if (dbias)
        cpu_add_partials(dev, dbias, partials + C, chunks, 2 * C, C);
    return GB_OK;
}
