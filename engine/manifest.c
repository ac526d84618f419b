/* The run manifest; see manifest.h. Written with fprintf: the document is small and its
 * shape fixed, so a JSON library would add a dependency and nothing else. */
#include "manifest.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "machine.h"
#include "sha256.h"

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* `"key": "value"` (value may be NULL: null), preceded by a comma unless first. */
static void json_field(FILE *f, int indent, int first, const char *key, const char *value)
{
    fprintf(f, "%s\n%*s", first ? "" : ",", indent, "");
    json_string(f, key);
    fputs(": ", f);
    if (value)
        json_string(f, value);
    else
        fputs("null", f);
}

/* The INI text written by gb_config_write ("[section]" and "key = value" lines) as an
 * object of section objects; values stay the strings the INI file holds. */
static void write_config_object(FILE *f, const char *ini)
{
    char *copy = strdup(ini), *rest = copy;
    int open_section = 0, first_key = 1;
    fputs("{", f);
    for (char *line; copy && (line = strtok_r(rest, "\n", &rest));) {
        char *eq = strstr(line, " = ");
        if (line[0] == '[') {
            line[strcspn(line, "]")] = '\0';
            fprintf(f, "%s\n    ", open_section ? "\n    }," : "");
            json_string(f, line + 1);
            fputs(": {", f);
            open_section = 1;
            first_key = 1;
        } else if (eq && open_section) {
            *eq = '\0';
            json_field(f, 6, first_key, line, eq + 3);
            first_key = 0;
        }
    }
    fprintf(f, "%s\n  }", open_section ? "\n    }" : "");
    free(copy);
}

static void write_plugins(FILE *f, const gb_runtime *rt)
{
    fputs("[", f);
    for (int k = GB_KIND_DEVICE; k <= GB_KIND_COMM; k++) {
        const gb_plugin *p = rt->inst[k].plugin;
        char sha[65];
        int hashed = gb_sha256_file(p->path, sha) == 0;
        fprintf(f, "%s\n    {", k == GB_KIND_DEVICE ? "" : ",");
        json_field(f, 6, 1, "kind", gb_kind_name(p->desc->kind));
        json_field(f, 6, 0, "name", p->desc->name);
        json_field(f, 6, 0, "version", p->desc->version);
        json_field(f, 6, 0, "path", p->path);
        json_field(f, 6, 0, "sha256", hashed ? sha : NULL);
        fprintf(f, ",\n      \"abi\": \"%u.%u\"\n    }", p->desc->abi_major, p->desc->abi_minor);
    }
    fputs("\n  ]", f);
}

static void write_libraries(FILE *f)
{
    char text[256];
    fputs("{", f);
    gb_openmp_version(text, sizeof text);
    json_field(f, 4, 1, "openmp", text);
    for (int lib = 0; lib < GB_LIB_COUNT; lib++) {
        gb_library_version((gb_library)lib, 0, text, sizeof text);
        json_field(f, 4, 0, gb_library_name((gb_library)lib), text);
    }
    fputs("\n  }", f);
}

static void write_cpu(FILE *f)
{
    gb_cpu_features cpu;
    gb_cpu_detect(&cpu);
    fputs("{", f);
    json_field(f, 4, 1, "model", cpu.model);
    fprintf(f, ",\n    \"avx2\": %s,\n    \"fma\": %s,\n    \"avx512f\": %s,\n"
            "    \"avx512_bf16\": %s,\n    \"avx512_fp16\": %s,\n    \"amx_tile\": %s,\n"
            "    \"amx_bf16\": %s,\n    \"online_cpus\": %d", cpu.avx2 ? "true" : "false",
            cpu.fma ? "true" : "false", cpu.avx512f ? "true" : "false",
            cpu.avx512_bf16 ? "true" : "false", cpu.avx512_fp16 ? "true" : "false",
            cpu.amx_tile ? "true" : "false", cpu.amx_bf16 ? "true" : "false", gb_online_cpus());
    json_field(f, 4, 0, "build_features", gb_build_features());
    fputs("\n  }", f);
}

static void write_device(FILE *f, const gb_runtime *rt)
{
    gb_device_info info = {.struct_size = sizeof info};
    const gb_instance *dev = &rt->inst[GB_KIND_DEVICE];
    int known = rt->dev->info(dev->self, &info) == GB_OK;
    /* The libraries it computes with: ABI 1.2, left empty by a plugin built before. */
    int libraries = known && info.libraries[0] &&
                    info.struct_size >= offsetof(gb_device_info, libraries) + sizeof info.libraries;
    fputs("{", f);
    json_field(f, 4, 1, "name", known ? info.name : NULL);
    json_field(f, 4, 0, "libraries", libraries ? info.libraries : NULL);
    fprintf(f, ",\n    \"memory_bytes\": %llu,\n    \"peak_flops_f32\": %.6g,\n"
            "    \"peak_flops_bf16\": %.6g\n  }", known ? (unsigned long long)info.memory_bytes : 0,
            known ? info.peak_flops_f32 : 0.0, known ? info.peak_flops_bf16 : 0.0);
}

static void write_resolved(FILE *f, const gb_settings *s)
{
    fprintf(f, "{\n    \"batch_size\": %lld,\n    \"batch_size_auto\": %s,\n"
            "    \"gradient_accumulation_steps\": %lld,\n    \"tokens_per_step\": %lld,\n"
            "    \"memory_budget_bytes\": %llu\n  }", (long long)s->batch_size,
            s->batch_auto ? "true" : "false", (long long)s->gradient_accumulation_steps,
            (long long)(s->batch_size * s->gradient_accumulation_steps * s->block_size),
            (unsigned long long)s->memory_budget);
}

static void write_manifest(FILE *f, const gb_runtime *rt, const char *ini, time_t start)
{
    char host[256] = "unknown", when[32] = "unknown";
    gethostname(host, sizeof host - 1);
    struct tm utc;
    if (gmtime_r(&start, &utc))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
    fputs("{", f);
    json_field(f, 2, 1, "gearbox_version", GB_VERSION);
    json_field(f, 2, 0, "git_revision", gb_git_revision);
    fprintf(f, ",\n  \"plugin_abi\": \"%d.%d\"", GB_ABI_MAJOR, GB_ABI_MINOR);
    json_field(f, 2, 0, "hostname", host);
    json_field(f, 2, 0, "start_time", when);
    fprintf(f, ",\n  \"threads\": %lld", (long long)rt->settings.threads);
    json_field(f, 2, 0, "omp_num_threads_env", getenv("OMP_NUM_THREADS"));
    json_field(f, 2, 0, "config_ini", ini);
    fputs(",\n  \"config\": ", f);
    write_config_object(f, ini);
    fputs(",\n  \"resolved\": ", f);
    write_resolved(f, &rt->settings);
    fputs(",\n  \"plugins\": ", f);
    write_plugins(f, rt);
    fputs(",\n  \"libraries\": ", f);
    write_libraries(f);
    fputs(",\n  \"cpu\": ", f);
    write_cpu(f);
    fputs(",\n  \"device\": ", f);
    write_device(f, rt);
    fputs("\n}\n", f);
}

int gb_manifest_write(const char *path, const gb_runtime *rt, const char *config_ini,
                      time_t start)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "gearbox: error: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    write_manifest(f, rt, config_ini, start);
    if (fclose(f) != 0) {
        fprintf(stderr, "gearbox: error: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
