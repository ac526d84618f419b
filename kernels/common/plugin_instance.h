/* The start of a plugin instance, as every create() of this tree makes it: zeroed memory
 * from the host, a message naming the plugin when it does not come, and a head holding
 * the host and the device the plugin queues its work on. Header-only; compiles as C and
 * as C++ (the CUDA plugins' host code).
 */
#ifndef GEARBOX_KERNELS_PLUGIN_INSTANCE_H
#define GEARBOX_KERNELS_PLUGIN_INSTANCE_H

#include <string.h>

#include "gearbox/device.h"
#include "gearbox/plugin.h"

/* The head of an instance: its own fields follow. */
typedef struct gb_instance {
    const gb_host *host;
    gb_device_ctx device;   /* the device given to create(): where its work queues */
} gb_instance;

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

/* Keeps the device a plugin got at create(): the fields its struct_size covers, the rest
 * zero; all zero without a device. */
static inline void gb_keep_device(gb_device_ctx *kept, const gb_device_ctx *device)
{
    memset(kept, 0, sizeof *kept);
    if (!device)
        return;
    size_t n = device->struct_size < sizeof *kept ? device->struct_size : sizeof *kept;
    memcpy(kept, device, n);
    kept->struct_size = n;
}

/* *self = a zeroed instance of `bytes` (a gb_instance, then the plugin's fields) with its
 * head filled. */
static inline gb_status gb_instance_new(const gb_host *host, const gb_device_ctx *device,
                                        const char *plugin, size_t bytes, void **self)
{
    gb_instance *a = (gb_instance *)gb_instance_alloc(host, bytes, plugin);
    if (!a)
        return GB_ERR_NO_MEMORY;
    a->host = host;
    gb_keep_device(&a->device, device);
    *self = a;
    return GB_OK;
}

static inline void gb_instance_destroy(void *self)
{
    gb_instance *a = (gb_instance *)self;
    if (a)
        a->host->free(a->host, a);
}

#endif /* GEARBOX_KERNELS_PLUGIN_INSTANCE_H */
