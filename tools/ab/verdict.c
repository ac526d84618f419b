/* The verdict's figures and words; see verdict.h. */
#include "verdict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- timing -------------------------------------------------------------------------- */

static size_t count_steady(const gb_ab_run *run, int64_t warmup)
{
    size_t n = 0;
    for (size_t i = 0; i < run->n_steps; i++)
        n += run->steps[i].step > warmup;
    return n;
}

/* Appends the steady steps' `field` (an offset into gb_ab_step) to out; returns how many. */
static size_t gather_steady(const gb_ab_run *run, int64_t warmup, size_t field, double *out)
{
    size_t n = 0;
    for (size_t i = 0; i < run->n_steps; i++)
        if (run->steps[i].step > warmup)
            out[n++] = *(const double *)((const char *)&run->steps[i] + field);
    return n;
}

static double median_in_place(double *x, size_t n)
{
    gb_stats_sort(x, n);
    return gb_stats_quantile(x, n, 0.5);
}

/* Runs that do not report a field leave it NaN; those steps do not count. */
static double median_of_reported(double *x, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i]))
            x[kept++] = x[i];
    return median_in_place(x, kept);
}

/* Gathers `field` of the steady steps of runs[0..repeats) into out; returns how many. */
static size_t gather_runs(const gb_ab_run *runs, int repeats, int64_t warmup, size_t field,
                          double *out)
{
    size_t n = 0;
    for (int r = 0; r < repeats; r++)
        n += gather_steady(&runs[r], warmup, field, out + n);
    return n;
}

/* A rate (tokens/s, MFU) at the median step time: the work of a step (rate x time, the
 * same every step) over the median step time, so that it agrees with the step-time
 * figure however spread the steps are. `rate` is overwritten. */
static double rate_at_median(double *rate, const double *ms, size_t n, double median_ms)
{
    for (size_t i = 0; i < n; i++)
        rate[i] *= ms[i];
    return median_of_reported(rate, n) / median_ms;
}

gb_ab_timing gb_ab_timing_of(const gb_ab_run *runs, int repeats, int64_t warmup)
{
    gb_ab_timing t = {.ms = {0, NAN, NAN, NAN, NAN, NAN}, .tokens_per_s = NAN, .mfu = NAN};
    size_t total = 0;
    for (int r = 0; r < repeats; r++)
        total += count_steady(&runs[r], warmup);
    double *ms = malloc((3 * total + 1) * sizeof *ms), *sorted = ms + total, *x = ms + 2 * total;
    if (!ms)
        return t;
    size_t n = gather_runs(runs, repeats, warmup, offsetof(gb_ab_step, ms), ms);
    memcpy(sorted, ms, n * sizeof *ms);
    t.ms = gb_stats_summarize(sorted, n);
    gather_runs(runs, repeats, warmup, offsetof(gb_ab_step, tokens_per_s), x);
    t.tokens_per_s = rate_at_median(x, ms, n, t.ms.median);
    gather_runs(runs, repeats, warmup, offsetof(gb_ab_step, mfu), x);
    t.mfu = rate_at_median(x, ms, n, t.ms.median);
    free(ms);
    return t;
}

/* ---- speed --------------------------------------------------------------------------- */

static double steady_median_ms(const gb_ab_run *run, int64_t warmup)
{
    size_t n = count_steady(run, warmup);
    double *x = malloc((n ? n : 1) * sizeof *x);
    if (!x)
        return NAN;
    gather_steady(run, warmup, offsetof(gb_ab_step, ms), x);
    double m = median_in_place(x, n);
    free(x);
    return m;
}

static int bootstrap_steps(const gb_ab_run *base, const gb_ab_run *other, int64_t warmup,
                           gb_stats_ci *out)
{
    size_t nb = count_steady(base, warmup), no = count_steady(other, warmup);
    double *b = malloc((nb + no + 1) * sizeof *b);
    if (!b)
        return -1;
    gather_steady(base, warmup, offsetof(gb_ab_step, ms), b);
    gather_steady(other, warmup, offsetof(gb_ab_step, ms), b + nb);
    int rc = gb_stats_bootstrap_ratio(b, nb, b + nb, no, GB_AB_BOOTSTRAP_RESAMPLES,
                                      GB_AB_BOOTSTRAP_SEED, out);
    free(b);
    return rc;
}

gb_ab_speed gb_ab_speed_of(const gb_ab_run *base, const gb_ab_run *other, int repeats,
                           int64_t warmup)
{
    gb_ab_speed s = {.bootstrap = repeats < 2};
    if (s.bootstrap) {
        s.ok = repeats == 1 && bootstrap_steps(base, other, warmup, &s.ratio) == 0;
        return s;
    }
    double *medians = malloc(2 * (size_t)repeats * sizeof *medians);
    if (!medians)
        return s;
    for (int r = 0; r < repeats; r++) {
        medians[r] = steady_median_ms(&base[r], warmup);
        medians[repeats + r] = steady_median_ms(&other[r], warmup);
    }
    s.ok = gb_stats_paired_ratio(medians, medians + repeats, (size_t)repeats, &s.ratio) == 0;
    free(medians);
    return s;
}

/* ---- loss ---------------------------------------------------------------------------- */

gb_ab_loss_diff gb_ab_loss_compare(const gb_ab_run *base, const gb_ab_run *other)
{
    gb_ab_loss_diff d = {.d_last = NAN, .d_train = other->train_loss - base->train_loss,
                         .d_val = other->val_loss - base->val_loss};
    size_t i = 0, j = 0;
    while (i < base->n_steps && j < other->n_steps) {
        const gb_ab_step *a = &base->steps[i], *b = &other->steps[j];
        if (a->step != b->step) {
            i += a->step < b->step;
            j += b->step < a->step;
            continue;
        }
        double diff = fabs(b->loss - a->loss);
        if (d.n_common == 0 || diff > d.max_step_diff || isnan(diff)) {
            d.max_step_diff = diff;
            d.max_step = a->step;
        }
        d.d_last = b->loss - a->loss;
        d.n_common++;
        i++, j++;
    }
    return d;
}

void gb_ab_short_number(double x, int digits, char *buf, size_t cap)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.*g", digits, x);
    char *e = strchr(tmp, 'e');
    if (e) {
        int exponent = atoi(e + 1);
        snprintf(e, sizeof tmp - (size_t)(e - tmp), "e%d", exponent);
    }
    snprintf(buf, cap, "%s", tmp);
}

void gb_ab_ratio_number(double x, char *buf, size_t cap)
{
    if (x >= 0.1 && x < 1000.0)
        snprintf(buf, cap, "%.2f", x);
    else
        gb_ab_short_number(x, 2, buf, cap);
}

/* The smallest one-significant-digit number not below x (2.3e-6 -> 3e-6). */
static double round_up_one_digit(double x)
{
    if (!(x > 0.0))
        return 0.0;
    double scale = pow(10.0, floor(log10(x)));
    double m = ceil(x / scale * (1.0 - 1e-12));
    return m * scale;
}

static double worst_of(const gb_ab_loss_diff *d)
{
    double worst = d->max_step_diff;
    if (fabs(d->d_train) > worst)
        worst = fabs(d->d_train);
    if (fabs(d->d_val) > worst)
        worst = fabs(d->d_val);
    return worst;
}

/* "final val loss 0.012 higher", or of the train evaluation or the last step when the
 * runs have no evaluation. */
static void final_difference(const gb_ab_loss_diff *d, char *buf, size_t cap)
{
    const char *what = "final val loss";
    double diff = d->d_val;
    if (isnan(diff)) {
        what = "final train loss";
        diff = d->d_train;
    }
    if (isnan(diff)) {
        what = "loss at the last step";
        diff = d->d_last;
    }
    char num[32];
    gb_ab_short_number(fabs(diff), 2, num, sizeof num);
    snprintf(buf, cap, "%s %s %s", what, num, diff > 0 ? "higher" : diff < 0 ? "lower" :
             "the same");
}

void gb_ab_loss_reading(const gb_ab_loss_diff *d, double tolerance, char *buf, size_t cap)
{
    if (d->n_common == 0) {
        snprintf(buf, cap, "no logged step in common to compare the loss");
        return;
    }
    double worst = worst_of(d);
    char num[32];
    if (worst == 0.0) {
        snprintf(buf, cap, "same loss curve (max difference 0)");
    } else if (worst <= tolerance) {
        gb_ab_short_number(round_up_one_digit(worst), 1, num, sizeof num);
        snprintf(buf, cap, "same loss curve within %s", num);
    } else {
        char final[96];
        final_difference(d, final, sizeof final);
        gb_ab_short_number(d->max_step_diff, 2, num, sizeof num);
        snprintf(buf, cap, "%s; the curves differ by up to %s (step %lld)", final, num,
                 (long long)d->max_step);
    }
}

gb_ab_reach gb_ab_reach_of(const gb_ab_run *run, double target)
{
    gb_ab_reach r = {0, 0, 0.0};
    for (size_t i = 0; !r.reached && i < run->n_evals; i++)
        if (run->evals[i].val_loss <= target)
            r = (gb_ab_reach){1, run->evals[i].step, 0.0};
    for (size_t k = 0; r.reached && k < run->n_steps; k++)
        if (run->steps[k].step <= r.step)
            r.seconds += run->steps[k].ms / 1000.0;
    return r;
}

/* ---- the sentence -------------------------------------------------------------------- */

double gb_ab_planned_total(const gb_ab_run *run)
{
    double total = 0.0;
    for (int i = 0; i < GB_AB_MEM_N; i++)
        total += run->planned_bytes[i];
    return total;
}

static void speed_words(const gb_ab_speed *s, char *buf, size_t cap)
{
    const char *how = s->bootstrap ? ", bootstrap over steps" : "";
    const gb_stats_ci *c = &s->ratio;
    int faster = c->lo > 1.0, slower = c->hi < 1.0;
    char x[24], lo[24], hi[24];
    /* a slower variant reads as "how many times slower", its interval inverted too */
    gb_ab_ratio_number(slower ? 1.0 / c->estimate : c->estimate, x, sizeof x);
    gb_ab_ratio_number(slower ? 1.0 / c->hi : c->lo, lo, sizeof lo);
    gb_ab_ratio_number(slower ? 1.0 / c->lo : c->hi, hi, sizeof hi);
    if (!s->ok)
        snprintf(buf, cap, "speed n/a");
    else if (faster || slower)
        snprintf(buf, cap, "%sx %s (95%% CI %s-%s%s)", x, faster ? "faster" : "slower", lo, hi,
                 how);
    else
        snprintf(buf, cap, "no measurable speed difference (%sx, 95%% CI %s-%s%s)", x, lo, hi,
                 how);
}

static void memory_words(double base_planned, double planned, char *buf, size_t cap)
{
    double pct = (planned - base_planned) / base_planned * 100.0;
    if (isnan(pct) || isinf(pct))
        snprintf(buf, cap, "planned memory n/a");
    else if (fabs(pct) < 0.5)
        snprintf(buf, cap, "same planned memory");
    else
        snprintf(buf, cap, "%.0f%% %s planned memory", fabs(pct), pct < 0 ? "less" : "more");
}

void gb_ab_sentence(const char *name, const gb_ab_speed *speed, double base_planned,
                    double planned, const char *loss_reading, char *buf, size_t cap)
{
    char speed_part[192], memory_part[64];
    speed_words(speed, speed_part, sizeof speed_part);
    memory_words(base_planned, planned, memory_part, sizeof memory_part);
    snprintf(buf, cap, "%s: %s, %s, %s.", name, speed_part, memory_part, loss_reading);
}
