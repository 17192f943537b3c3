/*
 * gguf.c - the GGUF reader (gguf.h): a whole file checked against its
 * buffer's end and against overflow in two walks, then its metadata pairs
 * and tensors indexed for lookup by key and by name. Every model load and
 * every fuzzed input goes through it once; the getters are called a few
 * dozen times a load. The type tables are gguf_types.c's, the writer is
 * gguf_write.c.
 */
#include "gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/alloc.h"
#include "gguf_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "engine/gguf.c reads GGUF's little-endian floats as host ones"
#endif

enum {
    MAX_ARRAY_DEPTH = 3,
    /* The fewest bytes a metadata pair can take: key length, a 1-byte key,
     * value type, a 1-byte value. */
    MIN_KV_BYTES = 8 + 1 + 4 + 1,
    /* The fewest bytes a tensor info can take: name length, a 1-byte name,
     * n_dims (0), type, offset. */
    MIN_TENSOR_BYTES = 8 + 1 + 4 + 4 + 8,
    /* The fewest bytes an array element of type string or array takes. */
    MIN_STRING_BYTES = 8,
    MIN_ARRAY_BYTES = 4 + 8,
};


/* ------------------------------------------------------------------ */
/* Reader                                                              */
/* ------------------------------------------------------------------ */

struct strref {
    const char *s; /* NUL-terminated, in the arena */
    size_t len;
};

struct kv_rec {
    const char *key; /* NUL-terminated, in the arena */
    uint32_t type;
    size_t pos;       /* byte offset of the pair */
    size_t value_pos; /* byte offset of the value, after its type */
    struct strref str;          /* a string value */
    uint32_t elem_type;         /* an array: element type, */
    uint64_t n;                 /* count, */
    size_t elems_pos;           /* byte offset of the first element, */
    const struct strref *strs;  /* and for strings, each element */
};

struct tensor_rec {
    struct assay_gguf_tensor pub;
    uint64_t n_bytes;  /* before it is known to fit in the file */
    size_t pos;        /* byte offset of the tensor info */
    size_t offset_pos; /* byte offset of its offset field */
};

struct assay_gguf {
    const uint8_t *buf;
    size_t size;
    uint8_t *owned; /* buf, when read by assay_gguf_read_file into memory */
    void *mapped;   /* buf, when assay_gguf_read_file mapped the file */
    size_t mapped_size;
    char file[256];
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    size_t n_kv;
    size_t n_tensors;
    struct kv_rec *kvs;
    struct tensor_rec *tensors;
    const struct kv_rec **kv_sorted;         /* by key */
    const struct tensor_rec **tensor_sorted; /* by name */
    struct strref *refs;                     /* elements of string arrays */
    char *arena;                             /* every string, NUL-terminated */
};

/*
 * The parser walks the file twice. The first walk checks the structure and
 * counts what the second will store (pairs, tensors, string bytes); only
 * then is anything allocated, with exact sizes, and the second walk fills
 * it. A count read from the file is never used to size an allocation before
 * the whole file has been walked.
 */
struct parser {
    const uint8_t *buf;
    size_t size;
    size_t pos;
    const char *file;
    struct assay_diag *diag;
    char context[96]; /* "key general.name" or "tensor output.weight" */

    uint32_t version;
    uint32_t alignment;
    uint64_t n_kv;
    uint64_t n_tensors;
    uint64_t n_refs;      /* elements of top-level string arrays */
    uint64_t arena_bytes; /* bytes of all stored strings with their NULs */
    size_t info_end;      /* byte offset just after the tensor infos */

    /* Second walk only (NULL in the first). */
    struct assay_gguf *g;
    uint64_t refs_used;
    uint64_t arena_used;
};

static enum assay_status fail_at(struct parser *p, enum assay_status st, uint64_t pos,
                                 const char *expected, const char *got_fmt, ...)
    __attribute__((format(printf, 5, 6)));

static enum assay_status fail_at(struct parser *p, enum assay_status st, uint64_t pos,
                                 const char *expected, const char *got_fmt, ...)
{
    char where[160];
    char got[256];
    if (p->context[0] != '\0') {
        snprintf(where, sizeof where, "byte %" PRIu64 ", %s", pos, p->context);
    } else {
        snprintf(where, sizeof where, "byte %" PRIu64, pos);
    }
    va_list ap;
    va_start(ap, got_fmt);
    vsnprintf(got, sizeof got, got_fmt, ap);
    va_end(ap);
    assay_diag_set(p->diag, p->file != NULL ? p->file : "", where, expected, "%s", got);
    return st;
}

/* Copy bytes for a diagnostic, replacing what is not printable ASCII. */
static void printable(char *dst, size_t size, const uint8_t *s, size_t len)
{
    size_t n = len < size - 1 ? len : size - 1;
    for (size_t i = 0; i < n; i++) {
        dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '?';
    }
    dst[n] = '\0';
}

static void set_context(struct parser *p, const char *kind, const uint8_t *name, size_t len)
{
    char shown[80];
    printable(shown, sizeof shown, name, len);
    snprintf(p->context, sizeof p->context, "%s %s", kind, shown);
}

static size_t remaining(const struct parser *p)
{
    return p->size - p->pos;
}

static uint64_t load_le(const uint8_t *b, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i > 0; i--) {
        v = (v << 8) | b[i - 1];
    }
    return v;
}

static enum assay_status need(struct parser *p, uint64_t n, const char *what)
{
    if (n <= remaining(p)) {
        return ASSAY_OK;
    }
    return fail_at(p, ASSAY_ERR_PARSE, p->pos, what, "end of file at byte %zu", p->size);
}

static enum assay_status read_u32(struct parser *p, uint32_t *out, const char *what)
{
    enum assay_status st = need(p, 4, what);
    if (st == ASSAY_OK) {
        *out = (uint32_t)load_le(p->buf + p->pos, 4);
        p->pos += 4;
    }
    return st;
}

static enum assay_status read_u64(struct parser *p, uint64_t *out, const char *what)
{
    enum assay_status st = need(p, 8, what);
    if (st == ASSAY_OK) {
        *out = load_le(p->buf + p->pos, 8);
        p->pos += 8;
    }
    return st;
}

/* Read a GGUF string (u64 length, then bytes) of at most max_len bytes;
 * *s points into the buffer. */
static enum assay_status read_str(struct parser *p, const char *what, uint64_t max_len,
                                  const uint8_t **s, uint64_t *len)
{
    char expected[160];
    size_t at = p->pos;
    uint64_t n;
    snprintf(expected, sizeof expected, "the 8-byte length of %s", what);
    enum assay_status st = read_u64(p, &n, expected);
    if (st != ASSAY_OK) {
        return st;
    }
    if (n > remaining(p)) {
        snprintf(expected, sizeof expected, "%s of at most %zu bytes (the rest of the file)", what,
                 remaining(p));
        return fail_at(p, ASSAY_ERR_PARSE, at, expected, "length %" PRIu64, n);
    }
    if (n > max_len) {
        snprintf(expected, sizeof expected, "%s of at most %" PRIu64 " bytes", what, max_len);
        return fail_at(p, ASSAY_ERR_PARSE, at, expected, "length %" PRIu64, n);
    }
    *s = p->buf + p->pos;
    *len = n;
    p->pos += (size_t)n;
    return ASSAY_OK;
}

/* Keep a string: in the first walk count its bytes, in the second copy it
 * into the arena, NUL-terminated. */
static enum assay_status keep_str(struct parser *p, const uint8_t *s, uint64_t len,
                                  struct strref *out)
{
    if (p->g == NULL) {
        p->arena_bytes += len + 1;
        return ASSAY_OK;
    }
    if (len + 1 > p->arena_bytes - p->arena_used) {
        return fail_at(p, ASSAY_ERR_INTERNAL, p->pos, "the same bytes in both walks",
                       "a string the first walk did not count");
    }
    char *d = p->g->arena + p->arena_used;
    if (len > 0) {
        memcpy(d, s, (size_t)len);
    }
    d[len] = '\0';
    p->arena_used += len + 1;
    if (out != NULL) {
        out->s = d;
        out->len = (size_t)len;
    }
    return ASSAY_OK;
}

static enum assay_status walk_array(struct parser *p, int depth, struct kv_rec *kv);

/* Walk one value of the given type. At the top level (kv not NULL in the
 * second walk) strings and arrays are recorded in kv. */
static enum assay_status walk_value(struct parser *p, uint32_t type, int depth, struct kv_rec *kv)
{
    enum assay_status st;
    if (type == ASSAY_GGUF_TYPE_STRING) {
        const uint8_t *s;
        uint64_t len;
        st = read_str(p, "a string value", UINT64_MAX, &s, &len);
        if (st == ASSAY_OK && depth == 0) {
            st = keep_str(p, s, len, kv != NULL ? &kv->str : NULL);
        }
        return st;
    }
    if (type == ASSAY_GGUF_TYPE_ARRAY) {
        return walk_array(p, depth, kv);
    }
    char what[64];
    size_t size = assay_gguf_value_type_size(type);
    snprintf(what, sizeof what, "a %zu-byte %s value", size, assay_gguf_type_name(type));
    st = need(p, size, what);
    if (st != ASSAY_OK) {
        return st;
    }
    if (type == ASSAY_GGUF_TYPE_BOOL && p->buf[p->pos] > 1) {
        return fail_at(p, ASSAY_ERR_PARSE, p->pos, "a bool (0 or 1)", "%u", p->buf[p->pos]);
    }
    p->pos += size;
    return ASSAY_OK;
}

static enum assay_status walk_array(struct parser *p, int depth, struct kv_rec *kv)
{
    size_t at = p->pos;
    uint32_t elem_type;
    uint64_t n;
    char expected[200];
    if (depth >= MAX_ARRAY_DEPTH) {
        return fail_at(p, ASSAY_ERR_UNSUPPORTED, at, "arrays nested at most 3 deep",
                       "an array at depth %d", depth + 1);
    }
    enum assay_status st = read_u32(p, &elem_type, "the 4-byte element type of an array");
    if (st != ASSAY_OK) {
        return st;
    }
    if (elem_type >= N_VALUE_TYPES) {
        return fail_at(p, ASSAY_ERR_PARSE, at, "an array element type in 0..12", "%" PRIu32,
                       elem_type);
    }
    size_t count_pos = p->pos;
    st = read_u64(p, &n, "the 8-byte element count of an array");
    if (st != ASSAY_OK) {
        return st;
    }
    size_t min_bytes = assay_gguf_value_type_size(elem_type);
    if (elem_type == ASSAY_GGUF_TYPE_STRING) {
        min_bytes = MIN_STRING_BYTES;
    } else if (elem_type == ASSAY_GGUF_TYPE_ARRAY) {
        min_bytes = MIN_ARRAY_BYTES;
    }
    if (n > remaining(p) / min_bytes) {
        snprintf(expected, sizeof expected,
                 "an array of at most %zu %s elements (what the %zu bytes left can hold)",
                 remaining(p) / min_bytes, assay_gguf_type_name(elem_type), remaining(p));
        return fail_at(p, ASSAY_ERR_PARSE, count_pos, expected, "%" PRIu64 " elements", n);
    }
    if (kv != NULL) {
        kv->elem_type = elem_type;
        kv->n = n;
        kv->elems_pos = p->pos;
    }
    if (elem_type == ASSAY_GGUF_TYPE_STRING) {
        struct strref *refs = NULL;
        if (depth == 0 && p->g == NULL) {
            p->n_refs += n;
        } else if (depth == 0) {
            if (n > p->n_refs - p->refs_used) {
                return fail_at(p, ASSAY_ERR_INTERNAL, at, "the same bytes in both walks",
                               "an array the first walk did not count");
            }
            refs = p->g->refs + p->refs_used;
            p->refs_used += n;
            if (kv != NULL) {
                kv->strs = refs;
            }
        }
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *s;
            uint64_t len;
            snprintf(expected, sizeof expected, "string %" PRIu64 " of an array", i);
            st = read_str(p, expected, UINT64_MAX, &s, &len);
            if (st == ASSAY_OK && depth == 0) {
                st = keep_str(p, s, len, refs != NULL ? &refs[i] : NULL);
            }
            if (st != ASSAY_OK) {
                return st;
            }
        }
        return ASSAY_OK;
    }
    if (elem_type == ASSAY_GGUF_TYPE_ARRAY) {
        for (uint64_t i = 0; i < n; i++) {
            st = walk_array(p, depth + 1, NULL);
            if (st != ASSAY_OK) {
                return st;
            }
        }
        return ASSAY_OK;
    }
    if (elem_type == ASSAY_GGUF_TYPE_BOOL) {
        for (uint64_t i = 0; i < n; i++) {
            if (p->buf[p->pos + i] > 1) {
                return fail_at(p, ASSAY_ERR_PARSE, p->pos + i, "a bool (0 or 1)", "%u",
                               p->buf[p->pos + i]);
            }
        }
    }
    p->pos += (size_t)n * min_bytes;
    return ASSAY_OK;
}

static enum assay_status walk_kv(struct parser *p, uint64_t index, struct kv_rec *kv)
{
    size_t at = p->pos;
    const uint8_t *key;
    uint64_t key_len;
    char what[64];
    p->context[0] = '\0';
    snprintf(what, sizeof what, "the key of metadata pair %" PRIu64, index);
    enum assay_status st = read_str(p, what, ASSAY_GGUF_MAX_KEY, &key, &key_len);
    if (st != ASSAY_OK) {
        return st;
    }
    if (key_len == 0) {
        return fail_at(p, ASSAY_ERR_PARSE, at, "a non-empty key", "length 0");
    }
    set_context(p, "key", key, (size_t)key_len);
    if (memchr(key, 0, (size_t)key_len) != NULL) {
        return fail_at(p, ASSAY_ERR_PARSE, at, "a key without NUL bytes", "a NUL byte");
    }
    struct strref key_ref = {NULL, 0};
    st = keep_str(p, key, key_len, &key_ref);
    if (st != ASSAY_OK) {
        return st;
    }
    size_t type_pos = p->pos;
    uint32_t type;
    st = read_u32(p, &type, "the 4-byte value type");
    if (st != ASSAY_OK) {
        return st;
    }
    if (type >= N_VALUE_TYPES) {
        return fail_at(p, ASSAY_ERR_PARSE, type_pos, "a value type in 0..12", "%" PRIu32, type);
    }
    if (kv != NULL) {
        kv->key = key_ref.s;
        kv->type = type;
        kv->pos = at;
        kv->value_pos = p->pos;
    }
    if (key_len == strlen("general.alignment") &&
        memcmp(key, "general.alignment", (size_t)key_len) == 0) {
        if (type != ASSAY_GGUF_TYPE_U32) {
            return fail_at(p, ASSAY_ERR_PARSE, type_pos, "a value of type u32",
                           "a value of type %s", assay_gguf_type_name(type));
        }
        st = need(p, 4, "a 4-byte u32 value");
        if (st != ASSAY_OK) {
            return st;
        }
        uint32_t a = (uint32_t)load_le(p->buf + p->pos, 4);
        if (a == 0 || (a & (a - 1)) != 0) {
            return fail_at(p, ASSAY_ERR_PARSE, p->pos, "an alignment that is a power of two",
                           "%" PRIu32, a);
        }
        p->alignment = a;
    }
    return walk_value(p, type, 0, kv);
}

static enum assay_status walk_tensor_info(struct parser *p, uint64_t index, struct tensor_rec *t)
{
    size_t at = p->pos;
    const uint8_t *name;
    uint64_t name_len;
    char what[200];
    p->context[0] = '\0';
    snprintf(what, sizeof what, "the name of tensor %" PRIu64, index);
    enum assay_status st = read_str(p, what, ASSAY_GGUF_MAX_NAME, &name, &name_len);
    if (st != ASSAY_OK) {
        return st;
    }
    if (name_len == 0) {
        return fail_at(p, ASSAY_ERR_PARSE, at, "a non-empty tensor name", "length 0");
    }
    set_context(p, "tensor", name, (size_t)name_len);
    if (memchr(name, 0, (size_t)name_len) != NULL) {
        return fail_at(p, ASSAY_ERR_PARSE, at, "a tensor name without NUL bytes", "a NUL byte");
    }
    struct strref name_ref = {NULL, 0};
    st = keep_str(p, name, name_len, &name_ref);
    if (st != ASSAY_OK) {
        return st;
    }
    size_t dims_pos = p->pos;
    uint32_t n_dims;
    st = read_u32(p, &n_dims, "the 4-byte dimension count");
    if (st != ASSAY_OK) {
        return st;
    }
    if (n_dims > ASSAY_GGUF_MAX_DIMS) {
        return fail_at(p, ASSAY_ERR_PARSE, dims_pos, "at most 4 dimensions", "%" PRIu32, n_dims);
    }
    int64_t ne[ASSAY_GGUF_MAX_DIMS] = {1, 1, 1, 1};
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        size_t dim_pos = p->pos;
        uint64_t v;
        st = read_u64(p, &v, "an 8-byte dimension");
        if (st != ASSAY_OK) {
            return st;
        }
        if (v > (uint64_t)INT64_MAX) {
            return fail_at(p, ASSAY_ERR_PARSE, dim_pos, "a dimension of at most 2^63-1",
                           "%" PRIu64, v);
        }
        ne[d] = (int64_t)v;
        if (ne[d] != 0 && n_elements > INT64_MAX / ne[d]) {
            return fail_at(p, ASSAY_ERR_PARSE, dim_pos,
                           "dimensions whose product (the element count) fits in int64",
                           "ne[%" PRIu32 "] = %" PRId64 " after a product of %" PRId64, d,
                           ne[d], n_elements);
        }
        n_elements *= ne[d];
    }
    size_t type_pos = p->pos;
    uint32_t type;
    st = read_u32(p, &type, "the 4-byte ggml type");
    if (st != ASSAY_OK) {
        return st;
    }
    uint32_t block_elems, block_bytes;
    if (type >= N_GGML_TYPES) {
        return fail_at(p, ASSAY_ERR_PARSE, type_pos, "a ggml type in 0..39", "%" PRIu32, type);
    }
    if (!assay_ggml_type_size(type, &block_elems, &block_bytes)) {
        return fail_at(p, ASSAY_ERR_UNSUPPORTED, type_pos,
                       "a ggml type whose size is known (F32, F16, BF16, F64, I8..I64, "
                       "Q4_0..Q8_1, Q2_K..Q8_K)",
                       "%s (%" PRIu32 ")", assay_ggml_type_name(type), type);
    }
    if (ne[0] % block_elems != 0) {
        snprintf(what, sizeof what, "ne[0] a multiple of the %s block of %" PRIu32,
                 assay_ggml_type_name(type), block_elems);
        return fail_at(p, ASSAY_ERR_PARSE, dims_pos, what, "%" PRId64, ne[0]);
    }
    uint64_t n_blocks = (uint64_t)n_elements / block_elems;
    if (n_blocks > UINT64_MAX / block_bytes) {
        return fail_at(p, ASSAY_ERR_PARSE, dims_pos, "a tensor of fewer than 2^64 bytes",
                       "%" PRIu64 " blocks of %" PRIu32 " bytes", n_blocks, block_bytes);
    }
    size_t offset_pos = p->pos;
    uint64_t offset;
    st = read_u64(p, &offset, "the 8-byte data offset");
    if (st != ASSAY_OK) {
        return st;
    }
    if (t != NULL) {
        t->pub.name = name_ref.s;
        t->pub.n_dims = n_dims;
        memcpy(t->pub.ne, ne, sizeof ne);
        t->pub.n_elements = n_elements;
        t->pub.type = type;
        t->pub.offset = offset;
        t->n_bytes = n_blocks * block_bytes;
        t->pos = at;
        t->offset_pos = offset_pos;
    }
    return ASSAY_OK;
}

static enum assay_status walk(struct parser *p)
{
    enum assay_status st;
    p->pos = 0;
    p->context[0] = '\0';
    p->alignment = ASSAY_GGUF_DEFAULT_ALIGNMENT;
    if (p->size < 4) {
        return fail_at(p, ASSAY_ERR_PARSE, 0, "magic \"GGUF\"", "end of file after %zu bytes",
                       p->size);
    }
    if (memcmp(p->buf, "GGUF", 4) != 0) {
        char shown[8];
        printable(shown, sizeof shown, p->buf, 4);
        return fail_at(p, ASSAY_ERR_PARSE, 0, "magic \"GGUF\"", "\"%s\"", shown);
    }
    p->pos = 4;
    st = read_u32(p, &p->version, "the 4-byte version");
    if (st != ASSAY_OK) {
        return st;
    }
    if (p->version != 2 && p->version != 3) {
        return fail_at(p, ASSAY_ERR_UNSUPPORTED, 4, "version 2 or 3", "%" PRIu32, p->version);
    }
    uint64_t n_tensors, n_kv;
    st = read_u64(p, &n_tensors, "the 8-byte tensor count");
    if (st == ASSAY_OK) {
        st = read_u64(p, &n_kv, "the 8-byte metadata pair count");
    }
    if (st != ASSAY_OK) {
        return st;
    }
    char expected[200];
    size_t left = remaining(p);
    if (n_tensors > left / MIN_TENSOR_BYTES) {
        snprintf(expected, sizeof expected,
                 "a tensor count the %zu bytes left can hold (at most %zu)", left,
                 left / MIN_TENSOR_BYTES);
        return fail_at(p, ASSAY_ERR_PARSE, 8, expected, "%" PRIu64, n_tensors);
    }
    if (n_kv > left / MIN_KV_BYTES) {
        snprintf(expected, sizeof expected,
                 "a metadata pair count the %zu bytes left can hold (at most %zu)", left,
                 left / MIN_KV_BYTES);
        return fail_at(p, ASSAY_ERR_PARSE, 16, expected, "%" PRIu64, n_kv);
    }
    /* Each product is at most left, so the sum cannot overflow. */
    if (n_tensors * MIN_TENSOR_BYTES + n_kv * MIN_KV_BYTES > left) {
        snprintf(expected, sizeof expected,
                 "tensor and metadata pair counts the %zu bytes left can hold", left);
        return fail_at(p, ASSAY_ERR_PARSE, 8, expected,
                       "%" PRIu64 " tensors and %" PRIu64 " pairs", n_tensors, n_kv);
    }
    p->n_tensors = n_tensors;
    p->n_kv = n_kv;
    for (uint64_t i = 0; i < n_kv; i++) {
        st = walk_kv(p, i, p->g != NULL ? &p->g->kvs[i] : NULL);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        st = walk_tensor_info(p, i, p->g != NULL ? &p->g->tensors[i] : NULL);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    p->context[0] = '\0';
    p->info_end = p->pos;
    return ASSAY_OK;
}

static int cmp_kv_key(const void *a, const void *b)
{
    const struct kv_rec *x = *(const struct kv_rec *const *)a;
    const struct kv_rec *y = *(const struct kv_rec *const *)b;
    int c = strcmp(x->key, y->key);
    return c != 0 ? c : (x > y) - (x < y);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    const struct tensor_rec *x = *(const struct tensor_rec *const *)a;
    const struct tensor_rec *y = *(const struct tensor_rec *const *)b;
    int c = strcmp(x->pub.name, y->pub.name);
    return c != 0 ? c : (x > y) - (x < y);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const struct tensor_rec *x = *(const struct tensor_rec *const *)a;
    const struct tensor_rec *y = *(const struct tensor_rec *const *)b;
    if (x->pub.offset != y->pub.offset) {
        return x->pub.offset < y->pub.offset ? -1 : 1;
    }
    return (x > y) - (x < y);
}

/* Sort the lookup tables and reject repeated keys and tensor names. */
static enum assay_status index_names(struct parser *p, struct assay_gguf *g)
{
    for (size_t i = 0; i < g->n_kv; i++) {
        g->kv_sorted[i] = &g->kvs[i];
    }
    if (g->n_kv > 1) {
        qsort(g->kv_sorted, g->n_kv, sizeof *g->kv_sorted, cmp_kv_key);
    }
    for (size_t i = 1; i < g->n_kv; i++) {
        const struct kv_rec *first = g->kv_sorted[i - 1], *again = g->kv_sorted[i];
        if (strcmp(first->key, again->key) == 0) {
            snprintf(p->context, sizeof p->context, "key %s", again->key);
            return fail_at(p, ASSAY_ERR_DUPLICATE, again->pos, "each key once",
                           "a second %s (the first is at byte %zu)", again->key, first->pos);
        }
    }
    for (size_t i = 0; i < g->n_tensors; i++) {
        g->tensor_sorted[i] = &g->tensors[i];
    }
    if (g->n_tensors > 1) {
        qsort(g->tensor_sorted, g->n_tensors, sizeof *g->tensor_sorted, cmp_tensor_name);
    }
    for (size_t i = 1; i < g->n_tensors; i++) {
        const struct tensor_rec *first = g->tensor_sorted[i - 1], *again = g->tensor_sorted[i];
        if (strcmp(first->pub.name, again->pub.name) == 0) {
            snprintf(p->context, sizeof p->context, "tensor %s", again->pub.name);
            return fail_at(p, ASSAY_ERR_DUPLICATE, again->pos, "each tensor name once",
                           "a second tensor %s (the first is at byte %zu)", again->pub.name,
                           first->pos);
        }
    }
    return ASSAY_OK;
}

/* Check that each tensor's data is aligned, inside the file and apart from
 * the others; point each tensor at its data. Uses tensor_sorted as scratch
 * and leaves it sorted by offset. */
static enum assay_status place_tensors(struct parser *p, struct assay_gguf *g)
{
    uint64_t data_size = g->size > g->data_offset ? g->size - g->data_offset : 0;
    char expected[200];
    for (size_t i = 0; i < g->n_tensors; i++) {
        struct tensor_rec *t = &g->tensors[i];
        snprintf(p->context, sizeof p->context, "tensor %s", t->pub.name);
        if (t->pub.offset % g->alignment != 0) {
            snprintf(expected, sizeof expected, "a data offset that is a multiple of %" PRIu32,
                     g->alignment);
            return fail_at(p, ASSAY_ERR_PARSE, t->offset_pos, expected, "%" PRIu64,
                           t->pub.offset);
        }
        if (t->n_bytes > data_size || t->pub.offset > data_size - t->n_bytes) {
            snprintf(expected, sizeof expected, "%" PRIu64 " bytes of tensor data for %s",
                     t->n_bytes, t->pub.name);
            if (t->pub.offset <= data_size) {
                return fail_at(p, ASSAY_ERR_PARSE, t->offset_pos, expected,
                               "the file has %" PRIu64 " (it ends at byte %zu; the tensor "
                               "starts at byte %" PRIu64 ")",
                               data_size - t->pub.offset, g->size,
                               g->data_offset + t->pub.offset);
            }
            return fail_at(p, ASSAY_ERR_PARSE, t->offset_pos, expected,
                           "the file has none (data offset %" PRIu64 ", %" PRIu64
                           " bytes of data in the file)",
                           t->pub.offset, data_size);
        }
        t->pub.n_bytes = (size_t)t->n_bytes;
        t->pub.data = t->n_bytes > 0 ? g->buf + g->data_offset + t->pub.offset : NULL;
    }
    for (size_t i = 0; i < g->n_tensors; i++) {
        g->tensor_sorted[i] = &g->tensors[i];
    }
    if (g->n_tensors > 1) {
        qsort(g->tensor_sorted, g->n_tensors, sizeof *g->tensor_sorted, cmp_tensor_offset);
    }
    /* Once sorted by offset, non-empty tensors that do not overlap end in
     * order, so each need only be compared with the one before. */
    const struct tensor_rec *prev = NULL;
    for (size_t i = 0; i < g->n_tensors; i++) {
        const struct tensor_rec *t = g->tensor_sorted[i];
        if (t->n_bytes == 0) {
            continue;
        }
        if (prev != NULL && t->pub.offset < prev->pub.offset + prev->n_bytes) {
            snprintf(p->context, sizeof p->context, "tensor %s", t->pub.name);
            snprintf(expected, sizeof expected,
                     "data that does not overlap %s (data offsets %" PRIu64 "..%" PRIu64 ")",
                     prev->pub.name, prev->pub.offset, prev->pub.offset + prev->n_bytes - 1);
            return fail_at(p, ASSAY_ERR_PARSE, t->offset_pos, expected, "data offset %" PRIu64,
                           t->pub.offset);
        }
        prev = t;
    }
    p->context[0] = '\0';
    return ASSAY_OK;
}

void assay_gguf_done_with(const struct assay_gguf *g, const struct assay_gguf_tensor *t)
{
    if (t != NULL) {
        assay_gguf_done_with_bytes(g, t->data, t->n_bytes);
    }
}

void assay_gguf_done_with_bytes(const struct assay_gguf *g, const uint8_t *bytes, size_t n)
{
    if (g == NULL || bytes == NULL || g->mapped == NULL || n == 0) {
        return;
    }
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)bytes, end = start + (uintptr_t)n;
    /* whole pages only: a page shared with a neighbour is that one's too */
    uintptr_t first = (start + page - 1) / page * page, last = end / page * page;
    if (last > first) {
        madvise((void *)first, last - first, MADV_DONTNEED);
    }
}

void assay_gguf_free(struct assay_gguf *g)
{
    if (g == NULL) {
        return;
    }
    assay_free(g->kvs);
    assay_free(g->tensors);
    assay_free(g->kv_sorted);
    assay_free(g->tensor_sorted);
    assay_free(g->refs);
    assay_free(g->arena);
    assay_free(g->owned);
    if (g->mapped != NULL) {
        munmap(g->mapped, g->mapped_size);
    }
    assay_free(g);
}

enum assay_status assay_gguf_parse(const uint8_t *buf, size_t size, const char *file_for_diag,
                                   struct assay_gguf **out, struct assay_diag *diag)
{
    if (out == NULL) {
        return ASSAY_ERR_INVALID;
    }
    *out = NULL;
    if (buf == NULL && size > 0) {
        return ASSAY_ERR_INVALID;
    }
    static const uint8_t empty[1] = {0};
    struct parser p;
    memset(&p, 0, sizeof p);
    p.buf = buf != NULL ? buf : empty;
    p.size = size;
    p.file = file_for_diag;
    p.diag = diag;
    enum assay_status st = walk(&p);
    if (st != ASSAY_OK) {
        return st;
    }

    struct assay_gguf *g = assay_calloc(1, sizeof *g);
    if (g == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    g->buf = p.buf;
    g->size = size;
    snprintf(g->file, sizeof g->file, "%s", file_for_diag != NULL ? file_for_diag : "");
    g->n_kv = (size_t)p.n_kv;
    g->n_tensors = (size_t)p.n_tensors;
    g->kvs = assay_calloc(g->n_kv, sizeof *g->kvs);
    g->tensors = assay_calloc(g->n_tensors, sizeof *g->tensors);
    g->kv_sorted = assay_calloc(g->n_kv, sizeof *g->kv_sorted);
    g->tensor_sorted = assay_calloc(g->n_tensors, sizeof *g->tensor_sorted);
    g->refs = assay_calloc((size_t)p.n_refs, sizeof *g->refs);
    g->arena = assay_malloc((size_t)p.arena_bytes);
    if (g->kvs == NULL || g->tensors == NULL || g->kv_sorted == NULL ||
        g->tensor_sorted == NULL || g->refs == NULL || g->arena == NULL) {
        assay_gguf_free(g);
        return ASSAY_ERR_NOMEM;
    }
    p.g = g;
    st = walk(&p);
    if (st == ASSAY_OK) {
        g->version = p.version;
        g->alignment = p.alignment;
        g->data_offset = (uint64_t)p.info_end +
                         (g->alignment - (uint64_t)p.info_end % g->alignment) % g->alignment;
        st = index_names(&p, g);
    }
    if (st == ASSAY_OK) {
        st = place_tensors(&p, g);
    }
    if (st == ASSAY_OK) {
        /* place_tensors left tensor_sorted in offset order. */
        if (g->n_tensors > 1) {
            qsort(g->tensor_sorted, g->n_tensors, sizeof *g->tensor_sorted, cmp_tensor_name);
        }
        *out = g;
        return ASSAY_OK;
    }
    assay_gguf_free(g);
    return st;
}

enum assay_status assay_gguf_read_file(const char *path, struct assay_gguf **out,
                                       struct assay_diag *diag)
{
    if (out == NULL) {
        return ASSAY_ERR_INVALID;
    }
    *out = NULL;
    if (path == NULL) {
        return ASSAY_ERR_INVALID;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        assay_diag_set(diag, path, "opening", "a readable file", "%s", strerror(errno));
        return ASSAY_ERR_IO;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        assay_diag_set(diag, path, "opening", "a file whose size can be read", "%s",
                       strerror(errno));
        fclose(f);
        return ASSAY_ERR_IO;
    }
    if (!S_ISREG(sb.st_mode)) {
        assay_diag_set(diag, path, "opening", "a regular file", "%s",
                       S_ISDIR(sb.st_mode) ? "a directory" : "a special file");
        fclose(f);
        return ASSAY_ERR_IO;
    }
    if (sb.st_size < 0 || (uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
        assay_diag_set(diag, path, "opening", "a file that fits in memory", "%lld bytes",
                       (long long)sb.st_size);
        fclose(f);
        return ASSAY_ERR_IO;
    }
    size_t size = (size_t)sb.st_size;
    /* Mapped rather than read: the file's pages are the page cache's, which
     * the kernel may drop and read again, so a model's load holds one copy
     * of its weights of its own (the fp32 one being decoded into), not
     * two. Reading into memory remains for where mapping fails. */
    void *map = size > 0 ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fileno(f), 0) : MAP_FAILED;
    if (map != MAP_FAILED) {
        fclose(f);
        madvise(map, size, MADV_SEQUENTIAL);
        enum assay_status st = assay_gguf_parse(map, size, path, out, diag);
        if (st != ASSAY_OK) {
            munmap(map, size);
            return st;
        }
        (*out)->mapped = map;
        (*out)->mapped_size = size;
        return ASSAY_OK;
    }
    uint8_t *buf = assay_malloc(size);
    if (buf == NULL) {
        fclose(f);
        return ASSAY_ERR_NOMEM;
    }
    size_t got = fread(buf, 1, size, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (got != size) {
        assay_diag_set(diag, path, "reading", "the whole file", "%zu of %zu bytes (%s)", got, size,
                       err != 0 ? strerror(err) : "it shrank");
        assay_free(buf);
        return ASSAY_ERR_IO;
    }
    enum assay_status st = assay_gguf_parse(buf, size, path, out, diag);
    if (st != ASSAY_OK) {
        assay_free(buf);
        return st;
    }
    (*out)->owned = buf;
    return ASSAY_OK;
}

uint32_t assay_gguf_version(const struct assay_gguf *g)
{
    return g->version;
}

uint32_t assay_gguf_alignment(const struct assay_gguf *g)
{
    return g->alignment;
}

uint64_t assay_gguf_data_offset(const struct assay_gguf *g)
{
    return g->data_offset;
}

size_t assay_gguf_n_kv(const struct assay_gguf *g)
{
    return g->n_kv;
}

const char *assay_gguf_kv_key(const struct assay_gguf *g, size_t i)
{
    return i < g->n_kv ? g->kvs[i].key : NULL;
}

enum assay_gguf_type assay_gguf_kv_type(const struct assay_gguf *g, size_t i)
{
    return i < g->n_kv ? (enum assay_gguf_type)g->kvs[i].type : ASSAY_GGUF_TYPE_U8;
}

static const struct kv_rec *find_kv(const struct assay_gguf *g, const char *key)
{
    if (key == NULL) {
        return NULL;
    }
    size_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->kv_sorted[mid]->key, key);
        if (c == 0) {
            return g->kv_sorted[mid];
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

int64_t assay_gguf_find_key(const struct assay_gguf *g, const char *key)
{
    const struct kv_rec *kv = find_kv(g, key);
    return kv != NULL ? (int64_t)(kv - g->kvs) : -1;
}

/* Describe a value's type for a diagnostic: "a value of type u32" or "an
 * array of f32". */
static void describe_type(const struct kv_rec *kv, char *buf, size_t size)
{
    if (kv->type == ASSAY_GGUF_TYPE_ARRAY) {
        snprintf(buf, size, "an array of %s", assay_gguf_type_name(kv->elem_type));
    } else {
        snprintf(buf, size, "a value of type %s", assay_gguf_type_name(kv->type));
    }
}

/* Find key holding a scalar of the given type, or say why not. */
static enum assay_status find_typed(const struct assay_gguf *g, const char *key, uint32_t type,
                                    const struct kv_rec **out, struct assay_diag *diag)
{
    char expected[64];
    snprintf(expected, sizeof expected, "a value of type %s", assay_gguf_type_name(type));
    const struct kv_rec *kv = find_kv(g, key);
    if (kv == NULL) {
        assay_diag_set(diag, g->file, key, expected, "no such key");
        return ASSAY_ERR_NOT_FOUND;
    }
    if (kv->type != type) {
        char got[64];
        describe_type(kv, got, sizeof got);
        assay_diag_set(diag, g->file, key, expected, "%s", got);
        return ASSAY_ERR_PARSE;
    }
    *out = kv;
    return ASSAY_OK;
}

enum assay_status assay_gguf_get_u32(const struct assay_gguf *g, const char *key, uint32_t *out,
                                     struct assay_diag *diag)
{
    const struct kv_rec *kv;
    enum assay_status st = find_typed(g, key, ASSAY_GGUF_TYPE_U32, &kv, diag);
    if (st == ASSAY_OK) {
        *out = (uint32_t)load_le(g->buf + kv->value_pos, 4);
    }
    return st;
}

enum assay_status assay_gguf_get_i32(const struct assay_gguf *g, const char *key, int32_t *out,
                                     struct assay_diag *diag)
{
    const struct kv_rec *kv;
    enum assay_status st = find_typed(g, key, ASSAY_GGUF_TYPE_I32, &kv, diag);
    if (st == ASSAY_OK) {
        uint32_t bits = (uint32_t)load_le(g->buf + kv->value_pos, 4);
        memcpy(out, &bits, sizeof *out);
    }
    return st;
}

enum assay_status assay_gguf_get_f32(const struct assay_gguf *g, const char *key, float *out,
                                     struct assay_diag *diag)
{
    const struct kv_rec *kv;
    enum assay_status st = find_typed(g, key, ASSAY_GGUF_TYPE_F32, &kv, diag);
    if (st == ASSAY_OK) {
        uint32_t bits = (uint32_t)load_le(g->buf + kv->value_pos, 4);
        memcpy(out, &bits, sizeof *out);
    }
    return st;
}

enum assay_status assay_gguf_get_bool(const struct assay_gguf *g, const char *key, bool *out,
                                      struct assay_diag *diag)
{
    const struct kv_rec *kv;
    enum assay_status st = find_typed(g, key, ASSAY_GGUF_TYPE_BOOL, &kv, diag);
    if (st == ASSAY_OK) {
        *out = g->buf[kv->value_pos] != 0;
    }
    return st;
}

enum assay_status assay_gguf_get_string(const struct assay_gguf *g, const char *key,
                                        const char **out, size_t *len, struct assay_diag *diag)
{
    const struct kv_rec *kv;
    enum assay_status st = find_typed(g, key, ASSAY_GGUF_TYPE_STRING, &kv, diag);
    if (st == ASSAY_OK) {
        *out = kv->str.s;
        if (len != NULL) {
            *len = kv->str.len;
        }
    }
    return st;
}

static enum assay_status find_array(const struct assay_gguf *g, const char *key,
                                    uint32_t elem_type, const struct kv_rec **out,
                                    struct assay_diag *diag)
{
    char expected[64];
    snprintf(expected, sizeof expected, "an array of %s", assay_gguf_type_name(elem_type));
    const struct kv_rec *kv = find_kv(g, key);
    if (kv == NULL) {
        assay_diag_set(diag, g->file, key, expected, "no such key");
        return ASSAY_ERR_NOT_FOUND;
    }
    if (kv->type != ASSAY_GGUF_TYPE_ARRAY || kv->elem_type != elem_type) {
        char got[64];
        describe_type(kv, got, sizeof got);
        assay_diag_set(diag, g->file, key, expected, "%s", got);
        return ASSAY_ERR_PARSE;
    }
    *out = kv;
    return ASSAY_OK;
}

enum assay_status assay_gguf_get_array(const struct assay_gguf *g, const char *key,
                                       enum assay_gguf_type elem_type, uint64_t *n,
                                       struct assay_diag *diag)
{
    const struct kv_rec *kv;
    enum assay_status st = find_array(g, key, elem_type, &kv, diag);
    if (st == ASSAY_OK) {
        *n = kv->n;
    }
    return st;
}

/* Find element i of an array of elem_type: *pos is its byte offset. */
static enum assay_status find_element(const struct assay_gguf *g, const char *key,
                                      uint32_t elem_type, uint64_t i, const struct kv_rec **kv,
                                      size_t *pos, struct assay_diag *diag)
{
    enum assay_status st = find_array(g, key, elem_type, kv, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    if (i >= (*kv)->n) {
        char where[160], expected[64];
        snprintf(where, sizeof where, "%s[%" PRIu64 "]", key, i);
        snprintf(expected, sizeof expected, "an index below %" PRIu64, (*kv)->n);
        assay_diag_set(diag, g->file, where, expected, "%" PRIu64, i);
        return ASSAY_ERR_INVALID;
    }
    *pos = (*kv)->elems_pos + (size_t)i * assay_gguf_value_type_size(elem_type);
    return ASSAY_OK;
}

enum assay_status assay_gguf_get_array_u32(const struct assay_gguf *g, const char *key,
                                           uint64_t i, uint32_t *out, struct assay_diag *diag)
{
    const struct kv_rec *kv;
    size_t pos;
    enum assay_status st = find_element(g, key, ASSAY_GGUF_TYPE_U32, i, &kv, &pos, diag);
    if (st == ASSAY_OK) {
        *out = (uint32_t)load_le(g->buf + pos, 4);
    }
    return st;
}

enum assay_status assay_gguf_get_array_i32(const struct assay_gguf *g, const char *key,
                                           uint64_t i, int32_t *out, struct assay_diag *diag)
{
    const struct kv_rec *kv;
    size_t pos;
    enum assay_status st = find_element(g, key, ASSAY_GGUF_TYPE_I32, i, &kv, &pos, diag);
    if (st == ASSAY_OK) {
        uint32_t bits = (uint32_t)load_le(g->buf + pos, 4);
        memcpy(out, &bits, sizeof *out);
    }
    return st;
}

enum assay_status assay_gguf_get_array_f32(const struct assay_gguf *g, const char *key,
                                           uint64_t i, float *out, struct assay_diag *diag)
{
    const struct kv_rec *kv;
    size_t pos;
    enum assay_status st = find_element(g, key, ASSAY_GGUF_TYPE_F32, i, &kv, &pos, diag);
    if (st == ASSAY_OK) {
        uint32_t bits = (uint32_t)load_le(g->buf + pos, 4);
        memcpy(out, &bits, sizeof *out);
    }
    return st;
}

enum assay_status assay_gguf_get_array_bool(const struct assay_gguf *g, const char *key,
                                            uint64_t i, bool *out, struct assay_diag *diag)
{
    const struct kv_rec *kv;
    size_t pos;
    enum assay_status st = find_element(g, key, ASSAY_GGUF_TYPE_BOOL, i, &kv, &pos, diag);
    if (st == ASSAY_OK) {
        *out = g->buf[pos] != 0;
    }
    return st;
}

enum assay_status assay_gguf_get_array_string(const struct assay_gguf *g, const char *key,
                                              uint64_t i, const char **out, size_t *len,
                                              struct assay_diag *diag)
{
    const struct kv_rec *kv;
    size_t pos;
    enum assay_status st = find_element(g, key, ASSAY_GGUF_TYPE_STRING, i, &kv, &pos, diag);
    if (st == ASSAY_OK) {
        *out = kv->strs[i].s;
        if (len != NULL) {
            *len = kv->strs[i].len;
        }
    }
    return st;
}

size_t assay_gguf_n_tensors(const struct assay_gguf *g)
{
    return g->n_tensors;
}

const struct assay_gguf_tensor *assay_gguf_tensor_at(const struct assay_gguf *g, size_t i)
{
    return i < g->n_tensors ? &g->tensors[i].pub : NULL;
}

const struct assay_gguf_tensor *assay_gguf_find_tensor(const struct assay_gguf *g,
                                                       const char *name)
{
    if (name == NULL) {
        return NULL;
    }
    size_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->tensor_sorted[mid]->pub.name, name);
        if (c == 0) {
            return &g->tensor_sorted[mid]->pub;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}
