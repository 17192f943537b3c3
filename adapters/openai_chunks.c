/*
 * openai_chunks.c - reading the chunks of an OpenAI-compatible response
 * (see openai_chunks.h). Nothing here touches the network: every function
 * reads a chunk and the stream's state, and says what happened through the
 * sink, the state and a message.
 */
#include "openai_chunks.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum {
    SNIPPET_LEN = 200, /* server text quoted in a message */
};

/* One call's reading: the stream, where tokens go, where a failure is said. */
struct reader {
    struct assay_openai_stream *s;
    const struct assay_openai_chunk_sink *sink;
    char *msg;
    size_t msg_size;
};

/* Say why the request failed, and return the status to pass up. */
static enum assay_status fail(struct reader *rd, enum assay_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum assay_status fail(struct reader *rd, enum assay_status st, const char *fmt, ...)
{
    if (rd->msg_size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rd->msg, rd->msg_size, fmt, ap);
        va_end(ap);
    }
    return st;
}

static void quote(const struct reader *rd, char *dst, size_t size, const char *src, size_t n)
{
    assay_openai_clean_text(dst, size, src, n, false, rd->s->secret, rd->s->secret_len);
}

void assay_openai_clean_text(char *dst, size_t size, const char *src, size_t n, bool src_cut,
                             const char *secret, size_t secret_len)
{
    static const char red[] = "[redacted]";
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < size;) {
        size_t left = n - i;
        if (secret != NULL && secret_len > 0) {
            bool full = left >= secret_len && memcmp(src + i, secret, secret_len) == 0;
            bool tail = left < secret_len && (left >= 3 || src_cut) &&
                        memcmp(src + i, secret, left) == 0;
            if (full || tail) {
                for (size_t j = 0; red[j] != '\0' && k + 1 < size; j++) {
                    dst[k++] = red[j];
                }
                i += full ? secret_len : left;
                continue;
            }
        }
        unsigned char c = (unsigned char)src[i++];
        dst[k++] = (c >= 0x20 && c < 0x7f) ? (char)c : (c == '\n' || c == '\t' ? ' ' : '?');
    }
    if (size > 0) {
        dst[k] = '\0';
    }
}

void assay_openai_stream_init(struct assay_openai_stream *s, enum assay_openai_api api,
                              int32_t vocab, int32_t eos_token, const struct assay_request *req)
{
    memset(s, 0, sizeof *s);
    s->api = api;
    s->vocab = vocab;
    s->eos_token = eos_token;
    s->prompt_len = req->prompt_len;
    s->max_tokens = req->max_tokens;
    s->stop_token = req->stop_token;
    s->sampling = req->sampling;
    /* The server stops on its own EOS only when that is the stop token;
     * otherwise it is told to ignore it, so that max_tokens is honoured. */
    s->ignore_eos = !(eos_token >= 0 && req->stop_token == eos_token);
    s->secret = NULL;
    s->secret_len = 0;
}

/* ------------------------------------------------------------------ */
/* Fields                                                              */
/* ------------------------------------------------------------------ */

static const cJSON *member(const cJSON *obj, const char *name)
{
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
}

/* An integer-valued JSON number in [lo, hi]. */
static bool get_int(const cJSON *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (!cJSON_IsNumber(v)) {
        return false;
    }
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) {
        return false;
    }
    *out = (int64_t)d;
    return true;
}

/* Read a {id, logprob} list (llama.cpp's top_logprobs) into top[]
 * (ASSAY_OPENAI_MAX_TOP); entries without an integer id or a numeric
 * logprob are skipped. */
static int32_t read_top_ids(struct assay_openai_logprob *top, const cJSON *arr)
{
    int32_t n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        int64_t id;
        const cJSON *lp = member(it, "logprob");
        if (n >= ASSAY_OPENAI_MAX_TOP) {
            break;
        }
        if (get_int(member(it, "id"), 0, INT32_MAX, &id) && cJSON_IsNumber(lp)) {
            top[n].token = (int32_t)id;
            top[n].logprob = lp->valuedouble;
            n++;
        }
    }
    return n;
}

/* "token_id:123" (the legacy layout with return_tokens_as_token_ids). */
static bool parse_token_id_string(const char *s, int64_t *out)
{
    if (s == NULL || strncmp(s, "token_id:", 9) != 0) {
        return false;
    }
    const char *p = s + 9;
    int64_t v = 0;
    if (*p == '\0') {
        return false;
    }
    for (; *p != '\0'; p++) {
        if (*p < '0' || *p > '9' || v > INT32_MAX) {
            return false;
        }
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return true;
}

/* ------------------------------------------------------------------ */
/* Tokens                                                              */
/* ------------------------------------------------------------------ */

/* Deliver one generated token through the sink, after the checks that
 * every token must pass. */
static enum assay_status deliver(struct reader *rd, int64_t token, double logprob,
                                 const struct assay_openai_logprob *top, int32_t n_top)
{
    struct assay_openai_stream *s = rd->s;
    if (s->ended) {
        return fail(rd, ASSAY_ERR_NET, "token %" PRId64 " after the end of the stream", token);
    }
    if (s->eos_seen) {
        return fail(rd, ASSAY_ERR_NET,
                    "token %" PRId64 " after the end-of-generation token %d at position %d",
                    token, (int)s->eos_token, (int)s->n_out - 1);
    }
    if (s->n_out >= s->max_tokens) {
        return fail(rd, ASSAY_ERR_NET,
                    "more tokens than max_tokens %d: token %" PRId64 " at position %d",
                    (int)s->max_tokens, token, (int)s->n_out);
    }
    if (token < 0 || token > INT32_MAX || (s->vocab > 0 && token >= s->vocab)) {
        return fail(rd, ASSAY_ERR_NET,
                    "token id %" PRId64 " at position %d is outside the vocabulary (%d ids)",
                    token, (int)s->n_out, (int)s->vocab);
    }
    enum assay_status st =
        rd->sink->token(rd->sink->ctx, s->n_out, (int32_t)token, logprob, top, n_top);
    if (st != ASSAY_OK) {
        return fail(rd, st, "token %" PRId64 " at position %d was not taken (%s)", token,
                    (int)s->n_out, assay_status_str(st));
    }
    s->n_out++;
    if (token == s->stop_token) {
        /* The server stops on its own EOS: read its final chunk (counts,
         * stop type) instead of cutting the stream. */
        if (!s->ignore_eos && token == s->eos_token) {
            s->eos_seen = true;
        } else {
            s->stopped = true;
        }
    }
    return ASSAY_OK;
}

static void report_usage(struct reader *rd, int64_t prompt_tokens, int64_t completion_tokens)
{
    if (rd->sink->usage != NULL) {
        rd->sink->usage(rd->sink->ctx, prompt_tokens, completion_tokens);
    }
}

/* ------------------------------------------------------------------ */
/* llama.cpp's /completion                                             */
/* ------------------------------------------------------------------ */

/* Compare one sampling setting the server echoed with what was sent. */
static enum assay_status check_setting_num(struct reader *rd, const cJSON *gs, const char *name,
                                           double sent)
{
    const cJSON *v = member(gs, name);
    if (!cJSON_IsNumber(v)) {
        return ASSAY_OK; /* not reported: nothing to compare */
    }
    double got = v->valuedouble;
    if (fabs(got - sent) <= 1e-6 * fmax(1.0, fabs(sent))) {
        return ASSAY_OK;
    }
    return fail(rd, ASSAY_ERR_UNSUPPORTED,
                "the server did not apply \"%s\": sent %.9g, it used %.9g", name, sent, got);
}

/* The generation_settings of llama.cpp's final chunk against the request. */
static enum assay_status check_settings(struct reader *rd, const cJSON *gs)
{
    if (!cJSON_IsObject(gs)) {
        return ASSAY_OK;
    }
    const struct assay_openai_stream *s = rd->s;
    const struct assay_sampling *sp = &s->sampling;
    struct {
        const char *name;
        double sent;
    } const nums[] = {
        {"n_predict", s->max_tokens},
        {"temperature", sp->temperature},
        {"top_k", sp->top_k},
        {"top_p", sp->top_p},
        {"min_p", 0.0},
        {"typical_p", 1.0},
        {"repeat_penalty", 1.0},
        {"dry_multiplier", 0.0},
        {"xtc_probability", 0.0},
        {"mirostat", 0.0},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        enum assay_status st = check_setting_num(rd, gs, nums[i].name, nums[i].sent);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    if (sp->seeded) {
        enum assay_status st =
            check_setting_num(rd, gs, "seed", (double)(sp->seed % 0xFFFFFFFFull));
        if (st != ASSAY_OK) {
            return st;
        }
    }
    const cJSON *ie = member(gs, "ignore_eos");
    if (cJSON_IsBool(ie) && cJSON_IsTrue(ie) != s->ignore_eos) {
        return fail(rd, ASSAY_ERR_UNSUPPORTED, "the server did not apply \"ignore_eos\": %s",
                    s->ignore_eos ? "true" : "false");
    }
    const cJSON *sm = member(gs, "samplers");
    if (cJSON_IsArray(sm)) {
        static const char *const want[3] = {"temperature", "top_k", "top_p"};
        bool same = cJSON_GetArraySize(sm) == 3;
        for (int i = 0; same && i < 3; i++) {
            const cJSON *x = cJSON_GetArrayItem(sm, i);
            same = cJSON_IsString(x) && strcmp(x->valuestring, want[i]) == 0;
        }
        if (!same) {
            return fail(rd, ASSAY_ERR_UNSUPPORTED,
                        "the server did not apply \"samplers\": [\"temperature\", \"top_k\", "
                        "\"top_p\"] (its sampling order would differ from assay's)");
        }
    }
    return ASSAY_OK;
}

/* How the stream ended early, for messages. */
static enum assay_status ended_short(struct reader *rd, const char *why)
{
    return fail(rd, ASSAY_ERR_NET,
                "the server ended the stream early (%s), before max_tokens and without "
                "the stop token",
                why);
}

/* A chunk of llama.cpp's native /completion stream. */
static enum assay_status completion_chunk(struct reader *rd, const cJSON *root)
{
    struct assay_openai_stream *s = rd->s;
    bool final = cJSON_IsTrue(member(root, "stop"));
    if (s->ended) {
        return fail(rd, ASSAY_ERR_NET, "data after the final chunk (\"stop\": true)");
    }
    const cJSON *tokens = member(root, "tokens");
    const cJSON *probs = member(root, "completion_probabilities");
    if (tokens == NULL && !final) {
        return fail(rd, ASSAY_ERR_PARSE,
                    "a chunk without \"tokens\" (does the server support \"return_tokens\"?)");
    }
    if (tokens != NULL && !cJSON_IsArray(tokens)) {
        return fail(rd, ASSAY_ERR_PARSE, "\"tokens\" is not an array");
    }
    int n_tok = tokens != NULL ? cJSON_GetArraySize(tokens) : 0;
    int n_probs = cJSON_IsArray(probs) ? cJSON_GetArraySize(probs) : 0;
    if (n_tok > 0 && n_probs > 0 && n_probs != n_tok) {
        return fail(rd, ASSAY_ERR_PARSE, "a chunk with %d tokens but %d completion_probabilities",
                    n_tok, n_probs);
    }
    struct assay_openai_logprob top[ASSAY_OPENAI_MAX_TOP];
    for (int i = 0; i < n_tok && !s->stopped; i++) {
        int64_t id;
        if (!get_int(cJSON_GetArrayItem(tokens, i), INT32_MIN, INT32_MAX, &id)) {
            return fail(rd, ASSAY_ERR_PARSE, "\"tokens\"[%d] is not an integer", i);
        }
        double lp = NAN;
        int32_t n_top = 0;
        if (n_probs > 0) {
            const cJSON *pr = cJSON_GetArrayItem(probs, i);
            int64_t pid;
            if (get_int(member(pr, "id"), INT32_MIN, INT32_MAX, &pid) && pid != id) {
                return fail(rd, ASSAY_ERR_PARSE,
                            "\"tokens\" says %" PRId64 " but completion_probabilities says "
                            "%" PRId64,
                            id, pid);
            }
            const cJSON *l = member(pr, "logprob");
            lp = cJSON_IsNumber(l) ? l->valuedouble : NAN;
            n_top = read_top_ids(top, member(pr, "top_logprobs"));
        }
        enum assay_status st = deliver(rd, id, lp, top, n_top);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    if (!final || s->stopped) {
        return ASSAY_OK;
    }
    s->ended = true;
    int64_t v;
    int64_t pt = -1, ct = -1;
    get_int(member(root, "tokens_evaluated"), 0, INT32_MAX, &pt);
    get_int(member(root, "tokens_predicted"), 0, INT32_MAX, &ct);
    report_usage(rd, pt, ct);
    if (cJSON_IsTrue(member(root, "truncated"))) {
        return fail(rd, ASSAY_ERR_NET, "the server truncated the request (context too small?)");
    }
    if (get_int(member(root, "tokens_evaluated"), 0, INT32_MAX, &v) && v != s->prompt_len) {
        return fail(rd, ASSAY_ERR_NET,
                    "the server evaluated %" PRId64 " prompt tokens but %d were sent (did it "
                    "add a BOS token?)",
                    v, (int)s->prompt_len);
    }
    if (get_int(member(root, "tokens_predicted"), 0, INT32_MAX, &v) && v != s->n_out) {
        return fail(rd, ASSAY_ERR_NET,
                    "the server reports %" PRId64 " tokens predicted but streamed %d", v,
                    (int)s->n_out);
    }
    if (s->n_out < s->max_tokens && !s->eos_seen) {
        const cJSON *stop_type = member(root, "stop_type");
        char why[64];
        snprintf(why, sizeof why, "stop_type \"%.24s\"",
                 cJSON_IsString(stop_type) ? stop_type->valuestring : "?");
        return ended_short(rd, why);
    }
    return check_settings(rd, member(root, "generation_settings"));
}

/* ------------------------------------------------------------------ */
/* /v1/completions                                                     */
/* ------------------------------------------------------------------ */

/* The token ids (and logprobs) of one /v1/completions choice. */
static enum assay_status v1_choice_tokens(struct reader *rd, const cJSON *choice)
{
    struct assay_openai_stream *s = rd->s;
    const cJSON *lps = member(choice, "logprobs");
    const cJSON *text = member(choice, "text");
    bool has_text = cJSON_IsString(text) && text->valuestring[0] != '\0';
    const cJSON *content = member(lps, "content");
    const cJSON *legacy = member(lps, "tokens");
    struct assay_openai_logprob top[ASSAY_OPENAI_MAX_TOP];
    if (cJSON_IsArray(content)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, content)
        {
            int64_t id;
            if (s->stopped) {
                break;
            }
            if (!get_int(member(it, "id"), INT32_MIN, INT32_MAX, &id)) {
                return fail(rd, ASSAY_ERR_PARSE, "logprobs.content[] without an integer \"id\"");
            }
            const cJSON *l = member(it, "logprob");
            int32_t n_top = read_top_ids(top, member(it, "top_logprobs"));
            enum assay_status st =
                deliver(rd, id, cJSON_IsNumber(l) ? l->valuedouble : NAN, top, n_top);
            if (st != ASSAY_OK) {
                return st;
            }
        }
        return ASSAY_OK;
    }
    if (cJSON_IsArray(legacy)) {
        const cJSON *tlp = member(lps, "token_logprobs");
        const cJSON *tops = member(lps, "top_logprobs");
        for (int i = 0; i < cJSON_GetArraySize(legacy) && !s->stopped; i++) {
            const cJSON *t = cJSON_GetArrayItem(legacy, i);
            int64_t id;
            if (!cJSON_IsString(t) || !parse_token_id_string(t->valuestring, &id)) {
                return fail(rd, ASSAY_ERR_PARSE,
                            "logprobs.tokens[%d] is not \"token_id:N\" (ask the server for "
                            "token ids)",
                            i);
            }
            const cJSON *l = cJSON_GetArrayItem(tlp, i);
            const cJSON *top_i = cJSON_GetArrayItem(tops, i);
            int32_t n_top = 0;
            const cJSON *kv;
            cJSON_ArrayForEach(kv, top_i)
            {
                int64_t tid;
                if (n_top < ASSAY_OPENAI_MAX_TOP && cJSON_IsNumber(kv) &&
                    parse_token_id_string(kv->string, &tid)) {
                    top[n_top].token = (int32_t)tid;
                    top[n_top].logprob = kv->valuedouble;
                    n_top++;
                }
            }
            enum assay_status st =
                deliver(rd, id, cJSON_IsNumber(l) ? l->valuedouble : NAN, top, n_top);
            if (st != ASSAY_OK) {
                return st;
            }
        }
        return ASSAY_OK;
    }
    if (has_text) {
        return fail(rd, ASSAY_ERR_PARSE,
                    "the server sent text without token ids (no logprobs in the chunk)");
    }
    return ASSAY_OK;
}

static enum assay_status v1_usage(struct reader *rd, const cJSON *usage)
{
    const struct assay_openai_stream *s = rd->s;
    int64_t v;
    if (!cJSON_IsObject(usage)) {
        return ASSAY_OK;
    }
    int64_t pt = -1, ct = -1;
    get_int(member(usage, "prompt_tokens"), 0, INT32_MAX, &pt);
    if (s->ended) {
        get_int(member(usage, "completion_tokens"), 0, INT32_MAX, &ct);
    }
    report_usage(rd, pt, ct);
    if (get_int(member(usage, "prompt_tokens"), 0, INT32_MAX, &v) && v != s->prompt_len) {
        return fail(rd, ASSAY_ERR_NET,
                    "usage.prompt_tokens is %" PRId64 " but %d were sent (did it add a BOS "
                    "token?)",
                    v, (int)s->prompt_len);
    }
    if (s->ended && get_int(member(usage, "completion_tokens"), 0, INT32_MAX, &v) &&
        v != s->n_out) {
        return fail(rd, ASSAY_ERR_NET,
                    "usage.completion_tokens is %" PRId64 " but %d tokens were streamed", v,
                    (int)s->n_out);
    }
    return ASSAY_OK;
}

/* A chunk of the /v1/completions stream. */
static enum assay_status v1_chunk(struct reader *rd, const cJSON *root)
{
    struct assay_openai_stream *s = rd->s;
    const cJSON *choices = member(root, "choices");
    if (!cJSON_IsArray(choices)) {
        if (member(root, "usage") != NULL) {
            return v1_usage(rd, member(root, "usage"));
        }
        return fail(rd, ASSAY_ERR_PARSE, "a chunk without \"choices\"");
    }
    int n = cJSON_GetArraySize(choices);
    if (n > 1) {
        return fail(rd, ASSAY_ERR_PARSE, "a chunk with %d choices (one was asked for)", n);
    }
    if (n == 1) {
        const cJSON *c = cJSON_GetArrayItem(choices, 0);
        int64_t idx;
        if (get_int(member(c, "index"), INT32_MIN, INT32_MAX, &idx) && idx != 0) {
            return fail(rd, ASSAY_ERR_PARSE, "a choice with index %" PRId64, idx);
        }
        enum assay_status st = v1_choice_tokens(rd, c);
        if (st != ASSAY_OK) {
            return st;
        }
        const cJSON *fr = member(c, "finish_reason");
        if (cJSON_IsString(fr) && !s->stopped) {
            if (s->ended) {
                return fail(rd, ASSAY_ERR_NET, "a second finish_reason after the end");
            }
            s->ended = true;
            if (s->n_out < s->max_tokens && !s->eos_seen) {
                char why[64];
                snprintf(why, sizeof why, "finish_reason \"%.24s\"", fr->valuestring);
                return ended_short(rd, why);
            }
        }
    }
    return v1_usage(rd, member(root, "usage"));
}

static enum assay_status read_chunk(struct reader *rd, const cJSON *root)
{
    return rd->s->api == ASSAY_OPENAI_API_V1 ? v1_chunk(rd, root) : completion_chunk(rd, root);
}

/* ------------------------------------------------------------------ */
/* Events, bodies, the end                                             */
/* ------------------------------------------------------------------ */

enum assay_status assay_openai_read_event(struct assay_openai_stream *s,
                                          const struct assay_sse_event *ev,
                                          const struct assay_openai_chunk_sink *sink, char *msg,
                                          size_t msg_size)
{
    struct reader rd = {s, sink, msg, msg_size};
    char snip[SNIPPET_LEN];
    if (ev->kind == ASSAY_SSE_COMMENT) {
        return ASSAY_OK; /* keep-alive pings */
    }
    if (s->got_done) {
        quote(&rd, snip, 64, ev->data, ev->data_len);
        return fail(&rd, ASSAY_ERR_NET, "data after \"[DONE]\": %s", snip);
    }
    if (strcmp(ev->type, "message") != 0 && strcmp(ev->type, "error") != 0) {
        quote(&rd, snip, 64, ev->type, strlen(ev->type));
        return fail(&rd, ASSAY_ERR_PARSE, "unexpected SSE event type \"%s\"", snip);
    }
    if (ev->done) {
        if (!s->ended) {
            return fail(&rd, ASSAY_ERR_NET,
                        "the stream ended with \"[DONE]\" before its final chunk");
        }
        s->got_done = true;
        return ASSAY_OK;
    }
    cJSON *root = cJSON_ParseWithLength(ev->data, ev->data_len);
    if (root == NULL || !cJSON_IsObject(root)) {
        quote(&rd, snip, 96, ev->data, ev->data_len);
        cJSON_Delete(root);
        return fail(&rd, ASSAY_ERR_PARSE,
                    "malformed JSON in the event stream (event ending at byte %" PRIu64 "): %s",
                    ev->offset, snip);
    }
    const cJSON *err = member(root, "error");
    enum assay_status st;
    if (err != NULL || strcmp(ev->type, "error") == 0) {
        const cJSON *text = member(err, "message");
        if (cJSON_IsString(text)) {
            quote(&rd, snip, sizeof snip, text->valuestring, strlen(text->valuestring));
        } else {
            quote(&rd, snip, sizeof snip, ev->data, ev->data_len);
        }
        st = fail(&rd, ASSAY_ERR_NET, "the server reported an error mid-stream: %s", snip);
    } else {
        st = read_chunk(&rd, root);
    }
    cJSON_Delete(root);
    return st;
}

enum assay_status assay_openai_read_body(struct assay_openai_stream *s, const char *json,
                                         size_t len, const struct assay_openai_chunk_sink *sink,
                                         char *msg, size_t msg_size)
{
    struct reader rd = {s, sink, msg, msg_size};
    char snip[SNIPPET_LEN];
    cJSON *root = json != NULL ? cJSON_ParseWithLength(json, len) : NULL;
    if (root == NULL || !cJSON_IsObject(root)) {
        quote(&rd, snip, 96, json != NULL ? json : "", json != NULL ? len : 0);
        cJSON_Delete(root);
        return fail(&rd, ASSAY_ERR_PARSE, "malformed JSON in the non-streamed response: %s",
                    snip);
    }
    const cJSON *err = member(root, "error");
    enum assay_status st;
    if (err != NULL) {
        const cJSON *text = member(err, "message");
        const char *t = cJSON_IsString(text) ? text->valuestring : json;
        quote(&rd, snip, sizeof snip, t, strlen(t));
        st = fail(&rd, ASSAY_ERR_NET, "the server reported an error: %s", snip);
    } else if (s->api != ASSAY_OPENAI_API_V1 && !cJSON_IsTrue(member(root, "stop"))) {
        st = fail(&rd, ASSAY_ERR_PARSE, "a non-streamed response without \"stop\": true");
    } else {
        st = read_chunk(&rd, root);
    }
    cJSON_Delete(root);
    return st;
}

enum assay_status assay_openai_stream_finish(const struct assay_openai_stream *s, bool streamed,
                                             enum assay_finish_reason *reason, char *msg,
                                             size_t msg_size)
{
    struct reader rd = {NULL, NULL, msg, msg_size}; /* for its message only */
    *reason = ASSAY_FINISH_ERROR;
    if (s->stopped) {
        *reason = ASSAY_FINISH_STOP;
        return ASSAY_OK;
    }
    if (!s->ended && streamed) {
        return fail(&rd, ASSAY_ERR_NET,
                    "connection closed mid-stream: the stream ended without its final chunk");
    }
    if (!s->ended) {
        return fail(&rd, ASSAY_ERR_NET, "the non-streamed response has no final state");
    }
    if (streamed && s->api == ASSAY_OPENAI_API_V1 && !s->got_done) {
        return fail(&rd, ASSAY_ERR_NET,
                    "connection closed mid-stream: the stream ended without \"data: [DONE]\"");
    }
    *reason = s->eos_seen ? ASSAY_FINISH_STOP : ASSAY_FINISH_LENGTH;
    return ASSAY_OK;
}
