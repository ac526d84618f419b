/* device/toy: a third device written against include/gearbox alone (ABI 1.6), the proof
 * that the device contract is open: it names a family of its own ("toy", no fixed device
 * bit), computes f32 only, in plain loops on host memory, and is synchronous, so it leaves
 * every stream and event entry NULL and the core supplies them. The CPU plugins of the
 * other kinds run on it because its buffers are host memory (GB_DEVICE_ANY_HOST).
 *
 * Built four times for tests/device_toy: as device-toy.so; with TOY_PARTIAL_STREAMS as
 * device-toy_partial.so, which fills two of the twelve stream entries and must be refused;
 * against ABI 1.0's frozen headers (tests/abi/v1.0) as device-toy_abi10.so, a device
 * from before descriptions, streams and capabilities, which declares the CPU's fixed bit
 * and must still train (the core supplies what 1.0 lacked); and out of tree with TOY_NPU
 * (tests/device_toy/npu) as device-toy_npu.so, the same loops on memory the host cannot
 * read (npu/toy_npu.h): family "toy_npu", whose attention and optimizer are plugins
 * written for it, and whose every kernel reaches its buffers through toy_npu_at().
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/device.h"
#include "gearbox/plugin.h"

#if defined(TOY_NPU)
#include <sys/mman.h>

#include "toy_npu.h"

/* Address space for the NPU's memory: reserved, not committed (each range). */
#define NPU_BYTES (4ull << 30)
#define NPU_BLOCKS 4096

/* One allocation: [offset, offset + bytes) of the NPU's memory. */
typedef struct npu_block {
    size_t offset, bytes;
    int used;
} npu_block;
#endif

typedef struct toy {
    const gb_host *host;
#if defined(TOY_NPU)
    toy_npu_runtime npu;     /* what gb_device_ctx.stream points at */
    npu_block blocks[NPU_BLOCKS];
    int n_blocks;
#endif
} toy;

/* Where a kernel finds the bytes of device address `p`: the address itself on host
 * memory, the NPU's store on the NPU. */
#if defined(TOY_NPU)
#define AT(t, p) toy_npu_at(&(t)->npu, (p))
#define TOY_FAMILY TOY_NPU_FAMILY
#define TOY_MEMORY GB_MEMORY_DEVICE
#define TOY_HOST_ACCESS 0
#define TOY_DEVICE_NAME "toy NPU (plain f32 loops on memory the host cannot read)"
#else
#define AT(t, p) ((void)(t), (void *)(p))
#define TOY_FAMILY "toy"
#define TOY_MEMORY GB_MEMORY_HOST
#define TOY_HOST_ACCESS 1
#define TOY_DEVICE_NAME "toy device (plain f32 loops)"
#endif

#define F32_ONLY(host, dtype, what)                                                       \
    do {                                                                                  \
        if ((dtype) != GB_F32) {                                                          \
            (host)->set_error((host), "toy: %s computes f32 only, not %s", (what),        \
                              gb_dtype_name(dtype));                                      \
            return GB_ERR_UNSUPPORTED;                                                    \
        }                                                                                 \
    } while (0)
/* The opening of every kernel: the device as `t`, and any dtype but f32 refused. */
#define TOY_F32_KERNEL(what)                                                              \
    toy *t = self;                                                                        \
    F32_ONLY(t->host, dtype, what)

#if defined(TOY_NPU)
/* The NPU's two ranges: addresses the host cannot touch, and the bytes behind them. */
static gb_status npu_map(toy *t)
{
    t->npu.magic = TOY_NPU_MAGIC;
    t->npu.size = NPU_BYTES;
    t->npu.fence = mmap(NULL, NPU_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
    t->npu.store = mmap(NULL, NPU_BYTES, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->npu.fence != MAP_FAILED && t->npu.store != MAP_FAILED)
        return GB_OK;
    t->host->set_error(t->host, "toy_npu: cannot reserve 2 x %llu bytes of address space",
                       (unsigned long long)NPU_BYTES);
    if (t->npu.fence != MAP_FAILED)
        munmap(t->npu.fence, NPU_BYTES);
    if (t->npu.store != MAP_FAILED)
        munmap(t->npu.store, NPU_BYTES);
    return GB_ERR_NO_MEMORY;
}
#endif

static gb_status toy_create(const gb_host *host, const gb_value *options, void **self)
{
    (void)options;
    toy *t = host->alloc(host, sizeof *t);
    if (!t) {
        host->set_error(host, "toy: cannot allocate the instance");
        return GB_ERR_NO_MEMORY;
    }
    *t = (toy){.host = host};
#if defined(TOY_NPU)
    if (npu_map(t) != GB_OK) {
        host->free(host, t);
        return GB_ERR_NO_MEMORY;
    }
#endif
    *self = t;
    return GB_OK;
}

static void toy_destroy(void *self)
{
    toy *t = self;
    if (!t)
        return;
#if defined(TOY_NPU)
    munmap(t->npu.fence, t->npu.size);
    munmap(t->npu.store, t->npu.size);
#endif
    t->host->free(t->host, t);
}

static const gb_device_ops toy_ops;

static gb_status toy_context(void *self, gb_device_ctx *out)
{
    out->device = 0; /* a family of its own: no fixed bit */
    out->ordinal = 0;
#if defined(TOY_NPU)
    out->stream = &((toy *)self)->npu;
#else
    out->stream = NULL;
#endif
#if GB_ABI_MINOR >= 2
    if (out->struct_size < offsetof(gb_device_ctx, caps) + sizeof out->caps)
        return GB_OK; /* a caller built before 1.2 */
    out->ops = &toy_ops;
    out->self = self;
    out->host_access = TOY_HOST_ACCESS;
    out->cc_major = out->cc_minor = 0;
    out->caps = GB_CAP_DETERMINISTIC;
#else
    (void)self;
#endif
    return GB_OK;
}

static gb_status toy_info(void *self, gb_device_info *out)
{
    (void)self;
    strcpy(out->name, TOY_DEVICE_NAME);
    out->memory_bytes = 1ull << 30;
    out->peak_flops_f32 = out->peak_flops_bf16 = 0.0;
    return GB_OK;
}

#if GB_ABI_MINOR >= 6
static gb_status toy_describe(const gb_host *host, gb_device_desc *out)
{
    (void)host;
    strcpy(out->family, TOY_FAMILY);
    out->memory = TOY_MEMORY;
    out->native_dtypes = GB_DTYPE_BIT(GB_F32);
    strcpy(out->preferred_precision, "fp32");
    strcpy(out->preferred_why, "the toy device computes f32 only");
    out->asynchronous = 0;
    return GB_OK;
}
#endif

#if defined(TOY_NPU)
/* First fit among the freed blocks, else a new block past the last one. */
static gb_status toy_alloc(void *self, size_t bytes, void **ptr)
{
    toy *t = self;
    size_t need = (bytes + 63) / 64 * 64;
    npu_block *b = NULL;
    for (int i = 0; i < t->n_blocks && !b; i++)
        if (!t->blocks[i].used && t->blocks[i].bytes >= need)
            b = &t->blocks[i];
    size_t end = t->n_blocks ? t->blocks[t->n_blocks - 1].offset +
                                   t->blocks[t->n_blocks - 1].bytes : 0;
    if (!b && (t->n_blocks == NPU_BLOCKS || end + need > t->npu.size)) {
        t->host->set_error(t->host, "toy_npu: out of memory for %zu bytes (%zu in use)",
                           bytes, end);
        return GB_ERR_NO_MEMORY;
    }
    if (!b) {
        b = &t->blocks[t->n_blocks++];
        *b = (npu_block){.offset = end, .bytes = need};
    }
    b->used = 1;
    *ptr = t->npu.fence + b->offset;
    return GB_OK;
}

/* Marks the block free; freed blocks at the end are given back. */
static void toy_free(void *self, void *ptr)
{
    toy *t = self;
    for (int i = 0; ptr && i < t->n_blocks; i++)
        if (t->npu.fence + t->blocks[i].offset == (char *)ptr)
            t->blocks[i].used = 0;
    while (t->n_blocks && !t->blocks[t->n_blocks - 1].used)
        t->n_blocks--;
}
#else
static gb_status toy_alloc(void *self, size_t bytes, void **ptr)
{
    toy *t = self;
    if (posix_memalign(ptr, 64, bytes ? bytes : 64) != 0) {
        t->host->set_error(t->host, "toy: out of memory for %zu bytes", bytes);
        return GB_ERR_NO_MEMORY;
    }
    return GB_OK;
}

static void toy_free(void *self, void *ptr)
{
    (void)self;
    free(ptr);
}
#endif

/* Device addresses go through AT(); host ones are used as they are. */
static gb_status toy_copy(void *self, void *dst, const void *src, size_t bytes, gb_copy_kind kind)
{
    toy *t = self;
    memmove(kind == GB_COPY_DEVICE_TO_HOST ? dst : AT(t, dst),
            kind == GB_COPY_HOST_TO_DEVICE ? src : AT(t, src), bytes);
    return GB_OK;
}

static gb_status toy_memset_zero(void *self, void *ptr, size_t bytes)
{
    memset(AT((toy *)self, ptr), 0, bytes);
    return GB_OK;
}

static gb_status toy_sync(void *self)
{
    (void)self;
    return GB_OK;
}

/* One product C = alpha op(A) op(B) + beta C + bias, f32, row-major. */
static void product(const gb_matmul_args *m, const float *a, const float *b, float *c,
                    const float *bias)
{
    for (int64_t i = 0; i < m->m; i++) {
        for (int64_t j = 0; j < m->n; j++) {
            double sum = 0;
            for (int64_t p = 0; p < m->k; p++)
                sum += (double)(m->trans_a ? a[p * m->lda + i] : a[i * m->lda + p]) *
                       (m->trans_b ? b[j * m->ldb + p] : b[p * m->ldb + j]);
            float *out = &c[i * m->ldc + j];
            float value = m->alpha * (float)sum + (bias ? bias[j] : 0.0f);
            *out = m->beta != 0.0f ? value + m->beta * *out : value;
        }
    }
}

static gb_status toy_matmul(void *self, const gb_matmul_args *m)
{
    toy *t = self;
    if (m->dtype_a != GB_F32 || m->dtype_b != GB_F32 || m->dtype_c != GB_F32) {
        t->host->set_error(t->host, "toy: matmul computes f32 only");
        return GB_ERR_UNSUPPORTED;
    }
    /* no batch or epilogue: its caps declare neither */
    product(m, AT(t, m->a), AT(t, m->b), AT(t, m->c), AT(t, m->bias));
    return GB_OK;
}

static gb_status toy_embed_forward(void *self, gb_dtype dtype, void *out, const int32_t *tokens,
                                   const float *wte, const float *wpe, int64_t B, int64_t T,
                                   int64_t C)
{
    TOY_F32_KERNEL("embed_forward");
    float *o = AT(t, out);
    const int32_t *tok = AT(t, tokens);
    const float *te = AT(t, wte), *pe = AT(t, wpe);
    for (int64_t bt = 0; bt < B * T; bt++)
        for (int64_t c = 0; c < C; c++)
            o[bt * C + c] = te[(int64_t)tok[bt] * C + c] + pe[(bt % T) * C + c];
    return GB_OK;
}

static gb_status toy_embed_backward(void *self, gb_dtype dtype, float *dwte, float *dwpe,
                                    const void *dout, const int32_t *tokens, int64_t B,
                                    int64_t T, int64_t C)
{
    TOY_F32_KERNEL("embed_backward");
    const float *d = AT(t, dout);
    const int32_t *tok = AT(t, tokens);
    float *dte = AT(t, dwte), *dpe = AT(t, dwpe);
    for (int64_t bt = 0; bt < B * T; bt++) {
        for (int64_t c = 0; c < C; c++) {
            dte[(int64_t)tok[bt] * C + c] += d[bt * C + c];
            dpe[(bt % T) * C + c] += d[bt * C + c];
        }
    }
    return GB_OK;
}

static gb_status toy_layernorm_forward(void *self, gb_dtype dtype, void *out, float *mean,
                                       float *rstd, const void *x, const float *weight,
                                       const float *bias, int64_t N, int64_t C, float eps)
{
    TOY_F32_KERNEL("layernorm_forward");
    const float *xs = AT(t, x), *w = AT(t, weight), *b = AT(t, bias);
    float *o = AT(t, out), *means = AT(t, mean), *rstds = AT(t, rstd);
    for (int64_t n = 0; n < N; n++) {
        const float *row = xs + n * C;
        double m = 0, v = 0;
        for (int64_t c = 0; c < C; c++)
            m += row[c];
        m /= (double)C;
        for (int64_t c = 0; c < C; c++)
            v += (row[c] - m) * (row[c] - m);
        float s = (float)(1.0 / sqrt(v / (double)C + eps));
        for (int64_t c = 0; c < C; c++)
            o[n * C + c] = ((float)(row[c] - m) * s) * w[c] + (b ? b[c] : 0.0f);
        means[n] = (float)m;
        rstds[n] = s;
    }
    return GB_OK;
}

static gb_status toy_layernorm_backward(void *self, gb_dtype dtype, void *dx, float *dweight,
                                        float *dbias, const void *dout, const void *x,
                                        const float *weight, const float *mean,
                                        const float *rstd, int64_t N, int64_t C)
{
    TOY_F32_KERNEL("layernorm_backward");
    const float *w = AT(t, weight), *means = AT(t, mean), *rstds = AT(t, rstd);
    float *dxs = AT(t, dx), *dw = AT(t, dweight), *db = AT(t, dbias);
    for (int64_t n = 0; n < N; n++) {
        const float *d = (const float *)AT(t, dout) + n * C;
        const float *row = (const float *)AT(t, x) + n * C;
        double mean_d = 0, mean_dn = 0;
        for (int64_t c = 0; c < C; c++) {
            float norm = (row[c] - means[n]) * rstds[n];
            mean_d += d[c] * w[c];
            mean_dn += d[c] * w[c] * norm;
        }
        mean_d /= (double)C;
        mean_dn /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            float norm = (row[c] - means[n]) * rstds[n];
            if (db)
                db[c] += d[c];
            dw[c] += norm * d[c];
            dxs[n * C + c] += rstds[n] * (float)(d[c] * w[c] - mean_d - norm * mean_dn);
        }
    }
    return GB_OK;
}

static gb_status toy_gelu_forward(void *self, gb_dtype dtype, void *out, const void *x, int64_t n)
{
    TOY_F32_KERNEL("gelu_forward");
    const float *xs = AT(t, x);
    float *o = AT(t, out);
    for (int64_t i = 0; i < n; i++)
        o[i] = 0.5f * xs[i] * (1.0f + erff(xs[i] * (float)M_SQRT1_2));
    return GB_OK;
}

static gb_status toy_gelu_backward(void *self, gb_dtype dtype, void *dx, const void *x,
                                   const void *dout, int64_t n)
{
    TOY_F32_KERNEL("gelu_backward");
    const float *xs = AT(t, x), *d = AT(t, dout);
    float *dxs = AT(t, dx);
    for (int64_t i = 0; i < n; i++) {
        float v = xs[i];
        float cdf = 0.5f * (1.0f + erff(v * (float)M_SQRT1_2));
        float pdf = expf(-0.5f * v * v) * 0.3989422804f;
        dxs[i] = d[i] * (cdf + v * pdf);
    }
    return GB_OK;
}

static gb_status toy_add(void *self, gb_dtype dtype, void *out, const void *a, const void *b,
                         int64_t n)
{
    TOY_F32_KERNEL("add");
    const float *as = AT(t, a), *bs = AT(t, b);
    float *o = AT(t, out);
    for (int64_t i = 0; i < n; i++)
        o[i] = as[i] + bs[i];
    return GB_OK;
}

static gb_status toy_bias_backward(void *self, gb_dtype dtype, float *dbias, const void *dout,
                                   int64_t N, int64_t C)
{
    TOY_F32_KERNEL("bias_backward");
    const float *d = AT(t, dout);
    float *db = AT(t, dbias);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            db[c] += d[n * C + c];
    return GB_OK;
}

static gb_status toy_cross_entropy(void *self, gb_dtype dtype, float *losses, void *dlogits,
                                   const void *logits, const int32_t *targets, int64_t N,
                                   int64_t V, float dloss)
{
    TOY_F32_KERNEL("cross_entropy");
    const int32_t *target = AT(t, targets);
    float *loss = AT(t, losses);
    for (int64_t n = 0; n < N; n++) {
        const float *row = (const float *)AT(t, logits) + n * V;
        float max = row[0];
        for (int64_t v = 1; v < V; v++)
            max = row[v] > max ? row[v] : max;
        double sum = 0;
        for (int64_t v = 0; v < V; v++)
            sum += exp((double)(row[v] - max));
        loss[n] = (float)(log(sum) - (double)(row[target[n]] - max));
        if (!dlogits)
            continue;
        float *d = (float *)AT(t, dlogits) + n * V; /* may alias row: read before written */
        for (int64_t v = 0; v < V; v++)
            d[v] = ((float)(exp((double)(row[v] - max)) / sum) - (v == target[n])) * dloss;
    }
    return GB_OK;
}

static gb_status toy_sum_squares(void *self, float *out, const float *x, int64_t n)
{
    toy *t = self;
    const float *xs = AT(t, x);
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)xs[i] * xs[i];
    *(float *)AT(t, out) = (float)sum;
    return GB_OK;
}

#if defined(TOY_PARTIAL_STREAMS)
/* Two of the twelve stream entries, which ABI 1.6 refuses: the group is all or none. */
static gb_status toy_alloc_host(void *self, size_t bytes, void **ptr)
{
    return toy_alloc(self, bytes, ptr);
}
#define TOY_NAME "toy_partial"
#define TOY_STREAMS .alloc_host = toy_alloc_host, .free_host = toy_free,
#elif defined(TOY_NPU)
/* Memory of its own needs the stream group (the core's stands in for host memory only);
 * the NPU is synchronous, so every entry has done its work when it returns. */
static gb_status npu_alloc_host(void *self, size_t bytes, void **ptr)
{
    toy *t = self;
    if (posix_memalign(ptr, 64, bytes ? bytes : 64) == 0)
        return GB_OK;
    t->host->set_error(t->host, "toy_npu: out of host memory for %zu bytes", bytes);
    return GB_ERR_NO_MEMORY;
}

static void npu_free_host(void *self, void *ptr)
{
    (void)self;
    free(ptr);
}

static gb_status npu_copy_async(void *self, void *dst, const void *src, size_t bytes,
                                gb_copy_kind kind, void *stream)
{
    (void)stream;
    return toy_copy(self, dst, src, bytes, kind);
}

static char npu_token; /* the one stream and event handle: nothing to tell apart */

static gb_status npu_token_create(void *self, void **handle)
{
    (void)self;
    *handle = &npu_token;
    return GB_OK;
}

static void npu_token_destroy(void *self, void *handle)
{
    (void)self, (void)handle;
}

/* event_record and stream_wait_event: the work before has run, so nothing to mark */
static gb_status npu_in_order(void *self, void *event_or_stream, void *other)
{
    (void)self, (void)event_or_stream, (void)other;
    return GB_OK;
}

static gb_status npu_event_done(void *self, void *event)
{
    (void)self, (void)event;
    return GB_OK;
}

static gb_status npu_enqueue_host(void *self, void *stream, gb_host_fn fn, const void *arg,
                                  size_t arg_bytes)
{
    (void)self, (void)stream, (void)arg_bytes;
    return fn((void *)arg);
}

#define TOY_NAME "toy_npu"
#define TOY_STREAMS                                                                       \
    .alloc_host = npu_alloc_host, .free_host = npu_free_host,                             \
    .copy_async = npu_copy_async, .stream_create = npu_token_create,                      \
    .stream_destroy = npu_token_destroy, .event_create = npu_token_create,                \
    .event_destroy = npu_token_destroy, .event_record = npu_in_order,                       \
    .stream_wait_event = npu_in_order,       .event_query = npu_event_done,                 \
    .event_sync = npu_event_done, .enqueue_host = npu_enqueue_host,
#elif GB_ABI_MINOR < 6
#define TOY_NAME "toy_abi10"
#define TOY_STREAMS
#else
#define TOY_NAME "toy"
#define TOY_STREAMS
#endif

static const gb_device_ops toy_ops = {
    .struct_size = sizeof(gb_device_ops),
    .create = toy_create,
    .destroy = toy_destroy,
    .context = toy_context,
    .info = toy_info,
    .alloc = toy_alloc,
    .free = toy_free,
    .copy = toy_copy,
    .memset_zero = toy_memset_zero,
    .sync = toy_sync,
    .matmul = toy_matmul,
    .embed_forward = toy_embed_forward,
    .embed_backward = toy_embed_backward,
    .layernorm_forward = toy_layernorm_forward,
    .layernorm_backward = toy_layernorm_backward,
    .gelu_forward = toy_gelu_forward,
    .gelu_backward = toy_gelu_backward,
    .add = toy_add,
    .bias_backward = toy_bias_backward,
    .cross_entropy = toy_cross_entropy,
    .sum_squares = toy_sum_squares,
    TOY_STREAMS
#if GB_ABI_MINOR >= 6
    .describe = toy_describe,
#endif
};

#if defined(TOY_NPU)
#define TOY_DESCRIPTION "a test device of its own family: plain f32 loops on memory the " \
                        "host cannot read, synchronous"
#else
#define TOY_DESCRIPTION "a test device of its own family: plain f32 loops on host memory, " \
                        "synchronous, no stream or event entries"
#endif
#if GB_ABI_MINOR >= 6
GB_PLUGIN_DEFINE_CAPS(GB_KIND_DEVICE, TOY_NAME, "1.0.0",
                      TOY_DESCRIPTION,
                      0u, GB_DTYPE_BIT(GB_F32), GB_CAP_DETERMINISTIC, GB_NO_OPTIONS, toy_ops)
#else /* before 1.6 a device is known by its fixed bit: host memory is the CPU's */
GB_PLUGIN_DEFINE(GB_KIND_DEVICE, TOY_NAME, "1.0.0",
                 "the toy device built for ABI 1.0: plain f32 loops on host memory",
                 GB_DEVICE_CPU, GB_NO_OPTIONS, toy_ops)
#endif
