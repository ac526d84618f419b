/* Softmax cross-entropy on the CPU device, fused with its gradient, over rows of V logits
 * that lie `ld` apart (ABI 1.3; cross_entropy is ld = V).
 *
 * Rows are independent and split across threads. Each row makes three passes over its V
 * logits: the maximum, the exponentials of the shifted logits with their sum (in double,
 * since V may be 50k), and, when a gradient is wanted, the scaling into dlogits. The
 * exponentials are parked in dlogits when there is one (so they are computed once) and
 * in a small stack block otherwise; the target's logit is read before dlogits, which may
 * alias the logits, is written. 16-bit logits are widened a row at a time into a
 * per-thread f32 row, and dlogits computed in a second one and rounded on store
 * (dtype_rows.h); losses are f32 whatever the logits are. The per-row pieces and the
 * summation order (blocks of GB_CE_EXP_BLOCK columns) are kernels/common/crossentropy.h's,
 * which the CUDA device computes with too.
 */
#include "cpu_device.h"
#include "crossentropy.h"
#include "exp.h"
#include "rowreduce.h"

// e, x (n); e may alias x
static void exp_shifted(float *e, const float *x, float shift, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        e[i] = gb_exp_fast(x[i] - shift);
}

/* sum of exp(x - shift) over the row, leaving the exponentials in e_row when not NULL. */
// x (V); e_row (V) or NULL, may alias x
static double sum_exp_shifted(float *e_row, const float *x, float shift, int64_t V)
{
    float block[GB_CE_EXP_BLOCK];
    double sum = 0.0;
    for (int64_t c0 = 0; c0 < V; c0 += GB_CE_EXP_BLOCK) {
        int64_t len = V - c0 < GB_CE_EXP_BLOCK ? V - c0 : GB_CE_EXP_BLOCK;
        float *e = e_row ? e_row + c0 : block;
        exp_shifted(e, x + c0, shift, len);
        sum += row_sum_f64(e, len);
    }
    return sum;
}

static gb_status check_targets(cpu_device *dev, const int32_t *targets, int64_t N, int64_t V)
{
    for (int64_t row = 0; row < N; row++)
        if (targets[row] < 0 || targets[row] >= V)
            return cpu_fail(dev, GB_ERR_INVALID_ARG,
                            "cross_entropy: target %d of row %lld is outside [0, %lld)",
                            (int)targets[row], (long long)row, (long long)V);
    return GB_OK;
}

gb_status cpu_cross_entropy_ld(void *self, gb_dtype dtype, float *losses, void *dlogits_,
                               const void *logits_, int64_t ld, const int32_t *targets,
                               int64_t N, int64_t V, float dloss)
{
    cpu_device *dev = self;
    gb_status status = cpu_check_call(dev, "cross_entropy", dtype, N, V);
    float *rows;   // (threads, 2V) when 16-bit: logits, dlogits
    if (status == GB_OK && ld < V)
        status = cpu_fail(dev, GB_ERR_INVALID_ARG, "cross_entropy_ld: rows %lld apart hold "
                          "fewer than the %lld classes", (long long)ld, (long long)V);
    if (status == GB_OK)
        status = check_targets(dev, targets, N, V);
    if (status == GB_OK)
        status = cpu_row_scratch(dev, "cross_entropy", dtype, 2 * V, &rows);
    if (status != GB_OK)
        return status;
    // logits_ (N, ld) act; dlogits_ (N, ld) act or NULL, may alias logits_; V columns used
    const int team = cpu_team(dev);
    #pragma omp parallel for schedule(dynamic, gb_omp_piece(N, team)) num_threads(team) \
        if (N * V >= CPU_PARALLEL_MIN)
    for (int64_t row = 0; row < N; row++) {
        const float *x = dtype_read_row(logits_, dtype, row * ld, V,
                                        cpu_thread_rows(rows, 2 * V, 0));
        float *d = dlogits_ ? dtype_write_row(dlogits_, dtype, row * ld,
                                              cpu_thread_rows(rows, 2 * V, V)) : NULL;
        int32_t target = targets[row];
        float target_logit = x[target];
        float max = row_max(x, V);
        double sum = sum_exp_shifted(d, x, max, V);
        losses[row] = gb_ce_loss(sum, max, target_logit);
        if (!d)
            continue;
        float inv_sum = gb_ce_inv_sum(sum);
        for (int64_t c = 0; c < V; c++)
            d[c] = gb_ce_dlogit(d[c], inv_sum, c == target, dloss);
        dtype_store_row(dlogits_, dtype, row * ld, d, V);
    }
    return GB_OK;
}
