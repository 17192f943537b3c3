/*
 * pairwise.h - is the candidate still right? The correctness half of
 * `assay compare BASELINE CANDIDATE` (the speed half is bench/speedup.h).
 *
 * The candidate is judged as its spec states it (no plan options are laid
 * over it: the configuration about to be merged is the one checked),
 * against the baseline and, where assay has the weights, against the
 * oracle. The checks, in order:
 *
 *   compare.greedy       equivalence. The workload (every request made
 *                        greedy) runs on both engines; both must deliver
 *                        correctly (checks/equivalence.h), and the
 *                        candidate's tokens must be the baseline's, token
 *                        for token. Where the weights are known, the first
 *                        divergence of a request is accepted as a
 *                        floating-point tie by the tie rule (assay_tie,
 *                        checks/equivalence.h) on the oracle's logits
 *                        given the common prefix; that request is then
 *                        compared no
 *                        further (the engines now condition on different
 *                        prefixes; compare.oracle judges the rest). Without
 *                        the weights any divergence fails.
 *   compare.oracle       equivalence: the candidate's greedy tokens against
 *                        the oracle (assay_check_equivalence). Needs the
 *                        weights.
 *   compare.homogeneity  distributional: the 2 x k homogeneity test of the
 *                        first two sampled tokens (pairs), baseline against
 *                        candidate, disjoint seeds (assay_dist_homogeneity).
 *                        Needs no weights.
 *   compare.gof          distributional: chi-squared of the candidate's
 *                        first sampled token against the oracle's exact
 *                        distribution (assay_dist_gof). Needs the weights.
 *   compare.pit          distributional: the randomised PIT of the
 *                        candidate's whole sampled sequences
 *                        (assay_dist_pit). Needs the weights.
 *   compare.trace        property: trace consistency of the candidate
 *                        (assay_check_trace).
 *   compare.isolation    property: no cross-sequence attention in the
 *                        candidate: logits when it exposes them
 *                        (assay_check_isolation), else tokens alone
 *                        (assay_check_isolation_blackbox).
 *   compare.blocks       property: block conservation after every step
 *                        (assay_check_blocks); SKIP without block_audit.
 *
 * The weights, in order of precedence: a GGUF file given by the caller
 * (--model), the candidate's when it is the bundled engine, the
 * baseline's when it is. The baseline's weights judge a candidate whose
 * weights assay cannot see because the candidate claims to compute what
 * the baseline computes; a candidate serving other weights fails the
 * oracle-based checks, as it should. A check that needs weights nobody
 * gave reports SKIP, never PASS.
 *
 * Each check runs through assay_run_plan_item on the candidate spec (so
 * failures shrink with assay_shrink), and its reproducer is an assay
 * compare command line that reruns exactly that check on exactly that
 * workload. Distributional seeds derive from the master seed and the
 * check's name; Holm's procedure over the distributional results is the
 * caller's (assay_verify_finalize).
 *
 * Lifetime: assay_pairwise_init / assay_pairwise_free. Nothing here prints
 * or exits.
 */
#ifndef ASSAY_PAIRWISE_H
#define ASSAY_PAIRWISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/status.h"
#include "check.h"
#include "result.h"
#include "shrink.h"

/* Samples per engine of the distributional checks by default (the PIT
 * draws the same number of tokens as sequences of 32). */
#define ASSAY_PAIRWISE_DEFAULT_SAMPLES 20000

struct assay_pairwise_params {
    const char *baseline;  /* engine spec (required) */
    const char *candidate; /* engine spec (required) */
    const char *model;     /* GGUF file with the weights both engines run, or NULL */
    const char *fixtures;  /* the fixtures folder (required) */
    uint64_t seed;         /* master seed of the seeded checks */
    int64_t samples;       /* distributional samples per engine; 0: the default */
    const char *dist_params; /* "t=0.8,top_k=20,..." laid over every
                                distributional check's own (NULL: none) */
    double tie_tol;        /* 0: ASSAY_EQUIV_TIE_TOL */
    const char *program;   /* what reproducer lines start with (NULL: "assay") */
    bool no_fork;          /* run the checks in this process (checks/isolate.h) */
    double timeout_s;      /* a check's time limit; 0: none (default
                              ASSAY_ISOLATION_TIMEOUT_S) */
};

/* The fixtures folder and seed are required; everything else as stated. */
struct assay_pairwise_params assay_pairwise_default_params(void);

struct assay_pairwise;

/*
 * Copy the parameters, load the --model file if any, and open both engines
 * once (and close them) so that a bad spec, plugin or model file is
 * reported before anything long runs: ASSAY_ERR_INVALID and the others
 * that assay_adapter_open_spec or assay_model_load_gguf return, with diag
 * saying which engine ("baseline", "candidate") or file; ASSAY_ERR_NOMEM.
 * On failure *out is NULL.
 */
enum assay_status assay_pairwise_init(struct assay_pairwise **out,
                                     const struct assay_pairwise_params *p,
                                     struct assay_diag *diag);
void assay_pairwise_free(struct assay_pairwise *c);

/* What the two engines say about themselves (borrowed until free; the
 * strings of a plugin's or server's info are copied at init). */
const struct assay_adapter_info *assay_pairwise_baseline_info(const struct assay_pairwise *c);
const struct assay_adapter_info *assay_pairwise_candidate_info(const struct assay_pairwise *c);

/* Where the oracle's weights come from: "--model FILE", "the candidate (bundled)",
 * "the baseline (bundled)", or "" when assay has none. */
const char *assay_pairwise_weights(const struct assay_pairwise *c);

/*
 * Run compare check `item` (assay_plan_for(ASSAY_COMMAND_COMPARE)) on the
 * candidate, over workload_override (a file) or the check's fixture. res
 * always gets a verdict (ERROR with the reason when an engine or the
 * workload is bad) and, on FAIL, a reproducer line. Returns ASSAY_OK
 * unless memory ran out.
 */
enum assay_status assay_pairwise_run_check(struct assay_pairwise *c,
                                           const struct assay_plan_item *item,
                                           const char *workload_override,
                                           struct assay_check_result *res);

/* Whether the workload file at path is one compare check `item` can run on
 * the candidate, checked before any check runs
 * (assay_verify_check_workload). */
enum assay_status assay_pairwise_check_workload(struct assay_pairwise *c,
                                               const struct assay_plan_item *item,
                                               const char *path, struct assay_diag *diag);

/*
 * Shrink the failure of check `item` (see checks/shrink.h: the candidate's
 * pool and the workload; the baseline stays as given) and write the
 * reproducer into opts->out_dir. out->command is the assay compare line
 * that reruns the shrunk case (or the original one when the check has no
 * workload to shrink). Returns as assay_shrink.
 */
enum assay_status assay_pairwise_shrink(struct assay_pairwise *c,
                                        const struct assay_plan_item *item,
                                        const char *workload_override,
                                        const struct assay_shrink_opts *opts,
                                        struct assay_shrink_result *out);

/* The reproducer line of check `item` on candidate spec `candidate` and
 * workload file `workload` (NULL: its fixture), into buf. Returns buf. */
char *assay_pairwise_command(const struct assay_pairwise *c, const struct assay_plan_item *item,
                             const char *candidate, const char *workload, char *buf, size_t size);

/* The runners of the compare checks that need the comparison itself
 * (assay_check_fn; t->owner is the struct assay_pairwise); compare.trace
 * and compare.blocks use the plan's property runners. Registered in
 * checks/plan.c. */
enum assay_status assay_pairwise_run_greedy(struct assay_verify_ctx *ctx,
                                            const struct assay_plan_item *item,
                                            const struct assay_target *t,
                                            const struct assay_workload *w,
                                            struct assay_check_result *res);
enum assay_status assay_pairwise_run_oracle(struct assay_verify_ctx *ctx,
                                            const struct assay_plan_item *item,
                                            const struct assay_target *t,
                                            const struct assay_workload *w,
                                            struct assay_check_result *res);
enum assay_status assay_pairwise_run_homogeneity(struct assay_verify_ctx *ctx,
                                                 const struct assay_plan_item *item,
                                                 const struct assay_target *t,
                                                 const struct assay_workload *w,
                                                 struct assay_check_result *res);
enum assay_status assay_pairwise_run_gof(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res);
enum assay_status assay_pairwise_run_pit(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res);
enum assay_status assay_pairwise_run_isolation(struct assay_verify_ctx *ctx,
                                               const struct assay_plan_item *item,
                                               const struct assay_target *t,
                                               const struct assay_workload *w,
                                               struct assay_check_result *res);

#endif
