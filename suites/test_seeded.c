/*
 * Unit tests of seed.positions' promise modes (checks/seeded.h): a correct
 * engine (the bundled one, batch-invariant) is wrapped by an adapter whose
 * batched runs part from the lone ones the way a batch-dependent server's
 * do, or whose lone repeat differs, and the check's explain hook decides
 * which partings the numerics could make. Bit for bit, every parting
 * fails; with the hook, an explained parting ends its comparison and is
 * counted, an unexplained one fails; a lone repeat stays bit for bit
 * unless explain_alone says otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "adapters/adapter.h"
#include "adapters/spec.h"
#include "checks/result.h"
#include "checks/seeded.h"
#include "checks/stats.h"
#include "core/rng.h"
#include "support.h"

enum wrap_mode {
    WRAP_NONE,
    WRAP_BATCHED, /* a request's tokens in a step shared with others: x -> x ^ 1 */
    WRAP_REPEAT,  /* the second lone run of a seed: its first token x -> x ^ 1 */
    WRAP_SEED32,  /* seeds cut to their low 32 bits: 0 and 2^32 one stream */
    WRAP_SEED32_BATCHED, /* both of the last two */
    WRAP_STEP_SHARED,    /* in every other step (by a hash of its count), every
                            seeded token is token 0: requests that share a step
                            share their distribution */
};

struct wrap {
    struct assay_adapter inner;
    enum wrap_mode mode;
    struct {
        uint64_t id, seed;
    } live[64];
    int32_t n_live;
    struct {
        uint64_t seed;
        int32_t lone_runs;
    } seen[64];
    int32_t n_seen;
    uint64_t n_steps;
    struct assay_event ev[4096];
};

static enum assay_status w_add(void *self, const struct assay_request *r)
{
    struct wrap *w = self;
    struct assay_request cut = *r;
    if (w->mode == WRAP_SEED32 || w->mode == WRAP_SEED32_BATCHED) {
        cut.sampling.seed &= 0xFFFFFFFFu;
        r = &cut;
    }
    enum assay_status st = w->inner.vt->add_request(w->inner.self, r);
    if (st == ASSAY_OK && w->n_live < 64) {
        w->live[w->n_live].id = r->id;
        w->live[w->n_live].seed = r->sampling.seeded ? r->sampling.seed : UINT64_MAX;
        w->n_live++;
    }
    return st;
}

static bool w_has_work(void *self)
{
    struct wrap *w = self;
    return w->inner.vt->has_work(w->inner.self);
}

/* The entry of seed in w->seen, made on first sight. */
static int32_t seen_index(struct wrap *w, uint64_t seed)
{
    for (int32_t i = 0; i < w->n_seen; i++) {
        if (w->seen[i].seed == seed) {
            return i;
        }
    }
    assert_true(w->n_seen < 64);
    w->seen[w->n_seen].seed = seed;
    w->seen[w->n_seen].lone_runs = 0;
    return w->n_seen++;
}

static enum assay_status w_step(void *self, const struct assay_event **ev, size_t *n)
{
    struct wrap *w = self;
    const struct assay_event *in = NULL;
    enum assay_status st = w->inner.vt->step(w->inner.self, &in, n);
    assert_true(*n <= sizeof w->ev / sizeof w->ev[0]);
    /* one request in the engine: a lone run */
    const bool alone = w->n_live == 1;
    const bool shared = w->mode == WRAP_STEP_SHARED && (assay_mix64(++w->n_steps) & 1) != 0;
    for (size_t i = 0; i < *n; i++) {
        w->ev[i] = in[i];
        struct assay_event *e = &w->ev[i];
        int32_t k = 0;
        while (k < w->n_live && w->live[k].id != e->request_id) {
            k++;
        }
        if (k == w->n_live || e->kind != ASSAY_EVENT_TOKEN || w->live[k].seed == UINT64_MAX) {
            continue;
        }
        if (shared) {
            e->token = 0;
        }
        if ((w->mode == WRAP_BATCHED || w->mode == WRAP_SEED32_BATCHED) && !alone) {
            e->token ^= 1;
        }
        if (w->mode == WRAP_REPEAT && alone && e->index == 0 &&
            ++w->seen[seen_index(w, w->live[k].seed)].lone_runs == 2) {
            e->token ^= 1;
        }
    }
    for (size_t i = 0; i < *n; i++) {
        if (w->ev[i].kind == ASSAY_EVENT_FINISH) {
            for (int32_t k = 0; k < w->n_live; k++) {
                if (w->live[k].id == w->ev[i].request_id) {
                    w->live[k] = w->live[--w->n_live];
                    break;
                }
            }
        }
    }
    *ev = w->ev;
    return st;
}

static enum assay_status w_abort(void *self, uint64_t id)
{
    struct wrap *w = self;
    return w->inner.vt->abort(w->inner.self, id);
}

static void w_free(void *self)
{
    (void)self;
}

static enum assay_status w_info(void *self, struct assay_adapter_info *out)
{
    struct wrap *w = self;
    assay_adapter_get_info(&w->inner, out);
    return ASSAY_OK;
}

static const struct assay_adapter_vtable k_wrap_vt = {
    ASSAY_ADAPTER_ABI_VERSION, "wrap", w_add, w_has_work, w_step, w_abort, w_free, w_info, NULL,
    NULL, NULL, NULL, NULL};

/* The hook: a parting to x ^ 1 is one the numerics can make; any other not. */
static int g_explained;

static bool explain_flip(void *ctx, const int32_t *prompt, int32_t len,
                         const struct assay_sampling *s, const int32_t *ta, const int32_t *tb,
                         int32_t n, int32_t k, char *why, size_t size)
{
    (void)ctx;
    (void)prompt;
    (void)len;
    (void)s;
    assert_true(k < n);
    for (int32_t j = 0; j < k; j++) {
        assert_int_equal(ta[j], tb[j]); /* the runs agree before the parting */
    }
    const int32_t x = ta[k], y = tb[k];
    g_explained++;
    snprintf(why, size, "%s", (x ^ 1) == y ? "neighbours" : "far apart");
    return (x ^ 1) == y;
}

static bool explain_never(void *ctx, const int32_t *prompt, int32_t len,
                          const struct assay_sampling *s, const int32_t *ta, const int32_t *tb,
                          int32_t n, int32_t k, char *why, size_t size)
{
    (void)ctx;
    (void)prompt;
    (void)len;
    (void)s;
    (void)ta;
    (void)tb;
    (void)n;
    (void)k;
    snprintf(why, size, "no numerics part these");
    return false;
}

static struct assay_model_cache *g_cache;
static assay_seed_chance_fn g_chance;
static void *g_chance_ctx;

static struct wrap g_wrap;

/* The bundled mini model (batch 16) wrapped in mode: the adapter to check. */
static struct assay_adapter open_wrap(enum wrap_mode mode)
{
    memset(&g_wrap, 0, sizeof g_wrap);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_adapter_open_spec_cached("bundled:model=mini,batch=16", g_cache,
                                                    &g_wrap.inner, &diag),
                     ASSAY_OK);
    g_wrap.mode = mode;
    return (struct assay_adapter){&k_wrap_vt, &g_wrap};
}

/* The end of a run: its verdict printed, the adapter closed. */
static void close_wrap(const struct assay_check_result *res)
{
    printf("  %s: %s\n    %s\n", assay_verdict_str(res->verdict), res->summary, res->failure);
    assay_adapter_close(&g_wrap.inner);
}

static void run(enum wrap_mode mode, assay_seed_explain_fn explain, bool explain_alone,
                struct assay_check_result *res)
{
    struct assay_adapter a = open_wrap(mode);
    struct assay_adapter_info info;
    assay_adapter_get_info(&g_wrap.inner, &info);
    struct assay_seeded_opts o = assay_seeded_opts_default();
    o.explain = explain;
    o.explain_ctx = NULL;
    o.explain_alone = explain_alone;
    o.chance = g_chance;
    o.chance_ctx = g_chance_ctx;
    assay_check_result_init(res, "seed.positions", ASSAY_FAMILY_SEEDED);
    assert_int_equal(assay_check_seed_positions(&a, info.vocab, info.n_ctx, 7, &o, res), ASSAY_OK);
    close_wrap(res);
}

/* assay_seed_chance_fn that answers g_fixed_chance whatever it is asked:
 * the judgement of a match apart from how its chance is bounded. */
static double g_fixed_chance;
static enum assay_status fixed_chance(void *ctx, const int32_t *prompt, int32_t len,
                                      const struct assay_sampling *s, const int32_t *tokens,
                                      int32_t n, double *chance)
{
    (void)ctx;
    (void)prompt;
    (void)len;
    (void)s;
    (void)tokens;
    (void)n;
    *chance = g_fixed_chance;
    return ASSAY_OK;
}

/* Seeds cut to 32 bits: 0 and 2^32 (and 2^32-1 and 2^64-1) give one
 * output. Without a chance to judge by, that fails; with the oracle's
 * (12 tokens of the mini model: far below the alpha) it fails and states
 * the chance; a chance above the pair's share of ASSAY_SEED_ALPHA (a
 * peaked model, a wide budget) makes it a coincidence, stated, not a
 * failure, and a chance at the share still fails. */
static void test_distinct_seeds(void **state)
{
    (void)state;
    struct assay_check_result r;
    run(WRAP_SEED32, NULL, false, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_non_null(strstr(r.failure, "gave the same 12 tokens: two seeds, one stream"));

    const struct assay_model *mini = NULL;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_model_cache_warm(g_cache, "bundled:model=mini", &mini, &diag),
                     ASSAY_OK);
    g_chance = assay_seed_chance_oracle;
    g_chance_ctx = (void *)mini;
    run(WRAP_SEED32, NULL, false, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_non_null(strstr(r.failure, "which a correct engine does with a chance of at most"));
    run(WRAP_NONE, NULL, false, &r); /* the correct engine, judged the same way */
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_null(strstr(r.summary, "coincidence"));

    g_chance = fixed_chance;
    g_fixed_chance = 0.3;
    run(WRAP_SEED32, NULL, false, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_non_null(
        strstr(r.summary, "a coincidence, not evidence: seeds 0 and 4294967296 gave one "
                          "12-token output (chance up to 0.3)"));
    /* with partings the numerics explain as well, the summary keeps them
     * (a cut loses the coincidence first) */
    run(WRAP_SEED32_BATCHED, explain_flip, false, &r);
    printf("a coincidence and partings: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    const char *parted = strstr(r.summary, "runs parted where the numerics can move the draw");
    const char *chance = strstr(r.summary, "a coincidence, not evidence");
    assert_non_null(parted);
    assert_true(chance == NULL || chance > parted);
    g_fixed_chance = ASSAY_SEED_ALPHA / 4;
    run(WRAP_SEED32, NULL, false, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    g_chance = NULL;
    g_chance_ctx = NULL;
}

/* The bound from rows: a uniform row over 8 tokens gives 1/8 per token;
 * a top-k of 2 keeps a quarter of the mass, so 1/2 per token; top-p 0.5
 * halves the mass kept at least, 1/4; room r multiplies by e^(2r/T); and
 * temperature 0 says nothing (1). */
static void test_chance_of_rows(void **state)
{
    (void)state;
    double rows[3 * 8] = {0};
    const int32_t tok[3] = {1, 5, 7};
    struct assay_sampling s = assay_sampling_greedy();
    s.temperature = 1.0f;
    assert_float_equal(assay_seed_chance_of_rows(rows, 8, &s, tok, 3, 0.0), 1.0 / 512, 1e-15);
    s.top_k = 2;
    assert_float_equal(assay_seed_chance_of_rows(rows, 8, &s, tok, 3, 0.0), 1.0 / 8, 1e-15);
    s.top_k = 0;
    s.top_p = 0.5f;
    assert_float_equal(assay_seed_chance_of_rows(rows, 8, &s, tok, 1, 0.0), 0.25, 1e-15);
    s.top_p = 1.0f;
    s.temperature = 0.5f;
    assert_float_equal(assay_seed_chance_of_rows(rows, 8, &s, tok, 1, 0.1), exp(0.4) / 8, 1e-12);
    rows[8 + 5] = 100.0; /* a near-certain token: the bound is 1, never above */
    assert_float_equal(assay_seed_chance_of_rows(rows + 8, 8, &s, tok + 1, 1, 0.1), 1.0, 0.0);
    s.temperature = 0.0f;
    assert_float_equal(assay_seed_chance_of_rows(rows, 8, &s, tok, 3, 0.0), 1.0, 0.0);
}

static void test_bitwise(void **state)
{
    (void)state;
    struct assay_check_result r;
    run(WRAP_NONE, NULL, false, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_non_null(strstr(r.summary, "bit for bit"));
    run(WRAP_BATCHED, NULL, false, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_non_null(strstr(r.failure, "twin"));
}

static void test_batched_partings(void **state)
{
    (void)state;
    struct assay_check_result r;
    g_explained = 0;
    run(WRAP_BATCHED, explain_flip, false, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_true(g_explained > 0);
    assert_non_null(strstr(r.summary, "a lone repeat bit for bit"));
    assert_non_null(strstr(r.summary, "runs parted where the numerics can move the draw"));
    run(WRAP_BATCHED, explain_never, false, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_non_null(strstr(r.failure, "not a parting the numerics can make: no numerics"));
}

/* seed.pairs on the mini model, 1,000 pairs at alpha 1e-6. */
static void run_pairs(enum wrap_mode mode, struct assay_check_result *res)
{
    struct assay_adapter a = open_wrap(mode);
    const struct assay_model *mini = NULL;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_model_cache_warm(g_cache, "bundled:model=mini", &mini, &diag),
                     ASSAY_OK);
    struct assay_seeded_opts o = assay_seeded_opts_default();
    assay_check_result_init(res, "seed.pairs", ASSAY_FAMILY_SEEDED);
    assert_int_equal(assay_check_seed_pairs(&a, mini, 7, &o, 1000, 1e-6, 0.99, res), ASSAY_OK);
    close_wrap(res);
}

/* seed.pairs tests independence, and a server whose logits depend on its
 * batch makes the two requests of a pair dependent when they share a step
 * (both draw from the step's distribution). The pair's requests go in
 * separate runs, the second in shuffled order, so a step shared even to the
 * extreme (every other step's tokens all one) does not fail an engine whose
 * seeds are right; seeds cut to 32 bits still fail. */
static void test_pairs_shared_steps(void **state)
{
    (void)state;
    struct assay_check_result r;
    run_pairs(WRAP_NONE, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    run_pairs(WRAP_STEP_SHARED, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_non_null(strstr(r.summary, "separate runs"));
    run_pairs(WRAP_SEED32, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_non_null(strstr(r.failure, "not independent"));
}

static void test_lone_repeat(void **state)
{
    (void)state;
    struct assay_check_result r;
    g_explained = 0;
    run(WRAP_REPEAT, explain_flip, false, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_non_null(strstr(r.failure, "alone again"));
    assert_int_equal(g_explained, 0); /* a lone repeat is never asked about */
    run(WRAP_REPEAT, explain_flip, true, &r);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_true(g_explained > 0);
    assert_non_null(strstr(r.summary, "up to the numerics budget"));
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    assay_stats_init();
    if (assay_model_cache_init(&g_cache) != ASSAY_OK) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitwise),
        cmocka_unit_test(test_batched_partings),
        cmocka_unit_test(test_lone_repeat),
        cmocka_unit_test(test_distinct_seeds),
        cmocka_unit_test(test_chance_of_rows),
        cmocka_unit_test(test_pairs_shared_steps),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    assay_model_cache_free(g_cache);
    return failed;
}
