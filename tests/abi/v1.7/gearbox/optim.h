/* gearbox optimizer plugins: one update of all parameters from their gradients.
 *
 * The core keeps every parameter in one flat f32 buffer and every gradient in a second
 * one of the same length (device memory), described by parameter groups: contiguous
 * ranges that share a weight-decay setting (decay on matmul weights and embeddings, none
 * on biases and LayerNorm parameters, as nanoGPT groups them). The optimizer owns an
 * opaque state buffer whose size it states up front; the core allocates it, zeroes it
 * before the first step, saves it verbatim in checkpoints and restores it on resume, so a
 * plugin's state must be position-independent plain data.
 *
 * The learning rate comes from the core's schedule on every step; the plugin's own keys
 * (betas, eps, weight decay...) come from its config section.
 *
 * Gradient clipping and loss-scale removal are folded into the step: the core passes the
 * squared global gradient norm as a device scalar (computed by the device's sum_squares)
 * so no host round trip is needed, and the plugin multiplies each gradient by
 *     g_scale = inv_loss_scale * min(1, max_norm / (sqrt(norm_sq) * inv_loss_scale + 1e-6))
 * (max_norm <= 0 disables clipping) before using it, as torch.nn.utils.clip_grad_norm_.
 *
 * Where it runs (ABI 1.2): step() and grad_norm_sq() queue their work on the device's
 * compute stream and return without waiting (GPU kernels on ctx->stream, or
 * gb_device_run_host() for a CPU plugin). grad_norm_sq is device memory like the rest:
 * it is read by that queued work, never dereferenced by the calling thread, so the clip
 * factor needs no host round trip.
 *
 * What the core does on failure: a non-GB_OK status from step() aborts the run with the
 * plugin's message; parameters must then be considered undefined.
 */
#ifndef GEARBOX_OPTIM_H
#define GEARBOX_OPTIM_H

#include "gearbox/device.h"
#include "gearbox/plugin.h"
#include "gearbox/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A contiguous range [offset, offset + count) of the flat buffers. */
typedef struct gb_param_group {
    int64_t offset, count;   /* in elements */
    int32_t decay;           /* 1: apply the optimizer's weight decay; 0: never */
} gb_param_group;

/* Everything one step needs. */
typedef struct gb_optim_step_args {
    size_t struct_size;
    float *params;                 /* (n) f32, updated in place */
    const float *grads;            /* (n) f32, raw (still multiplied by the loss scale) */
    void *state;                   /* state_bytes(n) bytes, zeroed before step 1 */
    int64_t n;
    const gb_param_group *groups;  /* host memory; covers [0, n) without overlap */
    int64_t n_groups;
    int64_t step;                  /* 1 for the first update (bias correction uses it) */
    float lr;                      /* from the core's schedule */
    const float *grad_norm_sq;     /* device scalar: sum of squares of grads, or NULL */
    float max_norm;                /* clip threshold; <= 0: no clipping */
    float inv_loss_scale;          /* 1 / loss scale (1 without loss scaling) */
    void *params_lowp;             /* (n) low-precision working copy of params to write in
                                      the same pass (precision policy with master weights),
                                      or NULL */
    gb_dtype lowp_dtype;           /* GB_BF16 or GB_F16 when params_lowp is set */

    /* ---- ABI 1.1 ---- */
    int32_t lowp_stochastic;       /* 1: round the bf16 params_lowp copy stochastically:
                                      up with probability (dropped bits / 2^16), from
                                      random bits that are a function of (lowp_seed, step,
                                      element index) only, so runs stay reproducible. An
                                      optimizer built for 1.1 that writes params_lowp
                                      honours it or refuses it (GB_ERR_UNSUPPORTED). */
    uint64_t lowp_seed;

    /* ---- ABI 1.4 ---- */
    const float *loss_scale;       /* device scalar, or NULL. When set (only for an
                                      optimizer whose caps declare GB_CAP_DEVICE_LOSS_SCALE):
                                      the loss scale is read there (1 / *loss_scale replaces
                                      inv_loss_scale, computed in f32), and a step whose
                                      grad_norm_sq is not finite is skipped on the device:
                                      params, state and params_lowp stay as they are (the
                                      device's loss scaler counts it). */
} gb_optim_step_args;
/* (1.2 adds no field here; it adds the capabilities GB_CAP_LOWP_COPY and
 * GB_CAP_STOCHASTIC_ROUNDING, by which the core knows before step 1 whether an optimizer
 * can write params_lowp and honour lowp_stochastic.) */

typedef struct gb_optim_ops {
    size_t struct_size;

    /* ---- lifetime (ABI 1.0) ---- */
    gb_status (*create)(const gb_host *host, const gb_value *options,
                        const gb_device_ctx *device, void **self);
    void (*destroy)(void *self);

    /* ---- planning (ABI 1.0) ---- */
    /* Bytes of optimizer state for n parameters (e.g. 8n for AdamW's two moments). */
    size_t (*state_bytes)(void *self, int64_t n);

    /* ---- compute (ABI 1.0) ---- */
    /* Updates params (and params_lowp when set). A plugin that cannot write params_lowp
     * returns GB_ERR_UNSUPPORTED when it is set. */
    gb_status (*step)(void *self, const gb_optim_step_args *args);
    /* Optional (NULL: the core uses the device's sum_squares). *out (a device scalar) =
     * sum of grads[i]^2, computed the optimizer's way, e.g. fused with its own passes. */
    gb_status (*grad_norm_sq)(void *self, float *out, const float *grads, int64_t n);
} gb_optim_ops;

#ifdef __cplusplus
}
#endif
#endif /* GEARBOX_OPTIM_H */
