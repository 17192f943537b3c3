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
    const int32_t v = model->cfg.vocab, plen = p->prompt_len, len = p->out_len;
    int32_t *prompts = NULL;
    int32_t *seq = assay_malloc(sizeof(int32_t) * (size_t)(plen + len));
    double *rows_t = assay_malloc(sizeof(double) * (size_t)(plen + len) * (size_t)v);
    double *rows_d = assay_malloc(sizeof(double) * (size_t)(plen + len) * (size_t)v);
    double *pd = assay_malloc(sizeof(double) * (size_t)v);
    double *qd = assay_malloc(sizeof(double) * (size_t)v);
    const uint64_t v_seed = assay_seed_derive(p->seed, "acceptance-v");
    double *rec_beta = NULL;
    uint8_t *valid = NULL;
    struct assay_oracle *ot = NULL, *od = NULL;
    double *u = NULL;
    struct sample_set ss;
    memset(&ss, 0, sizeof ss);
    struct stage stages[MAX_STAGES];
    memset(stages, 0, sizeof stages);
    if (seq == NULL || rows_t == NULL || rows_d == NULL || pd == NULL || qd == NULL ||
        assay_dist_make_prompts(p, &prompts) != ASSAY_OK) {
        st = ASSAY_ERR_NOMEM;
        assay_dist_set_error(res, st, "out of memory");
        goto out;
    }
    st = assay_oracle_init(&ot, model, plen + len);
    if (st == ASSAY_OK) {
        st = assay_oracle_init(&od, draft, plen + len);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the oracle could not start (prompt + len beyond the context?)");
        goto out;
    }
    struct request_source src = {prompts, p->n_prompts, plen, p->sampling,
                                 assay_seed_derive(p->seed, "requests")};
    st = assay_dist_draw_samples(a, &src, p->n, len, p->window, true, &ss, why, sizeof why);
    if (st != ASSAY_OK) {
        assay_dist_draw_failed(res, &ss, st, why);
        goto out;
    }
    assay_dist_judge_delivery(res, &ss, "sequences");
    if (ss.n_rounds == 0) {
        assay_check_skip(
            res, "the engine reported no speculative round (SPEC_ROUND events): nothing to test");
        goto out;
    }
    qsort(ss.rounds, (size_t)ss.n_rounds, sizeof *ss.rounds, by_request);
    u = assay_malloc(sizeof(double) * (size_t)ss.n_rounds * (size_t)(MAX_STAGES + 1));
    valid = assay_calloc((size_t)ss.n_rounds, 1);
    if (u == NULL || valid == NULL) {
        st = ASSAY_ERR_NOMEM;
        assay_dist_set_error(res, st, "out of memory");
        goto out;
    }
    /* Which rounds can be tested (every rank, every round: no oracle). */
    int64_t n_u = 0, n_bad_rounds = 0, loaded = -1;
    int32_t max_drafted = 0;
    char bad_round[200] = "";
    for (int64_t r = 0; r < ss.n_rounds; r++) {
        const struct round_rec *rr = &ss.rounds[r];
        const int32_t *t = ss.tokens + rr->req * len;
        bool complete = rr->req >= 0 && rr->req < p->n;
        for (int32_t j = 0; j < len && complete; j++) {
            complete = t[j] >= 0 && t[j] < v;
        }
        if (!complete) {
            continue; /* counted among the bad deliveries */
        }
        int32_t last = last_tested(rr);
        if (rr->drafted < 1 || rr->drafted > MAX_STAGES || rr->accepted < 0 ||
            rr->accepted > rr->drafted || rr->index < 0 || rr->index + last >= len) {
            if (n_bad_rounds++ == 0) {
                snprintf(bad_round, sizeof bad_round,
                         "request %lld: a round at output position %d with %d drafted and %d "
                         "accepted",
                         (long long)rr->req, (int)rr->index, (int)rr->drafted, (int)rr->accepted);
            }
            continue;
        }
        valid[r] = 1;
        max_drafted = rr->drafted > max_drafted ? rr->drafted : max_drafted;
    }
    /* The oracle's beta of each tested proposal, this rank's requests
     * only, at (round, draft position); the ranks' records added. */
    const int64_t cells = ss.n_rounds * (int64_t)(max_drafted > 0 ? max_drafted : 1);
    rec_beta = assay_calloc((size_t)cells, sizeof(double));
    if (rec_beta == NULL) {
        st = ASSAY_ERR_NOMEM;
        assay_dist_set_error(res, st, "out of memory");
        goto out;
    }
    for (int64_t r = 0; r < ss.n_rounds && st == ASSAY_OK; r++) {
        const struct round_rec *rr = &ss.rounds[r];
        if (!valid[r] || !assay_shard_mine(rr->req)) {
            continue;
        }
        const int32_t *t = ss.tokens + rr->req * len;
        int32_t last = last_tested(rr);
        if (loaded != rr->req) {
            memcpy(seq, prompts + (rr->req % p->n_prompts) * plen, sizeof(int32_t) * (size_t)plen);
            memcpy(seq + plen, t, sizeof(int32_t) * (size_t)len);
            st = assay_oracle_logits(ot, seq, plen + len - 1, rows_t);
            if (st == ASSAY_OK) {
                st = assay_oracle_logits(od, seq, plen + len - 1, rows_d);
            }
            loaded = rr->req;
        }
        /* Proposal j was tested iff proposals 0..j-1 were accepted; its
         * context is then the engine's output up to index + j. */
        for (int32_t j = 0; j <= last && st == ASSAY_OK; j++) {
            int64_t row = (int64_t)(plen - 1 + rr->index + j) * v;
            st = assay_oracle_distribution(rows_t + row, v, &p->sampling, p->order, pd, NULL);
            if (st == ASSAY_OK) {
                st = assay_oracle_distribution(rows_d + row, v, &p->sampling, p->order, qd, NULL);
            }
            if (st != ASSAY_OK) {
                break;
            }
            double beta = 0.0;
            for (int32_t x = 0; x < v; x++) {
                beta += pd[x] < qd[x] ? pd[x] : qd[x];
            }
            rec_beta[r * max_drafted + j] = beta > 1.0 ? 1.0 : beta;
        }
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the oracle failed");
        goto out;
    }
    st = assay_shard_allreduce(rec_beta, cells, ASSAY_SHARD_F64, ASSAY_SHARD_SUM);
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the ranks could not bring the acceptance probabilities together");
        goto out;
    }
    /* Every rank, in the one process's order: the sums and the PIT. */
    for (int64_t r = 0; r < ss.n_rounds; r++) {
        const struct round_rec *rr = &ss.rounds[r];
        if (!valid[r]) {
            continue;
        }
        int32_t last = last_tested(rr);
        for (int32_t j = 0; j <= last; j++) {
            double beta = rec_beta[r * max_drafted + j];
            bool acc = j < rr->accepted;
            struct stage *sg = &stages[j];
            sg->n++;
            sg->accepted += acc ? 1.0 : 0.0;
            sg->beta += beta;
            sg->var += beta * (1.0 - beta);
            double vv = assay_rng_u01(v_seed, (uint64_t)(rr->req * len + rr->index + j),
                                      ACCEPT_V_PURPOSE);
            u[n_u++] = acc ? vv * beta : beta + vv * (1.0 - beta);
        }
    }
    /* Group draft positions from the last down until each group's variance
     * reaches 5, so the normal approximation of every term holds. */
    double x2 = 0.0, tot_acc = 0.0, tot_beta = 0.0;
    int64_t n_tests = 0;
    int32_t df = 0;
    struct stage grp = {0, 0, 0, 0}, closed = {0, 0, 0, 0};
    bool have_closed = false;
    for (int32_t j = max_drafted - 1; j >= 0; j--) {
        grp.n += stages[j].n;
        grp.accepted += stages[j].accepted;
        grp.beta += stages[j].beta;
        grp.var += stages[j].var;
        n_tests += stages[j].n;
        tot_acc += stages[j].accepted;
        tot_beta += stages[j].beta;
        if (grp.var >= 5.0) {
            if (have_closed) {
                x2 += (closed.accepted - closed.beta) * (closed.accepted - closed.beta) / closed.var;
                df++;
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
        x2 += (closed.accepted - closed.beta) * (closed.accepted - closed.beta) / closed.var;
        df++;
    }
    res->n_requests = p->n;
    res->n_tokens = p->n * len;
    if (df == 0 || n_u < 2) {
        st = ASSAY_ERR_INVALID;
        assay_dist_set_error(res, st, "too few tested proposals for the acceptance tests (raise n or len)");
        goto out;
    }
    double p_rate = NAN, d_ks = NAN, p_ks = NAN, min_tv = NAN;
    p_rate = gsl_cdf_chisq_Q(x2, (double)df);
    st = assay_ks_uniform(u, (size_t)n_u, &d_ks, &p_ks);
    if (st == ASSAY_OK) {
        assay_evidence_pit(&res->evidence, u, n_u, d_ks);
        st = assay_min_detectable_tv(p->alpha / 2, df, p->power, (double)n_tests, &min_tv);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the acceptance tests failed");
        goto out;
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
    res->statistic = x2;
    res->df = df;
    res->p_value = p_comb;
    res->min_tv = min_tv;
    res->n = n_tests;
    char hist[160] = "";
    size_t hl = 0;
    for (int32_t j = 0; j < max_drafted && hl < sizeof hist - 1; j++) {
        hl += (size_t)snprintf(hist + hl, sizeof hist - hl, "%s%.0f/%.1f", j > 0 ? " " : "",
                               stages[j].accepted, stages[j].beta);
    }
    res->statistic_fired = p_comb <= p->alpha;
    res->rule_fired = ss.n_bad > 0 || n_bad_rounds > 0;
    if (ss.n_bad > 0) {
        assay_check_fail(res, "%lld sequences delivered wrongly; first: %s", (long long)ss.n_bad,
                         ss.bad);
    } else if (n_bad_rounds > 0) {
        assay_check_fail(res, "%lld speculative rounds are inconsistent with the tokens; first: %s",
                         (long long)n_bad_rounds, bad_round);
    } else if (p_comb <= p->alpha) {
        assay_check_fail(
            res,
            "acceptance departs from beta = sum min(p, q): accepted/expected by draft "
            "position %s; X2 %.1f on %d df (p %.3g), KS of the indicator PIT D %.4f (p %.3g)",
            hist, x2, (int)df, p_rate, d_ks, p_ks);
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld p %.3g min-TV %.4f | accepted %.0f of %lld tested, theory %.1f; "
             "by draft position %s; X2 %.1f df %d p %.3g; KS p %.3g",
             p->alpha, (long long)n_tests, p_comb, min_tv, tot_acc, (long long)n_tests, tot_beta,
             hist, x2, (int)df, p_rate, p_ks);
out:
    assay_dist_sample_set_free(&ss);
    assay_oracle_free(ot);
    assay_oracle_free(od);
    assay_free(rec_beta);
    assay_free(valid);
    assay_free(prompts);
    assay_free(seq);
    assay_free(rows_t);
    assay_free(rows_d);
    assay_free(pd);
    assay_free(qd);
    assay_free(u);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}

