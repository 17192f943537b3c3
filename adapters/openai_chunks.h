/*
 * openai_chunks.h - what an OpenAI-compatible server's response says, read
 * chunk by chunk, without any I/O: the reader behind adapters/openai.h.
 *
 * The adapter (openai.c) moves the bytes and parses the server-sent events
 * (sse.h); this module says what each event means for the request. A
 * request's stream is a struct assay_openai_stream: what was asked (set by
 * assay_openai_stream_init), then what the stream did so far (updated by
 * every chunk). Each event goes to assay_openai_read_event, the whole body
 * of a non-streamed response to assay_openai_read_body; they check it
 * against the request (see openai.h for the two wire formats and what is
 * read of them), hand each generated token with its logprob and top
 * logprobs to the sink, and the server's own token counts to it as well.
 * When the transfer is over, assay_openai_stream_finish says how the
 * request ended. A test drives it with the text a server sends:
 *
 *     struct assay_openai_stream s;
 *     assay_openai_stream_init(&s, ASSAY_OPENAI_API_V1, vocab, eos, &request);
 *     char msg[ASSAY_OPENAI_MSG_MAX];
 *     for each event ev:
 *         if (assay_openai_read_event(&s, &ev, &sink, msg, sizeof msg) != ASSAY_OK)
 *             the request failed: msg says why; read no further
 *         if (s.stopped) the stop token was delivered: read no further
 *     assay_openai_stream_finish(&s, true, &reason, msg, sizeof msg);
 *
 * Messages quote the server's text only through assay_openai_clean_text:
 * printable ASCII, cut short, and with the API key (s.secret) replaced by
 * "[redacted]".
 */
#ifndef ASSAY_OPENAI_CHUNKS_H
#define ASSAY_OPENAI_CHUNKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/request.h"
#include "../core/status.h"
#include "sse.h"

/* The most top logprobs per token the adapter keeps. */
#define ASSAY_OPENAI_MAX_TOP 64

/* The two dialects: the request a server is sent and the chunks it streams. */
enum assay_openai_api {
    ASSAY_OPENAI_API_COMPLETION = 0, /* llama.cpp's POST /completion */
    ASSAY_OPENAI_API_V1 = 1,         /* POST /v1/completions */
};

/* One of the top logprobs of a position. */
struct assay_openai_logprob {
    int32_t token;
    double logprob; /* natural log of the server's probability */
};

/* Room for any message of this module, NUL included. */
#define ASSAY_OPENAI_MSG_MAX 480

/* One request's stream. */
struct assay_openai_stream {
    /* What was asked: set by assay_openai_stream_init, then read only. */
    enum assay_openai_api api;
    int32_t vocab;        /* token ids must be below it; 0: unknown */
    int32_t eos_token;    /* the server's end-of-generation token; -1: unknown */
    int32_t prompt_len;
    int32_t max_tokens;
    int32_t stop_token;   /* -1: none */
    struct assay_sampling sampling;
    bool ignore_eos;      /* what was sent: false when stop_token is the server's EOS */
    const char *secret;   /* never quoted in a message (the API key); NULL: none.
                             Borrowed: it must outlive the stream. */
    size_t secret_len;
    /* What the stream did so far. */
    int32_t n_out;        /* tokens delivered */
    bool ended;           /* its final chunk was read ("stop": true, or a finish_reason) */
    bool got_done;        /* "data: [DONE]" was read */
    bool stopped;         /* the stop token was delivered; the rest is not read */
    bool eos_seen;        /* the server's EOS was delivered as the stop token (ignore_eos
                             false); the stream must still end with its final chunk */
};

/*
 * Where the tokens and counts go. The callbacks are called during
 * assay_openai_read_event / _read_body, in the order the chunk lists them.
 */
struct assay_openai_chunk_sink {
    /* Required. One generated token that passed the checks (id in the
     * vocabulary, within max_tokens, not after the end): index is its
     * position in the output, logprob NAN when the chunk had none, top the
     * n_top alternatives as the server listed them (borrowed for the
     * call). Return ASSAY_OK to go on; any other status ends the chunk with
     * that status (the token is then not counted). */
    enum assay_status (*token)(void *ctx, int32_t index, int32_t token, double logprob,
                               const struct assay_openai_logprob *top, int32_t n_top);
    /* May be NULL. The server's own counts (-1 when it did not state one):
     * tokens_evaluated / tokens_predicted of the final /completion chunk,
     * or usage.prompt_tokens / usage.completion_tokens of /v1/completions.
     * Called before they are compared with what was sent and received. */
    void (*usage)(void *ctx, int64_t prompt_tokens, int64_t completion_tokens);
    void *ctx;
};

/* Start the stream of `req` (its prompt is not kept) sent in format `api`
 * to a server with `vocab` ids (0: unknown) and end-of-generation token
 * `eos_token` (-1: unknown). secret is left NULL. */
void assay_openai_stream_init(struct assay_openai_stream *s, enum assay_openai_api api,
                              int32_t vocab, int32_t eos_token, const struct assay_request *req);

/*
 * Read one server-sent event of a streamed response (a comment is ignored).
 * Returns ASSAY_OK, or the request's failure with msg[0..msg_size) saying
 * why in one line: ASSAY_ERR_PARSE for what is not the format (malformed
 * JSON, a chunk without "tokens" or "choices", a mistyped field, an
 * unexpected event type, text without token ids), ASSAY_ERR_NET for a
 * server that broke the protocol or the request (an error object, data
 * after the end, a token outside the vocabulary or past max_tokens, counts
 * that disagree, an early end), ASSAY_ERR_UNSUPPORTED for sampling
 * settings the server did not apply, or what the token callback returned.
 * Tokens delivered before a failure stay delivered. After a failure, or
 * once s->stopped is set, the stream must not be read further.
 */
enum assay_status assay_openai_read_event(struct assay_openai_stream *s,
                                          const struct assay_sse_event *ev,
                                          const struct assay_openai_chunk_sink *sink, char *msg,
                                          size_t msg_size);

/*
 * Read the complete body of a non-streamed response, json[0..len) with
 * json[len] == '\0' (json may be NULL when len is 0), as the format's
 * final chunk: with /completion it must say "stop": true. Returns as
 * assay_openai_read_event.
 */
enum assay_status assay_openai_read_body(struct assay_openai_stream *s, const char *json,
                                         size_t len, const struct assay_openai_chunk_sink *sink,
                                         char *msg, size_t msg_size);

/*
 * How the request ended, once its response is over and every chunk was
 * read without failure. streamed is false for a non-streamed response.
 * ASSAY_OK with *reason STOP (its stop token, or the server's EOS) or
 * LENGTH (max_tokens); ASSAY_ERR_NET with msg when the response ended
 * without its final chunk, or a streamed /v1/completions response without
 * "data: [DONE]" (*reason is then ASSAY_FINISH_ERROR).
 */
enum assay_status assay_openai_stream_finish(const struct assay_openai_stream *s, bool streamed,
                                             enum assay_finish_reason *reason, char *msg,
                                             size_t msg_size);

/*
 * Copy server text src[0..n) into dst as printable ASCII (other bytes
 * become '?', newlines and tabs a space), at most size - 1 characters, with
 * every occurrence of secret[0..secret_len) replaced by "[redacted]". A
 * tail of src that is the start of the secret (3 or more characters, or
 * any length when src_cut says src was cut short) is redacted too, so that
 * a truncated echo cannot show the secret's first part. secret may be NULL.
 */
void assay_openai_clean_text(char *dst, size_t size, const char *src, size_t n, bool src_cut,
                             const char *secret, size_t secret_len);

#endif
