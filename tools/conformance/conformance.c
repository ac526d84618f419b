/* `gearbox test-plugin`'s run (conformance.h): loading the plugin as the core does, the
 * checks every kind shares (file name, schema, instances), then the checks of the
 * plugin's kind (check_KIND.c), all reporting into kit.h's table.
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

#include <stdio.h>
#include <string.h>

/* ---- the checks every kind shares ---------------------------------------------------- */

static int is_snake_case(const char *s)
{
    if (!s || !(*s >= 'a' && *s <= 'z'))
        return 0;
    return s[strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_")] == '\0';
}


/* Whether `base` is <kind>-<name>-<family>.so for a family the plugin names (ABI 1.8),
 * which the loader finds on a device of that family. */
static int family_file(const gb_plugin_desc *d, const char *kind, const char *base)
{
    const char *family = gb_plugin_families(d);
    for (size_t len; *family; family += len + (family[len] == ',')) {
        len = strcspn(family, ",");
        char file[200];
        snprintf(file, sizeof file, "%s-%s-%.*s.so", kind, d->name, (int)len, family);
        if (strcmp(base, file) == 0)
            return 1;
    }
    return 0;
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
        if (strcmp(base, wanted[i]) == 0 || family_file(d, kind, base)) {
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
    if (gb_kit_bind_defaults(kit, &ki, kit->plugin, NULL, 0))
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

/* Whether the plugin under test runs on the started device `dev`, as a run decides it: by
 * the device's description (ABI 1.6; its fixed bit's meaning before), which also gives the
 * context its memory kind. 0, or -1 with the device destroyed. */
static int match_device(gb_kit *kit, const gb_plugin *dev, const char *name, const char *check)
{
    gb_device_desc desc = {.struct_size = sizeof desc};
    gb_status st = GB_OK;
    if (dev->desc->abi_minor >= 6)
        st = kit->dev->describe(&kit->device.inst.host, &desc);
    else
        gb_device_describe_fixed(dev->desc->devices, &desc);
    if (st == GB_OK && gb_plugin_runs_on(kit->plugin->desc, desc.family,
                                         gb_device_match_bits(dev->desc->devices, &desc))) {
        kit->ctx.memory = desc.memory;
        return 0;
    }
    char list[96];
    gb_plugin_devices(kit->plugin->desc, list, sizeof list);
    if (st != GB_OK)
        gb_kit_report_call(kit, check, &kit->device, "describe", st);
    else
        gb_kit_report(kit, check, GB_KIT_FAIL, "the plugin runs on %s, not on the device %s; "
                      "choose one with --device", list, name);
    gb_kit_destroy(&kit->device);
    return -1;
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
    char family[64];  /* a plugin for families alone: the device named like the first */
    snprintf(family, sizeof family, "%.*s", (int)strcspn(gb_plugin_families(p->desc), ","),
             gb_plugin_families(p->desc));
    if (!name)
        name = devices || !family[0]
                   ? gb_device_name(devices & GB_DEVICE_CPU ? GB_DEVICE_CPU : devices)
                   : family;
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
    return p == kit->plugin ? 0 : match_device(kit, p, name, check);
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
        char devices[96];
        gb_plugin_devices(d, devices, sizeof devices);
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
