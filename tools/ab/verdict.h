/* The verdict of `gearbox ab`: each variant's runs set against the baseline's, as
 * figures (step time, tokens/s, the speed ratio with its interval, loss differences) and
 * as the plain words printed under the table. Pure functions of the runs' metrics.
 *
 * Left out: anything about the runs themselves (see ab.h) and the presentation (report.c).
 * Steps up to `warmup` are excluded from timing, never from the loss comparison.
 */
#ifndef GB_AB_VERDICT_H
#define GB_AB_VERDICT_H

#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "stats.h"

/* The bootstrap's fixed seed, so that a report can be reproduced from its metrics. */
#define GB_AB_BOOTSTRAP_SEED 20240229u
#define GB_AB_BOOTSTRAP_RESAMPLES 2000

typedef struct gb_ab_timing {
    gb_stats_summary ms;    /* step time over the steady steps of every repeat */
    double tokens_per_s;    /* at the median step time */
    double mfu;             /* at the median step time; NaN when the runs do not report it */
} gb_ab_timing;

/* Pools the steady steps (step > warmup) of runs[0..repeats). */
gb_ab_timing gb_ab_timing_of(const gb_ab_run *runs, int repeats, int64_t warmup);

typedef struct gb_ab_speed {
    int ok;              /* 0: not enough steady steps to say */
    int bootstrap;       /* 1: one repeat, so a bootstrap over steps, not a t-interval */
    gb_stats_ci ratio;   /* baseline step time / variant step time: above 1 is faster */
} gb_ab_speed;

/* The speed of `other` against `base`, both with `repeats` runs. With two or more
 * repeats, run r of one is paired with run r of the other, each pair gives the ratio of
 * its median steady step times, and the interval is a t-interval on the log-ratios.
 * With one repeat, the steady steps of the two runs are bootstrapped instead. */
gb_ab_speed gb_ab_speed_of(const gb_ab_run *base, const gb_ab_run *other, int repeats,
                           int64_t warmup);

typedef struct gb_ab_loss_diff {
    size_t n_common;        /* steps logged by both runs */
    double max_step_diff;   /* largest |loss(variant) - loss(baseline)| over those steps */
    int64_t max_step;       /* the step where it is reached (the first such) */
    double d_last;          /* loss at the last common step: variant - baseline */
    double d_train, d_val;  /* final evaluation: variant - baseline; NaN when one lacks it */
} gb_ab_loss_diff;

gb_ab_loss_diff gb_ab_loss_compare(const gb_ab_run *base, const gb_ab_run *other);

/* One line on the loss: "same loss curve (max difference 0)", "same loss curve within
 * 3e-6" (every difference, per step and at the end, within `tolerance`; the bound is
 * the largest difference rounded up to one digit), or "final val loss 0.012 higher;
 * the curves differ by up to 0.031 (step 12)". */
void gb_ab_loss_reading(const gb_ab_loss_diff *d, double tolerance, char *buf, size_t cap);

/* When a run first evaluated at or below a target val loss (`gearbox ab --target-loss`). */
typedef struct gb_ab_reach {
    int reached;        /* 0: no evaluation of the run got there */
    int64_t step;       /* the step that evaluation followed */
    double seconds;     /* the logged steps' time up to and with that step, evaluations not
                         * counted; NaN when a step's time is missing */
} gb_ab_reach;

gb_ab_reach gb_ab_reach_of(const gb_ab_run *run, double target);

/* The run's planned bytes summed over the categories; NaN when it reports none. */
double gb_ab_planned_total(const gb_ab_run *run);

/* "flash: 1.83x faster (95% CI 1.79-1.88), 40% less planned memory, same loss curve
 * within 3e-6." An interval that contains 1 reads "no measurable speed difference
 * (1.01x, 95% CI 0.97-1.05)"; a slower variant reads "1.25x slower (95% CI 1.20-1.31)". */
void gb_ab_sentence(const char *name, const gb_ab_speed *speed, double base_planned,
                    double planned, const char *loss_reading, char *buf, size_t cap);

/* `x` with `digits` significant digits and a short exponent ("3e-6", "0.012", "12"). */
void gb_ab_short_number(double x, int digits, char *buf, size_t cap);

/* A speed ratio or one end of its interval: two decimals ("1.83"), or two significant
 * digits when that would hide it ("0.0012", "2.4e+04" as "2.4e4"). */
void gb_ab_ratio_number(double x, char *buf, size_t cap);

#endif
