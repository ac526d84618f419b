/* Tests of `[run] threads = auto`'s trials and choice (engine/threads_auto.c) on step
 * times made up to stand for a quiet machine and for one where other processes hold
 * cores: which count each step runs on, when the choice is announced and what it says, the
 * untimed first step of each block, an outlier outvoted by its block's median, a team
 * that is slow until the scheduler settles (in a block or only in the long block), a
 * neighbour that arrives halfway through a trial or after it, and the trial reruns that
 * follow the neighbours coming and going, further apart while nothing changes; on 8
 * cores, the step down to the cores others leave free (seen, or found a thread at a time)
 * and back up, never through one-thread steps, and a noise-sized gain that does not move
 * the team. The times are fed, not measured, so the decisions are the same on every
 * machine and under any load. Then the arithmetic of the cores others keep busy
 * (engine/cpu_share.c) on made-up samples, and one real sample. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cpu_share.h"
#include "threads_auto.h"

/* Step times of a machine, ms, by the threads a step runs on (up to 8). */
typedef struct machine {
    double ms[9];
} machine;

static const machine quiet = {{[1] = 18.0, [2] = 10.0}};   /* 2 threads 1.8x faster */
static const machine busy = {{[1] = 14.0, [2] = 20.0}};    /* a neighbour on a core */
/* 8 cores: quiet, 8 / n of the one-thread time and 2 ms of serial work */
static const machine quiet8 = {{0, 82, 42, 28.7, 22, 18, 15.3, 13.4, 12}};
/* 8 cores, neighbours on 2: a team of 7 or 8 waits for the threads that share a core */
static const machine busy8 = {{0, 82, 42, 28.7, 22, 18, 15.3, 30, 32}};
/* ... where 7 waits less than 8 */
static const machine busy8_graded = {{0, 82, 42, 28.7, 22, 18, 15.3, 25, 32}};
/* 8 cores, 7 threads 1.03x faster than 8: within the margin */
static const machine noisy8 = {{0, 82, 42, 28.7, 22, 18, 15.3, 12.0, 12.36}};

static double step_on(const gb_threads_auto *a, const machine *m)
{
    return m->ms[a->now];
}

/* A whole trial's steps on a machine where one thread is faster: the blocks, then the long
 * block on every thread. */
#define BUSY_TRIAL (GB_THREADS_TRIAL_STEPS + GB_THREADS_LONG_BLOCK)

/* Whether the trial leaves the step it is at untimed: the first of each block, and the
 * long block's first steps. */
static int untimed(const gb_threads_auto *a)
{
    if (!a->trying)
        return 0;
    if (a->in_phase < GB_THREADS_TRIAL_STEPS)
        return a->in_phase % GB_THREADS_TRIAL_BLOCK == 0;
    return a->in_phase < BUSY_TRIAL - GB_THREADS_LONG_TIMED;
}

/* Runs `steps` steps on `m`, the untimed steps of a trial 10x slow; returns the number of
 * announcements and leaves the last one in `said`. */
static int run_steps(gb_threads_auto *a, const machine *m, int64_t steps, char *said,
                     size_t cap)
{
    int announced = 0;
    for (int64_t i = 0; i < steps; i++) {
        double ms = step_on(a, m) * (untimed(a) ? 10.0 : 1.0);
        if (gb_threads_auto_observe(a, ms)) {
            announced++;
            gb_threads_auto_describe(a, said, cap);
        }
    }
    return announced;
}

static void check_choose(void)
{
    CHECK(gb_threads_auto_choose(2, 1, 10.0 / 18.0) == 2);
    CHECK(gb_threads_auto_choose(2, 1, 20.0 / 14.0) == 1);
    CHECK(gb_threads_auto_choose(4, 3, 1.0) == 4);    /* a tie keeps the larger team */
    CHECK(gb_threads_auto_choose(8, 7, 1.04) == 8);   /* and so does a gain under 5% */
    CHECK(gb_threads_auto_choose(8, 7, 1.06) == 7);
}

/* The first trial runs blocks on 2, 1, 2, 1 threads, then, where 1 was faster, a long
 * block on 2, and chooses at its last step. */
static void check_first_trial(const machine *m, int want, const char *want_said)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 2, -1);
    const int steps = want == 1 ? BUSY_TRIAL : GB_THREADS_TRIAL_STEPS;
    for (int k = 0; k < steps - 1; k++) {
        CHECK(a.now == (k >= GB_THREADS_TRIAL_STEPS || (k / GB_THREADS_TRIAL_BLOCK) % 2 == 0
                            ? 2 : 1));
        CHECK(gb_threads_auto_observe(&a, step_on(&a, m)) == 0);
    }
    CHECK(a.now == (want == 1 ? 2 : 1));
    CHECK(gb_threads_auto_observe(&a, step_on(&a, m)) == 1);
    CHECK(a.now == want && a.chosen == want && !a.trying);
    gb_threads_auto_describe(&a, said, sizeof said);
    CHECK_TEXT(said, want_said);
    CHECK(run_steps(&a, m, GB_THREADS_RECHECK_STEPS - 1, said, sizeof said) == 0);
    CHECK(a.now == want && !a.trying);
}

/* A busy machine that quiets down: each trial after the interval follows it, only a
 * change is announced, and the interval doubles while nothing changes. */
static void check_rechecks(void)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 2, -1);
    CHECK(run_steps(&a, &busy, BUSY_TRIAL, said, sizeof said) == 1);
    CHECK(a.now == 1 && a.interval == GB_THREADS_RECHECK_STEPS);
    /* the same neighbour at the next trial: no news, and the next trial twice as far */
    CHECK(run_steps(&a, &busy, GB_THREADS_RECHECK_STEPS + BUSY_TRIAL, said, sizeof said) == 0);
    CHECK(a.now == 1 && !a.trying && a.interval == 2 * GB_THREADS_RECHECK_STEPS);
    /* it left: the next trial starts on 2 threads, goes back to 2 and says so */
    CHECK(run_steps(&a, &quiet, 2 * GB_THREADS_RECHECK_STEPS, said, sizeof said) == 0);
    CHECK(a.now == 2 && a.trying);
    CHECK(run_steps(&a, &quiet, GB_THREADS_TRIAL_STEPS, said, sizeof said) == 1);
    CHECK(a.now == 2);
    CHECK_TEXT(said, "threads: auto -> 2 (1.80x faster than 1 thread; trying again within "
               "200 steps)");
    /* quiet from then on: the trials grow apart, up to the cap */
    for (int trial = 0; trial < 6; trial++)
        CHECK(run_steps(&a, &quiet, a.interval + GB_THREADS_TRIAL_STEPS, said,
                        sizeof said) == 0);
    CHECK(a.now == 2 && a.interval == GB_THREADS_RECHECK_MAX);
}

/* Feeds `n` step times of a trial (blocks on 2, 1, 2, 1 threads, each led by an untimed
 * step, then maybe the long block on 2); returns the number of announcements. */
static int feed_trial(gb_threads_auto *a, const double *ms, int n)
{
    int announced = 0;
    for (int i = 0; i < n; i++)
        announced += gb_threads_auto_observe(a, ms[i]);
    return announced;
}

/* One slow step does not flip the choice; a team slow until the scheduler settles is
 * judged by its settled block; a neighbour that arrives in the middle of the trial gives
 * way to the slow streak's trial. */
static void check_blocks(void)
{
    static const struct {
        const char *what;
        double ms[BUSY_TRIAL];   /* the trial's steps: blocks on 2, 1, 2, 1, then long on 2 */
        int steps, want;         /* the trial's length; the count it chooses */
        double ratio;
    } cases[] = {
        {"one slow step (95 ms once on 2)",
         {100, 10, 95, 10, 180, 18, 18, 18, 100, 10, 10, 10, 180, 18, 18, 18},
         GB_THREADS_TRIAL_STEPS, 2, 10.0 / 18.0},
        {"beside a niced neighbour: 32 ms right after the start, 16 once settled, 25 on one",
         {100, 32, 31, 33, 180, 25, 25, 26, 100, 16, 17, 16, 180, 25, 24, 25},
         GB_THREADS_TRIAL_STEPS, 2, 16.0 / 25.0},
        {"... or unsettled in every block, settled only late in the long block",
         {100, 31, 30, 30, 180, 25, 24, 25, 100, 30, 30, 31, 180, 24, 25, 25,
          33, 32, 31, 30, 30, 30, 16, 17, 16, 16}, BUSY_TRIAL, 2, 16.0 / 25.0},
        {"a busy neighbour: the long block stays slow, and one thread it is",
         {100, 31, 30, 30, 180, 25, 24, 25, 100, 30, 30, 31, 180, 24, 25, 25,
          33, 32, 31, 30, 30, 30, 30, 31, 30, 29}, BUSY_TRIAL, 1, 30.0 / 25.0},
    };
    gb_threads_auto a;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gb_threads_auto_start(&a, 2, -1);
        const int long_block = cases[c].steps > GB_THREADS_TRIAL_STEPS;
        int announced = feed_trial(&a, cases[c].ms, GB_THREADS_TRIAL_STEPS);
        /* the long block follows the blocks only where they favoured one thread */
        CHECK(announced == !long_block && a.trying == long_block && (!long_block || a.now == 2));
        if (long_block)
            announced = feed_trial(&a, cases[c].ms + GB_THREADS_TRIAL_STEPS,
                                   GB_THREADS_LONG_BLOCK);
        CHECK(announced == 1 && !a.trying && a.now == cases[c].want);
        CHECK_NEAR(a.ratio, cases[c].ratio, 1e-12);
        if (!(announced == 1 && a.now == cases[c].want))
            printf("case: %s\n", cases[c].what);
    }

    /* quiet for the first round, a neighbour from then on: the quiet round's blocks keep 2
     * threads, and the slow steps that follow bring the next trial, which takes 1 */
    gb_threads_auto_start(&a, 2, -1);
    const double arrives[] = {100, 10, 10, 10, 180, 18, 18, 18,
                              200, 20, 20, 20, 140, 14, 14, 14};
    CHECK(feed_trial(&a, arrives, GB_THREADS_TRIAL_STEPS) == 1 && a.now == 2);
    char said[256] = "";
    CHECK(run_steps(&a, &busy, GB_THREADS_SLOW_STREAK + BUSY_TRIAL, said, sizeof said) == 1);
    CHECK(a.now == 1 && a.interval == GB_THREADS_RECHECK_STEPS);
}

/* A neighbour that arrives after the trial: a few slow steps in a row bring the next
 * trial forward, one slow step does not. */
static void check_early_trial(void)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 2, -1);
    CHECK(run_steps(&a, &quiet, GB_THREADS_TRIAL_STEPS, said, sizeof said) == 1);
    CHECK(a.now == 2 && a.chosen_ms == quiet.ms[2]);
    CHECK(gb_threads_auto_observe(&a, 3 * quiet.ms[2]) == 0);   /* a hiccup */
    CHECK(run_steps(&a, &quiet, 10, said, sizeof said) == 0 && !a.trying);
    CHECK(run_steps(&a, &busy, GB_THREADS_SLOW_STREAK - 1, said, sizeof said) == 0);
    CHECK(!a.trying);   /* 20 ms is 2x the trial's 10: slow, but not yet often enough */
    CHECK(run_steps(&a, &busy, 1, said, sizeof said) == 0);
    CHECK(a.trying && a.now == 2);
    CHECK(run_steps(&a, &busy, BUSY_TRIAL, said, sizeof said) == 1);
    CHECK(a.now == 1);
}

/* One thread to begin with: nothing is tried, nothing announced. */
static void check_single(void)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 1, -1);
    CHECK(a.now == 1 && a.chosen == 1 && !a.trying);
    CHECK(run_steps(&a, &quiet, 3 * GB_THREADS_RECHECK_STEPS, said, sizeof said) == 0);
    CHECK(a.now == 1);
}

/* Steps on `m` until `steps` have run: the announcements, the last in `said`, and the
 * fewest threads any step ran on. */
static int run_counting(gb_threads_auto *a, const machine *m, int64_t steps, char *said,
                        size_t cap, int *fewest)
{
    int announced = 0;
    for (int64_t i = 0; i < steps; i++) {
        *fewest = a->now < *fewest ? a->now : *fewest;
        announced += run_steps(a, m, 1, said, cap);
    }
    return announced;
}

/* 8 cores, quiet: every trial is 8 threads against 7, never against 1; a 3% gain of 7
 * (noise, say) does not move the team. */
static void check_many_cores_quiet(void)
{
    gb_threads_auto a;
    char said[256] = "";
    int fewest = 8;
    gb_threads_auto_start(&a, 8, 0);
    CHECK(a.upper == 8 && a.lower == 7);
    CHECK(run_counting(&a, &quiet8, 3000, said, sizeof said, &fewest) == 1);
    CHECK_TEXT(said, "threads: auto -> 8 (1.12x faster than 7 threads; trying again within "
               "200 steps)");
    CHECK(a.chosen == 8 && fewest == 7);
    gb_threads_auto_start(&a, 8, 0);
    CHECK(run_counting(&a, &noisy8, 3000, said, sizeof said, &fewest) == 1);
    CHECK_TEXT(said, "threads: auto -> 8 (7 threads were only 1.03x faster, within the 5% "
               "margin; trying again within 200 steps)");
    CHECK(a.chosen == 8);
}

/* 8 cores, neighbours on 2: seen at the start, the first trial puts 8 against 6 and the
 * next, at once, 6 against 5; unseen, the team steps down a thread at a time while the
 * smaller one wins. The neighbours leave: the due trial puts 8 against 6 and goes back
 * up. They come back busier: the slow streak's trial starts below the cores now held. */
static void check_many_cores_busy(void)
{
    gb_threads_auto a;
    char said[256] = "";
    gb_threads_auto_start(&a, 8, 2);
    CHECK(a.upper == 8 && a.lower == 6);
    CHECK(run_steps(&a, &busy8, BUSY_TRIAL, said, sizeof said) == 1);
    CHECK_TEXT(said, "threads: auto -> 6 (8 threads were 2.09x slower than 6: other processes "
               "keep 2 cores busy; trying 6 against 5 now)");
    CHECK(a.trying && a.upper == 6 && a.lower == 5);
    CHECK(run_steps(&a, &busy8, GB_THREADS_TRIAL_STEPS, said, sizeof said) == 0);
    CHECK(!a.trying && a.now == 6 && a.interval == GB_THREADS_RECHECK_STEPS);

    gb_threads_auto_start(&a, 8, -1);
    CHECK(a.upper == 8 && a.lower == 7);
    CHECK(run_steps(&a, &busy8_graded, 2 * BUSY_TRIAL + GB_THREADS_TRIAL_STEPS, said,
                    sizeof said) == 2);
    CHECK_TEXT(said, "threads: auto -> 6 (7 threads were 1.63x slower than 6: the machine is "
               "busy; trying 6 against 5 now)");
    CHECK(!a.trying && a.now == 6 && a.interval == GB_THREADS_RECHECK_STEPS);

    a.held = 0;   /* what the caller sees once they left */
    CHECK(run_steps(&a, &quiet8, GB_THREADS_RECHECK_STEPS, said, sizeof said) == 0);
    CHECK(a.trying && a.upper == 8 && a.lower == 6);
    CHECK(run_steps(&a, &quiet8, GB_THREADS_TRIAL_STEPS, said, sizeof said) == 1);
    CHECK_TEXT(said, "threads: auto -> 8 (1.27x faster than 6 threads; trying again within "
               "200 steps)");
    CHECK(!a.trying && a.now == 8);

    a.held = 4;
    CHECK(run_steps(&a, &busy8, GB_THREADS_SLOW_STREAK, said, sizeof said) == 0);
    CHECK(a.trying && a.early && a.upper == 8 && a.lower == 4);
}

/* The cores others kept busy, from two samples of the machine's and the process's CPU
 * time; and a real sample on Linux. */
static void check_cpu_share(void)
{
    const gb_cpu_sample before = {.wall_s = 100.0, .busy_s = 50.0, .own_s = 10.0, .known = 1};
    gb_cpu_sample after = {.wall_s = 102.0, .busy_s = 55.0, .own_s = 13.0, .known = 1};
    CHECK(gb_cpu_busy_elsewhere(&before, &after) == 1);   /* 5 s busy, 3 of them ours */
    after.busy_s = 56.4;
    CHECK(gb_cpu_busy_elsewhere(&before, &after) == 2);   /* 1.7 cores: a shared one too */
    after.busy_s = 53.5;
    CHECK(gb_cpu_busy_elsewhere(&before, &after) == 0);   /* 0.25 cores: a niced editor */
    after.busy_s = 52.0;
    CHECK(gb_cpu_busy_elsewhere(&before, &after) == 0);   /* ticks behind our own clock */
    after.wall_s = 100.1;
    CHECK(gb_cpu_busy_elsewhere(&before, &after) == -1);  /* too short to tell */
    after = (gb_cpu_sample){.wall_s = 102.0, .known = 0};
    CHECK(gb_cpu_busy_elsewhere(&before, &after) == -1);  /* no /proc/stat */
#ifdef __linux__
    gb_cpu_sample now;
    gb_cpu_sample_take(&now);
    CHECK(now.known && now.busy_s > 0.0 && now.own_s > 0.0);
#endif
}

int main(void)
{
    check_choose();
    check_first_trial(&quiet, 2, "threads: auto -> 2 (1.80x faster than 1 thread; trying "
                      "again within 200 steps)");
    check_first_trial(&busy, 1, "threads: auto -> 1 (2 threads were 1.43x slower than 1: "
                      "the machine is busy; trying again within 200 steps)");
    check_rechecks();
    check_blocks();
    check_early_trial();
    check_single();
    check_many_cores_quiet();
    check_many_cores_busy();
    check_cpu_share();
    return check_exit("threads auto");
}
