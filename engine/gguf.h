/*
 * gguf.h - reading and writing GGUF files (versions 2 and 3).
 *
 * The reader parses a whole file held in memory: assay_gguf_parse borrows a
 * buffer, assay_gguf_read_file maps (or reads) a file and owns its bytes. It checks
 * everything it reads against the buffer's end and against overflow before
 * allocating anything, so it may be given any bytes at all (it is fuzzed).
 * After a successful parse the metadata pairs are looked up by key with typed
 * getters that refuse a value of another type, and the tensors are looked up
 * by name, each with its dimensions in ggml "ne" order (fastest first) and a
 * pointer to its bytes inside the buffer.
 *
 * The writer collects metadata pairs and f32 tensors (borrowed, or
 * produced a chunk at a time while writing and stored as F32 or F16) and
 * writes a GGUF version 3 file through a temporary name and a rename, so
 * that a failed write never leaves a partial file at the destination.
 *
 * Both assume a little-endian host, as the rest of assay does.
 *
 *   struct assay_gguf *g;
 *   if (assay_gguf_read_file("m.gguf", &g, &diag) == ASSAY_OK) {
 *       uint32_t n_layer;
 *       assay_gguf_get_u32(g, "llama.block_count", &n_layer, &diag);
 *       const struct assay_gguf_tensor *t = assay_gguf_find_tensor(g, "output.weight");
 *       ...
 *       assay_gguf_free(g);
 *   }
 */
#ifndef ASSAY_GGUF_H
#define ASSAY_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

/* The value types of GGUF metadata, with the numbers the file uses. */
enum assay_gguf_type {
    ASSAY_GGUF_TYPE_U8 = 0,
    ASSAY_GGUF_TYPE_I8 = 1,
    ASSAY_GGUF_TYPE_U16 = 2,
    ASSAY_GGUF_TYPE_I16 = 3,
    ASSAY_GGUF_TYPE_U32 = 4,
    ASSAY_GGUF_TYPE_I32 = 5,
    ASSAY_GGUF_TYPE_F32 = 6,
    ASSAY_GGUF_TYPE_BOOL = 7,
    ASSAY_GGUF_TYPE_STRING = 8,
    ASSAY_GGUF_TYPE_ARRAY = 9,
    ASSAY_GGUF_TYPE_U64 = 10,
    ASSAY_GGUF_TYPE_I64 = 11,
    ASSAY_GGUF_TYPE_F64 = 12,
};

/* The ggml tensor types assay names; the reader knows the sizes of more
 * (see assay_ggml_type_size). */
enum assay_ggml_type {
    ASSAY_GGML_TYPE_F32 = 0,
    ASSAY_GGML_TYPE_F16 = 1,
    ASSAY_GGML_TYPE_Q4_0 = 2,
    ASSAY_GGML_TYPE_Q8_0 = 8,
    ASSAY_GGML_TYPE_Q4_K = 12,
    ASSAY_GGML_TYPE_Q5_K = 13,
    ASSAY_GGML_TYPE_Q6_K = 14,
    ASSAY_GGML_TYPE_BF16 = 30,
};

enum {
    ASSAY_GGUF_MAX_DIMS = 4,          /* dimensions of a tensor, as in ggml */
    ASSAY_GGUF_MAX_NAME = 64,         /* bytes of a tensor name, per the spec */
    ASSAY_GGUF_MAX_KEY = 65535,       /* bytes of a metadata key, per the spec */
    ASSAY_GGUF_DEFAULT_ALIGNMENT = 32,
};

/* A short static name for a value type ("u32", "string", ...); never NULL
 * ("unknown" for a number out of range). */
const char *assay_gguf_type_name(uint32_t type);

/* A short static name for a ggml tensor type ("F32", "Q4_K", ...); never
 * NULL ("unknown" for a number ggml does not define). */
const char *assay_ggml_type_name(uint32_t type);

/* The layout of a ggml tensor type: a block of *block_elems elements takes
 * *block_bytes bytes. Returns false (outputs untouched) for a type whose
 * size this reader does not know; it knows F32, F16, BF16, F64, I8..I64,
 * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 and Q2_K..Q8_K. */
bool assay_ggml_type_size(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);

/* ------------------------------------------------------------------ */
/* Reader                                                              */
/* ------------------------------------------------------------------ */

struct assay_gguf; /* opaque */

/* One tensor of a parsed file. Plain data owned by the struct assay_gguf
 * it came from; valid until assay_gguf_free. */
struct assay_gguf_tensor {
    const char *name;                  /* NUL-terminated, 1..64 bytes */
    uint32_t n_dims;                   /* 0..ASSAY_GGUF_MAX_DIMS */
    int64_t ne[ASSAY_GGUF_MAX_DIMS];   /* fastest first; 1 past n_dims */
    int64_t n_elements;                /* product of ne; fits in int64 */
    uint32_t type;                     /* ggml type with a known size */
    uint64_t offset;                   /* from the start of the data section */
    const void *data;                  /* inside the parsed buffer (NULL when
                                        * n_bytes is 0); may be unaligned if
                                        * the buffer is */
    size_t n_bytes;                    /* bytes of data, all within the file */
};

/*
 * Parse the GGUF file held in buf[0..size). buf is borrowed: it must stay
 * unchanged and alive until assay_gguf_free(*out), since tensor data points
 * into it. file_for_diag (may be NULL) names the file in diagnostics.
 *
 * Checks: magic "GGUF"; version 2 or 3; that every count, length and
 * dimension fits in what remains of the buffer and in 64-bit arithmetic;
 * value types 0..12 (arrays nest at most 3 deep); bools 0 or 1; keys of
 * 1..65535 bytes and tensor names of 1..64 bytes, without NUL bytes;
 * unique keys and tensor names; general.alignment a u32 power of two
 * (default 32); tensors of at most 4 dimensions whose element count fits in
 * int64, of a ggml type with a known size (block types need ne[0] a
 * multiple of the block); tensor data aligned, within the file and not
 * overlapping. Bytes after the last tensor's data are ignored.
 *
 * Returns ASSAY_OK and *out (free with assay_gguf_free);
 * ASSAY_ERR_PARSE for malformed bytes, ASSAY_ERR_UNSUPPORTED for a version
 * other than 2 or 3, arrays nested too deep, or a ggml type whose size is
 * unknown, ASSAY_ERR_DUPLICATE for a repeated key or tensor name (diag names
 * it), ASSAY_ERR_NOMEM, ASSAY_ERR_INVALID for a NULL out or a NULL buf with
 * a nonzero size. Diagnostics give "byte N" (and the key or tensor when
 * known), what was expected and what was found. On failure *out is NULL and
 * nothing is allocated.
 */
enum assay_status assay_gguf_parse(const uint8_t *buf, size_t size, const char *file_for_diag,
                                   struct assay_gguf **out, struct assay_diag *diag);

/*
 * Map the regular file at path read-only (or, where mapping fails, read it
 * into memory) and parse it as assay_gguf_parse does; the result owns the
 * mapping or the bytes. The file must not shrink while it is mapped (the
 * tensors point into it; make-test-models.sh and llama-quantize write under
 * another name and rename). Returns what
 * assay_gguf_parse returns, or ASSAY_ERR_IO when the file cannot be opened
 * or read or is not a regular file (diag says why). On failure *out is NULL
 * and nothing is allocated.
 */
enum assay_status assay_gguf_read_file(const char *path, struct assay_gguf **out,
                                       struct assay_diag *diag);

/* Tell the reader that t's bytes will not be read again: when the file is
 * mapped, its whole pages are given back to the kernel, so a loader that
 * decodes tensor by tensor holds at most one tensor of the file at a time.
 * The bytes stay readable (read from the file again if touched). */
void assay_gguf_done_with(const struct assay_gguf *g, const struct assay_gguf_tensor *t);

/* The same for any n bytes of the file from `bytes` (a part of a tensor's
 * data): its whole pages are given back. */
void assay_gguf_done_with_bytes(const struct assay_gguf *g, const uint8_t *bytes, size_t n);

/* Release a parsed file (and its bytes if read by assay_gguf_read_file);
 * NULL is a no-op. */
void assay_gguf_free(struct assay_gguf *g);

/* The format version (2 or 3) and the alignment in force. */
uint32_t assay_gguf_version(const struct assay_gguf *g);
uint32_t assay_gguf_alignment(const struct assay_gguf *g);

/* Byte offset, from the start of the file, of the tensor data section. */
uint64_t assay_gguf_data_offset(const struct assay_gguf *g);

/* Metadata pairs in file order: their number, and key and value type of the
 * i-th (0 <= i < n; NULL / 0 for an index out of range). Keys are
 * NUL-terminated and owned by g. */
size_t assay_gguf_n_kv(const struct assay_gguf *g);
const char *assay_gguf_kv_key(const struct assay_gguf *g, size_t i);
enum assay_gguf_type assay_gguf_kv_type(const struct assay_gguf *g, size_t i);

/* The index of key, or -1 if the file has no such key. */
int64_t assay_gguf_find_key(const struct assay_gguf *g, const char *key);

/*
 * Typed getters. Each finds key and reads its value as the type in its name
 * (exactly that type: a u32 is not read as an i32). Return ASSAY_OK and
 * write *out; ASSAY_ERR_NOT_FOUND if there is no such key; ASSAY_ERR_PARSE
 * if the value has another type (diag: where the key, expected "a u32",
 * got "a string"). *out is untouched on failure.
 */
enum assay_status assay_gguf_get_u32(const struct assay_gguf *g, const char *key, uint32_t *out,
                                     struct assay_diag *diag);
enum assay_status assay_gguf_get_i32(const struct assay_gguf *g, const char *key, int32_t *out,
                                     struct assay_diag *diag);
enum assay_status assay_gguf_get_f32(const struct assay_gguf *g, const char *key, float *out,
                                     struct assay_diag *diag);
enum assay_status assay_gguf_get_bool(const struct assay_gguf *g, const char *key, bool *out,
                                      struct assay_diag *diag);

/* A string value: *out points to a NUL-terminated copy owned by g; *len (if
 * len is not NULL) is its length in bytes, which counts any NUL bytes the
 * string itself holds. */
enum assay_status assay_gguf_get_string(const struct assay_gguf *g, const char *key,
                                        const char **out, size_t *len, struct assay_diag *diag);

/* An array: check that key holds an array of elem_type and write its number
 * of elements to *n. ASSAY_ERR_PARSE (diag: expected "an array of f32", got
 * "an array of i32" or "a u32") when it does not. */
enum assay_status assay_gguf_get_array(const struct assay_gguf *g, const char *key,
                                       enum assay_gguf_type elem_type, uint64_t *n,
                                       struct assay_diag *diag);

/* Element i of an array of the type in the name. Errors as
 * assay_gguf_get_array, and ASSAY_ERR_INVALID when i is out of range. */
enum assay_status assay_gguf_get_array_u32(const struct assay_gguf *g, const char *key,
                                           uint64_t i, uint32_t *out, struct assay_diag *diag);
enum assay_status assay_gguf_get_array_i32(const struct assay_gguf *g, const char *key,
                                           uint64_t i, int32_t *out, struct assay_diag *diag);
enum assay_status assay_gguf_get_array_f32(const struct assay_gguf *g, const char *key,
                                           uint64_t i, float *out, struct assay_diag *diag);
enum assay_status assay_gguf_get_array_bool(const struct assay_gguf *g, const char *key,
                                            uint64_t i, bool *out, struct assay_diag *diag);
enum assay_status assay_gguf_get_array_string(const struct assay_gguf *g, const char *key,
                                              uint64_t i, const char **out, size_t *len,
                                              struct assay_diag *diag);

/* Tensors in file order: their number and the i-th (NULL out of range). */
size_t assay_gguf_n_tensors(const struct assay_gguf *g);
const struct assay_gguf_tensor *assay_gguf_tensor_at(const struct assay_gguf *g, size_t i);

/* The tensor called name, or NULL. */
const struct assay_gguf_tensor *assay_gguf_find_tensor(const struct assay_gguf *g,
                                                       const char *name);

/* ------------------------------------------------------------------ */
/* Writer                                                              */
/* ------------------------------------------------------------------ */

struct assay_gguf_writer; /* opaque */

/* An empty writer; free with assay_gguf_writer_free. Returns ASSAY_OK or
 * ASSAY_ERR_NOMEM (then *out is NULL). */
enum assay_status assay_gguf_writer_init(struct assay_gguf_writer **out);

/* Release a writer and its copies; NULL is a no-op. */
void assay_gguf_writer_free(struct assay_gguf_writer *w);

/*
 * Add a metadata pair; pairs are written in the order added. The key and
 * any strings and arrays are copied. Returns ASSAY_OK; ASSAY_ERR_INVALID for
 * a key that is empty, longer than 65535 bytes, a NULL value pointer (arrays
 * may be NULL when n is 0), or a general.alignment that is not a power of
 * two; ASSAY_ERR_DUPLICATE if the key was added before; ASSAY_ERR_NOMEM.
 * On failure the writer is unchanged.
 *
 * A u32 "general.alignment" sets the alignment the file is written with
 * (default 32, and then no such key is written).
 */
enum assay_status assay_gguf_writer_add_u32(struct assay_gguf_writer *w, const char *key,
                                            uint32_t value);
enum assay_status assay_gguf_writer_add_i32(struct assay_gguf_writer *w, const char *key,
                                            int32_t value);
enum assay_status assay_gguf_writer_add_f32(struct assay_gguf_writer *w, const char *key,
                                            float value);
enum assay_status assay_gguf_writer_add_bool(struct assay_gguf_writer *w, const char *key,
                                             bool value);
enum assay_status assay_gguf_writer_add_string(struct assay_gguf_writer *w, const char *key,
                                               const char *value);
enum assay_status assay_gguf_writer_add_string_array(struct assay_gguf_writer *w,
                                                     const char *key,
                                                     const char *const *values, size_t n);
enum assay_status assay_gguf_writer_add_f32_array(struct assay_gguf_writer *w, const char *key,
                                                  const float *values, size_t n);
enum assay_status assay_gguf_writer_add_i32_array(struct assay_gguf_writer *w, const char *key,
                                                  const int32_t *values, size_t n);

/*
 * Add an f32 tensor; tensors are written in the order added. ne holds
 * n_dims (1..4) dimensions, fastest first, each >= 1, with a product that
 * fits in int64 and whose bytes fit in size_t; data holds that many floats
 * and is borrowed: it must stay alive and unchanged until the last
 * assay_gguf_writer_write or assay_gguf_writer_free. Returns ASSAY_OK;
 * ASSAY_ERR_INVALID for a name that is empty or longer than 64 bytes, bad
 * dimensions or a NULL pointer; ASSAY_ERR_DUPLICATE for a name added before;
 * ASSAY_ERR_NOMEM. On failure the writer is unchanged.
 */
enum assay_status assay_gguf_writer_add_tensor_f32(struct assay_gguf_writer *w, const char *name,
                                                   uint32_t n_dims, const int64_t *ne,
                                                   const float *data);

/*
 * A tensor whose values are produced while the file is written, for files
 * larger than memory: fill(ctx, first, n, out) writes the floats of
 * elements first..first+n (in ggml order, n <= ASSAY_GGUF_FILL_CHUNK) to
 * out, and returns ASSAY_OK or a status that stops the write (the write
 * then returns it, and no file is left). The chunks are asked for in
 * order, each once per write. type is F32 or F16 (each float rounded to
 * nearest even, as ggml converts); ctx is borrowed like data above.
 * Returns as assay_gguf_writer_add_tensor_f32, and ASSAY_ERR_INVALID for
 * another type.
 */
#define ASSAY_GGUF_FILL_CHUNK ((int64_t)1 << 20)
typedef enum assay_status (*assay_gguf_fill_fn)(void *ctx, int64_t first, int64_t n, float *out);
enum assay_status assay_gguf_writer_add_tensor_fill(struct assay_gguf_writer *w, const char *name,
                                                    uint32_t n_dims, const int64_t *ne,
                                                    uint32_t type, assay_gguf_fill_fn fill,
                                                    void *ctx);

/*
 * Write GGUF version 3: header, metadata, tensor infos, then each tensor's
 * data at an offset aligned to the alignment (32 unless set), padded with
 * zero bytes. The bytes go to "<path>.tmp.<pid>", which is renamed to path
 * once complete and closed. Returns ASSAY_OK; ASSAY_ERR_IO if the temporary
 * file cannot be created, written, closed or renamed (diag: the file, what
 * failed and strerror); ASSAY_ERR_NOMEM. On failure the temporary file is
 * removed and path is as it was before (absent, or the previous file). The
 * writer itself is unchanged, so write may be called again.
 */
enum assay_status assay_gguf_writer_write(const struct assay_gguf_writer *w, const char *path,
                                          struct assay_diag *diag);

#endif
