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

    /* ---- ABI 1.7 ---- */
    /* Attention of new query rows over cached keys and values, for sampling with a KV
     * cache. Optional: NULL (or a plugin built before 1.7) makes the core run forward over
     * every position again for each new token. problem->seq_len is T, the new rows, at
     * positions past .. past+T-1 of their sequences. k and v (B, H, T, D) are the new rows'
     * keys and values; k_cache and v_cache are (B, H, past + T, D) views of every position's
     * (their stride[2] may leave room for later ones). The call first writes k and v into
     * rows past .. past+T-1 of the caches, then out (B, H, T, D) = softmax(q k_cache^T *
     * scale + mask) v_cache, new row i seeing positions 0 .. past+i (all past + T when
     * problem->causal is 0). Queued on the compute stream as forward is; it saves nothing
     * for backward and takes no workspace. A problem eligible() accepts with seq_len
     * past + T is one this call computes. */
    gb_status (*forward_cached)(void *self, const gb_attn_problem *problem, int64_t past,
                                gb_tensor out, gb_tensor q, gb_tensor k, gb_tensor v,
                                gb_tensor k_cache, gb_tensor v_cache);
} gb_attn_ops;

/* Whether an attention vtable has optional entry `entry` (ABI 1.7 on), judged by its
 * struct_size as GB_DEVICE_HAS judges a device's. */
#define GB_ATTN_HAS(ops, entry)                                                           \
    ((ops)->struct_size >= offsetof(gb_attn_ops, entry) + sizeof((ops)->entry) &&        \
     (ops)->entry != NULL)

#ifdef __cplusplus
}
#endif
#endif /* GEARBOX_ATTN_H */
