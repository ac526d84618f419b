/* A plugin instance: the plugin, its section's schema and values, and the host table it
 * is created with (logging, errors, allocation), which routes each plugin's messages to
 * the engine under the plugin's name. The runtime binds one per kind; `attn = auto`, the
 * conformance kit and the benchmarks bind their own. */
#ifndef GB_CORE_INSTANCE_H
#define GB_CORE_INSTANCE_H

#include "gearbox/plugin.h"
#include "gearbox/engine/config.h"
#include "gearbox/engine/diag.h"
#include "gearbox/engine/loader.h"

/* One plugin instance and the host table it was given. */
typedef struct gb_instance {
    const gb_plugin *plugin;
    gb_option *schema;    /* `plugin` followed by the plugin's own options */
    gb_value *values;     /* parallel to schema */
    int n_core;           /* the core's keys at the head of schema (plugin; a device's
                             ordinal, an optimizer's shard_state) */
    gb_host host;
    char error[1024];     /* the plugin's last set_error message */
    void *self;           /* NULL until created */
} gb_instance;

/* Binds `plugin` to `inst`: the section's schema (`plugin`, defaulting to plugin_key, then
 * the plugin's keys), the values of its section in `cfg` validated against it, and the
 * host table for `threads`. Returns the number of problems added to `diag`. */
int gb_instance_bind(gb_instance *inst, const gb_plugin *plugin, gb_config *cfg,
                     const char *plugin_key, int threads, gb_diag *diag);
/* The plugin's own option values, parallel to its option table: what create() gets. */
const gb_value *gb_instance_options(const gb_instance *inst);
/* A host table with the ABI version, the core's allocator (64-byte aligned, sizes rounded
 * up to 64) and `threads`; log, set_error and core_private are left NULL for the caller. */
void gb_host_init(gb_host *host, int threads);
/* Frees what gb_instance_bind allocated (the caller destroys inst->self first). */
void gb_instance_unbind(gb_instance *inst);

/* Reports a failed plugin call ("plugin attn/math (PATH): forward failed: MESSAGE") as an
 * error (report.h), with the message of another plugin set since the last report (the queued work
 * that made a device call fail), and returns -1, so callers can
 * `return gb_call_failed(...)`. */
int gb_call_failed(const gb_instance *inst, gb_status status, const char *what);

/* Forgets the plugins' messages so far (those of plugins tried and passed over while
 * starting), so a later failure is not blamed on them. */
void gb_instance_forget_errors(void);

/* Wraps a plugin call whose failure ends the current function with -1. */
#define GB_CALL(inst, what, call)                               \
    do {                                                        \
        gb_status st_ = (call);                                 \
        if (st_ != GB_OK)                                       \
            return gb_call_failed((inst), st_, (what));         \
    } while (0)

#endif
