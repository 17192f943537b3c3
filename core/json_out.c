/*
 * json_out.c - the cJSON helpers every JSON writer and reader of assay uses
 * (json_out.h): assay_json_add_num writes a non-finite number as null,
 * assay_json_add_str a NULL string as "", assay_json_add_bool a bool; each
 * leaves the object unchanged on failure. assay_json_kind_of names a JSON
 * value's kind for a diagnostic's "got".
 */
#include "json_out.h"

#include <math.h>

bool assay_json_add_num(cJSON *o, const char *key, double v)
{
    cJSON *item = isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
    if (item == NULL || !cJSON_AddItemToObject(o, key, item)) {
        cJSON_Delete(item);
        return false;
    }
    return true;
}

bool assay_json_add_str(cJSON *o, const char *key, const char *v)
{
    return cJSON_AddStringToObject(o, key, v != NULL ? v : "") != NULL;
}

bool assay_json_add_bool(cJSON *o, const char *key, bool v)
{
    return cJSON_AddBoolToObject(o, key, v) != NULL;
}

const char *assay_json_kind_of(const cJSON *j)
{
    if (j == NULL) {
        return "nothing (missing)";
    }
    if (cJSON_IsNumber(j)) {
        return "a number";
    }
    if (cJSON_IsString(j)) {
        return "a string";
    }
    if (cJSON_IsBool(j)) {
        return "a boolean";
    }
    if (cJSON_IsNull(j)) {
        return "null";
    }
    if (cJSON_IsArray(j)) {
        return "an array";
    }
    if (cJSON_IsObject(j)) {
        return "an object";
    }
    return "something else";
}
