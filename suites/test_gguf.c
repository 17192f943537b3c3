/* Unit tests of engine/gguf.c, the GGUF reader and writer, and of how it
 * and the model loader (engine/model_gguf.c) refuse what they cannot
 * read: values of every type, alignment, nested arrays and what the
 * writer refuses; a corpus of corrupted files built in memory from a
 * valid one (each with its exact status and diagnostic), failing
 * allocations, and failed saves. What a model's file holds (round trips,
 * F16 and Q8_0 tensors, tied embeddings, qwen2, biases, RoPE scaling) is
 * test_model_gguf.c's.
 *
 * Statuses the reader and loader give (the contract these tests and
 * test_model_gguf.c's pin down):
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
#include "engine/gguf.h"
#include "engine/model.h"
#include "gguf_bytes.h"
#include "support.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static bool file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* Parse bytes that must fail with status, where and phrases. */
static void want_parse_fail(const uint8_t *buf, size_t size, enum assay_status status,
                              const char *where_part, const char *phrase1, const char *phrase2)
{
    struct assay_gguf *g = (struct assay_gguf *)&g;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_gguf_parse(buf, size, "t.gguf", &g, &diag);
    gguf_want_status(st, status, &diag);
    assert_null(g);
    assert_string_equal(diag.file, "t.gguf");
    gguf_want_diag(&diag, where_part, phrase1, phrase2);
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
    gguf_want_status(assay_gguf_writer_write(w, path, &diag), ASSAY_OK, &diag);
    assay_gguf_writer_free(w);
    uint8_t *buf = gguf_read_all(path, size);
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
    gguf_put_u32(x->b, x->n, v);
    x->n += 4;
}

static void b_u64(struct bytes *x, uint64_t v)
{
    gguf_put_u64(x->b, x->n, v);
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
/* The generic reader and writer                                       */
/* ------------------------------------------------------------------ */

static void test_reader_values(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = sample_bytes(&size, 0);
    struct assay_gguf *g;
    struct assay_diag diag;
    gguf_want_status(assay_gguf_parse(buf, size, "s.gguf", &g, &diag), ASSAY_OK, &diag);
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
    gguf_want_status(assay_gguf_get_u32(g, "a.nope", &u, &diag), ASSAY_ERR_NOT_FOUND, &diag);
    assert_int_equal(u, 12345);
    gguf_want_diag(&diag, "a.nope", "no such key", NULL);
    assert_string_equal(diag.file, "s.gguf");
    gguf_want_status(assay_gguf_get_f32(g, "a.i32", &f, &diag), ASSAY_ERR_PARSE, &diag);
    gguf_want_diag(&diag, "a.i32", "expected a value of type f32", "got a value of type i32");
    gguf_want_status(assay_gguf_get_array_f32(g, "a.f32s", 3, &f, &diag), ASSAY_ERR_INVALID, &diag);
    gguf_want_diag(&diag, "a.f32s[3]", "an index below 3", NULL);
    gguf_want_status(assay_gguf_get_array_u32(g, "a.i32s", 0, &u, &diag), ASSAY_ERR_PARSE, &diag);
    gguf_want_diag(&diag, "a.i32s", "an array of u32", "got an array of i32");
    gguf_want_status(assay_gguf_get_array_bool(g, "a.bool", 0, &b, &diag), ASSAY_ERR_PARSE, &diag);
    gguf_want_diag(&diag, "a.bool", "an array of bool", "got a value of type bool");

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
    gguf_put_u32(buf, 4, 2);
    gguf_want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
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
    gguf_want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    assert_int_equal(assay_gguf_alignment(g), 64);
    assert_int_equal(assay_gguf_data_offset(g) % 64, 0);
    assert_int_equal(assay_gguf_find_tensor(g, "t.mat")->offset, 64);
    assert_int_equal(assay_gguf_find_tensor(g, "t.4d")->offset, 128);
    assert_memory_equal(assay_gguf_find_tensor(g, "t.mat")->data, k_mat, sizeof k_mat);
    assay_gguf_free(g);

    size_t at = gguf_kv_value_pos(buf, size, "general.alignment");
    gguf_put_u32(buf, at, 48);
    want_parse_fail(buf, size, ASSAY_ERR_PARSE, "key general.alignment",
                      "expected an alignment that is a power of two", "got 48");
    gguf_put_u32(buf, at, 0);
    want_parse_fail(buf, size, ASSAY_ERR_PARSE, "key general.alignment", "power of two",
                      "got 0");
    gguf_put_u32(buf, at, 64);
    gguf_put_u32(buf, gguf_kv_type_pos(buf, size, "general.alignment"), ASSAY_GGUF_TYPE_I32);
    want_parse_fail(buf, size, ASSAY_ERR_PARSE, "key general.alignment",
                      "expected a value of type u32", "got a value of type i32");
    gguf_put_u32(buf, gguf_kv_type_pos(buf, size, "general.alignment"), ASSAY_GGUF_TYPE_U32);
    /* Under an alignment of 128 the offset 64 of t.mat is misaligned. */
    gguf_put_u32(buf, at, 128);
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
    gguf_want_status(assay_gguf_writer_write(w, path, &diag), ASSAY_OK, &diag);
    gguf_want_status(assay_gguf_read_file(path, &g, &diag), ASSAY_OK, &diag);
    assert_int_equal(assay_gguf_n_kv(g), 1);
    gguf_want_u32(g, "k", 1);
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
    gguf_want_status(assay_gguf_parse(x.b, x.n, NULL, &g, &diag), ASSAY_OK, &diag);
    uint64_t n = 0;
    assert_int_equal(assay_gguf_get_array(g, "nested", ASSAY_GGUF_TYPE_ARRAY, &n, &diag),
                     ASSAY_OK);
    assert_int_equal(n, 2);
    gguf_want_u32(g, "after", 42);
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
    gguf_want_status(assay_gguf_parse(x.b, x.n, NULL, &g, &diag), ASSAY_OK, &diag);
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
    uint8_t *buf = gguf_mini_bytes(&size);
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
    uint8_t *buf = gguf_mini_bytes(&size);
    gguf_put_u32(buf, 4, 1);
    want_parse_fail(buf, size, ASSAY_ERR_UNSUPPORTED, "byte 4", "expected version 2 or 3",
                      "got 1");
    gguf_put_u32(buf, 4, 99);
    want_parse_fail(buf, size, ASSAY_ERR_UNSUPPORTED, "byte 4", "expected version 2 or 3",
                      "got 99");
    free(buf);
}

static void test_truncated(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = gguf_mini_bytes(&size);
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
    size_t key = gguf_str_pos(buf, size, "general.name");
    want_parse_fail(buf, key + 8 + 3, ASSAY_ERR_PARSE, "byte 8", "a tensor count the",
                      "got 21");
    /* With counts that fit (no tensors, two pairs) the key is reported. */
    uint8_t *c = gguf_copy_of(buf, size);
    gguf_put_u64(c, 8, 0);
    gguf_put_u64(c, 16, 2);
    snprintf(where, sizeof where, "byte %zu", key);
    want_parse_fail(c, key + 8 + 3, ASSAY_ERR_PARSE, where,
                      "the key of metadata pair 1 of at most 3 bytes", "got length 12");

    /* In the middle of a value's string length. */
    size_t value = gguf_kv_value_pos(buf, size, "general.name");
    snprintf(where, sizeof where, "byte %zu, key general.name", value);
    want_parse_fail(c, value + 4, ASSAY_ERR_PARSE, where,
                      "the 8-byte length of a string value", "end of file");

    /* In the middle of the token array (pair 15): its count no longer
     * fits what is left. */
    gguf_put_u64(c, 16, 16);
    size_t tokens = gguf_kv_value_pos(buf, size, "tokenizer.ggml.tokens");
    snprintf(where, sizeof where, "byte %zu, key tokenizer.ggml.tokens", tokens + 4);
    want_parse_fail(c, tokens + 4 + 8 + 100, ASSAY_ERR_PARSE, where,
                      "an array of at most 12 string elements", "got 260 elements");
    /* In the middle of its fourth string. */
    size_t fourth = tokens + 4 + 8 + 3 * (8 + 6);
    snprintf(where, sizeof where, "byte %zu, key tokenizer.ggml.tokens", fourth);
    gguf_put_u64(c, tokens + 4, 4);
    want_parse_fail(c, fourth + 8 + 2, ASSAY_ERR_PARSE, where,
                      "string 3 of an array of at most 2 bytes", "got length 6");
    free(c);

    /* In the middle of a tensor info's second dimension. */
    size_t dims = gguf_tensor_dims_pos(buf, size, "blk.0.attn_q.weight");
    snprintf(where, sizeof where, "byte %zu, tensor blk.0.attn_q.weight", dims + 4 + 8);
    want_parse_fail(buf, dims + 4 + 8 + 3, ASSAY_ERR_PARSE, where, "an 8-byte dimension",
                      "end of file");

    /* In the tensor data: the first tensor, then the last. */
    struct assay_gguf *g;
    struct assay_diag diag;
    gguf_want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    uint64_t data = assay_gguf_data_offset(g);
    assay_gguf_free(g);
    want_parse_fail(buf, (size_t)data + 10, ASSAY_ERR_PARSE, "tensor token_embd.weight",
                      "expected 66560 bytes of tensor data for token_embd.weight",
                      "the file has 10");
    snprintf(phrase, sizeof phrase, "the file has 66460 (it ends at byte %zu", size - 100);
    want_parse_fail(buf, size - 100, ASSAY_ERR_PARSE, "tensor output.weight",
                      "expected 66560 bytes of tensor data for output.weight", phrase);
    /* Just after the tensor infos: no data section at all. */
    size_t info_end = gguf_tensor_offset_pos(buf, size, "output.weight") + 8;
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
    gguf_want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
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
            gguf_want_status(st, ASSAY_ERR_PARSE, &diag);
            assert_null(g);
            assert_non_null(strstr(diag.where, "byte "));
            assert_true(diag.expected[0] != '\0' && diag.got[0] != '\0');
        } else {
            gguf_want_status(st, ASSAY_OK, &diag);
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
    uint8_t *buf = gguf_mini_bytes(&size);
    uint8_t *c = gguf_copy_of(buf, size);
    const uint64_t huge = (uint64_t)1 << 62;
    char where[96];

    gguf_put_u64(c, 16, huge);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "byte 16", "a metadata pair count the",
                      "got 4611686018427387904");
    memcpy(c, buf, size);
    gguf_put_u64(c, 8, huge);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "byte 8", "a tensor count the",
                      "got 4611686018427387904");
    /* Each fits alone, not both. */
    memcpy(c, buf, size);
    gguf_put_u64(c, 8, (size - 24) / 25);
    gguf_put_u64(c, 16, (size - 24) / 14);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "byte 8",
                      "tensor and metadata pair counts the", NULL);

    memcpy(c, buf, size);
    size_t count = gguf_kv_value_pos(buf, size, "tokenizer.ggml.tokens") + 4;
    gguf_put_u64(c, count, huge);
    snprintf(where, sizeof where, "byte %zu, key tokenizer.ggml.tokens", count);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "an array of at most",
                      "got 4611686018427387904 elements");
    memcpy(c, buf, size);
    count = gguf_kv_value_pos(buf, size, "tokenizer.ggml.scores") + 4;
    gguf_put_u64(c, count, huge);
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
    uint8_t *buf = gguf_mini_bytes(&size);
    uint8_t *c = gguf_copy_of(buf, size);
    char where[96];

    size_t value = gguf_kv_value_pos(buf, size, "general.name");
    gguf_put_u64(c, value, (uint64_t)size);
    snprintf(where, sizeof where, "byte %zu, key general.name", value);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "a string value of at most",
                      "the rest of the file");

    memcpy(c, buf, size);
    gguf_put_u64(c, value, UINT64_MAX);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "a string value of at most",
                      "got length 18446744073709551615");

    memcpy(c, buf, size);
    gguf_put_u64(c, 24, (uint64_t)1 << 40); /* the first key's length */
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "byte 24", "the key of metadata pair 0",
                      "got length 1099511627776");

    memcpy(c, buf, size);
    size_t token = gguf_kv_value_pos(buf, size, "tokenizer.ggml.tokens") + 4 + 8;
    gguf_put_u64(c, token + 8 + 6, (uint64_t)size); /* the second token's length */
    snprintf(where, sizeof where, "byte %zu, key tokenizer.ggml.tokens", token + 8 + 6);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "string 1 of an array of at most", NULL);

    /* A tensor name longer than the spec's 64 bytes. */
    memcpy(c, buf, size);
    size_t name = gguf_str_pos(buf, size, "blk.0.attn_q.weight");
    gguf_put_u64(c, name, 65);
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
    uint8_t *buf = gguf_mini_bytes(&size);
    uint8_t *c = gguf_copy_of(buf, size);
    char where[96];
    size_t type = gguf_kv_type_pos(buf, size, "general.file_type");
    gguf_put_u32(c, type, 13);
    snprintf(where, sizeof where, "byte %zu, key general.file_type", type);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "expected a value type in 0..12",
                      "got 13");
    memcpy(c, buf, size);
    size_t elem = gguf_kv_value_pos(buf, size, "tokenizer.ggml.token_type");
    gguf_put_u32(c, elem, 0xffffffffu);
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
    uint8_t *buf = gguf_mini_bytes(&size);
    uint8_t *c = gguf_copy_of(buf, size);
    char phrase[96];
    size_t first = gguf_str_pos(buf, size, "tokenizer.ggml.bos_token_id");
    size_t eos = gguf_str_pos(buf, size, "tokenizer.ggml.eos_token_id");
    memcpy(c + eos + 8, "tokenizer.ggml.bos_token_id", 27);
    snprintf(phrase, sizeof phrase, "the first is at byte %zu", first);
    want_parse_fail(c, size, ASSAY_ERR_DUPLICATE, "key tokenizer.ggml.bos_token_id",
                      "expected each key once", phrase);

    memcpy(c, buf, size);
    size_t q = gguf_str_pos(buf, size, "blk.0.attn_q.weight");
    size_t k = gguf_str_pos(buf, size, "blk.0.attn_k.weight");
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
    uint8_t *buf = gguf_mini_bytes(&size);
    uint8_t *c = gguf_copy_of(buf, size);
    char where[96];
    size_t dims = gguf_tensor_dims_pos(buf, size, "blk.0.attn_q.weight");
    assert_int_equal(gguf_get_u32(buf, dims), 2);
    gguf_put_u64(c, dims + 4, (uint64_t)1 << 32);
    gguf_put_u64(c, dims + 12, (uint64_t)1 << 32);
    snprintf(where, sizeof where, "byte %zu, tensor blk.0.attn_q.weight", dims + 12);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where,
                      "dimensions whose product (the element count) fits in int64",
                      "ne[1] = 4294967296 after a product of 4294967296");
    memcpy(c, buf, size);
    gguf_put_u64(c, dims + 4, (uint64_t)1 << 63);
    snprintf(where, sizeof where, "byte %zu, tensor blk.0.attn_q.weight", dims + 4);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, "a dimension of at most 2^63-1",
                      "got 9223372036854775808");
    /* Element count fits, bytes do not. */
    memcpy(c, buf, size);
    gguf_put_u64(c, dims + 4, (uint64_t)1 << 31);
    gguf_put_u64(c, dims + 12, (uint64_t)1 << 31);
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
    uint8_t *buf = gguf_mini_bytes(&size);
    uint8_t *c = gguf_copy_of(buf, size);
    size_t type = gguf_tensor_type_pos(buf, size, "blk.0.attn_q.weight");
    assert_int_equal(gguf_get_u32(buf, type), 0);
    gguf_put_u32(c, type, 99);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "tensor blk.0.attn_q.weight",
                      "a ggml type in 0..39", "got 99");
    gguf_put_u32(c, type, 16);
    want_parse_fail(c, size, ASSAY_ERR_UNSUPPORTED, "tensor blk.0.attn_q.weight",
                      "a ggml type whose size is known", "IQ2_XXS (16)");
    free(c);
    free(buf);
}

static void test_bad_offsets(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = gguf_mini_bytes(&size);
    uint8_t *c = gguf_copy_of(buf, size);
    char where[96], phrase[160];
    size_t q_off = gguf_tensor_offset_pos(buf, size, "blk.0.attn_q.weight");
    uint64_t q = gguf_get_u64(buf, q_off);
    uint64_t norm = gguf_get_u64(buf, gguf_tensor_offset_pos(buf, size, "blk.0.attn_norm.weight"));

    gguf_put_u64(c, q_off, q + 4);
    snprintf(where, sizeof where, "byte %zu, tensor blk.0.attn_q.weight", q_off);
    snprintf(phrase, sizeof phrase, "got %llu", (unsigned long long)(q + 4));
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where,
                      "expected a data offset that is a multiple of 32", phrase);

    /* attn_q moved onto attn_norm (both aligned, both inside the file). */
    gguf_put_u64(c, q_off, norm);
    snprintf(phrase, sizeof phrase, "data that does not overlap blk.0.attn_norm.weight (data "
             "offsets %llu..%llu)", (unsigned long long)norm,
             (unsigned long long)(norm + 64 * 4 - 1));
    want_parse_fail(c, size, ASSAY_ERR_PARSE, where, phrase, NULL);

    /* Past the end of the file. */
    size_t out_off = gguf_tensor_offset_pos(buf, size, "output.weight");
    memcpy(c, buf, size);
    gguf_put_u64(c, out_off, (uint64_t)1 << 40);
    want_parse_fail(c, size, ASSAY_ERR_PARSE, "tensor output.weight",
                      "66560 bytes of tensor data for output.weight", "the file has none");
    memcpy(c, buf, size);
    gguf_put_u64(c, out_off, UINT64_MAX - 31);
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
                    gguf_put_u64(c, pos, x ^ (x << 17));
                }
                break;
            case 1:
                if (pos + 8 <= size) {
                    gguf_put_u64(c, pos, (x >> 8) & 0xffff);
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
    uint8_t *buf = gguf_mini_bytes(&size);
    gguf_put_u32(buf, gguf_tensor_type_pos(buf, size, "blk.0.attn_q.weight"), 3); /* Q4_1 */
    gguf_want_load_fail(buf, size, ASSAY_ERR_UNSUPPORTED, "blk.0.attn_q.weight",
                   "expected a tensor type assay decodes", "got Q4_1 (type 3)");
    free(buf);
}

static void test_load_wrong_shape(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = gguf_mini_bytes(&size);
    size_t dims = gguf_tensor_dims_pos(buf, size, "blk.0.attn_q.weight");
    gguf_put_u64(buf, dims + 12, 32);
    gguf_want_load_fail(buf, size, ASSAY_ERR_PARSE, "blk.0.attn_q.weight",
                     "expected ne [64, 64] (fastest first)", "got ne [64, 32]");
    /* Transposed: same element count, wrong order. */
    size_t down = gguf_tensor_dims_pos(buf, size, "blk.1.ffn_down.weight");
    gguf_put_u64(buf, dims + 12, 64);
    gguf_put_u64(buf, down + 4, 64);
    gguf_put_u64(buf, down + 12, 256);
    gguf_want_load_fail(buf, size, ASSAY_ERR_PARSE, "blk.1.ffn_down.weight",
                     "expected ne [256, 64]", "got ne [64, 256]");
    free(buf);
}

static void test_load_nonfinite(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = gguf_mini_bytes(&size);
    uint8_t *c = gguf_copy_of(buf, size);
    float nan = NAN, inf = -INFINITY;
    memcpy(c + gguf_tensor_data_pos(buf, size, "blk.1.ffn_down.weight") + 5 * 4, &nan, 4);
    gguf_want_load_fail(c, size, ASSAY_ERR_PARSE, "blk.1.ffn_down.weight",
                        "expected finite weights", "got NaN at element 5");
    memcpy(c, buf, size);
    memcpy(c + gguf_tensor_data_pos(buf, size, "output.weight") + 16639 * 4, &inf, 4);
    gguf_want_load_fail(c, size, ASSAY_ERR_PARSE, "output.weight", "expected finite weights",
                     "got -Inf at element 16639");
    free(c);
    free(buf);
}

static void test_load_missing_and_extra_tensors(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = gguf_mini_bytes(&size);
    uint8_t *c = gguf_copy_of(buf, size);
    /* Renamed: blk.0.ffn_up.weight is missing. */
    memcpy(c + gguf_str_pos(buf, size, "blk.0.ffn_up.weight") + 8, "blk.0.ffn_uq.weight", 19);
    gguf_want_load_fail(c, size, ASSAY_ERR_NOT_FOUND, "blk.0.ffn_up.weight",
                     "expected a tensor of ne [64, 256]", "got no such tensor");
    /* One layer declared, two in the file: blk.1.* are unknown. */
    memcpy(c, buf, size);
    gguf_put_u32(c, gguf_kv_value_pos(buf, size, "llama.block_count"), 1);
    gguf_want_load_fail(c, size, ASSAY_ERR_PARSE, "blk.1.attn_norm.weight",
                     "only the 12 tensors of a 1-layer llama model",
                     "got unknown tensor blk.1.attn_norm.weight");
    /* Three layers declared, two in the file. */
    gguf_put_u32(c, gguf_kv_value_pos(buf, size, "llama.block_count"), 3);
    gguf_want_load_fail(c, size, ASSAY_ERR_NOT_FOUND, "blk.2.attn_norm.weight", "no such tensor",
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
    uint8_t *buf = gguf_mini_bytes(&size);
    struct assay_model *m = NULL;
    struct assay_diag diag;
    gguf_want_status(assay_model_load_gguf_buffer(&m, buf, size, "mini", &diag), ASSAY_OK, &diag);
    assert_int_equal(m->eos_token, ASSAY_TOKEN_EOS);
    assay_model_free(m);

    uint8_t *c = gguf_copy_of(buf, size);
    gguf_put_u32(c, gguf_kv_value_pos(buf, size, "tokenizer.ggml.eos_token_id"), 7);
    gguf_want_status(assay_model_load_gguf_buffer(&m, c, size, "mini", &diag), ASSAY_OK, &diag);
    assert_int_equal(m->eos_token, 7);
    assay_model_free(m);

    gguf_put_u32(c, gguf_kv_value_pos(buf, size, "tokenizer.ggml.eos_token_id"), 260);
    gguf_want_load_fail(c, size, ASSAY_ERR_PARSE, "tokenizer.ggml.eos_token_id",
                   "a token id below the vocabulary size 260", "got 260");

    /* A vocabulary without the id 257 names no EOS token in the file; its
     * "llama" tokenizer then gets llama.cpp's default EOS, 2 (what a
     * server built on llama.cpp stops at and bans under ignore_eos), and
     * any other tokenizer none. */
    struct assay_model_config cfg = assay_model_config_mini();
    cfg.vocab = 200;
    struct assay_model *small;
    assert_int_equal(assay_model_init_random(&small, &cfg, 1), ASSAY_OK);
    assert_int_equal(small->eos_token, -1);
    char path[512];
    assay_test_scratch("gguf-no-eos.gguf", path, sizeof path);
    gguf_want_status(assay_model_save_gguf(small, path, &diag), ASSAY_OK, &diag);
    assay_model_free(small);
    gguf_want_status(assay_model_load_gguf(&m, path, &diag), ASSAY_OK, &diag);
    assert_int_equal(m->eos_token, 2);
    assay_model_free(m);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *nb = malloc(n);
    assert_non_null(nb);
    assert_int_equal(fread(nb, 1, n, f), n);
    fclose(f);
    size_t at = gguf_kv_value_pos(nb, n, "tokenizer.ggml.model") + 8; /* past its length */
    assert_memory_equal(nb + at, "llama", 5);
    memcpy(nb + at, "other", 5);
    gguf_want_status(assay_model_load_gguf_buffer(&m, nb, n, "other", &diag), ASSAY_OK, &diag);
    assert_int_equal(m->eos_token, -1);
    assay_model_free(m);
    free(nb);
    remove(path);
    free(c);
    free(buf);
}

static void test_load_bad_metadata(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = gguf_mini_bytes(&size);
    uint8_t *c = gguf_copy_of(buf, size);

    gguf_put_u32(c, gguf_kv_value_pos(buf, size, "llama.attention.head_count_kv"), 3);
    gguf_want_load_fail(c, size, ASSAY_ERR_INVALID, "llama.attention.head_count_kv",
                     "expected a divisor of llama.attention.head_count", "got 3 (head_count 4)");

    memcpy(c, buf, size);
    gguf_put_u32(c, gguf_kv_value_pos(buf, size, "llama.embedding_length"), 0);
    gguf_want_load_fail(c, size, ASSAY_ERR_INVALID, "llama.embedding_length",
                     "an integer in 1..16384", "got 0");

    memcpy(c, buf, size);
    gguf_put_u32(c, gguf_kv_value_pos(buf, size, "llama.feed_forward_length"), 0x80000000u);
    gguf_want_load_fail(c, size, ASSAY_ERR_INVALID, "llama.feed_forward_length",
                     "an integer in 0..2147483647", "got 2147483648");

    memcpy(c, buf, size);
    gguf_put_u32(c, gguf_kv_type_pos(buf, size, "llama.embedding_length"), ASSAY_GGUF_TYPE_I32);
    gguf_want_load_fail(c, size, ASSAY_ERR_PARSE, "llama.embedding_length",
                     "expected a value of type u32", "got a value of type i32");

    memcpy(c, buf, size);
    memcpy(c + gguf_str_pos(buf, size, "llama.block_count") + 8, "llama.blocK_count", 17);
    gguf_want_load_fail(c, size, ASSAY_ERR_NOT_FOUND, "llama.block_count", "a value of type u32",
                     "got no such key");

    memcpy(c, buf, size);
    gguf_put_u32(c, gguf_kv_value_pos(buf, size, "llama.vocab_size"), 300);
    gguf_want_load_fail(c, size, ASSAY_ERR_PARSE, "tokenizer.ggml.tokens",
                     "expected 300 tokens (llama.vocab_size)", "got 260");

    /* A bad file seen through the loader keeps the reader's diagnostic. */
    memcpy(c, buf, size);
    c[0] = 'X';
    gguf_want_load_fail(c, size, ASSAY_ERR_PARSE, "byte 0", "magic \"GGUF\"", "got \"XGUF\"");
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
    gguf_want_status(assay_gguf_writer_write(w, path, &diag), ASSAY_OK, &diag);
    assay_gguf_writer_free(w);
    size_t size;
    uint8_t *buf = gguf_read_all(path, &size);
    gguf_want_load_fail(buf, size, ASSAY_ERR_UNSUPPORTED, "general.architecture",
                     "expected \"llama\"", "got \"gpt2\"");
    free(buf);
    remove(path);

    struct assay_model *m = (struct assay_model *)&m;
    assay_test_scratch("gguf-does-not-exist.gguf", path, sizeof path);
    gguf_want_status(assay_model_load_gguf(&m, path, &diag), ASSAY_ERR_IO, &diag);
    assert_null(m);
    gguf_want_diag(&diag, "opening", "a readable file", "No such file");
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
    gguf_want_status(assay_model_save_gguf(orig, path, &diag), ASSAY_OK, &diag);
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
            gguf_want_status(st, ASSAY_ERR_NOMEM, &diag);
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
            gguf_want_status(st, ASSAY_ERR_NOMEM, &diag);
            assert_false(file_exists(path));
        }
    }
    assert_true(saved);
    assert_true(k > 5);
    struct assay_model *back;
    gguf_want_status(assay_model_load_gguf(&back, path, &diag), ASSAY_OK, &diag);
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
    gguf_want_status(assay_model_save_gguf(m, path, &diag), ASSAY_ERR_IO, &diag);
    assert_string_equal(diag.file, path);
    gguf_want_diag(&diag, "creating the temporary file", "No such file or directory", NULL);
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
    gguf_want_status(assay_model_save_gguf(a, path, &diag), ASSAY_OK, &diag);
    size_t size_before;
    uint8_t *before = gguf_read_all(path, &size_before);

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

    gguf_want_status(st, ASSAY_ERR_IO, &diag);
    gguf_want_diag(&diag, "writing byte", "a complete write", "File too large");
    assert_false(file_exists(tmp));
    size_t size_after;
    uint8_t *after = gguf_read_all(path, &size_after);
    assert_int_equal(size_after, size_before);
    assert_memory_equal(after, before, size_before);
    free(before);
    free(after);
    assay_model_free(a);
    assay_model_free(b);
    remove(path);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
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
        cmocka_unit_test(test_load_fail_alloc),
        cmocka_unit_test(test_save_fail_alloc),
        cmocka_unit_test(test_save_no_directory),
        cmocka_unit_test(test_save_write_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
