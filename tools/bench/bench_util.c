/* Shared helpers of the microbenchmarks; see bench_util.h. */
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int ascending(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

double gb_bench_median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, ascending);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int gb_bench_parse_long(const char *verb, const char *flag, const char *text, long lo, long hi,
                        long *out)
{
    char dashed[GB_BENCH_NAME_CAP + 2];
    unsigned long long n = 0;
    snprintf(dashed, sizeof dashed, "--%s", flag);
    if (gb_cli_parse_count(verb, dashed, text, (unsigned long long)lo, (unsigned long long)hi,
                           &n))
        return 2;
    *out = (long)n;
    return 0;
}

int gb_bench_parse_names(const char *verb, const char *flag, const char *text,
                         char (*names)[GB_BENCH_NAME_CAP], int max, int *count)
{
    *count = 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= GB_BENCH_NAME_CAP || *count == max)
            return gb_cli_usage_error(verb, "--%s %s: expected up to %d comma-separated plugin "
                                      "names", flag, text, max);
        memcpy(names[*count], p, len);
        names[(*count)++][len] = '\0';
        p += len + (p[len] == ',');
    }
    return *count ? 0 : gb_cli_usage_error(verb, "--%s is empty", flag);
}

int gb_bench_parse_dtype(const char *verb, const char *text, gb_dtype *out)
{
    static const gb_dtype choices[] = {GB_F32, GB_BF16, GB_F16};
    for (size_t k = 0; k < sizeof choices / sizeof choices[0]; k++)
        if (strcmp(text, gb_dtype_name(choices[k])) == 0) {
            *out = choices[k];
            return 0;
        }
    return gb_cli_usage_error(verb, "--dtype %s: expected f32, bf16 or f16", text);
}

int gb_bench_parse_options(const gb_cli_spec *spec, int argc, char **argv,
                           int (*on_option)(void *ctx, int index, const char *value), void *ctx)
{
    int first;
    int rc = gb_cli_parse(spec, argc, argv, on_option, ctx, &first);
    if (rc == 0 && first < argc)
        return gb_cli_usage_error(spec->verb, "unexpected argument %s", argv[first]);
    return rc;
}

int gb_bench_add_set(const char *verb, gb_bench_overrides *o, const char *line)
{
    if (o->n_sets == GB_BENCH_MAX_SETS)
        return gb_cli_usage_error(verb, "--set: at most %d", GB_BENCH_MAX_SETS);
    o->sets[o->n_sets++] = line;
    return 0;
}

int gb_bench_start(const char *text, const char *source, const gb_bench_overrides *o,
                   gb_config **cfg, gb_runtime **rt)
{
    gb_diag diag = {0};
    *cfg = gb_config_load_string(text, source, "/", &diag);
    for (int k = 0; *cfg && k < o->n_sets; k++)
        if (gb_config_set(*cfg, o->sets[k], &diag))
            break;
    int started = *cfg && !diag.count &&
                  (*rt = gb_runtime_open(*cfg, o->plugin_path, &diag)) &&
                  !gb_runtime_start(*rt, &diag);
    gb_diag_print(&diag, stderr);
    gb_diag_clear(&diag);
    return started ? 0 : -1;
}

void gb_bench_stop(gb_config *cfg, gb_runtime *rt)
{
    gb_runtime_close(rt);
    gb_config_free(cfg);
}

void gb_bench_free_buffers(gb_runtime *rt, void *const *ptrs, size_t n)
{
    void *self = gb_runtime_instance(rt, GB_KIND_DEVICE)->self;
    for (size_t k = 0; k < n; k++)
        if (ptrs[k])
            gb_runtime_device_ops(rt)->free(self, ptrs[k]);
}
