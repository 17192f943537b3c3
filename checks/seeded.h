/*
 * seeded.h - the seeded family: a request's seed alone decides its sampled
 * tokens, and distinct seeds (or none) give distinct streams.
 *
 * seed.configurations (assay_check_seeded_configurations): the same seeded
 * workload on several configurations of the engine.
 * seed.positions (assay_check_seed_positions): each of the edge seeds 0, 1,
 * 2^31-1, 2^32-1, 2^32, 2^53, 2^63 and 2^64-1 alone, alone again, twice
 * within one batch, and among neighbours at every arrival position and
 * order, in a pool that forces preemption and recompute; and seeds that
 * differ only in their high bits (0 and 2^32, 2^32-1 and 2^64-1, ...) with
 * one prompt are not one stream.
 * seed.unseeded (assay_check_seed_unseeded): unseeded requests with one
 * prompt are not one stream.
 * seed.pairs (assay_check_seed_pairs): requests with distinct seeds
 * (adjacent ones, and ones that differ only above bit 32) are independent:
 * a chi-squared test of independence of their first tokens, with a stated
 * false-alarm rate and power.
 *
 * The same seeded, sampled workload runs on several engines (configurations
 * of one engine: alone or batched, with or without KV cache, paging,
 * prefix caching, chunked prefill, preemption) and every seeded request
 * must deliver exactly the same token stream on each. Sampled output is not
 * compared with an oracle here (the distributional family does that); what
 * is checked is that the per-request random stream does not depend on
 * what else is in the batch or on how the engine computes. Unseeded
 * requests take part (they share the steps) but are not compared: their
 * seeds are the engine's business.
 */
#ifndef ASSAY_SEEDED_H
#define ASSAY_SEEDED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/workload.h"
#include "../engine/model.h"
#include "result.h"

/*
 * Run w on each of adapters[0..n) (n >= 2; names[i] says what each is, for
 * the failure message; both borrowed for the call) and compare the seeded
 * requests' tokens with those of adapters[0]. Every run must also deliver
 * correctly (assay_check_delivery). res gets PASS or FAIL with the first
 * request, position and tokens that differ. Returns ASSAY_OK when a verdict
 * was reached; ASSAY_ERR_INVALID (res ERROR) when w holds no seeded sampled
 * request or n < 2; ASSAY_ERR_NOMEM.
 */
enum assay_status assay_check_seeded_sameness(const struct assay_adapter *const *adapters,
                                              const char *const *names, int32_t n,
                                              const struct assay_workload *w,
                                              struct assay_check_result *res);

/*
 * The same for the bundled engine behind a (engine spec `spec`) against
 * that spec changed to run one request at a time with a contiguous cache,
 * without any KV cache, and batched with a contiguous cache. The variants
 * are opened from the spec, so a must be the bundled engine.
 */
enum assay_status assay_check_seeded_configurations(const struct assay_adapter *a, const char *spec,
                                                    const struct assay_workload *w,
                                                    struct assay_check_result *res);

/* The edge seeds seed.positions probes (and the differential fuzzing draws
 * among others). */
#define ASSAY_N_EDGE_SEEDS 8
extern const uint64_t assay_edge_seeds[ASSAY_N_EDGE_SEEDS];

/*
 * What the engine under test promises about seeds, and how long a run may
 * take. seed_max is the largest seed it honours as given (UINT64_MAX for
 * 64-bit seeds; a server with 32-bit seeds that reserves one value, as
 * llama.cpp reserves 0xFFFFFFFF for "random", says 0xFFFFFFFE): the checks
 * then probe only seeds up to it. max_steps bounds each run (0: the
 * harness's bound from the workload's size; an HTTP adapter's steps are
 * polls and need more).
 */
/*
 * Whether the numerics of an engine that does not claim batch invariance
 * can explain a difference between two runs of one seed: after prompt
 * (len tokens), under sampling s, the runs gave ta[0..n) and tb[0..n),
 * equal before output position k and parting there (ta[k] != tb[k]).
 * True when the numerics can explain the parting and everything after it;
 * why gets the figures either way. Borrowed arrays, for the call.
 */
typedef bool (*assay_seed_explain_fn)(void *ctx, const int32_t *prompt, int32_t len,
                                      const struct assay_sampling *s, const int32_t *ta,
                                      const int32_t *tb, int32_t n, int32_t k, char *why,
                                      size_t size);

/*
 * An upper bound of the chance that a correct engine's stream draws
 * tokens[0..n) after prompt (len tokens) under sampling s: how likely two
 * independent streams (distinct seeds, unseeded requests) are to give one
 * output by coincidence. Borrowed arrays, for the call.
 */
typedef enum assay_status (*assay_seed_chance_fn)(void *ctx, const int32_t *prompt, int32_t len,
                                                  const struct assay_sampling *s,
                                                  const int32_t *tokens, int32_t n,
                                                  double *chance);

struct assay_seeded_opts {
    uint64_t seed_max;
    int64_t max_steps;
    /* NULL: the engine claims batch invariance, and every run of a seed
     * must give its tokens bit for bit. Else a run whose batch, cache or
     * neighbours differ may part from the seed's first run where this
     * says the numerics can move the draw: the comparison of that run
     * ends there (their contexts differ after it), and the check counts
     * and reports such partings; any other difference fails. */
    assay_seed_explain_fn explain;
    void *explain_ctx;
    /* With explain: whether a lone repeat of a seed (nothing else running)
     * may part too; false: it must give the first run's tokens bit for
     * bit, the promise llama.cpp makes with its prompt cache off. */
    bool explain_alone;
    /* NULL: two independent streams that give one output fail, whatever
     * the chance of that (an engine without weights to judge by). Else
     * they fail only when a correct engine does that with a chance of at
     * most ASSAY_SEED_ALPHA (shared among the comparisons); a likelier
     * coincidence (a peaked model, a wide budget) is stated, not failed. */
    assay_seed_chance_fn chance;
    void *chance_ctx;
};

/* The false-alarm rate the seeded checks allow their statistical rules. */
#define ASSAY_SEED_ALPHA 1e-6

/*
 * The bound assay_seed_chance_fn asks for, from the oracle's logits rows
 * (n, vocab): row j is the logits of tokens[j]. An engine whose logits
 * spread from the oracle's by at most room (max - min over tokens of the
 * difference) draws a token with at most p e^(2 room / T) / (top_p K),
 * where p is the oracle's probability at temperature T before the cuts and
 * K the mass of its top-k (whatever the order of the cuts); the bound is
 * the product over positions, at most 1. Temperature 0 gives 1.
 */
double assay_seed_chance_of_rows(const double *rows, int32_t vocab,
                                 const struct assay_sampling *s, const int32_t *tokens,
                                 int32_t n, double room);

/* assay_seed_chance_fn from the oracle of ctx (a const struct assay_model
 * *), for an engine in exact arithmetic (room ASSAY_EQUIV_TIE_TOL). */
enum assay_status assay_seed_chance_oracle(void *ctx, const int32_t *prompt, int32_t len,
                                           const struct assay_sampling *s,
                                           const int32_t *tokens, int32_t n, double *chance);

/* 64-bit seeds, the harness's bound, bit for bit. */
struct assay_seeded_opts assay_seeded_opts_default(void);

/*
 * The 8 seeds seed.positions probes within seeds 0..seed_max: the edge
 * seeds for 64-bit seeds; for a smaller space the edge seeds in it, then
 * seed_max, 2^31, seed_max - 1, 2^16, 2^31 + 1, ... (those that fit),
 * filled to 8 distinct values.
 */
void assay_seed_probes(uint64_t seed_max, uint64_t out[ASSAY_N_EDGE_SEEDS]);

/*
 * seed.positions on a (vocabulary vocab, context n_ctx): prompts and
 * neighbours drawn from seed, probes assay_seed_probes(o->seed_max). Each
 * probe's tokens alone are the reference; every other run must give
 * exactly them. res gets FAIL naming the seed, the position, both tokens
 * and the variable that changed. Returns ASSAY_OK when a verdict was
 * reached, else ASSAY_ERR_NOMEM.
 */
enum assay_status assay_check_seed_positions(const struct assay_adapter *a, int32_t vocab,
                                             int32_t n_ctx, uint64_t seed,
                                             const struct assay_seeded_opts *o,
                                             struct assay_check_result *res);
/*
 * seed.unseeded: 8 unseeded requests with one prompt (temperature 1, no
 * cut), 16 tokens each, in one step; FAIL when all 8 are the same. The
 * chance of that on a correct engine is at most sum_x p(x)^8 over the
 * first token's distribution, computed by the oracle from model (the
 * weights a runs) and stated.
 */
enum assay_status assay_check_seed_unseeded(const struct assay_adapter *a,
                                            const struct assay_model *model, uint64_t seed,
                                            const struct assay_seeded_opts *o,
                                            struct assay_check_result *res);

/*
 * seed.pairs: n_pairs pairs of requests with one prompt and one token each
 * (temperature 1, no cut): half with adjacent seeds (s, s + 1), half with
 * seeds that differ only in bit 32 (s, s ^ 2^32), or in bit 30 when
 * o->seed_max is below 2^34 (32-bit seeds). A pair's requests run apart
 * (the first requests of 64 pairs, then their partners shuffled), so a
 * server whose logits depend on its batch does not make them dependent.
 * The first tokens, in 4 bins of about equal mass under the oracle's
 * distribution, form a 4 x 4 table of the pair's two tokens; Pearson's
 * test of independence at level alpha, with the smallest departure it
 * detects with probability power.
 */
enum assay_status assay_check_seed_pairs(const struct assay_adapter *a,
                                         const struct assay_model *model, uint64_t seed,
                                         const struct assay_seeded_opts *o, int64_t n_pairs,
                                         double alpha, double power,
                                         struct assay_check_result *res);

#endif
