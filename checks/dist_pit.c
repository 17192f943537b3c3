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
/*
 * One run of assay_dist_pit, shared by its phases: the parameters and where
 * the verdict goes, the sizes, the buffers (pit_run_free frees them on every
 * path), the engine's samples and what the oracle's passes recorded. done
 * says a phase has given the verdict (a skip) and the later phases do not
 * run.
 */
struct pit_run {
    const struct assay_dist_params *p;
    struct assay_check_result *res;
    struct assay_dist_parts *parts;
    int32_t v, plen, len;
    int64_t cells;     /* n * len */
    uint64_t v_seed;
    bool tolerant;
    int32_t per;       /* pit_bins - 1 allowances, the TV */
    int32_t *prompts;  /* (n_prompts, plen) */
    int32_t *seq;      /* (plen + len) */
    double *rows;      /* (plen + len, v) */
    double *pd;        /* (v) */
    double *u_scratch; /* (v) */
    double *u;         /* (n * len) */
    double *u_group;   /* (n * len) */
    int8_t *group;     /* (n * len) */
    double *h;         /* (pilot_sequences, len) */
    int64_t *rec;      /* (cells) */
    double *rec_u;     /* (cells) */
    double *rec_allow; /* (cells, per), under a budget only */
    double *allow_seq; /* (per + 2, len), under a budget only */
    double *u_allow;   /* (cells, per), under a budget only */
    struct assay_oracle *o;
    struct sample_set ss;
    struct assay_spec_tally tally;
    struct request_source src;
    double edges[ASSAY_DIST_PIT_GROUPS - 1];
    int64_t n_u, n_boundary, n_impossible, n_twin, first_key;
    char first[300];
    bool done;
};

/* The run's sizes and buffers, the prompts last. ASSAY_ERR_NOMEM with the
 * verdict set; whatever was allocated is left for pit_run_free. */
static enum assay_status pit_run_init(struct pit_run *r, const struct assay_model *model,
                                      const struct assay_dist_params *p,
                                      struct assay_check_result *res,
                                      struct assay_dist_parts *parts)
{
    memset(r, 0, sizeof *r);
    r->p = p;
    r->res = res;
    r->parts = parts;
    const int32_t v = model->cfg.vocab, plen = p->prompt_len, len = p->out_len;
    r->v = v;
    r->plen = plen;
    r->len = len;
    r->seq = assay_malloc(sizeof(int32_t) * (size_t)(plen + len));
    r->rows = assay_malloc(sizeof(double) * (size_t)(plen + len) * (size_t)v);
    r->pd = assay_malloc(sizeof(double) * (size_t)v);
    r->u_scratch = assay_malloc(sizeof(double) * (size_t)v);
    r->u = assay_malloc(sizeof(double) * (size_t)p->n * (size_t)len);
    r->u_group = assay_malloc(sizeof(double) * (size_t)p->n * (size_t)len);
    r->group = assay_malloc(sizeof(int8_t) * (size_t)p->n * (size_t)len);
    r->h = assay_malloc(sizeof(double) * (size_t)pilot_sequences(p) * (size_t)len);
    /* V of output j of sequence i: counter i * len + j, so each value is
     * the same whichever rank draws it. */
    r->v_seed = assay_seed_derive(p->seed, "pit-v");
    const int64_t cells = p->n * len;
    r->cells = cells;
    r->rec = assay_calloc((size_t)cells, sizeof(int64_t));
    r->rec_u = assay_calloc((size_t)cells, sizeof(double));
    /* Under a numerics budget: each position's allowances (one per grid
     * point) and the reference's TV there, `per` values recorded at the
     * position's index. */
    const bool tolerant = p->budget.on;
    const int32_t per = p->pit_bins;
    r->tolerant = tolerant;
    r->per = per;
    r->rec_allow = tolerant ? assay_calloc((size_t)cells * (size_t)per, sizeof(double)) : NULL;
    r->allow_seq =
        tolerant ? assay_malloc(sizeof(double) * (size_t)(per + 2) * (size_t)len) : NULL;
    r->u_allow = tolerant ? assay_malloc(sizeof(double) * (size_t)per * (size_t)cells) : NULL;
    r->first_key = INT64_MAX;
    if (r->seq == NULL || r->rows == NULL || r->pd == NULL || r->u == NULL ||
        r->u_scratch == NULL || r->rec == NULL || r->rec_u == NULL || r->u_group == NULL ||
        r->group == NULL || r->h == NULL ||
        (tolerant && (r->rec_allow == NULL || r->allow_seq == NULL || r->u_allow == NULL)) ||
        assay_dist_make_prompts(p, &r->prompts) != ASSAY_OK) {
        assay_dist_set_error(res, ASSAY_ERR_NOMEM, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    return ASSAY_OK;
}

/* Free everything pit_run_init and the phases allocated. */
static void pit_run_free(struct pit_run *r)
{
    assay_free(r->tally.bonus);
    assay_free(r->rec_allow);
    assay_free(r->allow_seq);
    assay_free(r->u_allow);
    assay_dist_sample_set_free(&r->ss);
    assay_oracle_free(r->o);
    assay_free(r->rec);
    assay_free(r->rec_u);
    assay_free(r->prompts);
    assay_free(r->seq);
    assay_free(r->rows);
    assay_free(r->pd);
    assay_free(r->u);
    assay_free(r->u_group);
    assay_free(r->group);
    assay_free(r->h);
    assay_free(r->u_scratch);
}

/* Start the oracle and fix the entropy groups' edges from its pilot
 * (entropy_edges), before any of the engine's tokens is seen. */
static enum assay_status pit_oracle_start(struct pit_run *r, const struct assay_model *model)
{
    enum assay_status st = assay_oracle_init(&r->o, model, r->plen + r->len);
    if (st != ASSAY_OK) {
        assay_dist_set_error(r->res, st,
                             "the oracle could not start (prompt + len beyond the context?)");
        return st;
    }
    st = entropy_edges(r->o, r->p, r->prompts, r->v, r->seq, r->rows, r->pd, r->h, r->edges);
    if (st != ASSAY_OK) {
        assay_dist_set_error(r->res, st, "the oracle's pilot for the entropy groups failed");
    }
    return st;
}

/* Draw the engine's sequences, judge their delivery and tally speculation's
 * rounds. With bonus_only and no token after a wholly accepted round the
 * check is skipped and r->done set. */
static enum assay_status pit_draw(struct pit_run *r, const struct assay_adapter *a)
{
    const struct assay_dist_params *p = r->p;
    struct assay_check_result *res = r->res;
    struct request_source src = {r->prompts, p->n_prompts, r->plen, p->sampling,
                                 assay_seed_derive(p->seed, "requests")};
    r->src = src;
    char why[400];
    enum assay_status st = assay_dist_draw_samples(a, &r->src, p->n, r->len, p->window, true,
                                                   &r->ss, why, sizeof why);
    if (st != ASSAY_OK) {
        assay_dist_draw_failed(res, &r->ss, st, why);
        return st;
    }
    assay_dist_judge_delivery(res, &r->ss, "sequences");
    /* Speculation's figures, and with bonus_only the positions tested: the
     * token after a round whose every proposal was accepted. */
    st = assay_dist_spec_tally(&r->ss, p->n, r->len, p->bonus_only, &r->tally);
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "out of memory");
        return st;
    }
    if (p->bonus_only && r->tally.n_bonus == 0) {
        assay_check_skip(res, "%s", r->ss.n_rounds == 0
                                        ? "the engine reported no speculative round (SPEC_ROUND "
                                          "events): no token after an accepted round to test"
                                        : "no round had every proposal accepted: no token after "
                                          "an accepted round to test");
        r->done = true;
    }
    return ASSAY_OK;
}

/*
 * Record the outcome of output j of sequence i, whose logits are in r->rows
 * (and under a budget its allowances in r->allow_seq), at its index
 * i * len + j: a PIT value and its entropy group, a boundary decision or a
 * token of oracle probability 0 (the first one's description in r->first).
 */
static enum assay_status pit_position(struct pit_run *r, int64_t i, int32_t j)
{
    const struct assay_dist_params *p = r->p;
    const int32_t v = r->v, len = r->len, per = r->per;
    const bool tolerant = r->tolerant;
    double *pd = r->pd, *u_scratch = r->u_scratch;
    const double *allow_seq = r->allow_seq;
    const double *row = r->rows + (int64_t)(r->plen - 1 + j) * v;
    struct assay_oracle_dist_info inf;
    enum assay_status st = assay_oracle_distribution(row, v, &p->sampling, p->order, pd, &inf);
    if (st != ASSAY_OK) {
        return st;
    }
    int32_t x = r->ss.tokens[i * len + j];
    int64_t c = i * len + j;
    if (tolerant) {
        memcpy(r->rec_allow + c * per, allow_seq + (int64_t)j * (per - 1),
               sizeof(double) * (size_t)(per - 1));
        r->rec_allow[c * per + per - 1] = allow_seq[(int64_t)(per - 1) * len + j];
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
        return st;
    }
    if (pd[x] > 0.0 || widened || twin) {
        double vv = assay_rng_u01(r->v_seed, (uint64_t)c, PIT_V_PURPOSE);
        double w = widened || twin ? 1.0 : cdf_before(pd, v, x) + vv * pd[x];
        double hx = entropy_of(pd, v);
        int8_t g = 0;
        while (g < ASSAY_DIST_PIT_GROUPS - 1 && hx > r->edges[g]) {
            g++;
        }
        r->rec[c] = (twin ? REC_TWIN : 1) + g;
        r->rec_u[c] = w < 0.0 ? 0.0 : (w > 1.0 ? 1.0 : w);
    } else if (!tolerant && at_boundary(p, &inf, row, v, x, u_scratch)) {
        r->rec[c] = REC_BOUNDARY;
    } else {
        r->rec[c] = REC_IMPOSSIBLE;
        if (r->first_key == INT64_MAX) {
            r->first_key = c;
            snprintf(r->first, sizeof r->first,
                     "sequence %lld (seed %llu), output position %d: token %d has oracle "
                     "probability 0 (logit rank %d, %d kept; top-p margin %.2g, top-k "
                     "gap %.2g)",
                     (long long)i, (unsigned long long)(r->src.seed0 + (uint64_t)i), (int)j,
                     (int)x, (int)assay_dist_logit_rank(row, v, x), (int)inf.n_kept,
                     inf.top_p_margin, inf.top_k_gap);
        }
    }
    return ASSAY_OK;
}

/* The oracle's pass over sequence i, teacher-forced on the engine's tokens,
 * and each tested position's outcome recorded (pit_position). A sequence
 * that is incomplete or another rank's is left alone. */
static enum assay_status pit_sequence(struct pit_run *r, int64_t i)
{
    const struct assay_dist_params *p = r->p;
    const int32_t v = r->v, plen = r->plen, len = r->len, per = r->per;
    const int32_t *t = r->ss.tokens + i * len;
    bool complete = true;
    for (int32_t j = 0; j < len; j++) {
        complete = complete && t[j] >= 0 && t[j] < v;
    }
    if (!complete || !assay_shard_mine(i)) {
        return ASSAY_OK; /* incomplete: counted among the bad deliveries */
    }
    memcpy(r->seq, r->prompts + (i % p->n_prompts) * plen, sizeof(int32_t) * (size_t)plen);
    memcpy(r->seq + plen, t, sizeof(int32_t) * (size_t)len);
    /* Row plen-1+j predicts output j; the last token is never fed. */
    enum assay_status st = assay_oracle_logits(r->o, r->seq, plen + len - 1, r->rows);
    if (st == ASSAY_OK && r->tolerant) {
        st = p->budget.along(p->budget.ctx, p, r->seq, plen, len, r->rows, r->allow_seq,
                             r->allow_seq + (int64_t)(per - 1) * len,
                             r->allow_seq + (int64_t)per * len);
    }
    for (int32_t j = 0; j < len && st == ASSAY_OK; j++) {
        if (r->tally.bonus != NULL && !r->tally.bonus[i * len + j]) {
            continue;
        }
        st = pit_position(r, i, j);
    }
    return st;
}

/* The oracle's passes, this rank's sequences only; each position's outcome
 * is recorded at its index (rec: 0 none, 1 + g a PIT value of entropy group
 * g, REC_BOUNDARY, REC_IMPOSSIBLE, REC_TWIN + g). */
static enum assay_status pit_oracle_passes(struct pit_run *r)
{
    enum assay_status st = ASSAY_OK;
    for (int64_t i = 0; i < r->p->n && st == ASSAY_OK; i++) {
        st = pit_sequence(r, i);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(r->res, st, "the oracle failed");
    }
    return st;
}

/*
 * Add the ranks' records together and collect from them the PIT values in
 * index order (u, their groups, under a budget their allowances in u_allow)
 * and the counts of boundary decisions, impossible tokens and tie twins.
 * Too few values skip the check with bonus_only (r->done set) and are an
 * ASSAY_ERR_INVALID otherwise.
 */
static enum assay_status pit_gather(struct pit_run *r)
{
    const struct assay_dist_params *p = r->p;
    struct assay_check_result *res = r->res;
    const int32_t per = r->per;
    const int64_t cells = r->cells;
    int64_t *rec = r->rec;
    enum assay_status st = assay_shard_allreduce(rec, cells, ASSAY_SHARD_I64, ASSAY_SHARD_SUM);
    if (st == ASSAY_OK) {
        st = assay_shard_allreduce(r->rec_u, cells, ASSAY_SHARD_F64, ASSAY_SHARD_SUM);
    }
    if (st == ASSAY_OK && r->tolerant) {
        st = assay_shard_allreduce(r->rec_allow, per * cells, ASSAY_SHARD_F64, ASSAY_SHARD_SUM);
    }
    if (st == ASSAY_OK) {
        st = assay_shard_first_text(r->first_key, r->first, sizeof r->first);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the ranks could not bring the PIT values together");
        return st;
    }
    for (int64_t c = 0; c < cells; c++) {
        if (rec[c] >= REC_TWIN && rec[c] < REC_TWIN + ASSAY_DIST_PIT_GROUPS) {
            r->n_twin++;
            rec[c] -= REC_TWIN - 1; /* a PIT value (of 1) like any other */
        }
        if (rec[c] >= 1 && rec[c] <= ASSAY_DIST_PIT_GROUPS) {
            r->group[r->n_u] = (int8_t)(rec[c] - 1);
            if (r->tolerant) {
                memcpy(r->u_allow + r->n_u * per, r->rec_allow + c * per,
                       sizeof(double) * (size_t)per);
            }
            r->u[r->n_u++] = r->rec_u[c];
        } else if (rec[c] == REC_BOUNDARY) {
            r->n_boundary++;
        } else if (rec[c] == REC_IMPOSSIBLE) {
            r->n_impossible++;
        }
    }
    /* The check sets how many values it draws, except with bonus_only,
     * where the engine decides how many rounds it accepts: there the KS
     * (exact at any n) decides alone while the bins are too few, and an
     * engine that accepts almost nothing is left to the acceptance checks. */
    if (p->bonus_only && r->n_u < ASSAY_DIST_PIT_MIN_BONUS) {
        assay_check_skip(res,
                         "only %lld tokens after a wholly accepted round (proposals accepted "
                         "%lld of %lld), fewer than %d: how often rounds are accepted is "
                         "dist.spec.acceptance's to judge",
                         (long long)r->n_u, (long long)r->tally.accepted,
                         (long long)r->tally.drafted, ASSAY_DIST_PIT_MIN_BONUS);
        r->done = true;
        return ASSAY_OK;
    }
    if (!p->bonus_only && r->n_u < 2 * p->pit_bins * 5) {
        st = ASSAY_ERR_INVALID;
        assay_dist_set_error(res, st, "too few PIT values for the test (raise n or len)");
        return st;
    }
    return ASSAY_OK;
}

/* The verdict under a numerics budget: the tolerance tests (pit_tolerance)
 * and the hard rules, wrong deliveries and tokens that no cut the budget
 * allows keeps. */
static enum assay_status pit_tolerant_verdict(struct pit_run *r)
{
    const struct assay_dist_params *p = r->p;
    struct assay_check_result *res = r->res;
    enum assay_status st = pit_tolerance(p, r->u, r->group, r->u_allow, r->n_u, r->cells, res,
                                         r->parts, r->edges);
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the tolerance tests failed");
        return st;
    }
    res->n_impossible = r->n_impossible;
    res->n_requests = p->n;
    res->n_tokens = p->n * r->len;
    res->rule_fired = r->ss.n_bad > 0 || r->n_impossible > 0;
    char alone[96];
    assay_dist_statistic_alone(alone, sizeof alone, true, res->p_value, p->alpha);
    if (r->ss.n_bad > 0) {
        assay_check_fail(res, "%lld sequences delivered wrongly; first: %s; %s",
                         (long long)r->ss.n_bad, r->ss.bad, alone);
    } else if (r->n_impossible > 0) {
        assay_check_fail(res,
                         "zero-probability rule: %lld tokens that no cut the budget allows "
                         "keeps (first: %s); %s",
                         (long long)r->n_impossible, r->first, alone);
    }
    return ASSAY_OK;
}

/* The exact test's figures: the marginal KS and binned chi-squared, the
 * conditional chi-squared within the entropy groups, and their p-values. */
struct pit_plain {
    double d_ks, p_ks;
    struct assay_test_result chi, cond;
    int64_t n_group[ASSAY_DIST_PIT_GROUPS];
    double p_chi, p_cond;
    double p_marg; /* the marginal test's own p */
    double p_ctx;  /* the conditional test's own p */
    double p_comb;
};

/* Three p-values, each U(0,1) under a correct engine, combined by
 * Bonferroni: the marginal KS and binned chi-squared, and the conditional
 * chi-squared within the entropy groups. */
static enum assay_status plain_tests(const struct pit_run *r, struct pit_plain *t)
{
    const struct assay_dist_params *p = r->p;
    t->d_ks = NAN;
    t->p_ks = NAN;
    enum assay_status st = assay_ks_uniform(r->u, (size_t)r->n_u, &t->d_ks, &t->p_ks);
    if (st == ASSAY_OK) {
        st = binned_uniformity(r->u, r->n_u, p->pit_bins, p->alpha / 3, p->power, &t->chi);
    }
    if (st == ASSAY_OK) {
        st = conditional_uniformity(r->u, r->group, r->n_u, p->alpha / 3, p->power, r->u_group,
                                    &t->cond, t->n_group);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(r->res, st, "the uniformity tests failed");
        return st;
    }
    t->p_chi = t->chi.degenerate ? 1.0 : t->chi.p_value;
    t->p_cond = t->cond.degenerate ? 1.0 : t->cond.p_value;
    double m_marg = t->p_ks < t->p_chi ? t->p_ks : t->p_chi;
    t->p_marg = 3 * m_marg < 1.0 ? 3 * m_marg : 1.0;
    t->p_ctx = 3 * t->p_cond < 1.0 ? 3 * t->p_cond : 1.0;
    t->p_comb = t->p_marg < t->p_ctx ? t->p_marg : t->p_ctx;
    return ASSAY_OK;
}

/* The exact test's verdict: the figures, the parts, and a failure by the
 * hard rules (wrong deliveries, tokens of oracle probability 0), else by
 * the marginal test, else by the conditional one. */
static void plain_verdict(const struct pit_run *r, const struct pit_plain *t)
{
    const struct assay_dist_params *p = r->p;
    struct assay_check_result *res = r->res;
    struct assay_dist_parts *parts = r->parts;
    const int64_t n_u = r->n_u, n_impossible = r->n_impossible, n_twin = r->n_twin;
    assay_dist_fill_from_test(res, &t->chi, p->alpha);
    assay_evidence_pit(&res->evidence, r->u, n_u, t->d_ks);
    res->p_value = t->p_comb;
    if (parts != NULL) {
        parts->n = 3;
        parts->p[0] = t->p_ks;
        parts->name[0] = "KS";
        parts->p[1] = t->p_chi;
        parts->name[1] = "chi2";
        parts->p[2] = t->p_cond;
        parts->name[2] = "chi2 within entropy groups";
    }
    res->n = n_u;
    res->n_impossible = n_impossible;
    res->n_requests = p->n;
    res->n_tokens = p->n * r->len;
    char alone[96], groups[160];
    res->statistic_fired = t->p_comb <= p->alpha;
    res->rule_fired = r->ss.n_bad > 0 || n_impossible > 0;
    assay_dist_statistic_alone(alone, sizeof alone, true, t->p_comb, p->alpha);
    snprintf(groups, sizeof groups,
             "within %d entropy groups (edges %.3g, %.3g nats; %lld, %lld, %lld values): X2 %.1f "
             "on %d df, p %.3g",
             ASSAY_DIST_PIT_GROUPS, r->edges[0], r->edges[1], (long long)t->n_group[0],
             (long long)t->n_group[1], (long long)t->n_group[2], t->cond.statistic,
             (int)t->cond.df, t->p_cond);
    bool marg_fired = t->p_marg <= p->alpha, ctx_fired = t->p_ctx <= p->alpha;
    if (r->ss.n_bad > 0) {
        assay_check_fail(res, "%lld sequences delivered wrongly; first: %s; %s",
                         (long long)r->ss.n_bad, r->ss.bad, alone);
    } else if (n_impossible > 0) {
        assay_check_fail(res,
                         "zero-probability rule: %lld tokens of oracle probability 0 (first: %s); "
                         "%s",
                         (long long)n_impossible, r->first, alone);
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
            t->d_ks, t->p_ks, t->chi.statistic, (int)t->chi.df, t->p_chi, t->p_marg, p->alpha,
            ctx_fired ? "fails too" : "passes", groups, twins);
    } else if (ctx_fired) {
        assay_check_fail(
            res,
            "the PIT values are not uniform within the oracle's entropy groups: %s; conditional "
            "p %.3g <= alpha %.0e; the marginal test alone passes (KS p %.3g, chi-squared p "
            "%.3g, marginal p %.3g): a bias whose sign depends on the context",
            groups, t->p_ctx, p->alpha, t->p_ks, t->p_chi, t->p_marg);
    }
}

/* The exact test's summary line, with speculation's figures and the count
 * of tie twins under a tie mode. */
static void plain_summary(const struct pit_run *r, const struct pit_plain *t)
{
    const struct assay_dist_params *p = r->p;
    struct assay_check_result *res = r->res;
    char spec[160] = "";
    assay_dist_spec_rate(&r->tally, spec, sizeof spec);
    if (p->bonus_only) {
        size_t sl = strlen(spec);
        snprintf(spec + sl, sizeof spec - sl, "; tested: the %lld bonus tokens",
                 (long long)r->tally.n_bonus);
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld p %.3g min-TV %.4f | PIT of %lld x %d: marginal p %.3g (KS D "
             "%.4f p %.3g, chi2 %.1f df %d p %.3g); by entropy p %.3g (X2 %.1f df %d, min-TV %.3f "
             "per group); T %.2g top-k %d top-p %.2g; %lld at a boundary",
             p->alpha, (long long)r->n_u, t->p_comb, t->chi.min_tv, (long long)p->n, (int)r->len,
             t->p_marg, t->d_ks, t->p_ks, t->chi.statistic, (int)t->chi.df, t->p_chi, t->p_ctx,
             t->cond.statistic, (int)t->cond.df, t->cond.min_tv, (double)p->sampling.temperature,
             (int)p->sampling.top_k, (double)p->sampling.top_p, (long long)r->n_boundary);
    assay_dist_append(res->summary, sizeof res->summary, spec);
    if (p->tie != ASSAY_DIST_TIE_NONE) {
        size_t l = strlen(res->summary);
        snprintf(res->summary + l, sizeof res->summary - l,
                 "; %lld tokens an exact tie removes (u = 1)", (long long)r->n_twin);
    }
}

/* The verdict without a budget: the exact tests (plain_tests), the verdict
 * and the summary. */
static enum assay_status pit_plain_verdict(struct pit_run *r)
{
    struct pit_plain t;
    enum assay_status st = plain_tests(r, &t);
    if (st != ASSAY_OK) {
        return st;
    }
    plain_verdict(r, &t);
    plain_summary(r, &t);
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
    struct pit_run r;
    st = pit_run_init(&r, model, p, res, parts);
    if (st == ASSAY_OK) {
        st = pit_oracle_start(&r, model);
    }
    if (st == ASSAY_OK) {
        st = pit_draw(&r, a);
    }
    if (st == ASSAY_OK && !r.done) {
        st = pit_oracle_passes(&r);
    }
    if (st == ASSAY_OK && !r.done) {
        st = pit_gather(&r);
    }
    if (st == ASSAY_OK && !r.done) {
        st = r.tolerant ? pit_tolerant_verdict(&r) : pit_plain_verdict(&r);
    }
    pit_run_free(&r);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}
