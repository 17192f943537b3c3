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

/* ---- fp16 accumulation (AVX512-FP16 builds of ggml) ------------------- */

/* Near 2048 the fp16 spacing is 2, so 2048 + 1 is a tie that rounds to the
 * even 2048, while 2048 + 2 = 2050 is exact: a sum whose value depends on
 * which lanes meet first, each outcome derivable by hand. */

/* A lane keeps its own fp16 sum: 2048 then + 1 in the same lane (elements
 * 0 and 128) stays 2048; fp32 lanes or a double sum would give 2049. The
 * last n mod 128 elements are added in double: 2048 + 1 there is 2049. */
static void test_f16acc_dot_lanes(void **state)
{
    (void)state;
    float x[260], y[260];
    for (int i = 0; i < 260; i++) {
        x[i] = 1.0f;
        y[i] = 0.0f;
    }
    y[0] = 2048.0f;
    y[128] = 1.0f;
    assert_true(assay_numerics_dot_f16acc(x, y, 256) == 2048.0f);
    for (int k = ASSAY_NUMERICS_SIMD_GENERIC; k <= ASSAY_NUMERICS_SIMD_AVX512; k++) {
        assert_true(assay_numerics_dot_f16acc_as(x, y, 256, (enum assay_numerics_simd)k) == 2048.0f);
    }
    y[256] = 1.0f; /* a leftover element: double */
    assert_true(assay_numerics_dot_f16acc(x, y, 257) == 2049.0f);
    /* fewer than 128 elements: all in double */
    float a[3] = {1.0f, 1.0f, 1.0f}, b[3] = {2048.0f, 1.0f, 1.0f};
    assert_true(assay_numerics_dot_f16acc(a, b, 3) == 2050.0f);
}

/* The reduction pairs lane i with lane i + 64, then i + 32, ..., i + 1:
 * lanes 0 and 64 (1 + 1 = 2) meet before lane 32's 2048, so the sum is
 * 2050; summed in lane order it would be 2048 (2048 + 1 + 1, each a tie). */
static void test_f16acc_reduce_order(void **state)
{
    (void)state;
    float lanes[ASSAY_NUMERICS_F16ACC_LANES] = {0.0f};
    lanes[0] = 1.0f;
    lanes[64] = 1.0f;
    lanes[32] = 2048.0f;
    assert_true(assay_numerics_f16acc_reduce(lanes) == 2050.0f);
    /* a big lane absorbs each small one at its own step: 2048 every time */
    float lanes2[ASSAY_NUMERICS_F16ACC_LANES] = {0.0f};
    lanes2[0] = 2048.0f;
    for (int half = 64; half >= 1; half /= 2) {
        lanes2[half] = 1.0f;
    }
    assert_true(assay_numerics_f16acc_reduce(lanes2) == 2048.0f);
    /* the same through the dot product (x all 1, y the lanes) */
    float x[128], y[128];
    for (int i = 0; i < 128; i++) {
        x[i] = 1.0f;
        y[i] = 0.0f;
    }
    y[0] = 1.0f;
    y[64] = 1.0f;
    y[32] = 2048.0f;
    assert_true(assay_numerics_dot_f16acc(x, y, 128) == 2050.0f);
    for (int k = ASSAY_NUMERICS_SIMD_GENERIC; k <= ASSAY_NUMERICS_SIMD_AVX512; k++) {
        assert_true(assay_numerics_dot_f16acc_as(x, y, 128, (enum assay_numerics_simd)k) == 2050.0f);
    }
}

/* Every vector form this CPU runs agrees with the generic one bit for bit
 * on random fp16 values at lengths around the lane count, and the sums
 * differ from exact ones. */
static void test_f16acc_dot_variants(void **state)
{
    (void)state;
    static const int32_t lengths[] = {1, 64, 127, 128, 129, 255, 256, 384, 768, 1000, 2048};
    float x[2048], y[2048];
    uint64_t s = 12345;
    int n_differ_f32 = 0;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        const int32_t n = lengths[li];
        for (int rep = 0; rep < 20; rep++) {
            for (int32_t i = 0; i < n; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                x[i] = assay_numerics_round_f16((float)((int64_t)(s >> 40) - (1 << 23)) * 0x1p-22f);
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                y[i] = assay_numerics_round_f16((float)((int64_t)(s >> 40) - (1 << 23)) * 0x1p-23f);
            }
            float g = assay_numerics_dot_f16acc_as(x, y, n, ASSAY_NUMERICS_SIMD_GENERIC);
            float v = assay_numerics_dot_f16acc(x, y, n);
            for (int k = ASSAY_NUMERICS_SIMD_AVX2; k <= ASSAY_NUMERICS_SIMD_AVX512; k++) {
                float vk = assay_numerics_dot_f16acc_as(x, y, n, (enum assay_numerics_simd)k);
                if (memcmp(&vk, &g, sizeof vk) != 0 || memcmp(&v, &g, sizeof v) != 0) {
                    fail_msg("n %d: vector form %d %.9g, the widest form %.9g, generic %.9g",
                             (int)n, k, (double)vk, (double)v, (double)g);
                }
            }
            double d = 0.0;
            for (int32_t i = 0; i < n; i++) {
                d += (double)x[i] * y[i];
            }
            n_differ_f32 += n >= 128 && v != (float)d;
        }
    }
    assert_true(n_differ_f32 > 50); /* the fp16 sums are not the exact ones */
    for (int k = ASSAY_NUMERICS_SIMD_AVX2; k <= ASSAY_NUMERICS_SIMD_AVX512; k++) {
        if (!assay_numerics_simd_supported((enum assay_numerics_simd)k)) {
            print_message("this CPU lacks vector form %d of the fp16 dot: compared as generic\n",
                          k);
        }
    }
}

/* ggml_vec_mad_f16 and ggml_vec_scale_f16: fp16 arithmetic with v rounded
 * to fp16 on the first n - n mod 128 elements, fp32 on the rest. */
static void test_f16acc_mad_scale(void **state)
{
    (void)state;
    float y[192], x[192];
    for (int i = 0; i < 192; i++) {
        y[i] = 2048.0f;
        x[i] = 1.0f;
    }
    /* v = 1 + 2^-12 rounds to 1 in fp16: 2048 + 1 ties to 2048; in fp32,
     * 2049.0005 rounds to 2050 */
    assay_numerics_mad_f16acc(y, x, 1.0f + 0x1p-12f, 192);
    assert_true(y[0] == 2048.0f && y[127] == 2048.0f);
    assert_true(y[128] == 2050.0f && y[191] == 2050.0f);
    /* scale: y = 1.5, v = 1 + 2^-11 + 2^-14. In fp16, v is 1 + 2^-10 and
     * 1.5 v = 1.5 + 2^-10 + 2^-11, a tie between 1.5 + 2^-10 (odd) and
     * 1.5 + 2^-9 (even): 1.5 + 2^-9. In fp32, 1.5 v is 1.5 + 0.84375
     * units of 2^-10: 1.5 + 2^-10. */
    for (int i = 0; i < 192; i++) {
        y[i] = 1.5f;
    }
    assay_numerics_scale_f16acc(y, 1.0f + 0x1p-11f + 0x1p-14f, 192);
    assert_true(y[0] == 1.5f + 0x1p-9f && y[127] == 1.5f + 0x1p-9f);
    assert_true(y[128] == 1.5f + 0x1p-10f && y[191] == 1.5f + 0x1p-10f);
}

/* The rows rounded to fp16 (eight at a time where the CPU has F16C) give
 * the element-by-element values bit for bit: a product then a sum (not
 * fused) for mad, at every length around the vector width, on random
 * values across the whole range, fp16 subnormals, overflow, NaN and
 * infinities; and every 65,537th float through the scaled rounding. */
static void test_f16_rows(void **state)
{
    (void)state;
    float y[80], x[80], want[80];
    uint64_t s = 777;
    for (int32_t n = 0; n <= 80; n++) {
        for (int rep = 0; rep < 40; rep++) {
            float v = 0.0f;
            for (int32_t i = 0; i < n; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                uint32_t a = (uint32_t)(s >> 32), b = (uint32_t)s;
                /* exponents from fp16's subnormals to beyond its range */
                y[i] = ldexpf((float)(a & 0xffffff) * 0x1p-24f, (int)(a >> 24) % 44 - 28);
                x[i] = ldexpf((float)(b & 0xffffff) * 0x1p-24f, (int)(b >> 24) % 20 - 10);
                y[i] = (b & 0x80000000u) ? -y[i] : y[i];
            }
            if (n > 3) {
                y[1] = NAN;
                x[2] = INFINITY;
                y[3] = 70000.0f;
            }
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            v = ldexpf((float)(s >> 40) * 0x1p-24f, (int)(s & 7) - 3);
            for (int32_t i = 0; i < n; i++) {
                want[i] = assay_numerics_round_f16(y[i] + x[i] * v);
            }
            assay_numerics_mad_round_f16(y, x, v, n);
            if (n > 0 && memcmp(y, want, sizeof(float) * (size_t)n) != 0) {
                fail_msg("mad, n %d: a row differs from the element-by-element values", (int)n);
            }
            for (int32_t i = 0; i < n; i++) {
                want[i] = assay_numerics_round_f16(x[i] * v);
            }
            assay_numerics_scale_round_f16(y, x, v, n);
            if (n > 0 && memcmp(y, want, sizeof(float) * (size_t)n) != 0) {
                fail_msg("scale, n %d: a row differs from the element-by-element values", (int)n);
            }
        }
    }
    for (uint64_t u = 0; u <= 0xffffffffull; u += 65537 * 8) {
        float row[8], w[8];
        for (int k = 0; k < 8; k++) {
            uint32_t bits = (uint32_t)(u + 65537ull * (uint64_t)k);
            memcpy(&row[k], &bits, sizeof bits);
            w[k] = assay_numerics_round_f16(row[k] * 1.0f);
        }
        assay_numerics_scale_round_f16(row, row, 1.0f, 8);
        if (memcmp(row, w, sizeof row) != 0) {
            fail_msg("rounding the floats from bits 0x%08llx on: the row differs",
                     (unsigned long long)u);
        }
    }
    print_message("F16C: %s\n", assay_numerics_simd_supported(ASSAY_NUMERICS_SIMD_AVX2)
                                      ? "the rows were rounded eight at a time"
                                      : "absent, the rows were rounded element by element");
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_named),     cmocka_unit_test(test_f16_every_midpoint),
        cmocka_unit_test(test_bf16),          cmocka_unit_test(test_q8_0),
        cmocka_unit_test(test_q8_k),          cmocka_unit_test(test_formats),
        cmocka_unit_test(test_fused_refused),
        cmocka_unit_test(test_f16acc_dot_lanes),
        cmocka_unit_test(test_f16acc_reduce_order),
        cmocka_unit_test(test_f16acc_dot_variants),
        cmocka_unit_test(test_f16acc_mad_scale),
        cmocka_unit_test(test_f16_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
