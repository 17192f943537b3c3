/*
 * result.c - the outcome of one check (result.h): assay_check_result_init,
 * the verdict setters assay_check_fail / _skip / _error / _set with a printf
 * style summary, and the names of verdicts and families for reports and
 * their readers. Every check writes its result through these.
 */
#include "result.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *assay_verdict_str(enum assay_verdict v)
{
    switch (v) {
    case ASSAY_VERDICT_PASS: return "PASS";
    case ASSAY_VERDICT_FAIL: return "FAIL";
    case ASSAY_VERDICT_SKIP: return "SKIP";
    case ASSAY_VERDICT_ERROR: return "ERROR";
    }
    return "?";
}

const char *assay_family_str(enum assay_family f)
{
    switch (f) {
    case ASSAY_FAMILY_EQUIVALENCE: return "equivalence";
    case ASSAY_FAMILY_DISTRIBUTIONAL: return "distributional";
    case ASSAY_FAMILY_PROPERTY: return "property";
    case ASSAY_FAMILY_SEEDED: return "seeded";
    }
    return "?";
}

bool assay_family_by_name(const char *name, enum assay_family *out)
{
    static const enum assay_family all[] = {ASSAY_FAMILY_EQUIVALENCE, ASSAY_FAMILY_DISTRIBUTIONAL,
                                             ASSAY_FAMILY_PROPERTY, ASSAY_FAMILY_SEEDED};
    for (size_t i = 0; name != NULL && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, assay_family_str(all[i])) == 0) {
            *out = all[i];
            return true;
        }
    }
    return false;
}

const char *assay_check_fired_str(bool rule_fired, bool statistic_fired)
{
    if (rule_fired) {
        return statistic_fired ? "rule and statistic" : "rule only";
    }
    return statistic_fired ? "statistic" : "";
}

void assay_check_result_init(struct assay_check_result *r, const char *name,
                             enum assay_family family)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->family = family;
    r->verdict = ASSAY_VERDICT_PASS;
    r->tie_tol = NAN;
    r->max_tie_gap = NAN;
    r->max_logit_diff = NAN;
    r->logprob_diff_max = NAN;
    r->logprob_diff_median = NAN;
    r->logprob_diff_p99 = NAN;
    r->logprob_diff_mean = NAN;
    r->top1_agreement = NAN;
    r->kld_server = NAN;
    r->kld_reference = NAN;
    r->kld_ratio = NAN;
    r->kld_ratio_se = NAN;
    r->kld_ratio_lower = NAN;
    r->kld_budget = NAN;
    r->alpha = NAN;
    r->statistic = NAN;
    r->p_value = NAN;
    r->p_adjusted = NAN;
    r->min_tv = NAN;
    r->power = NAN;
    r->tol.budget = NAN;
    r->tol.reference = NAN;
    r->tol.boundary = NAN;
    r->tol.estimate = NAN;
    r->tol.ci_lo = NAN;
    r->tol.ci_hi = NAN;
    r->tol.min_excess = NAN;
}

static int severity(enum assay_verdict v)
{
    switch (v) {
    case ASSAY_VERDICT_PASS: return 0;
    case ASSAY_VERDICT_SKIP: return 1;
    case ASSAY_VERDICT_ERROR: return 2;
    case ASSAY_VERDICT_FAIL: return 3;
    }
    return 0;
}

static void raise_to(struct assay_check_result *res, enum assay_verdict v, const char *fmt,
                     va_list ap)
{
    if (severity(v) <= severity(res->verdict)) {
        return; /* not higher: the verdict and its first reason stand */
    }
    res->verdict = v;
    vsnprintf(res->failure, sizeof res->failure, fmt, ap);
}

void assay_check_fail(struct assay_check_result *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    raise_to(res, ASSAY_VERDICT_FAIL, fmt, ap);
    va_end(ap);
}

void assay_check_skip(struct assay_check_result *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    raise_to(res, ASSAY_VERDICT_SKIP, fmt, ap);
    va_end(ap);
}

void assay_check_error(struct assay_check_result *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    raise_to(res, ASSAY_VERDICT_ERROR, fmt, ap);
    va_end(ap);
}

void assay_check_set(struct assay_check_result *res, enum assay_verdict v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    raise_to(res, v, fmt, ap);
    va_end(ap);
}
