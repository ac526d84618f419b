/* Helpers of the optimizer tests; see optim_test.h. */
#include "optim_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gearbox/convert.h"
#include "test_host.h"

int test_optim_create(const gb_plugin_desc *desc, const gb_host *host, double beta1,
                      double beta2, double eps, double weight_decay, test_optim *opt)
{
    return test_optim_create_on(desc, host, gb_test_cpu_ctx(), beta1, beta2, eps, weight_decay,
                                opt);
}

int test_optim_create_on(const gb_plugin_desc *desc, const gb_host *host,
                         const gb_device_ctx *ctx, double beta1, double beta2, double eps,
                         double weight_decay, test_optim *opt)
{
    gb_value values[8];
    gb_test_default_values(desc, values);
    values[gb_test_option_index(desc, "beta1")].f = beta1;
    values[gb_test_option_index(desc, "beta2")].f = beta2;
    values[gb_test_option_index(desc, "eps")].f = eps;
    values[gb_test_option_index(desc, "weight_decay")].f = weight_decay;
    opt->ops = desc->ops;
    gb_status st = opt->ops->create(host, values, ctx, &opt->self);
    if (st != GB_OK)
        printf("FAIL: %s: create returned %d: %s\n", desc->name, st, gb_test_last_error());
    return st == GB_OK;
}

void *test_device_alloc(test_device *d, size_t bytes)
{
    void *ptr = NULL;
    if (d->ops->alloc(d->self, bytes ? bytes : 64, &ptr) != GB_OK) {
        printf("FAIL: device alloc of %zu bytes: %s\n", bytes, gb_test_last_error());
        exit(1);
    }
    return ptr;
}

void test_device_copy(test_device *d, void *dst, const void *src, size_t bytes,
                      gb_copy_kind kind)
{
    if (d->ops->copy(d->self, dst, src, bytes, kind) != GB_OK) {
        printf("FAIL: device copy of %zu bytes: %s\n", bytes, gb_test_last_error());
        exit(1);
    }
}

gb_optim_step_args test_step_args(float *params, const float *grads, void *state, int64_t n,
                                  const gb_param_group *groups, int64_t n_groups,
                                  int64_t step, float lr)
{
    return (gb_optim_step_args){
        .struct_size = sizeof(gb_optim_step_args),
        .params = params,
        .grads = grads,
        .state = state,
        .n = n,
        .groups = groups,
        .n_groups = n_groups,
        .step = step,
        .lr = lr,
        .inv_loss_scale = 1,
    };
}

gb_optim_step_args test_groups_step_args(float *params, const float *grads, void *state,
                                         int64_t step, float lr)
{
    static const gb_param_group groups[] = {
        {180001, 120006, 1}, {37, 99963, 1}, {0, 37, 0}, {100000, 1, 0},
        {100001, 50000, 1}, {150001, 29999, 0}, {180000, 1, 1},
    };
    return test_step_args(params, grads, state, TEST_GROUPS_N, groups,
                          sizeof groups / sizeof groups[0], step, lr);
}

float test_schedule_step(int64_t t, uint64_t *rng, float *grads, int64_t n, float *loss_scale)
{
    const float scale = 1e-3f * expf((float)(3.0 * test_uniform(rng) - 1.5));
    *loss_scale = t % 3 == 0 ? 512.0f : 1.0f;
    for (int64_t i = 0; i < n; i++)
        grads[i] = scale * *loss_scale * test_normal(rng);
    return 1e-3f * (float)(t < 5 ? t / 5.0 : 1.0 - 0.02 * (double)t);
}

double test_uniform(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (double)((*state * 0x2545F4914F6CDD1Dull) >> 11) * 0x1p-53;
}

float test_normal(uint64_t *state)
{
    double s = 0;
    for (int k = 0; k < 4; k++)
        s += test_uniform(state);
    return (float)((s - 2.0) * sqrt(3.0));
}

int test_compare_bits(const char *what, const float *got, const float *want, int64_t n)
{
    int64_t differ = 0, first = -1;
    double max_abs = 0;
    for (int64_t i = 0; i < n; i++) {
        if (gb_f32_bits(got[i]) == gb_f32_bits(want[i]) || (isnan(got[i]) && isnan(want[i])))
            continue;
        if (first < 0)
            first = i;
        differ++;
        double d = fabs((double)got[i] - (double)want[i]);
        max_abs = d > max_abs || isnan(d) ? d : max_abs;
    }
    printf("%s: max abs diff %.3g, %lld of %lld elements differ in bits%s\n", what, max_abs,
           (long long)differ, (long long)n, differ ? " FAIL" : " (bit-identical)");
    if (differ)
        printf("  first at [%lld]: got %.9g (0x%08x), want %.9g (0x%08x)\n", (long long)first,
               (double)got[first], gb_f32_bits(got[first]), (double)want[first],
               gb_f32_bits(want[first]));
    return differ != 0;
}

/* ---- exact reference conversion ---------------------------------------------------- */

static int mant_bits(gb_dtype dtype)
{
    return dtype == GB_BF16 ? 7 : 10;
}

/* The pattern of +infinity, one past the largest finite pattern. */
static uint32_t inf_pattern(gb_dtype dtype)
{
    return dtype == GB_BF16 ? 0x7f80u : 0x7c00u;
}

/* The value of a non-negative pattern in [0, inf_pattern]; infinity decodes as the next
 * power of two, which is where the overflow threshold's tie is decided. */
static double decode(gb_dtype dtype, uint32_t pattern)
{
    int mb = mant_bits(dtype), bias = dtype == GB_BF16 ? 127 : 15;
    uint32_t exp = pattern >> mb, mant = pattern & ((1u << mb) - 1u);
    if (exp == 0)
        return ldexp((double)mant, 1 - bias - mb);
    return ldexp((double)((1u << mb) + mant), (int)exp - bias - mb);
}

uint16_t test_ref_lowp(gb_dtype dtype, float x)
{
    uint16_t sign = signbit(x) ? 0x8000u : 0;
    double a = fabs((double)x);
    uint32_t lo = 0, hi = inf_pattern(dtype);   /* largest pattern with value <= a */
    if (a >= decode(dtype, hi))
        return sign | (uint16_t)hi;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (decode(dtype, mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    double below = a - decode(dtype, lo), above = decode(dtype, lo + 1) - a;
    uint32_t pick = below < above ? lo : above < below ? lo + 1 : (lo % 2 ? lo + 1 : lo);
    return sign | (uint16_t)pick;
}

static int quiet_nan_pattern(gb_dtype dtype, uint16_t h)
{
    uint16_t inf = (uint16_t)inf_pattern(dtype), quiet = (uint16_t)(1u << (mant_bits(dtype) - 1));
    return (h & inf) == inf && (h & quiet);
}

int64_t test_check_lowp(const char *what, gb_dtype dtype, const float *x, const uint16_t *got,
                        int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        int ok;
        uint16_t want = 0;
        if (isnan(x[i])) {
            ok = quiet_nan_pattern(dtype, got[i]) && !!(got[i] & 0x8000u) == !!signbit(x[i]);
        } else {
            want = test_ref_lowp(dtype, x[i]);
            ok = got[i] == want;
        }
        if (!ok && bad++ < 8)
            printf("  %s: %s(%.9g = 0x%08x) gave 0x%04x, want %s0x%04x\n", what,
                   gb_dtype_name(dtype), (double)x[i], gb_f32_bits(x[i]), got[i],
                   isnan(x[i]) ? "a quiet NaN of the same sign, e.g. " : "", want);
    }
    printf("%s: %lld of %lld %s conversions wrong%s\n", what, (long long)bad, (long long)n,
           gb_dtype_name(dtype), bad ? " FAIL" : "");
    return bad;
}

static void put(float *x, int64_t cap, int64_t *n, float v)
{
    if (x && *n + 2 <= cap) {
        x[*n] = v;
        x[*n + 1] = -v;
    }
    *n += 2;
}

int64_t test_hard_cases(gb_dtype dtype, float *x, int64_t cap)
{
    int64_t n = 0;
    for (uint32_t b = 0; b < inf_pattern(dtype); b++) {
        float mid = (float)((decode(dtype, b) + decode(dtype, b + 1)) / 2);   /* exact */
        put(x, cap, &n, (float)decode(dtype, b));
        put(x, cap, &n, mid);
        put(x, cap, &n, nextafterf(mid, 0.0f));
        put(x, cap, &n, nextafterf(mid, INFINITY));
    }
    static const uint32_t specials[] = {
        0x00000001u, 0x00400000u, 0x007fffffu, 0x00800000u,   /* f32 subnormals, FLT_MIN */
        0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu,                /* FLT_MAX, bf16 overflow tie */
        0x477fefffu, 0x477ff000u, 0x477ff001u, 0x47800000u,   /* f16 overflow threshold */
        0x7f800000u,                                          /* infinity */
        0x7fc00000u, 0x7fffffffu, 0x7fc00001u, 0x7fa00000u,   /* quiet and signalling NaNs */
        0x7f800001u, 0x7f800100u, 0x7f80ffffu,                /* NaNs with low payloads */
    };
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++)
        put(x, cap, &n, gb_f32_from_bits(specials[k]));
    return n;
}
