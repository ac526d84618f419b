/* The formulas of kernels/common that the CPU and the CUDA optimizers share (adamw.h,
 * grad_scale.h, stochastic_round.h), checked on the CPU, where the GPU runs the same
 * source.
 *
 * - adamw_element bit for bit against the same sequence of operations done in double,
 *   each result cast to f32: a single +, -, *, / or sqrt of f32 values computed in double
 *   and rounded to f32 is the correctly rounded f32 result (double has more than twice
 *   f32's precision), so this reference is exact whatever the compiler does, and a fused
 *   multiply-add or a reciprocal shortcut in the formulas would show as a difference.
 *   On 100,000 random elements of mixed magnitudes, with zero gradients and moments
 *   among them.
 * - The same update against the real-number AdamW computed in double from the same f32
 *   inputs and coefficients: m, v and p within a few f32 roundings of the terms they add,
 *   which says the formula is AdamW and not only self-consistent.
 * - adamw_step_coeffs and adamw_decay_factor against their definitions in double.
 * - gb_grad_scale: no clipping without a norm or with max_norm <= 0, the loss scale
 *   removed, clipping only above max_norm, and within one f32 ulp of a long double
 *   evaluation.
 * - gb_random16 against fixed values (the scheme is part of a run's reproducibility: a
 *   change would change every stochastically rounded bf16 copy, on the CPU and the GPU),
 *   and gb_bf16_stochastic_at picks one of the two bf16 neighbours from those bits.
 *
 * Usage: test_common_formulas
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "adamw.h"
#include "grad_scale.h"
#include "optim_test.h"
#include "stochastic_round.h"
#include "test_host.h"

#define ELEMENTS 100000

/* One f32 operation, done exactly in double and rounded once. */
static float r(double x)
{
    return (float)x;
}

/* adamw_element's operations, each through r(). */
static void reference_element(float *p, float *m, float *v, float grad, float decay,
                              const adamw_coeffs *c)
{
    float g = r((double)grad * c->g_scale);
    float m1 = r((double)r((double)c->b1 * *m) + r((double)c->one_minus_b1 * g));
    float v1 = r((double)r((double)c->b2 * *v) + r((double)r((double)c->one_minus_b2 * g) * g));
    float denom = r((double)r((double)r(sqrt((double)v1)) / c->bc2_sqrt) + c->eps);
    float delta = r((double)r((double)c->step_size * m1) / denom);
    *p = r((double)r((double)*p * decay) - delta);
    *m = m1;
    *v = v1;
}

/* ulps of f32 at the magnitude of x (at least the smallest normal's). */
static double ulp(double x)
{
    int e;
    frexp(fabs(x) > 0x1p-126 ? fabs(x) : 0x1p-126, &e);
    return ldexp(1.0, e - 24);
}

static int check_element(void)
{
    const adamw_hparams h = {0.9, 0.99, 1e-8, 0.1};
    uint64_t rng = 7;
    int64_t differ = 0, far = 0;
    for (int64_t i = 0; i < ELEMENTS; i++) {
        const int64_t step = 1 + i % 3000;
        const float lr = (float)(1e-3 * test_uniform(&rng));
        const float g_scale = i % 5 ? 1.0f : (float)test_uniform(&rng);
        const adamw_coeffs c = adamw_step_coeffs(&h, lr, step, g_scale);
        const float decay = i % 2 ? adamw_decay_factor(&h, lr) : 1.0f;
        const float scale = powf(10.0f, (float)(8 * test_uniform(&rng) - 6));
        float p = test_normal(&rng), grad = i % 11 ? test_normal(&rng) * scale : 0.0f;
        float m = i % 13 ? test_normal(&rng) * scale * 0.1f : 0.0f;
        float v = i % 13 ? fabsf(test_normal(&rng)) * scale * scale * 0.01f : 0.0f;
        float p1 = p, m1 = m, v1 = v, p2 = p, m2 = m, v2 = v;
        adamw_element(&p1, &m1, &v1, grad, decay, &c);
        reference_element(&p2, &m2, &v2, grad, decay, &c);
        if (gb_f32_bits(p1) != gb_f32_bits(p2) || gb_f32_bits(m1) != gb_f32_bits(m2) ||
            gb_f32_bits(v1) != gb_f32_bits(v2)) {
            if (differ++ < 5)
                printf("FAIL: element %lld: adamw_element gives p %.9g m %.9g v %.9g, one "
                       "rounding per operation gives %.9g %.9g %.9g\n", (long long)i, p1, m1,
                       v1, p2, m2, v2);
        }
        // the real-number update from the same f32 inputs, coefficients and scaled
        // gradient, each result within a few roundings of the terms it adds (cancellation
        // makes a bound relative to the result alone meaningless); p from the f32
        // moments, whose own error the moment bounds cover
        double g = adamw_grad(grad, &c);
        double bm = (double)c.b1 * m, gm = (double)c.one_minus_b1 * g;
        double bv = (double)c.b2 * v, gv = (double)c.one_minus_b2 * g * g;
        double delta = (double)c.step_size * m1 / (sqrt((double)v1) / c.bc2_sqrt + c.eps);
        double pd = (double)p * decay, pr = pd - delta;
        if (fabs(m1 - (bm + gm)) > 2 * (ulp(bm) + ulp(gm)) ||
            fabs(v1 - (bv + gv)) > 2 * (ulp(bv) + ulp(gv)) ||
            fabs(p1 - pr) > 2 * ulp(pd) + 4 * ulp(delta) + ulp(pr)) {
            if (far++ < 5)
                printf("FAIL: element %lld: p %.9g m %.9g v %.9g, real-number AdamW %.17g "
                       "%.17g %.17g\n", (long long)i, p1, m1, v1, pr, bm + gm, bv + gv);
        }
    }
    printf("adamw_element: %lld of %d elements differ from one rounding per operation, "
           "%lld lie beyond a few ulps of the real-number update\n", (long long)differ,
           ELEMENTS, (long long)far);
    return differ != 0 || far != 0;
}

static int check_coeffs(void)
{
    int failures = 0;
    const adamw_hparams h = {0.9, 0.95, 1e-8, 0.1};
    const int64_t steps[] = {1, 2, 10, 1000, 100000};
    for (int i = 0; i < 5; i++) {
        const float lr = 6e-4f;
        adamw_coeffs c = adamw_step_coeffs(&h, lr, steps[i], 0.5f);
        double t = (double)steps[i];
        failures += c.g_scale != 0.5f || c.b1 != (float)0.9 || c.one_minus_b1 != (float)(1 - 0.9) ||
                    c.b2 != (float)0.95 || c.one_minus_b2 != (float)(1 - 0.95) ||
                    c.eps != (float)1e-8 ||
                    c.step_size != (float)((double)lr / (1 - pow(0.9, t))) ||
                    c.bc2_sqrt != (float)sqrt(1 - pow(0.95, t));
    }
    failures += adamw_decay_factor(&h, 6e-4f) != (float)(1.0 - (double)6e-4f * 0.1);
    printf("%s: adamw_step_coeffs and adamw_decay_factor as defined\n", failures ? "FAIL" : "ok");
    return failures != 0;
}

static int check_grad_scale(void)
{
    int failures = 0;
    const float norms[] = {0.0f, 1e-12f, 0.25f, 0.99f, 1.0f, 4.0f, 1e6f, 3e30f};
    GB_TEST_CHECK(failures, gb_grad_scale(NULL, 1.0f, 0.5f) == 0.5f, "no norm: the loss scale only");
    float big = 100.0f;
    GB_TEST_CHECK(failures, gb_grad_scale(&big, 0.0f, 0.25f) == 0.25f, "max_norm 0: no clipping");
    GB_TEST_CHECK(failures, gb_grad_scale(&big, -1.0f, 1.0f) == 1.0f, "max_norm < 0: no clipping");
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 3; k++) {
            const float inv = k == 0 ? 1.0f : k == 1 ? 1.0f / 512 : 1.0f / 65536;
            const float max_norm = 1.0f;
            // gradients still carry the loss scale: their squared norm is scaled by 1/inv^2
            const float norm_sq = (float)((double)norms[i] / ((double)inv * inv));
            const float got = gb_grad_scale(&norm_sq, max_norm, inv);
            long double norm = sqrtl((long double)norm_sq) * inv;
            long double clip = max_norm / (norm + 1e-6L);
            long double want = inv * (clip < 1 ? clip : 1);
            if (fabsl(got - want) > ulp((double)want) ||
                (norm + 1e-6L <= max_norm && got != inv)) {
                printf("FAIL: gb_grad_scale(norm_sq %.9g, max_norm 1, inv %.9g) = %.9g, "
                       "expected %.12Lg\n", norm_sq, inv, got, want);
                failures++;
            }
        }
    printf("%s: gb_grad_scale\n", failures ? "FAIL" : "ok");
    return failures != 0;
}

static int check_random_bits(void)
{
    static const struct {
        uint64_t seed;
        int64_t step, index;
        uint16_t bits;
    } golden[] = {
        {0x0u, 1, 0, 0xe220},
        {0x0u, 1, 1099511627779, 0x4a92},
        {0x0u, 2000, 123456789, 0xc461},
        {0x0u, 1099511627776, 1, 0x6b9d},
        {0x539u, 1, 123456789, 0x700a},
        {0x539u, 2000, 1, 0xfc02},
        {0x539u, 1099511627776, 0, 0x7f56},
        {0x539u, 1099511627776, 1099511627779, 0x7935},
        {0xfeedfacecafebeefu, 1, 1, 0x78fa},
        {0xfeedfacecafebeefu, 2000, 0, 0x1601},
        {0xfeedfacecafebeefu, 2000, 1099511627779, 0x7e3a},
        {0xfeedfacecafebeefu, 1099511627776, 123456789, 0x40c8},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
        uint16_t got = gb_random16(golden[i].seed, golden[i].step, golden[i].index);
        if (got != golden[i].bits) {
            printf("FAIL: gb_random16(0x%llx, %lld, %lld) = 0x%04x, the scheme gives 0x%04x\n",
                   (unsigned long long)golden[i].seed, (long long)golden[i].step,
                   (long long)golden[i].index, got, golden[i].bits);
            failures++;
        }
    }
    uint64_t rng = 3;
    for (int64_t i = 0; i < 10000; i++) {
        float x = test_normal(&rng);
        uint16_t down = (uint16_t)(gb_f32_bits(x) >> 16), h = gb_bf16_stochastic_at(x, 11, 5, i);
        if (h != gb_bf16_from_f32_stochastic(x, gb_random16(11, 5, i)) ||
            (h != down && h != (uint16_t)(down + 1))) {
            printf("FAIL: gb_bf16_stochastic_at(%.9g, 11, 5, %lld) = 0x%04x\n", x,
                   (long long)i, h);
            failures++;
            break;
        }
    }
    printf("%s: gb_random16 as fixed; gb_bf16_stochastic_at rounds to a neighbour with "
           "those bits\n", failures ? "FAIL" : "ok");
    return failures != 0;
}

int main(void)
{
    int failures = check_element() + check_coeffs() + check_grad_scale() + check_random_bits();
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("all formula checks passed\n");
    return 0;
}
