/*
 * Unit tests of engine/dequant.c: each supported ggml type decoded from
 * blocks built here, field by field, from chosen values.
 *
 * The blocks are written by packers in this file that follow the layouts
 * as ggml states them (dequant.h repeats them), each in the direction of
 * packing; the expected floats are computed from the chosen values by the
 * type's formula, element by element, in double. The values are chosen so
 * that a wrong layout cannot go unseen: every sub-block has its own scale
 * and min, each scale's and min's packed bits differ from its neighbours',
 * every quant value occurs in every sub-block, the nibbles that share a
 * byte differ (and so, at most positions, do the fifth bits of a Q5_K
 * pair), super-blocks differ from each other, and signs occur in d, dmin,
 * the Q6_K scales and the quants.
 *
 * Tolerance: d and dmin have at most 11 significant bits, scales at most 7
 * and quants at most 6, so every product the dequantizer forms is exact in
 * float; only its last operation (the K types' subtraction) may round, once,
 * to nearest. Hence |got - want| <= 2^-24 |want| (half an ulp), atol 0.
 *
 * Bad input: a NaN or infinite d or dmin (PARSE, naming block, byte and
 * field; dst untouched), an element count that is not a whole number of
 * blocks, a short source, NULL buffers (INVALID), types not decoded
 * (UNSUPPORTED, named).
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

#include "core/status.h"
#include "engine/dequant.h"
#include "engine/gguf.h"
#include "support.h"

#define HALF_ULP 0x1p-24

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

static uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* The binary16 bits of v, which must be exactly representable: sign,
 * then either a subnormal m * 2^-24 (m 1..1023) or a normal
 * (1 + m/1024) * 2^(e-15) (e 1..30). */
static uint16_t f16_of(double v)
{
    uint16_t sign = signbit(v) ? 0x8000u : 0;
    double a = fabs(v);
    if (a == 0.0) {
        return sign;
    }
    double sub = ldexp(a, 24);
    if (sub < 1024.0) {
        assert_true(sub == floor(sub));
        return (uint16_t)(sign | (uint16_t)sub);
    }
    int e2;
    double frac = frexp(a, &e2); /* a = frac * 2^e2, frac in [0.5, 1) */
    int biased = e2 - 1 + 15;
    double mant = (2.0 * frac - 1.0) * 1024.0;
    assert_true(biased >= 1 && biased <= 30);
    assert_true(mant == floor(mant));
    return (uint16_t)(sign | (uint16_t)(biased << 10) | (uint16_t)mant);
}

/* Compare got[0..n) with want: |got - want| <= rtol |want|. On failure print
 * the largest difference and the first few pairs that differ. */
static void expect_close(const char *what, const float *got, const double *want, int64_t n,
                         double rtol)
{
    int64_t bad = 0, worst = -1;
    double worst_diff = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - want[i]);
        if (!(diff <= rtol * fabs(want[i]))) {
            if (bad < 5) {
                fprintf(stderr, "%s: element %lld: got %.9g, want %.9g\n", what, (long long)i,
                        (double)got[i], want[i]);
            }
            bad++;
            if (worst < 0 || diff > worst_diff || isnan(diff)) {
                worst_diff = diff;
                worst = i;
            }
        }
    }
    if (bad > 0) {
        fail_msg("%s: %lld of %lld elements outside |got-want| <= %g |want|; largest difference "
                 "%.9g at element %lld",
                 what, (long long)bad, (long long)n, rtol, worst_diff, (long long)worst);
    }
}

/* Decode and compare, also from a source one byte off alignment. */
static void decode_and_check(const char *what, uint32_t type, const uint8_t *src, size_t bytes,
                             const double *want, int64_t n)
{
    float *got = malloc((size_t)n * sizeof *got);
    uint8_t *shifted = malloc(bytes + 1);
    assert_non_null(got);
    assert_non_null(shifted);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_dequant_row(type, src, bytes, got, n, &diag), ASSAY_OK);
    expect_close(what, got, want, n, HALF_ULP);

    memcpy(shifted + 1, src, bytes);
    memset(got, 0, (size_t)n * sizeof *got);
    assert_int_equal(assay_dequant_row(type, shifted + 1, bytes, got, n, &diag), ASSAY_OK);
    expect_close(what, got, want, n, HALF_ULP);
    free(shifted);
    free(got);
}

static void expect_diag(const struct assay_diag *diag, const char *where, const char *expected,
                        const char *got)
{
    if (where != NULL && strstr(diag->where, where) == NULL) {
        fail_msg("diag where \"%s\" lacks \"%s\"", diag->where, where);
    }
    if (expected != NULL && strstr(diag->expected, expected) == NULL) {
        fail_msg("diag expected \"%s\" lacks \"%s\"", diag->expected, expected);
    }
    if (got != NULL && strstr(diag->got, got) == NULL) {
        fail_msg("diag got \"%s\" lacks \"%s\"", diag->got, got);
    }
}

/* ------------------------------------------------------------------ */
/* Which types                                                         */
/* ------------------------------------------------------------------ */

static void test_supported(void **state)
{
    (void)state;
    for (uint32_t t = 0; t < 64; t++) {
        bool want = t == 0 || t == 1 || t == 2 || t == 8 || t == 12 || t == 13 || t == 14 ||
                    t == 30;
        if (assay_dequant_supported(t) != want) {
            fail_msg("assay_dequant_supported(%u) = %d, want %d", (unsigned)t, !want, want);
        }
    }
    assert_false(assay_dequant_supported(UINT32_MAX));
}

/* ------------------------------------------------------------------ */
/* F32, F16, BF16                                                      */
/* ------------------------------------------------------------------ */

static void test_f32(void **state)
{
    (void)state;
    const uint32_t in[6] = {0x3f800000u, 0x80000000u, 0x7fc12345u, 0xff800000u, 0x00000001u,
                            0xc0490fdbu};
    uint8_t src[1 + sizeof in];
    float out[6];
    memcpy(src + 1, in, sizeof in); /* unaligned */
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_F32, src + 1, sizeof in, out, 6, NULL),
                     ASSAY_OK);
    for (int i = 0; i < 6; i++) {
        if (bits_of(out[i]) != in[i]) {
            fail_msg("F32 element %d: bits 0x%08x, want 0x%08x", i, (unsigned)bits_of(out[i]),
                     (unsigned)in[i]);
        }
    }
}

/* Every binary16 bit pattern against its value by the definition:
 * (-1)^s 2^(e-15) (1 + m/1024) for e in 1..30, (-1)^s 2^-14 (m/1024) for
 * e = 0, infinities for e = 31, m = 0, and NaNs for e = 31, m != 0: quiet
 * (as IEEE conversion makes them), sign and payload kept in the top
 * mantissa bits. */
static void test_f16_every_pattern(void **state)
{
    (void)state;
    enum { N = 65536 };
    uint8_t *src = malloc(2 * N);
    float *out = malloc(N * sizeof *out);
    assert_non_null(src);
    assert_non_null(out);
    for (uint32_t h = 0; h < N; h++) {
        put_u16(src + 2 * h, (uint16_t)h);
    }
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_F16, src, 2 * N, out, N, NULL), ASSAY_OK);
    for (uint32_t h = 0; h < N; h++) {
        bool negative = (h & 0x8000u) != 0;
        uint32_t e = (h >> 10) & 31, m = h & 1023;
        float got = out[h];
        if (e == 31 && m != 0) {
            uint32_t b = bits_of(got);
            uint32_t want_bits = (negative ? 0x80000000u : 0) | 0x7fc00000u | (m << 13);
            if (!isnan(got) || b != want_bits) {
                fail_msg("F16 0x%04x: bits 0x%08x, want the quiet NaN 0x%08x", (unsigned)h,
                         (unsigned)b, (unsigned)want_bits);
            }
            continue;
        }
        double want;
        if (e == 31) {
            want = INFINITY;
        } else if (e == 0) {
            want = ldexp((double)m / 1024.0, -14);
        } else {
            want = ldexp(1.0 + (double)m / 1024.0, (int)e - 15);
        }
        if (negative) {
            want = -want;
        }
        if ((double)got != want || (signbit(got) != 0) != negative) {
            fail_msg("F16 0x%04x: got %.17g, want %.17g", (unsigned)h, (double)got, want);
        }
    }
    free(out);
    free(src);
}

/* Named values, written out by hand. */
static void test_f16_named(void **state)
{
    (void)state;
    static const struct {
        uint16_t bits;
        double value;
    } cases[] = {
        {0x0001, 5.9604644775390625e-08},  /* smallest subnormal, 2^-24 */
        {0x8001, -5.9604644775390625e-08},
        {0x0200, 3.0517578125e-05},        /* subnormal, 2^-15 */
        {0x03ff, 6.0975551605224609375e-05}, /* largest subnormal */
        {0x0400, 6.103515625e-05},         /* smallest normal, 2^-14 */
        {0x3555, 0.333251953125},
        {0x3c00, 1.0},
        {0x3c01, 1.0009765625},
        {0xc000, -2.0},
        {0x7bff, 65504.0},                 /* largest finite */
        {0x7c00, INFINITY},
        {0xfc00, -INFINITY},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    uint8_t src[2 * N];
    double want[N];
    float out[N];
    for (size_t i = 0; i < N; i++) {
        put_u16(src + 2 * i, cases[i].bits);
        want[i] = cases[i].value;
    }
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_F16, src, sizeof src, out, N, NULL),
                     ASSAY_OK);
    for (size_t i = 0; i < N; i++) {
        if ((double)out[i] != want[i]) {
            fail_msg("F16 0x%04x: got %.17g, want %.17g", (unsigned)cases[i].bits,
                     (double)out[i], want[i]);
        }
    }
    /* Negative zero, a quiet NaN, and a signalling one that comes out
     * quiet with its payload. */
    uint8_t three[6];
    put_u16(three, 0x8000);
    put_u16(three + 2, 0x7e00);
    put_u16(three + 4, 0xfc01);
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_F16, three, 6, out, 3, NULL), ASSAY_OK);
    assert_true(out[0] == 0.0f && signbit(out[0]));
    assert_int_equal(bits_of(out[1]), 0x7fc00000u);
    assert_int_equal(bits_of(out[2]), 0xffc02000u);
}

/* A binary32 rounded to the nearest bfloat16, ties to even (by hand: the
 * top 16 bits, plus one if the dropped 16 bits are more than half, or
 * exactly half and the kept part is odd). Not for NaNs. */
static uint16_t bf16_round(float f)
{
    uint32_t b = bits_of(f);
    uint32_t top = b >> 16, dropped = b & 0xffffu;
    if (dropped > 0x8000u || (dropped == 0x8000u && (top & 1u) != 0)) {
        top++;
    }
    return (uint16_t)top;
}

static void test_bf16(void **state)
{
    (void)state;
    /* Bit patterns and the values they stand for, by hand. */
    static const struct {
        uint16_t bits;
        double value;
    } cases[] = {
        {0x3f80, 1.0},
        {0x3f81, 1.0078125},            /* 1 + 2^-7: the last mantissa bit */
        {0xc2f7, -123.5},
        {0x4049, 3.140625},
        {0x0001, 0x1p-133},             /* smallest subnormal */
        {0x807f, -127 * 0x1p-133},
        {0x0080, 0x1p-126},             /* smallest normal */
        {0x7f7f, 0x1.fep127},           /* largest finite */
        {0x7f80, INFINITY},
        {0xff80, -INFINITY},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    uint8_t src[2 * N];
    float out[N];
    for (size_t i = 0; i < N; i++) {
        put_u16(src + 2 * i, cases[i].bits);
    }
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_BF16, src, sizeof src, out, N, NULL),
                     ASSAY_OK);
    for (size_t i = 0; i < N; i++) {
        if ((double)out[i] != cases[i].value) {
            fail_msg("BF16 0x%04x: got %.17g, want %.17g", (unsigned)cases[i].bits,
                     (double)out[i], cases[i].value);
        }
    }
    uint8_t two[4];
    put_u16(two, 0x8000);
    put_u16(two + 2, 0xffc1);
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_BF16, two, 4, out, 2, NULL), ASSAY_OK);
    assert_true(out[0] == 0.0f && signbit(out[0]));
    assert_int_equal(bits_of(out[1]), 0xffc10000u); /* NaN, sign and payload kept */

    /* Floats rounded to bfloat16 come back as the rounded value: ties go to
     * the even neighbour, and every value is within half a bfloat16 ulp
     * (2^-8 relative) of the float it was rounded from. */
    static const struct {
        float in;
        double rounded;
    } rounding[] = {
        {1.00390625f, 1.0},              /* 1 + 2^-8, a tie: to even (down) */
        {1.01171875f, 1.015625},         /* 1 + 3 2^-8, a tie: to even (up) */
        {1.0039072036743164f, 1.0078125}, /* just above the tie: up */
        {3.14159265f, 3.140625},
        {-0.001f, -0.00099945068359375},
        {65504.0f, 65536.0},
    };
    enum { R = sizeof rounding / sizeof rounding[0] };
    uint8_t rsrc[2 * R];
    float rout[R];
    for (size_t i = 0; i < R; i++) {
        put_u16(rsrc + 2 * i, bf16_round(rounding[i].in));
    }
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_BF16, rsrc, sizeof rsrc, rout, R, NULL),
                     ASSAY_OK);
    for (size_t i = 0; i < R; i++) {
        if ((double)rout[i] != rounding[i].rounded ||
            fabs((double)rout[i] - (double)rounding[i].in) > 0x1p-8 * fabs(rounding[i].rounded)) {
            fail_msg("BF16 of %.9g: got %.17g, want %.17g", (double)rounding[i].in,
                     (double)rout[i], rounding[i].rounded);
        }
    }
}

/* ------------------------------------------------------------------ */
/* Q8_0 and Q4_0                                                       */
/* ------------------------------------------------------------------ */

static void test_q8_0(void **state)
{
    (void)state;
    enum { BLOCKS = 3, N = 32 * BLOCKS, BYTES = 34 * BLOCKS };
    /* One scale with all 11 bits, one negative, one subnormal. */
    const double d[BLOCKS] = {1.0009765625, -341.0 / 1024.0, 5 * 0x1p-24};
    uint8_t src[BYTES];
    double want[N];
    for (int b = 0; b < BLOCKS; b++) {
        uint8_t *block = src + 34 * b;
        put_u16(block, f16_of(d[b]));
        for (int j = 0; j < 32; j++) {
            int q;
            if (b == 0) {
                q = -128 + j;            /* the negative end */
            } else if (b == 1) {
                q = 96 + j;              /* the positive end */
            } else {
                q = (j * 37) % 256 - 128; /* scattered, both signs */
            }
            block[2 + j] = (uint8_t)(int8_t)q;
            want[32 * b + j] = d[b] * q;
        }
    }
    decode_and_check("Q8_0", ASSAY_GGML_TYPE_Q8_0, src, sizeof src, want, N);
}

static void test_q4_0(void **state)
{
    (void)state;
    enum { BLOCKS = 2, N = 32 * BLOCKS, BYTES = 18 * BLOCKS };
    const double d[BLOCKS] = {257.0 / 1024.0, -3.5};
    uint8_t src[BYTES];
    double want[N];
    for (int b = 0; b < BLOCKS; b++) {
        /* Each half of the block holds all 16 values, and the two nibbles
         * of every byte differ. */
        int q[32];
        for (int j = 0; j < 16; j++) {
            q[j] = (j * 7 + 3 * b) % 16;
            q[j + 16] = (j * 7 + 9 + 5 * b) % 16;
        }
        uint8_t *block = src + 18 * b;
        put_u16(block, f16_of(d[b]));
        for (int j = 0; j < 16; j++) {
            block[2 + j] = (uint8_t)(q[j] | (q[j + 16] << 4));
        }
        for (int j = 0; j < 32; j++) {
            want[32 * b + j] = d[b] * (q[j] - 8);
        }
    }
    decode_and_check("Q4_0", ASSAY_GGML_TYPE_Q4_0, src, sizeof src, want, N);
}

/* ------------------------------------------------------------------ */
/* Q4_K and Q5_K                                                       */
/* ------------------------------------------------------------------ */

/* A Q4_K or Q5_K super-block as values. */
struct k_block {
    double d, dmin;
    uint8_t scale[8]; /* 6 bits each, one per sub-block of 32 */
    uint8_t min[8];   /* 6 bits each */
    uint8_t q[256];   /* 0..15 (Q4_K) or 0..31 (Q5_K) */
};

/* Two super-blocks. Scales and mins are all different; for sub-blocks 4..7
 * each scale and min differ in both their low four bits and their top two
 * bits, none of which is zero, so the top bits of packed bytes 0..7 are all
 * in use; scales 1 and 2 and min 1 are 32 or more, so their own top bits
 * are set too. Quants: every value in every sub-block (odd multipliers of
 * i walk through every residue), and at every position the two sub-blocks
 * of a pair differ in their low four bits (by 3) and, for Q5_K, mostly in
 * the fifth bit too (by 16 more). */
static void k_blocks(struct k_block kb[2], int quant_bits)
{
    static const uint8_t scale0[8] = {5, 38, 61, 22, 51, 29, 63, 44};
    static const uint8_t min0[8] = {9, 47, 1, 30, 18, 60, 35, 23};
    static const uint8_t scale1[8] = {62, 3, 17, 40, 26, 57, 36, 19};
    static const uint8_t min1[8] = {33, 12, 58, 4, 55, 21, 61, 44};
    memset(kb, 0, 2 * sizeof *kb);
    kb[0].d = 11.0 / 1024.0;
    kb[0].dmin = 13.0 / 2048.0;
    kb[1].d = 717.0 / 1024.0;
    kb[1].dmin = -127.0 / 1024.0;
    memcpy(kb[0].scale, scale0, 8);
    memcpy(kb[0].min, min0, 8);
    memcpy(kb[1].scale, scale1, 8);
    memcpy(kb[1].min, min1, 8);
    int levels = 1 << quant_bits;
    for (int s = 0; s < 8; s++) {
        for (int i = 0; i < 32; i++) {
            kb[0].q[32 * s + i] = (uint8_t)((i * 5 + 3 * s + 16 * (s % 2)) % levels);
            kb[1].q[32 * s + i] = (uint8_t)((i * 11 + 3 * s + 1 + 16 * (s % 2)) % levels);
        }
    }
}

/* The 12 scale bytes, as the format packs them. */
static void pack_k_scales(const struct k_block *kb, uint8_t out[12])
{
    for (int s = 0; s < 4; s++) {
        out[s] = (uint8_t)(kb->scale[s] | ((kb->scale[s + 4] >> 4) << 6));
        out[s + 4] = (uint8_t)(kb->min[s] | ((kb->min[s + 4] >> 4) << 6));
        out[s + 8] = (uint8_t)((kb->scale[s + 4] & 0x0f) | ((kb->min[s + 4] & 0x0f) << 4));
    }
}

/* 128 bytes of nibbles: in each 64 elements, byte l holds element l (low
 * nibble) and element 32 + l (high nibble). */
static void pack_k_nibbles(const struct k_block *kb, uint8_t out[128])
{
    for (int p = 0; p < 4; p++) {
        const uint8_t *x = kb->q + 64 * p;
        for (int l = 0; l < 32; l++) {
            out[32 * p + l] = (uint8_t)((x[l] & 0x0f) | ((x[32 + l] & 0x0f) << 4));
        }
    }
}

static void k_expected(const struct k_block *kb, double *want)
{
    for (int e = 0; e < 256; e++) {
        int s = e / 32;
        want[e] = kb->d * kb->scale[s] * kb->q[e] - kb->dmin * kb->min[s];
    }
}

static void test_q4_k(void **state)
{
    (void)state;
    struct k_block kb[2];
    k_blocks(kb, 4);
    uint8_t src[2 * 144];
    double want[512];
    for (int b = 0; b < 2; b++) {
        uint8_t *block = src + 144 * b;
        put_u16(block, f16_of(kb[b].d));
        put_u16(block + 2, f16_of(kb[b].dmin));
        pack_k_scales(&kb[b], block + 4);
        pack_k_nibbles(&kb[b], block + 16);
        k_expected(&kb[b], want + 256 * b);
    }
    decode_and_check("Q4_K", ASSAY_GGML_TYPE_Q4_K, src, sizeof src, want, 512);
}

static void test_q5_k(void **state)
{
    (void)state;
    struct k_block kb[2];
    k_blocks(kb, 5);
    uint8_t src[2 * 176];
    double want[512];
    for (int b = 0; b < 2; b++) {
        uint8_t *block = src + 176 * b;
        put_u16(block, f16_of(kb[b].d));
        put_u16(block + 2, f16_of(kb[b].dmin));
        pack_k_scales(&kb[b], block + 4);
        /* qh: in each 64 elements (pair p), byte l holds the fifth bit of
         * element l at bit 2p and of element 32 + l at bit 2p + 1. */
        uint8_t *qh = block + 16;
        memset(qh, 0, 32);
        for (int p = 0; p < 4; p++) {
            const uint8_t *x = kb[b].q + 64 * p;
            for (int l = 0; l < 32; l++) {
                qh[l] |= (uint8_t)(((x[l] >> 4) << (2 * p)) | ((x[32 + l] >> 4) << (2 * p + 1)));
            }
        }
        pack_k_nibbles(&kb[b], block + 48);
        k_expected(&kb[b], want + 256 * b);
    }
    /* The fifth bit must vary within each pair of sub-blocks, or a wrong
     * bit position could not be seen. */
    int differ = 0;
    for (int e = 0; e < 256; e++) {
        differ += ((kb[0].q[e] >> 4) != (kb[0].q[e ^ 32] >> 4));
    }
    assert_true(differ > 128);
    decode_and_check("Q5_K", ASSAY_GGML_TYPE_Q5_K, src, sizeof src, want, 512);
}

/* ------------------------------------------------------------------ */
/* Q6_K                                                                */
/* ------------------------------------------------------------------ */

static void test_q6_k(void **state)
{
    (void)state;
    /* Sixteen different scales of both signs, none zero, both ends of int8. */
    static const int8_t scales[2][16] = {
        {-128, 127, -1, 1, 64, -65, 33, -17, 100, -99, 7, -8, 50, -51, 2, 15},
        {19, -37, 88, -128, 3, 126, -70, 45, -2, 11, -100, 61, -23, 5, 127, -9},
    };
    const double d[2] = {47.0 / 16384.0, -2.001953125};
    uint8_t src[2 * 210];
    double want[512];
    for (int b = 0; b < 2; b++) {
        /* q 0..63: element i of quarter k (32 elements) of half h is
         * 2 ((5i + 3k + 7b + 11h) mod 32) + (k mod 2), so every 64
         * elements hold every value, and the four elements that share a qh
         * byte have four different low nibbles. */
        uint8_t q[256];
        for (int e = 0; e < 256; e++) {
            int h = e / 128, k = (e % 128) / 32, i = e % 32;
            q[e] = (uint8_t)(2 * ((5 * i + 3 * k + 7 * b + 11 * h) % 32) + k % 2);
        }
        uint8_t *block = src + 210 * b;
        /* In each half of 128: ql byte l holds elements l (low nibble) and
         * 64 + l (high), ql byte 32 + l elements 32 + l and 96 + l; qh byte
         * l holds the top two bits of elements l, 32 + l, 64 + l, 96 + l at
         * bits 0-1, 2-3, 4-5, 6-7. */
        for (int h = 0; h < 2; h++) {
            const uint8_t *x = q + 128 * h;
            uint8_t *ql = block + 64 * h;
            uint8_t *qh = block + 128 + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((x[l] & 0x0f) | ((x[64 + l] & 0x0f) << 4));
                ql[32 + l] = (uint8_t)((x[32 + l] & 0x0f) | ((x[96 + l] & 0x0f) << 4));
                qh[l] = (uint8_t)((x[l] >> 4) | ((x[32 + l] >> 4) << 2) |
                                  ((x[64 + l] >> 4) << 4) | ((x[96 + l] >> 4) << 6));
            }
        }
        for (int g = 0; g < 16; g++) {
            block[192 + g] = (uint8_t)scales[b][g];
        }
        put_u16(block + 208, f16_of(d[b]));
        for (int e = 0; e < 256; e++) {
            want[256 * b + e] = d[b] * scales[b][e / 16] * (q[e] - 32);
        }
    }
    decode_and_check("Q6_K", ASSAY_GGML_TYPE_Q6_K, src, sizeof src, want, 512);
}

/* ------------------------------------------------------------------ */
/* Bad input                                                           */
/* ------------------------------------------------------------------ */

enum { SENTINEL_BITS = 0x7fa5a5a5u };

static void fill_sentinel(float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t b = SENTINEL_BITS;
        memcpy(&dst[i], &b, sizeof b);
    }
}

static void expect_untouched(const float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (bits_of(dst[i]) != SENTINEL_BITS) {
            fail_msg("dst[%zu] written on failure", i);
        }
    }
}

/* A NaN or an infinity in d or dmin of the second block: PARSE, naming the
 * block, its byte offset and the field; nothing written. */
static void test_nonfinite_scales(void **state)
{
    (void)state;
    static const struct {
        uint32_t type;
        uint32_t block_elems, block_bytes, offset;
        uint16_t bits;
        const char *field, *got;
    } cases[] = {
        {ASSAY_GGML_TYPE_Q4_0, 32, 18, 0, 0x7e00, "field d", "NaN (f16 0x7e00)"},
        {ASSAY_GGML_TYPE_Q8_0, 32, 34, 0, 0x7c00, "field d", "inf (f16 0x7c00)"},
        {ASSAY_GGML_TYPE_Q4_K, 256, 144, 0, 0xfc00, "field d", "-inf (f16 0xfc00)"},
        {ASSAY_GGML_TYPE_Q4_K, 256, 144, 2, 0x7c01, "field dmin", "NaN (f16 0x7c01)"},
        {ASSAY_GGML_TYPE_Q5_K, 256, 176, 0, 0x7fff, "field d", "NaN (f16 0x7fff)"},
        {ASSAY_GGML_TYPE_Q5_K, 256, 176, 2, 0x7c00, "field dmin", "inf (f16 0x7c00)"},
        {ASSAY_GGML_TYPE_Q6_K, 256, 210, 208, 0xfe00, "field d", "NaN (f16 0xfe00)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t be = cases[c].block_elems, bb = cases[c].block_bytes;
        uint8_t src[2 * 210];
        float dst[512];
        memset(src, 0, sizeof src);
        /* Finite scales everywhere first (1.0), then the bad one. */
        for (uint32_t b = 0; b < 2; b++) {
            uint32_t first = cases[c].type == ASSAY_GGML_TYPE_Q6_K ? 208 : 0;
            put_u16(src + bb * b + first, 0x3c00);
        }
        struct assay_diag diag;
        assay_diag_clear(&diag);
        assert_int_equal(assay_dequant_row(cases[c].type, src, 2 * bb, dst, 2 * be, &diag),
                         ASSAY_OK);
        put_u16(src + bb + cases[c].offset, cases[c].bits);
        fill_sentinel(dst, 2 * be);
        assay_diag_clear(&diag);
        assert_int_equal(assay_dequant_row(cases[c].type, src, 2 * bb, dst, 2 * be, &diag),
                         ASSAY_ERR_PARSE);
        char where[64];
        snprintf(where, sizeof where, "%s block 1 at byte %u, %s",
                 assay_ggml_type_name(cases[c].type), (unsigned)bb, cases[c].field);
        expect_diag(&diag, where, "a finite f16 scale", cases[c].got);
        expect_untouched(dst, 2 * be);
        /* And without a diag. */
        assert_int_equal(assay_dequant_row(cases[c].type, src, 2 * bb, dst, 2 * be, NULL),
                         ASSAY_ERR_PARSE);
    }

    /* The same bytes where Q6_K keeps quants, not its scale, are no error:
     * d is read from the end of the block. */
    uint8_t q6[210];
    float out[256];
    memset(q6, 0, sizeof q6);
    put_u16(q6, 0x7e00);
    put_u16(q6 + 2, 0x7c00);
    put_u16(q6 + 208, 0x3c00);
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_Q6_K, q6, sizeof q6, out, 256, NULL),
                     ASSAY_OK);
    /* Nor in F16 or BF16 data, which is passed through. */
    uint8_t h[2];
    put_u16(h, 0x7c00);
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_F16, h, 2, out, 1, NULL), ASSAY_OK);
    assert_true(isinf(out[0]));
}

static void test_bad_count(void **state)
{
    (void)state;
    uint8_t src[2 * 176];
    float dst[512];
    memset(src, 0, sizeof src);
    struct assay_diag diag;
    static const struct {
        uint32_t type;
        int64_t n;
        const char *expected;
    } cases[] = {
        {ASSAY_GGML_TYPE_Q4_K, 255, "a multiple of 256 (the Q4_K block)"},
        {ASSAY_GGML_TYPE_Q5_K, 32, "a multiple of 256 (the Q5_K block)"},
        {ASSAY_GGML_TYPE_Q6_K, 257, "a multiple of 256 (the Q6_K block)"},
        {ASSAY_GGML_TYPE_Q4_0, 33, "a multiple of 32 (the Q4_0 block)"},
        {ASSAY_GGML_TYPE_Q8_0, 16, "a multiple of 32 (the Q8_0 block)"},
        {ASSAY_GGML_TYPE_Q8_0, -32, "a multiple of 32 (the Q8_0 block)"},
        {ASSAY_GGML_TYPE_F32, -1, "a multiple of 1 (the F32 block)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char got[32];
        fill_sentinel(dst, 512);
        assay_diag_clear(&diag);
        assert_int_equal(assay_dequant_row(cases[c].type, src, sizeof src, dst, cases[c].n, &diag),
                         ASSAY_ERR_INVALID);
        snprintf(got, sizeof got, "%lld", (long long)cases[c].n);
        assert_string_equal(diag.where, "n");
        assert_string_equal(diag.got, got);
        expect_diag(&diag, NULL, cases[c].expected, NULL);
        expect_untouched(dst, 512);
    }
    /* Any count of 16-bit elements is whole; so is none at all. */
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_F16, src, sizeof src, dst, 3, &diag),
                     ASSAY_OK);
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_Q4_K, NULL, 0, NULL, 0, &diag), ASSAY_OK);
    /* A count whose bytes overflow a size_t. */
    assay_diag_clear(&diag);
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_F32, src, sizeof src, dst, INT64_MAX,
                                       &diag),
                     ASSAY_ERR_INVALID);
    expect_diag(&diag, "n", "fit in a size_t", NULL);
}

static void test_short_source(void **state)
{
    (void)state;
    uint8_t src[2 * 176];
    float dst[512];
    memset(src, 0, sizeof src);
    struct assay_diag diag;
    static const struct {
        uint32_t type;
        int64_t n;
        size_t bytes;
        const char *expected;
    } cases[] = {
        {ASSAY_GGML_TYPE_Q4_K, 512, 287, "at least 288 bytes (2 Q4_K blocks of 144 bytes)"},
        {ASSAY_GGML_TYPE_Q5_K, 256, 175, "at least 176 bytes (1 Q5_K block of 176 bytes)"},
        {ASSAY_GGML_TYPE_Q6_K, 256, 209, "at least 210 bytes (1 Q6_K block of 210 bytes)"},
        {ASSAY_GGML_TYPE_Q8_0, 64, 67, "at least 68 bytes (2 Q8_0 blocks of 34 bytes)"},
        {ASSAY_GGML_TYPE_Q4_0, 96, 53, "at least 54 bytes (3 Q4_0 blocks of 18 bytes)"},
        {ASSAY_GGML_TYPE_F32, 3, 11, "at least 12 bytes (3 F32 blocks of 4 bytes)"},
        {ASSAY_GGML_TYPE_BF16, 5, 9, "at least 10 bytes (5 BF16 blocks of 2 bytes)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char got[32];
        fill_sentinel(dst, 512);
        assay_diag_clear(&diag);
        assert_int_equal(assay_dequant_row(cases[c].type, src, cases[c].bytes, dst, cases[c].n,
                                           &diag),
                         ASSAY_ERR_INVALID);
        snprintf(got, sizeof got, "%zu", cases[c].bytes);
        assert_string_equal(diag.where, "src_bytes");
        assert_string_equal(diag.expected, cases[c].expected);
        assert_string_equal(diag.got, got);
        expect_untouched(dst, 512);
        /* One byte more is enough, and more than enough is fine. */
        assert_int_equal(assay_dequant_row(cases[c].type, src, cases[c].bytes + 1, dst,
                                           cases[c].n, &diag),
                         ASSAY_OK);
        assert_int_equal(assay_dequant_row(cases[c].type, src, sizeof src, dst, cases[c].n,
                                           &diag),
                         ASSAY_OK);
    }
}

static void test_null_buffers(void **state)
{
    (void)state;
    uint8_t src[34];
    float dst[32];
    memset(src, 0, sizeof src);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_Q8_0, NULL, 34, dst, 32, &diag),
                     ASSAY_ERR_INVALID);
    assert_string_equal(diag.where, "src");
    assay_diag_clear(&diag);
    assert_int_equal(assay_dequant_row(ASSAY_GGML_TYPE_Q8_0, src, 34, NULL, 32, &diag),
                     ASSAY_ERR_INVALID);
    assert_string_equal(diag.where, "dst");
}

static void test_unsupported(void **state)
{
    (void)state;
    uint8_t src[64];
    float dst[64];
    memset(src, 0, sizeof src);
    static const struct {
        uint32_t type;
        const char *got;
    } cases[] = {
        {3, "Q4_1 (3)"},      /* a block type this does not decode */
        {11, "Q3_K (11)"},
        {4, "Q4_2 (removed) (4)"},
        {16, "IQ2_XXS (16)"}, /* a size the reader does not know */
        {24, "I8 (24)"},      /* an integer type */
        {99, "unknown (99)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct assay_diag diag;
        assay_diag_clear(&diag);
        fill_sentinel(dst, 64);
        assert_int_equal(assay_dequant_row(cases[c].type, src, sizeof src, dst, 32, &diag),
                         ASSAY_ERR_UNSUPPORTED);
        assert_string_equal(diag.where, "ggml type");
        assert_string_equal(diag.got, cases[c].got);
        expect_diag(&diag, NULL, "Q4_K", NULL);
        expect_untouched(dst, 64);
    }
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_supported),
        cmocka_unit_test(test_f32),
        cmocka_unit_test(test_f16_every_pattern),
        cmocka_unit_test(test_f16_named),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_q8_0),
        cmocka_unit_test(test_q4_0),
        cmocka_unit_test(test_q4_k),
        cmocka_unit_test(test_q5_k),
        cmocka_unit_test(test_q6_k),
        cmocka_unit_test(test_nonfinite_scales),
        cmocka_unit_test(test_bad_count),
        cmocka_unit_test(test_short_source),
        cmocka_unit_test(test_null_buffers),
        cmocka_unit_test(test_unsupported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
