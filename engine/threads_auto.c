/* `[run] threads = auto`'s trials and choice; see threads_auto.h. */
#include "threads_auto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A trial's step k runs on `most` threads when k is even, on one when it is odd. */
static int trial_threads(const gb_threads_auto *a, int64_t k)
{
    return k % 2 == 0 ? a->most : 1;
}

static void start_trial(gb_threads_auto *a)
{
    a->trying = 1;
    a->in_phase = 0;
    a->slow_streak = 0;
    a->now = trial_threads(a, 0);
}

void gb_threads_auto_start(gb_threads_auto *a, int most)
{
    memset(a, 0, sizeof *a);
    a->most = most > 1 ? most : 1;
    a->now = a->most;
    a->chosen = a->most > 1 ? 0 : 1;
    if (a->most > 1)
        start_trial(a);
}

int gb_threads_auto_choose(int most, double ratio)
{
    return ratio <= 1.0 ? most : 1;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of the trial's GB_THREADS_TRIAL_PAIRS values v. */
static double median_of(const double *v)
{
    double sorted[GB_THREADS_TRIAL_PAIRS];
    memcpy(sorted, v, sizeof sorted);
    qsort(sorted, GB_THREADS_TRIAL_PAIRS, sizeof sorted[0], by_value);
    return sorted[GB_THREADS_TRIAL_PAIRS / 2];
}

/* Ends the trial; 1 when its choice differs from the one before. */
static int settle(gb_threads_auto *a)
{
    double ratios[GB_THREADS_TRIAL_PAIRS];
    for (int i = 0; i < GB_THREADS_TRIAL_PAIRS; i++)
        ratios[i] = a->ms[0][i] / a->ms[1][i];
    a->ratio = median_of(ratios);
    const int before = a->chosen;
    a->chosen = gb_threads_auto_choose(a->most, a->ratio);
    a->chosen_ms = median_of(a->ms[a->chosen == 1]);
    a->now = a->chosen;
    a->trying = 0;
    a->in_phase = 0;
    return a->chosen != before;
}

int gb_threads_auto_observe(gb_threads_auto *a, double step_ms)
{
    const int64_t k = a->in_phase++;
    if (!a->trying) {
        a->slow_streak = step_ms > GB_THREADS_SLOWER * a->chosen_ms ? a->slow_streak + 1 : 0;
        if (a->most > 1 && (a->in_phase >= GB_THREADS_RECHECK_STEPS ||
                            a->slow_streak >= GB_THREADS_SLOW_STREAK))
            start_trial(a);
        return 0;
    }
    if (k >= 2)
        a->ms[k % 2][(k - 2) / 2] = step_ms;
    if (k + 1 == GB_THREADS_TRIAL_STEPS)
        return settle(a);
    a->now = trial_threads(a, k + 1);
    return 0;
}

void gb_threads_auto_describe(const gb_threads_auto *a, char *buf, size_t cap)
{
    if (a->chosen == 1)
        snprintf(buf, cap, "threads: auto -> 1 (%d threads were %.2fx slower than 1: the "
                 "machine is busy; trying again within %d steps)", a->most, a->ratio,
                 GB_THREADS_RECHECK_STEPS);
    else
        snprintf(buf, cap, "threads: auto -> %d (%.2fx faster than 1 thread; trying again "
                 "within %d steps)", a->most, 1.0 / a->ratio, GB_THREADS_RECHECK_STEPS);
}
