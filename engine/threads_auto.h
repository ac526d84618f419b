/* `[run] threads = auto` (the default for a job of one process): the training loop's
 * choice of how many threads to run, measured.
 *
 * On a machine of its own a step runs fastest on every core. Beside another busy process
 * it may not: the OpenMP team waits at every barrier for the thread whose core the other
 * process holds, and a team one thread smaller that never waits can step faster (two
 * threads against one on two cores: docs/BENCHMARKS.md measures both). So the loop
 * measures instead of guessing. A trial compares two counts, `upper` and `lower`: it runs
 * blocks of GB_THREADS_TRIAL_BLOCK steps on each in turn, for GB_THREADS_TRIAL_ROUNDS
 * rounds, and keeps the count whose better block (the median of its steps) was faster;
 * `lower` must be faster by more than GB_THREADS_MARGIN, so that noise does not walk the
 * team down. The first step of a block is not timed: it switches the team (and, the first
 * time, builds the matmul primitives of its size). Blocks rather than alternate steps, and
 * the better block rather than an average, because the scheduler takes a while to settle
 * after a switch: beside a niced neighbour, 2-thread steps right after 1-thread ones ran
 * at 31-33 ms, then 16 ms once settled, against 25 ms on one thread (Linux 6.18,
 * docs/BENCHMARKS.md), while a busy neighbour slows every block of the team alike. Where
 * `lower` still looks faster, a last, longer block on `upper`, judged by its last steps,
 * tells a team that settles late (beside the niced neighbour: after about 150 ms) from
 * one that never does.
 *
 * Which counts: the first trial, and every later one while all threads are chosen, puts
 * all threads against a team that leaves the cores other processes were seen holding to
 * them (the caller's `held`, cpu_share.h), or one fewer where none or unknown; when the
 * fewer wins, the next trial follows at once with one fewer again, until the smaller
 * team stops winning. So a trial on many cores costs a few percent of a step, not the
 * one-thread steps a comparison with one thread would cost there. While fewer are
 * chosen, the due trials put all threads against the chosen count (has the machine freed
 * up?), and a slow streak puts the chosen count a step down (has it got busier?). On two
 * cores every trial is 2 against 1.
 *
 * Since the neighbours come and go, it tries again after GB_THREADS_RECHECK_STEPS steps,
 * twice as long after each trial that changed nothing (up to GB_THREADS_RECHECK_MAX, so a
 * quiet machine spends few steps on fewer threads), and at once when
 * GB_THREADS_SLOW_STREAK steps in a row took more than GB_THREADS_SLOWER times the chosen
 * count's time in the trial (the machine changed under it).
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
#define GB_THREADS_LONG_BLOCK 10      /* then, where `lower` looked faster, steps on upper */
#define GB_THREADS_LONG_TIMED 4       /* ... of which the last this many are timed */
#define GB_THREADS_MARGIN 0.05        /* `lower` wins when upper's steps are over 1.05x */

typedef struct gb_threads_auto {
    int most;                /* all threads: what threads = 0 would run */
    int now;                 /* the threads the next step runs on */
    int chosen;              /* the last trial's choice; 0 before the first ends */
    int upper, lower;        /* the counts this trial (or the last) compares */
    int downward;            /* this trial asks whether fewer than upper step faster */
    int held;                /* cores other processes held, as last seen (cpu_share.h),
                              * set by the caller; -1 when unknown */
    int trying;              /* 1 during a trial, 0 while running on `chosen` */
    int changed;             /* a trial since the last due or early one changed `chosen` */
    int64_t in_phase;        /* steps fed in this trial, or since it ended */
    int64_t interval;        /* steps from the end of this trial to the next one */
    /* the timed steps, [0] on upper, [1] on lower, by round */
    double ms[2][GB_THREADS_TRIAL_ROUNDS][GB_THREADS_TRIAL_BLOCK - 1];
    double long_ms[GB_THREADS_LONG_TIMED];   /* the long block's timed steps */
    double on_upper, on_lower;  /* this trial's better block on each count */
    double ratio;            /* the last trial: upper's better block / lower's */
    int ended_upper, ended_lower;   /* the last trial's counts, for the log */
    double chosen_ms;        /* the last trial's better block on the chosen count */
    int slow_streak;         /* steps in a row since then slower than GB_THREADS_SLOWER x */
    int early;               /* 1: this trial started because of the slow streak */
} gb_threads_auto;

/* Starts on `most` threads, other processes holding `held` cores (-1: unknown); with one
 * thread there is nothing to try, and it stays there. */
void gb_threads_auto_start(gb_threads_auto *a, int most, int held);
/* Takes the time of the step just run on a->now threads and moves the trial on, or
 * starts one when it is due.
 * Returns 1 when a trial ended with a count other than the one before (the first trial
 * always counts), for the log; a->now is then the count the next step runs on. */
int gb_threads_auto_observe(gb_threads_auto *a, double step_ms);
/* The choice for a trial whose steps on `upper` threads took `ratio` times as long as on
 * `lower`: lower where it is faster by more than GB_THREADS_MARGIN, else upper. */
int gb_threads_auto_choose(int upper, int lower, double ratio);
/* The announcement of the last choice: "threads: auto -> 1 (2 threads were 1.40x slower
 * than 1: the machine is busy; trying again within 200 steps)". */
void gb_threads_auto_describe(const gb_threads_auto *a, char *buf, size_t cap);

#endif /* GB_CORE_THREADS_AUTO_H */
