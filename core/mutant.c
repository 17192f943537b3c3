/*
 * mutant.c - the catalog of planted bugs (mutant.h): one table, k_catalog,
 * indexed by enum assay_mutant, with each bug's name, what it does, the real
 * bug it models and the check meant to catch it. assay_mutant_info and
 * assay_mutant_by_name look it up (the engine, engine specs, cli/);
 * assay_mutants_compiled says whether this build holds the bugs.
 */
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
    {ASSAY_MUTANT_BATCH_DECODE_FOREIGN_POSITION, "batch-decode-foreign-position",
     "in a step that decodes several sequences one token each, every decoding sequence after "
     "the first rotates its query and key with the first one's position (a positions vector "
     "filled from the wrong sequence); the KV slot and the attention span are right, a sequence "
     "decoding alone is right",
     "batched decoding whose outputs are nonsense with more than one parallel sequence and right "
     "with one (llama.cpp #6173: 'When using batched decoding with >1 parallel sequences, "
     "llama.cpp produces nonsensical outputs... if I use only 1 parallel sequence... the output "
     "becomes reasonable')",
     "equivalence"},
    {ASSAY_MUTANT_SPEC_RESIDUAL_FROM_P, "spec-residual-from-p",
     "after a rejected proposal the token is drawn from the target's p instead of "
     "normalize(max(0, p - q))",
     "the biased speculative sampler of the book's chapter: the residual taken from p",
     "distributional"},
    {ASSAY_MUTANT_SPEC_ACCEPT_Q_OVER_P, "spec-accept-q-over-p",
     "a proposal x is accepted with probability min(1, q(x)/p(x)) instead of min(1, p(x)/q(x))",
     "the acceptance ratio inverted", "distributional"},
    {ASSAY_MUTANT_SPEC_BONUS_FROM_DRAFT, "spec-bonus-from-draft",
     "when every proposal is accepted, the bonus token is drawn from the draft's q instead of "
     "the target's p",
     "the bonus token sampled from the draft model", "distributional"},
    {ASSAY_MUTANT_SPEC_RATIO_AT_T1, "spec-ratio-at-t1",
     "the acceptance ratio and residual use the target's distribution at temperature 1 while the "
     "output is meant at the request's temperature",
     "a verifier that ignores the sampling parameters the draft was sampled with",
     "distributional"},
    {ASSAY_MUTANT_SPEC_DRAFT_IGNORES_TOP_P, "spec-draft-ignores-top-p",
     "the draft's q is computed without top-p while the proposals are sampled with it",
     "top-p ignored in the draft's probabilities used for the ratio", "distributional"},
    {ASSAY_MUTANT_SOFTMAX_TWICE, "softmax-twice",
     "probabilities are fed to the sampler where logits are expected, so softmax is applied twice",
     "softmax applied twice (probabilities passed as logits)", "distributional"},
    {ASSAY_MUTANT_TOPK_RENORM_THEN_TOPP, "topk-renorm-then-topp",
     "top-k is applied and renormalised, then top-p is measured on the renormalised distribution, "
     "although the documented (joint) order measures top-p on the full distribution",
     "sampling filters applied in an order other than the documented one", "distributional"},
    {ASSAY_MUTANT_TEMP_BY_SHARPNESS, "temp-by-sharpness",
     "the temperature applied depends on the context: where the kept distribution's top "
     "probability is above 0.085 the tokens are drawn at 1.15 t, elsewhere at t / 1.15",
     "no one shipped bug: a sampler whose temperature follows the distribution's sharpness, as an "
     "entropy-based dynamic temperature (llama.cpp's dynatemp_range) does on purpose, active "
     "where a fixed temperature was asked for; a bias whose sign depends on the context, which "
     "pooled PIT values average out",
     "distributional"},
    {ASSAY_MUTANT_TOPP_DROPS_CROSSING, "topp-drops-crossing",
     "top-p keeps the largest set of most likely tokens whose cumulative probability does not "
     "exceed p (at least one), dropping the token that crosses p, where the smallest set that "
     "reaches p is meant",
     "llama.cpp's top-p before ggml-org/llama.cpp #1953 ('the top-p implementation currently has "
     "an off-by-one, instead computing the largest set with probability less than or equal to "
     "p'; its old tests checked only sets summing exactly to p)",
     "distributional"},
    {ASSAY_MUTANT_TOPK_ZERO_KEEPS_ONE, "topk-zero-keeps-one",
     "a top-k of 0 (top-k off) is raised to the minimum of one kept token instead of meaning the "
     "whole vocabulary, so a request without top-k is served greedily at any temperature",
     "ggml-org/llama.cpp #5388 ('top_k values <= 0 are then rounded up to min_keep instead of "
     "being set to candidates.size', when llama_sample_top_k is called directly, as "
     "llama-cpp-python did: sampling with top_k = 0 became deterministic)",
     "distributional"},
    {ASSAY_MUTANT_SPEC_VERIFY_GREEDY, "spec-verify-greedy",
     "the speculative verifier commits the target's argmax whatever the request's temperature: a "
     "proposal is kept when it is the argmax, and the token after the first miss and the bonus "
     "token are the argmax, so speculating sampled requests are served greedily",
     "sgl-project/sglang #31214 ('on ROCm/HIP, EAGLE speculative decoding always commits argmax "
     "(greedy) in verify. It ignores temperature and top_p': the sampling verify ops were "
     "imported only on CUDA, and other platforms fell back to torch.argmax)",
     "distributional"},
    {ASSAY_MUTANT_SPEC_VERIFY_TOPK_RENORM, "spec-verify-topk-renorm",
     "the speculative verifier builds the target's p (for the acceptance ratio, the residual and "
     "the bonus token) with top-k applied and renormalised before top-p, while plain sampling "
     "and the draft use the documented joint order, top-p on the full distribution: under "
     "speculation the nucleus is smaller where top-p binds inside top-k",
     "sgl-project/sglang #36173 (closed PR, 'Make top-k/top-p filtering consistent across "
     "sampling paths': SGLang normally takes the top-p cutoff from the original distribution, "
     "but 'some sampling paths instead applied top-k, renormalized the remaining probabilities, "
     "and then applied top-p', among them the shared EAGLE-family/standalone/n-gram verifier)",
     "distributional"},
    {ASSAY_MUTANT_SPEC_RESIDUAL_REUSES_ACCEPT_U, "spec-residual-reuses-accept-u",
     "at the first rejection in a speculative round the residual token is drawn with the "
     "uniform of that proposal's acceptance test, which a rejection leaves in [p(x)/q(x), 1), "
     "instead of a fresh one; the acceptance rate stays right and the residual token is biased "
     "toward the end of the inverse CDF, more the likelier a rejected proposal was to pass",
     "vllm-project/vllm-ascend #16370 ('Fix rejection resampling RNG coupling': the acceptance "
     "decision and the residual resampling drew the same Philox value from (seed, pos), so "
     "'the resampling threshold [is] distributed as U(h, 1) instead of an independent U(0, 1). "
     "The acceptance rate itself remains correct, but the final sampled-token distribution is "
     "biased')",
     "distributional"},
    {ASSAY_MUTANT_TOPK_KEEPS_TIES, "topk-keeps-ties",
     "top-k keeps every token whose tempered logit equals the k-th's (a threshold at the "
     "k-th logit), so where the k-th and (k+1)-th tokens tie it keeps both, k + 1 tokens, "
     "instead of the lower id alone",
     "vllm-project/vllm #50979 (its PyTorch top-k paths compared each logit with the k-th "
     "largest, which 'keeps all tokens tied at the k-th largest logit', while its Triton "
     "kernel kept exactly k) and flashinfer-ai/flashinfer #3774 (sampling kernels accepting "
     "a token tied with the top-k boundary: 'When a non-candidate token had the same "
     "probability as the boundary token, it could be accepted as if it belonged to the "
     "truncated set')",
     "distributional"},
    {ASSAY_MUTANT_TOPP_KEEPS_TIES, "topp-keeps-ties",
     "top-p keeps every token whose tempered logit equals that of the token crossing p, so "
     "where the crossing token ties with the next one both are kept instead of the lower id "
     "alone",
     "flashinfer-ai/flashinfer #3774 (the same value-only acceptance at the top-p truncation "
     "boundary: a token tied with the boundary token accepted as if it belonged to the "
     "truncated set) and the cutoff-logit top-p of AI-Hypercomputer/maxtext #950, which "
     "erases only the tokens whose logits are below the crossing token's",
     "distributional"},
    {ASSAY_MUTANT_TOPP_UNTEMPERED, "topp-untempered",
     "top-p measures the nucleus on the untempered distribution (temperature 1) and the "
     "temperature is applied only to the draw from the kept set: below temperature 1 the "
     "kept set is wider than it should be, above 1 narrower",
     "vllm-project/tpu-inference #1385 (and #1327): 'tpu-inference has logit temperature "
     "scaling applied after top-p'ing', where vLLM applies it before; the same order in "
     "Blaizzy/mlx-audio #732 ('a high temperature does not widen the nucleus as expected')",
     "distributional"},
    {ASSAY_MUTANT_UNSEEDED_STEALS_SEEDS, "unseeded-steals-seeds",
     "when any request in a step has no seed, every request of that step draws from the engine's "
     "shared stream instead of its own",
     "one unseeded request in a batch making the seeded requests lose their seeds",
     "seeded"},
    {ASSAY_MUTANT_SEED_ZERO_UNSEEDED, "seed-zero-unseeded",
     "a request whose seed is 0 is served as if it had none (a truthiness test on the seed where "
     "'was a seed given' was meant): its tokens change from run to run",
     "seed 0 taken for 'no seed' (the class fixed in bytedance/jaqmc #29: 'treat only a missing "
     "seed as nondeterministic so seed 0 remains a valid reproducible choice')",
     "seeded"},
    {ASSAY_MUTANT_SEED_LOW_32_BITS, "seed-low-32-bits",
     "a request's random stream is keyed by the low 32 bits of its seed only, so seeds that "
     "differ only above bit 32 draw the same tokens",
     "a seed wider than the type that carries it to the sampler (llama.cpp #2002: a seed above "
     "2^31 stored in a signed int was read as 'pick a random seed'; today's samplers take a "
     "uint32_t seed, llama_sampler_init_dist)",
     "seeded"},
    {ASSAY_MUTANT_UNSEEDED_ONE_STREAM, "unseeded-one-stream",
     "a request without a seed draws from a stream keyed by the engine's seed alone, the same for "
     "every unseeded request, so unseeded requests with one prompt give one output",
     "the engine's start-up seed used as every unseeded request's seed, where each needs a fresh "
     "one (llama.cpp #9398, 'move random seed generation to the samplers': 'this should fix the "
     "server generating always the same response')",
     "seeded"},
    {ASSAY_MUTANT_SEED_RESTART_AFTER_PREEMPT, "seed-restart-after-preempt",
     "a seeded request resumed after recompute-preemption restarts its random stream from its "
     "seed: the first token after the re-prefill draws the numbers of output position 0 again, "
     "so the tokens after a preemption depend on when it happened",
     "vLLM #19940 (v0's _prepare_seq_groups recreated the torch.Generator for every prefill, "
     "including the re-prefill of a preempted sequence, so 'the generator will be reset when "
     "the sequence is preempted')",
     "seeded"},
    {ASSAY_MUTANT_PARTIAL_PREFILL_ADVANCES_SEED, "partial-prefill-advances-seed",
     "each prefill chunk that leaves a seeded request's prompt unfinished advances its random "
     "stream by one draw (a token sampled and thrown away, the stream not wound back), so its "
     "tokens depend on how its prompt was chunked",
     "vLLM #10097 (V1 samples a token for a request whose prompt is only partly prefilled, "
     "discards it and rewinds the request's generator: the rewind moved the offset back by 1 "
     "where the draw had moved it by 4, fixed to 'generator.set_offset(generator.get_offset() "
     "- 4)')",
     "seeded"},
    {ASSAY_MUTANT_ABORT_DOUBLE_FREE, "abort-double-free",
     "aborting a running request releases its blocks twice (the abort path returns them, then "
     "the common leave-running path returns them again)",
     "a block freed twice on the abort path (vLLM #1556, 'ValueError: Double free!' after "
     "cancelled requests)",
     "property"},
    {ASSAY_MUTANT_EVICTABLE_COUNTED_FREE, "evictable-counted-free",
     "the free count reported includes the evictable cached blocks, which are counted again as "
     "cached",
     "evictable cached blocks counted twice in the free total (a KV gauge mixing prefix-cached "
     "blocks into another total: kekzl/imp #1115, #1120)",
     "property"},
    {ASSAY_MUTANT_PREFIX_ENTRY_DANGLING, "prefix-entry-dangling",
     "evicting a cached block reuses it without removing its prefix-cache entry, which then "
     "points at a block holding other KV",
     "a prefix-cache entry left pointing at a block that was freed and reused (kvcached #362: "
     "evicted vLLM blocks keep a stale block_hash)",
     "property"},
    {ASSAY_MUTANT_PREEMPT_RESETS_BOUNDARY, "preempt-resets-boundary",
     "recompute-preemption moves the prompt/output boundary to the end of the generated tokens, "
     "so the re-prefill treats generated tokens as prompt and delivery and the length limit "
     "count from the moved boundary",
     "a preempted request whose generated tokens are re-prefilled as prompt (vLLM #3032 / #5349, "
     "vllm-gaudi #524: prompt and output tokens confused after recompute-preemption)",
     "property"},
    {ASSAY_MUTANT_ABORT_LEAKS_BLOCKS, "abort-leaks-blocks",
     "an aborted running request's block table is dropped and its blocks are never returned to "
     "the pool",
     "an aborted request's blocks never returned (vllm-ascend #16662, vLLM #46283: KV blocks of "
     "aborted requests leak until no request can be admitted)",
     "property"},
    {ASSAY_MUTANT_ADMIT_IGNORES_PROMISED, "admit-ignores-promised",
     "admission compares a request's needs with the free blocks counted at the start of the step, "
     "forgetting the blocks already promised to requests admitted in the same step",
     "the scheduler admitting a request without counting blocks it already promised this step "
     "(FreeToken #367: short requests passing admission together need more pages than the pool "
     "has)",
     "property"},
    {ASSAY_MUTANT_PADDING_ROW_NAN, "padding-row-nan",
     "batches are padded to a multiple of 8 rows; a padding row attends to no key (a fully masked "
     "row, -inf minus -inf) and its NaN reaches real rows through masked KV slots: its key and "
     "value sit in the slot after the batch's last sequence, which that sequence's tiled "
     "attention reads with weight 0 (0 x NaN)",
     "a padding query row producing NaN that spreads through the batch (PyTorch #103749 and "
     "#101967, transformers #38690: NaN from fully masked padding rows propagating)",
     "property"},
    {ASSAY_MUTANT_SPEC_ROLLBACK_LEAK, "spec-rollback-leak",
     "blocks written only by rejected proposals are kept by the sequence instead of returned",
     "speculative decoding's rejected tokens leaving their KV blocks allocated (sglang-jax #1147, "
     "sglang #13826: over-allocated draft KV never released)",
     "property"},
    {ASSAY_MUTANT_MAX_TOKENS_OVERSHOOT, "max-tokens-overshoot",
     "the length limit is tested before the new token is counted, so a request not stopped by "
     "its stop token receives max_tokens + 1 tokens and finishes for length after the extra one",
     "a token budget checked off by one (llama.cpp #4790, fixed by #4798 'server : fix "
     "n_predict check': 'The server doesn't accurately follow n_predict', more tokens generated "
     "than asked)",
     "property"},
    {ASSAY_MUTANT_FULL_HIT_WRONG_POSITION, "full-hit-wrong-position",
     "a prompt whose every block is in the prefix cache is taken whole, leaving no prompt token "
     "to compute; the decode then feeds the prompt's last token again at the next position, so "
     "the first token is computed from the wrong position (the last token seen twice) and every "
     "later token's KV sits one position late; a prompt gives other tokens cold and cached",
     "a fully cached prompt whose first token does not come from the prompt's last position "
     "(llama.cpp #1585: with the whole prompt already in --prompt-cache 'the joke will start "
     "with a Z every time. Perhaps the logits are not being reevaluated'; 'The fix is to "
     "recalculate the logits')",
     "property"},
    {ASSAY_MUTANT_BOS_PREPENDED, "bos-prepended",
     "a BOS token is put before every prompt although prompts come as token ids to be taken as "
     "given, so the prompt the engine holds, and the prompt/output boundary it reports, is one "
     "token longer than the request's (where the context and the pool have room for it)",
     "ggml-org/llama.cpp #7107 ('The llama.cpp tokenizer currently adds a BOS token "
     "unconditionally': a prompt that already starts with BOS gets a second one; #7332 then "
     "warned of the double BOS). Applying it to prompts given as token ids, and the boundary "
     "counted with the extra token, is our reading",
     "property"},
    {ASSAY_MUTANT_PREEMPT_PAD_SLOT, "preempt-pad-slot",
     "a recompute-preemption leaves a padding entry (block -2^30) at the head of the emptied "
     "block table, and the resumed prefill writes its KV through it, far outside the pool: the "
     "process dies of SIGSEGV",
     "a -1 padding slot reaching the KV write through the block table (vllm #54296: slot mapping "
     "loads an unguarded block table entry, an illegal memory access)",
     "property"},
    {ASSAY_MUTANT_POOL_DRY_ASSERT, "pool-dry-assert",
     "the scheduler asserts that a free block is always there and aborts the process when the "
     "pool runs dry, where it should preempt",
     "llama-server dying on an assertion once the KV cache has no free space under concurrent "
     "requests (llama.cpp #6685, #9928)",
     "property"},
    {ASSAY_MUTANT_POOL_DRY_SPIN, "pool-dry-spin",
     "when the pool runs dry the scheduler waits, inside the step, for a block that no one will "
     "free, instead of preempting: the step never returns",
     "a scheduler that deadlocks under KV-cache pressure (vllm #45388)", "property"},
    {ASSAY_MUTANT_GEMM_TAIL_SPLIT_K, "gemm-tail-split-k",
     "the engine's own AVX2 matrix product, in a tail tile of two rows (batches of 3j + 2 rows), "
     "sums even and odd k in two chains and adds them at the end, so those rows' bits depend on "
     "the batch's size; the other instruction sets are right",
     "a batch-invariant kernel broken on one kernel path only: reductions whose order depends on "
     "the batch size or the kernel the hardware picks (the nondeterminism batch-invariant "
     "kernels exist to remove; OpenBLAS's small-matrix path on some CPUs and not others)",
     "portability"},
    {ASSAY_MUTANT_Q8_BLOCK_SCALE, "q8-block-scale",
     "a Q8_K activation block after the first of a row is quantized with the scale of the block "
     "before it (its signed maximum), values beyond that scale saturating at the int8 limits",
     "a quantized activation block using the previous block's scale: the class of scale-indexing "
     "bugs in block-quantized dot products (a per-block scale read at the wrong index while the "
     "quants are right)",
     "numerics.budget"},
    {ASSAY_MUTANT_Q8_BLOCK_OFFSET, "q8-block-offset",
     "a product's quantized activation rows are written in order with a row stride one block "
     "short, so each row's last block is overwritten by the next row's first block; a single row "
     "(decode) is right, prefill and scoring are not",
     "activation blocks at the wrong offset: the class of row-stride bugs in quantized activation "
     "buffers (a row size computed in blocks with an off-by-one), which single-token decode never "
     "exercises",
     "numerics.budget"},
    {ASSAY_MUTANT_KV_F16_OVERFLOW, "kv-f16-overflow",
     "the F16 KV store scales keys and values by 2^13 before the fp16 conversion (to keep small "
     "values out of fp16's subnormals) and by 2^-13 when reading, so an element above 65504 / 8192 "
     "(about 8) becomes infinite; smaller values are right. Keys of the test model (standard "
     "deviation about 2) pass 8 in a few elements per sequence; real models' outlier key channels "
     "reach tens to hundreds",
     "fp16 overflow of activations in a half-precision KV cache or attention (models whose large "
     "activations give inf and NaN in fp16 but not in bf16 or fp32: the reason several engines run "
     "such models' attention in fp32 or bf16)",
     "numerics.budget"},
    {ASSAY_MUTANT_ROPE_POS_OFF_BY_ONE_LATE, "rope-pos-off-by-one-late",
     "queries and keys at positions 64 and beyond are rotated one position too far (a RoPE table "
     "of 64 positions extended with an index off by one); shorter sequences are right",
     "a RoPE position wrong only past some length (the class of RoPE cache-extension and "
     "context-shift bugs that short tests never reach)",
     "numerics.budget"},
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
