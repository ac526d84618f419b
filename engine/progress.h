/* The training progress line: on a terminal, one line redrawn in place with '\r' (step,
 * a bar, ETA, loss, tokens/s), with whole lines such as evaluations printed above it;
 * elsewhere (a pipe, a file, CI logs) it draws nothing and lines are printed as they are,
 * so logs stay plain text. Terminal escapes are limited to "erase to end of line". */
#ifndef GB_CORE_PROGRESS_H
#define GB_CORE_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct gb_progress {
    FILE *out;
    int tty;                 /* out is a terminal: draw the bar */
    int64_t first, total;    /* the run covers steps first+1 .. total */
    double start_ms, last_draw_ms;
    double tokens_per_s;     /* smoothed */
    char bar[512];           /* the last line drawn, redrawn after a message */
    char tail[96];           /* appended to the bar, e.g. the GPU's figures; "" for none */
} gb_progress;

/* `first` is the step a run starts after (0, or the checkpoint's step on resume). */
void gb_progress_start(gb_progress *p, FILE *out, int64_t first, int64_t total);
/* After `step` (1-based) finished: its mean loss (NAN when not read) and tokens/s.
 * Redraws at most ten times a second, and always on the last step. */
void gb_progress_update(gb_progress *p, int64_t step, double loss, double tokens_per_s);
/* Prints one whole line (no trailing newline needed), above the bar on a terminal. */
void gb_progress_print(gb_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Ends the bar's line, so later output starts on a line of its own. */
void gb_progress_finish(gb_progress *p);

#endif
