/*
 * block_model.c - the reference model of paged-KV block accounting
 * (block_model.h), kept naive on purpose and sharing no code with the
 * engine's block manager. assay_block_model_derive works out from an audit
 * snapshot's structure what each block's state and count must be;
 * assay_block_model_check compares that with the engine's own numbers and
 * reports the first broken rule. The block conservation check
 * (checks/property.c) calls it after every step.
 */
#include "block_model.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"

struct assay_block_model {
    int32_t cap;          /* blocks the scratch arrays hold */
    int32_t *ref;         /* (cap) derived reference counts */
    uint8_t *state;       /* (cap) derived states */
    bool *registered;     /* (cap) among the cache entries */
    int32_t *on_free;     /* (cap) times on the free list */
    int32_t *on_evict;    /* (cap) times on the evictable list */
    int32_t *in_cache;    /* (cap) times among the cache entries */
    int32_t *holder;      /* (cap) first sequence holding the block, or -1 */
    int32_t *holder_index; /* (cap) its index in that sequence's table */
    int32_t *seen_in_seq; /* (cap) last sequence (+1) that held the block */
};

struct assay_block_model_opts assay_block_model_default_opts(void)
{
    struct assay_block_model_opts o = {0, false};
    return o;
}

enum assay_status assay_block_model_init(struct assay_block_model **out)
{
    *out = assay_calloc(1, sizeof **out);
    return *out != NULL ? ASSAY_OK : ASSAY_ERR_NOMEM;
}

static void free_scratch(struct assay_block_model *m)
{
    assay_free(m->ref);
    assay_free(m->state);
    assay_free(m->registered);
    assay_free(m->on_free);
    assay_free(m->on_evict);
    assay_free(m->in_cache);
    assay_free(m->holder);
    assay_free(m->holder_index);
    assay_free(m->seen_in_seq);
    m->ref = m->on_free = m->on_evict = m->in_cache = NULL;
    m->holder = m->holder_index = m->seen_in_seq = NULL;
    m->state = NULL;
    m->registered = NULL;
    m->cap = 0;
}

void assay_block_model_free(struct assay_block_model *m)
{
    if (m == NULL) {
        return;
    }
    free_scratch(m);
    assay_free(m);
}

static enum assay_status reserve(struct assay_block_model *m, int32_t total)
{
    if (total <= m->cap) {
        return ASSAY_OK;
    }
    free_scratch(m);
    size_t n = (size_t)total;
    m->ref = assay_calloc(n, sizeof(int32_t));
    m->state = assay_calloc(n, sizeof(uint8_t));
    m->registered = assay_calloc(n, sizeof(bool));
    m->on_free = assay_calloc(n, sizeof(int32_t));
    m->on_evict = assay_calloc(n, sizeof(int32_t));
    m->in_cache = assay_calloc(n, sizeof(int32_t));
    m->holder = assay_calloc(n, sizeof(int32_t));
    m->holder_index = assay_calloc(n, sizeof(int32_t));
    m->seen_in_seq = assay_calloc(n, sizeof(int32_t));
    if (m->ref == NULL || m->state == NULL || m->registered == NULL || m->on_free == NULL ||
        m->on_evict == NULL || m->in_cache == NULL || m->holder == NULL ||
        m->holder_index == NULL || m->seen_in_seq == NULL) {
        free_scratch(m);
        return ASSAY_ERR_NOMEM;
    }
    m->cap = total;
    return ASSAY_OK;
}

static bool in_range(int32_t b, int32_t total)
{
    return b >= 0 && b < total;
}

/* R1: the snapshot is well formed enough to be read at all. */
static bool well_formed(const struct assay_block_audit *a, char *why, size_t size)
{
    const struct assay_block_stats *s = &a->stats;
    if (s->total < 1 || s->block_size < 1) {
        snprintf(why, size, "total %d blocks of %d positions", (int)s->total, (int)s->block_size);
        return false;
    }
    if (a->n_free < 0 || a->n_evictable < 0 || a->n_cache < 0 || a->n_seqs < 0) {
        snprintf(why, size, "negative list sizes (free %d, evictable %d, cache %d, sequences %d)",
                 (int)a->n_free, (int)a->n_evictable, (int)a->n_cache, (int)a->n_seqs);
        return false;
    }
    if (a->ref_count == NULL || (a->n_free > 0 && a->free_list == NULL) ||
        (a->n_evictable > 0 && a->evictable == NULL) || (a->n_cache > 0 && a->cache_block == NULL) ||
        (a->n_seqs > 0 && (a->seq_id == NULL || a->seq_n_blocks == NULL || a->seq_blocks == NULL))) {
        snprintf(why, size, "an array with entries is missing");
        return false;
    }
    for (int32_t i = 0; i < a->n_seqs; i++) {
        if (a->seq_n_blocks[i] < 0 || (a->seq_n_blocks[i] > 0 && a->seq_blocks[i] == NULL)) {
            snprintf(why, size, "sequence %llu has a table of %d blocks",
                     (unsigned long long)a->seq_id[i], (int)a->seq_n_blocks[i]);
            return false;
        }
    }
    return true;
}

enum assay_status assay_block_model_derive(struct assay_block_model *m,
                                           const struct assay_block_audit *a,
                                           struct assay_block_derived *out)
{
    char why[160];
    if (!well_formed(a, why, sizeof why)) {
        return ASSAY_ERR_INVALID;
    }
    int32_t total = a->stats.total;
    if (reserve(m, total) != ASSAY_OK) {
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t b = 0; b < total; b++) {
        m->ref[b] = 0;
        m->registered[b] = false;
        m->on_free[b] = 0;
        m->on_evict[b] = 0;
        m->in_cache[b] = 0;
        m->holder[b] = -1;
        m->holder_index[b] = -1;
        m->seen_in_seq[b] = 0;
    }
    /* A reference is a table entry (R4). */
    for (int32_t i = 0; i < a->n_seqs; i++) {
        for (int32_t j = 0; j < a->seq_n_blocks[i]; j++) {
            int32_t b = a->seq_blocks[i][j];
            if (in_range(b, total)) {
                m->ref[b]++;
                if (m->holder[b] < 0) {
                    m->holder[b] = i;
                    m->holder_index[b] = j;
                }
            }
        }
    }
    for (int32_t i = 0; i < a->n_cache; i++) {
        if (in_range(a->cache_block[i], total)) {
            m->registered[a->cache_block[i]] = true;
            m->in_cache[a->cache_block[i]]++;
        }
    }
    for (int32_t i = 0; i < a->n_free; i++) {
        if (in_range(a->free_list[i], total)) {
            m->on_free[a->free_list[i]]++;
        }
    }
    for (int32_t i = 0; i < a->n_evictable; i++) {
        if (in_range(a->evictable[i], total)) {
            m->on_evict[a->evictable[i]]++;
        }
    }
    /* The state follows from holders and registration alone (R5). */
    out->total = total;
    out->free = out->in_use = out->cached = 0;
    for (int32_t b = 0; b < total; b++) {
        if (m->ref[b] > 0) {
            m->state[b] = ASSAY_BLOCK_IN_USE;
            out->in_use++;
        } else if (m->registered[b]) {
            m->state[b] = ASSAY_BLOCK_CACHED;
            out->cached++;
        } else {
            m->state[b] = ASSAY_BLOCK_FREE;
            out->free++;
        }
    }
    out->ref = m->ref;
    out->state = m->state;
    out->registered = m->registered;
    return ASSAY_OK;
}

/* The first violation's description, and how many there were. */
struct report {
    char *msg;
    size_t size;
    int32_t n;
};

static void violation(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void violation(struct report *r, const char *fmt, ...)
{
    if (r->n++ == 0 && r->size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->msg, r->size, fmt, ap);
        va_end(ap);
    }
}

static const char *state_name(uint8_t s)
{
    switch (s) {
    case ASSAY_BLOCK_FREE: return "free";
    case ASSAY_BLOCK_IN_USE: return "in use";
    case ASSAY_BLOCK_CACHED: return "cached";
    default: return "?";
    }
}

static unsigned long long sid(const struct assay_block_audit *a, int32_t i)
{
    return (unsigned long long)a->seq_id[i];
}

/* R2, R3: ids in range, nothing listed twice. */
static void check_ids(struct assay_block_model *m, const struct assay_block_audit *a,
                      struct report *r)
{
    int32_t total = a->stats.total;
    for (int32_t i = 0; i < a->n_free; i++) {
        if (!in_range(a->free_list[i], total)) {
            violation(r, "R2 range: free list entry %d is block %d of %d", (int)i,
                      (int)a->free_list[i], (int)total);
        }
    }
    for (int32_t i = 0; i < a->n_evictable; i++) {
        if (!in_range(a->evictable[i], total)) {
            violation(r, "R2 range: evictable entry %d is block %d of %d", (int)i,
                      (int)a->evictable[i], (int)total);
        }
    }
    for (int32_t i = 0; i < a->n_cache; i++) {
        if (!in_range(a->cache_block[i], total)) {
            violation(r, "R2 range: prefix cache entry %d is block %d of %d", (int)i,
                      (int)a->cache_block[i], (int)total);
        }
    }
    for (int32_t i = 0; i < a->n_seqs; i++) {
        for (int32_t j = 0; j < a->seq_n_blocks[i]; j++) {
            int32_t b = a->seq_blocks[i][j];
            if (!in_range(b, total)) {
                violation(r, "R2 range: sequence %llu holds block %d of %d at index %d",
                          sid(a, i), (int)b, (int)total, (int)j);
            } else if (m->seen_in_seq[b] == i + 1) {
                violation(r, "R3 duplicate: sequence %llu holds block %d twice", sid(a, i), (int)b);
            } else {
                m->seen_in_seq[b] = i + 1;
            }
        }
        for (int32_t k = 0; k < i; k++) {
            if (a->seq_id[k] == a->seq_id[i]) {
                violation(r, "R3 duplicate: sequence %llu appears twice", sid(a, i));
            }
        }
    }
    for (int32_t b = 0; b < total; b++) {
        if (m->on_free[b] > 1) {
            violation(r, "R3 duplicate: block %d is on the free list %d times", (int)b,
                      (int)m->on_free[b]);
        }
        if (m->on_evict[b] > 1) {
            violation(r, "R3 duplicate: block %d is on the evictable list %d times", (int)b,
                      (int)m->on_evict[b]);
        }
        if (m->in_cache[b] > 1) {
            violation(r, "R3 duplicate: block %d has %d prefix cache entries", (int)b,
                      (int)m->in_cache[b]);
        }
    }
}

/* R4, R5: every block's reference count, state and list. */
static void check_blocks(const struct assay_block_model *m, const struct assay_block_audit *a,
                         struct report *r)
{
    for (int32_t b = 0; b < a->stats.total; b++) {
        if (a->ref_count[b] != m->ref[b]) {
            if (m->ref[b] > 0) {
                violation(r,
                          "R4 refcount: block %d has reference count %d but %d block table "
                          "entr%s it (first: sequence %llu, index %d)",
                          (int)b, (int)a->ref_count[b], (int)m->ref[b],
                          m->ref[b] == 1 ? "y holds" : "ies hold",
                          sid(a, m->holder[b]), (int)m->holder_index[b]);
            } else {
                violation(r,
                          "R4 refcount: block %d has reference count %d but no block table "
                          "holds it (%s)",
                          (int)b, (int)a->ref_count[b],
                          m->on_free[b] ? "it is on the free list"
                          : m->on_evict[b] ? "it is on the evictable list"
                                           : "it is on no list: leaked");
            }
        }
        uint8_t st = m->state[b];
        bool want_free = st == ASSAY_BLOCK_FREE, want_evict = st == ASSAY_BLOCK_CACHED;
        if ((m->on_free[b] > 0) != want_free) {
            if (want_free) {
                violation(r, "R5 lists: block %d is held by no table and in no cache entry, "
                             "but not on the free list (leaked)", (int)b);
            } else if (st == ASSAY_BLOCK_IN_USE) {
                violation(r, "R5 lists: block %d is on the free list while sequence %llu holds it "
                             "(index %d)", (int)b, sid(a, m->holder[b]), (int)m->holder_index[b]);
            } else {
                violation(r, "R5 lists: block %d is on the free list while a prefix cache entry "
                             "points at it (a dangling entry)", (int)b);
            }
        }
        if ((m->on_evict[b] > 0) != want_evict) {
            if (want_evict) {
                violation(r, "R5 lists: block %d is cached (registered, held by no table) but not "
                             "on the evictable list", (int)b);
            } else {
                violation(r, "R5 lists: block %d is on the evictable list but is %s%s", (int)b,
                          state_name(st),
                          st == ASSAY_BLOCK_FREE ? " (in no prefix cache entry)" : "");
            }
        }
    }
}

/* R6: the engine's totals against the derived ones. */
static void check_totals(const struct assay_block_derived *d, const struct assay_block_audit *a,
                         struct report *r)
{
    const struct assay_block_stats *s = &a->stats;
    if ((int64_t)s->free + s->in_use + s->cached != s->total) {
        violation(r, "R6 conservation: free %d + in use %d + cached %d = %lld, total is %d",
                  (int)s->free, (int)s->in_use, (int)s->cached,
                  (long long)s->free + s->in_use + s->cached, (int)s->total);
    }
    if (s->free != d->free || s->in_use != d->in_use || s->cached != d->cached) {
        violation(r,
                  "R6 totals: the engine counts free/in use/cached %d/%d/%d, its tables and "
                  "lists give %d/%d/%d",
                  (int)s->free, (int)s->in_use, (int)s->cached, (int)d->free, (int)d->in_use,
                  (int)d->cached);
    }
}

/* R8: a registered block at index j of sequence i is chained on the key of
 * the block before it in that table (0 at index 0), when that block's key
 * is known (it is registered too). */
static void check_chain(const struct assay_block_model *m, const struct assay_block_audit *a,
                        int32_t i, int32_t j, struct report *r)
{
    if (a->block_key == NULL || a->block_parent == NULL) {
        return;
    }
    int32_t b = a->seq_blocks[i][j];
    uint64_t want = 0;
    if (j > 0) {
        int32_t prev = a->seq_blocks[i][j - 1];
        if (!in_range(prev, a->stats.total) || !m->registered[prev]) {
            return;
        }
        want = a->block_key[prev];
    }
    if (a->block_parent[b] != want) {
        violation(r,
                  "R8 content: block %d's prefix cache entry is chained on another history than "
                  "sequence %llu's, which holds it at index %d after %s",
                  (int)b, sid(a, i), (int)j, j == 0 ? "nothing" : "a different block");
    }
}

/* R7, R8: sharing only through the prefix cache, and a registered block
 * holds the tokens its entry is keyed on. */
static void check_sharing(const struct assay_block_model *m, const struct assay_block_audit *a,
                          struct report *r)
{
    int32_t bs = a->stats.block_size;
    bool content = a->block_tokens != NULL && a->seq_tokens != NULL && a->seq_n_tokens != NULL;
    for (int32_t i = 0; i < a->n_seqs; i++) {
        for (int32_t j = 0; j < a->seq_n_blocks[i]; j++) {
            int32_t b = a->seq_blocks[i][j];
            if (!in_range(b, a->stats.total)) {
                continue;
            }
            bool other_holder = m->ref[b] > 1 && m->holder[b] != i;
            if (other_holder && !m->registered[b]) {
                violation(r,
                          "R7 sharing: block %d is in %d tables (sequences %llu and %llu) but is "
                          "not a prefix cache block",
                          (int)b, (int)m->ref[b], sid(a, m->holder[b]), sid(a, i));
            }
            if (other_holder && m->holder_index[b] != j) {
                violation(r,
                          "R7 sharing: block %d is at index %d of sequence %llu's table and at "
                          "index %d of sequence %llu's",
                          (int)b, (int)m->holder_index[b], sid(a, m->holder[b]), (int)j, sid(a, i));
            }
            if (!m->registered[b]) {
                continue;
            }
            check_chain(m, a, i, j, r);
            if (!content) {
                continue;
            }
            if ((int64_t)(j + 1) * bs > a->seq_n_tokens[i]) {
                violation(r,
                          "R8 content: block %d is registered in the prefix cache as a full "
                          "block, but sequence %llu holds it at index %d with only %d tokens",
                          (int)b, sid(a, i), (int)j, (int)a->seq_n_tokens[i]);
                continue;
            }
            const int32_t *key = a->block_tokens + (int64_t)b * bs;
            const int32_t *mine = a->seq_tokens[i] + (int64_t)j * bs;
            for (int32_t t = 0; t < bs; t++) {
                if (key[t] != mine[t]) {
                    violation(r,
                              "R8 content: block %d is keyed in the prefix cache on other tokens "
                              "than sequence %llu holds at index %d (position %d: key %d, "
                              "sequence %d)",
                              (int)b, sid(a, i), (int)j, (int)(j * bs + t), (int)key[t],
                              (int)mine[t]);
                    break;
                }
            }
        }
    }
}

/* R9, R10: each table covers what its sequence computed, and no more than
 * slack blocks beyond it; the sequence's own counts are sane. */
static void check_sequences(const struct assay_block_audit *a,
                            const struct assay_block_model_opts *o, struct report *r)
{
    int32_t bs = a->stats.block_size;
    for (int32_t i = 0; i < a->n_seqs; i++) {
        int64_t nb = a->seq_n_blocks[i];
        if (a->seq_n_prompt != NULL && a->seq_n_tokens != NULL &&
            (a->seq_n_prompt[i] < 1 || a->seq_n_prompt[i] > a->seq_n_tokens[i])) {
            violation(r, "R10 counts: sequence %llu has a prompt of %d in %d tokens", sid(a, i),
                      (int)a->seq_n_prompt[i], (int)a->seq_n_tokens[i]);
        }
        if (a->seq_n_computed == NULL) {
            continue;
        }
        int64_t computed = a->seq_n_computed[i];
        if (computed < 0 || (a->seq_n_tokens != NULL && computed > a->seq_n_tokens[i])) {
            violation(r, "R10 counts: sequence %llu has computed %lld of %d tokens", sid(a, i),
                      (long long)computed, a->seq_n_tokens != NULL ? (int)a->seq_n_tokens[i] : -1);
            continue;
        }
        int64_t needed = (computed + bs - 1) / bs;
        if (nb < needed) {
            violation(r,
                      "R9 coverage: sequence %llu has the KV of %lld positions but its table "
                      "holds %lld blocks of %d (%lld needed)",
                      sid(a, i), (long long)computed, (long long)nb, (int)bs, (long long)needed);
        } else if (o->slack_blocks >= 0 && nb > needed + o->slack_blocks) {
            violation(r,
                      "R9 holding: sequence %llu holds %lld blocks, its %lld computed positions "
                      "need %lld (allowed beyond: %d)",
                      sid(a, i), (long long)nb, (long long)computed, (long long)needed,
                      (int)o->slack_blocks);
        }
    }
}

int32_t assay_block_model_check(struct assay_block_model *m, const struct assay_block_audit *a,
                                const struct assay_block_model_opts *opts, char *msg,
                                size_t size)
{
    struct report r = {msg, size, 0};
    if (size > 0) {
        msg[0] = '\0';
    }
    struct assay_block_model_opts o = opts != NULL ? *opts : assay_block_model_default_opts();
    char why[200];
    if (!well_formed(a, why, sizeof why)) {
        violation(&r, "R1 shape: %s", why);
        return r.n;
    }
    struct assay_block_derived d;
    if (assay_block_model_derive(m, a, &d) != ASSAY_OK) {
        snprintf(msg, size, "the block model ran out of memory");
        return -1;
    }
    check_ids(m, a, &r);
    check_blocks(m, a, &r);
    check_totals(&d, a, &r);
    check_sharing(m, a, &r);
    check_sequences(a, &o, &r);
    if (o.drained && (a->n_seqs > 0 || d.in_use > 0 || a->stats.in_use > 0)) {
        violation(&r,
                  "R11 drained: with no work left %d sequences hold blocks and %d blocks are in "
                  "use (%d by the engine's count); every block must be free or evictable",
                  (int)a->n_seqs, (int)d.in_use, (int)a->stats.in_use);
    }
    return r.n;
}
