/* Kernel test of the math attention plugin on the CPU (argv[1]: path to attn-math-cpu.so).
 *
 * Forward output and dq, dk, dv are compared with a naive double-precision reference on
 * several (B, H, T, D), causal and not, with the views the core passes: slices of a
 * packed (B, T, 3, H, D) projection for q, k, v (and their gradients) and a (B, T, H, D)
 * buffer for out and dout; one case uses plain contiguous (B, H, T, D) views. saved,
 * workspace and the gradient buffers start as NaN, so anything read before it is written
 * shows. Also: causality (keys and values after position s cannot change output at s),
 * bit-identical reruns, eligibility answers, memory sizes (the workspace holds the packed
 * tiles, and the f32 copies of a 16-bit problem) and refusals. tests/kernels/
 * test_dtype_attn.c covers bf16 and f16 results.
 * Tolerance: 1e-5 abs + 1e-4 rel.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/attn.h"
#include "kernel_test.h"

#define ATOL 1e-5
#define RTOL 1e-4

static const gb_attn_ops *ops;
static void *attn;

/* The views of one problem and the buffers behind them. */
typedef struct attn_views {
    gb_attn_problem p;
    gb_tensor q, k, v, out, dq, dk, dv, dout;
    float *qkv, *dqkv, *o, *dout_buf, *saved, *workspace;
    size_t n_qkv, n_out, saved_bytes, workspace_bytes;
} attn_views;

static gb_tensor view(float *data, int64_t B, int64_t H, int64_t T, int64_t D,
                      const int64_t stride[4])
{
    gb_tensor t = {.data = data, .dtype = GB_F32, .ndim = 4, .shape = {B, H, T, D}};
    memcpy(t.stride, stride, sizeof t.stride);
    return t;
}

static void fill_nan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

/* packed: the core's layout; otherwise every tensor is a contiguous (B, H, T, D). */
static attn_views make_views(int64_t B, int64_t H, int64_t T, int64_t D, int causal,
                             int packed, kt_rng *rng)
{
    attn_views a = {
        .p = {.struct_size = sizeof(gb_attn_problem), .batch = B, .heads = H, .seq_len = T,
              .head_dim = D, .dtype = GB_F32, .causal = causal},
    };
    int64_t C = H * D;
    a.n_qkv = (size_t)(B * T * 3 * C);
    a.n_out = (size_t)(B * T * C);
    a.qkv = kt_floats(a.n_qkv);
    a.dqkv = kt_floats(a.n_qkv);
    a.o = kt_floats(a.n_out);
    a.dout_buf = kt_floats(a.n_out);
    kt_fill(rng, a.qkv, a.n_qkv, -1, 1);
    kt_fill(rng, a.dout_buf, a.n_out, -1, 1);
    fill_nan(a.dqkv, a.n_qkv);
    fill_nan(a.o, a.n_out);
    int64_t s_qkv[4] = {T * 3 * C, D, 3 * C, 1}, s_out[4] = {T * C, D, C, 1};
    int64_t offset_k = C, offset_v = 2 * C;
    if (!packed) {
        int64_t plain[4] = {H * T * D, T * D, D, 1};
        memcpy(s_qkv, plain, sizeof plain);
        memcpy(s_out, plain, sizeof plain);
        offset_k = B * H * T * D;
        offset_v = 2 * offset_k;
    }
    a.q = view(a.qkv, B, H, T, D, s_qkv);
    a.k = view(a.qkv + offset_k, B, H, T, D, s_qkv);
    a.v = view(a.qkv + offset_v, B, H, T, D, s_qkv);
    a.dq = view(a.dqkv, B, H, T, D, s_qkv);
    a.dk = view(a.dqkv + offset_k, B, H, T, D, s_qkv);
    a.dv = view(a.dqkv + offset_v, B, H, T, D, s_qkv);
    a.out = view(a.o, B, H, T, D, s_out);
    a.dout = view(a.dout_buf, B, H, T, D, s_out);
    kt_expect(ops->memory(attn, &a.p, &a.saved_bytes, &a.workspace_bytes) == GB_OK,
              "memory() failed");
    a.saved = kt_floats(a.saved_bytes / sizeof(float));
    a.workspace = kt_floats(a.workspace_bytes / sizeof(float));
    fill_nan(a.saved, a.saved_bytes / sizeof(float));
    fill_nan(a.workspace, a.workspace_bytes / sizeof(float));
    return a;
}

static double at(const gb_tensor *t, int64_t b, int64_t h, int64_t s, int64_t d)
{
    return ((const float *)t->data)[b * t->stride[0] + h * t->stride[1] + s * t->stride[2] + d];
}

/* A view gathered into a contiguous (B, H, T, D) float array, for comparisons. */
static float *gather(const gb_tensor *t)
{
    float *g = kt_floats((size_t)(t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3]));
    size_t i = 0;
    for (int64_t b = 0; b < t->shape[0]; b++)
        for (int64_t h = 0; h < t->shape[1]; h++)
            for (int64_t s = 0; s < t->shape[2]; s++)
                for (int64_t d = 0; d < t->shape[3]; d++)
                    g[i++] = (float)at(t, b, h, s, d);
    return g;
}

/* (B, H, T, D) tensors of the reference, contiguous. */
typedef struct attn_reference {
    double *out, *dq, *dk, *dv;
} attn_reference;

/* kt_attn_reference() of every head. */
static attn_reference reference(const attn_views *a)
{
    const int64_t B = a->p.batch, H = a->p.heads, T = a->p.seq_len, D = a->p.head_dim;
    size_t n = (size_t)(B * H * T * D);
    attn_reference r = {kt_doubles(n), kt_doubles(n), kt_doubles(n), kt_doubles(n)};
    float *q = gather(&a->q), *k = gather(&a->k), *v = gather(&a->v), *dout = gather(&a->dout);
    for (int64_t bh = 0; bh < B * H; bh++) {
        size_t base = (size_t)(bh * T * D);
        kt_head h = {T, D, a->p.causal, q + base, k + base, v + base, dout + base};
        kt_attn_reference(&h, r.out + base, r.dq + base, r.dk + base, r.dv + base);
    }
    return r;
}

static gb_status run_forward(attn_views *a)
{
    return ops->forward(attn, &a->p, a->out, a->q, a->k, a->v, a->saved, a->workspace);
}

static gb_status run_backward(attn_views *a)
{
    return ops->backward(attn, &a->p, a->dq, a->dk, a->dv, a->dout, a->q, a->k, a->v, a->out,
                         a->saved, a->workspace);
}

/* Keys and values after position s are replaced; outputs at 0..s must keep their bits. */
static void check_causality(attn_views *a, kt_rng *rng)
{
    const int64_t B = a->p.batch, H = a->p.heads, T = a->p.seq_len, D = a->p.head_dim;
    int64_t s = (T - 1) / 2;
    float *before = gather(&a->out);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = s + 1; t < T; t++)
                for (int64_t d = 0; d < D; d++) {
                    size_t ik = (size_t)(b * a->k.stride[0] + h * a->k.stride[1] +
                                         t * a->k.stride[2] + d);
                    size_t iv = (size_t)(b * a->v.stride[0] + h * a->v.stride[1] +
                                         t * a->v.stride[2] + d);
                    ((float *)a->k.data)[ik] = (float)kt_uniform(rng, -1, 1);
                    ((float *)a->v.data)[iv] = (float)kt_uniform(rng, -1, 1);
                }
    run_forward(a);
    float *after = gather(&a->out);
    int same_up_to_s = 1, changed_after_s = 0;
    size_t i = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t d = 0; d < D; d++, i++) {
                    int same = memcmp(&before[i], &after[i], sizeof(float)) == 0;
                    if (t <= s)
                        same_up_to_s &= same;
                    else
                        changed_after_s |= !same;
                }
    printf("  %-44s %s\n", "causality (k, v after s do not reach out[s])",
           same_up_to_s ? "holds" : "violated  <-- FAIL");
    kt_expect(same_up_to_s, "causal forward: out at positions <= %lld changed when keys and "
              "values after %lld changed", (long long)s, (long long)s);
    kt_expect(T == 1 || changed_after_s, "causal forward: changing keys and values after %lld "
              "changed nothing at all (test is vacuous)", (long long)s);
}

static void test_case(int64_t B, int64_t H, int64_t T, int64_t D, int causal, int packed,
                      kt_rng *rng)
{
    attn_views a = make_views(B, H, T, D, causal, packed, rng);
    printf("  (B, H, T, D) = (%lld, %lld, %lld, %lld) %s, %s views\n", (long long)B,
           (long long)H, (long long)T, (long long)D, causal ? "causal" : "not causal",
           packed ? "packed" : "contiguous");
    attn_reference r = reference(&a);
    size_t n = (size_t)(B * H * T * D);
    kt_expect(run_forward(&a) == GB_OK, "forward failed: %s", kt_last_error());
    kt_compare("    out", gather(&a.out), r.out, n, ATOL, RTOL);
    kt_expect(run_backward(&a) == GB_OK, "backward failed: %s", kt_last_error());
    kt_compare("    dq", gather(&a.dq), r.dq, n, ATOL, RTOL);
    kt_compare("    dk", gather(&a.dk), r.dk, n, ATOL, RTOL);
    kt_compare("    dv", gather(&a.dv), r.dv, n, ATOL, RTOL);

    float *first = kt_floats(a.n_qkv);
    memcpy(first, a.dqkv, a.n_qkv * sizeof(float));
    fill_nan(a.dqkv, a.n_qkv);
    fill_nan(a.workspace, a.workspace_bytes / sizeof(float));
    run_backward(&a);
    kt_same_bits("    dq, dk, dv, run twice", first, a.dqkv, a.n_qkv);
    if (causal)
        check_causality(&a, rng);
}

static int64_t round16(int64_t n)
{
    return (n + 15) / 16 * 16;
}

/* The workspace bytes the plugin should declare: per thread its packed tiles (K^T or V^T
 * (D, Tp); rows of V or K, Q and dO (T, Dp) each; scores (T, Tp); one strip (R, Dp), each
 * rounded up to 16 floats; Tp and Dp are T and D rounded up to 16, R the kernel set's
 * block height), plus, for a 16-bit problem, 7 f32 copies of a (B, H, T, D) view. */
static size_t math_workspace(int threads, const gb_attn_problem *p, int64_t R)
{
    const int64_t T = p->seq_len, D = p->head_dim, Tp = round16(T), Dp = round16(D);
    const int64_t tiles = round16(D * Tp) + 3 * round16(T * Dp) + round16(T * Tp) +
                          round16(R * Dp);
    const int64_t wide = p->dtype == GB_F32
        ? 0 : 7 * round16(p->batch * p->heads * T * D);
    return (size_t)(threads * tiles + wide) * sizeof(float);
}

/* memory() for `p` is saved B*H*T*T floats and math_workspace() for the block height of
 * one of the kernel sets (5 portable, 6 AVX2 and AVX-512). */
static void expect_memory(const gb_attn_problem *p)
{
    size_t saved = 0, workspace = 0;
    kt_expect(ops->memory(attn, p, &saved, &workspace) == GB_OK, "memory() failed");
    const size_t want_saved = (size_t)(p->batch * p->heads * p->seq_len * p->seq_len) * 4;
    const size_t r5 = math_workspace(2, p, 5), r6 = math_workspace(2, p, 6);
    printf("  memory %s T=%lld D=%lld: saved %zu, workspace %zu\n", gb_dtype_name(p->dtype),
           (long long)p->seq_len, (long long)p->head_dim, saved, workspace);
    kt_expect(saved == want_saved && (workspace == r5 || workspace == r6),
              "memory: saved %zu workspace %zu, want %zu and %zu (or %zu)", saved, workspace,
              want_saved, r6, r5);
}

static void test_planning(void)
{
    kt_section("eligible, memory");
    gb_attn_problem p = {.struct_size = sizeof p, .batch = 2, .heads = 3, .seq_len = 7,
                         .head_dim = 8, .dtype = GB_F32, .causal = 1};
    char reason[256] = "";
    kt_expect(ops->eligible(attn, &p, reason, sizeof reason) == 1, "f32 causal not eligible: %s",
              reason);
    p.causal = 0;
    kt_expect(ops->eligible(attn, &p, reason, sizeof reason) == 1,
              "f32 non-causal not eligible: %s", reason);
    expect_memory(&p);
    p.seq_len = 65;
    p.head_dim = 48;
    expect_memory(&p);
    for (gb_dtype dtype = GB_BF16; dtype <= GB_F16; dtype++) {
        p.dtype = dtype;
        kt_expect(ops->eligible(attn, &p, reason, sizeof reason) == 1,
                  "%s not eligible: %s", gb_dtype_name(dtype), reason);
        expect_memory(&p);
    }

    static const struct { gb_dtype dtype; int causal; int64_t T, D; const char *mention; }
        no[] = {{GB_I32, 1, 7, 8, "i32"}, {GB_U16, 1, 7, 8, "u16"}, {GB_F32, 2, 7, 8, "causal"},
                {GB_F32, 1, 0, 8, "seq_len"}, {GB_F32, 1, 7, 0, "head_dim"}};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        p.dtype = no[i].dtype;
        p.causal = no[i].causal;
        p.seq_len = no[i].T;
        p.head_dim = no[i].D;
        reason[0] = '\0';
        int yes = ops->eligible(attn, &p, reason, sizeof reason);
        printf("  not eligible: %s\n", reason);
        kt_expect(!yes && strstr(reason, no[i].mention), "ineligible problem %zu: answer %d, "
                  "reason \"%s\" should mention \"%s\"", i, yes, reason, no[i].mention);
    }
    char tiny[8];
    p.dtype = GB_I32;
    ops->eligible(attn, &p, tiny, sizeof tiny);
    kt_expect(memchr(tiny, '\0', sizeof tiny) != NULL, "reason overflowed a small buffer");
}

static void test_refusals(kt_rng *rng)
{
    kt_section("refusals");
    attn_views a = make_views(1, 2, 5, 8, 1, 1, rng);
    a.k.stride[3] = 2;
    kt_clear_error();
    kt_expect(run_forward(&a) == GB_ERR_UNSUPPORTED && strstr(kt_last_error(), "stride"),
              "forward with k.stride[3] = 2 was not refused as unsupported");
    a.k.stride[3] = 1;
    a.dv.shape[2] = 4;
    kt_clear_error();
    kt_expect(run_backward(&a) == GB_ERR_INVALID_ARG && strstr(kt_last_error(), "dv"),
              "backward with a wrong dv shape was not refused as an invalid argument");
    a.dv.shape[2] = 5;
    a.p.dtype = GB_I32;
    kt_expect(run_forward(&a) == GB_ERR_UNSUPPORTED, "forward of an i32 problem not refused");
    a.p.dtype = GB_BF16;
    kt_clear_error();
    kt_expect(run_forward(&a) == GB_ERR_INVALID_ARG && strstr(kt_last_error(), "bf16"),
              "forward of a bf16 problem on f32 views was not refused as an invalid argument");
}

int main(int argc, char **argv)
{
    const gb_plugin_desc *desc =
        kt_load_arg(argc, argv, "attn-math-cpu.so", GB_KIND_ATTN, "math", sizeof(gb_attn_ops));
    ops = desc->ops;
    kt_expect(ops->create && ops->destroy && ops->eligible && ops->memory && ops->forward &&
              ops->backward, "a gb_attn_ops entry is NULL");
    gb_host host = kt_host(2);
    gb_device_ctx cuda = {.struct_size = sizeof cuda, .device = GB_DEVICE_CUDA};
    void *refused = NULL;
    kt_expect(ops->create(&host, NULL, &cuda, &refused) == GB_ERR_UNSUPPORTED,
              "create on a cuda device context was not refused");
    gb_device_ctx cpu = {.struct_size = sizeof cpu, .device = GB_DEVICE_CPU};
    if (ops->create(&host, NULL, &cpu, &attn) != GB_OK) {
        fprintf(stderr, "FAIL: create: %s\n", kt_last_error());
        return 1;
    }
    test_planning();

    kt_section("forward and backward against a double reference");
    kt_rng rng = kt_seed(7);
    test_case(1, 1, 1, 8, 1, 1, &rng);
    test_case(2, 3, 7, 8, 1, 1, &rng);
    test_case(2, 3, 7, 8, 0, 1, &rng);
    test_case(1, 2, 65, 48, 1, 1, &rng);
    test_case(2, 2, 16, 1, 1, 1, &rng);
    test_case(2, 2, 33, 48, 0, 0, &rng);
    test_case(2, 4, 64, 64, 1, 1, &rng);   // parallel path, GPT-2 head size
    test_refusals(&rng);
    ops->destroy(attn);
    return kt_exit_code();
}
