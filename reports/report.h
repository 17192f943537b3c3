/*
 * report.h - the JSON report, which is the truth: building, checking,
 * reading and printing it.
 *
 * A report is a cJSON object of schema "assay-report", version 1
 * (ASSAY_REPORT_VERSION; every field, its type and unit are documented in
 * README.md, "The report"):
 *
 *   {"schema": "assay-report", "version": 1,
 *    "command": "run" | "bench" | ..., "command_line": "assay run --quick",
 *    "created_utc": ISO 8601, "duration_s": wall seconds | null,
 *    "verdict": "PASS" | "FAIL" | "ERROR" | "NONE",
 *    "counts": {"checks", "pass", "fail", "skip", "error"},
 *    "stamp": the stamp (reports/stamp.h),
 *    "verify": {"base_spec", "master_seed", "plan_size"} | null,
 *    "checks": [check, ...],
 *    "benchmark": the bench module's "assay-bench" object | null,
 *    "seed_table": the "assay-seedtable" object + "explanation" | null,
 *    "rate_sweep": an "assay-sweep" object | null,
 *    "notes": [string, ...]}
 *
 * The HTML (reports/html.h) and Markdown (reports/markdown.h) renderings
 * are computed from this object alone, so `assay report FILE.json`
 * regenerates them from a saved file. The overall verdict: FAIL when any
 * check failed, else ERROR when any could not run, else PASS when at least
 * one check ran (skips are listed, they do not fail a run), else NONE (a
 * benchmark alone).
 *
 * The renderers read this module (the verdict, a check's figures, the seed
 * table's paragraph); writing a report and its renderings to files is
 * reports/write.h, above both.
 *
 * Usage:
 *     cJSON *r;
 *     assay_report_create("run", "assay run", &r);
 *     assay_report_set(r, "stamp", stamp);          // takes ownership
 *     assay_report_add_checks(r, results, n);
 *     assay_report_write_all(r, "out", "report", &paths, &diag);  // write.h
 *     cJSON_Delete(r);
 */
#ifndef ASSAY_REPORT_H
#define ASSAY_REPORT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "../bench/metrics.h"
#include "../bench/seedtable.h"
#include "../checks/result.h"
#include "../core/status.h"
#include "../core/workload.h"

#define ASSAY_REPORT_SCHEMA "assay-report"
#define ASSAY_REPORT_VERSION 1
#define ASSAY_SWEEP_SCHEMA_VERSION 1

/*
 * A new, empty report for `command` (its "command_line" is the line that
 * ran it; both copied): verdict NONE, no checks, stamp/verify/benchmark/
 * seed_table/rate_sweep null, no notes, created_utc now. On success *out
 * owns it (cJSON_Delete); ASSAY_ERR_NOMEM (*out NULL).
 */
enum assay_status assay_report_create(const char *command, const char *command_line,
                                      cJSON **out);

/*
 * Replace the top-level member `key` with value, taking ownership of value
 * (also on failure, when it is deleted). NULL value sets JSON null.
 * ASSAY_ERR_NOMEM.
 */
enum assay_status assay_report_set(cJSON *report, const char *key, cJSON *value);

/* The check object of one result (see README): name, family, verdict,
 * engine, workload, summary, failure, repro, seconds and "figures" (the
 * family's: NaN figures are null). *out owns it; ASSAY_ERR_NOMEM. */
enum assay_status assay_report_check_json(const struct assay_check_result *r, cJSON **out);

/* Append n check results and recompute "counts" and "verdict".
 * ASSAY_ERR_NOMEM (the checks appended so far stay). */
enum assay_status assay_report_add_checks(cJSON *report, const struct assay_check_result *r,
                                          size_t n);

/* Append a note (one sentence for people: a limit, a warning).
 * ASSAY_ERR_NOMEM. */
enum assay_status assay_report_add_note(cJSON *report, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * The seed table as the report holds it: the bench module's
 * assay_seedtable_to_json object plus "explanation", one paragraph that
 * reads the table (which rows to compare, how far apart their tails are,
 * and why). w may be NULL. *out owns it; ASSAY_ERR_NOMEM.
 */
enum assay_status assay_report_seedtable_json(const struct assay_seedtable *t,
                                              const struct assay_workload *w, cJSON **out);

/* What "the seed's table" is, said where a view first names it: the name
 * comes from the seed of assay's design, a book chapter on benchmarking a
 * serving stack, whose table this is. */
#define ASSAY_REPORT_SEED_TABLE_ABOUT                                                              \
    "The seed's table is the table of the book chapter assay's benchmark follows (the seed "    \
    "of its design, on benchmarking a serving stack): one engine and one workload under two "    \
    "load generators, an open loop that keeps arriving on its schedule, offered above the "      \
    "engine's capacity, and closed loops of a few workers, which wait for each answer before "    \
    "asking again. The closed loop slows its own arrivals to what the engine sustains, so its "   \
    "tail hides the queue the open loop shows."

/* The paragraph alone, computed from a seed-table JSON object, into buf
 * (always NUL-terminated). Returns buf. */
char *assay_report_seedtable_explain(const cJSON *seed_table, char *buf, size_t size);

/*
 * A rate sweep as JSON, schema "assay-sweep" version 1:
 * {"format", "version", "target", "slo": {"ttft_s", "tpot_s"},
 *  "arrival", "seed", "start_rate", "min_rate", "max_rate", "max_probes",
 *  "rel_tol", "best_rate" (null: none passed), "fail_rate" (null: none
 *  failed), "bracketed", "status" ("ok" or why it stopped),
 *  "probes": [{"rate", "goodput_fraction", "pass"}], "explanation"}.
 * Rates in requests/s. *out owns it; ASSAY_ERR_NOMEM.
 */
enum assay_status assay_report_sweep_json(const struct assay_sweep_result *s,
                                          const struct assay_sweep_params *p,
                                          const struct assay_slo *slo, enum assay_status status,
                                          cJSON **out);

/* One line of a check object's figures for tables, by family:
 * equivalence "max |logit diff| 2.2e-05, tie tol 0.001, 0 ties (max gap 0)",
 * distributional "p 0.96 (Holm 1), n 70000, alpha 1e-06, min TV 0.0175 at
 * power 0.99" and, when one fired, "; fired: the hard rule only (the statistic
 * passes)", "...the hard rule and the statistic" or "...the statistic",
 * property "131 steps, 133 invariant checks". Into buf;
 * returns buf. */
char *assay_report_check_figures(const cJSON *check, char *buf, size_t size);

/* For a distributional check object that FAILed, what fired
 * (assay_check_fired_str: "rule only", "rule and statistic", "statistic");
 * "" otherwise or when the report predates the two fields. Static. */
const char *assay_report_check_fired(const cJSON *check);

/* The overall verdict string of a report ("PASS", ...; "NONE" when the
 * member is missing) - borrowed from the report. */
const char *assay_report_verdict(const cJSON *report);

/*
 * Check a report against the schema: every required member with its type,
 * "schema" == "assay-report", "version" == 1 (another version: regenerate
 * the report with this assay, or re-render it with the assay that wrote
 * it), the stamp (assay_stamp_validate), each check, and the benchmark,
 * seed table and sweep when present. Returns ASSAY_OK or ASSAY_ERR_PARSE
 * with diag naming the field ("checks[3].verdict"), what was expected and
 * what was found.
 */
enum assay_status assay_report_validate(const cJSON *report, struct assay_diag *diag);

/* Parse and validate report text; `file` names it in diag (may be NULL).
 * Malformed JSON is reported at its byte offset. *out owns the object on
 * ASSAY_OK, is NULL otherwise; ASSAY_ERR_PARSE, ASSAY_ERR_NOMEM. */
enum assay_status assay_report_parse(const char *text, size_t len, const char *file, cJSON **out,
                                     struct assay_diag *diag);

/* The whole of a file, into *text (assay_free) and *len: ASSAY_ERR_IO with
 * diag naming the file and why, ASSAY_ERR_NOMEM. */
enum assay_status assay_report_read_text(const char *path, char **text, size_t *len,
                                        struct assay_diag *diag);

/* Read, parse and validate a report file: ASSAY_ERR_IO when it cannot be
 * read, else as assay_report_parse. */
enum assay_status assay_report_load(const char *path, cJSON **out, struct assay_diag *diag);

/* The report's canonical text (formatted JSON and a final newline), into
 * *out (assay_free) and *len. ASSAY_ERR_NOMEM. */
enum assay_status assay_report_print(const cJSON *report, char **out, size_t *len);

#endif
