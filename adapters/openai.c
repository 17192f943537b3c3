/*
 * openai.c - the OpenAI-compatible HTTP adapter (see openai.h).
 *
 * Structure: each request owns a slot with its libcurl easy handle, its
 * request body, its SSE parser and its stream state. libcurl's write
 * callback parses the server-sent events as they arrive and hands each to
 * the chunk reader (openai_chunks.h, which does no I/O), whose token
 * callback appends TOKEN events to the adapter's event array; step()
 * drives the multi handle, turns finished transfers into FINISH events,
 * and enforces the stall timeout. A slot whose FINISH was delivered is
 * released at the start of the next step, so a FINISH message (kept in
 * the slot) lives exactly until the next step.
 *
 * The event array is reserved in add_request: a request can produce at
 * most max_tokens TOKEN events and one FINISH (more tokens are an error),
 * so the sum of max_tokens + 1 over live requests bounds one step's events
 * and step() never grows it.
 *
 * How llama.cpp samples with the parameters sent here (read in the
 * llama.cpp source that node-llama-cpp 3.21.1 ships, to learn only):
 *   - tools/server/server-schema.cpp, make_llama_cmpl_schema: "samplers"
 *     replaces the sampler list of the request; "ignore_eos" appends a
 *     -inf logit bias for every end-of-generation token;
 *     "n_probs" (alias "logprobs") and "return_tokens" are read there.
 *   - common/sampling.cpp, common_sampler_init: the chain is the logit
 *     bias sampler (when there is any bias), then exactly the listed
 *     samplers in the listed order, then "dist" (draw from the remaining
 *     distribution with the request's seed). With ["temperature", "top_k",
 *     "top_p"] and mirostat 0, no penalty, DRY, XTC, min-p, typical or
 *     top-n-sigma sampler is in the chain at all.
 *   - src/llama-sampler.cpp: llama_sampler_temp_impl divides the logits by
 *     the temperature (at temperature <= 0 it keeps only the first maximum,
 *     the lowest id on ties, and sets every other logit to -inf: greedy);
 *     llama_sampler_top_k_impl keeps the k largest; llama_sampler_top_p_apply
 *     takes the softmax of what top-k kept (renormalised) and keeps the
 *     shortest prefix whose cumulative probability reaches p, the crossing
 *     token included; llama_sampler_dist_apply draws from the softmax of
 *     the rest. That is assay's ASSAY_SAMPLING_SEQUENTIAL order.
 *   - tools/server/server-context.cpp, populate_token_probs with
 *     post_sampling_probs false, through get_token_probabilities
 *     (server-common.cpp): the top logprobs are the softmax of the model's
 *     raw logits (before any sampler, logit bias included), so they are
 *     comparable with the oracle's log-softmax.
 * One consequence that no parameter removes: with ignore_eos the server
 * can never emit its end-of-generation token, where assay's oracle treats
 * every token alike (see adapters/openai.md, "Auditing llama.cpp").
 */
#include "openai.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/alloc.h"
#include "../core/clock.h"
#include "openai_chunks.h"
#include "sse.h"

enum {
    ERR_LEN = ASSAY_OPENAI_MSG_MAX, /* a FINISH message */
    SNIPPET_LEN = 200,    /* server text quoted in a message */
    ERRBODY_MAX = 4096,   /* body of a non-200 response kept for its message */
    URL_MAX = 1024,
    KEY_MAX = 4096,
};

/* ------------------------------------------------------------------ */
/* libcurl, initialised once per process with assay's allocation hooks */
/* ------------------------------------------------------------------ */

static pthread_mutex_t g_curl_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_curl_ready; /* the one piece of process state: libcurl is global */

static void *cm_malloc(size_t n)
{
    return assay_malloc(n);
}

static void cm_free(void *p)
{
    assay_free(p);
}

static void *cm_realloc(void *p, size_t n)
{
    return assay_realloc(p, n);
}

static char *cm_strdup(const char *s)
{
    return assay_strdup(s);
}

static void *cm_calloc(size_t n, size_t size)
{
    return assay_calloc(n, size);
}

static bool curl_ready(void)
{
    pthread_mutex_lock(&g_curl_lock);
    if (!g_curl_ready) {
        g_curl_ready = curl_global_init_mem(CURL_GLOBAL_DEFAULT, cm_malloc, cm_free, cm_realloc,
                                            cm_strdup, cm_calloc) == CURLE_OK;
    }
    bool ok = g_curl_ready;
    pthread_mutex_unlock(&g_curl_lock);
    return ok;
}

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

enum req_state {
    RQ_FREE = 0,
    RQ_ACTIVE,  /* its transfer is in the multi handle */
    RQ_ENDING,  /* transfer gone; its FINISH goes out with this or the next step */
    RQ_RETIRED, /* FINISH delivered; the slot is released at the next step */
};

struct openai;

struct oa_req {
    enum req_state state;
    struct openai *oa;
    uint64_t id;
    CURL *easy;
    char *body;
    struct assay_sse_parser sse;
    struct assay_openai_stream s; /* what was asked, and what the stream did */
    int64_t t_start_ns;
    int64_t t_last_ns;    /* last byte received (or the start) */
    int64_t t_chunk_ns;   /* when the chunk being read arrived: its tokens' time */
    int64_t bytes;        /* body bytes received */
    long http_status;     /* 0 until the first body byte */
    bool stream_checked;  /* status and content type looked at */
    bool failed;          /* err holds why */
    enum assay_finish_reason reason; /* RQ_ENDING */
    enum assay_status err_status;
    char err[ERR_LEN];
    char *errbody;        /* (ERRBODY_MAX) non-200 body */
    size_t errbody_len;
    bool errbody_cut;
    char *json;           /* non-streamed: the 200 body so far (NUL-terminated) */
    size_t json_len, json_cap;
    char curl_err[CURL_ERROR_SIZE];
};

struct openai {
    struct assay_openai_params p;
    char url[URL_MAX + 32]; /* the full endpoint */
    char base[URL_MAX];     /* as configured, for the spec */
    char model[256];
    char spec[URL_MAX + 384];
    char *key;              /* NULL: no key */
    size_t key_len;
    CURLM *multi;
    struct curl_slist *headers;
    struct oa_req *reqs;    /* (max_requests) */
    int32_t n_live;         /* slots not FREE */
    struct assay_event *ev; /* (ev_cap) this step's events */
    size_t n_ev, ev_cap;
    size_t ev_reserved;     /* sum of max_tokens + 1 over ACTIVE and ENDING slots */
    assay_openai_logprobs_sink lp_sink;
    void *lp_ctx;
    assay_openai_usage_sink usage_sink;
    void *usage_ctx;
    struct assay_openai_stats stats;
    int64_t t_any_ns;       /* the last byte received by any request (0: none yet) */
    char last_error[ERR_LEN];
};

/* ------------------------------------------------------------------ */
/* Text that came from the server: sanitised and with the key redacted */
/* ------------------------------------------------------------------ */

/* Server text made safe to quote: printable, with the key redacted (see
 * assay_openai_clean_text). */
static void clean_text(const struct openai *oa, char *dst, size_t size, const char *src, size_t n,
                       bool src_cut)
{
    assay_openai_clean_text(dst, size, src, n, src_cut, oa->key, oa->key_len);
}

/* Replace every occurrence of the key in a finished message (defence in
 * depth: server text is already cleaned on the way in). */
static void redact(const struct openai *oa, char *msg, size_t size)
{
    if (oa->key == NULL || oa->key_len == 0 || strstr(msg, oa->key) == NULL) {
        return;
    }
    char tmp[ERR_LEN * 2];
    clean_text(oa, tmp, sizeof tmp, msg, strlen(msg), false);
    size_t n = strlen(tmp) < size ? strlen(tmp) : size - 1; /* truncation is intended */
    memcpy(msg, tmp, n);
    msg[n] = '\0';
}

static void set_last_error(struct openai *oa, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_last_error(struct openai *oa, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(oa->last_error, sizeof oa->last_error, fmt, ap);
    va_end(ap);
    redact(oa, oa->last_error, sizeof oa->last_error);
}

/* Mark a request failed with a reason (the first reason wins). */
static bool req_fail(struct oa_req *r, enum assay_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool req_fail(struct oa_req *r, enum assay_status st, const char *fmt, ...)
{
    if (r->failed) {
        return false;
    }
    r->failed = true;
    r->err_status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    redact(r->oa, r->err, sizeof r->err);
    return false;
}

/* ------------------------------------------------------------------ */
/* A small growable string for request bodies                          */
/* ------------------------------------------------------------------ */

struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    if (b->oom) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p != NULL ? b->p + b->len : NULL, b->p != NULL ? b->cap - b->len : 0,
                      fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    if (b->p == NULL || b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap > 0 ? b->cap : 512;
        while (cap < b->len + (size_t)n + 1) {
            cap *= 2;
        }
        char *np = assay_realloc(b->p, cap);
        if (np == NULL) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

/* A JSON string literal of s (quotes, backslashes and controls escaped). */
static void sb_json_string(struct sbuf *b, const char *s)
{
    sb_printf(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\') {
            sb_printf(b, "\\%c", *c);
        } else if (*c < 0x20) {
            sb_printf(b, "\\u%04x", *c);
        } else {
            sb_printf(b, "%c", *c);
        }
    }
    sb_printf(b, "\"");
}

/* A float as the shortest text that reads back to the same float, with a
 * '.' whatever the locale. */
static void fmt_float(char *buf, size_t size, float v)
{
    snprintf(buf, size, "%.9g", (double)v);
    for (char *c = buf; *c != '\0'; c++) {
        if (*c == ',') {
            *c = '.';
        }
    }
}

/* ------------------------------------------------------------------ */
/* Events                                                              */
/* ------------------------------------------------------------------ */

static struct assay_event *push_event(struct openai *oa)
{
    if (oa->n_ev >= oa->ev_cap) {
        return NULL; /* cannot happen: add_request reserved room */
    }
    struct assay_event *e = &oa->ev[oa->n_ev++];
    memset(e, 0, sizeof *e);
    return e;
}

/* The chunk reader's token callback: one TOKEN event, and the token's
 * logprobs to the logprobs sink. */
static enum assay_status take_token(void *ctx, int32_t index, int32_t token, double logprob,
                                    const struct assay_openai_logprob *top, int32_t n_top)
{
    struct oa_req *r = ctx;
    struct openai *oa = r->oa;
    struct assay_event *e = push_event(oa);
    if (e == NULL) {
        req_fail(r, ASSAY_ERR_INTERNAL, "event array full (adapter bug)");
        return ASSAY_ERR_INTERNAL;
    }
    e->kind = ASSAY_EVENT_TOKEN;
    e->request_id = r->id;
    e->t_ns = r->t_chunk_ns;
    e->token = token;
    e->index = index;
    oa->stats.n_tokens++;
    if (oa->lp_sink != NULL && (n_top > 0 || !isnan(logprob))) {
        oa->lp_sink(oa->lp_ctx, r->id, index, token, logprob, top, n_top);
    }
    return ASSAY_OK;
}

/* The chunk reader's usage callback: the server's counts to the usage sink. */
static void take_usage(void *ctx, int64_t prompt_tokens, int64_t completion_tokens)
{
    struct oa_req *r = ctx;
    struct openai *oa = r->oa;
    if (oa->usage_sink != NULL) {
        oa->usage_sink(oa->usage_ctx, r->id, prompt_tokens, completion_tokens, r->s.prompt_len,
                       r->s.n_out);
    }
}

/* One SSE event of the response stream, read by the chunk reader. Returns
 * false when the request failed (the transfer is then cut). */
static bool on_sse_event(struct oa_req *r, const struct assay_sse_event *ev, int64_t now)
{
    struct openai *oa = r->oa;
    if (ev->kind == ASSAY_SSE_COMMENT) {
        oa->stats.n_sse_comments++;
        return true; /* keep-alive pings */
    }
    oa->stats.n_sse_events++;
    const struct assay_openai_chunk_sink sink = {take_token, take_usage, r};
    char msg[ERR_LEN];
    r->t_chunk_ns = now;
    enum assay_status st = assay_openai_read_event(&r->s, ev, &sink, msg, sizeof msg);
    if (st != ASSAY_OK) {
        return req_fail(r, st, "%s", msg);
    }
    return true;
}

/* First body bytes: is this the event stream we asked for? */
static void check_stream(struct oa_req *r)
{
    r->stream_checked = true;
    long code = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
    r->http_status = code;
    if (code != 200) {
        return; /* the body is kept for the message; judged at the end */
    }
    char *ct = NULL;
    curl_easy_getinfo(r->easy, CURLINFO_CONTENT_TYPE, &ct);
    bool stream = r->oa->p.stream;
    const char *want = stream ? "text/event-stream" : "application/json";
    if (ct == NULL || strncasecmp(ct, want, strlen(want)) != 0) {
        char snip[96];
        clean_text(r->oa, snip, sizeof snip, ct != NULL ? ct : "none",
                   strlen(ct != NULL ? ct : "none"), false);
        req_fail(r, ASSAY_ERR_PARSE, "HTTP 200 but the body is not %s (Content-Type: %s)",
                 stream ? "an event stream" : "JSON", snip);
    }
}

/* Non-streamed: append body bytes, within max_event_bytes. */
static bool keep_json(struct oa_req *r, const char *ptr, size_t n)
{
    size_t limit = r->oa->p.max_event_bytes;
    if (r->json_len + n > limit) {
        return req_fail(r, ASSAY_ERR_PARSE, "a non-streamed response longer than %zu bytes",
                        limit);
    }
    if (r->json_len + n + 1 > r->json_cap) {
        size_t cap = r->json_cap > 0 ? r->json_cap : 4096;
        while (cap < r->json_len + n + 1) {
            cap *= 2;
        }
        char *p = assay_realloc(r->json, cap);
        if (p == NULL) {
            return req_fail(r, ASSAY_ERR_NOMEM, "out of memory for a non-streamed response");
        }
        r->json = p;
        r->json_cap = cap;
    }
    memcpy(r->json + r->json_len, ptr, n);
    r->json_len += n;
    r->json[r->json_len] = '\0';
    return true;
}

/* Non-streamed: the complete body, read as the format's final chunk. */
static void read_json_body(struct oa_req *r)
{
    const struct assay_openai_chunk_sink sink = {take_token, take_usage, r};
    char msg[ERR_LEN];
    r->t_chunk_ns = assay_now_ns();
    enum assay_status st = assay_openai_read_body(&r->s, r->json, r->json_len, &sink, msg,
                                                  sizeof msg);
    if (st != ASSAY_OK) {
        req_fail(r, st, "%s", msg);
    }
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct oa_req *r = userdata;
    struct openai *oa = r->oa;
    size_t n = size * nmemb;
    int64_t now = assay_now_ns();
    r->t_last_ns = now;
    oa->t_any_ns = now;
    r->bytes += (int64_t)n;
    oa->stats.bytes_received += (int64_t)n;
    if (!r->stream_checked) {
        check_stream(r);
    }
    if (r->failed || r->s.stopped) {
        return 0; /* cut the transfer */
    }
    if (r->http_status != 200) {
        if (r->errbody == NULL) {
            r->errbody = assay_malloc(ERRBODY_MAX);
            if (r->errbody == NULL) {
                req_fail(r, ASSAY_ERR_NOMEM, "out of memory for an HTTP %ld body",
                         r->http_status);
                return 0;
            }
        }
        size_t room = ERRBODY_MAX - r->errbody_len;
        size_t take = n < room ? n : room;
        memcpy(r->errbody + r->errbody_len, ptr, take);
        r->errbody_len += take;
        r->errbody_cut = r->errbody_cut || take < n;
        return n;
    }
    if (!oa->p.stream) {
        return keep_json(r, ptr, n) ? n : 0;
    }
    size_t off = 0;
    while (off < n) {
        size_t used = 0;
        struct assay_sse_event ev;
        enum assay_sse_result res = assay_sse_feed(&r->sse, ptr + off, n - off, &used, &ev);
        off += used;
        if (res == ASSAY_SSE_ERROR) {
            const struct assay_sse_error *e = assay_sse_last_error(&r->sse);
            req_fail(r, e->status == ASSAY_ERR_NOMEM ? ASSAY_ERR_NOMEM : ASSAY_ERR_PARSE,
                     "malformed server-sent events at byte %" PRIu64 ": %s", e->offset,
                     e->message);
            return 0;
        }
        if (res == ASSAY_SSE_NEED_MORE) {
            break;
        }
        if (!on_sse_event(r, &ev, now) || r->s.stopped) {
            return 0;
        }
    }
    return n;
}

/* ------------------------------------------------------------------ */
/* Ending requests                                                     */
/* ------------------------------------------------------------------ */

static void detach(struct oa_req *r)
{
    if (r->easy != NULL) {
        curl_multi_remove_handle(r->oa->multi, r->easy);
        curl_easy_cleanup(r->easy);
        r->easy = NULL;
    }
}

/* Take a request out of the multi handle; its FINISH goes out with the
 * endings of the current (or next) step. */
static void end_request(struct oa_req *r, enum assay_finish_reason reason)
{
    detach(r);
    r->reason = reason;
    r->state = RQ_ENDING;
}

static const cJSON *member(const cJSON *obj, const char *name)
{
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
}

/* The message for a non-200 response. */
static void http_error(struct oa_req *r)
{
    struct openai *oa = r->oa;
    char snip[SNIPPET_LEN + 32] = "";
    long code = r->http_status;
    if (r->errbody_len > 0) {
        cJSON *root = cJSON_ParseWithLength(r->errbody, r->errbody_len);
        const cJSON *err = member(root, "error");
        const cJSON *msg = cJSON_IsString(err) ? err : member(err, "message");
        if (cJSON_IsString(msg)) {
            clean_text(oa, snip, SNIPPET_LEN, msg->valuestring, strlen(msg->valuestring), false);
        } else {
            clean_text(oa, snip, SNIPPET_LEN, r->errbody, r->errbody_len, r->errbody_cut);
        }
        cJSON_Delete(root);
    }
    if (code >= 300 && code < 400) {
        char *loc = NULL;
        char where[SNIPPET_LEN] = "nowhere";
        if (curl_easy_getinfo(r->easy, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK && loc != NULL) {
            clean_text(oa, where, sizeof where, loc, strlen(loc), false);
        }
        req_fail(r, ASSAY_ERR_NET, "HTTP %ld: a redirect to %s (redirects are never followed)",
                 code, where);
        return;
    }
    char extra[64] = "";
    curl_off_t retry = 0;
    if (code == 429 && curl_easy_getinfo(r->easy, CURLINFO_RETRY_AFTER, &retry) == CURLE_OK &&
        retry > 0) {
        snprintf(extra, sizeof extra, " (Retry-After: %" CURL_FORMAT_CURL_OFF_T " s)", retry);
    }
    const char *what = code == 429   ? " Too Many Requests"
                       : code == 500 ? " Internal Server Error"
                       : code == 503 ? " Service Unavailable"
                       : code == 400 ? " Bad Request"
                       : code == 401 ? " Unauthorized"
                       : code == 404 ? " Not Found"
                                     : "";
    req_fail(r, ASSAY_ERR_NET, "HTTP %ld%s%s%s%s", code, what, extra, snip[0] != '\0' ? ": " : "",
             snip);
}

/* The response is over: did the stream end as it must, and how? */
static void finish_stream(struct oa_req *r, bool streamed, enum assay_finish_reason *reason)
{
    char msg[ERR_LEN];
    enum assay_status st = assay_openai_stream_finish(&r->s, streamed, reason, msg, sizeof msg);
    if (st != ASSAY_OK) {
        req_fail(r, st, "%s", msg);
    }
}

/* A transfer libcurl says is done. */
static void transfer_done(struct oa_req *r, CURLcode res)
{
    struct openai *oa = r->oa;
    if (!r->stream_checked && r->easy != NULL && res == CURLE_OK) {
        check_stream(r); /* a response with no body at all */
    }
    if (r->failed) {
        end_request(r, ASSAY_FINISH_ERROR);
        return;
    }
    if (r->s.stopped) {
        end_request(r, ASSAY_FINISH_STOP);
        return;
    }
    char cerr[CURL_ERROR_SIZE + 64];
    clean_text(oa, cerr, sizeof cerr, r->curl_err, strlen(r->curl_err), false);
    if (cerr[0] == '\0') {
        snprintf(cerr, sizeof cerr, "%s", curl_easy_strerror(res));
    }
    enum assay_finish_reason reason = ASSAY_FINISH_ERROR;
    switch (res) {
    case CURLE_OK:
        if (r->http_status != 200) {
            http_error(r);
        } else if (!oa->p.stream) {
            read_json_body(r);
            if (!r->failed) {
                finish_stream(r, false, &reason);
            }
        } else if (assay_sse_finish(&r->sse) != ASSAY_OK) {
            req_fail(r, ASSAY_ERR_NET, "connection closed mid-stream: %s",
                     assay_sse_last_error(&r->sse)->message);
        } else {
            finish_stream(r, true, &reason);
        }
        break;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
        req_fail(r, ASSAY_ERR_NET, "could not connect to %s: %s", oa->base, cerr);
        break;
    case CURLE_OPERATION_TIMEDOUT:
        req_fail(r, ASSAY_ERR_TIMEOUT, "connection timed out (timeout_ms %d): %s",
                 (int)oa->p.connect_timeout_ms, cerr);
        break;
    case CURLE_GOT_NOTHING:
        req_fail(r, ASSAY_ERR_NET, "the server closed the connection without a response: %s",
                 cerr);
        break;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        req_fail(r, ASSAY_ERR_NET, "connection closed mid-stream: %s", cerr);
        break;
    case CURLE_OUT_OF_MEMORY:
        req_fail(r, ASSAY_ERR_NOMEM, "out of memory in libcurl");
        break;
    default:
        req_fail(r, ASSAY_ERR_NET, "HTTP transfer failed (%s): %s", curl_easy_strerror(res),
                 cerr);
        break;
    }
    end_request(r, r->failed ? ASSAY_FINISH_ERROR : reason);
}

/* Release a slot's resources (its FINISH was delivered or it never started). */
static void release(struct oa_req *r)
{
    detach(r);
    assay_free(r->body);
    assay_free(r->errbody);
    assay_free(r->json);
    assay_sse_free(&r->sse);
    struct openai *oa = r->oa;
    memset(r, 0, sizeof *r);
    r->oa = oa;
}

/* Append the FINISH events of every ending request. */
static void emit_endings(struct openai *oa)
{
    for (int32_t i = 0; i < oa->p.max_requests; i++) {
        struct oa_req *r = &oa->reqs[i];
        if (r->state != RQ_ENDING) {
            continue;
        }
        struct assay_event *e = push_event(oa);
        if (e == NULL) {
            break; /* cannot happen; the rest go out next step */
        }
        e->kind = ASSAY_EVENT_FINISH;
        e->request_id = r->id;
        e->t_ns = assay_now_ns();
        e->index = r->s.n_out;
        e->reason = r->reason;
        if (r->reason == ASSAY_FINISH_ERROR) {
            size_t len = strlen(r->err);
            snprintf(r->err + len, sizeof r->err - len, " (after %d of %d tokens)",
                     (int)r->s.n_out, (int)r->s.max_tokens);
            e->error = r->err_status;
            e->message = r->err;
        }
        switch (r->reason) {
        case ASSAY_FINISH_LENGTH: oa->stats.n_length++; break;
        case ASSAY_FINISH_STOP: oa->stats.n_stop++; break;
        case ASSAY_FINISH_ABORT: oa->stats.n_abort++; break;
        default: oa->stats.n_error++; break;
        }
        r->state = RQ_RETIRED;
        oa->ev_reserved -= (size_t)r->s.max_tokens + 1;
    }
}

/* ------------------------------------------------------------------ */
/* The vtable                                                          */
/* ------------------------------------------------------------------ */

static struct oa_req *find_live(struct openai *oa, uint64_t id)
{
    for (int32_t i = 0; i < oa->p.max_requests; i++) {
        struct oa_req *r = &oa->reqs[i];
        if ((r->state == RQ_ACTIVE || r->state == RQ_ENDING) && r->id == id) {
            return r;
        }
    }
    return NULL;
}

static enum assay_status build_body(struct openai *oa, const struct assay_request *req,
                                    bool ignore_eos, char **out)
{
    struct sbuf b = {NULL, 0, 0, false};
    const struct assay_sampling *s = &req->sampling;
    char t[32], p[32];
    fmt_float(t, sizeof t, s->temperature);
    fmt_float(p, sizeof p, s->top_p);
    sb_printf(&b, "{");
    if (oa->model[0] != '\0') {
        sb_printf(&b, "\"model\":");
        sb_json_string(&b, oa->model);
        sb_printf(&b, ",");
    }
    sb_printf(&b, "\"prompt\":[");
    for (int32_t i = 0; i < req->prompt_len; i++) {
        sb_printf(&b, i > 0 ? ",%d" : "%d", (int)req->prompt[i]);
    }
    sb_printf(&b, "],\"stream\":%s", oa->p.stream ? "true" : "false");
    if (oa->p.api == ASSAY_OPENAI_API_V1) {
        sb_printf(&b, ",\"max_tokens\":%d,\"logprobs\":%d,\"return_tokens_as_token_ids\":true",
                  (int)req->max_tokens, (int)(oa->p.n_probs > 0 ? oa->p.n_probs : 1));
    } else {
        sb_printf(&b, ",\"n_predict\":%d,\"return_tokens\":true,\"n_probs\":%d",
                  (int)req->max_tokens, (int)oa->p.n_probs);
    }
    sb_printf(&b,
              ",\"temperature\":%s,\"top_k\":%d,\"top_p\":%s,\"min_p\":0,\"typical_p\":1,"
              "\"repeat_penalty\":1,\"repeat_last_n\":0,\"presence_penalty\":0,"
              "\"frequency_penalty\":0,\"dry_multiplier\":0,\"xtc_probability\":0,"
              "\"top_n_sigma\":-1,\"mirostat\":0,\"dynatemp_range\":0,\"n\":1,"
              "\"ignore_eos\":%s,\"samplers\":[\"temperature\",\"top_k\",\"top_p\"]",
              t, (int)s->top_k, p, ignore_eos ? "true" : "false");
    if (s->seeded) {
        sb_printf(&b, ",\"seed\":%" PRIu64, (uint64_t)(s->seed % 0xFFFFFFFFull));
    }
    if (oa->p.cache_prompt >= 0) {
        sb_printf(&b, ",\"cache_prompt\":%s", oa->p.cache_prompt ? "true" : "false");
    }
    sb_printf(&b, "}");
    if (b.oom) {
        assay_free(b.p);
        return ASSAY_ERR_NOMEM;
    }
    *out = b.p;
    return ASSAY_OK;
}

/* Options of one transfer: a streamed POST to the configured URL only. */
static CURLcode setup_easy(struct openai *oa, struct oa_req *r, CURL *easy, const char *body)
{
    CURLcode cc[16];
    int k = 0;
    cc[k++] = curl_easy_setopt(easy, CURLOPT_URL, oa->url);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_POST, 1L);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    cc[k++] = curl_easy_setopt(easy, CURLOPT_HTTPHEADER, oa->headers);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_write);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_WRITEDATA, r);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_PRIVATE, r);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, r->curl_err);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)oa->p.connect_timeout_ms);
    /* Only the URL given: no redirects, no proxy from the environment,
     * no protocol but HTTP(S). */
    cc[k++] = curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_PROXY, "");
    cc[k++] = curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    cc[k++] = curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    for (int i = 0; i < k; i++) {
        if (cc[i] != CURLE_OK) {
            return cc[i];
        }
    }
    return CURLE_OK;
}

static enum assay_status oa_add(void *self, const struct assay_request *req)
{
    struct openai *oa = self;
    const struct assay_sampling *s = &req->sampling;
    if (req->prompt == NULL || req->prompt_len <= 0 || req->max_tokens <= 0) {
        set_last_error(oa, "request %" PRIu64 ": empty prompt or max_tokens <= 0", req->id);
        return ASSAY_ERR_INVALID;
    }
    if (!(s->temperature >= 0.0f) || !isfinite(s->temperature) || s->top_k < 0 ||
        !(s->top_p > 0.0f && s->top_p <= 1.0f)) {
        set_last_error(oa, "request %" PRIu64 ": invalid sampling parameters", req->id);
        return ASSAY_ERR_INVALID;
    }
    for (int32_t i = 0; i < req->prompt_len; i++) {
        if (req->prompt[i] < 0 || (oa->p.vocab > 0 && req->prompt[i] >= oa->p.vocab)) {
            set_last_error(oa, "request %" PRIu64 ": prompt[%d] = %d is outside the vocabulary",
                           req->id, (int)i, (int)req->prompt[i]);
            return ASSAY_ERR_INVALID;
        }
    }
    if (oa->p.n_ctx > 0 && (int64_t)req->prompt_len + req->max_tokens > oa->p.n_ctx) {
        set_last_error(oa, "request %" PRIu64 ": %d + %d tokens exceed the context of %d",
                       req->id, (int)req->prompt_len, (int)req->max_tokens, (int)oa->p.n_ctx);
        return ASSAY_ERR_INVALID;
    }
    if (find_live(oa, req->id) != NULL) {
        set_last_error(oa, "request %" PRIu64 " is already live", req->id);
        return ASSAY_ERR_DUPLICATE;
    }
    struct oa_req *r = NULL;
    for (int32_t i = 0; i < oa->p.max_requests && r == NULL; i++) {
        if (oa->reqs[i].state == RQ_FREE) {
            r = &oa->reqs[i];
        }
    }
    if (r == NULL) {
        set_last_error(oa, "%d requests are live (max_requests)", (int)oa->p.max_requests);
        return ASSAY_ERR_FULL;
    }
    /* Room for this request's events in any one step. */
    size_t need = oa->ev_reserved + (size_t)req->max_tokens + 1;
    if (need > oa->ev_cap) {
        size_t cap = oa->ev_cap > 0 ? oa->ev_cap : 256;
        while (cap < need) {
            cap *= 2;
        }
        struct assay_event *ev = assay_realloc(oa->ev, cap * sizeof *ev);
        if (ev == NULL) {
            set_last_error(oa, "out of memory");
            return ASSAY_ERR_NOMEM;
        }
        oa->ev = ev;
        oa->ev_cap = cap;
    }
    struct assay_openai_stream stream;
    assay_openai_stream_init(&stream, oa->p.api, oa->p.vocab, oa->p.eos_token, req);
    stream.secret = oa->key;
    stream.secret_len = oa->key_len;
    char *body = NULL;
    enum assay_status st = build_body(oa, req, stream.ignore_eos, &body);
    struct assay_sse_limits lim = assay_sse_default_limits();
    lim.max_line = oa->p.max_event_bytes;
    lim.max_data = oa->p.max_event_bytes;
    lim.strict = true;
    if (st == ASSAY_OK) {
        st = assay_sse_init(&r->sse, &lim);
    }
    CURL *easy = st == ASSAY_OK ? curl_easy_init() : NULL;
    if (st == ASSAY_OK && easy == NULL) {
        st = ASSAY_ERR_NOMEM;
    }
    if (st == ASSAY_OK) {
        r->oa = oa;
        r->easy = easy;
        r->curl_err[0] = '\0';
        CURLcode cc = setup_easy(oa, r, easy, body);
        if (cc != CURLE_OK) {
            st = cc == CURLE_OUT_OF_MEMORY ? ASSAY_ERR_NOMEM : ASSAY_ERR_NET;
        }
    }
    if (st == ASSAY_OK) {
        CURLMcode mc = curl_multi_add_handle(oa->multi, easy);
        if (mc != CURLM_OK) {
            st = mc == CURLM_OUT_OF_MEMORY ? ASSAY_ERR_NOMEM : ASSAY_ERR_NET;
        }
    }
    if (st != ASSAY_OK) {
        if (easy != NULL) {
            curl_easy_cleanup(easy);
        }
        r->easy = NULL;
        assay_free(body);
        assay_sse_free(&r->sse);
        memset(r, 0, sizeof *r);
        r->oa = oa;
        set_last_error(oa, "request %" PRIu64 ": could not prepare the HTTP request (%s)",
                       req->id, assay_status_str(st));
        return st;
    }
    r->state = RQ_ACTIVE;
    r->id = req->id;
    r->body = body;
    r->s = stream;
    r->t_start_ns = assay_now_ns();
    r->t_last_ns = r->t_start_ns;
    oa->ev_reserved += (size_t)req->max_tokens + 1;
    oa->n_live++;
    oa->stats.n_submitted++;
    return ASSAY_OK;
}

static bool oa_has_work(void *self)
{
    struct openai *oa = self;
    for (int32_t i = 0; i < oa->p.max_requests; i++) {
        enum req_state s = oa->reqs[i].state;
        if (s == RQ_ACTIVE || s == RQ_ENDING) {
            return true;
        }
    }
    return false;
}

/* Let libcurl move bytes, then collect finished transfers. */
static enum assay_status pump(struct openai *oa, int *running)
{
    CURLMcode mc = curl_multi_perform(oa->multi, running);
    if (mc != CURLM_OK) {
        set_last_error(oa, "curl_multi_perform: %s", curl_multi_strerror(mc));
        return mc == CURLM_OUT_OF_MEMORY ? ASSAY_ERR_NOMEM : ASSAY_ERR_NET;
    }
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(oa->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE) {
            continue;
        }
        char *priv = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
        struct oa_req *r = (struct oa_req *)(void *)priv;
        if (r != NULL && r->state == RQ_ACTIVE) {
            transfer_done(r, msg->data.result);
        }
    }
    return ASSAY_OK;
}

/* Requests that received nothing for stall_timeout_ms. A request still
 * waiting for its first byte may be queued behind others (llama-server
 * sends a queued request nothing until a slot frees), so its silence counts
 * from the later of its start and the last byte any request received: it
 * times out when the whole server has been silent that long, and a server
 * that serves others but never it still fails it once the others end. */
static void check_stalls(struct openai *oa)
{
    int64_t now = assay_now_ns();
    int64_t limit = (int64_t)oa->p.stall_timeout_ms * 1000000;
    for (int32_t i = 0; i < oa->p.max_requests; i++) {
        struct oa_req *r = &oa->reqs[i];
        if (r->state != RQ_ACTIVE) {
            continue;
        }
        int64_t since = r->t_last_ns;
        if (r->bytes == 0 && oa->t_any_ns > since) {
            since = oa->t_any_ns;
        }
        if (now - since <= limit) {
            continue;
        }
        if (r->bytes == 0) {
            req_fail(r, ASSAY_ERR_TIMEOUT,
                     "stall timeout: no response from the server within %d ms (stall_ms), "
                     "nor any byte to another request",
                     (int)oa->p.stall_timeout_ms);
        } else {
            req_fail(r, ASSAY_ERR_TIMEOUT,
                     "stall timeout: the stream stalled, no data for %d ms (stall_ms)",
                     (int)oa->p.stall_timeout_ms);
        }
        end_request(r, ASSAY_FINISH_ERROR);
    }
}

static bool any_ending(const struct openai *oa)
{
    for (int32_t i = 0; i < oa->p.max_requests; i++) {
        if (oa->reqs[i].state == RQ_ENDING) {
            return true;
        }
    }
    return false;
}

static enum assay_status oa_step(void *self, const struct assay_event **events, size_t *n_events)
{
    struct openai *oa = self;
    *events = oa->ev;
    *n_events = 0;
    oa->n_ev = 0;
    for (int32_t i = 0; i < oa->p.max_requests; i++) {
        if (oa->reqs[i].state == RQ_RETIRED) {
            release(&oa->reqs[i]);
            oa->n_live--;
        }
    }
    int running = 0;
    enum assay_status st = pump(oa, &running);
    check_stalls(oa);
    if (st == ASSAY_OK && oa->n_ev == 0 && !any_ending(oa) && running > 0) {
        /* Nothing ready: wait for the network, briefly. */
        oa->stats.n_polls++;
        if (oa->stats.poll_wait_ms_max < ASSAY_OPENAI_POLL_MS) {
            oa->stats.poll_wait_ms_max = ASSAY_OPENAI_POLL_MS;
        }
        CURLMcode mc = curl_multi_poll(oa->multi, NULL, 0, ASSAY_OPENAI_POLL_MS, NULL);
        if (mc != CURLM_OK) {
            set_last_error(oa, "curl_multi_poll: %s", curl_multi_strerror(mc));
            st = ASSAY_ERR_NET;
        } else {
            st = pump(oa, &running);
            check_stalls(oa);
        }
    }
    if (st != ASSAY_OK) {
        /* The multi handle itself failed: every live request ends. */
        for (int32_t i = 0; i < oa->p.max_requests; i++) {
            struct oa_req *r = &oa->reqs[i];
            if (r->state == RQ_ACTIVE) {
                req_fail(r, st, "the HTTP client failed: %s", oa->last_error);
                end_request(r, ASSAY_FINISH_ERROR);
            }
        }
    }
    emit_endings(oa);
    *n_events = oa->n_ev;
    return st;
}

static enum assay_status oa_abort(void *self, uint64_t id)
{
    struct openai *oa = self;
    struct oa_req *r = find_live(oa, id);
    if (r == NULL) {
        set_last_error(oa, "request %" PRIu64 " is not live", id);
        return ASSAY_ERR_NOT_FOUND;
    }
    if (r->state == RQ_ACTIVE) {
        end_request(r, ASSAY_FINISH_ABORT);
    }
    /* An ending request keeps the end it already had. */
    return ASSAY_OK;
}

static void oa_free(void *self)
{
    struct openai *oa = self;
    if (oa == NULL) {
        return;
    }
    if (oa->reqs != NULL) {
        for (int32_t i = 0; i < oa->p.max_requests; i++) {
            release(&oa->reqs[i]);
        }
    }
    if (oa->multi != NULL) {
        curl_multi_cleanup(oa->multi);
    }
    for (struct curl_slist *h = oa->headers; h != NULL; h = h->next) {
        assay_wipe(h->data, strlen(h->data));
    }
    curl_slist_free_all(oa->headers);
    if (oa->key != NULL) {
        assay_wipe(oa->key, oa->key_len);
        assay_free(oa->key);
    }
    assay_free(oa->reqs);
    assay_free(oa->ev);
    assay_free(oa);
}

static enum assay_status oa_info(void *self, struct assay_adapter_info *out)
{
    struct openai *oa = self;
    memset(out, 0, sizeof *out);
    out->name = "openai";
    out->spec = oa->spec;
    out->model_name = oa->model;
    out->weights_sha256 = "";
    out->vocab = oa->p.vocab;
    out->n_ctx = oa->p.n_ctx;
    out->batch_invariant = false;
    out->deterministic_seeds = true;
    out->sampling_order = ASSAY_SAMPLING_SEQUENTIAL;
    return ASSAY_OK;
}

static const char *oa_last_error(void *self)
{
    return ((struct openai *)self)->last_error;
}

static const struct assay_adapter_vtable k_openai_vt = {
    .abi_version = ASSAY_ADAPTER_ABI_VERSION,
    .name = "openai",
    .add_request = oa_add,
    .has_work = oa_has_work,
    .step = oa_step,
    .abort = oa_abort,
    .free = oa_free,
    .info = oa_info,
    .block_stats = NULL,
    .block_audit = NULL,
    .set_logits_sink = NULL,
    .check_invariants = NULL,
    .last_error = oa_last_error,
};

/* ------------------------------------------------------------------ */
/* Opening                                                             */
/* ------------------------------------------------------------------ */

struct assay_openai_params assay_openai_default_params(void)
{
    struct assay_openai_params p;
    memset(&p, 0, sizeof p);
    p.url = NULL;
    p.model = NULL;
    p.api = ASSAY_OPENAI_API_COMPLETION;
    p.connect_timeout_ms = 5000;
    p.stall_timeout_ms = 60000;
    p.max_requests = 1024;
    p.n_probs = 0;
    p.vocab = 0;
    p.n_ctx = 0;
    p.eos_token = -1;
    p.cache_prompt = -1;
    p.max_event_bytes = ASSAY_SSE_DEFAULT_MAX_DATA;
    p.stream = true;
    return p;
}

static enum assay_status bad_param(struct assay_diag *diag, const char *field,
                                   const char *expected, const char *got)
{
    assay_diag_set(diag, "openai adapter", field, expected, "%s", got);
    return ASSAY_ERR_INVALID;
}

/* Check the URL: http(s), printable, no credentials, query or fragment. */
static enum assay_status check_url(const char *url, struct assay_diag *diag)
{
    if (url == NULL || url[0] == '\0') {
        return bad_param(diag, "url", "http://host:port or https://host:port", "nothing");
    }
    size_t n = strlen(url);
    size_t skip = strncasecmp(url, "http://", 7) == 0    ? 7
                  : strncasecmp(url, "https://", 8) == 0 ? 8
                                                          : 0;
    if (skip == 0) {
        return bad_param(diag, "url", "a URL starting with http:// or https://",
                         "another scheme");
    }
    if (n >= URL_MAX - 32) {
        return bad_param(diag, "url", "a URL shorter than 990 characters", "a longer one");
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)url[i];
        if (c <= 0x20 || c >= 0x7f) {
            return bad_param(diag, "url", "a URL of printable ASCII without spaces",
                             "a space, control or non-ASCII character");
        }
        if (c == '?' || c == '#') {
            return bad_param(diag, "url", "a URL without a query or fragment", "'?' or '#'");
        }
    }
    size_t host_end = strcspn(url + skip, "/");
    if (memchr(url + skip, '@', host_end) != NULL) {
        /* Not echoed: it may hold a password. */
        return bad_param(diag, "url",
                         "a URL without credentials (put the key in ASSAY_API_KEY or "
                         "ASSAY_API_KEY_FILE)",
                         "user information before '@'");
    }
    if (host_end == 0) {
        return bad_param(diag, "url", "a host name", "none");
    }
    return ASSAY_OK;
}

/* The API key from ASSAY_API_KEY or ASSAY_API_KEY_FILE (see openai.h). */
static enum assay_status read_api_key(char **out, size_t *len, struct assay_diag *diag)
{
    *out = NULL;
    *len = 0;
    const char *env = getenv("ASSAY_API_KEY");
    const char *file = getenv("ASSAY_API_KEY_FILE");
    bool has_env = env != NULL && env[0] != '\0';
    bool has_file = file != NULL && file[0] != '\0';
    if (has_env && has_file) {
        assay_diag_set(diag, "environment", "ASSAY_API_KEY",
                       "one of ASSAY_API_KEY or ASSAY_API_KEY_FILE", "%s", "both set");
        return ASSAY_ERR_INVALID;
    }
    if (!has_env && !has_file) {
        return ASSAY_OK;
    }
    char *key = assay_malloc(KEY_MAX + 1);
    if (key == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    size_t n = 0;
    const char *what = has_env ? "ASSAY_API_KEY" : "ASSAY_API_KEY_FILE";
    if (has_env) {
        n = strlen(env);
        if (n > KEY_MAX) {
            assay_free(key);
            assay_diag_set(diag, "environment", what, "a key of at most 4096 characters",
                           "%zu characters", n);
            return ASSAY_ERR_INVALID;
        }
        memcpy(key, env, n);
    } else {
        FILE *f = fopen(file, "rb");
        if (f == NULL) {
            assay_free(key);
            assay_diag_set(diag, file, "ASSAY_API_KEY_FILE", "a readable file with the API key",
                           "%s", strerror(errno));
            return ASSAY_ERR_IO;
        }
        n = fread(key, 1, KEY_MAX + 1, f);
        bool err = ferror(f) != 0;
        int read_errno = errno;
        fclose(f);
        if (err || n > KEY_MAX) {
            assay_wipe(key, KEY_MAX + 1);
            assay_free(key);
            assay_diag_set(diag, file, "ASSAY_API_KEY_FILE", "a file of at most 4096 bytes",
                           "%s", err ? strerror(read_errno) : "a longer file");
            return err ? ASSAY_ERR_IO : ASSAY_ERR_INVALID;
        }
        /* The first line, without its line end. */
        size_t eol = 0;
        while (eol < n && key[eol] != '\n' && key[eol] != '\r') {
            eol++;
        }
        n = eol;
    }
    while (n > 0 && (key[n - 1] == ' ' || key[n - 1] == '\t')) {
        n--;
    }
    key[n] = '\0';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)key[i];
        if (c <= 0x20 || c >= 0x7f) {
            assay_wipe(key, KEY_MAX + 1);
            assay_free(key);
            assay_diag_set(diag, has_env ? "environment" : file, what,
                           "a key of printable ASCII without spaces",
                           "a space, control or non-ASCII character at position %zu", i);
            return ASSAY_ERR_INVALID;
        }
    }
    if (n == 0) {
        assay_wipe(key, KEY_MAX + 1);
        assay_free(key);
        assay_diag_set(diag, has_env ? "environment" : file, what, "a non-empty key", "%s",
                       "an empty one");
        return ASSAY_ERR_INVALID;
    }
    *out = key;
    *len = n;
    return ASSAY_OK;
}

static enum assay_status make_headers(struct openai *oa)
{
    const char *fixed[] = {"Content-Type: application/json", "Accept: text/event-stream",
                           "Expect:"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        struct curl_slist *h = curl_slist_append(oa->headers, fixed[i]);
        if (h == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        oa->headers = h;
    }
    if (oa->key != NULL) {
        size_t n = oa->key_len + 32;
        char *line = assay_malloc(n);
        if (line == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        snprintf(line, n, "Authorization: Bearer %s", oa->key);
        struct curl_slist *h = curl_slist_append(oa->headers, line);
        assay_wipe(line, n);
        assay_free(line);
        if (h == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        oa->headers = h;
    }
    return ASSAY_OK;
}

enum assay_status assay_openai_open(const struct assay_openai_params *params,
                                    struct assay_adapter *out, struct assay_diag *diag)
{
    out->vt = NULL;
    out->self = NULL;
    if (params == NULL) {
        return bad_param(diag, "params", "parameters", "NULL");
    }
    const struct assay_openai_params *p = params;
    enum assay_status st = check_url(p->url, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    char num[32];
    if (p->connect_timeout_ms <= 0) {
        snprintf(num, sizeof num, "%d", (int)p->connect_timeout_ms);
        return bad_param(diag, "timeout_ms", "a positive number of milliseconds", num);
    }
    if (p->stall_timeout_ms <= 0) {
        snprintf(num, sizeof num, "%d", (int)p->stall_timeout_ms);
        return bad_param(diag, "stall_ms", "a positive number of milliseconds", num);
    }
    if (p->max_requests <= 0 || p->max_requests > (1 << 20)) {
        snprintf(num, sizeof num, "%d", (int)p->max_requests);
        return bad_param(diag, "requests", "1..1048576", num);
    }
    if (p->n_probs < 0 || p->n_probs > ASSAY_OPENAI_MAX_TOP) {
        snprintf(num, sizeof num, "%d", (int)p->n_probs);
        return bad_param(diag, "logprobs", "0..64", num);
    }
    if (p->vocab < 0 || p->n_ctx < 0 || p->eos_token < -1 ||
        (p->vocab > 0 && p->eos_token >= p->vocab)) {
        return bad_param(diag, "vocab", "vocab, ctx >= 0 and eos in -1..vocab-1", "other values");
    }
    if (p->api != ASSAY_OPENAI_API_COMPLETION && p->api != ASSAY_OPENAI_API_V1) {
        return bad_param(diag, "api", "completion or v1", "another value");
    }
    if (p->max_event_bytes < 1024 || p->max_event_bytes > ((size_t)1 << 30)) {
        return bad_param(diag, "max_event_bytes", "1 KiB..1 GiB", "another size");
    }
    if (p->model != NULL && strlen(p->model) >= 256) {
        return bad_param(diag, "model", "a model name shorter than 256 characters",
                         "a longer one");
    }
    if (!curl_ready()) {
        assay_diag_set(diag, "openai adapter", "libcurl", "libcurl to initialise", "%s",
                       "curl_global_init failed");
        return ASSAY_ERR_NET;
    }
    struct openai *oa = assay_calloc(1, sizeof *oa);
    if (oa == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    oa->p = *p;
    oa->p.url = NULL;
    oa->p.model = NULL;
    snprintf(oa->base, sizeof oa->base, "%s", p->url);
    size_t bl = strlen(oa->base);
    while (bl > 0 && oa->base[bl - 1] == '/') {
        oa->base[--bl] = '\0';
    }
    if (oa->p.api == ASSAY_OPENAI_API_V1) {
        bool has_v1 = bl >= 3 && strcmp(oa->base + bl - 3, "/v1") == 0;
        snprintf(oa->url, sizeof oa->url, "%s%s", oa->base,
                 has_v1 ? "/completions" : "/v1/completions");
        if (oa->p.n_probs < 1) {
            oa->p.n_probs = 1;
        }
    } else {
        snprintf(oa->url, sizeof oa->url, "%s/completion", oa->base);
    }
    snprintf(oa->model, sizeof oa->model, "%s", p->model != NULL ? p->model : "");
    /* Everything but the key, so that the spec recreates this adapter. */
    snprintf(oa->spec, sizeof oa->spec,
             "openai:%s,api=%s%s%s,timeout_ms=%d,stall_ms=%d,logprobs=%d,vocab=%d,ctx=%d,eos=%d,"
             "requests=%d%s%s",
             oa->base, oa->p.api == ASSAY_OPENAI_API_V1 ? "v1" : "completion",
             oa->model[0] != '\0' ? ",model=" : "", oa->model, (int)oa->p.connect_timeout_ms,
             (int)oa->p.stall_timeout_ms, (int)p->n_probs, (int)oa->p.vocab, (int)oa->p.n_ctx,
             (int)oa->p.eos_token, (int)oa->p.max_requests,
             oa->p.cache_prompt < 0 ? "" : oa->p.cache_prompt ? ",cache_prompt=on" : ",cache_prompt=off",
             oa->p.stream ? "" : ",stream=off");
    st = read_api_key(&oa->key, &oa->key_len, diag);
    if (st == ASSAY_OK) {
        oa->reqs = assay_calloc((size_t)oa->p.max_requests, sizeof *oa->reqs);
        oa->multi = curl_multi_init();
        st = oa->reqs != NULL && oa->multi != NULL ? ASSAY_OK : ASSAY_ERR_NOMEM;
    }
    if (st == ASSAY_OK) {
        for (int32_t i = 0; i < oa->p.max_requests; i++) {
            oa->reqs[i].oa = oa;
        }
        st = make_headers(oa);
    }
    if (st != ASSAY_OK) {
        oa_free(oa);
        return st;
    }
    out->vt = &k_openai_vt;
    out->self = oa;
    return ASSAY_OK;
}

/* ------------------------------------------------------------------ */
/* Accessors                                                           */
/* ------------------------------------------------------------------ */

bool assay_openai_is(const struct assay_adapter *adapter)
{
    return adapter != NULL && adapter->vt == &k_openai_vt && adapter->self != NULL;
}

enum assay_status assay_openai_set_logprobs_sink(const struct assay_adapter *adapter,
                                                 assay_openai_logprobs_sink sink, void *ctx)
{
    if (!assay_openai_is(adapter)) {
        return ASSAY_ERR_INVALID;
    }
    struct openai *oa = adapter->self;
    oa->lp_sink = sink;
    oa->lp_ctx = sink != NULL ? ctx : NULL;
    return ASSAY_OK;
}

enum assay_status assay_openai_get_stats(const struct assay_adapter *adapter,
                                         struct assay_openai_stats *out)
{
    if (!assay_openai_is(adapter)) {
        return ASSAY_ERR_INVALID;
    }
    *out = ((const struct openai *)adapter->self)->stats;
    return ASSAY_OK;
}

enum assay_status assay_openai_set_usage_sink(const struct assay_adapter *adapter,
                                              assay_openai_usage_sink sink, void *ctx)
{
    if (!assay_openai_is(adapter)) {
        return ASSAY_ERR_INVALID;
    }
    struct openai *oa = adapter->self;
    oa->usage_sink = sink;
    oa->usage_ctx = sink != NULL ? ctx : NULL;
    return ASSAY_OK;
}

enum assay_status assay_openai_get_endpoint(const struct assay_adapter *adapter,
                                            struct assay_openai_endpoint *out)
{
    if (!assay_openai_is(adapter)) {
        return ASSAY_ERR_INVALID;
    }
    const struct openai *oa = adapter->self;
    out->base = oa->base;
    out->key = oa->key;
    out->key_len = oa->key != NULL ? oa->key_len : 0;
    out->connect_timeout_ms = oa->p.connect_timeout_ms;
    out->stall_timeout_ms = oa->p.stall_timeout_ms;
    return ASSAY_OK;
}
