/*
 * The numerics budget: how far a correct emulation of llama.cpp's CPU
 * numerics (engine/forward.h with act GGML, an F16 KV store and flash
 * attention) lands from the fp64 oracle, and the planted bugs of those
 * paths that must land beyond it.
 *
 *   test_numerics_budget                 the correct emulation (unit label)
 *   test_numerics_budget --mutant NAME   exit 0 when NAME exceeds the budget
 *
 * The model is small enough to score in seconds and shaped so that the
 * roundings are realistic: 2 layers, d_model 256, 4 query heads and 2
 * key/value heads of 64, SwiGLU 768 (three Q8_K blocks), vocabulary 512.
 * Its weights are random fp32; its matrices are typed as a Q4_K_M file
 * types them (Q4_K, the LM head Q6_K), so every product's input rows are
 * rounded to Q8_K blocks, as llama.cpp's CPU backend rounds them.
 *
 * Three sequences of 16 prompt and 112 continuation tokens (random, from
 * fixed seeds; 127 teacher-forced positions, past the 64 at which the
 * late RoPE bug starts) are scored by assay_score_rows (engine/score.h)
 * and by the oracle. The figure of an engine is the largest
 * |log p_engine - log p_oracle| over every token of the vocabulary at
 * every scored position (a NaN or infinity counts as infinite). The
 * budget is twice the correct emulation's figure, computed in the same
 * process.
 *
 * Without a mutant: EXACT arithmetic with an F32 KV store agrees with the
 * oracle's logits within 1e-3 (they differ by float order alone); the
 * emulation's figure is larger than EXACT's (the roundings happen) by a
 * factor of at least 4 and below 0.5 nats (a sane bound: a budget wider
 * than that would hide real bugs). The emulation's rows do not depend on
 * how many rows share the pass, and the engine serving a request among
 * others (paged, batched decode) gives the scorer's bits. With a mutant:
 * its figure must exceed the budget.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/mutant.h"
#include "core/rng.h"
#include "core/status.h"
#include "engine/engine.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/forward.h"
#include "engine/numerics.h"
#include "engine/score.h"
#include "oracles/oracle.h"
#include "support.h"

enum {
    N_SEQ = 3,
    PROMPT = 16,
    CONT = 112,
    N_TOK = PROMPT + CONT,
    SEED = 20261201,
};

static const char *g_mutant = ""; /* mutant name or "" */

struct fixture {
    struct assay_model *model;
    int32_t tokens[N_SEQ][N_TOK];
    double *oracle; /* (N_SEQ, CONT, vocab) log-probabilities */
    double *lp;     /* (vocab) scratch */
};

static struct fixture g_fx;

static struct assay_model_config budget_config(void)
{
    struct assay_model_config c = assay_model_config_tinygpt();
    snprintf(c.name, sizeof c.name, "budget");
    c.n_layer = 2;
    c.d_model = 256;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.head_dim = 64;
    c.d_ff = 768;
    c.vocab = 512;
    c.n_ctx = 256;
    return c;
}

/* log-softmax of n logits into out, in double */
static void log_softmax(const double *x, int32_t n, double *out)
{
    double max = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        max = x[i] > max ? x[i] : max;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        sum += exp(x[i] - max);
    }
    double lse = max + log(sum);
    for (int32_t i = 0; i < n; i++) {
        out[i] = x[i] - lse;
    }
}

static int setup(void **state)
{
    (void)state;
    struct assay_model_config cfg = budget_config();
    if (assay_model_init_random(&g_fx.model, &cfg, SEED) != ASSAY_OK) {
        return -1;
    }
    struct assay_model *m = g_fx.model;
    for (int32_t l = 0; l < cfg.n_layer; l++) {
        struct assay_layer_types t = {
            ASSAY_GGML_TYPE_Q4_K, ASSAY_GGML_TYPE_Q4_K, ASSAY_GGML_TYPE_Q4_K, ASSAY_GGML_TYPE_Q4_K,
            ASSAY_GGML_TYPE_Q4_K, ASSAY_GGML_TYPE_Q4_K, ASSAY_GGML_TYPE_Q6_K};
        m->layers[l].types = t;
    }
    m->tok_embd_type = ASSAY_GGML_TYPE_Q4_K;
    m->output_type = ASSAY_GGML_TYPE_Q6_K;
    int32_t V = cfg.vocab;
    g_fx.oracle = malloc(sizeof(double) * (size_t)N_SEQ * CONT * (size_t)V);
    g_fx.lp = malloc(sizeof(double) * (size_t)V);
    double *rows = malloc(sizeof(double) * (size_t)N_TOK * (size_t)V);
    struct assay_oracle *o = NULL;
    if (g_fx.oracle == NULL || g_fx.lp == NULL || rows == NULL ||
        assay_oracle_init(&o, m, N_TOK) != ASSAY_OK) {
        free(rows);
        return -1;
    }
    for (int s = 0; s < N_SEQ; s++) {
        for (int i = 0; i < N_TOK; i++) {
            g_fx.tokens[s][i] = (int32_t)(assay_rng_u01(SEED + (uint64_t)s, (uint64_t)i, 7) * V);
        }
        /* row t follows tokens[0..t]: rows PROMPT-1 .. N_TOK-2 are scored */
        if (assay_oracle_logits(o, g_fx.tokens[s], N_TOK - 1, rows) != ASSAY_OK) {
            assay_oracle_free(o);
            free(rows);
            return -1;
        }
        for (int i = 0; i < CONT; i++) {
            log_softmax(rows + (int64_t)(PROMPT - 1 + i) * V, V,
                        g_fx.oracle + ((int64_t)s * CONT + i) * V);
        }
    }
    assay_oracle_free(o);
    free(rows);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assay_model_free(g_fx.model);
    free(g_fx.oracle);
    free(g_fx.lp);
    return 0;
}

/* The figures of one engine configuration over every sequence: the
 * largest |Δ log p| and the largest |Δ logit|. */
struct figure {
    double logprob;
    double logit;
};

static struct figure divergence_of(const struct assay_model *model,
                                   const struct assay_score_params *params)
{
    struct assay_score_params sp = *params;
    sp.model = model;
    struct assay_score *sc = NULL;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_score_init(&sc, &sp, &diag);
    if (st != ASSAY_OK) {
        char buf[512];
        fail_msg("assay_score_init: %s: %s", assay_status_str(st),
                 assay_diag_format(&diag, buf, sizeof buf));
    }
    int32_t V = model->cfg.vocab;
    double *x = malloc(sizeof(double) * (size_t)V);
    assert_non_null(x);
    struct figure fig = {0.0, 0.0};
    for (int s = 0; s < N_SEQ; s++) {
        const float *rows = NULL;
        assert_int_equal(
            assay_score_rows(sc, g_fx.tokens[s], PROMPT, g_fx.tokens[s] + PROMPT, CONT, &rows),
            ASSAY_OK);
        for (int i = 0; i < CONT; i++) {
            for (int32_t v = 0; v < V; v++) {
                x[v] = rows[(int64_t)i * V + v];
            }
            const double *ref = g_fx.oracle + ((int64_t)s * CONT + i) * V;
            log_softmax(x, V, g_fx.lp);
            for (int32_t v = 0; v < V; v++) {
                double d = fabs(g_fx.lp[v] - ref[v]);
                d = isfinite(d) ? d : INFINITY;
                fig.logprob = d > fig.logprob ? d : fig.logprob;
            }
        }
    }
    /* the logits themselves, against the oracle's log-probabilities' own
     * offsets, matter only for EXACT: measured there by the caller */
    free(x);
    assay_score_free(sc);
    return fig;
}

static struct figure divergence(enum assay_act_mode act, enum assay_kv_type kv, bool fa, int mutant)
{
    struct assay_score_params sp = assay_score_default_params(g_fx.model, N_TOK);
    sp.act = act;
    sp.kv_type = kv;
    sp.flash_attn = fa;
    sp.mutant = mutant;
    return divergence_of(g_fx.model, &sp);
}

/* EXACT with an F32 store: the logits agree with the oracle's within
 * 1e-3 (|a - b| <= 1e-3, rtol 0). The oracle's logits are recomputed
 * here for the raw comparison. */
static void test_exact_matches_oracle(void **state)
{
    (void)state;
    int32_t V = g_fx.model->cfg.vocab;
    struct assay_score_params sp = assay_score_default_params(g_fx.model, N_TOK);
    struct assay_score *sc = NULL;
    assert_int_equal(assay_score_init(&sc, &sp, NULL), ASSAY_OK);
    struct assay_oracle *o = NULL;
    assert_int_equal(assay_oracle_init(&o, g_fx.model, N_TOK), ASSAY_OK);
    double *ref = malloc(sizeof(double) * (size_t)N_TOK * (size_t)V);
    assert_non_null(ref);
    double worst = 0.0;
    int32_t worst_at = 0;
    for (int s = 0; s < N_SEQ; s++) {
        const float *rows = NULL;
        assert_int_equal(
            assay_score_rows(sc, g_fx.tokens[s], PROMPT, g_fx.tokens[s] + PROMPT, CONT, &rows),
            ASSAY_OK);
        assert_int_equal(assay_oracle_logits(o, g_fx.tokens[s], N_TOK - 1, ref), ASSAY_OK);
        for (int i = 0; i < CONT; i++) {
            for (int32_t v = 0; v < V; v++) {
                double d = fabs(rows[(int64_t)i * V + v] - ref[(int64_t)(PROMPT - 1 + i) * V + v]);
                if (!(d <= worst)) {
                    worst = d;
                    worst_at = i;
                }
            }
        }
    }
    printf("exact, f32 kv: largest |engine - oracle| logit %.3g (at continuation row %d)\n", worst,
           (int)worst_at);
    free(ref);
    assay_oracle_free(o);
    assay_score_free(sc);
    assert_true(worst <= 1e-3);
}

static void test_budget(void **state)
{
    (void)state;
    struct figure exact = divergence(ASSAY_ACT_MODE_EXACT, ASSAY_KV_TYPE_F32, false, 0);
    struct figure f16kv = divergence(ASSAY_ACT_MODE_EXACT, ASSAY_KV_TYPE_F16, true, 0);
    struct figure nofa = divergence(ASSAY_ACT_MODE_GGML, ASSAY_KV_TYPE_F16, false, 0);
    struct figure ggml = divergence(ASSAY_ACT_MODE_GGML, ASSAY_KV_TYPE_F16, true, 0);
    printf("max |d logprob| against the oracle, %d positions x %d tokens:\n", N_SEQ * CONT,
           (int)g_fx.model->cfg.vocab);
    printf("  exact arithmetic, f32 kv          %.3e\n", exact.logprob);
    printf("  exact activations, f16 kv, fa on  %.3e\n", f16kv.logprob);
    printf("  act=ggml, f16 kv, fa off          %.3e\n", nofa.logprob);
    printf("  act=ggml, f16 kv, fa on           %.3e (budget %.3e)\n", ggml.logprob,
           2.0 * ggml.logprob);
    assert_true(ggml.logprob <= 2.0 * ggml.logprob);
    assert_true(ggml.logprob >= 4.0 * exact.logprob);
    assert_true(ggml.logprob < 0.5);
}

/* The scorer's parameters in llama-server's CPU defaults: act=ggml, an F16
 * cache, flash attention. */
static struct assay_score_params llama_defaults(const struct assay_model *m)
{
    struct assay_score_params sp = assay_score_default_params(m, N_TOK);
    sp.act = ASSAY_ACT_MODE_GGML;
    sp.kv_type = ASSAY_KV_TYPE_F16;
    sp.flash_attn = true;
    return sp;
}

/* Rounding is per row, so batch invariance holds in GGML mode: a
 * continuation scored in a pass of 40 rows gives the bits of the same rows
 * in the pass of all 127. */
static void test_ggml_rows_invariant(void **state)
{
    (void)state;
    int32_t V = g_fx.model->cfg.vocab;
    struct assay_score_params sp = llama_defaults(g_fx.model);
    struct assay_score *sc = NULL;
    assert_int_equal(assay_score_init(&sc, &sp, NULL), ASSAY_OK);
    const int32_t short_cont = 40 - PROMPT + 1;
    float *few = malloc(sizeof(float) * (size_t)short_cont * (size_t)V);
    assert_non_null(few);
    const float *rows = NULL;
    assert_int_equal(
        assay_score_rows(sc, g_fx.tokens[0], PROMPT, g_fx.tokens[0] + PROMPT, short_cont, &rows),
        ASSAY_OK);
    memcpy(few, rows, sizeof(float) * (size_t)short_cont * (size_t)V);
    assert_int_equal(
        assay_score_rows(sc, g_fx.tokens[0], PROMPT, g_fx.tokens[0] + PROMPT, CONT, &rows),
        ASSAY_OK);
    assert_memory_equal(few, rows, sizeof(float) * (size_t)short_cont * (size_t)V);
    /* bad arguments leave *rows NULL */
    assert_int_equal(assay_score_rows(sc, g_fx.tokens[0], PROMPT, g_fx.tokens[0], N_TOK, &rows),
                     ASSAY_ERR_INVALID);
    assert_null(rows);
    int32_t bad = V;
    assert_int_equal(assay_score_rows(sc, &bad, 1, g_fx.tokens[0], 2, &rows), ASSAY_ERR_INVALID);
    free(few);
    assay_score_free(sc);
}

/* What a probe (engine/forward.h) sees of a pass in llama.cpp's numerics:
 * each checkpoint once a layer with the pass's rows, a product's input with
 * its format (Q8_K for the Q4_K and Q6_K matrices; none for the others),
 * the logits the scorer returns, and rows that are the same bits with the
 * probe as without it. */
struct probe_seen {
    int32_t calls[12];
    int32_t rows, wrong_rows, wrong_fmt, wrong_layer;
    float *logits; /* the result_output rows */
};

static void probe_record(void *user, const char *name, int32_t layer, enum assay_act_format fmt,
                         const float *x, int32_t rows, int32_t cols, int64_t stride)
{
    static const char *const names[] = {"attn_norm", "Qcur",       "Kcur",     "Vcur",
                                        "kqv_out",   "ffn_inp",    "ffn_norm", "ffn_swiglu",
                                        "l_out",     "result_norm", "result_output"};
    struct probe_seen *p = user;
    int k = 0;
    while (k < 11 && strcmp(name, names[k]) != 0) {
        k++;
    }
    p->calls[k]++;
    p->wrong_rows += rows != p->rows;
    p->wrong_layer += k < 9 ? layer < 0 || layer >= g_fx.model->cfg.n_layer : layer != -1;
    bool input = k == 0 || k == 4 || k == 6 || k == 7 || k == 9;
    p->wrong_fmt += input ? fmt != ASSAY_ACT_FORMAT_Q8_K : fmt != ASSAY_ACT_FORMAT_F32;
    if (k == 10) {
        for (int32_t r = 0; r < rows; r++) {
            memcpy(p->logits + (int64_t)r * cols, x + r * stride, sizeof(float) * (size_t)cols);
        }
    }
}

static void test_probe(void **state)
{
    (void)state;
    int32_t V = g_fx.model->cfg.vocab, L = g_fx.model->cfg.n_layer;
    struct assay_score_params sp = llama_defaults(g_fx.model);
    struct assay_score *sc = NULL;
    assert_int_equal(assay_score_init(&sc, &sp, NULL), ASSAY_OK);
    size_t n_rows = (size_t)CONT * (size_t)V;
    float *plain = malloc(sizeof(float) * n_rows);
    struct probe_seen seen = {.rows = N_TOK - 1, .logits = malloc(sizeof(float) * n_rows)};
    assert_non_null(plain);
    assert_non_null(seen.logits);
    const float *rows = NULL;
    assert_int_equal(
        assay_score_rows(sc, g_fx.tokens[1], PROMPT, g_fx.tokens[1] + PROMPT, CONT, &rows),
        ASSAY_OK);
    memcpy(plain, rows, sizeof(float) * n_rows);
    assay_score_set_probe(sc, probe_record, &seen);
    assert_int_equal(
        assay_score_rows(sc, g_fx.tokens[1], PROMPT, g_fx.tokens[1] + PROMPT, CONT, &rows),
        ASSAY_OK);
    assert_memory_equal(plain, rows, sizeof(float) * n_rows);
    for (int k = 0; k < 9; k++) {
        assert_int_equal(seen.calls[k], L);
    }
    assert_int_equal(seen.calls[9], 1);
    assert_int_equal(seen.calls[10], 1);
    assert_int_equal(seen.calls[11], 0); /* no other name */
    /* the output rows are the continuation's, the others every row */
    assert_int_equal(seen.wrong_rows, 2);
    assert_int_equal(seen.wrong_layer, 0);
    assert_int_equal(seen.wrong_fmt, 0);
    assert_memory_equal(seen.logits, rows, sizeof(float) * n_rows);
    /* without the probe again, nothing is called */
    assay_score_set_probe(sc, NULL, NULL);
    assert_int_equal(
        assay_score_rows(sc, g_fx.tokens[1], PROMPT, g_fx.tokens[1] + PROMPT, CONT, &rows),
        ASSAY_OK);
    assert_int_equal(seen.calls[0], L);
    free(plain);
    free(seen.logits);
    assay_score_free(sc);
}

/* fp16 accumulation (AVX512-FP16 builds of ggml, engine/numerics.h). On
 * the model's weights typed F16 (one input row of a product with F16
 * weights is ggml_vec_dot_f16), the scorer with f16_acc lands farther from
 * the oracle than with fp32 lanes (measured on llama-server: about twice
 * on average), still far below the 0.5 sanity bound; switching it on an
 * open scorer gives the bits of a scorer opened with it; two threads give
 * the bits of one. Which configurations it changes is
 * assay_forward_f16_acc_applies. */
static void test_f16_accumulation(void **state)
{
    (void)state;
    struct assay_model *m = NULL;
    assert_int_equal(assay_model_clone(g_fx.model, &m), ASSAY_OK);
    for (int32_t l = 0; l < m->cfg.n_layer; l++) {
        struct assay_layer_types t = {ASSAY_GGML_TYPE_F16, ASSAY_GGML_TYPE_F16,
                                      ASSAY_GGML_TYPE_F16, ASSAY_GGML_TYPE_F16,
                                      ASSAY_GGML_TYPE_F16, ASSAY_GGML_TYPE_F16,
                                      ASSAY_GGML_TYPE_F16};
        m->layers[l].types = t;
    }
    m->output_type = ASSAY_GGML_TYPE_F16;
    /* F16 weights: their values rounded to fp16, as a file stores them */
    for (int32_t l = 0; l < m->cfg.n_layer; l++) {
        struct assay_layer_weights *w = &m->layers[l];
        float *mats[] = {w->wq, w->wk, w->wv, w->wo, w->w_gate, w->w_up, w->w_down};
        int64_t sizes[] = {(int64_t)m->cfg.d_model * m->cfg.n_head * m->cfg.head_dim,
                           (int64_t)m->cfg.d_model * m->cfg.n_kv_head * m->cfg.head_dim,
                           (int64_t)m->cfg.d_model * m->cfg.n_kv_head * m->cfg.head_dim,
                           (int64_t)m->cfg.d_model * m->cfg.n_head * m->cfg.head_dim,
                           (int64_t)m->cfg.d_model * m->cfg.d_ff,
                           (int64_t)m->cfg.d_model * m->cfg.d_ff,
                           (int64_t)m->cfg.d_model * m->cfg.d_ff};
        for (int i = 0; i < 7; i++) {
            for (int64_t j = 0; j < sizes[i]; j++) {
                mats[i][j] = assay_numerics_round_f16(mats[i][j]);
            }
        }
    }
    for (int64_t j = 0; j < (int64_t)m->cfg.vocab * m->cfg.d_model; j++) {
        m->output[j] = assay_numerics_round_f16(m->output[j]);
    }
    assert_true(assay_forward_f16_acc_applies(m, ASSAY_KV_TYPE_F32, true));
    assert_false(assay_forward_f16_acc_applies(g_fx.model, ASSAY_KV_TYPE_F16, true)); /* hd 64 */
    assert_true(assay_forward_f16_acc_applies(g_fx.model, ASSAY_KV_TYPE_F16, false));
    assert_false(assay_forward_f16_acc_applies(g_fx.model, ASSAY_KV_TYPE_F32, false));

    struct assay_score_params sp = llama_defaults(m);
    struct figure lanes32 = divergence_of(m, &sp);
    sp.f16_acc = true;
    struct figure acc16 = divergence_of(m, &sp);
    printf("F16 weights, act=ggml, f16 kv, fa on: max |d logprob| %.3e with fp32 lanes, %.3e "
           "with fp16 accumulation\n",
           lanes32.logprob, acc16.logprob);
    assert_true(acc16.logprob > 1.2 * lanes32.logprob);
    assert_true(acc16.logprob < 0.5);

    /* the same bits: switched on an open scorer, and on two threads */
    const int32_t V = m->cfg.vocab;
    const size_t bytes = sizeof(float) * (size_t)CONT * (size_t)V;
    float *want = malloc(bytes);
    assert_non_null(want);
    struct assay_score *sc = NULL;
    assert_int_equal(assay_score_init(&sc, &sp, NULL), ASSAY_OK);
    const float *rows = NULL;
    assert_int_equal(
        assay_score_rows(sc, g_fx.tokens[1], PROMPT, g_fx.tokens[1] + PROMPT, CONT, &rows),
        ASSAY_OK);
    memcpy(want, rows, bytes);
    assay_score_free(sc);
    sp.f16_acc = false;
    sp.two_threads = true;
    assert_int_equal(assay_score_init(&sc, &sp, NULL), ASSAY_OK);
    assay_score_set_f16_acc(sc, true);
    assert_int_equal(
        assay_score_rows(sc, g_fx.tokens[1], PROMPT, g_fx.tokens[1] + PROMPT, CONT, &rows),
        ASSAY_OK);
    assert_memory_equal(want, rows, bytes);
    assay_score_set_f16_acc(sc, false);
    assert_int_equal(
        assay_score_rows(sc, g_fx.tokens[1], PROMPT, g_fx.tokens[1] + PROMPT, CONT, &rows),
        ASSAY_OK);
    assert_true(memcmp(want, rows, bytes) != 0);
    assay_score_free(sc);
    free(want);
    assay_model_free(m);
}

/* A scorer made and freed (assay_test_each_alloc_failing's attempt): a
 * failed init must leave *out NULL. */
static int score_attempt(void *ctx)
{
    struct assay_score *sc = NULL;
    enum assay_status st = assay_score_init(&sc, ctx, NULL);
    bool left = st != ASSAY_OK && sc != NULL;
    assay_score_free(sc);
    return left ? ASSAY_ERR_INTERNAL : (int)st;
}

/* Each allocation of assay_score_init failing in turn: ASSAY_ERR_NOMEM,
 * *out NULL, nothing left allocated. */
static void test_score_alloc_failures(void **state)
{
    (void)state;
    struct assay_score_params sp = assay_score_default_params(g_fx.model, N_TOK);
    sp.act = ASSAY_ACT_MODE_GGML;
    sp.kv_type = ASSAY_KV_TYPE_F16;
    sp.two_threads = true;
    long failures = assay_test_each_alloc_failing(score_attempt, &sp);
    printf("assay_score_init: %ld allocations failed in turn, each cleanly\n", failures);
    assert_true(failures > 3);
}

enum { ENGINE_TOKENS = 24 };

struct capture {
    float *logits; /* (ENGINE_TOKENS, vocab) of request 1 */
    int32_t vocab;
    bool seen[ENGINE_TOKENS];
};

static void capture(void *ctx, uint64_t id, int32_t index, const float *logits, int32_t vocab)
{
    struct capture *c = ctx;
    if (id == 1 && index >= 0 && index < ENGINE_TOKENS && vocab == c->vocab) {
        memcpy(c->logits + (int64_t)index * vocab, logits, sizeof(float) * (size_t)vocab);
        c->seen[index] = true;
    }
}

/* The engine with act=ggml, kv_type=f16, fa=on and invariant=on, serving a
 * request among others (paged KV, batched decode), computes the bits the
 * scorer computes for the same tokens teacher-forced: the spec's keys
 * reach the forward, and the emulation holds under batching and paging. */
static void test_engine_matches_scorer(void **state)
{
    (void)state;
    int32_t V = g_fx.model->cfg.vocab;
    struct assay_engine_params p = assay_engine_default_params(g_fx.model);
    p.max_seq_len = N_TOK;
    p.batch_invariant = true;
    p.act = ASSAY_ACT_MODE_GGML;
    p.kv_type = ASSAY_KV_TYPE_F16;
    p.flash_attn = true;
    struct assay_engine *e = NULL;
    struct assay_diag diag;
    assert_int_equal(assay_engine_init(&e, &p, &diag), ASSAY_OK);
    struct capture c = {malloc(sizeof(float) * ENGINE_TOKENS * (size_t)V), V, {false}};
    assert_non_null(c.logits);
    assay_engine_set_logits_sink(e, capture, &c);
    const int32_t *prompt = g_fx.tokens[0];
    struct assay_request r = {1, prompt, PROMPT, ENGINE_TOKENS, -1, assay_sampling_greedy()};
    assert_int_equal(assay_engine_add_request(e, &r), ASSAY_OK);
    for (uint64_t k = 0; k < 3; k++) {
        const int32_t *other = g_fx.tokens[1 + k % 2];
        int32_t len = 5 + 7 * (int32_t)k;
        struct assay_request o = {10 + k, other, len, 30, -1, assay_sampling_greedy()};
        assert_int_equal(assay_engine_add_request(e, &o), ASSAY_OK);
    }
    int32_t out[ENGINE_TOKENS];
    while (assay_engine_has_work(e)) {
        const struct assay_event *ev;
        size_t n;
        assert_int_equal(assay_engine_step(e, &ev, &n), ASSAY_OK);
        for (size_t i = 0; i < n; i++) {
            if (ev[i].kind == ASSAY_EVENT_TOKEN && ev[i].request_id == 1 &&
                ev[i].index < ENGINE_TOKENS) {
                out[ev[i].index] = ev[i].token;
            }
        }
    }
    assay_engine_free(e);
    for (int t = 0; t < ENGINE_TOKENS; t++) {
        assert_true(c.seen[t]);
    }
    struct assay_score_params sp = llama_defaults(g_fx.model);
    struct assay_score *sc = NULL;
    assert_int_equal(assay_score_init(&sc, &sp, NULL), ASSAY_OK);
    const float *rows = NULL;
    assert_int_equal(assay_score_rows(sc, prompt, PROMPT, out, ENGINE_TOKENS, &rows), ASSAY_OK);
    int32_t first_diff = -1;
    for (int t = 0; t < ENGINE_TOKENS && first_diff < 0; t++) {
        if (memcmp(rows + (int64_t)t * V, c.logits + (int64_t)t * V, sizeof(float) * (size_t)V)) {
            first_diff = t;
        }
    }
    printf("engine (batched, paged) and scorer: %s\n",
           first_diff < 0 ? "the same bits at every position" : "differ");
    if (first_diff >= 0) {
        fail_msg("engine and scorer logits differ first at output position %d", (int)first_diff);
    }
    assay_score_free(sc);
    free(c.logits);
}

static void test_mutant_exceeds_budget(void **state)
{
    (void)state;
    enum assay_mutant m;
    assert_int_equal(assay_mutant_by_name(g_mutant, &m), ASSAY_OK);
    struct figure ggml = divergence(ASSAY_ACT_MODE_GGML, ASSAY_KV_TYPE_F16, true, 0);
    struct figure bad = divergence(ASSAY_ACT_MODE_GGML, ASSAY_KV_TYPE_F16, true, (int)m);
    double budget = 2.0 * ggml.logprob;
    printf("mutant %s: max |d logprob| %.3e, budget %.3e (correct emulation %.3e)\n", g_mutant,
           bad.logprob, budget, ggml.logprob);
    if (!(bad.logprob > budget)) {
        fail_msg("mutant %s stays within the budget: %.3e <= %.3e", g_mutant, bad.logprob, budget);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--mutant") == 0) {
        g_mutant = argv[2];
    } else if (argc != 1) {
        fprintf(stderr, "usage: test_numerics_budget [--mutant NAME]\n");
        return 2;
    }
    assay_test_init(argc, argv);
    if (g_mutant[0] != '\0') {
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_mutant_exceeds_budget)};
        return cmocka_run_group_tests(tests, setup, teardown);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_matches_oracle), cmocka_unit_test(test_budget),
        cmocka_unit_test(test_ggml_rows_invariant), cmocka_unit_test(test_probe),
        cmocka_unit_test(test_engine_matches_scorer),
        cmocka_unit_test(test_score_alloc_failures), cmocka_unit_test(test_f16_accumulation)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
