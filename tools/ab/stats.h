/* The statistics behind `gearbox ab`'s verdict, as small pure functions: order statistics
 * (median, quantiles), a paired ratio with a t-interval on log-ratios, and a percentile
 * bootstrap of a ratio of medians for when there is only one pair.
 *
 * Deliberately left out: outlier rejection (the median and the interquartile range are
 * already robust to a few slow steps), hypothesis tests and p-values (an interval says
 * more), and any confidence level other than 95%.
 */
#ifndef GB_AB_STATS_H
#define GB_AB_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Sorts x ascending, in place. */
void gb_stats_sort(double *x, size_t n);

/* The q-quantile (0 <= q <= 1) of sorted x, interpolating linearly between order
 * statistics (R's type 7, NumPy's default). NaN when n is 0. */
double gb_stats_quantile(const double *sorted, size_t n, double q);

typedef struct gb_stats_summary {
    size_t n;
    double min, q25, median, q75, max;   /* NaN when n is 0 */
} gb_stats_summary;

/* Five-number summary of x; sorts x in place. */
gb_stats_summary gb_stats_summarize(double *x, size_t n);

/* The 0.975 quantile of Student's t with `df` degrees of freedom (df >= 1): exact
 * table values to df 30, the Cornish-Fisher expansion beyond (error below 1e-4). */
double gb_stats_t975(int df);

typedef struct gb_stats_ci {
    double estimate;   /* the point estimate */
    double lo, hi;     /* its 95% confidence interval */
} gb_stats_ci;

/* For n >= 2 pairs, the ratio num[i] / den[i] as the geometric mean of the pair ratios,
 * with a 95% t-interval (n - 1 degrees of freedom) on the mean log-ratio mapped back by
 * exp. Pairing cancels what a pair shares (the machine's speed at the time). Returns 0,
 * or -1 when n < 2 or a value is not positive. */
int gb_stats_paired_ratio(const double *num, const double *den, size_t n, gb_stats_ci *out);

/* median(num) / median(den), with a 95% percentile-bootstrap interval: `resamples`
 * times, each sample is resampled with replacement on its own and the ratio of the
 * resampled medians recorded. The random stream is SplitMix64 from `seed`, so the same
 * input gives the same interval. Returns 0, or -1 when a sample is empty, a median is
 * not positive, resamples < 100, or memory runs out. */
int gb_stats_bootstrap_ratio(const double *num, size_t n_num, const double *den, size_t n_den,
                             int resamples, uint64_t seed, gb_stats_ci *out);

#endif
