/* gearbox precision plugins: which dtypes a run computes in, and the loss scaler.
 *
 * A precision plugin decides policy, not kernels: it names the dtype of activations,
 * of matmul inputs and of the weights' working copy, and whether f32 master weights are
 * kept; the core plans buffers and calls the device kernels accordingly. Policies that
 * need loss scaling (fp16) also implement the scaler: the core multiplies the loss
 * gradient by loss_scale(), divides gradients by it before the optimizer step, and after
 * each step reports whether any gradient was inf/nan; the scaler decides whether the
 * step is skipped and how the scale moves (PyTorch GradScaler semantics).
 *
 * NULL scaler entries mean "no loss scaling": the scale is 1 and no step is skipped.
 * The scaler's state (scale, growth tracker, counters) must be plain data that the core
 * can save in checkpoints with state_bytes/save_state/load_state. A scaler that also
 * gives itself as a gb_loss_scaler (ABI 1.4, scaler_get/scaler_set) is run by the device
 * instead, on a device and optimizer that can: the overflow check, the skip and the scale's
 * update then stay on the device, with no host round trip per step.
 */
#ifndef GEARBOX_PRECISION_H
#define GEARBOX_PRECISION_H

#include "gearbox/device.h"
#include "gearbox/plugin.h"
#include "gearbox/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gb_precision_policy {
    size_t struct_size;
    gb_dtype activation_dtype;  /* activations stored between layers */
    gb_dtype matmul_dtype;      /* inputs of matmuls; accumulation is always f32 */
    gb_dtype param_dtype;       /* the weights' working copy used by kernels */
    int32_t master_weights;     /* 1: the optimizer updates an f32 master copy and writes
                                   the param_dtype copy in the same pass */

    /* ---- ABI 1.1 ---- */
    int32_t stochastic_rounding; /* 1: that copy is rounded stochastically (bf16) */

    /* ---- ABI 1.2 ---- */
    int32_t tf32;                /* 1: f32 matmuls and attention products may round their
                                    inputs to TF32 (10-bit mantissa) on hardware that has
                                    it; the core passes it on as allow_tf32 */
} gb_precision_policy;

typedef struct gb_precision_ops {
    size_t struct_size;

    /* ---- lifetime (ABI 1.0) ---- */
    gb_status (*create)(const gb_host *host, const gb_value *options,
                        const gb_device_ctx *device, void **self);
    void (*destroy)(void *self);

    /* ---- policy (ABI 1.0) ---- */
    /* 1 when the policy can run on `device`; else 0 and a reason (NUL-terminated, at most
     * reason_cap bytes) such as "tf32 needs CUDA tensor cores; this run's device is cpu". */
    int (*eligible)(void *self, const gb_device_ctx *device, char *reason, size_t reason_cap);
    /* The caller sets out->struct_size; the plugin writes only fields within it. */
    gb_status (*policy)(void *self, gb_precision_policy *out);

    /* ---- loss scaler (ABI 1.0; all NULL when the policy does not scale) ---- */
    float (*loss_scale)(void *self);
    /* Called once per optimizer step with whether any gradient was inf/nan; sets
     * *skip_step to 1 when the update must be skipped, and moves the scale. */
    gb_status (*update)(void *self, int found_inf, int *skip_step);
    size_t (*state_bytes)(void *self);
    gb_status (*save_state)(void *self, void *buf);
    gb_status (*load_state)(void *self, const void *buf);

    /* ---- ABI 1.4: the scaler on the device (optional, both or neither; NULL, or
     *      GB_ERR_UNSUPPORTED from scaler_get: the core calls update() every step) ---- */
    /* The scaler's rule and state as device.h's gb_loss_scaler, which the device then
     * moves with the same rule as update(); the core copies it back with scaler_set before
     * save_state and whenever it reads the scale on the host. */
    gb_status (*scaler_get)(void *self, gb_loss_scaler *out);
    /* Takes the state fields of `in` (the rule fields must be those scaler_get gave). */
    gb_status (*scaler_set)(void *self, const gb_loss_scaler *in);
} gb_precision_ops;

#ifdef __cplusplus
}
#endif
#endif /* GEARBOX_PRECISION_H */
