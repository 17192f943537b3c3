/* Unit tests of checks/numerics: the coarsened KLD on cases worked out by
 * hand, its floor and its clamp, the |differences|, the quantiles and CDF of
 * a known set, the rejected inputs and the allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "checks/divergence.h"
#include "core/status.h"
#include "support.h"

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

/* The oracle's row of the hand-worked cases: p = (0.5, 0.25, 0.15, 0.1). */
static void oracle_row(double *lsm)
{
    lsm[0] = log(0.5);
    lsm[1] = log(0.25);
    lsm[2] = log(0.15);
    lsm[3] = log(0.1);
}

/* The same values as the oracle: KLD 0 and every |difference| 0, exactly. */
static void test_identical(void **state)
{
    (void)state;
    double lsm[4];
    oracle_row(lsm);
    struct assay_divergence_top top[3] = {{0, lsm[0]}, {1, lsm[1]}, {2, lsm[2]}};
    struct assay_divergence *acc = NULL;
    assert_int_equal(assay_divergence_init(&acc), ASSAY_OK);
    for (int32_t n = 1; n <= 3; n++) {
        assert_int_equal(assay_divergence_add(acc, lsm, 4, top, n, true), ASSAY_OK);
    }
    struct assay_divergence_summary s;
    assay_divergence_summarise(acc, "server", &s);
    assert_string_equal(s.name, "server");
    assert_int_equal(s.n_positions, 3);
    assert_int_equal(s.n_values, 6);
    assert_int_equal(s.kld.n, 3);
    assert_int_equal(s.abs_diff.n, 6);
    assert_true(s.kld.max == 0.0 && s.kld.mean == 0.0);
    assert_true(s.abs_diff.max == 0.0 && s.abs_diff.mean == 0.0);
    for (int k = 0; k < ASSAY_DIVERGENCE_CDF_POINTS; k++) {
        assert_true(s.kld.cdf[k] == 0.0 && s.abs_diff.cdf[k] == 0.0);
    }
    assert_true(s.top1_agreement == 1.0);
    assay_divergence_free(acc);
}

/* Oracle (0.5, 0.25; rest 0.25), server (0.4, 0.4; rest 0.2):
 * KLD = 0.5 ln(0.5/0.4) + 0.25 ln(0.25/0.4) + 0.25 ln(0.25/0.2)
 *     = 0.111571776 - 0.117500907 + 0.055785888 = 0.0498567562. */
static void test_two_tokens_and_rest(void **state)
{
    (void)state;
    double lsm[4];
    oracle_row(lsm);
    struct assay_divergence_top top[2] = {{0, log(0.4)}, {1, log(0.4)}};
    double kld = -1.0;
    assert_int_equal(assay_divergence_kld(lsm, 4, top, 2, &kld), ASSAY_OK);
    assert_true(close_to("kld", kld, 0.04985675617422343, 0.0, 1e-12));
    /* The order of the list does not matter. */
    struct assay_divergence_top swapped[2] = {top[1], top[0]};
    double kld2 = -1.0;
    assert_int_equal(assay_divergence_kld(lsm, 4, swapped, 2, &kld2), ASSAY_OK);
    assert_true(close_to("kld swapped", kld2, kld, 0.0, 1e-15));
    /* The |differences|: ln(0.5/0.4) and ln(0.4/0.25). */
    struct assay_divergence *acc = NULL;
    assert_int_equal(assay_divergence_init(&acc), ASSAY_OK);
    assert_int_equal(assay_divergence_add(acc, lsm, 4, top, 2, false), ASSAY_OK);
    struct assay_divergence_summary s;
    assay_divergence_summarise(acc, "server", &s);
    assert_true(close_to("max |diff|", s.abs_diff.max, log(0.4 / 0.25), 0.0, 1e-14));
    assert_true(close_to("min |diff|", s.abs_diff.cdf[0], log(0.5 / 0.4), 0.0, 1e-14));
    assert_true(close_to("kld max", s.kld.max, 0.04985675617422343, 0.0, 1e-12));
    assert_true(s.top1_agreement == 0.0);
    assay_divergence_free(acc);
}

/* The server's two values sum past 1 (0.6 + 0.5): its rest's mass is 0, so
 * it is floored at 2 FLT_EPSILON:
 * KLD = 0.5 ln(0.5/0.6) + 0.25 ln(0.25/0.5) + 0.25 ln(0.25/(2 FLT_EPSILON))
 *     = 3.20128832926. */
static void test_rest_floor(void **state)
{
    (void)state;
    double lsm[4];
    oracle_row(lsm);
    struct assay_divergence_top top[2] = {{0, log(0.6)}, {1, log(0.5)}};
    double kld = -1.0;
    assert_int_equal(assay_divergence_kld(lsm, 4, top, 2, &kld), ASSAY_OK);
    assert_true(close_to("kld", kld, 3.2012883292627627, 0.0, 1e-12));
    double f = 2.0 * FLT_EPSILON;
    double ref = 0.5 * log(0.5 / 0.6) + 0.25 * log(0.25 / 0.5) + 0.25 * log(0.25 / f);
    assert_true(close_to("kld formula", kld, ref, 0.0, 1e-14));
}

/* Identical values with a rest below the floor: the floor alone pushes the
 * sum below zero (rest ln(rest / f) < 0), and the clamp returns 0. */
static void test_clamp(void **state)
{
    (void)state;
    double lsm[3] = {log(0.6), log(0.4 - 1e-9), log(1e-9)};
    struct assay_divergence_top top[2] = {{0, lsm[0]}, {1, lsm[1]}};
    double rest = 1.0 - (exp(lsm[0]) + exp(lsm[1]));
    assert_true(rest > 0.0 && rest * log(rest / (2.0 * FLT_EPSILON)) < 0.0);
    double kld = -1.0;
    assert_int_equal(assay_divergence_kld(lsm, 3, top, 2, &kld), ASSAY_OK);
    assert_true(kld == 0.0);
    /* A server whose values round just past 0 and 1 in total: still 0. */
    double one[1] = {0.0};
    struct assay_divergence_top over[1] = {{0, 1e-12}};
    assert_int_equal(assay_divergence_kld(one, 1, over, 1, &kld), ASSAY_OK);
    assert_true(kld >= 0.0 && kld <= 1e-12);
    /* No values: nothing to compare, 0. */
    assert_int_equal(assay_divergence_kld(one, 1, NULL, 0, &kld), ASSAY_OK);
    assert_true(kld == 0.0);
}

/* A token listed twice counts once in the KLD and twice among the
 * |differences|. */
static void test_duplicate_token(void **state)
{
    (void)state;
    double lsm[4];
    oracle_row(lsm);
    struct assay_divergence_top once[2] = {{0, log(0.4)}, {1, log(0.4)}};
    struct assay_divergence_top twice[3] = {{0, log(0.4)}, {1, log(0.4)}, {0, log(0.45)}};
    double a = -1.0, b = -1.0;
    assert_int_equal(assay_divergence_kld(lsm, 4, once, 2, &a), ASSAY_OK);
    assert_int_equal(assay_divergence_kld(lsm, 4, twice, 3, &b), ASSAY_OK);
    assert_true(a == b);
    struct assay_divergence *acc = NULL;
    assert_int_equal(assay_divergence_init(&acc), ASSAY_OK);
    assert_int_equal(assay_divergence_add(acc, lsm, 4, twice, 3, true), ASSAY_OK);
    struct assay_divergence_summary s;
    assay_divergence_summarise(acc, "server", &s);
    assert_int_equal(s.n_values, 3);
    assert_int_equal(s.kld.n, 1);
    assay_divergence_free(acc);
}

/* 200 positions of one value each, with a vocabulary of one token (the
 * oracle's logprob 0): the server's logprob -x_i gives |difference| x_i and
 * KLD 1 (0 - (-x_i)) = x_i, with x_i = i / 100, i = 1..200, added in a
 * scrambled order. Nearest rank over 200: the median is the 100th value,
 * p99 the 198th, cdf[k] the (2k)-th, cdf[0] the smallest. One more position
 * has no top list: it counts for top-1 only. */
static void test_quantiles(void **state)
{
    (void)state;
    double lsm[1] = {0.0};
    struct assay_divergence *acc = NULL;
    assert_int_equal(assay_divergence_init(&acc), ASSAY_OK);
    for (int i = 0; i < 200; i++) {
        int k = 1 + (i * 77) % 200; /* 77 is prime to 200: a permutation of 1..200 */
        struct assay_divergence_top top[1] = {{0, -(double)k / 100.0}};
        assert_int_equal(assay_divergence_add(acc, lsm, 1, top, 1, i % 2 == 0), ASSAY_OK);
    }
    assert_int_equal(assay_divergence_add(acc, lsm, 1, NULL, 0, false), ASSAY_OK);
    struct assay_divergence_summary s;
    assay_divergence_summarise(acc, "a name longer than the thirty-one characters kept", &s);
    assert_int_equal(s.name[31], '\0');
    assert_int_equal(s.n_positions, 201);
    assert_int_equal(s.n_values, 200);
    assert_int_equal(s.kld.n, 200);
    assert_true(close_to("top1", s.top1_agreement, 100.0 / 201.0, 0.0, 1e-15));
    const struct assay_divergence_stats *both[2] = {&s.kld, &s.abs_diff};
    for (int b = 0; b < 2; b++) {
        const struct assay_divergence_stats *st = both[b];
        assert_true(close_to("median", st->median, 1.00, 0.0, 1e-15));
        assert_true(close_to("p99", st->p99, 1.98, 0.0, 1e-15));
        assert_true(close_to("max", st->max, 2.00, 0.0, 1e-15));
        assert_true(close_to("mean", st->mean, 1.005, 1e-14, 0.0));
        assert_true(close_to("cdf[0]", st->cdf[0], 0.01, 0.0, 1e-15));
        for (int k = 1; k < ASSAY_DIVERGENCE_CDF_POINTS; k++) {
            assert_true(close_to("cdf[k]", st->cdf[k], 2.0 * k / 100.0, 0.0, 1e-15));
        }
    }
    /* More may be added after a summary. */
    struct assay_divergence_top top[1] = {{0, -3.0}};
    assert_int_equal(assay_divergence_add(acc, lsm, 1, top, 1, true), ASSAY_OK);
    assay_divergence_summarise(acc, "server", &s);
    assert_int_equal(s.n_values, 201);
    assert_true(s.abs_diff.max == 3.0);
    assay_divergence_free(acc);
}

/* An empty series: counts 0, every figure NaN. */
static void test_empty(void **state)
{
    (void)state;
    struct assay_divergence *acc = NULL;
    assert_int_equal(assay_divergence_init(&acc), ASSAY_OK);
    struct assay_divergence_summary s;
    assay_divergence_summarise(acc, "server", &s);
    assert_int_equal(s.n_positions, 0);
    assert_int_equal(s.n_values, 0);
    assert_true(isnan(s.kld.median) && isnan(s.abs_diff.max) && isnan(s.kld.cdf[50]));
    assert_true(isnan(s.top1_agreement));
    assay_divergence_free(acc);
    assay_divergence_free(NULL);
}

/* Tokens outside the vocabulary, NaN and +inf are rejected with nothing
 * recorded; -inf is a measurement (infinite KLD and |difference|). */
static void test_bad_inputs(void **state)
{
    (void)state;
    double lsm[4];
    oracle_row(lsm);
    struct assay_divergence *acc = NULL;
    assert_int_equal(assay_divergence_init(&acc), ASSAY_OK);
    struct assay_divergence_top bad[4][2] = {
        {{0, -1.0}, {4, -1.0}},
        {{0, -1.0}, {-1, -1.0}},
        {{0, NAN}, {1, -1.0}},
        {{0, -1.0}, {1, INFINITY}},
    };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(assay_divergence_add(acc, lsm, 4, bad[i], 2, true), ASSAY_ERR_INVALID);
    }
    double kld = 0.0;
    assert_int_equal(assay_divergence_kld(lsm, 0, bad[0], 0, &kld), ASSAY_ERR_INVALID);
    assert_int_equal(assay_divergence_kld(lsm, 4, bad[0], -1, &kld), ASSAY_ERR_INVALID);
    struct assay_divergence_summary s;
    assay_divergence_summarise(acc, "server", &s);
    assert_int_equal(s.n_positions, 0);
    assert_int_equal(s.n_values, 0);
    struct assay_divergence_top minus_inf[2] = {{0, -INFINITY}, {1, log(0.25)}};
    assert_int_equal(assay_divergence_add(acc, lsm, 4, minus_inf, 2, true), ASSAY_OK);
    assay_divergence_summarise(acc, "server", &s);
    assert_true(s.kld.max == INFINITY && s.abs_diff.max == INFINITY);
    assert_true(s.abs_diff.cdf[0] == 0.0);
    assay_divergence_free(acc);
}

/* Each allocation failing in turn: init reports it, add records nothing. */
static void test_alloc_failures(void **state)
{
    (void)state;
    struct assay_divergence *acc = NULL;
    assay_test_fail_alloc_at(1);
    assert_int_equal(assay_divergence_init(&acc), ASSAY_ERR_NOMEM);
    assert_null(acc);
    assay_test_fail_alloc_off();
    double lsm[4];
    oracle_row(lsm);
    struct assay_divergence_top top[2] = {{0, log(0.4)}, {1, log(0.4)}};
    for (long k = 1; k <= 2; k++) {
        assert_int_equal(assay_divergence_init(&acc), ASSAY_OK);
        assay_test_fail_alloc_at(k);
        assert_int_equal(assay_divergence_add(acc, lsm, 4, top, 2, true), ASSAY_ERR_NOMEM);
        assay_test_fail_alloc_off();
        struct assay_divergence_summary s;
        assay_divergence_summarise(acc, "server", &s);
        assert_int_equal(s.n_positions, 0);
        assert_int_equal(s.n_values, 0);
        assert_int_equal(assay_divergence_add(acc, lsm, 4, top, 2, true), ASSAY_OK);
        assay_divergence_free(acc);
    }
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical),       cmocka_unit_test(test_two_tokens_and_rest),
        cmocka_unit_test(test_rest_floor),      cmocka_unit_test(test_clamp),
        cmocka_unit_test(test_duplicate_token), cmocka_unit_test(test_quantiles),
        cmocka_unit_test(test_empty),           cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
