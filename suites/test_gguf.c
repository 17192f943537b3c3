/* Unit tests of engine/gguf.c and engine/model_gguf.c: the GGUF reader and
 * writer, the model's GGUF round trip and metadata, a corpus of corrupted
 * files built in memory from a valid one (each with its exact status and
 * diagnostic), failing allocations, and failed saves; files whose tensors
 * are stored as F16 or Q8_0 (checked against roundings computed here) and
 * files with tied embeddings (checked through the bundled engine against
 * the oracle); qwen2 files, q/k/v biases and RoPE scaling.
 *
 * Statuses the reader and loader give (the contract these tests pin down):
 *   malformed bytes, truncation, counts or lengths past the end, unknown
 *   value types, misaligned / overlapping / out-of-file data     PARSE
 *   version other than 2 or 3, unknown-size ggml type            UNSUPPORTED
 *   repeated key or tensor name                                  DUPLICATE
 *   loader: architecture not llama or qwen2, a type assay does not
 *   decode, RoPE scaling other than linear, an attention factor  UNSUPPORTED
 *   loader: missing key or tensor (a bias among biases)          NOT_FOUND
 *   loader: wrong key type, wrong shape, unknown tensor, NaN/Inf
 *   weights or block scales, RoPE frequency divisors <= 0        PARSE
 *   loader: inconsistent config (assay_model_config_validate)    INVALID
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/status.h"
#include "adapters/adapter.h"
#include "adapters/spec.h"
#include "core/request.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "oracles/oracle.h"
#include "support.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    uint8_t *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static void write_all(const char *path, const uint8_t *buf, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

static bool file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static void put_u32(uint8_t *buf, size_t pos, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        buf[pos + (size_t)i] = (uint8_t)(v >> (8 * i));
    }
}

static void put_u64(uint8_t *buf, size_t pos, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        buf[pos + (size_t)i] = (uint8_t)(v >> (8 * i));
    }
}

static uint32_t get_u32(const uint8_t *buf, size_t pos)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) {
        v = (v << 8) | buf[pos + (size_t)i];
    }
    return v;
}

static uint64_t get_u64(const uint8_t *buf, size_t pos)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | buf[pos + (size_t)i];
    }
    return v;
}

/* Byte offset of the GGUF string s (its u64 length) in buf; it must occur
 * exactly once. */
static size_t str_pos(const uint8_t *buf, size_t size, const char *s)
{
    size_t len = strlen(s), found = SIZE_MAX, count = 0;
    uint8_t pattern[8 + 128];
    assert_true(len <= 128);
    put_u64(pattern, 0, len);
    memcpy(pattern + 8, s, len);
    for (size_t i = 0; i + 8 + len <= size; i++) {
        if (memcmp(buf + i, pattern, 8 + len) == 0) {
            found = i;
            count++;
        }
    }
    if (count != 1) {
        print_error("GGUF string \"%s\" occurs %zu times\n", s, count);
        fail();
    }
    return found;
}

/* Byte offset of a key's value type, and of its value. */
static size_t kv_type_pos(const uint8_t *buf, size_t size, const char *key)
{
    return str_pos(buf, size, key) + 8 + strlen(key);
}

static size_t kv_value_pos(const uint8_t *buf, size_t size, const char *key)
{
    return kv_type_pos(buf, size, key) + 4;
}

/* Byte offset of a tensor info's n_dims, and of its type and offset. */
static size_t tensor_dims_pos(const uint8_t *buf, size_t size, const char *name)
{
    return str_pos(buf, size, name) + 8 + strlen(name);
}

static size_t tensor_type_pos(const uint8_t *buf, size_t size, const char *name)
{
    size_t p = tensor_dims_pos(buf, size, name);
    return p + 4 + 8 * (size_t)get_u32(buf, p);
}

static size_t tensor_offset_pos(const uint8_t *buf, size_t size, const char *name)
{
    return tensor_type_pos(buf, size, name) + 4;
}

static void want_status(enum assay_status got, enum assay_status want,
                          const struct assay_diag *diag)
{
    if (got != want) {
        char text[1024];
        print_error("status %d (%s), expected %d (%s); diag: %s\n", (int)got,
                    assay_status_str(got), (int)want, assay_status_str(want),
                    assay_diag_format(diag, text, sizeof text));
        fail();
    }
}

/* The diagnostic's where field holds where_part, and its whole text each
 * non-NULL phrase. */
static void want_diag(const struct assay_diag *diag, const char *where_part, const char *phrase1,
                        const char *phrase2)
{
    char text[1024];
    assay_diag_format(diag, text, sizeof text);
    bool ok = strstr(diag->where, where_part) != NULL;
    ok = ok && (phrase1 == NULL || strstr(text, phrase1) != NULL);
    ok = ok && (phrase2 == NULL || strstr(text, phrase2) != NULL);
    if (!ok) {
        print_error("diag \"%s\" lacks where \"%s\" or \"%s\" or \"%s\"\n", text, where_part,
                    phrase1 != NULL ? phrase1 : "", phrase2 != NULL ? phrase2 : "");
        fail();
    }
}

/* Parse bytes that must fail with status, where and phrases. */
static void want_parse_fail(const uint8_t *buf, size_t size, enum assay_status status,
                              const char *where_part, const char *phrase1, const char *phrase2)
{
    struct assay_gguf *g = (struct assay_gguf *)&g;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_gguf_parse(buf, size, "t.gguf", &g, &diag);
    want_status(st, status, &diag);
    assert_null(g);
    assert_string_equal(diag.file, "t.gguf");
    want_diag(&diag, where_part, phrase1, phrase2);
}

/* Write bytes to a scratch file and load them as a model, which must fail
 * with status, where and phrases; the diagnostic names the file. */
static void want_load_fail(const uint8_t *buf, size_t size, enum assay_status status,
                             const char *where_part, const char *phrase1, const char *phrase2)
{
    char path[512];
    assay_test_scratch("gguf-bad.gguf", path, sizeof path);
    write_all(path, buf, size);
    struct assay_model *m = (struct assay_model *)&m;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_model_load_gguf(&m, path, &diag);
    want_status(st, status, &diag);
    assert_null(m);
    assert_string_equal(diag.file, path);
    want_diag(&diag, where_part, phrase1, phrase2);
    remove(path);
}

/* A saved mini model (seed 1): its file's bytes. */
static uint8_t *mini_bytes(size_t *size)
{
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *m;
    char path[512];
    struct assay_diag diag;
    assay_test_scratch("gguf-mini.gguf", path, sizeof path);
    assert_int_equal(assay_model_init_random(&m, &cfg, 1), ASSAY_OK);
    want_status(assay_model_save_gguf(m, path, &diag), ASSAY_OK, &diag);
    assay_model_free(m);
    uint8_t *buf = read_all(path, size);
    remove(path);
    return buf;
}

/* Byte offset in buf of a tensor's data, through the generic reader. */
static size_t tensor_data_pos(const uint8_t *buf, size_t size, const char *name)
{
    struct assay_gguf *g;
    struct assay_diag diag;
    want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    const struct assay_gguf_tensor *t = assay_gguf_find_tensor(g, name);
    assert_non_null(t);
    size_t pos = (size_t)((const uint8_t *)t->data - buf);
    assay_gguf_free(g);
    return pos;
}

static uint8_t *copy_of(const uint8_t *buf, size_t size)
{
    uint8_t *c = malloc(size + 1);
    assert_non_null(c);
    memcpy(c, buf, size);
    return c;
}

/* A small file with a value of every type the writer has and tensors of
 * 1, 2 and 4 dimensions; alignment 32 unless alignment is nonzero. */
static const float k_vec[3] = {1.0f, -2.0f, 3.5f};
static const float k_mat[6] = {1, 2, 3, 4, 5, 6};
static const float k_4d[4] = {-1, -2, -3, -4};

static uint8_t *sample_bytes(size_t *size, uint32_t alignment)
{
    struct assay_gguf_writer *w;
    char path[512];
    struct assay_diag diag;
    const char *strings[3] = {"x", "", "yz"};
    const float f32s[3] = {1.0f, 2.0f, 3.0f};
    const int32_t i32s[3] = {-1, 0, 1};
    const int64_t ne_vec[1] = {3}, ne_mat[2] = {3, 2}, ne_4d[4] = {1, 2, 1, 2};
    assert_int_equal(assay_gguf_writer_init(&w), ASSAY_OK);
    if (alignment != 0) {
        assert_int_equal(assay_gguf_writer_add_u32(w, "general.alignment", alignment), ASSAY_OK);
    }
    assert_int_equal(assay_gguf_writer_add_u32(w, "a.u32", 7), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_i32(w, "a.i32", -5), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_f32(w, "a.f32", 1.5f), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_bool(w, "a.bool", true), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_string(w, "a.string", "h\xc3\xa9llo"), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_string_array(w, "a.strings", strings, 3), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_f32_array(w, "a.f32s", f32s, 3), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_i32_array(w, "a.i32s", i32s, 3), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_f32_array(w, "a.empty", NULL, 0), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_tensor_f32(w, "t.vec", 1, ne_vec, k_vec), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_tensor_f32(w, "t.mat", 2, ne_mat, k_mat), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_tensor_f32(w, "t.4d", 4, ne_4d, k_4d), ASSAY_OK);
    assay_test_scratch("gguf-sample.gguf", path, sizeof path);
    want_status(assay_gguf_writer_write(w, path, &diag), ASSAY_OK, &diag);
    assay_gguf_writer_free(w);
    uint8_t *buf = read_all(path, size);
    remove(path);
    return buf;
}

/* Hand-built GGUF bytes, for what the writer cannot produce. */
struct bytes {
    uint8_t b[1024];
    size_t n;
};

static void b_u32(struct bytes *x, uint32_t v)
{
    put_u32(x->b, x->n, v);
    x->n += 4;
}

static void b_u64(struct bytes *x, uint64_t v)
{
    put_u64(x->b, x->n, v);
    x->n += 8;
}

static void b_str(struct bytes *x, const char *s)
{
    b_u64(x, strlen(s));
    memcpy(x->b + x->n, s, strlen(s));
    x->n += strlen(s);
}

static void b_header(struct bytes *x, uint64_t n_tensors, uint64_t n_kv)
{
    x->n = 0;
    memcpy(x->b, "GGUF", 4);
    x->n = 4;
    b_u32(x, 3);
    b_u64(x, n_tensors);
    b_u64(x, n_kv);
}

/* ------------------------------------------------------------------ */
/* Round trips                                                         */
/* ------------------------------------------------------------------ */

static void want_u32(const struct assay_gguf *g, const char *key, uint32_t want)
{
    uint32_t v = 0;
    struct assay_diag diag;
    want_status(assay_gguf_get_u32(g, key, &v, &diag), ASSAY_OK, &diag);
    if (v != want) {
        print_error("%s = %u, expected %u\n", key, (unsigned)v, (unsigned)want);
        fail();
    }
}

static void want_string(const struct assay_gguf *g, const char *key, const char *want)
{
    const char *s = NULL;
    size_t len = 0;
    struct assay_diag diag;
    want_status(assay_gguf_get_string(g, key, &s, &len, &diag), ASSAY_OK, &diag);
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
    want_u32(g, "general.file_type", 0);
    want_u32(g, "llama.context_length", (uint32_t)c->n_ctx);
    want_u32(g, "llama.embedding_length", (uint32_t)c->d_model);
    want_u32(g, "llama.block_count", (uint32_t)c->n_layer);
    want_u32(g, "llama.feed_forward_length", (uint32_t)c->d_ff);
    want_u32(g, "llama.attention.head_count", (uint32_t)c->n_head);
    want_u32(g, "llama.attention.head_count_kv", (uint32_t)c->n_kv_head);
    want_u32(g, "llama.rope.dimension_count", (uint32_t)c->head_dim);
    want_u32(g, "llama.vocab_size", (uint32_t)c->vocab);
    float f = 0;
    want_status(assay_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f, &diag),
                  ASSAY_OK, &diag);
    assert_true(f == c->norm_eps);
    want_status(assay_gguf_get_f32(g, "llama.rope.freq_base", &f, &diag), ASSAY_OK, &diag);
    assert_true(f == c->rope_theta);

    /* The heads are d_model / n_head wide, so no key/value lengths. */
    assert_int_equal(assay_gguf_find_key(g, "llama.attention.key_length"), -1);
    assert_int_equal(assay_gguf_find_key(g, "general.alignment"), -1);

    want_string(g, "tokenizer.ggml.model", "llama");
    uint64_t n = 0;
    want_status(assay_gguf_get_array(g, "tokenizer.ggml.tokens", ASSAY_GGUF_TYPE_STRING, &n,
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
        want_status(assay_gguf_get_array_string(g, "tokenizer.ggml.tokens", tokens[i].id, &s,
                                                  NULL, &diag),
                      ASSAY_OK, &diag);
        assert_string_equal(s, tokens[i].text);
        want_status(assay_gguf_get_array_i32(g, "tokenizer.ggml.token_type", tokens[i].id,
                                               &type, &diag),
                      ASSAY_OK, &diag);
        assert_int_equal(type, tokens[i].type);
    }
    want_status(assay_gguf_get_array(g, "tokenizer.ggml.token_type", ASSAY_GGUF_TYPE_I32, &n,
                                       &diag),
                  ASSAY_OK, &diag);
    assert_int_equal(n, 260);
    want_status(assay_gguf_get_array(g, "tokenizer.ggml.scores", ASSAY_GGUF_TYPE_F32, &n,
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
    want_u32(g, "tokenizer.ggml.bos_token_id", 256);
    want_u32(g, "tokenizer.ggml.eos_token_id", 257);
    want_u32(g, "tokenizer.ggml.padding_token_id", 258);
    want_u32(g, "tokenizer.ggml.unknown_token_id", 259);
    bool b = true;
    want_status(assay_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b, &diag), ASSAY_OK,
                  &diag);
    assert_false(b);
    b = true;
    want_status(assay_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b, &diag), ASSAY_OK,
                  &diag);
    assert_false(b);

    /* Types are checked: a u32 is not an i32, a string array not an i32 one. */
    int32_t i32;
    want_status(assay_gguf_get_i32(g, "llama.block_count", &i32, &diag), ASSAY_ERR_PARSE, &diag);
    want_diag(&diag, "llama.block_count", "expected a value of type i32",
                "got a value of type u32");
    want_status(assay_gguf_get_array(g, "tokenizer.ggml.tokens", ASSAY_GGUF_TYPE_I32, &n, &diag),
                  ASSAY_ERR_PARSE, &diag);
    want_diag(&diag, "tokenizer.ggml.tokens", "expected an array of i32",
                "got an array of string");
    want_status(assay_gguf_get_bool(g, "general.name", &b, &diag), ASSAY_ERR_PARSE, &diag);
    want_diag(&diag, "general.name", "a value of type bool", "got a value of type string");
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
    want_status(assay_model_save_gguf(m, path, &diag), ASSAY_OK, &diag);
    want_status(assay_model_load_gguf(&back, path, &diag), ASSAY_OK, &diag);

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
    uint8_t *buf = read_all(path, &size);
    struct assay_gguf *g;
    want_status(assay_gguf_parse(buf, size, path, &g, &diag), ASSAY_OK, &diag);
    check_metadata(g, &cfg);
    check_tensors(g, buf, size, m);
    assay_gguf_free(g);

    /* Saving the loaded model gives the same bytes. */
    want_status(assay_model_save_gguf(back, path2, &diag), ASSAY_OK, &diag);
    size_t size2;
    uint8_t *buf2 = read_all(path2, &size2);
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
    want_status(assay_model_save_gguf(m, path, &diag), ASSAY_OK, &diag);
    want_status(assay_model_load_gguf(&back, path, &diag), ASSAY_OK, &diag);
    assert_int_equal(back->cfg.head_dim, 8);
    assert_int_equal(back->cfg.vocab, 270);
    assert_string_equal(back->sha256, m->sha256);
    struct assay_gguf *g;
    want_status(assay_gguf_read_file(path, &g, &diag), ASSAY_OK, &diag);
    want_u32(g, "llama.attention.key_length", 8);
    want_u32(g, "llama.attention.value_length", 8);
    const char *s;
    int32_t type;
    assert_int_equal(assay_gguf_get_array_string(g, "tokenizer.ggml.tokens", 269, &s, NULL, &diag),
                     ASSAY_OK);
    assert_string_equal(s, "<extra_269>");
    assert_int_equal(assay_gguf_get_array_i32(g, "tokenizer.ggml.token_type", 269, &type, &diag),
                     ASSAY_OK);
    assert_int_equal(type, 1);
    want_status(assay_gguf_get_array_string(g, "tokenizer.ggml.tokens", 270, &s, NULL, &diag),
                  ASSAY_ERR_INVALID, &diag);
    want_diag(&diag, "tokenizer.ggml.tokens[270]", "an index below 270", NULL);
    assay_gguf_free(g);
    assay_model_free(m);
    assay_model_free(back);
    remove(path);
}

/* ------------------------------------------------------------------ */
/* The generic reader and writer                                       */
/* ------------------------------------------------------------------ */

static void test_reader_values(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = sample_bytes(&size, 0);
    struct assay_gguf *g;
    struct assay_diag diag;
    want_status(assay_gguf_parse(buf, size, "s.gguf", &g, &diag), ASSAY_OK, &diag);
    assert_int_equal(assay_gguf_n_kv(g), 9);
    assert_string_equal(assay_gguf_kv_key(g, 0), "a.u32");
    assert_int_equal(assay_gguf_kv_type(g, 0), ASSAY_GGUF_TYPE_U32);
    assert_string_equal(assay_gguf_kv_key(g, 5), "a.strings");
    assert_int_equal(assay_gguf_kv_type(g, 5), ASSAY_GGUF_TYPE_ARRAY);
    assert_null(assay_gguf_kv_key(g, 9));
    assert_int_equal(assay_gguf_find_key(g, "a.bool"), 3);
    assert_int_equal(assay_gguf_find_key(g, "a.nope"), -1);

    uint32_t u = 0;
    int32_t i = 0;
    float f = 0;
    bool b = false;
    const char *s = NULL;
    size_t len = 0;
    uint64_t n = 99;
    assert_int_equal(assay_gguf_get_u32(g, "a.u32", &u, &diag), ASSAY_OK);
    assert_int_equal(u, 7);
    assert_int_equal(assay_gguf_get_i32(g, "a.i32", &i, &diag), ASSAY_OK);
    assert_int_equal(i, -5);
    assert_int_equal(assay_gguf_get_f32(g, "a.f32", &f, &diag), ASSAY_OK);
    assert_true(f == 1.5f);
    assert_int_equal(assay_gguf_get_bool(g, "a.bool", &b, &diag), ASSAY_OK);
    assert_true(b);
    assert_int_equal(assay_gguf_get_string(g, "a.string", &s, &len, &diag), ASSAY_OK);
    assert_string_equal(s, "h\xc3\xa9llo");
    assert_int_equal(len, 6);
    assert_int_equal(assay_gguf_get_array(g, "a.strings", ASSAY_GGUF_TYPE_STRING, &n, &diag),
                     ASSAY_OK);
    assert_int_equal(n, 3);
    assert_int_equal(assay_gguf_get_array_string(g, "a.strings", 1, &s, &len, &diag), ASSAY_OK);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    assert_int_equal(assay_gguf_get_array_string(g, "a.strings", 2, &s, &len, &diag), ASSAY_OK);
    assert_string_equal(s, "yz");
    assert_int_equal(assay_gguf_get_array_f32(g, "a.f32s", 2, &f, &diag), ASSAY_OK);
    assert_true(f == 3.0f);
    assert_int_equal(assay_gguf_get_array_i32(g, "a.i32s", 0, &i, &diag), ASSAY_OK);
    assert_int_equal(i, -1);
    assert_int_equal(assay_gguf_get_array(g, "a.empty", ASSAY_GGUF_TYPE_F32, &n, &diag), ASSAY_OK);
    assert_int_equal(n, 0);

    /* Failures leave the output alone and say why. */
    u = 12345;
    want_status(assay_gguf_get_u32(g, "a.nope", &u, &diag), ASSAY_ERR_NOT_FOUND, &diag);
    assert_int_equal(u, 12345);
    want_diag(&diag, "a.nope", "no such key", NULL);
    assert_string_equal(diag.file, "s.gguf");
    want_status(assay_gguf_get_f32(g, "a.i32", &f, &diag), ASSAY_ERR_PARSE, &diag);
    want_diag(&diag, "a.i32", "expected a value of type f32", "got a value of type i32");
    want_status(assay_gguf_get_array_f32(g, "a.f32s", 3, &f, &diag), ASSAY_ERR_INVALID, &diag);
    want_diag(&diag, "a.f32s[3]", "an index below 3", NULL);
    want_status(assay_gguf_get_array_u32(g, "a.i32s", 0, &u, &diag), ASSAY_ERR_PARSE, &diag);
    want_diag(&diag, "a.i32s", "an array of u32", "got an array of i32");
    want_status(assay_gguf_get_array_bool(g, "a.bool", 0, &b, &diag), ASSAY_ERR_PARSE, &diag);
    want_diag(&diag, "a.bool", "an array of bool", "got a value of type bool");

    assert_int_equal(assay_gguf_n_tensors(g), 3);
    const struct assay_gguf_tensor *t = assay_gguf_find_tensor(g, "t.4d");
    assert_non_null(t);
    assert_int_equal(t->n_dims, 4);
    assert_int_equal(t->ne[0], 1);
    assert_int_equal(t->ne[1], 2);
    assert_int_equal(t->ne[2], 1);
    assert_int_equal(t->ne[3], 2);
    assert_int_equal(t->n_elements, 4);
    assert_int_equal(t->n_bytes, 16);
    assert_int_equal(t->offset, 64); /* 12 bytes padded to 32, 24 padded to 32 */
    assert_memory_equal(t->data, k_4d, sizeof k_4d);
    t = assay_gguf_find_tensor(g, "t.vec");
    assert_int_equal(t->n_dims, 1);
    assert_int_equal(t->ne[1], 1);
    assert_memory_equal(t->data, k_vec, sizeof k_vec);
    assert_null(assay_gguf_find_tensor(g, "t.none"));
    assert_null(assay_gguf_tensor_at(g, 3));
    assay_gguf_free(g);

    /* Version 2 has the same layout. */
    put_u32(buf, 4, 2);
    want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    assert_int_equal(assay_gguf_version(g), 2);
    assay_gguf_free(g);
    free(buf);
}

static void test_alignment(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = sample_bytes(&size, 64);
    struct assay_gguf *g;
    struct assay_diag diag;
    want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    assert_int_equal(assay_gguf_alignment(g), 64);
    assert_int_equal(assay_gguf_data_offset(g) % 64, 0);
    assert_int_equal(assay_gguf_find_tensor(g, "t.mat")->offset, 64);
    assert_int_equal(assay_gguf_find_tensor(g, "t.4d")->offset, 128);
    assert_memory_equal(assay_gguf_find_tensor(g, "t.mat")->data, k_mat, sizeof k_mat);
    assay_gguf_free(g);

    size_t at = kv_value_pos(buf, size, "general.alignment");
    put_u32(buf, at, 48);
    want_parse_fail(buf, size, ASSAY_ERR_PARSE, "key general.alignment",
                      "expected an alignment that is a power of two", "got 48");
    put_u32(buf, at, 0);
    want_parse_fail(buf, size, ASSAY_ERR_PARSE, "key general.alignment", "power of two",
                      "got 0");
    put_u32(buf, at, 64);
    put_u32(buf, kv_type_pos(buf, size, "general.alignment"), ASSAY_GGUF_TYPE_I32);
    want_parse_fail(buf, size, ASSAY_ERR_PARSE, "key general.alignment",
                      "expected a value of type u32", "got a value of type i32");
    put_u32(buf, kv_type_pos(buf, size, "general.alignment"), ASSAY_GGUF_TYPE_U32);
    /* Under an alignment of 128 the offset 64 of t.mat is misaligned. */
    put_u32(buf, at, 128);
    want_parse_fail(buf, size, ASSAY_ERR_PARSE, "tensor t.mat",
                      "a data offset that is a multiple of 128", "got 64");
    free(buf);
}

static void test_writer_rejects(void **state)
{
    (void)state;
    struct assay_gguf_writer *w;
    const float x[2] = {1, 2};
    const int64_t ne[2] = {2, 1}, zero[1] = {0};
    char long_name[80];
    memset(long_name, 'n', sizeof long_name);
    long_name[65] = '\0';
    assert_int_equal(assay_gguf_writer_init(&w), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_u32(w, "k", 1), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_u32(w, "k", 2), ASSAY_ERR_DUPLICATE);
    assert_int_equal(assay_gguf_writer_add_string(w, "k", "x"), ASSAY_ERR_DUPLICATE);
    assert_int_equal(assay_gguf_writer_add_u32(w, "", 1), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gguf_writer_add_string(w, "s", NULL), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gguf_writer_add_u32(w, "general.alignment", 48), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gguf_writer_add_i32(w, "general.alignment", 64), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gguf_writer_add_tensor_f32(w, "t", 2, ne, x), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_tensor_f32(w, "t", 2, ne, x), ASSAY_ERR_DUPLICATE);
    assert_int_equal(assay_gguf_writer_add_tensor_f32(w, long_name, 2, ne, x), ASSAY_ERR_INVALID);
    long_name[64] = '\0';
    assert_int_equal(assay_gguf_writer_add_tensor_f32(w, long_name, 2, ne, x), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_tensor_f32(w, "z", 1, zero, x), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gguf_writer_add_tensor_f32(w, "f", 5, ne, x), ASSAY_ERR_INVALID);
    assert_int_equal(assay_gguf_writer_add_tensor_f32(w, "n", 2, ne, NULL), ASSAY_ERR_INVALID);

    /* The failed adds left the writer as it was. */
    char path[512];
    struct assay_diag diag;
    struct assay_gguf *g;
    assay_test_scratch("gguf-rejects.gguf", path, sizeof path);
    want_status(assay_gguf_writer_write(w, path, &diag), ASSAY_OK, &diag);
    want_status(assay_gguf_read_file(path, &g, &diag), ASSAY_OK, &diag);
    assert_int_equal(assay_gguf_n_kv(g), 1);
    want_u32(g, "k", 1);
    assert_int_equal(assay_gguf_n_tensors(g), 2);
    assert_non_null(assay_gguf_find_tensor(g, long_name));
    assay_gguf_free(g);
    assay_gguf_writer_free(w);
    remove(path);
}

static void test_nested_arrays(void **state)
{
    (void)state;
    struct bytes x;
    struct assay_gguf *g;
    struct assay_diag diag;
    /* An array of two arrays of u8, then a u32: nesting is walked. */
    b_header(&x, 0, 2);
    b_str(&x, "nested");
    b_u32(&x, ASSAY_GGUF_TYPE_ARRAY);
    b_u32(&x, ASSAY_GGUF_TYPE_ARRAY);
    b_u64(&x, 2);
    b_u32(&x, ASSAY_GGUF_TYPE_U8);
    b_u64(&x, 3);
    x.b[x.n++] = 1;
    x.b[x.n++] = 2;
    x.b[x.n++] = 3;
    b_u32(&x, ASSAY_GGUF_TYPE_STRING);
    b_u64(&x, 1);
    b_str(&x, "in");
    b_str(&x, "after");
    b_u32(&x, ASSAY_GGUF_TYPE_U32);
    b_u32(&x, 42);
    want_status(assay_gguf_parse(x.b, x.n, NULL, &g, &diag), ASSAY_OK, &diag);
    uint64_t n = 0;
    assert_int_equal(assay_gguf_get_array(g, "nested", ASSAY_GGUF_TYPE_ARRAY, &n, &diag),
                     ASSAY_OK);
    assert_int_equal(n, 2);
    want_u32(g, "after", 42);
    assay_gguf_free(g);

    /* Four levels of arrays are more than the reader walks. */
    b_header(&x, 0, 1);
    b_str(&x, "deep");
    b_u32(&x, ASSAY_GGUF_TYPE_ARRAY);
    for (int i = 0; i < 3; i++) {
        b_u32(&x, ASSAY_GGUF_TYPE_ARRAY);
        b_u64(&x, 1);
    }
    size_t deepest = x.n;
    b_u32(&x, ASSAY_GGUF_TYPE_U8);
    b_u64(&x, 0);
    char where[64];
    snprintf(where, sizeof where, "byte %zu, key deep", deepest);
    want_parse_fail(x.b, x.n, ASSAY_ERR_UNSUPPORTED, where, "arrays nested at most 3 deep",
                      NULL);

    /* A bool that is neither 0 nor 1. */
    b_header(&x, 0, 1);
    b_str(&x, "flag");
    b_u32(&x, ASSAY_GGUF_TYPE_BOOL);
    x.b[x.n++] = 2;
    want_parse_fail(x.b, x.n, ASSAY_ERR_PARSE, "key flag", "a bool (0 or 1)", "got 2");

    /* An empty key, and a key with a NUL byte (trailing zero bytes keep
     * the header's counts within what is left). */
    b_header(&x, 0, 1);
    b_str(&x, "");
    b_u32(&x, ASSAY_GGUF_TYPE_U8);
    x.b[x.n++] = 0;
    memset(x.b + x.n, 0, 32);
    x.n += 32;
    want_parse_fail(x.b, x.n, ASSAY_ERR_PARSE, "byte 24", "a non-empty key", NULL);
    b_header(&x, 0, 1);
    b_u64(&x, 3);
    memcpy(x.b + x.n, "a\0b", 3);
    x.n += 3;
    b_u32(&x, ASSAY_GGUF_TYPE_U8);
    x.b[x.n++] = 0;
    want_parse_fail(x.b, x.n, ASSAY_ERR_PARSE, "byte 24", "a key without NUL bytes", NULL);

    /* A tensor of five dimensions, a block type with a ragged row, and an
     * empty file with no tensors and no metadata (valid). */
    b_header(&x, 1, 0);
    b_str(&x, "t");
    size_t dims_at = x.n;
    b_u32(&x, 5);
    memset(x.b + x.n, 0, 64);
    x.n += 64;
    want_parse_fail(x.b, x.n, ASSAY_ERR_PARSE, "tensor t", "at most 4 dimensions", "got 5");
    x.n = dims_at;
    b_u32(&x, 1);
    b_u64(&x, 33);
    b_u32(&x, 2); /* Q4_0, blocks of 32 */
    b_u64(&x, 0);
    want_parse_fail(x.b, x.n, ASSAY_ERR_PARSE, "tensor t", "a multiple of the Q4_0 block of 32",
                      "got 33");
    b_header(&x, 0, 0);
    want_status(assay_gguf_parse(x.b, x.n, NULL, &g, &diag), ASSAY_OK, &diag);
    assert_int_equal(assay_gguf_n_kv(g), 0);
    assert_int_equal(assay_gguf_n_tensors(g), 0);
    assay_gguf_free(g);
}

/* ------------------------------------------------------------------ */
/* Corrupted files: the generic reader                                 */
/* ------------------------------------------------------------------ */

static void test_bad_magic(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    buf[3] = 'X';
    want_parse_fail(buf, size, ASSAY_ERR_PARSE, "byte 0", "expected magic \"GGUF\"",
                      "got \"GGUX\"");
    buf[3] = 0x01;
    want_parse_fail(buf, size, ASSAY_ERR_PARSE, "byte 0", "magic", "got \"GGU?\"");
    free(buf);
}

static void test_bad_version(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    put_u32(buf, 4, 1);
    want_parse_fail(buf, size, ASSAY_ERR_UNSUPPORTED, "byte 4", "expected version 2 or 3",
                      "got 1");
    put_u32(buf, 4, 99);
    want_parse_fail(buf, size, ASSAY_ERR_UNSUPPORTED, "byte 4", "expected version 2 or 3",
                      "got 99");
    free(buf);
}

static void test_truncated(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    char where[96], phrase[160];

    want_parse_fail(buf, 0, ASSAY_ERR_PARSE, "byte 0", "magic \"GGUF\"",
                      "end of file after 0 bytes");
    want_parse_fail(buf, 2, ASSAY_ERR_PARSE, "byte 0", "magic \"GGUF\"",
                      "end of file after 2 bytes");
    want_parse_fail(buf, 6, ASSAY_ERR_PARSE, "byte 4", "the 4-byte version",
                      "end of file at byte 6");
    want_parse_fail(buf, 12, ASSAY_ERR_PARSE, "byte 8", "the 8-byte tensor count", NULL);
    want_parse_fail(buf, 20, ASSAY_ERR_PARSE, "byte 16", "the 8-byte metadata pair count",
                      "end of file at byte 20");

    /* Mid-header counts that no longer fit what is left. */
    want_parse_fail(buf, 30, ASSAY_ERR_PARSE, "byte 8", "a tensor count the 6 bytes left",
                      "got 21");

    /* In the middle of a key (general.name is the second pair): the
     * header's counts no longer fit what is left, which is caught first. */
    size_t key = str_pos(buf, size, "general.name");
    want_parse_fail(buf, key + 8 + 3, ASSAY_ERR_PARSE, "byte 8", "a tensor count the",
                      "got 21");
    /* With counts that fit (no tensors, two pairs) the key is reported. */
    uint8_t *c = copy_of(buf, size);
    put_u64(c, 8, 0);
    put_u64(c, 16, 2);
    snprintf(where, sizeof where, "byte %zu", key);
    want_parse_fail(c, key + 8 + 3, ASSAY_ERR_PARSE, where,
                      "the key of metadata pair 1 of at most 3 bytes", "got length 12");

    /* In the middle of a value's string length. */
    size_t value = kv_value_pos(buf, size, "general.name");
    snprintf(where, sizeof where, "byte %zu, key general.name", value);
    want_parse_fail(c, value + 4, ASSAY_ERR_PARSE, where,
                      "the 8-byte length of a string value", "end of file");

    /* In the middle of the token array (pair 15): its count no longer
     * fits what is left. */
    put_u64(c, 16, 16);
    size_t tokens = kv_value_pos(buf, size, "tokenizer.ggml.tokens");
    snprintf(where, sizeof where, "byte %zu, key tokenizer.ggml.tokens", tokens + 4);
    want_parse_fail(c, tokens + 4 + 8 + 100, ASSAY_ERR_PARSE, where,
                      "an array of at most 12 string elements", "got 260 elements");
    /* In the middle of its fourth string. */
    size_t fourth = tokens + 4 + 8 + 3 * (8 + 6);
    snprintf(where, sizeof where, "byte %zu, key tokenizer.ggml.tokens", fourth);
    put_u64(c, tokens + 4, 4);
    want_parse_fail(c, fourth + 8 + 2, ASSAY_ERR_PARSE, where,
                      "string 3 of an array of at most 2 bytes", "got length 6");
    free(c);

    /* In the middle of a tensor info's second dimension. */
    size_t dims = tensor_dims_pos(buf, size, "blk.0.attn_q.weight");
    snprintf(where, sizeof where, "byte %zu, tensor blk.0.attn_q.weight", dims + 4 + 8);
    want_parse_fail(buf, dims + 4 + 8 + 3, ASSAY_ERR_PARSE, where, "an 8-byte dimension",
                      "end of file");

    /* In the tensor data: the first tensor, then the last. */
    struct assay_gguf *g;
    struct assay_diag diag;
    want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    uint64_t data = assay_gguf_data_offset(g);
    assay_gguf_free(g);
    want_parse_fail(buf, (size_t)data + 10, ASSAY_ERR_PARSE, "tensor token_embd.weight",
                      "expected 66560 bytes of tensor data for token_embd.weight",
                      "the file has 10");
    snprintf(phrase, sizeof phrase, "the file has 66460 (it ends at byte %zu", size - 100);
    want_parse_fail(buf, size - 100, ASSAY_ERR_PARSE, "tensor output.weight",
                      "expected 66560 bytes of tensor data for output.weight", phrase);
    /* Just after the tensor infos: no data section at all. */
    size_t info_end = tensor_offset_pos(buf, size, "output.weight") + 8;
    want_parse_fail(buf, info_end, ASSAY_ERR_PARSE, "tensor token_embd.weight",
                      "expected 66560 bytes of tensor data for token_embd.weight",
                      "the file has 0");
    free(buf);
}

/* Every truncation of a small file fails, up to the end of its last
 * tensor's data; after that only padding is missing, which is allowed. */
static void test_truncation_sweep(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = sample_bytes(&size, 0);
    struct assay_gguf *g;
    struct assay_diag diag;
    want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    const struct assay_gguf_tensor *last = assay_gguf_find_tensor(g, "t.4d");
    size_t end = (size_t)((const uint8_t *)last->data - buf) + last->n_bytes;
    assay_gguf_free(g);
    assert_true(end < size); /* the last tensor is padded */
    for (size_t cut = 0; cut <= size; cut++) {
        /* A fresh copy of exactly cut bytes, so ASan sees any overread. */
        uint8_t *part = malloc(cut > 0 ? cut : 1);
        assert_non_null(part);
        memcpy(part, buf, cut);
        assay_diag_clear(&diag);
        enum assay_status st = assay_gguf_parse(part, cut, NULL, &g, &diag);
        if (cut < end) {
            if (st != ASSAY_ERR_PARSE) {
                print_error("cut at %zu of %zu\n", cut, size);
            }
            want_status(st, ASSAY_ERR_PARSE, &diag);
            assert_null(g);
            assert_non_null(strstr(diag.where, "byte "));
            assert_true(diag.expected[0] != '\0' && diag.got[0] != '\0');
        } else {
            want_status(st, ASSAY_OK, &diag);
            assay_gguf_free(g);
        }
        free(part);
    }
    free(buf);
}

static void test_huge_counts(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    uint8_t *c = copy_of(buf, size);
    const uint64_t huge = (uint64_t)1 << 62;
    char where[96];

    put_u64(c, 16, huge);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "byte 16", "a metadata pair count the",
                      "got 4611686018427387904");
    memcpy(c, buf, size);
    put_u64(c, 8, huge);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "byte 8", "a tensor count the",
                      "got 4611686018427387904");
    /* Each fits alone, not both. */
    memcpy(c, buf, size);
    put_u64(c, 8, (size - 24) / 25);
    put_u64(c, 16, (size - 24) / 14);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "byte 8",
                      "tensor and metadata pair counts the", NULL);

    memcpy(c, buf, size);
    size_t count = kv_value_pos(buf, size, "tokenizer.ggml.tokens") + 4;
    put_u64(c, count, huge);
    snprintf(where, sizeof where, "byte %zu, key tokenizer.ggml.tokens", count);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "an array of at most",
                      "got 4611686018427387904 elements");
    memcpy(c, buf, size);
    count = kv_value_pos(buf, size, "tokenizer.ggml.scores") + 4;
    put_u64(c, count, huge);
    snprintf(where, sizeof where, "byte %zu, key tokenizer.ggml.scores", count);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "f32 elements",
                      "got 4611686018427387904 elements");
    free(c);
    free(buf);
}

static void test_string_past_end(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    uint8_t *c = copy_of(buf, size);
    char where[96];

    size_t value = kv_value_pos(buf, size, "general.name");
    put_u64(c, value, (uint64_t)size);
    snprintf(where, sizeof where, "byte %zu, key general.name", value);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "a string value of at most",
                      "the rest of the file");

    memcpy(c, buf, size);
    put_u64(c, value, UINT64_MAX);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "a string value of at most",
                      "got length 18446744073709551615");

    memcpy(c, buf, size);
    put_u64(c, 24, (uint64_t)1 << 40); /* the first key's length */
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "byte 24", "the key of metadata pair 0",
                      "got length 1099511627776");

    memcpy(c, buf, size);
    size_t token = kv_value_pos(buf, size, "tokenizer.ggml.tokens") + 4 + 8;
    put_u64(c, token + 8 + 6, (uint64_t)size); /* the second token's length */
    snprintf(where, sizeof where, "byte %zu, key tokenizer.ggml.tokens", token + 8 + 6);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "string 1 of an array of at most", NULL);

    /* A tensor name longer than the spec's 64 bytes. */
    memcpy(c, buf, size);
    size_t name = str_pos(buf, size, "blk.0.attn_q.weight");
    put_u64(c, name, 65);
    snprintf(where, sizeof where, "byte %zu", name);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "the name of tensor 2 of at most 64 bytes",
                      "got length 65");
    free(c);
    free(buf);
}

static void test_unknown_value_type(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    uint8_t *c = copy_of(buf, size);
    char where[96];
    size_t type = kv_type_pos(buf, size, "general.file_type");
    put_u32(c, type, 13);
    snprintf(where, sizeof where, "byte %zu, key general.file_type", type);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "expected a value type in 0..12",
                      "got 13");
    memcpy(c, buf, size);
    size_t elem = kv_value_pos(buf, size, "tokenizer.ggml.token_type");
    put_u32(c, elem, 0xffffffffu);
    snprintf(where, sizeof where, "byte %zu, key tokenizer.ggml.token_type", elem);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "an array element type in 0..12",
                      "got 4294967295");
    free(c);
    free(buf);
}

static void test_duplicates(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    uint8_t *c = copy_of(buf, size);
    char phrase[96];
    size_t first = str_pos(buf, size, "tokenizer.ggml.bos_token_id");
    size_t eos = str_pos(buf, size, "tokenizer.ggml.eos_token_id");
    memcpy(c + eos + 8, "tokenizer.ggml.bos_token_id", 27);
    snprintf(phrase, sizeof phrase, "the first is at byte %zu", first);
    want_parse_fail(c, size, ASSAY_ERR_DUPLICATE, "key tokenizer.ggml.bos_token_id",
                      "expected each key once", phrase);

    memcpy(c, buf, size);
    size_t q = str_pos(buf, size, "blk.0.attn_q.weight");
    size_t k = str_pos(buf, size, "blk.0.attn_k.weight");
    memcpy(c + k + 8, "blk.0.attn_q.weight", 19);
    snprintf(phrase, sizeof phrase, "the first is at byte %zu", q);
    char where[96];
    snprintf(where, sizeof where, "byte %zu, tensor blk.0.attn_q.weight", k);
    want_parse_fail(c, size, ASSAY_ERR_DUPLICATE, where, "expected each tensor name once",
                      phrase);
    free(c);
    free(buf);
}

static void test_bad_dims(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    uint8_t *c = copy_of(buf, size);
    char where[96];
    size_t dims = tensor_dims_pos(buf, size, "blk.0.attn_q.weight");
    assert_int_equal(get_u32(buf, dims), 2);
    put_u64(c, dims + 4, (uint64_t)1 << 32);
    put_u64(c, dims + 12, (uint64_t)1 << 32);
    snprintf(where, sizeof where, "byte %zu, tensor blk.0.attn_q.weight", dims + 12);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where,
                      "dimensions whose product (the element count) fits in int64",
                      "ne[1] = 4294967296 after a product of 4294967296");
    memcpy(c, buf, size);
    put_u64(c, dims + 4, (uint64_t)1 << 63);
    snprintf(where, sizeof where, "byte %zu, tensor blk.0.attn_q.weight", dims + 4);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "a dimension of at most 2^63-1",
                      "got 9223372036854775808");
    /* Element count fits, bytes do not. */
    memcpy(c, buf, size);
    put_u64(c, dims + 4, (uint64_t)1 << 31);
    put_u64(c, dims + 12, (uint64_t)1 << 31);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "tensor blk.0.attn_q.weight",
                      "expected a tensor of fewer than 2^64 bytes",
                      "got 4611686018427387904 blocks of 4 bytes");
    free(c);
    free(buf);
}

static void test_bad_ggml_type(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    uint8_t *c = copy_of(buf, size);
    size_t type = tensor_type_pos(buf, size, "blk.0.attn_q.weight");
    assert_int_equal(get_u32(buf, type), 0);
    put_u32(c, type, 99);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "tensor blk.0.attn_q.weight",
                      "a ggml type in 0..39", "got 99");
    put_u32(c, type, 16);
    want_parse_fail(c, size, ASSAY_ERR_UNSUPPORTED, "tensor blk.0.attn_q.weight",
                      "a ggml type whose size is known", "IQ2_XXS (16)");
    free(c);
    free(buf);
}

static void test_bad_offsets(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    uint8_t *c = copy_of(buf, size);
    char where[96], phrase[160];
    size_t q_off = tensor_offset_pos(buf, size, "blk.0.attn_q.weight");
    uint64_t q = get_u64(buf, q_off);
    uint64_t norm = get_u64(buf, tensor_offset_pos(buf, size, "blk.0.attn_norm.weight"));

    put_u64(c, q_off, q + 4);
    snprintf(where, sizeof where, "byte %zu, tensor blk.0.attn_q.weight", q_off);
    snprintf(phrase, sizeof phrase, "got %llu", (unsigned long long)(q + 4));
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where,
                      "expected a data offset that is a multiple of 32", phrase);

    /* attn_q moved onto attn_norm (both aligned, both inside the file). */
    put_u64(c, q_off, norm);
    snprintf(phrase, sizeof phrase, "data that does not overlap blk.0.attn_norm.weight (data "
             "offsets %llu..%llu)", (unsigned long long)norm,
             (unsigned long long)(norm + 64 * 4 - 1));
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, phrase, NULL);

    /* Past the end of the file. */
    size_t out_off = tensor_offset_pos(buf, size, "output.weight");
    memcpy(c, buf, size);
    put_u64(c, out_off, (uint64_t)1 << 40);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "tensor output.weight",
                      "66560 bytes of tensor data for output.weight", "the file has none");
    memcpy(c, buf, size);
    put_u64(c, out_off, UINT64_MAX - 31);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "tensor output.weight",
                      "66560 bytes of tensor data for output.weight", "the file has none");
    free(c);
    free(buf);
}

/* Random corruption of a small valid file: every result is a clean status
 * (never a crash or, under ASan/valgrind, an out-of-bounds read), and a
 * file that parses has its tensor data inside the buffer. */
static void test_mutations(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = sample_bytes(&size, 0);
    uint8_t *c = malloc(size);
    assert_non_null(c);
    uint64_t x = 0x9e3779b97f4a7c15u; /* fixed seed */
    int n_ok = 0, n_fail = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(c, buf, size);
        size_t len = size;
        int n_edits = 1 + (int)((x >> 60) & 3);
        for (int e = 0; e < n_edits; e++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            size_t pos = (size_t)((x >> 33) % size);
            switch ((x >> 20) & 7) {
            case 0:
                if (pos + 8 <= size) {
                    put_u64(c, pos, x ^ (x << 17));
                }
                break;
            case 1:
                if (pos + 8 <= size) {
                    put_u64(c, pos, (x >> 8) & 0xffff);
                }
                break;
            case 2:
                len = pos;
                break;
            case 3:
                c[pos] = 0xff;
                break;
            case 4:
                c[pos] = 0;
                break;
            default:
                c[pos] ^= (uint8_t)(1u << ((x >> 40) & 7));
                break;
            }
        }
        uint8_t *part = malloc(len > 0 ? len : 1);
        assert_non_null(part);
        memcpy(part, c, len);
        struct assay_gguf *g;
        struct assay_diag diag;
        assay_diag_clear(&diag);
        enum assay_status st = assay_gguf_parse(part, len, NULL, &g, &diag);
        if (st == ASSAY_OK) {
            n_ok++;
            for (size_t i = 0; i < assay_gguf_n_tensors(g); i++) {
                const struct assay_gguf_tensor *t = assay_gguf_tensor_at(g, i);
                assert_ptr_equal(assay_gguf_find_tensor(g, t->name), t);
                if (t->n_bytes > 0) {
                    const uint8_t *d = t->data;
                    assert_true(d >= part && d + t->n_bytes <= part + len);
                }
            }
            for (size_t i = 0; i < assay_gguf_n_kv(g); i++) {
                const char *key = assay_gguf_kv_key(g, i);
                uint64_t n;
                assert_int_equal(assay_gguf_find_key(g, key), (int64_t)i);
                if (assay_gguf_get_array(g, key, ASSAY_GGUF_TYPE_STRING, &n, NULL) == ASSAY_OK) {
                    for (uint64_t j = 0; j < n; j++) {
                        const char *s;
                        size_t slen;
                        assert_int_equal(
                            assay_gguf_get_array_string(g, key, j, &s, &slen, NULL), ASSAY_OK);
                        assert_true(strlen(s) <= slen);
                    }
                }
            }
            assay_gguf_free(g);
        } else {
            n_fail++;
            assert_null(g);
            assert_true(st == ASSAY_ERR_PARSE || st == ASSAY_ERR_UNSUPPORTED ||
                        st == ASSAY_ERR_DUPLICATE);
            assert_true(diag.where[0] != '\0' && diag.expected[0] != '\0');
        }
        free(part);
    }
    /* Both outcomes occur, so the loop tested something. */
    assert_true(n_ok > 100 && n_fail > 100);
    free(c);
    free(buf);
}

/* ------------------------------------------------------------------ */
/* Corrupted files: the model loader                                   */
/* ------------------------------------------------------------------ */

static void test_load_wrong_tensor_type(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    put_u32(buf, tensor_type_pos(buf, size, "blk.0.attn_q.weight"), 3); /* Q4_1 */
    want_load_fail(buf, size, ASSAY_ERR_UNSUPPORTED, "blk.0.attn_q.weight",
                   "expected a tensor type assay decodes", "got Q4_1 (type 3)");
    free(buf);
}

static void test_load_wrong_shape(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    size_t dims = tensor_dims_pos(buf, size, "blk.0.attn_q.weight");
    put_u64(buf, dims + 12, 32);
    want_load_fail(buf, size, ASSAY_ERR_PARSE, "blk.0.attn_q.weight",
                     "expected ne [64, 64] (fastest first)", "got ne [64, 32]");
    /* Transposed: same element count, wrong order. */
    size_t down = tensor_dims_pos(buf, size, "blk.1.ffn_down.weight");
    put_u64(buf, dims + 12, 64);
    put_u64(buf, down + 4, 64);
    put_u64(buf, down + 12, 256);
    want_load_fail(buf, size, ASSAY_ERR_PARSE, "blk.1.ffn_down.weight",
                     "expected ne [256, 64]", "got ne [64, 256]");
    free(buf);
}

static void test_load_nonfinite(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    uint8_t *c = copy_of(buf, size);
    float nan = NAN, inf = -INFINITY;
    memcpy(c + tensor_data_pos(buf, size, "blk.1.ffn_down.weight") + 5 * 4, &nan, 4);
    want_load_fail(c, size, ASSAY_ERR_PARSE, "blk.1.ffn_down.weight", "expected finite weights",
                     "got NaN at element 5");
    memcpy(c, buf, size);
    memcpy(c + tensor_data_pos(buf, size, "output.weight") + 16639 * 4, &inf, 4);
    want_load_fail(c, size, ASSAY_ERR_PARSE, "output.weight", "expected finite weights",
                     "got -Inf at element 16639");
    free(c);
    free(buf);
}

static void test_load_missing_and_extra_tensors(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    uint8_t *c = copy_of(buf, size);
    /* Renamed: blk.0.ffn_up.weight is missing. */
    memcpy(c + str_pos(buf, size, "blk.0.ffn_up.weight") + 8, "blk.0.ffn_uq.weight", 19);
    want_load_fail(c, size, ASSAY_ERR_NOT_FOUND, "blk.0.ffn_up.weight",
                     "expected a tensor of ne [64, 256]", "got no such tensor");
    /* One layer declared, two in the file: blk.1.* are unknown. */
    memcpy(c, buf, size);
    put_u32(c, kv_value_pos(buf, size, "llama.block_count"), 1);
    want_load_fail(c, size, ASSAY_ERR_PARSE, "blk.1.attn_norm.weight",
                     "only the 12 tensors of a 1-layer llama model",
                     "got unknown tensor blk.1.attn_norm.weight");
    /* Three layers declared, two in the file. */
    put_u32(c, kv_value_pos(buf, size, "llama.block_count"), 3);
    want_load_fail(c, size, ASSAY_ERR_NOT_FOUND, "blk.2.attn_norm.weight", "no such tensor",
                     NULL);
    free(c);
    free(buf);
}

/* The end-of-generation token comes from tokenizer.ggml.eos_token_id: the
 * audit takes it as the server's EOS unless told otherwise. */
static void test_load_eos_token(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    struct assay_model *m = NULL;
    struct assay_diag diag;
    want_status(assay_model_load_gguf_buffer(&m, buf, size, "mini", &diag), ASSAY_OK, &diag);
    assert_int_equal(m->eos_token, ASSAY_TOKEN_EOS);
    assay_model_free(m);

    uint8_t *c = copy_of(buf, size);
    put_u32(c, kv_value_pos(buf, size, "tokenizer.ggml.eos_token_id"), 7);
    want_status(assay_model_load_gguf_buffer(&m, c, size, "mini", &diag), ASSAY_OK, &diag);
    assert_int_equal(m->eos_token, 7);
    assay_model_free(m);

    put_u32(c, kv_value_pos(buf, size, "tokenizer.ggml.eos_token_id"), 260);
    want_load_fail(c, size, ASSAY_ERR_PARSE, "tokenizer.ggml.eos_token_id",
                   "a token id below the vocabulary size 260", "got 260");

    /* A vocabulary without the id 257 names no EOS token. */
    struct assay_model_config cfg = assay_model_config_mini();
    cfg.vocab = 200;
    struct assay_model *small;
    assert_int_equal(assay_model_init_random(&small, &cfg, 1), ASSAY_OK);
    assert_int_equal(small->eos_token, -1);
    char path[512];
    assay_test_scratch("gguf-no-eos.gguf", path, sizeof path);
    want_status(assay_model_save_gguf(small, path, &diag), ASSAY_OK, &diag);
    assay_model_free(small);
    want_status(assay_model_load_gguf(&m, path, &diag), ASSAY_OK, &diag);
    assert_int_equal(m->eos_token, -1);
    assay_model_free(m);
    remove(path);
    free(c);
    free(buf);
}

static void test_load_bad_metadata(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = mini_bytes(&size);
    uint8_t *c = copy_of(buf, size);

    put_u32(c, kv_value_pos(buf, size, "llama.attention.head_count_kv"), 3);
    want_load_fail(c, size, ASSAY_ERR_INVALID, "llama.attention.head_count_kv",
                     "expected a divisor of llama.attention.head_count", "got 3 (head_count 4)");

    memcpy(c, buf, size);
    put_u32(c, kv_value_pos(buf, size, "llama.embedding_length"), 0);
    want_load_fail(c, size, ASSAY_ERR_INVALID, "llama.embedding_length",
                     "an integer in 1..16384", "got 0");

    memcpy(c, buf, size);
    put_u32(c, kv_value_pos(buf, size, "llama.feed_forward_length"), 0x80000000u);
    want_load_fail(c, size, ASSAY_ERR_INVALID, "llama.feed_forward_length",
                     "an integer in 0..2147483647", "got 2147483648");

    memcpy(c, buf, size);
    put_u32(c, kv_type_pos(buf, size, "llama.embedding_length"), ASSAY_GGUF_TYPE_I32);
    want_load_fail(c, size, ASSAY_ERR_PARSE, "llama.embedding_length",
                     "expected a value of type u32", "got a value of type i32");

    memcpy(c, buf, size);
    memcpy(c + str_pos(buf, size, "llama.block_count") + 8, "llama.blocK_count", 17);
    want_load_fail(c, size, ASSAY_ERR_NOT_FOUND, "llama.block_count", "a value of type u32",
                     "got no such key");

    memcpy(c, buf, size);
    put_u32(c, kv_value_pos(buf, size, "llama.vocab_size"), 300);
    want_load_fail(c, size, ASSAY_ERR_PARSE, "tokenizer.ggml.tokens",
                     "expected 300 tokens (llama.vocab_size)", "got 260");

    /* A bad file seen through the loader keeps the reader's diagnostic. */
    memcpy(c, buf, size);
    c[0] = 'X';
    want_load_fail(c, size, ASSAY_ERR_PARSE, "byte 0", "magic \"GGUF\"", "got \"XGUF\"");
    free(c);
    free(buf);
}

static void test_load_not_llama(void **state)
{
    (void)state;
    struct assay_gguf_writer *w;
    char path[512];
    struct assay_diag diag;
    assay_test_scratch("gguf-gpt2.gguf", path, sizeof path);
    assert_int_equal(assay_gguf_writer_init(&w), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_string(w, "general.architecture", "gpt2"), ASSAY_OK);
    assert_int_equal(assay_gguf_writer_add_u32(w, "gpt2.block_count", 2), ASSAY_OK);
    want_status(assay_gguf_writer_write(w, path, &diag), ASSAY_OK, &diag);
    assay_gguf_writer_free(w);
    size_t size;
    uint8_t *buf = read_all(path, &size);
    want_load_fail(buf, size, ASSAY_ERR_UNSUPPORTED, "general.architecture",
                     "expected \"llama\"", "got \"gpt2\"");
    free(buf);
    remove(path);

    struct assay_model *m = (struct assay_model *)&m;
    assay_test_scratch("gguf-does-not-exist.gguf", path, sizeof path);
    want_status(assay_model_load_gguf(&m, path, &diag), ASSAY_ERR_IO, &diag);
    assert_null(m);
    want_diag(&diag, "opening", "a readable file", "No such file");
}

/* ------------------------------------------------------------------ */
/* Failing allocations and failing saves                               */
/* ------------------------------------------------------------------ */

static void test_load_fail_alloc(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *orig;
    struct assay_diag diag;
    char path[512];
    assay_test_scratch("gguf-oom.gguf", path, sizeof path);
    assert_int_equal(assay_model_init_random(&orig, &cfg, 5), ASSAY_OK);
    want_status(assay_model_save_gguf(orig, path, &diag), ASSAY_OK, &diag);
    long k;
    bool loaded = false;
    for (k = 1; k < 1000 && !loaded; k++) {
        struct assay_model *m = (struct assay_model *)&m;
        assay_test_fail_alloc_at(k);
        enum assay_status st = assay_model_load_gguf(&m, path, &diag);
        if (st == ASSAY_OK) {
            loaded = true;
            assert_string_equal(m->sha256, orig->sha256);
            assay_model_free(m);
        } else {
            want_status(st, ASSAY_ERR_NOMEM, &diag);
            assert_null(m);
        }
        long live = assay_test_alloc_live();
        assay_test_fail_alloc_off();
        assert_int_equal(live, 0);
    }
    assert_true(loaded);
    assert_true(k > 8); /* the reader's and the model's allocations all failed once */
    assay_model_free(orig);
    remove(path);
}

static void test_save_fail_alloc(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *m;
    struct assay_diag diag;
    char path[512];
    assay_test_scratch("gguf-oom-save.gguf", path, sizeof path);
    remove(path);
    assert_int_equal(assay_model_init_random(&m, &cfg, 5), ASSAY_OK);
    long k;
    bool saved = false;
    for (k = 1; k < 1000 && !saved; k++) {
        assay_test_fail_alloc_at(k);
        enum assay_status st = assay_model_save_gguf(m, path, &diag);
        long live = assay_test_alloc_live();
        assay_test_fail_alloc_off();
        assert_int_equal(live, 0);
        if (st == ASSAY_OK) {
            saved = true;
        } else {
            want_status(st, ASSAY_ERR_NOMEM, &diag);
            assert_false(file_exists(path));
        }
    }
    assert_true(saved);
    assert_true(k > 5);
    struct assay_model *back;
    want_status(assay_model_load_gguf(&back, path, &diag), ASSAY_OK, &diag);
    assert_string_equal(back->sha256, m->sha256);
    assay_model_free(back);
    assay_model_free(m);
    remove(path);
}

static void test_save_no_directory(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *m;
    struct assay_diag diag;
    char path[512], tmp[600];
    assay_test_scratch("gguf-no-such-dir/model.gguf", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    assert_int_equal(assay_model_init_random(&m, &cfg, 5), ASSAY_OK);
    assay_diag_clear(&diag);
    want_status(assay_model_save_gguf(m, path, &diag), ASSAY_ERR_IO, &diag);
    assert_string_equal(diag.file, path);
    want_diag(&diag, "creating the temporary file", "No such file or directory", NULL);
    assert_false(file_exists(path));
    assert_false(file_exists(tmp));
    assay_model_free(m);
}

/* A write that fails part way (the file size limit) removes the temporary
 * file and leaves the previous file untouched. */
static void test_save_write_error(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *a, *b;
    struct assay_diag diag;
    char path[512], tmp[600];
    assay_test_scratch("gguf-fsize.gguf", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    assert_int_equal(assay_model_init_random(&a, &cfg, 5), ASSAY_OK);
    assert_int_equal(assay_model_init_random(&b, &cfg, 6), ASSAY_OK);
    want_status(assay_model_save_gguf(a, path, &diag), ASSAY_OK, &diag);
    size_t size_before;
    uint8_t *before = read_all(path, &size_before);

    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 65536;
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < lim.rlim_cur) {
        lim.rlim_cur = old.rlim_max;
    }
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    assay_diag_clear(&diag);
    enum assay_status st = assay_model_save_gguf(b, path, &diag);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);

    want_status(st, ASSAY_ERR_IO, &diag);
    want_diag(&diag, "writing byte", "a complete write", "File too large");
    assert_false(file_exists(tmp));
    size_t size_after;
    uint8_t *after = read_all(path, &size_after);
    assert_int_equal(size_after, size_before);
    assert_memory_equal(after, before, size_before);
    free(before);
    free(after);
    assay_model_free(a);
    assay_model_free(b);
    remove(path);
}

/* ------------------------------------------------------------------ */
/* Tensor types other than F32, and tied embeddings                    */
/* ------------------------------------------------------------------ */

/* Float to IEEE binary16 bits, rounding to nearest even, written here from
 * the format's definition and not shared with engine/dequant.c. */
static uint16_t half_bits(float x)
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

static float half_value(uint16_t h)
{
    int biased = (h >> 10) & 31, frac = h & 1023;
    float v = biased == 0 ? ldexpf((float)frac, -24) : ldexpf((float)(frac + 1024), biased - 25);
    return (h & 0x8000u) != 0 ? -v : v;
}

/* Q8_0 by the format's rule: per block of 32, d = max|x| / 127 stored as
 * f16, q = round(x / d); the value is f16(d) * q. */
static int8_t q8_quant(float x, float d)
{
    return (int8_t)(d == 0.0f ? 0.0f : roundf(x / d));
}

static float q8_block_scale(const float *x)
{
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) {
        amax = fmaxf(amax, fabsf(x[i]));
    }
    return amax / 127.0f;
}

/* n floats stored as type (F32, F16 or Q8_0; any other type gets zero
 * bytes of its size); returns the bytes written. */
static size_t encode(uint32_t type, const float *x, int64_t n, uint8_t *out)
{
    if (type == ASSAY_GGML_TYPE_F32) {
        memcpy(out, x, (size_t)n * 4);
        return (size_t)n * 4;
    }
    if (type == ASSAY_GGML_TYPE_F16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = half_bits(x[i]);
            out[2 * i] = (uint8_t)h;
            out[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return (size_t)n * 2;
    }
    if (type == ASSAY_GGML_TYPE_Q8_0) {
        for (int64_t b = 0; b < n / 32; b++) {
            uint8_t *blk = out + 34 * b;
            float d = q8_block_scale(x + 32 * b);
            uint16_t h = half_bits(d);
            blk[0] = (uint8_t)h;
            blk[1] = (uint8_t)(h >> 8);
            for (int i = 0; i < 32; i++) {
                blk[2 + i] = (uint8_t)q8_quant(x[32 * b + i], d);
            }
        }
        return (size_t)(n / 32) * 34;
    }
    uint32_t be, bb;
    if (!assay_ggml_type_size(type, &be, &bb)) {
        return 0; /* the reader refuses the type before it looks for data */
    }
    size_t bytes = (size_t)(n / be) * bb;
    memset(out, 0, bytes);
    return bytes;
}

/* What a value stored as type (F32, F16 or Q8_0) reads back as, for element
 * i of the row-major tensor x whose rows are ne0 long. */
static float stored_value(uint32_t type, const float *x, int64_t i)
{
    if (type == ASSAY_GGML_TYPE_F16) {
        return half_value(half_bits(x[i]));
    }
    if (type == ASSAY_GGML_TYPE_Q8_0) {
        const float *block = x + i / 32 * 32;
        float d = q8_block_scale(block);
        return half_value(half_bits(d)) * (float)q8_quant(x[i], d);
    }
    return x[i];
}

/* How to rebuild a model file: each tensor's type, a tensor to leave out
 * and an f32 tensor to add (NULL for none). */
struct retype {
    uint32_t (*type_of)(const struct assay_gguf_tensor *t);
    const char *drop;
    const char *stray;
};

/* The f32 GGUF file buf rebuilt with the same metadata and tensors stored
 * as r says; *out_size its length. */
static uint8_t *retyped(const uint8_t *buf, size_t size, const struct retype *r, size_t *out_size)
{
    struct assay_gguf *g;
    struct assay_diag diag;
    want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    size_t n = assay_gguf_n_tensors(g);
    const char *first = assay_gguf_tensor_at(g, 0)->name;
    size_t meta_end = tensor_dims_pos(buf, size, first) - 8 - strlen(first);
    static const float stray_data[32];
    size_t cap = size + 4096;
    uint8_t *out = calloc(1, cap);
    uint8_t *data = calloc(1, size + 64);
    assert_non_null(out);
    assert_non_null(data);
    size_t n_out = n + (r->stray != NULL ? 1 : 0) - (r->drop != NULL ? 1 : 0);
    memcpy(out, buf, meta_end);
    put_u64(out, 8, n_out);
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
        put_u64(out, pos, len);
        memcpy(out + pos + 8, name, len);
        pos += 8 + len;
        put_u32(out, pos, n_dims);
        pos += 4;
        for (uint32_t d = 0; d < n_dims; d++) {
            put_u64(out, pos, t != NULL ? (uint64_t)t->ne[d] : 32);
            pos += 8;
        }
        put_u32(out, pos, type);
        put_u64(out, pos + 4, data_len);
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
    write_all(path, buf, size);
    want_status(assay_model_load_gguf(&m, path, &diag), ASSAY_OK, &diag);
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
    want_status(assay_model_save_gguf(orig, path, &diag), ASSAY_OK, &diag);
    uint8_t *buf = read_all(path, &size);
    remove(path);
    struct assay_gguf *g;
    want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
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
        assert_int_equal(half_bits(cases[i].x), cases[i].h);
        if (cases[i].h != 0x7c00) {
            assert_true(half_value(cases[i].h) == half_value(half_bits(cases[i].x)));
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
    uint8_t *buf = mini_bytes(&size);
    struct retype r = {all_f16, NULL, NULL};
    uint8_t *f16 = retyped(buf, size, &r, &n);
    assert_true(n < size / 2 + 65536); /* really two bytes a weight */
    struct assay_model *m = load_bytes(f16, n, "gguf-f16.gguf");
    want_stored_weights(m, orig, all_f16);
    assert_string_equal(m->tensor_types, "F16");
    assert_int_equal(m->layers[cfg.n_layer - 1].types.w_down, ASSAY_GGML_TYPE_F16);
    assert_int_equal(m->output_type, ASSAY_GGML_TYPE_F16);
    assert_false(m->tied);
    assert_string_not_equal(m->sha256, orig->sha256);
    /* The same file with F32 tensors is the original, bit for bit. */
    struct retype same = {all_f32, NULL, NULL};
    uint8_t *f32 = retyped(buf, size, &same, &n);
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
    uint8_t *buf = mini_bytes(&size);
    struct retype r = {matrices_q8_0, NULL, NULL};
    uint8_t *q8 = retyped(buf, size, &r, &n);
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
        float step = q8_block_scale(orig->tok_embd + i / 32 * 32);
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
    want_status(assay_adapter_open_spec(spec, &a, &diag), ASSAY_OK, &diag);
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
    uint8_t *buf = mini_bytes(&size);
    struct retype r = {all_f32, "output.weight", NULL};
    uint8_t *tied = retyped(buf, size, &r, &n);
    char path[512];
    struct assay_diag diag;
    assay_test_scratch("gguf-tied.gguf", path, sizeof path);
    write_all(path, tied, n);
    struct assay_model *m;
    want_status(assay_model_load_gguf(&m, path, &diag), ASSAY_OK, &diag);
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
    want_status(assay_model_save_gguf(m, again, &diag), ASSAY_OK, &diag);
    struct assay_model *m2;
    want_status(assay_model_load_gguf(&m2, again, &diag), ASSAY_OK, &diag);
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
    want_status(assay_model_save_gguf(orig, untied, &diag), ASSAY_OK, &diag);
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
    uint8_t *buf = mini_bytes(&size);
    /* A type the reader sizes but assay does not decode. */
    struct retype r = {q4_1_attn_k, NULL, NULL};
    uint8_t *c = retyped(buf, size, &r, &n);
    want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "blk.1.attn_k.weight",
                   "expected a tensor type assay decodes (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q5_K "
                   "or Q6_K)",
                   "got Q4_1 (type 3)");
    free(c);
    r.type_of = q3_k_down;
    c = retyped(buf, size, &r, &n);
    want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "blk.0.ffn_down.weight", "Q6_K",
                   "got Q3_K (type 11)");
    free(c);
    /* A type the reader cannot even size is refused by the reader, which
     * names the tensor and the type too. */
    r.type_of = iq2_xs_output;
    c = retyped(buf, size, &r, &n);
    want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "tensor output.weight",
                   "a ggml type whose size is known", "got IQ2_XS (17)");
    free(c);
    /* A row of 64 elements is a quarter of a Q4_K super-block. */
    r.type_of = q4_k_norm;
    c = retyped(buf, size, &r, &n);
    want_load_fail(c, n, ASSAY_ERR_PARSE, "tensor blk.0.ffn_norm.weight",
                   "expected ne[0] a multiple of the Q4_K block of 256", "got 64");
    free(c);
    /* A NaN block scale: the tensor, its row and its block. */
    r.type_of = matrices_q8_0;
    c = retyped(buf, size, &r, &n);
    size_t at = tensor_data_pos(c, n, "blk.1.ffn_up.weight") + 2 * 34 + 34;
    put_u32(c, at, get_u32(c, at) | 0x7e00u); /* block 1 of row 1 (two blocks a row) */
    want_load_fail(c, n, ASSAY_ERR_PARSE, "blk.1.ffn_up.weight row 1: Q8_0 block 1 at byte 34",
                   "expected a finite f16 scale", "got NaN");
    free(c);
    free(buf);
}

static void test_load_tied_stray(void **state)
{
    (void)state;
    size_t size, n;
    uint8_t *buf = mini_bytes(&size);
    struct retype r = {all_f32, "output.weight", "output.bias"};
    uint8_t *c = retyped(buf, size, &r, &n);
    want_load_fail(c, n, ASSAY_ERR_PARSE, "output.bias",
                   "expected only the 20 tensors of a 2-layer tied llama model",
                   "got unknown tensor output.bias");
    free(c);
    /* The same stray in an untied file. */
    r.drop = NULL;
    c = retyped(buf, size, &r, &n);
    want_load_fail(c, n, ASSAY_ERR_PARSE, "output.bias", "only the 21 tensors", NULL);
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
    want_status(assay_model_save_gguf(m, path, &diag), ASSAY_OK, &diag);
    uint8_t *buf = read_all(path, size);
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
    want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    size_t n = assay_gguf_n_tensors(g);
    const char *first = assay_gguf_tensor_at(g, 0)->name;
    size_t meta_end = tensor_dims_pos(buf, size, first) - 8 - strlen(first);
    size_t infos_end = tensor_offset_pos(buf, size, assay_gguf_tensor_at(g, n - 1)->name) + 8;
    size_t data_at = (size_t)assay_gguf_data_offset(g);
    size_t n_kv = assay_gguf_n_kv(g);
    assay_gguf_free(g);
    size_t rec = 8 + strlen(key) + 4 + value_len;
    size_t infos = meta_end + rec + (infos_end - meta_end);
    size_t data_to = (infos + 31) / 32 * 32;
    uint8_t *out = calloc(1, data_to + (size - data_at));
    assert_non_null(out);
    memcpy(out, buf, meta_end);
    put_u64(out, 16, n_kv + 1);
    put_u64(out, meta_end, strlen(key));
    memcpy(out + meta_end + 8, key, strlen(key));
    put_u32(out, meta_end + 8 + strlen(key), type);
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
    put_u32(b, 0, u);
    return with_kv(buf, size, key, ASSAY_GGUF_TYPE_F32, b, 4, out_size);
}

static uint8_t *with_kv_string(const uint8_t *buf, size_t size, const char *key, const char *s,
                               size_t *out_size)
{
    uint8_t b[8 + 64];
    assert_true(strlen(s) <= 64);
    put_u64(b, 0, strlen(s));
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
    want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    want_string(g, "general.architecture", "qwen2");
    want_u32(g, "qwen2.block_count", 2);
    want_u32(g, "qwen2.embedding_length", 64);
    want_u32(g, "qwen2.attention.head_count_kv", 2);
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
    want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    want_string(g, "general.architecture", "llama");
    want_string(g, "llama.rope.scaling.type", "linear");
    float f = 0;
    want_status(assay_gguf_get_f32(g, "llama.rope.scaling.factor", &f, &diag), ASSAY_OK, &diag);
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
    want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
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
    uint8_t *c = copy_of(buf, size);
    /* A llama key in a qwen2 file is not read, and the reverse. */
    memcpy(c + str_pos(buf, size, "qwen2.block_count") + 8, "llama", 5);
    want_load_fail(c, size, ASSAY_ERR_NOT_FOUND, "qwen2.block_count", "a value of type u32",
                   "got no such key");
    memcpy(c, buf, size);
    memcpy(c + str_pos(buf, size, "qwen2") + 8, "llama", 5); /* general.architecture */
    want_load_fail(c, size, ASSAY_ERR_NOT_FOUND, "llama.block_count", NULL, "got no such key");
    /* Validation names the file's keys too. */
    memcpy(c, buf, size);
    put_u32(c, kv_value_pos(buf, size, "qwen2.attention.head_count_kv"), 3);
    want_load_fail(c, size, ASSAY_ERR_INVALID, "qwen2.attention.head_count_kv",
                   "a divisor of qwen2.attention.head_count", "got 3 (head_count 4)");
    /* Without rope.dimension_count the whole head (d_model / head_count)
     * turns. */
    memcpy(c, buf, size);
    memcpy(c + str_pos(buf, size, "qwen2.rope.dimension_count") + 8, "x", 1);
    struct assay_model *back = load_ok(c, size);
    assert_int_equal(back->cfg.head_dim, 16);
    assert_int_equal(back->cfg.arch, ASSAY_ARCH_QWEN2);
    assert_string_equal(back->sha256, m->sha256);
    assay_model_free(back);
    /* A partial rotation is refused. */
    memcpy(c, buf, size);
    put_u32(c, kv_value_pos(buf, size, "qwen2.rope.dimension_count"), 8);
    want_load_fail(c, size, ASSAY_ERR_UNSUPPORTED, "qwen2.rope.dimension_count",
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
    c = copy_of(buf, size);
    /* Without value_length a value head is d_model / head_count wide
     * whatever key_length says (llama.cpp's default), so values and keys
     * differ. */
    memcpy(c + str_pos(buf, size, "qwen2.attention.value_length") + 8, "x", 1);
    want_load_fail(c, size, ASSAY_ERR_UNSUPPORTED, "qwen2.attention.value_length",
                   "expected the head size (values as wide as keys)",
                   "got no such key: embedding_length / head_count = 16 (head size 8)");
    memcpy(c, buf, size);
    memcpy(c + str_pos(buf, size, "qwen2.attention.key_length") + 8, "x", 1);
    want_load_fail(c, size, ASSAY_ERR_UNSUPPORTED, "qwen2.attention.value_length",
                   "expected the head size", "got 8 (head size 16)");
    memcpy(c + str_pos(buf, size, "qwen2.attention.value_length") + 8, "x", 1);
    memcpy(c + str_pos(buf, size, "qwen2.rope.dimension_count") + 8, "x", 1);
    want_load_fail(c, size, ASSAY_ERR_PARSE, "blk.0.attn_q.weight", "expected ne [64, 64]",
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
    want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "llama.rope.scaling.type",
                   "expected \"none\" or \"linear\"", "got \"yarn\"");
    free(c);
    c = with_kv_string(buf, size, "llama.rope.scaling.type", "longrope", &n);
    want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "llama.rope.scaling.type", NULL,
                   "got \"longrope\"");
    free(c);
    c = with_kv_f32(buf, size, "llama.rope.scaling.attn_factor", 2.0f, &n);
    want_load_fail(c, n, ASSAY_ERR_UNSUPPORTED, "llama.rope.scaling.attn_factor",
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
    want_load_fail(c, n, ASSAY_ERR_INVALID, "llama.rope.scale_linear",
                   "expected 0 (none) or a finite number > 0", "got -1");
    free(c);
    free(buf);
    assay_model_free(m);

    m = arch_model(ASSAY_ARCH_QWEN2, false, false, 2.0f, false);
    buf = model_bytes(m, &size);
    back = load_ok(buf, size);
    assert_true(back->cfg.rope_scale == 2.0f);
    assay_model_free(back);
    c = copy_of(buf, size);
    size_t factor = kv_value_pos(buf, size, "qwen2.rope.scaling.factor");
    const struct {
        float value;
        const char *got;
    } bad[] = {{-1.0f, "got -1"}, {NAN, "nan"}, {INFINITY, "got inf"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t u;
        memcpy(&u, &bad[i].value, 4);
        put_u32(c, factor, u);
        want_load_fail(c, size, ASSAY_ERR_INVALID, "qwen2.rope.scaling.factor",
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
    struct retype r = {all_f32, "blk.0.attn_k.bias", NULL};
    uint8_t *c = retyped(buf, size, &r, &n);
    want_load_fail(c, n, ASSAY_ERR_NOT_FOUND, "blk.0.attn_k.bias", "expected a tensor of ne [32]",
                   "got no such tensor");
    free(c);
    r.drop = "blk.1.attn_v.bias";
    c = retyped(buf, size, &r, &n);
    want_load_fail(c, n, ASSAY_ERR_NOT_FOUND, "blk.1.attn_v.bias", "expected a tensor of ne [32]",
                   "got no such tensor");
    free(c);
    /* Without layer 0's q bias the model has none, so the others are
     * strays. */
    r.drop = "blk.0.attn_q.bias";
    c = retyped(buf, size, &r, &n);
    want_load_fail(c, n, ASSAY_ERR_PARSE, "blk.0.attn_k.bias",
                   "expected only the 21 tensors of a 2-layer qwen2 model",
                   "got unknown tensor blk.0.attn_k.bias");
    free(c);
    /* A bias of the wrong length. */
    c = copy_of(buf, size);
    put_u64(c, tensor_dims_pos(buf, size, "blk.1.attn_q.bias") + 4, 32);
    want_load_fail(c, size, ASSAY_ERR_PARSE, "blk.1.attn_q.bias", "expected ne [64]",
                   "got ne [32]");
    free(c);
    free(buf);
    assay_model_free(m);
    /* A bias in layer 1 of a model whose layer 0 has none. */
    buf = mini_bytes(&size);
    r.drop = NULL;
    r.stray = "blk.1.attn_q.bias";
    c = retyped(buf, size, &r, &n);
    want_load_fail(c, n, ASSAY_ERR_PARSE, "blk.1.attn_q.bias",
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
    uint8_t *c = copy_of(buf, size);
    size_t at = tensor_data_pos(buf, size, "rope_freqs.weight");
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
        want_load_fail(c, size, ASSAY_ERR_PARSE, "rope_freqs.weight", bad[i].expected, bad[i].got);
    }
    memcpy(c, buf, size);
    put_u64(c, tensor_dims_pos(buf, size, "rope_freqs.weight") + 4, 4);
    want_load_fail(c, size, ASSAY_ERR_PARSE, "rope_freqs.weight", "expected ne [8]", "got ne [4]");
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
    uint8_t *c = copy_of(buf, size);
    memcpy(c + str_pos(buf, size, "qwen2") + 8, "qwen3", 5);
    want_load_fail(c, size, ASSAY_ERR_UNSUPPORTED, "general.architecture",
                   "expected \"llama\" or \"qwen2\"", "got \"qwen3\"");
    memcpy(c, buf, size);
    memcpy(c + str_pos(buf, size, "qwen2") + 8, "qwen\0", 5);
    want_load_fail(c, size, ASSAY_ERR_UNSUPPORTED, "general.architecture", NULL, "got \"qwen\"");
    free(c);
    /* llama.cpp's qwen2 has no RoPE frequency divisors: in a qwen2 file
     * rope_freqs.weight is a tensor nobody knows, and a qwen2 config with
     * them is not made. */
    size_t n;
    struct retype r = {all_f32, NULL, "rope_freqs.weight"};
    c = retyped(buf, size, &r, &n);
    want_load_fail(c, n, ASSAY_ERR_PARSE, "rope_freqs.weight",
                   "expected only the 27 tensors of a 2-layer biased qwen2 model",
                   "got unknown tensor rope_freqs.weight");
    free(c);
    struct assay_model_config cfg = m->cfg;
    cfg.rope_freqs = true;
    struct assay_diag diag;
    assay_diag_clear(&diag); /* validation names no file: it keeps the caller's */
    want_status(assay_model_config_validate(&cfg, &diag), ASSAY_ERR_INVALID, &diag);
    want_diag(&diag, "rope_freqs.weight", "only in a llama model", "in a qwen2 model");
    struct assay_model *q = (struct assay_model *)&q;
    assert_int_equal(assay_model_init_random(&q, &cfg, 1), ASSAY_ERR_INVALID);
    assert_null(q);
    cfg.arch = ASSAY_ARCH_LLAMA;
    want_status(assay_model_config_validate(&cfg, &diag), ASSAY_OK, &diag);
    free(buf);
    assay_model_free(m);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_tinygpt),
        cmocka_unit_test(test_roundtrip_mini),
        cmocka_unit_test(test_save_other_shapes),
        cmocka_unit_test(test_reader_values),
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_writer_rejects),
        cmocka_unit_test(test_nested_arrays),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_bad_version),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_truncation_sweep),
        cmocka_unit_test(test_huge_counts),
        cmocka_unit_test(test_string_past_end),
        cmocka_unit_test(test_unknown_value_type),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_bad_dims),
        cmocka_unit_test(test_bad_ggml_type),
        cmocka_unit_test(test_bad_offsets),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_load_wrong_tensor_type),
        cmocka_unit_test(test_load_wrong_shape),
        cmocka_unit_test(test_load_nonfinite),
        cmocka_unit_test(test_load_missing_and_extra_tensors),
        cmocka_unit_test(test_load_bad_metadata),
        cmocka_unit_test(test_load_eos_token),
        cmocka_unit_test(test_load_not_llama),
        cmocka_unit_test(test_half_reference),
        cmocka_unit_test(test_load_f16),
        cmocka_unit_test(test_load_q8_0),
        cmocka_unit_test(test_load_tied),
        cmocka_unit_test(test_load_bad_types),
        cmocka_unit_test(test_load_tied_stray),
        cmocka_unit_test(test_roundtrip_qwen2_bias_tied),
        cmocka_unit_test(test_roundtrip_llama_rope_scaling),
        cmocka_unit_test(test_load_arch_metadata),
        cmocka_unit_test(test_load_rope_scaling),
        cmocka_unit_test(test_load_bias_tensors),
        cmocka_unit_test(test_load_rope_freqs),
        cmocka_unit_test(test_load_other_arch),
        cmocka_unit_test(test_load_fail_alloc),
        cmocka_unit_test(test_save_fail_alloc),
        cmocka_unit_test(test_save_no_directory),
        cmocka_unit_test(test_save_write_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
