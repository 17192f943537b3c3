/*
 * outcome.c - what a run came to (outcome.h). Each view of a report asks
 * for the title, the counts line and the exit status once per rendering;
 * the CLI asks once per command.
 */
#include "outcome.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/json_out.h"
#include "schema.h"

void assay_counts_of_results(const struct assay_check_result *r, size_t n, struct assay_counts *out)
{
    memset(out, 0, sizeof *out);
    out->checks = (int64_t)n;
    for (size_t i = 0; i < n; i++) {
        out->pass += r[i].verdict == ASSAY_VERDICT_PASS;
        out->fail += r[i].verdict == ASSAY_VERDICT_FAIL;
        out->skip += r[i].verdict == ASSAY_VERDICT_SKIP;
        out->error += r[i].verdict == ASSAY_VERDICT_ERROR;
    }
}

static int64_t count_of(const cJSON *report, const char *path)
{
    double v = assay_json_num(report, path);
    return isfinite(v) && v >= 0 ? (int64_t)v : 0;
}

void assay_counts_of_report(const cJSON *report, struct assay_counts *out)
{
    out->checks = count_of(report, "counts.checks");
    out->pass = count_of(report, "counts.pass");
    out->fail = count_of(report, "counts.fail");
    out->skip = count_of(report, "counts.skip");
    out->error = count_of(report, "counts.error");
}

int64_t assay_counts_ran(const struct assay_counts *c)
{
    return c->pass + c->fail;
}

bool assay_counts_mostly_skipped(const struct assay_counts *c)
{
    return c->skip > assay_counts_ran(c);
}

char *assay_counts_line(const struct assay_counts *c, char *buf, size_t size)
{
    int n = snprintf(buf, size,
                     "%lld checks: %lld passed, %lld failed, %lld skipped, %lld could not run",
                     (long long)c->checks, (long long)c->pass, (long long)c->fail,
                     (long long)c->skip, (long long)c->error);
    if (n >= 0 && (size_t)n < size && assay_counts_mostly_skipped(c)) {
        snprintf(buf + n, size - (size_t)n, "; MOSTLY SKIPPED: only %lld of the %lld checks ran",
                 (long long)assay_counts_ran(c), (long long)c->checks);
    }
    return buf;
}

enum assay_status assay_require_parse(const char *text, struct assay_require *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno != 0 || !isfinite(v) || text[0] == '-' || text[0] == '+') {
        return ASSAY_ERR_PARSE;
    }
    bool percent = *end == '%';
    if (percent) {
        end++;
    }
    if (*end != '\0' || !(v > 0) || (percent && v > 100) ||
        (!percent && (v != floor(v) || v > 1e9)) || strlen(text) >= sizeof out->text) {
        return ASSAY_ERR_PARSE;
    }
    out->given = true;
    out->percent = percent;
    out->value = v;
    snprintf(out->text, sizeof out->text, "%s", text);
    return ASSAY_OK;
}

int64_t assay_require_needed(const struct assay_require *rq, int64_t n_checks)
{
    if (rq == NULL || !rq->given) {
        return 0;
    }
    if (!rq->percent) {
        return (int64_t)rq->value;
    }
    /* The share rounded up, with a little room for the decimal fraction
     * that 100 * k / n leaves (29% of 100 must need 29, not 30). */
    return (int64_t)ceil(rq->value * (double)n_checks / 100.0 - 1e-9);
}

int assay_outcome_exit_status(const struct assay_counts *c, const struct assay_require *rq)
{
    if (c->fail > 0) {
        return ASSAY_EXIT_FAIL;
    }
    if (c->error > 0) {
        return ASSAY_EXIT_USAGE;
    }
    if (rq != NULL && rq->given && assay_counts_ran(c) < assay_require_needed(rq, c->checks)) {
        return ASSAY_EXIT_TOO_FEW;
    }
    return ASSAY_EXIT_OK;
}

/* Replace or add member key, taking value (deleted on failure). */
static bool set_member(cJSON *o, const char *key, cJSON *value)
{
    if (cJSON_GetObjectItemCaseSensitive(o, key) != NULL) {
        if (!cJSON_ReplaceItemInObjectCaseSensitive(o, key, value)) {
            cJSON_Delete(value);
            return false;
        }
        return true;
    }
    if (!cJSON_AddItemToObject(o, key, value)) {
        cJSON_Delete(value);
        return false;
    }
    return true;
}

enum assay_status assay_report_set_outcome(cJSON *report, const char *given_text, int64_t needed,
                                           int exit_status)
{
    cJSON *req = NULL;
    if (given_text != NULL) {
        struct assay_counts c;
        assay_counts_of_report(report, &c);
        req = cJSON_CreateObject();
        if (req == NULL || !assay_json_add_str(req, "given", given_text) ||
            !assay_json_add_num(req, "needed", (double)needed) ||
            !assay_json_add_num(req, "ran", (double)assay_counts_ran(&c)) ||
            !assay_json_add_bool(req, "met", assay_counts_ran(&c) >= needed)) {
            cJSON_Delete(req);
            return ASSAY_ERR_NOMEM;
        }
    }
    if (req == NULL) {
        req = cJSON_CreateNull();
    }
    cJSON *status = cJSON_CreateNumber(exit_status);
    if (req == NULL || status == NULL) {
        cJSON_Delete(req);
        cJSON_Delete(status);
        return ASSAY_ERR_NOMEM;
    }
    bool ok = set_member(report, "require_checks", req);
    return ok && set_member(report, "exit_status", status) ? ASSAY_OK : ASSAY_ERR_NOMEM;
}

int assay_report_exit_status(const cJSON *report)
{
    double recorded = assay_json_num(report, "exit_status");
    if (isfinite(recorded)) {
        return (int)recorded;
    }
    double compared = assay_json_num(report, "compare.verdict.exit_status");
    if (isfinite(compared)) {
        return (int)compared;
    }
    const char *verdict = assay_json_str(report, "verdict", "NONE");
    return strcmp(verdict, "FAIL") == 0    ? ASSAY_EXIT_FAIL
           : strcmp(verdict, "ERROR") == 0 ? ASSAY_EXIT_USAGE
                                           : ASSAY_EXIT_OK;
}

/* compare's correctness and speed in capitals: "CORRECT, FASTER",
 * "CORRECTNESS NOT CHECKED, REGRESSION", "INCORRECT, SPEED NOT MEASURED". */
static char *compare_title(const cJSON *cmp, char *buf, size_t size)
{
    int correct = assay_json_bool(cmp, "verdict.correct");
    const char *speed = assay_json_str(cmp, "verdict.speed", "not measured");
    char upper[64];
    snprintf(upper, sizeof upper, "%s%s", strcmp(speed, "not measured") == 0 ? "speed " : "",
             speed);
    for (char *p = upper; *p != '\0'; p++) {
        *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
    }
    snprintf(buf, size, "%s, %s",
             correct == 1   ? "CORRECT"
             : correct == 0 ? "INCORRECT"
                            : "CORRECTNESS NOT CHECKED",
             upper);
    return buf;
}

char *assay_report_title(const cJSON *report, char *buf, size_t size)
{
    const cJSON *cmp = cJSON_GetObjectItemCaseSensitive(report, "compare");
    if (cJSON_IsObject(cmp)) {
        compare_title(cmp, buf, size);
    } else {
        snprintf(buf, size, "%s", assay_json_str(report, "verdict", "NONE"));
    }
    struct assay_counts c;
    assay_counts_of_report(report, &c);
    size_t n = strlen(buf);
    if (assay_json_bool(report, "require_checks.met") == 0) {
        snprintf(buf + n, size - n, ", TOO FEW CHECKS RAN");
    } else if (c.checks > 0 && assay_counts_mostly_skipped(&c)) {
        snprintf(buf + n, size - n, ", MOSTLY SKIPPED");
    }
    return buf;
}

char *assay_report_require_text(const cJSON *report, char *buf, size_t size)
{
    const cJSON *rq = cJSON_GetObjectItemCaseSensitive(report, "require_checks");
    if (!cJSON_IsObject(rq)) {
        snprintf(buf, size, "%s", "");
        return buf;
    }
    double ran = assay_json_num(rq, "ran"), needed = assay_json_num(rq, "needed");
    snprintf(buf, size, "--require-checks %s: %g checks ran (PASS or FAIL), %g had to%s",
             assay_json_str(rq, "given", "?"), ran, needed,
             assay_json_bool(rq, "met") == 1 ? "" : ": too few");
    return buf;
}

const char *assay_exit_status_str(int status)
{
    switch (status) {
    case ASSAY_EXIT_OK: return "everything checked passed";
    case ASSAY_EXIT_FAIL: return "a check failed";
    case ASSAY_EXIT_USAGE: return "a check or a part could not run, or bad input";
    case ASSAY_EXIT_REGRESSION: return "a significant speed regression";
    case ASSAY_EXIT_TOO_FEW: return "too few checks ran for --require-checks";
    }
    return "an unknown status";
}

static bool is_skip(const cJSON *c)
{
    return strcmp(assay_json_str(c, "verdict", ""), "SKIP") == 0;
}

bool assay_check_row_has(const struct assay_check_row *row, const cJSON *check)
{
    return check == row->check ||
           (row->n > 1 && is_skip(check) && is_skip(row->check) &&
            strcmp(assay_json_str(check, "failure", ""), assay_json_str(row->check, "failure", "")) ==
                0);
}

size_t assay_report_check_rows(const cJSON *report, struct assay_check_row *rows, size_t cap)
{
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(report, "checks");
    static const char *const order[] = {"FAIL", "ERROR", "PASS", "SKIP"};
    size_t n = 0;
    for (int k = 0; k < 4; k++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, checks)
        {
            if (strcmp(assay_json_str(c, "verdict", ""), order[k]) != 0) {
                continue;
            }
            if (k == 3) {
                /* A SKIP joins the row of the first SKIP with its reason. */
                bool joined = false;
                for (size_t i = 0; i < n && !joined; i++) {
                    struct assay_check_row probe = {rows[i].check, 2};
                    if (is_skip(rows[i].check) && assay_check_row_has(&probe, c)) {
                        rows[i].n++;
                        joined = true;
                    }
                }
                if (joined) {
                    continue;
                }
            }
            if (n < cap) {
                rows[n++] = (struct assay_check_row){c, 1};
            }
        }
    }
    return n;
}

enum assay_status assay_report_outcome_validate(const cJSON *report, struct assay_diag *diag)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(report, "exit_status");
    if (st != NULL) {
        double v = cJSON_IsNumber(st) ? st->valuedouble : NAN;
        if (!(v >= ASSAY_EXIT_OK && v <= ASSAY_EXIT_TOO_FEW && v == floor(v))) {
            assay_diag_set(diag, NULL, "exit_status", "an exit status, 0..4", "%s",
                           cJSON_IsNumber(st) ? "another number" : assay_json_item_kind(st));
            return ASSAY_ERR_PARSE;
        }
    }
    const cJSON *rq = cJSON_GetObjectItemCaseSensitive(report, "require_checks");
    if (rq != NULL && !cJSON_IsNull(rq)) {
        static const struct assay_json_field fields[] = {
            {"given", ASSAY_JSON_STRING}, {"needed", ASSAY_JSON_NUMBER},
            {"ran", ASSAY_JSON_NUMBER},   {"met", ASSAY_JSON_BOOL},
        };
        if (!cJSON_IsObject(rq)) {
            assay_diag_set(diag, NULL, "require_checks", "an object or null", "%s",
                           assay_json_item_kind(rq));
            return ASSAY_ERR_PARSE;
        }
        enum assay_status s = assay_json_require(rq, "require_checks", fields,
                                                 sizeof fields / sizeof fields[0], diag);
        if (s != ASSAY_OK) {
            return s;
        }
        struct assay_counts c;
        assay_counts_of_report(report, &c);
        if (assay_json_num(rq, "ran") != (double)assay_counts_ran(&c)) {
            assay_diag_set(diag, NULL, "require_checks.ran",
                           "the checks that passed or failed (counts.pass + counts.fail)", "%g",
                           assay_json_num(rq, "ran"));
            return ASSAY_ERR_PARSE;
        }
    }
    return ASSAY_OK;
}
