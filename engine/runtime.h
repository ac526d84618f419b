/* The runtime: one instance of each plugin kind, chosen by the config, plus the host
 * services handed to them. Resolution (finding plugins and validating every section)
 * happens before anything is created, so a broken config fails before any work. */
#ifndef GB_CORE_RUNTIME_H
#define GB_CORE_RUNTIME_H

#include "gearbox/attn.h"
#include "gearbox/comm.h"
#include "gearbox/device.h"
#include "gearbox/optim.h"
#include "gearbox/precision.h"
#include "config.h"
#include "diag.h"
#include "instance.h"
#include "loader.h"
#include "settings.h"

typedef struct gb_runtime {
    gb_config *cfg;       /* not owned */
    gb_loader *loader;
    gb_settings settings;
    uint32_t device_bits;     /* what plugins' `devices` bits are matched against: the
                                 device's fixed bit, if any, and GB_DEVICE_ANY_HOST when its
                                 buffers are host memory (gb_device_match_bits) */
    gb_device_desc device;    /* what the device says it is (describe(), ABI 1.6; from its
                                 fixed bit for a device built before) */
    gb_device_ops *dev_core;  /* the device's vtable as the core calls it (owned; `dev`) */
    gb_precision_ops *precision_core;  /* the precision plugin's, by its minor (owned) */
    gb_instance inst[6];  /* indexed by gb_kind */
    gb_device_ctx ctx;
    gb_precision_policy policy;
    /* typed views of inst[k].plugin->desc->ops */
    const gb_device_ops *dev;
    const gb_attn_ops *attn;
    const gb_optim_ops *optim;
    const gb_precision_ops *precision;
    const gb_comm_ops *comm;
} gb_runtime;

/* Resolves settings and plugins and validates every section of `cfg` (which it keeps
 * using; cfg must outlive the runtime). `cli_plugin_path` is --plugin-path (or NULL).
 * Returns 0, or the number of problems reported into `diag`. Creates nothing. */
int gb_runtime_resolve(gb_runtime *rt, gb_config *cfg, const char *cli_plugin_path,
                       gb_diag *diag);
/* Sets the thread count and creates the instances, device first. Returns 0 or -1 with
 * problems reported into `diag`. */
int gb_runtime_start(gb_runtime *rt, gb_diag *diag);
/* Destroys the instances and the loader. Safe on a partly started runtime. */
void gb_runtime_free(gb_runtime *rt);

/* The device index this process uses: [device] ordinal, else the launcher's local rank
 * (LOCAL_RANK from torchrun, OMPI_COMM_WORLD_LOCAL_RANK from Open MPI), else 0. */
int32_t gb_runtime_device_ordinal(const gb_runtime *rt);

#endif
