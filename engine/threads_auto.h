/* `[run] threads = auto`: the training loop's choice between all threads and one.
 *
 * On a machine of its own a step runs fastest on every core. Beside another busy process
 * it may not: the OpenMP team waits at every barrier for the thread whose core the other
 * process holds, and one thread that never waits can step faster than two that do
 * (docs/BENCHMARKS.md measures both). So the loop measures instead of guessing: a trial
 * runs blocks of GB_THREADS_TRIAL_BLOCK steps, on `most` threads and on one in turn, for
 * GB_THREADS_TRIAL_ROUNDS rounds, and keeps the count whose better block (the median of its
 * steps) was faster. The first step of a block is not timed: it switches the team (and,
 * the first time, builds the matmul primitives of its size). Blocks rather than
 * alternate steps, and the better block rather than an average, because the scheduler
 * takes a while to settle after a switch: beside a niced neighbour, 2-thread steps right
 * after 1-thread ones ran at 31-33 ms, then 16 ms once settled, against 25 ms on one
 * thread (Linux 6.18, docs/BENCHMARKS.md), while a busy neighbour slows every block of
 * the team alike. Where one thread still looks faster, a last, longer block on `most`
 * threads, judged by its last steps, tells a team that settles late (beside the niced
 * neighbour: after about 150 ms) from one that never does. Since the neighbours come and
 * go, it tries again after
 * GB_THREADS_RECHECK_STEPS steps, twice as long after each trial that changed nothing (up
 * to GB_THREADS_RECHECK_MAX, so a quiet machine spends few steps on one thread), and at
 * once when GB_THREADS_SLOW_STREAK steps in a row took more than GB_THREADS_SLOWER times
 * the chosen count's time in the trial (the machine changed under it).
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

#define GB_THREADS_TRIAL_BLOCK 4      /* steps in a row on one count: 1 untimed, 3 timed */
#define GB_THREADS_TRIAL_ROUNDS 2     /* blocks on each count per trial */
#define GB_THREADS_RECHECK_STEPS 200  /* steps from a trial to the next, at first ... */
#define GB_THREADS_RECHECK_MAX 3200   /* ... doubled while nothing changes, up to this */
#define GB_THREADS_SLOWER 1.5         /* a step this much slower than the trial's ... */
#define GB_THREADS_SLOW_STREAK 4      /* ... this many times in a row: try again now */
#define GB_THREADS_TRIAL_STEPS (2 * GB_THREADS_TRIAL_ROUNDS * GB_THREADS_TRIAL_BLOCK)
#define GB_THREADS_LONG_BLOCK 10      /* then, where one thread looked faster, steps on most */
#define GB_THREADS_LONG_TIMED 4       /* ... of which the last this many are timed */

typedef struct gb_threads_auto {
    int most;                /* all threads: what threads = 0 would run */
    int now;                 /* the threads the next step runs on */
    int chosen;              /* the last trial's choice; 0 before the first ends */
    int trying;              /* 1 during a trial, 0 while running on `chosen` */
    int64_t in_phase;        /* steps fed in this trial, or since it ended */
    int64_t interval;        /* steps from the end of this trial to the next one */
    /* the timed steps, [0] on most, [1] on one, by round */
    double ms[2][GB_THREADS_TRIAL_ROUNDS][GB_THREADS_TRIAL_BLOCK - 1];
    double long_ms[GB_THREADS_LONG_TIMED];   /* the long block's timed steps */
    double on_most, on_one;  /* this trial's better block on each count */
    double ratio;            /* the last trial: most's better block / one's better block */
    double chosen_ms;        /* the last trial's better block on the chosen count */
    int slow_streak;         /* steps in a row since then slower than GB_THREADS_SLOWER x */
    int early;               /* 1: this trial started because of the slow streak */
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
