/* What every optimizer plugin of this tree computes the same way around its step, beside
 * the toolkit's checks (gearbox/toolkit/optim_checks.h): the factor that removes the loss
 * scale and clips the global norm (optim.h) and the skip of a step whose gradients
 * overflowed under a loss scale on the device, both by kernels/common's formulas.
 * Header-only, so each plugin still links nothing but itself; it compiles as C and, for
 * the CUDA plugins, as CUDA C++. */
#ifndef GB_PLUGINS_OPTIM_STEP_ARGS_H
#define GB_PLUGINS_OPTIM_STEP_ARGS_H

#include "gearbox/optim.h"
#include "gearbox/toolkit/optim_checks.h"
#include "grad_scale.h"

/* The factor that removes the loss scale and applies global-norm clipping (optim.h), for
 * a CPU plugin: it reads grad_norm_sq, so only in work queued on the device. */
static inline float optim_grad_scale(const gb_optim_step_args *args)
{
    return gb_grad_scale(args->grad_norm_sq, args->max_norm,
                         gb_inv_loss_scale(gb_optim_loss_scale(args), args->inv_loss_scale));
}

/* Whether the step is skipped on the device (optim.h, loss_scale), for a CPU plugin: it
 * reads grad_norm_sq, so only in work queued on the device. */
static inline int optim_step_skipped(const gb_optim_step_args *args)
{
    return gb_step_overflowed(gb_optim_loss_scale(args), args->grad_norm_sq);
}

#endif
