/* Diagnostics: a list of user-facing problem reports, collected rather than printed at
 * once so that validation can report every problem in a config, not just the first.
 * Each message is one line that names the place at fault (file:line, section, key,
 * plugin) and what to do about it. */
#ifndef GB_CORE_DIAG_H
#define GB_CORE_DIAG_H

#include <stdio.h>

typedef struct gb_diag {
    int count;
    int cap;
    char **messages;
} gb_diag;

/* Appends one formatted message (no trailing newline needed). */
void gb_diag_add(gb_diag *diag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes every message as "gearbox: error: MESSAGE\n" to `out`. */
void gb_diag_print(const gb_diag *diag, FILE *out);
/* Reports every message as "gearbox: error: MESSAGE" from `source` (report.h). */
void gb_diag_report(const gb_diag *diag, const char *source);
void gb_diag_clear(gb_diag *diag);

#endif
