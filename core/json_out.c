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
