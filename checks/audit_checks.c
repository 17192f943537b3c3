/*
 * audit_checks.c - the checks of `assay audit` on a server (see audit.h and
 * the registry, checks/plan.c): greedy tokens against the oracle (the top
 * logprobs' check is audit_logprobs.c), samples against its distributions,
 * and the properties only a server shows (finish reasons, usage counts,
 * streamed against not, its gauges back to idle).
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

/* ---- workloads ------------------------------------------------------------ */

/* The request count of item's "quick=N" parameter: how many requests its
 * workload draws under --quick (0: the file's count; also for NULL). */
static int32_t quick_requests(const struct assay_plan_item *item)
{
    char quick[16] = "";
    if (item != NULL) {
        assay_plan_param(item->params, "quick", quick, sizeof quick);
    }
    return (int32_t)strtol(quick, NULL, 10);
}

/* The generated workload of an audit check (audit_internal.h). */
enum assay_status assay_audit_check_workload(const struct assay_audit *a,
                                             const struct assay_plan_item *item,
                                             struct assay_check_result *res,
                                             struct assay_workload **out)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", a->fixtures, item->workload != NULL ? item->workload : "");
    struct assay_workload_draw draw = {assay_seed_derive(a->p.seed, item->name) % 1000000007ull + 1,
                                       a->p.quick ? quick_requests(item) : 0};
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

enum assay_status assay_audit_run(const struct assay_adapter *ad, const struct assay_workload *w,
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
        if (assay_tie(row, a->model->cfg.vocab, qa->tokens[t], qb->tokens[t],
                      assay_audit_tie_budget(a), &gap)) {
            (*n_ties)++;
            *max_gap = gap > *max_gap ? gap : *max_gap;
            return true;
        }
        snprintf(msg, size,
                 "request %llu, output position %d: token %d %s, token %d %s; the oracle's logits "
                 "are %.6f and %.6f, the farther %.6f below its best: not a tie within %g",
                 (unsigned long long)wr->id, (int)t, (int)qa->tokens[t], what_a, (int)qb->tokens[t],
                 what_b, row[qa->tokens[t]], row[qb->tokens[t]], gap, assay_audit_tie_budget(a));
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
    res->tie_tol = assay_audit_tie_budget(a);
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
        eo.tie_tol = assay_audit_tie_budget(a);
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
             (long long)res->n_tokens, (int)res->n_ties, assay_audit_tie_budget(a),
             isfinite(res->max_tie_gap) ? res->max_tie_gap : 0.0, (long long)n_stop);
    if (res->n_ties > 0) {
        assay_audit_note(
            a,
            "Greedy decoding: %d floating-point ties (oracle logit gap at most %.2g, within "
            "the tie tolerance %g) where the server took the other token.",
            (int)res->n_ties, res->max_tie_gap, assay_audit_tie_budget(a));
    }
    return st;
}


/* ---- properties ----------------------------------------------------------------- */

static enum assay_status check_batch_invariance(struct assay_audit *a,
                                                const struct assay_plan_item *item,
                                                struct assay_check_result *res)
{
    struct assay_workload *w = NULL;
    enum assay_status st = assay_audit_check_workload(a, item, res, &w);
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
            st = assay_audit_run(&gate, w, &t[k]);
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
             (int)w->n, levels_text, (long long)n_tokens, (int)n_ties, assay_audit_tie_budget(a),
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
    enum assay_status st = assay_audit_check_workload(a, item, res, out);
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
    enum assay_status st = assay_audit_check_workload(a, item, res, &w);
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
    st = assay_audit_run(&a->srv, w, &t);
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
    enum assay_status st = assay_audit_check_workload(a, item, res, &w);
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
            st = assay_audit_run(&gate, w, &t[k]);
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
             (int)w->n, (long long)n_tokens, (int)n_ties, assay_audit_tie_budget(a));
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
AUDIT_RUNNER(assay_audit_run_logprobs, assay_audit_check_logprobs(a, item, res))
AUDIT_RUNNER(assay_audit_run_batch_invariance, check_batch_invariance(a, item, res))
AUDIT_RUNNER(assay_audit_run_finish, check_finish(a, item, res))
AUDIT_RUNNER(assay_audit_run_usage, check_usage(a, item, res))
AUDIT_RUNNER(assay_audit_run_stream, check_stream(a, item, res))
AUDIT_RUNNER(assay_audit_run_idle_requests, check_idle(a, false, res))
AUDIT_RUNNER(assay_audit_run_idle_kv, check_idle(a, true, res))
AUDIT_RUNNER(assay_audit_run_seed_positions, check_seeded(a, item, S_POSITIONS, res))
AUDIT_RUNNER(assay_audit_run_seed_unseeded, check_seeded(a, item, S_UNSEEDED, res))
AUDIT_RUNNER(assay_audit_run_seed_pairs, check_seeded(a, item, S_PAIRS, res))
