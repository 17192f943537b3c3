/*
 * outcome.h - what a run came to, said the same way by the terminal, the
 * Markdown and the HTML: the line of counts (and whether most checks were
 * only skipped), the checks the run had to have (--require-checks), and the
 * exit status the command ended with, which `assay report` ends with again.
 *
 * Two members of a report (reports/report.h) hold it; both are optional, as
 * a report written by an older assay lacks them:
 *
 *   "require_checks": null | {"given": "20" or "50%", "needed": checks that
 *                     had to run (PASS or FAIL), "ran": those that did,
 *                     "met": ran >= needed}
 *   "exit_status":    0..4, the command's (enum assay_exit)
 *
 * Usage:
 *     struct assay_counts c;
 *     assay_counts_of_results(results, n, &c);
 *     char line[200];
 *     puts(assay_counts_line(&c, line, sizeof line));
 *     ...
 *     assay_report_set_outcome(report, "20", assay_require_needed(&rq, c.checks), status);
 *     int again = assay_report_exit_status(report);
 */
#ifndef ASSAY_OUTCOME_H
#define ASSAY_OUTCOME_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../checks/result.h"
#include "../core/status.h"

/* The exit statuses of the assay command, in the order one outranks the
 * next when several apply: a failed check, then an input error or a check
 * that could not run, then too few checks run, then a speed regression. */
enum assay_exit {
    ASSAY_EXIT_OK = 0,         /* everything checked passed */
    ASSAY_EXIT_FAIL = 1,       /* a check failed */
    ASSAY_EXIT_USAGE = 2,      /* bad usage or bad input (file, spec, option), or a
                                  check or part that could not run */
    ASSAY_EXIT_REGRESSION = 3, /* compare: a significant performance regression */
    ASSAY_EXIT_TOO_FEW = 4,    /* fewer checks ran (PASS or FAIL) than --require-checks */
};

/* How many checks there were of each verdict. */
struct assay_counts {
    int64_t checks, pass, fail, skip, error;
};

void assay_counts_of_results(const struct assay_check_result *r, size_t n, struct assay_counts *out);
/* From a report's "counts" (zeros where a member is missing). */
void assay_counts_of_report(const cJSON *report, struct assay_counts *out);

/* The checks that ran: PASS or FAIL. A SKIP checked nothing, and an ERROR
 * could not run. */
int64_t assay_counts_ran(const struct assay_counts *c);

/* More checks were skipped than ran: the run's PASS says little. */
bool assay_counts_mostly_skipped(const struct assay_counts *c);

/* "33 checks: 4 passed, 0 failed, 29 skipped, 0 could not run", and when
 * most were skipped "; MOSTLY SKIPPED: only 4 of the 33 checks ran". Into
 * buf; returns buf. */
char *assay_counts_line(const struct assay_counts *c, char *buf, size_t size);

/* --require-checks: at least `value` checks (a share of the run's checks,
 * in percent, when percent) must have run. */
struct assay_require {
    bool given;
    bool percent;
    double value;  /* > 0; a count is a whole number */
    char text[32]; /* as given: "20", "50%" */
};

/* Parse "N" (a whole number >= 1) or "P%" (0 < P <= 100) into *out;
 * ASSAY_ERR_PARSE when it is neither (out unchanged). */
enum assay_status assay_require_parse(const char *text, struct assay_require *out);

/* The checks that must run among n_checks: the count, or the share
 * rounded up (50% of 33 is 17). 0 when not given. */
int64_t assay_require_needed(const struct assay_require *rq, int64_t n_checks);

/* The exit status of a set of results alone: FAIL if any failed, USAGE if
 * any could not run, TOO_FEW if fewer than rq requires ran, else OK. */
int assay_outcome_exit_status(const struct assay_counts *c, const struct assay_require *rq);

/* Record the command's exit status and, when rq was given (given_text not
 * NULL), what it required of the report's checks. ASSAY_ERR_NOMEM. */
enum assay_status assay_report_set_outcome(cJSON *report, const char *given_text, int64_t needed,
                                           int exit_status);

/* The exit status a report stands for: the one its command recorded, else
 * (an older report) compare's verdict's, else the verdict's (FAIL 1,
 * ERROR 2, otherwise 0). */
int assay_report_exit_status(const cJSON *report);

/* A report's verdict in words, for a title and a banner: compare's
 * correctness and speed ("CORRECTNESS NOT CHECKED, REGRESSION"), or the
 * verdict with what qualifies it ("PASS, TOO FEW CHECKS RAN", "PASS,
 * MOSTLY SKIPPED"). Into buf; returns buf. */
char *assay_report_title(const cJSON *report, char *buf, size_t size);

/* What --require-checks asked of the report, as a sentence ("--require-checks
 * 20: 4 checks ran (PASS or FAIL), 20 had to: too few"), or "" when it
 * asked nothing. Into buf; returns buf. */
char *assay_report_require_text(const cJSON *report, char *buf, size_t size);

/* What an exit status means, in a few words ("a check failed"). */
const char *assay_exit_status_str(int status);

/* One row of a verdict table: one check, or every SKIP that shares the
 * first one's reason (n of them). */
struct assay_check_row {
    const cJSON *check;
    int32_t n;
};

/* The report's checks as rows, in the order a reader looks for them: FAIL,
 * then ERROR, then PASS, each in plan order, then the SKIPs, those with
 * one reason in one row (where its first check stood), so that a plan
 * mostly skipped on an engine does not bury its failures. rows holds cap;
 * returns the number of rows. */
size_t assay_report_check_rows(const cJSON *report, struct assay_check_row *rows, size_t cap);

/* Whether check is one of row's: the row's check itself, or a SKIP with
 * its reason. */
bool assay_check_row_has(const struct assay_check_row *row, const cJSON *check);

/* Check the two members when present: ASSAY_OK or ASSAY_ERR_PARSE with
 * diag naming the field. */
enum assay_status assay_report_outcome_validate(const cJSON *report, struct assay_diag *diag);

#endif
