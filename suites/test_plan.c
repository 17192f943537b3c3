/*
 * test_plan.c - the one registry of checks (checks/plan.h) and the needs
 * rule (checks/check.h): every command has its checks, each once, with a
 * runner; the bundled engine meets the needs of every verify check (so a
 * verify run on it never skips); a target that lacks a need gets SKIP with
 * the reason, never PASS; the reproducer line has one form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/spec.h"
#include "checks/context.h"
#include "checks/distributional.h"
#include "checks/equivalence.h"
#include "checks/plan.h"
#include "oracles/oracle.h"
#include "support.h"

static void test_every_command_has_its_checks(void **state)
{
    (void)state;
    const enum assay_command commands[] = {ASSAY_COMMAND_VERIFY, ASSAY_COMMAND_AUDIT,
                                           ASSAY_COMMAND_COMPARE};
    for (size_t c = 0; c < 3; c++) {
        size_t n;
        const struct assay_plan_item *plan = assay_plan_for(commands[c], &n);
        assert_true(n > 0);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(plan[i].command, commands[c]);
            assert_non_null(plan[i].run);
            assert_non_null(plan[i].about);
            assert_non_null(plan[i].options);
            assert_ptr_equal(assay_plan_find_in(commands[c], plan[i].name), &plan[i]);
            for (size_t j = 0; j < i; j++) {
                assert_string_not_equal(plan[i].name, plan[j].name);
            }
        }
    }
    assert_null(assay_plan_find_in(ASSAY_COMMAND_AUDIT, "equiv.kv-cache"));
    assert_null(assay_plan_find("audit.prop.usage"));
}

/* The verify label runs the distributional family in parts, each a list
 * of name prefixes (suites/CMakeLists.txt passes them here as arguments):
 * every distributional check of the verify plan is in exactly one part, so
 * a check named otherwise cannot be left out of the label. */
static int g_n_parts;
static char **g_parts;

static void test_verify_label_runs_every_dist_check(void **state)
{
    (void)state;
    if (g_n_parts == 0) {
        /* run by hand without the parts: nothing to check them against */
        printf("  skipped: no verify-label parts given (ctest passes them)\n");
        skip();
    }
    size_t n, n_dist = 0;
    const struct assay_plan_item *plan = assay_verify_plan(&n);
    for (size_t i = 0; i < n; i++) {
        if (plan[i].family != ASSAY_FAMILY_DISTRIBUTIONAL) {
            continue;
        }
        n_dist++;
        int in = 0;
        for (int k = 0; k < g_n_parts; k++) {
            in += assay_test_name_in(plan[i].name, g_parts[k]);
        }
        if (in != 1) {
            fail_msg("%s is in %d of the verify label's distributional parts, not 1", plan[i].name,
                     in);
        }
    }
    assert_true(n_dist > 0);
}

/* The bundled engine, configured as each verify check says, can do what
 * the check needs: a need listed by mistake would make verify skip it. */
static void test_bundled_meets_verify_needs(void **state)
{
    (void)state;
    char fixtures[1200];
    struct assay_verify_ctx *ctx = NULL;
    assert_int_equal(assay_verify_ctx_init(&ctx, assay_test_fixture("", fixtures, sizeof fixtures),
                                           1),
                     ASSAY_OK);
    size_t n;
    const struct assay_plan_item *plan = assay_verify_plan(&n);
    for (size_t i = 0; i < n; i++) {
        char spec[1024];
        assay_plan_engine_spec(&plan[i], "bundled", spec, sizeof spec);
        struct assay_adapter a;
        struct assay_diag diag;
        assay_diag_clear(&diag);
        assert_int_equal(assay_adapter_open_spec(spec, &a, &diag), ASSAY_OK);
        struct assay_target t = assay_target_of(ctx, &a, spec);
        struct assay_check_result res;
        assay_check_result_init(&res, plan[i].name, plan[i].family);
        if (!assay_target_meets(&t, &plan[i], &res)) {
            fail_msg("%s on %s: %s", plan[i].name, spec, res.failure);
        }
        assert_int_equal(res.verdict, ASSAY_VERDICT_PASS);
        assay_adapter_close(&a);
    }
    assay_verify_ctx_free(ctx);
}

/* The expected count the last token a top-p cut keeps must reach at the
 * check's n for the boundary to be tested, not just present. */
#define TOP_P_BOUNDARY_MIN_COUNT 50.0

/*
 * The goodness-of-fit checks of the JOINT and the SEQUENTIAL order test the
 * top-p boundary: on the prompt each one tests (at master seed 1, the
 * verify label's), top-p removes tokens that top-k alone would keep, and
 * the last token kept has an expected count of at least
 * TOP_P_BOUNDARY_MIN_COUNT at the check's n. A change of parameters that
 * lets top-k decide the cut again, or leaves the boundary token too rare
 * to test, fails here.
 */
static void test_gof_top_p_binds(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        enum assay_sampling_order order;
    } entries[] = {{"dist.gof.first", ASSAY_SAMPLING_JOINT},
                   {"dist.gof.sequential", ASSAY_SAMPLING_SEQUENTIAL}};
    char fixtures[1200];
    struct assay_verify_ctx *ctx = NULL;
    assert_int_equal(assay_verify_ctx_init(&ctx, assay_test_fixture("", fixtures, sizeof fixtures),
                                           1),
                     ASSAY_OK);
    for (size_t e = 0; e < sizeof entries / sizeof entries[0]; e++) {
        const struct assay_plan_item *item = assay_plan_find(entries[e].name);
        assert_non_null(item);
        char spec[1024];
        assay_plan_engine_spec(item, "bundled", spec, sizeof spec);
        struct assay_adapter a;
        struct assay_diag diag;
        assay_diag_clear(&diag);
        assert_int_equal(assay_adapter_open_spec(spec, &a, &diag), ASSAY_OK);
        struct assay_target t = assay_target_of(ctx, &a, spec);
        assert_int_equal(t.order, entries[e].order);
        /* The parameters as the plan's runner makes them. */
        struct assay_dist_params p = assay_dist_default_params();
        p.order = t.order;
        char why[300];
        assert_int_equal(assay_dist_parse_params(item->params, &p, why, sizeof why), ASSAY_OK);
        p.seed = assay_verify_seed(ctx, item->name);
        assert_int_equal(p.positions, 1);
        const int32_t v = t.model->cfg.vocab;
        int32_t prompt[64];
        assert_true(p.prompt_len <= 64);
        double *prob = calloc((size_t)v, sizeof(double));
        double *prob_k = calloc((size_t)v, sizeof(double));
        double *rows = calloc((size_t)v * (size_t)p.prompt_len, sizeof(double));
        assert_non_null(prob);
        assert_non_null(prob_k);
        assert_non_null(rows);
        assert_int_equal(assay_dist_choose_prompt(t.model, &p, prompt, prob), ASSAY_OK);
        struct assay_oracle *o = NULL;
        assert_int_equal(assay_oracle_init(&o, t.model, p.prompt_len), ASSAY_OK);
        assert_int_equal(assay_oracle_logits(o, prompt, p.prompt_len, rows), ASSAY_OK);
        const double *row = rows + (int64_t)(p.prompt_len - 1) * v;
        struct assay_sampling k_only = p.sampling;
        k_only.top_p = 1.0f;
        struct assay_oracle_dist_info info_k, info;
        assert_int_equal(assay_oracle_distribution(row, v, &k_only, p.order, prob_k, &info_k),
                         ASSAY_OK);
        assert_int_equal(assay_oracle_distribution(row, v, &p.sampling, p.order, prob, &info),
                         ASSAY_OK);
        double last = 1.0;
        for (int32_t x = 0; x < v; x++) {
            last = prob[x] > 0.0 && prob[x] < last ? prob[x] : last;
        }
        printf("  %s: top-k %d keeps %d, with top-p %.2g %d; the last kept token's expected "
               "count %.0f at n %lld; top-p margin %.2g\n",
               item->name, (int)p.sampling.top_k, (int)info_k.n_kept, (double)p.sampling.top_p,
               (int)info.n_kept, last * (double)p.n, (long long)p.n, info.top_p_margin);
        assert_true(info.n_kept < info_k.n_kept);
        assert_true(last * (double)p.n >= TOP_P_BOUNDARY_MIN_COUNT);
        assay_oracle_free(o);
        free(rows);
        free(prob_k);
        free(prob);
        assay_adapter_close(&a);
    }
    assay_verify_ctx_free(ctx);
}

/* A target that lacks a need: SKIP naming it and what would provide it,
 * and no reproducer. */
static void test_lacking_a_need_skips(void **state)
{
    (void)state;
    const struct assay_plan_item *item = assay_plan_find("equiv.kv-cache");
    assert_non_null(item);
    struct assay_target t;
    memset(&t, 0, sizeof t);
    t.can = ASSAY_NEED_LOGITS | ASSAY_NEED_BLOCKS;
    struct assay_check_result res;
    assay_check_result_init(&res, item->name, item->family);
    snprintf(res.repro, sizeof res.repro, "assay verify --check %s", item->name);
    assert_false(assay_target_meets(&t, item, &res));
    assert_int_equal(res.verdict, ASSAY_VERDICT_SKIP);
    assert_non_null(strstr(res.failure, "needs weights"));
    assert_non_null(strstr(res.failure, "--model FILE.gguf"));
    assert_string_equal(res.repro, "");
    t.can |= ASSAY_NEED_WEIGHTS;
    assay_check_result_init(&res, item->name, item->family);
    assert_true(assay_target_meets(&t, item, &res));
    assert_int_equal(res.verdict, ASSAY_VERDICT_PASS);
    char words[160];
    assert_string_equal(assay_needs_str(ASSAY_NEED_METRICS | ASSAY_NEED_SERVER, words,
                                        sizeof words),
                        "metrics, server");
    assert_string_equal(assay_needs_str(0, words, sizeof words), "nothing");
}

/* One precedence rule: a verdict only rises, and the first reason at the
 * final level stands. */
static void test_verdict_precedence(void **state)
{
    (void)state;
    struct assay_check_result r;
    assay_check_result_init(&r, "x", ASSAY_FAMILY_PROPERTY);
    assay_check_skip(&r, "skip %d", 1);
    assert_int_equal(r.verdict, ASSAY_VERDICT_SKIP);
    assay_check_skip(&r, "skip %d", 2);
    assert_string_equal(r.failure, "skip 1");
    assay_check_error(&r, "error");
    assert_int_equal(r.verdict, ASSAY_VERDICT_ERROR);
    assay_check_fail(&r, "fail %d", 1);
    assay_check_fail(&r, "fail %d", 2);
    assay_check_error(&r, "late error");
    assay_check_skip(&r, "late skip");
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_string_equal(r.failure, "fail 1");
    assay_check_set(&r, ASSAY_VERDICT_PASS, "never");
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
}

/* The one tie rule: both tokens within the tolerance of the best logit. */
static void test_tie_rule(void **state)
{
    (void)state;
    const double row[5] = {1.0, 3.0, 2.9995, 2.9, 2.9004};
    double gap = 0.0;
    assert_true(assay_tie(row, 5, 1, 2, 1e-3, &gap));
    assert_true(gap > 4.9e-4 && gap < 5.1e-4);
    assert_true(assay_tie(row, 5, 2, 1, 1e-3, NULL));
    assert_true(assay_tie(row, 5, 1, 1, 0.0, &gap));
    /* Close to each other but both far below the best: not a tie. */
    assert_false(assay_tie(row, 5, 3, 4, 1e-3, &gap));
    assert_true(gap > 0.09);
    assert_false(assay_tie(row, 5, 1, 0, 1e-3, NULL));
    assert_false(assay_tie(row, 5, 1, 5, 1e-3, &gap));
    assert_true(gap != gap); /* NaN: a token outside the row */
    assert_false(assay_tie(row, 5, -1, 1, 1e-3, NULL));
}

static void test_repro_line(void **state)
{
    (void)state;
    char buf[128];
    assert_string_equal(assay_repro_line(buf, sizeof buf, "assay", "verify", "--engine 'bundled'",
                                         "equiv.paged", 7, " --workload w.json"),
                        "assay verify --engine 'bundled' --check equiv.paged --seed 7 --workload "
                        "w.json");
    char small[24];
    assert_string_equal(assay_repro_line(small, sizeof small, "assay", "verify", "--engine x",
                                         "equiv.paged", 7, NULL),
                        "");
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    g_n_parts = argc - 1;
    g_parts = argv + 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_command_has_its_checks),
        cmocka_unit_test(test_verify_label_runs_every_dist_check),
        cmocka_unit_test(test_bundled_meets_verify_needs),
        cmocka_unit_test(test_lacking_a_need_skips),
        cmocka_unit_test(test_verdict_precedence),
        cmocka_unit_test(test_tie_rule),
        cmocka_unit_test(test_repro_line),
        cmocka_unit_test(test_gof_top_p_binds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
