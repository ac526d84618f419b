/* The report of `gearbox ab`: the verdict table and sentences on the terminal, and the
 * report folder's summary.md and plots; see ab.h. Figures come from verdict.h; this file
 * only arranges them. A figure a run did not report is written "n/a". */
#include "ab.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "svg.h"
#include "verdict.h"

static const double mib = 1024.0 * 1024.0;

/* Everything said about one variant. */
typedef struct figures {
    int ok;                    /* ran every repeat that is compared */
    gb_ab_timing timing;
    gb_ab_speed speed;         /* against the baseline (unset for the baseline itself) */
    gb_ab_loss_diff loss;      /* against the baseline */
    char reading[256];         /* the loss in words */
    double planned, rss;       /* bytes; NaN when not reported */
    double repeat_diff;        /* largest loss difference between its own repeats */
} figures;

/* Repeats every surviving variant completed (fewer than asked after Ctrl-C). */
static int compared_repeats(const gb_ab_plan *p)
{
    int r = p->repeats;
    for (int i = 0; i < p->n_variants; i++)
        if (!p->variants[i].failed && p->variants[i].runs_done < r)
            r = p->variants[i].runs_done;
    return r;
}

static double repeat_spread(const gb_ab_variant *v, int repeats)
{
    double worst = 0.0;
    for (int r = 1; r < repeats; r++) {
        gb_ab_loss_diff d = gb_ab_loss_compare(&v->runs[0], &v->runs[r]);
        worst = fmax(worst, fmax(d.max_step_diff, fabs(d.d_val)));
    }
    return worst;
}

static figures figures_of(const gb_ab_plan *p, int index, int repeats)
{
    const gb_ab_variant *v = &p->variants[index], *base = &p->variants[p->baseline];
    figures f = {.ok = !v->failed && repeats > 0, .planned = NAN, .rss = NAN};
    if (!f.ok)
        return f;
    f.timing = gb_ab_timing_of(v->runs, repeats, p->warmup);
    f.planned = gb_ab_planned_total(&v->runs[0]);
    for (int r = 0; r < repeats; r++)
        f.rss = fmax(f.rss, v->runs[r].peak_rss_bytes);
    f.repeat_diff = repeat_spread(v, repeats);
    if (index != p->baseline && !base->failed) {
        f.speed = gb_ab_speed_of(base->runs, v->runs, repeats, p->warmup);
        f.loss = gb_ab_loss_compare(&base->runs[0], &v->runs[0]);
        gb_ab_loss_reading(&f.loss, p->tolerance, f.reading, sizeof f.reading);
    }
    return f;
}

/* ---- the table ----------------------------------------------------------------------- */

enum { COLS = 9 };
typedef char cell[96];
static const char *const headers[COLS] = {
    "variant", "step ms, median (IQR)", "tokens/s", "MFU", "speed (95% CI)", "planned MiB",
    "peak RSS MiB", "max loss diff", "final val loss"};

static void fmt_or_na(cell c, const char *fmt, double v)
{
    if (isnan(v))
        snprintf(c, sizeof(cell), "n/a");
    else
        snprintf(c, sizeof(cell), fmt, v);
}

/* A speed-like ratio and its interval: "1.83x (1.79-1.88)". */
static void ratio_cell(const gb_stats_ci *ci, cell c)
{
    char x[24], lo[24], hi[24];
    gb_ab_ratio_number(ci->estimate, x, sizeof x);
    gb_ab_ratio_number(ci->lo, lo, sizeof lo);
    gb_ab_ratio_number(ci->hi, hi, sizeof hi);
    snprintf(c, sizeof(cell), "%sx (%s-%s)", x, lo, hi);
}

static void fill_row(const gb_ab_plan *p, int i, const figures *f, cell *row)
{
    const gb_ab_variant *v = &p->variants[i];
    for (int c = 0; c < COLS; c++)
        snprintf(row[c], sizeof(cell), "-");
    snprintf(row[0], sizeof(cell), "%s", v->name);
    if (!f->ok) {
        snprintf(row[1], sizeof(cell), v->failed ? "failed (exit status %d)" : "not run",
                 v->failed);
        return;
    }
    const gb_stats_summary *ms = &f->timing.ms;
    snprintf(row[1], sizeof(cell), "%.1f (%.1f-%.1f)", ms->median, ms->q25, ms->q75);
    fmt_or_na(row[2], "%.0f", f->timing.tokens_per_s);
    fmt_or_na(row[3], "%.2g%%", f->timing.mfu * 100.0);
    fmt_or_na(row[5], "%.2f", f->planned / mib);
    fmt_or_na(row[6], "%.1f", f->rss / mib);
    fmt_or_na(row[8], "%.4f", v->runs[0].val_loss);
    if (i == p->baseline) {
        snprintf(row[4], sizeof(cell), "baseline");
        return;
    }
    if (f->speed.ok)
        ratio_cell(&f->speed.ratio, row[4]);
    else
        snprintf(row[4], sizeof(cell), "n/a");
    if (f->loss.n_common)
        gb_ab_short_number(f->loss.max_step_diff, 2, row[7], sizeof(cell));
}

/* A Markdown table of n_rows rows of `cols` cells (row r's cell c at cells[r * cols + c]),
 * padded so that it also reads as plain text. */
static void print_table(FILE *out, const char *const *head, int cols, const cell *cells,
                        int n_rows)
{
    size_t width[COLS];
    for (int c = 0; c < cols; c++) {
        width[c] = strlen(head[c]);
        for (int r = 0; r < n_rows; r++)
            if (strlen(cells[r * cols + c]) > width[c])
                width[c] = strlen(cells[r * cols + c]);
    }
    for (int c = 0; c < cols; c++)
        fprintf(out, "| %-*s ", (int)width[c], head[c]);
    fputs("|\n", out);
    for (int c = 0; c < cols; c++)
        fprintf(out, "|%.*s%s", (int)width[c] + 1,
                "----------------------------------------------------------------------------",
                c == 0 ? "-" : ":");
    fputs("|\n", out);
    for (int r = 0; r < n_rows; r++) {
        for (int c = 0; c < cols; c++)
            fprintf(out, c == 0 ? "| %-*s " : "| %*s ", (int)width[c], cells[r * cols + c]);
        fputs("|\n", out);
    }
}

/* ---- the target loss ----------------------------------------------------------------- */

enum { REACH_COLS = 4 };
static const char *const reach_headers[REACH_COLS] = {
    "variant", "steps to it, median [min-max]", "seconds of steps to it, median [min-max]",
    "speed to it (95% CI)"};

/* Each repeat's steps and seconds to the target loss (NaN where it did not get there);
 * returns how many repeats got there. */
static int reach_all(const gb_ab_plan *p, int i, int repeats, double *steps, double *seconds)
{
    int reached = 0;
    for (int r = 0; r < repeats; r++) {
        gb_ab_reach x = gb_ab_reach_of(&p->variants[i].runs[r], p->target_loss);
        steps[r] = x.reached ? (double)x.step : NAN;
        seconds[r] = x.reached ? x.seconds : NAN;
        reached += x.reached;
    }
    return reached;
}

/* "112 [104-120]" over the repeats that got there, "2 of 3 reached" added when not all did. */
static void spread_cell(const double *x, int repeats, int reached, const char *fmt, cell c)
{
    double got[GB_AB_MAX_REPEATS];
    int n = 0;
    for (int r = 0; r < repeats; r++)
        if (!isnan(x[r]))
            got[n++] = x[r];
    if (n == 0) {
        snprintf(c, sizeof(cell), "not reached");
        return;
    }
    gb_stats_summary s = gb_stats_summarize(got, (size_t)n);
    char median[32], lo[32], hi[32];
    snprintf(median, sizeof median, fmt, s.median);
    snprintf(lo, sizeof lo, fmt, s.min);
    snprintf(hi, sizeof hi, fmt, s.max);
    snprintf(c, sizeof(cell), n == 1 ? "%s" : "%s [%s-%s]", median, lo, hi);
    if (reached < repeats)
        snprintf(c + strlen(c), sizeof(cell) - strlen(c), ", %d of %d reached", reached,
                 repeats);
}

/* The baseline's seconds to the target over the variant's, paired by repeat as the speed
 * is: above 1, the variant got there sooner. */
static void reach_speed_cell(const double *base, const double *other, int repeats, cell c)
{
    gb_stats_ci ci = {base[0] / other[0], NAN, NAN};
    for (int r = 0; r < repeats; r++)
        if (isnan(base[r]) || isnan(other[r])) {
            snprintf(c, sizeof(cell), "n/a");
            return;
        }
    if (repeats >= 2 && gb_stats_paired_ratio(base, other, (size_t)repeats, &ci) == 0) {
        ratio_cell(&ci, c);
        return;
    }
    char x[24];
    gb_ab_ratio_number(ci.estimate, x, sizeof x);
    snprintf(c, sizeof(cell), "%sx", x);
}

static void print_reach(FILE *out, const gb_ab_plan *p, const figures *f, int repeats)
{
    cell *cells = calloc((size_t)p->n_variants * REACH_COLS, sizeof *cells);
    /* variant i's steps to the target at x[2i * repeats], its seconds right after */
    double *x = malloc(2 * (size_t)p->n_variants * (size_t)repeats * sizeof *x);
    int *reached = calloc((size_t)p->n_variants, sizeof *reached);
    if (!cells || !x || !reached)
        goto done;
    for (int i = 0; i < p->n_variants; i++)
        if (f[i].ok)
            reached[i] = reach_all(p, i, repeats, x + 2 * (size_t)i * (size_t)repeats,
                                   x + (2 * (size_t)i + 1) * (size_t)repeats);
    const double *base_seconds = x + (2 * (size_t)p->baseline + 1) * (size_t)repeats;
    int rows = 0;
    for (int i = 0; i < p->n_variants; i++) {
        if (!f[i].ok)
            continue;
        const double *steps = x + 2 * (size_t)i * (size_t)repeats, *seconds = steps + repeats;
        cell *row = cells + rows++ * REACH_COLS;
        snprintf(row[0], sizeof(cell), "%s", p->variants[i].name);
        spread_cell(steps, repeats, reached[i], "%.0f", row[1]);
        spread_cell(seconds, repeats, reached[i], "%.1f", row[2]);
        if (i == p->baseline)
            snprintf(row[3], sizeof(cell), "baseline");
        else if (f[p->baseline].ok)
            reach_speed_cell(base_seconds, seconds, repeats, row[3]);
        else
            snprintf(row[3], sizeof(cell), "n/a");
    }
    fprintf(out, "\nTo val loss %g (evaluated every %lld steps and after the last):\n\n",
            p->target_loss, (long long)p->eval_every);
    print_table(out, reach_headers, REACH_COLS, cells, rows);
    fputs("\nSeconds of steps: the logged steps' own time up to and with the first evaluation "
          "at or below the target, evaluations not counted. Speed to it: the baseline's "
          "seconds over the variant's, paired by repeat (above 1: sooner).\n", out);
done:
    free(cells);
    free(x);
    free(reached);
}

/* ---- words --------------------------------------------------------------------------- */

static void print_sentences(FILE *out, const gb_ab_plan *p, const figures *f)
{
    const figures *base = &f[p->baseline];
    for (int i = 0; i < p->n_variants; i++) {
        const gb_ab_variant *v = &p->variants[i];
        char sentence[640];
        if (i == p->baseline || !f[i].ok || !base->ok)
            continue;
        gb_ab_sentence(v->name, &f[i].speed, base->planned, f[i].planned, f[i].reading,
                       sentence, sizeof sentence);
        fprintf(out, "%s\n", sentence);
    }
    if (p->load_before > 0.5 * (double)p->cpus)
        fprintf(out, "note: the machine was already busy (load average %.1f on %ld CPUs before "
                "the runs), so step times are noisy and the intervals wide.\n", p->load_before,
                p->cpus);
    for (int i = 0; i < p->n_variants; i++) {
        if (f[i].ok && f[i].repeat_diff > 0.0) {
            char num[32];
            gb_ab_short_number(f[i].repeat_diff, 2, num, sizeof num);
            fprintf(out, "note: the repeats of %s differ in loss by up to %s, so its runs are "
                    "not reproducible and loss differences of that size say nothing.\n",
                    p->variants[i].name, num);
        }
    }
}

static void print_failures(FILE *out, const gb_ab_plan *p, const char *indent)
{
    for (int i = 0; i < p->n_variants; i++) {
        const gb_ab_variant *v = &p->variants[i];
        if (!v->failed)
            continue;
        fprintf(out, "%s%s FAILED: ", indent, v->name);
        for (const char *c = v->failure ? v->failure : "could not start"; *c; c++) {
            fputc(*c, out);
            if (*c == '\n')
                fputs(indent, out);
        }
        fputc('\n', out);
    }
}

static void print_verdict(FILE *out, const gb_ab_plan *p, const figures *f, int repeats)
{
    cell(*rows)[COLS] = calloc((size_t)p->n_variants, sizeof *rows);
    if (!rows)
        return;
    for (int i = 0; i < p->n_variants; i++)
        fill_row(p, i, &f[i], rows[i]);
    print_table(out, headers, COLS, rows[0], p->n_variants);
    free(rows);
    if (!isnan(p->target_loss) && repeats > 0)
        print_reach(out, p, f, repeats);
    fputc('\n', out);
    if (p->variants[p->baseline].failed)
        fprintf(out, "The baseline %s failed, so there is nothing to compare with.\n",
                p->variants[p->baseline].name);
    else if (repeats == 0)
        fprintf(out, "No run finished, so there is nothing to compare.\n");
    print_sentences(out, p, f);
}

/* ---- summary.md ---------------------------------------------------------------------- */

static void speed_method(FILE *out, const gb_ab_plan *p, int repeats)
{
    if (repeats >= 2)
        fprintf(out, "Speed is the baseline's step time divided by the variant's (above 1: "
                "faster). Repeat r of each variant is paired with repeat r of the baseline; "
                "each pair gives the ratio of the median step times over steps %lld-%lld, and "
                "the 95%% CI is a t-interval (%d degree%s of freedom) on the log-ratios.\n",
                (long long)p->warmup + 1, (long long)p->steps, repeats - 1,
                repeats == 2 ? "" : "s");
    else
        fprintf(out, "Speed is the baseline's step time divided by the variant's (above 1: "
                "faster), as the ratio of the median step times over steps %lld-%lld. With "
                "one repeat there are no pairs to compare, so the 95%% CI is a percentile "
                "bootstrap over those steps (%d resamples, fixed seed %u); it does not cover "
                "drift in the machine's speed between runs: use --repeats 3 or more.\n",
                (long long)p->warmup + 1, (long long)p->steps, GB_AB_BOOTSTRAP_RESAMPLES,
                GB_AB_BOOTSTRAP_SEED);
}

static void memory_table(FILE *out, const gb_ab_plan *p, const figures *f)
{
    fputs("| variant |", out);
    for (int k = 0; k < GB_AB_MEM_N; k++)
        fprintf(out, " %s |", gb_ab_mem_names[k]);
    fputs(" planned total | peak RSS |\n|---|", out);
    for (int k = 0; k < GB_AB_MEM_N + 2; k++)
        fputs("---:|", out);
    fputc('\n', out);
    for (int i = 0; i < p->n_variants; i++) {
        if (!f[i].ok)
            continue;
        cell c;
        fprintf(out, "| %s |", p->variants[i].name);
        for (int k = 0; k < GB_AB_MEM_N; k++) {
            fmt_or_na(c, "%.2f", p->variants[i].runs[0].planned_bytes[k] / mib);
            fprintf(out, " %s |", c);
        }
        fmt_or_na(c, "%.2f", f[i].planned / mib);
        fprintf(out, " %s |", c);
        fmt_or_na(c, "%.1f", f[i].rss / mib);
        fprintf(out, " %s |\n", c);
    }
    fputs("\nIn MiB, from the closing summary line of each run's metrics.jsonl: planned "
          "bytes (`planned_bytes`, the memory plan) of the first run; peak RSS "
          "(`peak_rss_bytes`) is the largest resident set of the variant's runs.\n", out);
}

static void loss_table(FILE *out, const gb_ab_plan *p, const figures *f)
{
    fputs("| variant | final train loss | final val loss | max loss diff (step) | "
          "reading |\n|---|---:|---:|---:|---|\n", out);
    for (int i = 0; i < p->n_variants; i++) {
        if (!f[i].ok)
            continue;
        const gb_ab_run *run = &p->variants[i].runs[0];
        cell train, val, diff;
        fmt_or_na(train, "%.6f", run->train_loss);
        fmt_or_na(val, "%.6f", run->val_loss);
        snprintf(diff, sizeof diff, "-");
        if (i != p->baseline && f[i].loss.n_common) {
            gb_ab_short_number(f[i].loss.max_step_diff, 2, diff, sizeof diff);
            if (f[i].loss.max_step_diff != 0.0)
                snprintf(diff + strlen(diff), sizeof diff - strlen(diff), " (%lld)",
                         (long long)f[i].loss.max_step);
        }
        fprintf(out, "| %s | %s | %s | %s | %s |\n", p->variants[i].name, train, val, diff,
                i == p->baseline ? "baseline" : f[i].reading);
    }
    fprintf(out, "\nThe curves are the per-step training loss of each variant's first "
            "repeat; the final losses are the evaluation after the last step. Differences "
            "up to %g read as the same curve (--tolerance).\n", p->tolerance);
}

/* One "key = value" entry of an effective config. */
typedef struct entry {
    char section[64], key[64];
    const char *value;     /* into the text, up to the end of its line */
    int value_len;
} entry;

/* Parses `gearbox check` output ("# ..." comment lines, [section] headers, key = value)
 * into entries; returns how many (at most cap). */
static int parse_entries(const char *text, entry *e, int cap)
{
    char section[64] = "";
    int n = 0;
    for (const char *line = text; line && *line && n < cap;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        const char *eq = memchr(line, '=', (size_t)len);
        if (line[0] == '[' && len > 2)
            snprintf(section, sizeof section, "%.*s", len - 2, line + 1);
        else if (line[0] != '#' && eq && eq - line > 1) {
            snprintf(e[n].section, sizeof e[n].section, "%s", section);
            snprintf(e[n].key, sizeof e[n].key, "%.*s", (int)(eq - line - 1), line);
            e[n].value = eq + 2 <= line + len ? eq + 2 : eq + 1;
            e[n].value_len = (int)(line + len - e[n].value);
            n++;
        }
        line = end ? end + 1 : NULL;
    }
    return n;
}

static const entry *find_entry(const entry *e, int n, const entry *like)
{
    for (int i = 0; i < n; i++)
        if (strcmp(e[i].section, like->section) == 0 && strcmp(e[i].key, like->key) == 0)
            return &e[i];
    return NULL;
}

static int is_run_folder(const entry *e)
{
    return strcmp(e->section, "run") == 0 && strcmp(e->key, "out_dir") == 0;
}

/* Lists the effective settings of `text` that differ from the baseline's. */
static void config_differences(FILE *out, const char *text, const char *base_text)
{
    enum { CAP = 512 };
    entry *a = calloc(2 * CAP, sizeof *a), *b = a + CAP;
    if (!a)
        return;
    int na = parse_entries(text, a, CAP), nb = parse_entries(base_text, b, CAP), shown = 0;
    for (int i = 0; i < na; i++) {
        const entry *other = find_entry(b, nb, &a[i]);
        if (is_run_folder(&a[i]) || (other && other->value_len == a[i].value_len &&
                                     memcmp(other->value, a[i].value, (size_t)a[i].value_len) == 0))
            continue;
        fprintf(out, "%s`[%s] %s = %.*s` (baseline: ", shown++ ? ", " : "", a[i].section,
                a[i].key, a[i].value_len, a[i].value);
        if (other)
            fprintf(out, "`%.*s`)", other->value_len, other->value);
        else
            fputs("not set)", out);
    }
    for (int i = 0; i < nb; i++)
        if (!find_entry(a, na, &b[i]))
            fprintf(out, "%s`[%s] %s` not set (baseline: `%.*s`)", shown++ ? ", " : "",
                    b[i].section, b[i].key, b[i].value_len, b[i].value);
    fputs(shown ? "\n" : "none\n", out);
    free(a);
}

static void variant_section(FILE *out, const gb_ab_plan *p, int i, int repeats)
{
    const gb_ab_variant *v = &p->variants[i], *base = &p->variants[p->baseline];
    fprintf(out, "\n### %s%s\n\n- config: `%s`\n- overrides:", v->name,
            i == p->baseline ? " (baseline)" : "", v->config);
    for (int k = 0; k < v->n_overrides; k++)
        fprintf(out, " `%s`", v->overrides[k]);
    fputs(v->n_overrides ? "\n" : " none\n", out);
    if (i != p->baseline && v->effective && base->effective) {
        fputs("- effective settings that differ from the baseline: ", out);
        config_differences(out, v->effective, base->effective);
    }
    if (v->runs_done) {
        fputs("- runs:", out);
        for (int r = 0; r < v->runs_done; r++) {
            char manifest[4400];
            snprintf(manifest, sizeof manifest, "%s/%s/r%d/manifest.json", p->out_dir, v->name,
                     r + 1);
            fprintf(out, " [r%d](%s/r%d/metrics.jsonl)%s", r + 1, v->name, r + 1,
                    access(manifest, R_OK) == 0 ? " (with manifest.json)" : "");
        }
        fprintf(out, "%s; each folder holds metrics.jsonl, train.log and stderr.log\n",
                repeats < v->runs_done ? " (the last not compared)" : "");
    }
    if (v->effective)
        fprintf(out, "\n<details><summary>effective config, as <code>gearbox check</code> "
                "printed it for the first run (%s/config.ini)</summary>\n\n```ini\n%s```\n"
                "</details>\n", v->name, v->effective);
}

static void write_summary(FILE *out, const gb_ab_plan *p, const figures *f, int repeats)
{
    fputs("# A/B comparison:", out);
    for (int i = 0; i < p->n_variants; i++)
        fprintf(out, "%s %s", i ? " vs" : "", p->variants[i].name);
    fprintf(out, "\n\n```sh\n%s\n```\n\n", p->command);
    fprintf(out, "%lld steps per run (the first %lld not timed), %d repeat%s interleaved "
            "(each repeat runs every variant once, in order), baseline %s. Machine: %s.\n",
            (long long)p->steps, (long long)p->warmup, p->repeats, p->repeats == 1 ? "" : "s",
            p->variants[p->baseline].name, p->machine);
    if (p->interrupted)
        fprintf(out, "\n**Interrupted**: %d of %d repeats are compared.\n", repeats, p->repeats);
    fputs("\n## Verdict\n\n", out);
    print_verdict(out, p, f, repeats);
    fputc('\n', out);
    speed_method(out, p, repeats);
    if (repeats > 0) {
        fputs("\n![loss curves](loss.svg)\n\n![step times](step_times.svg)\n", out);
        fputs("\n## Memory\n\n", out);
        memory_table(out, p, f);
        fputs("\n## Loss\n\n", out);
        loss_table(out, p, f);
    }
    fputs("\n## Variants\n", out);
    for (int i = 0; i < p->n_variants; i++)
        variant_section(out, p, i, repeats);
    int failed = 0;
    for (int i = 0; i < p->n_variants; i++)
        failed += p->variants[i].failed != 0;
    if (failed) {
        fputs("\n## Failures\n\n```\n", out);
        print_failures(out, p, "");
        fputs("```\n", out);
    }
}

/* ---- plots --------------------------------------------------------------------------- */

static int plot_losses(const gb_ab_plan *p, const figures *f, const char *path)
{
    int n = 0, rc = -1;
    gb_svg_series *s = calloc((size_t)p->n_variants, sizeof *s);
    double *xy = NULL;
    size_t total = 0;
    for (int i = 0; i < p->n_variants; i++)
        total += f[i].ok ? p->variants[i].runs[0].n_steps : 0;
    if (s)
        xy = malloc((2 * total + 1) * sizeof *xy);
    if (!xy)
        goto done;
    double *next = xy;
    for (int i = 0; i < p->n_variants; i++) {
        const gb_ab_run *run = &p->variants[i].runs[0];
        if (!f[i].ok)
            continue;
        s[n] = (gb_svg_series){p->variants[i].name, next, next + run->n_steps, run->n_steps,
                               (double)p->steps, run->val_loss};
        for (size_t k = 0; k < run->n_steps; k++) {
            next[k] = (double)run->steps[k].step;
            next[run->n_steps + k] = run->steps[k].loss;
        }
        next += 2 * run->n_steps;
        n++;
    }
    rc = gb_svg_lines(path, "Training loss per step (first repeat of each variant)", "step",
                      "loss", "final val loss", s, n);
done:
    free(xy);
    free(s);
    return rc;
}

static int plot_step_times(const gb_ab_plan *p, const figures *f, int repeats, const char *path)
{
    int n = 0, rc = -1;
    gb_svg_series *s = calloc((size_t)p->n_variants, sizeof *s);
    double *y = s ? malloc((size_t)(p->n_variants * repeats) * (size_t)p->steps * sizeof *y + 1)
                  : NULL;
    if (!y)
        goto done;
    double *next = y;
    for (int i = 0; i < p->n_variants; i++) {
        if (!f[i].ok)
            continue;
        size_t count = 0;
        for (int r = 0; r < repeats; r++) {
            const gb_ab_run *run = &p->variants[i].runs[r];
            for (size_t k = 0; k < run->n_steps; k++)
                if (run->steps[k].step > p->warmup)
                    next[count++] = run->steps[k].ms;
        }
        s[n++] = (gb_svg_series){p->variants[i].name, NULL, next, count, NAN, NAN};
        next += count;
    }
    char title[160];
    snprintf(title, sizeof title, "Step time, steps %lld-%lld of %d repeat%s",
             (long long)p->warmup + 1, (long long)p->steps, repeats, repeats == 1 ? "" : "s");
    rc = gb_svg_boxes(path, title, "step time (ms)", "ms", s, n);
done:
    free(y);
    free(s);
    return rc;
}

/* ---- entry --------------------------------------------------------------------------- */

static int report_error(const char *path)
{
    fprintf(stderr, "gearbox ab: cannot write %s: %s\n", path, strerror(errno));
    return -1;
}

int gb_ab_report(const gb_ab_plan *p, FILE *out)
{
    if (p->n_variants < 1)
        return -1; /* nothing to report; also bounds the count calloc is given */
    int repeats = compared_repeats(p), rc = 0;
    figures *f = calloc((size_t)p->n_variants, sizeof *f);
    if (!f)
        return -1;
    for (int i = 0; i < p->n_variants; i++)
        f[i] = figures_of(p, i, repeats);
    fputc('\n', out);
    print_verdict(out, p, f, repeats);
    print_failures(out, p, "  ");
    char path[4300];
    if (repeats > 0) {
        snprintf(path, sizeof path, "%s/loss.svg", p->out_dir);
        if (plot_losses(p, f, path) != 0)
            rc = report_error(path);
        snprintf(path, sizeof path, "%s/step_times.svg", p->out_dir);
        if (plot_step_times(p, f, repeats, path) != 0)
            rc = report_error(path);
    }
    snprintf(path, sizeof path, "%s/summary.md", p->out_dir);
    FILE *md = fopen(path, "w");
    if (md) {
        write_summary(md, p, f, repeats);
        int failed = ferror(md);
        if (fclose(md) != 0 || failed)
            rc = report_error(path);
    } else {
        rc = report_error(path);
    }
    fprintf(out, "\nreport: %s\n", path);
    free(f);
    return rc;
}
