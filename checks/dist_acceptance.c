/*
 * dist_acceptance.c - speculative decoding's acceptance against its theory
 * (assay_dist_acceptance, distributional.h): each tested proposal's exact
 * acceptance probability from the target's and the draft's oracles, and
 * the indicators tested per draft position and by their randomised PIT.
 */
#include "distributional.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/rng.h"
#include "../oracles/oracle.h"
#include "distributional_internal.h"
#include "evidence.h"
#include "shard.h"
#include "stats.h"

/* ---- speculative acceptance --------------------------------------------- */

static int by_request(const void *a, const void *b)
{
    const struct round_rec *x = a, *y = b;
    if (x->req != y->req) {
        return x->req < y->req ? -1 : 1;
    }
    return (x->index > y->index) - (x->index < y->index);
}

#define MAX_STAGES 64

/* The last draft position of a round whose proposal was tested: every
 * accepted one and the first rejected, or all when none was rejected. */
static int32_t last_tested(const struct round_rec *rr)
{
    return rr->accepted < rr->drafted ? rr->accepted : rr->drafted - 1;
}

struct stage {
    int64_t n;      /* proposals tested at this draft position */
    double accepted;
    double beta;    /* sum of theoretical acceptance probabilities */
    double var;     /* sum of beta (1 - beta) */
};

/* What assay_dist_acceptance carries from one phase to the next: the
 * buffers and oracles, the samples and their rounds, which rounds can be
 * tested, the oracle's beta of each tested proposal, the tallies by draft
 * position and their grouped chi-squared. */
struct acc_check {
    const struct assay_dist_params *p;
    struct assay_check_result *res;
    int32_t v, plen, len;
    int32_t *prompts, *seq;
    double *rows_t, *rows_d, *pd, *qd;
    struct assay_oracle *ot, *od;
    struct sample_set ss;
    uint8_t *valid;   /* (n_rounds) the round can be tested */
    double *rec_beta; /* (n_rounds, max_drafted) beta of each tested proposal */
    double *u;        /* the indicators' randomised PIT */
    int64_t n_u, n_bad_rounds;
    int32_t max_drafted;
    char bad_round[200];
    struct stage stages[MAX_STAGES];
    double x2, tot_acc, tot_beta;
    int64_t n_tests;
    int32_t df;
};

/* The buffers and the two oracles (target and draft). On failure res is
 * ERROR with the reason. */
static enum assay_status acceptance_setup(struct acc_check *c, const struct assay_model *model,
                                          const struct assay_model *draft)
{
    const struct assay_dist_params *p = c->p;
    const int32_t v = c->v, plen = c->plen, len = c->len;
    c->seq = assay_malloc(sizeof(int32_t) * (size_t)(plen + len));
    c->rows_t = assay_malloc(sizeof(double) * (size_t)(plen + len) * (size_t)v);
    c->rows_d = assay_malloc(sizeof(double) * (size_t)(plen + len) * (size_t)v);
    c->pd = assay_malloc(sizeof(double) * (size_t)v);
    c->qd = assay_malloc(sizeof(double) * (size_t)v);
    if (c->seq == NULL || c->rows_t == NULL || c->rows_d == NULL || c->pd == NULL ||
        c->qd == NULL || assay_dist_make_prompts(p, &c->prompts) != ASSAY_OK) {
        assay_dist_set_error(c->res, ASSAY_ERR_NOMEM, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    enum assay_status st = assay_oracle_init(&c->ot, model, plen + len);
    if (st == ASSAY_OK) {
        st = assay_oracle_init(&c->od, draft, plen + len);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(c->res, st,
                             "the oracle could not start (prompt + len beyond the context?)");
    }
    return st;
}

/* Which rounds can be tested (every rank, every round: no oracle), into
 * c->valid; the inconsistent ones counted, the first described. */
static void mark_testable_rounds(struct acc_check *c)
{
    const struct sample_set *ss = &c->ss;
    const int32_t len = c->len;
    for (int64_t r = 0; r < ss->n_rounds; r++) {
        const struct round_rec *rr = &ss->rounds[r];
        const int32_t *t = ss->tokens + rr->req * len;
        bool complete = rr->req >= 0 && rr->req < c->p->n;
        for (int32_t j = 0; j < len && complete; j++) {
            complete = t[j] >= 0 && t[j] < c->v;
        }
        if (!complete) {
            continue; /* counted among the bad deliveries */
        }
        int32_t last = last_tested(rr);
        if (rr->drafted < 1 || rr->drafted > MAX_STAGES || rr->accepted < 0 ||
            rr->accepted > rr->drafted || rr->index < 0 || rr->index + last >= len) {
            if (c->n_bad_rounds++ == 0) {
                snprintf(c->bad_round, sizeof c->bad_round,
                         "request %lld: a round at output position %d with %d drafted and %d "
                         "accepted",
                         (long long)rr->req, (int)rr->index, (int)rr->drafted, (int)rr->accepted);
            }
            continue;
        }
        c->valid[r] = 1;
        c->max_drafted = rr->drafted > c->max_drafted ? rr->drafted : c->max_drafted;
    }
}

/* The oracle's beta of each tested proposal of this rank's requests, at
 * (round, draft position) in c->rec_beta. ASSAY_OK, or the oracle's
 * status. */
static enum assay_status oracle_betas(struct acc_check *c)
{
    const struct assay_dist_params *p = c->p;
    const struct sample_set *ss = &c->ss;
    const int32_t v = c->v, plen = c->plen, len = c->len;
    enum assay_status st = ASSAY_OK;
    int64_t loaded = -1;
    for (int64_t r = 0; r < ss->n_rounds && st == ASSAY_OK; r++) {
        const struct round_rec *rr = &ss->rounds[r];
        if (!c->valid[r] || !assay_shard_mine(rr->req)) {
            continue;
        }
        const int32_t *t = ss->tokens + rr->req * len;
        int32_t last = last_tested(rr);
        if (loaded != rr->req) {
            memcpy(c->seq, c->prompts + (rr->req % p->n_prompts) * plen,
                   sizeof(int32_t) * (size_t)plen);
            memcpy(c->seq + plen, t, sizeof(int32_t) * (size_t)len);
            st = assay_oracle_logits(c->ot, c->seq, plen + len - 1, c->rows_t);
            if (st == ASSAY_OK) {
                st = assay_oracle_logits(c->od, c->seq, plen + len - 1, c->rows_d);
            }
            loaded = rr->req;
        }
        /* Proposal j was tested iff proposals 0..j-1 were accepted; its
         * context is then the engine's output up to index + j. */
        for (int32_t j = 0; j <= last && st == ASSAY_OK; j++) {
            int64_t row = (int64_t)(plen - 1 + rr->index + j) * v;
            st = assay_oracle_distribution(c->rows_t + row, v, &p->sampling, p->order, c->pd,
                                           NULL);
            if (st == ASSAY_OK) {
                st = assay_oracle_distribution(c->rows_d + row, v, &p->sampling, p->order, c->qd,
                                               NULL);
            }
            if (st != ASSAY_OK) {
                break;
            }
            double beta = 0.0;
            for (int32_t x = 0; x < v; x++) {
                beta += c->pd[x] < c->qd[x] ? c->pd[x] : c->qd[x];
            }
            c->rec_beta[r * c->max_drafted + j] = beta > 1.0 ? 1.0 : beta;
        }
    }
    return st;
}

/* Every rank, in the one process's order: the sums by draft position
 * (c->stages) and the indicators' randomised PIT (c->u). */
static void tally_stages(struct acc_check *c)
{
    const uint64_t v_seed = assay_seed_derive(c->p->seed, "acceptance-v");
    for (int64_t r = 0; r < c->ss.n_rounds; r++) {
        const struct round_rec *rr = &c->ss.rounds[r];
        if (!c->valid[r]) {
            continue;
        }
        int32_t last = last_tested(rr);
        for (int32_t j = 0; j <= last; j++) {
            double beta = c->rec_beta[r * c->max_drafted + j];
            bool acc = j < rr->accepted;
            struct stage *sg = &c->stages[j];
            sg->n++;
            sg->accepted += acc ? 1.0 : 0.0;
            sg->beta += beta;
            sg->var += beta * (1.0 - beta);
            double vv = assay_rng_u01(v_seed, (uint64_t)(rr->req * c->len + rr->index + j),
                                      ACCEPT_V_PURPOSE);
            c->u[c->n_u++] = acc ? vv * beta : beta + vv * (1.0 - beta);
        }
    }
}

/* Group draft positions from the last down until each group's variance
 * reaches 5, so the normal approximation of every term holds: the
 * chi-squared of the groups (c->x2 on c->df) and the totals. */
static void group_stages(struct acc_check *c)
{
    struct stage grp = {0, 0, 0, 0}, closed = {0, 0, 0, 0};
    bool have_closed = false;
    for (int32_t j = c->max_drafted - 1; j >= 0; j--) {
        const struct stage *sg = &c->stages[j];
        grp.n += sg->n;
        grp.accepted += sg->accepted;
        grp.beta += sg->beta;
        grp.var += sg->var;
        c->n_tests += sg->n;
        c->tot_acc += sg->accepted;
        c->tot_beta += sg->beta;
        if (grp.var >= 5.0) {
            if (have_closed) {
                c->x2 +=
                    (closed.accepted - closed.beta) * (closed.accepted - closed.beta) / closed.var;
                c->df++;
            }
            closed = grp;
            have_closed = true;
            memset(&grp, 0, sizeof grp);
        }
    }
    if (have_closed) {
        closed.accepted += grp.accepted; /* a small remainder joins the last group */
        closed.beta += grp.beta;
        closed.var += grp.var;
        c->x2 += (closed.accepted - closed.beta) * (closed.accepted - closed.beta) / closed.var;
        c->df++;
    }
}

/* The rate test and the KS of the PIT, combined, into res and parts; the
 * findings and the summary. ASSAY_OK, or the tests' status (res is then
 * ERROR). */
static enum assay_status judge_acceptance(struct acc_check *c, struct assay_dist_parts *parts)
{
    const struct assay_dist_params *p = c->p;
    struct assay_check_result *res = c->res;
    double p_rate = NAN, d_ks = NAN, p_ks = NAN, min_tv = NAN;
    p_rate = gsl_cdf_chisq_Q(c->x2, (double)c->df);
    enum assay_status st = assay_ks_uniform(c->u, (size_t)c->n_u, &d_ks, &p_ks);
    if (st == ASSAY_OK) {
        assay_evidence_pit(&res->evidence, c->u, c->n_u, d_ks);
        st = assay_min_detectable_tv(p->alpha / 2, c->df, p->power, (double)c->n_tests, &min_tv);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the acceptance tests failed");
        return st;
    }
    double m = p_rate < p_ks ? p_rate : p_ks;
    double p_comb = 2 * m < 1.0 ? 2 * m : 1.0;
    if (parts != NULL) {
        parts->n = 2;
        parts->p[0] = p_rate;
        parts->name[0] = "X2";
        parts->p[1] = p_ks;
        parts->name[1] = "KS";
    }
    res->alpha = p->alpha;
    res->power = p->power;
    res->statistic = c->x2;
    res->df = c->df;
    res->p_value = p_comb;
    res->min_tv = min_tv;
    res->n = c->n_tests;
    char hist[160] = "";
    size_t hl = 0;
    for (int32_t j = 0; j < c->max_drafted && hl < sizeof hist - 1; j++) {
        hl += (size_t)snprintf(hist + hl, sizeof hist - hl, "%s%.0f/%.1f", j > 0 ? " " : "",
                               c->stages[j].accepted, c->stages[j].beta);
    }
    res->statistic_fired = p_comb <= p->alpha;
    res->rule_fired = c->ss.n_bad > 0 || c->n_bad_rounds > 0;
    if (c->ss.n_bad > 0) {
        assay_check_fail(res, "%lld sequences delivered wrongly; first: %s",
                         (long long)c->ss.n_bad, c->ss.bad);
    } else if (c->n_bad_rounds > 0) {
        assay_check_fail(res, "%lld speculative rounds are inconsistent with the tokens; first: %s",
                         (long long)c->n_bad_rounds, c->bad_round);
    } else if (p_comb <= p->alpha) {
        assay_check_fail(
            res,
            "acceptance departs from beta = sum min(p, q): accepted/expected by draft "
            "position %s; X2 %.1f on %d df (p %.3g), KS of the indicator PIT D %.4f (p %.3g)",
            hist, c->x2, (int)c->df, p_rate, d_ks, p_ks);
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld p %.3g min-TV %.4f | accepted %.0f of %lld tested, theory %.1f; "
             "by draft position %s; X2 %.1f df %d p %.3g; KS p %.3g",
             p->alpha, (long long)c->n_tests, p_comb, min_tv, c->tot_acc, (long long)c->n_tests,
             c->tot_beta, hist, c->x2, (int)c->df, p_rate, p_ks);
    return ASSAY_OK;
}

enum assay_status assay_dist_acceptance(const struct assay_adapter *a,
                                        const struct assay_model *model,
                                        const struct assay_model *draft,
                                        const struct assay_dist_params *p,
                                        struct assay_check_result *res,
                                        struct assay_dist_parts *parts)
{
    int64_t t0 = assay_now_ns();
    char why[400];
    enum assay_status st = assay_dist_check_params(p, why, sizeof why);
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, why);
        return st;
    }
    if (draft == NULL || draft->cfg.vocab != model->cfg.vocab) {
        assay_dist_set_error(res, ASSAY_ERR_INVALID, "needs the draft's weights, with the target's vocabulary");
        return ASSAY_ERR_INVALID;
    }
    assay_stats_init();
    struct acc_check c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.res = res;
    c.v = model->cfg.vocab;
    c.plen = p->prompt_len;
    c.len = p->out_len;
    st = acceptance_setup(&c, model, draft);
    if (st != ASSAY_OK) {
        goto out;
    }
    struct request_source src = {c.prompts, p->n_prompts, c.plen, p->sampling,
                                 assay_seed_derive(p->seed, "requests")};
    st = assay_dist_draw_samples(a, &src, p->n, c.len, p->window, true, &c.ss, why, sizeof why);
    if (st != ASSAY_OK) {
        assay_dist_draw_failed(res, &c.ss, st, why);
        goto out;
    }
    assay_dist_judge_delivery(res, &c.ss, "sequences");
    if (c.ss.n_rounds == 0) {
        assay_check_skip(
            res, "the engine reported no speculative round (SPEC_ROUND events): nothing to test");
        goto out;
    }
    qsort(c.ss.rounds, (size_t)c.ss.n_rounds, sizeof *c.ss.rounds, by_request);
    c.u = assay_malloc(sizeof(double) * (size_t)c.ss.n_rounds * (size_t)(MAX_STAGES + 1));
    c.valid = assay_calloc((size_t)c.ss.n_rounds, 1);
    if (c.u == NULL || c.valid == NULL) {
        st = ASSAY_ERR_NOMEM;
        assay_dist_set_error(res, st, "out of memory");
        goto out;
    }
    mark_testable_rounds(&c);
    /* The oracle's beta of each tested proposal, this rank's requests
     * only, at (round, draft position); the ranks' records added. */
    const int64_t cells = c.ss.n_rounds * (int64_t)(c.max_drafted > 0 ? c.max_drafted : 1);
    c.rec_beta = assay_calloc((size_t)cells, sizeof(double));
    if (c.rec_beta == NULL) {
        st = ASSAY_ERR_NOMEM;
        assay_dist_set_error(res, st, "out of memory");
        goto out;
    }
    st = oracle_betas(&c);
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the oracle failed");
        goto out;
    }
    st = assay_shard_allreduce(c.rec_beta, cells, ASSAY_SHARD_F64, ASSAY_SHARD_SUM);
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the ranks could not bring the acceptance probabilities together");
        goto out;
    }
    tally_stages(&c);
    group_stages(&c);
    res->n_requests = p->n;
    res->n_tokens = p->n * c.len;
    if (c.df == 0 || c.n_u < 2) {
        st = ASSAY_ERR_INVALID;
        assay_dist_set_error(res, st, "too few tested proposals for the acceptance tests (raise n or len)");
        goto out;
    }
    st = judge_acceptance(&c, parts);
out:
    assay_dist_sample_set_free(&c.ss);
    assay_oracle_free(c.ot);
    assay_oracle_free(c.od);
    assay_free(c.rec_beta);
    assay_free(c.valid);
    assay_free(c.prompts);
    assay_free(c.seq);
    assay_free(c.rows_t);
    assay_free(c.rows_d);
    assay_free(c.pd);
    assay_free(c.qd);
    assay_free(c.u);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}

