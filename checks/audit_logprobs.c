/*
 * audit_logprobs.c - the audit's logprobs check (audit.equiv.logprobs; see
 * audit.h): the server's greedy tokens and top logprobs against the
 * oracle's log-softmax, each within the logprob budget, its mean KLD
 * tested against the reference's (the mean-KLD rule), and the figures of
 * both series on the same positions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/workload.h"
#include "divergence.h"
#include "equivalence.h"
#include "harness.h"

#include "audit_internal.h"

/* The top logprobs the server sent, per request and position, and the
 * reference's log-softmax at the same tokens (reference_at_positions). */
struct lp_rec {
    int32_t req, pos, n_top;
    double token_lp;
    struct assay_openai_logprob top[ASSAY_OPENAI_MAX_TOP];
    /* per variant of the reference (audit.h: fp32 lanes, fp16 accumulation) */
    bool have_ref[2];    /* the reference computed this position */
    int32_t ref_best[2]; /* its argmax */
    double ref_lp[2][ASSAY_OPENAI_MAX_TOP]; /* its logprob of top[j].token (NaN outside the
                                               vocabulary) */
};

struct lp_store {
    struct lp_rec *rec;
    int64_t n, cap;
    bool oom;
};

static void on_logprobs(void *ctx, uint64_t id, int32_t index, int32_t token, double logprob,
                        const struct assay_openai_logprob *top, int32_t n_top)
{
    struct lp_store *s = ctx;
    (void)token;
    if (s->oom) {
        return;
    }
    if (s->n == s->cap) {
        int64_t cap = s->cap > 0 ? 2 * s->cap : 1024;
        struct lp_rec *r = assay_realloc(s->rec, sizeof *r * (size_t)cap);
        if (r == NULL) {
            s->oom = true;
            return;
        }
        s->rec = r;
        s->cap = cap;
    }
    struct lp_rec *r = &s->rec[s->n++];
    r->req = (int32_t)id;
    r->pos = index;
    r->token_lp = logprob;
    r->n_top = n_top < ASSAY_OPENAI_MAX_TOP ? n_top : ASSAY_OPENAI_MAX_TOP;
    memcpy(r->top, top, sizeof top[0] * (size_t)r->n_top);
    r->have_ref[0] = r->have_ref[1] = false;
}

/* The server's record of (request id, position), or NULL. */
static struct lp_rec *find_lp(const struct lp_store *s, int32_t req, int32_t pos)
{
    for (int64_t k = 0; k < s->n; k++) {
        if (s->rec[k].req == req && s->rec[k].pos == pos) {
            return &s->rec[k];
        }
    }
    return NULL;
}

/* One variant of reference_at_positions below (ref, lsm and top its
 * scratch). */
static enum assay_status reference_variant_at_positions(struct assay_audit *a, int32_t var,
                                                        const struct assay_workload *w,
                                                        const struct assay_transcript *t,
                                                        struct lp_store *s, double *ref,
                                                        double *lsm, int32_t *top, int32_t n_top,
                                                        int32_t *n_skipped)
{
    const int32_t v = a->model->cfg.vocab;
    enum assay_status st = ASSAY_OK;
    double max_abs = 0.0;
    int64_t n_positions = 0;
    assay_audit_prefetch(a, w, t, var);
    for (int32_t i = 0; i < w->n && st == ASSAY_OK; i++) {
        const struct assay_workload_request *wr = &w->reqs[i];
        const struct assay_transcript_req *q = &t->reqs[i];
        if (q->n_events == 0) {
            continue;
        }
        if (assay_audit_reference_lsm(a, var, wr->prompt, wr->prompt_len, q->tokens,
                                      q->n_events, ref) != ASSAY_OK) {
            (*n_skipped)++;
            continue;
        }
        const double *rows = NULL;
        st = assay_oracle_memo_rows(a->memo, wr->prompt, wr->prompt_len, q->tokens, q->n_events,
                                    &rows);
        for (int32_t pos = 0; st == ASSAY_OK && pos < q->n_events; pos++) {
            const double *rl = ref + (int64_t)pos * v;
            assay_audit_log_softmax(rows + (int64_t)pos * v, v, lsm);
            double d, gap_change;
            assay_audit_reference_position(lsm, rl, v, n_top, top, &d, &gap_change);
            max_abs = fmax(max_abs, d);
            n_positions++;
            struct lp_rec *lr = find_lp(s, (int32_t)wr->id, pos);
            if (lr == NULL) {
                continue;
            }
            lr->have_ref[var] = true;
            lr->ref_best[var] = 0;
            for (int32_t k = 1; k < v; k++) {
                lr->ref_best[var] = rl[k] > rl[lr->ref_best[var]] ? k : lr->ref_best[var];
            }
            for (int32_t j = 0; j < lr->n_top; j++) {
                int32_t tok = lr->top[j].token;
                lr->ref_lp[var][j] = tok >= 0 && tok < v ? rl[tok] : NAN;
            }
        }
    }
    assay_audit_reference_forget(a);
    if (st == ASSAY_OK) {
        assay_audit_budget_at_check(a, var, max_abs, n_positions);
    }
    return st;
}

/*
 * The reference (the budget's correct implementation of the server's
 * formats, each of its variants) teacher-forced through every request's
 * prompt and the server's continuation, before anything is compared: its
 * largest |logprob - the oracle's| over the oracle's top tokens at these
 * positions joins the budget's (assay_audit_budget_at_check), and its
 * logprobs at the tokens the server listed are kept in the records for the
 * figures. A request longer than the reference takes is left out and
 * counted in *n_skipped. ASSAY_OK, or the status of the oracle or of an
 * allocation.
 */
static enum assay_status reference_at_positions(struct assay_audit *a,
                                                const struct assay_workload *w,
                                                const struct assay_transcript *t,
                                                struct lp_store *s, int32_t *n_skipped)
{
    const int32_t v = a->model->cfg.vocab;
    const int32_t n_top = a->p.n_probs < v ? a->p.n_probs : v;
    int32_t longest = 1;
    for (int32_t i = 0; i < w->n; i++) {
        longest = t->reqs[i].n_events > longest ? t->reqs[i].n_events : longest;
    }
    double *ref = assay_malloc(sizeof(double) * (size_t)v * (size_t)longest);
    double *lsm = assay_malloc(sizeof(double) * (size_t)v);
    int32_t *top = assay_malloc(sizeof(int32_t) * (size_t)(n_top > 0 ? n_top : 1));
    enum assay_status st = ref == NULL || lsm == NULL || top == NULL ? ASSAY_ERR_NOMEM : ASSAY_OK;
    int32_t skipped_again = 0; /* the same requests, counted once */
    for (int32_t var = 0; var < assay_audit_budget_in_force(a)->n_variants && st == ASSAY_OK; var++) {
        st = reference_variant_at_positions(a, var, w, t, s, ref, lsm, top, n_top,
                                            var == 0 ? n_skipped : &skipped_again);
    }
    assay_free(top);
    assay_free(lsm);
    assay_free(ref);
    return st;
}

static int cmp_desc(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* The logprob figures of the check (result.h) from the server's series:
 * figures.logprobs stays as it was, derived from the same values. */
static void summarise_numerics(struct assay_divergence *num, struct assay_check_result *res)
{
    struct assay_divergence_summary *sv = &res->numerics[0];
    assay_divergence_summarise(num, "server", sv);
    res->n_numerics = 1;
    res->n_logprobs = sv->n_values;
    if (sv->n_values > 0) {
        res->logprob_diff_max = sv->abs_diff.max;
        res->logprob_diff_median = sv->abs_diff.median;
        res->logprob_diff_p99 = sv->abs_diff.p99;
        res->logprob_diff_mean = sv->abs_diff.mean;
    }
    res->top1_agreement = sv->top1_agreement;
}

/* What check_logprobs carries from one phase to the next: the workload and
 * the server's transcript, the records of its top logprobs, the scratch
 * rows, the series of differences for the figures, and the counts and
 * extremes the summary reports. */
struct lp_check {
    struct assay_audit *a;
    struct assay_check_result *res;
    struct assay_workload *w;
    struct assay_transcript *t;
    struct lp_store s;
    struct assay_divergence *num, *ref_num[2];
    double *lsm;    /* the oracle's log-softmax at the position, (vocab) */
    double *sorted; /* scratch, (vocab) */
    int32_t n_ref_skipped;
    double max_diff;
    double max_srv_ref[2]; /* |server - reference| where each variant ran */
    /* The mean-KLD rule (audit.h), per variant of the reference: the
     * server's and the reference's KLD summed per request (w->n each) over
     * the positions where both were measured, and those positions' count
     * per request and in all. */
    double *kld_srv[2], *kld_ref[2];
    int32_t *kld_n[2];
    int64_t n_kld[2];
    int64_t n_compared;
    int32_t n_eos, n_eos_other, n_short;
    int32_t worst_req, worst_pos;
    int64_t n_positions, n_top1, n_diverged;
};

/* End-of-generation probes: where the oracle's argmax right after a prefix
 * of a prompt is EOS, cut that prompt there (at most 3), so the server's
 * choice at EOS is seen, not hoped for. The argmax at every prompt
 * position comes from one scan that keeps no rows (a prompt of 470
 * tokens would hold 470 rows of the vocabulary's doubles in the memo,
 * gigabytes on a large vocabulary). *n_probes is the number cut. ASSAY_OK,
 * or the oracle's status. */
static enum assay_status cut_prompts_at_eos(struct assay_audit *a, struct assay_workload *w,
                                            int32_t *n_probes)
{
    if (a->p.eos_token < 0 || w->n < 1) {
        return ASSAY_OK;
    }
    const int32_t **prompts = assay_calloc((size_t)w->n, sizeof *prompts);
    const int32_t **rest = assay_calloc((size_t)w->n, sizeof *rest);
    int32_t *ones = assay_calloc((size_t)w->n, sizeof *ones);
    int32_t *n_rest = assay_calloc((size_t)w->n, sizeof *n_rest);
    int32_t **best = assay_calloc((size_t)w->n, sizeof *best);
    int32_t *req = assay_calloc((size_t)w->n, sizeof *req);
    enum assay_status st = prompts == NULL || rest == NULL || ones == NULL || n_rest == NULL ||
                                   best == NULL || req == NULL
                               ? ASSAY_ERR_NOMEM
                               : ASSAY_OK;
    int32_t n = 0;
    for (int32_t i = 0; st == ASSAY_OK && i < w->n; i++) {
        const struct assay_workload_request *wr = &w->reqs[i];
        if (wr->prompt_len < 2) {
            continue;
        }
        /* the prompt's first token, then the rest as the continuation */
        prompts[n] = wr->prompt;
        ones[n] = 1;
        rest[n] = wr->prompt + 1;
        n_rest[n] = wr->prompt_len - 1;
        best[n] = assay_malloc(sizeof(int32_t) * (size_t)n_rest[n]);
        req[n] = i;
        st = best[n++] == NULL ? ASSAY_ERR_NOMEM : ASSAY_OK;
    }
    if (st == ASSAY_OK) {
        st = assay_oracle_memo_argmax(a->memo, n, prompts, ones, rest, n_rest, best);
    }
    for (int32_t k = 0; st == ASSAY_OK && k < n && *n_probes < 3; k++) {
        for (int32_t j = 0; j < n_rest[k]; j++) {
            if (best[k][j] == a->p.eos_token) {
                w->reqs[req[k]].prompt_len = j + 1; /* the next token's argmax is EOS */
                (*n_probes)++;
                break;
            }
        }
    }
    for (int32_t k = 0; best != NULL && k < n; k++) {
        assay_free(best[k]);
    }
    assay_free(prompts);
    assay_free(rest);
    assay_free(ones);
    assay_free(n_rest);
    assay_free(best);
    assay_free(req);
    return st;
}

/* The greedy requests through the server, its top logprobs kept in c->s.
 * ASSAY_OK, the harness's status, or ASSAY_ERR_NOMEM where a record could
 * not be kept. */
static enum assay_status run_greedy(struct lp_check *c)
{
    assay_openai_set_logprobs_sink(&c->a->srv_lp, on_logprobs, &c->s);
    enum assay_status st = assay_audit_run(&c->a->srv_lp, c->w, &c->t);
    assay_openai_set_logprobs_sink(&c->a->srv_lp, NULL, NULL);
    if (st != ASSAY_OK || c->s.oom) {
        return st != ASSAY_OK ? st : ASSAY_ERR_NOMEM;
    }
    return ASSAY_OK;
}

/* Whether the run completed and delivered every request as asked; where
 * not, the check fails with the reason. */
static bool greedy_delivered(struct lp_check *c)
{
    char msg[600];
    if (c->t->status != ASSAY_OK) {
        assay_check_fail(c->res, "the run did not complete: %s", c->t->error);
        return false;
    }
    if (assay_check_delivery(c->w, c->t, msg, sizeof msg) >= 0) {
        assay_check_fail(c->res, "%s", msg);
        return false;
    }
    return true;
}

/* The oracle's log-softmax of one row of v logits into lsm, computed from
 * its largest logit; returns the row's argmax (the first of equal ones). */
static int32_t oracle_log_softmax(const double *row, int32_t v, double *lsm)
{
    int32_t best = 0;
    for (int32_t k = 1; k < v; k++) {
        if (row[k] > row[best]) {
            best = k;
        }
    }
    assay_audit_log_softmax(row, v, lsm); /* from the same largest logit */
    return best;
}

/* The server's greedy token (mine) at one position against the oracle's
 * argmax (best), counted in the top-1 figures. Where the argmax is EOS and
 * the server took another token, it bans EOS and is held to the oracle's
 * best other token. A different token must tie with the expected one within
 * the tie budget (assay_tie), or the check fails. Returns the token
 * expected. */
static int32_t compare_argmax(struct lp_check *c, const struct assay_workload_request *wr,
                              int32_t pos, const double *row, int32_t mine, int32_t best)
{
    struct assay_audit *a = c->a;
    struct assay_check_result *res = c->res;
    const int32_t v = a->model->cfg.vocab;
    res->n_tokens++;
    c->n_eos += best == a->p.eos_token && a->p.eos_token >= 0;
    bool eos_banned = mine != best && best == a->p.eos_token && a->p.eos_token >= 0;
    if (eos_banned) {
        /* ignore_eos: the server bans EOS; it must take the best
         * other token. */
        int32_t other = best == 0 ? 1 : 0;
        for (int32_t k = 0; k < v; k++) {
            if (k != best && row[k] > row[other]) {
                other = k;
            }
        }
        c->n_eos_other++;
        best = other;
    }
    c->n_positions++;
    c->n_top1 += mine == best;
    if (mine != best) {
        /* The reference row: the oracle's, without EOS where the
         * server bans it (sorted is free scratch until the caller's
         * comparison of the top logprobs). */
        const double *ref = row;
        if (eos_banned) {
            memcpy(c->sorted, row, sizeof(double) * (size_t)v);
            c->sorted[a->p.eos_token] = -INFINITY;
            ref = c->sorted;
        }
        double gap;
        if (assay_tie(ref, v, mine, best, assay_audit_tie_budget(a), &gap)) {
            res->n_ties++;
            if (!isfinite(res->max_tie_gap) || gap > res->max_tie_gap) {
                res->max_tie_gap = gap;
            }
        } else {
            c->n_diverged++;
            assay_check_fail(res,
                             "request %llu, output position %d: server token %d (oracle logit "
                             "%.6f), oracle token %d (%.6f): gap %.6f > tie tolerance %g",
                             (unsigned long long)wr->id, (int)pos, (int)mine, row[mine],
                             (int)best, row[best], gap, assay_audit_tie_budget(a));
        }
    }
    return best;
}

/* The server's top logprobs at one position (lr) against the oracle's
 * log-softmax (c->lsm): each within the logprob budget, and none below the
 * oracle's n_probs-th by more than the tie budget, or the check fails. A
 * token outside the vocabulary fails the check and ends the list. The values
 * compared go to top; returns their count. */
static int32_t compare_top_logprobs(struct lp_check *c, const struct assay_workload_request *wr,
                                    int32_t pos, const struct lp_rec *lr,
                                    struct assay_divergence_top *top)
{
    struct assay_audit *a = c->a;
    const int32_t v = a->model->cfg.vocab;
    const int32_t n_probs = a->p.n_probs;
    const double *lsm = c->lsm;
    int32_t n_top = 0; /* the values compared, up to a token outside the vocabulary */
    memcpy(c->sorted, lsm, sizeof(double) * (size_t)v);
    qsort(c->sorted, (size_t)v, sizeof(double), cmp_desc);
    int32_t want = n_probs < v ? n_probs : v;
    double kth = c->sorted[want - 1];
    if (lr->n_top < want) {
        c->n_short++;
    }
    for (int32_t j = 0; j < lr->n_top; j++) {
        const struct assay_openai_logprob *e = &lr->top[j];
        if (e->token < 0 || e->token >= v) {
            assay_check_fail(c->res,
                             "request %llu, position %d: top logprob for token %d, outside the "
                             "vocabulary",
                             (unsigned long long)wr->id, (int)pos, (int)e->token);
            break;
        }
        double d = fabs(e->logprob - lsm[e->token]);
        top[n_top].token = e->token;
        top[n_top].logprob = e->logprob;
        n_top++;
        c->n_compared++;
        if (d > c->max_diff) {
            c->max_diff = d;
            c->worst_req = (int32_t)wr->id;
            c->worst_pos = pos;
        }
        if (d > assay_audit_logprob_budget(a)) {
            assay_check_fail(c->res,
                             "request %llu, position %d: token %d logprob %.6f, oracle %.6f: "
                             "|difference| %.2e > %g",
                             (unsigned long long)wr->id, (int)pos, (int)e->token, e->logprob,
                             lsm[e->token], d, assay_audit_logprob_budget(a));
        }
        if (lsm[e->token] < kth - assay_audit_tie_budget(a)) {
            assay_check_fail(c->res,
                             "request %llu, position %d: the server lists token %d (oracle "
                             "logprob %.6f) among its top %d, below the oracle's %d-th (%.6f)",
                             (unsigned long long)wr->id, (int)pos, (int)e->token, lsm[e->token],
                             (int)want, (int)want, kth);
        }
    }
    return n_top;
}

/* The reference's logprobs at the tokens of top (n_top of them), for each
 * variant of the reference that ran at this position (of request req, an
 * index into the workload): the largest |server - reference|, the series
 * of |reference - oracle| for the figures, and both KLDs for the mean-KLD
 * rule. ASSAY_OK or the status of assay_divergence_add. */
static enum assay_status add_reference_at_position(struct lp_check *c, int32_t req,
                                                   const struct lp_rec *lr,
                                                   const struct assay_divergence_top *top,
                                                   int32_t n_top, int32_t best)
{
    const int32_t v = c->a->model->cfg.vocab;
    struct assay_divergence_top ref_top[ASSAY_OPENAI_MAX_TOP];
    /* The server's KLD here; a list the KLD rejects (NaN, +inf) fails the
     * check in compare_position and is not paired. */
    double kld_srv = 0.0;
    bool paired = n_top > 0 && assay_divergence_kld(c->lsm, v, top, n_top, &kld_srv) == ASSAY_OK;
    for (int32_t var = 0; var < 2; var++) {
        if (!lr->have_ref[var]) {
            continue;
        }
        for (int32_t j = 0; j < n_top; j++) {
            ref_top[j].token = top[j].token;
            ref_top[j].logprob = lr->ref_lp[var][j];
            c->max_srv_ref[var] =
                fmax(c->max_srv_ref[var], fabs(top[j].logprob - lr->ref_lp[var][j]));
        }
        enum assay_status st = assay_divergence_add(c->ref_num[var], c->lsm, v, ref_top, n_top,
                                                    lr->ref_best[var] == best);
        if (st != ASSAY_OK) {
            return st;
        }
        double kld_ref = 0.0;
        if (paired && assay_divergence_kld(c->lsm, v, ref_top, n_top, &kld_ref) == ASSAY_OK) {
            c->kld_srv[var][req] += kld_srv;
            c->kld_ref[var][req] += kld_ref;
            c->kld_n[var][req]++;
            c->n_kld[var]++;
        }
    }
    return ASSAY_OK;
}

/* One output position of request wr (the oracle's logits there in row):
 * the greedy token, then the top logprobs against the oracle and the
 * reference, and the position's values into the server's series. ASSAY_OK
 * or the status of assay_divergence_add. */
static enum assay_status compare_position(struct lp_check *c,
                                          const struct assay_workload_request *wr,
                                          const struct assay_transcript_req *q, int32_t pos,
                                          const double *row)
{
    const int32_t v = c->a->model->cfg.vocab;
    int32_t best = oracle_log_softmax(row, v, c->lsm);
    int32_t mine = q->tokens[pos];
    best = compare_argmax(c, wr, pos, row, mine, best);
    /* The logprobs of this position. */
    const struct lp_rec *lr = find_lp(&c->s, (int32_t)wr->id, pos);
    if (lr == NULL || lr->n_top == 0) {
        c->n_short++;
        return assay_divergence_add(c->num, c->lsm, v, NULL, 0, mine == best);
    }
    struct assay_divergence_top top[ASSAY_OPENAI_MAX_TOP];
    int32_t n_top = compare_top_logprobs(c, wr, pos, lr, top);
    enum assay_status st =
        add_reference_at_position(c, (int32_t)(wr - c->w->reqs), lr, top, n_top, best);
    if (st != ASSAY_OK) {
        return st;
    }
    st = assay_divergence_add(c->num, c->lsm, v, top, n_top, mine == best);
    if (st == ASSAY_ERR_INVALID) {
        /* A logprob that is NaN or +inf (a token outside the
         * vocabulary ended the list above). JSON carries no NaN and
         * +inf is already beyond the tolerance, so this reason
         * never replaces an earlier one. The position still counts
         * for top-1; its values are left out of the figures. */
        assay_check_fail(c->res,
                         "request %llu, position %d: a top logprob is not a number "
                         "or is +inf",
                         (unsigned long long)wr->id, (int)pos);
        st = assay_divergence_add(c->num, c->lsm, v, NULL, 0, mine == best);
    }
    return st;
}

/* Every position of every request is measured, after a failure too: the
 * statistics of the differences are the measurement a format's budget is
 * set from, and the first failure's reason stands. ASSAY_OK, or the status
 * of the oracle or of assay_divergence_add. */
static enum assay_status compare_positions(struct lp_check *c)
{
    const int32_t v = c->a->model->cfg.vocab;
    for (int32_t i = 0; i < c->w->n; i++) {
        const struct assay_workload_request *wr = &c->w->reqs[i];
        const struct assay_transcript_req *q = &c->t->reqs[i];
        const double *rows = NULL;
        enum assay_status st = assay_oracle_memo_rows(c->a->memo, wr->prompt, wr->prompt_len,
                                                      q->tokens, q->n_events, &rows);
        if (st != ASSAY_OK) {
            return st;
        }
        for (int32_t pos = 0; pos < q->n_events; pos++) {
            st = compare_position(c, wr, q, pos, rows + (int64_t)pos * v);
            if (st != ASSAY_OK) {
                return st;
            }
        }
    }
    return ASSAY_OK;
}

/* The mean-KLD rule (audit.h) over the positions where the server and the
 * reference variant farther from the oracle on average were both measured:
 * the figures in res, and a failure where even the ratio's lower
 * confidence bound is beyond the factor. Not judged (res untouched) with fewer than
 * ASSAY_AUDIT_KLD_MIN_POSITIONS positions or where the factor times the
 * reference's mean is within the floor. */
static void judge_kld(struct lp_check *c)
{
    struct assay_check_result *res = c->res;
    double worst = -1.0;
    int32_t var = -1;
    for (int32_t k = 0; k < 2; k++) {
        double r_k = 0.0;
        for (int32_t i = 0; i < c->w->n; i++) {
            r_k += c->kld_ref[k][i];
        }
        if (c->n_kld[k] > 0 && r_k / (double)c->n_kld[k] > worst) {
            worst = r_k / (double)c->n_kld[k];
            var = k;
        }
    }
    if (var < 0) {
        return;
    }
    const int32_t n_top =
        c->a->p.n_probs < ASSAY_OPENAI_MAX_TOP ? c->a->p.n_probs : ASSAY_OPENAI_MAX_TOP;
    struct assay_audit_kld k;
    assay_audit_kld_rule(c->kld_srv[var], c->kld_ref[var], c->kld_n[var], c->w->n, n_top, &k);
    if (k.n == 0) {
        return;
    }
    res->kld_positions = k.n;
    res->kld_server = k.server;
    res->kld_reference = k.reference;
    res->kld_ratio = k.ratio;
    res->kld_ratio_se = k.ratio_se;
    res->kld_ratio_lower = k.ratio_lower;
    res->kld_budget = k.budget;
    if (k.beyond) {
        assay_check_fail(res,
                         "mean KLD over %lld positions %.3g, %.2f times the reference's %.3g "
                         "(jackknife s.e. %.2f): even its %g%% lower bound %.2f is beyond "
                         "%.1f times (budget %.3g)",
                         (long long)k.n, k.server, k.ratio, k.reference, k.ratio_se,
                         100.0 * (1.0 - ASSAY_AUDIT_KLD_ALPHA), k.ratio_lower,
                         ASSAY_AUDIT_KLD_FACTOR, k.budget);
    }
}

/* The check's figures (the server's series and, where the budget was
 * measured, each variant of the reference) and its one-line summary; a check
 * that compared no logprob at all is skipped. */
static void summarise_logprobs(struct lp_check *c)
{
    struct assay_audit *a = c->a;
    struct assay_check_result *res = c->res;
    const int32_t n_probs = a->p.n_probs;
    if (res->verdict == ASSAY_VERDICT_PASS && c->n_compared == 0) {
        assay_check_skip(res,
                         "the server sent no top logprobs (asked for %d per token): it cannot be "
                         "compared with the oracle's log-softmax",
                         (int)n_probs);
    }
    summarise_numerics(c->num, res);
    if (assay_audit_budget_in_force(a)->measured) {
        assay_divergence_summarise(c->ref_num[0], "reference", &res->numerics[1]);
        res->n_numerics = 2;
    }
    if (assay_audit_budget_in_force(a)->measured && assay_audit_budget_in_force(a)->n_variants == 2) {
        assay_divergence_summarise(c->ref_num[1], "reference-f16acc", &res->numerics[2]);
        res->n_numerics = 3;
    }
    /* One line of at most sizeof res->summary: the figures first, the
     * clauses that are usually zero only when they are not. */
    char line[1024];
    snprintf(line, sizeof line,
             "%lld tokens, %d greedy requests; %lld top logprobs, |server - oracle| max %.3g "
             "(request %d, position %d), median %.2g, p99 %.2g, budget %.3g; top-1 %lld/%lld "
             "(%lld beyond the tie budget %.3g, %d ties)",
             (long long)res->n_tokens, (int)c->w->n, (long long)c->n_compared, c->max_diff,
             (int)c->worst_req, (int)c->worst_pos, res->logprob_diff_median,
             res->logprob_diff_p99, assay_audit_logprob_budget(a), (long long)c->n_top1,
             (long long)c->n_positions, (long long)c->n_diverged, assay_audit_tie_budget(a),
             (int)res->n_ties);
    size_t l = strlen(line);
    if (res->kld_positions > 0) {
        snprintf(line + l, sizeof line - l,
                 "; mean KLD %.2g, %.2f (bound %.2f) times the reference's, tested against %.1f",
                 res->kld_server, res->kld_ratio, res->kld_ratio_lower, ASSAY_AUDIT_KLD_FACTOR);
        l = strlen(line);
    }
    if (res->n_numerics == 2) {
        snprintf(line + l, sizeof line - l,
                 "; |reference - oracle| max %.3g, |server - reference| max %.3g%s",
                 res->numerics[1].abs_diff.max, c->max_srv_ref[0],
                 c->n_ref_skipped > 0 ? " (not all requests)" : "");
        l = strlen(line);
    } else if (res->n_numerics == 3) {
        snprintf(line + l, sizeof line - l,
                 "; reference (fp32 lanes / fp16 acc.) max %.3g / %.3g, |server - reference| "
                 "max %.3g / %.3g%s",
                 res->numerics[1].abs_diff.max, res->numerics[2].abs_diff.max,
                 c->max_srv_ref[0], c->max_srv_ref[1],
                 c->n_ref_skipped > 0 ? " (not all requests)" : "");
        l = strlen(line);
    }
    if (c->n_short > 0) {
        snprintf(line + l, sizeof line - l, "; %d short of %d", (int)c->n_short, (int)n_probs);
        l = strlen(line);
    }
    if (c->n_eos > 0) {
        snprintf(line + l, sizeof line - l, "; EOS argmax %d", (int)c->n_eos);
    }
    snprintf(res->summary, sizeof res->summary, "%.*s", (int)sizeof res->summary - 1, line);
}

/* The findings of a check that ran: the largest logprob difference, and on a
 * pass what the server does at EOS when asked to ignore it. */
static void note_logprobs(struct lp_check *c)
{
    struct assay_audit *a = c->a;
    if (c->n_compared > 0) {
        assay_audit_note(
            a,
            "Top logprobs: the largest difference from the oracle's log-softmax (double "
            "precision) was %.2g over %lld values (budget %.3g).",
            c->max_diff, (long long)c->n_compared, assay_audit_logprob_budget(a));
    }
    if (c->res->kld_positions > 0) {
        assay_audit_note(a,
                         "Mean KLD from the oracle: %.3g over %lld positions, %.2f times the "
                         "reference's %.3g at the same positions (jackknife s.e. %.2f, %g%% "
                         "lower bound %.2f; it fails beyond %.1f times).",
                         c->res->kld_server, (long long)c->res->kld_positions, c->res->kld_ratio,
                         c->res->kld_reference, c->res->kld_ratio_se,
                         100.0 * (1.0 - ASSAY_AUDIT_KLD_ALPHA), c->res->kld_ratio_lower,
                         ASSAY_AUDIT_KLD_FACTOR);
    }
    if (c->n_eos_other > 0 && c->res->verdict == ASSAY_VERDICT_PASS) {
        assay_audit_note(
            a,
            "End of generation: at %d positions the oracle's argmax was EOS; asked to "
            "ignore EOS (so that max_tokens holds), the server took the oracle's best "
            "other token there - it bans EOS (a -inf logit) instead of sampling past it, "
            "so the audit lets it stop on EOS wherever the oracle's distribution must "
            "hold, and continues after it.",
            (int)c->n_eos_other);
    } else if (c->n_eos > 0 && c->res->verdict == ASSAY_VERDICT_PASS) {
        assay_audit_note(
            a,
            "End of generation: at %d positions the oracle's argmax was EOS and the server, "
            "asked to ignore EOS, emitted it and went on: it does not ban EOS.",
            (int)c->n_eos);
    }
}

/* Greedy tokens and top logprobs against the oracle (and the reference,
 * where the budget was measured): the prompts cut at EOS, the requests run
 * at once, every position compared, then the figures and the summary. */
enum assay_status assay_audit_check_logprobs(struct assay_audit *a,
                                             const struct assay_plan_item *item,
                                             struct assay_check_result *res)
{
    const int32_t v = a->model->cfg.vocab;
    struct assay_workload *w = NULL;
    enum assay_status st = assay_audit_check_workload(a, item, res, &w);
    if (st != ASSAY_OK) {
        return st;
    }
    int32_t n_probes = 0, p_lo = INT32_MAX, p_hi = 0, o_lo = INT32_MAX, o_hi = 0;
    for (int32_t i = 0; i < w->n; i++) {
        p_lo = w->reqs[i].prompt_len < p_lo ? w->reqs[i].prompt_len : p_lo;
        p_hi = w->reqs[i].prompt_len > p_hi ? w->reqs[i].prompt_len : p_hi;
        o_lo = w->reqs[i].max_tokens < o_lo ? w->reqs[i].max_tokens : o_lo;
        o_hi = w->reqs[i].max_tokens > o_hi ? w->reqs[i].max_tokens : o_hi;
    }
    st = cut_prompts_at_eos(a, w, &n_probes);
    if (st != ASSAY_OK) {
        assay_workload_free(w);
        assay_check_error(res, "the oracle failed: %s", assay_status_str(st));
        return st;
    }
    snprintf(res->workload, sizeof res->workload,
             "generated: %d greedy requests, prompts %d-%d (%d cut where the oracle's next "
             "argmax is EOS), outputs %d-%d, all at once, no stop token; %d top logprobs per "
             "token",
             (int)w->n, (int)p_lo, (int)p_hi, (int)n_probes, (int)o_lo, (int)o_hi,
             (int)a->p.n_probs);
    struct lp_check c = {.a = a, .res = res, .w = w, .worst_req = -1, .worst_pos = -1};
    c.lsm = assay_malloc(sizeof(double) * (size_t)v);
    c.sorted = assay_malloc(sizeof(double) * (size_t)v);
    bool kld_ok = true;
    for (int32_t k = 0; k < 2; k++) {
        size_t n_req = (size_t)(w->n > 0 ? w->n : 1);
        c.kld_srv[k] = assay_calloc(n_req, sizeof(double));
        c.kld_ref[k] = assay_calloc(n_req, sizeof(double));
        c.kld_n[k] = assay_calloc(n_req, sizeof(int32_t));
        kld_ok = kld_ok && c.kld_srv[k] != NULL && c.kld_ref[k] != NULL && c.kld_n[k] != NULL;
    }
    if (c.lsm == NULL || c.sorted == NULL || !kld_ok || assay_divergence_init(&c.num) != ASSAY_OK ||
        assay_divergence_init(&c.ref_num[0]) != ASSAY_OK ||
        assay_divergence_init(&c.ref_num[1]) != ASSAY_OK) {
        st = ASSAY_ERR_NOMEM;
        goto out;
    }
    st = run_greedy(&c);
    if (st != ASSAY_OK || !greedy_delivered(&c)) {
        goto out;
    }
    res->tie_tol = assay_audit_tie_budget(a);
    res->n_requests = w->n;
    assay_audit_prefetch(a, w, c.t, -1);
    if (assay_audit_budget_in_force(a)->measured) {
        st = reference_at_positions(a, w, c.t, &c.s, &c.n_ref_skipped);
        if (st != ASSAY_OK) {
            goto out;
        }
    }
    st = compare_positions(&c);
    if (st != ASSAY_OK) {
        goto out;
    }
    judge_kld(&c);
    summarise_logprobs(&c);
    note_logprobs(&c);
out:
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not run: %s", assay_status_str(st));
    }
    assay_transcript_free(c.t);
    assay_workload_free(w);
    assay_free(c.s.rec);
    assay_free(c.lsm);
    assay_free(c.sorted);
    for (int32_t k = 0; k < 2; k++) {
        assay_free(c.kld_srv[k]);
        assay_free(c.kld_ref[k]);
        assay_free(c.kld_n[k]);
    }
    assay_divergence_free(c.num);
    assay_divergence_free(c.ref_num[0]);
    assay_divergence_free(c.ref_num[1]);
    return st;
}
