/* `[data] batch_size = auto`: the largest micro-batch whose memory plan fits the budget,
 * found by planning (not allocating) candidate batches with gb_model_plan, so the choice
 * rests on the same byte counts the run will allocate.
 *
 * The budget is `[run] memory_budget` when set, else 95% of the memory the device has free
 * (gb_device_info.free_bytes: cudaMemGetInfo on device/cuda, asked once the plugins have
 * made their own allocations), else the device's whole memory when it does not say what is
 * free; on the CPU the budget must be given, since the CPU device's memory is all of RAM,
 * shared with everything else on the machine. With `[data] tokens_per_step` the batch is the largest
 * fitting divisor of the sequences per step and gradient_accumulation_steps makes up the
 * rest, so the tokens per optimizer step stay what the config says. The choice is printed;
 * nothing here retries at run time when memory turns out to be short.
 */
#ifndef GB_CORE_AUTOBATCH_H
#define GB_CORE_AUTOBATCH_H

#include "gearbox/engine/model.h"
#include "gearbox/engine/run.h"

/* When the run's [data] batch_size is auto (gb_runtime_settings(rt)->batch_auto), chooses
 * and writes its batch_size and gradient_accumulation_steps and prints the choice on
 * `out`; otherwise checks that the configured batch's plan fits the device's memory (where
 * the device states it), which `gearbox check` and `gearbox train` both rely on.
 * The runtime must be started (the attention and optimizer plugins size their memory).
 * 0, or -1 with the problem in `diag`. */
int gb_batch_auto(gb_runtime *rt, const gb_model_config *mc, FILE *out, gb_diag *diag);

#endif
