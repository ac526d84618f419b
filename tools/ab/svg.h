/* The two plots of an A/B report, written as standalone SVG files with no library: loss
 * curves overlaid (one colour and line style per series, so identical curves stay
 * visible on top of each other) and the distribution of step times per series (a box
 * plot over the individual steps drawn as points).
 *
 * Left out: anything a general plotting library does beyond these two pictures (log
 * axes, several panels, colour maps, interactivity); text is measured roughly (by
 * character count), which is enough for short labels.
 */
#ifndef GB_AB_SVG_H
#define GB_AB_SVG_H

#include <stddef.h>

typedef struct gb_svg_series {
    const char *name;
    const double *x, *y;    /* n points; the box plot reads y only; NaN points are skipped */
    size_t n;
    double mark_x, mark_y;  /* one highlighted point (a final evaluation); NaN: none */
} gb_svg_series;

/* Line plot of every series on shared axes, with a legend (and an entry `mark_label`
 * for the highlighted points when it is not NULL). Returns 0, or -1 with errno set
 * when `path` cannot be written. */
int gb_svg_lines(const char *path, const char *title, const char *x_label, const char *y_label,
                 const char *mark_label, const gb_svg_series *series, int n_series);

/* Box plot per series (quartiles, median, whiskers to the furthest point within 1.5 IQR)
 * over the points it summarises, with the median written under each box. Far outliers
 * above every whisker are drawn as marks on the top edge, counted, so that one stalled
 * step does not flatten every box. Returns 0, or -1 with errno set. */
int gb_svg_boxes(const char *path, const char *title, const char *y_label, const char *unit,
                 const gb_svg_series *series, int n_series);

#endif
