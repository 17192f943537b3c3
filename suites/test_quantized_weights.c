/*
 * Unit tests of the engine keeping a file's integer formats for its
 * products of few rows (engine/gemmq.h; forward_init.c lays them out and
 * checks them). TinyGPT is stored as llama.cpp's Q4_K_M mixes formats
 * (Q4_K for q, k, the attention output, gate and up; Q6_K for v and down;
 * Q8_0 for the embeddings and the LM head) and loaded from the file:
 *  - every matrix is kept in its integer format where the instruction set
 *    has the kernel (AVX2, AVX-512), none on the generic one;
 *  - a sequence's logits token by token and two tokens a pass (each
 *    product one or two rows: the integer weights) are, bit for bit,
 *    those of the same sequence in one pass (twenty rows, more than
 *    assay_gemmq_max_rows: the packed floats), with one thread and with
 *    two, on every instruction set the CPU runs;
 *  - a model whose floats no longer are its file's (one weight moved
 *    after the load) keeps that matrix in floats and still agrees
 *    with itself: were the check at init gone, its token-by-token logits
 *    would be the file's and this would fail;
 *  - the same model without its file (a clone), or a forward not asked
 *    to keep them (integer_weights off, as the scorer's), gives the same
 *    logits.
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

#include "engine/forward.h"
#include "engine/gemmq.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/worker.h"
#include "gguf_bytes.h"
#include "gguf_retype.h"
#include "support.h"

/* LEN is more rows than any instruction set's products on integer
 * weights take (assay_gemmq_max_rows), CHUNK no more than any takes. */
enum { LEN = 20, CHUNK = 2, BLOCK = 16, N_BLOCKS = 2 };

/* llama.cpp's Q4_K_M mix, on TinyGPT's shapes (rows of 256 and 1024). */
static uint32_t q4_k_m_mix(const struct assay_gguf_tensor *t)
{
    if (t->n_dims != 2) {
        return ASSAY_GGML_TYPE_F32;
    }
    if (strstr(t->name, "attn_v") != NULL || strstr(t->name, "ffn_down") != NULL) {
        return ASSAY_GGML_TYPE_Q6_K;
    }
    if (strstr(t->name, "token_embd") != NULL || strstr(t->name, "output.") != NULL) {
        return ASSAY_GGML_TYPE_Q8_0;
    }
    return ASSAY_GGML_TYPE_Q4_K;
}

/* TinyGPT (seed 1) in that mix, loaded resident from a scratch file. */
static struct assay_model *load_mixed(void)
{
    struct assay_model_config cfg = assay_model_config_tinygpt();
    struct assay_model *orig, *m = NULL;
    struct assay_diag diag;
    char path[512];
    assert_int_equal(assay_model_init_random(&orig, &cfg, 1), ASSAY_OK);
    assay_test_scratch("quantized-weights.gguf", path, sizeof path);
    gguf_want_status(assay_model_save_gguf(orig, path, &diag), ASSAY_OK, &diag);
    size_t size, n;
    uint8_t *buf = gguf_read_all(path, &size);
    struct gguf_retype r = {q4_k_m_mix, NULL, NULL};
    uint8_t *mixed = gguf_retyped(buf, size, &r, &n);
    gguf_write_all(path, mixed, n);
    gguf_want_status(assay_model_load_gguf(&m, path, &diag), ASSAY_OK, &diag);
    remove(path); /* the model's mapping stays valid */
    assert_string_equal(m->tensor_types, "Q8_0+F32+Q4_K+Q6_K");
    free(buf);
    free(mixed);
    assay_model_free(orig);
    return m;
}

struct run {
    float *prefill;  /* (LEN, vocab): the sequence in one pass */
    float *stepwise; /* (LEN, vocab): one token a pass */
    float *chunked;  /* (LEN, vocab): CHUNK tokens a pass */
    int32_t quantized, matrices;
    enum assay_isa isa;
};

/* The logits of the same LEN tokens both ways, on a forward over m. */
static void run_both(const struct assay_model *m, enum assay_isa isa, bool worker,
                     bool floats_only, struct run *out)
{
    const int32_t v = m->cfg.vocab;
    struct assay_worker *w = NULL;
    if (worker) {
        assert_int_equal(assay_worker_init(&w), ASSAY_OK);
    }
    struct assay_forward_params p = {.model = m,
                                     .n_blocks = N_BLOCKS,
                                     .block_size = BLOCK,
                                     .max_rows = LEN,
                                     .max_out = LEN,
                                     .max_seq_len = N_BLOCKS * BLOCK,
                                     .batch_invariant = true,
                                     .isa = isa,
                                     .act = ASSAY_ACT_MODE_EXACT,
                                     .kv_type = ASSAY_KV_TYPE_F32,
                                     .integer_weights = !floats_only,
                                     .worker = w};
    struct assay_forward *f;
    assert_int_equal(assay_forward_init(&f, &p), ASSAY_OK);
    struct assay_forward_numerics num;
    assay_forward_get_numerics(f, &num);
    out->quantized = num.quantized;
    out->matrices = num.matrices;
    out->isa = num.isa;
    const int32_t blocks[N_BLOCKS] = {0, 1};
    int32_t tokens[LEN], rows[LEN];
    for (int32_t i = 0; i < LEN; i++) {
        tokens[i] = (i * 37 + 11) % v;
        rows[i] = i;
    }
    struct assay_forward_seq all = {blocks, 0, LEN, 0, 0};
    struct assay_forward_batch b = {LEN, tokens, 1, &all, LEN, rows};
    assert_int_equal(assay_forward_run(f, &b), ASSAY_OK);
    memcpy(out->prefill, assay_forward_logits(f), sizeof(float) * (size_t)LEN * v);
    for (int32_t i = 0; i < LEN; i++) {
        struct assay_forward_seq one = {blocks, i, 1, 0, 0};
        struct assay_forward_batch s = {1, tokens + i, 1, &one, 1, rows};
        assert_int_equal(assay_forward_run(f, &s), ASSAY_OK);
        memcpy(out->stepwise + (int64_t)i * v, assay_forward_logits(f), sizeof(float) * (size_t)v);
    }
    for (int32_t i = 0; i < LEN; i += CHUNK) {
        int32_t rows_now = LEN - i < CHUNK ? LEN - i : CHUNK;
        struct assay_forward_seq some = {blocks, i, rows_now, 0, 0};
        struct assay_forward_batch s = {rows_now, tokens + i, 1, &some, rows_now, rows};
        assert_int_equal(assay_forward_run(f, &s), ASSAY_OK);
        memcpy(out->chunked + (int64_t)i * v, assay_forward_logits(f),
               sizeof(float) * (size_t)rows_now * v);
    }
    assay_forward_free(f);
    assay_worker_free(w);
}

/* Logits of a and b that differ in a bit. */
static int64_t bits_apart(const float *a, const float *b, int64_t n)
{
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) {
        d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    }
    return d;
}

static struct run new_run(const struct assay_model *m)
{
    struct run r;
    memset(&r, 0, sizeof r);
    r.prefill = malloc(sizeof(float) * (size_t)LEN * m->cfg.vocab);
    r.stepwise = malloc(sizeof(float) * (size_t)LEN * m->cfg.vocab);
    r.chunked = malloc(sizeof(float) * (size_t)LEN * m->cfg.vocab);
    assert_non_null(r.prefill);
    assert_non_null(r.stepwise);
    assert_non_null(r.chunked);
    return r;
}

static void free_run(struct run *r)
{
    free(r->prefill);
    free(r->stepwise);
    free(r->chunked);
}

static void test_few_rows_same_bits(void **state)
{
    (void)state;
    struct assay_model *m = load_mixed();
    const int64_t n = (int64_t)LEN * m->cfg.vocab;
    struct run r = new_run(m);
    for (int isa = ASSAY_ISA_GENERIC; isa < ASSAY_ISA_COUNT; isa++) {
        for (int worker = 0; worker < 2 && assay_isa_supported((enum assay_isa)isa); worker++) {
            run_both(m, (enum assay_isa)isa, worker == 1, false, &r);
            printf("isa=%s, threads=%d: %d of %d matrices kept in their integer format; logits "
                   "vs in one pass: token by token %lld of %lld differ, %d tokens a pass %lld\n",
                   assay_isa_name(r.isa), 1 + worker, (int)r.quantized, (int)r.matrices,
                   (long long)bits_apart(r.prefill, r.stepwise, n), (long long)n, CHUNK,
                   (long long)bits_apart(r.prefill, r.chunked, n));
            assert_int_equal(r.quantized, assay_gemmq_supported(r.isa) ? r.matrices : 0);
            assert_true(LEN > assay_gemmq_max_rows(r.isa));
            assert_true(CHUNK <= assay_gemmq_max_rows(r.isa) || !assay_gemmq_supported(r.isa));
            assert_int_equal(bits_apart(r.prefill, r.stepwise, n), 0);
            assert_int_equal(bits_apart(r.prefill, r.chunked, n), 0);
        }
    }
    run_both(m, ASSAY_ISA_AUTO, true, false, &r);
    /* the same floats without the file: the same logits */
    struct assay_model *clone;
    assert_int_equal(assay_model_clone(m, &clone), ASSAY_OK);
    struct run c = new_run(m);
    run_both(clone, ASSAY_ISA_AUTO, true, false, &c);
    assert_int_equal(c.quantized, 0);
    assert_int_equal(bits_apart(r.stepwise, c.stepwise, n), 0);
    assert_int_equal(bits_apart(r.prefill, c.prefill, n), 0);
    /* not asked for (the scorer's passes are many rows): none kept */
    run_both(m, ASSAY_ISA_AUTO, true, true, &c);
    assert_int_equal(c.quantized, 0);
    assert_int_equal(bits_apart(r.stepwise, c.stepwise, n), 0);
    free_run(&c);
    assay_model_free(clone);
    free_run(&r);
    assay_model_free(m);
}

static void test_moved_weight_stays_float(void **state)
{
    (void)state;
    struct assay_model *m = load_mixed();
    const int64_t n = (int64_t)LEN * m->cfg.vocab;
    struct run before = new_run(m), after = new_run(m);
    run_both(m, ASSAY_ISA_AUTO, false, false, &before);
    float *w = &m->layers[1].w_up[77];
    *w = *w + 0.25f;
    run_both(m, ASSAY_ISA_AUTO, false, false, &after);
    printf("one weight of layer 1's up projection 0.25 off its file: %d of %d matrices kept; "
           "logits token by token vs in one pass: %lld differ; vs before the move: %lld\n",
           (int)after.quantized, (int)after.matrices,
           (long long)bits_apart(after.prefill, after.stepwise, n),
           (long long)bits_apart(before.stepwise, after.stepwise, n));
    if (assay_gemmq_supported(after.isa)) {
        assert_int_equal(after.quantized, after.matrices - 1);
    }
    assert_int_equal(bits_apart(after.prefill, after.stepwise, n), 0);
    assert_int_equal(bits_apart(after.prefill, after.chunked, n), 0);
    assert_true(bits_apart(before.stepwise, after.stepwise, n) > 0);
    free_run(&before);
    free_run(&after);
    assay_model_free(m);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_few_rows_same_bits),
        cmocka_unit_test(test_moved_weight_stays_float),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
