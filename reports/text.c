/*
 * text.c - the renderers' growable text buffer (text.h): appending raw,
 * printf-style, HTML-escaped or Markdown-escaped text with a sticky
 * out-of-memory status checked once (assay_text_status, _take), and
 * formatting numbers and seconds for tables. The HTML, Markdown, SVG and
 * kill-matrix renderers write through it.
 */
#include "text.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"

void assay_text_init(struct assay_text *t)
{
    t->data = NULL;
    t->len = 0;
    t->cap = 0;
    t->status = ASSAY_OK;
}

void assay_text_release(struct assay_text *t)
{
    if (t == NULL) {
        return;
    }
    assay_free(t->data);
    assay_text_init(t);
}

enum assay_status assay_text_status(const struct assay_text *t)
{
    return t->status;
}

/* Make room for n more bytes and the NUL. */
static int reserve(struct assay_text *t, size_t n)
{
    if (t->status != ASSAY_OK) {
        return 0;
    }
    if (n > ((size_t)-1) / 2 - t->len) {
        t->status = ASSAY_ERR_NOMEM;
        return 0;
    }
    size_t need = t->len + n + 1;
    if (need <= t->cap) {
        return 1;
    }
    size_t cap = t->cap < 256 ? 256 : t->cap;
    while (cap < need) {
        cap *= 2;
    }
    char *p = assay_realloc(t->data, cap);
    if (p == NULL) {
        t->status = ASSAY_ERR_NOMEM;
        return 0;
    }
    t->data = p;
    t->cap = cap;
    return 1;
}

void assay_text_append(struct assay_text *t, const char *s, size_t n)
{
    if (!reserve(t, n)) {
        return;
    }
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = '\0';
}

void assay_text_puts(struct assay_text *t, const char *s)
{
    assay_text_append(t, s, strlen(s));
}

void assay_text_printf(struct assay_text *t, const char *fmt, ...)
{
    if (t->status != ASSAY_OK) {
        return;
    }
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if ((size_t)n < sizeof small) {
        assay_text_append(t, small, (size_t)n);
        return;
    }
    if (!reserve(t, (size_t)n)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(t->data + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

void assay_text_html(struct assay_text *t, const char *s)
{
    const char *run = s;
    for (const char *p = s; *p != '\0'; p++) {
        const char *rep = NULL;
        switch (*p) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default: break;
        }
        if (rep != NULL) {
            assay_text_append(t, run, (size_t)(p - run));
            assay_text_puts(t, rep);
            run = p + 1;
        }
    }
    assay_text_puts(t, run);
}

void assay_text_md(struct assay_text *t, const char *s)
{
    const char *run = s;
    for (const char *p = s; *p != '\0'; p++) {
        const char *rep = NULL;
        switch (*p) {
        case '|': rep = "\\|"; break;
        case '`': rep = "\\`"; break;
        case '\\': rep = "\\\\"; break;
        case '\n':
        case '\r': rep = " "; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '&': rep = "&amp;"; break;
        default: break;
        }
        if (rep != NULL) {
            assay_text_append(t, run, (size_t)(p - run));
            assay_text_puts(t, rep);
            run = p + 1;
        }
    }
    assay_text_puts(t, run);
}

enum assay_status assay_text_take(struct assay_text *t, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (t->status != ASSAY_OK) {
        assay_text_release(t);
        return ASSAY_ERR_NOMEM;
    }
    if (t->data == NULL) {
        char *empty = assay_malloc(1);
        if (empty == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        empty[0] = '\0';
        *out = empty;
        return ASSAY_OK;
    }
    *out = t->data;
    *len = t->len;
    assay_text_init(t);
    return ASSAY_OK;
}

char *assay_text_num(char *buf, size_t size, double v, int sig)
{
    if (!isfinite(v)) {
        snprintf(buf, size, "\xe2\x80\x94");
    } else {
        snprintf(buf, size, "%.*g", sig, v);
    }
    return buf;
}

char *assay_text_seconds(char *buf, size_t size, double s)
{
    double a = fabs(s);
    if (!isfinite(s)) {
        snprintf(buf, size, "\xe2\x80\x94");
    } else if (a == 0.0) {
        snprintf(buf, size, "0 s");
    } else if (a < 1e-6) {
        snprintf(buf, size, "%.0f ns", s * 1e9);
    } else if (a < 1e-3) {
        snprintf(buf, size, "%.3g \xc2\xb5s", s * 1e6);
    } else if (a < 1.0) {
        snprintf(buf, size, "%.3g ms", s * 1e3);
    } else {
        snprintf(buf, size, "%.4g s", s);
    }
    return buf;
}
