/*
 * html.c - the HTML page of a report (html.h): assay_report_render_html
 * writes one self-contained page from the report's JSON, the header,
 * verdict table, failures and notes here and the other sections through
 * html_parts.h (evidence, benchmark, seed table, sweep, stamp) and the
 * audit and compare renderers; the small cell helpers (assay_html_td_*)
 * are shared with those files. write.c calls it for every report written.
 */
#include "html.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "audit_report.h"
#include "compare_report.h"
#include "../core/alloc.h"
#include "html_parts.h"
#include "outcome.h"
#include "report.h"
#include "schema.h"
#include "text.h"

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
    ".NONE{color:#1b1b1b;background:#d0d7de}.WARN{color:#1b1b1b;background:#f2cc60}\n"
    "p.warn{background:#fff4d6;border-left:4px solid #f2cc60;padding:.4em .8em;max-width:58em}\n"
    "span.v{display:inline-block;padding:.05em .5em;border-radius:.3em;font-weight:600;"
    "font-size:.9em}\n"
    ".banner{font-size:1.25em;padding:.6em 1em;border-radius:.4em;margin:.6em 0}\n"
    "pre{background:#f4f4f4;border:1px solid #ddd;padding:.6em;overflow-x:auto;"
    "white-space:pre-wrap;word-break:break-all}\n"
    "code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.9em;"
    "overflow-wrap:anywhere}\n"
    "table.stamp-summary th{white-space:nowrap}details.stamp-all summary{cursor:pointer;"
    "margin:.6em 0}\n"
    "small{color:#555}.muted{color:#666}\n"
    "figure.plot{display:inline-block;margin:.6em 1em .6em 0;max-width:100%}\n"
    "figure.plot svg{max-width:100%;height:auto;border:1px solid #ddd;"
    "font-family:system-ui,sans-serif}\n"
    "figcaption{font-size:.85em;color:#555;max-width:760px}\n"
    "p.para{max-width:58em}\n"
    "nav a{margin-right:1em}\n";

/* ---- small formatting helpers ---------------------------------------- */

void assay_html_esc(struct assay_text *t, const char *s)
{
    assay_text_html(t, s != NULL ? s : "");
}

void assay_html_td_sec(struct assay_text *t, double v)
{
    char b[32];
    assay_text_printf(t, "<td class=\"num\">%s</td>", assay_text_seconds(b, sizeof b, v));
}

void assay_html_td_num(struct assay_text *t, double v, int sig)
{
    char b[32];
    assay_text_printf(t, "<td class=\"num\">%s</td>", assay_text_num(b, sizeof b, v, sig));
}

void assay_html_td_rate(struct assay_text *t, double v)
{
    char b[32];
    assay_text_printf(t, "<td class=\"num\">%s</td>", assay_text_num(b, sizeof b, v, 4));
}

void assay_html_td_pct(struct assay_text *t, double v)
{
    if (isfinite(v)) {
        assay_text_printf(t, "<td class=\"num\">%.1f%%</td>", 100.0 * v);
    } else {
        assay_text_puts(t, "<td class=\"num\">\xe2\x80\x94</td>");
    }
}

void assay_html_td_text(struct assay_text *t, const char *s)
{
    assay_text_puts(t, "<td>");
    assay_html_esc(t, s);
    assay_text_puts(t, "</td>");
}

void assay_html_verdict_span(struct assay_text *t, const char *v)
{
    assay_text_puts(t, "<span class=\"v ");
    assay_html_esc(t, v);
    assay_text_puts(t, "\">");
    assay_html_esc(t, v);
    assay_text_puts(t, "</span>");
}

/* A spread cell: the median, and min-max under it. */
void assay_html_td_spread_sec(struct assay_text *t, const cJSON *sp)
{
    char m[32], lo[32], hi[32];
    assay_text_printf(t, "<td class=\"num\">%s<br><small>%s \xe2\x80\x93 %s</small></td>",
                      assay_text_seconds(m, sizeof m, assay_json_num(sp, "median")),
                      assay_text_seconds(lo, sizeof lo, assay_json_num(sp, "min")),
                      assay_text_seconds(hi, sizeof hi, assay_json_num(sp, "max")));
}

int assay_html_array_size(const cJSON *a)
{
    return cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
}

/* ---- header and verdict ------------------------------------------------ */

/* The banner's colour: green when everything checked passed and the
 * checks mostly ran, amber when they were mostly skipped, red for a failed
 * check, a regression or too few checks run, orange for what could not
 * run, grey for a benchmark alone. */
static const char *banner_class(const cJSON *r, int status)
{
    struct assay_counts c;
    assay_counts_of_report(r, &c);
    switch (status) {
    case ASSAY_EXIT_OK:
        if (c.checks == 0) {
            return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "compare")) ? "WARN" : "NONE";
        }
        return assay_counts_mostly_skipped(&c) ? "WARN" : "PASS";
    case ASSAY_EXIT_USAGE: return "ERROR";
    default: return "FAIL";
    }
}

static void nav_link(struct assay_text *t, bool present, const char *id, const char *name)
{
    if (present) {
        assay_text_printf(t, "<a href=\"#%s\">%s</a>", id, name);
    }
}

/* What the failures section would hold: a check that failed or could not
 * run. */
static bool any_failure(const cJSON *r)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(r, "checks"))
    {
        const char *v = assay_json_str(c, "verdict", "");
        if (strcmp(v, "FAIL") == 0 || strcmp(v, "ERROR") == 0) {
            return true;
        }
    }
    return false;
}

static bool any_evidence(const cJSON *r)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(r, "checks"))
    {
        if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(c, "evidence"))) {
            return true;
        }
    }
    return false;
}

/*
 * The page's header: the command, the banner with the run's verdict in
 * words (a compare's correctness and speed; a run mostly skipped, or short
 * of --require-checks, says so), its counts and its exit status, what made
 * it, and links to the sections the report has - only those.
 */
static void render_header(struct assay_text *t, const cJSON *r)
{
    const cJSON *stamp = cJSON_GetObjectItemCaseSensitive(r, "stamp");
    int status = assay_report_exit_status(r);
    struct assay_counts c;
    assay_counts_of_report(r, &c);
    bool compare = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "compare"));
    char title[200], line[256], req[256];
    assay_text_puts(t, "<header><h1>assay ");
    assay_html_esc(t, assay_json_str(r, "command", ""));
    assay_text_printf(t, "</h1>\n<div class=\"banner %s\">", banner_class(r, status));
    if (c.checks == 0 && !compare) {
        assay_text_puts(t, "No check was run: a benchmark alone");
    } else {
        assay_html_esc(t, assay_report_title(r, title, sizeof title));
        assay_text_puts(t, " &mdash; ");
        if (c.checks == 0) {
            assay_text_puts(t, "no correctness check was run");
        } else {
            assay_html_esc(t, assay_counts_line(&c, line, sizeof line));
        }
    }
    assay_text_printf(t, "<br><small>exit status %d: %s</small></div>\n", status,
                      assay_exit_status_str(status));
    assay_report_require_text(r, req, sizeof req);
    if (req[0] != '\0') {
        assay_text_puts(t, "<p>");
        assay_html_esc(t, req);
        assay_text_puts(t, ".</p>\n");
    }
    if (c.checks > 0 && assay_counts_mostly_skipped(&c)) {
        assay_text_printf(t,
                          "<p class=\"warn\"><b>Mostly skipped:</b> %lld of the %lld checks were "
                          "skipped, which checks nothing; only %lld ran.%s</p>\n",
                          (long long)c.skip, (long long)c.checks, (long long)assay_counts_ran(&c),
                          req[0] != '\0' ? ""
                                          : " <code>--require-checks N</code> fails a run in "
                                            "which fewer than N checks ran (exit status 4).");
    }
    assay_text_puts(t, "<p><code>");
    assay_html_esc(t, assay_json_str(r, "command_line", ""));
    assay_text_puts(t, "</code> &middot; ");
    assay_html_esc(t, assay_json_str(r, "created_utc", ""));
    double dur = assay_json_num(r, "duration_s");
    if (isfinite(dur)) {
        assay_text_printf(t, " &middot; %.1f s", dur);
    }
    assay_text_puts(t, "<br>engine <code>");
    assay_html_esc(t, assay_json_str(stamp, "engine.spec", "(none)"));
    assay_text_puts(t, "</code> &middot; assay ");
    assay_html_esc(t, assay_json_str(stamp, "assay.version", "?"));
    assay_text_puts(t, ", commit <code>");
    assay_html_esc(t, assay_json_str(stamp, "assay.git_commit", "unknown"));
    int dirty = assay_json_bool(stamp, "assay.git_dirty");
    assay_text_puts(t, dirty == 1 ? "</code> (dirty tree)" : dirty == 0 ? "</code> (clean)" : "</code>");
    assay_text_puts(t, ", sources <code>");
    assay_html_esc(t, assay_json_str(stamp, "assay.source_sha256", ""));
    assay_text_puts(t, "</code></p>\n<nav>");
    nav_link(t, c.checks > 0, "verdict", "Verdict");
    nav_link(t, any_failure(r), "failures", "Failures");
    nav_link(t, any_evidence(r), "evidence", "Evidence");
    nav_link(t, cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "audit")), "audit", "Audit");
    nav_link(t, compare, "compare", "Comparison");
    nav_link(t, assay_html_has_benchmark(r), "benchmark", "Benchmark");
    nav_link(t, assay_html_has_seed_table(r), "seed-table", "Seed&rsquo;s table");
    nav_link(t, assay_html_has_sweep(r), "sweep", "Rate sweep");
    nav_link(t, true, "stamp", "Stamp");
    nav_link(t, assay_html_array_size(cJSON_GetObjectItemCaseSensitive(r, "notes")) > 0, "notes",
             "Notes");
    assay_text_puts(t, "</nav></header>\n");
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

/* One check's row: name and engine, family, verdict (and what fired),
 * seconds, summary (and why it was skipped), a link to its evidence. */
static void check_row(struct assay_text *t, const cJSON *c)
{
    assay_text_puts(t, "<tr><td><code>");
    assay_html_esc(t, assay_json_str(c, "name", ""));
    assay_text_puts(t, "</code><br><small><code>");
    assay_html_esc(t, assay_json_str(c, "engine", ""));
    assay_text_puts(t, "</code></small></td>");
    assay_html_td_text(t, assay_json_str(c, "family", ""));
    assay_text_puts(t, "<td>");
    assay_html_verdict_span(t, assay_json_str(c, "verdict", ""));
    const char *fired = assay_report_check_fired(c);
    if (fired[0] != '\0') {
        assay_text_puts(t, "<br><small>fired: ");
        assay_html_esc(t, fired);
        assay_text_puts(t, "</small>");
    }
    assay_text_puts(t, "</td>");
    assay_html_td_num(t, assay_json_num(c, "seconds"), 3);
    assay_text_puts(t, "<td class=\"summary\">");
    const char *summary = assay_json_str(c, "summary", "");
    assay_html_esc(t, summary);
    if (strcmp(assay_json_str(c, "verdict", ""), "SKIP") == 0) {
        /* A check skipped before it ran has no summary: no line break first. */
        assay_text_puts(t, summary[0] != '\0' ? "<br><small>skipped: " : "<small>skipped: ");
        assay_html_esc(t, assay_json_str(c, "failure", ""));
        assay_text_puts(t, "</small>");
    }
    if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(c, "evidence"))) {
        assay_text_puts(t, " <small><a href=\"#evidence-");
        assay_html_esc(t, assay_json_str(c, "name", ""));
        assay_text_puts(t, "\">evidence</a></small>");
    }
    assay_text_puts(t, "</td></tr>\n");
}

/* The SKIPs that share one reason, in one row: how many, their names, the
 * reason once. */
static void skip_group_row(struct assay_text *t, const cJSON *checks,
                           const struct assay_check_row *row)
{
    assay_text_printf(t, "<tr class=\"skip-group\"><td>%d checks<br><small>", (int)row->n);
    const char *families[4] = {NULL, NULL, NULL, NULL};
    int n_families = 0, k = 0;
    double seconds = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks)
    {
        if (!assay_check_row_has(row, c)) {
            continue;
        }
        assay_text_puts(t, k++ > 0 ? ", <code>" : "<code>");
        assay_html_esc(t, assay_json_str(c, "name", ""));
        assay_text_puts(t, "</code>");
        const char *f = assay_json_str(c, "family", "");
        bool seen = false;
        for (int i = 0; i < n_families; i++) {
            seen = seen || strcmp(families[i], f) == 0;
        }
        if (!seen && n_families < 4) {
            families[n_families++] = f;
        }
        double s1 = assay_json_num(c, "seconds");
        seconds += isfinite(s1) ? s1 : 0;
    }
    assay_text_puts(t, "</small></td><td>");
    for (int i = 0; i < n_families; i++) {
        assay_text_puts(t, i > 0 ? ", " : "");
        assay_html_esc(t, families[i]);
    }
    assay_text_puts(t, "</td><td>");
    assay_html_verdict_span(t, "SKIP");
    assay_text_puts(t, "</td>");
    assay_html_td_num(t, seconds, 3);
    assay_text_printf(t, "<td class=\"summary\">%d checks skipped: ", (int)row->n);
    assay_html_esc(t, assay_json_str(row->check, "failure", ""));
    assay_text_puts(t, "</td></tr>\n");
}

/*
 * The verdict table. Each check's figures appear once, in its summary (the
 * check's own line, which states them with their context); the JSON keeps
 * them as numbers under figures. A distributional check links to its
 * evidence below. Failures come first; the SKIPs that share a reason make
 * one row ("29 checks skipped: ..."), so that a plan mostly skipped on an
 * engine does not bury what failed.
 */
static void render_verdict(struct assay_text *t, const cJSON *r)
{
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
    if (assay_html_array_size(checks) == 0) {
        return; /* the banner says no check was run */
    }
    assay_text_puts(t, "<section id=\"verdict\"><h2>Verdict</h2>\n");
    const cJSON *verify = cJSON_GetObjectItemCaseSensitive(r, "verify");
    double power = shared_power(checks);
    char pw[32];
    if (cJSON_IsObject(verify)) {
        assay_text_puts(t, "<p>Each check runs on the base engine spec <code>");
        assay_html_esc(t, assay_json_str(verify, "base_spec", ""));
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
    assay_text_puts(t, "<table class=\"verdicts\"><tr><th>Check</th><th>Family</th><th>Verdict</th>"
                       "<th>s</th><th>Summary</th></tr>\n");
    int n_checks = assay_html_array_size(checks);
    struct assay_check_row *rows = assay_calloc((size_t)n_checks, sizeof *rows);
    if (rows == NULL) {
        t->status = ASSAY_ERR_NOMEM; /* sticky, as a failed append's */
        return;
    }
    size_t n_rows = assay_report_check_rows(r, rows, (size_t)n_checks);
    for (size_t i = 0; i < n_rows; i++) {
        if (rows[i].n > 1) {
            skip_group_row(t, checks, &rows[i]);
        } else {
            check_row(t, rows[i].check);
        }
    }
    assay_free(rows);
    assay_text_puts(t, "</table></section>\n");
}

/* What failed or could not run, each with its reason and the command that
 * reproduces it; no section when nothing did (the SKIPs' reasons are in the
 * verdict table). */
static void render_failures(struct assay_text *t, const cJSON *r)
{
    if (!any_failure(r)) {
        return;
    }
    assay_text_puts(t, "<section id=\"failures\"><h2>Failures</h2>\n");
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(r, "checks"))
    {
        const char *v = assay_json_str(c, "verdict", "");
        if (strcmp(v, "FAIL") != 0 && strcmp(v, "ERROR") != 0) {
            continue;
        }
        assay_text_puts(t, "<h3>");
        assay_html_verdict_span(t, v);
        assay_text_puts(t, " <code>");
        assay_html_esc(t, assay_json_str(c, "name", ""));
        assay_text_puts(t, "</code></h3>\n<p>");
        assay_html_esc(t, assay_json_str(c, "failure", ""));
        assay_text_puts(t, "</p>\n");
        const char *repro = assay_json_str(c, "repro", "");
        if (repro[0] != '\0') {
            assay_text_puts(t, "<p>Reproduce:</p><pre><code>");
            assay_html_esc(t, repro);
            assay_text_puts(t, "</code></pre>\n");
        }
    }
    assay_text_puts(t, "</section>\n");
}

static void render_notes(struct assay_text *t, const cJSON *r)
{
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(r, "notes");
    if (assay_html_array_size(notes) > 0) {
        assay_text_puts(t, "<section id=\"notes\"><h2>Notes</h2><ul>\n");
        const cJSON *n;
        cJSON_ArrayForEach(n, notes)
        {
            assay_text_puts(t, "<li>");
            assay_html_esc(t, cJSON_IsString(n) ? n->valuestring : "");
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
    char title[200];
    assay_html_esc(&t, assay_json_str(r, "command", ""));
    assay_text_puts(&t, ": ");
    assay_html_esc(&t, assay_report_title(r, title, sizeof title));
    assay_text_puts(&t, "</title>\n<style>\n");
    assay_text_puts(&t, css);
    assay_text_puts(&t, "</style>\n</head>\n<body><main>\n");
    render_header(&t, r);
    render_verdict(&t, r);
    render_failures(&t, r);
    assay_html_evidence(&t, r);
    assay_report_audit_html(&t, r);
    assay_report_compare_html(&t, r);
    assay_html_benchmark(&t, r);
    assay_html_seed_table(&t, r);
    assay_html_sweep(&t, r);
    assay_html_stamp(&t, r);
    render_notes(&t, r);
    assay_text_printf(&t,
                      "<footer><p class=\"muted\">Rendered from the report&rsquo;s JSON (schema "
                      "<code>%s</code>, version %g), which is the truth; <code>assay report "
                      "FILE.json</code> renders this page again from it.</p></footer>\n",
                      assay_json_str(r, "schema", ""), assay_json_num(r, "version"));
    assay_text_puts(&t, "</main></body>\n</html>\n");
    return assay_text_take(&t, out, len);
}
