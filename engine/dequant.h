/*
 * dequant.h - turning a row of a GGUF tensor, stored in one of the ggml
 * types common GGUF files hold, into floats.
 *
 * A caller that has found a tensor (engine/gguf.h) hands its bytes, its
 * ggml type and an element count to assay_dequant_row and gets n floats.
 * Nothing is allocated; the source may be unaligned.
 *
 *   float row[4096];
 *   if (assay_dequant_row(t->type, t->data, t->n_bytes, row, t->ne[0], &diag) != ASSAY_OK) ...
 *
 * The layouts, as ggml defines them. Every multi-byte field is
 * little-endian; "f16" is an IEEE binary16 number. Blocks follow one
 * another with no padding, and element i of a row is element i % B of
 * block i / B.
 *
 *   F32  (0)  4 bytes an element.
 *   F16  (1)  2 bytes an element: IEEE binary16, subnormals and infinities
 *             included, widened exactly; a NaN keeps sign and payload and
 *             comes out quiet, as IEEE conversion has it.
 *   BF16 (30) 2 bytes an element: the top 16 bits of an IEEE binary32.
 *   Q4_0 (2)  blocks of 32 in 18 bytes: f16 d, then 16 bytes of nibbles.
 *             Element j (0..15) is the low nibble of byte j, element j+16
 *             its high nibble; x = d * (q - 8).
 *   Q8_0 (8)  blocks of 32 in 34 bytes: f16 d, then 32 signed bytes q;
 *             x = d * q.
 *   Q4_K (12) super-blocks of 256 in 144 bytes: f16 d, f16 dmin, 12 bytes
 *             of scales, 128 bytes of nibbles. Eight sub-blocks of 32 each
 *             have a 6-bit scale sc and a 6-bit min m, packed in the 12
 *             bytes so: byte s (s = 0..3) holds sc[s] in its low six bits,
 *             byte 4+s holds m[s] likewise; byte 8+s holds the low four bits
 *             of sc[4+s] (low nibble) and of m[4+s] (high nibble), whose top
 *             two bits are the top two bits of byte s (sc) and byte 4+s (m).
 *             Each 32 bytes of nibbles hold two sub-blocks: the low nibbles
 *             of bytes 32p..32p+31 are sub-block 2p, the high nibbles
 *             sub-block 2p+1. x = d * sc * q - dmin * m.
 *   Q5_K (13) super-blocks of 256 in 176 bytes: d, dmin and the 12 bytes of
 *             scales as in Q4_K, then 32 bytes qh, then 128 bytes of nibbles
 *             as in Q4_K. Element i (0..31) of sub-block s takes bit s of
 *             qh[i] as its fifth bit (q = nibble + 16 * bit, 0..31).
 *             x = d * sc * q - dmin * m.
 *   Q6_K (14) super-blocks of 256 in 210 bytes: 128 bytes ql (low four bits),
 *             64 bytes qh (high two bits), 16 signed bytes of scales (one per
 *             16 elements), then f16 d last. In each half h (128 elements,
 *             ql[64h..], qh[32h..]) element 32k + i (k = 0..3, i = 0..31)
 *             takes its low four bits from ql[64h + 32(k % 2) + i] (low
 *             nibble for k < 2, high nibble otherwise) and its high two bits
 *             from bits 2k, 2k+1 of qh[32h + i]. Element e of the super-block
 *             has scale scales[e / 16]; x = d * scale * (q - 32).
 *
 * The arithmetic is done in float, in the order written above: (d * sc) is
 * formed first, times q, less (dmin * m). Non-finite elements of F32, F16
 * and BF16 rows are passed through; checking them is the caller's.
 */
#ifndef ASSAY_DEQUANT_H
#define ASSAY_DEQUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

/* Whether assay_dequant_row decodes the ggml type: F32, F16, BF16, Q4_0,
 * Q8_0, Q4_K, Q5_K and Q6_K. */
bool assay_dequant_supported(uint32_t ggml_type);

/*
 * Decode n elements stored in ggml type ggml_type at src into dst[0..n).
 * src holds src_bytes bytes, of which the first n / B blocks are read (B the
 * type's block size); it is borrowed for the call and may be unaligned. dst
 * must hold n floats and not overlap src.
 *
 * Returns ASSAY_OK; ASSAY_ERR_UNSUPPORTED for a type this does not decode
 * (diag names it, as assay_ggml_type_name does, with its number);
 * ASSAY_ERR_INVALID for n negative, not a multiple of the type's block
 * size or so large its bytes overflow a size_t, src_bytes smaller than the
 * n elements take, or a NULL src or dst with n > 0 (diag says which); ASSAY_ERR_PARSE for a block whose f16 scale
 * d, or min scale dmin, is an infinity or a NaN (diag: which block, its
 * byte offset in src and the field; the value and its bits). All blocks are
 * checked before any is decoded: on failure dst is untouched. diag may be
 * NULL; its file is left as it was.
 */
enum assay_status assay_dequant_row(uint32_t ggml_type, const void *src, size_t src_bytes,
                                    float *dst, int64_t n, struct assay_diag *diag);

/*
 * The integer formats (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K) as parts: every
 * element is an integer q times a step less an offset, step and offset
 * shared by ASSAY_DEQUANT_GROUP consecutive elements (Q4_0 and Q8_0:
 * step d, offset 0, q = nibble - 8 or the byte; Q4_K and Q5_K: step
 * d * sc, offset dmin * m, q 0..31; Q6_K: step d * scale, offset 0,
 * q - 32). assay_dequant_row's floats are, bit for bit,
 * step[i / 16] * (float)q[i] - offset[i / 16], each product and
 * difference rounded (assay_dequant_combine): what the engine's product
 * decodes when it keeps a matrix in its file's format (gemm.h).
 */
#define ASSAY_DEQUANT_GROUP 16

/* Whether ggml_type is one of the integer formats above. */
bool assay_dequant_has_parts(uint32_t ggml_type);

/* n elements at src (as assay_dequant_row, with its checks and returns) as
 * q[0..n), step and offset[0..n / 16); ASSAY_ERR_UNSUPPORTED for a type
 * without parts. */
enum assay_status assay_dequant_row_parts(uint32_t ggml_type, const void *src, size_t src_bytes,
                                          int64_t n, int8_t *q, float *step, float *offset,
                                          struct assay_diag *diag);

/* dst[i] = step[i / 16] * (float)q[i] - offset[i / 16] for i < n, each
 * operation rounded. */
void assay_dequant_combine(const int8_t *q, const float *step, const float *offset, int64_t n,
                           float *dst);

#endif
