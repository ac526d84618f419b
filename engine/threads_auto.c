/* `[run] threads = auto`'s trials and choice; see threads_auto.h. */
#include "threads_auto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A trial's step k: its block runs on `upper` threads when even, on `lower` when odd. */
static int trial_threads(const gb_threads_auto *a, int64_t k)
{
    return (k / GB_THREADS_TRIAL_BLOCK) % 2 == 0 ? a->upper : a->lower;
}

static void start_trial(gb_threads_auto *a, int upper, int lower, int downward, int early)
{
    a->upper = upper;
    a->lower = lower;
    a->downward = downward;
    a->trying = 1;
    a->early = early;
    a->in_phase = 0;
    a->slow_streak = 0;
    a->now = trial_threads(a, 0);
}

/* The team a trial puts against `from` threads: the cores not seen held by others, or
 * one fewer where none were (or it is not known); at least one thread fewer, at least 1. */
static int step_down(const gb_threads_auto *a, int from)
{
    int lower = a->held > 0 ? a->most - a->held : from - 1;
    lower = lower < from ? lower : from - 1;
    return lower > 1 ? lower : 1;
}

/* A trial that is due: all threads a step down while all are chosen, else against the
 * chosen count. A slow streak: the chosen count a step down (on one thread, all against
 * one). Either way the first of a chain of trials, which `changed` follows. */
static void start_due_trial(gb_threads_auto *a, int early)
{
    a->changed = 0;
    if (early && a->chosen > 1)
        start_trial(a, a->chosen, step_down(a, a->chosen), 1, 1);
    else if (a->chosen == a->most)
        start_trial(a, a->most, step_down(a, a->most), 1, early);
    else
        start_trial(a, a->most, a->chosen, 0, early);
}

void gb_threads_auto_start(gb_threads_auto *a, int most, int held)
{
    memset(a, 0, sizeof *a);
    a->most = most > 1 ? most : 1;
    a->held = held;
    a->now = a->most;
    a->chosen = a->most > 1 ? 0 : 1;
    a->interval = GB_THREADS_RECHECK_STEPS;
    if (a->most > 1)
        start_trial(a, a->most, step_down(a, a->most), 1, 0);
}

int gb_threads_auto_choose(int upper, int lower, double ratio)
{
    return ratio > 1.0 + GB_THREADS_MARGIN ? lower : upper;
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

/* Ends the trial with each count's figure; 1 when its choice differs from the one before.
 * A smaller team that won a step down goes on to meet one thread fewer, at once. */
static int settle(gb_threads_auto *a, double on_upper, double on_lower)
{
    a->ratio = on_upper / on_lower;
    a->ended_upper = a->upper;
    a->ended_lower = a->lower;
    const int before = a->chosen;
    a->chosen = gb_threads_auto_choose(a->upper, a->lower, a->ratio);
    a->chosen_ms = a->chosen == a->lower ? on_lower : on_upper;
    a->now = a->chosen;
    a->trying = 0;
    a->in_phase = 0;
    a->changed |= a->chosen != before;
    if (a->chosen == a->lower && a->downward && a->lower > 1) {
        start_trial(a, a->lower, a->lower - 1, 1, a->early);
        return a->chosen != before;
    }
    /* news, or a machine that just changed, brings the next trial close; a trial that
     * confirms the last one puts it twice as far (GB_THREADS_RECHECK_MAX is 200 x 2^4) */
    if (a->changed || a->early)
        a->interval = GB_THREADS_RECHECK_STEPS;
    else if (a->interval < GB_THREADS_RECHECK_MAX)
        a->interval *= 2;
    return a->chosen != before;
}

/* Step `at` of the long block on `upper` threads that follows blocks in which `lower` was
 * faster: its last GB_THREADS_LONG_TIMED steps show the team once settled. */
static int observe_long_block(gb_threads_auto *a, int64_t at, double step_ms)
{
    const int64_t first_timed = GB_THREADS_LONG_BLOCK - GB_THREADS_LONG_TIMED;
    if (at >= first_timed)
        a->long_ms[at - first_timed] = step_ms;
    if (at + 1 < GB_THREADS_LONG_BLOCK)
        return 0;
    const double settled = median_of(a->long_ms, GB_THREADS_LONG_TIMED);
    return settle(a, settled < a->on_upper ? settled : a->on_upper, a->on_lower);
}

int gb_threads_auto_observe(gb_threads_auto *a, double step_ms)
{
    const int64_t k = a->in_phase++;
    if (!a->trying) {
        a->slow_streak = step_ms > GB_THREADS_SLOWER * a->chosen_ms ? a->slow_streak + 1 : 0;
        if (a->most > 1 && a->slow_streak >= GB_THREADS_SLOW_STREAK)
            start_due_trial(a, 1);
        else if (a->most > 1 && a->in_phase >= a->interval)
            start_due_trial(a, 0);
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
    a->on_upper = better_block(a->ms[0]);
    a->on_lower = better_block(a->ms[1]);
    if (gb_threads_auto_choose(a->upper, a->lower, a->on_upper / a->on_lower) == a->upper)
        return settle(a, a->on_upper, a->on_lower);
    a->now = a->upper;   /* lower looked faster: the long block on upper decides */
    return 0;
}

/* What follows the choice: the next trial, under way or due. */
static void describe_next(const gb_threads_auto *a, char *buf, size_t cap)
{
    if (a->trying)
        snprintf(buf, cap, "trying %d against %d now", a->upper, a->lower);
    else
        snprintf(buf, cap, "trying again within %lld steps", (long long)a->interval);
}

void gb_threads_auto_describe(const gb_threads_auto *a, char *buf, size_t cap)
{
    const int upper = a->ended_upper, lower = a->ended_lower;
    char next[64];
    describe_next(a, next, sizeof next);
    char why[64] = "the machine is busy";
    if (a->held > 0)
        snprintf(why, sizeof why, "other processes keep %d core%s busy", a->held,
                 a->held == 1 ? "" : "s");
    if (a->chosen == lower)
        snprintf(buf, cap, "threads: auto -> %d (%d threads were %.2fx slower than %d: %s; "
                 "%s)", lower, upper, a->ratio, lower, why, next);
    else if (a->ratio > 1.0)
        snprintf(buf, cap, "threads: auto -> %d (%d thread%s only %.2fx faster, within the "
                 "%.0f%% margin; %s)", upper, lower, lower == 1 ? " was" : "s were", a->ratio,
                 100.0 * GB_THREADS_MARGIN, next);
    else
        snprintf(buf, cap, "threads: auto -> %d (%.2fx faster than %d thread%s; %s)", upper,
                 1.0 / a->ratio, lower, lower == 1 ? "" : "s", next);
}
