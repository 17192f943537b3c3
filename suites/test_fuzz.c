/*
 * Unit tests of the differential fuzzing's generator (checks/fuzz.h): a
 * case is a function of (seed, index) alone, and the cases of one run reach
 * the corners they are drawn for: prompt lengths at block multiples,
 * prompts repeated whole (fully cached, some ending on a block boundary)
 * and by prefix, equal lengths arriving in one step, aborts in the queue
 * and later, every edge seed, every block size, pool pressure, speculation.
 * And a drawn case the correct engine passes; the same case on a planted
 * bug fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks/fuzz.h"
#include "core/mutant.h"
#include "engine/model.h"
#include "support.h"

#define VOCAB 260
#define N_CTX 256

static bool same_workload(const struct assay_workload *a, const struct assay_workload *b)
{
    if (a->n != b->n) {
        return false;
    }
    for (int32_t i = 0; i < a->n; i++) {
        const struct assay_workload_request *x = &a->reqs[i], *y = &b->reqs[i];
        if (x->prompt_len != y->prompt_len || x->max_tokens != y->max_tokens ||
            x->arrival_step != y->arrival_step || x->abort_step != y->abort_step ||
            x->abort_after != y->abort_after || x->sampling.seed != y->sampling.seed ||
            memcmp(x->prompt, y->prompt, sizeof(int32_t) * (size_t)x->prompt_len) != 0) {
            return false;
        }
    }
    return true;
}

static void test_case_is_a_function_of_seed_and_index(void **state)
{
    (void)state;
    struct assay_fuzz_case a, b, c;
    assert_int_equal(assay_fuzz_case_draw(7, 3, VOCAB, N_CTX, &a), ASSAY_OK);
    assert_int_equal(assay_fuzz_case_draw(7, 3, VOCAB, N_CTX, &b), ASSAY_OK);
    assert_int_equal(assay_fuzz_case_draw(7, 4, VOCAB, N_CTX, &c), ASSAY_OK);
    assert_string_equal(a.options, b.options);
    assert_true(same_workload(a.w, b.w));
    assert_false(strcmp(a.options, c.options) == 0 && same_workload(a.w, c.w));
    assay_fuzz_case_free(&a);
    assay_fuzz_case_free(&b);
    assay_fuzz_case_free(&c);
    assert_int_equal(assay_fuzz_case_draw(7, 3, VOCAB, 16, &a), ASSAY_ERR_INVALID);
}

static int32_t option(const char *options, const char *key)
{
    char needle[32];
    snprintf(needle, sizeof needle, "%s=", key);
    const char *p = strstr(options, needle);
    return p != NULL ? atoi(p + strlen(needle)) : -1;
}

/* The corners, over the 150 cases of the verify plan's run. */
static void test_cases_reach_the_corners(void **state)
{
    (void)state;
    bool block_size[33] = {false};
    int at_multiple = 0, cached_whole = 0, cached_whole_on_boundary = 0, by_prefix = 0;
    int equal_together = 0, queued_abort = 0, later_abort = 0, token_abort = 0, speculating = 0;
    int pressed = 0, unseeded = 0, kv_off = 0, contiguous = 0;
    bool edge[7] = {false};
    static const uint64_t edges[7] = {0, 1, 2147483647ULL, 4294967296ULL, 9007199254740992ULL,
                                      9223372036854775808ULL, 18446744073709551615ULL};
    for (int32_t k = 0; k < 150; k++) {
        struct assay_fuzz_case c;
        assert_int_equal(assay_fuzz_case_draw(11, k, VOCAB, N_CTX, &c), ASSAY_OK);
        int32_t block = option(c.options, "block");
        kv_off += strstr(c.options, "kv=off") != NULL;
        contiguous += strstr(c.options, "kv=contiguous") != NULL;
        speculating += option(c.options, "spec") > 0;
        pressed += c.pressed;
        if (block > 0 && block <= 32) {
            block_size[block] = true;
        }
        const struct assay_workload *w = c.w;
        for (int32_t i = 0; i < w->n; i++) {
            const struct assay_workload_request *r = &w->reqs[i];
            at_multiple += block > 1 && r->prompt_len % block == 0;
            queued_abort += r->abort_step == 0;
            later_abort += r->abort_step > 0;
            token_abort += r->abort_after > 0;
            unseeded += r->sampling.temperature > 0 && !r->sampling.seeded;
            for (int e = 0; e < 7; e++) {
                edge[e] |= r->sampling.temperature > 0 && r->sampling.seeded &&
                           r->sampling.seed == edges[e];
            }
            for (int32_t j = 0; j < i; j++) {
                const struct assay_workload_request *q = &w->reqs[j];
                bool same_len = q->prompt_len == r->prompt_len;
                bool whole = same_len && memcmp(q->prompt, r->prompt,
                                                sizeof(int32_t) * (size_t)r->prompt_len) == 0;
                cached_whole += whole;
                cached_whole_on_boundary += whole && block > 1 && r->prompt_len % block == 0;
                by_prefix += !whole && q->prompt_len >= 4 && r->prompt_len > 4 &&
                             memcmp(q->prompt, r->prompt, sizeof(int32_t) * 4) == 0;
                equal_together += !whole && same_len && q->arrival_step == r->arrival_step;
            }
        }
        assay_fuzz_case_free(&c);
    }
    printf("# at a block multiple %d, cached whole %d (on a boundary %d), by prefix %d, equal "
           "lengths together %d, aborts queued %d, later %d, by tokens %d, speculating %d, "
           "pressed %d, unseeded %d, kv=off %d, contiguous %d\n",
           at_multiple, cached_whole, cached_whole_on_boundary, by_prefix, equal_together,
           queued_abort, later_abort, token_abort, speculating, pressed, unseeded, kv_off,
           contiguous);
    static const int32_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 16, 32};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        assert_true(block_size[sizes[i]]);
    }
    for (int e = 0; e < 7; e++) {
        assert_true(edge[e]);
    }
    assert_true(at_multiple >= 20);
    assert_true(cached_whole_on_boundary >= 5);
    assert_true(by_prefix >= 20);
    assert_true(equal_together >= 20);
    assert_true(queued_abort >= 10 && later_abort >= 20 && token_abort >= 20);
    assert_true(speculating >= 20 && pressed >= 20 && unseeded >= 20);
    assert_true(kv_off >= 5 && contiguous >= 5);
}

/* A case the correct engine passes and a planted bug fails. */
static void test_judge_passes_and_fails(void **state)
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
    assert_int_equal(assay_fuzz_run("bundled:model=mini,draft=mini-draft", cfg.vocab, cfg.n_ctx,
                                    memo, 5, 0, 12, 0.0, NULL, NULL, &tally, &failed, &r),
                     ASSAY_OK);
    if (r.verdict != ASSAY_VERDICT_PASS) {
        fail_msg("%s", r.failure);
    }
    assert_int_equal(tally.cases, 12);
    assert_null(failed.w);
    assert_true(assay_mutants_compiled());
    assay_check_result_init(&r, "fuzz", ASSAY_FAMILY_EQUIVALENCE);
    assert_int_equal(assay_fuzz_run("bundled:model=mini,draft=mini-draft,mutant=abort-double-free",
                                    cfg.vocab, cfg.n_ctx, memo, 5, 0, 12, 0.0, NULL, NULL, &tally,
                                    &failed, &r),
                     ASSAY_OK);
    printf("# planted abort-double-free: %s\n", r.failure);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_non_null(failed.w);
    assert_non_null(strstr(r.failure, "case "));
    assay_fuzz_case_free(&failed);
    assay_oracle_memo_free(memo);
    assay_model_free(model);
}

/* A case the fuzzing found: with a prefix cache, chunked prefill and
 * speculation, a seeded request's first token was drawn by a speculative
 * round or by plain sampling depending on whether a prefix-cache hit had
 * left the draft behind, and so differed between concurrency 1 and all at
 * once (fixtures/workloads/seeded-prefix-spec.json). */
static void test_found_seeded_prefix_spec(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *model = NULL;
    assert_int_equal(assay_model_init_random(&model, &cfg, 1), ASSAY_OK);
    struct assay_oracle_memo *memo = NULL;
    assert_int_equal(assay_oracle_memo_init(&memo, model, cfg.n_ctx), ASSAY_OK);
    char path[1024];
    assay_test_fixture("workloads/seeded-prefix-spec.json", path, sizeof path);
    struct assay_workload_limits lim = {cfg.vocab, cfg.n_ctx, 0};
    struct assay_workload *w = NULL;
    struct assay_diag d;
    assay_diag_clear(&d);
    assert_int_equal(assay_workload_load(path, &lim, &w, &d), ASSAY_OK);
    for (int k = 1; k <= 2; k++) {
        char spec[256];
        snprintf(spec, sizeof spec,
                 "bundled:model=mini,draft=mini-draft,kv=paged,block=1,blocks=239,prefix=on,"
                 "chunk=9,batch=4,spec=%d",
                 k);
        struct assay_check_result r;
        assay_check_result_init(&r, "fuzz", ASSAY_FAMILY_EQUIVALENCE);
        assert_int_equal(assay_fuzz_judge(spec, w, memo, &r), ASSAY_OK);
        if (r.verdict != ASSAY_VERDICT_PASS) {
            fail_msg("spec=%d: %s", k, r.failure);
        }
    }
    assay_workload_free(w);
    assay_oracle_memo_free(memo);
    assay_model_free(model);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_case_is_a_function_of_seed_and_index),
        cmocka_unit_test(test_cases_reach_the_corners),
        cmocka_unit_test(test_judge_passes_and_fails),
        cmocka_unit_test(test_found_seeded_prefix_spec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
