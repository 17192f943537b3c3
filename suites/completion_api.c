/*
 * completion_api.c - llama.cpp's POST /completion, read and written (see
 * completion_api.h). Called once per request to read it, and once per
 * token to write its event; the writing appends to a buffer the caller
 * reuses, so a stream allocates only while its buffer grows.
 *
 * Where the shapes come from: llama.cpp's tools/server (server-task.cpp's
 * to_json_non_oaicompat for partial and final results, task_params::to_json
 * for generation_settings, server-schema.cpp for the request's fields), as
 * adapters/openai.c documents them, read to learn, not copied.
 */
#include "completion_api.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's "random seed" (LLAMA_DEFAULT_SEED), echoed for unseeded requests. */
#define RANDOM_SEED 4294967295.0

/* ------------------------------------------------------------------ */
/* The buffer                                                          */
/* ------------------------------------------------------------------ */

void sbuf_printf(struct sbuf *b, const char *fmt, ...)
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
        size_t cap = b->cap > 0 ? b->cap : 1024;
        while (cap < b->len + (size_t)n + 1) {
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            if (b->p != NULL) {
                b->p[b->len] = '\0';
            }
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void sbuf_json_string(struct sbuf *b, const char *s)
{
    sbuf_printf(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\') {
            sbuf_printf(b, "\\%c", *c);
        } else if (*c < 0x20 || *c == 0x7f) {
            sbuf_printf(b, "\\u%04x", *c);
        } else {
            sbuf_printf(b, "%c", *c);
        }
    }
    sbuf_printf(b, "\"");
}

void sbuf_reset(struct sbuf *b)
{
    b->len = 0;
    b->oom = false;
    if (b->p != NULL) {
        b->p[0] = '\0';
    }
}

void sbuf_free(struct sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* A JSON number, or null for what JSON cannot say (NaN, infinities). */
static void num(struct sbuf *b, double v)
{
    if (isfinite(v)) {
        sbuf_printf(b, "%.9g", v);
    } else {
        sbuf_printf(b, "null");
    }
}

/* ------------------------------------------------------------------ */
/* Reading a request                                                   */
/* ------------------------------------------------------------------ */

/* Where a refusal is written. */
struct refusal {
    char *msg;
    size_t size;
};

static int refuse(const struct refusal *rf, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(const struct refusal *rf, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rf->msg, rf->size, fmt, ap);
    va_end(ap);
    return status;
}

/* A short description of a JSON value, for "got ..." in messages. */
static const char *describe(const cJSON *v, char *buf, size_t size)
{
    if (cJSON_IsNumber(v)) {
        snprintf(buf, size, "%.9g", v->valuedouble);
    } else if (cJSON_IsString(v)) {
        snprintf(buf, size, "a string");
    } else if (cJSON_IsBool(v)) {
        snprintf(buf, size, "%s", cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsArray(v)) {
        snprintf(buf, size, "an array of %d", cJSON_GetArraySize(v));
    } else if (cJSON_IsObject(v)) {
        snprintf(buf, size, "an object");
    } else {
        snprintf(buf, size, "null");
    }
    return buf;
}

/* An integer-valued JSON number in [lo, hi]. */
static bool get_int(const cJSON *v, double lo, double hi, int64_t *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        v->valuedouble != floor(v->valuedouble)) {
        return false;
    }
    *out = (int64_t)v->valuedouble;
    return true;
}

/* The samplers that switch off at some value, with the value range that
 * does; an echo slot in the request for each. */
enum off_when { OFF_LE0, OFF_GE1, OFF_EQ0, OFF_EQ1 };

static const struct {
    const char *name;
    size_t off; /* of its float in struct completion_request */
    enum off_when off_when;
    float dflt; /* when absent (what the engine applies: off) */
    const char *missing; /* what the engine lacks */
} k_off_floats[] = {
    {"min_p", offsetof(struct completion_request, min_p), OFF_LE0, 0.0f, "min-p filter"},
    {"typical_p", offsetof(struct completion_request, typical_p), OFF_GE1, 1.0f,
     "typical sampling"},
    {"repeat_penalty", offsetof(struct completion_request, repeat_penalty), OFF_EQ1, 1.0f,
     "repetition penalty"},
    {"presence_penalty", offsetof(struct completion_request, presence_penalty), OFF_EQ0, 0.0f,
     "presence penalty"},
    {"frequency_penalty", offsetof(struct completion_request, frequency_penalty), OFF_EQ0, 0.0f,
     "frequency penalty"},
    {"dry_multiplier", offsetof(struct completion_request, dry_multiplier), OFF_LE0, 0.0f,
     "DRY sampler"},
    {"xtc_probability", offsetof(struct completion_request, xtc_probability), OFF_LE0, 0.0f,
     "XTC sampler"},
    {"top_n_sigma", offsetof(struct completion_request, top_n_sigma), OFF_LE0, -1.0f,
     "top-n-sigma filter"},
    {"dynatemp_range", offsetof(struct completion_request, dynatemp_range), OFF_LE0, 0.0f,
     "dynamic temperature"},
};

static const char *const k_off_text[] = {"0 or less", "1 or more", "0", "1"};

static bool is_off(double v, enum off_when w)
{
    switch (w) {
    case OFF_LE0: return v <= 0.0;
    case OFF_GE1: return v >= 1.0;
    case OFF_EQ0: return v == 0.0;
    case OFF_EQ1: return v == 1.0;
    }
    return false;
}

/* llama.cpp's sampler names (common_sampler_type_to_str); the ones the
 * engine does not have are accepted only because their fields are checked
 * to be off. */
static const char *const k_sampler_names[] = {
    "penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature",
};

static int read_prompt(const cJSON *v, const struct completion_limits *lim,
                       struct completion_request *r, const struct refusal *rf)
{
    char got[64];
    if (cJSON_IsString(v)) {
        return refuse(rf, 400,
                      "\"prompt\": text needs a tokenizer, which this server does not have; "
                      "send an array of token ids");
    }
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n <= 0) {
        return refuse(rf, 400, "\"prompt\": expected a non-empty array of token ids, got %s",
                      describe(v, got, sizeof got));
    }
    if (lim->n_ctx > 0 && n > lim->n_ctx) {
        return refuse(rf, 400, "\"prompt\": %d tokens do not fit the context of %d", n,
                      (int)lim->n_ctx);
    }
    r->prompt = malloc((size_t)n * sizeof *r->prompt);
    if (r->prompt == NULL) {
        return refuse(rf, 500, "out of memory for a prompt of %d tokens", n);
    }
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, v)
    {
        int64_t id;
        if (!get_int(t, -2147483648.0, 2147483647.0, &id)) {
            return refuse(rf, 400, "\"prompt\"[%d]: expected a token id, got %s", i,
                          describe(t, got, sizeof got));
        }
        if (id < 0 || id >= lim->vocab) {
            return refuse(rf, 400, "\"prompt\"[%d] = %lld is outside the vocabulary (0..%d)", i,
                          (long long)id, (int)lim->vocab - 1);
        }
        r->prompt[i++] = (int32_t)id;
    }
    r->prompt_len = n;
    return 0;
}

/* "samplers": known names only; *listed gets a bit per filter named
 * (1 temperature, 2 top_k, 4 top_p). */
static int read_samplers(const cJSON *v, unsigned *listed, const struct refusal *rf)
{
    char got[64];
    if (!cJSON_IsArray(v)) {
        return refuse(rf, 400, "\"samplers\": expected an array of sampler names, got %s",
                      describe(v, got, sizeof got));
    }
    int i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, v)
    {
        bool known = false;
        for (size_t k = 0; cJSON_IsString(s) && k < sizeof k_sampler_names / sizeof *k_sampler_names;
             k++) {
            known = known || strcmp(s->valuestring, k_sampler_names[k]) == 0;
        }
        if (!known) {
            return refuse(rf, 400,
                          "\"samplers\"[%d]: expected one of penalties, dry, top_n_sigma, top_k, "
                          "typ_p, top_p, min_p, xtc, temperature, got %s%.40s%s",
                          i, cJSON_IsString(s) ? "\"" : "",
                          cJSON_IsString(s) ? s->valuestring : describe(s, got, sizeof got),
                          cJSON_IsString(s) ? "\"" : "");
        }
        *listed |= strcmp(s->valuestring, "temperature") == 0   ? 1u
                   : strcmp(s->valuestring, "top_k") == 0       ? 2u
                   : strcmp(s->valuestring, "top_p") == 0       ? 4u
                                                                : 0u;
        i++;
    }
    return 0;
}

/* One field of the request. */
static int read_field(const cJSON *v, const struct completion_limits *lim,
                      struct completion_request *r, unsigned *seen, unsigned *listed,
                      int64_t *n_predict, int64_t *max_tokens, const struct refusal *rf)
{
    const char *k = v->string;
    char got[64];
    int64_t iv;
    for (size_t i = 0; i < sizeof k_off_floats / sizeof *k_off_floats; i++) {
        if (strcmp(k, k_off_floats[i].name) != 0) {
            continue;
        }
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
            return refuse(rf, 400, "\"%s\": expected a number, got %s", k,
                          describe(v, got, sizeof got));
        }
        if (!is_off(v->valuedouble, k_off_floats[i].off_when)) {
            return refuse(rf, 400,
                          "\"%s\": %.9g is not supported (the engine has no %s); send %s to "
                          "switch it off",
                          k, v->valuedouble, k_off_floats[i].missing,
                          k_off_text[k_off_floats[i].off_when]);
        }
        *(float *)(void *)((char *)r + k_off_floats[i].off) = (float)v->valuedouble;
        return 0;
    }
    if (strcmp(k, "prompt") == 0) {
        *seen |= 1u;
        return read_prompt(v, lim, r, rf);
    }
    if (strcmp(k, "n_predict") == 0 || strcmp(k, "max_tokens") == 0) {
        if (!get_int(v, -1.0, 2147483647.0, &iv)) {
            return refuse(rf, 400, "\"%s\": expected -1 or a positive integer, got %s", k,
                          describe(v, got, sizeof got));
        }
        if (iv == 0) {
            return refuse(rf, 400, "\"%s\": 0 asks for no token; this server generates at least "
                                   "one (send -1 for up to the context)",
                          k);
        }
        *(strcmp(k, "n_predict") == 0 ? n_predict : max_tokens) = iv;
        return 0;
    }
    if (strcmp(k, "temperature") == 0) {
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
            return refuse(rf, 400, "\"temperature\": expected a number, got %s",
                          describe(v, got, sizeof got));
        }
        r->temperature = (float)v->valuedouble;
        return 0;
    }
    if (strcmp(k, "top_k") == 0) {
        if (!get_int(v, -2147483648.0, 2147483647.0, &iv)) {
            return refuse(rf, 400, "\"top_k\": expected an integer, got %s",
                          describe(v, got, sizeof got));
        }
        r->top_k = (int32_t)iv;
        return 0;
    }
    if (strcmp(k, "top_p") == 0) {
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || !(v->valuedouble > 0.0)) {
            return refuse(rf, 400, "\"top_p\": expected a number above 0 (1 or more: off), got %s",
                          describe(v, got, sizeof got));
        }
        r->top_p = (float)v->valuedouble;
        return 0;
    }
    if (strcmp(k, "seed") == 0) {
        if (!get_int(v, -1.0, RANDOM_SEED, &iv)) {
            return refuse(rf, 400,
                          "\"seed\": expected an integer from 0 to 4294967294 (or -1 or "
                          "4294967295 for a random seed), got %s",
                          describe(v, got, sizeof got));
        }
        r->sampling.seeded = iv >= 0 && (double)iv != RANDOM_SEED;
        r->sampling.seed = r->sampling.seeded ? (uint64_t)iv : 0;
        return 0;
    }
    if (strcmp(k, "samplers") == 0) {
        *seen |= 2u;
        return read_samplers(v, listed, rf);
    }
    bool *flag = strcmp(k, "stream") == 0          ? &r->stream
                 : strcmp(k, "return_tokens") == 0 ? &r->return_tokens
                 : strcmp(k, "ignore_eos") == 0    ? &r->ignore_eos
                                                   : NULL;
    bool ignored_flag = strcmp(k, "cache_prompt") == 0;
    if (flag != NULL || ignored_flag) {
        if (!cJSON_IsBool(v)) {
            return refuse(rf, 400, "\"%s\": expected true or false, got %s", k,
                          describe(v, got, sizeof got));
        }
        if (flag != NULL) {
            *flag = cJSON_IsTrue(v);
        }
        return 0;
    }
    if (strcmp(k, "post_sampling_probs") == 0) {
        if (!cJSON_IsFalse(v)) {
            return refuse(rf, 400, "\"post_sampling_probs\": only false is supported (the "
                                   "logprobs are those of the raw logits), got %s",
                          describe(v, got, sizeof got));
        }
        return 0;
    }
    if (strcmp(k, "n_probs") == 0) {
        if (!get_int(v, 0.0, 2147483647.0, &iv)) {
            return refuse(rf, 400, "\"n_probs\": expected an integer of 0 or more, got %s",
                          describe(v, got, sizeof got));
        }
        if (iv > 0 && !lim->logits) {
            return refuse(rf, 400, "\"n_probs\": the engine behind this server gives no logits, "
                                   "so no logprobs can be served; send 0");
        }
        r->n_probs = (int32_t)(iv < lim->vocab ? iv : lim->vocab);
        return 0;
    }
    if (strcmp(k, "model") == 0) {
        if (!cJSON_IsString(v)) {
            return refuse(rf, 400, "\"model\": expected a string, got %s",
                          describe(v, got, sizeof got));
        }
        return 0;
    }
    if (strcmp(k, "repeat_last_n") == 0) {
        if (!get_int(v, -1.0, 2147483647.0, &iv)) {
            return refuse(rf, 400, "\"repeat_last_n\": expected an integer of -1 or more, got %s",
                          describe(v, got, sizeof got));
        }
        r->repeat_last_n = (int32_t)iv;
        return 0;
    }
    if (strcmp(k, "mirostat") == 0 || strcmp(k, "min_keep") == 0 || strcmp(k, "n") == 0) {
        int64_t want = strcmp(k, "n") == 0 ? 1 : 0;
        if (!get_int(v, (double)want, (double)want, &iv)) {
            return refuse(rf, 400, "\"%s\": only %lld is supported%s, got %s", k,
                          (long long)want,
                          strcmp(k, "n") == 0 ? " (one completion per request)"
                          : strcmp(k, "mirostat") == 0 ? " (the engine has no mirostat)"
                                                       : " (no filter keeps a minimum here)",
                          describe(v, got, sizeof got));
        }
        return 0;
    }
    if (strcmp(k, "stop") == 0) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 0) {
            return refuse(rf, 400, "\"stop\": stop strings are not supported (the engine has no "
                                   "detokenizer); send [] or nothing, got %s",
                          describe(v, got, sizeof got));
        }
        return 0;
    }
    if (strcmp(k, "logit_bias") == 0) {
        if (!((cJSON_IsArray(v) || cJSON_IsObject(v)) && cJSON_GetArraySize(v) == 0)) {
            return refuse(rf, 400, "\"logit_bias\": biases are not supported (the engine has none); "
                                   "send [] or nothing, got %s",
                          describe(v, got, sizeof got));
        }
        return 0;
    }
    return refuse(rf, 400,
                  "\"%.64s\": not supported by this server (it serves prompt, n_predict, "
                  "temperature, top_k, top_p, seed, samplers, stream, return_tokens, n_probs, "
                  "ignore_eos, cache_prompt and the other samplers' off values)",
                  k);
}

/* Default values: llama.cpp's, with the samplers the engine lacks off. */
static void defaults(struct completion_request *r)
{
    memset(r, 0, sizeof *r);
    r->temperature = 0.8f;
    r->top_k = 40;
    r->top_p = 0.95f;
    r->repeat_last_n = 64;
    for (size_t i = 0; i < sizeof k_off_floats / sizeof *k_off_floats; i++) {
        *(float *)(void *)((char *)r + k_off_floats[i].off) = k_off_floats[i].dflt;
    }
    r->sampling = assay_sampling_greedy();
    r->stop_token = -1;
}

int completion_parse(const char *body, size_t len, const struct completion_limits *lim,
                     struct completion_request *out, char *msg, size_t msg_size)
{
    const struct refusal rf = {msg, msg_size};
    defaults(out);
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (root == NULL || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return refuse(&rf, 400, "the body is not a JSON object");
    }
    unsigned seen = 0, listed = 0;
    int64_t n_predict = -2, max_tokens = -2;
    int status = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, root)
    {
        status = read_field(v, lim, out, &seen, &listed, &n_predict, &max_tokens, &rf);
        if (status != 0) {
            break;
        }
    }
    cJSON_Delete(root);
    if (status == 0 && (seen & 1u) == 0) {
        status = refuse(&rf, 400, "\"prompt\": required (an array of token ids)");
    }
    /* A filter the request sets must be in its chain, or llama.cpp would
     * not apply it. */
    if (status == 0 && (seen & 2u) != 0) {
        if (out->temperature != 1.0f && (listed & 1u) == 0) {
            status = refuse(&rf, 400, "\"samplers\": \"temperature\" %.9g is set but "
                                      "\"temperature\" is not in the list",
                            (double)out->temperature);
        } else if (out->top_k > 0 && (listed & 2u) == 0) {
            status = refuse(&rf, 400, "\"samplers\": \"top_k\" %d is set but \"top_k\" is not in "
                                      "the list",
                            (int)out->top_k);
        } else if (out->top_p < 1.0f && (listed & 4u) == 0) {
            status = refuse(&rf, 400, "\"samplers\": \"top_p\" %.9g is set but \"top_p\" is not "
                                      "in the list",
                            (double)out->top_p);
        }
    }
    if (status == 0) {
        out->n_predict = (int32_t)(n_predict != -2 ? n_predict : max_tokens != -2 ? max_tokens : -1);
        int64_t room = (int64_t)lim->n_ctx - out->prompt_len;
        if (out->n_predict < 0 && room < 1) {
            status = refuse(&rf, 400, "\"n_predict\": -1, but the prompt of %d tokens leaves no "
                                      "room in the context of %d",
                            (int)out->prompt_len, (int)lim->n_ctx);
        } else if (out->n_predict > 0 && lim->n_ctx > 0 && out->n_predict > room) {
            status = refuse(&rf, 400, "\"n_predict\": %d tokens after a prompt of %d exceed the "
                                      "context of %d",
                            (int)out->n_predict, (int)out->prompt_len, (int)lim->n_ctx);
        }
        out->max_tokens = out->n_predict > 0 ? out->n_predict : (int32_t)room;
    }
    if (status != 0) {
        completion_request_free(out);
        return status;
    }
    out->sampling.temperature = out->temperature > 0.0f ? out->temperature : 0.0f;
    if (lim->temperature_scale > 0.0f) {
        out->sampling.temperature *= lim->temperature_scale;
    }
    out->sampling.top_k = out->top_k > 0 ? out->top_k : 0;
    out->sampling.top_p = out->top_p < 1.0f ? out->top_p : 1.0f;
    out->stop_token = !out->ignore_eos && lim->eos_token >= 0 ? lim->eos_token : -1;
    bool orders_agree = out->sampling.temperature <= 0.0f || out->sampling.top_k == 0 ||
                        out->sampling.top_p >= 1.0f;
    out->samplers_echo = lim->order == ASSAY_SAMPLING_SEQUENTIAL || orders_agree
                             ? "[\"temperature\",\"top_k\",\"top_p\"]"
                             : "[\"temperature\",\"top_k_top_p_joint\"]";
    return 0;
}

void completion_request_free(struct completion_request *r)
{
    free(r->prompt);
    r->prompt = NULL;
    r->prompt_len = 0;
}

/* ------------------------------------------------------------------ */
/* Writing the reply                                                   */
/* ------------------------------------------------------------------ */

/* One completion_probabilities entry. */
static void probs(struct sbuf *b, const struct completion_request *r, int32_t token,
                  double logprob, const struct engine_job_top *top)
{
    sbuf_printf(b, "{\"id\":%d,\"token\":\"\",\"bytes\":[],\"logprob\":", (int)token);
    num(b, logprob);
    sbuf_printf(b, ",\"top_logprobs\":[");
    for (int32_t k = 0, n = 0; k < r->n_probs; k++) {
        if (top[k].token < 0) {
            continue;
        }
        sbuf_printf(b, "%s{\"id\":%d,\"token\":\"\",\"bytes\":[],\"logprob\":", n++ > 0 ? "," : "",
                    (int)top[k].token);
        num(b, top[k].logprob);
        sbuf_printf(b, "}");
    }
    sbuf_printf(b, "]}");
}

void completion_token_event(struct sbuf *b, const struct completion_request *r,
                            const struct completion_outcome *o, int32_t i, int32_t token,
                            double logprob, const struct engine_job_top *top)
{
    sbuf_printf(b, "data: {\"index\":0,\"content\":\"\",\"tokens\":[");
    if (r->return_tokens) {
        sbuf_printf(b, "%d", (int)token);
    }
    sbuf_printf(b, "],\"stop\":false,\"id_slot\":%d,\"tokens_predicted\":%d,"
                   "\"tokens_evaluated\":%d",
                (int)o->slot, (int)i + 1, (int)r->prompt_len);
    if (r->n_probs > 0) {
        sbuf_printf(b, ",\"completion_probabilities\":[");
        probs(b, r, token, logprob, top);
        sbuf_printf(b, "]");
    }
    sbuf_printf(b, "}\n\n");
}

static void settings(struct sbuf *b, const struct completion_request *r)
{
    sbuf_printf(b, "{\"seed\":");
    if (r->sampling.seeded) {
        sbuf_printf(b, "%llu", (unsigned long long)r->sampling.seed);
    } else {
        sbuf_printf(b, "%.0f", RANDOM_SEED);
    }
    sbuf_printf(b, ",\"temperature\":");
    num(b, r->temperature);
    sbuf_printf(b, ",\"dynatemp_range\":");
    num(b, r->dynatemp_range);
    sbuf_printf(b, ",\"top_k\":%d,\"top_p\":", (int)r->top_k);
    num(b, r->top_p);
    sbuf_printf(b, ",\"min_p\":");
    num(b, r->min_p);
    sbuf_printf(b, ",\"top_n_sigma\":");
    num(b, r->top_n_sigma);
    sbuf_printf(b, ",\"xtc_probability\":");
    num(b, r->xtc_probability);
    sbuf_printf(b, ",\"typical_p\":");
    num(b, r->typical_p);
    sbuf_printf(b, ",\"repeat_last_n\":%d,\"repeat_penalty\":", (int)r->repeat_last_n);
    num(b, r->repeat_penalty);
    sbuf_printf(b, ",\"presence_penalty\":");
    num(b, r->presence_penalty);
    sbuf_printf(b, ",\"frequency_penalty\":");
    num(b, r->frequency_penalty);
    sbuf_printf(b, ",\"dry_multiplier\":");
    num(b, r->dry_multiplier);
    sbuf_printf(b,
                ",\"mirostat\":0,\"max_tokens\":%d,\"n_predict\":%d,\"n_keep\":0,"
                "\"ignore_eos\":%s,\"stream\":%s,\"n_probs\":%d,\"min_keep\":0,\"samplers\":%s,"
                "\"post_sampling_probs\":false}",
                (int)r->n_predict, (int)r->n_predict, r->ignore_eos ? "true" : "false",
                r->stream ? "true" : "false", (int)r->n_probs, r->samplers_echo);
}

static void timings(struct sbuf *b, const struct completion_request *r,
                    const struct completion_outcome *o)
{
    double pn = r->prompt_len, dn = o->n_predicted;
    sbuf_printf(b, "{\"cache_n\":0,\"prompt_n\":%d,\"prompt_ms\":", (int)r->prompt_len);
    num(b, o->prompt_ms);
    sbuf_printf(b, ",\"prompt_per_token_ms\":");
    num(b, o->prompt_ms / pn);
    sbuf_printf(b, ",\"prompt_per_second\":");
    num(b, 1e3 * pn / o->prompt_ms);
    sbuf_printf(b, ",\"predicted_n\":%d,\"predicted_ms\":", (int)o->n_predicted);
    num(b, o->predicted_ms);
    sbuf_printf(b, ",\"predicted_per_token_ms\":");
    num(b, o->predicted_ms / dn);
    sbuf_printf(b, ",\"predicted_per_second\":");
    num(b, 1e3 * dn / o->predicted_ms);
    sbuf_printf(b, "}");
}

void completion_final(struct sbuf *b, const struct completion_request *r,
                      const struct completion_outcome *o, const int32_t *tokens,
                      const double *logprob, const struct engine_job_top *top, int32_t n)
{
    sbuf_printf(b, "%s{\"index\":0,\"content\":\"\",\"tokens\":[", r->stream ? "data: " : "");
    for (int32_t i = 0; r->return_tokens && i < n; i++) {
        sbuf_printf(b, i > 0 ? ",%d" : "%d", (int)tokens[i]);
    }
    sbuf_printf(b, "],\"id_slot\":%d,\"stop\":true,\"model\":", (int)o->slot);
    sbuf_json_string(b, o->model);
    sbuf_printf(b, ",\"tokens_predicted\":%d,\"tokens_evaluated\":%d,\"generation_settings\":",
                (int)o->n_predicted, (int)r->prompt_len);
    settings(b, r);
    sbuf_printf(b,
                ",\"prompt\":\"\",\"has_new_line\":false,\"truncated\":false,\"stop_type\":\"%s\","
                "\"stopping_word\":\"\",\"tokens_cached\":%d,\"timings\":",
                o->stop_type, (int)(r->prompt_len + o->n_predicted));
    timings(b, r, o);
    if (r->n_probs > 0 && n > 0) {
        sbuf_printf(b, ",\"completion_probabilities\":[");
        for (int32_t i = 0; i < n; i++) {
            sbuf_printf(b, "%s", i > 0 ? "," : "");
            probs(b, r, tokens[i], logprob[i], &top[(size_t)i * (size_t)r->n_probs]);
        }
        sbuf_printf(b, "]");
    }
    sbuf_printf(b, "}%s", r->stream ? "\n\n" : "");
}

void completion_error(struct sbuf *b, int code, const char *message, bool as_event)
{
    const char *type = code == 400   ? "invalid_request_error"
                       : code == 404 ? "not_found_error"
                       : code == 501 ? "not_supported_error"
                       : code == 503 ? "unavailable_error"
                                     : "server_error";
    sbuf_printf(b, "%s{\"error\":{\"code\":%d,\"message\":", as_event ? "data: " : "", code);
    sbuf_json_string(b, message);
    sbuf_printf(b, ",\"type\":\"%s\"}}%s", type, as_event ? "\n\n" : "");
}
