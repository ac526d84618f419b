/* Tests for the kernels of optim/adamw_fused, called directly (not through the plugin).
 *
 * - The scalar conversions gb_bf16_from_f32 and gb_f16_from_f32 against the exact reference on
 *   the hard cases (ties, one ulp either side of them, subnormals, overflow, inf, NaN).
 * - Each kernel version's update loop writing those same values as its low-precision
 *   copy (coefficients that leave p unchanged: no step, no gradient, decay 1), so the
 *   vectorised conversions are checked against the same reference.
 * - The AVX-512 update against the portable one, bit for bit, for spans of every length
 *   up to 40 and a few long ones, at every offset within a cache line, with and without
 *   a bf16 or f16 copy; elements outside the span must stay untouched.
 * - The AVX-512 sum of squares against the portable one, bit for bit, and both against
 *   a long double sum (relative difference below 1e-15).
 * - Stochastic rounding to bf16: always one of the two neighbours, unbiased on average
 *   (the mean of many roundings of one value is within 4 standard errors of it), and the
 *   update's stochastic copy is a function of (seed, step, index) alone: the same span
 *   split in two pieces gives the same bits, another seed other bits.
 * The portable checks run everywhere (`portable`); the AVX-512 ones (`avx512`) exit 77,
 * meson's SKIP, saying why, where the CPU lacks AVX-512F or GEARBOX_CPU_FEATURES leaves it
 * out (gearbox/engine/machine.h), so a machine without it reports them skipped, never passed.
 *
 * Usage: test_fused_kernels portable|avx512
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "machine.h"
#include "optim_test.h"

#define BUF 8192

static int check_scalar_conversions(void)
{
    int failures = 0;
    const gb_dtype dtypes[] = {GB_BF16, GB_F16};
    for (int d = 0; d < 2; d++) {
        int64_t n = test_hard_cases(dtypes[d], NULL, 0);
        float *x = malloc((size_t)n * sizeof *x);
        uint16_t *h = malloc((size_t)n * sizeof *h);
        test_hard_cases(dtypes[d], x, n);
        for (int64_t i = 0; i < n; i++)
            h[i] = dtypes[d] == GB_BF16 ? gb_bf16_from_f32(x[i]) : gb_f16_from_f32(x[i]);
        failures += test_check_lowp("scalar", dtypes[d], x, h, n) != 0;
        free(x), free(h);
    }
    return failures;
}

/* Coefficients under which adamw_element leaves p exactly as it is. */
static const adamw_coeffs identity_coeffs = {
    .g_scale = 1, .b1 = 0.9f, .one_minus_b1 = 0.1f, .b2 = 0.95f, .one_minus_b2 = 0.05f,
    .step_size = 0, .bc2_sqrt = 1, .eps = 1e-8f,
};

static int check_update_conversions(const fused_kernels *k)
{
    int failures = 0;
    const gb_dtype dtypes[] = {GB_BF16, GB_F16};
    for (int d = 0; d < 2; d++) {
        int64_t n = test_hard_cases(dtypes[d], NULL, 0);
        float *x = malloc((size_t)n * sizeof *x), *p = malloc((size_t)n * sizeof *p);
        float *zeros = calloc((size_t)n * 3, sizeof *zeros);
        uint16_t *h = malloc((size_t)n * sizeof *h);
        test_hard_cases(dtypes[d], x, n);
        memcpy(p, x, (size_t)n * sizeof *p);
        fused_span span = {.p = p, .g = zeros, .m = zeros + n, .v = zeros + 2 * n, .lowp = h,
                           .lowp_dtype = dtypes[d], .count = n, .decay = 1.0f};
        k->update(&span, &identity_coeffs);
        char what[64];
        snprintf(what, sizeof what, "%s update", k->isa);
        failures += test_check_lowp(what, dtypes[d], p, h, n) != 0;
        free(x), free(p), free(zeros), free(h);
    }
    return failures;
}

typedef struct buffers {
    float *p, *g, *m, *v;
    uint16_t *lowp;
} buffers;

static void alloc_buffers(buffers *b)
{
    b->p = aligned_alloc(64, BUF * sizeof(float));
    b->g = aligned_alloc(64, BUF * sizeof(float));
    b->m = aligned_alloc(64, BUF * sizeof(float));
    b->v = aligned_alloc(64, BUF * sizeof(float));
    b->lowp = aligned_alloc(64, BUF * sizeof(uint16_t));
}

static void free_buffers(buffers *b)
{
    free(b->p), free(b->g), free(b->m), free(b->v), free(b->lowp);
}

static void copy_buffers(buffers *dst, const buffers *src)
{
    memcpy(dst->p, src->p, BUF * sizeof(float));
    memcpy(dst->g, src->g, BUF * sizeof(float));
    memcpy(dst->m, src->m, BUF * sizeof(float));
    memcpy(dst->v, src->v, BUF * sizeof(float));
    memcpy(dst->lowp, src->lowp, BUF * sizeof(uint16_t));
}

static int same_buffers(const buffers *a, const buffers *b)
{
    return !memcmp(a->p, b->p, BUF * sizeof(float)) && !memcmp(a->m, b->m, BUF * sizeof(float)) &&
           !memcmp(a->v, b->v, BUF * sizeof(float)) &&
           !memcmp(a->lowp, b->lowp, BUF * sizeof(uint16_t));
}

static fused_span span_at(const buffers *b, int64_t offset, int64_t count, int lowp_mode,
                          float decay)
{
    return (fused_span){
        .p = b->p + offset, .g = b->g + offset, .m = b->m + offset, .v = b->v + offset,
        .lowp = lowp_mode ? b->lowp + offset : NULL,
        .lowp_dtype = lowp_mode == 1 ? GB_BF16 : GB_F16,
        .count = count, .decay = decay,
    };
}

/* Outside [offset, offset + count) nothing may change. */
static int untouched_outside(const buffers *after, const buffers *before, int64_t offset,
                             int64_t count)
{
    int64_t end = offset + count;
    const float *const fa[] = {after->p, after->m, after->v}, *const fb[] = {before->p, before->m,
                                                                              before->v};
    for (int k = 0; k < 3; k++)
        if (memcmp(fa[k], fb[k], (size_t)offset * sizeof(float)) ||
            memcmp(fa[k] + end, fb[k] + end, (size_t)(BUF - end) * sizeof(float)))
            return 0;
    return !memcmp(after->lowp, before->lowp, (size_t)offset * sizeof(uint16_t)) &&
           !memcmp(after->lowp + end, before->lowp + end, (size_t)(BUF - end) * sizeof(uint16_t));
}

static int check_update_versions_agree(void)
{
    int failures = 0, cases = 0;
    uint64_t rng = 42;
    buffers init, a, b;
    alloc_buffers(&init), alloc_buffers(&a), alloc_buffers(&b);
    for (int i = 0; i < BUF; i++) {
        init.p[i] = 0.1f * test_normal(&rng);
        init.g[i] = (float)ldexp(test_normal(&rng), (int)(test_uniform(&rng) * 40) - 30);
        init.m[i] = 0.01f * test_normal(&rng);
        init.v[i] = (float)(1e-4 * test_uniform(&rng) * test_uniform(&rng));
        init.lowp[i] = 0xdead;
    }
    const adamw_coeffs c = {
        .g_scale = 0.37f, .b1 = 0.9f, .one_minus_b1 = 0.1f, .b2 = 0.99f,
        .one_minus_b2 = (float)(1.0 - 0.99), .step_size = 3e-3f, .bc2_sqrt = 0.3f, .eps = 1e-8f,
    };
    const int64_t long_counts[] = {1000, 4099, BUF - 16};
    for (int64_t offset = 0; offset <= 16; offset++)
        for (int64_t count = 0; count <= 40 + 3; count++) {
            int64_t n = count <= 40 ? count : long_counts[count - 41];
            for (int lowp_mode = 0; lowp_mode < 3; lowp_mode++) {
                float decay = lowp_mode == 1 ? 1.0f : 0.9997f;
                copy_buffers(&a, &init), copy_buffers(&b, &init);
                fused_span sa = span_at(&a, offset, n, lowp_mode, decay);
                fused_span sb = span_at(&b, offset, n, lowp_mode, decay);
                fused_kernels_portable.update(&sa, &c);
                fused_kernels_avx512.update(&sb, &c);
                cases++;
                if (!same_buffers(&a, &b) || !untouched_outside(&b, &init, offset, n)) {
                    if (failures++ < 8)
                        printf("FAIL: update at offset %lld, count %lld, lowp %d: versions "
                               "differ or elements outside the span changed\n",
                               (long long)offset, (long long)n, lowp_mode);
                }
            }
        }
    printf("update: avx512 vs portable bit-identical in %d of %d cases%s\n", cases - failures,
           cases, failures ? " FAIL" : "");
    free_buffers(&init), free_buffers(&a), free_buffers(&b);
    return failures != 0;
}

static int check_sum_squares_versions_agree(void)
{
    int failures = 0, cases = 0;
    uint64_t rng = 7;
    float *x = aligned_alloc(64, BUF * sizeof *x);
    for (int i = 0; i < BUF; i++)
        x[i] = (float)ldexp(test_normal(&rng), (int)(test_uniform(&rng) * 20) - 10);
    double worst = 0;
    for (int64_t offset = 0; offset <= 16; offset++)
        for (int64_t n = 0; n <= 103; n++) {
            int64_t count = n <= 100 ? n : (n == 101 ? 4099 : BUF - 16);
            double sp = fused_kernels_portable.sum_squares(x + offset, count);
            double sv = fused_kernels_avx512.sum_squares(x + offset, count);
            long double ref = 0;
            for (int64_t i = 0; i < count; i++)
                ref += (long double)x[offset + i] * x[offset + i];
            double rel = ref > 0 ? fabs((double)(sp - ref) / (double)ref) : fabs(sp);
            worst = rel > worst ? rel : worst;
            cases++;
            if (memcmp(&sp, &sv, sizeof sp) || !(rel < 1e-15)) {
                if (failures++ < 8)
                    printf("FAIL: sum_squares at offset %lld, n %lld: portable %.17g, avx512 "
                           "%.17g, reference %.17Lg\n", (long long)offset, (long long)count, sp,
                           sv, ref);
            }
        }
    printf("sum_squares: avx512 vs portable bit-identical in %d of %d cases, max rel diff to a "
           "long double sum %.3g%s\n", cases - failures, cases, worst, failures ? " FAIL" : "");
    free(x);
    return failures != 0;
}

/* The two bf16 neighbours of x: rounded toward zero and away from it. */
static void bf16_neighbours(float x, uint16_t *down, uint16_t *up)
{
    uint32_t bits = gb_f32_bits(x);
    *down = (uint16_t)(bits >> 16);
    *up = (uint16_t)(*down + ((bits & 0xffffu) != 0));
}

static int check_stochastic_rounding(void)
{
    int failures = 0;
    const float values[] = {1.0f + 0x1p-10f, -3.14159f, 1e-30f, 0.1f, 1.0f};
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
        float x = values[v];
        uint16_t down, up;
        bf16_neighbours(x, &down, &up);
        enum { N = 1 << 16 };
        double sum = 0.0, lo = gb_f32_from_bf16(down), hi = gb_f32_from_bf16(up);
        for (int64_t i = 0; i < N; i++) {
            uint16_t h = gb_bf16_stochastic_at(x, 42, 7, i);
            if (h != down && h != up) {
                printf("FAIL: stochastic bf16 of %.9g gave 0x%04x, not 0x%04x or 0x%04x\n",
                       x, h, down, up);
                failures++;
                break;
            }
            sum += gb_f32_from_bf16(h);
        }
        /* each rounding is lo or hi: the mean's standard error is at most |hi - lo| / 2 / sqrt(N) */
        double mean = sum / N, se = fabs(hi - lo) / 2.0 / sqrt((double)N);
        if (fabs(mean - x) > 4.0 * se + 1e-45) {
            printf("FAIL: stochastic bf16 of %.9g averages %.9g (standard error %.3g)\n", x,
                   mean, se);
            failures++;
        }
    }
    return failures;
}

/* The stochastic copy written by the portable update over one span and over two pieces. */
static int check_stochastic_update(void)
{
    enum { N = 1000 };
    int failures = 0;
    float *p = malloc(3 * N * sizeof *p), *zeros = calloc(3 * N, sizeof *zeros);
    uint16_t *whole = malloc(N * sizeof *whole), *pieces = malloc(N * sizeof *pieces);
    uint16_t *other = malloc(N * sizeof *other);
    for (int i = 0; i < N; i++)
        p[i] = p[N + i] = p[2 * N + i] = 0.001f * (float)i + 0x1p-12f;
    fused_span s = {.p = p, .g = zeros, .m = zeros + N, .v = zeros + 2 * N, .lowp = whole,
                    .lowp_dtype = GB_BF16, .stochastic = 1, .seed = 9, .step = 3, .first = 0,
                    .count = N, .decay = 1.0f};
    fused_kernels_portable.update(&s, &identity_coeffs);
    fused_span a = s, b = s;
    a.p = p + N, a.lowp = pieces, a.count = 300;
    b.p = p + N + 300, b.lowp = pieces + 300, b.first = 300, b.count = N - 300;
    fused_kernels_portable.update(&a, &identity_coeffs);
    fused_kernels_portable.update(&b, &identity_coeffs);
    fused_span c = s;
    c.p = p + 2 * N, c.lowp = other, c.seed = 10;
    fused_kernels_portable.update(&c, &identity_coeffs);
    if (memcmp(whole, pieces, N * sizeof *whole) != 0) {
        printf("FAIL: the stochastic copy depends on how the span is split\n");
        failures++;
    }
    if (memcmp(whole, other, N * sizeof *whole) == 0) {
        printf("FAIL: seeds 9 and 10 gave the same stochastic copy\n");
        failures++;
    }
    free(p), free(zeros), free(whole), free(pieces), free(other);
    return failures;
}

/* Why the AVX-512 kernels cannot run here, or NULL when they can: the hardware must have
 * AVX-512F, and an injected feature list (GEARBOX_CPU_FEATURES) must not leave it out. */
static const char *avx512_absent(void)
{
    gb_cpu_features hardware, chosen;
    gb_cpu_detect_hardware(&hardware);
    gb_cpu_detect(&chosen);
    if (!hardware.avx512f)
        return "this CPU lacks AVX-512F";
    if (!chosen.avx512f)
        return "GEARBOX_CPU_FEATURES leaves out avx512f";
    return NULL;
}

static int check_portable(void)
{
    int failures = check_scalar_conversions();
    failures += check_stochastic_rounding();
    failures += check_stochastic_update();
    return failures + check_update_conversions(&fused_kernels_portable);
}

static int check_avx512(void)
{
    int failures = check_update_conversions(&fused_kernels_avx512);
    failures += check_update_versions_agree();
    return failures + check_sum_squares_versions_agree();
}

int main(int argc, char **argv)
{
    const char *variant = argc == 2 ? argv[1] : "";
    int failures;
    if (strcmp(variant, "portable") == 0) {
        failures = check_portable();
    } else if (strcmp(variant, "avx512") == 0) {
        const char *why = avx512_absent();
        if (why) {
            printf("SKIP: %s: the AVX-512 kernels of optim/adamw_fused were not tested\n", why);
            return 77;
        }
        failures = check_avx512();
    } else {
        fprintf(stderr, "usage: test_fused_kernels portable|avx512\n");
        return 2;
    }
    printf("test_fused_kernels %s: %d failure(s)\n", variant, failures);
    return failures ? 1 : 0;
}
