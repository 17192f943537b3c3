/*
 * fuzz.c - differential fuzzing against the oracle (fuzz.h):
 * assay_fuzz_case_draw draws one case (an engine spec and a workload) from
 * (seed, index) alone, assay_fuzz_judge runs it against the oracle
 * (assay_check_equivalence) and as the long run (assay_check_soak), and
 * assay_fuzz_run runs cases first .. first+n within a time budget. The
 * plan's fuzz entry and the fuzz test label call it.
 */
#include "fuzz.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../adapters/bundled.h"
#include "../adapters/spec.h"
#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/rng.h"
#include "../core/text.h"
#include "../engine/engine.h"
#include "boundary.h"
#include "equivalence.h"
#include "property.h"

/* ---- drawing a case ------------------------------------------------------ */

struct draw {
    uint64_t seed;
    uint64_t counter;
};

#define FUZZ_PURPOSE 0x66757a7au /* "fuzz" */

static double u01(struct draw *d)
{
    return assay_rng_u01(d->seed, d->counter++, FUZZ_PURPOSE);
}

/* An integer in lo..hi, each equally likely. */
static int32_t pick(struct draw *d, int32_t lo, int32_t hi)
{
    int32_t x = lo + (int32_t)(u01(d) * (double)(hi - lo + 1));
    return x > hi ? hi : x;
}

static bool chance(struct draw *d, double p)
{
    return u01(d) < p;
}

/* The seeds a request's stream must survive: the ends of 32 and 64 bits,
 * the largest a JSON number holds exactly, and the two smallest. */
static const uint64_t k_edge_seeds[] = {0,
                                        1,
                                        2147483647ULL,
                                        4294967296ULL,
                                        9007199254740992ULL,
                                        9223372036854775808ULL,
                                        18446744073709551615ULL};

#define MAX_REQUESTS 16
#define MAX_PROMPT 96
#define MAX_OUT 24

struct drawn_request {
    int32_t prompt[MAX_PROMPT];
    int32_t len, max_tokens, arrival, stop, abort_after, abort_step;
    int kind; /* 0 greedy, 1 seeded, 2 unseeded */
    uint64_t seed;
    double temperature, top_p;
    int32_t top_k;
};

/* A prompt length at, one below or one above a multiple of the block
 * (half the time), or anywhere. */
static int32_t draw_len(struct draw *d, int32_t block, int32_t max_len)
{
    int32_t len;
    if (chance(d, 0.5)) {
        int32_t m = pick(d, 1, (max_len / block) > 1 ? max_len / block : 1);
        len = m * block + pick(d, -1, 1);
    } else {
        len = pick(d, 1, max_len);
    }
    return len < 1 ? 1 : (len > max_len ? max_len : len);
}

/* Long because its draws read in one sequence: their order is the case's
 * identity (a seed and an index give the same case in every version, so a
 * reproducer stays one), and a new draw goes after all the others. */
enum assay_status assay_fuzz_case_draw(uint64_t seed, int32_t index, int32_t vocab, int32_t n_ctx,
                                       struct assay_fuzz_case *c)
{
    memset(c, 0, sizeof *c);
    c->seed = seed;
    c->index = index;
    if (n_ctx < 32 || vocab < 8) {
        return ASSAY_ERR_INVALID;
    }
    struct draw d = {assay_mix64(seed ^ assay_mix64((uint64_t)index + 1)), 0};

    /* The engine. */
    static const int32_t blocks_sizes[] = {1, 2, 3, 4, 5, 7, 8, 16, 32};
    static const int32_t batches[] = {1, 2, 3, 4, 6, 8, 16};
    double r = u01(&d);
    const char *kv = r < 0.7 ? "paged" : r < 0.85 ? "contiguous" : "off";
    bool paged = strcmp(kv, "paged") == 0;
    int32_t block = paged ? blocks_sizes[pick(&d, 0, 8)] : 16;
    bool prefix = paged && chance(&d, 0.6);
    int32_t chunk = 0;
    r = u01(&d);
    if (strcmp(kv, "off") != 0 && r >= 0.4) {
        chunk = r < 0.7 && paged ? block * pick(&d, 1, 3) : pick(&d, 1, 24);
    }
    int32_t batch = batches[pick(&d, 0, 6)];
    int32_t spec = chance(&d, 0.35) ? pick(&d, 1, 4) : 0;
    /* Three in four speculating cases draft with a model derived from the
     * target's weights, which is mostly accepted (the plan's mini-draft is
     * rejected 97% of the time): stop tokens and the token after k accepted
     * drafts are then reached inside a round. Drawn from a stream of its
     * own, so that the other draws stay those of the case. */
    bool near = spec > 0 && assay_rng_u01(d.seed, UINT64_C(1) << 40, FUZZ_PURPOSE) < 0.75;

    /* The requests. */
    int32_t n = pick(&d, 1, MAX_REQUESTS);
    int32_t max_len = n_ctx - MAX_OUT - spec - 2;
    max_len = max_len < MAX_PROMPT ? max_len : MAX_PROMPT;
    struct drawn_request *q = assay_calloc((size_t)n, sizeof *q);
    if (q == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    int32_t arrival = 0, need_max = 0;
    int64_t need_sum = 0;
    for (int32_t i = 0; i < n; i++) {
        struct drawn_request *x = &q[i];
        r = u01(&d);
        if (i > 0 && r < 0.25) {
            /* The same prompt as an earlier request: fully cached once it ran. */
            const struct drawn_request *y = &q[pick(&d, 0, i - 1)];
            x->len = y->len;
            memcpy(x->prompt, y->prompt, sizeof(int32_t) * (size_t)y->len);
        } else if (i > 0 && r < 0.5) {
            /* A prefix of an earlier prompt, then its own tokens: partly cached. */
            const struct drawn_request *y = &q[pick(&d, 0, i - 1)];
            int32_t keep = paged && chance(&d, 0.5) && y->len >= block
                               ? block * pick(&d, 1, y->len / block)
                               : pick(&d, 1, y->len);
            x->len = draw_len(&d, block, max_len);
            x->len = x->len > keep ? x->len : keep;
            memcpy(x->prompt, y->prompt, sizeof(int32_t) * (size_t)keep);
            for (int32_t t = keep; t < x->len; t++) {
                x->prompt[t] = pick(&d, 0, vocab - 1);
            }
        } else if (i > 0 && r < 0.65) {
            /* Another prompt of an earlier one's length, arriving with it. */
            const struct drawn_request *y = &q[i - 1];
            x->len = y->len;
            for (int32_t t = 0; t < x->len; t++) {
                x->prompt[t] = pick(&d, 0, vocab - 1);
            }
        } else {
            x->len = draw_len(&d, block, max_len);
            for (int32_t t = 0; t < x->len; t++) {
                x->prompt[t] = pick(&d, 0, vocab - 1);
            }
        }
        /* Arrivals: together, on every step, or after a gap. */
        r = u01(&d);
        arrival += i == 0 ? 0 : r < 0.4 ? 0 : r < 0.8 ? 1 : pick(&d, 2, 12);
        x->arrival = arrival;
        x->max_tokens = pick(&d, 1, MAX_OUT);
        x->stop = chance(&d, 0.1) ? pick(&d, 0, vocab - 1) : -1;
        x->abort_after = -1;
        x->abort_step = -1;
        r = u01(&d);
        if (r < 0.15) {
            static const int32_t steps[] = {0, 1, 2, 3, 5, 8, 13};
            x->abort_step = steps[pick(&d, 0, 6)];
        } else if (r < 0.25 && x->max_tokens > 1) {
            x->abort_after = pick(&d, 1, x->max_tokens - 1);
        }
        r = u01(&d);
        x->kind = r < 0.55 ? 0 : r < 0.9 ? 1 : 2;
        if (x->kind != 0) {
            x->temperature = 0.5 + 0.7 * u01(&d);
            x->top_k = chance(&d, 0.5) ? pick(&d, 1, 40) : 0;
            x->top_p = chance(&d, 0.5) ? 0.7 + 0.29 * u01(&d) : 1.0;
            x->seed = chance(&d, 0.5) ? k_edge_seeds[pick(&d, 0, 6)]
                                      : assay_mix64(d.seed + d.counter++);
        }
        int32_t need = (x->len + x->max_tokens + spec + block - 1) / block + 1;
        need_max = need > need_max ? need : need_max;
        need_sum += need;
    }

    /* The pool: from barely the largest request (preemption) to roomy. */
    int32_t blocks = 0;
    if (paged) {
        double f = u01(&d);
        blocks = need_max + (int32_t)(f * f * 1.2 * (double)(need_sum - need_max + 1));
        blocks = blocks < need_max + 1 ? need_max + 1 : blocks;
        c->pressed = blocks < need_sum;
    }
    int len = 0;
    if (paged) {
        len = snprintf(c->options, sizeof c->options,
                       "kv=paged,block=%d,blocks=%d,prefix=%s,chunk=%d,batch=%d,spec=%d",
                       (int)block, (int)blocks, prefix ? "on" : "off", (int)chunk, (int)batch,
                       (int)spec);
    } else {
        len = snprintf(c->options, sizeof c->options, "kv=%s,prefix=off,chunk=%d,batch=%d,spec=%d",
                       kv, (int)chunk, (int)batch, (int)spec);
    }
    if (near && len > 0 && (size_t)len < sizeof c->options) {
        snprintf(c->options + len, sizeof c->options - (size_t)len, ",draft=near:0.05");
    }

    struct assay_text t = {NULL, 0, 0, false};
    assay_text_put(&t,
        "{\"format\":\"assay-workload\",\"version\":1,\"name\":\"fuzz-%llu-%d\","
        "\"description\":\"differential fuzzing case %d of seed %llu on %s\",\"requests\":[",
        (unsigned long long)seed, (int)index, (int)index, (unsigned long long)seed, c->options);
    for (int32_t i = 0; i < n; i++) {
        const struct drawn_request *x = &q[i];
        assay_text_put(&t, "%s{\"id\":%d,\"arrival_step\":%d,\"max_tokens\":%d,\"stop_token\":%d,"
                "\"abort_after\":%d,\"abort_step\":%d,\"prompt\":[",
            i > 0 ? "," : "", (int)i, (int)x->arrival, (int)x->max_tokens, (int)x->stop,
            (int)x->abort_after, (int)x->abort_step);
        for (int32_t k = 0; k < x->len; k++) {
            assay_text_put(&t, "%s%d", k > 0 ? "," : "", (int)x->prompt[k]);
        }
        assay_text_put(&t, "]");
        if (x->kind != 0) {
            assay_text_put(&t, ",\"sampling\":{\"temperature\":%.4f,\"top_k\":%d,\"top_p\":%.4f",
                x->temperature, (int)x->top_k, x->top_p);
            if (x->kind == 1) {
                assay_text_put(&t, ",\"seed\":\"%llu\"", (unsigned long long)x->seed);
            }
            assay_text_put(&t, "}");
        }
        assay_text_put(&t, "}");
    }
    assay_text_put(&t, "]}");
    assay_free(q);
    if (t.failed) {
        assay_text_free(&t);
        return ASSAY_ERR_NOMEM;
    }
    struct assay_workload_limits lim = {vocab, n_ctx, 0};
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_workload_parse(t.s, t.len, "fuzz case", &lim, &c->w, &diag);
    assay_text_free(&t);
    /* The generator writes only what the parser takes: anything else is a
     * bug of this file. */
    return st == ASSAY_OK || st == ASSAY_ERR_NOMEM ? st : ASSAY_ERR_INTERNAL;
}

void assay_fuzz_case_free(struct assay_fuzz_case *c)
{
    assay_workload_free(c->w);
    c->w = NULL;
}

/* ---- judging a case ------------------------------------------------------ */

/* A sub-check's verdict carried into res: FAIL or ERROR with its name. */
static void carry(struct assay_check_result *res, const struct assay_check_result *sub,
                  const char *what)
{
    res->n_requests += sub->n_requests;
    res->n_tokens += sub->n_tokens;
    res->n_ties += sub->n_ties;
    res->max_tie_gap = sub->max_tie_gap > res->max_tie_gap ? sub->max_tie_gap : res->max_tie_gap;
    res->n_steps += sub->n_steps;
    res->n_checks += sub->n_checks;
    if (sub->verdict == ASSAY_VERDICT_FAIL || sub->verdict == ASSAY_VERDICT_ERROR) {
        assay_check_set(res, sub->verdict, "%s: %.560s", what, sub->failure);
    }
}

enum assay_status assay_fuzz_judge(const char *spec, const struct assay_workload *w,
                                   struct assay_oracle_memo *memo, struct assay_check_result *res)
{
    struct assay_adapter a;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_adapter_open_spec(spec, &a, &diag);
    if (st != ASSAY_OK) {
        char why[400];
        assay_check_error(res, "engine %.200s: %.300s", spec,
                          assay_diag_format(&diag, why, sizeof why));
        return st;
    }
    struct assay_check_result sub;
    assay_check_result_init(&sub, "equivalence", ASSAY_FAMILY_EQUIVALENCE);
    st = assay_check_equivalence(&a, w, memo, NULL, &sub);
    carry(res, &sub, "against the oracle");
    if (st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS) {
        assay_check_result_init(&sub, "soak", ASSAY_FAMILY_PROPERTY);
        st = assay_check_soak(&a, w, NULL, &sub);
        sub.n_tokens = 0; /* tokens and requests counted once: the oracle's comparisons */
        sub.n_requests = 0;
        carry(res, &sub, "blocks, trace and concurrency 1");
    }
    assay_adapter_close(&a);
    return assay_status_keep_nomem(st);
}

/* The draft's oracle of the speculating cases: one copy of the draft's
 * weights and its memo, kept while the cases draft with the same weights. */
struct draft_oracle {
    char sha256[65];
    struct assay_model *model;
    struct assay_oracle_memo *memo;
};

static void draft_oracle_free(struct draft_oracle *d)
{
    assay_oracle_memo_free(d->memo);
    assay_model_free(d->model);
    memset(d, 0, sizeof *d);
}

/* The draft oracle and draft length of the engine spec names (*memo NULL:
 * it does not speculate, or it could not be opened, which its judge says). */
static enum assay_status draft_oracle_for(struct draft_oracle *d, const char *spec,
                                          struct assay_oracle_memo **memo, int32_t *spec_k)
{
    *memo = NULL;
    *spec_k = 0;
    struct assay_adapter a;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (strstr(spec, "spec=0") != NULL || assay_adapter_open_spec(spec, &a, &diag) != ASSAY_OK) {
        return ASSAY_OK;
    }
    const struct assay_engine *e = assay_bundled_engine(&a);
    const struct assay_engine_params *ep = e != NULL ? assay_engine_params(e) : NULL;
    enum assay_status st = ASSAY_OK;
    if (ep != NULL && ep->spec_k > 0 && ep->draft != NULL) {
        if (d->memo == NULL || strcmp(d->sha256, ep->draft->sha256) != 0) {
            draft_oracle_free(d);
            st = assay_model_clone(ep->draft, &d->model);
            if (st == ASSAY_OK) {
                st = assay_oracle_memo_init(&d->memo, d->model, d->model->cfg.n_ctx);
            }
            if (st == ASSAY_OK) {
                snprintf(d->sha256, sizeof d->sha256, "%s", ep->draft->sha256);
            } else {
                draft_oracle_free(d);
            }
        }
        *memo = d->memo;
        *spec_k = ep->spec_k;
    }
    assay_adapter_close(&a);
    return st;
}

/* Stop tokens steered to where they matter. A stop token drawn at random
 * is almost never generated, so a greedy request's drawn stop token is
 * replaced by a token of the oracle's greedy continuation: half the time
 * (by the drawn token's parity) the last token its length limit allows
 * (when that token is not generated before it: the stop and the limit
 * meet), else the token at a position the drawn token picks (the request
 * stops at that token's first appearance). In a speculating case, a
 * quarter of the latter (drawn token 1 mod 8) take instead the draft's
 * proposal that the first rejecting round rejects, when there is one
 * (assay_boundary_rejected_proposal, draft_memo the draft's oracle): the
 * request must not stop there. (A half, 1 mod 4, left too few stops
 * accepted inside a round: spec-past-accepted-stop was caught under 18
 * of 20 master seeds.) The case stays a function of (seed, index)
 * and the models' weights. */
static enum assay_status steer_stops(struct assay_oracle_memo *memo,
                                     struct assay_oracle_memo *draft_memo, int32_t spec_k,
                                     struct assay_workload *w, int32_t vocab)
{
    for (int32_t k = 0; k < w->n; k++) {
        struct assay_workload_request *r = &w->reqs[k];
        if (r->stop_token < 0 || r->sampling.temperature > 0 || r->max_tokens < 1 ||
            r->max_tokens > MAX_OUT) {
            continue;
        }
        int32_t out[MAX_OUT];
        enum assay_status st =
            assay_oracle_memo_greedy(memo, r->prompt, r->prompt_len, vocab, r->max_tokens, out);
        if (st != ASSAY_OK) {
            return st;
        }
        int32_t last = r->max_tokens - 1, j = r->stop_token % r->max_tokens;
        if (r->stop_token % 2 == 0) {
            bool earlier = false;
            for (int32_t t = 0; t < last; t++) {
                earlier = earlier || out[t] == out[last];
            }
            j = earlier ? j : last;
        } else if (draft_memo != NULL && r->stop_token % 8 == 1) {
            int32_t at = -1, token = -1;
            st = assay_boundary_rejected_proposal(draft_memo, r->prompt, r->prompt_len, out,
                                                  r->max_tokens, vocab, spec_k, r->max_tokens,
                                                  &at, &token);
            if (st != ASSAY_OK) {
                return st;
            }
            if (at >= 0) {
                r->stop_token = token;
                continue;
            }
        }
        r->stop_token = out[j];
    }
    return ASSAY_OK;
}

/* The engine spec of case c: base_spec with the case's options set over it. */
static void case_spec(const char *base_spec, const struct assay_fuzz_case *c, char *spec,
                      size_t size)
{
    char next[1024];
    snprintf(spec, size, "%s", base_spec);
    char opts[sizeof c->options];
    snprintf(opts, sizeof opts, "%s", c->options);
    char *save = NULL;
    for (char *kv = strtok_r(opts, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        *eq = '\0';
        assay_spec_with(spec, kv, eq + 1, next, sizeof next);
        snprintf(spec, size, "%s", next);
    }
}

enum assay_status assay_fuzz_run(const char *base_spec, int32_t vocab, int32_t n_ctx,
                                 struct assay_oracle_memo *memo, uint64_t seed, int32_t first,
                                 int32_t n, double max_seconds,
                                 void (*progress)(void *ctx, int32_t done, int32_t n),
                                 void *progress_ctx, struct assay_fuzz_tally *tally,
                                 struct assay_fuzz_case *failed, struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    memset(tally, 0, sizeof *tally);
    memset(failed, 0, sizeof *failed);
    res->max_tie_gap = 0.0;
    enum assay_status st = ASSAY_OK;
    struct draft_oracle draft;
    memset(&draft, 0, sizeof draft);
    for (int32_t i = 0; i < n && st == ASSAY_OK; i++) {
        if (i > 0 && max_seconds > 0 && (double)(assay_now_ns() - t0) / 1e9 >= max_seconds) {
            break;
        }
        struct assay_fuzz_case c;
        char spec[1024];
        st = assay_fuzz_case_draw(seed, first + i, vocab, n_ctx, &c);
        if (st == ASSAY_OK) {
            case_spec(base_spec, &c, spec, sizeof spec);
            struct assay_oracle_memo *draft_memo = NULL;
            int32_t spec_k = 0;
            st = draft_oracle_for(&draft, spec, &draft_memo, &spec_k);
            if (st == ASSAY_OK) {
                st = steer_stops(memo, draft_memo, spec_k, c.w, vocab);
            }
            if (st != ASSAY_OK) {
                assay_fuzz_case_free(&c);
            }
        }
        if (st != ASSAY_OK) {
            assay_check_error(res, "case %d could not be drawn: %s", (int)(first + i),
                              assay_status_str(st));
            break;
        }
        tally->cases++;
        tally->paged += strstr(c.options, "kv=paged") != NULL;
        tally->prefix += strstr(c.options, "prefix=on") != NULL;
        tally->chunked += strstr(c.options, "chunk=0") == NULL;
        tally->speculating += strstr(c.options, "spec=0") == NULL;
        tally->pressed += c.pressed;
        for (int32_t k = 0; k < c.w->n; k++) {
            const struct assay_workload_request *r = &c.w->reqs[k];
            tally->requests++;
            tally->aborted_by_step += r->abort_step >= 0;
            tally->aborted_by_tokens += r->abort_after >= 0;
            tally->seeded += r->sampling.temperature > 0 && r->sampling.seeded;
            tally->greedy += r->sampling.temperature <= 0;
        }
        st = assay_fuzz_judge(spec, c.w, memo, res);
        if (res->verdict != ASSAY_VERDICT_PASS) {
            char why[sizeof res->failure];
            snprintf(why, sizeof why, "%s", res->failure);
            snprintf(res->failure, sizeof res->failure, "case %d (%.200s): %.400s",
                     (int)(first + i), c.options, why);
            snprintf(res->engine, sizeof res->engine, "%.310s", spec);
            *failed = c;
            break;
        }
        assay_fuzz_case_free(&c);
        if (progress != NULL) {
            progress(progress_ctx, i + 1, n);
        }
    }
    draft_oracle_free(&draft);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}
