/* `gearbox ab`: an A/B comparison of training variants. A variant is a config plus
 * `--set` overrides; each is validated with `gearbox check` (which also gives its
 * effective config and memory plan), then trained for a few steps, R times, interleaved
 * (A B A B ...), each run a child process of this same gearbox binary writing its own
 * metrics.jsonl into the report folder. The report (report.c) sets every variant against
 * the baseline (verdict.h).
 *
 * Left out: running variants in one process (a crash in one would take the others down,
 * and processes keep allocator and thread-pool state apart), running them concurrently
 * (they would compete for the cores they are timed on), and checkpoints (each run's final
 * checkpoint is deleted; the report keeps metrics, logs and configs only).
 */
#ifndef GB_AB_H
#define GB_AB_H

#include <stdint.h>
#include <stdio.h>

#include "metrics.h"

#define GB_AB_NAME_MAX 48
#define GB_AB_MAX_REPEATS 1000

/* The keys `gearbox ab` sets for every run itself (run.steps from --steps, one logged step
 * each, run.eval_every from --eval-every, no checkpoints, the run's own out_dir): a variant
 * or --set that sets one is refused rather than silently overridden. */
#define GB_AB_N_FIXED 5
extern const char *const gb_ab_fixed_keys[GB_AB_N_FIXED];

typedef struct gb_ab_variant {
    char name[GB_AB_NAME_MAX];    /* letters, digits, '_', '-', '.'; also its folder name */
    const char *config;           /* its INI file */
    char **overrides;             /* "section.key=value", after the --set for all */
    int n_overrides;
    int fixed_team;               /* 1: its runs get run.threads=0 (see docs/ab.md) */
    /* filled by gb_ab_execute */
    char *effective;              /* `gearbox check` output: plugins, memory plan, config */
    gb_ab_run *runs;              /* [repeats]; runs_done of them read */
    int runs_done;
    int failed;                   /* the failing child's exit status; 0 while none failed */
    char *failure;                /* which command failed, and the tail of its stderr */
} gb_ab_variant;

typedef struct gb_ab_plan {
    const char *exe;              /* this gearbox binary */
    const char *out_dir;          /* the report folder, absolute, existing */
    const char *plugin_path;      /* --plugin-path, or NULL */
    const char *const *sets;      /* --set for every variant */
    int n_sets;
    int64_t steps, warmup;        /* steps per run; the first `warmup` are not timed */
    int repeats;
    double tolerance;             /* loss differences up to this read as "same curve" */
    int64_t eval_every;           /* [run] eval_every of every run; 0: after the last step */
    double target_loss;           /* --target-loss; NaN when not asked */
    gb_ab_variant *variants;
    int n_variants;
    int baseline;                 /* index into variants */
    const char *command;          /* the command line, shell-quoted, for the report */
    char machine[512];            /* CPU, cores and load, filled by gb_ab_execute */
    long cpus;                    /* online CPUs */
    double load_before;           /* 1-minute load average before the first run: others' work */
    int interrupted;              /* 1: stopped early by Ctrl-C */
} gb_ab_plan;

/* Checks every variant, then trains the runs interleaved, printing one progress line per
 * run. A variant whose check or run fails is marked failed (with its stderr tail) and
 * skipped from then on; the others go on. Returns the number of failed variants. */
int gb_ab_execute(gb_ab_plan *plan);

/* Prints the verdict (the table, then a sentence per variant) to `out` and writes
 * summary.md, loss.svg and step_times.svg into the report folder. Returns 0, or -1 after
 * saying on stderr which file could not be written. */
int gb_ab_report(const gb_ab_plan *plan, FILE *out);

/* The whole of a text file, NUL-terminated and malloc'ed; NULL when it cannot be read. */
char *gb_ab_read_text(const char *path);


#endif
