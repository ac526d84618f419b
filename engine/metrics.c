/* metrics.jsonl on resume; see metrics.h. */
#include "metrics.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"

/* Whether a logged line belongs to the run up to `step`: train.c writes every line as an
 * object with "step" (a logged step or an evaluation) or "summary". */
static int keep_line(const char *line, size_t len, int64_t step)
{
    json_t *object = json_loadb(line, len, 0, NULL);
    json_t *logged = json_object_get(object, "step");
    int keep = !json_object_get(object, "summary") &&
               (!json_is_integer(logged) || json_integer_value(logged) <= step);
    json_decref(object);
    return keep;
}

static int write_kept(FILE *out, const char *text, size_t size, int64_t step)
{
    for (const char *line = text; line < text + size;) {
        const char *newline = memchr(line, '\n', (size_t)(text + size - line));
        if (!newline)
            break; /* the last line, cut short when the run was killed */
        size_t len = (size_t)(newline - line);
        if (keep_line(line, len, step) && fwrite(line, 1, len + 1, out) != len + 1)
            return -1;
        line = newline + 1;
    }
    return 0;
}

int gb_metrics_rewind(const char *path, int64_t step, gb_diag *diag)
{
    unsigned char *text;
    size_t size;
    const char *why;
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return 0;
    if (gb_read_regular_file(path, &text, &size, &why)) {
        gb_diag_add(diag, "cannot read %s to continue it: %s", path, why);
        return -1;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    int failed = !out || write_kept(out, (const char *)text, size, step) != 0;
    if (out)
        failed |= fclose(out) != 0;
    free(text);
    if (failed || rename(tmp, path) != 0) {
        gb_diag_add(diag, "cannot rewrite %s to continue it from step %lld: %s", path,
                    (long long)step, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
