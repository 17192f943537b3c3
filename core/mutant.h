/*
 * mutant.h - the catalog of planted bugs ("mutants").
 *
 * A suite that cannot fail proves nothing: every check has a must-fail
 * control, a bug modelled on one that shipped in a real engine, planted in
 * the code and selected at run time. The code of the bugs exists only in the
 * library built with ASSAY_MUTANTS (the `assay_mutants` target); the release
 * library and the `assay` command contain none of it, and an engine asked
 * for a mutant there refuses with ASSAY_ERR_UNSUPPORTED.
 */
#ifndef ASSAY_MUTANT_H
#define ASSAY_MUTANT_H

#include <stdbool.h>

#include "status.h"

enum assay_mutant {
    ASSAY_MUTANT_NONE = 0,
    /* equivalence family */
    ASSAY_MUTANT_ATTN_NEIGHBOUR_LEAK,
    ASSAY_MUTANT_PREEMPT_REDELIVER,
    ASSAY_MUTANT_BLOCK_REUSE_WHILE_SHARED,
    ASSAY_MUTANT_CHUNK_ROPE_OFF_BY_ONE,
    ASSAY_MUTANT_PREFIX_KEY_LAST_BLOCK,
    ASSAY_MUTANT_BATCH_DECODE_FOREIGN_POSITION,
    /* distributional family */
    ASSAY_MUTANT_SPEC_RESIDUAL_FROM_P,
    ASSAY_MUTANT_SPEC_ACCEPT_Q_OVER_P,
    ASSAY_MUTANT_SPEC_BONUS_FROM_DRAFT,
    ASSAY_MUTANT_SPEC_RATIO_AT_T1,
    ASSAY_MUTANT_SPEC_DRAFT_IGNORES_TOP_P,
    ASSAY_MUTANT_SOFTMAX_TWICE,
    ASSAY_MUTANT_TOPK_RENORM_THEN_TOPP,
    ASSAY_MUTANT_TEMP_BY_SHARPNESS,
    ASSAY_MUTANT_TOPP_DROPS_CROSSING,
    ASSAY_MUTANT_TOPK_ZERO_KEEPS_ONE,
    ASSAY_MUTANT_SPEC_VERIFY_GREEDY,
    ASSAY_MUTANT_SPEC_VERIFY_TOPK_RENORM,
    ASSAY_MUTANT_SPEC_RESIDUAL_REUSES_ACCEPT_U,
    ASSAY_MUTANT_TOPK_KEEPS_TIES,
    ASSAY_MUTANT_TOPP_KEEPS_TIES,
    ASSAY_MUTANT_TOPP_UNTEMPERED,
    ASSAY_MUTANT_UNSEEDED_STEALS_SEEDS,
    ASSAY_MUTANT_SEED_ZERO_UNSEEDED,
    ASSAY_MUTANT_SEED_LOW_32_BITS,
    ASSAY_MUTANT_UNSEEDED_ONE_STREAM,
    ASSAY_MUTANT_SEED_RESTART_AFTER_PREEMPT,
    ASSAY_MUTANT_PARTIAL_PREFILL_ADVANCES_SEED,
    /* property family */
    ASSAY_MUTANT_ABORT_DOUBLE_FREE,
    ASSAY_MUTANT_EVICTABLE_COUNTED_FREE,
    ASSAY_MUTANT_PREFIX_ENTRY_DANGLING,
    ASSAY_MUTANT_PREEMPT_RESETS_BOUNDARY,
    ASSAY_MUTANT_ABORT_LEAKS_BLOCKS,
    ASSAY_MUTANT_ADMIT_IGNORES_PROMISED,
    ASSAY_MUTANT_PADDING_ROW_NAN,
    ASSAY_MUTANT_SPEC_ROLLBACK_LEAK,
    ASSAY_MUTANT_MAX_TOKENS_OVERSHOOT,
    ASSAY_MUTANT_FULL_HIT_WRONG_POSITION,
    ASSAY_MUTANT_BOS_PREPENDED,
    /* the engine dies or hangs (checks/isolate.h) */
    ASSAY_MUTANT_PREEMPT_PAD_SLOT,
    ASSAY_MUTANT_POOL_DRY_ASSERT,
    ASSAY_MUTANT_POOL_DRY_SPIN,
    /* portability: arithmetic that holds on one kernel path and not another */
    ASSAY_MUTANT_GEMM_TAIL_SPLIT_K,
    /* numerics budget: the emulation of ggml's roundings (engine/numerics.h) */
    ASSAY_MUTANT_Q8_BLOCK_SCALE,
    ASSAY_MUTANT_Q8_BLOCK_OFFSET,
    ASSAY_MUTANT_KV_F16_OVERFLOW,
    ASSAY_MUTANT_ROPE_POS_OFF_BY_ONE_LATE,
    ASSAY_MUTANT_COUNT
};

struct assay_mutant_info {
    enum assay_mutant id;
    const char *name;        /* used on the command line: --mutant NAME */
    const char *mechanism;   /* what the planted code does wrong */
    const char *modelled_on; /* the real bug it imitates */
    const char *caught_by;   /* the check expected to catch it */
};

/* The catalog entry of a mutant, or NULL for an id out of range. */
const struct assay_mutant_info *assay_mutant_info(enum assay_mutant id);

/* Look a mutant up by name. ASSAY_ERR_NOT_FOUND for an unknown name. */
enum assay_status assay_mutant_by_name(const char *name, enum assay_mutant *out);

/* True in the library built with ASSAY_MUTANTS. */
bool assay_mutants_compiled(void);

/* Whether planted bug m is active given the selected mutant; always false
 * in builds without ASSAY_MUTANTS, where the compiler removes the bug. */
#ifdef ASSAY_MUTANTS
#define ASSAY_MUTANT_ON(selected, m) ((selected) == (m))
#else
#define ASSAY_MUTANT_ON(selected, m) ((void)(selected), 0)
#endif

#endif
