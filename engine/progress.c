/* The progress line; see progress.h. */
#include "progress.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "clock.h"

#define BAR_CELLS 16
#define REDRAW_MS 100.0
#define ERASE_LINE "\033[K"

void gb_progress_start(gb_progress *p, FILE *out, int64_t first, int64_t total)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->tty = isatty(fileno(out));
    p->first = first;
    p->total = total;
    p->start_ms = gb_now_ms();
}

static int terminal_width(FILE *out)
{
    struct winsize ws;
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 80;
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

static void draw(gb_progress *p)
{
    /* a line longer than the terminal wraps, and '\r' then redraws only its tail */
    int width = terminal_width(p->out) - 1;
    fprintf(p->out, "\r%.*s" ERASE_LINE, width > 0 ? width : 1, p->bar);
    fflush(p->out);
}

void gb_progress_update(gb_progress *p, int64_t step, double loss, double tokens_per_s)
{
    if (!p->tty)
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
    char cells[BAR_CELLS + 1], eta[32], loss_text[32] = "";
    int filled = (int)(fraction * BAR_CELLS);
    for (int i = 0; i < BAR_CELLS; i++)
        cells[i] = i < filled ? '#' : '.';
    cells[BAR_CELLS] = '\0';
    format_duration(done > 0 ? (now - p->start_ms) / 1e3 / (double)done * (double)left : 0.0,
                    eta, sizeof eta);
    if (!isnan(loss))
        snprintf(loss_text, sizeof loss_text, " | loss %.4f", loss);
    snprintf(p->bar, sizeof p->bar, "step %lld/%lld [%s] %3.0f%% | ETA %s%s | %.0f tok/s%s",
             (long long)step, (long long)p->total, cells, 100.0 * fraction, eta, loss_text,
             p->tokens_per_s, p->tail);
    draw(p);
}

void gb_progress_print(gb_progress *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (p->tty && p->bar[0])
        fputs("\r" ERASE_LINE, p->out);
    vfprintf(p->out, fmt, ap);
    va_end(ap);
    fputc('\n', p->out);
    if (p->tty && p->bar[0])
        draw(p);
    fflush(p->out);
}

void gb_progress_finish(gb_progress *p)
{
    if (p->tty && p->bar[0])
        fputc('\n', p->out);
    p->bar[0] = '\0';
    fflush(p->out);
}
