/*
 * text.h - a growable text buffer for the renderers (HTML, Markdown, SVG),
 * with the escaping each of them needs.
 *
 * Errors are sticky: once an append fails for lack of memory, every later
 * append does nothing and assay_text_status() reports ASSAY_ERR_NOMEM, so a
 * renderer can append freely and check once at the end.
 *
 * Usage:
 *     struct assay_text t;
 *     assay_text_init(&t);
 *     assay_text_printf(&t, "<p>%d</p>", n);
 *     assay_text_html(&t, user_string);
 *     if (assay_text_status(&t) == ASSAY_OK) { use t.data, t.len }
 *     assay_text_release(&t);
 */
#ifndef ASSAY_TEXT_H
#define ASSAY_TEXT_H

#include <stddef.h>

#include "../core/status.h"

struct assay_text {
    char *data; /* NUL-terminated once anything was appended; may be NULL */
    size_t len;
    size_t cap;
    enum assay_status status;
};

/* An empty buffer (allocates nothing yet). */
void assay_text_init(struct assay_text *t);

/* Release the buffer (through core/alloc.h) and clear it; NULL-safe. */
void assay_text_release(struct assay_text *t);

/* ASSAY_OK, or ASSAY_ERR_NOMEM if any append failed. */
enum assay_status assay_text_status(const struct assay_text *t);

/* Append n bytes of s / a NUL-terminated string / printf-style text. */
void assay_text_append(struct assay_text *t, const char *s, size_t n);
void assay_text_puts(struct assay_text *t, const char *s);
void assay_text_printf(struct assay_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Append s escaped for HTML text and attribute values (& < > " '). */
void assay_text_html(struct assay_text *t, const char *s);

/* Append s for a Markdown table cell or line: | and ` and \ escaped,
 * newlines turned into spaces, < > & as HTML entities (GitHub renders raw
 * HTML in comments). */
void assay_text_md(struct assay_text *t, const char *s);

/*
 * Hand the text over: *out gets the buffer (allocated with assay_malloc;
 * free with assay_free), *len its length, and t is left empty. An empty
 * buffer hands over an allocated "". Returns ASSAY_ERR_NOMEM (and *out
 * NULL, t released) if an append failed or the empty string could not be
 * allocated.
 */
enum assay_status assay_text_take(struct assay_text *t, char **out, size_t *len);

/* Format a number for people: "%.*g" with sig significant digits, or "—"
 * for NaN/inf (the JSON's null). Returns buf. */
char *assay_text_num(char *buf, size_t size, double v, int sig);

/* A duration in seconds for people, with a unit that keeps 3-4 significant
 * digits: "812 ns", "41.2 µs", "3.46 ms", "1.254 s"; "—" for NaN. */
char *assay_text_seconds(char *buf, size_t size, double s);

#endif
