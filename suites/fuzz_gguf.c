/*
 * fuzz_gguf - a libFuzzer target for engine/gguf.c (the GGUF reader) and
 * engine/model_gguf.c (a TinyGPT-shaped model from a GGUF file).
 *
 * Built by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined);
 * seed corpus in fixtures/fuzz/gguf/ (small valid llama models written by
 * assay's own writer, and a few hand-made files).
 *
 * Whatever the bytes, the target checks what the reader promises: a failed
 * parse leaves *out NULL with a diagnostic naming a byte offset; a parsed
 * file's keys are unique and found again by name, every typed getter
 * accepts exactly the key's own type, every array element can be read, and
 * every tensor's bytes lie inside the buffer (each is read, so that
 * AddressSanitizer sees any that does not). Then the model loader runs on
 * the same bytes: it either fails with a diagnostic or returns a model
 * whose configuration is valid and whose weights are all finite.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gguf.h"
#include "engine/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t g_sink;

static void check_scalar_getters(const struct assay_gguf *g, const char *key, uint32_t type)
{
    uint32_t u32;
    int32_t i32;
    float f32;
    bool b;
    const char *s;
    size_t len;
    bool got[5] = {
        assay_gguf_get_u32(g, key, &u32, NULL) == ASSAY_OK,
        assay_gguf_get_i32(g, key, &i32, NULL) == ASSAY_OK,
        assay_gguf_get_f32(g, key, &f32, NULL) == ASSAY_OK,
        assay_gguf_get_bool(g, key, &b, NULL) == ASSAY_OK,
        assay_gguf_get_string(g, key, &s, &len, NULL) == ASSAY_OK,
    };
    static const uint32_t types[5] = {ASSAY_GGUF_TYPE_U32, ASSAY_GGUF_TYPE_I32, ASSAY_GGUF_TYPE_F32,
                                      ASSAY_GGUF_TYPE_BOOL, ASSAY_GGUF_TYPE_STRING};
    for (int i = 0; i < 5; i++) {
        if (got[i] != (type == types[i])) {
            abort(); /* a getter must accept exactly its own type */
        }
    }
    if (got[4] && (s == NULL || s[len] != '\0')) {
        abort();
    }
}

static void check_array(const struct assay_gguf *g, const char *key)
{
    static const enum assay_gguf_type elems[] = {ASSAY_GGUF_TYPE_U32, ASSAY_GGUF_TYPE_I32,
                                                 ASSAY_GGUF_TYPE_F32, ASSAY_GGUF_TYPE_BOOL,
                                                 ASSAY_GGUF_TYPE_STRING};
    int matches = 0;
    for (size_t e = 0; e < sizeof elems / sizeof elems[0]; e++) {
        uint64_t n = 0;
        if (assay_gguf_get_array(g, key, elems[e], &n, NULL) != ASSAY_OK) {
            continue;
        }
        matches++;
        /* Read every element (a bounded number of them). */
        for (uint64_t i = 0; i < n && i < 4096; i++) {
            uint32_t u32;
            int32_t i32;
            float f32;
            bool b;
            const char *s;
            size_t len;
            enum assay_status st = ASSAY_ERR_INTERNAL;
            switch (elems[e]) {
            case ASSAY_GGUF_TYPE_U32: st = assay_gguf_get_array_u32(g, key, i, &u32, NULL); break;
            case ASSAY_GGUF_TYPE_I32: st = assay_gguf_get_array_i32(g, key, i, &i32, NULL); break;
            case ASSAY_GGUF_TYPE_F32: st = assay_gguf_get_array_f32(g, key, i, &f32, NULL); break;
            case ASSAY_GGUF_TYPE_BOOL: st = assay_gguf_get_array_bool(g, key, i, &b, NULL); break;
            default:
                st = assay_gguf_get_array_string(g, key, i, &s, &len, NULL);
                if (st == ASSAY_OK && (s == NULL || s[len] != '\0')) {
                    abort();
                }
                break;
            }
            if (st != ASSAY_OK) {
                abort();
            }
        }
        uint32_t u32;
        if (elems[e] == ASSAY_GGUF_TYPE_U32 &&
            assay_gguf_get_array_u32(g, key, n, &u32, NULL) != ASSAY_ERR_INVALID) {
            abort(); /* one past the end */
        }
    }
    if (matches > 1) {
        abort();
    }
}

static void check_parsed(const struct assay_gguf *g, const uint8_t *data, size_t size)
{
    uint32_t version = assay_gguf_version(g);
    uint32_t align = assay_gguf_alignment(g);
    if ((version != 2 && version != 3) || align == 0 || (align & (align - 1)) != 0) {
        abort();
    }
    size_t n_kv = assay_gguf_n_kv(g);
    for (size_t i = 0; i < n_kv; i++) {
        const char *key = assay_gguf_kv_key(g, i);
        if (key == NULL || key[0] == '\0' || assay_gguf_find_key(g, key) != (int64_t)i) {
            abort();
        }
        uint32_t type = (uint32_t)assay_gguf_kv_type(g, i);
        check_scalar_getters(g, key, type);
        if (type == ASSAY_GGUF_TYPE_ARRAY) {
            check_array(g, key);
        }
    }
    if (assay_gguf_kv_key(g, n_kv) != NULL) {
        abort();
    }
    size_t n_t = assay_gguf_n_tensors(g);
    for (size_t i = 0; i < n_t; i++) {
        const struct assay_gguf_tensor *t = assay_gguf_tensor_at(g, i);
        if (t == NULL || t->name == NULL || assay_gguf_find_tensor(g, t->name) != t ||
            t->n_dims > ASSAY_GGUF_MAX_DIMS || t->n_elements < 0) {
            abort();
        }
        if (t->n_bytes > 0) {
            const uint8_t *p = t->data;
            if (p < data || t->n_bytes > size || p > data + (size - t->n_bytes)) {
                abort();
            }
            uint8_t x = 0;
            for (size_t k = 0; k < t->n_bytes; k++) {
                x ^= p[k];
            }
            g_sink = x;
        }
    }
    if (assay_gguf_tensor_at(g, n_t) != NULL) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct assay_gguf *g = (struct assay_gguf *)&g_sink; /* must be cleared */
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_gguf_parse(data, size, "fuzz.gguf", &g, &diag);
    if (st != ASSAY_OK) {
        if (g != NULL || strncmp(diag.where, "byte ", 5) != 0 || diag.expected[0] == '\0') {
            fprintf(stderr, "status %d: where '%s' expected '%s' got '%s'\n", (int)st, diag.where,
                    diag.expected, diag.got);
            abort();
        }
    } else {
        if (g == NULL) {
            abort();
        }
        check_parsed(g, data, size);
        assay_gguf_free(g);
    }

    struct assay_model *m = (struct assay_model *)&g_sink;
    assay_diag_clear(&diag);
    st = assay_model_load_gguf_buffer(&m, data, size, "fuzz.gguf", &diag);
    if (st != ASSAY_OK) {
        if (m != NULL || diag.expected[0] == '\0' || st == ASSAY_ERR_INTERNAL) {
            fprintf(stderr, "model: status %d: where '%s' expected '%s' got '%s'\n", (int)st,
                    diag.where, diag.expected, diag.got);
            abort();
        }
        return 0;
    }
    if (m == NULL || assay_model_config_validate(&m->cfg, NULL) != ASSAY_OK ||
        m->n_floats != assay_model_config_n_params(&m->cfg) -
                             (m->tied ? (int64_t)m->cfg.vocab * m->cfg.d_model : 0)) {
        abort();
    }
    for (int64_t i = 0; i < m->n_floats; i++) {
        if (!isfinite(m->data[i])) {
            abort();
        }
    }
    assay_model_free(m);
    return 0;
}
