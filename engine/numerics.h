/*
 * numerics.h - the roundings ggml's CPU backend applies to the values its
 * products read, so that the engine can compute what a correct llama.cpp
 * computes rather than what exact arithmetic gives.
 *
 * ggml multiplies a weight matrix by activations after converting the
 * activation rows to the weight type's "vec_dot_type": F16 weights read
 * fp16 activations, BF16 weights bf16 ones, Q4_0, Q5_0 and Q8_0 weights
 * Q8_0 blocks, the K-quants (Q2_K..Q6_K) Q8_K blocks; F32 weights read the
 * floats as they are. Each function below rounds a row of floats in place
 * to the values such a conversion leaves (quantize, then dequantize), so a
 * float product of the rounded row with the weights is the product ggml
 * takes, up to the order of its sums.
 *
 *   enum assay_act_format fmt;
 *   if (assay_numerics_act_format(ASSAY_GGML_TYPE_Q4_K, &fmt) == ASSAY_OK)
 *       assay_numerics_round_row(fmt, row, n, ASSAY_MUTANT_NONE);
 *
 * The formats, as ggml's x86 CPU code computes them:
 *   F16   IEEE binary16, round to nearest even (F16C's _cvtss_sh and
 *         ggml's software conversion agree); beyond 65504 to infinity.
 *   BF16  the top 16 bits after adding 0x7fff plus the lowest kept bit
 *         (round to nearest even); a NaN stays a NaN.
 *   Q8_0  blocks of 32: amax the largest |x|, d = amax / 127 stored as
 *         fp16, q = x * (127 / amax) rounded to nearest even (the AVX
 *         path's _mm256_round_ps); the value read is fp16(d) * q. An
 *         all-zero block reads as zeros.
 *   Q8_K  blocks of 256: max the element of largest magnitude, with its
 *         sign (the first of equal magnitudes); iscale = -127 / max,
 *         q = min(127, nearest_int(iscale * x)) (round to nearest even
 *         through the 1.5 * 2^23 trick), d = 1 / iscale kept as a float;
 *         the value read is d * q. An all-zero block reads as zeros.
 *
 * Nothing here allocates. Rows of Q8_0 and Q8_K must hold whole blocks.
 */
#ifndef ASSAY_NUMERICS_H
#define ASSAY_NUMERICS_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/status.h"

/* The arithmetic of the engine's activations before each product. */
enum assay_act_mode {
    ASSAY_ACT_MODE_EXACT = 0, /* the floats as computed */
    ASSAY_ACT_MODE_GGML = 1,  /* rounded as ggml's CPU backend rounds them */
};

/* How the KV store holds keys and values. */
enum assay_kv_type {
    ASSAY_KV_TYPE_F32 = 0,
    ASSAY_KV_TYPE_F16 = 1, /* rounded to fp16 (round to nearest even) when stored */
};

/* The format a product's activations are rounded to. */
enum assay_act_format {
    ASSAY_ACT_FORMAT_F32 = 0, /* unchanged */
    ASSAY_ACT_FORMAT_F16,
    ASSAY_ACT_FORMAT_BF16,
    ASSAY_ACT_FORMAT_Q8_0,
    ASSAY_ACT_FORMAT_Q8_K,
};

#define ASSAY_NUMERICS_QK8_0 32
#define ASSAY_NUMERICS_QK_K 256

/* "exact"/"ggml", "f32"/"f16", "F32".."Q8_K": static names, "?" out of range. */
const char *assay_numerics_mode_name(enum assay_act_mode mode);
const char *assay_numerics_kv_name(enum assay_kv_type type);
const char *assay_numerics_format_name(enum assay_act_format fmt);

/* Elements per block of a format (1 for F32, F16 and BF16). */
int32_t assay_numerics_format_block(enum assay_act_format fmt);

/*
 * The activation format ggml's CPU backend converts a product's input to
 * when the weights are of ggml type ggml_type (its vec_dot_type). Returns
 * ASSAY_OK; ASSAY_ERR_UNSUPPORTED for a type whose format is not emulated
 * here (Q4_1 and Q5_1, whose Q8_1 keeps a block sum, and every type this
 * module does not know); *out is then untouched.
 */
enum assay_status assay_numerics_act_format(uint32_t ggml_type, enum assay_act_format *out);

/* The binary16 bits nearest x (ties to even, overflow to infinity), as
 * ggml's fp32-to-fp16 conversion and an F16 GGUF tensor store it. */
uint16_t assay_numerics_f16_bits(float x);

/* x rounded to fp16 and widened back (exact); bf16 likewise. */
float assay_numerics_round_f16(float x);
float assay_numerics_round_bf16(float x);

/*
 * Round x[0..n) in place to the values ggml's products read from its
 * conversion to fmt. ASSAY_ERR_INVALID (x unchanged) when n is negative or
 * not a multiple of the format's block. `mutant` selects the planted bug
 * q8-block-scale (core/mutant.h); ASSAY_MUTANT_NONE otherwise.
 */
enum assay_status assay_numerics_round_row(enum assay_act_format fmt, float *x, int32_t n,
                                           int mutant);

/*
 * Round n_rows rows of n floats, ld apart, each as assay_numerics_round_row
 * does. The planted bug q8-block-offset (a quantized row stride one block
 * short) is applied here, since it mixes rows: every row but the first
 * then reads its first block from the end of the row before. Status as
 * assay_numerics_round_row.
 */
enum assay_status assay_numerics_round_rows(enum assay_act_format fmt, float *x, int32_t n_rows,
                                            int32_t n, int64_t ld, int mutant);

/*
 * fp16 accumulation. ggml built for a CPU with AVX512-FP16 (Intel Sapphire
 * Rapids and later, with GGML_NATIVE) computes its fp16 vector helpers in
 * fp16 arithmetic, where other builds widen to fp32 lanes:
 *   ggml_vec_dot_f16  128 fp16 accumulators (four vectors of 32 lanes),
 *                     element i feeding lane i mod 128 with one fused
 *                     multiply-add rounded to fp16; the lanes summed in
 *                     fp16 as assay_numerics_f16acc_reduce says; the
 *                     n mod 128 last elements added in double to that sum.
 *                     It is the dot product of a product with F16 weights
 *                     and one input row (a decode step of one sequence:
 *                     with two rows or more ggml takes its tinyBLAS path,
 *                     fp32 lanes), and of flash attention's query with an
 *                     F16 key.
 *   ggml_vec_mad_f16  y[i] += x[i] * v as one fused multiply-add rounded
 *                     to fp16, with v first rounded to fp16, for the first
 *                     n - n mod 128 elements; the rest in fp32 (flash
 *                     attention's accumulation of F16 values).
 *   ggml_vec_scale_f16  y[i] *= v likewise, v rounded to fp16.
 * The emulation rounds each fused multiply-add to fp32 before fp16 (the
 * products of fp16 values are exact in fp32; the two roundings differ
 * from one only where the fp32 sum lands on an fp16 tie), and reduces the
 * lanes in the order GCC's _mm512_reduce_add_ph does. Values are fp16
 * values held in floats.
 */
#define ASSAY_NUMERICS_F16ACC_LANES 128

/* One lane's step: round_f16(x * y + acc) (through fp32, as above). */
float assay_numerics_f16acc_fma(float acc, float x, float y);

/* The fp16 sum of 128 lanes (destroys lanes). */
float assay_numerics_f16acc_reduce(float lanes[ASSAY_NUMERICS_F16ACC_LANES]);

/* Which vector units compute the lanes; every choice gives the same bits. */
enum assay_numerics_simd {
    ASSAY_NUMERICS_SIMD_BEST = 0, /* the widest this CPU runs */
    ASSAY_NUMERICS_SIMD_GENERIC,  /* plain C */
    ASSAY_NUMERICS_SIMD_AVX2,     /* AVX2, FMA and F16C: 8 lanes at a time */
    ASSAY_NUMERICS_SIMD_AVX512,   /* AVX-512F: 16 lanes at a time */
};

/* Whether this CPU runs simd (BEST and GENERIC: always). */
bool assay_numerics_simd_supported(enum assay_numerics_simd simd);

/* ggml_vec_dot_f16 of x[0..n) and y[0..n) as above, with the widest vector
 * units the CPU has; the _as form with those asked for (generic where the
 * CPU lacks them), for tests. */
float assay_numerics_dot_f16acc(const float *x, const float *y, int32_t n);
float assay_numerics_dot_f16acc_as(const float *x, const float *y, int32_t n,
                                   enum assay_numerics_simd simd);

/* y[i] = round_f16(y[i] + x[i] * v), a product and a sum in fp32 (flash
 * attention's fp16 accumulator in a build with fp32 lanes), and
 * y[i] = round_f16(x[i] * v) (y may be x; v 1: x rounded), for i < n: the
 * values assay_numerics_round_f16 gives element by element, computed eight
 * at a time where the CPU converts to fp16 itself (F16C). */
void assay_numerics_mad_round_f16(float *y, const float *x, float v, int32_t n);
void assay_numerics_scale_round_f16(float *y, const float *x, float v, int32_t n);

/* ggml_vec_mad_f16 and ggml_vec_scale_f16 on y[0..n) in place, as above. */
void assay_numerics_mad_f16acc(float *y, const float *x, float v, int32_t n);
void assay_numerics_scale_f16acc(float *y, float v, int32_t n);

#endif
