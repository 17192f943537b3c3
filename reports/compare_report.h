/*
 * compare_report.h - the "compare" member of a report made by `assay
 * compare BASELINE CANDIDATE`, and what is rendered from it: a section of
 * the HTML and Markdown reports, the short Markdown summary a CI job posts
 * on a pull request, and JUnit XML for CI systems.
 *
 * A report of command "compare" carries the correctness checks of the
 * candidate in "checks" (as every report does: "verdict" and "counts" are
 * theirs) and this member (format "assay-compare", version 1; README.md
 * "The report" lists every field):
 *
 *   {"format": "assay-compare", "version": 1,
 *    "baseline" | "candidate": {"spec", "name", "model_name", "weights_sha256"},
 *    "weights": where the oracle's weights came from, or null,
 *    "verdict": {"correct": true | false | null (a check could not run, or
 *                           none was run),
 *                "failed_checks": [name, ...], "speed": a speed verdict
 *                (bench/speedup.h) or "not measured", "exit_status": 0-3,
 *                "headline": the five-second line},
 *    "reproducers": [{"check", "command", "workload" (file | null),
 *                     "shrunk": "requests 20 -> 1, ...", "confirmed"}],
 *    "speed": null (not measured) | {
 *        "pairs", "pairs_requested", "candidate_first": [bool per pair],
 *        "order": the interleaving in words, "confidence", "threshold",
 *        "interval": how the intervals were made, "bootstrap": {"unit",
 *        "replicates", "seed"}, "verdict", "status" ("ok" or why the runs
 *        stopped), "workload", "slo": {"ttft_s", "tpot_s"} | null,
 *        "metrics": [{"name", "label", "unit", "lower_is_better",
 *                     "baseline", "candidate", "ratio", "ci_low",
 *                     "ci_high", "n_baseline", "n_candidate", "compared",
 *                     "change" ("better" | "worse" | "same"),
 *                     "significant", "regression", "gated"}],
 *        "baseline_bench", "candidate_bench": "assay-bench" objects
 *                     (bench/metrics.h) of each engine's runs}}
 *
 * Every number that does not exist (a ratio over a zero, an interval
 * that cannot be made) is null.
 */
#ifndef ASSAY_COMPARE_REPORT_H
#define ASSAY_COMPARE_REPORT_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "../adapters/adapter.h"
#include "../bench/speedup.h"
#include "../checks/result.h"
#include "../checks/shrink.h"
#include "../core/status.h"
#include "../core/workload.h"
#include "text.h"

#define ASSAY_COMPARE_REPORT_VERSION 1

/* One shrunk reproducer of a failed check. */
struct assay_compare_repro {
    const char *check;
    const struct assay_shrink_result *shrunk;
};

/* What the "compare" member is made from (everything borrowed for the
 * call). */
struct assay_compare_facts {
    const char *baseline_spec, *candidate_spec;
    const struct assay_adapter_info *baseline, *candidate;
    const char *weights;                      /* "" or NULL: none */
    const struct assay_check_result *checks;  /* the correctness checks run */
    size_t n_checks;
    const struct assay_compare_repro *repros;
    size_t n_repros;
    const struct assay_speedup_result *speed; /* NULL: not measured */
    const struct assay_workload *workload;    /* the speed workload (may be NULL) */
    int exit_status;                          /* what the command returns */
};

/*
 * The "compare" object (see the header comment), with its headline.
 * *out owns it; ASSAY_ERR_NOMEM (*out NULL).
 */
enum assay_status assay_report_compare_json(const struct assay_compare_facts *f, cJSON **out);

/* Check a "compare" member (an object; absent or null is the caller's
 * business): ASSAY_OK or ASSAY_ERR_PARSE with diag naming the field
 * ("compare.speed.metrics[2].ratio"). */
enum assay_status assay_report_compare_validate(const cJSON *compare, struct assay_diag *diag);

/* Append the comparison's section (the headline, the speed table with its
 * intervals, the reproducers) to a rendering of report r; nothing when r
 * has no "compare" object. */
void assay_report_compare_markdown(struct assay_text *t, const cJSON *r);
void assay_report_compare_html(struct assay_text *t, const cJSON *r);

/*
 * The pull-request comment: the headline, the correctness table, the
 * speed table, each failure with its shrunk reproducer, and how the
 * figures were made, in GitHub-flavoured Markdown. r must be a valid
 * report with a "compare" object. *out (assay_free) holds len bytes;
 * ASSAY_ERR_NOMEM.
 */
enum assay_status assay_report_compare_summary(const cJSON *r, char **out, size_t *len);

/*
 * JUnit XML: a testsuite "correctness" with one testcase per check
 * (failure with its reproducer, error, skipped) and a testsuite "speed"
 * with one testcase per compared figure (a failure for a regression). r as
 * above. *out (assay_free) holds len bytes; ASSAY_ERR_NOMEM.
 */
enum assay_status assay_report_compare_junit(const cJSON *r, char **out, size_t *len);

#endif
