/* Plugin instances and the host services handed to them; see instance.h. */
#include "instance.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

static gb_instance *instance_of(const gb_host *host)
{
    return (gb_instance *)host->core_private;
}

/* A plugin as the source of a report: "kind/name". */
typedef struct plugin_source {
    char text[320];
} plugin_source;

static plugin_source source_of(const gb_plugin *p)
{
    plugin_source s;
    snprintf(s.text, sizeof s.text, "%s/%s", gb_kind_name(p->desc->kind), p->desc->name);
    return s;
}

/* A plugin's errors and warnings are the run's; its info and debug lines are notes. */
static gb_report_level report_level(gb_log_level level)
{
    return level == GB_LOG_ERROR ? GB_REPORT_ERROR
           : level == GB_LOG_WARN ? GB_REPORT_WARNING : GB_REPORT_NOTE;
}

static void host_log(const gb_host *host, gb_log_level level, const char *fmt, ...)
{
    static const char *const levels[] = {"error", "warning", "info", "debug"};
    const gb_instance *inst = instance_of(host);
    if (level == GB_LOG_DEBUG && !getenv("GEARBOX_DEBUG"))
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    plugin_source source = source_of(inst->plugin);
    gb_report(report_level(level), source.text, "gearbox: %s: %s: %s",
              levels[level <= GB_LOG_DEBUG ? level : 3], source.text, line);
}

/* The newest message a plugin set and not yet shown. Work a plugin queues on the device
 * (gb_device_run_host) fails inside a later call of the device's (sync, event_sync, a
 * copy to the host), whose failure is reported for the device: the queued work's own
 * message is then shown beside it as the cause. */
static const gb_instance *unshown_error;

static void host_set_error(const gb_host *host, const char *fmt, ...)
{
    gb_instance *inst = instance_of(host);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(inst->error, sizeof inst->error, fmt, ap);
    va_end(ap);
    unshown_error = inst;
}

void gb_instance_forget_errors(void)
{
    unshown_error = NULL;
}

static void *host_alloc(const gb_host *host, size_t bytes)
{
    (void)host;
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

static void host_free(const gb_host *host, void *ptr)
{
    (void)host;
    free(ptr);
}

int gb_call_failed(const gb_instance *inst, gb_status status, const char *what)
{
    plugin_source source = source_of(inst->plugin);
    gb_report(GB_REPORT_ERROR, source.text, "gearbox: error: plugin %s (%s): %s failed (%s): %s",
              source.text, inst->plugin->path, what, gb_status_name(status),
              inst->error[0] ? inst->error : "the plugin gave no message");
    const gb_instance *cause = unshown_error;
    if (cause && cause != inst && cause->plugin) {
        source = source_of(cause->plugin);
        gb_report(GB_REPORT_ERROR, source.text, "gearbox: error: it failed in queued work of "
                  "plugin %s (%s): %s", source.text, cause->plugin->path, cause->error);
    }
    unshown_error = NULL;
    return -1;
}

void gb_host_init(gb_host *host, int threads)
{
    *host = (gb_host){
        .struct_size = sizeof(gb_host),
        .abi_major = GB_ABI_MAJOR,
        .abi_minor = GB_ABI_MINOR,
        .alloc = host_alloc,
        .free = host_free,
        .num_threads = threads,
    };
}

static void init_host(gb_instance *inst, int threads)
{
    gb_host_init(&inst->host, threads);
    inst->host.log = host_log;
    inst->host.set_error = host_set_error;
    inst->host.core_private = inst;
}

int gb_instance_bind(gb_instance *inst, const gb_plugin *plugin, gb_config *cfg,
                     const char *plugin_key, int threads, gb_diag *diag)
{
    const gb_plugin_desc *d = plugin->desc;
    inst->plugin = plugin;
    inst->n_core = d->kind == GB_KIND_DEVICE || d->kind == GB_KIND_OPTIM ? 2 : 1;
    size_t n = d->n_options + (size_t)inst->n_core;
    inst->schema = calloc(n, sizeof *inst->schema);
    inst->values = calloc(n, sizeof *inst->values);
    if (!inst->schema || !inst->values) {
        gb_diag_add(diag, "out of memory");
        return 1;
    }
    /* the section's schema: the core's keys (`plugin`, defaulting to what was asked for;
     * for devices `ordinal`, for optimizers `shard_state`), then the plugin's own keys */
    inst->schema[0] = (gb_option){"plugin", GB_OPT_STRING, plugin_key, 0, 0, NULL,
                                  "which plugin of this kind to load"};
    if (d->kind == GB_KIND_DEVICE)
        inst->schema[1] = (gb_option){"ordinal", GB_OPT_INT, "-1", -1, 1024, NULL,
                                      "which device of its kind this process uses; -1: the "
                                      "launcher's local rank (LOCAL_RANK, "
                                      "OMPI_COMM_WORLD_LOCAL_RANK), else 0"};
    if (d->kind == GB_KIND_OPTIM)
        inst->schema[1] = (gb_option){"shard_state", GB_OPT_BOOL, "false", 0, 0, NULL,
                                      "each of the W data-parallel ranks keeps and updates "
                                      "1/W of the optimizer state (ZeRO-1): gradients "
                                      "reduce-scattered, parameters all-gathered (a comm "
                                      "plugin with ABI 1.8's sharded collectives, an "
                                      "optimizer with GB_CAP_RANGE_STEP)"};
    if (d->n_options)
        memcpy(inst->schema + inst->n_core, d->options, d->n_options * sizeof *d->options);
    init_host(inst, threads);
    int problems = gb_config_validate_section(cfg, gb_kind_name(d->kind), inst->schema, n,
                                              NULL, 0, inst->values, diag);
    /* a plugin named by path: the effective config (and so a checkpoint) keeps the file
     * it resolved to, not a path relative to a folder the reader cannot know */
    if (!problems && strchr(plugin_key, '/') &&
        gb_config_set_effective(cfg, gb_kind_name(d->kind), "plugin", plugin_key) != 0) {
        gb_diag_add(diag, "[%s] plugin = %s: the path is longer than a config line (and so "
                    "the config a checkpoint saves) may hold; move the plugin to a shorter one",
                    gb_kind_name(d->kind), plugin_key);
        problems++;
    }
    return problems;
}

const gb_value *gb_instance_options(const gb_instance *inst)
{
    return inst->values + inst->n_core;
}

void gb_instance_unbind(gb_instance *inst)
{
    if (unshown_error == inst)
        unshown_error = NULL;
    free(inst->schema);
    free(inst->values);
    memset(inst, 0, sizeof *inst);
}
