/* The plugin loader: finds plugin shared objects on an explicit search path, dlopen()s
 * them, and checks their descriptors before anything else touches them.
 *
 * Search path, in order: directories given with --plugin-path, then GEARBOX_PLUGIN_PATH,
 * then [run] plugin_path from the config, then the build tree (when gearbox runs from it)
 * or the installed plugin directory. The working directory is never searched (unless
 * named). In each directory a plugin is looked for at its top and in KIND/NAME/ below it
 * (the build tree's layout), nowhere deeper. The first hit wins; a plugin of the same name
 * further down the path is reported as not loaded. A plugin file, or a folder from its
 * own up to the search directory, that others than its owner may write is refused.
 *
 * File names follow one scheme: <kind>-<name>-<family>.so for code built per device
 * family (a device's family is what it describes itself as, ABI 1.6; code built for any
 * host-memory device is also found under another family's name, see gb_loader_find_for),
 * <kind>-<name>.so for device-independent plugins, and device-<name>.so for devices.
 * A config may also name a plugin by path (`plugin = /opt/x/attn-mine-cpu.so`).
 */
#ifndef GB_CORE_LOADER_H
#define GB_CORE_LOADER_H

#include "gearbox/device.h"
#include "gearbox/plugin.h"
#include "gearbox/engine/diag.h"

typedef struct gb_plugin {
    char *path;                  /* the file it was loaded from (absolute) */
    void *handle;                /* dlopen handle, closed by gb_loader_free */
    const gb_plugin_desc *desc;  /* validated descriptor */
} gb_plugin;

typedef struct gb_loader gb_loader;

gb_loader *gb_loader_new(void);
void gb_loader_free(gb_loader *loader);

/* Appends the ':'-separated directories of `dirs` (NULL or "" adds nothing; a folder
 * already on the path is not added again). */
void gb_loader_add_path(gb_loader *loader, const char *dirs);
/* Appends the build tree's or the installed plugin directory, whichever applies. */
void gb_loader_add_default_path(gb_loader *loader);
/* With allow 1, plugin files and folders writable by others than their owner are loaded
 * ([run] allow_writable_plugins); by default they are refused. */
void gb_loader_allow_writable(gb_loader *loader, int allow);
/* The search path as one ':'-separated string, for messages. */
const char *gb_loader_path_string(gb_loader *loader);

/* Loads and validates the shared object at `path` (once; later calls return the same
 * plugin). On failure adds a message naming the file to `diag` and returns NULL. */
const gb_plugin *gb_loader_open(gb_loader *loader, const char *path, gb_diag *diag);

/* Finds the plugin of `kind` called `name` for `device` (a GB_DEVICE_* bit; ignored for
 * devices themselves). `name` may be a path. On failure explains (listing the plugins of
 * that kind that were found, and the search path) and returns NULL. */
const gb_plugin *gb_loader_find(gb_loader *loader, gb_kind kind, const char *name,
                                uint32_t device, gb_diag *diag);

/* The same for a device described as data (ABI 1.6): plugin files for it are named
 * <kind>-<name>-<family>.so; `device` is what plugins' `devices` bits are matched against
 * (gb_device_match_bits), `family` what their families are (ABI 1.8). Where neither file
 * name is found, the first `<kind>-<name>-*.so` that runs on the device is taken (so a
 * GB_DEVICE_ANY_HOST plugin serves a host-memory device of any family); a plugin that
 * does not run there is refused, naming its families and the device's. */
const gb_plugin *gb_loader_find_for(gb_loader *loader, gb_kind kind, const char *name,
                                    const char *family, uint32_t device, gb_diag *diag);

/* What plugins' `devices` bits are matched against for a device: its own fixed bits, and
 * GB_DEVICE_ANY_HOST when its buffers are host memory. */
uint32_t gb_device_match_bits(uint32_t device_bits, const gb_device_desc *device);
/* Whether a plugin runs on the device of `family` whose match bits are `device_bits`: by
 * its bits, or (ABI 1.8) by naming the family in its families. */
int gb_plugin_runs_on(const gb_plugin_desc *desc, const char *family, uint32_t device_bits);
/* The families a plugin names (ABI 1.8), ','-separated; "" for none or an older plugin. */
const char *gb_plugin_families(const gb_plugin_desc *desc);
/* Writes where a plugin runs, for lists and messages: its bits' names (gb_device_list)
 * and the families it names, ','-separated. */
void gb_plugin_devices(const gb_plugin_desc *desc, char *buf, size_t cap);
/* What a device built before ABI 1.6 says of itself, from its fixed bit (docs/abi.md). */
void gb_device_describe_fixed(uint32_t device_bits, gb_device_desc *out);
/* A copy of a plugin's vtable holding exactly the entries its ABI minor has (zero beyond,
 * struct_size that minor's size), so that the minor alone decides which entries exist.
 * NULL when out of memory; free() it. */
void *gb_loader_vtable(const gb_plugin *plugin);
/* A copy of a device plugin's vtable as the core calls it: exactly the entries its ABI
 * minor has (zero beyond), with the core's stream group for a synchronous device whose
 * buffers are host memory. NULL, with the reason in diag, for a device that leaves the
 * group out but may not. free() it. */
gb_device_ops *gb_device_ops_for_core(const gb_plugin *device, const gb_device_desc *desc,
                                      gb_diag *diag);

/* Loads every plugin file on the search path (of `kind`, or all kinds when kind is 0).
 * Files that fail to load are reported into `diag` and skipped. */
int gb_loader_scan(gb_loader *loader, gb_kind kind, const gb_plugin ***out, gb_diag *diag);

/* The plugin's GB_CAP_* bits: GB_CAPS_UNDECLARED when it declared none (built with
 * GB_PLUGIN_DEFINE, or for ABI 1.0/1.1). */
uint32_t gb_plugin_caps(const gb_plugin_desc *desc);
/* GB_DTYPE_BIT() of each dtype it declared; 0 when undeclared. */
uint32_t gb_plugin_dtypes(const gb_plugin_desc *desc);

/* "device", "attn", ... ; NULL for an unknown kind. */
const char *gb_kind_name(gb_kind kind);
/* GB_KIND_* for a name, or 0. */
gb_kind gb_kind_from_name(const char *name);
/* The family a fixed device bit names ("cpu", "cuda"; the lowest set bit decides),
 * "host-memory" for GB_DEVICE_ANY_HOST alone, "none" for 0. */
const char *gb_device_name(uint32_t device_bits);
/* Writes a ','-separated list of the device names in `bits` into buf. */
void gb_device_list(uint32_t bits, char *buf, size_t cap);
/* Text of a status code, e.g. "GB_ERR_CONFIG". */
const char *gb_status_name(gb_status status);

#endif
