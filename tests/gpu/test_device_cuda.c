/* device/cuda against device/cpu, kernel by kernel, through the plugin ABI (both plugins
 * dlopen()ed from the paths on the command line).
 *
 * usage: test-device-cuda CUDA_PLUGIN [CPU_PLUGIN ops]
 * - Without `ops` (runs anywhere): the descriptor (kind, devices, caps, dtypes, every
 *   vtable entry), then create(): without a GPU it must fail with GB_ERR_DEVICE and a
 *   message naming device/cuda and "no NVIDIA GPU"; with one, context() and info() must
 *   describe it.
 * - With `ops` (the gpu suite; exits 77, SKIP, without a GPU): memory, copies, streams,
 *   events and queued host work; then every kernel in f32, bf16 and f16 on the same random
 *   inputs (same bits uploaded) on both devices, each CUDA kernel run twice.
 *
 * Exact bits only where the code guarantees them: the kernels that share kernels/common's
 * formulas and summation orders give the CPU's bits (embeddings, LayerNorm, GELU in both
 * forms, add, bias gradient, sum of squares, dlogits), and every CUDA result is
 * bit-identical on its second run on the same GPU; a loss may differ by the last bits of
 * CUDA's and libm's double log (1e-6 relative).
 *
 * What cuBLASLt computes (on tensor cores, with the algorithm its heuristic picks for
 * this GPU and library version) is compared, with device/cpu and with a double reference
 * of device.h's definition, within matmul_tolerance(): for inputs of magnitude <= 1
 * summed over a reduction of length k, with u the relative precision of the result (one
 * rounding to C's type: f32 2^-24, bf16 2^-8, f16 2^-11; at least 2^-11 where cuBLASLt's
 * fused GELU computes it, see below):
 *     atol = 2^-20 max(k, 16)       f32 accumulation in any order (16 f32 roundings per
 *                                   product; tensor cores truncate their sums)
 *          + 2^-9 sqrt(k)  [TF32]   f32 inputs rounded to 10 bits (4 TF32 roundings, of
 *                                   random sign, per product)
 *          + 2u sqrt(k)             [u > 2^-24] the result rounded twice (C and the bias
 *                                   or beta term), a result of size up to sqrt(k)
 *     rtol = 2^-13 + 2^-9 [TF32] + 2u [u > 2^-24]
 * 16-bit inputs are the test's own values, exact in every form, so they add nothing.
 * GELU epilogues add the formula's own error (2e-6) and, where u > 2^-24, 4u (the
 * pre-activation is rounded before GELU on one path and not on the other). cuBLASLt's
 * fused GELU and DGELU (GELU_TANH and DGELU_TANH where the aux's leading dimension lets
 * device/cuda hand them to it) compute the tanh form with a hardware tanh good to about
 * 2^-11 (TF32's precision), so u >= 2^-11 for them whatever C's type; they are compared
 * with the tanh form, which lies up to 5e-4 from the erf form. Where device/cuda computes
 * GELU or DGELU element-wise instead (the erf forms, and an aux cuBLASLt does not take),
 * C's own u holds: f32's for an f32 C. The aux output, the pre-activation, keeps C's u.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gearbox/convert.h"
#include "gearbox/device.h"
#include "kernel_test.h"
#include "test_host.h"

#define SKIP 77

typedef struct device {
    const char *name;
    const gb_device_ops *ops;
    void *self;
    void *allocs[32];   /* freed by dev_release() after each kernel call */
    int n_allocs;
} device;

static device cpu = {.name = "cpu"}, gpu = {.name = "cuda"};

static void expect_ok(gb_status st, const device *d, const char *call)
{
    kt_expect(st == GB_OK, "%s on %s returned %d: %s", call, d->name, (int)st, kt_last_error());
}

/* ---- device buffers ------------------------------------------------------------------- */

static void *dev_alloc(device *d, size_t bytes)
{
    void *p = NULL;
    expect_ok(d->ops->alloc(d->self, bytes, &p), d, "alloc");
    if (d->n_allocs < 32)
        d->allocs[d->n_allocs++] = p;
    return p;
}

static void *dev_up(device *d, const void *host, size_t bytes)
{
    void *p = dev_alloc(d, bytes);
    if (host && bytes)
        expect_ok(d->ops->copy(d->self, p, host, bytes, GB_COPY_HOST_TO_DEVICE), d, "copy up");
    return p;
}

static void dev_down(device *d, void *host, const void *p, size_t bytes)
{
    expect_ok(d->ops->copy(d->self, host, p, bytes, GB_COPY_DEVICE_TO_HOST), d, "copy down");
}

static void dev_release(device *d)
{
    expect_ok(d->ops->sync(d->self), d, "sync");
    for (int i = 0; i < d->n_allocs; i++)
        d->ops->free(d->self, d->allocs[i]);
    d->n_allocs = 0;
}

/* ---- host data ------------------------------------------------------------------------ */

static size_t act_bytes(gb_dtype dtype, size_t n)
{
    return n * gb_dtype_size(dtype);
}

/* n random values in [lo, hi] stored as `dtype` (rounded), host memory. */
static void *act_random(kt_rng *rng, gb_dtype dtype, size_t n, double lo, double hi)
{
    float *f = kt_floats(n);
    kt_fill(rng, f, n, lo, hi);
    if (dtype == GB_F32)
        return f;
    uint16_t *h = (uint16_t *)kt_floats(n);
    for (size_t i = 0; i < n; i++)
        h[i] = dtype == GB_BF16 ? gb_bf16_from_f32(f[i]) : gb_f16_from_f32(f[i]);
    return h;
}

static float act_get(const void *p, gb_dtype dtype, size_t i)
{
    if (dtype == GB_F32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dtype == GB_BF16 ? gb_f32_from_bf16(h) : gb_f32_from_f16(h);
}

static void *host_copy(const void *p, size_t bytes)
{
    void *q = kt_floats(bytes / sizeof(float) + 1);
    memcpy(q, p, bytes);
    return q;
}

/* Same bytes, or a FAIL naming the first differing element. */
static void expect_bits(const char *what, gb_dtype dtype, const void *got, const void *want,
                        size_t n)
{
    const size_t size = gb_dtype_size(dtype);
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)got + i * size, (const char *)want + i * size, size) != 0) {
            bad++;
            first = first < n ? first : i;
        }
    if (bad == 0) {
        printf("  %s: %zu values, same bits\n", what, n);
        return;
    }
    kt_expect(0, "%s: %zu of %zu values differ; first at %zu: %.9g, want %.9g", what, bad, n,
              first, act_get(got, dtype, first), act_get(want, dtype, first));
}

/* Within atol + rtol |want| of the other device's (or a reference's) values. */
static void expect_close(const char *what, gb_dtype dtype, const void *got, const void *want,
                         gb_dtype want_dtype, size_t n, double atol, double rtol)
{
    float *g = kt_floats(n);
    double *w = kt_doubles(n);
    for (size_t i = 0; i < n; i++) {
        g[i] = act_get(got, dtype, i);
        w[i] = act_get(want, want_dtype, i);
    }
    kt_compare(what, g, w, n, atol, rtol);
}

/* The relative size of one rounding to `dtype`. */
static double rounding(gb_dtype dtype)
{
    return dtype == GB_BF16 ? 0x1p-8 : dtype == GB_F16 ? 0x1p-11 : 0x1p-24;
}

typedef struct tolerance {
    double atol, rtol;
} tolerance;

/* The relative precision of cuBLASLt's fused GELU epilogues (their hardware tanh). */
#define LT_GELU_PRECISION 0x1p-11

/* How far a cuBLASLt result over a reduction of length k may lie from another computation
 * of it, with TF32 inputs when tf32 and relative precision u (the formula of the file's
 * opening comment). */
static tolerance matmul_tolerance(int tf32, double u, int64_t k)
{
    const double root = sqrt((double)(k > 1 ? k : 1));
    tolerance t = {0x1p-20 * (double)(k > 16 ? k : 16), 0x1p-13};
    if (tf32) {
        t.atol += 0x1p-9 * root;
        t.rtol += 0x1p-9;
    }
    if (u > rounding(GB_F32)) {
        t.atol += 2.0 * u * root;
        t.rtol += 2.0 * u;
    }
    return t;
}

/* ---- memory, streams, events, queued host work ---------------------------------------- */

typedef struct order_arg {
    const float *pinned;   /* read by the host function after a queued copy filled it */
    float *seen;
    int delay_ms;
} order_arg;

static gb_status read_pinned(void *arg)
{
    const order_arg *a = arg;
    if (a->delay_ms) {
        struct timespec ts = {0, (long)a->delay_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    *a->seen = a->pinned[0];
    return GB_OK;
}

static gb_status sleep_200ms(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    return GB_OK;
}

/* The compute stream reads what a slow side stream writes: only stream_wait_event orders
 * them. The side stream first sleeps 200 ms in a host function, so without the wait the
 * read comes first on a GPU as well as on the emulator (whose lazy streams run only what a
 * wait asks for). */
static void test_wait_for_slow_stream(void)
{
    kt_section("the compute stream waits for a slow side stream's event");
    device *d = &gpu;
    const gb_device_ops *o = d->ops;
    void *a = dev_alloc(d, 64), *side = NULL, *event = NULL;
    float before = -1.0f, after = 7.0f, got = 0.0f;
    expect_ok(o->copy(d->self, a, &before, sizeof before, GB_COPY_HOST_TO_DEVICE), d, "copy");
    expect_ok(o->sync(d->self), d, "sync");
    expect_ok(o->stream_create(d->self, &side), d, "stream_create");
    expect_ok(o->event_create(d->self, &event), d, "event_create");
    expect_ok(o->enqueue_host(d->self, side, sleep_200ms, NULL, 0), d, "enqueue_host");
    expect_ok(o->copy_async(d->self, a, &after, sizeof after, GB_COPY_HOST_TO_DEVICE, side), d,
              "copy_async");
    expect_ok(o->event_record(d->self, event, side), d, "event_record");
    expect_ok(o->stream_wait_event(d->self, NULL, event), d, "stream_wait_event");
    expect_ok(o->copy(d->self, &got, a, sizeof got, GB_COPY_DEVICE_TO_HOST), d, "copy D2H");
    kt_expect(got == 7.0f, "the compute stream read %g after waiting for the side stream's "
              "event; the side stream wrote 7", got);
    expect_ok(o->sync(d->self), d, "sync");
    o->event_destroy(d->self, event);
    o->stream_destroy(d->self, side);
    dev_release(d);
}

static gb_status fail_on_purpose(void *arg)
{
    (void)arg;
    return GB_ERR_INTERNAL;
}

static void test_memory(void)
{
    kt_section("memory, copies, streams, events, queued host work");
    device *d = &gpu;
    const gb_device_ops *o = d->ops;
    void *a = dev_alloc(d, 4096), *b = dev_alloc(d, 4096), *empty = dev_alloc(d, 0);
    kt_expect(a && b && empty && (uintptr_t)a % 64 == 0 && (uintptr_t)b % 64 == 0,
              "alloc: NULL or not 64-byte aligned");
    unsigned char src[4096], back[4096];
    for (int i = 0; i < 4096; i++)
        src[i] = (unsigned char)(i * 7);
    expect_ok(o->copy(d->self, a, src, 4096, GB_COPY_HOST_TO_DEVICE), d, "copy H2D");
    expect_ok(o->copy(d->self, b, a, 4096, GB_COPY_DEVICE_TO_DEVICE), d, "copy D2D");
    expect_ok(o->memset_zero(d->self, b, 100), d, "memset_zero");
    expect_ok(o->copy(d->self, back, b, 4096, GB_COPY_DEVICE_TO_HOST), d, "copy D2H");
    int zero = 1;
    for (int i = 0; i < 100; i++)
        zero &= back[i] == 0;
    kt_expect(zero && memcmp(back + 100, src + 100, 3996) == 0,
              "H2D, D2D, memset_zero(100), D2H did not round-trip");
    kt_clear_error();
    kt_expect(o->copy(d->self, b, a, 16, (gb_copy_kind)7) == GB_ERR_INVALID_ARG,
              "copy with kind 7 was not refused");

    /* pinned memory, a second stream, events, and host work in stream order */
    float *pinned = NULL, seen = -1.0f;
    void *stream = NULL, *event = NULL;
    expect_ok(o->alloc_host(d->self, 4096, (void **)&pinned), d, "alloc_host");
    expect_ok(o->stream_create(d->self, &stream), d, "stream_create");
    expect_ok(o->event_create(d->self, &event), d, "event_create");
    float value = 42.0f;
    expect_ok(o->copy(d->self, a, &value, sizeof value, GB_COPY_HOST_TO_DEVICE), d, "copy");
    expect_ok(o->event_record(d->self, event, NULL), d, "event_record");
    expect_ok(o->stream_wait_event(d->self, stream, event), d, "stream_wait_event");
    pinned[0] = 0.0f;
    expect_ok(o->copy_async(d->self, pinned, a, sizeof value, GB_COPY_DEVICE_TO_HOST, stream),
              d, "copy_async");
    order_arg arg = {pinned, &seen, 200};
    expect_ok(o->enqueue_host(d->self, stream, read_pinned, &arg, sizeof arg), d,
              "enqueue_host");
    expect_ok(o->event_record(d->self, event, stream), d, "event_record");
    gb_status q = o->event_query(d->self, event);
    kt_expect(q == GB_ERR_NOT_READY, "event_query behind a 200 ms host function returned %d, "
              "want GB_ERR_NOT_READY", (int)q);
    expect_ok(o->event_sync(d->self, event), d, "event_sync");
    kt_expect(o->event_query(d->self, event) == GB_OK, "event_query after event_sync not GB_OK");
    kt_expect(seen == 42.0f, "the host function saw %g, not the 42 the queued copy brought",
              seen);
    o->event_destroy(d->self, event);
    o->stream_destroy(d->self, stream);
    o->free_host(d->self, pinned);
    dev_release(d);
    test_wait_for_slow_stream();

    gb_device_ctx ctx = {.struct_size = sizeof ctx};
    expect_ok(o->context(d->self, &ctx), d, "context");
    kt_expect(ctx.device == GB_DEVICE_CUDA && ctx.stream && ctx.ops == o && ctx.self == d->self &&
              ctx.host_access == 0 && ctx.cc_major >= 8, "context does not describe a GPU");
}

/* A failing host function poisons its instance's waits: a second instance shows it. */
static void test_host_failure(const gb_host *host)
{
    kt_section("a failing host function is returned by the next sync");
    void *self = NULL;
    expect_ok(gpu.ops->create(host, NULL, &self), &gpu, "create (second instance)");
    if (!self)
        return;
    expect_ok(gpu.ops->enqueue_host(self, NULL, fail_on_purpose, NULL, 0), &gpu, "enqueue_host");
    kt_expect(gpu.ops->sync(self) == GB_ERR_INTERNAL, "sync did not return the host "
              "function's GB_ERR_INTERNAL");
    gpu.ops->destroy(self);
}

/* ---- kernels: each runs on a device from host inputs to host outputs ------------------- */

/* `bytes` of zeros, 4-byte aligned, freed with the test's other buffers. */
static void *zeroed(size_t bytes)
{
    void *p = kt_floats(bytes / 4 + 1);
    memset(p, 0, bytes);
    return p;
}

/* Runs `run` on the CPU, then twice on the GPU; the GPU's two results must have the same
 * bits. Results go to want (CPU) and got (GPU), `bytes` each. */
typedef void (*run_fn)(device *d, const void *ctx, void *out);

static void run_both(const char *what, run_fn run, const void *ctx, void *want, void *got,
                     size_t bytes)
{
    void *again = host_copy(got, bytes);
    run(&cpu, ctx, want);
    dev_release(&cpu);
    run(&gpu, ctx, got);
    dev_release(&gpu);
    run(&gpu, ctx, again);
    dev_release(&gpu);
    if (memcmp(got, again, bytes) != 0)
        kt_expect(0, "%s: two runs on the GPU differ", what);
}

/* embed_forward and embed_backward. */
typedef struct embed_ctx {
    gb_dtype dtype;
    int64_t B, T, C, V;
    const int32_t *tokens;
    const float *wte, *wpe, *dwte0, *dwpe0;
    const void *dout;
} embed_ctx;

static void run_embed(device *d, const void *p, void *out)
{
    const embed_ctx *c = p;
    const size_t BTC = (size_t)(c->B * c->T * c->C);
    void *o = dev_alloc(d, act_bytes(c->dtype, BTC));
    int32_t *tok = dev_up(d, c->tokens, sizeof(int32_t) * (size_t)(c->B * c->T));
    float *wte = dev_up(d, c->wte, sizeof(float) * (size_t)(c->V * c->C));
    float *wpe = dev_up(d, c->wpe, sizeof(float) * (size_t)(c->T * c->C));
    float *dwte = dev_up(d, c->dwte0, sizeof(float) * (size_t)(c->V * c->C));
    float *dwpe = dev_up(d, c->dwpe0, sizeof(float) * (size_t)(c->T * c->C));
    void *dout = dev_up(d, c->dout, act_bytes(c->dtype, BTC));
    expect_ok(d->ops->embed_forward(d->self, c->dtype, o, tok, wte, wpe, c->B, c->T, c->C), d,
              "embed_forward");
    expect_ok(d->ops->embed_backward(d->self, c->dtype, dwte, dwpe, dout, tok, c->B, c->T, c->C),
              d, "embed_backward");
    char *h = out;
    dev_down(d, h, o, act_bytes(c->dtype, BTC));
    dev_down(d, h + act_bytes(c->dtype, BTC), dwte, sizeof(float) * (size_t)(c->V * c->C));
    dev_down(d, h + act_bytes(c->dtype, BTC) + sizeof(float) * (size_t)(c->V * c->C), dwpe,
             sizeof(float) * (size_t)(c->T * c->C));
}

static void test_embed(gb_dtype dtype, int64_t B, int64_t T, int64_t C, int64_t V, kt_rng *rng)
{
    int32_t *tokens = kt_ints((size_t)(B * T));
    for (int64_t i = 0; i < B * T; i++)
        tokens[i] = kt_below(rng, (int32_t)V);
    embed_ctx c = {dtype, B, T, C, V, tokens, kt_floats((size_t)(V * C)),
                   kt_floats((size_t)(T * C)), kt_floats((size_t)(V * C)),
                   kt_floats((size_t)(T * C)), NULL};
    kt_fill(rng, (float *)c.wte, (size_t)(V * C), -1, 1);
    kt_fill(rng, (float *)c.wpe, (size_t)(T * C), -1, 1);
    kt_fill(rng, (float *)c.dwte0, (size_t)(V * C), -1, 1);
    kt_fill(rng, (float *)c.dwpe0, (size_t)(T * C), -1, 1);
    c.dout = act_random(rng, dtype, (size_t)(B * T * C), -1, 1);
    const size_t out_bytes = act_bytes(dtype, (size_t)(B * T * C));
    const size_t bytes = out_bytes + sizeof(float) * (size_t)((V + T) * C);
    void *want = kt_floats(bytes / 4 + 1), *got = kt_floats(bytes / 4 + 1);
    char what[96];
    snprintf(what, sizeof what, "embed %s B=%lld T=%lld C=%lld V=%lld", gb_dtype_name(dtype),
             (long long)B, (long long)T, (long long)C, (long long)V);
    run_both(what, run_embed, &c, want, got, bytes);
    expect_bits("  embed_forward out", dtype, got, want, (size_t)(B * T * C));
    expect_bits("  embed_backward dwte, dwpe", GB_F32, (char *)got + out_bytes,
                (char *)want + out_bytes, (size_t)((V + T) * C));
}

/* layernorm_forward then layernorm_backward (dx, dweight, dbias accumulate). */
typedef struct ln_ctx {
    gb_dtype dtype;
    int64_t N, C;
    int with_bias;
    const void *x, *dout, *dx0;
    const float *weight, *bias, *dw0, *db0;
} ln_ctx;

static void run_layernorm(device *d, const void *p, void *out)
{
    const ln_ctx *c = p;
    const size_t NC = (size_t)(c->N * c->C), act = act_bytes(c->dtype, NC);
    const size_t C4 = sizeof(float) * (size_t)c->C, N4 = sizeof(float) * (size_t)c->N;
    void *x = dev_up(d, c->x, act), *y = dev_alloc(d, act), *dout = dev_up(d, c->dout, act);
    void *dx = dev_up(d, c->dx0, act);
    float *w = dev_up(d, c->weight, C4), *b = c->with_bias ? dev_up(d, c->bias, C4) : NULL;
    float *dw = dev_up(d, c->dw0, C4), *db = c->with_bias ? dev_up(d, c->db0, C4) : NULL;
    float *mean = dev_alloc(d, N4), *rstd = dev_alloc(d, N4);
    expect_ok(d->ops->layernorm_forward(d->self, c->dtype, y, mean, rstd, x, w, b, c->N, c->C,
                                        1e-5f), d, "layernorm_forward");
    expect_ok(d->ops->layernorm_backward(d->self, c->dtype, dx, dw, db, dout, x, w, mean, rstd,
                                         c->N, c->C), d, "layernorm_backward");
    char *h = out;
    dev_down(d, h, y, act);
    dev_down(d, h + act, dx, act);
    dev_down(d, h + 2 * act, mean, N4);
    dev_down(d, h + 2 * act + N4, rstd, N4);
    dev_down(d, h + 2 * act + 2 * N4, dw, C4);
    if (db)
        dev_down(d, h + 2 * act + 2 * N4 + C4, db, C4);
}

/* Runs a LayerNorm kernel on both devices (run_both) into zeroed buffers of `bytes`,
 * printing the case's name. */
static void run_ln_case(const char *kernel, run_fn run, const ln_ctx *c, size_t bytes,
                        void **want, void **got)
{
    *want = zeroed(bytes);
    *got = zeroed(bytes);
    char what[96];
    snprintf(what, sizeof what, "%s %s N=%lld C=%lld%s", kernel, gb_dtype_name(c->dtype),
             (long long)c->N, (long long)c->C, c->with_bias ? " bias" : "");
    run_both(what, run, c, *want, *got, bytes);
    printf("  %s\n", what);
}

static void test_layernorm(gb_dtype dtype, int64_t N, int64_t C, int with_bias, kt_rng *rng)
{
    const size_t NC = (size_t)(N * C);
    ln_ctx c = {dtype, N, C, with_bias, act_random(rng, dtype, NC, -2, 3),
                act_random(rng, dtype, NC, -1, 1), act_random(rng, dtype, NC, -1, 1),
                kt_floats((size_t)C), kt_floats((size_t)C), kt_floats((size_t)C),
                kt_floats((size_t)C)};
    kt_fill(rng, (float *)c.weight, (size_t)C, 0.5, 1.5);
    kt_fill(rng, (float *)c.bias, (size_t)C, -1, 1);
    kt_fill(rng, (float *)c.dw0, (size_t)C, -1, 1);
    kt_fill(rng, (float *)c.db0, (size_t)C, -1, 1);
    const size_t act = act_bytes(dtype, NC);
    const size_t bytes = 2 * act + sizeof(float) * (size_t)(2 * N + 2 * C);
    void *want, *got;
    run_ln_case("layernorm", run_layernorm, &c, bytes, &want, &got);
    expect_bits("  forward out", dtype, got, want, NC);
    expect_bits("  backward dx", dtype, (char *)got + act, (char *)want + act, NC);
    expect_bits("  mean, rstd, dweight, dbias", GB_F32, (char *)got + 2 * act,
                (char *)want + 2 * act, (size_t)(2 * N + 2 * C));
}

/* The residual add fused into the LayerNorm after it (ABI 1.5): add_layernorm_forward on
 * the GPU, with the sum written over its first input as the model does, against the CPU's
 * add then layernorm_forward (the CPU has no fused entry): the same bits. */
static void run_add_layernorm(device *d, const void *p, void *out)
{
    const ln_ctx *c = p;
    const size_t NC = (size_t)(c->N * c->C), act = act_bytes(c->dtype, NC);
    const size_t C4 = sizeof(float) * (size_t)c->C, N4 = sizeof(float) * (size_t)c->N;
    void *a = dev_up(d, c->x, act), *b = dev_up(d, c->dout, act), *y = dev_alloc(d, act);
    float *w = dev_up(d, c->weight, C4), *bias = c->with_bias ? dev_up(d, c->bias, C4) : NULL;
    float *mean = dev_alloc(d, N4), *rstd = dev_alloc(d, N4);
    if (d == &gpu) {
        kt_expect(GB_DEVICE_HAS(d->ops, add_layernorm_forward),
                  "device/cuda has add_layernorm_forward (ABI 1.5)");
        if (GB_DEVICE_HAS(d->ops, add_layernorm_forward))
            expect_ok(d->ops->add_layernorm_forward(d->self, c->dtype, a, y, mean, rstd, a, b,
                                                    w, bias, c->N, c->C, 1e-5f),
                      d, "add_layernorm_forward");
    } else {
        expect_ok(d->ops->add(d->self, c->dtype, a, a, b, (int64_t)NC), d, "add");
        expect_ok(d->ops->layernorm_forward(d->self, c->dtype, y, mean, rstd, a, w, bias, c->N,
                                            c->C, 1e-5f), d, "layernorm_forward");
    }
    char *h = out;
    dev_down(d, h, a, act);
    dev_down(d, h + act, y, act);
    dev_down(d, h + 2 * act, mean, N4);
    dev_down(d, h + 2 * act + N4, rstd, N4);
}

static void test_add_layernorm(gb_dtype dtype, int64_t N, int64_t C, int with_bias, kt_rng *rng)
{
    const size_t NC = (size_t)(N * C);
    ln_ctx c = {dtype, N, C, with_bias, act_random(rng, dtype, NC, -2, 3),
                act_random(rng, dtype, NC, -1, 1), NULL, kt_floats((size_t)C),
                kt_floats((size_t)C), NULL, NULL};
    kt_fill(rng, (float *)c.weight, (size_t)C, 0.5, 1.5);
    kt_fill(rng, (float *)c.bias, (size_t)C, -1, 1);
    const size_t act = act_bytes(dtype, NC);
    const size_t bytes = 2 * act + sizeof(float) * (size_t)(2 * N);
    void *want, *got;
    run_ln_case("add_layernorm", run_add_layernorm, &c, bytes, &want, &got);
    expect_bits("  sum (in place of a)", dtype, got, want, NC);
    expect_bits("  out", dtype, (char *)got + act, (char *)want + act, NC);
    expect_bits("  mean, rstd", GB_F32, (char *)got + 2 * act, (char *)want + 2 * act,
                (size_t)(2 * N));
}

/* The element-wise kernels: add, GELU and GELU-tanh, and dropout (ABI 1.7: the same mask
 * from the same seed), the same bits on both devices. */
typedef struct pointwise_ctx {
    gb_dtype dtype;
    int64_t n;
    const void *x, *y;
    int kernel;   /* 0 add, 1 gelu fwd, 2 gelu bwd, 3 tanh fwd, 4 tanh bwd, 5 dropout */
} pointwise_ctx;

static void run_pointwise(device *d, const void *p, void *out)
{
    const pointwise_ctx *c = p;
    const size_t bytes = act_bytes(c->dtype, (size_t)c->n);
    void *x = dev_up(d, c->x, bytes), *y = dev_up(d, c->y, bytes), *o = dev_alloc(d, bytes);
    const gb_device_ops *ops = d->ops;
    gb_status st = GB_ERR_UNSUPPORTED;
    switch (c->kernel) {
    case 0: st = ops->add(d->self, c->dtype, o, x, y, c->n); break;
    case 1: st = ops->gelu_forward(d->self, c->dtype, o, x, c->n); break;
    case 2: st = ops->gelu_backward(d->self, c->dtype, y, x, y, c->n); o = y; break;
    case 3: st = ops->gelu_tanh_forward(d->self, c->dtype, o, x, c->n); break;
    case 4: st = ops->gelu_tanh_backward(d->self, c->dtype, y, x, y, c->n); o = y; break;
    default: st = ops->dropout(d->self, c->dtype, x, x, c->n, 0.3f, 0x5eedull); o = x; break;
    }
    expect_ok(st, d, "element-wise kernel");
    dev_down(d, out, o, bytes);
}

static void test_pointwise(gb_dtype dtype, int64_t n, kt_rng *rng)
{
    static const char *names[] = {"add", "gelu_forward", "gelu_backward (dx aliases dout)",
                                  "gelu_tanh_forward", "gelu_tanh_backward (dx aliases dout)",
                                  "dropout p=0.3 (in place)"};
    pointwise_ctx c = {dtype, n, act_random(rng, dtype, (size_t)n, -6, 6),
                       act_random(rng, dtype, (size_t)n, -1, 1), 0};
    const size_t bytes = act_bytes(dtype, (size_t)n);
    for (int k = 0; k < 6; k++) {
        c.kernel = k;
        void *want = kt_floats(bytes / 4 + 1), *got = kt_floats(bytes / 4 + 1);
        char what[96];
        snprintf(what, sizeof what, "  %s %s n=%lld", names[k], gb_dtype_name(dtype),
                 (long long)n);
        run_both(what, run_pointwise, &c, want, got, bytes);
        expect_bits(what, dtype, got, want, (size_t)n);
    }
}

/* bias_backward and sum_squares. */
typedef struct reduce_ctx {
    gb_dtype dtype;
    int64_t N, C, n;
    const void *dout;
    const float *db0, *x;
} reduce_ctx;

static void run_reductions(device *d, const void *p, void *out)
{
    const reduce_ctx *c = p;
    void *dout = dev_up(d, c->dout, act_bytes(c->dtype, (size_t)(c->N * c->C)));
    float *db = dev_up(d, c->db0, sizeof(float) * (size_t)c->C);
    float *x = dev_up(d, c->x, sizeof(float) * (size_t)c->n), *sq = dev_alloc(d, sizeof(float));
    expect_ok(d->ops->bias_backward(d->self, c->dtype, db, dout, c->N, c->C), d, "bias_backward");
    expect_ok(d->ops->sum_squares(d->self, sq, x, c->n), d, "sum_squares");
    dev_down(d, out, db, sizeof(float) * (size_t)c->C);
    dev_down(d, (float *)out + c->C, sq, sizeof(float));
}

static void test_reductions(gb_dtype dtype, int64_t N, int64_t C, int64_t n, kt_rng *rng)
{
    reduce_ctx c = {dtype, N, C, n, act_random(rng, dtype, (size_t)(N * C), -1, 1),
                    kt_floats((size_t)C), kt_floats((size_t)n)};
    kt_fill(rng, (float *)c.db0, (size_t)C, -1, 1);
    kt_fill(rng, (float *)c.x, (size_t)n, -1, 1);
    float *want = kt_floats((size_t)C + 1), *got = kt_floats((size_t)C + 1);
    char what[96];
    snprintf(what, sizeof what, "  bias_backward %s N=%lld C=%lld, sum_squares n=%lld",
             gb_dtype_name(dtype), (long long)N, (long long)C, (long long)n);
    run_both(what, run_reductions, &c, want, got, sizeof(float) * (size_t)(C + 1));
    expect_bits(what, GB_F32, got, want, (size_t)C + 1);
}

/* cross_entropy, with dlogits in place of the logits (their alias) or none; rows ld
 * apart through cross_entropy_ld (ABI 1.3) when ld > V, the padding columns then left
 * as they were on both devices. */
typedef struct ce_ctx {
    gb_dtype dtype;
    int64_t N, V, ld;
    int with_grad;
    const void *logits;
    const int32_t *targets;
} ce_ctx;

static void run_cross_entropy(device *d, const void *p, void *out)
{
    const ce_ctx *c = p;
    const size_t act = act_bytes(c->dtype, (size_t)(c->N * c->ld));
    void *logits = dev_up(d, c->logits, act);
    int32_t *targets = dev_up(d, c->targets, sizeof(int32_t) * (size_t)c->N);
    float *losses = dev_alloc(d, sizeof(float) * (size_t)c->N);
    void *dlogits = c->with_grad ? logits : NULL;
    const float dloss = 1.0f / (float)c->N;
    if (c->ld == c->V)
        expect_ok(d->ops->cross_entropy(d->self, c->dtype, losses, dlogits, logits, targets,
                                        c->N, c->V, dloss), d, "cross_entropy");
    else
        expect_ok(d->ops->cross_entropy_ld(d->self, c->dtype, losses, dlogits, logits, c->ld,
                                           targets, c->N, c->V, dloss), d, "cross_entropy_ld");
    dev_down(d, out, losses, sizeof(float) * (size_t)c->N);
    dev_down(d, (float *)out + c->N, logits, act);
}

static void test_cross_entropy(gb_dtype dtype, int64_t N, int64_t V, int64_t ld, int with_grad,
                               kt_rng *rng)
{
    /* the last column (the tail past whole 16-byte runs where V is odd), the last whole
     * run's (past shared memory at V 120001), the first, then any */
    int32_t *targets = kt_ints((size_t)N);
    for (int64_t i = 0; i < N; i++)
        targets[i] = i == 0 ? (int32_t)V - 1
                     : i == 1 ? (int32_t)(V - 1) / 8 * 8 - 1
                     : i == 2 ? 0
                              : kt_below(rng, (int32_t)V);
    ce_ctx c = {dtype, N, V, ld, with_grad, act_random(rng, dtype, (size_t)(N * ld), -8, 8),
                targets};
    const size_t bytes = sizeof(float) * (size_t)N + act_bytes(dtype, (size_t)(N * ld));
    void *want = kt_floats(bytes / 4 + 1), *got = kt_floats(bytes / 4 + 1);
    char what[96];
    snprintf(what, sizeof what, "  cross_entropy %s N=%lld V=%lld ld=%lld%s",
             gb_dtype_name(dtype), (long long)N, (long long)V, (long long)ld,
             with_grad ? " (dlogits in place)" : "");
    run_both(what, run_cross_entropy, &c, want, got, bytes);
    expect_close(what, GB_F32, got, want, GB_F32, (size_t)N, 0.0, 1e-6);
    if (with_grad)
        expect_bits("  dlogits", dtype, (float *)got + N, (float *)want + N, (size_t)(N * ld));
}

/* ---- matmul --------------------------------------------------------------------------- */

typedef struct mm_ctx {
    gb_matmul_args args;   /* host pointers; the run swaps in device copies */
    size_t a_bytes, b_bytes, c_bytes;
    const float *bias0;
} mm_ctx;

static void run_matmul(device *d, const void *p, void *out)
{
    const mm_ctx *c = p;
    gb_matmul_args g = c->args;
    g.a = dev_up(d, c->args.a, c->a_bytes);
    g.b = dev_up(d, c->args.b, c->b_bytes);
    g.c = dev_up(d, c->args.c, c->c_bytes);
    g.bias = c->args.bias ? dev_up(d, c->args.bias, sizeof(float) * (size_t)c->args.n) : NULL;
    g.bias_lowp = c->args.bias_lowp ? dev_up(d, c->args.bias_lowp, 2 * (size_t)c->args.n) : NULL;
    g.aux = c->args.aux ? dev_up(d, c->args.aux, c->c_bytes) : NULL;
    g.bias_grad = c->args.bias_grad ? dev_up(d, c->args.bias_grad, sizeof(float) * (size_t)c->args.m)
                                    : NULL;
    expect_ok(d->ops->matmul(d->self, &g), d, "matmul");
    dev_down(d, out, g.c, c->c_bytes);
    if (g.aux)
        dev_down(d, (char *)out + c->c_bytes, g.aux, c->c_bytes);
    if (g.bias_grad)
        dev_down(d, (char *)out + 2 * c->c_bytes, g.bias_grad, sizeof(float) * (size_t)c->args.m);
}

/* op(A)[i][q] op(B)[q][j] summed in double, for batch `b`. */
static double ref_product(const gb_matmul_args *g, int64_t b, int64_t i, int64_t j)
{
    double acc = 0.0;
    for (int64_t q = 0; q < g->k; q++) {
        size_t ia = (size_t)(b * g->stride_a + (g->trans_a ? q * g->lda + i : i * g->lda + q));
        size_t ib = (size_t)(b * g->stride_b + (g->trans_b ? j * g->ldb + q : q * g->ldb + j));
        acc += (double)act_get(g->a, g->dtype_a, ia) * act_get(g->b, g->dtype_b, ib);
    }
    return acc;
}

static double ref_gelu_erf(double x)
{
    return 0.5 * x * erfc(-x / sqrt(2.0));
}

static double ref_gelu_erf_grad(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

/* One matmul on the GPU (twice, same bits) against the CPU device when it has the
 * feature (plain calls), else against device.h's definition in double. */
static void check_matmul(int64_t m, int64_t n, int64_t k, int ta, int tb, int64_t pad,
                         gb_dtype dtype, gb_dtype dtype_c, float alpha, float beta,
                         int with_bias, gb_matmul_epilogue epilogue, int64_t batch, int tf32,
                         kt_rng *rng)
{
    const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    const int64_t sa = (ta ? k : m) * lda, sb = (tb ? n : k) * ldb, sc = m * ldc;
    const int64_t nb = batch > 1 ? batch : 1;
    mm_ctx c = {.args = {.struct_size = sizeof(gb_matmul_args), .m = m, .n = n, .k = k,
                         .lda = lda, .trans_a = ta, .dtype_a = dtype, .ldb = ldb, .trans_b = tb,
                         .dtype_b = dtype, .ldc = ldc, .dtype_c = dtype_c, .alpha = alpha,
                         .beta = beta, .batch = batch, .stride_a = sa, .stride_b = sb,
                         .stride_c = sc, .epilogue = epilogue, .allow_tf32 = tf32}};
    c.a_bytes = act_bytes(dtype, (size_t)(nb * sa));
    c.b_bytes = act_bytes(dtype, (size_t)(nb * sb));
    c.c_bytes = act_bytes(dtype_c, (size_t)(nb * sc));
    c.args.a = act_random(rng, dtype, (size_t)(nb * sa), -1, 1);
    c.args.b = act_random(rng, dtype, (size_t)(nb * sb), -1, 1);
    c.args.c = act_random(rng, dtype_c, (size_t)(nb * sc), -1, 1);
    float *bias = kt_floats((size_t)n);
    kt_fill(rng, bias, (size_t)n, -1, 1);
    c.args.bias = with_bias ? bias : NULL;
    const int gelu = epilogue == GB_EPILOGUE_GELU || epilogue == GB_EPILOGUE_GELU_TANH;
    const int dgelu = epilogue == GB_EPILOGUE_DGELU || epilogue == GB_EPILOGUE_DGELU_TANH;
    const int tanh_form = epilogue == GB_EPILOGUE_GELU_TANH || epilogue == GB_EPILOGUE_DGELU_TANH;
    if (gelu || dgelu)
        c.args.aux = act_random(rng, dtype_c, (size_t)(nb * sc), -3, 3);
    float *bias_grad0 = kt_floats((size_t)m);
    kt_fill(rng, bias_grad0, (size_t)m, -1, 1);
    if (epilogue == GB_EPILOGUE_BIAS_GRAD)
        c.args.bias_grad = bias_grad0;

    const size_t out_bytes = 2 * c.c_bytes + sizeof(float) * (size_t)m;
    void *got = zeroed(out_bytes), *again = zeroed(out_bytes);
    run_matmul(&gpu, &c, got);
    dev_release(&gpu);
    run_matmul(&gpu, &c, again);
    dev_release(&gpu);
    char what[160];
    snprintf(what, sizeof what, "  matmul %lldx%lldx%lld +%lld %c%c %s->%s a=%g b=%g%s%s "
             "epi=%d batch=%lld", (long long)m, (long long)n, (long long)k, (long long)pad,
             ta ? 'T' : 'N', tb ? 'T' : 'N', gb_dtype_name(dtype), gb_dtype_name(dtype_c),
             alpha, beta, with_bias ? " bias" : "", tf32 ? " tf32" : "", (int)epilogue,
             (long long)batch);
    kt_expect(memcmp(got, again, out_bytes) == 0, "%s: two runs on the GPU differ", what);

    /* the reference, in double, of device.h's definitions */
    const size_t total = (size_t)(nb * sc);
    double *want = kt_doubles(total), *want_aux = kt_doubles(total);
    float *g = kt_floats(total), *g_aux = kt_floats(total);
    size_t count = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                const size_t at = (size_t)(b * sc + i * ldc + j);
                double v = alpha * ref_product(&c.args, b, i, j);
                if (beta != 0.0f && !gelu && !dgelu)
                    v += beta * (double)act_get(c.args.c, dtype_c, at);
                if (with_bias)
                    v += bias[j];
                double pre = v;
                if (gelu)
                    v = tanh_form ? kt_gelu_tanh(pre) : ref_gelu_erf(pre);
                if (dgelu) {
                    double x = act_get(c.args.aux, dtype_c, at);
                    v *= tanh_form ? kt_gelu_tanh_grad(x) : ref_gelu_erf_grad(x);
                }
                want[count] = v;
                want_aux[count] = pre;
                g[count] = act_get(got, dtype_c, at);
                g_aux[count] = act_get((char *)got + c.c_bytes, dtype_c, at);
                count++;
            }
    const tolerance pre_tol = matmul_tolerance(tf32, rounding(dtype_c), k);
    /* cuBLASLt's looser GELU only where device/cuda can hand it the epilogue (an aux it
     * takes); the element-wise GELU and DGELU run otherwise and keep C's own precision */
    const int lt_epilogue = tanh_form && ldc % 8 == 0 && (nb == 1 || sc % 8 == 0);
    const double u = lt_epilogue && rounding(dtype_c) < LT_GELU_PRECISION ? LT_GELU_PRECISION
                                                                         : rounding(dtype_c);
    tolerance tol = matmul_tolerance(tf32, u, k);
    if (gelu || dgelu) {
        tol.atol += 2e-6;   /* the GELU formulas' own error */
        if (u > rounding(GB_F32))
            tol.atol += 4.0 * u;   /* the pre-activation rounded before GELU on one path */
    }
    kt_compare(what, g, want, count, tol.atol, tol.rtol);
    if (gelu && c.args.aux)
        kt_compare("    aux (pre-activation)", g_aux, want_aux, count, pre_tol.atol,
                   pre_tol.rtol);
    if (epilogue == GB_EPILOGUE_BIAS_GRAD) {
        /* device/cuda's own column or row sums (not cuBLASLt), k * batch terms in f32 */
        const double kk = (double)(k > 0 ? k : 1);
        double *want_bg = kt_doubles((size_t)m);
        for (int64_t i = 0; i < m; i++) {
            double s = bias_grad0[i];
            for (int64_t b = 0; b < nb; b++)
                for (int64_t q = 0; q < k; q++)
                    s += act_get(c.args.a, dtype, (size_t)(b * sa + (ta ? q * lda + i : i * lda + q)));
            want_bg[i] = s;
        }
        kt_compare("    bias_grad", (float *)((char *)got + 2 * c.c_bytes), want_bg, (size_t)m,
                   1e-5 * kk, 1e-5);
    }
    /* plain calls: the CPU device computes the same thing; they must agree as closely */
    if (epilogue == GB_EPILOGUE_DEFAULT && batch <= 1 && !tf32) {
        void *cpu_out = kt_floats(out_bytes / 4 + 1);
        run_matmul(&cpu, &c, cpu_out);
        dev_release(&cpu);
        expect_close("    against device/cpu", dtype_c, got, cpu_out, dtype_c,
                     c.c_bytes / gb_dtype_size(dtype_c), tol.atol, tol.rtol);
    }
}

static void test_matmul(kt_rng *rng)
{
    kt_section("matmul: shapes, transposes, scalings (against double and device/cpu)");
    static const int64_t shapes[][4] = {{1, 1, 1, 0}, {7, 5, 3, 0}, {1, 50, 7, 3},
                                        {33, 17, 65, 0}, {64, 48, 96, 8}, {5, 1, 300, 1},
                                        {128, 256, 64, 0}, {3, 4, 0, 0}};
    static const struct { float alpha, beta; int bias; } scalings[] = {
        {1, 0, 0}, {1, 0, 1}, {0.5f, 0, 1}, {1, 1, 0}, {-2, 0.25f, 1}};
    static const gb_dtype types[][2] = {{GB_F32, GB_F32}, {GB_BF16, GB_BF16}, {GB_BF16, GB_F32},
                                        {GB_F16, GB_F16}, {GB_F16, GB_F32}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (size_t y = 0; y < sizeof types / sizeof types[0]; y++)
                for (size_t sc = 0; sc < sizeof scalings / sizeof scalings[0]; sc++)
                    check_matmul(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1,
                                 shapes[s][3], types[y][0], types[y][1], scalings[sc].alpha,
                                 scalings[sc].beta, scalings[sc].bias, GB_EPILOGUE_DEFAULT, 0, 0,
                                 rng);
    kt_section("matmul: TF32, batches");
    check_matmul(64, 48, 96, 0, 1, 0, GB_F32, GB_F32, 1, 0, 1, GB_EPILOGUE_DEFAULT, 0, 1, rng);
    check_matmul(256, 128, 512, 1, 0, 0, GB_F32, GB_F32, 1, 1, 0, GB_EPILOGUE_DEFAULT, 0, 1, rng);
    for (int t = 0; t < 4; t++) {
        check_matmul(16, 24, 8, t & 1, t >> 1, 0, GB_F32, GB_F32, 0.125f, 0, 0,
                     GB_EPILOGUE_DEFAULT, 6, 0, rng);
        check_matmul(16, 24, 8, t & 1, t >> 1, 1, GB_BF16, GB_BF16, 1, 0, 0, GB_EPILOGUE_DEFAULT,
                     3, 0, rng);
    }
    kt_section("matmul: epilogues (fused where cuBLASLt has them, element-wise otherwise)");
    static const gb_matmul_epilogue epilogues[] = {GB_EPILOGUE_GELU, GB_EPILOGUE_GELU_TANH,
                                                   GB_EPILOGUE_DGELU, GB_EPILOGUE_DGELU_TANH,
                                                   GB_EPILOGUE_BIAS_GRAD};
    for (size_t e = 0; e < sizeof epilogues / sizeof epilogues[0]; e++)
        for (size_t y = 0; y < sizeof types / sizeof types[0]; y++) {
            const int dgelu = epilogues[e] == GB_EPILOGUE_DGELU ||
                              epilogues[e] == GB_EPILOGUE_DGELU_TANH;
            /* ldc 64 (aux fits cuBLASLt) and 61 (it does not), one batched */
            check_matmul(32, 64, 48, 0, 1, 0, types[y][0], types[y][1], 1, 0, !dgelu,
                         epilogues[e], 0, 0, rng);
            check_matmul(31, 61, 17, 1, 0, 0, types[y][0], types[y][1], 0.5f, 0, 0,
                         epilogues[e], 0, 0, rng);
            check_matmul(8, 16, 24, 1, 1, 0, types[y][0], types[y][1], 1, 0, !dgelu,
                         epilogues[e], 2, 0, rng);
        }
    check_matmul(12, 8, 0, 0, 0, 0, GB_F32, GB_F32, 1, 0, 1, GB_EPILOGUE_GELU, 0, 0, rng);
    /* a linear layer's weight gradient as the model asks for it with [train]
     * fuse_bias_grad: dout^T @ in accumulated into an f32 dW, the bias gradient from
     * cuBLASLt's BGRADB epilogue */
    for (size_t y = 0; y < sizeof types / sizeof types[0]; y++)
        if (types[y][1] == GB_F32)
            check_matmul(96, 40, 72, 1, 0, 0, types[y][0], GB_F32, 1, 1, 0,
                         GB_EPILOGUE_BIAS_GRAD, 0, 0, rng);
}

/* A linear layer with a 16-bit C given its bias in C's type as well (bias_lowp, ABI 1.5,
 * the weights' low-precision copy, which spares the kernel that rounds the bias before the
 * product): the same bits as from the f32 bias alone. */
static void test_matmul_lowp_bias(kt_rng *rng)
{
    kt_section("matmul: the bias in C's type (bias_lowp) against the f32 bias");
    static const gb_dtype types[] = {GB_BF16, GB_F16};
    for (size_t y = 0; y < sizeof types / sizeof types[0]; y++) {
        const gb_dtype t = types[y];
        const int64_t m = 24, n = 40, k = 56;
        float *bias = kt_floats((size_t)n);
        kt_fill(rng, bias, (size_t)n, -1, 1);
        uint16_t *lowp = calloc((size_t)n, sizeof *lowp);
        for (int64_t j = 0; j < n; j++)
            lowp[j] = t == GB_BF16 ? gb_bf16_from_f32(bias[j]) : gb_f16_from_f32(bias[j]);
        mm_ctx c = {.args = {.struct_size = sizeof(gb_matmul_args), .m = m, .n = n, .k = k,
                             .a = act_random(rng, t, (size_t)(m * k), -1, 1), .lda = k,
                             .dtype_a = t, .b = act_random(rng, t, (size_t)(n * k), -1, 1),
                             .ldb = k, .trans_b = 1, .dtype_b = t,
                             .c = act_random(rng, t, (size_t)(m * n), -1, 1), .ldc = n,
                             .dtype_c = t, .alpha = 1.0f, .bias = bias},
                    .a_bytes = act_bytes(t, (size_t)(m * k)), .b_bytes = act_bytes(t, (size_t)(n * k)),
                    .c_bytes = act_bytes(t, (size_t)(m * n))};
        void *want = kt_floats((size_t)(m * n)), *got = kt_floats((size_t)(m * n));
        run_matmul(&gpu, &c, want);
        dev_release(&gpu);
        c.args.bias_lowp = lowp;
        run_matmul(&gpu, &c, got);
        dev_release(&gpu);
        expect_bits(t == GB_BF16 ? "  bf16 C, bias_lowp" : "  f16 C, bias_lowp", t, got, want,
                    (size_t)(m * n));
        free(lowp);
    }
}

/* ---- the tests ------------------------------------------------------------------------ */

static void test_kernels(void)
{
    kt_rng rng = kt_seed(7);
    static const gb_dtype dtypes[] = {GB_F32, GB_BF16, GB_F16};
    for (int t = 0; t < 3; t++) {
        const gb_dtype dtype = dtypes[t];
        kt_section("%s kernels against device/cpu (same bits expected)", gb_dtype_name(dtype));
        test_embed(dtype, 3, 5, 67, 11, &rng);
        test_embed(dtype, 2, 600, 67, 11, &rng);   // two token tiles, a partial last warp
        test_embed(dtype, 8, 64, 768, 50, &rng);   // 16-byte runs of columns
        test_embed(dtype, 4, 40, 264, 30, &rng);   // ... a partial last tile of them
        test_layernorm(dtype, 37, 77, 1, &rng);
        test_layernorm(dtype, 130, 768, 0, &rng);   // chunks of 43 and 44 rows: tiles cut short
        // rows too wide for the one-pass backward's shared memory: dx, then the partials
        test_layernorm(dtype, 5, 10240, 1, &rng);
        test_add_layernorm(dtype, 37, 77, 1, &rng);
        test_add_layernorm(dtype, 130, 768, 0, &rng);
        test_pointwise(dtype, 100003, &rng);
        test_reductions(dtype, 200, 50, 300007, &rng);
        test_reductions(dtype, 1, 3072, 5, &rng);
        test_cross_entropy(dtype, 9, 1500, 1500, 1, &rng);
        test_cross_entropy(dtype, 4, 50257, 50257, 1, &rng);
        test_cross_entropy(dtype, 4, 50257, 50304, 1, &rng);   // llm.c's padded GPT-2
        // rows longer than shared memory holds: the rest read from global memory
        test_cross_entropy(dtype, 2, 120001, 120008, 1, &rng);
        test_cross_entropy(dtype, 5, 65, 65, 0, &rng);
    }
    test_matmul(&rng);
    test_matmul_lowp_bias(&rng);
}

static int check_descriptor(const gb_plugin_desc *d)
{
    int failures = gb_test_check_descriptor(d, GB_KIND_DEVICE, "cuda", GB_DEVICE_CUDA,
                                            sizeof(gb_device_ops));
    const uint32_t caps = GB_CAP_DETERMINISTIC | GB_CAP_MATMUL_BATCHED |
                          GB_CAP_MATMUL_EPILOGUES | GB_CAP_GELU_TANH | GB_CAP_TF32;
    const uint32_t dtypes = GB_DTYPE_BIT(GB_F32) | GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16);
    GB_TEST_CHECK(failures, d->caps == caps, "caps 0x%x, want 0x%x", d->caps, caps);
    GB_TEST_CHECK(failures, d->dtypes == dtypes, "dtypes 0x%x, want 0x%x", d->dtypes, dtypes);
    const gb_device_ops *o = d->ops;
    /* every entry, the optional tanh GELU included */
    const void *const *entry = (const void *const *)((const char *)o + sizeof(size_t));
    const size_t entries = (sizeof(gb_device_ops) - sizeof(size_t)) / sizeof(void *);
    for (size_t i = 0; i < entries; i++)
        GB_TEST_CHECK(failures, entry[i] != NULL, "vtable entry %zu is NULL", i);
    return failures;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    gb_test_usage_unless(argc == 2 || argc == 4, argv[0], "CUDA_PLUGIN [CPU_PLUGIN ops]");
    const gb_plugin_desc *desc = gb_test_load_plugin(argv[1]);
    gpu.ops = desc->ops;
    kt_section("descriptor of %s", argv[1]);
    kt_expect(check_descriptor(desc) == 0, "the descriptor is not device/cuda's");
    gb_host host = kt_host(2);
    kt_clear_error();
    gb_status st = gpu.ops->create(&host, NULL, &gpu.self);
    if (st != GB_OK) {
        kt_expect(st == GB_ERR_DEVICE && strstr(kt_last_error(), "device/cuda") &&
                  strstr(kt_last_error(), "no NVIDIA GPU"),
                  "create without a GPU returned %d: \"%s\" (want GB_ERR_DEVICE naming "
                  "device/cuda and \"no NVIDIA GPU\")", (int)st, kt_last_error());
        printf("create: %s\n", kt_last_error());
        if (argc == 4) {
            printf("SKIP: no usable NVIDIA GPU\n");
            return kt_exit_code() ? 1 : SKIP;
        }
        return kt_exit_code();
    }
    gb_device_info info = {.struct_size = sizeof info};
    expect_ok(gpu.ops->info(gpu.self, &info), &gpu, "info");
    printf("GPU: %s, cc %d.%d, %.1f GiB (%.1f free), driver %s, %s, peak %.0f TFLOP/s f32, "
           "%.0f bf16\n", info.name, info.cc_major, info.cc_minor, info.memory_bytes / 1073741824.0,
           info.free_bytes / 1073741824.0, info.driver, info.libraries,
           info.peak_flops_f32 / 1e12, info.peak_flops_bf16 / 1e12);
    kt_expect(info.name[0] && info.memory_bytes > 0 && info.cc_major >= 8 &&
              strstr(info.libraries, "cuBLASLt") && info.driver[0],
              "info does not describe the GPU");
    if (argc == 4) {
        cpu.ops = gb_test_load_plugin(argv[2])->ops;
        gb_value emulate = {.i = 0};
        expect_ok(cpu.ops->create(&host, &emulate, &cpu.self), &cpu, "create");
        test_memory();
        test_kernels();
        test_host_failure(&host);
        cpu.ops->destroy(cpu.self);
    }
    gpu.ops->destroy(gpu.self);
    return kt_exit_code();
}
