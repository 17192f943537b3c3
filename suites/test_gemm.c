/*
 * Unit tests of the engine's own matrix product (engine/gemm.h): its
 * contract, element by element and bit for bit, for every instruction set
 * this CPU runs.
 *
 * The contract: c[i][j] = chain over k = 0..K-1 from 0 of acc = acc +
 * a[i][k] w[k][j], each step one fused multiply-add (avx2, avx512) or a
 * rounded product then a rounded sum (generic); then stored, or added to
 * C with one rounding. The reference below computes exactly that, one
 * element at a time in scalar code (fmaf is correctly rounded, as the
 * hardware's fused multiply-add is; this file is compiled with
 * -ffp-contract=off so that the generic reference is not fused by the
 * compiler), so any other order, a lost tail column, a wrong panel offset
 * or a wrong leading dimension shows as a bit difference.
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

#include "engine/gemm.h"
#include "engine/gemmq.h"
#include "support.h"

static float uniform(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (float)((z >> 40) / (double)(1 << 24) * 2.0 - 1.0);
}

static float reference(enum assay_isa isa, const float *a, const float *rows, int32_t k, int32_t j)
{
    float acc = 0.0f;
    for (int32_t i = 0; i < k; i++) {
        float w = rows[(int64_t)j * k + i];
        if (isa == ASSAY_ISA_GENERIC) {
            float prod = a[i] * w;
            acc = acc + prod;
        } else {
            acc = fmaf(a[i], w, acc);
        }
    }
    return acc;
}

/* Shapes: a partial last panel, a single panel, k of 1 and of 1024, a
 * leading dimension wider than k, rows from 1 to 13 (every tail tile). */
static void test_contract_bit_for_bit(void **state)
{
    (void)state;
    const int32_t shapes[][3] = {
        /* m, k, n */
        {1, 1, 1},    {1, 7, 33},   {2, 64, 32},  {3, 256, 260}, {5, 17, 95},
        {6, 32, 64},  {7, 1024, 40}, {12, 100, 130}, {13, 256, 96},
    };
    uint64_t seed = 3;
    int tested = 0;
    for (int isa = ASSAY_ISA_GENERIC; isa < ASSAY_ISA_COUNT; isa++) {
        if (!assay_isa_supported((enum assay_isa)isa)) {
            printf("isa=%s: not on this CPU\n", assay_isa_name((enum assay_isa)isa));
            continue;
        }
        tested++;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int32_t m = shapes[si][0], k = shapes[si][1], n = shapes[si][2];
            int32_t lda = k + 3, ldc = n + 5;
            int64_t pf = assay_gemm_packed_floats(k, n);
            assert_int_equal(pf, (int64_t)assay_gemm_panels(n) * k * ASSAY_GEMM_PANEL);
            float *rows = malloc(sizeof(float) * (size_t)k * n);
            float *packed = aligned_alloc(64, sizeof(float) * (size_t)(pf + 16));
            float *a = malloc(sizeof(float) * (size_t)m * lda);
            float *c = malloc(sizeof(float) * (size_t)m * ldc);
            float *c0 = malloc(sizeof(float) * (size_t)m * ldc);
            assert_true(rows && packed && a && c && c0);
            for (int64_t i = 0; i < (int64_t)k * n; i++) {
                rows[i] = uniform(&seed);
            }
            for (int64_t i = 0; i < (int64_t)m * lda; i++) {
                a[i] = uniform(&seed);
            }
            for (int64_t i = 0; i < (int64_t)m * ldc; i++) {
                c0[i] = uniform(&seed);
            }
            /* packed from two calls of disjoint columns, as the engine packs QKV */
            memset(packed, 0, sizeof(float) * (size_t)pf);
            int32_t half = n / 2;
            assay_gemm_pack(packed, k, n, 0, half, rows);
            assay_gemm_pack(packed, k, n, half, n - half, rows + (int64_t)half * k);
            for (int acc = 0; acc < 2; acc++) {
                memcpy(c, c0, sizeof(float) * (size_t)m * ldc);
                struct assay_gemm g = {a, lda, m, k, n, packed, c, ldc, acc == 1,
                                       (enum assay_isa)isa, 0};
                assay_gemm_run(&g, 0, assay_gemm_panels(n));
                for (int32_t i = 0; i < m; i++) {
                    for (int32_t j = 0; j < ldc; j++) {
                        float want = c0[(int64_t)i * ldc + j]; /* columns past n untouched */
                        if (j < n) {
                            float dot = reference((enum assay_isa)isa, a + (int64_t)i * lda, rows,
                                                  k, j);
                            want = acc ? want + dot : dot;
                        }
                        float got = c[(int64_t)i * ldc + j];
                        if (memcmp(&want, &got, sizeof want) != 0) {
                            fail_msg("isa=%s m=%d k=%d n=%d %s: c[%d][%d] = %.9g, the contract "
                                     "says %.9g",
                                     assay_isa_name((enum assay_isa)isa), (int)m, (int)k, (int)n,
                                     acc ? "added" : "stored", (int)i, (int)j, (double)got,
                                     (double)want);
                        }
                    }
                }
            }
            free(rows);
            free(packed);
            free(a);
            free(c);
            free(c0);
        }
        printf("isa=%s: %zu shapes, stored and added, bit for bit\n",
               assay_isa_name((enum assay_isa)isa), sizeof shapes / sizeof shapes[0]);
    }
    assert_true(tested >= 1);
}

/* Close to the exact product too: within the usual bound of a k-term fp32
 * sum, |c - exact| <= k * 2^-23 * sum |a w|, against a double-precision
 * product. */
static void test_accuracy(void **state)
{
    (void)state;
    const int32_t m = 4, k = 1024, n = 96;
    uint64_t seed = 11;
    float *rows = malloc(sizeof(float) * k * n);
    float *packed = aligned_alloc(64, sizeof(float) * (size_t)assay_gemm_packed_floats(k, n));
    float *a = malloc(sizeof(float) * m * k), *c = malloc(sizeof(float) * m * n);
    assert_true(rows && packed && a && c);
    for (int64_t i = 0; i < (int64_t)k * n; i++) {
        rows[i] = uniform(&seed);
    }
    for (int64_t i = 0; i < (int64_t)m * k; i++) {
        a[i] = uniform(&seed);
    }
    memset(packed, 0, sizeof(float) * (size_t)assay_gemm_packed_floats(k, n));
    assay_gemm_pack(packed, k, n, 0, n, rows);
    for (int isa = ASSAY_ISA_GENERIC; isa < ASSAY_ISA_COUNT; isa++) {
        if (!assay_isa_supported((enum assay_isa)isa)) {
            continue;
        }
        struct assay_gemm g = {a, k, m, k, n, packed, c, n, false, (enum assay_isa)isa, 0};
        assay_gemm_run(&g, 0, assay_gemm_panels(n));
        double worst = 0.0;
        for (int32_t i = 0; i < m; i++) {
            for (int32_t j = 0; j < n; j++) {
                double exact = 0.0, mag = 0.0;
                for (int32_t t = 0; t < k; t++) {
                    exact += (double)a[i * k + t] * rows[(int64_t)j * k + t];
                    mag += fabs((double)a[i * k + t] * rows[(int64_t)j * k + t]);
                }
                double err = fabs(c[i * n + j] - exact), bound = k * 0x1p-23 * mag;
                assert_true(err <= bound);
                worst = err / bound > worst ? err / bound : worst;
            }
        }
        printf("isa=%s: largest error %.3f of the bound k 2^-23 sum|a w|\n",
               assay_isa_name((enum assay_isa)isa), worst);
    }
    free(rows);
    free(packed);
    free(a);
    free(c);
}

/* Random parts of a (k, n) matrix in groups of 16: q in [-32, 31], steps
 * of both signs, offsets when asked; with group 32, pairs of groups of 16
 * share their step and offset (as Q4_K's sub-blocks do). */
static void random_parts(uint64_t *seed, int32_t k, int32_t n, int32_t group, bool offset,
                         int8_t *q, float *step, float *off)
{
    for (int64_t i = 0; i < (int64_t)k * n; i++) {
        q[i] = (int8_t)((int32_t)((uniform(seed) + 1.0f) * 32.0f) - 32);
    }
    for (int64_t g = 0; g < (int64_t)k / 16 * n; g++) {
        bool first = group == 16 || g % 2 == 0;
        step[g] = first ? uniform(seed) * 0.01f : step[g - 1];
        off[g] = !offset ? 0.0f : first ? uniform(seed) * 0.1f : off[g - 1];
    }
}

/*
 * The product on integer parts (engine/gemmq.h) against the packed
 * product on the floats the parts decode to (assay_gemmq_unpack, which
 * forward_init compares with the model's weights): the same bits, for
 * each instruction set that has the kernel, group 16 and 32, with and
 * without offsets, 1 to 7 rows (a kernel pass's rows, fewer, and more),
 * leading dimensions wider than k and n, a partial last block-panel,
 * accumulate, and the block-panels split between two calls.
 */
static void test_quantized_same_bits(void **state)
{
    (void)state;
    const int32_t shapes[][2] = {{32, 64}, {96, 100}, {256, 200}, {768, 1152}};
    uint64_t seed = 5;
    int tested = 0;
    for (int isa = ASSAY_ISA_GENERIC; isa < ASSAY_ISA_COUNT; isa++) {
        if (!assay_isa_supported((enum assay_isa)isa) ||
            !assay_gemmq_supported((enum assay_isa)isa)) {
            continue;
        }
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            for (int variant = 0; variant < 4; variant++) {
                const int32_t k = shapes[s][0], n = shapes[s][1];
                struct assay_gemmq_layout l = {k, n, variant / 2 ? 32 : 16, variant % 2 == 1};
                int8_t *q = malloc((size_t)k * n);
                float *step = malloc(sizeof(float) * (size_t)(k / 16) * n);
                float *off = malloc(sizeof(float) * (size_t)(k / 16) * n);
                float *rows = malloc(sizeof(float) * (size_t)k * n);
                uint8_t *qp = aligned_alloc(64, (size_t)assay_gemmq_bytes(&l));
                float *packed =
                    aligned_alloc(64, sizeof(float) * (size_t)assay_gemm_packed_floats(k, n));
                /* up to 7 rows of A (lda k + 3), C of ldc n + 5 */
                const int32_t max_m = 7, lda = k + 3, ldc = n + 5;
                float *a = malloc(sizeof(float) * (size_t)max_m * lda);
                float *want = malloc(sizeof(float) * (size_t)max_m * ldc);
                float *got = malloc(sizeof(float) * (size_t)max_m * ldc);
                assert_true(q && step && off && rows && qp && packed && a && want && got);
                random_parts(&seed, k, n, l.group, l.offset, q, step, off);
                memset(qp, 0, (size_t)assay_gemmq_bytes(&l));
                for (int32_t j = 0; j < n; j++) {
                    assert_true(assay_gemmq_pack(qp, &l, j, q + (int64_t)j * k,
                                                 step + (int64_t)j * (k / 16),
                                                 off + (int64_t)j * (k / 16)));
                    assay_gemmq_unpack(qp, &l, j, rows + (int64_t)j * k);
                    for (int32_t i = 0; i < k; i++) {
                        float w = step[j * (k / 16) + i / 16] * (float)q[(int64_t)j * k + i] -
                                  off[j * (k / 16) + i / 16];
                        assert_memory_equal(&w, &rows[(int64_t)j * k + i], sizeof w);
                    }
                }
                memset(packed, 0, sizeof(float) * (size_t)assay_gemm_packed_floats(k, n));
                assay_gemm_pack(packed, k, n, 0, n, rows);
                const int32_t row_counts[] = {1, 2, 3, 4, 5, 7};
                const int cases = 2 * (int)(sizeof row_counts / sizeof row_counts[0]);
                for (int case_ = 0; case_ < cases; case_++) {
                    const int acc = case_ % 2;
                    const int32_t m = row_counts[case_ / 2];
                    for (int32_t i = 0; i < max_m * lda; i++) {
                        a[i] = uniform(&seed);
                    }
                    for (int32_t i = 0; i < max_m * ldc; i++) {
                        want[i] = got[i] = uniform(&seed);
                    }
                    struct assay_gemm g = {a, lda, m, k, n, packed, want, ldc, acc == 1,
                                           (enum assay_isa)isa, 0};
                    assay_gemm_run(&g, 0, assay_gemm_panels(n));
                    struct assay_gemmq gq = {a, lda, m, l, qp, got, ldc, acc == 1,
                                             (enum assay_isa)isa};
                    int32_t panels = assay_gemmq_panels(n), cut = panels / 2;
                    assay_gemmq_run(&gq, cut, panels);
                    assay_gemmq_run(&gq, 0, cut);
                    /* every element, the padding of C's rows included
                     * (which neither product may touch) */
                    for (int32_t e = 0; e < max_m * ldc; e++) {
                        if (memcmp(&want[e], &got[e], sizeof(float)) != 0) {
                            fail_msg("isa=%s k=%d n=%d group=%d offset=%d m=%d acc=%d: row %d "
                                     "column %d is %a, the packed product %a",
                                     assay_isa_name((enum assay_isa)isa), k, n, l.group,
                                     l.offset, m, acc, e / ldc, e % ldc, got[e], want[e]);
                        }
                    }
                }
                free(q);
                free(step);
                free(off);
                free(rows);
                free(qp);
                free(packed);
                free(a);
                free(want);
                free(got);
            }
        }
        tested++;
        printf("isa=%s: the product on integer parts gives the packed product's bits, "
               "1 to 7 rows\n",
               assay_isa_name((enum assay_isa)isa));
    }
    if (tested == 0) {
        printf("no instruction set with the one-row kernel on this CPU\n");
    }
}

/* Parts the layout cannot hold are refused, and nothing is written: two
 * halves of a group of 32 with different steps (or offsets), and an
 * offset in a layout without offsets. */
static void test_quantized_pack_refuses(void **state)
{
    (void)state;
    const int32_t k = 64, n = 64;
    int8_t q[64] = {1};
    float step[4] = {0.5f, 0.5f, 0.25f, 0.25f}, off[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    struct assay_gemmq_layout l32 = {k, n, 32, true}, l16 = {k, n, 16, false};
    uint8_t *qp = aligned_alloc(64, (size_t)assay_gemmq_bytes(&l32));
    uint8_t *zero = calloc(1, (size_t)assay_gemmq_bytes(&l32));
    assert_non_null(qp);
    assert_non_null(zero);
    memset(qp, 0, (size_t)assay_gemmq_bytes(&l32));
    assert_true(assay_gemmq_pack(qp, &l32, 3, q, step, off));
    memset(qp, 0, (size_t)assay_gemmq_bytes(&l32));
    step[1] = 0.75f;
    assert_false(assay_gemmq_pack(qp, &l32, 3, q, step, off));
    step[1] = 0.5f;
    off[3] = 1.0f;
    assert_false(assay_gemmq_pack(qp, &l32, 3, q, step, off));
    assert_memory_equal(qp, zero, (size_t)assay_gemmq_bytes(&l32));
    off[2] = 1.0f;
    assert_true(assay_gemmq_pack(qp, &l32, 3, q, step, off));
    memset(qp, 0, (size_t)assay_gemmq_bytes(&l32));
    assert_false(assay_gemmq_pack(qp, &l16, 3, q, step, off));
    off[2] = off[3] = -0.0f;
    assert_false(assay_gemmq_pack(qp, &l16, 3, q, step, off));
    free(qp);
    free(zero);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contract_bit_for_bit),
        cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_quantized_same_bits),
        cmocka_unit_test(test_quantized_pack_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
