/* What one training run of an A/B comparison reported: its metrics.jsonl (logged steps,
 * evaluations, and the optional closing summary line with memory figures), and the two
 * printed lines that stand in for the summary when a run does not write one (the
 * "memory plan:" line of `gearbox check` and the "process RSS" of train's "done:" line).
 *
 * The reader knows the flat objects `gearbox train` writes, one per line; it is not a
 * general JSON parser (no arrays, no strings with escapes, no nesting beyond the
 * summary's planned_bytes object). Unknown fields are ignored.
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

typedef struct gb_ab_run {
    gb_ab_step *steps;                    /* logged steps, in file order */
    size_t n_steps;
    double train_loss, val_loss;          /* the last evaluation; NaN when none */
    double peak_rss_bytes;                /* NaN when not reported */
    double planned_bytes[GB_AB_MEM_N];    /* NaN when not reported */
} gb_ab_run;

/* An empty run: no steps, every figure NaN. */
gb_ab_run gb_ab_run_empty(void);

/* Reads a metrics.jsonl file into `run` (which it first empties). Returns 0, or -1 with
 * errno set when the file cannot be read or memory runs out. */
int gb_ab_run_read(const char *path, gb_ab_run *run);
void gb_ab_run_free(gb_ab_run *run);

/* The figures of a "memory plan: T MiB = params P + grads G + ..." line anywhere in
 * `text`, in bytes. Returns 0, or -1 (planned untouched) when there is no such line. */
int gb_ab_parse_memory_plan(const char *text, double planned[GB_AB_MEM_N]);

/* The "process RSS N MiB" figure of a "done:" line anywhere in `text`, in bytes.
 * Returns 0, or -1 when there is none. */
int gb_ab_parse_done_rss(const char *text, double *bytes);

/* The number after `"key":` in a one-line JSON object. Returns 1 and sets *value when
 * present and numeric, else 0. */
int gb_ab_json_number(const char *line, const char *key, double *value);

#endif
