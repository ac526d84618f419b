/* Reading what a run reported; see metrics.h. */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const gb_ab_mem_names[GB_AB_MEM_N] = {"params", "grads", "optimizer",
                                                  "activations", "workspace"};

static const double mib = 1024.0 * 1024.0;

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
    *run = gb_ab_run_empty();
}

int gb_ab_json_number(const char *line, const char *key, double *value)
{
    size_t n = strlen(key);
    for (const char *p = strchr(line, '"'); p; p = strchr(p + 1, '"')) {
        if (strncmp(p + 1, key, n) != 0 || p[n + 1] != '"')
            continue;
        const char *q = p + n + 2;
        q += strspn(q, " \t");
        if (*q != ':')
            continue;
        char *end;
        double v = strtod(q + 1, &end);
        if (end == q + 1)
            return 0;
        *value = v;
        return 1;
    }
    return 0;
}

static int is_summary(const char *line)
{
    const char *p = strstr(line, "\"summary\"");
    if (!p)
        return 0;
    p += strlen("\"summary\"");
    p += strspn(p, " \t");
    if (*p++ != ':')
        return 0;
    p += strspn(p, " \t");
    return strncmp(p, "true", 4) == 0;
}

static void read_summary(const char *line, gb_ab_run *run)
{
    gb_ab_json_number(line, "peak_rss_bytes", &run->peak_rss_bytes);
    const char *planned = strstr(line, "\"planned_bytes\"");
    for (int i = 0; planned && i < GB_AB_MEM_N; i++)
        gb_ab_json_number(planned, gb_ab_mem_names[i], &run->planned_bytes[i]);
}

static int append_step(gb_ab_run *run, const char *line, double step, size_t *cap)
{
    if (run->n_steps == *cap) {
        size_t grown = *cap ? 2 * *cap : 64;
        gb_ab_step *steps = realloc(run->steps, grown * sizeof *steps);
        if (!steps)
            return -1;
        run->steps = steps;
        *cap = grown;
    }
    gb_ab_step s = {.step = (int64_t)step, .loss = NAN, .ms = NAN, .tokens_per_s = NAN,
                    .mfu = NAN};
    gb_ab_json_number(line, "loss", &s.loss);
    gb_ab_json_number(line, "ms", &s.ms);
    gb_ab_json_number(line, "tokens_per_s", &s.tokens_per_s);
    gb_ab_json_number(line, "mfu", &s.mfu);
    run->steps[run->n_steps++] = s;
    return 0;
}

int gb_ab_run_read(const char *path, gb_ab_run *run)
{
    gb_ab_run_free(run);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *line = NULL;
    size_t line_cap = 0, cap = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &line_cap, f) > 0) {
        double step, v;
        if (is_summary(line))
            read_summary(line, run);
        else if (!gb_ab_json_number(line, "step", &step))
            continue;
        else if (gb_ab_json_number(line, "val_loss", &v)) {
            run->val_loss = v;
            gb_ab_json_number(line, "train_loss", &run->train_loss);
        } else if (gb_ab_json_number(line, "loss", &v))
            rc = append_step(run, line, step, &cap);
    }
    int err = rc ? ENOMEM : ferror(f) ? EIO : 0;
    free(line);
    fclose(f);
    if (err) {
        gb_ab_run_free(run);
        errno = err;
        return -1;
    }
    return 0;
}

int gb_ab_parse_memory_plan(const char *text, double planned[GB_AB_MEM_N])
{
    const char *p = strstr(text, "memory plan: ");
    double total, v[GB_AB_MEM_N];
    if (!p || sscanf(p, "memory plan: %lf MiB = params %lf + grads %lf + optimizer %lf + "
                     "activations %lf + workspace %lf", &total, &v[0], &v[1], &v[2], &v[3],
                     &v[4]) != 6)
        return -1;
    for (int i = 0; i < GB_AB_MEM_N; i++)
        planned[i] = v[i] * mib;
    return 0;
}

int gb_ab_parse_done_rss(const char *text, double *bytes)
{
    const char *done = strstr(text, "done: ");
    const char *p = done ? strstr(done, "process RSS ") : NULL;
    double v;
    if (!p || sscanf(p, "process RSS %lf MiB", &v) != 1)
        return -1;
    *bytes = v * mib;
    return 0;
}
