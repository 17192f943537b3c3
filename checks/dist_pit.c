/*
 * dist_pit.c - the randomised probability integral transform over whole
 * sequences (assay_dist_pit, distributional.h): one oracle pass per
 * sequence, teacher-forced on the engine's own tokens, and the PIT values
 * tested for uniformity, pooled and within the oracle's entropy groups.
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

/* A PIT record: a boundary decision, a token of oracle probability 0, and
 * (REC_TWIN + g) a PIT value of 1 of entropy group g for a token an exact
 * tie at the cut removes (a tie mode, distributional.h). */
#define REC_BOUNDARY 10
#define REC_IMPOSSIBLE 11
#define REC_TWIN 20

/* ---- the randomised PIT over sequences ---------------------------------- */

/* F(x-) of p in the order of descending probability, lower id first on
 * ties. */
static double cdf_before(const double *p, int32_t v, int32_t x)
{
    double f = 0.0;
    for (int32_t y = 0; y < v; y++) {
        if (p[y] > p[x] || (p[y] == p[x] && y < x)) {
            f += p[y];
        }
    }
    return f;
}

/*
 * Whether a token of oracle probability 0 at this position lies past a
 * top-k/top-p cut that the tolerances could move (boundary_safe) and within
 * the reach of that move: the first token past the cut, or any token the
 * cuts keep once loosened by the tolerances (assay_dist_widened_kept).
 * With fp32 rounding's tolerances that is the first token past the cut. A
 * cut that the tolerances cannot move keeps its hard rule.
 */
static bool at_boundary(const struct assay_dist_params *p, const struct assay_oracle_dist_info *inf,
                        const double *row, int32_t v, int32_t x, double *scratch)
{
    bool safe = true;
    if (assay_dist_boundary_safe(row, v, p, inf, scratch, &safe) != ASSAY_OK || safe) {
        return false;
    }
    int32_t rank = assay_dist_logit_rank(row, v, x);
    return rank == inf->n_kept || rank < assay_dist_widened_kept(row, v, p, scratch);
}

/* Chi-squared of u[0..n) against Uniform(0,1) on `bins_n` equal bins
 * (pooled where an expected count falls below 5), at level alpha. */
static enum assay_status binned_uniformity(const double *u, int64_t n, int32_t bins_n,
                                           double alpha, double power,
                                           struct assay_test_result *chi)
{
    enum assay_status st = ASSAY_OK;
    double *prob = assay_malloc(sizeof(double) * (size_t)bins_n);
    int64_t *counts = assay_calloc((size_t)bins_n, sizeof(int64_t));
    struct assay_gof_bins *bins = NULL;
    if (prob == NULL || counts == NULL) {
        st = ASSAY_ERR_NOMEM;
    }
    if (st == ASSAY_OK) {
        for (int32_t b = 0; b < bins_n; b++) {
            prob[b] = 1.0 / bins_n;
        }
        for (int64_t i = 0; i < n; i++) {
            int32_t b = (int32_t)(u[i] * bins_n);
            counts[b < bins_n ? b : bins_n - 1]++;
        }
        st = assay_gof_bins_make(prob, bins_n, (double)n, 5.0, &bins);
    }
    if (st == ASSAY_OK) {
        st = assay_gof_test(bins, counts, alpha, power, chi);
    }
    assay_gof_bins_free(bins);
    assay_free(prob);
    assay_free(counts);
    return st;
}

/* Shannon entropy (nats) of a distribution over v tokens. */
static double entropy_of(const double *pd, int32_t v)
{
    double h = 0.0;
    for (int32_t x = 0; x < v; x++) {
        h -= pd[x] > 0.0 ? pd[x] * log(pd[x]) : 0.0;
    }
    return h;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sequences of the pilot that fixes the entropy groups: one per 64 of the
 * check's, at most one per prompt, at least one. */
static int32_t pilot_sequences(const struct assay_dist_params *p)
{
    int64_t m = p->n / 64;
    m = m < p->n_prompts ? m : p->n_prompts;
    return m < 1 ? 1 : (int32_t)m;
}

/*
 * The edges of the conditional test's entropy groups, fixed before any of
 * the engine's tokens is seen: the oracle samples pilot_sequences(p)
 * sequences of its own from the check's prompts (a seeded mt19937 of its
 * own), and the edges are the 1/G, ..., (G-1)/G quantiles of its processed
 * distributions' entropies along them. seq (prompt + len) and rows
 * ((prompt + len) x v), pd (v) and h (pilot x len) are scratch.
 */
static enum assay_status entropy_edges(struct assay_oracle *o, const struct assay_dist_params *p,
                                       const int32_t *prompts, int32_t v, int32_t *seq,
                                       double *rows, double *pd, double *h, double *edges)
{
    const int32_t plen = p->prompt_len, len = p->out_len, m = pilot_sequences(p);
    gsl_rng *rng = assay_dist_make_rng(assay_seed_derive(p->seed, "pit-groups"));
    if (rng == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    enum assay_status st = ASSAY_OK;
    int64_t n_h = 0;
    for (int32_t s = 0; s < m && st == ASSAY_OK; s++) {
        memcpy(seq, prompts + (int64_t)(s % p->n_prompts) * plen, sizeof(int32_t) * (size_t)plen);
        for (int32_t j = 0; j < len && st == ASSAY_OK; j++) {
            st = assay_oracle_logits(o, seq, plen + j, rows);
            if (st == ASSAY_OK) {
                st = assay_oracle_distribution(rows + (int64_t)(plen + j - 1) * v, v, &p->sampling,
                                               p->order, pd, NULL);
            }
            if (st != ASSAY_OK) {
                break;
            }
            h[n_h++] = entropy_of(pd, v);
            double r = gsl_rng_uniform(rng), cum = 0.0;
            int32_t x = -1;
            for (int32_t y = 0; y < v; y++) {
                if (pd[y] > 0.0) {
                    x = y; /* the last possible token takes rounding's remainder */
                    cum += pd[y];
                    if (r < cum) {
                        break;
                    }
                }
            }
            seq[plen + j] = x;
        }
    }
    gsl_rng_free(rng);
    if (st != ASSAY_OK) {
        return st;
    }
    qsort(h, (size_t)n_h, sizeof(double), by_value);
    for (int32_t g = 1; g < ASSAY_DIST_PIT_GROUPS; g++) {
        edges[g - 1] = h[(n_h * g) / ASSAY_DIST_PIT_GROUPS];
    }
    return ASSAY_OK;
}

/*
 * The conditional test: the PIT values u[0..n) split by group[i] into
 * ASSAY_DIST_PIT_GROUPS groups, each tested for uniformity by chi-squared
 * on ASSAY_DIST_PIT_GROUP_BINS equal bins (pooled to expected counts of at
 * least 5; a group of fewer than 10 values adds nothing), and the sum of
 * the groups' X^2 referred to chi-squared on the summed df. Given the
 * group sizes, each group's u are i.i.d. U(0,1) under a correct engine
 * (a group is a function of the position's context, not of its token), so
 * the sum is chi-squared. min_tv: the TV of one group's PIT distribution
 * detected with `power` at level alpha, for the smallest tested group.
 * scratch holds n values. out->degenerate when no group could be tested.
 */
static enum assay_status conditional_uniformity(const double *u, const int8_t *group, int64_t n,
                                                double alpha, double power, double *scratch,
                                                struct assay_test_result *out,
                                                int64_t n_group[ASSAY_DIST_PIT_GROUPS])
{
    memset(out, 0, sizeof *out);
    out->alpha = alpha;
    out->power = power;
    out->statistic = 0.0;
    int64_t smallest = 0;
    enum assay_status st = ASSAY_OK;
    for (int32_t g = 0; g < ASSAY_DIST_PIT_GROUPS && st == ASSAY_OK; g++) {
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++) {
            if (group[i] == g) {
                scratch[m++] = u[i];
            }
        }
        n_group[g] = m;
        if (m < 10) {
            continue;
        }
        struct assay_test_result chi;
        st = binned_uniformity(scratch, m, ASSAY_DIST_PIT_GROUP_BINS, alpha, power, &chi);
        if (st == ASSAY_OK && !chi.degenerate) {
            out->statistic += chi.statistic;
            out->df += chi.df;
            out->n_bins += chi.n_bins;
            out->n += m;
            smallest = smallest == 0 || m < smallest ? m : smallest;
        }
    }
    if (st != ASSAY_OK) {
        return st;
    }
    out->degenerate = out->df == 0;
    out->p_value = NAN;
    out->min_tv = NAN;
    if (!out->degenerate) {
        out->p_value = gsl_cdf_chisq_Q(out->statistic, out->df);
        out->n_eff = (double)smallest;
        st = assay_min_detectable_tv(alpha, out->df, power, (double)smallest, &out->min_tv);
    }
    return st;
}

/*
 * The PIT under a numerics budget: u[0..n_u) with their groups and, per
 * value, p->pit_bins - 1 allowances (one per grid point) and the
 * reference's TV in allow. Two tolerance tests (tolerance.h), each at
 * alpha / 2 and combined by Bonferroni: the pooled CDF distance on the
 * grid of p->pit_bins against the mean allowance at each grid point, and
 * the same within the entropy groups against each group's means, the
 * planned group size cells / groups. Fills res (verdict on
 * the statistic, figures, summary, the PIT evidence) and parts.
 */
static enum assay_status pit_tolerance(const struct assay_dist_params *p, const double *u,
                                       const int8_t *group, const double *allow, int64_t n_u,
                                       int64_t cells, struct assay_check_result *res,
                                       struct assay_dist_parts *parts, const double *edges)
{
    /* each grid point's budget: the mean allowance there, over all
     * positions and within each group */
    const int32_t per = p->pit_bins, gp = per - 1;
    double *budget = assay_calloc((size_t)gp * (ASSAY_DIST_PIT_GROUPS + 1), sizeof(double));
    if (budget == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    double *g_budget = budget + gp, ref = 0.0;
    int64_t g_n[ASSAY_DIST_PIT_GROUPS] = {0};
    for (int64_t i = 0; i < n_u; i++) {
        for (int32_t k = 0; k < gp; k++) {
            budget[k] += allow[i * per + k];
            g_budget[(int64_t)group[i] * gp + k] += allow[i * per + k];
        }
        ref += allow[i * per + gp];
        g_n[group[i]]++;
    }
    for (int32_t k = 0; k < gp; k++) {
        budget[k] = fmin(1.0, budget[k] / (double)n_u);
        for (int32_t g = 0; g < ASSAY_DIST_PIT_GROUPS; g++) {
            double *x = &g_budget[(int64_t)g * gp + k];
            *x = g_n[g] > 0 ? fmin(1.0, *x / (double)g_n[g]) : 0.0;
        }
    }
    struct assay_dist_budget b = p->budget;
    b.reference = ref / (double)n_u;
    b.boundary = NAN;
    struct assay_tolerance_result tm, tg;
    int32_t worst = -1;
    double d_ks = NAN;
    enum assay_status st =
        assay_cdf_tolerance(u, n_u, per, budget, p->alpha / 2, p->power, &tm);
    if (st == ASSAY_OK) {
        st = assay_cdf_tolerance_groups(u, group, n_u, ASSAY_DIST_PIT_GROUPS, g_budget,
                                        (double)cells / ASSAY_DIST_PIT_GROUPS, per,
                                        p->alpha / 2, p->power, &tg, &worst);
    }
    assay_free(budget);
    if (st == ASSAY_OK) {
        st = assay_ks_uniform(u, (size_t)n_u, &d_ks, NULL);
    }
    if (st != ASSAY_OK) {
        return st;
    }
    double p_marg = fmin(1.0, 2.0 * tm.p_value), p_ctx = fmin(1.0, 2.0 * tg.p_value);
    assay_dist_fill_tolerance(res, &tm, &b, "PIT CDF");
    res->alpha = p->alpha;
    res->p_value = fmin(p_marg, p_ctx);
    res->statistic_fired = res->p_value <= p->alpha;
    assay_evidence_pit(&res->evidence, u, n_u, d_ks);
    if (parts != NULL) {
        parts->n = 2;
        parts->p[0] = tm.p_value;
        parts->name[0] = "CDF distance beyond the budget";
        parts->p[1] = tg.p_value;
        parts->name[1] = "the same within entropy groups";
    }
    char groups[200];
    snprintf(groups, sizeof groups,
             "within %d entropy groups (edges %.3g, %.3g nats): the farthest, group %d, at "
             "%.4f against its budget %.4f, p %.3g",
             ASSAY_DIST_PIT_GROUPS, edges[0], edges[1], (int)worst, tg.distance, tg.budget,
             p_ctx);
    if (p_marg <= p->alpha) {
        assay_check_fail(res,
                         "the PIT values' CDF is %.4f from the uniform's (95%% interval %.4f to "
                         "%.4f), beyond the budget %.4f at that point (the mean of the positions' "
                         "allowances): p %.3g <= alpha %.0e; %s",
                         tm.distance, tm.ci_lo, tm.ci_hi, tm.budget, p_marg, p->alpha, groups);
    } else if (p_ctx <= p->alpha) {
        assay_check_fail(res,
                         "the PIT values are beyond the budget within the oracle's entropy "
                         "groups: %s <= alpha %.0e; the pooled distance alone passes (%.4f "
                         "against %.4f): a bias whose sign depends on the context",
                         groups, p->alpha, tm.distance, tm.budget);
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld p %.3g | PIT CDF distance %.4f [%.4f, %.4f] against its budget "
             "%.4f there (%s; the reference's mean TV %.4f), detects %.4f beyond it; by "
             "entropy p %.3g; T "
             "%.2g top-k %d top-p %.2g",
             p->alpha, (long long)n_u, res->p_value, tm.distance, tm.ci_lo, tm.ci_hi, tm.budget,
             p->budget.what != NULL ? p->budget.what : "the formats", b.reference,
             tm.min_excess, p_ctx, (double)p->sampling.temperature, (int)p->sampling.top_k,
             (double)p->sampling.top_p);
    return ASSAY_OK;
}

enum assay_status assay_dist_pit(const struct assay_adapter *a, const struct assay_model *model,
                                 const struct assay_dist_params *p, struct assay_check_result *res,
                                 struct assay_dist_parts *parts)
{
    int64_t t0 = assay_now_ns();
    char why[400];
    enum assay_status st = assay_dist_check_params(p, why, sizeof why);
    if (st == ASSAY_OK && p->budget.on && p->budget.along == NULL) {
        snprintf(why, sizeof why, "a numerics budget without its allowance per position");
        st = ASSAY_ERR_INVALID;
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, why);
        return st;
    }
    assay_stats_init();
    const int32_t v = model->cfg.vocab, plen = p->prompt_len, len = p->out_len;
    int32_t *prompts = NULL;
    int32_t *seq = assay_malloc(sizeof(int32_t) * (size_t)(plen + len));
    double *rows = assay_malloc(sizeof(double) * (size_t)(plen + len) * (size_t)v);
    double *pd = assay_malloc(sizeof(double) * (size_t)v);
    double *u_scratch = assay_malloc(sizeof(double) * (size_t)v);
    double *u = assay_malloc(sizeof(double) * (size_t)p->n * (size_t)len);
    double *u_group = assay_malloc(sizeof(double) * (size_t)p->n * (size_t)len);
    int8_t *group = assay_malloc(sizeof(int8_t) * (size_t)p->n * (size_t)len);
    double *h = assay_malloc(sizeof(double) * (size_t)pilot_sequences(p) * (size_t)len);
    /* V of output j of sequence i: counter i * len + j, so each value is
     * the same whichever rank draws it. */
    const uint64_t v_seed = assay_seed_derive(p->seed, "pit-v");
    const int64_t cells = p->n * len;
    int64_t *rec = assay_calloc((size_t)cells, sizeof(int64_t));
    double *rec_u = assay_calloc((size_t)cells, sizeof(double));
    /* Under a numerics budget: each position's allowances (one per grid
     * point) and the reference's TV there, `per` values recorded at the
     * position's index. */
    const bool tolerant = p->budget.on;
    const int32_t per = p->pit_bins; /* pit_bins - 1 allowances, the TV */
    double *rec_allow = tolerant ? assay_calloc((size_t)cells * (size_t)per, sizeof(double)) : NULL;
    double *allow_seq =
        tolerant ? assay_malloc(sizeof(double) * (size_t)(per + 2) * (size_t)len) : NULL;
    double *u_allow = tolerant ? assay_malloc(sizeof(double) * (size_t)per * (size_t)cells) : NULL;
    struct assay_oracle *o = NULL;
    struct sample_set ss;
    memset(&ss, 0, sizeof ss);
    struct assay_spec_tally tally = {0, 0, 0, NULL};
    if (seq == NULL || rows == NULL || pd == NULL || u == NULL || u_scratch == NULL ||
        rec == NULL || rec_u == NULL || u_group == NULL || group == NULL || h == NULL ||
        (tolerant && (rec_allow == NULL || allow_seq == NULL || u_allow == NULL)) ||
        assay_dist_make_prompts(p, &prompts) != ASSAY_OK) {
        st = ASSAY_ERR_NOMEM;
        assay_dist_set_error(res, st, "out of memory");
        goto out;
    }
    st = assay_oracle_init(&o, model, plen + len);
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the oracle could not start (prompt + len beyond the context?)");
        goto out;
    }
    double edges[ASSAY_DIST_PIT_GROUPS - 1];
    st = entropy_edges(o, p, prompts, v, seq, rows, pd, h, edges);
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the oracle's pilot for the entropy groups failed");
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
    /* Speculation's figures, and with bonus_only the positions tested: the
     * token after a round whose every proposal was accepted. */
    st = assay_dist_spec_tally(&ss, p->n, len, p->bonus_only, &tally);
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "out of memory");
        goto out;
    }
    if (p->bonus_only && tally.n_bonus == 0) {
        assay_check_skip(res, "%s", ss.n_rounds == 0
                                        ? "the engine reported no speculative round (SPEC_ROUND "
                                          "events): no token after an accepted round to test"
                                        : "no round had every proposal accepted: no token after "
                                          "an accepted round to test");
        goto out;
    }
    /* The oracle's passes, this rank's sequences only; each position's
     * outcome is recorded at its index (rec: 0 none, 1 + g a PIT value of
     * entropy group g, REC_BOUNDARY, REC_IMPOSSIBLE) and the ranks'
     * records are added together. */
    int64_t n_u = 0, n_boundary = 0, n_impossible = 0, first_key = INT64_MAX;
    char first[300] = "";
    for (int64_t i = 0; i < p->n && st == ASSAY_OK; i++) {
        const int32_t *t = ss.tokens + i * len;
        bool complete = true;
        for (int32_t j = 0; j < len; j++) {
            complete = complete && t[j] >= 0 && t[j] < v;
        }
        if (!complete || !assay_shard_mine(i)) {
            continue; /* incomplete: counted among the bad deliveries */
        }
        memcpy(seq, prompts + (i % p->n_prompts) * plen, sizeof(int32_t) * (size_t)plen);
        memcpy(seq + plen, t, sizeof(int32_t) * (size_t)len);
        /* Row plen-1+j predicts output j; the last token is never fed. */
        st = assay_oracle_logits(o, seq, plen + len - 1, rows);
        if (st == ASSAY_OK && tolerant) {
            st = p->budget.along(p->budget.ctx, p, seq, plen, len, rows, allow_seq,
                                 allow_seq + (int64_t)(per - 1) * len,
                                 allow_seq + (int64_t)per * len);
        }
        for (int32_t j = 0; j < len && st == ASSAY_OK; j++) {
            if (tally.bonus != NULL && !tally.bonus[i * len + j]) {
                continue;
            }
            const double *row = rows + (int64_t)(plen - 1 + j) * v;
            struct assay_oracle_dist_info inf;
            st = assay_oracle_distribution(row, v, &p->sampling, p->order, pd, &inf);
            if (st != ASSAY_OK) {
                break;
            }
            int32_t x = t[j];
            int64_t c = i * len + j;
            if (tolerant) {
                memcpy(rec_allow + c * per, allow_seq + (int64_t)j * (per - 1),
                       sizeof(double) * (size_t)(per - 1));
                rec_allow[c * per + per - 1] = allow_seq[(int64_t)(per - 1) * len + j];
            }
            /* Under a budget a token that a cut the formats can move keeps
             * is a PIT value of 1 (F(x-) = 1 past every kept token): it
             * counts against the engine in the CDF distance, which the
             * allowance bounds. */
            bool widened = false;
            if (tolerant && pd[x] == 0.0) {
                struct assay_dist_params pj = *p;
                pj.tol_top_p = fmax(p->tol_top_p, allow_seq[(int64_t)per * len + j]);
                widened = assay_dist_logit_rank(row, v, x) <
                          assay_dist_widened_kept(row, v, &pj, u_scratch);
            }
            /* With a tie mode, the token an exact tie at a safe cut
             * removes (the tie rule kept its twin of lower id) is no hard
             * failure and no boundary decision: a PIT value of 1, which
             * counts against the engine as under a budget. */
            bool twin = false;
            if (!tolerant && p->tie != ASSAY_DIST_TIE_NONE && pd[x] == 0.0) {
                struct assay_dist_tie_info ti;
                bool safe = false;
                if (assay_dist_cut_tie(row, pd, v, &ti) && row[x] == ti.logit) {
                    st = assay_dist_boundary_safe(row, v, p, &inf, u_scratch, &safe);
                }
                twin = st == ASSAY_OK && safe;
            }
            if (st != ASSAY_OK) {
                break;
            }
            if (pd[x] > 0.0 || widened || twin) {
                double vv = assay_rng_u01(v_seed, (uint64_t)c, PIT_V_PURPOSE);
                double w = widened || twin ? 1.0 : cdf_before(pd, v, x) + vv * pd[x];
                double hx = entropy_of(pd, v);
                int8_t g = 0;
                while (g < ASSAY_DIST_PIT_GROUPS - 1 && hx > edges[g]) {
                    g++;
                }
                rec[c] = (twin ? REC_TWIN : 1) + g;
                rec_u[c] = w < 0.0 ? 0.0 : (w > 1.0 ? 1.0 : w);
            } else if (!tolerant && at_boundary(p, &inf, row, v, x, u_scratch)) {
                rec[c] = REC_BOUNDARY;
            } else {
                rec[c] = REC_IMPOSSIBLE;
                if (first_key == INT64_MAX) {
                    first_key = c;
                    snprintf(first, sizeof first,
                             "sequence %lld (seed %llu), output position %d: token %d has oracle "
                             "probability 0 (logit rank %d, %d kept; top-p margin %.2g, top-k "
                             "gap %.2g)",
                             (long long)i, (unsigned long long)(src.seed0 + (uint64_t)i), (int)j,
                             (int)x, (int)assay_dist_logit_rank(row, v, x), (int)inf.n_kept,
                             inf.top_p_margin, inf.top_k_gap);
                }
            }
        }
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the oracle failed");
        goto out;
    }
    st = assay_shard_allreduce(rec, cells, ASSAY_SHARD_I64, ASSAY_SHARD_SUM);
    if (st == ASSAY_OK) {
        st = assay_shard_allreduce(rec_u, cells, ASSAY_SHARD_F64, ASSAY_SHARD_SUM);
    }
    if (st == ASSAY_OK && tolerant) {
        st = assay_shard_allreduce(rec_allow, per * cells, ASSAY_SHARD_F64, ASSAY_SHARD_SUM);
    }
    if (st == ASSAY_OK) {
        st = assay_shard_first_text(first_key, first, sizeof first);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the ranks could not bring the PIT values together");
        goto out;
    }
    int64_t n_twin = 0;
    for (int64_t c = 0; c < cells; c++) {
        if (rec[c] >= REC_TWIN && rec[c] < REC_TWIN + ASSAY_DIST_PIT_GROUPS) {
            n_twin++;
            rec[c] -= REC_TWIN - 1; /* a PIT value (of 1) like any other */
        }
        if (rec[c] >= 1 && rec[c] <= ASSAY_DIST_PIT_GROUPS) {
            group[n_u] = (int8_t)(rec[c] - 1);
            if (tolerant) {
                memcpy(u_allow + n_u * per, rec_allow + c * per, sizeof(double) * (size_t)per);
            }
            u[n_u++] = rec_u[c];
        } else if (rec[c] == REC_BOUNDARY) {
            n_boundary++;
        } else if (rec[c] == REC_IMPOSSIBLE) {
            n_impossible++;
        }
    }
    /* The check sets how many values it draws, except with bonus_only,
     * where the engine decides how many rounds it accepts: there the KS
     * (exact at any n) decides alone while the bins are too few, and an
     * engine that accepts almost nothing is left to the acceptance checks. */
    if (p->bonus_only && n_u < ASSAY_DIST_PIT_MIN_BONUS) {
        assay_check_skip(res,
                         "only %lld tokens after a wholly accepted round (proposals accepted "
                         "%lld of %lld), fewer than %d: how often rounds are accepted is "
                         "dist.spec.acceptance's to judge",
                         (long long)n_u, (long long)tally.accepted, (long long)tally.drafted,
                         ASSAY_DIST_PIT_MIN_BONUS);
        goto out;
    }
    if (!p->bonus_only && n_u < 2 * p->pit_bins * 5) {
        st = ASSAY_ERR_INVALID;
        assay_dist_set_error(res, st, "too few PIT values for the test (raise n or len)");
        goto out;
    }
    if (tolerant) {
        st = pit_tolerance(p, u, group, u_allow, n_u, cells, res, parts, edges);
        if (st != ASSAY_OK) {
            assay_dist_set_error(res, st, "the tolerance tests failed");
            goto out;
        }
        res->n_impossible = n_impossible;
        res->n_requests = p->n;
        res->n_tokens = p->n * len;
        res->rule_fired = ss.n_bad > 0 || n_impossible > 0;
        char alone[96];
        assay_dist_statistic_alone(alone, sizeof alone, true, res->p_value, p->alpha);
        if (ss.n_bad > 0) {
            assay_check_fail(res, "%lld sequences delivered wrongly; first: %s; %s",
                             (long long)ss.n_bad, ss.bad, alone);
        } else if (n_impossible > 0) {
            assay_check_fail(res,
                             "zero-probability rule: %lld tokens that no cut the budget allows "
                             "keeps (first: %s); %s",
                             (long long)n_impossible, first, alone);
        }
        goto out;
    }
    /* Three p-values, each U(0,1) under a correct engine, combined by
     * Bonferroni: the marginal KS and binned chi-squared, and the
     * conditional chi-squared within the entropy groups. */
    double d_ks = NAN, p_ks = NAN;
    struct assay_test_result chi, cond;
    int64_t n_group[ASSAY_DIST_PIT_GROUPS];
    st = assay_ks_uniform(u, (size_t)n_u, &d_ks, &p_ks);
    if (st == ASSAY_OK) {
        st = binned_uniformity(u, n_u, p->pit_bins, p->alpha / 3, p->power, &chi);
    }
    if (st == ASSAY_OK) {
        st = conditional_uniformity(u, group, n_u, p->alpha / 3, p->power, u_group, &cond,
                                    n_group);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the uniformity tests failed");
        goto out;
    }
    double p_chi = chi.degenerate ? 1.0 : chi.p_value;
    double p_cond = cond.degenerate ? 1.0 : cond.p_value;
    double m_marg = p_ks < p_chi ? p_ks : p_chi;
    double p_marg = 3 * m_marg < 1.0 ? 3 * m_marg : 1.0;  /* the marginal test's own p */
    double p_ctx = 3 * p_cond < 1.0 ? 3 * p_cond : 1.0;   /* the conditional test's own p */
    double p_comb = p_marg < p_ctx ? p_marg : p_ctx;
    assay_dist_fill_from_test(res, &chi, p->alpha);
    assay_evidence_pit(&res->evidence, u, n_u, d_ks);
    res->p_value = p_comb;
    if (parts != NULL) {
        parts->n = 3;
        parts->p[0] = p_ks;
        parts->name[0] = "KS";
        parts->p[1] = p_chi;
        parts->name[1] = "chi2";
        parts->p[2] = p_cond;
        parts->name[2] = "chi2 within entropy groups";
    }
    res->n = n_u;
    res->n_impossible = n_impossible;
    res->n_requests = p->n;
    res->n_tokens = p->n * len;
    char alone[96], groups[160];
    res->statistic_fired = p_comb <= p->alpha;
    res->rule_fired = ss.n_bad > 0 || n_impossible > 0;
    assay_dist_statistic_alone(alone, sizeof alone, true, p_comb, p->alpha);
    snprintf(groups, sizeof groups,
             "within %d entropy groups (edges %.3g, %.3g nats; %lld, %lld, %lld values): X2 %.1f "
             "on %d df, p %.3g",
             ASSAY_DIST_PIT_GROUPS, edges[0], edges[1], (long long)n_group[0],
             (long long)n_group[1], (long long)n_group[2], cond.statistic, (int)cond.df, p_cond);
    bool marg_fired = p_marg <= p->alpha, ctx_fired = p_ctx <= p->alpha;
    if (ss.n_bad > 0) {
        assay_check_fail(res, "%lld sequences delivered wrongly; first: %s; %s",
                         (long long)ss.n_bad, ss.bad, alone);
    } else if (n_impossible > 0) {
        assay_check_fail(res,
                         "zero-probability rule: %lld tokens of oracle probability 0 (first: %s); "
                         "%s",
                         (long long)n_impossible, first, alone);
    } else if (marg_fired) {
        char twins[120] = "";
        if (n_twin > 0) {
            snprintf(twins, sizeof twins,
                     "; %lld drawn tokens (%.2f%%) are ones an exact tie at the cut removes "
                     "(PIT value 1)",
                     (long long)n_twin, 100.0 * (double)n_twin / (double)n_u);
        }
        assay_check_fail(
            res,
            "the PIT values are not uniform: KS D %.4f (p %.3g), chi-squared %.1f on %d df "
            "(p %.3g); marginal p %.3g <= alpha %.0e; the conditional test %s: %s%s",
            d_ks, p_ks, chi.statistic, (int)chi.df, p_chi, p_marg, p->alpha,
            ctx_fired ? "fails too" : "passes", groups, twins);
    } else if (ctx_fired) {
        assay_check_fail(
            res,
            "the PIT values are not uniform within the oracle's entropy groups: %s; conditional "
            "p %.3g <= alpha %.0e; the marginal test alone passes (KS p %.3g, chi-squared p "
            "%.3g, marginal p %.3g): a bias whose sign depends on the context",
            groups, p_ctx, p->alpha, p_ks, p_chi, p_marg);
    }
    char spec[160] = "";
    assay_dist_spec_rate(&tally, spec, sizeof spec);
    if (p->bonus_only) {
        size_t sl = strlen(spec);
        snprintf(spec + sl, sizeof spec - sl, "; tested: the %lld bonus tokens",
                 (long long)tally.n_bonus);
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld p %.3g min-TV %.4f | PIT of %lld x %d: marginal p %.3g (KS D "
             "%.4f p %.3g, chi2 %.1f df %d p %.3g); by entropy p %.3g (X2 %.1f df %d, min-TV %.3f "
             "per group); T %.2g top-k %d top-p %.2g; %lld at a boundary",
             p->alpha, (long long)n_u, p_comb, chi.min_tv, (long long)p->n, (int)len, p_marg,
             d_ks, p_ks, chi.statistic, (int)chi.df, p_chi, p_ctx, cond.statistic, (int)cond.df,
             cond.min_tv, (double)p->sampling.temperature, (int)p->sampling.top_k,
             (double)p->sampling.top_p, (long long)n_boundary);
    assay_dist_append(res->summary, sizeof res->summary, spec);
    if (p->tie != ASSAY_DIST_TIE_NONE) {
        size_t l = strlen(res->summary);
        snprintf(res->summary + l, sizeof res->summary - l,
                 "; %lld tokens an exact tie removes (u = 1)", (long long)n_twin);
    }
out:
    assay_free(tally.bonus);
    assay_free(rec_allow);
    assay_free(allow_seq);
    assay_free(u_allow);
    assay_dist_sample_set_free(&ss);
    assay_oracle_free(o);
    assay_free(rec);
    assay_free(rec_u);
    assay_free(prompts);
    assay_free(seq);
    assay_free(rows);
    assay_free(pd);
    assay_free(u);
    assay_free(u_group);
    assay_free(group);
    assay_free(h);
    assay_free(u_scratch);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}

