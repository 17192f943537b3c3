/*
 * openai.h - the adapter for OpenAI-compatible HTTP servers (llama.cpp's
 * llama-server, vLLM, SGLang, TGI) behind the engine interface.
 *
 * Every request is one streamed HTTP POST, driven by libcurl's multi
 * interface, so step() never blocks for long: it lets libcurl move the
 * bytes that are ready, and when nothing at all is ready it waits for
 * network activity at most ASSAY_OPENAI_POLL_MS (1 ms) before returning
 * with no events. The stream is parsed as server-sent events (sse.h) as
 * bytes arrive; a TOKEN event carries the time its chunk arrived, so the
 * time of the first token is the time the server's first token reached
 * the client. With params.stream false (spec stream=off) each request asks
 * for one non-streamed JSON response instead (Content-Type
 * application/json, at most max_event_bytes), read as the final chunk of
 * the same format when it is complete (no "data: [DONE]" is expected); the
 * audit uses it to compare streamed with non-streamed outputs.
 *
 * Prompts go out as arrays of token ids and generated token ids come back
 * (never text), through one of two wire formats:
 *   ASSAY_OPENAI_API_COMPLETION  llama.cpp's native POST /completion with
 *       "return_tokens": true. Read per chunk: "tokens" (the ids),
 *       "completion_probabilities"[i].{id, logprob, top_logprobs[].{id,
 *       logprob}} (when n_probs > 0), "stop" (the final chunk),
 *       "stop_type", "tokens_predicted", "tokens_evaluated", "truncated",
 *       "generation_settings" (the sampling parameters the server used)
 *       and "error".
 *   ASSAY_OPENAI_API_V1  POST /v1/completions. Ids are read from
 *       choices[0].logprobs: llama.cpp's layout content[].{id, logprob,
 *       top_logprobs}, or the legacy layout tokens[] = "token_id:N"
 *       (vLLM with return_tokens_as_token_ids); "finish_reason", "usage"
 *       and the closing "data: [DONE]" are checked. logprobs >= 1 is
 *       always requested, since ids travel only there.
 *
 * Sampling: temperature, top_k, top_p, max_tokens (n_predict) and a
 * per-request seed are passed through, with everything else that would
 * change the distribution switched off (min_p 0, typical_p 1, no
 * repetition penalties, no DRY, XTC, top-n-sigma, mirostat or dynamic
 * temperature), "ignore_eos": true so that max_tokens is honoured, and
 * llama.cpp's sampler chain fixed to "samplers": ["temperature", "top_k",
 * "top_p"] - assay's SEQUENTIAL order (see openai.c for where llama.cpp
 * does this). Seeds are reduced to 32 bits (seed mod 2^32 - 1, never
 * llama.cpp's "random" value 0xFFFFFFFF). A request whose stop_token is
 * params.eos_token lets the server stop on its end-of-generation token
 * instead (ignore_eos false), and the stream is then read to its final
 * chunk (whose counts are checked, and a token after EOS is an error);
 * any other stop token is detected here, and the stream is then closed.
 *
 * Every request that does not end exactly as asked finishes with
 * ASSAY_FINISH_ERROR and a one-line reason, and the adapter carries on
 * with the others: connection refused or timed out, an HTTP status other
 * than 200 (with the server's own error message, and Retry-After for
 * 429), a redirect (never followed), a body that is not an event stream,
 * malformed SSE or JSON, an error object in the stream, the connection
 * closed mid-stream, no byte for stall_timeout_ms, a token outside the
 * vocabulary, more tokens than max_tokens or any data after the end of the
 * stream, fewer tokens than max_tokens without the stop token, and
 * counts or sampling settings the server reports that disagree with what
 * was sent (for example a BOS token it added to the prompt).
 *
 * The API key comes only from the environment: ASSAY_API_KEY, or the
 * first line of the file named by ASSAY_API_KEY_FILE (setting both is an
 * error). It is sent as "Authorization: Bearer KEY", never placed in the
 * spec, an error message or info, and any echo of it by the server is
 * replaced by "[redacted]" before it reaches a message. The adapter talks
 * only to the URL it is given: no redirect is followed, proxies from the
 * environment are ignored, only http and https are allowed, and a URL
 * with credentials in it is refused.
 *
 * Capabilities: block_stats, block_audit, set_logits_sink and
 * check_invariants are NULL (a server gives no KV accounting and at most
 * the top logprobs, never the full logits); the top logprobs per token are
 * available through assay_openai_set_logprobs_sink, the server's own token
 * counts per request through assay_openai_set_usage_sink, and any other
 * page of the server (its /metrics) through prom_http.h's
 * assay_prom_http_get, with this adapter's connection rules.
 *
 * Allocation: add_request allocates what a request needs (its body, its
 * libcurl handle, and room for its events in any one step), so the event
 * array never grows in step(); step() itself still allocates through
 * libcurl's buffers, the SSE parser's (growing by doubling to its bound)
 * and one cJSON tree per chunk - an HTTP client cannot be allocation-free.
 *
 * info(): sampling_order SEQUENTIAL, deterministic_seeds true (the seed is
 * passed through), batch_invariant false (llama.cpp's logits change with
 * the batch in the last bits), vocab and n_ctx as configured.
 *
 * libcurl: the first assay_openai_open initialises libcurl for the process
 * (curl_global_init_mem with assay's allocation hooks, so libcurl's own
 * allocations go through core/alloc.h too; OpenSSL's do not). libcurl is
 * never cleaned up, because curl_global_cleanup is not safe while any
 * other part of the process may use it.
 *
 * Lifetime: assay_openai_open / assay_adapter_close. One adapter is used
 * by one thread at a time.
 */
#ifndef ASSAY_OPENAI_H
#define ASSAY_OPENAI_H

#include <stdbool.h>
#include <stdint.h>

#include "adapter.h"
#include "openai_chunks.h" /* the dialects, what a chunk yields */

/* The largest seed sent as given; larger ones are reduced mod 2^32 - 1
 * (above), so two seeds above it may reach the server as one. */
#define ASSAY_OPENAI_SEED_MAX 0xFFFFFFFEull

/* The longest step() waits when no byte is ready (milliseconds). */
#define ASSAY_OPENAI_POLL_MS 1

struct assay_openai_params {
    const char *url;            /* required: http(s)://host[:port][/prefix], no credentials */
    const char *model;          /* sent as "model"; NULL or "" leaves it out */
    enum assay_openai_api api;
    int32_t connect_timeout_ms; /* TCP (and TLS) connection; default 5000 */
    int32_t stall_timeout_ms;   /* longest silence, headers included; default 60000
                                   (before the first byte: the whole server's) */
    int32_t max_requests;       /* live requests at once; default 1024 */
    int32_t n_probs;            /* top logprobs requested per token (0..64); default 0,
                                   and at least 1 with ASSAY_OPENAI_API_V1 */
    int32_t vocab;              /* token ids are checked against it; 0: unknown */
    int32_t n_ctx;              /* prompt + max_tokens must fit; 0: unknown */
    int32_t eos_token;          /* the server's end-of-generation token; -1: unknown */
    int32_t cache_prompt;       /* -1: the server's default; 0 off; 1 on */
    size_t max_event_bytes;     /* largest SSE line or event (or non-streamed
                                   body); default 1 MiB */
    bool stream;                /* true (default): a streamed response (SSE);
                                   false: "stream": false and one JSON body,
                                   read when it is complete, so every token
                                   of a request arrives at the same time */
};

/* The defaults stated above, with url NULL. */
struct assay_openai_params assay_openai_default_params(void);

/*
 * Open an adapter for the server at params->url. Nothing is sent until the
 * first request. On failure *out is cleared, nothing is leaked, and diag
 * says what was wrong: ASSAY_ERR_INVALID for a bad parameter or URL (field
 * named), ASSAY_ERR_IO for an unreadable ASSAY_API_KEY_FILE (the file
 * named, never its content), ASSAY_ERR_NOMEM, or ASSAY_ERR_NET when
 * libcurl cannot be initialised.
 */
enum assay_status assay_openai_open(const struct assay_openai_params *params,
                                    struct assay_adapter *out, struct assay_diag *diag);

/*
 * Open from the arguments of an engine spec (what follows "openai:"):
 *   URL[,model=NAME][,api=completion|v1][,timeout_ms=N][,stall_ms=N]
 *      [,logprobs=N][,vocab=N][,ctx=N][,eos=N][,cache_prompt=on|off]
 *      [,requests=N][,stream=on|off]
 * timeout_ms is the connection timeout and stall_ms the stall timeout.
 * An API key is never accepted here (see the header comment). Errors as
 * assay_openai_open, with the key named in diag.
 */
enum assay_status assay_openai_open_spec(const char *args, struct assay_adapter *out,
                                         struct assay_diag *diag);

/*
 * The parameters that assay_openai_open_spec opens with (adapters/
 * openai_spec.c): args is copied into buf[0..size), which out->url and
 * out->model then point into, so buf must outlive *out; no connection is
 * made. *out is written only on ASSAY_OK. ASSAY_ERR_INVALID, with the key
 * named in diag, for args (NULL, or not shorter than size), a key without a
 * value, an unknown key, a value out of range, or an API key in the spec
 * (never echoed).
 */
enum assay_status assay_openai_parse_spec(const char *args, char *buf, size_t size,
                                          struct assay_openai_params *out,
                                          struct assay_diag *diag);

/*
 * Called during step() for every delivered token whose chunk carried
 * logprobs, before the TOKEN event is returned: the token, its logprob
 * (NAN when absent) and the top n_top alternatives as the server listed
 * them (usually in descending order; borrowed for the call).
 */
typedef void (*assay_openai_logprobs_sink)(void *ctx, uint64_t request_id, int32_t index,
                                           int32_t token, double logprob,
                                           const struct assay_openai_logprob *top,
                                           int32_t n_top);

/* Install (or with NULL remove) the logprobs sink. ASSAY_ERR_INVALID when
 * the adapter is not an openai adapter. */
enum assay_status assay_openai_set_logprobs_sink(const struct assay_adapter *adapter,
                                                 assay_openai_logprobs_sink sink, void *ctx);

/*
 * Called during step() when the server reports its own counts for a
 * request: llama.cpp's tokens_evaluated / tokens_predicted on the final
 * chunk of /completion, or usage.prompt_tokens / usage.completion_tokens of
 * /v1/completions. prompt_tokens and completion_tokens are -1 when the
 * server did not state them; prompt_sent and tokens_received are what the
 * adapter sent and delivered for that request so far. It is called before
 * the adapter compares them (a disagreement then also fails the request),
 * so a sink sees every report, the disagreeing ones included.
 */
typedef void (*assay_openai_usage_sink)(void *ctx, uint64_t request_id, int64_t prompt_tokens,
                                        int64_t completion_tokens, int32_t prompt_sent,
                                        int32_t tokens_received);

/* Install (or with NULL remove) the usage sink. ASSAY_ERR_INVALID when the
 * adapter is not an openai adapter. */
enum assay_status assay_openai_set_usage_sink(const struct assay_adapter *adapter,
                                              assay_openai_usage_sink sink, void *ctx);

/*
 * How to reach the server an openai adapter talks to, for a request of
 * another kind to it (prom_http.h's GET of its /metrics). The strings are
 * borrowed from the adapter and live until it is closed; key is the API key
 * (NUL-terminated), to be sent and never shown.
 */
struct assay_openai_endpoint {
    const char *base;           /* the configured URL, without a trailing '/' */
    const char *key;            /* NULL: no key */
    size_t key_len;
    int32_t connect_timeout_ms;
    int32_t stall_timeout_ms;
};

/* Fill *out. ASSAY_ERR_INVALID when the adapter is not an openai adapter. */
enum assay_status assay_openai_get_endpoint(const struct assay_adapter *adapter,
                                            struct assay_openai_endpoint *out);

/* What the adapter has seen since it was opened. */
struct assay_openai_stats {
    int64_t n_submitted;  /* requests accepted by add_request */
    int64_t n_length;     /* finished with ASSAY_FINISH_LENGTH */
    int64_t n_stop;       /* ASSAY_FINISH_STOP */
    int64_t n_abort;      /* ASSAY_FINISH_ABORT */
    int64_t n_error;      /* ASSAY_FINISH_ERROR */
    int64_t n_tokens;     /* TOKEN events */
    int64_t n_sse_events; /* SSE messages parsed */
    int64_t n_sse_comments;
    int64_t bytes_received; /* response bodies */
    /* How step() waited: the waits for the network it made (at most one
     * per step, when nothing was ready) and the longest wait it asked
     * for, in ms - ASSAY_OPENAI_POLL_MS, by which step never blocks for
     * long. */
    int64_t n_polls;
    int32_t poll_wait_ms_max;
};

/* Fill *out. ASSAY_ERR_INVALID when the adapter is not an openai adapter. */
enum assay_status assay_openai_get_stats(const struct assay_adapter *adapter,
                                         struct assay_openai_stats *out);

/* True when adapter is an openai adapter. */
bool assay_openai_is(const struct assay_adapter *adapter);

#endif
