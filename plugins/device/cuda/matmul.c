/* matmul on the CUDA device through cuBLASLt: f32 (or TF32 when allow_tf32), bf16 and
 * f16 with f32 accumulation, batched with strides, with device.h's epilogues.
 *
 * gearbox is row-major and cuBLASLt column-major: lt_layout.h says how a call is swapped
 * (gearbox's B becomes cuBLASLt's A, m and n exchange, C's memory is unchanged). Each
 * distinct call shape gets a plan: the operation descriptor, the three matrix layouts and
 * the algorithm cuBLASLt's heuristic picked, kept in a small table with least-recently-used
 * replacement and keyed by everything that shapes them, pointer alignments included (the
 * heuristic's choice depends on them). A training step's few dozen shapes are then served
 * without asking the heuristic again, and the same shape always runs the same algorithm,
 * which with one workspace on one stream gives the same bits run after run (on the same GPU
 * model and cuBLASLt version).
 *
 * Epilogues, as device.h defines them:
 * - bias: cuBLASLt's BIAS epilogue (added after alpha, as device.h says). The bias must
 *   have D's type there: for a 16-bit C the caller's bias_lowp (ABI 1.5, the weights'
 *   low-precision copy) when it is 16-byte aligned, else the bias rounded to that type in
 *   scratch by a kernel (as PyTorch's autocast rounds a linear layer's bias).
 * - GELU_TANH, DGELU_TANH: cuBLASLt's GELU_AUX[_BIAS] and DGELU epilogues, whose GELU is
 *   the tanh form, when cuBLASLt has an algorithm for them (its aux leading dimension must
 *   be a multiple of 8); otherwise, like the exact forms always, the product (with its
 *   bias) is written where the pre-activation belongs and an element-wise kernel applies
 *   GELU or multiplies by its derivative (epilogue.cu). Either way the choice is made once
 *   per shape.
 * - BIAS_GRAD: cuBLASLt's BGRADB epilogue (gearbox's A is cuBLASLt's B) writes the sums
 *   of op(A) into scratch, since it overwrites instead of accumulating, and a kernel adds
 *   them to bias_grad: one pass over A instead of two. For a single product with an f32 C
 *   (the sums have D's type) where cuBLASLt has an algorithm for it; otherwise the product
 *   as usual and the deterministic column sums of reduce.cu. Either way one choice per
 *   shape, so the same bits run after run; cuBLASLt does not state its summation order,
 *   so the two ways differ in rounding.
 * A fused epilogue (GELU_TANH, DGELU_TANH, BIAS_GRAD) that falls back to its separate
 * kernel is logged as a warning once per shape, naming the shape and why.
 * GELU and DGELU forms take beta = 0; DGELU forms take no bias. k == 0 never reaches
 * cuBLASLt (epilogue.cu fills C). Left out: FP8, split-K tuning beyond the heuristic's
 * first answer, and algorithm search by timing.
 */
#include <stdint.h>
#include <string.h>

#include "cuda_device.h"
#include "cuda_status.h"
#include "lt_layout.h"
#include "matmul_args.h"
#include "plan_cache.h"

/* Distinct matmuls of a GPT step (four linear layers forward, two products each backward,
 * the LM head, attention's batched products) with a margin for evaluation shapes and the
 * alignments of different layers' weights. */
#define PLAN_SLOTS 96

/* Everything a plan is specialised for; all int64 so it compares with memcmp. */
typedef struct plan_key {
    gb_matmul_shape shape;
    int64_t batch, stride_a, stride_b, stride_c;
    int64_t lt_epilogue, tf32, has_aux;
    int64_t align_a, align_b, align_d, align_bias, align_aux;
} plan_key;

typedef struct plan_slot {
    gb_plan_head head;
    plan_key key;
    int usable;                 /* 0: cuBLASLt has no algorithm for it */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;   /* cuBLASLt's A, B, and C = D */
    cublasLtMatmulAlgo_t algo;
} plan_slot;
GB_PLAN_KEY_AFTER_HEAD(plan_slot);

/* Fused epilogues that fell back to a separate kernel, by shape: each is logged once. */
#define FALLBACK_SLOTS 32

typedef struct fallback_key {
    int64_t m, n, k, epilogue;
} fallback_key;

struct cuda_matmul_cache {
    gb_plan_cache plans;   /* over slots */
    plan_slot slots[PLAN_SLOTS];
    fallback_key logged[FALLBACK_SLOTS];
    int n_logged;
};

static void slot_release(void *plan);

gb_status cuda_matmul_open(cuda_device *dev)
{
    dev->matmul = dev->host->alloc(dev->host, sizeof *dev->matmul);
    if (!dev->matmul) {
        dev->host->set_error(dev->host, "cannot allocate the matmul plan cache");
        return GB_ERR_NO_MEMORY;
    }
    memset(dev->matmul, 0, sizeof *dev->matmul);
    gb_plan_cache_init(&dev->matmul->plans, dev->matmul->slots, sizeof dev->matmul->slots[0],
                       PLAN_SLOTS, sizeof(plan_key), slot_release);
    return GB_OK;
}

static void slot_release(void *plan)
{
    plan_slot *slot = plan;
    if (slot->desc)
        cublasLtMatmulDescDestroy(slot->desc);
    if (slot->la)
        cublasLtMatrixLayoutDestroy(slot->la);
    if (slot->lb)
        cublasLtMatrixLayoutDestroy(slot->lb);
    if (slot->ld)
        cublasLtMatrixLayoutDestroy(slot->ld);
    memset(slot, 0, sizeof *slot);
}

void cuda_matmul_close(cuda_device *dev)
{
    if (!dev->matmul)
        return;
    gb_plan_cache_clear(&dev->matmul->plans);
    dev->host->free(dev->host, dev->matmul);
    dev->matmul = NULL;
}

/* ---- one cuBLASLt call ---------------------------------------------------------------- */

/* What cuBLASLt is asked to do, after the epilogue has been split between it and the
 * kernels of epilogue.cu. */
typedef struct lt_call {
    const gb_matmul_args *args;
    int64_t batch, stride_a, stride_b, stride_c;
    int tf32;
    cublasLtEpilogue_t epilogue;
    void *d;                    /* where D goes: C, or the pre-activation's buffer */
    float beta;
    const void *bias;           /* of D's type, or NULL */
    void *aux;                  /* GELU_AUX's output or DGELU's input, or NULL */
} lt_call;

static cudaDataType_t cuda_type_of(gb_dtype dtype)
{
    return dtype == GB_BF16 ? CUDA_R_16BF : dtype == GB_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* The largest power of two (at most 256) that divides the address: cuBLASLt assumes 256
 * unless told, and picks kernels with wider loads for better-aligned operands. */
static int64_t alignment_of(const void *ptr, int64_t stride_bytes)
{
    uintptr_t bits = (uintptr_t)ptr | (uintptr_t)stride_bytes | 256u;
    return (int64_t)(bits & (~bits + 1));
}

static plan_key key_of(const lt_call *c)
{
    const gb_matmul_args *a = c->args;
    const int64_t ab = (int64_t)gb_dtype_size(a->dtype_a), cs = (int64_t)gb_dtype_size(a->dtype_c);
    const int batched = c->batch > 1;
    plan_key key;
    memset(&key, 0, sizeof key);
    key.shape = gb_matmul_shape_of(a);
    key.batch = c->batch;
    key.stride_a = batched ? c->stride_a : 0;
    key.stride_b = batched ? c->stride_b : 0;
    key.stride_c = batched ? c->stride_c : 0;
    key.lt_epilogue = c->epilogue;
    key.tf32 = c->tf32;
    key.has_aux = c->aux != NULL;
    key.align_a = alignment_of(a->a, key.stride_a * ab);
    key.align_b = alignment_of(a->b, key.stride_b * ab);
    key.align_d = alignment_of(c->d, key.stride_c * cs);
    key.align_bias = c->bias ? alignment_of(c->bias, 0) : 0;
    key.align_aux = c->aux ? alignment_of(c->aux, key.stride_c * cs) : 0;
    return key;
}

static gb_status layout(cuda_device *dev, cublasLtMatrixLayout_t *out, gb_dtype dtype,
                        const lt_matrix *mat, int64_t batch)
{
    const gb_host *host = dev->host;
    GB_CUDA_LIB_CHECK(cublasStatus_t, cublasLtMatrixLayoutCreate(out, cuda_type_of(dtype),
                      mat->rows, mat->cols, mat->ld), cublasLtGetStatusString);
    if (batch > 1) {
        int32_t count = (int32_t)batch;
        int64_t stride = mat->batch_stride;
        GB_CUDA_LIB_CHECK(cublasStatus_t, cublasLtMatrixLayoutSetAttribute(*out,
                          CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                          cublasLtGetStatusString);
        GB_CUDA_LIB_CHECK(cublasStatus_t, cublasLtMatrixLayoutSetAttribute(*out,
                          CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
                          cublasLtGetStatusString);
    }
    return GB_OK;
}

static gb_status desc_set(cuda_device *dev, cublasLtMatmulDesc_t desc,
                          cublasLtMatmulDescAttributes_t attr, const void *value, size_t size)
{
    const gb_host *host = dev->host;
    GB_CUDA_LIB_CHECK(cublasStatus_t, cublasLtMatmulDescSetAttribute(desc, attr, value, size),
                      cublasLtGetStatusString);
    return GB_OK;
}

/* The pointers of this call on the plan's descriptor (the heuristic read their alignment;
 * the call reads them). */
static gb_status set_pointers(cuda_device *dev, plan_slot *slot, const lt_call *c)
{
    gb_status st = GB_OK;
    if (c->bias)
        st = desc_set(dev, slot->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c->bias,
                      sizeof c->bias);
    if (st == GB_OK && c->aux)
        st = desc_set(dev, slot->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &c->aux,
                      sizeof c->aux);
    return st;
}

/* What slot_build needs beyond the slot's key. */
typedef struct lt_build {
    cuda_device *dev;
    const lt_call *c;
} lt_build;

/* The cache's build hook: the descriptor and layouts of the call into an empty slot, and
 * the heuristic's algorithm; slot->usable stays 0 when there is none. */
static gb_status slot_build(void *build, void *plan)
{
    cuda_device *dev = ((lt_build *)build)->dev;
    const lt_call *c = ((lt_build *)build)->c;
    plan_slot *slot = plan;
    const plan_key *key = &slot->key;
    const gb_host *host = dev->host;
    const gb_matmul_args *a = c->args;
    lt_problem p;
    lt_problem_of(a, c->batch, key->stride_a, key->stride_b, key->stride_c, &p);
    slot->head.last_use = 1;   /* from here on slot_release() owns what exists */
    cublasComputeType_t compute = c->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    GB_CUDA_LIB_CHECK(cublasStatus_t, cublasLtMatmulDescCreate(&slot->desc, compute, CUDA_R_32F),
                      cublasLtGetStatusString);
    cublasOperation_t ta = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epilogue = c->epilogue;
    gb_status st = desc_set(dev, slot->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (st == GB_OK)
        st = desc_set(dev, slot->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (st == GB_OK)
        st = desc_set(dev, slot->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    if (st == GB_OK && c->bias) {
        int32_t bias_type = cuda_type_of(a->dtype_c);
        st = desc_set(dev, slot->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                      sizeof bias_type);
    }
    if (st == GB_OK && c->aux) {
        int64_t aux_ld = a->ldc, aux_stride = key->stride_c;
        st = desc_set(dev, slot->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                      sizeof aux_ld);
        if (st == GB_OK && c->batch > 1)
            st = desc_set(dev, slot->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE,
                          &aux_stride, sizeof aux_stride);
    }
    if (st == GB_OK)
        st = set_pointers(dev, slot, c);
    if (st == GB_OK)
        st = layout(dev, &slot->la, a->dtype_b, &p.a, p.batch);
    if (st == GB_OK)
        st = layout(dev, &slot->lb, a->dtype_a, &p.b, p.batch);
    if (st == GB_OK)
        st = layout(dev, &slot->ld, a->dtype_c, &p.d, p.batch);
    if (st != GB_OK)
        return st;

    cublasLtMatmulPreference_t pref = NULL;
    GB_CUDA_LIB_CHECK(cublasStatus_t, cublasLtMatmulPreferenceCreate(&pref),
                      cublasLtGetStatusString);
    uint64_t workspace = CUDA_LT_WORKSPACE;
    const struct { cublasLtMatmulPreferenceAttributes_t attr; int64_t align; } aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key->align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key->align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key->align_d},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key->align_d},
    };
    cublasStatus_t ls = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0] && ls == CUBLAS_STATUS_SUCCESS; i++) {
        uint32_t bytes = (uint32_t)aligns[i].align;
        ls = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i].attr, &bytes, sizeof bytes);
    }
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    if (ls == CUBLAS_STATUS_SUCCESS)
        ls = cublasLtMatmulAlgoGetHeuristic(dev->lt, slot->desc, slot->la, slot->lb, slot->ld,
                                            slot->ld, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (ls == CUBLAS_STATUS_NOT_SUPPORTED || (ls == CUBLAS_STATUS_SUCCESS && found == 0))
        return GB_OK;   /* no algorithm: usable stays 0 */
    GB_CUDA_LIB_CHECK(cublasStatus_t, ls, cublasLtGetStatusString);
    slot->algo = result.algo;
    slot->usable = 1;
    return GB_OK;
}

/* The plan of `c`, built over the least recently used slot when new. */
static gb_status plan_for(cuda_device *dev, const lt_call *c, plan_slot **out)
{
    plan_key key = key_of(c);
    lt_build build = {dev, c};
    void *slot = NULL;
    gb_status st = gb_plan_cache_get(&dev->matmul->plans, &key, slot_build, &build, &slot);
    *out = slot;
    return st;
}

/* Runs `c` on cuBLASLt. GB_ERR_UNSUPPORTED without a message when cuBLASLt has no
 * algorithm for it, so the caller may fall back to a plainer epilogue. */
static gb_status run_lt(cuda_device *dev, const lt_call *c)
{
    const gb_host *host = dev->host;
    const gb_matmul_args *a = c->args;
    plan_slot *slot;
    gb_status st = plan_for(dev, c, &slot);
    if (st != GB_OK)
        return st;
    if (!slot->usable)
        return GB_ERR_UNSUPPORTED;
    if ((st = set_pointers(dev, slot, c)) != GB_OK)
        return st;
    GB_CUDA_LIB_CHECK(cublasStatus_t, cublasLtMatmul(dev->lt, slot->desc, &a->alpha, a->b,
                      slot->la, a->a, slot->lb, &c->beta, c->d, slot->ld, c->d, slot->ld,
                      &slot->algo, dev->workspace, CUDA_LT_WORKSPACE, dev->compute),
                      cublasLtGetStatusString);
    return GB_OK;
}

/* ---- the vtable entry ----------------------------------------------------------------- */

#define HAS(args, field) \
    ((args)->struct_size >= offsetof(gb_matmul_args, field) + sizeof((args)->field))

/* ABI 1.2's fields of a call, zero where the caller's struct predates them. */
typedef struct matmul_extras {
    int64_t batch, stride_a, stride_b, stride_c;
    gb_matmul_epilogue epilogue;
    void *aux;
    float *bias_grad;
    int tf32;
    const void *bias_lowp;      /* ABI 1.5 */
} matmul_extras;

static void read_extras(const gb_matmul_args *a, matmul_extras *x)
{
    memset(x, 0, sizeof *x);
    if (HAS(a, stride_c)) {
        x->batch = a->batch;
        x->stride_a = a->stride_a;
        x->stride_b = a->stride_b;
        x->stride_c = a->stride_c;
    }
    x->batch = x->batch > 1 ? x->batch : 1;
    if (HAS(a, bias_grad)) {
        x->epilogue = a->epilogue;
        x->aux = a->aux;
        x->bias_grad = a->bias_grad;
    }
    x->tf32 = HAS(a, allow_tf32) && a->allow_tf32 && a->dtype_a == GB_F32;
    if (HAS(a, bias_lowp))
        x->bias_lowp = a->bias_lowp;
}

static gb_status refuse(cuda_device *dev, gb_status st, const char *what,
                        const gb_matmul_args *a)
{
    dev->host->set_error(dev->host, "matmul (m=%lld, n=%lld, k=%lld) on the cuda device: %s",
                         (long long)a->m, (long long)a->n, (long long)a->k, what);
    return st;
}

static gb_status check_args(cuda_device *dev, const gb_matmul_args *a, const matmul_extras *x)
{
    const gb_host *host = dev->host;
    if (a->struct_size < offsetof(gb_matmul_args, batch)) {
        host->set_error(host, "matmul: args.struct_size %zu is smaller than ABI 1.0's %zu",
                        a->struct_size, offsetof(gb_matmul_args, batch));
        return GB_ERR_INVALID_ARG;
    }
    char why[320];
    gb_status st = gb_matmul_args_check(a, "cuda", why, sizeof why);
    if (st != GB_OK) {
        host->set_error(host, "%s", why);
        return st;
    }
    if (x->batch > INT32_MAX)
        return refuse(dev, GB_ERR_UNSUPPORTED, "more than 2^31 - 1 products in a batch", a);
    if ((unsigned)x->epilogue > GB_EPILOGUE_BIAS_GRAD)
        return refuse(dev, GB_ERR_UNSUPPORTED, "unknown epilogue", a);
    int gelu = x->epilogue == GB_EPILOGUE_GELU || x->epilogue == GB_EPILOGUE_GELU_TANH;
    int dgelu = x->epilogue == GB_EPILOGUE_DGELU || x->epilogue == GB_EPILOGUE_DGELU_TANH;
    if ((gelu || dgelu) && a->beta != 0.0f)
        return refuse(dev, GB_ERR_UNSUPPORTED, "the GELU epilogues take beta = 0", a);
    if (dgelu && (!x->aux || a->bias))
        return refuse(dev, GB_ERR_INVALID_ARG, "a DGELU epilogue needs aux (the forward "
                      "pre-activation) and takes no bias", a);
    if (x->epilogue == GB_EPILOGUE_BIAS_GRAD && !x->bias_grad)
        return refuse(dev, GB_ERR_INVALID_ARG, "GB_EPILOGUE_BIAS_GRAD needs bias_grad", a);
    return GB_OK;
}

/* The bias as cuBLASLt needs it: D's type, so for a 16-bit C the caller's copy in that
 * type when it gave one aligned as cuBLASLt's bias epilogue wants (16 bytes), else a copy
 * rounded into scratch by a kernel. */
static gb_status bias_for_lt(cuda_device *dev, const gb_matmul_args *a, const matmul_extras *x,
                             const void **out)
{
    *out = a->bias;
    if (!a->bias || a->dtype_c == GB_F32)
        return GB_OK;
    if (x->bias_lowp && (uintptr_t)x->bias_lowp % 16 == 0) {
        *out = x->bias_lowp;
        return GB_OK;
    }
    if ((size_t)a->n * 2 > dev->scratch_bytes)
        return refuse(dev, GB_ERR_UNSUPPORTED, "a 16-bit C with a bias longer than the "
                      "scratch holds", a);
    *out = dev->scratch;
    return cuda_cast_from_f32(dev, dev->scratch, a->dtype_c, a->bias, a->n);
}

/* run_lt() for a call that has no plainer form to fall back to. */
static gb_status run_lt_required(cuda_device *dev, const lt_call *c)
{
    gb_status st = run_lt(dev, c);
    if (st == GB_ERR_UNSUPPORTED)
        return refuse(dev, st, "cuBLASLt has no algorithm for this shape and these dtypes",
                      c->args);
    return st;
}

/* A warning, the first time a shape falls back, that its fused epilogue runs as a kernel
 * of its own after the product (another pass over D, or over A for the bias gradient):
 * the cost shows in the step's time, and the warning says which product pays it. */
static void log_fallback(cuda_device *dev, const gb_matmul_args *a, gb_matmul_epilogue e,
                         const char *why)
{
    static const char *const names[] = {
        [GB_EPILOGUE_GELU_TANH] = "GELU (tanh form)",
        [GB_EPILOGUE_DGELU_TANH] = "GELU's derivative (tanh form)",
        [GB_EPILOGUE_BIAS_GRAD] = "bias gradient",
    };
    cuda_matmul_cache *cache = dev->matmul;
    fallback_key key = {a->m, a->n, a->k, (int64_t)e};
    for (int i = 0; i < cache->n_logged; i++)
        if (memcmp(&cache->logged[i], &key, sizeof key) == 0)
            return;
    if (cache->n_logged == FALLBACK_SLOTS)
        return;   /* a step has fewer fused shapes than this; no flood past it */
    cache->logged[cache->n_logged++] = key;
    dev->host->log(dev->host, GB_LOG_WARN, "device/cuda: matmul m=%lld n=%lld k=%lld %s: the "
                   "%s epilogue is not fused (%s); it runs as a separate kernel after the "
                   "product (logged once per shape)", (long long)a->m, (long long)a->n,
                   (long long)a->k, gb_dtype_name(a->dtype_a), names[e], why);
}

/* alpha A B (+ bias) written to `d` with beta = 0, ready for an element-wise epilogue. */
static gb_status product_into(cuda_device *dev, lt_call *c, void *d)
{
    c->epilogue = c->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    c->d = d;
    c->aux = NULL;
    return run_lt_required(dev, c);
}

/* The BIAS_GRAD epilogue inside cuBLASLt (BGRADB into scratch, then bias_grad += scratch);
 * GB_ERR_UNSUPPORTED, having queued nothing, where the call or cuBLASLt does not allow it. */
static gb_status bias_grad_in_lt(cuda_device *dev, lt_call *c, const matmul_extras *x)
{
    const gb_matmul_args *a = c->args;
    const char *why = x->batch != 1 ? "a batch of products"
                      : a->dtype_c != GB_F32 ? "a 16-bit C: cuBLASLt's sums would have its type"
                      : c->bias ? "a bias as well"
                      : (size_t)a->m * sizeof(float) > dev->scratch_bytes
                          ? "more sums than the scratch holds" : NULL;
    if (why) {
        log_fallback(dev, a, GB_EPILOGUE_BIAS_GRAD, why);
        return GB_ERR_UNSUPPORTED;
    }
    c->epilogue = CUBLASLT_EPILOGUE_BGRADB;
    c->bias = dev->scratch;
    gb_status st = run_lt(dev, c);
    c->bias = NULL;
    if (st == GB_ERR_UNSUPPORTED)
        log_fallback(dev, a, GB_EPILOGUE_BIAS_GRAD, "cuBLASLt has no algorithm for BGRADB here");
    if (st != GB_OK)
        return st;
    return cuda_add(dev, GB_F32, x->bias_grad, x->bias_grad, dev->scratch, a->m);
}

/* cuBLASLt's GELU aux matrix needs a leading dimension (and batch stride) that is a
 * multiple of 8; otherwise the element-wise form runs. */
static int aux_fits_lt(const gb_matmul_args *a, const matmul_extras *x)
{
    return !x->aux || (a->ldc % 8 == 0 && (x->batch == 1 || x->stride_c % 8 == 0));
}

/* The fused GELU or DGELU epilogue `c` on cuBLASLt; GB_ERR_UNSUPPORTED, having queued
 * nothing and logged why, where it cannot run there. */
static gb_status gelu_in_lt(cuda_device *dev, const lt_call *c, const matmul_extras *x)
{
    if (!aux_fits_lt(c->args, x)) {
        log_fallback(dev, c->args, x->epilogue, "cuBLASLt's aux needs a leading dimension "
                     "that is a multiple of 8");
        return GB_ERR_UNSUPPORTED;
    }
    gb_status st = run_lt(dev, c);
    if (st == GB_ERR_UNSUPPORTED)
        log_fallback(dev, c->args, x->epilogue, "cuBLASLt has no algorithm for it here");
    return st;
}

gb_status cuda_matmul(void *self, const gb_matmul_args *args)
{
    cuda_device *dev = self;
    matmul_extras x;
    read_extras(args, &x);
    gb_status st = check_args(dev, args, &x);
    if (st == GB_OK)
        st = cuda_begin(dev, "matmul", args->dtype_a, args->m, args->n);
    if (st != GB_OK || args->m == 0 || args->n == 0)
        return st;
    if (args->k == 0)
        return cuda_matmul_without_k(dev, args, x.epilogue, x.aux, x.batch, x.stride_c);

    lt_call c = {.args = args, .batch = x.batch, .stride_a = x.stride_a,
                 .stride_b = x.stride_b, .stride_c = x.stride_c, .tf32 = x.tf32,
                 .d = args->c, .beta = args->beta};
    if ((st = bias_for_lt(dev, args, &x, &c.bias)) != GB_OK)
        return st;
    const int tanh_form = x.epilogue == GB_EPILOGUE_GELU_TANH ||
                          x.epilogue == GB_EPILOGUE_DGELU_TANH;
    switch (x.epilogue) {
    case GB_EPILOGUE_GELU_TANH:
        /* fused: D = gelu(alpha AB + bias), aux = the pre-activation */
        c.epilogue = x.aux ? (c.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                           : (c.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
        c.aux = x.aux;
        if ((st = gelu_in_lt(dev, &c, &x)) != GB_ERR_UNSUPPORTED)
            return st;
        /* fall through - the product where the pre-activation belongs, then GELU */
    case GB_EPILOGUE_GELU: {
        void *pre = x.aux ? x.aux : args->c;
        if ((st = product_into(dev, &c, pre)) != GB_OK)
            return st;
        return cuda_gelu_after_matmul(dev, tanh_form, args->c, pre, args->dtype_c, args->m,
                                      args->n, args->ldc, x.batch, x.stride_c);
    }
    case GB_EPILOGUE_DGELU_TANH:
        c.epilogue = CUBLASLT_EPILOGUE_DGELU;
        c.aux = x.aux;
        if ((st = gelu_in_lt(dev, &c, &x)) != GB_ERR_UNSUPPORTED)
            return st;
        /* fall through - the product, then times the derivative */
    case GB_EPILOGUE_DGELU:
        if ((st = product_into(dev, &c, args->c)) != GB_OK)
            return st;
        return cuda_dgelu_after_matmul(dev, tanh_form, args->c, x.aux, args->dtype_c, args->m,
                                       args->n, args->ldc, x.batch, x.stride_c);
    case GB_EPILOGUE_BIAS_GRAD:
        if ((st = bias_grad_in_lt(dev, &c, &x)) != GB_ERR_UNSUPPORTED)
            return st;
        break;
    case GB_EPILOGUE_DEFAULT:
        break;
    }
    c.epilogue = c.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    st = run_lt_required(dev, &c);
    if (st != GB_OK || x.epilogue != GB_EPILOGUE_BIAS_GRAD)
        return st;
    /* bias_grad (m) += sum over k of op(A)[i, k]: the columns of a stored (k, m) A, or the
     * rows of a stored (m, k) one */
    if (args->trans_a)
        return cuda_column_sums(dev, "matmul bias_grad", x.bias_grad, args->a, args->dtype_a,
                                args->k * x.batch, args->m, args->lda, x.batch, x.stride_a);
    return cuda_row_sums(dev, x.bias_grad, args->a, args->dtype_a, args->m, args->k,
                         args->lda, x.batch, x.stride_a);
}
