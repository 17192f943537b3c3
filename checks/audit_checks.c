/*
 * audit_checks.c - the checks of `assay audit` on a server (see audit.h and
 * the registry, checks/plan.c): greedy tokens and top logprobs against the
 * oracle, samples against its distributions, and the properties only a
 * server shows (finish reasons, usage counts, streamed against not, its
 * gauges back to idle).
 *
 * Sample sizes, and why (measured with llama-server, TinyGPT f32, one
 * thread, four slots, on 2 cores; the full audit in about 6 minutes, the
 * quick one in about 3):
 *  - the oracle costs about 5 ms per sequence position (double precision,
 *    no cache), which bounds the PIT checks and the equivalence workloads;
 *  - llama-server answers about 300 one-token requests a second with eight
 *    in flight, which bounds the first-token tests.
 * Each distributional result states its n and the smallest total-variation
 * distance it detects at power 0.99 (min_tv), so a smaller sample is a
 * stated weaker test, never a silent one.
 */
#include "audit_checks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../adapters/gate.h"
#include "../adapters/spec.h"
#include "../bench/metrics.h"
#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/rng.h"
#include "../core/workload.h"
#include "distributional.h"
#include "equivalence.h"
#include "harness.h"
#include "divergence.h"
#include "property.h"
#include "seeded.h"

#include "audit_internal.h"

/* ---- the numerics budget (audit.h) ------------------------------------------ */

/* The budgets in force: measured on first use; where the reference could
 * not be measured, the fixed tolerances (said once in the findings). */
const struct assay_audit_budget *assay_audit_budget_in_force(struct assay_audit *a)
{
    if (!a->budget_tried && assay_audit_need_budget(a) != ASSAY_OK) {
        assay_audit_note(a,
                         "Numerics budget: not measured (%s); the checks hold the server to the "
                         "fixed tolerances of exact arithmetic (%g logits, %g in a logprob).",
                         a->budget.why, a->budget.gap, a->budget.logprob);
    }
    return &a->budget;
}

static double tie_budget(struct assay_audit *a)
{
    return assay_audit_budget_in_force(a)->gap;
}

static double logprob_budget(struct assay_audit *a)
{
    return assay_audit_budget_in_force(a)->logprob;
}

/* ---- workloads ------------------------------------------------------------ */

/*
 * The generated workload of an audit check: its fixture file (item->workload
 * under the fixtures folder, a "generate" shape; README "Workload files")
 * drawn with a seed derived from the audit's seed and the check's name, and
 * with --quick with the request count of the item's "quick=N" parameter. On
 * failure res is ERROR with the reason.
 */
static enum assay_status check_workload(const struct assay_audit *a,
                                        const struct assay_plan_item *item,
                                        struct assay_check_result *res, struct assay_workload **out)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", a->fixtures, item->workload != NULL ? item->workload : "");
    char quick[16];
    assay_plan_param(item->params, "quick", quick, sizeof quick);
    struct assay_workload_draw draw = {assay_seed_derive(a->p.seed, item->name) % 1000000007ull + 1,
                                       a->p.quick ? (int32_t)strtol(quick, NULL, 10) : 0};
    struct assay_workload_limits lim = {a->model->cfg.vocab, a->model->cfg.n_ctx, 0};
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_workload_load_drawn(path, &lim, &draw, out, &diag);
    if (st != ASSAY_OK) {
        char why[600];
        assay_check_error(res, "workload: %s", assay_diag_format(&diag, why, sizeof why));
    }
    return st;
}

static enum assay_status load_fixture(const struct assay_audit *a, const char *name,
                                      struct assay_workload **out, char *why, size_t size)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/workloads/%s.json", a->fixtures, name);
    struct assay_workload_limits lim = {a->model->cfg.vocab, a->model->cfg.n_ctx, 0};
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_workload_load(path, &lim, out, &diag);
    if (st != ASSAY_OK) {
        char d[600];
        snprintf(why, size, "workload: %s", assay_diag_format(&diag, d, sizeof d));
    }
    return st;
}

static void set_stop(struct assay_workload *w, int32_t token)
{
    for (int32_t i = 0; i < w->n; i++) {
        w->reqs[i].stop_token = token;
    }
}

static enum assay_status run(const struct assay_adapter *ad, const struct assay_workload *w,
                             struct assay_transcript **t)
{
    struct assay_harness_opts ho;
    memset(&ho, 0, sizeof ho);
    ho.max_steps = MAX_STEPS;
    return assay_harness_run(ad, w, &ho, t);
}

/* Two runs of request i (both delivered correctly) agree up to where one
 * ends; at the first difference the two tokens must tie by the oracle's
 * logits given the common prefix (assay_tie), and the comparison of that
 * request ends there. Returns false with msg set on a real divergence. */
static bool same_or_tie(struct assay_audit *a, const struct assay_workload_request *wr,
                        const struct assay_transcript_req *qa,
                        const struct assay_transcript_req *qb, const char *what_a,
                        const char *what_b, int64_t *n_tokens, int32_t *n_ties, double *max_gap,
                        char *msg, size_t size, enum assay_status *st)
{
    int32_t n = qa->n_events < qb->n_events ? qa->n_events : qb->n_events;
    for (int32_t t = 0; t < n; t++) {
        if (qa->tokens[t] == qb->tokens[t]) {
            (*n_tokens)++;
            continue;
        }
        const double *rows = NULL;
        *st = assay_oracle_memo_rows(a->memo, wr->prompt, wr->prompt_len, qa->tokens, t + 1, &rows);
        if (*st != ASSAY_OK) {
            snprintf(msg, size, "the oracle failed: %s", assay_status_str(*st));
            return false;
        }
        const double *row = rows + (int64_t)t * a->model->cfg.vocab;
        double gap;
        if (assay_tie(row, a->model->cfg.vocab, qa->tokens[t], qb->tokens[t], tie_budget(a),
                      &gap)) {
            (*n_ties)++;
            *max_gap = gap > *max_gap ? gap : *max_gap;
            return true;
        }
        snprintf(msg, size,
                 "request %llu, output position %d: token %d %s, token %d %s; the oracle's logits "
                 "are %.6f and %.6f, the farther %.6f below its best: not a tie within %g",
                 (unsigned long long)wr->id, (int)t, (int)qa->tokens[t], what_a, (int)qb->tokens[t],
                 what_b, row[qa->tokens[t]], row[qb->tokens[t]], gap, tie_budget(a));
        return false;
    }
    if (qa->n_events != qb->n_events) {
        snprintf(msg, size, "request %llu: %d tokens %s, %d %s (the same tokens up to there)",
                 (unsigned long long)wr->id, (int)qa->n_events, what_a, (int)qb->n_events, what_b);
        return false;
    }
    return true;
}
/* ---- equivalence -------------------------------------------------------- */

static void merge_equiv(struct assay_check_result *res, const struct assay_check_result *r,
                        const char *wname)
{
    res->n_requests += r->n_requests;
    res->n_tokens += r->n_tokens;
    res->n_ties += r->n_ties;
    res->tie_tol = r->tie_tol;
    if (isfinite(r->max_tie_gap) &&
        (!isfinite(res->max_tie_gap) || r->max_tie_gap > res->max_tie_gap)) {
        res->max_tie_gap = r->max_tie_gap;
    }
    if (r->verdict != ASSAY_VERDICT_PASS) {
        assay_check_set(res, r->verdict, "%s: %s", wname, r->failure);
    }
}

static enum assay_status check_equiv(struct assay_audit *a, bool alone,
                                     struct assay_check_result *res)
{
    static const char *const full[] = {"equiv-mixed", "equiv-shared-prefix", "equiv-long-prompts",
                                       "equiv-pressure"};
    size_t n_w = a->p.quick ? 2 : 4;
    struct assay_adapter gate = {NULL, NULL};
    const struct assay_adapter *ad = &a->srv;
    enum assay_status st = ASSAY_OK;
    if (alone) {
        struct assay_gate_params gp = assay_gate_default_params();
        gp.max_in_flight = 1;
        st = assay_gate_open(&a->srv, &gp, &gate);
        if (st != ASSAY_OK) {
            assay_check_error(res, "could not open the gate: %s", assay_status_str(st));
            return st;
        }
        ad = &gate;
    }
    res->tie_tol = tie_budget(a);
    char names[256] = "";
    int64_t n_stop0 = 0, n_stop = 0;
    struct assay_openai_stats os;
    if (assay_openai_get_stats(&a->srv, &os) == ASSAY_OK) {
        n_stop0 = os.n_stop;
    }
    for (size_t k = 0; k < n_w && st == ASSAY_OK; k++) {
        struct assay_workload *w = NULL;
        char why[700];
        st = load_fixture(a, full[k], &w, why, sizeof why);
        if (st != ASSAY_OK) {
            assay_check_error(res, "%s", why);
            break;
        }
        /* Both sides stop at EOS (see audit.h). */
        set_stop(w, a->p.eos_token);
        struct assay_check_result r;
        assay_check_result_init(&r, res->name, ASSAY_FAMILY_EQUIVALENCE);
        struct assay_equiv_opts eo;
        memset(&eo, 0, sizeof eo);
        eo.tie_tol = tie_budget(a);
        eo.max_steps = MAX_STEPS;
        st = assay_check_equivalence(ad, w, a->memo, &eo, &r);
        merge_equiv(res, &r, full[k]);
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", l > 0 ? ", " : "", full[k]);
        assay_workload_free(w);
    }
    if (assay_openai_get_stats(&a->srv, &os) == ASSAY_OK) {
        n_stop = os.n_stop - n_stop0;
    }
    assay_adapter_close(&gate);
    if (snprintf(res->workload, sizeof res->workload,
                 "fixtures %s, EOS as every request's stop token",
                 names) >= (int)sizeof res->workload) {
        memcpy(res->workload + sizeof res->workload - 4, "...", 4); /* cut, and said so */
    }
    snprintf(res->summary, sizeof res->summary,
             "%lld requests %s, %lld tokens equal to the oracle's; %d ties within %g (largest gap "
             "%.2g); %lld requests stopped at EOS on both sides",
             (long long)res->n_requests,
             alone ? "one at a time" : "as the workloads arrive (joining a running batch)",
             (long long)res->n_tokens, (int)res->n_ties, tie_budget(a),
             isfinite(res->max_tie_gap) ? res->max_tie_gap : 0.0, (long long)n_stop);
    if (res->n_ties > 0) {
        assay_audit_note(
            a,
            "Greedy decoding: %d floating-point ties (oracle logit gap at most %.2g, within "
            "the tie tolerance %g) where the server took the other token.",
            (int)res->n_ties, res->max_tie_gap, tie_budget(a));
    }
    return st;
}

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
 * choice at EOS is seen, not hoped for. *n_probes is the number cut.
 * ASSAY_OK, or the oracle's status. */
static enum assay_status cut_prompts_at_eos(struct assay_audit *a, struct assay_workload *w,
                                            int32_t *n_probes)
{
    const int32_t v = a->model->cfg.vocab;
    if (a->p.eos_token >= 0) {
        assay_audit_prefetch(a, w, NULL, -1);
    }
    for (int32_t i = 0; i < w->n && *n_probes < 3 && a->p.eos_token >= 0; i++) {
        struct assay_workload_request *wr = &w->reqs[i];
        if (wr->prompt_len < 2) {
            continue;
        }
        const double *rows = NULL;
        enum assay_status st = assay_oracle_memo_rows(a->memo, wr->prompt, 1, wr->prompt + 1,
                                                      wr->prompt_len - 1, &rows);
        if (st != ASSAY_OK) {
            return st;
        }
        for (int32_t j = 0; j + 1 < wr->prompt_len; j++) {
            const double *row = rows + (int64_t)j * v;
            int32_t best = 0;
            for (int32_t k = 1; k < v; k++) {
                best = row[k] > row[best] ? k : best;
            }
            if (best == a->p.eos_token) {
                wr->prompt_len = j + 1; /* the next token's argmax is EOS */
                (*n_probes)++;
                break;
            }
        }
    }
    return ASSAY_OK;
}

/* The greedy requests through the server, its top logprobs kept in c->s.
 * ASSAY_OK, the harness's status, or ASSAY_ERR_NOMEM where a record could
 * not be kept. */
static enum assay_status run_greedy(struct lp_check *c)
{
    assay_openai_set_logprobs_sink(&c->a->srv_lp, on_logprobs, &c->s);
    enum assay_status st = run(&c->a->srv_lp, c->w, &c->t);
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
        if (assay_tie(ref, v, mine, best, tie_budget(a), &gap)) {
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
                             (int)best, row[best], gap, tie_budget(a));
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
        if (d > logprob_budget(a)) {
            assay_check_fail(c->res,
                             "request %llu, position %d: token %d logprob %.6f, oracle %.6f: "
                             "|difference| %.2e > %g",
                             (unsigned long long)wr->id, (int)pos, (int)e->token, e->logprob,
                             lsm[e->token], d, logprob_budget(a));
        }
        if (lsm[e->token] < kth - tie_budget(a)) {
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
             res->logprob_diff_p99, logprob_budget(a), (long long)c->n_top1,
             (long long)c->n_positions, (long long)c->n_diverged, tie_budget(a),
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
            c->max_diff, (long long)c->n_compared, logprob_budget(a));
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
static enum assay_status check_logprobs(struct assay_audit *a, const struct assay_plan_item *item,
                                        struct assay_check_result *res)
{
    const int32_t v = a->model->cfg.vocab;
    struct assay_workload *w = NULL;
    enum assay_status st = check_workload(a, item, res, &w);
    if (st != ASSAY_OK) {
        return st;
    }
    int32_t n_probes = 0;
    st = cut_prompts_at_eos(a, w, &n_probes);
    if (st != ASSAY_OK) {
        assay_workload_free(w);
        assay_check_error(res, "the oracle failed: %s", assay_status_str(st));
        return st;
    }
    snprintf(res->workload, sizeof res->workload,
             "generated: %d greedy requests, prompts 1-96 (%d cut where the oracle's next "
             "argmax is EOS), outputs 8-32, all at once, no stop token; %d top logprobs per "
             "token",
             (int)w->n, (int)n_probes, (int)a->p.n_probs);
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
    res->tie_tol = tie_budget(a);
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

/* ---- properties ----------------------------------------------------------------- */

static enum assay_status check_batch_invariance(struct assay_audit *a,
                                                const struct assay_plan_item *item,
                                                struct assay_check_result *res)
{
    struct assay_workload *w = NULL;
    enum assay_status st = check_workload(a, item, res, &w);
    if (st != ASSAY_OK) {
        return st;
    }
    set_stop(w, a->p.eos_token);
    int32_t levels[4] = {1, 2, a->p.slots, 2 * a->p.slots};
    int32_t n_levels = 0;
    int32_t uniq[4];
    for (int k = 0; k < 4; k++) {
        bool dup = false;
        for (int j = 0; j < n_levels; j++) {
            dup = dup || uniq[j] == levels[k];
        }
        if (!dup && levels[k] >= 1) {
            uniq[n_levels++] = levels[k];
        }
    }
    snprintf(res->workload, sizeof res->workload,
             "generated: %d greedy requests, prompts 2-64 (half share a 16-token prefix), outputs "
             "8-24, EOS as stop token",
             (int)w->n);
    res->n_requests = w->n;
    struct assay_transcript *t[4] = {NULL, NULL, NULL, NULL};
    int64_t n_tokens = 0;
    int32_t n_ties = 0;
    double max_gap = 0.0;
    char msg[640];
    char levels_text[64] = "";
    for (int32_t k = 0; k < n_levels && st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS; k++) {
        struct assay_gate_params gp = assay_gate_default_params();
        gp.max_in_flight = uniq[k];
        struct assay_adapter gate;
        st = assay_gate_open(&a->srv, &gp, &gate);
        if (st == ASSAY_OK) {
            st = run(&gate, w, &t[k]);
            assay_adapter_close(&gate);
        }
        if (st != ASSAY_OK) {
            break;
        }
        size_t l = strlen(levels_text);
        snprintf(levels_text + l, sizeof levels_text - l, "%s%d", k > 0 ? ", " : "", (int)uniq[k]);
        res->n_steps += t[k]->n_steps;
        if (t[k]->status != ASSAY_OK) {
            assay_check_fail(res, "at concurrency %d the run did not complete: %s", (int)uniq[k],
                             t[k]->error);
            break;
        }
        if (assay_check_delivery(w, t[k], msg, sizeof msg) >= 0) {
            assay_check_fail(res, "at concurrency %d: %s", (int)uniq[k], msg);
            break;
        }
        for (int32_t i = 0; k > 0 && i < w->n; i++) {
            char what[64];
            snprintf(what, sizeof what, "at concurrency %d", (int)uniq[k]);
            res->n_checks++;
            if (!same_or_tie(a, &w->reqs[i], &t[0]->reqs[i], &t[k]->reqs[i], "at concurrency 1",
                             what, &n_tokens, &n_ties, &max_gap, msg, sizeof msg, &st)) {
                if (st == ASSAY_OK) {
                    assay_check_fail(res, "%s", msg);
                }
                break;
            }
        }
    }
    res->n_tokens = n_tokens;
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not run: %s", assay_status_str(st));
    }
    snprintf(res->summary, sizeof res->summary,
             "%d greedy requests at concurrency %s (a gate in front of the server): %lld tokens "
             "compared with concurrency 1, %d ties within %g (largest gap %.2g)",
             (int)w->n, levels_text, (long long)n_tokens, (int)n_ties, tie_budget(a),
             max_gap);
    if (n_ties > 0) {
        assay_audit_note(
            a,
            "Batch invariance: %d greedy choices changed with the concurrency, each at a "
            "floating-point tie (oracle gap at most %.2g): the server's logits depend on "
            "the batch in their last bits.",
            (int)n_ties, max_gap);
    }
    for (int k = 0; k < 4; k++) {
        assay_transcript_free(t[k]);
    }
    assay_workload_free(w);
    return st;
}

/* A workload of every ending: EOS stops (the server's), other stop tokens
 * (the adapter's), lengths, aborts, greedy and sampled. */
static enum assay_status finish_workload(struct assay_audit *a, const struct assay_plan_item *item,
                                         struct assay_check_result *res,
                                         struct assay_workload **out)
{
    enum assay_status st = check_workload(a, item, res, out);
    if (st != ASSAY_OK) {
        return st;
    }
    struct assay_workload *w = *out;
    for (int32_t i = 0; i < w->n; i++) {
        struct assay_workload_request *r = &w->reqs[i];
        r->sampling = assay_sampling_greedy();
        switch (i % 6) {
        case 0: r->stop_token = a->p.eos_token; break;               /* the server's stop */
        case 1: r->stop_token = -1; break;                           /* length */
        case 2: r->stop_token = r->prompt[r->prompt_len - 1]; break; /* the adapter's stop */
        case 3: /* sampled, stops at EOS or runs to length */
            r->stop_token = a->p.eos_token;
            r->sampling.temperature = 1.0f;
            r->sampling.seeded = true;
            r->sampling.seed = (uint64_t)i + 1;
            break;
        case 4: /* aborted after a few tokens */
            r->stop_token = -1;
            r->abort_after = 1 + i % 5 < r->max_tokens ? 1 + i % 5 : r->max_tokens - 1;
            if (r->abort_after < 1) {
                r->abort_after = -1;
            }
            break;
        default: /* sampled with filters, a frequent byte as its stop token */
            r->stop_token = r->prompt[0];
            r->sampling.temperature = 0.8f;
            r->sampling.top_k = 40;
            r->sampling.top_p = 0.9f;
            r->sampling.seeded = true;
            r->sampling.seed = (uint64_t)i + 1000;
            break;
        }
    }
    return ASSAY_OK;
}

static enum assay_status check_finish(struct assay_audit *a, const struct assay_plan_item *item,
                                      struct assay_check_result *res)
{
    struct assay_workload *w = NULL;
    enum assay_status st = finish_workload(a, item, res, &w);
    if (st != ASSAY_OK) {
        return st;
    }
    char name[96];
    snprintf(name, sizeof name, "%s", res->name);
    st = assay_check_trace(&a->srv, w, NULL, res);
    snprintf(res->name, sizeof res->name, "%s", name);
    snprintf(res->workload, sizeof res->workload,
             "generated: %d requests joining every 3 steps; in turn: stop at EOS (the server's "
             "stop), length, a prompt token as stop token (the adapter's), sampled t=1 with EOS, "
             "aborted after 1-5 tokens, sampled top-k/top-p",
             (int)w->n);
    assay_workload_free(w);
    return st;
}

struct usage_rec {
    uint64_t id;
    int64_t prompt, completion;
    int32_t sent, received;
};

struct usage_store {
    struct usage_rec rec[256];
    int32_t n;
    int32_t n_dropped;
};

static void on_usage(void *ctx, uint64_t id, int64_t prompt_tokens, int64_t completion_tokens,
                     int32_t prompt_sent, int32_t tokens_received)
{
    struct usage_store *s = ctx;
    for (int32_t i = 0; i < s->n; i++) {
        if (s->rec[i].id == id) {
            /* A later report (v1 sends usage with the last chunk) wins
             * where it states more. */
            if (prompt_tokens >= 0) {
                s->rec[i].prompt = prompt_tokens;
            }
            if (completion_tokens >= 0) {
                s->rec[i].completion = completion_tokens;
            }
            s->rec[i].sent = prompt_sent;
            s->rec[i].received = tokens_received;
            return;
        }
    }
    if (s->n == (int32_t)(sizeof s->rec / sizeof s->rec[0])) {
        s->n_dropped++;
        return;
    }
    s->rec[s->n++] =
        (struct usage_rec){id, prompt_tokens, completion_tokens, prompt_sent, tokens_received};
}

static enum assay_status check_usage(struct assay_audit *a, const struct assay_plan_item *item,
                                     struct assay_check_result *res)
{
    struct assay_workload *w = NULL;
    enum assay_status st = check_workload(a, item, res, &w);
    if (st != ASSAY_OK) {
        return st;
    }
    for (int32_t i = 0; i < w->n; i++) {
        struct assay_workload_request *r = &w->reqs[i];
        r->stop_token = i % 2 == 0 ? a->p.eos_token : -1;
        if (i % 3 == 1) {
            r->sampling.temperature = 1.0f;
            r->sampling.seeded = true;
            r->sampling.seed = (uint64_t)i + 7;
        }
    }
    snprintf(res->workload, sizeof res->workload,
             "generated: %d requests, prompts 1-120, outputs 1-32, half stopping at EOS, a third "
             "sampled",
             (int)w->n);
    res->n_requests = w->n;
    struct usage_store *s = assay_calloc(1, sizeof *s);
    struct assay_transcript *t = NULL;
    if (s == NULL) {
        assay_workload_free(w);
        return ASSAY_ERR_NOMEM;
    }
    assay_openai_set_usage_sink(&a->srv, on_usage, s);
    st = run(&a->srv, w, &t);
    assay_openai_set_usage_sink(&a->srv, NULL, NULL);
    int32_t n_reported = 0, n_prompt = 0, n_completion = 0;
    int64_t sum_prompt = 0, sum_out = 0;
    if (st == ASSAY_OK) {
        res->n_steps = t->n_steps;
        for (int32_t i = 0; i < w->n && res->verdict == ASSAY_VERDICT_PASS; i++) {
            const struct assay_workload_request *wr = &w->reqs[i];
            const struct assay_transcript_req *q = &t->reqs[i];
            const struct usage_rec *u = NULL;
            /* The harness hands each request to the adapter with the
             * workload's id. */
            for (int32_t k = 0; u == NULL && k < s->n; k++) {
                if (s->rec[k].id == wr->id) {
                    u = &s->rec[k];
                }
            }
            if (u != NULL) {
                n_reported++;
                res->n_checks++;
                if (u->prompt >= 0) {
                    n_prompt++;
                    sum_prompt += u->prompt;
                    if (u->prompt != wr->prompt_len) {
                        assay_check_fail(
                            res,
                            "request %llu: the server counts %lld prompt tokens, %d were "
                            "sent",
                            (unsigned long long)wr->id, (long long)u->prompt, (int)wr->prompt_len);
                    }
                }
                if (u->completion >= 0) {
                    n_completion++;
                    sum_out += u->completion;
                    if (u->completion != q->n_events) {
                        assay_check_fail(
                            res,
                            "request %llu: the server counts %lld generated tokens, %d were "
                            "received%s",
                            (unsigned long long)wr->id, (long long)u->completion, (int)q->n_events,
                            q->reason == ASSAY_FINISH_STOP ? " (it stopped at EOS, which "
                                                             "was delivered)"
                                                           : "");
                    }
                }
            }
            if (q->reason == ASSAY_FINISH_ERROR) {
                assay_check_fail(res, "request %llu failed: %s", (unsigned long long)wr->id,
                                 q->message);
            }
        }
        if (res->verdict == ASSAY_VERDICT_PASS && n_reported == 0) {
            assay_check_skip(res, "the server reported no token counts for any request (llama.cpp: "
                                  "tokens_evaluated / tokens_predicted; OpenAI API: usage)");
        } else if (res->verdict == ASSAY_VERDICT_PASS && n_reported < w->n) {
            assay_check_fail(res,
                             "the server reported token counts for %d of %d requests that finished",
                             (int)n_reported, (int)w->n);
        } else if (res->verdict == ASSAY_VERDICT_PASS && (n_prompt == 0 || n_completion == 0)) {
            assay_check_skip(res,
                             "the server reported %s counts only: the other could not be checked",
                             n_prompt == 0 ? "generated-token" : "prompt-token");
        }
    } else {
        assay_check_error(res, "could not run: %s", assay_status_str(st));
    }
    snprintf(res->summary, sizeof res->summary,
             "%d requests; the server stated its counts for %d: %lld prompt tokens and %lld "
             "generated tokens in all, each equal to what was sent and received",
             (int)w->n, (int)n_reported, (long long)sum_prompt, (long long)sum_out);
    if (res->verdict == ASSAY_VERDICT_FAIL) {
        snprintf(res->summary, sizeof res->summary,
                 "%d requests; the server stated its counts for %d; see the failure", (int)w->n,
                 (int)n_reported);
    }
    assay_transcript_free(t);
    assay_workload_free(w);
    assay_free(s);
    return st;
}

static enum assay_status check_stream(struct assay_audit *a, const struct assay_plan_item *item,
                                      struct assay_check_result *res)
{
    struct assay_workload *w = NULL;
    enum assay_status st = check_workload(a, item, res, &w);
    if (st != ASSAY_OK) {
        return st;
    }
    set_stop(w, a->p.eos_token);
    snprintf(res->workload, sizeof res->workload,
             "generated: %d greedy requests, prompts 2-80, outputs 4-32, EOS as stop token, one "
             "at a time, streamed then not",
             (int)w->n);
    res->n_requests = w->n;
    struct assay_transcript *t[2] = {NULL, NULL};
    const struct assay_adapter *inner[2] = {&a->srv, &a->srv_ns};
    static const char *const mode[2] = {"streamed", "non-streamed"};
    char msg[640];
    for (int k = 0; k < 2 && st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS; k++) {
        struct assay_gate_params gp = assay_gate_default_params();
        gp.max_in_flight = 1;
        struct assay_adapter gate;
        st = assay_gate_open(inner[k], &gp, &gate);
        if (st == ASSAY_OK) {
            st = run(&gate, w, &t[k]);
            assay_adapter_close(&gate);
        }
        if (st != ASSAY_OK) {
            break;
        }
        res->n_steps += t[k]->n_steps;
        if (t[k]->status != ASSAY_OK) {
            assay_check_fail(res, "%s: the run did not complete: %s", mode[k], t[k]->error);
        } else if (assay_check_delivery(w, t[k], msg, sizeof msg) >= 0) {
            assay_check_fail(res, "%s: %s", mode[k], msg);
        }
    }
    int64_t n_tokens = 0;
    int32_t n_ties = 0;
    double max_gap = 0.0;
    for (int32_t i = 0; st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS && i < w->n; i++) {
        res->n_checks++;
        if (!same_or_tie(a, &w->reqs[i], &t[0]->reqs[i], &t[1]->reqs[i], "streamed", "non-streamed",
                         &n_tokens, &n_ties, &max_gap, msg, sizeof msg, &st)) {
            if (st == ASSAY_OK) {
                assay_check_fail(res, "%s", msg);
            }
        } else if (t[0]->reqs[i].reason != t[1]->reqs[i].reason &&
                   t[0]->reqs[i].n_events == t[1]->reqs[i].n_events) {
            assay_check_fail(res, "request %llu finished with %s streamed, %s not",
                             (unsigned long long)w->reqs[i].id,
                             assay_finish_reason_str(t[0]->reqs[i].reason),
                             assay_finish_reason_str(t[1]->reqs[i].reason));
        }
    }
    res->n_tokens = n_tokens;
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not run: %s", assay_status_str(st));
    }
    snprintf(res->summary, sizeof res->summary,
             "%d greedy requests streamed and non-streamed, one at a time: %lld tokens and every "
             "finish reason compared; %d ties within %g",
             (int)w->n, (long long)n_tokens, (int)n_ties, tie_budget(a));
    assay_transcript_free(t[0]);
    assay_transcript_free(t[1]);
    assay_workload_free(w);
    return st;
}
static bool wait_idle(struct assay_audit *a, bool kv, double *waited)
{
    int64_t t0 = assay_now_ns();
    for (;;) {
        if (!assay_audit_read_metrics(a, false)) {
            *waited = (double)(assay_now_ns() - t0) / 1e9;
            return false;
        }
        bool all = true;
        for (size_t i = 0; i < a->n_gauges; i++) {
            if (a->gauges[i].kv == kv && !assay_audit_gauge_back(&a->gauges[i])) {
                all = false;
            }
        }
        *waited = (double)(assay_now_ns() - t0) / 1e9;
        if (all || assay_now_ns() - t0 > IDLE_WAIT_NS) {
            return all;
        }
        assay_sleep_until_ns(assay_now_ns() + 100000000LL);
    }
}

static enum assay_status check_idle(struct assay_audit *a, bool kv, struct assay_check_result *res)
{
    snprintf(res->workload, sizeof res->workload,
             "the server's /metrics after every check and "
             "the benchmark");
    if (!a->metrics_read) {
        assay_check_skip(res, "the server's metrics could not be read: %s", a->metrics_status);
        snprintf(res->summary, sizeof res->summary, "not checked: no /metrics");
        return ASSAY_OK;
    }
    char names[400] = "", missing[600] = "";
    int32_t n_present = 0;
    for (size_t i = 0; i < a->n_gauges; i++) {
        const struct assay_audit_gauge *g = &a->gauges[i];
        if (g->kv != kv) {
            continue;
        }
        char *dst = g->present ? names : missing;
        size_t cap = g->present ? sizeof names : sizeof missing;
        size_t l = strlen(dst);
        snprintf(dst + l, cap - l, "%s%s", l > 0 ? ", " : "", g->name);
        n_present += g->present;
    }
    if (n_present == 0) {
        assay_check_skip(
            res, "the server's /metrics exports no %s gauge that assay knows (looked for %s)",
            kv ? "KV-cache" : "running/waiting-requests", missing);
        snprintf(res->summary, sizeof res->summary, "not checked: no %s gauge in /metrics",
                 kv ? "KV-cache" : "request");
        if (kv) {
            assay_audit_note(
                a,
                "KV cache: the server's /metrics exports no KV-cache gauge (looked for "
                "%s), so its KV usage after the run could not be checked.",
                missing);
        }
        return ASSAY_OK;
    }
    if (kv && a->baseline_busy) {
        assay_check_skip(
            res, "the server was running requests when the audit started, so its idle KV level "
                 "is unknown");
        snprintf(res->summary, sizeof res->summary, "not checked: no idle baseline");
        return ASSAY_OK;
    }
    double waited = 0.0;
    bool back = wait_idle(a, kv, &waited);
    res->n_checks = n_present;
    if (!a->metrics_status[0] && !back) {
        char detail[400] = "";
        for (size_t i = 0; i < a->n_gauges; i++) {
            const struct assay_audit_gauge *g = &a->gauges[i];
            if (g->kv == kv && !assay_audit_gauge_back(g)) {
                size_t l = strlen(detail);
                snprintf(detail + l, sizeof detail - l, "%s%s %g (idle %g)", l > 0 ? ", " : "",
                         g->name, g->after, kv ? g->idle : 0.0);
            }
        }
        assay_check_fail(res, "not back to idle %.0f s after the run: %s", waited, detail);
    } else if (a->metrics_status[0]) {
        assay_check_error(res, "%s", a->metrics_status);
    }
    char values[400] = "";
    for (size_t i = 0; i < a->n_gauges; i++) {
        const struct assay_audit_gauge *g = &a->gauges[i];
        if (g->kv == kv && g->present) {
            size_t l = strlen(values);
            snprintf(values + l, sizeof values - l, "%s%s %g before, %g after", l > 0 ? "; " : "",
                     g->name, g->idle, g->after);
        }
    }
    if (snprintf(res->summary, sizeof res->summary, "%s (read %.1f s after the run ended): %s",
                 kv ? "KV usage" : "requests running and waiting", waited,
                 values) >= (int)sizeof res->summary) {
        memcpy(res->summary + sizeof res->summary - 4, "...", 4); /* cut, and said so */
    }
    return ASSAY_OK;
}
/* ---- the seeded family on the server ------------------------------------ */

enum seeded_kind { S_POSITIONS, S_UNSEEDED, S_PAIRS };

/* The seeded family's checks (checks/seeded.h) through the server adapter,
 * within the seeds the adapter passes as given (ASSAY_OPENAI_SEED_MAX:
 * llama.cpp takes 32-bit seeds and reads 0xFFFFFFFF as "draw a random
 * one"), seeds drawn from the audit's seed and the check's name. */
static enum assay_status check_seeded(struct assay_audit *a, const struct assay_plan_item *item,
                                      enum seeded_kind kind, struct assay_check_result *res)
{
    struct assay_seeded_opts o = assay_seeded_opts_default();
    o.seed_max = ASSAY_OPENAI_SEED_MAX;
    o.max_steps = MAX_STEPS;
    o.chance = assay_audit_seed_chance;
    o.chance_ctx = a;
    if (a->p.seed_promise != ASSAY_SEED_PROMISE_BITWISE) {
        o.explain = assay_audit_seed_explain;
        o.explain_ctx = a;
        o.explain_alone = a->p.seed_promise == ASSAY_SEED_PROMISE_BUDGET;
    }
    uint64_t seed = assay_seed_derive(a->p.seed, item->name);
    struct assay_adapter_info info;
    assay_adapter_get_info(&a->srv, &info);
    enum assay_status st;
    switch (kind) {
    case S_POSITIONS: {
        int32_t n_ctx = info.n_ctx > 0 ? info.n_ctx : a->model->cfg.n_ctx;
        /* A lone repeat of a seed, its prompt not cached: what llama.cpp
         * reproduces bit for bit. */
        st = assay_check_seed_positions(&a->srv_det, a->model->cfg.vocab, n_ctx, seed, &o, res);
        break;
    }
    case S_UNSEEDED: st = assay_check_seed_unseeded(&a->srv, a->model, seed, &o, res); break;
    default:
        /* About 300 one-token requests a second: 10 s quick, 20 s full. */
        st = assay_check_seed_pairs(&a->srv, a->model, seed, &o, a->p.quick ? 1500 : 3000, 1e-6,
                                    0.99, res);
        break;
    }
    if (res->verdict == ASSAY_VERDICT_PASS) {
        size_t used = strlen(res->summary);
        if (snprintf(res->summary + used, sizeof res->summary - used,
                     "; seeds up to %llu, the largest the adapter sends as given%s",
                     (unsigned long long)o.seed_max,
                     kind == S_POSITIONS && a->p.seed_promise != ASSAY_SEED_PROMISE_BITWISE
                         ? "; asked not to reuse the prompt cache (cache_prompt false)"
                         : "") >= (int)(sizeof res->summary - used)) {
            memcpy(res->summary + sizeof res->summary - 4, "...", 4); /* cut, and said so */
        }
    }
    return st;
}

/* ---- the runners of the audit's checks (registered in checks/plan.c) ---- */

#define AUDIT_RUNNER(fn, call)                                                                     \
    enum assay_status fn(struct assay_verify_ctx *ctx, const struct assay_plan_item *item,         \
                         const struct assay_target *t, const struct assay_workload *w,             \
                         struct assay_check_result *res)                                           \
    {                                                                                              \
        (void)ctx;                                                                                 \
        (void)item;                                                                                \
        (void)w;                                                                                   \
        struct assay_audit *a = t->owner;                                                          \
        return call;                                                                               \
    }

AUDIT_RUNNER(assay_audit_run_equiv_alone, check_equiv(a, true, res))
AUDIT_RUNNER(assay_audit_run_equiv_concurrent, check_equiv(a, false, res))
AUDIT_RUNNER(assay_audit_run_logprobs, check_logprobs(a, item, res))
AUDIT_RUNNER(assay_audit_run_batch_invariance, check_batch_invariance(a, item, res))
AUDIT_RUNNER(assay_audit_run_finish, check_finish(a, item, res))
AUDIT_RUNNER(assay_audit_run_usage, check_usage(a, item, res))
AUDIT_RUNNER(assay_audit_run_stream, check_stream(a, item, res))
AUDIT_RUNNER(assay_audit_run_idle_requests, check_idle(a, false, res))
AUDIT_RUNNER(assay_audit_run_idle_kv, check_idle(a, true, res))
AUDIT_RUNNER(assay_audit_run_seed_positions, check_seeded(a, item, S_POSITIONS, res))
AUDIT_RUNNER(assay_audit_run_seed_unseeded, check_seeded(a, item, S_UNSEEDED, res))
AUDIT_RUNNER(assay_audit_run_seed_pairs, check_seeded(a, item, S_PAIRS, res))
