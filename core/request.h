/*
 * request.h - the plain data that crosses the engine interface: requests,
 * sampling parameters, events, finish reasons, block statistics.
 *
 * These are transparent structs shared by every layer (engine, adapters,
 * checks, load generators, reports). The operations on them live in
 * adapters/adapter.h.
 */
#ifndef ASSAY_REQUEST_H
#define ASSAY_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * How temperature, top-k and top-p combine. In every order a token that is
 * removed has probability exactly 0, ties are broken by the lower token id,
 * and the top-p set is the shortest prefix (in order of descending
 * probability) whose mass reaches top_p, the token that crosses it included.
 *
 * Ties, exactly: tokens are ranked by descending tempered logit and tokens
 * of equal logit by ascending id, and both filters cut that one order.
 * Top-k keeps its first k tokens: where the k-th and the (k+1)-th have the
 * same logit, the lower id is kept and the higher removed, never both (k
 * tokens, whatever ties there are). Top-p keeps the shortest prefix of it
 * whose mass reaches top_p: where the token that crosses top_p has the same
 * logit as the next, the lower id (which comes first) crosses and is kept,
 * and the higher is removed. Greedy decoding takes the lowest id of the
 * largest logit. (Thresholds on a logit or a probability, "keep every
 * token at least as likely as the k-th", keep every tied token instead:
 * not this contract.)
 *
 * JOINT (assay's default): divide logits by the temperature, softmax; top-k
 * keeps the k most likely; top-p is measured on that same full tempered
 * distribution; the kept set is the intersection; renormalise once.
 * (The joint top-k/top-p filtering of SGLang and FlashInfer.)
 * SEQUENTIAL: temperature, top-k, renormalise, then top-p measured on the
 * renormalised top-k distribution (vLLM, Hugging Face; llama.cpp with
 * samplers ordered temperature, top_k, top_p).
 */
enum assay_sampling_order {
    ASSAY_SAMPLING_JOINT = 0,
    ASSAY_SAMPLING_SEQUENTIAL = 1,
};

struct assay_sampling {
    float temperature; /* 0 = greedy (argmax, lower id on ties) */
    int32_t top_k;     /* 0 = off */
    float top_p;       /* 1 = off; in (0, 1] */
    bool seeded;       /* false: the engine picks a seed of its own */
    uint64_t seed;     /* per-request random stream when seeded */
};

/* Greedy decoding: temperature 0, no top-k, no top-p, unseeded. */
struct assay_sampling assay_sampling_greedy(void);

struct assay_request {
    uint64_t id;           /* unique among the adapter's live requests */
    const int32_t *prompt; /* borrowed for the call; the adapter copies it */
    int32_t prompt_len;
    int32_t max_tokens;    /* generate exactly this many unless stopped */
    int32_t stop_token;    /* -1: none; else finish (reason STOP) after it */
    struct assay_sampling sampling;
};

enum assay_finish_reason {
    ASSAY_FINISH_NONE = 0,
    ASSAY_FINISH_LENGTH = 1, /* max_tokens generated */
    ASSAY_FINISH_STOP = 2,   /* the stop token was generated (and delivered) */
    ASSAY_FINISH_ABORT = 3,  /* the caller aborted it */
    ASSAY_FINISH_ERROR = 4,  /* the engine or server failed it; see error/message */
};

const char *assay_finish_reason_str(enum assay_finish_reason reason);

enum assay_event_kind {
    ASSAY_EVENT_TOKEN = 1,      /* one generated token */
    ASSAY_EVENT_FINISH = 2,     /* the request is done; no event follows for it */
    ASSAY_EVENT_SPEC_ROUND = 3, /* a speculative round: drafted and accepted counts */
};

struct assay_event {
    enum assay_event_kind kind;
    uint64_t request_id;
    int64_t t_ns;   /* CLOCK_MONOTONIC when the event reached the caller */
    int32_t token;  /* TOKEN: the token id */
    int32_t index;  /* TOKEN: 0-based output position; FINISH: output count;
                       SPEC_ROUND: output position of the first drafted token */
    int32_t n_drafted;  /* SPEC_ROUND: tokens proposed by the draft */
    int32_t n_accepted; /* SPEC_ROUND: of those, accepted by the target */
    enum assay_finish_reason reason; /* FINISH */
    int32_t error;                   /* FINISH with ERROR: an enum assay_status */
    const char *message; /* FINISH with ERROR: why; borrowed until the next step */
};

/* Block accounting of a paged KV cache, as the engine sees it. */
struct assay_block_stats {
    int32_t block_size;
    int32_t total;
    int32_t free;    /* on the free list */
    int32_t in_use;  /* referenced by at least one running sequence */
    int32_t cached;  /* referenced by no sequence, kept for prefix reuse (evictable) */
};

/*
 * A full snapshot of block accounting for property checks, borrowed from the
 * engine until its next call. Arrays are indexed as stated.
 *
 * The contract (what oracles/block_model.h checks): ref_count[b] is the
 * number of entries of the sequences' block tables that hold b; registration
 * in the prefix cache takes no reference. A block is in use when held,
 * cached (evictable) when not held but registered, free otherwise, and it is
 * on the free list exactly when free and on the evictable list exactly when
 * cached. The fields after seq_blocks may be NULL (an engine that does not
 * keep them); the rules that need them are then not checked.
 */
struct assay_block_audit {
    struct assay_block_stats stats;
    const int32_t *ref_count;   /* [total] the engine's own reference counts */
    const int32_t *free_list;   /* [n_free] block ids on the free list */
    int32_t n_free;
    const int32_t *evictable;   /* [n_evictable] cached blocks with no reference */
    int32_t n_evictable;
    const int32_t *cache_block; /* [n_cache] blocks registered in the prefix cache */
    int32_t n_cache;
    int32_t n_seqs;             /* sequences holding blocks */
    const uint64_t *seq_id;     /* [n_seqs] */
    const int32_t *seq_n_blocks;        /* [n_seqs] */
    const int32_t *const *seq_blocks;   /* [n_seqs][seq_n_blocks[i]] block tables */
    const int32_t *seq_n_prompt;        /* [n_seqs] where the engine puts the prompt/output boundary */
    const int32_t *seq_n_tokens;        /* [n_seqs] prompt + generated tokens */
    const int32_t *seq_n_computed;      /* [n_seqs] leading positions whose KV the table holds */
    const int32_t *const *seq_tokens;   /* [n_seqs][seq_n_tokens[i]] prompt then generated */
    const int32_t *block_tokens; /* [total, block_size] a registered block's cache key tokens */
    const uint64_t *block_key;    /* [total] a registered block's cache key */
    const uint64_t *block_parent; /* [total] the key it is chained on: the key of the
                                     block before it in a table, 0 for a first block */
};

#endif
