/*
 * schema.h - checking that a JSON document has the fields a schema requires,
 * with the JSON type each must have, and saying which one is wrong.
 *
 * A field is named by a dotted path from the object being checked
 * ("libraries.openblas.core"); its kind says which JSON types are accepted.
 * Used by the stamp (reports/stamp.h) and the report (reports/report.h).
 */
#ifndef ASSAY_SCHEMA_H
#define ASSAY_SCHEMA_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "../core/status.h"

/* Accepted JSON types, as a bit set. */
enum assay_json_kind {
    ASSAY_JSON_STRING = 1,
    ASSAY_JSON_NUMBER = 2,
    ASSAY_JSON_BOOL = 4,
    ASSAY_JSON_OBJECT = 8,
    ASSAY_JSON_ARRAY = 16,
    ASSAY_JSON_NULL = 32,
};

struct assay_json_field {
    const char *path; /* dotted path, e.g. "assay.source_sha256" */
    int kinds;        /* an OR of enum assay_json_kind */
};

/* The member at a dotted path under root, or NULL (a path through a
 * non-object, or a missing member). */
const cJSON *assay_json_path(const cJSON *root, const char *path);

/* The number at path, or NaN when it is missing, null or not a number. */
double assay_json_num(const cJSON *root, const char *path);

/* The string at path, or `fallback` when it is missing or not a string
 * (borrowed from root). */
const char *assay_json_str(const cJSON *root, const char *path, const char *fallback);

/* The boolean at path: 1 true, 0 false, -1 missing or not a boolean. */
int assay_json_bool(const cJSON *root, const char *path);

/* "a string", "a number or null", ... for kinds, into buf. Returns buf. */
char *assay_json_kinds_str(int kinds, char *buf, size_t size);

/* "a string", "null", "an array", ... for an item (NULL: "nothing"). */
const char *assay_json_item_kind(const cJSON *item);

/*
 * Check n fields under root. Returns ASSAY_OK, or ASSAY_ERR_PARSE with diag
 * (may be NULL) naming the first offending field as prefix + "." + path
 * (just path when prefix is NULL or empty), what was expected and what was
 * found.
 */
enum assay_status assay_json_require(const cJSON *root, const char *prefix,
                                     const struct assay_json_field *fields, size_t n,
                                     struct assay_diag *diag);

#endif
