/*
 * sse.c - an incremental server-sent events parser (sse.h): assay_sse_init /
 * _free hold a parser within stated limits, assay_sse_feed takes bytes in
 * pieces of any size and returns each complete event, assay_sse_finish ends
 * the stream, and assay_sse_last_error says what went wrong. The openai
 * adapter (openai.c) reads every streamed response through it.
 */
#include "sse.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"

enum { SSE_MIN_LIMIT = 16, SSE_FIRST_CAP = 256 };

static const unsigned char k_bom[3] = {0xEF, 0xBB, 0xBF};

struct assay_sse_limits assay_sse_default_limits(void)
{
    struct assay_sse_limits lim = {ASSAY_SSE_DEFAULT_MAX_LINE, ASSAY_SSE_DEFAULT_MAX_DATA, false};
    return lim;
}

enum assay_status assay_sse_init(struct assay_sse_parser *p, const struct assay_sse_limits *lim)
{
    memset(p, 0, sizeof *p);
    p->lim = lim != NULL ? *lim : assay_sse_default_limits();
    p->retry_ms = -1;
    if (p->lim.max_line < SSE_MIN_LIMIT || p->lim.max_data < SSE_MIN_LIMIT) {
        p->failed = true;
        p->err.status = ASSAY_ERR_INVALID;
        snprintf(p->err.message, sizeof p->err.message, "SSE limits below %d bytes",
                 SSE_MIN_LIMIT);
        return ASSAY_ERR_INVALID;
    }
    return ASSAY_OK;
}

void assay_sse_free(struct assay_sse_parser *p)
{
    if (p == NULL) {
        return;
    }
    assay_free(p->line);
    assay_free(p->data);
    p->line = NULL;
    p->data = NULL;
    p->line_cap = 0;
    p->data_cap = 0;
}

void assay_sse_reset(struct assay_sse_parser *p)
{
    struct assay_sse_limits lim = p->lim;
    char *line = p->line, *data = p->data;
    size_t line_cap = p->line_cap, data_cap = p->data_cap;
    bool unusable = p->lim.max_line < SSE_MIN_LIMIT || p->lim.max_data < SSE_MIN_LIMIT;
    memset(p, 0, sizeof *p);
    p->lim = lim;
    p->line = line;
    p->data = data;
    p->line_cap = line_cap;
    p->data_cap = data_cap;
    p->retry_ms = -1;
    if (unusable) {
        p->failed = true;
        p->err.status = ASSAY_ERR_INVALID;
        snprintf(p->err.message, sizeof p->err.message, "SSE limits below %d bytes",
                 SSE_MIN_LIMIT);
    }
}

const struct assay_sse_error *assay_sse_last_error(const struct assay_sse_parser *p)
{
    return &p->err;
}

static enum assay_sse_result fail(struct assay_sse_parser *p, enum assay_status st,
                                  uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum assay_sse_result fail(struct assay_sse_parser *p, enum assay_status st,
                                  uint64_t offset, const char *fmt, ...)
{
    p->failed = true;
    p->err.status = st;
    p->err.offset = offset;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err.message, sizeof p->err.message, fmt, ap);
    va_end(ap);
    return ASSAY_SSE_ERROR;
}

/* Grow *buf to hold at least need bytes (need <= bound), doubling. */
static bool reserve(char **buf, size_t *cap, size_t need, size_t bound)
{
    if (need <= *cap) {
        return true;
    }
    size_t c = *cap > 0 ? *cap : SSE_FIRST_CAP;
    while (c < need) {
        c = c > bound / 2 ? bound : c * 2;
    }
    if (c < need) {
        c = need;
    }
    char *nb = assay_realloc(*buf, c);
    if (nb == NULL) {
        return false;
    }
    *buf = nb;
    *cap = c;
    return true;
}

/* A field name from the stream, made safe to show: printable ASCII only,
 * at most 32 characters. */
static void safe_name(const char *s, size_t n, char *out, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < size && k < 32; i++) {
        unsigned char c = (unsigned char)s[i];
        out[k++] = (c >= 0x20 && c < 0x7f && c != '"') ? (char)c : '?';
    }
    out[k] = '\0';
}

static bool field_is(const char *name, size_t n, const char *want)
{
    return strlen(want) == n && memcmp(name, want, n) == 0;
}

/* Process the complete line in p->line. Returns ASSAY_SSE_EVENT with *ev
 * filled when the line dispatches an event or is a comment. */
static enum assay_sse_result end_line(struct assay_sse_parser *p, struct assay_sse_event *ev,
                                      uint64_t at)
{
    size_t n = p->line_len;
    uint64_t start = p->line_start; /* where field errors point */
    p->line_len = 0;
    p->line[n] = '\0';
    if (n == 0) {
        p->event_open = false;
        if (!p->has_data) {
            p->type[0] = '\0';
            return ASSAY_SSE_NEED_MORE;
        }
        /* Remove the newline that the last data line appended. */
        p->data_len--;
        p->data[p->data_len] = '\0';
        snprintf(p->out_type, sizeof p->out_type, "%s", p->type[0] != '\0' ? p->type : "message");
        memset(ev, 0, sizeof *ev);
        ev->kind = ASSAY_SSE_MESSAGE;
        ev->data = p->data;
        ev->data_len = p->data_len;
        ev->type = p->out_type;
        ev->last_id = p->id;
        ev->done = p->data_len == 6 && memcmp(p->data, "[DONE]", 6) == 0;
        ev->retry_ms = p->retry_ms;
        ev->offset = at;
        p->type[0] = '\0';
        p->data_len = 0;
        p->has_data = false;
        p->n_events++;
        return ASSAY_SSE_EVENT;
    }
    if (p->line[0] == ':') {
        memset(ev, 0, sizeof *ev);
        ev->kind = ASSAY_SSE_COMMENT;
        ev->data = p->line + 1;
        ev->data_len = n - 1;
        ev->type = "";
        ev->last_id = p->id;
        ev->retry_ms = p->retry_ms;
        ev->offset = at;
        p->n_comments++;
        return ASSAY_SSE_EVENT;
    }
    p->event_open = true;
    const char *colon = memchr(p->line, ':', n);
    size_t name_len = colon != NULL ? (size_t)(colon - p->line) : n;
    const char *value = colon != NULL ? colon + 1 : p->line + n;
    size_t value_len = (size_t)(p->line + n - value);
    if (value_len > 0 && value[0] == ' ') {
        value++;
        value_len--;
    }
    if (field_is(p->line, name_len, "data")) {
        size_t need = p->data_len + value_len + 1;
        if (need > p->lim.max_data || need < p->data_len) {
            return fail(p, ASSAY_ERR_FULL, start, "SSE event data longer than %zu bytes",
                        p->lim.max_data);
        }
        if (!reserve(&p->data, &p->data_cap, need + 1, p->lim.max_data + 1)) {
            return fail(p, ASSAY_ERR_NOMEM, at, "out of memory for %zu bytes of SSE data",
                        need + 1);
        }
        memcpy(p->data + p->data_len, value, value_len);
        p->data_len += value_len;
        p->data[p->data_len++] = '\n';
        p->has_data = true;
    } else if (field_is(p->line, name_len, "event")) {
        if (value_len > ASSAY_SSE_MAX_TYPE) {
            return fail(p, ASSAY_ERR_FULL, start, "SSE event type longer than %d bytes",
                        ASSAY_SSE_MAX_TYPE);
        }
        memcpy(p->type, value, value_len);
        p->type[value_len] = '\0';
    } else if (field_is(p->line, name_len, "id")) {
        if (value_len > ASSAY_SSE_MAX_ID) {
            return fail(p, ASSAY_ERR_FULL, start, "SSE event id longer than %d bytes",
                        ASSAY_SSE_MAX_ID);
        }
        memcpy(p->id, value, value_len);
        p->id[value_len] = '\0';
    } else if (field_is(p->line, name_len, "retry")) {
        /* Digits only, else ignored (the standard); absurd values clamp. */
        int64_t v = 0;
        bool ok = value_len > 0;
        for (size_t i = 0; i < value_len && ok; i++) {
            ok = value[i] >= '0' && value[i] <= '9';
            if (ok && v < (int64_t)1 << 40) {
                v = v * 10 + (value[i] - '0');
            }
        }
        if (ok) {
            p->retry_ms = v;
        }
    } else if (p->lim.strict) {
        char name[40];
        safe_name(p->line, name_len, name, sizeof name);
        return fail(p, ASSAY_ERR_PARSE, start,
                    "not server-sent events: unknown field \"%s\" (expected data, event, id, "
                    "retry or a ':' comment)",
                    name);
    }
    return ASSAY_SSE_NEED_MORE;
}

/* Append one content byte to the current line. */
static enum assay_sse_result put_byte(struct assay_sse_parser *p, char c, uint64_t at)
{
    if (c == '\0') {
        return fail(p, ASSAY_ERR_PARSE, at, "NUL byte in server-sent events");
    }
    if (p->line_len >= p->lim.max_line) {
        return fail(p, ASSAY_ERR_FULL, at, "SSE line longer than %zu bytes",
                    p->lim.max_line);
    }
    if (!reserve(&p->line, &p->line_cap, p->line_len + 2, p->lim.max_line + 1)) {
        return fail(p, ASSAY_ERR_NOMEM, at, "out of memory for an SSE line of %zu bytes",
                    p->line_len + 2);
    }
    if (p->line_len == 0) {
        p->line_start = at;
    }
    p->line[p->line_len++] = c;
    return ASSAY_SSE_NEED_MORE;
}

enum assay_sse_result assay_sse_feed(struct assay_sse_parser *p, const char *buf, size_t n,
                                     size_t *used, struct assay_sse_event *event)
{
    *used = 0;
    if (p->failed) {
        return ASSAY_SSE_ERROR;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        uint64_t at = p->offset++;
        *used = i + 1;
        if (!p->bom_done) {
            if (c == k_bom[p->bom_seen]) {
                p->bom_seen++;
                p->bom_done = p->bom_seen == 3;
                continue;
            }
            /* Not a BOM after all: the bytes matched so far are content. */
            p->bom_done = true;
            for (uint8_t k = 0; k < p->bom_seen; k++) {
                if (put_byte(p, (char)k_bom[k], at) != ASSAY_SSE_NEED_MORE) {
                    return ASSAY_SSE_ERROR;
                }
            }
            p->bom_seen = 0;
        }
        enum assay_sse_result r = ASSAY_SSE_NEED_MORE;
        if (c == '\r') {
            p->after_cr = true;
            if (!reserve(&p->line, &p->line_cap, p->line_len + 1, p->lim.max_line + 1)) {
                return fail(p, ASSAY_ERR_NOMEM, at, "out of memory for an SSE line");
            }
            r = end_line(p, event, at);
        } else if (c == '\n') {
            if (p->after_cr) {
                p->after_cr = false;
                continue;
            }
            if (!reserve(&p->line, &p->line_cap, p->line_len + 1, p->lim.max_line + 1)) {
                return fail(p, ASSAY_ERR_NOMEM, at, "out of memory for an SSE line");
            }
            r = end_line(p, event, at);
        } else {
            p->after_cr = false;
            r = put_byte(p, (char)c, at);
        }
        if (r != ASSAY_SSE_NEED_MORE) {
            return r;
        }
    }
    return ASSAY_SSE_NEED_MORE;
}

enum assay_status assay_sse_finish(struct assay_sse_parser *p)
{
    if (p->failed) {
        return p->err.status;
    }
    if (p->line_len > 0 || (!p->bom_done && p->bom_seen > 0)) {
        fail(p, ASSAY_ERR_PARSE, p->offset,
             "the stream ended inside a line (%zu bytes without a line end)",
             p->line_len + (p->bom_done ? 0 : p->bom_seen));
        return ASSAY_ERR_PARSE;
    }
    if (p->event_open) {
        fail(p, ASSAY_ERR_PARSE, p->offset,
             "the stream ended inside an event (no blank line after its fields)");
        return ASSAY_ERR_PARSE;
    }
    return ASSAY_OK;
}
