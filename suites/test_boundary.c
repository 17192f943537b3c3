/*
 * Unit tests of the boundary workload and its watch (checks/boundary.h):
 * the shape read from an engine spec; the workload a function of the
 * shape and the seed; on the verify plan's configuration every boundary
 * reached, under several seeds, the correct engine passing both judges;
 * the watch transparent (the same tokens with and without it) and silent
 * about what it cannot see (no block accounting: no queue, prefill or
 * preemption counted).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/spec.h"
#include "checks/boundary.h"
#include "checks/equivalence.h"
#include "checks/harness.h"
#include "checks/property.h"
#include "engine/model.h"
#include "support.h"

/* The engine of the plan's rows equiv.boundaries and prop.boundaries. */
#define PLAN_SPEC                                                                                  \
    "bundled:model=mini,draft=near:0.05,kv=paged,block=4,prefix=on,chunk=8,batch=4,spec=2,"       \
    "blocks=24"

struct fixture {
    struct assay_model *model, *draft;
    struct assay_oracle_memo *memo, *draft_memo;
    int32_t vocab, n_ctx;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    struct assay_model_config cfg = assay_model_config_mini();
    /* The plan's models: mini (seed 1) and its draft near:0.05 (seed 2). */
    if (f == NULL || assay_model_init_random(&f->model, &cfg, 1) != ASSAY_OK ||
        assay_oracle_memo_init(&f->memo, f->model, cfg.n_ctx) != ASSAY_OK ||
        assay_model_derive_draft(f->model, 0.05, 2, &f->draft) != ASSAY_OK ||
        assay_oracle_memo_init(&f->draft_memo, f->draft, cfg.n_ctx) != ASSAY_OK) {
        return -1;
    }
    f->vocab = cfg.vocab;
    f->n_ctx = cfg.n_ctx;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    assay_oracle_memo_free(f->memo);
    assay_oracle_memo_free(f->draft_memo);
    assay_model_free(f->model);
    assay_model_free(f->draft);
    free(f);
    return 0;
}

static void test_shape_of_spec(void **state)
{
    (void)state;
    struct assay_boundary_shape s = assay_boundary_shape_of(PLAN_SPEC);
    assert_int_equal(s.block, 4);
    assert_int_equal(s.blocks, 24);
    assert_int_equal(s.chunk, 8);
    assert_int_equal(s.spec, 2);
    assert_int_equal(s.batch, 4);
    /* Not paged: no blocks; keys absent take the defaults. */
    s = assay_boundary_shape_of("bundled:model=mini,kv=off,draft=mini-draft");
    assert_int_equal(s.block, 1);
    assert_int_equal(s.blocks, 0);
    assert_int_equal(s.spec, 0);
    assert_int_equal(s.chunk, 0);
}

static bool same_workload(const struct assay_workload *a, const struct assay_workload *b)
{
    if (a->n != b->n) {
        return false;
    }
    for (int32_t i = 0; i < a->n; i++) {
        const struct assay_workload_request *x = &a->reqs[i], *y = &b->reqs[i];
        if (x->prompt_len != y->prompt_len || x->max_tokens != y->max_tokens ||
            x->stop_token != y->stop_token || x->arrival_step != y->arrival_step ||
            x->abort_step != y->abort_step || x->abort_after != y->abort_after ||
            memcmp(x->prompt, y->prompt, sizeof(int32_t) * (size_t)x->prompt_len) != 0) {
            return false;
        }
    }
    return true;
}

/* The boundary workload of shape s for the fixture's models. */
static enum assay_status workload(struct fixture *f, const struct assay_boundary_shape *s,
                                  int32_t n_ctx, uint64_t seed, struct assay_workload **out,
                                  struct assay_boundary_expect *expect)
{
    return assay_boundary_workload(s, f->vocab, n_ctx, f->memo, f->draft_memo, seed, out,
                                   expect);
}

static void test_workload_is_a_function_of_shape_and_seed(void **state)
{
    struct fixture *f = *state;
    struct assay_boundary_shape s = assay_boundary_shape_of(PLAN_SPEC);
    struct assay_workload *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(workload(f, &s, f->n_ctx, 3, &a, NULL), ASSAY_OK);
    assert_int_equal(workload(f, &s, f->n_ctx, 3, &b, NULL), ASSAY_OK);
    assert_int_equal(workload(f, &s, f->n_ctx, 4, &c, NULL), ASSAY_OK);
    assert_true(same_workload(a, b));
    assert_false(same_workload(a, c));
    /* Arrivals in order; each request fits the context. */
    for (int32_t i = 0; i < a->n; i++) {
        assert_true(i == 0 || a->reqs[i].arrival_step >= a->reqs[i - 1].arrival_step);
        assert_true(a->reqs[i].prompt_len + a->reqs[i].max_tokens <= f->n_ctx);
    }
    assay_workload_free(a);
    assay_workload_free(b);
    assay_workload_free(c);
    /* A context too short for the placements, a pool too small for one
     * request: a clear refusal, no workload. */
    assert_int_equal(workload(f, &s, 48, 3, &a, NULL), ASSAY_ERR_INVALID);
    assert_null(a);
    s.blocks = 6;
    assert_int_equal(workload(f, &s, f->n_ctx, 3, &a, NULL), ASSAY_ERR_INVALID);
    assert_null(a);
}

/* The plan's configuration under several seeds: every boundary reached,
 * aborts after each of the first three prefill chunks; the correct engine
 * passes against the oracle and the soak through the watch. */
static void test_plan_reaches_every_boundary(void **state)
{
    struct fixture *f = *state;
    struct assay_boundary_shape s = assay_boundary_shape_of(PLAN_SPEC);
    for (uint64_t seed = 1; seed <= 3; seed++) {
        struct assay_workload *w = NULL;
        struct assay_boundary_expect expect;
        assert_int_equal(workload(f, &s, f->n_ctx, seed, &w, &expect), ASSAY_OK);
        assert_true(expect.n > 0);
        for (int judge = 0; judge < 2; judge++) {
            struct assay_adapter inner, wa;
            struct assay_diag d;
            assay_diag_clear(&d);
            assert_int_equal(assay_adapter_open_spec(PLAN_SPEC, &inner, &d), ASSAY_OK);
            struct assay_boundary_watch *watch = NULL;
            assert_int_equal(assay_boundary_watch_open(&inner, &watch, &wa), ASSAY_OK);
            assay_boundary_watch_expect(watch, &expect);
            struct assay_check_result r;
            assay_check_result_init(&r, "boundaries", ASSAY_FAMILY_PROPERTY);
            assert_int_equal(judge == 0 ? assay_check_equivalence(&wa, w, f->memo, NULL, &r)
                                        : assay_check_soak(&wa, w, NULL, &r),
                             ASSAY_OK);
            if (r.verdict != ASSAY_VERDICT_PASS) {
                fail_msg("seed %d judge %d: %s", (int)seed, judge, r.failure);
            }
            char report[400];
            int32_t missing = assay_boundary_report(watch, report, sizeof report);
            printf("# seed %d, %s: %s\n", (int)seed, judge == 0 ? "oracle" : "soak", report);
            assert_int_equal(missing, 0);
            /* Each placed stop the draft proposes is rejected where the
             * draft's oracle says (a run at concurrency 1 too, for soak). */
            assert_int_equal(assay_boundary_count(watch, ASSAY_BOUNDARY_STOP_REJECTED),
                             (judge == 0 ? 1 : 2) * expect.n);
            assert_int_equal(assay_boundary_prefill_chunks(watch) & 0xe, 0xe);
            assay_boundary_watch_close(watch);
            assay_adapter_close(&inner);
        }
        assay_workload_free(w);
    }
}

/* The same tokens with and without the watch; and an engine without block
 * accounting gets no count of what only the accounting shows. */
static void test_watch_is_transparent_and_honest(void **state)
{
    struct fixture *f = *state;
    struct assay_boundary_shape s = assay_boundary_shape_of(PLAN_SPEC);
    struct assay_workload *w = NULL;
    assert_int_equal(workload(f, &s, f->n_ctx, 1, &w, NULL), ASSAY_OK);
    struct assay_transcript *t[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        struct assay_adapter inner, wa;
        struct assay_diag d;
        assay_diag_clear(&d);
        assert_int_equal(assay_adapter_open_spec(PLAN_SPEC, &inner, &d), ASSAY_OK);
        struct assay_boundary_watch *watch = NULL;
        assert_int_equal(assay_boundary_watch_open(&inner, &watch, &wa), ASSAY_OK);
        struct assay_harness_opts o = {0};
        assert_int_equal(assay_harness_run(k == 0 ? &inner : &wa, w, &o, &t[k]), ASSAY_OK);
        assert_int_equal(t[k]->status, ASSAY_OK);
        assay_boundary_watch_close(watch);
        assay_adapter_close(&inner);
    }
    for (int32_t i = 0; i < w->n; i++) {
        assert_int_equal(t[0]->reqs[i].n_events, t[1]->reqs[i].n_events);
        assert_int_equal(t[0]->reqs[i].reason, t[1]->reqs[i].reason);
        assert_memory_equal(t[0]->reqs[i].tokens, t[1]->reqs[i].tokens,
                            sizeof(int32_t) * (size_t)t[0]->reqs[i].n_events);
    }
    assay_transcript_free(t[0]);
    assay_transcript_free(t[1]);

    /* Contiguous KV: no block accounting. */
    const char *flat = "bundled:model=mini,draft=near:0.05,kv=contiguous,chunk=8,batch=4,spec=2";
    struct assay_adapter inner, wa;
    struct assay_diag d;
    assay_diag_clear(&d);
    assert_int_equal(assay_adapter_open_spec(flat, &inner, &d), ASSAY_OK);
    struct assay_boundary_watch *watch = NULL;
    assert_int_equal(assay_boundary_watch_open(&inner, &watch, &wa), ASSAY_OK);
    struct assay_transcript *tr = NULL;
    struct assay_harness_opts o = {0};
    assert_int_equal(assay_harness_run(&wa, w, &o, &tr), ASSAY_OK);
    static const enum assay_boundary unseen[] = {
        ASSAY_BOUNDARY_ABORT_QUEUED,   ASSAY_BOUNDARY_ABORT_PREFILL,
        ASSAY_BOUNDARY_ABORT_PREEMPTED, ASSAY_BOUNDARY_PROMPT_BELOW,
        ASSAY_BOUNDARY_PROMPT_CACHED,  ASSAY_BOUNDARY_POOL_FULL,
    };
    for (size_t i = 0; i < sizeof unseen / sizeof unseen[0]; i++) {
        assert_int_equal(assay_boundary_count(watch, unseen[i]), 0);
    }
    /* What events alone show is still counted. */
    assert_true(assay_boundary_count(watch, ASSAY_BOUNDARY_STOP_AT_LIMIT) > 0);
    assert_true(assay_boundary_count(watch, ASSAY_BOUNDARY_ABORT_DECODING) > 0);
    assay_transcript_free(tr);
    assay_boundary_watch_close(watch);
    assay_adapter_close(&inner);
    assay_workload_free(w);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_of_spec),
        cmocka_unit_test_setup_teardown(test_workload_is_a_function_of_shape_and_seed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_plan_reaches_every_boundary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_is_transparent_and_honest, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
