#include "result.h"

#include <math.h>
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
    }
    return "?";
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
    r->alpha = NAN;
    r->statistic = NAN;
    r->p_value = NAN;
    r->p_adjusted = NAN;
    r->min_tv = NAN;
    r->power = NAN;
}
