/*
 * gguf_retype.h - a saved model's GGUF bytes rebuilt with its tensors in
 * other ggml types, for the tests that load F16, Q8_0 and K-quant files
 * (test_model_gguf, test_quantized_weights): F16 and Q8_0 encode the
 * floats by the formats' rules (written here from their definitions, not
 * shared with engine/dequant.c); Q4_K, Q5_K and Q6_K get random blocks
 * with small scales (the model is then whatever the file says); any other
 * type gets zero bytes. Each function fails the running cmocka test on
 * anything unexpected; buffers returned are malloc'd.
 */
#ifndef ASSAY_TEST_GGUF_RETYPE_H
#define ASSAY_TEST_GGUF_RETYPE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/gguf.h"

/* Float to IEEE binary16 bits, rounding to nearest even. */
uint16_t gguf_half_bits(float x);

/* Q8_0: a block's scale max|x| / 127, and x's quant for scale d. */
float gguf_q8_block_scale(const float *x);
int8_t gguf_q8_quant(float x, float d);

/* How to rebuild a model file: each tensor's type, a tensor to leave out
 * and an f32 tensor to add (NULL for none). */
struct gguf_retype {
    uint32_t (*type_of)(const struct assay_gguf_tensor *t);
    const char *drop;
    const char *stray;
};

uint8_t *gguf_retyped(const uint8_t *buf, size_t size, const struct gguf_retype *r,
                      size_t *out_size);

/* A saved model file rewritten in place with every matrix (two
 * dimensions) in Q8_0 and the rest in f32. */
void gguf_retype_file_q8_0(const char *path);

#endif
