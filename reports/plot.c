/*
 * plot.c - line, point and bar charts as inline SVG (plot.h):
 * assay_plot_default gives a plot's settings, assay_plot_svg draws the axes
 * (linear or log, 1-2-5 or decade ticks), series and legend into a text
 * buffer, and assay_plot_color is the series palette. The HTML report's
 * benchmark, evidence and audit sections draw their plots with it.
 */
#include "plot.h"

#include <math.h>
#include <stdio.h>

/* Okabe and Ito's palette, which stays distinct for colour-blind readers
 * (its yellow is replaced by a dark grey, which stays visible on white). */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#555555", "#000000"};

const char *assay_plot_color(int i)
{
    int n = (int)(sizeof palette / sizeof palette[0]);
    return palette[((i % n) + n) % n];
}

struct assay_plot assay_plot_default(void)
{
    struct assay_plot p = {0};
    p.x_min = p.x_max = p.y_min = p.y_max = NAN;
    p.y_ref = NAN;
    return p;
}

/* Geometry of the drawing, in SVG user units. */
enum { W = 780, H = 380, LEFT = 78, TOP = 34, RIGHT = 230, BOTTOM = 54 };

struct axis {
    bool log;
    double lo, hi;          /* the domain, in data units (log: > 0) */
    double ticks[32];
    int n_ticks;
    enum assay_plot_unit unit;
};

static bool usable(double v, bool log)
{
    return isfinite(v) && (!log || v > 0.0);
}

static void data_range(const struct assay_plot *p, bool x, double *lo, double *hi)
{
    bool log = x ? p->x_log : p->y_log;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (size_t s = 0; s < p->n_series; s++) {
        const struct assay_plot_series *se = &p->series[s];
        for (size_t i = 0; i < se->n; i++) {
            if (!usable(se->x[i], p->x_log) || !usable(se->y[i], p->y_log)) {
                continue;
            }
            double v = x ? se->x[i] : se->y[i];
            if (usable(v, log)) {
                *lo = fmin(*lo, v);
                *hi = fmax(*hi, v);
            }
            if (x && se->style == ASSAY_PLOT_BARS && se->x2 != NULL && usable(se->x2[i], log)) {
                *hi = fmax(*hi, se->x2[i]);
            }
            if (!x && se->style == ASSAY_PLOT_BARS && !log) {
                *lo = fmin(*lo, 0.0);
            }
        }
    }
}

static void make_axis(struct axis *a, bool log, enum assay_plot_unit unit, double lo, double hi,
                      double set_lo, double set_hi)
{
    a->log = log;
    a->unit = unit;
    a->n_ticks = 0;
    if (usable(set_lo, log)) {
        lo = set_lo;
    }
    if (usable(set_hi, log)) {
        hi = set_hi;
    }
    if (!(isfinite(lo) && isfinite(hi))) {
        lo = log ? 1e-3 : 0.0;
        hi = log ? 1.0 : 1.0;
    }
    if (log) {
        double dlo = floor(log10(lo) + 1e-9), dhi = ceil(log10(hi) - 1e-9);
        if (dhi <= dlo) {
            dhi = dlo + 1.0;
        }
        if (usable(set_lo, true)) {
            dlo = log10(set_lo);
        }
        if (usable(set_hi, true)) {
            dhi = log10(set_hi);
        }
        a->lo = pow(10.0, dlo);
        a->hi = pow(10.0, dhi);
        double span = dhi - dlo;
        int step = span > 8 ? 2 : 1;
        for (double d = ceil(dlo - 1e-9); d <= dhi + 1e-9 && a->n_ticks < 32; d += step) {
            if (span <= 2.01) {
                static const double mult[] = {1, 2, 5};
                for (int m = 0; m < 3 && a->n_ticks < 32; m++) {
                    double v = mult[m] * pow(10.0, d);
                    if (v >= a->lo * (1 - 1e-9) && v <= a->hi * (1 + 1e-9)) {
                        a->ticks[a->n_ticks++] = v;
                    }
                }
            } else {
                a->ticks[a->n_ticks++] = pow(10.0, d);
            }
        }
        return;
    }
    if (hi <= lo) {
        double pad = lo == 0.0 ? 1.0 : fabs(lo) * 0.1;
        lo -= pad;
        hi += pad;
    }
    double raw = (hi - lo) / 5.0;
    double mag = pow(10.0, floor(log10(raw)));
    double norm = raw / mag;
    double step = (norm <= 1.0 ? 1.0 : norm <= 2.0 ? 2.0 : norm <= 5.0 ? 5.0 : 10.0) * mag;
    a->lo = usable(set_lo, false) ? set_lo : floor(lo / step) * step;
    a->hi = usable(set_hi, false) ? set_hi : ceil(hi / step) * step;
    for (double v = ceil(a->lo / step - 1e-9) * step; v <= a->hi + step * 1e-9 && a->n_ticks < 32;
         v += step) {
        a->ticks[a->n_ticks++] = fabs(v) < step * 1e-9 ? 0.0 : v;
    }
}

/* Position in [0, 1] along the axis. */
static double frac(const struct axis *a, double v)
{
    if (a->log) {
        return (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
    }
    return (v - a->lo) / (a->hi - a->lo);
}

static double px(const struct axis *a, double v)
{
    return LEFT + frac(a, v) * (W - LEFT - RIGHT);
}

static double py(const struct axis *a, double v)
{
    return TOP + (1.0 - frac(a, v)) * (H - TOP - BOTTOM);
}

static void tick_label(char *buf, size_t size, const struct axis *a, double v)
{
    switch (a->unit) {
    case ASSAY_PLOT_UNIT_SECONDS: assay_text_seconds(buf, size, v); break;
    case ASSAY_PLOT_UNIT_PERCENT: snprintf(buf, size, "%g%%", v * 100.0); break;
    case ASSAY_PLOT_UNIT_NUMBER: snprintf(buf, size, "%g", v); break;
    }
}

static bool inside(const struct axis *ax, const struct axis *ay, double x, double y)
{
    double fx = frac(ax, x), fy = frac(ay, y);
    return fx >= -1e-9 && fx <= 1 + 1e-9 && fy >= -1e-9 && fy <= 1 + 1e-9;
}

/* Close a mark's element, with its tooltip when the series has one. */
static void mark_end(struct assay_text *t, const struct assay_plot_series *s, size_t i,
                     const char *element)
{
    if (s->tips == NULL || s->tips[i] == NULL) {
        assay_text_puts(t, "/>\n");
        return;
    }
    assay_text_puts(t, "><title>");
    assay_text_html(t, s->tips[i]);
    assay_text_printf(t, "</title></%s>\n", element);
}

/* A bar cut at the top of the axis: two white strokes across it below
 * the top (the break), and its value above the frame. */
static void cap_mark(struct assay_text *t, double X0, double X1, double y, const char *color)
{
    double w = fmax(X1 - X0 - 1.0, 1.0);
    assay_text_printf(t,
                      "<path class=\"break\" d=\"M%.1f %.1f L%.1f %.1f M%.1f %.1f L%.1f %.1f\" "
                      "stroke=\"#fff\" stroke-width=\"2.5\"/>\n",
                      X0 - 2, TOP + 14.0, X0 + w + 2, TOP + 8.0, X0 - 2, TOP + 20.0, X0 + w + 2,
                      TOP + 14.0);
    char value[32];
    snprintf(value, sizeof value, "%.0f", y);
    assay_text_printf(t,
                      "<text class=\"capped-value\" x=\"%.1f\" y=\"%d\" font-size=\"11\" "
                      "fill=\"%s\" text-anchor=\"middle\">%s &#8593;</text>\n",
                      fmin((X0 + X1) / 2, (double)(W - RIGHT - 24)), TOP - 4, color, value);
}

static void draw_series(struct assay_text *t, const struct assay_plot *p, const struct axis *ax,
                        const struct axis *ay, const struct assay_plot_series *s)
{
    const char *color = assay_plot_color(s->color);
    const char *cls = s->mark_class != NULL ? s->mark_class : "";
    if (s->style == ASSAY_PLOT_BARS) {
        for (size_t i = 0; i < s->n; i++) {
            double x0 = s->x[i], x1 = s->x2 != NULL ? s->x2[i] : NAN, y = s->y[i];
            if (!usable(x1, p->x_log) || !usable(y, p->y_log)) {
                continue;
            }
            if (!usable(x0, p->x_log) || x0 < ax->lo) {
                x0 = ax->lo;
            }
            bool capped = p->y_cap && !p->y_log && y > ay->hi;
            double base = p->y_log ? ay->lo : fmax(ay->lo, 0.0);
            double X0 = px(ax, x0), X1 = px(ax, fmin(x1, ax->hi)), Y = py(ay, capped ? ay->hi : y),
                   Y0 = py(ay, base);
            bool any_class = cls[0] != '\0' || capped;
            assay_text_printf(t, "<rect%s%s%s%s%s x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                                 "height=\"%.1f\" fill=\"%s\" fill-opacity=\"0.75\" stroke=\"%s\"",
                              any_class ? " class=\"" : "", cls,
                              capped && cls[0] != '\0' ? " " : "", capped ? "capped" : "",
                              any_class ? "\"" : "", X0, Y, fmax(X1 - X0 - 1.0, 1.0),
                              fmax(Y0 - Y, 0.0), color, color);
            mark_end(t, s, i, "rect");
            if (capped) {
                cap_mark(t, X0, X1, y, color);
            }
            if (s->tag != NULL) {
                assay_text_printf(t,
                                  "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"%s\" "
                                  "text-anchor=\"middle\">",
                                  (X0 + X1) / 2, fmax(Y - 5, TOP + 12.0) + (capped ? 18.0 : 0.0),
                                  color);
                assay_text_html(t, s->tag);
                assay_text_puts(t, "</text>\n");
            }
        }
        return;
    }
    if (s->style != ASSAY_PLOT_POINTS) {
        assay_text_printf(t, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
                          color, s->dashed ? " stroke-dasharray=\"6 4\"" : "");
        for (size_t i = 0; i < s->n; i++) {
            if (usable(s->x[i], p->x_log) && usable(s->y[i], p->y_log) &&
                inside(ax, ay, s->x[i], s->y[i])) {
                assay_text_printf(t, "%.1f,%.1f ", px(ax, s->x[i]), py(ay, s->y[i]));
            }
        }
        assay_text_puts(t, "\"/>\n");
    }
    if (s->style != ASSAY_PLOT_LINE) {
        for (size_t i = 0; i < s->n; i++) {
            if (!usable(s->x[i], p->x_log) || !usable(s->y[i], p->y_log)) {
                continue;
            }
            bool capped = p->y_cap && !p->y_log && s->y[i] > ay->hi &&
                          inside(ax, ay, s->x[i], ay->hi);
            if (!capped && !inside(ax, ay, s->x[i], s->y[i])) {
                continue;
            }
            bool any_class = cls[0] != '\0' || capped;
            assay_text_printf(t, "<circle%s%s%s%s%s cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"",
                              any_class ? " class=\"" : "", cls,
                              capped && cls[0] != '\0' ? " " : "", capped ? "capped" : "",
                              any_class ? "\"" : "", px(ax, s->x[i]),
                              py(ay, capped ? ay->hi : s->y[i]), color);
            mark_end(t, s, i, "circle");
        }
    }
}

/* Category names under the x axis, turned to fit; every k-th when there
 * are more than fit (about one per 12 units), counted from the last, which
 * is always named (a pooled tail or folded bins sit there). */
static void x_names(struct assay_text *t, const struct assay_plot *p, const struct axis *ax)
{
    size_t room = (size_t)((W - LEFT - RIGHT) / 12);
    size_t every = p->n_x_names > room ? (p->n_x_names + room - 1) / room : 1;
    for (size_t j = 0; j < p->n_x_names; j += every) {
        size_t i = p->n_x_names - 1 - j;
        double x = (double)i + 0.5;
        if (p->x_names[i] == NULL || !inside(ax, ax, x, x)) {
            continue;
        }
        double X = px(ax, x);
        assay_text_printf(t,
                          "<text x=\"%.1f\" y=\"%d\" font-size=\"9\" text-anchor=\"end\" "
                          "transform=\"rotate(-45 %.1f %d)\">",
                          X, H - BOTTOM + 12, X, H - BOTTOM + 12);
        assay_text_html(t, p->x_names[i]);
        assay_text_puts(t, "</text>\n");
    }
}

void assay_plot_svg(struct assay_text *t, const struct assay_plot *p)
{
    double xlo, xhi, ylo, yhi;
    data_range(p, true, &xlo, &xhi);
    data_range(p, false, &ylo, &yhi);
    bool any = isfinite(xlo) && isfinite(ylo);
    if (isfinite(p->y_ref) && usable(p->y_ref, p->y_log)) {
        ylo = fmin(ylo, p->y_ref);
        yhi = fmax(yhi, p->y_ref);
    }
    struct axis ax, ay;
    make_axis(&ax, p->x_log, p->x_unit, xlo, xhi, p->x_min, p->x_max);
    make_axis(&ay, p->y_log, p->y_unit, ylo, yhi, p->y_min, p->y_max);

    assay_text_puts(t, "<figure class=\"plot\">\n");
    assay_text_printf(t,
                      "<svg class=\"plot\" viewBox=\"0 0 %d %d\" "
                      "width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"",
                      W, H, W, H);
    assay_text_html(t, p->title != NULL ? p->title : "plot");
    assay_text_puts(t, "\">\n<title>");
    assay_text_html(t, p->title != NULL ? p->title : "plot");
    assay_text_printf(t, "</title>\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", W, H);
    /* Title. */
    assay_text_printf(t, "<text x=\"%d\" y=\"20\" font-size=\"15\" font-weight=\"bold\">", LEFT);
    assay_text_html(t, p->title != NULL ? p->title : "");
    assay_text_puts(t, "</text>\n");
    /* Grid and ticks. */
    char label[48];
    if (p->x_names != NULL) {
        x_names(t, p, &ax);
    }
    for (int i = 0; p->x_names == NULL && i < ax.n_ticks; i++) {
        double X = px(&ax, ax.ticks[i]);
        tick_label(label, sizeof label, &ax, ax.ticks[i]);
        assay_text_printf(t,
                          "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e3e3e3\"/>"
                          "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">",
                          X, TOP, X, H - BOTTOM, X, H - BOTTOM + 15);
        assay_text_html(t, label);
        assay_text_puts(t, "</text>\n");
    }
    for (int i = 0; i < ay.n_ticks; i++) {
        double Y = py(&ay, ay.ticks[i]);
        tick_label(label, sizeof label, &ay, ay.ticks[i]);
        assay_text_printf(t,
                          "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e3e3e3\"/>"
                          "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">",
                          LEFT, Y, W - RIGHT, Y, LEFT - 6, Y + 4);
        assay_text_html(t, label);
        assay_text_puts(t, "</text>\n");
    }
    assay_text_printf(t,
                      "<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                      "fill=\"none\" stroke=\"#888\"/>\n",
                      LEFT, TOP, W - LEFT - RIGHT, H - TOP - BOTTOM);
    /* Axis labels. */
    assay_text_printf(t, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">",
                      LEFT + (W - LEFT - RIGHT) / 2, H - 12);
    assay_text_html(t, p->x_label != NULL ? p->x_label : "");
    assay_text_printf(t,
                      "</text>\n<text x=\"16\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\" "
                      "transform=\"rotate(-90 16 %d)\">",
                      TOP + (H - TOP - BOTTOM) / 2, TOP + (H - TOP - BOTTOM) / 2);
    assay_text_html(t, p->y_label != NULL ? p->y_label : "");
    assay_text_puts(t, "</text>\n");
    /* Reference line. */
    if (isfinite(p->y_ref) && usable(p->y_ref, p->y_log)) {
        double Y = py(&ay, p->y_ref);
        assay_text_printf(t,
                          "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#b00\" "
                          "stroke-dasharray=\"4 3\"/>\n",
                          LEFT, Y, W - RIGHT, Y);
        if (p->y_ref_label != NULL) {
            assay_text_printf(t,
                              "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"#b00\" "
                              "text-anchor=\"end\">",
                              W - RIGHT - 6, Y < TOP + 16 ? Y + 14 : Y - 5);
            assay_text_html(t, p->y_ref_label);
            assay_text_puts(t, "</text>\n");
        }
    }
    /* Data (points outside the frame are left out). */
    for (size_t s = 0; s < p->n_series; s++) {
        draw_series(t, p, &ax, &ay, &p->series[s]);
    }
    if (!any) {
        assay_text_printf(t,
                          "<text x=\"%d\" y=\"%d\" font-size=\"14\" fill=\"#888\" "
                          "text-anchor=\"middle\">no data</text>\n",
                          LEFT + (W - LEFT - RIGHT) / 2, TOP + (H - TOP - BOTTOM) / 2);
    }
    /* Legend. */
    int ly = TOP + 8;
    for (size_t s = 0; s < p->n_series; s++) {
        const struct assay_plot_series *se = &p->series[s];
        if (se->name == NULL || se->name[0] == '\0') {
            continue;
        }
        const char *color = assay_plot_color(se->color);
        int lx = W - RIGHT + 12;
        if (se->style == ASSAY_PLOT_BARS) {
            assay_text_printf(t, "<rect x=\"%d\" y=\"%d\" width=\"18\" height=\"10\" fill=\"%s\"/>", lx,
                              ly - 5, color);
        } else {
            assay_text_printf(t,
                              "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                              "stroke-width=\"2\"%s/>",
                              lx, ly, lx + 18, ly, color,
                              se->dashed ? " stroke-dasharray=\"6 4\"" : "");
            if (se->style != ASSAY_PLOT_LINE) {
                assay_text_printf(t, "<circle cx=\"%d\" cy=\"%d\" r=\"3.5\" fill=\"%s\"/>", lx + 9, ly,
                                  color);
            }
        }
        assay_text_printf(t, "<text x=\"%d\" y=\"%d\" font-size=\"11\">", lx + 24, ly + 4);
        assay_text_html(t, se->name);
        assay_text_puts(t, "</text>\n");
        ly += 18;
    }
    if (p->note != NULL && p->note[0] != '\0') {
        /* Under the legend, where no data is drawn. */
        assay_text_printf(t, "<text class=\"note\" x=\"%d\" y=\"%d\" font-size=\"12\">",
                          W - RIGHT + 12, H - BOTTOM);
        assay_text_html(t, p->note);
        assay_text_puts(t, "</text>\n");
    }
    assay_text_puts(t, "</svg>\n");
    if (p->caption != NULL && p->caption[0] != '\0') {
        assay_text_puts(t, "<figcaption>");
        assay_text_html(t, p->caption);
        assay_text_puts(t, "</figcaption>\n");
    }
    assay_text_puts(t, "</figure>\n");
}
