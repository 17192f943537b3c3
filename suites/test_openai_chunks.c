/* Unit tests of adapters/openai_chunks.c, the reader of OpenAI-compatible
 * responses, driven from a table of what real servers send, without a
 * server: each row is a response byte for byte (server-sent events, or one
 * non-streamed JSON body) and what must come out of it (tokens, logprobs,
 * top logprobs, the server's counts, how the request ended, or the error
 * and its message).
 *
 * The rows were written by hand from reading each server's source and
 * documentation (no server was run, no text copied):
 *   llama.cpp (llama-server): tools/server/server-task.cpp -
 *     server_task_result_cmpl_partial::to_json_non_oaicompat and
 *     ::to_json_oaicompat (one chunk per token), server_task_result_cmpl_final
 *     ::to_json_non_oaicompat (stream: "content" and "tokens" empty) and
 *     ::to_json_oaicompat (finish_reason, usage), completion_token_output::
 *     probs_vector_to_json (id, token, bytes, logprob, top_logprobs; a zero
 *     probability is written as -FLT_MAX, never -inf), task_params::to_json
 *     (generation_settings); server-common.cpp - format_oai_sse ("data: "),
 *     format_error_response; tools/server/README.md, /completion.
 *   vLLM: vllm/entrypoints/openai/serving_completion.py -
 *     completion_stream_generator (finish_reason on the last token's chunk,
 *     a choices-less usage chunk only when usage is asked for, "data:
 *     [DONE]"), _create_completion_logprobs ("token_id:N" with
 *     return_tokens_as_token_ids, logprobs clamped at -9999.0, null when a
 *     step has none); protocol.py - CompletionStreamResponse,
 *     CompletionResponseStreamChoice, CompletionLogProbs;
 *     create_streaming_error_response ({"error": {message, type, param, code}}).
 *   SGLang: python/sglang/srt/entrypoints/openai/serving_completions.py -
 *     _generate_completion_stream; utils.py - to_openai_style_logprobs
 *     (tokens are the tokens' text, text_offset -1); protocol.py -
 *     CompletionStreamResponse (matched_stop); create_streaming_error_response
 *     ({"error": {object, message, type, param, code}}).
 *   TGI: router/src/lib.rs - Completion (tagged "object": "text_completion"),
 *     Chunk and CompletionComplete (logprobs null, finish_reason "" until the
 *     last chunk); router/src/server.rs - the completions stream, and
 *     From<InferError> for Event ({"error": "...", "error_type": "..."});
 *     /generate_stream output as TGI's documentation shows it ("data:"
 *     without a space).
 * Token ids and logprobs are made up (shaped like a 32000-token
 * vocabulary); the keys, their types and the framing are the servers'.
 * Rows marked "malformed" take a real chunk and break one thing.
 *
 * Every row can fail: test_rows_can_fail checks that a row's expectations,
 * changed, no longer match what the reader does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "adapters/openai_chunks.h"
#include "adapters/sse.h"
#include "support.h"

#define MAX_TOK 8
#define NONE (-1)

/* The request behind a row: prompt length, max_tokens, stop token, the
 * server's EOS token and its vocabulary size. */
struct shape {
    int32_t prompt_len, max_tokens, stop_token, eos_token, vocab;
};

struct row {
    const char *name;
    enum assay_openai_api api;
    bool body;            /* a non-streamed JSON body; else server-sent events */
    struct shape req;
    bool sampled;         /* temperature 0.8, top-k 40, top-p 0.95, seed 1234; else greedy */
    const char *secret;   /* the API key, for rows that must never show it */
    const char *text;     /* what the server sends */
    /* What must come out. */
    enum assay_status st; /* of the first event that fails, or of the end */
    const char *msg;      /* in the message when st is not ASSAY_OK */
    enum assay_finish_reason reason; /* when st is ASSAY_OK */
    int n_tok;            /* tokens delivered (before a failure too) */
    int32_t tok[MAX_TOK];
    bool check_lp;        /* compare lp (NAN: the chunk had none) */
    double lp[MAX_TOK];
    bool check_top;       /* compare n_top and the first alternative */
    int32_t n_top[MAX_TOK];
    int32_t top_id[MAX_TOK];
    double top_lp[MAX_TOK];
    int n_usage;          /* the server's counts reported this often ... */
    int64_t usage_pt, usage_ct; /* ... the last time */
};

/* ------------------------------------------------------------------ */
/* llama.cpp's final chunk and settings                                */
/* ------------------------------------------------------------------ */

/* generation_settings as llama-server echoes them (task_params::to_json)
 * for assay's greedy request with n_predict N; IE is ignore_eos, TEMP the
 * temperature it used, SAMPLERS its sampler list. */
#define LLAMA_GS(N, IE, TEMP, SAMPLERS)                                                   \
    "{\"seed\":4294967295,\"temperature\":" TEMP ",\"dynatemp_range\":0.0,"               \
    "\"dynatemp_exponent\":1.0,\"top_k\":0,\"top_p\":1.0,\"min_p\":0.0,"                  \
    "\"top_n_sigma\":-1.0,\"xtc_probability\":0.0,\"xtc_threshold\":0.10000000149011612," \
    "\"typical_p\":1.0,\"repeat_last_n\":0,\"repeat_penalty\":1.0,"                      \
    "\"presence_penalty\":0.0,\"frequency_penalty\":0.0,\"dry_multiplier\":0.0,"         \
    "\"dry_base\":1.75,\"dry_allowed_length\":2,\"dry_penalty_last_n\":4096,"            \
    "\"mirostat\":0,\"mirostat_tau\":5.0,\"mirostat_eta\":0.10000000149011612,"          \
    "\"max_tokens\":" #N ",\"n_predict\":" #N ",\"n_keep\":0,\"n_discard\":0,"           \
    "\"ignore_eos\":" IE ",\"stream\":true,\"n_probs\":2,\"min_keep\":0,"                \
    "\"samplers\":[" SAMPLERS "],\"timings_per_token\":false,"                           \
    "\"post_sampling_probs\":false,\"lora\":[]}"

#define LLAMA_SAMPLERS "\"temperature\",\"top_k\",\"top_p\""
/* llama.cpp's default chain, what a server that ignores "samplers" keeps. */
#define LLAMA_DEFAULT_SAMPLERS                                                              \
    "\"penalties\",\"dry\",\"top_n_sigma\",\"top_k\",\"typ_p\",\"top_p\",\"min_p\",\"xtc\"," \
    "\"temperature\""

/* The last event of a /completion stream (server_task_result_cmpl_final::
 * to_json_non_oaicompat with stream on): PRED tokens predicted, EVAL
 * evaluated, STOP_TYPE "limit", "eos", "word" or "none". */
#define LLAMA_FINAL(PRED, EVAL, TRUNC, STOP_TYPE, GS)                                         \
    "data: {\"index\":0,\"content\":\"\",\"tokens\":[],\"id_slot\":0,\"stop\":true,"          \
    "\"model\":\"gpt-3.5-turbo\",\"tokens_predicted\":" #PRED ",\"tokens_evaluated\":" #EVAL \
    ",\"generation_settings\":" GS ",\"prompt\":\" The capital of France is\","              \
    "\"has_new_line\":false,\"truncated\":" TRUNC ",\"stop_type\":\"" STOP_TYPE "\","        \
    "\"stopping_word\":\"\",\"tokens_cached\":7,\"timings\":{\"cache_n\":0,\"prompt_n\":5,"  \
    "\"prompt_ms\":11.3,\"prompt_per_token_ms\":2.26,\"prompt_per_second\":442.4,"           \
    "\"predicted_n\":" #PRED ",\"predicted_ms\":21.1,\"predicted_per_token_ms\":7.03,"       \
    "\"predicted_per_second\":142.2}}\n\n"

/* One /completion partial chunk per token (to_json_non_oaicompat), with
 * n_probs 2: " Paris", ",", " the". */
#define LLAMA_TOK_PARIS(PRED)                                                                 \
    "data: {\"index\":0,\"content\":\" Paris\",\"tokens\":[3681],\"stop\":false,"              \
    "\"id_slot\":-1,\"tokens_predicted\":" #PRED ",\"tokens_evaluated\":5,"                   \
    "\"completion_probabilities\":[{\"id\":3681,\"token\":\" Paris\","                        \
    "\"bytes\":[32,80,97,114,105,115],\"logprob\":-0.2459,\"top_logprobs\":["                 \
    "{\"id\":3681,\"token\":\" Paris\",\"bytes\":[32,80,97,114,105,115],\"logprob\":-0.2459}," \
    "{\"id\":278,\"token\":\" the\",\"bytes\":[32,116,104,101],\"logprob\":-2.0312}]}]}\n\n"
#define LLAMA_TOK_COMMA(PRED)                                                                 \
    "data: {\"index\":0,\"content\":\",\",\"tokens\":[29892],\"stop\":false,"                  \
    "\"id_slot\":-1,\"tokens_predicted\":" #PRED ",\"tokens_evaluated\":5,"                   \
    "\"completion_probabilities\":[{\"id\":29892,\"token\":\",\",\"bytes\":[44],"             \
    "\"logprob\":-0.6931,\"top_logprobs\":["                                                  \
    "{\"id\":29892,\"token\":\",\",\"bytes\":[44],\"logprob\":-0.6931},"                      \
    "{\"id\":29889,\"token\":\".\",\"bytes\":[46],\"logprob\":-0.9163}]}]}\n\n"
#define LLAMA_TOK_THE(PRED)                                                                   \
    "data: {\"index\":0,\"content\":\" the\",\"tokens\":[278],\"stop\":false,"                 \
    "\"id_slot\":-1,\"tokens_predicted\":" #PRED ",\"tokens_evaluated\":5,"                   \
    "\"completion_probabilities\":[{\"id\":278,\"token\":\" the\",\"bytes\":[32,116,104,101]," \
    "\"logprob\":-1.204,\"top_logprobs\":["                                                   \
    "{\"id\":278,\"token\":\" the\",\"bytes\":[32,116,104,101],\"logprob\":-1.204},"          \
    "{\"id\":263,\"token\":\" a\",\"bytes\":[32,97],\"logprob\":-1.6094}]}]}\n\n"

/* The same three tokens through llama-server's /v1/completions
 * (to_json_oaicompat: logprobs.content with ids). */
#define LLAMA_V1_TOK(TEXT, ID, BYTES, LP, ALT_ID, ALT_TEXT, ALT_BYTES, ALT_LP)                  \
    "data: {\"choices\":[{\"text\":\"" TEXT "\",\"index\":0,\"logprobs\":{\"content\":[{"      \
    "\"id\":" #ID ",\"token\":\"" TEXT "\",\"bytes\":[" BYTES "],\"logprob\":" #LP ","         \
    "\"top_logprobs\":[{\"id\":" #ID ",\"token\":\"" TEXT "\",\"bytes\":[" BYTES "],"          \
    "\"logprob\":" #LP "},{\"id\":" #ALT_ID ",\"token\":\"" ALT_TEXT "\",\"bytes\":[" ALT_BYTES \
    "],\"logprob\":" #ALT_LP "}]}]},\"finish_reason\":null}],\"created\":1736864213,"          \
    "\"model\":\"gpt-3.5-turbo\",\"system_fingerprint\":\"b4489-f26c8742\","                   \
    "\"object\":\"text_completion\",\"id\":\"chatcmpl-pR9EtWvnTlPoCsZZ5GxJrQgKwBqHzCxo\"}\n\n"
#define LLAMA_V1_PARIS LLAMA_V1_TOK(" Paris", 3681, "32,80,97,114,105,115", -0.2459, 278, " the", "32,116,104,101", -2.0312)
#define LLAMA_V1_COMMA LLAMA_V1_TOK(",", 29892, "44", -0.6931, 29889, ".", "46", -0.9163)
#define LLAMA_V1_THE LLAMA_V1_TOK(" the", 278, "32,116,104,101", -1.204, 263, " a", "32,97", -1.6094)
#define LLAMA_V1_FINAL(PT, CT)                                                               \
    "data: {\"choices\":[{\"text\":\"\",\"index\":0,\"logprobs\":null,"                      \
    "\"finish_reason\":\"length\"}],\"created\":1736864213,\"model\":\"gpt-3.5-turbo\","     \
    "\"system_fingerprint\":\"b4489-f26c8742\",\"object\":\"text_completion\","              \
    "\"usage\":{\"completion_tokens\":" #CT ",\"prompt_tokens\":" #PT ",\"total_tokens\":8," \
    "\"prompt_tokens_details\":{\"cached_tokens\":0}},"                                      \
    "\"id\":\"chatcmpl-pR9EtWvnTlPoCsZZ5GxJrQgKwBqHzCxo\",\"timings\":{\"cache_n\":0,"       \
    "\"prompt_n\":5,\"prompt_ms\":11.3,\"prompt_per_token_ms\":2.26,"                        \
    "\"prompt_per_second\":442.4,\"predicted_n\":3,\"predicted_ms\":21.1,"                   \
    "\"predicted_per_token_ms\":7.03,\"predicted_per_second\":142.2}}\n\n"

/* vLLM's /v1/completions chunk for one token with return_tokens_as_token_ids
 * and logprobs 1 (the sampled token and the best other). */
#define VLLM_TOK(TEXT, ID, LP, ALT_ID, ALT_LP, OFFSET, FINISH)                                 \
    "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":\"text_completion\"," \
    "\"created\":1736864213,\"model\":\"meta-llama/Llama-2-7b-hf\",\"choices\":[{"          \
    "\"index\":0,\"text\":\"" TEXT "\",\"logprobs\":{\"text_offset\":[" #OFFSET "],"        \
    "\"token_logprobs\":[" #LP "],\"tokens\":[\"token_id:" #ID "\"],\"top_logprobs\":[{"   \
    "\"token_id:" #ID "\":" #LP ",\"token_id:" #ALT_ID "\":" #ALT_LP "}]},"                 \
    "\"finish_reason\":" FINISH ",\"stop_reason\":null,\"prompt_token_ids\":null,"          \
    "\"token_ids\":null}],\"usage\":null}\n\n"

/* TGI's /v1/completions chunk (Chunk, serialised with "object" first). */
#define TGI_CHUNK(TEXT, FINISH)                                                              \
    "data:{\"object\":\"text_completion\",\"id\":\"\",\"created\":1736864213,\"choices\":[{" \
    "\"index\":0,\"text\":\"" TEXT "\",\"logprobs\":null,\"finish_reason\":\"" FINISH "\"}]," \
    "\"model\":\"meta-llama/Llama-2-7b-hf\",\"system_fingerprint\":\"2.4.1-native\"}\n\n"

/* SGLang's /v1/completions chunk with logprobs (to_openai_style_logprobs). */
#define SGLANG_TOK(TEXT, LP, ALT_TEXT, ALT_LP, FINISH)                                        \
    "data: {\"id\":\"8f4e1c2a9b7d4e0f8a6c5b3d2e1f0a9b\",\"object\":\"text_completion\","     \
    "\"created\":1736864213,\"model\":\"default\",\"choices\":[{\"index\":0,\"text\":\""     \
    TEXT "\",\"logprobs\":{\"text_offset\":[-1],\"token_logprobs\":[" #LP "],"              \
    "\"tokens\":[\"" TEXT "\"],\"top_logprobs\":[{\"" TEXT "\":" #LP ",\"" ALT_TEXT "\":"   \
    #ALT_LP "}]},\"finish_reason\":" FINISH ",\"matched_stop\":null}],\"usage\":null}\n\n"

/* The request every row but a few uses: 5 prompt tokens, 3 to generate, no
 * stop token, EOS unknown, 32000 ids. */
#define REQ_5_3 {5, 3, NONE, NONE, 32000}

/* ------------------------------------------------------------------ */
/* The table                                                           */
/* ------------------------------------------------------------------ */

static const struct row k_rows[] = {
    /* ---- llama.cpp, POST /completion -------------------------------- */
    {
        .name = "llama.cpp /completion stream, n_probs 2: three tokens, stop_type limit",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = LLAMA_TOK_PARIS(1) LLAMA_TOK_COMMA(2) LLAMA_TOK_THE(3)
            LLAMA_FINAL(3, 5, "false", "limit", LLAMA_GS(3, "true", "0.0", LLAMA_SAMPLERS)),
        .reason = ASSAY_FINISH_LENGTH,
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .check_lp = true,
        .lp = {-0.2459, -0.6931, -1.204},
        .check_top = true,
        .n_top = {2, 2, 2},
        .top_id = {3681, 29892, 278},
        .top_lp = {-0.2459, -0.6931, -1.204},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 3,
    },
    {
        .name = "llama.cpp /completion non-streamed body: every token and probability at once",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .body = true,
        .req = REQ_5_3,
        .text = "{\"index\":0,\"content\":\" Paris, the\",\"tokens\":[3681,29892,278],"
                "\"id_slot\":0,\"stop\":true,\"model\":\"gpt-3.5-turbo\",\"tokens_predicted\":3,"
                "\"tokens_evaluated\":5,\"generation_settings\":"
                LLAMA_GS(3, "true", "0.0", LLAMA_SAMPLERS)
                ",\"prompt\":\" The capital of France is\",\"has_new_line\":false,"
                "\"truncated\":false,\"stop_type\":\"limit\",\"stopping_word\":\"\","
                "\"tokens_cached\":7,\"timings\":{\"cache_n\":0,\"prompt_n\":5,"
                "\"prompt_ms\":11.3,\"predicted_n\":3,\"predicted_ms\":21.1},"
                "\"completion_probabilities\":["
                "{\"id\":3681,\"token\":\" Paris\",\"bytes\":[32,80,97,114,105,115],"
                "\"logprob\":-0.2459,\"top_logprobs\":[{\"id\":3681,\"token\":\" Paris\","
                "\"bytes\":[32,80,97,114,105,115],\"logprob\":-0.2459},{\"id\":278,"
                "\"token\":\" the\",\"bytes\":[32,116,104,101],\"logprob\":-2.0312}]},"
                "{\"id\":29892,\"token\":\",\",\"bytes\":[44],\"logprob\":-0.6931,"
                "\"top_logprobs\":[{\"id\":29892,\"token\":\",\",\"bytes\":[44],"
                "\"logprob\":-0.6931},{\"id\":29889,\"token\":\".\",\"bytes\":[46],"
                "\"logprob\":-0.9163}]},"
                "{\"id\":278,\"token\":\" the\",\"bytes\":[32,116,104,101],\"logprob\":-1.204,"
                "\"top_logprobs\":[{\"id\":278,\"token\":\" the\",\"bytes\":[32,116,104,101],"
                "\"logprob\":-1.204},{\"id\":263,\"token\":\" a\",\"bytes\":[32,97],"
                "\"logprob\":-1.6094}]}]}",
        .reason = ASSAY_FINISH_LENGTH,
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .check_lp = true,
        .lp = {-0.2459, -0.6931, -1.204},
        .check_top = true,
        .n_top = {2, 2, 2},
        .top_id = {3681, 29892, 278},
        .top_lp = {-0.2459, -0.6931, -1.204},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 3,
    },
    {
        .name = "llama.cpp /completion: it added a BOS (tokens_evaluated 6 of 5 sent)",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = LLAMA_TOK_PARIS(1) LLAMA_TOK_COMMA(2) LLAMA_TOK_THE(3)
            LLAMA_FINAL(3, 6, "false", "limit", LLAMA_GS(3, "true", "0.0", LLAMA_SAMPLERS)),
        .st = ASSAY_ERR_NET,
        .msg = "the server evaluated 6 prompt tokens but 5 were sent (did it add a BOS token?)",
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .n_usage = 1,
        .usage_pt = 6,
        .usage_ct = 3,
    },
    {
        .name = "llama.cpp /completion: \"samplers\" ignored (its default chain echoed)",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = LLAMA_TOK_PARIS(1) LLAMA_TOK_COMMA(2) LLAMA_TOK_THE(3)
            LLAMA_FINAL(3, 5, "false", "limit",
                        LLAMA_GS(3, "true", "0.0", LLAMA_DEFAULT_SAMPLERS)),
        .st = ASSAY_ERR_UNSUPPORTED,
        .msg = "the server did not apply \"samplers\"",
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 3,
    },
    {
        .name = "llama.cpp /completion: temperature 0.8 used where 0 was sent",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = LLAMA_TOK_PARIS(1) LLAMA_TOK_COMMA(2) LLAMA_TOK_THE(3)
            LLAMA_FINAL(3, 5, "false", "limit",
                        LLAMA_GS(3, "true", "0.800000011920929", LLAMA_SAMPLERS)),
        .st = ASSAY_ERR_UNSUPPORTED,
        .msg = "the server did not apply \"temperature\": sent 0, it used 0.800000012",
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 3,
    },
    {
        .name = "llama.cpp /completion seeded: its echo of temperature, top_k, top_p, seed agrees",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = {5, 1, NONE, NONE, 32000},
        .sampled = true,
        .text = LLAMA_TOK_PARIS(1)
            "data: {\"index\":0,\"content\":\"\",\"tokens\":[],\"id_slot\":0,\"stop\":true,"
            "\"model\":\"gpt-3.5-turbo\",\"tokens_predicted\":1,\"tokens_evaluated\":5,"
            "\"generation_settings\":{\"seed\":1234,\"temperature\":0.800000011920929,"
            "\"top_k\":40,\"top_p\":0.949999988079071,\"min_p\":0.0,\"typical_p\":1.0,"
            "\"repeat_penalty\":1.0,\"dry_multiplier\":0.0,\"xtc_probability\":0.0,"
            "\"mirostat\":0,\"max_tokens\":1,\"n_predict\":1,\"ignore_eos\":true,"
            "\"samplers\":[\"temperature\",\"top_k\",\"top_p\"]},\"prompt\":\"\","
            "\"has_new_line\":false,\"truncated\":false,\"stop_type\":\"limit\","
            "\"stopping_word\":\"\",\"tokens_cached\":5,\"timings\":{}}\n\n",
        .reason = ASSAY_FINISH_LENGTH,
        .n_tok = 1,
        .tok = {3681},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 1,
    },
    {
        .name = "llama.cpp /completion: stop_type eos after 2 of 3 (ignore_eos not honoured)",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = LLAMA_TOK_PARIS(1) LLAMA_TOK_COMMA(2)
            LLAMA_FINAL(2, 5, "false", "eos", LLAMA_GS(3, "true", "0.0", LLAMA_SAMPLERS)),
        .st = ASSAY_ERR_NET,
        .msg = "the server ended the stream early (stop_type \"eos\"), before max_tokens",
        .n_tok = 2,
        .tok = {3681, 29892},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 2,
    },
    {
        .name = "llama.cpp /completion: its EOS (2) is the stop token: it stops, counts checked",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = {5, 4, 2, 2, 32000},
        .text = LLAMA_TOK_PARIS(1)
            "data: {\"index\":0,\"content\":\"\",\"tokens\":[2],\"stop\":false,\"id_slot\":-1,"
            "\"tokens_predicted\":2,\"tokens_evaluated\":5,\"completion_probabilities\":[{"
            "\"id\":2,\"token\":\"\",\"bytes\":[],\"logprob\":-0.0513,\"top_logprobs\":["
            "{\"id\":2,\"token\":\"\",\"bytes\":[],\"logprob\":-0.0513},{\"id\":29889,"
            "\"token\":\".\",\"bytes\":[46],\"logprob\":-3.2188}]}]}\n\n"
            LLAMA_FINAL(2, 5, "false", "eos", LLAMA_GS(4, "false", "0.0", LLAMA_SAMPLERS)),
        .reason = ASSAY_FINISH_STOP,
        .n_tok = 2,
        .tok = {3681, 2},
        .check_lp = true,
        .lp = {-0.2459, -0.0513},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 2,
    },
    {
        .name = "llama.cpp /completion: a stop token that is not EOS ends the reading there",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = {5, 3, 29892, NONE, 32000},
        .text = LLAMA_TOK_PARIS(1) LLAMA_TOK_COMMA(2) LLAMA_TOK_THE(3)
            LLAMA_FINAL(3, 5, "false", "limit", LLAMA_GS(3, "true", "0.0", LLAMA_SAMPLERS)),
        .reason = ASSAY_FINISH_STOP,
        .n_tok = 2,
        .tok = {3681, 29892},
    },
    {
        .name = "llama.cpp /completion: an error object mid-stream (format_error_response)",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = LLAMA_TOK_PARIS(1)
            "data: {\"error\":{\"code\":500,\"message\":\"Failed to decode the batch, "
            "n_batch = 2048, ret = -3\",\"type\":\"server_error\"}}\n\n",
        .st = ASSAY_ERR_NET,
        .msg = "the server reported an error mid-stream: Failed to decode the batch, n_batch = "
               "2048, ret = -3",
        .n_tok = 1,
        .tok = {3681},
    },
    {
        .name = "llama.cpp /completion: the prompt was truncated",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = LLAMA_TOK_PARIS(1) LLAMA_TOK_COMMA(2) LLAMA_TOK_THE(3)
            LLAMA_FINAL(3, 5, "true", "limit", LLAMA_GS(3, "true", "0.0", LLAMA_SAMPLERS)),
        .st = ASSAY_ERR_NET,
        .msg = "the server truncated the request (context too small?)",
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 3,
    },
    {
        .name = "llama.cpp /completion: a zero probability is written as -FLT_MAX, a number",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = {5, 1, NONE, NONE, 32000},
        .text = "data: {\"index\":0,\"content\":\" Paris\",\"tokens\":[3681],\"stop\":false,"
                "\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":5,"
                "\"completion_probabilities\":[{\"id\":3681,\"token\":\" Paris\","
                "\"bytes\":[32,80,97,114,105,115],\"logprob\":0.0,\"top_logprobs\":["
                "{\"id\":3681,\"token\":\" Paris\",\"bytes\":[32,80,97,114,105,115],"
                "\"logprob\":0.0},{\"id\":278,\"token\":\" the\",\"bytes\":[32,116,104,101],"
                "\"logprob\":-3.4028234663852886e+38}]}]}\n\n"
            LLAMA_FINAL(1, 5, "false", "limit", LLAMA_GS(1, "true", "0.0", LLAMA_SAMPLERS)),
        .reason = ASSAY_FINISH_LENGTH,
        .n_tok = 1,
        .tok = {3681},
        .check_lp = true,
        .lp = {0.0},
        .check_top = true,
        .n_top = {2},
        .top_id = {3681},
        .top_lp = {0.0},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 1,
    },
    {
        .name = "llama.cpp /completion: the connection ends without the final chunk",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = LLAMA_TOK_PARIS(1) LLAMA_TOK_COMMA(2),
        .st = ASSAY_ERR_NET,
        .msg = "connection closed mid-stream: the stream ended without its final chunk",
        .n_tok = 2,
        .tok = {3681, 29892},
    },
    {
        .name = "llama.cpp /completion: a token after the final chunk",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = {5, 2, NONE, NONE, 32000},
        .text = LLAMA_TOK_PARIS(1) LLAMA_TOK_COMMA(2)
            LLAMA_FINAL(2, 5, "false", "limit", LLAMA_GS(2, "true", "0.0", LLAMA_SAMPLERS))
                LLAMA_TOK_THE(3),
        .st = ASSAY_ERR_NET,
        .msg = "data after the final chunk (\"stop\": true)",
        .n_tok = 2,
        .tok = {3681, 29892},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 2,
    },
    {
        .name = "llama.cpp /completion: more tokens than max_tokens",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = {5, 2, NONE, NONE, 32000},
        .text = LLAMA_TOK_PARIS(1) LLAMA_TOK_COMMA(2) LLAMA_TOK_THE(3),
        .st = ASSAY_ERR_NET,
        .msg = "more tokens than max_tokens 2: token 278 at position 2",
        .n_tok = 2,
        .tok = {3681, 29892},
    },
    {
        .name = "llama.cpp /completion non-streamed: a body without \"stop\": true",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .body = true,
        .req = REQ_5_3,
        .text = "{\"index\":0,\"content\":\" Paris\",\"tokens\":[3681],\"stop\":false,"
                "\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":5}",
        .st = ASSAY_ERR_PARSE,
        .msg = "a non-streamed response without \"stop\": true",
    },
    {
        .name = "llama.cpp /completion non-streamed: an error body",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .body = true,
        .req = REQ_5_3,
        .text = "{\"error\":{\"code\":400,\"message\":\"the request exceeds the available "
                "context size, try increasing it\",\"type\":\"exceed_context_size_error\","
                "\"n_prompt_tokens\":5,\"n_ctx\":4}}",
        .st = ASSAY_ERR_NET,
        .msg = "the server reported an error: the request exceeds the available context size",
    },
    {
        .name = "llama.cpp /completion: an error that echoes the API key shows it redacted",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .secret = "sk-live-7Qv2mZ0xL9aa",
        .text = "data: {\"error\":{\"code\":401,\"message\":\"Invalid API Key: "
                "sk-live-7Qv2mZ0xL9aa\",\"type\":\"authentication_error\"}}\n\n",
        .st = ASSAY_ERR_NET,
        .msg = "the server reported an error mid-stream: Invalid API Key: [redacted]",
    },

    /* ---- llama.cpp, POST /v1/completions ------------------------------ */
    {
        .name = "llama.cpp /v1/completions stream: logprobs.content with ids, usage, [DONE]",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = LLAMA_V1_PARIS LLAMA_V1_COMMA LLAMA_V1_THE LLAMA_V1_FINAL(5, 3)
            "data: [DONE]\n\n",
        .reason = ASSAY_FINISH_LENGTH,
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .check_lp = true,
        .lp = {-0.2459, -0.6931, -1.204},
        .check_top = true,
        .n_top = {2, 2, 2},
        .top_id = {3681, 29892, 278},
        .top_lp = {-0.2459, -0.6931, -1.204},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 3,
    },
    {
        .name = "llama.cpp /v1/completions stream without \"data: [DONE]\"",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = LLAMA_V1_PARIS LLAMA_V1_COMMA LLAMA_V1_THE LLAMA_V1_FINAL(5, 3),
        .st = ASSAY_ERR_NET,
        .msg = "connection closed mid-stream: the stream ended without \"data: [DONE]\"",
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 3,
    },
    {
        .name = "llama.cpp /v1/completions: \"data: [DONE]\" before the final chunk",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = LLAMA_V1_PARIS "data: [DONE]\n\n",
        .st = ASSAY_ERR_NET,
        .msg = "the stream ended with \"[DONE]\" before its final chunk",
        .n_tok = 1,
        .tok = {3681},
    },
    {
        .name = "llama.cpp /v1/completions non-streamed body",
        .api = ASSAY_OPENAI_API_V1,
        .body = true,
        .req = REQ_5_3,
        .text = "{\"choices\":[{\"text\":\" Paris, the\",\"index\":0,\"logprobs\":{\"content\":["
                "{\"id\":3681,\"token\":\" Paris\",\"bytes\":[32,80,97,114,105,115],"
                "\"logprob\":-0.2459,\"top_logprobs\":[{\"id\":3681,\"token\":\" Paris\","
                "\"bytes\":[32,80,97,114,105,115],\"logprob\":-0.2459}]},"
                "{\"id\":29892,\"token\":\",\",\"bytes\":[44],\"logprob\":-0.6931,"
                "\"top_logprobs\":[{\"id\":29892,\"token\":\",\",\"bytes\":[44],"
                "\"logprob\":-0.6931}]},"
                "{\"id\":278,\"token\":\" the\",\"bytes\":[32,116,104,101],\"logprob\":-1.204,"
                "\"top_logprobs\":[{\"id\":278,\"token\":\" the\",\"bytes\":[32,116,104,101],"
                "\"logprob\":-1.204}]}]},\"finish_reason\":\"length\"}],"
                "\"created\":1736864213,\"model\":\"gpt-3.5-turbo\","
                "\"system_fingerprint\":\"b4489-f26c8742\",\"object\":\"text_completion\","
                "\"usage\":{\"completion_tokens\":3,\"prompt_tokens\":5,\"total_tokens\":8,"
                "\"prompt_tokens_details\":{\"cached_tokens\":0}},"
                "\"id\":\"chatcmpl-pR9EtWvnTlPoCsZZ5GxJrQgKwBqHzCxo\"}",
        .reason = ASSAY_FINISH_LENGTH,
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .check_top = true,
        .n_top = {1, 1, 1},
        .top_id = {3681, 29892, 278},
        .top_lp = {-0.2459, -0.6931, -1.204},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 3,
    },

    /* ---- vLLM, POST /v1/completions ----------------------------------- */
    {
        .name = "vLLM stream, return_tokens_as_token_ids: finish_reason on the last token, [DONE]",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = VLLM_TOK(" Paris", 3681, -0.2459, 278, -2.0312, 0, "null")
            VLLM_TOK(",", 29892, -0.6931, 29889, -0.9163, 6, "null")
            VLLM_TOK(" the", 278, -1.204, 263, -1.6094, 7, "\"length\"")
            "data: [DONE]\n\n",
        .reason = ASSAY_FINISH_LENGTH,
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .check_lp = true,
        .lp = {-0.2459, -0.6931, -1.204},
        .check_top = true,
        .n_top = {2, 2, 2},
        .top_id = {3681, 29892, 278},
        .top_lp = {-0.2459, -0.6931, -1.204},
    },
    {
        .name = "vLLM stream with usage included: a chunk with \"choices\": [] and the counts",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = VLLM_TOK(" Paris", 3681, -0.2459, 278, -2.0312, 0, "null")
            VLLM_TOK(",", 29892, -0.6931, 29889, -0.9163, 6, "null")
            VLLM_TOK(" the", 278, -1.204, 263, -1.6094, 7, "\"length\"")
            "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
            "\"text_completion\",\"created\":1736864213,\"model\":\"meta-llama/Llama-2-7b-hf\","
            "\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":8,"
            "\"completion_tokens\":3}}\n\n"
            "data: [DONE]\n\n",
        .reason = ASSAY_FINISH_LENGTH,
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 3,
    },
    {
        .name = "vLLM usage: prompt_tokens 6 where 5 were sent",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = VLLM_TOK(" Paris", 3681, -0.2459, 278, -2.0312, 0, "null")
            VLLM_TOK(",", 29892, -0.6931, 29889, -0.9163, 6, "null")
            VLLM_TOK(" the", 278, -1.204, 263, -1.6094, 7, "\"length\"")
            "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
            "\"text_completion\",\"created\":1736864213,\"model\":\"meta-llama/Llama-2-7b-hf\","
            "\"choices\":[],\"usage\":{\"prompt_tokens\":6,\"total_tokens\":9,"
            "\"completion_tokens\":3}}\n\n"
            "data: [DONE]\n\n",
        .st = ASSAY_ERR_NET,
        .msg = "usage.prompt_tokens is 6 but 5 were sent (did it add a BOS token?)",
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .n_usage = 1,
        .usage_pt = 6,
        .usage_ct = 3,
    },
    {
        .name = "vLLM usage: completion_tokens 4 where 3 were streamed",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = VLLM_TOK(" Paris", 3681, -0.2459, 278, -2.0312, 0, "null")
            VLLM_TOK(",", 29892, -0.6931, 29889, -0.9163, 6, "null")
            VLLM_TOK(" the", 278, -1.204, 263, -1.6094, 7, "\"length\"")
            "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
            "\"text_completion\",\"created\":1736864213,\"model\":\"meta-llama/Llama-2-7b-hf\","
            "\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":9,"
            "\"completion_tokens\":4}}\n\n"
            "data: [DONE]\n\n",
        .st = ASSAY_ERR_NET,
        .msg = "usage.completion_tokens is 4 but 3 tokens were streamed",
        .n_tok = 3,
        .tok = {3681, 29892, 278},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 4,
    },
    {
        .name = "vLLM: its EOS (2) is the stop token, finish_reason \"stop\" on that chunk",
        .api = ASSAY_OPENAI_API_V1,
        .req = {5, 4, 2, 2, 32000},
        .text = VLLM_TOK(" Paris", 3681, -0.2459, 278, -2.0312, 0, "null")
            VLLM_TOK("", 2, -0.0513, 29889, -3.2188, 6, "\"stop\"")
            "data: [DONE]\n\n",
        .reason = ASSAY_FINISH_STOP,
        .n_tok = 2,
        .tok = {3681, 2},
        .check_lp = true,
        .lp = {-0.2459, -0.0513},
    },
    {
        .name = "vLLM: a -inf logprob clamped to -9999.0",
        .api = ASSAY_OPENAI_API_V1,
        .req = {5, 1, NONE, NONE, 32000},
        .text = VLLM_TOK(" Paris", 3681, -9999.0, 278, -9999.0, 0, "\"length\"")
            "data: [DONE]\n\n",
        .reason = ASSAY_FINISH_LENGTH,
        .n_tok = 1,
        .tok = {3681},
        .check_lp = true,
        .lp = {-9999.0},
        .check_top = true,
        .n_top = {2},
        .top_id = {3681},
        .top_lp = {-9999.0},
    },
    {
        .name = "vLLM: a step without logprobs (token_logprobs [null], top_logprobs [null])",
        .api = ASSAY_OPENAI_API_V1,
        .req = {5, 1, NONE, NONE, 32000},
        .text = "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
                "\"text_completion\",\"created\":1736864213,\"model\":"
                "\"meta-llama/Llama-2-7b-hf\",\"choices\":[{\"index\":0,\"text\":\" Paris\","
                "\"logprobs\":{\"text_offset\":[0],\"token_logprobs\":[null],"
                "\"tokens\":[\"token_id:3681\"],\"top_logprobs\":[null]},"
                "\"finish_reason\":\"length\",\"stop_reason\":null,\"prompt_token_ids\":null,"
                "\"token_ids\":null}],\"usage\":null}\n\n"
                "data: [DONE]\n\n",
        .reason = ASSAY_FINISH_LENGTH,
        .n_tok = 1,
        .tok = {3681},
        .check_lp = true,
        .lp = {NAN},
        .check_top = true,
        .n_top = {0},
    },
    {
        .name = "vLLM: a streaming error object",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = VLLM_TOK(" Paris", 3681, -0.2459, 278, -2.0312, 0, "null")
            "data: {\"error\": {\"message\": \"The decoder prompt (length 4097) is longer "
            "than the maximum model length of 4096.\", \"type\": \"BadRequestError\", "
            "\"param\": null, \"code\": 400}}\n\n"
            "data: [DONE]\n\n",
        .st = ASSAY_ERR_NET,
        .msg = "the server reported an error mid-stream: The decoder prompt (length 4097)",
        .n_tok = 1,
        .tok = {3681},
    },
    {
        .name = "vLLM without return_tokens_as_token_ids: tokens are text",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
                "\"text_completion\",\"created\":1736864213,\"model\":"
                "\"meta-llama/Llama-2-7b-hf\",\"choices\":[{\"index\":0,\"text\":\" Paris\","
                "\"logprobs\":{\"text_offset\":[0],\"token_logprobs\":[-0.2459],"
                "\"tokens\":[\" Paris\"],\"top_logprobs\":[{\" Paris\":-0.2459,\" the\":-2.0312}]},"
                "\"finish_reason\":null,\"stop_reason\":null}],\"usage\":null}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "logprobs.tokens[0] is not \"token_id:N\" (ask the server for token ids)",
    },
    {
        .name = "vLLM: a token after \"data: [DONE]\"",
        .api = ASSAY_OPENAI_API_V1,
        .req = {5, 1, NONE, NONE, 32000},
        .text = VLLM_TOK(" Paris", 3681, -0.2459, 278, -2.0312, 0, "\"length\"")
            "data: [DONE]\n\n"
            VLLM_TOK(",", 29892, -0.6931, 29889, -0.9163, 6, "null"),
        .st = ASSAY_ERR_NET,
        .msg = "data after \"[DONE]\": {\"id\":\"cmpl-6f0a1b2c",
        .n_tok = 1,
        .tok = {3681},
    },
    {
        .name = "vLLM: a second finish_reason after the end",
        .api = ASSAY_OPENAI_API_V1,
        .req = {5, 1, NONE, NONE, 32000},
        .text = VLLM_TOK(" Paris", 3681, -0.2459, 278, -2.0312, 0, "\"length\"")
            "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
            "\"text_completion\",\"created\":1736864213,\"model\":\"meta-llama/Llama-2-7b-hf\","
            "\"choices\":[{\"index\":0,\"text\":\"\",\"logprobs\":null,"
            "\"finish_reason\":\"length\",\"stop_reason\":null}],\"usage\":null}\n\n",
        .st = ASSAY_ERR_NET,
        .msg = "a second finish_reason after the end",
        .n_tok = 1,
        .tok = {3681},
    },
    {
        .name = "vLLM: a token after its EOS, which was the stop token",
        .api = ASSAY_OPENAI_API_V1,
        .req = {5, 4, 2, 2, 32000},
        .text = VLLM_TOK("", 2, -0.0513, 29889, -3.2188, 0, "null")
            VLLM_TOK(" Paris", 3681, -0.2459, 278, -2.0312, 0, "\"stop\""),
        .st = ASSAY_ERR_NET,
        .msg = "token 3681 after the end-of-generation token 2 at position 0",
        .n_tok = 1,
        .tok = {2},
    },

    /* ---- SGLang, POST /v1/completions --------------------------------- */
    {
        .name = "SGLang stream with logprobs: tokens are the tokens' text, no ids",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = SGLANG_TOK(" Paris", -0.2459, " the", -2.0312, "null"),
        .st = ASSAY_ERR_PARSE,
        .msg = "logprobs.tokens[0] is not \"token_id:N\" (ask the server for token ids)",
    },
    {
        .name = "SGLang stream without logprobs: text without token ids",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "data: {\"id\":\"8f4e1c2a9b7d4e0f8a6c5b3d2e1f0a9b\",\"object\":"
                "\"text_completion\",\"created\":1736864213,\"model\":\"default\","
                "\"choices\":[{\"index\":0,\"text\":\" Paris\",\"logprobs\":null,"
                "\"finish_reason\":null,\"matched_stop\":null}],\"usage\":null}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "the server sent text without token ids (no logprobs in the chunk)",
    },
    {
        .name = "SGLang: a streaming error object",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "data: {\"error\": {\"object\": \"error\", \"message\": \"Generation aborted.\", "
                "\"type\": \"SERVICE_UNAVAILABLE\", \"param\": null, \"code\": 503}}\n\n"
                "data: [DONE]\n\n",
        .st = ASSAY_ERR_NET,
        .msg = "the server reported an error mid-stream: Generation aborted.",
    },

    /* ---- TGI ----------------------------------------------------------- */
    {
        .name = "TGI /v1/completions stream: text, logprobs null",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = TGI_CHUNK(" Paris", "") TGI_CHUNK(",", "") TGI_CHUNK(" the", "length"),
        .st = ASSAY_ERR_PARSE,
        .msg = "the server sent text without token ids (no logprobs in the chunk)",
    },
    {
        .name = "TGI /v1/completions: a chunk of empty text, its finish_reason \"\" read as the end",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = TGI_CHUNK("", ""),
        .st = ASSAY_ERR_NET,
        .msg = "the server ended the stream early (finish_reason \"\")",
    },
    {
        .name = "TGI /generate_stream read as llama.cpp's /completion: no \"tokens\"",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = "data:{\"index\":1,\"token\":{\"id\":3681,\"text\":\" Paris\",\"logprob\":-0.2459,"
                "\"special\":false},\"generated_text\":null,\"details\":null,"
                "\"top_tokens\":null}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "a chunk without \"tokens\" (does the server support \"return_tokens\"?)",
    },
    {
        .name = "TGI: an error event ({\"error\": string, \"error_type\"})",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "data:{\"error\":\"Request failed during generation: Server error: CUDA out of "
                "memory.\",\"error_type\":\"generation\"}\n\n",
        .st = ASSAY_ERR_NET,
        .msg = "the server reported an error mid-stream: {\"error\":\"Request failed during "
               "generation: Server error: CUDA out of memory.\",\"error_type\":\"generation\"}",
    },

    /* ---- malformed: real chunks with one thing broken ------------------ */
    {
        .name = "malformed llama.cpp chunk: \"tokens\" a number, not an array",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = "data: {\"index\":0,\"content\":\" Paris\",\"tokens\":3681,\"stop\":false,"
                "\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":5}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "\"tokens\" is not an array",
    },
    {
        .name = "malformed llama.cpp chunk: a token id as a string",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = "data: {\"index\":0,\"content\":\" Paris\",\"tokens\":[\"3681\"],\"stop\":false,"
                "\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":5}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "\"tokens\"[0] is not an integer",
    },
    {
        .name = "malformed llama.cpp chunk: a token id with a fraction",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = "data: {\"index\":0,\"content\":\" Paris\",\"tokens\":[3681.5],\"stop\":false,"
                "\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":5}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "\"tokens\"[0] is not an integer",
    },
    {
        .name = "malformed llama.cpp chunk: a token id beyond 32 bits",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = "data: {\"index\":0,\"content\":\" Paris\",\"tokens\":[4294967296],"
                "\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":1,"
                "\"tokens_evaluated\":5}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "\"tokens\"[0] is not an integer",
    },
    {
        .name = "malformed llama.cpp chunk: the token id equal to the vocabulary size",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = "data: {\"index\":0,\"content\":\"\",\"tokens\":[32000],\"stop\":false,"
                "\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":5}\n\n",
        .st = ASSAY_ERR_NET,
        .msg = "token id 32000 at position 0 is outside the vocabulary (32000 ids)",
    },
    {
        .name = "malformed llama.cpp chunk: a negative token id",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = "data: {\"index\":0,\"content\":\"\",\"tokens\":[-1],\"stop\":false,"
                "\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":5}\n\n",
        .st = ASSAY_ERR_NET,
        .msg = "token id -1 at position 0 is outside the vocabulary (32000 ids)",
    },
    {
        .name = "malformed llama.cpp chunk: completion_probabilities names another token",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = "data: {\"index\":0,\"content\":\" Paris\",\"tokens\":[3681],\"stop\":false,"
                "\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":5,"
                "\"completion_probabilities\":[{\"id\":278,\"token\":\" the\","
                "\"bytes\":[32,116,104,101],\"logprob\":-2.0312,\"top_logprobs\":[]}]}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "\"tokens\" says 3681 but completion_probabilities says 278",
    },
    {
        .name = "malformed llama.cpp chunk: two tokens, one completion_probabilities entry",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = "data: {\"index\":0,\"content\":\" Paris,\",\"tokens\":[3681,29892],"
                "\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":2,\"tokens_evaluated\":5,"
                "\"completion_probabilities\":[{\"id\":3681,\"token\":\" Paris\","
                "\"bytes\":[32,80,97,114,105,115],\"logprob\":-0.2459,"
                "\"top_logprobs\":[]}]}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "a chunk with 2 tokens but 1 completion_probabilities",
    },
    {
        /* Not rejected: a logprob that is not a number reads as none (NaN),
         * like vLLM's null; only the token goes on. */
        .name = "malformed llama.cpp chunk: the logprob a string (read as no logprob)",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = {5, 1, NONE, NONE, 32000},
        .text = "data: {\"index\":0,\"content\":\" Paris\",\"tokens\":[3681],\"stop\":false,"
                "\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":5,"
                "\"completion_probabilities\":[{\"id\":3681,\"token\":\" Paris\","
                "\"bytes\":[32,80,97,114,105,115],\"logprob\":\"-0.2459\","
                "\"top_logprobs\":[{\"id\":3681,\"token\":\" Paris\","
                "\"bytes\":[32,80,97,114,105,115],\"logprob\":\"-0.2459\"},"
                "{\"id\":278,\"token\":\" the\",\"bytes\":[32,116,104,101],"
                "\"logprob\":-2.0312}]}]}\n\n"
            LLAMA_FINAL(1, 5, "false", "limit", LLAMA_GS(1, "true", "0.0", LLAMA_SAMPLERS)),
        .reason = ASSAY_FINISH_LENGTH,
        .n_tok = 1,
        .tok = {3681},
        .check_lp = true,
        .lp = {NAN},
        .check_top = true,
        .n_top = {1},
        .top_id = {278},
        .top_lp = {-2.0312},
        .n_usage = 1,
        .usage_pt = 5,
        .usage_ct = 1,
    },
    {
        .name = "malformed llama.cpp /v1 chunk: logprobs.content[] without an id",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "data: {\"choices\":[{\"text\":\" Paris\",\"index\":0,\"logprobs\":{\"content\":[{"
                "\"token\":\" Paris\",\"bytes\":[32,80,97,114,105,115],\"logprob\":-0.2459,"
                "\"top_logprobs\":[]}]},\"finish_reason\":null}],\"created\":1736864213,"
                "\"model\":\"gpt-3.5-turbo\",\"object\":\"text_completion\","
                "\"id\":\"chatcmpl-pR9EtWvnTlPoCsZZ5GxJrQgKwBqHzCxo\"}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "logprobs.content[] without an integer \"id\"",
    },
    {
        .name = "malformed vLLM chunk: \"token_id:\" without a number",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
                "\"text_completion\",\"created\":1736864213,\"model\":"
                "\"meta-llama/Llama-2-7b-hf\",\"choices\":[{\"index\":0,\"text\":\" Paris\","
                "\"logprobs\":{\"text_offset\":[0],\"token_logprobs\":[-0.2459],"
                "\"tokens\":[\"token_id:\"],\"top_logprobs\":[null]},\"finish_reason\":null,"
                "\"stop_reason\":null}],\"usage\":null}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "logprobs.tokens[0] is not \"token_id:N\"",
    },
    {
        .name = "malformed vLLM chunk: \"token_id:99999999999\" beyond 32 bits",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
                "\"text_completion\",\"created\":1736864213,\"model\":"
                "\"meta-llama/Llama-2-7b-hf\",\"choices\":[{\"index\":0,\"text\":\" Paris\","
                "\"logprobs\":{\"text_offset\":[0],\"token_logprobs\":[-0.2459],"
                "\"tokens\":[\"token_id:99999999999\"],\"top_logprobs\":[null]},"
                "\"finish_reason\":null,\"stop_reason\":null}],\"usage\":null}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "logprobs.tokens[0] is not \"token_id:N\"",
    },
    {
        .name = "malformed vLLM chunk: \"token_id:32000\" outside the vocabulary",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = VLLM_TOK("", 32000, -0.2459, 278, -2.0312, 0, "null"),
        .st = ASSAY_ERR_NET,
        .msg = "token id 32000 at position 0 is outside the vocabulary (32000 ids)",
    },
    {
        .name = "malformed vLLM chunk: no \"choices\"",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
                "\"text_completion\",\"created\":1736864213,\"model\":"
                "\"meta-llama/Llama-2-7b-hf\"}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "a chunk without \"choices\"",
    },
    {
        .name = "malformed vLLM chunk: two choices (n 2)",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
                "\"text_completion\",\"created\":1736864213,\"model\":"
                "\"meta-llama/Llama-2-7b-hf\",\"choices\":[{\"index\":0,\"text\":\"\","
                "\"logprobs\":null,\"finish_reason\":null},{\"index\":1,\"text\":\"\","
                "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "a chunk with 2 choices (one was asked for)",
    },
    {
        .name = "malformed vLLM chunk: a choice with index 1",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
                "\"text_completion\",\"created\":1736864213,\"model\":"
                "\"meta-llama/Llama-2-7b-hf\",\"choices\":[{\"index\":1,\"text\":\"\","
                "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "a choice with index 1",
    },
    {
        .name = "malformed: a chunk cut short (not JSON)",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "data: {\"id\":\"cmpl-6f0a1b2c3d4e4f5a8b9c0d1e2f3a4b5c\",\"object\":"
                "\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" Par\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "malformed JSON in the event stream (event ending at byte 114)",
    },
    {
        .name = "malformed: a JSON array where a chunk object belongs",
        .api = ASSAY_OPENAI_API_COMPLETION,
        .req = REQ_5_3,
        .text = "data: [3681,29892]\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "malformed JSON in the event stream (event ending at byte 19): [3681,29892]",
    },
    {
        .name = "malformed: an event type other than message or error",
        .api = ASSAY_OPENAI_API_V1,
        .req = REQ_5_3,
        .text = "event: ping\ndata: {}\n\n",
        .st = ASSAY_ERR_PARSE,
        .msg = "unexpected SSE event type \"ping\"",
    },
    {
        .name = "malformed non-streamed body: not JSON",
        .api = ASSAY_OPENAI_API_V1,
        .body = true,
        .req = REQ_5_3,
        .text = "<html><body>502 Bad Gateway</body></html>",
        .st = ASSAY_ERR_PARSE,
        .msg = "malformed JSON in the non-streamed response: <html><body>502 Bad Gateway",
    },
};

#define N_ROWS (sizeof k_rows / sizeof k_rows[0])

/* ------------------------------------------------------------------ */
/* Reading a row                                                       */
/* ------------------------------------------------------------------ */

struct outcome {
    enum assay_status st;
    char msg[ASSAY_OPENAI_MSG_MAX];
    enum assay_finish_reason reason;
    int n_tok;
    int32_t tok[MAX_TOK];
    int32_t index[MAX_TOK];
    double lp[MAX_TOK];
    int32_t n_top[MAX_TOK];
    int32_t top_id[MAX_TOK];
    double top_lp[MAX_TOK];
    int n_usage;
    int64_t usage_pt, usage_ct;
    bool overflow; /* more tokens than the row has room for */
};

static enum assay_status rec_token(void *ctx, int32_t index, int32_t token, double logprob,
                                   const struct assay_openai_logprob *top, int32_t n_top)
{
    struct outcome *o = ctx;
    if (o->n_tok >= MAX_TOK) {
        o->overflow = true;
        return ASSAY_ERR_FULL;
    }
    o->tok[o->n_tok] = token;
    o->index[o->n_tok] = index;
    o->lp[o->n_tok] = logprob;
    o->n_top[o->n_tok] = n_top;
    o->top_id[o->n_tok] = n_top > 0 ? top[0].token : -1;
    o->top_lp[o->n_tok] = n_top > 0 ? top[0].logprob : NAN;
    o->n_tok++;
    return ASSAY_OK;
}

static void rec_usage(void *ctx, int64_t prompt_tokens, int64_t completion_tokens)
{
    struct outcome *o = ctx;
    o->n_usage++;
    o->usage_pt = prompt_tokens;
    o->usage_ct = completion_tokens;
}

/* Read a row's text the way the adapter does: server-sent events through
 * the strict SSE parser, each to assay_openai_read_event until one fails or
 * the stop token was delivered; or the body to assay_openai_read_body; then
 * assay_openai_stream_finish. */
static void read_row(const struct row *r, struct outcome *o)
{
    memset(o, 0, sizeof *o);
    struct assay_request req = {
        .id = 1,
        .prompt = NULL,
        .prompt_len = r->req.prompt_len,
        .max_tokens = r->req.max_tokens,
        .stop_token = r->req.stop_token,
        .sampling = {0.0f, 0, 1.0f, false, 0},
    };
    if (r->sampled) {
        req.sampling = (struct assay_sampling){0.8f, 40, 0.95f, true, 1234};
    }
    struct assay_openai_stream s;
    assay_openai_stream_init(&s, r->api, r->req.vocab, r->req.eos_token, &req);
    if (r->secret != NULL) {
        s.secret = r->secret;
        s.secret_len = strlen(r->secret);
    }
    const struct assay_openai_chunk_sink sink = {rec_token, rec_usage, o};
    size_t len = strlen(r->text);
    o->st = ASSAY_OK;
    if (r->body) {
        o->st = assay_openai_read_body(&s, r->text, len, &sink, o->msg, sizeof o->msg);
    } else {
        struct assay_sse_limits lim = assay_sse_default_limits();
        lim.strict = true;
        struct assay_sse_parser p;
        assert_int_equal(assay_sse_init(&p, &lim), ASSAY_OK);
        size_t off = 0;
        while (off < len && o->st == ASSAY_OK && !s.stopped) {
            size_t used = 0;
            struct assay_sse_event ev;
            enum assay_sse_result res = assay_sse_feed(&p, r->text + off, len - off, &used, &ev);
            off += used;
            if (res == ASSAY_SSE_ERROR) {
                fail_msg("%s: the row is not valid SSE: %s", r->name,
                         assay_sse_last_error(&p)->message);
            }
            if (res == ASSAY_SSE_NEED_MORE) {
                break;
            }
            o->st = assay_openai_read_event(&s, &ev, &sink, o->msg, sizeof o->msg);
        }
        if (o->st == ASSAY_OK && !s.stopped && assay_sse_finish(&p) != ASSAY_OK) {
            fail_msg("%s: the row ends inside an event", r->name);
        }
        assay_sse_free(&p);
    }
    o->reason = ASSAY_FINISH_ERROR;
    if (o->st == ASSAY_OK) {
        o->st = assay_openai_stream_finish(&s, !r->body, &o->reason, o->msg, sizeof o->msg);
    }
}

/* |got - want| <= atol + rtol |want|, NaN equal to NaN: cJSON reads a
 * number with strtod as the compiler reads the row's literal, so the two
 * agree to the last bit; the tolerance only forgives a reader that rounds
 * once more. */
static bool same_double(double got, double want)
{
    const double atol = 0.0, rtol = 1e-12;
    if (isnan(want) || isnan(got)) {
        return isnan(want) && isnan(got);
    }
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* Whether the outcome is what the row says; if not, why (into why). */
static bool row_matches(const struct row *r, const struct outcome *o, char *why, size_t size)
{
    why[0] = '\0';
    if (o->overflow) {
        snprintf(why, size, "more than %d tokens", MAX_TOK);
        return false;
    }
    if (o->st != r->st) {
        snprintf(why, size, "status %s (\"%s\"), expected %s", assay_status_str(o->st), o->msg,
                 assay_status_str(r->st));
        return false;
    }
    if (r->st != ASSAY_OK) {
        if (r->msg == NULL || o->msg[0] == '\0' || strstr(o->msg, r->msg) == NULL) {
            snprintf(why, size, "message \"%s\", expected it to hold \"%s\"", o->msg,
                     r->msg != NULL ? r->msg : "(the row names none)");
            return false;
        }
        if (r->secret != NULL && strstr(o->msg, r->secret) != NULL) {
            snprintf(why, size, "the message shows the key: \"%s\"", o->msg);
            return false;
        }
    } else if (o->reason != r->reason || r->reason == ASSAY_FINISH_NONE) {
        snprintf(why, size, "finish %s, expected %s", assay_finish_reason_str(o->reason),
                 assay_finish_reason_str(r->reason));
        return false;
    }
    if (o->n_tok != r->n_tok) {
        snprintf(why, size, "%d tokens, expected %d", o->n_tok, r->n_tok);
        return false;
    }
    for (int i = 0; i < o->n_tok; i++) {
        if (o->tok[i] != r->tok[i] || o->index[i] != i) {
            snprintf(why, size, "token %d is %d at index %d, expected %d at %d", i,
                     (int)o->tok[i], (int)o->index[i], (int)r->tok[i], i);
            return false;
        }
        if (r->check_lp && !same_double(o->lp[i], r->lp[i])) {
            snprintf(why, size, "token %d: logprob %.17g, expected %.17g", i, o->lp[i], r->lp[i]);
            return false;
        }
        if (r->check_top && o->n_top[i] != r->n_top[i]) {
            snprintf(why, size, "token %d: %d top logprobs, expected %d", i, (int)o->n_top[i],
                     (int)r->n_top[i]);
            return false;
        }
        if (r->check_top && r->n_top[i] > 0 &&
            (o->top_id[i] != r->top_id[i] || !same_double(o->top_lp[i], r->top_lp[i]))) {
            snprintf(why, size, "token %d: first alternative %d (%.17g), expected %d (%.17g)", i,
                     (int)o->top_id[i], o->top_lp[i], (int)r->top_id[i], r->top_lp[i]);
            return false;
        }
    }
    if (o->n_usage != r->n_usage ||
        (r->n_usage > 0 && (o->usage_pt != r->usage_pt || o->usage_ct != r->usage_ct))) {
        snprintf(why, size, "usage reported %d times, last (%lld, %lld); expected %d, (%lld, %lld)",
                 o->n_usage, (long long)o->usage_pt, (long long)o->usage_ct, r->n_usage,
                 (long long)r->usage_pt, (long long)r->usage_ct);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */
/* ------------------------------------------------------------------ */

/* Every row comes out as it says. */
static void test_rows(void **state)
{
    (void)state;
    int n_bad = 0;
    for (size_t i = 0; i < N_ROWS; i++) {
        struct outcome o;
        char why[1024];
        read_row(&k_rows[i], &o);
        if (!row_matches(&k_rows[i], &o, why, sizeof why)) {
            printf("# row %zu, %s: %s\n", i, k_rows[i].name, why);
            n_bad++;
        }
    }
    printf("# %zu rows read\n", N_ROWS);
    assert_int_equal(n_bad, 0);
}

/* Each row's expectations, changed, no longer match: the status, the
 * number of tokens, and for a failing row its message. */
static void test_rows_can_fail(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_ROWS; i++) {
        struct outcome o;
        char why[1024];
        read_row(&k_rows[i], &o);
        struct row r = k_rows[i];
        r.st = k_rows[i].st == ASSAY_OK ? ASSAY_ERR_PARSE : ASSAY_OK;
        r.msg = "a message no reader writes";
        r.reason = ASSAY_FINISH_LENGTH;
        if (row_matches(&r, &o, why, sizeof why)) {
            fail_msg("row %zu, %s: matches with another status", i, k_rows[i].name);
        }
        r = k_rows[i];
        r.n_tok = k_rows[i].n_tok + 1;
        if (row_matches(&r, &o, why, sizeof why)) {
            fail_msg("row %zu, %s: matches with another token count", i, k_rows[i].name);
        }
        if (k_rows[i].st != ASSAY_OK) {
            r = k_rows[i];
            r.msg = "a message no reader writes";
            if (row_matches(&r, &o, why, sizeof why)) {
                fail_msg("row %zu, %s: matches with another message", i, k_rows[i].name);
            }
        }
    }
}

/* Each server the table claims has rows, and some rows are rejected. */
static void test_table_covers_servers(void **state)
{
    (void)state;
    static const char *const servers[] = {"llama.cpp /completion", "llama.cpp /v1", "vLLM",
                                          "SGLang", "TGI", "malformed"};
    for (size_t k = 0; k < sizeof servers / sizeof servers[0]; k++) {
        int n = 0;
        for (size_t i = 0; i < N_ROWS; i++) {
            n += strncmp(k_rows[i].name, servers[k], strlen(servers[k])) == 0;
        }
        if (n < 2) {
            fail_msg("only %d rows for %s", n, servers[k]);
        }
    }
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_rows_can_fail),
        cmocka_unit_test(test_table_covers_servers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
