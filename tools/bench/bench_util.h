/* What the microbenchmarks share: the median of repeated timings, the parsing of their
 * options, with messages that name the benchmark and the flag, and the runs they time
 * plugins in. */
#ifndef GB_BENCH_UTIL_H
#define GB_BENCH_UTIL_H

#include <stddef.h>

#include "cli.h"
#include "gearbox/engine/run.h"

#define GB_BENCH_NAME_CAP 64

/* The option-table entries (options.h) of the benchmarks that take them. */
#define GB_BENCH_OPTION_THREADS                                                            \
    {"threads", 0, "N", "OpenMP threads; 0 for every online CPU (default 0)"}
#define GB_BENCH_OPTION_DEVICE {"device", 0, "NAME", "device plugin: cpu or cuda (default cpu)"}

/* The median of v (n > 0); sorts v in place. */
double gb_bench_median(double *v, long n);

/* `text` as a whole number from lo (0 or more) to hi into *out, read as gb_cli_parse_count
 * reads it: 0, or 2 after a usage message for `verb` ("bench attn") naming the option
 * `flag` (its long name, without "--"). */
int gb_bench_parse_long(const char *verb, const char *flag, const char *text, long lo, long hi,
                        long *out);

/* A comma-separated list of at most `max` names into names[] (*count of them): 0, or 2
 * after a usage message naming the option `flag` (without "--"). */
int gb_bench_parse_names(const char *verb, const char *flag, const char *text,
                         char (*names)[GB_BENCH_NAME_CAP], int max, int *count);

/* One of the activation dtypes f32, bf16, f16 by name into *out: 0, or 2 after a usage
 * message naming --dtype. */
int gb_bench_parse_dtype(const char *verb, const char *text, gb_dtype *out);

/* gb_cli_parse for a benchmark that takes options only: an operand is a usage error.
 * 0, -1 after --help, or the exit status of a usage error. */
int gb_bench_parse_options(const gb_cli_spec *spec, int argc, char **argv,
                           int (*on_option)(void *ctx, int index, const char *value), void *ctx);

#define GB_BENCH_MAX_SETS 8

/* What a benchmark's command line changes in every run it starts: its --set lines, applied
 * in order over each run's config, and its --plugin-path (NULL: the default search). */
typedef struct gb_bench_overrides {
    const char *sets[GB_BENCH_MAX_SETS];
    int n_sets;
    const char *plugin_path;
} gb_bench_overrides;

/* One --set line into o: 0, or 2 after a usage message for `verb` past GB_BENCH_MAX_SETS. */
int gb_bench_add_set(const char *verb, gb_bench_overrides *o, const char *line);

/* The run of the config `text` (called `source` in messages) with o's sets applied over
 * it, resolved against o's plugin path and started: 0, or -1 after printing the problems.
 * gb_bench_stop frees it, started or not. */
int gb_bench_start(const char *text, const char *source, const gb_bench_overrides *o,
                   gb_config **cfg, gb_runtime **rt);
void gb_bench_stop(gb_config *cfg, gb_runtime *rt);

/* Frees each of the n device buffers ptrs[] that is not NULL on rt's device. */
void gb_bench_free_buffers(gb_runtime *rt, void *const *ptrs, size_t n);

#endif
