/*
 * pairwise.c - the correctness half of `assay compare` (pairwise.h):
 * assay_pairwise_init / _free hold a comparison (both specs, the weights,
 * the run context), and its runners in the compare plan judge the candidate
 * against the baseline (greedy tokens, homogeneity of samples) and, with the
 * weights, against the oracle (equivalence, goodness of fit, PIT), plus
 * isolation. assay_pairwise_shrink cuts a failing case down.
 * cli/cmd_compare.c drives it.
 */
#include "pairwise.h"

#include "isolate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../adapters/bundled.h"
#include "../adapters/spec.h"
#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/workload.h"
#include "../engine/model.h"
#include "distributional.h"
#include "equivalence.h"
#include "harness.h"
#include "isolate.h"
#include "property.h"
#include "context.h"

struct assay_pairwise;

/* Copies of an adapter's self-description that outlive the adapter. */
struct info_copy {
    struct assay_adapter_info info;
    char name[64], spec[1024], model_name[128], sha[80];
};

struct assay_pairwise {
    char baseline[1024], candidate[1024], model_path[1024], fixtures[1024], program[1024];
    char dist_params[512];
    uint64_t seed;
    int64_t samples;
    double tie_tol;
    struct assay_verify_ctx *vctx;        /* runs the checks: candidate models, oracle memos */
    struct assay_model_cache *models;     /* the baseline's models (and the inspection's) */
    struct assay_model *gguf;             /* --model, owned */
    const struct assay_model *base_model; /* the baseline's weights when bundled (in models) */
    const struct assay_model *cand_model; /* the candidate's when bundled (in models) */
    struct info_copy base_info, cand_info;
    char weights[1100];
};

struct assay_pairwise_params assay_pairwise_default_params(void)
{
    struct assay_pairwise_params p;
    memset(&p, 0, sizeof p);
    p.seed = 1;
    p.timeout_s = ASSAY_ISOLATION_TIMEOUT_S;
    return p;
}

/* ---- set-up --------------------------------------------------------------- */

static void copy_info(const struct assay_adapter *a, struct info_copy *c)
{
    struct assay_adapter_info in;
    assay_adapter_get_info(a, &in);
    snprintf(c->name, sizeof c->name, "%s", in.name);
    snprintf(c->spec, sizeof c->spec, "%s", in.spec);
    snprintf(c->model_name, sizeof c->model_name, "%s", in.model_name);
    snprintf(c->sha, sizeof c->sha, "%s", in.weights_sha256);
    c->info = in;
    c->info.name = c->name;
    c->info.spec = c->spec;
    c->info.model_name = c->model_name;
    c->info.weights_sha256 = c->sha;
}

/* Open one engine to see that it opens and what it is; a bundled engine's
 * model stays in the cache (for the weights). */
static enum assay_status inspect(struct assay_pairwise *c, const char *which, const char *spec,
                                 struct info_copy *info, const struct assay_model **model,
                                 struct assay_diag *diag)
{
    struct assay_adapter a;
    struct assay_diag d;
    assay_diag_clear(&d);
    enum assay_status st = assay_adapter_open_spec_cached(spec, c->models, &a, &d);
    if (st != ASSAY_OK) {
        char why[900];
        assay_diag_set(diag, d.file[0] != '\0' ? d.file : NULL, which, "an engine that opens",
                       "%.200s: %.600s", spec, assay_diag_format(&d, why, sizeof why));
        return st;
    }
    copy_info(&a, info);
    *model = assay_verify_engine_model(&a);
    assay_adapter_close(&a);
    return ASSAY_OK;
}

enum assay_status assay_pairwise_init(struct assay_pairwise **out,
                                     const struct assay_pairwise_params *p,
                                     struct assay_diag *diag)
{
    *out = NULL;
    if (p == NULL || p->baseline == NULL || p->candidate == NULL || p->fixtures == NULL ||
        p->samples < 0 || !(p->tie_tol >= 0)) {
        assay_diag_set(diag, NULL, "compare", "a baseline, a candidate and a fixtures folder",
                       "%s", "missing parameters");
        return ASSAY_ERR_INVALID;
    }
    struct assay_pairwise *c = assay_calloc(1, sizeof *c);
    if (c == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    snprintf(c->baseline, sizeof c->baseline, "%s", p->baseline);
    snprintf(c->candidate, sizeof c->candidate, "%s", p->candidate);
    snprintf(c->model_path, sizeof c->model_path, "%s", p->model != NULL ? p->model : "");
    snprintf(c->fixtures, sizeof c->fixtures, "%s", p->fixtures);
    snprintf(c->program, sizeof c->program, "%s", p->program != NULL ? p->program : "assay");
    snprintf(c->dist_params, sizeof c->dist_params, "%s",
             p->dist_params != NULL ? p->dist_params : "");
    c->seed = p->seed;
    c->samples = p->samples > 0 ? p->samples : ASSAY_PAIRWISE_DEFAULT_SAMPLES;
    c->tie_tol = p->tie_tol > 0 ? p->tie_tol : ASSAY_EQUIV_TIE_TOL;
    enum assay_status st = assay_verify_ctx_init(&c->vctx, c->fixtures, c->seed);
    if (st == ASSAY_OK) {
        assay_verify_set_program(c->vctx, c->program);
        struct assay_isolation iso = {!p->no_fork, p->timeout_s};
        assay_verify_set_isolation(c->vctx, &iso);
        st = assay_model_cache_init(&c->models);
    }
    if (st == ASSAY_OK && c->model_path[0] != '\0') {
        st = assay_model_load_gguf(&c->gguf, c->model_path, diag);
    }
    if (st == ASSAY_OK) {
        st = inspect(c, "baseline", c->baseline, &c->base_info, &c->base_model, diag);
    }
    if (st == ASSAY_OK) {
        st = inspect(c, "candidate", c->candidate, &c->cand_info, &c->cand_model, diag);
    }
    if (st != ASSAY_OK) {
        assay_pairwise_free(c);
        return st;
    }
    /* Every check runs on the candidate with the baseline beside it; the
     * oracle's weights: --model, else the candidate's own, else the
     * baseline's. */
    assay_verify_ctx_set_target(c->vctx, c,
                                c->gguf != NULL         ? c->gguf
                                : c->cand_model != NULL ? NULL
                                                        : c->base_model,
                                c->baseline);
    if (c->gguf != NULL) {
        snprintf(c->weights, sizeof c->weights, "--model %s", c->model_path);
    } else if (c->cand_model != NULL) {
        snprintf(c->weights, sizeof c->weights, "the candidate (bundled)");
    } else if (c->base_model != NULL) {
        snprintf(c->weights, sizeof c->weights, "the baseline (bundled)");
    }
    *out = c;
    return ASSAY_OK;
}

void assay_pairwise_free(struct assay_pairwise *c)
{
    if (c == NULL) {
        return;
    }
    assay_verify_ctx_free(c->vctx);
    assay_model_cache_free(c->models);
    assay_model_free(c->gguf);
    assay_free(c);
}

const struct assay_adapter_info *assay_pairwise_baseline_info(const struct assay_pairwise *c)
{
    return &c->base_info.info;
}

const struct assay_adapter_info *assay_pairwise_candidate_info(const struct assay_pairwise *c)
{
    return &c->cand_info.info;
}

const char *assay_pairwise_weights(const struct assay_pairwise *c)
{
    return c->weights;
}

/* ---- reproducers ---------------------------------------------------------- */

char *assay_pairwise_command(const struct assay_pairwise *c, const struct assay_plan_item *item,
                             const char *candidate, const char *workload, char *buf, size_t size)
{
    char target_args[2200], tail[1800];
    snprintf(target_args, sizeof target_args, "'%.1000s' '%.1000s'", c->baseline, candidate);
    int n = snprintf(tail, sizeof tail, " --no-bench");
    if (n > 0 && (size_t)n < sizeof tail && c->model_path[0] != '\0') {
        n += snprintf(tail + n, sizeof tail - (size_t)n, " --model '%.1000s'", c->model_path);
    }
    if (n > 0 && (size_t)n < sizeof tail && item->family == ASSAY_FAMILY_DISTRIBUTIONAL &&
        c->samples != ASSAY_PAIRWISE_DEFAULT_SAMPLES) {
        n += snprintf(tail + n, sizeof tail - (size_t)n, " --samples %lld", (long long)c->samples);
    }
    if (n > 0 && (size_t)n < sizeof tail && item->family == ASSAY_FAMILY_DISTRIBUTIONAL &&
        c->dist_params[0] != '\0') {
        n += snprintf(tail + n, sizeof tail - (size_t)n, " --dist-params '%s'", c->dist_params);
    }
    if (n > 0 && (size_t)n < sizeof tail && item->family == ASSAY_FAMILY_EQUIVALENCE &&
        c->tie_tol != ASSAY_EQUIV_TIE_TOL) {
        n += snprintf(tail + n, sizeof tail - (size_t)n, " --tie-tol %g", c->tie_tol);
    }
    if (n > 0 && (size_t)n < sizeof tail && workload != NULL) {
        snprintf(tail + n, sizeof tail - (size_t)n, " --check-workload '%s=%.700s'", item->name,
                 workload);
    }
    return assay_repro_line(buf, size, c->program, "compare", target_args, item->name, c->seed,
                            tail);
}

enum assay_status assay_pairwise_run_check(struct assay_pairwise *c,
                                           const struct assay_plan_item *item,
                                           const char *workload_override,
                                           struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    enum assay_status st = assay_run_plan_item(c->vctx, item, c->candidate, workload_override, res);
    if (res->seconds == 0 || isnan(res->seconds)) {
        res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    }
    if (res->verdict == ASSAY_VERDICT_FAIL) {
        assay_pairwise_command(c, item, c->candidate, workload_override, res->repro,
                               sizeof res->repro);
    } else {
        res->repro[0] = '\0';
    }
    return st;
}

enum assay_status assay_pairwise_check_workload(struct assay_pairwise *c,
                                               const struct assay_plan_item *item,
                                               const char *path, struct assay_diag *diag)
{
    return assay_verify_check_workload(c->vctx, item, c->candidate, path, diag);
}

enum assay_status assay_pairwise_shrink(struct assay_pairwise *c,
                                        const struct assay_plan_item *item,
                                        const char *workload_override,
                                        const struct assay_shrink_opts *opts,
                                        struct assay_shrink_result *out)
{
    enum assay_status st = assay_shrink(c->vctx, item, c->candidate, workload_override, opts, out);
    if (st != ASSAY_OK) {
        return st;
    }
    const char *workload = out->workload[0] != '\0' ? out->workload : workload_override;
    const char *spec = out->engine[0] != '\0' ? out->engine : c->candidate;
    assay_pairwise_command(c, item, spec, workload, out->command, sizeof out->command);
    return ASSAY_OK;
}

/* ---- the checks ----------------------------------------------------------- */

static void set_error(struct assay_check_result *res, enum assay_status st, const char *why)
{
    assay_check_error(res, "%s: %.600s", assay_status_str(st), why);
}

static enum assay_status open_baseline(struct assay_pairwise *c, struct assay_adapter *b,
                                       struct assay_check_result *res)
{
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_adapter_open_spec_cached(c->baseline, c->models, b, &diag);
    if (st != ASSAY_OK) {
        char why[700], msg[900];
        snprintf(msg, sizeof msg, "baseline %.200s: %.600s", c->baseline,
                 assay_diag_format(&diag, why, sizeof why));
        set_error(res, st, msg);
    }
    return st;
}

/* The workload with every request greedy (a copy; free with
 * assay_workload_free). */
static enum assay_status greedy_copy(const struct assay_workload *w, struct assay_workload **out)
{
    enum assay_status st = assay_workload_subset(w, NULL, out);
    if (st == ASSAY_OK) {
        for (int32_t i = 0; i < (*out)->n; i++) {
            (*out)->reqs[i].sampling = assay_sampling_greedy();
        }
    }
    return st;
}

/* An HTTP server's idle step lasts about a millisecond: a bound of its own
 * (about half an hour of idle polling) instead of the harness's. */
static int64_t step_bound(const struct assay_adapter *a, const struct assay_adapter *b)
{
    bool all_bundled = assay_bundled_engine(a) != NULL && (b == NULL || assay_bundled_engine(b) != NULL);
    return all_bundled ? 0 : 2000000;
}

/* The oracle memo for the target's weights, or NULL when it has none. */
static enum assay_status memo_for(struct assay_verify_ctx *ctx, const struct assay_target *t,
                                  struct assay_oracle_memo **memo)
{
    *memo = NULL;
    return t->model != NULL ? assay_verify_memo(ctx, t->model, memo) : ASSAY_OK;
}

/* Compare the candidate's transcript ta with the baseline's tb, request by
 * request, into res: the tokens equal up to the first difference, a
 * difference the oracle's logits (memo, of vocabulary vocab; NULL: none)
 * call a tie within tie_tol cuts its request there (*n_cut), any other
 * fails the check (*n_bad requests, the first one described). */
static enum assay_status compare_greedy(const struct assay_workload *g,
                                        const struct assay_transcript *tb,
                                        const struct assay_transcript *ta,
                                        struct assay_oracle_memo *memo, int32_t vocab,
                                        double tie_tol, struct assay_check_result *res,
                                        int32_t *n_bad, int32_t *n_cut)
{
    enum assay_status st = ASSAY_OK;
    for (int32_t i = 0; i < g->n && st == ASSAY_OK; i++) {
        const struct assay_workload_request *wr = &g->reqs[i];
        const struct assay_transcript_req *qb = &tb->reqs[i], *qa = &ta->reqs[i];
        int32_t nb = qb->n_events < qb->cap ? qb->n_events : qb->cap;
        int32_t na = qa->n_events < qa->cap ? qa->n_events : qa->cap;
        int32_t n = na < nb ? na : nb;
        int32_t j = 0;
        while (j < n && qa->tokens[j] == qb->tokens[j]) {
            j++;
        }
        res->n_tokens += j;
        if (j == n && na == nb) {
            continue;
        }
        if (j == n) {
            /* one stopped (on its stop token) where the other went on */
            if ((*n_bad)++ == 0) {
                assay_check_fail(
                    res,
                    "request %llu: the baseline delivered %d tokens, the candidate %d, the "
                    "first %d equal",
                    (unsigned long long)wr->id, (int)nb, (int)na, (int)n);
            }
            continue;
        }
        int32_t tok_a = qa->tokens[j], tok_b = qb->tokens[j];
        if (memo != NULL) {
            const double *rows = NULL;
            if (tok_a >= 0 && tok_a < vocab && tok_b >= 0 && tok_b < vocab) {
                st = assay_oracle_memo_rows(memo, wr->prompt, wr->prompt_len, qa->tokens, j + 1,
                                            &rows);
                if (st != ASSAY_OK) {
                    break;
                }
                const double *row = rows + (int64_t)j * vocab;
                double gap;
                if (assay_tie(row, vocab, tok_a, tok_b, tie_tol, &gap)) {
                    res->n_ties++;
                    res->max_tie_gap = gap > res->max_tie_gap ? gap : res->max_tie_gap;
                    (*n_cut)++;
                    continue;
                }
                if ((*n_bad)++ == 0) {
                    assay_check_fail(
                        res,
                        "request %llu, output position %d: baseline token %d, candidate "
                        "token %d; the farther is %.6f below the oracle's best logit > tie "
                        "tolerance %g",
                        (unsigned long long)wr->id, (int)j, (int)tok_b, (int)tok_a, gap,
                        tie_tol);
                }
                continue;
            }
        }
        if ((*n_bad)++ == 0) {
            assay_check_fail(
                res, "request %llu, output position %d: baseline token %d, candidate token %d%s",
                (unsigned long long)wr->id, (int)j, (int)tok_b, (int)tok_a,
                memo == NULL ? " (no weights to judge a floating-point tie: give --model "
                               "FILE.gguf to allow one)"
                             : " (a token outside the oracle's vocabulary)");
        }
    }
    return st;
}

enum assay_status assay_pairwise_run_greedy(struct assay_verify_ctx *ctx,
                                            const struct assay_plan_item *item,
                                            const struct assay_target *t,
                                            const struct assay_workload *w,
                                            struct assay_check_result *res)
{
    const struct assay_adapter *a = t->adapter;
    struct assay_pairwise *c = t->owner;
    (void)item;
    int64_t t0 = assay_now_ns();
    if (w == NULL) {
        set_error(res, ASSAY_ERR_INVALID, "needs a workload");
        return ASSAY_OK;
    }
    struct assay_oracle_memo *memo = NULL;
    enum assay_status st = memo_for(ctx, t, &memo);
    if (st != ASSAY_OK) {
        set_error(res, st, "the oracle could not be set up");
        return assay_status_keep_nomem(st);
    }
    struct assay_adapter b;
    if (open_baseline(c, &b, res) != ASSAY_OK) {
        return ASSAY_OK;
    }
    struct assay_workload *g = NULL;
    struct assay_transcript *tb = NULL, *ta = NULL;
    struct assay_harness_opts ho;
    memset(&ho, 0, sizeof ho);
    ho.max_steps = step_bound(a, &b);
    st = greedy_copy(w, &g);
    if (st == ASSAY_OK) {
        st = assay_harness_run(&b, g, &ho, &tb);
    }
    assay_adapter_close(&b);
    if (st == ASSAY_OK) {
        st = assay_harness_run(a, g, &ho, &ta);
    }
    if (st != ASSAY_OK) {
        set_error(res, st, "could not run the workload");
        goto done;
    }
    res->tie_tol = c->tie_tol;
    res->max_tie_gap = 0.0;
    res->max_logit_diff = NAN;
    res->n_requests = g->n;
    char msg[512];
    if (tb->status != ASSAY_OK || assay_check_delivery(g, tb, msg, sizeof msg) >= 0) {
        char why[600];
        snprintf(why, sizeof why, "the baseline itself misbehaved, so nothing can be compared "
                 "with it: %.500s", tb->status != ASSAY_OK ? tb->error : msg);
        set_error(res, ASSAY_ERR_INVALID, why);
        goto done;
    }
    if (ta->status != ASSAY_OK) {
        assay_check_fail(res, "candidate: %s", ta->error);
        goto done;
    }
    if (assay_check_delivery(g, ta, msg, sizeof msg) >= 0) {
        assay_check_fail(res, "candidate: %s", msg);
        goto done;
    }
    int32_t n_bad = 0, n_cut = 0;
    st = compare_greedy(g, tb, ta, memo, memo != NULL ? t->model->cfg.vocab : 0, c->tie_tol, res,
                        &n_bad, &n_cut);
    if (st != ASSAY_OK) {
        set_error(res, st, "the oracle could not run");
        goto done;
    }
    if (n_bad > 1) {
        size_t l = strlen(res->failure);
        snprintf(res->failure + l, sizeof res->failure - l, "; %d requests diverge in all",
                 (int)n_bad);
    }
    if (memo == NULL) {
        snprintf(res->summary, sizeof res->summary,
                 "%lld requests, %lld tokens equal to the baseline's; no weights for the tie "
                 "rule: exact equality required",
                 (long long)res->n_requests, (long long)res->n_tokens);
    } else {
        snprintf(res->summary, sizeof res->summary,
                 "%lld requests, %lld tokens equal to the baseline's; %d ties within %g by the "
                 "oracle (largest gap %.2g)%s",
                 (long long)res->n_requests, (long long)res->n_tokens, (int)res->n_ties,
                 c->tie_tol, res->max_tie_gap,
                 n_cut > 0 ? "; a tied request is compared up to its tie" : "");
    }
done:
    assay_transcript_free(ta);
    assay_transcript_free(tb);
    assay_workload_free(g);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return assay_status_keep_nomem(st);
}

enum assay_status assay_pairwise_run_oracle(struct assay_verify_ctx *ctx,
                                            const struct assay_plan_item *item,
                                            const struct assay_target *t,
                                            const struct assay_workload *w,
                                            struct assay_check_result *res)
{
    const struct assay_adapter *a = t->adapter;
    struct assay_pairwise *c = t->owner;
    (void)item;
    if (w == NULL) {
        set_error(res, ASSAY_ERR_INVALID, "needs a workload");
        return ASSAY_OK;
    }
    struct assay_oracle_memo *memo = NULL;
    enum assay_status st = memo_for(ctx, t, &memo);
    if (st != ASSAY_OK) {
        set_error(res, st, "the oracle could not be set up");
        return assay_status_keep_nomem(st);
    }
    struct assay_workload *g = NULL;
    st = greedy_copy(w, &g);
    if (st != ASSAY_OK) {
        return st;
    }
    struct assay_equiv_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.tie_tol = c->tie_tol;
    eo.max_steps = step_bound(a, NULL);
    st = assay_check_equivalence(a, g, memo, &eo, res);
    assay_workload_free(g);
    return assay_status_keep_nomem(st);
}

/* The distributional parameters of a check: the defaults, the check's own,
 * the caller's overrides, the sample count, the check's seed. */
static enum assay_status dist_params(struct assay_verify_ctx *ctx,
                                     const struct assay_plan_item *item,
                                     const struct assay_target *t, bool per_sequence,
                                     struct assay_dist_params *p, struct assay_check_result *res)
{
    const struct assay_pairwise *c = t->owner;
    *p = assay_dist_default_params();
    p->order = t->order;
    char why[300];
    enum assay_status st = assay_dist_parse_params(item->params, p, why, sizeof why);
    if (st == ASSAY_OK && c->dist_params[0] != '\0') {
        st = assay_dist_parse_params(c->dist_params, p, why, sizeof why);
    }
    if (st != ASSAY_OK) {
        char msg[400];
        snprintf(msg, sizeof msg, "distributional parameters: %s", why);
        set_error(res, st, msg);
        return st;
    }
    /* A sequence check's n counts sequences of out_len tokens. */
    p->n = per_sequence ? (c->samples + p->out_len - 1) / p->out_len : c->samples;
    p->seed = assay_verify_seed(ctx, item->name);
    return ASSAY_OK;
}

enum assay_status assay_pairwise_run_homogeneity(struct assay_verify_ctx *ctx,
                                                 const struct assay_plan_item *item,
                                                 const struct assay_target *t,
                                                 const struct assay_workload *w,
                                                 struct assay_check_result *res)
{
    const struct assay_adapter *a = t->adapter;
    struct assay_pairwise *c = t->owner;
    (void)w;
    struct assay_dist_params p;
    if (dist_params(ctx, item, t, false, &p, res) != ASSAY_OK) {
        return ASSAY_OK;
    }
    struct assay_adapter b;
    if (open_baseline(c, &b, res) != ASSAY_OK) {
        return ASSAY_OK;
    }
    enum assay_status st = assay_dist_homogeneity(&b, a, &p, res);
    assay_adapter_close(&b);
    return assay_status_keep_nomem(st);
}

/* The oracle-based distributional checks: the weights cloned for the
 * oracle (nothing the engine does to its copy can reach it). */
static enum assay_status run_oracle_dist(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         struct assay_check_result *res, bool pit)
{
    struct assay_dist_params p;
    if (dist_params(ctx, item, t, pit, &p, res) != ASSAY_OK) {
        return ASSAY_OK;
    }
    struct assay_model *copy = NULL;
    enum assay_status st = assay_model_clone(t->model, &copy);
    if (st != ASSAY_OK) {
        set_error(res, st, "could not copy the weights for the oracle");
        return assay_status_keep_nomem(st);
    }
    st = pit ? assay_dist_pit(t->adapter, copy, &p, res, NULL)
             : assay_dist_gof(t->adapter, copy, &p, res);
    assay_model_free(copy);
    return assay_status_keep_nomem(st);
}

enum assay_status assay_pairwise_run_gof(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res)
{
    (void)w;
    return run_oracle_dist(ctx, item, t, res, false);
}

enum assay_status assay_pairwise_run_pit(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res)
{
    (void)w;
    return run_oracle_dist(ctx, item, t, res, true);
}

enum assay_status assay_pairwise_run_isolation(struct assay_verify_ctx *ctx,
                                               const struct assay_plan_item *item,
                                               const struct assay_target *t,
                                               const struct assay_workload *w,
                                               struct assay_check_result *res)
{
    const struct assay_adapter *a = t->adapter;
    (void)ctx;
    (void)item;
    if (w == NULL) {
        set_error(res, ASSAY_ERR_INVALID, "needs a workload");
        return ASSAY_OK;
    }
    if (a->vt->set_logits_sink != NULL) {
        return assay_status_keep_nomem(assay_check_isolation(a, w, NULL, res));
    }
    return assay_status_keep_nomem(assay_check_isolation_blackbox(a, w, NULL, res));
}
