/* Unit tests of bench/'s statistics and its SLO reader: nearest-rank
 * percentiles, the sufficiency bound against hand-computed binomial cases,
 * the lateness histogram's bins, the spread over several runs, and the
 * SLO file's reader with its errors. Nothing here runs a generator or
 * reads the clock; test_bench.c tests the generators and the metrics
 * computed from their records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/metrics.h"
#include "bench/slo.h"
#include "core/status.h"
#include "support.h"

#define MS 1000000LL

/* ---- percentiles and sufficiency ---------------------------------------- */

static void test_percentile_nearest_rank(void **state)
{
    (void)state;
    double v[100];
    for (int i = 0; i < 100; i++) {
        v[i] = i + 1;
    }
    assert_true(assay_percentile_nearest_rank(v, 100, 5000) == 50);
    assert_true(assay_percentile_nearest_rank(v, 100, 9000) == 90);
    assert_true(assay_percentile_nearest_rank(v, 100, 9500) == 95);
    assert_true(assay_percentile_nearest_rank(v, 100, 9900) == 99);
    assert_true(assay_percentile_nearest_rank(v, 100, 10000) == 100);
    assert_true(assay_percentile_nearest_rank(v, 10, 5000) == 5);
    assert_true(assay_percentile_nearest_rank(v, 10, 9000) == 9);
    assert_true(assay_percentile_nearest_rank(v, 10, 9500) == 10);
    assert_true(assay_percentile_nearest_rank(v, 10, 9900) == 10);
    assert_true(assay_percentile_nearest_rank(v, 1, 5000) == 1);
    assert_true(assay_percentile_nearest_rank(v, 3, 5000) == 2);
    assert_true(isnan(assay_percentile_nearest_rank(v, 0, 5000)));
    assert_true(isnan(assay_percentile_nearest_rank(v, 10, 0)));
    assert_true(isnan(assay_percentile_nearest_rank(v, 10, 10001)));

    /* Summaries sort their input and report the same ranks. */
    double u[10] = {7, 3, 10, 1, 9, 2, 8, 4, 6, 5};
    struct assay_latency_summary s;
    assert_int_equal(assay_latency_summarize(u, 10, &s), ASSAY_OK);
    assert_int_equal(s.n, 10);
    assert_true(s.v[ASSAY_PCTL_P50] == 5 && s.v[ASSAY_PCTL_P90] == 9);
    assert_true(s.v[ASSAY_PCTL_P95] == 10 && s.v[ASSAY_PCTL_P99] == 10 && s.v[ASSAY_PCTL_MAX] == 10);
    /* 10 samples bound the median (n_min 7) and nothing above it. */
    assert_true(s.suff[ASSAY_PCTL_P50].sufficient);
    assert_false(s.suff[ASSAY_PCTL_P90].sufficient);
    assert_false(s.suff[ASSAY_PCTL_MAX].applicable);
    assert_int_equal(assay_latency_summarize(NULL, 0, &s), ASSAY_OK);
    assert_true(isnan(s.v[ASSAY_PCTL_P50]) && s.n == 0);
    double bad[2] = {1.0, NAN};
    assert_int_equal(assay_latency_summarize(bad, 2, &s), ASSAY_ERR_INVALID);
}

/* P(Binomial(n, q) <= j) by direct summation, for the hand cases. */
static double binom_cdf(int n, double q, int j)
{
    double sum = 0.0;
    for (int i = 0; i <= j; i++) {
        sum += exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) + i * log(q) +
                   (n - i) * log1p(-q));
    }
    return sum;
}

static void test_sufficiency_hand_cases(void **state)
{
    (void)state;
    struct assay_sufficiency s;
    /* n = 7, q = 0.5: P(X <= 6) = 1 - 1/128 = 0.9921875 >= 0.99 and
     * P(X <= 5) = 0.9375: k = 7 = n, sufficient. */
    assert_int_equal(assay_sufficiency_compute(7, 0.5, 0.99, &s), ASSAY_OK);
    assert_true(s.sufficient && s.k == 7 && s.n == 7 && s.n_min == 7);
    /* n = 6: P(X <= 5) = 1 - 1/64 = 0.984 < 0.99: no order statistic. */
    assert_int_equal(assay_sufficiency_compute(6, 0.5, 0.99, &s), ASSAY_OK);
    assert_true(!s.sufficient && s.k == 0 && s.n_min == 7);
    /* n = 20, q = 0.5: P(X >= 16) = 6196 / 2^20 = 0.00591, so
     * P(X <= 15) = 0.99409 and P(X <= 14) = 1 - 21700 / 2^20 = 0.97931:
     * k = 16. */
    assert_true(assay_test_close_to("P(X<=15)", binom_cdf(20, 0.5, 15), 1.0 - 6196.0 / 1048576.0,
                                    1e-12, 0));
    assert_int_equal(assay_sufficiency_compute(20, 0.5, 0.99, &s), ASSAY_OK);
    assert_true(s.sufficient && s.k == 16);
    /* n_min = smallest n with 1 - q^n >= 0.99: 0.9^44 = 0.00969 and
     * 0.9^43 = 0.01077 give 44; 0.99^459 = 0.00992, 0.99^458 = 0.01002
     * give 459; 0.95: 90. */
    assert_int_equal(assay_sufficiency_compute(10, 0.9, 0.99, &s), ASSAY_OK);
    assert_int_equal(s.n_min, 44);
    assert_int_equal(assay_sufficiency_compute(10, 0.95, 0.99, &s), ASSAY_OK);
    assert_int_equal(s.n_min, 90);
    assert_int_equal(assay_sufficiency_compute(459, 0.99, 0.99, &s), ASSAY_OK);
    assert_true(s.sufficient && s.k == 459 && s.n_min == 459);
    assert_int_equal(assay_sufficiency_compute(458, 0.99, 0.99, &s), ASSAY_OK);
    assert_false(s.sufficient);
    assert_int_equal(assay_sufficiency_compute(0, 0.5, 0.99, &s), ASSAY_OK);
    assert_false(s.sufficient);
    /* Against direct summation: k is the first j + 1 with F(j) >= 0.99. */
    const int ns[] = {50, 100, 137, 500};
    const double qs[] = {0.5, 0.9, 0.95, 0.99};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        for (size_t b = 0; b < sizeof qs / sizeof qs[0]; b++) {
            int k = 0;
            for (int j = 0; j < ns[a]; j++) {
                if (binom_cdf(ns[a], qs[b], j) >= 0.99) {
                    k = j + 1;
                    break;
                }
            }
            assert_int_equal(assay_sufficiency_compute(ns[a], qs[b], 0.99, &s), ASSAY_OK);
            if (s.k != k) {
                printf("  n %d q %g: k %lld, expected %d\n", ns[a], qs[b], (long long)s.k, k);
            }
            assert_int_equal(s.k, k);
            assert_true(s.sufficient == (k > 0));
            assert_true(s.sufficient == (ns[a] >= s.n_min));
        }
    }
    assert_int_equal(assay_sufficiency_compute(10, 1.0, 0.99, &s), ASSAY_ERR_INVALID);
    assert_int_equal(assay_sufficiency_compute(10, 0.5, 0.0, &s), ASSAY_ERR_INVALID);
    assert_int_equal(assay_sufficiency_compute(-1, 0.5, 0.99, &s), ASSAY_ERR_INVALID);
}

static void test_lateness_bins(void **state)
{
    (void)state;
    assert_int_equal(assay_lateness_bin(-5), 0);
    assert_int_equal(assay_lateness_bin(0), 0);
    assert_int_equal(assay_lateness_bin(999), 0);
    assert_int_equal(assay_lateness_bin(1000), 1);
    assert_int_equal(assay_lateness_bin(1778), 1);  /* 10^0.25 us = 1.7783 us */
    assert_int_equal(assay_lateness_bin(1779), 2);
    assert_int_equal(assay_lateness_bin(10000), 5); /* [10 us, 17.8 us) */
    assert_int_equal(assay_lateness_bin(MS), 13);
    assert_int_equal(assay_lateness_bin(2 * MS), 14);
    assert_int_equal(assay_lateness_bin(9999 * MS), 28);
    assert_int_equal(assay_lateness_bin(10000 * MS), 29);
    assert_int_equal(assay_lateness_bin(INT64_MAX), 29);
    for (int32_t j = 0; j < ASSAY_LATENESS_BINS; j++) {
        assert_true(assay_lateness_bin_lower(j) < assay_lateness_bin_upper(j));
        if (j > 0) {
            assert_true(assay_test_close_to("edge", assay_lateness_bin_lower(j),
                                            assay_lateness_bin_upper(j - 1), 0, 1e-15));
        }
    }
    assert_true(isinf(assay_lateness_bin_upper(ASSAY_LATENESS_BINS - 1)));
}

/* ---- the spread over runs ---------------------------------------------- */

static void test_spread(void **state)
{
    (void)state;
    struct assay_bench_summary runs[4];
    memset(runs, 0, sizeof runs);
    const double p99[4] = {3.0, 1.0, 2.0, NAN};
    const double rate[4] = {4.0, 1.0, 3.0, 2.0};
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < ASSAY_PCTL_COUNT; j++) {
            runs[i].ttft.v[j] = runs[i].tpot.v[j] = runs[i].itl.v[j] = NAN;
            runs[i].e2e.v[j] = runs[i].lateness.v[j] = NAN;
        }
        runs[i].ttft.v[ASSAY_PCTL_P99] = p99[i];
        runs[i].achieved_rate = rate[i];
        runs[i].tokens_per_s = runs[i].goodput_fraction = runs[i].goodput_rate = NAN;
    }
    struct assay_bench_spread sp;
    assay_bench_spread_compute(runs, 4, &sp);
    assert_int_equal(sp.n_runs, 4);
    /* NaN is left out: {3, 1, 2} -> 1, 2, 3. */
    assert_true(sp.ttft[ASSAY_PCTL_P99].min == 1.0 && sp.ttft[ASSAY_PCTL_P99].median == 2.0 &&
                sp.ttft[ASSAY_PCTL_P99].max == 3.0);
    /* Even count: the mean of the middle two. */
    assert_true(sp.achieved_rate.min == 1.0 && sp.achieved_rate.median == 2.5 &&
                sp.achieved_rate.max == 4.0);
    assert_true(isnan(sp.tokens_per_s.median));
    /* Ties. */
    runs[0].achieved_rate = runs[1].achieved_rate = runs[2].achieved_rate = 5.0;
    assay_bench_spread_compute(runs, 3, &sp);
    assert_true(sp.achieved_rate.min == 5.0 && sp.achieved_rate.median == 5.0);
}

/* ---- the SLO reader ----------------------------------------------------- */

static enum assay_status parse_slo(const char *text, struct assay_slo *slo, struct assay_diag *d)
{
    return assay_slo_parse(text, strlen(text), "slo.json", slo, d);
}

static void expect_slo_error(const char *text, enum assay_status status, const char *where,
                             const char *expected_part, const char *got_part)
{
    struct assay_slo slo = {.ttft_s = 123, .tpot_s = 456};
    struct assay_diag d;
    enum assay_status st = parse_slo(text, &slo, &d);
    char buf[1024];
    if (st != status || strcmp(d.where, where) != 0 || strstr(d.expected, expected_part) == NULL ||
        strstr(d.got, got_part) == NULL) {
        printf("  input %s\n  got status %s, diag \"%s\"\n", text, assay_status_str(st),
               assay_diag_format(&d, buf, sizeof buf));
    }
    assert_int_equal(st, status);
    assert_string_equal(d.file, "slo.json");
    assert_string_equal(d.where, where);
    assert_non_null(strstr(d.expected, expected_part));
    assert_non_null(strstr(d.got, got_part));
    assert_true(slo.ttft_s == 123 && slo.tpot_s == 456); /* untouched */
}

static void test_slo_reader(void **state)
{
    (void)state;
    struct assay_slo slo;
    struct assay_diag d;
    assert_int_equal(parse_slo("{\"format\": \"assay-slo\", \"version\": 1, \"ttft_s\": 0.5, "
                               "\"tpot_s\": 0.05, \"description\": \"chat\"}\n",
                               &slo, &d),
                     ASSAY_OK);
    assert_true(slo.ttft_s == 0.5 && slo.tpot_s == 0.05);

    expect_slo_error("{\"format\": \"assay-slo\", \"version\": 1, \"ttft_s\": 0.5,, }",
                     ASSAY_ERR_PARSE, "byte 52 (line 1, column 53)", "well-formed JSON", "','");
    expect_slo_error("{\"format\": \"assay-slo\"", ASSAY_ERR_PARSE,
                     "byte 22 (line 1, column 23)", "a complete JSON object", "end of the input");
    /* Where, as an editor counts it: line 2, column 15. */
    expect_slo_error("{\"format\": \"assay-slo\",\n \"version\": 1,,}", ASSAY_ERR_PARSE,
                     "byte 38 (line 2, column 15)", "well-formed JSON", "','");
    expect_slo_error("[1, 2]", ASSAY_ERR_PARSE, "", "a JSON object", "an array");
    expect_slo_error("{\"format\": \"assay-workload\", \"version\": 1}", ASSAY_ERR_PARSE, "format",
                     "\"assay-slo\"", "\"assay-workload\"");
    expect_slo_error("{\"version\": 1}", ASSAY_ERR_PARSE, "format", "\"assay-slo\"", "missing");
    expect_slo_error("{\"format\": \"assay-slo\", \"version\": 2, \"ttft_s\": 1, \"tpot_s\": 1}",
                     ASSAY_ERR_PARSE, "version", "version 1", "2");
    expect_slo_error("{\"format\": \"assay-slo\", \"version\": \"1\"}", ASSAY_ERR_PARSE, "version",
                     "the number 1", "a string");
    expect_slo_error("{\"format\": \"assay-slo\", \"version\": 1, \"tpot_s\": 0.05}",
                     ASSAY_ERR_PARSE, "ttft_s", "seconds > 0", "missing");
    expect_slo_error("{\"format\": \"assay-slo\", \"version\": 1, \"ttft_s\": 0.5, \"tpot_s\": -1}",
                     ASSAY_ERR_PARSE, "tpot_s", "seconds > 0", "-1");
    expect_slo_error("{\"format\": \"assay-slo\", \"version\": 1, \"ttft_s\": \"0.5\", \"tpot_s\": 1}",
                     ASSAY_ERR_PARSE, "ttft_s", "a number", "a string");
    expect_slo_error("{\"format\": \"assay-slo\", \"version\": 1, \"ttft_s\": 0.5, \"tpot_s\": 1, "
                     "\"ttft\": 2}",
                     ASSAY_ERR_PARSE, "ttft", "only format", "unknown member");
    expect_slo_error("{\"format\": \"assay-slo\", \"version\": 1, \"ttft_s\": 0.5, \"tpot_s\": 1, "
                     "\"ttft_s\": 2}",
                     ASSAY_ERR_PARSE, "ttft_s", "once", "twice");
    expect_slo_error("{\"format\": \"assay-slo\", \"version\": 1, \"ttft_s\": 0.5, \"tpot_s\": 1} x",
                     ASSAY_ERR_PARSE, "byte 66 (line 1, column 67)", "end of the input", "'x'");

    /* Stricter than cJSON where cJSON is lenient. */
    expect_slo_error("{\"format\": \"assay-slo\", \"version\": 01}", ASSAY_ERR_PARSE,
                     "byte 36 (line 1, column 37)", "well-formed JSON", "'1'");
    expect_slo_error("{\"format\": \"assay-slo\", \"version\": +1}", ASSAY_ERR_PARSE,
                     "byte 35 (line 1, column 36)", "well-formed JSON", "'+'");
    expect_slo_error("{\"description\": \"\\ud800x\"}", ASSAY_ERR_PARSE,
                     "byte 23 (line 1, column 24)", "well-formed JSON", "'x'");
    expect_slo_error("{\"description\": \"a\tb\"}", ASSAY_ERR_PARSE,
                     "byte 18 (line 1, column 19)", "well-formed JSON", "byte 0x09");
    expect_slo_error("", ASSAY_ERR_PARSE, "byte 0 (line 1, column 1)", "a complete JSON object",
                     "end of the input");

    /* Files: a good one, a missing one. */
    char path[512];
    assay_test_scratch("slo.json", path, sizeof path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"format\": \"assay-slo\", \"version\": 1, \"ttft_s\": 0.25, \"tpot_s\": 0.02}\n", f);
    fclose(f);
    assert_int_equal(assay_slo_load(path, &slo, &d), ASSAY_OK);
    assert_true(slo.ttft_s == 0.25 && slo.tpot_s == 0.02);
    remove(path);
    assert_int_equal(assay_slo_load(path, &slo, &d), ASSAY_ERR_IO);
    assert_string_equal(d.file, path);
    assert_non_null(strstr(d.expected, "readable"));
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    gsl_set_error_handler_off();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentile_nearest_rank),
        cmocka_unit_test(test_sufficiency_hand_cases),
        cmocka_unit_test(test_lateness_bins),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_slo_reader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
