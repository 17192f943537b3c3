/*
 * block_model.h - a reference model of paged-KV block accounting, written for
 * clarity and never optimised.
 *
 * Given an engine's audit snapshot (struct assay_block_audit, core/request.h)
 * the model derives, from the structure alone (the sequences' block tables,
 * the free list, the evictable list and the prefix cache's entries), what
 * every block's state and reference count and the free / in-use / cached
 * totals must be, and compares them with the numbers the engine keeps itself.
 * It shares no code with the engine's block manager: it includes
 * core/request.h for the snapshot's layout and nothing of engine/.
 *
 * The accounting contract it checks (the rules, numbered as in the messages):
 *
 *   R1  shape: total >= 1, block_size >= 1, no negative count, every array
 *       with entries present.
 *   R2  every block id in a table, list or cache entry is in 0..total-1.
 *   R3  nothing twice: no block twice on the free list, the evictable list or
 *       among the cache entries, no block twice in one table, no sequence id
 *       twice.
 *   R4  reference counts: a block's reference count is the number of block
 *       table entries that hold it. Registration in the prefix cache takes no
 *       reference (the cache is an index, not a holder).
 *   R5  states and lists: a held block is IN USE and on neither list; a block
 *       held by no table but registered in the prefix cache is CACHED
 *       (evictable) and on the evictable list only; any other block is FREE
 *       and on the free list only. In particular no cache entry points at a
 *       free block.
 *   R6  totals: the engine's free, in-use and cached counts equal the derived
 *       ones, and free + in use + cached == total.
 *   R7  sharing: a block held by two or more tables is registered in the
 *       prefix cache (shared read-only as a full prefix block) and sits at the
 *       same index of every table that holds it.
 *   R8  content (when the audit carries tokens and keys): a registered block
 *       held at index j of a table is keyed on that sequence's tokens
 *       [j * block_size, (j + 1) * block_size), which the sequence has, and
 *       chained on the key of the block at index j - 1 of that table (0 for
 *       j = 0) when that block is registered too: a prefix block is reused
 *       only after the same history.
 *   R9  coverage (when the audit carries computed positions): a table covers
 *       the sequence's computed positions, and holds at most slack_blocks
 *       blocks beyond them.
 *   R10 sequence counts (when carried): 1 <= prompt <= tokens and
 *       0 <= computed <= tokens.
 *   R11 drained (when asked): no sequence holds a block; every block is free
 *       or evictable.
 *
 * Lifetime: assay_block_model_init / assay_block_model_free. The model keeps
 * scratch arrays that grow with the largest pool it has seen.
 */
#ifndef ASSAY_BLOCK_MODEL_H
#define ASSAY_BLOCK_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/request.h"
#include "../core/status.h"

enum assay_block_state {
    ASSAY_BLOCK_FREE = 0,
    ASSAY_BLOCK_IN_USE = 1,
    ASSAY_BLOCK_CACHED = 2,
};

struct assay_block_model_opts {
    int32_t slack_blocks; /* R9: blocks a table may hold beyond its computed
                             positions; -1: no upper limit */
    bool drained;         /* R11: the engine has no work left */
};

/* slack_blocks 0 (what the bundled engine promises), not drained. */
struct assay_block_model_opts assay_block_model_default_opts(void);

/* What the structure of an audit says the accounting must be. Arrays are
 * borrowed from the model until its next call. */
struct assay_block_derived {
    int32_t total;
    int32_t free, in_use, cached;
    const int32_t *ref;   /* [total] block table entries holding each block */
    const uint8_t *state; /* [total] enum assay_block_state */
    const bool *registered; /* [total] listed among the prefix cache's entries */
};

struct assay_block_model;

/* An empty model. ASSAY_ERR_NOMEM; on failure *out is NULL. */
enum assay_status assay_block_model_init(struct assay_block_model **out);
void assay_block_model_free(struct assay_block_model *model);

/*
 * Derive the accounting from the audit's tables, lists and cache entries
 * (R4, R5: entries out of range are left out). Returns ASSAY_ERR_INVALID for
 * a malformed audit (R1), ASSAY_ERR_NOMEM; out is then untouched.
 */
enum assay_status assay_block_model_derive(struct assay_block_model *model,
                                           const struct assay_block_audit *audit,
                                           struct assay_block_derived *out);

/*
 * Check the audit against every rule above. Returns the number of
 * violations found (0: the accounting is consistent), and describes the
 * first in msg ("R4 refcount: block 7 ..."); msg is "" when there is none.
 * Returns -1 (msg says why) when the model ran out of memory.
 */
int32_t assay_block_model_check(struct assay_block_model *model,
                                const struct assay_block_audit *audit,
                                const struct assay_block_model_opts *opts, char *msg,
                                size_t size);

#endif
