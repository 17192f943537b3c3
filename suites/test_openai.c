/* Unit tests of adapters/openai.c against a real HTTP server under test
 * control (suites/fake_server.c on 127.0.0.1, started and stopped here).
 *
 * The server plays a llama.cpp-like server and misbehaves on demand; every
 * misbehaviour must end its request (and only its request) with one FINISH
 * of reason ERROR, an error status and a message naming the reason, while
 * the other requests of the same run complete exactly; nothing may hang
 * (every run is bounded in time and step() in duration). Also: what is
 * sent (token ids, sampling parameters, the sampler order), stop tokens,
 * aborts, timestamps, the API key (sent, never shown), the engine spec,
 * request validation and failing allocations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "adapters/openai.h"
#include "adapters/spec.h"
#include "checks/harness.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/workload.h"
#include "fake_server.h"
#include "support.h"

static struct fake_server *g_srv;
/* Upper bounds on durations are multiplied by ASSAY_TEST_TIME_SCALE (for
 * valgrind and other slow runs); lower bounds never are. */
static double g_time_scale = 1.0;
static const char *const k_secret = "sk-assay-test-5ecret-Q7v2mZ0xL9";

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static void base_url(char *buf, size_t size)
{
    snprintf(buf, size, "http://127.0.0.1:%d", fake_server_port(g_srv));
}

static struct assay_openai_params params_for(enum assay_openai_api api, char *url, size_t size)
{
    base_url(url, size);
    struct assay_openai_params p = assay_openai_default_params();
    p.url = url;
    p.api = api;
    p.vocab = FAKE_VOCAB;
    /* Long enough that a well-behaved reply on a busy machine (its server
     * thread waiting for a core) is never taken for a stall: 400 ms was
     * seen to, at a load of 8 on 2 cores. The stall cases cost it once,
     * all at the same time. Under valgrind (time scale 40) a misbehaviour
     * run takes about a second besides that wait, so five times is ample
     * there; forty times made each run wait 80 s for its stall cases. */
    p.stall_timeout_ms = (int32_t)(2000 * fmin(g_time_scale, 5.0));
    p.connect_timeout_ms = (int32_t)(2000 * g_time_scale);
    p.n_probs = 2;
    return p;
}

static void open_adapter(struct assay_adapter *a, enum assay_openai_api api)
{
    char url[128];
    struct assay_openai_params p = params_for(api, url, sizeof url);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_openai_open(&p, a, &diag), ASSAY_OK);
}

enum { MAX_REQ = 64, MAX_TOK = 64 };

struct outcome {
    uint64_t id;
    int n_tok;
    int32_t tok[MAX_TOK];
    int32_t index[MAX_TOK];
    int64_t t_ns[MAX_TOK];
    int64_t returned_ns[MAX_TOK]; /* when the step that gave the token returned */
    int n_finish;
    enum assay_finish_reason reason;
    int32_t error;
    int32_t finish_index;
    char msg[640];
};

struct run_info {
    double seconds;
    double max_step_ms;    /* wall time of the longest step, for the log */
    double max_blocked_ms; /* the longest time a step spent waiting for something
                              other than a core: NaN when it cannot be measured */
    int64_t n_steps;
    int64_t t_start_ns;
};

/* The calling thread's time waiting for a core, in ns (the second field of
 * /proc/thread-self/schedstat), or -1 when the kernel does not say. */
static int64_t run_delay_ns(void)
{
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    long long on_cpu = 0, waiting = -1;
    if (f != NULL) {
        if (fscanf(f, "%lld %lld", &on_cpu, &waiting) != 2) {
            waiting = -1;
        }
        fclose(f);
    }
    return waiting;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Add every request, step until no work is left (at most max_ms), and
 * record each request's events. Request i must have id i + 1. */
/*
 * A step's wall time is no measure of whether it blocks: on a busy machine
 * a step that never waits can still take tens of ms, waiting for a core.
 * What it spent blocked (asleep in poll, on a lock, on I/O) is its wall
 * time less its CPU time less its time waiting for a core (the kernel's
 * run delay): that is what "step never blocks" bounds.
 */
static struct run_info drive(struct assay_adapter *a, const struct assay_request *reqs, int n,
                             struct outcome *out, int64_t max_ms)
{
    struct run_info info = {0, 0, 0, 0, assay_now_ns()};
    bool schedstat = run_delay_ns() >= 0;
    info.max_blocked_ms = schedstat ? 0.0 : NAN;
    memset(out, 0, sizeof *out * (size_t)n);
    for (int i = 0; i < n; i++) {
        out[i].id = reqs[i].id;
        assert_int_equal(reqs[i].id, (uint64_t)i + 1);
        assert_int_equal(a->vt->add_request(a->self, &reqs[i]), ASSAY_OK);
    }
    while (a->vt->has_work(a->self)) {
        const struct assay_event *ev;
        size_t n_ev = 0;
        int64_t delay0 = schedstat ? run_delay_ns() : 0, cpu0 = thread_cpu_ns();
        int64_t t0 = assay_now_ns();
        assert_int_equal(a->vt->step(a->self, &ev, &n_ev), ASSAY_OK);
        int64_t t1 = assay_now_ns();
        double ms = (double)(t1 - t0) / 1e6;
        info.max_step_ms = ms > info.max_step_ms ? ms : info.max_step_ms;
        if (schedstat) {
            double blocked =
                (double)((t1 - t0) - (thread_cpu_ns() - cpu0) - (run_delay_ns() - delay0)) / 1e6;
            info.max_blocked_ms = blocked > info.max_blocked_ms ? blocked : info.max_blocked_ms;
        }
        info.n_steps++;
        for (size_t k = 0; k < n_ev; k++) {
            assert_true(ev[k].request_id >= 1 && ev[k].request_id <= (uint64_t)n);
            struct outcome *o = &out[ev[k].request_id - 1];
            if (ev[k].kind == ASSAY_EVENT_TOKEN) {
                assert_int_equal(o->n_finish, 0);
                if (o->n_tok < MAX_TOK) {
                    o->tok[o->n_tok] = ev[k].token;
                    o->index[o->n_tok] = ev[k].index;
                    o->t_ns[o->n_tok] = ev[k].t_ns;
                    o->returned_ns[o->n_tok] = t1;
                }
                o->n_tok++;
            } else if (ev[k].kind == ASSAY_EVENT_FINISH) {
                o->n_finish++;
                o->reason = ev[k].reason;
                o->error = ev[k].error;
                o->finish_index = ev[k].index;
                snprintf(o->msg, sizeof o->msg, "%s", ev[k].message != NULL ? ev[k].message : "");
            }
        }
        assert_true((double)(assay_now_ns() - info.t_start_ns) / 1e6 < (double)max_ms * g_time_scale);
    }
    info.seconds = (double)(assay_now_ns() - info.t_start_ns) / 1e9;
    return info;
}

/* A request whose first prompt token selects the fake server's behaviour. */
struct req_store {
    int32_t prompt[MAX_REQ][8];
    struct assay_request reqs[MAX_REQ];
};

static void make_req(struct req_store *st, int i, int mode, int32_t max_tokens)
{
    int32_t *p = st->prompt[i];
    p[0] = mode;
    p[1] = 40 + i;
    p[2] = 7;
    p[3] = (int32_t)(100 + 3 * i);
    struct assay_request *r = &st->reqs[i];
    memset(r, 0, sizeof *r);
    r->id = (uint64_t)i + 1;
    r->prompt = p;
    r->prompt_len = 4;
    r->max_tokens = max_tokens;
    r->stop_token = -1;
    r->sampling = assay_sampling_greedy();
}

static void assert_tokens_ok(const struct outcome *o, const struct assay_request *r, int n)
{
    assert_true(o->n_tok >= n);
    for (int t = 0; t < n; t++) {
        assert_int_equal(o->tok[t], fake_server_token(r->prompt, r->prompt_len, t));
        assert_int_equal(o->index[t], t);
    }
}

/* ------------------------------------------------------------------ */
/* Well-behaved streams                                                */
/* ------------------------------------------------------------------ */

static void check_well_behaved(enum assay_openai_api api)
{
    struct assay_adapter a;
    open_adapter(&a, api);
    struct req_store st;
    const int modes[] = {FAKE_OK, FAKE_FRAGMENTED, FAKE_SLOW_START, FAKE_OK, FAKE_OK};
    int n = (int)(sizeof modes / sizeof modes[0]);
    for (int i = 0; i < n; i++) {
        make_req(&st, i, modes[i], 6 + i);
    }
    struct outcome out[MAX_REQ];
    struct run_info info = drive(&a, st.reqs, n, out, 10000);
    for (int i = 0; i < n; i++) {
        assert_int_equal(out[i].n_finish, 1);
        if (out[i].reason != ASSAY_FINISH_LENGTH) {
            fail_msg("request %d (mode %d): %s", i, modes[i], out[i].msg);
        }
        assert_int_equal(out[i].n_tok, st.reqs[i].max_tokens);
        assert_int_equal(out[i].finish_index, st.reqs[i].max_tokens);
        assert_tokens_ok(&out[i], &st.reqs[i], st.reqs[i].max_tokens);
        for (int t = 1; t < out[i].n_tok; t++) {
            assert_true(out[i].t_ns[t] >= out[i].t_ns[t - 1]);
        }
    }
    struct assay_openai_stats stats;
    assert_int_equal(assay_openai_get_stats(&a, &stats), ASSAY_OK);
    assert_int_equal(stats.n_submitted, n);
    assert_int_equal(stats.n_length, n);
    assert_int_equal(stats.n_error, 0);
    assert_true(stats.n_sse_comments > 0); /* the fragmented stream's pings */
    printf("# %s: %d requests in %.3f s, %lld steps, longest step %.2f ms\n",
           api == ASSAY_OPENAI_API_V1 ? "v1" : "completion", n, info.seconds,
           (long long)info.n_steps, info.max_step_ms);
    assay_adapter_close(&a);
}

static void test_well_behaved_completion(void **state)
{
    (void)state;
    check_well_behaved(ASSAY_OPENAI_API_COMPLETION);
}

static void test_well_behaved_v1(void **state)
{
    (void)state;
    check_well_behaved(ASSAY_OPENAI_API_V1);
}

/* What goes over the wire: token ids and every sampling setting. */
static void test_request_body(void **state)
{
    (void)state;
    struct assay_adapter a;
    char url[128];
    struct assay_openai_params p = params_for(ASSAY_OPENAI_API_COMPLETION, url, sizeof url);
    p.n_probs = 3;
    p.eos_token = 257;
    p.model = "tiny\"gpt";
    struct assay_diag diag;
    assert_int_equal(assay_openai_open(&p, &a, &diag), ASSAY_OK);
    struct req_store st;
    make_req(&st, 0, FAKE_OK, 5);
    st.reqs[0].sampling.temperature = 0.7f;
    st.reqs[0].sampling.top_k = 40;
    st.reqs[0].sampling.top_p = 0.9f;
    st.reqs[0].sampling.seeded = true;
    st.reqs[0].sampling.seed = 12345;
    struct outcome out[1];
    drive(&a, st.reqs, 1, out, 5000);
    if (out[0].reason != ASSAY_FINISH_LENGTH) {
        fail_msg("%s", out[0].msg);
    }
    char body[4096];
    fake_server_last_body(g_srv, FAKE_OK, body, sizeof body);
    const char *want[] = {
        "\"model\":\"tiny\\\"gpt\"", "\"prompt\":[1,40,7,100]", "\"stream\":true",
        "\"n_predict\":5", "\"return_tokens\":true", "\"n_probs\":3",
        "\"temperature\":0.699999988", "\"top_k\":40", "\"top_p\":0.899999976",
        "\"min_p\":0", "\"typical_p\":1", "\"repeat_penalty\":1", "\"repeat_last_n\":0",
        "\"presence_penalty\":0", "\"frequency_penalty\":0", "\"dry_multiplier\":0",
        "\"xtc_probability\":0", "\"top_n_sigma\":-1", "\"mirostat\":0", "\"dynatemp_range\":0",
        "\"ignore_eos\":true", "\"samplers\":[\"temperature\",\"top_k\",\"top_p\"]",
        "\"seed\":12345",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (strstr(body, want[i]) == NULL) {
            fail_msg("the body lacks %s: %s", want[i], body);
        }
    }
    /* A request whose stop token is the server's EOS lets the server stop. */
    make_req(&st, 0, FAKE_OK, 3);
    st.reqs[0].stop_token = 257;
    drive(&a, st.reqs, 1, out, 5000);
    fake_server_last_body(g_srv, FAKE_OK, body, sizeof body);
    assert_non_null(strstr(body, "\"ignore_eos\":false"));
    struct assay_adapter_info info;
    assay_adapter_get_info(&a, &info);
    assert_string_equal(info.name, "openai");
    assert_int_equal(info.sampling_order, ASSAY_SAMPLING_SEQUENTIAL);
    assert_int_equal(info.vocab, FAKE_VOCAB);
    assert_null(a.vt->set_logits_sink);
    assert_null(a.vt->block_stats);
    assert_null(a.vt->block_audit);
    assert_null(a.vt->check_invariants);
    assay_adapter_close(&a);

    /* /v1/completions: max_tokens, logprobs >= 1 and the model. */
    p.api = ASSAY_OPENAI_API_V1;
    p.n_probs = 0;
    assert_int_equal(assay_openai_open(&p, &a, &diag), ASSAY_OK);
    make_req(&st, 0, FAKE_OK, 4);
    drive(&a, st.reqs, 1, out, 5000);
    assert_int_equal(out[0].reason, ASSAY_FINISH_LENGTH);
    fake_server_last_body(g_srv, FAKE_OK, body, sizeof body);
    assert_non_null(strstr(body, "\"max_tokens\":4"));
    assert_non_null(strstr(body, "\"logprobs\":1"));
    assert_non_null(strstr(body, "\"model\":"));
    assert_true(fake_server_n_path(g_srv, "/v1/completions") >= 1);
    assay_adapter_close(&a);
}

struct lp_rec {
    int n;
    int32_t token[16];
    double logprob[16];
    int32_t n_top[16];
    int32_t top0[16], top1[16];
    double top1_lp[16];
};

static void lp_sink(void *ctx, uint64_t id, int32_t index, int32_t token, double logprob,
                    const struct assay_openai_logprob *top, int32_t n_top)
{
    struct lp_rec *r = ctx;
    (void)id;
    if (index < 16 && n_top >= 2) {
        r->token[index] = token;
        r->logprob[index] = logprob;
        r->n_top[index] = n_top;
        r->top0[index] = top[0].token;
        r->top1[index] = top[1].token;
        r->top1_lp[index] = top[1].logprob;
        r->n++;
    }
}

static void test_logprobs_sink(void **state)
{
    (void)state;
    /* llama.cpp's layouts of /completion and /v1, and the legacy /v1 one. */
    for (int k = 0; k < 3; k++) {
        struct assay_adapter a;
        open_adapter(&a, k == 0 ? ASSAY_OPENAI_API_COMPLETION : ASSAY_OPENAI_API_V1);
        struct lp_rec rec;
        memset(&rec, 0, sizeof rec);
        assert_int_equal(assay_openai_set_logprobs_sink(&a, lp_sink, &rec), ASSAY_OK);
        struct req_store st;
        make_req(&st, 0, k == 2 ? FAKE_LEGACY_IDS : FAKE_OK, 5);
        struct outcome out[1];
        drive(&a, st.reqs, 1, out, 5000);
        assert_int_equal(out[0].reason, ASSAY_FINISH_LENGTH);
        assert_tokens_ok(&out[0], &st.reqs[0], 5);
        assert_int_equal(rec.n, 5);
        for (int t = 0; t < 5; t++) {
            assert_int_equal(rec.token[t], out[0].tok[t]);
            assert_true(fabs(rec.logprob[t] - -0.25) < 1e-12);
            assert_int_equal(rec.n_top[t], 2);
            assert_int_equal(rec.top0[t], out[0].tok[t]);
            assert_int_equal(rec.top1[t], (out[0].tok[t] + 1) % 256);
            assert_true(fabs(rec.top1_lp[t] - -1.75) < 1e-12);
        }
        assay_adapter_close(&a);
    }
    struct assay_adapter none = {NULL, NULL};
    assert_int_equal(assay_openai_set_logprobs_sink(&none, lp_sink, NULL), ASSAY_ERR_INVALID);
}

/* ------------------------------------------------------------------ */
/* Misbehaviours: one FINISH ERROR each, the rest of the run unharmed   */
/* ------------------------------------------------------------------ */

struct bad_case {
    int mode;
    enum assay_status status;
    const char *reason;  /* must appear in the message */
    int tokens_before;   /* correct tokens delivered before the error (-1: any) */
};

static void check_misbehaviours(enum assay_openai_api api, const struct bad_case *cases, int n_bad)
{
    struct assay_adapter a;
    open_adapter(&a, api);
    struct req_store st;
    int n = 0;
    int is_bad[MAX_REQ];
    int which[MAX_REQ];
    /* Each misbehaving request sits between two well-behaved ones, all in
     * flight at once. */
    for (int i = 0; i < n_bad; i++) {
        make_req(&st, n, FAKE_OK, 5);
        is_bad[n] = 0;
        n++;
        make_req(&st, n, cases[i].mode, 6);
        is_bad[n] = 1;
        which[n] = i;
        n++;
    }
    make_req(&st, n, FAKE_OK, 5);
    is_bad[n] = 0;
    n++;
    assert_true(n <= MAX_REQ);
    struct outcome out[MAX_REQ];
    struct run_info info = drive(&a, st.reqs, n, out, 15000);
    for (int i = 0; i < n; i++) {
        const struct outcome *o = &out[i];
        assert_int_equal(o->n_finish, 1); /* finished once, never dropped */
        if (!is_bad[i]) {
            if (o->reason != ASSAY_FINISH_LENGTH) {
                fail_msg("well-behaved request %d failed: %s", i, o->msg);
            }
            assert_tokens_ok(o, &st.reqs[i], st.reqs[i].max_tokens);
            continue;
        }
        const struct bad_case *c = &cases[which[i]];
        printf("# mode %2d -> %-18s %s\n", c->mode, assay_status_str((enum assay_status)o->error),
               o->msg);
        if (o->reason != ASSAY_FINISH_ERROR) {
            fail_msg("mode %d: expected an error, got %s", c->mode,
                     assay_finish_reason_str(o->reason));
        }
        if (o->error != (int32_t)c->status) {
            fail_msg("mode %d: status %s, expected %s (%s)", c->mode,
                     assay_status_str((enum assay_status)o->error), assay_status_str(c->status),
                     o->msg);
        }
        if (strstr(o->msg, c->reason) == NULL) {
            fail_msg("mode %d: message \"%s\" does not say \"%s\"", c->mode, o->msg, c->reason);
        }
        assert_int_equal(o->finish_index, o->n_tok);
        if (c->tokens_before >= 0) {
            assert_int_equal(o->n_tok, c->tokens_before);
            assert_tokens_ok(o, &st.reqs[i], c->tokens_before);
        }
    }
    struct assay_openai_stats stats;
    assert_int_equal(assay_openai_get_stats(&a, &stats), ASSAY_OK);
    assert_int_equal(stats.n_submitted, n);
    assert_int_equal(stats.n_error, n_bad);
    assert_int_equal(stats.n_length, n - n_bad);
    /* Bounded: the slowest case is the stall timeout (2 s); a hang would
     * reach the drive's limit. No step blocked for long, whatever the
     * machine's load made of its wall time. */
    printf("# %d requests (%d misbehaving) in %.3f s; longest step %.2f ms, most blocked in one "
           "step %.2f ms\n",
           n, n_bad, info.seconds, info.max_step_ms, info.max_blocked_ms);
    assert_true(info.seconds < 20.0 * g_time_scale);
    /* A step that waited on a misbehaving server would sit in its stall
     * (2 s); what a busy machine adds to a step that does not wait (page
     * faults, the allocator's locks: 56 ms seen under ASan with both cores
     * taken) stays far below 500 ms. */
    assert_true(isnan(info.max_blocked_ms) || info.max_blocked_ms < 500.0 * g_time_scale);
    assay_adapter_close(&a);
    assert_int_equal(fake_server_n_path(g_srv, "/stolen"), 0); /* never followed */
}

static void test_misbehaviours_completion(void **state)
{
    (void)state;
    const struct bad_case cases[] = {
        {FAKE_HTTP_500, ASSAY_ERR_NET, "HTTP 500 Internal Server Error: boom: the model exploded", 0},
        {FAKE_HTTP_429, ASSAY_ERR_NET, "HTTP 429 Too Many Requests (Retry-After: 7 s): slow down", 0},
        {FAKE_CLOSE_CHUNKED, ASSAY_ERR_NET, "connection closed mid-stream", 2},
        {FAKE_CLOSE_EOF, ASSAY_ERR_NET, "connection closed mid-stream", 2},
        {FAKE_BAD_JSON, ASSAY_ERR_PARSE, "malformed JSON in the event stream", 1},
        {FAKE_BAD_SSE, ASSAY_ERR_PARSE, "malformed server-sent events", 1},
        {FAKE_HUGE_LINE, ASSAY_ERR_PARSE, "SSE line longer than 1048576 bytes", 1},
        {FAKE_STALL, ASSAY_ERR_TIMEOUT, "stall timeout: the stream stalled", 2},
        {FAKE_SILENT, ASSAY_ERR_TIMEOUT, "stall timeout: no response from the server", 0},
        {FAKE_NO_RESPONSE, ASSAY_ERR_NET, "closed the connection without a response", 0},
        {FAKE_AFTER_END, ASSAY_ERR_NET, "data after the final chunk", 6},
        {FAKE_TOO_MANY, ASSAY_ERR_NET, "more tokens than max_tokens 6", 6},
        {FAKE_OUT_OF_VOCAB, ASSAY_ERR_NET, "token id 999 at position 2 is outside the vocabulary", 2},
        {FAKE_REDIRECT, ASSAY_ERR_NET, "redirects are never followed", 0},
        {FAKE_ECHO_AUTH, ASSAY_ERR_NET, "HTTP 401 Unauthorized", 0},
        {FAKE_ERROR_EVENT, ASSAY_ERR_NET, "the server reported an error mid-stream: slot 0 failed", 1},
        {FAKE_SHORT_EOS, ASSAY_ERR_NET, "ended the stream early (stop_type \"eos\")", 2},
        {FAKE_WRONG_TYPE, ASSAY_ERR_PARSE, "not an event stream (Content-Type: application/json)", 0},
        {FAKE_BOS, ASSAY_ERR_NET, "evaluated 5 prompt tokens but 4 were sent", 6},
        {FAKE_IGNORE_ORDER, ASSAY_ERR_UNSUPPORTED, "did not apply \"samplers\"", 6},
    };
    check_misbehaviours(ASSAY_OPENAI_API_COMPLETION, cases, (int)(sizeof cases / sizeof cases[0]));
}

static void test_misbehaviours_v1(void **state)
{
    (void)state;
    const struct bad_case cases[] = {
        {FAKE_HTTP_500, ASSAY_ERR_NET, "HTTP 500", 0},
        {FAKE_NO_DONE, ASSAY_ERR_NET, "without \"data: [DONE]\"", 6},
        {FAKE_AFTER_DONE, ASSAY_ERR_NET, "data after \"[DONE]\"", 6},
        {FAKE_AFTER_END, ASSAY_ERR_NET, "after the end of the stream", 6},
        {FAKE_NO_IDS, ASSAY_ERR_PARSE, "text without token ids", 1},
        {FAKE_BOS, ASSAY_ERR_NET, "usage.prompt_tokens is 5 but 4 were sent", 6},
        {FAKE_SHORT_EOS, ASSAY_ERR_NET, "ended the stream early (finish_reason \"stop\")", 2},
        {FAKE_CLOSE_CHUNKED, ASSAY_ERR_NET, "connection closed mid-stream", 2},
        {FAKE_STALL, ASSAY_ERR_TIMEOUT, "stall timeout", 2},
    };
    check_misbehaviours(ASSAY_OPENAI_API_V1, cases, (int)(sizeof cases / sizeof cases[0]));
}

/* A request queued for a slot (llama-server sends it nothing until one
 * frees) is not stalled while the server streams to others: its silence
 * counts from the last byte any request received. Alone, the same silence
 * is a stall. */
static void test_queued_request(void **state)
{
    (void)state;
    /* valgrind slows the client's work, not the server's sleeps: 4 s
     * leaves 3 s over the 1 s gaps. */
    int32_t stall = g_time_scale > 1.0 ? 4000 : 1000;
    fake_server_set_timing(g_srv, stall * 3 / 2, stall / 4);
    char url[128];
    struct assay_openai_params p = params_for(ASSAY_OPENAI_API_COMPLETION, url, sizeof url);
    p.stall_timeout_ms = stall;
    struct assay_adapter a;
    assert_int_equal(assay_openai_open(&p, &a, NULL), ASSAY_OK);
    struct req_store st;
    make_req(&st, 0, FAKE_QUEUED, 4);
    make_req(&st, 1, FAKE_SLOW_TOKENS, 10); /* streams for 2.5 stall timeouts */
    struct outcome out[2];
    struct run_info info = drive(&a, st.reqs, 2, out, 30000);
    for (int i = 0; i < 2; i++) {
        if (out[i].reason != ASSAY_FINISH_LENGTH) {
            fail_msg("request %d, beside another's stream: %s", i, out[i].msg);
        }
        assert_tokens_ok(&out[i], &st.reqs[i], st.reqs[i].max_tokens);
    }
    printf("# queued %.1f stall timeouts beside a stream: served, in %.3f s\n", 1.5, info.seconds);
    make_req(&st, 0, FAKE_QUEUED, 4);
    info = drive(&a, st.reqs, 1, out, 30000);
    assert_int_equal(out[0].reason, ASSAY_FINISH_ERROR);
    assert_int_equal(out[0].error, ASSAY_ERR_TIMEOUT);
    assert_int_equal(out[0].n_tok, 0);
    if (strstr(out[0].msg, "stall timeout: no response from the server") == NULL) {
        fail_msg("alone: \"%s\"", out[0].msg);
    }
    printf("# alone: %s, after %.3f s\n", out[0].msg, info.seconds);
    fake_server_set_timing(g_srv, 0, 150);
    assay_adapter_close(&a);
}

/* Nobody listening: connection refused, for every request, promptly. */
static void test_connection_refused(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &alen), 0);
    int port = ntohs(addr.sin_port);
    close(fd); /* the port is now closed: connect() is refused */
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    struct assay_openai_params p = assay_openai_default_params();
    p.url = url;
    struct assay_adapter a;
    assert_int_equal(assay_openai_open(&p, &a, NULL), ASSAY_OK);
    struct req_store st;
    for (int i = 0; i < 3; i++) {
        make_req(&st, i, FAKE_OK, 4);
    }
    struct outcome out[3];
    struct run_info info = drive(&a, st.reqs, 3, out, 5000);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(out[i].n_finish, 1);
        assert_int_equal(out[i].reason, ASSAY_FINISH_ERROR);
        assert_int_equal(out[i].error, ASSAY_ERR_NET);
        assert_non_null(strstr(out[i].msg, "could not connect to http://127.0.0.1:"));
    }
    printf("# refused: %s (%.3f s)\n", out[0].msg, info.seconds);
    /* A refusal is immediate: the bound catches a hang, not a slow machine. */
    assert_true(info.seconds < 10.0 * g_time_scale);
    assay_adapter_close(&a);
}

/* A listener that never accepts, its queue filled: connect() hangs until
 * the connection timeout. */
static void test_connect_timeout(void **state)
{
    (void)state;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(lfd >= 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    assert_int_equal(bind(lfd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(lfd, 0), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&addr, &alen), 0);
    int fill[8];
    for (int i = 0; i < 8; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        assert_true(fill[i] >= 0);
        (void)connect(fill[i], (struct sockaddr *)&addr, sizeof addr);
    }
    usleep(50000);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(addr.sin_port));
    struct assay_openai_params p = assay_openai_default_params();
    p.url = url;
    p.connect_timeout_ms = 300;
    p.stall_timeout_ms = 5000;
    struct assay_adapter a;
    assert_int_equal(assay_openai_open(&p, &a, NULL), ASSAY_OK);
    struct req_store st;
    make_req(&st, 0, FAKE_OK, 4);
    struct outcome out[1];
    struct run_info info = drive(&a, st.reqs, 1, out, 5000);
    printf("# %s (%.3f s)\n", out[0].msg, info.seconds);
    assert_int_equal(out[0].n_finish, 1);
    assert_int_equal(out[0].reason, ASSAY_FINISH_ERROR);
    assert_int_equal(out[0].error, ASSAY_ERR_TIMEOUT);
    assert_non_null(strstr(out[0].msg, "connection timed out (timeout_ms 300)"));
    /* Never before the timeout (a lower bound a busy machine cannot
     * break); the upper one catches a hang. */
    assert_true(info.seconds >= 0.25 && info.seconds < 10.0 * g_time_scale);
    assay_adapter_close(&a);
    for (int i = 0; i < 8; i++) {
        close(fill[i]);
    }
    close(lfd);
}

/* ------------------------------------------------------------------ */
/* Stop tokens, aborts, timing                                         */
/* ------------------------------------------------------------------ */

static void test_stop_token(void **state)
{
    (void)state;
    struct assay_adapter a;
    open_adapter(&a, ASSAY_OPENAI_API_COMPLETION);
    struct req_store st;
    make_req(&st, 0, FAKE_SLOW_TOKENS, 8);
    st.reqs[0].stop_token = fake_server_token(st.reqs[0].prompt, 4, 1);
    int gone0 = fake_server_n_client_gone(g_srv);
    struct outcome out[1];
    drive(&a, st.reqs, 1, out, 5000);
    assert_int_equal(out[0].reason, ASSAY_FINISH_STOP);
    assert_int_equal(out[0].n_tok, 2);
    assert_int_equal(out[0].finish_index, 2);
    assert_int_equal(out[0].tok[1], st.reqs[0].stop_token);
    /* The stream was closed, not read to the end. */
    int64_t t0 = assay_now_ns();
    while (fake_server_n_client_gone(g_srv) == gone0 && assay_now_ns() - t0 < 2000000000LL) {
        usleep(10000);
    }
    assert_int_equal(fake_server_n_client_gone(g_srv), gone0 + 1);
    assay_adapter_close(&a);
}

static void test_abort(void **state)
{
    (void)state;
    struct assay_adapter a;
    open_adapter(&a, ASSAY_OPENAI_API_COMPLETION);
    struct req_store st;
    make_req(&st, 0, FAKE_SLOW_TOKENS, 8);
    make_req(&st, 1, FAKE_OK, 3);
    assert_int_equal(a.vt->add_request(a.self, &st.reqs[0]), ASSAY_OK);
    assert_int_equal(a.vt->add_request(a.self, &st.reqs[1]), ASSAY_OK);
    int gone0 = fake_server_n_client_gone(g_srv);
    int n_tok = 0, n_finish = 0, n_finish_other = 0;
    enum assay_finish_reason reason = ASSAY_FINISH_NONE;
    int64_t t0 = assay_now_ns();
    while (a.vt->has_work(a.self)) {
        const struct assay_event *ev;
        size_t n = 0;
        assert_int_equal(a.vt->step(a.self, &ev, &n), ASSAY_OK);
        for (size_t k = 0; k < n; k++) {
            if (ev[k].request_id == 2) {
                n_finish_other += ev[k].kind == ASSAY_EVENT_FINISH;
                continue;
            }
            if (ev[k].kind == ASSAY_EVENT_TOKEN) {
                n_tok++;
                assert_int_equal(a.vt->abort(a.self, 1), ASSAY_OK);
            } else if (ev[k].kind == ASSAY_EVENT_FINISH) {
                n_finish++;
                reason = ev[k].reason;
                assert_int_equal(ev[k].index, 1);
            }
        }
        assert_true(assay_now_ns() - t0 < 5000000000LL);
    }
    assert_int_equal(n_tok, 1);
    assert_int_equal(n_finish, 1);
    assert_int_equal(reason, ASSAY_FINISH_ABORT);
    assert_int_equal(n_finish_other, 1);
    assert_int_equal(a.vt->abort(a.self, 1), ASSAY_ERR_NOT_FOUND);
    assert_int_equal(a.vt->abort(a.self, 77), ASSAY_ERR_NOT_FOUND);
    t0 = assay_now_ns();
    while (fake_server_n_client_gone(g_srv) == gone0 && assay_now_ns() - t0 < 2000000000LL) {
        usleep(10000);
    }
    assert_int_equal(fake_server_n_client_gone(g_srv), gone0 + 1);
    struct assay_openai_stats stats;
    assay_openai_get_stats(&a, &stats);
    assert_int_equal(stats.n_abort, 1);
    assay_adapter_close(&a);
}

/*
 * A token's time is when its chunk arrived, and step() never blocks; both
 * by what the code does, not by how long a busy machine made it take:
 *  - each token's time lies between the moment the server wrote it (the
 *    fake server notes it, on the same clock) and the return of the step
 *    that delivered it;
 *  - a step waits for the network at most once and at most
 *    ASSAY_OPENAI_POLL_MS (the adapter counts its waits), and no step spent
 *    more than 120 ms blocked (wall time less CPU time less time waiting for
 *    a core; the figure is printed), though the server waited 150 ms
 *    between tokens.
 */
static void test_token_times(void **state)
{
    (void)state;
    struct assay_adapter a;
    open_adapter(&a, ASSAY_OPENAI_API_COMPLETION);
    struct req_store st;
    make_req(&st, 0, FAKE_SLOW_TOKENS, 4);
    struct outcome out[1];
    struct run_info info = drive(&a, st.reqs, 1, out, 5000);
    assert_int_equal(out[0].reason, ASSAY_FINISH_LENGTH);
    assert_int_equal(out[0].n_tok, 4);
    int64_t sent[16];
    assert_int_equal(fake_server_slow_token_times(g_srv, sent, 16), 4);
    printf("# tokens written by the server at");
    for (int t = 0; t < 4; t++) {
        printf("%s +%.1f", t > 0 ? "," : "", (double)(sent[t] - sent[0]) / 1e6);
    }
    printf(" ms; each arrived");
    for (int t = 0; t < 4; t++) {
        printf("%s %.2f", t > 0 ? "," : "", (double)(out[0].t_ns[t] - sent[t]) / 1e6);
    }
    printf(" ms after its write\n");
    for (int t = 0; t < 4; t++) {
        assert_true(out[0].t_ns[t] >= sent[t]);
        assert_true(out[0].t_ns[t] <= out[0].returned_ns[t]);
        assert_true(t == 0 || sent[t] - sent[t - 1] >= 150 * 1000000LL); /* the server's wait */
    }
    struct assay_openai_stats stats;
    assert_int_equal(assay_openai_get_stats(&a, &stats), ASSAY_OK);
    printf("# %lld steps, %lld waits for the network of at most %d ms; longest step %.2f ms, "
           "most blocked in one step %.2f ms\n",
           (long long)info.n_steps, (long long)stats.n_polls, (int)stats.poll_wait_ms_max,
           info.max_step_ms, info.max_blocked_ms);
    assert_true(stats.n_polls >= 1 && stats.n_polls <= info.n_steps);
    assert_int_equal(stats.poll_wait_ms_max, ASSAY_OPENAI_POLL_MS);
    /* What the code does is asserted above (every wait for the network at
     * most ASSAY_OPENAI_POLL_MS); measured, a step that waited for the
     * server's next token would block about its 150 ms between writes. */
    assert_true(isnan(info.max_blocked_ms) || info.max_blocked_ms < 120.0 * g_time_scale);
    assay_adapter_close(&a);
}

/* The harness counts failed requests as failed: every one finishes once. */
static void test_harness_counts_failures(void **state)
{
    (void)state;
    struct assay_adapter a;
    open_adapter(&a, ASSAY_OPENAI_API_COMPLETION);
    const int modes[] = {FAKE_OK, FAKE_HTTP_500, FAKE_OK, FAKE_CLOSE_CHUNKED, FAKE_STALL, FAKE_OK};
    enum { N = 6 };
    struct assay_workload w;
    struct assay_workload_request wr[N];
    int32_t prompts[N][4];
    memset(&w, 0, sizeof w);
    snprintf(w.name, sizeof w.name, "faults");
    for (int i = 0; i < N; i++) {
        memset(&wr[i], 0, sizeof wr[i]);
        prompts[i][0] = modes[i];
        prompts[i][1] = 9;
        prompts[i][2] = i;
        prompts[i][3] = 200;
        wr[i].id = (uint64_t)(100 + i);
        wr[i].arrival_step = i;
        wr[i].prompt = prompts[i];
        wr[i].prompt_len = 4;
        wr[i].max_tokens = 5;
        wr[i].stop_token = -1;
        wr[i].abort_after = -1;
        wr[i].abort_step = -1;
        wr[i].sampling = assay_sampling_greedy();
    }
    w.reqs = wr;
    w.n = N;
    struct assay_harness_opts ho;
    memset(&ho, 0, sizeof ho);
    ho.max_steps = 1000000;
    struct assay_transcript *t = NULL;
    assert_int_equal(assay_harness_run(&a, &w, &ho, &t), ASSAY_OK);
    assert_int_equal(t->status, ASSAY_OK);
    int n_failed = 0;
    for (int i = 0; i < N; i++) {
        assert_true(t->reqs[i].submitted);
        assert_int_equal(t->reqs[i].n_finish, 1);
        bool bad = modes[i] != FAKE_OK;
        assert_int_equal(t->reqs[i].reason, bad ? ASSAY_FINISH_ERROR : ASSAY_FINISH_LENGTH);
        n_failed += t->reqs[i].reason == ASSAY_FINISH_ERROR;
    }
    assert_int_equal(n_failed, 3);
    assert_int_equal(t->n_unknown_events, 0);
    assay_transcript_free(t);
    assay_adapter_close(&a);
}

/* ------------------------------------------------------------------ */
/* The API key                                                         */
/* ------------------------------------------------------------------ */

static void assert_no_secret(const char *what, const char *s)
{
    if (strstr(s, k_secret) != NULL || strstr(s, "5ecret-Q7v2") != NULL) {
        fail_msg("the API key leaked into %s: %s", what, s);
    }
}

static void test_api_key(void **state)
{
    (void)state;
    unsetenv("ASSAY_API_KEY_FILE");
    assert_int_equal(setenv("ASSAY_API_KEY", k_secret, 1), 0);
    struct assay_adapter a;
    open_adapter(&a, ASSAY_OPENAI_API_COMPLETION);
    struct req_store st;
    const int modes[] = {FAKE_OK, FAKE_ECHO_AUTH, FAKE_ERROR_EVENT, FAKE_HTTP_500, FAKE_BAD_JSON};
    int n = 5;
    for (int i = 0; i < n; i++) {
        make_req(&st, i, modes[i], 4);
    }
    struct outcome out[5];
    drive(&a, st.reqs, n, out, 10000);
    char auth[512];
    fake_server_last_auth(g_srv, auth, sizeof auth);
    char want[128];
    snprintf(want, sizeof want, "Bearer %s", k_secret);
    assert_string_equal(auth, want); /* it was sent */
    int n_redacted = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(out[i].n_finish, 1);
        assert_no_secret("a FINISH message", out[i].msg);
        n_redacted += strstr(out[i].msg, "[redacted]") != NULL;
    }
    assert_int_equal(out[0].reason, ASSAY_FINISH_LENGTH);
    assert_int_equal(n_redacted, 2); /* the 401 body and the error event echoed it */
    struct assay_adapter_info info;
    assay_adapter_get_info(&a, &info);
    assert_no_secret("info.spec", info.spec);
    assert_no_secret("info.model_name", info.model_name);
    assert_int_equal(a.vt->add_request(a.self, &st.reqs[0]), ASSAY_OK);
    assert_int_equal(a.vt->add_request(a.self, &st.reqs[0]), ASSAY_ERR_DUPLICATE);
    assert_no_secret("last_error", a.vt->last_error(a.self));
    assay_adapter_close(&a);

    /* From a file (first line), and never both. */
    char path[512];
    assay_test_scratch("api-key.txt", path, sizeof path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\nsecond line ignored\n", k_secret);
    fclose(f);
    struct assay_diag diag;
    char msg[1024];
    assert_int_equal(setenv("ASSAY_API_KEY_FILE", path, 1), 0);
    char url[128];
    struct assay_openai_params p = params_for(ASSAY_OPENAI_API_COMPLETION, url, sizeof url);
    assay_diag_clear(&diag);
    assert_int_equal(assay_openai_open(&p, &a, &diag), ASSAY_ERR_INVALID);
    assay_diag_format(&diag, msg, sizeof msg);
    assert_non_null(strstr(msg, "both set"));
    assert_no_secret("a diagnostic", msg);
    unsetenv("ASSAY_API_KEY");
    assert_int_equal(assay_openai_open(&p, &a, &diag), ASSAY_OK);
    make_req(&st, 0, FAKE_OK, 2);
    drive(&a, st.reqs, 1, out, 5000);
    assert_int_equal(out[0].reason, ASSAY_FINISH_LENGTH);
    fake_server_last_auth(g_srv, auth, sizeof auth);
    assert_string_equal(auth, want);
    assay_adapter_close(&a);
    /* An unreadable file is named, its content never shown. */
    assert_int_equal(setenv("ASSAY_API_KEY_FILE", "/nonexistent/assay-key", 1), 0);
    assay_diag_clear(&diag);
    assert_int_equal(assay_openai_open(&p, &a, &diag), ASSAY_ERR_IO);
    assay_diag_format(&diag, msg, sizeof msg);
    assert_non_null(strstr(msg, "/nonexistent/assay-key"));
    unsetenv("ASSAY_API_KEY_FILE");
    /* A key with a line break (header injection) is refused, not echoed. */
    char bad_key[128];
    snprintf(bad_key, sizeof bad_key, "%s\r\nX-Evil: 1", k_secret);
    assert_int_equal(setenv("ASSAY_API_KEY", bad_key, 1), 0);
    assay_diag_clear(&diag);
    assert_int_equal(assay_openai_open(&p, &a, &diag), ASSAY_ERR_INVALID);
    assay_diag_format(&diag, msg, sizeof msg);
    assert_no_secret("a diagnostic", msg);
    unsetenv("ASSAY_API_KEY");
    /* No key: no Authorization header. */
    assert_int_equal(assay_openai_open(&p, &a, &diag), ASSAY_OK);
    drive(&a, st.reqs, 1, out, 5000);
    fake_server_last_auth(g_srv, auth, sizeof auth);
    assert_string_equal(auth, "");
    assay_adapter_close(&a);
    remove(path);
}

/* ------------------------------------------------------------------ */
/* Engine specs and parameters                                         */
/* ------------------------------------------------------------------ */

static void test_spec(void **state)
{
    (void)state;
    char spec[256];
    struct assay_adapter a;
    struct assay_diag diag;
    char msg[1024];
    snprintf(spec, sizeof spec,
             "openai:http://127.0.0.1:%d/,model=tinygpt,api=v1,timeout_ms=1500,stall_ms=300,"
             "logprobs=2,vocab=260,ctx=64,eos=257,cache_prompt=off,requests=8",
             fake_server_port(g_srv));
    assay_diag_clear(&diag);
    if (assay_adapter_open_spec(spec, &a, &diag) != ASSAY_OK) {
        fail_msg("%s", assay_diag_format(&diag, msg, sizeof msg));
    }
    struct assay_adapter_info info;
    assay_adapter_get_info(&a, &info);
    char want[128];
    snprintf(want, sizeof want, "openai:http://127.0.0.1:%d,api=v1,model=tinygpt",
             fake_server_port(g_srv));
    assert_non_null(strstr(info.spec, want));
    assert_string_equal(info.model_name, "tinygpt");
    assert_int_equal(info.n_ctx, 64);
    /* The spec in info recreates the adapter (and holds no key). */
    struct assay_adapter again;
    assert_int_equal(assay_adapter_open_spec(info.spec, &again, &diag), ASSAY_OK);
    struct assay_adapter_info info2;
    assay_adapter_get_info(&again, &info2);
    assert_string_equal(info2.spec, info.spec);
    assay_adapter_close(&again);
    struct req_store st;
    make_req(&st, 0, FAKE_OK, 3);
    struct outcome out[1];
    drive(&a, st.reqs, 1, out, 5000);
    assert_int_equal(out[0].reason, ASSAY_FINISH_LENGTH);
    char body[4096];
    fake_server_last_body(g_srv, FAKE_OK, body, sizeof body);
    assert_non_null(strstr(body, "\"cache_prompt\":false"));
    assert_non_null(strstr(body, "\"logprobs\":2"));
    assay_adapter_close(&a);

    const struct {
        const char *spec;
        const char *says;
        const char *hidden; /* must not appear in the diagnostic */
    } bad[] = {
        {"openai:http://127.0.0.1:1,key=sk-hidden-value", "ASSAY_API_KEY", "sk-hidden-value"},
        {"openai:http://127.0.0.1:1,api_key=sk-hidden-value", "ASSAY_API_KEY", "sk-hidden-value"},
        {"openai:http://user:pw-hidden@127.0.0.1:1", "without credentials", "pw-hidden"},
        {"openai:ftp://127.0.0.1:1", "http:// or https://", NULL},
        {"openai:http://127.0.0.1:1,api=v2", "completion or v1", NULL},
        {"openai:http://127.0.0.1:1,timeout_ms=fast", "an integer", NULL},
        {"openai:http://127.0.0.1:1,stall_ms=0", "an integer in 1..", NULL},
        {"openai:http://127.0.0.1:1,logprobs=65", "0..64", NULL},
        {"openai:http://127.0.0.1:1,colour=blue", "one of model, api", NULL},
        {"openai:http://127.0.0.1:1?x=1", "without a query", NULL},
        {"openai:", "http://host:port", NULL},
        {"openai:http://127.0.0.1:1,vocab=10,eos=257", "eos in -1..vocab-1", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assay_diag_clear(&diag);
        assert_int_equal(assay_adapter_open_spec(bad[i].spec, &a, &diag), ASSAY_ERR_INVALID);
        assert_null(a.vt);
        assay_diag_format(&diag, msg, sizeof msg);
        if (strstr(msg, bad[i].says) == NULL) {
            fail_msg("spec %s: \"%s\" does not say \"%s\"", bad[i].spec, msg, bad[i].says);
        }
        if (bad[i].hidden != NULL && strstr(msg, bad[i].hidden) != NULL) {
            fail_msg("spec %s: the diagnostic shows the secret: %s", bad[i].spec, msg);
        }
    }
}

static void test_add_request_validation(void **state)
{
    (void)state;
    char url[128];
    struct assay_openai_params p = params_for(ASSAY_OPENAI_API_COMPLETION, url, sizeof url);
    p.n_ctx = 32;
    p.max_requests = 2;
    struct assay_adapter a;
    assert_int_equal(assay_openai_open(&p, &a, NULL), ASSAY_OK);
    struct req_store st;
    make_req(&st, 0, FAKE_OK, 4);
    struct assay_request r = st.reqs[0];
    r.prompt_len = 0;
    assert_int_equal(a.vt->add_request(a.self, &r), ASSAY_ERR_INVALID);
    r = st.reqs[0];
    r.max_tokens = 0;
    assert_int_equal(a.vt->add_request(a.self, &r), ASSAY_ERR_INVALID);
    int32_t bad_prompt[2] = {1, 300};
    r = st.reqs[0];
    r.prompt = bad_prompt;
    r.prompt_len = 2;
    assert_int_equal(a.vt->add_request(a.self, &r), ASSAY_ERR_INVALID);
    assert_non_null(strstr(a.vt->last_error(a.self), "prompt[1] = 300"));
    r = st.reqs[0];
    r.max_tokens = 29;
    assert_int_equal(a.vt->add_request(a.self, &r), ASSAY_ERR_INVALID);
    r = st.reqs[0];
    r.sampling.temperature = -1.0f;
    assert_int_equal(a.vt->add_request(a.self, &r), ASSAY_ERR_INVALID);
    r = st.reqs[0];
    r.sampling.top_p = 0.0f;
    assert_int_equal(a.vt->add_request(a.self, &r), ASSAY_ERR_INVALID);
    r = st.reqs[0];
    r.sampling.top_k = -3;
    assert_int_equal(a.vt->add_request(a.self, &r), ASSAY_ERR_INVALID);
    assert_false(a.vt->has_work(a.self));
    /* Live ids are unique; the queue is bounded. */
    make_req(&st, 1, FAKE_OK, 4);
    make_req(&st, 2, FAKE_OK, 4);
    assert_int_equal(a.vt->add_request(a.self, &st.reqs[0]), ASSAY_OK);
    assert_int_equal(a.vt->add_request(a.self, &st.reqs[0]), ASSAY_ERR_DUPLICATE);
    assert_int_equal(a.vt->add_request(a.self, &st.reqs[1]), ASSAY_OK);
    assert_int_equal(a.vt->add_request(a.self, &st.reqs[2]), ASSAY_ERR_FULL);
    int finished = 0;
    int64_t t0 = assay_now_ns();
    while (a.vt->has_work(a.self)) {
        const struct assay_event *ev;
        size_t n = 0;
        assert_int_equal(a.vt->step(a.self, &ev, &n), ASSAY_OK);
        for (size_t k = 0; k < n; k++) {
            finished += ev[k].kind == ASSAY_EVENT_FINISH && ev[k].reason == ASSAY_FINISH_LENGTH;
        }
        assert_true(assay_now_ns() - t0 < 5000000000LL);
    }
    assert_int_equal(finished, 2);
    /* Slots come back after the step that delivered the FINISH. */
    const struct assay_event *ev;
    size_t n = 0;
    assert_int_equal(a.vt->step(a.self, &ev, &n), ASSAY_OK);
    assert_int_equal(n, 0);
    assert_int_equal(a.vt->add_request(a.self, &st.reqs[2]), ASSAY_OK);
    assay_adapter_close(&a);

    /* Parameters. */
    struct assay_diag diag;
    struct assay_openai_params q = params_for(ASSAY_OPENAI_API_COMPLETION, url, sizeof url);
    q.stall_timeout_ms = 0;
    assert_int_equal(assay_openai_open(&q, &a, &diag), ASSAY_ERR_INVALID);
    q = params_for(ASSAY_OPENAI_API_COMPLETION, url, sizeof url);
    q.url = "http://exa mple.com";
    assert_int_equal(assay_openai_open(&q, &a, &diag), ASSAY_ERR_INVALID);
    assert_int_equal(assay_openai_open(NULL, &a, &diag), ASSAY_ERR_INVALID);
}

/* ------------------------------------------------------------------ */
/* Failing allocations                                                 */
/* ------------------------------------------------------------------ */

/* Fail the k-th allocation of open + one streamed request + close, for
 * every k until a run completes with no failure: each time a clean status
 * or a FINISH ERROR, and nothing leaked. */
static void test_failing_allocations(void **state)
{
    (void)state;
    char url[128];
    struct assay_openai_params p = params_for(ASSAY_OPENAI_API_COMPLETION, url, sizeof url);
    struct req_store st;
    make_req(&st, 0, FAKE_OK, 3);
    int n_open_failed = 0, n_add_failed = 0, n_req_failed = 0, n_ok = 0;
    long k;
    for (k = 1; k < 5000; k++) {
        assay_test_fail_alloc_at(k);
        struct assay_adapter a;
        enum assay_status st_open = assay_openai_open(&p, &a, NULL);
        bool completed = false;
        if (st_open != ASSAY_OK) {
            assert_true(st_open == ASSAY_ERR_NOMEM || st_open == ASSAY_ERR_NET);
            assert_null(a.vt);
            n_open_failed++;
        } else {
            enum assay_status st_add = a.vt->add_request(a.self, &st.reqs[0]);
            if (st_add != ASSAY_OK) {
                assert_true(st_add == ASSAY_ERR_NOMEM || st_add == ASSAY_ERR_NET);
                assert_false(a.vt->has_work(a.self));
                n_add_failed++;
            } else {
                int n_finish = 0;
                enum assay_finish_reason reason = ASSAY_FINISH_NONE;
                int64_t t0 = assay_now_ns();
                while (a.vt->has_work(a.self)) {
                    const struct assay_event *ev;
                    size_t n = 0;
                    a.vt->step(a.self, &ev, &n);
                    for (size_t e = 0; e < n; e++) {
                        if (ev[e].kind == ASSAY_EVENT_FINISH) {
                            n_finish++;
                            reason = ev[e].reason;
                        }
                    }
                    assert_true(assay_now_ns() - t0 < 5000000000LL);
                }
                assert_int_equal(n_finish, 1);
                if (reason == ASSAY_FINISH_LENGTH) {
                    n_ok++;
                } else {
                    assert_int_equal(reason, ASSAY_FINISH_ERROR);
                    n_req_failed++;
                }
            }
            assay_adapter_close(&a);
        }
        completed = assay_test_alloc_count() < k;
        long live = assay_test_alloc_live();
        assay_test_fail_alloc_off();
        if (live != 0) {
            fail_msg("failing allocation %ld: %ld allocations leaked", k, live);
        }
        if (completed) {
            break;
        }
    }
    printf("# %ld allocations in a full run; failures survived: open %d, add_request %d, "
           "in the stream %d; %d runs succeeded anyway\n",
           k - 1, n_open_failed, n_add_failed, n_req_failed, n_ok);
    assert_true(k < 5000);
    assert_true(n_open_failed > 0 && n_add_failed > 0 && n_req_failed > 0);
}

static int setup(void **state)
{
    (void)state;
    unsetenv("ASSAY_API_KEY");
    unsetenv("ASSAY_API_KEY_FILE");
    /* The first open initialises libcurl for the process. */
    struct assay_openai_params p = assay_openai_default_params();
    p.url = "http://127.0.0.1:1";
    struct assay_adapter a;
    if (assay_openai_open(&p, &a, NULL) != ASSAY_OK) {
        return -1;
    }
    assay_adapter_close(&a);
    return fake_server_start(&g_srv);
}

static int teardown(void **state)
{
    (void)state;
    fake_server_stop(g_srv);
    return 0;
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const char *scale = getenv("ASSAY_TEST_TIME_SCALE");
    if (scale != NULL && atof(scale) >= 1.0) {
        g_time_scale = atof(scale);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_well_behaved_completion),
        cmocka_unit_test(test_well_behaved_v1),
        cmocka_unit_test(test_request_body),
        cmocka_unit_test(test_logprobs_sink),
        cmocka_unit_test(test_misbehaviours_completion),
        cmocka_unit_test(test_misbehaviours_v1),
        cmocka_unit_test(test_queued_request),
        cmocka_unit_test(test_connection_refused),
        cmocka_unit_test(test_connect_timeout),
        cmocka_unit_test(test_stop_token),
        cmocka_unit_test(test_abort),
        cmocka_unit_test(test_token_times),
        cmocka_unit_test(test_harness_counts_failures),
        cmocka_unit_test(test_api_key),
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_add_request_validation),
        cmocka_unit_test(test_failing_allocations),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
