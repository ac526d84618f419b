/* `[run] threads = auto`: the training loop's choice between all threads and one.
 *
 * On a machine of its own a step runs fastest on every core. Beside another busy process
 * it may not: the OpenMP team waits at every barrier for the thread whose core the other
 * process holds, and one thread that never waits can step faster than two that do
 * (docs/BENCHMARKS.md measures both). So the loop measures instead of guessing: a trial
 * runs a few steps on `most` threads, then a few on one, and keeps the count whose median
 * step was shorter; every GB_THREADS_RECHECK_STEPS steps it tries again, since the
 * neighbours come and go. Each phase's first step is not counted: it is the one that
 * builds the matmul primitives of its team size.
 *
 * The state machine is a pure function of the step times it is fed, so its decisions are
 * tested with made-up times (tests/core/test_threads_auto.c); train.c feeds it and sets
 * the OpenMP pool to the count it asks for. The thread count does not change the results:
 * every reduction sums in a fixed order whatever the team (docs/BENCHMARKS.md). */
#ifndef GB_CORE_THREADS_AUTO_H
#define GB_CORE_THREADS_AUTO_H

#include <stddef.h>
#include <stdint.h>

#define GB_THREADS_TRIAL_WARMUP 1     /* steps of a phase not counted */
#define GB_THREADS_TRIAL_MEASURED 3   /* steps of a phase whose median is compared */
#define GB_THREADS_RECHECK_STEPS 200  /* steps between the end of a trial and the next */

typedef enum gb_threads_phase {
    GB_THREADS_TRY_MOST,   /* timing steps on `most` threads */
    GB_THREADS_TRY_ONE,    /* timing steps on one */
    GB_THREADS_SETTLED,    /* running on `chosen` until the next trial */
} gb_threads_phase;

typedef struct gb_threads_auto {
    int most;                /* all threads: what threads = 0 would run */
    int now;                 /* the threads the next step runs on */
    int chosen;              /* the last trial's choice; 0 before the first ends */
    gb_threads_phase phase;
    int64_t in_phase;        /* steps fed in this phase */
    double ms[2][GB_THREADS_TRIAL_MEASURED];   /* [0]: on most threads, [1]: on one */
    double median[2];        /* the last trial's medians, ms */
} gb_threads_auto;

/* Starts on `most` threads; with one there is nothing to try, and it stays there. */
void gb_threads_auto_start(gb_threads_auto *a, int most);
/* Takes the time of the step just run on a->now threads and moves the trial on.
 * Returns 1 when a trial ended with a count other than the one before (the first trial
 * always counts), for the log; a->now is then the count the next step runs on. */
int gb_threads_auto_observe(gb_threads_auto *a, double step_ms);
/* The choice for medians of ms_most on `most` threads and ms_one on one: the faster,
 * all threads when they tie. */
int gb_threads_auto_choose(int most, double ms_most, double ms_one);
/* The announcement of the last choice: "threads: auto -> 1 (2 threads were 1.40x slower
 * than 1: the machine is busy)". */
void gb_threads_auto_describe(const gb_threads_auto *a, char *buf, size_t cap);

#endif /* GB_CORE_THREADS_AUTO_H */
