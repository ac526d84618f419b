/* Kernel test of the CPU device plugin (argv[1]: path to device-cpu.so).
 *
 * Every kernel is compared with a naive double-precision reference written here, on
 * shapes that include the awkward ones (one row, one column, 7 columns, sizes that are
 * no multiple of 16, padded leading dimensions). Accumulating outputs start from random
 * values so "+=" is checked too. LayerNorm's backward is also checked against central
 * finite differences of the double forward; the reductions are run twice and must give
 * the same bits. Tolerance: 1e-5 abs + 1e-4 rel, except matmul, whose absolute part
 * grows with the reduction length: 1e-5 * max(1, k / 16). An f32 dot product of k terms
 * in [-1, 1] errs by up to about k^2 / 4 * 2^-24, and oneDNN's blocking (which differs
 * between CPUs) decides how close to that bound it gets; a wrong result is off by O(1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dropout.h"
#include "gearbox/device.h"
#include "kernel_test.h"
#include "ref_layernorm.h"

#define ATOL 1e-5
#define RTOL 1e-4

static const gb_device_ops *ops;
static void *dev;

static void expect_status(gb_status got, gb_status want, const char *call)
{
    kt_expect(got == want, "%s returned status %d, want %d (%s)", call, (int)got, (int)want,
              kt_last_error());
}

/* ---- memory, context, info ----------------------------------------------------------- */

static void test_memory(void)
{
    kt_section("memory, context, info");
    void *a = NULL, *b = NULL, *empty = NULL;
    expect_status(ops->alloc(dev, 1000, &a), GB_OK, "alloc(1000)");
    expect_status(ops->alloc(dev, 1000, &b), GB_OK, "alloc(1000)");
    expect_status(ops->alloc(dev, 0, &empty), GB_OK, "alloc(0)");
    kt_expect(a && b && empty, "alloc returned NULL");
    kt_expect(((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0, "alloc not 64-byte aligned");
    for (int i = 0; i < 1000; i++)
        ((unsigned char *)a)[i] = (unsigned char)i;
    static const gb_copy_kind kinds[] = {GB_COPY_HOST_TO_DEVICE, GB_COPY_DEVICE_TO_HOST,
                                         GB_COPY_DEVICE_TO_DEVICE};
    for (int k = 0; k < 3; k++) {
        memset(b, 0xff, 1000);
        expect_status(ops->copy(dev, b, a, 1000, kinds[k]), GB_OK, "copy");
        kt_expect(memcmp(a, b, 1000) == 0, "copy kind %d did not copy", (int)kinds[k]);
    }
    expect_status(ops->copy(dev, b, a, 1000, (gb_copy_kind)7), GB_ERR_INVALID_ARG,
                  "copy with kind 7");
    expect_status(ops->memset_zero(dev, b, 999), GB_OK, "memset_zero");
    int zero = 1;
    for (int i = 0; i < 999; i++)
        zero &= ((unsigned char *)b)[i] == 0;
    kt_expect(zero && ((unsigned char *)b)[999] == (unsigned char)999,
              "memset_zero did not clear exactly 999 bytes");
    expect_status(ops->sync(dev), GB_OK, "sync");
    ops->free(dev, a);
    ops->free(dev, b);
    ops->free(dev, empty);

    gb_device_ctx ctx = {.struct_size = sizeof ctx};
    expect_status(ops->context(dev, &ctx), GB_OK, "context");
    kt_expect(ctx.struct_size == sizeof ctx && ctx.device == GB_DEVICE_CPU && ctx.ordinal == 0 &&
              ctx.stream == NULL, "context is not (cpu, 0, NULL stream) or struct_size changed");
    gb_device_info info = {.struct_size = sizeof info};
    expect_status(ops->info(dev, &info), GB_OK, "info");
    printf("  info: \"%s\", %.1f GiB\n", info.name, info.memory_bytes / 1073741824.0);
    kt_expect(info.struct_size == sizeof info, "info struct_size changed to %zu (the caller "
              "owns it)", info.struct_size);
    kt_expect(strstr(info.name, "2 threads") != NULL, "info name lacks the thread count");
    kt_expect(info.memory_bytes > 0, "info reports no memory");
}

/* ---- matmul -------------------------------------------------------------------------- */

typedef struct matmul_case {
    int64_t m, n, k, pad;   /* pad: extra elements per stored row of A, B and C */
} matmul_case;

static void ref_matmul(double *want, const gb_matmul_args *g, const float *c_before)
{
    const float *A = g->a, *B = g->b;
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < g->n; j++) {
            double acc = 0.0;
            for (int64_t p = 0; p < g->k; p++) {
                double a = g->trans_a ? A[p * g->lda + i] : A[i * g->lda + p];
                double b = g->trans_b ? B[j * g->ldb + p] : B[p * g->ldb + j];
                acc += a * b;
            }
            double v = g->alpha * acc;
            if (g->beta != 0.0f)
                v += g->beta * (double)c_before[i * g->ldc + j];
            if (g->bias)
                v += g->bias[j];
            want[i * g->n + j] = v;
        }
}

/* Runs one matmul and compares C (m, n) with the reference; the padding of C must be
 * left alone. */
static void check_matmul(const matmul_case *mc, int trans_a, int trans_b, float alpha,
                         float beta, int with_bias, kt_rng *rng)
{
    int64_t m = mc->m, n = mc->n, k = mc->k;
    int64_t lda = (trans_a ? m : k) + mc->pad, ldb = (trans_b ? k : n) + mc->pad;
    int64_t ldc = n + mc->pad;
    size_t a_size = (size_t)(trans_a ? k : m) * lda, b_size = (size_t)(trans_b ? n : k) * ldb;
    size_t c_size = (size_t)m * ldc;
    float *A = kt_floats(a_size), *B = kt_floats(b_size), *C = kt_floats(c_size);
    float *bias = kt_floats(n);
    kt_fill(rng, A, a_size, -1, 1);
    kt_fill(rng, B, b_size, -1, 1);
    kt_fill(rng, C, c_size, -1, 1);
    kt_fill(rng, bias, n, -1, 1);
    float *c_before = kt_copy(C, c_size);
    gb_matmul_args g = {
        .struct_size = sizeof g, .m = m, .n = n, .k = k,
        .a = A, .lda = lda, .trans_a = trans_a, .dtype_a = GB_F32,
        .b = B, .ldb = ldb, .trans_b = trans_b, .dtype_b = GB_F32,
        .c = C, .ldc = ldc, .dtype_c = GB_F32,
        .alpha = alpha, .beta = beta, .bias = with_bias ? bias : NULL,
    };
    double *want = kt_doubles((size_t)m * n);
    ref_matmul(want, &g, c_before);
    expect_status(ops->matmul(dev, &g), GB_OK, "matmul");
    float *got = kt_floats((size_t)m * n);
    int pad_intact = 1;
    for (int64_t i = 0; i < m; i++) {
        memcpy(got + i * n, C + i * ldc, (size_t)n * sizeof(float));
        pad_intact &= memcmp(C + i * ldc + n, c_before + i * ldc + n,
                             (size_t)mc->pad * sizeof(float)) == 0;
    }
    char what[128];
    snprintf(what, sizeof what, "matmul %lldx%lldx%lld +%lld %c%c a=%g b=%g%s", (long long)m,
             (long long)n, (long long)k, (long long)mc->pad, trans_a ? 'T' : 'N',
             trans_b ? 'T' : 'N', alpha, beta, with_bias ? " bias" : "");
    double atol = ATOL * (k / 16.0 > 1.0 ? k / 16.0 : 1.0);
    kt_compare(what, got, want, (size_t)m * n, atol, RTOL);
    kt_expect(pad_intact, "%s: wrote into the padding of C", what);

    // Run again on the cached primitive: same inputs, same bits.
    float *first = kt_copy(C, c_size);
    memcpy(C, c_before, c_size * sizeof(float));
    expect_status(ops->matmul(dev, &g), GB_OK, "matmul (cached)");
    kt_expect(memcmp(first, C, c_size * sizeof(float)) == 0, "%s: second run differs", what);
}

static void test_matmul(void)
{
    kt_section("matmul against a double reference, all transposes");
    static const matmul_case cases[] = {
        {1, 1, 1, 0}, {7, 5, 3, 0}, {1, 50, 7, 3}, {33, 17, 65, 0}, {64, 48, 96, 5},
        {5, 1, 300, 1}, {3, 4, 0, 0},
    };
    static const struct { float alpha, beta; int bias; } scalings[] = {
        {1, 0, 0}, {1, 0, 1}, {0.5f, 0, 1}, {1, 1, 0}, {-2, 0.25f, 1},
    };
    kt_rng rng = kt_seed(1);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 4; t++)
            for (size_t s = 0; s < sizeof scalings / sizeof scalings[0]; s++)
                check_matmul(&cases[c], t & 1, t >> 1, scalings[s].alpha, scalings[s].beta,
                             scalings[s].bias, &rng);
    // The cache holds fewer primitives than the cases above: this one was evicted.
    check_matmul(&cases[3], 0, 1, 1, 0, 1, &rng);

    kt_section("matmul refusals");
    float x[16] = {0};
    gb_matmul_args g = {
        .struct_size = sizeof g, .m = 2, .n = 2, .k = 4,
        .a = x, .lda = 3, .dtype_a = GB_F32, .b = x, .ldb = 2, .dtype_b = GB_F32,
        .c = x, .ldc = 2, .dtype_c = GB_F32, .alpha = 1,
    };
    expect_status(ops->matmul(dev, &g), GB_ERR_INVALID_ARG, "matmul with lda < k");
    g.lda = 4;
    g.dtype_b = GB_BF16;
    kt_clear_error();
    expect_status(ops->matmul(dev, &g), GB_ERR_UNSUPPORTED, "matmul with bf16 B");
    kt_expect(strstr(kt_last_error(), "bf16") != NULL, "bf16 refusal does not name the dtype");
}

/* ---- embeddings ---------------------------------------------------------------------- */

static void test_embed_case(int64_t B, int64_t T, int64_t C, int32_t V, kt_rng *rng)
{
    int64_t T_max = T + 2;
    int32_t *tokens = kt_ints((size_t)(B * T));
    for (int64_t i = 0; i < B * T; i++)
        tokens[i] = kt_below(rng, V);
    float *wte = kt_floats((size_t)V * C), *wpe = kt_floats((size_t)T_max * C);
    kt_fill(rng, wte, (size_t)V * C, -1, 1);
    kt_fill(rng, wpe, (size_t)T_max * C, -1, 1);
    size_t nout = (size_t)(B * T * C);
    float *out = kt_floats(nout);
    double *want = kt_doubles(nout);
    for (int64_t bt = 0; bt < B * T; bt++)
        for (int64_t c = 0; c < C; c++)
            want[bt * C + c] = (double)wte[tokens[bt] * C + c] + wpe[(bt % T) * C + c];
    char what[128];
    snprintf(what, sizeof what, "embed_forward B=%lld T=%lld C=%lld V=%d", (long long)B,
             (long long)T, (long long)C, V);
    expect_status(ops->embed_forward(dev, GB_F32, out, tokens, wte, wpe, B, T, C), GB_OK,
                  "embed_forward");
    kt_compare(what, out, want, nout, ATOL, RTOL);

    float *dout = kt_floats(nout);
    kt_fill(rng, dout, nout, -1, 1);
    float *dwte = kt_floats((size_t)V * C), *dwpe = kt_floats((size_t)T_max * C);
    kt_fill(rng, dwte, (size_t)V * C, -1, 1);
    kt_fill(rng, dwpe, (size_t)T_max * C, -1, 1);
    double *want_dwte = kt_widen(dwte, (size_t)V * C);
    double *want_dwpe = kt_widen(dwpe, (size_t)T_max * C);
    for (int64_t bt = 0; bt < B * T; bt++)
        for (int64_t c = 0; c < C; c++) {
            want_dwte[tokens[bt] * C + c] += dout[bt * C + c];
            want_dwpe[(bt % T) * C + c] += dout[bt * C + c];
        }
    float *dwte0 = kt_copy(dwte, (size_t)V * C), *dwpe0 = kt_copy(dwpe, (size_t)T_max * C);
    expect_status(ops->embed_backward(dev, GB_F32, dwte, dwpe, dout, tokens, B, T, C), GB_OK,
                  "embed_backward");
    snprintf(what, sizeof what, "embed_backward dwte (+=) B=%lld T=%lld C=%lld", (long long)B,
             (long long)T, (long long)C);
    kt_compare(what, dwte, want_dwte, (size_t)V * C, ATOL, RTOL);
    snprintf(what, sizeof what, "embed_backward dwpe (+=) B=%lld T=%lld C=%lld", (long long)B,
             (long long)T, (long long)C);
    kt_compare(what, dwpe, want_dwpe, (size_t)T_max * C, ATOL, RTOL);

    ops->embed_backward(dev, GB_F32, dwte0, dwpe0, dout, tokens, B, T, C);
    kt_same_bits("  embed_backward dwte, run twice", dwte, dwte0, (size_t)V * C);
    kt_same_bits("  embed_backward dwpe, run twice", dwpe, dwpe0, (size_t)T_max * C);
}

static void test_embed(void)
{
    kt_section("embed_forward / embed_backward");
    kt_rng rng = kt_seed(2);
    test_embed_case(1, 1, 1, 1, &rng);
    test_embed_case(2, 3, 7, 3, &rng);
    test_embed_case(3, 5, 33, 4, &rng);
    test_embed_case(4, 64, 96, 11, &rng);   // parallel path; tokens repeat heavily
}

/* ---- layernorm ----------------------------------------------------------------------- */

/* The analytic gradient (llm.c, PyTorch): dx = rstd (dnorm - mean(dnorm) - norm *
 * mean(dnorm * norm)), dnorm = w * dout; dw = sum dout * norm; db = sum dout. Adds to
 * dx, dw, db. */
static void ref_layernorm_backward(double *dx, double *dw, double *db, const double *dout,
                                   const double *x, const double *w, int64_t N, int64_t C,
                                   double eps)
{
    double *out = kt_doubles((size_t)(N * C)), *mean = kt_doubles((size_t)N);
    double *rstd = kt_doubles((size_t)N);
    ref_layernorm(out, mean, rstd, x, w, NULL, N, C, eps);
    for (int64_t n = 0; n < N; n++) {
        double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
        for (int64_t c = 0; c < C; c++) {
            double norm = (x[n * C + c] - mean[n]) * rstd[n];
            dnorm_mean += w[c] * dout[n * C + c];
            dnorm_norm_mean += w[c] * dout[n * C + c] * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int64_t c = 0; c < C; c++) {
            double norm = (x[n * C + c] - mean[n]) * rstd[n];
            double dnorm = w[c] * dout[n * C + c];
            dx[n * C + c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[n];
            dw[c] += dout[n * C + c] * norm;
            db[c] += dout[n * C + c];
        }
    }
}

typedef struct ln_data {
    int64_t N, C;
    float *x, *w, *b, *out, *mean, *rstd, *dout, *dx, *dw, *db;
} ln_data;

static ln_data ln_make(int64_t N, int64_t C, kt_rng *rng)
{
    size_t nc = (size_t)(N * C);
    ln_data d = {
        .N = N, .C = C, .x = kt_floats(nc), .w = kt_floats(C), .b = kt_floats(C),
        .out = kt_floats(nc), .mean = kt_floats(N), .rstd = kt_floats(N),
        .dout = kt_floats(nc), .dx = kt_floats(nc), .dw = kt_floats(C), .db = kt_floats(C),
    };
    kt_fill(rng, d.x, nc, 2, 4);   // an offset mean tests the variance's stability
    kt_fill(rng, d.w, C, 0.5, 1.5);
    kt_fill(rng, d.b, C, -1, 1);
    kt_fill(rng, d.dout, nc, -1, 1);
    kt_fill(rng, d.dx, nc, -1, 1);
    kt_fill(rng, d.dw, C, -1, 1);
    kt_fill(rng, d.db, C, -1, 1);
    return d;
}

static void test_layernorm_case(int64_t N, int64_t C, int with_bias, kt_rng *rng)
{
    const float eps = 1e-5f;
    ln_data d = ln_make(N, C, rng);
    size_t nc = (size_t)(N * C);
    double *want = kt_doubles(nc), *want_mean = kt_doubles(N), *want_rstd = kt_doubles(N);
    double *xd = kt_widen(d.x, nc), *wd = kt_widen(d.w, C), *bd = kt_widen(d.b, C);
    ref_layernorm(want, want_mean, want_rstd, xd, wd, with_bias ? bd : NULL, N, C, eps);
    expect_status(ops->layernorm_forward(dev, GB_F32, d.out, d.mean, d.rstd, d.x, d.w,
                                         with_bias ? d.b : NULL, N, C, eps), GB_OK,
                  "layernorm_forward");
    char what[128];
    snprintf(what, sizeof what, "layernorm_forward out N=%lld C=%lld%s", (long long)N,
             (long long)C, with_bias ? "" : " no bias");
    kt_compare(what, d.out, want, nc, ATOL, RTOL);
    kt_compare("  mean", d.mean, want_mean, N, ATOL, RTOL);
    kt_compare("  rstd", d.rstd, want_rstd, N, ATOL, RTOL);

    double *want_dx = kt_widen(d.dx, nc), *want_dw = kt_widen(d.dw, C);
    double *want_db = kt_widen(d.db, C);
    ref_layernorm_backward(want_dx, want_dw, want_db, kt_widen(d.dout, nc), xd, wd, N, C, eps);
    float *dx0 = kt_copy(d.dx, nc), *dw0 = kt_copy(d.dw, C), *db0 = kt_copy(d.db, C);
    expect_status(ops->layernorm_backward(dev, GB_F32, d.dx, d.dw, with_bias ? d.db : NULL,
                                          d.dout, d.x, d.w, d.mean, d.rstd, N, C), GB_OK,
                  "layernorm_backward");
    snprintf(what, sizeof what, "layernorm_backward dx (+=) N=%lld C=%lld", (long long)N,
             (long long)C);
    kt_compare(what, d.dx, want_dx, nc, ATOL, RTOL);
    kt_compare("  dweight (+=)", d.dw, want_dw, C, ATOL, RTOL);
    if (with_bias)
        kt_compare("  dbias (+=)", d.db, want_db, C, ATOL, RTOL);
    else
        kt_same_bits("  dbias untouched when NULL", d.db, db0, C);

    ops->layernorm_backward(dev, GB_F32, dx0, dw0, with_bias ? db0 : NULL, d.dout, d.x, d.w,
                            d.mean, d.rstd, N, C);
    kt_same_bits("  layernorm_backward dx, run twice", d.dx, dx0, nc);
    kt_same_bits("  layernorm_backward dweight, run twice", d.dw, dw0, C);
    kt_same_bits("  layernorm_backward dbias, run twice", d.db, db0, C);
}

/* L = sum g * layernorm(x), with g = dout: the plugin's dx, dweight and dbias (starting
 * from zero) must match central differences of L computed in double. */
static void test_layernorm_finite_differences(int64_t N, int64_t C, kt_rng *rng)
{
    const double eps = 1e-5, h = 1e-4;
    ln_data d = ln_make(N, C, rng);
    size_t nc = (size_t)(N * C);
    memset(d.dx, 0, nc * sizeof(float));
    memset(d.dw, 0, C * sizeof(float));
    memset(d.db, 0, C * sizeof(float));
    ops->layernorm_forward(dev, GB_F32, d.out, d.mean, d.rstd, d.x, d.w, d.b, N, C, (float)eps);
    expect_status(ops->layernorm_backward(dev, GB_F32, d.dx, d.dw, d.db, d.dout, d.x, d.w,
                                          d.mean, d.rstd, N, C), GB_OK, "layernorm_backward");

    double *x = kt_widen(d.x, nc), *w = kt_widen(d.w, C), *b = kt_widen(d.b, C);
    double *g = kt_widen(d.dout, nc), *out = kt_doubles(nc);
    double *num_dx = kt_doubles(nc), *num_dw = kt_doubles(C), *num_db = kt_doubles(C);
    double *params[3] = {x, w, b}, *numeric[3] = {num_dx, num_dw, num_db};
    size_t sizes[3] = {nc, (size_t)C, (size_t)C};
    for (int p = 0; p < 3; p++)
        for (size_t i = 0; i < sizes[p]; i++) {
            double saved = params[p][i], loss[2];
            for (int side = 0; side < 2; side++) {
                params[p][i] = saved + (side ? -h : h);
                ref_layernorm(out, NULL, NULL, x, w, b, N, C, eps);
                loss[side] = 0.0;
                for (size_t j = 0; j < nc; j++)
                    loss[side] += g[j] * out[j];
            }
            params[p][i] = saved;
            numeric[p][i] = (loss[0] - loss[1]) / (2 * h);
        }
    char what[128];
    snprintf(what, sizeof what, "layernorm dx vs finite differences N=%lld C=%lld",
             (long long)N, (long long)C);
    kt_compare(what, d.dx, num_dx, nc, ATOL, RTOL);
    kt_compare("  dweight vs finite differences", d.dw, num_dw, C, ATOL, RTOL);
    kt_compare("  dbias vs finite differences", d.db, num_db, C, ATOL, RTOL);
}

static void test_layernorm(void)
{
    kt_section("layernorm_forward / layernorm_backward");
    static const struct {
        int64_t N, C;
        int with_bias;
    } shapes[] = {{1, 1, 1}, {3, 7, 1}, {5, 33, 0}, {17, 64, 1},
                  {64, 768, 1}};   // the last: parallel path, GPT-2 small width
    kt_rng rng = kt_seed(3);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        test_layernorm_case(shapes[i].N, shapes[i].C, shapes[i].with_bias, &rng);
    test_layernorm_finite_differences(3, 7, &rng);
    test_layernorm_finite_differences(4, 33, &rng);
}

/* ---- gelu, add ------------------------------------------------------------------------ */

/* 0.5 x (1 + erf(x / sqrt 2)), written with erfc so the negative tail does not cancel
 * to zero in double before the plugin's f32 result does. */
static double ref_gelu(double x)
{
    return 0.5 * x * erfc(-x / sqrt(2.0));
}

static double ref_gelu_grad(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

/* One GELU form: its two kernels and the double-precision formulas they must follow. */
typedef struct gelu_form {
    const char *name;
    gb_status (*forward)(void *, gb_dtype, void *, const void *, int64_t);
    gb_status (*backward)(void *, gb_dtype, void *, const void *, const void *, int64_t);
    double (*ref)(double);
    double (*ref_grad)(double);
} gelu_form;

static void test_gelu_case(const gelu_form *form, int64_t n, kt_rng *rng)
{
    static const float specials[] = {0.0f, -0.0f, 1e-8f, -1e-8f, 0.5f, -0.5f, 3.0f, -3.0f,
                                     10.0f, -10.0f, 20.0f, -20.0f};
    float *x = kt_floats(n), *out = kt_floats(n), *dout = kt_floats(n);
    kt_fill(rng, x, n, -6, 6);
    kt_fill(rng, dout, n, -1, 1);
    for (int64_t i = 0; i < n && i < (int64_t)(sizeof specials / sizeof specials[0]); i++)
        x[i] = specials[i];
    double *want = kt_doubles(n), *want_dx = kt_doubles(n);
    for (int64_t i = 0; i < n; i++) {
        want[i] = form->ref(x[i]);
        want_dx[i] = dout[i] * form->ref_grad(x[i]);
    }
    char what[128];
    snprintf(what, sizeof what, "%s forward n=%lld", form->name, (long long)n);
    expect_status(form->forward(dev, GB_F32, out, x, n), GB_OK, what);
    kt_compare(what, out, want, n, ATOL, RTOL);
    float *dx = kt_floats(n);
    snprintf(what, sizeof what, "%s backward n=%lld", form->name, (long long)n);
    expect_status(form->backward(dev, GB_F32, dx, x, dout, n), GB_OK, what);
    kt_compare(what, dx, want_dx, n, ATOL, RTOL);
    form->backward(dev, GB_F32, dout, x, dout, n);   // dx aliasing dout
    kt_same_bits("  backward with dx aliasing dout", dout, dx, n);
}

static void test_add_case(int64_t n, kt_rng *rng)
{
    float *a = kt_floats(n), *b = kt_floats(n), *out = kt_floats(n);
    kt_fill(rng, a, n, -1, 1);
    kt_fill(rng, b, n, -1, 1);
    double *want = kt_doubles(n);
    for (int64_t i = 0; i < n; i++)
        want[i] = (double)a[i] + b[i];
    char what[128];
    snprintf(what, sizeof what, "add n=%lld", (long long)n);
    expect_status(ops->add(dev, GB_F32, out, a, b, n), GB_OK, "add");
    kt_compare(what, out, want, n, ATOL, RTOL);
    ops->add(dev, GB_F32, a, a, b, n);   // out aliasing a
    kt_same_bits("  add with out aliasing a", a, out, n);
}

static void test_pointwise(void)
{
    kt_section("gelu_forward / gelu_backward (exact erf form), gelu_tanh_*, add");
    const gelu_form forms[] = {
        {"gelu (erf)", ops->gelu_forward, ops->gelu_backward, ref_gelu, ref_gelu_grad},
        {"gelu_tanh", ops->gelu_tanh_forward, ops->gelu_tanh_backward, kt_gelu_tanh,
         kt_gelu_tanh_grad},
    };
    kt_rng rng = kt_seed(4);
    static const int64_t sizes[] = {1, 7, 1000, 40003};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++)
            test_gelu_case(&forms[f], sizes[i], &rng);
        test_add_case(sizes[i], &rng);
    }
}

/* ---- dropout (ABI 1.7) --------------------------------------------------------------- */

/* Elements of x where dropout's output is 0 and x is not, counted; -1 when an output is
 * neither 0 nor x / (1 - p) rounded to f32. */
static int64_t dropped_count(const float *x, const float *out, int64_t n, float p)
{
    const float scale = 1.0f / (1.0f - p);
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; i++) {
        if (out[i] == 0.0f && x[i] != 0.0f)
            dropped++;
        else if (out[i] != x[i] * scale)
            return -1;
    }
    return dropped;
}

static void test_dropout_case(int64_t n, float p, kt_rng *rng)
{
    float *x = kt_floats(n), *y = kt_floats(n), *out = kt_floats(n), *again = kt_floats(n);
    float *dy = kt_floats(n), *want = kt_floats(n);
    kt_fill(rng, x, n, 0.5, 1.5);   // never 0, so a dropped element shows
    kt_fill(rng, y, n, 0.5, 1.5);
    const uint64_t seed = 0x1234abcdull;
    char what[128];
    snprintf(what, sizeof what, "dropout p=%g n=%lld", (double)p, (long long)n);
    expect_status(ops->dropout(dev, GB_F32, out, x, n, p, seed), GB_OK, what);
    int64_t dropped = dropped_count(x, out, n, p);
    /* the drop count is binomial(n, p): within 5 standard deviations */
    double sd = sqrt((double)n * p * (1.0 - p)), expected = (double)n * p;
    kt_expect(dropped >= 0 && fabs((double)dropped - expected) <= 5.0 * sd + 1e-9,
              "%s: %lld dropped (-1: an output neither 0 nor x / (1 - p)), expected %.0f +- %.0f",
              what, (long long)dropped, expected, 5.0 * sd);
    for (int64_t i = 0; i < n; i++)
        want[i] = gb_dropout_apply(x[i], seed, (uint64_t)i, gb_dropout_threshold(p),
                                   gb_dropout_scale(p));
    kt_same_bits("  the mask of kernels/common/dropout.h", out, want, n);
    memcpy(again, x, (size_t)n * sizeof *x);
    ops->dropout(dev, GB_F32, again, again, n, p, seed);   // in place, as the core calls it
    kt_same_bits("  in place, the same seed: the same bits", again, out, n);
    /* backward regenerates the mask: the gradient is dropped where the input was */
    ops->dropout(dev, GB_F32, dy, y, n, p, seed);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++)
        differ += (dy[i] == 0.0f) != (out[i] == 0.0f);
    kt_expect(differ == 0, "  %lld elements dropped in one tensor and not the other with the "
              "same seed", (long long)differ);
    ops->dropout(dev, GB_F32, again, x, n, p, seed + 1);
    differ = 0;
    for (int64_t i = 0; i < n; i++)
        differ += (again[i] == 0.0f) != (out[i] == 0.0f);
    kt_expect(p == 0.0f || n < 100 || differ > 0, "  seed + 1 drops the same elements");
}

static void test_dropout(void)
{
    kt_section("dropout (ABI 1.7)");
    static const struct {
        int64_t n;
        float p;
    } cases[] = {{40003, 0.3f}, {40003, 0.0f}, {7, 0.5f}, {100000, 0.1f}};
    kt_rng rng = kt_seed(8);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_dropout_case(cases[i].n, cases[i].p, &rng);
    float f[4] = {1, 2, 3, 4};
    kt_clear_error();
    gb_status st = ops->dropout(dev, GB_F32, f, f, 4, 1.0f, 1);
    kt_expect(st == GB_ERR_INVALID_ARG && strstr(kt_last_error(), "p = 1"),
              "dropout with p = 1 returned %d: \"%s\"", (int)st, kt_last_error());
}

/* ---- bias_backward, sum_squares ------------------------------------------------------- */

static void test_bias_backward_case(int64_t N, int64_t C, kt_rng *rng)
{
    size_t nc = (size_t)(N * C);
    float *dout = kt_floats(nc), *dbias = kt_floats(C);
    kt_fill(rng, dout, nc, -1, 1);
    kt_fill(rng, dbias, C, -1, 1);
    double *want = kt_widen(dbias, C);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            want[c] += dout[n * C + c];
    float *again = kt_copy(dbias, C);
    expect_status(ops->bias_backward(dev, GB_F32, dbias, dout, N, C), GB_OK, "bias_backward");
    char what[128];
    snprintf(what, sizeof what, "bias_backward (+=) N=%lld C=%lld", (long long)N, (long long)C);
    kt_compare(what, dbias, want, C, ATOL, RTOL);
    ops->bias_backward(dev, GB_F32, again, dout, N, C);
    kt_same_bits("  bias_backward, run twice", dbias, again, C);
}

static void test_sum_squares_case(int64_t n, kt_rng *rng)
{
    float *x = kt_floats(n), out[2];
    kt_fill(rng, x, n, -1, 1);
    double want = 0.0;
    for (int64_t i = 0; i < n; i++)
        want += (double)x[i] * x[i];
    expect_status(ops->sum_squares(dev, &out[0], x, n), GB_OK, "sum_squares");
    ops->sum_squares(dev, &out[1], x, n);
    char what[128];
    snprintf(what, sizeof what, "sum_squares n=%lld", (long long)n);
    kt_compare(what, &out[0], &want, 1, 0.0, 1e-6);
    kt_same_bits("  sum_squares, run twice", &out[0], &out[1], 1);
}

static void test_reductions(void)
{
    kt_section("bias_backward, sum_squares");
    kt_rng rng = kt_seed(5);
    test_bias_backward_case(1, 1, &rng);
    test_bias_backward_case(7, 7, &rng);
    test_bias_backward_case(100, 33, &rng);
    test_bias_backward_case(64, 768, &rng);
    static const int64_t sizes[] = {1, 7, 1000, (1 << 20) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        test_sum_squares_case(sizes[i], &rng);
}

/* ---- cross_entropy -------------------------------------------------------------------- */

static void test_cross_entropy_case(int64_t N, int64_t V, double spread, kt_rng *rng)
{
    size_t nv = (size_t)(N * V);
    float *logits = kt_floats(nv), *losses = kt_floats(N), *dlogits = kt_floats(nv);
    int32_t *targets = kt_ints(N);
    kt_fill(rng, logits, nv, -spread, spread);
    for (int64_t n = 0; n < N; n++)
        targets[n] = kt_below(rng, (int32_t)V);
    float dloss = 1.0f / (float)N;
    double *want_loss = kt_doubles(N), *want_d = kt_doubles(nv);
    for (int64_t n = 0; n < N; n++) {
        const float *x = logits + n * V;
        double max = x[0], sum = 0.0;
        for (int64_t v = 1; v < V; v++)
            max = x[v] > max ? x[v] : max;
        for (int64_t v = 0; v < V; v++)
            sum += exp(x[v] - max);
        want_loss[n] = log(sum) + max - x[targets[n]];
        for (int64_t v = 0; v < V; v++)
            want_d[n * V + v] = (exp(x[v] - max) / sum - (v == targets[n])) * dloss;
    }
    char what[128];
    snprintf(what, sizeof what, "cross_entropy losses N=%lld V=%lld spread=%g", (long long)N,
             (long long)V, spread);
    expect_status(ops->cross_entropy(dev, GB_F32, losses, NULL, logits, targets, N, V, dloss),
                  GB_OK, "cross_entropy without dlogits");
    kt_compare(what, losses, want_loss, N, ATOL, RTOL);
    expect_status(ops->cross_entropy(dev, GB_F32, losses, dlogits, logits, targets, N, V, dloss),
                  GB_OK, "cross_entropy");
    kt_compare("  losses with dlogits", losses, want_loss, N, ATOL, RTOL);
    kt_compare("  dlogits", dlogits, want_d, nv, ATOL, RTOL);
    ops->cross_entropy(dev, GB_F32, losses, logits, logits, targets, N, V, dloss);
    kt_same_bits("  dlogits aliasing logits", logits, dlogits, nv);
}

/* cross_entropy_ld (ABI 1.3): rows `ld` apart give cross_entropy's bits on their first V
 * columns, and the padding columns are neither read (NaN there changes nothing) nor
 * written. */
static void test_cross_entropy_ld_case(int64_t N, int64_t V, int64_t ld, kt_rng *rng)
{
    size_t nv = (size_t)(N * V), nld = (size_t)(N * ld);
    float *dense = kt_floats(nv), *padded = kt_floats(nld), *want_d = kt_floats(nv);
    float *losses = kt_floats(N), *want_losses = kt_floats(N);
    int32_t *targets = kt_ints(N);
    kt_fill(rng, dense, nv, -5, 5);
    for (int64_t n = 0; n < N; n++) {
        targets[n] = kt_below(rng, (int32_t)V);
        for (int64_t c = 0; c < ld; c++)
            padded[n * ld + c] = c < V ? dense[n * V + c] : NAN;
    }
    float dloss = 1.0f / (float)N;
    expect_status(ops->cross_entropy(dev, GB_F32, want_losses, want_d, dense, targets, N, V,
                                     dloss), GB_OK, "cross_entropy");
    expect_status(ops->cross_entropy_ld(dev, GB_F32, losses, padded, padded, ld, targets, N, V,
                                        dloss), GB_OK, "cross_entropy_ld");
    int same = memcmp(losses, want_losses, (size_t)N * sizeof *losses) == 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < ld; c++)
            same &= c < V ? padded[n * ld + c] == want_d[n * V + c] : isnan(padded[n * ld + c]);
    kt_expect(same, "cross_entropy_ld N=%lld V=%lld ld=%lld: not cross_entropy's bits on the "
              "real columns, or a padding column was touched", (long long)N, (long long)V,
              (long long)ld);
    printf("  cross_entropy_ld N=%lld V=%lld ld=%lld: %s\n", (long long)N, (long long)V,
           (long long)ld, same ? "cross_entropy's bits, padding untouched" : "differs");
}

static void test_cross_entropy(void)
{
    kt_section("cross_entropy");
    static const struct {
        int64_t N, V;
        double spread;
    } shapes[] = {{1, 1, 5}, {3, 7, 5}, {5, 65, 5}, {37, 1000, 5},
                  {4, 50257, 5},   // GPT-2 vocabulary, parallel path
                  {6, 100, 80}};   // exp would overflow without the shift
    kt_rng rng = kt_seed(6);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        test_cross_entropy_case(shapes[i].N, shapes[i].V, shapes[i].spread, &rng);

    test_cross_entropy_ld_case(3, 7, 8, &rng);
    test_cross_entropy_ld_case(5, 200, 256, &rng);
    test_cross_entropy_ld_case(4, 50257, 50304, &rng);   // GPT-2 padded as llm.c pads it

    float logits[4] = {0}, loss;
    int32_t bad = 4;
    expect_status(ops->cross_entropy(dev, GB_F32, &loss, NULL, logits, &bad, 1, 4, 1.0f),
                  GB_ERR_INVALID_ARG, "cross_entropy with target == V");
    int32_t good = 0;
    expect_status(ops->cross_entropy_ld(dev, GB_F32, &loss, NULL, logits, 3, &good, 1, 4, 1.0f),
                  GB_ERR_INVALID_ARG, "cross_entropy_ld with ld < V");
}

/* ---- refusals ------------------------------------------------------------------------- */

static void expect_refusal(gb_status got, gb_status want, const char *kernel,
                           const char *mention)
{
    expect_status(got, want, kernel);
    kt_expect(strstr(kt_last_error(), mention) != NULL,
              "%s: message \"%s\" does not mention \"%s\"", kernel, kt_last_error(), mention);
    kt_clear_error();
}

static void test_refusals(void)
{
    kt_section("refusals: i32 activations, negative sizes");
    float f[8] = {0}, m[2], r[2];
    int32_t t[2] = {0, 0};
    const gb_dtype bad = GB_I32; /* no kernel computes on integer activations */
    const gb_status U = GB_ERR_UNSUPPORTED;
    kt_clear_error();
    expect_refusal(ops->embed_forward(dev, bad, f, t, f, f, 1, 2, 2), U, "embed_forward", "i32");
    expect_refusal(ops->embed_backward(dev, bad, f, f, f, t, 1, 2, 2), U, "embed_backward",
                   "i32");
    expect_refusal(ops->layernorm_forward(dev, bad, f, m, r, f, f, f, 2, 2, 1e-5f), U,
                   "layernorm_forward", "i32");
    expect_refusal(ops->layernorm_backward(dev, bad, f, f, f, f, f, f, m, r, 2, 2), U,
                   "layernorm_backward", "i32");
    expect_refusal(ops->gelu_forward(dev, bad, f, f, 4), U, "gelu_forward", "i32");
    expect_refusal(ops->gelu_backward(dev, bad, f, f, f, 4), U, "gelu_backward", "i32");
    expect_refusal(ops->gelu_tanh_forward(dev, bad, f, f, 4), U, "gelu_tanh_forward", "i32");
    expect_refusal(ops->gelu_tanh_backward(dev, bad, f, f, f, 4), U, "gelu_tanh_backward",
                   "i32");
    expect_refusal(ops->add(dev, bad, f, f, f, 4), U, "add", "i32");
    expect_refusal(ops->bias_backward(dev, bad, f, f, 2, 2), U, "bias_backward", "i32");
    expect_refusal(ops->cross_entropy(dev, bad, f, NULL, f, t, 2, 2, 1.0f), U, "cross_entropy",
                   "i32");
    expect_refusal(ops->layernorm_forward(dev, GB_F32, f, m, r, f, f, f, -1, 2, 1e-5f),
                   GB_ERR_INVALID_ARG, "layernorm_forward", "negative");
    expect_refusal(ops->sum_squares(dev, f, f, -1), GB_ERR_INVALID_ARG, "sum_squares",
                   "negative");
}

int main(int argc, char **argv)
{
    const gb_plugin_desc *desc =
        kt_load_arg(argc, argv, "device-cpu.so", GB_KIND_DEVICE, "cpu", sizeof(gb_device_ops));
    ops = desc->ops;
    kt_expect(ops->create && ops->destroy && ops->context && ops->info && ops->alloc &&
              ops->free && ops->copy && ops->memset_zero && ops->sync && ops->matmul &&
              ops->embed_forward && ops->embed_backward && ops->layernorm_forward &&
              ops->layernorm_backward && ops->gelu_forward && ops->gelu_backward && ops->add &&
              ops->bias_backward && ops->cross_entropy && ops->sum_squares &&
              ops->gelu_tanh_forward && ops->gelu_tanh_backward && ops->cross_entropy_ld &&
              ops->dropout,
              "a gb_device_ops entry is NULL");
    gb_host host = kt_host(2);
    kt_expect((desc->caps & GB_CAP_GELU_TANH) != 0, "device/cpu does not declare "
              "GB_CAP_GELU_TANH beside its gelu_tanh kernels");
    dev = kt_cpu_device(ops, &host);
    test_memory();
    test_matmul();
    test_embed();
    test_layernorm();
    test_pointwise();
    test_dropout();
    test_reductions();
    test_cross_entropy();
    test_refusals();
    ops->destroy(dev);
    return kt_exit_code();
}
