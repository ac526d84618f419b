/* The instance every AdamW plugin of this tree starts from (optim/adamw and
 * optim/adamw_fused, on the CPU and on CUDA): its head (kernels/common's gb_plugin_instance,
 * which gb_plugin_instance_destroy frees), create()'s checks, options and allocation, the checks
 * of a step and the state's size (m then v, n f32 each, on every device, so
 * checkpoints move between them). A plugin's own fields follow the head. Header-only;
 * compiles as C and as CUDA C++.
 */
#ifndef GB_PLUGINS_OPTIM_ADAMW_INSTANCE_H
#define GB_PLUGINS_OPTIM_ADAMW_INSTANCE_H

#include "adamw_options.h"
#include "gearbox/optim.h"
#include "gearbox/toolkit/instance.h"
#include "step_args.h"

typedef struct adamw_base {
    gb_plugin_instance inst;       /* inst.device: where step() queues */
    adamw_hparams h;
    int threads;            /* host->num_threads, at least 1 */
} adamw_base;

/* 1 when `plugin` (cpu) can run on `device`; else 0 with the host told why. */
static inline int optim_cpu_device_ok(const gb_host *host, const gb_device_ctx *device,
                                      const char *plugin)
{
    if (!device || gb_device_memory_is_host(device))
        return 1;
    host->set_error(host, "%s (cpu) runs on devices whose buffers are host memory", plugin);
    return 0;
}

/* create()'s shared part: checks the arguments and the device (device_ok names `plugin`),
 * reads the options and allocates a zeroed instance of `bytes` with its head filled. */
static inline gb_status adamw_base_create(const gb_host *host, const gb_value *options,
                                          const gb_device_ctx *device,
                                          int (*device_ok)(const gb_host *,
                                                           const gb_device_ctx *,
                                                           const char *),
                                          const char *plugin, size_t bytes, void **self)
{
    if (!host || !options || !self)
        return GB_ERR_INVALID_ARG;
    if (!device_ok(host, device, plugin))
        return GB_ERR_UNSUPPORTED;
    adamw_hparams h;
    if (!adamw_read_options(host, options, &h))
        return GB_ERR_CONFIG;
    gb_status status = gb_plugin_instance_new(host, device, plugin, bytes, self);
    if (status != GB_OK)
        return status;
    adamw_base *a = (adamw_base *)*self;
    a->h = h;
    a->threads = host->num_threads > 0 ? host->num_threads : 1;
    return GB_OK;
}

static inline size_t adamw_state_bytes(void *self, int64_t n)
{
    (void)self;
    return n > 0 ? 2 * sizeof(float) * (size_t)n : 0;
}

/* The check of a step: valid arguments, and a low-precision copy (if any) that the plugin
 * writes; optim/adamw (writes_lowp 0) writes none. */
static inline gb_status adamw_check_step_args(const adamw_base *a,
                                              const gb_optim_step_args *args, int writes_lowp)
{
    if (!gb_optim_step_args_valid(a->inst.host, args))
        return GB_ERR_INVALID_ARG;
    if (writes_lowp)
        return gb_optim_lowp_supported(a->inst.host, args);
    if (!args->params_lowp)
        return GB_OK;
    const gb_host *host = a->inst.host;
    host->set_error(host, "adamw keeps no low-precision parameter copy; use [optim] plugin = "
                    "adamw_fused for master weights");
    return GB_ERR_UNSUPPORTED;
}

/* step() of a CPU AdamW: checks the step, then queues `compute` with a copy of it. */
static inline gb_status adamw_cpu_step(const adamw_base *a, const gb_optim_step_args *args,
                                       int writes_lowp, gb_optim_compute_fn compute)
{
    if (!a)
        return GB_ERR_INVALID_ARG;
    gb_status status = adamw_check_step_args(a, args, writes_lowp);
    if (status != GB_OK)
        return status;
    return gb_optim_queue_step(a->inst.host, &a->inst.device, compute, a, args);
}

/* grad_norm_sq's check of its arguments. */
static inline gb_status adamw_check_norm_args(const adamw_base *a, const float *out,
                                              const float *grads, int64_t n)
{
    if (out && n >= 0 && (n == 0 || grads))
        return GB_OK;
    const gb_host *host = a->inst.host;
    host->set_error(host, "grad_norm_sq needs an output, n >= 0 (got %lld) and gradients",
                    (long long)n);
    return GB_ERR_INVALID_ARG;
}

#endif /* GB_PLUGINS_OPTIM_ADAMW_INSTANCE_H */
