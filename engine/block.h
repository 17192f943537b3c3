/*
 * block.h - the block manager of the paged KV cache, with a prefix cache.
 *
 * Blocks are fixed-size runs of KV positions. A block is FREE (on the free
 * list), USED (referenced by at least one sequence) or CACHED (referenced by
 * none but registered in the prefix cache, evictable in LRU order). A USED
 * block may also be registered. The three counts are kept separately, never
 * derived from each other, so that conservation (free + used + cached ==
 * total) is something a check can test.
 *
 * The prefix cache maps a full block's content hash, chained over every
 * block before it, to the block holding its KV. Lookups compare the stored
 * tokens and parent hash as well, so a hash collision cannot alias two
 * prefixes.
 *
 * Lifetime: assay_block_manager_init / assay_block_manager_free. Nothing
 * allocates after init.
 */
#ifndef ASSAY_BLOCK_H
#define ASSAY_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/request.h"
#include "../core/status.h"

struct assay_block_manager;

enum assay_status assay_block_manager_init(struct assay_block_manager **out, int32_t n_blocks,
                                           int32_t block_size, bool prefix_cache, int mutant);
void assay_block_manager_free(struct assay_block_manager *bm);

/* Blocks that an allocation can obtain now: free plus evictable. */
int32_t assay_block_available(const struct assay_block_manager *bm);

/* Take a block (free list first, else evict the least recently used cached
 * block), with reference count 1. Returns -1 when none is available. */
int32_t assay_block_alloc(struct assay_block_manager *bm);

/* Add a reference to a block found by assay_block_lookup. */
void assay_block_ref(struct assay_block_manager *bm, int32_t block);

/* Drop a reference; at zero the block becomes CACHED if registered, else
 * FREE. */
void assay_block_release(struct assay_block_manager *bm, int32_t block);

/* The chained hash of a block's tokens after a block whose hash is parent
 * (0 for the first block). */
uint64_t assay_block_hash(const struct assay_block_manager *bm, uint64_t parent,
                          const int32_t *tokens);

/* The block registered for (hash, parent, tokens), or -1. Does not take a
 * reference. */
int32_t assay_block_lookup(const struct assay_block_manager *bm, uint64_t hash, uint64_t parent,
                           const int32_t *tokens);

/* Register a full, computed block under hash. Returns false (and changes
 * nothing) when the prefix cache is off, the block is already registered, or
 * another block holds the same content. */
bool assay_block_register(struct assay_block_manager *bm, int32_t block, uint64_t hash,
                          uint64_t parent, const int32_t *tokens);

/* Counts kept by the manager (see the header comment). */
void assay_block_get_stats(const struct assay_block_manager *bm, struct assay_block_stats *out);

/* Fill the manager's part of an audit (stats, ref counts, free list,
 * evictable and registered blocks); arrays are borrowed until the next
 * call into the manager. */
void assay_block_get_audit(struct assay_block_manager *bm, struct assay_block_audit *out);

/* Check the manager's own structures against each other (list membership,
 * states, counts, the hash table). Returns ASSAY_ERR_INTERNAL with a reason
 * in msg when they disagree. */
enum assay_status assay_block_check(const struct assay_block_manager *bm, char *msg, size_t size);

#endif
