/* The memory of a plugin instance, as every create() of this tree takes it: zeroed, from
 * the host, with a message naming the plugin when it does not come. Header-only; compiles
 * as C and as C++ (the CUDA plugins' host code).
 */
#ifndef GEARBOX_KERNELS_PLUGIN_INSTANCE_H
#define GEARBOX_KERNELS_PLUGIN_INSTANCE_H

#include <string.h>

#include "gearbox/plugin.h"

/* `bytes` of zeroed host memory for an instance of `plugin`; NULL, with the host told,
 * when it runs out. */
static inline void *gb_instance_alloc(const gb_host *host, size_t bytes, const char *plugin)
{
    void *p = host->alloc(host, bytes);
    if (!p) {
        host->set_error(host, "cannot allocate the %s instance (%zu bytes)", plugin, bytes);
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

#endif /* GEARBOX_KERNELS_PLUGIN_INSTANCE_H */
