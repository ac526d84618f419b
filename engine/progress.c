/* The progress line; see progress.h. */
#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "report.h"

#define BAR_CELLS 16
#define REDRAW_MS 100.0

void gb_progress_start(gb_progress *p, int shown, int64_t first, int64_t total)
{
    memset(p, 0, sizeof *p);
    p->shown = shown;
    p->first = first;
    p->total = total;
    p->start_ms = gb_now_ms();
}

/* "1h02m", "3m07s", "42s" */
static void format_duration(double seconds, char *buf, size_t cap)
{
    long s = (long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, cap, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else if (s >= 60)
        snprintf(buf, cap, "%ldm%02lds", s / 60, s % 60);
    else
        snprintf(buf, cap, "%lds", s);
}

void gb_progress_update(gb_progress *p, int64_t step, double loss, double tokens_per_s)
{
    if (!p->shown)
        return;
    /* smoothed over roughly the last ten steps, so the figure is readable */
    p->tokens_per_s = p->tokens_per_s > 0 ? 0.9 * p->tokens_per_s + 0.1 * tokens_per_s
                                          : tokens_per_s;
    double now = gb_now_ms();
    if (now - p->last_draw_ms < REDRAW_MS && step != p->total)
        return;
    p->last_draw_ms = now;
    int64_t done = step - p->first, left = p->total - step;
    double fraction = p->total > 0 ? (double)step / (double)p->total : 1.0;
    char cells[BAR_CELLS + 1], eta[32], loss_text[32] = "", line[512];
    int filled = (int)(fraction * BAR_CELLS);
    for (int i = 0; i < BAR_CELLS; i++)
        cells[i] = i < filled ? '#' : '.';
    cells[BAR_CELLS] = '\0';
    format_duration(done > 0 ? (now - p->start_ms) / 1e3 / (double)done * (double)left : 0.0,
                    eta, sizeof eta);
    if (!isnan(loss))
        snprintf(loss_text, sizeof loss_text, " | loss %.4f", loss);
    snprintf(line, sizeof line, "step %lld/%lld [%s] %3.0f%% | ETA %s%s | %.0f tok/s%s",
             (long long)step, (long long)p->total, cells, 100.0 * fraction, eta, loss_text,
             p->tokens_per_s, p->tail);
    gb_report(GB_REPORT_PROGRESS, "train", "%s", line);
    p->reported = 1;
}

void gb_progress_finish(gb_progress *p)
{
    if (p->reported)
        gb_report(GB_REPORT_PROGRESS, "train", "%s", "");
    p->reported = 0;
}
