/*
 * sse.h - an incremental parser of server-sent events (the text/event-stream
 * format of the WHATWG HTML standard, section "Server-sent events").
 *
 * Bytes go in as they arrive from the network, in pieces of any size (one
 * byte at a time works); complete events come out. The parser follows the
 * standard's line and field rules:
 *   - lines end with CRLF, LF or a lone CR (a CRLF split across two feeds
 *     is still one line end); a UTF-8 byte order mark at the very start is
 *     skipped;
 *   - "field: value" lines, one leading space of the value removed; a line
 *     without a colon is a field with an empty value;
 *   - "data" lines append their value and a newline to the event's data
 *     (so multi-line data joins with "\n", the last newline removed);
 *     "event" sets the event type, "id" the last event id (ignored when it
 *     holds a NUL), "retry" a reconnection time (digits only);
 *   - a line starting with ':' is a comment (servers send them as pings);
 *   - a blank line dispatches the event; an event with no data line is
 *     not dispatched (only its type is reset).
 * Data that is exactly "[DONE]" (OpenAI's end-of-stream sentinel) is
 * flagged on the event; the parser itself does not stop there.
 *
 * Hardened for input from an untrusted peer: every buffer has a fixed upper
 * bound (a longer line or event is an error, never an unbounded
 * allocation); buffers grow by doubling up to that bound, so there is no
 * allocation per byte; a NUL byte is an error (it would silently cut
 * strings downstream); in strict mode a field the standard does not define
 * is an error too (a server that speaks SSE never sends one, so it is a
 * sign of garbage such as an HTML error page). After an error the parser
 * stays in the error state and reports the same error until reset.
 *
 * Usage:
 *     struct assay_sse_parser p;
 *     assay_sse_init(&p, NULL);                        // default limits
 *     while (have bytes buf[0..n)) {
 *         size_t used; struct assay_sse_event ev;
 *         enum assay_sse_result r = assay_sse_feed(&p, buf, n, &used, &ev);
 *         buf += used; n -= used;
 *         if (r == ASSAY_SSE_EVENT) handle(&ev);         // ev borrowed until the next call
 *         else if (r == ASSAY_SSE_ERROR) report(assay_sse_last_error(&p)); ... break;
 *     }
 *     assay_sse_finish(&p);   // at end of stream: was an event left incomplete?
 *     assay_sse_free(&p);
 */
#ifndef ASSAY_SSE_H
#define ASSAY_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

/* Default bounds: a line or an event's data of up to 1 MiB. */
#define ASSAY_SSE_DEFAULT_MAX_LINE ((size_t)1 << 20)
#define ASSAY_SSE_DEFAULT_MAX_DATA ((size_t)1 << 20)
/* Fixed bounds of the event type and the last event id (bytes). */
#define ASSAY_SSE_MAX_TYPE 64
#define ASSAY_SSE_MAX_ID 256

struct assay_sse_limits {
    size_t max_line; /* longest line, terminator excluded (>= 16) */
    size_t max_data; /* longest data of one event, joining newlines included (>= 16) */
    bool strict;     /* a field other than data, event, id, retry is an error */
};

/* The default limits: 1 MiB lines and data, not strict. */
struct assay_sse_limits assay_sse_default_limits(void);

enum assay_sse_kind {
    ASSAY_SSE_MESSAGE = 1, /* a dispatched event (data, type, id) */
    ASSAY_SSE_COMMENT = 2, /* a comment line; data is the text after ':' */
};

/* One event. Every pointer is borrowed from the parser until the next call
 * to any assay_sse_ function on it; strings are NUL-terminated and may also
 * be read with their lengths. */
struct assay_sse_event {
    enum assay_sse_kind kind;
    const char *data;     /* MESSAGE: the data lines joined by "\n"; COMMENT: the text */
    size_t data_len;
    const char *type;     /* MESSAGE: the "event" field, or "message" when none */
    const char *last_id;  /* MESSAGE: the last event id seen so far ("" when none) */
    bool done;            /* MESSAGE: data is exactly "[DONE]" */
    int64_t retry_ms;     /* the last valid "retry" value, -1 when none */
    uint64_t offset;      /* stream offset of the byte that completed the event */
};

enum assay_sse_result {
    ASSAY_SSE_NEED_MORE = 0, /* all input consumed; no event completed */
    ASSAY_SSE_EVENT = 1,     /* *event is filled; *used bytes were consumed */
    ASSAY_SSE_ERROR = -1,    /* the stream is malformed; see assay_sse_last_error */
};

/* Why and where the parser failed. */
struct assay_sse_error {
    enum assay_status status; /* ASSAY_ERR_PARSE, ASSAY_ERR_FULL (a bound), ASSAY_ERR_NOMEM */
    uint64_t offset;          /* stream offset of the offending byte; for a field that
                                 is wrong as a whole, of the first byte of its line */
    char message[160];        /* one line, no data from the stream beyond a field name */
};

/* The parser state. Treat as opaque: fields may change. */
struct assay_sse_parser {
    struct assay_sse_limits lim;
    char *line;          /* (line_cap) the current line */
    size_t line_len, line_cap;
    char *data;          /* (data_cap) the data of the current event */
    size_t data_len, data_cap;
    bool has_data;       /* a data field was seen in the current event */
    char type[ASSAY_SSE_MAX_TYPE + 1];
    char id[ASSAY_SSE_MAX_ID + 1];
    char out_type[ASSAY_SSE_MAX_TYPE + 1]; /* the dispatched event's type */
    int64_t retry_ms;
    bool after_cr;       /* the previous byte was a CR: a following LF ends nothing */
    bool bom_done;       /* past the first bytes (BOM check) */
    uint8_t bom_seen;    /* bytes of a BOM matched so far */
    bool event_open;     /* a field line was seen since the last blank line */
    uint64_t offset;     /* bytes consumed so far */
    uint64_t line_start; /* offset of the current line's first byte */
    uint64_t n_events;
    uint64_t n_comments;
    bool failed;
    struct assay_sse_error err;
};

/*
 * Prepare a parser with the given limits (NULL: the defaults). Buffers are
 * allocated lazily and grow by doubling up to the limits.
 * ASSAY_ERR_INVALID for limits below 16 bytes (the parser is then unusable
 * but may be freed). Release with assay_sse_free.
 */
enum assay_status assay_sse_init(struct assay_sse_parser *p, const struct assay_sse_limits *lim);

/* Release the buffers (the parser may be re-initialised). NULL-safe. */
void assay_sse_free(struct assay_sse_parser *p);

/* Forget the stream seen so far (keeps buffers and limits). */
void assay_sse_reset(struct assay_sse_parser *p);

/*
 * Consume bytes buf[0..n) up to and including the first byte that
 * completes an event or a comment. *used says how many were consumed (the
 * caller feeds the rest in the next call). Returns ASSAY_SSE_EVENT with
 * *event filled, ASSAY_SSE_NEED_MORE when all n bytes were consumed
 * without completing one, or ASSAY_SSE_ERROR (then *used bytes, up to and
 * including the offending one, were consumed; every later call returns
 * ASSAY_SSE_ERROR with *used 0). buf may be NULL when n is 0.
 */
enum assay_sse_result assay_sse_feed(struct assay_sse_parser *p, const char *buf, size_t n,
                                     size_t *used, struct assay_sse_event *event);

/*
 * At the end of the stream: ASSAY_OK when nothing was left over, or
 * ASSAY_ERR_PARSE with the error set when a line or an event was begun but
 * not completed (the standard discards such an event; a client usually
 * wants to know that the stream was cut). Also returns the stored error of
 * a failed parser.
 */
enum assay_status assay_sse_finish(struct assay_sse_parser *p);

/* The error of a failed parser (status ASSAY_OK when it has not failed). */
const struct assay_sse_error *assay_sse_last_error(const struct assay_sse_parser *p);

#endif
