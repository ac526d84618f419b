/* `[run] threads = auto`: the training loop's choice between all threads and one.
 *
 * On a machine of its own a step runs fastest on every core. Beside another busy process
 * it may not: the OpenMP team waits at every barrier for the thread whose core the other
 * process holds, and one thread that never waits can step faster than two that do
 * (docs/BENCHMARKS.md measures both). So the loop measures instead of guessing: a trial
 * alternates steps on `most` threads and on one, pair by pair, so that a neighbour
 * arriving or leaving during the trial slows both sides alike, and keeps the count that
 * was faster in the median pair. Since the neighbours come and go, it tries again every
 * GB_THREADS_RECHECK_STEPS steps, and sooner when GB_THREADS_SLOW_STREAK steps in a row
 * took more than GB_THREADS_SLOWER times the chosen count's time in the trial (the
 * machine changed under it). The trial's first step on each count is not timed: it
 * builds the matmul primitives of its team size.
 *
 * The state machine is a pure function of the step times it is fed, so its decisions are
 * tested with made-up times (tests/core/test_threads_auto.c); train.c feeds it and sets
 * the OpenMP pool to the count it asks for. gearbox's own reductions sum in a fixed order
 * whatever the team, and the default run's losses are the same bits on 1 thread, 2 and
 * auto (docs/BENCHMARKS.md). */
#ifndef GB_CORE_THREADS_AUTO_H
#define GB_CORE_THREADS_AUTO_H

#include <stddef.h>
#include <stdint.h>

#define GB_THREADS_TRIAL_PAIRS 3      /* timed pairs of steps, one on each count */
#define GB_THREADS_RECHECK_STEPS 200  /* steps between the end of a trial and the next */
#define GB_THREADS_SLOWER 1.5         /* a step this much slower than the trial's ... */
#define GB_THREADS_SLOW_STREAK 4      /* ... this many times in a row: try again now */
/* A trial's steps: one untimed step on each count, then the timed pairs. */
#define GB_THREADS_TRIAL_STEPS (2 + 2 * GB_THREADS_TRIAL_PAIRS)

typedef struct gb_threads_auto {
    int most;                /* all threads: what threads = 0 would run */
    int now;                 /* the threads the next step runs on */
    int chosen;              /* the last trial's choice; 0 before the first ends */
    int trying;              /* 1 during a trial, 0 while running on `chosen` */
    int64_t in_phase;        /* steps fed in this trial, or since it ended */
    double ms[2][GB_THREADS_TRIAL_PAIRS];   /* the timed pairs: [0] on most, [1] on one */
    double ratio;            /* the last trial's median of ms on most / ms on one */
    double chosen_ms;        /* the last trial's median step on the chosen count */
    int slow_streak;         /* steps in a row since then slower than GB_THREADS_SLOWER x */
} gb_threads_auto;

/* Starts on `most` threads; with one there is nothing to try, and it stays there. */
void gb_threads_auto_start(gb_threads_auto *a, int most);
/* Takes the time of the step just run on a->now threads and moves the trial on, or
 * starts one when it is due.
 * Returns 1 when a trial ended with a count other than the one before (the first trial
 * always counts), for the log; a->now is then the count the next step runs on. */
int gb_threads_auto_observe(gb_threads_auto *a, double step_ms);
/* The choice for a trial whose steps on `most` threads took `ratio` times as long as on
 * one: the faster, all threads when they tie. */
int gb_threads_auto_choose(int most, double ratio);
/* The announcement of the last choice: "threads: auto -> 1 (2 threads were 1.40x slower
 * than 1: the machine is busy; trying again within 200 steps)". */
void gb_threads_auto_describe(const gb_threads_auto *a, char *buf, size_t cap);

#endif /* GB_CORE_THREADS_AUTO_H */
