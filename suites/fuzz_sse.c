/*
 * fuzz_sse - a libFuzzer target for adapters/sse.c.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. suites/fuzz_sse.c \
 *         adapters/sse.c core/alloc.c core/status.c -lcjson -o fuzz_sse
 *   ./fuzz_sse -max_total_time=60 fixtures/fuzz/sse
 *
 * The input's first byte chooses the limits (small bounds reach the error
 * paths) and how the rest is cut into pieces; the target then checks what
 * the parser promises whatever the bytes: *used never exceeds what was
 * given and is positive for an event, events are NUL-terminated with the
 * stated length and no NUL inside, the type is never empty, an error is
 * sticky, and the same stream fed whole yields the same events.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct digest {
    uint64_t hash;
    uint64_t n;
    int error;
};

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ c[i]) * 1099511628211ULL;
    }
    return h;
}

static void run(const uint8_t *buf, size_t n, const struct assay_sse_limits *lim, size_t piece,
                struct digest *d)
{
    struct assay_sse_parser p;
    memset(d, 0, sizeof *d);
    d->hash = 14695981039346656037ULL;
    if (assay_sse_init(&p, lim) != ASSAY_OK) {
        abort();
    }
    size_t pos = 0;
    while (pos < n && !d->error) {
        size_t len = piece == 0 || piece > n - pos ? n - pos : piece;
        const char *b = (const char *)buf + pos;
        size_t left = len;
        while (left > 0) {
            size_t used = 12345;
            struct assay_sse_event ev;
            enum assay_sse_result r = assay_sse_feed(&p, b, left, &used, &ev);
            if (used > left) {
                abort();
            }
            if (r == ASSAY_SSE_ERROR) {
                d->error = 1;
                size_t again = 1;
                if (assay_sse_feed(&p, b, left, &again, &ev) != ASSAY_SSE_ERROR || again != 0) {
                    abort(); /* errors are sticky */
                }
                break;
            }
            if (r == ASSAY_SSE_EVENT) {
                if (used == 0 || ev.data == NULL || ev.type == NULL || ev.last_id == NULL ||
                    strlen(ev.data) != ev.data_len) {
                    abort();
                }
                if (ev.kind == ASSAY_SSE_MESSAGE && ev.type[0] == '\0') {
                    abort();
                }
                d->hash = mix(d->hash, &ev.kind, sizeof ev.kind);
                d->hash = mix(d->hash, ev.data, ev.data_len + 1);
                d->hash = mix(d->hash, ev.type, strlen(ev.type) + 1);
                d->hash = mix(d->hash, ev.last_id, strlen(ev.last_id) + 1);
                d->n++;
            } else if (used != left) {
                abort();
            }
            b += used;
            left -= used;
        }
        pos += len;
    }
    if (!d->error) {
        (void)assay_sse_finish(&p);
    }
    assay_sse_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    uint8_t ctl = data[0];
    struct assay_sse_limits lim = assay_sse_default_limits();
    if (ctl & 1) {
        lim.max_line = 16 + (ctl >> 4);
        lim.max_data = 16 + (ctl >> 2);
    }
    lim.strict = (ctl & 2) != 0;
    size_t piece = 1 + (ctl >> 5);
    struct digest whole, cut;
    run(data + 1, size - 1, &lim, 0, &whole);
    run(data + 1, size - 1, &lim, piece, &cut);
    /* Where the pieces fall must not matter (an error may only be found
     * at the same point, so compare only error-free streams fully). */
    if (whole.error != cut.error || (!whole.error && (whole.n != cut.n || whole.hash != cut.hash))) {
        abort();
    }
    return 0;
}
