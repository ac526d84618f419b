/* `[run] threads = auto`'s trials and choice; see threads_auto.h. */
#include "threads_auto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gb_threads_auto_start(gb_threads_auto *a, int most)
{
    memset(a, 0, sizeof *a);
    a->most = most > 1 ? most : 1;
    a->now = a->most;
    a->phase = a->most > 1 ? GB_THREADS_TRY_MOST : GB_THREADS_SETTLED;
    a->chosen = a->most > 1 ? 0 : 1;
}

int gb_threads_auto_choose(int most, double ms_most, double ms_one)
{
    return ms_most <= ms_one ? most : 1;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median_of(const double *ms)
{
    double sorted[GB_THREADS_TRIAL_MEASURED];
    memcpy(sorted, ms, sizeof sorted);
    qsort(sorted, GB_THREADS_TRIAL_MEASURED, sizeof sorted[0], by_value);
    return sorted[GB_THREADS_TRIAL_MEASURED / 2];
}

/* Ends the trial; 1 when its choice differs from the one before. */
static int settle(gb_threads_auto *a)
{
    a->median[0] = median_of(a->ms[0]);
    a->median[1] = median_of(a->ms[1]);
    const int before = a->chosen;
    a->chosen = gb_threads_auto_choose(a->most, a->median[0], a->median[1]);
    a->now = a->chosen;
    a->phase = GB_THREADS_SETTLED;
    a->in_phase = 0;
    return a->chosen != before;
}

int gb_threads_auto_observe(gb_threads_auto *a, double step_ms)
{
    const int64_t counted = a->in_phase++ - GB_THREADS_TRIAL_WARMUP;
    switch (a->phase) {
    case GB_THREADS_TRY_MOST:
    case GB_THREADS_TRY_ONE: {
        const int which = a->phase == GB_THREADS_TRY_ONE;
        if (counted >= 0)
            a->ms[which][counted] = step_ms;
        if (counted + 1 < GB_THREADS_TRIAL_MEASURED)
            return 0;
        if (which)
            return settle(a);
        a->phase = GB_THREADS_TRY_ONE;
        a->now = 1;
        a->in_phase = 0;
        return 0;
    }
    case GB_THREADS_SETTLED:
        if (a->most > 1 && a->in_phase >= GB_THREADS_RECHECK_STEPS) {
            a->phase = GB_THREADS_TRY_MOST;
            a->now = a->most;
            a->in_phase = 0;
        }
        return 0;
    }
    return 0;
}

void gb_threads_auto_describe(const gb_threads_auto *a, char *buf, size_t cap)
{
    const double one = a->median[1], most = a->median[0];
    if (a->chosen == 1)
        snprintf(buf, cap, "threads: auto -> 1 (%d threads were %.2fx slower than 1: the "
                 "machine is busy; trying again in %d steps)", a->most, most / one,
                 GB_THREADS_RECHECK_STEPS);
    else
        snprintf(buf, cap, "threads: auto -> %d (%.2fx faster than 1 thread; trying again "
                 "in %d steps)", a->most, one / most, GB_THREADS_RECHECK_STEPS);
}
