/* What the engine says, delivered to the program that embeds it.
 *
 * Every line the engine would print (errors, warnings, a run's plan, evaluations,
 * checkpoints, the progress line, the plugins' log lines) and every logged step's figures
 * reach one reporter, a function the program sets with gb_engine_set_reporter. Without
 * one, gb_report_print prints them as the gearbox program shows them (errors, warnings
 * and notes on stderr, the run's account on stdout, the progress line only on a
 * terminal), so a program that sets none sees what the engine always printed.
 *
 * A report is one line of text (no trailing newline), and may carry a record: the figures
 * of a training step, an evaluation or a finished run, of which the line is the printed
 * form. A program that wants figures reads the record; one that wants text, the line.
 *
 * The reporter is called on the thread that reports (the training loop's, or the data
 * prefetcher's for a batch it could not draw), one report at a time: the engine holds a
 * lock around each call, so a reporter must not report or call the engine itself (it may
 * hand the report on to gb_report_print). */
#ifndef GB_ENGINE_REPORT_H
#define GB_ENGINE_REPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* gb_report's format checked as printf's where the compiler can */
#if defined(__GNUC__) || defined(__clang__)
#define GB_REPORT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define GB_REPORT_PRINTF(fmt, args)
#endif

typedef enum gb_report_level {
    GB_REPORT_ERROR = 0,    /* the call or the run fails (stderr) */
    GB_REPORT_WARNING = 1,  /* it goes on, differently from what was asked (stderr) */
    GB_REPORT_NOTE = 2,     /* a side remark: the plugins' own info and debug lines (stderr) */
    GB_REPORT_INFO = 3,     /* the run's account: plan, choices, steps, evaluations (stdout) */
    GB_REPORT_PROGRESS = 4, /* the progress line, redrawn in place on a terminal; "" ends
                             * it. A program may drop it: logged steps come as records. */
} gb_report_level;

typedef enum gb_record_kind {
    GB_RECORD_STEP = 1, /* a logged training step: step, steps, loss, lr, ms, tokens_per_s,
                         * grad_norm, mfu, loss_scale and skipped_steps (with a loss
                         * scaler), rss_bytes, peak_rss_bytes, the GPU's memory */
    GB_RECORD_EVAL = 2, /* an evaluation after `step`: train_loss, val_loss */
    GB_RECORD_DONE = 3, /* the run's end: `step` steps run in `ms`, tokens_per_s, mfu,
                         * train_loss, val_loss (the last evaluation), peak_rss_bytes,
                         * planned_bytes */
} gb_record_kind;

/* The figures of one record. Fields a record does not carry are NAN (reals) or 0.
 * Later versions append fields: read one only where GB_REPORT_HAS says it is there. */
typedef struct gb_report_metrics {
    size_t struct_size;  /* sizeof(gb_report_metrics) of the engine that filled it */
    gb_record_kind record;
    int64_t step;        /* steps finished, 1-based; of the whole run, resumed ones included */
    int64_t steps;       /* the run's [run] steps */
    double loss;         /* the step's training loss, averaged over micro-steps and ranks */
    double lr;           /* the learning rate the step used */
    double ms;           /* the step's wall time in milliseconds (DONE: the run's) */
    double tokens_per_s;
    double grad_norm;    /* before clipping */
    double mfu;          /* model FLOPs utilisation, 0..1; NAN when the peak is unknown */
    double loss_scale;   /* NAN without a loss scaler */
    int64_t skipped_steps; /* steps the loss scaler skipped so far */
    double train_loss, val_loss;  /* EVAL and DONE: mean loss over [train] eval_iters batches */
    uint64_t rss_bytes, peak_rss_bytes;  /* the process's resident memory, now and at most */
    uint64_t planned_bytes;              /* DONE: the model's planned memory */
    uint64_t gpu_memory_used_bytes, gpu_memory_total_bytes; /* STEP on a GPU, from NVML;
                                                             * 0 when not known */
} gb_report_metrics;

/* Whether metrics `m` has `field`: the engine that filled it knew of it. */
#define GB_REPORT_HAS(m, field) \
    (offsetof(gb_report_metrics, field) + sizeof((m)->field) <= (m)->struct_size)

typedef struct gb_report_entry {
    gb_report_level level;
    const char *source;              /* what speaks: "train", "model", "loader", "attn/flash" */
    const char *text;                /* the line as gearbox prints it, without the newline */
    const gb_report_metrics *metrics; /* the record, or NULL for a plain message */
} gb_report_entry;

typedef void (*gb_reporter_fn)(const gb_report_entry *report, void *user);

/* Sends every later report to `fn` with `user`; NULL restores gb_report_print. */
void gb_engine_set_reporter(gb_reporter_fn fn, void *user);

/* The printer the engine uses when no reporter is set (`user` is unused): each line with
 * its newline, errors, warnings and notes to stderr, the rest to stdout. On a terminal it
 * draws the progress line in place and prints the other stdout lines above it, and leaves
 * out step lines while it draws one (the line shows their figures); elsewhere it prints
 * no progress line and every step line. */
void gb_report_print(const gb_report_entry *report, void *user);

/* Reports one formatted line from `source` (a program's own lines reach the same place). */
void gb_report(gb_report_level level, const char *source, const char *fmt, ...)
    GB_REPORT_PRINTF(3, 4);

#ifdef __cplusplus
}
#endif

#endif
