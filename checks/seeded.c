#include "seeded.h"

#include <stdio.h>
#include <string.h>

#include "../adapters/spec.h"
#include "../core/clock.h"
#include "equivalence.h"
#include "harness.h"

enum assay_status assay_check_seeded_sameness(const struct assay_adapter *const *adapters,
                                              const char *const *names, int32_t n,
                                              const struct assay_workload *w,
                                              struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    int32_t n_seeded = 0;
    for (int32_t i = 0; i < w->n; i++) {
        n_seeded += w->reqs[i].sampling.seeded && w->reqs[i].sampling.temperature > 0.0f;
    }
    if (n < 2 || n_seeded == 0) {
        assay_check_error(
            res, "%s",
            n < 2 ? "needs at least two engines"
                  : "the workload has no seeded sampled request (temperature > 0 and a seed)");
        return ASSAY_ERR_INVALID;
    }
    struct assay_transcript *ref = NULL;
    enum assay_status st = ASSAY_OK;
    char msg[512];
    int64_t compared = 0;
    res->n_requests = w->n;
    for (int32_t e = 0; e < n && st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS; e++) {
        struct assay_transcript *t = NULL;
        st = assay_harness_run(adapters[e], w, NULL, &t);
        if (st != ASSAY_OK) {
            break;
        }
        if (t->status != ASSAY_OK) {
            assay_check_fail(res, "%s: %s", names[e], t->error);
        } else if (assay_check_delivery(w, t, msg, sizeof msg) >= 0) {
            assay_check_fail(res, "%s: %s", names[e], msg);
        }
        if (e == 0 || res->verdict != ASSAY_VERDICT_PASS) {
            if (e == 0) {
                ref = t;
            } else {
                assay_transcript_free(t);
            }
            continue;
        }
        for (int32_t i = 0; i < w->n && res->verdict == ASSAY_VERDICT_PASS; i++) {
            const struct assay_workload_request *wr = &w->reqs[i];
            if (!wr->sampling.seeded || !(wr->sampling.temperature > 0.0f)) {
                continue;
            }
            const struct assay_transcript_req *a = &ref->reqs[i], *b = &t->reqs[i];
            int32_t na = a->n_events < a->cap ? a->n_events : a->cap;
            int32_t nb = b->n_events < b->cap ? b->n_events : b->cap;
            int32_t m = na < nb ? na : nb;
            int32_t j = 0;
            while (j < m && a->tokens[j] == b->tokens[j]) {
                j++;
            }
            compared += m;
            if (j < m || na != nb) {
                assay_check_fail(
                    res,
                    "request %llu (seed %llu, T %.2g, top-k %d, top-p %.2g): output position "
                    "%d is token %d on %s but %d on %s (%d and %d tokens)",
                    (unsigned long long)wr->id, (unsigned long long)wr->sampling.seed,
                    (double)wr->sampling.temperature, (int)wr->sampling.top_k,
                    (double)wr->sampling.top_p, (int)j, j < na ? (int)a->tokens[j] : -1, names[0],
                    j < nb ? (int)b->tokens[j] : -1, names[e], (int)na, (int)nb);
            }
        }
        assay_transcript_free(t);
    }
    assay_transcript_free(ref);
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not run the workload: %s", assay_status_str(st));
    }
    res->n_tokens = compared;
    snprintf(res->summary, sizeof res->summary,
             "%d seeded sampled requests on %d configurations (reference: %s); %lld tokens "
             "compared, all identical%s",
             (int)n_seeded, (int)n, names[0], (long long)compared,
             res->verdict == ASSAY_VERDICT_PASS ? "" : " up to the failure");
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}

/* Variants of the item's engine: the changes and what they mean. */
static const struct {
    const char *name;
    const char *opts[5][2];
} k_variants[] = {
    {"alone (batch 1, contiguous KV)",
     {{"batch", "1"}, {"kv", "contiguous"}, {"prefix", "off"}, {"chunk", "0"}, {NULL, NULL}}},
    {"no KV cache (full recompute, batch 8)",
     {{"kv", "off"}, {"prefix", "off"}, {"chunk", "0"}, {"batch", "8"}, {NULL, NULL}}},
    {"batched, contiguous KV, no chunking",
     {{"kv", "contiguous"}, {"prefix", "off"}, {"chunk", "0"}, {NULL, NULL}, {NULL, NULL}}},
};

enum assay_status assay_check_seeded_configurations(const struct assay_adapter *a, const char *spec,
                                                    const struct assay_workload *w,
                                                    struct assay_check_result *res)
{
    enum { N_VAR = sizeof k_variants / sizeof k_variants[0] };
    struct assay_adapter others[N_VAR];
    const struct assay_adapter *list[N_VAR + 1];
    const char *names[N_VAR + 1];
    memset(others, 0, sizeof others);
    list[0] = a;
    names[0] = "the item's engine (paged, prefix cache, chunked prefill, preemption)";
    enum assay_status st = ASSAY_OK;
    int32_t opened = 0;
    for (int32_t v = 0; v < N_VAR && st == ASSAY_OK; v++) {
        char spec_v[1024], next[1024];
        snprintf(spec_v, sizeof spec_v, "%s", spec);
        for (int32_t o = 0; o < 5 && k_variants[v].opts[o][0] != NULL; o++) {
            assay_spec_with(spec_v, k_variants[v].opts[o][0], k_variants[v].opts[o][1], next,
                            sizeof next);
            snprintf(spec_v, sizeof spec_v, "%s", next);
        }
        struct assay_diag diag;
        assay_diag_clear(&diag);
        st = assay_adapter_open_spec(spec_v, &others[v], &diag);
        if (st != ASSAY_OK) {
            char d[400];
            assay_check_error(res, "engine %.200s: %.300s", spec_v,
                              assay_diag_format(&diag, d, sizeof d));
            break;
        }
        list[v + 1] = &others[v];
        names[v + 1] = k_variants[v].name;
        opened++;
    }
    if (st == ASSAY_OK) {
        st = assay_check_seeded_sameness(list, names, opened + 1, w, res);
    }
    for (int32_t v = 0; v < opened; v++) {
        assay_adapter_close(&others[v]);
    }
    return st == ASSAY_ERR_NOMEM ? st : ASSAY_OK;
}
