/* Conformance checks of device plugins: memory, self-description, and the base kernels
 * against device/cpu.
 *
 * The device's description (ABI 1.6) must be usable data that agrees with its vtable: a
 * device without stream and event entries says it is synchronous, with host memory.
 * Memory is checked for alignment and exact round trips (host to device, device to
 * device, back to the host) and memset_zero. Each kernel family then runs on small odd
 * shapes twice: on the plugin under test, with inputs uploaded into its memory, and on
 * device/cpu with the same inputs in host memory; outputs must agree within 1e-5 abs +
 * 1e-4 rel. Outputs start as NaN, and "+=" outputs start from the same random values on
 * both sides, so a kernel that overwrites instead of accumulating shows. The optional
 * kernels (GELU's tanh form, cross_entropy_ld) are UNSUPPORTED rows where a device leaves
 * them out.
 *
 * Left out: dtypes other than f32 and large shapes; the kernel tests in tests/kernels
 * cover device/cpu itself against double-precision references.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gearbox/device.h"
#include "kit.h"

#define ATOL 1e-5
#define RTOL 1e-4

/* One tensor twice: the reference's copy in host memory, the plugin's on its device. */
typedef struct pair {
    void *host, *dev;
    size_t bytes;
} pair;

/* Both copies of a pair start as `init` (bytes long). 0, or -1 when memory ran out. */
static int pair_of(gb_kit *kit, pair *p, const void *init, size_t bytes)
{
    p->bytes = bytes;
    p->host = gb_kit_host_alloc(kit, bytes);
    p->dev = gb_kit_device_copy(kit, init, bytes);
    if (!p->host || !p->dev)
        return -1;
    memcpy(p->host, init, bytes);
    return 0;
}

static float *random_floats(gb_kit *kit, gb_rng *rng, size_t n, double lo, double hi)
{
    float *x = gb_kit_host_alloc(kit, n * sizeof(float));
    if (x)
        gb_kit_fill(rng, x, n, lo, hi);
    return x;
}

static float *nan_floats(gb_kit *kit, size_t n)
{
    float *x = gb_kit_host_alloc(kit, n * sizeof(float));
    if (x)
        gb_kit_fill_nan(x, n);
    return x;
}

/* A pair of n floats, random in [lo, hi) or (lo > hi) NaN. */
static int floats(gb_kit *kit, gb_rng *rng, pair *p, size_t n, double lo, double hi)
{
    float *init = lo > hi ? nan_floats(kit, n) : random_floats(kit, rng, n, lo, hi);
    return init ? pair_of(kit, p, init, n * sizeof(float)) : -1;
}

/* A pair of n token ids below `below`. */
static int tokens(gb_kit *kit, gb_rng *rng, pair *p, size_t n, int32_t below)
{
    int32_t *init = gb_kit_host_alloc(kit, n * sizeof(int32_t));
    if (!init)
        return -1;
    for (size_t i = 0; i < n; i++)
        init[i] = (int32_t)gb_rng_below(rng, (uint64_t)below);
    return pair_of(kit, p, init, n * sizeof(int32_t));
}

/* Compares the plugin's copy of an output with the reference's; adds what differs to
 * `problems`. */
static void compare(gb_kit *kit, const pair *p, const char *name, char *problems, size_t cap)
{
    float *got = gb_kit_host_alloc(kit, p->bytes);
    char detail[256];
    if (!got || gb_kit_download(kit, got, p->dev, p->bytes))
        gb_kit_append(problems, cap, "%s: %s", name, kit->memory_error);
    else if (!gb_kit_close(got, p->host, p->bytes / sizeof(float), ATOL, RTOL, detail,
                           sizeof detail))
        gb_kit_append(problems, cap, "%s differs from device/cpu: %s", name, detail);
}

/* One kernel family: the reference and the plugin called with each side's buffers. The
 * call order (reference first) lets in-place kernels see the same inputs. */
typedef struct family {
    gb_kit *kit;
    const gb_kit_instance *ref;
    const char *check;
    char problems[1024];
    int reported;           /* a row was reported already (a call failed) */
} family;

static const gb_device_ops *ref_ops(const family *f)
{
    return f->ref->ops;
}

/* Records the outcome of one pair of calls; returns nonzero when the row is decided. */
static int calls_failed(family *f, const char *kernel, gb_status want, gb_status got)
{
    if (f->reported)
        return 1;
    if (want != GB_OK) {
        gb_kit_report(f->kit, f->check, GB_KIT_FAIL, "the reference device/cpu failed in %s "
                      "(%s): %s", kernel, gb_status_name(want), f->ref->inst.error);
        f->reported = 1;
    } else if (got != GB_OK) {
        gb_kit_report_call(f->kit, f->check, &f->kit->device, kernel, got);
        f->reported = 1;
    }
    return f->reported;
}

static void finish(family *f, const char *what)
{
    if (f->reported)
        return;
    if (f->problems[0])
        gb_kit_report(f->kit, f->check, GB_KIT_FAIL, "%s", f->problems);
    else
        gb_kit_report(f->kit, f->check, GB_KIT_PASS, "%s within 1e-5 abs + 1e-4 rel of "
                      "device/cpu", what);
}

static void check_context(gb_kit *kit)
{
    const char *check = "context";
    gb_device_ctx ctx;
    memset(&ctx, 0xff, sizeof ctx);
    ctx.struct_size = sizeof ctx;
    gb_status st = kit->dev->context(kit->device.inst.self, &ctx);
    uint32_t bit = ctx.device;
    if (st != GB_OK)
        gb_kit_report_call(kit, check, &kit->device, "context", st);
    else if (ctx.struct_size != sizeof ctx)
        gb_kit_report(kit, check, GB_KIT_FAIL, "context() changed struct_size");
    else if (bit ? (bit & (bit - 1)) || !(bit & kit->plugin->desc->devices)
                 : kit->plugin->desc->devices != 0)
        gb_kit_report(kit, check, GB_KIT_FAIL, "device bits 0x%x: one of the descriptor's "
                      "devices 0x%x expected (0 only for a family of its own, ABI 1.6)", bit,
                      kit->plugin->desc->devices);
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "%s, ordinal %d",
                      bit ? gb_device_name(bit) : "a family of its own", ctx.ordinal);
}

/* The stream and event entries of ABI 1.2, optional as a group since 1.6. */
static int stream_group(const gb_device_ops *ops)
{
    void (*const entries[])(void) = {
        (void (*)(void))ops->alloc_host, (void (*)(void))ops->free_host,
        (void (*)(void))ops->copy_async, (void (*)(void))ops->stream_create,
        (void (*)(void))ops->stream_destroy, (void (*)(void))ops->event_create,
        (void (*)(void))ops->event_destroy, (void (*)(void))ops->event_record,
        (void (*)(void))ops->stream_wait_event, (void (*)(void))ops->event_query,
        (void (*)(void))ops->event_sync, (void (*)(void))ops->enqueue_host};
    int set = 0;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        set += entries[i] != NULL;
    return set;
}

/* ABI 1.6: what describe() says is usable data, and agrees with the vtable: a device that
 * leaves the stream group out is synchronous, with host memory. */
static void check_describe(gb_kit *kit)
{
    const char *check = "describe (ABI 1.6)";
    const gb_plugin_desc *d = kit->plugin->desc;
    if (d->abi_minor < 6) {
        gb_kit_report(kit, check, GB_KIT_UNSUPPORTED, "built for ABI 1.%u: the core describes "
                      "it from its device bit", d->abi_minor);
        return;
    }
    gb_device_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.struct_size = sizeof desc;
    gb_status st = kit->dev->describe(&kit->device.inst.host, &desc);
    size_t family = strnlen(desc.family, sizeof desc.family);
    int streams = stream_group(kit->dev);
    if (st != GB_OK)
        gb_kit_report_call(kit, check, &kit->device, "describe", st);
    else if (!family || family == sizeof desc.family ||
             strspn(desc.family, "abcdefghijklmnopqrstuvwxyz0123456789_") != family)
        gb_kit_report(kit, check, GB_KIT_FAIL, "family must be a lower-case name");
    else if (desc.memory != GB_MEMORY_HOST && desc.memory != GB_MEMORY_DEVICE)
        gb_kit_report(kit, check, GB_KIT_FAIL, "memory %u is no gb_memory_kind", desc.memory);
    else if (!desc.preferred_precision[0] || !(desc.native_dtypes & GB_DTYPE_BIT(GB_F32)))
        gb_kit_report(kit, check, GB_KIT_FAIL, "a preferred precision and f32 among the "
                      "native dtypes expected");
    else if (!streams && (desc.asynchronous || desc.memory != GB_MEMORY_HOST))
        gb_kit_report(kit, check, GB_KIT_FAIL, "no stream and event entries, but it says it is "
                      "%s with %s memory; only a synchronous host-memory device may leave them",
                      desc.asynchronous ? "asynchronous" : "synchronous",
                      desc.memory == GB_MEMORY_HOST ? "host" : "its own");
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "family %s, %s memory, %s, prefers %s; stream "
                      "and event entries: %s", desc.family,
                      desc.memory == GB_MEMORY_HOST ? "host" : "device",
                      desc.asynchronous ? "asynchronous" : "synchronous",
                      desc.preferred_precision, streams ? "given" : "the core's");
}

static void check_info(gb_kit *kit)
{
    const char *check = "info";
    gb_device_info info;
    memset(&info, 0xff, sizeof info);
    info.struct_size = sizeof info;
    gb_status st = kit->dev->info(kit->device.inst.self, &info);
    if (st != GB_OK)
        gb_kit_report_call(kit, check, &kit->device, "info", st);
    else if (info.struct_size != sizeof info)
        gb_kit_report(kit, check, GB_KIT_FAIL, "info() changed struct_size");
    else if (!memchr(info.name, '\0', sizeof info.name) || !info.name[0])
        gb_kit_report(kit, check, GB_KIT_FAIL, "name is empty or not NUL-terminated");
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "\"%s\", %.1f GiB", info.name,
                      (double)info.memory_bytes / (1 << 30));
}

static void check_memory(gb_kit *kit, gb_rng *rng)
{
    const char *check = "memory: alloc, copy, memset_zero";
    const size_t sizes[] = {1, 4099 * sizeof(float), 1 << 20};
    for (int i = 0; i < 3; i++) {
        size_t bytes = sizes[i], n = (bytes + 3) / 4;
        float *host = random_floats(kit, rng, n, -1, 1), *back = nan_floats(kit, n);
        void *a = gb_kit_device_alloc(kit, bytes), *b = gb_kit_device_alloc(kit, bytes);
        if (!host || !back || !a || !b || gb_kit_upload(kit, a, host, bytes)) {
            gb_kit_report_memory(kit, check);
            return;
        }
        if ((uintptr_t)a % 64 || (uintptr_t)b % 64) {
            gb_kit_report(kit, check, GB_KIT_FAIL, "alloc(%zu) returned %p, not 64-byte "
                          "aligned", bytes, (uintptr_t)a % 64 ? a : b);
            return;
        }
        gb_status st = kit->dev->copy(kit->device.inst.self, b, a, bytes,
                                      GB_COPY_DEVICE_TO_DEVICE);
        if (st != GB_OK) {
            gb_kit_report_call(kit, check, &kit->device, "copy (device to device)", st);
            return;
        }
        if (gb_kit_download(kit, back, b, bytes)) {
            gb_kit_report_memory(kit, check);
            return;
        }
        if (memcmp(back, host, bytes) != 0) {
            gb_kit_report(kit, check, GB_KIT_FAIL, "%zu bytes copied to the device, across it "
                          "and back are not the same bytes", bytes);
            return;
        }
        if ((st = kit->dev->memset_zero(kit->device.inst.self, b, bytes)) != GB_OK) {
            gb_kit_report_call(kit, check, &kit->device, "memset_zero", st);
            return;
        }
        if (gb_kit_download(kit, back, b, bytes)) {
            gb_kit_report_memory(kit, check);
            return;
        }
        for (size_t j = 0; j < bytes; j++)
            if (((unsigned char *)back)[j] != 0) {
                gb_kit_report(kit, check, GB_KIT_FAIL, "memset_zero of %zu bytes left byte "
                              "%zu nonzero", bytes, j);
                return;
            }
    }
    gb_kit_report(kit, check, GB_KIT_PASS, "1 B, 16 KiB, 1 MiB: 64-byte aligned, exact round "
                  "trips, zeroed");
}

/* C (m, n) = alpha op(A) op(B) + beta C (+ bias) in three layouts: plain with a bias, a
 * linear layer (B transposed) accumulating into C, and A transposed with padded rows. */
static void check_matmul(gb_kit *kit, const gb_kit_instance *ref, gb_rng *rng)
{
    family f = {.kit = kit, .ref = ref, .check = "matmul"};
    static const struct { int64_t m, n, k; int trans_a, trans_b, pad, bias; float alpha, beta; }
        variants[] = {{37, 29, 53, 0, 0, 0, 1, 1.0f, 0.0f},
                      {37, 29, 53, 0, 1, 0, 0, 1.0f, 1.0f},
                      {20, 33, 17, 1, 0, 3, 1, 0.5f, 0.0f}};
    for (int v = 0; v < 3 && !f.reported; v++) {
        const int64_t m = variants[v].m, n = variants[v].n, k = variants[v].k;
        const int ta = variants[v].trans_a, tb = variants[v].trans_b, pad = variants[v].pad;
        int64_t lda = (ta ? m : k) + pad, ldb = tb ? k : n, rows_a = ta ? k : m;
        pair a, b, c, bias;
        if (floats(kit, rng, &a, (size_t)(rows_a * lda), -1, 1) ||
            floats(kit, rng, &b, (size_t)((tb ? n : k) * ldb), -1, 1) ||
            floats(kit, rng, &c, (size_t)(m * n), -1, 1) ||
            floats(kit, rng, &bias, (size_t)n, -1, 1)) {
            gb_kit_report_memory(kit, f.check);
            return;
        }
        gb_matmul_args args = {
            .struct_size = sizeof args, .m = m, .n = n, .k = k,
            .lda = lda, .trans_a = ta, .dtype_a = GB_F32,
            .ldb = ldb, .trans_b = tb, .dtype_b = GB_F32,
            .ldc = n, .dtype_c = GB_F32, .alpha = variants[v].alpha, .beta = variants[v].beta,
        };
        gb_matmul_args on_host = args, on_device = args;
        on_host.a = a.host, on_host.b = b.host, on_host.c = c.host;
        on_host.bias = variants[v].bias ? bias.host : NULL;
        on_device.a = a.dev, on_device.b = b.dev, on_device.c = c.dev;
        on_device.bias = variants[v].bias ? bias.dev : NULL;
        gb_status want = ref_ops(&f)->matmul(ref->inst.self, &on_host);
        gb_status got = kit->dev->matmul(kit->device.inst.self, &on_device);
        if (calls_failed(&f, "matmul", want, got))
            return;
        char name[64];
        snprintf(name, sizeof name, "C of variant %d (trans_a %d, trans_b %d)", v + 1, ta, tb);
        compare(kit, &c, name, f.problems, sizeof f.problems);
    }
    finish(&f, "plain with bias; B transposed, beta 1; A transposed, padded rows:");
}

static void check_embed(gb_kit *kit, const gb_kit_instance *ref, gb_rng *rng)
{
    family f = {.kit = kit, .ref = ref, .check = "embed forward and backward"};
    const int64_t B = 2, T = 5, C = 24, V = 17, T_max = 8;
    pair tok, wte, wpe, out, dwte, dwpe;
    if (tokens(kit, rng, &tok, (size_t)(B * T), (int32_t)V) ||
        floats(kit, rng, &wte, (size_t)(V * C), -1, 1) ||
        floats(kit, rng, &wpe, (size_t)(T_max * C), -1, 1) ||
        floats(kit, rng, &out, (size_t)(B * T * C), 1, 0) ||
        floats(kit, rng, &dwte, (size_t)(V * C), -1, 1) ||
        floats(kit, rng, &dwpe, (size_t)(T_max * C), -1, 1)) {
        gb_kit_report_memory(kit, f.check);
        return;
    }
    gb_status want = ref_ops(&f)->embed_forward(ref->inst.self, GB_F32, out.host, tok.host,
                                                wte.host, wpe.host, B, T, C);
    gb_status got = kit->dev->embed_forward(kit->device.inst.self, GB_F32, out.dev, tok.dev,
                                            wte.dev, wpe.dev, B, T, C);
    if (calls_failed(&f, "embed_forward", want, got))
        return;
    compare(kit, &out, "out (B, T, C)", f.problems, sizeof f.problems);
    /* the reference's out serves as dout on both sides, so backward is judged alone */
    if (gb_kit_upload(kit, out.dev, out.host, out.bytes)) {
        gb_kit_report_memory(kit, f.check);
        return;
    }
    want = ref_ops(&f)->embed_backward(ref->inst.self, GB_F32, dwte.host, dwpe.host, out.host,
                                       tok.host, B, T, C);
    got = kit->dev->embed_backward(kit->device.inst.self, GB_F32, dwte.dev, dwpe.dev, out.dev,
                                   tok.dev, B, T, C);
    if (calls_failed(&f, "embed_backward", want, got))
        return;
    compare(kit, &dwte, "dwte +=", f.problems, sizeof f.problems);
    compare(kit, &dwpe, "dwpe +=", f.problems, sizeof f.problems);
    finish(&f, "out, dwte +=, dwpe +=");
}

static void check_layernorm(gb_kit *kit, const gb_kit_instance *ref, gb_rng *rng)
{
    family f = {.kit = kit, .ref = ref, .check = "layernorm forward and backward"};
    const int64_t N = 13, C = 48;
    pair x, w, b, out, mean, rstd, dout, dx, dw, db;
    if (floats(kit, rng, &x, (size_t)(N * C), -2, 2) ||
        floats(kit, rng, &w, (size_t)C, 0.5, 1.5) || floats(kit, rng, &b, (size_t)C, -1, 1) ||
        floats(kit, rng, &out, (size_t)(N * C), 1, 0) || floats(kit, rng, &mean, (size_t)N, 1, 0) ||
        floats(kit, rng, &rstd, (size_t)N, 1, 0) ||
        floats(kit, rng, &dout, (size_t)(N * C), -1, 1) ||
        floats(kit, rng, &dx, (size_t)(N * C), -1, 1) || floats(kit, rng, &dw, (size_t)C, -1, 1) ||
        floats(kit, rng, &db, (size_t)C, -1, 1)) {
        gb_kit_report_memory(kit, f.check);
        return;
    }
    gb_status want = ref_ops(&f)->layernorm_forward(ref->inst.self, GB_F32, out.host,
                                                    mean.host, rstd.host, x.host, w.host,
                                                    b.host, N, C, 1e-5f);
    gb_status got = kit->dev->layernorm_forward(kit->device.inst.self, GB_F32, out.dev,
                                                mean.dev, rstd.dev, x.dev, w.dev, b.dev, N, C,
                                                1e-5f);
    if (calls_failed(&f, "layernorm_forward", want, got))
        return;
    compare(kit, &out, "out (N, C)", f.problems, sizeof f.problems);
    compare(kit, &mean, "mean (N)", f.problems, sizeof f.problems);
    compare(kit, &rstd, "rstd (N)", f.problems, sizeof f.problems);
    /* backward reads the reference's statistics on both sides, so it is judged alone */
    if (gb_kit_upload(kit, mean.dev, mean.host, mean.bytes) ||
        gb_kit_upload(kit, rstd.dev, rstd.host, rstd.bytes)) {
        gb_kit_report_memory(kit, f.check);
        return;
    }
    want = ref_ops(&f)->layernorm_backward(ref->inst.self, GB_F32, dx.host, dw.host, db.host,
                                           dout.host, x.host, w.host, mean.host, rstd.host, N,
                                           C);
    got = kit->dev->layernorm_backward(kit->device.inst.self, GB_F32, dx.dev, dw.dev, db.dev,
                                       dout.dev, x.dev, w.dev, mean.dev, rstd.dev, N, C);
    if (calls_failed(&f, "layernorm_backward", want, got))
        return;
    compare(kit, &dx, "dx +=", f.problems, sizeof f.problems);
    compare(kit, &dw, "dweight +=", f.problems, sizeof f.problems);
    compare(kit, &db, "dbias +=", f.problems, sizeof f.problems);
    finish(&f, "out, mean, rstd, dx +=, dweight +=, dbias +=");
}

typedef gb_status (*gelu_fwd)(void *, gb_dtype, void *, const void *, int64_t);
typedef gb_status (*gelu_bwd)(void *, gb_dtype, void *, const void *, const void *, int64_t);

/* One GELU form: forward and backward of the reference (ref_*) and of the plugin. */
static void check_gelu_form(gb_kit *kit, const gb_kit_instance *ref, gb_rng *rng,
                            const char *check, gelu_fwd ref_fwd, gelu_bwd ref_bwd, gelu_fwd fwd,
                            gelu_bwd bwd)
{
    family f = {.kit = kit, .ref = ref, .check = check};
    const int64_t n = 1000;
    pair x, out, dout, dx;
    if (floats(kit, rng, &x, (size_t)n, -4, 4) || floats(kit, rng, &out, (size_t)n, 1, 0) ||
        floats(kit, rng, &dout, (size_t)n, -1, 1) || floats(kit, rng, &dx, (size_t)n, 1, 0)) {
        gb_kit_report_memory(kit, f.check);
        return;
    }
    gb_status want = ref_fwd(ref->inst.self, GB_F32, out.host, x.host, n);
    gb_status got = fwd(kit->device.inst.self, GB_F32, out.dev, x.dev, n);
    if (calls_failed(&f, "forward", want, got))
        return;
    compare(kit, &out, "out", f.problems, sizeof f.problems);
    want = ref_bwd(ref->inst.self, GB_F32, dx.host, x.host, dout.host, n);
    got = bwd(kit->device.inst.self, GB_F32, dx.dev, x.dev, dout.dev, n);
    if (calls_failed(&f, "backward", want, got))
        return;
    compare(kit, &dx, "dx", f.problems, sizeof f.problems);
    finish(&f, "out, dx");
}

static void check_gelu(gb_kit *kit, const gb_kit_instance *ref, gb_rng *rng)
{
    const gb_device_ops *r = ref->ops;
    check_gelu_form(kit, ref, rng, "gelu forward and backward", r->gelu_forward,
                    r->gelu_backward, kit->dev->gelu_forward, kit->dev->gelu_backward);
}

/* GELU's tanh form: optional (ABI 1.2, GB_CAP_GELU_TANH). */
static void check_gelu_tanh(gb_kit *kit, const gb_kit_instance *ref, gb_rng *rng)
{
    const gb_device_ops *r = ref->ops;
    const char *check = "gelu_tanh forward and backward";
    if (!GB_DEVICE_HAS(kit->dev, gelu_tanh_forward) ||
        !GB_DEVICE_HAS(kit->dev, gelu_tanh_backward)) {
        gb_kit_report(kit, check, GB_KIT_UNSUPPORTED, "not provided (optional: a model with "
                      "[model] gelu = tanh is refused on this device)");
        return;
    }
    check_gelu_form(kit, ref, rng, check, r->gelu_tanh_forward, r->gelu_tanh_backward,
                    kit->dev->gelu_tanh_forward, kit->dev->gelu_tanh_backward);
}

static void check_add_and_bias(gb_kit *kit, const gb_kit_instance *ref, gb_rng *rng)
{
    family f = {.kit = kit, .ref = ref, .check = "add, bias_backward"};
    const int64_t N = 13, C = 48;
    pair a, b, out, dbias;
    if (floats(kit, rng, &a, (size_t)(N * C), -1, 1) ||
        floats(kit, rng, &b, (size_t)(N * C), -1, 1) ||
        floats(kit, rng, &out, (size_t)(N * C), 1, 0) ||
        floats(kit, rng, &dbias, (size_t)C, -1, 1)) {
        gb_kit_report_memory(kit, f.check);
        return;
    }
    gb_status want = ref_ops(&f)->add(ref->inst.self, GB_F32, out.host, a.host, b.host, N * C);
    gb_status got = kit->dev->add(kit->device.inst.self, GB_F32, out.dev, a.dev, b.dev, N * C);
    if (calls_failed(&f, "add", want, got))
        return;
    compare(kit, &out, "out = a + b", f.problems, sizeof f.problems);
    want = ref_ops(&f)->bias_backward(ref->inst.self, GB_F32, dbias.host, a.host, N, C);
    got = kit->dev->bias_backward(kit->device.inst.self, GB_F32, dbias.dev, a.dev, N, C);
    if (calls_failed(&f, "bias_backward", want, got))
        return;
    compare(kit, &dbias, "dbias +=", f.problems, sizeof f.problems);
    finish(&f, "a + b, dbias +=");
}

static void check_cross_entropy(gb_kit *kit, const gb_kit_instance *ref, gb_rng *rng)
{
    family f = {.kit = kit, .ref = ref, .check = "cross_entropy with its gradient"};
    const int64_t N = 13, V = 37;
    pair logits, targets, losses, dlogits;
    if (floats(kit, rng, &logits, (size_t)(N * V), -3, 3) ||
        tokens(kit, rng, &targets, (size_t)N, (int32_t)V) ||
        floats(kit, rng, &losses, (size_t)N, 1, 0) ||
        floats(kit, rng, &dlogits, (size_t)(N * V), 1, 0)) {
        gb_kit_report_memory(kit, f.check);
        return;
    }
    float dloss = 1.0f / (float)N;
    gb_status want = ref_ops(&f)->cross_entropy(ref->inst.self, GB_F32, losses.host,
                                                dlogits.host, logits.host, targets.host, N, V,
                                                dloss);
    gb_status got = kit->dev->cross_entropy(kit->device.inst.self, GB_F32, losses.dev,
                                            dlogits.dev, logits.dev, targets.dev, N, V, dloss);
    if (calls_failed(&f, "cross_entropy", want, got))
        return;
    compare(kit, &losses, "losses (N)", f.problems, sizeof f.problems);
    compare(kit, &dlogits, "dlogits (N, V)", f.problems, sizeof f.problems);
    finish(&f, "losses, dlogits");
}

/* cross_entropy_ld (ABI 1.3, optional): rows 11 columns wider than the classes, the
 * gradient in place of the logits; the padding columns must keep the logits' values. */
static void check_cross_entropy_ld(gb_kit *kit, const gb_kit_instance *ref, gb_rng *rng)
{
    family f = {.kit = kit, .ref = ref, .check = "cross_entropy_ld (padded rows)"};
    const int64_t N = 13, V = 37, ld = 48;
    if (!GB_DEVICE_HAS(kit->dev, cross_entropy_ld)) {
        gb_kit_report(kit, f.check, GB_KIT_UNSUPPORTED, "not provided (optional: the core "
                      "keeps a padded vocabulary's logits contiguous on this device)");
        return;
    }
    pair logits, targets, losses;
    if (floats(kit, rng, &logits, (size_t)(N * ld), -3, 3) ||
        tokens(kit, rng, &targets, (size_t)N, (int32_t)V) ||
        floats(kit, rng, &losses, (size_t)N, 1, 0)) {
        gb_kit_report_memory(kit, f.check);
        return;
    }
    float dloss = 1.0f / (float)N;
    gb_status want = ref_ops(&f)->cross_entropy_ld(ref->inst.self, GB_F32, losses.host,
                                                   logits.host, logits.host, ld, targets.host,
                                                   N, V, dloss);
    gb_status got = kit->dev->cross_entropy_ld(kit->device.inst.self, GB_F32, losses.dev,
                                               logits.dev, logits.dev, ld, targets.dev, N, V,
                                               dloss);
    if (calls_failed(&f, "cross_entropy_ld", want, got))
        return;
    compare(kit, &losses, "losses (N)", f.problems, sizeof f.problems);
    compare(kit, &logits, "dlogits in place, padding kept (N, ld)", f.problems,
            sizeof f.problems);
    finish(&f, "losses, dlogits, padding untouched");
}

static void check_sum_squares(gb_kit *kit, const gb_kit_instance *ref, gb_rng *rng)
{
    family f = {.kit = kit, .ref = ref, .check = "sum_squares"};
    const int64_t n = 10007;
    pair x, out;
    if (floats(kit, rng, &x, (size_t)n, -2, 2) || floats(kit, rng, &out, 1, 1, 0)) {
        gb_kit_report_memory(kit, f.check);
        return;
    }
    gb_status want = ref_ops(&f)->sum_squares(ref->inst.self, out.host, x.host, n);
    gb_status got = kit->dev->sum_squares(kit->device.inst.self, out.dev, x.dev, n);
    if (calls_failed(&f, "sum_squares", want, got))
        return;
    compare(kit, &out, "sum", f.problems, sizeof f.problems);
    finish(&f, "sum of 10007 squares");
}

void gb_kit_check_device(gb_kit *kit)
{
    check_context(kit);
    check_describe(kit);
    check_info(kit);
    gb_rng rng = gb_rng_stream(19, 0, 0, 0);
    check_memory(kit, &rng);
    gb_kit_release(kit);
    gb_kit_instance ref;
    if (gb_kit_create_reference(kit, &ref, GB_KIND_DEVICE, "cpu", "kernels: reference "
                                "device/cpu", NULL, 0))
        return;
    void (*const checks[])(gb_kit *, const gb_kit_instance *, gb_rng *) = {
        check_matmul, check_gelu, check_gelu_tanh, check_layernorm, check_embed,
        check_add_and_bias, check_cross_entropy, check_cross_entropy_ld, check_sum_squares,
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        checks[i](kit, &ref, &rng);
        gb_kit_release(kit);
    }
    gb_kit_destroy(&ref);
}
