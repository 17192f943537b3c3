/*
 * gemm.h - the engine's own matrix product, batch-invariant by construction.
 *
 * C (m, n) = A (m, k) * W (k, n), or C += A * W, where W is a weight matrix
 * packed once at start-up into panels of ASSAY_GEMM_PANEL columns (panel p
 * holds columns [32p, 32p + 32) as k rows of 32 floats, the columns past n
 * zero). Every output element is one chain of multiply-adds over k in
 * order 0, 1, ..., k-1 from zero, then stored (or added to C with one
 * rounding): c[i][j] = (...((0 + a[i][0] w[0][j]) + a[i][1] w[1][j]) ...).
 * No split of k, no tile size or kernel chosen by the shape: how many rows
 * the product has, which tile a row falls in, which panels a thread takes
 * and how many threads there are change nothing in any element's bits.
 * The one thing that does is the instruction set (isa.h): avx2 and avx512
 * fuse each multiply-add (one rounding), generic rounds the product and
 * the sum; an engine uses one of them for all its products.
 *
 * Speed comes from the packing (each panel streams contiguously), register
 * tiles (up to 6 rows by 2 panels with AVX-512, 3 by 1 with AVX2) and, for
 * a single row, four panels at once so the chains of four panels hide the
 * multiply-add latency. suites/bench_engine measures it against OpenBLAS.
 */
#ifndef ASSAY_GEMM_H
#define ASSAY_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "isa.h"

#define ASSAY_GEMM_PANEL 32

/* Panels of an n-column matrix. */
int32_t assay_gemm_panels(int32_t n);

/* Floats of a packed (k, n) matrix: panels * k * 32. */
int64_t assay_gemm_packed_floats(int32_t k, int32_t n);

/*
 * Write columns [col0, col0 + cols) of the packed (k, n) matrix from
 * `rows`, which holds those columns as `cols` rows of k floats (the [out][in]
 * layout of GGUF: row c is column col0 + c). `packed` must be zeroed first
 * (the padding columns stay 0); several calls fill disjoint columns.
 */
void assay_gemm_pack(float *packed, int32_t k, int32_t n, int32_t col0, int32_t cols,
                     const float *rows);

/* One product: C (m rows of ldc) = A (m rows of lda, k used) times the
 * packed W (k, n); accumulate adds the product to C instead. */
struct assay_gemm {
    const float *a;
    int32_t lda;
    int32_t m, k, n;
    const float *w; /* packed by assay_gemm_pack; 64-byte aligned */
    float *c;
    int32_t ldc;
    bool accumulate;
    enum assay_isa isa; /* resolved (not AUTO); must be supported */
    int mutant;         /* enum assay_mutant; 0 */
};

/*
 * Compute panels [p0, p1) of the product (columns 32 p0 up to
 * min(32 p1, n)) for all m rows. Two threads may run disjoint panel ranges
 * of one product at once. Allocates nothing.
 */
void assay_gemm_run(const struct assay_gemm *g, int32_t p0, int32_t p1);

#endif
