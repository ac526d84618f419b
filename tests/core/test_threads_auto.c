/* Tests of `[run] threads = auto`'s trials and choice (engine/threads_auto.c) on step
 * times made up to stand for a quiet machine and for one where another process holds a
 * core: which count each step runs on, when the choice is announced and what it says, the
 * warm-up step left out, an outlier outvoted by the median, and a rerun of the trial that
 * follows the neighbour coming and going. The times are fed, not measured, so the
 * decisions are the same on every machine and under any load. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "threads_auto.h"

/* Step times of a 2-thread machine: on 2 threads and on 1, ms. */
typedef struct machine {
    double on_most, on_one;
} machine;

static const machine quiet = {10.0, 18.0};   /* 2 threads 1.8x faster */
static const machine busy = {20.0, 14.0};    /* a neighbour on a core: 2 threads wait */

/* Runs `steps` steps on `m`, each phase's first step (the warm-up) 10x slow; returns the
 * number of announcements and leaves the last one in `said`. */
static int run_steps(gb_threads_auto *a, const machine *m, int steps, char *said, size_t cap)
{
    int announced = 0;
    for (int i = 0; i < steps; i++) {
        double ms = a->now == 1 ? m->on_one : m->on_most;
        if (a->phase != GB_THREADS_SETTLED && a->in_phase == 0)
            ms *= 10.0;
        if (gb_threads_auto_observe(a, ms)) {
            announced++;
            gb_threads_auto_describe(a, said, cap);
        }
    }
    return announced;
}

static void check_choose(void)
{
    CHECK(gb_threads_auto_choose(2, 10.0, 18.0) == 2);
    CHECK(gb_threads_auto_choose(2, 20.0, 14.0) == 1);
    CHECK(gb_threads_auto_choose(4, 12.0, 12.0) == 4);   /* a tie keeps every thread */
}

/* The first trial: 4 steps on 2 threads, 4 on 1, then the choice. */
static void check_first_trial(const machine *m, int want, const char *want_said)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 2);
    const int per_phase = GB_THREADS_TRIAL_WARMUP + GB_THREADS_TRIAL_MEASURED;
    for (int i = 0; i < per_phase; i++) {
        CHECK(a.now == 2);
        CHECK(gb_threads_auto_observe(&a, a.now == 1 ? m->on_one : m->on_most) == 0);
    }
    for (int i = 0; i < per_phase - 1; i++) {
        CHECK(a.now == 1);
        CHECK(gb_threads_auto_observe(&a, m->on_one) == 0);
    }
    CHECK(a.now == 1);
    CHECK(gb_threads_auto_observe(&a, m->on_one) == 1);
    CHECK(a.now == want && a.chosen == want);
    gb_threads_auto_describe(&a, said, sizeof said);
    CHECK_TEXT(said, want_said);
    CHECK(run_steps(&a, m, GB_THREADS_RECHECK_STEPS - 1, said, sizeof said) == 0);
    CHECK(a.now == want && a.phase == GB_THREADS_SETTLED);
}

/* A busy machine that quiets down, then gets busy again: each trial after the interval
 * follows it, and only a change is announced. */
static void check_rechecks(void)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 2);
    const int trial = 2 * (GB_THREADS_TRIAL_WARMUP + GB_THREADS_TRIAL_MEASURED);
    CHECK(run_steps(&a, &busy, trial, said, sizeof said) == 1);
    CHECK(a.now == 1);
    /* the same neighbour at the next trial: no news */
    CHECK(run_steps(&a, &busy, GB_THREADS_RECHECK_STEPS + trial, said, sizeof said) == 0);
    CHECK(a.now == 1);
    /* it left: back to 2 at the next trial, announced */
    CHECK(run_steps(&a, &quiet, GB_THREADS_RECHECK_STEPS, said, sizeof said) == 0);
    CHECK(a.now == 2 && a.phase == GB_THREADS_TRY_MOST);
    CHECK(run_steps(&a, &quiet, trial, said, sizeof said) == 1);
    CHECK(a.now == 2);
    CHECK_TEXT(said, "threads: auto -> 2 (1.80x faster than 1 thread; trying again in 200 "
               "steps)");
}

/* One slow step among the measured ones does not flip the choice: the median decides. */
static void check_outlier(void)
{
    gb_threads_auto a;
    gb_threads_auto_start(&a, 2);
    const double times[] = {100, 10, 95, 10, 100, 18, 18, 18};   /* a 95 ms hiccup on 2 */
    int announced = 0;
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++)
        announced += gb_threads_auto_observe(&a, times[i]);
    CHECK(announced == 1);
    CHECK(a.now == 2);
    CHECK_NEAR(a.median[0], 10.0, 0);
    CHECK_NEAR(a.median[1], 18.0, 0);
}

/* One thread to begin with: nothing is tried, nothing announced. */
static void check_single(void)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 1);
    CHECK(a.now == 1 && a.chosen == 1);
    CHECK(run_steps(&a, &quiet, 3 * GB_THREADS_RECHECK_STEPS, said, sizeof said) == 0);
    CHECK(a.now == 1);
}

int main(void)
{
    check_choose();
    check_first_trial(&quiet, 2, "threads: auto -> 2 (1.80x faster than 1 thread; trying "
                      "again in 200 steps)");
    check_first_trial(&busy, 1, "threads: auto -> 1 (2 threads were 1.43x slower than 1: "
                      "the machine is busy; trying again in 200 steps)");
    check_rechecks();
    check_outlier();
    check_single();
    return check_exit("threads auto");
}
