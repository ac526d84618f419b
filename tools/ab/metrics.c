/* Reading what a run reported; see metrics.h. */
#include "metrics.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const gb_ab_mem_names[GB_AB_MEM_N] = {"params", "grads", "optimizer",
                                                  "activations", "workspace"};

gb_ab_run gb_ab_run_empty(void)
{
    gb_ab_run run = {.train_loss = NAN, .val_loss = NAN, .peak_rss_bytes = NAN};
    for (int i = 0; i < GB_AB_MEM_N; i++)
        run.planned_bytes[i] = NAN;
    return run;
}

void gb_ab_run_free(gb_ab_run *run)
{
    free(run->steps);
    free(run->evals);
    *run = gb_ab_run_empty();
}

/* The number `key` of `object` into *value: 0 when it is a number (null, written for a
 * figure the run could not compute, and absence leave *value alone), else the name of the
 * field that is not. */
static const char *number(const json_t *object, const char *key, double *value)
{
    const json_t *v = json_object_get(object, key);
    if (json_is_number(v))
        *value = json_number_value(v);
    return v && !json_is_number(v) && !json_is_null(v) ? key : NULL;
}

static const char *read_summary(const json_t *line, gb_ab_run *run)
{
    const char *bad = number(line, "peak_rss_bytes", &run->peak_rss_bytes);
    const json_t *planned = json_object_get(line, "planned_bytes");
    if (planned && !json_is_object(planned))
        return "planned_bytes";
    for (int i = 0; !bad && planned && i < GB_AB_MEM_N; i++)
        bad = number(planned, gb_ab_mem_names[i], &run->planned_bytes[i]);
    return bad;
}

/* Room for one more of `count` items of `size` bytes at *items, whose capacity is *cap:
 * 0, or -1 when memory ran out. */
static int grow(void **items, size_t count, size_t size, size_t *cap)
{
    if (count < *cap)
        return 0;
    size_t grown = *cap ? 2 * *cap : 64;
    void *more = realloc(*items, grown * size);
    if (!more)
        return -1;
    *items = more;
    *cap = grown;
    return 0;
}

static const char *append_step(gb_ab_run *run, const json_t *line, int64_t step, size_t *cap)
{
    if (grow((void **)&run->steps, run->n_steps, sizeof *run->steps, cap))
        return "";
    gb_ab_step s = {.step = step, .loss = NAN, .ms = NAN, .tokens_per_s = NAN, .mfu = NAN};
    const char *bad = number(line, "loss", &s.loss);
    if (!bad)
        bad = number(line, "ms", &s.ms);
    if (!bad)
        bad = number(line, "tokens_per_s", &s.tokens_per_s);
    if (!bad)
        bad = number(line, "mfu", &s.mfu);
    if (!bad)
        run->steps[run->n_steps++] = s;
    return bad;
}

/* An evaluation: the last one's losses, and the list of val losses. */
static const char *read_eval(gb_ab_run *run, const json_t *line, int64_t step, size_t *cap)
{
    double val = NAN;
    const char *bad = number(line, "val_loss", &val);
    if (!bad)
        bad = number(line, "train_loss", &run->train_loss);
    if (bad || isnan(val))
        return bad;
    run->val_loss = val;
    if (grow((void **)&run->evals, run->n_evals, sizeof *run->evals, cap))
        return "";
    run->evals[run->n_evals++] = (gb_ab_eval){step, val};
    return NULL;
}

/* One line into run: NULL, or the field at fault ("" when memory ran out). `caps` are the
 * capacities of its steps and evals. */
static const char *read_line(const json_t *line, gb_ab_run *run, size_t caps[2])
{
    const json_t *step = json_object_get(line, "step");
    if (json_is_true(json_object_get(line, "summary")))
        return read_summary(line, run);
    if (!step)
        return NULL;
    if (!json_is_integer(step))
        return "step";
    if (json_object_get(line, "val_loss"))
        return read_eval(run, line, json_integer_value(step), &caps[1]);
    if (json_object_get(line, "loss"))
        return append_step(run, line, json_integer_value(step), &caps[0]);
    return NULL;
}

int gb_ab_run_read(const char *path, gb_ab_run *run, char *err, size_t err_cap)
{
    gb_ab_run_free(run);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_cap, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char *text = NULL;
    size_t text_cap = 0, caps[2] = {0, 0};
    ssize_t len;
    int failed = 0;
    for (int n = 1; !failed && (len = getline(&text, &text_cap, f)) > 0; n++) {
        if (strspn(text, " \t\r\n") == (size_t)len)
            continue;
        json_error_t error;
        json_t *line = json_loadb(text, (size_t)len, 0, &error);
        const char *bad = line ? read_line(line, run, caps) : NULL;
        if (!line)
            snprintf(err, err_cap, "%s:%d:%d: %s", path, n, error.column, error.text);
        else if (bad && !*bad)
            snprintf(err, err_cap, "%s: out of memory", path);
        else if (bad)
            snprintf(err, err_cap, "%s:%d: \"%s\" is not a number", path, n, bad);
        failed = !line || bad;
        json_decref(line);
    }
    if (!failed && ferror(f)) {
        snprintf(err, err_cap, "cannot read %s: %s", path, strerror(errno));
        failed = 1;
    }
    free(text);
    fclose(f);
    if (failed)
        gb_ab_run_free(run);
    return failed ? -1 : 0;
}
