/*
 * status.c - status names and diagnostics (status.h): assay_status_str, and
 * filling, placing and formatting a struct assay_diag (assay_diag_set,
 * assay_diag_position turning a byte offset into line and column,
 * assay_diag_format rendering "file: where: expected E, got G" for cli/).
 */
#include "status.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

const char *assay_status_str(enum assay_status status)
{
    switch (status) {
    case ASSAY_OK: return "ok";
    case ASSAY_ERR_NOMEM: return "out of memory";
    case ASSAY_ERR_INVALID: return "invalid argument";
    case ASSAY_ERR_IO: return "input/output error";
    case ASSAY_ERR_PARSE: return "malformed input";
    case ASSAY_ERR_FULL: return "capacity exhausted";
    case ASSAY_ERR_NOT_FOUND: return "not found";
    case ASSAY_ERR_DUPLICATE: return "duplicate id";
    case ASSAY_ERR_UNSUPPORTED: return "unsupported";
    case ASSAY_ERR_NUMERIC: return "numeric failure";
    case ASSAY_ERR_NET: return "network error";
    case ASSAY_ERR_TIMEOUT: return "timed out";
    case ASSAY_ERR_INTERNAL: return "internal invariant broken";
    }
    return "unknown status";
}

static void copy_field(char *dst, size_t size, const char *src)
{
    if (src == NULL) {
        return;
    }
    snprintf(dst, size, "%s", src);
}

void assay_diag_clear(struct assay_diag *diag)
{
    if (diag != NULL) {
        memset(diag, 0, sizeof *diag);
    }
}

void assay_diag_set(struct assay_diag *diag, const char *file, const char *where,
                    const char *expected, const char *got_fmt, ...)
{
    if (diag == NULL) {
        return;
    }
    copy_field(diag->file, sizeof diag->file, file);
    diag->where[0] = '\0';
    copy_field(diag->where, sizeof diag->where, where);
    diag->expected[0] = '\0';
    copy_field(diag->expected, sizeof diag->expected, expected);
    diag->got[0] = '\0';
    if (got_fmt != NULL) {
        va_list ap;
        va_start(ap, got_fmt);
        vsnprintf(diag->got, sizeof diag->got, got_fmt, ap);
        va_end(ap);
    }
}

char *assay_diag_position(const char *text, size_t len, size_t off, char *buf, size_t size)
{
    if (off > len) {
        off = len;
    }
    size_t line = 1, col = 1;
    for (size_t i = 0; text != NULL && i < off; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    if (size > 0) {
        snprintf(buf, size, "byte %zu (line %zu, column %zu)", off, line, col);
    }
    return buf;
}

static bool json_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Whether byte `at` of a JSON text lies directly inside an object (not an
 * array, not a string): the innermost bracket open before it is '{'. */
static bool json_in_object(const char *text, size_t at)
{
    char open[256];
    size_t depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < at; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\') {
                i++;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (depth == sizeof open) {
                return false; /* nested deeper than 256: the offset stays cJSON's */
            }
            open[depth++] = c;
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        }
    }
    return !in_string && depth > 0 && open[depth - 1] == '{';
}

size_t assay_json_error_offset(const char *text, size_t len, const char *end)
{
    if (text == NULL || end == NULL || end < text) {
        return 0;
    }
    size_t off = (size_t)(end - text);
    if (off > len) {
        off = len;
    }
    if (off == 0 || text[off - 1] == '"' || json_blank(text[off - 1])) {
        return off;
    }
    /* The byte before is the culprit when a member name was expected
     * there: the last non-blank byte before it opens the object or ends
     * the previous member. */
    size_t i = off - 1;
    while (i > 0 && json_blank(text[i - 1])) {
        i--;
    }
    bool name_expected = i > 0 && (text[i - 1] == '{' || text[i - 1] == ',') &&
                         json_in_object(text, i - 1 + (text[i - 1] == '{'));
    return name_expected ? off - 1 : off;
}

char *assay_diag_format(const struct assay_diag *diag, char *buf, size_t size)
{
    if (size == 0) {
        return buf;
    }
    buf[0] = '\0';
    if (diag == NULL) {
        return buf;
    }
    size_t n = 0;
    const char *sep = "";
    if (diag->file[0] != '\0') {
        n += (size_t)snprintf(buf + n, size - n, "%s", diag->file);
        sep = ": ";
    }
    if (n < size && diag->where[0] != '\0') {
        n += (size_t)snprintf(buf + n, size - n, "%s%s", sep, diag->where);
        sep = ": ";
    }
    if (n < size && diag->expected[0] != '\0') {
        n += (size_t)snprintf(buf + n, size - n, "%sexpected %s", sep, diag->expected);
        sep = ", ";
    }
    if (n < size && diag->got[0] != '\0') {
        snprintf(buf + n, size - n, "%sgot %s", sep, diag->got);
    }
    return buf;
}
