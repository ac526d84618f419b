/* What every precision plugin of this tree does the same way: an instance whose first
 * field is its host, created and destroyed through that host, eligible on any device
 * unless the plugin says otherwise, and a policy of one compute dtype.
 *
 * Header-only. A plugin's instance struct must start with `const gb_host *host`.
 */
#ifndef GB_PRECISION_POLICY_PLUGIN_H
#define GB_PRECISION_POLICY_PLUGIN_H

#include "gearbox/precision.h"
#include "gearbox/toolkit/instance.h"

/* An instance of `plugin` of `size` bytes from the host, zeroed, its host field set;
 * NULL (with the host told why) when memory runs out. */
static inline void *policy_instance_new(const gb_host *host, size_t size, const char *plugin)
{
    const gb_host **p = gb_plugin_instance_alloc(host, size, plugin);
    if (p)
        *p = host;
    return p;
}

/* destroy() for any instance made by policy_instance_new. */
static inline void policy_instance_destroy(void *self)
{
    const gb_host **p = self;
    if (p)
        (*p)->free(*p, p);
}

/* create() of a policy with no options and no state beyond its host. */
static inline gb_status policy_create_plain(const gb_host *host, const gb_value *options,
                                            const gb_device_ctx *device, void **self)
{
    (void)options;
    (void)device;
    if (!host || !self)
        return GB_ERR_INVALID_ARG;
    *self = policy_instance_new(host, sizeof host, "precision");
    return *self ? GB_OK : GB_ERR_NO_MEMORY;
}

/* GB_OK when a call's required pointer `arg` is set; else GB_ERR_INVALID_ARG, with the
 * host of instance `self` told `what` is missing. */
static inline gb_status policy_require(void *self, const void *arg, const char *what)
{
    const gb_host **p = self;
    if (arg)
        return GB_OK;
    (*p)->set_error(*p, "%s", what);
    return GB_ERR_INVALID_ARG;
}

/* eligible() of a policy that runs on every device: yes, with no reason. */
static inline int policy_eligible_anywhere(void *self, const gb_device_ctx *device,
                                           char *reason, size_t reason_cap)
{
    (void)self;
    (void)device;
    if (reason && reason_cap > 0)
        reason[0] = '\0';
    return 1;
}

/* Writes the ABI 1.0 fields of a policy computing in `dtype` (which every caller's
 * struct_size covers, docs/abi.md); GB_ERR_INVALID_ARG without an output struct. */
static inline gb_status policy_write(void *self, gb_precision_policy *out, gb_dtype dtype,
                                     int master_weights)
{
    const gb_host **p = self;
    if (!out) {
        if (p)
            (*p)->set_error(*p, "policy: no output struct");
        return GB_ERR_INVALID_ARG;
    }
    out->activation_dtype = dtype;
    out->matmul_dtype = dtype;
    out->param_dtype = dtype;
    out->master_weights = master_weights;
    return GB_OK;
}

#endif /* GB_PRECISION_POLICY_PLUGIN_H */
