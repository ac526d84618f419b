/* Conformance checks of attention plugins: forward and backward against attn/math.
 *
 * On each shape of a table (tiny and odd sizes, T on both sides of the usual tile sizes
 * 64 and 128, head_dim up to 128, causal or not, the core's packed views or plain
 * contiguous ones) the plugin is asked whether it is eligible, and if so it runs forward
 * and backward on device memory while attn/math runs on a host copy of the same inputs.
 * out, dq, dk and dv must agree within 1e-5 abs + 1e-4 rel. The same row also checks
 * that q, k and v are left alone, that a second run gives the same bits (resume and A/B
 * depend on it), and for causal problems that keys and values after a position s cannot
 * change the output at s and, for a plugin with ABI 1.7's forward_cached, that half the
 * rows and then one row at a time over a KV cache give forward's out. Outputs, saved and
 * workspace start as NaN, so whatever is read before it is written shows.
 *
 * With --strict (kit->strict), what gearbox's own CPU attention plugins promise beyond
 * the contract, each its own row: causal outputs at positions <= s keep their bits (not
 * just their values) when later keys and values change; the same bits at 1, 2 and 3
 * threads (which takes attn/flash through both ways it splits its backward pass) and for
 * every choice of an `isa` option this CPU runs; small f32 and bf16 problems eligible,
 * i32 refused with a reason naming it, and a reason that fits an 8-byte buffer; forward
 * refusing a k with stride[3] = 2 (GB_ERR_UNSUPPORTED, naming the stride), backward a dv
 * of the wrong shape (GB_ERR_INVALID_ARG, naming dv) and an i32 problem; saved and
 * workspace bytes linear in T (f(4T) - f(2T) = 2 (f(2T) - f(T))), except for attn/math,
 * which keeps the (T, T) scores by design.
 *
 * bf16 and f16: the same checks on a subset of the shapes, for a plugin that says it is
 * eligible for the dtype. q, k, v and dout are rounded to the dtype, and attn/math runs in
 * f32 on those rounded values; a 16-bit plugin may round its inputs' products and its
 * outputs, so the tolerance is 1e-2 of the tensor's largest magnitude + 2e-2 relative for
 * bf16, 2e-3 + 4e-3 relative for f16 (gearbox's CPU plugins compute in f32 and round once,
 * within 2^-8 and 2^-11 relative). A plugin that only does 16-bit passes with its f32 rows
 * unsupported.
 *
 * Left out: timing, which is `gearbox bench attn`'s business.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/attn.h"
#include "gearbox/convert.h"
#include "kit.h"

/* |got - want| <= abs + scaled * max |want| + rel * |want|, per dtype of the problem. */
typedef struct tolerance {
    double abs, scaled, rel;
    const char *text;   /* for the report */
} tolerance;

static tolerance tolerance_of(gb_dtype dtype)
{
    switch (dtype) {
    case GB_BF16: return (tolerance){0.0, 1e-2, 2e-2, "1e-2 * max|ref| + 2e-2 rel"};
    case GB_F16: return (tolerance){0.0, 2e-3, 4e-3, "2e-3 * max|ref| + 4e-3 rel"};
    default: return (tolerance){1e-5, 0.0, 1e-4, "1e-5 abs + 1e-4 rel"};
    }
}

typedef struct shape {
    int64_t B, H, T, D;
    int causal, packed;
} shape;

/* T = 1, 7, 20, 33, 63, 64, 65, 100, 130, 257 and head_dim 8 to 128 (48, 80 and 88 not
 * powers of two; 88 in a tile of 96 columns), on both sides of the usual tile sizes 16,
 * 32, 64 and 128. */
static const shape shapes[] = {
    {1, 1, 1, 8, 1, 1},    {1, 1, 1, 64, 0, 0},   {2, 3, 7, 8, 1, 1},     {2, 3, 7, 8, 0, 1},
    {2, 3, 7, 16, 1, 1},   {2, 3, 7, 8, 0, 0},    {1, 1, 20, 128, 1, 0},  {2, 2, 33, 48, 0, 0},
    {1, 2, 63, 32, 1, 1},  {2, 1, 63, 80, 0, 1},  {2, 2, 64, 48, 1, 0},   {1, 3, 64, 64, 1, 1},
    {2, 4, 64, 64, 1, 1},  {1, 2, 65, 48, 1, 1},  {1, 3, 65, 64, 1, 1},   {2, 2, 65, 16, 0, 1},
    {1, 2, 100, 128, 1, 1}, {2, 2, 100, 80, 1, 0}, {1, 2, 130, 32, 1, 1}, {1, 1, 257, 8, 0, 0},
    {2, 2, 257, 64, 1, 1}, {1, 2, 257, 48, 1, 1},  {1, 2, 33, 88, 1, 0},
};

/* The shapes the 16-bit rows run: odd and tile-sized T, head_dim 8 to 128. */
static const shape shapes_16bit[] = {
    {2, 3, 7, 8, 1, 1},    {2, 2, 33, 48, 0, 0},  {1, 2, 63, 32, 1, 1}, {2, 1, 63, 80, 0, 1},
    {1, 3, 65, 64, 1, 1},  {1, 2, 100, 128, 1, 1}, {1, 2, 130, 32, 1, 1}, {2, 2, 257, 64, 1, 1},
};

/* One problem: its inputs on the host and the layout of its views. Packed: q, k, v are
 * slices of a (B, T, 3, H, D) projection and out a (B, T, H, D) buffer, as the core passes
 * them; otherwise each is a contiguous (B, H, T, D) tensor. The host keeps f32 (holding
 * values of p.dtype); device buffers hold p.dtype elements. */
typedef struct attn_case {
    gb_attn_problem p;
    size_t n_qkv, n_out;          /* elements in the q/k/v buffer and in the out buffer */
    int64_t stride_qkv[4], stride_out[4];
    int64_t offset_k, offset_v;   /* elements from the start of the q/k/v buffer */
    float *qkv, *dout;            /* host inputs */
} attn_case;

/* The memory one run uses: host f32 for the reference, device p.dtype for the plugin
 * under test. */
typedef struct attn_buffers {
    void *qkv, *dqkv, *out, *dout;
    void *saved, *workspace;
} attn_buffers;

/* What a run leaves, copied to the host. */
typedef struct attn_result {
    float *qkv, *dqkv, *out;
} attn_result;

/* x (n) rounded to `dtype` and widened back: values a 16-bit buffer holds exactly. */
static void round_to(gb_dtype dtype, float *x, size_t n)
{
    for (size_t i = 0; dtype != GB_F32 && i < n; i++)
        x[i] = dtype == GB_BF16 ? gb_f32_from_bf16(gb_bf16_from_f32(x[i]))
                                : gb_f32_from_f16(gb_f16_from_f32(x[i]));
}

static int make_case(gb_kit *kit, const shape *s, gb_dtype dtype, gb_rng *rng, attn_case *c)
{
    const int64_t B = s->B, H = s->H, T = s->T, D = s->D, C = H * D;
    *c = (attn_case){
        .p = {.struct_size = sizeof(gb_attn_problem), .batch = B, .heads = H, .seq_len = T,
              .head_dim = D, .dtype = dtype, .causal = s->causal},
        .n_qkv = (size_t)(3 * B * T * C),
        .n_out = (size_t)(B * T * C),
    };
    if (s->packed) {
        const int64_t qkv[4] = {T * 3 * C, D, 3 * C, 1}, out[4] = {T * C, D, C, 1};
        memcpy(c->stride_qkv, qkv, sizeof qkv);
        memcpy(c->stride_out, out, sizeof out);
        c->offset_k = C;
        c->offset_v = 2 * C;
    } else {
        const int64_t plain[4] = {H * T * D, T * D, D, 1};
        memcpy(c->stride_qkv, plain, sizeof plain);
        memcpy(c->stride_out, plain, sizeof plain);
        c->offset_k = B * H * T * D;
        c->offset_v = 2 * c->offset_k;
    }
    c->qkv = gb_kit_host_alloc(kit, c->n_qkv * sizeof(float));
    c->dout = gb_kit_host_alloc(kit, c->n_out * sizeof(float));
    if (!c->qkv || !c->dout)
        return -1;
    gb_kit_fill(rng, c->qkv, c->n_qkv, -1, 1);
    gb_kit_fill(rng, c->dout, c->n_out, -1, 1);
    round_to(dtype, c->qkv, c->n_qkv);
    round_to(dtype, c->dout, c->n_out);
    return 0;
}

/* The same problem in f32, as the reference runs it on the host. */
static attn_case in_f32(const attn_case *c)
{
    attn_case wide = *c;
    wide.p.dtype = GB_F32;
    return wide;
}

static size_t elem_size(const attn_case *c)
{
    return gb_dtype_size(c->p.dtype);
}

static gb_tensor view(void *base, int64_t offset, const attn_case *c, const int64_t stride[4])
{
    gb_tensor t = {.data = (char *)base + (size_t)offset * elem_size(c), .dtype = c->p.dtype,
                   .ndim = 4, .shape = {c->p.batch, c->p.heads, c->p.seq_len, c->p.head_dim}};
    memcpy(t.stride, stride, sizeof t.stride);
    return t;
}

/* Uploads n f32 values as the problem's dtype. 0, or -1 (reason in the kit). */
static int upload_as(gb_kit *kit, const attn_case *c, void *device, const float *host, size_t n)
{
    if (c->p.dtype == GB_F32)
        return gb_kit_upload(kit, device, host, n * sizeof(float));
    uint16_t *narrow = gb_kit_host_alloc(kit, n * sizeof *narrow);
    if (!narrow)
        return -1;
    for (size_t i = 0; i < n; i++)
        narrow[i] = c->p.dtype == GB_BF16 ? gb_bf16_from_f32(host[i]) : gb_f16_from_f32(host[i]);
    return gb_kit_upload(kit, device, narrow, n * sizeof *narrow);
}

/* Device memory holding n f32 values as the problem's dtype, or NULL. */
static void *device_copy_as(gb_kit *kit, const attn_case *c, const float *host, size_t n)
{
    void *device = gb_kit_device_alloc(kit, n * elem_size(c));
    return device && upload_as(kit, c, device, host, n) == 0 ? device : NULL;
}

/* Downloads n elements of the problem's dtype into f32. 0, or -1. */
static int download_as(gb_kit *kit, const attn_case *c, float *host, const void *device,
                       size_t n)
{
    if (c->p.dtype == GB_F32)
        return gb_kit_download(kit, host, device, n * sizeof(float));
    uint16_t *narrow = gb_kit_host_alloc(kit, n * sizeof *narrow);
    if (!narrow || gb_kit_download(kit, narrow, device, n * sizeof *narrow))
        return -1;
    for (size_t i = 0; i < n; i++)
        host[i] = c->p.dtype == GB_BF16 ? gb_f32_from_bf16(narrow[i]) : gb_f32_from_f16(narrow[i]);
    return 0;
}

/* Element (b, h, t, d) of a view with these strides, as an offset in floats. */
static int64_t at(const int64_t stride[4], int64_t b, int64_t h, int64_t t, int64_t d)
{
    return b * stride[0] + h * stride[1] + t * stride[2] + d * stride[3];
}

/* A view of a host buffer gathered into a contiguous (B, H, T, D) array. */
static float *gather(gb_kit *kit, const attn_case *c, const float *base, int64_t offset,
                     const int64_t stride[4])
{
    const gb_attn_problem *p = &c->p;
    float *g = gb_kit_host_alloc(kit, (size_t)(p->batch * p->heads * p->seq_len *
                                               p->head_dim) * sizeof(float));
    if (!g)
        return NULL;
    size_t i = 0;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t h = 0; h < p->heads; h++)
            for (int64_t t = 0; t < p->seq_len; t++)
                for (int64_t d = 0; d < p->head_dim; d++)
                    g[i++] = base[offset + at(stride, b, h, t, d)];
    return g;
}

static gb_status run_forward(const gb_kit_instance *ki, const attn_case *c, attn_buffers *m)
{
    const gb_attn_ops *ops = ki->ops;
    return ops->forward(ki->inst.self, &c->p, view(m->out, 0, c, c->stride_out),
                        view(m->qkv, 0, c, c->stride_qkv),
                        view(m->qkv, c->offset_k, c, c->stride_qkv),
                        view(m->qkv, c->offset_v, c, c->stride_qkv), m->saved, m->workspace);
}

static gb_status run_backward(const gb_kit_instance *ki, const attn_case *c, attn_buffers *m)
{
    const gb_attn_ops *ops = ki->ops;
    return ops->backward(ki->inst.self, &c->p, view(m->dqkv, 0, c, c->stride_qkv),
                         view(m->dqkv, c->offset_k, c, c->stride_qkv),
                         view(m->dqkv, c->offset_v, c, c->stride_qkv),
                         view(m->dout, 0, c, c->stride_out), view(m->qkv, 0, c, c->stride_qkv),
                         view(m->qkv, c->offset_k, c, c->stride_qkv),
                         view(m->qkv, c->offset_v, c, c->stride_qkv),
                         view(m->out, 0, c, c->stride_out), m->saved, m->workspace);
}

/* attn/math on host copies of the inputs; its results stay in *m. */
static int run_reference(gb_kit *kit, const gb_kit_instance *ref, const attn_case *c16,
                         attn_buffers *m, const char *check)
{
    const gb_attn_ops *ops = ref->ops;
    attn_case wide = in_f32(c16);
    const attn_case *c = &wide;
    size_t saved = 0, workspace = 0;
    gb_status st = ops->memory(ref->inst.self, &c->p, &saved, &workspace);
    m->qkv = gb_kit_host_alloc(kit, c->n_qkv * sizeof(float));
    m->dqkv = gb_kit_host_alloc(kit, c->n_qkv * sizeof(float));
    m->out = gb_kit_host_alloc(kit, c->n_out * sizeof(float));
    m->dout = c16->dout;
    m->saved = gb_kit_host_alloc(kit, saved);
    m->workspace = gb_kit_host_alloc(kit, workspace);
    if (st == GB_OK && (!m->qkv || !m->dqkv || !m->out || !m->saved || !m->workspace)) {
        gb_kit_report_memory(kit, check);
        return -1;
    }
    if (st == GB_OK) {
        memcpy(m->qkv, c->qkv, c->n_qkv * sizeof(float));
        if ((st = run_forward(ref, c, m)) == GB_OK)
            st = run_backward(ref, c, m);
    }
    if (st != GB_OK) {
        gb_kit_report(kit, check, GB_KIT_FAIL, "the reference attn/math failed (%s): %s",
                      gb_status_name(st), ref->inst.error);
        return -1;
    }
    return 0;
}

/* Device buffers for the plugin under test, inputs uploaded, everything else NaN. */
static int device_buffers(gb_kit *kit, const attn_case *c, size_t saved, size_t workspace,
                          attn_buffers *m)
{
    size_t most = c->n_qkv;
    most = saved / sizeof(float) > most ? saved / sizeof(float) : most;
    most = workspace / sizeof(float) > most ? workspace / sizeof(float) : most;
    float *nan = gb_kit_host_alloc(kit, most * sizeof(float));
    if (!nan)
        return -1;
    gb_kit_fill_nan(nan, most);
    m->qkv = device_copy_as(kit, c, c->qkv, c->n_qkv);
    m->dout = device_copy_as(kit, c, c->dout, c->n_out);
    m->dqkv = device_copy_as(kit, c, nan, c->n_qkv);
    m->out = device_copy_as(kit, c, nan, c->n_out);
    m->saved = gb_kit_device_copy(kit, nan, saved);
    m->workspace = gb_kit_device_copy(kit, nan, workspace);
    return m->qkv && m->dout && m->dqkv && m->out && m->saved && m->workspace ? 0 : -1;
}

static int download_result(gb_kit *kit, const attn_case *c, const attn_buffers *m,
                           attn_result *r)
{
    r->qkv = gb_kit_host_alloc(kit, c->n_qkv * sizeof(float));
    r->dqkv = gb_kit_host_alloc(kit, c->n_qkv * sizeof(float));
    r->out = gb_kit_host_alloc(kit, c->n_out * sizeof(float));
    if (!r->qkv || !r->dqkv || !r->out)
        return -1;
    return download_as(kit, c, r->qkv, m->qkv, c->n_qkv) ||
                   download_as(kit, c, r->dqkv, m->dqkv, c->n_qkv) ||
                   download_as(kit, c, r->out, m->out, c->n_out)
               ? -1
               : 0;
}

static double max_magnitude(const float *x, size_t n)
{
    double most = 0.0;
    for (size_t i = 0; i < n; i++)
        most = fabs((double)x[i]) > most ? fabs((double)x[i]) : most;
    return most;
}

/* The absolute part of the tolerance for a tensor whose largest magnitude is `most`. */
static double atol_of(const attn_case *c, double most)
{
    tolerance t = tolerance_of(c->p.dtype);
    return t.abs + t.scaled * most;
}

/* gb_kit_close at the problem dtype's tolerance. */
static int close_enough(const attn_case *c, const float *got, const float *want, size_t n,
                        char *detail, size_t cap)
{
    return gb_kit_close(got, want, n, atol_of(c, max_magnitude(want, n)),
                        tolerance_of(c->p.dtype).rel, detail, cap);
}

/* Compares out, dq, dk, dv of the plugin with the reference's; adds what differs to
 * `problems` and returns the largest absolute difference. */
static double compare_outputs(gb_kit *kit, const attn_case *c, const attn_result *got,
                              const attn_buffers *want, char *problems, size_t cap)
{
    static const char *const names[] = {"out", "dq", "dk", "dv"};
    const int64_t offsets[] = {0, 0, c->offset_k, c->offset_v};
    size_t n = (size_t)(c->p.batch * c->p.heads * c->p.seq_len * c->p.head_dim);
    double worst = 0.0;
    for (int i = 0; i < 4; i++) {
        const int64_t *stride = i == 0 ? c->stride_out : c->stride_qkv;
        float *g = gather(kit, c, i == 0 ? got->out : got->dqkv, offsets[i], stride);
        float *w = gather(kit, c, i == 0 ? want->out : want->dqkv, offsets[i], stride);
        char detail[256];
        if (!g || !w) {
            gb_kit_append(problems, cap, "out of host memory");
            return worst;
        }
        if (!close_enough(c, g, w, n, detail, sizeof detail))
            gb_kit_append(problems, cap, "%s differs from attn/math: %s", names[i], detail);
        for (size_t j = 0; j < n; j++)
            worst = fabs((double)g[j] - w[j]) > worst ? fabs((double)g[j] - w[j]) : worst;
    }
    return worst;
}

/* When out is wrong, whether it is the attention of q * sqrt(head_dim), i.e. attention
 * without its 1/sqrt(head_dim) scale: attn/math answers that on a scaled copy of q. */
static void diagnose_scale(gb_kit *kit, const gb_kit_instance *ref, const attn_case *c,
                           const float *got_out, char *problems, size_t cap)
{
    const gb_attn_problem *p = &c->p;
    attn_case unscaled = *c;
    unscaled.qkv = gb_kit_host_alloc(kit, c->n_qkv * sizeof(float));
    if (!unscaled.qkv)
        return;
    memcpy(unscaled.qkv, c->qkv, c->n_qkv * sizeof(float));
    float root = sqrtf((float)p->head_dim); /* 16-bit rounding of the product is in tolerance */
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t h = 0; h < p->heads; h++)
            for (int64_t t = 0; t < p->seq_len; t++)
                for (int64_t d = 0; d < p->head_dim; d++)
                    unscaled.qkv[at(c->stride_qkv, b, h, t, d)] *= root;
    attn_buffers want;
    char detail[256];
    if (run_reference(kit, ref, &unscaled, &want, "attn: diagnosis") == 0) {
        float *g = gather(kit, c, got_out, 0, c->stride_out);
        float *w = gather(kit, c, want.out, 0, c->stride_out);
        if (g && w && close_enough(c, g, w, (size_t)(p->batch * p->heads * p->seq_len *
                                                    p->head_dim), detail, sizeof detail))
            gb_kit_append(problems, cap, "out is attention without the 1/sqrt(head_dim) "
                          "scale on the scores");
    }
}

/* Keys and values after position s get new values; out at positions 0..s must not move.
 * `first` holds the plugin's out before the change. */
static void check_causality(gb_kit *kit, const gb_kit_instance *ki, const attn_case *c,
                            attn_buffers *m, const float *first, gb_rng *rng, char *problems,
                            size_t cap)
{
    const gb_attn_problem *p = &c->p;
    int64_t s = (p->seq_len - 1) / 2;
    float *qkv = gb_kit_host_alloc(kit, c->n_qkv * sizeof(float));
    float *out = gb_kit_host_alloc(kit, c->n_out * sizeof(float));
    if (!qkv || !out) {
        gb_kit_append(problems, cap, "out of host memory");
        return;
    }
    memcpy(qkv, c->qkv, c->n_qkv * sizeof(float));
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t h = 0; h < p->heads; h++)
            for (int64_t t = s + 1; t < p->seq_len; t++)
                for (int64_t d = 0; d < p->head_dim; d++) {
                    qkv[c->offset_k + at(c->stride_qkv, b, h, t, d)] =
                        (float)(2.0 * gb_rng_uniform(rng) - 1.0);
                    qkv[c->offset_v + at(c->stride_qkv, b, h, t, d)] =
                        (float)(2.0 * gb_rng_uniform(rng) - 1.0);
                }
    round_to(p->dtype, qkv, c->n_qkv);
    gb_status st = GB_ERR_NO_MEMORY;
    if (upload_as(kit, c, m->qkv, qkv, c->n_qkv) == 0 &&
        (st = run_forward(ki, c, m)) == GB_OK && download_as(kit, c, out, m->out, c->n_out) != 0)
        st = kit->memory_status;
    if (st != GB_OK) {
        gb_kit_append(problems, cap, "forward failed when run again (%s): %s",
                      gb_status_name(st), ki->inst.error);
        return;
    }
    int64_t leaked = 0, reached = 0, moved_bits = 0;
    double atol = atol_of(c, max_magnitude(first, c->n_out)), rtol = tolerance_of(p->dtype).rel;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t h = 0; h < p->heads; h++)
            for (int64_t t = 0; t < p->seq_len; t++)
                for (int64_t d = 0; d < p->head_dim; d++) {
                    int64_t i = at(c->stride_out, b, h, t, d);
                    /* within tolerance: a plugin may round differently once the masked
                     * scores change, as long as they carry no weight */
                    int same = fabs((double)out[i] - first[i]) <= atol + rtol * fabs(first[i]);
                    leaked += t <= s && !same;
                    reached += t > s && !same;
                    moved_bits += t <= s && same && gb_kit_bits_differ(&out[i], &first[i], 1);
                }
    if (leaked)
        gb_kit_append(problems, cap, "causal mask violated: changing keys and values after "
                      "position %lld changed %lld output values at positions <= %lld",
                      (long long)s, (long long)leaked, (long long)s);
    else if (!reached)
        gb_kit_append(problems, cap, "changing keys and values after position %lld changed "
                      "no output at all", (long long)s);
    if (kit->strict && moved_bits)
        gb_kit_append(problems, cap, "strict: causal outputs not bit-identical: changing "
                      "keys and values after position %lld moved the bits of %lld output "
                      "values at positions <= %lld", (long long)s, (long long)moved_bits,
                      (long long)s);
}

/* The same inputs again, outputs reset to NaN: the same bits must come out. */
static void check_rerun(gb_kit *kit, const gb_kit_instance *ki, const attn_case *c,
                        attn_buffers *m, const attn_result *first, char *problems, size_t cap)
{
    float *nan = gb_kit_host_alloc(kit, c->n_qkv * sizeof(float));
    attn_result again;
    gb_status st = GB_OK;
    if (nan)
        gb_kit_fill_nan(nan, c->n_qkv);
    if (!nan || upload_as(kit, c, m->qkv, c->qkv, c->n_qkv) ||
        upload_as(kit, c, m->dqkv, nan, c->n_qkv) || upload_as(kit, c, m->out, nan, c->n_out) ||
        (st = run_forward(ki, c, m)) != GB_OK || (st = run_backward(ki, c, m)) != GB_OK ||
        download_result(kit, c, m, &again)) {
        gb_kit_append(problems, cap, "a second run failed: %s",
                      st != GB_OK ? ki->inst.error : kit->memory_error);
        return;
    }
    size_t differ = gb_kit_bits_differ(again.out, first->out, c->n_out) +
                    gb_kit_bits_differ(again.dqkv, first->dqkv, c->n_qkv);
    if (differ)
        gb_kit_append(problems, cap, "not deterministic: a second run on the same inputs "
                      "differs in %zu values", differ);
}

/* ABI 1.7's forward_cached, on a causal problem of a plugin that has it: the first half of
 * the rows as one call over empty caches, then each further row alone over the rows
 * cached before it, must give forward's out (`first`, on the host) within the dtype's
 * tolerance. The caches are (B, H, T, D) views of (B, T, H, D) buffers, as the engine's. */
static void check_cached(gb_kit *kit, const gb_kit_instance *ki, const attn_case *c,
                         attn_buffers *m, const float *first, char *problems, size_t cap)
{
    const gb_attn_ops *ops = ki->ops;
    const int64_t T = c->p.seq_len, D = c->p.head_dim, C = c->p.heads * D;
    const int64_t cache_stride[4] = {T * C, D, C, 1};
    float *nan = gb_kit_host_alloc(kit, c->n_out * sizeof(float));
    float *out = gb_kit_host_alloc(kit, c->n_out * sizeof(float));
    if (nan)
        gb_kit_fill_nan(nan, c->n_out);
    void *keys = nan ? device_copy_as(kit, c, nan, c->n_out) : NULL;
    void *values = nan ? device_copy_as(kit, c, nan, c->n_out) : NULL;
    if (!out || !keys || !values || upload_as(kit, c, m->out, nan, c->n_out)) {
        gb_kit_append(problems, cap, "forward_cached: %s", kit->memory_error);
        return;
    }
    gb_status st = GB_OK;
    for (int64_t past = 0, n = T > 1 ? T / 2 : 1; st == GB_OK && past < T; past += n, n = 1) {
        attn_case rows = *c, whole = *c;
        rows.p.seq_len = n;
        whole.p.seq_len = past + n;
        const int64_t q = past * c->stride_qkv[2];
        st = ops->forward_cached(ki->inst.self, &rows.p, past,
                                 view(m->out, past * c->stride_out[2], &rows, c->stride_out),
                                 view(m->qkv, q, &rows, c->stride_qkv),
                                 view(m->qkv, c->offset_k + q, &rows, c->stride_qkv),
                                 view(m->qkv, c->offset_v + q, &rows, c->stride_qkv),
                                 view(keys, 0, &whole, cache_stride),
                                 view(values, 0, &whole, cache_stride));
    }
    char detail[256];
    if (st == GB_OK && download_as(kit, c, out, m->out, c->n_out))
        st = kit->memory_status;
    if (st != GB_OK)
        gb_kit_append(problems, cap, "forward_cached failed (%s): %s", gb_status_name(st),
                      ki->inst.error);
    else if (!close_enough(c, out, first, c->n_out, detail, sizeof detail))
        gb_kit_append(problems, cap, "forward_cached (half the rows, then one at a time) "
                      "differs from forward: %s", detail);
}

static void check_shape(gb_kit *kit, const gb_kit_instance *ki, const gb_kit_instance *ref,
                        const shape *s, gb_dtype dtype, gb_rng *rng)
{
    const gb_attn_ops *ops = ki->ops;
    char check[96];
    snprintf(check, sizeof check, "%s%sB%lld H%lld T%lld D%lld %s, %s views",
             dtype == GB_F32 ? "" : gb_dtype_name(dtype), dtype == GB_F32 ? "" : " ",
             (long long)s->B, (long long)s->H, (long long)s->T, (long long)s->D,
             s->causal ? "causal" : "not causal", s->packed ? "packed" : "contiguous");
    attn_case c;
    if (make_case(kit, s, dtype, rng, &c)) {
        gb_kit_report_memory(kit, check);
        return;
    }
    char reason[512] = "";
    if (!ops->eligible(ki->inst.self, &c.p, reason, sizeof reason)) {
        if (reason[0])
            gb_kit_report(kit, check, GB_KIT_UNSUPPORTED, "not eligible: %s", reason);
        else
            gb_kit_report(kit, check, GB_KIT_FAIL, "eligible() said no without a reason");
        return;
    }
    size_t saved = 0, workspace = 0;
    gb_status st = ops->memory(ki->inst.self, &c.p, &saved, &workspace);
    if (st != GB_OK) {
        gb_kit_report_call(kit, check, ki, "memory", st);
        return;
    }
    attn_buffers want, m;
    if (run_reference(kit, ref, &c, &want, check))
        return;
    if (device_buffers(kit, &c, saved, workspace, &m)) {
        gb_kit_report_memory(kit, check);
        return;
    }
    if ((st = run_forward(ki, &c, &m)) != GB_OK) {
        gb_kit_report_call(kit, check, ki, "forward", st);
        return;
    }
    if ((st = run_backward(ki, &c, &m)) != GB_OK) {
        gb_kit_report_call(kit, check, ki, "backward", st);
        return;
    }
    attn_result got;
    if (download_result(kit, &c, &m, &got)) {
        gb_kit_report_memory(kit, check);
        return;
    }
    /* what names a cause comes first in the row, the raw differences after it */
    char causes[512] = "", problems[1536] = "";
    double worst = compare_outputs(kit, &c, &got, &want, problems, sizeof problems);
    if (strstr(problems, "out differs"))
        diagnose_scale(kit, ref, &c, got.out, causes, sizeof causes);
    size_t touched = gb_kit_bits_differ(got.qkv, c.qkv, c.n_qkv);
    if (touched)
        gb_kit_append(problems, sizeof problems, "forward or backward wrote into q, k or v "
                      "(%zu values changed)", touched);
    check_rerun(kit, ki, &c, &m, &got, problems, sizeof problems);
    const int cached = s->causal && GB_ATTN_HAS(ops, forward_cached);
    if (cached)
        check_cached(kit, ki, &c, &m, got.out, problems, sizeof problems);
    if (s->causal && s->T > 1)
        check_causality(kit, ki, &c, &m, got.out, rng, causes, sizeof causes);

    if (causes[0] || problems[0])
        gb_kit_report(kit, check, GB_KIT_FAIL, "%s%s%s", causes,
                      causes[0] && problems[0] ? "; " : "", problems);
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "out, dq, dk, dv within %s of attn/math in f32 "
                      "(max abs diff %.2g); rerun bit-identical%s%s", tolerance_of(dtype).text,
                      worst, s->causal && s->T > 1 ? (kit->strict ? "; causal, bit-exact"
                                                                  : "; causal") : "",
                      cached ? "; forward_cached as forward" : "");
}

/* ---- --strict ------------------------------------------------------------------------- */

/* Forward and backward of `ki` on a fresh problem of shape `s` (seeded by `seed`): out
 * and dq/dk/dv on the host in *r. 0, or -1 with the reason in `why`. */
static int run_once(gb_kit *kit, const gb_kit_instance *ki, const shape *s, uint64_t seed,
                    attn_case *c, attn_result *r, char *why, size_t cap)
{
    const gb_attn_ops *ops = ki->ops;
    gb_rng rng = gb_rng_stream(seed, 0, 0, 0);
    size_t saved = 0, workspace = 0;
    attn_buffers m;
    gb_status st = GB_OK;
    if (make_case(kit, s, GB_F32, &rng, c) ||
        (st = ops->memory(ki->inst.self, &c->p, &saved, &workspace)) != GB_OK ||
        device_buffers(kit, c, saved, workspace, &m) || (st = run_forward(ki, c, &m)) != GB_OK ||
        (st = run_backward(ki, c, &m)) != GB_OK || download_result(kit, c, &m, r)) {
        snprintf(why, cap, "%.200s", st != GB_OK ? ki->inst.error : kit->memory_error);
        return -1;
    }
    return 0;
}

/* The plugin under test created with `overrides` at each of `threads` (0: the kit's)
 * must give the bits of the first variant it can create, on two problems. */
static void check_same_bits(gb_kit *kit, const char *check, const char *const *overrides,
                            const int *threads, int n, const char *const *labels)
{
    static const shape cases[] = {{1, 3, 100, 48, 1, 1}, {2, 1, 257, 80, 0, 0}};
    char problems[1024] = "", skipped[512] = "";
    int ran = 0, kit_threads = kit->threads;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        attn_result base = {0};
        int have_base = 0;
        for (int i = 0; i < n; i++) {
            gb_kit_instance ki;
            kit->threads = threads[i] ? threads[i] : kit_threads;
            gb_status st = gb_kit_create(kit, &ki, kit->plugin, &kit->ctx, overrides + i,
                                         overrides[i] ? 1 : 0);
            kit->threads = kit_threads;
            if (st != GB_OK) {
                if (k == 0)
                    gb_kit_append(skipped, sizeof skipped, "%s skipped (%s)", labels[i],
                                  gb_status_name(st));
                gb_kit_destroy(&ki);
                continue;
            }
            attn_case c;
            attn_result r;
            char why[256];
            if (run_once(kit, &ki, &cases[k], 3 + k, &c, &r, why, sizeof why))
                gb_kit_append(problems, sizeof problems, "%s failed: %s", labels[i], why);
            else if (!have_base)
                base = r, have_base = 1, ran++;
            else {
                size_t differ = gb_kit_bits_differ(r.out, base.out, c.n_out) +
                                gb_kit_bits_differ(r.dqkv, base.dqkv, c.n_qkv);
                ran++;
                if (differ)
                    gb_kit_append(problems, sizeof problems, "%s differs from %s in %zu "
                                  "values on T %lld D %lld", labels[i], labels[0], differ,
                                  (long long)cases[k].T, (long long)cases[k].D);
            }
            gb_kit_destroy(&ki);
        }
    }
    gb_kit_release(kit);
    if (problems[0])
        gb_kit_report(kit, check, GB_KIT_FAIL, "%s%s%s", problems, skipped[0] ? "; " : "",
                      skipped);
    else if (ran < 4)
        gb_kit_report(kit, check, GB_KIT_UNSUPPORTED, "fewer than two variants ran%s%s",
                      skipped[0] ? ": " : "", skipped);
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "bit-identical out, dq, dk, dv on (1, 3, 100, "
                      "48) causal packed and (2, 1, 257, 80) contiguous%s%s",
                      skipped[0] ? "; " : "", skipped);
}

static void check_thread_counts(gb_kit *kit)
{
    static const int threads[] = {1, 2, 3};
    static const char *const labels[] = {"1 thread", "2 threads", "3 threads"};
    const char *none[3] = {NULL, NULL, NULL};
    check_same_bits(kit, "attn: strict: 1, 2, 3 threads", none, threads, 3, labels);
}

/* Every choice of an `isa` option, unless --set chose one. */
static void check_isa_choices(gb_kit *kit)
{
    int index = gb_kit_option(kit, "isa");
    if (index < 0)
        return;
    for (int i = 0; i < kit->n_sets; i++)
        if (strncmp(kit->sets[i], "isa=", 4) == 0)
            return;
    static char sets[8][80];
    const char *overrides[8];
    int threads[8] = {0}, n = 0;
    const char *choices = kit->plugin->desc->options[index].choices;
    for (const char *p = choices; p && *p && n < 8; n++) {
        const char *bar = strchr(p, '|');
        snprintf(sets[n], sizeof sets[n], "isa=%.*s", (int)(bar ? bar - p : (long)strlen(p)), p);
        overrides[n] = sets[n];
        p = bar ? bar + 1 : NULL;
    }
    check_same_bits(kit, "attn: strict: every isa choice", overrides, threads, n, overrides);
}

static void check_eligibility(gb_kit *kit, const gb_kit_instance *ki)
{
    const gb_attn_ops *ops = ki->ops;
    gb_attn_problem p = {.struct_size = sizeof p, .batch = 2, .heads = 3, .seq_len = 7,
                         .head_dim = 8, .dtype = GB_F32, .causal = 1};
    char reason[512] = "", problems[1024] = "";
    if (!ops->eligible(ki->inst.self, &p, reason, sizeof reason))
        gb_kit_append(problems, sizeof problems, "a small f32 causal problem is not "
                      "eligible: %s", reason);
    p.dtype = GB_BF16;
    if (!ops->eligible(ki->inst.self, &p, reason, sizeof reason))
        gb_kit_append(problems, sizeof problems, "a bf16 problem is not eligible: %s", reason);
    p.dtype = GB_I32;
    reason[0] = '\0';
    int yes = ops->eligible(ki->inst.self, &p, reason, sizeof reason);
    if (yes || !strstr(reason, "i32"))
        gb_kit_append(problems, sizeof problems, "i32: answer %d, reason \"%s\" should "
                      "name i32", yes, reason);
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    ops->eligible(ki->inst.self, &p, tiny, sizeof tiny);
    if (!memchr(tiny, '\0', sizeof tiny))
        gb_kit_append(problems, sizeof problems, "the reason overflowed an 8-byte buffer");
    if (problems[0])
        gb_kit_report(kit, "attn: strict: eligibility", GB_KIT_FAIL, "%s", problems);
    else
        gb_kit_report(kit, "attn: strict: eligibility", GB_KIT_PASS, "f32 and bf16 eligible; "
                      "i32 not: %s", reason);
}

static void check_refusals(gb_kit *kit, const gb_kit_instance *ki)
{
    const gb_attn_ops *ops = ki->ops;
    const char *check = "attn: strict: refusals";
    const shape s = {1, 2, 5, 8, 1, 1};
    gb_rng rng = gb_rng_stream(5, 0, 0, 0);
    attn_case c;
    attn_buffers m;
    size_t saved = 0, workspace = 0;
    if (make_case(kit, &s, GB_F32, &rng, &c) ||
        ops->memory(ki->inst.self, &c.p, &saved, &workspace) != GB_OK ||
        device_buffers(kit, &c, saved, workspace, &m)) {
        gb_kit_report(kit, check, GB_KIT_FAIL, "could not set up a (1, 2, 5, 8) problem: %s",
                      ki->inst.error[0] ? ki->inst.error : kit->memory_error);
        gb_kit_release(kit);
        return;
    }
    char problems[1536] = "";
    gb_tensor q = view(m.qkv, 0, &c, c.stride_qkv), k = view(m.qkv, c.offset_k, &c, c.stride_qkv),
              v = view(m.qkv, c.offset_v, &c, c.stride_qkv), out = view(m.out, 0, &c, c.stride_out),
              dq = view(m.dqkv, 0, &c, c.stride_qkv),
              dk = view(m.dqkv, c.offset_k, &c, c.stride_qkv),
              dv = view(m.dqkv, c.offset_v, &c, c.stride_qkv),
              dout = view(m.dout, 0, &c, c.stride_out);
    gb_tensor bad_k = k;
    bad_k.stride[3] = 2;
    ((gb_kit_instance *)ki)->inst.error[0] = '\0';
    gb_status st = ops->forward(ki->inst.self, &c.p, out, q, bad_k, v, m.saved, m.workspace);
    if (st != GB_ERR_UNSUPPORTED || !strstr(ki->inst.error, "stride"))
        gb_kit_append(problems, sizeof problems, "k.stride[3] = 2 gave %s, message \"%s\" "
                      "(want GB_ERR_UNSUPPORTED naming the stride)", gb_status_name(st),
                      ki->inst.error);
    gb_tensor bad_dv = dv;
    bad_dv.shape[2] = 4;
    ((gb_kit_instance *)ki)->inst.error[0] = '\0';
    st = ops->backward(ki->inst.self, &c.p, dq, dk, bad_dv, dout, q, k, v, out, m.saved,
                       m.workspace);
    if (st != GB_ERR_INVALID_ARG || !strstr(ki->inst.error, "dv"))
        gb_kit_append(problems, sizeof problems, "a dv of the wrong shape gave %s, message "
                      "\"%s\" (want GB_ERR_INVALID_ARG naming dv)", gb_status_name(st),
                      ki->inst.error);
    gb_attn_problem i32 = c.p;
    i32.dtype = GB_I32;
    st = ops->forward(ki->inst.self, &i32, out, q, k, v, m.saved, m.workspace);
    if (st != GB_ERR_UNSUPPORTED)
        gb_kit_append(problems, sizeof problems, "an i32 forward gave %s (want "
                      "GB_ERR_UNSUPPORTED)", gb_status_name(st));
    gb_kit_release(kit);
    if (problems[0])
        gb_kit_report(kit, check, GB_KIT_FAIL, "%s", problems);
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "bad k stride, dv shape and i32 refused, "
                      "each naming its cause");
}

static void check_memory_linear(gb_kit *kit, const gb_kit_instance *ki)
{
    const char *check = "attn: strict: memory linear in T";
    if (strcmp(kit->plugin->desc->name, "math") == 0) {
        gb_kit_report(kit, check, GB_KIT_PASS, "not required: attn/math keeps the (T, T) "
                      "scores by design");
        return;
    }
    const gb_attn_ops *ops = ki->ops;
    gb_attn_problem p = {.struct_size = sizeof p, .batch = 2, .heads = 3, .head_dim = 64,
                         .dtype = GB_F32, .causal = 1};
    size_t saved[3], workspace[3];
    for (int i = 0; i < 3; i++) {
        p.seq_len = 1024 << i;
        gb_status st = ops->memory(ki->inst.self, &p, &saved[i], &workspace[i]);
        if (st != GB_OK) {
            gb_kit_report_call(kit, check, ki, "memory", st);
            return;
        }
    }
    int linear = saved[2] - saved[1] == 2 * (saved[1] - saved[0]) &&
                 workspace[2] - workspace[1] == 2 * (workspace[1] - workspace[0]);
    gb_kit_report(kit, check, linear ? GB_KIT_PASS : GB_KIT_FAIL, "saved %zu, %zu, %zu and "
                  "workspace %zu, %zu, %zu bytes at T = 1024, 2048, 4096%s", saved[0],
                  saved[1], saved[2], workspace[0], workspace[1], workspace[2],
                  linear ? "" : ": not linear in T");
}

void gb_kit_check_attn(gb_kit *kit)
{
    gb_kit_instance ki, ref;
    if (gb_kit_create_tested(kit, &ki, "attn: create", NULL, 0))
        return;
    if (gb_kit_create_reference(kit, &ref, GB_KIND_ATTN, "math", "attn: reference attn/math",
                                NULL, 0) == 0) {
        gb_rng rng = gb_rng_stream(7, 0, 0, 0);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            check_shape(kit, &ki, &ref, &shapes[i], GB_F32, &rng);
            gb_kit_release(kit);
        }
        static const gb_dtype halves[] = {GB_BF16, GB_F16};
        for (size_t d = 0; d < 2; d++)
            for (size_t i = 0; i < sizeof shapes_16bit / sizeof shapes_16bit[0]; i++) {
                check_shape(kit, &ki, &ref, &shapes_16bit[i], halves[d], &rng);
                gb_kit_release(kit);
            }
        gb_kit_destroy(&ref);
    }
    if (kit->strict) {
        check_eligibility(kit, &ki);
        check_refusals(kit, &ki);
        check_memory_linear(kit, &ki);
        check_thread_counts(kit);
        check_isa_choices(kit);
    }
    gb_kit_destroy(&ki);
}
