/* gearbox attention plugins: causal multi-head self-attention, forward and backward.
 *
 * out = softmax(Q K^T * scale + causal mask) V for every (batch, head), with
 * scale = 1/sqrt(head_dim). Q, K, V, the output and their gradients are 4-D views
 * (B, H, T, head_dim) with arbitrary strides, so the core can pass slices of its packed
 * (B, T, 3, H, head_dim) projection without a transpose. Plugins differ in how they
 * compute, not what: math materialises the (T, T) scores, others tile and recompute.
 *
 * Memory: the core asks once, before the first step, how many bytes a plugin keeps
 * between forward and backward per layer (`saved_bytes`, e.g. probabilities or per-row
 * log-sum-exp) and how much scratch it needs during a call (`workspace_bytes`, shared by
 * all layers), and allocates both on the run's device. Plugins allocate nothing per call.
 *
 * Where it runs (ABI 1.2): forward and backward queue their work on the device's compute
 * stream (the gb_device_ctx given to create()): GPU kernels on ctx->stream, or, for a CPU
 * plugin, gb_device_run_host(); they return without waiting for it. A plugin may run its
 * products through the device (ctx->ops->matmul with batch and strides).
 *
 * What the core does on failure: a non-GB_OK status from forward/backward aborts the run
 * with the plugin's message. `eligible` answering no makes the core refuse the config
 * (or, with `plugin = auto`, pass the plugin over and print the reason).
 */
#ifndef GEARBOX_ATTN_H
#define GEARBOX_ATTN_H

#include "gearbox/device.h"
#include "gearbox/plugin.h"
#include "gearbox/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The shapes and types of one attention call. */
typedef struct gb_attn_problem {
    size_t struct_size;
    int64_t batch, heads, seq_len, head_dim;   /* B, H, T, D */
    gb_dtype dtype;                            /* of Q, K, V, out and their gradients */
    int32_t causal;                            /* 1: position t attends to 0..t only */

    /* ---- ABI 1.2 ---- */
    int32_t allow_tf32;   /* 1: f32 products may round their inputs to TF32 (the precision
                             policy's tf32); a plugin without GB_CAP_TF32 computes in f32 */
} gb_attn_problem;

typedef struct gb_attn_ops {
    size_t struct_size;

    /* ---- lifetime (ABI 1.0) ---- */
    gb_status (*create)(const gb_host *host, const gb_value *options,
                        const gb_device_ctx *device, void **self);
    void (*destroy)(void *self);

    /* ---- planning (ABI 1.0) ---- */
    /* Returns 1 when this plugin can run `problem`; otherwise 0 with a reason a user can
     * act on written to `reason` (NUL-terminated, at most reason_cap bytes), e.g.
     * "head_dim 200 > 128: the tile kernels support head_dim <= 128". */
    int (*eligible)(void *self, const gb_attn_problem *problem, char *reason, size_t reason_cap);
    /* Bytes kept from forward to backward for one layer, and scratch bytes for one call.
     * Only called for eligible problems. */
    gb_status (*memory)(void *self, const gb_attn_problem *problem, size_t *saved_bytes,
                        size_t *workspace_bytes);

    /* ---- compute (ABI 1.0) ---- */
    /* q, k, v, out: (B, H, T, D) views. saved: saved_bytes for this layer, written here
     * and read by backward. workspace: workspace_bytes of scratch. */
    gb_status (*forward)(void *self, const gb_attn_problem *problem, gb_tensor out,
                         gb_tensor q, gb_tensor k, gb_tensor v, void *saved, void *workspace);
    /* dq, dk, dv (B, H, T, D) are overwritten (not accumulated). q, k, v, out and saved
     * are what forward saw and left; dout is the gradient of out. */
    gb_status (*backward)(void *self, const gb_attn_problem *problem, gb_tensor dq,
                          gb_tensor dk, gb_tensor dv, gb_tensor dout, gb_tensor q,
                          gb_tensor k, gb_tensor v, gb_tensor out, const void *saved,
                          void *workspace);
} gb_attn_ops;

#ifdef __cplusplus
}
#endif
#endif /* GEARBOX_ATTN_H */
