/*
 * test_plan.c - the one registry of checks (checks/plan.h) and the needs
 * rule (checks/check.h): every command has its checks, each once, with a
 * runner; the bundled engine meets the needs of every verify check (so a
 * verify run on it never skips); a target that lacks a need gets SKIP with
 * the reason, never PASS; the reproducer line has one form; and every
 * distributional check tests the filter cut it claims (top-k or top-p
 * binding, above temperature 1, an exact tie at the cut).
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
#include "checks/stats.h"
#include "core/mutant.h"
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

/* The verify label runs the distributional family in parts, one test per
 * group (suites/CMakeLists.txt passes the groups here as arguments): every
 * distributional check of the verify plan names exactly one of them, so
 * none can be left out of the label, and no other row names a group. */
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
            if (plan[i].group != NULL) {
                fail_msg("%s names the group %s, but its family runs as one test", plan[i].name,
                         plan[i].group);
            }
            continue;
        }
        n_dist++;
        int in = 0;
        for (int k = 0; k < g_n_parts && plan[i].group != NULL; k++) {
            in += strcmp(plan[i].group, g_parts[k]) == 0;
        }
        if (in != 1) {
            fail_msg("%s names the group %s, not one of the verify label's distributional tests",
                     plan[i].name, plan[i].group != NULL ? plan[i].group : "(none)");
        }
    }
    assert_true(n_dist > 0);
}

/* The rows and the catalog name each other: every bug a row says it must
 * catch is a planted bug of the row's own family, and every planted bug
 * that the verify plan's families catch is named by a row (the mutants
 * label then holds each row to its list). */
static void test_rows_name_their_bugs(void **state)
{
    (void)state;
    size_t n;
    const struct assay_plan_item *plan = assay_verify_plan(&n);
    int named[ASSAY_MUTANT_COUNT] = {0};
    for (size_t i = 0; i < n; i++) {
        char list[1024];
        snprintf(list, sizeof list, "%s", plan[i].catches != NULL ? plan[i].catches : "");
        char *save = NULL;
        for (char *w = strtok_r(list, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
            enum assay_mutant m;
            if (assay_mutant_by_name(w, &m) != ASSAY_OK) {
                fail_msg("%s names %s, which is not in core/mutants.def", plan[i].name, w);
            }
            const char *own = assay_family_str(plan[i].family);
            if (strcmp(assay_mutant_info(m)->caught_by, own) != 0) {
                fail_msg("%s (%s) names %s, a bug its catalog entry gives to %s", plan[i].name,
                         own, w, assay_mutant_info(m)->caught_by);
            }
            named[m]++;
        }
    }
    int n_named = 0;
    for (int k = 1; k < ASSAY_MUTANT_COUNT; k++) {
        const struct assay_mutant_info *m = assay_mutant_info((enum assay_mutant)k);
        enum assay_family f;
        if (!assay_family_by_name(m->caught_by, &f)) {
            continue; /* caught outside the plan: the portability, numerics labels */
        }
        if (named[k] == 0) {
            fail_msg("planted bug %s (caught by %s) is named by no row of the plan", m->name,
                     m->caught_by);
        }
        n_named++;
    }
    printf("  %d planted bugs, each named by the rows that must catch it\n", n_named);
    assert_true(n_named > 0);
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

/* The expected count the last token a cut keeps must reach at the check's
 * n for the boundary to be tested, not just present. */
#define BOUNDARY_MIN_COUNT 50.0

/* A verify check's target and parameters as the plan's runner makes them
 * (master seed 1, the verify label's); the adapter is open. */
static void plan_params(struct assay_verify_ctx *ctx, const char *name, struct assay_adapter *a,
                        struct assay_target *t, struct assay_dist_params *p)
{
    const struct assay_plan_item *item = assay_plan_find(name);
    assert_non_null(item);
    char spec[1024];
    assay_plan_engine_spec(item, "bundled", spec, sizeof spec);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_adapter_open_spec(spec, a, &diag), ASSAY_OK);
    *t = assay_target_of(ctx, a, spec);
    *p = assay_dist_default_params();
    p->order = t->order;
    char why[300];
    assert_int_equal(assay_dist_parse_params(item->params, p, why, sizeof why), ASSAY_OK);
    p->seed = assay_verify_seed(ctx, item->name);
}

/* Which cut of a processed distribution decides its kept set: top-k when
 * it keeps exactly top_k tokens and top-p alone would keep more, top-p
 * when it keeps fewer than top-k alone; row is the oracle's logits, prob
 * gets the distribution under p (scratch: v doubles). */
enum cut { CUT_TOP_K, CUT_TOP_P, CUT_NONE };

static enum cut binding_cut(const double *row, int32_t v, const struct assay_dist_params *p,
                            double *prob, double *scratch, int32_t *n_kept)
{
    struct assay_sampling k_only = p->sampling, p_only = p->sampling;
    k_only.top_p = 1.0f;
    p_only.top_k = 0;
    struct assay_oracle_dist_info info, info_k, info_p;
    assert_int_equal(assay_oracle_distribution(row, v, &k_only, p->order, scratch, &info_k),
                     ASSAY_OK);
    assert_int_equal(assay_oracle_distribution(row, v, &p_only, p->order, scratch, &info_p),
                     ASSAY_OK);
    assert_int_equal(assay_oracle_distribution(row, v, &p->sampling, p->order, prob, &info),
                     ASSAY_OK);
    *n_kept = info.n_kept;
    if (p->sampling.top_k > 0 && p->sampling.top_k < v && info.n_kept == p->sampling.top_k &&
        info_p.n_kept > p->sampling.top_k) {
        return CUT_TOP_K;
    }
    return info.n_kept < info_k.n_kept ? CUT_TOP_P : CUT_NONE;
}

/*
 * Every goodness-of-fit check of the verify plan tests the cut it claims,
 * on the prompt it tests (at master seed 1, the verify label's): top-p
 * removing tokens that top-k keeps, or top-k keeping exactly top_k tokens
 * where top-p alone would keep more; the last token kept expected at least
 * BOUNDARY_MIN_COUNT times at the check's n; the temperature above 1
 * where the check is about that; and for the tie checks (mini-twins) the
 * cut an exact tie whose kept token is likely enough that a sampler keeping
 * both tied tokens moves a mass m = q / (1 + q) of at least twice the
 * check's min-TV (the chi-squared detects mass moved outside its bins once
 * it reaches that: assay_gof_test_missing), and for the others no exact tie
 * at the cut. A change of parameters that lets the other filter decide the
 * cut, leaves the boundary token too rare to test, or the tie too light to
 * see fails here.
 */
static void test_gof_cuts_bind(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        enum assay_sampling_order order;
        enum cut cut;
        bool hot;  /* temperature above 1 */
        bool tie;  /* the cut an exact tie */
    } entries[] = {
        {"dist.gof.first", ASSAY_SAMPLING_JOINT, CUT_TOP_P, false, false},
        {"dist.gof.sequential", ASSAY_SAMPLING_SEQUENTIAL, CUT_TOP_P, false, false},
        {"dist.gof.hot-top-k", ASSAY_SAMPLING_JOINT, CUT_TOP_K, true, false},
        {"dist.gof.hot-top-p", ASSAY_SAMPLING_JOINT, CUT_TOP_P, true, false},
        {"dist.gof.ties-top-k", ASSAY_SAMPLING_JOINT, CUT_TOP_K, true, true},
        {"dist.gof.ties-top-p", ASSAY_SAMPLING_JOINT, CUT_TOP_P, false, true},
    };
    char fixtures[1200];
    struct assay_verify_ctx *ctx = NULL;
    assert_int_equal(assay_verify_ctx_init(&ctx, assay_test_fixture("", fixtures, sizeof fixtures),
                                           1),
                     ASSAY_OK);
    for (size_t e = 0; e < sizeof entries / sizeof entries[0]; e++) {
        struct assay_adapter a;
        struct assay_target t;
        struct assay_dist_params p;
        plan_params(ctx, entries[e].name, &a, &t, &p);
        assert_int_equal(t.order, entries[e].order);
        assert_int_equal(p.positions, 1);
        assert_int_equal(p.tie != ASSAY_DIST_TIE_NONE, entries[e].tie);
        const int32_t v = t.model->cfg.vocab;
        int32_t prompt[64];
        assert_true(p.prompt_len <= 64);
        double *prob = calloc((size_t)v, sizeof(double));
        double *scratch = calloc((size_t)v, sizeof(double));
        double *rows = calloc((size_t)v * (size_t)p.prompt_len, sizeof(double));
        assert_non_null(prob);
        assert_non_null(scratch);
        assert_non_null(rows);
        assert_int_equal(assay_dist_choose_prompt(t.model, &p, prompt, prob), ASSAY_OK);
        struct assay_oracle *o = NULL;
        assert_int_equal(assay_oracle_init(&o, t.model, p.prompt_len), ASSAY_OK);
        assert_int_equal(assay_oracle_logits(o, prompt, p.prompt_len, rows), ASSAY_OK);
        const double *row = rows + (int64_t)(p.prompt_len - 1) * v;
        int32_t n_kept = 0;
        enum cut cut = binding_cut(row, v, &p, prob, scratch, &n_kept);
        double last = 1.0;
        for (int32_t x = 0; x < v; x++) {
            last = prob[x] > 0.0 && prob[x] < last ? prob[x] : last;
        }
        printf("  %s: T %.2g, top-k %d, top-p %.2g: %d kept, cut by %s; the last kept token's "
               "expected count %.0f at n %lld\n",
               entries[e].name, (double)p.sampling.temperature, (int)p.sampling.top_k,
               (double)p.sampling.top_p, (int)n_kept,
               cut == CUT_TOP_K ? "top-k" : cut == CUT_TOP_P ? "top-p" : "neither",
               last * (double)p.n, (long long)p.n);
        assert_int_equal(cut, entries[e].cut);
        assert_true(last * (double)p.n >= BOUNDARY_MIN_COUNT);
        assert_int_equal(p.sampling.temperature > 1.0f, entries[e].hot);
        struct assay_dist_tie_info ti;
        bool tied = assay_dist_cut_tie(row, prob, v, &ti);
        assert_int_equal(tied, entries[e].tie);
        if (tied) {
            struct assay_gof_bins *bins = NULL;
            assert_int_equal(assay_gof_bins_make(prob, v, (double)p.n, 5.0, &bins), ASSAY_OK);
            double min_tv = 0.0;
            assert_int_equal(assay_min_detectable_tv(p.alpha, bins->n_bins - 1, p.power,
                                                     (double)p.n, &min_tv),
                             ASSAY_OK);
            double m = ti.q / (1.0 + ti.q);
            printf("    exact tie: token %d kept (probability %.3f), %d removed, logits %.3g "
                   "from every other; keeping both moves %.3f, the higher id instead %.3f; "
                   "min-TV %.4f\n",
                   (int)ti.kept, ti.q, (int)ti.dropped, ti.gap, m, ti.q, min_tv);
            assert_true(ti.gap >= p.tol_logit);
            assert_true(m >= 2.0 * min_tv);
            assay_gof_bins_free(bins);
        }
        assay_oracle_free(o);
        free(rows);
        free(scratch);
        free(prob);
        assay_adapter_close(&a);
    }
    assay_verify_ctx_free(ctx);
}

/*
 * The PIT checks test the cuts they claim along whole sequences: along one
 * sequence the oracle samples itself from each of the check's prompts (at
 * master seed 1), top-k and top-p each decide the kept set at the stated
 * share of the positions at least (dist.pit.hot, above temperature 1), or
 * the deciding cut is an exact tie (dist.pit.ties, on mini-twins).
 */
static void test_pit_cuts_bind(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool hot;
        bool tie;      /* count only cuts that are exact ties */
        double k_share; /* of positions, at least */
        double p_share;
    } entries[] = {
        {"dist.pit.hot", true, false, 0.25, 0.25},
        {"dist.pit.ties", false, true, 0.25, 0.05},
    };
    char fixtures[1200];
    struct assay_verify_ctx *ctx = NULL;
    assert_int_equal(assay_verify_ctx_init(&ctx, assay_test_fixture("", fixtures, sizeof fixtures),
                                           1),
                     ASSAY_OK);
    for (size_t e = 0; e < sizeof entries / sizeof entries[0]; e++) {
        struct assay_adapter a;
        struct assay_target t;
        struct assay_dist_params p;
        plan_params(ctx, entries[e].name, &a, &t, &p);
        assert_int_equal(p.tie != ASSAY_DIST_TIE_NONE, entries[e].tie);
        assert_int_equal(p.sampling.temperature > 1.0f, entries[e].hot);
        const int32_t v = t.model->cfg.vocab, plen = p.prompt_len, len = p.out_len;
        int32_t *seq = calloc((size_t)(plen + len), sizeof(int32_t));
        double *rows = calloc((size_t)(plen + len) * (size_t)v, sizeof(double));
        double *prob = calloc((size_t)v, sizeof(double));
        double *scratch = calloc((size_t)v, sizeof(double));
        assert_true(seq && rows && prob && scratch);
        struct assay_oracle *o = NULL;
        assert_int_equal(assay_oracle_init(&o, t.model, plen + len), ASSAY_OK);
        uint64_t state_u = 0x9e3779b97f4a7c15ULL;
        int64_t positions = 0, by_k = 0, by_p = 0;
        double q_sum = 0.0;
        for (int32_t s = 0; s < p.n_prompts; s++) {
            assay_dist_candidate_prompt(&p, s, seq);
            for (int32_t j = 0; j < len; j++) {
                assert_int_equal(assay_oracle_logits(o, seq, plen + j, rows), ASSAY_OK);
                const double *row = rows + (int64_t)(plen + j - 1) * v;
                int32_t n_kept = 0;
                enum cut cut = binding_cut(row, v, &p, prob, scratch, &n_kept);
                struct assay_dist_tie_info ti;
                bool counts = !entries[e].tie || assay_dist_cut_tie(row, prob, v, &ti);
                by_k += counts && cut == CUT_TOP_K;
                by_p += counts && cut == CUT_TOP_P;
                q_sum += entries[e].tie && counts && cut != CUT_NONE ? ti.q : 0.0;
                positions++;
                /* the oracle's own next token (xorshift uniforms) */
                state_u ^= state_u << 13;
                state_u ^= state_u >> 7;
                state_u ^= state_u << 17;
                double u = (double)(state_u >> 11) / 9007199254740992.0, cum = 0.0;
                int32_t x = -1;
                for (int32_t y = 0; y < v; y++) {
                    if (prob[y] > 0.0) {
                        x = y;
                        cum += prob[y];
                        if (u < cum) {
                            break;
                        }
                    }
                }
                seq[plen + j] = x;
            }
        }
        double k_share = (double)by_k / (double)positions;
        double p_share = (double)by_p / (double)positions;
        printf("  %s: T %.2g, top-k %d, top-p %.2g: of %lld positions, top-k decides %.0f%%, "
               "top-p %.0f%%%s",
               entries[e].name, (double)p.sampling.temperature, (int)p.sampling.top_k,
               (double)p.sampling.top_p, (long long)positions, 100.0 * k_share, 100.0 * p_share,
               entries[e].tie ? " with an exact tie at the cut" : "");
        if (entries[e].tie && by_k + by_p > 0) {
            printf(" (the kept tied token's mean probability %.3f)",
                   q_sum / (double)(by_k + by_p));
        }
        printf("\n");
        assert_true(k_share >= entries[e].k_share);
        assert_true(p_share >= entries[e].p_share);
        assay_oracle_free(o);
        free(seq);
        free(rows);
        free(prob);
        free(scratch);
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
        cmocka_unit_test(test_rows_name_their_bugs),
        cmocka_unit_test(test_verify_label_runs_every_dist_check),
        cmocka_unit_test(test_bundled_meets_verify_needs),
        cmocka_unit_test(test_lacking_a_need_skips),
        cmocka_unit_test(test_verdict_precedence),
        cmocka_unit_test(test_tie_rule),
        cmocka_unit_test(test_repro_line),
        cmocka_unit_test(test_gof_cuts_bind),
        cmocka_unit_test(test_pit_cuts_bind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
