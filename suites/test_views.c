/*
 * test_views - what the Markdown and HTML views of a report say, from
 * reports made by hand for the case: the title and banner state the run's
 * verdict in words (a compare's correctness and speed, a run mostly
 * skipped or short of --require-checks), the exit status a report stands
 * for, no empty section, and the SKIPs that share a reason in one row
 * below the failures. report_browser checks the same pages in Chromium;
 * this program reads their text.
 *
 *   test_views   (CTest sets ASSAY_FIXTURES)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "reports/html.h"
#include "reports/markdown.h"
#include "reports/outcome.h"
#include "reports/report.h"
#include "reports/schema.h"
#include "reports/stamp.h"
#include "support.h"

/* ---- helpers ---------------------------------------------------------------- */

static char *render(const cJSON *r, bool html)
{
    struct assay_diag d;
    assert_int_equal(assay_report_validate(r, &d), ASSAY_OK);
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(html ? assay_report_render_html(r, &out, &len)
                          : assay_report_render_markdown(r, &out, &len),
                     ASSAY_OK);
    return out;
}

static void expect_in(const char *what, const char *text, const char *want)
{
    if (strstr(text, want) == NULL) {
        fail_msg("the %s does not say \"%s\"", what, want);
    }
}

static void expect_not_in(const char *what, const char *text, const char *unwanted)
{
    const char *at = strstr(text, unwanted);
    if (at != NULL) {
        fail_msg("the %s says \"%s\": ...%.200s", what, unwanted, at);
    }
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p != NULL; p = strstr(p + 1, what)) {
        n++;
    }
    return n;
}

/* Every in-page link of the page (href="#x") has its target (id="x"). */
static void expect_links_resolve(const char *html)
{
    for (const char *p = strstr(html, "href=\"#"); p != NULL; p = strstr(p + 1, "href=\"#")) {
        char id[128], want[160];
        size_t n = strcspn(p + 7, "\"");
        snprintf(id, sizeof id, "%.*s", (int)(n < 100 ? n : 100), p + 7);
        snprintf(want, sizeof want, "id=\"%s\"", id);
        if (strstr(html, want) == NULL) {
            fail_msg("the page links to #%s, which it does not have", id);
        }
    }
}

static cJSON *load_fixture(const char *name)
{
    char path[1024];
    assay_test_fixture(name, path, sizeof path);
    cJSON *r = NULL;
    struct assay_diag d;
    if (assay_report_load(path, &r, &d) != ASSAY_OK) {
        char why[900];
        fail_msg("%s: %s", path, assay_diag_format(&d, why, sizeof why));
    }
    return r;
}

/* A compare report whose candidate is slower beyond the threshold and
 * whose correctness was not checked (--no-checks), from the committed
 * compare sample with its checks taken out. With recorded, the exit status
 * is in the report as an assay of today writes it; without, as an older
 * one left it (compare's verdict alone has it). */
static cJSON *regression_report(bool recorded)
{
    cJSON *r = load_fixture("reports/sample-evidence.json");
    assert_int_equal(assay_report_set(r, "checks", cJSON_CreateArray()), ASSAY_OK);
    assert_int_equal(assay_report_add_checks(r, NULL, 0), ASSAY_OK);
    cJSON *v = (cJSON *)assay_json_path(r, "compare.verdict");
    cJSON_ReplaceItemInObjectCaseSensitive(v, "correct", cJSON_CreateNull());
    cJSON_ReplaceItemInObjectCaseSensitive(v, "speed", cJSON_CreateString("regression"));
    cJSON_ReplaceItemInObjectCaseSensitive(v, "exit_status", cJSON_CreateNumber(3));
    if (recorded) {
        assert_int_equal(assay_report_set_outcome(r, NULL, 0, ASSAY_EXIT_REGRESSION), ASSAY_OK);
    }
    return r;
}

/* A run on an engine that offers little: 3 checks fail, 1 passes, 29 are
 * skipped for one reason and 1 for another. */
static cJSON *mostly_skipped_report(void)
{
    enum { N = 34 };
    struct assay_check_result *res = calloc(N, sizeof *res);
    assert_non_null(res);
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "check.%02d", i);
        assay_check_result_init(&res[i], name, ASSAY_FAMILY_PROPERTY);
        res[i].seconds = 0.01;
        snprintf(res[i].summary, sizeof res[i].summary, "summary of %s", name);
        if (i == 5 || i == 17 || i == 30) {
            assay_check_fail(&res[i], "it broke at step %d", i);
        } else if (i == 12) {
            /* skipped before it ran: no summary */
            res[i].summary[0] = '\0';
            assay_check_skip(&res[i], "needs logits, which this target lacks");
        } else if (i != 0) {
            assay_check_skip(&res[i], "needs weights, which this target lacks");
        }
    }
    cJSON *r = NULL, *stamp = NULL;
    assert_int_equal(assay_report_create("run", "assay run --engine plugin:x.so", &r), ASSAY_OK);
    assert_int_equal(assay_report_add_checks(r, res, N), ASSAY_OK);
    struct assay_stamp_seed seeds[] = {{"master", 1}};
    assert_int_equal(assay_stamp_create(NULL, seeds, 1, &stamp), ASSAY_OK);
    assert_int_equal(assay_report_set(r, "stamp", stamp), ASSAY_OK);
    free(res);
    return r;
}

/* ---- a compare's verdict ------------------------------------------------------ */

/* A compare with a regression says so in its title and banner (not "NONE"
 * and "No check was run: a benchmark alone"), has no empty section, and
 * stands for exit status 3, recorded or not. */
static void test_compare_states_its_verdict(void **state)
{
    (void)state;
    for (int recorded = 1; recorded >= 0; recorded--) {
        cJSON *r = regression_report(recorded);
        assert_int_equal(assay_report_exit_status(r), ASSAY_EXIT_REGRESSION);
        char *md = render(r, false);
        char *html = render(r, true);
        expect_in("Markdown", md, "# assay compare: CORRECTNESS NOT CHECKED, REGRESSION\n");
        expect_in("Markdown", md, "Exit status 3: a significant speed regression.");
        expect_not_in("Markdown", md, ": NONE");
        expect_in("page", html, "<title>assay compare: CORRECTNESS NOT CHECKED, REGRESSION</title>");
        expect_in("page", html,
                  "<div class=\"banner FAIL\">CORRECTNESS NOT CHECKED, REGRESSION &mdash; no "
                  "correctness check was run<br><small>exit status 3");
        expect_not_in("page", html, "a benchmark alone");
        /* No section without content: no checks, no benchmark, no seed
         * table, no sweep, and nothing that says so in their place. */
        static const char *const absent[] = {
            "id=\"verdict\"", "id=\"failures\"", "id=\"benchmark\"", "id=\"seed-table\"",
            "id=\"sweep\"", "No benchmark in this report", "Not run for this report",
            "No check was run.", "## Benchmark", "## The seed"};
        for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
            expect_not_in("page", html, absent[i]);
            expect_not_in("Markdown", md, absent[i]);
        }
        expect_links_resolve(html);
        assay_free(md);
        assay_free(html);
        cJSON_Delete(r);
    }
}

/* ---- a run mostly skipped --------------------------------------------------------- */

/* The counts line says a run was mostly skipped, in the terminal's words,
 * on both views; the banner is amber, not green; failures come first and
 * the 29 SKIPs that share a reason are one row. */
static void test_mostly_skipped(void **state)
{
    (void)state;
    cJSON *r = mostly_skipped_report();
    char *md = render(r, false);
    char *html = render(r, true);
    static const char line[] =
        "34 checks: 1 passed, 3 failed, 30 skipped, 0 could not run; MOSTLY SKIPPED: only 4 of "
        "the 34 checks ran";
    expect_in("Markdown", md, line);
    expect_in("page", html, line);
    expect_in("Markdown", md, "# assay run: FAIL, MOSTLY SKIPPED\n");
    expect_in("Markdown", md, "**Mostly skipped:** 30 of the 34 checks were skipped");
    expect_in("page", html, "<b>Mostly skipped:</b> 30 of the 34 checks were skipped");
    /* One row for the 29, one for the one; each failure before any SKIP. */
    assert_int_equal(count(html, "<tr class=\"skip-group\">"), 1);
    expect_in("page", html, "29 checks skipped: needs weights, which this target lacks");
    expect_in("Markdown", md, "| 29 checks: `check.01`, `check.02`");
    /* The one SKIP with its own reason and no summary: no line break first. */
    expect_in("page", html,
              "<td class=\"summary\"><small>skipped: needs logits, which this target lacks");
    expect_not_in("page", html, "<td class=\"summary\"><br>");
    assert_int_equal(count(md, "needs weights, which this target lacks"), 1);
    const char *verdicts = strstr(html, "<table class=\"verdicts\">");
    assert_non_null(verdicts);
    const char *first_skip = strstr(verdicts, "v SKIP");
    assert_non_null(first_skip);
    static const char *const failed[] = {"check.05", "check.17", "check.30"};
    for (int i = 0; i < 3; i++) {
        const char *at = strstr(verdicts, failed[i]);
        assert_non_null(at);
        assert_true(at < first_skip);
    }
    expect_links_resolve(html);
    assay_free(md);
    assay_free(html);

    /* All passed but mostly skipped: the banner is amber, the title says so. */
    cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
    const cJSON *c;
    cJSON_ArrayForEach(c, checks)
    {
        if (strcmp(assay_json_str(c, "verdict", ""), "FAIL") == 0) {
            cJSON_ReplaceItemInObjectCaseSensitive((cJSON *)c, "verdict", cJSON_CreateString("PASS"));
        }
    }
    cJSON *again = NULL;
    assert_int_equal(assay_report_create("run", "assay run --engine plugin:x.so", &again),
                     ASSAY_OK);
    assert_int_equal(assay_report_set(again, "stamp",
                                      cJSON_Duplicate(cJSON_GetObjectItem(r, "stamp"), 1)),
                     ASSAY_OK);
    assert_int_equal(assay_report_set(again, "checks", cJSON_Duplicate(checks, 1)), ASSAY_OK);
    assert_int_equal(assay_report_add_checks(again, NULL, 0), ASSAY_OK);
    html = render(again, true);
    md = render(again, false);
    expect_in("page", html, "<div class=\"banner WARN\">PASS, MOSTLY SKIPPED &mdash; 34 checks");
    expect_in("Markdown", md, "# assay run: PASS, MOSTLY SKIPPED\n");
    assay_free(md);
    assay_free(html);
    cJSON_Delete(again);
    cJSON_Delete(r);
}

/* --require-checks: a report short of it says so and stands for exit
 * status 4; its record is checked like the counts. */
static void test_require_checks(void **state)
{
    (void)state;
    struct assay_require rq = {0};
    assert_int_equal(assay_require_parse("50%", &rq), ASSAY_OK);
    assert_int_equal(assay_require_needed(&rq, 33), 17);
    assert_int_equal(assay_require_parse("29%", &rq), ASSAY_OK);
    assert_int_equal(assay_require_needed(&rq, 100), 29);
    assert_int_equal(assay_require_parse("20", &rq), ASSAY_OK);
    assert_int_equal(assay_require_needed(&rq, 33), 20);
    static const char *const bad[] = {"0", "-3", "2.5", "101%", "0%", "x", "", "5%%", "+4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct assay_require b = {0};
        assert_int_equal(assay_require_parse(bad[i], &b), ASSAY_ERR_PARSE);
    }
    struct assay_counts c = {.checks = 33, .pass = 4, .skip = 29};
    assert_int_equal(assay_outcome_exit_status(&c, &rq), ASSAY_EXIT_TOO_FEW);
    c.fail = 1;
    c.pass = 3;
    assert_int_equal(assay_outcome_exit_status(&c, &rq), ASSAY_EXIT_FAIL); /* a failure outranks */

    cJSON *r = mostly_skipped_report();
    assert_int_equal(assay_report_set_outcome(r, "20", 20, ASSAY_EXIT_FAIL), ASSAY_OK);
    assert_int_equal(assay_json_num(r, "require_checks.ran"), 4);
    assert_int_equal(assay_json_bool(r, "require_checks.met"), 0);
    char *md = render(r, false);
    expect_in("Markdown", md, "# assay run: FAIL, TOO FEW CHECKS RAN\n");
    expect_in("Markdown", md, "--require-checks 20: 4 checks ran (PASS or FAIL), 20 had to: too few");
    expect_in("Markdown", md, "Exit status 1: a check failed.");
    assay_free(md);
    assert_int_equal(assay_report_exit_status(r), ASSAY_EXIT_FAIL);
    /* A record that disagrees with the checks, or a status out of range,
     * is refused with the field named. */
    struct assay_diag d;
    cJSON_ReplaceItemInObjectCaseSensitive((cJSON *)assay_json_path(r, "require_checks"), "ran",
                                           cJSON_CreateNumber(20));
    assert_int_equal(assay_report_validate(r, &d), ASSAY_ERR_PARSE);
    assert_string_equal(d.where, "require_checks.ran");
    assert_int_equal(assay_report_set_outcome(r, NULL, 0, 7), ASSAY_OK);
    assert_int_equal(assay_report_validate(r, &d), ASSAY_ERR_PARSE);
    assert_string_equal(d.where, "exit_status");
    cJSON_Delete(r);
}

/* ---- the report's pages ------------------------------------------------------------ */

/* The part of text between the first `from` and the next `to` after it
 * (a copy; free it). */
static char *between(const char *text, const char *from, const char *to)
{
    const char *a = strstr(text, from);
    assert_non_null(a);
    const char *b = strstr(a, to);
    assert_non_null(b);
    size_t n = (size_t)(b - a);
    char *out = malloc(n + 1);
    assert_non_null(out);
    memcpy(out, a, n);
    out[n] = '\0';
    return out;
}

/* dist.gof.spec-pair folds 336 bins into an "others" of 89,948 samples
 * against 3,585 in its largest own bin: that bar is cut at the top of the
 * axis with a break and its count, and sets no scale; a plot without a
 * folded bin has nothing cut. */
static void test_folded_bar_does_not_set_the_scale(void **state)
{
    (void)state;
    cJSON *r = load_fixture("reports/sample-run.json");
    char *html = render(r, true);
    char *plot = between(html, "aria-label=\"Bins of dist.gof.spec-pair\"", "</svg>");
    expect_in("spec-pair's plot", plot, "class=\"bar folded capped\"");
    expect_in("spec-pair's plot", plot, "class=\"break\"");
    expect_in("spec-pair's plot", plot, ">89948 &#8593;</text>");
    /* The axis is the own bins': its top tick is 3500 or so, not 90,000. */
    expect_not_in("spec-pair's plot", plot, ">80000<");
    free(plot);
    plot = between(html, "aria-label=\"Bins of dist.gof.first\"", "</svg>");
    expect_not_in("dist.gof.first's plot", plot, "capped");
    free(plot);
    assay_free(html);
    cJSON_Delete(r);
}

/* The stamp: one row a part, every field in a closed <details>, and there
 * each fact once (the weights' hash and the parameter count sit twice in
 * the stamp's JSON). */
static void test_stamp_collapsed(void **state)
{
    (void)state;
    cJSON *r = load_fixture("reports/sample-run.json");
    char *html = render(r, true);
    char *stamp = between(html, "<section id=\"stamp\">", "</section>");
    expect_in("stamp", stamp, "<table class=\"stamp-summary\">");
    expect_in("stamp", stamp, "<details class=\"stamp-all\">");
    expect_not_in("stamp", stamp, "<details class=\"stamp-all\" open");
    char *all = between(stamp, "<details", "</details>");
    const char *sha = assay_json_str(r, "stamp.engine.model.weights_sha256", "?");
    assert_int_equal(count(all, sha), 1);
    assert_int_equal(count(all, ">5838080<"), 1);
    expect_in("stamp's details", all, "repeated elsewhere in it left out");
    free(all);
    free(stamp);
    assay_free(html);
    cJSON_Delete(r);
}

/* Where each view first shows the seed's table, it says what it is; and
 * the mentions before it in the page link to it. */
static void test_seed_table_explained(void **state)
{
    (void)state;
    cJSON *r = load_fixture("reports/sample-run.json");
    char *html = render(r, true);
    char *md = render(r, false);
    char *section = between(html, "<section id=\"seed-table\">", "<table>");
    expect_in("seed's table section", section, "The seed&#39;s table is the table of the book chapter");
    free(section);
    char *md_section = between(md, "## The seed's table", "| Generator");
    expect_in("Markdown's seed table", md_section, ASSAY_REPORT_SEED_TABLE_ABOUT);
    free(md_section);
    char *bench = between(html, "<section id=\"benchmark\">", "</section>");
    if (strstr(bench, "seed&rsquo;s table") != NULL) {
        expect_in("benchmark section", bench, "<a href=\"#seed-table\">the seed&rsquo;s table</a>");
    }
    free(bench);
    assay_free(html);
    assay_free(md);
    cJSON_Delete(r);
}

/* The benchmark's section and the run's note agree on the load: above the
 * capacity the seed's table measured, requests queued; the note's
 * headroom is the SLO's. An achieved rate below the offered one is not
 * taken for saturation (over a finite workload it counts the drain). */
static void test_load_said_once(void **state)
{
    (void)state;
    cJSON *r = load_fixture("reports/sample-run.json");
    char *html = render(r, true);
    expect_in("page", html, "<b>Above capacity:</b> 44.1 req/s offered, more than the 22.1 req/s");
    expect_in("page", html, "headroom under the SLO. It is above the 22.05 req/s");
    expect_not_in("page", html, "Saturated");
    expect_not_in("page", html, "a load with headroom");
    expect_in("page", html, "whether or not a queue built");
    assay_free(html);
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItem(r, "seed_table"), "capacity",
                                           cJSON_CreateNumber(1000));
    html = render(r, true);
    expect_in("page", html, "<b>Below capacity:</b> 44.1 req/s offered, less than the 1e+03 req/s");
    expect_not_in("page", html, "Above capacity");
    assay_free(html);
    cJSON_Delete(r);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare_states_its_verdict),
        cmocka_unit_test(test_mostly_skipped),
        cmocka_unit_test(test_require_checks),
        cmocka_unit_test(test_folded_bar_does_not_set_the_scale),
        cmocka_unit_test(test_stamp_collapsed),
        cmocka_unit_test(test_seed_table_explained),
        cmocka_unit_test(test_load_said_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
