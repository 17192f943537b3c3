/*
 * divergence.h - how far an implementation's top logprobs are from the
 * oracle's, position by position: the KL divergence over the tokens it
 * returned, every |difference| of a logprob, and top-1 agreement, summed up
 * as a few quantiles and a CDF a report can draw without the raw data.
 *
 * Use: assay_divergence_init, then assay_divergence_add once per teacher-forced
 * position with the oracle's log-softmax row and the implementation's top
 * list, then assay_divergence_summarise into a named series (a report holds up
 * to ASSAY_DIVERGENCE_MAX_SERIES of them: the server, a reference measured on
 * the same positions and its fp16-accumulating variant), and
 * assay_divergence_free. Nothing here knows where the
 * values came from.
 *
 * The KLD of a position. With T the distinct tokens returned, o_t the
 * oracle's logprob and s_t the implementation's, the rest's mass is
 * P_o = max(0, 1 - sum_T e^o_t) and P_s = max(0, 1 - sum_T e^s_t), and
 *
 *     KLD = sum_T e^o_t (o_t - s_t) + P_o log(P_o / max(P_s, f)),
 *
 * with 0 log 0 = 0 (a term with e^o_t = 0 or P_o = 0 adds nothing). It is
 * KL(oracle || implementation) of the two distributions coarsened to |T| + 1
 * bins (the returned tokens and "the rest"), so by the data-processing
 * inequality a lower bound on the KL of the full distributions: a small
 * value does not prove the rest agrees, a large one proves a difference.
 *
 * The floor f = |T| FLT_EPSILON. A server computes its probabilities in
 * single precision, so 1 - sum_T e^s_t is only known to within about
 * |T| FLT_EPSILON (each term carries a relative error of FLT_EPSILON and
 * the sum is at most 1): a rest mass below that is indistinguishable from
 * zero, and one at or below zero (a sum that rounded past 1) would make the
 * KLD infinite for no reason but rounding. The floor applies to P_s always,
 * not only when it is <= 0, so the KLD is continuous in it. Flooring can
 * make the sum fall below zero, by at most f / e (the largest
 * -P_o log(P_o / f) for P_o < f); a negative KLD is clamped to 0.
 *
 * Edge cases: a token returned twice counts once in the KLD (its first
 * logprob) and twice among the |differences|. A server logprob of -inf gives
 * an infinite |difference| and, where the oracle's probability is not 0, an
 * infinite KLD: that is the measurement, not an error. NaN and +inf are
 * rejected. A position with no top list counts for top-1 agreement only.
 */
#ifndef ASSAY_DIVERGENCE_H
#define ASSAY_DIVERGENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/status.h"

/* Quantiles at 0, 1, ..., 100 %. */
#define ASSAY_DIVERGENCE_CDF_POINTS 101
/* Series a check result holds: the server, and a reference. */
#define ASSAY_DIVERGENCE_MAX_SERIES 3

/* One value of a top list: a token and its natural-log probability. */
struct assay_divergence_top {
    int32_t token;
    double logprob;
};

/* The distribution of one figure. With n == 0 every number is NaN. */
struct assay_divergence_stats {
    int64_t n;
    double mean, median, p99, max;
    /* cdf[k]: the nearest-rank k % quantile (cdf[0] the smallest value,
     * cdf[100] the largest); the share of values <= cdf[k] is >= k %. */
    double cdf[ASSAY_DIVERGENCE_CDF_POINTS];
};

/* A named series: one implementation's figures over the positions added. */
struct assay_divergence_summary {
    char name[32];
    int64_t n_positions;                  /* positions added (top-1's denominator) */
    int64_t n_values;                     /* logprobs compared (== abs_diff.n) */
    struct assay_divergence_stats kld;      /* one per position with a top list */
    struct assay_divergence_stats abs_diff; /* one per value compared */
    double top1_agreement;                /* share of positions; NaN when none */
};

struct assay_divergence; /* the accumulator (opaque) */

/*
 * A new, empty accumulator in *out; free it with assay_divergence_free.
 * Returns ASSAY_OK, or ASSAY_ERR_NOMEM with *out NULL.
 */
enum assay_status assay_divergence_init(struct assay_divergence **out);

/* Release an accumulator; NULL is a no-op. */
void assay_divergence_free(struct assay_divergence *acc);

/*
 * The coarsened KLD of one position (see the header comment) into *kld.
 * lsm is the oracle's log-softmax row (vocab), borrowed for the call; top
 * holds n_top >= 0 values (n_top == 0 gives 0). Returns ASSAY_OK, or
 * ASSAY_ERR_INVALID (nothing written) when vocab < 1, n_top < 0, a token is
 * outside [0, vocab) or a logprob is NaN or +inf.
 */
enum assay_status assay_divergence_kld(const double *lsm, int32_t vocab,
                                     const struct assay_divergence_top *top, int32_t n_top,
                                     double *kld);

/*
 * Record one position: its KLD (when n_top > 0), the |s_t - o_t| of each of
 * the n_top values, and whether the implementation's chosen token is the
 * oracle's (top1_agrees; the caller decides what "the oracle's" means, e.g.
 * the best token other than a banned EOS). Returns ASSAY_OK;
 * ASSAY_ERR_INVALID as assay_divergence_kld; ASSAY_ERR_NOMEM. On an error
 * nothing of the position is recorded.
 */
enum assay_status assay_divergence_add(struct assay_divergence *acc, const double *lsm, int32_t vocab,
                                     const struct assay_divergence_top *top, int32_t n_top,
                                     bool top1_agrees);

/*
 * The summary of everything added so far, named `name` (truncated to fit).
 * Quantiles are nearest-rank (assay_percentile_nearest_rank); the mean sums
 * the values in ascending order. Sorts the accumulator's values in place,
 * so more may be added afterwards and summarised again.
 */
void assay_divergence_summarise(struct assay_divergence *acc, const char *name,
                              struct assay_divergence_summary *out);

#endif
