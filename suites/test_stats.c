/* Unit tests of checks/stats: the Kolmogorov distribution, the noncentral
 * chi-squared tail and power, goodness of fit and homogeneity with their
 * pooling, Holm and binomial bounds. Known values where they exist, Monte
 * Carlo calibration and power where they do not, and every error path. All
 * seeds are fixed; a failure is a real defect (or a one-in-a-million draw
 * that stays failed until the code or the seed is changed on purpose). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "checks/stats.h"
#include "core/alloc.h"
#include "core/status.h"
#include "support.h"

#define K60 60

/* |got - ref| <= atol + rtol |ref|, printing both on failure. */
static bool close_to(const char *what, double got, double ref, double atol, double rtol)
{
    double diff = fabs(got - ref);
    bool ok = diff <= atol + rtol * fabs(ref);
    if (!ok) {
        printf("  %s: got %.17g, expected %.17g, |diff| %.3g > %.3g + %.3g * |ref|\n", what, got,
               ref, diff, atol, rtol);
    }
    return ok;
}

static gsl_rng *new_rng(unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    assert_non_null(r);
    gsl_rng_set(r, seed);
    return r;
}

/* The known 60-category distribution: weights 0.9^r with r = 7 i mod 60 (so
 * the order is scrambled), and four impossible categories 7, 22, 37, 52. */
static void dist60(double *p)
{
    double total = 0.0;
    for (int i = 0; i < K60; i++) {
        p[i] = (i % 15 == 7) ? 0.0 : pow(0.9, (double)((7 * i) % K60));
        total += p[i];
    }
    for (int i = 0; i < K60; i++) {
        p[i] /= total;
    }
}

/* n draws from the table into counts[0..k) (cleared first). */
static void draw_counts(gsl_rng *r, const gsl_ran_discrete_t *table, int k, int64_t n,
                        int64_t *counts)
{
    memset(counts, 0, (size_t)k * sizeof *counts);
    for (int64_t i = 0; i < n; i++) {
        counts[gsl_ran_discrete(r, table)]++;
    }
}

/* Pass when count lies in the central binomial interval at level alpha. */
static bool count_in_bounds(const char *what, int64_t count, int64_t n, double p, double alpha)
{
    int64_t lo, hi;
    assert_int_equal(assay_binomial_two_sided_bound(n, p, alpha, &lo, &hi), ASSAY_OK);
    printf("  %s: %lld of %lld (expected %.1f, accepted %lld..%lld)\n", what, (long long)count,
           (long long)n, p * (double)n, (long long)lo, (long long)hi);
    return count >= lo && count <= hi;
}

/* ---- Kolmogorov distribution ------------------------------------------ */

static void test_ks_known_values(void **state)
{
    (void)state;
    double p;
    /* MTW 2003's example: K(10, 0.274) = P(D_10 < 0.274). */
    assert_int_equal(assay_ks_pvalue_exact(10, 0.274, &p), ASSAY_OK);
    printf("  K(10, 0.274) = %.16f (MTW: 0.6284796154565043)\n", 1.0 - p);
    assert_true(close_to("MTW example", 1.0 - p, 0.6284796154565043, 1e-14, 0.0));
    assert_int_equal(assay_ks_pvalue(10, 0.274, &p), ASSAY_OK);
    assert_true(close_to("MTW example via dispatch", 1.0 - p, 0.6284796154565043, 1e-14, 0.0));

    /* Closed forms: P(D_n < d) = n! (2d - 1/n)^n for 1/(2n) < d <= 1/n, and
     * P(D_n >= d) = 2 (1 - d)^n for 1 - 1/n <= d < 1. */
    assert_int_equal(assay_ks_pvalue_exact(3, 0.25, &p), ASSAY_OK);
    assert_true(close_to("n=3 d=1/4", p, 1.0 - 6.0 * pow(0.5 - 1.0 / 3.0, 3), 1e-14, 0.0));
    assert_int_equal(assay_ks_pvalue_exact(2, 0.75, &p), ASSAY_OK);
    assert_true(close_to("n=2 d=3/4", p, 0.125, 1e-14, 0.0));
    assert_int_equal(assay_ks_pvalue(1, 0.7, &p), ASSAY_OK);
    assert_true(close_to("n=1 d=0.7", p, 0.6, 1e-14, 0.0));
    assert_int_equal(assay_ks_pvalue(20, 0.97, &p), ASSAY_OK);
    assert_true(close_to("n=20 d=0.97", p, 2.0 * pow(0.03, 20), 0.0, 1e-9));

    /* One-sided: P(D_1+ >= d) = 1 - d; and for d >= 1/2 the two-sided tail
     * is exactly twice the one-sided one, so the two methods must agree. */
    assert_int_equal(assay_ks_pvalue_one_sided(1, 0.3, &p), ASSAY_OK);
    assert_true(close_to("one-sided n=1", p, 0.7, 1e-15, 0.0));
    double one, exact;
    assert_int_equal(assay_ks_pvalue_one_sided(10, 0.55, &one), ASSAY_OK);
    assert_int_equal(assay_ks_pvalue_exact(10, 0.55, &exact), ASSAY_OK);
    printf("  n=10 d=0.55: exact %.15e, 2 P(D+ >= d) %.15e\n", exact, 2.0 * one);
    assert_true(close_to("2 P+ vs exact, d >= 1/2", 2.0 * one, exact, 1e-15, 1e-11));
    /* In the tail the dispatcher's 2 P+ and the exact method agree. */
    assert_int_equal(assay_ks_pvalue(1000, 1.7 / sqrt(1000.0), &p), ASSAY_OK);
    assert_int_equal(assay_ks_pvalue_exact(1000, 1.7 / sqrt(1000.0), &exact), ASSAY_OK);
    printf("  n=1000 lambda=1.7: dispatch %.12e, exact %.12e\n", p, exact);
    assert_true(close_to("tail n=1000", p, exact, 1e-13, 1e-9));
}

static void test_ks_limits(void **state)
{
    (void)state;
    const int64_t ns[] = {1, 2, 10, 1000, 100000000};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int64_t n = ns[i];
        double p;
        assert_int_equal(assay_ks_pvalue(n, 0.0, &p), ASSAY_OK);
        assert_true(p == 1.0);
        assert_int_equal(assay_ks_pvalue(n, -3.0, &p), ASSAY_OK);
        assert_true(p == 1.0);
        assert_int_equal(assay_ks_pvalue(n, 0.5 / (double)n, &p), ASSAY_OK);
        assert_true(p == 1.0);
        assert_int_equal(assay_ks_pvalue(n, 1.0, &p), ASSAY_OK);
        assert_true(p == 0.0);
        assert_int_equal(assay_ks_pvalue(n, INFINITY, &p), ASSAY_OK);
        assert_true(p == 0.0);
        assert_int_equal(assay_ks_pvalue_asymptotic(n, 0.0, &p), ASSAY_OK);
        assert_true(p == 1.0);
        if (n <= 1000) {
            assert_int_equal(assay_ks_pvalue_exact(n, 0.0, &p), ASSAY_OK);
            assert_true(p == 1.0);
            assert_int_equal(assay_ks_pvalue_exact(n, 1.0, &p), ASSAY_OK);
            assert_true(p == 0.0);
        }
    }
    /* p falls with d across every switch between methods (exact, 2 P+ in
     * the tail, Stephens for large n), with no jump larger than the
     * methods' disagreement. The ranges keep the exact method cheap. */
    const struct {
        int64_t n;
        double from, to, step;
    } grid[] = {{7, 0.2, 6.0, 0.01}, {300, 0.2, 6.0, 0.01}, {700, 1.0, 3.0, 0.05},
                {40000, 0.9, 6.0, 0.05}};
    for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++) {
        int64_t n = grid[i].n;
        double prev = 1.0;
        for (double lam = grid[i].from; lam < grid[i].to; lam += grid[i].step) {
            double p;
            assert_int_equal(assay_ks_pvalue(n, lam / sqrt((double)n), &p), ASSAY_OK);
            assert_true(p >= 0.0 && p <= 1.0);
            if (!(p <= prev + 1e-3)) {
                printf("  n=%lld lambda=%.2f: p %.6g after %.6g\n", (long long)n, lam, p, prev);
            }
            assert_true(p <= prev + 1e-3);
            prev = p;
        }
    }
}

/* Stephens's series against the exact method at n = 1000 and 5000. It is
 * built for the upper tail: there (p <= 0.2) the two agree to 1e-3; in the
 * body its error is of order 1/sqrt(n) (4.1e-3 measured at n = 1000, p ~
 * 0.7), held here to 5e-3 sqrt(1000/n). */
static void test_ks_exact_vs_asymptotic(void **state)
{
    (void)state;
    const int64_t ns[] = {1000, 5000};
    const double lambdas[] = {0.5, 0.7, 0.9, 1.0, 1.1, 1.224, 1.358, 1.628, 1.949};
    for (size_t i = 0; i < 2; i++) {
        int64_t n = ns[i];
        double worst_tail = 0.0, worst = 0.0;
        for (size_t j = 0; j < sizeof lambdas / sizeof lambdas[0]; j++) {
            double d = lambdas[j] / sqrt((double)n), pe, pa;
            assert_int_equal(assay_ks_pvalue_exact(n, d, &pe), ASSAY_OK);
            assert_int_equal(assay_ks_pvalue_asymptotic(n, d, &pa), ASSAY_OK);
            printf("  n=%lld d=%.5f exact %.6f asymptotic %.6f diff %+.2e\n", (long long)n, d, pe,
                   pa, pa - pe);
            worst = fmax(worst, fabs(pa - pe));
            if (pe <= 0.2) {
                worst_tail = fmax(worst_tail, fabs(pa - pe));
            }
        }
        printf("  n=%lld: largest |diff| %.2e overall, %.2e where p <= 0.2\n", (long long)n, worst,
               worst_tail);
        assert_true(worst_tail <= 1e-3);
        assert_true(worst <= 5e-3 * sqrt(1000.0 / (double)n));
    }
}

/* The exact method at large n, where its matrix power grows by far more
 * than one rescaling step a squaring: n = 41,606, d = 0.003 (a PIT of
 * 41,606 values, the acceptance test's size) overflowed to NaN before the
 * rescaling looped. Every (n, d) here takes the exact path and must agree
 * with Stephens' series to its stated accuracy. */
static void test_ks_exact_large_n(void **state)
{
    (void)state;
    /* Sizes past the old overflow (n near 41606 and d near 0.003); the
     * matrix is 2 n d wide, so larger n or d only costs time. */
    const int64_t ns[] = {20000, 41606};
    const double scale[] = {0.4, 0.8};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        for (size_t j = 0; j < sizeof scale / sizeof scale[0]; j++) {
            double d = scale[j] / sqrt((double)ns[i]), exact = NAN, asym = NAN, p = NAN;
            assert_int_equal(assay_ks_pvalue_exact(ns[i], d, &exact), ASSAY_OK);
            assert_int_equal(assay_ks_pvalue_asymptotic(ns[i], d, &asym), ASSAY_OK);
            assert_int_equal(assay_ks_pvalue(ns[i], d, &p), ASSAY_OK);
            assert_true(close_to("exact against asymptotic", exact, asym, 2e-3, 0.0));
            assert_true(isfinite(p) && p >= 0.0 && p <= 1.0);
        }
    }
    double p = NAN;
    assert_int_equal(assay_ks_pvalue(41606, 0.0029827372319626982, &p), ASSAY_OK);
    assert_true(close_to("n 41606, d 0.00298", p, 0.8518, 1e-3, 0.0));
}

static void test_ks_uniform_statistic(void **state)
{
    (void)state;
    double u[] = {0.6, 0.05, 0.2, 0.1};
    double d, p, p2;
    /* D+ = max(.25-.05, .5-.1, .75-.2, 1-.6) = .55, D- = .05. */
    assert_int_equal(assay_ks_uniform(u, 4, &d, &p), ASSAY_OK);
    assert_true(close_to("D", d, 0.55, 1e-15, 0.0));
    assert_int_equal(assay_ks_pvalue(4, 0.55, &p2), ASSAY_OK);
    assert_true(p == p2);
    assert_true(u[0] == 0.6 && u[1] == 0.05); /* the input is not sorted in place */
    assert_int_equal(assay_ks_uniform(u, 4, NULL, &p), ASSAY_OK);
    assert_int_equal(assay_ks_uniform(u, 4, &d, NULL), ASSAY_OK);

    /* Power: 200 draws of Beta(2, 1) (sqrt of a uniform) are far from uniform. */
    gsl_rng *r = new_rng(20240601);
    double v[200];
    for (int i = 0; i < 200; i++) {
        v[i] = sqrt(gsl_rng_uniform(r));
    }
    gsl_rng_free(r);
    assert_int_equal(assay_ks_uniform(v, 200, &d, &p), ASSAY_OK);
    printf("  Beta(2,1), n=200: D %.4f p %.3g\n", d, p);
    assert_true(p < 1e-6);

    double bad[] = {0.5, 1.5};
    assert_int_equal(assay_ks_uniform(bad, 2, &d, &p), ASSAY_ERR_INVALID);
    bad[1] = -0.1;
    assert_int_equal(assay_ks_uniform(bad, 2, &d, &p), ASSAY_ERR_INVALID);
    bad[1] = NAN;
    assert_int_equal(assay_ks_uniform(bad, 2, &d, &p), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ks_uniform(u, 0, &d, &p), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ks_uniform(NULL, 3, &d, &p), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ks_pvalue(0, 0.1, &p), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ks_pvalue(10, NAN, &p), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ks_pvalue_exact(-1, 0.1, &p), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ks_pvalue_asymptotic(10, NAN, &p), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ks_pvalue_one_sided(0, 0.1, &p), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ks_pvalue_exact(100000, 0.1, &p), ASSAY_ERR_UNSUPPORTED);
}

/* D of 50 uniforms, 20,000 times: the fraction with p <= 0.05 lies within
 * 5 binomial sigmas of 0.05, and the p-values themselves pass KS at 1e-3. */
static void test_ks_monte_carlo(void **state)
{
    (void)state;
    enum { N = 50, REPS = 20000 };
    gsl_rng *r = new_rng(987654321);
    double *pv = assay_malloc(REPS * sizeof *pv);
    assert_non_null(pv);
    double u[N];
    int64_t hits = 0;
    for (int rep = 0; rep < REPS; rep++) {
        for (int i = 0; i < N; i++) {
            u[i] = gsl_rng_uniform(r);
        }
        assert_int_equal(assay_ks_uniform(u, N, NULL, &pv[rep]), ASSAY_OK);
        hits += pv[rep] <= 0.05;
    }
    gsl_rng_free(r);
    double rate = (double)hits / REPS, sigma = sqrt(0.05 * 0.95 / REPS);
    printf("  n=%d, %d replications: P(p <= 0.05) = %.4f (5 sigma = %.4f)\n", N, REPS, rate,
           5 * sigma);
    assert_true(fabs(rate - 0.05) <= 5 * sigma);
    double d, p;
    assert_int_equal(assay_ks_uniform(pv, REPS, &d, &p), ASSAY_OK);
    printf("  KS of the p-values: D %.5f p %.4f\n", d, p);
    assay_free(pv);
    assert_true(p > 1e-3);
}

/* ---- Noncentral chi-squared and power --------------------------------- */

static void test_ncchisq_values(void **state)
{
    (void)state;
    double q;
    /* lambda = 0 is the central tail. */
    const double xs[] = {0.1, 1.0, 7.5, 30.0, 200.0};
    const double dfs[] = {1.0, 2.5, 10.0, 49.0};
    for (size_t i = 0; i < 5; i++) {
        for (size_t j = 0; j < 4; j++) {
            assert_int_equal(assay_ncchisq_Q(xs[i], dfs[j], 0.0, &q), ASSAY_OK);
            assert_true(q == gsl_cdf_chisq_Q(xs[i], dfs[j]));
        }
    }
    /* df = 1 in closed form: X = (Z + mu)^2, P(X > x) = Q(sqrt x - mu) + Q(sqrt x + mu). */
    const double lams[] = {0.3, 2.0, 9.0, 40.0, 400.0};
    for (size_t i = 0; i < 5; i++) {
        for (size_t j = 0; j < 4; j++) {
            double x = xs[j], mu = sqrt(lams[i]);
            double ref = gsl_cdf_ugaussian_Q(sqrt(x) - mu) + gsl_cdf_ugaussian_Q(sqrt(x) + mu);
            assert_int_equal(assay_ncchisq_Q(x, 1.0, lams[i], &q), ASSAY_OK);
            assert_true(close_to("df=1 closed form", q, ref, 1e-13, 1e-10));
        }
    }
    /* The Poisson weights sum to 1: as x -> 0 the tail is 1. */
    const double big[] = {0.5, 37.0, 1000.0, 1e5};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(assay_ncchisq_Q(1e-300, 3.0, big[i], &q), ASSAY_OK);
        assert_true(close_to("mass", q, 1.0, 1e-13, 0.0));
    }
    /* Monte Carlo: sum of 5 squared normals with means mu_i, 10^6 draws. */
    const double mus[5] = {1.0, 0.5, -0.5, 2.0, 0.0};
    double lambda = 0.0;
    for (int i = 0; i < 5; i++) {
        lambda += mus[i] * mus[i];
    }
    gsl_rng *r = new_rng(31337);
    const int draws = 1000000;
    const double x = 12.0;
    int64_t above = 0;
    for (int t = 0; t < draws; t++) {
        double s = 0.0;
        for (int i = 0; i < 5; i++) {
            double z = gsl_ran_gaussian_ziggurat(r, 1.0) + mus[i];
            s += z * z;
        }
        above += s > x;
    }
    gsl_rng_free(r);
    assert_int_equal(assay_ncchisq_Q(x, 5.0, lambda, &q), ASSAY_OK);
    double mc = (double)above / draws, sigma = sqrt(q * (1 - q) / draws);
    printf("  Q(12; 5, 5.5) = %.6f, Monte Carlo %.6f (5 sigma %.5f)\n", q, mc, 5 * sigma);
    assert_true(fabs(mc - q) <= 5 * sigma);

    /* Monotone: rising in lambda, falling in x. */
    double prev = 0.0;
    for (double l = 0.0; l <= 60.0; l += 0.5) {
        assert_int_equal(assay_ncchisq_Q(20.0, 7.0, l, &q), ASSAY_OK);
        assert_true(q > prev);
        prev = q;
    }
    prev = 1.0;
    for (double xx = 0.5; xx <= 100.0; xx += 0.5) {
        assert_int_equal(assay_ncchisq_Q(xx, 7.0, 12.0, &q), ASSAY_OK);
        assert_true(q < prev);
        prev = q;
    }
    assert_int_equal(assay_ncchisq_Q(-1.0, 3.0, 2.0, &q), ASSAY_OK);
    assert_true(q == 1.0);
    assert_int_equal(assay_ncchisq_Q(INFINITY, 3.0, 2.0, &q), ASSAY_OK);
    assert_true(q == 0.0);

    assert_int_equal(assay_ncchisq_Q(NAN, 3.0, 2.0, &q), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ncchisq_Q(1.0, 0.0, 2.0, &q), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ncchisq_Q(1.0, -2.0, 2.0, &q), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ncchisq_Q(1.0, 3.0, -0.1, &q), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ncchisq_Q(1.0, 3.0, NAN, &q), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ncchisq_Q(1.0, 3.0, INFINITY, &q), ASSAY_ERR_INVALID);
    assert_int_equal(assay_ncchisq_Q(1.0, 3.0, 2e8, &q), ASSAY_ERR_UNSUPPORTED);
}

/* The figures in statistics.md, to the digits given there. */
static void test_power_figures(void **state)
{
    (void)state;
    const struct {
        double alpha;
        int32_t df;
        double lambda, tol;
    } fig[] = {
        {1e-3, 1, 31.55, 0.005},
        {1e-3, 49, 79.70, 0.005},
        {1e-3, 255, 149.1, 0.05},
        {1e-6, 49, 112.34, 0.005},
    };
    for (size_t i = 0; i < sizeof fig / sizeof fig[0]; i++) {
        double lambda, q;
        assert_int_equal(assay_chisq_lambda_for_power(fig[i].alpha, fig[i].df, 0.99, &lambda),
                         ASSAY_OK);
        printf("  alpha %g df %d power 0.99: lambda* = %.6f (notes: %g)\n", fig[i].alpha,
               fig[i].df, lambda, fig[i].lambda);
        assert_true(close_to("lambda*", lambda, fig[i].lambda, fig[i].tol, 0.0));
        /* the root really gives the power */
        double crit = gsl_cdf_chisq_Qinv(fig[i].alpha, fig[i].df);
        assert_int_equal(assay_ncchisq_Q(crit, fig[i].df, lambda, &q), ASSAY_OK);
        assert_true(close_to("power at lambda*", q, 0.99, 1e-9, 0.0));
    }
    double tv;
    assert_int_equal(assay_min_detectable_tv(1e-6, 49, 0.99, 70210.0, &tv), ASSAY_OK);
    printf("  alpha 1e-6 df 49 n 70210: min TV %.6f\n", tv);
    assert_true(close_to("min TV", tv, 0.02, 1e-4, 0.0));
    assert_int_equal(assay_min_detectable_tv(1e-3, 49, 0.99, 49811.0, &tv), ASSAY_OK);
    assert_true(close_to("min TV 1e-3", tv, 0.02, 1e-4, 0.0));

    double l1, l2;
    assert_int_equal(assay_chisq_lambda_for_power(1e-3, 10, 0.9, &l1), ASSAY_OK);
    assert_int_equal(assay_chisq_lambda_for_power(1e-3, 10, 0.99, &l2), ASSAY_OK);
    assert_true(l2 > l1);

    double x;
    assert_int_equal(assay_chisq_lambda_for_power(0.0, 10, 0.99, &x), ASSAY_ERR_INVALID);
    assert_int_equal(assay_chisq_lambda_for_power(1.0, 10, 0.99, &x), ASSAY_ERR_INVALID);
    assert_int_equal(assay_chisq_lambda_for_power(NAN, 10, 0.99, &x), ASSAY_ERR_INVALID);
    assert_int_equal(assay_chisq_lambda_for_power(0.01, 0, 0.99, &x), ASSAY_ERR_INVALID);
    assert_int_equal(assay_chisq_lambda_for_power(0.01, 10, 1.0, &x), ASSAY_ERR_INVALID);
    assert_int_equal(assay_chisq_lambda_for_power(0.01, 10, 0.005, &x), ASSAY_ERR_INVALID);
    assert_int_equal(assay_min_detectable_tv(0.01, 10, 0.99, 0.0, &x), ASSAY_ERR_INVALID);
    assert_int_equal(assay_min_detectable_tv(0.01, 10, 0.99, NAN, &x), ASSAY_ERR_INVALID);
    assert_int_equal(assay_min_detectable_tv(0.01, 10, 0.99, -5.0, &x), ASSAY_ERR_INVALID);
}

/* ---- Goodness of fit ---------------------------------------------------- */

static void test_gof_pooling(void **state)
{
    (void)state;
    double p[K60];
    dist60(p);
    struct assay_gof_bins *bins;
    const double n = 5000.0;
    assert_int_equal(assay_gof_bins_make(p, K60, n, 5.0, &bins), ASSAY_OK);
    printf("  60 categories, n 5000: %d bins (%d own, tail bin %d pooling %d, %d impossible)\n",
           bins->n_bins, bins->n_own, bins->tail_bin, bins->n_pooled,
           bins->n_impossible_categories);
    assert_int_equal(bins->k, K60);
    assert_int_equal(bins->n_impossible_categories, 4);
    double total = 0.0;
    int members[K60] = {0};
    for (int i = 0; i < K60; i++) {
        if (p[i] == 0.0) {
            assert_int_equal(bins->bin_of[i], -1);
            continue;
        }
        assert_true(bins->bin_of[i] >= 0 && bins->bin_of[i] < bins->n_bins);
        members[bins->bin_of[i]]++;
        if (n * p[i] >= 5.0) {
            assert_true(bins->bin_of[i] < bins->n_own); /* a likely category is its own bin */
        } else {
            assert_int_equal(bins->bin_of[i], bins->tail_bin); /* an unlikely one is pooled */
        }
    }
    for (int b = 0; b < bins->n_bins; b++) {
        assert_true(n * bins->prob[b] >= 5.0);
        if (b != bins->tail_bin) {
            assert_int_equal(members[b], 1);
        }
        if (b > 0 && b < bins->n_own) {
            assert_true(bins->prob[b] <= bins->prob[b - 1]); /* descending */
        }
        total += bins->prob[b];
    }
    assert_true(close_to("sum of bins", total, 1.0, 1e-12, 0.0));
    assert_true(bins->tail_bin == bins->n_own && bins->n_bins == bins->n_own + 1);
    assert_true(members[bins->tail_bin] == bins->n_pooled && bins->n_pooled > 1);
    assay_gof_bins_free(bins);

    /* A tail too small for its own bin joins the smallest own bin. */
    const double q[] = {0.19, 0.5, 0.005, 0.3, 0.005};
    assert_int_equal(assay_gof_bins_make(q, 5, 100.0, 5.0, &bins), ASSAY_OK);
    assert_int_equal(bins->n_bins, 3);
    assert_int_equal(bins->bin_of[1], 0);
    assert_int_equal(bins->bin_of[3], 1);
    assert_int_equal(bins->bin_of[0], 2);
    assert_int_equal(bins->bin_of[2], 2);
    assert_int_equal(bins->bin_of[4], 2);
    assert_int_equal(bins->tail_bin, 2);
    assert_true(close_to("merged bin", bins->prob[2], 0.2, 1e-15, 0.0));
    assay_gof_bins_free(bins);

    /* Ties go to the lower index first. */
    const double t[] = {0.25, 0.25, 0.25, 0.25};
    assert_int_equal(assay_gof_bins_make(t, 4, 100.0, 5.0, &bins), ASSAY_OK);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(bins->bin_of[i], i);
    }
    assert_int_equal(bins->tail_bin, -1);
    assay_gof_bins_free(bins);

    /* Too few samples for two bins: everything pools into one. */
    assert_int_equal(assay_gof_bins_make(t, 4, 8.0, 5.0, &bins), ASSAY_OK);
    assert_int_equal(bins->n_bins, 1);
    assert_int_equal(bins->n_own, 0);
    assert_int_equal(bins->tail_bin, 0);
    assay_gof_bins_free(bins);
    assay_gof_bins_free(NULL);
}

static void test_gof_known_value(void **state)
{
    (void)state;
    const double p[] = {0.5, 0.0, 0.3, 0.2};
    struct assay_gof_bins *bins;
    assert_int_equal(assay_gof_bins_make(p, 4, 100.0, 5.0, &bins), ASSAY_OK);
    struct assay_test_result r;
    const int64_t counts[] = {40, 0, 35, 25};
    assert_int_equal(assay_gof_test(bins, counts, 1e-3, 0.99, &r), ASSAY_OK);
    /* X^2 = 10^2/50 + 5^2/30 + 5^2/20; df 2, so p = exp(-X^2/2). */
    double x2 = 2.0 + 25.0 / 30.0 + 1.25;
    printf("  X^2 %.10f (hand %.10f) p %.10f (hand %.10f)\n", r.statistic, x2, r.p_value,
           exp(-x2 / 2));
    assert_true(close_to("X^2", r.statistic, x2, 0.0, 1e-13));
    assert_true(close_to("p", r.p_value, exp(-x2 / 2.0), 0.0, 1e-12));
    assert_int_equal(r.df, 2);
    assert_int_equal(r.n, 100);
    assert_int_equal(r.n_impossible, 0);
    assert_false(r.degenerate);
    double tv;
    assert_int_equal(assay_min_detectable_tv(1e-3, 2, 0.99, 100.0, &tv), ASSAY_OK);
    assert_true(r.min_tv == tv && r.alpha == 1e-3 && r.power == 0.99);

    /* Samples on an impossible category are counted apart, not in X^2. */
    const int64_t bad[] = {40, 3, 35, 25};
    assert_int_equal(assay_gof_test(bins, bad, 1e-3, 0.99, &r), ASSAY_OK);
    assert_int_equal(r.n_impossible, 3);
    assert_int_equal(r.n, 103);
    assert_true(close_to("X^2 with impossible", r.statistic, x2, 0.0, 1e-13));

    /* Samples the caller accepts outside every bin count against the bins:
     * expected counts from all 103 (X^2 from (40, 35, 25) against 103 x
     * (0.5, 0.3, 0.2)); with none missing, Pearson's X^2 as above. */
    assert_int_equal(assay_gof_test_missing(bins, counts, 3, 1e-3, 0.99, &r), ASSAY_OK);
    double x2m = 11.5 * 11.5 / 51.5 + 4.1 * 4.1 / 30.9 + 4.4 * 4.4 / 20.6;
    printf("  with 3 missing: X^2 %.10f (hand %.10f)\n", r.statistic, x2m);
    assert_true(close_to("X^2 with missing", r.statistic, x2m, 0.0, 1e-12));
    assert_int_equal(r.n, 103);
    assert_int_equal(r.n_missing, 3);
    assert_int_equal(r.n_impossible, 0);
    assert_int_equal(r.df, 2);
    assert_int_equal(assay_gof_test_missing(bins, counts, 0, 1e-3, 0.99, &r), ASSAY_OK);
    assert_true(close_to("X^2 none missing", r.statistic, x2, 0.0, 1e-13));
    assert_int_equal(r.n_missing, 0);
    assert_int_equal(assay_gof_test_missing(bins, counts, -1, 1e-3, 0.99, &r), ASSAY_ERR_INVALID);

    /* Only impossible samples: no test, but the hard failure is reported. */
    const int64_t only_bad[] = {0, 7, 0, 0};
    assert_int_equal(assay_gof_test(bins, only_bad, 1e-3, 0.99, &r), ASSAY_OK);
    assert_true(r.degenerate && isnan(r.p_value) && r.n_impossible == 7);
    assay_gof_bins_free(bins);

    /* One bin: no chi-squared (degenerate, no p-value); the binomial test
     * with q = 0 instead, any sample off the one possible category
     * impossible; the smallest mass moved off it that shows in 100
     * samples with probability 0.99 is 1 - 0.01^(1/100). */
    const double one[] = {1.0, 0.0};
    assert_int_equal(assay_gof_bins_make(one, 2, 100.0, 5.0, &bins), ASSAY_OK);
    const int64_t c1[] = {100, 0};
    assert_int_equal(assay_gof_test(bins, c1, 1e-3, 0.99, &r), ASSAY_OK);
    assert_true(r.degenerate && r.df == 0 && isnan(r.p_value) && isnan(r.statistic));
    assert_int_equal(assay_gof_test_one_bin(bins, c1, 0, 1e-3, 0.99, &r), ASSAY_OK);
    assert_true(!r.degenerate && r.one_bin && r.p_value == 1.0 && r.statistic == 0.0);
    assert_true(close_to("min TV, q 0", r.min_tv, 1.0 - pow(0.01, 0.01), 0.0, 1e-9));
    assay_gof_bins_free(bins);
}

/* P(X >= x) for X ~ Binomial(n, q), summed term by term in long double. */
static double binomial_tail_by_hand(int x, int n, double q)
{
    long double sum = 0.0L;
    for (int k = x; k <= n; k++) {
        long double lc = lgammal(n + 1.0L) - lgammal(k + 1.0L) - lgammal(n - k + 1.0L);
        sum += expl(lc + k * logl(q) + (n - k) * log1pl(-q));
    }
    return (double)sum;
}

/* A near-deterministic distribution pools into one bin: the exact
 * binomial test of the samples off the most likely category. Its p-value
 * against a sum by hand, its level exact (the null's probability of a
 * p-value at or below alpha, summed over every count, is at most alpha),
 * and its power at the min TV it states. */
static void test_gof_one_bin_binomial(void **state)
{
    (void)state;
    const double prob[] = {0.999, 0.0005, 0.0005};
    const int n = 1000;
    struct assay_gof_bins *bins = NULL;
    assert_int_equal(assay_gof_bins_make(prob, 3, (double)n, 5.0, &bins), ASSAY_OK);
    assert_int_equal(bins->n_bins, 1);
    assert_int_equal(bins->top, 0);
    struct assay_test_result r;
    const int64_t counts[] = {990, 6, 4}; /* 10 off the top, 1 expected */
    assert_int_equal(assay_gof_test_one_bin(bins, counts, 0, 1e-3, 0.99, &r), ASSAY_OK);
    assert_true(r.one_bin && !r.degenerate && r.statistic == 10.0);
    double q = 1.0 - 0.999;
    double hand = 2.0 * binomial_tail_by_hand(10, n, q);
    assert_true(close_to("binomial p", r.p_value, hand, 0.0, 1e-9));
    printf("  10 of 1000 off a top of 0.999: p %.6e (by hand %.6e), min TV %.5f\n",
           r.p_value, hand, r.min_tv);
    /* The level: P(p <= alpha) under the null, over every count. */
    double alpha = 1e-3, level = 0.0;
    for (int x = 0; x <= 60; x++) {
        int64_t c[] = {n - x, x, 0};
        assert_int_equal(assay_gof_test_one_bin(bins, c, 0, alpha, 0.99, &r), ASSAY_OK);
        if (r.p_value <= alpha) {
            level += binomial_tail_by_hand(x, n, q) - binomial_tail_by_hand(x + 1, n, q);
        }
    }
    printf("  level at alpha %.0e: %.3e\n", alpha, level);
    assert_true(level <= alpha);
    /* The power at the stated min TV, by hand: the mass moved off the top
     * reaches the critical count with probability >= 0.99. */
    int64_t c0[] = {n, 0, 0};
    assert_int_equal(assay_gof_test_one_bin(bins, c0, 0, alpha, 0.99, &r), ASSAY_OK);
    int crit = 0;
    while (binomial_tail_by_hand(crit, n, q) > alpha / 2.0) {
        crit++;
    }
    double at = binomial_tail_by_hand(crit, n, q + r.min_tv);
    printf("  critical count %d; power at min TV %.5f: %.4f\n", crit, r.min_tv, at);
    assert_true(at >= 0.99 - 1e-9 && binomial_tail_by_hand(crit, n, q + 0.9 * r.min_tv) < 0.99);
    assay_gof_bins_free(bins);
}

/* log P(X = x) for X ~ Binomial(n, q). */
static double binomial_log_pmf(int x, int n, double q)
{
    return lgamma(n + 1.0) - lgamma(x + 1.0) - lgamma(n - x + 1.0) + x * log(q) +
           (n - x) * log1p(-q);
}

/* Two near-deterministic samples pool into one bin: Fisher's exact test
 * off the top. Its p-value against the hypergeometric summed by hand, and
 * its level exact: the null's probability (both off the top at rate q) of
 * a p-value at or below alpha, summed over every pair of counts. */
static void test_homogeneity_one_bin_fisher(void **state)
{
    (void)state;
    const int n = 300;
    int64_t a[3] = {n - 5, 3, 2}, b[3] = {n - 1, 1, 0}; /* 5 and 1 off the top */
    struct assay_test_result r;
    assert_int_equal(assay_homogeneity_test(a, b, 3, 1e-3, 0.99, 5.0, &r), ASSAY_OK);
    assert_true(r.degenerate && r.n_bins == 1);
    assert_int_equal(assay_homogeneity_test_one_bin(a, b, 3, 1e-3, 0.99, &r), ASSAY_OK);
    assert_true(r.one_bin && r.statistic == 5.0);
    /* By hand: t = 6 off the top, X ~ Hypergeometric(6 draws, 300 of a,
     * 300 of b), P(X = x) = C(300, x) C(300, 6 - x) / C(600, 6); two-sided
     * by doubling the smaller tail. */
    const int t = 6;
    double ge = 0.0;
    for (int x = 5; x <= t; x++) {
        ge += exp(lgamma(n + 1.0) - lgamma(x + 1.0) - lgamma(n - x + 1.0) + lgamma(n + 1.0) -
                  lgamma(t - x + 1.0) - lgamma(n - t + x + 1.0) -
                  (lgamma(2.0 * n + 1.0) - lgamma(t + 1.0) - lgamma(2.0 * n - t + 1.0)));
    }
    assert_true(close_to("Fisher p", r.p_value, 2.0 * ge, 0.0, 1e-9));
    printf("  5 and 1 of 300 each off the top: Fisher p %.6e (by hand %.6e), min TV %.4f "
           "(approximate)\n",
           r.p_value, 2.0 * ge, r.min_tv);
    /* The level at q 0.01, alpha 0.01: every pair of counts up to 20. */
    double q = 0.01, alpha = 0.01, level = 0.0;
    for (int x1 = 0; x1 <= 20; x1++) {
        for (int x2 = 0; x2 <= 20; x2++) {
            int64_t ca[2] = {n - x1, x1}, cb[2] = {n - x2, x2};
            assert_int_equal(assay_homogeneity_test_one_bin(ca, cb, 2, alpha, 0.99, &r),
                             ASSAY_OK);
            if (r.p_value <= alpha) {
                level += exp(binomial_log_pmf(x1, n, q) + binomial_log_pmf(x2, n, q));
            }
        }
    }
    printf("  level at alpha %.0e, q %.2f, n %d + %d: %.3e\n", alpha, q, n, n, level);
    assert_true(level <= alpha);
}

static void test_gof_invalid(void **state)
{
    (void)state;
    struct assay_gof_bins sentinel;
    struct assay_gof_bins *bins = &sentinel; /* a failed make must set it to NULL */
    const double good[] = {0.5, 0.5};
    double p[] = {0.5, 0.5 + 2e-9};
    assert_int_equal(assay_gof_bins_make(p, 2, 100.0, 5.0, &bins), ASSAY_ERR_INVALID);
    assert_null(bins);
    p[1] = 0.5 + 5e-10; /* within 1e-9: accepted as it is */
    assert_int_equal(assay_gof_bins_make(p, 2, 100.0, 5.0, &bins), ASSAY_OK);
    assay_gof_bins_free(bins);
    p[1] = 0.4;
    assert_int_equal(assay_gof_bins_make(p, 2, 100.0, 5.0, &bins), ASSAY_ERR_INVALID);
    const double neg[] = {1.5, -0.5};
    assert_int_equal(assay_gof_bins_make(neg, 2, 100.0, 5.0, &bins), ASSAY_ERR_INVALID);
    const double nan[] = {NAN, 1.0};
    assert_int_equal(assay_gof_bins_make(nan, 2, 100.0, 5.0, &bins), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_bins_make(good, 0, 100.0, 5.0, &bins), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_bins_make(good, 2, 0.0, 5.0, &bins), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_bins_make(good, 2, NAN, 5.0, &bins), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_bins_make(good, 2, 100.0, -1.0, &bins), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_bins_make(NULL, 2, 100.0, 5.0, &bins), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_bins_make(good, 2, 100.0, 5.0, NULL), ASSAY_ERR_INVALID);

    assert_int_equal(assay_gof_bins_make(good, 2, 100.0, 5.0, &bins), ASSAY_OK);
    struct assay_test_result r;
    const int64_t c[] = {50, 50}, cneg[] = {60, -1};
    assert_int_equal(assay_gof_test(bins, c, 0.0, 0.99, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_test(bins, c, 1.0, 0.99, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_test(bins, c, NAN, 0.99, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_test(bins, c, 0.01, 1.0, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_test(bins, c, 0.01, 0.001, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_test(bins, cneg, 0.01, 0.99, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_test(NULL, c, 0.01, 0.99, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gof_test(bins, NULL, 0.01, 0.99, &r), ASSAY_ERR_INVALID);
    assay_gof_bins_free(bins);
}

/* Under the null, 2,000 samples of n = 5,000 from the 60-category
 * distribution: P(p <= 0.01) within the binomial bounds at 1e-6, the mean
 * of X^2 equal to df (exactly, for Pearson's statistic under a multinomial)
 * within 5 standard errors from its exact variance (Haldane 1937), the
 * p-values uniform by KS at 1e-3, and no impossible category ever hit. */
static void test_gof_null_calibration(void **state)
{
    (void)state;
    enum { REPS = 2000 };
    const int64_t n = 5000;
    double p[K60];
    dist60(p);
    struct assay_gof_bins *bins;
    assert_int_equal(assay_gof_bins_make(p, K60, (double)n, 5.0, &bins), ASSAY_OK);
    gsl_ran_discrete_t *table = gsl_ran_discrete_preproc(K60, p);
    assert_non_null(table);
    gsl_rng *r = new_rng(1234567);
    double *pv = assay_malloc(REPS * sizeof *pv);
    assert_non_null(pv);
    int64_t counts[K60], hits = 0;
    double sum_x2 = 0.0;
    struct assay_test_result res;
    for (int rep = 0; rep < REPS; rep++) {
        draw_counts(r, table, K60, n, counts);
        assert_int_equal(assay_gof_test(bins, counts, 0.01, 0.99, &res), ASSAY_OK);
        assert_int_equal(res.n_impossible, 0);
        assert_false(res.degenerate);
        pv[rep] = res.p_value;
        hits += res.p_value <= 0.01;
        sum_x2 += res.statistic;
    }
    gsl_rng_free(r);
    gsl_ran_discrete_free(table);

    int32_t kb = bins->n_bins;
    double inv = 0.0;
    for (int b = 0; b < kb; b++) {
        inv += 1.0 / bins->prob[b];
    }
    double var = 2.0 * (kb - 1) + (inv - (double)kb * kb - 2.0 * kb + 2.0) / (double)n;
    double mean = sum_x2 / REPS, se = sqrt(var / REPS);
    printf("  df %d: mean X^2 %.3f (5 se %.3f), min TV at power 0.99: %.4f\n", res.df, mean,
           5 * se, res.min_tv);
    bool rate_ok = count_in_bounds("p <= 0.01", hits, REPS, 0.01, 1e-6);
    double d, pks;
    assert_int_equal(assay_ks_uniform(pv, REPS, &d, &pks), ASSAY_OK);
    printf("  KS of the p-values: D %.4f p %.4f\n", d, pks);
    assay_free(pv);
    assay_gof_bins_free(bins);
    assert_true(rate_ok);
    assert_true(fabs(mean - res.df) <= 5 * se);
    assert_true(pks > 1e-3);
}

/*
 * An alternative q with TV(p, q) = delta that tilts mass between two sets of
 * whole bins, A and B: q = p (1 + delta/m_A) on A, p (1 - delta/(1 - m_A))
 * on B, so w^2 = delta^2 (1/m_A + 1/(1 - m_A)) is near its Cauchy-Schwarz
 * floor 4 delta^2 when m_A ~ 1/2. Balanced: A is every other bin, so A and
 * B hold as many bins each. Top-heavy: A is the largest bins up to half the
 * mass (7 bins against 36 here); this is where the noncentral chi-squared
 * is least accurate at finite n, because E[X^2] falls short of df + n w^2 by
 * about (delta/m) (|B| - |A|) (measured power 0.788 against 0.827 predicted
 * at n = 5,000 and TV 0.05, 20,000 replications). Returns w^2 on the bins.
 */
static double tilt(const double *p, const struct assay_gof_bins *bins, double delta,
                   bool balanced, double *q)
{
    bool in_a[K60 + 1] = {false};
    double m_a = 0.0;
    for (int b = 0; b < bins->n_bins; b++) {
        bool take = balanced ? b % 2 == 0 : (m_a + bins->prob[b] <= 0.5 + 1e-12 || m_a == 0.0);
        if (take) {
            in_a[b] = true;
            m_a += bins->prob[b];
        }
    }
    for (int i = 0; i < bins->k; i++) {
        int b = bins->bin_of[i];
        q[i] = b < 0 ? 0.0
                     : (in_a[b] ? p[i] * (1.0 + delta / m_a) : p[i] * (1.0 - delta / (1.0 - m_a)));
    }
    return delta * delta * (1.0 / m_a + 1.0 / (1.0 - m_a));
}

/* Rejections at alpha of REPS goodness-of-fit tests on n draws from q. */
static int64_t gof_rejections(const struct assay_gof_bins *bins, const double *q, int64_t n,
                              double alpha, int reps, unsigned long seed,
                              struct assay_test_result *last)
{
    gsl_ran_discrete_t *table = gsl_ran_discrete_preproc(K60, q);
    assert_non_null(table);
    gsl_rng *r = new_rng(seed);
    int64_t counts[K60], rejected = 0;
    for (int rep = 0; rep < reps; rep++) {
        draw_counts(r, table, K60, n, counts);
        assert_int_equal(assay_gof_test(bins, counts, alpha, 0.99, last), ASSAY_OK);
        rejected += last->p_value <= alpha;
    }
    gsl_rng_free(r);
    gsl_ran_discrete_free(table);
    return rejected;
}

/*
 * Power at alpha 1e-3, n = 5,000, 2,000 replications each.
 * 1. The balanced alternative with TV 0.05: the rejection rate is the power
 *    the noncentral chi-squared predicts for it (which is at least what the
 *    bound w >= 2 TV promises), within 5 sigma and 0.03 for the asymptotics.
 * 2. The promise behind min_tv: the top-heavy alternative at TV = min_tv
 *    (power 0.99) is rejected at least 0.99 of the time, less 5 sigma and
 *    0.01 (measured 0.987 with 20,000 replications; see tilt()).
 */
static void test_gof_power(void **state)
{
    (void)state;
    enum { REPS = 2000 };
    const int64_t n = 5000;
    const double alpha = 1e-3, delta = 0.05;
    double p[K60], q[K60];
    dist60(p);
    struct assay_gof_bins *bins;
    assert_int_equal(assay_gof_bins_make(p, K60, (double)n, 5.0, &bins), ASSAY_OK);
    double w2 = tilt(p, bins, delta, true, q);
    double tvq = 0.0;
    for (int i = 0; i < K60; i++) {
        tvq += 0.5 * fabs(q[i] - p[i]);
    }
    assert_true(close_to("TV of the alternative", tvq, delta, 1e-12, 0.0));
    int32_t df = bins->n_bins - 1;
    double crit = gsl_cdf_chisq_Qinv(alpha, df), predicted, guaranteed;
    assert_int_equal(assay_ncchisq_Q(crit, df, (double)n * w2, &predicted), ASSAY_OK);
    assert_int_equal(assay_ncchisq_Q(crit, df, 4.0 * (double)n * delta * delta, &guaranteed),
                     ASSAY_OK);
    assert_true(predicted >= guaranteed);
    struct assay_test_result res;
    double rate = (double)gof_rejections(bins, q, n, alpha, REPS, 777, &res) / REPS;
    double sigma = sqrt(predicted * (1 - predicted) / REPS);
    printf("  balanced, TV %.3f, n %lld, df %d: rejected %.4f, predicted %.4f (bound from TV "
           "%.4f)\n",
           delta, (long long)n, df, rate, predicted, guaranteed);
    bool balanced_ok = fabs(rate - predicted) <= 5 * sigma + 0.03;

    double min_tv = res.min_tv;
    assert_true(min_tv > delta); /* 5,000 samples cannot promise 0.99 at TV 0.05 */
    tilt(p, bins, min_tv, false, q);
    double rate2 = (double)gof_rejections(bins, q, n, alpha, REPS, 778, &res) / REPS;
    double sigma2 = sqrt(0.99 * 0.01 / REPS);
    printf("  top-heavy at min TV %.4f (power 0.99): rejected %.4f\n", min_tv, rate2);
    assay_gof_bins_free(bins);
    assert_true(balanced_ok);
    assert_true(rate2 >= 0.99 - 5 * sigma2 - 0.01);
}

/* ---- Homogeneity -------------------------------------------------------- */

static void test_homogeneity_known(void **state)
{
    (void)state;
    struct assay_test_result r;
    /* 2 x 3: expected 15, 20, 25 in each row; X^2 = 2 (25/15 + 25/25). */
    const int64_t a[] = {10, 20, 30}, b[] = {20, 20, 20};
    assert_int_equal(assay_homogeneity_test(a, b, 3, 0.01, 0.99, 5.0, &r), ASSAY_OK);
    double x2 = 2.0 * (25.0 / 15.0 + 1.0);
    printf("  2x3: X^2 %.10f (hand %.10f), p %.10f (hand %.10f)\n", r.statistic, x2, r.p_value,
           exp(-x2 / 2));
    assert_true(close_to("X^2", r.statistic, x2, 0.0, 1e-13));
    assert_true(close_to("p", r.p_value, exp(-x2 / 2.0), 0.0, 1e-12));
    assert_int_equal(r.df, 2);
    assert_int_equal(r.n, 120);
    assert_true(close_to("n_eff", r.n_eff, 30.0, 1e-12, 0.0));
    double tv;
    assert_int_equal(assay_min_detectable_tv(0.01, 2, 0.99, 30.0, &tv), ASSAY_OK);
    assert_true(r.min_tv == tv);

    /* Pooling: combined 190, 110, 4, 4, 0; the smaller expected cell of the
     * 4s is ~2 < 5, the pooled 8 still ~4 < 5, so they join the 110 bin: a
     * 2 x 2 table [100 55; 90 63], X^2 = N (ad - bc)^2 / (r1 r2 c1 c2). */
    const int64_t a2[] = {100, 50, 3, 2, 0}, b2[] = {90, 60, 1, 2, 0};
    assert_int_equal(assay_homogeneity_test(a2, b2, 5, 0.01, 0.99, 5.0, &r), ASSAY_OK);
    double num = 100.0 * 63.0 - 55.0 * 90.0;
    double x22 = 308.0 * num * num / (155.0 * 153.0 * 190.0 * 118.0);
    assert_int_equal(r.df, 1);
    assert_true(close_to("pooled X^2", r.statistic, x22, 0.0, 1e-12));
    /* With min_expected 1 the 4s keep their own bins. */
    assert_int_equal(assay_homogeneity_test(a2, b2, 5, 0.01, 0.99, 1.0, &r), ASSAY_OK);
    assert_int_equal(r.df, 3);
    /* The same bins as plain data, for the report: the 4s pooled and
     * joined to the 110 bin, the empty category in none. */
    struct assay_gof_bins *hb = NULL;
    assert_int_equal(assay_homogeneity_bins_make(a2, b2, 5, 5.0, &hb), ASSAY_OK);
    assert_int_equal(hb->n_bins, 2);
    assert_int_equal(hb->n_own, 2);
    assert_int_equal(hb->tail_bin, 1);
    assert_int_equal(hb->n_pooled, 2);
    assert_int_equal(hb->n_impossible_categories, 1);
    const int32_t want_bin[] = {0, 1, 1, 1, -1};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(hb->bin_of[i], want_bin[i]);
    }
    assert_true(close_to("share 0", hb->prob[0], 190.0 / 308.0, 0.0, 1e-15));
    assert_true(close_to("share 1", hb->prob[1], 118.0 / 308.0, 0.0, 1e-15));
    assert_true(hb->n == 308.0);
    assay_gof_bins_free(hb);
    assert_int_equal(assay_homogeneity_bins_make(a2, b2, 5, 1.0, &hb), ASSAY_OK);
    assert_int_equal(hb->n_bins, 4);
    assert_int_equal(hb->tail_bin, -1);
    assay_gof_bins_free(hb);

    /* Everything in one category: degenerate. */
    const int64_t a3[] = {0, 40, 0}, b3[] = {0, 60, 0};
    assert_int_equal(assay_homogeneity_test(a3, b3, 3, 0.01, 0.99, 5.0, &r), ASSAY_OK);
    assert_true(r.degenerate && isnan(r.p_value) && r.df == 0);

    const int64_t zero[] = {0, 0, 0}, neg[] = {5, -1, 5};
    assert_int_equal(assay_homogeneity_test(zero, b, 3, 0.01, 0.99, 5.0, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_homogeneity_test(a, neg, 3, 0.01, 0.99, 5.0, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_homogeneity_test(a, b, 0, 0.01, 0.99, 5.0, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_homogeneity_test(a, b, 3, 1.5, 0.99, 5.0, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_homogeneity_test(a, b, 3, 0.01, NAN, 5.0, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_homogeneity_test(a, b, 3, 0.01, 0.99, NAN, &r), ASSAY_ERR_INVALID);
    struct assay_gof_bins left;
    hb = &left; /* a failure sets *out to NULL */
    assert_int_equal(assay_homogeneity_bins_make(zero, b, 3, 5.0, &hb), ASSAY_ERR_INVALID);
    assert_null(hb);
    assert_int_equal(assay_homogeneity_bins_make(a, neg, 3, 5.0, &hb), ASSAY_ERR_INVALID);
    assert_int_equal(assay_homogeneity_bins_make(a, b, 3, NAN, &hb), ASSAY_ERR_INVALID);
}

/* Under the null (two samples, 3,000 and 5,000, from the 60-category
 * distribution, 1,000 times): P(p <= 0.01) within binomial bounds at 1e-6,
 * the mean of X^2 - df within 5 standard errors of 0, the p-values uniform by
 * KS at 1e-3. Under the balanced tilted alternative with TV 0.06 (n 5,000
 * each side, n_eff 2,500, 1,000 times) the rejection rate at 1e-3 reaches
 * the predicted power less 5 sigma and 0.03. */
static void test_homogeneity_calibration(void **state)
{
    (void)state;
    enum { REPS = 1000, POWER_REPS = 1000 };
    double p[K60], q[K60];
    dist60(p);
    gsl_ran_discrete_t *tp = gsl_ran_discrete_preproc(K60, p);
    assert_non_null(tp);
    gsl_rng *r = new_rng(4242);
    double *pv = assay_malloc(REPS * sizeof *pv);
    assert_non_null(pv);
    int64_t a[K60], b[K60], hits = 0;
    double sum = 0.0, sum_df = 0.0;
    struct assay_test_result res;
    for (int rep = 0; rep < REPS; rep++) {
        draw_counts(r, tp, K60, 3000, a);
        draw_counts(r, tp, K60, 5000, b);
        assert_int_equal(assay_homogeneity_test(a, b, K60, 0.01, 0.99, 5.0, &res), ASSAY_OK);
        pv[rep] = res.p_value;
        hits += res.p_value <= 0.01;
        sum += res.statistic - res.df;
        sum_df += res.df;
    }
    double se = sqrt(2.0 * (sum_df / REPS) / REPS);
    printf("  null: mean df %.2f, mean X^2 - df %.3f (5 se %.3f)\n", sum_df / REPS, sum / REPS,
           5 * se);
    bool rate_ok = count_in_bounds("p <= 0.01", hits, REPS, 0.01, 1e-6);
    double d, pks;
    assert_int_equal(assay_ks_uniform(pv, REPS, &d, &pks), ASSAY_OK);
    printf("  KS of the p-values: D %.4f p %.4f\n", d, pks);
    assay_free(pv);
    assert_true(rate_ok);
    assert_true(fabs(sum / REPS) <= 5 * se);
    assert_true(pks > 1e-3);

    /* Power. The prediction uses the bins the pooling rule gives for the
     * expected combined counts, as the data-dependent bins will be on average. */
    const int64_t n1 = 5000, n2 = 5000;
    const double alpha = 1e-3, delta = 0.06;
    double neff = (double)n1 * (double)n2 / (double)(n1 + n2);
    struct assay_gof_bins *bins;
    assert_int_equal(assay_gof_bins_make(p, K60, 0.5 * (double)(n1 + n2), 5.0, &bins), ASSAY_OK);
    tilt(p, bins, delta, true, q);
    double mix[K60];
    for (int i = 0; i < K60; i++) {
        mix[i] = 0.5 * (p[i] + q[i]);
    }
    assay_gof_bins_free(bins);
    assert_int_equal(assay_gof_bins_make(mix, K60, (double)n1, 5.0, &bins), ASSAY_OK);
    double pb[K60 + 1] = {0}, qb[K60 + 1] = {0};
    for (int i = 0; i < K60; i++) {
        if (bins->bin_of[i] >= 0) {
            pb[bins->bin_of[i]] += p[i];
            qb[bins->bin_of[i]] += q[i];
        }
    }
    double w2 = 0.0;
    for (int j = 0; j < bins->n_bins; j++) {
        w2 += (pb[j] - qb[j]) * (pb[j] - qb[j]) / bins->prob[j];
    }
    int32_t df = bins->n_bins - 1;
    assay_gof_bins_free(bins);
    double crit = gsl_cdf_chisq_Qinv(alpha, df), predicted;
    assert_int_equal(assay_ncchisq_Q(crit, df, neff * w2, &predicted), ASSAY_OK);
    gsl_ran_discrete_t *tq = gsl_ran_discrete_preproc(K60, q);
    assert_non_null(tq);
    int64_t rejected = 0;
    for (int rep = 0; rep < POWER_REPS; rep++) {
        draw_counts(r, tp, K60, n1, a);
        draw_counts(r, tq, K60, n2, b);
        assert_int_equal(assay_homogeneity_test(a, b, K60, alpha, 0.99, 5.0, &res), ASSAY_OK);
        rejected += res.p_value <= alpha;
    }
    gsl_rng_free(r);
    gsl_ran_discrete_free(tp);
    gsl_ran_discrete_free(tq);
    double rate = (double)rejected / POWER_REPS;
    double sigma = sqrt(predicted * (1 - predicted) / POWER_REPS);
    printf("  TV %.2f, n_eff %.0f, df ~%d: rejected %.4f, predicted %.4f, min TV at 0.99 %.4f\n",
           delta, neff, df, rate, predicted, res.min_tv);
    assert_true(rate >= predicted - 5 * sigma - 0.03);
    double tv;
    assert_int_equal(assay_min_detectable_tv(alpha, res.df, 0.99, neff, &tv), ASSAY_OK);
    assert_true(res.min_tv == tv && res.n_eff == neff);
}

/* ---- Holm and binomial bounds ------------------------------------------ */

static void test_holm(void **state)
{
    (void)state;
    /* The textbook example (Holm 1979; as on Wikipedia): four hypotheses,
     * alpha 0.05. Sorted: 0.005 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2,
     * so H4 and H1 are rejected and the procedure stops. */
    const double p[] = {0.01, 0.04, 0.03, 0.005};
    bool reject[4];
    double adj[4];
    assert_int_equal(assay_holm(p, 4, 0.05, reject), ASSAY_OK);
    assert_true(reject[0] && !reject[1] && !reject[2] && reject[3]);
    assert_int_equal(assay_holm_adjusted(p, 4, adj), ASSAY_OK);
    const double want[] = {0.03, 0.06, 0.06, 0.02};
    for (int i = 0; i < 4; i++) {
        assert_true(close_to("Holm adjusted", adj[i], want[i], 1e-15, 0.0));
    }
    /* Step-down stops: 0.04 would pass alone at 0.05/1, but 0.03 failed first. */
    assert_false(reject[1]);
    /* Capped at 1, monotone. */
    const double big[] = {0.5, 0.9};
    assert_int_equal(assay_holm_adjusted(big, 2, adj), ASSAY_OK);
    assert_true(adj[0] == 1.0 && adj[1] == 1.0);
    /* Agreement of the two forms on random families. */
    gsl_rng *r = new_rng(99);
    for (int fam = 0; fam < 500; fam++) {
        double f[12], fa[12];
        bool rej[12];
        for (int i = 0; i < 12; i++) {
            f[i] = pow(gsl_rng_uniform(r), 3.0);
        }
        assert_int_equal(assay_holm(f, 12, 0.05, rej), ASSAY_OK);
        assert_int_equal(assay_holm_adjusted(f, 12, fa), ASSAY_OK);
        for (int i = 0; i < 12; i++) {
            assert_true(rej[i] == (fa[i] <= 0.05));
        }
    }
    gsl_rng_free(r);
    assert_int_equal(assay_holm(NULL, 0, 0.05, NULL), ASSAY_OK);
    const double badp[] = {0.1, 1.5};
    assert_int_equal(assay_holm(badp, 2, 0.05, reject), ASSAY_ERR_INVALID);
    const double nanp[] = {0.1, NAN};
    assert_int_equal(assay_holm(nanp, 2, 0.05, reject), ASSAY_ERR_INVALID);
    assert_int_equal(assay_holm_adjusted(nanp, 2, adj), ASSAY_ERR_INVALID);
    assert_int_equal(assay_holm(p, 4, 0.0, reject), ASSAY_ERR_INVALID);
    assert_int_equal(assay_holm(p, 4, 1.0, reject), ASSAY_ERR_INVALID);
}

static void test_binomial_bound(void **state)
{
    (void)state;
    int64_t lo, hi;
    /* Binomial(10, 1/2) at 0.05: P(X <= 1) = 11/1024, P(X <= 2) = 56/1024. */
    assert_int_equal(assay_binomial_two_sided_bound(10, 0.5, 0.05, &lo, &hi), ASSAY_OK);
    assert_int_equal(lo, 2);
    assert_int_equal(hi, 8);
    /* The defining inequalities, checked with GSL at a calibration size. */
    const double alpha = 1e-6;
    assert_int_equal(assay_binomial_two_sided_bound(2000, 0.01, alpha, &lo, &hi), ASSAY_OK);
    printf("  Binomial(2000, 0.01) at 1e-6: %lld..%lld\n", (long long)lo, (long long)hi);
    assert_true(lo == 0 || gsl_cdf_binomial_P((unsigned)(lo - 1), 0.01, 2000) <= alpha / 2);
    assert_true(gsl_cdf_binomial_P((unsigned)lo, 0.01, 2000) > alpha / 2);
    assert_true(gsl_cdf_binomial_Q((unsigned)hi, 0.01, 2000) <= alpha / 2);
    assert_true(gsl_cdf_binomial_Q((unsigned)(hi - 1), 0.01, 2000) > alpha / 2);
    assert_int_equal(assay_binomial_two_sided_bound(50, 0.0, 0.05, &lo, &hi), ASSAY_OK);
    assert_true(lo == 0 && hi == 0);
    assert_int_equal(assay_binomial_two_sided_bound(50, 1.0, 0.05, &lo, &hi), ASSAY_OK);
    assert_true(lo == 50 && hi == 50);
    assert_int_equal(assay_binomial_two_sided_bound(0, 0.3, 0.05, &lo, &hi), ASSAY_OK);
    assert_true(lo == 0 && hi == 0);
    assert_int_equal(assay_binomial_two_sided_bound(-1, 0.3, 0.05, &lo, &hi), ASSAY_ERR_INVALID);
    assert_int_equal(assay_binomial_two_sided_bound(10, 1.3, 0.05, &lo, &hi), ASSAY_ERR_INVALID);
    assert_int_equal(assay_binomial_two_sided_bound(10, 0.3, 0.0, &lo, &hi), ASSAY_ERR_INVALID);
    assert_int_equal(assay_binomial_two_sided_bound(10, NAN, 0.05, &lo, &hi), ASSAY_ERR_INVALID);
    assert_int_equal(assay_binomial_two_sided_bound((int64_t)1 << 40, 0.3, 0.05, &lo, &hi),
                     ASSAY_ERR_INVALID);
}

/* ---- Allocation failures and initialisation ---------------------------- */

/* Fails each allocation of each allocating function in turn: every failure
 * must report ASSAY_ERR_NOMEM and leave nothing allocated. */
static void test_out_of_memory(void **state)
{
    (void)state;
    const double u[] = {0.3, 0.1, 0.8, 0.45, 0.9};
    const double prob[] = {0.5, 0.0, 0.3, 0.15, 0.05};
    const int64_t ca[] = {40, 0, 35, 20, 5}, cb[] = {50, 1, 30, 15, 4};
    const double pv[] = {0.01, 0.2, 0.003};
    for (int fn = 0; fn < 6; fn++) {
        int failures = 0;
        for (long k = 1;; k++) {
            assay_test_fail_alloc_at(k);
            enum assay_status st = ASSAY_OK;
            double d, p, adj[3];
            bool rej[3];
            struct assay_gof_bins *bins = NULL;
            struct assay_test_result res;
            switch (fn) {
            case 0:
                st = assay_ks_uniform(u, 5, &d, &p);
                break;
            case 1:
                st = assay_ks_pvalue_exact(200, 0.1, &p);
                break;
            case 2:
                st = assay_gof_bins_make(prob, 5, 100.0, 5.0, &bins);
                if (st == ASSAY_OK) {
                    st = assay_gof_test(bins, ca, 0.01, 0.99, &res);
                    assay_gof_bins_free(bins);
                }
                break;
            case 3:
                st = assay_homogeneity_test(ca, cb, 5, 0.01, 0.99, 5.0, &res);
                break;
            case 4:
                st = assay_holm(pv, 3, 0.05, rej);
                break;
            default:
                st = assay_holm_adjusted(pv, 3, adj);
                break;
            }
            long live = assay_test_alloc_live();
            long count = assay_test_alloc_count();
            assay_test_fail_alloc_off();
            assert_int_equal(live, 0);
            if (k > count) {
                assert_int_equal(st, ASSAY_OK); /* no allocation was failed */
                break;
            }
            assert_int_equal(st, ASSAY_ERR_NOMEM);
            failures++;
        }
        assert_true(failures >= 1);
    }
}

static void test_init(void **state)
{
    (void)state;
    assert_int_equal(assay_stats_init(), ASSAY_OK);
    assert_int_equal(assay_stats_init(), ASSAY_OK);
    /* With the handler off a domain error returns NaN instead of aborting. */
    assert_true(isnan(gsl_cdf_chisq_Qinv(2.0, 3.0)));
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    assay_stats_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_ks_known_values),
        cmocka_unit_test(test_ks_limits),
        cmocka_unit_test(test_ks_exact_vs_asymptotic),
        cmocka_unit_test(test_ks_exact_large_n),
        cmocka_unit_test(test_ks_uniform_statistic),
        cmocka_unit_test(test_ks_monte_carlo),
        cmocka_unit_test(test_ncchisq_values),
        cmocka_unit_test(test_power_figures),
        cmocka_unit_test(test_gof_pooling),
        cmocka_unit_test(test_gof_known_value),
        cmocka_unit_test(test_gof_one_bin_binomial),
        cmocka_unit_test(test_homogeneity_one_bin_fisher),
        cmocka_unit_test(test_gof_invalid),
        cmocka_unit_test(test_gof_null_calibration),
        cmocka_unit_test(test_gof_power),
        cmocka_unit_test(test_homogeneity_known),
        cmocka_unit_test(test_homogeneity_calibration),
        cmocka_unit_test(test_holm),
        cmocka_unit_test(test_binomial_bound),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
