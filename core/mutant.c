#include "mutant.h"

#include <string.h>

static const struct assay_mutant_info k_catalog[ASSAY_MUTANT_COUNT] = {
    {ASSAY_MUTANT_NONE, "none", "no planted bug", "", ""},
    {ASSAY_MUTANT_ATTN_NEIGHBOUR_LEAK, "attn-neighbour-leak",
     "attention of every sequence but the first in a batched step also attends to the last key "
     "and value the previous sequence wrote in that step",
     "a padded or foreign row leaking into another sequence's attention (a batch mask that lets "
     "a sequence see its neighbour's keys)",
     "equivalence"},
    {ASSAY_MUTANT_PREEMPT_REDELIVER, "preempt-redeliver",
     "recompute-preemption resets the count of delivered tokens, so the resumed request streams "
     "its earlier tokens again",
     "a preempted request receiving its tokens twice after it is rescheduled",
     "equivalence"},
    {ASSAY_MUTANT_BLOCK_REUSE_WHILE_SHARED, "block-reuse-while-shared",
     "releasing a sequence puts its blocks on the free list even when another sequence still "
     "references them through the prefix cache",
     "a freed KV block reused while another sequence still reads it (stale KV)",
     "equivalence"},
    {ASSAY_MUTANT_CHUNK_ROPE_OFF_BY_ONE, "chunk-rope-off-by-one",
     "the second and later chunks of a chunked prefill rotate keys and queries one position "
     "too far",
     "an off-by-one RoPE position for chunks after the first in chunked prefill",
     "equivalence"},
    {ASSAY_MUTANT_PREFIX_KEY_LAST_BLOCK, "prefix-key-last-block",
     "the prefix cache keys a block on its own tokens only, not on the tokens before it",
     "a prefix-cache lookup keyed on the last block's tokens only, so different prefixes that "
     "end alike share KV",
     "equivalence"},
};

const struct assay_mutant_info *assay_mutant_info(enum assay_mutant id)
{
    if ((int)id < 0 || id >= ASSAY_MUTANT_COUNT) {
        return NULL;
    }
    return &k_catalog[id];
}

enum assay_status assay_mutant_by_name(const char *name, enum assay_mutant *out)
{
    for (int i = 0; i < ASSAY_MUTANT_COUNT; i++) {
        if (name != NULL && strcmp(name, k_catalog[i].name) == 0) {
            *out = (enum assay_mutant)i;
            return ASSAY_OK;
        }
    }
    return ASSAY_ERR_NOT_FOUND;
}

bool assay_mutants_compiled(void)
{
#ifdef ASSAY_MUTANTS
    return true;
#else
    return false;
#endif
}
