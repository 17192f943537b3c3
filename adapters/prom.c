/*
 * prom.c - reading one gauge from a Prometheus text metrics page (prom.h):
 * assay_prom_sum parses the page's lines, labels and escapes included, and
 * sums the samples of one metric over its label sets. The audit
 * (checks/audit.c) reads a server's requests running and waiting and its KV
 * cache use with it.
 */
#include "prom.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The end of the label block that starts at p ('{'), or NULL when the line
 * ends first. Quotes may hold '}' and escaped quotes. */
static const char *skip_labels(const char *p, const char *end)
{
    bool quoted = false;
    for (p++; p < end; p++) {
        if (quoted) {
            if (*p == '\\' && p + 1 < end) {
                p++;
            } else if (*p == '"') {
                quoted = false;
            }
        } else if (*p == '"') {
            quoted = true;
        } else if (*p == '}') {
            return p + 1;
        }
    }
    return NULL;
}

/* Parse one number token at p (up to a space or the line's end). */
static bool parse_value(const char *p, const char *end, double *out)
{
    char buf[64];
    size_t n = 0;
    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }
    while (p < end && *p != ' ' && *p != '\t' && n + 1 < sizeof buf) {
        buf[n++] = *p++;
    }
    buf[n] = '\0';
    if (n == 0) {
        return false;
    }
    if (strcmp(buf, "NaN") == 0) {
        *out = NAN;
        return true;
    }
    if (strcmp(buf, "+Inf") == 0 || strcmp(buf, "Inf") == 0) {
        *out = INFINITY;
        return true;
    }
    if (strcmp(buf, "-Inf") == 0) {
        *out = -INFINITY;
        return true;
    }
    char *e = NULL;
    double v = strtod(buf, &e);
    if (e == buf || *e != '\0') {
        return false;
    }
    *out = v;
    return true;
}

int32_t assay_prom_sum(const char *text, size_t len, const char *name, double *sum)
{
    *sum = 0.0;
    if (text == NULL || name == NULL || name[0] == '\0') {
        return 0;
    }
    size_t nlen = strlen(name);
    int32_t found = 0;
    const char *p = text, *stop = text + len;
    while (p < stop) {
        const char *eol = memchr(p, '\n', (size_t)(stop - p));
        const char *end = eol != NULL ? eol : stop;
        if (end > p && end[-1] == '\r') {
            end--;
        }
        const char *q = p;
        while (q < end && (*q == ' ' || *q == '\t')) {
            q++;
        }
        if (q < end && *q != '#' && (size_t)(end - q) > nlen && memcmp(q, name, nlen) == 0 &&
            (q[nlen] == ' ' || q[nlen] == '\t' || q[nlen] == '{')) {
            const char *v = q + nlen;
            if (*v == '{') {
                v = skip_labels(v, end);
            }
            double x;
            if (v != NULL && parse_value(v, end, &x)) {
                *sum += x;
                found++;
            }
        }
        p = eol != NULL ? eol + 1 : stop;
    }
    return found;
}
