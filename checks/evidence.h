/*
 * evidence.h - recording what a distributional check saw (the bins of its
 * chi-squared test, the histogram of its PIT values) into the result's
 * fixed-size evidence (checks/result.h), for the report to draw.
 *
 * Use: after a test, call the function for its kind on res->evidence. They
 * only read their arguments (borrowed for the call) and return nothing: a
 * test with more bins than ASSAY_EVIDENCE_MAX_BINS keeps its largest bins
 * and its pooled tail and folds the rest into one bin.
 */
#ifndef ASSAY_EVIDENCE_H
#define ASSAY_EVIDENCE_H

#include <stdint.h>

#include "result.h"
#include "stats.h"

/*
 * The bins of a goodness-of-fit test: counts[0..bins->k) per category as
 * given to assay_gof_test, expected counts from n_possible (the samples on
 * possible categories). pair_vocab > 0 when the categories are pairs
 * x0 * pair_vocab + x1 (labels "(x0, x1)"), 0 for single tokens.
 */
void assay_evidence_gof(struct assay_evidence *ev, const struct assay_gof_bins *bins,
                        const int64_t *counts, int64_t n_possible, int32_t pair_vocab);

/*
 * The bins of assay_homogeneity_test over the two samples' counts per
 * category a[0..k) and b[0..k) at min_expected (assay_homogeneity_bins_make);
 * pair_vocab as above. The one function here that allocates: out of memory
 * or arguments the test refuses leave ev->kind NONE (no plot; the check's
 * verdict never depends on its evidence).
 */
void assay_evidence_homogeneity(struct assay_evidence *ev, const int64_t *a, const int64_t *b,
                                int32_t k, double min_expected, int32_t pair_vocab);

/*
 * The bins of a tolerance test on TV (checks/tolerance.h, assay_tv_bins):
 * order[0..n_pos) the positive categories in the bins' order and bin_of
 * each category's bin, bin_prob[0..n_bins), a[0..n_bins) the engine's
 * counts per bin; b (NULL for one sample) the second engine's. Expected counts: the
 * oracle's n P for one sample, the first engine's count were both samples
 * from one distribution for two. A bin of one token is labelled by it, a
 * run by its first token and how many more it holds ("17 + 12 more"; the
 * last run is marked pooled), the bin of tokens of probability 0 "p = 0".
 */
void assay_evidence_tv(struct assay_evidence *ev, const int64_t *order, int64_t n_pos,
                       const int32_t *bin_of, const double *bin_prob, int32_t n_bins,
                       const int64_t *a, const int64_t *b, int32_t pair_vocab);

/* The histogram of u[0..n) (values in [0, 1]) and their KS distance d. */
void assay_evidence_pit(struct assay_evidence *ev, const double *u, int64_t n, double d);

#endif
