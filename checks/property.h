/*
 * property.h - the property family: invariants that no scalar shows, checked
 * on any engine that exposes them (capabilities) and on any engine's output.
 *
 * Block conservation (assay_check_blocks): after every step the engine's
 * block_audit snapshot is judged by the reference model of
 * oracles/block_model.h (rules R1-R10 there: reference counts equal the
 * table entries holding a block, registration takes no reference, free /
 * in use / cached follow from holders and registration and add up to the
 * total, lists agree, sharing only through the prefix cache at the same
 * table index, a registered block holds its key's tokens after its key's
 * history, a table covers exactly its computed positions) plus two rules
 * that need the workload:
 *   R12 boundary: a running sequence's prompt/output boundary is its
 *       request's declared prompt_len, and it holds at most
 *       prompt_len + max_tokens tokens;
 *   R13 self-check: the engine's own check_invariants (when it has one)
 *       passes.
 * After the run drains, and so after every abort of the workload, R11: no
 * block is in use.
 *
 * No cross-sequence attention (assay_check_isolation): a few probe requests
 * run alone, then among neighbours that change: the workload as given, the
 * neighbours' prompts replaced, their lengths changed, their arrivals moved.
 * A probe's tokens must not change, its logits must be finite, and its
 * logits must be bit-identical where the adapter claims batch invariance,
 * else within logit_tol (the largest difference is reported). Where the
 * engine is not batch invariant, a different token is accepted as a
 * floating-point tie by the tie rule (assay_tie, checks/equivalence.h) on
 * the logits of the run alone, with tie_tol; the probe's comparison then
 * ends there.
 * assay_check_isolation_blackbox needs no capability: every request's tokens
 * at concurrency 1 (each request alone) must equal its tokens when all
 * arrive at once, one per step, and as the workload says.
 *
 * Trace consistency (assay_check_trace): the rules of checks/trace.h on the
 * workload that goes in and the transcript that comes out.
 *
 * The long randomised run (assay_check_soak): the workload as given (meant:
 * thousands of requests, random aborts, a pool small enough to preempt
 * often) with block conservation after every step, trace consistency and the
 * drain rule; then the same requests at concurrency 1, and every request's
 * tokens must be the same in both runs (the black-box isolation rule).
 *
 * Each check sets res (checks/result.h): PASS, FAIL with the first broken
 * rule and where, or SKIP with the capability that is missing (never PASS
 * for what could not be checked). Unseeded sampled requests are left out of
 * the token comparisons: their randomness is the engine's, and nothing says
 * it must not depend on arrival order.
 */
#ifndef ASSAY_PROPERTY_H
#define ASSAY_PROPERTY_H

#include <stdbool.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/workload.h"
#include "result.h"

/* The largest logit change a batch may cause when the engine does not claim
 * batch invariance: the same bound as the equivalence family's tie
 * tolerance, far above the reordering error of fp32 products (the bundled
 * engine shows about 1e-5) and far below what a neighbour's key in the
 * softmax does. */
#define ASSAY_ISOLATION_LOGIT_TOL 1e-3

struct assay_property_opts {
    int32_t slack_blocks;   /* R9: blocks a table may hold beyond its computed positions (0) */
    bool engine_self_check; /* R13: also run the adapter's check_invariants (true) */
    int32_t n_probes;       /* isolation: probe requests (3) */
    double logit_tol;       /* isolation, not batch invariant (ASSAY_ISOLATION_LOGIT_TOL) */
    double tie_tol;         /* isolation: a tie's logit gap (ASSAY_EQUIV_TIE_TOL) */
};

/* The defaults given above. */
struct assay_property_opts assay_property_default_opts(void);

/*
 * The checks. Each runs w on a (the engine keeps whatever state earlier
 * runs left, as engines do) and fills res. Return ASSAY_OK when a verdict
 * was reached (PASS, FAIL or SKIP); ASSAY_ERR_NOMEM (res: ERROR) when memory
 * ran out. o may be NULL (defaults).
 */
enum assay_status assay_check_blocks(const struct assay_adapter *a, const struct assay_workload *w,
                                     const struct assay_property_opts *o,
                                     struct assay_check_result *res);
enum assay_status assay_check_trace(const struct assay_adapter *a, const struct assay_workload *w,
                                    const struct assay_property_opts *o,
                                    struct assay_check_result *res);
enum assay_status assay_check_isolation(const struct assay_adapter *a,
                                        const struct assay_workload *w,
                                        const struct assay_property_opts *o,
                                        struct assay_check_result *res);
enum assay_status assay_check_isolation_blackbox(const struct assay_adapter *a,
                                                 const struct assay_workload *w,
                                                 const struct assay_property_opts *o,
                                                 struct assay_check_result *res);
enum assay_status assay_check_soak(const struct assay_adapter *a, const struct assay_workload *w,
                                   const struct assay_property_opts *o,
                                   struct assay_check_result *res);

/*
 * Options from a check's parameters ("probes=3,slack=0,tol=0.001,tie=0.001,
 * self_check=off") over the defaults into o. NULL gives the defaults. A bad
 * parameter makes res ERROR and returns false.
 */
bool assay_property_parse_params(const char *params, struct assay_property_opts *o,
                                 struct assay_check_result *res);

#endif
