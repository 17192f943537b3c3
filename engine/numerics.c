/*
 * numerics.c - llama.cpp's CPU roundings, emulated (numerics.h): the
 * activation format a ggml weight type reads (assay_numerics_act_format),
 * rounding rows in place to F16, BF16, Q8_0 or Q8_K values
 * (assay_numerics_round_row, _rows), and fp16-accumulating dot products and
 * updates in plain C, AVX2 or AVX-512. The forward pass (forward.c) calls
 * them when it computes as ggml does (ASSAY_ACT_MODE_GGML).
 */
#include "numerics.h"

#include <math.h>
#include <string.h>

#include "../core/mutant.h"
#include "gguf.h"

/* ggml type ids that gguf.h does not name (ggml.h's numbering). */
enum {
    GGML_ID_Q5_0 = 6,
    GGML_ID_Q2_K = 10,
    GGML_ID_Q3_K = 11,
};

const char *assay_numerics_mode_name(enum assay_act_mode mode)
{
    switch (mode) {
    case ASSAY_ACT_MODE_EXACT:
        return "exact";
    case ASSAY_ACT_MODE_GGML:
        return "ggml";
    }
    return "?";
}

const char *assay_numerics_kv_name(enum assay_kv_type type)
{
    switch (type) {
    case ASSAY_KV_TYPE_F32:
        return "f32";
    case ASSAY_KV_TYPE_F16:
        return "f16";
    }
    return "?";
}

const char *assay_numerics_format_name(enum assay_act_format fmt)
{
    switch (fmt) {
    case ASSAY_ACT_FORMAT_F32:
        return "F32";
    case ASSAY_ACT_FORMAT_F16:
        return "F16";
    case ASSAY_ACT_FORMAT_BF16:
        return "BF16";
    case ASSAY_ACT_FORMAT_Q8_0:
        return "Q8_0";
    case ASSAY_ACT_FORMAT_Q8_K:
        return "Q8_K";
    }
    return "?";
}

int32_t assay_numerics_format_block(enum assay_act_format fmt)
{
    switch (fmt) {
    case ASSAY_ACT_FORMAT_Q8_0:
        return ASSAY_NUMERICS_QK8_0;
    case ASSAY_ACT_FORMAT_Q8_K:
        return ASSAY_NUMERICS_QK_K;
    default:
        return 1;
    }
}

enum assay_status assay_numerics_act_format(uint32_t ggml_type, enum assay_act_format *out)
{
    switch (ggml_type) {
    case ASSAY_GGML_TYPE_F32:
        *out = ASSAY_ACT_FORMAT_F32;
        return ASSAY_OK;
    case ASSAY_GGML_TYPE_F16:
        *out = ASSAY_ACT_FORMAT_F16;
        return ASSAY_OK;
    case ASSAY_GGML_TYPE_BF16:
        *out = ASSAY_ACT_FORMAT_BF16;
        return ASSAY_OK;
    case ASSAY_GGML_TYPE_Q4_0:
    case GGML_ID_Q5_0:
    case ASSAY_GGML_TYPE_Q8_0:
        *out = ASSAY_ACT_FORMAT_Q8_0;
        return ASSAY_OK;
    case GGML_ID_Q2_K:
    case GGML_ID_Q3_K:
    case ASSAY_GGML_TYPE_Q4_K:
    case ASSAY_GGML_TYPE_Q5_K:
    case ASSAY_GGML_TYPE_Q6_K:
        *out = ASSAY_ACT_FORMAT_Q8_K;
        return ASSAY_OK;
    default:
        return ASSAY_ERR_UNSUPPORTED;
    }
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The binary16 bits nearest x, ties to even; overflow to infinity, NaN
 * kept quiet with the top of its payload. */
static uint16_t f16_bits(float x)
{
    uint32_t u = bits_of(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    }
    if (a >= 0x477ff000u) {
        /* 65520 and up: the tie between 65504 (odd mantissa) and 2^16
         * goes to 2^16, which is infinity */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (a >= 0x38800000u) {
        /* normal: rebias the exponent from 127 to 15, keep 10 of 23
         * mantissa bits; a carry out of the mantissa bumps the exponent */
        uint32_t h = ((a >> 23) - 112u) << 10 | ((a >> 13) & 0x3ffu);
        uint32_t rest = a & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) {
            h++;
        }
        return (uint16_t)(sign | h);
    }
    /* subnormal (or zero): the count of 2^-24 units, rounded to nearest
     * even; 1024 units is the smallest normal, whose bits are the same */
    float units = float_of(a) * 0x1p24f;
    return (uint16_t)(sign | (uint32_t)rintf(units));
}

static float f16_value(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f) {
        return float_of(sign | 0x7f800000u | (m << 13));
    }
    if (e != 0) {
        return float_of(sign | ((e + 112u) << 23) | (m << 13));
    }
    float v = (float)m * 0x1p-24f;
    return sign != 0 ? -v : v;
}

uint16_t assay_numerics_f16_bits(float x)
{
    return f16_bits(x);
}

float assay_numerics_round_f16(float x)
{
    return f16_value(f16_bits(x));
}

float assay_numerics_round_bf16(float x)
{
    uint32_t u = bits_of(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return float_of((u | 0x00400000u) & 0xffff0000u);
    }
    uint32_t h = (u + (0x7fffu + ((u >> 16) & 1u))) >> 16;
    return float_of(h << 16);
}

/* Round to nearest even as ggml's nearest_int does (|x| below 2^22). */
static float nearest_even(float x)
{
    float v = x + 12582912.0f;
    return v - 12582912.0f;
}

static void round_q8_0(float *x, int32_t n)
{
    for (int32_t b = 0; b < n; b += ASSAY_NUMERICS_QK8_0) {
        float *blk = x + b;
        float amax = 0.0f;
        for (int32_t j = 0; j < ASSAY_NUMERICS_QK8_0; j++) {
            float a = fabsf(blk[j]);
            amax = a > amax ? a : amax;
        }
        float d = assay_numerics_round_f16(amax / 127.0f);
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int32_t j = 0; j < ASSAY_NUMERICS_QK8_0; j++) {
            blk[j] = d * nearest_even(blk[j] * id);
        }
    }
}

/* The signed element of largest magnitude of a Q8_K block (0 for zeros). */
static float signed_max(const float *blk)
{
    float amax = 0.0f, max = 0.0f;
    for (int32_t j = 0; j < ASSAY_NUMERICS_QK_K; j++) {
        float a = fabsf(blk[j]);
        if (a > amax) {
            amax = a;
            max = blk[j];
        }
    }
    return max;
}

static void round_q8_k(float *x, int32_t n, int mutant)
{
    float prev_max = 0.0f;
    for (int32_t b = 0; b < n; b += ASSAY_NUMERICS_QK_K) {
        float *blk = x + b;
        float max = signed_max(blk);
        float use = max;
        if (ASSAY_MUTANT_ON(mutant, ASSAY_MUTANT_Q8_BLOCK_SCALE) && b > 0) {
            /* The planted bug: every block after the first takes the scale
             * of the block before it. */
            use = prev_max;
        }
        prev_max = max;
        if (use == 0.0f) {
            for (int32_t j = 0; j < ASSAY_NUMERICS_QK_K; j++) {
                blk[j] = 0.0f;
            }
            continue;
        }
        float iscale = -127.0f / use;
        float d = 1.0f / iscale;
        for (int32_t j = 0; j < ASSAY_NUMERICS_QK_K; j++) {
            float q = nearest_even(iscale * blk[j]);
            q = q > 127.0f ? 127.0f : q;
            if (ASSAY_MUTANT_ON(mutant, ASSAY_MUTANT_Q8_BLOCK_SCALE)) {
                /* an int8 store saturates at -128 too */
                q = q < -128.0f ? -128.0f : q;
            }
            blk[j] = d * q;
        }
    }
}

static void scale_round(float *y, const float *x, float v, int32_t n);

enum assay_status assay_numerics_round_row(enum assay_act_format fmt, float *x, int32_t n,
                                           int mutant)
{
    if (n < 0 || n % assay_numerics_format_block(fmt) != 0) {
        return ASSAY_ERR_INVALID;
    }
    switch (fmt) {
    case ASSAY_ACT_FORMAT_F32:
        break;
    case ASSAY_ACT_FORMAT_F16:
        scale_round(x, x, 1.0f, n);
        break;
    case ASSAY_ACT_FORMAT_BF16:
        for (int32_t i = 0; i < n; i++) {
            x[i] = assay_numerics_round_bf16(x[i]);
        }
        break;
    case ASSAY_ACT_FORMAT_Q8_0:
        round_q8_0(x, n);
        break;
    case ASSAY_ACT_FORMAT_Q8_K:
        round_q8_k(x, n, mutant);
        break;
    default:
        return ASSAY_ERR_INVALID;
    }
    return ASSAY_OK;
}

enum assay_status assay_numerics_round_rows(enum assay_act_format fmt, float *x, int32_t n_rows,
                                            int32_t n, int64_t ld, int mutant)
{
    if (n < 0 || n_rows < 0 || n % assay_numerics_format_block(fmt) != 0 || ld < n) {
        return ASSAY_ERR_INVALID;
    }
    for (int32_t r = 0; r < n_rows; r++) {
        (void)assay_numerics_round_row(fmt, x + (int64_t)r * ld, n, mutant);
    }
    int32_t blk = assay_numerics_format_block(fmt);
    if (ASSAY_MUTANT_ON(mutant, ASSAY_MUTANT_Q8_BLOCK_OFFSET) && blk > 1 && n >= blk) {
        /* The planted bug: the quantized rows are written in order with a
         * row stride one block short, so each row's first block lands on
         * the last block of the row before, which then reads it. */
        for (int32_t r = 0; r + 1 < n_rows; r++) {
            memcpy(x + (int64_t)r * ld + n - blk, x + (int64_t)(r + 1) * ld,
                   sizeof(float) * (size_t)blk);
        }
    }
    return ASSAY_OK;
}

/* ---- fp16 accumulation (AVX512-FP16 builds of ggml) ---------------------- */

float assay_numerics_f16acc_fma(float acc, float x, float y)
{
    return assay_numerics_round_f16(fmaf(x, y, acc));
}

float assay_numerics_f16acc_reduce(float lanes[ASSAY_NUMERICS_F16ACC_LANES])
{
    /* GGML_F16x32_REDUCE: of its four 32-lane accumulators, 0 += 2 and
     * 1 += 3, then 0 += 1 (lane by lane); then _mm512_reduce_add_ph halves
     * the 32 lanes five times, lane i taking lane i + half. */
    for (int32_t half = ASSAY_NUMERICS_F16ACC_LANES / 2; half >= 1; half /= 2) {
        for (int32_t i = 0; i < half; i++) {
            lanes[i] = assay_numerics_round_f16(lanes[i] + lanes[i + half]);
        }
    }
    return lanes[0];
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

/* The lanes of dot_f16acc below, eight at a time: a single-rounding fused
 * multiply-add in fp32, then the rounding to fp16 and back (F16C), as the
 * generic loop computes with fmaf and assay_numerics_round_f16. */
__attribute__((target("avx2,fma,f16c"))) static void lanes_f16acc_avx2(
    float lanes[ASSAY_NUMERICS_F16ACC_LANES], const float *x, const float *y, int32_t np)
{
    __m256 acc[ASSAY_NUMERICS_F16ACC_LANES / 8];
    for (int32_t l = 0; l < ASSAY_NUMERICS_F16ACC_LANES / 8; l++) {
        acc[l] = _mm256_setzero_ps();
    }
    for (int32_t i = 0; i < np; i += ASSAY_NUMERICS_F16ACC_LANES) {
        for (int32_t l = 0; l < ASSAY_NUMERICS_F16ACC_LANES / 8; l++) {
            __m256 s = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * l),
                                       _mm256_loadu_ps(y + i + 8 * l), acc[l]);
            acc[l] = _mm256_cvtph_ps(_mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT));
        }
    }
    for (int32_t l = 0; l < ASSAY_NUMERICS_F16ACC_LANES / 8; l++) {
        _mm256_storeu_ps(lanes + 8 * l, acc[l]);
    }
}

__attribute__((target("avx2,f16c"))) static __m256 round8_f16(__m256 x)
{
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

__attribute__((target("avx2,f16c"))) static __m128 round4_f16(__m128 x)
{
    return _mm_cvtph_ps(_mm_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

/* The last halvings of assay_numerics_f16acc_reduce, lanes 0..15 held as
 * two vectors of eight: 8, 4, 2, 1. */
__attribute__((target("avx2,f16c"))) static float reduce16_f16(__m256 lo, __m256 hi)
{
    __m256 v = round8_f16(_mm256_add_ps(lo, hi));
    __m128 x = round4_f16(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
    x = round4_f16(_mm_add_ps(x, _mm_movehl_ps(x, x)));                  /* i + (i + 2) */
    x = round4_f16(_mm_add_ps(x, _mm_shuffle_ps(x, x, _MM_SHUFFLE(1, 1, 1, 1)))); /* 0 + 1 */
    return _mm_cvtss_f32(x);
}

/* assay_numerics_f16acc_reduce with vectors: the same halvings, the same
 * sums and roundings. */
__attribute__((target("avx2,f16c"))) static float reduce_f16acc_avx2(
    float lanes[ASSAY_NUMERICS_F16ACC_LANES])
{
    __m256 v[ASSAY_NUMERICS_F16ACC_LANES / 8];
    for (int32_t l = 0; l < ASSAY_NUMERICS_F16ACC_LANES / 8; l++) {
        v[l] = _mm256_loadu_ps(lanes + 8 * l);
    }
    for (int32_t half = ASSAY_NUMERICS_F16ACC_LANES / 16; half >= 2; half /= 2) {
        for (int32_t l = 0; l < half; l++) {
            v[l] = round8_f16(_mm256_add_ps(v[l], v[l + half]));
        }
    }
    return reduce16_f16(v[0], v[1]);
}

/* The lanes and their sum with sixteen lanes of AVX-512F at a time, the
 * first halvings kept in those registers (vector l holds lanes 16 l to
 * 16 l + 15, so halving h pairs vector l with l + h / 16): the same sums
 * and roundings as the lanes and reduction above, without a trip through
 * memory, which cost as much as the lanes themselves in an F16 file's
 * products. */
__attribute__((target("avx512f,avx2,f16c"))) static float sum_f16acc_avx512(const float *x,
                                                                          const float *y,
                                                                          int32_t np)
{
    __m512 acc[ASSAY_NUMERICS_F16ACC_LANES / 16];
    for (int32_t l = 0; l < ASSAY_NUMERICS_F16ACC_LANES / 16; l++) {
        acc[l] = _mm512_setzero_ps();
    }
    for (int32_t i = 0; i < np; i += ASSAY_NUMERICS_F16ACC_LANES) {
        for (int32_t l = 0; l < ASSAY_NUMERICS_F16ACC_LANES / 16; l++) {
            __m512 s = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16 * l),
                                       _mm512_loadu_ps(y + i + 16 * l), acc[l]);
            acc[l] = _mm512_cvtph_ps(_mm512_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT));
        }
    }
    for (int32_t half = ASSAY_NUMERICS_F16ACC_LANES / 32; half >= 1; half /= 2) {
        for (int32_t l = 0; l < half; l++) {
            __m512 s = _mm512_add_ps(acc[l], acc[l + half]);
            acc[l] = _mm512_cvtph_ps(_mm512_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT));
        }
    }
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[0]), 1));
    return reduce16_f16(_mm512_castps512_ps256(acc[0]), hi);
}

/* AVX2 and FMA as the compiler's CPU model reports them (with the
 * operating system's AVX state); F16C from CPUID leaf 1 itself, which
 * clang before 16 cannot name in __builtin_cpu_supports. */
static bool have_avx2_f16c(void)
{
    unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}
#endif

bool assay_numerics_simd_supported(enum assay_numerics_simd simd)
{
    switch (simd) {
    case ASSAY_NUMERICS_SIMD_BEST:
    case ASSAY_NUMERICS_SIMD_GENERIC:
        return true;
#if defined(__x86_64__) || defined(__i386__)
    case ASSAY_NUMERICS_SIMD_AVX2:
        return have_avx2_f16c();
    case ASSAY_NUMERICS_SIMD_AVX512:
        return have_avx2_f16c() && __builtin_cpu_supports("avx512f");
#endif
    default:
        return false;
    }
}

/* The fp16 sum of the lanes of the first np elements (np a positive
 * multiple of the lane count), with the vector units asked for (BEST: the
 * widest supported; an unsupported one: generic). */
static float sum_f16acc(const float *x, const float *y, int32_t np, enum assay_numerics_simd simd)
{
    float lanes[ASSAY_NUMERICS_F16ACC_LANES];
#if defined(__x86_64__) || defined(__i386__)
    /* The CPU's answer, asked once (CPUID traps to the hypervisor in a
     * virtual machine: too slow for every dot product); every thread
     * computes the same value, so a race only repeats the question. */
    static _Atomic int best = -1;
    int b = best;
    if (b < 0) {
        b = assay_numerics_simd_supported(ASSAY_NUMERICS_SIMD_AVX512)
                ? ASSAY_NUMERICS_SIMD_AVX512
            : assay_numerics_simd_supported(ASSAY_NUMERICS_SIMD_AVX2) ? ASSAY_NUMERICS_SIMD_AVX2
                                                                      : ASSAY_NUMERICS_SIMD_GENERIC;
        best = b;
    }
    if (simd == ASSAY_NUMERICS_SIMD_BEST || (int)simd > b) {
        simd = simd == ASSAY_NUMERICS_SIMD_BEST ? (enum assay_numerics_simd)b
                                                : ASSAY_NUMERICS_SIMD_GENERIC;
    }
    if (simd == ASSAY_NUMERICS_SIMD_AVX512) {
        return sum_f16acc_avx512(x, y, np);
    }
    if (simd == ASSAY_NUMERICS_SIMD_AVX2) {
        lanes_f16acc_avx2(lanes, x, y, np);
        return reduce_f16acc_avx2(lanes);
    }
#endif
    (void)simd;
    for (int32_t l = 0; l < ASSAY_NUMERICS_F16ACC_LANES; l++) {
        lanes[l] = 0.0f;
    }
    for (int32_t i = 0; i < np; i += ASSAY_NUMERICS_F16ACC_LANES) {
        for (int32_t l = 0; l < ASSAY_NUMERICS_F16ACC_LANES; l++) {
            lanes[l] = assay_numerics_f16acc_fma(lanes[l], x[i + l], y[i + l]);
        }
    }
    return assay_numerics_f16acc_reduce(lanes);
}

static float dot_f16acc(const float *x, const float *y, int32_t n, enum assay_numerics_simd simd)
{
    const int32_t np = n & ~(ASSAY_NUMERICS_F16ACC_LANES - 1);
    double sum = 0.0;
    if (np > 0) {
        sum = sum_f16acc(x, y, np, simd);
    }
    for (int32_t i = np; i < n; i++) {
        sum += (double)(x[i] * y[i]);
    }
    return (float)sum;
}

float assay_numerics_dot_f16acc(const float *x, const float *y, int32_t n)
{
    return dot_f16acc(x, y, n, ASSAY_NUMERICS_SIMD_BEST);
}

float assay_numerics_dot_f16acc_as(const float *x, const float *y, int32_t n,
                                   enum assay_numerics_simd simd)
{
    return dot_f16acc(x, y, n, simd);
}

/* ---- rows rounded to fp16 ---------------------------------------------- */

#if defined(__x86_64__) || defined(__i386__)
/* y[i] = round_f16(y[i] + x[i] * v) for the first n & ~7 elements: fused
 * (one rounding in fp32, as fmaf) or a product then a sum. */
__attribute__((target("avx2,fma,f16c"))) static void mad_round_avx2(float *y, const float *x,
                                                                   float v, int32_t n, bool fused)
{
    const __m256 vv = _mm256_set1_ps(v);
    for (int32_t i = 0; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(y + i), b = _mm256_loadu_ps(x + i);
        __m256 r = fused ? _mm256_fmadd_ps(b, vv, a) : _mm256_add_ps(a, _mm256_mul_ps(b, vv));
        _mm256_storeu_ps(y + i, round8_f16(r));
    }
}

/* y[i] = round_f16(x[i] * v) for the first n & ~7 elements (v 1: x itself). */
__attribute__((target("avx2,f16c"))) static void scale_round_avx2(float *y, const float *x,
                                                                 float v, int32_t n)
{
    const __m256 vv = _mm256_set1_ps(v);
    for (int32_t i = 0; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, round8_f16(_mm256_mul_ps(_mm256_loadu_ps(x + i), vv)));
    }
}
#endif

/* How many leading elements the F16C conversion rounds (the rest: the
 * generic loop); asked of the CPU once, as sum_f16acc does. The conversion
 * rounds to nearest even, as f16_bits does, so the bits are the same. */
static int32_t f16c_count(int32_t n)
{
#if defined(__x86_64__) || defined(__i386__)
    static _Atomic int have = -1;
    int h = have;
    if (h < 0) {
        h = have_avx2_f16c() ? 1 : 0;
        have = h;
    }
    return h ? n & ~7 : 0;
#else
    (void)n;
    return 0;
#endif
}

static void mad_round(float *y, const float *x, float v, int32_t n, bool fused)
{
    int32_t done = f16c_count(n);
#if defined(__x86_64__) || defined(__i386__)
    if (done > 0) {
        mad_round_avx2(y, x, v, done, fused);
    }
#endif
    for (int32_t i = done; i < n; i++) {
        y[i] = assay_numerics_round_f16(fused ? fmaf(x[i], v, y[i]) : y[i] + x[i] * v);
    }
}

static void scale_round(float *y, const float *x, float v, int32_t n)
{
    int32_t done = f16c_count(n);
#if defined(__x86_64__) || defined(__i386__)
    if (done > 0) {
        scale_round_avx2(y, x, v, done);
    }
#endif
    for (int32_t i = done; i < n; i++) {
        y[i] = assay_numerics_round_f16(x[i] * v);
    }
}

void assay_numerics_mad_round_f16(float *y, const float *x, float v, int32_t n)
{
    mad_round(y, x, v, n, false);
}

void assay_numerics_scale_round_f16(float *y, const float *x, float v, int32_t n)
{
    scale_round(y, x, v, n);
}

void assay_numerics_mad_f16acc(float *y, const float *x, float v, int32_t n)
{
    const int32_t np = n & ~(ASSAY_NUMERICS_F16ACC_LANES - 1);
    mad_round(y, x, assay_numerics_round_f16(v), np, true);
    mad_round(y + np, x + np, v, n - np, false);
}

void assay_numerics_scale_f16acc(float *y, float v, int32_t n)
{
    const int32_t np = n & ~(ASSAY_NUMERICS_F16ACC_LANES - 1);
    scale_round(y, y, assay_numerics_round_f16(v), np);
    scale_round(y + np, y + np, v, n - np);
}
