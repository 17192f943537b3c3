/* Unit tests of engine/model_gguf.c: what a model's GGUF file holds. The
 * model's round trip and its metadata, read back through the generic
 * reader; files whose tensors are stored as F16 or Q8_0 (checked against
 * roundings computed here) and files with tied embeddings (checked
 * through the bundled engine against the oracle); qwen2 files, q/k/v
 * biases and RoPE scaling; and the files of these kinds the loader
 * refuses, each with its exact status and diagnostic (the statuses are
 * listed in test_gguf.c, which tests the reader and writer and corrupted
 * files).
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

#include "adapters/adapter.h"
#include "adapters/spec.h"
#include "core/request.h"
#include "core/status.h"
#include "engine/engine.h"
#include "engine/forward.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/model_internal.h"
#include "engine/score.h"
#include "gguf_bytes.h"
#include "gguf_retype.h"
#include "oracles/oracle.h"
#include "support.h"

/* ------------------------------------------------------------------ */
/* Round trips                                                         */
/* ------------------------------------------------------------------ */

static void want_string(const struct assay_gguf *g, const char *key, const char *want)
{
    const char *s = NULL;
    size_t len = 0;
    struct assay_diag diag;
    gguf_want_status(assay_gguf_get_string(g, key, &s, &len, &diag), ASSAY_OK, &diag);
    assert_string_equal(s, want);
    assert_int_equal(len, strlen(want));
}

/* Check the metadata of a saved model with the generic reader. */
static void check_metadata(const struct assay_gguf *g, const struct assay_model_config *c)
{
    struct assay_diag diag;
    assert_int_equal(assay_gguf_version(g), 3);
    assert_int_equal(assay_gguf_alignment(g), 32);
    want_string(g, "general.architecture", "llama");
    want_string(g, "general.name", c->name);
    gguf_want_u32(g, "general.file_type", 0);
    gguf_want_u32(g, "llama.context_length", (uint32_t)c->n_ctx);
    gguf_want_u32(g, "llama.embedding_length", (uint32_t)c->d_model);
    gguf_want_u32(g, "llama.block_count", (uint32_t)c->n_layer);
    gguf_want_u32(g, "llama.feed_forward_length", (uint32_t)c->d_ff);
    gguf_want_u32(g, "llama.attention.head_count", (uint32_t)c->n_head);
    gguf_want_u32(g, "llama.attention.head_count_kv", (uint32_t)c->n_kv_head);
    gguf_want_u32(g, "llama.rope.dimension_count", (uint32_t)c->head_dim);
    gguf_want_u32(g, "llama.vocab_size", (uint32_t)c->vocab);
    float f = 0;
    gguf_want_status(assay_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f, &diag),
                  ASSAY_OK, &diag);
    assert_true(f == c->norm_eps);
    gguf_want_status(assay_gguf_get_f32(g, "llama.rope.freq_base", &f, &diag), ASSAY_OK, &diag);
    assert_true(f == c->rope_theta);

    /* The heads are d_model / n_head wide, so no key/value lengths. */
    assert_int_equal(assay_gguf_find_key(g, "llama.attention.key_length"), -1);
    assert_int_equal(assay_gguf_find_key(g, "general.alignment"), -1);

    want_string(g, "tokenizer.ggml.model", "llama");
    uint64_t n = 0;
    gguf_want_status(assay_gguf_get_array(g, "tokenizer.ggml.tokens", ASSAY_GGUF_TYPE_STRING, &n,
                                       &diag),
                  ASSAY_OK, &diag);
    assert_int_equal(n, 260);
    const struct {
        uint64_t id;
        const char *text;
        int32_t type;
    } tokens[] = {
        {0, "<0x00>", 1},  {10, "<0x0A>", 1},  {65, "<0x41>", 1}, {255, "<0xFF>", 1},
        {256, "<s>", 3},   {257, "</s>", 3},   {258, "<pad>", 3}, {259, "<unk>", 2},
    };
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
        const char *s = NULL;
        int32_t type = 0;
        gguf_want_status(assay_gguf_get_array_string(g, "tokenizer.ggml.tokens", tokens[i].id, &s,
                                                  NULL, &diag),
                      ASSAY_OK, &diag);
        assert_string_equal(s, tokens[i].text);
        gguf_want_status(assay_gguf_get_array_i32(g, "tokenizer.ggml.token_type", tokens[i].id,
                                               &type, &diag),
                      ASSAY_OK, &diag);
        assert_int_equal(type, tokens[i].type);
    }
    gguf_want_status(assay_gguf_get_array(g, "tokenizer.ggml.token_type", ASSAY_GGUF_TYPE_I32, &n,
                                       &diag),
                  ASSAY_OK, &diag);
    assert_int_equal(n, 260);
    gguf_want_status(assay_gguf_get_array(g, "tokenizer.ggml.scores", ASSAY_GGUF_TYPE_F32, &n,
                                       &diag),
                  ASSAY_OK, &diag);
    assert_int_equal(n, 260);
    for (uint64_t i = 0; i < 260; i++) {
        int32_t type = -1;
        float score = 1;
        assert_int_equal(assay_gguf_get_array_i32(g, "tokenizer.ggml.token_type", i, &type, NULL),
                         ASSAY_OK);
        assert_int_equal(type, i < 256 ? 1 : (i == 259 ? 2 : 3));
        assert_int_equal(assay_gguf_get_array_f32(g, "tokenizer.ggml.scores", i, &score, NULL),
                         ASSAY_OK);
        assert_true(score == 0.0f);
    }
    gguf_want_u32(g, "tokenizer.ggml.bos_token_id", 256);
    gguf_want_u32(g, "tokenizer.ggml.eos_token_id", 257);
    gguf_want_u32(g, "tokenizer.ggml.padding_token_id", 258);
    gguf_want_u32(g, "tokenizer.ggml.unknown_token_id", 259);
    bool b = true;
    gguf_want_status(assay_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b, &diag), ASSAY_OK,
                  &diag);
    assert_false(b);
    b = true;
    gguf_want_status(assay_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b, &diag), ASSAY_OK,
                  &diag);
    assert_false(b);

    /* Types are checked: a u32 is not an i32, a string array not an i32 one. */
    int32_t i32;
    gguf_want_status(assay_gguf_get_i32(g, "llama.block_count", &i32, &diag), ASSAY_ERR_PARSE,
                     &diag);
    gguf_want_diag(&diag, "llama.block_count", "expected a value of type i32",
                "got a value of type u32");
    gguf_want_status(
        assay_gguf_get_array(g, "tokenizer.ggml.tokens", ASSAY_GGUF_TYPE_I32, &n, &diag),
        ASSAY_ERR_PARSE, &diag);
    gguf_want_diag(&diag, "tokenizer.ggml.tokens", "expected an array of i32",
                "got an array of string");
    gguf_want_status(assay_gguf_get_bool(g, "general.name", &b, &diag), ASSAY_ERR_PARSE, &diag);
    gguf_want_diag(&diag, "general.name", "a value of type bool", "got a value of type string");
}

/* Tensor names, dims (ne order), types and the data section. */
static void check_tensors(const struct assay_gguf *g, const uint8_t *buf, size_t size,
                          const struct assay_model *m)
{
    const struct assay_model_config *c = &m->cfg;
    int64_t d = c->d_model, q = (int64_t)c->n_head * c->head_dim;
    int64_t kv = (int64_t)c->n_kv_head * c->head_dim, ff = c->d_ff, v = c->vocab;
    size_t n = assay_gguf_n_tensors(g);
    assert_int_equal(n, 3 + 9 * (size_t)c->n_layer);
    const struct {
        size_t index;
        const char *name;
        uint32_t n_dims;
        int64_t ne0, ne1;
    } want[] = {
        {0, "token_embd.weight", 2, d, v},
        {1, "blk.0.attn_norm.weight", 1, d, 1},
        {2, "blk.0.attn_q.weight", 2, d, q},
        {3, "blk.0.attn_k.weight", 2, d, kv},
        {4, "blk.0.attn_v.weight", 2, d, kv},
        {5, "blk.0.attn_output.weight", 2, q, d},
        {6, "blk.0.ffn_norm.weight", 1, d, 1},
        {7, "blk.0.ffn_gate.weight", 2, d, ff},
        {8, "blk.0.ffn_up.weight", 2, d, ff},
        {9, "blk.0.ffn_down.weight", 2, ff, d},
        {10, "blk.1.attn_norm.weight", 1, d, 1},
        {n - 2, "output_norm.weight", 1, d, 1},
        {n - 1, "output.weight", 2, d, v},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct assay_gguf_tensor *t = assay_gguf_tensor_at(g, want[i].index);
        assert_non_null(t);
        assert_string_equal(t->name, want[i].name);
        assert_ptr_equal(assay_gguf_find_tensor(g, want[i].name), t);
        assert_int_equal(t->type, ASSAY_GGML_TYPE_F32);
        assert_int_equal(t->n_dims, want[i].n_dims);
        assert_int_equal(t->ne[0], want[i].ne0);
        assert_int_equal(t->ne[1], want[i].ne1);
        assert_int_equal(t->n_bytes, (size_t)(want[i].ne0 * want[i].ne1) * sizeof(float));
    }
    /* The data section is model->data, byte for byte (every tensor of
     * these configs is a multiple of 32 bytes, so there is no padding). */
    uint64_t start = assay_gguf_data_offset(g);
    assert_int_equal(start % 32, 0);
    assert_int_equal(size, start + (uint64_t)m->n_floats * sizeof(float));
    assert_ptr_equal(assay_gguf_tensor_at(g, 0)->data, buf + start);
    assert_memory_equal(buf + start, m->data, (size_t)m->n_floats * sizeof(float));
    assert_ptr_equal(assay_gguf_find_tensor(g, "blk.1.ffn_up.weight")->data,
                     buf + start + (size_t)((const uint8_t *)m->layers[1].w_up -
                                            (const uint8_t *)m->data));
}

static void roundtrip(const char *config)
{
    struct assay_model_config cfg;
    struct assay_model *m, *back;
    struct assay_diag diag;
    char path[512], path2[512];
    assert_int_equal(assay_model_config_by_name(config, &cfg), ASSAY_OK);
    snprintf(path2, sizeof path2, "gguf-rt-%s.gguf", config);
    assay_test_scratch(path2, path, sizeof path);
    assay_test_scratch("gguf-rt-again.gguf", path2, sizeof path2);

    assert_int_equal(assay_model_init_random(&m, &cfg, 7), ASSAY_OK);
    gguf_want_status(assay_model_save_gguf(m, path, &diag), ASSAY_OK, &diag);
    gguf_want_status(assay_model_load_gguf(&back, path, &diag), ASSAY_OK, &diag);

    assert_memory_equal(back->cfg.name, cfg.name, sizeof cfg.name);
    assert_int_equal(back->cfg.n_layer, cfg.n_layer);
    assert_int_equal(back->cfg.d_model, cfg.d_model);
    assert_int_equal(back->cfg.n_head, cfg.n_head);
    assert_int_equal(back->cfg.n_kv_head, cfg.n_kv_head);
    assert_int_equal(back->cfg.head_dim, cfg.head_dim);
    assert_int_equal(back->cfg.d_ff, cfg.d_ff);
    assert_int_equal(back->cfg.vocab, cfg.vocab);
    assert_int_equal(back->cfg.n_ctx, cfg.n_ctx);
    assert_true(back->cfg.norm_eps == cfg.norm_eps);
    assert_true(back->cfg.rope_theta == cfg.rope_theta);
    assert_int_equal(back->n_floats, m->n_floats);
    assert_memory_equal(back->data, m->data, (size_t)m->n_floats * sizeof(float));
    assert_string_equal(back->sha256, m->sha256);
    assert_memory_equal(back->layers[cfg.n_layer - 1].w_down, m->layers[cfg.n_layer - 1].w_down,
                        (size_t)cfg.d_model * (size_t)cfg.d_ff * sizeof(float));

    size_t size;
    uint8_t *buf = gguf_read_all(path, &size);
    struct assay_gguf *g;
    gguf_want_status(assay_gguf_parse(buf, size, path, &g, &diag), ASSAY_OK, &diag);
    check_metadata(g, &cfg);
    check_tensors(g, buf, size, m);
    assay_gguf_free(g);

    /* Saving the loaded model gives the same bytes. */
    gguf_want_status(assay_model_save_gguf(back, path2, &diag), ASSAY_OK, &diag);
    size_t size2;
    uint8_t *buf2 = gguf_read_all(path2, &size2);
    assert_int_equal(size2, size);
    assert_memory_equal(buf2, buf, size);

    free(buf);
    free(buf2);
    remove(path);
    remove(path2);
    assay_model_free(m);
    assay_model_free(back);
}

static void test_roundtrip_tinygpt(void **state)
{
    (void)state;
    roundtrip("tinygpt");
}

static void test_roundtrip_mini(void **state)
{
    (void)state;
    roundtrip("mini");
}

/* A vocabulary larger than the byte one gets "<extra_N>" fillers; a head
 * narrower than d_model / n_head gets key and value lengths. */
static void test_save_other_shapes(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini_draft();
    cfg.vocab = 270;
    cfg.head_dim = 8; /* 2 heads of 8 in d_model 32 */
    struct assay_model *m, *back;
    struct assay_diag diag;
    char path[512];
    assay_test_scratch("gguf-shapes.gguf", path, sizeof path);
    assert_int_equal(assay_model_init_random(&m, &cfg, 3), ASSAY_OK);
    gguf_want_status(assay_model_save_gguf(m, path, &diag), ASSAY_OK, &diag);
    gguf_want_status(assay_model_load_gguf(&back, path, &diag), ASSAY_OK, &diag);
    assert_int_equal(back->cfg.head_dim, 8);
    assert_int_equal(back->cfg.vocab, 270);
    assert_string_equal(back->sha256, m->sha256);
    struct assay_gguf *g;
    gguf_want_status(assay_gguf_read_file(path, &g, &diag), ASSAY_OK, &diag);
    gguf_want_u32(g, "llama.attention.key_length", 8);
    gguf_want_u32(g, "llama.attention.value_length", 8);
    const char *s;
    int32_t type;
    assert_int_equal(assay_gguf_get_array_string(g, "tokenizer.ggml.tokens", 269, &s, NULL, &diag),
                     ASSAY_OK);
    assert_string_equal(s, "<extra_269>");
    assert_int_equal(assay_gguf_get_array_i32(g, "tokenizer.ggml.token_type", 269, &type, &diag),
                     ASSAY_OK);
    assert_int_equal(type, 1);
    gguf_want_status(assay_gguf_get_array_string(g, "tokenizer.ggml.tokens", 270, &s, NULL, &diag),
                  ASSAY_ERR_INVALID, &diag);
    gguf_want_diag(&diag, "tokenizer.ggml.tokens[270]", "an index below 270", NULL);
    assay_gguf_free(g);
    assay_model_free(m);
    assay_model_free(back);
    remove(path);
}

/* ------------------------------------------------------------------ */
/* Tensor types other than F32, and tied embeddings                    */
/* ------------------------------------------------------------------ */

static float half_value(uint16_t h)
{
    int biased = (h >> 10) & 31, frac = h & 1023;
    float v = biased == 0 ? ldexpf((float)frac, -24) : ldexpf((float)(frac + 1024), biased - 25);
    return (h & 0x8000u) != 0 ? -v : v;
}

/* What a value stored as type (F32, F16 or Q8_0) reads back as, for element
 * i of the row-major tensor x whose rows are ne0 long. */
static float stored_value(uint32_t type, const float *x, int64_t i)
{
    if (type == ASSAY_GGML_TYPE_F16) {
        return half_value(gguf_half_bits(x[i]));
    }
    if (type == ASSAY_GGML_TYPE_Q8_0) {
        const float *block = x + i / 32 * 32;
        float d = gguf_q8_block_scale(block);
        return half_value(gguf_half_bits(d)) * (float)gguf_q8_quant(x[i], d);
    }
    return x[i];
}

static uint32_t all_f16(const struct assay_gguf_tensor *t)
{
    (void)t;
    return ASSAY_GGML_TYPE_F16;
}

/* Q8_0 for the matrices, F32 for the norms (as quantizers leave them). */
static uint32_t matrices_q8_0(const struct assay_gguf_tensor *t)
{
    return t->n_dims == 2 && t->ne[0] % 32 == 0 ? ASSAY_GGML_TYPE_Q8_0 : ASSAY_GGML_TYPE_F32;
}

static uint32_t all_f32(const struct assay_gguf_tensor *t)
{
    (void)t;
    return ASSAY_GGML_TYPE_F32;
}

/* A model loaded from bytes written to a scratch file. */
static struct assay_model *load_bytes(const uint8_t *buf, size_t size, const char *scratch)
{
    char path[512];
    struct assay_diag diag;
    struct assay_model *m = NULL;
    assay_test_scratch(scratch, path, sizeof path);
    gguf_write_all(path, buf, size);
    gguf_want_status(assay_model_load_gguf(&m, path, &diag), ASSAY_OK, &diag);
    remove(path);
    return m;
}

/* Every weight of m is what the same weight of orig reads back as when
 * stored in the type type_of gives its tensor (exactly: no tolerance). */
static void want_stored_weights(const struct assay_model *m, const struct assay_model *orig,
                                uint32_t (*type_of)(const struct assay_gguf_tensor *t))
{
    /* Both models share one layout, so tensor k is at the same offset in
     * both; the file of orig says where each tensor starts. */
    size_t size;
    char path[512];
    struct assay_diag diag;
    assay_test_scratch("gguf-layout.gguf", path, sizeof path);
    gguf_want_status(assay_model_save_gguf(orig, path, &diag), ASSAY_OK, &diag);
    uint8_t *buf = gguf_read_all(path, &size);
    remove(path);
    struct assay_gguf *g;
    gguf_want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    int64_t at = 0, n_diff = 0;
    for (size_t k = 0; k < assay_gguf_n_tensors(g); k++) {
        const struct assay_gguf_tensor *t = assay_gguf_tensor_at(g, k);
        uint32_t type = type_of(t);
        for (int64_t i = 0; i < t->n_elements; i++) {
            float want = stored_value(type, orig->data + at, i);
            float got = m->data[at + i];
            if (memcmp(&want, &got, 4) != 0 && n_diff++ < 5) {
                print_error("%s[%lld]: loaded %.9g, expected %.9g (original %.9g)\n", t->name,
                            (long long)i, (double)got, (double)want, (double)orig->data[at + i]);
            }
        }
        at += t->n_elements;
    }
    assert_int_equal(at, m->n_floats);
    if (n_diff > 0) {
        print_error("%lld weights differ\n", (long long)n_diff);
        fail();
    }
    assay_gguf_free(g);
    free(buf);
}

/* The test-side F16 conversion agrees with the format on values whose
 * encoding is known, so the comparisons above rest on it. */
static void test_half_reference(void **state)
{
    (void)state;
    const struct {
        float x;
        uint16_t h;
    } cases[] = {
        {1.0f, 0x3c00}, {-2.0f, 0xc000}, {65504.0f, 0x7bff}, {0x1p-24f, 0x0001},
        {0x1p-14f, 0x0400}, {0.0f, 0x0000}, {1.0f + 0x1p-11f, 0x3c00}, /* tie to even */
        {1.0f + 3 * 0x1p-11f, 0x3c02}, {0.1f, 0x2e66}, {65520.0f, 0x7c00},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(gguf_half_bits(cases[i].x), cases[i].h);
        if (cases[i].h != 0x7c00) {
            assert_true(half_value(cases[i].h) == half_value(gguf_half_bits(cases[i].x)));
        }
    }
    assert_true(half_value(0x3555) == 0x1.554p-2f);
}

static void test_load_f16(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *orig;
    assert_int_equal(assay_model_init_random(&orig, &cfg, 1), ASSAY_OK);
    size_t size, n;
    uint8_t *buf = gguf_mini_bytes(&size);
    struct gguf_retype r = {all_f16, NULL, NULL};
    uint8_t *f16 = gguf_retyped(buf, size, &r, &n);
    assert_true(n < size / 2 + 65536); /* really two bytes a weight */
    struct assay_model *m = load_bytes(f16, n, "gguf-f16.gguf");
    want_stored_weights(m, orig, all_f16);
    assert_string_equal(m->tensor_types, "F16");
    assert_int_equal(m->layers[cfg.n_layer - 1].types.w_down, ASSAY_GGML_TYPE_F16);
    assert_int_equal(m->output_type, ASSAY_GGML_TYPE_F16);
    assert_false(m->tied);
    assert_string_not_equal(m->sha256, orig->sha256);
    /* The same file with F32 tensors is the original, bit for bit. */
    struct gguf_retype same = {all_f32, NULL, NULL};
    uint8_t *f32 = gguf_retyped(buf, size, &same, &n);
    struct assay_model *m32 = load_bytes(f32, n, "gguf-f32.gguf");
    assert_string_equal(m32->sha256, orig->sha256);
    assert_string_equal(m32->tensor_types, "F32");
    assay_model_free(m32);
    assay_model_free(m);
    assay_model_free(orig);
    free(f32);
    free(f16);
    free(buf);
}

static void test_load_q8_0(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *orig;
    assert_int_equal(assay_model_init_random(&orig, &cfg, 1), ASSAY_OK);
    size_t size, n;
    uint8_t *buf = gguf_mini_bytes(&size);
    struct gguf_retype r = {matrices_q8_0, NULL, NULL};
    uint8_t *q8 = gguf_retyped(buf, size, &r, &n);
    struct assay_model *m = load_bytes(q8, n, "gguf-q8.gguf");
    want_stored_weights(m, orig, matrices_q8_0);
    assert_string_equal(m->tensor_types, "Q8_0+F32");
    /* every matrix is recorded with its own type */
    assert_int_equal(m->tok_embd_type, ASSAY_GGML_TYPE_Q8_0);
    assert_int_equal(m->output_type, ASSAY_GGML_TYPE_Q8_0);
    for (int32_t l = 0; l < cfg.n_layer; l++) {
        const struct assay_layer_types *t = &m->layers[l].types;
        uint32_t got[7] = {t->wq, t->wk, t->wv, t->wo, t->w_gate, t->w_up, t->w_down};
        for (int i = 0; i < 7; i++) {
            assert_int_equal(got[i], ASSAY_GGML_TYPE_Q8_0);
        }
    }
    /* Within half a step of the original, plus what storing d as f16
     * (relative error 2^-11, times |q| <= 127) adds: a rounding, not some
     * other function of it. */
    float worst = 0.0f;
    for (int64_t i = 0; i < (int64_t)cfg.vocab * cfg.d_model; i++) {
        float step = gguf_q8_block_scale(orig->tok_embd + i / 32 * 32);
        worst = fmaxf(worst, fabsf(m->tok_embd[i] - orig->tok_embd[i]) / step);
    }
    printf("largest |loaded - original| / step in token_embd: %.4f\n", (double)worst);
    assert_true(worst <= 0.5f + 127.0f * 0x1p-11f);
    assay_model_free(m);
    assay_model_free(orig);
    free(q8);
    free(buf);
}

/* Greedy continuations of a few prompts: by the bundled engine opened on
 * path, and by the oracle on model. */
static void want_engine_matches_oracle(const char *path, const struct assay_model *model)
{
    enum { N_PROMPT = 3, PROMPT_LEN = 12, N_GEN = 10 };
    char spec[600];
    snprintf(spec, sizeof spec, "bundled:model=%s", path);
    struct assay_adapter a;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    gguf_want_status(assay_adapter_open_spec(spec, &a, &diag), ASSAY_OK, &diag);
    int32_t prompt[N_PROMPT][PROMPT_LEN], got[N_PROMPT][N_GEN];
    for (int r = 0; r < N_PROMPT; r++) {
        for (int i = 0; i < PROMPT_LEN; i++) {
            prompt[r][i] = (i * 37 + r * 11 + 5) % 256;
        }
        struct assay_request req = {(uint64_t)r, prompt[r], PROMPT_LEN, N_GEN, -1,
                                    assay_sampling_greedy()};
        assert_int_equal(a.vt->add_request(a.self, &req), ASSAY_OK);
    }
    while (a.vt->has_work(a.self)) {
        const struct assay_event *ev;
        size_t n;
        assert_int_equal(a.vt->step(a.self, &ev, &n), ASSAY_OK);
        for (size_t i = 0; i < n; i++) {
            if (ev[i].kind == ASSAY_EVENT_TOKEN) {
                got[ev[i].request_id][ev[i].index] = ev[i].token;
            }
        }
    }
    assay_adapter_close(&a);
    struct assay_oracle *o;
    assert_int_equal(assay_oracle_init(&o, model, PROMPT_LEN + N_GEN), ASSAY_OK);
    double *logits = malloc(sizeof(double) * (size_t)model->cfg.vocab);
    assert_non_null(logits);
    for (int r = 0; r < N_PROMPT; r++) {
        int32_t seq[PROMPT_LEN + N_GEN];
        memcpy(seq, prompt[r], sizeof prompt[r]);
        for (int k = 0; k < N_GEN; k++) {
            assert_int_equal(assay_oracle_next_logits(o, seq, PROMPT_LEN + k, logits), ASSAY_OK);
            int32_t best = 0;
            for (int32_t v = 1; v < model->cfg.vocab; v++) {
                best = logits[v] > logits[best] ? v : best;
            }
            if (got[r][k] != best) {
                print_error("prompt %d token %d: engine %d, oracle %d\n", r, k, (int)got[r][k],
                            (int)best);
                fail();
            }
            seq[PROMPT_LEN + k] = best;
        }
    }
    free(logits);
    assay_oracle_free(o);
}

static void test_load_tied(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *orig;
    assert_int_equal(assay_model_init_random(&orig, &cfg, 1), ASSAY_OK);
    size_t size, n;
    uint8_t *buf = gguf_mini_bytes(&size);
    struct gguf_retype r = {all_f32, "output.weight", NULL};
    uint8_t *tied = gguf_retyped(buf, size, &r, &n);
    char path[512];
    struct assay_diag diag;
    assay_test_scratch("gguf-tied.gguf", path, sizeof path);
    gguf_write_all(path, tied, n);
    struct assay_model *m;
    gguf_want_status(assay_model_load_gguf(&m, path, &diag), ASSAY_OK, &diag);
    int64_t embd = (int64_t)cfg.vocab * cfg.d_model;
    assert_true(m->tied);
    assert_ptr_equal(m->output, m->tok_embd);
    assert_int_equal(m->n_floats, assay_model_config_n_params(&cfg) - embd);
    assert_memory_equal(m->output, orig->tok_embd, sizeof(float) * (size_t)embd);
    assert_memory_equal(m->data, orig->data, sizeof(float) * (size_t)m->n_floats);
    /* A clone is tied to its own embedding, and both free cleanly. */
    struct assay_model *c;
    assert_int_equal(assay_model_clone(m, &c), ASSAY_OK);
    assert_true(c->tied);
    assert_ptr_equal(c->output, c->tok_embd);
    assert_ptr_not_equal(c->output, m->output);
    assert_string_equal(c->sha256, m->sha256);
    assert_memory_equal(c->data, m->data, sizeof(float) * (size_t)m->n_floats);
    assay_model_free(c);
    /* Saved, it is a tied file again (no output.weight), with the same
     * weights. */
    char again[512];
    assay_test_scratch("gguf-tied-again.gguf", again, sizeof again);
    gguf_want_status(assay_model_save_gguf(m, again, &diag), ASSAY_OK, &diag);
    struct assay_model *m2;
    gguf_want_status(assay_model_load_gguf(&m2, again, &diag), ASSAY_OK, &diag);
    assert_true(m2->tied);
    assert_string_equal(m2->sha256, m->sha256);
    assay_model_free(m2);
    remove(again);
    /* The engine and the oracle agree on it, and its greedy tokens are
     * those of the untied model whose output is its embedding. */
    want_engine_matches_oracle(path, m);
    memcpy(orig->output, orig->tok_embd, sizeof(float) * (size_t)embd);
    char untied[512];
    assay_test_scratch("gguf-untied.gguf", untied, sizeof untied);
    gguf_want_status(assay_model_save_gguf(orig, untied, &diag), ASSAY_OK, &diag);
    want_engine_matches_oracle(untied, m);
    remove(untied);
    remove(path);
    assay_model_free(m);
    assay_model_free(orig);
    free(tied);
    free(buf);
}

static uint32_t q4_1_attn_k(const struct assay_gguf_tensor *t)
{
    return strcmp(t->name, "blk.1.attn_k.weight") == 0 ? 3u /* Q4_1 */ : ASSAY_GGML_TYPE_F32;
}

static uint32_t iq2_xs_output(const struct assay_gguf_tensor *t)
{
    return strcmp(t->name, "output.weight") == 0 ? 17u /* IQ2_XS */ : ASSAY_GGML_TYPE_F32;
}

static uint32_t q3_k_down(const struct assay_gguf_tensor *t)
{
    return strcmp(t->name, "blk.0.ffn_down.weight") == 0 ? 11u /* Q3_K */ : ASSAY_GGML_TYPE_F32;
}

static uint32_t q4_k_norm(const struct assay_gguf_tensor *t)
{
    return strcmp(t->name, "blk.0.ffn_norm.weight") == 0 ? ASSAY_GGML_TYPE_Q4_K
                                                          : ASSAY_GGML_TYPE_F32;
}

static void test_load_bad_types(void **state)
{
    (void)state;
    size_t size, n;
    uint8_t *buf = gguf_mini_bytes(&size);
    /* A type the reader sizes but assay does not decode. */
    struct gguf_retype r = {q4_1_attn_k, NULL, NULL};
    uint8_t *c = gguf_retyped(buf, size, &r, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "blk.1.attn_k.weight",
                   "expected a tensor type assay decodes (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q5_K "
                   "or Q6_K)",
                   "got Q4_1 (type 3)");
    free(c);
    r.type_of = q3_k_down;
    c = gguf_retyped(buf, size, &r, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "blk.0.ffn_down.weight", "Q6_K",
                   "got Q3_K (type 11)");
    free(c);
    /* A type the reader cannot even size is refused by the reader, which
     * names the tensor and the type too. */
    r.type_of = iq2_xs_output;
    c = gguf_retyped(buf, size, &r, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "tensor output.weight",
                   "a ggml type whose size is known", "got IQ2_XS (17)");
    free(c);
    /* A row of 64 elements is a quarter of a Q4_K super-block. */
    r.type_of = q4_k_norm;
    c = gguf_retyped(buf, size, &r, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_PARSE, "tensor blk.0.ffn_norm.weight",
                   "expected ne[0] a multiple of the Q4_K block of 256", "got 64");
    free(c);
    /* A NaN block scale: the tensor, its row and its block. */
    r.type_of = matrices_q8_0;
    c = gguf_retyped(buf, size, &r, &n);
    size_t at = gguf_tensor_data_pos(c, n, "blk.1.ffn_up.weight") + 2 * 34 + 34;
    gguf_put_u32(c, at, gguf_get_u32(c, at) | 0x7e00u); /* block 1 of row 1 (two blocks a row) */
    gguf_want_load_fail(c, n, ASSAY_ERR_PARSE, "blk.1.ffn_up.weight row 1: Q8_0 block 1 at byte 34",
                   "expected a finite f16 scale", "got NaN");
    free(c);
    free(buf);
}

static void test_load_tied_stray(void **state)
{
    (void)state;
    size_t size, n;
    uint8_t *buf = gguf_mini_bytes(&size);
    struct gguf_retype r = {all_f32, "output.weight", "output.bias"};
    uint8_t *c = gguf_retyped(buf, size, &r, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_PARSE, "output.bias",
                   "expected only the 20 tensors of a 2-layer tied llama model",
                   "got unknown tensor output.bias");
    free(c);
    /* The same stray in an untied file. */
    r.drop = NULL;
    c = gguf_retyped(buf, size, &r, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_PARSE, "output.bias", "only the 21 tensors", NULL);
    free(c);
    free(buf);
}

/* ------------------------------------------------------------------ */
/* Architectures, biases and RoPE scaling                              */
/* ------------------------------------------------------------------ */

/* A saved model's file bytes. */
static uint8_t *model_bytes(const struct assay_model *m, size_t *size)
{
    char path[512];
    struct assay_diag diag;
    assay_test_scratch("gguf-arch.gguf", path, sizeof path);
    gguf_want_status(assay_model_save_gguf(m, path, &diag), ASSAY_OK, &diag);
    uint8_t *buf = gguf_read_all(path, size);
    remove(path);
    return buf;
}

/* The mini shape as qwen2 or llama, with or without biases, RoPE scaling
 * and frequency divisors; seed 5. */
static struct assay_model *arch_model(enum assay_arch arch, bool bias, bool tied, float rope_scale,
                                      bool rope_freqs)
{
    struct assay_model_config cfg = assay_model_config_mini();
    snprintf(cfg.name, sizeof cfg.name, "mini-%s", assay_arch_name(arch));
    cfg.arch = arch;
    cfg.qkv_bias = bias;
    cfg.rope_scale = rope_scale;
    cfg.rope_freqs = rope_freqs;
    struct assay_model_init_params params = assay_model_init_default_params();
    params.tied = tied;
    struct assay_model *m;
    assert_int_equal(assay_model_init_random_params(&m, &cfg, params, 5), ASSAY_OK);
    return m;
}

/* The file bytes with one more metadata pair (key, value type, value
 * bytes) after the others; the tensor data is moved to stay aligned. */
static uint8_t *with_kv(const uint8_t *buf, size_t size, const char *key, uint32_t type,
                        const void *value, size_t value_len, size_t *out_size)
{
    struct assay_gguf *g;
    struct assay_diag diag;
    gguf_want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    size_t n = assay_gguf_n_tensors(g);
    const char *first = assay_gguf_tensor_at(g, 0)->name;
    size_t meta_end = gguf_tensor_dims_pos(buf, size, first) - 8 - strlen(first);
    size_t infos_end = gguf_tensor_offset_pos(buf, size, assay_gguf_tensor_at(g, n - 1)->name) + 8;
    size_t data_at = (size_t)assay_gguf_data_offset(g);
    size_t n_kv = assay_gguf_n_kv(g);
    assay_gguf_free(g);
    size_t rec = 8 + strlen(key) + 4 + value_len;
    size_t infos = meta_end + rec + (infos_end - meta_end);
    size_t data_to = (infos + 31) / 32 * 32;
    uint8_t *out = calloc(1, data_to + (size - data_at));
    assert_non_null(out);
    memcpy(out, buf, meta_end);
    gguf_put_u64(out, 16, n_kv + 1);
    gguf_put_u64(out, meta_end, strlen(key));
    memcpy(out + meta_end + 8, key, strlen(key));
    gguf_put_u32(out, meta_end + 8 + strlen(key), type);
    memcpy(out + meta_end + 12 + strlen(key), value, value_len);
    memcpy(out + meta_end + rec, buf + meta_end, infos_end - meta_end);
    memcpy(out + data_to, buf + data_at, size - data_at);
    *out_size = data_to + (size - data_at);
    return out;
}

static uint8_t *with_kv_f32(const uint8_t *buf, size_t size, const char *key, float v,
                            size_t *out_size)
{
    uint8_t b[4];
    uint32_t u;
    memcpy(&u, &v, 4);
    gguf_put_u32(b, 0, u);
    return with_kv(buf, size, key, ASSAY_GGUF_TYPE_F32, b, 4, out_size);
}

static uint8_t *with_kv_string(const uint8_t *buf, size_t size, const char *key, const char *s,
                               size_t *out_size)
{
    uint8_t b[8 + 64];
    assert_true(strlen(s) <= 64);
    gguf_put_u64(b, 0, strlen(s));
    memcpy(b + 8, s, strlen(s));
    return with_kv(buf, size, key, ASSAY_GGUF_TYPE_STRING, b, 8 + strlen(s), out_size);
}

/* A model loaded from bytes that must load. */
static struct assay_model *load_ok(const uint8_t *buf, size_t size)
{
    return load_bytes(buf, size, "gguf-arch-ok.gguf");
}

/* back is m read back: config, tying, which tensors exist, and every
 * weight bit for bit. */
static void want_same_model(const struct assay_model *back, const struct assay_model *m)
{
    const struct assay_model_config *c = &m->cfg, *b = &back->cfg;
    assert_string_equal(b->name, c->name);
    assert_int_equal(b->arch, c->arch);
    assert_int_equal(b->n_layer, c->n_layer);
    assert_int_equal(b->d_model, c->d_model);
    assert_int_equal(b->n_head, c->n_head);
    assert_int_equal(b->n_kv_head, c->n_kv_head);
    assert_int_equal(b->head_dim, c->head_dim);
    assert_int_equal(b->d_ff, c->d_ff);
    assert_int_equal(b->vocab, c->vocab);
    assert_int_equal(b->n_ctx, c->n_ctx);
    assert_true(b->norm_eps == c->norm_eps);
    assert_true(b->rope_theta == c->rope_theta);
    assert_true(b->rope_scale == c->rope_scale);
    assert_int_equal(b->rope_freqs, c->rope_freqs);
    assert_int_equal(b->qkv_bias, c->qkv_bias);
    assert_int_equal(back->tied, m->tied);
    assert_int_equal(back->output == back->tok_embd, m->tied);
    assert_int_equal(back->rope_freqs != NULL, c->rope_freqs);
    for (int32_t l = 0; l < c->n_layer; l++) {
        const struct assay_layer_weights *w = &back->layers[l];
        assert_int_equal(w->bq != NULL, c->qkv_bias);
        assert_int_equal(w->bk != NULL, c->qkv_bias);
        assert_int_equal(w->bv != NULL, c->qkv_bias);
    }
    assert_int_equal(back->n_floats, m->n_floats);
    assert_memory_equal(back->data, m->data, sizeof(float) * (size_t)m->n_floats);
    assert_string_equal(back->sha256, m->sha256);
}

/* Save m, load it back, check it, and check that saving the loaded model
 * gives the same bytes; returns the file's bytes. */
static uint8_t *roundtrip_model(const struct assay_model *m, size_t *size)
{
    uint8_t *buf = model_bytes(m, size);
    struct assay_model *back = load_ok(buf, *size);
    want_same_model(back, m);
    size_t size2;
    uint8_t *buf2 = model_bytes(back, &size2);
    assert_int_equal(size2, *size);
    assert_memory_equal(buf2, buf, *size);
    free(buf2);
    assay_model_free(back);
    return buf;
}

static void want_tensor(const struct assay_gguf *g, size_t index, const char *name, int64_t ne0)
{
    const struct assay_gguf_tensor *t = assay_gguf_tensor_at(g, index);
    assert_non_null(t);
    assert_string_equal(t->name, name);
    assert_int_equal(t->n_dims, 1);
    assert_int_equal(t->ne[0], ne0);
}

/* qwen2 with biases and tied embeddings: the metadata under "qwen2.", the
 * three biases after their matrices, no output.weight. */
static void test_roundtrip_qwen2_bias_tied(void **state)
{
    (void)state;
    struct assay_model *m = arch_model(ASSAY_ARCH_QWEN2, true, true, 0.0f, false);
    assert_true(m->tied);
    size_t size;
    uint8_t *buf = roundtrip_model(m, &size);
    struct assay_gguf *g;
    struct assay_diag diag;
    gguf_want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    want_string(g, "general.architecture", "qwen2");
    gguf_want_u32(g, "qwen2.block_count", 2);
    gguf_want_u32(g, "qwen2.embedding_length", 64);
    gguf_want_u32(g, "qwen2.attention.head_count_kv", 2);
    assert_int_equal(assay_gguf_find_key(g, "llama.block_count"), -1);
    assert_int_equal(assay_gguf_find_key(g, "qwen2.rope.scaling.type"), -1);
    assert_int_equal(assay_gguf_n_tensors(g), 2 + 12 * 2);
    want_tensor(g, 3, "blk.0.attn_q.bias", 64);
    want_tensor(g, 5, "blk.0.attn_k.bias", 32);
    want_tensor(g, 7, "blk.0.attn_v.bias", 32);
    want_tensor(g, 12 + 7, "blk.1.attn_v.bias", 32);
    assert_null(assay_gguf_find_tensor(g, "output.weight"));
    assert_null(assay_gguf_find_tensor(g, "rope_freqs.weight"));
    assay_gguf_free(g);
    free(buf);
    assay_model_free(m);
}

/* llama with linear RoPE scaling and llama 3.1's frequency divisors. */
static void test_roundtrip_llama_rope_scaling(void **state)
{
    (void)state;
    struct assay_model *m = arch_model(ASSAY_ARCH_LLAMA, false, false, 2.0f, true);
    size_t size;
    uint8_t *buf = roundtrip_model(m, &size);
    struct assay_gguf *g;
    struct assay_diag diag;
    gguf_want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    want_string(g, "general.architecture", "llama");
    want_string(g, "llama.rope.scaling.type", "linear");
    float f = 0;
    gguf_want_status(assay_gguf_get_f32(g, "llama.rope.scaling.factor", &f, &diag), ASSAY_OK,
                     &diag);
    assert_true(f == 2.0f);
    size_t n = assay_gguf_n_tensors(g);
    assert_int_equal(n, 3 + 9 * 2 + 1);
    want_tensor(g, n - 1, "rope_freqs.weight", 8);
    assert_memory_equal(assay_gguf_tensor_at(g, n - 1)->data, m->rope_freqs, 8 * sizeof(float));
    assert_null(assay_gguf_find_tensor(g, "blk.0.attn_q.bias"));
    assay_gguf_free(g);
    free(buf);
    assay_model_free(m);

    /* Tied and biased, with rope_freqs: the divisors follow output_norm. */
    m = arch_model(ASSAY_ARCH_LLAMA, true, true, 0.0f, true);
    buf = roundtrip_model(m, &size);
    gguf_want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    n = assay_gguf_n_tensors(g);
    assert_int_equal(n, 2 + 12 * 2 + 1);
    assert_string_equal(assay_gguf_tensor_at(g, n - 2)->name, "output_norm.weight");
    want_tensor(g, n - 1, "rope_freqs.weight", 8);
    assert_int_equal(assay_gguf_find_key(g, "llama.rope.scaling.type"), -1);
    assay_gguf_free(g);
    free(buf);
    assay_model_free(m);
}

/* The keys are read under the file's architecture, and the head size and
 * rotation follow llama.cpp's defaults. */
static void test_load_arch_metadata(void **state)
{
    (void)state;
    struct assay_model *m = arch_model(ASSAY_ARCH_QWEN2, true, false, 0.0f, false);
    size_t size;
    uint8_t *buf = model_bytes(m, &size);
    uint8_t *c = gguf_copy_of(buf, size);
    /* A llama key in a qwen2 file is not read, and the reverse. */
    memcpy(c + gguf_str_pos(buf, size, "qwen2.block_count") + 8, "llama", 5);
    gguf_want_load_fail(c, size, ASSAY_ERR_NOT_FOUND, "qwen2.block_count", "a value of type u32",
                   "got no such key");
    memcpy(c, buf, size);
    memcpy(c + gguf_str_pos(buf, size, "qwen2") + 8, "llama", 5); /* general.architecture */
    gguf_want_load_fail(c, size, ASSAY_ERR_NOT_FOUND, "llama.block_count", NULL, "got no such key");
    /* Validation names the file's keys too. */
    memcpy(c, buf, size);
    gguf_put_u32(c, gguf_kv_value_pos(buf, size, "qwen2.attention.head_count_kv"), 3);
    gguf_want_load_fail(c, size, ASSAY_ERR_INVALID, "qwen2.attention.head_count_kv",
                   "a divisor of qwen2.attention.head_count", "got 3 (head_count 4)");
    /* Without rope.dimension_count the whole head (d_model / head_count)
     * turns. */
    memcpy(c, buf, size);
    memcpy(c + gguf_str_pos(buf, size, "qwen2.rope.dimension_count") + 8, "x", 1);
    struct assay_model *back = load_ok(c, size);
    assert_int_equal(back->cfg.head_dim, 16);
    assert_int_equal(back->cfg.arch, ASSAY_ARCH_QWEN2);
    assert_string_equal(back->sha256, m->sha256);
    assay_model_free(back);
    /* A partial rotation is refused. */
    memcpy(c, buf, size);
    gguf_put_u32(c, gguf_kv_value_pos(buf, size, "qwen2.rope.dimension_count"), 8);
    gguf_want_load_fail(c, size, ASSAY_ERR_UNSUPPORTED, "qwen2.rope.dimension_count",
                   "expected the head size", "got 8 (head size 16)");
    free(c);
    free(buf);
    assay_model_free(m);

    /* Heads of 8 in d_model 64: key_length says so; without it a head is
     * d_model / head_count = 16 wide and the tensors do not fit. */
    struct assay_model_config cfg = assay_model_config_mini();
    cfg.arch = ASSAY_ARCH_QWEN2;
    cfg.head_dim = 8;
    assert_int_equal(assay_model_init_random(&m, &cfg, 2), ASSAY_OK);
    buf = model_bytes(m, &size);
    back = load_ok(buf, size);
    assert_int_equal(back->cfg.head_dim, 8);
    assay_model_free(back);
    c = gguf_copy_of(buf, size);
    /* Without value_length a value head is d_model / head_count wide
     * whatever key_length says (llama.cpp's default), so values and keys
     * differ. */
    memcpy(c + gguf_str_pos(buf, size, "qwen2.attention.value_length") + 8, "x", 1);
    gguf_want_load_fail(c, size, ASSAY_ERR_UNSUPPORTED, "qwen2.attention.value_length",
                   "expected the head size (values as wide as keys)",
                   "got no such key: embedding_length / head_count = 16 (head size 8)");
    memcpy(c, buf, size);
    memcpy(c + gguf_str_pos(buf, size, "qwen2.attention.key_length") + 8, "x", 1);
    gguf_want_load_fail(c, size, ASSAY_ERR_UNSUPPORTED, "qwen2.attention.value_length",
                   "expected the head size", "got 8 (head size 16)");
    memcpy(c + gguf_str_pos(buf, size, "qwen2.attention.value_length") + 8, "x", 1);
    memcpy(c + gguf_str_pos(buf, size, "qwen2.rope.dimension_count") + 8, "x", 1);
    gguf_want_load_fail(c, size, ASSAY_ERR_PARSE, "blk.0.attn_q.weight", "expected ne [64, 64]",
                   "got ne [64, 32]");
    free(c);
    free(buf);
    assay_model_free(m);
}

/* rope.scaling: the type, the factor under either name, the attention
 * factor. */
static void test_load_rope_scaling(void **state)
{
    (void)state;
    struct assay_model *m = arch_model(ASSAY_ARCH_LLAMA, false, false, 0.0f, false);
    size_t size, n;
    uint8_t *buf = model_bytes(m, &size);
    uint8_t *c = with_kv_string(buf, size, "llama.rope.scaling.type", "yarn", &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "llama.rope.scaling.type",
                   "expected \"none\" or \"linear\"", "got \"yarn\"");
    free(c);
    c = with_kv_string(buf, size, "llama.rope.scaling.type", "longrope", &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "llama.rope.scaling.type", NULL,
                   "got \"longrope\"");
    free(c);
    c = with_kv_f32(buf, size, "llama.rope.scaling.attn_factor", 2.0f, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "llama.rope.scaling.attn_factor",
                   "expected 1 (no attention scaling)", "got 2");
    free(c);
    c = with_kv_f32(buf, size, "llama.rope.scaling.attn_factor", 1.0f, &n);
    struct assay_model *back = load_ok(c, n);
    assert_true(back->cfg.rope_scale == 0.0f);
    assay_model_free(back);
    free(c);
    /* The old name of the factor, and no type: linear. */
    c = with_kv_f32(buf, size, "llama.rope.scale_linear", 4.0f, &n);
    back = load_ok(c, n);
    assert_true(back->cfg.rope_scale == 4.0f);
    assert_string_equal(back->sha256, m->sha256);
    assay_model_free(back);
    free(c);
    /* Type "none" turns scaling off whatever the factor says. */
    c = with_kv_string(buf, size, "llama.rope.scaling.type", "none", &n);
    size_t n2;
    uint8_t *c2 = with_kv_f32(c, n, "llama.rope.scaling.factor", 2.0f, &n2);
    back = load_ok(c2, n2);
    assert_true(back->cfg.rope_scale == 0.0f);
    assay_model_free(back);
    free(c2);
    free(c);
    c = with_kv_f32(buf, size, "llama.rope.scale_linear", -1.0f, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_INVALID, "llama.rope.scale_linear",
                   "expected 0 (none) or a finite number > 0", "got -1");
    free(c);
    free(buf);
    assay_model_free(m);

    m = arch_model(ASSAY_ARCH_QWEN2, false, false, 2.0f, false);
    buf = model_bytes(m, &size);
    back = load_ok(buf, size);
    assert_true(back->cfg.rope_scale == 2.0f);
    assay_model_free(back);
    c = gguf_copy_of(buf, size);
    size_t factor = gguf_kv_value_pos(buf, size, "qwen2.rope.scaling.factor");
    const struct {
        float value;
        const char *got;
    } bad[] = {{-1.0f, "got -1"}, {NAN, "nan"}, {INFINITY, "got inf"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t u;
        memcpy(&u, &bad[i].value, 4);
        gguf_put_u32(c, factor, u);
        gguf_want_load_fail(c, size, ASSAY_ERR_INVALID, "qwen2.rope.scaling.factor",
                       "expected 0 (none) or a finite number > 0", bad[i].got);
    }
    free(c);
    free(buf);
    assay_model_free(m);
}

/* Biases: layer 0's q bias decides, and then every layer has all three. */
static void test_load_bias_tensors(void **state)
{
    (void)state;
    struct assay_model *m = arch_model(ASSAY_ARCH_QWEN2, true, false, 0.0f, false);
    size_t size, n;
    uint8_t *buf = model_bytes(m, &size);
    struct gguf_retype r = {all_f32, "blk.0.attn_k.bias", NULL};
    uint8_t *c = gguf_retyped(buf, size, &r, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_NOT_FOUND, "blk.0.attn_k.bias",
                        "expected a tensor of ne [32]", "got no such tensor");
    free(c);
    r.drop = "blk.1.attn_v.bias";
    c = gguf_retyped(buf, size, &r, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_NOT_FOUND, "blk.1.attn_v.bias",
                        "expected a tensor of ne [32]", "got no such tensor");
    free(c);
    /* Without layer 0's q bias the model has none, so the others are
     * strays. */
    r.drop = "blk.0.attn_q.bias";
    c = gguf_retyped(buf, size, &r, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_PARSE, "blk.0.attn_k.bias",
                   "expected only the 21 tensors of a 2-layer qwen2 model",
                   "got unknown tensor blk.0.attn_k.bias");
    free(c);
    /* A bias of the wrong length. */
    c = gguf_copy_of(buf, size);
    gguf_put_u64(c, gguf_tensor_dims_pos(buf, size, "blk.1.attn_q.bias") + 4, 32);
    gguf_want_load_fail(c, size, ASSAY_ERR_PARSE, "blk.1.attn_q.bias", "expected ne [64]",
                   "got ne [32]");
    free(c);
    free(buf);
    assay_model_free(m);
    /* A bias in layer 1 of a model whose layer 0 has none. */
    buf = gguf_mini_bytes(&size);
    r.drop = NULL;
    r.stray = "blk.1.attn_q.bias";
    c = gguf_retyped(buf, size, &r, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_PARSE, "blk.1.attn_q.bias",
                   "expected only the 21 tensors of a 2-layer llama model",
                   "got unknown tensor blk.1.attn_q.bias");
    free(c);
    free(buf);
}

/* rope_freqs.weight: head_dim / 2 finite positive divisors. */
static void test_load_rope_freqs(void **state)
{
    (void)state;
    struct assay_model *m = arch_model(ASSAY_ARCH_LLAMA, false, false, 0.0f, true);
    size_t size;
    uint8_t *buf = model_bytes(m, &size);
    uint8_t *c = gguf_copy_of(buf, size);
    size_t at = gguf_tensor_data_pos(buf, size, "rope_freqs.weight");
    const struct {
        int element;
        float value;
        const char *expected, *got;
    } bad[] = {
        {3, 0.0f, "expected positive frequency divisors", "got 0 at element 3"},
        {0, -2.0f, "expected positive frequency divisors", "got -2 at element 0"},
        {7, NAN, "expected finite weights", "got NaN at element 7"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(c, buf, size);
        memcpy(c + at + 4 * (size_t)bad[i].element, &bad[i].value, 4);
        gguf_want_load_fail(c, size, ASSAY_ERR_PARSE, "rope_freqs.weight", bad[i].expected,
                            bad[i].got);
    }
    memcpy(c, buf, size);
    gguf_put_u64(c, gguf_tensor_dims_pos(buf, size, "rope_freqs.weight") + 4, 4);
    gguf_want_load_fail(c, size, ASSAY_ERR_PARSE, "rope_freqs.weight", "expected ne [8]",
                        "got ne [4]");
    /* Small positive divisors are divisors like any other. */
    memcpy(c, buf, size);
    float tiny = 1e-30f;
    memcpy(c + at, &tiny, 4);
    struct assay_model *back = load_ok(c, size);
    assert_true(back->rope_freqs[0] == tiny);
    assay_model_free(back);
    free(c);
    free(buf);
    assay_model_free(m);
}

/* An architecture other than llama and qwen2, one whose name only starts
 * like them, and qwen2 with what only llama has. */
static void test_load_other_arch(void **state)
{
    (void)state;
    struct assay_model *m = arch_model(ASSAY_ARCH_QWEN2, true, false, 0.0f, false);
    size_t size;
    uint8_t *buf = model_bytes(m, &size);
    uint8_t *c = gguf_copy_of(buf, size);
    memcpy(c + gguf_str_pos(buf, size, "qwen2") + 8, "qwen3", 5);
    gguf_want_load_fail(c, size, ASSAY_ERR_UNSUPPORTED, "general.architecture",
                   "expected \"llama\" or \"qwen2\"", "got \"qwen3\"");
    memcpy(c, buf, size);
    memcpy(c + gguf_str_pos(buf, size, "qwen2") + 8, "qwen\0", 5);
    gguf_want_load_fail(c, size, ASSAY_ERR_UNSUPPORTED, "general.architecture", NULL,
                        "got \"qwen\"");
    free(c);
    /* llama.cpp's qwen2 has no RoPE frequency divisors: in a qwen2 file
     * rope_freqs.weight is a tensor nobody knows, and a qwen2 config with
     * them is not made. */
    size_t n;
    struct gguf_retype r = {all_f32, NULL, "rope_freqs.weight"};
    c = gguf_retyped(buf, size, &r, &n);
    gguf_want_load_fail(c, n, ASSAY_ERR_PARSE, "rope_freqs.weight",
                   "expected only the 27 tensors of a 2-layer biased qwen2 model",
                   "got unknown tensor rope_freqs.weight");
    free(c);
    struct assay_model_config cfg = m->cfg;
    cfg.rope_freqs = true;
    struct assay_diag diag;
    assay_diag_clear(&diag); /* validation names no file: it keeps the caller's */
    gguf_want_status(assay_model_config_validate(&cfg, &diag), ASSAY_ERR_INVALID, &diag);
    gguf_want_diag(&diag, "rope_freqs.weight", "only in a llama model", "in a qwen2 model");
    struct assay_model *q = (struct assay_model *)&q;
    assert_int_equal(assay_model_init_random(&q, &cfg, 1), ASSAY_ERR_INVALID);
    assert_null(q);
    cfg.arch = ASSAY_ARCH_LLAMA;
    gguf_want_status(assay_model_config_validate(&cfg, &diag), ASSAY_OK, &diag);
    free(buf);
    assay_model_free(m);
}

/* ------------------------------------------------------------------ */
/* Mapped models                                                       */
/* ------------------------------------------------------------------ */

/* A matrix of a mapped model decoded whole equals the resident one's. */
static void want_same_matrix(const char *what, int32_t l, const float *resident,
                             const struct assay_matrix_file *file, int64_t rows, int64_t cols)
{
    float *got = malloc(sizeof(float) * (size_t)(rows * cols));
    assert_non_null(got);
    assert_int_equal(assay_model_matrix_rows(NULL, file, cols, 0, rows, got), ASSAY_OK);
    if (memcmp(got, resident, sizeof(float) * (size_t)(rows * cols)) != 0) {
        print_error("%s of layer %d differs between the mapped and the resident load\n", what,
                    (int)l);
        fail();
    }
    /* a part of it, from the middle, and the copy a resident model gives */
    assert_int_equal(assay_model_matrix_rows(resident, NULL, cols, rows / 2, 1, got), ASSAY_OK);
    assert_memory_equal(got, resident + rows / 2 * cols, sizeof(float) * (size_t)cols);
    free(got);
}

/* The oracle's logits of a prompt on model with n_threads threads. */
static double *oracle_logits(const struct assay_model *model, int32_t n_threads, int32_t len,
                             double *next)
{
    struct assay_oracle *o;
    assert_int_equal(assay_oracle_init(&o, model, len), ASSAY_OK);
    assert_int_equal(assay_oracle_set_threads(o, n_threads), ASSAY_OK);
    int32_t tokens[64];
    assert_true(len <= 64);
    for (int32_t t = 0; t < len; t++) {
        tokens[t] = (t * 53 + 7) % model->cfg.vocab;
    }
    double *logits = malloc(sizeof(double) * (size_t)len * (size_t)model->cfg.vocab);
    assert_non_null(logits);
    assert_int_equal(assay_oracle_logits(o, tokens, len, logits), ASSAY_OK);
    assert_int_equal(assay_oracle_next_logits(o, tokens, len, next), ASSAY_OK);
    assay_oracle_free(o);
    return logits;
}

/* A scorer made and freed (assay_test_each_alloc_failing's attempt): a
 * failed init must leave *out NULL. */
static int score_attempt(void *ctx)
{
    struct assay_score *sc = NULL;
    enum assay_status st = assay_score_init(&sc, ctx, NULL);
    bool left = st != ASSAY_OK && sc != NULL;
    assay_score_free(sc);
    return left ? ASSAY_ERR_INTERNAL : (int)st;
}

/* The scorer's rows (engine/score.h) of a mapped model are the resident
 * model's bit for bit: exact and llama.cpp's numerics (F16 KV cache, flash
 * attention on and off, fp16 accumulation where it applies), on one thread
 * and two. */
static void want_scores_like_resident(const struct assay_model *r, const struct assay_model *m)
{
    const int32_t v = r->cfg.vocab, len = 24, p_len = 9;
    int32_t tokens[24];
    for (int32_t i = 0; i < len; i++) {
        tokens[i] = (int32_t)((i * 7919 + 13) % v);
    }
    const struct {
        enum assay_act_mode act;
        enum assay_kv_type kv;
        bool fa, f16_acc;
    } arith[] = {
        {ASSAY_ACT_MODE_EXACT, ASSAY_KV_TYPE_F32, false, false},
        {ASSAY_ACT_MODE_GGML, ASSAY_KV_TYPE_F16, true, false},
        {ASSAY_ACT_MODE_GGML, ASSAY_KV_TYPE_F16, false, true},
    };
    int compared = 0;
    for (size_t i = 0; i < sizeof arith / sizeof arith[0]; i++) {
        if (arith[i].act == ASSAY_ACT_MODE_GGML &&
            assay_forward_check_numerics(r, NULL) != ASSAY_OK) {
            continue;
        }
        for (int threads = 1; threads <= 2; threads++) {
            struct assay_score *sr = NULL, *sm = NULL;
            struct assay_score_params sp = assay_score_default_params(r, len);
            sp.act = arith[i].act;
            sp.kv_type = arith[i].kv;
            sp.flash_attn = arith[i].fa;
            sp.f16_acc = arith[i].f16_acc;
            sp.two_threads = threads == 2;
            sp.max_rows = 3 * len;
            assert_int_equal(assay_score_init(&sr, &sp, NULL), ASSAY_OK);
            sp.model = m;
            assert_int_equal(assay_score_init(&sm, &sp, NULL), ASSAY_OK);
            const float *rows_r = NULL, *rows_m = NULL;
            /* twice: the second pass decodes the layers again */
            for (int rep = 0; rep < 2; rep++) {
                assert_int_equal(assay_score_rows(sr, tokens, p_len, tokens + p_len, len - p_len,
                                                  &rows_r),
                                 ASSAY_OK);
                assert_int_equal(assay_score_rows(sm, tokens, p_len, tokens + p_len, len - p_len,
                                                  &rows_m),
                                 ASSAY_OK);
                if (memcmp(rows_r, rows_m, sizeof(float) * (size_t)v * (len - p_len)) != 0) {
                    fail_msg("the scorer's rows of the mapped model differ (arithmetic %zu, %d "
                             "threads, pass %d)",
                             i, threads, rep);
                }
            }
            /* in a batch, each sequence's rows are its rows alone */
            const size_t row_bytes = sizeof(float) * (size_t)v;
            float *alone = malloc(row_bytes * (size_t)(len - p_len));
            assert_non_null(alone);
            memcpy(alone, rows_m, row_bytes * (size_t)(len - p_len));
            const float *rows_b = NULL;
            assert_int_equal(assay_score_rows(sm, tokens + 5, 3, tokens + 8, 4, &rows_b), ASSAY_OK);
            float *short_alone = malloc(row_bytes * 4);
            assert_non_null(short_alone);
            memcpy(short_alone, rows_b, row_bytes * 4);
            const struct assay_score_seq batch[] = {
                {tokens + 5, 3, tokens + 8, 4},
                {tokens, p_len, tokens + p_len, len - p_len},
                {tokens + 5, 3, tokens + 8, 4},
            };
            struct assay_score *both[] = {sr, sm};
            for (int k = 0; k < 2; k++) {
                assert_int_equal(assay_score_rows_batch(both[k], batch, 3, &rows_b), ASSAY_OK);
                if (memcmp(rows_b, short_alone, row_bytes * 4) != 0 ||
                    memcmp(rows_b + (size_t)4 * v, alone, row_bytes * (size_t)(len - p_len)) !=
                        0 ||
                    memcmp(rows_b + (size_t)(4 + len - p_len) * v, short_alone, row_bytes * 4) !=
                        0) {
                    fail_msg("a batch's rows differ from its sequences' alone (arithmetic %zu, "
                             "%d threads, %s)",
                             i, threads, k == 0 ? "resident" : "mapped");
                }
            }
            /* more tokens than max_rows, or no sequence: refused */
            const struct assay_score_seq four[] = {batch[1], batch[1], batch[1], batch[1]};
            assert_int_equal(assay_score_rows_batch(sm, four, 4, &rows_b), ASSAY_ERR_INVALID);
            assert_null(rows_b);
            assert_int_equal(assay_score_rows_batch(sm, four, 0, &rows_b), ASSAY_ERR_INVALID);
            free(alone);
            free(short_alone);
            compared++;
            assay_score_free(sr);
            assay_score_free(sm);
        }
    }
    assert_true(compared >= 2);
    /* each allocation of a mapped model's scorer failing in turn */
    struct assay_score_params sp = assay_score_default_params(m, len);
    sp.two_threads = true;
    assert_true(assay_test_each_alloc_failing(score_attempt, &sp) > 3);
}

/* The resident and the mapped load of the file buf agree on everything: the
 * hash, the types, every vector and every matrix, and the oracle's logits
 * bit for bit on one and two threads; and a mapped model is refused where
 * its weights would be needed in memory (clone, save, the engine's forward
 * pass), each with its status. */
static void want_mapped_like_resident(const uint8_t *buf, size_t size, const char *scratch)
{
    char path[512];
    struct assay_diag diag;
    assay_test_scratch(scratch, path, sizeof path);
    gguf_write_all(path, buf, size);
    struct assay_model *r = NULL, *m = NULL;
    gguf_want_status(assay_model_load_gguf(&r, path, &diag), ASSAY_OK, &diag);
    gguf_want_status(assay_model_load_gguf_mapped(&m, path, &diag), ASSAY_OK, &diag);
    assert_false(r->mapped);
    assert_true(m->mapped);
    assert_null(m->tok_embd);
    assert_null(m->output);
    assert_null(m->layers[0].wq);
    assert_string_equal(m->sha256, r->sha256);
    assert_string_equal(m->tensor_types, r->tensor_types);
    assert_int_equal(m->tok_embd_type, r->tok_embd_type);
    assert_int_equal(m->output_type, r->output_type);
    assert_int_equal(m->n_floats, r->n_floats);
    assert_int_equal(m->tied, r->tied);
    assert_int_equal(m->eos_token, r->eos_token);
    const struct assay_model_config *c = &r->cfg;
    int64_t d = c->d_model, qd = (int64_t)c->n_head * c->head_dim;
    int64_t kvd = (int64_t)c->n_kv_head * c->head_dim, ff = c->d_ff;
    want_same_matrix("token_embd", -1, r->tok_embd, &m->tok_embd_file, c->vocab, d);
    want_same_matrix("output", -1, r->output, &m->output_file, c->vocab, d);
    assert_memory_equal(m->out_norm, r->out_norm, sizeof(float) * (size_t)d);
    for (int32_t l = 0; l < c->n_layer; l++) {
        const struct assay_layer_weights *a = &r->layers[l], *b = &m->layers[l];
        assert_memory_equal(&a->types, &b->types, sizeof a->types);
        want_same_matrix("attn_q", l, a->wq, &b->files.wq, qd, d);
        want_same_matrix("attn_k", l, a->wk, &b->files.wk, kvd, d);
        want_same_matrix("attn_v", l, a->wv, &b->files.wv, kvd, d);
        want_same_matrix("attn_output", l, a->wo, &b->files.wo, d, qd);
        want_same_matrix("ffn_gate", l, a->w_gate, &b->files.w_gate, ff, d);
        want_same_matrix("ffn_up", l, a->w_up, &b->files.w_up, ff, d);
        want_same_matrix("ffn_down", l, a->w_down, &b->files.w_down, d, ff);
        assert_memory_equal(a->attn_norm, b->attn_norm, sizeof(float) * (size_t)d);
        assert_memory_equal(a->ffn_norm, b->ffn_norm, sizeof(float) * (size_t)d);
        if (c->qkv_bias) {
            assert_memory_equal(a->bq, b->bq, sizeof(float) * (size_t)qd);
            assert_memory_equal(a->bv, b->bv, sizeof(float) * (size_t)kvd);
        }
    }
    if (c->rope_freqs) {
        assert_memory_equal(m->rope_freqs, r->rope_freqs, sizeof(float) * (size_t)(c->head_dim / 2));
    }
    const int32_t len = 40; /* more than a block of the oracle's positions */
    size_t row = sizeof(double) * (size_t)c->vocab;
    double *next_r = malloc(row), *next_m = malloc(row);
    assert_non_null(next_r);
    assert_non_null(next_m);
    double *want = oracle_logits(r, 1, len, next_r);
    for (int32_t threads = 1; threads <= 2; threads++) {
        double *got = oracle_logits(m, threads, len, next_m);
        assert_memory_equal(got, want, row * (size_t)len);
        assert_memory_equal(next_m, next_r, row);
        assert_memory_equal(next_m, want + (size_t)(len - 1) * c->vocab, row);
        free(got);
    }
    struct assay_model *copy = (struct assay_model *)&copy;
    assert_int_equal(assay_model_clone(m, &copy), ASSAY_ERR_UNSUPPORTED);
    assert_null(copy);
    assert_int_equal(assay_model_derive_draft(m, 0.1, 1, &copy), ASSAY_ERR_UNSUPPORTED);
    char out[512];
    assay_test_scratch("gguf-mapped-save.gguf", out, sizeof out);
    assay_diag_clear(&diag);
    assert_int_equal(assay_model_save_gguf(m, out, &diag), ASSAY_ERR_UNSUPPORTED);
    gguf_want_diag(&diag, "model", "a resident model", "mapped model");
    want_scores_like_resident(r, m);
    struct assay_engine_params ep = assay_engine_default_params(m);
    struct assay_engine *e = (struct assay_engine *)&e;
    assay_diag_clear(&diag);
    assert_int_equal(assay_engine_init(&e, &ep, &diag), ASSAY_ERR_UNSUPPORTED);
    assert_null(e);
    gguf_want_diag(&diag, "model", "a resident model", "mapped model");
    free(want);
    free(next_r);
    free(next_m);
    assay_model_free(m);
    assay_model_free(r);
    remove(path);
}

/* Mapped loads of mini in F32, F16 and Q8_0, and of tied qwen2 with biases
 * and llama with RoPE frequency divisors in Q8_0. */
static void test_load_mapped(void **state)
{
    (void)state;
    size_t size, n;
    uint8_t *buf = gguf_mini_bytes(&size);
    uint32_t (*types[])(const struct assay_gguf_tensor *) = {all_f32, all_f16, matrices_q8_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        struct gguf_retype r = {types[i], NULL, NULL};
        uint8_t *file = gguf_retyped(buf, size, &r, &n);
        want_mapped_like_resident(file, n, "gguf-mapped.gguf");
        free(file);
    }
    free(buf);
    struct assay_model *shapes[] = {arch_model(ASSAY_ARCH_QWEN2, true, true, 0.0f, false),
                                    arch_model(ASSAY_ARCH_LLAMA, false, false, 2.0f, true)};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        buf = model_bytes(shapes[i], &size);
        struct gguf_retype r = {matrices_q8_0, NULL, NULL};
        uint8_t *file = gguf_retyped(buf, size, &r, &n);
        want_mapped_like_resident(file, n, "gguf-mapped-arch.gguf");
        free(file);
        free(buf);
        assay_model_free(shapes[i]);
    }
}

/* ------------------------------------------------------------------ */
/* Random models written without being built                          */
/* ------------------------------------------------------------------ */

/* Any range of any tensor of the random initialisation, computed alone,
 * is what the built model holds there: odd starts and ends (half a
 * Box-Muller pair), ranges across rows of the output with twins, scaled
 * outputs, tied embeddings, biases and RoPE divisors. */
static void test_random_values_ranges(void **state)
{
    (void)state;
    struct assay_model_config twins = assay_model_config_mini_twins();
    twins.output_scale = 3.0f;
    twins.qkv_bias = true;
    twins.rope_freqs = true;
    struct assay_model_init_params params = assay_model_init_default_params();
    for (int tied = 0; tied <= 1; tied++) {
        params.tied = tied == 1;
        struct assay_model *m;
        assert_int_equal(assay_model_init_random_params(&m, &twins, params, 9), ASSAY_OK);
        const int64_t d = twins.d_model;
        const struct {
            enum assay_weight_kind kind;
            int32_t layer;
            const float *data;
            int64_t n;
        } cases[] = {
            {ASSAY_WEIGHT_OUTPUT, 0, m->output, (int64_t)twins.vocab * d},
            {ASSAY_WEIGHT_TOK_EMBD, 0, m->tok_embd, (int64_t)twins.vocab * d},
            {ASSAY_WEIGHT_V, 1, m->layers[1].wv, (int64_t)twins.n_kv_head * twins.head_dim * d},
            {ASSAY_WEIGHT_DOWN, 0, m->layers[0].w_down, (int64_t)twins.d_ff * d},
            {ASSAY_WEIGHT_K_BIAS, 1, m->layers[1].bk, (int64_t)twins.n_kv_head * twins.head_dim},
            {ASSAY_WEIGHT_ROPE_FREQS, 0, m->rope_freqs, twins.head_dim / 2},
            {ASSAY_WEIGHT_FFN_NORM, 1, m->layers[1].ffn_norm, d},
        };
        float got[3 * 64 + 7];
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const int64_t firsts[] = {0, 1, d - 1, d + 3, cases[c].n - 5};
            for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++) {
                int64_t first = firsts[f] < 0 ? 0 : firsts[f] % cases[c].n;
                int64_t n = cases[c].n - first < 3 * d + 7 ? cases[c].n - first : 3 * d + 7;
                assay_model_random_values(&twins, params, 9, cases[c].kind, cases[c].layer,
                                          first, n, got);
                if (memcmp(got, cases[c].data + first, sizeof(float) * (size_t)n) != 0) {
                    print_error("tensor kind %d layer %d, elements %lld..%lld%s differ\n",
                                (int)cases[c].kind, (int)cases[c].layer, (long long)first,
                                (long long)(first + n), tied ? " (tied)" : "");
                    fail();
                }
            }
        }
        assay_model_free(m);
    }
}

/* A random model written a chunk at a time: in F32 the very file the built
 * model saves to (and its hash); in F16 each matrix the built one's
 * weights rounded to nearest even, the vectors F32, and the hash the fp32
 * model's. Tied qwen2 with biases, and a vocabulary whose output spans
 * several of the writer's chunks. */
static void test_write_random(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini_twins();
    cfg.arch = ASSAY_ARCH_QWEN2;
    cfg.qkv_bias = true;
    cfg.vocab = (int32_t)(2 * ASSAY_GGUF_FILL_CHUNK / cfg.d_model + 3); /* 3 chunks of output */
    struct assay_model_init_params params = assay_model_init_default_params();
    params.tied = true;
    struct assay_model *m;
    assert_int_equal(assay_model_init_random_params(&m, &cfg, params, 4), ASSAY_OK);
    char saved[512], streamed[512], sha[65];
    struct assay_diag diag;
    assay_test_scratch("gguf-saved.gguf", saved, sizeof saved);
    assay_test_scratch("gguf-streamed.gguf", streamed, sizeof streamed);
    gguf_want_status(assay_model_save_gguf(m, saved, &diag), ASSAY_OK, &diag);
    gguf_want_status(assay_model_write_random_gguf(&cfg, params, 4, ASSAY_GGML_TYPE_F32, streamed,
                                                   sha, &diag),
                     ASSAY_OK, &diag);
    assert_string_equal(sha, m->sha256);
    size_t n_a, n_b;
    uint8_t *a = gguf_read_all(saved, &n_a), *b = gguf_read_all(streamed, &n_b);
    assert_int_equal(n_a, n_b);
    assert_memory_equal(a, b, n_a);
    free(a);
    free(b);
    gguf_want_status(assay_model_write_random_gguf(&cfg, params, 4, ASSAY_GGML_TYPE_F16, streamed,
                                                   sha, &diag),
                     ASSAY_OK, &diag);
    assert_string_equal(sha, m->sha256);
    struct assay_model *h = NULL;
    gguf_want_status(assay_model_load_gguf(&h, streamed, &diag), ASSAY_OK, &diag);
    assert_string_equal(h->tensor_types, "F16+F32");
    assert_true(h->tied);
    const int64_t n_out = (int64_t)cfg.vocab * cfg.d_model;
    for (int64_t i = 0; i < n_out; i++) {
        if (h->output[i] != half_value(gguf_half_bits(m->output[i]))) {
            print_error("output[%lld]: %.9g, expected %.9g rounded\n", (long long)i,
                        (double)h->output[i], (double)m->output[i]);
            fail();
        }
    }
    const int64_t qd = (int64_t)cfg.n_head * cfg.head_dim;
    for (int64_t i = 0; i < qd * cfg.d_model; i++) {
        assert_true(h->layers[1].wq[i] == half_value(gguf_half_bits(m->layers[1].wq[i])));
    }
    assert_memory_equal(h->layers[1].bq, m->layers[1].bq, sizeof(float) * (size_t)qd);
    assay_model_free(h);
    /* a type it does not write */
    assert_int_equal(assay_model_write_random_gguf(&cfg, params, 4, ASSAY_GGML_TYPE_Q8_0,
                                                   streamed, sha, &diag),
                     ASSAY_ERR_INVALID);
    remove(saved);
    remove(streamed);
    assay_model_free(m);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_tinygpt),
        cmocka_unit_test(test_roundtrip_mini),
        cmocka_unit_test(test_save_other_shapes),
        cmocka_unit_test(test_half_reference),
        cmocka_unit_test(test_load_f16),
        cmocka_unit_test(test_load_q8_0),
        cmocka_unit_test(test_load_tied),
        cmocka_unit_test(test_load_mapped),
        cmocka_unit_test(test_random_values_ranges),
        cmocka_unit_test(test_write_random),
        cmocka_unit_test(test_load_bad_types),
        cmocka_unit_test(test_load_tied_stray),
        cmocka_unit_test(test_roundtrip_qwen2_bias_tied),
        cmocka_unit_test(test_roundtrip_llama_rope_scaling),
        cmocka_unit_test(test_load_arch_metadata),
        cmocka_unit_test(test_load_rope_scaling),
        cmocka_unit_test(test_load_bias_tensors),
        cmocka_unit_test(test_load_rope_freqs),
        cmocka_unit_test(test_load_other_arch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
