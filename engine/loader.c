/* Plugin discovery, loading and descriptor validation; see loader.h.
 *
 * Everything a plugin declares is checked here, once, before the core calls into it:
 * ABI major, descriptor and vtable sizes, kind, devices and mandatory vtable entries.
 * Handles stay open until the loader is freed; plugins are never unloaded mid-run.
 */
#include "loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gearbox/attn.h"
#include "gearbox/comm.h"
#include "gearbox/device.h"
#include "gearbox/optim.h"
#include "gearbox/precision.h"
#include "config.h"

#define SCAN_DEPTH 4

struct gb_loader {
    char **dirs;
    int n_dirs;
    char *path_string;
    gb_plugin **plugins;  /* every object opened, by absolute path */
    int n_plugins;
};

static const char *const kind_names[] = {NULL, "device", "attn", "optim", "precision", "comm"};
#define N_KINDS 5

const char *gb_kind_name(gb_kind kind)
{
    return (kind >= 1 && kind <= N_KINDS) ? kind_names[kind] : NULL;
}

gb_kind gb_kind_from_name(const char *name)
{
    for (int k = 1; k <= N_KINDS; k++)
        if (strcmp(kind_names[k], name) == 0)
            return (gb_kind)k;
    return (gb_kind)0;
}

const char *gb_device_name(uint32_t bits)
{
    if (bits & GB_DEVICE_CPU)
        return "cpu";
    if (bits & GB_DEVICE_CUDA)
        return "cuda";
    return "none";
}

void gb_device_list(uint32_t bits, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s", (bits & GB_DEVICE_CPU) ? "cpu" : "",
             (bits & GB_DEVICE_CPU) && (bits & GB_DEVICE_CUDA) ? "," : "",
             (bits & GB_DEVICE_CUDA) ? "cuda" : "");
}

const char *gb_status_name(gb_status status)
{
    static const char *const names[] = {"GB_OK", "GB_ERR_INVALID_ARG", "GB_ERR_CONFIG",
                                        "GB_ERR_UNSUPPORTED", "GB_ERR_NO_MEMORY",
                                        "GB_ERR_DEVICE", "GB_ERR_SYSTEM", "GB_ERR_INTERNAL"};
    return ((unsigned)status < sizeof names / sizeof names[0]) ? names[status] : "unknown status";
}

gb_loader *gb_loader_new(void)
{
    return calloc(1, sizeof(gb_loader));
}

void gb_loader_free(gb_loader *loader)
{
    if (!loader)
        return;
    for (int i = 0; i < loader->n_plugins; i++) {
        dlclose(loader->plugins[i]->handle);
        free(loader->plugins[i]->path);
        free(loader->plugins[i]);
    }
    for (int i = 0; i < loader->n_dirs; i++)
        free(loader->dirs[i]);
    free(loader->plugins);
    free(loader->dirs);
    free(loader->path_string);
    free(loader);
}

static void add_dir(gb_loader *loader, const char *dir, size_t len)
{
    if (len == 0)
        return;
    for (int i = 0; i < loader->n_dirs; i++)
        if (strlen(loader->dirs[i]) == len && strncmp(loader->dirs[i], dir, len) == 0)
            return; /* searching a folder twice finds nothing new */
    char **grown = realloc(loader->dirs, (size_t)(loader->n_dirs + 1) * sizeof *grown);
    if (!grown)
        return;
    loader->dirs = grown;
    loader->dirs[loader->n_dirs++] = strndup(dir, len);
    free(loader->path_string);
    loader->path_string = NULL;
}

void gb_loader_add_path(gb_loader *loader, const char *dirs)
{
    if (!dirs)
        return;
    while (*dirs) {
        const char *colon = strchr(dirs, ':');
        size_t len = colon ? (size_t)(colon - dirs) : strlen(dirs);
        add_dir(loader, dirs, len);
        dirs += len + (colon ? 1 : 0);
    }
}

/* The build tree's plugins when this binary is the one in the build tree, else the
 * installed directory: a build never picks up stale installed plugins, and an installed
 * binary never reaches into a source checkout. The build tree's binary is
 * GB_BUILD_ROOT/tools/gearbox (tools/meson.build). */
void gb_loader_add_default_path(gb_loader *loader)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        char build_tools[PATH_MAX];
        snprintf(build_tools, sizeof build_tools, "%s/tools", GB_BUILD_ROOT);
        char *real_build = realpath(build_tools, NULL);
        int from_build = real_build && strcmp(real_build, exe) == 0;
        free(real_build);
        if (from_build) {
            gb_loader_add_path(loader, GB_BUILD_ROOT "/plugins");
            return;
        }
    }
    gb_loader_add_path(loader, GB_PLUGINS_DIR);
}

const char *gb_loader_path_string(gb_loader *loader)
{
    if (!loader->path_string) {
        size_t len = 1;
        for (int i = 0; i < loader->n_dirs; i++)
            len += strlen(loader->dirs[i]) + 1;
        loader->path_string = calloc(1, len);
        if (!loader->path_string)
            return "(out of memory)";
        for (int i = 0; i < loader->n_dirs; i++) {
            if (i)
                strcat(loader->path_string, ":");
            strcat(loader->path_string, loader->dirs[i]);
        }
        if (loader->n_dirs == 0)
            return "(empty)";
    }
    return loader->path_string;
}

/* The entries of a kind's vtable that may not be NULL, each with the minor version that
 * added it (an entry is checked only for plugins built for that version or later). */
typedef struct mandatory_entry {
    size_t offset;
    const char *name;
    uint16_t since_minor;
} mandatory_entry;

#define ENTRY(type, field) {offsetof(type, field), #field, 0}
#define ENTRY_1_2(type, field) {offsetof(type, field), #field, 2}
static const mandatory_entry device_entries[] = {
    ENTRY(gb_device_ops, create), ENTRY(gb_device_ops, destroy), ENTRY(gb_device_ops, context),
    ENTRY(gb_device_ops, info), ENTRY(gb_device_ops, alloc), ENTRY(gb_device_ops, free),
    ENTRY(gb_device_ops, copy), ENTRY(gb_device_ops, memset_zero), ENTRY(gb_device_ops, sync),
    ENTRY(gb_device_ops, matmul), ENTRY(gb_device_ops, embed_forward),
    ENTRY(gb_device_ops, embed_backward), ENTRY(gb_device_ops, layernorm_forward),
    ENTRY(gb_device_ops, layernorm_backward), ENTRY(gb_device_ops, gelu_forward),
    ENTRY(gb_device_ops, gelu_backward), ENTRY(gb_device_ops, add),
    ENTRY(gb_device_ops, bias_backward), ENTRY(gb_device_ops, cross_entropy),
    ENTRY(gb_device_ops, sum_squares), ENTRY_1_2(gb_device_ops, alloc_host),
    ENTRY_1_2(gb_device_ops, free_host), ENTRY_1_2(gb_device_ops, copy_async),
    ENTRY_1_2(gb_device_ops, stream_create), ENTRY_1_2(gb_device_ops, stream_destroy),
    ENTRY_1_2(gb_device_ops, event_create), ENTRY_1_2(gb_device_ops, event_destroy),
    ENTRY_1_2(gb_device_ops, event_record), ENTRY_1_2(gb_device_ops, stream_wait_event),
    ENTRY_1_2(gb_device_ops, event_query), ENTRY_1_2(gb_device_ops, event_sync),
    ENTRY_1_2(gb_device_ops, enqueue_host)};
static const mandatory_entry attn_entries[] = {
    ENTRY(gb_attn_ops, create), ENTRY(gb_attn_ops, destroy), ENTRY(gb_attn_ops, eligible),
    ENTRY(gb_attn_ops, memory), ENTRY(gb_attn_ops, forward), ENTRY(gb_attn_ops, backward)};
static const mandatory_entry optim_entries[] = {
    ENTRY(gb_optim_ops, create), ENTRY(gb_optim_ops, destroy), ENTRY(gb_optim_ops, state_bytes),
    ENTRY(gb_optim_ops, step)};
static const mandatory_entry precision_entries[] = {
    ENTRY(gb_precision_ops, create), ENTRY(gb_precision_ops, destroy),
    ENTRY(gb_precision_ops, eligible), ENTRY(gb_precision_ops, policy)};
static const mandatory_entry comm_entries[] = {
    ENTRY(gb_comm_ops, create), ENTRY(gb_comm_ops, destroy), ENTRY(gb_comm_ops, rank),
    ENTRY(gb_comm_ops, world), ENTRY(gb_comm_ops, all_reduce_start),
    ENTRY(gb_comm_ops, all_reduce_wait), ENTRY(gb_comm_ops, broadcast),
    ENTRY(gb_comm_ops, barrier)};

#define ENTRIES(array) array, (int)(sizeof(array) / sizeof(array[0]))
static const struct {
    const mandatory_entry *entries;
    int n;
} mandatory[N_KINDS + 1] = {
    {NULL, 0},
    {ENTRIES(device_entries)},
    {ENTRIES(attn_entries)},
    {ENTRIES(optim_entries)},
    {ENTRIES(precision_entries)},
    {ENTRIES(comm_entries)},
};

/* The end of a struct as one version left it: the byte after its last field. */
#define END_OF(type, last_field) (offsetof(type, last_field) + sizeof(((type *)0)->last_field))

/* The smallest descriptor and vtables a plugin built for each minor version has; one
 * row per version, so a plugin built for 1.0 or 1.1 keeps loading under every later 1.x.
 * A plugin built for a newer minor than this core knows must have at least the newest
 * row's sizes (the core reads nothing beyond them). */
typedef struct abi_sizes {
    uint16_t minor;
    size_t desc;
    size_t ops[N_KINDS + 1];  /* by gb_kind */
} abi_sizes;

static const abi_sizes abi_versions[] = {
    {0, END_OF(gb_plugin_desc, ops),
     {0, END_OF(gb_device_ops, sum_squares), sizeof(gb_attn_ops), sizeof(gb_optim_ops),
      sizeof(gb_precision_ops), sizeof(gb_comm_ops)}},
    /* 1.1 appended fields to argument structs only */
    {1, END_OF(gb_plugin_desc, ops),
     {0, END_OF(gb_device_ops, sum_squares), sizeof(gb_attn_ops), sizeof(gb_optim_ops),
      sizeof(gb_precision_ops), sizeof(gb_comm_ops)}},
    {2, END_OF(gb_plugin_desc, caps),
     {0, END_OF(gb_device_ops, enqueue_host), sizeof(gb_attn_ops), sizeof(gb_optim_ops),
      sizeof(gb_precision_ops), sizeof(gb_comm_ops)}},
};
#define N_ABI_VERSIONS ((int)(sizeof abi_versions / sizeof abi_versions[0]))

static const abi_sizes *sizes_for(uint16_t minor)
{
    return &abi_versions[minor < N_ABI_VERSIONS ? minor : N_ABI_VERSIONS - 1];
}

uint32_t gb_plugin_caps(const gb_plugin_desc *d)
{
    return d->struct_size >= END_OF(gb_plugin_desc, caps) ? d->caps : GB_CAPS_UNDECLARED;
}

uint32_t gb_plugin_dtypes(const gb_plugin_desc *d)
{
    return d->struct_size >= END_OF(gb_plugin_desc, caps) ? d->dtypes : 0;
}

static int check_option_table(const gb_plugin_desc *d, const char *path, gb_diag *diag)
{
    for (size_t i = 0; i < d->n_options; i++) {
        const gb_option *o = &d->options[i];
        if (!o->key || !o->default_value || !o->help || o->type > GB_OPT_ENUM ||
            (o->type == GB_OPT_ENUM && !o->choices)) {
            gb_diag_add(diag, "plugin %s: option %zu of its config schema is incomplete "
                        "(key, default, help and, for enums, choices are required)", path, i);
            return -1;
        }
    }
    return 0;
}

/* The descriptor and vtable are as large as the plugin's minor version says, and every
 * entry mandatory in that version is set. */
static int check_sizes_and_entries(const gb_plugin_desc *d, const char *path, const char *kind,
                                   gb_diag *diag)
{
    const abi_sizes *want = sizes_for(d->abi_minor);
    if (d->struct_size < want->desc) {
        gb_diag_add(diag, "plugin %s (%s/%s): descriptor is %zu bytes, ABI 1.%u's is %zu; "
                    "rebuild it against gearbox's headers", path, kind, d->name,
                    d->struct_size, d->abi_minor, want->desc);
        return -1;
    }
    size_t ops_size = d->ops ? *(const size_t *)d->ops : 0;
    if (ops_size < want->ops[d->kind]) {
        gb_diag_add(diag, "plugin %s (%s/%s): its %s vtable is %zu bytes, ABI 1.%u needs %zu",
                    path, kind, d->name, kind, ops_size, d->abi_minor, want->ops[d->kind]);
        return -1;
    }
    for (int i = 0; i < mandatory[d->kind].n; i++) {
        const mandatory_entry *e = &mandatory[d->kind].entries[i];
        void *fn;
        if (e->since_minor > d->abi_minor)
            continue;
        memcpy(&fn, (const char *)d->ops + e->offset, sizeof fn);
        if (!fn) {
            gb_diag_add(diag, "plugin %s (%s/%s): mandatory vtable entry %s is NULL", path,
                        kind, d->name, e->name);
            return -1;
        }
    }
    return 0;
}

static int validate_descriptor(const gb_plugin_desc *d, const char *path, gb_diag *diag)
{
    if (!d) {
        gb_diag_add(diag, "plugin %s: %s() returned NULL", path, GB_PLUGIN_ENTRY_NAME);
        return -1;
    }
    if (d->struct_size < abi_versions[0].desc) {
        gb_diag_add(diag, "plugin %s: descriptor is %zu bytes, shorter than ABI 1.0's %zu; "
                    "rebuild it against gearbox's headers", path, d->struct_size,
                    abi_versions[0].desc);
        return -1;
    }
    if (d->abi_major != GB_ABI_MAJOR) {
        gb_diag_add(diag, "plugin %s: built for plugin ABI %u.%u, but this gearbox speaks ABI "
                    "%d.%d; rebuild the plugin against this gearbox's headers", path,
                    d->abi_major, d->abi_minor, GB_ABI_MAJOR, GB_ABI_MINOR);
        return -1;
    }
    const char *kind = gb_kind_name(d->kind);
    if (!kind) {
        gb_diag_add(diag, "plugin %s: unknown kind %d (known: device, attn, optim, "
                    "precision, comm)", path, (int)d->kind);
        return -1;
    }
    if (!d->name || !*d->name || !d->version || !d->description) {
        gb_diag_add(diag, "plugin %s: descriptor lacks a name, version or description", path);
        return -1;
    }
    if (!(d->devices & (GB_DEVICE_CPU | GB_DEVICE_CUDA))) {
        gb_diag_add(diag, "plugin %s (%s/%s): declares no device it runs on", path, kind,
                    d->name);
        return -1;
    }
    if (d->n_options && !d->options) {
        gb_diag_add(diag, "plugin %s: declares %zu options but no option table", path,
                    d->n_options);
        return -1;
    }
    if (check_option_table(d, path, diag))
        return -1;
    return check_sizes_and_entries(d, path, kind, diag);
}

static gb_plugin *already_open(gb_loader *loader, const char *real)
{
    for (int i = 0; i < loader->n_plugins; i++)
        if (strcmp(loader->plugins[i]->path, real) == 0)
            return loader->plugins[i];
    return NULL;
}

const gb_plugin *gb_loader_open(gb_loader *loader, const char *path, gb_diag *diag)
{
    char *real = realpath(path, NULL);
    if (!real) {
        gb_diag_add(diag, "cannot open plugin file %s: %s", path, strerror(errno));
        return NULL;
    }
    gb_plugin *found = already_open(loader, real);
    if (found) {
        free(real);
        return found;
    }
    void *handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        gb_diag_add(diag, "plugin %s was found but could not be loaded: %s", real, dlerror());
        free(real);
        return NULL;
    }
    void *sym = dlsym(handle, GB_PLUGIN_ENTRY_NAME);
    if (!sym) {
        gb_diag_add(diag, "plugin %s does not export the entry symbol %s(); is it a gearbox "
                    "plugin built with GB_PLUGIN_DEFINE?", real, GB_PLUGIN_ENTRY_NAME);
        dlclose(handle);
        free(real);
        return NULL;
    }
    gb_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const gb_plugin_desc *desc = entry();
    gb_plugin **grown = realloc(loader->plugins, (size_t)(loader->n_plugins + 1) * sizeof *grown);
    gb_plugin *p = calloc(1, sizeof *p);
    if (validate_descriptor(desc, real, diag) || !grown || !p) {
        if (grown)
            loader->plugins = grown;
        free(p);
        dlclose(handle);
        free(real);
        return NULL;
    }
    loader->plugins = grown;
    p->path = real;
    p->handle = handle;
    p->desc = desc;
    loader->plugins[loader->n_plugins++] = p;
    return p;
}

/* dir/name into buf; -1 when it does not fit. */
static int join_path(char *buf, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

/* Depth-first search of `dir` for a file called `file`; the first hit (sorted order is
 * not needed: names are unique per directory level) is copied into out. */
static int find_file(const char *dir, const char *file, int depth, char *out, size_t cap)
{
    char candidate[PATH_MAX];
    struct stat st;
    if (join_path(candidate, sizeof candidate, dir, file) == 0 && stat(candidate, &st) == 0 && S_ISREG(st.st_mode)) {
        snprintf(out, cap, "%s", candidate);
        return 1;
    }
    if (depth == 0)
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    int hit = 0;
    while (!hit && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (join_path(candidate, sizeof candidate, dir, e->d_name) == 0 &&
            stat(candidate, &st) == 0 && S_ISDIR(st.st_mode))
            hit = find_file(candidate, file, depth - 1, out, cap);
    }
    closedir(d);
    return hit;
}

/* Collects every "<kind>-*.so" under dir into *files (malloc'ed paths). */
static void list_files(const char *dir, const char *prefix, int depth, char ***files, int *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        struct stat st;
        if (join_path(path, sizeof path, dir, e->d_name) != 0 || stat(path, &st) != 0)
            continue;
        size_t len = strlen(e->d_name);
        if (S_ISDIR(st.st_mode) && depth > 0) {
            list_files(path, prefix, depth - 1, files, n);
        } else if (S_ISREG(st.st_mode) && len > 3 && strcmp(e->d_name + len - 3, ".so") == 0 &&
                   strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            char **grown = realloc(*files, (size_t)(*n + 1) * sizeof *grown);
            if (!grown)
                break;
            *files = grown;
            (*files)[(*n)++] = strdup(path);
        }
    }
    closedir(d);
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int gb_loader_scan(gb_loader *loader, gb_kind kind, const gb_plugin ***out, gb_diag *diag)
{
    char **files = NULL;
    int n_files = 0;
    for (int i = 0; i < loader->n_dirs; i++) {
        int first = n_files;
        for (int k = 1; k <= N_KINDS; k++) {
            if (kind && k != (int)kind)
                continue;
            char prefix[32];
            snprintf(prefix, sizeof prefix, "%s-", kind_names[k]);
            list_files(loader->dirs[i], prefix, SCAN_DEPTH, &files, &n_files);
        }
        qsort(files + first, (size_t)(n_files - first), sizeof *files, compare_strings);
    }
    const gb_plugin **plugins = calloc((size_t)n_files + 1, sizeof *plugins);
    int n = 0;
    for (int i = 0; plugins && i < n_files; i++) {
        const gb_plugin *p = gb_loader_open(loader, files[i], diag);
        int duplicate = 0;
        for (int j = 0; p && j < n; j++)
            duplicate |= plugins[j] == p;
        if (p && !duplicate && (!kind || p->desc->kind == kind))
            plugins[n++] = p;
    }
    for (int i = 0; i < n_files; i++)
        free(files[i]);
    free(files);
    *out = plugins;
    return n;
}

/* Explains a failed lookup: what was looked for, what exists, where we looked. */
static void explain_not_found(gb_loader *loader, gb_kind kind, const char *name,
                              const char *tried, gb_diag *diag)
{
    gb_diag scan_diag = {0};
    const gb_plugin **found = NULL;
    int n = gb_loader_scan(loader, kind, &found, &scan_diag);
    gb_diag_clear(&scan_diag);
    char list[1024] = "";
    const char *names[64];
    int n_names = 0;
    for (int i = 0; i < n; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s (%s)", i ? ", " : "",
                 found[i]->desc->name, found[i]->path);
        if (n_names < 64)
            names[n_names++] = found[i]->desc->name;
    }
    const char *suggestion = gb_suggest(name, names, (size_t)n_names);
    char hint[160] = "";
    if (suggestion)
        snprintf(hint, sizeof hint, "did you mean '%s'? ", suggestion);
    gb_diag_add(diag, "[%s] plugin = %s: no such %s plugin (looked for %s); %s%s plugins found: "
                "%s; search path: %s", gb_kind_name(kind), name, gb_kind_name(kind), tried, hint,
                gb_kind_name(kind), n ? list : "none", gb_loader_path_string(loader));
    free(found);
}

const gb_plugin *gb_loader_find(gb_loader *loader, gb_kind kind, const char *name,
                                uint32_t device, gb_diag *diag)
{
    const char *kind_name = gb_kind_name(kind);
    if (strchr(name, '/')) {
        const gb_plugin *p = gb_loader_open(loader, name, diag);
        if (p && p->desc->kind != kind) {
            gb_diag_add(diag, "[%s] plugin = %s: that file is a %s plugin, not a %s plugin",
                        kind_name, name, gb_kind_name(p->desc->kind), kind_name);
            return NULL;
        }
        return p;
    }
    char files[2][128];
    int n_files = 0;
    if (kind == GB_KIND_DEVICE) {
        snprintf(files[n_files++], sizeof files[0], "device-%s.so", name);
    } else {
        snprintf(files[n_files++], sizeof files[0], "%s-%s-%s.so", kind_name, name,
                 gb_device_name(device));
        snprintf(files[n_files++], sizeof files[0], "%s-%s.so", kind_name, name);
    }
    for (int i = 0; i < loader->n_dirs; i++) {
        for (int f = 0; f < n_files; f++) {
            char path[PATH_MAX];
            if (!find_file(loader->dirs[i], files[f], SCAN_DEPTH, path, sizeof path))
                continue;
            const gb_plugin *p = gb_loader_open(loader, path, diag);
            if (!p)
                return NULL;
            if (p->desc->kind != kind || strcmp(p->desc->name, name) != 0) {
                gb_diag_add(diag, "plugin %s: its file name says %s/%s but its descriptor "
                            "says %s/%s; rename the file or fix the descriptor", p->path,
                            kind_name, name, gb_kind_name(p->desc->kind), p->desc->name);
                return NULL;
            }
            if (kind != GB_KIND_DEVICE && !(p->desc->devices & device)) {
                char devs[32];
                gb_device_list(p->desc->devices, devs, sizeof devs);
                gb_diag_add(diag, "[%s] plugin = %s: %s runs on %s, not on this run's device "
                            "%s", kind_name, name, p->path, devs, gb_device_name(device));
                return NULL;
            }
            return p;
        }
    }
    char tried[300];
    if (n_files == 2)
        snprintf(tried, sizeof tried, "%s or %s", files[0], files[1]);
    else
        snprintf(tried, sizeof tried, "%s", files[0]);
    explain_not_found(loader, kind, name, tried, diag);
    return NULL;
}
