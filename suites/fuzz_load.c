/*
 * fuzz_load - the bundled engine under load: 10,000 requests with random
 * aborts through a block pool small enough to preempt all the time.
 *
 *   fuzz_load [N_REQUESTS]     (default 10000)
 *
 * One engine (the "mini" model, paged KV in 4-token blocks, a pool of 26
 * blocks for a batch of 16 whose requests need up to 24 each, prefix
 * caching, chunked prefill) runs a generated workload: prompts of 1..56
 * tokens of which many share group prefixes, outputs of 1..40 tokens, one
 * request joining every step, 25% aborted after 1..16 tokens. Every
 * allocation goes through a counting hook.
 *
 * Checked, and printed as figures:
 *   - the long randomised property run (checks/property.h, prop.soak): the
 *     block accounting audited after every engine step against the block
 *     model, the trace rules (each request finishes exactly once, no token
 *     delivered twice, indices and counts consistent), the drain rule (no
 *     block held once the engine is empty), and every request's tokens
 *     equal to its tokens at concurrency 1;
 *   - a third run through the harness, counted by outcome: every request
 *     submitted, finished exactly once as LENGTH, STOP or ABORT (never
 *     ERROR, never twice, never lost), aborted exactly those the workload
 *     aborts, the pool exhausted and requests preempted many times;
 *   - no leak: once the engine, transcripts and workload are freed, no
 *     allocation made through assay's hook is outstanding (the sanitizer
 *     build adds LeakSanitizer for the rest).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adapters/spec.h"
#include "checks/harness.h"
#include "checks/property.h"
#include "core/workload.h"
#include "support.h"

static int g_n = 10000;

#define LOAD_ENGINE                                                                              \
    "bundled:model=mini,kv=paged,block=4,blocks=26,prefix=on,chunk=8,batch=16,requests=16384"

/* Count the pool's exhaustion and preemption-like drops of in-use blocks
 * after every step (from the engine's block statistics). */
struct pressure {
    int64_t steps_full;      /* steps that ended with no free or cached block */
    int64_t drops;           /* steps where blocks in use fell while work stayed */
    int32_t last_in_use;
    int32_t peak_in_use;
};

static enum assay_status watch(void *ctx, const struct assay_adapter *a, int64_t step, char *msg,
                               size_t size)
{
    (void)step;
    (void)msg;
    (void)size;
    struct pressure *p = ctx;
    struct assay_block_stats s;
    if (a->vt->block_stats == NULL || a->vt->block_stats(a->self, &s) != ASSAY_OK) {
        return ASSAY_OK;
    }
    if (s.free + s.cached == 0) {
        p->steps_full++;
    }
    if (s.in_use < p->last_in_use && a->vt->has_work(a->self)) {
        p->drops++;
    }
    p->last_in_use = s.in_use;
    p->peak_in_use = s.in_use > p->peak_in_use ? s.in_use : p->peak_in_use;
    return ASSAY_OK;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void test_load(void **state)
{
    (void)state;
    char json[1024];
    snprintf(json, sizeof json,
             "{\"format\":\"assay-workload\",\"version\":1,\"name\":\"load-%d\",\"generate\":{"
             "\"seed\":808,\"n\":%d,\"arrival\":{\"process\":\"burst\",\"step_every\":1},"
             "\"prompt_len\":{\"dist\":\"uniform\",\"min\":1,\"max\":56},"
             "\"output_len\":{\"dist\":\"uniform\",\"min\":1,\"max\":40},"
             "\"prefix_groups\":{\"count\":16,\"len\":12},"
             "\"abort\":{\"fraction\":0.25,\"after\":{\"dist\":\"uniform\",\"min\":1,\"max\":16}}}}",
             g_n, g_n);
    printf("engine %s\nworkload %s\n", LOAD_ENGINE, json);
    /* Every allocation from here on is counted (none is failed). */
    assay_test_fail_alloc_at(-1);
    struct assay_workload_limits lim = {260, 256, 0};
    struct assay_workload *w = NULL;
    struct assay_diag d;
    assay_diag_clear(&d);
    assert_int_equal(assay_workload_parse(json, strlen(json), "load", &lim, &w, &d), ASSAY_OK);
    int32_t n_aborting = 0;
    for (int32_t i = 0; i < w->n; i++) {
        n_aborting += w->reqs[i].abort_after >= 0;
    }
    struct assay_adapter a;
    assert_int_equal(assay_adapter_open_spec(LOAD_ENGINE, &a, &d), ASSAY_OK);

    /* The property run: as given (audited every step) and at concurrency 1. */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct assay_check_result r;
    assay_check_result_init(&r, "prop.soak", ASSAY_FAMILY_PROPERTY);
    assert_int_equal(assay_check_soak(&a, w, NULL, &r), ASSAY_OK);
    printf("soak: %s in %.1f s: %s\n", assay_verdict_str(r.verdict), seconds_since(&t0), r.summary);
    if (r.verdict != ASSAY_VERDICT_PASS) {
        fail_msg("%s", r.failure);
    }

    /* Every request accounted for, by outcome. */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct pressure p;
    memset(&p, 0, sizeof p);
    struct assay_harness_opts ho;
    memset(&ho, 0, sizeof ho);
    ho.hook = watch;
    ho.hook_ctx = &p;
    struct assay_transcript *t = NULL;
    assert_int_equal(assay_harness_run(&a, w, &ho, &t), ASSAY_OK);
    assert_int_equal(t->status, ASSAY_OK);
    int64_t by_reason[5] = {0, 0, 0, 0, 0}, tokens = 0;
    int32_t not_once = 0, unsubmitted = 0, abort_mismatch = 0;
    for (int32_t i = 0; i < t->n; i++) {
        const struct assay_transcript_req *q = &t->reqs[i];
        unsubmitted += !q->submitted;
        not_once += q->n_finish != 1;
        if (q->reason >= 0 && q->reason < 5) {
            by_reason[q->reason]++;
        }
        tokens += q->n_events;
        /* Aborted exactly when the workload aborts it and it was still
         * running after abort_after tokens. */
        bool should_abort = w->reqs[i].abort_after >= 0 &&
                            w->reqs[i].abort_after < w->reqs[i].max_tokens;
        if ((q->reason == ASSAY_FINISH_ABORT) != (should_abort && q->aborted)) {
            abort_mismatch++;
        }
    }
    printf("harness: %d requests in %.1f s over %lld steps: %lld length, %lld stop, %lld abort, "
           "%lld error, %lld none; %d not finished exactly once, %d never submitted, %d abort "
           "mismatches; %lld tokens; %d of the workload's requests have an abort point\n",
           (int)t->n, seconds_since(&t0), (long long)t->n_steps, (long long)by_reason[1],
           (long long)by_reason[2], (long long)by_reason[3], (long long)by_reason[4],
           (long long)by_reason[0], (int)not_once, (int)unsubmitted, (int)abort_mismatch,
           (long long)tokens, (int)n_aborting);
    printf("pool: 26 blocks, peak %d in use; %lld steps ended with the pool exhausted, %lld steps "
           "dropped blocks while work remained (preemptions and aborts)\n",
           (int)p.peak_in_use, (long long)p.steps_full, (long long)p.drops);
    assert_int_equal(t->n, g_n);
    assert_int_equal(not_once, 0);
    assert_int_equal(unsubmitted, 0);
    assert_int_equal(abort_mismatch, 0);
    assert_int_equal(by_reason[ASSAY_FINISH_ERROR] + by_reason[ASSAY_FINISH_NONE], 0);
    assert_int_equal(by_reason[1] + by_reason[2] + by_reason[3], g_n);
    assert_true(by_reason[ASSAY_FINISH_ABORT] > g_n / 10);
    assert_true(t->n_unknown_events == 0);
    assert_true(p.steps_full > g_n / 10); /* "constantly" */
    assay_transcript_free(t);
    assay_adapter_close(&a);
    assay_workload_free(w);
    long live = assay_test_alloc_live(), count = assay_test_alloc_count();
    assay_test_fail_alloc_off();
    printf("allocations: %ld made through the hook, %ld outstanding after cleanup\n", count, live);
    assert_int_equal(live, 0);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc > 1) {
        g_n = atoi(argv[1]);
        if (g_n < 100 || g_n > 1000000) {
            fprintf(stderr, "usage: fuzz_load [N_REQUESTS in 100..1000000]\n");
            return 2;
        }
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_load)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
