/*
 * audit_budget.c - the audit's numerics budget (checks/audit.h): the
 * reference, the bundled engine computing the server's formats, against
 * the oracle on the positions of the logprobs workload's prompts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 * context): the audit's greedy workloads are far shorter. */
#define BUDGET_MAX_LEN 512

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

/* The oracle's rows of every prompt of w as the budget reads them (its
 * first token, then the rest as the continuation), computed in batched
 * passes ahead of the lookups (assay_oracle_memo_prefetch: the same rows;
 * a lookup computes, or fails on, whatever this could not). */
static void prefetch_prompts(struct assay_audit *a, const struct assay_workload *w)
{
    const int32_t **firsts = assay_calloc((size_t)w->n + 1, sizeof *firsts);
    const int32_t **rests = assay_calloc((size_t)w->n + 1, sizeof *rests);
    int32_t *ones = assay_calloc((size_t)w->n + 1, sizeof *ones);
    int32_t *lens = assay_calloc((size_t)w->n + 1, sizeof *lens);
    int32_t n = 0;
    for (int32_t i = 0; firsts != NULL && rests != NULL && ones != NULL && lens != NULL && i < w->n;
         i++) {
        const struct assay_workload_request *wr = &w->reqs[i];
        if (wr->prompt_len >= 2) {
            firsts[n] = wr->prompt;
            ones[n] = 1;
            rests[n] = wr->prompt + 1;
            lens[n++] = wr->prompt_len - 1;
        }
    }
    if (n > 0) {
        (void)assay_oracle_memo_prefetch(a->memo, n, firsts, ones, rests, lens);
    }
    assay_free(firsts);
    assay_free(rests);
    assay_free(ones);
    assay_free(lens);
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
    assay_score_set_f16_acc(a->scorer, variant == 1);
    const float *rows = NULL;
    st = assay_score_rows(a->scorer, prompt, prompt_len, cont, n_cont, &rows);
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

    /* The positions: every prompt position of the logprobs workload, drawn
     * with a seed of the budget's own. */
    const struct assay_plan_item *item =
        assay_plan_find_in(ASSAY_COMMAND_AUDIT, "audit.equiv.logprobs");
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", a->fixtures,
             item != NULL && item->workload != NULL ? item->workload
                                                    : "workloads/audit-logprobs.json");
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
    prefetch_prompts(a, w);
    for (int32_t var = 0; var < b->n_variants; var++) {
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

const struct assay_audit_budget *assay_audit_budget(const struct assay_audit *a)
{
    return &a->budget;
}
