/* The training loop: data -> forward -> loss -> backward -> clip -> optimizer step ->
 * metrics, with gradient accumulation, the learning-rate schedule, periodic evaluation
 * and checkpoints, and exact resume. */
#ifndef GB_CORE_TRAIN_H
#define GB_CORE_TRAIN_H

#include "config.h"

typedef struct gb_train_options {
    const char *plugin_path;   /* --plugin-path, or NULL */
    const char *resume;        /* --resume CHECKPOINT, or NULL */
} gb_train_options;

/* Trains as `cfg` says. Returns the process exit status: 0 done, 1 failed while
 * running, 2 refused before starting (bad config, data or plugins), 130 interrupted
 * (after writing a checkpoint). */
int gb_train(gb_config *cfg, const gb_train_options *opts);

#endif
