/*
 * report.c - the JSON report, which is the truth (report.h): creating one
 * and setting its members, a check result's JSON, notes, the seed table
 * and sweep members, validating a report member by member, and loading,
 * parsing and printing one. Every command that writes a report builds it
 * here; `assay report` and the renderers read reports through it.
 */
#include "report.h"
#include "outcome.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/clock.h"
#include "schema.h"
#include "stamp.h"
#include "audit_report.h"
#include "compare_report.h"
#include "text.h"
#include "../core/json_out.h"

/* ---- building ------------------------------------------------------------ */

enum assay_status assay_report_create(const char *command, const char *command_line, cJSON **out)
{
    *out = NULL;
    char when[40];
    cJSON *r = cJSON_CreateObject();
    cJSON *counts = NULL;
    bool ok = r != NULL && assay_json_add_str(r, "schema", ASSAY_REPORT_SCHEMA) &&
              assay_json_add_num(r, "version", ASSAY_REPORT_VERSION) && assay_json_add_str(r, "command", command) &&
              assay_json_add_str(r, "command_line", command_line) &&
              assay_json_add_str(r, "created_utc", assay_utc_iso8601(when, sizeof when)) &&
              cJSON_AddNullToObject(r, "duration_s") != NULL && assay_json_add_str(r, "verdict", "NONE") &&
              (counts = cJSON_AddObjectToObject(r, "counts")) != NULL &&
              assay_json_add_num(counts, "checks", 0) && assay_json_add_num(counts, "pass", 0) &&
              assay_json_add_num(counts, "fail", 0) && assay_json_add_num(counts, "skip", 0) &&
              assay_json_add_num(counts, "error", 0) && cJSON_AddNullToObject(r, "stamp") != NULL &&
              cJSON_AddNullToObject(r, "verify") != NULL &&
              cJSON_AddArrayToObject(r, "checks") != NULL &&
              cJSON_AddNullToObject(r, "benchmark") != NULL &&
              cJSON_AddNullToObject(r, "seed_table") != NULL &&
              cJSON_AddNullToObject(r, "rate_sweep") != NULL &&
              cJSON_AddArrayToObject(r, "notes") != NULL;
    if (!ok) {
        cJSON_Delete(r);
        return ASSAY_ERR_NOMEM;
    }
    *out = r;
    return ASSAY_OK;
}

enum assay_status assay_report_set(cJSON *report, const char *key, cJSON *value)
{
    if (value == NULL) {
        value = cJSON_CreateNull();
        if (value == NULL) {
            return ASSAY_ERR_NOMEM;
        }
    }
    cJSON *old = cJSON_GetObjectItemCaseSensitive(report, key);
    if (old != NULL) {
        /* Name the item before it takes the old one's place: cJSON 1.7.15
         * (Debian 12) ReplaceItemInObject does not check its copy of the
         * name, and out of memory it puts the item in unnamed and reports
         * success (the member silently disappears; fixed upstream later). */
        size_t n = strlen(key) + 1;
        char *name = cJSON_malloc(n);
        if (name == NULL) {
            cJSON_Delete(value);
            return ASSAY_ERR_NOMEM;
        }
        memcpy(name, key, n);
        if (value->string != NULL && !(value->type & cJSON_StringIsConst)) {
            cJSON_free(value->string);
        }
        value->string = name;
        value->type &= ~cJSON_StringIsConst;
        if (!cJSON_ReplaceItemViaPointer(report, old, value)) {
            cJSON_Delete(value);
            return ASSAY_ERR_NOMEM;
        }
        return ASSAY_OK;
    }
    if (!cJSON_AddItemToObject(report, key, value)) {
        cJSON_Delete(value);
        return ASSAY_ERR_NOMEM;
    }
    return ASSAY_OK;
}

/* One distribution of a numerics series: {n, mean, median, p99, max, cdf}. */
static bool add_numerics_stats(cJSON *o, const char *key, const struct assay_divergence_stats *st)
{
    cJSON *d = cJSON_AddObjectToObject(o, key);
    cJSON *cdf = NULL;
    bool ok = d != NULL && assay_json_add_num(d, "n", (double)st->n) &&
              assay_json_add_num(d, "mean", st->mean) &&
              assay_json_add_num(d, "median", st->median) &&
              assay_json_add_num(d, "p99", st->p99) && assay_json_add_num(d, "max", st->max) &&
              (cdf = cJSON_AddArrayToObject(d, "cdf")) != NULL;
    for (int k = 0; ok && k < ASSAY_DIVERGENCE_CDF_POINTS; k++) {
        cJSON *x = isfinite(st->cdf[k]) ? cJSON_CreateNumber(st->cdf[k]) : cJSON_CreateNull();
        ok = x != NULL && cJSON_AddItemToArray(cdf, x);
        if (!ok) {
            cJSON_Delete(x);
        }
    }
    return ok;
}

/* figures.numerics: one object per series (checks/divergence.h). */
static bool add_numerics(cJSON *f, const struct assay_check_result *r)
{
    cJSON *arr = cJSON_AddArrayToObject(f, "numerics");
    bool ok = arr != NULL;
    for (int32_t i = 0; ok && i < r->n_numerics && i < ASSAY_DIVERGENCE_MAX_SERIES; i++) {
        const struct assay_divergence_summary *sv = &r->numerics[i];
        cJSON *o = cJSON_CreateObject();
        ok = o != NULL && cJSON_AddItemToArray(arr, o);
        if (!ok) {
            cJSON_Delete(o);
            break;
        }
        ok = assay_json_add_str(o, "name", sv->name) &&
             assay_json_add_num(o, "n_positions", (double)sv->n_positions) &&
             assay_json_add_num(o, "n_values", (double)sv->n_values) &&
             add_numerics_stats(o, "kld", &sv->kld) &&
             add_numerics_stats(o, "abs_diff", &sv->abs_diff) &&
             assay_json_add_num(o, "top1_agreement", sv->top1_agreement);
    }
    return ok;
}

/* evidence: the bins of a chi-squared test and the PIT histogram, each
 * when the check has them (checks/result.h). */
static bool add_evidence(cJSON *c, const struct assay_evidence *ev)
{
    bool has_bins = ev->kind != ASSAY_EVIDENCE_NONE && ev->n_bins > 0;
    if (!has_bins && ev->pit_n <= 0) {
        return true;
    }
    cJSON *e = cJSON_AddObjectToObject(c, "evidence");
    bool ok = e != NULL;
    if (ok && has_bins) {
        cJSON *bins = NULL;
        ok = assay_json_add_str(e, "test",
                                ev->kind == ASSAY_EVIDENCE_GOF ? "gof" : "homogeneity") &&
             assay_json_add_num(e, "n_test_bins", ev->n_test_bins) &&
             assay_json_add_num(e, "n_folded", ev->n_folded) &&
             (bins = cJSON_AddArrayToObject(e, "bins")) != NULL;
        for (int32_t i = 0; ok && i < ev->n_bins && i < ASSAY_EVIDENCE_MAX_BINS; i++) {
            const struct assay_evidence_bin *b = &ev->bins[i];
            cJSON *o = cJSON_CreateObject();
            ok = o != NULL && cJSON_AddItemToArray(bins, o);
            if (!ok) {
                cJSON_Delete(o);
                break;
            }
            ok = assay_json_add_str(o, "label", b->label) &&
                 assay_json_add_num(o, "observed", b->observed) &&
                 assay_json_add_num(o, "expected", b->expected) &&
                 (ev->kind != ASSAY_EVIDENCE_HOMOGENEITY ||
                  assay_json_add_num(o, "observed_b", b->observed_b)) &&
                 cJSON_AddBoolToObject(o, "pooled", b->pooled) != NULL &&
                 cJSON_AddBoolToObject(o, "folded", b->folded) != NULL;
        }
    }
    if (ok && ev->pit_n > 0) {
        cJSON *pit = cJSON_AddObjectToObject(e, "pit");
        cJSON *bins = NULL;
        ok = pit != NULL && assay_json_add_num(pit, "n", (double)ev->pit_n) &&
             assay_json_add_num(pit, "ks_d", ev->pit_ks_d) &&
             (bins = cJSON_AddArrayToObject(pit, "bins")) != NULL;
        for (int32_t i = 0; ok && i < ASSAY_EVIDENCE_PIT_BINS; i++) {
            cJSON *x = cJSON_CreateNumber((double)ev->pit[i]);
            ok = x != NULL && cJSON_AddItemToArray(bins, x);
            if (!ok) {
                cJSON_Delete(x);
            }
        }
    }
    return ok;
}

enum assay_status assay_report_check_json(const struct assay_check_result *r, cJSON **out)
{
    *out = NULL;
    cJSON *c = cJSON_CreateObject();
    cJSON *f = NULL;
    bool ok = c != NULL && assay_json_add_str(c, "name", r->name) &&
              assay_json_add_str(c, "family", assay_family_str(r->family)) &&
              assay_json_add_str(c, "verdict", assay_verdict_str(r->verdict)) && assay_json_add_str(c, "engine", r->engine) &&
              assay_json_add_str(c, "workload", r->workload) && assay_json_add_str(c, "summary", r->summary) &&
              assay_json_add_str(c, "failure", r->failure) && assay_json_add_str(c, "repro", r->repro) &&
              assay_json_add_num(c, "seconds", r->seconds) && (f = cJSON_AddObjectToObject(c, "figures")) != NULL;
    if (ok && (r->died_signal != 0 || r->timed_out)) {
        /* The check's process died or was killed (checks/isolate.h). */
        cJSON *p = cJSON_AddObjectToObject(c, "process");
        ok = p != NULL && assay_json_add_num(p, "signal", r->died_signal) &&
             cJSON_AddBoolToObject(p, "timed_out", r->timed_out) != NULL;
    }
    if (ok) {
        switch (r->family) {
        case ASSAY_FAMILY_EQUIVALENCE:
            ok = assay_json_add_num(f, "n_requests", (double)r->n_requests) &&
                 assay_json_add_num(f, "n_tokens", (double)r->n_tokens) && assay_json_add_num(f, "n_ties", r->n_ties) &&
                 assay_json_add_num(f, "tie_tol", r->tie_tol) && assay_json_add_num(f, "max_tie_gap", r->max_tie_gap) &&
                 assay_json_add_num(f, "max_logit_diff", r->max_logit_diff);
            if (ok && r->n_logprobs > 0) {
                cJSON *lp = cJSON_AddObjectToObject(f, "logprobs");
                ok = lp != NULL && assay_json_add_num(lp, "n", (double)r->n_logprobs) &&
                     assay_json_add_num(lp, "max_diff", r->logprob_diff_max) &&
                     assay_json_add_num(lp, "median_diff", r->logprob_diff_median) &&
                     assay_json_add_num(lp, "p99_diff", r->logprob_diff_p99) &&
                     assay_json_add_num(lp, "mean_diff", r->logprob_diff_mean) &&
                     assay_json_add_num(lp, "top1_agreement", r->top1_agreement);
                cJSON *kl = NULL;
                if (ok && r->kld_positions > 0) {
                    kl = cJSON_AddObjectToObject(lp, "kld");
                    ok = kl != NULL && assay_json_add_num(kl, "n", (double)r->kld_positions) &&
                         assay_json_add_num(kl, "server", r->kld_server) &&
                         assay_json_add_num(kl, "reference", r->kld_reference) &&
                         assay_json_add_num(kl, "ratio", r->kld_ratio) &&
                         assay_json_add_num(kl, "ratio_se", r->kld_ratio_se) &&
                         assay_json_add_num(kl, "ratio_lower", r->kld_ratio_lower) &&
                         assay_json_add_num(kl, "budget", r->kld_budget);
                }
            }
            if (ok && r->n_numerics > 0) {
                ok = add_numerics(f, r);
            }
            break;
        case ASSAY_FAMILY_DISTRIBUTIONAL:
            ok = assay_json_add_num(f, "alpha", r->alpha) && assay_json_add_num(f, "n", (double)r->n) &&
                 assay_json_add_num(f, "statistic", r->statistic) && assay_json_add_num(f, "df", r->df) &&
                 assay_json_add_num(f, "p_value", r->p_value) && assay_json_add_num(f, "p_adjusted", r->p_adjusted) &&
                 assay_json_add_num(f, "min_tv", r->min_tv) && assay_json_add_num(f, "power", r->power) &&
                 assay_json_add_num(f, "n_impossible", (double)r->n_impossible) &&
                 assay_json_add_bool(f, "rule_fired", r->rule_fired) &&
                 assay_json_add_bool(f, "statistic_fired", r->statistic_fired) &&
                 add_evidence(c, &r->evidence);
            if (ok && r->tol.tested) {
                cJSON *t = cJSON_AddObjectToObject(f, "tolerance");
                ok = t != NULL && cJSON_AddStringToObject(t, "distance", r->tol.distance) != NULL &&
                     assay_json_add_num(t, "budget", r->tol.budget) &&
                     assay_json_add_num(t, "reference", r->tol.reference) &&
                     assay_json_add_num(t, "boundary", r->tol.boundary) &&
                     assay_json_add_num(t, "estimate", r->tol.estimate) &&
                     assay_json_add_num(t, "ci_lo", r->tol.ci_lo) &&
                     assay_json_add_num(t, "ci_hi", r->tol.ci_hi) &&
                     assay_json_add_num(t, "min_excess", r->tol.min_excess);
            }
            break;
        case ASSAY_FAMILY_PROPERTY:
            ok = assay_json_add_num(f, "n_requests", (double)r->n_requests) &&
                 assay_json_add_num(f, "n_steps", (double)r->n_steps) &&
                 assay_json_add_num(f, "n_checks", (double)r->n_checks);
            break;
        case ASSAY_FAMILY_SEEDED:
            ok = assay_json_add_num(f, "n_requests", (double)r->n_requests) &&
                 assay_json_add_num(f, "n_tokens", (double)r->n_tokens) &&
                 assay_json_add_num(f, "n_steps", (double)r->n_steps) &&
                 assay_json_add_num(f, "n_checks", (double)r->n_checks);
            if (ok && !isnan(r->p_value)) {
                /* a test of independence: its statistic as the distributional family's */
                ok = assay_json_add_num(f, "alpha", r->alpha) && assay_json_add_num(f, "n", (double)r->n) &&
                     assay_json_add_num(f, "statistic", r->statistic) && assay_json_add_num(f, "df", r->df) &&
                     assay_json_add_num(f, "p_value", r->p_value) && assay_json_add_num(f, "min_tv", r->min_tv) &&
                     assay_json_add_num(f, "power", r->power);
            }
            break;
        }
    }
    if (!ok) {
        cJSON_Delete(c);
        return ASSAY_ERR_NOMEM;
    }
    *out = c;
    return ASSAY_OK;
}

/* Recount the checks and set the verdict. */
static enum assay_status update_verdict(cJSON *report)
{
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(report, "checks");
    double n = 0, pass = 0, fail = 0, skip = 0, error = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks)
    {
        const char *v = assay_json_str(c, "verdict", "");
        n++;
        pass += strcmp(v, "PASS") == 0;
        fail += strcmp(v, "FAIL") == 0;
        skip += strcmp(v, "SKIP") == 0;
        error += strcmp(v, "ERROR") == 0;
    }
    const char *verdict = fail > 0 ? "FAIL" : error > 0 ? "ERROR" : n > 0 ? "PASS" : "NONE";
    cJSON *counts = cJSON_CreateObject();
    cJSON *vs = cJSON_CreateString(verdict);
    bool ok = counts != NULL && vs != NULL && assay_json_add_num(counts, "checks", n) &&
              assay_json_add_num(counts, "pass", pass) && assay_json_add_num(counts, "fail", fail) &&
              assay_json_add_num(counts, "skip", skip) && assay_json_add_num(counts, "error", error);
    if (!ok) {
        cJSON_Delete(counts);
        cJSON_Delete(vs);
        return ASSAY_ERR_NOMEM;
    }
    enum assay_status st = assay_report_set(report, "counts", counts);
    enum assay_status st2 = assay_report_set(report, "verdict", vs);
    return st != ASSAY_OK ? st : st2;
}

enum assay_status assay_report_add_checks(cJSON *report, const struct assay_check_result *r,
                                          size_t n)
{
    cJSON *checks = cJSON_GetObjectItemCaseSensitive(report, "checks");
    if (!cJSON_IsArray(checks)) {
        checks = cJSON_CreateArray();
        if (checks == NULL || assay_report_set(report, "checks", checks) != ASSAY_OK) {
            return ASSAY_ERR_NOMEM;
        }
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *c = NULL;
        if (assay_report_check_json(&r[i], &c) != ASSAY_OK || !cJSON_AddItemToArray(checks, c)) {
            cJSON_Delete(c);
            update_verdict(report);
            return ASSAY_ERR_NOMEM;
        }
    }
    return update_verdict(report);
}

enum assay_status assay_report_add_note(cJSON *report, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cJSON *notes = cJSON_GetObjectItemCaseSensitive(report, "notes");
    if (!cJSON_IsArray(notes)) {
        notes = cJSON_CreateArray();
        if (notes == NULL || assay_report_set(report, "notes", notes) != ASSAY_OK) {
            return ASSAY_ERR_NOMEM;
        }
    }
    cJSON *s = cJSON_CreateString(buf);
    if (s == NULL || !cJSON_AddItemToArray(notes, s)) {
        cJSON_Delete(s);
        return ASSAY_ERR_NOMEM;
    }
    return ASSAY_OK;
}

const char *assay_report_verdict(const cJSON *report)
{
    return assay_json_str(report, "verdict", "NONE");
}

char *assay_report_check_figures(const cJSON *c, char *buf, size_t size)
{
    const char *family = assay_json_str(c, "family", "");
    char a[32], b2[32], d[32], e[32], f[32], g[32];
    if (strcmp(family, "equivalence") == 0) {
        snprintf(buf, size, "max |logit diff| %s, tie tol %s, %s ties (max gap %s), %s tokens",
                 assay_text_num(a, sizeof a, assay_json_num(c, "figures.max_logit_diff"), 3),
                 assay_text_num(b2, sizeof b2, assay_json_num(c, "figures.tie_tol"), 3),
                 assay_text_num(d, sizeof d, assay_json_num(c, "figures.n_ties"), 6),
                 assay_text_num(e, sizeof e, assay_json_num(c, "figures.max_tie_gap"), 3),
                 assay_text_num(f, sizeof f, assay_json_num(c, "figures.n_tokens"), 12));
        if (cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "figures"),
                                             "logprobs") != NULL) {
            size_t used = strlen(buf);
            snprintf(
                buf + used, size - used,
                "; top logprobs |server - oracle| max %s, median %s, p99 %s over %s, top-1 "
                "agreement %s",
                assay_text_num(a, sizeof a, assay_json_num(c, "figures.logprobs.max_diff"), 3),
                assay_text_num(b2, sizeof b2, assay_json_num(c, "figures.logprobs.median_diff"), 3),
                assay_text_num(d, sizeof d, assay_json_num(c, "figures.logprobs.p99_diff"), 3),
                assay_text_num(e, sizeof e, assay_json_num(c, "figures.logprobs.n"), 12),
                assay_text_num(f, sizeof f, assay_json_num(c, "figures.logprobs.top1_agreement"),
                               4));
        }
        if (assay_json_path(c, "figures.logprobs.kld") != NULL) {
            size_t used = strlen(buf);
            snprintf(buf + used, size - used,
                     "; mean KLD %s, %s times the reference's %s (s.e. %s) over %s positions, "
                     "lower bound %s",
                     assay_text_num(a, sizeof a, assay_json_num(c, "figures.logprobs.kld.server"),
                                    3),
                     assay_text_num(b2, sizeof b2,
                                    assay_json_num(c, "figures.logprobs.kld.ratio"), 3),
                     assay_text_num(d, sizeof d,
                                    assay_json_num(c, "figures.logprobs.kld.reference"), 3),
                     assay_text_num(e, sizeof e,
                                    assay_json_num(c, "figures.logprobs.kld.ratio_se"), 2),
                     assay_text_num(f, sizeof f, assay_json_num(c, "figures.logprobs.kld.n"), 12),
                     assay_text_num(g, sizeof g,
                                    assay_json_num(c, "figures.logprobs.kld.ratio_lower"), 3));
        }
    } else if (strcmp(family, "distributional") == 0 &&
               assay_json_path(c, "figures.tolerance") != NULL) {
        char h[32], i2[32], j2[32], k2[32];
        snprintf(buf, size,
                 "p %s (Holm %s), n %s, alpha %s; %s distance %s (95%% %s to %s) within budget "
                 "%s; detects %s beyond it at power %s",
                 assay_text_num(a, sizeof a, assay_json_num(c, "figures.p_value"), 3),
                 assay_text_num(b2, sizeof b2, assay_json_num(c, "figures.p_adjusted"), 3),
                 assay_text_num(d, sizeof d, assay_json_num(c, "figures.n"), 12),
                 assay_text_num(e, sizeof e, assay_json_num(c, "figures.alpha"), 3),
                 assay_json_str(c, "figures.tolerance.distance", "the"),
                 assay_text_num(f, sizeof f, assay_json_num(c, "figures.tolerance.estimate"), 3),
                 assay_text_num(g, sizeof g, assay_json_num(c, "figures.tolerance.ci_lo"), 3),
                 assay_text_num(h, sizeof h, assay_json_num(c, "figures.tolerance.ci_hi"), 3),
                 assay_text_num(i2, sizeof i2, assay_json_num(c, "figures.tolerance.budget"), 3),
                 assay_text_num(j2, sizeof j2, assay_json_num(c, "figures.tolerance.min_excess"),
                                3),
                 assay_text_num(k2, sizeof k2, assay_json_num(c, "figures.power"), 3));
    } else if (strcmp(family, "distributional") == 0) {
        snprintf(buf, size, "p %s (Holm %s), n %s, alpha %s, min TV %s at power %s",
                 assay_text_num(a, sizeof a, assay_json_num(c, "figures.p_value"), 3),
                 assay_text_num(b2, sizeof b2, assay_json_num(c, "figures.p_adjusted"), 3),
                 assay_text_num(d, sizeof d, assay_json_num(c, "figures.n"), 12),
                 assay_text_num(e, sizeof e, assay_json_num(c, "figures.alpha"), 3),
                 assay_text_num(f, sizeof f, assay_json_num(c, "figures.min_tv"), 3),
                 assay_text_num(g, sizeof g, assay_json_num(c, "figures.power"), 3));
        int rule = assay_json_bool(c, "figures.rule_fired");
        int stat = assay_json_bool(c, "figures.statistic_fired");
        if (rule == 1 || stat == 1) {
            size_t used = strlen(buf);
            snprintf(buf + used, size - used, "; fired: %s",
                     rule == 1 && stat != 1 ? "the hard rule only (the statistic passes)"
                     : rule == 1            ? "the hard rule and the statistic"
                                            : "the statistic");
        }
    } else if (strcmp(family, "property") == 0 || strcmp(family, "seeded") == 0) {
        snprintf(buf, size, "%s steps, %s invariant checks",
                 assay_text_num(a, sizeof a, assay_json_num(c, "figures.n_steps"), 12),
                 assay_text_num(b2, sizeof b2, assay_json_num(c, "figures.n_checks"), 12));
    } else {
        snprintf(buf, size, "%s", "");
    }
    return buf;
}

const char *assay_report_check_fired(const cJSON *c)
{
    if (strcmp(assay_json_str(c, "family", ""), "distributional") != 0 ||
        strcmp(assay_json_str(c, "verdict", ""), "FAIL") != 0) {
        return "";
    }
    return assay_check_fired_str(assay_json_bool(c, "figures.rule_fired") == 1,
                                 assay_json_bool(c, "figures.statistic_fired") == 1);
}

/* ---- the seed table's paragraph --------------------------------------- */

char *assay_report_seedtable_explain(const cJSON *st, char *buf, size_t size)
{
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(st, "rows");
    const cJSON *open = NULL, *closed = NULL, *row;
    double open_ach = NAN, best = INFINITY;
    cJSON_ArrayForEach(row, rows)
    {
        if (strcmp(assay_json_str(row, "generator", ""), "open") == 0 && open == NULL) {
            open = row;
            open_ach = assay_json_num(row, "achieved_rate");
        }
    }
    cJSON_ArrayForEach(row, rows)
    {
        double ach = assay_json_num(row, "achieved_rate");
        if (strcmp(assay_json_str(row, "generator", ""), "closed") != 0 || !(ach > 0)) {
            continue;
        }
        double d = isfinite(open_ach) && open_ach > 0 ? fabs(log(ach / open_ach)) : 0.0;
        if (closed == NULL || d < best) {
            closed = row;
            best = d;
        }
    }
    if (open == NULL || closed == NULL) {
        snprintf(buf, size,
                 "The comparison needs an open-loop row and a closed-loop row that completed; "
                 "this table has %s.",
                 open == NULL ? "no open-loop row" : "no completed closed-loop row");
        return buf;
    }
    char o99[32], c99[32], oe2e[32], ce2e[32], capacity[96] = "";
    double O = assay_json_num(open, "ttft_p99"), C = assay_json_num(closed, "ttft_p99");
    assay_text_seconds(o99, sizeof o99, O);
    assay_text_seconds(c99, sizeof c99, C);
    assay_text_seconds(oe2e, sizeof oe2e, assay_json_num(open, "bench.spread.e2e.p99.median"));
    assay_text_seconds(ce2e, sizeof ce2e, assay_json_num(closed, "bench.spread.e2e.p99.median"));
    double offered = assay_json_num(open, "offered_rate"), cap = assay_json_num(st, "capacity");
    if (isfinite(cap) && cap > 0 && isfinite(offered)) {
        snprintf(capacity, sizeof capacity,
                 " (%.1f times the capacity of %.3g req/s measured with one burst of the whole "
                 "workload)",
                 offered / cap, cap);
    }
    int n = snprintf(buf, size,
                     "Same engine, same workload; only the load generator changes. The open loop "
                     "offered %.3g req/s%s and achieved %.3g req/s. The closed loop at %d workers, "
                     "the closed row closest to it in throughput, achieved %.3g req/s. ",
                     offered, capacity, open_ach, (int)assay_json_num(closed, "workers"),
                     assay_json_num(closed, "achieved_rate"));
    if (n < 0 || (size_t)n >= size) {
        return buf;
    }
    double ratio = O / C;
    if (isfinite(ratio) && ratio >= 2.0) {
        n += snprintf(buf + n, size - (size_t)n,
                      "Its TTFT p99 was %s against the open loop's %s: %.0f times lower, on the "
                      "same work. Neither figure is false; they measure different things. ",
                      c99, o99, ratio);
    } else {
        n += snprintf(buf + n, size - (size_t)n,
                      "Here its TTFT p99 (%s) is within a factor of %.1f of the open loop's (%s): "
                      "in this configuration the queue did not reach the first token (an engine "
                      "that admits every waiting request into its batch at once shows queueing "
                      "in TPOT and E2E instead; E2E p99 was %s open against %s closed). ",
                      c99, isfinite(ratio) ? ratio : 0.0, o99, oe2e, ce2e);
    }
    if (n < 0 || (size_t)n >= size) {
        return buf;
    }
    snprintf(buf + n, size - (size_t)n,
             "In the open loop requests arrive on a schedule whether or not the engine keeps up, "
             "so a queue forms, and each latency, measured from the scheduled arrival, includes "
             "the wait. A closed loop submits the next request only when one finishes: when the "
             "engine slows, the generator slows with it, the queue never grows, and every latency "
             "is measured from a moment the engine was ready. This is coordinated omission, and it "
             "deletes the tail the benchmark was meant to measure. The tell is the Offered column: "
             "a closed loop has no arrival process, so it cannot state an offered rate, only a "
             "concurrency.");
    return buf;
}

enum assay_status assay_report_seedtable_json(const struct assay_seedtable *t,
                                              const struct assay_workload *w, cJSON **out)
{
    *out = NULL;
    cJSON *st = NULL;
    enum assay_status s = assay_seedtable_to_json(t, w, &st);
    if (s != ASSAY_OK) {
        return s;
    }
    char para[3000];
    assay_report_seedtable_explain(st, para, sizeof para);
    if (!assay_json_add_str(st, "explanation", para)) {
        cJSON_Delete(st);
        return ASSAY_ERR_NOMEM;
    }
    *out = st;
    return ASSAY_OK;
}

enum assay_status assay_report_sweep_json(const struct assay_sweep_result *s,
                                          const struct assay_sweep_params *p,
                                          const struct assay_slo *slo, enum assay_status status,
                                          cJSON **out)
{
    *out = NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON *so = NULL, *probes = NULL;
    bool ok = o != NULL && assay_json_add_str(o, "format", "assay-sweep") &&
              assay_json_add_num(o, "version", ASSAY_SWEEP_SCHEMA_VERSION) && assay_json_add_num(o, "target", p->target) &&
              (so = cJSON_AddObjectToObject(o, "slo")) != NULL &&
              assay_json_add_num(so, "ttft_s", slo != NULL ? slo->ttft_s : NAN) &&
              assay_json_add_num(so, "tpot_s", slo != NULL ? slo->tpot_s : NAN) &&
              assay_json_add_str(o, "arrival", assay_arrival_kind_str(p->arrival)) &&
              assay_json_add_num(o, "cv", p->arrival == ASSAY_ARRIVAL_GAMMA ? p->cv : NAN) &&
              assay_json_add_num(o, "seed", (double)p->seed) && assay_json_add_num(o, "start_rate", p->start_rate) &&
              assay_json_add_num(o, "min_rate", p->min_rate) && assay_json_add_num(o, "max_rate", p->max_rate) &&
              assay_json_add_num(o, "max_probes", p->max_probes) && assay_json_add_num(o, "rel_tol", p->rel_tol) &&
              assay_json_add_num(o, "best_rate", s->best_rate > 0 ? s->best_rate : NAN) &&
              assay_json_add_num(o, "fail_rate", s->fail_rate) &&
              cJSON_AddBoolToObject(o, "bracketed", s->bracketed) != NULL &&
              assay_json_add_str(o, "status", status == ASSAY_OK ? "ok" : assay_status_str(status)) &&
              (probes = cJSON_AddArrayToObject(o, "probes")) != NULL;
    for (int32_t i = 0; ok && i < s->n_probes; i++) {
        cJSON *pr = cJSON_CreateObject();
        ok = pr != NULL && cJSON_AddItemToArray(probes, pr);
        if (!ok) {
            cJSON_Delete(pr);
            break;
        }
        ok = assay_json_add_num(pr, "rate", s->probes[i].rate) &&
             assay_json_add_num(pr, "goodput_fraction", s->probes[i].goodput_fraction) &&
             cJSON_AddBoolToObject(pr, "pass", s->probes[i].pass) != NULL &&
             assay_json_add_num(pr, "achieved_rate", s->probes[i].achieved_rate) &&
             assay_json_add_num(pr, "ttft_p50", s->probes[i].ttft_p50) &&
             assay_json_add_num(pr, "ttft_p99", s->probes[i].ttft_p99) &&
             assay_json_add_num(pr, "tpot_p99", s->probes[i].tpot_p99) &&
             assay_json_add_num(pr, "e2e_p99", s->probes[i].e2e_p99);
    }
    char para[1024];
    char slo_text[128] = "no SLO";
    if (slo != NULL) {
        char a[32], b[32];
        snprintf(slo_text, sizeof slo_text, "a TTFT within %s and a TPOT within %s",
                 assay_text_seconds(a, sizeof a, slo->ttft_s),
                 assay_text_seconds(b, sizeof b, slo->tpot_s));
    }
    int n = snprintf(para, sizeof para,
                     "An open-loop %s search for the highest offered rate whose goodput (requests "
                     "that finished with %s, as a share of all requests) stays at or above "
                     "%.0f%%; the same seed at every rate, so each probe's schedule is the same "
                     "gaps scaled. ",
                     assay_arrival_kind_str(p->arrival), slo_text, 100 * p->target);
    if (n > 0 && (size_t)n < sizeof para) {
        if (s->best_rate > 0 && s->bracketed) {
            snprintf(para + n, sizeof para - (size_t)n,
                     "Result: %.3g req/s passes and %.3g req/s fails, within %.0f%% of each other, "
                     "after %d probes.",
                     s->best_rate, s->fail_rate, 100 * p->rel_tol, (int)s->n_probes);
        } else if (s->best_rate > 0) {
            snprintf(para + n, sizeof para - (size_t)n,
                     "Result: the highest passing rate probed was %.3g req/s; the search was not "
                     "bracketed to %.0f%% within its %d probes%s.",
                     s->best_rate, 100 * p->rel_tol, (int)s->n_probes,
                     isfinite(s->fail_rate) ? "" : " (no probe failed)");
        } else {
            snprintf(para + n, sizeof para - (size_t)n,
                     "Result: no probed rate passed (the lowest probed was %.3g req/s): the "
                     "engine misses this SLO even lightly loaded, or needs a lower rate than "
                     "the search's floor of %.3g req/s.",
                     s->n_probes > 0 ? s->probes[s->n_probes - 1].rate : p->start_rate, p->min_rate);
        }
    }
    ok = ok && assay_json_add_str(o, "explanation", para);
    if (!ok) {
        cJSON_Delete(o);
        return ASSAY_ERR_NOMEM;
    }
    *out = o;
    return ASSAY_OK;
}

/* ---- validation --------------------------------------------------------- */

enum { S = ASSAY_JSON_STRING, N = ASSAY_JSON_NUMBER, B = ASSAY_JSON_BOOL, O = ASSAY_JSON_OBJECT,
       A = ASSAY_JSON_ARRAY, Z = ASSAY_JSON_NULL };

static bool one_of(const char *v, const char *const *set)
{
    for (size_t i = 0; set[i] != NULL; i++) {
        if (strcmp(v, set[i]) == 0) {
            return true;
        }
    }
    return false;
}

static enum assay_status bad_value(struct assay_diag *diag, const char *where, const char *expected,
                                   const char *got)
{
    assay_diag_set(diag, NULL, where, expected, "\"%.200s\"", got);
    return ASSAY_ERR_PARSE;
}

/* Each element of the array at `path` (an array already checked) must be
 * an object with the given fields. */
static enum assay_status each_item(const cJSON *root, const char *path, const char *prefix,
                                   const struct assay_json_field *fields, size_t n,
                                   struct assay_diag *diag)
{
    const cJSON *arr = assay_json_path(root, path);
    int i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, arr)
    {
        char where[160];
        snprintf(where, sizeof where, "%s[%d]", prefix, i);
        if (!cJSON_IsObject(item)) {
            assay_diag_set(diag, NULL, where, "an object", "%s", assay_json_item_kind(item));
            return ASSAY_ERR_PARSE;
        }
        enum assay_status st = assay_json_require(item, where, fields, n, diag);
        if (st != ASSAY_OK) {
            return st;
        }
        i++;
    }
    return ASSAY_OK;
}

static enum assay_status check_format(const cJSON *o, const char *prefix, const char *format,
                                      double version, struct assay_diag *diag)
{
    char where[160];
    const char *f = assay_json_str(o, "format", "");
    if (strcmp(f, format) != 0) {
        char expected[64];
        snprintf(where, sizeof where, "%s.format", prefix);
        snprintf(expected, sizeof expected, "\"%s\"", format);
        return bad_value(diag, where, expected, f);
    }
    double v = assay_json_num(o, "version");
    if (v != version) {
        snprintf(where, sizeof where, "%s.version", prefix);
        assay_diag_set(diag, NULL, where, "1 (this assay's schema)", "%g", v);
        return ASSAY_ERR_PARSE;
    }
    return ASSAY_OK;
}

/* figures.numerics of check i, when present: an array of series, each
 * with its two distributions and their 101-point CDFs. */
static enum assay_status validate_numerics(const cJSON *c, int i, struct assay_diag *diag)
{
    static const struct assay_json_field series[] = {
        {"name", S},
        {"n_positions", N},
        {"n_values", N},
        {"kld", O},
        {"kld.n", N},
        {"kld.mean", N | Z},
        {"kld.median", N | Z},
        {"kld.p99", N | Z},
        {"kld.max", N | Z},
        {"kld.cdf", A},
        {"abs_diff", O},
        {"abs_diff.n", N},
        {"abs_diff.mean", N | Z},
        {"abs_diff.median", N | Z},
        {"abs_diff.p99", N | Z},
        {"abs_diff.max", N | Z},
        {"abs_diff.cdf", A},
        {"top1_agreement", N | Z},
    };
    const cJSON *arr = assay_json_path(c, "figures.numerics");
    if (arr == NULL) {
        return ASSAY_OK;
    }
    char where[160];
    snprintf(where, sizeof where, "checks[%d].figures.numerics", i);
    if (!cJSON_IsArray(arr)) {
        assay_diag_set(diag, NULL, where, "an array", "%s", assay_json_item_kind(arr));
        return ASSAY_ERR_PARSE;
    }
    enum assay_status st =
        each_item(c, "figures.numerics", where, series, sizeof series / sizeof series[0], diag);
    if (st != ASSAY_OK) {
        return st;
    }
    int k = 0;
    const cJSON *sv;
    cJSON_ArrayForEach(sv, arr)
    {
        static const char *const dists[] = {"kld.cdf", "abs_diff.cdf"};
        for (int d = 0; d < 2; d++) {
            const cJSON *cdf = assay_json_path(sv, dists[d]);
            bool ok = cJSON_GetArraySize(cdf) == ASSAY_DIVERGENCE_CDF_POINTS;
            const cJSON *x;
            cJSON_ArrayForEach(x, cdf)
            {
                ok = ok && (cJSON_IsNumber(x) || cJSON_IsNull(x));
            }
            if (!ok) {
                snprintf(where, sizeof where, "checks[%d].figures.numerics[%d].%s", i, k, dists[d]);
                assay_diag_set(diag, NULL, where, "101 numbers or nulls", "%d items",
                               cJSON_GetArraySize(cdf));
                return ASSAY_ERR_PARSE;
            }
        }
        k++;
    }
    return ASSAY_OK;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* evidence of check i, when present: bins (each {label, observed,
 * expected, pooled, folded}) and pit ({n, ks_d, bins: 20 numbers}), each
 * optional, at least one of them. */
static enum assay_status validate_evidence(const cJSON *c, int i, struct assay_diag *diag)
{
    static const struct assay_json_field bin[] = {
        {"label", S}, {"observed", N}, {"expected", N | Z}, {"pooled", B}, {"folded", B},
    };
    static const struct assay_json_field pit[] = {{"n", N}, {"ks_d", N | Z}, {"bins", A}};
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(c, "evidence");
    if (ev == NULL) {
        return ASSAY_OK;
    }
    char where[160];
    snprintf(where, sizeof where, "checks[%d].evidence", i);
    const cJSON *bins = cJSON_GetObjectItemCaseSensitive(ev, "bins");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(ev, "pit");
    if (!cJSON_IsObject(ev) || (bins == NULL && p == NULL)) {
        assay_diag_set(diag, NULL, where, "an object with bins, pit or both", "%s",
                       assay_json_item_kind(ev));
        return ASSAY_ERR_PARSE;
    }
    if (bins != NULL) {
        static const struct assay_json_field head[] = {
            {"test", S}, {"n_test_bins", N}, {"n_folded", N}, {"bins", A}};
        enum assay_status st = assay_json_require(ev, where, head, COUNT(head), diag);
        if (st == ASSAY_OK) {
            snprintf(where, sizeof where, "checks[%d].evidence.bins", i);
            st = each_item(ev, "bins", where, bin, COUNT(bin), diag);
        }
        if (st != ASSAY_OK) {
            return st;
        }
    }
    if (p != NULL) {
        snprintf(where, sizeof where, "checks[%d].evidence.pit", i);
        if (!cJSON_IsObject(p)) {
            assay_diag_set(diag, NULL, where, "an object", "%s", assay_json_item_kind(p));
            return ASSAY_ERR_PARSE;
        }
        enum assay_status st = assay_json_require(p, where, pit, COUNT(pit), diag);
        if (st != ASSAY_OK) {
            return st;
        }
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(p, "bins");
        bool ok = cJSON_GetArraySize(h) == ASSAY_EVIDENCE_PIT_BINS;
        const cJSON *x;
        cJSON_ArrayForEach(x, h)
        {
            ok = ok && cJSON_IsNumber(x);
        }
        if (!ok) {
            snprintf(where, sizeof where, "checks[%d].evidence.pit.bins", i);
            assay_diag_set(diag, NULL, where, "20 numbers", "%d items", cJSON_GetArraySize(h));
            return ASSAY_ERR_PARSE;
        }
    }
    return ASSAY_OK;
}

/* Long because it is the schema: the tables of each object's fields, then
 * the rules between fields, one after the other, in the order
 * docs/report-schema.md states them. */
enum assay_status assay_report_validate(const cJSON *r, struct assay_diag *diag)
{
    static const struct assay_json_field top[] = {
        {"schema", S},       {"version", N},        {"command", S},        {"command_line", S},
        {"created_utc", S},  {"duration_s", N | Z}, {"verdict", S},        {"counts", O},
        {"counts.checks", N}, {"counts.pass", N},   {"counts.fail", N},    {"counts.skip", N},
        {"counts.error", N}, {"stamp", O},          {"verify", O | Z},     {"checks", A},
        {"benchmark", O | Z}, {"seed_table", O | Z}, {"rate_sweep", O | Z}, {"notes", A},
    };
    static const struct assay_json_field check[] = {
        {"name", S},    {"family", S},  {"verdict", S}, {"engine", S},  {"workload", S},
        {"summary", S}, {"failure", S}, {"repro", S},   {"seconds", N | Z}, {"figures", O},
    };
    static const struct assay_json_field bench[] = {
        {"format", S}, {"version", N}, {"generator", O}, {"generator.kind", S},
        {"workload", O | Z}, {"slo", O | Z}, {"runs", A}, {"spread", O},
    };
    static const struct assay_json_field run[] = {
        {"n_requests", N}, {"outcomes", O}, {"achieved_rate", N | Z}, {"offered_rate", N | Z},
        {"ttft", O},       {"tpot", O},     {"itl", O},               {"e2e", O},
    };
    static const struct assay_json_field seed[] = {
        {"format", S}, {"version", N}, {"capacity", N | Z}, {"rows", A}, {"explanation", S},
    };
    static const struct assay_json_field row[] = {
        {"generator", S},      {"setting", S},      {"ttft_p50", N | Z},      {"ttft_p95", N | Z},
        {"ttft_p99", N | Z},   {"offered_rate", N | Z}, {"achieved_rate", N | Z}, {"bench", O},
    };
    static const struct assay_json_field sweep[] = {
        {"format", S},       {"version", N},       {"target", N},    {"slo", O},
        {"best_rate", N | Z}, {"fail_rate", N | Z}, {"bracketed", B}, {"status", S},
        {"probes", A},       {"explanation", S},
    };
    static const struct assay_json_field probe[] = {
        {"rate", N}, {"goodput_fraction", N | Z}, {"pass", B},
    };
    static const char *const verdicts[] = {"PASS", "FAIL", "ERROR", "NONE", NULL};
    static const char *const check_verdicts[] = {"PASS", "FAIL", "SKIP", "ERROR", NULL};
    static const char *const families[] = {"equivalence", "distributional", "property", "seeded",
                                           NULL};

    if (!cJSON_IsObject(r)) {
        assay_diag_set(diag, NULL, "(top level)", "an object", "%s", assay_json_item_kind(r));
        return ASSAY_ERR_PARSE;
    }
    enum assay_status st = assay_json_require(r, NULL, top, COUNT(top), diag);
    if (st != ASSAY_OK) {
        return st;
    }
    const char *schema = assay_json_str(r, "schema", "");
    if (strcmp(schema, ASSAY_REPORT_SCHEMA) != 0) {
        return bad_value(diag, "schema", "\"assay-report\"", schema);
    }
    double version = assay_json_num(r, "version");
    if (version != ASSAY_REPORT_VERSION) {
        assay_diag_set(diag, NULL, "version",
                       "1 (regenerate the report with this assay, or re-render it with the assay "
                       "that wrote it)",
                       "%g", version);
        return ASSAY_ERR_PARSE;
    }
    if (!one_of(assay_json_str(r, "verdict", ""), verdicts)) {
        return bad_value(diag, "verdict", "\"PASS\", \"FAIL\", \"ERROR\" or \"NONE\"",
                         assay_json_str(r, "verdict", ""));
    }
    st = assay_stamp_validate(cJSON_GetObjectItemCaseSensitive(r, "stamp"), "stamp", diag);
    if (st != ASSAY_OK) {
        return st;
    }
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
    st = each_item(r, "checks", "checks", check, COUNT(check), diag);
    if (st != ASSAY_OK) {
        return st;
    }
    int i = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks)
    {
        char where[64];
        if (!one_of(assay_json_str(c, "verdict", ""), check_verdicts)) {
            snprintf(where, sizeof where, "checks[%d].verdict", i);
            return bad_value(diag, where, "\"PASS\", \"FAIL\", \"SKIP\" or \"ERROR\"",
                             assay_json_str(c, "verdict", ""));
        }
        if (!one_of(assay_json_str(c, "family", ""), families)) {
            snprintf(where, sizeof where, "checks[%d].family", i);
            return bad_value(diag, where, "\"equivalence\", \"distributional\" or \"property\"",
                             assay_json_str(c, "family", ""));
        }
        st = validate_numerics(c, i, diag);
        if (st == ASSAY_OK) {
            st = validate_evidence(c, i, diag);
        }
        if (st != ASSAY_OK) {
            return st;
        }
        i++;
    }
    if (assay_json_num(r, "counts.checks") != (double)i) {
        assay_diag_set(diag, NULL, "counts.checks", "the length of checks[]", "%g",
                       assay_json_num(r, "counts.checks"));
        return ASSAY_ERR_PARSE;
    }
    /* The counts and the verdict must be those of the checks: a report
     * that says PASS over a failed check must not pass for a passing one. */
    double tally[4] = {0, 0, 0, 0};
    cJSON_ArrayForEach(c, checks)
    {
        for (int k = 0; k < 4; k++) {
            tally[k] += strcmp(assay_json_str(c, "verdict", ""), check_verdicts[k]) == 0;
        }
    }
    static const char *const count_keys[4] = {"counts.pass", "counts.fail", "counts.skip",
                                              "counts.error"};
    for (int k = 0; k < 4; k++) {
        if (assay_json_num(r, count_keys[k]) != tally[k]) {
            char expected[64];
            snprintf(expected, sizeof expected, "%g (the checks with verdict %s)", tally[k],
                     check_verdicts[k]);
            assay_diag_set(diag, NULL, count_keys[k], expected, "%g",
                           assay_json_num(r, count_keys[k]));
            return ASSAY_ERR_PARSE;
        }
    }
    const char *verdict = assay_json_str(r, "verdict", "");
    if ((tally[1] > 0 && strcmp(verdict, "FAIL") != 0) ||
        (tally[3] > 0 && strcmp(verdict, "FAIL") != 0 && strcmp(verdict, "ERROR") != 0)) {
        return bad_value(diag, "verdict",
                         tally[1] > 0 ? "\"FAIL\" (a check failed)"
                                      : "\"FAIL\" or \"ERROR\" (a check could not run)",
                         verdict);
    }
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "benchmark");
    if (cJSON_IsObject(b)) {
        if ((st = assay_json_require(b, "benchmark", bench, COUNT(bench), diag)) != ASSAY_OK ||
            (st = check_format(b, "benchmark", "assay-bench", ASSAY_BENCH_SCHEMA_VERSION, diag)) !=
                ASSAY_OK ||
            (st = each_item(b, "runs", "benchmark.runs", run, COUNT(run), diag)) != ASSAY_OK) {
            return st;
        }
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "seed_table");
    if (cJSON_IsObject(t)) {
        if ((st = assay_json_require(t, "seed_table", seed, COUNT(seed), diag)) != ASSAY_OK ||
            (st = check_format(t, "seed_table", "assay-seedtable", 1, diag)) != ASSAY_OK ||
            (st = each_item(t, "rows", "seed_table.rows", row, COUNT(row), diag)) != ASSAY_OK) {
            return st;
        }
        i = 0;
        const cJSON *ro;
        cJSON_ArrayForEach(ro, cJSON_GetObjectItemCaseSensitive(t, "rows"))
        {
            char where[64];
            snprintf(where, sizeof where, "seed_table.rows[%d].bench", i++);
            const cJSON *rb = cJSON_GetObjectItemCaseSensitive(ro, "bench");
            if ((st = assay_json_require(rb, where, bench, COUNT(bench), diag)) != ASSAY_OK ||
                (st = check_format(rb, where, "assay-bench", ASSAY_BENCH_SCHEMA_VERSION, diag)) !=
                    ASSAY_OK) {
                return st;
            }
        }
    }
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(r, "rate_sweep");
    if (cJSON_IsObject(sw)) {
        if ((st = assay_json_require(sw, "rate_sweep", sweep, COUNT(sweep), diag)) != ASSAY_OK ||
            (st = check_format(sw, "rate_sweep", "assay-sweep", ASSAY_SWEEP_SCHEMA_VERSION, diag)) !=
                ASSAY_OK ||
            (st = each_item(sw, "probes", "rate_sweep.probes", probe, COUNT(probe), diag)) !=
                ASSAY_OK) {
            return st;
        }
    }
    /* "audit" (assay audit only): absent, null or an assay-audit object. */
    const cJSON *au = cJSON_GetObjectItemCaseSensitive(r, "audit");
    if (au != NULL && !cJSON_IsNull(au)) {
        if (!cJSON_IsObject(au)) {
            assay_diag_set(diag, NULL, "audit", "an object or null", "%s", assay_json_item_kind(au));
            return ASSAY_ERR_PARSE;
        }
        if ((st = assay_report_audit_validate(au, diag)) != ASSAY_OK) {
            return st;
        }
    }
    if ((st = assay_report_outcome_validate(r, diag)) != ASSAY_OK) {
        return st;
    }
    /* "compare" (assay compare only): absent, null or an assay-compare object. */
    const cJSON *cmp = cJSON_GetObjectItemCaseSensitive(r, "compare");
    if (cmp != NULL && !cJSON_IsNull(cmp)) {
        if (!cJSON_IsObject(cmp)) {
            assay_diag_set(diag, NULL, "compare", "an object or null", "%s",
                           assay_json_item_kind(cmp));
            return ASSAY_ERR_PARSE;
        }
        if ((st = assay_report_compare_validate(cmp, diag)) != ASSAY_OK) {
            return st;
        }
    }
    i = 0;
    const cJSON *note;
    cJSON_ArrayForEach(note, cJSON_GetObjectItemCaseSensitive(r, "notes"))
    {
        if (!cJSON_IsString(note)) {
            char where[32];
            snprintf(where, sizeof where, "notes[%d]", i);
            assay_diag_set(diag, NULL, where, "a string", "%s", assay_json_item_kind(note));
            return ASSAY_ERR_PARSE;
        }
        i++;
    }
#undef COUNT
    return ASSAY_OK;
}

/* ---- reading -------------------------------------------------------------- */

enum assay_status assay_report_parse(const char *text, size_t len, const char *file, cJSON **out,
                                     struct assay_diag *diag)
{
    *out = NULL;
    assay_diag_clear(diag);
    if (file != NULL) {
        assay_diag_set(diag, file, "", "", "%s", "");
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (root == NULL) {
        size_t off = assay_json_error_offset(text, len, end);
        char where[96];
        assay_diag_position(text, len, off, where, sizeof where);
        assay_diag_set(diag, NULL, where, "well-formed JSON", "%s",
                       off >= len ? "the end of the file" : "a syntax error");
        return ASSAY_ERR_PARSE;
    }
    for (const char *p = end; p != NULL && p < text + len; p++) {
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t' && *p != '\0') {
            char where[96];
            assay_diag_position(text, len, (size_t)(p - text), where, sizeof where);
            assay_diag_set(diag, NULL, where, "the end of the document", "more text");
            cJSON_Delete(root);
            return ASSAY_ERR_PARSE;
        }
    }
    enum assay_status st = assay_report_validate(root, diag);
    if (st != ASSAY_OK) {
        cJSON_Delete(root);
        return st;
    }
    *out = root;
    return ASSAY_OK;
}

enum assay_status assay_report_read_text(const char *path, char **text, size_t *len,
                                        struct assay_diag *diag)
{
    *text = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        assay_diag_set(diag, path, "", "a readable file", "%s", strerror(errno));
        return ASSAY_ERR_IO;
    }
    struct assay_text t;
    assay_text_init(&t);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        assay_text_append(&t, chunk, n);
    }
    bool read_error = ferror(f) != 0;
    int err = errno;
    fclose(f);
    if (read_error) {
        assay_text_release(&t);
        assay_diag_set(diag, path, "", "a readable file", "%s", strerror(err));
        return ASSAY_ERR_IO;
    }
    return assay_text_take(&t, text, len) != ASSAY_OK ? ASSAY_ERR_NOMEM : ASSAY_OK;
}

enum assay_status assay_report_load(const char *path, cJSON **out, struct assay_diag *diag)
{
    *out = NULL;
    assay_diag_clear(diag);
    char *text;
    size_t len;
    enum assay_status st = assay_report_read_text(path, &text, &len, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    st = assay_report_parse(text, len, path, out, diag);
    assay_free(text);
    return st;
}

/* ---- the canonical text ---------------------------------------------------- */

enum assay_status assay_report_print(const cJSON *report, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    char *s = cJSON_Print(report);
    if (s == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    struct assay_text t;
    assay_text_init(&t);
    assay_text_puts(&t, s);
    assay_text_puts(&t, "\n");
    cJSON_free(s);
    return assay_text_take(&t, out, len);
}
