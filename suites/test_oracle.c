/*
 * Unit tests of the oracle's arithmetic (oracles/oracle.h): its logits are
 * bit for bit those of the plainest computation of the same model - one
 * position at a time, one matrix-vector product per weight matrix, every
 * element the oracle's eight-partial-sum dot product - whatever the number
 * of positions (within a block of the oracle's, across blocks, a partial
 * last block) and the number of threads; next_logits is the last row of
 * logits; and the oracle's scratch does not grow with the vocabulary.
 *
 * The reference below is the oracle as it was before its products took a
 * block of positions at a time, kept here as the definition the faster
 * loops must reproduce. The tolerance is zero: every double is
 * compared by its bits. This file is compiled with -ffp-contract=off, as
 * the oracle is, so neither side fuses a multiply with an add.
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

#include "engine/model.h"
#include "oracles/oracle.h"
#include "support.h"

#define MAX_LEN 80

/* ---- the reference: one position at a time ------------------------------ */

static double ref_dot(const float *w, const double *x, int32_t n)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int32_t k = 0; k < 8; k++) {
            acc[k] += (double)w[i + k] * x[i + k];
        }
    }
    double sum = 0.0;
    for (int32_t k = 0; k < 8; k++) {
        sum += acc[k];
    }
    for (; i < n; i++) {
        sum += (double)w[i] * x[i];
    }
    return sum;
}

static void ref_matvec(double *y, const float *w, const double *x, int32_t rows, int32_t cols)
{
    for (int32_t r = 0; r < rows; r++) {
        y[r] = ref_dot(w + (int64_t)r * cols, x, cols);
    }
}

static void ref_rmsnorm(double *y, const double *x, const float *w, int32_t d, double eps)
{
    double ss = 0.0;
    for (int32_t i = 0; i < d; i++) {
        ss += x[i] * x[i];
    }
    double scale = 1.0 / sqrt(ss / d + eps);
    for (int32_t i = 0; i < d; i++) {
        y[i] = x[i] * scale * (double)w[i];
    }
}

static void ref_rope(double *x, int32_t n_heads, int32_t pos, const struct assay_model *m)
{
    const struct assay_model_config *c = &m->cfg;
    const int32_t head_dim = c->head_dim, half = head_dim / 2;
    const double scale = c->rope_scale != 0.0f ? c->rope_scale : 1.0;
    const bool neox = c->arch == ASSAY_ARCH_QWEN2;
    for (int32_t h = 0; h < n_heads; h++) {
        double *v = x + (int64_t)h * head_dim;
        for (int32_t i = 0; i < half; i++) {
            double angle = pos / scale * pow(c->rope_theta, -2.0 * i / head_dim);
            if (m->rope_freqs != NULL) {
                angle /= m->rope_freqs[i];
            }
            double co = cos(angle), si = sin(angle);
            int32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            double x0 = v[a], x1 = v[b];
            v[a] = x0 * co - x1 * si;
            v[b] = x0 * si + x1 * co;
        }
    }
}

static void ref_add_bias(double *y, const float *b, int32_t n)
{
    for (int32_t i = 0; b != NULL && i < n; i++) {
        y[i] += b[i];
    }
}

/* logits (n, vocab) of tokens[0..n), as assay_oracle_logits defines them. */
static void ref_logits(const struct assay_model *m, const int32_t *tokens, int32_t n,
                       double *logits)
{
    const struct assay_model_config *c = &m->cfg;
    const int32_t d = c->d_model, hd = c->head_dim;
    const int32_t qd = c->n_head * hd, kvd = c->n_kv_head * hd;
    const int32_t group = c->n_head / c->n_kv_head;
    const double eps = c->norm_eps;
    double *x = calloc((size_t)n * d, sizeof *x);
    double *xn = calloc((size_t)n * d, sizeof *xn);
    double *q = calloc((size_t)n * qd, sizeof *q);
    double *k = calloc((size_t)n * kvd, sizeof *k);
    double *v = calloc((size_t)n * kvd, sizeof *v);
    double *att = calloc((size_t)n * qd, sizeof *att);
    double *gate = calloc((size_t)c->d_ff, sizeof *gate);
    double *up = calloc((size_t)c->d_ff, sizeof *up);
    double *tmp = calloc((size_t)d, sizeof *tmp);
    double *scores = calloc((size_t)n, sizeof *scores);
    assert_true(x != NULL && xn != NULL && q != NULL && k != NULL && v != NULL && att != NULL &&
                gate != NULL && up != NULL && tmp != NULL && scores != NULL);

    for (int32_t t = 0; t < n; t++) {
        for (int32_t i = 0; i < d; i++) {
            x[(int64_t)t * d + i] = m->tok_embd[(int64_t)tokens[t] * d + i];
        }
    }
    for (int32_t l = 0; l < c->n_layer; l++) {
        const struct assay_layer_weights *w = &m->layers[l];
        for (int32_t t = 0; t < n; t++) {
            double *xt = xn + (int64_t)t * d;
            ref_rmsnorm(xt, x + (int64_t)t * d, w->attn_norm, d, eps);
            ref_matvec(q + (int64_t)t * qd, w->wq, xt, qd, d);
            ref_matvec(k + (int64_t)t * kvd, w->wk, xt, kvd, d);
            ref_matvec(v + (int64_t)t * kvd, w->wv, xt, kvd, d);
            ref_add_bias(q + (int64_t)t * qd, w->bq, qd);
            ref_add_bias(k + (int64_t)t * kvd, w->bk, kvd);
            ref_add_bias(v + (int64_t)t * kvd, w->bv, kvd);
            ref_rope(q + (int64_t)t * qd, c->n_head, t, m);
            ref_rope(k + (int64_t)t * kvd, c->n_kv_head, t, m);
        }
        for (int32_t t = 0; t < n; t++) {
            for (int32_t h = 0; h < c->n_head; h++) {
                const double *qh = q + (int64_t)t * qd + (int64_t)h * hd;
                int32_t g = h / group;
                double max = -INFINITY;
                for (int32_t j = 0; j <= t; j++) {
                    const double *kj = k + (int64_t)j * kvd + (int64_t)g * hd;
                    double s = 0.0;
                    for (int32_t i = 0; i < hd; i++) {
                        s += qh[i] * kj[i];
                    }
                    scores[j] = s / sqrt((double)hd);
                    max = scores[j] > max ? scores[j] : max;
                }
                double sum = 0.0;
                for (int32_t j = 0; j <= t; j++) {
                    scores[j] = exp(scores[j] - max);
                    sum += scores[j];
                }
                double *out = att + (int64_t)t * qd + (int64_t)h * hd;
                for (int32_t i = 0; i < hd; i++) {
                    out[i] = 0.0;
                }
                for (int32_t j = 0; j <= t; j++) {
                    const double *vj = v + (int64_t)j * kvd + (int64_t)g * hd;
                    double weight = scores[j] / sum;
                    for (int32_t i = 0; i < hd; i++) {
                        out[i] += weight * vj[i];
                    }
                }
            }
        }
        for (int32_t t = 0; t < n; t++) {
            ref_matvec(tmp, w->wo, att + (int64_t)t * qd, d, qd);
            for (int32_t i = 0; i < d; i++) {
                x[(int64_t)t * d + i] += tmp[i];
            }
        }
        for (int32_t t = 0; t < n; t++) {
            double *xt = xn + (int64_t)t * d;
            ref_rmsnorm(xt, x + (int64_t)t * d, w->ffn_norm, d, eps);
            ref_matvec(gate, w->w_gate, xt, c->d_ff, d);
            ref_matvec(up, w->w_up, xt, c->d_ff, d);
            for (int32_t i = 0; i < c->d_ff; i++) {
                double g = gate[i];
                gate[i] = g / (1.0 + exp(-g)) * up[i];
            }
            ref_matvec(tmp, w->w_down, gate, d, c->d_ff);
            for (int32_t i = 0; i < d; i++) {
                x[(int64_t)t * d + i] += tmp[i];
            }
        }
    }
    for (int32_t t = 0; t < n; t++) {
        double *xt = xn + (int64_t)t * d;
        ref_rmsnorm(xt, x + (int64_t)t * d, m->out_norm, d, eps);
        ref_matvec(logits + (int64_t)t * c->vocab, m->output, xt, c->vocab, d);
    }
    double *bufs[] = {x, xn, q, k, v, att, gate, up, tmp, scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(bufs[i]);
    }
}

/* ---- helpers ------------------------------------------------------------ */

/* Tolerance 0: the doubles must be equal bit for bit. On failure prints how
 * many differ, the largest difference and the first few pairs. */
static void assert_same_bits(const double *got, const double *want, size_t n, const char *what)
{
    size_t n_diff = 0;
    double largest = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], sizeof got[i]) != 0) {
            if (n_diff < 5) {
                fprintf(stderr, "%s: [%zu] got %.17g, want %.17g\n", what, i, got[i], want[i]);
            }
            n_diff++;
            largest = fmax(largest, fabs(got[i] - want[i]));
        }
    }
    if (n_diff > 0) {
        fprintf(stderr, "%s: %zu of %zu values differ, largest by %.3g (tolerance 0)\n", what,
                n_diff, n, largest);
    }
    assert_int_equal(n_diff, 0);
}

static void random_tokens(int32_t *tokens, int32_t n, int32_t vocab, uint64_t seed)
{
    for (int32_t t = 0; t < n; t++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        tokens[t] = (int32_t)((seed >> 33) % (uint64_t)vocab);
    }
}

/* mini: llama, d_model 64. */
static struct assay_model *make_mini(void)
{
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *m = NULL;
    assert_int_equal(assay_model_init_random(&m, &cfg, 7), ASSAY_OK);
    return m;
}

/* Everything the oracle branches on: qwen2's RoPE layout (arch qwen2) or
 * llama 3.1's frequency divisors (arch llama; qwen2 has none), q/k/v
 * biases, linear RoPE scaling, tied embeddings, and widths that are not
 * multiples of dot()'s eight partial sums. */
static struct assay_model *make_odd(enum assay_arch arch)
{
    struct assay_model_config cfg = assay_model_config_mini();
    snprintf(cfg.name, sizeof cfg.name, "odd");
    cfg.arch = arch;
    cfg.n_layer = 2;
    cfg.d_model = 36;
    cfg.n_head = 6;
    cfg.n_kv_head = 2;
    cfg.head_dim = 6;
    cfg.d_ff = 52;
    cfg.vocab = 75;
    cfg.n_ctx = 128;
    cfg.rope_scale = 2.0f;
    cfg.rope_freqs = arch == ASSAY_ARCH_LLAMA;
    cfg.qkv_bias = true;
    struct assay_model_init_params p = assay_model_init_default_params();
    p.tied = true;
    struct assay_model *m = NULL;
    assert_int_equal(assay_model_init_random_params(&m, &cfg, p, 3), ASSAY_OK);
    assert_non_null(m->layers[0].bq);
    assert_true((m->rope_freqs != NULL) == (arch == ASSAY_ARCH_LLAMA));
    return m;
}

/* The oracle's logits and next_logits against the reference for prompts
 * of n tokens on 1, 2 and 3 threads, with every kernel this CPU runs (the
 * lengths straddle the AVX2 and AVX-512 kernels' groups of four and eight
 * positions and the blocks of 32). */
static void check_model(const struct assay_model *m)
{
    static const int32_t lengths[] = {1, 31, 32, 33, 70, MAX_LEN};
    static const int32_t threads[] = {1, 2, 3};
    static const enum assay_oracle_kernel kernels[] = {
        ASSAY_ORACLE_KERNEL_GENERIC, ASSAY_ORACLE_KERNEL_AVX2, ASSAY_ORACLE_KERNEL_AVX512};
    const int32_t vocab = m->cfg.vocab;
    int32_t tokens[MAX_LEN];
    double *want = calloc((size_t)MAX_LEN * vocab, sizeof *want);
    double *got = calloc((size_t)MAX_LEN * vocab, sizeof *got);
    double *next = calloc((size_t)vocab, sizeof *next);
    assert_true(want != NULL && got != NULL && next != NULL);
    struct assay_oracle *o = NULL;
    assert_int_equal(assay_oracle_init(&o, m, MAX_LEN), ASSAY_OK);
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        const int32_t n = lengths[li];
        random_tokens(tokens, n, vocab, 1000 + (uint64_t)n);
        ref_logits(m, tokens, n, want);
        for (size_t run = 0; run < 9; run++) {
            const enum assay_oracle_kernel kernel = kernels[run / 3];
            const int32_t n_threads = threads[run % 3];
            if (!assay_oracle_kernel_supported(kernel)) {
                continue; /* said once, in test_kernel_choice */
            }
            char what[96];
            snprintf(what, sizeof what, "%s, %d tokens, %d threads, kernel %s", m->cfg.name,
                     (int)n, (int)n_threads, assay_oracle_kernel_name(kernel));
            assert_int_equal(assay_oracle_set_kernel(o, kernel), ASSAY_OK);
            assert_int_equal(assay_oracle_set_threads(o, n_threads), ASSAY_OK);
            memset(got, 0xff, sizeof *got * (size_t)n * vocab);
            assert_int_equal(assay_oracle_logits(o, tokens, n, got), ASSAY_OK);
            assert_same_bits(got, want, (size_t)n * vocab, what);
            assert_int_equal(assay_oracle_next_logits(o, tokens, n, next), ASSAY_OK);
            assert_same_bits(next, want + (int64_t)(n - 1) * vocab, (size_t)vocab, what);
        }
    }
    assay_oracle_free(o);
    free(want);
    free(got);
    free(next);
}

/* ---- tests -------------------------------------------------------------- */

static void test_mini_matches_reference(void **state)
{
    (void)state;
    struct assay_model *m = make_mini();
    check_model(m);
    assay_model_free(m);
}

static void test_odd_shape_matches_reference(void **state)
{
    (void)state;
    enum assay_arch archs[2] = {ASSAY_ARCH_QWEN2, ASSAY_ARCH_LLAMA};
    for (int i = 0; i < 2; i++) {
        struct assay_model *m = make_odd(archs[i]);
        check_model(m);
        assay_model_free(m);
    }
}

static void test_set_threads_bounds(void **state)
{
    (void)state;
    struct assay_model *m = make_mini();
    struct assay_oracle *o = NULL;
    assert_int_equal(assay_oracle_init(&o, m, 8), ASSAY_OK);
    assert_int_equal(assay_oracle_set_threads(o, 0), ASSAY_ERR_INVALID);
    assert_int_equal(assay_oracle_set_threads(o, ASSAY_ORACLE_MAX_THREADS + 1), ASSAY_ERR_INVALID);
    assert_int_equal(assay_oracle_set_threads(o, ASSAY_ORACLE_MAX_THREADS), ASSAY_OK);
    /* more threads than rows: each thread gets at least one row */
    int32_t tokens[8];
    random_tokens(tokens, 8, m->cfg.vocab, 5);
    double *want = calloc((size_t)8 * m->cfg.vocab, sizeof *want);
    double *got = calloc((size_t)8 * m->cfg.vocab, sizeof *got);
    assert_true(want != NULL && got != NULL);
    ref_logits(m, tokens, 8, want);
    assert_int_equal(assay_oracle_logits(o, tokens, 8, got), ASSAY_OK);
    assert_same_bits(got, want, (size_t)8 * m->cfg.vocab, "mini, 64 threads");
    free(want);
    free(got);
    assay_oracle_free(o);
    assay_model_free(m);
}

/* AUTO resolves to the fastest kernel the CPU runs; an unsupported or
 * unknown kernel is refused and leaves the kernel as it was. */
static void test_kernel_choice(void **state)
{
    (void)state;
    struct assay_model *m = make_mini();
    struct assay_oracle *o = NULL;
    assert_int_equal(assay_oracle_init(&o, m, 8), ASSAY_OK);
    const bool avx2 = assay_oracle_kernel_supported(ASSAY_ORACLE_KERNEL_AVX2);
    const bool avx512 = assay_oracle_kernel_supported(ASSAY_ORACLE_KERNEL_AVX512);
    const enum assay_oracle_kernel best = avx512 ? ASSAY_ORACLE_KERNEL_AVX512
                                          : avx2 ? ASSAY_ORACLE_KERNEL_AVX2
                                                 : ASSAY_ORACLE_KERNEL_GENERIC;
    if (!avx2 || !avx512) {
        print_message("this CPU does not run the oracle's %s kernel: it is not checked against "
                      "the reference here\n",
                      !avx2 ? "AVX2 or AVX-512" : "AVX-512");
    }
    assert_int_equal(assay_oracle_get_kernel(o), best);
    assert_int_equal(assay_oracle_set_kernel(o, ASSAY_ORACLE_KERNEL_GENERIC), ASSAY_OK);
    assert_int_equal(assay_oracle_set_kernel(o, (enum assay_oracle_kernel)99), ASSAY_ERR_INVALID);
    assert_int_equal(assay_oracle_get_kernel(o), ASSAY_ORACLE_KERNEL_GENERIC);
    if (!avx2) {
        assert_int_equal(assay_oracle_set_kernel(o, ASSAY_ORACLE_KERNEL_AVX2),
                         ASSAY_ERR_UNSUPPORTED);
        assert_int_equal(assay_oracle_get_kernel(o), ASSAY_ORACLE_KERNEL_GENERIC);
    }
    assert_int_equal(assay_oracle_set_kernel(o, ASSAY_ORACLE_KERNEL_AUTO), ASSAY_OK);
    assert_int_equal(assay_oracle_get_kernel(o), best);
    if (!avx512) {
        assert_int_equal(assay_oracle_set_kernel(o, ASSAY_ORACLE_KERNEL_AVX512),
                         ASSAY_ERR_UNSUPPORTED);
    }
    assert_string_equal(assay_oracle_kernel_name(ASSAY_ORACLE_KERNEL_AVX2), "avx2");
    assert_string_equal(assay_oracle_kernel_name(ASSAY_ORACLE_KERNEL_AVX512), "avx512");
    assert_string_equal(assay_oracle_kernel_name((enum assay_oracle_kernel)99), "?");
    assay_oracle_free(o);
    assay_model_free(m);
}

/* The scratch holds nothing of size max_len x vocab: a vocabulary 40 times
 * larger leaves it unchanged. */
static void test_scratch_independent_of_vocab(void **state)
{
    (void)state;
    size_t bytes[2];
    for (int i = 0; i < 2; i++) {
        struct assay_model_config cfg = assay_model_config_mini();
        cfg.vocab = i == 0 ? 260 : 10400;
        struct assay_model *m = NULL;
        assert_int_equal(assay_model_init_random(&m, &cfg, 1), ASSAY_OK);
        struct assay_oracle *o = NULL;
        assert_int_equal(assay_oracle_init(&o, m, cfg.n_ctx), ASSAY_OK);
        bytes[i] = assay_oracle_scratch_bytes(o);
        assay_oracle_free(o);
        assay_model_free(m);
    }
    assert_true(bytes[0] > 0);
    assert_int_equal(bytes[0], bytes[1]);
}

/* mini-sharp and mini-flat (engine/model.h) are mini with its output rows
 * scaled by 40 and by 0.05, every other weight mini's: the claims the
 * docs make of their logits hold on 4 prompts of 40 positions (mini-sharp:
 * a spread past 200 and a largest logit past 88.7 somewhere, the first
 * token near-deterministic at most positions; mini-flat: every position's
 * logits within 0.5 of each other). */
static void test_sharp_and_flat(void **state)
{
    (void)state;
    struct assay_model_config cm = assay_model_config_mini();
    struct assay_model *mini = NULL;
    assert_int_equal(assay_model_init_random(&mini, &cm, 1), ASSAY_OK);
    const float scales[2] = {40.0f, 0.05f};
    for (int k = 0; k < 2; k++) {
        struct assay_model_config c =
            k == 0 ? assay_model_config_mini_sharp() : assay_model_config_mini_flat();
        struct assay_model *m = NULL;
        assert_int_equal(assay_model_init_random(&m, &c, 1), ASSAY_OK);
        assert_int_equal(m->n_floats, mini->n_floats);
        int64_t at = m->output - m->data, n_out = (int64_t)c.vocab * c.d_model;
        for (int64_t i = 0; i < m->n_floats; i++) {
            bool out = i >= at && i < at + n_out;
            float want = out ? mini->data[i] * scales[k] : mini->data[i];
            assert_true(memcmp(&m->data[i], &want, sizeof want) == 0);
        }
        const int32_t v = c.vocab, n = 40;
        double *rows = calloc((size_t)n * (size_t)v, sizeof(double));
        assert_non_null(rows);
        struct assay_oracle *o = NULL;
        assert_int_equal(assay_oracle_init(&o, m, n), ASSAY_OK);
        double lo = INFINITY, hi = -INFINITY, widest = 0.0;
        int32_t peaked = 0;
        for (int32_t s = 0; s < 4; s++) {
            int32_t tok[40];
            for (int32_t i = 0; i < n; i++) {
                tok[i] = (i * 37 + s * 11 + 3) % v;
            }
            assert_int_equal(assay_oracle_logits(o, tok, n, rows), ASSAY_OK);
            for (int32_t t = 0; t < n; t++) {
                const double *r = rows + (int64_t)t * v;
                double rlo = INFINITY, rhi = -INFINITY, mass = 0.0;
                for (int32_t a = 0; a < v; a++) {
                    rlo = r[a] < rlo ? r[a] : rlo;
                    rhi = r[a] > rhi ? r[a] : rhi;
                }
                for (int32_t a = 0; a < v; a++) {
                    mass += exp(r[a] - rhi);
                }
                peaked += 1.0 / mass > 0.9; /* the top token's probability at T 1 */
                lo = rlo < lo ? rlo : lo;
                hi = rhi > hi ? rhi : hi;
                widest = rhi - rlo > widest ? rhi - rlo : widest;
            }
        }
        printf("  %s: logits %.3g to %.3g, widest spread at one position %.3g; top token above "
               "0.9 at %d of %d positions\n",
               c.name, lo, hi, widest, (int)peaked, 4 * (int)n);
        if (k == 0) {
            assert_true(widest > 200.0 && hi > 88.7 && peaked > 2 * n);
        } else {
            assert_true(widest < 0.5 && peaked == 0);
        }
        assay_oracle_free(o);
        free(rows);
        assay_model_free(m);
    }
    assay_model_free(mini);
}

/* mini-twins (engine/model.h) is mini with output row 2i + 1 a copy of
 * row 2i: every other weight is mini's, and the oracle's logits of tokens
 * 2i and 2i + 1 are the same double at every position, on every kernel and
 * thread count (each logit is one dot product of its own row), while no
 * other two tokens' are. */
static void test_twins_exact(void **state)
{
    (void)state;
    struct assay_model_config cm = assay_model_config_mini();
    struct assay_model_config ct = assay_model_config_mini_twins();
    struct assay_model *mini = NULL, *twins = NULL;
    assert_int_equal(assay_model_init_random(&mini, &cm, 1), ASSAY_OK);
    assert_int_equal(assay_model_init_random(&twins, &ct, 1), ASSAY_OK);
    const int32_t v = ct.vocab, d = ct.d_model, n = 40;
    assert_int_equal(mini->n_floats, twins->n_floats);
    for (int64_t i = 0; i < mini->n_floats; i++) {
        int64_t at = twins->output - twins->data;
        bool odd_row = i >= at && i < at + (int64_t)v * d && ((i - at) / d) % 2 == 1;
        float want = odd_row ? twins->output[(i - at) - d] : mini->data[i];
        assert_true(memcmp(&twins->data[i], &want, sizeof want) == 0);
    }
    double *rows = calloc((size_t)n * (size_t)v, sizeof(double));
    assert_non_null(rows);
    const enum assay_oracle_kernel kernels[] = {
        ASSAY_ORACLE_KERNEL_GENERIC, ASSAY_ORACLE_KERNEL_AVX2, ASSAY_ORACLE_KERNEL_AVX512};
    long unequal = 0, other = 0, positions = 0;
    for (size_t ki = 0; ki < sizeof kernels / sizeof kernels[0]; ki++) {
        if (!assay_oracle_kernel_supported(kernels[ki])) {
            continue;
        }
        for (int32_t threads = 1; threads <= 2; threads++) {
            struct assay_oracle *o = NULL;
            assert_int_equal(assay_oracle_init(&o, twins, n), ASSAY_OK);
            assert_int_equal(assay_oracle_set_kernel(o, kernels[ki]), ASSAY_OK);
            assert_int_equal(assay_oracle_set_threads(o, threads), ASSAY_OK);
            for (int32_t s = 0; s < 4; s++) {
                int32_t tok[40];
                for (int32_t i = 0; i < n; i++) {
                    tok[i] = (i * 37 + s * 11 + 3) % v;
                }
                assert_int_equal(assay_oracle_logits(o, tok, n, rows), ASSAY_OK);
                for (int32_t t = 0; t < n; t++, positions++) {
                    const double *r = rows + (int64_t)t * v;
                    for (int32_t a = 0; a < v; a++) {
                        for (int32_t b = a + 1; b < v; b++) {
                            bool pair = a / 2 == b / 2;
                            unequal += pair && memcmp(&r[a], &r[b], sizeof r[a]) != 0;
                            other += !pair && r[a] == r[b];
                        }
                    }
                }
            }
            assay_oracle_free(o);
        }
    }
    printf("  %ld positions: twins with other bits %ld, other tokens with equal logits %ld\n",
           positions, unequal, other);
    assert_true(positions > 0);
    assert_int_equal(unequal, 0);
    assert_int_equal(other, 0);
    free(rows);
    assay_model_free(mini);
    assay_model_free(twins);
}

/* Several sequences in one batched pass give each sequence's logits of a
 * pass of its own, bit for bit, with every kernel and one or two threads;
 * lengths that cross the blocks of 32 and the kernels' groups, a sequence
 * of one token, and the qwen2 shape with biases (NEOX RoPE from each
 * sequence's own positions). The rows from a given row of each sequence on
 * (assay_oracle_logits_batch_from) are the same doubles, packed. Bad
 * batches are refused. */
static void test_batch_matches_alone(void **state)
{
    (void)state;
    struct assay_model *models[] = {make_mini(), make_odd(ASSAY_ARCH_QWEN2)};
    static const int32_t lens[] = {5, 1, 33, 17, 21};
    enum { N_SEQS = 5 };
    static const enum assay_oracle_kernel kernels[] = {
        ASSAY_ORACLE_KERNEL_GENERIC, ASSAY_ORACLE_KERNEL_AVX2, ASSAY_ORACLE_KERNEL_AVX512};
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        const struct assay_model *m = models[mi];
        const int32_t vocab = m->cfg.vocab;
        int32_t toks[N_SEQS][MAX_LEN];
        const int32_t *ptrs[N_SEQS];
        int32_t total = 0;
        for (int32_t s = 0; s < N_SEQS; s++) {
            random_tokens(toks[s], lens[s], vocab, 77 + (uint64_t)s);
            ptrs[s] = toks[s];
            total += lens[s];
        }
        assert_true(total <= MAX_LEN);
        double *want = calloc((size_t)total * vocab, sizeof *want);
        double *got = calloc((size_t)total * vocab, sizeof *got);
        assert_true(want != NULL && got != NULL);
        struct assay_oracle *o = NULL;
        assert_int_equal(assay_oracle_init(&o, m, MAX_LEN), ASSAY_OK);
        for (int32_t s = 0, at = 0; s < N_SEQS; at += lens[s], s++) {
            assert_int_equal(assay_oracle_logits(o, toks[s], lens[s], want + (int64_t)at * vocab),
                             ASSAY_OK);
        }
        for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
            if (!assay_oracle_kernel_supported(kernels[k])) {
                continue;
            }
            for (int32_t threads = 1; threads <= 2; threads++) {
                assert_int_equal(assay_oracle_set_kernel(o, kernels[k]), ASSAY_OK);
                assert_int_equal(assay_oracle_set_threads(o, threads), ASSAY_OK);
                memset(got, 0xff, sizeof *got * (size_t)total * vocab);
                assert_int_equal(assay_oracle_logits_batch(o, N_SEQS, ptrs, lens, got), ASSAY_OK);
                if (memcmp(got, want, sizeof *got * (size_t)total * vocab) != 0) {
                    print_error("%s: the batch differs from the sequences alone (kernel %s, %d "
                                "threads)\n",
                                m->cfg.name, assay_oracle_kernel_name(kernels[k]), (int)threads);
                    fail();
                }
                /* only the rows from[s] on, packed: the same doubles */
                static const int32_t from[] = {0, 0, 20, 16, 3};
                memset(got, 0xff, sizeof *got * (size_t)total * vocab);
                assert_int_equal(assay_oracle_logits_batch_from(o, N_SEQS, ptrs, lens, from, got),
                                 ASSAY_OK);
                for (int32_t s = 0, at = 0, row = 0; s < N_SEQS; at += lens[s], s++) {
                    for (int32_t t = from[s]; t < lens[s]; t++, row++) {
                        assert_memory_equal(got + (int64_t)row * vocab,
                                            want + (int64_t)(at + t) * vocab,
                                            sizeof *got * (size_t)vocab);
                    }
                }
            }
        }
        const int32_t too_long[] = {MAX_LEN, 1}, empty[] = {3, 0};
        assert_int_equal(assay_oracle_logits_batch(o, 2, ptrs, too_long, got), ASSAY_ERR_INVALID);
        assert_int_equal(assay_oracle_logits_batch(o, 2, ptrs, empty, got), ASSAY_ERR_INVALID);
        assert_int_equal(assay_oracle_logits_batch(o, 0, ptrs, lens, got), ASSAY_ERR_INVALID);
        const int32_t past[] = {0, 1}, below[] = {-1, 0};
        assert_int_equal(assay_oracle_logits_batch_from(o, 2, ptrs, lens, past, got),
                         ASSAY_ERR_INVALID);
        assert_int_equal(assay_oracle_logits_batch_from(o, 2, ptrs, lens, below, got),
                         ASSAY_ERR_INVALID);
        assert_int_equal(assay_oracle_logits_batch_from(o, 2, ptrs, lens, NULL, got),
                         ASSAY_ERR_INVALID);
        int32_t bad[1] = {vocab};
        const int32_t *bad_ptr[1] = {bad};
        const int32_t one[1] = {1};
        assert_int_equal(assay_oracle_logits_batch(o, 1, bad_ptr, one, got), ASSAY_ERR_INVALID);
        assay_oracle_free(o);
        free(want);
        free(got);
        assay_model_free(models[mi]);
    }
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mini_matches_reference),
        cmocka_unit_test(test_odd_shape_matches_reference),
        cmocka_unit_test(test_set_threads_bounds),
        cmocka_unit_test(test_kernel_choice),
        cmocka_unit_test(test_scratch_independent_of_vocab),
        cmocka_unit_test(test_twins_exact),
        cmocka_unit_test(test_sharp_and_flat),
        cmocka_unit_test(test_batch_matches_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
