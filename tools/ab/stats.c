/* Statistics for `gearbox ab`; see stats.h. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

#include "gearbox/engine/rng.h"

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void gb_stats_sort(double *x, size_t n)
{
    if (n > 1)
        qsort(x, n, sizeof *x, compare_doubles);
}

double gb_stats_quantile(const double *sorted, size_t n, double q)
{
    if (n == 0)
        return NAN;
    double h = q * (double)(n - 1);
    size_t i = (size_t)floor(h);
    if (i + 1 >= n)
        return sorted[n - 1];
    return sorted[i] + (h - (double)i) * (sorted[i + 1] - sorted[i]);
}

gb_stats_summary gb_stats_summarize(double *x, size_t n)
{
    gb_stats_sort(x, n);
    return (gb_stats_summary){
        .n = n,
        .min = n ? x[0] : NAN,
        .q25 = gb_stats_quantile(x, n, 0.25),
        .median = gb_stats_quantile(x, n, 0.5),
        .q75 = gb_stats_quantile(x, n, 0.75),
        .max = n ? x[n - 1] : NAN,
    };
}

double gb_stats_t975(int df)
{
    static const double table[30] = {
        12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
        2.2010,  2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
        2.0796,  2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
    };
    if (df < 1)
        return NAN;
    if (df <= 30)
        return table[df - 1];
    const double z = 1.959963984540054, n = df;
    const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
    return z + (z3 + z) / (4 * n) + (5 * z5 + 16 * z3 + 3 * z) / (96 * n * n) +
           (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * n * n * n);
}

int gb_stats_paired_ratio(const double *num, const double *den, size_t n, gb_stats_ci *out)
{
    if (n < 2)
        return -1;
    double sum = 0.0, sum_sq = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!(num[i] > 0.0) || !(den[i] > 0.0))
            return -1;
        double d = log(num[i] / den[i]);
        sum += d;
        sum_sq += d * d;
    }
    double mean = sum / (double)n;
    double var = (sum_sq - sum * mean) / (double)(n - 1);
    double half = gb_stats_t975((int)n - 1) * sqrt(var > 0.0 ? var / (double)n : 0.0);
    *out = (gb_stats_ci){exp(mean), exp(mean - half), exp(mean + half)};
    return 0;
}

static double resampled_median(const double *x, size_t n, double *scratch, gb_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        scratch[i] = x[gb_rng_below(rng, n)];
    gb_stats_sort(scratch, n);
    return gb_stats_quantile(scratch, n, 0.5);
}

static double median_of(const double *x, size_t n, double *scratch)
{
    for (size_t i = 0; i < n; i++)
        scratch[i] = x[i];
    gb_stats_sort(scratch, n);
    return gb_stats_quantile(scratch, n, 0.5);
}

int gb_stats_bootstrap_ratio(const double *num, size_t n_num, const double *den, size_t n_den,
                             int resamples, uint64_t seed, gb_stats_ci *out)
{
    if (n_num == 0 || n_den == 0 || resamples < 100)
        return -1;
    double *scratch = malloc((n_num > n_den ? n_num : n_den) * sizeof *scratch);
    double *ratios = malloc((size_t)resamples * sizeof *ratios);
    int rc = -1;
    if (!scratch || !ratios)
        goto done;
    double m_num = median_of(num, n_num, scratch), m_den = median_of(den, n_den, scratch);
    if (!(m_num > 0.0) || !(m_den > 0.0))
        goto done;
    gb_rng rng = {seed};
    for (int i = 0; i < resamples; i++) {
        double a = resampled_median(num, n_num, scratch, &rng);
        ratios[i] = a / resampled_median(den, n_den, scratch, &rng);
    }
    gb_stats_sort(ratios, (size_t)resamples);
    *out = (gb_stats_ci){m_num / m_den, gb_stats_quantile(ratios, (size_t)resamples, 0.025),
                         gb_stats_quantile(ratios, (size_t)resamples, 0.975)};
    rc = 0;
done:
    free(scratch);
    free(ratios);
    return rc;
}
