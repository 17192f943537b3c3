/*
 * The audit label: llama.cpp's llama-server, serving the GGUF that assay
 * exported (TinyGPT seed 1), under the equivalence family, through the
 * OpenAI adapter.
 *
 *   test_llama_audit logprobs      greedy tokens and top logprobs against
 *                                  the oracle, token by token
 *   test_llama_audit equivalence   assay_check_equivalence through the
 *                                  adapter, one request at a time and with
 *                                  many in flight
 *
 * The server is started by the audit fixtures (scripts/llama-server-ctl.sh)
 * and found through ASSAY_LLAMA_STATE (its state folder, holding "url");
 * the exported file through ASSAY_LLAMA_GGUF. The oracle loads that same
 * file.
 *
 * Tolerances (stated, not tuned to pass): the tie rule of the equivalence
 * family (ASSAY_EQUIV_TIE_TOL logits) for greedy tokens; llama.cpp computes
 * in fp32 and the oracle in double, so a top logprob may differ by at most
 * LOGPROB_ATOL + LOGPROB_RTOL * |oracle|, the same 1e-3 as the tie rule.
 * That holds only with llama.cpp's attention in fp32: the fixture starts
 * the server with an f32 KV cache and flash attention off (-ctk f32 -ctv
 * f32 -fa off). With its defaults (f16 KV cache, flash attention on CPU,
 * which rounds to f16) the differences reach about 1e-2.
 *
 * End of generation: assay's oracle treats EOS like any token, while
 * llama.cpp either stops on it or, with "ignore_eos" (what the adapter
 * sends unless a request's stop token is EOS), gives it a -inf logit bias.
 * The logprobs test runs without a stop token and accepts, at a position
 * where the oracle's argmax is EOS, exactly the oracle's best other token
 * (counted and reported); the equivalence test makes EOS every request's
 * stop token, so llama.cpp stops where the oracle does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/openai.h"
#include "checks/equivalence.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/rng.h"
#include "core/workload.h"
#include "engine/model.h"
#include "oracles/oracle.h"
#include "support.h"

#define LOGPROB_ATOL 1e-3
#define LOGPROB_RTOL 0.0
#define N_PROBS 10

static const char *g_mode;
static char g_url[512];
static struct assay_model *g_model;

/* ------------------------------------------------------------------ */
/* Set-up: the server's URL, and the model from the exported file       */
/* ------------------------------------------------------------------ */

static int setup(void **state)
{
    (void)state;
    const char *dir = getenv("ASSAY_LLAMA_STATE");
    const char *gguf = getenv("ASSAY_LLAMA_GGUF");
    if (dir == NULL || gguf == NULL) {
        fprintf(stderr, "test_llama_audit: ASSAY_LLAMA_STATE and ASSAY_LLAMA_GGUF must be set "
                        "(run it through ctest -L audit, which starts llama-server)\n");
        return -1;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/url", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(g_url, sizeof g_url, f) == NULL) {
        fprintf(stderr, "test_llama_audit: no server URL in %s: is llama-server running? "
                        "(scripts/llama-server-ctl.sh start)\n",
                path);
        if (f != NULL) {
            fclose(f);
        }
        return -1;
    }
    fclose(f);
    g_url[strcspn(g_url, "\r\n")] = '\0';
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_model_load_gguf(&g_model, gguf, &diag) != ASSAY_OK) {
        char msg[1024];
        fprintf(stderr, "test_llama_audit: %s\n", assay_diag_format(&diag, msg, sizeof msg));
        return -1;
    }
    printf("# llama-server at %s serving %s (%s, sha256 %.16s...)\n", g_url, gguf,
           g_model->cfg.name, g_model->sha256);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assay_model_free(g_model);
    return 0;
}

static void open_server(struct assay_adapter *a, enum assay_openai_api api, int32_t n_probs)
{
    struct assay_openai_params p = assay_openai_default_params();
    p.url = g_url;
    p.api = api;
    p.n_probs = n_probs;
    p.vocab = g_model->cfg.vocab;
    p.n_ctx = g_model->cfg.n_ctx;
    p.eos_token = ASSAY_TOKEN_EOS;
    p.stall_timeout_ms = 30000;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_openai_open(&p, a, &diag) != ASSAY_OK) {
        char msg[1024];
        fail_msg("%s", assay_diag_format(&diag, msg, sizeof msg));
    }
}

/* ------------------------------------------------------------------ */
/* The exported file is the model                                       */
/* ------------------------------------------------------------------ */

static void test_file_is_the_model(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_tinygpt();
    struct assay_model *m = NULL;
    assert_int_equal(assay_model_init_random(&m, &cfg, 1), ASSAY_OK);
    assert_string_equal(m->sha256, g_model->sha256);
    assay_model_free(m);
}

/* ------------------------------------------------------------------ */
/* Greedy tokens and top logprobs against the oracle                    */
/* ------------------------------------------------------------------ */

enum { N_REQ = 12, MAX_OUT = 32, MAX_PROMPT = 96 };

struct lp_store {
    int32_t n_top[N_REQ][MAX_OUT];
    struct assay_openai_logprob top[N_REQ][MAX_OUT][N_PROBS];
    double token_lp[N_REQ][MAX_OUT];
    int32_t tokens[N_REQ][MAX_OUT];
    int32_t n_out[N_REQ];
    int n_calls;
};

static void on_logprobs(void *ctx, uint64_t id, int32_t index, int32_t token, double logprob,
                        const struct assay_openai_logprob *top, int32_t n_top)
{
    struct lp_store *s = ctx;
    (void)token; /* the TOKEN event carries it too */
    s->n_calls++;
    if (id < 1 || id > N_REQ || index < 0 || index >= MAX_OUT) {
        return;
    }
    int r = (int)id - 1;
    s->token_lp[r][index] = logprob;
    s->n_top[r][index] = n_top < N_PROBS ? n_top : N_PROBS;
    memcpy(s->top[r][index], top, sizeof(top[0]) * (size_t)s->n_top[r][index]);
}

/* Prompts: seeded, lengths 1..MAX_PROMPT, bytes and specials alike. */
static void make_prompts(int32_t prompts[N_REQ][MAX_PROMPT], int32_t *lens, int32_t *outs)
{
    for (int i = 0; i < N_REQ; i++) {
        lens[i] = 1 + (int32_t)(assay_rng_u01(2026, (uint64_t)i, 1) * (MAX_PROMPT - 1));
        outs[i] = 8 + (int32_t)(assay_rng_u01(2026, (uint64_t)i, 2) * (MAX_OUT - 8));
        for (int t = 0; t < lens[i]; t++) {
            prompts[i][t] = (int32_t)(assay_rng_u01(2026, (uint64_t)(i * 1000 + t), 3) * 260);
        }
    }
}

struct lp_report {
    int64_t n_tokens;
    int32_t n_ties;
    double max_tie_gap;
    double max_lp_diff;
    int max_lp_req, max_lp_pos;
    int64_t n_lp_compared;
    int32_t n_eos_argmax;  /* positions where the oracle's argmax is EOS */
    int32_t n_bad;
    char first_bad[512];
};

static void log_softmax(const double *logits, int32_t v, double *out)
{
    double mx = logits[0];
    for (int32_t i = 1; i < v; i++) {
        mx = logits[i] > mx ? logits[i] : mx;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < v; i++) {
        sum += exp(logits[i] - mx);
    }
    double lse = mx + log(sum);
    for (int32_t i = 0; i < v; i++) {
        out[i] = logits[i] - lse;
    }
}

static void bad(struct lp_report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void bad(struct lp_report *rep, const char *fmt, ...)
{
    if (rep->n_bad++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rep->first_bad, sizeof rep->first_bad, fmt, ap);
        va_end(ap);
    }
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Compare one request's tokens and logprobs with the oracle, teacher-forced
 * on the server's tokens. */
static void judge_request(struct assay_oracle *o, const struct lp_store *s, int r,
                          const int32_t *prompt, int32_t plen, struct lp_report *rep)
{
    int32_t v = g_model->cfg.vocab;
    int32_t n = s->n_out[r];
    int32_t len = plen + n;
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)len);
    double *logits = malloc(sizeof(double) * (size_t)len * (size_t)v);
    double *lp = malloc(sizeof(double) * (size_t)v);
    double *sorted = malloc(sizeof(double) * (size_t)v);
    assert_non_null(sorted);
    assert_non_null(seq);
    assert_non_null(logits);
    assert_non_null(lp);
    memcpy(seq, prompt, sizeof(int32_t) * (size_t)plen);
    memcpy(seq + plen, s->tokens[r], sizeof(int32_t) * (size_t)n);
    assert_int_equal(assay_oracle_logits(o, seq, len - 1, logits), ASSAY_OK);
    for (int32_t t = 0; t < n; t++) {
        const double *row = logits + (int64_t)(plen - 1 + t) * v;
        log_softmax(row, v, lp);
        int32_t best = 0;
        for (int32_t i = 1; i < v; i++) {
            best = row[i] > row[best] ? i : best;
        }
        int32_t mine = s->tokens[r][t];
        rep->n_tokens++;
        if (best == ASSAY_TOKEN_EOS) {
            /* ignore_eos: llama.cpp must take the best token but EOS. */
            rep->n_eos_argmax++;
            best = 0;
            for (int32_t i = 0; i < v; i++) {
                best = i != ASSAY_TOKEN_EOS && row[i] > row[best] ? i : best;
            }
        }
        if (mine != best) {
            double gap = row[best] - row[mine];
            if (gap <= ASSAY_EQUIV_TIE_TOL) {
                rep->n_ties++;
                rep->max_tie_gap = gap > rep->max_tie_gap ? gap : rep->max_tie_gap;
            } else {
                bad(rep,
                    "request %d, position %d: llama.cpp token %d (oracle logit %.6f), oracle "
                    "token %d (logit %.6f); gap %.6f > tie tolerance %g",
                    r + 1, (int)t, (int)mine, row[mine], (int)best, row[best], gap,
                    ASSAY_EQUIV_TIE_TOL);
                break; /* teacher forcing past a divergence means nothing */
            }
        }
        /* Top logprobs: each value, and that they are the oracle's top N
         * (the oracle's N-th largest logprob, less a tie, is the floor). */
        memcpy(sorted, lp, sizeof(double) * (size_t)v);
        qsort(sorted, (size_t)v, sizeof(double), cmp_desc);
        double kth = sorted[N_PROBS - 1];
        int32_t nt = s->n_top[r][t];
        if (nt != N_PROBS) {
            bad(rep, "request %d, position %d: %d top logprobs, expected %d", r + 1, (int)t,
                (int)nt, N_PROBS);
        }
        for (int32_t j = 0; j < nt; j++) {
            const struct assay_openai_logprob *e = &s->top[r][t][j];
            if (e->token < 0 || e->token >= v) {
                bad(rep, "request %d, position %d: top token %d outside the vocabulary", r + 1,
                    (int)t, (int)e->token);
                continue;
            }
            double ref = lp[e->token];
            double d = fabs(e->logprob - ref);
            rep->n_lp_compared++;
            if (d > rep->max_lp_diff) {
                rep->max_lp_diff = d;
                rep->max_lp_req = r + 1;
                rep->max_lp_pos = (int)t;
            }
            if (d > LOGPROB_ATOL + LOGPROB_RTOL * fabs(ref)) {
                bad(rep,
                    "request %d, position %d: token %d logprob %.6f, oracle %.6f (|diff| %.2e "
                    "> %g + %g * |oracle|)",
                    r + 1, (int)t, (int)e->token, e->logprob, ref, d, LOGPROB_ATOL,
                    LOGPROB_RTOL);
            }
            /* A listed token must be among the oracle's top N, up to a tie. */
            if (ref < kth - ASSAY_EQUIV_TIE_TOL) {
                bad(rep,
                    "request %d, position %d: llama.cpp lists token %d (oracle logprob %.6f) "
                    "among its top %d, below the oracle's %d-th (%.6f)",
                    r + 1, (int)t, (int)e->token, ref, N_PROBS, N_PROBS, kth);
            }
        }
        /* The sampled token's own logprob. */
        double tl = s->token_lp[r][t];
        if (isnan(tl) || fabs(tl - lp[mine]) > LOGPROB_ATOL + LOGPROB_RTOL * fabs(lp[mine])) {
            bad(rep, "request %d, position %d: the token's logprob %.6f, oracle %.6f", r + 1,
                (int)t, tl, lp[mine]);
        }
    }
    free(seq);
    free(logits);
    free(lp);
    free(sorted);
}

static void check_logprobs(enum assay_openai_api api, bool concurrent)
{
    static int32_t prompts[N_REQ][MAX_PROMPT];
    int32_t lens[N_REQ], outs[N_REQ];
    make_prompts(prompts, lens, outs);
    struct lp_store *s = calloc(1, sizeof *s);
    assert_non_null(s);
    struct assay_adapter a;
    open_server(&a, api, N_PROBS);
    assert_int_equal(assay_openai_set_logprobs_sink(&a, on_logprobs, s), ASSAY_OK);
    int64_t t0 = assay_now_ns();
    char why[N_REQ][640];
    /* Alone: one request at a time. Concurrent: all at once. */
    for (int first = 0; first < N_REQ;) {
        int last = concurrent ? N_REQ : first + 1;
        for (int i = first; i < last; i++) {
            struct assay_request req = {(uint64_t)i + 1, prompts[i], lens[i], outs[i], -1,
                                        assay_sampling_greedy()};
            assert_int_equal(a.vt->add_request(a.self, &req), ASSAY_OK);
            why[i][0] = '\0';
        }
        while (a.vt->has_work(a.self)) {
            const struct assay_event *ev;
            size_t n = 0;
            assert_int_equal(a.vt->step(a.self, &ev, &n), ASSAY_OK);
            for (size_t k = 0; k < n; k++) {
                int r = (int)ev[k].request_id - 1;
                if (ev[k].kind == ASSAY_EVENT_TOKEN && ev[k].index < MAX_OUT) {
                    s->tokens[r][ev[k].index] = ev[k].token;
                    s->n_out[r] = ev[k].index + 1;
                } else if (ev[k].kind == ASSAY_EVENT_FINISH) {
                    if (ev[k].reason != ASSAY_FINISH_LENGTH) {
                        snprintf(why[r], sizeof why[r], "%s: %s",
                                 assay_finish_reason_str(ev[k].reason),
                                 ev[k].message != NULL ? ev[k].message : "");
                    }
                }
            }
            assert_true(assay_now_ns() - t0 < 120000000000LL);
        }
        first = last;
    }
    double secs = (double)(assay_now_ns() - t0) / 1e9;
    for (int i = 0; i < N_REQ; i++) {
        if (why[i][0] != '\0') {
            fail_msg("request %d did not finish by length: %s", i + 1, why[i]);
        }
        assert_int_equal(s->n_out[i], outs[i]);
    }
    struct assay_oracle *o = NULL;
    assert_int_equal(assay_oracle_init(&o, g_model, MAX_PROMPT + MAX_OUT), ASSAY_OK);
    struct lp_report rep;
    memset(&rep, 0, sizeof rep);
    for (int i = 0; i < N_REQ; i++) {
        judge_request(o, s, i, prompts[i], lens[i], &rep);
    }
    assay_oracle_free(o);
    printf("# %s, %s: %d requests, %lld tokens in %.3f s; greedy: %d ties within %g (largest "
           "gap %.2g); %lld top logprobs compared, largest |llama.cpp - oracle| %.3g (request "
           "%d, position %d); %d positions where the oracle's argmax is EOS (llama.cpp took the "
           "oracle's best other token, as ignore_eos makes it)\n",
           api == ASSAY_OPENAI_API_V1 ? "/v1/completions" : "/completion",
           concurrent ? "all at once" : "one at a time", N_REQ, (long long)rep.n_tokens, secs,
           (int)rep.n_ties, ASSAY_EQUIV_TIE_TOL, rep.max_tie_gap, (long long)rep.n_lp_compared,
           rep.max_lp_diff, rep.max_lp_req, rep.max_lp_pos, (int)rep.n_eos_argmax);
    assay_adapter_close(&a);
    free(s);
    if (rep.n_bad > 0) {
        fail_msg("%d disagreements; first: %s", (int)rep.n_bad, rep.first_bad);
    }
    assert_true(rep.n_lp_compared >= (int64_t)N_PROBS * rep.n_tokens);
}

static void test_logprobs_alone(void **state)
{
    (void)state;
    check_logprobs(ASSAY_OPENAI_API_COMPLETION, false);
}

static void test_logprobs_concurrent(void **state)
{
    (void)state;
    check_logprobs(ASSAY_OPENAI_API_COMPLETION, true);
}

static void test_logprobs_v1(void **state)
{
    (void)state;
    check_logprobs(ASSAY_OPENAI_API_V1, true);
}

/* ------------------------------------------------------------------ */
/* assay_check_equivalence through the adapter                         */
/* ------------------------------------------------------------------ */

static struct assay_workload *load_workload(const char *name)
{
    char path[1024], rel[256];
    snprintf(rel, sizeof rel, "workloads/%s.json", name);
    assay_test_fixture(rel, path, sizeof path);
    struct assay_workload_limits lim = {g_model->cfg.vocab, g_model->cfg.n_ctx, 0};
    struct assay_workload *w = NULL;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_workload_load(path, &lim, &w, &diag) != ASSAY_OK) {
        char msg[1024];
        fail_msg("%s", assay_diag_format(&diag, msg, sizeof msg));
    }
    return w;
}

static void run_equivalence(struct assay_adapter *a, const struct assay_workload *w,
                            struct assay_oracle_memo *memo, const char *what, int *n_tokens)
{
    struct assay_check_result res;
    assay_check_result_init(&res, "equivalence", ASSAY_FAMILY_EQUIVALENCE);
    /* Steps of an HTTP adapter are polls of about 1 ms: the bound on the
     * run is the adapter's stall timeout per request, not a step count. */
    struct assay_equiv_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.max_steps = 10000000;
    enum assay_status st = assay_check_equivalence(a, w, memo, &opts, &res);
    if (st != ASSAY_OK || res.verdict != ASSAY_VERDICT_PASS) {
        fail_msg("%s: %s: %s", what, assay_verdict_str(res.verdict), res.failure);
    }
    *n_tokens += (int)res.n_tokens;
    if (strcmp(what, "") != 0) {
        printf("# %-44s %s %6.2f s  %s\n", what, assay_verdict_str(res.verdict), res.seconds,
               res.summary);
    }
}

static void test_equivalence(void **state)
{
    (void)state;
    struct assay_oracle_memo *memo = NULL;
    assert_int_equal(assay_oracle_memo_init(&memo, g_model, 256), ASSAY_OK);
    struct assay_adapter a;
    open_server(&a, ASSAY_OPENAI_API_COMPLETION, 0);
    const char *names[] = {"equiv-mixed", "equiv-pressure", "equiv-shared-prefix",
                           "equiv-long-prompts", "equiv-small"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        struct assay_workload *w = load_workload(names[k]);
        /* EOS ends generation on both sides (see the header comment). */
        for (int32_t i = 0; i < w->n; i++) {
            w->reqs[i].stop_token = ASSAY_TOKEN_EOS;
        }
        int n_tok = 0;
        /* Under concurrency: the workload as it is (more requests than the
         * server's four slots, joining while others run). */
        char what[128];
        snprintf(what, sizeof what, "%s, %d requests in flight", names[k], (int)w->n);
        run_equivalence(&a, w, memo, what, &n_tok);
        /* Alone: each request by itself. */
        int64_t t0 = assay_now_ns();
        int n_alone = 0;
        for (int32_t i = 0; i < w->n; i++) {
            uint8_t *keep = calloc((size_t)w->n, 1);
            assert_non_null(keep);
            keep[i] = 1;
            struct assay_workload *one = NULL;
            assert_int_equal(assay_workload_subset(w, keep, &one), ASSAY_OK);
            one->reqs[0].arrival_step = 0;
            run_equivalence(&a, one, memo, "", &n_alone);
            assay_workload_free(one);
            free(keep);
        }
        printf("# %-44s PASS %6.2f s  %d requests one at a time, %d tokens\n", names[k],
               (double)(assay_now_ns() - t0) / 1e9, (int)w->n, n_alone);
        assay_workload_free(w);
    }
    struct assay_openai_stats stats;
    assay_openai_get_stats(&a, &stats);
    printf("# adapter: %lld requests (%lld ended at EOS on both sides), %lld tokens, %lld "
           "errors, %lld bytes\n",
           (long long)stats.n_submitted, (long long)stats.n_stop, (long long)stats.n_tokens,
           (long long)stats.n_error, (long long)stats.bytes_received);
    assert_int_equal(stats.n_error, 0);
    /* The fixed model and workloads reach EOS (the server's own stop with
     * ignore_eos off) at least once; the path is exercised, not assumed. */
    assert_true(stats.n_stop >= 1);
    assay_adapter_close(&a);

    /* The same through /v1/completions. */
    open_server(&a, ASSAY_OPENAI_API_V1, 1);
    struct assay_workload *w = load_workload("equiv-mixed");
    for (int32_t i = 0; i < w->n; i++) {
        w->reqs[i].stop_token = ASSAY_TOKEN_EOS;
    }
    int n_tok = 0;
    run_equivalence(&a, w, memo, "equiv-mixed via /v1/completions", &n_tok);
    assay_workload_free(w);
    assay_adapter_close(&a);
    assay_oracle_memo_free(memo);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    g_mode = argc > 1 ? argv[1] : "";
    if (strcmp(g_mode, "logprobs") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_file_is_the_model),
            cmocka_unit_test(test_logprobs_alone),
            cmocka_unit_test(test_logprobs_concurrent),
            cmocka_unit_test(test_logprobs_v1),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
    }
    if (strcmp(g_mode, "equivalence") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_equivalence),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
    }
    fprintf(stderr, "usage: %s logprobs|equivalence\n", argv[0]);
    return 2;
}
