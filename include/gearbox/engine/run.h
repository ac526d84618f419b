/* A run's runtime: the config's plugins found, validated and created, one instance of
 * each kind (device, attn, optim, precision, comm), with the settings of the engine's own
 * sections. The handle is opaque; the accessors below are the contract programs read it
 * through (the engine's own code sees the struct in engine/runtime.h).
 *
 * Life of a handle: gb_runtime_open (finds the plugins and validates every section;
 * creates nothing, so a broken config fails before any work), gb_runtime_start (creates
 * the instances, device first), then gb_runtime_close, which is safe before or after
 * starting. */
#ifndef GB_ENGINE_RUN_H
#define GB_ENGINE_RUN_H

#include <stdint.h>

#include "gearbox/attn.h"
#include "gearbox/comm.h"
#include "gearbox/device.h"
#include "gearbox/optim.h"
#include "gearbox/precision.h"
#include "gearbox/engine/config.h"
#include "gearbox/engine/diag.h"
#include "gearbox/engine/instance.h"
#include "gearbox/engine/loader.h"
#include "gearbox/engine/settings.h"

typedef struct gb_runtime gb_runtime;

/* Resolves settings and plugins and validates every section of `cfg` (which the runtime
 * keeps using: cfg must outlive it); `cli_plugin_path` is --plugin-path (or NULL).
 * Creates nothing. NULL after reporting every problem into `diag`. */
gb_runtime *gb_runtime_open(gb_config *cfg, const char *cli_plugin_path, gb_diag *diag);
/* Sets the thread count and creates the instances, device first. Returns 0 or -1 with
 * problems reported into `diag`. */
int gb_runtime_start(gb_runtime *rt, gb_diag *diag);
/* Destroys the instances and the loader and frees `rt` (NULL is ignored). */
void gb_runtime_close(gb_runtime *rt);

/* The settings of the engine's sections, resolved (owned by the runtime). */
const gb_settings *gb_runtime_settings(const gb_runtime *rt);
/* The loader the plugins came from (its search path names where they were looked for). */
gb_loader *gb_runtime_loader(const gb_runtime *rt);
/* The instance bound to `kind` (GB_KIND_DEVICE ... GB_KIND_COMM): its plugin, and its
 * `self` once started. Owned by the runtime. */
gb_instance *gb_runtime_instance(gb_runtime *rt, gb_kind kind);
/* The vtables of the bound plugins. */
const gb_device_ops *gb_runtime_device_ops(const gb_runtime *rt);
const gb_attn_ops *gb_runtime_attn_ops(const gb_runtime *rt);
const gb_optim_ops *gb_runtime_optim_ops(const gb_runtime *rt);
/* Where the device instance runs (host access, streams), valid after gb_runtime_start. */
const gb_device_ctx *gb_runtime_device_ctx(const gb_runtime *rt);
/* The precision policy the precision plugin chose (dtypes, TF32, loss scaling), valid
 * after gb_runtime_start. */
const gb_precision_policy *gb_runtime_policy(const gb_runtime *rt);
/* What the device plugin says it is (describe(), ABI 1.6; from its fixed bit for a device
 * built before). Owned by the runtime. */
const gb_device_desc *gb_runtime_device(const gb_runtime *rt);

/* The device index this process uses: [device] ordinal, else the launcher's local rank
 * (LOCAL_RANK from torchrun, OMPI_COMM_WORLD_LOCAL_RANK from Open MPI), else 0. */
int32_t gb_runtime_device_ordinal(const gb_runtime *rt);

#endif
