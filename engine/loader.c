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
#include <grp.h>
#include <limits.h>
#include <pwd.h>
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
#include "report.h"

struct gb_loader {
    char **dirs;
    int n_dirs;
    int allow_writable;   /* [run] allow_writable_plugins: load what others could write */
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

/* What the fixed device bits mean (frozen for ABI 1): all a device built before 1.6 says of
 * itself, and so its description. */
#define DTYPES_16 (GB_DTYPE_BIT(GB_BF16) | GB_DTYPE_BIT(GB_F16))
static const struct {
    uint32_t bit;
    const char *family;
    gb_memory_kind memory;
    uint32_t native_dtypes;
    const char *preferred, *why;
} fixed_devices[] = {
    {GB_DEVICE_CPU, "cpu", GB_MEMORY_HOST, GB_DTYPE_BIT(GB_F32), "fp32",
     "a device built before ABI 1.6 does not say which 16-bit types it computes natively"},
    {GB_DEVICE_CUDA, "cuda", GB_MEMORY_DEVICE, GB_DTYPE_BIT(GB_F32) | DTYPES_16, "bf16",
     "gearbox's CUDA path targets sm_80 and later, whose tensor cores multiply bf16"},
};
#define N_FIXED_DEVICES (sizeof fixed_devices / sizeof fixed_devices[0])

const char *gb_device_name(uint32_t bits)
{
    for (size_t i = 0; i < N_FIXED_DEVICES; i++)
        if (bits & fixed_devices[i].bit)
            return fixed_devices[i].family;
    return (bits & GB_DEVICE_ANY_HOST) ? "host-memory" : "none";
}

void gb_device_list(uint32_t bits, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_FIXED_DEVICES && used < cap; i++)
        if (bits & fixed_devices[i].bit)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? "," : "",
                                     fixed_devices[i].family);
    if ((bits & GB_DEVICE_ANY_HOST) && used < cap)
        snprintf(buf + used, cap - used, "%shost-memory", used ? "," : "");
    if (!bits)  /* a 1.6 device of a family of its own */
        snprintf(buf, cap, "its own family");
}

uint32_t gb_device_match_bits(uint32_t device_bits, const gb_device_desc *device)
{
    return device_bits | (device->memory == GB_MEMORY_HOST ? GB_DEVICE_ANY_HOST : 0u);
}

const char *gb_plugin_families(const gb_plugin_desc *desc)
{
    size_t end = offsetof(gb_plugin_desc, families) + sizeof desc->families;
    return desc->abi_minor >= 8 && desc->struct_size >= end && desc->families ? desc->families
                                                                                : "";
}

/* Whether the ','-separated `list` holds `family`, or GB_FAMILY_ANY. */
static int family_listed(const char *list, const char *family)
{
    size_t len = strlen(family);
    for (const char *at = list; len && *at;) {
        size_t n = strcspn(at, ",");
        if ((n == len && strncmp(at, family, len) == 0) ||
            (n == 1 && strncmp(at, GB_FAMILY_ANY, 1) == 0))
            return 1;
        at += n + (at[n] == ',');
    }
    return 0;
}

int gb_plugin_runs_on(const gb_plugin_desc *desc, const char *family, uint32_t device_bits)
{
    return (desc->devices & device_bits) || family_listed(gb_plugin_families(desc), family);
}

void gb_plugin_devices(const gb_plugin_desc *desc, char *buf, size_t cap)
{
    const char *families = gb_plugin_families(desc);
    if (!desc->devices && *families) {
        snprintf(buf, cap, "%s", families);
        return;
    }
    gb_device_list(desc->devices, buf, cap);
    size_t used = strlen(buf);
    if (*families && used < cap)
        snprintf(buf + used, cap - used, ",%s", families);
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

/* Whether two folder names lead to the same folder (or are the same text). */
static int same_folder(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return strcmp(a, b) == 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static void add_dir(gb_loader *loader, const char *dir, size_t len)
{
    char *copy = len ? strndup(dir, len) : NULL;
    if (!copy)
        return;
    for (int i = 0; i < loader->n_dirs; i++) {
        if (same_folder(loader->dirs[i], copy)) {
            free(copy);
            return; /* searching a folder twice finds nothing new */
        }
    }
    char **grown = realloc(loader->dirs, (size_t)(loader->n_dirs + 1) * sizeof *grown);
    if (!grown) {
        free(copy);
        return;
    }
    loader->dirs = grown;
    loader->dirs[loader->n_dirs++] = copy;
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

void gb_loader_allow_writable(gb_loader *loader, int allow)
{
    loader->allow_writable = allow;
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
 * added it (an entry is checked only for plugins built for that version or later) and, for
 * the device's stream group, the minor from which it is optional (0: never). */
typedef struct mandatory_entry {
    size_t offset;
    const char *name;
    uint16_t since_minor;
    uint16_t optional_from;
} mandatory_entry;

#define ENTRY(type, field) {offsetof(type, field), #field, 0, 0}
#define STREAM_ENTRY(field) {offsetof(gb_device_ops, field), #field, 2, 6}
#define ENTRY_1_6(type, field) {offsetof(type, field), #field, 6, 0}
static const mandatory_entry device_entries[] = {
    ENTRY(gb_device_ops, create), ENTRY(gb_device_ops, destroy), ENTRY(gb_device_ops, context),
    ENTRY(gb_device_ops, info), ENTRY(gb_device_ops, alloc), ENTRY(gb_device_ops, free),
    ENTRY(gb_device_ops, copy), ENTRY(gb_device_ops, memset_zero), ENTRY(gb_device_ops, sync),
    ENTRY(gb_device_ops, matmul), ENTRY(gb_device_ops, embed_forward),
    ENTRY(gb_device_ops, embed_backward), ENTRY(gb_device_ops, layernorm_forward),
    ENTRY(gb_device_ops, layernorm_backward), ENTRY(gb_device_ops, gelu_forward),
    ENTRY(gb_device_ops, gelu_backward), ENTRY(gb_device_ops, add),
    ENTRY(gb_device_ops, bias_backward), ENTRY(gb_device_ops, cross_entropy),
    ENTRY(gb_device_ops, sum_squares), STREAM_ENTRY(alloc_host), STREAM_ENTRY(free_host),
    STREAM_ENTRY(copy_async), STREAM_ENTRY(stream_create), STREAM_ENTRY(stream_destroy),
    STREAM_ENTRY(event_create), STREAM_ENTRY(event_destroy), STREAM_ENTRY(event_record),
    STREAM_ENTRY(stream_wait_event), STREAM_ENTRY(event_query), STREAM_ENTRY(event_sync),
    STREAM_ENTRY(enqueue_host), ENTRY_1_6(gb_device_ops, describe)};
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
 * row per version, so a plugin built for an older minor keeps loading under every later 1.x.
 * A plugin built for a newer minor than this core knows must have at least the newest
 * row's sizes (the core reads nothing beyond them). */
typedef struct abi_sizes {
    uint16_t minor;
    size_t desc;
    size_t ops[N_KINDS + 1];  /* by gb_kind */
} abi_sizes;

/* The optimizer vtable of 1.0 to 1.7, which 1.8 extends with bind_params. */
#define OPTIM_TO_1_7 END_OF(gb_optim_ops, grad_norm_sq)

static const abi_sizes abi_versions[] = {
    {0, END_OF(gb_plugin_desc, ops),
     {0, END_OF(gb_device_ops, sum_squares), END_OF(gb_attn_ops, backward), OPTIM_TO_1_7,
      END_OF(gb_precision_ops, load_state), END_OF(gb_comm_ops, barrier)}},
    /* 1.1 appended fields to argument structs only */
    {1, END_OF(gb_plugin_desc, ops),
     {0, END_OF(gb_device_ops, sum_squares), END_OF(gb_attn_ops, backward), OPTIM_TO_1_7,
      END_OF(gb_precision_ops, load_state), END_OF(gb_comm_ops, barrier)}},
    {2, END_OF(gb_plugin_desc, caps),
     {0, END_OF(gb_device_ops, enqueue_host), END_OF(gb_attn_ops, backward), OPTIM_TO_1_7,
      END_OF(gb_precision_ops, load_state), END_OF(gb_comm_ops, barrier)}},
    /* 1.3 appended the device's cross_entropy_ld (optional) */
    {3, END_OF(gb_plugin_desc, caps),
     {0, END_OF(gb_device_ops, cross_entropy_ld), END_OF(gb_attn_ops, backward),
      OPTIM_TO_1_7, END_OF(gb_precision_ops, load_state), END_OF(gb_comm_ops, barrier)}},
    /* 1.4 appended the loss scaler on the device (the device's cross_entropy_scaled and
     * loss_scaler_update, the precision plugin's scaler_get and scaler_set), the device's
     * graph entries and gb_device_info.pci_bus_id (all optional) */
    {4, END_OF(gb_plugin_desc, caps),
     {0, END_OF(gb_device_ops, graph_destroy), END_OF(gb_attn_ops, backward), OPTIM_TO_1_7,
      END_OF(gb_precision_ops, scaler_set), END_OF(gb_comm_ops, barrier)}},
    /* 1.5 appended the device's add_layernorm_forward (optional) */
    {5, END_OF(gb_plugin_desc, caps),
     {0, END_OF(gb_device_ops, add_layernorm_forward), END_OF(gb_attn_ops, backward),
      OPTIM_TO_1_7, END_OF(gb_precision_ops, scaler_set), END_OF(gb_comm_ops, barrier)}},
    /* 1.6 appended the device's describe (mandatory; its stream group became optional) */
    {6, END_OF(gb_plugin_desc, caps),
     {0, END_OF(gb_device_ops, describe), END_OF(gb_attn_ops, backward), OPTIM_TO_1_7,
      END_OF(gb_precision_ops, scaler_set), END_OF(gb_comm_ops, barrier)}},
    /* 1.7 appended the device's dropout and the attention's forward_cached (optional) */
    {7, END_OF(gb_plugin_desc, caps),
     {0, END_OF(gb_device_ops, dropout), sizeof(gb_attn_ops), OPTIM_TO_1_7,
      END_OF(gb_precision_ops, scaler_set), END_OF(gb_comm_ops, barrier)}},
    /* 1.8 appended the descriptor's families, the optimizer's bind_params and the comm's
     * reduce_scatter_start and all_gather (all optional) */
    {8, END_OF(gb_plugin_desc, families),
     {0, END_OF(gb_device_ops, dropout), sizeof(gb_attn_ops), sizeof(gb_optim_ops),
      END_OF(gb_precision_ops, scaler_set), sizeof(gb_comm_ops)}},
};
#define N_ABI_VERSIONS ((int)(sizeof abi_versions / sizeof abi_versions[0]))

static const abi_sizes *sizes_for(uint16_t minor)
{
    return &abi_versions[minor < N_ABI_VERSIONS ? minor : N_ABI_VERSIONS - 1];
}

void gb_device_describe_fixed(uint32_t bits, gb_device_desc *out)
{
    size_t size = out->struct_size, row = 0;
    memset(out, 0, size);
    out->struct_size = size;
    while (row + 1 < N_FIXED_DEVICES && !(bits & fixed_devices[row].bit))
        row++; /* the lowest bit set decides; none: the first row's host memory */
    snprintf(out->family, sizeof out->family, "%s", gb_device_name(bits));
    out->memory = fixed_devices[row].memory;
    out->native_dtypes = fixed_devices[row].native_dtypes;
    out->asynchronous = 1;
    snprintf(out->preferred_precision, sizeof out->preferred_precision, "%s",
             fixed_devices[row].preferred);
    snprintf(out->preferred_why, sizeof out->preferred_why, "%s", fixed_devices[row].why);
}

/* The core's stream group for a synchronous device whose buffers are host memory: every
 * call has finished when it returns, so ordering is free and queued work runs inline. */
static char sync_token; /* the one stream and event handle: nothing to tell apart */

static gb_status sync_alloc_host(void *self, size_t bytes, void **ptr)
{
    (void)self;
    return posix_memalign(ptr, 64, bytes ? bytes : 64) == 0 ? GB_OK : GB_ERR_NO_MEMORY;
}

static void sync_free_host(void *self, void *ptr)
{
    (void)self;
    free(ptr);
}

static gb_status sync_copy_async(void *self, void *dst, const void *src, size_t bytes,
                                 gb_copy_kind kind, void *stream)
{
    (void)self, (void)kind, (void)stream;
    memcpy(dst, src, bytes);
    return GB_OK;
}

static gb_status sync_handle_create(void *self, void **handle)
{
    (void)self;
    *handle = &sync_token;
    return GB_OK;
}

static void sync_handle_destroy(void *self, void *handle)
{
    (void)self, (void)handle;
}

static gb_status sync_order(void *self, void *a, void *b)
{
    (void)self, (void)a, (void)b;
    return GB_OK;
}

static gb_status sync_event_done(void *self, void *event)
{
    (void)self, (void)event;
    return GB_OK;
}

/* fn gets its own copy of the argument, as from a device that queues it (on the stack
 * for the small ones plugins pass every step). */
static gb_status sync_enqueue_host(void *self, void *stream, gb_host_fn fn, const void *arg,
                                   size_t arg_bytes)
{
    (void)self, (void)stream;
    _Alignas(max_align_t) unsigned char small[512];
    void *copy = arg_bytes <= sizeof small ? small : malloc(arg_bytes);
    if (!copy)
        return GB_ERR_NO_MEMORY;
    if (arg_bytes)
        memcpy(copy, arg, arg_bytes);
    gb_status st = fn(copy);
    if (copy != small)
        free(copy);
    return st;
}

/* The largest vtable of each kind this core knows. */
static const size_t vtable_sizes[N_KINDS + 1] = {
    0, sizeof(gb_device_ops), sizeof(gb_attn_ops), sizeof(gb_optim_ops),
    sizeof(gb_precision_ops), sizeof(gb_comm_ops)};

void *gb_loader_vtable(const gb_plugin *p)
{
    const gb_plugin_desc *d = p->desc;
    size_t whole = vtable_sizes[d->kind], have = sizes_for(d->abi_minor)->ops[d->kind];
    have = have < whole ? have : whole;
    void *ops = calloc(1, whole);
    if (!ops)
        return NULL;
    memcpy(ops, d->ops, have);
    memcpy(ops, &have, sizeof have); /* struct_size: what the plugin's minor made it */
    return ops;
}

gb_device_ops *gb_device_ops_for_core(const gb_plugin *p, const gb_device_desc *device,
                                      gb_diag *diag)
{
    const gb_plugin_desc *d = p->desc;
    gb_device_ops *ops = gb_loader_vtable(p);
    if (!ops) {
        gb_diag_add(diag, "out of memory");
        return NULL;
    }
    if (ops->enqueue_host)
        return ops; /* the loader checked that the group is whole */
    if (device->memory != GB_MEMORY_HOST || device->asynchronous) {
        gb_diag_add(diag, "[device] plugin = %s (%s) gives no stream and event entries, which "
                    "only a synchronous device whose buffers are host memory may leave out "
                    "(it says: %s, %s); fill them (device.h, ABI 1.2)", d->name, p->path,
                    device->memory == GB_MEMORY_HOST ? "host memory" : "not host memory",
                    device->asynchronous ? "asynchronous" : "synchronous");
        free(ops);
        return NULL;
    }
    ops->alloc_host = sync_alloc_host;
    ops->free_host = sync_free_host;
    ops->copy_async = sync_copy_async;
    ops->stream_create = ops->event_create = sync_handle_create;
    ops->stream_destroy = ops->event_destroy = sync_handle_destroy;
    ops->event_record = ops->stream_wait_event = sync_order;
    ops->event_query = ops->event_sync = sync_event_done;
    ops->enqueue_host = sync_enqueue_host;
    if (ops->struct_size < END_OF(gb_device_ops, enqueue_host))
        ops->struct_size = END_OF(gb_device_ops, enqueue_host); /* a 1.0 or 1.1 device */
    return ops;
}

/* abi_minor decides which fields exist (the loader has checked struct_size against it). */
uint32_t gb_plugin_caps(const gb_plugin_desc *d)
{
    return d->abi_minor >= 2 ? d->caps : GB_CAPS_UNDECLARED;
}

uint32_t gb_plugin_dtypes(const gb_plugin_desc *d)
{
    return d->abi_minor >= 2 ? d->dtypes : 0;
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

static void *entry_at(const gb_plugin_desc *d, size_t offset)
{
    void *fn;
    memcpy(&fn, (const char *)d->ops + offset, sizeof fn);
    return fn;
}

/* Every entry mandatory in the plugin's version is set, and a group that is optional in
 * it (a 1.6 device's streams and events) is given whole or not at all. */
static int check_entries(const gb_plugin_desc *d, const char *path, const char *kind,
                         gb_diag *diag)
{
    char missing[512] = "";
    int group_set = 0, group_unset = 0;
    for (int i = 0; i < mandatory[d->kind].n; i++) {
        const mandatory_entry *e = &mandatory[d->kind].entries[i];
        if (e->since_minor > d->abi_minor)
            continue;
        int set = entry_at(d, e->offset) != NULL;
        if (e->optional_from && d->abi_minor >= e->optional_from) {
            group_set += set;
            group_unset += !set;
            if (!set) {
                size_t used = strlen(missing);
                snprintf(missing + used, sizeof missing - used, "%s%s", used ? ", " : "",
                         e->name);
            }
        } else if (!set) {
            gb_diag_add(diag, "plugin %s (%s/%s): mandatory vtable entry %s is NULL", path,
                        kind, d->name, e->name);
            return -1;
        }
    }
    if (group_set && group_unset) {
        gb_diag_add(diag, "plugin %s (%s/%s): fills %d of the %d stream and event entries "
                    "(ABI 1.6: all or none); missing: %s. Fill them all, or leave them all NULL "
                    "for a synchronous device", path, kind, d->name, group_set,
                    group_set + group_unset, missing);
        return -1;
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
    return check_entries(d, path, kind, diag);
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
    if (!d->devices && !(d->kind == GB_KIND_DEVICE && d->abi_minor >= 6) &&
        !*gb_plugin_families(d)) {
        gb_diag_add(diag, "plugin %s (%s/%s): declares no device it runs on (GB_DEVICE_* "
                    "bits, GB_DEVICE_ANY_HOST since ABI 1.6, or device families since 1.8)",
                    path, kind, d->name);
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

/* Whether the group of `st` is its owner's own (a user private group, as Debian makes
 * for every user): group write is then no wider than the owner's. */
static int owners_private_group(const struct stat *st)
{
    struct passwd *owner = getpwuid(st->st_uid);
    char name[256];
    if (!owner)
        return 0;
    snprintf(name, sizeof name, "%s", owner->pw_name);
    struct group *group = getgrgid(st->st_gid);
    return group && strcmp(group->gr_name, name) == 0 && !group->gr_mem[0];
}

/* Why code at `path` could have been put there by someone other than its owner (it is
 * writable by everyone, or by a group the owner shares), or NULL. */
static const char *writable_by_others(const char *path, char *buf, size_t cap)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return NULL; /* opening it reports the problem */
    if (st.st_mode & S_IWOTH)
        snprintf(buf, cap, "%s is writable by everyone (mode %04o)", path,
                 (unsigned)(st.st_mode & 07777));
    else if ((st.st_mode & S_IWGRP) && !owners_private_group(&st))
        snprintf(buf, cap, "%s is writable by its group (mode %04o), not only by its owner",
                 path, (unsigned)(st.st_mode & 07777));
    else
        return NULL;
    return buf;
}

/* The plugin file `real` and every folder from its own up to `top` (the search folder it
 * was found in; NULL: its own folder only) must be writable by their owners alone:
 * whoever can write one of them can run code in every gearbox that loads from there. */
static int check_trusted(const gb_loader *loader, const char *real, const char *top,
                         gb_diag *diag)
{
    if (loader->allow_writable)
        return 0;
    char *stop = top ? realpath(top, NULL) : NULL;
    char path[PATH_MAX], why[PATH_MAX + 96];
    snprintf(path, sizeof path, "%s", real);
    const char *problem = writable_by_others(path, why, sizeof why);
    for (char *slash; !problem && (slash = strrchr(path, '/'));) {
        slash[slash == path] = '\0';   /* up one folder ("/" keeps its slash) */
        problem = writable_by_others(path, why, sizeof why);
        if (!stop || strcmp(path, stop) == 0 || strcmp(path, "/") == 0)
            break;
    }
    free(stop);
    if (problem)
        gb_diag_add(diag, "plugin %s refused: %s, so others could replace the code gearbox "
                    "runs; `chmod go-w` it, or set [run] allow_writable_plugins = true to "
                    "load it anyway", real, problem);
    return problem ? -1 : 0;
}

/* gb_loader_open, for a file found in the search folder `top` (NULL: named directly). */
static const gb_plugin *open_plugin(gb_loader *loader, const char *path, const char *top,
                                    gb_diag *diag)
{
    char *real = realpath(path, NULL);
    if (!real) {
        gb_diag_add(diag, "cannot open plugin file %s: %s", path, strerror(errno));
        return NULL;
    }
    gb_plugin *found = already_open(loader, real);
    if (found || check_trusted(loader, real, top, diag)) {
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
                    "plugin built with its kind's macro (GB_ATTN_PLUGIN...) or "
                    "GB_PLUGIN_DEFINE?", real, GB_PLUGIN_ENTRY_NAME);
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

const gb_plugin *gb_loader_open(gb_loader *loader, const char *path, gb_diag *diag)
{
    return open_plugin(loader, path, NULL, diag);
}

/* dir/name into buf; -1 when it does not fit. */
static int join_path(char *buf, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

/* Where a search folder may hold the plugin file `file` of `kind` called `name`: at its
 * top (installed plugins, an out-of-tree build) or in KIND/NAME/ (the build tree's
 * plugins/attn/math/). Nothing deeper is searched: a same-named file somewhere below a
 * folder on the path is not a plugin of that path. The existing one's path goes into out. */
static int find_file(const char *dir, const char *kind, const char *name, const char *file,
                     char *out, size_t cap)
{
    struct stat st;
    for (int layout = 0; layout < 2; layout++) {
        int n = layout ? snprintf(out, cap, "%s/%s/%s/%s", dir, kind, name, file)
                       : snprintf(out, cap, "%s/%s", dir, file);
        if (n > 0 && (size_t)n < cap && stat(out, &st) == 0 && S_ISREG(st.st_mode))
            return 1;
    }
    return 0;
}

/* Collects every "<prefix>*.so" file directly in dir into *files (malloc'ed paths). */
static void list_files(const char *dir, const char *prefix, char ***files, int *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[PATH_MAX];
        struct stat st;
        size_t len = strlen(e->d_name);
        if (len <= 3 || strcmp(e->d_name + len - 3, ".so") != 0 ||
            strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
            join_path(path, sizeof path, dir, e->d_name) != 0 || stat(path, &st) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        char **grown = realloc(*files, (size_t)(*n + 1) * sizeof *grown);
        if (!grown)
            break;
        *files = grown;
        (*files)[(*n)++] = strdup(path);
    }
    closedir(d);
}

/* The plugin files of `kind` in a search folder: at its top and in each KIND/NAME/. */
static void list_kind(const char *dir, const char *kind, char ***files, int *n)
{
    char prefix[32], kind_dir[PATH_MAX], sub[PATH_MAX];
    snprintf(prefix, sizeof prefix, "%s-", kind);
    list_files(dir, prefix, files, n);
    if (join_path(kind_dir, sizeof kind_dir, dir, kind) != 0)
        return;
    DIR *d = opendir(kind_dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.' && join_path(sub, sizeof sub, kind_dir, e->d_name) == 0)
            list_files(sub, prefix, files, n);
    if (d)
        closedir(d);
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int gb_loader_scan(gb_loader *loader, gb_kind kind, const gb_plugin ***out, gb_diag *diag)
{
    char **files = NULL;
    int n_files = 0, *dir_of = NULL;
    for (int i = 0; i < loader->n_dirs; i++) {
        int first = n_files;
        for (int k = 1; k <= N_KINDS; k++)
            if (!kind || k == (int)kind)
                list_kind(loader->dirs[i], kind_names[k], &files, &n_files);
        if (n_files > first) /* an empty folder leaves files NULL, which qsort may not get */
            qsort(files + first, (size_t)(n_files - first), sizeof *files, compare_strings);
        int *grown = realloc(dir_of, (size_t)n_files * sizeof *grown + 1);
        if (!grown)
            break;
        dir_of = grown;
        for (int f = first; f < n_files; f++)
            dir_of[f] = i;
    }
    const gb_plugin **plugins = calloc((size_t)n_files + 1, sizeof *plugins);
    int n = 0;
    for (int i = 0; plugins && dir_of && i < n_files; i++) {
        const gb_plugin *p = open_plugin(loader, files[i], loader->dirs[dir_of[i]], diag);
        int duplicate = 0;
        for (int j = 0; p && j < n; j++)
            duplicate |= plugins[j] == p;
        if (p && !duplicate && (!kind || p->desc->kind == kind))
            plugins[n++] = p;
    }
    for (int i = 0; i < n_files; i++)
        free(files[i]);
    free(files);
    free(dir_of);
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

/* The file names a plugin of `kind` called `name` may have, most specific first. */
static int plugin_files(gb_kind kind, const char *name, const char *family, char files[2][128])
{
    if (kind == GB_KIND_DEVICE) {
        snprintf(files[0], sizeof files[0], "device-%s.so", name);
        return 1;
    }
    snprintf(files[0], sizeof files[0], "%s-%s-%s.so", gb_kind_name(kind), name, family);
    snprintf(files[1], sizeof files[1], "%s-%s.so", gb_kind_name(kind), name);
    return 2;
}

/* The first of `files` on the search path into path; the index of its folder, or -1. */
static int find_first(const gb_loader *loader, gb_kind kind, const char *name,
                      char files[2][128], int n_files, char *path, size_t cap)
{
    for (int i = 0; i < loader->n_dirs; i++)
        for (int f = 0; f < n_files; f++)
            if (find_file(loader->dirs[i], gb_kind_name(kind), name, files[f], path, cap))
                return i;
    return -1;
}

/* A plugin of the same name elsewhere on the search path is not loaded; say so, since
 * a user who put it there expects it to be the one that runs. */
static void report_shadowed(const gb_loader *loader, gb_kind kind, const char *name,
                            char files[2][128], int n_files, const char *used)
{
    for (int i = 0; i < loader->n_dirs; i++) {
        for (int f = 0; f < n_files; f++) {
            char path[PATH_MAX];
            if (!find_file(loader->dirs[i], gb_kind_name(kind), name, files[f], path,
                           sizeof path))
                continue;
            char *real = realpath(path, NULL);
            if (real && strcmp(real, used) != 0)
                gb_report(GB_REPORT_WARNING, "loader", "gearbox: warning: [%s] plugin = %s: "
                          "using %s, the first on the search path; %s has the same name and is "
                          "not loaded", gb_kind_name(kind), name, used, real);
            free(real);
        }
    }
}

/* Appends "PATH runs on WHERE" for plugin `p` to the list in `buf`. */
static void add_runs_on(const gb_plugin *p, char *buf, size_t cap)
{
    char devs[96];
    gb_plugin_devices(p->desc, devs, sizeof devs);
    size_t used = strlen(buf);
    if (used < cap)
        snprintf(buf + used, cap - used, "%s%s runs on %s", used ? "; " : "", p->path, devs);
}

/* The refusal of plugin `name` whose files (`runs_on`, add_runs_on's list) do not run on
 * the run's device: both families and the fix. */
static void add_refusal(gb_diag *diag, gb_kind kind, const char *name, const char *runs_on,
                        const char *family, uint32_t device)
{
    gb_diag_add(diag, "[%s] plugin = %s: %s, not on this run's device %s (family %s, %s); use "
                "a plugin built for %s, or build this one for it (ABI 1.8: name %s in its "
                "families)", gb_kind_name(kind), name, runs_on, family, family,
                (device & GB_DEVICE_ANY_HOST) ? "host memory" : "memory the host cannot read",
                family, family);
}

/* Refuses a plugin that does not run on the run's device (add_refusal). */
static int check_runs_on(const gb_plugin *p, const char *family, uint32_t device,
                         gb_diag *diag)
{
    if (p->desc->kind == GB_KIND_DEVICE || gb_plugin_runs_on(p->desc, family, device))
        return 0;
    char runs_on[512] = "";
    add_runs_on(p, runs_on, sizeof runs_on);
    add_refusal(diag, p->desc->kind, p->desc->name, runs_on, family, device);
    return -1;
}

/* A found file must be the plugin its name says, for the run's device. */
static int check_found(const gb_plugin *p, gb_kind kind, const char *name, const char *family,
                       uint32_t device, gb_diag *diag)
{
    const char *kind_name = gb_kind_name(kind);
    if (p->desc->kind != kind || strcmp(p->desc->name, name) != 0) {
        gb_diag_add(diag, "plugin %s: its file name says %s/%s but its descriptor says %s/%s; "
                    "rename the file or fix the descriptor", p->path, kind_name, name,
                    gb_kind_name(p->desc->kind), p->desc->name);
        return -1;
    }
    return check_runs_on(p, family, device, diag);
}

/* The first `<kind>-<name>-*.so` on the search path, in KIND/NAME/ or at a folder's top,
 * that runs on the run's device: by its families (ABI 1.8), or by its bits (the cpu
 * plugins serve a host-memory device of another family by GB_DEVICE_ANY_HOST). The files
 * of that name that do not run there are listed in `refused` (add_runs_on). */
static const gb_plugin *find_for_device(gb_loader *loader, gb_kind kind, const char *name,
                                        const char *family, uint32_t device, char *refused,
                                        size_t refused_cap)
{
    char prefix[160], sub[PATH_MAX];
    snprintf(prefix, sizeof prefix, "%s-%s-", gb_kind_name(kind), name);
    const gb_plugin *found = NULL;
    for (int i = 0; i < loader->n_dirs && !found; i++) {
        char **files = NULL;
        int n = 0;
        list_files(loader->dirs[i], prefix, &files, &n);
        if (snprintf(sub, sizeof sub, "%s/%s/%s", loader->dirs[i], gb_kind_name(kind), name) <
            (int)sizeof sub)
            list_files(sub, prefix, &files, &n);
        for (int f = 0; f < n; f++) {
            gb_diag ignored = {0};  /* files for other devices may not load here */
            const gb_plugin *p = found ? NULL : open_plugin(loader, files[f], loader->dirs[i],
                                                            &ignored);
            gb_diag_clear(&ignored);
            if (p && p->desc->kind == kind && strcmp(p->desc->name, name) == 0) {
                if (gb_plugin_runs_on(p->desc, family, device))
                    found = p;
                else
                    add_runs_on(p, refused, refused_cap);
            }
            free(files[f]);
        }
        free(files);
    }
    return found;
}

const gb_plugin *gb_loader_find_for(gb_loader *loader, gb_kind kind, const char *name,
                                    const char *family, uint32_t device, gb_diag *diag)
{
    const char *kind_name = gb_kind_name(kind);
    if (strchr(name, '/')) {
        const gb_plugin *p = gb_loader_open(loader, name, diag);
        if (p && p->desc->kind != kind) {
            gb_diag_add(diag, "[%s] plugin = %s: that file is a %s plugin, not a %s plugin",
                        kind_name, name, gb_kind_name(p->desc->kind), kind_name);
            return NULL;
        }
        return p && !check_runs_on(p, family, device, diag) ? p : NULL;
    }
    char files[2][128], path[PATH_MAX];
    int n_files = plugin_files(kind, name, family, files);
    int dir = find_first(loader, kind, name, files, n_files, path, sizeof path);
    if (dir >= 0) {
        const gb_plugin *p = open_plugin(loader, path, loader->dirs[dir], diag);
        if (!p || check_found(p, kind, name, family, device, diag))
            return NULL;
        report_shadowed(loader, kind, name, files, n_files, p->path);
        return p;
    }
    char refused[1024] = "";
    const gb_plugin *other = kind != GB_KIND_DEVICE
                                 ? find_for_device(loader, kind, name, family, device, refused,
                                                   sizeof refused)
                                 : NULL;
    if (other)
        return other;
    if (refused[0]) {
        add_refusal(diag, kind, name, refused, family, device);
        return NULL;
    }
    char tried[300];
    if (n_files == 2)
        snprintf(tried, sizeof tried, "%s or %s", files[0], files[1]);
    else
        snprintf(tried, sizeof tried, "%s", files[0]);
    explain_not_found(loader, kind, name, tried, diag);
    return NULL;
}

const gb_plugin *gb_loader_find(gb_loader *loader, gb_kind kind, const char *name,
                                uint32_t device, gb_diag *diag)
{
    gb_device_desc fixed = {.struct_size = sizeof fixed};
    gb_device_describe_fixed(device, &fixed);
    return gb_loader_find_for(loader, kind, name, gb_device_name(device),
                              gb_device_match_bits(device, &fixed), diag);
}
