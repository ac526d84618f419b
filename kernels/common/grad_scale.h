/* The factor an optimizer multiplies every raw gradient by (gearbox/optim.h): it removes
 * the loss scale and clips the global norm as torch.nn.utils.clip_grad_norm_ does,
 *     inv_loss_scale * min(1, max_norm / (sqrt(norm_sq) * inv_loss_scale + 1e-6)).
 *
 * Computed in double and rounded to f32 once, each operation rounded on its own
 * (rounded.h), so the CPU optimizers (which read norm_sq in work queued on the device)
 * and the CUDA ones (which read it inside their kernels, never on the host) get the same
 * bits from the same squared norm. Header-only.
 */
#ifndef GEARBOX_KERNELS_GRAD_SCALE_H
#define GEARBOX_KERNELS_GRAD_SCALE_H

#include "loss_scale.h"
#include "rounded.h"

/* norm_sq: the squared global norm of the raw gradients (one f32 in the memory of
 * whoever calls this), or NULL for no clipping; max_norm <= 0 means no clipping too. */
GB_HD_FN float gb_grad_scale(const float *norm_sq, float max_norm, float inv_loss_scale)
{
    double inv = inv_loss_scale;
    if (!norm_sq || !(max_norm > 0))
        return (float)inv;
    double norm = gb_dmul_rn(gb_dsqrt_rn((double)*norm_sq), inv);
    double clip = gb_ddiv_rn((double)max_norm, gb_dadd_rn(norm, 1e-6));
    return (float)gb_dmul_rn(inv, clip < 1.0 ? clip : 1.0);
}

/* The inverse loss scale a step applies: 1 / *loss_scale in f32 when the device keeps the
 * scale (gearbox/optim.h, ABI 1.4), which is how the core computes inv_loss_scale from
 * the scale it holds on the host; else inv_loss_scale. */
GB_HD_FN float gb_inv_loss_scale(const float *loss_scale, float inv_loss_scale)
{
    return loss_scale ? 1.0f / *loss_scale : inv_loss_scale;
}

/* Whether a step with the loss scale on the device is skipped: its gradients overflowed. */
GB_HD_FN int gb_step_overflowed(const float *loss_scale, const float *norm_sq)
{
    return loss_scale && gb_loss_scale_found_inf(*norm_sq);
}

#endif /* GEARBOX_KERNELS_GRAD_SCALE_H */
