/*
 * distributional.h - the distributional check family: an engine's sampled
 * tokens must have exactly the distribution the oracle computes.
 *
 * "For anything sampled, the same tokens is the wrong standard": these
 * checks draw many samples from an engine through any adapter (only
 * add_request, has_work and step are used) and test them against the exact
 * processed distributions of the naive oracle (oracles/oracle.h), computed
 * in double from the same weights:
 *
 *  - assay_dist_gof: Pearson chi-squared goodness of fit at the first output
 *    position (positions = 1) or of the pair of the first two output tokens
 *    (positions = 2, the exact joint p(x0) p(x1 | x0) from one oracle pass per
 *    possible x0), every request with the same prompt and its own seed. The
 *    bins are fixed from the oracle before sampling: each likely category
 *    (token or pair) its own bin, the rest pooled so every expected count is
 *    at least 5. A sample on a category of oracle probability 0 is a hard
 *    failure; the prompt is chosen (deterministically from the seed, before
 *    any sample) so that every top-k and top-p boundary it tests is further
 *    from the cut than the stated tolerance, so fp32 rounding cannot move it.
 *  - assay_dist_pit: whole sequences. For every emitted token x, with p the
 *    oracle's conditional given the engine's own prefix (one teacher-forced
 *    pass per sequence) and tokens ordered by descending p (ties: lower id),
 *    u = F(x-) + V p(x), V ~ U(0,1) from a seeded GSL mt19937. Under a correct
 *    engine the u are i.i.d. U(0,1) (Rosenblatt 1952); tested by a one-sample
 *    KS test and by chi-squared on equal-width bins of u (the marginal
 *    test), and by a conditional test: pooled over contexts, a bias whose
 *    sign depends on the context (too hot where the distribution is sharp,
 *    too cold where it is flat) averages out, so each u is also put in one
 *    of ASSAY_DIST_PIT_GROUPS groups by the entropy of the oracle's
 *    distribution at its position, with edges at the entropies' tertiles
 *    along sequences the oracle samples itself from the same prompts
 *    (fixed before any token of the engine is seen); each group is tested
 *    by chi-squared on ASSAY_DIST_PIT_GROUP_BINS equal bins and the groups'
 *    X^2 summed on the summed df (a group depends on the context only, so
 *    under a correct engine each group's u are i.i.d. U(0,1) too). The
 *    three p-values are combined by Bonferroni, p = min(1, 3 min(p_KS,
 *    p_chi2, p_groups)): the check's false-alarm rate stays alpha, each
 *    part is held at alpha / 3, and the failure says which part fired
 *    ("the marginal test alone passes" when only the groups did). The
 *    summary states the TV the grouped test detects within one group (the
 *    smallest) with the stated power. A token the oracle gives
 *    probability 0 fails the check unless the oracle's own top-k or top-p
 *    boundary at that position lies within the tolerance and the token is
 *    the first one past it: such a token is counted as a boundary decision
 *    (reported, left out of u), not as a bug.
 *  - assay_dist_acceptance: speculative decoding's acceptance against its
 *    theory. Each SPEC_ROUND event of a run says how many proposals were
 *    drafted and accepted; proposal j of a round was tested exactly when
 *    proposals 0..j-1 were accepted, and then its context is the engine's own
 *    output prefix, so the oracle (target and draft weights) gives its exact
 *    acceptance probability beta = sum_x min(p(x), q(x)). The indicators A
 *    are sequential Bernoulli(beta) given the past; two tests: (1) per draft
 *    position j (the acceptance-length distribution through its hazards), X^2
 *    = sum_j (sum A - sum beta)^2 / sum beta (1 - beta), chi-squared with one
 *    degree of freedom per position group (groups pooled from the top until
 *    each has variance >= 5); (2) the randomised PIT of the indicators,
 *    u = A ? V beta : beta + V (1 - beta), i.i.d. U(0,1) under the theory,
 *    tested by KS. Combined by Bonferroni as above.
 *  - assay_dist_homogeneity: the 2 x k chi-squared that two engines' samples
 *    (first token or first pair, the same prompt, disjoint seeds) come from
 *    one distribution; needs no oracle.
 *
 * Every check fills alpha, n, the statistic, the p-value, df, and the
 * smallest total-variation distance it detects with the stated power
 * (noncentral chi-squared; lambda = n w^2, w >= 2 TV; checks/stats.h). A
 * check's own verdict is FAIL when p <= alpha or on a hard failure;
 * assay_dist_finalize then applies Holm's procedure across the family.
 *
 * Nothing here prints or exits; every allocation goes through core/alloc.h.
 * Call assay_stats_init() once before any of these (GSL's handler off).
 */
#ifndef ASSAY_DISTRIBUTIONAL_H
#define ASSAY_DISTRIBUTIONAL_H

#include <stddef.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/request.h"
#include "../core/status.h"
#include "../engine/model.h"
#include "result.h"

/* Per-check level: with the verify plan's 13 checks the family-wise
 * false-alarm rate is at most 1.3e-5 (statistics.md: ~1e-6 per check for
 * 1e-4 over ~100 checks). */
#define ASSAY_DIST_ALPHA 1e-6
#define ASSAY_DIST_POWER 0.99
/* A top-p cut closer than this (in probability mass) to top_p, or a top-k
 * cut whose logit gap is below this (logit units, the equivalence family's
 * tie tolerance), may be decided differently by an fp32 engine than by the
 * double oracle. The engine's fp32 logits are within ~1e-5 of the oracle's. */
#define ASSAY_DIST_TOL_TOP_P 1e-4
#define ASSAY_DIST_TOL_LOGIT 1e-3

struct assay_dist_params;

/*
 * Exact ties at the filters' cuts. The sampling contract (core/request.h)
 * decides a tie by the lower token id: where the k-th and (k+1)-th tokens,
 * or the token that crosses top_p and the next, have the same logit, the
 * lower id is kept and the higher removed. A cut that close is otherwise
 * one the tolerances could move (a logit gap below tol_logit), so a check
 * avoids it. With a tie mode on, a cut that is an exact tie of the
 * oracle's logits (the same double, as identical output rows give: the
 * tie model mini-twins) counts as safe when every other logit is at least
 * tol_logit from the tied ones: an engine that computes each logit from
 * its own row and the hidden state alone (the bundled engine's own
 * product) has the same bits for the tied tokens, so its tie rule, not its
 * rounding, decides. A sample of the dropped token of such a tie is not
 * a hard failure (it is within tol_logit of the cut, so the kept set
 * widened by the tolerances holds it: the zero-probability rule accepts
 * either tied token), but it counts against the check's statistic: in the
 * chi-squared as a sample outside every bin (assay_gof_test_missing), in
 * the PIT as a value of 1. A correct engine never draws it, so the tests
 * keep their null distributions; an engine that keeps both tied tokens,
 * or the wrong one, is caught by the statistic once the tied token's
 * probability is large enough (distributional checks' docs state it).
 */
enum assay_dist_tie {
    ASSAY_DIST_TIE_NONE = 0, /* an exact tie at a cut is unsafe, like any gap below tol_logit */
    ASSAY_DIST_TIE_ANY,      /* exact ties wherever they fall (pit) */
    ASSAY_DIST_TIE_TOP_K,    /* gof: the prompt must put one at the top-k cut (2 or
                                more tokens kept) */
    ASSAY_DIST_TIE_TOP_P,    /* gof: the prompt must put one at the top-p cut (2 or
                                more tokens kept) */
};

/*
 * The TV from the oracle that a numerics budget allows at each output
 * position of one sequence (the PIT under a budget): seq holds the prompt
 * (prompt_len tokens) and the engine's n output tokens; oracle_rows the
 * oracle's logits, row prompt_len - 1 + j predicting output j (borrowed
 * for the call). Output j's allowances go to allow[j * (G - 1) ..
 * (j + 1) * (G - 1)), G = p->pit_bins: at each grid point s_k = k / G,
 * k = 1 .. G-1, how far in [0, 1] the CDF of a correct engine's PIT value
 * there, P(u <= s_k), may lie from s_k. reference[0..n) gets the
 * reference's TV from the oracle at each output (for the report), and
 * mass[0..n) the most a correct engine's cumulative mass can move there (a
 * top-p crossing that close is one the numerics can move). Called once per
 * sequence, on the rank that owns it.
 */
typedef enum assay_status (*assay_dist_along_fn)(void *ctx, const struct assay_dist_params *p,
                                                  const int32_t *seq, int32_t prompt_len,
                                                  int32_t n, const double *oracle_rows,
                                                  double *allow, double *reference,
                                                  double *mass);

/*
 * A numerics budget (the audit's): the engine computes in other formats
 * than the oracle, so a check's null is "the engine's distance from the
 * oracle is within the budget", a set, tested by a tolerance test
 * (checks/tolerance.h) whose alpha bounds the false alarms of every engine
 * inside it. Off: exact arithmetic, the point null and the chi-squared and
 * KS tests. The caller measures what a correct implementation of the
 * engine's formats does (the reference) and states the allowance.
 */
struct assay_dist_budget {
    bool on;
    /* gof, homogeneity: the TV the null allows (gof: between the engine's
     * and the oracle's distribution of the first token; homogeneity:
     * between the two engines'), and for the report the parts it was made
     * from: the reference's own TV and what the cuts the budget can move
     * add */
    double tv;
    double reference;
    double boundary;
    /* homogeneity: the distribution the TV bins are fixed from, before
     * either sample (the oracle's at the prompt, vocab entries), borrowed */
    const double *bins_from;
    /* pit: the allowance at each position and grid point (the null: at
     * each grid point the PIT values' CDF lies within the mean of the
     * positions' allowances of the uniform's) */
    assay_dist_along_fn along;
    void *ctx;
    const char *what; /* the formats in a few words, for the summary; borrowed */
};

struct assay_dist_params {
    int64_t n;            /* gof, homogeneity: requests (per engine); pit,
                             acceptance: sequences */
    int32_t positions;    /* gof, homogeneity: 1 = first output token, 2 = the
                             pair of the first two */
    int32_t out_len;      /* max_tokens of each request (>= positions; pit and
                             acceptance: the sequence length) */
    int32_t prompt_len;   /* tokens per prompt (bytes 0..255 drawn from seed) */
    int32_t n_prompts;    /* pit, acceptance: request i uses prompt i % n_prompts */
    struct assay_sampling sampling; /* temperature (> 0), top_k, top_p; the
                             seeds are set per request from `seed` */
    enum assay_sampling_order order; /* the order the oracle applies; set it
                             to the engine's documented order */
    double alpha;         /* per-check level, in (0, 1) */
    double power;         /* the power min_tv refers to */
    int32_t pit_bins;     /* pit: equal-width bins of u for the chi-squared */
    int32_t window;       /* requests in flight at once */
    double tol_top_p;     /* see ASSAY_DIST_TOL_TOP_P */
    double tol_logit;     /* see ASSAY_DIST_TOL_LOGIT */
    int32_t prompt_tries; /* gof: candidate prompts tried for comfortable margins */
    enum assay_dist_tie tie; /* exact ties at the cuts (see enum assay_dist_tie); not
                             under a budget, positions 1 only */
    const char *no_prompt_skip; /* gof: NULL: no candidate with comfortable margins
                             is an ERROR; else it is a SKIP and this says why the
                             tolerances are what they are (a stated budget that
                             can leave no boundary safe); borrowed for the call */
    uint64_t seed;        /* everything random in the check derives from it */
    uint64_t prompt_seed; /* the prompts' seed; 0: derived from seed */
    const int32_t *prompt; /* gof, homogeneity: the prompt (prompt_len tokens)
                             the caller chose, borrowed for the call; NULL:
                             chosen here from the prompt seed */
    struct assay_dist_budget budget; /* off by default */
    bool bonus_only;      /* pit: test only the tokens drawn after every proposal
                             of a speculative round was accepted (the engine's
                             SPEC_ROUND events say which), each against the
                             target's distribution given its prefix */
};

/* The PIT's conditional test: groups of the oracle's entropy, and equal
 * bins of u per group. */
#define ASSAY_DIST_PIT_GROUPS 3
#define ASSAY_DIST_PIT_GROUP_BINS 10

/* pit with bonus_only: fewer tokens after a wholly accepted round than
 * this is a SKIP (the KS decides alone from here until the bins fill). */
#define ASSAY_DIST_PIT_MIN_BONUS 10

/* The p-values a combined check is made of, for calibration: PIT: KS and
 * chi-squared of u, and the chi-squared within entropy groups; acceptance:
 * the per-position X^2 and the KS of the indicator PIT. Each is U(0,1)
 * under the null, while their Bonferroni combination is conservative. */
struct assay_dist_parts {
    int32_t n;
    double p[3];
    const char *name[3];
};

/* Defaults: n 70,000, positions 1, out_len 1, prompt_len 6, n_prompts 16,
 * temperature 0.7, top_k 40, top_p 0.9, JOINT, alpha ASSAY_DIST_ALPHA, power
 * ASSAY_DIST_POWER, 20 PIT bins, window 512, the tolerances above, 64 prompt
 * tries, seed 1, prompt seed 0 (derived). */
struct assay_dist_params assay_dist_default_params(void);

/*
 * Parse "key=value,..." over p (keys: n, pos, len, prompt, prompts, t, top_k,
 * top_p, order=joint|sequential, alpha, power, bins, window, tries,
 * only=bonus, tie=k|p|any; unknown
 * keys and "vs" are left to the caller: "vs" is ignored here). NULL or "" is
 * no change. On a bad key or value returns ASSAY_ERR_INVALID with the reason
 * in why; p may then be partly updated.
 */
enum assay_status assay_dist_parse_params(const char *s, struct assay_dist_params *p, char *why,
                                          size_t size);

/*
 * The goodness-of-fit check described above, on adapter a whose weights are
 * model (borrowed for the call). res must have been initialised
 * (assay_check_result_init); it gets the verdict, the figures and a summary.
 * Returns ASSAY_OK when a verdict was reached (PASS or FAIL); otherwise
 * res->verdict is ERROR with the reason and the status says why
 * (ASSAY_ERR_INVALID for bad parameters or no prompt with comfortable
 * margins, ASSAY_ERR_NOMEM, or the adapter's failure).
 */
enum assay_status assay_dist_gof(const struct assay_adapter *a, const struct assay_model *model,
                                 const struct assay_dist_params *p,
                                 struct assay_check_result *res);

/*
 * The prompt assay_dist_gof tests under p (the first candidate from the
 * prompt seed whose boundaries are comfortable), into prompt
 * (p->prompt_len), and the oracle's exact distribution of the first
 * p->positions tokens after it under p->order, into prob (vocab^positions,
 * pairs as x0 * vocab + x1). ASSAY_ERR_INVALID when no candidate qualifies,
 * ASSAY_ERR_NOMEM; prompt and prob are then unspecified.
 */
enum assay_status assay_dist_choose_prompt(const struct assay_model *model,
                                           const struct assay_dist_params *p, int32_t *prompt,
                                           double *prob);

/* Candidate prompt `candidate` (0, 1, ...) of p's prompt seed, p->prompt_len
 * tokens into out: the prompts assay_dist_gof chooses among. */
void assay_dist_candidate_prompt(const struct assay_dist_params *p, int32_t candidate,
                                 int32_t *out);

/* The number of tokens (the top ones by logit) the kept set of `row`'s
 * processed distribution under p holds when its cuts are loosened by the
 * tolerances: top-k to every token within p->tol_logit of the k-th logit,
 * top-p raised by p->tol_top_p, and then every token within p->tol_logit
 * of the last token that cut keeps (an engine whose logits are off by
 * that much can order the two the other way and keep the one below in
 * its place), never past the loosened top-k. A token of oracle
 * probability 0 ranked below it is one the tolerances cannot explain.
 * scratch: v doubles. */
int32_t assay_dist_widened_kept(const double *row, int32_t v, const struct assay_dist_params *p,
                                double *scratch);

/* The rank of x among the logits (0 = largest; lower id first on ties). */
int32_t assay_dist_logit_rank(const double *row, int32_t v, int32_t x);

/*
 * An exact tie at the cut of a processed distribution: prob (v) the
 * oracle's for the logits row (v), whose kept set is its tokens of
 * probability above 0. When the last kept token (lowest logit, then
 * highest id) and the first removed one (highest logit, then lowest id)
 * have the same logit, *out says which tokens they are and how far the
 * tied logit is from every other token's (gap: +inf when there is none).
 * Returns whether the cut is such a tie (false when nothing is removed).
 */
struct assay_dist_tie_info {
    int32_t kept;    /* the last kept token (the lower id of the tie) */
    int32_t dropped; /* the first removed token */
    double logit;    /* their logit */
    double q;        /* prob[kept] */
    double gap;      /* the smallest distance from another token's logit */
};
bool assay_dist_cut_tie(const double *row, const double *prob, int32_t v,
                        struct assay_dist_tie_info *out);

/* The whole-sequence PIT check described above; arguments and returns as
 * assay_dist_gof. parts (may be NULL) gets the two component p-values. */
enum assay_status assay_dist_pit(const struct assay_adapter *a, const struct assay_model *model,
                                 const struct assay_dist_params *p, struct assay_check_result *res,
                                 struct assay_dist_parts *parts);

/* The acceptance check described above, for an engine speculating with
 * draft weights `draft` (borrowed). SKIP when the run produced no
 * SPEC_ROUND event (the engine does not speculate or does not say so).
 * Otherwise arguments and returns as assay_dist_gof; parts as assay_dist_pit. */
enum assay_status assay_dist_acceptance(const struct assay_adapter *a,
                                        const struct assay_model *model,
                                        const struct assay_model *draft,
                                        const struct assay_dist_params *p,
                                        struct assay_check_result *res,
                                        struct assay_dist_parts *parts);

/* The two-sample homogeneity check described above between engines a and b
 * (same vocabulary); arguments and returns as assay_dist_gof. */
enum assay_status assay_dist_homogeneity(const struct assay_adapter *a,
                                         const struct assay_adapter *b,
                                         const struct assay_dist_params *p,
                                         struct assay_check_result *res);

/*
 * Holm's step-down procedure across the distributional results among
 * results[0..n) that carry a p-value (PASS or FAIL verdicts): with m of
 * them, each at level alpha, the family is held at m * alpha (smallest
 * alpha if they differ). Sets p_adjusted (Holm-adjusted p-values); a result
 * Holm rejects becomes FAIL, and its summary says so. Other results are
 * untouched. Returns the family-wise level used (0 when m == 0), or a
 * negative number when memory ran out (then nothing was changed).
 */
double assay_dist_finalize(struct assay_check_result *results, size_t n);

#endif
