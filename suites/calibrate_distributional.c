/*
 * The calibration label: the distributional tests under a correct engine,
 * over many seeds, and one planted bias of known size.
 *
 *   calibrate_distributional GROUP [REPLICATES]
 *
 * GROUP "tokens" calibrates the goodness-of-fit and homogeneity tests and
 * the power formula; GROUP "sequences" the PIT and acceptance tests (the
 * two run as separate CTest tests so that -j2 uses both cores).
 *
 * Null calibration: each test of the verify plan runs R times (1000 by
 * default) with seeds derived from a fixed master seed and the replicate
 * number, each replicate with a smaller n than in verify (stated in the
 * table) so that the label fits in minutes; the test's logic, bins and
 * p-value computation are the same. Every p-value that should be U(0,1)
 * under a correct engine (the single p of chi-squared tests, the two
 * components of the combined PIT and acceptance tests, the PIT's within
 * the oracle's entropy groups among them) must pass a KS test
 * of uniformity at alpha 1e-3, and its count of p <= 0.01 must lie in the
 * central 1 - 1e-3 binomial interval of Binomial(R, 0.01). A combined
 * (Bonferroni) p-value is conservative by construction: its count must not
 * exceed the upper end of that interval.
 *
 * Power calibration: a planted bias of known size in the worst-case
 * direction of the power formula. The first tokens of a correct engine are
 * bent, in an adapter wrapped around it, from p to q = p (1 + c t) with t
 * = +-1 (less its mean) on alternate halves of the test's bins, c chosen so
 * that the noncentral chi-squared predicts power 0.8 at alpha 0.01 with n
 * 4000; then TV(p, q) is the formula's minimum detectable TV at that power
 * (printed). The detection count over R/2 replicates must lie in the
 * central 1 - 1e-3 binomial interval of Binomial(R/2, predicted power).
 * (A bias that moves mass towards small bins, such as a higher
 * temperature, is detected somewhat more often than the formula says, and
 * one towards large bins less often: E[X^2] departs from df + lambda by
 * sum (q_b - p_b) / p_b, first order in the bias; this direction cancels
 * that term.)
 *
 * This program's own false-alarm rate: 2 tests at 1e-3 per p-value series
 * (about 2e-3 each; 1e-3 for a combined p), about 6% over the 32 series and
 * the power check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/bundled.h"
#include "adapters/spec.h"
#include "checks/distributional.h"
#include "checks/stats.h"
#include "checks/tolerance.h"
#include "core/clock.h"
#include "core/rng.h"
#include "oracles/oracle.h"
#include "support.h"

#define MASTER_SEED 20261129u
#define CAL_ALPHA 0.01
#define KS_ALPHA 1e-3
#define BOUND_ALPHA 1e-3

enum kind { KIND_GOF, KIND_PIT, KIND_ACCEPTANCE, KIND_HOMOGENEITY };

struct cal_case {
    const char *group;
    const char *name;     /* the verify check it calibrates */
    enum kind kind;
    const char *spec;
    const char *params;   /* smaller n than in verify */
    const char *vs_spec;  /* homogeneity: engine B */
};

static const struct cal_case k_cases[] = {
    {"tokens", "dist.gof.first", KIND_GOF, "bundled:model=mini,batch=256",
     "n=1500,pos=1,len=1,prompt=3,t=0.7,top_k=40,top_p=0.6", NULL},
    {"tokens", "dist.gof.sequential", KIND_GOF, "bundled:model=mini,batch=256,order=sequential",
     "n=1500,pos=1,len=1,prompt=3,t=0.8,top_k=30,top_p=0.8", NULL},
    {"tokens", "dist.gof.spec-pair", KIND_GOF, "bundled:model=mini,batch=256,spec=1",
     "n=1500,pos=2,len=2,prompt=2,t=0.7,top_k=20,top_p=0.9", NULL},
    {"tokens", "dist.gof.hot-top-k", KIND_GOF, "bundled:model=mini,batch=256",
     "n=1500,pos=1,len=1,prompt=3,t=1.5,top_k=12,top_p=0.95", NULL},
    {"tokens", "dist.gof.hot-top-p", KIND_GOF, "bundled:model=mini,batch=256",
     "n=1500,pos=1,len=1,prompt=3,t=1.5,top_k=120,top_p=0.6", NULL},
    {"tokens", "dist.gof.ties-top-k", KIND_GOF, "bundled:model=mini-twins,batch=256,blas_rows=0",
     "n=1500,pos=1,len=1,prompt=3,t=1.5,top_k=5,top_p=1,tie=k", NULL},
    {"tokens", "dist.gof.ties-top-p", KIND_GOF, "bundled:model=mini-twins,batch=256,blas_rows=0",
     "n=1500,pos=1,len=1,prompt=3,t=0.7,top_k=0,top_p=0.15,tie=p", NULL},
    {"tokens", "dist.gof.flat-top-p", KIND_GOF, "bundled:model=mini-flat,batch=256",
     "n=1500,pos=1,len=1,t=1,top_k=0,top_p=0.5", NULL},
    {"tokens", "dist.homogeneity.spec-vs-plain", KIND_HOMOGENEITY,
     "bundled:model=mini,batch=256,spec=1", "n=1000,pos=1,len=2,prompt=1,t=0.7,top_k=40,top_p=0.6",
     "bundled:model=mini,batch=256,spec=0"},
    {"sequences", "dist.pit.plain", KIND_PIT, "bundled:model=mini,batch=256",
     "n=32,len=16,prompt=4,prompts=16,t=0.9,top_k=50,top_p=0.95", NULL},
    {"sequences", "dist.pit.hot", KIND_PIT, "bundled:model=mini,batch=256",
     "n=32,len=16,prompt=4,prompts=16,t=1.5,top_k=90,top_p=0.6", NULL},
    {"sequences", "dist.pit.ties", KIND_PIT, "bundled:model=mini-twins,batch=256,blas_rows=0",
     "n=32,len=16,prompt=4,prompts=16,t=0.7,top_k=9,top_p=0.3,tie=any", NULL},
    {"sequences", "dist.pit.sharp", KIND_PIT, "bundled:model=mini-sharp,batch=256",
     "n=32,len=16,prompt=4,prompts=16,t=0.7,top_k=0,top_p=1", NULL},
    {"sequences", "dist.pit.spec", KIND_PIT, "bundled:model=mini,batch=256,spec=2",
     "n=32,len=16,prompt=4,prompts=16,t=0.8,top_k=0,top_p=0.8", NULL},
    {"sequences", "dist.spec.acceptance", KIND_ACCEPTANCE, "bundled:model=mini,batch=256,spec=4",
     "n=32,len=16,prompt=4,prompts=16,t=1.0,top_k=0,top_p=0.9", NULL},
};

static const char *g_group;
static int32_t g_reps = 1000;

struct series {
    char name[96];
    double *p;
    int32_t n;
    bool conservative; /* a Bonferroni combination: only the upper bound applies */
};

/* KS of the p-values and their false alarms at CAL_ALPHA; prints a row and
 * returns whether the series is calibrated. */
static bool judge(const struct series *s, const char *n_text)
{
    double d = NAN, p_ks = NAN;
    int64_t lo = 0, hi = 0, alarms = 0;
    for (int32_t i = 0; i < s->n; i++) {
        alarms += s->p[i] <= CAL_ALPHA;
    }
    assert_int_equal(assay_binomial_two_sided_bound(s->n, CAL_ALPHA, BOUND_ALPHA, &lo, &hi),
                     ASSAY_OK);
    bool ok = true;
    if (s->conservative) {
        ok = alarms <= hi;
        printf("  %-44s %5d  %-30s %8s %10s  %4lld in [0, %lld]   %s\n", s->name, (int)s->n, n_text,
               "-", "(combined)", (long long)alarms, (long long)hi, ok ? "ok" : "NOT CALIBRATED");
        return ok;
    }
    assert_int_equal(assay_ks_uniform(s->p, (size_t)s->n, &d, &p_ks), ASSAY_OK);
    ok = p_ks > KS_ALPHA && alarms >= lo && alarms <= hi;
    printf("  %-44s %5d  %-30s %8.4f %10.3g  %4lld in [%lld, %lld]   %s\n", s->name, (int)s->n,
           n_text, d, p_ks, (long long)alarms, (long long)lo, (long long)hi,
           ok ? "ok" : "NOT CALIBRATED");
    return ok;
}

static void open_or_fail(const char *spec, struct assay_adapter *a)
{
    struct assay_diag diag;
    assay_diag_clear(&diag);
    char why[400];
    if (assay_adapter_open_spec(spec, a, &diag) != ASSAY_OK) {
        fail_msg("engine %s: %s", spec, assay_diag_format(&diag, why, sizeof why));
    }
}

static bool run_case(const struct cal_case *c)
{
    struct assay_adapter a, b;
    open_or_fail(c->spec, &a);
    if (c->vs_spec != NULL) {
        open_or_fail(c->vs_spec, &b);
    }
    const struct assay_engine_params *ep = assay_engine_params(assay_bundled_engine(&a));
    struct assay_dist_params p = assay_dist_default_params();
    p.order = ep->sampling_order;
    char why[300];
    assert_int_equal(assay_dist_parse_params(c->params, &p, why, sizeof why), ASSAY_OK);
    struct series s[4];
    memset(s, 0, sizeof s);
    /* The combined p and its parts: PIT three (KS, chi-squared, chi-squared
     * within entropy groups), acceptance two. */
    int32_t n_series = c->kind == KIND_PIT ? 4 : c->kind == KIND_ACCEPTANCE ? 3 : 1;
    for (int32_t k = 0; k < n_series; k++) {
        s[k].p = calloc((size_t)g_reps, sizeof(double));
        assert_non_null(s[k].p);
    }
    uint64_t base = assay_seed_derive(MASTER_SEED, c->name);
    int64_t t0 = assay_now_ns();
    int64_t n_used = 0;
    const char *names[3] = {"", "", ""};
    for (int32_t r = 0; r < g_reps; r++) {
        p.seed = assay_mix64(base ^ (uint64_t)(r + 1));
        p.seed = p.seed == 0 ? 1 : p.seed;
        struct assay_check_result res;
        assay_check_result_init(&res, c->name, ASSAY_FAMILY_DISTRIBUTIONAL);
        struct assay_dist_parts parts;
        memset(&parts, 0, sizeof parts);
        enum assay_status st = ASSAY_OK;
        switch (c->kind) {
        case KIND_GOF:
            st = assay_dist_gof(&a, ep->model, &p, &res);
            break;
        case KIND_HOMOGENEITY:
            st = assay_dist_homogeneity(&a, &b, &p, &res);
            break;
        case KIND_PIT:
            st = assay_dist_pit(&a, ep->model, &p, &res, &parts);
            break;
        case KIND_ACCEPTANCE:
            st = assay_dist_acceptance(&a, ep->model, ep->draft, &p, &res, &parts);
            break;
        }
        if (st != ASSAY_OK || !(res.p_value >= 0.0)) {
            fail_msg("%s replicate %d: %s: %s", c->name, (int)r, assay_verdict_str(res.verdict),
                     res.failure);
        }
        if (res.n_impossible > 0) {
            fail_msg("%s replicate %d: a hard failure under a correct engine: %s", c->name,
                     (int)r, res.failure);
        }
        n_used += res.n;
        s[0].p[r] = res.p_value;
        for (int32_t k = 0; k < parts.n && k + 1 < n_series; k++) {
            s[1 + k].p[r] = parts.p[k];
            names[k] = parts.name[k];
        }
    }
    double secs = (double)(assay_now_ns() - t0) / 1e9;
    char n_text[64];
    snprintf(n_text, sizeof n_text, "n %.0f per replicate", (double)n_used / g_reps);
    bool ok = true;
    for (int32_t k = 0; k < n_series; k++) {
        s[k].n = g_reps;
        if (k == 0) {
            snprintf(s[k].name, sizeof s[k].name, "%s%s", c->name,
                     n_series > 1 ? " (combined p)" : "");
        } else {
            snprintf(s[k].name, sizeof s[k].name, "%s: %s", c->name, names[k - 1]);
        }
        s[k].conservative = n_series > 1 && k == 0;
        ok = judge(&s[k], n_text) && ok;
        free(s[k].p);
    }
    printf("  %-44s %.1f s for %d replicates\n", "", secs, (int)g_reps);
    fflush(stdout);
    assay_adapter_close(&a);
    if (c->vs_spec != NULL) {
        assay_adapter_close(&b);
    }
    return ok;
}

static void test_null_calibration(void **state)
{
    (void)state;
    printf("  %-44s %5s  %-30s %8s %10s  %s\n", "p-values under a correct engine", "R", "samples",
           "KS D", "KS p", "p <= 0.01 (bound)");
    bool ok = true;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        if (strcmp(k_cases[i].group, g_group) == 0) {
            ok = run_case(&k_cases[i]) && ok;
        }
    }
    if (!ok) {
        fail_msg("some distributional test is not calibrated (see the table)");
    }
}

/*
 * An adapter that forwards everything to the bundled engine and then bends
 * each first token from p (the oracle's exact distribution for the one
 * prompt) to q = p (1 + c t_b), t constant on each bin b of the test, with
 * sum_b p_b t_b = 0: a token of a bin with t_b < 0 is replaced, with
 * probability -c t_b, by a token drawn from the bins with t > 0 with weights
 * p_y t_b(y). With t = +-1 on half the bins each (less their p-weighted
 * mean), this is the worst-case direction of the power formula: w^2 =
 * c^2 sum p t^2, and E[X^2] under q equals df + lambda up to O(c^2).
 */
struct planted {
    struct assay_adapter inner;
    int32_t v;
    const double *p;   /* (v) */
    double *t;         /* (v) t of each token's bin; 0 for impossible tokens */
    double c;
    double *up_cdf;    /* (v) cumulative weights p t over tokens with t > 0 */
    gsl_rng *rng;
    struct assay_event ev[8192];
};

static enum assay_status pl_add(void *self, const struct assay_request *r)
{
    struct planted *h = self;
    return h->inner.vt->add_request(h->inner.self, r);
}

static bool pl_has_work(void *self)
{
    struct planted *h = self;
    return h->inner.vt->has_work(h->inner.self);
}

static enum assay_status pl_step(void *self, const struct assay_event **ev, size_t *n)
{
    struct planted *h = self;
    const struct assay_event *in = NULL;
    enum assay_status st = h->inner.vt->step(h->inner.self, &in, n);
    assert_true(*n <= sizeof h->ev / sizeof h->ev[0]);
    for (size_t i = 0; i < *n; i++) {
        h->ev[i] = in[i];
        struct assay_event *e = &h->ev[i];
        if (e->kind != ASSAY_EVENT_TOKEN || e->index != 0 || !(h->t[e->token] < 0.0)) {
            continue;
        }
        if (gsl_rng_uniform(h->rng) < -h->c * h->t[e->token]) {
            double u = gsl_rng_uniform(h->rng) * h->up_cdf[h->v - 1];
            int32_t y = 0;
            while (y < h->v - 1 && !(u < h->up_cdf[y])) {
                y++;
            }
            e->token = y;
        }
    }
    *ev = h->ev;
    return st;
}

static enum assay_status pl_abort(void *self, uint64_t id)
{
    struct planted *h = self;
    return h->inner.vt->abort(h->inner.self, id);
}

static void pl_free(void *self)
{
    (void)self;
}

static enum assay_status pl_info(void *self, struct assay_adapter_info *out)
{
    struct planted *h = self;
    assay_adapter_get_info(&h->inner, out);
    return ASSAY_OK;
}

static const struct assay_adapter_vtable k_planted_vt = {
    ASSAY_ADAPTER_ABI_VERSION, "planted", pl_add, pl_has_work, pl_step, pl_abort, pl_free,
    pl_info, NULL, NULL, NULL, NULL, NULL};

#define POWER_N 4000
#define POWER_TARGET 0.8

static void test_power_calibration(void **state)
{
    (void)state;
    struct planted h;
    memset(&h, 0, sizeof h);
    open_or_fail("bundled:model=mini,batch=256", &h.inner);
    struct assay_adapter a = {&k_planted_vt, &h};
    const struct assay_model *model = assay_engine_params(assay_bundled_engine(&h.inner))->model;
    const int32_t v = model->cfg.vocab;
    struct assay_dist_params p = assay_dist_default_params();
    char why[300];
    assert_int_equal(assay_dist_parse_params("pos=1,len=1,prompt=3,t=0.7,top_k=20,top_p=0.9", &p,
                                             why, sizeof why),
                     ASSAY_OK);
    p.alpha = CAL_ALPHA;
    p.n = POWER_N;
    p.prompt_seed = assay_seed_derive(MASTER_SEED, "power-prompt");
    int32_t prompt[3];
    double *pj = calloc((size_t)v, sizeof(double));
    h.t = calloc((size_t)v, sizeof(double));
    h.up_cdf = calloc((size_t)v, sizeof(double));
    h.rng = gsl_rng_alloc(gsl_rng_mt19937);
    assert_non_null(pj);
    assert_non_null(h.t);
    assert_non_null(h.up_cdf);
    assert_non_null(h.rng);
    assert_int_equal(assay_dist_choose_prompt(model, &p, prompt, pj), ASSAY_OK);
    h.v = v;
    h.p = pj;
    /* The test's own bins (bins 0.. are in descending probability); signs
     * + - - + + - - + ... balance the two halves' mass; an odd last bin
     * gets 0. Then t = s - sum p s, so that sum p t = 0. */
    struct assay_gof_bins *bins = NULL;
    assert_int_equal(assay_gof_bins_make(pj, v, (double)POWER_N, 5.0, &bins), ASSAY_OK);
    int32_t nb = bins->n_bins, df = nb - 1;
    double *tb = calloc((size_t)nb, sizeof(double));
    assert_non_null(tb);
    double mean = 0;
    for (int32_t b = 0; b < nb; b++) {
        int32_t phase = b % 4;
        tb[b] = (b == nb - 1 && nb % 2 == 1) ? 0.0 : (phase == 0 || phase == 3) ? 1.0 : -1.0;
        mean += bins->prob[b] * tb[b];
    }
    double w2_per_c2 = 0, tv_per_c = 0;
    for (int32_t b = 0; b < nb; b++) {
        tb[b] -= mean;
        w2_per_c2 += bins->prob[b] * tb[b] * tb[b];
        tv_per_c += bins->prob[b] * fabs(tb[b]) / 2;
    }
    double lambda = 0, power = 0;
    assert_int_equal(assay_chisq_lambda_for_power(CAL_ALPHA, df, POWER_TARGET, &lambda), ASSAY_OK);
    h.c = sqrt(lambda / ((double)POWER_N * w2_per_c2));
    assert_true(h.c * fabs(tb[0]) < 1.0 && h.c < 1.0);
    double cum = 0;
    for (int32_t x = 0; x < v; x++) {
        h.t[x] = bins->bin_of[x] >= 0 ? tb[bins->bin_of[x]] : 0.0;
        cum += h.t[x] > 0 ? pj[x] * h.t[x] : 0.0;
        h.up_cdf[x] = cum;
    }
    double crit = gsl_cdf_chisq_Qinv(CAL_ALPHA, df);
    assert_int_equal(assay_ncchisq_Q(crit, df, lambda, &power), ASSAY_OK);
    int32_t reps = g_reps / 2;
    int64_t detected = 0, lo = 0, hi = 0;
    uint64_t base = assay_seed_derive(MASTER_SEED, "power");
    int64_t t0 = assay_now_ns();
    for (int32_t r = 0; r < reps; r++) {
        p.seed = assay_mix64(base ^ (uint64_t)(r + 1));
        p.seed = p.seed == 0 ? 1 : p.seed;
        gsl_rng_set(h.rng, (unsigned long)(p.seed & 0xffffffffu) | 1u);
        struct assay_check_result res;
        assay_check_result_init(&res, "power", ASSAY_FAMILY_DISTRIBUTIONAL);
        if (assay_dist_gof(&a, model, &p, &res) != ASSAY_OK) {
            fail_msg("power replicate %d: %s", (int)r, res.failure);
        }
        assert_int_equal(res.n_impossible, 0);
        detected += res.p_value <= CAL_ALPHA;
    }
    assert_int_equal(assay_binomial_two_sided_bound(reps, power, BOUND_ALPHA, &lo, &hi), ASSAY_OK);
    double min_tv = NAN;
    assert_int_equal(assay_min_detectable_tv(CAL_ALPHA, df, power, POWER_N, &min_tv), ASSAY_OK);
    bool ok = detected >= lo && detected <= hi;
    printf("  power: first token (T 0.7, top-k 20, top-p 0.9) bent to q = p (1 + c t) on the "
           "test's bins\n"
           "    planted bias TV %.4f (c %.4f), n %d, %d bins, lambda %.2f: predicted power %.3f at "
           "alpha %.2g\n"
           "    (the formula's min detectable TV at this power and n: %.4f)\n"
           "    detected in %lld of %d replicates (%.3f; bound [%lld, %lld]): %s; %.1f s\n",
           h.c * tv_per_c, h.c, (int)POWER_N, nb, lambda, power, CAL_ALPHA, min_tv,
           (long long)detected, (int)reps, (double)detected / reps, (long long)lo, (long long)hi,
           ok ? "ok" : "NOT CALIBRATED", (double)(assay_now_ns() - t0) / 1e9);
    fflush(stdout);
    assay_gof_bins_free(bins);
    free(tb);
    free(pj);
    free(h.t);
    free(h.up_cdf);
    gsl_rng_free(h.rng);
    assay_adapter_close(&h.inner);
    if (!ok) {
        fail_msg("the detection rate of a planted bias departs from the power formula");
    }
}

/*
 * Under a numerics budget (group "tolerance"): the goodness of fit, the
 * two-sample test and the PIT through the checks themselves, on a correct
 * engine bent to sit exactly at the edge of the null, and beyond it by
 * the excess each test states it detects with power 0.99.
 *
 * The bend moves mass c from the tail of the oracle's order (the last TV
 * bins, holding at least c) to its first TV bin: TV(p, q) = c on the bins
 * and on the tokens, the shape that puts the whole distance on one event.
 * At c = budget a correct-in-the-budget engine: its false alarms at
 * CAL_ALPHA must not exceed the upper end of Bin(R, CAL_ALPHA)'s 1 - 1e-3
 * interval (the tests are conservative by construction: far fewer is
 * expected). At c = budget + min_excess: its detections must reach the
 * lower end of Bin(R, 0.99)'s. The PIT (one output per sequence, the bent
 * first token) is given, at each grid point, exactly the bend's own CDF
 * deviation there as its allowance: the edge of its null.
 */
#define TOL_N 4000
#define TOL_BUDGET 0.03

/* Set the bend of c on h (p: the oracle's distribution of the prompt). */
static void bend_tv(struct planted *h, const double *pj, int32_t v, double c)
{
    int64_t *order = calloc((size_t)v, sizeof(int64_t));
    int32_t *bin_of = calloc((size_t)v, sizeof(int32_t));
    double bin_prob[64];
    int32_t n_bins = 0;
    assert_non_null(order);
    assert_non_null(bin_of);
    assert_int_equal(assay_tv_bins(pj, v, 16, order, bin_of, bin_prob, &n_bins), ASSAY_OK);
    int32_t last = n_bins - 1;
    while (last > 0 && bin_prob[last] == 0.0) {
        last--; /* the bin of probability 0, when there is one */
    }
    double tail = 0.0;
    int32_t first_tail = last;
    while (first_tail > 1 && tail + bin_prob[first_tail] < c) {
        tail += bin_prob[first_tail--];
    }
    tail += bin_prob[first_tail];
    assert_true(tail >= c && first_tail > 0);
    double cum = 0.0;
    for (int32_t x = 0; x < v; x++) {
        int32_t b = pj[x] > 0.0 ? bin_of[x] : -1;
        h->t[x] = b == 0 ? 1.0 / bin_prob[0] : b >= first_tail && b <= last ? -1.0 / tail : 0.0;
        cum += h->t[x] > 0 ? pj[x] * h->t[x] : 0.0;
        h->up_cdf[x] = cum;
    }
    h->c = c;
    free(order);
    free(bin_of);
}

/* The bend's CDF deviation |Q(u <= s_k) - s_k| at each grid point of
 * `grid`, in the oracle's order (descending probability, lower id first). */
static void bend_deviation(const struct planted *h, const double *pj, int32_t v, int32_t grid,
                           double *dev)
{
    for (int32_t k = 1; k < grid; k++) {
        double s = (double)k / grid, g = 0.0;
        for (int32_t x = 0; x < v; x++) {
            if (!(pj[x] > 0.0)) {
                continue;
            }
            double before = 0.0;
            for (int32_t y = 0; y < v; y++) {
                before += pj[y] > pj[x] || (pj[y] == pj[x] && y < x) ? pj[y] : 0.0;
            }
            double hx = (s - before) / pj[x];
            hx = hx < 0.0 ? 0.0 : hx > 1.0 ? 1.0 : hx;
            g += pj[x] * (1.0 + h->c * h->t[x]) * hx;
        }
        dev[k - 1] = fabs(g - s);
    }
}

static const double *g_pit_allow; /* the PIT's allowance per grid point */

static enum assay_status pit_allow(void *ctx, const struct assay_dist_params *p,
                                   const int32_t *seq, int32_t prompt_len, int32_t n,
                                   const double *oracle_rows, double *allow, double *reference,
                                   double *mass)
{
    (void)ctx;
    (void)seq;
    (void)prompt_len;
    (void)oracle_rows;
    for (int32_t j = 0; j < n; j++) {
        memcpy(allow + (int64_t)j * (p->pit_bins - 1), g_pit_allow,
               sizeof(double) * (size_t)(p->pit_bins - 1));
        reference[j] = 0.0;
        mass[j] = 0.0;
    }
    return ASSAY_OK;
}

enum tol_kind { TOL_GOF, TOL_HOMOGENEITY, TOL_PIT };

/* R replicates of one test under the bend of c: the count rejected at
 * CAL_ALPHA; *excess gets the min_excess the test states. */
static int64_t tolerance_run(enum tol_kind kind, struct planted *h, struct assay_adapter *a,
                             struct assay_adapter *exact, const struct assay_model *model,
                             struct assay_dist_params p, int32_t reps, const char *tag,
                             double *excess)
{
    int64_t rejected = 0;
    uint64_t base = assay_seed_derive(MASTER_SEED, tag);
    for (int32_t r = 0; r < reps; r++) {
        p.seed = assay_mix64(base ^ (uint64_t)(r + 1));
        p.seed = p.seed == 0 ? 1 : p.seed;
        gsl_rng_set(h->rng, (unsigned long)(p.seed & 0xffffffffu) | 1u);
        struct assay_check_result res;
        assay_check_result_init(&res, tag, ASSAY_FAMILY_DISTRIBUTIONAL);
        enum assay_status st = kind == TOL_GOF ? assay_dist_gof(a, model, &p, &res)
                               : kind == TOL_PIT
                                   ? assay_dist_pit(a, model, &p, &res, NULL)
                                   : assay_dist_homogeneity(a, exact, &p, &res);
        if (st != ASSAY_OK || !res.tol.tested || res.n_impossible > 0) {
            fail_msg("%s replicate %d: %s: %s", tag, (int)r, assay_verdict_str(res.verdict),
                     res.failure);
        }
        rejected += res.p_value <= CAL_ALPHA;
        *excess = res.tol.min_excess;
    }
    return rejected;
}

static void test_tolerance_calibration(void **state)
{
    (void)state;
    struct planted h;
    memset(&h, 0, sizeof h);
    open_or_fail("bundled:model=mini,batch=256", &h.inner);
    struct assay_adapter a = {&k_planted_vt, &h}, exact;
    open_or_fail("bundled:model=mini,batch=256", &exact);
    const struct assay_model *model = assay_engine_params(assay_bundled_engine(&h.inner))->model;
    const int32_t v = model->cfg.vocab;
    struct assay_dist_params p = assay_dist_default_params();
    char why[300];
    assert_int_equal(assay_dist_parse_params("pos=1,len=1,prompt=3,prompts=1,t=0.7,top_k=20,"
                                             "top_p=0.9",
                                             &p, why, sizeof why),
                     ASSAY_OK);
    p.alpha = CAL_ALPHA;
    p.n = TOL_N;
    p.prompt_seed = assay_seed_derive(MASTER_SEED, "tolerance-prompt");
    int32_t prompt[3];
    double *pj = calloc((size_t)v, sizeof(double));
    h.t = calloc((size_t)v, sizeof(double));
    h.up_cdf = calloc((size_t)v, sizeof(double));
    h.rng = gsl_rng_alloc(gsl_rng_mt19937);
    double *dev = calloc((size_t)p.pit_bins, sizeof(double));
    assert_non_null(pj);
    assert_non_null(h.t);
    assert_non_null(h.up_cdf);
    assert_non_null(h.rng);
    assert_non_null(dev);
    assert_int_equal(assay_dist_choose_prompt(model, &p, prompt, pj), ASSAY_OK);
    h.v = v;
    h.p = pj;
    p.prompt = prompt;
    p.budget.on = true;
    p.budget.bins_from = pj;
    p.budget.along = pit_allow;
    g_pit_allow = dev;
    const int32_t reps = g_reps;
    int64_t lo = 0, hi = 0, lo_p = 0, hi_p = 0;
    assert_int_equal(assay_binomial_two_sided_bound(reps, CAL_ALPHA, BOUND_ALPHA, &lo, &hi),
                     ASSAY_OK);
    assert_int_equal(assay_binomial_two_sided_bound(reps, 0.99, BOUND_ALPHA, &lo_p, &hi_p),
                     ASSAY_OK);
    printf("  %-44s %5s  %-9s %-9s %s\n", "under a budget, an engine bent by a TV of", "R",
           "bend", "budget", "rejected at 0.01");
    bool ok = true;
    const char *names[3] = {"tolerance: gof (TV on bins)", "tolerance: homogeneity (two samples)",
                            "tolerance: PIT (CDF per grid point)"};
    for (int kind = TOL_GOF; kind <= TOL_PIT; kind++) {
        double excess = 0.0;
        for (int pass = 0; pass < 2; pass++) {
            double c = pass == 0 ? TOL_BUDGET : TOL_BUDGET + excess;
            bend_tv(&h, pj, v, c);
            p.budget.tv = TOL_BUDGET;
            if (kind == TOL_PIT) {
                /* the edge of the PIT's null: the bend's deviation itself,
                 * at the null's edge and beyond it by the excess */
                bend_tv(&h, pj, v, TOL_BUDGET);
                bend_deviation(&h, pj, v, p.pit_bins, dev);
                bend_tv(&h, pj, v, c);
                if (pass == 1) {
                    /* beyond: the allowance stays, the bend grows until its
                     * deviation passes the allowance by the excess at some
                     * grid point */
                    double now[64];
                    assert_true(p.pit_bins <= 64);
                    for (double cc = TOL_BUDGET; cc < 0.9; cc += 0.002) {
                        bend_tv(&h, pj, v, cc);
                        bend_deviation(&h, pj, v, p.pit_bins, now);
                        double beyond = 0.0;
                        for (int32_t k = 0; k < p.pit_bins - 1; k++) {
                            beyond = fmax(beyond, now[k] - dev[k]);
                        }
                        c = cc;
                        if (beyond >= excess) {
                            break;
                        }
                    }
                }
            }
            int64_t t0 = assay_now_ns();
            int64_t rejected = tolerance_run((enum tol_kind)kind, &h, &a, &exact, model, p, reps,
                                             names[kind], &excess);
            bool good = pass == 0 ? rejected <= hi : rejected >= lo_p;
            ok = ok && good;
            printf("  %-44s %5d  %-9.4f %-9.4f %4lld (%s %lld)%9s %s; %.1f s\n", names[kind],
                   (int)reps, c, TOL_BUDGET, (long long)rejected,
                   pass == 0 ? "at most" : "at least", (long long)(pass == 0 ? hi : lo_p), "",
                   good ? "ok" : "NOT CALIBRATED", (double)(assay_now_ns() - t0) / 1e9);
            fflush(stdout);
        }
    }
    free(pj);
    free(h.t);
    free(h.up_cdf);
    free(dev);
    gsl_rng_free(h.rng);
    assay_adapter_close(&h.inner);
    assay_adapter_close(&exact);
    if (!ok) {
        fail_msg("a tolerance test's size or power departs from what it states");
    }
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc < 2 || (strcmp(argv[1], "tokens") != 0 && strcmp(argv[1], "sequences") != 0 &&
                     strcmp(argv[1], "tolerance") != 0)) {
        fprintf(stderr,
                "usage: calibrate_distributional tokens|sequences|tolerance [REPLICATES]\n");
        return 2;
    }
    g_group = argv[1];
    if (argc > 2) {
        g_reps = (int32_t)strtol(argv[2], NULL, 10);
        if (g_reps < 10) {
            fprintf(stderr, "calibrate_distributional: at least 10 replicates\n");
            return 2;
        }
    }
    assay_stats_init();
    const struct CMUnitTest tokens[] = {
        cmocka_unit_test(test_null_calibration),
        cmocka_unit_test(test_power_calibration),
    };
    const struct CMUnitTest sequences[] = {
        cmocka_unit_test(test_null_calibration),
    };
    const struct CMUnitTest tolerance[] = {
        cmocka_unit_test(test_tolerance_calibration),
    };
    if (strcmp(g_group, "tokens") == 0) {
        return cmocka_run_group_tests(tokens, NULL, NULL);
    }
    if (strcmp(g_group, "tolerance") == 0) {
        return cmocka_run_group_tests(tolerance, NULL, NULL);
    }
    return cmocka_run_group_tests(sequences, NULL, NULL);
}
