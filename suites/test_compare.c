/*
 * assay compare's library parts: the speed analysis (bench/speedup.h) on
 * runs of a known difference and under the null, the interval's coverage
 * beside a request-level bootstrap's, interleaved runs of two real engines,
 * the plugin loader (adapters/plugin.h) with every way a plugin can be
 * wrong, and the "compare" member of the report with its Markdown and
 * JUnit renderings.
 *
 *   test_compare PLUGIN_OK PLUGIN_ABI PLUGIN_NO_STEP PLUGIN_NO_ENTRY
 *   (CTest passes the fixture plugins built from plugin_fixture.c)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/plugin.h"
#include "adapters/spec.h"
#include "bench/speedup.h"
#include "checks/harness.h"
#include "core/alloc.h"
#include "core/rng.h"
#include "core/workload.h"
#include "reports/compare_report.h"
#include "reports/html.h"
#include "reports/markdown.h"
#include "reports/report.h"
#include "reports/schema.h"
#include "reports/stamp.h"
#include "support.h"

static const char *g_plugin_ok = "";
static const char *g_plugin_abi = "";
static const char *g_plugin_no_step = "";
static const char *g_plugin_no_entry = "";

/* ---- synthetic runs ---------------------------------------------------- */

#define MAX_PAIRS 16
#define PER_RUN 40

struct synth {
    double ttft[2][MAX_PAIRS][PER_RUN];
    double tpot[2][MAX_PAIRS][PER_RUN];
    struct assay_speedup_run_data runs[2][MAX_PAIRS];
};

/* A standard normal from two uniforms of a counter stream (Box-Muller). */
static double normal(uint64_t seed, uint64_t k)
{
    double u1 = assay_rng_u01(seed, 2 * k, 7), u2 = assay_rng_u01(seed, 2 * k + 1, 7);
    return sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(2.0 * M_PI * u2);
}

/*
 * n_pairs pairs of runs. Each request's latency is lognormal (sigma 0.5)
 * around a median of 10 ms (TTFT) or 2 ms (TPOT); each *pair* shares a
 * drift factor exp(drift_sigma z) (the machine's moment, the same for both
 * runs of a pair), and each run has its own run factor exp(run_sigma z).
 * The candidate's latencies are scaled by ttft_scale / tpot_scale; its
 * output tokens by tokens_scale. Goodput: good[e] requests per run.
 */
static void synthesize(struct synth *s, uint64_t seed, int32_t n_pairs, double drift_sigma,
                       double run_sigma, double ttft_scale, double tpot_scale, double tokens_scale,
                       const int64_t good[2])
{
    uint64_t k = 0;
    for (int32_t r = 0; r < n_pairs; r++) {
        double drift = exp(drift_sigma * normal(seed, k++));
        for (int e = 0; e < 2; e++) {
            double run = exp(run_sigma * normal(seed, k++));
            for (int i = 0; i < PER_RUN; i++) {
                double a = 0.010 * drift * run * exp(0.5 * normal(seed, k++));
                double b = 0.002 * drift * run * exp(0.5 * normal(seed, k++));
                s->ttft[e][r][i] = e == 1 ? a * ttft_scale : a;
                s->tpot[e][r][i] = e == 1 ? b * tpot_scale : b;
            }
            s->runs[e][r] = (struct assay_speedup_run_data){
                .ttft = s->ttft[e][r], .n_ttft = PER_RUN, .tpot = s->tpot[e][r], .n_tpot = PER_RUN,
                .output_tokens = (int64_t)(1000 * (e == 1 ? tokens_scale : 1.0)),
                .n_good = good[e], .duration_s = 2.0 * drift};
        }
    }
}

static struct assay_speedup_params params(int32_t n_pairs)
{
    struct assay_speedup_params p = assay_speedup_default_params();
    p.n_pairs = n_pairs;
    p.has_slo = true;
    p.slo = (struct assay_slo){0.5, 0.05};
    return p;
}

static void test_known_speedup(void **state)
{
    (void)state;
    static struct synth s;
    const int64_t good[2] = {30, 30};
    synthesize(&s, 11, 6, 0.2, 0.05, 0.5, 0.25, 1.0, good);
    struct assay_speedup_params p = params(6);
    struct assay_speedup_figure fig[ASSAY_SPEEDUP_COUNT];
    enum assay_speedup_verdict v;
    assert_int_equal(assay_speedup_analyse(s.runs[0], s.runs[1], 6, &p, fig, &v), ASSAY_OK);
    /* The latencies were halved (TTFT) and quartered (TPOT): every interval
     * holds the truth, and those of the medians and p90s exclude 1 (a p99
     * of 240 requests is about their 3rd largest: too few to tell 2x apart
     * from noise of this spread, and its interval says so). */
    for (int m = ASSAY_SPEEDUP_TTFT_P50; m <= ASSAY_SPEEDUP_TPOT_P99; m++) {
        double truth = m <= ASSAY_SPEEDUP_TTFT_P99 ? 0.5 : 0.25;
        printf("  %-9s ratio %.3f [%.3f, %.3f] (true %.2f)\n",
               assay_speedup_metric_label((enum assay_speedup_metric)m), fig[m].ratio, fig[m].lo,
               fig[m].hi, truth);
        assert_true(fig[m].lo <= fig[m].ratio && fig[m].ratio <= fig[m].hi);
        assert_true(fig[m].lo <= truth * 1.0001 && truth * 0.9999 <= fig[m].hi);
        if (m != ASSAY_SPEEDUP_TTFT_P99 && m != ASSAY_SPEEDUP_TPOT_P99) {
            assert_true(fig[m].hi < 1.0);
            assert_int_equal(fig[m].change, ASSAY_SPEEDUP_BETTER);
        }
        assert_false(fig[m].regression);
        assert_int_equal(fig[m].n_baseline, 6 * PER_RUN);
    }
    /* Same tokens, same durations: throughput and goodput did not move. */
    assert_true(fabs(fig[ASSAY_SPEEDUP_THROUGHPUT].ratio - 1.0) < 1e-12);
    assert_int_equal(fig[ASSAY_SPEEDUP_THROUGHPUT].change, ASSAY_SPEEDUP_SAME);
    assert_int_equal(fig[ASSAY_SPEEDUP_GOODPUT].change, ASSAY_SPEEDUP_SAME);
    assert_int_equal(v, ASSAY_SPEEDUP_FASTER);
}

static void test_no_difference(void **state)
{
    (void)state;
    static struct synth s;
    const int64_t good[2] = {30, 30};
    synthesize(&s, 12, 6, 0.2, 0.05, 1.0, 1.0, 1.0, good);
    struct assay_speedup_params p = params(6);
    struct assay_speedup_figure fig[ASSAY_SPEEDUP_COUNT];
    enum assay_speedup_verdict v;
    assert_int_equal(assay_speedup_analyse(s.runs[0], s.runs[1], 6, &p, fig, &v), ASSAY_OK);
    for (int m = 0; m < ASSAY_SPEEDUP_COUNT; m++) {
        assert_true(fig[m].lo <= 1.0 && 1.0 <= fig[m].hi);
        assert_int_equal(fig[m].change, ASSAY_SPEEDUP_SAME);
    }
    assert_int_equal(v, ASSAY_SPEEDUP_NO_DIFFERENCE);
}

static void test_regression_threshold_and_gate(void **state)
{
    (void)state;
    static struct synth s;
    const int64_t good[2] = {30, 30};
    /* TPOT 1.5 times worse, tokens/s 40% lower. */
    synthesize(&s, 13, 6, 0.2, 0.05, 1.0, 1.5, 0.6, good);
    struct assay_speedup_params p = params(6);
    struct assay_speedup_figure fig[ASSAY_SPEEDUP_COUNT];
    enum assay_speedup_verdict v;
    assert_int_equal(assay_speedup_analyse(s.runs[0], s.runs[1], 6, &p, fig, &v), ASSAY_OK);
    assert_int_equal(v, ASSAY_SPEEDUP_REGRESSION);
    assert_true(fig[ASSAY_SPEEDUP_TPOT_P50].regression);
    assert_true(fig[ASSAY_SPEEDUP_TPOT_P50].lo > 1.1);
    assert_true(fig[ASSAY_SPEEDUP_THROUGHPUT].regression);
    assert_false(fig[ASSAY_SPEEDUP_TTFT_P50].regression);
    /* A threshold the slowdown does not reach: slower, not a regression. */
    p.threshold = 2.0;
    assert_int_equal(assay_speedup_analyse(s.runs[0], s.runs[1], 6, &p, fig, &v), ASSAY_OK);
    assert_int_equal(v, ASSAY_SPEEDUP_SLOWER);
    assert_false(fig[ASSAY_SPEEDUP_TPOT_P50].regression);
    assert_int_equal(fig[ASSAY_SPEEDUP_TPOT_P50].change, ASSAY_SPEEDUP_WORSE);
    /* Back to 10%, but only TTFT gated: the TPOT and throughput slowdowns
     * are reported as worse and do not fail. */
    p.threshold = 0.10;
    for (int m = 0; m < ASSAY_SPEEDUP_COUNT; m++) {
        p.gate[m] = m <= ASSAY_SPEEDUP_TTFT_P99;
    }
    assert_int_equal(assay_speedup_analyse(s.runs[0], s.runs[1], 6, &p, fig, &v), ASSAY_OK);
    assert_int_equal(v, ASSAY_SPEEDUP_SLOWER);
    assert_int_equal(fig[ASSAY_SPEEDUP_TPOT_P50].change, ASSAY_SPEEDUP_WORSE);
    assert_false(fig[ASSAY_SPEEDUP_TPOT_P50].regression);
}

static void test_zero_goodput(void **state)
{
    (void)state;
    static struct synth s;
    const int64_t some[2] = {0, 25};
    synthesize(&s, 14, 4, 0.1, 0.05, 1.0, 1.0, 1.0, some);
    struct assay_speedup_params p = params(4);
    struct assay_speedup_figure fig[ASSAY_SPEEDUP_COUNT];
    enum assay_speedup_verdict v;
    assert_int_equal(assay_speedup_analyse(s.runs[0], s.runs[1], 4, &p, fig, &v), ASSAY_OK);
    assert_true(isinf(fig[ASSAY_SPEEDUP_GOODPUT].ratio));
    assert_int_equal(fig[ASSAY_SPEEDUP_GOODPUT].change, ASSAY_SPEEDUP_BETTER);
    const int64_t none[2] = {0, 0};
    synthesize(&s, 14, 4, 0.1, 0.05, 1.0, 1.0, 1.0, none);
    assert_int_equal(assay_speedup_analyse(s.runs[0], s.runs[1], 4, &p, fig, &v), ASSAY_OK);
    assert_true(isnan(fig[ASSAY_SPEEDUP_GOODPUT].ratio));
    assert_true(isnan(fig[ASSAY_SPEEDUP_GOODPUT].lo));
    assert_int_equal(fig[ASSAY_SPEEDUP_GOODPUT].change, ASSAY_SPEEDUP_SAME);
    /* Without an SLO goodput is not compared at all. */
    p.has_slo = false;
    assert_int_equal(assay_speedup_analyse(s.runs[0], s.runs[1], 4, &p, fig, &v), ASSAY_OK);
    assert_false(fig[ASSAY_SPEEDUP_GOODPUT].compared);
    /* Bad parameters are refused. */
    p.n_boot = 10;
    assert_int_equal(assay_speedup_analyse(s.runs[0], s.runs[1], 4, &p, fig, &v),
                     ASSAY_ERR_INVALID);
    char buf[64];
    assert_string_equal(assay_speedup_describe(buf, sizeof buf, 0.25), "4x lower");
    assert_string_equal(assay_speedup_describe(buf, sizeof buf, 1.123), "12.3% higher");
    assert_string_equal(assay_speedup_describe(buf, sizeof buf, INFINITY), "up from 0");
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median ratio's interval from resampling requests as if they were
 * independent (what assay does not do), for the comparison below. */
static void request_bootstrap(const struct synth *s, int32_t n_pairs, int32_t n_boot,
                              uint64_t seed, double *lo, double *hi)
{
    int32_t n = n_pairs * PER_RUN;
    double *pool = malloc(sizeof(double) * (size_t)n);
    double *ratios = malloc(sizeof(double) * (size_t)n_boot);
    assert_non_null(pool);
    assert_non_null(ratios);
    uint64_t k = 0;
    for (int32_t b = 0; b < n_boot; b++) {
        double med[2];
        for (int e = 0; e < 2; e++) {
            for (int32_t i = 0; i < n; i++) {
                int32_t j = (int32_t)(assay_rng_u01(seed, k++, 9) * n);
                j = j < n ? j : n - 1;
                pool[i] = s->ttft[e][j / PER_RUN][j % PER_RUN];
            }
            qsort(pool, (size_t)n, sizeof(double), cmp_d);
            med[e] = pool[(n + 1) / 2 - 1]; /* nearest rank */
        }
        ratios[b] = med[1] / med[0];
    }
    qsort(ratios, (size_t)n_boot, sizeof(double), cmp_d);
    *lo = ratios[(int32_t)(0.025 * n_boot)];
    *hi = ratios[(int32_t)ceil(0.975 * n_boot) - 1];
    free(pool);
    free(ratios);
}

/*
 * Coverage under the null: both engines the same, but every run has its
 * own moment on the machine (run_sigma 0.15: a run 15% slower or faster,
 * as on a shared machine). The pair bootstrap's 95% interval of the TTFT
 * p50 ratio should contain 1 about 95% of the time (a little less with few
 * pairs); resampling requests as if independent ignores the run effect and
 * covers far less. Printed side by side; the pair bootstrap must cover at
 * least 80% and beat the request bootstrap.
 */
static void test_interval_coverage(void **state)
{
    (void)state;
    static struct synth s;
    const int64_t good[2] = {30, 30};
    const int32_t trials = 150, n_pairs = 8;
    struct assay_speedup_params p = params(n_pairs);
    p.n_boot = 400;
    int32_t covered = 0, covered_pct = 0, covered_req = 0;
    for (int32_t t = 0; t < trials; t++) {
        synthesize(&s, 1000 + (uint64_t)t, n_pairs, 0.2, 0.15, 1.0, 1.0, 1.0, good);
        struct assay_speedup_figure fig[ASSAY_SPEEDUP_COUNT];
        enum assay_speedup_verdict v;
        p.boot_seed = 77 + (uint64_t)t;
        p.interval = ASSAY_SPEEDUP_INTERVAL_T;
        assert_int_equal(assay_speedup_analyse(s.runs[0], s.runs[1], n_pairs, &p, fig, &v),
                         ASSAY_OK);
        covered += fig[ASSAY_SPEEDUP_TTFT_P50].lo <= 1.0 && 1.0 <= fig[ASSAY_SPEEDUP_TTFT_P50].hi;
        p.interval = ASSAY_SPEEDUP_INTERVAL_PERCENTILE;
        assert_int_equal(assay_speedup_analyse(s.runs[0], s.runs[1], n_pairs, &p, fig, &v),
                         ASSAY_OK);
        covered_pct +=
            fig[ASSAY_SPEEDUP_TTFT_P50].lo <= 1.0 && 1.0 <= fig[ASSAY_SPEEDUP_TTFT_P50].hi;
        double lo, hi;
        request_bootstrap(&s, n_pairs, 400, 99 + (uint64_t)t, &lo, &hi);
        covered_req += lo <= 1.0 && 1.0 <= hi;
    }
    double cov = (double)covered / trials, cov_pct = (double)covered_pct / trials;
    double cov_req = (double)covered_req / trials;
    printf("  coverage of the nominal 95%% interval of TTFT p50 under the null (%d trials, %d "
           "pairs, run-to-run sigma 0.15):\n"
           "    pairs of runs, log ratio +- t(%d) s (assay's): %.1f%%\n"
           "    pairs of runs, percentile interval:          %.1f%%\n"
           "    requests as if independent, percentile:      %.1f%%\n",
           (int)trials, (int)n_pairs, (int)n_pairs - 1, 100 * cov, 100 * cov_pct,
           100 * cov_req);
    /* 150 trials: a binomial standard error of about 1.8 points at 95%. */
    assert_true(cov >= 0.90);
    assert_true(cov >= cov_pct);
    assert_true(cov_pct > cov_req);
}

/* ---- interleaved runs of two real engines -------------------------------- */

static struct assay_workload *speed_workload(void)
{
    static const char json[] =
        "{\"format\":\"assay-workload\",\"version\":1,\"name\":\"echo-16\","
        "\"description\":\"16 requests for the echo plugin\",\"generate\":{\"seed\":5,\"n\":16,"
        "\"vocab\":256,\"arrival\":{\"process\":\"poisson\",\"rate\":400},"
        "\"prompt_len\":{\"dist\":\"uniform\",\"min\":2,\"max\":8},"
        "\"output_len\":{\"dist\":\"uniform\",\"min\":4,\"max\":8}}}";
    struct assay_workload_limits lim = {256, 4096, 0};
    struct assay_workload *w = NULL;
    struct assay_diag d;
    assert_int_equal(assay_workload_parse(json, sizeof json - 1, "echo-16", &lim, &w, &d), ASSAY_OK);
    return w;
}

static void open_echo(const char *options, struct assay_adapter *a)
{
    char spec[1200];
    snprintf(spec, sizeof spec, "plugin:%s:%s", g_plugin_ok, options);
    struct assay_diag d;
    assay_diag_clear(&d);
    enum assay_status st = assay_adapter_open_spec(spec, a, &d);
    if (st != ASSAY_OK) {
        char why[900];
        fail_msg("%s: %s", spec, assay_diag_format(&d, why, sizeof why));
    }
}

static void test_interleaved_runs(void **state)
{
    (void)state;
    struct assay_adapter slow, fast;
    open_echo("delay_us=1500", &slow);
    open_echo("delay_us=100", &fast);
    struct assay_workload *w = speed_workload();
    struct assay_speedup_params p = params(4);
    p.gen.warmup = 0;
    struct assay_speedup_result r;
    assert_int_equal(assay_speedup_run(&slow, &fast, w, &p, &r), ASSAY_OK);
    assert_int_equal(r.n_pairs, 4);
    assert_int_equal(r.baseline.n_runs, 4);
    assert_int_equal(r.candidate.n_runs, 4);
    for (int32_t i = 0; i < 4; i++) {
        assert_int_equal(r.candidate_first[i], i % 2 == 1); /* A B, B A, A B, B A */
        assert_int_equal(r.baseline.runs[i].n_ok, 16);
        assert_int_equal(r.candidate.runs[i].n_ok, 16);
    }
    const struct assay_speedup_figure *tpot = &r.fig[ASSAY_SPEEDUP_TPOT_P50];
    printf("  TPOT p50: 1500 us/step engine %.3g s, 100 us/step engine %.3g s, ratio %.3f [%.3f, "
           "%.3f]\n",
           tpot->baseline, tpot->candidate, tpot->ratio, tpot->lo, tpot->hi);
    assert_int_equal(tpot->change, ASSAY_SPEEDUP_BETTER);
    assert_true(tpot->hi < 0.5);
    assert_true(r.verdict == ASSAY_SPEEDUP_FASTER || r.verdict == ASSAY_SPEEDUP_MIXED);
    assay_speedup_release(&r);
    /* The other way round, the slowdown is a regression. */
    assert_int_equal(assay_speedup_run(&fast, &slow, w, &p, &r), ASSAY_OK);
    assert_int_equal(r.verdict, ASSAY_SPEEDUP_REGRESSION);
    assert_true(r.fig[ASSAY_SPEEDUP_TPOT_P50].regression);
    assay_speedup_release(&r);
    /* One pair is no comparison. */
    p.n_pairs = 1;
    assert_int_equal(assay_speedup_run(&fast, &slow, w, &p, &r), ASSAY_ERR_INVALID);
    assay_speedup_release(&r);
    assay_workload_free(w);
    assay_adapter_close(&slow);
    assay_adapter_close(&fast);
}

/* ---- the plugin loader ---------------------------------------------------- */

static enum assay_status open_plugin(const char *args, struct assay_adapter *a, char *why,
                                     size_t size)
{
    struct assay_diag d;
    assay_diag_clear(&d);
    enum assay_status st = assay_plugin_open_spec(args, a, &d);
    assay_diag_format(&d, why, size);
    return st;
}

/* Whether the library at path is mapped into this process. */
static bool mapped(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[4096];
    bool found = false;
    while (fgets(line, sizeof line, f) != NULL) {
        found = found || strstr(line, path) != NULL;
    }
    fclose(f);
    return found;
}

static void test_plugin_errors(void **state)
{
    (void)state;
    struct assay_adapter a;
    char why[1024], args[1200];
    assert_int_equal(open_plugin("/nonexistent/libnothing.so", &a, why, sizeof why),
                     ASSAY_ERR_NOT_FOUND);
    assert_non_null(strstr(why, "/nonexistent/libnothing.so"));
    assert_non_null(strstr(why, "No such file"));
    assert_null(a.vt);
    assert_int_equal(open_plugin("", &a, why, sizeof why), ASSAY_ERR_INVALID);
    assert_int_equal(open_plugin(":x=1", &a, why, sizeof why), ASSAY_ERR_INVALID);
    /* A library, but no entry point. */
    assert_int_equal(open_plugin(g_plugin_no_entry, &a, why, sizeof why), ASSAY_ERR_NOT_FOUND);
    assert_non_null(strstr(why, "assay_plugin_open"));
    assert_false(mapped(g_plugin_no_entry));
    /* Not a library at all. */
    char text[1024];
    assay_test_scratch("not-a-library.so", text, sizeof text);
    FILE *f = fopen(text, "w");
    assert_non_null(f);
    fputs("this is not an ELF file\n", f);
    fclose(f);
    assert_int_equal(open_plugin(text, &a, why, sizeof why), ASSAY_ERR_IO);
    assert_non_null(strstr(why, "dlopen"));
    /* Built for another ABI. */
    assert_int_equal(open_plugin(g_plugin_abi, &a, why, sizeof why), ASSAY_ERR_UNSUPPORTED);
    char want[64];
    snprintf(want, sizeof want, "ABI version %d", ASSAY_ADAPTER_ABI_VERSION + 1);
    assert_non_null(strstr(why, want));
    assert_null(a.vt);
    /* A required slot missing: freed and unloaded. */
    assert_int_equal(open_plugin(g_plugin_no_step, &a, why, sizeof why), ASSAY_ERR_UNSUPPORTED);
    assert_non_null(strstr(why, "without step"));
    assert_false(mapped(g_plugin_no_step));
    /* Options the plugin refuses: its own message, and it is unloaded. */
    snprintf(args, sizeof args, "%s:speed=11", g_plugin_ok);
    assert_int_equal(open_plugin(args, &a, why, sizeof why), ASSAY_ERR_INVALID);
    assert_non_null(strstr(why, "expected delay_us=N, got 'speed=11'"));
    assert_false(mapped(g_plugin_ok));
    /* The spec check: loads and finds the entry, nothing stays. */
    struct assay_diag d;
    snprintf(args, sizeof args, "plugin:%s", g_plugin_ok);
    assert_int_equal(assay_spec_check(args, &d), ASSAY_OK);
    assert_false(mapped(g_plugin_ok));
    snprintf(args, sizeof args, "plugin:%s", g_plugin_no_entry);
    assert_int_equal(assay_spec_check(args, &d), ASSAY_ERR_NOT_FOUND);
    /* Memory running out at each allocation of the loader. */
    snprintf(args, sizeof args, "%s", g_plugin_ok);
    assay_test_fail_alloc_at(1);
    assert_int_equal(open_plugin(args, &a, why, sizeof why), ASSAY_ERR_NOMEM);
    assay_test_fail_alloc_off();
    assert_false(mapped(g_plugin_ok));
}

static void test_plugin_forwards(void **state)
{
    (void)state;
    struct assay_adapter a;
    char why[1024], args[1200];
    snprintf(args, sizeof args, "%s", g_plugin_ok);
    assert_int_equal(open_plugin(args, &a, why, sizeof why), ASSAY_OK);
    assert_true(mapped(g_plugin_ok));
    struct assay_adapter_info info;
    assay_adapter_get_info(&a, &info);
    char spec[1200];
    snprintf(spec, sizeof spec, "plugin:%s", g_plugin_ok);
    assert_string_equal(info.spec, spec); /* assay knows the path; the plugin does not */
    assert_string_equal(info.name, "echo");
    assert_int_equal(info.vocab, 260);
    /* Slots the plugin leaves NULL stay NULL, so checks say SKIP. */
    assert_null(a.vt->block_stats);
    assert_null(a.vt->block_audit);
    assert_null(a.vt->set_logits_sink);
    assert_null(a.vt->check_invariants);
    assert_non_null(a.vt->last_error);
    /* Requests go through and come back. */
    struct assay_workload *w = speed_workload();
    struct assay_transcript *t = NULL;
    assert_int_equal(assay_harness_run(&a, w, NULL, &t), ASSAY_OK);
    assert_int_equal(t->status, ASSAY_OK);
    for (int32_t i = 0; i < w->n; i++) {
        assert_int_equal(t->reqs[i].n_events, w->reqs[i].max_tokens);
        assert_int_equal(t->reqs[i].tokens[0], w->reqs[i].prompt[0]);
    }
    assay_transcript_free(t);
    struct assay_request bad = {.id = 1, .prompt = NULL, .prompt_len = 0, .max_tokens = 1};
    assert_int_equal(a.vt->add_request(a.self, &bad), ASSAY_ERR_INVALID);
    assert_string_equal(a.vt->last_error(a.self), "empty prompt or max_tokens < 1");
    assay_workload_free(w);
    /* Freed, then unloaded. */
    assay_adapter_close(&a);
    assert_null(a.vt);
    assert_false(mapped(g_plugin_ok));
    /* Two instances from one file (a baseline and a candidate). */
    struct assay_adapter b;
    snprintf(args, sizeof args, "%s:delay_us=1", g_plugin_ok);
    assert_int_equal(open_plugin(g_plugin_ok, &a, why, sizeof why), ASSAY_OK);
    assert_int_equal(open_plugin(args, &b, why, sizeof why), ASSAY_OK);
    assay_adapter_close(&a);
    assert_true(mapped(g_plugin_ok)); /* still used by b */
    assay_adapter_close(&b);
    assert_false(mapped(g_plugin_ok));
}

/* ---- the report's "compare" member ---------------------------------------- */

static void fill_speed(struct assay_speedup_result *s)
{
    memset(s, 0, sizeof *s);
    s->params = assay_speedup_default_params();
    s->params.has_slo = true;
    s->params.slo = (struct assay_slo){0.5, 0.05};
    s->n_pairs = 2;
    static bool first[2] = {false, true};
    s->candidate_first = first;
    for (int m = 0; m < ASSAY_SPEEDUP_COUNT; m++) {
        s->fig[m] = (struct assay_speedup_figure){0.01, 0.005, 0.5, 0.4, 0.6, 80, 80, true,
                                                  ASSAY_SPEEDUP_BETTER, false};
    }
    s->fig[ASSAY_SPEEDUP_TPOT_P99] = (struct assay_speedup_figure){
        0.01, 0.02, 2.0, 1.5, 2.5, 80, 80, true, ASSAY_SPEEDUP_WORSE, true};
    s->fig[ASSAY_SPEEDUP_GOODPUT].lo = NAN;
    s->verdict = ASSAY_SPEEDUP_REGRESSION;
    s->status = ASSAY_OK;
}

static cJSON *compare_report(struct assay_speedup_result *speed, struct assay_check_result *res)
{
    assay_check_result_init(&res[0], "compare.greedy", ASSAY_FAMILY_EQUIVALENCE);
    res[0].verdict = ASSAY_VERDICT_FAIL;
    snprintf(res[0].failure, sizeof res[0].failure, "request 3 <&> position 0: token 7 vs 9");
    snprintf(res[0].repro, sizeof res[0].repro, "assay compare 'a' 'b' --check compare.greedy");
    assay_check_result_init(&res[1], "compare.blocks", ASSAY_FAMILY_PROPERTY);
    res[1].verdict = ASSAY_VERDICT_SKIP;
    snprintf(res[1].failure, sizeof res[1].failure, "needs block_audit");
    assay_check_result_init(&res[2], "compare.trace", ASSAY_FAMILY_PROPERTY);
    snprintf(res[2].summary, sizeof res[2].summary, "16 requests in");
    static struct assay_shrink_result sr;
    memset(&sr, 0, sizeof sr);
    sr.reproduced = sr.shrinkable = sr.confirmed = true;
    sr.before.n_requests = 20;
    sr.after.n_requests = 2;
    snprintf(sr.command, sizeof sr.command,
             "assay compare 'a' 'b' --check compare.greedy --check-workload compare.greedy=r.json");
    snprintf(sr.workload, sizeof sr.workload, "r.json");
    struct assay_compare_repro repro = {"compare.greedy", &sr};
    struct assay_adapter_info bi = {.name = "bundled", .spec = "a", .model_name = "tinygpt",
                                    .weights_sha256 = "ab"};
    struct assay_compare_facts f = {
        .baseline_spec = "a", .candidate_spec = "b", .baseline = &bi, .candidate = &bi,
        .weights = "the candidate (bundled)", .checks = res, .n_checks = 3, .repros = &repro,
        .n_repros = 1, .speed = speed, .workload = NULL, .exit_status = 1};
    cJSON *r = NULL, *c = NULL, *stamp = NULL;
    assert_int_equal(assay_report_create("compare", "assay compare a b", &r), ASSAY_OK);
    assert_int_equal(assay_stamp_create(NULL, NULL, 0, &stamp), ASSAY_OK);
    assert_int_equal(assay_report_set(r, "stamp", stamp), ASSAY_OK);
    assert_int_equal(assay_report_add_checks(r, res, 3), ASSAY_OK);
    assert_int_equal(assay_report_compare_json(&f, &c), ASSAY_OK);
    assert_int_equal(assay_report_set(r, "compare", c), ASSAY_OK);
    return r;
}

static void test_report_member(void **state)
{
    (void)state;
    struct assay_speedup_result speed;
    fill_speed(&speed);
    struct assay_check_result res[3];
    cJSON *r = compare_report(&speed, res);
    struct assay_diag d;
    assay_diag_clear(&d);
    assert_int_equal(assay_report_validate(r, &d), ASSAY_OK);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "compare");
    assert_int_equal(assay_json_bool(c, "verdict.correct"), 0);
    assert_string_equal(assay_json_str(c, "verdict.speed", ""), "regression");
    assert_string_equal(cJSON_GetArrayItem(assay_json_path(c, "verdict.failed_checks"), 0)->valuestring,
                        "compare.greedy");
    const char *head = assay_json_str(c, "verdict.headline", "");
    assert_non_null(strstr(head, "INCORRECT: compare.greedy failed"));
    assert_non_null(strstr(head, "REGRESSION"));
    assert_non_null(strstr(head, "TPOT p99 2x higher")); /* the regression first */
    /* A NaN is null, never a number. */
    const cJSON *goodput = cJSON_GetArrayItem(assay_json_path(c, "speed.metrics"), ASSAY_SPEEDUP_GOODPUT);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(goodput, "ci_low")));

    /* The pull-request summary and JUnit. */
    char *md = NULL, *xml = NULL;
    size_t n_md = 0, n_xml = 0;
    assert_int_equal(assay_report_compare_summary(r, &md, &n_md), ASSAY_OK);
    assert_non_null(strstr(md, "## assay compare: **INCORRECT**, **REGRESSION**"));
    assert_non_null(strstr(md, "compare.greedy=r.json\n```"));
    assert_non_null(strstr(md, "request 3 &lt;&amp;&gt; position 0"));
    assert_non_null(strstr(md, "| TPOT p99 | 10 ms | 20 ms | 2x higher | 2 [1.5, 2.5] | **REGRESSION** |"));
    assert_int_equal(assay_report_compare_junit(r, &xml, &n_xml), ASSAY_OK);
    assert_non_null(strstr(xml, "tests=\"11\" failures=\"2\" errors=\"0\" skipped=\"1\""));
    assert_non_null(strstr(xml, "<failure message=\"request 3 &lt;&amp;&gt; position 0"));
    assert_non_null(strstr(xml, "Reproduce: assay compare &#39;a&#39;"));
    assert_non_null(strstr(xml, "<skipped message=\"needs block_audit\"/>"));
    assert_non_null(strstr(xml, "name=\"tpot_p99\" time=\"0\">\n      <failure message=\"regression"));
    /* No raw '<' or '&' inside any attribute value or text: every one opens
     * a tag or an entity. */
    for (const char *p = xml; *p != '\0'; p++) {
        if (*p == '&') {
            assert_true(strncmp(p, "&amp;", 5) == 0 || strncmp(p, "&lt;", 4) == 0 ||
                        strncmp(p, "&gt;", 4) == 0 || strncmp(p, "&quot;", 6) == 0 ||
                        strncmp(p, "&#39;", 5) == 0);
        }
    }
    assay_free(md);
    assay_free(xml);
    /* The full renderings carry the section. */
    char *html = NULL;
    size_t n_html = 0;
    assert_int_equal(assay_report_render_markdown(r, &md, &n_md), ASSAY_OK);
    assert_non_null(strstr(md, "## Comparison"));
    assert_int_equal(assay_report_render_html(r, &html, &n_html), ASSAY_OK);
    assert_non_null(strstr(html, "<section id=\"compare\">"));
    assay_free(md);
    assay_free(html);

    /* The validator names what is wrong. */
    cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                                       cJSON_GetObjectItemCaseSensitive(
                                           cJSON_GetObjectItemCaseSensitive(r, "compare"), "speed"),
                                       "metrics"),
                                   0);
    cJSON_ReplaceItemInObjectCaseSensitive(m0, "change", cJSON_CreateString("faster"));
    assert_int_equal(assay_report_validate(r, &d), ASSAY_ERR_PARSE);
    assert_string_equal(d.where, "compare.speed.metrics[0].change");
    cJSON_ReplaceItemInObjectCaseSensitive(m0, "change", cJSON_CreateString("better"));
    cJSON_DeleteItemFromObjectCaseSensitive(m0, "ci_high");
    assert_int_equal(assay_report_validate(r, &d), ASSAY_ERR_PARSE);
    assert_string_equal(d.where, "compare.speed.metrics[0].ci_high");
    cJSON_ReplaceItemInObjectCaseSensitive(r, "compare", cJSON_CreateString("nope"));
    assert_int_equal(assay_report_validate(r, &d), ASSAY_ERR_PARSE);
    assert_string_equal(d.where, "compare");
    cJSON_Delete(r);
}

static void test_report_allocation_failures(void **state)
{
    (void)state;
    struct assay_speedup_result speed;
    fill_speed(&speed);
    struct assay_check_result res[3];
    cJSON *r = compare_report(&speed, res);
    cJSON *c = NULL;
    struct assay_adapter_info bi = {.name = "", .spec = "", .model_name = "", .weights_sha256 = ""};
    struct assay_compare_facts f = {.baseline_spec = "a", .candidate_spec = "b", .baseline = &bi,
                                    .candidate = &bi, .checks = res, .n_checks = 3,
                                    .speed = &speed, .exit_status = 3};
    /* Every allocation of the member, failed in turn: NOMEM, nothing leaked. */
    for (long k = 1; k < 2000; k++) {
        assay_test_fail_alloc_at(k);
        long live = assay_test_alloc_live();
        enum assay_status st = assay_report_compare_json(&f, &c);
        assay_test_fail_alloc_off();
        if (st == ASSAY_OK) {
            cJSON_Delete(c);
            break;
        }
        assert_int_equal(st, ASSAY_ERR_NOMEM);
        assert_null(c);
        assert_int_equal(assay_test_alloc_live(), live);
    }
    cJSON_Delete(r);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc < 5) {
        fprintf(stderr, "usage: test_compare PLUGIN_OK PLUGIN_ABI PLUGIN_NO_STEP PLUGIN_NO_ENTRY\n");
        return 2;
    }
    g_plugin_ok = argv[1];
    g_plugin_abi = argv[2];
    g_plugin_no_step = argv[3];
    g_plugin_no_entry = argv[4];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_speedup),
        cmocka_unit_test(test_no_difference),
        cmocka_unit_test(test_regression_threshold_and_gate),
        cmocka_unit_test(test_zero_goodput),
        cmocka_unit_test(test_interval_coverage),
        cmocka_unit_test(test_interleaved_runs),
        cmocka_unit_test(test_plugin_errors),
        cmocka_unit_test(test_plugin_forwards),
        cmocka_unit_test(test_report_member),
        cmocka_unit_test(test_report_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
