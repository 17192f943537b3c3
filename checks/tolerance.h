/*
 * tolerance.h - tests whose null is a set: "the engine's distribution is
 * within a distance delta of the oracle's" (a numerics budget), not "equal
 * to it".
 *
 * An engine that computes in other formats than the oracle (llama.cpp's F16
 * cache, its quantized activations) samples from a distribution a little
 * away from the oracle's, and that is correct. A test of the point null
 * q = p at level alpha rejects such an engine with a probability that grows
 * with the sample, to 1: its alpha then bounds nothing. These tests take
 * H0: d(q, p) <= delta and keep P(reject) <= alpha for EVERY q inside that
 * set, at any sample size; each is a union bound over Hoeffding's
 * inequality, so it needs no asymptotics and holds for the dependent PIT
 * values of whole sequences too (Azuma-Hoeffding). With delta = 0 they
 * remain valid tests of the point null, but weaker than the chi-squared
 * and KS tests of stats.h, which the checks use there.
 *
 * Distances:
 *  - TV on bins fixed before sampling (assay_tv_bins): the total-variation
 *    distance between the engine's and the oracle's bin probabilities,
 *    max over events A of q(A) - p(A); it is at most the TV over tokens,
 *    so a null stated in token TV implies it.
 *      One sample of n: T = TV(q_n, p). For one event A, q_n(A) - q(A) is
 *      a mean of n independent terms of range 1, so P(q_n(A) - q(A) >= e)
 *      <= exp(-2 n e^2); over the 2^m - 2 events of m bins that are neither
 *      empty nor everything, P(TV(q_n, q) >= e) <= (2^m - 2) exp(-2 n e^2)
 *      (Weissman et al. 2003). Under H0,
 *      T <= TV(q, p) + TV(q_n, q) <= delta + TV(q_n, q), so rejecting when
 *      T > delta + e_alpha, e_alpha = sqrt((ln(2^m - 2) + ln(1/alpha)) / 2n),
 *      has size <= alpha; the p-value is (2^m - 2) exp(-2 n (T - delta)^2)
 *      (capped at 1; 1 when T <= delta).
 *      Two samples a (n1) and b (n2): T = TV(a_n, b_n); for one event the
 *      difference of the two means has n1 terms of range 1/n1 and n2 of
 *      range 1/n2, so the same holds with n replaced by
 *      n_eff = n1 n2 / (n1 + n2).
 *  - The CDF distance of PIT values on a grid (assay_cdf_tolerance): with
 *    u_i = F(x_i-) + V p(x_i) under the oracle's conditional distribution
 *    p_i at position i and the engine's q_i, P(u_i <= s | past) = G_i(s)
 *    with |G_i(s) - s| <= TV(q_i, p_i) (G_i(s) - s = sum_x (q_i - p_i)(x)
 *    h_x(s), h_x in [0, 1]). So for each s, F_n(s) - s = M_n(s) / n +
 *    mean_i (G_i(s) - s), M_n a martingale with increments in a range of
 *    length 1 and the second term at most the mean TV; Azuma-Hoeffding and
 *    a union over the grid's s_j = j / G, j = 1 .. G-1, and both signs give
 *    rejecting when D = max_j |F_n(s_j) - s_j| > delta + e_alpha with
 *    e_alpha = sqrt((ln(2 (G - 1)) + ln(1/alpha)) / 2n) size <= alpha under
 *    H0: mean_i TV(q_i, p_i) <= delta. The positions may depend on each
 *    other (a sequence's tokens do); n must be fixed in advance.
 *  - The same within groups of positions whose group is fixed by the
 *    context before the token is drawn (assay_cdf_tolerance_groups): a
 *    group's count N_g is random, so Hoeffding's bound for a fixed n does
 *    not apply; exp(lambda M - lambda^2 N_g / 8) is a supermartingale, and
 *    with lambda chosen for a planned group size n_star (fixed in advance)
 *    the event N_g (|F_g(s) - s| - delta_g) >= sqrt(ln(K/a) n_star / 8)
 *    (1 + N_g / n_star) has probability <= a / K (Ville's inequality); at
 *    N_g = n_star this is Hoeffding's threshold. K counts the groups, grid
 *    points and signs of the union. H0: in every group the mean TV is at
 *    most that group's delta_g.
 *
 * Power: an alternative at distance delta + x (an event, or a grid point,
 * where q moves by that much) is rejected unless the sample moves the other
 * way by x - e_alpha, which by the same inequality has probability at most
 * exp(-2 n (x - e_alpha)^2); so every alternative at distance delta +
 * min_excess, min_excess = e_alpha + sqrt(ln(1 / (1 - power)) / 2n), is
 * rejected with probability >= power. A lower bound, not an estimate: the
 * union bound makes these tests conservative, as calibration shows.
 *
 * The interval: |T - d(q, p)| <= TV(q_n, q) (or the grid's deviation), so
 * T -/+ e at e = e_{0.05} is a 95% confidence interval for the distance on
 * the bins (the grid), clipped to [0, 1].
 *
 * Nothing here keeps state between calls; scratch goes through
 * core/alloc.h and is released on every path (ASSAY_ERR_NOMEM).
 * References: Hoeffding, JASA 58 (1963); Azuma, Tohoku Math. J. 19 (1967);
 * Weissman, Ordentlich, Seroussi, Verdu and Weinberger, HP Labs
 * HPL-2003-97 (2003), the L1 deviation of the empirical distribution;
 * Ville, Etude critique de la notion de collectif (1939).
 */
#ifndef ASSAY_TOLERANCE_H
#define ASSAY_TOLERANCE_H

#include <stdint.h>

#include "../core/status.h"

/* The level of the confidence interval reported beside each test. */
#define ASSAY_TOLERANCE_CI_ALPHA 0.05

/* The outcome of one tolerance test (plain data). */
struct assay_tolerance_result {
    double budget;     /* delta: the distance the null allows */
    double distance;   /* the estimate T (on the bins; on the grid) */
    double ci_lo;      /* 95% interval for the distance (see above) */
    double ci_hi;
    double threshold;  /* T beyond which H0 is rejected at alpha: budget + e_alpha */
    double p_value;    /* a valid p-value for H0 (P(p <= a) <= a for every q in H0) */
    double min_excess; /* every distance beyond budget + min_excess is rejected
                          with probability >= power */
    double alpha;
    double power;
    double n_eff;      /* n, or n1 n2 / (n1 + n2), or the planned group size */
    int64_t n;         /* samples (both samples' sum for two) */
    int32_t n_bins;    /* bins (TV) or grid intervals (CDF) */
};

/*
 * Bins for a TV test, fixed from prob[0..k) before any sample: the
 * categories of positive probability in descending order (ties: lower
 * index first), cut into consecutive runs of at least 1/max_bins of the
 * mass each (a category that heavy alone), the last run joining the one
 * before when lighter than half that; then, when any category has
 * probability 0, one bin of them all (probability 0: samples there count
 * against the engine in full). Contiguous runs of the oracle's order keep
 * the distance a temperature-like bias makes (mass moved from the head to
 * the tail); what moves inside one run is not seen. bin_of (k) gets each
 * category's bin, bin_prob (max_bins + 1) each bin's probability, *n_bins
 * their count (>= 1). order is scratch of k. max_bins in 2 .. 62.
 * ASSAY_ERR_INVALID for k < 1, a probability that is negative or not
 * finite, a sum not within 1e-9 of 1, or max_bins out of range.
 */
enum assay_status assay_tv_bins(const double *prob, int64_t k, int32_t max_bins, int64_t *order,
                                int32_t *bin_of, double *bin_prob, int32_t *n_bins);

/*
 * One sample: counts[0..n_bins) against bin_prob[0..n_bins) (both borrowed
 * for the call), H0: TV(q, p) <= budget on the bins. alpha in (0, 1),
 * alpha < power < 1, budget in [0, 1], n_bins in 1 .. 62, counts >= 0 with
 * a positive sum; else ASSAY_ERR_INVALID. *out written only on ASSAY_OK.
 */
enum assay_status assay_tv_tolerance_one(const int64_t *counts, const double *bin_prob,
                                         int32_t n_bins, double budget, double alpha,
                                         double power, struct assay_tolerance_result *out);

/* Two samples on the same bins: a[0..n_bins) and b[0..n_bins), H0:
 * TV(q_a, q_b) <= budget. The bins must be fixed independently of both
 * samples (from a known distribution). Arguments as the one-sample test,
 * each sample with a positive sum. */
enum assay_status assay_tv_tolerance_two(const int64_t *a, const int64_t *b, int32_t n_bins,
                                         double budget, double alpha, double power,
                                         struct assay_tolerance_result *out);

/*
 * The CDF distance of u[0..n) (values in [0, 1], borrowed) from U(0, 1) on
 * the grid s_j = j / grid, j = 1 .. grid-1, against a budget per grid point
 * budget[0..grid-1) (budget[j - 1] at s_j, each in [0, 1]; one value
 * everywhere is the null "the mean of the positions' TVs is at most it"):
 * H0: |mean_i (G_i(s_j) - s_j)| <= budget[j - 1] for every j. The estimate
 * and the budget reported are those of the grid point farthest beyond its
 * budget. grid in 2 .. 1000, n >= 1; else ASSAY_ERR_INVALID.
 */
enum assay_status assay_cdf_tolerance(const double *u, int64_t n, int32_t grid,
                                      const double *budget, double alpha, double power,
                                      struct assay_tolerance_result *out);

/*
 * The same within n_groups groups (group[i] in 0 .. n_groups-1 for every i;
 * a value outside is ignored), group g against budget[g * (grid - 1) ..],
 * each on the grid j / grid, with the planned group size n_star > 0 (fixed before any
 * sample, e.g. n / n_groups for groups at quantiles): the union over
 * groups, grid points and signs. *out holds the group with the smallest
 * p-value (distance and budget are that group's; n its size, n_eff
 * n_star); *worst_group that group (may be NULL). A group with no value
 * adds nothing. n_groups in 1 .. 16.
 */
enum assay_status assay_cdf_tolerance_groups(const double *u, const int8_t *group, int64_t n,
                                             int32_t n_groups, const double *budget,
                                             double n_star, int32_t grid, double alpha,
                                             double power, struct assay_tolerance_result *out,
                                             int32_t *worst_group);

#endif
