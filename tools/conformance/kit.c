/* The conformance kit's frame: loading the plugin as the core does, the checks every
 * kind shares (file name, schema, instances), the helpers of kit.h, and the dispatch to
 * the checks of the plugin's kind.
 *
 * A plugin is checked through the core's own code wherever the core has it: the loader
 * validates the descriptor, the config module parses the schema's defaults, and
 * gb_instance_bind gives each instance the host table a run would. What is left out: the
 * kit does not protect itself from a plugin that crashes or hangs (a crash ends the run
 * with the rows printed so far), and it checks one process; multi-rank comm runs need
 * the kit started on every rank by the launcher.
 */
#include "conformance.h"
#include "kit.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/attn.h"
#include "gearbox/comm.h"
#include "gearbox/optim.h"
#include "gearbox/precision.h"

struct gb_kit_block {
    gb_kit_block *next;
    void *ptr;
    int on_device;
};

const gb_device_ctx gb_kit_cpu_ctx = {
    .struct_size = sizeof(gb_device_ctx),
    .device = GB_DEVICE_CPU,
};

/* ---- the table ----------------------------------------------------------------------- */

void gb_kit_report(gb_kit *kit, const char *check, gb_kit_result result, const char *fmt, ...)
{
    static const char *const names[] = {"PASS", "FAIL", "UNSUPPORTED"};
    char detail[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    printf("%-44s %-11s %s\n", check, names[result], detail);
    fflush(stdout); /* rows already checked stay visible if the plugin crashes later */
    if (result == GB_KIT_PASS)
        kit->passed++;
    else if (result == GB_KIT_FAIL)
        kit->failed++;
    else
        kit->unsupported++;
}

void gb_kit_report_call(gb_kit *kit, const char *check, const gb_kit_instance *ki,
                        const char *entry, gb_status status)
{
    gb_kit_report(kit, check, status == GB_ERR_UNSUPPORTED ? GB_KIT_UNSUPPORTED : GB_KIT_FAIL,
                  "%s returned %s: %s", entry, gb_status_name(status),
                  ki->inst.error[0] ? ki->inst.error : "the plugin gave no message");
}

/* ---- instances ----------------------------------------------------------------------- */

/* A config of its own holding `overrides` in the plugin's section, validated against
 * the plugin's schema into ki->inst. Returns 0, or -1 with the first problem in
 * ki->inst.error. */
static int bind_defaults(gb_kit *kit, gb_kit_instance *ki, const gb_plugin *plugin,
                         const char *const *overrides, int n_overrides)
{
    memset(ki, 0, sizeof *ki);
    gb_diag diag = {0};
    const char *section = gb_kind_name(plugin->desc->kind);
    ki->cfg = gb_config_load_string("", "gearbox test-plugin", "/", &diag);
    for (int i = 0; ki->cfg && i < n_overrides; i++) {
        char assignment[256];
        snprintf(assignment, sizeof assignment, "%s.%s", section, overrides[i]);
        gb_config_set(ki->cfg, assignment, &diag);
    }
    if (ki->cfg && diag.count == 0)
        gb_instance_bind(&ki->inst, plugin, ki->cfg, plugin->desc->name, kit->threads, &diag);
    ki->ops = plugin->desc->ops;
    int failed = diag.count > 0;
    if (failed) {
        /* the config module words a bad default as the core's own bug; here it is the
         * plugin's */
        const char *message = diag.messages ? diag.messages[0] : "out of memory";
        const char *prefix = "internal error: ";
        if (strncmp(message, prefix, strlen(prefix)) == 0)
            message += strlen(prefix);
        snprintf(ki->inst.error, sizeof ki->inst.error, "%s", message);
    }
    gb_diag_clear(&diag);
    return failed ? -1 : 0;
}

static gb_status create_bound(gb_kit_instance *ki, const gb_device_ctx *ctx)
{
    gb_instance *in = &ki->inst;
    const gb_value *values = gb_instance_options(in);
    switch (in->plugin->desc->kind) {
    case GB_KIND_DEVICE:
        return ((const gb_device_ops *)ki->ops)->create(&in->host, values, &in->self);
    case GB_KIND_ATTN:
        return ((const gb_attn_ops *)ki->ops)->create(&in->host, values, ctx, &in->self);
    case GB_KIND_OPTIM:
        return ((const gb_optim_ops *)ki->ops)->create(&in->host, values, ctx, &in->self);
    case GB_KIND_PRECISION:
        return ((const gb_precision_ops *)ki->ops)->create(&in->host, values, ctx, &in->self);
    case GB_KIND_COMM:
        return ((const gb_comm_ops *)ki->ops)->create(&in->host, values, ctx, &in->self);
    }
    return GB_ERR_INTERNAL;
}

gb_status gb_kit_create(gb_kit *kit, gb_kit_instance *ki, const gb_plugin *plugin,
                        const gb_device_ctx *ctx, const char *const *overrides,
                        int n_overrides)
{
    if (bind_defaults(kit, ki, plugin, overrides, n_overrides))
        return GB_ERR_CONFIG;
    gb_status st = create_bound(ki, ctx);
    if (st != GB_OK)
        ki->inst.self = NULL; /* a failed create owns nothing the kit must destroy */
    return st;
}

void gb_kit_destroy(gb_kit_instance *ki)
{
    if (ki->inst.self) {
        void (*destroy)(void *) = NULL;
        switch (ki->inst.plugin->desc->kind) {
        case GB_KIND_DEVICE: destroy = ((const gb_device_ops *)ki->ops)->destroy; break;
        case GB_KIND_ATTN: destroy = ((const gb_attn_ops *)ki->ops)->destroy; break;
        case GB_KIND_OPTIM: destroy = ((const gb_optim_ops *)ki->ops)->destroy; break;
        case GB_KIND_PRECISION: destroy = ((const gb_precision_ops *)ki->ops)->destroy; break;
        case GB_KIND_COMM: destroy = ((const gb_comm_ops *)ki->ops)->destroy; break;
        }
        destroy(ki->inst.self);
    }
    gb_instance_unbind(&ki->inst);
    gb_config_free(ki->cfg);
    memset(ki, 0, sizeof *ki);
}

int gb_kit_create_tested(gb_kit *kit, gb_kit_instance *ki, const char *check,
                         const char *const *overrides, int n_overrides)
{
    const char *all[64];
    int n = 0;
    for (int i = 0; i < kit->n_sets && n < 64; i++)
        all[n++] = kit->sets[i];
    for (int i = 0; i < n_overrides && n < 64; i++)
        all[n++] = overrides[i];
    gb_status st = gb_kit_create(kit, ki, kit->plugin, &kit->ctx, all, n);
    if (st == GB_OK)
        return 0;
    /* no device here (a GPU plugin on a machine without one) is not the plugin's fault */
    gb_kit_report(kit, check,
                  st == GB_ERR_UNSUPPORTED || st == GB_ERR_DEVICE ? GB_KIT_UNSUPPORTED
                                                                  : GB_KIT_FAIL,
                  "create returned %s: %s", gb_status_name(st),
                  ki->inst.error[0] ? ki->inst.error : "the plugin gave no message");
    gb_kit_destroy(ki);
    return -1;
}

int gb_kit_create_reference(gb_kit *kit, gb_kit_instance *ki, gb_kind kind, const char *name,
                            const char *check, const char *const *overrides, int n_overrides)
{
    gb_diag diag = {0};
    const gb_plugin *p = gb_loader_find(kit->loader, kind, name, GB_DEVICE_CPU, &diag);
    if (!p) {
        gb_kit_report(kit, check, GB_KIT_FAIL, "the reference plugin %s/%s is needed: %s",
                      gb_kind_name(kind), name, diag.count ? diag.messages[0] : "not found");
        gb_diag_clear(&diag);
        memset(ki, 0, sizeof *ki);
        return -1;
    }
    gb_status st = gb_kit_create(kit, ki, p, &gb_kit_cpu_ctx, overrides, n_overrides);
    if (st != GB_OK) {
        gb_kit_report(kit, check, GB_KIT_FAIL, "the reference plugin %s/%s could not start "
                      "(%s): %s", gb_kind_name(kind), name, gb_status_name(st), ki->inst.error);
        gb_kit_destroy(ki);
        return -1;
    }
    return 0;
}

int gb_kit_option(const gb_kit *kit, const char *key)
{
    const gb_plugin_desc *d = kit->plugin->desc;
    for (size_t i = 0; i < d->n_options; i++)
        if (strcmp(d->options[i].key, key) == 0)
            return (int)i;
    return -1;
}

/* ---- memory -------------------------------------------------------------------------- */

static void *remember(gb_kit *kit, void *ptr, int on_device)
{
    gb_kit_block *b = malloc(sizeof *b);
    if (!b) {
        if (on_device)
            kit->dev->free(kit->device.inst.self, ptr);
        else
            free(ptr);
        return NULL;
    }
    *b = (gb_kit_block){kit->blocks, ptr, on_device};
    kit->blocks = b;
    return ptr;
}

static void memory_failed(gb_kit *kit, gb_status st, const char *what, size_t bytes)
{
    kit->memory_status = st;
    snprintf(kit->memory_error, sizeof kit->memory_error, "device %s of %zu bytes returned %s: "
             "%s", what, bytes, gb_status_name(st),
             kit->device.inst.error[0] ? kit->device.inst.error : "the plugin gave no message");
}

void *gb_kit_device_alloc(gb_kit *kit, size_t bytes)
{
    void *ptr = NULL;
    gb_status st = kit->dev->alloc(kit->device.inst.self, bytes, &ptr);
    if (st != GB_OK || !ptr) {
        memory_failed(kit, st == GB_OK ? GB_ERR_NO_MEMORY : st, "alloc", bytes);
        return NULL;
    }
    return remember(kit, ptr, 1);
}

void *gb_kit_host_alloc(gb_kit *kit, size_t bytes)
{
    void *ptr = aligned_alloc(64, (bytes + 64) / 64 * 64);
    if (!ptr) {
        kit->memory_status = GB_ERR_NO_MEMORY;
        snprintf(kit->memory_error, sizeof kit->memory_error, "out of host memory (%zu bytes)",
                 bytes);
        return NULL;
    }
    return remember(kit, ptr, 0);
}

static int copy(gb_kit *kit, void *dst, const void *src, size_t bytes, gb_copy_kind kind)
{
    void *self = kit->device.inst.self;
    gb_status st = kit->dev->sync(self);
    if (st == GB_OK)
        st = kit->dev->copy(self, dst, src, bytes, kind);
    if (st == GB_OK)
        st = kit->dev->sync(self);
    if (st != GB_OK) {
        memory_failed(kit, st, kind == GB_COPY_HOST_TO_DEVICE ? "copy to the device"
                                                              : "copy from the device", bytes);
        return -1;
    }
    return 0;
}

int gb_kit_upload(gb_kit *kit, void *device, const void *host, size_t bytes)
{
    return copy(kit, device, host, bytes, GB_COPY_HOST_TO_DEVICE);
}

int gb_kit_download(gb_kit *kit, void *host, const void *device, size_t bytes)
{
    return copy(kit, host, device, bytes, GB_COPY_DEVICE_TO_HOST);
}

void *gb_kit_device_copy(gb_kit *kit, const void *host, size_t bytes)
{
    void *device = gb_kit_device_alloc(kit, bytes);
    return device && gb_kit_upload(kit, device, host, bytes) == 0 ? device : NULL;
}

void gb_kit_report_memory(gb_kit *kit, const char *check)
{
    gb_kit_report(kit, check,
                  kit->memory_status == GB_ERR_UNSUPPORTED ? GB_KIT_UNSUPPORTED : GB_KIT_FAIL,
                  "%s", kit->memory_error[0] ? kit->memory_error : "out of memory");
}

void gb_kit_release(gb_kit *kit)
{
    while (kit->blocks) {
        gb_kit_block *b = kit->blocks;
        kit->blocks = b->next;
        if (b->on_device)
            kit->dev->free(kit->device.inst.self, b->ptr);
        else
            free(b->ptr);
        free(b);
    }
    kit->memory_status = GB_OK;
    kit->memory_error[0] = '\0';
}

/* ---- data and comparisons ------------------------------------------------------------ */

void gb_kit_fill(gb_rng *rng, float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * gb_rng_uniform(rng));
}

void gb_kit_fill_nan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

int gb_kit_close(const float *got, const float *want, size_t n, double atol, double rtol,
                 char *detail, size_t cap)
{
    double max_abs = 0.0, max_rel = 0.0;
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - (double)want[i]);
        if (!(diff <= atol + rtol * fabs((double)want[i]))) {
            snprintf(detail, cap, "element %zu is %.8g, the reference %.8g (|diff| %.3g > "
                     "%g + %g * |reference|)", i, (double)got[i], (double)want[i], diff, atol,
                     rtol);
            return 0;
        }
        max_abs = diff > max_abs ? diff : max_abs;
        if (want[i] != 0.0f && diff / fabs((double)want[i]) > max_rel)
            max_rel = diff / fabs((double)want[i]);
    }
    snprintf(detail, cap, "max abs diff %.2g, max rel diff %.2g", max_abs, max_rel);
    return 1;
}

size_t gb_kit_bits_differ(const float *a, const float *b, size_t n)
{
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return differ;
}

void gb_kit_append(char *buf, size_t cap, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used && used + 2 < cap) {
        memcpy(buf + used, "; ", 3);
        used += 2;
    }
    if (used + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
}

/* ---- the checks every kind shares ---------------------------------------------------- */

static int is_snake_case(const char *s)
{
    if (!s || !(*s >= 'a' && *s <= 'z'))
        return 0;
    return s[strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_")] == '\0';
}

/* The loader finds `[kind] plugin = NAME` by file name alone (loader.h), so a file named
 * otherwise can only be given by path. */
static void check_file_name(gb_kit *kit)
{
    const gb_plugin_desc *d = kit->plugin->desc;
    const char *kind = gb_kind_name(d->kind);
    const char *slash = strrchr(kit->plugin->path, '/');
    const char *base = slash ? slash + 1 : kit->plugin->path;
    const char *check = "file name";
    if (!is_snake_case(d->name)) {
        gb_kit_report(kit, check, GB_KIT_FAIL, "the name '%s' is not lower_snake_case "
                      "(letters, digits, '_'), which the file-name scheme and config need",
                      d->name);
        return;
    }
    char wanted[3][160];
    int n = 0;
    if (d->kind == GB_KIND_DEVICE) {
        snprintf(wanted[n++], sizeof wanted[0], "device-%s.so", d->name);
    } else {
        uint32_t bits[] = {GB_DEVICE_CPU, GB_DEVICE_CUDA};
        for (int i = 0; i < 2; i++)
            if (d->devices & bits[i])
                snprintf(wanted[n++], sizeof wanted[0], "%s-%s-%s.so", kind, d->name,
                         gb_device_name(bits[i]));
        snprintf(wanted[n++], sizeof wanted[0], "%s-%s.so", kind, d->name);
    }
    for (int i = 0; i < n; i++)
        if (strcmp(base, wanted[i]) == 0) {
            gb_kit_report(kit, check, GB_KIT_PASS, "[%s] plugin = %s finds %s", kind, d->name,
                          base);
            return;
        }
    gb_kit_report(kit, check, GB_KIT_FAIL, "[%s] plugin = %s looks for %s%s%s; this file is "
                  "%s, so it can only be named by its path", kind, d->name, wanted[0],
                  n > 1 ? " or " : "", n > 1 ? wanted[n - 1] : "", base);
}

/* What the loader leaves to this check: key names, ranges and choices that make sense. */
static int schema_problem(const gb_plugin_desc *d, char *why, size_t cap)
{
    for (size_t i = 0; i < d->n_options; i++) {
        const gb_option *o = &d->options[i];
        if (!is_snake_case(o->key)) {
            snprintf(why, cap, "option %zu: key '%s' is not lower_snake_case", i, o->key);
            return 1;
        }
        if (strcmp(o->key, "plugin") == 0) {
            snprintf(why, cap, "key 'plugin' is the core's (it selects the plugin)");
            return 1;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(d->options[j].key, o->key) == 0) {
                snprintf(why, cap, "key '%s' is declared twice", o->key);
                return 1;
            }
        if (!o->help[0]) {
            snprintf(why, cap, "key '%s' has an empty help line", o->key);
            return 1;
        }
        if ((o->type == GB_OPT_INT || o->type == GB_OPT_FLOAT) && !(o->min <= o->max)) {
            snprintf(why, cap, "key '%s': range [%g, %g] is empty", o->key, o->min, o->max);
            return 1;
        }
        if (o->type == GB_OPT_ENUM &&
            (!o->choices[0] || strstr(o->choices, "||") || o->choices[0] == '|' ||
             o->choices[strlen(o->choices) - 1] == '|')) {
            snprintf(why, cap, "key '%s': choices \"%s\" contain an empty choice", o->key,
                     o->choices);
            return 1;
        }
    }
    return 0;
}

static void check_schema(gb_kit *kit)
{
    const gb_plugin_desc *d = kit->plugin->desc;
    const char *check = "config schema and defaults";
    char why[512];
    if (schema_problem(d, why, sizeof why)) {
        gb_kit_report(kit, check, GB_KIT_FAIL, "%s", why);
        return;
    }
    gb_kit_instance ki;
    if (bind_defaults(kit, &ki, kit->plugin, NULL, 0))
        gb_kit_report(kit, check, GB_KIT_FAIL, "%s", ki.inst.error);
    else if (d->n_options == 0)
        gb_kit_report(kit, check, GB_KIT_PASS, "no options");
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "%zu option%s; every default parses and lies "
                      "in its range or choices", d->n_options, d->n_options == 1 ? "" : "s");
    gb_kit_destroy(&ki);
}

/* Plugins are instances (docs/abi.md): A/B runs keep two of one plugin in one process. */
static int check_create(gb_kit *kit)
{
    const char *check = "create with defaults, two instances";
    gb_kit_instance a, b;
    if (gb_kit_create_tested(kit, &a, check, NULL, 0))
        return -1;
    gb_status st = gb_kit_create(kit, &b, kit->plugin, &kit->ctx, NULL, 0);
    if (st != GB_OK)
        gb_kit_report(kit, check, GB_KIT_FAIL, "a second instance could not be created while "
                      "the first lives (%s): %s", gb_status_name(st), b.inst.error);
    else if (a.inst.self && a.inst.self == b.inst.self)
        gb_kit_report(kit, check, GB_KIT_FAIL, "both instances got the same self pointer; "
                      "state must live behind self, not in globals");
    else if (kit->ctx.device)
        gb_kit_report(kit, check, GB_KIT_PASS, "both live at once, on %s",
                      gb_device_name(kit->ctx.device));
    else
        gb_kit_report(kit, check, GB_KIT_PASS, "both live at once");
    gb_kit_destroy(&b);
    gb_kit_destroy(&a);
    return st == GB_OK ? 0 : -1;
}

/* The device the plugin under test runs on, for its memory and its context: the device
 * plugin `name`, or by default cpu when the plugin runs there, else its own device.
 * 0, -1 after a failure, or 1 when the device is not available on this machine. */
static int start_device(gb_kit *kit, const char *name)
{
    const char *check = "device for the checks";
    const gb_plugin *p = kit->plugin;
    uint32_t devices = p->desc->devices;
    /* a plugin for another device, checked where that device's plugin is not installed,
     * is as untestable here as one whose device has no hardware here */
    int chosen = name != NULL;
    if (!name)
        name = gb_device_name(devices & GB_DEVICE_CPU ? GB_DEVICE_CPU : devices);
    if (p->desc->kind != GB_KIND_DEVICE) {
        gb_diag diag = {0};
        p = gb_loader_find(kit->loader, GB_KIND_DEVICE, name, 0, &diag);
        if (!p) {
            int untestable = !chosen && !(devices & GB_DEVICE_CPU);
            gb_kit_report(kit, check, untestable ? GB_KIT_UNSUPPORTED : GB_KIT_FAIL, "%s",
                          diag.count ? diag.messages[0] : "not found");
            gb_diag_clear(&diag);
            return untestable ? 1 : -1;
        }
        if (!(p->desc->devices & devices)) {
            char list[32];
            gb_device_list(devices, list, sizeof list);
            gb_kit_report(kit, check, GB_KIT_FAIL, "the plugin runs on %s, not on the device "
                          "%s; choose one with --device", list, name);
            return -1;
        }
    }
    gb_status st = gb_kit_create(kit, &kit->device, p, NULL, NULL, 0);
    /* a device plugin under test has its context checked among its own checks */
    if (st == GB_OK && p != kit->plugin) {
        kit->ctx.struct_size = sizeof kit->ctx;
        st = ((const gb_device_ops *)kit->device.ops)->context(kit->device.inst.self, &kit->ctx);
    }
    if (st != GB_OK) {
        /* no GPU here is not the plugin's fault: the run counts as skipped */
        int missing = st == GB_ERR_UNSUPPORTED || st == GB_ERR_DEVICE;
        gb_kit_report(kit, check, missing ? GB_KIT_UNSUPPORTED : GB_KIT_FAIL,
                      "device/%s could not start (%s): %s", p->desc->name, gb_status_name(st),
                      kit->device.inst.error[0] ? kit->device.inst.error
                                                : "the plugin gave no message");
        gb_kit_destroy(&kit->device);
        return missing ? 1 : -1;
    }
    kit->dev = kit->device.ops;
    return 0;
}

static void run_kind_checks(gb_kit *kit)
{
    switch (kit->plugin->desc->kind) {
    case GB_KIND_DEVICE: gb_kit_check_device(kit); break;
    case GB_KIND_ATTN: gb_kit_check_attn(kit); break;
    case GB_KIND_OPTIM: gb_kit_check_optim(kit); break;
    case GB_KIND_PRECISION: gb_kit_check_precision(kit); break;
    case GB_KIND_COMM: gb_kit_check_comm(kit); break;
    }
    gb_kit_release(kit);
}

int gb_conformance_run(gb_loader *loader, const char *path, const char *device_name,
                       int threads, const char *const *sets, int n_sets, int strict)
{
    gb_kit kit = {.loader = loader, .threads = threads, .sets = sets, .n_sets = n_sets,
                  .strict = strict};
    printf("%-44s %-11s %s\n", "CHECK", "RESULT", "DETAIL");
    gb_diag diag = {0};
    kit.plugin = gb_loader_open(loader, path, &diag);
    if (!kit.plugin) {
        gb_kit_report(&kit, "load: descriptor, ABI, vtable", GB_KIT_FAIL, "%s",
                      diag.count ? diag.messages[0] : "cannot load");
        gb_diag_clear(&diag);
    } else {
        const gb_plugin_desc *d = kit.plugin->desc;
        char devices[32];
        gb_device_list(d->devices, devices, sizeof devices);
        gb_kit_report(&kit, "load: descriptor, ABI, vtable", GB_KIT_PASS,
                      "%s/%s %s for %s, ABI %u.%u", gb_kind_name(d->kind), d->name, d->version,
                      devices, d->abi_major, d->abi_minor);
        check_file_name(&kit);
        check_schema(&kit);
    }
    int contract_passed = 0, device = kit.plugin ? start_device(&kit, device_name) : -1;
    if (device == 0) {
        if (check_create(&kit) == 0) {
            int before = kit.passed;
            run_kind_checks(&kit);
            contract_passed = kit.passed - before;
        }
        gb_kit_destroy(&kit.device);
    }
    printf("\n%d passed, %d failed, %d unsupported\n", kit.passed, kit.failed, kit.unsupported);
    if (kit.failed == 0 && device == 1) {
        printf("skipped: the plugin's device is not available here\n");
        return GB_CONFORMANCE_SKIPPED;
    }
    if (kit.plugin && kit.failed == 0 && contract_passed == 0)
        printf("not conforming: no check of the %s contract passed\n",
               gb_kind_name(kit.plugin->desc->kind));
    return kit.failed == 0 && contract_passed > 0 ? 0 : 1;
}
