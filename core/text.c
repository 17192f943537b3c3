/*
 * text.c - a growing text buffer (text.h): assay_text_put appends printf
 * style, doubling the buffer as needed and remembering a failed allocation
 * so the caller checks once; assay_text_free releases it. The fuzzing and
 * seeded checks write the workloads they draw as JSON text with it.
 */
#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

void assay_text_put(struct assay_text *t, const char *fmt, ...)
{
    if (t->failed) {
        return;
    }
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s != NULL ? t->s + t->len : NULL, t->s != NULL ? t->cap - t->len : 0,
                          fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if (t->s != NULL && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap > 0 ? t->cap : 4096;
        while (cap <= t->len + (size_t)n) {
            cap *= 2;
        }
        char *s = assay_realloc(t->s, cap);
        if (s == NULL) {
            t->failed = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

void assay_text_free(struct assay_text *t)
{
    assay_free(t->s);
    memset(t, 0, sizeof *t);
}
