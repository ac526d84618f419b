/* One optimizer step of the dynamic loss scaler (gearbox/device.h, gb_loss_scaler: PyTorch
 * GradScaler's rule with a floor at min_scale), for every place that runs it: the precision
 * plugins' scaler on the host, device/cpu in queued work and device/cuda in a one-thread
 * kernel, so a scale sequence has the same bits whichever runs it. Each product is
 * computed in double and rounded to f32 once, as torch._amp_update_scale_ does.
 * Header-only.
 */
#ifndef GEARBOX_KERNELS_LOSS_SCALE_H
#define GEARBOX_KERNELS_LOSS_SCALE_H

#include <math.h>

#include "gearbox/device.h"
#include "hostdevice.h"

/* Whether an optimizer step with this squared gradient norm overflowed. */
GB_HD_FN int gb_loss_scale_found_inf(float norm_sq)
{
    return !isfinite(norm_sq);
}

/* Moves `s` by one optimizer step; 1 when the step is to be skipped. */
GB_HD_FN int gb_loss_scaler_step(gb_loss_scaler *s, int found_inf)
{
    s->total_steps++;
    if (!s->enabled)
        return 0;
    if (found_inf) {
        float lowered = (float)((double)s->scale * s->backoff_factor);
        s->skipped_steps++;
        s->growth_tracker = 0;
        s->scale = lowered > s->min_scale ? lowered : s->min_scale;
        return 1;
    }
    if (++s->growth_tracker >= s->growth_interval) {
        /* an f32 overflow would make every later gradient inf: the scale saturates */
        float grown = (float)((double)s->scale * s->growth_factor);
        s->growth_tracker = 0;
        if (isfinite(grown))
            s->scale = grown;
    }
    return 0;
}

#endif /* GEARBOX_KERNELS_LOSS_SCALE_H */
