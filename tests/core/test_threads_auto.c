/* Tests of `[run] threads = auto`'s trials and choice (engine/threads_auto.c) on step
 * times made up to stand for a quiet machine and for one where another process holds a
 * core: which count each step runs on, when the choice is announced and what it says, the
 * untimed first steps, an outlier outvoted by the median pair, a neighbour that arrives
 * halfway through a trial or after it, and the trial rerun that follows the neighbours
 * coming and going. The times are fed, not measured, so the decisions are the same on every machine
 * and under any load. */
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

static double step_on(const gb_threads_auto *a, const machine *m)
{
    return a->now == 1 ? m->on_one : m->on_most;
}

/* Runs `steps` steps on `m`, a trial's two untimed steps 10x slow; returns the number of
 * announcements and leaves the last one in `said`. */
static int run_steps(gb_threads_auto *a, const machine *m, int steps, char *said, size_t cap)
{
    int announced = 0;
    for (int i = 0; i < steps; i++) {
        double ms = step_on(a, m) * (a->trying && a->in_phase < 2 ? 10.0 : 1.0);
        if (gb_threads_auto_observe(a, ms)) {
            announced++;
            gb_threads_auto_describe(a, said, cap);
        }
    }
    return announced;
}

static void check_choose(void)
{
    CHECK(gb_threads_auto_choose(2, 10.0 / 18.0) == 2);
    CHECK(gb_threads_auto_choose(2, 20.0 / 14.0) == 1);
    CHECK(gb_threads_auto_choose(4, 1.0) == 4);   /* a tie keeps every thread */
}

/* The first trial alternates 2, 1, 2, 1, ... and chooses at its last step. */
static void check_first_trial(const machine *m, int want, const char *want_said)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 2);
    for (int k = 0; k < GB_THREADS_TRIAL_STEPS - 1; k++) {
        CHECK(a.now == (k % 2 == 0 ? 2 : 1));
        CHECK(gb_threads_auto_observe(&a, step_on(&a, m)) == 0);
    }
    CHECK(a.now == 1);
    CHECK(gb_threads_auto_observe(&a, step_on(&a, m)) == 1);
    CHECK(a.now == want && a.chosen == want && !a.trying);
    gb_threads_auto_describe(&a, said, sizeof said);
    CHECK_TEXT(said, want_said);
    CHECK(run_steps(&a, m, GB_THREADS_RECHECK_STEPS - 1, said, sizeof said) == 0);
    CHECK(a.now == want && !a.trying);
}

/* A busy machine that quiets down: each trial after the interval follows it, and only a
 * change is announced. */
static void check_rechecks(void)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 2);
    CHECK(run_steps(&a, &busy, GB_THREADS_TRIAL_STEPS, said, sizeof said) == 1);
    CHECK(a.now == 1);
    /* the same neighbour at the next trial: no news */
    CHECK(run_steps(&a, &busy, GB_THREADS_RECHECK_STEPS + GB_THREADS_TRIAL_STEPS, said,
                    sizeof said) == 0);
    CHECK(a.now == 1);
    /* it left: the next trial starts on 2 threads, goes back to 2 and says so */
    CHECK(run_steps(&a, &quiet, GB_THREADS_RECHECK_STEPS, said, sizeof said) == 0);
    CHECK(a.now == 2 && a.trying);
    CHECK(run_steps(&a, &quiet, GB_THREADS_TRIAL_STEPS, said, sizeof said) == 1);
    CHECK(a.now == 2);
    CHECK_TEXT(said, "threads: auto -> 2 (1.80x faster than 1 thread; trying again within "
               "200 steps)");
}

/* One slow step does not flip the choice, nor does a neighbour that arrives in the middle
 * of the trial: each pair is compared within itself. */
static void check_pairs(void)
{
    gb_threads_auto a;
    gb_threads_auto_start(&a, 2);
    const double hiccup[] = {100, 180, 10, 18, 95, 18, 10, 18};   /* 95 ms once on 2 */
    int announced = 0;
    for (size_t i = 0; i < sizeof hiccup / sizeof hiccup[0]; i++)
        announced += gb_threads_auto_observe(&a, hiccup[i]);
    CHECK(announced == 1 && a.now == 2);
    CHECK_NEAR(a.ratio, 10.0 / 18.0, 1e-12);

    /* quiet for the first timed pair, a neighbour from then on: the two pairs beside it
     * decide */
    gb_threads_auto_start(&a, 2);
    const double arrives[] = {100, 180, 10, 18, 20, 14, 20, 14};
    announced = 0;
    for (size_t i = 0; i < sizeof arrives / sizeof arrives[0]; i++)
        announced += gb_threads_auto_observe(&a, arrives[i]);
    CHECK(announced == 1 && a.now == 1);
    CHECK_NEAR(a.ratio, 20.0 / 14.0, 1e-12);
}

/* A neighbour that arrives after the trial: a few slow steps in a row bring the next
 * trial forward, one slow step does not. */
static void check_early_trial(void)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 2);
    CHECK(run_steps(&a, &quiet, GB_THREADS_TRIAL_STEPS, said, sizeof said) == 1);
    CHECK(a.now == 2 && a.chosen_ms == quiet.on_most);
    CHECK(gb_threads_auto_observe(&a, 3 * quiet.on_most) == 0);   /* a hiccup */
    CHECK(run_steps(&a, &quiet, 10, said, sizeof said) == 0 && !a.trying);
    CHECK(run_steps(&a, &busy, GB_THREADS_SLOW_STREAK - 1, said, sizeof said) == 0);
    CHECK(!a.trying);   /* 20 ms is 2x the trial's 10: slow, but not yet often enough */
    CHECK(run_steps(&a, &busy, 1, said, sizeof said) == 0);
    CHECK(a.trying && a.now == 2);
    CHECK(run_steps(&a, &busy, GB_THREADS_TRIAL_STEPS, said, sizeof said) == 1);
    CHECK(a.now == 1);
}

/* One thread to begin with: nothing is tried, nothing announced. */
static void check_single(void)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 1);
    CHECK(a.now == 1 && a.chosen == 1 && !a.trying);
    CHECK(run_steps(&a, &quiet, 3 * GB_THREADS_RECHECK_STEPS, said, sizeof said) == 0);
    CHECK(a.now == 1);
}

int main(void)
{
    check_choose();
    check_first_trial(&quiet, 2, "threads: auto -> 2 (1.80x faster than 1 thread; trying "
                      "again within 200 steps)");
    check_first_trial(&busy, 1, "threads: auto -> 1 (2 threads were 1.43x slower than 1: "
                      "the machine is busy; trying again within 200 steps)");
    check_rechecks();
    check_pairs();
    check_early_trial();
    check_single();
    return check_exit("threads auto");
}
