/* attn/flash's CUDA object on the edges of its tiles that the conformance kit's 16-bit
 * rows leave out (test_conformance_cuda.sh runs the kit): head_dim 64 and 128, causal and
 * not, a shape for each of the other tile widths (32, 80 and 96 columns), T shorter than one 64-row tile, T not a multiple of the tile with causal key tiles
 * skipped, several batches and heads, in bf16 and f16, and views whose rows do not start on
 * 16 bytes (loaded element by element instead of by cp.async). Forward and backward run through
 * the plugin ABI on device/cuda; the reference is computed here in double from the same
 * 16-bit inputs (S = Q K^T / sqrt(D) with the causal mask, P = softmax(S), O = P V,
 * dP = dO V^T, dS = P (dP - rowsum(P dP)), dQ = dS K / sqrt(D), dK = dS^T Q / sqrt(D),
 * dV = P^T dO). Tolerances are the kit's for the dtype: |got - want| <= scaled * max|want|
 * + rel * |want| per tensor, bf16 1e-2 and 2e-2, f16 2e-3 and 4e-3 (the plugin rounds P,
 * dS and its outputs to the dtype). Shapes are small: the emulator runs a CUDA thread as
 * a fiber.
 *
 * usage: test-flash-cuda-shapes DEVICE_CUDA_PLUGIN ATTN_FLASH_CUDA_PLUGIN
 * Exit 77 (skipped) when device/cuda finds no GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/attn.h"
#include "gearbox/convert.h"
#include "gearbox/device.h"
#include "test_host.h"

#define SKIP 77

typedef struct shape {
    int64_t B, H, T, D;
    int causal;
    gb_dtype dtype;
    int offset;   /* elements from each buffer's start to its view's: 1 takes the loads that
                     are not cp.async (rows not on 16 bytes) */
} shape;

static const shape shapes[] = {
    {2, 2, 20, 64, 0, GB_BF16, 0},    /* T shorter than a tile, not causal */
    {1, 2, 20, 128, 1, GB_F16, 0},    /* the same at head_dim 128, causal */
    {1, 1, 150, 128, 0, GB_BF16, 0},  /* three query tiles, the last partial */
    {2, 3, 130, 64, 1, GB_F16, 0},    /* causal key tiles skipped, batches and heads */
    {1, 2, 100, 64, 0, GB_F16, 0},
    {2, 1, 90, 128, 1, GB_BF16, 0},
    {1, 2, 70, 64, 1, GB_BF16, 1},
    /* one shape per 16-bit tile width the others leave out (every kernel instance runs:
       cuda-emu-launched), head_dims 81-96 among them */
    {1, 1, 20, 24, 1, GB_BF16, 0},    /* 32 columns, head_dim padded */
    {1, 1, 40, 32, 0, GB_F16, 0},
    {1, 1, 20, 72, 0, GB_BF16, 0},    /* 80 columns */
    {1, 2, 30, 80, 1, GB_F16, 0},
    {1, 1, 70, 90, 1, GB_BF16, 0},    /* 96 columns: two query tiles, the last partial */
    {1, 2, 20, 81, 0, GB_F16, 0},
    {1, 1, 20, 96, 1, GB_F16, 0},
    /* the 16-bit backward's blocks own 256 rows up to head_dim 64 and 128 beyond: several
       blocks per head, the last partial, causal tiles skipped across them */
    {1, 1, 300, 64, 1, GB_BF16, 0},
    {1, 1, 270, 32, 0, GB_F16, 0},
    {1, 1, 150, 80, 1, GB_BF16, 0},
    {1, 1, 200, 128, 1, GB_F16, 0},
};

typedef struct gpu {
    const gb_device_ops *dev;
    void *dev_self;
    gb_device_ctx ctx;
    const gb_attn_ops *attn;
} gpu;

static int failures;

static float to_dtype(gb_dtype dtype, float x)
{
    return dtype == GB_BF16 ? gb_f32_from_bf16(gb_bf16_from_f32(x))
                            : gb_f32_from_f16(gb_f16_from_f32(x));
}

static uint16_t narrow(gb_dtype dtype, float x)
{
    return dtype == GB_BF16 ? gb_bf16_from_f32(x) : gb_f16_from_f32(x);
}

static float widen(gb_dtype dtype, uint16_t x)
{
    return dtype == GB_BF16 ? gb_f32_from_bf16(x) : gb_f32_from_f16(x);
}

/* The reference, in double, per head of contiguous (B, H, T, D) arrays. */
static void reference(const shape *s, const float *q, const float *k, const float *v,
                      const float *dout, double *out, double *dq, double *dk, double *dv)
{
    const int64_t T = s->T, D = s->D;
    const double scale = 1.0 / sqrt((double)D);
    double *P = malloc((size_t)(T * T) * sizeof *P), *dS = malloc((size_t)(T * T) * sizeof *dS);
    for (int64_t bh = 0; bh < s->B * s->H; bh++) {
        const int64_t o = bh * T * D;
        for (int64_t t = 0; t < T; t++) {
            double top = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < T; j++) {
                double x = -INFINITY;
                if (!s->causal || j <= t) {
                    x = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        x += (double)q[o + t * D + d] * k[o + j * D + d];
                    x *= scale;
                }
                P[t * T + j] = x;
                top = x > top ? x : top;
            }
            for (int64_t j = 0; j < T; j++)
                sum += P[t * T + j] = exp(P[t * T + j] - top);
            double dot = 0.0;   // rowsum(P dP)
            for (int64_t j = 0; j < T; j++) {
                P[t * T + j] /= sum;
                double dp = 0.0;
                for (int64_t d = 0; d < D; d++)
                    dp += (double)dout[o + t * D + d] * v[o + j * D + d];
                dS[t * T + j] = dp;
                dot += P[t * T + j] * dp;
            }
            for (int64_t j = 0; j < T; j++)
                dS[t * T + j] = P[t * T + j] * (dS[t * T + j] - dot);
        }
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++) {
                double y = 0.0, gq = 0.0, gk = 0.0, gv = 0.0;
                for (int64_t j = 0; j < T; j++) {
                    y += P[t * T + j] * v[o + j * D + d];
                    gq += dS[t * T + j] * k[o + j * D + d];
                    gk += dS[j * T + t] * q[o + j * D + d];   // t is the key here
                    gv += P[j * T + t] * dout[o + j * D + d];
                }
                out[o + t * D + d] = y;
                dq[o + t * D + d] = gq * scale;
                dk[o + t * D + d] = gk * scale;
                dv[o + t * D + d] = gv;
            }
    }
    free(P);
    free(dS);
}

/* Counts a failure when `got` is off `want` by more than the dtype's tolerance. */
static void compare(const shape *s, const char *name, const float *got, const double *want,
                    size_t n)
{
    const double scaled = s->dtype == GB_BF16 ? 1e-2 : 2e-3, rel = s->dtype == GB_BF16 ? 2e-2 : 4e-3;
    double top = 0.0, worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        top = fabs(want[i]) > top ? fabs(want[i]) : top;
    for (size_t i = 0; i < n; i++) {
        double over = fabs(got[i] - want[i]) - (scaled * top + rel * fabs(want[i]));
        if (!(over <= worst)) {   // NaN counts
            worst = isnan(over) ? INFINITY : over;
            at = i;
        }
    }
    GB_TEST_CHECK(failures, worst <= 0.0, "%s B%lld H%lld T%lld D%lld %s %s: %s[%zu] = %g, "
                  "want %g (tolerance %g * max|want| %g + %g rel)", gb_dtype_name(s->dtype),
                  (long long)s->B, (long long)s->H, (long long)s->T, (long long)s->D,
                  s->causal ? "causal" : "not causal", name, name, at, (double)got[at],
                  want[at], scaled, top, rel);
}

/* A device buffer of s->offset + n elements, the host's n at s->offset. */
static void *upload(gpu *g, const shape *s, const float *host, size_t n)
{
    const size_t total = n + (size_t)s->offset;
    uint16_t *h = calloc(total, sizeof *h);
    void *d = NULL;
    for (size_t i = 0; i < n; i++)
        h[(size_t)s->offset + i] = narrow(s->dtype, host[i]);
    if (g->dev->alloc(g->dev_self, total * sizeof *h, &d) != GB_OK ||
        g->dev->copy(g->dev_self, d, h, total * sizeof *h, GB_COPY_HOST_TO_DEVICE) != GB_OK)
        d = NULL;
    free(h);
    return d;
}

static int download(gpu *g, const shape *s, float *host, const void *d, size_t n)
{
    const size_t total = n + (size_t)s->offset;
    uint16_t *h = malloc(total * sizeof *h);
    int ok = g->dev->copy(g->dev_self, h, d, total * sizeof *h, GB_COPY_DEVICE_TO_HOST) == GB_OK;
    for (size_t i = 0; ok && i < n; i++)
        host[i] = widen(s->dtype, h[(size_t)s->offset + i]);
    free(h);
    return ok;
}

static gb_tensor view(const shape *s, void *data)
{
    return (gb_tensor){.data = (uint16_t *)data + s->offset, .dtype = s->dtype, .ndim = 4,
                       .shape = {s->B, s->H, s->T, s->D},
                       .stride = {s->H * s->T * s->D, s->T * s->D, s->D, 1}};
}

/* Forward and backward of one shape on the GPU against the reference. */
/* [attn] products of the runs: the plugin's choice (wgmma on a 9.0 GPU, and the emulator,
 * from a build with sm_90a code) and mma.sync, which every GPU runs; they differ in the
 * 16-bit forward at head_dim 64 only, so mma_sync runs those shapes again. */
typedef struct products {
    const char *name;
    const gb_value *options;   /* NULL: the defaults */
} products;

static const gb_value mma_sync_options[] = {{.i = 1}};   /* "auto|mma_sync|wgmma" */
static const products runs[] = {{"products auto", NULL}, {"products mma_sync", mma_sync_options}};

static void check_shape(gpu *g, const shape *s, unsigned seed, const products *run)
{
    const size_t n = (size_t)(s->B * s->H * s->T * s->D);
    float *in[4], *got[4];   // q k v dout; out dq dk dv
    double *want[4];
    srand(seed);
    for (int i = 0; i < 4; i++) {
        in[i] = malloc(n * sizeof(float));
        got[i] = malloc(n * sizeof(float));
        want[i] = malloc(n * sizeof(double));
        for (size_t e = 0; e < n; e++)
            in[i][e] = to_dtype(s->dtype, 2.0f * (float)rand() / (float)RAND_MAX - 1.0f);
    }
    reference(s, in[0], in[1], in[2], in[3], want[0], want[1], want[2], want[3]);

    gb_attn_problem p = {.struct_size = sizeof p, .batch = s->B, .heads = s->H,
                         .seq_len = s->T, .head_dim = s->D, .dtype = s->dtype,
                         .causal = s->causal};
    void *self = NULL, *d_in[4] = {0}, *d_out[4] = {0}, *saved = NULL, *workspace = NULL;
    size_t saved_bytes = 0, workspace_bytes = 0;
    char reason[512] = "";
    gb_status st = g->attn->create(gb_test_host(), run->options, &g->ctx, &self);
    GB_TEST_CHECK(failures, st == GB_OK, "create: %s", gb_test_last_error());
    if (st != GB_OK)
        goto done;
    GB_TEST_CHECK(failures, g->attn->eligible(self, &p, reason, sizeof reason),
                  "not eligible: %s", reason);
    st = g->attn->memory(self, &p, &saved_bytes, &workspace_bytes);
    for (int i = 0; i < 4 && st == GB_OK; i++) {
        d_in[i] = upload(g, s, in[i], n);
        if (!d_in[i] || g->dev->alloc(g->dev_self, (n + (size_t)s->offset) * 2, &d_out[i]) != GB_OK)
            st = GB_ERR_NO_MEMORY;
    }
    if (st == GB_OK && (g->dev->alloc(g->dev_self, saved_bytes, &saved) != GB_OK ||
                        g->dev->alloc(g->dev_self, workspace_bytes, &workspace) != GB_OK))
        st = GB_ERR_NO_MEMORY;
    if (st == GB_OK)
        st = g->attn->forward(self, &p, view(s, d_out[0]), view(s, d_in[0]), view(s, d_in[1]),
                              view(s, d_in[2]), saved, workspace);
    if (st == GB_OK)
        st = g->attn->backward(self, &p, view(s, d_out[1]), view(s, d_out[2]), view(s, d_out[3]),
                               view(s, d_in[3]), view(s, d_in[0]), view(s, d_in[1]),
                               view(s, d_in[2]), view(s, d_out[0]), saved, workspace);
    if (st == GB_OK)
        st = g->dev->sync(g->dev_self);
    for (int i = 0; i < 4 && st == GB_OK; i++)
        if (!download(g, s, got[i], d_out[i], n))
            st = GB_ERR_DEVICE;
    GB_TEST_CHECK(failures, st == GB_OK, "%s T%lld D%lld: status %d: %s",
                  gb_dtype_name(s->dtype), (long long)s->T, (long long)s->D, (int)st,
                  gb_test_last_error());
    if (st == GB_OK) {
        const char *names[] = {"out", "dq", "dk", "dv"};
        int before = failures;
        for (int i = 0; i < 4; i++)
            compare(s, names[i], got[i], want[i], n);
        if (failures == before)
            printf("ok: %s B%lld H%lld T%lld D%lld %s%s, %s: out, dq, dk, dv within "
                   "tolerance\n", gb_dtype_name(s->dtype), (long long)s->B, (long long)s->H,
                   (long long)s->T, (long long)s->D, s->causal ? "causal" : "not causal",
                   s->offset ? ", views 2 bytes off 16" : "", run->name);
    }
done:
    for (int i = 0; i < 4; i++) {
        if (d_in[i])
            g->dev->free(g->dev_self, d_in[i]);
        if (d_out[i])
            g->dev->free(g->dev_self, d_out[i]);
        free(in[i]);
        free(got[i]);
        free(want[i]);
    }
    if (saved)
        g->dev->free(g->dev_self, saved);
    if (workspace)
        g->dev->free(g->dev_self, workspace);
    if (self)
        g->attn->destroy(self);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    gb_test_usage_unless(argc == 3, argv[0], "DEVICE_CUDA_PLUGIN ATTN_FLASH_CUDA_PLUGIN");
    const gb_plugin_desc *dev = gb_test_load_plugin(argv[1]);
    const gb_plugin_desc *attn = gb_test_load_plugin(argv[2]);
    gpu g = {.dev = dev->ops, .ctx = {.struct_size = sizeof g.ctx}, .attn = attn->ops};
    if (g.dev->create(gb_test_host(), NULL, &g.dev_self) != GB_OK) {
        printf("SKIP: device/cuda: %s\n", gb_test_last_error());
        return SKIP;
    }
    if (g.dev->context(g.dev_self, &g.ctx) != GB_OK) {
        printf("FAIL: device/cuda context: %s\n", gb_test_last_error());
        return 1;
    }
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            if (r == 0 || (shapes[i].D == 64 && shapes[i].dtype != GB_F32))
                check_shape(&g, &shapes[i], 1234u + (unsigned)i, &runs[r]);
    g.dev->destroy(g.dev_self);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
