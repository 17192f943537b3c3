/*
 * fake_server.h - a real HTTP server on 127.0.0.1 for the OpenAI adapter's
 * tests: it plays a llama.cpp-like server (POST /completion and
 * POST /v1/completions, streamed as server-sent events) and misbehaves on
 * demand.
 *
 * It listens on a free port chosen by the kernel, serves each connection
 * on its own thread, and is stopped (every thread joined, every socket
 * closed) by fake_server_stop. It uses only libc and POSIX (no cJSON, no
 * assay allocation), so that tests which fail assay's allocations see
 * only the adapter's.
 *
 * What it does for a request is chosen by the request itself: the first
 * prompt token is the behaviour (enum fake_mode). Well-behaved replies
 * generate the tokens fake_server_token(prompt, i) for i = 0..n_predict-1.
 */
#ifndef ASSAY_FAKE_SERVER_H
#define ASSAY_FAKE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_VOCAB 260

enum fake_mode {
    FAKE_OK = 1,             /* a well-behaved stream */
    FAKE_HTTP_500 = 2,       /* HTTP 500 with an OpenAI-style error body */
    FAKE_HTTP_429 = 3,       /* HTTP 429 with Retry-After: 7 */
    FAKE_CLOSE_CHUNKED = 4,  /* two tokens, then close without the last chunk */
    FAKE_CLOSE_EOF = 5,      /* no chunked framing: two tokens, then a clean close */
    FAKE_BAD_JSON = 6,       /* a data line that is not JSON */
    FAKE_BAD_SSE = 7,        /* a line that is not server-sent events (HTML) */
    FAKE_STALL = 8,          /* two tokens, then silence until the client leaves */
    FAKE_AFTER_END = 9,      /* a token after the final chunk */
    FAKE_TOO_MANY = 10,      /* more tokens than n_predict */
    FAKE_OUT_OF_VOCAB = 11,  /* a token id >= FAKE_VOCAB */
    FAKE_REDIRECT = 12,      /* 302 to /stolen on the same server */
    FAKE_ECHO_AUTH = 13,     /* 401 whose body echoes the Authorization header */
    FAKE_ERROR_EVENT = 14,   /* an error object mid-stream (echoing the header too) */
    FAKE_SHORT_EOS = 15,     /* ends after two tokens with stop_type "eos" */
    FAKE_WRONG_TYPE = 16,    /* HTTP 200 with application/json, not a stream */
    FAKE_NO_RESPONSE = 17,   /* reads the request, closes without a response */
    FAKE_BOS = 18,           /* reports one prompt token more than was sent */
    FAKE_SLOW_START = 19,    /* answers after a delay shorter than the stall timeout */
    FAKE_HUGE_LINE = 20,     /* one line of 2 MiB */
    FAKE_IGNORE_ORDER = 21,  /* reports llama.cpp's default sampler order */
    FAKE_NO_DONE = 22,       /* /v1: no "data: [DONE]" at the end */
    FAKE_AFTER_DONE = 23,    /* /v1: a chunk after "data: [DONE]" */
    FAKE_FRAGMENTED = 24,    /* well-behaved, but written a few bytes at a time with pings */
    FAKE_SLOW_TOKENS = 25,   /* well-behaved, 150 ms between tokens */
    FAKE_NO_IDS = 26,        /* /v1: text without logprobs */
    FAKE_SILENT = 27,        /* reads the request, then never answers */
    FAKE_LEGACY_IDS = 28,    /* /v1, well-behaved, ids in the legacy layout (vLLM's
                                tokens[] = "token_id:N") */
    FAKE_QUEUED = 29,        /* sends nothing for the queue delay (fake_server_set_timing),
                                then a well-behaved stream: a request queued for a slot */
    FAKE_N_MODES
};

struct fake_server;

/* Start a server on 127.0.0.1 with a kernel-chosen port. Returns 0, or -1
 * with errno set. */
int fake_server_start(struct fake_server **out);

/* Stop it: no new connections, every connection closed and its thread
 * joined (a stalling connection ends within about 50 ms). NULL-safe. */
void fake_server_stop(struct fake_server *s);

/* The port it listens on. */
int fake_server_port(const struct fake_server *s);

/* The token a well-behaved reply generates at position i. */
int32_t fake_server_token(const int32_t *prompt, int32_t prompt_len, int32_t i);

/* Requests served so far (any path). */
int fake_server_n_requests(struct fake_server *s);

/* When each token of the last FAKE_SLOW_TOKENS reply was written, as
 * CLOCK_MONOTONIC ns (assay_now_ns's clock), taken just before the write:
 * the client cannot have it earlier. Fills out[0..n), returns n <= max. */
int fake_server_slow_token_times(struct fake_server *s, int64_t *out, int max);

/* Requests served for this exact path. */
int fake_server_n_path(struct fake_server *s, const char *path);

/* Connections whose client went away before the reply was complete. */
int fake_server_n_client_gone(struct fake_server *s);

/* A copy of the Authorization header of the last request ("" if none). */
void fake_server_last_auth(struct fake_server *s, char *buf, size_t size);

/* Make every request from now on behave as `mode`, whatever its first
 * prompt token (0, the default: the prompt picks). For a client that sends
 * prompts it does not choose (the audit's generated workloads). */
void fake_server_set_mode(struct fake_server *s, int mode);

/* FAKE_QUEUED's silence before it answers (default 0) and the gap after
 * each FAKE_SLOW_TOKENS token (default 150), in ms, for requests from now on. */
void fake_server_set_timing(struct fake_server *s, int queue_ms, int slow_gap_ms);

/* A copy of the body of the last request with first prompt token `mode`
 * ("" if none). */
void fake_server_last_body(struct fake_server *s, int mode, char *buf, size_t size);

#endif
