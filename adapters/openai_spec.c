/*
 * openai_spec.c - the engine spec of the OpenAI-compatible adapter
 * ("openai:URL[,key=value...]", see openai.h and adapters/openai.md) read
 * into its parameters. Nothing here opens a connection.
 */
#include "openai.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "spec_value.h"

/* The longest spec arguments assay_openai_open_spec takes. */
#define SPEC_MAX 2048

/* An integer option into an int32_t field. */
static enum assay_status spec_int32(struct assay_diag *diag, const char *key, const char *v,
                                    long long lo, long long hi, int32_t *out)
{
    long long x = 0;
    enum assay_status st = assay_spec_int(diag, key, v, lo, hi, &x);
    if (st == ASSAY_OK) {
        *out = (int32_t)x;
    }
    return st;
}

enum assay_status assay_openai_parse_spec(const char *args, char *buf, size_t size,
                                          struct assay_openai_params *out,
                                          struct assay_diag *diag)
{
    if (args == NULL || buf == NULL || strlen(args) >= size) {
        char expected[96];
        snprintf(expected, sizeof expected, "openai:URL[,key=value...] shorter than %zu", size);
        assay_diag_set(diag, "engine spec", "openai", expected, "%s",
                       args == NULL ? "nothing" : "a longer spec");
        return ASSAY_ERR_INVALID;
    }
    snprintf(buf, size, "%s", args);
    struct assay_openai_params p = assay_openai_default_params();
    char *save = NULL;
    p.url = strtok_r(buf, ",", &save);
    for (char *kv = strtok_r(NULL, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL || eq == kv) {
            assay_diag_set(diag, "engine spec", "openai", "key=value", "%.64s", kv);
            return ASSAY_ERR_INVALID;
        }
        *eq = '\0';
        const char *v = eq + 1;
        enum assay_status st = ASSAY_OK;
        bool on = false;
        if (strcasecmp(kv, "key") == 0 || strcasecmp(kv, "api_key") == 0 ||
            strcasecmp(kv, "apikey") == 0 || strcasecmp(kv, "token") == 0 ||
            strcasecmp(kv, "authorization") == 0) {
            /* The value is not echoed. */
            assay_diag_set(diag, "engine spec", kv,
                           "no API key on the command line: set ASSAY_API_KEY or "
                           "ASSAY_API_KEY_FILE",
                           "%s", "a key in the spec");
            return ASSAY_ERR_INVALID;
        }
        if (strcmp(kv, "model") == 0) {
            if (strlen(v) >= 256) {
                assay_diag_set(diag, "engine spec", kv, "a name shorter than 256", "%s",
                               "a longer one");
                return ASSAY_ERR_INVALID;
            }
            p.model = v;
        } else if (strcmp(kv, "api") == 0) {
            if (strcmp(v, "completion") == 0) {
                p.api = ASSAY_OPENAI_API_COMPLETION;
            } else if (strcmp(v, "v1") == 0) {
                p.api = ASSAY_OPENAI_API_V1;
            } else {
                assay_diag_set(diag, "engine spec", kv, "completion or v1", "%.64s", v);
                return ASSAY_ERR_INVALID;
            }
        } else if (strcmp(kv, "timeout_ms") == 0) {
            st = spec_int32(diag, kv, v, 1, 3600000, &p.connect_timeout_ms);
        } else if (strcmp(kv, "stall_ms") == 0) {
            st = spec_int32(diag, kv, v, 1, 86400000, &p.stall_timeout_ms);
        } else if (strcmp(kv, "logprobs") == 0) {
            st = spec_int32(diag, kv, v, 0, ASSAY_OPENAI_MAX_TOP, &p.n_probs);
        } else if (strcmp(kv, "vocab") == 0) {
            st = spec_int32(diag, kv, v, 0, INT32_MAX, &p.vocab);
        } else if (strcmp(kv, "ctx") == 0) {
            st = spec_int32(diag, kv, v, 0, INT32_MAX, &p.n_ctx);
        } else if (strcmp(kv, "eos") == 0) {
            st = spec_int32(diag, kv, v, -1, INT32_MAX, &p.eos_token);
        } else if (strcmp(kv, "requests") == 0) {
            st = spec_int32(diag, kv, v, 1, 1 << 20, &p.max_requests);
        } else if (strcmp(kv, "stream") == 0) {
            st = assay_spec_onoff(diag, kv, v, &on);
            p.stream = on;
        } else if (strcmp(kv, "cache_prompt") == 0) {
            st = assay_spec_onoff(diag, kv, v, &on);
            p.cache_prompt = on ? 1 : 0;
        } else {
            assay_diag_set(diag, "engine spec", kv,
                           "one of model, api, timeout_ms, stall_ms, logprobs, vocab, ctx, eos, "
                           "cache_prompt, requests, stream",
                           "%.64s", kv);
            return ASSAY_ERR_INVALID;
        }
        if (st != ASSAY_OK) {
            return st;
        }
    }
    *out = p;
    return ASSAY_OK;
}

enum assay_status assay_openai_open_spec(const char *args, struct assay_adapter *out,
                                         struct assay_diag *diag)
{
    out->vt = NULL;
    out->self = NULL;
    char buf[SPEC_MAX];
    struct assay_openai_params p;
    enum assay_status st = assay_openai_parse_spec(args, buf, sizeof buf, &p, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    return assay_openai_open(&p, out, diag);
}
