/* What the conformance checks share: the table they report into, plugin instances made
 * with a schema's defaults (plus overrides), memory on the device the plugin under test
 * runs on, seeded data and comparisons. Internal to tools/conformance/.
 *
 * The plugin under test gets device memory from the run's device plugin, exactly as in a
 * run; the reference plugins are CPU plugins and get plain host memory. Every buffer a
 * check takes (device or host) is released together by gb_kit_release(), so a check
 * that gives up half-way leaks nothing. Checks never stop the kit: each reports its row
 * and returns.
 */
#ifndef GB_CONFORMANCE_KIT_H
#define GB_CONFORMANCE_KIT_H

#include <stddef.h>
#include <stdint.h>

#include "gearbox/device.h"
#include "gearbox/engine/config.h"
#include "gearbox/engine/loader.h"
#include "gearbox/engine/rng.h"
#include "gearbox/engine/run.h"

typedef enum gb_kit_result { GB_KIT_PASS, GB_KIT_FAIL, GB_KIT_UNSUPPORTED } gb_kit_result;

/* A plugin instance made for a check: bound to a config of its own, then created. */
typedef struct gb_kit_instance {
    gb_instance inst;       /* plugin, values, host table, last error message, self */
    gb_config *cfg;
    const void *ops;        /* the kind's vtable */
} gb_kit_instance;

typedef struct gb_kit_block gb_kit_block;

typedef struct gb_kit {
    gb_loader *loader;
    const gb_plugin *plugin;     /* under test */
    int threads;
    gb_device_ctx ctx;           /* where the plugin under test runs */
    gb_kit_instance device;      /* the device plugin owning ctx; for a device plugin under
                                    test, that plugin itself */
    const gb_device_ops *dev;
    gb_status memory_status;     /* GB_OK, or how the device's last alloc or copy failed */
    char memory_error[1536];
    gb_kit_block *blocks;        /* what gb_kit_release frees */
    const char *const *sets;     /* "key=value" options of the plugin under test, from
                                    test-plugin --set, applied to every instance of it */
    int n_sets;
    int strict;                  /* test-plugin --strict: also the promises gearbox's own
                                    plugins make beyond the contract */
    int passed, failed, unsupported;
} gb_kit;

/* The context reference plugins are created with. */
extern const gb_device_ctx gb_kit_cpu_ctx;

/* Prints one row of the table and counts it. */
void gb_kit_report(gb_kit *kit, const char *check, gb_kit_result result, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Reports that `entry` of `ki` returned `status`: UNSUPPORTED for GB_ERR_UNSUPPORTED,
 * FAIL otherwise, with the plugin's message. */
void gb_kit_report_call(gb_kit *kit, const char *check, const gb_kit_instance *ki,
                        const char *entry, gb_status status);

/* A config of its own holding `overrides` in the plugin's section, validated against
 * the plugin's schema into ki->inst. Returns 0, or -1 with the first problem in
 * ki->inst.error. */
int gb_kit_bind_defaults(gb_kit *kit, gb_kit_instance *ki, const gb_plugin *plugin,
                         const char *const *overrides, int n_overrides);

/* Binds `plugin` to its defaults with `overrides` applied (n "key=value" strings of its
 * own section) and creates it on `ctx`. On failure the status says how and
 * ki->inst.error why; gb_kit_destroy is safe either way. */
gb_status gb_kit_create(gb_kit *kit, gb_kit_instance *ki, const gb_plugin *plugin,
                        const gb_device_ctx *ctx, const char *const *overrides,
                        int n_overrides);
void gb_kit_destroy(gb_kit_instance *ki);
/* Creates the plugin under test on kit->ctx, with kit->sets and then `overrides`
 * applied; on failure reports `check` and returns nonzero. */
int gb_kit_create_tested(gb_kit *kit, gb_kit_instance *ki, const char *check,
                         const char *const *overrides, int n_overrides);
/* Finds and creates gearbox's reference plugin `kind`/`name` for the CPU; on failure
 * reports `check` as failed (the comparison cannot run) and returns nonzero. */
int gb_kit_create_reference(gb_kit *kit, gb_kit_instance *ki, gb_kind kind, const char *name,
                            const char *check, const char *const *overrides, int n_overrides);
/* Index of `key` in the schema of the plugin under test, or -1. */
int gb_kit_option(const gb_kit *kit, const char *key);

/* Device memory for the plugin under test; NULL when the device refused (the reason is in
 * kit->memory_status and memory_error). */
void *gb_kit_device_alloc(gb_kit *kit, size_t bytes);
/* Host memory, 64-byte aligned, for inputs, references and results. NULL when out of
 * memory. */
void *gb_kit_host_alloc(gb_kit *kit, size_t bytes);
/* Copies between host and device memory of the plugin under test (and syncs after a
 * download). 0, or -1 with the reason in kit->memory_status and memory_error. */
int gb_kit_upload(gb_kit *kit, void *device, const void *host, size_t bytes);
int gb_kit_download(gb_kit *kit, void *host, const void *device, size_t bytes);
/* Device memory holding a copy of `host`, or NULL. */
void *gb_kit_device_copy(gb_kit *kit, const void *host, size_t bytes);
/* Reports `check` after a failed alloc or copy: UNSUPPORTED when the device said so. */
void gb_kit_report_memory(gb_kit *kit, const char *check);
/* Frees every buffer taken since the last release. */
void gb_kit_release(gb_kit *kit);

/* x (n) uniform in [lo, hi). */
void gb_kit_fill(gb_rng *rng, float *x, size_t n, double lo, double hi);
/* x (n) all NaN: a buffer that is read before it is written shows. */
void gb_kit_fill_nan(float *x, size_t n);

/* 1 when |got - want| <= atol + rtol * |want| everywhere (NaN never passes). Writes the
 * largest differences, or the first failing element, to `detail`. */
int gb_kit_close(const float *got, const float *want, size_t n, double atol, double rtol,
                 char *detail, size_t cap);
/* How many of the n floats differ in their bits. */
size_t gb_kit_bits_differ(const float *a, const float *b, size_t n);

/* Appends a formatted clause to the NUL-terminated text in buf, after "; " when buf is
 * not empty: one row's detail gathers every problem a check found. */
void gb_kit_append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The checks of each kind, run on a kit whose plugin is of that kind. */
void gb_kit_check_attn(gb_kit *kit);
void gb_kit_check_optim(gb_kit *kit);
void gb_kit_check_precision(gb_kit *kit);
void gb_kit_check_comm(gb_kit *kit);
void gb_kit_check_device(gb_kit *kit);

#endif
