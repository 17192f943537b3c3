/*
 * spec_value.c - reading an engine spec option's value (spec_value.h):
 * assay_spec_int (an integer in a range), assay_spec_onoff (on or off) and
 * assay_spec_bad, which fills the diagnostic and returns ASSAY_ERR_INVALID.
 * Shared by the bundled (spec.c) and openai (openai_spec.c) spec parsers.
 */
#include "spec_value.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum assay_status assay_spec_bad(struct assay_diag *diag, const char *key, const char *expected,
                                 const char *got)
{
    assay_diag_set(diag, "engine spec", key, expected, "%s", got);
    return ASSAY_ERR_INVALID;
}

enum assay_status assay_spec_int(struct assay_diag *diag, const char *key, const char *v,
                                 long long lo, long long hi, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
        char expected[96];
        snprintf(expected, sizeof expected, "an integer in %lld..%lld", lo, hi);
        return assay_spec_bad(diag, key, expected, v);
    }
    *out = x;
    return ASSAY_OK;
}

enum assay_status assay_spec_onoff(struct assay_diag *diag, const char *key, const char *v,
                                   bool *out)
{
    if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0) {
        *out = true;
    } else if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0) {
        *out = false;
    } else {
        return assay_spec_bad(diag, key, "on or off", v);
    }
    return ASSAY_OK;
}
