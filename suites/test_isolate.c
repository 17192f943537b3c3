/*
 * checks/isolate.h: a check run in a child process. A result that comes back
 * whole; a crash, an abort, an early exit and a hang each turned into a FAIL
 * that says how the process ended; what the child sends read by the parent;
 * without fork, the same function in this process. And the oracle memo's
 * rows carried through a file unchanged, a damaged file refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapters/spec.h"
#include "checks/context.h"
#include "checks/equivalence.h"
#include "checks/isolate.h"
#include "support.h"

enum how { HOW_PASS, HOW_SEGV, HOW_ABORT, HOW_EXIT, HOW_HANG, HOW_FAIL_THEN_SEGV };

struct job {
    enum how how;
    int ran_here; /* set by run: visible to the caller only without fork */
    char received[64];
};

static enum assay_status run(void *arg, struct assay_check_result *res)
{
    struct job *j = arg;
    j->ran_here = 1;
    snprintf(res->summary, sizeof res->summary, "ran");
    res->n_tokens = 42;
    switch (j->how) {
    case HOW_PASS: break;
    case HOW_SEGV: raise(SIGSEGV); break;
    case HOW_ABORT: abort();
    case HOW_EXIT: exit(3);
    case HOW_HANG:
        for (;;) {
            pause();
        }
    case HOW_FAIL_THEN_SEGV:
        assay_check_fail(res, "token 3 differed");
        raise(SIGSEGV);
        break;
    }
    return ASSAY_OK;
}

static enum assay_status send(void *arg, FILE *f)
{
    (void)arg;
    return fputs("from the child", f) >= 0 ? ASSAY_OK : ASSAY_ERR_IO;
}

static enum assay_status receive(void *arg, FILE *f)
{
    struct job *j = arg;
    return fgets(j->received, sizeof j->received, f) != NULL ? ASSAY_OK : ASSAY_ERR_IO;
}

static const struct assay_isolated_work k_work = {run, send, receive};

static void run_as(enum how how, double timeout, struct assay_check_result *res, struct job *j)
{
    struct assay_isolation iso = {true, timeout};
    memset(j, 0, sizeof *j);
    j->how = how;
    assay_check_result_init(res, "unit.isolate", ASSAY_FAMILY_PROPERTY);
    snprintf(res->repro, sizeof res->repro, "assay verify --check unit.isolate");
    assert_int_equal(assay_isolate_run(&iso, &k_work, j, res), ASSAY_OK);
}

static void test_result_comes_back(void **state)
{
    (void)state;
    struct assay_check_result res;
    struct job j;
    run_as(HOW_PASS, 10, &res, &j);
    assert_int_equal(res.verdict, ASSAY_VERDICT_PASS);
    assert_string_equal(res.summary, "ran");
    assert_int_equal(res.n_tokens, 42);
    assert_int_equal(res.died_signal, 0);
    assert_false(res.timed_out);
    assert_true(res.seconds > 0);
    assert_int_equal(j.ran_here, 0); /* it ran in the child */
    assert_string_equal(j.received, "from the child");
}

static void test_deaths_are_failures(void **state)
{
    (void)state;
    static const struct {
        enum how how;
        int32_t signal;
        const char *words;
    } cases[] = {
        {HOW_SEGV, SIGSEGV, "died of signal 11"},
        {HOW_ABORT, SIGABRT, "died of signal 6"},
        {HOW_EXIT, 0, "exited with status 3 before the check ended"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct assay_check_result res;
        struct job j;
        run_as(cases[i].how, 10, &res, &j);
        assert_int_equal(res.verdict, ASSAY_VERDICT_FAIL);
        assert_int_equal(res.died_signal, cases[i].signal);
        assert_false(res.timed_out);
        if (strstr(res.failure, cases[i].words) == NULL ||
            strstr(res.failure, "before the check ran its first workload") == NULL) {
            fail_msg("case %zu: %s", i, res.failure);
        }
        assert_string_equal(res.repro, "assay verify --check unit.isolate"); /* kept */
        assert_string_equal(j.received, "");  /* nothing carried from a dead child */
    }
}

static void test_hang_is_killed(void **state)
{
    (void)state;
    struct assay_check_result res;
    struct job j;
    run_as(HOW_HANG, 0.3, &res, &j);
    assert_int_equal(res.verdict, ASSAY_VERDICT_FAIL);
    assert_true(res.timed_out);
    assert_int_equal(res.died_signal, SIGKILL);
    assert_non_null(strstr(res.failure, "time limit of 0.3 s"));
    assert_true(res.seconds >= 0.3 && res.seconds < 5);
}

static void test_earlier_failure_is_kept(void **state)
{
    (void)state;
    struct assay_check_result res;
    struct job j;
    run_as(HOW_FAIL_THEN_SEGV, 10, &res, &j);
    assert_int_equal(res.verdict, ASSAY_VERDICT_FAIL);
    assert_int_equal(res.died_signal, SIGSEGV);
    assert_non_null(strstr(res.failure, "died of signal 11"));
    assert_non_null(strstr(res.failure, "before that: token 3 differed"));
}

static void test_no_fork_runs_here(void **state)
{
    (void)state;
    struct assay_isolation iso = {false, 1};
    struct job j;
    memset(&j, 0, sizeof j);
    struct assay_check_result res;
    assay_check_result_init(&res, "unit.isolate", ASSAY_FAMILY_PROPERTY);
    assert_int_equal(assay_isolate_run(&iso, &k_work, &j, &res), ASSAY_OK);
    assert_int_equal(j.ran_here, 1);
    assert_string_equal(j.received, ""); /* nothing to carry */
    assert_string_equal(res.summary, "ran");
}

/* The bundled engine on mini, and its model (for the memo's oracle). */
static const struct assay_model *open_mini(struct assay_adapter *a)
{
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_adapter_open_spec("bundled:model=mini", a, &diag), ASSAY_OK);
    return assay_verify_engine_model(a);
}

static void test_memo_round_trip(void **state)
{
    (void)state;
    struct assay_adapter a;
    const struct assay_model *model = open_mini(&a);
    struct assay_oracle_memo *m1 = NULL, *m2 = NULL;
    assert_int_equal(assay_oracle_memo_init(&m1, model, 64), ASSAY_OK);
    assert_int_equal(assay_oracle_memo_init(&m2, model, 64), ASSAY_OK);
    const int32_t prompt[] = {1, 5, 9}, out1[] = {2, 3, 4, 7}, out2[] = {8};
    const double *r1 = NULL, *r2 = NULL, *back = NULL;
    assert_int_equal(assay_oracle_memo_rows(m1, prompt, 3, out1, 4, &r1), ASSAY_OK);
    assert_int_equal(assay_oracle_memo_rows(m1, prompt, 3, out2, 1, &r2), ASSAY_OK);
    assert_int_equal(assay_oracle_memo_count(m1), 2);
    /* From entry 1 on: only the second sequence travels. */
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(assay_oracle_memo_write(m1, 1, f), ASSAY_OK);
    long size = ftell(f);
    rewind(f);
    assert_int_equal(assay_oracle_memo_read(m2, f), ASSAY_OK);
    assert_int_equal(assay_oracle_memo_count(m2), 1);
    assert_int_equal(assay_oracle_memo_rows(m2, prompt, 3, out2, 1, &back), ASSAY_OK);
    assert_int_equal(assay_oracle_memo_count(m2), 1); /* found, not computed again */
    int32_t vocab = model->cfg.vocab;
    assert_memory_equal(back, r2, sizeof(double) * (size_t)vocab);
    /* The file cut short: an error, and no half entry. */
    FILE *g = tmpfile();
    assert_non_null(g);
    rewind(f);
    char *buf = malloc((size_t)size);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    assert_int_equal(fwrite(buf, 1, (size_t)size - 9, g), (size_t)size - 9);
    rewind(g);
    struct assay_oracle_memo *m3 = NULL;
    assert_int_equal(assay_oracle_memo_init(&m3, model, 64), ASSAY_OK);
    assert_int_equal(assay_oracle_memo_read(m3, g), ASSAY_ERR_IO);
    assert_int_equal(assay_oracle_memo_count(m3), 0);
    /* Rows of another vocabulary: refused. */
    rewind(g);
    int32_t other = vocab + 1;
    assert_int_equal(fwrite(&other, sizeof other, 1, g), 1);
    rewind(g);
    assert_int_equal(assay_oracle_memo_read(m3, g), ASSAY_ERR_IO);
    assert_int_equal(assay_oracle_memo_count(m3), 0);
    free(buf);
    fclose(f);
    fclose(g);
    (void)r1;
    assay_oracle_memo_free(m1);
    assay_oracle_memo_free(m2);
    assay_oracle_memo_free(m3);
    assay_adapter_close(&a);
}

/* Prefetched rows are the rows a lookup computes alone, bit for bit: more
 * sequences than fit in one batch of the memo's length, one repeated, one
 * already held and one too long (left to its lookup); each lookup then
 * finds its rows without computing. */
static void test_memo_prefetch(void **state)
{
    (void)state;
    struct assay_adapter a;
    const struct assay_model *model = open_mini(&a);
    enum { N = 7, LEN = 24 };
    struct assay_oracle_memo *alone = NULL, *batched = NULL;
    assert_int_equal(assay_oracle_memo_init(&alone, model, LEN), ASSAY_OK);
    assert_int_equal(assay_oracle_memo_init(&batched, model, LEN), ASSAY_OK);
    int32_t toks[N][LEN + 16];
    const int32_t *prompts[N], *outs[N];
    int32_t prompt_lens[N], n_outs[N];
    for (int32_t i = 0; i < N; i++) {
        for (int32_t k = 0; k < LEN + 16; k++) {
            toks[i][k] = (i * 31 + k * 7 + 3) % 256;
        }
        prompts[i] = toks[i];
        prompt_lens[i] = 3 + i;
        outs[i] = toks[i] + prompt_lens[i];
        n_outs[i] = 2 + 2 * i;
    }
    prompts[4] = prompts[1]; /* a repeat */
    prompt_lens[4] = prompt_lens[1];
    outs[4] = outs[1];
    n_outs[4] = n_outs[1];
    n_outs[6] = LEN; /* too long for the memo: left to its lookup */
    const double *rows = NULL;
    assert_int_equal(assay_oracle_memo_rows(batched, prompts[2], prompt_lens[2], outs[2], n_outs[2],
                                            &rows),
                     ASSAY_OK);
    assert_int_equal(assay_oracle_memo_prefetch(batched, N, prompts, prompt_lens, outs, n_outs),
                     ASSAY_OK);
    assert_int_equal(assay_oracle_memo_count(batched), 5); /* 0, 1, 2, 3, 5 */
    const int32_t vocab = model->cfg.vocab;
    for (int32_t i = 0; i < N - 1; i++) {
        const double *want = NULL, *got = NULL;
        assert_int_equal(assay_oracle_memo_rows(alone, prompts[i], prompt_lens[i], outs[i],
                                                n_outs[i], &want),
                         ASSAY_OK);
        assert_int_equal(assay_oracle_memo_rows(batched, prompts[i], prompt_lens[i], outs[i],
                                                n_outs[i], &got),
                         ASSAY_OK);
        assert_memory_equal(got, want, sizeof(double) * (size_t)n_outs[i] * (size_t)vocab);
    }
    assert_int_equal(assay_oracle_memo_count(batched), 5); /* found, none computed again */
    assert_int_equal(assay_oracle_memo_rows(batched, prompts[6], prompt_lens[6], outs[6], n_outs[6],
                                            &rows),
                     ASSAY_ERR_INVALID);
    assay_oracle_memo_free(alone);
    assay_oracle_memo_free(batched);
    assay_adapter_close(&a);
}

/* The argmax scan gives each row's argmax as the rows a lookup computes,
 * for more sequences than fit in one batch, one repeated and one held,
 * and keeps none of the rows it computed; a sequence too long for the
 * memo is refused. */
static void test_memo_argmax(void **state)
{
    (void)state;
    struct assay_adapter a;
    const struct assay_model *model = open_mini(&a);
    enum { N = 7, LEN = 24 };
    struct assay_oracle_memo *alone = NULL, *scan = NULL;
    assert_int_equal(assay_oracle_memo_init(&alone, model, LEN), ASSAY_OK);
    assert_int_equal(assay_oracle_memo_init(&scan, model, LEN), ASSAY_OK);
    int32_t toks[N][LEN + 16], best[N][LEN];
    const int32_t *prompts[N], *outs[N];
    int32_t *argmax[N], prompt_lens[N], n_outs[N];
    for (int32_t i = 0; i < N; i++) {
        for (int32_t k = 0; k < LEN + 16; k++) {
            toks[i][k] = (i * 37 + k * 11 + 5) % 256;
        }
        prompts[i] = toks[i];
        prompt_lens[i] = 1 + i;
        outs[i] = toks[i] + prompt_lens[i];
        n_outs[i] = 3 + 2 * i;
        argmax[i] = best[i];
    }
    prompts[4] = prompts[1]; /* a repeat */
    prompt_lens[4] = prompt_lens[1];
    outs[4] = outs[1];
    n_outs[4] = n_outs[1];
    const double *rows = NULL;
    assert_int_equal(assay_oracle_memo_rows(scan, prompts[2], prompt_lens[2], outs[2], n_outs[2],
                                            &rows),
                     ASSAY_OK);
    assert_int_equal(assay_oracle_memo_argmax(scan, N, prompts, prompt_lens, outs, n_outs, argmax),
                     ASSAY_OK);
    assert_int_equal(assay_oracle_memo_count(scan), 1); /* only the one held before */
    const int32_t vocab = model->cfg.vocab;
    int32_t n_rows = 0, n_differ = 0;
    for (int32_t i = 0; i < N; i++) {
        assert_int_equal(assay_oracle_memo_rows(alone, prompts[i], prompt_lens[i], outs[i],
                                                n_outs[i], &rows),
                         ASSAY_OK);
        for (int32_t r = 0; r < n_outs[i]; r++) {
            const double *row = rows + (int64_t)r * vocab;
            int32_t want = 0;
            for (int32_t k = 1; k < vocab; k++) {
                want = row[k] > row[want] ? k : want;
            }
            assert_int_equal(best[i][r], want);
            n_differ += r > 0 && best[i][r] != best[i][r - 1];
            n_rows++;
        }
    }
    assert_true(n_differ > n_rows / 4); /* the rows are not all alike */
    n_outs[6] = LEN; /* too long for the memo */
    assert_int_equal(assay_oracle_memo_argmax(scan, N, prompts, prompt_lens, outs, n_outs, argmax),
                     ASSAY_ERR_INVALID);
    assay_oracle_memo_free(alone);
    assay_oracle_memo_free(scan);
    assay_adapter_close(&a);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_result_comes_back),    cmocka_unit_test(test_deaths_are_failures),
        cmocka_unit_test(test_hang_is_killed),       cmocka_unit_test(test_earlier_failure_is_kept),
        cmocka_unit_test(test_no_fork_runs_here),    cmocka_unit_test(test_memo_round_trip),
        cmocka_unit_test(test_memo_prefetch),        cmocka_unit_test(test_memo_argmax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
