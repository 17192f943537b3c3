/*
 * seeded.c - the seeded family (seeded.h): the same seeded workload on
 * several engine configurations (assay_check_seeded_sameness,
 * _seeded_configurations), the edge seeds at every position
 * (assay_check_seed_positions), unseeded requests (assay_check_seed_unseeded)
 * and the independence of distinct seeds (assay_check_seed_pairs). The plan's
 * runners and the audit (audit_checks.c) call them.
 */
#include "seeded.h"

#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../adapters/spec.h"
#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/rng.h"
#include "../core/text.h"
#include "../oracles/oracle.h"
#include "equivalence.h"
#include "harness.h"
#include "stats.h"

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
    return assay_status_keep_nomem(st);
}

/* ---- seeded determinism: edge seeds, positions, unseeded, pairs ----------- */

const uint64_t assay_edge_seeds[ASSAY_N_EDGE_SEEDS] = {
    0, 1, 2147483647ULL, 4294967295ULL, 4294967296ULL, 9007199254740992ULL,
    9223372036854775808ULL, 18446744073709551615ULL};

#define SEED_PURPOSE 0x73656564u /* "seed" */

struct assay_seeded_opts assay_seeded_opts_default(void)
{
    return (struct assay_seeded_opts){UINT64_MAX, 0, NULL, NULL, false, NULL, NULL};
}

void assay_seed_probes(uint64_t seed_max, uint64_t out[ASSAY_N_EDGE_SEEDS])
{
    const uint64_t b31 = (uint64_t)1 << 31;
    const uint64_t fill[] = {seed_max, b31, seed_max - 1, (uint64_t)1 << 16, b31 + 1,
                             seed_max - 2, 2, 3, 4, 5, 6, 7, 8, 9};
    int n = 0;
    for (int i = 0; i < ASSAY_N_EDGE_SEEDS + (int)(sizeof fill / sizeof fill[0]) &&
                    n < ASSAY_N_EDGE_SEEDS;
         i++) {
        uint64_t s = i < ASSAY_N_EDGE_SEEDS ? assay_edge_seeds[i] : fill[i - ASSAY_N_EDGE_SEEDS];
        bool seen = s > seed_max;
        for (int k = 0; k < n; k++) {
            seen = seen || out[k] == s;
        }
        if (!seen) {
            out[n++] = s;
        }
    }
}

/* A request as the seeded checks write it into a workload. */
struct sreq {
    const int32_t *prompt;
    int32_t len, max_tokens, arrival;
    int kind; /* 0 greedy, 1 seeded, 2 unseeded */
    uint64_t seed;
    double temperature, top_p;
    int32_t top_k;
};

static void put_sreq(struct assay_text *t, int32_t id, const struct sreq *r)
{
    assay_text_put(t, "%s{\"id\":%d,\"arrival_step\":%d,\"max_tokens\":%d,\"prompt\":[",
                   id > 0 ? "," : "", (int)id, (int)r->arrival, (int)r->max_tokens);
    for (int32_t k = 0; k < r->len; k++) {
        assay_text_put(t, "%s%d", k > 0 ? "," : "", (int)r->prompt[k]);
    }
    assay_text_put(t, "]");
    if (r->kind != 0) {
        assay_text_put(t, ",\"sampling\":{\"temperature\":%.4f,\"top_k\":%d,\"top_p\":%.4f",
                       r->temperature, (int)r->top_k, r->top_p);
        if (r->kind == 1) {
            assay_text_put(t, ",\"seed\":\"%llu\"", (unsigned long long)r->seed);
        }
        assay_text_put(t, "}");
    }
    assay_text_put(t, "}");
}

/* Run the requests r[0..n) (in that order) on a: the transcript in *t. */
static enum assay_status run_sreqs(const struct assay_adapter *a, int32_t vocab, int32_t n_ctx,
                                   const struct assay_seeded_opts *o, const struct sreq *r,
                                   int32_t n, struct assay_workload **w,
                                   struct assay_transcript **t)
{
    struct assay_text x = {NULL, 0, 0, false};
    assay_text_put(&x, "{\"format\":\"assay-workload\",\"version\":1,\"requests\":[");
    for (int32_t i = 0; i < n; i++) {
        put_sreq(&x, i, &r[i]);
    }
    assay_text_put(&x, "]}");
    if (x.failed) {
        assay_text_free(&x);
        return ASSAY_ERR_NOMEM;
    }
    struct assay_workload_limits lim = {vocab, n_ctx, 0};
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_workload_parse(x.s, x.len, "seeded check", &lim, w, &diag);
    assay_text_free(&x);
    if (st != ASSAY_OK) {
        return st == ASSAY_ERR_NOMEM ? st : ASSAY_ERR_INTERNAL;
    }
    struct assay_harness_opts ho;
    memset(&ho, 0, sizeof ho);
    ho.max_steps = o->max_steps;
    st = assay_harness_run(a, *w, &ho, t);
    if (st != ASSAY_OK) {
        assay_workload_free(*w);
        *w = NULL;
    }
    return st;
}

static void draw_prompt(uint64_t seed, uint64_t which, int32_t vocab, int32_t len, int32_t *out)
{
    for (int32_t k = 0; k < len; k++) {
        out[k] = (int32_t)(assay_rng_u01(seed, which * 4096 + (uint64_t)k, SEED_PURPOSE) *
                           (double)vocab);
    }
}

/* Partings the numerics explained (assay_seeded_opts.explain). */
struct partings {
    int64_t n;
    char first[400];
};

/* Request j of t against reference tokens ref[0..n_ref): false with msg.
 * With o->explain a difference it explains ends the comparison there
 * (counted in pt) instead of failing it. */
static bool same_stream(const struct assay_transcript *t, int32_t j, const int32_t *ref,
                        int32_t n_ref, const struct sreq *r, const char *where,
                        const struct assay_seeded_opts *o, struct partings *pt, char *msg,
                        size_t size)
{
    const struct assay_transcript_req *q = &t->reqs[j];
    if (t->status != ASSAY_OK || q->submit_status != ASSAY_OK || q->n_finish != 1) {
        snprintf(msg, size, "seed %llu %s: the request did not run to its end (%s)",
                 (unsigned long long)r->seed, where,
                 t->status != ASSAY_OK ? t->error : "refused or not finished once");
        return false;
    }
    int32_t n = q->n_events < q->cap ? q->n_events : q->cap;
    for (int32_t k = 0; k < n && k < n_ref; k++) {
        if (q->tokens[k] != ref[k]) {
            char why[300] = "";
            if (o->explain != NULL) {
                struct assay_sampling smp;
                memset(&smp, 0, sizeof smp);
                smp.temperature = (float)r->temperature;
                smp.top_k = r->top_k;
                smp.top_p = (float)r->top_p;
                int32_t n_both = n < n_ref ? n : n_ref;
                if (o->explain(o->explain_ctx, r->prompt, r->len, &smp, ref, q->tokens, n_both,
                               k, why, sizeof why)) {
                    if (pt->n++ == 0) {
                        snprintf(pt->first, sizeof pt->first,
                                 "seed %llu at output position %d, %d alone but %d %s: %s",
                                 (unsigned long long)r->seed, (int)k, (int)ref[k],
                                 (int)q->tokens[k], where, why);
                    }
                    return true; /* the contexts differ from here on */
                }
            }
            snprintf(msg, size,
                     "seed %llu (prompt of %d tokens, T %.2g, top-k %d, top-p %.2g): output "
                     "position %d is token %d alone but %d %s%s%s",
                     (unsigned long long)r->seed, (int)r->len, r->temperature, (int)r->top_k,
                     r->top_p, (int)k, (int)ref[k], (int)q->tokens[k], where,
                     why[0] != '\0' ? "; not a parting the numerics can make: " : "", why);
            return false;
        }
    }
    if (n != n_ref) {
        snprintf(msg, size, "seed %llu: %d tokens alone but %d %s", (unsigned long long)r->seed,
                 (int)n_ref, (int)n, where);
        return false;
    }
    return true;
}

#define N_PROBES ASSAY_N_EDGE_SEEDS
#define N_NEIGHBOURS 7
#define PROBE_TOKENS 12

/* Distinct seeds with one prompt are distinct streams: probes i and
 * i + N_PROBES / 2 share a prompt, and a pair that gives one output fails
 * when a correct engine's two streams do that with a chance of at most
 * ASSAY_SEED_ALPHA / 4, the pair's share; a likelier one is described in
 * coincidence (size bytes) for the summary. */
static enum assay_status distinct_streams(const struct assay_seeded_opts *o,
                                          const struct sreq *probe,
                                          int32_t (*ref)[PROBE_TOKENS], const int32_t *n_ref,
                                          bool full, struct assay_check_result *res,
                                          char *coincidence, size_t size)
{
    enum assay_status st = ASSAY_OK;
    for (int32_t i = 0; i < N_PROBES / 2 && st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS;
         i++) {
        int32_t j = i + N_PROBES / 2;
        if (n_ref[i] != n_ref[j] ||
            memcmp(ref[i], ref[j], sizeof(int32_t) * (size_t)n_ref[i]) != 0) {
            continue;
        }
        double chance = 0.0;
        if (o->chance != NULL) {
            struct assay_sampling smp = {(float)probe[i].temperature, probe[i].top_k,
                                         (float)probe[i].top_p, true, probe[i].seed};
            st = o->chance(o->chance_ctx, probe[i].prompt, probe[i].len, &smp, ref[i], n_ref[i],
                           &chance);
        }
        if (st != ASSAY_OK) {
            break;
        }
        if (chance <= ASSAY_SEED_ALPHA / (N_PROBES / 2)) {
            char how[120] = "";
            if (o->chance != NULL) {
                snprintf(how, sizeof how,
                         ", which a correct engine does with a chance of at most %.1e", chance);
            }
            assay_check_fail(res,
                             "seeds %llu and %llu with one prompt gave the same %d tokens%s: two "
                             "seeds, one stream%s",
                             (unsigned long long)probe[i].seed, (unsigned long long)probe[j].seed,
                             (int)n_ref[i], how,
                             full ? " (the variable: the seed's high bits)" : "");
        } else if (coincidence[0] == '\0') {
            snprintf(coincidence, size,
                     "; a coincidence, not evidence: seeds %llu and %llu gave one %d-token "
                     "output (chance up to %.2g)",
                     (unsigned long long)probe[i].seed, (unsigned long long)probe[j].seed,
                     (int)n_ref[i], chance);
        }
    }
    return st;
}

/* The probes among neighbours, at every arrival position and order: each
 * must give the tokens it gave alone (ref, n_ref), up to the partings the
 * numerics can make (pt); *runs and *compared count what ran. */
static enum assay_status among_neighbours(const struct assay_adapter *a, int32_t vocab,
                                          int32_t n_ctx, const struct assay_seeded_opts *o,
                                          const struct sreq *probe, const struct sreq *nb,
                                          int32_t (*ref)[PROBE_TOKENS], const int32_t *n_ref,
                                          struct partings *pt, int64_t *runs, int64_t *compared,
                                          struct assay_check_result *res)
{
    enum assay_status st = ASSAY_OK;
    char msg[600];
    static const char *const arrangement[4] = {
        "first in a batch of neighbours (the variable: arrival position)",
        "last in a batch of neighbours (the variable: arrival position)",
        "interleaved with neighbours in reverse order (the variable: order)",
        "joining a running batch, one arrival per step (the variable: arrival step)"};
    for (int32_t v = 0; v < 4 && st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS; v++) {
        struct sreq all[N_PROBES + N_NEIGHBOURS];
        int32_t at[N_PROBES]; /* where probe i is in all[] */
        int32_t n = 0;
        /* order[]: indices into probes (0..7) and neighbours (8..14) */
        int32_t order[N_PROBES + N_NEIGHBOURS];
        for (int32_t k = 0; k < N_PROBES + N_NEIGHBOURS; k++) {
            int32_t probes_first = k, neighbours_first = (k + N_PROBES) % (N_PROBES + N_NEIGHBOURS);
            /* interleaved: p0 n0 p1 n1 ... n6 p7, then reversed */
            int32_t r = N_PROBES + N_NEIGHBOURS - 1 - k;
            int32_t interleaved = r % 2 == 0 ? r / 2 : N_PROBES + r / 2;
            order[k] = v == 0 ? probes_first : v == 2 ? interleaved : neighbours_first;
        }
        for (int32_t k = 0; k < N_PROBES + N_NEIGHBOURS; k++) {
            int32_t src = order[k];
            all[n] = src < N_PROBES ? probe[src] : nb[src - N_PROBES];
            all[n].arrival = v == 3 ? n : 0;
            if (src < N_PROBES) {
                at[src] = n;
            }
            n++;
        }
        struct assay_workload *w = NULL;
        struct assay_transcript *t = NULL;
        st = run_sreqs(a, vocab, n_ctx, o, all, n, &w, &t);
        if (st != ASSAY_OK) {
            break;
        }
        (*runs)++;
        res->n_steps += t->n_steps;
        for (int32_t i = 0; i < N_PROBES && res->verdict == ASSAY_VERDICT_PASS; i++) {
            (*compared) += PROBE_TOKENS;
            if (!same_stream(t, at[i], ref[i], n_ref[i], &probe[i], arrangement[v], o, pt, msg,
                             sizeof msg)) {
                assay_check_fail(res, "%s", msg);
            }
        }
        char dmsg[512];
        if (res->verdict == ASSAY_VERDICT_PASS && assay_check_delivery(w, t, dmsg, sizeof dmsg) >= 0) {
            assay_check_fail(res, "%s: %s", arrangement[v], dmsg);
        }
        assay_transcript_free(t);
        assay_workload_free(w);
    }
    return st;
}

enum assay_status assay_check_seed_positions(const struct assay_adapter *a, int32_t vocab,
                                             int32_t n_ctx, uint64_t seed,
                                             const struct assay_seeded_opts *o,
                                             struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    uint64_t seeds[N_PROBES];
    assay_seed_probes(o->seed_max, seeds);
    bool full = o->seed_max == UINT64_MAX;
    int32_t prompts[N_PROBES + N_NEIGHBOURS][32];
    struct sreq probe[N_PROBES], nb[N_NEIGHBOURS];
    /* Probes i and i + 4 share a prompt: with 64-bit seeds 0 and 2^32, 1
     * and 2^53, 2^31-1 and 2^63, 2^32-1 and 2^64-1, which a seed cut to 32
     * bits (or to a double's 53) would merge into one stream. */
    static const int32_t probe_len[4] = {7, 16, 23, 11};
    for (int32_t i = 0; i < N_PROBES; i++) {
        draw_prompt(seed, (uint64_t)(i % 4), vocab, probe_len[i % 4], prompts[i]);
        probe[i] = (struct sreq){prompts[i], probe_len[i % 4], PROBE_TOKENS, 0, 1,
                                 seeds[i], 0.9, 0.95, 40};
    }
    for (int32_t j = 0; j < N_NEIGHBOURS; j++) {
        int32_t len = 3 + (int32_t)(assay_rng_u01(seed, 100000 + (uint64_t)j, SEED_PURPOSE) * 28);
        draw_prompt(seed, 10 + (uint64_t)j, vocab, len, prompts[N_PROBES + j]);
        nb[j] = (struct sreq){prompts[N_PROBES + j], len, 4 + 2 * j, 0, j % 3,
                              assay_mix64(seed + (uint64_t)j), 1.0, 1.0, 0};
    }
    int32_t ref[N_PROBES][PROBE_TOKENS];
    int32_t n_ref[N_PROBES];
    enum assay_status st = ASSAY_OK;
    char msg[600];
    int64_t runs = 0, compared = 0;
    struct partings pt = {0, ""};
    /* Alone, then alone again, then twice within one batch. */
    for (int32_t pass = 0; pass < 3 && st == ASSAY_OK; pass++) {
        for (int32_t i = 0; i < N_PROBES && st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS;
             i++) {
            struct sreq two[2] = {probe[i], probe[i]};
            struct assay_workload *w = NULL;
            struct assay_transcript *t = NULL;
            st = run_sreqs(a, vocab, n_ctx, o, two, pass == 2 ? 2 : 1, &w, &t);
            if (st != ASSAY_OK) {
                break;
            }
            runs++;
            res->n_steps += t->n_steps;
            if (pass == 0) {
                const struct assay_transcript_req *q = &t->reqs[0];
                n_ref[i] = q->n_events < q->cap ? q->n_events : q->cap;
                n_ref[i] = n_ref[i] < PROBE_TOKENS ? n_ref[i] : PROBE_TOKENS;
                memcpy(ref[i], q->tokens, sizeof(int32_t) * (size_t)n_ref[i]);
                if (t->status != ASSAY_OK || q->n_finish != 1 || n_ref[i] != PROBE_TOKENS) {
                    assay_check_fail(res, "seed %llu alone: %d of %d tokens (%s)",
                                     (unsigned long long)probe[i].seed, (int)n_ref[i],
                                     PROBE_TOKENS, t->status != ASSAY_OK ? t->error : "");
                }
            } else {
                for (int32_t k = 0; k < (pass == 2 ? 2 : 1); k++) {
                    compared += PROBE_TOKENS;
                    const char *where = pass == 1 ? "when run alone again (the variable: what "
                                                    "earlier runs left in the engine)"
                                        : k == 0 ? "as the first of two copies in one batch "
                                                   "(the variable: its twin)"
                                                 : "as the second of two copies in one batch "
                                                   "(the variable: its twin)";
                    /* a lone repeat is held bit for bit unless the engine
                     * cannot even promise that */
                    struct assay_seeded_opts lone = *o;
                    if (pass == 1 && !o->explain_alone) {
                        lone.explain = NULL;
                    }
                    if (!same_stream(t, k, ref[i], n_ref[i], &probe[i], where, &lone, &pt, msg,
                                     sizeof msg)) {
                        assay_check_fail(res, "%s", msg);
                        break;
                    }
                }
            }
            assay_transcript_free(t);
            assay_workload_free(w);
        }
    }
    char coincidence[200] = "";
    if (st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS) {
        st = distinct_streams(o, probe, ref, n_ref, full, res, coincidence, sizeof coincidence);
    }
    if (st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS) {
        st = among_neighbours(a, vocab, n_ctx, o, probe, nb, ref, n_ref, &pt, &runs, &compared,
                              res);
    }
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not run: %s", assay_status_str(st));
    }
    res->n_requests = N_PROBES;
    res->n_tokens = compared;
    res->n_checks = compared;
    char list[200] = "0, 1, 2^31-1, 2^32-1, 2^32, 2^53, 2^63, 2^64-1";
    if (!full) {
        size_t used = 0;
        for (int32_t i = 0; i < N_PROBES && used < sizeof list; i++) {
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%llu", i > 0 ? ", " : "",
                                     (unsigned long long)seeds[i]);
        }
    }
    if (snprintf(res->summary, sizeof res->summary,
                 "%s: %lld tokens of %d seeds compared in %lld runs, each alone, alone "
                 "again, twice in one batch and among %d neighbours in 4 arrangements%s; seeds "
                 "%s%s",
                 o->explain == NULL    ? "bit for bit"
                 : o->explain_alone    ? "up to the numerics budget"
                                       : "a lone repeat bit for bit, the rest up to the numerics "
                                         "budget",
                 (long long)compared, N_PROBES, (long long)runs, N_NEIGHBOURS, coincidence, list,
                 full ? "" : " (the engine's limit)") >=
        (int)sizeof res->summary) {
        memcpy(res->summary + sizeof res->summary - 4, "...", 4); /* cut, and said so */
    }
    if (pt.n > 0 && res->verdict == ASSAY_VERDICT_PASS) {
        /* before a coincidence and the seed list, the parts a cut may lose */
        char head[sizeof res->summary], tail[sizeof res->summary] = "";
        snprintf(head, sizeof head, "%s", res->summary);
        char *list_at = strstr(head, "; a coincidence, not evidence");
        if (list_at == NULL) {
            list_at = strstr(head, "; seeds ");
        }
        if (list_at != NULL) {
            snprintf(tail, sizeof tail, "%s", list_at);
            *list_at = '\0';
        }
        if (snprintf(res->summary, sizeof res->summary,
                     "%s; %lld runs parted where the numerics can move the draw (first: %s)%s",
                     head, (long long)pt.n, pt.first, tail) >= (int)sizeof res->summary) {
            memcpy(res->summary + sizeof res->summary - 4, "...", 4);
        }
    }
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return assay_status_keep_nomem(st);
}

double assay_seed_chance_of_rows(const double *rows, int32_t vocab,
                                 const struct assay_sampling *s, const int32_t *tokens,
                                 int32_t n, double room)
{
    const double t = (double)s->temperature;
    const double top_p = s->top_p > 0.0f && s->top_p < 1.0f ? (double)s->top_p : 1.0;
    const bool cut_k = s->top_k > 0 && s->top_k < vocab;
    double *kept_p = cut_k ? assay_malloc(sizeof(double) * (size_t)vocab) : NULL;
    if (t <= 0.0 || (cut_k && kept_p == NULL)) {
        return 1.0; /* no bound (out of memory: none either) */
    }
    struct assay_sampling top_k_only = assay_sampling_greedy();
    top_k_only.temperature = s->temperature;
    top_k_only.top_k = s->top_k;
    double chance = 1.0;
    for (int32_t j = 0; j < n && chance > 0.0; j++) {
        const double *row = rows + (int64_t)j * vocab;
        int32_t best = 0;
        for (int32_t z = 1; z < vocab; z++) {
            best = row[z] > row[best] ? z : best;
        }
        double sum = 0.0;
        for (int32_t z = 0; z < vocab; z++) {
            sum += exp((row[z] - row[best]) / t);
        }
        /* the top-k's mass: the best token's probability before the cut
         * over after it (the cut keeps it and renormalises) */
        double kept = 1.0;
        if (cut_k && assay_oracle_distribution(row, vocab, &top_k_only, ASSAY_SAMPLING_JOINT,
                                               kept_p, NULL) == ASSAY_OK) {
            kept = (1.0 / sum) / kept_p[best];
        } else if (cut_k) {
            kept = 0.0; /* no bound at this position */
        }
        double p = exp((row[tokens[j]] - row[best]) / t) / sum;
        chance *= fmin(1.0, p * exp(2.0 * room / t) / (top_p * kept));
    }
    assay_free(kept_p);
    return chance;
}

enum assay_status assay_seed_chance_oracle(void *ctx, const int32_t *prompt, int32_t len,
                                           const struct assay_sampling *s,
                                           const int32_t *tokens, int32_t n, double *chance)
{
    const struct assay_model *model = ctx;
    const int32_t v = model->cfg.vocab;
    *chance = 1.0;
    if (n <= 0) {
        return ASSAY_OK;
    }
    struct assay_oracle *o = NULL;
    int32_t *seq = assay_malloc(sizeof(int32_t) * (size_t)(len + n));
    double *rows = assay_malloc(sizeof(double) * (size_t)v * (size_t)(len + n));
    enum assay_status st = seq != NULL && rows != NULL ? assay_oracle_init(&o, model, len + n)
                                                       : ASSAY_ERR_NOMEM;
    if (st == ASSAY_OK) {
        memcpy(seq, prompt, sizeof(int32_t) * (size_t)len);
        memcpy(seq + len, tokens, sizeof(int32_t) * (size_t)n);
        st = assay_oracle_logits(o, seq, len + n - 1, rows);
    }
    if (st == ASSAY_OK) {
        *chance = assay_seed_chance_of_rows(rows + (int64_t)(len - 1) * v, v, s, tokens, n,
                                            ASSAY_EQUIV_TIE_TOL);
    }
    assay_oracle_free(o);
    assay_free(rows);
    assay_free(seq);
    return st;
}

/* The oracle's first-token distribution of prompt under sampling s. */
static enum assay_status first_token_distribution(const struct assay_model *model,
                                                  const int32_t *prompt, int32_t len,
                                                  const struct assay_sampling *s, double *p)
{
    struct assay_oracle *o = NULL;
    double *row = assay_malloc(sizeof(double) * (size_t)model->cfg.vocab);
    enum assay_status st = row != NULL ? assay_oracle_init(&o, model, len + 1) : ASSAY_ERR_NOMEM;
    if (st == ASSAY_OK) {
        st = assay_oracle_next_logits(o, prompt, len, row);
    }
    if (st == ASSAY_OK) {
        st = assay_oracle_distribution(row, model->cfg.vocab, s, ASSAY_SAMPLING_JOINT, p, NULL);
    }
    assay_oracle_free(o);
    assay_free(row);
    return st;
}

#define N_UNSEEDED 8
#define UNSEEDED_TOKENS 16

enum assay_status assay_check_seed_unseeded(const struct assay_adapter *a,
                                            const struct assay_model *model, uint64_t seed,
                                            const struct assay_seeded_opts *o,
                                            struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    const int32_t v = model->cfg.vocab;
    int32_t prompt[8];
    draw_prompt(seed, 7, v, 8, prompt);
    struct sreq r[N_UNSEEDED];
    for (int32_t i = 0; i < N_UNSEEDED; i++) {
        r[i] = (struct sreq){prompt, 8, UNSEEDED_TOKENS, 0, 2, 0, 1.0, 1.0, 0};
    }
    double *p = assay_malloc(sizeof(double) * (size_t)v);
    if (p == NULL) {
        assay_check_error(res, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    struct assay_sampling s = assay_sampling_greedy();
    s.temperature = 1.0f;
    enum assay_status st = first_token_distribution(model, prompt, 8, &s, p);
    double bound = 0.0;
    for (int32_t x = 0; x < v && st == ASSAY_OK; x++) {
        bound += pow(p[x], N_UNSEEDED);
    }
    assay_free(p);
    struct assay_workload *w = NULL;
    struct assay_transcript *t = NULL;
    if (st == ASSAY_OK) {
        st = run_sreqs(a, v, model->cfg.n_ctx, o, r, N_UNSEEDED, &w, &t);
    }
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not run: %s", assay_status_str(st));
        res->seconds = (double)(assay_now_ns() - t0) / 1e9;
        return assay_status_keep_nomem(st);
    }
    char msg[512], coincidence[160] = "";
    int32_t distinct = 0, same_pairs = 0;
    if (assay_check_delivery(w, t, msg, sizeof msg) >= 0) {
        assay_check_fail(res, "%s", msg);
    } else {
        for (int32_t i = 0; i < N_UNSEEDED; i++) {
            bool seen = false;
            for (int32_t j = 0; j < i; j++) {
                bool same = memcmp(t->reqs[i].tokens, t->reqs[j].tokens,
                                   sizeof(int32_t) * UNSEEDED_TOKENS) == 0;
                same_pairs += same;
                seen |= same;
            }
            distinct += !seen;
        }
        /* all alike: judged by the chance that 7 correct streams draw
         * the first one's tokens */
        double chance = 1.0;
        if (distinct == 1) {
            enum assay_status cst =
                o->chance != NULL
                    ? o->chance(o->chance_ctx, prompt, 8, &s, t->reqs[0].tokens, UNSEEDED_TOKENS,
                                &chance)
                    : assay_seed_chance_oracle((void *)model, prompt, 8, &s, t->reqs[0].tokens,
                                               UNSEEDED_TOKENS, &chance);
            chance = pow(chance, N_UNSEEDED - 1);
            if (cst != ASSAY_OK) {
                assay_check_error(res, "could not judge: %s", assay_status_str(cst));
                st = cst;
            } else if (chance <= ASSAY_SEED_ALPHA) {
                assay_check_fail(res,
                                 "%d unseeded requests with one prompt gave one and the same %d "
                                 "tokens: they share one random stream (a correct engine does "
                                 "this with a chance of at most %.1e)",
                                 N_UNSEEDED, UNSEEDED_TOKENS, chance);
            }
        }
        if (distinct == 1 && res->verdict == ASSAY_VERDICT_PASS) {
            snprintf(coincidence, sizeof coincidence,
                     "; all %d alike, which correct streams do with a chance of up to %.2g: not "
                     "evidence",
                     N_UNSEEDED, chance);
        }
    }
    res->n_requests = N_UNSEEDED;
    res->n_tokens = N_UNSEEDED * UNSEEDED_TOKENS;
    res->n_steps = t->n_steps;
    res->n_checks = N_UNSEEDED * (N_UNSEEDED - 1) / 2;
    snprintf(res->summary, sizeof res->summary,
             "%d unseeded requests with one prompt, %d tokens each at T 1: %d distinct outputs, "
             "%d identical pairs (a correct engine gives all %d one first token with a chance "
             "of at most %.1e)%s",
             N_UNSEEDED, UNSEEDED_TOKENS, (int)distinct, (int)same_pairs, N_UNSEEDED, bound,
             coincidence);
    assay_transcript_free(t);
    assay_workload_free(w);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return assay_status_keep_nomem(st);
}

#define PAIR_BINS 4
#define PAIR_CHUNK 64

/* The independence test of the pairs' first tokens: o[i][j] pairs of n
 * whose first request's token fell in bin i and second's in bin j (bins of
 * mass bin_mass by the oracle), chi-squared at alpha, into res; *x2, *rows
 * and *cols (the bins that occur) for the summary. */
static enum assay_status pair_independence(const int64_t o[PAIR_BINS][PAIR_BINS],
                                           const double *bin_mass, int64_t n,
                                           int64_t same_token, double alpha, double power,
                                           struct assay_check_result *res, double *x2,
                                           int32_t *rows, int32_t *cols)
{
    enum assay_status st = ASSAY_OK;
    int64_t rs[PAIR_BINS] = {0}, cs[PAIR_BINS] = {0};
    for (int32_t i = 0; i < PAIR_BINS; i++) {
        for (int32_t j = 0; j < PAIR_BINS; j++) {
            rs[i] += o[i][j];
            cs[j] += o[i][j];
        }
    }
    for (int32_t i = 0; i < PAIR_BINS; i++) {
        *rows += rs[i] > 0;
        *cols += cs[i] > 0;
        for (int32_t j = 0; j < PAIR_BINS; j++) {
            double e = (double)rs[i] * (double)cs[j] / (double)n;
            *x2 += e > 0.0 ? ((double)o[i][j] - e) * ((double)o[i][j] - e) / e : 0.0;
        }
    }
    int32_t df = (*rows - 1) * (*cols - 1);
    if (df < 1) {
        /* One row or column: every first token of one side in one bin,
         * which the oracle gives at most that bin's mass per token. */
        double worst = 0.0;
        for (int32_t i = 0; i < PAIR_BINS; i++) {
            worst = bin_mass[i] > worst ? bin_mass[i] : worst;
        }
        assay_check_fail(res,
                         "the first tokens of %lld requests with distinct seeds all fell in "
                         "one bin of the oracle's distribution (mass at most %.3f; a correct "
                         "engine does this with probability at most %.3f^%lld): the seed "
                         "does not reach the sampler",
                         (long long)n, worst, worst, (long long)n);
    } else {
        res->df = df;
        res->statistic = *x2;
        res->p_value = gsl_cdf_chisq_Q(*x2, (double)df);
        res->alpha = alpha;
        res->power = power;
        res->n = n;
        st = assay_min_detectable_tv(alpha, df, power, (double)n, &res->min_tv);
        if (st == ASSAY_OK && res->p_value <= alpha) {
            assay_check_fail(res,
                             "the first tokens of requests with distinct seeds are not "
                             "independent: chi-squared %.1f on %d df, p %.3g <= alpha %.0e; "
                             "%lld of %lld pairs drew the same token",
                             *x2, (int)df, res->p_value, alpha, (long long)same_token,
                             (long long)n);
        }
    }
    return st;
}

/* The seed of pair i's first (member 0) or second request: base + 4i, and
 * for the second the next seed (i even) or that seed with bit hb flipped. */
static uint64_t pair_seed(uint64_t base, int hb, int64_t i, int member)
{
    uint64_t s0 = base + 4 * (uint64_t)i;
    if (member == 0) {
        return s0;
    }
    return i % 2 == 0 ? s0 + 1 : s0 ^ ((uint64_t)1 << hb);
}

enum assay_status assay_check_seed_pairs(const struct assay_adapter *a,
                                         const struct assay_model *model, uint64_t seed,
                                         const struct assay_seeded_opts *opts, int64_t n_pairs,
                                         double alpha, double power,
                                         struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    const int32_t v = model->cfg.vocab;
    int32_t prompt[6];
    draw_prompt(seed, 9, v, 6, prompt);
    struct assay_sampling s = assay_sampling_greedy();
    s.temperature = 1.0f;
    double *p = assay_malloc(sizeof(double) * (size_t)v);
    int32_t *bin = assay_malloc(sizeof(int32_t) * (size_t)v);
    double bin_mass[PAIR_BINS] = {0};
    struct sreq *r = assay_malloc(sizeof *r * (size_t)(2 * n_pairs));
    enum assay_status st = p != NULL && bin != NULL && r != NULL ? ASSAY_OK : ASSAY_ERR_NOMEM;
    if (st == ASSAY_OK) {
        st = first_token_distribution(model, prompt, 6, &s, p);
    }
    if (st == ASSAY_OK) {
        /* Bins of about equal mass: tokens by falling probability. */
        double cum = 0.0;
        for (int32_t done = 0; done < v; done++) {
            int32_t best = -1;
            for (int32_t x = 0; x < v; x++) {
                if (p[x] >= 0.0 && (best < 0 || p[x] > p[best])) {
                    best = x;
                }
            }
            int32_t b = (int32_t)(cum * PAIR_BINS);
            bin[best] = b < PAIR_BINS ? b : PAIR_BINS - 1;
            bin_mass[bin[best]] += p[best];
            cum += p[best];
            p[best] = -1.0; /* taken */
        }
    }
    /* Seeds apart only in a high bit: bit 32 for 64-bit seeds, bit 30 for
     * 32-bit ones; the first seeds of the pairs count up from a base below
     * that bit (n_pairs is at most 2^26). */
    int hb = opts->seed_max >= ((uint64_t)1 << 34) - 1 ? 32 : 30;
    uint64_t derived = assay_seed_derive(seed, "pairs");
    uint64_t base = hb == 32 ? derived & ~(((uint64_t)1 << 33) - 1)
                             : derived & (((uint64_t)1 << 28) - 1) & ~(uint64_t)3;
    if (n_pairs > ((int64_t)1 << 26)) {
        st = ASSAY_ERR_INVALID;
    }
    /* A pair's two requests go in separate runs of up to PAIR_CHUNK: a run
     * of the first requests of PAIR_CHUNK pairs, then a run of their second
     * requests in shuffled order. A server whose logits depend on its batch
     * or its cache draws the two from different steps, in no common order,
     * so it cannot make them dependent; where they shared a step they would
     * draw from one perturbed distribution. And a run holds a bounded number
     * of live requests: an HTTP adapter's, a server's connections (the
     * test's fake server 64). at[2i] and at[2i + 1] are the places of pair
     * i's requests in r. */
    int64_t *at = st == ASSAY_OK ? assay_malloc(sizeof(int64_t) * (size_t)(2 * n_pairs)) : NULL;
    st = st != ASSAY_OK || at != NULL ? st : ASSAY_ERR_NOMEM;
    uint64_t order = assay_seed_derive(seed, "pairs order");
    for (int64_t b0 = 0; b0 < n_pairs && st == ASSAY_OK; b0 += PAIR_CHUNK) {
        int64_t m = n_pairs - b0 < PAIR_CHUNK ? n_pairs - b0 : PAIR_CHUNK;
        int64_t perm[PAIR_CHUNK];
        for (int64_t k = 0; k < m; k++) {
            perm[k] = k;
        }
        for (int64_t k = m - 1; k > 0; k--) { /* Fisher-Yates */
            int64_t j = (int64_t)(assay_rng_u01(order, (uint64_t)(b0 + k), 0) * (double)(k + 1));
            int64_t tmp = perm[k];
            perm[k] = perm[j];
            perm[j] = tmp;
        }
        for (int64_t k = 0; k < m; k++) {
            int64_t i = b0 + k, j = b0 + perm[k];
            at[2 * i] = 2 * b0 + k;
            at[2 * j + 1] = 2 * b0 + m + k;
            r[2 * b0 + k] =
                (struct sreq){prompt, 6, 1, 0, 1, pair_seed(base, hb, i, 0), 1.0, 1.0, 0};
            r[2 * b0 + m + k] =
                (struct sreq){prompt, 6, 1, 0, 1, pair_seed(base, hb, j, 1), 1.0, 1.0, 0};
        }
    }
    int32_t *first = st == ASSAY_OK ? assay_malloc(sizeof(int32_t) * (size_t)(2 * n_pairs)) : NULL;
    st = st != ASSAY_OK || first != NULL ? st : ASSAY_ERR_NOMEM;
    int64_t n_steps = 0;
    char msg[512];
    int64_t c0 = 0;
    while (st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS && c0 < 2 * n_pairs) {
        /* the first or second half of a block of pairs */
        int64_t b0 = c0 / 2 / PAIR_CHUNK * PAIR_CHUNK;
        int32_t m = (int32_t)(n_pairs - b0 < PAIR_CHUNK ? n_pairs - b0 : PAIR_CHUNK);
        struct assay_workload *w = NULL;
        struct assay_transcript *t = NULL;
        st = run_sreqs(a, v, model->cfg.n_ctx, opts, r + c0, m, &w, &t);
        if (st != ASSAY_OK) {
            break;
        }
        n_steps += t->n_steps;
        if (assay_check_delivery(w, t, msg, sizeof msg) >= 0) {
            assay_check_fail(res, "requests %lld-%lld: %s", (long long)c0, (long long)(c0 + m - 1),
                             msg);
        }
        for (int32_t k = 0; k < m; k++) {
            first[c0 + k] = t->reqs[k].n_events > 0 ? t->reqs[k].tokens[0] : -1;
        }
        assay_transcript_free(t);
        assay_workload_free(w);
        c0 += m;
    }
    int64_t o[PAIR_BINS][PAIR_BINS] = {{0}};
    int64_t n = 0, same_token = 0;
    for (int64_t i = 0; st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS && i < n_pairs; i++) {
        int32_t x = first[at[2 * i]], y = first[at[2 * i + 1]];
        if (x < 0 || x >= v || y < 0 || y >= v) {
            assay_check_fail(res, "pair %lld: tokens %d and %d, outside the vocabulary of %d",
                             (long long)i, (int)x, (int)y, (int)v);
            break;
        }
        o[bin[x]][bin[y]]++;
        same_token += x == y;
        n++;
    }
    double x2 = 0.0;
    int32_t rows = 0, cols = 0;
    if (st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS) {
        st = pair_independence((const int64_t(*)[PAIR_BINS])o, bin_mass, n, same_token, alpha,
                               power, res, &x2, &rows, &cols);
    }
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not run: %s", assay_status_str(st));
    }
    res->n_requests = 2 * n_pairs;
    res->n_tokens = 2 * n;
    res->n_steps = n_steps;
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld p %.3g min-TV %.4f | %lld pairs (adjacent seeds, and seeds apart "
             "only in bit %d; a pair's two requests in separate runs, the second's shuffled), "
             "first tokens in %d x %d bins: X2 %.1f; %lld pairs drew the same token",
             alpha, (long long)n, res->p_value, res->min_tv, (long long)n_pairs, hb, (int)rows,
             (int)cols, x2, (long long)same_token);
    assay_free(first);
    assay_free(at);
    assay_free(p);
    assay_free(bin);
    assay_free(r);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return assay_status_keep_nomem(st);
}
