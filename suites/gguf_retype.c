/*
 * gguf_retype.c - a saved model's GGUF bytes with its tensors in other
 * ggml types (gguf_retype.h).
 */
#include "gguf_retype.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_bytes.h"

/* Float to IEEE binary16 bits, rounding to nearest even, written here from
 * the format's definition and not shared with engine/dequant.c. */
uint16_t gguf_half_bits(float x)
{
    uint16_t sign = signbit(x) ? 0x8000u : 0u;
    float a = fabsf(x);
    if (a < 0x1p-14f) { /* subnormal: a multiple of 2^-24 (1024 of them is the least normal) */
        return (uint16_t)(sign | (uint16_t)nearbyintf(a * 0x1p24f));
    }
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    uint32_t mant = (uint32_t)nearbyintf(ldexpf(m, 11)); /* 1024..2048 */
    int biased = e - 1 + 15;
    if (mant == 2048) {
        mant = 1024;
        biased++;
    }
    if (biased >= 31) {
        return (uint16_t)(sign | 0x7c00u);
    }
    return (uint16_t)(sign | (uint16_t)(biased << 10) | (uint16_t)(mant - 1024));
}

/* Q8_0 by the format's rule: per block of 32, d = max|x| / 127 stored as
 * f16, q = round(x / d); the value is f16(d) * q. */
int8_t gguf_q8_quant(float x, float d)
{
    return (int8_t)(d == 0.0f ? 0.0f : roundf(x / d));
}

float gguf_q8_block_scale(const float *x)
{
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) {
        amax = fmaxf(amax, fabsf(x[i]));
    }
    return amax / 127.0f;
}

/* Pseudo-random bytes for block b of a tensor (splitmix64). */
static uint8_t random_byte(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (uint8_t)((z ^ (z >> 31)) >> 56);
}

static void put_half(uint8_t *at, float x)
{
    uint16_t h = gguf_half_bits(x);
    at[0] = (uint8_t)h;
    at[1] = (uint8_t)(h >> 8);
}

/* Q4_K, Q5_K and Q6_K blocks of random quants and scales (the values are
 * then whatever the file says; |x| below about 0.2), seeded by n and the
 * first float's bits so that each tensor differs. */
static size_t encode_k(uint32_t type, const float *x, int64_t n, uint8_t *out)
{
    uint32_t be, bb;
    (void)assay_ggml_type_size(type, &be, &bb);
    uint32_t first;
    memcpy(&first, x, sizeof first);
    uint64_t s = (uint64_t)n * 1000003u + first;
    for (int64_t b = 0; b < n / be; b++) {
        uint8_t *blk = out + (size_t)b * bb;
        for (uint32_t i = 0; i < bb; i++) {
            blk[i] = random_byte(&s);
        }
        if (type == ASSAY_GGML_TYPE_Q6_K) {
            for (int i = 0; i < 16; i++) {
                blk[192 + i] = (uint8_t)((blk[192 + i] & 63) - 32); /* scales in [-32, 31] */
            }
            put_half(blk + 208, 1e-4f);
        } else {
            put_half(blk, 2e-4f);
            put_half(blk + 2, 2e-4f);
        }
    }
    return (size_t)(n / be) * bb;
}

/* n floats stored as type (F32, F16 or Q8_0 from the floats; Q4_K, Q5_K
 * and Q6_K random, encode_k; any other type gets zero bytes of its size);
 * returns the bytes written. */
static size_t encode(uint32_t type, const float *x, int64_t n, uint8_t *out)
{
    if (type == ASSAY_GGML_TYPE_F32) {
        memcpy(out, x, (size_t)n * 4);
        return (size_t)n * 4;
    }
    if (type == ASSAY_GGML_TYPE_F16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = gguf_half_bits(x[i]);
            out[2 * i] = (uint8_t)h;
            out[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return (size_t)n * 2;
    }
    if (type == ASSAY_GGML_TYPE_Q8_0) {
        for (int64_t b = 0; b < n / 32; b++) {
            uint8_t *blk = out + 34 * b;
            float d = gguf_q8_block_scale(x + 32 * b);
            uint16_t h = gguf_half_bits(d);
            blk[0] = (uint8_t)h;
            blk[1] = (uint8_t)(h >> 8);
            for (int i = 0; i < 32; i++) {
                blk[2 + i] = (uint8_t)gguf_q8_quant(x[32 * b + i], d);
            }
        }
        return (size_t)(n / 32) * 34;
    }
    if (type == ASSAY_GGML_TYPE_Q4_K || type == ASSAY_GGML_TYPE_Q5_K ||
        type == ASSAY_GGML_TYPE_Q6_K) {
        return encode_k(type, x, n, out);
    }
    uint32_t be, bb;
    if (!assay_ggml_type_size(type, &be, &bb)) {
        return 0; /* the reader refuses the type before it looks for data */
    }
    size_t bytes = (size_t)(n / be) * bb;
    memset(out, 0, bytes);
    return bytes;
}

/* The f32 GGUF file buf rebuilt with the same metadata and tensors stored
 * as r says; *out_size its length. */
uint8_t *gguf_retyped(const uint8_t *buf, size_t size, const struct gguf_retype *r,
                      size_t *out_size)
{
    struct assay_gguf *g;
    struct assay_diag diag;
    gguf_want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    size_t n = assay_gguf_n_tensors(g);
    const char *first = assay_gguf_tensor_at(g, 0)->name;
    size_t meta_end = gguf_tensor_dims_pos(buf, size, first) - 8 - strlen(first);
    static const float stray_data[32];
    size_t cap = size + 4096;
    uint8_t *out = calloc(1, cap);
    uint8_t *data = calloc(1, size + 64);
    assert_non_null(out);
    assert_non_null(data);
    size_t n_out = n + (r->stray != NULL ? 1 : 0) - (r->drop != NULL ? 1 : 0);
    memcpy(out, buf, meta_end);
    gguf_put_u64(out, 8, n_out);
    size_t pos = meta_end, data_len = 0;
    for (size_t i = 0; i <= n; i++) {
        const struct assay_gguf_tensor *t = i < n ? assay_gguf_tensor_at(g, i) : NULL;
        const char *name = t != NULL ? t->name : r->stray;
        if (name == NULL || (r->drop != NULL && strcmp(name, r->drop) == 0)) {
            continue;
        }
        uint32_t n_dims = t != NULL ? t->n_dims : 1;
        uint32_t type = t != NULL ? r->type_of(t) : ASSAY_GGML_TYPE_F32;
        size_t len = strlen(name);
        gguf_put_u64(out, pos, len);
        memcpy(out + pos + 8, name, len);
        pos += 8 + len;
        gguf_put_u32(out, pos, n_dims);
        pos += 4;
        for (uint32_t d = 0; d < n_dims; d++) {
            gguf_put_u64(out, pos, t != NULL ? (uint64_t)t->ne[d] : 32);
            pos += 8;
        }
        gguf_put_u32(out, pos, type);
        gguf_put_u64(out, pos + 4, data_len);
        pos += 12;
        data_len += encode(type, t != NULL ? t->data : stray_data, t != NULL ? t->n_elements : 32,
                           data + data_len);
        data_len = (data_len + 31) / 32 * 32;
    }
    pos = (pos + 31) / 32 * 32;
    assert_true(pos + data_len <= cap);
    memcpy(out + pos, data, data_len);
    *out_size = pos + data_len;
    free(data);
    assay_gguf_free(g);
    return out;
}

static uint32_t matrices_q8_0(const struct assay_gguf_tensor *t)
{
    return t->n_dims == 2 ? ASSAY_GGML_TYPE_Q8_0 : ASSAY_GGML_TYPE_F32;
}

void gguf_retype_file_q8_0(const char *path)
{
    size_t size, n;
    uint8_t *buf = gguf_read_all(path, &size);
    struct gguf_retype r = {matrices_q8_0, NULL, NULL};
    uint8_t *q8 = gguf_retyped(buf, size, &r, &n);
    gguf_write_all(path, q8, n);
    free(buf);
    free(q8);
}
