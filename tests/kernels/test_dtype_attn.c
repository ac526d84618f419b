/* bf16 and f16 problems in the CPU attention plugins (argv[1..]: paths to attn-*-cpu.so).
 *
 * Each plugin runs forward and backward twice on the same values: on 16-bit views of q,
 * k, v and dout (random, rounded to the dtype), and in f32 on those rounded values
 * widened, which test_attn_math.c and the attention conformance test check against a
 * double reference. The f32 backward gets the 16-bit forward's output, widened, so that
 * both see the same O (mem_efficient and flash read it). The plugins widen exactly,
 * compute the f32 operations and round each output once, so out, dq, dk and dv are
 * within one rounding of the f32 results, 2^-8 relative for bf16 and 2^-11 for f16 plus
 * 1e-6 absolute for f16 subnormals, and what forward saves (f32 probabilities or
 * log-sum-exps) matches the f32 forward's to 1e-6 relative. q, k and v are slices of a
 * packed (B, T, 3, H, D) projection as the core passes them; one case is not causal.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/attn.h"
#include "gearbox/convert.h"
#include "kernel_test.h"
#include "test_host.h"

#define MAX_OPTIONS 16

static const gb_attn_ops *ops;
static void *attn;
static const char *label;

static double rtol_of(gb_dtype dtype)
{
    return dtype == GB_BF16 ? 0x1p-8 : 0x1p-11;
}

#define ATOL16 1e-6

static uint16_t narrow1(gb_dtype dtype, float x)
{
    return dtype == GB_BF16 ? gb_bf16_from_f32(x) : gb_f16_from_f32(x);
}

static float widen1(gb_dtype dtype, uint16_t h)
{
    return dtype == GB_BF16 ? gb_f32_from_bf16(h) : gb_f32_from_f16(h);
}

/* One problem's buffers in f32 (x32) and in the dtype (x16), holding the same values. */
typedef struct buffers {
    void *qkv, *dqkv, *out, *dout;   // (B, T, 3, H, D) and (B, H, T, D)
} buffers;

static buffers make_buffers(size_t n_qkv, size_t n_out, size_t elem)
{
    return (buffers){
        .qkv = kt_floats(n_qkv * elem / 4 + 1), .dqkv = kt_floats(n_qkv * elem / 4 + 1),
        .out = kt_floats(n_out * elem / 4 + 1), .dout = kt_floats(n_out * elem / 4 + 1),
    };
}

/* View `which` (0 q, 1 k, 2 v) of a packed (B, T, 3, H, D) buffer as (B, H, T, D). */
static gb_tensor packed_view(void *data, gb_dtype dtype, const gb_attn_problem *p, int which)
{
    const int64_t H = p->heads, T = p->seq_len, D = p->head_dim;
    return (gb_tensor){.data = (char *)data + (size_t)(which * H * D) * gb_dtype_size(dtype),
                       .dtype = dtype, .ndim = 4, .shape = {p->batch, H, T, D},
                       .stride = {T * 3 * H * D, D, 3 * H * D, 1}};
}

static gb_tensor plain_view(void *data, gb_dtype dtype, const gb_attn_problem *p)
{
    const int64_t H = p->heads, T = p->seq_len, D = p->head_dim;
    return (gb_tensor){.data = data, .dtype = dtype, .ndim = 4, .shape = {p->batch, H, T, D},
                       .stride = {H * T * D, T * D, D, 1}};
}

/* got (16-bit) against want (f32), n values. */
static void compare16(const char *what, gb_dtype dtype, const uint16_t *got, const float *want,
                      size_t n)
{
    float *wide = kt_floats(n);
    double *w = kt_doubles(n);
    for (size_t i = 0; i < n; i++) {
        wide[i] = widen1(dtype, got[i]);
        w[i] = want[i];
    }
    kt_compare(what, wide, w, n, ATOL16, rtol_of(dtype));
}

static void expect_ok(gb_status status, const char *call)
{
    kt_expect(status == GB_OK, "%s: %s returned status %d (%s)", label, call, (int)status,
              kt_last_error());
}

typedef struct run {
    gb_attn_problem p;
    gb_tensor q, k, v, out, dq, dk, dv, dout;
    void *saved, *workspace;
    size_t saved_bytes;
} run;

static run make_run(const gb_attn_problem *shape, gb_dtype dtype, const buffers *b)
{
    run r = {.p = *shape};
    r.p.dtype = dtype;
    r.q = packed_view(b->qkv, dtype, &r.p, 0);
    r.k = packed_view(b->qkv, dtype, &r.p, 1);
    r.v = packed_view(b->qkv, dtype, &r.p, 2);
    r.dq = packed_view(b->dqkv, dtype, &r.p, 0);
    r.dk = packed_view(b->dqkv, dtype, &r.p, 1);
    r.dv = packed_view(b->dqkv, dtype, &r.p, 2);
    r.out = plain_view(b->out, dtype, &r.p);
    r.dout = plain_view(b->dout, dtype, &r.p);
    size_t workspace_bytes = 0;
    expect_ok(ops->memory(attn, &r.p, &r.saved_bytes, &workspace_bytes), "memory");
    r.saved = kt_floats(r.saved_bytes / 4 + 1);
    r.workspace = kt_floats(workspace_bytes / 4 + 1);
    return r;
}

static void test_case(gb_dtype dtype, int64_t B, int64_t H, int64_t T, int64_t D, int causal,
                      kt_rng *rng)
{
    const gb_attn_problem shape = {.struct_size = sizeof shape, .batch = B, .heads = H,
                                   .seq_len = T, .head_dim = D, .causal = causal};
    const size_t n_qkv = (size_t)(B * T * 3 * H * D), n_out = (size_t)(B * H * T * D);
    buffers b32 = make_buffers(n_qkv, n_out, 4), b16 = make_buffers(n_qkv, n_out, 2);
    float *qkv = b32.qkv, *dout = b32.dout;
    uint16_t *qkv16 = b16.qkv, *dout16 = b16.dout;
    for (size_t i = 0; i < n_qkv; i++) {
        qkv16[i] = narrow1(dtype, (float)kt_uniform(rng, -2, 2));
        qkv[i] = widen1(dtype, qkv16[i]);
    }
    for (size_t i = 0; i < n_out; i++) {
        dout16[i] = narrow1(dtype, (float)kt_uniform(rng, -1, 1));
        dout[i] = widen1(dtype, dout16[i]);
    }
    run r32 = make_run(&shape, GB_F32, &b32), r16 = make_run(&shape, dtype, &b16);
    expect_ok(ops->forward(attn, &r32.p, r32.out, r32.q, r32.k, r32.v, r32.saved,
                           r32.workspace), "f32 forward");
    expect_ok(ops->forward(attn, &r16.p, r16.out, r16.q, r16.k, r16.v, r16.saved,
                           r16.workspace), "16-bit forward");
    char what[160];
    snprintf(what, sizeof what, "%s %s (%lld,%lld,%lld,%lld)%s out", label,
             gb_dtype_name(dtype), (long long)B, (long long)H, (long long)T, (long long)D,
             causal ? " causal" : "");
    compare16(what, dtype, b16.out, b32.out, n_out);
    const size_t n_saved = r32.saved_bytes / sizeof(float);
    double *saved = kt_doubles(n_saved);
    for (size_t i = 0; i < n_saved; i++)
        saved[i] = ((float *)r32.saved)[i];
    kt_compare("  saved (f32)", r16.saved, saved, n_saved, 1e-7, 1e-6);

    // both backward passes see the 16-bit forward's output
    float *out32 = b32.out;
    const uint16_t *out16 = b16.out;
    for (size_t i = 0; i < n_out; i++)
        out32[i] = widen1(dtype, out16[i]);
    memcpy(r32.saved, r16.saved, r32.saved_bytes);
    expect_ok(ops->backward(attn, &r32.p, r32.dq, r32.dk, r32.dv, r32.dout, r32.q, r32.k,
                            r32.v, r32.out, r32.saved, r32.workspace), "f32 backward");
    expect_ok(ops->backward(attn, &r16.p, r16.dq, r16.dk, r16.dv, r16.dout, r16.q, r16.k,
                            r16.v, r16.out, r16.saved, r16.workspace), "16-bit backward");
    compare16("  dq, dk, dv (packed)", dtype, b16.dqkv, b32.dqkv, n_qkv);
}

int main(int argc, char **argv)
{
    gb_test_usage_unless(argc >= 2, argv[0], "path/to/attn-NAME-cpu.so...");
    for (int a = 1; a < argc; a++) {
        const char *name = strstr(argv[a], "attn-math") ? "math"
                         : strstr(argv[a], "attn-mem_efficient") ? "mem_efficient" : "flash";
        const gb_plugin_desc *desc = kt_load_plugin(argv[a], GB_KIND_ATTN, name,
                                                    sizeof(gb_attn_ops));
        ops = desc->ops;
        label = name;
        gb_value values[MAX_OPTIONS];
        gb_test_default_values(desc, values);
        gb_host host = kt_host(2);
        if (ops->create(&host, values, gb_test_cpu_ctx(), &attn) != GB_OK) {
            fprintf(stderr, "FAIL: %s create: %s\n", name, kt_last_error());
            return 1;
        }
        static const gb_dtype dtypes[] = {GB_BF16, GB_F16};
        kt_rng rng = kt_seed(17);
        for (int i = 0; i < 2; i++) {
            kt_section("attn/%s, %s", name, gb_dtype_name(dtypes[i]));
            char reason[256] = "";
            gb_attn_problem p = {.struct_size = sizeof p, .batch = 1, .heads = 1,
                                 .seq_len = 8, .head_dim = 8, .dtype = dtypes[i], .causal = 1};
            kt_expect(ops->eligible(attn, &p, reason, sizeof reason) == 1,
                      "%s: %s not eligible: %s", name, gb_dtype_name(dtypes[i]), reason);
            test_case(dtypes[i], 1, 1, 1, 8, 1, &rng);
            test_case(dtypes[i], 2, 3, 7, 8, 1, &rng);
            test_case(dtypes[i], 2, 2, 33, 48, 0, &rng);
            test_case(dtypes[i], 2, 4, 150, 64, 1, &rng);   // parallel path, several tiles
        }
        ops->destroy(attn);
    }
    return kt_exit_code();
}
