/* The JSON report and its renderings (reports/report.h, html.h,
 * markdown.h, write.h): the schema's required fields, the round trip from
 * JSON to `assay report` and back to the same renderings, self-contained
 * HTML, the seed table's paragraph, atomic writes (a read-only or full
 * directory gives a clear error and leaves no file), allocation failures,
 * and the command's exit codes and messages.
 *
 *   test_report ASSAY_BINARY   (CTest passes the built assay command) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/null_engine.h"
#include "checks/evidence.h"
#include "checks/stats.h"
#include "core/alloc.h"
#include "reports/html.h"
#include "reports/kill_matrix.h"
#include "reports/markdown.h"
#include "reports/report.h"
#include "reports/schema.h"
#include "reports/stamp.h"
#include "reports/write.h"
#include "support.h"

static const char *g_assay = "assay";
static const char *g_assay_mutants = NULL; /* the planted-bug build, when built */

#define REPRO "assay verify --check dist.gof.first --engine 'bundled:spec=2' --workload \"a&b<c>.json\""

/* ---- a report built from real (null-engine) benchmark data ------------- */

static struct assay_workload *small_workload(void)
{
    static const char json[] =
        "{\"format\":\"assay-workload\",\"version\":1,\"name\":\"null-24\","
        "\"description\":\"24 short requests for the null engine\",\"generate\":{\"seed\":3,"
        "\"n\":24,\"vocab\":256,\"arrival\":{\"process\":\"poisson\",\"rate\":100},"
        "\"prompt_len\":{\"dist\":\"uniform\",\"min\":4,\"max\":16},"
        "\"output_len\":{\"dist\":\"uniform\",\"min\":2,\"max\":8}}}";
    struct assay_workload_limits lim = {256, 1024, 0};
    struct assay_workload *w = NULL;
    struct assay_diag d;
    assert_int_equal(assay_workload_parse(json, sizeof json - 1, "null-24", &lim, &w, &d), ASSAY_OK);
    return w;
}

static void fill_results(struct assay_check_result r[4])
{
    assay_check_result_init(&r[0], "equiv.kv-cache", ASSAY_FAMILY_EQUIVALENCE);
    snprintf(r[0].engine, sizeof r[0].engine, "bundled:kv=contiguous");
    snprintf(r[0].summary, sizeof r[0].summary, "20 requests, 242 tokens compared");
    r[0].n_tokens = 242;
    r[0].tie_tol = 1e-3;
    r[0].max_tie_gap = NAN; /* left unknown: must become null */
    r[0].max_logit_diff = 2.17e-5;
    r[0].seconds = 1.5;
    assay_check_result_init(&r[1], "dist.gof.first", ASSAY_FAMILY_DISTRIBUTIONAL);
    r[1].verdict = ASSAY_VERDICT_FAIL;
    snprintf(r[1].engine, sizeof r[1].engine, "bundled:spec=2");
    snprintf(r[1].summary, sizeof r[1].summary, "chi2 391 df 19");
    snprintf(r[1].failure, sizeof r[1].failure, "p 1e-12 < alpha 1e-06 after Holm");
    snprintf(r[1].repro, sizeof r[1].repro, "%s", REPRO);
    r[1].alpha = 1e-6;
    r[1].n = 70000;
    r[1].statistic = 391;
    r[1].df = 19;
    r[1].p_value = 1e-12;
    r[1].p_adjusted = 7e-12;
    r[1].min_tv = 0.0175;
    r[1].power = 0.99;
    r[1].n_impossible = 3;
    r[1].rule_fired = true;
    r[1].statistic_fired = true;
    /* Its evidence: two own bins and a pooled tail, and a PIT histogram. */
    struct assay_evidence *ev = &r[1].evidence;
    static const struct assay_evidence_bin bins[3] = {
        {"17", 40100, 39990.5, NAN, false, false},
        {"43", 28900, 29010.5, NAN, false, false},
        {"pooled tail (12)", 1000, 999, NAN, true, false},
    };
    ev->kind = ASSAY_EVIDENCE_GOF;
    ev->n_bins = 3;
    ev->n_test_bins = 3;
    memcpy(ev->bins, bins, sizeof bins);
    ev->pit_n = 2000;
    for (int i = 0; i < ASSAY_EVIDENCE_PIT_BINS; i++) {
        ev->pit[i] = 100 + (i % 2 == 0 ? 7 : -7);
    }
    ev->pit_ks_d = 0.0123;
    assay_check_result_init(&r[2], "prop.isolation", ASSAY_FAMILY_PROPERTY);
    r[2].verdict = ASSAY_VERDICT_SKIP;
    snprintf(r[2].failure, sizeof r[2].failure, "the engine exposes no logits");
    assay_check_result_init(&r[3], "prop.blocks", ASSAY_FAMILY_PROPERTY);
    r[3].n_steps = 131;
    r[3].n_checks = 133;
}

/* A complete report: four checks (PASS, FAIL, SKIP, PASS), a stamp, and a
 * benchmark, seed table and sweep measured on the null engine. */
static cJSON *make_report(void)
{
    struct assay_adapter a;
    struct assay_null_engine_params np = assay_null_engine_default_params();
    assert_int_equal(assay_null_engine_open(&np, &a), ASSAY_OK);
    struct assay_workload *w = small_workload();
    struct assay_slo slo = {.ttft_s = 0.05, .tpot_s = 0.05};
    cJSON *r = NULL, *j = NULL;
    assert_int_equal(assay_report_create("run", "assay run --quick", &r), ASSAY_OK);
    struct assay_check_result res[4];
    fill_results(res);
    assert_int_equal(assay_report_add_checks(r, res, 4), ASSAY_OK);

    struct assay_loadgen_params lp = assay_loadgen_default_params();
    lp.rate = 2000;
    lp.timeout_s = 30;
    struct assay_bench_result br;
    assert_int_equal(assay_bench_run(&a, w, &lp, &slo, 2, &br), ASSAY_OK);
    assert_int_equal(assay_bench_result_to_json(&br, w, &j), ASSAY_OK);
    assert_int_equal(assay_report_set(r, "benchmark", j), ASSAY_OK);
    assay_bench_result_release(&br);

    struct assay_seedtable_params tp = assay_seedtable_default_params();
    tp.n_runs = 1;
    tp.timeout_s = 30;
    struct assay_seedtable t;
    assert_int_equal(assay_seedtable_run(&a, w, &tp, &slo, &t), ASSAY_OK);
    assert_int_equal(assay_report_seedtable_json(&t, w, &j), ASSAY_OK);
    assert_int_equal(assay_report_set(r, "seed_table", j), ASSAY_OK);
    assay_seedtable_release(&t);

    struct assay_sweep_params sp = assay_sweep_default_params();
    sp.start_rate = 1000;
    sp.min_rate = 100;
    sp.max_rate = 1e5;
    sp.max_probes = 4;
    sp.timeout_s = 30;
    struct assay_sweep_result sr;
    enum assay_status st = assay_rate_sweep(&a, w, &sp, &slo, &sr);
    assert_int_equal(st, ASSAY_OK);
    assert_int_equal(assay_report_sweep_json(&sr, &sp, &slo, st, &j), ASSAY_OK);
    assert_int_equal(assay_report_set(r, "rate_sweep", j), ASSAY_OK);

    struct assay_stamp_seed seeds[] = {{"master", 1}};
    assert_int_equal(assay_stamp_create(&a, seeds, 1, &j), ASSAY_OK);
    assert_int_equal(assay_report_set(r, "stamp", j), ASSAY_OK);
    assert_int_equal(assay_report_add_note(r, "a note with <markup> & \"quotes\""), ASSAY_OK);
    assay_workload_free(w);
    assay_adapter_close(&a);
    return r;
}

static int setup(void **state)
{
    *state = make_report();
    return 0;
}

static int teardown(void **state)
{
    cJSON_Delete(*state);
    return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void assert_same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *x = read_all(a, &na), *y = read_all(b, &nb);
    assert_non_null(x);
    assert_non_null(y);
    if (na != nb || memcmp(x, y, na) != 0) {
        size_t i = 0;
        while (i < na && i < nb && x[i] == y[i]) {
            i++;
        }
        fail_msg("%s and %s differ at byte %zu (sizes %zu, %zu)", a, b, i, na, nb);
    }
    free(x);
    free(y);
}

static const char *scratch_dir(const char *name, char *buf, size_t size)
{
    assay_test_scratch(name, buf, size);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", buf, buf);
    assert_int_equal(system(cmd), 0);
    return buf;
}

/* Run a shell command; its exit status, and its combined output in out. */
static int run(const char *cmd, char *out, size_t size)
{
    size_t n_full = strlen(cmd) + 8;
    char *full = malloc(n_full);
    assert_non_null(full);
    snprintf(full, n_full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    free(full);
    assert_non_null(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Delete the member at a path like "checks[1].repro" or "stamp.assay.x". */
static void delete_path(cJSON *root, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    cJSON *cur = root;
    char *seg = buf;
    for (;;) {
        char *dot = strchr(seg, '.');
        if (dot != NULL) {
            *dot = '\0';
        }
        char *br = strchr(seg, '[');
        int index = -1;
        if (br != NULL) {
            index = atoi(br + 1);
            *br = '\0';
        }
        if (dot == NULL && index < 0) {
            assert_non_null(cJSON_GetObjectItemCaseSensitive(cur, seg));
            cJSON_DeleteItemFromObjectCaseSensitive(cur, seg);
            return;
        }
        cur = cJSON_GetObjectItemCaseSensitive(cur, seg);
        if (index >= 0) {
            cur = cJSON_GetArrayItem(cur, index);
        }
        assert_non_null(cur);
        if (dot == NULL) {
            fail_msg("path %s ends in an array element", path);
        }
        seg = dot + 1;
    }
}

/* ---- tests ------------------------------------------------------------------ */

/* A test with more bins than the evidence holds: the largest kept, the
 * pooled tail kept and marked, the rest folded into one bin that says how
 * many it holds; nothing counted twice or lost. */
static void test_evidence_folding(void **state)
{
    (void)state;
    enum { K = 150, N = 10000 };
    double prob[K];
    int64_t counts[K];
    for (int i = 0; i < K; i++) {
        /* 100 likely tokens (99 expected each), 50 pooled (2 each) */
        prob[i] = i < 100 ? 0.0099 : 0.0002;
        counts[i] = i < 100 ? 85 + i % 11 : i % 5;
    }
    int64_t n = 0;
    for (int i = 0; i < K; i++) {
        n += counts[i];
    }
    struct assay_gof_bins *bins = NULL;
    assert_int_equal(assay_gof_bins_make(prob, K, N, 5.0, &bins), ASSAY_OK);
    assert_int_equal(bins->n_bins, 101);
    struct assay_evidence ev;
    memset(&ev, 0, sizeof ev);
    assay_evidence_gof(&ev, bins, counts, n, 0);
    assert_int_equal(ev.kind, ASSAY_EVIDENCE_GOF);
    assert_int_equal(ev.n_bins, ASSAY_EVIDENCE_MAX_BINS);
    assert_int_equal(ev.n_test_bins, 101);
    /* 62 own bins kept, 38 folded, the pooled tail last */
    assert_int_equal(ev.n_folded, 101 - (ASSAY_EVIDENCE_MAX_BINS - 1));
    const struct assay_evidence_bin *others = &ev.bins[ASSAY_EVIDENCE_MAX_BINS - 2];
    const struct assay_evidence_bin *tail = &ev.bins[ASSAY_EVIDENCE_MAX_BINS - 1];
    assert_true(others->folded && !others->pooled);
    assert_string_equal(others->label, "others (38 bins)");
    assert_true(tail->pooled && !tail->folded);
    assert_string_equal(tail->label, "pooled tail (50)");
    assert_string_equal(ev.bins[0].label, "0");
    double so = 0, se = 0;
    int n_marked = 0;
    for (int b = 0; b < ev.n_bins; b++) {
        so += ev.bins[b].observed;
        se += ev.bins[b].expected;
        n_marked += ev.bins[b].pooled + ev.bins[b].folded;
    }
    assert_int_equal(n_marked, 2);
    assert_true(so == (double)n);
    assert_true(fabs(se - (double)n) <= 1e-9 * (double)n);
    assert_true(fabs(tail->expected - 0.01 * (double)n) <= 1e-9 * (double)n);
    assay_gof_bins_free(bins);
}

/* The number after `key` in s (e.g. "KS D 0.0097"), NaN when absent. */
static double number_after(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    return p != NULL ? strtod(p + strlen(key), NULL) : NAN;
}

/*
 * The evidence as a written report carries it, from real checks on the
 * bundled engine (assay compare: goodness of fit, PIT and homogeneity, at
 * T 1 with no cut, so the tail is pooled and the bins outnumber what is
 * kept): the bins add up to the samples, the expected counts to the same
 * within rounding, the pooled tail is marked when the test pooled one, the
 * bins are the test's (df + 1), and the PIT histogram holds every PIT value
 * with the KS distance the check reports.
 */
static void test_evidence_report(void **state)
{
    (void)state;
    char dir[512], cmd[2048], path[700];
    static char out[65536];
    scratch_dir("report-evidence", dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "'%s' compare bundled bundled:batch=64 --check compare.gof --check compare.pit "
             "--check compare.homogeneity --samples 3000 --dist-params t=1,top_k=0,top_p=1 "
             "--no-bench --out '%s'",
             g_assay, dir);
    int rc = run(cmd, out, sizeof out);
    if (rc != 0) {
        fail_msg("assay compare exited %d: %s", rc, out);
    }
    snprintf(path, sizeof path, "%s/report.json", dir);
    cJSON *r = NULL;
    struct assay_diag d;
    assert_int_equal(assay_report_load(path, &r, &d), ASSAY_OK);
    const cJSON *c;
    int n_gof = 0, n_homogeneity = 0, n_pit = 0, n_pooled = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(r, "checks"))
    {
        const char *name = assay_json_str(c, "name", "");
        const char *summary = assay_json_str(c, "summary", "");
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(c, "evidence");
        if (!cJSON_IsObject(ev)) {
            fail_msg("%s has no evidence", name);
        }
        double n = assay_json_num(c, "figures.n");
        const cJSON *bins = cJSON_GetObjectItemCaseSensitive(ev, "bins");
        if (bins != NULL) {
            bool two = strcmp(assay_json_str(ev, "test", ""), "homogeneity") == 0;
            n_gof += !two;
            n_homogeneity += two;
            double so = 0, se = 0, folded = 0;
            int held = 0, pooled = 0;
            const cJSON *b;
            cJSON_ArrayForEach(b, bins)
            {
                so += assay_json_num(b, "observed") + (two ? assay_json_num(b, "observed_b") : 0);
                se += assay_json_num(b, "expected");
                pooled += assay_json_bool(b, "pooled") == 1;
                folded += assay_json_bool(b, "folded") == 1;
                held++;
            }
            /* gof: every sample on a possible category; homogeneity: both
             * samples, the first's expected count summing to its own n */
            double n_counted = n - assay_json_num(c, "figures.n_impossible");
            double n_expected = two ? n / 2 : n_counted;
            if (so != n_counted || !(fabs(se - n_expected) <= 1e-6 * n_expected)) {
                fail_msg("%s: bins observe %g (want %g), expect %.6f (want %g)", name, so,
                         n_counted, se, n_expected);
            }
            double n_test = assay_json_num(ev, "n_test_bins");
            assert_true(n_test == assay_json_num(c, "figures.df") + 1);
            assert_true(held <= ASSAY_EVIDENCE_MAX_BINS);
            double n_folded = assay_json_num(ev, "n_folded");
            assert_true(held - folded + n_folded == n_test);
            /* The summary says how many categories the gof pooled. */
            double said = two ? NAN : number_after(summary, "bins (");
            if (!two && !(said >= 0)) {
                fail_msg("%s: no pooled count in '%s'", name, summary);
            }
            if (two ? pooled > 1 : pooled != (said > 0 ? 1 : 0)) {
                fail_msg("%s: %d bins marked pooled; summary: %s", name, pooled, summary);
            }
            n_pooled += pooled;
        }
        const cJSON *pit = cJSON_GetObjectItemCaseSensitive(ev, "pit");
        if (pit != NULL) {
            n_pit++;
            double sum = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(pit, "bins"))
            {
                sum += x->valuedouble;
            }
            assert_true(sum == assay_json_num(pit, "n"));
            assert_true(assay_json_num(pit, "n") == n);
            double d_said = number_after(summary, "KS D ");
            double ks_d = assay_json_num(pit, "ks_d");
            if (!(fabs(ks_d - d_said) <= 0.5e-4 + 1e-12)) {
                fail_msg("%s: ks_d %.6f, the summary says D %.4f", name, ks_d, d_said);
            }
        }
    }
    assert_int_equal(n_gof, 1);
    assert_int_equal(n_homogeneity, 1);
    assert_int_equal(n_pit, 1);
    /* At T 1 with no cut both chi-squared tests pool a tail. */
    assert_int_equal(n_pooled, 2);
    cJSON_Delete(r);
}

static void test_build_and_validate(void **state)
{
    const cJSON *r = *state;
    struct assay_diag d;
    assay_diag_clear(&d);
    assert_int_equal(assay_report_validate(r, &d), ASSAY_OK);
    assert_string_equal(assay_report_verdict(r), "FAIL");
    assert_true(assay_json_num(r, "counts.checks") == 4);
    assert_true(assay_json_num(r, "counts.pass") == 2);
    assert_true(assay_json_num(r, "counts.fail") == 1);
    assert_true(assay_json_num(r, "counts.skip") == 1);
    const cJSON *c1 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "checks"), 1);
    assert_string_equal(assay_json_str(c1, "repro", ""), REPRO);
    assert_true(assay_json_num(c1, "figures.min_tv") == 0.0175);
    assert_true(assay_json_num(c1, "figures.alpha") == 1e-6);
    /* The hard rule and the statistic, each on its own. */
    assert_int_equal(assay_json_bool(c1, "figures.rule_fired"), 1);
    assert_int_equal(assay_json_bool(c1, "figures.statistic_fired"), 1);
    assert_true(assay_json_num(c1, "figures.n_impossible") == 3);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "checks"), 0);
    assert_true(assay_json_num(c0, "figures.max_logit_diff") == 2.17e-5);
    assert_true(assay_json_num(c0, "figures.tie_tol") == 1e-3);
    /* A NaN figure is null, never a number. */
    assert_true(cJSON_IsNull(assay_json_path(c0, "figures.max_tie_gap")));
    const cJSON *c2 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "checks"), 2);
    assert_string_equal(assay_json_str(c2, "verdict", ""), "SKIP");
    assert_string_equal(assay_json_str(c2, "failure", ""), "the engine exposes no logits");
    assert_string_equal(assay_json_str(r, "benchmark.format", ""), "assay-bench");
    assert_int_equal(cJSON_GetArraySize(assay_json_path(r, "benchmark.runs")), 2);
    assert_int_equal(cJSON_GetArraySize(assay_json_path(r, "seed_table.rows")), 4);
    assert_true(cJSON_GetArraySize(assay_json_path(r, "rate_sweep.probes")) >= 2);
    /* A report without any check has the verdict NONE. */
    cJSON *empty = NULL;
    assert_int_equal(assay_report_create("bench", "assay bench", &empty), ASSAY_OK);
    assert_string_equal(assay_report_verdict(empty), "NONE");
    cJSON *stamp = NULL;
    assert_int_equal(assay_stamp_create(NULL, NULL, 0, &stamp), ASSAY_OK);
    assert_int_equal(assay_report_set(empty, "stamp", stamp), ASSAY_OK);
    assert_int_equal(assay_report_validate(empty, &d), ASSAY_OK);
    cJSON_Delete(empty);
}

static void test_required_fields(void **state)
{
    const cJSON *r = *state;
    static const char *const paths[] = {
        "schema", "version", "command", "command_line", "created_utc", "verdict", "counts",
        "counts.fail", "stamp", "checks", "benchmark", "seed_table", "rate_sweep", "notes",
        "stamp.assay.source_sha256", "stamp.libraries.openblas.core", "checks[1].repro",
        "checks[0].figures", "checks[2].verdict", "benchmark.runs", "benchmark.spread",
        "benchmark.generator.kind", "benchmark.runs[1].ttft", "seed_table.rows",
        "seed_table.explanation", "seed_table.rows[0].bench", "seed_table.rows[2].ttft_p99",
        "rate_sweep.probes", "rate_sweep.best_rate", "rate_sweep.probes[0].pass",
        "checks[1].evidence.n_test_bins", "checks[1].evidence.bins[2].pooled",
        "checks[1].evidence.bins[0].label", "checks[1].evidence.pit.ks_d",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        cJSON *copy = cJSON_Duplicate(r, true);
        delete_path(copy, paths[i]);
        struct assay_diag d;
        assay_diag_clear(&d);
        assert_int_equal(assay_report_validate(copy, &d), ASSAY_ERR_PARSE);
        if (strcmp(d.where, paths[i]) != 0) {
            fail_msg("deleting %s: the error names '%s'", paths[i], d.where);
        }
        assert_string_equal(d.got, "nothing (missing)");
        cJSON_Delete(copy);
    }
    /* Wrong values and types. */
    static const struct {
        const char *path, *json, *where, *expect;
    } bad[] = {
        {"schema", "\"assay-bench\"", "schema", "assay-report"},
        {"version", "2", "version", "regenerate"},
        {"verdict", "\"MAYBE\"", "verdict", "PASS"},
        {"verdict", "1", "verdict", "a string"},
        {"counts.checks", "99", "counts.checks", "length of checks"},
        {"benchmark.format", "\"x\"", "benchmark.format", "assay-bench"},
        {"seed_table.version", "7", "seed_table.version", "1"},
        {"rate_sweep.bracketed", "\"yes\"", "rate_sweep.bracketed", "true or false"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *copy = cJSON_Duplicate(r, true);
        char parent[128];
        snprintf(parent, sizeof parent, "%s", bad[i].path);
        char *dot = strrchr(parent, '.');
        cJSON *holder = copy;
        const char *leaf = bad[i].path;
        if (dot != NULL) {
            *dot = '\0';
            holder = (cJSON *)assay_json_path(copy, parent);
            leaf = dot + 1;
        }
        assert_true(cJSON_ReplaceItemInObjectCaseSensitive(holder, leaf, cJSON_Parse(bad[i].json)));
        struct assay_diag d;
        assay_diag_clear(&d);
        assert_int_equal(assay_report_validate(copy, &d), ASSAY_ERR_PARSE);
        assert_string_equal(d.where, bad[i].where);
        if (strstr(d.expected, bad[i].expect) == NULL) {
            fail_msg("%s: expected '%s' to mention '%s'", bad[i].path, d.expected, bad[i].expect);
        }
        cJSON_Delete(copy);
    }
    /* A check's verdict and family, a note's type. */
    cJSON *copy = cJSON_Duplicate(r, true);
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(copy, "checks"), 3);
    cJSON_ReplaceItemInObjectCaseSensitive(c0, "family", cJSON_CreateString("speed"));
    struct assay_diag d;
    assay_diag_clear(&d);
    assert_int_equal(assay_report_validate(copy, &d), ASSAY_ERR_PARSE);
    assert_string_equal(d.where, "checks[3].family");
    cJSON_Delete(copy);
    /* A PIT histogram of another number of bins. */
    copy = cJSON_Duplicate(r, true);
    cJSON *c1 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(copy, "checks"), 1);
    cJSON_DeleteItemFromArray((cJSON *)assay_json_path(c1, "evidence.pit.bins"), 0);
    assert_int_equal(assay_report_validate(copy, &d), ASSAY_ERR_PARSE);
    assert_string_equal(d.where, "checks[1].evidence.pit.bins");
    cJSON_Delete(copy);
    copy = cJSON_Duplicate(r, true);
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(copy, "notes"), cJSON_CreateNumber(1));
    assert_int_equal(assay_report_validate(copy, &d), ASSAY_ERR_PARSE);
    assert_string_equal(d.where, "notes[1]");
    cJSON_Delete(copy);
}

static void test_roundtrip(void **state)
{
    const cJSON *r = *state;
    char a[512], b[512];
    scratch_dir("report-a", a, sizeof a);
    scratch_dir("report-b", b, sizeof b);
    struct assay_report_paths pa, pb;
    struct assay_diag d;
    assert_int_equal(assay_report_write_all(r, a, "report", &pa, &d), ASSAY_OK);
    /* Load the JSON back: the same text, and the same renderings. */
    cJSON *back = NULL;
    assert_int_equal(assay_report_load(pa.json, &back, &d), ASSAY_OK);
    char *text = NULL, *html = NULL, *md = NULL;
    size_t tl, hl, ml, fl;
    assert_int_equal(assay_report_print(back, &text, &tl), ASSAY_OK);
    char *file = read_all(pa.json, &fl);
    assert_int_equal(tl, fl);
    assert_memory_equal(text, file, fl);
    assert_int_equal(assay_report_render_html(back, &html, &hl), ASSAY_OK);
    assert_int_equal(assay_report_render_markdown(back, &md, &ml), ASSAY_OK);
    char *fh = read_all(pa.html, &fl);
    assert_int_equal(hl, fl);
    assert_memory_equal(html, fh, fl);
    free(fh);
    char *fm = read_all(pa.md, &fl);
    assert_int_equal(ml, fl);
    assert_memory_equal(md, fm, fl);
    free(fm);
    /* The command renders the same files from the JSON alone; the report's
     * verdict is FAIL, so it exits 1. */
    char cmd[8192], out[8192];
    snprintf(cmd, sizeof cmd, "'%s' report '%s' --out '%s'", g_assay, pa.json, b);
    assert_int_equal(run(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "FAIL"));
    snprintf(pb.html, sizeof pb.html, "%s/report.html", b);
    snprintf(pb.md, sizeof pb.md, "%s/report.md", b);
    assert_same_file(pa.html, pb.html);
    assert_same_file(pa.md, pb.md);
    /* Beside the JSON by default, named after it. */
    char copy_json[1200];
    snprintf(copy_json, sizeof copy_json, "%s/saved.json", b);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && '%s' report '%s'", pa.json, copy_json, g_assay,
             copy_json);
    assert_int_equal(run(cmd, out, sizeof out), 1);
    snprintf(pb.html, sizeof pb.html, "%s/saved.html", b);
    assert_same_file(pa.html, pb.html);
    /* --json prints the checked JSON unchanged. */
    snprintf(cmd, sizeof cmd, "'%s' report '%s' --out '%s' --json > '%s/printed.json'", g_assay,
             pa.json, b, b);
    assert_int_equal(system(cmd) >> 8, 1);
    char printed[1200];
    snprintf(printed, sizeof printed, "%s/printed.json", b);
    assert_same_file(pa.json, printed);
    free(file);
    assay_free(text);
    assay_free(html);
    assay_free(md);
    cJSON_Delete(back);
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) {
        n++;
    }
    return n;
}

static void test_renderings(void **state)
{
    const cJSON *r = *state;
    char *html = NULL, *md = NULL;
    size_t hl, ml;
    assert_int_equal(assay_report_render_html(r, &html, &hl), ASSAY_OK);
    assert_int_equal(assay_report_render_markdown(r, &md, &ml), ASSAY_OK);
    assert_int_equal(strlen(html), hl);
    /* Self-contained: nothing that makes a browser fetch anything. */
    static const char *const banned[] = {"http://", "https://", "src=", "url(", "@import",
                                         "<script", "<img", "<link rel=\"stylesheet\"", "//fonts"};
    for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++) {
        if (strstr(html, banned[i]) != NULL) {
            fail_msg("the HTML contains '%s'", banned[i]);
        }
    }
    /* The plots, one <svg> each: six of the benchmark, two of the
     * distributional check's evidence. */
    assert_int_equal(count(html, "<svg class=\"plot\""), 8);
    static const char *const plots[] = {"Latency CDF of the benchmark", "Generator lateness",
                                        "TTFT CDF per generator", "E2E latency CDF per generator",
                                        "Goodput against offered rate", "TTFT against offered rate"};
    for (size_t i = 0; i < sizeof plots / sizeof plots[0]; i++) {
        char label[160];
        snprintf(label, sizeof label, "aria-label=\"%s", plots[i]);
        assert_non_null(strstr(html, label));
    }
    assert_null(strstr(html, ">no data<"));
    /* The verdict, the failure and its reproducer, escaped. */
    assert_non_null(strstr(html, "<span class=\"v FAIL\">FAIL</span>"));
    assert_non_null(strstr(html, "assay verify --check dist.gof.first --engine &#39;bundled:spec=2&#39; "
                                 "--workload &quot;a&amp;b&lt;c&gt;.json&quot;"));
    assert_non_null(strstr(html, "skipped: the engine exposes no logits"));
    assert_non_null(strstr(html, "FAIL</span><br><small>fired: rule and statistic</small>"));
    /* The evidence: a bar per bin, the pooled tail marked and named, the
     * expected counts as markers; the PIT histogram with its D. */
    assert_non_null(strstr(html, "aria-label=\"Bins of dist.gof.first\""));
    assert_int_equal(count(html, "<rect class=\"bar own\""), 2);
    assert_int_equal(count(html, "<rect class=\"bar pooled\""), 1);
    assert_int_equal(count(html, "<circle class=\"expected\""), 3);
    assert_non_null(strstr(html, ">pooled tail</text>"));
    assert_non_null(strstr(html, "<title>pooled tail (12): observed 1000, expected 999.0</title>"));
    assert_non_null(strstr(html, "aria-label=\"PIT of dist.gof.first\""));
    assert_int_equal(count(html, "<rect class=\"bar pit\""), ASSAY_EVIDENCE_PIT_BINS);
    assert_non_null(strstr(html, ">KS distance D = 0.0123</text>"));
    assert_non_null(strstr(html, "href=\"#evidence-dist.gof.first\""));
    /* The verdict table states each figure once: the summary, no figures
     * column beside it; the power the min-TV refers to above it. */
    assert_null(strstr(html, "<th>Figures</th>"));
    assert_null(strstr(html, "min TV 0.0175"));
    assert_int_equal(count(html, "chi2 391 df 19"), 1);
    assert_int_equal(count(html, "20 requests, 242 tokens compared"), 1);
    assert_non_null(strstr(html, "is at power 0.99."));
    assert_non_null(strstr(html, "a note with &lt;markup&gt; &amp; &quot;quotes&quot;"));
    assert_null(strstr(html, "<markup>"));
    assert_non_null(strstr(html, "coordinated omission"));
    assert_non_null(strstr(html, "Sufficiency"));
    assert_non_null(strstr(html, "source_sha256"));
    /* Markdown: the table, the failure with its command verbatim. */
    assert_non_null(strstr(md, "# assay run: FAIL"));
    assert_non_null(
        strstr(md, "| `dist.gof.first` | distributional | **FAIL** (rule and statistic) |"));
    assert_non_null(strstr(md, "min TV 0.0175 at power 0.99"));
    assert_non_null(strstr(md, "```sh\n" REPRO "\n```"));
    assert_non_null(strstr(md, "## The seed's table"));
    assert_non_null(strstr(md, "| Closed loop | 4 workers |"));
    assert_non_null(strstr(md, "## Rate sweep"));
    assert_non_null(strstr(md, "## Stamp"));
    assay_free(html);
    assay_free(md);
}

static void test_seedtable_paragraph(void **state)
{
    (void)state;
    cJSON *t = cJSON_Parse(
        "{\"capacity\": 8, \"rows\": ["
        "{\"generator\":\"open\",\"setting\":\"20 req/s offered\",\"ttft_p99\":2.0,"
        "\"offered_rate\":20,\"achieved_rate\":8.1},"
        "{\"generator\":\"closed\",\"workers\":2,\"ttft_p99\":0.01,\"achieved_rate\":5},"
        "{\"generator\":\"closed\",\"workers\":4,\"ttft_p99\":0.02,\"achieved_rate\":8.4},"
        "{\"generator\":\"closed\",\"workers\":8,\"ttft_p99\":0.05,\"achieved_rate\":10.5}]}");
    assert_non_null(t);
    char buf[4096];
    assay_report_seedtable_explain(t, buf, sizeof buf);
    assert_non_null(strstr(buf, "closed loop at 4 workers"));
    assert_non_null(strstr(buf, "100 times lower"));
    assert_non_null(strstr(buf, "2.5 times the capacity of 8 req/s"));
    assert_non_null(strstr(buf, "coordinated omission"));
    /* No gap: the paragraph says so instead of claiming one. */
    cJSON *open = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t, "rows"), 0);
    cJSON_ReplaceItemInObjectCaseSensitive(open, "ttft_p99", cJSON_CreateNumber(0.03));
    assay_report_seedtable_explain(t, buf, sizeof buf);
    assert_null(strstr(buf, "times lower"));
    assert_non_null(strstr(buf, "within a factor of 1.5"));
    /* No closed row: no comparison. */
    cJSON *rows = cJSON_GetObjectItemCaseSensitive(t, "rows");
    while (cJSON_GetArraySize(rows) > 1) {
        cJSON_DeleteItemFromArray(rows, 1);
    }
    assay_report_seedtable_explain(t, buf, sizeof buf);
    assert_non_null(strstr(buf, "no completed closed-loop row"));
    cJSON_Delete(t);
}

/* ---- atomic writes ---------------------------------------------------------- */

static bool temp_left(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    bool found = false;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        found = found || strncmp(e->d_name, ".report.json.", 13) == 0;
    }
    closedir(d);
    return found;
}

static void test_atomic_write(void **state)
{
    (void)state;
    char dir[512], path[700];
    scratch_dir("report-atomic", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/report.json", dir);
    struct assay_diag d;
    assert_int_equal(assay_report_write_file(path, "old\n", 4, &d), ASSAY_OK);
    assert_int_equal(assay_report_write_file(path, "new\n", 4, &d), ASSAY_OK);
    size_t n;
    char *text = read_all(path, &n);
    assert_string_equal(text, "new\n");
    free(text);
    assert_false(temp_left(dir));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);

    /* A directory that does not exist. */
    char missing[800];
    snprintf(missing, sizeof missing, "%s/no/such/dir/report.json", dir);
    assay_diag_clear(&d);
    assert_int_equal(assay_report_write_file(missing, "x", 1, &d), ASSAY_ERR_IO);
    assert_string_equal(d.file, missing);
    assert_string_equal(d.got, strerror(ENOENT));

    /* A full disk: the file size limit makes every write past 1000 bytes
     * fail (EFBIG), as a full file system fails with ENOSPC. The old file
     * must survive whole, and no temporary file may be left. */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {1000, 1000};
        setrlimit(RLIMIT_FSIZE, &rl);
        static char big[100000];
        memset(big, 'x', sizeof big);
        struct assay_diag cd;
        assay_diag_clear(&cd);
        enum assay_status s = assay_report_write_file(path, big, sizeof big, &cd);
        bool ok = s == ASSAY_ERR_IO && strcmp(cd.where, "writing") == 0 &&
                  strcmp(cd.got, strerror(EFBIG)) == 0 && strstr(cd.expected, "100000") != NULL;
        if (!ok) {
            char buf[900];
            fprintf(stderr, "full disk: status %d, %s\n", (int)s, assay_diag_format(&cd, buf, sizeof buf));
        }
        _exit(ok ? 0 : 1);
    }
    int wst;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst));
    assert_int_equal(WEXITSTATUS(wst), 0);
    text = read_all(path, &n);
    assert_string_equal(text, "new\n");
    free(text);
    assert_false(temp_left(dir));

    /* A read-only directory. Root writes anywhere, so the writer drops to
     * an unprivileged user first when it runs as root. */
    char ro[800], ro_path[900];
    snprintf(ro, sizeof ro, "%s/readonly", dir);
    assert_int_equal(mkdir(ro, 0555), 0);
    assert_int_equal(chmod(ro, 0555), 0);
    snprintf(ro_path, sizeof ro_path, "%s/report.json", ro);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) {
            _exit(3);
        }
        struct assay_diag cd;
        assay_diag_clear(&cd);
        enum assay_status s = assay_report_write_file(ro_path, "x\n", 2, &cd);
        char buf[900];
        assay_diag_format(&cd, buf, sizeof buf);
        bool ok = s == ASSAY_ERR_IO && strstr(buf, "report.json") != NULL &&
                  strstr(buf, "Permission denied") != NULL && strstr(buf, "writable directory") != NULL;
        if (!ok) {
            fprintf(stderr, "read-only: status %d, %s\n", (int)s, buf);
        }
        _exit(ok ? 0 : 1);
    }
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst));
    assert_int_equal(WEXITSTATUS(wst), 0);
    assert_int_not_equal(access(ro_path, F_OK), 0);
    assert_false(temp_left(ro));
    chmod(ro, 0755);

    /* The command checks --out before a long run: a path that cannot be a
     * directory, and (unprivileged) a read-only directory, are errors that
     * name the path, and nothing is written. */
    char cmd[2048], out[4096], file_path[900];
    snprintf(file_path, sizeof file_path, "%s/a-file", dir);
    FILE *f = fopen(file_path, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' bench --mode closed --runs 1 --out '%s/sub'", g_assay, file_path);
    int rc = run(cmd, out, sizeof out);
    if (rc != 2 || strstr(out, "cannot create directory") == NULL || strstr(out, "a-file") == NULL) {
        fail_msg("assay bench --out FILE/sub: exit %d, output: %s", rc, out);
    }
    if (geteuid() != 0) {
        chmod(ro, 0555);
        snprintf(cmd, sizeof cmd, "'%s' bench --mode closed --runs 1 --out '%s'", g_assay, ro);
        rc = run(cmd, out, sizeof out);
        if (rc != 2 || strstr(out, "cannot write into") == NULL ||
            strstr(out, "Permission denied") == NULL) {
            fail_msg("assay bench --out READONLY: exit %d, output: %s", rc, out);
        }
        assert_int_not_equal(access(ro_path, F_OK), 0);
        chmod(ro, 0755);
    }
}

/* ---- allocation failures ---------------------------------------------------- */

static void test_allocation_failures(void **state)
{
    const cJSON *r = *state;
    enum assay_status (*renderers[])(const cJSON *, char **, size_t *) = {
        assay_report_render_html, assay_report_render_markdown, assay_report_print};
    for (size_t i = 0; i < 3; i++) {
        int failures = 0;
        for (long k = 1; k < 1000; k++) {
            char *out = NULL;
            size_t len = 0;
            assay_test_fail_alloc_at(k);
            enum assay_status st = renderers[i](r, &out, &len);
            assay_free(out);
            long live = assay_test_alloc_live();
            assay_test_fail_alloc_off();
            if (st == ASSAY_OK) {
                break;
            }
            assert_int_equal(st, ASSAY_ERR_NOMEM);
            assert_null(out);
            assert_int_equal(live, 0);
            failures++;
        }
        assert_true(failures >= 3);
    }
    /* Building: every failure is reported and nothing leaks. */
    struct assay_check_result res[4];
    fill_results(res);
    int failures = 0;
    for (long k = 1; k < 100000; k++) {
        assay_test_fail_alloc_at(k);
        cJSON *rep = NULL;
        enum assay_status st = assay_report_create("run", "assay run", &rep);
        if (st == ASSAY_OK) {
            st = assay_report_add_checks(rep, res, 4);
        }
        if (st == ASSAY_OK) {
            st = assay_report_add_note(rep, "note %d", 1);
        }
        cJSON_Delete(rep);
        long live = assay_test_alloc_live();
        assay_test_fail_alloc_off();
        assert_int_equal(live, 0);
        if (st == ASSAY_OK) {
            break;
        }
        assert_int_equal(st, ASSAY_ERR_NOMEM);
        failures++;
    }
    assert_true(failures > 30);
}

/* ---- the command's errors --------------------------------------------------- */

static void test_cli_errors(void **state)
{
    (void)state;
    char dir[512], path[700], cmd[2048], out[8192];
    scratch_dir("report-cli", dir, sizeof dir);
    /* Malformed JSON: the file, the byte, line and column. */
    snprintf(path, sizeof path, "%s/broken.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"schema\": \"assay-report\",\n \"version\": 1,,}\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' report '%s'", g_assay, path);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "broken.json: byte 41 (line 2, column 15)"));
    assert_non_null(strstr(out, "well-formed JSON"));
    /* Valid JSON, not a report: the field. */
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"schema\": \"assay-report\", \"version\": 1}\n", f);
    fclose(f);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "broken.json: command: expected a string, got nothing (missing)"));
    /* Nothing written for a bad report. */
    char html[800];
    snprintf(html, sizeof html, "%s/broken.html", dir);
    assert_int_not_equal(access(html, F_OK), 0);
    /* A missing file, no file, two files, --help. */
    snprintf(cmd, sizeof cmd, "'%s' report '%s/none.json'", g_assay, dir);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "none.json: expected a readable file, got No such file or directory"));
    snprintf(cmd, sizeof cmd, "'%s' report", g_assay);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "'%s' report a.json b.json", g_assay);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    static const char *const helps[] = {"report", "run", "bench"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s --help", g_assay, helps[i]);
        assert_int_equal(run(cmd, out, sizeof out), 0);
        assert_non_null(strstr(out, "usage: assay"));
        assert_non_null(strstr(out, "Exit status"));
    }
    /* Usage errors of run and bench, before anything runs. */
    static const char *const bad[] = {
        "run --engine bundled:kv=sideways",
        "run --check no.such.check",
        "run --runs 0",
        "bench --mode fast",
        "bench --workers 2,x",
        "bench --workload /no/such/workload.json",
        "bench --slo /no/such/slo.json",
        "bench --arrival gamma",
        "bench --seed 4294967296",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s", g_assay, bad[i]);
        int rc = run(cmd, out, sizeof out);
        if (rc != 2 || strstr(out, "assay") == NULL) {
            fail_msg("'%s' exited %d: %s", bad[i], rc, out);
        }
    }
}

/* The kill matrix: built row by row, validated, rendered, and refused when
 * its cells and counts disagree; `assay report` renders it without
 * touching the JSON, and reads any other JSON as a run report. */
static void test_kill_matrix(void **state)
{
    (void)state;
    const char *checks[] = {"equiv.a", "dist.b", "prop.c"};
    const char *families[] = {"equivalence", "distributional", "property"};
    cJSON *m = assay_kill_matrix_new("assay-mutants mutants --matrix", checks, families, 3);
    assert_non_null(m);
    struct assay_kill_cell two[] = {{"dist.b", "distributional", "statistic"},
                                    {"prop.c", "property", "died"}};
    struct assay_kill_cell one[] = {{"equiv.a", "equivalence", "exact"}};
    assert_int_equal(assay_kill_matrix_add_row(m, "bug-one", "distributional", "m1", "x #1", true,
                                               two, 2),
                     ASSAY_OK);
    assert_int_equal(assay_kill_matrix_add_row(m, "bug-two", "equivalence", "m2", "y #2", true,
                                               one, 1),
                     ASSAY_OK);
    assert_int_equal(assay_kill_matrix_add_row(m, "bug-three", "portability", "m3", "z #3", false,
                                               NULL, 0),
                     ASSAY_OK);
    struct assay_diag diag;
    assert_int_equal(assay_kill_matrix_validate(m, &diag), ASSAY_OK);
    const cJSON *row0 = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "rows"), 0);
    assert_int_equal((int)assay_json_num(row0, "own"), 1);
    assert_int_equal((int)assay_json_num(row0, "all"), 2);
    char *html = NULL, *md = NULL;
    size_t len = 0;
    assert_int_equal(assay_kill_matrix_render_html(m, &html, &len), ASSAY_OK);
    assert_non_null(strstr(html, "<tr class=\"thin\" data-mutant=\"bug-one\">"));
    assert_non_null(strstr(html, "class=\"cell k own\" data-check=\"dist.b\""));
    assert_non_null(strstr(html, "class=\"cell k other died\" data-check=\"prop.c\""));
    assert_non_null(strstr(html, "caught outside the verify plan: the portability label"));
    assert_int_equal(assay_kill_matrix_render_markdown(m, &md, &len), ASSAY_OK);
    assert_non_null(strstr(md, "| bug-one | distributional | 1 | 2 | dist.b \\| prop.c (died) |"));
    assay_free(html);
    assay_free(md);
    /* Written, then rendered again by `assay report` beside it. */
    char dir[512], path[700], cmd[2048], out[8192];
    scratch_dir("kill-matrix", dir, sizeof dir);
    assert_int_equal(assay_kill_matrix_write(m, dir, "km", true, &diag), ASSAY_OK);
    snprintf(path, sizeof path, "%s/km.json", dir);
    struct stat before, after;
    assert_int_equal(stat(path, &before), 0);
    snprintf(cmd, sizeof cmd, "'%s' report '%s'", g_assay, path);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "a kill matrix"));
    assert_int_equal(stat(path, &after), 0);
    assert_true(before.st_mtime == after.st_mtime && before.st_ino == after.st_ino);
    /* A cell whose check is no column; counts that disagree with the cells. */
    cJSON *cell = cJSON_GetArrayItem(cJSON_GetObjectItem(row0, "caught"), 0);
    cJSON_ReplaceItemInObject(cell, "check", cJSON_CreateString("dist.zz"));
    assert_int_equal(assay_kill_matrix_validate(m, &diag), ASSAY_ERR_PARSE);
    assert_string_equal(diag.where, "rows[0].caught[0]");
    cJSON_ReplaceItemInObject(cell, "check", cJSON_CreateString("dist.b"));
    cJSON_ReplaceItemInObject((cJSON *)row0, "own", cJSON_CreateNumber(2));
    assert_int_equal(assay_kill_matrix_validate(m, &diag), ASSAY_ERR_PARSE);
    assert_string_equal(diag.where, "rows[0]");
    cJSON_ReplaceItemInObject((cJSON *)row0, "own", cJSON_CreateNumber(1));
    cJSON_ReplaceItemInObject(cell, "by", cJSON_CreateString("luck"));
    assert_int_equal(assay_kill_matrix_validate(m, &diag), ASSAY_ERR_PARSE);
    /* A broken matrix file is refused by `assay report`, naming the field. */
    char *text = cJSON_Print(m);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    cJSON_free(text);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "km.json: rows[0].caught[0]"));
    /* Another kind of JSON is not a kill matrix. */
    cJSON *other = NULL;
    snprintf(path, sizeof path, "%s/other.json", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"schema\": \"assay-report\"}", f);
    fclose(f);
    assert_int_equal(assay_kill_matrix_load(path, &other, &diag), ASSAY_ERR_UNSUPPORTED);
    assert_null(other);
    cJSON_Delete(m);
}

/* A row's equiv.fuzz rate over master seeds (--fuzz-seeds): set on the last
 * row, shown in both pages, refused when it is not a count out of seeds. */
static void test_kill_matrix_fuzz_seeds(void **state)
{
    (void)state;
    const char *checks[] = {"equiv.fuzz"};
    const char *families[] = {"equivalence"};
    cJSON *m = assay_kill_matrix_new("assay-mutants mutants --matrix --fuzz-seeds 20", checks,
                                     families, 1);
    assert_non_null(m);
    assert_int_equal(assay_kill_matrix_set_fuzz_seeds(m, 1, 20), ASSAY_ERR_INVALID);
    struct assay_kill_cell fuzz[] = {{"equiv.fuzz", "equivalence", "exact"}};
    assert_int_equal(assay_kill_matrix_add_row(m, "often", "equivalence", "m", "r", true, fuzz, 1),
                     ASSAY_OK);
    assert_int_equal(assay_kill_matrix_set_fuzz_seeds(m, 19, 20), ASSAY_OK);
    assert_int_equal(assay_kill_matrix_add_row(m, "rarely", "property", "m", "r", true, NULL, 0),
                     ASSAY_OK);
    assert_int_equal(assay_kill_matrix_set_fuzz_seeds(m, 21, 20), ASSAY_ERR_INVALID);
    assert_int_equal(assay_kill_matrix_set_fuzz_seeds(m, 3, 20), ASSAY_OK);
    assert_int_equal(assay_kill_matrix_add_row(m, "unmeasured", "property", "m", "r", true, NULL, 0),
                     ASSAY_OK);
    struct assay_diag diag;
    assert_int_equal(assay_kill_matrix_validate(m, &diag), ASSAY_OK);
    char *html = NULL, *md = NULL;
    size_t len = 0;
    assert_int_equal(assay_kill_matrix_render_html(m, &html, &len), ASSAY_OK);
    assert_non_null(strstr(html, ">fuzz seeds</th>"));
    assert_non_null(strstr(html, "data-fuzz-seeds=\"19/20\""));
    assert_non_null(strstr(html, "data-fuzz-seeds=\"3/20\""));
    assert_int_equal(assay_kill_matrix_render_markdown(m, &md, &len), ASSAY_OK);
    assert_non_null(strstr(md, "| often | equivalence | 1 | 1 | equiv.fuzz; equiv.fuzz under 19 of 20 "
                               "master seeds |"));
    assert_non_null(strstr(md, "| rarely | property | 0 | 0 | ; equiv.fuzz under 3 of 20 master "
                               "seeds |"));
    assert_non_null(strstr(md, "| unmeasured | property | 0 | 0 |  |"));
    assay_free(html);
    assay_free(md);
    /* More catches than seeds, or a fraction of a seed, is not a rate. */
    cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "rows"), 1);
    cJSON *f = cJSON_GetObjectItem(row, "fuzz_seeds");
    cJSON_ReplaceItemInObject(f, "caught", cJSON_CreateNumber(30));
    assert_int_equal(assay_kill_matrix_validate(m, &diag), ASSAY_ERR_PARSE);
    assert_string_equal(diag.where, "rows[1].fuzz_seeds");
    cJSON_ReplaceItemInObject(f, "caught", cJSON_CreateNumber(2.5));
    assert_int_equal(assay_kill_matrix_validate(m, &diag), ASSAY_ERR_PARSE);
    cJSON_ReplaceItemInObject(f, "caught", cJSON_CreateString("3"));
    assert_int_equal(assay_kill_matrix_validate(m, &diag), ASSAY_ERR_PARSE);
    cJSON_Delete(m);
}

/* The committed sample report (a real `assay run --quick`) still loads,
 * validates and renders with this code. */
static void test_sample_fixture(void **state)
{
    (void)state;
    char path[512], dir[512], cmd[2048], out[8192];
    assay_test_fixture("reports/sample-run.json", path, sizeof path);
    cJSON *r = NULL;
    struct assay_diag d;
    enum assay_status st = assay_report_load(path, &r, &d);
    if (st != ASSAY_OK) {
        char buf[900];
        fail_msg("%s (regenerate it: assay run --quick --out DIR; cp DIR/report.json %s)",
                 assay_diag_format(&d, buf, sizeof buf), path);
    }
    assert_string_equal(assay_report_verdict(r), "PASS");
    assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "benchmark")));
    assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "seed_table")));
    assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "rate_sweep")));
    scratch_dir("report-sample", dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "'%s' report '%s' --out '%s'", g_assay, path, dir);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    char *html = NULL;
    size_t hl, fl;
    assert_int_equal(assay_report_render_html(r, &html, &hl), ASSAY_OK);
    char rendered[700];
    snprintf(rendered, sizeof rendered, "%s/sample-run.html", dir);
    char *file = read_all(rendered, &fl);
    assert_non_null(file);
    assert_int_equal(hl, fl);
    assert_memory_equal(html, file, fl);
    free(file);
    assay_free(html);
    cJSON_Delete(r);
}

/* `assay run` end to end, small: one check, the benchmark on the mini model. */
static void test_run_command(void **state)
{
    (void)state;
    char dir[512], cmd[2048], path[700];
    static char out[65536];
    scratch_dir("report-run", dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "'%s' run --quick --check prop.trace --bench-engine bundled:model=mini,batch=8 --out '%s'",
             g_assay, dir);
    int rc = run(cmd, out, sizeof out);
    if (rc != 0) {
        fail_msg("assay run exited %d: %s", rc, out);
    }
    static const char *const printed[] = {"prop.trace", "1 checks: 1 passed", "Benchmark: open loop",
                                          "The seed's table", "Closed loop  4 workers",
                                          "coordinated omission", "Rate sweep", "Report: "};
    for (size_t i = 0; i < sizeof printed / sizeof printed[0]; i++) {
        if (strstr(out, printed[i]) == NULL) {
            fail_msg("assay run did not print '%s':\n%s", printed[i], out);
        }
    }
    snprintf(path, sizeof path, "%s/report.json", dir);
    cJSON *r = NULL;
    struct assay_diag d;
    assert_int_equal(assay_report_load(path, &r, &d), ASSAY_OK);
    assert_string_equal(assay_report_verdict(r), "PASS");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "checks")), 1);
    assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "benchmark")));
    assert_int_equal(cJSON_GetArraySize(assay_json_path(r, "seed_table.rows")), 4);
    assert_true(cJSON_GetArraySize(assay_json_path(r, "rate_sweep.probes")) >= 2);
    assert_string_equal(assay_json_str(r, "stamp.engine.options.model", ""), "mini");
    assert_string_equal(assay_json_str(r, "verify.base_spec", ""), "bundled");
    assert_string_equal(assay_json_str(r, "command", ""), "run");
    char html[700], md[700];
    snprintf(html, sizeof html, "%s/report.html", dir);
    snprintf(md, sizeof md, "%s/report.md", dir);
    assert_int_equal(access(html, R_OK), 0);
    assert_int_equal(access(md, R_OK), 0);
    cJSON_Delete(r);
    /* --json: the report on stdout, nothing else. */
    snprintf(cmd, sizeof cmd,
             "'%s' run --check prop.trace --no-bench --json --out '%s' 2>/dev/null", g_assay, dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_int_equal(assay_report_parse(out, n, "stdout", &r, &d), ASSAY_OK);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "benchmark")));
    cJSON_Delete(r);
}

/* A check that fails: exit 1, the verdict FAIL, the reproducer in every
 * rendering. Needs the planted-bug build (assay-mutants). */
static void test_run_failing_check(void **state)
{
    (void)state;
    if (g_assay_mutants == NULL) {
        printf("SKIP: assay-mutants is not built (ASSAY_BUILD_MUTANTS=OFF)\n");
        skip();
    }
    char dir[512], cmd[2048], path[700];
    static char out[65536];
    scratch_dir("report-run-fail", dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "'%s' run --check prop.blocks --engine bundled:mutant=abort-leaks-blocks --no-bench "
             "--out '%s'",
             g_assay_mutants, dir);
    int rc = run(cmd, out, sizeof out);
    if (rc != 1) {
        fail_msg("assay-mutants run exited %d, not 1: %s", rc, out);
    }
    assert_non_null(strstr(out, "reproduce: "));
    snprintf(path, sizeof path, "%s/report.json", dir);
    cJSON *r = NULL;
    struct assay_diag d;
    assert_int_equal(assay_report_load(path, &r, &d), ASSAY_OK);
    assert_string_equal(assay_report_verdict(r), "FAIL");
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "checks"), 0);
    const char *repro = assay_json_str(c, "repro", "");
    assert_non_null(strstr(repro, "--check prop.blocks"));
    char *md = NULL;
    size_t len;
    assert_int_equal(assay_report_render_markdown(r, &md, &len), ASSAY_OK);
    assert_non_null(strstr(md, repro));
    assert_non_null(strstr(md, "### FAIL `prop.blocks`"));
    assay_free(md);
    cJSON_Delete(r);
    /* `assay report` on it exits 1 too. */
    snprintf(cmd, sizeof cmd, "'%s' report '%s'", g_assay, path);
    assert_int_equal(run(cmd, out, sizeof out), 1);
}

/* A planted bug that kills or hangs the engine: the check it hits is a FAIL
 * that says how its process ended and where, the next check still runs and
 * passes, and the report is written in full (checks/isolate.h). */
static void test_run_dying_engine(void **state)
{
    (void)state;
    if (g_assay_mutants == NULL) {
        printf("SKIP: assay-mutants is not built (ASSAY_BUILD_MUTANTS=OFF)\n");
        skip();
    }
    static const struct {
        const char *mutant;
        int signal;
        bool timed_out;
        const char *words;
        int timeout_s; /* long enough for the next check under AddressSanitizer on a
                        * busy machine (5 s was not); the hang costs it once */
    } cases[] = {
        {"preempt-pad-slot", 11, false, "died of signal 11", 120},
        {"pool-dry-assert", 6, false, "died of signal 6", 120},
        {"pool-dry-spin", 9, true, "did not end within its time limit of 20 s", 20},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[512], cmd[2048], path[700], name[96];
        static char out[65536];
        snprintf(name, sizeof name, "report-run-%s", cases[i].mutant);
        scratch_dir(name, dir, sizeof dir);
        snprintf(cmd, sizeof cmd,
                 "'%s' run --check prop.trace --check prop.isolation-blackbox "
                 "--engine bundled:mutant=%s --no-bench --no-shrink --timeout %d --out '%s'",
                 g_assay_mutants, cases[i].mutant, cases[i].timeout_s, dir);
        int rc = run(cmd, out, sizeof out);
        if (rc != 1) {
            fail_msg("%s: assay-mutants run exited %d, not 1: %s", cases[i].mutant, rc, out);
        }
        snprintf(path, sizeof path, "%s/report.json", dir);
        cJSON *r = NULL;
        struct assay_diag d;
        assert_int_equal(assay_report_load(path, &r, &d), ASSAY_OK);
        assert_string_equal(assay_report_verdict(r), "FAIL");
        const cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
        assert_int_equal(cJSON_GetArraySize(checks), 2);
        const cJSON *c0 = cJSON_GetArrayItem(checks, 0), *c1 = cJSON_GetArrayItem(checks, 1);
        assert_string_equal(assay_json_str(c0, "name", ""), "prop.trace");
        assert_string_equal(assay_json_str(c0, "verdict", ""), "FAIL");
        const char *why = assay_json_str(c0, "failure", "");
        const char *words = cases[i].words;
        int signal = cases[i].signal;
#ifdef __SANITIZE_ADDRESS__
        if (signal == 11 && strstr(why, words) == NULL) {
            /* AddressSanitizer may report the wild write and exit instead. */
            words = "exited with status 1 before the check ended";
            signal = -1;
        }
#endif
        if (strstr(why, words) == NULL || strstr(why, "inside the engine, at step") == NULL) {
            fail_msg("%s: the failure does not say how and where: %s", cases[i].mutant, why);
        }
        if (signal >= 0) {
            assert_int_equal((int)assay_json_num(c0, "process.signal"), signal);
        }
        assert_true(cJSON_IsTrue(assay_json_path(c0, "process.timed_out")) == cases[i].timed_out);
        assert_non_null(strstr(assay_json_str(c0, "repro", ""), "--check prop.trace"));
        assert_string_equal(assay_json_str(c1, "verdict", ""), "PASS");
        char *md = NULL;
        size_t len;
        assert_int_equal(assay_report_render_markdown(r, &md, &len), ASSAY_OK);
        assert_non_null(strstr(md, words));
        assay_free(md);
        cJSON_Delete(r);
        snprintf(path, sizeof path, "%s/report.html", dir);
        assert_int_equal(access(path, R_OK), 0);
    }
    /* --no-fork runs the same checks in the command's own process. */
    char cmd[1024];
    static char out[65536];
    snprintf(cmd, sizeof cmd, "'%s' verify --check prop.trace --no-fork", g_assay);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "'%s' verify --check prop.trace --timeout -1", g_assay);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--timeout expects"));
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc >= 2) {
        g_assay = argv[1];
    }
    if (argc >= 3 && argv[2][0] != '\0') {
        g_assay_mutants = argv[2];
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_and_validate),
        cmocka_unit_test(test_required_fields),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_renderings),
        cmocka_unit_test(test_seedtable_paragraph),
        cmocka_unit_test(test_evidence_folding),
        cmocka_unit_test(test_evidence_report),
        cmocka_unit_test(test_atomic_write),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_cli_errors),
        cmocka_unit_test(test_kill_matrix),
        cmocka_unit_test(test_kill_matrix_fuzz_seeds),
        cmocka_unit_test(test_sample_fixture),
        cmocka_unit_test(test_run_command),
        cmocka_unit_test(test_run_failing_check),
        cmocka_unit_test(test_run_dying_engine),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
