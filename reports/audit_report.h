/*
 * audit_report.h - the "audit" member of a report made by `assay audit`,
 * and its renderings.
 *
 * A report of command "audit" carries the audit's checks in "checks" (as
 * every report does), the server's open-loop benchmark in "benchmark", and
 * this member (format "assay-audit", version 1; README.md "The report"):
 *
 *   {"format": "assay-audit", "version": 1,
 *    "server": {"url", "api" ("completion" | "v1"), "spec"},
 *    "model": {"path", "name", "n_params", "weights_sha256"},
 *    "bundled_spec": the bundled engine of the two-sample test and the
 *                    comparison,
 *    "quick": bool, "seed": master seed, "eos_token": id | null,
 *    "tie_tol", "logprob_tol": the tolerances, in logits / logprobs,
 *    "sampling_order": "sequential" | "joint" (what the oracle applied),
 *    "findings": [sentence, ...]: what the server did differently from the
 *                the oracle, or what could not be seen,
 *    "metrics": {"status": "" or why /metrics could not be read,
 *                "gauges": [{"name", "kind" ("requests" | "kv"), "present",
 *                            "idle", "after"}]},
 *    "comparison": an "assay-versus" object (bench/versus.h) | null}
 *
 * Reports of other commands have no "audit" member (or null).
 */
#ifndef ASSAY_AUDIT_REPORT_H
#define ASSAY_AUDIT_REPORT_H

#include <cjson/cJSON.h>

#include "../checks/audit.h"
#include "../core/status.h"
#include "text.h"

#define ASSAY_AUDIT_REPORT_VERSION 1

/*
 * The "audit" object for audit a, taking ownership of comparison (may be
 * NULL: null; deleted on failure too). *out owns the object;
 * ASSAY_ERR_NOMEM.
 */
enum assay_status assay_report_audit_json(const struct assay_audit *a, cJSON *comparison,
                                          cJSON **out);

/* Check an "audit" member (an object; null is checked by the caller):
 * ASSAY_OK or ASSAY_ERR_PARSE with diag naming the field ("audit.model"). */
enum assay_status assay_report_audit_validate(const cJSON *audit, struct assay_diag *diag);

/* Append the audit's sections to a rendering of report r (nothing when r
 * has no audit object): what passed, failed and could not be checked and
 * why, the findings, the side-by-side benchmark, the server's gauges. */
void assay_report_audit_markdown(struct assay_text *t, const cJSON *r);
void assay_report_audit_html(struct assay_text *t, const cJSON *r);

#endif
