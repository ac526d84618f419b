/* What the plugin tests share: a host table, plugin loading and descriptor checks.
 *
 * The host logs to stderr and keeps the last message a plugin passed to set_error(), so
 * a test can check that a refusal came with an explanation. Loading goes straight to
 * dlopen() on the path the test was given (the core's loader and search path are tested
 * elsewhere). The checks print one line per problem and return how many they found, so
 * a test can add them up and exit non-zero. Single-threaded test code.
 */
#ifndef GEARBOX_TESTS_TEST_HOST_H
#define GEARBOX_TESTS_TEST_HOST_H

#include "gearbox/comm.h"
#include "gearbox/device.h"
#include "gearbox/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The host table, with num_threads from omp_get_max_threads(). */
const gb_host *gb_test_host(void);
/* The message of the last set_error() call since gb_test_clear_error(); "" if none. */
const char *gb_test_last_error(void);
void gb_test_clear_error(void);

/* A context for plugins created on the CPU device. */
const gb_device_ctx *gb_test_cpu_ctx(void);

/* dlopen()s `path` and returns its descriptor; prints why and returns NULL on failure.
 * *handle receives the handle for dlclose(). */
const gb_plugin_desc *gb_test_open_plugin(const char *path, void **handle);

/* For a test's main(): prints "usage: PROG ARGS" and exits with status 2 unless args_ok. */
void gb_test_usage_unless(int args_ok, const char *prog, const char *args);
/* gb_test_open_plugin() for a test's main(): exits with status 1 when `path` does not
 * load. The plugin stays loaded until the test exits. */
const gb_plugin_desc *gb_test_load_plugin(const char *path);

/* For a test's main() run as "PROG NAME PLUGIN [more]": the index of the entry named
 * argv[1] in `table`, an array of `n` structs `stride` bytes apart whose first member is
 * their name (a const char *), with argv[2] loaded into *desc (gb_test_load_plugin).
 * Prints "usage: PROG ARGS" and exits with status 2 unless argc is `want_argc` and the
 * entry exists. */
int gb_test_named_plugin(int argc, char **argv, int want_argc, const void *table, size_t n,
                         size_t stride, const char *args, const gb_plugin_desc **desc);
#define GB_TEST_NAMED_PLUGIN(argc, argv, want_argc, table, args, desc)                       \
    gb_test_named_plugin((argc), (argv), (want_argc), (table),                              \
                         sizeof(table) / sizeof((table)[0]), sizeof((table)[0]), (args), (desc))

/* Checks the descriptor's ABI version, size, kind, name and devices, that every option
 * has a key, a default and a help line, and that the vtable's struct_size is ops_size. */
int gb_test_check_descriptor(const gb_plugin_desc *desc, gb_kind kind, const char *name,
                             uint32_t devices, size_t ops_size);
/* Index of `key` in the schema, or -1. */
int gb_test_option_index(const gb_plugin_desc *desc, const char *key);
/* Checks that the schema has `key` of `type` with `default_value`. */
int gb_test_check_option(const gb_plugin_desc *desc, const char *key, gb_option_type type,
                         const char *default_value);
/* Option values parallel to the schema, each parsed from its default (INT, FLOAT, BOOL;
 * other types are left zero). `values` holds at least desc->n_options entries. */
void gb_test_default_values(const gb_plugin_desc *desc, gb_value *values);

/* Checks that a comm vtable has every entry. */
int gb_test_check_comm_entries(const gb_comm_ops *ops);
/* A comm plugin's request bookkeeping: GB_COMM_MAX_INFLIGHT all-reduces in flight with
 * distinct ids, one more refused, waits out of order, a second wait and an unknown id
 * refused, then unknown dtypes, reduce ops and a NULL buffer. `buf` holds
 * 16 * GB_COMM_MAX_INFLIGHT floats the plugin can reduce in place (device memory for a
 * GPU plugin). */
int gb_test_check_requests(const gb_comm_ops *ops, void *self, float *buf);

/* A TCP port nobody listens on right now (the kernel's choice for port 0); exits with
 * status 1 when there is none. */
int gb_test_free_port(void);

/* Prints "FAIL: <message>" and counts one failure when cond is false. */
#define GB_TEST_CHECK(failures, cond, ...)                                                   \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            printf("FAIL: ");                                                                \
            printf(__VA_ARGS__);                                                             \
            printf(" [%s:%d]\n", __FILE__, __LINE__);                                        \
            (failures)++;                                                                    \
        }                                                                                    \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
