/* Tests of the statistics behind `gearbox ab` (tools/ab/stats.c) on synthetic timings:
 * order statistics against hand-computed values, the t quantiles against published
 * tables, and both ratio intervals on inputs whose answer is known (a 2x ratio under
 * drift and noise, identical inputs). Every check prints what it got when it fails.
 */
#include <math.h>
#include <stdio.h>

#include "check.h"
#include "ab/stats.h"
#include "rng.h"

static int check_interval(const gb_stats_ci *c, double want, double max_width, const char *what,
                          int line)
{
    printf("%s: %.6f (95%% CI %.6f-%.6f)\n", what, c->estimate, c->lo, c->hi);
    int ok = c->lo <= want && want <= c->hi && c->lo <= c->estimate && c->estimate <= c->hi &&
             c->hi - c->lo <= max_width;
    if (!ok) {
        fprintf(stderr, "test_stats.c:%d: %s: interval %.6f-%.6f should contain %g, hold the "
                "estimate %.6f and be at most %g wide\n", line, what, c->lo, c->hi, want,
                c->estimate, max_width);
        check_failures++;
    }
    return ok;
}
#define CHECK_INTERVAL(ci, want, width, what) check_interval((ci), (want), (width), (what), __LINE__)

/* ---- order statistics ---------------------------------------------------------------- */

static void check_quantiles(void)
{
    double x[] = {4, 1, 3, 2};
    gb_stats_summary s = gb_stats_summarize(x, 4);
    CHECK(s.n == 4);
    CHECK_NEAR(s.min, 1, 0);
    CHECK_NEAR(s.q25, 1.75, 1e-12);    /* type 7: 1 + 0.75 * (2 - 1) */
    CHECK_NEAR(s.median, 2.5, 1e-12);
    CHECK_NEAR(s.q75, 3.25, 1e-12);
    CHECK_NEAR(s.max, 4, 0);
    CHECK(x[0] == 1 && x[3] == 4);     /* sorted in place */

    double odd[] = {5, 1, 3};
    CHECK_NEAR(gb_stats_summarize(odd, 3).median, 3, 0);
    double one[] = {7};
    gb_stats_summary single = gb_stats_summarize(one, 1);
    CHECK(single.min == 7 && single.q25 == 7 && single.median == 7 && single.max == 7);
    CHECK(isnan(gb_stats_summarize(one, 0).median));

    double ten[] = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
    gb_stats_sort(ten, 10);
    CHECK_NEAR(gb_stats_quantile(ten, 10, 0.0), 1, 0);
    CHECK_NEAR(gb_stats_quantile(ten, 10, 0.9), 9.1, 1e-12);
    CHECK_NEAR(gb_stats_quantile(ten, 10, 1.0), 10, 0);
}

static void check_t_quantiles(void)
{
    /* two-sided 95% critical values of Student's t */
    CHECK_NEAR(gb_stats_t975(1), 12.7062, 1e-4);
    CHECK_NEAR(gb_stats_t975(2), 4.3027, 1e-4);
    CHECK_NEAR(gb_stats_t975(4), 2.7764, 1e-4);
    CHECK_NEAR(gb_stats_t975(30), 2.0423, 1e-4);
    CHECK_NEAR(gb_stats_t975(31), 2.0395, 1e-4);
    CHECK_NEAR(gb_stats_t975(40), 2.0211, 1e-4);
    CHECK_NEAR(gb_stats_t975(60), 2.0003, 1e-4);
    CHECK_NEAR(gb_stats_t975(120), 1.9799, 1e-4);
    CHECK_NEAR(gb_stats_t975(100000), 1.9600, 1e-4);
    CHECK(isnan(gb_stats_t975(0)));
}

/* ---- paired ratio -------------------------------------------------------------------- */

/* The machine speeds up and slows down between repeats by up to 30%; within a pair both
 * sides see the same speed, plus 1% noise of their own. */
static void synthetic_pairs(double ratio, double *num, double *den, int n, uint64_t seed)
{
    static const double drift[] = {1.0, 1.3, 0.9, 1.15, 0.8, 1.05, 1.2, 0.95};
    gb_rng rng = {seed};
    for (int i = 0; i < n; i++) {
        double speed = drift[i % 8];
        den[i] = 40.0 * speed * (1.0 + 0.01 * gb_rng_normal(&rng));
        num[i] = ratio * 40.0 * speed * (1.0 + 0.01 * gb_rng_normal(&rng));
    }
}

static void check_paired_ratio(void)
{
    double num[8], den[8];
    gb_stats_ci ci;
    synthetic_pairs(2.0, num, den, 3, 1);
    CHECK(gb_stats_paired_ratio(num, den, 3, &ci) == 0);
    CHECK_INTERVAL(&ci, 2.0, 0.3, "2x ratio, 3 pairs under 30% drift");
    CHECK_NEAR(ci.estimate, 2.0, 0.04);

    synthetic_pairs(2.0, num, den, 8, 2);
    CHECK(gb_stats_paired_ratio(num, den, 8, &ci) == 0);
    CHECK_INTERVAL(&ci, 2.0, 0.06, "2x ratio, 8 pairs under 30% drift");

    synthetic_pairs(0.5, num, den, 5, 3);
    CHECK(gb_stats_paired_ratio(num, den, 5, &ci) == 0);
    CHECK_INTERVAL(&ci, 0.5, 0.05, "0.5x ratio, 5 pairs");

    /* identical inputs: exactly 1, with an interval of zero width */
    synthetic_pairs(1.0, num, den, 4, 4);
    CHECK(gb_stats_paired_ratio(num, num, 4, &ci) == 0);
    CHECK_INTERVAL(&ci, 1.0, 1e-12, "identical inputs");
    CHECK(ci.estimate == 1.0);

    /* the interval is symmetric on the log scale */
    synthetic_pairs(3.0, num, den, 4, 5);
    CHECK(gb_stats_paired_ratio(num, den, 4, &ci) == 0);
    CHECK_NEAR(log(ci.hi) - log(ci.estimate), log(ci.estimate) - log(ci.lo), 1e-12);

    CHECK(gb_stats_paired_ratio(num, den, 1, &ci) == -1);
    den[1] = 0.0;
    CHECK(gb_stats_paired_ratio(num, den, 4, &ci) == -1);
}

/* ---- bootstrap ----------------------------------------------------------------------- */

/* `n` step times around `ms` with 3% noise and the occasional stall. */
static void synthetic_steps(double ms, double *out, int n, uint64_t seed)
{
    gb_rng rng = {seed};
    for (int i = 0; i < n; i++)
        out[i] = ms * (1.0 + 0.03 * gb_rng_normal(&rng)) * (i % 17 == 5 ? 4.0 : 1.0);
}

static void check_bootstrap(void)
{
    double a[45], b[45];
    gb_stats_ci ci, again;
    synthetic_steps(80.0, a, 45, 10);
    synthetic_steps(40.0, b, 45, 11);
    CHECK(gb_stats_bootstrap_ratio(a, 45, b, 45, 2000, 42, &ci) == 0);
    CHECK_INTERVAL(&ci, 2.0, 0.15, "bootstrap, 2x ratio over 45 steps");
    CHECK(gb_stats_bootstrap_ratio(a, 45, b, 45, 2000, 42, &again) == 0);
    CHECK(ci.estimate == again.estimate && ci.lo == again.lo && ci.hi == again.hi);

    CHECK(gb_stats_bootstrap_ratio(a, 45, a, 45, 2000, 42, &ci) == 0);
    CHECK_INTERVAL(&ci, 1.0, 0.06, "bootstrap, identical inputs");
    CHECK(ci.estimate == 1.0);

    double same[10] = {5, 5, 5, 5, 5, 5, 5, 5, 5, 5};
    CHECK(gb_stats_bootstrap_ratio(same, 10, same, 10, 500, 1, &ci) == 0);
    CHECK(ci.estimate == 1.0 && ci.lo == 1.0 && ci.hi == 1.0);

    CHECK(gb_stats_bootstrap_ratio(a, 0, b, 45, 2000, 42, &ci) == -1);
    CHECK(gb_stats_bootstrap_ratio(a, 45, b, 45, 10, 42, &ci) == -1);
}

int main(void)
{
    check_quantiles();
    check_t_quantiles();
    check_paired_ratio();
    check_bootstrap();
    return check_exit("ab stats");
}
