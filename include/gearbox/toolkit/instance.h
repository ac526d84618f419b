/* gearbox/toolkit/instance.h: the start of a plugin instance, as every create() of
 * gearbox's own plugins makes it: zeroed memory from the host, a message naming the
 * plugin when it does not come, and a head (gb_plugin_instance) holding the host and the
 * device the plugin queues its work on. It is the plugin's side of an instance; the
 * engine's record of a loaded plugin is another struct, gb_instance
 * (gearbox/engine/instance.h), which plugins never see.
 *
 * Part of the plugin toolkit (docs/plugin-guide.md): header-only helpers installed beside
 * the ABI headers but outside the ABI, compiled into each plugin, so a plugin still links
 * nothing of gearbox. Compiles as C and as C++ (the CUDA plugins' host code).
 */
#ifndef GEARBOX_TOOLKIT_INSTANCE_H
#define GEARBOX_TOOLKIT_INSTANCE_H

#include <string.h>

#include "gearbox/device.h"
#include "gearbox/plugin.h"

/* The head of an instance: its own fields follow. */
typedef struct gb_plugin_instance {
    const gb_host *host;
    gb_device_ctx device;   /* the device given to create(): where its work queues */
} gb_plugin_instance;

/* `bytes` of zeroed host memory for an instance of `plugin`; NULL, with the host told,
 * when it runs out. */
static inline void *gb_plugin_instance_alloc(const gb_host *host, size_t bytes, const char *plugin)
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
static inline void gb_plugin_keep_device(gb_device_ctx *kept, const gb_device_ctx *device)
{
    memset(kept, 0, sizeof *kept);
    if (!device)
        return;
    size_t n = device->struct_size < sizeof *kept ? device->struct_size : sizeof *kept;
    memcpy(kept, device, n);
    kept->struct_size = n;
}

/* *self = a zeroed instance of `bytes` (a gb_plugin_instance, then the plugin's fields) with its
 * head filled. */
static inline gb_status gb_plugin_instance_new(const gb_host *host, const gb_device_ctx *device,
                                               const char *plugin, size_t bytes, void **self)
{
    gb_plugin_instance *a = (gb_plugin_instance *)gb_plugin_instance_alloc(host, bytes, plugin);
    if (!a)
        return GB_ERR_NO_MEMORY;
    a->host = host;
    gb_plugin_keep_device(&a->device, device);
    *self = a;
    return GB_OK;
}

static inline void gb_plugin_instance_destroy(void *self)
{
    gb_plugin_instance *a = (gb_plugin_instance *)self;
    if (a)
        a->host->free(a->host, a);
}

#endif /* GEARBOX_TOOLKIT_INSTANCE_H */
