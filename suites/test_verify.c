/*
 * The verify label: every check of one family of the verification plan,
 * against the bundled engine with its defaults plus each check's options.
 *
 *   test_verify FAMILY[:GROUP|:PREFIX[+PREFIX...]] [MASTER_SEED]
 *
 * With a group, only the family's checks whose plan row names that group
 * run (so that a long family is split over several CTest tests that run in
 * parallel; Holm's procedure then spans each part, which keeps the
 * family-wise error at the sum of the per-check levels all the same); with
 * prefixes, only those whose names start with one of them (memcheck, by
 * hand).
 *
 * All checks of the family run first (family-wide corrections such as
 * Holm's procedure need every p-value); then each is one test case that
 * passes only if its verdict is PASS. A SKIP is a failure here: against the
 * bundled engine every capability exists.
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

#include "checks/context.h"
#include "checks/plan.h"
#include "core/alloc.h"
#include "support.h"

static const char *g_family;
static char g_family_name[32];
static const char *g_prefixes = "";
static uint64_t g_seed = 1;
static struct assay_check_result *g_results;
static const struct assay_plan_item **g_items;
static size_t g_n;

/* Whether item is in this program's part of the family (all are when no
 * group or prefixes are given). */
static bool item_selected(const struct assay_plan_item *item)
{
    return g_prefixes[0] == '\0' ||
           (item->group != NULL && strcmp(item->group, g_prefixes) == 0) ||
           assay_test_name_in(item->name, g_prefixes);
}

static int run_family(void **state)
{
    (void)state;
    char fixtures[1024];
    assay_test_fixture("", fixtures, sizeof fixtures);
    struct assay_verify_ctx *ctx;
    if (assay_verify_ctx_init(&ctx, fixtures, g_seed) != ASSAY_OK) {
        return -1;
    }
    printf("%-32s %-7s %8s  %s\n", "check", "verdict", "seconds", "summary");
    for (size_t i = 0; i < g_n; i++) {
        if (assay_run_plan_item(ctx, g_items[i], "bundled", NULL, &g_results[i]) != ASSAY_OK) {
            assay_verify_ctx_free(ctx);
            return -1;
        }
    }
    assay_verify_finalize(g_results, g_n);
    for (size_t i = 0; i < g_n; i++) {
        const struct assay_check_result *r = &g_results[i];
        printf("%-32s %-7s %8.2f  %s\n", r->name, assay_verdict_str(r->verdict), r->seconds,
               r->summary);
        if (r->verdict != ASSAY_VERDICT_PASS) {
            printf("    %s\n    reproduce: %s\n", r->failure, r->repro);
        }
    }
    fflush(stdout);
    assay_verify_ctx_free(ctx);
    return 0;
}

static void check_passes(void **state)
{
    const struct assay_check_result *r = *state;
    if (r->verdict != ASSAY_VERDICT_PASS) {
        fail_msg("%s: %s: %s", r->name, assay_verdict_str(r->verdict), r->failure);
    }
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc < 2) {
        fprintf(stderr, "usage: test_verify FAMILY [MASTER_SEED]\n");
        return 2;
    }
    g_family = argv[1];
    const char *colon = strchr(argv[1], ':');
    if (colon != NULL) {
        snprintf(g_family_name, sizeof g_family_name, "%.*s", (int)(colon - argv[1]), argv[1]);
        g_prefixes = colon + 1;
    } else {
        snprintf(g_family_name, sizeof g_family_name, "%s", argv[1]);
    }
    if (argc > 2) {
        g_seed = strtoull(argv[2], NULL, 10);
    }
    size_t n_plan;
    const struct assay_plan_item *plan = assay_verify_plan(&n_plan);
    g_items = calloc(n_plan, sizeof *g_items);
    g_results = calloc(n_plan, sizeof *g_results);
    struct CMUnitTest *tests = calloc(n_plan, sizeof *tests);
    if (g_items == NULL || g_results == NULL || tests == NULL) {
        return 1;
    }
    for (size_t i = 0; i < n_plan; i++) {
        if (strcmp(assay_family_str(plan[i].family), g_family_name) == 0 &&
            item_selected(&plan[i])) {
            g_items[g_n] = &plan[i];
            tests[g_n].name = plan[i].name;
            tests[g_n].test_func = check_passes;
            tests[g_n].initial_state = &g_results[g_n];
            g_n++;
        }
    }
    if (g_n == 0) {
        fprintf(stderr, "test_verify: the plan has no %s checks\n", g_family);
        return 1;
    }
    int rc = _cmocka_run_group_tests(g_family, tests, g_n, run_family, NULL);
    free(tests);
    free(g_items);
    free(g_results);
    return rc;
}
