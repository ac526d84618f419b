/* The run manifest; see manifest.h. The document is built as a Jansson tree, whose
 * objects keep the order members were added in, and written indented by two. */
#include "manifest.h"

#include <errno.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "machine.h"
#include "report.h"

int gb_manifest_sha256_file(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    struct sha256_ctx h;
    unsigned char buf[65536], digest[SHA256_DIGEST_SIZE];
    size_t n;
    sha256_init(&h);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        sha256_update(&h, n, buf);
    int failed = ferror(f);
    fclose(f);
    if (failed)
        return -1;
    sha256_digest(&h, sizeof digest, digest);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    return 0;
}

/* A string, or null for NULL. JSON text is UTF-8: a path or host name in another
 * encoding is recorded with '?' for each byte outside ASCII rather than not at all. */
static json_t *string_or_null(const char *s)
{
    json_t *value = s ? json_string(s) : json_null();
    if (value || !s)
        return value;
    char *ascii = strdup(s);
    for (char *c = ascii; c && *c; c++)
        if ((unsigned char)*c >= 0x80)
            *c = '?';
    value = ascii ? json_string(ascii) : NULL;
    free(ascii);
    return value;
}

/* The INI text written by gb_config_write ("[section]" and "key = value" lines) as an
 * object of section objects; values stay the strings the INI file holds. */
static json_t *config_object(const char *ini)
{
    json_t *config = json_object(), *section = NULL;
    char *copy = strdup(ini), *rest = copy;
    for (char *line; copy && (line = strtok_r(rest, "\n", &rest));) {
        char *eq = strstr(line, " = ");
        if (line[0] == '[') {
            line[strcspn(line, "]")] = '\0';
            section = json_object();
            json_object_set_new(config, line + 1, section);
        } else if (eq && section) {
            *eq = '\0';
            json_object_set_new(section, line, string_or_null(eq + 3));
        }
    }
    free(copy);
    return config;
}

static json_t *plugins_array(const gb_runtime *rt)
{
    json_t *plugins = json_array();
    for (int k = GB_KIND_DEVICE; k <= GB_KIND_COMM; k++) {
        const gb_plugin *p = rt->inst[k].plugin;
        char sha[65], abi[32];
        int hashed = gb_manifest_sha256_file(p->path, sha) == 0;
        snprintf(abi, sizeof abi, "%u.%u", p->desc->abi_major, p->desc->abi_minor);
        json_array_append_new(plugins, json_pack("{s:s, s:o, s:o, s:o, s:o, s:s}",
            "kind", gb_kind_name(p->desc->kind), "name", string_or_null(p->desc->name),
            "version", string_or_null(p->desc->version), "path", string_or_null(p->path),
            "sha256", string_or_null(hashed ? sha : NULL), "abi", abi));
    }
    return plugins;
}

static json_t *libraries_object(void)
{
    char text[256];
    json_t *libraries = json_object();
    gb_openmp_version(text, sizeof text);
    json_object_set_new(libraries, "openmp", json_string(text));
    for (int lib = 0; lib < GB_LIB_COUNT; lib++) {
        gb_library_version((gb_library)lib, 0, text, sizeof text);
        json_object_set_new(libraries, gb_library_name((gb_library)lib), json_string(text));
    }
    return libraries;
}

static json_t *cpu_object(void)
{
    gb_cpu_features cpu;
    gb_cpu_detect(&cpu);
    return json_pack("{s:o, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:i, s:s}",
                     "model", string_or_null(cpu.model), "avx2", cpu.avx2, "fma", cpu.fma,
                     "avx512f", cpu.avx512f, "avx512_bf16", cpu.avx512_bf16,
                     "avx512_fp16", cpu.avx512_fp16, "amx_tile", cpu.amx_tile,
                     "amx_bf16", cpu.amx_bf16, "online_cpus", gb_online_cpus(),
                     "build_features", gb_build_features());
}

static json_t *device_object(const gb_runtime *rt)
{
    gb_device_info info = {.struct_size = sizeof info};
    const gb_instance *dev = &rt->inst[GB_KIND_DEVICE];
    int known = rt->dev->info(dev->self, &info) == GB_OK;
    /* The libraries it computes with: ABI 1.2, left empty by a plugin built before. */
    int libraries = known && info.libraries[0] &&
                    info.struct_size >= offsetof(gb_device_info, libraries) + sizeof info.libraries;
    return json_pack("{s:s, s:s, s:o, s:o, s:I, s:f, s:f}",
                     "family", rt->device.family,
                     "memory", rt->device.memory == GB_MEMORY_HOST ? "host" : "device",
                     "name", string_or_null(known ? info.name : NULL),
                     "libraries", string_or_null(libraries ? info.libraries : NULL),
                     "memory_bytes", (json_int_t)(known ? info.memory_bytes : 0),
                     "peak_flops_f32", known ? info.peak_flops_f32 : 0.0,
                     "peak_flops_bf16", known ? info.peak_flops_bf16 : 0.0);
}

static json_t *resolved_object(const gb_settings *s)
{
    return json_pack("{s:I, s:b, s:I, s:I, s:I}", "batch_size", (json_int_t)s->batch_size,
                     "batch_size_auto", s->batch_auto,
                     "gradient_accumulation_steps", (json_int_t)s->gradient_accumulation_steps,
                     "tokens_per_step",
                     (json_int_t)(s->batch_size * s->gradient_accumulation_steps * s->block_size),
                     "memory_budget_bytes", (json_int_t)s->memory_budget);
}

static json_t *manifest(const gb_runtime *rt, const char *ini, time_t start)
{
    char host[256] = "unknown", when[32] = "unknown", abi[32];
    gethostname(host, sizeof host - 1);
    struct tm utc;
    if (gmtime_r(&start, &utc))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
    snprintf(abi, sizeof abi, "%d.%d", GB_ABI_MAJOR, GB_ABI_MINOR);
    return json_pack("{s:s, s:s, s:s, s:o, s:s, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                     "gearbox_version", GB_VERSION, "git_revision", gb_git_revision,
                     "plugin_abi", abi, "hostname", string_or_null(host), "start_time", when,
                     "threads", (json_int_t)rt->settings.threads,
                     "omp_num_threads_env", string_or_null(getenv("OMP_NUM_THREADS")),
                     "config_ini", string_or_null(ini), "config", config_object(ini),
                     "resolved", resolved_object(&rt->settings), "plugins", plugins_array(rt),
                     "libraries", libraries_object(), "cpu", cpu_object(),
                     "device", device_object(rt));
}

int gb_manifest_write(const char *path, const gb_runtime *rt, const char *config_ini,
                      time_t start)
{
    json_t *doc = manifest(rt, config_ini, start);
    if (!doc) {
        gb_report(GB_REPORT_ERROR, "manifest", "gearbox: error: cannot write %s: out of memory",
                  path);
        return -1;
    }
    errno = 0;
    int rc = json_dump_file(doc, path, JSON_INDENT(2));
    json_decref(doc);
    if (rc != 0) {
        gb_report(GB_REPORT_ERROR, "manifest", "gearbox: error: cannot write %s: %s", path,
                  errno ? strerror(errno) : "write failed");
        return -1;
    }
    return 0;
}
