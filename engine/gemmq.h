/*
 * gemmq.h - the engine's product of few rows with its weights kept in
 * their file's integer format: the same bits as gemm.h, a third of the
 * bytes.
 *
 * A decode step of a few streams reads every weight once for all of
 * them, so its speed is the bytes a weight takes. A matrix stored as
 * Q4_0, Q8_0, Q4_K, Q5_K or Q6_K is kept here as its parts (dequant.h):
 * an int8 q per weight, a float step (and, for the K formats with mins,
 * a float offset) per group of 16 or 32 weights of a column: 10 to 12
 * bits a weight against the 32 of gemm.h's panels. The product decodes
 * each weight as the dequantizer does (step * q, less the offset, each
 * rounded) into a register and multiplies it in at once; every output
 * element is the same chain of fused multiply-adds over k in order as
 * gemm.h's AVX2 and AVX-512 tiles, on the same floats, so the result is
 * bit for bit the packed product's: a row computed in a small batch here
 * and in a large one there agree, as batch invariance asks. The generic
 * instruction set (unfused) has no such kernel; its engine keeps to
 * gemm.h.
 *
 * Layout: block-panels of ASSAY_GEMMQ_COLS columns (the last padded with
 * zero columns); each holds k / group groups in k order, a group being
 * step[64] floats, offset[64] floats (only when the layout has offsets),
 * then q[group][64] bytes (row i of the group: column 0..63's q).
 */
#ifndef ASSAY_GEMMQ_H
#define ASSAY_GEMMQ_H

#include <stdbool.h>
#include <stdint.h>

#include "isa.h"

#define ASSAY_GEMMQ_COLS 64

struct assay_gemmq_layout {
    int32_t k, n;
    int32_t group; /* 16 or 32; divides k */
    bool offset;   /* whether groups hold offsets (else every offset is 0) */
};

/* Whether the kernel exists for isa (resolved): AVX2 and AVX-512. */
bool assay_gemmq_supported(enum assay_isa isa);

/* The most rows for which this product beats gemm.h's on the same matrix
 * (0 where unsupported): it decodes each weight once per pass of rows,
 * gemm.h reads four bytes a weight once for all rows, so few rows favour
 * this one and many the other. Measured on a 768 x 3072 matrix out of
 * cache, on one AVX-512 machine, 2026-12-06
 * (docs/measurements/2026-12-06-bench-integer-weights.md): AVX-512 16
 * (1.1 to 3.8 times as fast from 1 to 16 rows, even at 24), AVX2 2, its
 * kernel's pass (1.5 times at 1 and 2 rows; 0.9 to 1.8 at 3 and 4 from
 * run to run, 0.85 at 8). Which one runs changes no bit. */
int32_t assay_gemmq_max_rows(enum assay_isa isa);

/* Block-panels of an n-column matrix. */
int32_t assay_gemmq_panels(int32_t n);

/* Bytes of a matrix in the layout; 64 times a whole number. */
int64_t assay_gemmq_bytes(const struct assay_gemmq_layout *l);

/*
 * Write column col of the matrix at `packed` (zeroed first, 64-byte
 * aligned) from its parts: q[0..k), step and offset[0..k / 16)
 * (dequant.h's groups of 16). false, writing nothing, when the parts do
 * not fit the layout: with group 32, two halves of a group whose step or
 * offset differ in a bit; without offsets, an offset that is not +0.
 */
bool assay_gemmq_pack(uint8_t *packed, const struct assay_gemmq_layout *l, int32_t col,
                      const int8_t *q, const float *step, const float *offset);

/* Column col's k floats as the product decodes them. */
void assay_gemmq_unpack(const uint8_t *packed, const struct assay_gemmq_layout *l, int32_t col,
                        float *out);

/* One product: C (m rows of ldc) = A (m rows of lda, k used) times the
 * matrix (added to C with one rounding when accumulate). */
struct assay_gemmq {
    const float *a;
    int32_t lda;
    int32_t m;
    struct assay_gemmq_layout l;
    const uint8_t *w; /* packed by assay_gemmq_pack */
    float *c;
    int32_t ldc;
    bool accumulate;
    enum assay_isa isa; /* resolved; assay_gemmq_supported */
};

/* Compute block-panels [p0, p1) (columns 64 p0 up to min(64 p1, n)). Two
 * threads may run disjoint ranges of one product at once. */
void assay_gemmq_run(const struct assay_gemmq *g, int32_t p0, int32_t p1);

#endif
