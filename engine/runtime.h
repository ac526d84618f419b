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
#include "loader.h"
#include "settings.h"

/* One plugin instance and the host table it was given. */
typedef struct gb_instance {
    const gb_plugin *plugin;
    gb_option *schema;    /* `plugin` followed by the plugin's own options */
    gb_value *values;     /* parallel to schema */
    int n_core;           /* the core's keys at the head of schema (plugin; ordinal) */
    gb_host host;
    char error[1024];     /* the plugin's last set_error message */
    void *self;           /* NULL until created */
} gb_instance;

typedef struct gb_runtime {
    gb_config *cfg;       /* not owned */
    gb_loader *loader;
    gb_settings settings;
    uint32_t device_bit;
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

/* Binds `plugin` to `inst`: the section's schema (`plugin`, defaulting to plugin_key, then
 * the plugin's keys), the values of its section in `cfg` validated against it, and the
 * host table for `threads`. Returns the number of problems added to `diag`. */
int gb_instance_bind(gb_instance *inst, const gb_plugin *plugin, gb_config *cfg,
                     const char *plugin_key, int threads, gb_diag *diag);
/* The plugin's own option values, parallel to its option table: what create() gets. */
const gb_value *gb_instance_options(const gb_instance *inst);
/* The device index this process uses: [device] ordinal, else the launcher's local rank
 * (LOCAL_RANK from torchrun, OMPI_COMM_WORLD_LOCAL_RANK from Open MPI), else 0. */
int32_t gb_runtime_device_ordinal(const gb_runtime *rt);

/* Frees what gb_instance_bind allocated (the caller destroys inst->self first). */
void gb_instance_unbind(gb_instance *inst);

/* `[attn] plugin = auto`: creates every attention plugin on the search path that runs on
 * the device, asks each whether it can run this run's problem, times forward+backward of
 * the eligible ones on it, binds the fastest to rt->inst[GB_KIND_ATTN] and prints the
 * choice with the reason every other one was passed over. 0, or -1 with diag. */
int gb_attn_auto(gb_runtime *rt, gb_diag *diag);

/* Reports a failed plugin call ("plugin attn/math (PATH): forward failed: MESSAGE") on
 * stderr, with the message of another plugin set since the last report (the queued work
 * that made a device call fail), and returns -1, so callers can
 * `return gb_call_failed(...)`. */
int gb_call_failed(const gb_instance *inst, gb_status status, const char *what);

/* Forgets the plugins' messages so far (those of plugins tried and passed over while
 * starting), so a later failure is not blamed on them. */
void gb_runtime_forget_errors(void);

/* Wraps a plugin call whose failure ends the current function with -1. */
#define GB_CALL(inst, what, call)                               \
    do {                                                        \
        gb_status st_ = (call);                                 \
        if (st_ != GB_OK)                                       \
            return gb_call_failed((inst), st_, (what));         \
    } while (0)

#endif
