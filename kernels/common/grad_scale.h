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

#endif /* GEARBOX_KERNELS_GRAD_SCALE_H */
