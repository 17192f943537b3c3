/*
 * The mutants label: a must-fail control per planted bug.
 *
 *   test_mutants NAME        the plan must FAIL on bundled:mutant=NAME, and a
 *                            check of the family the catalog names must be
 *                            among those that fail
 *   test_mutants NAME --dies SIGSEGV|SIGABRT|timeout [--timeout SECONDS]
 *                            a bug that kills or hangs the engine: the check
 *                            it hits must FAIL because its process died of
 *                            that signal (or was killed at the time limit)
 *                            inside the engine, and the family's other
 *                            checks must all still run and report
 *   test_mutants NAME --context-only CHECK
 *                            as the first form, and the PIT check CHECK must
 *                            FAIL by its conditional test alone: no hard
 *                            rule, the marginal PIT passing, the test within
 *                            the oracle's entropy groups failing (a bias
 *                            whose sign depends on the context)
 *   test_mutants --catalog NAME...
 *                            the names CMake registers are exactly the catalog
 *
 *   test_mutants NAME --one-check REASON [--also CHECK]
 *                            as the first form, for a bug that one check of
 *                            its family alone can see (REASON says why); CHECK,
 *                            a check of another family, must FAIL too
 *
 * The kill margin: every bug must be caught by at least two checks of its own
 * family, or by exactly one with the reason stated (--one-check; a second
 * catch then fails the test, so the reason cannot go stale), and a
 * distributional bug by its statistic, not by the zero-probability rule
 * alone. The expected family runs first and stops at its second failure
 * (for the distributional family, whose verdicts come from Holm's procedure,
 * at its second statistic at or below alpha / m, which Holm rejects whatever
 * the rest; all of it for a bug that kills its process, and with
 * --one-check or --context-only); only if it catches nothing do the other
 * families run, to say what did. `assay mutants --matrix` runs every check.
 *
 * The first failing check is then shrunk (checks/shrink.h) within a budget of
 * 300 runs or 30 s, whichever comes first: the reproducer is written to
 * <build>/scratch-repro/mutant-NAME.json, must still fail when rerun from
 * that file, must be no larger than the original, and its sizes before and
 * after and the command that reruns it are printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <sys/stat.h>

#include "checks/shrink.h"
#include "checks/context.h"
#include "checks/isolate.h"
#include "checks/plan.h"
#include "core/mutant.h"
#include "support.h"

static const char *g_name;
static int g_argc;
static char **g_argv;

/* How the planted bug is to end a check's process (--dies), or NULL. */
static const char *g_dies;
/* The checks' time limit (--timeout), 0: the default. */
static double g_timeout;
/* The PIT check that must fail by its conditional test alone
 * (--context-only), or NULL; its result once run. */
static const char *g_context_only;
static struct assay_check_result g_context_res;
static bool g_context_ran;
/* Why one check of the family is all that can catch the bug (--one-check),
 * or NULL; a check of another family that must catch it too (--also). */
static const char *g_one_check;
static const char *g_also;

/* Whether the plan row item names the bug called name among those it must
 * catch (its catches, a space-separated list). */
static bool names_bug(const struct assay_plan_item *item, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = item->catches; p != NULL && *p != '\0';) {
        size_t w = strcspn(p, " ");
        if (w == len && strncmp(p, name, len) == 0) {
            return true;
        }
        p += w + (p[w] == ' ');
    }
    return false;
}

/* Run family's checks on base; the number that FAIL. The first failure is
 * described in caught and returned through first_fail and first_res; the
 * failing checks' names are appended to names, and *by_statistic is set
 * when one of them failed by its statistic. */
static int run_family(struct assay_verify_ctx *ctx, enum assay_family family, const char *base,
                      char *caught, size_t size, const struct assay_plan_item **first_fail,
                      struct assay_check_result *first_res, char *names, size_t names_size,
                      bool *by_statistic)
{
    size_t n_plan;
    const struct assay_plan_item *plan = assay_verify_plan(&n_plan);
    struct assay_check_result *res = calloc(n_plan, sizeof *res);
    size_t *item_of = calloc(n_plan, sizeof *item_of); /* plan index of each result */
    assert_non_null(res);
    assert_non_null(item_of);
    size_t n = 0, m_family = 0, pending = 0;
    for (size_t i = 0; i < n_plan; i++) {
        m_family += plan[i].family == family;
        pending += plan[i].family == family && names_bug(&plan[i], g_name);
    }
    int n_failed = 0, n_beyond_holm = 0;
    for (size_t i = 0; i < n_plan; i++) {
        if (plan[i].family != family) {
            continue;
        }
        assert_int_equal(assay_run_plan_item(ctx, &plan[i], base, NULL, &res[n]), ASSAY_OK);
        item_of[n] = i;
        pending -= names_bug(&plan[i], g_name);
        /* Two failures show the margin; a bug that kills a check's process
         * runs the whole family: every check after the one that died must
         * still run. A distributional verdict comes from Holm's procedure
         * over the whole family, but two statistics at or below alpha / m
         * (m the family's checks) are rejected by it whatever the others
         * say, so the family stops there too; --one-check and
         * --context-only need every check; so do the rows that name the
         * bug among those they must catch. */
        n_failed += res[n].verdict == ASSAY_VERDICT_FAIL;
        n_beyond_holm += res[n].verdict == ASSAY_VERDICT_FAIL && res[n].statistic_fired &&
                         res[n].p_value <= res[n].alpha / (double)m_family;
        bool stop = pending == 0 &&
                    (family != ASSAY_FAMILY_DISTRIBUTIONAL
                         ? n_failed >= 2 && g_dies == NULL
                         : n_beyond_holm >= 2 && g_one_check == NULL && g_context_only == NULL);
        n++;
        if (stop) {
            break;
        }
    }
    if (family == ASSAY_FAMILY_DISTRIBUTIONAL && n < m_family) {
        printf("  (stopped after %zu of the family's %zu checks: two statistics at or below "
               "alpha / %zu, which Holm's procedure over the whole family rejects)\n",
               n, m_family, m_family);
    }
    assay_verify_finalize(res, n);
    /* Every row that names the bug must have caught it. */
    for (size_t i = 0; i < n; i++) {
        if (names_bug(&plan[item_of[i]], g_name) && res[i].verdict != ASSAY_VERDICT_FAIL) {
            fail_msg("%s names %s among the planted bugs it must catch, but it ended %s: %s",
                     res[i].name, g_name, assay_verdict_str(res[i].verdict), res[i].summary);
        }
    }
    n_failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (family == ASSAY_FAMILY_DISTRIBUTIONAL) {
            /* Every check's figures: which of them see the bug, and how clearly. */
            printf("  %-32s %-5s p %-9.3g Holm %-9.3g min-TV %.4f%s\n", res[i].name,
                   assay_verdict_str(res[i].verdict), res[i].p_value, res[i].p_adjusted,
                   res[i].min_tv,
                   res[i].verdict != ASSAY_VERDICT_FAIL ? ""
                   : res[i].statistic_fired             ? " (statistic)"
                                                        : " (rule alone)");
        }
        if (g_dies != NULL) {
            printf("  %-32s %-5s %s\n", res[i].name, assay_verdict_str(res[i].verdict),
                   res[i].summary);
        }
        if (g_context_only != NULL && strcmp(res[i].name, g_context_only) == 0) {
            printf("  %s: %s\n    %s\n", res[i].name, res[i].summary, res[i].failure);
            g_context_res = res[i];
            g_context_ran = true;
        }
        if (res[i].verdict == ASSAY_VERDICT_FAIL) {
            if (n_failed == 0) {
                snprintf(caught, size, "%s: %s\n    reproduce: %s", res[i].name, res[i].failure,
                         res[i].repro);
                *first_fail = &plan[item_of[i]];
                *first_res = res[i];
            }
            size_t used = strlen(names);
            snprintf(names + used, names_size - used, "%s%s", used > 0 ? ", " : "", res[i].name);
            *by_statistic = *by_statistic || res[i].statistic_fired;
            n_failed++;
        } else if (res[i].verdict == ASSAY_VERDICT_ERROR) {
            printf("  (%s could not run: %s)\n", res[i].name, res[i].failure);
        }
    }
    free(res);
    free(item_of);
    return n_failed;
}

/* Run the plan's check called name on base; it must FAIL. */
static void require_also(struct assay_verify_ctx *ctx, const char *name, const char *base)
{
    size_t n_plan;
    const struct assay_plan_item *plan = assay_verify_plan(&n_plan);
    for (size_t i = 0; i < n_plan; i++) {
        if (strcmp(plan[i].name, name) != 0) {
            continue;
        }
        struct assay_check_result r;
        assert_int_equal(assay_run_plan_item(ctx, &plan[i], base, NULL, &r), ASSAY_OK);
        assay_verify_finalize(&r, 1);
        printf("  also: %s %s\n", name, assay_verdict_str(r.verdict));
        if (r.verdict != ASSAY_VERDICT_FAIL) {
            fail_msg("%s: --also %s did not catch it: %s", g_name, name, r.summary);
        }
        return;
    }
    fail_msg("--also %s: no such check in the verify plan", name);
}

/* Shrink the failure and print the reproducer (see the header comment). */
static void shrink_failure(struct assay_verify_ctx *ctx, const struct assay_plan_item *item,
                           const char *base)
{
    char dir[1024], stem[160], sizes[320];
    assay_test_scratch("repro", dir, sizeof dir);
    mkdir(dir, 0777);
    snprintf(stem, sizeof stem, "mutant-%s", g_name);
    struct assay_shrink_opts o = {dir, stem, 300, 30.0};
    struct assay_shrink_result r;
    assert_int_equal(assay_shrink(ctx, item, base, NULL, &o, &r), ASSAY_OK);
    assert_true(r.reproduced);
    if (!r.shrinkable) {
        printf("  not shrunk (%s generates its own requests)\n    reproduce: %s\n", item->name,
               r.command);
        return;
    }
    printf("  SHRUNK in %d runs, %.1f s%s: %s\n    the shrunk case fails with: %s\n"
           "    reproduce: %s\n",
           (int)r.n_runs, r.seconds, r.budget_reached ? " (budget reached)" : "",
           assay_shrink_format_sizes(&r, sizes, sizeof sizes), r.failure, r.command);
    assert_true(r.confirmed);
    assert_true(r.after.n_requests <= r.before.n_requests);
    assert_true(r.after.prompt_tokens <= r.before.prompt_tokens);
    assert_true(r.after.max_tokens <= r.before.max_tokens);
    assert_true(r.after.blocks <= r.before.blocks);
}

static void test_mutant_is_caught(void **state)
{
    (void)state;
    enum assay_mutant m;
    assert_int_equal(assay_mutant_by_name(g_name, &m), ASSAY_OK);
    const struct assay_mutant_info *info = assay_mutant_info(m);
    enum assay_family expected;
    if (!assay_family_by_name(info->caught_by, &expected)) {
        fail_msg("mutant %s is caught by the %s label, outside the verify plan", g_name,
                 info->caught_by);
    }
    char fixtures[1024], base[128], caught[2048] = "";
    assay_test_fixture("", fixtures, sizeof fixtures);
    snprintf(base, sizeof base, "bundled:mutant=%s", g_name);
    struct assay_verify_ctx *ctx;
    assert_int_equal(assay_verify_ctx_init(&ctx, fixtures, 1), ASSAY_OK);
    printf("mutant %s\n  mechanism: %s\n  modelled on: %s\n", info->name, info->mechanism,
           info->modelled_on);
    if (g_timeout > 0) {
        struct assay_isolation iso = {true, g_timeout};
        assay_verify_set_isolation(ctx, &iso);
    }
    const struct assay_plan_item *failing = NULL;
    struct assay_check_result first;
    char names[1024] = "";
    bool by_statistic = false;
    int n_own = run_family(ctx, expected, base, caught, sizeof caught, &failing, &first, names,
                           sizeof names, &by_statistic);
    if (n_own > 0) {
        printf("  CAUGHT by %s\n  own family's failing checks (%d): %s\n", caught, n_own, names);
    } else {
        for (int f = 0; f <= ASSAY_FAMILY_SEEDED; f++) {
            char other[1024] = "";
            bool other_stat = false;
            if ((enum assay_family)f != expected &&
                run_family(ctx, (enum assay_family)f, base, caught, sizeof caught, &failing,
                           &first, other, sizeof other, &other_stat) > 0) {
                printf("  caught only by another family: %s\n", caught);
                break;
            }
        }
    }
    if (g_also != NULL) {
        require_also(ctx, g_also, base);
    }
    if (failing != NULL && g_dies != NULL) {
        /* The check's process ended as the bug makes it end, and said where. */
        if (strcmp(g_dies, "timeout") == 0) {
            assert_true(first.timed_out);
        } else {
            int sig = strcmp(g_dies, "SIGSEGV") == 0 ? SIGSEGV : SIGABRT;
            if (first.died_signal != sig) {
                fail_msg("%s: the check's process ended with signal %d, not %s: %s", g_name,
                         (int)first.died_signal, g_dies, first.failure);
            }
        }
        assert_non_null(strstr(first.failure, "inside the engine, at step"));
        assert_true(first.repro[0] != '\0');
    }
    if (failing != NULL && (g_dies == NULL || strcmp(g_dies, "timeout") != 0)) {
        shrink_failure(ctx, failing, base);
    } else if (failing != NULL) {
        printf("  not shrunk: each run of a hanging case lasts the whole time limit\n");
    }
    fflush(stdout);
    assay_verify_ctx_free(ctx);
    if (g_context_only != NULL) {
        const struct assay_check_result *r = &g_context_res;
        assert_true(g_context_ran);
        assert_int_equal(r->verdict, ASSAY_VERDICT_FAIL);
        assert_false(r->rule_fired);
        assert_true(r->statistic_fired);
        assert_true(r->p_value <= r->alpha);
        if (strstr(r->failure, "the marginal test alone passes") == NULL) {
            fail_msg("%s: not the conditional test alone: %s", g_context_only, r->failure);
        }
    }
    if (n_own == 0) {
        fail_msg("mutant %s was not caught by the %s family", g_name, info->caught_by);
    }
    if (expected == ASSAY_FAMILY_DISTRIBUTIONAL && !by_statistic) {
        fail_msg("mutant %s was caught by the zero-probability rule alone, never by a statistic",
                 g_name);
    }
    if (g_one_check == NULL && n_own < 2) {
        fail_msg("mutant %s was caught by one check of its family (%s); the margin needs two, "
                 "or --one-check with the reason one is all that can exist",
                 g_name, names);
    }
    if (g_one_check != NULL && n_own >= 2) {
        fail_msg("mutant %s is registered with --one-check (\"%s\") but %d checks of its family "
                 "catch it (%s): drop the stated reason",
                 g_name, g_one_check, n_own, names);
    }
    if (g_one_check != NULL) {
        printf("  one check of the family: %s\n", g_one_check);
    }
}

static void test_catalog_matches(void **state)
{
    (void)state;
    /* The names CMake read from core/mutants.def (and registered tests
     * for) are the compiled catalog's, in its order, and nothing else. */
    int n_registered = g_argc - 2;
    assert_int_equal(n_registered, ASSAY_MUTANT_COUNT - 1);
    for (int i = 2; i < g_argc; i++) {
        const struct assay_mutant_info *info = assay_mutant_info((enum assay_mutant)(i - 1));
        assert_non_null(info);
        if (strcmp(g_argv[i], info->name) != 0) {
            fail_msg("CMake read %s at position %d of the catalog, the compiler %s", g_argv[i],
                     i - 1, info->name);
        }
    }
    assert_true(assay_mutants_compiled());
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    g_argc = argc;
    g_argv = argv;
    if (argc >= 2 && strcmp(argv[1], "--catalog") == 0) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_catalog_matches)};
        return cmocka_run_group_tests(tests, NULL, NULL);
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dies") == 0) {
            g_dies = argv[i + 1];
        } else if (strcmp(argv[i], "--timeout") == 0) {
            g_timeout = atof(argv[i + 1]);
        } else if (strcmp(argv[i], "--context-only") == 0) {
            g_context_only = argv[i + 1];
        } else if (strcmp(argv[i], "--one-check") == 0) {
            g_one_check = argv[i + 1];
        } else if (strcmp(argv[i], "--also") == 0) {
            g_also = argv[i + 1];
        } else {
            argc = 0;
        }
    }
    if (argc < 2 || argc % 2 != 0) {
        fprintf(stderr, "usage: test_mutants NAME [--dies SIGSEGV|SIGABRT|timeout] "
                        "[--timeout SECONDS] [--context-only CHECK] [--one-check REASON [--also CHECK]]"
                        " | --catalog NAME...\n");
        return 2;
    }
    g_name = argv[1];
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_mutant_is_caught)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
