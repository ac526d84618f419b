/* Checkpoint retention, [run] keep_last: after each checkpoint a run deletes its folder's
 * older checkpoints, keeping the newest N by step, the one just written and the one whose
 * evaluation had the lowest validation loss (read from metrics.jsonl, which every
 * evaluation appends to before the checkpoint of its step is written). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "fsutil.h"
#include "report.h"

/* A checkpoint file of the folder: its step and its name. */
typedef struct found_checkpoint {
    long long step;
    char name[256];   /* a dirent's d_name */
} found_checkpoint;

/* The checkpoints found in `dir`, *count of them (0 when none or the folder cannot be
 * listed). malloc'ed. */
static found_checkpoint *list_checkpoints(const char *dir, size_t *count)
{
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    found_checkpoint *found = NULL;
    size_t cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        long long step = gb_checkpoint_file_step(e->d_name);
        if (step < 0)
            continue;
        if (*count == cap) {
            found_checkpoint *grown = realloc(found, (cap = cap ? 2 * cap : 16) * sizeof *found);
            if (!grown)
                break;
            found = grown;
        }
        found[*count].step = step;
        snprintf(found[*count].name, sizeof found[*count].name, "%s", e->d_name);
        ++*count;
    }
    closedir(d);
    return found;
}

static int newest_first(const void *x, const void *y)
{
    long long a = ((const found_checkpoint *)x)->step, b = ((const found_checkpoint *)y)->step;
    return (a < b) - (a > b);
}

static int holds_step(const found_checkpoint *found, size_t n, long long step)
{
    for (size_t i = 0; i < n; i++)
        if (found[i].step == step)
            return 1;
    return 0;
}

/* Of the checkpoint steps `steps`, the one with the lowest finite val_loss among the
 * evaluation lines of the metrics file at `path` ({"step": N, ..., "val_loss": x}); -1
 * when none of them was evaluated. The first of equal losses wins. */
static long long best_evaluated(const char *path, const found_checkpoint *found, size_t n)
{
    unsigned char *text;
    size_t size;
    const char *why;
    if (gb_read_regular_file(path, &text, &size, &why))
        return -1;
    long long best = -1;
    double best_loss = INFINITY;
    for (char *line = (char *)text; line < (char *)text + size;) {
        char *end = memchr(line, '\n', (size_t)((char *)text + size - line));
        size_t len = end ? (size_t)(end - line) : strlen(line);
        json_t *object = json_loadb(line, len, 0, NULL);
        json_t *step = json_object_get(object, "step"), *loss = json_object_get(object, "val_loss");
        if (json_is_integer(step) && json_is_number(loss) &&
            json_number_value(loss) < best_loss &&
            holds_step(found, n, (long long)json_integer_value(step))) {
            best = (long long)json_integer_value(step);
            best_loss = json_number_value(loss);
        }
        json_decref(object);
        line += len + 1;
    }
    free(text);
    return best;
}

static void delete_checkpoint(const char *dir, const char *name, int64_t keep_last,
                              long long best)
{
    char path[4200], why[120] = "";
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (best >= 0)
        snprintf(why, sizeof why, "; the best val loss, step %lld's, is kept", best);
    if (unlink(path) == 0)
        gb_report(GB_REPORT_INFO, "train", "checkpoint retention: deleted %s ([run] keep_last "
                  "= %lld%s)", path, (long long)keep_last, why);
    else
        gb_report(GB_REPORT_WARNING, "train", "gearbox: warning: checkpoint retention: cannot "
                  "delete %s: %s; the run goes on", path, strerror(errno));
}

void gb_checkpoint_retain(const char *dir, int64_t keep_last, int64_t newest_step)
{
    size_t n;
    found_checkpoint *found = keep_last > 0 ? list_checkpoints(dir, &n) : NULL;
    if (!found)
        return;
    qsort(found, n, sizeof *found, newest_first);
    char metrics[4200];
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", dir);
    long long best = best_evaluated(metrics, found, n);
    for (size_t i = (size_t)keep_last; i < n; i++)
        if (found[i].step != best && found[i].step != newest_step)
            delete_checkpoint(dir, found[i].name, keep_last, best);
    free(found);
}
