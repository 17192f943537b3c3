/*
 * audit_budget.c - the audit's numerics budget (checks/audit.h): the
 * reference, the bundled engine computing the server's formats, against
 * the oracle at every position of the budget workload's prompts.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/rng.h"
#include "../core/workload.h"
#include "../engine/forward.h"
#include "../engine/gguf.h"
#include "check.h"
#include "plan.h"

#include "audit_internal.h"

/* The reference takes sequences of up to this many tokens (or the model's
 * context), and batches of as many (assay_audit_reference_prefetch): a
 * batch's logits, the largest of its buffers, no larger than one
 * sequence's could be. The audit's greedy workloads are far shorter. */
#define BUDGET_MAX_LEN 512

/* The reference's rows of some sequences, kept for their lookups. */
struct assay_audit_ref_rows {
    int32_t variant, n;
    int32_t **tokens;   /* (n) each sequence's prompt then continuation; NULL: not scored */
    int32_t *prompt_len, *n_cont;
    int64_t *row0;      /* (n) its first row in rows */
    float *rows;        /* (sum of n_cont, vocab) */
};

void assay_audit_log_softmax(const double *row, int32_t v, double *out)
{
    double mx = row[0];
    for (int32_t k = 1; k < v; k++) {
        mx = row[k] > mx ? row[k] : mx;
    }
    double sum = 0.0;
    for (int32_t k = 0; k < v; k++) {
        sum += exp(row[k] - mx);
    }
    double lse = mx + log(sum);
    for (int32_t k = 0; k < v; k++) {
        out[k] = row[k] - lse;
    }
}

static enum assay_status open_scorer(struct assay_audit *a)
{
    if (a->scorer != NULL) {
        return ASSAY_OK;
    }
    int32_t len = a->model->cfg.n_ctx < BUDGET_MAX_LEN ? a->model->cfg.n_ctx : BUDGET_MAX_LEN;
    struct assay_score_params sp = assay_score_default_params(a->model, len);
    sp.act = ASSAY_ACT_MODE_GGML;
    sp.kv_type = a->p.kv_type;
    sp.flash_attn = a->p.flash_attn;
    sp.two_threads = true; /* the server is idle while the reference computes */
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_score_init(&a->scorer, &sp, &diag);
    if (st != ASSAY_OK) {
        char msg[300];
        snprintf(a->budget.why, sizeof a->budget.why,
                 "the reference cannot compute this model's numerics: %s (%s)",
                 assay_diag_format(&diag, msg, sizeof msg), assay_status_str(st));
        return st;
    }
    a->scorer_len = len;
    return ASSAY_OK;
}

/* assay_audit_prefetch (audit_internal.h) */
void assay_audit_prefetch(struct assay_audit *a, const struct assay_workload *w,
                          const struct assay_transcript *t, int32_t variant)
{
    const int32_t **prompts = assay_calloc((size_t)w->n + 1, sizeof *prompts);
    const int32_t **outs = assay_calloc((size_t)w->n + 1, sizeof *outs);
    int32_t *p_lens = assay_calloc((size_t)w->n + 1, sizeof *p_lens);
    int32_t *o_lens = assay_calloc((size_t)w->n + 1, sizeof *o_lens);
    int32_t n = 0;
    for (int32_t i = 0; prompts != NULL && outs != NULL && p_lens != NULL && o_lens != NULL &&
                        i < w->n;
         i++) {
        const struct assay_workload_request *wr = &w->reqs[i];
        if (t == NULL && wr->prompt_len >= 2) {
            /* the prompt's first token, then the rest as the continuation */
            prompts[n] = wr->prompt;
            p_lens[n] = 1;
            outs[n] = wr->prompt + 1;
            o_lens[n++] = wr->prompt_len - 1;
        } else if (t != NULL && t->reqs[i].n_events > 0) {
            prompts[n] = wr->prompt;
            p_lens[n] = wr->prompt_len;
            outs[n] = t->reqs[i].tokens;
            o_lens[n++] = t->reqs[i].n_events;
        }
    }
    if (n > 0 && variant < 0) {
        (void)assay_oracle_memo_prefetch(a->memo, n, prompts, p_lens, outs, o_lens);
    } else if (n > 0) {
        assay_audit_reference_prefetch(a, variant, n, prompts, p_lens, outs, o_lens);
    }
    assay_free(prompts);
    assay_free(outs);
    assay_free(p_lens);
    assay_free(o_lens);
}

static void ref_rows_free(struct assay_audit_ref_rows *r)
{
    if (r == NULL) {
        return;
    }
    for (int32_t i = 0; r->tokens != NULL && i < r->n; i++) {
        assay_free(r->tokens[i]);
    }
    assay_free(r->tokens);
    assay_free(r->prompt_len);
    assay_free(r->n_cont);
    assay_free(r->row0);
    assay_free(r->rows);
    assay_free(r);
}

void assay_audit_reference_forget(struct assay_audit *a)
{
    ref_rows_free(a->ref_rows);
    a->ref_rows = NULL;
}

/* Room for the rows of n sequences whose continuations have `rows` rows in
 * all; NULL when an allocation failed. */
static struct assay_audit_ref_rows *ref_rows_alloc(int32_t n, int64_t rows, int32_t v)
{
    struct assay_audit_ref_rows *r = assay_calloc(1, sizeof *r);
    if (r == NULL) {
        return NULL;
    }
    r->n = n;
    r->tokens = assay_calloc((size_t)n, sizeof *r->tokens);
    r->prompt_len = assay_calloc((size_t)n, sizeof *r->prompt_len);
    r->n_cont = assay_calloc((size_t)n, sizeof *r->n_cont);
    r->row0 = assay_calloc((size_t)n, sizeof *r->row0);
    r->rows = assay_malloc(sizeof(float) * (size_t)rows * (size_t)v);
    if (r->tokens == NULL || r->prompt_len == NULL || r->n_cont == NULL || r->row0 == NULL ||
        r->rows == NULL) {
        ref_rows_free(r);
        return NULL;
    }
    return r;
}

/* Score the prefetch's sequences idx[0..n) in one batch, their rows into r
 * from row *row on; the tokens of those scored are kept. */
static enum assay_status score_batch(struct assay_audit *a, struct assay_audit_ref_rows *r,
                                     const int32_t *const *prompts, const int32_t *prompt_lens,
                                     const int32_t *const *conts, const int32_t *n_conts,
                                     const int32_t *idx, int32_t n, int64_t *row)
{
    const int32_t v = a->model->cfg.vocab;
    struct assay_score_seq seqs[ASSAY_SCORE_MAX_SEQS];
    for (int32_t k = 0; k < n; k++) {
        int32_t i = idx[k];
        seqs[k] = (struct assay_score_seq){prompts[i], prompt_lens[i], conts[i], n_conts[i]};
    }
    const float *rows = NULL;
    enum assay_status st = assay_score_rows_batch(a->scorer, seqs, n, &rows);
    for (int32_t k = 0; st == ASSAY_OK && k < n; k++) {
        int32_t i = idx[k], len = prompt_lens[i] + n_conts[i];
        int32_t *tokens = assay_malloc(sizeof(int32_t) * (size_t)len);
        if (tokens == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        memcpy(tokens, prompts[i], sizeof(int32_t) * (size_t)prompt_lens[i]);
        memcpy(tokens + prompt_lens[i], conts[i], sizeof(int32_t) * (size_t)n_conts[i]);
        memcpy(r->rows + *row * v, rows, sizeof(float) * (size_t)n_conts[i] * (size_t)v);
        r->tokens[i] = tokens;
        r->prompt_len[i] = prompt_lens[i];
        r->n_cont[i] = n_conts[i];
        r->row0[i] = *row;
        *row += n_conts[i];
        rows += (int64_t)n_conts[i] * v;
    }
    return st;
}

/* Whether the reference takes a sequence of these lengths. */
static bool scorer_takes(const struct assay_audit *a, int32_t prompt_len, int32_t n_cont)
{
    return prompt_len >= 1 && n_cont >= 1 && prompt_len + n_cont - 1 <= a->scorer_len;
}

void assay_audit_reference_prefetch(struct assay_audit *a, int32_t variant, int32_t n,
                                    const int32_t *const *prompts, const int32_t *prompt_lens,
                                    const int32_t *const *conts, const int32_t *n_conts)
{
    assay_audit_reference_forget(a);
    if (n < 1 || open_scorer(a) != ASSAY_OK) {
        return;
    }
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        total += scorer_takes(a, prompt_lens[i], n_conts[i]) ? n_conts[i] : 0;
    }
    struct assay_audit_ref_rows *r =
        total > 0 ? ref_rows_alloc(n, total, a->model->cfg.vocab) : NULL;
    if (r == NULL) {
        return;
    }
    r->variant = variant;
    a->ref_rows = r;
    assay_score_set_f16_acc(a->scorer, variant == 1);
    /* In the order given, as many sequences a batch as its rows take. */
    const int32_t max_rows = assay_score_max_rows(a->scorer);
    int32_t idx[ASSAY_SCORE_MAX_SEQS], k = 0, batch_rows = 0;
    int64_t row = 0;
    enum assay_status st = ASSAY_OK;
    for (int32_t i = 0; i <= n && st == ASSAY_OK; i++) {
        int32_t len = i < n ? prompt_lens[i] + n_conts[i] - 1 : 0;
        bool fits = i < n && scorer_takes(a, prompt_lens[i], n_conts[i]);
        bool full = k == ASSAY_SCORE_MAX_SEQS || batch_rows + len > max_rows;
        if (k > 0 && (i == n || (fits && full))) {
            st = score_batch(a, r, prompts, prompt_lens, conts, n_conts, idx, k, &row);
            k = 0;
            batch_rows = 0;
        }
        if (fits) {
            idx[k++] = i;
            batch_rows += len;
        }
    }
}

/* The kept rows of (prompt, cont) under variant, or NULL. */
static const float *kept_rows(const struct assay_audit *a, int32_t variant, const int32_t *prompt,
                              int32_t prompt_len, const int32_t *cont, int32_t n_cont)
{
    const struct assay_audit_ref_rows *r = a->ref_rows;
    if (r == NULL || r->variant != variant) {
        return NULL;
    }
    for (int32_t i = 0; i < r->n; i++) {
        if (r->tokens[i] != NULL && r->prompt_len[i] == prompt_len && r->n_cont[i] == n_cont &&
            memcmp(r->tokens[i], prompt, sizeof(int32_t) * (size_t)prompt_len) == 0 &&
            memcmp(r->tokens[i] + prompt_len, cont, sizeof(int32_t) * (size_t)n_cont) == 0) {
            return r->rows + r->row0[i] * a->model->cfg.vocab;
        }
    }
    return NULL;
}

enum assay_status assay_audit_reference_lsm(struct assay_audit *a, int32_t variant,
                                            const int32_t *prompt, int32_t prompt_len,
                                            const int32_t *cont, int32_t n_cont, double *out)
{
    enum assay_status st = open_scorer(a);
    if (st != ASSAY_OK) {
        return st;
    }
    if (prompt_len + n_cont - 1 > a->scorer_len) {
        return ASSAY_ERR_INVALID;
    }
    const float *rows = kept_rows(a, variant, prompt, prompt_len, cont, n_cont);
    if (rows == NULL) {
        assay_score_set_f16_acc(a->scorer, variant == 1);
        st = assay_score_rows(a->scorer, prompt, prompt_len, cont, n_cont, &rows);
    }
    if (st != ASSAY_OK) {
        return st;
    }
    const int32_t v = a->model->cfg.vocab;
    double *row = assay_malloc(sizeof(double) * (size_t)v);
    if (row == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t i = 0; i < n_cont; i++) {
        for (int32_t k = 0; k < v; k++) {
            row[k] = rows[(int64_t)i * v + k];
        }
        assay_audit_log_softmax(row, v, out + (int64_t)i * v);
    }
    assay_free(row);
    return ASSAY_OK;
}

/* The formats in words: each stored type with the activation format ggml
 * rounds its products' inputs to, the KV cache, the attention path. */
static void describe_formats(const struct assay_audit *a, char *out, size_t size)
{
    const char *types = a->model->tensor_types;
    size_t used = (size_t)snprintf(out, size, "weights %s; activations rounded as each type's "
                                              "vec_dot_type (",
                                   types);
    char buf[64];
    snprintf(buf, sizeof buf, "%s", types);
    bool first = true;
    for (char *tok = strtok(buf, "+"); tok != NULL && used < size; tok = strtok(NULL, "+")) {
        uint32_t ggml_type = 0;
        enum assay_act_format fmt = ASSAY_ACT_FORMAT_F32;
        const char *name = "?";
        while (ggml_type < 64 && strcmp(assay_ggml_type_name(ggml_type), tok) != 0) {
            ggml_type++;
        }
        if (ggml_type < 64 && assay_numerics_act_format(ggml_type, &fmt) == ASSAY_OK) {
            name = assay_numerics_format_name(fmt);
        }
        used += (size_t)snprintf(out + used, size - used, "%s%s: %s", first ? "" : ", ", tok,
                                 name);
        first = false;
    }
    if (used < size) {
        snprintf(out + used, size - used, "); KV cache %s; %s",
                 assay_numerics_kv_name(a->p.kv_type),
                 a->p.kv_type == ASSAY_KV_TYPE_F16 && a->p.flash_attn
                     ? "flash attention (fp16 accumulator)"
                     : "attention without flash attention");
    }
}

void assay_audit_reference_position(const double *oracle_lsm, const double *ref_lsm, int32_t v,
                                    int32_t n_top, int32_t *top, double *max_abs,
                                    double *gap_change)
{
    /* The oracle's top n_top tokens, best first (ties: the lower id). */
    int32_t n_in = 0;
    for (int32_t k = 0; k < v; k++) {
        if (n_in == n_top && oracle_lsm[k] <= oracle_lsm[top[n_in - 1]]) {
            continue;
        }
        int32_t j = n_in < n_top ? n_in++ : n_top - 1;
        while (j > 0 && oracle_lsm[k] > oracle_lsm[top[j - 1]]) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = k;
    }
    double lo = INFINITY, hi = -INFINITY, mx = 0.0;
    for (int32_t j = 0; j < n_in; j++) {
        double d = ref_lsm[top[j]] - oracle_lsm[top[j]];
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
        mx = fabs(d) > mx ? fabs(d) : mx;
    }
    *max_abs = mx;
    *gap_change = n_in > 0 ? hi - lo : 0.0;
}

void assay_audit_budget_at_check(struct assay_audit *a, int32_t variant, double ref_max_abs,
                                 int64_t n_positions)
{
    struct assay_audit_budget *b = &a->budget;
    if (!b->measured || variant < 0 || variant >= b->n_variants) {
        return;
    }
    b->variant_check_max_abs[variant] = fmax(b->variant_check_max_abs[variant], ref_max_abs);
    b->check_ref_max_abs = fmax(b->check_ref_max_abs, ref_max_abs);
    if (variant == 0) {
        b->check_positions += n_positions;
    }
    b->logprob = fmax(b->logprob, ASSAY_AUDIT_BUDGET_FACTOR * b->check_ref_max_abs);
}

enum assay_status assay_audit_need_budget(struct assay_audit *a)
{
    if (a->budget_tried) {
        return a->budget.measured ? ASSAY_OK : ASSAY_ERR_INVALID;
    }
    a->budget_tried = true;
    struct assay_audit_budget *b = &a->budget;
    memset(b, 0, sizeof *b);
    b->logprob = ASSAY_AUDIT_LOGPROB_TOL;
    b->gap = ASSAY_EQUIV_TIE_TOL;
    b->n_top = a->p.n_probs;
    describe_formats(a, b->formats, sizeof b->formats);
    int64_t t0 = assay_now_ns();
    const int32_t v = a->model->cfg.vocab;
    const int32_t n_top = a->p.n_probs < v ? a->p.n_probs : v;

    /* The positions: every prompt position of the budget's own workload
     * (short prompts), drawn with a seed of the budget's own. The logprobs
     * check's positions, which reach the far end of the context, join the
     * logprob budget as it runs (assay_audit_budget_at_check); the tie
     * budget stays the one these positions give. */
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", a->fixtures, ASSAY_AUDIT_BUDGET_WORKLOAD);
    struct assay_workload_draw draw = {
        assay_seed_derive(a->p.seed, "audit.numerics-budget") % 1000000007ull + 1, 0};
    struct assay_workload_limits lim = {v, a->model->cfg.n_ctx, 0};
    struct assay_workload *w = NULL;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_workload_load_drawn(path, &lim, &draw, &w, &diag);
    if (st != ASSAY_OK) {
        char msg[300];
        snprintf(b->why, sizeof b->why, "its workload: %s",
                 assay_diag_format(&diag, msg, sizeof msg));
        return st;
    }
    int32_t longest = 0;
    for (int32_t i = 0; i < w->n; i++) {
        longest = w->reqs[i].prompt_len > longest ? w->reqs[i].prompt_len : longest;
    }
    b->n_variants = assay_forward_f16_acc_applies(a->model, a->p.kv_type, a->p.flash_attn) ? 2 : 1;
    double *ref = assay_malloc(sizeof(double) * (size_t)v * (size_t)(longest > 0 ? longest : 1));
    double *lsm = assay_malloc(sizeof(double) * (size_t)v);
    int32_t *top = assay_malloc(sizeof(int32_t) * (size_t)n_top);
    struct assay_divergence_top *list = assay_malloc(sizeof *list * (size_t)n_top);
    struct assay_divergence *acc[2] = {NULL, NULL};
    if (ref == NULL || lsm == NULL || top == NULL || list == NULL ||
        assay_divergence_init(&acc[0]) != ASSAY_OK || assay_divergence_init(&acc[1]) != ASSAY_OK) {
        st = ASSAY_ERR_NOMEM;
        snprintf(b->why, sizeof b->why, "out of memory");
        goto out;
    }
    double tv_sum[2] = {0.0, 0.0};
    assay_audit_prefetch(a, w, NULL, -1);
    for (int32_t var = 0; var < b->n_variants; var++) {
        assay_audit_prefetch(a, w, NULL, var);
        for (int32_t i = 0; i < w->n; i++) {
            const struct assay_workload_request *wr = &w->reqs[i];
            if (wr->prompt_len < 2) {
                continue;
            }
            const double *rows = NULL;
            st = assay_oracle_memo_rows(a->memo, wr->prompt, 1, wr->prompt + 1, wr->prompt_len - 1,
                                        &rows);
            if (st == ASSAY_OK) {
                st = assay_audit_reference_lsm(a, var, wr->prompt, 1, wr->prompt + 1,
                                               wr->prompt_len - 1, ref);
            }
            if (st != ASSAY_OK) {
                if (b->why[0] == '\0') {
                    snprintf(b->why, sizeof b->why, "request %d: %s", (int)i, assay_status_str(st));
                }
                goto out;
            }
            for (int32_t pos = 0; pos + 1 < wr->prompt_len; pos++) {
                assay_audit_log_softmax(rows + (int64_t)pos * v, v, lsm);
                const double *r = ref + (int64_t)pos * v;
                double max_abs, gap_change;
                assay_audit_reference_position(lsm, r, v, n_top, top, &max_abs, &gap_change);
                b->variant_max_abs[var] = fmax(b->variant_max_abs[var], max_abs);
                b->ref_max_abs = fmax(b->ref_max_abs, max_abs);
                b->ref_max_gap = fmax(b->ref_max_gap, gap_change);
                for (int32_t j = 0; j < n_top; j++) {
                    list[j].token = top[j];
                    list[j].logprob = r[top[j]];
                }
                double tv = 0.0;
                int32_t ref_best = 0;
                for (int32_t k = 0; k < v; k++) {
                    tv += fabs(exp(r[k]) - exp(lsm[k]));
                    ref_best = r[k] > r[ref_best] ? k : ref_best;
                }
                tv *= 0.5;
                tv_sum[var] += tv;
                b->tv_max = tv > b->tv_max ? tv : b->tv_max;
                st = assay_divergence_add(acc[var], lsm, v, list, n_top, ref_best == top[0]);
                if (st != ASSAY_OK) {
                    snprintf(b->why, sizeof b->why, "the reference's logprobs: %s",
                             assay_status_str(st));
                    goto out;
                }
                b->n_positions += var == 0;
            }
        }
    }
    if (b->n_positions == 0) {
        st = ASSAY_ERR_INVALID;
        snprintf(b->why, sizeof b->why, "its workload has no prompt of two tokens or more");
        goto out;
    }
    /* Each figure the larger of the variants': the summary of the one
     * farther from the oracle on average. */
    b->tv_mean = fmax(tv_sum[0], tv_sum[1]) / (double)b->n_positions;
    struct assay_divergence_summary s1;
    assay_divergence_summarise(acc[0], "reference", &b->ref);
    if (b->n_variants == 2) {
        assay_divergence_summarise(acc[1], "reference", &s1);
        b->ref = s1.kld.mean > b->ref.kld.mean ? s1 : b->ref;
    }
    b->logprob = fmax(ASSAY_AUDIT_LOGPROB_TOL, ASSAY_AUDIT_BUDGET_FACTOR * b->ref_max_abs);
    b->gap = fmax(ASSAY_EQUIV_TIE_TOL, ASSAY_AUDIT_BUDGET_FACTOR * b->ref_max_gap);
    b->measured = true;
out:
    assay_audit_reference_forget(a);
    b->seconds = (double)(assay_now_ns() - t0) / 1e9;
    assay_divergence_free(acc[0]);
    assay_divergence_free(acc[1]);
    assay_free(list);
    assay_free(top);
    assay_free(lsm);
    assay_free(ref);
    assay_workload_free(w);
    return st;
}

void assay_audit_kld_rule(const double *srv, const double *ref, const int32_t *count,
                          int32_t n_req, int32_t n_top, struct assay_audit_kld *out)
{
    *out = (struct assay_audit_kld){0, NAN, NAN, NAN, NAN, NAN, NAN, false};
    double s = 0.0, r = 0.0;
    int64_t n = 0;
    for (int32_t i = 0; i < n_req; i++) {
        s += srv[i];
        r += ref[i];
        n += count[i];
    }
    const double floor =
        n_top * FLT_EPSILON + 2.0 * ASSAY_AUDIT_LOGPROB_TOL * ASSAY_AUDIT_LOGPROB_TOL;
    if (n < ASSAY_AUDIT_KLD_MIN_POSITIONS || ASSAY_AUDIT_KLD_FACTOR * r / (double)n <= floor) {
        return; /* too few positions, or exact arithmetic: the fixed tolerance rules */
    }
    out->n = n;
    out->server = s / (double)n;
    out->reference = r / (double)n;
    out->ratio = s / r;
    out->budget = ASSAY_AUDIT_KLD_FACTOR * out->reference;
    /* The ratio's jackknife standard error, each request left out in turn
     * (positions within a request are not independent). */
    double sum = 0.0, sum2 = 0.0;
    int32_t m = 0;
    for (int32_t i = 0; i < n_req; i++) {
        if (count[i] == 0) {
            continue;
        }
        double q = r - ref[i] > 0.0 ? (s - srv[i]) / (r - ref[i]) : 0.0;
        sum += q;
        sum2 += q * q;
        m++;
    }
    if (m > 1) {
        double mean = sum / m;
        out->ratio_se = sqrt(fmax(0.0, (m - 1.0) / m * (sum2 - m * mean * mean)));
        out->ratio_lower =
            out->ratio - gsl_cdf_tdist_Pinv(1.0 - ASSAY_AUDIT_KLD_ALPHA, m - 1.0) * out->ratio_se;
        out->beyond = out->ratio_lower > ASSAY_AUDIT_KLD_FACTOR;
    }
}

const struct assay_audit_budget *assay_audit_budget(const struct assay_audit *a)
{
    return &a->budget;
}
