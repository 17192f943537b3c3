/* Unit tests of checks/tolerance: the bins, the formulas at hand-computed
 * values, the size of each test at the edge of its null (Monte Carlo, the
 * worst-case shapes) and its power at budget + min_excess, every argument
 * check and every allocation failure. Seeds are fixed. The Monte Carlo
 * here is small (a few hundred replicates at a loose level); the
 * calibration label runs the same at size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "checks/stats.h"
#include "checks/tolerance.h"
#include "core/alloc.h"
#include "support.h"

static bool close_to(const char *what, double got, double ref, double tol)
{
    bool ok = fabs(got - ref) <= tol;
    if (!ok) {
        printf("  %s: got %.17g, expected %.17g (tolerance %.3g)\n", what, got, ref, tol);
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

static void test_bins(void **state)
{
    (void)state;
    /* 0.4 alone, then runs of >= 0.25: {0.2, 0.1}, {0.1, 0.1, 0.05} with
     * the light last run {0.05} merged; the zero bin last. */
    const double prob[] = {0.1, 0.4, 0.0, 0.2, 0.1, 0.05, 0.1, 0.05, 0.0};
    int64_t order[9];
    int32_t bin_of[9], n_bins = 0;
    double bin_prob[5];
    assert_int_equal(assay_tv_bins(prob, 9, 4, order, bin_of, bin_prob, &n_bins), ASSAY_OK);
    assert_int_equal(n_bins, 4);
    assert_int_equal(bin_of[1], 0);                        /* 0.4 */
    assert_int_equal(bin_of[3], 1);                        /* 0.2 */
    assert_int_equal(bin_of[0], 1);                        /* 0.1, lowest id first */
    assert_int_equal(bin_of[4], 2);
    assert_int_equal(bin_of[6], 2);
    assert_int_equal(bin_of[5], 2);                        /* 0.05, first of the ties */
    assert_int_equal(bin_of[7], 2);                        /* the light last run, merged */
    assert_int_equal(bin_of[2], 3);                        /* probability 0 */
    assert_int_equal(bin_of[8], 3);
    assert_true(close_to("bin 0", bin_prob[0], 0.4, 1e-15));
    assert_true(close_to("bin 1", bin_prob[1], 0.3, 1e-15));
    assert_true(close_to("bin 2", bin_prob[2], 0.3, 1e-15));
    assert_true(bin_prob[3] == 0.0);
    /* No zero category: no zero bin. */
    const double two[] = {0.5, 0.5};
    assert_int_equal(assay_tv_bins(two, 2, 4, order, bin_of, bin_prob, &n_bins), ASSAY_OK);
    assert_int_equal(n_bins, 2);
    /* Bad input. */
    const double neg[] = {1.5, -0.5};
    const double short_sum[] = {0.5, 0.4};
    assert_int_equal(assay_tv_bins(neg, 2, 4, order, bin_of, bin_prob, &n_bins),
                     ASSAY_ERR_INVALID);
    assert_int_equal(assay_tv_bins(short_sum, 2, 4, order, bin_of, bin_prob, &n_bins),
                     ASSAY_ERR_INVALID);
    assert_int_equal(assay_tv_bins(two, 2, 1, order, bin_of, bin_prob, &n_bins),
                     ASSAY_ERR_INVALID);
    assert_int_equal(assay_tv_bins(two, 2, 63, order, bin_of, bin_prob, &n_bins),
                     ASSAY_ERR_INVALID);
}

static void test_one_sample_formula(void **state)
{
    (void)state;
    /* p = (0.5, 0.3, 0.2), counts (600, 250, 150) of 1000: T = 0.1. */
    const double p[] = {0.5, 0.3, 0.2};
    const int64_t c[] = {600, 250, 150};
    struct assay_tolerance_result r;
    assert_int_equal(assay_tv_tolerance_one(c, p, 3, 0.05, 1e-3, 0.99, &r), ASSAY_OK);
    assert_true(close_to("distance", r.distance, 0.1, 1e-12));
    /* 2^3 - 2 = 6 events: p = 6 exp(-2000 * 0.05^2) = 6 e^-5 */
    assert_true(close_to("p", r.p_value, 6.0 * exp(-5.0), 1e-12));
    double e = sqrt((log(6.0) - log(1e-3)) / 2000.0);
    assert_true(close_to("threshold", r.threshold, 0.05 + e, 1e-12));
    assert_true(close_to("min_excess", r.min_excess, e + sqrt(log(100.0) / 2000.0), 1e-12));
    double e95 = sqrt((log(6.0) - log(0.05)) / 2000.0);
    assert_true(close_to("ci_lo", r.ci_lo, 0.1 - e95, 1e-12));
    assert_true(close_to("ci_hi", r.ci_hi, 0.1 + e95, 1e-12));
    assert_int_equal(r.n, 1000);
    /* Within the budget: p 1. */
    assert_int_equal(assay_tv_tolerance_one(c, p, 3, 0.1, 1e-3, 0.99, &r), ASSAY_OK);
    assert_true(r.p_value == 1.0);
    /* One bin: nothing can be seen. */
    assert_int_equal(assay_tv_tolerance_one(c, p, 1, 0.0, 1e-3, 0.99, &r), ASSAY_OK);
    assert_true(r.p_value == 1.0 && r.distance == 0.0);
    /* Bad input. */
    const int64_t zero[] = {0, 0, 0};
    assert_int_equal(assay_tv_tolerance_one(zero, p, 3, 0.0, 1e-3, 0.99, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_tv_tolerance_one(c, p, 3, -0.1, 1e-3, 0.99, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_tv_tolerance_one(c, p, 3, NAN, 1e-3, 0.99, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_tv_tolerance_one(c, p, 3, 0.0, 0.5, 0.4, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_tv_tolerance_one(c, p, 63, 0.0, 1e-3, 0.99, &r), ASSAY_ERR_INVALID);
}

static void test_two_sample_formula(void **state)
{
    (void)state;
    const int64_t a[] = {600, 250, 150}, b[] = {1000, 600, 400};
    struct assay_tolerance_result r;
    assert_int_equal(assay_tv_tolerance_two(a, b, 3, 0.02, 1e-3, 0.99, &r), ASSAY_OK);
    /* a/n1 = (0.6, 0.25, 0.15), b/n2 = (0.5, 0.3, 0.2): T 0.1; n_eff 2000/3 */
    double n_eff = 1000.0 * 2000.0 / 3000.0;
    assert_true(close_to("distance", r.distance, 0.1, 1e-12));
    assert_true(close_to("n_eff", r.n_eff, n_eff, 1e-9));
    assert_true(close_to("p", r.p_value, 6.0 * exp(-2.0 * n_eff * 0.08 * 0.08), 1e-12));
    assert_int_equal(r.n, 3000);
    const int64_t empty[] = {0, 0, 0};
    assert_int_equal(assay_tv_tolerance_two(a, empty, 3, 0.0, 1e-3, 0.99, &r), ASSAY_ERR_INVALID);
}

static void test_cdf_formula(void **state)
{
    (void)state;
    /* 10 values, grid 4 (s = 0.25, 0.5, 0.75): F = 0.5, 0.6, 0.9 -> D 0.25 */
    const double u[] = {0.1, 0.2, 0.05, 0.24, 0.01, 0.3, 0.6, 0.7, 0.74, 0.9};
    struct assay_tolerance_result r;
    const double flat[] = {0.05, 0.05, 0.05}, zero[] = {0.0, 0.0, 0.0};
    assert_int_equal(assay_cdf_tolerance(u, 10, 4, flat, 0.01, 0.99, &r), ASSAY_OK);
    assert_true(close_to("D", r.distance, 0.25, 1e-12));
    assert_true(close_to("p", r.p_value, fmin(1.0, 6.0 * exp(-20.0 * 0.2 * 0.2)), 1e-12));
    /* A budget per grid point: the farthest beyond its own budget decides
     * (|F - s| = 0.25, 0.1, 0.15 at 0.25, 0.5, 0.75). */
    const double per[] = {0.24, 0.0, 0.05};
    assert_int_equal(assay_cdf_tolerance(u, 10, 4, per, 0.01, 0.99, &r), ASSAY_OK);
    assert_true(close_to("D at 0.5 or 0.75", r.distance, 0.1, 1e-12) ||
                close_to("D at 0.75", r.distance, 0.15, 1e-12));
    assert_true(close_to("excess", r.distance - r.budget, 0.1, 1e-12));
    const double bad[] = {0.5, 1.5};
    const double bad_budget[] = {0.0, -0.1, 0.0};
    assert_int_equal(assay_cdf_tolerance(bad, 2, 4, zero, 0.01, 0.99, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_cdf_tolerance(u, 10, 1, zero, 0.01, 0.99, &r), ASSAY_ERR_INVALID);
    assert_int_equal(assay_cdf_tolerance(u, 10, 4, bad_budget, 0.01, 0.99, &r),
                     ASSAY_ERR_INVALID);
    /* Groups: group 1 holds the skewed half. */
    const int8_t g[] = {1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
    const double budget[] = {0.0, 0.0, 0.0, 0.1, 0.1, 0.1};
    int32_t worst = -2;
    assert_int_equal(assay_cdf_tolerance_groups(u, g, 10, 2, budget, 5.0, 4, 0.01, 0.99, &r,
                                                &worst),
                     ASSAY_OK);
    assert_int_equal(worst, 1); /* F_1 = 1 at 0.25: D 0.75 */
    assert_true(close_to("group D", r.distance, 0.75, 1e-12));
    assert_true(close_to("group budget", r.budget, 0.1, 0.0));
    /* S = 5 (0.75 - 0.1) = 3.25, at N = n_star: p = 12 exp(-8 S^2 / (5 * 4)) */
    assert_true(close_to("group p", r.p_value, fmin(1.0, 12.0 * exp(-8.0 * 3.25 * 3.25 / 20.0)),
                         1e-12));
    const int8_t bad_g[] = {0};
    assert_int_equal(assay_cdf_tolerance_groups(u, bad_g, 1, 17, budget, 5.0, 4, 0.01, 0.99, &r,
                                                NULL),
                     ASSAY_ERR_INVALID);
}

/*
 * The size at the edge of the null and the power at budget + min_excess of
 * the one-sample TV test: q moves mass delta (or delta + min_excess) from
 * the last bins to the first, the shape that makes TV on the bins exactly
 * that. R replicates at level a: the rejections at the edge must not
 * exceed the upper end of the 1 - 1e-4 binomial interval of Bin(R, a);
 * at budget + min_excess they must reach the lower end of Bin(R, power)'s.
 */
static void shift(const double *p, int32_t k, double d, double *q)
{
    memcpy(q, p, sizeof *q * (size_t)k);
    q[0] += d;
    double left = d;
    for (int32_t b = k - 1; b >= 0 && left > 0.0; b--) {
        double take = q[b] < left ? q[b] : left;
        q[b] -= take;
        left -= take;
    }
}

static void test_one_sample_size_and_power(void **state)
{
    (void)state;
    enum { K = 12, R = 400, N = 3000 };
    double p[K], q[K];
    for (int32_t b = 0; b < K; b++) {
        p[b] = (double)(K - b) / (K * (K + 1) / 2.0);
    }
    const double alpha = 0.05, power = 0.99, delta = 0.05;
    gsl_rng *rng = new_rng(20261204u);
    struct assay_tolerance_result r;
    int64_t lo, hi;
    for (int pass = 0; pass < 2; pass++) {
        /* min_excess depends on n and the bins only: any counts of N */
        int64_t c0[K] = {0};
        c0[0] = N;
        assert_int_equal(assay_tv_tolerance_one(c0, p, K, delta, alpha, power, &r), ASSAY_OK);
        double d = pass == 0 ? delta : delta + r.min_excess;
        shift(p, K, d, q);
        int rejected = 0;
        for (int rep = 0; rep < R; rep++) {
            unsigned int cnt[K];
            gsl_ran_multinomial(rng, K, N, q, cnt);
            int64_t c[K];
            for (int32_t b = 0; b < K; b++) {
                c[b] = cnt[b];
            }
            assert_int_equal(assay_tv_tolerance_one(c, p, K, delta, alpha, power, &r), ASSAY_OK);
            rejected += r.p_value <= alpha;
        }
        if (pass == 0) {
            assert_int_equal(assay_binomial_two_sided_bound(R, alpha, 1e-4, &lo, &hi), ASSAY_OK);
            printf("  one sample, TV %.3f = budget: %d of %d rejected at %.2f (at most %lld)\n",
                   d, rejected, R, alpha, (long long)hi);
            assert_true(rejected <= hi);
        } else {
            assert_int_equal(assay_binomial_two_sided_bound(R, power, 1e-4, &lo, &hi), ASSAY_OK);
            printf("  one sample, TV %.3f = budget + min_excess: %d of %d rejected (at least "
                   "%lld)\n",
                   d, rejected, R, (long long)lo);
            assert_true(rejected >= lo);
        }
    }
    gsl_rng_free(rng);
}

static void test_two_sample_size(void **state)
{
    (void)state;
    enum { K = 8, R = 400, N1 = 2000, N2 = 3000 };
    double p[K], q[K];
    for (int32_t b = 0; b < K; b++) {
        p[b] = 1.0 / K;
    }
    const double alpha = 0.05, delta = 0.04;
    shift(p, K, delta, q);
    gsl_rng *rng = new_rng(7u);
    int rejected = 0;
    struct assay_tolerance_result r;
    for (int rep = 0; rep < R; rep++) {
        unsigned int ca[K], cb[K];
        gsl_ran_multinomial(rng, K, N1, q, ca);
        gsl_ran_multinomial(rng, K, N2, p, cb);
        int64_t a[K], b[K];
        for (int32_t k = 0; k < K; k++) {
            a[k] = ca[k];
            b[k] = cb[k];
        }
        assert_int_equal(assay_tv_tolerance_two(a, b, K, delta, alpha, 0.99, &r), ASSAY_OK);
        rejected += r.p_value <= alpha;
    }
    int64_t lo, hi;
    assert_int_equal(assay_binomial_two_sided_bound(R, alpha, 1e-4, &lo, &hi), ASSAY_OK);
    printf("  two samples at the budget's edge: %d of %d rejected at %.2f (at most %lld)\n",
           rejected, R, alpha, (long long)hi);
    assert_true(rejected <= hi);
    gsl_rng_free(rng);
}

/* Values with density 1 + c on [0, 1/2) and 1 - c on [1/2, 1]: the CDF's
 * largest distance from the uniform's is c / 2, at 1/2. */
static double skewed(gsl_rng *rng, double c)
{
    double v = gsl_rng_uniform(rng);
    double mid = (1.0 + c) / 2.0;
    return v < mid ? v / (1.0 + c) : 0.5 + (v - mid) / (1.0 - c);
}

static void test_cdf_size_and_power(void **state)
{
    (void)state;
    enum { R = 300, N = 2000, GRID = 20 };
    static double u[N];
    const double alpha = 0.05, power = 0.99, delta = 0.04;
    gsl_rng *rng = new_rng(99u);
    struct assay_tolerance_result r;
    for (int i = 0; i < N; i++) {
        u[i] = 0.5;
    }
    /* min_excess depends on n and the grid only */
    double one[GRID - 1];
    for (int j = 0; j < GRID - 1; j++) {
        one[j] = delta;
    }
    assert_int_equal(assay_cdf_tolerance(u, N, GRID, one, alpha, power, &r), ASSAY_OK);
    double excess = r.min_excess;
    double budgets[GRID - 1];
    for (int j = 0; j < GRID - 1; j++) {
        budgets[j] = delta;
    }
    int64_t lo, hi;
    for (int pass = 0; pass < 2; pass++) {
        double d = pass == 0 ? delta : delta + excess;
        int rejected = 0;
        for (int rep = 0; rep < R; rep++) {
            for (int i = 0; i < N; i++) {
                u[i] = skewed(rng, 2.0 * d);
            }
            assert_int_equal(assay_cdf_tolerance(u, N, GRID, budgets, alpha, power, &r),
                             ASSAY_OK);
            assert_true(close_to("min_excess", r.min_excess, excess, 1e-12));
            rejected += r.p_value <= alpha;
        }
        if (pass == 0) {
            assert_int_equal(assay_binomial_two_sided_bound(R, alpha, 1e-4, &lo, &hi), ASSAY_OK);
            printf("  PIT grid, CDF distance %.3f = budget: %d of %d rejected (at most %lld)\n",
                   d, rejected, R, (long long)hi);
            assert_true(rejected <= hi);
        } else {
            assert_int_equal(assay_binomial_two_sided_bound(R, power, 1e-4, &lo, &hi), ASSAY_OK);
            printf("  PIT grid, CDF distance %.3f = budget + min_excess: %d of %d rejected (at "
                   "least %lld)\n",
                   d, rejected, R, (long long)lo);
            assert_true(rejected >= lo);
        }
    }
    gsl_rng_free(rng);
}

static void test_out_of_memory(void **state)
{
    (void)state;
    const double prob[] = {0.5, 0.3, 0.2, 0.0};
    const double u[] = {0.1, 0.5, 0.9};
    const int8_t g[] = {0, 1, 0};
    const double budget[] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    int64_t order[4];
    int32_t bin_of[4], n_bins;
    double bin_prob[8];
    struct assay_tolerance_result r;
    for (int fn = 0; fn < 3; fn++) {
        int failures = 0;
        for (long k = 1;; k++) {
            assay_test_fail_alloc_at(k);
            enum assay_status st = fn == 0   ? assay_tv_bins(prob, 4, 4, order, bin_of, bin_prob,
                                                             &n_bins)
                                   : fn == 1 ? assay_cdf_tolerance(u, 3, 4, budget, 0.01, 0.99, &r)
                                             : assay_cdf_tolerance_groups(u, g, 3, 2, budget, 1.5,
                                                                          4, 0.01, 0.99, &r, NULL);
            bool hit = assay_test_alloc_count() >= k;
            assay_test_fail_alloc_off();
            if (!hit) {
                assert_int_equal(st, ASSAY_OK);
                break;
            }
            assert_int_equal(st, ASSAY_ERR_NOMEM);
            failures++;
        }
        assert_true(failures >= 1);
    }
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    assay_stats_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bins),
        cmocka_unit_test(test_one_sample_formula),
        cmocka_unit_test(test_two_sample_formula),
        cmocka_unit_test(test_cdf_formula),
        cmocka_unit_test(test_one_sample_size_and_power),
        cmocka_unit_test(test_two_sample_size),
        cmocka_unit_test(test_cdf_size_and_power),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
