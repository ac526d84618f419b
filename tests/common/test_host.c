/* Host table, plugin loading and descriptor checks for the tests; see test_host.h. */
#include "test_host.h"

#include "instance.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static char last_error[1024];

static void host_log(const gb_host *host, gb_log_level level, const char *fmt, ...)
{
    (void)host;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "plugin %s: ", (unsigned)level < 4 ? names[level] : "?");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void host_set_error(const gb_host *host, const char *fmt, ...)
{
    (void)host;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

const gb_host *gb_test_host(void)
{
    static gb_host host;
    gb_host_init(&host, omp_get_max_threads());
    host.log = host_log;
    host.set_error = host_set_error;
    return &host;
}

const char *gb_test_last_error(void)
{
    return last_error;
}

void gb_test_clear_error(void)
{
    last_error[0] = '\0';
}

const gb_device_ctx *gb_test_cpu_ctx(void)
{
    static const gb_device_ctx cpu = {
        .struct_size = sizeof(gb_device_ctx),
        .device = GB_DEVICE_CPU,
        .ordinal = 0,
        .stream = NULL,
    };
    return &cpu;
}

const gb_plugin_desc *gb_test_open_plugin(const char *path, void **handle)
{
    *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*handle) {
        printf("FAIL: cannot load %s: %s\n", path, dlerror());
        return NULL;
    }
    gb_plugin_entry_fn entry;
    /* The object-to-function pointer cast POSIX guarantees for dlsym(). */
    *(void **)&entry = dlsym(*handle, GB_PLUGIN_ENTRY_NAME);
    const gb_plugin_desc *desc = entry ? entry() : NULL;
    if (!desc) {
        printf("FAIL: %s has no usable %s\n", path, GB_PLUGIN_ENTRY_NAME);
        dlclose(*handle);
        *handle = NULL;
    }
    return desc;
}

void gb_test_usage_unless(int args_ok, const char *prog, const char *args)
{
    if (args_ok)
        return;
    fprintf(stderr, "usage: %s %s\n", prog, args);
    exit(2);
}

const gb_plugin_desc *gb_test_load_plugin(const char *path)
{
    void *handle;
    const gb_plugin_desc *desc = gb_test_open_plugin(path, &handle);
    if (!desc)
        exit(1);
    return desc;
}

/* The index of the struct in `table` whose first member, its name, is `name`; -1 if none. */
static int find_named(const void *table, size_t n, size_t stride, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        const char *const *entry = (const void *)((const char *)table + i * stride);
        if (strcmp(*entry, name) == 0)
            return (int)i;
    }
    return -1;
}

int gb_test_named_plugin(int argc, char **argv, int want_argc, const void *table, size_t n,
                         size_t stride, const char *args, const gb_plugin_desc **desc)
{
    const int known = argc == want_argc ? find_named(table, n, stride, argv[1]) : -1;
    gb_test_usage_unless(known >= 0, argv[0], args);
    *desc = gb_test_load_plugin(argv[2]);
    return known;
}

int gb_test_check_descriptor(const gb_plugin_desc *desc, gb_kind kind, const char *name,
                             uint32_t devices, size_t ops_size)
{
    int failures = 0;
    GB_TEST_CHECK(failures, desc->struct_size == sizeof(gb_plugin_desc),
                  "descriptor struct_size %zu, expected %zu", desc->struct_size,
                  sizeof(gb_plugin_desc));
    GB_TEST_CHECK(failures, desc->abi_major == GB_ABI_MAJOR && desc->abi_minor == GB_ABI_MINOR,
                  "ABI %u.%u, expected %d.%d", desc->abi_major, desc->abi_minor, GB_ABI_MAJOR,
                  GB_ABI_MINOR);
    GB_TEST_CHECK(failures, desc->kind == kind, "kind %d, expected %d", desc->kind, kind);
    GB_TEST_CHECK(failures, desc->name && strcmp(desc->name, name) == 0,
                  "name \"%s\", expected \"%s\"", desc->name ? desc->name : "(null)", name);
    GB_TEST_CHECK(failures, desc->version && desc->version[0], "no version string");
    GB_TEST_CHECK(failures, desc->description && desc->description[0], "no description");
    GB_TEST_CHECK(failures, desc->devices == devices, "devices 0x%x, expected 0x%x",
                  desc->devices, devices);
    GB_TEST_CHECK(failures, desc->options || desc->n_options == 0,
                  "%zu options but no table", desc->n_options);
    for (size_t i = 0; desc->options && i < desc->n_options; i++) {
        const gb_option *o = &desc->options[i];
        GB_TEST_CHECK(failures, o->key && o->default_value && o->help && o->help[0],
                      "option %zu lacks a key, default or help line", i);
    }
    GB_TEST_CHECK(failures, desc->ops && *(const size_t *)desc->ops == ops_size,
                  "vtable struct_size %zu, expected %zu",
                  desc->ops ? *(const size_t *)desc->ops : 0, ops_size);
    return failures;
}

int gb_test_option_index(const gb_plugin_desc *desc, const char *key)
{
    for (size_t i = 0; i < desc->n_options; i++)
        if (desc->options[i].key && strcmp(desc->options[i].key, key) == 0)
            return (int)i;
    return -1;
}

int gb_test_check_option(const gb_plugin_desc *desc, const char *key, gb_option_type type,
                         const char *default_value)
{
    int failures = 0;
    int index = gb_test_option_index(desc, key);
    const gb_option *o = index >= 0 ? &desc->options[index] : NULL;
    GB_TEST_CHECK(failures, o != NULL, "option %s missing", key);
    if (!o)
        return failures;
    GB_TEST_CHECK(failures, o->type == type, "option %s has type %d, expected %d", key,
                  o->type, type);
    GB_TEST_CHECK(failures, o->default_value && strcmp(o->default_value, default_value) == 0,
                  "option %s defaults to \"%s\", expected \"%s\"", key,
                  o->default_value ? o->default_value : "(null)", default_value);
    return failures;
}

void gb_test_default_values(const gb_plugin_desc *desc, gb_value *values)
{
    for (size_t i = 0; i < desc->n_options; i++) {
        const gb_option *o = &desc->options[i];
        memset(&values[i], 0, sizeof values[i]);
        if (o->type == GB_OPT_INT)
            values[i].i = strtoll(o->default_value, NULL, 0);
        else if (o->type == GB_OPT_FLOAT)
            values[i].f = strtod(o->default_value, NULL);
        else if (o->type == GB_OPT_BOOL)
            values[i].i = !strcasecmp(o->default_value, "true") ||
                          !strcasecmp(o->default_value, "yes") ||
                          !strcasecmp(o->default_value, "on") ||
                          !strcmp(o->default_value, "1");
    }
}

int gb_test_check_comm_entries(const gb_comm_ops *ops)
{
    int failures = 0;
    GB_TEST_CHECK(failures, ops->create && ops->destroy && ops->rank && ops->world &&
                                ops->all_reduce_start && ops->all_reduce_wait &&
                                ops->broadcast && ops->barrier,
                  "vtable has NULL entries");
    return failures;
}

int gb_test_check_requests(const gb_comm_ops *ops, void *self, float *buf)
{
    int failures = 0;
    gb_comm_request reqs[GB_COMM_MAX_INFLIGHT];
    for (int i = 0; i < GB_COMM_MAX_INFLIGHT; i++) {
        gb_status st =
            ops->all_reduce_start(self, buf + 16 * i, 16, GB_F32, GB_REDUCE_SUM, &reqs[i]);
        GB_TEST_CHECK(failures, st == GB_OK, "request %d of %d refused: %s", i + 1,
                      GB_COMM_MAX_INFLIGHT, gb_test_last_error());
        for (int j = 0; j < i; j++)
            GB_TEST_CHECK(failures, reqs[j] != reqs[i], "requests %d and %d share an id", j, i);
    }
    gb_comm_request extra;
    gb_test_clear_error();
    gb_status st = ops->all_reduce_start(self, buf, 1, GB_F32, GB_REDUCE_SUM, &extra);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "request %d beyond the limit returned %d", GB_COMM_MAX_INFLIGHT + 1, st);
    for (int i = GB_COMM_MAX_INFLIGHT - 1; i >= 0; i -= 2)   /* out of order */
        GB_TEST_CHECK(failures, ops->all_reduce_wait(self, reqs[i]) == GB_OK,
                      "wait on request %d failed: %s", i, gb_test_last_error());
    for (int i = 0; i < GB_COMM_MAX_INFLIGHT; i += 2)
        GB_TEST_CHECK(failures, ops->all_reduce_wait(self, reqs[i]) == GB_OK,
                      "wait on request %d failed: %s", i, gb_test_last_error());
    gb_test_clear_error();
    st = ops->all_reduce_wait(self, reqs[0]);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG && gb_test_last_error()[0],
                  "waiting twice on a request returned %d", st);
    st = ops->all_reduce_wait(self, 123456789);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG, "wait on an unknown request returned %d", st);
    st = ops->all_reduce_start(self, buf, 1, (gb_dtype)99, GB_REDUCE_SUM, &extra);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG, "unknown dtype returned %d", st);
    st = ops->all_reduce_start(self, buf, 1, GB_F32, (gb_reduce_op)7, &extra);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG, "unknown reduce op returned %d", st);
    st = ops->all_reduce_start(self, NULL, 4, GB_F32, GB_REDUCE_SUM, &extra);
    GB_TEST_CHECK(failures, st == GB_ERR_INVALID_ARG, "NULL buffer returned %d", st);
    printf("request bookkeeping: %d in flight, out-of-order waits, refusals\n",
           GB_COMM_MAX_INFLIGHT);
    return failures;
}

int gb_test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        perror("free_port");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}
