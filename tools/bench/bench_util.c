/* Shared helpers of the microbenchmarks; see bench_util.h. */
#include "bench_util.h"

#include <errno.h>
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
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi)
        return gb_cli_usage_error(verb, "--%s %s: expected an integer in [%ld, %ld]", flag, text,
                                  lo, hi);
    *out = v;
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
