/* Unit tests of adapters/sse.c, the incremental server-sent-events parser:
 * the line and field rules of the standard, [DONE], comments, every way of
 * cutting a stream into pieces (the events must not depend on it), the
 * bounds and the errors (with their byte offsets), end-of-stream checks,
 * failing allocations, and that feeding allocates nothing per byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/sse.h"
#include "core/alloc.h"
#include "core/rng.h"
#include "support.h"

/* ------------------------------------------------------------------ */
/* Helpers: feed a stream in pieces and record what comes out          */
/* ------------------------------------------------------------------ */

#define MAX_EV 256

struct rec {
    int n;
    enum assay_sse_kind kind[MAX_EV];
    char data[MAX_EV][512];
    char type[MAX_EV][80];
    char id[MAX_EV][80];
    int done[MAX_EV];
    long long retry[MAX_EV];
    int error;       /* 1 when ASSAY_SSE_ERROR came */
    enum assay_status err_status;
    unsigned long long err_offset;
    char err_msg[200];
};

static void record(struct rec *r, const struct assay_sse_event *ev)
{
    assert_true(r->n < MAX_EV);
    r->kind[r->n] = ev->kind;
    assert_int_equal(strlen(ev->data), ev->data_len); /* NUL-terminated, no NUL inside */
    snprintf(r->data[r->n], sizeof r->data[0], "%s", ev->data);
    snprintf(r->type[r->n], sizeof r->type[0], "%s", ev->type);
    snprintf(r->id[r->n], sizeof r->id[0], "%s", ev->last_id);
    r->done[r->n] = ev->done;
    r->retry[r->n] = ev->retry_ms;
    r->n++;
}

/* Feed s[0..n) in pieces whose sizes come from `cuts` (cycled; 0 = all). */
static void feed_pieces(struct assay_sse_parser *p, const char *s, size_t n, const size_t *cuts,
                        size_t n_cuts, struct rec *r)
{
    memset(r, 0, sizeof *r);
    size_t pos = 0, k = 0;
    while (pos < n && !r->error) {
        size_t piece = n_cuts > 0 && cuts[k % n_cuts] > 0 ? cuts[k % n_cuts] : n - pos;
        k++;
        if (piece > n - pos) {
            piece = n - pos;
        }
        const char *buf = s + pos;
        size_t left = piece;
        while (left > 0) {
            size_t used = 0;
            struct assay_sse_event ev;
            enum assay_sse_result res = assay_sse_feed(p, buf, left, &used, &ev);
            assert_true(used <= left);
            if (res == ASSAY_SSE_ERROR) {
                const struct assay_sse_error *e = assay_sse_last_error(p);
                r->error = 1;
                r->err_status = e->status;
                r->err_offset = e->offset;
                snprintf(r->err_msg, sizeof r->err_msg, "%s", e->message);
                break;
            }
            if (res == ASSAY_SSE_EVENT) {
                assert_true(used > 0);
                record(r, &ev);
            } else {
                assert_int_equal(used, left);
            }
            buf += used;
            left -= used;
        }
        pos += piece;
    }
}

static void parse_all(const char *s, size_t n, const struct assay_sse_limits *lim, struct rec *r)
{
    struct assay_sse_parser p;
    assert_int_equal(assay_sse_init(&p, lim), ASSAY_OK);
    feed_pieces(&p, s, n, NULL, 0, r);
    assay_sse_free(&p);
}

static void parse_str(const char *s, struct rec *r)
{
    parse_all(s, strlen(s), NULL, r);
}

/* ------------------------------------------------------------------ */
/* The standard's rules                                                */
/* ------------------------------------------------------------------ */

static void test_one_event(void **state)
{
    (void)state;
    struct rec r;
    parse_str("data: hello\n\n", &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.kind[0], ASSAY_SSE_MESSAGE);
    assert_string_equal(r.data[0], "hello");
    assert_string_equal(r.type[0], "message");
    assert_false(r.done[0]);
    assert_int_equal(r.retry[0], -1);
}

static void test_line_ends(void **state)
{
    (void)state;
    struct rec r;
    /* CRLF, lone CR and LF, mixed. */
    parse_str("data: a\r\n\r\ndata: b\r\rdata: c\n\ndata: d\r\n\n", &r);
    assert_int_equal(r.n, 4);
    assert_string_equal(r.data[0], "a");
    assert_string_equal(r.data[1], "b");
    assert_string_equal(r.data[2], "c");
    assert_string_equal(r.data[3], "d");
    /* CR then LF in two feeds is one line end, not two. */
    struct assay_sse_parser p;
    assert_int_equal(assay_sse_init(&p, NULL), ASSAY_OK);
    const char *s = "data: x\r\ndata: y\r\n\r\n";
    size_t cuts[] = {8, 1, 100};
    feed_pieces(&p, s, strlen(s), cuts, 3, &r);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.data[0], "x\ny");
    assay_sse_free(&p);
}

static void test_multiline_and_fields(void **state)
{
    (void)state;
    struct rec r;
    parse_str("data: first\ndata:second\ndata:  third\ndata\n\n", &r);
    assert_int_equal(r.n, 1);
    /* One leading space removed, not two; a bare "data" is an empty line. */
    assert_string_equal(r.data[0], "first\nsecond\n third\n");
    parse_str("event: update\nid: 42\nretry: 1500\ndata: {\"a\":1}\n\ndata: next\n\n", &r);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.type[0], "update");
    assert_string_equal(r.id[0], "42");
    assert_int_equal(r.retry[0], 1500);
    assert_string_equal(r.data[0], "{\"a\":1}");
    /* The type is per event; the id and retry persist. */
    assert_string_equal(r.type[1], "message");
    assert_string_equal(r.id[1], "42");
    assert_int_equal(r.retry[1], 1500);
    /* A retry that is not all digits is ignored. */
    parse_str("retry: 12a\ndata: x\n\n", &r);
    assert_int_equal(r.retry[0], -1);
    /* A colon inside the value stays. */
    parse_str("data: a: b\n\n", &r);
    assert_string_equal(r.data[0], "a: b");
}

static void test_no_data_no_dispatch(void **state)
{
    (void)state;
    struct rec r;
    /* Blank lines alone, and an event with only a type, dispatch nothing,
     * and the type does not leak into the next event. */
    parse_str("\n\n\nevent: lonely\n\ndata: x\n\n", &r);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.type[0], "message");
    /* An empty data field does dispatch, with empty data. */
    parse_str("data:\n\n", &r);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.data[0], "");
}

static void test_comments_and_done(void **state)
{
    (void)state;
    struct rec r;
    parse_str(": ping\n\n:\ndata: [DONE]\n\ndata: [DONE] \n\ndata: [DONE]\ndata: x\n\n", &r);
    assert_int_equal(r.n, 5);
    assert_int_equal(r.kind[0], ASSAY_SSE_COMMENT);
    assert_string_equal(r.data[0], " ping");
    assert_int_equal(r.kind[1], ASSAY_SSE_COMMENT);
    assert_string_equal(r.data[1], "");
    assert_int_equal(r.kind[2], ASSAY_SSE_MESSAGE);
    assert_true(r.done[2]);
    assert_false(r.done[3]); /* "[DONE] " is not the sentinel */
    assert_false(r.done[4]); /* nor "[DONE]\nx" */
}

static void test_bom(void **state)
{
    (void)state;
    struct rec r;
    parse_str("\xEF\xBB\xBF" "data: x\n\n", &r);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.data[0], "x");
    /* Only at the very start. */
    parse_str("data: \xEF\xBB\xBFy\n\n", &r);
    assert_string_equal(r.data[0], "\xEF\xBB\xBFy");
    /* A partial BOM is content: "\xEF\xBB" then "data" makes an unknown
     * field, ignored unless strict. */
    parse_str("\xEF\xBB" "data: z\n\ndata: w\n\n", &r);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.data[0], "w");
    struct assay_sse_limits lim = assay_sse_default_limits();
    lim.strict = true;
    const char *s = "\xEF\xBB" "data: z\n\n";
    parse_all(s, strlen(s), &lim, &r);
    assert_int_equal(r.error, 1);
    assert_int_equal(r.err_status, ASSAY_ERR_PARSE);
}

/* ------------------------------------------------------------------ */
/* Cutting the stream anywhere gives the same events                   */
/* ------------------------------------------------------------------ */

/* A random stream of events, comments and odd line ends. */
static size_t random_stream(uint64_t seed, char *buf, size_t cap)
{
    static const char *const ends[] = {"\n", "\r\n", "\r"};
    size_t n = 0;
    for (uint64_t k = 0; n + 200 < cap; k++) {
        double u = assay_rng_u01(seed, k, 0);
        const char *end = ends[(int)(assay_rng_u01(seed, k, 1) * 3) % 3];
        if (u < 0.15) {
            n += (size_t)snprintf(buf + n, cap - n, ": ping %llu%s", (unsigned long long)k, end);
        } else if (u < 0.25) {
            n += (size_t)snprintf(buf + n, cap - n, "event: e%llu%s", (unsigned long long)k, end);
        } else if (u < 0.30) {
            n += (size_t)snprintf(buf + n, cap - n, "id: %llu%s", (unsigned long long)k, end);
        } else if (u < 0.35) {
            n += (size_t)snprintf(buf + n, cap - n, "data: [DONE]%s", end);
        } else if (u < 0.80) {
            n += (size_t)snprintf(buf + n, cap - n, "data:%s{\"tokens\":[%llu]}%s",
                                  assay_rng_u01(seed, k, 2) < 0.5 ? " " : "",
                                  (unsigned long long)(k * 7919 % 260), end);
        } else {
            n += (size_t)snprintf(buf + n, cap - n, "%s", end);
        }
    }
    n += (size_t)snprintf(buf + n, cap - n, "\n\n");
    return n;
}

static void test_any_cut_same_events(void **state)
{
    (void)state;
    enum { CAP = 16384 };
    char *s = malloc(CAP);
    struct rec *whole = malloc(sizeof *whole);
    struct rec *cut = malloc(sizeof *cut);
    assert_non_null(s);
    assert_non_null(whole);
    assert_non_null(cut);
    int n_events_total = 0;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        size_t n = random_stream(seed, s, 6000);
        struct assay_sse_parser p;
        assert_int_equal(assay_sse_init(&p, NULL), ASSAY_OK);
        feed_pieces(&p, s, n, NULL, 0, whole);
        assert_int_equal(whole->error, 0);
        assay_sse_free(&p);
        n_events_total += whole->n;
        /* One byte at a time, and random piece sizes. */
        for (int way = 0; way < 3; way++) {
            size_t cuts[64];
            for (int i = 0; i < 64; i++) {
                cuts[i] = way == 0 ? 1 : 1 + (size_t)(assay_rng_u01(seed, (uint64_t)i, 10 + (uint64_t)way) * (way == 1 ? 5 : 300));
            }
            assert_int_equal(assay_sse_init(&p, NULL), ASSAY_OK);
            feed_pieces(&p, s, n, cuts, 64, cut);
            assert_int_equal(assay_sse_finish(&p), ASSAY_OK);
            assay_sse_free(&p);
            assert_int_equal(cut->error, 0);
            assert_int_equal(cut->n, whole->n);
            for (int i = 0; i < whole->n; i++) {
                assert_int_equal(cut->kind[i], whole->kind[i]);
                assert_string_equal(cut->data[i], whole->data[i]);
                assert_string_equal(cut->type[i], whole->type[i]);
                assert_string_equal(cut->id[i], whole->id[i]);
                assert_int_equal(cut->done[i], whole->done[i]);
            }
        }
    }
    assert_true(n_events_total > 200); /* the streams were not trivial */
    free(s);
    free(whole);
    free(cut);
}

/* ------------------------------------------------------------------ */
/* Errors and bounds                                                   */
/* ------------------------------------------------------------------ */

static void test_nul_byte(void **state)
{
    (void)state;
    struct rec r;
    const char s[] = "data: ok\n\ndata: a\0b\n\n";
    parse_all(s, sizeof s - 1, NULL, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.error, 1);
    assert_int_equal(r.err_status, ASSAY_ERR_PARSE);
    assert_int_equal(r.err_offset, 17);
    assert_non_null(strstr(r.err_msg, "NUL"));
}

static void test_line_bound(void **state)
{
    (void)state;
    struct assay_sse_limits lim = {64, 1024, false};
    char s[512];
    snprintf(s, sizeof s, "data: %0100d\n\n", 7);
    struct rec r;
    parse_all(s, strlen(s), &lim, &r);
    assert_int_equal(r.error, 1);
    assert_int_equal(r.err_status, ASSAY_ERR_FULL);
    assert_int_equal(r.err_offset, 64); /* the 65th byte of the line */
    assert_non_null(strstr(r.err_msg, "line longer than 64"));
    /* Exactly at the bound is fine. */
    snprintf(s, sizeof s, "data: %058d\n\n", 7);
    assert_int_equal(strlen(s), 66);
    parse_all(s, strlen(s), &lim, &r);
    assert_int_equal(r.error, 0);
    assert_int_equal(r.n, 1);
}

static void test_data_bound(void **state)
{
    (void)state;
    struct assay_sse_limits lim = {64, 100, false};
    struct rec r;
    /* Lines within the bound, data over it: 11 lines of 10 bytes. */
    char s[512] = "";
    for (int i = 0; i < 11; i++) {
        strcat(s, "data: 0123456789\n");
    }
    strcat(s, "\n");
    parse_all(s, strlen(s), &lim, &r);
    assert_int_equal(r.error, 1);
    assert_int_equal(r.err_status, ASSAY_ERR_FULL);
    assert_non_null(strstr(r.err_msg, "data longer than 100"));
    /* Type and id have fixed bounds. */
    char t[256];
    snprintf(t, sizeof t, "event: %070d\ndata: x\n\n", 1);
    parse_all(t, strlen(t), NULL, &r);
    assert_int_equal(r.error, 1);
    assert_int_equal(r.err_status, ASSAY_ERR_FULL);
    char *id = malloc(400);
    assert_non_null(id);
    snprintf(id, 400, "id: %0300d\ndata: x\n\n", 1);
    parse_all(id, strlen(id), NULL, &r);
    assert_int_equal(r.error, 1);
    free(id);
}

static void test_strict_unknown_field(void **state)
{
    (void)state;
    const char *s = "data: 1\n\n<html><body>502 Bad Gateway</body></html>\n\ndata: 2\n\n";
    struct rec r;
    parse_all(s, strlen(s), NULL, &r);
    assert_int_equal(r.error, 0); /* the standard ignores unknown fields */
    assert_int_equal(r.n, 2);
    struct assay_sse_limits lim = assay_sse_default_limits();
    lim.strict = true;
    parse_all(s, strlen(s), &lim, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.error, 1);
    assert_int_equal(r.err_status, ASSAY_ERR_PARSE);
    /* The name is shown truncated to 32 printable characters. */
    assert_non_null(strstr(r.err_msg, "unknown field \"<html><body>502 Bad Gateway</bod\""));
    assert_int_equal(r.err_offset, 9); /* the first byte of the line */
}

static void test_sticky_error(void **state)
{
    (void)state;
    struct assay_sse_parser p;
    assert_int_equal(assay_sse_init(&p, NULL), ASSAY_OK);
    size_t used;
    struct assay_sse_event ev;
    const char bad[] = "da\0ta";
    assert_int_equal(assay_sse_feed(&p, bad, 5, &used, &ev), ASSAY_SSE_ERROR);
    assert_int_equal(used, 3);
    assert_int_equal(assay_sse_feed(&p, "data: x\n\n", 9, &used, &ev), ASSAY_SSE_ERROR);
    assert_int_equal(used, 0);
    assert_int_equal(assay_sse_finish(&p), ASSAY_ERR_PARSE);
    /* Reset clears it. */
    assay_sse_reset(&p);
    assert_int_equal(assay_sse_feed(&p, "data: x\n\n", 9, &used, &ev), ASSAY_SSE_EVENT);
    assert_string_equal(ev.data, "x");
    assay_sse_free(&p);
}

static void test_finish(void **state)
{
    (void)state;
    struct assay_sse_parser p;
    size_t used;
    struct assay_sse_event ev;
    const struct {
        const char *s;
        enum assay_status want;
        const char *msg;
    } cases[] = {
        {"data: x\n\n", ASSAY_OK, ""},
        {"", ASSAY_OK, ""},
        {": ping\n", ASSAY_OK, ""},
        {"data: x\n\ndata: cut", ASSAY_ERR_PARSE, "inside a line"},
        {"data: x\n", ASSAY_ERR_PARSE, "inside an event"},
        {"event: t\n", ASSAY_ERR_PARSE, "inside an event"},
        {"\xEF\xBB", ASSAY_ERR_PARSE, "inside a line"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(assay_sse_init(&p, NULL), ASSAY_OK);
        const char *s = cases[i].s;
        size_t n = strlen(s);
        while (n > 0) {
            enum assay_sse_result res = assay_sse_feed(&p, s, n, &used, &ev);
            assert_int_not_equal(res, ASSAY_SSE_ERROR);
            s += used;
            n -= used;
        }
        assert_int_equal(assay_sse_finish(&p), cases[i].want);
        assert_non_null(strstr(assay_sse_last_error(&p)->message, cases[i].msg));
        assay_sse_free(&p);
    }
}

static void test_bad_limits(void **state)
{
    (void)state;
    struct assay_sse_parser p;
    struct assay_sse_limits lim = {8, 1024, false};
    assert_int_equal(assay_sse_init(&p, &lim), ASSAY_ERR_INVALID);
    size_t used;
    struct assay_sse_event ev;
    assert_int_equal(assay_sse_feed(&p, "data: x\n\n", 9, &used, &ev), ASSAY_SSE_ERROR);
    assay_sse_free(&p);
}

/* ------------------------------------------------------------------ */
/* Allocation                                                          */
/* ------------------------------------------------------------------ */

static void test_no_allocation_per_byte(void **state)
{
    (void)state;
    enum { N = 1 << 20 };
    char *s = malloc(N + 64 + 2048);
    assert_non_null(s);
    size_t n = 0;
    int events = 0;
    while (n + 64 < N) {
        n += (size_t)snprintf(s + n, N + 64 - n, "data: {\"tokens\":[%d]}\n\n", events % 260);
        events++;
    }
    /* One long event at the end makes the buffers grow a few times. */
    memcpy(s + n, "data: ", 6);
    n += 6;
    memset(s + n, 'y', 2000);
    n += 2000;
    s[n++] = '\n';
    s[n++] = '\n';
    struct assay_sse_parser p;
    assert_int_equal(assay_sse_init(&p, NULL), ASSAY_OK);
    assay_test_fail_alloc_at(0); /* count only */
    size_t used;
    struct assay_sse_event ev;
    int got = 0;
    for (size_t pos = 0; pos < n;) {
        size_t piece = 1 + pos % 13;
        if (piece > n - pos) {
            piece = n - pos;
        }
        size_t left = piece;
        const char *b = s + pos;
        while (left > 0) {
            enum assay_sse_result res = assay_sse_feed(&p, b, left, &used, &ev);
            assert_int_not_equal(res, ASSAY_SSE_ERROR);
            got += res == ASSAY_SSE_EVENT;
            b += used;
            left -= used;
        }
        pos += piece;
    }
    long allocs = assay_test_alloc_count();
    assay_test_fail_alloc_off();
    assay_sse_free(&p);
    free(s);
    assert_int_equal(got, events + 1);
    printf("# %d events, %zu bytes fed in pieces of 1..13: %ld allocations\n", got, n, allocs);
    /* Two buffers doubling from 256 bytes to 2 KiB: at most 4 + 4. */
    assert_true(allocs <= 8);
}

static void test_failing_allocations(void **state)
{
    (void)state;
    char s[4096] = "";
    for (int i = 0; i < 40; i++) {
        strcat(s, "data: a line that makes the buffer grow ....................\n");
    }
    strcat(s, "\n");
    size_t n = strlen(s);
    int failures_seen = 0;
    for (long k = 1; k <= 16; k++) {
        struct assay_sse_parser p;
        assert_int_equal(assay_sse_init(&p, NULL), ASSAY_OK);
        assay_test_fail_alloc_at(k);
        struct rec r;
        feed_pieces(&p, s, n, NULL, 0, &r);
        assay_sse_free(&p);
        long live = assay_test_alloc_live();
        long count = assay_test_alloc_count();
        assay_test_fail_alloc_off();
        assert_int_equal(live, 0);
        if (count >= k) {
            assert_int_equal(r.error, 1);
            assert_int_equal(r.err_status, ASSAY_ERR_NOMEM);
            failures_seen++;
        } else {
            assert_int_equal(r.error, 0);
            assert_int_equal(r.n, 1);
        }
    }
    assert_true(failures_seen >= 2);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_event),
        cmocka_unit_test(test_line_ends),
        cmocka_unit_test(test_multiline_and_fields),
        cmocka_unit_test(test_no_data_no_dispatch),
        cmocka_unit_test(test_comments_and_done),
        cmocka_unit_test(test_bom),
        cmocka_unit_test(test_any_cut_same_events),
        cmocka_unit_test(test_nul_byte),
        cmocka_unit_test(test_line_bound),
        cmocka_unit_test(test_data_bound),
        cmocka_unit_test(test_strict_unknown_field),
        cmocka_unit_test(test_sticky_error),
        cmocka_unit_test(test_finish),
        cmocka_unit_test(test_bad_limits),
        cmocka_unit_test(test_no_allocation_per_byte),
        cmocka_unit_test(test_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
