/*
 * audit_dist.c - the audit's distributional checks on a server (audit.h):
 * its first tokens and whole sequences against the oracle's exact
 * distributions, and its first tokens against the bundled engine's.
 *
 * Under a numerics budget (a server computing in llama.cpp's formats) each
 * check's null is "within the budget" and its test a tolerance test
 * (checks/tolerance.h), so the stated alpha bounds the false alarms of
 * every server inside the budget, at the full sample size:
 *  - a first-token goodness of fit allows, at its prompt, twice the TV
 *    between the reference's (the same formats, computed correctly) and
 *    the oracle's processed distributions (or its mean over the candidate
 *    prompts, whichever is larger), plus what the top-k / top-p cuts that
 *    the budget can move add (boundary_term); the prompt (and, for the
 *    filtered check, the cut) is the candidate with the smallest boundary
 *    term, chosen before any sample and never by how close the reference
 *    happens to be (choose_first);
 *  - the PIT allows, at each grid point of each position of the server's
 *    own sequences, twice the reference's deviation of the PIT's CDF there
 *    (a reference pass per sequence; along), and tests the means;
 *  - the two-sample test allows the server's allowance plus the bundled
 *    engine's own distance (it computes the reference's formats);
 *  - the seeded checks ask, of a parting between two runs of one seed,
 *    whether the numerics at that context can make it
 *    (assay_audit_seed_explain).
 * In exact arithmetic (no budget beyond the fixed tolerances) the checks
 * test the point null as `assay verify` does.
 *
 * Cost: one oracle and one reference pass per candidate prompt (64 of 2-3
 * tokens) and, for the PIT, one reference pass per sequence and variant
 * beside the oracle's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../adapters/gate.h"
#include "../adapters/spec.h"
#include "../core/alloc.h"
#include "../core/rng.h"
#include "../oracles/oracle.h"
#include "audit_checks.h"
#include "distributional.h"
#include "equivalence.h"
#include "seeded.h"
#include "tolerance.h"

#include "audit_internal.h"

enum dist_kind { D_GOF, D_PIT, D_HOMOGENEITY };

/* Candidate cuts of the filtered first-token check (temperature 0.8): the
 * prompt and the cut whose boundary term is smallest are tested. */
static const struct {
    int32_t top_k;
    float top_p;
} k_cuts[] = {{30, 0.8f}, {20, 0.9f}, {12, 0.9f}, {8, 0.8f},  {6, 0.95f},
              {5, 0.7f},  {4, 0.9f},  {3, 0.9f},  {3, 0.6f}, {2, 0.9f}};

static double tv_of(const double *p, const double *q, int32_t v)
{
    double d = 0.0;
    for (int32_t k = 0; k < v; k++) {
        d += fabs(p[k] - q[k]);
    }
    return 0.5 * d;
}

/*
 * The mass a cut may move by, as far as the hard rules go (a token no cut
 * the budget allows keeps fails a check by itself): at least twice the
 * largest TV between the reference's and the oracle's distributions over
 * the budget's positions, at temperature t. One position's own figure can
 * be smaller by luck, and a single token decides a hard rule: measured, an
 * engine computing the formats without flash attention crossed a top-p
 * cut 0.0013 away where twice its position's figure was smaller (2 PIT
 * checks of 20 failed), within twice the largest (0.0045).
 */
static double hard_rule_mass(const struct assay_audit_budget *bud, double t)
{
    return bud->measured ? fmin(1.0, ASSAY_AUDIT_BUDGET_FACTOR * bud->tv_max / t) : 0.0;
}

/* The softmax of row / t into out. */
static void tempered(const double *row, int32_t v, double t, double *out)
{
    double mx = -INFINITY, z = 0.0;
    for (int32_t k = 0; k < v; k++) {
        mx = row[k] / t > mx ? row[k] / t : mx;
    }
    for (int32_t k = 0; k < v; k++) {
        out[k] = exp(row[k] / t - mx);
        z += out[k];
    }
    for (int32_t k = 0; k < v; k++) {
        out[k] /= z;
    }
}

/* The processed distribution of a logit (or log-softmax) row under p's
 * sampling and order; without a cut simply the tempered softmax, which
 * needs no sort. */
static enum assay_status processed(const double *row, int32_t v,
                                   const struct assay_dist_params *p, double *out)
{
    if ((p->sampling.top_k <= 0 || p->sampling.top_k >= v) && p->sampling.top_p >= 1.0f) {
        tempered(row, v, (double)p->sampling.temperature, out);
        return ASSAY_OK;
    }
    return assay_oracle_distribution(row, v, &p->sampling, p->order, out, NULL);
}

static int by_desc(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a < b) - (a > b);
}

/*
 * What the top-k / top-p cuts that the budget can move add to a first
 * token's allowance, at the oracle's logits `row` under s: every cut the
 * budget allows keeps a prefix (by logit) between the narrow one N (top-k
 * to the tokens more than tol_logit above the (k+1)-th logit, top-p
 * lowered by tol_mass) and the wide one W (assay_dist_widened_kept). The
 * TV between the tempered weights w renormalised on nested prefixes
 * A within B is w(B \ A) / w(B), so a cut K' instead of the oracle's K
 * moves the distribution by at most max(w(K \ N) / w(K), w(W \ K) / w(W)).
 * 0 when no cut can move. scratch: 3 v.
 */
static double boundary_term(const double *row, int32_t v, const struct assay_dist_params *dp,
                            double *scratch)
{
    const struct assay_sampling *s = &dp->sampling;
    const int32_t n_wide = assay_dist_widened_kept(row, v, dp, scratch);
    struct assay_sampling tight = *s;
    struct assay_oracle_dist_info inf;
    if (assay_oracle_distribution(row, v, s, dp->order, scratch, &inf) != ASSAY_OK) {
        return 1.0;
    }
    const int32_t n_kept = inf.n_kept;
    int32_t n_narrow = n_kept;
    if (s->top_k > 0 && s->top_k < v && n_kept == s->top_k) {
        /* the (k+1)-th logit, and the kept tokens sure to stay above it */
        double next = -INFINITY;
        for (int32_t y = 0; y < v; y++) {
            if (scratch[y] == 0.0 && row[y] > next) {
                next = row[y];
            }
        }
        int32_t sure = 0;
        for (int32_t y = 0; y < v; y++) {
            sure += row[y] > next + dp->tol_logit;
        }
        n_narrow = sure < n_narrow ? sure : n_narrow;
    }
    if (s->top_p < 1.0f) {
        double tp = (double)s->top_p - dp->tol_top_p;
        tight.top_p = (float)(tp > 1e-6 ? tp : 1e-6);
        if (assay_oracle_distribution(row, v, &tight, dp->order, scratch, &inf) != ASSAY_OK) {
            return 1.0;
        }
        n_narrow = inf.n_kept < n_narrow ? inf.n_kept : n_narrow;
    }
    if (n_narrow >= n_kept && n_wide <= n_kept) {
        return 0.0;
    }
    /* w of the ranks below n_narrow, n_kept and n_wide, by the logits at
     * those ranks (ties at a threshold are rare; they fall on the side
     * that makes the term larger) */
    double *w = scratch + v, *sorted = scratch + 2 * (int64_t)v;
    tempered(row, v, (double)s->temperature, w);
    memcpy(sorted, row, sizeof(double) * (size_t)v);
    qsort(sorted, (size_t)v, sizeof(double), by_desc);
    const double thr_k = sorted[n_kept - 1], thr_w = sorted[n_wide - 1];
    const double thr_n = n_narrow > 0 ? sorted[n_narrow - 1] : INFINITY;
    double w_n = 0.0, w_k = 0.0, w_w = 0.0;
    for (int32_t y = 0; y < v; y++) {
        w_n += row[y] >= thr_n ? w[y] : 0.0;
        w_k += row[y] >= thr_k ? w[y] : 0.0;
        w_w += row[y] >= thr_w ? w[y] : 0.0;
    }
    double out_k = w_k > 0.0 ? (w_k - w_n) / w_k : 1.0;
    double in_w = w_w > 0.0 ? (w_w - w_k) / w_w : 0.0;
    return fmin(1.0, fmax(out_k, in_w));
}

/* Scratch of the allowance computations (vocab each). */
struct allow_scratch {
    double *row, *prob, *ref, *ref_prob, *t_o, *t_r, *work;
    int64_t *order;  /* (vocab) for the TV bins */
    int32_t *bin_of; /* (vocab) */
    int32_t cap;     /* rows of row and ref */
};

static void scratch_free(struct allow_scratch *s)
{
    assay_free(s->row);
    assay_free(s->prob);
    assay_free(s->ref);
    assay_free(s->ref_prob);
    assay_free(s->t_o);
    assay_free(s->t_r);
    assay_free(s->work);
    assay_free(s->order);
    assay_free(s->bin_of);
    memset(s, 0, sizeof *s);
}

static enum assay_status scratch_init(struct allow_scratch *s, int32_t v, int32_t rows)
{
    memset(s, 0, sizeof *s);
    s->cap = rows;
    s->row = assay_malloc(sizeof(double) * (size_t)v * (size_t)rows);
    s->ref = assay_malloc(sizeof(double) * (size_t)v * (size_t)rows);
    s->prob = assay_malloc(sizeof(double) * (size_t)v);
    s->ref_prob = assay_malloc(sizeof(double) * (size_t)v);
    s->t_o = assay_malloc(sizeof(double) * (size_t)v);
    s->t_r = assay_malloc(sizeof(double) * (size_t)v);
    s->work = assay_malloc(sizeof(double) * 3 * (size_t)v);
    s->order = assay_malloc(sizeof(int64_t) * (size_t)v);
    s->bin_of = assay_malloc(sizeof(int32_t) * (size_t)v);
    if (s->row == NULL || s->ref == NULL || s->prob == NULL || s->ref_prob == NULL ||
        s->t_o == NULL || s->t_r == NULL || s->work == NULL || s->order == NULL ||
        s->bin_of == NULL) {
        scratch_free(s);
        return ASSAY_ERR_NOMEM;
    }
    return ASSAY_OK;
}

/* A first token's allowance and its parts. */
struct first_allowance {
    double allow;     /* the TV the null allows */
    double reference; /* the reference's TV from the oracle it was made from */
    double boundary;  /* what movable cuts add */
    double tol_mass;  /* the mass a cut may move: twice the tempered TV */
};

/* The oracle's logits after prompt (dp->prompt_len tokens) into s->row's
 * last row, and each variant's reference log-softmax there into s->ref's
 * rows 0 (and 1). */
static enum assay_status prompt_rows(struct assay_audit *a, struct assay_oracle *o,
                                     const int32_t *prompt, int32_t len, struct allow_scratch *s)
{
    enum assay_status st = assay_oracle_logits(o, prompt, len, s->row);
    const int32_t v = a->model->cfg.vocab;
    for (int32_t var = 0; st == ASSAY_OK && var < a->budget.n_variants; var++) {
        const int32_t next = 0; /* any token: only the row before it is read */
        st = assay_audit_reference_lsm(a, var, prompt, len, &next, 1, s->ref + (int64_t)var * v);
    }
    return st;
}

/*
 * At the prompt whose rows prompt_rows left in s, under dp: the oracle's
 * processed distribution into s->prob, the reference's TV from it (*r,
 * the larger variant) and the TV of the tempered distributions before any
 * cut (*t: how far the formats move a cumulative mass).
 */
static enum assay_status reference_distance(struct assay_audit *a,
                                            const struct assay_dist_params *dp,
                                            struct allow_scratch *s, double *r, double *t)
{
    const int32_t v = a->model->cfg.vocab;
    const double *row = s->row + (int64_t)(dp->prompt_len - 1) * v;
    enum assay_status st = processed(row, v, dp, s->prob);
    const double temp = (double)dp->sampling.temperature;
    *r = 0.0;
    *t = 0.0;
    tempered(row, v, temp, s->t_o);
    for (int32_t var = 0; st == ASSAY_OK && var < a->budget.n_variants; var++) {
        const double *ref = s->ref + (int64_t)var * v;
        st = processed(ref, v, dp, s->ref_prob);
        if (st == ASSAY_OK) {
            *r = fmax(*r, tv_of(s->ref_prob, s->prob, v));
            tempered(ref, v, temp, s->t_r);
            *t = fmax(*t, tv_of(s->t_r, s->t_o, v));
        }
    }
    return st;
}

/* The number of TV bins a tolerance test makes of prob (tolerance.h). */
static int32_t tv_bins_of(const double *prob, int32_t v, struct allow_scratch *s)
{
    double bin_prob[64];
    int32_t n_bins = 0;
    if (assay_tv_bins(prob, v, 16, s->order, s->bin_of, bin_prob, &n_bins) != ASSAY_OK) {
        return 0;
    }
    return n_bins;
}

/*
 * The prompt (and for the filtered check the cut) of a first-token check
 * under the budget, and its allowance.
 *
 * The choice must not look at how close the reference happens to be to
 * the oracle at a candidate: the candidate where it is closest is where
 * the budget would be smallest by luck, not where a correct server is
 * close (the winner's curse). So among prompt_tries candidates of the
 * prompt seed (and the cuts of k_cuts) it takes the first with the
 * smallest boundary term, on the oracle's logits alone with a mass
 * tolerance fixed before the search (twice the budget's mean TV), that
 * leaves at least 4 TV bins and, filtered, a cut that binds. The
 * allowance then uses the reference's distance at the chosen prompt or
 * its mean over all the candidates (same cut), whichever is larger, and
 * so for the mass a cut may move: (FACTOR + extra) x that + the boundary
 * term, extra counting engines at the reference's own distance that the
 * null spans (0: the server against the oracle; 1 x the chosen prompt's
 * distance: against the bundled engine, which computes the reference's
 * formats). The chosen prompt into prompt, its oracle distribution into
 * s->prob, dp's sampling and tol_top_p set. ASSAY_ERR_INVALID when no
 * candidate qualifies.
 */
static enum assay_status choose_first(struct assay_audit *a, struct assay_dist_params *dp,
                                      bool filtered, bool two_engines, int32_t *prompt,
                                      struct allow_scratch *s, struct first_allowance *best)
{
    enum { MAX_CUTS = sizeof k_cuts / sizeof k_cuts[0] };
    const int32_t v = a->model->cfg.vocab, len = dp->prompt_len, tries = dp->prompt_tries;
    const int32_t n_cuts = filtered ? MAX_CUTS : 1;
    struct assay_oracle *o = NULL;
    enum assay_status st = len <= 64 && tries >= 1 ? assay_oracle_init(&o, a->model, len + 1)
                                                   : ASSAY_ERR_INVALID;
    int32_t cand[64];
    /* pass 1: each candidate's oracle row, reference distance per cut and
     * tempered distance, kept for pass 2 */
    double *rows = assay_malloc(sizeof(double) * (size_t)v * (size_t)tries);
    double *r = assay_malloc(sizeof(double) * (size_t)tries * MAX_CUTS);
    double *t = assay_malloc(sizeof(double) * (size_t)tries);
    if (st == ASSAY_OK && (rows == NULL || r == NULL || t == NULL)) {
        st = ASSAY_ERR_NOMEM;
    }
    double r_mean[MAX_CUTS] = {0}, t_mean = 0.0;
    for (int32_t c = 0; st == ASSAY_OK && c < tries; c++) {
        assay_dist_candidate_prompt(dp, c, cand);
        st = prompt_rows(a, o, cand, len, s);
        if (st == ASSAY_OK) {
            memcpy(rows + (int64_t)c * v, s->row + (int64_t)(len - 1) * v,
                   sizeof(double) * (size_t)v);
        }
        for (int32_t j = 0; st == ASSAY_OK && j < n_cuts; j++) {
            struct assay_dist_params trial = *dp;
            if (filtered) {
                trial.sampling.top_k = k_cuts[j].top_k;
                trial.sampling.top_p = k_cuts[j].top_p;
            }
            st = reference_distance(a, &trial, s, &r[c * MAX_CUTS + j], &t[c]);
            r_mean[j] += r[c * MAX_CUTS + j] / tries;
        }
        t_mean += t[c] / tries;
    }
    /* pass 2: the smallest boundary term, each candidate's mass tolerance
     * its own tempered distance or the mean, whichever is larger; among
     * candidates of at least 4 TV bins, else (a near-deterministic model:
     * mini-sharp's kind) of at least 2, the most likely token against the
     * rest */
    double best_boundary = INFINITY;
    int32_t best_c = -1, best_j = -1;
    for (int32_t min_bins = 4; st == ASSAY_OK && best_c < 0 && min_bins >= 2; min_bins -= 2) {
        for (int32_t c = 0; st == ASSAY_OK && c < tries; c++) {
            const double *row = rows + (int64_t)c * v;
            for (int32_t j = 0; st == ASSAY_OK && j < n_cuts; j++) {
                struct assay_dist_params trial = *dp;
                if (filtered) {
                    trial.sampling.top_k = k_cuts[j].top_k;
                    trial.sampling.top_p = k_cuts[j].top_p;
                }
                st = processed(row, v, &trial, s->prob);
                int32_t kept = 0;
                for (int32_t k = 0; k < v; k++) {
                    kept += s->prob[k] > 0.0;
                }
                bool binds = !filtered || (kept < v && kept <= trial.sampling.top_k);
                if (st != ASSAY_OK || !binds || tv_bins_of(s->prob, v, s) < min_bins) {
                    continue;
                }
                double mass = fmax(ASSAY_AUDIT_BUDGET_FACTOR * fmax(t[c], t_mean),
                                   hard_rule_mass(&a->budget, (double)trial.sampling.temperature));
                trial.tol_top_p = fmax(ASSAY_DIST_TOL_TOP_P, fmin(1.0, mass));
                double bt = boundary_term(row, v, &trial, s->work);
                if (bt < best_boundary) {
                    best_boundary = bt;
                    best_c = c;
                    best_j = j;
                }
            }
        }
    }
    if (st == ASSAY_OK && best_c < 0) {
        st = ASSAY_ERR_INVALID;
    }
    if (st == ASSAY_OK) {
        const double *row = rows + (int64_t)best_c * v;
        if (filtered) {
            dp->sampling.top_k = k_cuts[best_j].top_k;
            dp->sampling.top_p = k_cuts[best_j].top_p;
        }
        assay_dist_candidate_prompt(dp, best_c, prompt);
        const double r_at = r[best_c * MAX_CUTS + best_j];
        const double r_eff = fmax(r_at, r_mean[best_j]);
        best->reference = r_eff;
        best->tol_mass = fmin(1.0, fmax(ASSAY_AUDIT_BUDGET_FACTOR * fmax(t[best_c], t_mean),
                                        hard_rule_mass(&a->budget,
                                                       (double)dp->sampling.temperature)));
        dp->tol_top_p = fmax(ASSAY_DIST_TOL_TOP_P, best->tol_mass);
        best->boundary = best_boundary;
        best->allow = fmin(1.0, ASSAY_AUDIT_BUDGET_FACTOR * r_eff + (two_engines ? r_at : 0.0) +
                                    best->boundary);
        st = processed(row, v, dp, s->prob);
    }
    assay_free(rows);
    assay_free(r);
    assay_free(t);
    assay_oracle_free(o);
    return st;
}

/*
 * The PIT's allowances per position (assay_dist_along_fn). A PIT value is
 * u = F(x-) + V p(x) in the oracle's order (descending probability, ties
 * the lower id first), so an engine sampling q there has P(u <= s) =
 * sum_x q(x) h_x(s), h_x(s) = (s - F(x-)) / p(x) clipped to [0, 1] (0 for a
 * token of probability 0, which is u = 1). The reference's deviation
 * |P_ref(u <= s_k) - s_k| at each grid point, the larger variant's, times
 * the budget's factor, is the allowance there: what a correct server's
 * CDF may show at that position. It is at most the reference's TV, and
 * usually far less (the TV is the largest deviation over every event,
 * the CDF's only over {u <= s}).
 */
struct along_ctx {
    struct assay_audit *a;
    struct allow_scratch s;
    int32_t *order; /* (len, vocab) the oracle's order at each position */
};

static int by_prob_then_id(const void *x, const void *y, void *ctx)
{
    const double *p = ctx;
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    if (p[a] != p[b]) {
        return p[a] > p[b] ? -1 : 1;
    }
    return (a > b) - (a < b);
}

/* |P_q(u <= s_k) - s_k| for k = 1 .. grid-1 into dev (max with what is
 * there), p in `order` (the oracle's order of p). */
static void cdf_deviation(const double *p, const double *q, const int32_t *order, int32_t v,
                          int32_t grid, double *dev)
{
    double f = 0.0, g = 0.0; /* F(x-) and P_q(u < F(x-)) so far */
    int32_t i = 0;
    for (int32_t k = 1; k < grid; k++) {
        const double sk = (double)k / grid;
        while (i < v && p[order[i]] > 0.0 && f + p[order[i]] <= sk) {
            f += p[order[i]];
            g += q[order[i]];
            i++;
        }
        double at = g;
        if (i < v && p[order[i]] > 0.0) {
            at += q[order[i]] * (sk - f) / p[order[i]];
        }
        double d = fabs(at - sk);
        dev[k - 1] = d > dev[k - 1] ? d : dev[k - 1];
    }
}

static enum assay_status along(void *ctx, const struct assay_dist_params *p, const int32_t *seq,
                               int32_t prompt_len, int32_t n, const double *oracle_rows,
                               double *allow, double *reference, double *mass)
{
    struct along_ctx *c = ctx;
    struct assay_audit *a = c->a;
    const int32_t v = a->model->cfg.vocab, gp = p->pit_bins - 1;
    if (n > c->s.cap) {
        return ASSAY_ERR_INVALID;
    }
    /* the oracle's processed rows once, then each variant's beside them */
    enum assay_status st = ASSAY_OK;
    const double t = (double)p->sampling.temperature;
    for (int32_t j = 0; st == ASSAY_OK && j < n; j++) {
        reference[j] = 0.0;
        mass[j] = 0.0;
        for (int32_t k = 0; k < gp; k++) {
            allow[(int64_t)j * gp + k] = 0.0;
        }
        st = processed(oracle_rows + (int64_t)(prompt_len - 1 + j) * v, v, p,
                       c->s.row + (int64_t)j * v);
    }
    for (int32_t var = 0; st == ASSAY_OK && var < a->budget.n_variants; var++) {
        st = assay_audit_reference_lsm(a, var, seq, prompt_len, seq + prompt_len, n, c->s.ref);
        for (int32_t j = 0; st == ASSAY_OK && j < n; j++) {
            const double *ref = c->s.ref + (int64_t)j * v;
            const double *pj = c->s.row + (int64_t)j * v;
            st = processed(ref, v, p, c->s.ref_prob);
            if (st != ASSAY_OK) {
                break;
            }
            double d = tv_of(c->s.ref_prob, pj, v);
            reference[j] = d > reference[j] ? d : reference[j];
            /* the tempered distributions before any cut: how far the
             * formats move a cumulative mass */
            tempered(oracle_rows + (int64_t)(prompt_len - 1 + j) * v, v, t, c->s.t_o);
            tempered(ref, v, t, c->s.t_r);
            d = tv_of(c->s.t_r, c->s.t_o, v);
            mass[j] = d > mass[j] ? d : mass[j];
            int32_t *order = c->order + (int64_t)j * v;
            if (var == 0) {
                for (int32_t x = 0; x < v; x++) {
                    order[x] = x;
                }
                qsort_r(order, (size_t)v, sizeof(int32_t), by_prob_then_id, (void *)pj);
            }
            cdf_deviation(pj, c->s.ref_prob, order, v, p->pit_bins, allow + (int64_t)j * gp);
        }
    }
    for (int32_t j = 0; j < n; j++) {
        for (int32_t k = 0; k < gp; k++) {
            double *x = &allow[(int64_t)j * gp + k];
            *x = fmin(1.0, ASSAY_AUDIT_BUDGET_FACTOR * *x);
        }
        mass[j] = fmin(1.0, ASSAY_AUDIT_BUDGET_FACTOR * mass[j]);
    }
    return st;
}

/* Token z comes before token x in the order of descending probability
 * (ties: the lower id first). */
static bool before(const double *p, int32_t z, int32_t x)
{
    return p[z] > p[x] || (p[z] == p[x] && z < x);
}

/* What a correct server's numerics can do at one context of a seed's run:
 * the oracle's processed distribution there, the mass by which a correct
 * draw's CDF can move (m: twice the reference's TV from the oracle), the
 * logit distance within which it can reorder tokens (g: twice the spread
 * of the reference's logprob errors over the kept tokens, at most the tie
 * budget), and the tokens any cut the budgets allow keeps (n_wide, the
 * top ones by logit). */
struct draw_room {
    double m, g;
    int32_t n_wide;
};

/* The room at the context whose oracle logits are row and whose reference
 * log-softmax rows (one per variant) are ref[var]; prob gets the oracle's
 * processed distribution. scratch: 2 v. */
static enum assay_status draw_room_at(const struct assay_audit *a, struct assay_dist_params *dp,
                                      const double *row, const double *const *ref,
                                      int32_t n_ref, double *prob, double *scratch,
                                      struct draw_room *out)
{
    const int32_t v = a->model->cfg.vocab;
    enum assay_status st = processed(row, v, dp, prob);
    double mx = row[0], sum = 0.0;
    for (int32_t z = 1; z < v; z++) {
        mx = row[z] > mx ? row[z] : mx;
    }
    for (int32_t z = 0; z < v; z++) {
        sum += exp(row[z] - mx);
    }
    const double lse = mx + log(sum);
    double r = 0.0, gap = 0.0;
    for (int32_t var = 0; st == ASSAY_OK && var < n_ref; var++) {
        st = processed(ref[var], v, dp, scratch);
        if (st != ASSAY_OK) {
            break;
        }
        r = fmax(r, tv_of(scratch, prob, v));
        double lo = INFINITY, hi = -INFINITY;
        for (int32_t z = 0; z < v; z++) {
            if (prob[z] > 0.0) {
                double d = ref[var][z] - (row[z] - lse);
                lo = d < lo ? d : lo;
                hi = d > hi ? d : hi;
            }
        }
        gap = fmax(gap, hi - lo);
    }
    out->m = fmax(ASSAY_DIST_TOL_TOP_P, ASSAY_AUDIT_BUDGET_FACTOR * r);
    out->g = fmin(dp->tol_logit, fmax(ASSAY_EQUIV_TIE_TOL, ASSAY_AUDIT_BUDGET_FACTOR * gap));
    struct assay_dist_params wide = *dp;
    wide.tol_top_p = fmax(out->m, hard_rule_mass(&a->budget, (double)dp->sampling.temperature));
    out->n_wide = assay_dist_widened_kept(row, v, &wide, scratch);
    return st;
}

/* The uniforms that draw token t by inverse CDF over the oracle's order
 * (descending probability, lower id first: llama.cpp's order once its
 * top-k has sorted the tokens), [*lo, *hi], widened by the room: the mass
 * the CDF can move, and the tokens the numerics can reorder with t. */
static void draw_interval(const double *prob, const double *row, int32_t v, int32_t t,
                          const struct draw_room *room, double *lo, double *hi)
{
    double f = 0.0, swap_before = 0.0, swap_after = 0.0;
    for (int32_t z = 0; z < v; z++) {
        if (z == t) {
            continue;
        }
        bool near = fabs(row[z] - row[t]) <= room->g;
        if (before(prob, z, t)) {
            f += prob[z];
            swap_before += near ? prob[z] : 0.0;
        } else if (near) {
            swap_after += prob[z];
        }
    }
    *lo = f - swap_before - room->m;
    *hi = f + prob[t] + swap_after + room->m;
}

bool assay_audit_seed_explain(void *ctx, const int32_t *prompt, int32_t len,
                              const struct assay_sampling *s, const int32_t *ta,
                              const int32_t *tb, int32_t n, int32_t k, char *why, size_t size)
{
    struct assay_audit *a = ctx;
    const int32_t v = a->model->cfg.vocab;
    const struct assay_audit_budget *bud = assay_audit_budget_in_force(a);
    const int32_t n_var = bud->measured ? bud->n_variants : 0;
    struct assay_dist_params dp = assay_dist_default_params();
    dp.sampling = *s;
    dp.order = a->p.order;
    dp.tol_logit = fmax(dp.tol_logit, bud->gap);
    /* the reference's rows along both runs, each variant */
    double *ref = assay_malloc(sizeof(double) * (size_t)v * (size_t)n * 4);
    double *pa = assay_malloc(sizeof(double) * (size_t)v * 4);
    enum assay_status st = ref == NULL || pa == NULL ? ASSAY_ERR_NOMEM : ASSAY_OK;
    double *pb = pa + v, *scratch = pa + 2 * (int64_t)v;
    const double *rows_a = NULL, *rows_b = NULL;
    if (st == ASSAY_OK) {
        st = assay_oracle_memo_rows(a->memo, prompt, len, ta, n, &rows_a);
    }
    if (st == ASSAY_OK) {
        st = assay_oracle_memo_rows(a->memo, prompt, len, tb, n, &rows_b);
    }
    for (int32_t var = 0; st == ASSAY_OK && var < n_var; var++) {
        st = assay_audit_reference_lsm(a, var, prompt, len, ta, n,
                                       ref + (int64_t)(2 * var) * n * v);
        if (st == ASSAY_OK) {
            st = assay_audit_reference_lsm(a, var, prompt, len, tb, n,
                                           ref + (int64_t)(2 * var + 1) * n * v);
        }
    }
    /* From the parting on, both runs drew each output with the same
     * uniform (one per token, from the seed): at the parting both tokens
     * come from one context, after it each from its own run's, and at
     * every such position a single uniform must draw both, up to the room
     * the numerics leave there. */
    bool ok = st == ASSAY_OK;
    if (st != ASSAY_OK) {
        snprintf(why, size, "could not be judged: %s", assay_status_str(st));
    }
    for (int32_t j = k; ok && j < n; j++) {
        const double *row_a = rows_a + (int64_t)j * v, *row_b = rows_b + (int64_t)j * v;
        const double *ra[2], *rb[2];
        for (int32_t var = 0; var < n_var; var++) {
            ra[var] = ref + ((int64_t)(2 * var) * n + j) * v;
            rb[var] = ref + ((int64_t)(2 * var + 1) * n + j) * v;
        }
        struct draw_room room_a, room_b;
        st = draw_room_at(a, &dp, row_a, ra, n_var, pa, scratch, &room_a);
        if (st == ASSAY_OK) {
            st = draw_room_at(a, &dp, row_b, rb, n_var, pb, scratch, &room_b);
        }
        if (st != ASSAY_OK) {
            snprintf(why, size, "could not be judged: %s", assay_status_str(st));
            ok = false;
            break;
        }
        const int32_t rank_a = assay_dist_logit_rank(row_a, v, ta[j]);
        const int32_t rank_b = assay_dist_logit_rank(row_b, v, tb[j]);
        if (rank_a >= room_a.n_wide || rank_b >= room_b.n_wide) {
            snprintf(why, size,
                     "at output position %d token %d is outside every cut the budget allows "
                     "(logit rank %d, %d kept at most)",
                     (int)j, (int)(rank_a >= room_a.n_wide ? ta[j] : tb[j]),
                     (int)(rank_a >= room_a.n_wide ? rank_a : rank_b),
                     (int)(rank_a >= room_a.n_wide ? room_a.n_wide : room_b.n_wide));
            ok = false;
            break;
        }
        double lo_a, hi_a, lo_b, hi_b;
        draw_interval(pa, row_a, v, ta[j], &room_a, &lo_a, &hi_a);
        draw_interval(pb, row_b, v, tb[j], &room_b, &lo_b, &hi_b);
        if (fmax(lo_a, lo_b) > fmin(hi_a, hi_b)) {
            snprintf(why, size,
                     "%s%d: token %d takes uniforms [%.4f, %.4f] and token %d [%.4f, %.4f] of "
                     "the oracle's CDF, widened by what the numerics can move there: no one "
                     "uniform draws both, as one seed's would",
                     j == k ? "at the parting, output position " : "after the parting, at "
                                                                   "output position ",
                     (int)j, (int)ta[j], lo_a, hi_a, (int)tb[j], lo_b, hi_b);
            ok = false;
        } else if (j == k) {
            snprintf(why, size,
                     "tokens %d and %d (oracle probabilities %.4f and %.4f) take overlapping "
                     "uniforms, widened by the %.4f of mass and the %.3g logits the numerics "
                     "can move there, and so does every later pair of the two runs",
                     (int)ta[j], (int)tb[j], pa[ta[j]], pa[tb[j]], room_a.m, room_a.g);
        }
    }
    assay_free(ref);
    assay_free(pa);
    return ok;
}

enum assay_status assay_audit_seed_chance(void *ctx, const int32_t *prompt, int32_t len,
                                          const struct assay_sampling *s, const int32_t *tokens,
                                          int32_t n, double *chance)
{
    struct assay_audit *a = ctx;
    const struct assay_audit_budget *bud = assay_audit_budget_in_force(a);
    const double *rows = NULL;
    *chance = 1.0;
    enum assay_status st = assay_oracle_memo_rows(a->memo, prompt, len, tokens, n, &rows);
    if (st == ASSAY_OK) {
        /* the logits' spread the budget allows: the distributional
         * checks' tie tolerance, or the measured gap when wider */
        double room = fmax(assay_dist_default_params().tol_logit, bud->measured ? bud->gap : 0.0);
        *chance = assay_seed_chance_of_rows(rows, a->model->cfg.vocab, s, tokens, n, room);
    }
    return st;
}

/* The budget is in force (beyond the fixed tolerances of exact arithmetic). */
static bool budget_in_force(const struct assay_audit_budget *bud)
{
    return bud->measured &&
           (bud->gap > ASSAY_EQUIV_TIE_TOL || bud->logprob > ASSAY_AUDIT_LOGPROB_TOL);
}

/* The shape of a distributional check's workload: its sample size, length,
 * prompt and sampling parameters by kind, filtered or not. */
static void set_dist_shape(const struct assay_audit *a, enum dist_kind kind, bool filtered,
                           struct assay_dist_params *dp)
{
    if (filtered) {
        dp->sampling.temperature = 0.8f;
        dp->sampling.top_k = 30;
        dp->sampling.top_p = 0.8f;
    } else {
        dp->sampling.temperature = 1.0f;
        dp->sampling.top_k = 0;
        dp->sampling.top_p = 1.0f;
    }
    if (kind == D_GOF) {
        dp->n = a->p.quick ? 6000 : 20000;
        dp->positions = 1;
        dp->out_len = 1;
        dp->prompt_len = 3;
    } else if (kind == D_PIT) {
        dp->n = a->p.quick ? 160 : 320;
        dp->out_len = 16;
        dp->prompt_len = 4;
        dp->n_prompts = 16;
        if (filtered) {
            dp->sampling.temperature = 0.9f;
            dp->sampling.top_k = 50;
            dp->sampling.top_p = 0.95f;
        }
    } else {
        dp->n = a->p.quick ? 6000 : 20000;
        dp->positions = 1;
        dp->out_len = 1;
        dp->prompt_len = 2;
        /* More in flight: the bundled engine then fills a batch of 16 a
         * step (the server queues what its slots cannot take). */
        dp->window = 4 * a->p.slots;
        dp->sampling.temperature = 0.7f;
        dp->sampling.top_k = 40;
        dp->sampling.top_p = 0.9f;
    }
}

/* The budget of a first-token check (goodness of fit, two engines): the
 * prompt (and cut) with the smallest allowance, from the oracle and the
 * reference alone, into prompt and dp->budget, described in what. On
 * failure res is ERROR with the reason and s is freed. */
static enum assay_status first_token_budget(struct assay_audit *a, enum dist_kind kind,
                                            bool filtered, struct assay_dist_params *dp,
                                            int32_t *prompt, struct allow_scratch *s, char *what,
                                            size_t what_size, struct assay_check_result *res)
{
    struct first_allowance fa = {NAN, NAN, NAN, NAN};
    enum assay_status st =
        scratch_init(s, a->model->cfg.vocab, dp->prompt_len > 2 ? dp->prompt_len : 2);
    if (st == ASSAY_OK) {
        st = choose_first(a, dp, filtered && kind == D_GOF, kind == D_HOMOGENEITY, prompt, s,
                          &fa);
    }
    if (st != ASSAY_OK) {
        scratch_free(s);
        assay_check_error(res, "the numerics budget at the check's prompts: %s",
                          st == ASSAY_ERR_INVALID ? "no candidate prompt leaves a testable "
                                                    "distribution"
                                                  : assay_status_str(st));
        return st;
    }
    dp->prompt = prompt;
    dp->budget.on = true;
    dp->budget.tv = fa.allow;
    dp->budget.reference = fa.reference;
    dp->budget.boundary = fa.boundary;
    dp->budget.bins_from = s->prob;
    snprintf(what, what_size,
             "%s%g x the reference's TV %.4f (at this prompt or over the candidates) + %.4f "
             "from cuts it can move",
             kind == D_HOMOGENEITY ? "the bundled engine's own and " : "",
             ASSAY_AUDIT_BUDGET_FACTOR, fa.reference, fa.boundary);
    dp->budget.what = what;
    return ASSAY_OK;
}

/* The budget of the PIT: the reference's deviation along each sequence
 * (along, with actx), described in what. On failure res is ERROR. */
static enum assay_status pit_budget(struct assay_audit *a, struct assay_dist_params *dp,
                                    struct along_ctx *actx, char *what, size_t what_size,
                                    struct assay_check_result *res)
{
    actx->a = a;
    enum assay_status st = scratch_init(&actx->s, a->model->cfg.vocab, dp->out_len);
    actx->order =
        assay_malloc(sizeof(int32_t) * (size_t)a->model->cfg.vocab * (size_t)dp->out_len);
    if (st == ASSAY_OK && actx->order == NULL) {
        scratch_free(&actx->s);
        st = ASSAY_ERR_NOMEM;
    }
    if (st != ASSAY_OK) {
        assay_free(actx->order); /* when the scratch failed and the order did not */
        actx->order = NULL;
        assay_check_error(res, "out of memory");
        return st;
    }
    dp->budget.on = true;
    dp->budget.along = along;
    dp->budget.ctx = actx;
    snprintf(what, what_size, "%g x the reference's CDF deviation at each position",
             ASSAY_AUDIT_BUDGET_FACTOR);
    dp->budget.what = what;
    return ASSAY_OK;
}

/* The check of the given kind run on the server through the gate, under
 * dp; res keeps its name whatever the check writes there. */
static enum assay_status run_dist(struct assay_audit *a, enum dist_kind kind,
                                  const struct assay_adapter *gate,
                                  const struct assay_dist_params *dp,
                                  struct assay_check_result *res)
{
    enum assay_status st;
    char keep_name[96];
    snprintf(keep_name, sizeof keep_name, "%s", res->name);
    if (kind == D_GOF) {
        st = assay_dist_gof(gate, a->model, dp, res);
    } else if (kind == D_PIT) {
        st = assay_dist_pit(gate, a->model, dp, res, NULL);
    } else {
        /* The audit's own bundled engine, with a batch as large as the
         * window (the comparison's has one per server slot); a bundled
         * engine the caller named runs as named. */
        struct assay_adapter wide = {NULL, NULL};
        const struct assay_adapter *b = &a->bundled;
        if (a->bundled_default) {
            char spec[1500];
            struct assay_diag diag;
            assay_diag_clear(&diag);
            snprintf(spec, sizeof spec, "bundled:model=%s,order=%s,batch=%d,%s", a->model_path,
                     a->p.order == ASSAY_SAMPLING_JOINT ? "joint" : "sequential", (int)dp->window,
                     assay_audit_numerics_spec(&a->p));
            if (assay_adapter_open_spec_cached(spec, a->models, &wide, &diag) == ASSAY_OK) {
                b = &wide;
                snprintf(res->engine, sizeof res->engine, "%.150s vs %.160s", a->srv_spec, spec);
            }
        }
        st = assay_dist_homogeneity(gate, b, dp, res);
        assay_adapter_close(&wide);
    }
    snprintf(res->name, sizeof res->name, "%s", keep_name);
    return st;
}

static enum assay_status check_dist(struct assay_audit *a, enum dist_kind kind, bool filtered,
                                    struct assay_check_result *res)
{
    struct assay_dist_params dp = assay_dist_default_params();
    dp.order = a->p.order;
    const struct assay_audit_budget *bud = assay_audit_budget_in_force(a);
    const bool tolerant = budget_in_force(bud);
    dp.seed = assay_seed_derive(a->p.seed, res->name);
    dp.window = 2 * a->p.slots;
    dp.sampling.seeded = true;
    set_dist_shape(a, kind, filtered, &dp);
    /* A top-k boundary the formats can move is within the tie budget; a
     * top-p crossing, within the hard rules' mass (the PIT takes each
     * position's own figure when larger). */
    dp.tol_logit = fmax(dp.tol_logit, bud->gap);
    if (tolerant) {
        dp.tol_top_p = fmax(dp.tol_top_p,
                            hard_rule_mass(bud, (double)dp.sampling.temperature));
    }
    struct allow_scratch s;
    memset(&s, 0, sizeof s);
    struct along_ctx actx;
    memset(&actx, 0, sizeof actx);
    int32_t prompt[8];
    char what[160] = "";
    enum assay_status st = ASSAY_OK;
    if (tolerant && kind != D_PIT) {
        st = first_token_budget(a, kind, filtered, &dp, prompt, &s, what, sizeof what, res);
    } else if (tolerant) {
        st = pit_budget(a, &dp, &actx, what, sizeof what, res);
    }
    if (st != ASSAY_OK) {
        return st;
    }
    snprintf(res->workload, sizeof res->workload,
             "generated by the check: n=%lld, len=%d, prompt=%d%s, t=%g, top_k=%d, top_p=%g, "
             "order=%s, %d in flight",
             (long long)dp.n, (int)dp.out_len, (int)dp.prompt_len,
             kind == D_PIT ? ", 16 prompts" : "", (double)dp.sampling.temperature,
             (int)dp.sampling.top_k, (double)dp.sampling.top_p,
             dp.order == ASSAY_SAMPLING_JOINT ? "joint" : "sequential", (int)dp.window);
    /* Exactly max_tokens, EOS sampled like any token: the gate. */
    struct assay_gate_params gp = assay_gate_default_params();
    gp.continue_token = a->p.eos_token;
    struct assay_adapter gate;
    st = assay_gate_open(&a->srv, &gp, &gate);
    if (st != ASSAY_OK) {
        scratch_free(&s);
        scratch_free(&actx.s);
        assay_check_error(res, "could not open the gate: %s", assay_status_str(st));
        return st;
    }
    st = run_dist(a, kind, &gate, &dp, res);
    struct assay_gate_stats gs;
    assay_gate_get_stats(&gate, &gs);
    assay_adapter_close(&gate);
    scratch_free(&s);
    scratch_free(&actx.s);
    assay_free(actx.order);
    if (gs.n_continued > 0) {
        size_t l = strlen(res->summary);
        snprintf(res->summary + l, sizeof res->summary - l,
                 "; the server stopped at EOS %lld times and was continued after it",
                 (long long)gs.n_continued);
    }
    return st;
}

#define DIST_RUNNER(fn, kind, filtered)                                                            \
    enum assay_status fn(struct assay_verify_ctx *ctx, const struct assay_plan_item *item,         \
                         const struct assay_target *t, const struct assay_workload *w,             \
                         struct assay_check_result *res)                                           \
    {                                                                                              \
        (void)ctx;                                                                                 \
        (void)item;                                                                                \
        (void)w;                                                                                   \
        return check_dist(t->owner, kind, filtered, res);                                          \
    }

DIST_RUNNER(assay_audit_run_gof_t1, D_GOF, false)
DIST_RUNNER(assay_audit_run_gof_filtered, D_GOF, true)
DIST_RUNNER(assay_audit_run_pit_t1, D_PIT, false)
DIST_RUNNER(assay_audit_run_pit_filtered, D_PIT, true)
DIST_RUNNER(assay_audit_run_homogeneity, D_HOMOGENEITY, false)
