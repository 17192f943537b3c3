/*
 * gemmq.c - the product of few rows on weights kept as integer parts
 * (gemmq.h): packing a column's parts into block-panels, decoding them
 * back, and the AVX2 and AVX-512 kernels, which decode each weight into a
 * register exactly as assay_dequant_combine does and fuse it into the
 * same multiply-add chain as gemm.c's tiles. The forward pass
 * (forward.c) takes it for products of few rows of matrices it could keep
 * so (forward_init.c checks every decoded weight against the model's).
 */
#include "gemmq.h"

#include <assert.h>
#include <string.h>

#include "dequant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GEMMQ_X86 1
#else
#define GEMMQ_X86 0
#endif

/* This file is compiled with -ffp-contract=off (CMakeLists.txt): the
 * decode's product and difference are rounded apart, as the
 * dequantizer's are. */

#define COLS ASSAY_GEMMQ_COLS
/* Rows a kernel's pass decodes a weight once for (what its registers
 * hold); a product of more rows decodes each block-panel again per pass,
 * from cache. */
#define AVX512_ROWS 4
#define AVX2_ROWS 2
#define PARTS_GROUP ASSAY_DEQUANT_GROUP /* the groups parts come in */
/* Groups ahead whose lines a kernel asks for as it starts a group: the
 * decode keeps the core busy enough that the hardware prefetcher alone
 * leaves the loads waiting (measured: 15-20% faster on a matrix four times
 * the last-level cache). A hint: it changes no value. */
#define PREFETCH_GROUPS 4

bool assay_gemmq_supported(enum assay_isa isa)
{
    return GEMMQ_X86 && (isa == ASSAY_ISA_AVX2 || isa == ASSAY_ISA_AVX512);
}

int32_t assay_gemmq_max_rows(enum assay_isa isa)
{
    return !assay_gemmq_supported(isa) ? 0 : isa == ASSAY_ISA_AVX512 ? 16 : AVX2_ROWS;
}

int32_t assay_gemmq_panels(int32_t n)
{
    return (n + COLS - 1) / COLS;
}

/* Bytes of a group's steps and offsets: where its q start. */
static int64_t scales_bytes(const struct assay_gemmq_layout *l)
{
    return (int64_t)COLS * (int64_t)sizeof(float) * (l->offset ? 2 : 1);
}

/* Bytes of one group of a block-panel. */
static int64_t group_bytes(const struct assay_gemmq_layout *l)
{
    return scales_bytes(l) + (int64_t)l->group * COLS;
}

static int64_t panel_bytes(const struct assay_gemmq_layout *l)
{
    return (int64_t)(l->k / l->group) * group_bytes(l);
}

int64_t assay_gemmq_bytes(const struct assay_gemmq_layout *l)
{
    return assay_gemmq_panels(l->n) * panel_bytes(l);
}

static bool same_bits(float x, float y)
{
    return memcmp(&x, &y, sizeof x) == 0;
}

bool assay_gemmq_pack(uint8_t *packed, const struct assay_gemmq_layout *l, int32_t col,
                      const int8_t *q, const float *step, const float *offset)
{
    assert(col >= 0 && col < l->n && l->k % l->group == 0);
    const int32_t per = l->group / PARTS_GROUP; /* groups of 16 in one of the layout's */
    for (int32_t g = 0; g < l->k / PARTS_GROUP; g++) {
        if (!same_bits(step[g], step[g - g % per]) || !same_bits(offset[g], offset[g - g % per]) ||
            (!l->offset && !same_bits(offset[g], 0.0f))) {
            return false;
        }
    }
    uint8_t *panel = packed + (int64_t)(col / COLS) * panel_bytes(l);
    const int32_t j = col % COLS;
    for (int32_t g = 0; g < l->k / l->group; g++) {
        uint8_t *grp = panel + g * group_bytes(l);
        float *steps = (float *)grp;
        steps[j] = step[g * per];
        if (l->offset) {
            steps[COLS + j] = offset[g * per];
        }
        int8_t *qs = (int8_t *)(grp + scales_bytes(l));
        for (int32_t i = 0; i < l->group; i++) {
            qs[i * COLS + j] = q[(int64_t)g * l->group + i];
        }
    }
    return true;
}

void assay_gemmq_unpack(const uint8_t *packed, const struct assay_gemmq_layout *l, int32_t col,
                        float *out)
{
    const uint8_t *panel = packed + (int64_t)(col / COLS) * panel_bytes(l);
    const int32_t j = col % COLS;
    for (int32_t g = 0; g < l->k / l->group; g++) {
        const uint8_t *grp = panel + g * group_bytes(l);
        const float *steps = (const float *)grp;
        const int8_t *qs = (const int8_t *)(grp + scales_bytes(l));
        for (int32_t i = 0; i < l->group; i++) {
            float w = steps[j] * (float)qs[i * COLS + j];
            if (l->offset) {
                w = w - steps[COLS + j];
            }
            out[(int64_t)g * l->group + i] = w;
        }
    }
}

/* Write rows r0.. of a computed block-panel (64 floats a row in tile)
 * into C: the columns that exist, stored or added with one rounding each,
 * as gemm.c does. */
static void store_panel(const struct assay_gemmq *g, int32_t p, int32_t r0, int rows,
                        const float *tile)
{
    int32_t c0 = p * COLS;
    int32_t c1 = c0 + COLS < g->l.n ? c0 + COLS : g->l.n;
    for (int r = 0; r < rows; r++) {
        float *c = g->c + (int64_t)(r0 + r) * g->ldc + c0;
        const float *t = tile + r * COLS;
        if (g->accumulate) {
            for (int32_t j = 0; j < c1 - c0; j++) {
                c[j] = c[j] + t[j];
            }
        } else {
            memcpy(c, t, sizeof(float) * (size_t)(c1 - c0));
        }
    }
}

/* The kernels below are instantiated per group size, offsets or not and
 * rows a pass, all compile-time constants: KERNEL_CASES(f, l, rows, R)
 * calls f(group, off, rows) for the one that fits, R being KERNEL_ROWS4
 * (1 to 4 rows) or KERNEL_ROWS2 (1 or 2). */
#define KERNEL_ROWS4(f, group, off, rows)                                                          \
    switch (rows) {                                                                                \
    case 1: f(group, off, 1); break;                                                               \
    case 2: f(group, off, 2); break;                                                               \
    case 3: f(group, off, 3); break;                                                               \
    default: f(group, off, 4); break;                                                              \
    }
#define KERNEL_ROWS2(f, group, off, rows)                                                          \
    if ((rows) == 1) {                                                                             \
        f(group, off, 1);                                                                          \
    } else {                                                                                       \
        f(group, off, 2);                                                                          \
    }
#define KERNEL_CASES(f, l, rows, R)                                                                \
    switch ((l)->group * 2 + (l)->offset) {                                                        \
    case 32: R(f, 16, 0, rows); break;                                                             \
    case 33: R(f, 16, 1, rows); break;                                                             \
    case 64: R(f, 32, 0, rows); break;                                                             \
    default: R(f, 32, 1, rows); break;                                                             \
    }

#if GEMMQ_X86

/* --- avx512: four 16-wide chains a row of a block-panel --- */

__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
panel_avx512(const float *a, int64_t lda, const uint8_t *panel, int32_t k, float *tile,
             const int group, const int off, const int rows)
{
    const int64_t gb = (int64_t)COLS * 4 * (1 + off) + (int64_t)group * COLS;
    __m512 acc[AVX512_ROWS][4];
    for (int r = 0; r < rows; r++) {
        for (int j = 0; j < 4; j++) {
            acc[r][j] = _mm512_setzero_ps();
        }
    }
    for (int32_t g = 0; g < k / group; g++) {
        const uint8_t *grp = panel + g * gb;
        const int8_t *qs = (const int8_t *)(grp + COLS * 4 * (1 + off));
        for (int64_t line = 0; line < gb; line += 64) {
            _mm_prefetch((const char *)grp + PREFETCH_GROUPS * gb + line, _MM_HINT_T0);
        }
        __m512 st[4], of[4];
        for (int j = 0; j < 4; j++) {
            st[j] = _mm512_load_ps((const float *)grp + 16 * j);
            of[j] = off ? _mm512_load_ps((const float *)grp + COLS + 16 * j) : _mm512_setzero_ps();
        }
        for (int i = 0; i < group; i++) {
            __m512 w[4];
            for (int j = 0; j < 4; j++) {
                __m128i q8 = _mm_load_si128((const __m128i *)(qs + i * COLS + 16 * j));
                w[j] = _mm512_mul_ps(st[j], _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q8)));
                if (off) {
                    w[j] = _mm512_sub_ps(w[j], of[j]);
                }
            }
            for (int r = 0; r < rows; r++) {
                __m512 x = _mm512_set1_ps(a[r * lda + g * group + i]);
                for (int j = 0; j < 4; j++) {
                    acc[r][j] = _mm512_fmadd_ps(x, w[j], acc[r][j]);
                }
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        for (int j = 0; j < 4; j++) {
            _mm512_storeu_ps(tile + r * COLS + 16 * j, acc[r][j]);
        }
    }
}

__attribute__((target("avx512f"))) static void run_avx512(const struct assay_gemmq *g, int32_t p0,
                                                          int32_t p1, float *tile)
{
    const int64_t pb = panel_bytes(&g->l);
    for (int32_t p = p0; p < p1; p++) {
        const uint8_t *panel = g->w + p * pb;
        for (int32_t r0 = 0; r0 < g->m; r0 += AVX512_ROWS) {
            const float *a = g->a + (int64_t)r0 * g->lda;
            int rows = g->m - r0 < AVX512_ROWS ? g->m - r0 : AVX512_ROWS;
#define PANEL(group, off, rows) panel_avx512(a, g->lda, panel, g->l.k, tile, group, off, rows)
            KERNEL_CASES(PANEL, &g->l, rows, KERNEL_ROWS4)
#undef PANEL
            store_panel(g, p, r0, rows, tile);
        }
    }
}

/* --- avx2: a row of a block-panel as two halves of four 8-wide chains;
 * two rows a pass (sixteen registers hold no more) --- */

__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
half_avx2(const float *a, int64_t lda, const uint8_t *panel, int32_t k, int h, float *tile,
          const int group, const int off, const int rows)
{
    const int64_t gb = (int64_t)COLS * 4 * (1 + off) + (int64_t)group * COLS;
    __m256 acc[AVX2_ROWS][4];
    for (int r = 0; r < rows; r++) {
        for (int j = 0; j < 4; j++) {
            acc[r][j] = _mm256_setzero_ps();
        }
    }
    for (int32_t g = 0; g < k / group; g++) {
        const uint8_t *grp = panel + g * gb;
        const int8_t *qs = (const int8_t *)(grp + COLS * 4 * (1 + off)) + 32 * h;
        for (int64_t line = 0; h == 0 && line < gb; line += 64) {
            _mm_prefetch((const char *)grp + PREFETCH_GROUPS * gb + line, _MM_HINT_T0);
        }
        const float *st = (const float *)grp + 32 * h;
        for (int i = 0; i < group; i++) {
            __m256 x[AVX2_ROWS];
            for (int r = 0; r < rows; r++) {
                x[r] = _mm256_broadcast_ss(a + r * lda + g * group + i);
            }
            for (int j = 0; j < 4; j++) {
                __m128i q8 = _mm_loadl_epi64((const __m128i *)(qs + i * COLS + 8 * j));
                __m256 w = _mm256_mul_ps(_mm256_load_ps(st + 8 * j),
                                         _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)));
                if (off) {
                    w = _mm256_sub_ps(w, _mm256_load_ps(st + COLS + 8 * j));
                }
                for (int r = 0; r < rows; r++) {
                    acc[r][j] = _mm256_fmadd_ps(x[r], w, acc[r][j]);
                }
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        for (int j = 0; j < 4; j++) {
            _mm256_storeu_ps(tile + r * COLS + 32 * h + 8 * j, acc[r][j]);
        }
    }
}

__attribute__((target("avx2,fma"))) static void run_avx2(const struct assay_gemmq *g, int32_t p0,
                                                         int32_t p1, float *tile)
{
    const int64_t pb = panel_bytes(&g->l);
    for (int32_t p = p0; p < p1; p++) {
        const uint8_t *panel = g->w + p * pb;
        for (int32_t r0 = 0; r0 < g->m; r0 += AVX2_ROWS) {
            const float *a = g->a + (int64_t)r0 * g->lda;
            int rows = g->m - r0 < AVX2_ROWS ? g->m - r0 : AVX2_ROWS;
            for (int h = 0; h < 2; h++) {
#define HALF(group, off, rows) half_avx2(a, g->lda, panel, g->l.k, h, tile, group, off, rows)
                KERNEL_CASES(HALF, &g->l, rows, KERNEL_ROWS2)
#undef HALF
            }
            store_panel(g, p, r0, rows, tile);
        }
    }
}

#endif /* GEMMQ_X86 */

void assay_gemmq_run(const struct assay_gemmq *g, int32_t p0, int32_t p1)
{
    float tile[AVX512_ROWS * COLS] __attribute__((aligned(64)));
    if (p0 >= p1) {
        return;
    }
    assert(assay_gemmq_supported(g->isa));
#if GEMMQ_X86
    if (g->isa == ASSAY_ISA_AVX512) {
        run_avx512(g, p0, p1, tile);
    } else {
        run_avx2(g, p0, p1, tile);
    }
#else
    (void)tile;
#endif
}
