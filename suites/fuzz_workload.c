/*
 * fuzz_workload - a libFuzzer target for core/workload.c, the parser of
 * workload and trace files (format "assay-workload").
 *
 * Built by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined);
 * seed corpus in fixtures/fuzz/workload/.
 *
 * The input is the file's bytes, not NUL-terminated (the parser takes a
 * length). Limits are those of the bundled TinyGPT engine (vocabulary 260,
 * context 2048) with at most 4096 requests, so that one input cannot ask
 * for minutes of work. Whatever the bytes, the target checks what the
 * parser promises: a parse error is ASSAY_ERR_PARSE with *out NULL and a
 * diagnostic that says what was expected; a workload that loads obeys the
 * trace rules (at least one request, prompts of at least one token with
 * ids in the vocabulary, prompt_len + max_tokens within the context,
 * arrivals sorted, ids unique) and its prompts lie in its own token store;
 * a copy (assay_workload_subset) holds the same requests.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_loaded(const struct assay_workload *w, const struct assay_workload_limits *lim)
{
    if (w->n < 1 || w->n > lim->max_requests || w->reqs == NULL || w->token_store == NULL) {
        abort();
    }
    int64_t tokens = 0;
    for (int32_t i = 0; i < w->n; i++) {
        const struct assay_workload_request *r = &w->reqs[i];
        if (r->prompt_len < 1 || r->max_tokens < 1 ||
            (int64_t)r->prompt_len + r->max_tokens > lim->max_seq_len) {
            abort();
        }
        if (r->prompt < w->token_store || r->prompt + r->prompt_len > w->token_store + w->n_tokens) {
            abort();
        }
        for (int32_t t = 0; t < r->prompt_len; t++) {
            if (r->prompt[t] < 0 || r->prompt[t] >= lim->vocab) {
                abort();
            }
        }
        if (r->stop_token < -1 || r->stop_token >= lim->vocab || r->abort_after < -1) {
            abort();
        }
        if (i > 0 && (r->arrival_s < w->reqs[i - 1].arrival_s ||
                      r->arrival_step < w->reqs[i - 1].arrival_step)) {
            abort();
        }
        for (int32_t j = 0; j < i; j++) {
            if (w->reqs[j].id == r->id) {
                abort();
            }
        }
        tokens += r->prompt_len;
    }
    if (tokens > w->n_tokens) {
        abort();
    }
    struct assay_workload *copy = NULL;
    if (assay_workload_subset(w, NULL, &copy) != ASSAY_OK) {
        abort();
    }
    for (int32_t i = 0; i < w->n; i++) {
        const struct assay_workload_request *a = &w->reqs[i], *b = &copy->reqs[i];
        if (a->id != b->id || a->prompt_len != b->prompt_len || a->max_tokens != b->max_tokens ||
            memcmp(a->prompt, b->prompt, sizeof(int32_t) * (size_t)a->prompt_len) != 0) {
            abort();
        }
    }
    assay_workload_free(copy);
    struct assay_workload_summary s;
    assay_workload_summarize(w, &s);
    if (s.n != w->n || s.prompt_min < 1 || s.prompt_max > lim->max_seq_len) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct assay_workload_limits lim = {260, 2048, 4096};
    struct assay_workload *w = (struct assay_workload *)&lim; /* must be cleared */
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st =
        assay_workload_parse((const char *)data, size, "fuzz.json", &lim, &w, &diag);
    if (st == ASSAY_OK) {
        if (w == NULL) {
            abort();
        }
        check_loaded(w, &lim);
        assay_workload_free(w);
        return 0;
    }
    if (st != ASSAY_ERR_PARSE || w != NULL || diag.expected[0] == '\0' ||
        strcmp(diag.file, "fuzz.json") != 0) {
        fprintf(stderr, "status %d, file '%s', where '%s', expected '%s', got '%s'\n", (int)st,
                diag.file, diag.where, diag.expected, diag.got);
        abort();
    }
    char line[1200];
    assay_diag_format(&diag, line, sizeof line);
    if (strlen(line) >= sizeof line) {
        abort();
    }
    return 0;
}
