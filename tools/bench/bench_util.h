/* What the microbenchmarks share: the median of repeated timings and the parsing of their
 * numeric and list options, with messages that name the benchmark and the flag. */
#ifndef GB_BENCH_UTIL_H
#define GB_BENCH_UTIL_H

#define GB_BENCH_NAME_CAP 64

/* The median of v (n > 0); sorts v in place. */
double gb_bench_median(double *v, long n);

/* `text` as an integer in [lo, hi] into *out: 0, or 2 after a usage message for `verb`
 * ("bench attn") naming the option `flag` (its long name, without "--"). */
int gb_bench_parse_long(const char *verb, const char *flag, const char *text, long lo, long hi,
                        long *out);

/* A comma-separated list of at most `max` names into names[] (*count of them): 0, or 2
 * after a usage message naming the option `flag` (without "--"). */
int gb_bench_parse_names(const char *verb, const char *flag, const char *text,
                         char (*names)[GB_BENCH_NAME_CAP], int max, int *count);

#endif
