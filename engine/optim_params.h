/* The optimizer's view of the model's tensors (ABI 1.8): the one place where the engine
 * turns the model's layout (gb_param_tensor, with its roles) into the table an optimizer's
 * bind_params reads. Private to the engine; model.c calls it before it asks the optimizer
 * for its state's size.
 */
#ifndef GB_ENGINE_OPTIM_PARAMS_H
#define GB_ENGINE_OPTIM_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/engine/model.h"
#include "runtime.h"

/* Hands the run's optimizer the table of `count` tensors over n parameters, whose working
 * copy is `working` (GB_F32 without a low-precision copy), when the optimizer has
 * bind_params; *workspace_bytes receives the scratch its step needs (0 without the entry).
 * 0, or -1 after reporting why. */
int gb_optim_bind_params(gb_runtime *rt, const gb_param_tensor *tensors, int count, int64_t n,
                         gb_dtype working, size_t *workspace_bytes);

#endif
