/* OUT_DIR/metrics.jsonl kept consistent across resumes: a run that is resumed from the
 * checkpoint of step N continues the file from step N, whatever it had logged after. */
#ifndef GB_CORE_METRICS_H
#define GB_CORE_METRICS_H

#include <stdint.h>

#include "diag.h"

/* Drops from the metrics file at `path` every line of a step after `step`, the summary
 * lines (a resumed run writes its own) and a last line cut short by a crash, so that
 * appending from step + 1 leaves one line per step and evaluation. Lines it does not
 * recognise are kept. Rewrites the file atomically; a missing file is left missing.
 * 0, or -1 with the reason in diag. */
int gb_metrics_rewind(const char *path, int64_t step, gb_diag *diag);

#endif
