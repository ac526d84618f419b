/* What one training run of an A/B comparison reported, read from its metrics.jsonl alone
 * (docs/observability.md): the logged steps, the evaluations, and the closing summary
 * line with the run's peak resident memory and its memory plan. Each line is parsed as
 * JSON (Jansson); unknown fields and lines that are neither a step, an evaluation nor the
 * summary are ignored.
 */
#ifndef GB_AB_METRICS_H
#define GB_AB_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* The planned-memory categories, in the order of the memory plan. */
enum { GB_AB_MEM_PARAMS, GB_AB_MEM_GRADS, GB_AB_MEM_OPTIMIZER, GB_AB_MEM_ACTIVATIONS,
       GB_AB_MEM_WORKSPACE, GB_AB_MEM_N };
extern const char *const gb_ab_mem_names[GB_AB_MEM_N];

typedef struct gb_ab_step {
    int64_t step;       /* 1-based, as logged */
    double loss;
    double ms;
    double tokens_per_s;
    double mfu;         /* NaN when the run does not report it */
} gb_ab_step;

typedef struct gb_ab_eval {
    int64_t step;       /* the step it followed */
    double val_loss;
} gb_ab_eval;

typedef struct gb_ab_run {
    gb_ab_step *steps;                    /* logged steps, in file order */
    size_t n_steps;
    gb_ab_eval *evals;                    /* evaluations with a val loss, in file order */
    size_t n_evals;
    double train_loss, val_loss;          /* the last evaluation; NaN when none */
    double peak_rss_bytes;                /* NaN when not reported */
    double planned_bytes[GB_AB_MEM_N];    /* NaN when not reported */
} gb_ab_run;

/* An empty run: no steps, every figure NaN. */
gb_ab_run gb_ab_run_empty(void);

/* Reads a metrics.jsonl file into `run` (which it first empties). Returns 0, or -1 with
 * what is wrong in `err`: the file cannot be read, or "PATH:LINE:COLUMN: ..." for a line
 * that is not JSON or whose known fields have the wrong type. */
int gb_ab_run_read(const char *path, gb_ab_run *run, char *err, size_t err_cap);
void gb_ab_run_free(gb_ab_run *run);

#endif
