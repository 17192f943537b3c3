/*
 * llama_bench.h - llama.cpp's llama-server decode speed, measured by a test
 * program in the same run as the bundled engine's (the machine is shared
 * and noisy: only figures measured side by side are compared).
 *
 * Use:
 *   assay_llama_bench_find_server()    the binary, if a finished build exists
 *   assay_llama_bench_open()           start one llama-server with N slots
 *   assay_llama_bench_run() ...        B prompts decoded together (B <= N),
 *                                      as often as wanted, interleaved
 *                                      with other measurements
 *   assay_llama_bench_close()          stop it (always; no orphan)
 *
 * A run sends B non-streamed POST /completion requests at once through
 * libcurl's multi interface (one thread, asleep in poll while the server
 * works): the same prompt of prompt_len token ids ((i * 7 + 3) % 256, as
 * the engine benchmark's), n_predict tokens, temperature 0, ignore_eos,
 * cache_prompt false. Just before, it opens one connection per request
 * (B GET /health), so that all B requests leave in one go. Or, with
 * one_request, it sends one request whose "prompt" lists the B prompts:
 * llama-server queues the B tasks together and starts every slot in the
 * same step, as the engine benchmark starts its B requests. Each answer
 * (each element of the one answer) carries the server's own timings for
 * its slot: predicted_n tokens, of which the first comes from the prompt's
 * logits and the other predicted_n - 1 from decode steps taken over
 * predicted_ms (from the prompt's end to the last token).
 *
 * The aggregate (the rule, and why). B slots that decode together share
 * each step, so a slot's own rate (predicted_per_second) is the step rate,
 * not the server's; the server's rate is the decode tokens of all slots
 * over the time they took together. Each slot's decode window is placed on
 * the client's clock: it ends when its answer arrives (e_i, milliseconds
 * after the slot is released; with one_request, when the one answer
 * arrives, after the last slot) and began predicted_ms before
 * (s_i = e_i - predicted_ms). Then
 *     tokens_per_s = sum_i (predicted_n_i - 1) / (max_i e_i - min_i s_i),
 * which counts the staggered start of continuous batching (prompts that
 * join a step or two late) against the server and never counts a token
 * twice; the sum of the per-request predicted_per_second, the usual
 * shortcut, equals it only when every window is the same one, and would
 * credit B sequential requests with B times one request's rate. A run is
 * accepted only when the slots did decode together: every request answered
 * 200 with predicted_n == n_predict, and the windows' common part
 * (min e_i - max s_i) is at least ASSAY_LLAMA_BENCH_MIN_OVERLAP of the span.
 * The server's /metrics confirm it independently: decode tokens per
 * llama_decode() call over the run (from n_decode_total) is about B when
 * the slots share each step, about 1 when they take turns.
 *
 * Why runs can fail the overlap: with B concurrent requests, the server
 * starts decoding the first ones to arrive, and its compute threads (which
 * spin) then hold both cores while the rest are still being sent or
 * queued; these join a step or, now and then, hundreds of steps later. On
 * 2 cores at batch 64, 2 of 16 runs of 800 tokens and 6 of 32 runs of 100
 * tokens were rejected so; with one_request, none of 36. one_request
 * starts every slot in one step, as the engine benchmark does, but is not
 * what B independent clients send.
 *
 * What the figure depends on: decode slows as the context grows (each
 * step attends over every earlier position), so a run covers positions
 * prompt_len .. prompt_len + n_predict and should be compared with the
 * engine over the same positions (at batch 64 with defaults, about 4,500
 * tokens/s over 100 tokens and 1,100-1,450 over 800); and on 2 cores,
 * llama-server's 2 spinning threads slow down many times over when
 * anything else runs (runs went from ~900 to 10-60 tokens/s at batch 1).
 *
 * Not handled: a server someone else started (this module starts its own,
 * on a free port, through scripts/llama-server-ctl.sh), streaming, and
 * speculative decoding (its timings count drafted tokens differently).
 */
#ifndef ASSAY_SUITES_LLAMA_BENCH_H
#define ASSAY_SUITES_LLAMA_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* The least common decode window, as a fraction of the span, for a run to count. */
#define ASSAY_LLAMA_BENCH_MIN_OVERLAP 0.9

struct assay_llama_bench_params {
    const char *server_bin; /* llama-server binary (see find_server); read by open only */
    const char *gguf;       /* the model file llama-server loads; read by open only */
    const char *source_dir; /* the checkout, for scripts/; NULL: the parent of $ASSAY_FIXTURES */
    const char *state_dir;  /* the server's state folder (url, pid, log); NULL: the test's
                               scratch folder "llama-bench-np<slots>" under $ASSAY_BUILD (a
                               server left there by an interrupted run is stopped first) */
    int32_t slots;          /* llama-server -np: the largest batch a run may ask for */
    int32_t threads;        /* llama-server -t */
    int32_t prompt_len;     /* prompt tokens per request, 1..4096 */
    int32_t n_predict;      /* tokens generated per request, >= 2 */
    int32_t ctx_slack;      /* context per slot = prompt_len + n_predict + ctx_slack */
    const char *extra_args; /* more llama-server arguments, split on blanks, e.g.
                               "-ctk f32 -ctv f32 -fa off"; NULL or "" for none */
    double run_timeout_s;   /* a run that takes longer fails with ASSAY_ERR_TIMEOUT */
    int32_t one_request;    /* 0: batch concurrent requests; 1: one request of batch prompts */
};

/* One slot, 2 threads, 16-token prompt, 800 tokens, slack 16, 600 s, concurrent
 * requests; no paths. */
struct assay_llama_bench_params assay_llama_bench_default_params(void);

/* What one run measured. Times in seconds; rates in tokens per second. */
struct assay_llama_bench_result {
    int32_t batch;              /* prompts decoded together */
    double tokens_per_s;        /* the aggregate decode rate (the rule above) */
    double sum_request_rates;   /* sum of the answers' predicted_per_second, for comparison */
    double request_rate_min;    /* the slowest request's predicted_per_second */
    double request_rate_max;    /* the fastest */
    double span_s;              /* max e_i - min s_i */
    double overlap;             /* (min e_i - max s_i) / span_s; 1 when all windows coincide */
    int64_t decode_tokens;      /* sum of predicted_n - 1 */
    double tokens_per_decode;   /* decode_tokens / llama_decode() calls in the run, from
                                   /metrics; NAN when /metrics did not answer */
    double prompt_ms_max;       /* the longest prompt_ms (the prompts' processing) */
    double send_spread_s;       /* first request sent to last request sent (client side) */
    int32_t new_connections;    /* requests that opened a connection (the others reused one) */
    double wall_s;              /* first request sent to last answer received */
};

struct assay_llama_bench;

/*
 * The path of a finished llama-server build into path: $ASSAY_LLAMA_SERVER
 * when set, else what scripts/build-llama-server.sh --if-built prints
 * (source_dir as in the params; NULL: the parent of $ASSAY_FIXTURES). Never
 * fetches or builds. Returns ASSAY_OK; ASSAY_ERR_NOT_FOUND when there is no
 * finished build (err says so: a benchmark skips llama.cpp then);
 * ASSAY_ERR_INVALID when source_dir cannot be found; ASSAY_ERR_IO when the
 * script could not be run. err is always NUL-terminated.
 */
enum assay_status assay_llama_bench_find_server(const char *source_dir, char *path,
                                                size_t path_size, char *err, size_t err_size);

/*
 * Start llama-server through scripts/llama-server-ctl.sh (env
 * ASSAY_LLAMA_SERVER, ASSAY_LLAMA_NP = slots, ASSAY_LLAMA_THREADS,
 * ASSAY_LLAMA_CTX_PER_SLOT, ASSAY_OWNER_PID = this process, so that the
 * script's watchdog stops the server if this process dies), with
 * "--cache-ram 0" (the host prompt cache would copy a reused slot's KV
 * state in the server's loop, in the middle of other slots' decoding) and
 * then extra_args; then send one short request (the prompt, 4 tokens) to
 * check that /completion answers. The strings of *p are copied. Free
 * with assay_llama_bench_close.
 *
 * Returns ASSAY_OK and *out; ASSAY_ERR_INVALID for bad params or a missing
 * file; ASSAY_ERR_IO when the server did not start (err holds the script's
 * last line, e.g. "llama-server exited during start-up", and the log's
 * path); ASSAY_ERR_NET when the check request failed; ASSAY_ERR_NOMEM. On
 * any error no server is left running and *out is NULL.
 */
enum assay_status assay_llama_bench_open(struct assay_llama_bench **out,
                                         const struct assay_llama_bench_params *p, char *err,
                                         size_t err_size);

/*
 * One run of batch prompts (1 <= batch <= slots; batch concurrent requests,
 * or one request with one_request) on the open server; fills *res. The
 * first run after open is cold (pages of the weights and the KV cache are
 * touched for the first time): warm up with a run of your own.
 *
 * Returns ASSAY_OK; ASSAY_ERR_INVALID for a bad batch; ASSAY_ERR_NET when
 * a request failed (no answer, an HTTP status other than 200, an answer
 * without timings, or predicted_n != n_predict: err names the first such
 * request and what the server said); ASSAY_ERR_TIMEOUT after run_timeout_s
 * (unanswered requests are abandoned, their connections closed);
 * ASSAY_ERR_UNSUPPORTED when the slots did not decode together (overlap
 * below ASSAY_LLAMA_BENCH_MIN_OVERLAP; *res is filled all the same);
 * ASSAY_ERR_NOMEM. The server stays up after an error.
 */
enum assay_status assay_llama_bench_run(struct assay_llama_bench *lb, int32_t batch,
                                        struct assay_llama_bench_result *res, char *err,
                                        size_t err_size);

/* The server's log, for messages ("<state_dir>/log"); lives as long as lb. */
const char *assay_llama_bench_log_path(const struct assay_llama_bench *lb);

/* Stop the server (llama-server-ctl.sh stop: SIGTERM, SIGKILL after 10 s) and free lb.
 * NULL is a no-op. */
void assay_llama_bench_close(struct assay_llama_bench *lb);

#endif
