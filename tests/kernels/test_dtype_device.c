/* bf16 and f16 activations in the CPU device plugin's kernels (argv[1]: path to
 * device-cpu.so).
 *
 * Each kernel runs twice on the same values: once on 16-bit inputs (random, rounded to
 * the dtype), once in f32 on those rounded values widened, which test_device_cpu.c
 * checks against a double reference. The 16-bit kernels widen exactly, compute the f32
 * kernel's operations and round each output once, so
 *   - a 16-bit output is within one rounding of the f32 result: 2^-8 relative for bf16,
 *     2^-11 for f16 (twice the half-ulp bound), plus 1e-6 absolute for f16 subnormals;
 *   - an f32 output (LayerNorm statistics, weight and bias gradients, embedding
 *     gradients, losses) is the f32 result: 1e-6 relative, 1e-7 absolute.
 * matmul adds oneDNN's freedom to block a product differently for other operands (a
 * native 16-bit primitive, or the f32 one on widened copies with other leading
 * dimensions): 1e-5 * max(1, k / 16) more absolute, as in test_device_cpu.c. Shapes
 * include rows that are no multiple of 16 and sizes past the parallel threshold and the
 * kernels' widening blocks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/convert.h"
#include "gearbox/device.h"
#include "kernel_test.h"

static const gb_device_ops *ops;
static void *dev;

static double rtol_of(gb_dtype dtype)
{
    return dtype == GB_BF16 ? 0x1p-8 : 0x1p-11;
}

#define ATOL16 1e-6
#define ATOL32 1e-7
#define RTOL32 1e-6

/* A 16-bit buffer of n elements. */
static uint16_t *halves(size_t n)
{
    return (uint16_t *)kt_floats((n + 1) / 2);
}

static uint16_t narrow1(gb_dtype dtype, float x)
{
    return dtype == GB_BF16 ? gb_bf16_from_f32(x) : gb_f16_from_f32(x);
}

static float widen1(gb_dtype dtype, uint16_t h)
{
    return dtype == GB_BF16 ? gb_f32_from_bf16(h) : gb_f32_from_f16(h);
}

/* Random values in [lo, hi) rounded to `dtype`: *h gets the 16-bit ones, the result their
 * exact f32 values. */
static float *random_rounded(kt_rng *rng, gb_dtype dtype, size_t n, double lo, double hi,
                             uint16_t **h)
{
    float *x = kt_floats(n);
    *h = halves(n);
    kt_fill(rng, x, n, lo, hi);
    for (size_t i = 0; i < n; i++) {
        (*h)[i] = narrow1(dtype, x[i]);
        x[i] = widen1(dtype, (*h)[i]);
    }
    return x;
}

static uint16_t *copy16(const uint16_t *x, size_t n)
{
    uint16_t *y = halves(n);
    memcpy(y, x, n * sizeof(uint16_t));
    return y;
}

/* A 16-bit output against the f32 kernel's. */
static void compare16(const char *what, gb_dtype dtype, const uint16_t *got, const float *want,
                      size_t n)
{
    float *wide = kt_floats(n);
    for (size_t i = 0; i < n; i++)
        wide[i] = widen1(dtype, got[i]);
    kt_compare(what, wide, kt_widen(want, n), n, ATOL16, rtol_of(dtype));
}

/* An f32 output of a 16-bit call against the f32 kernel's. */
static void compare32(const char *what, const float *got, const float *want, size_t n)
{
    kt_compare(what, got, kt_widen(want, n), n, ATOL32, RTOL32);
}

static void expect_ok(gb_status status, const char *call)
{
    kt_expect(status == GB_OK, "%s returned status %d (%s)", call, (int)status,
              kt_last_error());
}

/* ---- matmul --------------------------------------------------------------------------- */

typedef struct matmul_case {
    int64_t m, n, k, pad;
    int trans_a, trans_b;
    float alpha, beta;
    int bias;
} matmul_case;

/* A, B of `dtype`, C of `dtype_c` (dtype or f32), against the f32 matmul. */
static void check_matmul(const matmul_case *mc, gb_dtype dtype, gb_dtype dtype_c, kt_rng *rng)
{
    const int64_t m = mc->m, n = mc->n, k = mc->k;
    const int64_t lda = (mc->trans_a ? m : k) + mc->pad, ldb = (mc->trans_b ? k : n) + mc->pad;
    const int64_t ldc = n + mc->pad;
    const size_t a_size = (size_t)((mc->trans_a ? k : m) * lda);
    const size_t b_size = (size_t)((mc->trans_b ? n : k) * ldb), c_size = (size_t)(m * ldc);
    uint16_t *a16, *b16, *c16;
    float *a = random_rounded(rng, dtype, a_size, -1, 1, &a16);
    float *b = random_rounded(rng, dtype, b_size, -1, 1, &b16);
    float *c = random_rounded(rng, dtype, c_size, -1, 1, &c16);   // C's start, rounded
    float *bias = kt_floats((size_t)n);
    kt_fill(rng, bias, (size_t)n, -1, 1);
    gb_matmul_args g = {
        .struct_size = sizeof g, .m = m, .n = n, .k = k,
        .a = a, .lda = lda, .trans_a = mc->trans_a, .dtype_a = GB_F32,
        .b = b, .ldb = ldb, .trans_b = mc->trans_b, .dtype_b = GB_F32,
        .c = kt_copy(c, c_size), .ldc = ldc, .dtype_c = GB_F32,
        .alpha = mc->alpha, .beta = mc->beta, .bias = mc->bias ? bias : NULL,
    };
    float *want = g.c;
    expect_ok(ops->matmul(dev, &g), "f32 matmul");
    g.a = a16, g.b = b16, g.dtype_a = g.dtype_b = dtype, g.dtype_c = dtype_c;
    uint16_t *got16 = copy16(c16, c_size);
    float *got32 = kt_copy(c, c_size);
    g.c = dtype_c == GB_F32 ? (void *)got32 : (void *)got16;
    expect_ok(ops->matmul(dev, &g), "16-bit matmul");

    char what[160];
    snprintf(what, sizeof what, "matmul %s,%s->%s %lldx%lldx%lld +%lld %c%c a=%g b=%g%s",
             gb_dtype_name(dtype), gb_dtype_name(dtype), gb_dtype_name(dtype_c), (long long)m,
             (long long)n, (long long)k, (long long)mc->pad, mc->trans_a ? 'T' : 'N',
             mc->trans_b ? 'T' : 'N', mc->alpha, mc->beta, mc->bias ? " bias" : "");
    const double atol = 1e-5 * (k / 16.0 > 1.0 ? k / 16.0 : 1.0);
    const double rtol = dtype_c == GB_F32 ? RTOL32 : rtol_of(dtype);
    float *got = kt_floats(c_size);
    int pad_intact = 1;
    for (size_t i = 0; i < c_size; i++) {
        got[i] = dtype_c == GB_F32 ? got32[i] : widen1(dtype_c, got16[i]);
        if ((int64_t)i % ldc >= n)
            pad_intact &= dtype_c == GB_F32 ? got32[i] == c[i] : got16[i] == c16[i];
    }
    kt_compare(what, got, kt_widen(want, c_size), c_size, atol + ATOL16, rtol);
    kt_expect(pad_intact, "%s: wrote into the padding of C", what);
}

static void test_matmul(gb_dtype dtype, kt_rng *rng)
{
    kt_section("matmul, %s operands", gb_dtype_name(dtype));
    static const matmul_case cases[] = {
        {7, 5, 3, 0, 0, 0, 1, 0, 0},     {33, 17, 65, 3, 0, 1, 1, 0, 1},
        {64, 48, 96, 0, 1, 0, 1, 1, 0},  {64, 48, 96, 5, 1, 0, 1, 1, 1},
        {50, 96, 128, 0, 0, 1, 1, 0, 1}, {128, 64, 256, 0, 1, 0, 1, 1, 0},
        {5, 1, 300, 1, 1, 1, -2, 0.25f, 1}, {9, 40, 33, 2, 0, 0, 0.5f, 0, 1},
        {3, 4, 0, 0, 0, 0, 1, 1, 1},
    };
    static const gb_dtype outputs[] = {GB_F32, GB_BF16};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int o = 0; o < 2; o++)
            check_matmul(&cases[c], dtype, outputs[o] == GB_F32 ? GB_F32 : dtype, rng);

    float x[16] = {0};
    gb_matmul_args g = {
        .struct_size = sizeof g, .m = 2, .n = 2, .k = 2, .a = x, .lda = 2, .dtype_a = dtype,
        .b = x, .ldb = 2, .dtype_b = GB_F32, .c = x, .ldc = 2, .dtype_c = GB_F32, .alpha = 1,
    };
    kt_clear_error();
    kt_expect(ops->matmul(dev, &g) == GB_ERR_UNSUPPORTED && strstr(kt_last_error(), "f32"),
              "matmul with A %s and B f32 was not refused", gb_dtype_name(dtype));
    g.dtype_b = dtype;
    g.dtype_c = dtype == GB_BF16 ? GB_F16 : GB_BF16;
    kt_expect(ops->matmul(dev, &g) == GB_ERR_UNSUPPORTED,
              "matmul with A and B %s and C %s was not refused", gb_dtype_name(dtype),
              gb_dtype_name(g.dtype_c));
}

/* ---- embeddings ----------------------------------------------------------------------- */

static void test_embed(gb_dtype dtype, int64_t B, int64_t T, int64_t C, int32_t V, kt_rng *rng)
{
    const size_t btc = (size_t)(B * T * C);
    int32_t *tokens = kt_ints((size_t)(B * T));
    for (int64_t i = 0; i < B * T; i++)
        tokens[i] = kt_below(rng, V);
    float *wte = kt_floats((size_t)V * C), *wpe = kt_floats((size_t)(T * C));
    kt_fill(rng, wte, (size_t)V * C, -1, 1);
    kt_fill(rng, wpe, (size_t)(T * C), -1, 1);
    float *want = kt_floats(btc);
    uint16_t *got = halves(btc);
    expect_ok(ops->embed_forward(dev, GB_F32, want, tokens, wte, wpe, B, T, C), "embed_forward");
    expect_ok(ops->embed_forward(dev, dtype, got, tokens, wte, wpe, B, T, C), "embed_forward");
    char what[128];
    snprintf(what, sizeof what, "embed_forward %s B=%lld T=%lld C=%lld", gb_dtype_name(dtype),
             (long long)B, (long long)T, (long long)C);
    compare16(what, dtype, got, want, btc);

    uint16_t *dout16;
    float *dout = random_rounded(rng, dtype, btc, -1, 1, &dout16);
    float *dwte = kt_floats((size_t)V * C), *dwpe = kt_floats((size_t)(T * C));
    kt_fill(rng, dwte, (size_t)V * C, -1, 1);
    kt_fill(rng, dwpe, (size_t)(T * C), -1, 1);
    float *dwte16 = kt_copy(dwte, (size_t)V * C), *dwpe16 = kt_copy(dwpe, (size_t)(T * C));
    expect_ok(ops->embed_backward(dev, GB_F32, dwte, dwpe, dout, tokens, B, T, C),
              "embed_backward");
    expect_ok(ops->embed_backward(dev, dtype, dwte16, dwpe16, dout16, tokens, B, T, C),
              "embed_backward");
    compare32("  dwte +=", dwte16, dwte, (size_t)V * C);
    compare32("  dwpe +=", dwpe16, dwpe, (size_t)(T * C));
}

/* ---- LayerNorm ------------------------------------------------------------------------ */

static void test_layernorm(gb_dtype dtype, int64_t N, int64_t C, int with_bias, kt_rng *rng)
{
    const size_t nc = (size_t)(N * C);
    uint16_t *x16, *dout16, *dx16;
    float *x = random_rounded(rng, dtype, nc, -2, 3, &x16);
    float *w = kt_floats((size_t)C), *b = kt_floats((size_t)C);
    kt_fill(rng, w, (size_t)C, 0.5, 1.5);
    kt_fill(rng, b, (size_t)C, -0.5, 0.5);
    float *out = kt_floats(nc), *mean = kt_floats((size_t)N), *rstd = kt_floats((size_t)N);
    float *mean16 = kt_floats((size_t)N), *rstd16 = kt_floats((size_t)N);
    uint16_t *out16 = halves(nc);
    const float *bias = with_bias ? b : NULL;
    expect_ok(ops->layernorm_forward(dev, GB_F32, out, mean, rstd, x, w, bias, N, C, 1e-5f),
              "layernorm_forward");
    expect_ok(ops->layernorm_forward(dev, dtype, out16, mean16, rstd16, x16, w, bias, N, C,
                                     1e-5f), "layernorm_forward");
    char what[128];
    snprintf(what, sizeof what, "layernorm_forward %s N=%lld C=%lld%s", gb_dtype_name(dtype),
             (long long)N, (long long)C, with_bias ? " bias" : "");
    compare16(what, dtype, out16, out, nc);
    compare32("  mean", mean16, mean, (size_t)N);
    compare32("  rstd", rstd16, rstd, (size_t)N);

    float *dout = random_rounded(rng, dtype, nc, -1, 1, &dout16);
    float *dx = random_rounded(rng, dtype, nc, -1, 1, &dx16);
    float *dw = kt_floats((size_t)C), *db = kt_floats((size_t)C);
    kt_fill(rng, dw, (size_t)C, -1, 1);
    kt_fill(rng, db, (size_t)C, -1, 1);
    float *dw16 = kt_copy(dw, (size_t)C), *db16 = kt_copy(db, (size_t)C);
    expect_ok(ops->layernorm_backward(dev, GB_F32, dx, dw, with_bias ? db : NULL, dout, x, w,
                                      mean, rstd, N, C), "layernorm_backward");
    expect_ok(ops->layernorm_backward(dev, dtype, dx16, dw16, with_bias ? db16 : NULL, dout16,
                                      x16, w, mean, rstd, N, C), "layernorm_backward");
    compare16("  dx +=", dtype, dx16, dx, nc);
    compare32("  dweight +=", dw16, dw, (size_t)C);
    compare32("  dbias +=", db16, db, (size_t)C);
}

/* ---- pointwise and bias --------------------------------------------------------------- */

static void test_pointwise(gb_dtype dtype, int64_t n, kt_rng *rng)
{
    uint16_t *x16, *y16;
    float *x = random_rounded(rng, dtype, (size_t)n, -5, 5, &x16);
    float *y = random_rounded(rng, dtype, (size_t)n, -5, 5, &y16);
    float *out = kt_floats((size_t)n);
    uint16_t *out16 = halves((size_t)n);
    char what[128];

    expect_ok(ops->gelu_forward(dev, GB_F32, out, x, n), "gelu_forward");
    expect_ok(ops->gelu_forward(dev, dtype, out16, x16, n), "gelu_forward");
    snprintf(what, sizeof what, "gelu_forward %s n=%lld", gb_dtype_name(dtype), (long long)n);
    compare16(what, dtype, out16, out, (size_t)n);

    // dx aliases dout, as in the model
    float *d = kt_copy(y, (size_t)n);
    uint16_t *d16 = copy16(y16, (size_t)n);
    expect_ok(ops->gelu_backward(dev, GB_F32, d, x, d, n), "gelu_backward");
    expect_ok(ops->gelu_backward(dev, dtype, d16, x16, d16, n), "gelu_backward");
    compare16("  gelu_backward, dx aliasing dout", dtype, d16, d, (size_t)n);

    expect_ok(ops->gelu_tanh_forward(dev, GB_F32, out, x, n), "gelu_tanh_forward");
    expect_ok(ops->gelu_tanh_forward(dev, dtype, out16, x16, n), "gelu_tanh_forward");
    compare16("  gelu_tanh_forward", dtype, out16, out, (size_t)n);
    memcpy(d, y, (size_t)n * sizeof *d);
    memcpy(d16, y16, (size_t)n * sizeof *d16);
    expect_ok(ops->gelu_tanh_backward(dev, GB_F32, d, x, d, n), "gelu_tanh_backward");
    expect_ok(ops->gelu_tanh_backward(dev, dtype, d16, x16, d16, n), "gelu_tanh_backward");
    compare16("  gelu_tanh_backward, dx aliasing dout", dtype, d16, d, (size_t)n);

    expect_ok(ops->add(dev, GB_F32, out, x, y, n), "add");
    expect_ok(ops->add(dev, dtype, out16, x16, y16, n), "add");
    compare16("  add", dtype, out16, out, (size_t)n);
    expect_ok(ops->add(dev, dtype, x16, x16, y16, n), "add");
    compare16("  add, out aliasing a", dtype, x16, out, (size_t)n);
}

static void test_bias_backward(gb_dtype dtype, int64_t N, int64_t C, kt_rng *rng)
{
    uint16_t *dout16;
    float *dout = random_rounded(rng, dtype, (size_t)(N * C), -1, 1, &dout16);
    float *db = kt_floats((size_t)C);
    kt_fill(rng, db, (size_t)C, -1, 1);
    float *db16 = kt_copy(db, (size_t)C);
    expect_ok(ops->bias_backward(dev, GB_F32, db, dout, N, C), "bias_backward");
    expect_ok(ops->bias_backward(dev, dtype, db16, dout16, N, C), "bias_backward");
    char what[128];
    snprintf(what, sizeof what, "bias_backward %s N=%lld C=%lld", gb_dtype_name(dtype),
             (long long)N, (long long)C);
    compare32(what, db16, db, (size_t)C);
}

/* ---- cross-entropy -------------------------------------------------------------------- */

static void test_cross_entropy(gb_dtype dtype, int64_t N, int64_t V, kt_rng *rng)
{
    const size_t nv = (size_t)(N * V);
    uint16_t *logits16;
    float *logits = random_rounded(rng, dtype, nv, -5, 5, &logits16);
    int32_t *targets = kt_ints((size_t)N);
    for (int64_t i = 0; i < N; i++)
        targets[i] = kt_below(rng, (int32_t)V);
    float *losses = kt_floats((size_t)N), *losses16 = kt_floats((size_t)N);
    float *d = kt_floats(nv);
    uint16_t *d16 = halves(nv);
    const float dloss = 1.0f / (float)N;
    char what[128];
    snprintf(what, sizeof what, "cross_entropy %s N=%lld V=%lld", gb_dtype_name(dtype),
             (long long)N, (long long)V);
    expect_ok(ops->cross_entropy(dev, GB_F32, losses, NULL, logits, targets, N, V, dloss),
              "cross_entropy");
    expect_ok(ops->cross_entropy(dev, dtype, losses16, NULL, logits16, targets, N, V, dloss),
              "cross_entropy");
    compare32(what, losses16, losses, (size_t)N);
    expect_ok(ops->cross_entropy(dev, GB_F32, losses, d, logits, targets, N, V, dloss),
              "cross_entropy");
    expect_ok(ops->cross_entropy(dev, dtype, losses16, d16, logits16, targets, N, V, dloss),
              "cross_entropy");
    compare32("  losses with dlogits", losses16, losses, (size_t)N);
    compare16("  dlogits", dtype, d16, d, nv);
    expect_ok(ops->cross_entropy(dev, dtype, losses16, logits16, logits16, targets, N, V, dloss),
              "cross_entropy");
    kt_expect(memcmp(logits16, d16, nv * sizeof(uint16_t)) == 0,
              "%s: dlogits aliasing logits differs from a separate dlogits", what);
}

static void test_refusals(void)
{
    kt_section("refusals: activations that are no float type");
    float f[8] = {0};
    kt_clear_error();
    kt_expect(ops->add(dev, GB_I32, f, f, f, 4) == GB_ERR_UNSUPPORTED &&
              strstr(kt_last_error(), "i32"), "add of i32 activations was not refused");
}

int main(int argc, char **argv)
{
    const gb_plugin_desc *desc =
        kt_load_arg(argc, argv, "device-cpu.so", GB_KIND_DEVICE, "cpu", sizeof(gb_device_ops));
    ops = desc->ops;
    gb_host host = kt_host(2);
    dev = kt_cpu_device(ops, &host);
    static const gb_dtype dtypes[] = {GB_BF16, GB_F16};
    kt_rng rng = kt_seed(16);
    for (int i = 0; i < 2; i++) {
        const gb_dtype dtype = dtypes[i];
        test_matmul(dtype, &rng);
        kt_section("embeddings, LayerNorm, pointwise, bias, cross-entropy: %s",
                   gb_dtype_name(dtype));
        test_embed(dtype, 2, 5, 40, 11, &rng);
        test_embed(dtype, 4, 64, 96, 50, &rng);      // parallel path
        test_layernorm(dtype, 1, 7, 1, &rng);
        test_layernorm(dtype, 37, 100, 0, &rng);
        test_layernorm(dtype, 64, 768, 1, &rng);     // parallel path, several chunks
        test_pointwise(dtype, 1000, &rng);
        test_pointwise(dtype, 70001, &rng);          // parallel, several widening blocks
        test_bias_backward(dtype, 3, 7, &rng);
        test_bias_backward(dtype, 300, 200, &rng);   // parallel path, several chunks
        test_cross_entropy(dtype, 3, 65, &rng);
        test_cross_entropy(dtype, 4, 50257, &rng);   // GPT-2 vocabulary, parallel path
    }
    test_refusals();
    ops->destroy(dev);
    return kt_exit_code();
}
