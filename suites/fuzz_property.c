/*
 * The fuzz label: the property family's long randomised run (prop.soak),
 * longer and wider than the verify label affords.
 *
 *   fuzz_property [N_PER_SEED]
 *
 * Five seeds, N_PER_SEED requests each (default 4000, so 20000 in all),
 * each on its own engine configuration (block sizes 2 to 16, pools from
 * barely enough to roomy, chunked prefill on and off, speculation k = 2 on
 * two of them), with shared prefixes and 20% random aborts. Every step is
 * audited by the block model; the drain, trace and concurrency-1 rules hold
 * after each run. The workload of a seed is the JSON printed before it, so
 * a failure can be rerun with assay verify --check prop.soak --workload.
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
#include "checks/property.h"
#include "core/workload.h"
#include "support.h"

static int g_n = 4000;

struct config {
    uint64_t seed;
    const char *engine;
};

static const struct config k_configs[] = {
    {101, "bundled:model=mini,kv=paged,block=4,blocks=40,prefix=on,chunk=16,batch=16,requests=8192"},
    {102, "bundled:model=mini,kv=paged,block=2,blocks=60,prefix=on,chunk=0,batch=8,requests=8192"},
    {103, "bundled:model=mini,kv=paged,block=8,blocks=24,prefix=on,chunk=8,batch=16,spec=2,"
          "requests=8192"},
    {104, "bundled:model=mini,kv=paged,block=16,blocks=64,prefix=on,chunk=32,batch=32,"
          "requests=8192"},
    {105, "bundled:model=mini,kv=paged,block=4,blocks=28,prefix=off,chunk=12,batch=12,spec=2,"
          "requests=8192"},
};

static void test_soak(void **state)
{
    const struct config *c = *state;
    char json[1024];
    snprintf(json, sizeof json,
             "{\"format\":\"assay-workload\",\"version\":1,\"name\":\"fuzz-%llu\",\"generate\":{"
             "\"seed\":%llu,\"n\":%d,\"arrival\":{\"process\":\"burst\",\"step_every\":1},"
             "\"prompt_len\":{\"dist\":\"uniform\",\"min\":1,\"max\":56},"
             "\"output_len\":{\"dist\":\"uniform\",\"min\":1,\"max\":40},"
             "\"prefix_groups\":{\"count\":12,\"len\":16},"
             "\"abort\":{\"fraction\":0.2,\"after\":{\"dist\":\"uniform\",\"min\":1,\"max\":16}}}}",
             (unsigned long long)c->seed, (unsigned long long)c->seed, g_n);
    printf("engine %s\nworkload %s\n", c->engine, json);
    struct assay_workload_limits lim = {260, 256, 0};
    struct assay_workload *w = NULL;
    struct assay_diag d;
    assay_diag_clear(&d);
    assert_int_equal(assay_workload_parse(json, strlen(json), "fuzz", &lim, &w, &d), ASSAY_OK);
    struct assay_adapter a;
    assert_int_equal(assay_adapter_open_spec(c->engine, &a, &d), ASSAY_OK);
    struct assay_check_result r;
    assay_check_result_init(&r, "prop.soak", ASSAY_FAMILY_PROPERTY);
    assert_int_equal(assay_check_soak(&a, w, NULL, &r), ASSAY_OK);
    printf("%s %.1f s: %s\n", assay_verdict_str(r.verdict), r.seconds, r.summary);
    fflush(stdout);
    assay_adapter_close(&a);
    assay_workload_free(w);
    if (r.verdict != ASSAY_VERDICT_PASS) {
        fail_msg("%s", r.failure);
    }
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc > 1) {
        g_n = atoi(argv[1]);
        if (g_n < 1 || g_n > 1000000) {
            fprintf(stderr, "usage: fuzz_property [N_PER_SEED in 1..1000000]\n");
            return 2;
        }
    }
    struct CMUnitTest tests[5];
    for (int i = 0; i < 5; i++) {
        tests[i] = (struct CMUnitTest){"soak", test_soak, NULL, NULL, (void *)&k_configs[i]};
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
