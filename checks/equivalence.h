/*
 * equivalence.h - the equivalence family: an engine's greedy tokens must be
 * the oracle's, token for token.
 *
 * The engine runs the workload (any adapter); then for every greedy request
 * (a sampled one is the distributional family's; it is still delivered
 * whole, and it is still a neighbour of the others) the
 * oracle computes, in one teacher-forced pass over the prompt and the
 * engine's own tokens, the logits at every output position. Position t
 * agrees when the engine's token is the oracle's argmax. Floating-point
 * ties are the one legitimate divergence (assay_tie below), and the
 * comparison continues teacher-forced on the engine's token. Anything
 * else fails, with the request, the position, both tokens and both logits.
 * The check also fails a request that is rejected, finishes other than once,
 * finishes with an error, delivers a position twice or out of order, or
 * delivers a number of tokens other than max_tokens (unless it stopped on
 * its stop token or was aborted).
 */
#ifndef ASSAY_EQUIVALENCE_H
#define ASSAY_EQUIVALENCE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/workload.h"
#include "../engine/model.h"
#include "harness.h"
#include "result.h"

/* The default tie tolerance in logit units, with the reasoning in README
 * ("The tie rule"): far above the engine's fp32 error, far below a real
 * divergence. */
#define ASSAY_EQUIV_TIE_TOL 1e-3

/*
 * The tie rule: the one definition of a floating-point tie, used by every
 * check that compares tokens (equivalence, the audit, compare, isolation).
 *
 * At one output position, given reference logits `row` (vocab entries) for
 * the common prefix, two tokens a and b tie when both lie within tol of the
 * row's largest logit:
 *
 *     gap = max(best - row[a], best - row[b]) <= tol,  best = max_v row[v]
 *
 * One of the two is usually the best token itself, and the gap is then how
 * far the other is below it. When neither is the best, both sides left the
 * reference and the rule does not excuse them. The reference is the
 * oracle's double-precision logits wherever the weights are known; the
 * isolation check, which runs no oracle, uses the engine's own logits of
 * the request run alone. tol is ASSAY_EQUIV_TIE_TOL unless a caller states
 * another (README, "The tie rule", says why 1e-3).
 *
 * Returns whether a and b tie (true when a == b), with the gap in *gap
 * (may be NULL); a token outside [0, vocab) or a NaN logit is never a tie
 * (*gap is then NaN).
 */
bool assay_tie(const double *row, int32_t vocab, int32_t a, int32_t b, double tol, double *gap);

/* The oracle's logits for sequences already seen, so that engine
 * configurations that produce the same tokens cost one oracle pass. */
struct assay_oracle_memo;

enum assay_status assay_oracle_memo_init(struct assay_oracle_memo **out,
                                         const struct assay_model *model, int32_t max_len);
void assay_oracle_memo_free(struct assay_oracle_memo *memo);

/* Run the memo's oracle on n_threads threads (assay_oracle_set_threads: the
 * same doubles, sooner when cores are free). */
enum assay_status assay_oracle_memo_set_threads(struct assay_oracle_memo *memo, int32_t n_threads);

/* Oracle logits (n_out, vocab) at the output positions of prompt followed
 * by out[0..n_out): row t predicts out[t]. Borrowed until the memo is
 * freed. */
enum assay_status assay_oracle_memo_rows(struct assay_oracle_memo *memo, const int32_t *prompt,
                                         int32_t prompt_len, const int32_t *out, int32_t n_out,
                                         const double **rows);

/*
 * Put the rows of n sequences (prompts[i] then outs[i], as
 * assay_oracle_memo_rows takes them) into the memo ahead of their
 * lookups, in batched passes (assay_oracle_logits_batch: the same rows,
 * each layer taken once for many sequences rather than once a sequence).
 * Sequences already held, repeated, or too long for the memo are left
 * alone (their lookup says what it would have said). Returns ASSAY_OK,
 * or the first error (the rows computed before it stay).
 */
enum assay_status assay_oracle_memo_prefetch(struct assay_oracle_memo *memo, int32_t n,
                                             const int32_t *const *prompts,
                                             const int32_t *prompt_lens,
                                             const int32_t *const *outs, const int32_t *n_outs);

/*
 * assay_oracle_memo_prefetch with the passes shared among the ranks of the
 * running check (checks/shard.h; a shared equivalence check): rank 0's
 * sequences count (the other ranks pass none), rank 0 sends every rank
 * those its memo lacks, rank r computes those whose index i has
 * i mod N == r, and their rows come to rank 0's memo (the same doubles:
 * the oracle's rows do not depend on the batch), in exchanges of at most
 * 256 MB of rows. Every rank of the check must call it as often as rank 0
 * does. Outside a shared check: assay_oracle_memo_prefetch. Returns
 * ASSAY_OK, or a collective's failure (the check must then end); a row a
 * rank could not compute is left to rank 0's lookup.
 */
enum assay_status assay_oracle_memo_prefetch_shared(struct assay_oracle_memo *memo, int32_t n,
                                                    const int32_t *const *prompts,
                                                    const int32_t *prompt_lens,
                                                    const int32_t *const *outs,
                                                    const int32_t *n_outs);

/*
 * The argmax of each of the oracle's rows for n sequences (as
 * assay_oracle_memo_rows takes them; the lowest id among equal logits)
 * into argmax[i][0..n_outs[i]), in batched passes that do not keep the
 * rows: for a scan whose rows are not looked at again, such as every
 * position of long prompts (each row is vocab doubles). Rows the memo
 * holds are read from it; the memo is left as it was. Returns ASSAY_OK,
 * ASSAY_ERR_INVALID for a sequence too long for the memo or empty (its
 * lookup would be refused too), or the oracle's or an allocation's status.
 */
enum assay_status assay_oracle_memo_argmax(struct assay_oracle_memo *memo, int32_t n,
                                           const int32_t *const *prompts,
                                           const int32_t *prompt_lens,
                                           const int32_t *const *outs, const int32_t *n_outs,
                                           int32_t *const *argmax);

/* The oracle's greedy continuation of prompt: n tokens into out (the
 * argmax of each row, the lowest id among equal logits). */
enum assay_status assay_oracle_memo_greedy(struct assay_oracle_memo *memo, const int32_t *prompt,
                                           int32_t prompt_len, int32_t vocab, int32_t n,
                                           int32_t *out);

/* How many sequences the memo holds. */
int32_t assay_oracle_memo_count(const struct assay_oracle_memo *memo);

/*
 * Carry what a check's child process added to its copy of the memo back to
 * the parent's (checks/isolate.h): assay_oracle_memo_write writes the
 * entries from index `from` on to f; assay_oracle_memo_read adds those
 * written to f (by a memo of the same weights) to memo. Returns ASSAY_OK,
 * ASSAY_ERR_IO (write: f failed; read: f ended early or holds rows of
 * another vocabulary; the entries read before stay), ASSAY_ERR_NOMEM.
 */
enum assay_status assay_oracle_memo_write(const struct assay_oracle_memo *memo, int32_t from,
                                          FILE *f);
enum assay_status assay_oracle_memo_read(struct assay_oracle_memo *memo, FILE *f);

struct assay_equiv_opts {
    double tie_tol;  /* logits; ASSAY_EQUIV_TIE_TOL by default */
    assay_step_hook hook; /* extra per-step checks (may be NULL) */
    void *hook_ctx;
    int64_t max_steps; /* 0: the harness's bound from the workload's size; an HTTP
                          adapter's idle step lasts about 1 ms, so a server
                          audit sets a bound of its own */
};

/*
 * Run w on a and judge it as described above. res gets the verdict, the
 * figures (requests, tokens, ties, largest accepted tie gap, largest engine
 * vs oracle logit difference when the adapter exposes logits) and, on
 * failure, the first failing request. Returns ASSAY_OK when a verdict was
 * reached (PASS or FAIL), or an error status when the check could not run
 * (then res->verdict is ERROR).
 */
enum assay_status assay_check_equivalence(const struct assay_adapter *a,
                                          const struct assay_workload *w,
                                          struct assay_oracle_memo *memo,
                                          const struct assay_equiv_opts *opts,
                                          struct assay_check_result *res);

/*
 * Judge a finished transcript of w for delivery (each request finished once
 * with a valid reason, positions delivered once and in order, the right
 * count). Returns the index of the first bad request, or -1, and describes
 * it in msg.
 */
int32_t assay_check_delivery(const struct assay_workload *w, const struct assay_transcript *t,
                             char *msg, size_t size);

#endif
