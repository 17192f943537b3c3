/*
 * gguf_write.c - the GGUF writer (gguf.h): metadata pairs and f32 tensors
 * (borrowed, or filled chunk by chunk while writing, as F32 or F16)
 * collected in memory, then written as one GGUF version 3 file through a
 * temporary name and a rename. Used to save models (model_gguf.c) and by
 * the tests and tools that make GGUF files; each file is written once.
 */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/alloc.h"
#include "gguf.h"
#include "gguf_internal.h"
#include "numerics.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "engine/gguf_write.c writes host floats as GGUF's little-endian ones"
#endif

struct writer_kv {
    char *key;
    uint32_t type;
    uint32_t elem_type; /* arrays */
    uint32_t scalar;    /* u32, i32, f32 and bool values, as their bits */
    uint64_t n;         /* string length or array element count */
    char *bytes;        /* string bytes; array elements; or the strings of
                         * a string array, one after another */
    uint64_t *lens;     /* string arrays: each element's length */
};

struct writer_tensor {
    char name[ASSAY_GGUF_MAX_NAME + 1];
    uint32_t n_dims;
    int64_t ne[ASSAY_GGUF_MAX_DIMS];
    const float *data; /* borrowed; NULL for a filled tensor */
    assay_gguf_fill_fn fill; /* or its values' producer */
    void *fill_ctx;
    uint32_t type;     /* F32, or F16 for a filled tensor */
    int64_t n_elements;
    uint64_t n_bytes;
};

struct assay_gguf_writer {
    struct writer_kv *kvs;
    size_t n_kv, cap_kv;
    struct writer_tensor *tensors;
    size_t n_tensors, cap_tensors;
    uint32_t alignment;
};

enum assay_status assay_gguf_writer_init(struct assay_gguf_writer **out)
{
    *out = assay_calloc(1, sizeof **out);
    if (*out == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    (*out)->alignment = ASSAY_GGUF_DEFAULT_ALIGNMENT;
    return ASSAY_OK;
}

static void free_writer_kv(struct writer_kv *kv)
{
    assay_free(kv->key);
    assay_free(kv->bytes);
    assay_free(kv->lens);
}

void assay_gguf_writer_free(struct assay_gguf_writer *w)
{
    if (w == NULL) {
        return;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        free_writer_kv(&w->kvs[i]);
    }
    assay_free(w->kvs);
    assay_free(w->tensors);
    assay_free(w);
}

/* Check a new key and make room for it; the writer is unchanged on failure
 * (a grown array is no change). */
static enum assay_status prepare_kv(struct assay_gguf_writer *w, const char *key)
{
    if (w == NULL || key == NULL) {
        return ASSAY_ERR_INVALID;
    }
    size_t len = strlen(key);
    if (len == 0 || len > ASSAY_GGUF_MAX_KEY) {
        return ASSAY_ERR_INVALID;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, key) == 0) {
            return ASSAY_ERR_DUPLICATE;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv == 0 ? 16 : 2 * w->cap_kv;
        if (cap > SIZE_MAX / sizeof *w->kvs) {
            return ASSAY_ERR_NOMEM;
        }
        struct writer_kv *kvs = assay_realloc(w->kvs, cap * sizeof *kvs);
        if (kvs == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        w->kvs = kvs;
        w->cap_kv = cap;
    }
    return ASSAY_OK;
}

/* Append a prepared pair, taking a copy of key; kv's buffers become the
 * writer's on success and are freed on failure. */
static enum assay_status append_kv(struct assay_gguf_writer *w, const char *key,
                                   struct writer_kv kv)
{
    kv.key = assay_strdup(key);
    if (kv.key == NULL) {
        free_writer_kv(&kv);
        return ASSAY_ERR_NOMEM;
    }
    w->kvs[w->n_kv++] = kv;
    return ASSAY_OK;
}

static enum assay_status add_scalar(struct assay_gguf_writer *w, const char *key, uint32_t type,
                                    uint32_t bits)
{
    enum assay_status st = prepare_kv(w, key);
    if (st != ASSAY_OK) {
        return st;
    }
    if (strcmp(key, "general.alignment") == 0) {
        if (type != ASSAY_GGUF_TYPE_U32 || bits == 0 || (bits & (bits - 1)) != 0) {
            return ASSAY_ERR_INVALID;
        }
    }
    struct writer_kv kv;
    memset(&kv, 0, sizeof kv);
    kv.type = type;
    kv.scalar = bits;
    st = append_kv(w, key, kv);
    if (st == ASSAY_OK && strcmp(key, "general.alignment") == 0) {
        w->alignment = bits;
    }
    return st;
}

enum assay_status assay_gguf_writer_add_u32(struct assay_gguf_writer *w, const char *key,
                                            uint32_t value)
{
    return add_scalar(w, key, ASSAY_GGUF_TYPE_U32, value);
}

enum assay_status assay_gguf_writer_add_i32(struct assay_gguf_writer *w, const char *key,
                                            int32_t value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return add_scalar(w, key, ASSAY_GGUF_TYPE_I32, bits);
}

enum assay_status assay_gguf_writer_add_f32(struct assay_gguf_writer *w, const char *key,
                                            float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return add_scalar(w, key, ASSAY_GGUF_TYPE_F32, bits);
}

enum assay_status assay_gguf_writer_add_bool(struct assay_gguf_writer *w, const char *key,
                                             bool value)
{
    return add_scalar(w, key, ASSAY_GGUF_TYPE_BOOL, value ? 1u : 0u);
}

enum assay_status assay_gguf_writer_add_string(struct assay_gguf_writer *w, const char *key,
                                               const char *value)
{
    if (value == NULL) {
        return ASSAY_ERR_INVALID;
    }
    enum assay_status st = prepare_kv(w, key);
    if (st != ASSAY_OK) {
        return st;
    }
    if (strcmp(key, "general.alignment") == 0) {
        return ASSAY_ERR_INVALID;
    }
    struct writer_kv kv;
    memset(&kv, 0, sizeof kv);
    kv.type = ASSAY_GGUF_TYPE_STRING;
    kv.n = strlen(value);
    kv.bytes = assay_strdup(value);
    if (kv.bytes == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    return append_kv(w, key, kv);
}

/* Add an array of n fixed-size elements copied from values. */
static enum assay_status add_fixed_array(struct assay_gguf_writer *w, const char *key,
                                         uint32_t elem_type, const void *values, size_t n)
{
    size_t elem = assay_gguf_value_type_size(elem_type);
    if (values == NULL && n > 0) {
        return ASSAY_ERR_INVALID;
    }
    enum assay_status st = prepare_kv(w, key);
    if (st != ASSAY_OK) {
        return st;
    }
    if (strcmp(key, "general.alignment") == 0) {
        return ASSAY_ERR_INVALID;
    }
    if (n > SIZE_MAX / elem) {
        return ASSAY_ERR_NOMEM;
    }
    struct writer_kv kv;
    memset(&kv, 0, sizeof kv);
    kv.type = ASSAY_GGUF_TYPE_ARRAY;
    kv.elem_type = elem_type;
    kv.n = n;
    kv.bytes = assay_malloc(n * elem);
    if (kv.bytes == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    if (n > 0) {
        memcpy(kv.bytes, values, n * elem);
    }
    return append_kv(w, key, kv);
}

enum assay_status assay_gguf_writer_add_f32_array(struct assay_gguf_writer *w, const char *key,
                                                  const float *values, size_t n)
{
    return add_fixed_array(w, key, ASSAY_GGUF_TYPE_F32, values, n);
}

enum assay_status assay_gguf_writer_add_i32_array(struct assay_gguf_writer *w, const char *key,
                                                  const int32_t *values, size_t n)
{
    return add_fixed_array(w, key, ASSAY_GGUF_TYPE_I32, values, n);
}

enum assay_status assay_gguf_writer_add_string_array(struct assay_gguf_writer *w,
                                                     const char *key,
                                                     const char *const *values, size_t n)
{
    if (values == NULL && n > 0) {
        return ASSAY_ERR_INVALID;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (values[i] == NULL) {
            return ASSAY_ERR_INVALID;
        }
        size_t len = strlen(values[i]);
        if (len > SIZE_MAX - total) {
            return ASSAY_ERR_NOMEM;
        }
        total += len;
    }
    enum assay_status st = prepare_kv(w, key);
    if (st != ASSAY_OK) {
        return st;
    }
    if (strcmp(key, "general.alignment") == 0) {
        return ASSAY_ERR_INVALID;
    }
    struct writer_kv kv;
    memset(&kv, 0, sizeof kv);
    kv.type = ASSAY_GGUF_TYPE_ARRAY;
    kv.elem_type = ASSAY_GGUF_TYPE_STRING;
    kv.n = n;
    kv.bytes = assay_malloc(total);
    kv.lens = assay_calloc(n, sizeof *kv.lens);
    if (kv.bytes == NULL || kv.lens == NULL) {
        free_writer_kv(&kv);
        return ASSAY_ERR_NOMEM;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(values[i]);
        if (len > 0) {
            memcpy(kv.bytes + at, values[i], len);
        }
        kv.lens[i] = len;
        at += len;
    }
    return append_kv(w, key, kv);
}

/* Append a tensor of the given source and type after checking its name
 * and dimensions (assay_gguf_writer_add_tensor_f32's rules). */
static enum assay_status add_tensor(struct assay_gguf_writer *w, const char *name, uint32_t n_dims,
                                    const int64_t *ne, const float *data, assay_gguf_fill_fn fill,
                                    void *ctx, uint32_t type)
{
    if (w == NULL || name == NULL || ne == NULL || (data == NULL && fill == NULL)) {
        return ASSAY_ERR_INVALID;
    }
    size_t len = strlen(name);
    if (len == 0 || len > ASSAY_GGUF_MAX_NAME || n_dims < 1 || n_dims > ASSAY_GGUF_MAX_DIMS) {
        return ASSAY_ERR_INVALID;
    }
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 1 || n_elements > INT64_MAX / ne[d]) {
            return ASSAY_ERR_INVALID;
        }
        n_elements *= ne[d];
    }
    if ((uint64_t)n_elements > SIZE_MAX / sizeof(float) ||
        (uint64_t)n_elements > UINT64_MAX / 2 / sizeof(float)) {
        return ASSAY_ERR_INVALID;
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (strcmp(w->tensors[i].name, name) == 0) {
            return ASSAY_ERR_DUPLICATE;
        }
    }
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors == 0 ? 32 : 2 * w->cap_tensors;
        if (cap > SIZE_MAX / sizeof *w->tensors) {
            return ASSAY_ERR_NOMEM;
        }
        struct writer_tensor *tensors = assay_realloc(w->tensors, cap * sizeof *tensors);
        if (tensors == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        w->tensors = tensors;
        w->cap_tensors = cap;
    }
    struct writer_tensor *t = &w->tensors[w->n_tensors++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len + 1);
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < ASSAY_GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < n_dims ? ne[d] : 1;
    }
    t->data = data;
    t->fill = fill;
    t->fill_ctx = ctx;
    t->type = type;
    t->n_elements = n_elements;
    t->n_bytes = (uint64_t)n_elements * (type == ASSAY_GGML_TYPE_F16 ? 2 : sizeof(float));
    return ASSAY_OK;
}

enum assay_status assay_gguf_writer_add_tensor_f32(struct assay_gguf_writer *w, const char *name,
                                                   uint32_t n_dims, const int64_t *ne,
                                                   const float *data)
{
    if (data == NULL) {
        return ASSAY_ERR_INVALID;
    }
    return add_tensor(w, name, n_dims, ne, data, NULL, NULL, ASSAY_GGML_TYPE_F32);
}

enum assay_status assay_gguf_writer_add_tensor_fill(struct assay_gguf_writer *w, const char *name,
                                                    uint32_t n_dims, const int64_t *ne,
                                                    uint32_t type, assay_gguf_fill_fn fill,
                                                    void *ctx)
{
    if (fill == NULL || (type != ASSAY_GGML_TYPE_F32 && type != ASSAY_GGML_TYPE_F16)) {
        return ASSAY_ERR_INVALID;
    }
    return add_tensor(w, name, n_dims, ne, NULL, fill, ctx, type);
}

/* A file being written: every write is checked, and the first error kept. */
struct sink {
    FILE *f;
    uint64_t pos;
    int err; /* errno of the first failure, or 0 */
    enum assay_status fill_status; /* a fill's failure, or ASSAY_OK */
    float *chunk;     /* ASSAY_GGUF_FILL_CHUNK floats for filled tensors */
    uint16_t *halves; /* and as many halves; NULL when no tensor needs them */
};

static void put(struct sink *s, const void *bytes, size_t n)
{
    if (s->err != 0 || n == 0) {
        return;
    }
    errno = 0;
    if (fwrite(bytes, 1, n, s->f) != n) {
        s->err = errno != 0 ? errno : EIO;
        return;
    }
    s->pos += n;
}

static void put_le(struct sink *s, uint64_t v, size_t n)
{
    uint8_t b[8];
    for (size_t i = 0; i < n; i++) {
        b[i] = (uint8_t)(v >> (8 * i));
    }
    put(s, b, n);
}

static void put_str(struct sink *s, const char *str, uint64_t len)
{
    put_le(s, len, 8);
    put(s, str, (size_t)len);
}

static void put_padding(struct sink *s, uint32_t alignment)
{
    static const uint8_t zeros[64];
    uint64_t pad = (alignment - s->pos % alignment) % alignment;
    while (pad > 0 && s->err == 0) {
        size_t n = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        put(s, zeros, n);
        pad -= n;
    }
}

static void put_kv(struct sink *s, const struct writer_kv *kv)
{
    put_str(s, kv->key, strlen(kv->key));
    put_le(s, kv->type, 4);
    switch (kv->type) {
    case ASSAY_GGUF_TYPE_BOOL:
        put_le(s, kv->scalar, 1);
        break;
    case ASSAY_GGUF_TYPE_STRING:
        put_str(s, kv->bytes, kv->n);
        break;
    case ASSAY_GGUF_TYPE_ARRAY:
        put_le(s, kv->elem_type, 4);
        put_le(s, kv->n, 8);
        if (kv->elem_type == ASSAY_GGUF_TYPE_STRING) {
            const char *at = kv->bytes;
            for (uint64_t i = 0; i < kv->n; i++) {
                put_str(s, at, kv->lens[i]);
                at += kv->lens[i];
            }
        } else {
            put(s, kv->bytes, (size_t)kv->n * assay_gguf_value_type_size(kv->elem_type));
        }
        break;
    default: /* u32, i32, f32 */
        put_le(s, kv->scalar, 4);
        break;
    }
}

static void put_file(struct sink *s, const struct assay_gguf_writer *w)
{
    put(s, "GGUF", 4);
    put_le(s, 3, 4);
    put_le(s, w->n_tensors, 8);
    put_le(s, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_kv(s, &w->kvs[i]);
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const struct writer_tensor *t = &w->tensors[i];
        put_str(s, t->name, strlen(t->name));
        put_le(s, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) {
            put_le(s, (uint64_t)t->ne[d], 8);
        }
        put_le(s, t->type, 4);
        put_le(s, offset, 8);
        offset += t->n_bytes;
        offset += (w->alignment - offset % w->alignment) % w->alignment;
    }
    put_padding(s, w->alignment);
    for (size_t i = 0; i < w->n_tensors; i++) {
        const struct writer_tensor *t = &w->tensors[i];
        if (t->data != NULL) {
            put(s, t->data, (size_t)t->n_bytes);
        }
        for (int64_t at = 0; t->data == NULL && at < t->n_elements && s->err == 0 &&
                             s->fill_status == ASSAY_OK;
             at += ASSAY_GGUF_FILL_CHUNK) {
            int64_t n = t->n_elements - at < ASSAY_GGUF_FILL_CHUNK ? t->n_elements - at
                                                                     : ASSAY_GGUF_FILL_CHUNK;
            s->fill_status = t->fill(t->fill_ctx, at, n, s->chunk);
            if (s->fill_status != ASSAY_OK) {
                break;
            }
            if (t->type == ASSAY_GGML_TYPE_F16) {
                for (int64_t k = 0; k < n; k++) {
                    s->halves[k] = assay_numerics_f16_bits(s->chunk[k]);
                }
                put(s, s->halves, (size_t)n * 2);
            } else {
                put(s, s->chunk, (size_t)n * sizeof(float));
            }
        }
        put_padding(s, w->alignment);
    }
}

enum assay_status assay_gguf_writer_write(const struct assay_gguf_writer *w, const char *path,
                                          struct assay_diag *diag)
{
    if (w == NULL || path == NULL || path[0] == '\0') {
        return ASSAY_ERR_INVALID;
    }
    size_t tmp_size = strlen(path) + 32;
    char *tmp = assay_malloc(tmp_size);
    if (tmp == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());
    struct sink s = {NULL, 0, 0, ASSAY_OK, NULL, NULL};
    bool filled = false;
    for (size_t i = 0; i < w->n_tensors; i++) {
        filled = filled || w->tensors[i].fill != NULL;
    }
    if (filled) {
        s.chunk = assay_malloc((size_t)ASSAY_GGUF_FILL_CHUNK * sizeof(float));
        s.halves = assay_malloc((size_t)ASSAY_GGUF_FILL_CHUNK * sizeof(uint16_t));
        if (s.chunk == NULL || s.halves == NULL) {
            assay_free(s.chunk);
            assay_free(s.halves);
            assay_free(tmp);
            return ASSAY_ERR_NOMEM;
        }
    }
    s.f = fopen(tmp, "wb");
    if (s.f == NULL) {
        assay_free(s.chunk);
        assay_free(s.halves);
        assay_diag_set(diag, path, "creating the temporary file", "a file that can be created",
                       "%s", strerror(errno));
        assay_free(tmp);
        return ASSAY_ERR_IO;
    }
    put_file(&s, w);
    if (s.err == 0 && fflush(s.f) != 0) {
        s.err = errno != 0 ? errno : EIO;
    }
    if (fclose(s.f) != 0 && s.err == 0) {
        s.err = errno != 0 ? errno : EIO;
    }
    assay_free(s.chunk);
    assay_free(s.halves);
    if (s.fill_status != ASSAY_OK) {
        remove(tmp);
        assay_free(tmp);
        return s.fill_status;
    }
    if (s.err != 0) {
        char where[160];
        snprintf(where, sizeof where, "writing byte %" PRIu64, s.pos);
        assay_diag_set(diag, path, where, "a complete write", "%s", strerror(s.err));
        remove(tmp);
        assay_free(tmp);
        return ASSAY_ERR_IO;
    }
    if (rename(tmp, path) != 0) {
        assay_diag_set(diag, path, "renaming the temporary file", "a successful rename", "%s",
                       strerror(errno));
        remove(tmp);
        assay_free(tmp);
        return ASSAY_ERR_IO;
    }
    assay_free(tmp);
    return ASSAY_OK;
}
