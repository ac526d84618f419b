/* The engine's side of its reporting (the program's side is gearbox/engine/report.h):
 * records, the va_list form of gb_report, and text written by functions that print to a
 * FILE, gathered to be reported line by line. */
#ifndef GB_CORE_REPORT_H
#define GB_CORE_REPORT_H

#include <stdarg.h>
#include <stdio.h>

#include "gearbox/engine/report.h"

void gb_reportv(gb_report_level level, const char *source, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Metrics of `record` with every figure absent (NAN or 0), to be filled in. */
gb_report_metrics gb_report_metrics_of(gb_record_kind record);

/* Reports `m` at GB_REPORT_INFO with its printed line. */
void gb_report_record(const char *source, const gb_report_metrics *m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A FILE that gathers what a printing function (gb_model_print_memory, gb_batch_auto)
 * writes; closing it reports each line. */
typedef struct gb_report_buffer {
    FILE *f;
    char *text;
    size_t len;
} gb_report_buffer;

/* NULL when memory is short (the lines are then lost, not the run). */
FILE *gb_report_buffer_open(gb_report_buffer *b);
void gb_report_buffer_close(gb_report_buffer *b, gb_report_level level, const char *source);

#endif
