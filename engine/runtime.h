/* The runtime's struct, which the engine's own code reads directly; programs see the
 * handle and accessors of gearbox/engine/run.h. */
#ifndef GB_CORE_RUNTIME_H
#define GB_CORE_RUNTIME_H

#include "gearbox/engine/run.h"
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

/* Resolves into a runtime held by value (gb_runtime_open's work). Returns 0, or the
 * number of problems reported into `diag`. Creates nothing. */
int gb_runtime_resolve(gb_runtime *rt, gb_config *cfg, const char *cli_plugin_path,
                       gb_diag *diag);
/* Destroys the instances and the loader of a runtime held by value (the trainer's, the
 * tests'). Safe on a partly started runtime. */
void gb_runtime_free(gb_runtime *rt);

#endif
