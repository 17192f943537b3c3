/*
 * completion_api.h - llama.cpp's POST /completion as suites/engine_server.c
 * speaks it: the request body read into an engine request, and the chunks
 * and bodies of the reply written as llama.cpp's server (the one
 * node-llama-cpp 3.21.1 ships, 0.4.0-dev) writes them, as far as
 * adapters/openai.c reads them (adapters/openai.md; the shapes are those of
 * suites/test_openai_chunks.c's llama.cpp rows).
 *
 * What a request may say (everything else is refused with HTTP 400 naming
 * the field, never served differently than asked):
 *   prompt          an array of token ids, each inside the vocabulary
 *   n_predict       (or max_tokens) > 0, or -1: up to the context
 *   temperature     <= 0 greedy (the first maximum, the lower id on ties)
 *   top_k           <= 0 off;   top_p in (0, 1], >= 1 off
 *   seed            0 .. 2^32 - 2 seeds the request's stream (passed to the
 *                   engine as given); -1 or 2^32 - 1 (llama.cpp's "random")
 *                   or absent: unseeded
 *   samplers        a list of llama.cpp's sampler names in any order; every
 *                   filter the request sets (temperature other than 1,
 *                   top_k > 0, top_p < 1) must be in it. The engine applies
 *                   its own order (its spec's order=) whatever the list
 *                   says, and the final chunk's generation_settings.samplers
 *                   says which: ["temperature", "top_k", "top_p"] for
 *                   SEQUENTIAL, and for JOINT too where the two orders
 *                   agree (no top-k, no top-p or greedy), else
 *                   ["temperature", "top_k_top_p_joint"]
 *   stream, return_tokens, ignore_eos, cache_prompt (accepted, ignored),
 *   model (ignored), n_probs (top logprobs per token, at most the
 *   vocabulary; needs the engine's logits)
 *   the samplers the engine does not have, only at values that switch them
 *   off: min_p <= 0, typical_p >= 1, repeat_penalty 1, presence_penalty 0,
 *   frequency_penalty 0, repeat_last_n (any), dry_multiplier <= 0,
 *   xtc_probability <= 0, top_n_sigma <= 0, mirostat 0, dynatemp_range <= 0,
 *   min_keep 0, n 1, post_sampling_probs false, stop [] and logit_bias
 *   [] or {} (no stop strings: the engine has no detokenizer).
 * End of generation: with ignore_eos false (llama.cpp's default) the
 * request stops after the engine's EOS token (stop_type "eos"); with
 * ignore_eos true EOS is sampled like any other token and generation goes
 * on (the oracle's semantics; llama.cpp bans EOS instead).
 * Absent fields take llama.cpp's defaults (temperature 0.8, top_k 40,
 * top_p 0.95, n_predict -1, stream false), except two that the engine
 * cannot apply, which are taken as off: min_p (llama.cpp: 0.05) and, with
 * no "samplers", llama.cpp's default chain (temperature last). The adapter
 * sends both, so it never meets the difference.
 */
#ifndef ASSAY_COMPLETION_API_H
#define ASSAY_COMPLETION_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/request.h"
#include "engine_loop.h"

/* What the engine behind the server can take. */
struct completion_limits {
    int32_t vocab;       /* token ids must be below it */
    int32_t n_ctx;       /* prompt + n_predict must fit */
    int32_t eos_token;   /* the engine's end-of-generation token; -1: none */
    enum assay_sampling_order order;
    bool logits;         /* n_probs > 0 can be served */
    float temperature_scale; /* the engine samples at this times the request's
                                temperature (1: as asked; a calibration knob) */
};

/* One request, read. */
struct completion_request {
    int32_t *prompt;     /* (prompt_len), owned */
    int32_t prompt_len;
    int32_t max_tokens;  /* for the engine */
    int32_t stop_token;  /* EOS unless ignore_eos; -1: none */
    struct assay_sampling sampling; /* for the engine */
    int32_t n_probs;
    bool stream, return_tokens, ignore_eos;
    /* As sent (or defaulted), echoed in generation_settings. */
    int32_t n_predict;
    float temperature, top_p, min_p, typical_p, repeat_penalty, presence_penalty,
        frequency_penalty, dry_multiplier, xtc_probability, top_n_sigma, dynatemp_range;
    int32_t top_k, repeat_last_n, mirostat;
    const char *samplers_echo; /* static JSON array of the chain the engine applies */
};

/*
 * Read body[0..len). Returns 0 with *out filled (release with
 * completion_request_free), or the HTTP status of the refusal (400, or 500
 * when out of memory) with msg saying which field and what was expected;
 * *out is then empty.
 */
int completion_parse(const char *body, size_t len, const struct completion_limits *lim,
                     struct completion_request *out, char *msg, size_t msg_size);

void completion_request_free(struct completion_request *r);

/* A growable text buffer (the reply being written). oom is set, and the
 * text left as it was, when it cannot grow. */
struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

void sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_json_string(struct sbuf *b, const char *s);
void sbuf_reset(struct sbuf *b);
void sbuf_free(struct sbuf *b);

/* How a request ended, for its final chunk or body. */
struct completion_outcome {
    const char *model;     /* the served model's name */
    int32_t slot;
    int32_t n_predicted;   /* tokens delivered */
    const char *stop_type; /* "limit", "eos" or "none" */
    double prompt_ms;      /* from entering the engine to the first token */
    double predicted_ms;   /* from the first token to the end */
};

/* One streamed token (position i) as its "data:" event, appended to b. */
void completion_token_event(struct sbuf *b, const struct completion_request *r,
                            const struct completion_outcome *o, int32_t i, int32_t token,
                            double logprob, const struct engine_job_top *top);

/*
 * The final object: the last "data:" event of a stream (tokens NULL, n 0),
 * or the whole non-streamed body with every token (tokens[0..n), with
 * logprob[0..n) and top[n, n_probs] when r->n_probs > 0). Appended to b,
 * with the "data: " framing when r->stream.
 */
void completion_final(struct sbuf *b, const struct completion_request *r,
                      const struct completion_outcome *o, const int32_t *tokens,
                      const double *logprob, const struct engine_job_top *top, int32_t n);

/* llama.cpp's error object {"error": {"code", "message", "type"}}, appended
 * to b (with the "data: " framing when as_event). */
void completion_error(struct sbuf *b, int code, const char *message, bool as_event);

#endif
