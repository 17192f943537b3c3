/*
 * text.h - a growing text buffer for building documents piece by piece
 * (the workloads the differential fuzzing and the seeded checks draw are
 * written as JSON text and read back through the one workload parser).
 *
 * Lifetime: zero-initialise, assay_text_put as often as needed, then
 * assay_text_free. A failed allocation is remembered: later puts do
 * nothing and `failed` stays true, so a caller checks once at the end.
 */
#ifndef ASSAY_TEXT_H
#define ASSAY_TEXT_H

#include <stdbool.h>
#include <stddef.h>

struct assay_text {
    char *s;    /* NUL-terminated once anything was put */
    size_t len, cap;
    bool failed;
};

void assay_text_put(struct assay_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void assay_text_free(struct assay_text *t);

#endif
