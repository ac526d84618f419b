/* The training progress line (step, a bar, ETA, loss, tokens/s), reported at
 * GB_REPORT_PROGRESS at most ten times a second: the default printer redraws it in place
 * on a terminal, with whole lines such as evaluations printed above it, and shows nothing
 * of it elsewhere (a pipe, a file, CI logs), so logs stay plain text. */
#ifndef GB_CORE_PROGRESS_H
#define GB_CORE_PROGRESS_H

#include <stdint.h>

typedef struct gb_progress {
    int shown;               /* report the line (else updates are silent) */
    int reported;            /* a line was reported and not yet ended */
    int64_t first, total;    /* the run covers steps first+1 .. total */
    double start_ms, last_draw_ms;
    double tokens_per_s;     /* smoothed */
    char tail[96];           /* appended to the line, e.g. the GPU's figures; "" for none */
} gb_progress;

/* `first` is the step a run starts after (0, or the checkpoint's step on resume); a run
 * that is not `shown` reports no progress line. */
void gb_progress_start(gb_progress *p, int shown, int64_t first, int64_t total);
/* After `step` (1-based) finished: its mean loss (NAN when not read) and tokens/s.
 * Reports at most ten times a second, and always on the last step. */
void gb_progress_update(gb_progress *p, int64_t step, double loss, double tokens_per_s);
/* Ends the line, so later output starts on a line of its own. */
void gb_progress_finish(gb_progress *p);

#endif
