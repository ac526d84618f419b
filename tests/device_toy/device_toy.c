/* device/toy: a third device written against include/gearbox alone (ABI 1.6), the proof
 * that the device contract is open: it names a family of its own ("toy", no fixed device
 * bit), computes f32 only, in plain loops on host memory, and is synchronous, so it leaves
 * every stream and event entry NULL and the core supplies them. The CPU plugins of the
 * other kinds run on it because its buffers are host memory (GB_DEVICE_ANY_HOST).
 *
 * Built three times for tests/device_toy: as device-toy.so; with TOY_PARTIAL_STREAMS as
 * device-toy_partial.so, which fills two of the twelve stream entries and must be refused;
 * and against ABI 1.0's frozen headers (tests/abi/v1.0) as device-toy_abi10.so, a device
 * from before descriptions, streams and capabilities, which declares the CPU's fixed bit
 * and must still train (the core supplies what 1.0 lacked).
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/device.h"
#include "gearbox/plugin.h"

typedef struct toy {
    const gb_host *host;
} toy;

#define F32_ONLY(host, dtype, what)                                                       \
    do {                                                                                  \
        if ((dtype) != GB_F32) {                                                          \
            (host)->set_error((host), "toy: %s computes f32 only, not %s", (what),        \
                              gb_dtype_name(dtype));                                      \
            return GB_ERR_UNSUPPORTED;                                                    \
        }                                                                                 \
    } while (0)

static gb_status toy_create(const gb_host *host, const gb_value *options, void **self)
{
    (void)options;
    toy *t = host->alloc(host, sizeof *t);
    if (!t) {
        host->set_error(host, "toy: cannot allocate the instance");
        return GB_ERR_NO_MEMORY;
    }
    t->host = host;
    *self = t;
    return GB_OK;
}

static void toy_destroy(void *self)
{
    toy *t = self;
    if (t)
        t->host->free(t->host, t);
}

static const gb_device_ops toy_ops;

static gb_status toy_context(void *self, gb_device_ctx *out)
{
    out->device = 0; /* a family of its own: no fixed bit */
    out->ordinal = 0;
    out->stream = NULL;
#if GB_ABI_MINOR >= 2
    if (out->struct_size < offsetof(gb_device_ctx, caps) + sizeof out->caps)
        return GB_OK; /* a caller built before 1.2 */
    out->ops = &toy_ops;
    out->self = self;
    out->host_access = 1;
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
    strcpy(out->name, "toy device (plain f32 loops)");
    out->memory_bytes = 1ull << 30;
    out->peak_flops_f32 = out->peak_flops_bf16 = 0.0;
    return GB_OK;
}

#if GB_ABI_MINOR >= 6
static gb_status toy_describe(const gb_host *host, gb_device_desc *out)
{
    (void)host;
    strcpy(out->family, "toy");
    out->memory = GB_MEMORY_HOST;
    out->native_dtypes = GB_DTYPE_BIT(GB_F32);
    strcpy(out->preferred_precision, "fp32");
    strcpy(out->preferred_why, "the toy device computes f32 only");
    out->asynchronous = 0;
    return GB_OK;
}
#endif

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

static gb_status toy_copy(void *self, void *dst, const void *src, size_t bytes, gb_copy_kind kind)
{
    (void)self, (void)kind;
    memmove(dst, src, bytes);
    return GB_OK;
}

static gb_status toy_memset_zero(void *self, void *ptr, size_t bytes)
{
    (void)self;
    memset(ptr, 0, bytes);
    return GB_OK;
}

static gb_status toy_sync(void *self)
{
    (void)self;
    return GB_OK;
}

/* One product C = alpha op(A) op(B) + beta C + bias, f32, row-major. */
static void product(const gb_matmul_args *m, const float *a, const float *b, float *c)
{
    for (int64_t i = 0; i < m->m; i++) {
        for (int64_t j = 0; j < m->n; j++) {
            double sum = 0;
            for (int64_t p = 0; p < m->k; p++)
                sum += (double)(m->trans_a ? a[p * m->lda + i] : a[i * m->lda + p]) *
                       (m->trans_b ? b[j * m->ldb + p] : b[p * m->ldb + j]);
            float *out = &c[i * m->ldc + j];
            float value = m->alpha * (float)sum + (m->bias ? m->bias[j] : 0.0f);
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
    product(m, m->a, m->b, m->c); /* no batch or epilogue: its caps declare neither */
    return GB_OK;
}

static gb_status toy_embed_forward(void *self, gb_dtype dtype, void *out, const int32_t *tokens,
                                   const float *wte, const float *wpe, int64_t B, int64_t T,
                                   int64_t C)
{
    F32_ONLY(((toy *)self)->host, dtype, "embed_forward");
    float *o = out;
    for (int64_t bt = 0; bt < B * T; bt++)
        for (int64_t c = 0; c < C; c++)
            o[bt * C + c] = wte[(int64_t)tokens[bt] * C + c] + wpe[(bt % T) * C + c];
    return GB_OK;
}

static gb_status toy_embed_backward(void *self, gb_dtype dtype, float *dwte, float *dwpe,
                                    const void *dout, const int32_t *tokens, int64_t B,
                                    int64_t T, int64_t C)
{
    F32_ONLY(((toy *)self)->host, dtype, "embed_backward");
    const float *d = dout;
    for (int64_t bt = 0; bt < B * T; bt++) {
        for (int64_t c = 0; c < C; c++) {
            dwte[(int64_t)tokens[bt] * C + c] += d[bt * C + c];
            dwpe[(bt % T) * C + c] += d[bt * C + c];
        }
    }
    return GB_OK;
}

static gb_status toy_layernorm_forward(void *self, gb_dtype dtype, void *out, float *mean,
                                       float *rstd, const void *x, const float *weight,
                                       const float *bias, int64_t N, int64_t C, float eps)
{
    F32_ONLY(((toy *)self)->host, dtype, "layernorm_forward");
    for (int64_t n = 0; n < N; n++) {
        const float *row = (const float *)x + n * C;
        double m = 0, v = 0;
        for (int64_t c = 0; c < C; c++)
            m += row[c];
        m /= (double)C;
        for (int64_t c = 0; c < C; c++)
            v += (row[c] - m) * (row[c] - m);
        float s = (float)(1.0 / sqrt(v / (double)C + eps));
        for (int64_t c = 0; c < C; c++)
            ((float *)out)[n * C + c] =
                ((float)(row[c] - m) * s) * weight[c] + (bias ? bias[c] : 0.0f);
        mean[n] = (float)m;
        rstd[n] = s;
    }
    return GB_OK;
}

static gb_status toy_layernorm_backward(void *self, gb_dtype dtype, void *dx, float *dweight,
                                        float *dbias, const void *dout, const void *x,
                                        const float *weight, const float *mean,
                                        const float *rstd, int64_t N, int64_t C)
{
    F32_ONLY(((toy *)self)->host, dtype, "layernorm_backward");
    for (int64_t n = 0; n < N; n++) {
        const float *d = (const float *)dout + n * C, *row = (const float *)x + n * C;
        double mean_d = 0, mean_dn = 0;
        for (int64_t c = 0; c < C; c++) {
            float norm = (row[c] - mean[n]) * rstd[n];
            mean_d += d[c] * weight[c];
            mean_dn += d[c] * weight[c] * norm;
        }
        mean_d /= (double)C;
        mean_dn /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            float norm = (row[c] - mean[n]) * rstd[n];
            if (dbias)
                dbias[c] += d[c];
            dweight[c] += norm * d[c];
            ((float *)dx)[n * C + c] +=
                rstd[n] * (float)(d[c] * weight[c] - mean_d - norm * mean_dn);
        }
    }
    return GB_OK;
}

static gb_status toy_gelu_forward(void *self, gb_dtype dtype, void *out, const void *x, int64_t n)
{
    F32_ONLY(((toy *)self)->host, dtype, "gelu_forward");
    for (int64_t i = 0; i < n; i++) {
        float v = ((const float *)x)[i];
        ((float *)out)[i] = 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2));
    }
    return GB_OK;
}

static gb_status toy_gelu_backward(void *self, gb_dtype dtype, void *dx, const void *x,
                                   const void *dout, int64_t n)
{
    F32_ONLY(((toy *)self)->host, dtype, "gelu_backward");
    for (int64_t i = 0; i < n; i++) {
        float v = ((const float *)x)[i];
        float cdf = 0.5f * (1.0f + erff(v * (float)M_SQRT1_2));
        float pdf = expf(-0.5f * v * v) * 0.3989422804f;
        ((float *)dx)[i] = ((const float *)dout)[i] * (cdf + v * pdf);
    }
    return GB_OK;
}

static gb_status toy_add(void *self, gb_dtype dtype, void *out, const void *a, const void *b,
                         int64_t n)
{
    F32_ONLY(((toy *)self)->host, dtype, "add");
    for (int64_t i = 0; i < n; i++)
        ((float *)out)[i] = ((const float *)a)[i] + ((const float *)b)[i];
    return GB_OK;
}

static gb_status toy_bias_backward(void *self, gb_dtype dtype, float *dbias, const void *dout,
                                   int64_t N, int64_t C)
{
    F32_ONLY(((toy *)self)->host, dtype, "bias_backward");
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            dbias[c] += ((const float *)dout)[n * C + c];
    return GB_OK;
}

static gb_status toy_cross_entropy(void *self, gb_dtype dtype, float *losses, void *dlogits,
                                   const void *logits, const int32_t *targets, int64_t N,
                                   int64_t V, float dloss)
{
    F32_ONLY(((toy *)self)->host, dtype, "cross_entropy");
    for (int64_t n = 0; n < N; n++) {
        const float *row = (const float *)logits + n * V;
        float max = row[0];
        for (int64_t v = 1; v < V; v++)
            max = row[v] > max ? row[v] : max;
        double sum = 0;
        for (int64_t v = 0; v < V; v++)
            sum += exp((double)(row[v] - max));
        losses[n] = (float)(log(sum) - (double)(row[targets[n]] - max));
        if (!dlogits)
            continue;
        float *d = (float *)dlogits + n * V; /* may alias row: each value read before written */
        for (int64_t v = 0; v < V; v++)
            d[v] = ((float)(exp((double)(row[v] - max)) / sum) - (v == targets[n])) * dloss;
    }
    return GB_OK;
}

static gb_status toy_sum_squares(void *self, float *out, const float *x, int64_t n)
{
    (void)self;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)x[i] * x[i];
    *out = (float)sum;
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

#if GB_ABI_MINOR >= 6
GB_PLUGIN_DEFINE_CAPS(GB_KIND_DEVICE, TOY_NAME, "1.0.0",
                      "a test device of its own family: plain f32 loops on host memory, "
                      "synchronous, no stream or event entries",
                      0u, GB_DTYPE_BIT(GB_F32), GB_CAP_DETERMINISTIC, GB_NO_OPTIONS, toy_ops)
#else /* before 1.6 a device is known by its fixed bit: host memory is the CPU's */
GB_PLUGIN_DEFINE(GB_KIND_DEVICE, TOY_NAME, "1.0.0",
                 "the toy device built for ABI 1.0: plain f32 loops on host memory",
                 GB_DEVICE_CPU, GB_NO_OPTIONS, toy_ops)
#endif
