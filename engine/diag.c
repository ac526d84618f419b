/* Collected diagnostics; see diag.h. */
#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "text.h"

void gb_diag_add(gb_diag *diag, const char *fmt, ...)
{
    char raw[2048], buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* messages quote files and arguments, which may hold any byte */
    gb_escape_controls(raw, buf, sizeof buf);
    if (diag->count == diag->cap) {
        int cap = diag->cap ? diag->cap * 2 : 8;
        char **grown = realloc(diag->messages, (size_t)cap * sizeof *grown);
        if (!grown)
            return; /* out of memory: the earlier messages still explain the failure */
        diag->messages = grown;
        diag->cap = cap;
    }
    char *copy = strdup(buf);
    if (copy)
        diag->messages[diag->count++] = copy;
}

void gb_diag_print(const gb_diag *diag, FILE *out)
{
    for (int i = 0; i < diag->count; i++)
        fprintf(out, "gearbox: error: %s\n", diag->messages[i]);
}

void gb_diag_report(const gb_diag *diag, const char *source)
{
    for (int i = 0; i < diag->count; i++)
        gb_report(GB_REPORT_ERROR, source, "gearbox: error: %s", diag->messages[i]);
}

void gb_diag_clear(gb_diag *diag)
{
    for (int i = 0; i < diag->count; i++)
        free(diag->messages[i]);
    free(diag->messages);
    diag->count = diag->cap = 0;
    diag->messages = NULL;
}
