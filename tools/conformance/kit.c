/* The helpers of kit.h that every check_KIND.c uses: the result table, plugin instances
 * bound through the core's own config and gb_instance_bind (so each gets the host table a
 * run would), memory on the device under test, seeded data and comparisons.
 */
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

int gb_kit_bind_defaults(gb_kit *kit, gb_kit_instance *ki, const gb_plugin *plugin,
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
    if (gb_kit_bind_defaults(kit, ki, plugin, overrides, n_overrides))
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
