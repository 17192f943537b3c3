/*
 * test_faults - injected allocation failures through every path of a run.
 *
 * The allocation hook (core/alloc.h) fails the k-th allocation, for every
 * k from 1 until a run completes without reaching k, through:
 *   - engine start-up and a full step loop: a paged bundled engine with a
 *     pool small enough to preempt, prefix caching and chunked prefill,
 *     opened from its spec and driven by the harness over requests with
 *     aborts, then closed;
 *   - the checks: one equivalence check (engine against the oracle), one
 *     distributional check (chi-squared of the first sampled token) and one
 *     property check (block conservation after every step), each on the
 *     small "mini" model, with its engine and oracle built inside the
 *     window;
 *   - the report writer: a report built from check results and a stamp,
 *     written as JSON, HTML and Markdown into a directory.
 * Each time: a clean error status (ASSAY_ERR_NOMEM, or a check verdict of
 * ERROR that says memory ran out), never a PASS or a FAIL reached on a run
 * that lost an allocation, nothing left allocated once everything is freed
 * (assay_test_alloc_live() == 0; the sanitizer build adds LeakSanitizer),
 * no report file left behind, and no corrupted state: a run right after,
 * without faults, gives exactly the reference result.
 *
 * Printed: how many k each path survived (one failed allocation each).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/spec.h"
#include "checks/distributional.h"
#include "checks/equivalence.h"
#include "checks/harness.h"
#include "checks/property.h"
#include "checks/stats.h"
#include "checks/context.h"
#include "checks/plan.h"
#include "core/alloc.h"
#include "core/workload.h"
#include "reports/report.h"
#include "reports/stamp.h"
#include "reports/write.h"
#include "support.h"

/* A paged engine that preempts: 4-token blocks, 14 of them, a batch of 4. */
#define ENGINE_SPEC "bundled:model=mini,kv=paged,block=4,blocks=14,prefix=on,chunk=8,batch=4"

static const char k_trace[] =
    "{\"format\": \"assay-workload\", \"version\": 1, \"requests\": ["
    "{\"id\": 1, \"prompt\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], \"max_tokens\": 6},"
    "{\"id\": 2, \"arrival_step\": 1, \"prompt\": [1, 2, 3, 4, 5, 6, 7, 8, 30], \"max_tokens\": 8},"
    "{\"id\": 3, \"arrival_step\": 1, \"prompt\": [40, 41, 42], \"max_tokens\": 12, \"abort_after\": 3},"
    "{\"id\": 4, \"arrival_step\": 2, \"prompt\": [1, 2, 3, 4, 50, 51, 52, 53, 54, 55, 56], \"max_tokens\": 9},"
    "{\"id\": 5, \"arrival_step\": 3, \"prompt\": [7], \"max_tokens\": 10, \"stop_token\": 257},"
    "{\"id\": 6, \"arrival_step\": 3, \"prompt\": [9, 9, 9, 9, 9, 9], \"max_tokens\": 7}]}";

static struct assay_workload *g_trace;

/* ------------------------------------------------------------------ */
/* Bookkeeping of one fault loop                                       */
/* ------------------------------------------------------------------ */

struct loop {
    const char *path;
    long k;             /* the allocation being failed */
    long n_faults;      /* runs in which the fault was reached */
    long n_nomem;       /* ... that ended in ASSAY_ERR_NOMEM */
    long n_error;       /* ... that ended in a check verdict ERROR */
    long n_absorbed;    /* ... whose result is still the reference (a fallback) */
    long n_allocs;      /* allocations of the run without a fault */
};

/* After a run with fault k: nothing may be left allocated. Returns whether
 * the fault was reached (false: the run made fewer than k allocations). */
static bool end_run(struct loop *l)
{
    long live = assay_test_alloc_live();
    long count = assay_test_alloc_count();
    assay_test_fail_alloc_off();
    if (live != 0) {
        fail_msg("%s: failing allocation %ld left %ld allocation(s) unfreed", l->path, l->k, live);
    }
    if (count < l->k) {
        l->n_allocs = count;
        return false;
    }
    l->n_faults++;
    return true;
}

static void report_loop(const struct loop *l)
{
    printf("# %-22s %5ld allocations; failed each of them once: %ld NOMEM, %ld ERROR verdicts, "
           "%ld absorbed with the reference result; no leak\n",
           l->path, l->n_allocs, l->n_nomem, l->n_error, l->n_absorbed);
    assert_int_equal(l->n_faults, l->n_allocs);
    assert_true(l->n_allocs >= 10);
}

/* ------------------------------------------------------------------ */
/* Engine start-up and the step loop                                   */
/* ------------------------------------------------------------------ */

/* A digest of what the harness saw: every token and every finish. */
struct digest {
    uint64_t hash;
    int64_t n_tokens;
    int32_t n_finish;
    enum assay_status status;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

/* Open the engine, run the trace, close: the status of the first step
 * that failed (open, run, or the run's own status), and the digest. */
static enum assay_status engine_run(struct digest *d)
{
    memset(d, 0, sizeof *d);
    struct assay_adapter a;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_adapter_open_spec(ENGINE_SPEC, &a, &diag);
    if (st != ASSAY_OK) {
        if (a.vt != NULL || a.self != NULL) {
            fail_msg("a failed open left an adapter behind (%s)", assay_status_str(st));
        }
        return st;
    }
    struct assay_harness_opts ho;
    memset(&ho, 0, sizeof ho);
    struct assay_transcript *t = NULL;
    st = assay_harness_run(&a, g_trace, &ho, &t);
    if (st == ASSAY_OK) {
        st = t->status;
        for (int32_t i = 0; i < t->n; i++) {
            const struct assay_transcript_req *r = &t->reqs[i];
            d->hash = mix(d->hash, r->id);
            d->hash = mix(d->hash, (uint64_t)r->reason);
            for (int32_t k = 0; k < r->n_events && k < r->cap; k++) {
                d->hash = mix(d->hash, (uint64_t)(uint32_t)r->tokens[k]);
            }
            d->n_tokens += r->n_events;
            d->n_finish += r->n_finish;
        }
    }
    assay_transcript_free(t);
    assay_adapter_close(&a);
    d->status = st;
    return st;
}

static void test_engine_and_step_loop(void **state)
{
    (void)state;
    struct digest ref;
    assay_test_fail_alloc_at(-1); /* count only */
    assert_int_equal(engine_run(&ref), ASSAY_OK);
    assay_test_fail_alloc_off();
    assert_int_equal(ref.n_finish, 6);
    assert_true(ref.n_tokens > 20);
    struct loop l = {.path = "engine + step loop"};
    for (l.k = 1;; l.k++) {
        assay_test_fail_alloc_at(l.k);
        struct digest d;
        enum assay_status st = engine_run(&d);
        if (!end_run(&l)) {
            assert_int_equal(st, ASSAY_OK);
            break;
        }
        if (st == ASSAY_ERR_NOMEM) {
            l.n_nomem++;
        } else if (st == ASSAY_OK && d.hash == ref.hash && d.n_finish == ref.n_finish) {
            l.n_absorbed++;
        } else {
            fail_msg("failing allocation %ld: status %s, %d finishes (reference %d): neither a "
                     "clean NOMEM nor the reference run",
                     l.k, assay_status_str(st), (int)d.n_finish, (int)ref.n_finish);
        }
        /* No corrupted state: the same run without a fault is the reference. */
        struct digest again;
        assert_int_equal(engine_run(&again), ASSAY_OK);
        if (again.hash != ref.hash || again.n_finish != ref.n_finish) {
            fail_msg("after failing allocation %ld, a clean run differs from the reference", l.k);
        }
    }
    report_loop(&l);
}

/* ------------------------------------------------------------------ */
/* The checks                                                          */
/* ------------------------------------------------------------------ */

enum check_kind { CHECK_EQUIVALENCE, CHECK_DISTRIBUTIONAL, CHECK_PROPERTY };

/* Everything a check needs, built and freed inside the window. */
static enum assay_status check_run(enum check_kind kind, struct assay_check_result *res)
{
    static const char *const names[] = {"faults.equivalence", "faults.distributional",
                                        "faults.property"};
    static const enum assay_family fams[] = {ASSAY_FAMILY_EQUIVALENCE,
                                             ASSAY_FAMILY_DISTRIBUTIONAL, ASSAY_FAMILY_PROPERTY};
    assay_check_result_init(res, names[kind], fams[kind]);
    const char *spec = kind == CHECK_DISTRIBUTIONAL ? "bundled:model=mini,batch=32" : ENGINE_SPEC;
    struct assay_adapter a;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_adapter_open_spec(spec, &a, &diag);
    if (st != ASSAY_OK) {
        return st;
    }
    const struct assay_model *model = assay_verify_engine_model(&a);
    if (kind == CHECK_EQUIVALENCE) {
        struct assay_oracle_memo *memo = NULL;
        st = assay_oracle_memo_init(&memo, model, 64);
        if (st == ASSAY_OK) {
            st = assay_check_equivalence(&a, g_trace, memo, NULL, res);
        }
        assay_oracle_memo_free(memo);
    } else if (kind == CHECK_DISTRIBUTIONAL) {
        struct assay_dist_params p = assay_dist_default_params();
        p.n = 400;
        p.window = 32;
        p.prompt_tries = 8;
        p.seed = 11;
        st = assay_dist_gof(&a, model, &p, res);
    } else {
        st = assay_check_blocks(&a, g_trace, NULL, res);
    }
    assay_adapter_close(&a);
    return st;
}

/* The same verdict and figures (NaN figures equal NaN). */
static bool same_result(const struct assay_check_result *a, const struct assay_check_result *b)
{
    bool same_stat = a->statistic == b->statistic || (isnan(a->statistic) && isnan(b->statistic));
    return a->verdict == b->verdict && a->n_tokens == b->n_tokens && a->n_checks == b->n_checks &&
           a->n_steps == b->n_steps && a->n == b->n && same_stat;
}

static void fault_loop_check(enum check_kind kind, const char *path)
{
    struct assay_check_result ref;
    assay_test_fail_alloc_at(-1);
    enum assay_status st = check_run(kind, &ref);
    assay_test_fail_alloc_off();
    if (st != ASSAY_OK || ref.verdict != ASSAY_VERDICT_PASS) {
        fail_msg("%s: the reference run did not pass: %s %s", path, assay_status_str(st),
                 ref.failure);
    }
    struct loop l = {.path = path};
    for (l.k = 1;; l.k++) {
        assay_test_fail_alloc_at(l.k);
        struct assay_check_result res;
        st = check_run(kind, &res);
        if (!end_run(&l)) {
            assert_int_equal(st, ASSAY_OK);
            assert_int_equal(res.verdict, ASSAY_VERDICT_PASS);
            break;
        }
        if (st == ASSAY_ERR_NOMEM) {
            l.n_nomem++;
        } else if (res.verdict == ASSAY_VERDICT_ERROR) {
            l.n_error++;
        } else if (same_result(&res, &ref)) {
            l.n_absorbed++;
        } else {
            fail_msg("%s: failing allocation %ld gave status %s and verdict %s (%s): a lost "
                     "allocation must not pass for a verdict",
                     path, l.k, assay_status_str(st), assay_verdict_str(res.verdict), res.failure);
        }
        if (l.k % 64 == 0) {
            /* No corrupted state (every 64th k: a check run costs more
             * than an engine run). */
            struct assay_check_result again;
            assert_int_equal(check_run(kind, &again), ASSAY_OK);
            if (!same_result(&again, &ref)) {
                fail_msg("%s: after failing allocation %ld, a clean run differs from the "
                         "reference (%s: %s)",
                         path, l.k, assay_verdict_str(again.verdict), again.summary);
            }
        }
    }
    report_loop(&l);
}

static void test_equivalence_check(void **state)
{
    (void)state;
    fault_loop_check(CHECK_EQUIVALENCE, "equivalence check");
}

static void test_distributional_check(void **state)
{
    (void)state;
    fault_loop_check(CHECK_DISTRIBUTIONAL, "distributional check");
}

static void test_property_check(void **state)
{
    (void)state;
    fault_loop_check(CHECK_PROPERTY, "property check");
}

/* ------------------------------------------------------------------ */
/* The report writer                                                   */
/* ------------------------------------------------------------------ */

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return -1;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return n;
}

static void empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            char p[1400];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    }
    closedir(d);
}

/* Build a report (two check results, a stamp of the adapter) and write it
 * into dir. */
static enum assay_status report_run(const struct assay_adapter *a, const char *dir)
{
    struct assay_check_result r[2];
    assay_check_result_init(&r[0], "equiv.kv-cache", ASSAY_FAMILY_EQUIVALENCE);
    snprintf(r[0].summary, sizeof r[0].summary, "8 requests, 96 tokens equal");
    assay_check_result_init(&r[1], "prop.blocks", ASSAY_FAMILY_PROPERTY);
    r[1].verdict = ASSAY_VERDICT_FAIL;
    snprintf(r[1].failure, sizeof r[1].failure, "step 12: 3 blocks leaked");
    snprintf(r[1].repro, sizeof r[1].repro, "assay verify --check prop.blocks");
    cJSON *report = NULL, *stamp = NULL;
    struct assay_stamp_seed seeds[] = {{"master", 1}};
    enum assay_status st = assay_report_create("run", "assay run --faults", &report);
    if (st == ASSAY_OK) {
        st = assay_report_add_checks(report, r, 2);
    }
    if (st == ASSAY_OK) {
        st = assay_report_add_note(report, "written under injected allocation failures");
    }
    if (st == ASSAY_OK) {
        st = assay_stamp_create(a, seeds, 1, &stamp);
    }
    if (st == ASSAY_OK) {
        st = assay_report_set(report, "stamp", stamp);
    }
    struct assay_report_paths paths;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (st == ASSAY_OK) {
        st = assay_report_write_all(report, dir, "report", &paths, &diag);
    }
    if (st != ASSAY_OK && st != ASSAY_ERR_NOMEM) {
        char why[900];
        printf("# report writer: %s: %s\n", assay_status_str(st),
               assay_diag_format(&diag, why, sizeof why));
    }
    cJSON_Delete(report);
    return st;
}

static void test_report_writer(void **state)
{
    (void)state;
    char dir[1024];
    assay_test_scratch("faults-report", dir, sizeof dir);
    assert_true(mkdir(dir, 0755) == 0 || errno == EEXIST);
    empty_dir(dir);
    struct assay_adapter a;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_adapter_open_spec("bundled:model=mini", &a, &diag), ASSAY_OK);
    struct loop l = {.path = "report writer"};
    for (l.k = 1;; l.k++) {
        assay_test_fail_alloc_at(l.k);
        enum assay_status st = report_run(&a, dir);
        int files = count_files(dir);
        if (!end_run(&l)) {
            assert_int_equal(st, ASSAY_OK);
            assert_int_equal(files, 3); /* report.json, .html, .md */
            break;
        }
        if (st != ASSAY_ERR_NOMEM) {
            fail_msg("report writer: failing allocation %ld gave %s (%d files written)", l.k,
                     assay_status_str(st), files);
        }
        l.n_nomem++;
        if (files != 0) {
            fail_msg("report writer: failing allocation %ld left %d file(s) behind", l.k, files);
        }
    }
    report_loop(&l);
    /* What was written is the report, whole. */
    char path[1200];
    snprintf(path, sizeof path, "%s/report.json", dir);
    cJSON *back = NULL;
    assert_int_equal(assay_report_load(path, &back, &diag), ASSAY_OK);
    assert_string_equal(assay_report_verdict(back), "FAIL");
    cJSON_Delete(back);
    empty_dir(dir);
    assay_adapter_close(&a);
}

static int setup(void **state)
{
    (void)state;
    assay_stats_init();
    struct assay_workload_limits lim = {260, 256, 0};
    struct assay_diag diag;
    return assay_workload_parse(k_trace, strlen(k_trace), "faults", &lim, &g_trace, &diag) ==
                   ASSAY_OK
               ? 0
               : -1;
}

static int teardown(void **state)
{
    (void)state;
    assay_workload_free(g_trace);
    return 0;
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_and_step_loop),
        cmocka_unit_test(test_equivalence_check),
        cmocka_unit_test(test_distributional_check),
        cmocka_unit_test(test_property_check),
        cmocka_unit_test(test_report_writer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
