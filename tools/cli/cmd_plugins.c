/* `gearbox plugins`: what is on the search path, from descriptors alone (like
 * gst-inspect): loading a plugin runs none of its code but the entry function. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gearbox/engine/loader.h"

const gb_cli_spec gb_cli_plugins_spec = {
    .verb = "plugins",
    .usage = "gearbox plugins [KIND] [--plugin-path DIRS]\n"
             "       gearbox plugins show NAME [--plugin-path DIRS]",
    .about =
        "Lists the plugins found on the search path (--plugin-path, GEARBOX_PLUGIN_PATH, the\n"
        "built-in folder): kind, name, version, devices and file. KIND is one of device, attn,\n"
        "optim, precision, comm. `show NAME` (or KIND/NAME when names clash) prints one plugin\n"
        "with every config key: type, default, range or choices, and what it does.\n"
        "Plugins that fail to load are reported with the reason, and the exit status is 1.\n",
    .options = {GB_CLI_OPTION_PLUGIN_PATH},
};

static const char *const type_names[] = {"int", "float", "bool", "string", "enum"};

static void print_option(const gb_option *o)
{
    char range[128] = "";
    if (o->type == GB_OPT_INT || o->type == GB_OPT_FLOAT)
        snprintf(range, sizeof range, "[%g, %g]", o->min, o->max);
    else if (o->type == GB_OPT_ENUM)
        snprintf(range, sizeof range, "%s", o->choices);
    printf("    %-22s %-6s default %-10s %-18s %s\n", o->key, type_names[o->type],
           o->default_value, range, o->help);
}

static void show(const gb_plugin *p)
{
    const gb_plugin_desc *d = p->desc;
    char devices[96];
    gb_plugin_devices(d, devices, sizeof devices);
    printf("%s/%s %s\n  %s\n", gb_kind_name(d->kind), d->name, d->version, d->description);
    printf("  file:    %s\n  devices: %s\n  ABI:     %u.%u\n", p->path, devices, d->abi_major,
           d->abi_minor);
    printf("  config keys, in [%s]:\n", gb_kind_name(d->kind));
    printf("    %-22s %-6s default %-10s %-18s %s\n", "plugin", "string", d->name, "",
           "selects this plugin");
    for (size_t i = 0; i < d->n_options; i++)
        print_option(&d->options[i]);
}

static int matches(const gb_plugin *p, const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash)
        return strcmp(p->desc->name, name) == 0;
    return strncmp(gb_kind_name(p->desc->kind), name, (size_t)(slash - name)) == 0 &&
           strlen(gb_kind_name(p->desc->kind)) == (size_t)(slash - name) &&
           strcmp(p->desc->name, slash + 1) == 0;
}

static int show_named(const gb_plugin **all, int n, const char *name, gb_loader *loader)
{
    /* one plugin may come as one object per device: only several kinds are ambiguous */
    int hits = 0, several_kinds = 0;
    const gb_plugin *first = NULL;
    for (int i = 0; i < n; i++) {
        if (!matches(all[i], name))
            continue;
        hits++;
        if (!first)
            first = all[i];
        else if (all[i]->desc->kind != first->desc->kind)
            several_kinds = 1;
    }
    if (hits == 0) {
        fprintf(stderr, "gearbox plugins: no plugin named '%s' on the search path %s; "
                "`gearbox plugins` lists them\n", name, gb_loader_path_string(loader));
        return 1;
    }
    if (several_kinds && !strchr(name, '/')) {
        fprintf(stderr, "gearbox plugins: several plugins are named '%s'; say which with "
                "KIND/NAME:\n", name);
        for (int i = 0; i < n; i++)
            if (matches(all[i], name))
                fprintf(stderr, "  %s/%s  %s\n", gb_kind_name(all[i]->desc->kind), name,
                        all[i]->path);
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (matches(all[i], name))
            show(all[i]);
    return 0;
}

/* Whether a plugin listed before all[i] has its kind and name for a device it runs on
 * too: the search takes that one. */
static int shadowed(const gb_plugin **all, int i)
{
    for (int j = 0; j < i; j++)
        if (all[j]->desc->kind == all[i]->desc->kind &&
            ((all[j]->desc->devices & all[i]->desc->devices) ||
             (*gb_plugin_families(all[i]->desc) &&
              strcmp(gb_plugin_families(all[j]->desc), gb_plugin_families(all[i]->desc)) ==
                  0)) &&
            strcmp(all[j]->desc->name, all[i]->desc->name) == 0)
            return 1;
    return 0;
}

void gb_cli_list_plugins(const gb_plugin **all, int n, const char *indent, int header)
{
    static const char *const titles[4] = {"KIND", "NAME", "VERSION", "DEVICES"};
    char (*devices)[96] = calloc((size_t)n + 1, sizeof *devices);
    int width[4] = {0};
    for (int c = 0; header && c < 4; c++)
        width[c] = (int)strlen(titles[c]);
    for (int i = 0; devices && i < n; i++) {
        const gb_plugin_desc *d = all[i]->desc;
        gb_plugin_devices(d, devices[i], sizeof devices[i]);
        const char *cells[4] = {gb_kind_name(d->kind), d->name, d->version, devices[i]};
        for (int c = 0; c < 4; c++)
            if ((int)strlen(cells[c]) > width[c])
                width[c] = (int)strlen(cells[c]);
    }
    if (header)
        printf("%s%-*s  %-*s  %-*s  %-*s  FILE\n", indent, width[0], titles[0], width[1],
               titles[1], width[2], titles[2], width[3], titles[3]);
    for (int i = 0; devices && i < n; i++) {
        const gb_plugin_desc *d = all[i]->desc;
        printf("%s%-*s  %-*s  %-*s  %-*s  %s%s\n", indent, width[0], gb_kind_name(d->kind),
               width[1], d->name, width[2], d->version, width[3], devices[i], all[i]->path,
               shadowed(all, i) ? " (not used: the same name is found first above)" : "");
    }
    free(devices);
}

int gb_cmd_plugins(int argc, char **argv)
{
    const char *plugin_path = NULL, *kind_name = NULL, *show_name = NULL;
    int show = 0;
    gb_cli_parser p;
    gb_cli_begin(&p, &gb_cli_plugins_spec, argc, argv);
    for (int opt; (opt = gb_cli_next(&p)) != GB_CLI_END;) {
        if (opt == GB_CLI_EXIT)
            return p.status;
        if (opt != GB_CLI_OPERAND)
            plugin_path = p.value;
        else if (show && !show_name)
            show_name = p.value;
        else if (!show && strcmp(p.value, "show") == 0)
            show = 1;
        else if (!show && !kind_name && gb_kind_from_name(p.value))
            kind_name = p.value;
        else
            return gb_cli_usage_error("plugins", "unexpected argument %s (expected KIND, or "
                                      "show NAME)", p.value);
    }
    if (show && !show_name)
        return gb_cli_usage_error("plugins", "show needs a NAME (or KIND/NAME)");
    gb_loader *loader = gb_loader_new();
    gb_loader_add_path(loader, plugin_path);
    gb_loader_add_path(loader, getenv("GEARBOX_PLUGIN_PATH"));
    gb_loader_add_default_path(loader);
    gb_diag diag = {0};
    const gb_plugin **all = NULL;
    int n = gb_loader_scan(loader, kind_name ? gb_kind_from_name(kind_name) : 0, &all, &diag);
    int rc = 0;
    if (show_name)
        rc = show_named(all, n, show_name, loader);
    else
        gb_cli_list_plugins(all, n, "", 1);
    if (!show_name && n == 0)
        printf("(no plugins found; search path: %s)\n", gb_loader_path_string(loader));
    gb_diag_print(&diag, stderr);
    rc |= diag.count > 0;
    gb_diag_clear(&diag);
    free(all);
    gb_loader_free(loader);
    return rc;
}
