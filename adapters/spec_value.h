/*
 * spec_value.h - the values of an engine spec's key=value options, read one
 * way for every engine (bundled, openai): a bad value is named in diag
 * ("engine spec", the key, what was expected, what was given) and gives
 * ASSAY_ERR_INVALID.
 */
#ifndef ASSAY_SPEC_VALUE_H
#define ASSAY_SPEC_VALUE_H

#include <stdbool.h>

#include "../core/status.h"

/* A decimal integer in lo..hi. */
enum assay_status assay_spec_int(struct assay_diag *diag, const char *key, const char *v,
                                 long long lo, long long hi, long long *out);

/* "on"/"1" or "off"/"0". */
enum assay_status assay_spec_onoff(struct assay_diag *diag, const char *key, const char *v,
                                   bool *out);

/* Name a bad value of key in diag; returns ASSAY_ERR_INVALID. */
enum assay_status assay_spec_bad(struct assay_diag *diag, const char *key, const char *expected,
                                 const char *got);

#endif
