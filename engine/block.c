/*
 * block.c - the paged KV cache's block manager and prefix cache (block.h):
 * allocate, reference and release blocks (assay_block_alloc, _ref,
 * _release), hash, look up and register full blocks in the prefix cache,
 * evicting cached blocks in LRU order, and report the counts, a full audit
 * snapshot and a self-check (assay_block_get_stats, _get_audit, _check).
 * Owned by the engine (engine.c), which calls it for every sequence it
 * schedules; the audit snapshot feeds the block conservation check.
 */
#include "block.h"

#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/mutant.h"
#include "../core/rng.h"

enum block_state { BLOCK_FREE = 0, BLOCK_USED = 1, BLOCK_CACHED = 2 };

struct assay_block_manager {
    int32_t n_blocks, block_size;
    bool prefix_cache;
    int mutant;
    int32_t *ref;        /* (n_blocks) */
    uint8_t *state;      /* (n_blocks) enum block_state */
    int32_t *free_list;  /* (n_blocks) stack */
    int32_t n_free;
    int32_t n_used;
    int32_t n_cached;    /* CACHED blocks (on the LRU list) */
    int32_t *lru_prev;   /* (n_blocks) LRU list of CACHED blocks, -1 ends */
    int32_t *lru_next;
    int32_t lru_head, lru_tail;
    bool *registered;    /* (n_blocks) */
    uint64_t *hash;      /* (n_blocks) */
    uint64_t *parent;    /* (n_blocks) */
    int32_t *tokens;     /* (n_blocks, block_size) content of registered blocks */
    int32_t *table;      /* (table_size) open addressing, -1 empty */
    int32_t table_size;  /* a power of two >= 2 n_blocks */
    int32_t n_registered;
    /* audit scratch */
    int32_t *audit_evictable; /* (n_blocks) */
    int32_t *audit_cache;     /* (n_blocks) */
};

enum assay_status assay_block_manager_init(struct assay_block_manager **out, int32_t n_blocks,
                                           int32_t block_size, bool prefix_cache, int mutant)
{
    *out = NULL;
    if (n_blocks < 1 || block_size < 1 || n_blocks > (1 << 28)) {
        return ASSAY_ERR_INVALID;
    }
    struct assay_block_manager *bm = assay_calloc(1, sizeof *bm);
    if (bm == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    bm->n_blocks = n_blocks;
    bm->block_size = block_size;
    bm->prefix_cache = prefix_cache;
    bm->mutant = mutant;
    bm->table_size = 1;
    while (bm->table_size < 2 * n_blocks) {
        bm->table_size *= 2;
    }
    size_t nb = (size_t)n_blocks;
    bm->ref = assay_calloc(nb, sizeof *bm->ref);
    bm->state = assay_calloc(nb, sizeof *bm->state);
    bm->free_list = assay_calloc(nb, sizeof *bm->free_list);
    bm->lru_prev = assay_calloc(nb, sizeof *bm->lru_prev);
    bm->lru_next = assay_calloc(nb, sizeof *bm->lru_next);
    bm->registered = assay_calloc(nb, sizeof *bm->registered);
    bm->hash = assay_calloc(nb, sizeof *bm->hash);
    bm->parent = assay_calloc(nb, sizeof *bm->parent);
    bm->tokens = prefix_cache ? assay_calloc(nb * (size_t)block_size, sizeof *bm->tokens) : NULL;
    bm->table = assay_calloc((size_t)bm->table_size, sizeof *bm->table);
    bm->audit_evictable = assay_calloc(nb, sizeof(int32_t));
    bm->audit_cache = assay_calloc(nb, sizeof(int32_t));
    if (bm->ref == NULL || bm->state == NULL || bm->free_list == NULL || bm->lru_prev == NULL ||
        bm->lru_next == NULL || bm->registered == NULL || bm->hash == NULL ||
        bm->parent == NULL || (prefix_cache && bm->tokens == NULL) || bm->table == NULL ||
        bm->audit_evictable == NULL || bm->audit_cache == NULL) {
        assay_block_manager_free(bm);
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t i = 0; i < bm->table_size; i++) {
        bm->table[i] = -1;
    }
    /* Block 0 on top of the stack, so allocation order is 0, 1, 2, ... */
    for (int32_t i = 0; i < n_blocks; i++) {
        bm->free_list[i] = n_blocks - 1 - i;
        bm->lru_prev[i] = bm->lru_next[i] = -1;
    }
    bm->n_free = n_blocks;
    bm->lru_head = bm->lru_tail = -1;
    *out = bm;
    return ASSAY_OK;
}

void assay_block_manager_free(struct assay_block_manager *bm)
{
    if (bm == NULL) {
        return;
    }
    assay_free(bm->ref);
    assay_free(bm->state);
    assay_free(bm->free_list);
    assay_free(bm->lru_prev);
    assay_free(bm->lru_next);
    assay_free(bm->registered);
    assay_free(bm->hash);
    assay_free(bm->parent);
    assay_free(bm->tokens);
    assay_free(bm->table);
    assay_free(bm->audit_evictable);
    assay_free(bm->audit_cache);
    assay_free(bm);
}

static void lru_remove(struct assay_block_manager *bm, int32_t b)
{
    int32_t p = bm->lru_prev[b], n = bm->lru_next[b];
    if (p >= 0) {
        bm->lru_next[p] = n;
    } else {
        bm->lru_head = n;
    }
    if (n >= 0) {
        bm->lru_prev[n] = p;
    } else {
        bm->lru_tail = p;
    }
    bm->lru_prev[b] = bm->lru_next[b] = -1;
}

static void lru_push_tail(struct assay_block_manager *bm, int32_t b)
{
    bm->lru_prev[b] = bm->lru_tail;
    bm->lru_next[b] = -1;
    if (bm->lru_tail >= 0) {
        bm->lru_next[bm->lru_tail] = b;
    } else {
        bm->lru_head = b;
    }
    bm->lru_tail = b;
}

static int32_t slot_of(const struct assay_block_manager *bm, uint64_t hash)
{
    return (int32_t)(assay_mix64(hash) & (uint64_t)(bm->table_size - 1));
}

/* Remove block b from the hash table (linear probing, backward shift). */
static void unregister(struct assay_block_manager *bm, int32_t b)
{
    if (!bm->registered[b]) {
        return;
    }
    int32_t mask = bm->table_size - 1;
    int32_t i = slot_of(bm, bm->hash[b]);
    while (bm->table[i] != b) {
        i = (i + 1) & mask;
    }
    bm->table[i] = -1;
    int32_t j = (i + 1) & mask;
    while (bm->table[j] >= 0) {
        int32_t home = slot_of(bm, bm->hash[bm->table[j]]);
        /* Move the entry back if its home is not within (i, j]. */
        bool in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!in_range) {
            bm->table[i] = bm->table[j];
            bm->table[j] = -1;
            i = j;
        }
        j = (j + 1) & mask;
    }
    bm->registered[b] = false;
    bm->n_registered--;
}

int32_t assay_block_available(const struct assay_block_manager *bm)
{
    return bm->n_free + bm->n_cached;
}

int32_t assay_block_alloc(struct assay_block_manager *bm)
{
    int32_t b;
    if (bm->n_free > 0) {
        b = bm->free_list[--bm->n_free];
    } else if (bm->lru_head >= 0) {
        b = bm->lru_head;
        lru_remove(bm, b);
        if (!ASSAY_MUTANT_ON(bm->mutant, ASSAY_MUTANT_PREFIX_ENTRY_DANGLING)) {
            unregister(bm, b);
        }
        /* (The planted bug above keeps the evicted block's cache entry: it
         * goes on pointing at the block, which now receives other KV.) */
        bm->n_cached--;
    } else {
        return -1;
    }
    bm->state[b] = BLOCK_USED;
    bm->ref[b] = 1;
    bm->n_used++;
    return b;
}

void assay_block_ref(struct assay_block_manager *bm, int32_t b)
{
    if (bm->state[b] == BLOCK_CACHED) {
        lru_remove(bm, b);
        bm->n_cached--;
        bm->state[b] = BLOCK_USED;
        bm->n_used++;
    }
    bm->ref[b]++;
}

void assay_block_release(struct assay_block_manager *bm, int32_t b)
{
    bm->ref[b]--;
    if (bm->state[b] != BLOCK_USED) {
        /* A release of a block nobody holds: leave the negative count for
         * the checks to see, but never push a block on a list twice. */
        return;
    }
    if (bm->ref[b] > 0) {
        if (!ASSAY_MUTANT_ON(bm->mutant, ASSAY_MUTANT_BLOCK_REUSE_WHILE_SHARED)) {
            return;
        }
        /* The planted bug: a shared block is freed (and, the free list being
         * a stack, handed out next) while another sequence still reads it. */
        bm->ref[b] = 0;
        unregister(bm, b);
    }
    bm->n_used--;
    if (bm->registered[b]) {
        bm->state[b] = BLOCK_CACHED;
        bm->n_cached++;
        lru_push_tail(bm, b);
    } else {
        bm->state[b] = BLOCK_FREE;
        bm->free_list[bm->n_free++] = b;
    }
}

uint64_t assay_block_hash(const struct assay_block_manager *bm, uint64_t parent,
                          const int32_t *tokens)
{
    if (ASSAY_MUTANT_ON(bm->mutant, ASSAY_MUTANT_PREFIX_KEY_LAST_BLOCK)) {
        parent = 0; /* the planted bug: the key forgets what came before */
    }
    uint64_t h = assay_mix64(parent ^ 0x243f6a8885a308d3ULL);
    for (int32_t i = 0; i < bm->block_size; i++) {
        h = assay_mix64(h ^ (uint64_t)(uint32_t)tokens[i]);
    }
    return h;
}

int32_t assay_block_lookup(const struct assay_block_manager *bm, uint64_t hash, uint64_t parent,
                           const int32_t *tokens)
{
    if (!bm->prefix_cache) {
        return -1;
    }
    bool check_parent = !ASSAY_MUTANT_ON(bm->mutant, ASSAY_MUTANT_PREFIX_KEY_LAST_BLOCK);
    int32_t mask = bm->table_size - 1;
    for (int32_t i = slot_of(bm, hash); bm->table[i] >= 0; i = (i + 1) & mask) {
        int32_t b = bm->table[i];
        if (bm->hash[b] == hash && (!check_parent || bm->parent[b] == parent) &&
            memcmp(bm->tokens + (int64_t)b * bm->block_size, tokens,
                   sizeof(int32_t) * (size_t)bm->block_size) == 0) {
            return b;
        }
    }
    return -1;
}

bool assay_block_register(struct assay_block_manager *bm, int32_t b, uint64_t hash,
                          uint64_t parent, const int32_t *tokens)
{
    if (!bm->prefix_cache || bm->registered[b] ||
        assay_block_lookup(bm, hash, parent, tokens) >= 0) {
        return false;
    }
    int32_t mask = bm->table_size - 1;
    int32_t i = slot_of(bm, hash);
    while (bm->table[i] >= 0) {
        i = (i + 1) & mask;
    }
    bm->table[i] = b;
    bm->registered[b] = true;
    bm->hash[b] = hash;
    bm->parent[b] = parent;
    memcpy(bm->tokens + (int64_t)b * bm->block_size, tokens,
           sizeof(int32_t) * (size_t)bm->block_size);
    bm->n_registered++;
    return true;
}

void assay_block_get_stats(const struct assay_block_manager *bm, struct assay_block_stats *out)
{
    out->block_size = bm->block_size;
    out->total = bm->n_blocks;
    out->free = bm->n_free;
    if (ASSAY_MUTANT_ON(bm->mutant, ASSAY_MUTANT_EVICTABLE_COUNTED_FREE)) {
        /* The planted bug: "free" reports what an allocation can obtain,
         * evictable blocks included, which are reported again as cached. */
        out->free = bm->n_free + bm->n_cached;
    }
    out->in_use = bm->n_used;
    out->cached = bm->n_cached;
}

void assay_block_get_audit(struct assay_block_manager *bm, struct assay_block_audit *out)
{
    memset(out, 0, sizeof *out);
    assay_block_get_stats(bm, &out->stats);
    out->ref_count = bm->ref;
    out->free_list = bm->free_list;
    out->n_free = bm->n_free;
    int32_t n = 0;
    for (int32_t b = bm->lru_head; b >= 0 && n < bm->n_blocks; b = bm->lru_next[b]) {
        bm->audit_evictable[n++] = b;
    }
    out->evictable = bm->audit_evictable;
    out->n_evictable = n;
    n = 0;
    for (int32_t i = 0; i < bm->table_size && n < bm->n_blocks; i++) {
        if (bm->table[i] >= 0) {
            bm->audit_cache[n++] = bm->table[i];
        }
    }
    out->cache_block = bm->audit_cache;
    out->n_cache = n;
    out->block_tokens = bm->tokens;
    out->block_key = bm->hash;
    out->block_parent = bm->parent;
}

enum assay_status assay_block_check(const struct assay_block_manager *bm, char *msg, size_t size)
{
    int32_t n_free = 0, n_used = 0, n_cached = 0;
    for (int32_t b = 0; b < bm->n_blocks; b++) {
        switch (bm->state[b]) {
        case BLOCK_FREE: n_free++; break;
        case BLOCK_USED: n_used++; break;
        case BLOCK_CACHED: n_cached++; break;
        default: break;
        }
        if ((bm->state[b] == BLOCK_USED) != (bm->ref[b] > 0) || bm->ref[b] < 0) {
            snprintf(msg, size, "block %d: state %d with reference count %d", (int)b,
                     (int)bm->state[b], (int)bm->ref[b]);
            return ASSAY_ERR_INTERNAL;
        }
        if (bm->state[b] == BLOCK_CACHED && !bm->registered[b]) {
            snprintf(msg, size, "block %d: cached but not registered", (int)b);
            return ASSAY_ERR_INTERNAL;
        }
    }
    if (n_free != bm->n_free || n_used != bm->n_used || n_cached != bm->n_cached) {
        snprintf(msg, size, "block states free/used/cached %d/%d/%d, counters %d/%d/%d",
                 (int)n_free, (int)n_used, (int)n_cached, (int)bm->n_free, (int)bm->n_used,
                 (int)bm->n_cached);
        return ASSAY_ERR_INTERNAL;
    }
    for (int32_t i = 0; i < bm->n_free; i++) {
        if (bm->state[bm->free_list[i]] != BLOCK_FREE) {
            snprintf(msg, size, "block %d on the free list is not free", (int)bm->free_list[i]);
            return ASSAY_ERR_INTERNAL;
        }
    }
    int32_t in_lru = 0;
    for (int32_t b = bm->lru_head; b >= 0; b = bm->lru_next[b]) {
        if (bm->state[b] != BLOCK_CACHED || ++in_lru > bm->n_blocks) {
            snprintf(msg, size, "block %d on the LRU list is not cached", (int)b);
            return ASSAY_ERR_INTERNAL;
        }
    }
    if (in_lru != bm->n_cached) {
        snprintf(msg, size, "LRU list holds %d blocks, %d are cached", (int)in_lru,
                 (int)bm->n_cached);
        return ASSAY_ERR_INTERNAL;
    }
    int32_t in_table = 0;
    for (int32_t i = 0; i < bm->table_size; i++) {
        if (bm->table[i] >= 0) {
            in_table++;
            if (!bm->registered[bm->table[i]]) {
                snprintf(msg, size, "hash table holds unregistered block %d", (int)bm->table[i]);
                return ASSAY_ERR_INTERNAL;
            }
        }
    }
    if (in_table != bm->n_registered) {
        snprintf(msg, size, "hash table holds %d blocks, %d registered", (int)in_table,
                 (int)bm->n_registered);
        return ASSAY_ERR_INTERNAL;
    }
    return ASSAY_OK;
}
