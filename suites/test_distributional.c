/*
 * Unit tests of the distributional family's machinery (checks/distributional.h),
 * independent of the bundled engine's sampler: a fake adapter samples from
 * the oracle's exact distribution, with or without a planted bias, so the
 * checks are seen to pass what is right and fail what is not. Also the
 * parameter parser and Holm's procedure across a family.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "checks/distributional.h"
#include "checks/distributional_internal.h"
#include "checks/stats.h"
#include "oracles/oracle.h"
#include "support.h"

/* ---- a fake engine: every request's first token from a fixed table ----- */

enum fake_mode {
    FAKE_EXACT,
    FAKE_BIASED,
    FAKE_IMPOSSIBLE,
    FAKE_DROPS,
    FAKE_PAST_CUT,
    FAKE_DROPS_ALL, /* no request gets its token */
    FAKE_NAN_STEP,  /* the 3rd step fails as an engine does on NaN logits */
    FAKE_KEEPS_TIE, /* an exact tie at the cut keeps both tokens (a threshold cut) */
};

struct fake {
    const struct assay_model *model;
    struct assay_sampling sampling;
    enum fake_mode mode;
    double bias;        /* FAKE_BIASED: mass moved from the likeliest kept token to the next */
    gsl_rng *rng;
    uint64_t ids[4096];
    int32_t toks[4096];
    int32_t n_live;
    struct assay_event events[8192];
    double *p;          /* (vocab) the distribution of the current prompt */
    double *logits;     /* (len, vocab) */
    struct assay_oracle *oracle;
    int64_t served;
    int32_t last_prompt[64]; /* the prompt p belongs to (requests share one) */
    int32_t last_len;
    int32_t steps;
};

static enum assay_status fake_add(void *self, const struct assay_request *r)
{
    struct fake *f = self;
    if (f->n_live == 4096) {
        return ASSAY_ERR_FULL;
    }
    const int32_t v = f->model->cfg.vocab;
    assert_true(r->prompt_len <= 64);
    bool same = r->prompt_len == f->last_len &&
                memcmp(r->prompt, f->last_prompt, sizeof(int32_t) * (size_t)r->prompt_len) == 0;
    if (!same) {
        assert_int_equal(assay_oracle_logits(f->oracle, r->prompt, r->prompt_len, f->logits),
                         ASSAY_OK);
        assert_int_equal(assay_oracle_distribution(f->logits + (int64_t)(r->prompt_len - 1) * v, v,
                                                   &r->sampling, ASSAY_SAMPLING_JOINT, f->p, NULL),
                         ASSAY_OK);
        memcpy(f->last_prompt, r->prompt, sizeof(int32_t) * (size_t)r->prompt_len);
        f->last_len = r->prompt_len;
    }
    if (f->mode == FAKE_KEEPS_TIE && !same) {
        /* The token the tie rule removes gets its twin's weight, and the
         * kept set is renormalised. */
        struct assay_dist_tie_info ti;
        if (assay_dist_cut_tie(f->logits + (int64_t)(r->prompt_len - 1) * v, f->p, v, &ti)) {
            f->p[ti.dropped] = f->p[ti.kept];
            for (int32_t x = 0; x < v; x++) {
                f->p[x] /= 1.0 + ti.q;
            }
        }
    }
    if ((f->mode == FAKE_BIASED || f->bias > 0) && !same) {
        int32_t a = 0, b = -1;
        for (int32_t x = 1; x < v; x++) {
            a = f->p[x] > f->p[a] ? x : a;
        }
        for (int32_t x = 0; x < v; x++) {
            if (x != a && f->p[x] > 0 && (b < 0 || f->p[x] > f->p[b])) {
                b = x;
            }
        }
        double m = f->bias < f->p[a] ? f->bias : f->p[a];
        f->p[a] -= m;
        f->p[b] += m;
    }
    double u = gsl_rng_uniform(f->rng), cum = 0.0;
    int32_t tok = v - 1;
    for (int32_t x = 0; x < v; x++) {
        cum += f->p[x];
        if (f->p[x] > 0 && u < cum) {
            tok = x;
            break;
        }
    }
    if (f->mode == FAKE_IMPOSSIBLE && f->served == 100) {
        for (int32_t x = 0; x < v; x++) {
            if (f->p[x] == 0.0) {
                tok = x;
                break;
            }
        }
    }
    if (f->mode == FAKE_PAST_CUT && f->served == 100) {
        /* The third token past the cut, in the oracle's logit order. */
        const double *row = f->logits + (int64_t)(r->prompt_len - 1) * v;
        int32_t n_kept = 0;
        for (int32_t x = 0; x < v; x++) {
            n_kept += f->p[x] > 0.0;
        }
        for (int32_t x = 0; x < v; x++) {
            int32_t rank = 0;
            for (int32_t y = 0; y < v; y++) {
                rank += row[y] > row[x] || (row[y] == row[x] && y < x);
            }
            if (rank == n_kept + 2) {
                tok = x;
            }
        }
        assert_true(f->p[tok] == 0.0);
    }
    f->served++;
    f->ids[f->n_live] = r->id;
    f->toks[f->n_live++] = tok;
    return ASSAY_OK;
}

static bool fake_has_work(void *self)
{
    return ((struct fake *)self)->n_live > 0;
}

static enum assay_status fake_step(void *self, const struct assay_event **ev, size_t *n)
{
    struct fake *f = self;
    size_t k = 0;
    if (f->mode == FAKE_NAN_STEP && ++f->steps == 3) {
        *ev = f->events;
        *n = 0;
        return ASSAY_ERR_NUMERIC;
    }
    for (int32_t i = 0; i < f->n_live; i++) {
        struct assay_event *e = &f->events[k++];
        memset(e, 0, sizeof *e);
        e->kind = ASSAY_EVENT_TOKEN;
        e->request_id = f->ids[i];
        e->token = f->toks[i];
        if ((f->mode == FAKE_DROPS && f->ids[i] == 7) || f->mode == FAKE_DROPS_ALL) {
            k--; /* the planted bug: request 7 loses its token */
        }
        e = &f->events[k++];
        memset(e, 0, sizeof *e);
        e->kind = ASSAY_EVENT_FINISH;
        e->request_id = f->ids[i];
        e->index = 1;
        e->reason = ASSAY_FINISH_LENGTH;
    }
    f->n_live = 0;
    *ev = f->events;
    *n = k;
    return ASSAY_OK;
}

static enum assay_status fake_abort(void *self, uint64_t id)
{
    (void)self;
    (void)id;
    return ASSAY_ERR_NOT_FOUND;
}

static void fake_free(void *self)
{
    (void)self;
}

static enum assay_status fake_info(void *self, struct assay_adapter_info *out)
{
    struct fake *f = self;
    memset(out, 0, sizeof *out);
    out->name = "fake";
    out->vocab = f->model->cfg.vocab;
    return ASSAY_OK;
}

static const struct assay_adapter_vtable k_fake_vt = {
    ASSAY_ADAPTER_ABI_VERSION, "fake", fake_add, fake_has_work, fake_step, fake_abort, fake_free,
    fake_info, NULL, NULL, NULL, NULL, NULL};

static struct assay_model *g_mini;
static struct assay_model *g_twins; /* mini-twins */

static void fake_open_on(struct fake *f, struct assay_adapter *a, struct assay_model *model,
                         enum fake_mode mode, double bias, unsigned long seed)
{
    memset(f, 0, sizeof *f);
    f->model = model;
    f->mode = mode;
    f->bias = bias;
    f->rng = gsl_rng_alloc(gsl_rng_mt19937);
    assert_non_null(f->rng);
    gsl_rng_set(f->rng, seed);
    f->p = calloc((size_t)model->cfg.vocab, sizeof(double));
    f->logits = calloc((size_t)model->cfg.vocab * 64, sizeof(double));
    assert_non_null(f->p);
    assert_non_null(f->logits);
    assert_int_equal(assay_oracle_init(&f->oracle, model, 64), ASSAY_OK);
    a->vt = &k_fake_vt;
    a->self = f;
}

static void fake_open(struct fake *f, struct assay_adapter *a, enum fake_mode mode, double bias,
                      unsigned long seed)
{
    fake_open_on(f, a, g_mini, mode, bias, seed);
}

static void fake_close(struct fake *f)
{
    gsl_rng_free(f->rng);
    free(f->p);
    free(f->logits);
    assay_oracle_free(f->oracle);
}

static struct assay_dist_params small_params(void)
{
    struct assay_dist_params p = assay_dist_default_params();
    char why[200];
    assert_int_equal(assay_dist_parse_params("n=20000,pos=1,len=1,prompt=3,t=0.7,top_k=20,top_p=0.9",
                                             &p, why, sizeof why),
                     ASSAY_OK);
    p.seed = 42;
    return p;
}

static void test_gof_passes_exact_sampler(void **state)
{
    (void)state;
    struct fake f;
    struct assay_adapter a;
    fake_open(&f, &a, FAKE_EXACT, 0, 7);
    struct assay_dist_params p = small_params();
    struct assay_check_result r;
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    printf("  exact: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_true(r.p_value > p.alpha);
    assert_int_equal(r.n, 20000);
    assert_true(r.min_tv > 0.0 && r.min_tv < 0.05);
    assert_true(r.df > 1);
    fake_close(&f);
}

static void test_gof_fails_biased_sampler(void **state)
{
    (void)state;
    struct fake f;
    struct assay_adapter a;
    struct assay_dist_params p = small_params();
    struct assay_check_result r;
    /* A bias of TV 0.05, above the ~0.03 this n detects with power 0.99. */
    fake_open(&f, &a, FAKE_BIASED, 0.05, 8);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    printf("  biased: %s\n  %s\n", r.summary, r.failure);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_true(r.p_value <= p.alpha);
    assert_true(r.min_tv < 0.05);
    fake_close(&f);
}

static void test_gof_impossible_token_is_hard_failure(void **state)
{
    (void)state;
    struct fake f;
    struct assay_adapter a;
    struct assay_dist_params p = small_params();
    struct assay_check_result r;
    fake_open(&f, &a, FAKE_IMPOSSIBLE, 0, 9);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_int_equal(r.n_impossible, 1);
    assert_non_null(strstr(r.failure, "oracle probability 0"));
    /* The rule fired; the statistic on the other samples is reported on its
     * own and passes. */
    printf("  impossible: %s\n", r.failure);
    assert_true(r.rule_fired);
    assert_false(r.statistic_fired);
    assert_true(r.p_value > p.alpha && r.p_value <= 1.0);
    assert_non_null(strstr(r.failure, "zero-probability rule: 1 samples"));
    assert_non_null(strstr(r.failure, "the statistic alone: p "));
    assert_non_null(strstr(r.failure, ", passes"));
    fake_close(&f);
    /* With a bias of TV 0.05 besides, both fire and the text says so. */
    fake_open(&f, &a, FAKE_IMPOSSIBLE, 0.05, 9);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    printf("  impossible and biased: %s\n", r.failure);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_true(r.rule_fired);
    assert_true(r.statistic_fired);
    assert_true(r.p_value <= p.alpha);
    assert_non_null(strstr(r.failure, "fails too"));
    fake_close(&f);
}

static void test_gof_lost_token_is_hard_failure(void **state)
{
    (void)state;
    struct fake f;
    struct assay_adapter a;
    struct assay_dist_params p = small_params();
    struct assay_check_result r;
    fake_open(&f, &a, FAKE_DROPS, 0, 10);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_non_null(strstr(r.failure, "request 7"));
    fake_close(&f);
}

/* What the engine did wrong is a FAIL, never an ERROR ("the suite could
 * not run"): a step that fails (as an engine does on NaN logits), and a
 * sample so broken that no statistic is left to compute. */
static void test_engine_failure_is_fail(void **state)
{
    (void)state;
    struct fake f;
    struct assay_adapter a;
    struct assay_dist_params p = small_params();
    struct assay_check_result r;
    fake_open(&f, &a, FAKE_NAN_STEP, 0, 11);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assay_dist_gof(&a, g_mini, &p, &r);
    printf("  failing step: %s\n", r.failure);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_non_null(strstr(r.failure, "the engine failed while sampling"));
    assert_non_null(strstr(r.failure, "a step failed: numeric failure"));
    fake_close(&f);

    fake_open(&f, &a, FAKE_DROPS_ALL, 0, 12);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assay_dist_gof(&a, g_mini, &p, &r);
    printf("  nothing delivered: %s\n", r.failure);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_non_null(strstr(r.failure, "20000 requests delivered wrongly"));
    fake_close(&f);
}

/* Tolerances no boundary can be kept from (a budget of a whole nat): no
 * prompt qualifies. Without a stated reason that is an ERROR; with one
 * (the audit's numerics budget) a SKIP naming the tolerances and the
 * reason, and no sample is drawn. */
static void test_gof_no_safe_prompt(void **state)
{
    (void)state;
    struct fake f;
    struct assay_adapter a;
    fake_open(&f, &a, FAKE_EXACT, 0, 12);
    struct assay_dist_params p = small_params();
    p.tol_top_p = 1.0;
    p.tol_logit = 3.0;
    p.prompt_tries = 4;
    struct assay_check_result r;
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_not_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    assert_int_equal(r.verdict, ASSAY_VERDICT_ERROR);
    assert_non_null(strstr(r.failure, "no prompt among 4 candidates"));
    p.no_prompt_skip = "a stated budget";
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    assert_int_equal(r.verdict, ASSAY_VERDICT_SKIP);
    assert_non_null(strstr(r.failure, "no prompt among 4 candidates"));
    assert_non_null(strstr(r.failure, "top-p 1, top-k 3 logits"));
    assert_non_null(strstr(r.failure, "a stated budget"));
    assert_int_equal(r.n, 0);
    /* The same parameters with the library's tolerances find a prompt. */
    p.tol_top_p = ASSAY_DIST_TOL_TOP_P;
    p.tol_logit = ASSAY_DIST_TOL_LOGIT;
    p.prompt_tries = 64;
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    fake_close(&f);
}

/* A token three past the top-k/top-p cut: a hard failure with fp32's
 * tolerances; with tolerances that move the cut that far (a numerics
 * budget) it is a boundary token, left out of the PIT values, and the
 * check passes. */
static void test_pit_cut_moved_by_tolerances(void **state)
{
    (void)state;
    struct assay_dist_params p = assay_dist_default_params();
    char why[200];
    assert_int_equal(assay_dist_parse_params("n=400,len=1,prompt=3,prompts=1,t=0.7,top_k=20,top_p=0.9",
                                             &p, why, sizeof why),
                     ASSAY_OK);
    p.seed = 5;
    struct fake f;
    struct assay_adapter a;
    struct assay_check_result r;
    fake_open(&f, &a, FAKE_PAST_CUT, 0, 13);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_pit(&a, g_mini, &p, &r, NULL), ASSAY_OK);
    printf("  fp32 tolerances: %s\n", r.failure);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_int_equal(r.n_impossible, 1);
    assert_true(r.rule_fired);
    assert_false(r.statistic_fired);
    assert_non_null(strstr(r.failure, "zero-probability rule: 1 tokens"));
    assert_non_null(strstr(r.failure, "the statistic alone: p "));
    fake_close(&f);
    p.tol_top_p = 1.0;
    p.tol_logit = 1e9;
    fake_open(&f, &a, FAKE_PAST_CUT, 0, 13);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_pit(&a, g_mini, &p, &r, NULL), ASSAY_OK);
    printf("  wide tolerances: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_int_equal(r.n_impossible, 0);
    assert_non_null(strstr(r.summary, "1 at a boundary"));
    fake_close(&f);
}

/* The widened kept set of a top-p cut: its last token's place can go to a
 * token within tol_logit below it (the engine orders the two the other
 * way), never further, and never past a binding top-k. */
static void test_widened_kept_top_p_swap(void **state)
{
    (void)state;
    /* softmax of {2, 1, 0.9995, 0.5, -3}: the first token holds 0.509 of
     * the mass and the first two 0.696, so the cut at top-p 0.6 keeps 2 */
    const double row[5] = {2.0, 1.0, 0.9995, 0.5, -3.0};
    double scratch[5];
    struct assay_dist_params p = assay_dist_default_params();
    p.sampling.temperature = 1.0f;
    p.sampling.top_k = 0;
    p.sampling.top_p = 0.6f;
    p.tol_top_p = 0.0;
    p.tol_logit = 1e-4;
    assert_int_equal(assay_dist_widened_kept(row, 5, &p, scratch), 2);
    p.tol_logit = 1e-3; /* 1.0 and 0.9995 within it: either can be second */
    assert_int_equal(assay_dist_widened_kept(row, 5, &p, scratch), 3);
    p.tol_logit = 0.6; /* the fourth too */
    assert_int_equal(assay_dist_widened_kept(row, 5, &p, scratch), 4);
    p.sampling.top_k = 3; /* a top-k of 3 (no tie within 0.6 at its 3rd) caps it */
    p.tol_logit = 0.4;
    assert_int_equal(assay_dist_widened_kept(row, 5, &p, scratch), 3);
    p.sampling.top_k = 0;
    p.sampling.top_p = 1.0f; /* no top-p cut: every token */
    p.tol_logit = 1e-3;
    assert_int_equal(assay_dist_widened_kept(row, 5, &p, scratch), 5);
}

/* A top-p cut whose last kept token and first removed one are within
 * tol_logit is not safe, however large its mass margin: an engine off by
 * that much, or a server that breaks the tie by its own sort, keeps the
 * second. An exact tie of no tie mode is such a cut; with a tie mode it is
 * the tie rule's. */
static void test_top_p_near_tie_unsafe(void **state)
{
    (void)state;
    /* softmax of {2, 1, 1, 0.5, -3}: 0.453, 0.167, 0.167, 0.101, 0.002; top-p
     * 0.55 keeps the first two (mass margin 0.07 either side), the second
     * tied with the third */
    double row[5] = {2.0, 1.0, 1.0, 0.5, -3.0};
    double scratch[5];
    struct assay_dist_params p = assay_dist_default_params();
    p.sampling.temperature = 1.0f;
    p.sampling.top_k = 0;
    p.sampling.top_p = 0.55f;
    p.tol_top_p = 1e-3;
    p.tol_logit = 1e-3;
    p.tie = ASSAY_DIST_TIE_NONE;
    struct assay_oracle_dist_info inf;
    assert_int_equal(assay_oracle_distribution(row, 5, &p.sampling, p.order, scratch, &inf),
                     ASSAY_OK);
    assert_int_equal(inf.n_kept, 2);
    bool safe = true;
    assert_int_equal(assay_dist_boundary_safe(row, 5, &p, &inf, scratch, &safe), ASSAY_OK);
    assert_false(safe);
    row[2] = 0.9995; /* within tol_logit: still unsafe */
    assert_int_equal(assay_dist_boundary_safe(row, 5, &p, &inf, scratch, &safe), ASSAY_OK);
    assert_false(safe);
    row[2] = 0.99; /* beyond it: safe */
    assert_int_equal(assay_oracle_distribution(row, 5, &p.sampling, p.order, scratch, &inf),
                     ASSAY_OK);
    assert_int_equal(assay_dist_boundary_safe(row, 5, &p, &inf, scratch, &safe), ASSAY_OK);
    assert_true(safe);
    row[2] = 1.0; /* the exact tie under a tie mode: decided by the tie rule */
    p.tie = ASSAY_DIST_TIE_ANY;
    assert_int_equal(assay_oracle_distribution(row, 5, &p.sampling, p.order, scratch, &inf),
                     ASSAY_OK);
    assert_int_equal(assay_dist_boundary_safe(row, 5, &p, &inf, scratch, &safe), ASSAY_OK);
    assert_true(safe);
}

/* The tie rule of the contract (core/request.h) in the oracle, and the
 * tie at a cut as the checks find it: the lower id of a tie at the k-th
 * rank or at the token crossing top_p is kept, the higher removed. */
static void test_oracle_tie_rule(void **state)
{
    (void)state;
    const double row[6] = {3.0, 2.0, 2.0, 1.0, 0.5, -4.0};
    double p[6];
    struct assay_sampling s = {1.0f, 2, 1.0f, true, 1};
    struct assay_oracle_dist_info inf;
    assert_int_equal(assay_oracle_distribution(row, 6, &s, ASSAY_SAMPLING_JOINT, p, &inf),
                     ASSAY_OK);
    assert_int_equal(inf.n_kept, 2);
    assert_true(p[0] > 0.0 && p[1] > 0.0 && p[2] == 0.0);
    assert_true(inf.top_k_gap == 0.0);
    struct assay_dist_tie_info ti;
    assert_true(assay_dist_cut_tie(row, p, 6, &ti));
    assert_int_equal(ti.kept, 1);
    assert_int_equal(ti.dropped, 2);
    assert_true(ti.logit == 2.0 && ti.gap == 1.0 && ti.q == p[1]);
    /* top-k 3 keeps both of the pair: no tie at its cut */
    s.top_k = 3;
    assert_int_equal(assay_oracle_distribution(row, 6, &s, ASSAY_SAMPLING_JOINT, p, &inf),
                     ASSAY_OK);
    assert_false(assay_dist_cut_tie(row, p, 6, &ti));
    /* {1, 1, 0, 0, -5}: masses 0.3646, 0.3646, 0.1341, 0.1341, 0.0025; top-p
     * 0.8 is crossed by token 2, tied with token 3, which is removed */
    const double row2[5] = {1.0, 1.0, 0.0, 0.0, -5.0};
    struct assay_sampling sp = {1.0f, 0, 0.8f, true, 1};
    assert_int_equal(assay_oracle_distribution(row2, 5, &sp, ASSAY_SAMPLING_JOINT, p, &inf),
                     ASSAY_OK);
    assert_int_equal(inf.n_kept, 3);
    assert_true(p[2] > 0.0 && p[3] == 0.0);
    assert_true(assay_dist_cut_tie(row2, p, 5, &ti));
    assert_int_equal(ti.kept, 2);
    assert_int_equal(ti.dropped, 3);
    assert_true(ti.gap == 1.0);
    /* top-p 0.5 is crossed by token 1, whose twin 0 is kept before it */
    sp.top_p = 0.5f;
    assert_int_equal(assay_oracle_distribution(row2, 5, &sp, ASSAY_SAMPLING_JOINT, p, &inf),
                     ASSAY_OK);
    assert_int_equal(inf.n_kept, 2);
    assert_false(assay_dist_cut_tie(row2, p, 5, &ti));
}

/* The first token on mini-twins with an odd top-k: every cut is an exact
 * tie. Without a tie mode no prompt qualifies (a gap of 0 is within
 * tol_logit); with tie=k the exact sampler passes, and one that keeps both
 * tied tokens fails by its statistic, never by the zero-probability rule
 * (the dropped token is within tol_logit of the cut). */
static void test_gof_tie_at_top_k(void **state)
{
    (void)state;
    struct assay_dist_params p = assay_dist_default_params();
    char why[200];
    assert_int_equal(assay_dist_parse_params("n=20000,pos=1,len=1,prompt=3,t=1.5,top_k=5,"
                                             "top_p=1,tries=8",
                                             &p, why, sizeof why),
                     ASSAY_OK);
    p.seed = 43;
    struct fake f;
    struct assay_adapter a;
    struct assay_check_result r;
    fake_open_on(&f, &a, g_twins, FAKE_EXACT, 0, 14);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_not_equal(assay_dist_gof(&a, g_twins, &p, &r), ASSAY_OK);
    assert_int_equal(r.verdict, ASSAY_VERDICT_ERROR);
    assert_non_null(strstr(r.failure, "no prompt among 8 candidates"));
    p.tie = ASSAY_DIST_TIE_TOP_K;
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_twins, &p, &r), ASSAY_OK);
    printf("  exact: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_non_null(strstr(r.summary, "exact tie: "));
    assert_non_null(strstr(r.summary, "drawn 0 times"));
    fake_close(&f);
    fake_open_on(&f, &a, g_twins, FAKE_KEEPS_TIE, 0, 15);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_twins, &p, &r), ASSAY_OK);
    printf("  keeps both: %s\n  %s\n", r.summary, r.failure);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_true(r.statistic_fired);
    assert_false(r.rule_fired);
    assert_int_equal(r.n_impossible, 0);
    assert_non_null(strstr(r.failure, "which the exact tie at the cut removes"));
    fake_close(&f);
}

/* The same at the PIT: with tie=any, the token an exact tie removes is a
 * PIT value of 1, so a sampler that keeps both fails the marginal test,
 * and the exact sampler passes. */
static void test_pit_tie(void **state)
{
    (void)state;
    struct assay_dist_params p = assay_dist_default_params();
    char why[200];
    assert_int_equal(assay_dist_parse_params("n=2000,len=1,prompt=3,prompts=16,t=1.5,top_k=5,"
                                             "top_p=1,tie=any",
                                             &p, why, sizeof why),
                     ASSAY_OK);
    p.seed = 44;
    struct fake f;
    struct assay_adapter a;
    struct assay_check_result r;
    fake_open_on(&f, &a, g_twins, FAKE_EXACT, 0, 16);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_pit(&a, g_twins, &p, &r, NULL), ASSAY_OK);
    printf("  exact: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_non_null(strstr(r.summary, "0 tokens an exact tie removes"));
    fake_close(&f);
    fake_open_on(&f, &a, g_twins, FAKE_KEEPS_TIE, 0, 17);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_pit(&a, g_twins, &p, &r, NULL), ASSAY_OK);
    printf("  keeps both: %s\n  %s\n", r.summary, r.failure);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_true(r.statistic_fired);
    assert_false(r.rule_fired);
    assert_non_null(strstr(r.failure, "an exact tie at the cut removes"));
    fake_close(&f);
}

static void test_homogeneity_of_fakes(void **state)
{
    (void)state;
    struct fake f1, f2, f3;
    struct assay_adapter a1, a2, a3;
    fake_open(&f1, &a1, FAKE_EXACT, 0, 11);
    fake_open(&f2, &a2, FAKE_EXACT, 0, 12);
    fake_open(&f3, &a3, FAKE_BIASED, 0.08, 13);
    struct assay_dist_params p = small_params();
    struct assay_check_result r;
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_homogeneity(&a1, &a2, &p, &r), ASSAY_OK);
    printf("  same: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_homogeneity(&a1, &a3, &p, &r), ASSAY_OK);
    printf("  different: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    fake_close(&f1);
    fake_close(&f2);
    fake_close(&f3);
}

/*
 * Under a numerics budget the goodness of fit tests "within the budget": a
 * sampler biased by a TV of 0.03 fails the point null at this n and passes
 * a budget of 0.05; biased beyond budget + the distance it detects, it
 * fails. A token the cut removes fails by the rule unless a cut the
 * tolerances allow keeps it.
 */
static void test_gof_within_budget(void **state)
{
    (void)state;
    struct fake f;
    struct assay_adapter a;
    struct assay_check_result r;
    struct assay_dist_params p = small_params();
    fake_open(&f, &a, FAKE_BIASED, 0.03, 21);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    printf("  TV 0.03, point null: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_false(r.tol.tested);
    fake_close(&f);

    p.budget.on = true;
    p.budget.tv = 0.05;
    p.budget.reference = 0.025;
    p.budget.boundary = 0.0;
    fake_open(&f, &a, FAKE_BIASED, 0.03, 21);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    printf("  TV 0.03, budget 0.05: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_true(r.tol.tested);
    assert_string_equal(r.tol.distance, "TV");
    assert_true(r.tol.budget == 0.05 && r.tol.reference == 0.025);
    assert_true(r.tol.ci_lo <= 0.03 && 0.03 <= r.tol.ci_hi);
    assert_true(r.tol.min_excess > 0.0 && r.tol.min_excess < 0.05);
    assert_true(fabs(r.min_tv - (0.05 + r.tol.min_excess)) < 1e-12);
    const double beyond = 0.05 + r.tol.min_excess + 0.01;
    fake_close(&f);

    fake_open(&f, &a, FAKE_BIASED, beyond, 22);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    printf("  TV %.3f, budget 0.05: %s\n  %s\n", beyond, r.summary, r.failure);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_true(r.statistic_fired && !r.rule_fired);
    assert_non_null(strstr(r.failure, "beyond the budget 0.05"));
    fake_close(&f);

    /* A token past the cut: outside every cut the tolerances allow, the
     * rule; inside, it counts in the distance. */
    p.n = 400;
    fake_open(&f, &a, FAKE_PAST_CUT, 0, 23);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_true(r.rule_fired);
    fake_close(&f);
    /* the same prompt (no prompt keeps its cut beyond tolerances this wide:
     * under a budget the caller chooses it) */
    int32_t prompt[3];
    double *prob = calloc((size_t)g_mini->cfg.vocab, sizeof(double));
    assert_non_null(prob);
    assert_int_equal(assay_dist_choose_prompt(g_mini, &p, prompt, prob), ASSAY_OK);
    free(prob);
    p.prompt = prompt;
    p.tol_top_p = 1.0;
    p.tol_logit = 1e9;
    fake_open(&f, &a, FAKE_PAST_CUT, 0, 23);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_gof(&a, g_mini, &p, &r), ASSAY_OK);
    printf("  past the cut, wide tolerances: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_int_equal(r.n_impossible, 0);
    fake_close(&f);
}

/* A PIT allowance that is the same at every position and grid point. */
static enum assay_status flat_allowance(void *ctx, const struct assay_dist_params *p,
                                        const int32_t *seq, int32_t prompt_len, int32_t n,
                                        const double *oracle_rows, double *allow,
                                        double *reference, double *mass)
{
    (void)seq;
    (void)prompt_len;
    (void)oracle_rows;
    const double *d = ctx;
    for (int32_t j = 0; j < n; j++) {
        for (int32_t k = 0; k < p->pit_bins - 1; k++) {
            allow[j * (p->pit_bins - 1) + k] = *d;
        }
        reference[j] = *d / 2;
        mass[j] = 0.0;
    }
    return ASSAY_OK;
}

/* The PIT under a budget: the CDF of u from a sampler biased by TV b is
 * within b of the uniform's, so 0.02 passes an allowance of 0.03, and 0.25
 * fails it; without the callback the parameters are refused. */
static void test_pit_within_budget(void **state)
{
    (void)state;
    struct assay_dist_params p = assay_dist_default_params();
    char why[200];
    assert_int_equal(assay_dist_parse_params(
                         "n=6000,len=1,prompt=3,prompts=4,t=0.7,top_k=20,top_p=0.9", &p, why,
                         sizeof why),
                     ASSAY_OK);
    p.seed = 9;
    double allowance = 0.03;
    p.budget.on = true;
    struct fake f;
    struct assay_adapter a;
    struct assay_check_result r;
    fake_open(&f, &a, FAKE_BIASED, 0.02, 31);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_pit(&a, g_mini, &p, &r, NULL), ASSAY_ERR_INVALID);
    assert_int_equal(r.verdict, ASSAY_VERDICT_ERROR);
    fake_close(&f);
    p.budget.along = flat_allowance;
    p.budget.ctx = &allowance;
    struct assay_dist_parts parts;
    fake_open(&f, &a, FAKE_BIASED, 0.02, 31);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_pit(&a, g_mini, &p, &r, &parts), ASSAY_OK);
    printf("  TV 0.02, allowance 0.03: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_true(r.tol.tested);
    assert_string_equal(r.tol.distance, "PIT CDF");
    assert_true(fabs(r.tol.budget - 0.03) < 1e-12);
    assert_true(fabs(r.tol.reference - 0.015) < 1e-12);
    assert_int_equal(parts.n, 2);
    fake_close(&f);
    fake_open(&f, &a, FAKE_BIASED, 0.25, 32);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_pit(&a, g_mini, &p, &r, NULL), ASSAY_OK);
    printf("  TV 0.25, allowance 0.03: %s\n  %s\n", r.summary, r.failure);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    assert_true(r.statistic_fired);
    fake_close(&f);
}

/* Homogeneity under a budget: bins fixed from a given distribution, the
 * engines' TV against it; two exact samplers pass a zero budget's test,
 * 0.08 apart pass a budget of 0.1 and fail one of 0. */
static void test_homogeneity_within_budget(void **state)
{
    (void)state;
    struct fake f1, f2;
    struct assay_adapter a1, a2;
    struct assay_dist_params p = small_params();
    const int32_t v = g_mini->cfg.vocab;
    double *prob = calloc((size_t)v, sizeof(double));
    int32_t prompt[3];
    assert_non_null(prob);
    p.prompt_len = 2;
    assay_dist_candidate_prompt(&p, 0, prompt);
    struct assay_oracle *o = NULL;
    double *rows = calloc((size_t)v * 2, sizeof(double));
    assert_non_null(rows);
    assert_int_equal(assay_oracle_init(&o, g_mini, 4), ASSAY_OK);
    assert_int_equal(assay_oracle_logits(o, prompt, 2, rows), ASSAY_OK);
    assert_int_equal(assay_oracle_distribution(rows + v, v, &p.sampling, ASSAY_SAMPLING_JOINT,
                                               prob, NULL),
                     ASSAY_OK);
    p.prompt = prompt;
    p.budget.on = true;
    p.budget.bins_from = prob;
    p.budget.tv = 0.1;
    fake_open(&f1, &a1, FAKE_EXACT, 0, 41);
    fake_open(&f2, &a2, FAKE_BIASED, 0.08, 42);
    struct assay_check_result r;
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_homogeneity(&a1, &a2, &p, &r), ASSAY_OK);
    printf("  0.08 apart, budget 0.1: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_PASS);
    assert_true(r.tol.tested && r.tol.estimate > 0.04);
    fake_close(&f1);
    fake_close(&f2);
    p.budget.tv = 0.0;
    fake_open(&f1, &a1, FAKE_EXACT, 0, 43);
    fake_open(&f2, &a2, FAKE_BIASED, 0.08, 44);
    assay_check_result_init(&r, "fake", ASSAY_FAMILY_DISTRIBUTIONAL);
    assert_int_equal(assay_dist_homogeneity(&a1, &a2, &p, &r), ASSAY_OK);
    printf("  0.08 apart, budget 0: %s\n", r.summary);
    assert_int_equal(r.verdict, ASSAY_VERDICT_FAIL);
    fake_close(&f1);
    fake_close(&f2);
    assay_oracle_free(o);
    free(rows);
    free(prob);
}

static void test_parse_params(void **state)
{
    (void)state;
    struct assay_dist_params p = assay_dist_default_params();
    char why[300];
    assert_int_equal(assay_dist_parse_params("n=123,pos=2,len=3,t=1.5,top_k=7,top_p=0.5,"
                                             "order=sequential,alpha=1e-4,bins=10,vs=spec=0",
                                             &p, why, sizeof why),
                     ASSAY_OK);
    assert_int_equal(p.n, 123);
    assert_int_equal(p.positions, 2);
    assert_int_equal(p.out_len, 3);
    assert_true(fabs(p.sampling.temperature - 1.5f) < 1e-6);
    assert_int_equal(p.sampling.top_k, 7);
    assert_int_equal(p.order, ASSAY_SAMPLING_SEQUENTIAL);
    assert_true(fabs(p.alpha - 1e-4) < 1e-12);
    assert_int_equal(p.pit_bins, 10);
    assert_int_equal(assay_dist_parse_params("frobnicate=1", &p, why, sizeof why),
                     ASSAY_ERR_INVALID);
    assert_non_null(strstr(why, "frobnicate"));
    assert_int_equal(assay_dist_parse_params("pos=3", &p, why, sizeof why), ASSAY_ERR_INVALID);
    assert_int_equal(assay_dist_parse_params("t=0", &p, why, sizeof why), ASSAY_ERR_INVALID);
    assert_int_equal(assay_dist_parse_params("top_p=1.5", &p, why, sizeof why), ASSAY_ERR_INVALID);
    assert_int_equal(assay_dist_parse_params("n", &p, why, sizeof why), ASSAY_ERR_INVALID);
    assert_int_equal(assay_dist_parse_params(NULL, &p, why, sizeof why), ASSAY_OK);
    assert_false(p.bonus_only);
    assert_int_equal(assay_dist_parse_params("only=bonus", &p, why, sizeof why), ASSAY_OK);
    assert_true(p.bonus_only);
    assert_int_equal(assay_dist_parse_params("only=residual", &p, why, sizeof why),
                     ASSAY_ERR_INVALID);
    assert_int_equal(assay_dist_parse_params("tie=k", &p, why, sizeof why), ASSAY_OK);
    assert_int_equal(p.tie, ASSAY_DIST_TIE_TOP_K);
    assert_int_equal(assay_dist_parse_params("tie=p", &p, why, sizeof why), ASSAY_OK);
    assert_int_equal(p.tie, ASSAY_DIST_TIE_TOP_P);
    assert_int_equal(assay_dist_parse_params("tie=any", &p, why, sizeof why), ASSAY_OK);
    assert_int_equal(p.tie, ASSAY_DIST_TIE_ANY);
    assert_int_equal(assay_dist_parse_params("tie=q", &p, why, sizeof why), ASSAY_ERR_INVALID);
}

/* The tokens dist.pit.spec-bonus tests: the one after each round whose
 * every proposal was accepted, inside the sequence; rounds that do not fit
 * the requests are left out of the rate too. */
static void test_spec_tally_bonus_cells(void **state)
{
    (void)state;
    struct round_rec rounds[] = {
        {0, 0, 2, 2},  /* accepted: the token at 2 is a bonus */
        {0, 3, 2, 1},  /* rejected at its second proposal: none */
        {0, 5, 3, 3},  /* accepted, its bonus at 8 is past len 8: none */
        {1, 0, 1, 1},  /* request 1, bonus at 1 */
        {2, 0, 1, 1},  /* no request 2: left out */
        {1, 2, 2, 3},  /* more accepted than drafted: left out */
    };
    struct sample_set ss;
    memset(&ss, 0, sizeof ss);
    ss.rounds = rounds;
    ss.n_rounds = 6;
    struct assay_spec_tally t;
    assert_int_equal(assay_dist_spec_tally(&ss, 2, 8, true, &t), ASSAY_OK);
    assert_int_equal(t.drafted, 8);
    assert_int_equal(t.accepted, 7);
    assert_int_equal(t.n_bonus, 2);
    for (int32_t c = 0; c < 16; c++) {
        assert_int_equal(t.bonus[c], c == 2 || c == 8 + 1);
    }
    char buf[120];
    assay_dist_spec_rate(&t, buf, sizeof buf);
    assert_string_equal(buf, "; proposals accepted 7 of 8 (87.5%)");
    assay_free(t.bonus);
    assert_int_equal(assay_dist_spec_tally(&ss, 2, 8, false, &t), ASSAY_OK);
    assert_null(t.bonus);
}

static void test_holm_across_family(void **state)
{
    (void)state;
    struct assay_check_result r[5];
    const double p[5] = {1e-7, 3e-6, 0.5, 4e-6, NAN};
    for (int i = 0; i < 5; i++) {
        assay_check_result_init(&r[i], "x", i == 4 ? ASSAY_FAMILY_EQUIVALENCE
                                                   : ASSAY_FAMILY_DISTRIBUTIONAL);
        r[i].alpha = 1e-6;
        r[i].p_value = p[i];
    }
    r[0].verdict = ASSAY_VERDICT_FAIL; /* its own p <= alpha */
    /* Family of 4 at 4e-6: sorted 1e-7 (x4 = 4e-7), 3e-6 (x3 = 9e-6 > 4e-6): stop. */
    double family = assay_dist_finalize(r, 5);
    assert_true(fabs(family - 4e-6) < 1e-15);
    assert_true(fabs(r[0].p_adjusted - 4e-7) < 1e-15);
    assert_true(fabs(r[1].p_adjusted - 9e-6) < 1e-15);
    assert_int_equal(r[0].verdict, ASSAY_VERDICT_FAIL);
    assert_true(r[0].statistic_fired);
    assert_false(r[0].rule_fired);
    assert_int_equal(r[1].verdict, ASSAY_VERDICT_PASS);
    assert_false(r[1].statistic_fired);
    assert_int_equal(r[3].verdict, ASSAY_VERDICT_PASS);
    assert_true(isnan(r[4].p_adjusted));
    /* p = {1e-7, 1.2e-6, 1.3e-6, 0.9}: adjusted 4e-7, 3.6e-6, 3.6e-6, 0.9;
     * two checks that pass at their own level 1e-6 fail under Holm at 4e-6. */
    const double q[4] = {1e-7, 1.2e-6, 1.3e-6, 0.9};
    for (int i = 0; i < 4; i++) {
        assay_check_result_init(&r[i], "y", ASSAY_FAMILY_DISTRIBUTIONAL);
        r[i].alpha = 1e-6;
        r[i].p_value = q[i];
    }
    assay_dist_finalize(r, 4);
    assert_int_equal(r[1].verdict, ASSAY_VERDICT_FAIL);
    assert_int_equal(r[2].verdict, ASSAY_VERDICT_FAIL);
    assert_true(r[2].statistic_fired); /* by Holm, above its own level */
    assert_int_equal(r[3].verdict, ASSAY_VERDICT_PASS);
    assert_non_null(strstr(r[1].failure, "Holm"));
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    assay_stats_init();
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model_config twins = assay_model_config_mini_twins();
    if (assay_model_init_random(&g_mini, &cfg, 1) != ASSAY_OK ||
        assay_model_init_random(&g_twins, &twins, 1) != ASSAY_OK) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_params),
        cmocka_unit_test(test_spec_tally_bonus_cells),
        cmocka_unit_test(test_holm_across_family),
        cmocka_unit_test(test_gof_passes_exact_sampler),
        cmocka_unit_test(test_gof_fails_biased_sampler),
        cmocka_unit_test(test_gof_impossible_token_is_hard_failure),
        cmocka_unit_test(test_gof_lost_token_is_hard_failure),
        cmocka_unit_test(test_engine_failure_is_fail),
        cmocka_unit_test(test_gof_no_safe_prompt),
        cmocka_unit_test(test_pit_cut_moved_by_tolerances),
        cmocka_unit_test(test_widened_kept_top_p_swap),
        cmocka_unit_test(test_top_p_near_tie_unsafe),
        cmocka_unit_test(test_oracle_tie_rule),
        cmocka_unit_test(test_gof_tie_at_top_k),
        cmocka_unit_test(test_pit_tie),
        cmocka_unit_test(test_homogeneity_of_fakes),
        cmocka_unit_test(test_gof_within_budget),
        cmocka_unit_test(test_pit_within_budget),
        cmocka_unit_test(test_homogeneity_within_budget),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    assay_model_free(g_mini);
    assay_model_free(g_twins);
    return rc;
}
