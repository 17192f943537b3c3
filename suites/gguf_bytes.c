/* GGUF file bytes for test_gguf and test_model_gguf: see gguf_bytes.h. */
#include "gguf_bytes.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/model.h"
#include "support.h"

/* A scratch file name of this process's own: test_gguf and
 * test_model_gguf both write through this file and may run at once. */
static void scratch_name(const char *stem, char *buf, size_t size)
{
    snprintf(buf, size, "%s-%ld.gguf", stem, (long)getpid());
}

uint8_t *gguf_read_all(const char *path, size_t *size)
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

void gguf_write_all(const char *path, const uint8_t *buf, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

void gguf_put_u32(uint8_t *buf, size_t pos, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        buf[pos + (size_t)i] = (uint8_t)(v >> (8 * i));
    }
}

void gguf_put_u64(uint8_t *buf, size_t pos, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        buf[pos + (size_t)i] = (uint8_t)(v >> (8 * i));
    }
}

uint32_t gguf_get_u32(const uint8_t *buf, size_t pos)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) {
        v = (v << 8) | buf[pos + (size_t)i];
    }
    return v;
}

uint64_t gguf_get_u64(const uint8_t *buf, size_t pos)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | buf[pos + (size_t)i];
    }
    return v;
}

size_t gguf_str_pos(const uint8_t *buf, size_t size, const char *s)
{
    size_t len = strlen(s), found = SIZE_MAX, count = 0;
    uint8_t pattern[8 + 128];
    assert_true(len <= 128);
    gguf_put_u64(pattern, 0, len);
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

size_t gguf_kv_type_pos(const uint8_t *buf, size_t size, const char *key)
{
    return gguf_str_pos(buf, size, key) + 8 + strlen(key);
}

size_t gguf_kv_value_pos(const uint8_t *buf, size_t size, const char *key)
{
    return gguf_kv_type_pos(buf, size, key) + 4;
}

size_t gguf_tensor_dims_pos(const uint8_t *buf, size_t size, const char *name)
{
    return gguf_str_pos(buf, size, name) + 8 + strlen(name);
}

size_t gguf_tensor_type_pos(const uint8_t *buf, size_t size, const char *name)
{
    size_t p = gguf_tensor_dims_pos(buf, size, name);
    return p + 4 + 8 * (size_t)gguf_get_u32(buf, p);
}

size_t gguf_tensor_offset_pos(const uint8_t *buf, size_t size, const char *name)
{
    return gguf_tensor_type_pos(buf, size, name) + 4;
}

void gguf_want_status(enum assay_status got, enum assay_status want,
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

void gguf_want_diag(const struct assay_diag *diag, const char *where_part, const char *phrase1,
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

void gguf_want_load_fail(const uint8_t *buf, size_t size, enum assay_status status,
                         const char *where_part, const char *phrase1, const char *phrase2)
{
    char name[64], path[512];
    scratch_name("gguf-bad", name, sizeof name);
    assay_test_scratch(name, path, sizeof path);
    gguf_write_all(path, buf, size);
    struct assay_model *m = (struct assay_model *)&m;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_model_load_gguf(&m, path, &diag);
    gguf_want_status(st, status, &diag);
    assert_null(m);
    assert_string_equal(diag.file, path);
    gguf_want_diag(&diag, where_part, phrase1, phrase2);
    /* a mapped load checks the same and says the same */
    m = (struct assay_model *)&m;
    assay_diag_clear(&diag);
    gguf_want_status(assay_model_load_gguf_mapped(&m, path, &diag), status, &diag);
    assert_null(m);
    assert_string_equal(diag.file, path);
    gguf_want_diag(&diag, where_part, phrase1, phrase2);
    remove(path);
}

uint8_t *gguf_mini_bytes(size_t *size)
{
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *m;
    char name[64], path[512];
    struct assay_diag diag;
    scratch_name("gguf-mini", name, sizeof name);
    assay_test_scratch(name, path, sizeof path);
    assert_int_equal(assay_model_init_random(&m, &cfg, 1), ASSAY_OK);
    gguf_want_status(assay_model_save_gguf(m, path, &diag), ASSAY_OK, &diag);
    assay_model_free(m);
    uint8_t *buf = gguf_read_all(path, size);
    remove(path);
    return buf;
}

size_t gguf_tensor_data_pos(const uint8_t *buf, size_t size, const char *name)
{
    struct assay_gguf *g;
    struct assay_diag diag;
    gguf_want_status(assay_gguf_parse(buf, size, NULL, &g, &diag), ASSAY_OK, &diag);
    const struct assay_gguf_tensor *t = assay_gguf_find_tensor(g, name);
    assert_non_null(t);
    size_t pos = (size_t)((const uint8_t *)t->data - buf);
    assay_gguf_free(g);
    return pos;
}

uint8_t *gguf_copy_of(const uint8_t *buf, size_t size)
{
    uint8_t *c = malloc(size + 1);
    assert_non_null(c);
    memcpy(c, buf, size);
    return c;
}

void gguf_want_u32(const struct assay_gguf *g, const char *key, uint32_t want)
{
    uint32_t v = 0;
    struct assay_diag diag;
    gguf_want_status(assay_gguf_get_u32(g, key, &v, &diag), ASSAY_OK, &diag);
    if (v != want) {
        print_error("%s = %u, expected %u\n", key, (unsigned)v, (unsigned)want);
        fail();
    }
}
