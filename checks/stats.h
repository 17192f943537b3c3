/*
 * stats.h - the statistics under the distributional check family.
 *
 * What the checks need and GSL 2.7 lacks or leaves to the caller: the
 * Kolmogorov distribution (one-sample two-sided KS), the noncentral
 * chi-squared upper tail, the power of a chi-squared test and the minimum
 * total-variation distance it detects, Pearson goodness of fit against an
 * exact distribution on bins fixed before sampling, 2 x k homogeneity, Holm's
 * step-down procedure and central binomial acceptance intervals.
 *
 * Use: call assay_stats_init() once before anything else here (it turns
 * GSL's abort-on-error handler off; every GSL result is then checked). Every
 * function returns an enum assay_status and writes its results through
 * pointers; on an error nothing is written through the result pointers unless
 * the function says otherwise. Arguments are checked: NaN, infinities where a
 * finite number is needed, sizes <= 0, and levels outside (0, 1) give
 * ASSAY_ERR_INVALID. ASSAY_ERR_NUMERIC means a GSL routine failed or
 * returned a non-finite value; ASSAY_ERR_NOMEM an allocation failed (every
 * allocation goes through core/alloc.h and is released on every path).
 * Nothing here keeps state between calls except GSL's handler, so every
 * function is safe to call from several threads at once once
 * assay_stats_init() has returned.
 *
 * Figures and formulas: the project's notes, shared/notes/statistics.md.
 */
#ifndef ASSAY_STATS_H
#define ASSAY_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/*
 * Turns GSL's error handler off (gsl_set_error_handler_off), once per
 * process; later calls do nothing. Call it before any other function here
 * and before starting threads. Always returns ASSAY_OK.
 */
enum assay_status assay_stats_init(void);

/* ---- Kolmogorov distribution ------------------------------------------ */

/*
 * The p-value of the one-sample two-sided Kolmogorov-Smirnov statistic:
 * *p = P(D_n >= d) for D_n = sup |F_n - F| of n i.i.d. draws from a
 * continuous F. Exact limits: d <= 1/(2n) gives 1 (D_n >= 1/(2n) always),
 * d >= 1 gives 0. Otherwise the method is chosen for accuracy and cost:
 *
 *  - the tail (n <= 10^6 and 2 P(D_n+ >= d) <= 1e-3): twice the exact
 *    one-sided Smirnov probability (assay_ks_pvalue_one_sided). The two
 *    differ by P(D_n+ >= d and D_n- >= d), which is 0 for d >= 1/2 and
 *    otherwise far smaller than the p-value (relative 1e-9 or less at
 *    p <= 1e-3, measured against the exact method for n = 5 .. 1000); this
 *    keeps the relative accuracy of tiny p-values that 1 - CDF loses.
 *  - when cheap: the exact Marsaglia-Tsang-Wang matrix power
 *    (assay_ks_pvalue_exact), about 13 correct digits of the CDF; cheap means
 *    m = 2 floor(n d) + 1 with m^3 times the number of matrix products
 *    (about 1.3 log2 n) at most 4e8 multiply-adds (~0.2 s optimised, ~1 s
 *    unoptimised), k <= 500 and n <= 10^7;
 *  - otherwise Stephens' asymptotic series (assay_ks_pvalue_asymptotic).
 *    The budget leaves it only n above ~6,000, and there only near
 *    p ~ 1e-3, widening to the body of the distribution for n over ~40,000
 *    and to all of it over ~2e5. Measured against the exact method where it
 *    takes over, its error is below 2e-5 for p <= 0.05 and below 7e-4 in
 *    the body (n = 40,000, p ~ 0.7), and it falls like 1/sqrt(n).
 * Returns ASSAY_ERR_INVALID for n < 1 or NaN d, ASSAY_ERR_NOMEM.
 */
enum assay_status assay_ks_pvalue(int64_t n, double d, double *p);

/*
 * P(D_n >= d) = 1 - K(n, d) with K(n, d) = P(D_n < d) computed exactly by
 * Marsaglia, Tsang & Wang, "Evaluating Kolmogorov's distribution", J. Stat.
 * Software 8(18), 2003: K(n, d) = n!/n^n (H^n)_{kk} for the m x m matrix H,
 * k = floor(n d) + 1, m = 2k - 1, with H^n formed by repeated squaring and
 * the overflow carried in a separate binary exponent (MTW report 13-15
 * correct digits of the CDF). p = 1 - K has an absolute error of about
 * 1e-15 (measured), so p below ~1e-10 loses relative accuracy; use
 * assay_ks_pvalue for tails. Cost O(m^3 log n) time, 3 m^2 doubles.
 * Returns ASSAY_ERR_UNSUPPORTED when k > 500 or n > 10^7 (too costly),
 * ASSAY_ERR_INVALID for n < 1 or NaN d, ASSAY_ERR_NOMEM.
 */
enum assay_status assay_ks_pvalue_exact(int64_t n, double d, double *p);

/*
 * P(D_n >= d) by Stephens' modification of Kolmogorov's limit (Stephens
 * 1970, JRSS B 32; also Press et al., Numerical Recipes, 14.3):
 * lambda = (sqrt(n) + 0.12 + 0.11/sqrt(n)) d and
 * p = 2 sum_{j>=1} (-1)^{j-1} exp(-2 j^2 lambda^2), summed until a term is
 * below 1e-17 of the sum; for lambda < 1 the equivalent Jacobi theta form
 * 1 - sqrt(2 pi)/lambda sum_{j>=1} exp(-(2j-1)^2 pi^2 / (8 lambda^2)) is
 * used, which converges there. Clamped to [0, 1]. An approximation whose
 * error falls like 1/sqrt(n) and is tuned for the upper tail: measured
 * against the exact method, the largest absolute error is 4.1e-3 at n = 1000
 * and 1.9e-3 at n = 5000, both in the body (p ~ 0.7), but below 1e-3 at
 * n = 1000 wherever p <= 0.2 (below 1e-4 for p <= 0.07); Kolmogorov's
 * uncorrected limit is about twice as far off. Returns ASSAY_ERR_INVALID
 * for n < 1 or NaN d.
 */
enum assay_status assay_ks_pvalue_asymptotic(int64_t n, double d, double *p);

/*
 * The one-sided Smirnov tail *p = P(D_n+ >= d), D_n+ = sup (F_n - F), exact
 * by the Birnbaum-Tingey (1951) sum
 *   P = d sum_{j=0}^{floor(n(1-d))} C(n,j) (1-d-j/n)^(n-j) (d+j/n)^(j-1),
 * whose terms are all positive, evaluated in logarithms (log C(n, j) from
 * gsl_sf_lnchoose_e): relative error about eps n log n (1e-9 at n = 10^6).
 * d <= 0 gives 1, d >= 1 gives 0. D_n- has the same distribution. Cost
 * O(n). Returns ASSAY_ERR_UNSUPPORTED for n > 10^7, ASSAY_ERR_INVALID for
 * n < 1 or NaN d, ASSAY_ERR_NUMERIC when GSL fails.
 */
enum assay_status assay_ks_pvalue_one_sided(int64_t n, double d, double *p);

/*
 * The KS test of u[0..n) against Uniform(0, 1): sorts a copy and computes
 * D_n = max(D+, D-), D+ = max_i (i/n - u_(i)), D- = max_i (u_(i) - (i-1)/n)
 * (1-based i), then *p = assay_ks_pvalue(n, D_n). u is borrowed for the
 * call. Either of d and p may be NULL. Returns ASSAY_ERR_INVALID for n == 0
 * or a value outside [0, 1] or NaN, ASSAY_ERR_NOMEM.
 */
enum assay_status assay_ks_uniform(const double *u, size_t n, double *d, double *p);

/* ---- Noncentral chi-squared and power --------------------------------- */

/*
 * The upper tail *q = P(X > x) of the noncentral chi-squared distribution
 * with df > 0 degrees of freedom and noncentrality lambda >= 0 (X = sum of
 * df squared unit normals with means mu_i, lambda = sum mu_i^2). Method: the
 * Poisson mixture sum_j Poisson(j; lambda/2) Q_chisq(x; df + 2j) with
 * Q_chisq from gsl_cdf_chisq_Q, summed outward from the Poisson mode until
 * the remaining Poisson mass, bounded by a geometric series on each side, is
 * below 1e-14; the weights come from the mode's by their ratios and are
 * divided by their sum, so the mode weight's rounding (large for large
 * lambda) cancels. Absolute error about 1e-14 plus GSL's; lambda = 0 equals
 * gsl_cdf_chisq_Q. x <= 0 gives 1, x = +inf gives 0. Cost about
 * 16 sqrt(lambda/2) + 10 calls of gsl_cdf_chisq_Q. Returns
 * ASSAY_ERR_INVALID for NaN, df <= 0 or not finite, lambda < 0 or not
 * finite; ASSAY_ERR_UNSUPPORTED for lambda > 1e8 (too slow);
 * ASSAY_ERR_NUMERIC when GSL fails.
 */
enum assay_status assay_ncchisq_Q(double x, double df, double lambda, double *q);

/*
 * The noncentrality *lambda at which a level-alpha Pearson chi-squared test
 * with df degrees of freedom has the given power: with c =
 * gsl_cdf_chisq_Qinv(alpha, df), the root of assay_ncchisq_Q(c, df, l) =
 * power, found by the Illinois variant of regula falsi inside a bracket to a
 * relative 1e-9. Requires 0 < alpha < power < 1 and df >= 1 (else
 * ASSAY_ERR_INVALID); ASSAY_ERR_NUMERIC when GSL fails or no root is found
 * below lambda = 1e8. Figures: statistics.md ("Sample size").
 */
enum assay_status assay_chisq_lambda_for_power(double alpha, int32_t df, double power,
                                               double *lambda);

/*
 * The smallest total-variation distance, on the bins, that a level-alpha
 * chi-squared test with df degrees of freedom on n samples detects with at
 * least the given power: *tv = sqrt(lambda* / n) / 2, since the
 * noncentrality is n w^2 with w^2 = sum (q - p)^2 / p >= (2 TV)^2
 * (Cauchy-Schwarz). The bound is reached only by the worst-case
 * alternative, |q - p|/p constant. It rests on the noncentral chi-squared
 * law of X^2, which is asymptotic: at finite n an alternative that moves
 * mass out of |B| small bins into |A| < |B| large ones has E[X^2] short of
 * df + n w^2 by about 2 TV (|B| - |A|), and so a little less power than
 * stated (measured with 43 bins, 36 losing mass to 7, n = 5,000: 0.987
 * instead of 0.99 at TV = min_tv; 0.79 instead of 0.83 at TV 0.05). A value above 1 means no alternative is
 * guaranteed to be detected. n > 0 and finite; other arguments as
 * assay_chisq_lambda_for_power.
 */
enum assay_status assay_min_detectable_tv(double alpha, int32_t df, double power, double n,
                                          double *tv);

/* ---- Chi-squared goodness of fit and homogeneity ---------------------- */

/*
 * Bins for a goodness-of-fit test, fixed from the exact distribution before
 * sampling. Plain data, read-only after assay_gof_bins_make; owned by the
 * caller, who frees it with assay_gof_bins_free.
 *
 * Categories are ordered by descending probability (ties: lower index
 * first). Bins 0, 1, ... are the categories with n p >= min_expected, one
 * each, in that order; the other categories with p > 0 are pooled into one
 * tail bin after them, unless the tail's expected count n p_tail is below
 * min_expected, in which case the tail joins the last (smallest) own bin.
 * Categories with p == 0 are impossible: no bin (bin_of -1); a sample there
 * is a hard failure (see assay_gof_test).
 */
struct assay_gof_bins {
    int32_t k;           /* number of categories */
    int32_t n_bins;      /* number of bins, >= 1 when any category is possible */
    int32_t *bin_of;     /* (k) the bin of each category; -1 = impossible (p == 0) */
    double *prob;        /* (n_bins) expected probability of each bin */
    int32_t n_own;       /* bins 0 .. n_own-1 hold a single category each, unless merged */
    int32_t tail_bin;    /* the bin holding the pooled tail; -1 when nothing was pooled */
    int32_t n_pooled;    /* categories in the tail (p > 0, n p < min_expected) */
    int32_t n_impossible_categories; /* categories with p == 0 */
    double n;            /* the sample size the bins were made for */
    double min_expected; /* the smallest expected count asked for */
    int32_t top;         /* the most likely category (-1: none possible) */
    double top_prob;     /* its probability */
};

/*
 * Makes the bins for prob[0..k) (borrowed for the call) and a planned
 * sample size n. Requires k >= 1, every prob finite and >= 0, |sum - 1| <=
 * 1e-9 (no silent renormalisation), n > 0 and min_expected >= 0, all finite;
 * else ASSAY_ERR_INVALID. On success *out owns a new struct (free with
 * assay_gof_bins_free); on failure *out is set to NULL. ASSAY_ERR_NOMEM.
 */
enum assay_status assay_gof_bins_make(const double *prob, int32_t k, double n,
                                      double min_expected, struct assay_gof_bins **out);

/* Frees bins from assay_gof_bins_make; NULL is a no-op. */
void assay_gof_bins_free(struct assay_gof_bins *bins);

/*
 * The outcome of one chi-squared test. When `degenerate` is set no test was
 * made (fewer than two bins, or no sample on a possible category):
 * statistic, p_value and min_tv are NaN, never a made-up value; the caller
 * decides what that means for the check.
 */
struct assay_test_result {
    double alpha;         /* the level the test was asked for */
    double power;         /* the power min_tv refers to */
    double statistic;     /* Pearson X^2 over the bins */
    double p_value;       /* P(chi^2_df >= statistic), gsl_cdf_chisq_Q */
    double min_tv;        /* TV detected with probability >= power, asymptotically
                             (assay_min_detectable_tv) */
    double n_eff;         /* the sample size min_tv is computed for */
    int64_t n;            /* samples: all counts (GOF), n1 + n2 (homogeneity) */
    int32_t df;           /* bins - 1 */
    int32_t n_bins;       /* bins actually used */
    int64_t n_impossible; /* GOF: samples on categories of probability 0; > 0 fails the check */
    int64_t n_missing;    /* GOF: samples outside the bins counted against them
                             (assay_gof_test_missing); 0 otherwise */
    bool degenerate;      /* no test possible; see above */
    bool one_bin;         /* one bin (near-deterministic: every other category
                             pooled): an exact test of the samples off the most
                             likely category, statistic their count (the
                             binomial, assay_gof_test_one_bin; Fisher's,
                             assay_homogeneity_test_one_bin) */
};

/*
 * Pearson's chi-squared goodness of fit of counts[0..k) (per category, k as
 * the bins were made; borrowed for the call) against the bins' expected
 * probabilities. With n_possible the total count on possible categories:
 * X^2 = sum_b (O_b - n_possible P_b)^2 / (n_possible P_b), df = n_bins - 1,
 * p_value = gsl_cdf_chisq_Q(X^2, df), min_tv for n_eff = n_possible.
 * out->n counts every sample, out->n_impossible those on impossible
 * categories (not part of X^2). The bins' expected counts refer to the
 * planned n; a different actual n is used as it is. alpha in (0, 1) and
 * alpha < power < 1, counts >= 0, else ASSAY_ERR_INVALID.
 * ASSAY_ERR_NUMERIC when GSL fails. *out is written only on ASSAY_OK.

 */
enum assay_status assay_gof_test(const struct assay_gof_bins *bins, const int64_t *counts,
                                 double alpha, double power, struct assay_test_result *out);

/*
 * assay_gof_test with n_missing more samples that belong to no bin and
 * are not impossible either: samples the caller accepts (no hard failure)
 * on categories of expected probability 0, such as a token the tie rule
 * drops from a cut that is an exact tie (distributional.h). They count
 * against the bins: with N = n_possible + n_missing,
 * X^2 = sum_b (O_b - N P_b)^2 / (N P_b), df = n_bins - 1, min_tv for
 * n_eff = N. Where a correct engine never samples such a category
 * (n_missing is 0), X^2 is Pearson's statistic and its null distribution
 * is the usual one; an engine that moves mass m onto them leaves every
 * bin short and gives a noncentrality of at least N m^2 (Cauchy-Schwarz on
 * sum_b (P_b - q_b) = m), so such a bias is detected with the stated power
 * once m reaches twice min_tv. out->n counts every sample; out->n_missing
 * those. Arguments and returns as assay_gof_test; n_missing >= 0.
 */
enum assay_status assay_gof_test_missing(const struct assay_gof_bins *bins,
                                         const int64_t *counts, int64_t n_missing, double alpha,
                                         double power, struct assay_test_result *out);

/*
 * One bin is no chi-squared (assay_gof_test_missing says degenerate): the
 * distribution is near-deterministic, the most likely category holding all
 * but a tail expected fewer than min_expected times. This is the exact
 * test for it: X, the samples off the most likely category (those missing
 * included), is Binomial(n_possible, q) with q = 1 - top_prob under the
 * null; p_value = min(1, 2 min(P(X >= x), P(X <= x))) (two-sided, GSL's
 * binomial CDF), statistic = x, df 1, one_bin set; min_tv is the smallest
 * mass d moved off the top category that takes X to the upper critical
 * count (the least c with P(X >= c) <= alpha / 2 under q) with probability
 * >= power, by bisection. Its level is exact, not asymptotic. The same
 * arguments as assay_gof_test_missing; ASSAY_ERR_INVALID also when the
 * bins are not one bin.
 */
enum assay_status assay_gof_test_one_bin(const struct assay_gof_bins *bins,
                                         const int64_t *counts, int64_t n_missing, double alpha,
                                         double power, struct assay_test_result *out);

/*
 * Pearson's 2 x k test that a[0..k) and b[0..k) (counts per category,
 * borrowed for the call) come from the same distribution. Categories are
 * ordered by descending combined count a + b (ties: lower index first);
 * each whose smaller expected cell, min(n1, n2) c / N, is >= min_expected
 * is its own bin, the other categories with c > 0 are pooled into a tail bin,
 * which joins the last own bin when its smaller expected cell is below
 * min_expected; categories with c == 0 take no part. The bins depend on the
 * data only through the column totals, on which the null distribution is
 * conditioned, so they keep the test valid. df = bins - 1; min_tv for
 * n_eff = n1 n2 / (n1 + n2). Degenerate when fewer than two bins remain.
 * Requires k >= 1, counts >= 0, n1 > 0, n2 > 0, alpha in (0, 1),
 * alpha < power < 1 and min_expected >= 0 finite; else ASSAY_ERR_INVALID.
 * ASSAY_ERR_NOMEM, ASSAY_ERR_NUMERIC. *out is written only on ASSAY_OK.
 */
enum assay_status assay_homogeneity_test(const int64_t *a, const int64_t *b, int32_t k,
                                         double alpha, double power, double min_expected,
                                         struct assay_test_result *out);

/*
 * One bin is no chi-squared (assay_homogeneity_test says degenerate): both
 * samples near-deterministic on one category. This is Fisher's exact test
 * of the 2 x 2 table (the most frequent category, the rest) of a and b:
 * given the margins, sample a's count off the top is hypergeometric;
 * p_value = min(1, 2 min(P(X <= x1), P(X >= x1))) (GSL's hypergeometric
 * CDF), statistic = x1, df 1, one_bin set. Its level is exact; min_tv is
 * approximate: the normal approximation of two proportions at the pooled
 * rate off the top (at least 1 / (n1 + n2)), (z(1 - alpha/2) + z(power))
 * sqrt(q (1 - q) (1/n1 + 1/n2)). The arguments as assay_homogeneity_test's.
 */
enum assay_status assay_homogeneity_test_one_bin(const int64_t *a, const int64_t *b, int32_t k,
                                                 double alpha, double power,
                                                 struct assay_test_result *out);

/*
 * The bins assay_homogeneity_test makes for a[0..k) and b[0..k), as plain
 * data for a reader (the report's evidence): bin_of per category (-1: no
 * sample in either), prob the combined share (a + b) / (n1 + n2) of each
 * bin, n = n1 + n2, n_own, tail_bin and n_pooled as for a goodness of fit.
 * Same requirements on a, b, k and min_expected as the test, else
 * ASSAY_ERR_INVALID; ASSAY_ERR_NOMEM. *out as assay_gof_bins_make.
 */
enum assay_status assay_homogeneity_bins_make(const int64_t *a, const int64_t *b, int32_t k,
                                              double min_expected, struct assay_gof_bins **out);

/* ---- Multiple testing and binomial bounds ----------------------------- */

/*
 * Holm's step-down procedure (Holm 1979, Scand. J. Statist. 6): with the
 * p-values sorted ascending (ties: lower index first), reject while
 * p_(i) <= alpha / (m - i) (0-based i) and stop at the first that is not.
 * Holds the family-wise error at alpha under any dependence. reject[0..m)
 * follows the order of p. m == 0 is an empty family (nothing written).
 * Requires every p in [0, 1], m <= INT32_MAX and alpha in (0, 1), else
 * ASSAY_ERR_INVALID; ASSAY_ERR_NOMEM. reject is left unwritten on error.
 */
enum assay_status assay_holm(const double *p, size_t m, double alpha, bool *reject);

/*
 * Holm-adjusted p-values: p_adj_(i) = max_{j <= i} min(1, (m - j) p_(j)) in
 * the sorted order, written back in the order of p; a hypothesis is rejected
 * by assay_holm at level alpha exactly when p_adj <= alpha (up to rounding
 * at the boundary). Monotone in the sorted order and capped at 1. Same
 * requirements and errors as assay_holm; p_adj may not alias p.
 */
enum assay_status assay_holm_adjusted(const double *p, size_t m, double *p_adj);

/*
 * The central acceptance interval [*lo, *hi] of a Binomial(n, p) count at
 * level alpha: *lo is the smallest count with P(X <= lo) > alpha/2 and *hi
 * the smallest with P(X > hi) <= alpha/2, from gsl_cdf_binomial_P/Q, so
 * P(X < lo) <= alpha/2 and P(X > hi) <= alpha/2 and the interval is the
 * shortest central one. Used to judge a false-alarm count in calibration.
 * Requires 0 <= n <= UINT_MAX (GSL's range), p in [0, 1], alpha in (0, 1);
 * else ASSAY_ERR_INVALID. ASSAY_ERR_NUMERIC when GSL fails.
 */
enum assay_status assay_binomial_two_sided_bound(int64_t n, double p, double alpha,
                                                 int64_t *lo, int64_t *hi);

#endif
