/* SVG plots for the A/B report; see svg.h. Coordinates are pixels of a fixed 820x500
 * canvas, which viewers scale. */
#include "svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gearbox/engine/rng.h"
#include "stats.h"

enum { WIDTH = 820, HEIGHT = 500, LEFT = 80, RIGHT = 24, TOP = 52 };

/* Tableau's ten colours, less the grey and olive that read poorly as thin lines. */
static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};
/* Later series are thinner and dashed, so a curve identical to an earlier one shows as a
 * dashed line on top of it instead of hiding it. */
static const char *const dashes[] = {"none", "9 5", "3 3", "12 4 3 4"};
static const double widths[] = {3.6, 2.2, 1.6, 1.3};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *colour(int i)
{
    return palette[i % (int)N_OF(palette)];
}

static void line_style(FILE *f, int i)
{
    int k = i < (int)N_OF(widths) ? i : (int)N_OF(widths) - 1;
    fprintf(f, "fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" stroke-dasharray=\"%s\" "
            "stroke-linejoin=\"round\"", colour(i), widths[k], dashes[i % (int)N_OF(dashes)]);
}

static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* ---- axes ---------------------------------------------------------------------------- */

typedef struct axis {
    double lo, hi, step;   /* data range, widened to whole ticks */
    int decimals;          /* for tick labels */
    double px_lo, px_hi;   /* the pixels of lo and hi (for y, px_lo is the bottom) */
} axis;

/* A 1-2-5 tick step giving about `ticks` ticks over [min, max]. */
static axis nice_axis(double min, double max, int ticks, double px_lo, double px_hi)
{
    if (!(max > min)) {
        double pad = fabs(min) > 0.0 ? fabs(min) * 0.05 : 1.0;
        min -= pad;
        max += pad;
    }
    double raw = (max - min) / ticks, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    double step = (f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0) * mag;
    axis a = {floor(min / step) * step, ceil(max / step) * step, step, 0, px_lo, px_hi};
    a.decimals = step >= 1.0 ? 0 : (int)ceil(-log10(step) - 1e-9);
    return a;
}

static double to_px(const axis *a, double v)
{
    return a->px_lo + (v - a->lo) / (a->hi - a->lo) * (a->px_hi - a->px_lo);
}

static int tick_count(const axis *a)
{
    return (int)floor((a->hi - a->lo) / a->step + 1e-6) + 1;
}

static void begin(FILE *f, const char *title)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
            "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", WIDTH, HEIGHT, WIDTH, HEIGHT,
            WIDTH, HEIGHT);
    fprintf(f, "<text x=\"%d\" y=\"30\" text-anchor=\"middle\" font-size=\"17\" "
            "font-weight=\"bold\">", WIDTH / 2);
    put_escaped(f, title);
    fputs("</text>\n", f);
}

static void y_axis(FILE *f, const axis *y, double x0, double x1, const char *label)
{
    for (int i = 0; i < tick_count(y); i++) {
        double v = y->lo + i * y->step, py = to_px(y, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\">%.*f</text>\n",
                x0, py, x1, py, x0 - 5, py, x0, py, x0 - 8, py + 4, y->decimals, v);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n",
            x0, y->px_lo, x0, y->px_hi);
    double mid = (y->px_lo + y->px_hi) / 2;
    fprintf(f, "<text x=\"22\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\" "
            "transform=\"rotate(-90 22 %.1f)\">", mid, mid);
    put_escaped(f, label);
    fputs("</text>\n", f);
}

static void x_axis(FILE *f, const axis *x, double y0, const char *label)
{
    for (int i = 0; i < tick_count(x); i++) {
        double v = x->lo + i * x->step, px = to_px(x, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">%.*f</text>\n",
                px, TOP, px, y0, px, y0, px, y0 + 5, px, y0 + 19, x->decimals, v);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n",
            x->px_lo, y0, x->px_hi, y0);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\">",
            (x->px_lo + x->px_hi) / 2, y0 + 42);
    put_escaped(f, label);
    fputs("</text>\n", f);
}

static int finish(FILE *f)
{
    fputs("</svg>\n", f);
    int failed = ferror(f);
    return (fclose(f) != 0 || failed) ? -1 : 0;
}

/* ---- loss curves --------------------------------------------------------------------- */

static void data_range(const gb_svg_series *s, int n, int use_x, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        const double *v = use_x ? s[i].x : s[i].y;
        double mark = use_x ? s[i].mark_x : s[i].mark_y;
        for (size_t k = 0; k < s[i].n; k++)
            if (!isnan(v[k]) && !isnan(s[i].x[k]) && !isnan(s[i].y[k])) {
                *lo = fmin(*lo, v[k]);
                *hi = fmax(*hi, v[k]);
            }
        if (!isnan(s[i].mark_x) && !isnan(s[i].mark_y)) {
            *lo = fmin(*lo, mark);
            *hi = fmax(*hi, mark);
        }
    }
    if (*lo > *hi)
        *lo = 0.0, *hi = 1.0;
}

/* One polyline per run of points without a NaN. */
static void curve(FILE *f, const gb_svg_series *s, int index, const axis *x, const axis *y)
{
    size_t k = 0;
    while (k < s->n) {
        while (k < s->n && (isnan(s->x[k]) || isnan(s->y[k])))
            k++;
        if (k == s->n)
            break;
        fputs("<polyline ", f);
        line_style(f, index);
        fputs(" points=\"", f);
        for (; k < s->n && !isnan(s->x[k]) && !isnan(s->y[k]); k++)
            fprintf(f, "%.1f,%.1f ", to_px(x, s->x[k]), to_px(y, s->y[k]));
        fputs("\"/>\n", f);
    }
    if (!isnan(s->mark_x) && !isnan(s->mark_y))
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\" stroke=\"white\"/>\n",
                to_px(x, s->mark_x), to_px(y, s->mark_y), 6.0 - 1.2 * (index % 4), colour(index));
}

static void legend(FILE *f, const gb_svg_series *s, int n, const char *mark_label)
{
    size_t longest = mark_label ? strlen(mark_label) : 0;
    for (int i = 0; i < n; i++)
        longest = strlen(s[i].name) > longest ? strlen(s[i].name) : longest;
    int rows = n + (mark_label != NULL);
    double w = 56 + 7.6 * (double)longest, h = 10 + 21.0 * rows;
    double x0 = WIDTH - RIGHT - 12 - w, y0 = TOP + 12;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" "
            "fill-opacity=\"0.9\" stroke=\"#bbb\"/>\n", x0, y0, w, h);
    for (int i = 0; i < rows; i++) {
        double ty = y0 + 21.0 * i + 20;
        if (i < n) {
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" ", x0 + 10,
                    ty - 4, x0 + 42, ty - 4);
            line_style(f, i);
            fputs("/>\n", f);
        } else {
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"#666\"/>\n", x0 + 26,
                    ty - 4);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\">", x0 + 50, ty);
        put_escaped(f, i < n ? s[i].name : mark_label);
        fputs("</text>\n", f);
    }
}

int gb_svg_lines(const char *path, const char *title, const char *x_label, const char *y_label,
                 const char *mark_label, const gb_svg_series *series, int n_series)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const double bottom = HEIGHT - 64;
    double lo, hi;
    data_range(series, n_series, 1, &lo, &hi);
    axis x = nice_axis(lo, hi, 8, LEFT, WIDTH - RIGHT);
    data_range(series, n_series, 0, &lo, &hi);
    axis y = nice_axis(lo, hi, 7, bottom, TOP);
    begin(f, title);
    y_axis(f, &y, LEFT, WIDTH - RIGHT, y_label);
    x_axis(f, &x, bottom, x_label);
    for (int i = 0; i < n_series; i++)
        curve(f, &series[i], i, &x, &y);
    legend(f, series, n_series, mark_label);
    return finish(f);
}

/* ---- step-time distributions --------------------------------------------------------- */

typedef struct box {
    gb_stats_summary q;
    double whisker_lo, whisker_hi;   /* the furthest points within 1.5 IQR of the box */
} box;

static box box_of(const gb_svg_series *s)
{
    box b = {.whisker_lo = NAN, .whisker_hi = NAN};
    double *v = malloc((s->n ? s->n : 1) * sizeof *v);
    size_t n = 0;
    for (size_t k = 0; v && k < s->n; k++)
        if (!isnan(s->y[k]))
            v[n++] = s->y[k];
    b.q = gb_stats_summarize(v, v ? n : 0);
    double reach = 1.5 * (b.q.q75 - b.q.q25);
    for (size_t k = 0; k < n; k++) {   /* v is sorted */
        if (v[k] >= b.q.q25 - reach && isnan(b.whisker_lo))
            b.whisker_lo = v[k];
        if (v[k] <= b.q.q75 + reach)
            b.whisker_hi = v[k];
    }
    free(v);
    return b;
}

/* The top of the value axis: every point, unless some lie so far above every whisker
 * that showing them would squash the boxes. */
static double value_top(const box *boxes, int n)
{
    double whiskers = -INFINITY, points = -INFINITY, bottom = INFINITY;
    for (int i = 0; i < n; i++) {
        if (boxes[i].q.n == 0)
            continue;
        whiskers = fmax(whiskers, boxes[i].whisker_hi);
        points = fmax(points, boxes[i].q.max);
        bottom = fmin(bottom, boxes[i].q.min);
    }
    return points > whiskers + 0.5 * (whiskers - bottom) ? whiskers : points;
}

static void draw_box(FILE *f, const gb_svg_series *s, const box *b, int index, double cx,
                     double half, const axis *y, const char *unit)
{
    const char *c = colour(index);
    gb_rng jitter = {0x5eed + (uint64_t)index};
    size_t above = 0;
    for (size_t k = 0; k < s->n; k++) {
        if (isnan(s->y[k]))
            continue;
        double px = cx + (gb_rng_uniform(&jitter) - 0.5) * 1.6 * half;
        if (s->y[k] > y->hi) {
            above++;
            fprintf(f, "<path d=\"M%.1f %.1f l-4 7 h8 z\" fill=\"%s\" fill-opacity=\"0.6\"/>\n",
                    px, y->px_hi, c);
            continue;
        }
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.4\" fill=\"%s\" fill-opacity=\"0.45\"/>\n",
                px, to_px(y, s->y[k]), c);
    }
    if (b->q.n == 0)
        return;
    double top = to_px(y, b->q.q75), bot = to_px(y, b->q.q25);
    double wt = to_px(y, fmin(b->whisker_hi, y->hi)), wb = to_px(y, b->whisker_lo);
    fprintf(f, "<g stroke=\"%s\" stroke-width=\"1.6\">\n"
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n"
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n"
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n"
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n"
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
            "fill-opacity=\"0.18\"/>\n"
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke-width=\"3.5\"/>\n</g>\n",
            c, cx, top, cx, wt, cx, bot, cx, wb, cx - half / 2, wt, cx + half / 2, wt,
            cx - half / 2, wb, cx + half / 2, wb, cx - half, top, 2 * half,
            fmax(bot - top, 0.5), c, cx - half, to_px(y, b->q.median), cx + half,
            to_px(y, b->q.median));
    double label_y = y->px_lo + 22;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\" "
            "font-weight=\"bold\" fill=\"%s\">", cx, label_y, c);
    put_escaped(f, s->name);
    fprintf(f, "</text>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">"
            "median %.4g ", cx, label_y + 17, b->q.median);
    put_escaped(f, unit);
    fprintf(f, " (n=%zu)</text>\n", b->q.n);
    if (above)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\">"
                "%zu above the axis (max %.4g)</text>\n", cx, y->px_hi - 6, above, b->q.max);
}

int gb_svg_boxes(const char *path, const char *title, const char *y_label, const char *unit,
                 const gb_svg_series *series, int n_series)
{
    box *boxes = calloc((size_t)(n_series > 0 ? n_series : 1), sizeof *boxes);
    FILE *f = boxes ? fopen(path, "w") : NULL;
    if (!f) {
        free(boxes);
        return -1;
    }
    double lo = INFINITY;
    for (int i = 0; i < n_series; i++) {
        boxes[i] = box_of(&series[i]);
        if (boxes[i].q.n)
            lo = fmin(lo, boxes[i].q.min);
    }
    double hi = value_top(boxes, n_series);
    if (isinf(lo))
        lo = 0.0, hi = 1.0;
    const double bottom = HEIGHT - 78;
    axis y = nice_axis(lo, hi, 7, bottom, TOP + 14);
    begin(f, title);
    y_axis(f, &y, LEFT, WIDTH - RIGHT, y_label);
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444\"/>\n", LEFT,
            bottom, WIDTH - RIGHT, bottom);
    double slot = (double)(WIDTH - RIGHT - LEFT) / (n_series > 0 ? n_series : 1);
    double half = fmin(45.0, slot * 0.3);
    for (int i = 0; i < n_series; i++)
        draw_box(f, &series[i], &boxes[i], i, LEFT + slot * (i + 0.5), half, &y, unit);
    free(boxes);
    return finish(f);
}
