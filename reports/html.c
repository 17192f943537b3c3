#include "html.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "audit_report.h"
#include "compare_report.h"
#include "plot.h"
#include "report.h"
#include "schema.h"
#include "text.h"

/* The five reported percentiles, in the order of the bench module's JSON. */
static const char *const pctl[] = {"p50", "p90", "p95", "p99", "max"};
static const double pctl_q[] = {0.50, 0.90, 0.95, 0.99, 1.0};
#define N_PCTL 5

static const char *const metrics[] = {"ttft", "tpot", "itl", "e2e", "lateness"};
static const char *const metric_names[] = {"TTFT", "TPOT", "ITL", "E2E", "Generator lateness"};
#define N_METRICS 5

static const char css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1b1b1b;"
    "background:#fafafa;line-height:1.45}\n"
    "main{max-width:1180px;margin:0 auto;padding:1em 1.5em 3em}\n"
    "h1{font-size:1.7em;margin:.4em 0}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;"
    "margin-top:2em}h3{margin-top:1.5em}\n"
    "table{border-collapse:collapse;margin:.6em 0;font-size:.92em;display:block;"
    "overflow-x:auto;max-width:100%}\n"
    "th,td{border:1px solid #d4d4d4;padding:.3em .55em;text-align:left;vertical-align:top;"
    "background:#fff}\n"
    "th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums;"
    "white-space:nowrap}\n"
    ".PASS{color:#fff;background:#1a7f37}.FAIL{color:#fff;background:#cf222e}"
    ".SKIP{color:#1b1b1b;background:#d0d7de}.ERROR{color:#fff;background:#bc4c00}"
    ".NONE{color:#1b1b1b;background:#d0d7de}\n"
    "span.v{display:inline-block;padding:.05em .5em;border-radius:.3em;font-weight:600;"
    "font-size:.9em}\n"
    ".banner{font-size:1.25em;padding:.6em 1em;border-radius:.4em;margin:.6em 0}\n"
    "pre{background:#f4f4f4;border:1px solid #ddd;padding:.6em;overflow-x:auto;"
    "white-space:pre-wrap;word-break:break-all}\n"
    "code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.9em}\n"
    "small{color:#555}.muted{color:#666}\n"
    "figure.plot{display:inline-block;margin:.6em 1em .6em 0;max-width:100%}\n"
    "figure.plot svg{max-width:100%;height:auto;border:1px solid #ddd;"
    "font-family:system-ui,sans-serif}\n"
    "figcaption{font-size:.85em;color:#555;max-width:760px}\n"
    "p.para{max-width:58em}\n"
    "nav a{margin-right:1em}\n";

/* ---- small formatting helpers ---------------------------------------- */

static void esc(struct assay_text *t, const char *s)
{
    assay_text_html(t, s != NULL ? s : "");
}

static void td_sec(struct assay_text *t, double v)
{
    char b[32];
    assay_text_printf(t, "<td class=\"num\">%s</td>", assay_text_seconds(b, sizeof b, v));
}

static void td_num(struct assay_text *t, double v, int sig)
{
    char b[32];
    assay_text_printf(t, "<td class=\"num\">%s</td>", assay_text_num(b, sizeof b, v, sig));
}

static void td_rate(struct assay_text *t, double v)
{
    char b[32];
    assay_text_printf(t, "<td class=\"num\">%s</td>", assay_text_num(b, sizeof b, v, 4));
}

static void td_pct(struct assay_text *t, double v)
{
    if (isfinite(v)) {
        assay_text_printf(t, "<td class=\"num\">%.1f%%</td>", 100.0 * v);
    } else {
        assay_text_puts(t, "<td class=\"num\">\xe2\x80\x94</td>");
    }
}

static void td_text(struct assay_text *t, const char *s)
{
    assay_text_puts(t, "<td>");
    esc(t, s);
    assay_text_puts(t, "</td>");
}

static void verdict_span(struct assay_text *t, const char *v)
{
    assay_text_puts(t, "<span class=\"v ");
    esc(t, v);
    assay_text_puts(t, "\">");
    esc(t, v);
    assay_text_puts(t, "</span>");
}

/* A spread cell: the median, and min-max under it. */
static void td_spread_sec(struct assay_text *t, const cJSON *sp)
{
    char m[32], lo[32], hi[32];
    assay_text_printf(t, "<td class=\"num\">%s<br><small>%s \xe2\x80\x93 %s</small></td>",
                      assay_text_seconds(m, sizeof m, assay_json_num(sp, "median")),
                      assay_text_seconds(lo, sizeof lo, assay_json_num(sp, "min")),
                      assay_text_seconds(hi, sizeof hi, assay_json_num(sp, "max")));
}

static int array_size(const cJSON *a)
{
    return cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
}

/* The CDF points of a distribution: its "cdf" array (the quantiles at
 * 1%..100%, medians over runs in a spread) when the report has it, else the
 * percentile points ({"p50": x, ...} or a spread {"p50": {"median": x}}). */
#define CDF_MAX 128
static size_t cdf_points(const cJSON *dist, bool spread, double *x, double *y)
{
    size_t n = 0;
    const cJSON *cdf = cJSON_GetObjectItemCaseSensitive(dist, "cdf");
    int n_cdf = array_size(cdf);
    if (n_cdf > 0 && n_cdf <= CDF_MAX) {
        const cJSON *v;
        int i = 0;
        cJSON_ArrayForEach(v, cdf)
        {
            i++;
            /* The plots show the upper half, where the tail is. */
            if (2 * i >= n_cdf && cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
                v->valuedouble > 0) {
                x[n] = v->valuedouble;
                y[n] = (double)i / n_cdf;
                n++;
            }
        }
        return n;
    }
    for (int i = 0; i < N_PCTL; i++) {
        char path[32];
        snprintf(path, sizeof path, spread ? "%s.median" : "%s", pctl[i]);
        double v = assay_json_num(dist, path);
        if (isfinite(v) && v > 0) {
            x[n] = v;
            y[n] = pctl_q[i];
            n++;
        }
    }
    return n;
}

/* ---- header and verdict ------------------------------------------------ */

static void render_header(struct assay_text *t, const cJSON *r)
{
    const char *verdict = assay_report_verdict(r);
    const cJSON *stamp = cJSON_GetObjectItemCaseSensitive(r, "stamp");
    assay_text_puts(t, "<header><h1>assay report</h1>\n");
    assay_text_printf(t, "<div class=\"banner %s\">", strcmp(verdict, "PASS") == 0   ? "PASS"
                                                      : strcmp(verdict, "FAIL") == 0 ? "FAIL"
                                                      : strcmp(verdict, "ERROR") == 0 ? "ERROR"
                                                                                      : "NONE");
    if (strcmp(verdict, "NONE") == 0) {
        assay_text_puts(t, "No check was run: a benchmark alone");
    } else {
        assay_text_printf(t,
                          "%s &mdash; %g checks: %g passed, %g failed, %g skipped, %g could not run",
                          verdict, assay_json_num(r, "counts.checks"), assay_json_num(r, "counts.pass"),
                          assay_json_num(r, "counts.fail"), assay_json_num(r, "counts.skip"),
                          assay_json_num(r, "counts.error"));
    }
    assay_text_puts(t, "</div>\n<p><code>");
    esc(t, assay_json_str(r, "command_line", ""));
    assay_text_puts(t, "</code> &middot; ");
    esc(t, assay_json_str(r, "created_utc", ""));
    double dur = assay_json_num(r, "duration_s");
    if (isfinite(dur)) {
        assay_text_printf(t, " &middot; %.1f s", dur);
    }
    assay_text_puts(t, "<br>engine <code>");
    esc(t, assay_json_str(stamp, "engine.spec", "(none)"));
    assay_text_puts(t, "</code> &middot; assay ");
    esc(t, assay_json_str(stamp, "assay.version", "?"));
    assay_text_puts(t, ", commit <code>");
    esc(t, assay_json_str(stamp, "assay.git_commit", "unknown"));
    int dirty = assay_json_bool(stamp, "assay.git_dirty");
    assay_text_puts(t, dirty == 1 ? "</code> (dirty tree)" : dirty == 0 ? "</code> (clean)" : "</code>");
    assay_text_puts(t, ", sources <code>");
    esc(t, assay_json_str(stamp, "assay.source_sha256", ""));
    assay_text_puts(t, "</code></p>\n<nav><a href=\"#verdict\">Verdict</a><a href=\"#failures\">"
                       "Failures</a><a href=\"#evidence\">Evidence</a><a href=\"#benchmark\">"
                       "Benchmark</a><a href=\"#seed-table\">"
                       "Seed&rsquo;s table</a><a href=\"#sweep\">Rate sweep</a><a href=\"#stamp\">"
                       "Stamp</a></nav></header>\n");
}

/* The power of the distributional checks' minimum detectable TV: the one
 * they share, or NaN when they differ or none states it. */
static double shared_power(const cJSON *checks)
{
    double power = NAN;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks)
    {
        double p = assay_json_num(c, "figures.power");
        if (strcmp(assay_json_str(c, "family", ""), "distributional") != 0 || !isfinite(p)) {
            continue;
        }
        if (isfinite(power) && p != power) {
            return NAN;
        }
        power = p;
    }
    return power;
}

/*
 * The verdict table. Each check's figures appear once, in its summary (the
 * check's own line, which states them with their context); the JSON keeps
 * them as numbers under figures. A distributional check links to its
 * evidence below.
 */
static void render_verdict(struct assay_text *t, const cJSON *r)
{
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
    assay_text_puts(t, "<section id=\"verdict\"><h2>Verdict</h2>\n");
    const cJSON *verify = cJSON_GetObjectItemCaseSensitive(r, "verify");
    double power = shared_power(checks);
    char pw[32];
    if (cJSON_IsObject(verify)) {
        assay_text_puts(t, "<p>Each check runs on the base engine spec <code>");
        esc(t, assay_json_str(verify, "base_spec", ""));
        assay_text_printf(t,
                          "</code> with the options it is about (column Engine), master seed %g. "
                          "Distributional p-values are adjusted with Holm's procedure across the "
                          "family; the minimum detectable total-variation distance (min-TV) is "
                          "at %s%s.</p>\n",
                          assay_json_num(verify, "master_seed"),
                          isfinite(power) ? "power " : "the power each check states in the JSON",
                          isfinite(power) ? assay_text_num(pw, sizeof pw, power, 3) : "");
    } else if (isfinite(power)) {
        assay_text_printf(t,
                          "<p>The minimum detectable total-variation distance (min-TV) of the "
                          "distributional checks is at power %s.</p>\n",
                          assay_text_num(pw, sizeof pw, power, 3));
    }
    if (array_size(checks) == 0) {
        assay_text_puts(t, "<p class=\"muted\">No check was run.</p></section>\n");
        return;
    }
    assay_text_puts(t, "<table class=\"verdicts\"><tr><th>Check</th><th>Family</th><th>Verdict</th>"
                       "<th>s</th><th>Summary</th></tr>\n");
    const cJSON *c;
    cJSON_ArrayForEach(c, checks)
    {
        assay_text_puts(t, "<tr><td><code>");
        esc(t, assay_json_str(c, "name", ""));
        assay_text_puts(t, "</code><br><small><code>");
        esc(t, assay_json_str(c, "engine", ""));
        assay_text_puts(t, "</code></small></td>");
        td_text(t, assay_json_str(c, "family", ""));
        assay_text_puts(t, "<td>");
        verdict_span(t, assay_json_str(c, "verdict", ""));
        const char *fired = assay_report_check_fired(c);
        if (fired[0] != '\0') {
            assay_text_puts(t, "<br><small>fired: ");
            esc(t, fired);
            assay_text_puts(t, "</small>");
        }
        assay_text_puts(t, "</td>");
        td_num(t, assay_json_num(c, "seconds"), 3);
        assay_text_puts(t, "<td class=\"summary\">");
        esc(t, assay_json_str(c, "summary", ""));
        if (strcmp(assay_json_str(c, "verdict", ""), "SKIP") == 0) {
            assay_text_puts(t, "<br><small>skipped: ");
            esc(t, assay_json_str(c, "failure", ""));
            assay_text_puts(t, "</small>");
        }
        if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(c, "evidence"))) {
            assay_text_puts(t, " <small><a href=\"#evidence-");
            esc(t, assay_json_str(c, "name", ""));
            assay_text_puts(t, "\">evidence</a></small>");
        }
        assay_text_puts(t, "</td></tr>\n");
    }
    assay_text_puts(t, "</table></section>\n");
}

static void render_failures(struct assay_text *t, const cJSON *r)
{
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
    assay_text_puts(t, "<section id=\"failures\"><h2>Failures</h2>\n");
    int n_fail = 0, n_skip = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks)
    {
        const char *v = assay_json_str(c, "verdict", "");
        if (strcmp(v, "FAIL") != 0 && strcmp(v, "ERROR") != 0) {
            n_skip += strcmp(v, "SKIP") == 0;
            continue;
        }
        n_fail++;
        assay_text_puts(t, "<h3>");
        verdict_span(t, v);
        assay_text_puts(t, " <code>");
        esc(t, assay_json_str(c, "name", ""));
        assay_text_puts(t, "</code></h3>\n<p>");
        esc(t, assay_json_str(c, "failure", ""));
        assay_text_puts(t, "</p>\n");
        const char *repro = assay_json_str(c, "repro", "");
        if (repro[0] != '\0') {
            assay_text_puts(t, "<p>Reproduce:</p><pre><code>");
            esc(t, repro);
            assay_text_puts(t, "</code></pre>\n");
        }
    }
    if (n_fail == 0) {
        assay_text_puts(t, "<p>No check failed or errored.</p>\n");
    }
    if (n_skip > 0) {
        assay_text_puts(t, "<h3>Skipped</h3><ul>\n");
        cJSON_ArrayForEach(c, checks)
        {
            if (strcmp(assay_json_str(c, "verdict", ""), "SKIP") == 0) {
                assay_text_puts(t, "<li><code>");
                esc(t, assay_json_str(c, "name", ""));
                assay_text_puts(t, "</code>: ");
                esc(t, assay_json_str(c, "failure", ""));
                assay_text_puts(t, "</li>\n");
            }
        }
        assay_text_puts(t, "</ul>\n");
    }
    assay_text_puts(t, "</section>\n");
}

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
    double top = 0.0; /* the largest count drawn */
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
            top = fmax(top, fmax(o[sm], e[sm]));
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
    char title[160], note[96], caption[600];
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
                 ? " The test has more bins than are drawn: the smaller ones are folded into "
                   "\"others\"."
                 : "");
    struct assay_plot pl = assay_plot_default();
    pl.title = title;
    pl.y_label = "samples";
    pl.y_min = 0.0;
    pl.y_max = top > 0.0 ? 1.1 * top : NAN; /* room for the tags above the bars */
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
    int n_bins = array_size(bins);
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

static void render_evidence(struct assay_text *t, const cJSON *r)
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
        esc(t, name);
        assay_text_puts(t, "\"><code>");
        esc(t, name);
        assay_text_puts(t, "</code> ");
        verdict_span(t, assay_json_str(c, "verdict", ""));
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

/* ---- benchmark ------------------------------------------------------------- */

static void describe_generator(struct assay_text *t, const cJSON *b)
{
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(b, "generator");
    const char *kind = assay_json_str(g, "kind", "");
    char x[32];
    if (strcmp(kind, "open") == 0) {
        const char *arrival = assay_json_str(g, "arrival", "?");
        assay_text_puts(t, "Open loop: ");
        esc(t, arrival);
        double rate = assay_json_num(g, "rate");
        if (isfinite(rate)) {
            assay_text_printf(t, " arrivals at %s req/s offered", assay_text_num(x, sizeof x, rate, 4));
        } else {
            assay_text_puts(t, " arrivals (the workload's own schedule)");
        }
        if (isfinite(assay_json_num(g, "cv"))) {
            assay_text_printf(t, ", coefficient of variation %g", assay_json_num(g, "cv"));
        }
        if (isfinite(assay_json_num(g, "seed"))) {
            assay_text_printf(t, ", seed %g (run r draws with seed + r)", assay_json_num(g, "seed"));
        }
        assay_text_puts(t, "; latency measured from each request's scheduled arrival");
    } else {
        assay_text_printf(t,
                          "Closed loop: %g workers, each submitting its next request when the "
                          "last finished; no offered rate (a closed loop has no arrival process)",
                          assay_json_num(g, "workers"));
    }
    assay_text_printf(t, ". Warm-up: %g requests per run, run first and discarded. ",
                      assay_json_num(g, "warmup"));
    assay_text_printf(t, "%d run(s).", array_size(cJSON_GetObjectItemCaseSensitive(b, "runs")));
}

static void describe_workload(struct assay_text *t, const cJSON *w)
{
    if (!cJSON_IsObject(w)) {
        assay_text_puts(t, "<p>Workload: not stated.</p>\n");
        return;
    }
    assay_text_puts(t, "<p><b>Workload</b> <code>");
    esc(t, assay_json_str(w, "name", ""));
    assay_text_puts(t, "</code>: ");
    esc(t, assay_json_str(w, "description", ""));
    assay_text_printf(t, " (%g requests)<br>Lengths: ", assay_json_num(w, "n_requests"));
    esc(t, assay_json_str(w, "lengths", "not stated"));
    assay_text_puts(t, "<br>Arrivals: ");
    esc(t, assay_json_str(w, "arrivals", "not stated"));
    assay_text_puts(t, "</p>\n<table><tr><th>Length (tokens)</th><th>min</th><th>p50</th>"
                       "<th>p90</th><th>max</th></tr>\n");
    static const char *const which[] = {"prompt_len", "output_len"};
    static const char *const names[] = {"prompt", "output (max_tokens)"};
    for (int i = 0; i < 2; i++) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(w, which[i]);
        assay_text_printf(t, "<tr><td>%s</td>", names[i]);
        td_num(t, assay_json_num(d, "min"), 8);
        td_num(t, assay_json_num(d, "p50"), 8);
        td_num(t, assay_json_num(d, "p90"), 8);
        td_num(t, assay_json_num(d, "max"), 8);
        assay_text_puts(t, "</tr>\n");
    }
    assay_text_puts(t, "</table>\n");
}

static void describe_slo(struct assay_text *t, const cJSON *slo)
{
    char a[32], b[32];
    if (cJSON_IsObject(slo)) {
        assay_text_printf(t,
                          "<p><b>SLO</b>: TTFT &le; %s and TPOT &le; %s. A request is good when it "
                          "finished normally within both; goodput counts good requests over all "
                          "measured requests.</p>\n",
                          assay_text_seconds(a, sizeof a, assay_json_num(slo, "ttft_s")),
                          assay_text_seconds(b, sizeof b, assay_json_num(slo, "tpot_s")));
    } else {
        assay_text_puts(t, "<p><b>SLO</b>: none stated, so no goodput.</p>\n");
    }
}

static void percentile_table(struct assay_text *t, const cJSON *b)
{
    const cJSON *spread = cJSON_GetObjectItemCaseSensitive(b, "spread");
    assay_text_printf(t,
                      "<h3>Latency percentiles</h3><p class=\"muted\">Median over %g runs, with the "
                      "smallest and largest run under it. Percentiles are %s.</p>\n",
                      assay_json_num(spread, "n_runs"),
                      assay_json_str(b, "percentile_definition", "nearest-rank"));
    assay_text_puts(t, "<table><tr><th>Metric</th>");
    for (int i = 0; i < N_PCTL; i++) {
        assay_text_printf(t, "<th>%s</th>", pctl[i]);
    }
    assay_text_puts(t, "</tr>\n");
    for (int m = 0; m < N_METRICS; m++) {
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(spread, metrics[m]);
        if (!cJSON_IsObject(ms)) {
            continue;
        }
        assay_text_printf(t, "<tr><td>%s</td>", metric_names[m]);
        for (int i = 0; i < N_PCTL; i++) {
            td_spread_sec(t, cJSON_GetObjectItemCaseSensitive(ms, pctl[i]));
        }
        assay_text_puts(t, "</tr>\n");
    }
    assay_text_puts(t, "</table>\n");
}

static void rates_table(struct assay_text *t, const cJSON *b)
{
    const cJSON *spread = cJSON_GetObjectItemCaseSensitive(b, "spread");
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(b, "runs");
    const cJSON *run0 = cJSON_GetArrayItem(runs, 0);
    double offered = assay_json_num(run0, "offered_rate");
    assay_text_puts(t, "<h3>Rates and goodput</h3><table><tr><th>Figure</th><th>median</th>"
                       "<th>min</th><th>max</th></tr>\n");
    char x[32];
    if (assay_json_bool(run0, "has_offered_rate") == 0) {
        assay_text_puts(t, "<tr><td>offered req/s</td><td colspan=\"3\">none: a closed loop has no "
                           "arrival process</td></tr>\n");
    } else {
        assay_text_printf(t, "<tr><td>offered req/s</td><td class=\"num\" colspan=\"3\">%s</td></tr>\n",
                          assay_text_num(x, sizeof x, offered, 4));
    }
    static const char *const keys[] = {"achieved_rate", "tokens_per_s", "goodput_fraction",
                                       "goodput_rate"};
    static const char *const names[] = {"achieved req/s", "output tokens/s", "goodput (share)",
                                        "goodput req/s"};
    for (int i = 0; i < 4; i++) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(spread, keys[i]);
        assay_text_printf(t, "<tr><td>%s</td>", names[i]);
        if (i == 2) {
            td_pct(t, assay_json_num(s, "median"));
            td_pct(t, assay_json_num(s, "min"));
            td_pct(t, assay_json_num(s, "max"));
        } else {
            td_rate(t, assay_json_num(s, "median"));
            td_rate(t, assay_json_num(s, "min"));
            td_rate(t, assay_json_num(s, "max"));
        }
        assay_text_puts(t, "</tr>\n");
    }
    assay_text_puts(t, "</table>\n");
    if (isfinite(offered)) {
        double ach = assay_json_num(spread, "achieved_rate.median");
        if (isfinite(ach) && ach < 0.9 * offered) {
            assay_text_printf(t,
                              "<p><b>Saturated:</b> the engine achieved %.3g req/s of the %.3g "
                              "offered, so a queue built and every latency above includes "
                              "queueing.</p>\n",
                              ach, offered);
        }
    }
}

static void runs_table(struct assay_text *t, const cJSON *b)
{
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(b, "runs");
    assay_text_puts(t, "<h3>Runs</h3><table><tr><th>#</th><th>seed</th><th>requests</th>"
                       "<th>outcomes (ok/error/rejected/aborted/lost/unsent)</th>"
                       "<th>offered req/s</th><th>schedule req/s</th><th>achieved req/s</th>"
                       "<th>tokens/s</th><th>goodput</th><th>TTFT p50</th><th>TTFT p99</th>"
                       "<th>E2E p99</th><th>max in flight</th><th>duration</th><th>status</th></tr>\n");
    int i = 0;
    const cJSON *run;
    cJSON_ArrayForEach(run, runs)
    {
        assay_text_printf(t, "<tr><td class=\"num\">%d</td>", ++i);
        td_num(t, assay_json_num(run, "seed"), 20);
        td_num(t, assay_json_num(run, "n_requests"), 10);
        assay_text_printf(t, "<td class=\"num\">%g/%g/%g/%g/%g/%g</td>",
                          assay_json_num(run, "outcomes.ok"), assay_json_num(run, "outcomes.error"),
                          assay_json_num(run, "outcomes.rejected"),
                          assay_json_num(run, "outcomes.aborted"),
                          assay_json_num(run, "outcomes.lost"), assay_json_num(run, "outcomes.unsent"));
        td_rate(t, assay_json_num(run, "offered_rate"));
        td_rate(t, assay_json_num(run, "schedule_rate"));
        td_rate(t, assay_json_num(run, "achieved_rate"));
        td_rate(t, assay_json_num(run, "tokens_per_s"));
        td_pct(t, assay_json_num(run, "goodput.fraction"));
        td_sec(t, assay_json_num(run, "ttft.p50"));
        td_sec(t, assay_json_num(run, "ttft.p99"));
        td_sec(t, assay_json_num(run, "e2e.p99"));
        td_num(t, assay_json_num(run, "max_in_flight"), 10);
        td_sec(t, assay_json_num(run, "duration_s"));
        const char *status = assay_json_str(run, "adapter_status", "ok");
        bool timed_out = assay_json_bool(run, "timed_out") == 1;
        assay_text_puts(t, "<td>");
        esc(t, timed_out ? "timed out" : status);
        assay_text_puts(t, "</td></tr>\n");
    }
    assay_text_puts(t, "</table>\n");
}

static void sufficiency_table(struct assay_text *t, const cJSON *b)
{
    const cJSON *run0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(b, "runs"), 0);
    if (!cJSON_IsObject(run0)) {
        return;
    }
    assay_text_printf(t,
                      "<h3>Sufficiency</h3><p class=\"muted\">Whether one run holds enough samples "
                      "to bound each percentile from above at %g%% confidence (a LoadGen-style "
                      "binomial bound: the k-th smallest sample is an upper bound when "
                      "P(Binomial(n, q) &le; k&minus;1) &ge; %g). A figure marked &#10007; is a "
                      "point estimate the sample cannot bound; n<sub>min</sub> is the sample it "
                      "would need.</p>\n",
                      100 * assay_json_num(b, "sufficiency_confidence"),
                      assay_json_num(b, "sufficiency_confidence"));
    assay_text_puts(t, "<table><tr><th>Metric</th><th>n</th>");
    for (int i = 0; i < 4; i++) {
        assay_text_printf(t, "<th>%s</th>", pctl[i]);
    }
    assay_text_puts(t, "</tr>\n");
    for (int m = 0; m < 4; m++) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(run0, metrics[m]);
        if (!cJSON_IsObject(d)) {
            continue;
        }
        assay_text_printf(t, "<tr><td>%s</td>", metric_names[m]);
        td_num(t, assay_json_num(d, "n"), 10);
        for (int i = 0; i < 4; i++) {
            char path[64], ub[32];
            snprintf(path, sizeof path, "sufficiency.%s", pctl[i]);
            const cJSON *s = assay_json_path(d, path);
            int ok = assay_json_bool(s, "sufficient");
            if (ok == 1) {
                assay_text_printf(t, "<td class=\"num\">&#10003; &le; %s</td>",
                                  assay_text_seconds(ub, sizeof ub, assay_json_num(s, "upper_bound")));
            } else {
                assay_text_printf(t, "<td class=\"num\">&#10007; n<sub>min</sub> %g</td>",
                                  assay_json_num(s, "n_min"));
            }
        }
        assay_text_puts(t, "</tr>\n");
    }
    assay_text_puts(t, "</table>\n");
}

/* The lateness histogram summed over runs (bins have fixed edges). */
static void lateness_plot(struct assay_text *t, const cJSON *b)
{
    enum { MAXB = 64 };
    double lo[MAXB], hi[MAXB], count[MAXB];
    size_t n = 0;
    const cJSON *run;
    cJSON_ArrayForEach(run, cJSON_GetObjectItemCaseSensitive(b, "runs"))
    {
        const cJSON *bin;
        cJSON_ArrayForEach(bin, cJSON_GetObjectItemCaseSensitive(run, "lateness_histogram"))
        {
            double l = assay_json_num(bin, "lo_s"), h = assay_json_num(bin, "hi_s");
            double c = assay_json_num(bin, "count");
            if (!isfinite(h)) {
                h = isfinite(l) && l > 0 ? l * 10.0 : NAN; /* the open-ended last bin */
            }
            size_t k = 0;
            while (k < n && lo[k] != l) {
                k++;
            }
            if (k == n) {
                if (n == MAXB) {
                    continue;
                }
                lo[n] = l;
                hi[n] = h;
                count[n] = 0;
                n++;
            }
            count[k] += isfinite(c) ? c : 0;
        }
    }
    if (n == 0) {
        return;
    }
    for (size_t k = 0; k < n; k++) {
        if (!(lo[k] > 0)) {
            lo[k] = hi[k] / 10.0; /* [0, 1 us): drawn from 0.1 us */
        }
    }
    struct assay_plot_series s = {.name = "requests", .x = lo, .x2 = hi, .y = count, .n = n,
                                  .style = ASSAY_PLOT_BARS, .color = 0};
    struct assay_plot p = assay_plot_default();
    p.title = "Generator lateness (hand-in minus scheduled), all runs";
    p.x_label = "lateness";
    p.y_label = "requests";
    p.x_log = true;
    p.x_unit = ASSAY_PLOT_UNIT_SECONDS;
    p.y_min = 0;
    p.series = &s;
    p.n_series = 1;
    p.caption = "How late the open-loop generator handed each request to the engine (log bins, "
                "four per decade). Latencies are measured from the schedule, so this delay is "
                "charged to the engine's figures as queueing would be; it is stated so that a "
                "slow generator cannot pass unseen.";
    assay_plot_svg(t, &p);
}

static void benchmark_cdf_plot(struct assay_text *t, const cJSON *b)
{
    const cJSON *spread = cJSON_GetObjectItemCaseSensitive(b, "spread");
    double x[4][CDF_MAX], y[4][CDF_MAX];
    struct assay_plot_series s[4];
    size_t n = 0;
    for (int m = 0; m < 4; m++) {
        size_t k = cdf_points(cJSON_GetObjectItemCaseSensitive(spread, metrics[m]), true, x[n], y[n]);
        if (k == 0) {
            continue;
        }
        s[n] = (struct assay_plot_series){.name = metric_names[m], .x = x[n], .y = y[n], .n = k,
                                          .style = k > 10 ? ASSAY_PLOT_LINE : ASSAY_PLOT_LINE_POINTS,
                                          .color = m};
        n++;
    }
    struct assay_plot p = assay_plot_default();
    p.title = "Latency CDF of the benchmark (median run)";
    p.x_label = "latency";
    p.y_label = "fraction of requests at or below";
    p.x_log = true;
    p.x_unit = ASSAY_PLOT_UNIT_SECONDS;
    p.y_unit = ASSAY_PLOT_UNIT_PERCENT;
    p.y_min = 0.5;
    p.y_max = 1.0;
    p.series = s;
    p.n_series = n;
    p.caption = "Drawn through the quantiles at 50%, 51%, ..., 100% (or, in older reports, the "
                "reported percentiles), the median over runs of each.";
    assay_plot_svg(t, &p);
}

static void render_benchmark(struct assay_text *t, const cJSON *r)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "benchmark");
    assay_text_puts(t, "<section id=\"benchmark\"><h2>Benchmark</h2>\n");
    if (!cJSON_IsObject(b)) {
        assay_text_puts(t, "<p class=\"muted\">No benchmark in this report.</p></section>\n");
        return;
    }
    assay_text_puts(t, "<p>");
    describe_generator(t, b);
    assay_text_puts(t, "</p>\n");
    describe_workload(t, cJSON_GetObjectItemCaseSensitive(b, "workload"));
    describe_slo(t, cJSON_GetObjectItemCaseSensitive(b, "slo"));
    percentile_table(t, b);
    rates_table(t, b);
    runs_table(t, b);
    sufficiency_table(t, b);
    assay_text_puts(t, "<h3>Plots</h3>\n");
    benchmark_cdf_plot(t, b);
    lateness_plot(t, b);
    assay_text_puts(t, "</section>\n");
}

/* ---- the seed's table ----------------------------------------------------- */

static void conditions(struct assay_text *t, const cJSON *r, const cJSON *st)
{
    const cJSON *stamp = cJSON_GetObjectItemCaseSensitive(r, "stamp");
    const cJSON *row0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(st, "rows"), 0);
    const cJSON *bench = cJSON_GetObjectItemCaseSensitive(row0, "bench");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(bench, "workload");
    const cJSON *slo = cJSON_GetObjectItemCaseSensitive(bench, "slo");
    char a[32], b2[32];
    assay_text_puts(t, "<p class=\"para\"><b>Conditions:</b> ");
    esc(t, assay_json_str(stamp, "engine.model.name", "?"));
    assay_text_printf(t, " (%.0f params), engine <code>", assay_json_num(stamp, "engine.model.n_params"));
    esc(t, assay_json_str(stamp, "engine.spec", "?"));
    assay_text_printf(t, "</code>, %g &times; ", assay_json_num(stamp, "hardware.cores_available"));
    esc(t, assay_json_str(stamp, "hardware.cpu_model", "?"));
    assay_text_puts(t, ", OpenBLAS ");
    esc(t, assay_json_str(stamp, "libraries.openblas.core", "?"));
    assay_text_printf(t, " (%g threads), %g requests (", assay_json_num(stamp, "libraries.openblas.threads"),
                      assay_json_num(w, "n_requests"));
    esc(t, assay_json_str(w, "lengths", "lengths not stated"));
    assay_text_printf(t,
                      "), the same workload under every generator, %g warm-up requests discarded "
                      "per run, %g run(s) per row (medians shown)",
                      assay_json_num(bench, "generator.warmup"), assay_json_num(bench, "spread.n_runs"));
    if (cJSON_IsObject(slo)) {
        assay_text_printf(t, ", SLO TTFT &le; %s and TPOT &le; %s",
                          assay_text_seconds(a, sizeof a, assay_json_num(slo, "ttft_s")),
                          assay_text_seconds(b2, sizeof b2, assay_json_num(slo, "tpot_s")));
    }
    assay_text_puts(t, ", measured ");
    esc(t, assay_json_str(stamp, "time_utc", "?"));
    assay_text_puts(t, ".</p>\n");
}

static void seed_cdf_plot(struct assay_text *t, const cJSON *st, const char *metric,
                          const char *title)
{
    enum { MAXR = 16 };
    double x[MAXR][CDF_MAX], y[MAXR][CDF_MAX];
    char names[MAXR][80];
    struct assay_plot_series s[MAXR];
    size_t n = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(st, "rows"))
    {
        if (n == MAXR) {
            break;
        }
        char path[64];
        snprintf(path, sizeof path, "bench.spread.%s", metric);
        size_t k = cdf_points(assay_json_path(row, path), true, x[n], y[n]);
        bool open = strcmp(assay_json_str(row, "generator", ""), "open") == 0;
        snprintf(names[n], sizeof names[n], "%s: %s", open ? "open" : "closed",
                 assay_json_str(row, "setting", ""));
        s[n] = (struct assay_plot_series){.name = names[n], .x = x[n], .y = y[n], .n = k,
                                          .style = k > 10 ? ASSAY_PLOT_LINE : ASSAY_PLOT_LINE_POINTS,
                                          .color = (int)n, .dashed = !open};
        n++;
    }
    struct assay_plot p = assay_plot_default();
    p.title = title;
    p.x_label = "latency (log scale)";
    p.y_label = "fraction of requests at or below";
    p.x_log = true;
    p.x_unit = ASSAY_PLOT_UNIT_SECONDS;
    p.y_unit = ASSAY_PLOT_UNIT_PERCENT;
    p.y_min = 0.5;
    p.y_max = 1.0;
    p.series = s;
    p.n_series = n;
    p.caption = "One line per generator setting (closed loops dashed), drawn through the "
                "quantiles at 50%, 51%, ..., 100% (or the reported percentiles in older "
                "reports), medians over runs.";
    assay_plot_svg(t, &p);
}

static void render_seedtable(struct assay_text *t, const cJSON *r)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "seed_table");
    assay_text_puts(t, "<section id=\"seed-table\"><h2>The seed&rsquo;s table: one engine, two "
                       "load generators</h2>\n");
    if (!cJSON_IsObject(st)) {
        assay_text_puts(t, "<p class=\"muted\">Not run for this report.</p></section>\n");
        return;
    }
    assay_text_puts(t, "<table><tr><th>Generator</th><th>Setting</th><th>TTFT p50</th>"
                       "<th>TTFT p95</th><th>TTFT p99</th><th>Offered req/s</th>"
                       "<th>Achieved req/s</th><th>Goodput</th><th>E2E p99</th></tr>\n");
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(st, "rows"))
    {
        bool open = strcmp(assay_json_str(row, "generator", ""), "open") == 0;
        assay_text_puts(t, "<tr>");
        td_text(t, open ? "Open loop" : "Closed loop");
        td_text(t, assay_json_str(row, "setting", ""));
        td_sec(t, assay_json_num(row, "ttft_p50"));
        td_sec(t, assay_json_num(row, "ttft_p95"));
        td_sec(t, assay_json_num(row, "ttft_p99"));
        if (open) {
            td_rate(t, assay_json_num(row, "offered_rate"));
        } else {
            assay_text_puts(t, "<td class=\"num\">none</td>");
        }
        td_rate(t, assay_json_num(row, "achieved_rate"));
        td_pct(t, assay_json_num(row, "bench.spread.goodput_fraction.median"));
        td_sec(t, assay_json_num(row, "bench.spread.e2e.p99.median"));
        assay_text_puts(t, "</tr>\n");
    }
    assay_text_puts(t, "</table>\n");
    conditions(t, r, st);
    assay_text_puts(t, "<p class=\"para\">");
    esc(t, assay_json_str(st, "explanation", ""));
    assay_text_puts(t, "</p>\n");
    seed_cdf_plot(t, st, "ttft", "TTFT CDF per generator");
    seed_cdf_plot(t, st, "e2e", "E2E latency CDF per generator");
    assay_text_puts(t, "</section>\n");
}

/* ---- rate sweep ------------------------------------------------------------ */

/* Open-loop points (offered rate, a figure) from the benchmark's runs and
 * the seed table's open rows; path is a run member ("ttft.p99"). */
static size_t open_points(const cJSON *r, const char *path, double *x, double *y, size_t cap)
{
    size_t n = 0;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "benchmark");
    const cJSON *run;
    cJSON_ArrayForEach(run, cJSON_GetObjectItemCaseSensitive(b, "runs"))
    {
        if (n < cap && assay_json_bool(run, "has_offered_rate") == 1) {
            x[n] = assay_json_num(run, "offered_rate");
            y[n] = assay_json_num(run, path);
            n++;
        }
    }
    const cJSON *row;
    cJSON_ArrayForEach(row, assay_json_path(r, "seed_table.rows"))
    {
        cJSON_ArrayForEach(run, assay_json_path(row, "bench.runs"))
        {
            if (n < cap && assay_json_bool(run, "has_offered_rate") == 1) {
                x[n] = assay_json_num(run, "offered_rate");
                y[n] = assay_json_num(run, path);
                n++;
            }
        }
    }
    return n;
}

static void sort_xy(double *x, double *y, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        for (size_t j = i; j > 0 && x[j - 1] > x[j]; j--) {
            double tx = x[j], ty = y[j];
            x[j] = x[j - 1];
            y[j] = y[j - 1];
            x[j - 1] = tx;
            y[j - 1] = ty;
        }
    }
}

static void render_sweep(struct assay_text *t, const cJSON *r)
{
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(r, "rate_sweep");
    assay_text_puts(t, "<section id=\"sweep\"><h2>Rate sweep</h2>\n");
    enum { CAP = 128 };
    double px_[CAP], py_[CAP], bx[CAP], by[CAP], p50x[CAP], p50y[CAP], p99x[CAP], p99y[CAP];
    double sx[CAP], s50[CAP], s99[CAP], sx99[CAP];
    size_t np = 0, ns = 0;
    if (cJSON_IsObject(sw)) {
        assay_text_puts(t, "<p class=\"para\">");
        esc(t, assay_json_str(sw, "explanation", ""));
        assay_text_puts(t, "</p>\n<table><tr><th>Probe</th><th>Offered req/s</th>"
                           "<th>Goodput</th><th>Result</th></tr>\n");
        int i = 0;
        const cJSON *pr;
        cJSON_ArrayForEach(pr, cJSON_GetObjectItemCaseSensitive(sw, "probes"))
        {
            assay_text_printf(t, "<tr><td class=\"num\">%d</td>", ++i);
            td_rate(t, assay_json_num(pr, "rate"));
            td_pct(t, assay_json_num(pr, "goodput_fraction"));
            assay_text_puts(t, "<td>");
            verdict_span(t, assay_json_bool(pr, "pass") == 1 ? "PASS" : "FAIL");
            assay_text_puts(t, "</td></tr>\n");
            if (np < CAP) {
                px_[np] = assay_json_num(pr, "rate");
                py_[np] = assay_json_num(pr, "goodput_fraction");
                np++;
            }
            double ttft50 = assay_json_num(pr, "ttft_p50"), ttft99 = assay_json_num(pr, "ttft_p99");
            if (ns < CAP && isfinite(ttft50) && isfinite(ttft99)) {
                sx[ns] = assay_json_num(pr, "rate");
                s50[ns] = ttft50;
                s99[ns] = ttft99;
                ns++;
            }
        }
        assay_text_puts(t, "</table>\n");
        const char *status = assay_json_str(sw, "status", "ok");
        if (strcmp(status, "ok") != 0) {
            assay_text_puts(t, "<p><b>The sweep stopped early:</b> ");
            esc(t, status);
            assay_text_puts(t, "</p>\n");
        }
    } else {
        assay_text_puts(t, "<p class=\"muted\">No sweep in this report; the plots below show the "
                           "open-loop runs it has.</p>\n");
    }
    sort_xy(px_, py_, np);
    size_t nb = open_points(r, "goodput.fraction", bx, by, CAP);
    size_t n50 = 0, n99 = 0;
    if (ns > 0) {
        /* The sweep probes: one run per offered rate, on one schedule. */
        memcpy(sx99, sx, sizeof(double) * ns);
        sort_xy(sx, s50, ns);
        sort_xy(sx99, s99, ns);
        memcpy(p50x, sx, sizeof(double) * ns);
        memcpy(p50y, s50, sizeof(double) * ns);
        memcpy(p99x, sx99, sizeof(double) * ns);
        memcpy(p99y, s99, sizeof(double) * ns);
        n50 = n99 = ns;
    } else {
        n50 = open_points(r, "ttft.p50", p50x, p50y, CAP);
        n99 = open_points(r, "ttft.p99", p99x, p99y, CAP);
        sort_xy(p50x, p50y, n50);
        sort_xy(p99x, p99y, n99);
    }

    struct assay_plot_series g[2] = {
        {.name = "sweep probes", .x = px_, .y = py_, .n = np, .style = ASSAY_PLOT_LINE_POINTS,
         .color = 0},
        {.name = "other open-loop runs", .x = bx, .y = by, .n = nb,
         .style = ASSAY_PLOT_POINTS, .color = 1},
    };
    struct assay_plot p = assay_plot_default();
    p.title = "Goodput against offered rate";
    p.x_label = "offered rate, req/s (log scale)";
    p.y_label = "goodput (share of requests within the SLO)";
    p.x_log = true;
    p.y_unit = ASSAY_PLOT_UNIT_PERCENT;
    p.y_min = 0.0;
    p.y_max = 1.0;
    double target = assay_json_num(sw, "target");
    p.y_ref = target;
    char ref_label[32];
    snprintf(ref_label, sizeof ref_label, "target %g%%", 100 * target);
    p.y_ref_label = ref_label;
    p.series = g;
    p.n_series = 2;
    p.caption = "Each point is one open-loop run at a stated offered rate; goodput counts requests "
                "that finished within both SLO bounds.";
    assay_plot_svg(t, &p);

    struct assay_plot_series l[2] = {
        {.name = "TTFT p50", .x = p50x, .y = p50y, .n = n50,
         .style = ns > 0 ? ASSAY_PLOT_LINE_POINTS : ASSAY_PLOT_POINTS, .color = 0},
        {.name = "TTFT p99", .x = p99x, .y = p99y, .n = n99,
         .style = ns > 0 ? ASSAY_PLOT_LINE_POINTS : ASSAY_PLOT_POINTS, .color = 1},
    };
    struct assay_plot q = assay_plot_default();
    q.title = "TTFT against offered rate";
    q.x_label = "offered rate, req/s (log scale)";
    q.y_label = "TTFT (log scale)";
    q.x_log = true;
    q.y_log = true;
    q.y_unit = ASSAY_PLOT_UNIT_SECONDS;
    q.series = l;
    q.n_series = 2;
    q.caption = ns > 0 ? "One point per sweep probe (one open-loop run per offered rate, the "
                         "same schedule scaled): past the engine's capacity the queue, and with it "
                         "the tail, grows without bound."
                       : "One point per open-loop run in this report (the benchmark's and the seed "
                         "table's open row): past the engine's capacity the queue, and with it the "
                         "tail, grows without bound.";
    assay_plot_svg(t, &q);
    assay_text_puts(t, "</section>\n");
}

/* ---- stamp ------------------------------------------------------------------- */

static void flat_rows(struct assay_text *t, const cJSON *o, const char *prefix)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, o)
    {
        char key[256];
        snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] != '\0' ? "." : "",
                 item->string != NULL ? item->string : "");
        if (cJSON_IsObject(item)) {
            flat_rows(t, item, key);
            continue;
        }
        assay_text_puts(t, "<tr><td><code>");
        esc(t, key);
        assay_text_puts(t, "</code></td><td>");
        if (cJSON_IsString(item)) {
            esc(t, item->valuestring);
        } else if (cJSON_IsNumber(item)) {
            assay_text_printf(t, "%.17g", item->valuedouble);
        } else if (cJSON_IsBool(item)) {
            assay_text_puts(t, cJSON_IsTrue(item) ? "true" : "false");
        } else if (cJSON_IsNull(item)) {
            assay_text_puts(t, "<span class=\"muted\">null</span>");
        } else if (cJSON_IsArray(item)) {
            const cJSON *e;
            int k = 0;
            cJSON_ArrayForEach(e, item)
            {
                assay_text_puts(t, k++ > 0 ? ", " : "");
                if (cJSON_IsString(e)) {
                    esc(t, e->valuestring);
                } else if (cJSON_IsNumber(e)) {
                    assay_text_printf(t, "%.17g", e->valuedouble);
                }
            }
        }
        assay_text_puts(t, "</td></tr>\n");
    }
}

static void render_stamp(struct assay_text *t, const cJSON *r)
{
    const cJSON *stamp = cJSON_GetObjectItemCaseSensitive(r, "stamp");
    assay_text_puts(t, "<section id=\"stamp\"><h2>Stamp</h2>\n<p class=\"para\">What produced "
                       "these figures: the code (its git commit and a content hash of every "
                       "source that built the binary), the engine and every option, the model and "
                       "its weights, the machine, the libraries, the compiler, the seeds and the "
                       "time. A change to any source changes the hash and invalidates the "
                       "figures.</p>\n");
    static const char *const groups[] = {"assay", "engine", "hardware", "libraries", "compiler",
                                         "seeds"};
    static const char *const titles[] = {"Code", "Engine and model", "Machine", "Libraries",
                                         "Compiler", "Seeds"};
    for (int i = 0; i < 6; i++) {
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(stamp, groups[i]);
        assay_text_printf(t, "<h3>%s</h3>\n", titles[i]);
        if (!cJSON_IsObject(g)) {
            assay_text_puts(t, "<p class=\"muted\">none</p>\n");
            continue;
        }
        assay_text_puts(t, "<table>\n");
        flat_rows(t, g, "");
        assay_text_puts(t, "</table>\n");
    }
    assay_text_puts(t, "<p>Stamped ");
    esc(t, assay_json_str(stamp, "time_utc", ""));
    assay_text_puts(t, ".</p>\n");
    const cJSON *verify = cJSON_GetObjectItemCaseSensitive(r, "verify");
    if (cJSON_IsObject(verify)) {
        assay_text_puts(t, "<h3>Verification run</h3><table>\n");
        flat_rows(t, verify, "");
        assay_text_puts(t, "</table>\n");
    }
    assay_text_puts(t, "</section>\n");
}

static void render_notes(struct assay_text *t, const cJSON *r)
{
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(r, "notes");
    if (array_size(notes) > 0) {
        assay_text_puts(t, "<section id=\"notes\"><h2>Notes</h2><ul>\n");
        const cJSON *n;
        cJSON_ArrayForEach(n, notes)
        {
            assay_text_puts(t, "<li>");
            esc(t, cJSON_IsString(n) ? n->valuestring : "");
            assay_text_puts(t, "</li>\n");
        }
        assay_text_puts(t, "</ul></section>\n");
    }
}

enum assay_status assay_report_render_html(const cJSON *r, char **out, size_t *len)
{
    struct assay_text t;
    assay_text_init(&t);
    assay_text_puts(&t, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                        "<link rel=\"icon\" href=\"data:,\">\n<title>assay ");
    esc(&t, assay_json_str(r, "command", ""));
    assay_text_puts(&t, ": ");
    esc(&t, assay_report_verdict(r));
    assay_text_puts(&t, "</title>\n<style>\n");
    assay_text_puts(&t, css);
    assay_text_puts(&t, "</style>\n</head>\n<body><main>\n");
    render_header(&t, r);
    render_verdict(&t, r);
    render_failures(&t, r);
    render_evidence(&t, r);
    assay_report_audit_html(&t, r);
    assay_report_compare_html(&t, r);
    render_benchmark(&t, r);
    render_seedtable(&t, r);
    render_sweep(&t, r);
    render_stamp(&t, r);
    render_notes(&t, r);
    assay_text_printf(&t,
                      "<footer><p class=\"muted\">Rendered from the report&rsquo;s JSON (schema "
                      "<code>%s</code>, version %g), which is the truth; <code>assay report "
                      "FILE.json</code> renders this page again from it.</p></footer>\n",
                      assay_json_str(r, "schema", ""), assay_json_num(r, "version"));
    assay_text_puts(&t, "</main></body>\n</html>\n");
    return assay_text_take(&t, out, len);
}
