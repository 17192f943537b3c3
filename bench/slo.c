/*
 * slo.c - reading an SLO file (slo.h): assay_slo_parse checks an
 * "assay-slo" JSON object member by member and reports where and what is
 * wrong; assay_slo_load reads it from a path. The result is plain data. The
 * benchmark commands load one (cli/bench_cli.c) to measure goodput.
 */
#include "slo.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/json_out.h"

/* An SLO file is a few lines; anything this large is not one. */
#define SLO_MAX_BYTES (1 << 20)

static enum assay_status slo_bound(const cJSON *root, const char *key, const char *file,
                                   double *out, struct assay_diag *diag)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!cJSON_IsNumber(j)) {
        assay_diag_set(diag, file, key, "a number of seconds > 0", "%s", assay_json_kind_of(j));
        return ASSAY_ERR_PARSE;
    }
    double v = cJSON_GetNumberValue(j);
    if (!(isfinite(v) && v > 0.0)) {
        assay_diag_set(diag, file, key, "a number of seconds > 0", "%g", v);
        return ASSAY_ERR_PARSE;
    }
    *out = v;
    return ASSAY_OK;
}

static enum assay_status slo_check_members(const cJSON *root, const char *file,
                                           struct assay_diag *diag)
{
    static const char *const known[] = {"format", "version", "ttft_s", "tpot_s", "description"};
    const size_t n_known = sizeof known / sizeof known[0];
    int seen[sizeof known / sizeof known[0]] = {0};
    for (const cJSON *c = root->child; c != NULL; c = c->next) {
        size_t k = 0;
        while (k < n_known && strcmp(c->string, known[k]) != 0) {
            k++;
        }
        if (k == n_known) {
            assay_diag_set(diag, file, c->string,
                           "only format, version, ttft_s, tpot_s and description",
                           "an unknown member \"%s\"", c->string);
            return ASSAY_ERR_PARSE;
        }
        if (seen[k]++) {
            assay_diag_set(diag, file, c->string, "each member once", "\"%s\" twice", c->string);
            return ASSAY_ERR_PARSE;
        }
    }
    return ASSAY_OK;
}

static enum assay_status slo_from_json(const cJSON *root, const char *file, struct assay_slo *out,
                                       struct assay_diag *diag)
{
    if (!cJSON_IsObject(root)) {
        assay_diag_set(diag, file, "", "a JSON object", "%s", assay_json_kind_of(root));
        return ASSAY_ERR_PARSE;
    }
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(format)) {
        assay_diag_set(diag, file, "format", "\"assay-slo\"", "%s", assay_json_kind_of(format));
        return ASSAY_ERR_PARSE;
    }
    if (strcmp(format->valuestring, "assay-slo") != 0) {
        assay_diag_set(diag, file, "format", "\"assay-slo\"", "\"%s\"", format->valuestring);
        return ASSAY_ERR_PARSE;
    }
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsNumber(version)) {
        assay_diag_set(diag, file, "version", "the number 1", "%s", assay_json_kind_of(version));
        return ASSAY_ERR_PARSE;
    }
    if (cJSON_GetNumberValue(version) != ASSAY_SLO_VERSION) {
        assay_diag_set(diag, file, "version",
                       "version 1 (rewrite the file as {\"format\": \"assay-slo\", \"version\": 1, "
                       "\"ttft_s\": ..., \"tpot_s\": ...})",
                       "%g", cJSON_GetNumberValue(version));
        return ASSAY_ERR_PARSE;
    }
    enum assay_status st = slo_check_members(root, file, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(root, "description");
    if (desc != NULL && !cJSON_IsString(desc)) {
        assay_diag_set(diag, file, "description", "a string", "%s", assay_json_kind_of(desc));
        return ASSAY_ERR_PARSE;
    }
    struct assay_slo slo;
    st = slo_bound(root, "ttft_s", file, &slo.ttft_s, diag);
    if (st == ASSAY_OK) {
        st = slo_bound(root, "tpot_s", file, &slo.tpot_s, diag);
    }
    if (st == ASSAY_OK) {
        *out = slo;
    }
    return st;
}

/* A strict JSON syntax check (RFC 8259) that allocates nothing. cJSON
 * returns NULL both for malformed text and for a failed allocation; text
 * that passes this check and still fails in cJSON ran out of memory. The
 * check is at least as strict as cJSON (no leading '+', no "01" or "1.",
 * no raw control characters in strings, surrogate pairs checked, nesting
 * at most JSON_MAX_DEPTH), so the two never disagree the other way. */
#define JSON_MAX_DEPTH 64

struct json_scan {
    const char *s;
    size_t len;
    size_t pos;
};

static void json_ws(struct json_scan *j)
{
    while (j->pos < j->len && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' ||
                               j->s[j->pos] == '\n' || j->s[j->pos] == '\r')) {
        j->pos++;
    }
}

static bool json_peek(const struct json_scan *j, char c)
{
    return j->pos < j->len && j->s[j->pos] == c;
}

static bool json_digit(const struct json_scan *j)
{
    return j->pos < j->len && j->s[j->pos] >= '0' && j->s[j->pos] <= '9';
}

static bool json_hex4(struct json_scan *j, unsigned *out)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++, j->pos++) {
        if (j->pos >= j->len) {
            return false;
        }
        char c = j->s[j->pos];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d == 16u) {
            return false;
        }
        v = 16 * v + d;
    }
    *out = v;
    return true;
}

static bool json_string(struct json_scan *j)
{
    j->pos++; /* the opening quote */
    while (j->pos < j->len) {
        unsigned char c = (unsigned char)j->s[j->pos];
        if (c == '"') {
            j->pos++;
            return true;
        }
        if (c < 0x20) {
            return false;
        }
        if (c != '\\') {
            j->pos++;
            continue;
        }
        j->pos++;
        if (j->pos >= j->len) {
            return false;
        }
        char e = j->s[j->pos];
        if (e != 'u') {
            if (strchr("\"\\/bfnrt", e) == NULL || e == '\0') {
                return false;
            }
            j->pos++;
            continue;
        }
        j->pos++;
        unsigned u = 0, lo = 0;
        if (!json_hex4(j, &u) || (u >= 0xDC00 && u <= 0xDFFF)) {
            return false;
        }
        if (u >= 0xD800 && u <= 0xDBFF) {
            if (!json_peek(j, '\\')) {
                return false;
            }
            j->pos++;
            if (!json_peek(j, 'u')) {
                return false;
            }
            j->pos++;
            if (!json_hex4(j, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                return false;
            }
        }
    }
    return false;
}

static bool json_number(struct json_scan *j)
{
    if (json_peek(j, '-')) {
        j->pos++;
    }
    if (json_peek(j, '0')) {
        j->pos++;
    } else if (json_digit(j)) {
        while (json_digit(j)) {
            j->pos++;
        }
    } else {
        return false;
    }
    if (json_peek(j, '.')) {
        j->pos++;
        if (!json_digit(j)) {
            return false;
        }
        while (json_digit(j)) {
            j->pos++;
        }
    }
    if (json_peek(j, 'e') || json_peek(j, 'E')) {
        j->pos++;
        if (json_peek(j, '+') || json_peek(j, '-')) {
            j->pos++;
        }
        if (!json_digit(j)) {
            return false;
        }
        while (json_digit(j)) {
            j->pos++;
        }
    }
    return true;
}

static bool json_literal(struct json_scan *j, const char *word)
{
    size_t n = strlen(word);
    if (j->len - j->pos < n || memcmp(j->s + j->pos, word, n) != 0) {
        return false;
    }
    j->pos += n;
    return true;
}

/* One value with the whitespace around it; on false, j->pos is where the
 * text stops being JSON. */
static bool json_value(struct json_scan *j, int depth)
{
    json_ws(j);
    if (j->pos >= j->len) {
        return false;
    }
    char c = j->s[j->pos];
    bool ok;
    if (c == '{' || c == '[') {
        if (depth >= JSON_MAX_DEPTH) {
            return false;
        }
        char close = c == '{' ? '}' : ']';
        j->pos++;
        json_ws(j);
        if (json_peek(j, close)) {
            j->pos++;
            json_ws(j);
            return true;
        }
        for (;;) {
            if (c == '{') {
                json_ws(j);
                if (!json_peek(j, '"') || !json_string(j)) {
                    return false;
                }
                json_ws(j);
                if (!json_peek(j, ':')) {
                    return false;
                }
                j->pos++;
            }
            if (!json_value(j, depth + 1)) {
                return false;
            }
            if (json_peek(j, close)) {
                j->pos++;
                break;
            }
            if (!json_peek(j, ',')) {
                return false;
            }
            j->pos++;
        }
        ok = true;
    } else if (c == '"') {
        ok = json_string(j);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        ok = json_number(j);
    } else {
        ok = json_literal(j, "true") || json_literal(j, "false") || json_literal(j, "null");
    }
    if (ok) {
        json_ws(j);
    }
    return ok;
}

enum assay_status assay_slo_parse(const char *json, size_t len, const char *file,
                                  struct assay_slo *out, struct assay_diag *diag)
{
    assay_diag_clear(diag);
    const char *name = file != NULL ? file : "";
    if (json == NULL) {
        assay_diag_set(diag, name, "", "JSON text", "nothing");
        return ASSAY_ERR_PARSE;
    }
    struct json_scan scan = {json, len, 0};
    bool syntax_ok = json_value(&scan, 0);
    if (!syntax_ok || scan.pos < len) {
        char where[96];
        assay_diag_position(json, len, scan.pos, where, sizeof where);
        if (scan.pos >= len) {
            assay_diag_set(diag, name, where, "a complete JSON object", "the end of the input");
        } else if (syntax_ok) {
            assay_diag_set(diag, name, where, "the end of the input after the object", "'%c'",
                           json[scan.pos]);
        } else if ((unsigned char)json[scan.pos] < 0x20 || (unsigned char)json[scan.pos] >= 0x7f) {
            assay_diag_set(diag, name, where, "well-formed JSON", "byte 0x%02x",
                           (unsigned)(unsigned char)json[scan.pos]);
        } else {
            assay_diag_set(diag, name, where, "well-formed JSON", "'%c'", json[scan.pos]);
        }
        return ASSAY_ERR_PARSE;
    }
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, NULL, false);
    if (root == NULL) {
        return ASSAY_ERR_NOMEM; /* the text is well-formed (checked above) */
    }
    enum assay_status st = slo_from_json(root, name, out, diag);
    cJSON_Delete(root);
    return st;
}

enum assay_status assay_slo_load(const char *path, struct assay_slo *out, struct assay_diag *diag)
{
    assay_diag_clear(diag);
    if (path == NULL) {
        assay_diag_set(diag, "", "", "a path", "nothing");
        return ASSAY_ERR_IO;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        assay_diag_set(diag, path, "", "a readable SLO file", "%s", strerror(errno));
        return ASSAY_ERR_IO;
    }
    char *buf = assay_malloc(SLO_MAX_BYTES + 1);
    if (buf == NULL) {
        fclose(f);
        return ASSAY_ERR_NOMEM;
    }
    size_t got = fread(buf, 1, SLO_MAX_BYTES + 1, f);
    bool failed = ferror(f) != 0;
    fclose(f);
    enum assay_status st;
    if (failed) {
        assay_diag_set(diag, path, "", "a readable SLO file", "a read error");
        st = ASSAY_ERR_IO;
    } else if (got > SLO_MAX_BYTES) {
        assay_diag_set(diag, path, "", "an SLO file of at most 1 MiB", "a larger file");
        st = ASSAY_ERR_PARSE;
    } else {
        st = assay_slo_parse(buf, got, path, out, diag);
    }
    assay_free(buf);
    return st;
}
