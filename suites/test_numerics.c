/*
 * Unit tests of engine/numerics.c: the roundings of ggml's activation
 * formats on hand-computed cases, and the forward's refusal of models
 * whose fused products would need two formats.
 *
 * Every expected value is exact: fp16 and bf16 values are written as sums
 * of powers of two, and a Q8 value is a scale times a small integer chosen
 * by hand, formed in float as the format forms it (one rounding at most,
 * the same on both sides). Comparisons are therefore exact (atol 0,
 * rtol 0).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/status.h"
#include "engine/dequant.h"
#include "engine/forward.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/numerics.h"
#include "support.h"

/* The value of fp16 bits h, through the GGUF decoder (engine/dequant.h). */
static float f16_value(uint16_t h)
{
    uint8_t b[2] = {(uint8_t)(h & 0xff), (uint8_t)(h >> 8)};
    float v = 0.0f;
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_F16, b, 2, &v, 1, NULL), ASSAY_OK);
    return v;
}

static void test_f16_named(void **state)
{
    (void)state;
    /* ties go to the even neighbour */
    assert_true(assay_numerics_round_f16(1.0f + 0x1p-11f) == 1.0f);
    assert_true(assay_numerics_round_f16(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
    assert_true(assay_numerics_round_f16(-(1.0f + 3 * 0x1p-11f)) == -(1.0f + 0x1p-9f));
    /* just above a tie goes up */
    assert_true(assay_numerics_round_f16(1.0f + 0x1p-11f + 0x1p-20f) == 1.0f + 0x1p-10f);
    /* 0.1 is 0x2e66 in fp16: 1638 / 16384 */
    assert_true(assay_numerics_round_f16(0.1f) == 1638.0f / 16384.0f);
    /* the top: 65519 stays finite, the tie 65520 goes to infinity */
    assert_true(assay_numerics_round_f16(65519.0f) == 65504.0f);
    assert_true(isinf(assay_numerics_round_f16(65520.0f)));
    assert_true(isinf(assay_numerics_round_f16(-1e6f)) && assay_numerics_round_f16(-1e6f) < 0);
    /* subnormals: half the smallest goes to 0, three halves to two units */
    assert_true(assay_numerics_round_f16(0x1p-25f) == 0.0f);
    assert_true(assay_numerics_round_f16(3 * 0x1p-25f) == 0x1p-23f);
    assert_true(assay_numerics_round_f16(0x1p-14f - 0x1p-26f) == 0x1p-14f);
    assert_true(isnan(assay_numerics_round_f16(NAN)));
}

/* Every finite fp16 value is kept, and every midpoint between two
 * neighbours goes to the one with an even mantissa. */
static void test_f16_every_midpoint(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x7c00u; h++) {
        float v = f16_value((uint16_t)h);
        assert_true(assay_numerics_round_f16(v) == v);
        assert_true(assay_numerics_round_f16(-v) == -v);
        float next = h + 1 < 0x7c00u ? f16_value((uint16_t)(h + 1)) : 65536.0f;
        float mid = (float)(((double)v + next) / 2.0); /* exact in float */
        float want = (h & 1u) == 0 ? v : (h + 1 < 0x7c00u ? next : INFINITY);
        if (assay_numerics_round_f16(mid) != want) {
            fail_msg("midpoint of 0x%04x and its successor: got %a, want %a", (unsigned)h,
                     (double)assay_numerics_round_f16(mid), (double)want);
        }
    }
}

static void test_bf16(void **state)
{
    (void)state;
    assert_true(assay_numerics_round_bf16(1.0f + 0x1p-8f) == 1.0f);
    assert_true(assay_numerics_round_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
    assert_true(assay_numerics_round_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
    assert_true(isnan(assay_numerics_round_bf16(NAN)));
    assert_true(isinf(assay_numerics_round_bf16(INFINITY)));
}

/* A Q8_0 block whose scale rounds in fp16: amax 1, d = 1/127, stored as
 * 2^-7 (1 + 8/1024) = 0.00787353515625; q = x * 127 to nearest even. */
static void test_q8_0(void **state)
{
    (void)state;
    float x[64] = {0};
    x[0] = 1.0f;   /* q 127 */
    x[1] = 0.5f;   /* 63.5: the tie goes to 64 */
    x[2] = -0.25f; /* -31.75 -> -32 */
    x[3] = 0.3f;   /* 38.1 -> 38 */
    x[4] = -1.0f;  /* -127 */
    /* the second block is all zeros: zeros, not NaN */
    const float d = 0x1p-7f * (1.0f + 8.0f / 1024.0f);
    assert_true(assay_numerics_round_f16(1.0f / 127.0f) == d);
    assert_int_equal(assay_numerics_round_row(ASSAY_ACT_FORMAT_Q8_0, x, 64, 0), ASSAY_OK);
    const float want[5] = {127 * d, 64 * d, -32 * d, 38 * d, -127 * d};
    for (int i = 0; i < 5; i++) {
        if (x[i] != want[i]) {
            fail_msg("element %d: got %a, want %a", i, (double)x[i], (double)want[i]);
        }
    }
    assert_true(x[0] != 1.0f); /* the fp16 scale shows */
    for (int i = 5; i < 64; i++) {
        assert_true(x[i] == 0.0f && !signbit(x[i]));
    }
}

/* A Q8_K block keeps the signed element of largest magnitude (the first of
 * equals): max -2, iscale = -127 / -2 = 63.5, d = 1 / 63.5 in float. */
static void test_q8_k(void **state)
{
    (void)state;
    float x[512] = {0};
    x[5] = -2.0f;  /* q -127 */
    x[9] = 2.0f;   /* the same magnitude, later: q 127 */
    x[0] = 1.0f;   /* 63.5: the tie goes to 64 */
    x[1] = 0.25f;  /* 15.875 -> 16 */
    x[2] = -0.75f; /* -47.625 -> -48 */
    /* block 1: only zeros */
    const float d = 1.0f / 63.5f;
    assert_int_equal(assay_numerics_round_row(ASSAY_ACT_FORMAT_Q8_K, x, 512, 0), ASSAY_OK);
    const int idx[5] = {5, 9, 0, 1, 2};
    const float q[5] = {-127, 127, 64, 16, -48};
    for (int i = 0; i < 5; i++) {
        float want = d * q[i];
        if (x[idx[i]] != want) {
            fail_msg("element %d: got %a, want %a", idx[i], (double)x[idx[i]], (double)want);
        }
    }
    for (int i = 256; i < 512; i++) {
        assert_true(x[i] == 0.0f);
    }
    /* a positive maximum gives d negative and the same values */
    float y[256] = {0};
    y[3] = 2.0f;
    y[4] = 1.0f;
    assert_int_equal(assay_numerics_round_row(ASSAY_ACT_FORMAT_Q8_K, y, 256, 0), ASSAY_OK);
    assert_true(y[3] == (1.0f / -63.5f) * -127.0f);
    assert_true(y[4] == (1.0f / -63.5f) * -64.0f);
}

static void test_formats(void **state)
{
    (void)state;
    const struct {
        uint32_t type;
        enum assay_act_format fmt;
    } cases[] = {
        {ASSAY_GGML_TYPE_F32, ASSAY_ACT_FORMAT_F32},
        {ASSAY_GGML_TYPE_F16, ASSAY_ACT_FORMAT_F16},
        {ASSAY_GGML_TYPE_BF16, ASSAY_ACT_FORMAT_BF16},
        {ASSAY_GGML_TYPE_Q4_0, ASSAY_ACT_FORMAT_Q8_0},
        {6, ASSAY_ACT_FORMAT_Q8_0} /* Q5_0 */,
        {ASSAY_GGML_TYPE_Q8_0, ASSAY_ACT_FORMAT_Q8_0},
        {10, ASSAY_ACT_FORMAT_Q8_K} /* Q2_K */,
        {ASSAY_GGML_TYPE_Q4_K, ASSAY_ACT_FORMAT_Q8_K},
        {ASSAY_GGML_TYPE_Q5_K, ASSAY_ACT_FORMAT_Q8_K},
        {ASSAY_GGML_TYPE_Q6_K, ASSAY_ACT_FORMAT_Q8_K},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enum assay_act_format fmt;
        assert_int_equal(assay_numerics_act_format(cases[i].type, &fmt), ASSAY_OK);
        assert_int_equal(fmt, cases[i].fmt);
    }
    enum assay_act_format fmt = ASSAY_ACT_FORMAT_F16;
    /* Q4_1 and Q5_1 read Q8_1, which is not emulated */
    assert_int_equal(assay_numerics_act_format(3, &fmt), ASSAY_ERR_UNSUPPORTED);
    assert_int_equal(assay_numerics_act_format(7, &fmt), ASSAY_ERR_UNSUPPORTED);
    assert_int_equal(assay_numerics_act_format(999, &fmt), ASSAY_ERR_UNSUPPORTED);
    assert_int_equal(fmt, ASSAY_ACT_FORMAT_F16);
    float x[40] = {0};
    assert_int_equal(assay_numerics_round_row(ASSAY_ACT_FORMAT_Q8_0, x, 40, 0), ASSAY_ERR_INVALID);
    assert_int_equal(assay_numerics_round_row(ASSAY_ACT_FORMAT_Q8_K, x, 32, 0), ASSAY_ERR_INVALID);
}

/* A model whose fused QKV parts read different formats is refused, naming
 * the tensors; one whose inputs are not whole blocks likewise. */
static void test_fused_refused(void **state)
{
    (void)state;
    struct assay_model_config cfg;
    assert_int_equal(assay_model_config_by_name("draft", &cfg), ASSAY_OK); /* d 128, ff 512 */
    struct assay_model *m = NULL;
    assert_int_equal(assay_model_init_random(&m, &cfg, 3), ASSAY_OK);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_forward_check_numerics(m, &diag), ASSAY_OK);
    for (int32_t l = 0; l < cfg.n_layer; l++) {
        struct assay_layer_types t = {
            ASSAY_GGML_TYPE_Q8_0, ASSAY_GGML_TYPE_Q8_0, ASSAY_GGML_TYPE_Q4_0, ASSAY_GGML_TYPE_Q8_0,
            ASSAY_GGML_TYPE_F16,  ASSAY_GGML_TYPE_F16,  ASSAY_GGML_TYPE_BF16};
        m->layers[l].types = t;
    }
    assert_int_equal(assay_forward_check_numerics(m, &diag), ASSAY_OK);
    m->layers[1].types.wv = ASSAY_GGML_TYPE_F16;
    assert_int_equal(assay_forward_check_numerics(m, &diag), ASSAY_ERR_UNSUPPORTED);
    assert_string_equal(diag.where, "blk.1.attn_q.weight and blk.1.attn_v.weight");
    struct assay_forward_params fp = {.model = m,
                                      .n_blocks = 1,
                                      .block_size = 16,
                                      .max_rows = 16,
                                      .max_out = 1,
                                      .max_seq_len = 16,
                                      .batch_invariant = true,
                                      .act = ASSAY_ACT_MODE_GGML};
    struct assay_forward *f = NULL;
    assert_int_equal(assay_forward_init(&f, &fp), ASSAY_ERR_UNSUPPORTED);
    assert_null(f);
    m->layers[1].types.wv = ASSAY_GGML_TYPE_Q8_0;
    m->layers[0].types.w_down = ASSAY_GGML_TYPE_Q4_K; /* d_ff 512: two blocks, fine */
    assert_int_equal(assay_forward_check_numerics(m, &diag), ASSAY_OK);
    m->output_type = ASSAY_GGML_TYPE_Q6_K; /* d_model 128: not a block of 256 */
    assert_int_equal(assay_forward_check_numerics(m, &diag), ASSAY_ERR_UNSUPPORTED);
    assert_string_equal(diag.where, "output.weight");
    /* the clone keeps the types */
    struct assay_model *c = NULL;
    assert_int_equal(assay_model_clone(m, &c), ASSAY_OK);
    assert_int_equal(c->output_type, ASSAY_GGML_TYPE_Q6_K);
    assert_int_equal(c->layers[0].types.w_down, ASSAY_GGML_TYPE_Q4_K);
    assert_int_equal(c->layers[1].types.wv, ASSAY_GGML_TYPE_Q8_0);
    assay_model_free(c);
    assay_model_free(m);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_named),     cmocka_unit_test(test_f16_every_midpoint),
        cmocka_unit_test(test_bf16),          cmocka_unit_test(test_q8_0),
        cmocka_unit_test(test_q8_k),          cmocka_unit_test(test_formats),
        cmocka_unit_test(test_fused_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
