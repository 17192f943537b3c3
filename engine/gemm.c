/*
 * gemm.c - the engine's fixed-order matrix product (gemm.h): assay_gemm_pack
 * packs a weight matrix into panels once at start-up, and assay_gemm_run
 * computes a range of panels for a batch of rows with the generic, AVX2 or
 * AVX-512 tiles, each element one multiply-add chain in k order, so its
 * bits never depend on the batch. The forward pass (forward.c) calls it for
 * its products, splitting the panels between its two threads.
 */
#include "gemm.h"

#include <assert.h>
#include <string.h>

#include "../core/mutant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GEMM_X86 1
#else
#define GEMM_X86 0
#endif

/* This file is compiled with -ffp-contract=off (CMakeLists.txt): a
 * multiply-add is fused where an intrinsic says so and nowhere else, so the
 * generic variant's products are rounded before they are added whatever
 * the compiler would like. */

#define PANEL ASSAY_GEMM_PANEL
#define MAX_MR 6 /* rows of a register tile */
#define MAX_NP 4 /* panels of a register tile */

int32_t assay_gemm_panels(int32_t n)
{
    return (n + PANEL - 1) / PANEL;
}

int64_t assay_gemm_packed_floats(int32_t k, int32_t n)
{
    return (int64_t)assay_gemm_panels(n) * k * PANEL;
}

void assay_gemm_pack(float *packed, int32_t k, int32_t n, int32_t col0, int32_t cols,
                     const float *rows)
{
    assert(col0 >= 0 && cols >= 0 && col0 + cols <= n);
    (void)n; /* read by the assertion alone */
    for (int32_t c = 0; c < cols; c++) {
        int32_t col = col0 + c;
        float *dst = packed + (int64_t)(col / PANEL) * k * PANEL + col % PANEL;
        const float *src = rows + (int64_t)c * k;
        for (int32_t i = 0; i < k; i++) {
            dst[(int64_t)i * PANEL] = src[i];
        }
    }
}

/*
 * Write a computed tile (mr rows of np panels, in `tile` as mr rows of
 * np * 32 floats) into C: the columns that exist, stored or added with one
 * rounding each. The same plain code for every variant.
 */
static void store_tile(const struct assay_gemm *g, int32_t r0, int32_t mr, int32_t p0, int32_t np,
                       const float *tile)
{
    int32_t c0 = p0 * PANEL;
    int32_t c1 = (p0 + np) * PANEL < g->n ? (p0 + np) * PANEL : g->n;
    for (int32_t r = 0; r < mr; r++) {
        float *c = g->c + (int64_t)(r0 + r) * g->ldc + c0;
        const float *t = tile + (int64_t)r * np * PANEL;
        if (g->accumulate) {
            for (int32_t j = 0; j < c1 - c0; j++) {
                c[j] = c[j] + t[j];
            }
        } else {
            memcpy(c, t, sizeof(float) * (size_t)(c1 - c0));
        }
    }
}

/* --- generic: 4-wide vectors of the compiler's own, multiply then add --- */

typedef float v4f __attribute__((vector_size(16)));

/* One row by one panel: eight 4-wide chains. */
static void tile_generic(const struct assay_gemm *g, int32_t r0, int32_t p, float *tile)
{
    const float *a = g->a + (int64_t)r0 * g->lda;
    const float *w = g->w + (int64_t)p * g->k * PANEL;
    v4f acc[8];
    memset(acc, 0, sizeof acc);
    for (int32_t i = 0; i < g->k; i++) {
        v4f x = {a[i], a[i], a[i], a[i]};
        for (int j = 0; j < 8; j++) {
            v4f y;
            memcpy(&y, w + (int64_t)i * PANEL + 4 * j, sizeof y);
            acc[j] += x * y;
        }
    }
    memcpy(tile, acc, sizeof acc);
}

static void run_generic(const struct assay_gemm *g, int32_t p0, int32_t p1, float *tile)
{
    for (int32_t p = p0; p < p1; p++) {
        for (int32_t r = 0; r < g->m; r++) {
            tile_generic(g, r, p, tile);
            store_tile(g, r, 1, p, 1, tile);
        }
    }
}

#if GEMM_X86

/* --- avx2: 8-wide, fused multiply-add --- */

/* mr rows by np panels (4 vectors a panel); mr * np * 4 chains. */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
tile_avx2(const struct assay_gemm *g, int32_t r0, int32_t p0, float *tile, const int mr,
          const int np)
{
    const float *a = g->a + (int64_t)r0 * g->lda;
    const float *w = g->w + (int64_t)p0 * g->k * PANEL;
    const int64_t pstride = (int64_t)g->k * PANEL;
    __m256 acc[3][8];
    for (int r = 0; r < mr; r++) {
        for (int j = 0; j < np * 4; j++) {
            acc[r][j] = _mm256_setzero_ps();
        }
    }
    for (int32_t i = 0; i < g->k; i++) {
        __m256 b[8];
        for (int j = 0; j < np * 4; j++) {
            b[j] = _mm256_load_ps(w + (j / 4) * pstride + (int64_t)i * PANEL + (j % 4) * 8);
        }
        for (int r = 0; r < mr; r++) {
            __m256 x = _mm256_broadcast_ss(a + (int64_t)r * g->lda + i);
            for (int j = 0; j < np * 4; j++) {
                acc[r][j] = _mm256_fmadd_ps(x, b[j], acc[r][j]);
            }
        }
    }
    for (int r = 0; r < mr; r++) {
        for (int j = 0; j < np * 4; j++) {
            _mm256_storeu_ps(tile + (int64_t)r * np * PANEL + j * 8, acc[r][j]);
        }
    }
}

#ifdef ASSAY_MUTANTS
/* The planted bug gemm-tail-split-k: a tail tile of two rows, to hide the
 * multiply-add latency with more chains, sums even and odd k apart and
 * adds the two at the end: another order, for the rows that land there. */
__attribute__((target("avx2,fma"))) static void tile_avx2_split_k(const struct assay_gemm *g,
                                                                  int32_t r0, int32_t p0,
                                                                  float *tile)
{
    const float *a = g->a + (int64_t)r0 * g->lda;
    const float *w = g->w + (int64_t)p0 * g->k * PANEL;
    __m256 even[2][4], odd[2][4];
    for (int r = 0; r < 2; r++) {
        for (int j = 0; j < 4; j++) {
            even[r][j] = odd[r][j] = _mm256_setzero_ps();
        }
    }
    for (int32_t i = 0; i < g->k; i++) {
        for (int r = 0; r < 2; r++) {
            __m256 x = _mm256_broadcast_ss(a + (int64_t)r * g->lda + i);
            for (int j = 0; j < 4; j++) {
                __m256 b = _mm256_load_ps(w + (int64_t)i * PANEL + j * 8);
                if (i % 2 == 0) {
                    even[r][j] = _mm256_fmadd_ps(x, b, even[r][j]);
                } else {
                    odd[r][j] = _mm256_fmadd_ps(x, b, odd[r][j]);
                }
            }
        }
    }
    for (int r = 0; r < 2; r++) {
        for (int j = 0; j < 4; j++) {
            _mm256_storeu_ps(tile + (int64_t)r * PANEL + j * 8, _mm256_add_ps(even[r][j], odd[r][j]));
        }
    }
}
#endif

__attribute__((target("avx2,fma"))) static void run_avx2(const struct assay_gemm *g, int32_t p0,
                                                         int32_t p1, float *tile)
{
    if (g->m == 1) {
        /* one row: two panels at a time, eight chains */
        for (int32_t p = p0; p < p1; p += 2) {
            if (p + 2 <= p1) {
                tile_avx2(g, 0, p, tile, 1, 2);
                store_tile(g, 0, 1, p, 2, tile);
            } else {
                tile_avx2(g, 0, p, tile, 1, 1);
                store_tile(g, 0, 1, p, 1, tile);
            }
        }
        return;
    }
    for (int32_t p = p0; p < p1; p++) {
        for (int32_t r = 0; r < g->m; r += 3) {
            int32_t mr = g->m - r < 3 ? g->m - r : 3;
            switch (mr) {
            case 3:
                tile_avx2(g, r, p, tile, 3, 1);
                break;
            case 2:
#ifdef ASSAY_MUTANTS
                if (ASSAY_MUTANT_ON(g->mutant, ASSAY_MUTANT_GEMM_TAIL_SPLIT_K)) {
                    tile_avx2_split_k(g, r, p, tile);
                    break;
                }
#endif
                tile_avx2(g, r, p, tile, 2, 1);
                break;
            default:
                tile_avx2(g, r, p, tile, 1, 1);
                break;
            }
            store_tile(g, r, mr, p, 1, tile);
        }
    }
}

/* --- avx512: 16-wide, fused multiply-add --- */

/* mr rows by np panels (2 vectors a panel); mr * np * 2 chains. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
tile_avx512(const struct assay_gemm *g, int32_t r0, int32_t p0, float *tile, const int mr,
            const int np)
{
    const float *a = g->a + (int64_t)r0 * g->lda;
    const float *w = g->w + (int64_t)p0 * g->k * PANEL;
    const int64_t pstride = (int64_t)g->k * PANEL;
    __m512 acc[MAX_MR][2 * MAX_NP];
    for (int r = 0; r < mr; r++) {
        for (int j = 0; j < np * 2; j++) {
            acc[r][j] = _mm512_setzero_ps();
        }
    }
    for (int32_t i = 0; i < g->k; i++) {
        __m512 b[2 * MAX_NP];
        for (int j = 0; j < np * 2; j++) {
            b[j] = _mm512_load_ps(w + (j / 2) * pstride + (int64_t)i * PANEL + (j % 2) * 16);
        }
        for (int r = 0; r < mr; r++) {
            __m512 x = _mm512_set1_ps(a[(int64_t)r * g->lda + i]);
            for (int j = 0; j < np * 2; j++) {
                acc[r][j] = _mm512_fmadd_ps(x, b[j], acc[r][j]);
            }
        }
    }
    for (int r = 0; r < mr; r++) {
        for (int j = 0; j < np * 2; j++) {
            _mm512_storeu_ps(tile + (int64_t)r * np * PANEL + j * 16, acc[r][j]);
        }
    }
}

__attribute__((target("avx512f"))) static void run_avx512(const struct assay_gemm *g, int32_t p0,
                                                          int32_t p1, float *tile)
{
    if (g->m == 1) {
        /* one row: four panels at a time, eight chains */
        for (int32_t p = p0; p < p1; p += 4) {
            int32_t np = p1 - p < 4 ? p1 - p : 4;
            switch (np) {
            case 4:
                tile_avx512(g, 0, p, tile, 1, 4);
                break;
            case 3:
                tile_avx512(g, 0, p, tile, 1, 3);
                break;
            case 2:
                tile_avx512(g, 0, p, tile, 1, 2);
                break;
            default:
                tile_avx512(g, 0, p, tile, 1, 1);
                break;
            }
            store_tile(g, 0, 1, p, np, tile);
        }
        return;
    }
    for (int32_t p = p0; p < p1; p += 2) {
        int32_t np = p1 - p < 2 ? p1 - p : 2;
        for (int32_t r = 0; r < g->m; r += MAX_MR) {
            int32_t mr = g->m - r < MAX_MR ? g->m - r : MAX_MR;
            /* every (rows, panels) shape of a tile, each with its chains in registers */
            switch (mr * 4 + np) {
            case 6 * 4 + 2: tile_avx512(g, r, p, tile, 6, 2); break;
            case 5 * 4 + 2: tile_avx512(g, r, p, tile, 5, 2); break;
            case 4 * 4 + 2: tile_avx512(g, r, p, tile, 4, 2); break;
            case 3 * 4 + 2: tile_avx512(g, r, p, tile, 3, 2); break;
            case 2 * 4 + 2: tile_avx512(g, r, p, tile, 2, 2); break;
            case 1 * 4 + 2: tile_avx512(g, r, p, tile, 1, 2); break;
            case 6 * 4 + 1: tile_avx512(g, r, p, tile, 6, 1); break;
            case 5 * 4 + 1: tile_avx512(g, r, p, tile, 5, 1); break;
            case 4 * 4 + 1: tile_avx512(g, r, p, tile, 4, 1); break;
            case 3 * 4 + 1: tile_avx512(g, r, p, tile, 3, 1); break;
            case 2 * 4 + 1: tile_avx512(g, r, p, tile, 2, 1); break;
            default: tile_avx512(g, r, p, tile, 1, 1); break;
            }
            store_tile(g, r, mr, p, np, tile);
        }
    }
}

#endif /* GEMM_X86 */

void assay_gemm_run(const struct assay_gemm *g, int32_t p0, int32_t p1)
{
    float tile[MAX_MR * MAX_NP * PANEL] __attribute__((aligned(64)));
    if (g->m < 1 || p0 >= p1) {
        return;
    }
    switch (g->isa) {
#if GEMM_X86
    case ASSAY_ISA_AVX512:
        run_avx512(g, p0, p1, tile);
        return;
    case ASSAY_ISA_AVX2:
        run_avx2(g, p0, p1, tile);
        return;
#endif
    default:
        run_generic(g, p0, p1, tile);
        return;
    }
}
