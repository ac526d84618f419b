/* gearbox device plugins: memory and the base kernels of a GPT.
 *
 * A device plugin owns one accelerator (or the CPU): it allocates and copies memory,
 * describes itself, and runs the model's elementary kernels on memory it allocated. The
 * core plans every buffer before the first step, so alloc() is never called from the
 * training loop, and kernels never allocate either.
 *
 * Calling convention for kernels
 * - Every pointer is a device pointer obtained from alloc() (on the CPU device, host
 *   memory). Shapes are given in elements, row-major, innermost dimension last; the shape
 *   of each tensor is in the comment beside it, e.g. `out (N, C)`.
 * - Kernels are asynchronous with respect to the host on devices that have a queue (the
 *   stream in gb_device_ctx); the core calls sync() before it reads results with copy().
 *   On the CPU every call completes before it returns.
 * - `dtype` names the element type of the activation tensors of that call (marked "act");
 *   parameters, their gradients and per-row statistics are f32. A kernel that does not
 *   support a dtype returns GB_ERR_UNSUPPORTED and says so through host->set_error().
 * - Parameter-gradient outputs marked "+=" accumulate (for gradient accumulation); the
 *   core zeroes them with memset_zero() before the first micro-step of a step.
 * - Kernels are deterministic: the same inputs on the same device with the same thread
 *   count give bit-identical outputs. Resume and A/B comparisons depend on it.
 * - What the core does on failure: any non-GB_OK status aborts the run with the message
 *   set through host->set_error(), naming the plugin and kernel; nothing is retried.
 */
#ifndef GEARBOX_DEVICE_H
#define GEARBOX_DEVICE_H

#include "gearbox/plugin.h"
#include "gearbox/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What plugins of the other kinds receive at create(): where to run. */
typedef struct gb_device_ctx {
    size_t struct_size;
    uint32_t device;     /* exactly one GB_DEVICE_* bit */
    int32_t ordinal;     /* device index within its kind (0 on the CPU) */
    void *stream;        /* the queue work is ordered on: cudaStream_t on CUDA, NULL on CPU */
} gb_device_ctx;

/* What the device says about itself (for the memory plan, metrics and `gearbox doctor`). */
typedef struct gb_device_info {
    size_t struct_size;
    char name[128];              /* e.g. "Intel(R) Xeon(R) Platinum 8488C, 2 threads" */
    uint64_t memory_bytes;       /* memory the device can hand out */
    double peak_flops_f32;       /* FLOP/s for f32 matmuls, for MFU; 0 if unknown */
    double peak_flops_bf16;      /* FLOP/s for bf16 matmuls; 0 if unknown */
    /* ---- ABI 1.2 ---- */
    char libraries[256]; /* the libraries the device computes with and their versions, e.g. "oneDNN 3.0.0 (isa avx2)" */
} gb_device_info;

typedef enum gb_copy_kind {
    GB_COPY_HOST_TO_DEVICE = 0,
    GB_COPY_DEVICE_TO_HOST = 1,
    GB_COPY_DEVICE_TO_DEVICE = 2
} gb_copy_kind;

/* C (m, n) = alpha * op(A) @ op(B) + beta * C (+ bias broadcast over rows), row-major.
 * op(A) is (m, k): A is stored (m, k) with row stride lda, or (k, m) when trans_a.
 * op(B) is (k, n): B is stored (k, n) with row stride ldb, or (n, k) when trans_b.
 * A linear layer out = in @ W^T + b with W (OC, IC) is m=N, n=OC, k=IC, trans_b=1. */
typedef struct gb_matmul_args {
    size_t struct_size;
    int64_t m, n, k;
    const void *a; int64_t lda; int32_t trans_a; gb_dtype dtype_a;
    const void *b; int64_t ldb; int32_t trans_b; gb_dtype dtype_b;
    void *c; int64_t ldc; gb_dtype dtype_c;
    float alpha, beta;
    const float *bias;          /* (n) or NULL */
} gb_matmul_args;

typedef struct gb_device_ops {
    size_t struct_size;

    /* ---- lifetime (ABI 1.0) ---- */
    /* Opens the device. `options` is parallel to the plugin's option table. On failure
     * (e.g. no GPU) returns GB_ERR_DEVICE with a message saying what is missing. */
    gb_status (*create)(const gb_host *host, const gb_value *options, void **self);
    void (*destroy)(void *self);
    /* Output structs: the caller sets out->struct_size; the plugin writes only the fields
     * that lie within it and leaves struct_size alone (docs/abi.md). */
    gb_status (*context)(void *self, gb_device_ctx *out);
    gb_status (*info)(void *self, gb_device_info *out);

    /* ---- memory (ABI 1.0) ---- */
    /* At least 64-byte aligned. GB_ERR_NO_MEMORY when the device is full. */
    gb_status (*alloc)(void *self, size_t bytes, void **ptr);
    void (*free)(void *self, void *ptr);
    gb_status (*copy)(void *self, void *dst, const void *src, size_t bytes, gb_copy_kind kind);
    gb_status (*memset_zero)(void *self, void *ptr, size_t bytes);
    /* Waits until all queued work is done. */
    gb_status (*sync)(void *self);

    /* ---- kernels (ABI 1.0) ---- */
    gb_status (*matmul)(void *self, const gb_matmul_args *args);

    /* out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
     * out act (B, T, C); tokens (B, T) i32, each < V; wte (V, C); wpe (T_max >= T, C). */
    gb_status (*embed_forward)(void *self, gb_dtype dtype, void *out, const int32_t *tokens,
                               const float *wte, const float *wpe, int64_t B, int64_t T,
                               int64_t C);
    /* dwte += scatter of dout by token, dwpe += sum over batch of dout.
     * dout act (B, T, C); dwte (V, C) +=; dwpe (T_max, C) +=. */
    gb_status (*embed_backward)(void *self, gb_dtype dtype, float *dwte, float *dwpe,
                                const void *dout, const int32_t *tokens, int64_t B,
                                int64_t T, int64_t C);

    /* out = (x - mean) * rstd * weight + bias, per row, with biased variance.
     * out, x act (N, C); weight (C); bias (C) or NULL; mean, rstd (N) saved for backward. */
    gb_status (*layernorm_forward)(void *self, gb_dtype dtype, void *out, float *mean,
                                   float *rstd, const void *x, const float *weight,
                                   const float *bias, int64_t N, int64_t C, float eps);
    /* dx +=, dweight +=, dbias += (dbias may be NULL).
     * dx, dout, x act (N, C); weight (C); mean, rstd (N) from the forward pass. */
    gb_status (*layernorm_backward)(void *self, gb_dtype dtype, void *dx, float *dweight,
                                    float *dbias, const void *dout, const void *x,
                                    const float *weight, const float *mean,
                                    const float *rstd, int64_t N, int64_t C);

    /* out = GELU(x) with the exact erf form (PyTorch's default F.gelu). act (n). */
    gb_status (*gelu_forward)(void *self, gb_dtype dtype, void *out, const void *x, int64_t n);
    /* dx = dout * GELU'(x); dx may alias dout. act (n). */
    gb_status (*gelu_backward)(void *self, gb_dtype dtype, void *dx, const void *x,
                               const void *dout, int64_t n);

    /* out = a + b; out may alias a or b. act (n). */
    gb_status (*add)(void *self, gb_dtype dtype, void *out, const void *a, const void *b,
                     int64_t n);

    /* dbias += sum over rows of dout. dout act (N, C); dbias (C). */
    gb_status (*bias_backward)(void *self, gb_dtype dtype, float *dbias, const void *dout,
                               int64_t N, int64_t C);

    /* Softmax cross-entropy over the first V columns of each row, fused with its gradient.
     * logits act (N, V); targets (N) i32; losses (N) f32 = -log softmax(logits)[target].
     * When dlogits is not NULL: dlogits = (softmax(logits) - onehot(target)) * dloss,
     * where dloss is the gradient of the final loss with respect to each row's loss
     * (1/N for a mean over N rows). dlogits act (N, V) may alias logits. */
    gb_status (*cross_entropy)(void *self, gb_dtype dtype, float *losses, void *dlogits,
                               const void *logits, const int32_t *targets, int64_t N,
                               int64_t V, float dloss);

    /* *out = sum of x[i]^2 over n f32 values, written to device memory (a global gradient
     * norm needs no host round trip). out is one f32. */
    gb_status (*sum_squares)(void *self, float *out, const float *x, int64_t n);
} gb_device_ops;

#ifdef __cplusplus
}
#endif
#endif /* GEARBOX_DEVICE_H */
