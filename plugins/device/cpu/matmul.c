/* matmul on the CPU device through oneDNN's matmul primitive (C API, oneDNN 2.6).
 *
 * Transposes and leading dimensions are expressed as memory-descriptor strides; alpha is
 * an output scale and beta a `sum` post-op. oneDNN scales its built-in bias together with
 * the product, so with alpha != 1 the bias is added by a binary post-op after the sum
 * instead. Creating a primitive costs far more than running a small one, so each
 * instance keeps the primitives it has built, keyed by everything that shapes them, in a
 * small table with least-recently-used replacement; a training step's few dozen distinct
 * matmuls are then served without creating anything. One operand may be copied: on
 * CPUs below AVX-512 oneDNN's gemm runs a transposed A (the weight gradients,
 * dW = dout^T in) well below its speed on a plain one when A has few rows (a fifth slower
 * at 512 x 128 x 768), so there such an A is first transposed, 8 x 8 blocks at a time,
 * into a plain one in scratch the cache keeps (grown at the first call that needs more).
 * With AVX-512 oneDNN's brgemm kernels take the transposed A as fast or faster (a plain
 * A of 384 x 2048 against B 2048 x 1536 ran at half the speed), so nothing is copied. oneDNN runs on the same OpenMP runtime as
 * the other kernels; no second thread pool is created.
 *
 * bf16 and f16: A and B share a dtype; C is that dtype or f32 (the weight gradients,
 * usually with beta = 1); the bias is f32. oneDNN is asked for a primitive of those
 * types first. oneDNN 2.6 implements bf16 matmul on CPUs with AVX-512 (AVX512_CORE;
 * natively with AVX512_BF16 or AMX) and f16 matmul only with AVX512_FP16, and answers
 * "unimplemented" elsewhere. On such a CPU (any AVX2-only one, for instance) the first
 * call of the dtype notes it and every call then takes the widened path: A and B are
 * widened into f32 scratch the cache keeps, the f32 primitive runs, and a 16-bit C is
 * computed in f32 scratch (widened first when beta != 0) and rounded to nearest even on
 * store, while an f32 C is written in place. Either way the products accumulate in f32.
 */
#include <stdio.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu_device.h"
#include "dtype_rows.h"
#include "matmul_args.h"
#include "plan_cache.h"

/* Below AVX-512, a transposed A with at most this many rows is copied into a plain one
 * first. Measured with oneDNN 2.6 on AVX2 for the weight gradients of configs S and M
 * (k = 768, 2048): 7-20% faster up to 512 rows, where oneDNN packs a transposed A slowly;
 * from 1152 rows on, the copy (megabytes, out of cache) costs as much as it saves or
 * more. With AVX-512 (brgemm) no size gains: see the file's comment. */
#define UNTRANSPOSE_MAX_M 512

/* Distinct matmuls of a GPT step: four linear layers forward and two products each
 * backward, plus the LM head, with a margin for evaluation shapes; twice that, since
 * `[run] threads = auto` runs a step's matmuls at two team sizes. */
#define MATMUL_CACHE_SLOTS 128

/* Everything a primitive is specialised for, the threads included: oneDNN splits the
 * work among the threads of the pool when it creates a primitive. All int64 so the
 * struct has no padding and can be compared with memcmp. */
typedef struct matmul_key {
    gb_matmul_shape shape;
    int64_t has_bias, alpha_bits, beta_bits, team;
} matmul_key;

typedef struct matmul_slot {
    gb_plan_head head;
    matmul_key key;
    dnnl_primitive_t primitive;
    dnnl_memory_t src, weights, bias, dst;   /* descriptors without data; set per call */
    int bias_arg;                            /* execution argument index of the bias */
} matmul_slot;
GB_PLAN_KEY_AFTER_HEAD(matmul_slot);

struct cpu_matmul_cache {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    gb_plan_cache plans;        /* over slots */
    matmul_slot slots[MATMUL_CACHE_SLOTS];
    float *plain_a;             /* A copied out of its transposed layout */
    size_t plain_a_floats;
    int no_native[GB_F16 + 1];  /* by dtype: oneDNN has no primitive of it on this CPU */
    int64_t untranspose_max_m;  /* a transposed f32 A of at most this many rows is copied */
    float *wide_a, *wide_b, *wide_c;   /* 16-bit operands widened to f32 */
    size_t wide_a_floats, wide_b_floats, wide_c_floats;
};

static gb_status dnnl_fail(cpu_device *dev, const char *what, dnnl_status_t status)
{
    return cpu_fail(dev, GB_ERR_DEVICE, "matmul: oneDNN %s failed: %s", what,
                    dnnl_status2str(status));
}

static void slot_release(void *plan);

gb_status cpu_matmul_open(cpu_device *dev)
{
    cpu_matmul_cache *cache = dev->host->alloc(dev->host, sizeof *cache);
    if (!cache)
        return cpu_fail(dev, GB_ERR_NO_MEMORY, "cannot allocate the matmul cache");
    memset(cache, 0, sizeof *cache);
    gb_plan_cache_init(&cache->plans, cache->slots, sizeof cache->slots[0], MATMUL_CACHE_SLOTS,
                       sizeof(matmul_key), slot_release);
    dnnl_status_t st = dnnl_engine_create(&cache->engine, dnnl_cpu, 0);
    if (st == dnnl_success) {
        st = dnnl_stream_create(&cache->stream, cache->engine, dnnl_stream_default_flags);
        if (st != dnnl_success)
            dnnl_engine_destroy(cache->engine);
    }
    if (st != dnnl_success) {
        dev->host->free(dev->host, cache);
        return cpu_fail(dev, GB_ERR_DEVICE, "cannot open oneDNN's cpu engine: %s",
                        dnnl_status2str(st));
    }
    const dnnl_version_t *v = dnnl_version();
    dev->host->log(dev->host, GB_LOG_DEBUG, "oneDNN %d.%d.%d (%.12s)", v->major, v->minor,
                   v->patch, v->hash);
    /* the ISAs are bit sets: avx2_vnni (0x407) is numerically above avx512_core (0x27) */
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    cache->untranspose_max_m =
        (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core ? 0 : UNTRANSPOSE_MAX_M;
    dev->matmul = cache;
    return GB_OK;
}

static void slot_release(void *plan)
{
    matmul_slot *slot = plan;
    if (!slot->head.last_use)
        return;
    dnnl_primitive_destroy(slot->primitive);
    dnnl_memory_destroy(slot->src);
    dnnl_memory_destroy(slot->weights);
    dnnl_memory_destroy(slot->bias);
    dnnl_memory_destroy(slot->dst);
    memset(slot, 0, sizeof *slot);
}

/* The widest instruction set oneDNN's kernels dispatch to on this CPU. */
static const char *onednn_isa(void)
{
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

void cpu_matmul_library(char *buf, size_t cap)
{
    const dnnl_version_t *v = dnnl_version();
    const char *runtime = v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP"
                          : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                          : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB" : "other";
    snprintf(buf, cap, "oneDNN %d.%d.%d (git %.8s, %s runtime, kernels for %s)", v->major,
             v->minor, v->patch, v->hash ? v->hash : "unknown", runtime, onednn_isa());
}

void cpu_matmul_close(cpu_device *dev)
{
    cpu_matmul_cache *cache = dev->matmul;
    if (!cache)
        return;
    gb_plan_cache_clear(&cache->plans);
    dev->host->free(dev->host, cache->plain_a);
    dev->host->free(dev->host, cache->wide_a);
    dev->host->free(dev->host, cache->wide_b);
    dev->host->free(dev->host, cache->wide_c);
    dnnl_stream_destroy(cache->stream);
    dnnl_engine_destroy(cache->engine);
    dev->host->free(dev->host, cache);
    dev->matmul = NULL;
}

static int64_t float_bits(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

static matmul_key key_of(const cpu_device *dev, const gb_matmul_args *a)
{
    matmul_key key;
    memset(&key, 0, sizeof key);
    key.shape = gb_matmul_shape_of(a);
    key.has_bias = a->bias != NULL;
    key.alpha_bits = float_bits(a->alpha);
    key.beta_bits = float_bits(a->beta);
    key.team = cpu_team(dev);
    return key;
}

static dnnl_data_type_t dnnl_type_of(int64_t dtype)
{
    return dtype == GB_BF16 ? dnnl_bf16 : dtype == GB_F16 ? dnnl_f16 : dnnl_f32;
}

/* A (rows, cols) matrix of `dtype` stored row-major with row stride ld, or its transpose
 * stored (cols, rows) with row stride ld when `transposed`. */
static void matrix_desc(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int64_t ld,
                        int64_t transposed, int64_t dtype)
{
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {ld, 1};
    if (transposed) {
        strides[0] = 1;
        strides[1] = ld;
    }
    dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_type_of(dtype), strides);
}

static dnnl_status_t create_memory(dnnl_memory_t *mem, const dnnl_memory_desc_t *md,
                                   dnnl_engine_t engine)
{
    return dnnl_memory_create(mem, md, engine, DNNL_MEMORY_NONE);
}

/* The bias rides on oneDNN's built-in bias only when alpha is 1: the built-in bias is
 * added before the output scale, and C = alpha A B + beta C + bias must not scale it. */
static int bias_is_post_op(const matmul_key *key)
{
    return key->has_bias && key->alpha_bits != float_bits(1.0f);
}

/* alpha as a common output scale, beta as a sum post-op and, when needed, the bias as a
 * binary-add post-op after it; each only when present, so the plain case keeps oneDNN's
 * fastest kernels. */
static dnnl_status_t build_attr(dnnl_primitive_attr_t *attr, const matmul_key *key,
                                float alpha, float beta, const dnnl_memory_desc_t *bias_md)
{
    dnnl_status_t st = dnnl_primitive_attr_create(attr);
    if (st != dnnl_success)
        return st;
    if (alpha != 1.0f)
        st = dnnl_primitive_attr_set_output_scales(*attr, 1, 0, &alpha);
    dnnl_post_ops_t ops = NULL;
    if (st == dnnl_success && (beta != 0.0f || bias_is_post_op(key)))
        st = dnnl_post_ops_create(&ops);
    if (st == dnnl_success && beta != 0.0f)
        st = dnnl_post_ops_append_sum(ops, beta);
    if (st == dnnl_success && bias_is_post_op(key))
        st = dnnl_post_ops_append_binary(ops, dnnl_binary_add, bias_md);
    if (st == dnnl_success && ops)
        st = dnnl_primitive_attr_set_post_ops(*attr, ops);
    if (ops)
        dnnl_post_ops_destroy(ops);
    if (st != dnnl_success)
        dnnl_primitive_attr_destroy(*attr);
    return st;
}

/* What slot_build needs beyond the slot's key. */
typedef struct matmul_build {
    cpu_device *dev;
    float alpha, beta;
} matmul_build;

/* The cache's build hook: the primitive and its four memory objects for the key of an
 * empty slot. GB_ERR_UNSUPPORTED, with no message, when oneDNN has no primitive for
 * 16-bit operands on this CPU. */
static gb_status slot_build(void *build, void *plan)
{
    cpu_device *dev = ((matmul_build *)build)->dev;
    const float alpha = ((matmul_build *)build)->alpha, beta = ((matmul_build *)build)->beta;
    matmul_slot *slot = plan;
    const matmul_key *key = &slot->key;
    dnnl_engine_t engine = dev->matmul->engine;
    dnnl_memory_desc_t src_md, weights_md, bias_md, dst_md;
    const gb_matmul_shape *s = &key->shape;
    matrix_desc(&src_md, s->m, s->k, s->lda, s->trans_a, s->dtype_ab);
    matrix_desc(&weights_md, s->k, s->n, s->ldb, s->trans_b, s->dtype_ab);
    matrix_desc(&bias_md, 1, s->n, s->n, 0, GB_F32);
    matrix_desc(&dst_md, s->m, s->n, s->ldc, 0, s->dtype_c);

    int builtin_bias = key->has_bias && !bias_is_post_op(key);
    dnnl_matmul_desc_t desc;
    dnnl_status_t st = dnnl_matmul_desc_init(&desc, &src_md, &weights_md,
                                             builtin_bias ? &bias_md : NULL, &dst_md);
    if (st != dnnl_success)
        return dnnl_fail(dev, "matmul_desc_init", st);

    dnnl_primitive_attr_t attr;
    st = build_attr(&attr, key, alpha, beta, &bias_md);
    if (st != dnnl_success)
        return dnnl_fail(dev, "attribute setup", st);
    dnnl_primitive_desc_t pd;
    st = dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (st == dnnl_unimplemented && s->dtype_ab != GB_F32)
        return GB_ERR_UNSUPPORTED;
    if (st != dnnl_success)
        return dnnl_fail(dev, "primitive_desc_create", st);
    st = dnnl_primitive_create(&slot->primitive, pd);
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success)
        return dnnl_fail(dev, "primitive_create", st);

    slot->head.last_use = 1;   // from here on slot_release() owns what exists
    if ((st = create_memory(&slot->src, &src_md, engine)) != dnnl_success ||
        (st = create_memory(&slot->weights, &weights_md, engine)) != dnnl_success ||
        (st = create_memory(&slot->bias, &bias_md, engine)) != dnnl_success ||
        (st = create_memory(&slot->dst, &dst_md, engine)) != dnnl_success) {
        return dnnl_fail(dev, "memory_create", st);
    }
    // The bias post-op is the last one: index 1 after a sum, else 0.
    slot->bias_arg = builtin_bias
        ? DNNL_ARG_BIAS : DNNL_ARG_ATTR_MULTIPLE_POST_OP(beta != 0.0f) | DNNL_ARG_SRC_1;
    return GB_OK;
}

/* The slot for `args`, built over the least recently used one if new. */
static gb_status slot_for(cpu_device *dev, const gb_matmul_args *args, matmul_slot **out)
{
    matmul_key key = key_of(dev, args);
    matmul_build build = {dev, args->alpha, args->beta};
    void *slot = NULL;
    gb_status status = gb_plan_cache_get(&dev->matmul->plans, &key, slot_build, &build, &slot);
    *out = slot;
    return status;
}

static gb_status check_args(cpu_device *dev, const gb_matmul_args *a)
{
    if (a->struct_size < sizeof(gb_matmul_args))
        return cpu_fail(dev, GB_ERR_INVALID_ARG,
                        "matmul: args.struct_size %zu is smaller than ABI 1.0's %zu",
                        a->struct_size, sizeof(gb_matmul_args));
    char why[320];
    gb_status status = gb_matmul_args_check(a, "cpu", why, sizeof why);
    return status == GB_OK ? GB_OK : cpu_fail(dev, status, "%s", why);
}

/* k == 0: the product is all zeros, so C = beta C (+ bias), C f32. oneDNN leaves C
 * untouched for some zero-size layouts, so this case never reaches it. */
static void matmul_without_k(const gb_matmul_args *a)
{
    float *c = a->c;   // (m, n), row stride ldc
    for (int64_t i = 0; i < a->m; i++)
        for (int64_t j = 0; j < a->n; j++) {
            float v = a->beta != 0.0f ? a->beta * c[i * a->ldc + j] : 0.0f;
            c[i * a->ldc + j] = a->bias ? v + a->bias[j] : v;
        }
}


/* Rows of the transposed copy each thread takes at a time. */
#define TRANSPOSE_ROWS 64

/* dst (rows, cols), row stride cols = src (cols, rows) transposed, row stride ld. */
static void transpose(cpu_device *dev, float *dst, const float *src, int64_t rows,
                      int64_t cols, int64_t ld)
{
    const int64_t strips = (rows + TRANSPOSE_ROWS - 1) / TRANSPOSE_ROWS;
    const int team = cpu_team(dev);
    #pragma omp parallel for schedule(dynamic, gb_omp_piece(strips, team)) num_threads(team) \
        if (rows * cols >= CPU_PARALLEL_MIN)
    for (int64_t strip = 0; strip < strips; strip++) {
        const int64_t r0 = strip * TRANSPOSE_ROWS;
        const int64_t n = rows - r0 < TRANSPOSE_ROWS ? rows - r0 : TRANSPOSE_ROWS;
        dev->kernels->transpose(dst + r0 * cols, cols, src + r0, ld, n, cols);
    }
}

/* At least `floats` of the cache's scratch *buf (of *cap floats), grown when needed so
 * that steady-state calls do not allocate; `what` says what for in the error. */
static gb_status cache_scratch(cpu_device *dev, float **buf, size_t *cap, size_t floats,
                               const char *what, const gb_matmul_args *args)
{
    if (floats <= *cap)
        return GB_OK;
    float *grown = dev->host->alloc(dev->host, floats * sizeof(float));
    if (!grown)
        return cpu_fail(dev, GB_ERR_NO_MEMORY, "matmul: cannot allocate %zu bytes to %s "
                        "(m=%lld, n=%lld, k=%lld)", floats * sizeof(float), what,
                        (long long)args->m, (long long)args->n, (long long)args->k);
    dev->host->free(dev->host, *buf);
    *buf = grown;
    *cap = floats;
    return GB_OK;
}

/* Replaces the transposed A of `args` by a plain copy in the cache's scratch. */
static gb_status untranspose_a(cpu_device *dev, gb_matmul_args *args)
{
    cpu_matmul_cache *cache = dev->matmul;
    gb_status status = cache_scratch(dev, &cache->plain_a, &cache->plain_a_floats,
                                     (size_t)args->m * (size_t)args->k,
                                     "lay out a transposed A", args);
    if (status != GB_OK)
        return status;
    transpose(dev, cache->plain_a, args->a, args->m, args->k, args->lda);
    args->a = cache->plain_a;
    args->lda = args->k;
    args->trans_a = 0;
    return GB_OK;
}

/* Runs `call` (k > 0) on a oneDNN primitive of its dtypes; a plain copy of a transposed
 * f32 A with few rows first. */
static gb_status execute(cpu_device *dev, const gb_matmul_args *call)
{
    gb_status status;
    gb_matmul_args plain = *call;
    if (plain.trans_a && plain.dtype_a == GB_F32 && plain.m <= dev->matmul->untranspose_max_m &&
        (status = untranspose_a(dev, &plain)) != GB_OK)
        return status;
    const gb_matmul_args *args = &plain;
    matmul_slot *slot;
    status = slot_for(dev, args, &slot);
    if (status != GB_OK)
        return status;

    dnnl_memory_set_data_handle(slot->src, (void *)args->a);
    dnnl_memory_set_data_handle(slot->weights, (void *)args->b);
    dnnl_memory_set_data_handle(slot->dst, args->c);
    dnnl_exec_arg_t exec_args[4] = {
        {DNNL_ARG_SRC, slot->src},
        {DNNL_ARG_WEIGHTS, slot->weights},
        {DNNL_ARG_DST, slot->dst},
        {slot->bias_arg, slot->bias},
    };
    int n_args = 3;
    if (args->bias) {
        dnnl_memory_set_data_handle(slot->bias, (void *)args->bias);
        n_args = 4;
    }
    dnnl_status_t st = dnnl_primitive_execute(slot->primitive, dev->matmul->stream, n_args,
                                              exec_args);
    if (st == dnnl_success)
        st = dnnl_stream_wait(dev->matmul->stream);
    if (st != dnnl_success)
        return dnnl_fail(dev, "execute", st);
    return GB_OK;
}

/* dst (rows, cols), row stride cols, = src (rows, cols) of `dtype` with row stride ld,
 * widened. */
static void widen_matrix(cpu_device *dev, float *dst, const void *src, gb_dtype dtype,
                         int64_t rows, int64_t cols, int64_t ld)
{
    const int team = cpu_team(dev);
    #pragma omp parallel for schedule(dynamic, gb_omp_piece(rows, team)) num_threads(team) \
        if (rows * cols >= CPU_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++)
        dtype_widen(dst + r * cols, dtype_at(src, dtype, r * ld), dtype, cols);
}

/* dst (rows, cols) of `dtype` with row stride ld = src (rows, cols), row stride cols,
 * rounded. */
static void narrow_matrix(cpu_device *dev, void *dst, gb_dtype dtype, int64_t ld,
                          const float *src, int64_t rows, int64_t cols)
{
    const int team = cpu_team(dev);
    #pragma omp parallel for schedule(dynamic, gb_omp_piece(rows, team)) num_threads(team) \
        if (rows * cols >= CPU_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++)
        dtype_narrow(dtype_at(dst, dtype, r * ld), src + r * cols, dtype, cols);
}

/* Replaces a 16-bit operand (stored rows x cols, row stride *ld) by its f32 widening in
 * the cache's scratch *buf. */
static gb_status widen_operand(cpu_device *dev, const gb_matmul_args *args, float **buf,
                               size_t *cap, const void **data, int64_t *ld, gb_dtype dtype,
                               int64_t rows, int64_t cols)
{
    gb_status status = cache_scratch(dev, buf, cap, (size_t)rows * (size_t)cols,
                                     "widen a 16-bit operand to f32", args);
    if (status != GB_OK)
        return status;
    widen_matrix(dev, *buf, *data, dtype, rows, cols, *ld);
    *data = *buf;
    *ld = cols;
    return GB_OK;
}

/* The widened path: `call` with f32 copies of its 16-bit operands through the f32
 * primitive (or the k == 0 loop), a 16-bit C rounded on store. */
static gb_status widened(cpu_device *dev, const gb_matmul_args *call)
{
    cpu_matmul_cache *cache = dev->matmul;
    const gb_dtype dtype = call->dtype_a, dtype_c = call->dtype_c;
    gb_matmul_args wide = *call;
    gb_status status = GB_OK;
    if (wide.k > 0)
        status = widen_operand(dev, call, &cache->wide_a, &cache->wide_a_floats, &wide.a,
                               &wide.lda, dtype, wide.trans_a ? wide.k : wide.m,
                               wide.trans_a ? wide.m : wide.k);
    if (status == GB_OK && wide.k > 0)
        status = widen_operand(dev, call, &cache->wide_b, &cache->wide_b_floats, &wide.b,
                               &wide.ldb, dtype, wide.trans_b ? wide.n : wide.k,
                               wide.trans_b ? wide.k : wide.n);
    if (status == GB_OK && dtype_c != GB_F32) {
        status = cache_scratch(dev, &cache->wide_c, &cache->wide_c_floats,
                               (size_t)wide.m * (size_t)wide.n, "compute a 16-bit C in f32",
                               call);
        if (status == GB_OK && wide.beta != 0.0f)
            widen_matrix(dev, cache->wide_c, call->c, dtype_c, wide.m, wide.n, call->ldc);
        wide.c = cache->wide_c;
        wide.ldc = wide.n;
    }
    if (status != GB_OK)
        return status;
    wide.dtype_a = wide.dtype_b = wide.dtype_c = GB_F32;
    if (wide.k == 0)
        matmul_without_k(&wide);
    else if ((status = execute(dev, &wide)) != GB_OK)
        return status;
    if (dtype_c != GB_F32)
        narrow_matrix(dev, call->c, dtype_c, call->ldc, cache->wide_c, wide.m, wide.n);
    return GB_OK;
}

gb_status cpu_matmul(void *self, const gb_matmul_args *call)
{
    cpu_device *dev = self;
    cpu_matmul_cache *cache = dev->matmul;
    gb_status status = check_args(dev, call);
    if (status != GB_OK || call->m == 0 || call->n == 0)
        return status;
    const gb_dtype dtype = call->dtype_a;
    if (dtype == GB_F32) {
        if (call->k == 0) {
            matmul_without_k(call);
            return GB_OK;
        }
        return execute(dev, call);
    }
    if (call->k > 0 && !cache->no_native[dtype]) {
        status = execute(dev, call);
        if (status != GB_ERR_UNSUPPORTED)
            return status;
        cache->no_native[dtype] = 1;
        dev->host->log(dev->host, GB_LOG_DEBUG, "matmul: oneDNN has no %s primitive on this "
                       "CPU; widening %s operands to f32", gb_dtype_name(dtype),
                       gb_dtype_name(dtype));
    }
    return widened(dev, call);
}
