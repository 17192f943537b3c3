/*
 * boundary.c - the boundary workload and the watch that counts the
 * boundaries reached (boundary.h). The generator writes the workload as
 * JSON and parses it with the workload parser, as the fuzzer does, so a
 * generated workload is exactly one a user could have written (and can be
 * saved and rerun). The watch is a pass-through adapter: it changes no
 * call, it only looks.
 */
#include "boundary.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/rng.h"
#include "../core/text.h"
#include "equivalence.h"

static const char *const k_names[ASSAY_BOUNDARY_N] = {
    "stop-at-limit",  "stop-in-draft",   "stop-rejected",   "abort-queued",
    "abort-prefill",  "abort-decoding",  "abort-rejected",  "abort-accepted",
    "abort-preempted", "prompt-block-1", "prompt-block",    "prompt-block+1",
    "prompt-cached",  "pool-full",
};

const char *assay_boundary_name(enum assay_boundary b)
{
    return (unsigned)b < ASSAY_BOUNDARY_N ? k_names[b] : "?";
}

/* ---- the engine's shape ------------------------------------------------- */

/* The integer value of key in spec's options, or dflt. */
static int32_t spec_int(const char *spec, const char *key, int32_t dflt)
{
    size_t klen = strlen(key);
    for (const char *p = strchr(spec, ':'); p != NULL; p = strchr(p + 1, ',')) {
        if (strncmp(p + 1, key, klen) == 0 && p[1 + klen] == '=') {
            return (int32_t)atol(p + 2 + klen);
        }
    }
    return dflt;
}

struct assay_boundary_shape assay_boundary_shape_of(const char *spec)
{
    struct assay_boundary_shape s;
    bool paged = strstr(spec, "kv=paged") != NULL;
    s.block = paged ? spec_int(spec, "block", 16) : 1;
    s.blocks = paged ? spec_int(spec, "blocks", 0) : 0;
    s.chunk = spec_int(spec, "chunk", 0);
    s.spec = spec_int(spec, "spec", 0);
    s.batch = spec_int(spec, "batch", 8);
    s.block = s.block > 0 ? s.block : 1;
    return s;
}

/* ---- the generator ------------------------------------------------------ */

#define BOUNDARY_PURPOSE 0x626e6479u /* "bndy" */
#define MAX_PLANNED 96
#define MAX_GREEDY 24

struct planned {
    int32_t *prompt; /* borrowed from the plan's store */
    int32_t len;
    int32_t arrival;
    int32_t max_tokens;
    int32_t stop;
    int32_t abort_after;
    int32_t abort_step;
    bool sampled; /* temperature 1, seeded */
    int32_t order; /* when it was placed: ties of arrival keep it */
    int32_t draft_stop_at; /* the output position where the draft proposes
                              the stop token and the target rejects it, or -1 */
};

struct plan {
    struct planned r[MAX_PLANNED];
    int32_t n;
    int32_t *store;
    int64_t used, cap;
    uint64_t seed;
    uint64_t counter;
    int32_t vocab;
};

static int32_t pick(struct plan *p, int32_t lo, int32_t hi)
{
    int32_t x = lo + (int32_t)(assay_rng_u01(p->seed, p->counter++, BOUNDARY_PURPOSE) *
                               (double)(hi - lo + 1));
    return x > hi ? hi : x;
}

/* A new request with a fresh random prompt of len tokens (or a copy of
 * `same`'s prompt when same >= 0), greedy, no stop, no abort. */
static struct planned *add(struct plan *p, int32_t len, int32_t arrival, int32_t max_tokens,
                           int32_t same)
{
    if (p->n >= MAX_PLANNED || p->used + len > p->cap) {
        return NULL;
    }
    struct planned *x = &p->r[p->n++];
    memset(x, 0, sizeof *x);
    x->prompt = p->store + p->used;
    p->used += len;
    x->len = len;
    for (int32_t t = 0; t < len; t++) {
        x->prompt[t] = same >= 0 ? p->r[same].prompt[t] : pick(p, 0, p->vocab - 1);
    }
    x->arrival = arrival;
    x->order = p->n - 1;
    x->max_tokens = max_tokens;
    x->stop = -1;
    x->abort_after = -1;
    x->abort_step = -1;
    x->draft_stop_at = -1;
    return x;
}

/* Whether out[at] first appears at position at. */
static bool first_at(const int32_t *out, int32_t at)
{
    for (int32_t t = 0; t < at; t++) {
        if (out[t] == out[at]) {
            return false;
        }
    }
    return true;
}

/* Greedy requests whose stop token the oracle generates first at position
 * `at` of a continuation of max_tokens (at = max_tokens - 1: the stop meets
 * the length limit). Tries fresh prompts until `want` are found or the
 * tries run out (the last tried is kept: the report then says the
 * boundary was not reached). */
static enum assay_status place_stops(struct plan *p, struct assay_oracle_memo *memo, int32_t want,
                                     int32_t at, int32_t max_tokens, int32_t len,
                                     int32_t *arrival, int32_t gap)
{
    int32_t out[MAX_GREEDY];
    for (int32_t found = 0, tries = 0; found < want && tries < 16; tries++) {
        struct planned *x = add(p, len, *arrival, max_tokens, -1);
        if (x == NULL) {
            return ASSAY_ERR_INVALID;
        }
        enum assay_status st =
            assay_oracle_memo_greedy(memo, x->prompt, x->len, p->vocab, at + 1, out);
        if (st != ASSAY_OK) {
            return st;
        }
        if (first_at(out, at) || tries == 15) {
            x->stop = out[at];
            found++;
            *arrival += gap;
        } else {
            p->n--; /* not this prompt: its tokens are drawn again */
            p->used -= len;
        }
    }
    return ASSAY_OK;
}

/* The first output position below n where a round of the bundled engine
 * (spec proposals a round, fewer where max_tokens leaves less room; all
 * accepted: one token more from the target) rejects a greedy proposal,
 * given the target's tokens out and the draft's argmaxes g; -1 if none. */
static int32_t first_rejection(const int32_t *out, const int32_t *g, int32_t n, int32_t spec,
                               int32_t max_tokens)
{
    for (int32_t s = 0; s < n;) {
        int32_t k = max_tokens - s - 1;
        k = k < spec ? k : spec;
        int32_t j = 0;
        while (j < k && s + j < n && g[s + j] == out[s + j]) {
            j++;
        }
        if (j < k && s + j < n) {
            return s + j;
        }
        s += k + 1;
    }
    return -1;
}

enum assay_status assay_boundary_rejected_proposal(struct assay_oracle_memo *draft_memo,
                                                  const int32_t *prompt, int32_t len,
                                                  const int32_t *out, int32_t n, int32_t vocab,
                                                  int32_t spec, int32_t max_tokens, int32_t *at,
                                                  int32_t *token)
{
    *at = -1;
    *token = -1;
    const double *rows = NULL;
    enum assay_status st = assay_oracle_memo_rows(draft_memo, prompt, len, out, n, &rows);
    int32_t *g = st == ASSAY_OK ? assay_calloc((size_t)n + 1, sizeof *g) : NULL;
    double *margin = g != NULL ? assay_calloc((size_t)n + 1, sizeof *margin) : NULL;
    if (st != ASSAY_OK || margin == NULL) {
        assay_free(g);
        return st != ASSAY_OK ? st : ASSAY_ERR_NOMEM;
    }
    for (int32_t t = 0; t < n; t++) {
        const double *r = rows + (int64_t)t * vocab;
        int32_t best = 0;
        double second = -1e300;
        for (int32_t v = 1; v < vocab; v++) {
            if (r[v] > r[best]) {
                second = r[best];
                best = v;
            } else if (r[v] > second) {
                second = r[v];
            }
        }
        g[t] = best;
        margin[t] = r[best] - second;
    }
    int32_t j = first_rejection(out, g, n, spec, max_tokens);
    bool fits = j >= 0 && margin[j] > 1e-3;
    for (int32_t t = 0; fits && t < j; t++) {
        fits = out[t] != g[j];
    }
    if (fits) {
        *at = j;
        *token = g[j];
    }
    assay_free(g);
    assay_free(margin);
    return ASSAY_OK;
}

/* Greedy requests whose stop token is a proposal of the draft that the
 * target rejects (assay_boundary_rejected_proposal). */
static enum assay_status place_rejected_stops(struct plan *p, struct assay_oracle_memo *memo,
                                              struct assay_oracle_memo *draft_memo, int32_t spec,
                                              int32_t want, int32_t *arrival)
{
    enum { N = 16 };
    int32_t out[N];
    for (int32_t found = 0, tries = 0; found < want && tries < 32; tries++) {
        struct planned *x = add(p, 5 + tries % 4, *arrival, N, -1);
        if (x == NULL) {
            return ASSAY_ERR_INVALID;
        }
        int32_t at = -1, token = -1;
        enum assay_status st = assay_oracle_memo_greedy(memo, x->prompt, x->len, p->vocab, N, out);
        if (st == ASSAY_OK) {
            st = assay_boundary_rejected_proposal(draft_memo, x->prompt, x->len, out, N - 1,
                                                  p->vocab, spec, N, &at, &token);
        }
        if (st != ASSAY_OK) {
            return st;
        }
        if (at >= 0) {
            x->stop = token;
            x->draft_stop_at = at;
            found++;
            *arrival += 2;
        } else {
            p->n--; /* not this prompt: its tokens are drawn again */
            p->used -= x->len;
        }
    }
    return ASSAY_OK;
}

/* Phase one: requests mostly one at a time, each at one boundary. */
static enum assay_status phase_one(struct plan *p, const struct assay_boundary_shape *s,
                                   struct assay_oracle_memo *memo,
                                   struct assay_oracle_memo *draft_memo, int32_t *arrival,
                                   int32_t *cached_src)
{
    int32_t b = s->block, a = *arrival;
    /* Prompt lengths either side of a block multiple, and three whole
     * blocks, run again soon after and in phase two (wholly cached). */
    for (int32_t m = 1; m <= 2; m++) {
        for (int32_t d = -1; d <= 1; d++) {
            if (m * b + d >= 1 && add(p, m * b + d, a, 4, -1) == NULL) {
                return ASSAY_ERR_INVALID;
            }
            a += 1;
        }
    }
    int32_t src = p->n;
    if (add(p, 3 * b > 2 ? 3 * b : 3, a, 4, -1) == NULL ||
        add(p, p->r[src].len, a + 8, 4, src) == NULL) {
        return ASSAY_ERR_INVALID;
    }
    *cached_src = src;
    a += 3;
    /* The stop token as the last token the length limit allows. */
    enum assay_status st = place_stops(p, memo, 2, 5, 6, 7, &a, 2);
    /* The stop token among accepted drafts: stopped inside the round. */
    for (int32_t at = 2; st == ASSAY_OK && s->spec > 0 && at < 14; at++) {
        st = place_stops(p, memo, 1, at, 16, 6 + at % 5, &a, 2);
    }
    /* The stop token proposed by the draft and rejected: not stopped. */
    if (st == ASSAY_OK && s->spec > 0 && draft_memo != NULL) {
        st = place_rejected_stops(p, memo, draft_memo, s->spec, 3, &a);
    }
    if (st != ASSAY_OK) {
        return st;
    }
    /* Aborts: queued (before its first step, beside a request that runs),
     * after each of the first three prefill chunks, while decoding. */
    struct planned *x = add(p, 9, a, 8, -1);
    struct planned *q = add(p, 9, a, 8, -1);
    if (x == NULL || q == NULL) {
        return ASSAY_ERR_INVALID;
    }
    q->abort_step = 0;
    a += 4;
    int32_t chunk = s->chunk > 0 ? s->chunk : 0;
    for (int32_t c = 1; chunk > 0 && c <= 3; c++) {
        x = add(p, 3 * chunk + 2, a, 4, -1);
        if (x == NULL) {
            return ASSAY_ERR_INVALID;
        }
        x->abort_step = c;
        a += 6;
    }
    x = add(p, 5, a, 10, -1);
    if (x == NULL) {
        return ASSAY_ERR_INVALID;
    }
    x->abort_after = 3;
    a += 2;
    /* Aborts right after a round: sampled at temperature 1, so that some
     * rounds reject drafts; aborted at several steps. */
    for (int32_t k = 0; s->spec > 0 && k < 24; k++) {
        x = add(p, 6, a, 24, -1);
        if (x == NULL) {
            return ASSAY_ERR_INVALID;
        }
        x->sampled = true;
        x->abort_step = 4 + k % 6;
        a += 2;
    }
    *arrival = a + 30;
    return ASSAY_OK;
}

/* Phase two: the repeated prompt, then more requests at once than the pool
 * holds; the later ones aborted at several steps (preempted by then, on an
 * engine that preempts the newest). */
static enum assay_status phase_two(struct plan *p, const struct assay_boundary_shape *s,
                                   int32_t n_ctx, int32_t arrival, int32_t cached_src)
{
    if (add(p, p->r[cached_src].len, arrival, 4, cached_src) == NULL) {
        return ASSAY_ERR_INVALID;
    }
    arrival += 8;
    if (s->blocks <= 0) {
        return ASSAY_OK;
    }
    /* Each request, at its end, holds a little over half the pool: any
     * two running together run it dry (on a pool small enough for the
     * context; a larger one is reported as not filled). */
    int32_t b = s->block;
    int32_t len = 3 * b + 1;
    int32_t max_tokens = (s->blocks / 2 + 1) * b - len - s->spec;
    int32_t room = n_ctx - len - s->spec - 2;
    max_tokens = max_tokens > room ? room : max_tokens;
    max_tokens = max_tokens < 4 * b ? 4 * b : max_tokens > 96 ? 96 : max_tokens;
    int32_t need = (len + max_tokens + s->spec + b - 1) / b + 1;
    if (need >= s->blocks) {
        return ASSAY_ERR_INVALID; /* one request alone must fit the pool */
    }
    /* Two long requests first; four more, as long, two steps later,
     * admitted while the pool has room and preempted (the newest first)
     * as the six grow; the newcomers aborted at steps spread over that
     * wait, the newest first. */
    for (int32_t i = 0; i < 6; i++) {
        struct planned *x = add(p, len, i < 2 ? arrival : arrival + 2, max_tokens, -1);
        if (x == NULL) {
            return ASSAY_ERR_INVALID;
        }
        x->abort_step = i < 2 ? -1 : 10 + 3 * (5 - i);
    }
    return ASSAY_OK;
}

static void put_workload(struct assay_text *t, const struct plan *p, uint64_t seed)
{
    assay_text_put(t,
                   "{\"format\":\"assay-workload\",\"version\":1,\"name\":\"boundaries-%llu\","
                   "\"description\":\"every boundary of the engine's state machine, placed "
                   "(checks/boundary.h)\",\"requests\":[",
                   (unsigned long long)seed);
    for (int32_t i = 0; i < p->n; i++) {
        const struct planned *x = &p->r[i];
        assay_text_put(t,
                       "%s{\"id\":%d,\"arrival_step\":%d,\"max_tokens\":%d,\"stop_token\":%d,"
                       "\"abort_after\":%d,\"abort_step\":%d,\"prompt\":[",
                       i > 0 ? "," : "", (int)i, (int)x->arrival, (int)x->max_tokens,
                       (int)x->stop, (int)x->abort_after, (int)x->abort_step);
        for (int32_t k = 0; k < x->len; k++) {
            assay_text_put(t, "%s%d", k > 0 ? "," : "", (int)x->prompt[k]);
        }
        assay_text_put(t, "]");
        if (x->sampled) {
            assay_text_put(t, ",\"sampling\":{\"temperature\":1.0,\"seed\":\"%llu\"}",
                           (unsigned long long)assay_mix64(seed + (uint64_t)i));
        }
        assay_text_put(t, "}");
    }
    assay_text_put(t, "]}");
}

/* Requests sorted by arrival (the parser and the harness want them so),
 * then by placement: the same order whatever qsort does with ties. */
static int by_arrival(const void *a, const void *b)
{
    const struct planned *x = a, *y = b;
    if (x->arrival != y->arrival) {
        return (x->arrival > y->arrival) - (x->arrival < y->arrival);
    }
    return (x->order > y->order) - (x->order < y->order);
}

enum assay_status assay_boundary_workload(const struct assay_boundary_shape *s, int32_t vocab,
                                          int32_t n_ctx, struct assay_oracle_memo *memo,
                                          struct assay_oracle_memo *draft_memo, uint64_t seed,
                                          struct assay_workload **out,
                                          struct assay_boundary_expect *expect)
{
    *out = NULL;
    if (expect != NULL) {
        expect->n = 0;
    }
    int32_t longest = 3 * (s->chunk > s->block ? s->chunk : s->block) + 2 + 4 * s->block + 96;
    if (vocab < 8 || n_ctx < 64 || n_ctx < longest + s->spec + 2 || s->block < 1) {
        return ASSAY_ERR_INVALID;
    }
    struct plan *p = assay_calloc(1, sizeof *p);
    if (p == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    p->cap = (int64_t)MAX_PLANNED * longest;
    p->store = assay_calloc((size_t)p->cap, sizeof(int32_t));
    p->seed = seed;
    p->vocab = vocab;
    enum assay_status st = p->store == NULL ? ASSAY_ERR_NOMEM : ASSAY_OK;
    int32_t arrival = 0, cached_src = -1;
    if (st == ASSAY_OK) {
        st = phase_one(p, s, memo, draft_memo, &arrival, &cached_src);
    }
    if (st == ASSAY_OK) {
        st = phase_two(p, s, n_ctx, arrival, cached_src);
    }
    struct assay_text t = {NULL, 0, 0, false};
    if (st == ASSAY_OK) {
        qsort(p->r, (size_t)p->n, sizeof p->r[0], by_arrival);
        for (int32_t i = 0; i < p->n && expect != NULL; i++) {
            if (p->r[i].draft_stop_at >= 0 && expect->n < ASSAY_BOUNDARY_MAX_EXPECT) {
                expect->id[expect->n] = (uint64_t)i; /* put_workload's id */
                expect->at[expect->n++] = p->r[i].draft_stop_at;
            }
        }
        put_workload(&t, p, seed);
        st = t.failed ? ASSAY_ERR_NOMEM : ASSAY_OK;
    }
    if (st == ASSAY_OK) {
        struct assay_workload_limits lim = {vocab, n_ctx, 0};
        struct assay_diag diag;
        assay_diag_clear(&diag);
        st = assay_workload_parse(t.s, t.len, "boundary workload", &lim, out, &diag);
        /* The generator writes only what the parser takes. */
        st = st == ASSAY_OK || st == ASSAY_ERR_NOMEM ? st : ASSAY_ERR_INTERNAL;
    }
    assay_text_free(&t);
    assay_free(p->store);
    assay_free(p);
    return st;
}

/* ---- the watch ---------------------------------------------------------- */

struct watched {
    uint64_t id;
    int32_t prompt_len;
    int32_t max_tokens;
    int32_t stop;
    int32_t n_tokens;      /* TOKEN events so far */
    bool finished;
    bool aborted;          /* the abort was accepted */
    bool seen;             /* has held blocks */
    bool present;          /* held blocks after the last step */
    bool was_present;      /* after the step before */
    int32_t n_computed;    /* after the last step, while present */
    int32_t prefill_steps; /* steps that advanced its prompt's prefill */
    int64_t round_step;    /* the step of its last speculative round */
    int32_t round_index;   /* that round: output position of its first draft */
    int32_t round_accepted;
    bool round_rejected;
    int32_t draft_stop_at; /* the generator's expectation, or -1 */
};

struct assay_boundary_watch {
    struct assay_adapter inner;
    struct assay_adapter_vtable vt;
    struct watched *reqs;
    int32_t n, cap;
    int64_t step;
    bool audited;          /* the inner adapter has block accounting */
    int32_t block_size;    /* its KV block size (0: not paged) */
    uint8_t *registered;   /* [n_registered] registered in the prefix cache after the last step */
    int32_t n_registered;
    int32_t count[ASSAY_BOUNDARY_N];
    uint32_t chunks;
    struct assay_boundary_expect expect;
};

/* The live entry of id (or the latest one), or NULL. */
static struct watched *find(struct assay_boundary_watch *w, uint64_t id)
{
    for (int32_t i = w->n - 1; i >= 0; i--) {
        if (w->reqs[i].id == id) {
            return &w->reqs[i];
        }
    }
    return NULL;
}

static enum assay_status watch_add(void *self, const struct assay_request *req)
{
    struct assay_boundary_watch *w = self;
    enum assay_status st = w->inner.vt->add_request(w->inner.self, req);
    if (st != ASSAY_OK) {
        return st;
    }
    struct watched *r = find(w, req->id);
    if (r == NULL) {
        if (w->n == w->cap) {
            int32_t cap = w->cap > 0 ? 2 * w->cap : 64;
            struct watched *g = assay_realloc(w->reqs, (size_t)cap * sizeof *g);
            if (g == NULL) {
                return ASSAY_OK; /* not watched: counted as not reached, never wrong */
            }
            w->reqs = g;
            w->cap = cap;
        }
        r = &w->reqs[w->n++];
    }
    memset(r, 0, sizeof *r);
    r->id = req->id;
    r->prompt_len = req->prompt_len;
    r->max_tokens = req->max_tokens;
    r->stop = req->stop_token;
    r->round_step = -1;
    r->draft_stop_at = -1;
    for (int32_t i = 0; i < w->expect.n; i++) {
        if (w->expect.id[i] == req->id) {
            r->draft_stop_at = w->expect.at[i];
        }
    }
    return ASSAY_OK;
}

static bool watch_has_work(void *self)
{
    struct assay_boundary_watch *w = self;
    return w->inner.vt->has_work(w->inner.self);
}

/* A request served to its end: which block boundary its prompt sits on. */
static void served(struct assay_boundary_watch *w, const struct watched *r)
{
    int32_t b = w->block_size;
    if (b <= 1) {
        return; /* no blocks: no block boundary */
    }
    int32_t rest = r->prompt_len % b;
    if (rest == b - 1) {
        w->count[ASSAY_BOUNDARY_PROMPT_BELOW]++;
    } else if (rest == 0) {
        w->count[ASSAY_BOUNDARY_PROMPT_MULTIPLE]++;
    } else if (rest == 1) {
        w->count[ASSAY_BOUNDARY_PROMPT_ABOVE]++;
    }
}

/* The step's events: rounds first (a token's round may come after it). */
static void watch_events(struct assay_boundary_watch *w, const struct assay_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct watched *r = find(w, ev[i].request_id);
        if (r != NULL && ev[i].kind == ASSAY_EVENT_SPEC_ROUND) {
            r->round_step = w->step;
            r->round_index = ev[i].index;
            r->round_accepted = ev[i].n_accepted;
            r->round_rejected = ev[i].n_accepted < ev[i].n_drafted;
            if (r->round_rejected && ev[i].index + ev[i].n_accepted == r->draft_stop_at) {
                w->count[ASSAY_BOUNDARY_STOP_REJECTED]++;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct watched *r = find(w, ev[i].request_id);
        if (r == NULL || r->finished) {
            continue;
        }
        if (ev[i].kind == ASSAY_EVENT_TOKEN) {
            r->n_tokens++;
            if (ev[i].token == r->stop && r->round_step == w->step &&
                ev[i].index >= r->round_index &&
                ev[i].index < r->round_index + r->round_accepted) {
                w->count[ASSAY_BOUNDARY_STOP_IN_DRAFT]++;
            }
        } else if (ev[i].kind == ASSAY_EVENT_FINISH) {
            r->finished = true;
            if (ev[i].reason == ASSAY_FINISH_STOP && ev[i].index == r->max_tokens) {
                w->count[ASSAY_BOUNDARY_STOP_AT_LIMIT]++;
            }
            if (ev[i].reason == ASSAY_FINISH_STOP || ev[i].reason == ASSAY_FINISH_LENGTH) {
                served(w, r);
            }
        }
    }
}

/* The block accounting after the step: who holds blocks, how far each
 * prefill went, prefix-cache hits at a request's first step, a full pool. */
static void watch_blocks(struct assay_boundary_watch *w)
{
    struct assay_block_audit au;
    if (!w->audited || w->inner.vt->block_audit(w->inner.self, &au) != ASSAY_OK) {
        return;
    }
    for (int32_t i = 0; i < w->n; i++) {
        w->reqs[i].was_present = w->reqs[i].present;
        w->reqs[i].present = false;
    }
    int32_t b = au.stats.block_size;
    for (int32_t s = 0; s < au.n_seqs; s++) {
        struct watched *r = find(w, au.seq_id[s]);
        if (r == NULL || r->finished) {
            continue;
        }
        if (!r->seen && b > 1 && r->prompt_len % b == 0 && r->prompt_len / b >= 2) {
            int32_t hits = 0;
            while (hits < au.seq_n_blocks[s]) {
                int32_t id = au.seq_blocks[s][hits];
                if (id < 0 || id >= w->n_registered || !w->registered[id]) {
                    break;
                }
                hits++;
            }
            if (hits >= r->prompt_len / b - 1) {
                w->count[ASSAY_BOUNDARY_PROMPT_CACHED]++;
            }
        }
        int32_t computed = au.seq_n_computed[s];
        /* Progress since the step before; a request back from preemption
         * starts its prefill again from nothing. */
        if (computed > (r->was_present ? r->n_computed : 0) && computed < r->prompt_len) {
            r->prefill_steps++;
        }
        r->seen = true;
        r->present = true;
        r->n_computed = computed;
    }
    if (au.stats.total > w->n_registered) {
        uint8_t *g = assay_realloc(w->registered, (size_t)au.stats.total);
        if (g == NULL) {
            return;
        }
        w->registered = g;
        w->n_registered = au.stats.total;
    }
    memset(w->registered, 0, (size_t)w->n_registered);
    for (int32_t i = 0; i < au.n_cache; i++) {
        int32_t id = au.cache_block[i];
        if (id >= 0 && id < w->n_registered) {
            w->registered[id] = 1;
        }
    }
    /* A request that held blocks, holds none now, and neither finished nor
     * was aborted was preempted: the pool ran dry during the step. */
    bool dry = au.stats.total > 0 && au.stats.free == 0 && au.stats.cached == 0;
    for (int32_t i = 0; i < w->n; i++) {
        const struct watched *r = &w->reqs[i];
        dry = dry || (r->was_present && !r->present && !r->finished && !r->aborted);
    }
    if (dry) {
        w->count[ASSAY_BOUNDARY_POOL_FULL]++;
    }
}

static enum assay_status watch_step(void *self, const struct assay_event **events, size_t *n)
{
    struct assay_boundary_watch *w = self;
    enum assay_status st = w->inner.vt->step(w->inner.self, events, n);
    w->step++;
    if (st == ASSAY_OK) {
        watch_events(w, *events, *n);
        /* The events stay the inner adapter's: block_audit touches only
         * the engine's accounting, not its event buffer. */
        watch_blocks(w);
    }
    return st;
}

static enum assay_status watch_abort(void *self, uint64_t id)
{
    struct assay_boundary_watch *w = self;
    struct watched *r = find(w, id);
    int b = -1, round = -1; /* round: also right after a speculative round */
    if (r != NULL && !r->finished) {
        if (w->audited && !r->seen && r->n_tokens == 0) {
            b = ASSAY_BOUNDARY_ABORT_QUEUED;
        } else if (w->audited && r->seen && !r->present) {
            b = ASSAY_BOUNDARY_ABORT_PREEMPTED;
        } else if (r->present && r->n_computed > 0 && r->n_computed < r->prompt_len - 1) {
            b = ASSAY_BOUNDARY_ABORT_PREFILL;
        } else if (r->n_tokens > 0) {
            b = ASSAY_BOUNDARY_ABORT_DECODING;
        }
        if (r->round_step == w->step) {
            round = r->round_rejected ? ASSAY_BOUNDARY_ABORT_REJECTED
                                      : ASSAY_BOUNDARY_ABORT_ACCEPTED;
        }
    }
    enum assay_status st = w->inner.vt->abort(w->inner.self, id);
    if (st == ASSAY_OK && r != NULL) {
        r->aborted = true;
    }
    if (st == ASSAY_OK && round >= 0) {
        w->count[round]++;
    }
    if (st == ASSAY_OK && b >= 0) {
        w->count[b]++;
        if (b == ASSAY_BOUNDARY_ABORT_PREFILL) {
            w->chunks |= 1u << (r->prefill_steps < 31 ? r->prefill_steps : 31);
        }
    }
    return st;
}

static void watch_free(void *self)
{
    (void)self; /* the watch is freed by assay_boundary_watch_close */
}

#define FORWARD(name, params, args)                                                                \
    static enum assay_status watch_##name params                                                   \
    {                                                                                              \
        struct assay_boundary_watch *w = self;                                                     \
        return w->inner.vt->name args;                                                             \
    }

FORWARD(info, (void *self, struct assay_adapter_info *out), (w->inner.self, out))
FORWARD(block_stats, (void *self, struct assay_block_stats *out), (w->inner.self, out))
FORWARD(block_audit, (void *self, struct assay_block_audit *out), (w->inner.self, out))
FORWARD(set_logits_sink, (void *self, assay_logits_sink sink, void *ctx),
        (w->inner.self, sink, ctx))
FORWARD(check_invariants, (void *self, char *msg, size_t size), (w->inner.self, msg, size))

static const char *watch_last_error(void *self)
{
    struct assay_boundary_watch *w = self;
    return w->inner.vt->last_error(w->inner.self);
}

enum assay_status assay_boundary_watch_open(const struct assay_adapter *inner,
                                            struct assay_boundary_watch **watch,
                                            struct assay_adapter *out)
{
    struct assay_boundary_watch *w = assay_calloc(1, sizeof *w);
    *watch = w;
    if (w == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    const struct assay_adapter_vtable *v = inner->vt;
    w->inner = *inner;
    struct assay_block_audit au;
    w->audited = v->block_audit != NULL && v->block_audit(inner->self, &au) == ASSAY_OK;
    struct assay_block_stats bs;
    if (v->block_stats != NULL && v->block_stats(inner->self, &bs) == ASSAY_OK) {
        w->block_size = bs.block_size;
    }
    w->vt = (struct assay_adapter_vtable){
        .abi_version = ASSAY_ADAPTER_ABI_VERSION,
        .name = v->name,
        .add_request = watch_add,
        .has_work = watch_has_work,
        .step = watch_step,
        .abort = watch_abort,
        .free = watch_free,
        .info = v->info != NULL ? watch_info : NULL,
        .block_stats = v->block_stats != NULL ? watch_block_stats : NULL,
        .block_audit = v->block_audit != NULL ? watch_block_audit : NULL,
        .set_logits_sink = v->set_logits_sink != NULL ? watch_set_logits_sink : NULL,
        .check_invariants = v->check_invariants != NULL ? watch_check_invariants : NULL,
        .last_error = v->last_error != NULL ? watch_last_error : NULL,
    };
    out->vt = &w->vt;
    out->self = w;
    return ASSAY_OK;
}

void assay_boundary_watch_expect(struct assay_boundary_watch *watch,
                                 const struct assay_boundary_expect *expect)
{
    watch->expect = *expect;
    watch->expect.n = expect->n < 0                           ? 0
                      : expect->n > ASSAY_BOUNDARY_MAX_EXPECT ? ASSAY_BOUNDARY_MAX_EXPECT
                                                              : expect->n;
}

void assay_boundary_watch_close(struct assay_boundary_watch *watch)
{
    if (watch == NULL) {
        return;
    }
    assay_free(watch->reqs);
    assay_free(watch->registered);
    assay_free(watch);
}

int32_t assay_boundary_count(const struct assay_boundary_watch *watch, enum assay_boundary b)
{
    return (unsigned)b < ASSAY_BOUNDARY_N ? watch->count[b] : 0;
}

uint32_t assay_boundary_prefill_chunks(const struct assay_boundary_watch *watch)
{
    return watch->chunks;
}

int32_t assay_boundary_report(const struct assay_boundary_watch *watch, char *buf, size_t size)
{
    int32_t reached = 0;
    for (int b = 0; b < ASSAY_BOUNDARY_N; b++) {
        reached += watch->count[b] > 0;
    }
    struct assay_text t = {NULL, 0, 0, false};
    assay_text_put(&t, "boundaries reached %d of %d:", (int)reached, ASSAY_BOUNDARY_N);
    const char *sep = " ";
    for (int b = 0; b < ASSAY_BOUNDARY_N; b++) {
        if (watch->count[b] > 0) {
            assay_text_put(&t, "%s%s %d", sep, k_names[b], (int)watch->count[b]);
            if (b == ASSAY_BOUNDARY_ABORT_PREFILL) {
                assay_text_put(&t, " (after chunk");
                for (int c = 1; c < 32; c++) {
                    if (watch->chunks & (1u << c)) {
                        assay_text_put(&t, " %d", c);
                    }
                }
                assay_text_put(&t, ")");
            }
            sep = ", ";
        }
    }
    if (reached < ASSAY_BOUNDARY_N) {
        assay_text_put(&t, "; not reached:");
        sep = " ";
        for (int b = 0; b < ASSAY_BOUNDARY_N; b++) {
            if (watch->count[b] == 0) {
                assay_text_put(&t, "%s%s", sep, k_names[b]);
                sep = ", ";
            }
        }
    }
    snprintf(buf, size, "%s", t.failed || t.s == NULL ? "boundaries: out of memory" : t.s);
    assay_text_free(&t);
    return ASSAY_BOUNDARY_N - reached;
}
