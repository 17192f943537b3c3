/*
 * plot.h - line, point and bar charts as inline SVG, for the HTML report.
 *
 * The report must open from a file with no network, so its plots are SVG
 * elements written straight into the page: no script, no font or image to
 * fetch, and they print and scale like text. Axes are linear or base-10
 * logarithmic, with ticks at 1-2-5 steps or at decades; values are in the
 * unit of the axis (seconds print as "12 ms").
 *
 * Usage:
 *     double x[] = {...}, y[] = {...};
 *     struct assay_plot_series s = {.name = "open loop", .x = x, .y = y, .n = 5,
 *                                   .style = ASSAY_PLOT_LINE_POINTS};
 *     struct assay_plot p = assay_plot_default();
 *     p.title = "TTFT"; p.x_log = true; p.x_unit = ASSAY_PLOT_UNIT_SECONDS;
 *     p.series = &s; p.n_series = 1;
 *     assay_plot_svg(&text, &p);
 */
#ifndef ASSAY_PLOT_H
#define ASSAY_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "text.h"

enum assay_plot_style {
    ASSAY_PLOT_LINE = 0,        /* points joined in the order given */
    ASSAY_PLOT_POINTS = 1,      /* markers only */
    ASSAY_PLOT_LINE_POINTS = 2, /* both */
    ASSAY_PLOT_BARS = 3,        /* a bar from x[i] to x2[i], height y[i] */
};

enum assay_plot_unit {
    ASSAY_PLOT_UNIT_NUMBER = 0,  /* %g */
    ASSAY_PLOT_UNIT_SECONDS = 1, /* "12 ms" */
    ASSAY_PLOT_UNIT_PERCENT = 2, /* a fraction 0..1 shown as "95%" */
};

struct assay_plot_series {
    const char *name;      /* legend text */
    const double *x, *y;   /* (n) points; non-finite ones (and <= 0 on a log
                              axis) are left out */
    const double *x2;      /* (n) BARS: right edge of each bar; else NULL */
    size_t n;
    enum assay_plot_style style;
    int color;             /* index into the palette (8 colours, wraps) */
    bool dashed;
    const char *mark_class; /* a class on each bar or marker (for a reader of the
                              page, such as a test), or NULL */
    const char *const *tips; /* (n) each bar's or marker's tooltip (<title>), or NULL */
    const char *tag;        /* BARS: a word written above each bar, or NULL */
};

struct assay_plot {
    const char *title;
    const char *x_label, *y_label;
    bool x_log, y_log;
    enum assay_plot_unit x_unit, y_unit;
    double x_min, x_max, y_min, y_max; /* NaN: from the data */
    double y_ref;                      /* a dashed horizontal line (NaN: none) */
    const char *y_ref_label;
    const struct assay_plot_series *series;
    size_t n_series;
    const char *caption;               /* a sentence under the plot, or NULL */
    const char *const *x_names;        /* (n_x_names) category names at x = 0.5, 1.5,
                                          ... under the axis in place of numeric
                                          ticks (thinned out when crowded), or NULL */
    size_t n_x_names;
    const char *note;                  /* a line written under the legend, or NULL */
    bool y_cap;                        /* linear y: a bar or point above y_max is drawn
                                          cut at the top of the axis (class "capped"),
                                          a bar with a break mark (path.break) and its
                                          value written above the frame
                                          (text.capped-value), so that one outsized bar
                                          does not set the scale of the rest */
};

/* Every bound NaN, no reference line, linear axes of plain numbers, no
 * category names, no note, nothing capped. */
struct assay_plot assay_plot_default(void);

/*
 * Append the plot as a <figure> holding one <svg> (class "plot") and its
 * caption. A plot with no drawable point still gets its frame and the text
 * "no data". Failures are the buffer's (assay_text_status).
 */
void assay_plot_svg(struct assay_text *t, const struct assay_plot *p);

/* The palette's CSS colour for index i (wraps). */
const char *assay_plot_color(int i);

#endif
