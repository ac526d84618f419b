/* `[run] threads = auto`'s trials and choice; see threads_auto.h. */
#include "threads_auto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A trial's step k: its block runs on `most` threads when even, on one when odd. */
static int trial_threads(const gb_threads_auto *a, int64_t k)
{
    return (k / GB_THREADS_TRIAL_BLOCK) % 2 == 0 ? a->most : 1;
}

static void start_trial(gb_threads_auto *a, int early)
{
    a->trying = 1;
    a->early = early;
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
    a->interval = GB_THREADS_RECHECK_STEPS;
    if (a->most > 1)
        start_trial(a, 0);
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

/* The median of n values, the upper one of an even count (n at most 8). */
static double median_of(const double *v, int n)
{
    double sorted[8];
    memcpy(sorted, v, (size_t)n * sizeof *v);
    qsort(sorted, (size_t)n, sizeof sorted[0], by_value);
    return sorted[n / 2];
}

/* The better (lower) of a count's block medians. */
static double better_block(double blocks[GB_THREADS_TRIAL_ROUNDS][GB_THREADS_TRIAL_BLOCK - 1])
{
    double best = median_of(blocks[0], GB_THREADS_TRIAL_BLOCK - 1);
    for (int r = 1; r < GB_THREADS_TRIAL_ROUNDS; r++) {
        const double m = median_of(blocks[r], GB_THREADS_TRIAL_BLOCK - 1);
        best = m < best ? m : best;
    }
    return best;
}

/* Ends the trial with each count's figure; 1 when its choice differs from the one before. */
static int settle(gb_threads_auto *a, double on_most, double on_one)
{
    a->ratio = on_most / on_one;
    const int before = a->chosen;
    a->chosen = gb_threads_auto_choose(a->most, a->ratio);
    a->chosen_ms = a->chosen == 1 ? on_one : on_most;
    a->now = a->chosen;
    a->trying = 0;
    a->in_phase = 0;
    /* news, or a machine that just changed, brings the next trial close; a trial that
     * confirms the last one puts it twice as far (GB_THREADS_RECHECK_MAX is 200 x 2^4) */
    if (a->chosen != before || a->early)
        a->interval = GB_THREADS_RECHECK_STEPS;
    else if (a->interval < GB_THREADS_RECHECK_MAX)
        a->interval *= 2;
    return a->chosen != before;
}

/* Step `at` of the long block on every thread that follows blocks in which one thread
 * was faster: its last GB_THREADS_LONG_TIMED steps show the team once settled. */
static int observe_long_block(gb_threads_auto *a, int64_t at, double step_ms)
{
    const int64_t first_timed = GB_THREADS_LONG_BLOCK - GB_THREADS_LONG_TIMED;
    if (at >= first_timed)
        a->long_ms[at - first_timed] = step_ms;
    if (at + 1 < GB_THREADS_LONG_BLOCK)
        return 0;
    const double settled = median_of(a->long_ms, GB_THREADS_LONG_TIMED);
    return settle(a, settled < a->on_most ? settled : a->on_most, a->on_one);
}

int gb_threads_auto_observe(gb_threads_auto *a, double step_ms)
{
    const int64_t k = a->in_phase++;
    if (!a->trying) {
        a->slow_streak = step_ms > GB_THREADS_SLOWER * a->chosen_ms ? a->slow_streak + 1 : 0;
        if (a->most > 1 && a->slow_streak >= GB_THREADS_SLOW_STREAK)
            start_trial(a, 1);
        else if (a->most > 1 && a->in_phase >= a->interval)
            start_trial(a, 0);
        return 0;
    }
    if (k >= GB_THREADS_TRIAL_STEPS)
        return observe_long_block(a, k - GB_THREADS_TRIAL_STEPS, step_ms);
    const int64_t block = k / GB_THREADS_TRIAL_BLOCK, at = k % GB_THREADS_TRIAL_BLOCK;
    if (at > 0)
        a->ms[block % 2][block / 2][at - 1] = step_ms;
    if (k + 1 < GB_THREADS_TRIAL_STEPS) {
        a->now = trial_threads(a, k + 1);
        return 0;
    }
    a->on_most = better_block(a->ms[0]);
    a->on_one = better_block(a->ms[1]);
    if (a->on_most <= a->on_one)
        return settle(a, a->on_most, a->on_one);
    a->now = a->most;   /* one looked faster: the long block on every thread decides */
    return 0;
}

void gb_threads_auto_describe(const gb_threads_auto *a, char *buf, size_t cap)
{
    if (a->chosen == 1)
        snprintf(buf, cap, "threads: auto -> 1 (%d threads were %.2fx slower than 1: the "
                 "machine is busy; trying again within %lld steps)", a->most, a->ratio,
                 (long long)a->interval);
    else
        snprintf(buf, cap, "threads: auto -> %d (%.2fx faster than 1 thread; trying again "
                 "within %lld steps)", a->most, 1.0 / a->ratio, (long long)a->interval);
}
