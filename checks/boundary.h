/*
 * boundary.h - boundaries of an engine's state machine, placed on purpose
 * and counted when reached.
 *
 * Bugs hide where two things meet: a stop token as the last token the
 * length limit allows, an abort between two prefill chunks, a preempted
 * request aborted, a prompt one token past a block. Random workloads meet
 * those by luck; the generator here places each one, from the engine's
 * shape (block size, prefill chunk, draft length, pool size) and the
 * oracle's greedy continuations (so that a stop token is generated where
 * it is wanted), and the watch counts the ones the engine reached.
 *
 * A stop token that the draft proposes and the target rejects is placed
 * with the draft's own oracle: for a greedy request the draft proposes its
 * argmax given the target's tokens so far, so the generator knows, for the
 * engine's round alignment, at which output position a round rejects a
 * proposal and what that proposal is; it makes that proposal the request's
 * stop token and tells the watch where to look (assay_boundary_expect).
 * The watch counts the boundary when a round of that request rejects its
 * proposal at that position: a correct engine then continues past it.
 *
 * An abort reaches an engine between two steps, and a speculative round of
 * the bundled engine (draft, verify, roll back) is one step, so an abort
 * cannot land inside a round through the step interface; the nearest it
 * can land is right after one, counted by whether that round rejected
 * drafts (abort-rejected) or accepted them all (abort-accepted).
 *
 * The watch wraps any adapter: every call passes through; after each step
 * it reads the engine's block accounting (when it has one) and the step's
 * events, and at each abort it classifies the request's phase. What it
 * cannot see through the interface (an engine without block accounting has
 * no visible prefill or preemption) it does not count: the report says
 * which placed boundaries were not reached.
 *
 * Usage:
 *     struct assay_boundary_shape s = assay_boundary_shape_of(spec);
 *     struct assay_boundary_expect e;
 *     assay_boundary_workload(&s, vocab, n_ctx, memo, draft_memo, seed, &w, &e);
 *     struct assay_boundary_watch *watch; struct assay_adapter wa;
 *     assay_boundary_watch_open(adapter, &watch, &wa);
 *     assay_boundary_watch_expect(watch, &e);
 *     ... run w on wa with any check ...
 *     assay_boundary_report(watch, text, sizeof text);
 *     assay_boundary_watch_close(watch);
 */
#ifndef ASSAY_BOUNDARY_H
#define ASSAY_BOUNDARY_H

#include <stddef.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/workload.h"

struct assay_oracle_memo; /* checks/equivalence.h */

enum assay_boundary {
    ASSAY_BOUNDARY_STOP_AT_LIMIT,    /* the stop token is the last token max_tokens allows */
    ASSAY_BOUNDARY_STOP_IN_DRAFT,    /* the stop token delivered among a round's accepted drafts */
    ASSAY_BOUNDARY_STOP_REJECTED,    /* the stop token proposed by the draft and rejected */
    ASSAY_BOUNDARY_ABORT_QUEUED,     /* aborted before the engine gave it any block or token */
    ASSAY_BOUNDARY_ABORT_PREFILL,    /* aborted between two chunks of its prompt's prefill */
    ASSAY_BOUNDARY_ABORT_DECODING,   /* aborted while generating */
    ASSAY_BOUNDARY_ABORT_REJECTED,   /* aborted right after a round that rejected drafts */
    ASSAY_BOUNDARY_ABORT_ACCEPTED,   /* aborted right after a round that accepted all its drafts */
    ASSAY_BOUNDARY_ABORT_PREEMPTED,  /* aborted while preempted (its blocks taken back) */
    ASSAY_BOUNDARY_PROMPT_BELOW,     /* a prompt one token short of a block multiple, served */
    ASSAY_BOUNDARY_PROMPT_MULTIPLE,  /* a prompt of whole blocks, served */
    ASSAY_BOUNDARY_PROMPT_ABOVE,     /* a prompt one token past a block multiple, served */
    ASSAY_BOUNDARY_PROMPT_CACHED,    /* every full block of the prompt a prefix-cache hit
                                        (all but the last: an engine computes one token) */
    ASSAY_BOUNDARY_POOL_FULL,        /* a step after which every block was in use */
    ASSAY_BOUNDARY_N
};

/* The boundary's name ("stop-at-limit", ...). */
const char *assay_boundary_name(enum assay_boundary b);

/* What the generator needs of the engine. */
struct assay_boundary_shape {
    int32_t block;  /* KV block size (1 when not paged) */
    int32_t chunk;  /* prefill chunk (0: whole prompts) */
    int32_t spec;   /* draft tokens per round (0: no speculation) */
    int32_t blocks; /* the pool's blocks (0: not paged) */
    int32_t batch;  /* sequences per step */
};

/* The shape an engine spec states ("bundled:kv=paged,block=4,blocks=24,
 * chunk=8,spec=2,batch=4"): keys absent take the bundled engine's defaults
 * as far as they matter here (block 16, no chunking, no speculation). */
struct assay_boundary_shape assay_boundary_shape_of(const char *spec);

/* Where the generator placed stop tokens that the draft proposes and the
 * target rejects: request id[i]'s round rejects its proposal at output
 * position at[i]. */
#define ASSAY_BOUNDARY_MAX_EXPECT 8
struct assay_boundary_expect {
    int32_t n;
    uint64_t id[ASSAY_BOUNDARY_MAX_EXPECT];
    int32_t at[ASSAY_BOUNDARY_MAX_EXPECT];
};

/*
 * A workload that places every boundary above for an engine of shape s
 * (prompts drawn from seed; greedy requests' stop tokens taken from the
 * oracle's greedy continuations through memo). Requests arrive in two
 * phases: one at a time (stops, aborts by phase, prompt lengths, a repeated
 * prompt), then together, more than the pool holds (a full pool,
 * preemption, aborts of preempted requests). draft_memo is the oracle of
 * the engine's draft model (NULL: no stop token is placed where the draft
 * proposes it; s->spec 0 ignores it); *expect (NULL: not wanted) receives
 * where those stops were placed. Returns ASSAY_OK, ASSAY_ERR_INVALID (a
 * context or vocabulary too small), ASSAY_ERR_NOMEM, or a memo's error.
 */
enum assay_status assay_boundary_workload(const struct assay_boundary_shape *s, int32_t vocab,
                                          int32_t n_ctx, struct assay_oracle_memo *memo,
                                          struct assay_oracle_memo *draft_memo, uint64_t seed,
                                          struct assay_workload **out,
                                          struct assay_boundary_expect *expect);

/*
 * Where a greedy request's stop token can be a proposal of the draft that
 * the target rejects. Given the request's prompt and the target's greedy
 * tokens out[0..n) (the oracle's), the draft's argmax at each position
 * (its oracle through draft_memo) and the bundled engine's rounds (spec
 * proposals each, fewer where max_tokens leaves less room; all accepted,
 * one token more from the target): *at is the first output position where
 * a round rejects a proposal and *token that proposal, when it wins the
 * draft's argmax by more than float rounding moves and the target does not
 * generate it before; else *at = -1. Returns ASSAY_OK, ASSAY_ERR_NOMEM or
 * the memo's error.
 */
enum assay_status assay_boundary_rejected_proposal(struct assay_oracle_memo *draft_memo,
                                                  const int32_t *prompt, int32_t len,
                                                  const int32_t *out, int32_t n, int32_t vocab,
                                                  int32_t spec, int32_t max_tokens, int32_t *at,
                                                  int32_t *token);

struct assay_boundary_watch;

/* Wrap inner (which must outlive the watch) as *out, an adapter with the
 * same capabilities. ASSAY_ERR_NOMEM. */
enum assay_status assay_boundary_watch_open(const struct assay_adapter *inner,
                                            struct assay_boundary_watch **watch,
                                            struct assay_adapter *out);

/* Tell the watch where the workload placed stop tokens the draft proposes
 * (a copy is kept); before the workload's requests are added. */
void assay_boundary_watch_expect(struct assay_boundary_watch *watch,
                                 const struct assay_boundary_expect *expect);

/* Free the watch (NULL-safe); the adapter it made must not be used after.
 * The inner adapter is not freed. */
void assay_boundary_watch_close(struct assay_boundary_watch *watch);

/* How many times boundary b was reached so far. */
int32_t assay_boundary_count(const struct assay_boundary_watch *watch, enum assay_boundary b);

/* The prefill chunks (1-based: aborted after chunk c) an abort was reached
 * in, as bits 1..31. */
uint32_t assay_boundary_prefill_chunks(const struct assay_boundary_watch *watch);

/* "boundaries reached 14 of 14: stop-at-limit 2, ..." and, when some were
 * not, "; not reached: ...". Returns how many were not reached. */
int32_t assay_boundary_report(const struct assay_boundary_watch *watch, char *buf, size_t size);

#endif
