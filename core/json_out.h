/*
 * json_out.h - adding members to a cJSON object the way every JSON writer
 * of assay does: a number that is not finite is written as null (JSON has
 * no NaN or infinity), a NULL string as "".
 *
 * Each returns false when the member could not be added (allocation
 * failure); the object is then unchanged. And the words every JSON reader
 * of assay uses to name what it found instead of what it expected.
 */
#ifndef ASSAY_JSON_OUT_H
#define ASSAY_JSON_OUT_H

#include <stdbool.h>

#include <cjson/cJSON.h>

bool assay_json_add_num(cJSON *o, const char *key, double v);
bool assay_json_add_str(cJSON *o, const char *key, const char *v);
bool assay_json_add_bool(cJSON *o, const char *key, bool v);

/* What j is, for a diagnostic: "a number", "an object", "nothing (missing)"
 * for NULL. */
const char *assay_json_kind_of(const cJSON *j);

#endif
