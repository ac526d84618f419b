/* The per-element formulas of kernels/common, which the CPU and the CUDA device both
 * compute with, checked on the CPU against double precision and known values: exp and
 * erfc (exp.h), both GELU forms and their derivatives (gelu.h, the derivatives also
 * against central differences), LayerNorm's terms (layernorm.h, a whole row forward and
 * backward against a double reference), cross-entropy's pieces (crossentropy.h) and the
 * chunking of reduce_order.h. What the GPU computes from the same headers is checked by
 * the gpu suite (tests/gpu), which compares the CUDA device with the CPU device.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "crossentropy.h"
#include "exp.h"
#include "gelu.h"
#include "layernorm.h"
#include "reduce_order.h"
#include "ref_layernorm.h"

/* The distance in representable floats between a and the double b rounded to float. */
static double ulps(float a, double b)
{
    float want = (float)b;
    double step = nextafterf(fabsf(want), INFINITY) - fabsf(want);
    return fabs((double)a - (double)want) / step;
}

static void test_exp(void)
{
    double worst = 0.0;
    for (double x = -87.0; x <= 88.37; x += 0.0137) {
        double u = ulps(gb_exp_fast((float)x), exp((double)(float)x));
        worst = u > worst ? u : worst;
    }
    printf("gb_exp_fast: at most %.2f ulp on [-87, 88.37]\n", worst);
    check_that(worst <= 2.0, "gb_exp_fast is %.2f ulp from exp", worst);
    check_that(gb_exp_fast(-100.0f) == 0.0f && gb_exp_fast(-INFINITY) == 0.0f,
               "gb_exp_fast below -87 is not 0");
    check_that(isinf(gb_exp_fast(89.0f)) && isinf(gb_exp_fast(INFINITY)),
               "gb_exp_fast above 88.72 is not +inf");
    check_that(isnan(gb_exp_fast(NAN)), "gb_exp_fast(NaN) is not NaN");
    check_that(gb_exp_fast(0.0f) == 1.0f, "gb_exp_fast(0) = %.9g", gb_exp_fast(0.0f));

    /* gb_exp_fast_nonpositive: gb_exp_fast's bits wherever x <= 0 or NaN (every 997th
     * float from -0 down past -100, and the edges) */
    static const float edges[] = {0.0f, -0.0f, -87.0f, -87.00001f, -86.99999f, -1e-45f,
                                  -1.17549435e-38f, -INFINITY, NAN, -NAN};
    int differ = 0;
    for (uint32_t bits = 0x80000000u; bits <= 0xc2d00000u; bits += 997u)
        differ += gb_f32_bits(gb_exp_fast_nonpositive(gb_f32_from_bits(bits))) !=
                  gb_f32_bits(gb_exp_fast(gb_f32_from_bits(bits)));
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        differ += gb_f32_bits(gb_exp_fast_nonpositive(edges[i])) !=
                  gb_f32_bits(gb_exp_fast(edges[i]));
    check_that(differ == 0, "gb_exp_fast_nonpositive differs from gb_exp_fast at %d of its "
               "arguments", differ);

    /* the fit's 1.2e-7 plus f32 rounding inside (of -z^2 most: erfc's relative error grows
     * with |x|); beyond |x| = 4 the rounding of x itself moves erfc by more than this */
    double worst_rel = 0.0;
    for (double x = -4.0; x <= 4.0; x += 0.001) {
        double want = erfc((double)(float)x);
        double rel = fabs(gb_erfc_fast((float)x) - want) / want;
        worst_rel = rel > worst_rel ? rel : worst_rel;
    }
    printf("gb_erfc_fast: relative error at most %.3g on [-4, 4]\n", worst_rel);
    check_that(worst_rel < 2e-6, "gb_erfc_fast relative error %.3g", worst_rel);
}

static double gelu_erf_ref(double x)
{
    return 0.5 * x * erfc(-x / sqrt(2.0));
}

static double gelu_tanh_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* |got - want| <= 1e-6 (1 + |want|) over x in [-12, 12], and the derivative against a
 * central difference of the double reference (which crosses zero, hence the absolute
 * part). */
static void check_gelu(const char *name, float (*f)(float), float (*grad)(float),
                       double (*ref)(double))
{
    double worst = 0.0, worst_grad = 0.0;
    for (double x = -12.0; x <= 12.0; x += 0.00731) {
        double xf = (double)(float)x;
        double err = fabs(f((float)x) - ref(xf)) / (1.0 + fabs(ref(xf)));
        double h = 1e-5;
        double dref = (ref(xf + h) - ref(xf - h)) / (2 * h);
        double err_grad = fabs(grad((float)x) - dref) / (1.0 + fabs(dref));
        worst = err > worst ? err : worst;
        worst_grad = err_grad > worst_grad ? err_grad : worst_grad;
    }
    printf("%s: error at most %.3g (1 + |value|), derivative %.3g\n", name, worst, worst_grad);
    check_that(worst < 1e-6, "%s error %.3g", name, worst);
    check_that(worst_grad < 1e-6, "%s derivative error %.3g", name, worst_grad);
}

static void test_gelu(void)
{
    check_gelu("gelu erf", gb_gelu_erf, gb_gelu_erf_grad, gelu_erf_ref);
    check_gelu("gelu tanh", gb_gelu_tanh, gb_gelu_tanh_grad, gelu_tanh_ref);
    /* known values (x = 1): Phi(1), and GPT-2's tanh form */
    check_that(fabs(gb_gelu_erf(1.0f) - 0.8413447460685429) < 1e-7, "gelu_erf(1) = %.9g",
               gb_gelu_erf(1.0f));
    check_that(fabs(gb_gelu_tanh(1.0f) - 0.8411919906082768) < 1e-7, "gelu_tanh(1) = %.9g",
               gb_gelu_tanh(1.0f));
    check_that(gb_gelu_tanh(-20.0f) == 0.0f && gb_gelu_tanh(20.0f) == 20.0f &&
               gb_gelu_tanh_grad(-20.0f) == 0.0f && gb_gelu_tanh_grad(20.0f) == 1.0f,
               "gelu tanh saturates wrongly: %g %g %g %g", gb_gelu_tanh(-20.0f),
               gb_gelu_tanh(20.0f), gb_gelu_tanh_grad(-20.0f), gb_gelu_tanh_grad(20.0f));
}

/* A row of C through the helpers (sums in reduce_order.h's lanes) against double. */
static void test_layernorm(void)
{
    enum { C = 77 };
    float x[C], w[C], dout[C];
    for (int c = 0; c < C; c++) {
        x[c] = (float)sin(0.37 * c) * 3.0f + 0.5f;
        w[c] = 1.0f + 0.01f * (float)c;
        dout[c] = (float)cos(0.11 * c);
    }
    float lanes[GB_ROW_LANES] = {0};
    for (int c = 0; c < C; c++)
        lanes[c % GB_ROW_LANES] += x[c];
    float sum = 0.0f;
    for (int j = 0; j < GB_ROW_LANES; j++)
        sum += lanes[j];
    float mean = sum / (float)C, sq = 0.0f;
    for (int c = 0; c < C; c++)
        sq = fmaf(x[c] - mean, x[c] - mean, sq);
    const float eps = 1e-5f, rstd = gb_ln_rstd(sq, C, eps);
    double xd[C], norm[C], r;
    for (int c = 0; c < C; c++)
        xd[c] = x[c];
    ref_layernorm(norm, NULL, &r, xd, NULL, NULL, 1, C, eps);
    check_that(fabs(rstd - r) < 1e-6 * r, "rstd %.9g, want %.9g", rstd, r);
    double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
    for (int c = 0; c < C; c++) {
        check_that(fabs(gb_ln_norm(x[c], mean, rstd) - norm[c]) < 1e-5,
                   "norm[%d] %.9g, want %.9g", c, gb_ln_norm(x[c], mean, rstd), norm[c]);
        dnorm_mean += w[c] * dout[c] / C;
        dnorm_norm_mean += w[c] * dout[c] * norm[c] / C;
    }
    for (int c = 0; c < C; c++) {
        double want = (w[c] * dout[c] - dnorm_mean - norm[c] * dnorm_norm_mean) * r;
        float got = gb_ln_dx(w[c] * dout[c], gb_ln_norm(x[c], mean, rstd), (float)dnorm_mean,
                             (float)dnorm_norm_mean, rstd);
        check_that(fabs(got - want) < 1e-5 + 1e-5 * fabs(want), "dx[%d] %.9g, want %.9g", c, got,
                   want);
    }
    printf("layernorm: a row of %d forward and backward within 1e-5\n", C);
}

static void test_cross_entropy(void)
{
    enum { V = 1000 };
    float x[V];
    float max = -INFINITY;
    for (int j = 0; j < V; j++) {
        x[j] = (float)(4.0 * sin(0.731 * j));
        max = x[j] > max ? x[j] : max;
    }
    const int target = 17;
    double sum = 0.0, ref_sum = 0.0;
    for (int j = 0; j < V; j++) {
        sum += gb_exp_fast(x[j] - max);
        ref_sum += exp((double)x[j] - max);
    }
    float loss = gb_ce_loss(sum, max, x[target]);
    double ref_loss = log(ref_sum) + max - x[target];
    check_that(fabs(loss - ref_loss) < 1e-6 * fabs(ref_loss),
               "loss %.9g, want %.9g", loss, ref_loss);
    float inv = gb_ce_inv_sum(sum);
    double dsum = 0.0;
    for (int j = 0; j < V; j++) {
        float d = gb_ce_dlogit(gb_exp_fast(x[j] - max), inv, j == target, 0.5f);
        double want = (exp((double)x[j] - max) / ref_sum - (j == target)) * 0.5;
        check_that(fabs(d - want) < 1e-7 + 1e-6 * fabs(want), "dlogit[%d] %.9g, want %.9g", j, d,
                   want);
        dsum += d;
    }
    check_that(fabs(dsum) < 1e-5, "dlogits sum to %.3g, not 0", dsum);
    printf("cross-entropy: a row of %d, loss %.6f\n", V, loss);

    /* gb_ce_dlogit_other: gb_ce_dlogit's bits for a column that is not the target */
    static const float es[] = {0.0f, -0.0f, 1e-45f, 0.37f, 1.0f, INFINITY, NAN};
    static const float factors[] = {0.0f, 2.5e-5f, 1.0f, INFINITY, NAN};
    int differ = 0;
    for (size_t a = 0; a < sizeof es / sizeof es[0]; a++)
        for (size_t b = 0; b < sizeof factors / sizeof factors[0]; b++)
            for (size_t c = 0; c < sizeof factors / sizeof factors[0]; c++)
                differ += gb_f32_bits(gb_ce_dlogit_other(es[a], factors[b], -factors[c])) !=
                          gb_f32_bits(gb_ce_dlogit(es[a], factors[b], 0, -factors[c]));
    check_that(differ == 0, "gb_ce_dlogit_other differs from gb_ce_dlogit at %d of its "
               "arguments", differ);
}

static void test_chunks(void)
{
    check_that(gb_chunk_count(0, 64) == 1 && gb_chunk_count(64, 64) == 1 &&
               gb_chunk_count(65, 64) == 2 && gb_chunk_count(128, 64) == 2,
               "gb_chunk_count disagrees with its definition");
    const int64_t rows = 1000, chunks = gb_chunk_count(rows, 64);
    int64_t covered = 0;
    for (int64_t c = 0; c < chunks; c++) {
        int64_t begin = gb_chunk_begin(rows, c, chunks), end = gb_chunk_begin(rows, c + 1, chunks);
        check_that(begin == covered && end > begin && end - begin <= 64,
                   "chunk %lld is [%lld, %lld)", (long long)c, (long long)begin, (long long)end);
        covered = end;
    }
    check_that(covered == rows, "chunks cover %lld of %lld rows", (long long)covered,
               (long long)rows);
}

int main(void)
{
    test_exp();
    test_gelu();
    test_layernorm();
    test_cross_entropy();
    test_chunks();
    return check_exit("common formulas");
}
