/* attn/math on CUDA: attention as written in the textbook, materialising the (T, T)
 * probabilities of every (batch, head), with the products on the device's GEMMs.
 *
 * Forward: S = Q K^T / sqrt(D) (f32, into `saved`), P = softmax(S) with the causal mask
 * in place there, out = P V. Backward: dP = dO V^T, dS = P * (dP - rowsum(P * dP)),
 * dQ = dS K / sqrt(D), dK = dS^T Q / sqrt(D), dV = P^T dO. The five products are strided
 * batched GEMMs through the device (ctx->ops->matmul with batch and strides, so the
 * device must declare GB_CAP_MATMUL_BATCHED), one call over all B*H heads when the views'
 * batch stride is H times their head stride (contiguous views), else one call per batch
 * over its H heads (the core's packed (B, T, 3, H, D) projection). The 1/sqrt(D) scale
 * rides in the GEMMs' alpha. The two softmax kernels are this file's: one warp per row,
 * each lane summing its own columns in order and the lanes combined by a fixed butterfly,
 * so results are bit-identical run after run (the device's GEMMs are deterministic too,
 * by the device contract).
 *
 * Dtypes: the products take the problem's dtype (f32, bf16 or f16) and accumulate in f32
 * (the device's matmul contract). The scores, the saved probabilities and dP are f32; for
 * a 16-bit problem the kernels also round P (forward) and dS and P (backward) into 16-bit
 * copies in the workspace, which the products that read them take, as PyTorch's math
 * attention does in bf16. f32 products may round their inputs to TF32 when the problem
 * allows it and the device declares GB_CAP_TF32.
 *
 * Memory: saved is B*H*T*T f32 per layer (the probabilities); the workspace is dP
 * (B*H*T*T f32) and, for 16-bit problems, two B*H*T*T 16-bit copies. Views may have any
 * strides as long as head_dim is contiguous (stride[3] == 1). Everything is queued on
 * ctx->stream; nothing waits. No options.
 *
 * Deliberately left out: skipping the masked upper triangle in the products (the tiled
 * plugins do not materialise it at all) and fusing the softmax into a GEMM epilogue. Not
 * yet run on a GPU: its conformance test (suite gpu) needs one and device/cuda.
 */
#include <math.h>
#include <stdint.h>

#include "act.cuh"
#include "attn_cached_cuda.cuh"
#include "gearbox/toolkit/attn_checks.h"
#include "cuda_status.h"
#include "warp.cuh"
#include "gearbox/attn.h"

#define PLUGIN "attn/math"
#define WARP GB_WARP
/* Rows of the softmax kernels per block of 32 * ROWS_PER_BLOCK threads: one warp each. */
#define ROWS_PER_BLOCK 8

typedef gb_plugin_instance attn_math_cuda;   /* device: its GEMMs and its stream */

/* ---- kernels ------------------------------------------------------------------------- */

/* The row of a (B, H, T, T) tensor that this thread's warp takes (one warp per row), the
 * keys that row sees (with the causal mask, its position + 1) and the thread's lane. */
typedef struct warp_row {
    int64_t row, visible;
    int lane;
} warp_row;

static __device__ warp_row this_warps_row(int64_t T, int causal)
{
    const int64_t row = blockIdx.x * (int64_t)ROWS_PER_BLOCK + threadIdx.x / WARP;
    return warp_row{row, causal ? row % T + 1 : T, (int)(threadIdx.x % WARP)};
}

/* P = softmax over the visible keys of each row of scores, zero beyond; in place.
 * probs (rows, T) f32: scores in, probabilities out; lowp (rows, T) 16-bit copy of P, or
 * NULL. One warp per row; `row` is the same for the whole warp, so a warp past the last
 * row leaves as one. */
static __global__ void softmax_forward_kernel(float *probs, void *lowp, gb_dtype dtype,
                                              int64_t rows, int64_t T, int causal)
{
    const warp_row w = this_warps_row(T, causal);
    if (w.row >= rows)
        return;
    float *s = probs + w.row * T;
    float max = -INFINITY;
    for (int64_t j = w.lane; j < w.visible; j += WARP)
        max = fmaxf(max, s[j]);
    max = gb_warp_max(max);
    float sum = 0.0f;
    for (int64_t j = w.lane; j < w.visible; j += WARP) {
        const float e = expf(s[j] - max);
        s[j] = e;
        sum += e;
    }
    const float inv_sum = 1.0f / gb_warp_sum(sum);
    for (int64_t j = w.lane; j < T; j += WARP) {
        const float p = j < w.visible ? s[j] * inv_sum : 0.0f;
        s[j] = p;
        if (lowp)
            gb_act_store(lowp, dtype, w.row * T + j, p);
    }
}

/* dS = P * (dP - sum over visible keys of P dP) per row, zero beyond the visible keys.
 * dp (rows, T) f32: dP in; dS out when ds_lowp is NULL (f32 problems). Otherwise dS and
 * P go to the 16-bit copies ds_lowp and p_lowp (rows, T). probs (rows, T) f32 from
 * forward. One warp per row, as softmax_forward_kernel. */
static __global__ void softmax_backward_kernel(float *dp, const float *probs, void *ds_lowp,
                                               void *p_lowp, gb_dtype dtype, int64_t rows,
                                               int64_t T, int causal)
{
    const warp_row w = this_warps_row(T, causal);
    if (w.row >= rows)
        return;
    float *d = dp + w.row * T;
    const float *p = probs + w.row * T;
    float dot = 0.0f;
    for (int64_t j = w.lane; j < w.visible; j += WARP)
        dot += p[j] * d[j];
    dot = gb_warp_sum(dot);
    for (int64_t j = w.lane; j < T; j += WARP) {
        // beyond the visible keys forward left P = 0 and dP holds unmasked products
        const float ds = j < w.visible ? p[j] * (d[j] - dot) : 0.0f;
        if (!ds_lowp) {
            d[j] = ds;
            continue;
        }
        gb_act_store(ds_lowp, dtype, w.row * T + j, ds);
        gb_act_store(p_lowp, dtype, w.row * T + j, p[j]);
    }
}

/* ---- products through the device --------------------------------------------------- */

/* One head's matrix of a (B, H, rows, cols) operand: element (0, 0) of head (0, 0), its
 * dtype, its row stride, and the strides between batches and between heads (elements). */
typedef struct operand {
    void *data;
    gb_dtype dtype;
    int64_t ld, batch_stride, head_stride;
} operand;

static operand view_operand(const gb_tensor *t)
{
    operand o = {t->data, t->dtype, t->stride[2], t->stride[0], t->stride[1]};
    return o;
}

/* A contiguous (B, H, T, T) buffer of `dtype`. */
static operand square_operand(void *data, gb_dtype dtype, const gb_attn_problem *p)
{
    const int64_t T = p->seq_len;
    operand o = {data, dtype, T, p->heads * T * T, T * T};
    return o;
}

/* 1 when batch b head h of `o` sits at (b * H + h) * head_stride. */
static int flat_heads(const operand *o, int64_t H)
{
    return o->batch_stride == H * o->head_stride;
}

static void *element(const operand *o, int64_t offset)
{
    return (char *)o->data + offset * (int64_t)gb_dtype_size(o->dtype);
}

/* C = alpha op(A) op(B) for every (batch, head): C (m, n), op(A) (m, k), op(B) (k, n) per
 * head, as gb_matmul_args describes them. One call over all heads when one stride walks
 * them all (a single head per batch: the batch stride; contiguous views: the head
 * stride), else one call per batch over its heads. `what` names the product in messages. */
static gb_status heads_matmul(const attn_math_cuda *a, const gb_attn_problem *p,
                              const char *what, int64_t m, int64_t n, int64_t k,
                              const operand *A, int trans_a, const operand *B, int trans_b,
                              const operand *C, float alpha)
{
    const gb_host *host = a->host;
    const int64_t batches = p->batch, H = p->heads;
    const int one_head = H == 1;
    const int flat = one_head || (flat_heads(A, H) && flat_heads(B, H) && flat_heads(C, H));
    gb_matmul_args args;
    memset(&args, 0, sizeof args);
    args.struct_size = sizeof args;
    args.m = m;
    args.n = n;
    args.k = k;
    args.lda = A->ld;
    args.trans_a = trans_a;
    args.dtype_a = A->dtype;
    args.ldb = B->ld;
    args.trans_b = trans_b;
    args.dtype_b = B->dtype;
    args.ldc = C->ld;
    args.dtype_c = C->dtype;
    args.alpha = alpha;
    args.beta = 0.0f;
    args.batch = flat ? batches * H : H;
    args.stride_a = one_head ? A->batch_stride : A->head_stride;
    args.stride_b = one_head ? B->batch_stride : B->head_stride;
    args.stride_c = one_head ? C->batch_stride : C->head_stride;
    args.allow_tf32 = p->struct_size >= offsetof(gb_attn_problem, allow_tf32) +
                                            sizeof p->allow_tf32 &&
                      p->allow_tf32 && (a->device.caps & GB_CAP_TF32);
    for (int64_t b = 0; b < (flat ? 1 : batches); b++) {
        args.a = element(A, b * A->batch_stride);
        args.b = element(B, b * B->batch_stride);
        args.c = element(C, b * C->batch_stride);
        gb_status st = a->device.ops->matmul(a->device.self, &args);
        if (st != GB_OK) {
            host->set_error(host, "%s: the device's batched matmul returned status %d for "
                            "(m, n, k) = (%lld, %lld, %lld), batch %lld (the device's own "
                            "message says why)", what, (int)st, (long long)m, (long long)n,
                            (long long)k, (long long)args.batch);
            return st;
        }
    }
    return GB_OK;
}

/* ---- the plugin ---------------------------------------------------------------------- */

static gb_status math_create(const gb_host *host, const gb_value *options,
                             const gb_device_ctx *device, void **self)
{
    (void)options;
    gb_status st = gb_attn_require_cuda(host, PLUGIN, device);
    if (st != GB_OK)
        return st;
    if (device->struct_size < offsetof(gb_device_ctx, caps) + sizeof device->caps ||
        !device->ops || !(device->caps & GB_CAP_MATMUL_BATCHED)) {
        host->set_error(host, PLUGIN "-cuda runs its products as strided batched GEMMs "
                              "through the device, and this device does not declare them "
                              "(GB_CAP_MATMUL_BATCHED, device ABI 1.2)");
        return GB_ERR_UNSUPPORTED;
    }
    return gb_plugin_instance_new(host, device, PLUGIN, sizeof(attn_math_cuda), self);
}

static int math_eligible(void *self, const gb_attn_problem *p, char *reason, size_t reason_cap)
{
    (void)self;
    return gb_attn_problem_ok_on(PLUGIN, "cuda", p, reason, reason_cap);
}

/* Elements of one (B, H, T, T) tensor. */
static size_t square_elements(const gb_attn_problem *p)
{
    return (size_t)p->batch * (size_t)p->heads * (size_t)p->seq_len * (size_t)p->seq_len;
}

static gb_status math_memory(void *self, const gb_attn_problem *p, size_t *saved_bytes,
                             size_t *workspace_bytes)
{
    (void)self;
    const size_t squares = square_elements(p);
    const size_t lowp = p->dtype == GB_F32 ? 0 : gb_dtype_size(p->dtype);
    *saved_bytes = squares * sizeof(float);
    // forward: P's 16-bit copy; backward: dP, then dS's and P's 16-bit copies
    const size_t forward = squares * lowp, backward = squares * (sizeof(float) + 2 * lowp);
    *workspace_bytes = forward > backward ? forward : backward;
    return GB_OK;
}

static unsigned row_blocks(int64_t rows)
{
    return (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
}

static gb_status math_forward(void *self, const gb_attn_problem *p, gb_tensor out,
                              gb_tensor q, gb_tensor k, gb_tensor v, void *saved,
                              void *workspace)
{
    const attn_math_cuda *attn = (const attn_math_cuda *)self;
    const gb_host *host = attn->host;
    const char *names[] = {"out", "q", "k", "v"};
    const gb_tensor *views[] = {&out, &q, &k, &v};
    gb_status st = gb_attn_check_eligible_call(attn, PLUGIN, "forward", math_eligible, p, names,
                                               views, 4);
    if (st != GB_OK)
        return st;
    const int64_t T = p->seq_len, D = p->head_dim, rows = p->batch * p->heads * T;
    const float scale = 1.0f / sqrtf((float)D);
    const int lowp = p->dtype != GB_F32;
    const operand Q = view_operand(&q), K = view_operand(&k), V = view_operand(&v),
                  O = view_operand(&out);
    const operand S = square_operand(saved, GB_F32, p);                 // (B, H, T, T) f32
    const operand P = lowp ? square_operand(workspace, p->dtype, p) : S; // what P V reads
    if ((st = heads_matmul(attn, p, "forward: S = Q K^T", T, T, D, &Q, 0, &K, 1, &S, scale)))
        return st;
    softmax_forward_kernel<<<row_blocks(rows), ROWS_PER_BLOCK * WARP, 0,
                             (cudaStream_t)attn->device.stream>>>(
        (float *)saved, lowp ? workspace : NULL, p->dtype, rows, T, p->causal);
    GB_CUDA_CHECK_LAUNCH("softmax_forward_kernel (B*H*T rows of T)");
    return heads_matmul(attn, p, "forward: out = P V", T, D, T, &P, 0, &V, 0, &O, 1.0f);
}

static gb_status math_backward(void *self, const gb_attn_problem *p, gb_tensor dq,
                               gb_tensor dk, gb_tensor dv, gb_tensor dout, gb_tensor q,
                               gb_tensor k, gb_tensor v, gb_tensor out, const void *saved,
                               void *workspace)
{
    (void)out;   // the saved probabilities carry everything out would tell
    const attn_math_cuda *attn = (const attn_math_cuda *)self;
    const gb_host *host = attn->host;
    const char *names[] = {"dq", "dk", "dv", "dout", "q", "k", "v"};
    const gb_tensor *views[] = {&dq, &dk, &dv, &dout, &q, &k, &v};
    gb_status st = gb_attn_check_eligible_call(attn, PLUGIN, "backward", math_eligible, p,
                                               names, views, 7);
    if (st != GB_OK)
        return st;
    const int64_t T = p->seq_len, D = p->head_dim, rows = p->batch * p->heads * T;
    const float scale = 1.0f / sqrtf((float)D);
    const int lowp = p->dtype != GB_F32;
    const size_t squares = square_elements(p);
    char *ws = (char *)workspace;
    void *ds_lowp = lowp ? ws + squares * sizeof(float) : NULL;
    void *p_lowp = lowp ? ws + squares * (sizeof(float) + gb_dtype_size(p->dtype)) : NULL;
    const operand Q = view_operand(&q), K = view_operand(&k), V = view_operand(&v),
                  dO = view_operand(&dout), dQ = view_operand(&dq), dK = view_operand(&dk),
                  dV = view_operand(&dv);
    const operand dP = square_operand(workspace, GB_F32, p);            // (B, H, T, T) f32
    // what the products after the softmax gradient read: f32 in place, or 16-bit copies
    const operand dS = lowp ? square_operand(ds_lowp, p->dtype, p) : dP;
    const operand P = lowp ? square_operand(p_lowp, p->dtype, p)
                           : square_operand((void *)saved, GB_F32, p);
    if ((st = heads_matmul(attn, p, "backward: dP = dO V^T", T, T, D, &dO, 0, &V, 1, &dP,
                           1.0f)))
        return st;
    softmax_backward_kernel<<<row_blocks(rows), ROWS_PER_BLOCK * WARP, 0,
                              (cudaStream_t)attn->device.stream>>>(
        (float *)workspace, (const float *)saved, ds_lowp, p_lowp, p->dtype, rows, T,
        p->causal);
    GB_CUDA_CHECK_LAUNCH("softmax_backward_kernel (B*H*T rows of T)");
    if ((st = heads_matmul(attn, p, "backward: dQ = dS K", T, D, T, &dS, 0, &K, 0, &dQ,
                           scale)) ||
        (st = heads_matmul(attn, p, "backward: dK = dS^T Q", T, D, T, &dS, 1, &Q, 0, &dK,
                           scale)))
        return st;
    return heads_matmul(attn, p, "backward: dV = P^T dO", T, D, T, &P, 1, &dO, 0, &dV, 1.0f);
}

/* C linkage: the loader looks the entry up by its plain name. */
extern "C" {
/* forward_cached (ABI 1.7): new rows over the caches, by attn/common's warp per row (the
 * batched GEMMs of forward would multiply one row at a time). */
static gb_status math_forward_cached(void *self, const gb_attn_problem *p, int64_t past,
                                     gb_tensor out, gb_tensor q, gb_tensor k, gb_tensor v,
                                     gb_tensor k_cache, gb_tensor v_cache)
{
    const gb_plugin_instance *a = (const attn_math_cuda *)self;
    return attn_cuda_forward_cached(a, PLUGIN, math_eligible, p, past, out, q, k, v, k_cache,
                                    v_cache);
}

GB_ATTN_PLUGIN("math", "1.0.0",
               "materialises the T x T probabilities; batched GEMMs through the device "
               "and a softmax kernel; f32, bf16, f16",
               GB_DEVICE_CUDA, GB_ATTN_DTYPES,
               GB_CAP_DETERMINISTIC | GB_CAP_TF32 | GB_CAP_QUEUED_MEMORY, GB_NO_OPTIONS,
               math_create, gb_plugin_instance_destroy, math_eligible, math_memory, math_forward,
               math_backward, math_forward_cached)
}
