/*
 * The fuzz label: the differential fuzzing (checks/fuzz.h) far beyond the
 * verify plan's 150 cases.
 *
 *   fuzz_differential [N_CASES [SEED]]
 *
 * N_CASES (default 3000) cases of SEED (default 2026, not the verify plan's
 * seed, so the two runs draw different cases) on the bundled engine with
 * the mini model, each judged against the oracle, every step audited by the
 * block model, every greedy or seeded request rerun at concurrency 1.
 * Progress every 100 cases; a failing case is written to the build's
 * scratch folder with the command that reruns it. scripts/coverage.sh runs
 * this program in a build instrumented by gcov and prints what of engine/
 * it reached.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checks/fuzz.h"
#include "core/clock.h"
#include "engine/model.h"
#include "support.h"

static int32_t g_n = 3000;
static uint64_t g_seed = 2026;

struct progress {
    int64_t t0;
};

static void on_case(void *ctx, int32_t done, int32_t n)
{
    const struct progress *p = ctx;
    if (done % 100 == 0 || done == n) {
        printf("# %d of %d cases, %.0f s\n", (int)done, (int)n,
               (double)(assay_now_ns() - p->t0) / 1e9);
        fflush(stdout);
    }
}

static void test_differential(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *model = NULL;
    assert_int_equal(assay_model_init_random(&model, &cfg, 1), ASSAY_OK);
    struct assay_oracle_memo *memo = NULL;
    assert_int_equal(assay_oracle_memo_init(&memo, model, cfg.n_ctx), ASSAY_OK);
    struct assay_fuzz_tally tally;
    struct assay_fuzz_case failed;
    struct assay_check_result r;
    assay_check_result_init(&r, "fuzz", ASSAY_FAMILY_EQUIVALENCE);
    struct progress p = {assay_now_ns()};
    const char *base = "bundled:model=mini,draft=mini-draft";
    enum assay_status st = assay_fuzz_run(base, cfg.vocab, cfg.n_ctx, memo, g_seed, 0, g_n, 0.0,
                                          on_case, &p, &tally, &failed, &r);
    printf("# seed %llu: %d cases (%d paged, %d prefix caching, %d chunked, %d speculating, %d "
           "under pool pressure), %lld requests (%lld greedy, %lld seeded, %lld aborted by "
           "step, %lld by tokens), %lld tokens, %d ties, %lld steps, %.1f s\n",
           (unsigned long long)g_seed, (int)tally.cases, (int)tally.paged, (int)tally.prefix,
           (int)tally.chunked, (int)tally.speculating, (int)tally.pressed,
           (long long)tally.requests, (long long)tally.greedy, (long long)tally.seeded,
           (long long)tally.aborted_by_step, (long long)tally.aborted_by_tokens,
           (long long)r.n_tokens, (int)r.n_ties, (long long)r.n_steps, r.seconds);
    if (failed.w != NULL) {
        char dir[1024], path[1100];
        assay_test_scratch("fuzz-differential", dir, sizeof dir);
        mkdir(dir, 0777);
        snprintf(path, sizeof path, "%s/fuzz-case-%d.json", dir, (int)failed.index);
        struct assay_diag diag;
        assay_diag_clear(&diag);
        if (assay_workload_save(failed.w, path, &diag) == ASSAY_OK) {
            printf("# rerun: assay verify --engine '%s' --check equiv.fuzz --workload %s\n",
                   r.engine, path);
        }
        assay_fuzz_case_free(&failed);
    }
    assay_oracle_memo_free(memo);
    assay_model_free(model);
    assert_int_equal(st, ASSAY_OK);
    if (r.verdict != ASSAY_VERDICT_PASS) {
        fail_msg("%s", r.failure);
    }
    assert_int_equal(tally.cases, g_n);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc > 1) {
        g_n = atoi(argv[1]);
    }
    if (argc > 2) {
        g_seed = strtoull(argv[2], NULL, 10);
    }
    if (g_n < 1) {
        fprintf(stderr, "usage: fuzz_differential [N_CASES [SEED]]\n");
        return 2;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_differential)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
