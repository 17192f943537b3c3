/*
 * dequant.c - one row of a GGUF tensor into floats (dequant.h):
 * assay_dequant_row decodes F32, F16, BF16 and the quantised block layouts
 * ggml defines, reading little-endian fields from possibly unaligned bytes;
 * assay_dequant_supported says which ggml types it knows. The GGUF model
 * loader (model_gguf.c) calls it row by row for the weights it reads.
 */
#include "dequant.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gguf.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "engine/dequant.c copies F32 elements as host floats"
#endif

enum {
    K_BLOCK = 256,     /* elements of a K super-block */
    K_SUB = 32,        /* elements of a Q4_K / Q5_K sub-block */
    K_N_SUB = 8,       /* sub-blocks of a Q4_K / Q5_K super-block */
    K_SCALE_BYTES = 12,
    Q6_K_GROUP = 16,   /* elements sharing one Q6_K scale */
};

static uint16_t load_u16(const uint8_t *b)
{
    return (uint16_t)(b[0] | (b[1] << 8));
}

static float float_of_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The binary32 bits of the binary16 number h, exactly: every binary16
 * value is a binary32 value. A NaN keeps its sign and payload and comes
 * out quiet, as IEEE 754 converts between formats (and as x86's F16C
 * instruction, which ggml uses where it can, does). */
static uint32_t f16_bits_to_f32_bits(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f && mantissa == 0) {
        return sign | 0x7f800000u;
    }
    if (exponent == 0x1f) {
        return sign | 0x7fc00000u | (mantissa << 13);
    }
    if (exponent != 0) {
        /* Rebias from 15 to 127. */
        return sign | ((exponent + 112u) << 23) | (mantissa << 13);
    }
    if (mantissa == 0) {
        return sign;
    }
    /* A subnormal is mantissa * 2^-24; in binary32 that is a normal number,
     * and the product below is exact. */
    float magnitude = (float)mantissa * 0x1p-24f;
    uint32_t bits;
    memcpy(&bits, &magnitude, sizeof bits);
    return sign | bits;
}

static float load_f16(const uint8_t *b)
{
    return float_of_bits(f16_bits_to_f32_bits(load_u16(b)));
}

/* ------------------------------------------------------------------ */
/* Decoders: each turns n_blocks consecutive blocks into floats.       */
/* ------------------------------------------------------------------ */

static void decode_f32(const uint8_t *src, int64_t n_blocks, float *dst)
{
    memcpy(dst, src, (size_t)n_blocks * sizeof(float));
}

static void decode_f16(const uint8_t *src, int64_t n_blocks, float *dst)
{
    for (int64_t i = 0; i < n_blocks; i++) {
        dst[i] = float_of_bits(f16_bits_to_f32_bits(load_u16(src + 2 * i)));
    }
}

static void decode_bf16(const uint8_t *src, int64_t n_blocks, float *dst)
{
    for (int64_t i = 0; i < n_blocks; i++) {
        dst[i] = float_of_bits((uint32_t)load_u16(src + 2 * i) << 16);
    }
}

/*
 * The integer formats, as parts (dequant.h): q[i] an integer, step and
 * offset one float each per ASSAY_DEQUANT_GROUP elements, formed as the
 * layout's text says ((d * sc), (dmin * m)); assay_dequant_combine makes
 * the floats. Each takes n_blocks blocks and writes block elements of q and
 * block / ASSAY_DEQUANT_GROUP of step and offset a block.
 */
#define GROUP ASSAY_DEQUANT_GROUP

static void parts_q4_0(const uint8_t *src, int64_t n_blocks, int8_t *q, float *step,
                       float *offset)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 18, q += 32, step += 2, offset += 2) {
        float d = load_f16(src);
        const uint8_t *nibbles = src + 2;
        for (int j = 0; j < 16; j++) {
            q[j] = (int8_t)((nibbles[j] & 0x0f) - 8);
            q[j + 16] = (int8_t)((nibbles[j] >> 4) - 8);
        }
        step[0] = step[1] = d;
        offset[0] = offset[1] = 0.0f;
    }
}

static void parts_q8_0(const uint8_t *src, int64_t n_blocks, int8_t *q, float *step,
                       float *offset)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 34, q += 32, step += 2, offset += 2) {
        float d = load_f16(src);
        for (int j = 0; j < 32; j++) {
            q[j] = (int8_t)src[2 + j];
        }
        step[0] = step[1] = d;
        offset[0] = offset[1] = 0.0f;
    }
}

/* The eight 6-bit scales and mins of a Q4_K or Q5_K super-block from its
 * 12 packed bytes (the layout is in dequant.h). */
static void unpack_k_scales(const uint8_t packed[K_SCALE_BYTES], uint8_t scale[K_N_SUB],
                            uint8_t min[K_N_SUB])
{
    for (int s = 0; s < 4; s++) {
        uint8_t lows = packed[8 + s];
        scale[s] = packed[s] & 0x3f;
        min[s] = packed[4 + s] & 0x3f;
        scale[4 + s] = (uint8_t)((lows & 0x0f) | ((packed[s] >> 6) << 4));
        min[4 + s] = (uint8_t)((lows >> 4) | ((packed[4 + s] >> 6) << 4));
    }
}

/* Q4_K and Q5_K differ only in the fifth bit: qh is NULL for Q4_K. */
static void parts_k_super_block(float d, float dmin, const uint8_t *packed_scales,
                                const uint8_t *qh, const uint8_t *nibbles, int8_t *q,
                                float *step, float *offset)
{
    uint8_t scale[K_N_SUB], min[K_N_SUB];
    unpack_k_scales(packed_scales, scale, min);
    for (int s = 0; s < K_N_SUB; s++) {
        const uint8_t *bytes = nibbles + K_SUB * (s / 2);
        int shift = 4 * (s % 2);
        for (int g = 0; g < K_SUB / GROUP; g++) {
            step[s * (K_SUB / GROUP) + g] = d * (float)scale[s];
            offset[s * (K_SUB / GROUP) + g] = dmin * (float)min[s];
        }
        for (int i = 0; i < K_SUB; i++) {
            int v = (bytes[i] >> shift) & 0x0f;
            if (qh != NULL) {
                v |= ((qh[i] >> s) & 1) << 4;
            }
            q[K_SUB * s + i] = (int8_t)v;
        }
    }
}

static void parts_q4_k(const uint8_t *src, int64_t n_blocks, int8_t *q, float *step,
                       float *offset)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 144) {
        parts_k_super_block(load_f16(src), load_f16(src + 2), src + 4, NULL, src + 16,
                            q + b * K_BLOCK, step + b * (K_BLOCK / GROUP),
                            offset + b * (K_BLOCK / GROUP));
    }
}

static void parts_q5_k(const uint8_t *src, int64_t n_blocks, int8_t *q, float *step,
                       float *offset)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 176) {
        parts_k_super_block(load_f16(src), load_f16(src + 2), src + 4, src + 16, src + 48,
                            q + b * K_BLOCK, step + b * (K_BLOCK / GROUP),
                            offset + b * (K_BLOCK / GROUP));
    }
}

static void parts_q6_k(const uint8_t *src, int64_t n_blocks, int8_t *q, float *step,
                       float *offset)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 210, q += K_BLOCK) {
        const uint8_t *ql = src;
        const uint8_t *qh = src + 128;
        const uint8_t *scales = src + 192;
        float d = load_f16(src + 208);
        for (int h = 0; h < 2; h++) {
            for (int k = 0; k < 4; k++) {
                const uint8_t *lows = ql + 64 * h + 32 * (k % 2);
                int low_shift = 4 * (k / 2);
                for (int i = 0; i < 32; i++) {
                    int high = (qh[32 * h + i] >> (2 * k)) & 3;
                    int v = ((lows[i] >> low_shift) & 0x0f) | (high << 4);
                    q[128 * h + 32 * k + i] = (int8_t)(v - 32);
                }
            }
        }
        for (int g = 0; g < K_BLOCK / Q6_K_GROUP; g++) {
            *step++ = d * (float)(int8_t)scales[g];
            *offset++ = 0.0f;
        }
    }
}

void assay_dequant_combine(const int8_t *q, const float *step, const float *offset, int64_t n,
                           float *dst)
{
    for (int64_t i = 0; i < n; i++) {
        dst[i] = step[i / GROUP] * (float)q[i] - offset[i / GROUP];
    }
}

/* ------------------------------------------------------------------ */
/* The table of supported types                                        */
/* ------------------------------------------------------------------ */

/* An f16 scale of a block that must be finite. */
struct scale_field {
    uint32_t offset; /* in the block */
    const char *name;
};

struct format {
    uint32_t type;
    /* one of the two: floats directly, or an integer format's parts */
    void (*decode)(const uint8_t *src, int64_t n_blocks, float *dst);
    void (*parts)(const uint8_t *src, int64_t n_blocks, int8_t *q, float *step, float *offset);
    uint32_t n_scales;
    struct scale_field scales[2];
};

/* Block sizes come from assay_ggml_type_size, the reader's table. */
static const struct format k_formats[] = {
    {ASSAY_GGML_TYPE_F32, decode_f32, NULL, 0, {{0, NULL}, {0, NULL}}},
    {ASSAY_GGML_TYPE_F16, decode_f16, NULL, 0, {{0, NULL}, {0, NULL}}},
    {ASSAY_GGML_TYPE_BF16, decode_bf16, NULL, 0, {{0, NULL}, {0, NULL}}},
    {ASSAY_GGML_TYPE_Q4_0, NULL, parts_q4_0, 1, {{0, "d"}, {0, NULL}}},
    {ASSAY_GGML_TYPE_Q8_0, NULL, parts_q8_0, 1, {{0, "d"}, {0, NULL}}},
    {ASSAY_GGML_TYPE_Q4_K, NULL, parts_q4_k, 2, {{0, "d"}, {2, "dmin"}}},
    {ASSAY_GGML_TYPE_Q5_K, NULL, parts_q5_k, 2, {{0, "d"}, {2, "dmin"}}},
    {ASSAY_GGML_TYPE_Q6_K, NULL, parts_q6_k, 1, {{208, "d"}, {0, NULL}}},
};

static const struct format *find_format(uint32_t type)
{
    for (size_t i = 0; i < sizeof k_formats / sizeof k_formats[0]; i++) {
        if (k_formats[i].type == type) {
            return &k_formats[i];
        }
    }
    return NULL;
}

bool assay_dequant_supported(uint32_t ggml_type)
{
    return find_format(ggml_type) != NULL;
}

/* Check that every f16 scale of the first n_blocks blocks is finite. */
static enum assay_status check_scales(const struct format *f, const uint8_t *src,
                                      int64_t n_blocks, uint32_t block_bytes,
                                      struct assay_diag *diag)
{
    for (int64_t b = 0; b < n_blocks; b++) {
        const uint8_t *block = src + (size_t)b * block_bytes;
        for (uint32_t k = 0; k < f->n_scales; k++) {
            uint16_t bits = load_u16(block + f->scales[k].offset);
            if ((bits & 0x7c00u) != 0x7c00u) {
                continue;
            }
            char where[160];
            snprintf(where, sizeof where, "%s block %" PRId64 " at byte %zu, field %s",
                     assay_ggml_type_name(f->type), b, (size_t)b * block_bytes,
                     f->scales[k].name);
            bool nan = (bits & 0x03ffu) != 0;
            assay_diag_set(diag, NULL, where, "a finite f16 scale", "%s (f16 0x%04x)",
                           nan ? "NaN" : ((bits & 0x8000u) != 0 ? "-inf" : "inf"),
                           (unsigned)bits);
            return ASSAY_ERR_PARSE;
        }
    }
    return ASSAY_OK;
}

bool assay_dequant_has_parts(uint32_t ggml_type)
{
    const struct format *f = find_format(ggml_type);
    return f != NULL && f->parts != NULL;
}

/* The checks of assay_dequant_row (dequant.h) and the format; *n_blocks is
 * set on ASSAY_OK. */
static enum assay_status check_row(uint32_t ggml_type, const void *src, size_t src_bytes,
                                   const void *dst, int64_t n, const struct format **out,
                                   int64_t *n_blocks_out, struct assay_diag *diag)
{
    const struct format *f = find_format(ggml_type);
    uint32_t block_elems, block_bytes;
    if (f == NULL || !assay_ggml_type_size(ggml_type, &block_elems, &block_bytes)) {
        assay_diag_set(diag, NULL, "ggml type",
                       "F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q5_K or Q6_K", "%s (%" PRIu32 ")",
                       assay_ggml_type_name(ggml_type), ggml_type);
        return ASSAY_ERR_UNSUPPORTED;
    }
    const char *name = assay_ggml_type_name(ggml_type);
    if (n < 0 || n % block_elems != 0) {
        char expected[96];
        snprintf(expected, sizeof expected,
                 "an element count that is a multiple of %" PRIu32 " (the %s block)",
                 block_elems, name);
        assay_diag_set(diag, NULL, "n", expected, "%" PRId64, n);
        return ASSAY_ERR_INVALID;
    }
    int64_t n_blocks = n / block_elems;
    if ((uint64_t)n_blocks > SIZE_MAX / block_bytes) {
        assay_diag_set(diag, NULL, "n", "a row whose bytes fit in a size_t", "%" PRId64 " %s",
                       n, name);
        return ASSAY_ERR_INVALID;
    }
    size_t need = (size_t)n_blocks * block_bytes;
    if (src_bytes < need) {
        char expected[160];
        snprintf(expected, sizeof expected,
                 "at least %zu bytes (%" PRId64 " %s block%s of %" PRIu32 " bytes)", need,
                 n_blocks, name, n_blocks == 1 ? "" : "s", block_bytes);
        assay_diag_set(diag, NULL, "src_bytes", expected, "%zu", src_bytes);
        return ASSAY_ERR_INVALID;
    }
    *out = f;
    *n_blocks_out = n_blocks;
    if (n_blocks == 0) {
        return ASSAY_OK;
    }
    if (src == NULL || dst == NULL) {
        assay_diag_set(diag, NULL, src == NULL ? "src" : "dst", "a buffer", "NULL");
        return ASSAY_ERR_INVALID;
    }
    return check_scales(f, src, n_blocks, block_bytes, diag);
}

enum assay_status assay_dequant_row(uint32_t ggml_type, const void *src, size_t src_bytes,
                                    float *dst, int64_t n, struct assay_diag *diag)
{
    const struct format *f = NULL;
    int64_t n_blocks = 0;
    enum assay_status st = check_row(ggml_type, src, src_bytes, dst, n, &f, &n_blocks, diag);
    if (st != ASSAY_OK || n_blocks == 0) {
        return st;
    }
    if (f->decode != NULL) {
        f->decode(src, n_blocks, dst);
        return ASSAY_OK;
    }
    /* block by block through the parts, on the stack */
    uint32_t block_elems, block_bytes;
    (void)assay_ggml_type_size(ggml_type, &block_elems, &block_bytes);
    int8_t q[K_BLOCK];
    float step[K_BLOCK / GROUP], offset[K_BLOCK / GROUP];
    const uint8_t *in = src;
    for (int64_t b = 0; b < n_blocks; b++) {
        f->parts(in + (size_t)b * block_bytes, 1, q, step, offset);
        assay_dequant_combine(q, step, offset, block_elems, dst + b * block_elems);
    }
    return ASSAY_OK;
}

enum assay_status assay_dequant_row_parts(uint32_t ggml_type, const void *src, size_t src_bytes,
                                          int64_t n, int8_t *q, float *step, float *offset,
                                          struct assay_diag *diag)
{
    const struct format *f = NULL;
    int64_t n_blocks = 0;
    enum assay_status st = check_row(ggml_type, src, src_bytes, q, n, &f, &n_blocks, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    if (f->parts == NULL) {
        assay_diag_set(diag, NULL, "ggml type",
                       "Q4_0, Q8_0, Q4_K, Q5_K or Q6_K (an integer format)", "%s (%" PRIu32 ")",
                       assay_ggml_type_name(ggml_type), ggml_type);
        return ASSAY_ERR_UNSUPPORTED;
    }
    if (n_blocks > 0 && (step == NULL || offset == NULL)) {
        assay_diag_set(diag, NULL, step == NULL ? "step" : "offset", "a buffer", "NULL");
        return ASSAY_ERR_INVALID;
    }
    if (n_blocks > 0) {
        f->parts(src, n_blocks, q, step, offset);
    }
    return ASSAY_OK;
}
