/* The engine's reporter and its default printer; see gearbox/engine/report.h. */
#include "report.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define ERASE_LINE "\033[K"

static pthread_mutex_t reporter_lock = PTHREAD_MUTEX_INITIALIZER;
static gb_reporter_fn reporter = gb_report_print;
static void *reporter_user;

void gb_engine_set_reporter(gb_reporter_fn fn, void *user)
{
    pthread_mutex_lock(&reporter_lock);
    reporter = fn ? fn : gb_report_print;
    reporter_user = fn ? user : NULL;
    pthread_mutex_unlock(&reporter_lock);
}

static void deliver(gb_report_level level, const char *source, const char *text,
                    const gb_report_metrics *metrics)
{
    gb_report_entry r = {.level = level, .source = source, .text = text, .metrics = metrics};
    pthread_mutex_lock(&reporter_lock);
    reporter(&r, reporter_user);
    pthread_mutex_unlock(&reporter_lock);
}

/* The formatted text, or the format itself when memory is too short to format it. */
static void deliver_formatted(gb_report_level level, const char *source,
                              const gb_report_metrics *metrics, const char *fmt, va_list ap)
{
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    deliver(level, source, text ? text : fmt, metrics);
    free(text);
}

void gb_reportv(gb_report_level level, const char *source, const char *fmt, va_list ap)
{
    deliver_formatted(level, source, NULL, fmt, ap);
}

void gb_report(gb_report_level level, const char *source, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    deliver_formatted(level, source, NULL, fmt, ap);
    va_end(ap);
}

gb_report_metrics gb_report_metrics_of(gb_record_kind record)
{
    return (gb_report_metrics){
        .struct_size = sizeof(gb_report_metrics), .record = record, .loss = NAN, .lr = NAN,
        .ms = NAN, .tokens_per_s = NAN, .grad_norm = NAN, .mfu = NAN, .loss_scale = NAN,
        .train_loss = NAN, .val_loss = NAN};
}

void gb_report_record(const char *source, const gb_report_metrics *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    deliver_formatted(GB_REPORT_INFO, source, m, fmt, ap);
    va_end(ap);
}

FILE *gb_report_buffer_open(gb_report_buffer *b)
{
    *b = (gb_report_buffer){0};
    b->f = open_memstream(&b->text, &b->len);
    if (!b->f)
        gb_report(GB_REPORT_ERROR, "report", "gearbox: error: out of memory gathering the "
                  "lines of a report");
    return b->f;
}

void gb_report_buffer_close(gb_report_buffer *b, gb_report_level level, const char *source)
{
    if (!b->f || fclose(b->f) != 0 || !b->text) {
        free(b->text);
        return;
    }
    for (char *line = b->text; *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        deliver(level, source, line, NULL);
        line = end ? end + 1 : line + strlen(line);
    }
    free(b->text);
}

/* ---- the default printer --------------------------------------------------------------- */

/* The progress line drawn on stdout, a terminal; "" when none is. */
static char progress_line[512];

static int terminal_width(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 80;
}

static void draw_progress(void)
{
    /* a line longer than the terminal wraps, and '\r' then redraws only its tail */
    int width = terminal_width() - 1;
    fprintf(stdout, "\r%.*s" ERASE_LINE, width > 0 ? width : 1, progress_line);
    fflush(stdout);
}

/* Draws `text` in place of the progress line, or ends the line ("") so that later output
 * starts on a line of its own. Off a terminal there is no progress line. */
static void print_progress(const char *text)
{
    if (!isatty(STDOUT_FILENO))
        return;
    if (text[0]) {
        snprintf(progress_line, sizeof progress_line, "%s", text);
        draw_progress();
        return;
    }
    if (progress_line[0])
        fputc('\n', stdout);
    progress_line[0] = '\0';
    fflush(stdout);
}

void gb_report_print(const gb_report_entry *r, void *user)
{
    (void)user;
    if (r->level == GB_REPORT_PROGRESS) {
        print_progress(r->text);
        return;
    }
    if (r->level < GB_REPORT_INFO) {
        fprintf(stderr, "%s\n", r->text);
        return;
    }
    if (progress_line[0] && r->metrics && r->metrics->record == GB_RECORD_STEP)
        return;   /* the progress line shows the step's figures */
    if (progress_line[0])
        fputs("\r" ERASE_LINE, stdout);
    fprintf(stdout, "%s\n", r->text);
    if (progress_line[0])
        draw_progress();
    fflush(stdout);
}
