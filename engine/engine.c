/*
 * engine.c - the bundled engine at work (engine.h): requests taken in and
 * aborted, the queues and the id map, the blocks of each sequence,
 * scheduling, the draft's and the target's passes of a step and the events
 * they deliver, and what the engine tells of itself (its spec, memory,
 * block audit and invariants). assay_engine_step runs once a step and most
 * of what it calls once a sequence a step; engine_init.c makes and frees
 * the state (engine_internal.h) that all of it works on.
 */
#include "engine.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/mutant.h"
#include "../core/rng.h"
#include "block.h"
#include "engine_internal.h"
#include "forward.h"
#include "sampler.h"
#include "worker.h"

/* What each per-request uniform draw is for; the counter is the output
 * position the draw decides. */
enum draw_purpose {
    DRAW_SAMPLE = 1,   /* plain sampling, and the bonus token of a round */
    DRAW_DRAFT = 2,    /* the draft's proposal */
    DRAW_ACCEPT = 3,   /* the acceptance test of a proposal */
    DRAW_RESIDUAL = 4, /* the residual sample after a rejection */
};

static void set_error(struct assay_engine *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_error(struct assay_engine *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->last_error, sizeof e->last_error, fmt, ap);
    va_end(ap);
}


/* ---- the id map ------------------------------------------------------ */

static int32_t map_slot(const struct assay_engine *e, uint64_t id)
{
    return (int32_t)(assay_mix64(id) & (uint64_t)(e->map_size - 1));
}

static int32_t map_find(const struct assay_engine *e, uint64_t id)
{
    int32_t mask = e->map_size - 1;
    for (int32_t i = map_slot(e, id); e->map_val[i] >= 0; i = (i + 1) & mask) {
        if (e->map_key[i] == id) {
            return e->map_val[i];
        }
    }
    return -1;
}

static void map_put(struct assay_engine *e, uint64_t id, int32_t seq)
{
    int32_t mask = e->map_size - 1;
    int32_t i = map_slot(e, id);
    while (e->map_val[i] >= 0) {
        i = (i + 1) & mask;
    }
    e->map_key[i] = id;
    e->map_val[i] = seq;
}

static void map_remove(struct assay_engine *e, uint64_t id)
{
    int32_t mask = e->map_size - 1;
    int32_t i = map_slot(e, id);
    while (e->map_val[i] >= 0 && e->map_key[i] != id) {
        i = (i + 1) & mask;
    }
    if (e->map_val[i] < 0) {
        return;
    }
    e->map_val[i] = -1;
    for (int32_t j = (i + 1) & mask; e->map_val[j] >= 0; j = (j + 1) & mask) {
        int32_t home = map_slot(e, e->map_key[j]);
        bool in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!in_range) {
            e->map_key[i] = e->map_key[j];
            e->map_val[i] = e->map_val[j];
            e->map_val[j] = -1;
            i = j;
        }
    }
}

/* ---- queues ----------------------------------------------------------- */

static int32_t waiting_at(const struct assay_engine *e, int32_t i)
{
    return e->waiting[(e->wait_head + i) % e->p.max_requests];
}

static void waiting_push_back(struct assay_engine *e, int32_t s)
{
    e->waiting[(e->wait_head + e->n_waiting) % e->p.max_requests] = s;
    e->n_waiting++;
}

static void waiting_push_front(struct assay_engine *e, int32_t s)
{
    e->wait_head = (e->wait_head + e->p.max_requests - 1) % e->p.max_requests;
    e->waiting[e->wait_head] = s;
    e->n_waiting++;
}

static void waiting_pop_front(struct assay_engine *e)
{
    e->wait_head = (e->wait_head + 1) % e->p.max_requests;
    e->n_waiting--;
}

static void waiting_remove(struct assay_engine *e, int32_t s)
{
    int32_t n = e->p.max_requests;
    int32_t i = 0;
    while (i < e->n_waiting && waiting_at(e, i) != s) {
        i++;
    }
    for (; i + 1 < e->n_waiting; i++) {
        e->waiting[(e->wait_head + i) % n] = e->waiting[(e->wait_head + i + 1) % n];
    }
    e->n_waiting--;
}

static void running_insert(struct assay_engine *e, int32_t s)
{
    int32_t i = e->n_running++;
    while (i > 0 && e->seqs[e->running[i - 1]].order > e->seqs[s].order) {
        e->running[i] = e->running[i - 1];
        i--;
    }
    e->running[i] = s;
}

static void running_remove(struct assay_engine *e, int32_t s)
{
    int32_t i = 0;
    while (i < e->n_running && e->running[i] != s) {
        i++;
    }
    for (; i + 1 < e->n_running; i++) {
        e->running[i] = e->running[i + 1];
    }
    e->n_running--;
}

/* ---- requests ------------------------------------------------------- */

static enum assay_status invalid(struct assay_engine *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static enum assay_status invalid(struct assay_engine *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->last_error, sizeof e->last_error, fmt, ap);
    va_end(ap);
    return ASSAY_ERR_INVALID;
}

enum assay_status assay_engine_add_request(struct assay_engine *e, const struct assay_request *r)
{
    e->last_error[0] = '\0';
    if (r == NULL) {
        return invalid(e, "no request");
    }
    if (r->prompt == NULL || r->prompt_len <= 0) {
        return invalid(e, "request %llu: empty prompt", (unsigned long long)r->id);
    }
    for (int32_t i = 0; i < r->prompt_len; i++) {
        if (r->prompt[i] < 0 || r->prompt[i] >= e->cfg.vocab) {
            return invalid(e, "request %llu: prompt[%d] = %d is outside the vocabulary 0..%d",
                           (unsigned long long)r->id, (int)i, (int)r->prompt[i],
                           (int)e->cfg.vocab - 1);
        }
    }
    if (r->max_tokens <= 0) {
        return invalid(e, "request %llu: max_tokens = %d, expected at least 1",
                       (unsigned long long)r->id, (int)r->max_tokens);
    }
    if ((int64_t)r->prompt_len + r->max_tokens > e->p.max_seq_len) {
        return invalid(e, "request %llu: prompt %d + max_tokens %d exceeds the context %d",
                       (unsigned long long)r->id, (int)r->prompt_len, (int)r->max_tokens,
                       (int)e->p.max_seq_len);
    }
    if (r->stop_token < -1 || r->stop_token >= e->cfg.vocab) {
        return invalid(e, "request %llu: stop_token %d is not -1 or a token id",
                       (unsigned long long)r->id, (int)r->stop_token);
    }
    if (!assay_sampling_valid(&r->sampling)) {
        return invalid(e, "request %llu: sampling needs temperature >= 0, top_k >= 0, top_p in (0, 1]",
                       (unsigned long long)r->id);
    }
    if (e->p.paged) {
        int64_t need = ((int64_t)r->prompt_len + r->max_tokens + e->block_size - 1) / e->block_size;
        if (need > e->p.n_blocks) {
            return invalid(e, "request %llu needs %lld blocks and the pool has %d: it can never fit",
                           (unsigned long long)r->id, (long long)need, (int)e->p.n_blocks);
        }
    }
    if (map_find(e, r->id) >= 0) {
        set_error(e, "request %llu: the id is already live", (unsigned long long)r->id);
        return ASSAY_ERR_DUPLICATE;
    }
    if (e->n_free_seqs == 0) {
        set_error(e, "request %llu: %d requests are already live", (unsigned long long)r->id,
                  (int)e->p.max_requests);
        return ASSAY_ERR_FULL;
    }
    int32_t s = e->free_seqs[--e->n_free_seqs];
    struct seq *q = &e->seqs[s];
    int32_t *tokens = q->tokens, *blocks = q->blocks;
    memset(q, 0, sizeof *q);
    q->tokens = tokens;
    q->blocks = blocks;
    q->id = r->id;
    q->order = e->n_arrivals++;
    q->state = SEQ_WAITING;
    memcpy(q->tokens, r->prompt, sizeof(int32_t) * (size_t)r->prompt_len);
    q->n_prompt = q->n_tokens = r->prompt_len;
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_BOS_PREPENDED) && ASSAY_TOKEN_BOS < e->cfg.vocab &&
        (int64_t)r->prompt_len + 1 + r->max_tokens <= e->p.max_seq_len &&
        (!e->p.paged || ((int64_t)r->prompt_len + 1 + r->max_tokens + e->block_size - 1) /
                                e->block_size <= e->p.n_blocks)) {
        /* The planted bug: a BOS is put before every prompt, though the
         * prompt comes as token ids to be taken as given; the prompt/output
         * boundary moves one token late. Only where the context and the
         * pool have room for the extra token (the token store ends there). */
        memmove(q->tokens + 1, q->tokens, sizeof(int32_t) * (size_t)r->prompt_len);
        q->tokens[0] = ASSAY_TOKEN_BOS;
        q->n_prompt = q->n_tokens = r->prompt_len + 1;
    }
    q->max_tokens = r->max_tokens;
    q->stop_token = r->stop_token;
    q->sampling = r->sampling;
    bool seeded = r->sampling.seeded;
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SEED_ZERO_UNSEEDED) && r->sampling.seed == 0) {
        seeded = false; /* the planted bug: `if (seed)` where `if (seeded)` was meant */
    }
    q->seed = seeded ? r->sampling.seed : assay_mix64(e->p.seed ^ assay_mix64(q->order));
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_UNSEEDED_ONE_STREAM) && !seeded) {
        q->seed = e->p.seed; /* the planted bug: one stream for every unseeded request */
    }
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SEED_LOW_32_BITS)) {
        q->seed &= 0xffffffffULL; /* the planted bug: a 64-bit seed cut to 32 bits */
    }
    q->run_slot = -1;
    map_put(e, r->id, s);
    waiting_push_back(e, s);
    return ASSAY_OK;
}

bool assay_engine_has_work(const struct assay_engine *e)
{
    return e->n_running > 0 || e->n_waiting > 0 || e->n_pending > 0;
}

/* ---- blocks of a sequence -------------------------------------------- */

static void release_blocks_from(struct assay_engine *e, struct seq *q, int32_t keep)
{
    while (q->n_blocks > keep) {
        assay_block_release(e->bm, q->blocks[--q->n_blocks]);
    }
    if (q->n_hashed > q->n_blocks) {
        q->n_hashed = q->n_blocks;
    }
}

static void leave_running(struct assay_engine *e, int32_t s)
{
    struct seq *q = &e->seqs[s];
    release_blocks_from(e, q, 0);
    q->n_hashed = 0;
    q->last_hash = 0;
    q->n_computed = 0;
    q->draft_computed = 0;
    q->n_chunks = 0;
    e->free_slots[e->n_free_slots++] = q->run_slot;
    q->run_slot = -1;
    running_remove(e, s);
}

static void release_seq(struct assay_engine *e, int32_t s)
{
    struct seq *q = &e->seqs[s];
    map_remove(e, q->id);
    q->state = SEQ_FREE;
    e->free_seqs[e->n_free_seqs++] = s;
}

/* Recompute-preemption: the newest running request gives its blocks back
 * and waits at the front of the queue with its tokens. */
static void preempt(struct assay_engine *e, int32_t s)
{
    struct seq *q = &e->seqs[s];
    leave_running(e, s);
    q->state = SEQ_WAITING;
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_PREEMPT_REDELIVER)) {
        q->n_delivered = 0; /* the planted bug: forget what was delivered */
    }
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_PREEMPT_RESETS_BOUNDARY)) {
        /* The planted bug: resume as a new request whose prompt is the
         * prompt plus the output so far, with the remaining budget. Delivery
         * and the length limit count from the moved boundary. */
        q->max_tokens -= q->n_tokens - q->n_prompt;
        q->n_prompt = q->n_tokens;
    }
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SEED_RESTART_AFTER_PREEMPT) &&
        q->sampling.seeded) {
        /* The planted bug: the re-prefill creates the request's generator
         * afresh from its seed, so the stream starts over at the next token. */
        q->draw_skew = -(q->n_tokens - q->n_prompt);
    }
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_PREEMPT_PAD_SLOT)) {
        /* The planted bug: the emptied table keeps a padding entry, and the
         * resumed prefill writes its KV through it, far outside the pool. */
        q->blocks[0] = -(1 << 30);
        q->n_blocks = 1;
    }
    waiting_push_front(e, s);
}

/* Make the block table cover positions [0, n_pos). Preempts the newest
 * running requests (possibly s itself) when the pool runs dry. Returns
 * false if s was preempted. */
static bool ensure_blocks(struct assay_engine *e, int32_t s, int32_t n_pos, bool may_preempt)
{
    struct seq *q = &e->seqs[s];
    int32_t need = (n_pos + e->block_size - 1) / e->block_size - q->n_blocks;
    int32_t first_decode = e->p.spec_k > 0 ? q->n_prompt - 1 : q->n_prompt;
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_PROMPT_MULTIPLE_LATE_BLOCK) && need == 1 &&
        e->p.kv_cache && q->n_blocks > 0 && q->n_computed == first_decode &&
        q->n_blocks * e->block_size == first_decode) {
        /* The planted bug: the prompt filled whole blocks and the first
         * decode's position, past the table, goes through its last block. */
        q->blocks[q->n_blocks] = q->blocks[q->n_blocks - 1];
        return true;
    }
    volatile int64_t spins = 0;
    while (need > assay_block_available(e->bm)) {
        if (!may_preempt) {
            return false;
        }
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_POOL_DRY_ASSERT)) {
            abort(); /* the planted bug: asserts that a block is always free */
        }
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_POOL_DRY_SPIN)) {
            spins++; /* the planted bug: waits for a block that no one will free */
            continue;
        }
        int32_t victim = e->running[e->n_running - 1];
        preempt(e, victim);
        if (victim == s) {
            return false;
        }
    }
    for (int32_t i = 0; i < need; i++) {
        q->blocks[q->n_blocks++] = assay_block_alloc(e->bm);
    }
    return true;
}

/* Take the prefix cache's full blocks for the start of q's tokens, leaving
 * at least one token of the prefill to compute. */
static void take_prefix_hits(struct assay_engine *e, struct seq *q, int32_t prefill_target)
{
    int32_t limit = prefill_target - 1;
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_FULL_HIT_WRONG_POSITION) && e->p.spec_k == 0) {
        limit = prefill_target; /* the planted bug: a prompt wholly cached is taken whole */
    }
    uint64_t parent = 0;
    while ((q->n_blocks + 1) * e->block_size <= limit) {
        const int32_t *toks = q->tokens + (int64_t)q->n_blocks * e->block_size;
        uint64_t h = assay_block_hash(e->bm, parent, toks);
        int32_t b = assay_block_lookup(e->bm, h, parent, toks);
        if (b < 0) {
            break;
        }
        assay_block_ref(e->bm, b);
        q->blocks[q->n_blocks++] = b;
        parent = h;
    }
    q->n_hashed = q->n_blocks;
    q->last_hash = parent;
    q->n_computed = q->n_blocks * e->block_size;
}

/* How many tokens q may generate: its max_tokens. */
static int32_t output_budget(const struct assay_engine *e, const struct seq *q)
{
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_MAX_TOKENS_OVERSHOOT) &&
        q->n_prompt + q->max_tokens < e->p.max_seq_len) {
        /* The planted bug: the budget is tested before the new token is
         * counted, so one token more than max_tokens is generated (only
         * where the context has room for it: the token store ends there). */
        return q->max_tokens + 1;
    }
    return q->max_tokens;
}

/* ---- scheduling ------------------------------------------------------ */

static int32_t prefill_target(const struct assay_engine *e, const struct seq *q)
{
    /* Speculation verifies the last known token together with the drafts,
     * so its prefill stops one token short. */
    return e->p.spec_k > 0 ? q->n_tokens - 1 : q->n_tokens;
}

/* Decide how many rows sequence s computes this step; 0 means none. */
static int32_t plan_rows(struct assay_engine *e, const struct seq *q, int32_t budget_left,
                         int32_t rows_left, int32_t *k_eff, bool *decode)
{
    *k_eff = 0;
    *decode = false;
    int32_t target = prefill_target(e, q);
    if (!e->p.kv_cache) {
        /* Full recompute: every token, every step. */
        int32_t k = 0;
        if (e->p.spec_k > 0) {
            k = e->p.spec_k;
            int32_t left = output_budget(e, q) - (q->n_tokens - q->n_prompt) - 1;
            k = k < left ? k : left;
        }
        int32_t n = q->n_tokens + k;
        if (n > rows_left) {
            return 0;
        }
        *k_eff = k;
        *decode = true;
        return n;
    }
    if (q->n_computed >= target) {
        /* Decode: the last token is computed now and the next sampled. How
         * many tokens are drafted depends on the output position alone, never
         * on how far the draft lags (it lags after a prefix-cache hit, which
         * the target takes and the draft does not): a seeded request's
         * tokens come from one sampling procedure per position, whatever the
         * cache and the neighbours. A lagging draft catches up in the same
         * step; when this step's draft rows cannot hold that, the sequence
         * waits a step. */
        int32_t k = 0;
        if (e->p.spec_k > 0) {
            int32_t left = output_budget(e, q) - (q->n_tokens - q->n_prompt) - 1;
            k = e->p.spec_k < left ? e->p.spec_k : left;
        }
        if (1 + k > rows_left || (k > 0 && q->n_tokens - q->draft_computed > e->spec_rows_left)) {
            return 0;
        }
        *k_eff = k;
        *decode = true;
        return 1 + k;
    }
    int32_t remaining = target - q->n_computed;
    int32_t n = remaining;
    if (e->p.chunk > 0) {
        n = remaining < budget_left ? remaining : budget_left;
    } else if (remaining > budget_left) {
        n = 0;
    }
    if (n > rows_left) {
        n = 0;
    }
    *decode = e->p.spec_k == 0 && n == remaining;
    return n;
}

static void add_plan(struct assay_engine *e, int32_t s, int32_t n, int32_t k, bool decode)
{
    if (k > 0) {
        const struct seq *q = &e->seqs[s];
        e->spec_rows_left -= q->n_tokens - q->draft_computed;
    }
    struct plan *pl = &e->plans[e->n_plans++];
    memset(pl, 0, sizeof *pl);
    pl->seq = s;
    pl->n_new = n;
    pl->k_eff = k;
    pl->decode = decode;
    pl->d_out = -1;
}

static void schedule(struct assay_engine *e)
{
    e->n_plans = 0;
    e->spec_rows_left = e->max_rows + e->max_running * (e->p.spec_k + 1);
    int32_t budget = e->p.chunk > 0 ? e->p.chunk : e->p.max_step_tokens;
    int32_t rows = 0;
    int32_t decode_rows = 0;
    /* Running requests first, oldest first; preemption removes from the end. */
    for (int32_t i = 0; i < e->n_running; i++) {
        int32_t s = e->running[i];
        struct seq *q = &e->seqs[s];
        int32_t k;
        bool decode;
        int32_t n = plan_rows(e, q, budget - (rows - decode_rows), e->max_rows - rows, &k, &decode);
        if (n == 0) {
            continue;
        }
        int32_t first = e->p.kv_cache ? q->n_computed : 0;
        if (!ensure_blocks(e, s, first + n, true)) {
            i--; /* s left the running list */
            continue;
        }
        add_plan(e, s, n, k, decode);
        rows += n;
        if (decode && e->p.kv_cache) {
            decode_rows += n;
        }
    }
    /* Then admit waiting requests in arrival order while they fit. */
    int32_t available_before_admission = assay_block_available(e->bm);
    while (e->n_waiting > 0 && e->n_running < e->max_running) {
        int32_t s = waiting_at(e, 0);
        struct seq *q = &e->seqs[s];
        if (e->p.prefix_cache) {
            take_prefix_hits(e, q, prefill_target(e, q));
        }
        int32_t k;
        bool decode;
        int32_t n = plan_rows(e, q, budget - (rows - decode_rows), e->max_rows - rows, &k, &decode);
        bool fits = n > 0 && (rows == 0 || e->p.chunk > 0 || rows - decode_rows + n <= budget);
        int32_t first = e->p.kv_cache ? q->n_computed : 0;
        if (fits) {
            int32_t need = (first + n + e->block_size - 1) / e->block_size - q->n_blocks;
            fits = need <= assay_block_available(e->bm);
            if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_ADMIT_IGNORES_PROMISED)) {
                /* The planted bug: the blocks given to requests admitted
                 * earlier in this step are forgotten; ensure_blocks below
                 * then fails silently and the table stays short. */
                fits = need <= available_before_admission;
            }
        }
        if (!fits) {
            release_blocks_from(e, q, 0);
            q->n_computed = 0;
            q->n_hashed = 0;
            q->last_hash = 0;
            break;
        }
        waiting_pop_front(e);
        q->state = SEQ_RUNNING;
        q->run_slot = e->free_slots[--e->n_free_slots];
        running_insert(e, s);
        ensure_blocks(e, s, first + n, false);
        add_plan(e, s, n, k, decode);
        rows += n;
        if (decode && e->p.kv_cache) {
            decode_rows += n;
        }
    }
}

/* ---- events ----------------------------------------------------------- */

static struct assay_event *push_event(struct assay_engine *e, enum assay_event_kind kind,
                                      uint64_t id)
{
    if (e->n_events >= e->cap_events) {
        return NULL;
    }
    struct assay_event *ev = &e->events[e->n_events++];
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    ev->request_id = id;
    return ev;
}

/* Deliver every generated token not yet delivered. */
static void deliver(struct assay_engine *e, struct seq *q)
{
    while (q->n_delivered < q->n_tokens - q->n_prompt) {
        struct assay_event *ev = push_event(e, ASSAY_EVENT_TOKEN, q->id);
        if (ev == NULL) {
            return;
        }
        ev->index = q->n_delivered;
        ev->token = q->tokens[q->n_prompt + q->n_delivered];
        q->n_delivered++;
    }
}

static void finish(struct assay_engine *e, int32_t s)
{
    struct seq *q = &e->seqs[s];
    struct assay_event *ev = push_event(e, ASSAY_EVENT_FINISH, q->id);
    if (ev != NULL) {
        ev->index = q->n_delivered;
        ev->reason = q->finish;
    }
    leave_running(e, s);
    release_seq(e, s);
}

/* Append a generated token; returns true if the request is now finished. */
static bool append_token(const struct assay_engine *e, struct seq *q, int32_t token)
{
    q->tokens[q->n_tokens++] = token;
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_STOP_AT_LIMIT_LENGTH) &&
        q->n_tokens - q->n_prompt >= output_budget(e, q)) {
        /* The planted bug: the limit is tested first, so a stop token
         * that is also the last token allowed ends the request for length. */
        q->finish = ASSAY_FINISH_LENGTH;
    } else if (token == q->stop_token) {
        q->finish = ASSAY_FINISH_STOP;
    } else if (q->n_tokens - q->n_prompt >= output_budget(e, q)) {
        q->finish = ASSAY_FINISH_LENGTH;
    }
    return q->finish != ASSAY_FINISH_NONE;
}

/* ---- the draft's passes ----------------------------------------------- */

static void draft_seq(struct assay_forward_seq *fs, const struct assay_engine *e,
                      const struct seq *q, int32_t pos0, int32_t n, int32_t row0)
{
    fs->blocks = &e->slot_table[q->run_slot];
    fs->pos0 = pos0;
    fs->n_rows = n;
    fs->row0 = row0;
    fs->rope_offset = 0;
}

/*
 * The uniform that decides output position `index` of q for `purpose`: a
 * pure function of (the request's seed, index, purpose), so a request's
 * tokens do not depend on what else runs in the step.
 */
static double draw_u01(struct assay_engine *e, const struct seq *q, int32_t index,
                       enum draw_purpose purpose)
{
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_UNSEEDED_STEALS_SEEDS) && e->shared_stream) {
        /* The planted bug: a step holding an unseeded request draws every
         * request's numbers from the engine's one shared stream. */
        return assay_rng_u01(e->p.seed, e->shared_draws++, (uint32_t)purpose);
    }
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SEED_RESTART_AFTER_PREEMPT) ||
        ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_PARTIAL_PREFILL_ADVANCES_SEED)) {
        index += q->draw_skew; /* the planted bugs: the stream is not where it should be */
    }
    return assay_rng_u01(q->seed, (uint64_t)index, (uint32_t)purpose);
}

/* Sample the draft's proposal for plan pl at draft position j from the
 * draft logits row `lrow`. */
static void propose(struct assay_engine *e, const struct plan *pl, int32_t j, const float *lrow)
{
    struct seq *q = &e->seqs[pl->seq];
    int32_t v = e->cfg.vocab;
    int32_t slot = q->run_slot;
    /* j == spec_k happens only in the bonus-from-draft mutant, whose q there
     * is used once, for the draw. */
    double *qd = j < e->p.spec_k ? e->q_dist + ((int64_t)slot * e->p.spec_k + j) * v
                                 : e->residual;
    assay_sampler_distribution(e->sampler, lrow, &q->sampling, e->p.sampling_order, qd);
    int32_t index = q->n_tokens - q->n_prompt + j;
    double u = draw_u01(e, q, index, DRAW_DRAFT);
    q->tokens[q->n_tokens + j] = assay_sampler_draw(qd, v, u);
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SPEC_DRAFT_IGNORES_TOP_P)) {
        /* The planted bug: the q kept for the ratio forgets top-p. */
        struct assay_sampling no_top_p = q->sampling;
        no_top_p.top_p = 1.0f;
        assay_sampler_distribution(e->sampler, lrow, &no_top_p, e->p.sampling_order, qd);
    }
}

static enum assay_status run_draft(struct assay_engine *e)
{
    /* Pass 1: catch the draft up with the tokens the target computes this
     * step and, for speculative rounds, propose the first draft token. */
    int32_t rows = 0, n_seqs = 0, n_out = 0, catchup = 0;
    for (int32_t i = 0; i < e->n_plans; i++) {
        struct plan *pl = &e->plans[i];
        struct seq *q = &e->seqs[pl->seq];
        if (!e->p.kv_cache) {
            q->draft_computed = 0;
        }
        if (pl->k_eff == 0 && !e->p.kv_cache) {
            continue; /* a recomputing draft has nothing to keep */
        }
        /* A speculating sequence brings the draft up to its last token; any
         * other brings it up to where the target will be after this step,
         * within the catch-up budget (the draft lags after prefix hits). */
        int32_t upto = pl->k_eff > 0 ? q->n_tokens : q->n_computed + pl->n_new;
        int32_t n = upto - q->draft_computed;
        if (pl->k_eff == 0 && n > e->max_rows - catchup) {
            n = e->max_rows - catchup;
        }
        if (n <= 0) {
            continue;
        }
        if (pl->k_eff == 0) {
            catchup += n;
        }
        draft_seq(&e->d_fseqs[n_seqs++], e, q, q->draft_computed, n, rows);
        memcpy(e->d_rows + rows, q->tokens + q->draft_computed, sizeof(int32_t) * (size_t)n);
        rows += n;
        pl->d_rows = n;
        if (pl->k_eff > 0) {
            e->d_out_rows[n_out] = rows - 1;
            e->d_out_plan[n_out++] = i;
        }
    }
    if (rows > 0) {
        struct assay_forward_batch b = {rows, e->d_rows, n_seqs, e->d_fseqs, n_out, e->d_out_rows};
        enum assay_status st = assay_forward_run(e->dfwd, &b);
        if (st != ASSAY_OK) {
            return st;
        }
        const float *logits = assay_forward_logits(e->dfwd);
        for (int32_t o = 0; o < n_out; o++) {
            propose(e, &e->plans[e->d_out_plan[o]], 0, logits + (int64_t)o * e->cfg.vocab);
        }
        for (int32_t i = 0; i < e->n_plans; i++) {
            struct plan *pl = &e->plans[i];
            e->seqs[pl->seq].draft_computed += pl->d_rows;
        }
    }
    /* Passes 2..k: one row per speculating sequence, feeding its last
     * proposal. (The bonus-from-draft mutant runs one pass more, whose
     * "proposal" becomes the bonus token.) */
    int32_t extra = ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SPEC_BONUS_FROM_DRAFT) ? 1 : 0;
    for (int32_t j = 1; j < e->p.spec_k + extra; j++) {
        rows = 0;
        for (int32_t i = 0; i < e->n_plans; i++) {
            struct plan *pl = &e->plans[i];
            if (pl->k_eff + extra <= j) {
                continue;
            }
            struct seq *q = &e->seqs[pl->seq];
            int32_t pos = q->n_tokens + j - 1;
            draft_seq(&e->d_fseqs[rows], e, q, pos, 1, rows);
            e->d_rows[rows] = q->tokens[pos];
            e->d_out_rows[rows] = rows;
            e->d_out_plan[rows] = i;
            rows++;
        }
        if (rows == 0) {
            break;
        }
        struct assay_forward_batch b = {rows, e->d_rows, rows, e->d_fseqs, rows, e->d_out_rows};
        enum assay_status st = assay_forward_run(e->dfwd, &b);
        if (st != ASSAY_OK) {
            return st;
        }
        const float *logits = assay_forward_logits(e->dfwd);
        for (int32_t o = 0; o < rows; o++) {
            struct plan *pl = &e->plans[e->d_out_plan[o]];
            propose(e, pl, j, logits + (int64_t)o * e->cfg.vocab);
            e->seqs[pl->seq].draft_computed++;
        }
    }
    return ASSAY_OK;
}

/* ---- the target's pass and what follows it -------------------------- */

static void sink_logits(struct assay_engine *e, const struct seq *q, int32_t index,
                        const float *lrow)
{
    if (e->sink != NULL) {
        e->sink(e->sink_ctx, q->id, index, lrow, e->cfg.vocab);
    }
}

/* Plain sampling of the next token from one logits row. */
static bool sample_next(struct assay_engine *e, struct seq *q, const float *lrow, double *p)
{
    int32_t index = q->n_tokens - q->n_prompt;
    assay_sampler_distribution(e->sampler, lrow, &q->sampling, e->p.sampling_order, p);
    int32_t x = assay_sampler_draw(p, e->cfg.vocab, draw_u01(e, q, index, DRAW_SAMPLE));
    sink_logits(e, q, index, lrow);
    return append_token(e, q, x);
}

/*
 * One speculative round (Leviathan et al. 2023): proposal x_j ~ q_j is
 * accepted with probability min(1, p_j(x) / q_j(x)); at the first rejection
 * the token is drawn from normalize(max(0, p_j - q_j)); if all k are
 * accepted a bonus token is drawn from p_k. p and q are the processed
 * distributions (temperature, top-k, top-p) the target and the draft
 * sample from. Returns the number of accepted proposals; sets *finished.
 */
static int32_t verify_round(struct assay_engine *e, const struct plan *pl, const float *logits,
                            bool *finished)
{
    struct seq *q = &e->seqs[pl->seq];
    const int32_t v = e->cfg.vocab;
    const int32_t g = q->n_tokens - q->n_prompt;
    const int32_t n_old = q->n_tokens;
    int32_t accepted = 0;
    *finished = false;
    for (int32_t j = 0; j <= pl->k_eff && !*finished; j++) {
        const float *lrow = logits + (int64_t)(pl->out0 + j) * v;
        double *p = e->p_dist + (int64_t)(pl->out0 + j) * v;
        struct assay_sampling sp = q->sampling;
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SPEC_RATIO_AT_T1) && j < pl->k_eff) {
            sp.temperature = 1.0f; /* the planted bug: the verifier's p at T = 1 */
        }
        enum assay_sampling_order order = e->p.sampling_order;
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SPEC_VERIFY_TOPK_RENORM)) {
            /* The planted bug: the verifier builds p with top-p measured on
             * the top-k set renormalised, whatever order plain sampling and
             * the draft use. */
            order = ASSAY_SAMPLING_SEQUENTIAL;
        }
        assay_sampler_distribution(e->sampler, lrow, &sp, order, p);
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SPEC_VERIFY_GREEDY)) {
            /* The planted bug: the verifier commits the target's argmax. */
            int32_t best = 0;
            for (int32_t t = 1; t < v; t++) {
                best = lrow[t] > lrow[best] ? t : best;
            }
            bool keep = j < pl->k_eff && q->tokens[n_old + j] == best;
            accepted += keep;
            sink_logits(e, q, g + j, lrow);
            *finished = append_token(e, q, best);
            if (keep) {
                continue;
            }
            break;
        }
        if (j == pl->k_eff) {
            /* every proposal accepted: the bonus token from p */
            int32_t x = assay_sampler_draw(p, v, draw_u01(e, q, g + j, DRAW_SAMPLE));
            if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SPEC_BONUS_FROM_DRAFT)) {
                x = q->tokens[n_old + j]; /* the planted bug: the draft's extra proposal */
            }
            sink_logits(e, q, g + j, lrow);
            *finished = append_token(e, q, x);
            break;
        }
        const double *qd = e->q_dist + ((int64_t)q->run_slot * e->p.spec_k + j) * v;
        int32_t x = q->tokens[n_old + j];
        double ratio = p[x] / qd[x];
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SPEC_ACCEPT_Q_OVER_P)) {
            ratio = qd[x] / p[x]; /* the planted bug: the ratio inverted */
        }
        double u = draw_u01(e, q, g + j, DRAW_ACCEPT);
        if (u < ratio) {
            accepted++;
            sink_logits(e, q, g + j, lrow);
            *finished = append_token(e, q, x);
            if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SPEC_PAST_ACCEPTED_STOP) &&
                q->finish == ASSAY_FINISH_STOP) {
                /* The planted bug: an accepted stop token does not end the
                 * round; the round's later tokens are committed after it
                 * and only the last one is checked. */
                q->finish = ASSAY_FINISH_NONE;
                *finished = false;
            }
            continue;
        }
        double sum = 0.0;
        for (int32_t t = 0; t < v; t++) {
            double r = p[t] - qd[t];
            e->residual[t] = r > 0.0 ? r : 0.0;
            if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SPEC_RESIDUAL_FROM_P)) {
                e->residual[t] = p[t]; /* the planted bug: the residual is p itself */
            }
            sum += e->residual[t];
        }
        for (int32_t t = 0; t < v; t++) {
            e->residual[t] = sum > 0.0 ? e->residual[t] / sum : p[t];
        }
        double ur = draw_u01(e, q, g + j, DRAW_RESIDUAL);
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SPEC_RESIDUAL_REUSES_ACCEPT_U)) {
            ur = u; /* the planted bug: the acceptance test's uniform, in [ratio, 1) */
        }
        int32_t y = assay_sampler_draw(e->residual, v, ur);
        sink_logits(e, q, g + j, lrow);
        *finished = append_token(e, q, y);
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_STOP_ON_REJECTED_DRAFT) && !*finished &&
            x == q->stop_token) {
            /* The planted bug: the stop check reads the round's proposals,
             * so a rejected proposal equal to the stop token ends the
             * request after the token that replaced it. */
            q->finish = ASSAY_FINISH_STOP;
            *finished = true;
        }
        break;
    }
    struct assay_event *ev = push_event(e, ASSAY_EVENT_SPEC_ROUND, q->id);
    if (ev != NULL) {
        ev->index = g;
        ev->n_drafted = pl->k_eff;
        ev->n_accepted = accepted;
    }
    return accepted;
}

/* Offer q's newly completed full blocks to the prefix cache. */
static void register_blocks(struct assay_engine *e, struct seq *q)
{
    while ((q->n_hashed + 1) * e->block_size <= q->n_computed && q->n_hashed < q->n_blocks) {
        const int32_t *toks = q->tokens + (int64_t)q->n_hashed * e->block_size;
        uint64_t h = assay_block_hash(e->bm, q->last_hash, toks);
        assay_block_register(e->bm, q->blocks[q->n_hashed], h, q->last_hash, toks);
        q->last_hash = h;
        q->n_hashed++;
    }
}

static enum assay_status run_target(struct assay_engine *e)
{
    int32_t rows = 0, n_out = 0;
    int32_t first_decode_pos = -1; /* for a planted bug */
    for (int32_t i = 0; i < e->n_plans; i++) {
        struct plan *pl = &e->plans[i];
        struct seq *q = &e->seqs[pl->seq];
        int32_t first = e->p.kv_cache ? q->n_computed : 0;
        bool prefill = first < prefill_target(e, q);
        struct assay_forward_seq *fs = &e->fseqs[i];
        fs->blocks = q->blocks;
        fs->pos0 = first;
        fs->n_rows = pl->n_new;
        fs->row0 = rows;
        fs->rope_offset = 0;
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_CHUNK_ROPE_OFF_BY_ONE) && e->p.chunk > 0 &&
            prefill && q->n_chunks > 0) {
            fs->rope_offset = 1; /* the planted bug */
        }
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_BATCH_DECODE_FOREIGN_POSITION) &&
            e->p.kv_cache && pl->decode && pl->n_new == 1) {
            /* The planted bug: every one-row sequence that samples this step
             * (a decode) is rotated with the position of the step's first
             * such sequence; slots and attention spans are right. */
            if (first_decode_pos < 0) {
                first_decode_pos = first;
            } else {
                fs->rope_offset = first_decode_pos - first;
            }
        }
        if (prefill) {
            q->n_chunks++;
        }
        int32_t src = first;
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_FULL_HIT_WRONG_POSITION) &&
            q->n_computed >= q->n_tokens) {
            /* The planted bug: with nothing left to compute, the decode
             * feeds the last known token again, at the next position. */
            src = q->n_tokens - pl->n_new;
        }
        memcpy(e->rows + rows, q->tokens + src, sizeof(int32_t) * (size_t)pl->n_new);
        pl->row0 = rows;
        pl->out0 = n_out;
        rows += pl->n_new;
        if (pl->decode) {
            for (int32_t j = 0; j <= pl->k_eff; j++) {
                e->out_rows[n_out++] = rows - 1 - pl->k_eff + j;
            }
        }
    }
    struct assay_forward_batch b = {rows, e->rows, e->n_plans, e->fseqs, n_out, e->out_rows};
    return assay_forward_run(e->fwd, &b);
}

static void after_target(struct assay_engine *e)
{
    const float *logits = assay_forward_logits(e->fwd);
    for (int32_t i = 0; i < e->n_plans; i++) {
        struct plan *pl = &e->plans[i];
        struct seq *q = &e->seqs[pl->seq];
        bool finished = false;
        if (e->p.kv_cache) {
            q->n_computed += pl->n_new;
        }
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_PARTIAL_PREFILL_ADVANCES_SEED) &&
            q->sampling.seeded && e->p.kv_cache && !pl->decode &&
            q->n_computed < prefill_target(e, q)) {
            /* The planted bug: a chunk that leaves the prompt unfinished
             * samples a token that is thrown away, and the request's stream
             * is not wound back, so it stays one draw ahead. */
            q->draw_skew++;
        }
        if (pl->decode) {
            if (pl->k_eff == 0) {
                finished = sample_next(e, q, logits + (int64_t)pl->out0 * e->cfg.vocab,
                                       e->p_dist + (int64_t)pl->out0 * e->cfg.vocab);
            } else {
                int32_t n_old = q->n_tokens;
                int32_t accepted = verify_round(e, pl, logits, &finished);
                /* Roll back what the rejected proposals wrote: the target
                 * keeps the KV of the verified token and the accepted
                 * proposals; blocks past them go back to the pool. */
                int32_t valid = n_old + accepted;
                if (e->p.kv_cache) {
                    q->n_computed = valid;
                }
                if (q->draft_computed > valid) {
                    q->draft_computed = valid;
                }
                if (!ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_SPEC_ROLLBACK_LEAK)) {
                    release_blocks_from(e, q, (valid + e->block_size - 1) / e->block_size);
                }
                /* (The planted bug above keeps the blocks only rejected
                 * proposals wrote.) */
            }
        }
        if (e->p.kv_cache) {
            register_blocks(e, q);
        } else {
            q->n_computed = 0;
        }
        deliver(e, q);
        if (finished) {
            finish(e, pl->seq);
        }
    }
}

enum assay_status assay_engine_step(struct assay_engine *e, const struct assay_event **events,
                                    size_t *n_events)
{
    e->n_events = 0;
    e->n_steps++;
    for (int32_t i = 0; i < e->n_pending; i++) {
        int32_t s = e->pending[i];
        struct assay_event *ev = push_event(e, ASSAY_EVENT_FINISH, e->seqs[s].id);
        if (ev != NULL) {
            ev->index = e->seqs[s].n_delivered;
            ev->reason = ASSAY_FINISH_ABORT;
        }
        release_seq(e, s);
    }
    e->n_pending = 0;
    schedule(e);
    if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_UNSEEDED_STEALS_SEEDS)) {
        e->shared_stream = false;
        for (int32_t i = 0; i < e->n_plans; i++) {
            e->shared_stream |= !e->seqs[e->plans[i].seq].sampling.seeded;
        }
    }
    enum assay_status st = ASSAY_OK;
    if (e->n_plans > 0) {
        if (e->p.spec_k > 0) {
            st = run_draft(e);
        }
        if (st == ASSAY_OK) {
            st = run_target(e);
        }
        if (st == ASSAY_OK) {
            after_target(e);
        } else {
            set_error(e, "step %llu: a forward pass was refused (%s)",
                      (unsigned long long)e->n_steps, assay_status_str(st));
        }
    }
    int64_t now = assay_now_ns();
    for (size_t i = 0; i < e->n_events; i++) {
        e->events[i].t_ns = now;
    }
    *events = e->events;
    *n_events = e->n_events;
    return st;
}

enum assay_status assay_engine_abort(struct assay_engine *e, uint64_t request_id)
{
    int32_t s = map_find(e, request_id);
    if (s < 0 || e->seqs[s].state == SEQ_ABORTED) {
        set_error(e, "abort: request %llu is not live", (unsigned long long)request_id);
        return ASSAY_ERR_NOT_FOUND;
    }
    struct seq *q = &e->seqs[s];
    if (q->state == SEQ_WAITING) {
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_ABORT_MISSES_QUEUED)) {
            return ASSAY_OK; /* the planted bug: only running requests are looked at */
        }
        waiting_remove(e, s);
    } else {
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_ABORT_DOUBLE_FREE)) {
            /* The planted bug: the abort path returns the blocks itself,
             * and leave_running returns them again. */
            for (int32_t i = 0; i < q->n_blocks; i++) {
                assay_block_release(e->bm, q->blocks[i]);
            }
        }
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_ABORT_LEAKS_BLOCKS)) {
            q->n_blocks = 0; /* the planted bug: the table is dropped, its blocks never returned */
        }
        if (ASSAY_MUTANT_ON(e->p.mutant, ASSAY_MUTANT_ABORT_MID_PREFILL_LEAKS) &&
            e->p.kv_cache && q->n_computed < q->n_tokens - 1) {
            /* The planted bug: a prefill cut between chunks (more than the
             * last token left to compute) keeps its blocks. */
            q->n_blocks = 0;
        }
        leave_running(e, s);
    }
    q->state = SEQ_ABORTED;
    q->finish = ASSAY_FINISH_ABORT;
    e->pending[e->n_pending++] = s;
    return ASSAY_OK;
}

const char *assay_engine_last_error(const struct assay_engine *e)
{
    return e->last_error;
}

const char *assay_engine_spec(const struct assay_engine *e)
{
    return e->spec;
}

int64_t assay_engine_bytes(const struct assay_engine *e)
{
    return e->bytes;
}

void assay_engine_get_numerics(const struct assay_engine *e, struct assay_engine_numerics *out)
{
    struct assay_forward_numerics fn;
    assay_forward_get_numerics(e->fwd, &fn);
    out->batch_invariant = fn.batch_invariant;
    out->blas_rows = fn.blas_rows;
    out->isa = assay_isa_name(fn.isa);
    out->attention = fn.isa == ASSAY_ISA_GENERIC ? "generic" : "x86-64-v3";
    out->act = assay_numerics_mode_name(fn.act);
    out->kv_type = assay_numerics_kv_name(fn.kv_type);
    out->flash_attn = fn.flash_attn;
    out->matrices = fn.matrices;
    out->quantized = fn.quantized;
    out->one_row_bytes = fn.one_row_bytes;
}

const struct assay_engine_params *assay_engine_params(const struct assay_engine *e)
{
    return &e->p;
}

/* Without a KV cache (kv=off) the blocks hold one step's scratch KV, which
 * the next step recomputes: there is no cache whose accounting means
 * anything to audit. */
enum assay_status assay_engine_block_stats(struct assay_engine *e, struct assay_block_stats *out)
{
    if (!e->p.paged || !e->p.kv_cache) {
        return ASSAY_ERR_UNSUPPORTED;
    }
    assay_block_get_stats(e->bm, out);
    return ASSAY_OK;
}

enum assay_status assay_engine_block_audit(struct assay_engine *e, struct assay_block_audit *out)
{
    if (!e->p.paged || !e->p.kv_cache) {
        return ASSAY_ERR_UNSUPPORTED;
    }
    assay_block_get_audit(e->bm, out);
    /* Sequences holding blocks are exactly the running ones. */
    int32_t nb = e->max_running;
    for (int32_t i = 0; i < e->n_running; i++) {
        const struct seq *q = &e->seqs[e->running[i]];
        e->audit_ids[i] = q->id;
        e->audit_nb[i] = q->n_blocks;
        e->audit_nb[nb + i] = q->n_prompt;
        e->audit_nb[2 * nb + i] = q->n_tokens;
        e->audit_nb[3 * nb + i] = q->n_computed;
        e->audit_tables[i] = q->blocks;
        e->audit_tables[nb + i] = q->tokens;
    }
    out->n_seqs = e->n_running;
    out->seq_id = e->audit_ids;
    out->seq_n_blocks = e->audit_nb;
    out->seq_blocks = e->audit_tables;
    out->seq_n_prompt = e->audit_nb + nb;
    out->seq_n_tokens = e->audit_nb + 2 * nb;
    out->seq_n_computed = e->audit_nb + 3 * nb;
    out->seq_tokens = e->audit_tables + nb;
    return ASSAY_OK;
}

void assay_engine_set_logits_sink(struct assay_engine *e,
                                  void (*sink)(void *ctx, uint64_t request_id, int32_t index,
                                               const float *logits, int32_t vocab),
                                  void *ctx)
{
    e->sink = sink;
    e->sink_ctx = ctx;
}

enum assay_status assay_engine_check_invariants(struct assay_engine *e, char *msg, size_t size)
{
    enum assay_status st = assay_block_check(e->bm, msg, size);
    if (st != ASSAY_OK) {
        return st;
    }
    int32_t total = e->n_free_seqs + e->n_waiting + e->n_running + e->n_pending;
    if (total != e->p.max_requests) {
        snprintf(msg, size, "request slots: %d free + %d waiting + %d running + %d aborted != %d",
                 (int)e->n_free_seqs, (int)e->n_waiting, (int)e->n_running, (int)e->n_pending,
                 (int)e->p.max_requests);
        return ASSAY_ERR_INTERNAL;
    }
    for (int32_t i = 0; i < e->n_running; i++) {
        const struct seq *q = &e->seqs[e->running[i]];
        if (q->state != SEQ_RUNNING || q->run_slot < 0 ||
            (e->p.kv_cache && q->n_computed > q->n_blocks * e->block_size) ||
            q->n_delivered > q->n_tokens - q->n_prompt) {
            snprintf(msg, size, "request %llu: inconsistent running state",
                     (unsigned long long)q->id);
            return ASSAY_ERR_INTERNAL;
        }
    }
    return ASSAY_OK;
}
