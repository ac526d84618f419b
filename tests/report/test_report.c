/* The engine's reporter (gearbox/engine/report.h): a program that sets one trains a tiny
 * model and gets every logged step as a record (steps in order, finite losses, the
 * figures a step line shows), the evaluations and the run's end as records, the plan as
 * lines and a progress line it can drop, while the engine writes nothing to stdout or
 * stderr. Unsetting the reporter brings back the printer.
 *
 *   test_report SCRATCH_DIR      (GEARBOX_PLUGIN_PATH: the build tree's plugins) */
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gearbox/engine/report.h"
#include "config.h"
#include "data.h"
#include "train.h"

#define STEPS 6
#define EVAL_EVERY 3

typedef struct heard {
    int reports, infos, errors;
    int steps[STEPS + 1];      /* the step of each step record, in arrival order */
    int n_steps;
    int finite_losses;         /* step records with a finite loss, lr and tokens/s */
    int evals_at[2], n_evals;
    int done_steps;            /* the DONE record's step count; -1 before it */
    int plan_line;             /* a "model: " line from "train" */
    int progress, progress_ended;  /* progress reports; the last one was "" */
    int lines_match;           /* every step record's text is its step line */
    char first_error[512];
} heard;

static void on_report(const gb_report_entry *r, void *user)
{
    heard *h = user;
    h->reports++;
    if (r->level == GB_REPORT_ERROR && !h->errors++)
        snprintf(h->first_error, sizeof h->first_error, "%s", r->text);
    if (r->level == GB_REPORT_PROGRESS) {
        h->progress++;
        h->progress_ended = r->text[0] == '\0';
        return;
    }
    if (r->level == GB_REPORT_INFO)
        h->infos++;
    if (!r->metrics) {
        h->plan_line |= strcmp(r->source, "train") == 0 && strncmp(r->text, "model: ", 7) == 0;
        return;
    }
    const gb_report_metrics *m = r->metrics;
    if (m->struct_size != sizeof *m || !GB_REPORT_HAS(m, gpu_memory_total_bytes))
        return;
    if (m->record == GB_RECORD_STEP && h->n_steps < STEPS + 1) {
        h->steps[h->n_steps++] = (int)m->step;
        h->finite_losses += isfinite(m->loss) && m->loss > 0 && isfinite(m->lr) &&
                            m->tokens_per_s > 0 && m->steps == STEPS;
        char line[64];
        snprintf(line, sizeof line, "step %5d/%d | loss %.4f | ", (int)m->step, STEPS, m->loss);
        h->lines_match += strncmp(r->text, line, strlen(line)) == 0;
    } else if (m->record == GB_RECORD_EVAL && h->n_evals < 2) {
        if (isfinite(m->train_loss) && isfinite(m->val_loss) && isnan(m->loss))
            h->evals_at[h->n_evals++] = (int)m->step;
    } else if (m->record == GB_RECORD_DONE) {
        h->done_steps = (int)m->step;
    }
}

static int failures;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", ok ? "ok" : "FAIL");
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    failures += !ok;
}

/* A gearbox data folder: 16 letters in a repeating pattern with some noise. */
static int write_data(const char *dir)
{
    char path[4300];
    gb_vocab vocab = {.size = 16};
    for (int i = 0; i < vocab.size; i++)
        vocab.bytes[i] = (unsigned char)('a' + i);
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    if (gb_vocab_write(path, &vocab))
        return -1;
    static const char *const splits[] = {"train", "val"};
    unsigned state = 12345;
    for (int s = 0; s < 2; s++) {
        uint16_t ids[2048];
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
            state = state * 1103515245u + 12345u;
            ids[i] = (uint16_t)((i % 7 + (state >> 28 == 0 ? state >> 16 : 0)) % 16);
        }
        snprintf(path, sizeof path, "%s/%s.bin", dir, splits[s]);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(ids, sizeof ids, 1, f) != 1 || fclose(f) != 0)
            return -1;
    }
    return 0;
}

/* stdout and stderr into files of `dir` (saved in saved[2]), or back. */
static int capture(const char *dir, int saved[2])
{
    fflush(stdout);
    fflush(stderr);
    for (int fd = 1; fd <= 2; fd++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/fd%d.txt", dir, fd);
        int file = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        saved[fd - 1] = dup(fd);
        if (file < 0 || saved[fd - 1] < 0 || dup2(file, fd) < 0)
            return -1;
        close(file);
    }
    return 0;
}

/* Restores stdout and stderr; the bytes written to them meanwhile, into `text`. */
static long release(const char *dir, const int saved[2], char *text, size_t cap)
{
    fflush(stdout);
    fflush(stderr);
    long total = 0;
    text[0] = '\0';
    for (int fd = 1; fd <= 2; fd++) {
        dup2(saved[fd - 1], fd);
        close(saved[fd - 1]);
        char path[4096];
        snprintf(path, sizeof path, "%s/fd%d.txt", dir, fd);
        FILE *f = fopen(path, "r");
        size_t used = strlen(text);
        if (f) {
            text[used + fread(text + used, 1, cap - used - 1, f)] = '\0';
            fseek(f, 0, SEEK_END);
            total += ftell(f);
            fclose(f);
        }
    }
    return total;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_report SCRATCH_DIR\n");
        return 2;
    }
    char dir[4096], data[4200], ini[12000], written[4096];
    snprintf(dir, sizeof dir, "%s/report-run", argv[1]);
    snprintf(data, sizeof data, "%s/data", dir);
    mkdir(dir, 0755);
    mkdir(data, 0755);
    if (write_data(data)) {
        perror(data);
        return 1;
    }
    snprintf(ini, sizeof ini,
             "[run]\nseed = 7\nsteps = %d\nout_dir = %s/out\nthreads = 1\nlog_every = 1\n"
             "eval_every = %d\neval_iters = 1\ncheckpoint_every = 0\n"
             "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 8\n"
             "[data]\ndir = %s\nbatch_size = 2\n[train]\nlearning_rate = 1e-2\n"
             "[optim]\nplugin = adamw\n", STEPS, dir, EVAL_EVERY, data);
    gb_diag diag = {0};
    gb_config *cfg = gb_config_load_string(ini, "test_report", dir, &diag);
    if (!cfg) {
        gb_diag_print(&diag, stdout);
        return 1;
    }

    heard h = {.done_steps = -1};
    gb_engine_set_reporter(on_report, &h);
    int saved[2];
    if (capture(dir, saved)) {
        perror("capturing stdout and stderr");
        return 1;
    }
    gb_train_options opts = {0};
    int status = gb_train(cfg, &opts);
    long bytes = release(dir, saved, written, sizeof written);
    gb_engine_set_reporter(NULL, NULL);

    check(status == 0, "gb_train returned %d%s%s", status, h.errors ? "; first error: " : "",
          h.first_error);
    check(bytes == 0, "nothing written to stdout or stderr while the reporter was set (%ld "
          "bytes: %.300s)", bytes, written);
    int in_order = h.n_steps == STEPS;
    for (int i = 0; in_order && i < STEPS; i++)
        in_order = h.steps[i] == i + 1;
    check(in_order, "a step record for each of steps 1..%d, in order (%d records)", STEPS,
          h.n_steps);
    check(h.finite_losses == STEPS, "every step record has a finite loss, lr and tokens/s "
          "(%d of %d)", h.finite_losses, STEPS);
    check(h.lines_match == STEPS, "every step record's text is its step line (%d of %d)",
          h.lines_match, STEPS);
    check(h.n_evals == 2 && h.evals_at[0] == EVAL_EVERY && h.evals_at[1] == STEPS,
          "evaluation records after steps %d and %d (%d records)", EVAL_EVERY, STEPS, h.n_evals);
    check(h.done_steps == STEPS, "the run's end as a record of %d steps (%d)", STEPS,
          h.done_steps);
    check(h.plan_line, "the plan's \"model: \" line reported by train");
    check(h.progress > 0 && h.progress_ended, "a progress line at its own level, ended with "
          "\"\" (%d reports)", h.progress);

    if (capture(dir, saved)) {
        perror("capturing stdout and stderr");
        return 1;
    }
    gb_report(GB_REPORT_INFO, "test", "a line for stdout");
    gb_report(GB_REPORT_WARNING, "test", "a line for stderr");
    release(dir, saved, written, sizeof written);
    check(strcmp(written, "a line for stdout\na line for stderr\n") == 0,
          "without a reporter the printer writes info to stdout and warnings to stderr");
    gb_config_free(cfg);
    gb_diag_clear(&diag);
    return failures ? 1 : 0;
}
