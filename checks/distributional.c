/*
 * distributional.c - the exact first-token distributions of the oracle and
 * the checks on them: Pearson goodness of fit (assay_dist_gof), the 2 x k
 * homogeneity of two engines (assay_dist_homogeneity), and Holm's
 * procedure across the family (assay_dist_finalize). See distributional.h;
 * the PIT and the acceptance test have files of their own.
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

/* ---- exact distributions from the oracle -------------------------------- */

bool assay_dist_cut_tie(const double *row, const double *prob, int32_t v,
                        struct assay_dist_tie_info *out)
{
    int32_t kept = -1, dropped = -1;
    for (int32_t y = 0; y < v; y++) {
        if (prob[y] > 0.0 && (kept < 0 || row[y] <= row[kept])) {
            kept = y; /* the lowest logit kept, the highest id among equals */
        } else if (prob[y] == 0.0 && (dropped < 0 || row[y] > row[dropped])) {
            dropped = y; /* the highest logit removed, the lowest id among equals */
        }
    }
    if (kept < 0 || dropped < 0 || row[kept] != row[dropped]) {
        return false;
    }
    double gap = INFINITY;
    for (int32_t y = 0; y < v; y++) {
        if (row[y] != row[kept]) {
            gap = fmin(gap, fabs(row[y] - row[kept]));
        }
    }
    out->kept = kept;
    out->dropped = dropped;
    out->logit = row[kept];
    out->q = prob[kept];
    out->gap = gap;
    return true;
}

/* The lowest logit among the tokens a processed distribution keeps (those
 * of probability above 0 in prob). */
static double lowest_kept(const double *row, int32_t v, const double *prob)
{
    double low = INFINITY;
    for (int32_t y = 0; y < v; y++) {
        low = prob[y] > 0.0 && row[y] < low ? row[y] : low;
    }
    return low;
}

/* The highest logit of a token the distribution prob removed (-inf when
 * it removes none). */
static double highest_removed(const double *row, int32_t v, const double *prob)
{
    double high = -INFINITY;
    for (int32_t y = 0; y < v; y++) {
        high = prob[y] == 0.0 && row[y] > high ? row[y] : high;
    }
    return high;
}

/*
 * Whether the kept set of the distribution of `row` (whose info is inf) is
 * safe from fp32 rounding: a binding top-k cut (n_kept == top_k) needs a
 * logit gap of at least tol_logit; a top-p cut must keep the same number of
 * tokens when top_p moves by tol_top_p either way (a logit error shifts the
 * cumulative masses by about as much), and a logit gap of at least
 * tol_logit between the last token it keeps and the first it removes. A
 * cut that does not bind is safe.
 * With a tie mode (p->tie), a cut that is an exact tie is decided by the
 * tie rule instead of the rounding: safe when the tied logit is at least
 * tol_logit from every other (and, for top-p, the masses are as above).
 */
enum assay_status assay_dist_boundary_safe(const double *row, int32_t v,
                                       const struct assay_dist_params *p,
                                       const struct assay_oracle_dist_info *inf, double *scratch,
                                       bool *safe)
{
    *safe = true;
    const struct assay_sampling *s = &p->sampling;
    bool tied = false;
    if (p->tie != ASSAY_DIST_TIE_NONE) {
        enum assay_status st =
            assay_oracle_distribution(row, v, s, p->order, scratch, NULL);
        if (st != ASSAY_OK) {
            return st;
        }
        struct assay_dist_tie_info ti;
        tied = assay_dist_cut_tie(row, scratch, v, &ti);
        if (tied && !(ti.gap >= p->tol_logit)) {
            *safe = false;
            return ASSAY_OK;
        }
    }
    if (s->top_k > 0 && s->top_k < v && inf->n_kept == s->top_k && !tied &&
        !(inf->top_k_gap >= p->tol_logit)) {
        *safe = false;
        return ASSAY_OK;
    }
    if (s->top_p < 1.0f) {
        for (int side = -1; side <= 1; side += 2) {
            struct assay_sampling moved = *s;
            double tp = (double)s->top_p + side * p->tol_top_p;
            moved.top_p = (float)(tp > 1.0 ? 1.0 : tp < 1e-6 ? 1e-6 : tp);
            struct assay_oracle_dist_info mi;
            enum assay_status st = assay_oracle_distribution(row, v, &moved, p->order, scratch, &mi);
            if (st != ASSAY_OK) {
                return st;
            }
            if (mi.n_kept != inf->n_kept) {
                *safe = false;
            }
        }
        /* A top-p cut keeps a prefix of the engine's order: when the last
         * token it keeps and the first it removes are within tol_logit
         * (an exact tie of no tie mode included), an engine whose logits
         * are off by that much, or that breaks the tie another way (a
         * server's sort), keeps the second instead, whatever the mass
         * margin. */
        bool k_cut = s->top_k > 0 && s->top_k < v && inf->n_kept == s->top_k;
        if (*safe && !tied && !k_cut) {
            enum assay_status st = assay_oracle_distribution(row, v, s, p->order, scratch, NULL);
            if (st != ASSAY_OK) {
                return st;
            }
            double next = highest_removed(row, v, scratch);
            if (next > -INFINITY && !(lowest_kept(row, v, scratch) - next >= p->tol_logit)) {
                *safe = false;
            }
        }
    }
    return ASSAY_OK;
}

struct margins {
    double top_p;  /* smallest margin of a binding top-p cut (mass); inf: none */
    double top_k;  /* smallest logit gap of a binding top-k cut; inf: none (an exact
                      tie's: its distance from the other logits) */
    bool tied;     /* tie mode: the first token's cut is an exact tie */
    struct assay_dist_tie_info tie; /* which, when tied */
};

/* Keep the smallest margin of the cuts that bind (for the report): top-k
 * when it keeps exactly top_k tokens, top-p when it keeps fewer. */
static void margins_add(struct margins *m, const struct assay_dist_params *p, int32_t v,
                        const struct assay_oracle_dist_info *inf)
{
    bool k_on = p->sampling.top_k > 0 && p->sampling.top_k < v;
    if (p->sampling.top_p < 1.0f && (!k_on || inf->n_kept < p->sampling.top_k)) {
        m->top_p = inf->top_p_margin < m->top_p ? inf->top_p_margin : m->top_p;
    }
    if (k_on && inf->n_kept == p->sampling.top_k) {
        m->top_k = inf->top_k_gap < m->top_k ? inf->top_k_gap : m->top_k;
    }
}

/*
 * The exact distribution of the first `positions` output tokens after
 * prompt, into prob (vocab^positions; pairs as x0 * vocab + x1). *ok is false
 * when a boundary tested on the way is closer than the tolerances.
 */
static enum assay_status exact_first_tokens(struct assay_oracle *o, const int32_t *prompt,
                                            const struct assay_dist_params *p, int32_t v,
                                            double *prob, bool *ok, struct margins *mg)
{
    int32_t plen = p->prompt_len;
    int32_t *seq = assay_malloc(sizeof(int32_t) * (size_t)(plen + 1));
    double *rows = assay_malloc(sizeof(double) * (size_t)(plen + 1) * (size_t)v);
    double *p0 = assay_malloc(sizeof(double) * (size_t)v);
    double *scratch = assay_malloc(sizeof(double) * (size_t)v);
    enum assay_status st = ASSAY_OK;
    if (seq == NULL || rows == NULL || p0 == NULL || scratch == NULL) {
        st = ASSAY_ERR_NOMEM;
        goto out;
    }
    *ok = true;
    mg->top_p = INFINITY;
    mg->top_k = INFINITY;
    mg->tied = false;
    memcpy(seq, prompt, sizeof(int32_t) * (size_t)plen);
    st = assay_oracle_logits(o, seq, plen, rows);
    struct assay_oracle_dist_info inf;
    if (st == ASSAY_OK) {
        st = assay_oracle_distribution(rows + (int64_t)(plen - 1) * v, v, &p->sampling, p->order,
                                       p0, &inf);
    }
    if (st != ASSAY_OK) {
        goto out;
    }
    margins_add(mg, p, v, &inf);
    st = assay_dist_boundary_safe(rows + (int64_t)(plen - 1) * v, v, p, &inf, scratch, ok);
    mg->tied = p->tie != ASSAY_DIST_TIE_NONE &&
               assay_dist_cut_tie(rows + (int64_t)(plen - 1) * v, p0, v, &mg->tie);
    if (mg->tied && p->sampling.top_k > 0 && inf.n_kept == p->sampling.top_k) {
        mg->top_k = mg->tie.gap;
    }
    if (p->tie == ASSAY_DIST_TIE_TOP_K || p->tie == ASSAY_DIST_TIE_TOP_P) {
        /* The cut the check is about must be the tie: top-k's when it
         * keeps exactly top_k, top-p's when it keeps fewer; and it must
         * keep two tokens at least, or the chi-squared has one bin and
         * sees nothing. */
        bool k_cut = p->sampling.top_k > 0 && p->sampling.top_k < v &&
                     inf.n_kept == p->sampling.top_k;
        bool p_cut = p->sampling.top_p < 1.0f && !k_cut;
        *ok = *ok && mg->tied && inf.n_kept >= 2 &&
              (p->tie == ASSAY_DIST_TIE_TOP_K ? k_cut : p_cut);
    }
    if (st != ASSAY_OK || p->positions == 1) {
        memcpy(prob, p0, sizeof(double) * (size_t)v);
        goto out;
    }
    for (int64_t c = 0; c < (int64_t)v * v; c++) {
        prob[c] = 0.0;
    }
    /* One pass per possible x0, this rank's x0 only; the rows, the
     * margins and the verdict on the boundaries are brought together. */
    for (int32_t x0 = 0; x0 < v && st == ASSAY_OK && *ok; x0++) {
        if (p0[x0] <= 0.0 || !assay_shard_mine(x0)) {
            continue;
        }
        seq[plen] = x0;
        st = assay_oracle_logits(o, seq, plen + 1, rows);
        if (st == ASSAY_OK) {
            st = assay_oracle_distribution(rows + (int64_t)plen * v, v, &p->sampling, p->order,
                                           prob + (int64_t)x0 * v, &inf);
        }
        if (st == ASSAY_OK) {
            margins_add(mg, p, v, &inf);
            st = assay_dist_boundary_safe(rows + (int64_t)plen * v, v, p, &inf, scratch, ok);
        }
        if (st == ASSAY_OK) {
            for (int32_t x1 = 0; x1 < v; x1++) {
                prob[(int64_t)x0 * v + x1] *= p0[x0];
            }
        }
    }
    if (st == ASSAY_OK) {
        st = assay_shard_allreduce(prob, (int64_t)v * v, ASSAY_SHARD_F64, ASSAY_SHARD_SUM);
    }
    double least[3] = {*ok ? 1.0 : 0.0, mg->top_p, mg->top_k};
    if (st == ASSAY_OK) {
        st = assay_shard_allreduce(least, 3, ASSAY_SHARD_F64, ASSAY_SHARD_MIN);
    }
    *ok = least[0] > 0.0;
    mg->top_p = least[1];
    mg->top_k = least[2];
out:
    assay_free(seq);
    assay_free(rows);
    assay_free(p0);
    assay_free(scratch);
    return st;
}

/* A prompt whose tested boundaries all have comfortable margins, chosen
 * from the oracle alone before any sample is drawn: the first of the
 * candidates of the prompt seed that qualifies. */
static enum assay_status select_prompt(struct assay_oracle *o, const struct assay_dist_params *p,
                                       int32_t v, int32_t *prompt, double *prob,
                                       struct margins *mg)
{
    uint64_t seed = assay_dist_prompt_seed_of(p);
    bool ok = false;
    enum assay_status st = ASSAY_OK;
    for (int32_t cand = 0; cand < p->prompt_tries && !ok && st == ASSAY_OK; cand++) {
        assay_dist_make_prompt(seed, cand, p->prompt_len, prompt);
        st = exact_first_tokens(o, prompt, p, v, prob, &ok, mg);
    }
    return st != ASSAY_OK ? st : ok ? ASSAY_OK : ASSAY_ERR_INVALID;
}

enum assay_status assay_dist_choose_prompt(const struct assay_model *model,
                                           const struct assay_dist_params *p, int32_t *prompt,
                                           double *prob)
{
    char why[200];
    enum assay_status st = assay_dist_check_params(p, why, sizeof why);
    struct assay_oracle *o = NULL;
    if (st == ASSAY_OK) {
        st = assay_oracle_init(&o, model, p->prompt_len + 1);
    }
    if (st == ASSAY_OK) {
        struct margins mg;
        st = select_prompt(o, p, model->cfg.vocab, prompt, prob, &mg);
    }
    assay_oracle_free(o);
    return st;
}

static void describe_category(int64_t c, int32_t positions, int32_t v, char *buf, size_t size)
{
    if (positions == 1) {
        snprintf(buf, size, "token %lld", (long long)c);
    } else {
        snprintf(buf, size, "tokens (%lld, %lld)", (long long)(c / v), (long long)(c % v));
    }
}

void assay_dist_fill_from_test(struct assay_check_result *res, const struct assay_test_result *tr,
                           double alpha)
{
    res->alpha = alpha;
    res->statistic = tr->statistic;
    res->p_value = tr->p_value;
    res->min_tv = tr->min_tv;
    res->power = tr->power;
    res->n = tr->n;
    res->df = tr->df;
}

/* What the statistic says by itself when a hard rule has already failed
 * the check, so that a reader sees whether the bias was large enough to be
 * caught without the rule. */
void assay_dist_statistic_alone(char *buf, size_t size, bool testable, double p_value, double alpha)
{
    if (!testable) {
        snprintf(buf, size, "the statistic alone: no test possible");
    } else {
        snprintf(buf, size, "the statistic alone: p %.3g, %s", p_value,
                 p_value <= alpha ? "fails too" : "passes");
    }
}


int32_t assay_dist_widened_kept(const double *row, int32_t v, const struct assay_dist_params *p,
                                 double *scratch)
{
    struct assay_sampling loose = p->sampling;
    struct assay_oracle_dist_info mi;
    if (loose.top_k > 0 && loose.top_k < v) {
        /* the k-th logit of the cut as it stands, then every token within
         * tol_logit of it */
        loose.top_p = 1.0f;
        if (assay_oracle_distribution(row, v, &loose, p->order, scratch, &mi) != ASSAY_OK) {
            return v;
        }
        double kth = lowest_kept(row, v, scratch);
        int32_t k = 0;
        for (int32_t y = 0; y < v; y++) {
            k += row[y] >= kth - p->tol_logit;
        }
        loose.top_k = k;
    }
    double tp = (double)p->sampling.top_p + p->tol_top_p;
    loose.top_p = (float)(tp > 1.0 ? 1.0 : tp);
    if (assay_oracle_distribution(row, v, &loose, p->order, scratch, &mi) != ASSAY_OK) {
        return v;
    }
    if (loose.top_p >= 1.0f) {
        return mi.n_kept;
    }
    /* A top-p cut keeps a prefix of the engine's order: a token within
     * tol_logit below the last one kept can take its place. */
    double last = lowest_kept(row, v, scratch);
    int32_t n = 0;
    for (int32_t y = 0; y < v; y++) {
        n += row[y] >= last - p->tol_logit;
    }
    if (loose.top_k > 0 && loose.top_k < n) {
        n = loose.top_k;
    }
    return n > mi.n_kept ? n : mi.n_kept;
}

int32_t assay_dist_logit_rank(const double *row, int32_t v, int32_t x)
{
    int32_t r = 0;
    for (int32_t y = 0; y < v; y++) {
        if (row[y] > row[x] || (row[y] == row[x] && y < x)) {
            r++;
        }
    }
    return r;
}

/* ---- goodness of fit --------------------------------------------------- */

/* The TV bins of a tolerance test: at most this many, runs of the oracle's
 * order (tolerance.h: the union bound grows like 2^bins). */
#define TV_BINS 16

/*
 * The goodness of fit under a numerics budget (p->budget.on, one
 * position): the samples' TV from the oracle's prob on TV bins, against
 * the budget's allowance, by assay_tv_tolerance_one. A sample of a token of
 * oracle probability 0 inside the kept set widened by the tolerances (a
 * cut the formats can move) counts against the engine in the bin of such
 * tokens; outside it, it is a hard failure (*n_impossible, *first_bad).
 */
static enum assay_status gof_tolerance(const struct assay_dist_params *p, int32_t v,
                                       const double *row, const double *prob,
                                       const int64_t *counts, double *scratch,
                                       struct assay_check_result *res, int64_t *n_impossible,
                                       int64_t *first_bad)
{
    int64_t *order = assay_malloc(sizeof(int64_t) * (size_t)v);
    int32_t *bin_of = assay_malloc(sizeof(int32_t) * (size_t)v);
    double bin_prob[TV_BINS + 1];
    int64_t bin_counts[TV_BINS + 1];
    int32_t n_bins = 0;
    enum assay_status st = order == NULL || bin_of == NULL ? ASSAY_ERR_NOMEM : ASSAY_OK;
    if (st == ASSAY_OK) {
        st = assay_tv_bins(prob, v, TV_BINS, order, bin_of, bin_prob, &n_bins);
    }
    int64_t n_pos = 0;
    *n_impossible = 0;
    *first_bad = -1;
    if (st == ASSAY_OK) {
        const int32_t n_wide = assay_dist_widened_kept(row, v, p, scratch);
        memset(bin_counts, 0, sizeof bin_counts);
        for (int32_t x = 0; x < v; x++) {
            n_pos += prob[x] > 0.0;
            if (counts[x] == 0) {
                continue;
            }
            if (prob[x] == 0.0 && assay_dist_logit_rank(row, v, x) >= n_wide) {
                *n_impossible += counts[x];
                *first_bad = *first_bad < 0 ? x : *first_bad;
                continue;
            }
            bin_counts[bin_of[x]] += counts[x];
        }
        struct assay_tolerance_result tr;
        int64_t n_in = 0;
        for (int32_t b = 0; b < n_bins; b++) {
            n_in += bin_counts[b];
        }
        if (n_in == 0) {
            st = ASSAY_ERR_INVALID;
        } else {
            st = assay_tv_tolerance_one(bin_counts, bin_prob, n_bins, p->budget.tv, p->alpha,
                                        p->power, &tr);
        }
        if (st == ASSAY_OK) {
            assay_dist_fill_tolerance(res, &tr, &p->budget, "TV");
            assay_evidence_tv(&res->evidence, order, n_pos, bin_of, bin_prob, n_bins, bin_counts,
                              NULL, 0);
        }
    }
    assay_free(order);
    assay_free(bin_of);
    return st;
}

/* What assay_dist_gof carries from one phase to the next: the buffers and
 * the oracle, the prompt's margins and bins, the samples, their counts by
 * category and the samples the rules single out. */
struct gof_check {
    const struct assay_dist_params *p;
    struct assay_check_result *res;
    int32_t v;
    int64_t k;        /* categories: tokens, or pairs of them */
    int32_t *prompt;  /* (prompt_len) */
    double *prob;     /* (k) the oracle's exact distribution after the prompt */
    int64_t *counts;  /* (k) the samples of each category */
    double *row;      /* (prompt_len, v) the oracle's logits along the prompt */
    double *scratch;  /* (v) */
    struct assay_oracle *o;
    struct assay_gof_bins *bins;
    struct sample_set ss;
    struct margins mg;
    uint64_t seed0;   /* request i's seed is seed0 + i */
    char spec[160];   /* the proposals accepted, for a speculative engine */
    bool twin_rule;   /* the tie mode's rule for an exact tie at the cut applies */
    int64_t first_bad, first_req, n_twin;
};

/* The buffers and the oracle. On failure res is ERROR with the reason. */
static enum assay_status gof_setup(struct gof_check *g, const struct assay_model *model)
{
    const struct assay_dist_params *p = g->p;
    g->prompt = assay_malloc(sizeof(int32_t) * (size_t)p->prompt_len);
    g->prob = assay_malloc(sizeof(double) * (size_t)g->k);
    g->counts = assay_calloc((size_t)g->k, sizeof(int64_t));
    g->row = assay_malloc(sizeof(double) * (size_t)p->prompt_len * (size_t)g->v);
    g->scratch = assay_malloc(sizeof(double) * (size_t)g->v);
    if (g->prompt == NULL || g->prob == NULL || g->counts == NULL || g->row == NULL ||
        g->scratch == NULL) {
        assay_dist_set_error(g->res, ASSAY_ERR_NOMEM, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    enum assay_status st = assay_oracle_init(&g->o, model, p->prompt_len + 1);
    if (st != ASSAY_OK) {
        assay_dist_set_error(g->res, st, "the oracle could not start");
    }
    return st;
}

/* The prompt of the test and its exact distribution (g->prompt, g->prob,
 * g->mg): the caller's, or the first candidate whose cuts are safe. On
 * failure res is ERROR with the reason; where no candidate is safe and the
 * caller allows it, res is SKIP instead, *skipped is set and ASSAY_OK
 * returned. */
static enum assay_status gof_choose_prompt(struct gof_check *g, bool *skipped)
{
    const struct assay_dist_params *p = g->p;
    struct assay_check_result *res = g->res;
    enum assay_status st;
    g->mg = (struct margins){.top_p = INFINITY, .top_k = INFINITY};
    if (p->prompt != NULL) {
        /* The caller's prompt: its boundaries are the caller's to judge
         * (under a budget they count in the allowance); without a budget
         * they must still be safe from fp32 rounding. */
        bool ok = false;
        memcpy(g->prompt, p->prompt, sizeof(int32_t) * (size_t)p->prompt_len);
        st = exact_first_tokens(g->o, g->prompt, p, g->v, g->prob, &ok, &g->mg);
        if (st == ASSAY_OK && !ok && !p->budget.on) {
            st = ASSAY_ERR_INVALID;
        }
        if (st != ASSAY_OK) {
            assay_dist_set_error(res, st, "the given prompt's distribution could not be used");
        }
        return st;
    }
    st = select_prompt(g->o, p, g->v, g->prompt, g->prob, &g->mg);
    if (st != ASSAY_OK) {
        char why[400];
        snprintf(why, sizeof why,
                 "no prompt among %d candidates keeps every top-k/top-p boundary beyond the "
                 "tolerances (top-p %.2g, top-k %.2g logits)",
                 (int)p->prompt_tries, p->tol_top_p, p->tol_logit);
        if (st == ASSAY_ERR_INVALID && p->no_prompt_skip != NULL) {
            assay_check_skip(res, "%s: %s", why, p->no_prompt_skip);
            st = ASSAY_OK;
            *skipped = true;
        } else {
            assay_dist_set_error(res, st, why);
        }
    }
    return st;
}

/* The oracle's logits along the prompt where a budget or a tie mode reads
 * them, and without a budget the chi-squared's bins. On failure res is
 * ERROR. */
static enum assay_status gof_make_bins(struct gof_check *g)
{
    const struct assay_dist_params *p = g->p;
    enum assay_status st = ASSAY_OK;
    if (p->budget.on || p->tie != ASSAY_DIST_TIE_NONE) {
        st = assay_oracle_logits(g->o, g->prompt, p->prompt_len, g->row);
    }
    if (st == ASSAY_OK && !p->budget.on) {
        st = assay_gof_bins_make(g->prob, (int32_t)g->k, (double)p->n, 5.0, &g->bins);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(g->res, st, "could not make the bins");
    }
    return st;
}

/* The samples counted by category into g->counts, the first of oracle
 * probability 0 in g->first_bad (its request in g->first_req). With a tie
 * mode, the token an exact tie at the cut drops (the kept set widened by
 * the tolerances holds it) is no hard failure; its samples (g->n_twin)
 * count against the bins (assay_gof_test_missing). */
static void gof_count(struct gof_check *g)
{
    const struct assay_dist_params *p = g->p;
    const int32_t v = g->v;
    const double *last_row = g->row + (int64_t)(p->prompt_len - 1) * v;
    g->twin_rule = p->tie != ASSAY_DIST_TIE_NONE && g->mg.tied;
    g->first_bad = -1;
    g->first_req = -1;
    g->n_twin = 0;
    for (int64_t i = 0; i < p->n; i++) {
        const int32_t *t = g->ss.tokens + i * p->out_len;
        if (t[0] < 0 || t[0] >= v || (p->positions == 2 && (t[1] < 0 || t[1] >= v))) {
            continue; /* counted among the bad deliveries */
        }
        int64_t c = p->positions == 1 ? t[0] : (int64_t)t[0] * v + t[1];
        if (g->twin_rule && g->prob[c] == 0.0 && last_row[c] == g->mg.tie.logit) {
            g->n_twin++;
            continue;
        }
        g->counts[c]++;
        if (g->prob[c] == 0.0 && g->first_bad < 0) {
            g->first_bad = c;
            g->first_req = i;
        }
    }
}

/* Under a numerics budget: the tolerance test (gof_tolerance), the
 * findings and the summary. ASSAY_OK, or the test's status (res is then
 * ERROR). */
static enum assay_status gof_judge_budget(struct gof_check *g)
{
    const struct assay_dist_params *p = g->p;
    struct assay_check_result *res = g->res;
    const int32_t v = g->v;
    char alone[96];
    int64_t n_imp = 0, first_imp = -1;
    const double *last = g->row + (int64_t)(p->prompt_len - 1) * v;
    enum assay_status st =
        gof_tolerance(p, v, last, g->prob, g->counts, g->scratch, res, &n_imp, &first_imp);
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the tolerance test failed");
        return st;
    }
    res->n_impossible = n_imp;
    res->statistic_fired = res->p_value <= p->alpha;
    res->rule_fired = g->ss.n_bad > 0 || n_imp > 0;
    assay_dist_statistic_alone(alone, sizeof alone, true, res->p_value, p->alpha);
    if (g->ss.n_bad > 0) {
        assay_check_fail(res, "%lld requests delivered wrongly; first: %s; %s",
                         (long long)g->ss.n_bad, g->ss.bad, alone);
    } else if (n_imp > 0) {
        assay_check_fail(res,
                         "zero-probability rule: %lld samples of tokens the oracle's cut "
                         "removes and no cut the budget allows keeps (first: token %lld, "
                         "logit rank %d); %s",
                         (long long)n_imp, (long long)first_imp,
                         (int)assay_dist_logit_rank(last, v, (int32_t)first_imp), alone);
    } else if (res->statistic_fired) {
        assay_check_fail(res,
                         "TV from the oracle %.4f (95%% interval %.4f to %.4f) beyond the "
                         "budget %.4f: p %.3g <= alpha %.0e",
                         res->tol.estimate, res->tol.ci_lo, res->tol.ci_hi, res->tol.budget,
                         res->p_value, p->alpha);
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld p %.3g | TV %.4f [%.4f, %.4f] within budget %.4f (%s); "
             "detects TV %.4f beyond it; first token after %d, T %.2g top-k %d top-p %.2g; "
             "%d bins",
             p->alpha, (long long)res->n, res->p_value, res->tol.estimate, res->tol.ci_lo,
             res->tol.ci_hi, res->tol.budget,
             p->budget.what != NULL ? p->budget.what : "the formats",
             res->tol.min_excess, (int)p->prompt_len, (double)p->sampling.temperature,
             (int)p->sampling.top_k, (double)p->sampling.top_p, (int)res->df + 1);
    return ASSAY_OK;
}

/* The finding of a chi-squared at or below alpha: the bin furthest from
 * its expectation, for the reader, or the samples of the token an exact
 * tie at the cut removes where there are any. */
static void gof_report_deviation(const struct gof_check *g, const struct assay_test_result *tr)
{
    const struct assay_dist_params *p = g->p;
    const struct assay_gof_bins *bins = g->bins;
    double worst = 0.0;
    int64_t wc = -1;
    for (int64_t c = 0; c < g->k; c++) {
        if (bins->bin_of[c] >= 0 && bins->bin_of[c] < bins->n_own) {
            double e = bins->prob[bins->bin_of[c]] * (double)tr->n;
            double z = (double)g->counts[c] - e;
            if (fabs(z) / sqrt(e) > worst) {
                worst = fabs(z) / sqrt(e);
                wc = c;
            }
        }
    }
    if (wc >= 0 && g->n_twin > 0) {
        assay_check_fail(
            g->res,
            "chi-squared %.1f on %d df, p %.3g <= alpha %.0e; %lld samples (%.2f%%) of token "
            "%d, which the exact tie at the cut removes (tie rule: token %d, the lower id, "
            "kept; oracle probability %.5f), counted against the bins",
            tr->statistic, (int)tr->df, tr->p_value, p->alpha, (long long)g->n_twin,
            100.0 * (double)g->n_twin / (double)tr->n, (int)g->mg.tie.dropped,
            (int)g->mg.tie.kept, g->mg.tie.q);
    } else if (wc >= 0) {
        char cat[64];
        describe_category(wc, p->positions, g->v, cat, sizeof cat);
        assay_check_fail(
            g->res,
            "chi-squared %.1f on %d df, p %.3g <= alpha %.0e; largest deviation: %s "
            "observed %lld times, expected %.1f (oracle probability %.5f)",
            tr->statistic, (int)tr->df, tr->p_value, p->alpha, cat, (long long)g->counts[wc],
            g->prob[wc] * (double)tr->n, g->prob[wc]);
    } else {
        assay_check_fail(g->res, "chi-squared %.1f on %d df, p %.3g <= alpha %.0e",
                         tr->statistic, (int)tr->df, tr->p_value, p->alpha);
    }
}

/* The chi-squared's result into res with its evidence, and the findings:
 * wrong deliveries, samples of probability 0, no test possible, or the
 * statistic. ASSAY_OK, or ASSAY_ERR_INVALID (res ERROR) where no test was
 * possible. */
static enum assay_status gof_judge_chi_squared(struct gof_check *g,
                                               const struct assay_test_result *tr)
{
    const struct assay_dist_params *p = g->p;
    struct assay_check_result *res = g->res;
    char cat[64], alone[96];
    assay_dist_fill_from_test(res, tr, p->alpha);
    assay_evidence_gof(&res->evidence, g->bins, g->counts, tr->n - tr->n_impossible,
                       p->positions == 2 ? g->v : 0);
    res->n_impossible = tr->n_impossible;
    res->statistic_fired = !tr->degenerate && tr->p_value <= p->alpha;
    res->rule_fired = g->ss.n_bad > 0 || tr->n_impossible > 0;
    assay_dist_statistic_alone(alone, sizeof alone, !tr->degenerate, tr->p_value, p->alpha);
    if (g->ss.n_bad > 0) {
        assay_check_fail(res, "%lld requests delivered wrongly; first: %s; %s",
                         (long long)g->ss.n_bad, g->ss.bad, alone);
    } else if (tr->n_impossible > 0) {
        describe_category(g->first_bad, p->positions, g->v, cat, sizeof cat);
        assay_check_fail(
            res,
            "zero-probability rule: %lld samples of categories with oracle probability 0 "
            "(first: request %lld, seed %llu, gave %s; every binding top-k/top-p cut of this "
            "prompt is at least %.1e (mass) / %.1e (logit) from deciding otherwise, beyond the "
            "fp32 tolerance); %s",
            (long long)tr->n_impossible, (long long)g->first_req,
            (unsigned long long)(g->seed0 + (uint64_t)g->first_req), cat, g->mg.top_p,
            g->mg.top_k, alone);
    } else if (tr->degenerate) {
        assay_check_error(
            res,
            "no chi-squared test possible (%d bins): the sampling parameters leave too few "
            "likely categories",
            (int)tr->n_bins);
        return ASSAY_ERR_INVALID;
    } else if (tr->p_value <= p->alpha) {
        gof_report_deviation(g, tr);
    }
    return ASSAY_OK;
}

/* The chi-squared's summary: the test, the prompt and the sampling, the
 * bins and the cuts' margins, the proposals accepted, and an exact tie at
 * the cut. */
static void gof_summary(const struct gof_check *g, const struct assay_test_result *tr)
{
    const struct assay_dist_params *p = g->p;
    struct assay_check_result *res = g->res;
    char test[96];
    if (tr->one_bin) {
        /* One bin: the exact binomial test of the samples off the top. */
        snprintf(test, sizeof test, "binomial: %.0f of %.0f off the most likely (expected %.3g)",
                 tr->statistic, tr->n_eff, tr->n_eff * (1.0 - g->bins->top_prob));
    } else {
        snprintf(test, sizeof test, "chi2 %.1f df %d", tr->statistic, (int)tr->df);
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld p %.3g min-TV %.4f | %s; %s %d, T %.2g top-k %d "
             "top-p %.2g; %d bins (%d pooled), cut margins p %.1e k %.1e",
             p->alpha, (long long)tr->n, tr->p_value, tr->min_tv, test,
             p->positions == 1 ? "first token" : "first pair", (int)p->prompt_len,
             (double)p->sampling.temperature, (int)p->sampling.top_k,
             (double)p->sampling.top_p, (int)tr->n_bins, (int)g->bins->n_pooled, g->mg.top_p,
             g->mg.top_k);
    assay_dist_append(res->summary, sizeof res->summary, g->spec);
    if (g->twin_rule) {
        size_t l = strlen(res->summary);
        snprintf(res->summary + l, sizeof res->summary - l,
                 "; exact tie: %d kept (p %.3f), %d drawn %lld times",
                 (int)g->mg.tie.kept, g->mg.tie.q, (int)g->mg.tie.dropped, (long long)g->n_twin);
    }
}

enum assay_status assay_dist_gof(const struct assay_adapter *a, const struct assay_model *model,
                                 const struct assay_dist_params *p,
                                 struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    char why[400];
    enum assay_status st = assay_dist_check_params(p, why, sizeof why);
    if (st == ASSAY_OK && p->budget.on && p->positions != 1) {
        snprintf(why, sizeof why, "a numerics budget is tested on the first token only");
        st = ASSAY_ERR_INVALID;
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, why);
        return st;
    }
    assay_stats_init();
    struct gof_check g;
    memset(&g, 0, sizeof g);
    g.p = p;
    g.res = res;
    g.v = model->cfg.vocab;
    g.k = p->positions == 1 ? g.v : (int64_t)g.v * g.v;
    bool skipped = false;
    st = gof_setup(&g, model);
    if (st == ASSAY_OK) {
        st = gof_choose_prompt(&g, &skipped);
    }
    if (st != ASSAY_OK || skipped) {
        goto out;
    }
    st = gof_make_bins(&g);
    if (st != ASSAY_OK) {
        goto out;
    }
    struct request_source src = {g.prompt, 1, p->prompt_len, p->sampling,
                                 assay_seed_derive(p->seed, "requests")};
    g.seed0 = src.seed0;
    st = assay_dist_draw_samples(a, &src, p->n, p->out_len, p->window, true, &g.ss, why,
                                 sizeof why);
    if (st != ASSAY_OK) {
        assay_dist_draw_failed(res, &g.ss, st, why);
        goto out;
    }
    assay_dist_judge_delivery(res, &g.ss, "requests");
    struct assay_spec_tally tally; /* no bonus cells: nothing allocated, nothing fails */
    (void)assay_dist_spec_tally(&g.ss, p->n, p->out_len, false, &tally);
    assay_dist_spec_rate(&tally, g.spec, sizeof g.spec);
    gof_count(&g);
    res->n_requests = p->n;
    res->n_tokens = p->n * p->out_len;
    if (p->budget.on) {
        st = gof_judge_budget(&g);
        goto out;
    }
    struct assay_test_result tr;
    st = assay_gof_test_missing(g.bins, g.counts, g.n_twin, p->alpha, p->power, &tr);
    if (st == ASSAY_OK && tr.degenerate && g.bins->n_bins == 1 && g.bins->top >= 0) {
        /* A near-deterministic distribution: the exact binomial test. */
        st = assay_gof_test_one_bin(g.bins, g.counts, g.n_twin, p->alpha, p->power, &tr);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the chi-squared test failed");
        goto out;
    }
    st = gof_judge_chi_squared(&g, &tr);
    gof_summary(&g, &tr);
out:
    assay_gof_bins_free(g.bins);
    assay_dist_sample_set_free(&g.ss);
    assay_oracle_free(g.o);
    assay_free(g.prompt);
    assay_free(g.prob);
    assay_free(g.counts);
    assay_free(g.row);
    assay_free(g.scratch);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}

/* ---- two engines ---------------------------------------------------------- */

static enum assay_status count_first_tokens(const struct assay_adapter *a,
                                            const struct assay_dist_params *p,
                                            const int32_t *prompt, uint64_t seed0, int32_t v,
                                            int64_t *counts, int64_t *n_bad, char *bad,
                                            size_t bad_size, bool *engine_fault, char *why,
                                            size_t size)
{
    struct request_source src = {prompt, 1, p->prompt_len, p->sampling, seed0};
    struct sample_set ss;
    enum assay_status st =
        assay_dist_draw_samples(a, &src, p->n, p->out_len, p->window, false, &ss, why, size);
    *engine_fault = ss.engine_fault;
    if (st != ASSAY_OK) {
        return st;
    }
    for (int64_t i = 0; i < p->n; i++) {
        const int32_t *t = ss.tokens + i * p->out_len;
        if (t[0] < 0 || t[0] >= v || (p->positions == 2 && (t[1] < 0 || t[1] >= v))) {
            continue;
        }
        counts[p->positions == 1 ? t[0] : (int64_t)t[0] * v + t[1]]++;
    }
    *n_bad = ss.n_bad;
    snprintf(bad, bad_size, "%s", ss.bad);
    assay_dist_sample_set_free(&ss);
    return ASSAY_OK;
}

/* Homogeneity under a numerics budget: the two samples' TV on TV bins
 * fixed from p->budget.bins_from, against the budget's allowance
 * (assay_tv_tolerance_two). */
static enum assay_status homogeneity_tolerance(const struct assay_dist_params *p, int32_t v,
                                               const int64_t *ca, const int64_t *cb,
                                               struct assay_check_result *res)
{
    if (p->budget.bins_from == NULL || p->positions != 1) {
        return ASSAY_ERR_INVALID;
    }
    int64_t *order = assay_malloc(sizeof(int64_t) * (size_t)v);
    int32_t *bin_of = assay_malloc(sizeof(int32_t) * (size_t)v);
    double bin_prob[TV_BINS + 1];
    int64_t a[TV_BINS + 1] = {0}, b[TV_BINS + 1] = {0};
    int32_t n_bins = 0;
    enum assay_status st = order == NULL || bin_of == NULL ? ASSAY_ERR_NOMEM : ASSAY_OK;
    if (st == ASSAY_OK) {
        st = assay_tv_bins(p->budget.bins_from, v, TV_BINS, order, bin_of, bin_prob, &n_bins);
    }
    if (st == ASSAY_OK) {
        int64_t n_pos = 0;
        for (int32_t x = 0; x < v; x++) {
            a[bin_of[x]] += ca[x];
            b[bin_of[x]] += cb[x];
            n_pos += p->budget.bins_from[x] > 0.0;
        }
        struct assay_tolerance_result tr;
        st = assay_tv_tolerance_two(a, b, n_bins, p->budget.tv, p->alpha, p->power, &tr);
        if (st == ASSAY_OK) {
            assay_dist_fill_tolerance(res, &tr, &p->budget, "TV");
            assay_evidence_tv(&res->evidence, order, n_pos, bin_of, bin_prob, n_bins, a, b, 0);
        }
    }
    assay_free(order);
    assay_free(bin_of);
    return st;
}

enum assay_status assay_dist_homogeneity(const struct assay_adapter *a,
                                         const struct assay_adapter *b,
                                         const struct assay_dist_params *p,
                                         struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    char why[400];
    enum assay_status st = assay_dist_check_params(p, why, sizeof why);
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, why);
        return st;
    }
    assay_stats_init();
    struct assay_adapter_info ia, ib;
    assay_adapter_get_info(a, &ia);
    assay_adapter_get_info(b, &ib);
    if (ia.vocab <= 0 || ia.vocab != ib.vocab) {
        assay_dist_set_error(res, ASSAY_ERR_INVALID, "the two engines must state one and the same vocabulary");
        return ASSAY_ERR_INVALID;
    }
    const int32_t v = ia.vocab;
    const int64_t k = p->positions == 1 ? v : (int64_t)v * v;
    int32_t *prompt = assay_malloc(sizeof(int32_t) * (size_t)p->prompt_len);
    int64_t *ca = assay_calloc((size_t)k, sizeof(int64_t));
    int64_t *cb = assay_calloc((size_t)k, sizeof(int64_t));
    if (prompt == NULL || ca == NULL || cb == NULL) {
        st = ASSAY_ERR_NOMEM;
        assay_dist_set_error(res, st, "out of memory");
        goto out;
    }
    if (p->prompt != NULL) {
        memcpy(prompt, p->prompt, sizeof(int32_t) * (size_t)p->prompt_len);
    } else {
        assay_dist_make_prompt(assay_dist_prompt_seed_of(p), 0, p->prompt_len, prompt);
    }
    int64_t bad_a = 0, bad_b = 0;
    char msg_a[300], msg_b[300];
    /* Disjoint seeds: the two samples must be independent. */
    bool fault = false;
    const char *failing = "A";
    st = count_first_tokens(a, p, prompt, assay_seed_derive(p->seed, "requests-a"), v, ca, &bad_a,
                            msg_a, sizeof msg_a, &fault, why, sizeof why);
    if (st == ASSAY_OK) {
        failing = "B";
        st = count_first_tokens(b, p, prompt, assay_seed_derive(p->seed, "requests-b"), v, cb,
                                &bad_b, msg_b, sizeof msg_b, &fault, why, sizeof why);
    }
    if (st != ASSAY_OK && fault) {
        assay_check_fail(res, "engine %s failed while sampling: %s (%s)", failing, why,
                         assay_status_str(st));
        goto out;
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, why);
        goto out;
    }
    if (bad_a > 0 || bad_b > 0) {
        assay_check_fail(res, "engine %s delivered %lld requests wrongly: %s",
                         bad_a > 0 ? "A" : "B", (long long)(bad_a > 0 ? bad_a : bad_b),
                         bad_a > 0 ? msg_a : msg_b);
    }
    if (p->budget.on) {
        st = homogeneity_tolerance(p, v, ca, cb, res);
        if (st != ASSAY_OK) {
            assay_dist_set_error(res, st, "the tolerance test failed");
            goto out;
        }
        res->n_requests = 2 * p->n;
        res->n_tokens = 2 * p->n * p->out_len;
        res->statistic_fired = res->p_value <= p->alpha;
        res->rule_fired = bad_a > 0 || bad_b > 0;
        if (!res->rule_fired && res->statistic_fired) {
            assay_check_fail(res,
                             "the engines' samples are a TV of %.4f apart (95%% interval %.4f "
                             "to %.4f), beyond the budget %.4f: p %.3g <= alpha %.0e",
                             res->tol.estimate, res->tol.ci_lo, res->tol.ci_hi, res->tol.budget,
                             res->p_value, p->alpha);
        }
        snprintf(res->summary, sizeof res->summary,
                 "alpha %.0e n %lld+%lld p %.3g | TV between them %.4f [%.4f, %.4f] within "
                 "budget %.4f (%s); detects TV %.4f beyond it; first token, T %.2g top-k %d "
                 "top-p %.2g; %d bins",
                 p->alpha, (long long)p->n, (long long)p->n, res->p_value, res->tol.estimate,
                 res->tol.ci_lo, res->tol.ci_hi, res->tol.budget,
                 p->budget.what != NULL ? p->budget.what : "the formats", res->tol.min_excess,
                 (double)p->sampling.temperature, (int)p->sampling.top_k,
                 (double)p->sampling.top_p, (int)res->df + 1);
        goto out;
    }
    struct assay_test_result tr;
    st = assay_homogeneity_test(ca, cb, (int32_t)k, p->alpha, p->power, 5.0, &tr);
    if (st == ASSAY_OK && tr.degenerate && tr.n_bins == 1) {
        /* Both near-deterministic: Fisher's exact test off the top. */
        st = assay_homogeneity_test_one_bin(ca, cb, (int32_t)k, p->alpha, p->power, &tr);
    }
    if (st != ASSAY_OK) {
        assay_dist_set_error(res, st, "the homogeneity test failed");
        goto out;
    }
    assay_dist_fill_from_test(res, &tr, p->alpha);
    assay_evidence_homogeneity(&res->evidence, ca, cb, (int32_t)k, 5.0, p->positions == 2 ? v : 0);
    res->min_tv = tr.min_tv;
    res->n_requests = 2 * p->n;
    res->n_tokens = 2 * p->n * p->out_len;
    res->statistic_fired = !tr.degenerate && tr.p_value <= p->alpha;
    res->rule_fired = bad_a > 0 || bad_b > 0;
    if (bad_a > 0 || bad_b > 0) {
        /* the FAIL is stated above */
    } else if (tr.degenerate) {
        assay_check_error(res, "no homogeneity test possible (%d bins)", (int)tr.n_bins);
        st = ASSAY_ERR_INVALID;
    } else if (tr.p_value <= p->alpha) {
        if (tr.one_bin) {
            assay_check_fail(res,
                             "the engines' samples differ: %.0f of the first's off the most "
                             "frequent token, by Fisher's exact test p %.3g <= alpha %.0e",
                             tr.statistic, tr.p_value, p->alpha);
        } else {
            assay_check_fail(
                res, "the engines' samples differ: chi-squared %.1f on %d df, p %.3g <= alpha "
                     "%.0e",
                tr.statistic, (int)tr.df, tr.p_value, p->alpha);
        }
    }
    char test[96];
    if (tr.one_bin) {
        snprintf(test, sizeof test, "one bin, Fisher's exact test off the most frequent: %.0f "
                 "of the first engine's", tr.statistic);
    } else {
        snprintf(test, sizeof test, "2 x %d chi2 %.1f df %d", (int)tr.n_bins, tr.statistic,
                 (int)tr.df);
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld+%lld p %.3g min-TV %.4f%s | %s; %s; T %.2g top-k %d top-p %.2g",
             p->alpha, (long long)p->n, (long long)p->n, tr.p_value, tr.min_tv,
             tr.one_bin ? " (approximate)" : "", test,
             p->positions == 1 ? "first token" : "first pair", (double)p->sampling.temperature,
             (int)p->sampling.top_k, (double)p->sampling.top_p);
out:
    assay_free(prompt);
    assay_free(ca);
    assay_free(cb);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}

/* ---- Holm across the family ---------------------------------------------- */

double assay_dist_finalize(struct assay_check_result *results, size_t n)
{
    size_t m = 0;
    double alpha = INFINITY;
    for (size_t i = 0; i < n; i++) {
        const struct assay_check_result *r = &results[i];
        if (r->family == ASSAY_FAMILY_DISTRIBUTIONAL &&
            (r->verdict == ASSAY_VERDICT_PASS || r->verdict == ASSAY_VERDICT_FAIL) &&
            r->p_value >= 0.0 && r->p_value <= 1.0 && r->alpha > 0.0 && r->alpha < 1.0) {
            m++;
            alpha = r->alpha < alpha ? r->alpha : alpha;
        }
    }
    if (m == 0) {
        return 0.0;
    }
    double *pv = assay_malloc(sizeof(double) * m);
    double *adj = assay_malloc(sizeof(double) * m);
    size_t *idx = assay_malloc(sizeof(size_t) * m);
    if (pv == NULL || adj == NULL || idx == NULL) {
        assay_free(pv);
        assay_free(adj);
        assay_free(idx);
        return -1.0;
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        const struct assay_check_result *r = &results[i];
        if (r->family == ASSAY_FAMILY_DISTRIBUTIONAL &&
            (r->verdict == ASSAY_VERDICT_PASS || r->verdict == ASSAY_VERDICT_FAIL) &&
            r->p_value >= 0.0 && r->p_value <= 1.0 && r->alpha > 0.0 && r->alpha < 1.0) {
            pv[j] = r->p_value;
            idx[j++] = i;
        }
    }
    double family = alpha * (double)m;
    family = family < 0.5 ? family : 0.5;
    if (assay_holm_adjusted(pv, m, adj) != ASSAY_OK) {
        family = -1.0;
    } else {
        for (j = 0; j < m; j++) {
            struct assay_check_result *r = &results[idx[j]];
            r->p_adjusted = adj[j];
            r->statistic_fired = r->p_value <= r->alpha || adj[j] <= family;
            size_t l = strlen(r->summary);
            snprintf(r->summary + l, sizeof r->summary - l, " | Holm p %.3g (family %.0e, m %zu)",
                     adj[j], family, m);
            if (adj[j] <= family && r->verdict == ASSAY_VERDICT_PASS) {
                assay_check_fail(
                    r,
                    "Holm's procedure over the %zu distributional checks rejects it: p %.3g, "
                    "adjusted %.3g <= family-wise level %.0e",
                    m, r->p_value, adj[j], family);
            }
        }
    }
    assay_free(pv);
    assay_free(adj);
    assay_free(idx);
    return family;
}

