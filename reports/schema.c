/*
 * schema.c - reading and checking JSON by dotted path (schema.h):
 * assay_json_path, _num, _str and _bool read a field, assay_json_require
 * checks that every required field is present with an accepted type and
 * names the first that is not. The validators of the report, the stamp,
 * the kill matrix and the audit and compare members are built on it.
 */
#include "schema.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const cJSON *assay_json_path(const cJSON *root, const char *path)
{
    const cJSON *cur = root;
    const char *p = path;
    char key[128];
    while (cur != NULL && *p != '\0') {
        size_t n = strcspn(p, ".");
        if (n >= sizeof key || !cJSON_IsObject(cur)) {
            return NULL;
        }
        memcpy(key, p, n);
        key[n] = '\0';
        cur = cJSON_GetObjectItemCaseSensitive(cur, key);
        p += n;
        if (*p == '.') {
            p++;
        }
    }
    return cur;
}

double assay_json_num(const cJSON *root, const char *path)
{
    const cJSON *item = assay_json_path(root, path);
    return cJSON_IsNumber(item) ? item->valuedouble : NAN;
}

const char *assay_json_str(const cJSON *root, const char *path, const char *fallback)
{
    const cJSON *item = assay_json_path(root, path);
    return cJSON_IsString(item) && item->valuestring != NULL ? item->valuestring : fallback;
}

int assay_json_bool(const cJSON *root, const char *path)
{
    const cJSON *item = assay_json_path(root, path);
    return cJSON_IsBool(item) ? (cJSON_IsTrue(item) ? 1 : 0) : -1;
}

char *assay_json_kinds_str(int kinds, char *buf, size_t size)
{
    static const struct {
        int kind;
        const char *name;
    } names[] = {
        {ASSAY_JSON_STRING, "a string"}, {ASSAY_JSON_NUMBER, "a number"},
        {ASSAY_JSON_BOOL, "true or false"}, {ASSAY_JSON_OBJECT, "an object"},
        {ASSAY_JSON_ARRAY, "an array"},  {ASSAY_JSON_NULL, "null"},
    };
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if ((kinds & names[i].kind) != 0 && used < size) {
            int w = snprintf(buf + used, size - used, "%s%s", used > 0 ? " or " : "", names[i].name);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    return buf;
}

const char *assay_json_item_kind(const cJSON *item)
{
    if (item == NULL) {
        return "nothing (missing)";
    }
    if (cJSON_IsString(item)) {
        return "a string";
    }
    if (cJSON_IsNumber(item)) {
        return "a number";
    }
    if (cJSON_IsBool(item)) {
        return "a boolean";
    }
    if (cJSON_IsObject(item)) {
        return "an object";
    }
    if (cJSON_IsArray(item)) {
        return "an array";
    }
    if (cJSON_IsNull(item)) {
        return "null";
    }
    return "an invalid value";
}

static int item_kind(const cJSON *item)
{
    if (cJSON_IsString(item)) {
        return ASSAY_JSON_STRING;
    }
    if (cJSON_IsNumber(item)) {
        return ASSAY_JSON_NUMBER;
    }
    if (cJSON_IsBool(item)) {
        return ASSAY_JSON_BOOL;
    }
    if (cJSON_IsObject(item)) {
        return ASSAY_JSON_OBJECT;
    }
    if (cJSON_IsArray(item)) {
        return ASSAY_JSON_ARRAY;
    }
    if (cJSON_IsNull(item)) {
        return ASSAY_JSON_NULL;
    }
    return 0;
}

enum assay_status assay_json_require(const cJSON *root, const char *prefix,
                                     const struct assay_json_field *fields, size_t n,
                                     struct assay_diag *diag)
{
    for (size_t i = 0; i < n; i++) {
        const cJSON *item = assay_json_path(root, fields[i].path);
        if (item != NULL && (item_kind(item) & fields[i].kinds) != 0) {
            continue;
        }
        char where[160], expected[96];
        if (prefix != NULL && prefix[0] != '\0') {
            snprintf(where, sizeof where, "%s.%s", prefix, fields[i].path);
        } else {
            snprintf(where, sizeof where, "%s", fields[i].path);
        }
        assay_diag_set(diag, NULL, where, assay_json_kinds_str(fields[i].kinds, expected, sizeof expected),
                       "%s", assay_json_item_kind(item));
        return ASSAY_ERR_PARSE;
    }
    return ASSAY_OK;
}
