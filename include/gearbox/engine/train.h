/* The training loop: data -> forward -> loss -> backward -> clip -> optimizer step ->
 * metrics, with gradient accumulation, the learning-rate schedule, periodic evaluation
 * and checkpoints, and exact resume. Every run writes OUT_DIR/manifest.json and
 * OUT_DIR/metrics.jsonl (docs/observability.md lists their fields). */
#ifndef GB_CORE_TRAIN_H
#define GB_CORE_TRAIN_H

#include "gearbox/engine/config.h"
#include "gearbox/engine/data.h"
#include "gearbox/engine/model.h"
#include "gearbox/engine/profile.h"
#include "gearbox/engine/settings.h"

typedef struct gb_train_options {
    const char *plugin_path;   /* --plugin-path, or NULL */
    const char *resume;        /* --resume CHECKPOINT, or NULL */
} gb_train_options;

/* Trains as `cfg` says. Returns the process exit status: 0 done, 1 failed while
 * running, 2 refused before starting (bad config, data or plugins), 130 interrupted
 * (after writing a checkpoint). */
int gb_train(gb_config *cfg, const gb_train_options *opts);
/* From here on SIGINT and SIGTERM (how schedulers preempt a job) only ask the run to stop:
 * gb_train then finishes the current step, writes a checkpoint and returns 130, also when
 * the signal came while it was still starting. gb_train calls it first; `gearbox train`
 * not before, so that a signal still ends it while it waits for a config from a pipe. */
void gb_train_catch_signals(void);

/* What `gearbox train` steps, shared with `gearbox bench step` so both measure the
 * same work: the runtime, the data, the model (batch_size = auto resolved) and the
 * batch buffers, with the plan reported (report.h). */
typedef struct gb_trainer gb_trainer;

/* NULL after reporting why (the config, data or plugins were refused). */
gb_trainer *gb_trainer_open(gb_config *cfg, const char *plugin_path);
void gb_trainer_close(gb_trainer *t);
/* One optimizer step at 0-based iteration `it`; *loss (when not NULL) gets the mean
 * loss of its micro-batches. 0, or -1 after reporting why. */
int gb_trainer_step(gb_trainer *t, int64_t it, float *loss);
/* Waits until the device has run all the work queued so far (timing a step needs it: on a
 * device with a queue gb_trainer_step returns once its work is queued). */
int gb_trainer_sync(gb_trainer *t);
/* Adds the time of every following step to `profile` by phase (NULL: stop). */
void gb_trainer_set_profile(gb_trainer *t, gb_profile *profile);
/* The updates the loss scaler has skipped in this process (an inf or NaN gradient at the
 * scale of the time), after the steps queued so far, waiting for them; 0 without a scaler
 * or before any step. 0, or -1 after reporting why. */
int gb_trainer_skipped_steps(gb_trainer *t, int64_t *skipped);
const gb_settings *gb_trainer_settings(const gb_trainer *t);
/* Model FLOPs of one optimizer step as nanoGPT's estimate_mfu counts them. */
double gb_trainer_flops_per_step(const gb_trainer *t);
/* The FLOP/s MFU is measured against (see gb_peak_flops), its source ("device", "rated
 * CPU" or "measured CPU") and the dtype it is the peak of ("f32", "tf32", "bf16" or "f16"); either out
 * pointer may be NULL. */
double gb_trainer_peak_flops(const gb_trainer *t, const char **source, const char **compute);
/* The run's evaluation after `step` optimizer steps, as training does it at [run]
 * eval_every: the mean loss of [run] eval_iters batches of each split (the same batches
 * for the same step), also written to OUT_DIR/metrics.jsonl (opened, with manifest.json,
 * at the first evaluation or save of a trainer not run by gb_train); either out pointer
 * may be NULL. 0, or -1 after printing why. */
int gb_trainer_evaluate(gb_trainer *t, int64_t step, double *train_loss, double *val_loss);
/* Writes the checkpoint of `step` optimizer steps done, OUT_DIR/ckpt-STEP.gbk (STEP in
 * six digits), from which `gearbox train --resume` and `gearbox sample` continue; on a
 * data-parallel rank other than 0 nothing. 0, or -1 after printing why. */
int gb_trainer_save(gb_trainer *t, int64_t step);

/* The mean loss of `batches` batches of `split`, the ones the run configured by `s`
 * evaluates after `step` optimizer steps (gb_trainer_evaluate draws [run] eval_iters of
 * them), each of rows [first_row, first_row + rows) of the batch through the model `m`
 * (of at least `rows` sequences), with host buffers tokens and targets of rows x
 * block_size; `batches` at most 2^20 - 1. 0, or -1 after reporting why. */
int gb_split_loss(gb_model *m, const gb_dataset *ds, const gb_settings *s, gb_split split,
                  int64_t step, int64_t batches, int64_t first_row, int64_t rows,
                  int32_t *tokens, int32_t *targets, double *loss);

#endif
