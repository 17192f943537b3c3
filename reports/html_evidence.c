/*
 * html_evidence.c - the "Distributional evidence" section of the HTML
 * report (html_parts.h): for each distributional check, the bins of its
 * chi-squared test and the histogram of its PIT values, drawn from the
 * check's "evidence" in the report's JSON.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "html_parts.h"
#include "plot.h"
#include "schema.h"
#include "text.h"

/* ---- distributional evidence ------------------------------------------ */

#define EVIDENCE_MAX 64
enum { BIN_OWN = 0, BIN_POOLED = 1, BIN_FOLDED = 2 };

/* One bar series of the bins plot: one kind of bin of one sample. */
struct bar_series {
    double x0[EVIDENCE_MAX], x1[EVIDENCE_MAX], y[EVIDENCE_MAX];
    const char *tips[EVIDENCE_MAX];
    size_t n;
};

/* What the bins plot is drawn from (about 20 KB, so on the heap). */
struct bins_work {
    char tips[EVIDENCE_MAX][160];
    const char *names[EVIDENCE_MAX];
    struct bar_series bars[2][3]; /* (sample, kind of bin) */
    double ex[2][EVIDENCE_MAX], ey[2][EVIDENCE_MAX]; /* expected markers per sample */
};

/*
 * The bins of a check's chi-squared test (evidence.bins): a bar per bin
 * and sample, the pooled tail and the folded bins in their own colours and
 * named above their bars, the expected counts as markers. A homogeneity
 * test draws the two engines' bars side by side, each with the count it
 * would have were both samples from one distribution.
 */
static void bins_plot(struct assay_text *t, const char *name, const cJSON *ev, bool tolerance)
{
    const cJSON *bins = cJSON_GetObjectItemCaseSensitive(ev, "bins");
    bool two = strcmp(assay_json_str(ev, "test", ""), "homogeneity") == 0;
    static const char *const kind_class[3] = {"bar own", "bar pooled", "bar folded"};
    static const int kind_color[2][3] = {{0, 1, 6}, {5, 4, 3}};
    struct bins_work *w = assay_calloc(1, sizeof *w);
    if (w == NULL) {
        t->status = ASSAY_ERR_NOMEM; /* sticky, as a failed append's */
        return;
    }
    char(*tips)[160] = w->tips;
    const char **names = w->names;
    struct bar_series(*bars)[3] = w->bars;
    double(*ex)[EVIDENCE_MAX] = w->ex, (*ey)[EVIDENCE_MAX] = w->ey;
    size_t n = 0;
    double top = 0.0;    /* the largest count of the own and pooled bins */
    double folded = 0.0; /* the largest count of the folded bins ("others") */
    const cJSON *b;
    cJSON_ArrayForEach(b, bins)
    {
        if (n == EVIDENCE_MAX) {
            break;
        }
        int kind = assay_json_bool(b, "folded") == 1   ? BIN_FOLDED
                   : assay_json_bool(b, "pooled") == 1 ? BIN_POOLED
                                                       : BIN_OWN;
        double o[2] = {assay_json_num(b, "observed"), assay_json_num(b, "observed_b")};
        double e[2] = {assay_json_num(b, "expected"), NAN};
        e[1] = o[0] + o[1] - e[0]; /* the second sample's share of the bin's total */
        /* The axis names the pooled and folded bins short; their label,
         * with how many they hold, is in the tooltip. */
        names[n] = kind == BIN_FOLDED   ? "others"
                   : kind == BIN_POOLED && strstr(assay_json_str(b, "label", ""), "pooled") != NULL
                       ? "pooled tail"
                       : assay_json_str(b, "label", "");
        const char *label = assay_json_str(b, "label", "");
        if (two) {
            snprintf(tips[n], sizeof tips[n],
                     "%s: first engine %.0f, second %.0f; %.1f each expected of one distribution",
                     label, o[0], o[1], e[0]);
        } else {
            snprintf(tips[n], sizeof tips[n], "%s: observed %.0f, expected %.1f", label, o[0],
                     e[0]);
        }
        for (int sm = 0; sm < (two ? 2 : 1); sm++) {
            struct bar_series *bs = &bars[sm][kind];
            if (kind == BIN_FOLDED) {
                folded = fmax(folded, fmax(o[sm], e[sm]));
            } else {
                top = fmax(top, fmax(o[sm], e[sm]));
            }
            double lo = two ? 0.1 + 0.4 * sm : 0.15, hi = two ? lo + 0.4 : 0.85;
            bs->x0[bs->n] = (double)n + lo;
            bs->x1[bs->n] = (double)n + hi;
            bs->y[bs->n] = o[sm];
            bs->tips[bs->n] = tips[n];
            bs->n++;
            ex[sm][n] = (double)n + (lo + hi) / 2;
            ey[sm][n] = e[sm];
        }
        n++;
    }
    struct assay_plot_series series[8];
    size_t ns = 0;
    static const char *const sample_name[2][3] = {
        {"first engine", "first engine, pooled tail", "first engine, others"},
        {"second engine", "second engine, pooled tail", "second engine, others"}};
    static const char *const one_name[3] = {"observed", "observed, pooled tail",
                                            "observed, others"};
    for (int sm = 0; sm < (two ? 2 : 1); sm++) {
        for (int k = 0; k < 3; k++) {
            if (bars[sm][k].n == 0) {
                continue;
            }
            struct assay_plot_series se = {0};
            se.name = two ? sample_name[sm][k] : one_name[k];
            se.x = bars[sm][k].x0;
            se.x2 = bars[sm][k].x1;
            se.y = bars[sm][k].y;
            se.n = bars[sm][k].n;
            se.style = ASSAY_PLOT_BARS;
            se.color = kind_color[sm][k];
            se.mark_class = kind_class[k];
            se.tips = bars[sm][k].tips;
            se.tag = sm != 0             ? NULL
                     : k == BIN_POOLED ? "pooled tail"
                     : k == BIN_FOLDED ? "others"
                                       : NULL;
            series[ns++] = se;
        }
    }
    for (int sm = 0; sm < (two ? 2 : 1); sm++) {
        struct assay_plot_series se = {0};
        se.name = two ? (sm == 0 ? "expected (first)" : "expected (second)") : "expected";
        se.x = ex[sm];
        se.y = ey[sm];
        se.n = n;
        se.style = ASSAY_PLOT_POINTS;
        se.color = 7;
        se.mark_class = "expected";
        se.tips = names;
        series[ns++] = se;
    }
    /* "others" holds every bin the plot has no room for: tens of thousands
     * of samples against a few thousand in the largest own bin. Drawn to
     * scale it would flatten every other bar, which are what the test is
     * about; so the axis is the own bins', and "others" is cut at its top. */
    bool cap = folded > 1.5 * top && top > 0.0;
    top = cap ? top : fmax(top, folded);
    char title[160], note[96], caption[800];
    snprintf(title, sizeof title, "Bins of %s", name);
    snprintf(note, sizeof note, "%.0f test bins%s", assay_json_num(ev, "n_test_bins"),
             assay_json_num(ev, "n_folded") > 0 ? ", some folded" : "");
    snprintf(caption, sizeof caption,
             "%s %s%s Hover a bar for its counts.",
             two ? "Each bin's count in the two engines' samples (bars) and what each would be "
                   "were both samples from one distribution (dots)."
                 : "The engine's count per bin (bars) against the oracle's expected count "
                   "(dots).",
             tolerance ? "Bins of the tolerance test: runs of the oracle's order (most likely "
                         "first) holding at least 1/16 of its mass each, named by their first "
                         "token; the bin \"p = 0\" holds the tokens the oracle's cut removes."
                       : "Bins in the test's order (largest expected count first); the pooled "
                         "tail holds the categories whose expected count alone is below 5.",
             assay_json_num(ev, "n_folded") > 0
                 ? cap ? " The test has more bins than are drawn: the smaller ones are folded into "
                         "\"others\", whose bar is cut at the top of the axis (the break) with "
                         "its count written above it: drawn to scale, it would flatten the rest."
                       : " The test has more bins than are drawn: the smaller ones are folded into "
                         "\"others\"."
                 : "");
    struct assay_plot pl = assay_plot_default();
    pl.title = title;
    pl.y_label = "samples";
    pl.y_min = 0.0;
    pl.y_max = top > 0.0 ? 1.1 * top : NAN; /* room for the tags above the bars */
    pl.y_cap = cap;
    pl.x_min = 0.0;
    pl.x_max = (double)(n > 0 ? n : 1);
    pl.series = series;
    pl.n_series = ns;
    pl.x_names = names;
    pl.n_x_names = n;
    pl.note = note;
    pl.caption = caption;
    assay_plot_svg(t, &pl);
    assay_free(w);
}

/* The histogram of a check's PIT values against the uniform count, with
 * the KS distance D written on it. */
static void pit_plot(struct assay_text *t, const char *name, const cJSON *pit)
{
    double x0[EVIDENCE_MAX], x1[EVIDENCE_MAX], y[EVIDENCE_MAX];
    size_t n = 0;
    const cJSON *bins = cJSON_GetObjectItemCaseSensitive(pit, "bins");
    int n_bins = assay_html_array_size(bins);
    const cJSON *v;
    cJSON_ArrayForEach(v, bins)
    {
        if (n == EVIDENCE_MAX) {
            break;
        }
        x0[n] = (double)n / n_bins;
        x1[n] = (double)(n + 1) / n_bins;
        y[n] = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        n++;
    }
    double total = assay_json_num(pit, "n");
    char title[160], note[64], ref[64], caption[400];
    struct assay_plot_series se = {0};
    se.name = "PIT values";
    se.x = x0;
    se.x2 = x1;
    se.y = y;
    se.n = n;
    se.style = ASSAY_PLOT_BARS;
    se.color = 2;
    se.mark_class = "bar pit";
    snprintf(title, sizeof title, "PIT of %s", name);
    snprintf(note, sizeof note, "KS distance D = %.4f", assay_json_num(pit, "ks_d"));
    snprintf(ref, sizeof ref, "uniform: %.1f per bin", n_bins > 0 ? total / n_bins : NAN);
    snprintf(caption, sizeof caption,
             "The %.0f PIT values on %d equal bins of [0, 1]; under a correct engine they are "
             "uniform (the dashed line). D is the largest distance between their empirical CDF "
             "and the uniform one.",
             total, n_bins);
    struct assay_plot pl = assay_plot_default();
    pl.title = title;
    pl.x_label = "u";
    pl.y_label = "values per bin";
    pl.x_min = 0.0;
    pl.x_max = 1.0;
    pl.y_min = 0.0;
    pl.y_ref = n_bins > 0 ? total / n_bins : NAN;
    pl.y_ref_label = ref;
    pl.series = &se;
    pl.n_series = 1;
    pl.note = note;
    pl.caption = caption;
    assay_plot_svg(t, &pl);
}

void assay_html_evidence(struct assay_text *t, const cJSON *r)
{
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, checks)
    {
        n += cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(c, "evidence"));
    }
    if (n == 0) {
        return;
    }
    assay_text_puts(t, "<section id=\"evidence\"><h2>Distributional evidence</h2>\n"
                       "<p class=\"para\">What each distributional check saw: the counts per bin of its "
                       "test (chi-squared, or under a numerics budget the tolerance test on TV) "
                       "against what the oracle (or the other engine) says they should be, and "
                       "the histogram of its PIT values.</p>\n");
    cJSON_ArrayForEach(c, checks)
    {
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(c, "evidence");
        if (!cJSON_IsObject(ev)) {
            continue;
        }
        const char *name = assay_json_str(c, "name", "");
        assay_text_puts(t, "<h3 id=\"evidence-");
        assay_html_esc(t, name);
        assay_text_puts(t, "\"><code>");
        assay_html_esc(t, name);
        assay_text_puts(t, "</code> ");
        assay_html_verdict_span(t, assay_json_str(c, "verdict", ""));
        assay_text_puts(t, "</h3>\n");
        if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(ev, "bins"))) {
            bins_plot(t, name, ev, assay_json_path(c, "figures.tolerance") != NULL);
        }
        const cJSON *pit = cJSON_GetObjectItemCaseSensitive(ev, "pit");
        if (cJSON_IsObject(pit)) {
            pit_plot(t, name, pit);
        }
    }
    assay_text_puts(t, "</section>\n");
}
