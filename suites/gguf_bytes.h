/*
 * gguf_bytes.h - GGUF file bytes for the tests that read, edit and load
 * them (test_gguf and test_model_gguf): whole files in and out, little-
 * endian fields, where a key's value or a tensor's info lies in a file,
 * a saved mini model's bytes, and checks of a status and its diagnostic.
 *
 * Each function fails the running cmocka test on anything unexpected (a
 * file that cannot be read, a string that does not occur exactly once).
 * Buffers returned are malloc'd, one byte larger than their size; the
 * caller frees them.
 */
#ifndef ASSAY_TEST_GGUF_BYTES_H
#define ASSAY_TEST_GGUF_BYTES_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "engine/gguf.h"

/* A whole file's bytes (*size of them), and a whole file written. */
uint8_t *gguf_read_all(const char *path, size_t *size);
void gguf_write_all(const char *path, const uint8_t *buf, size_t size);

/* Little-endian u32 and u64 at byte pos of buf. */
void gguf_put_u32(uint8_t *buf, size_t pos, uint32_t v);
void gguf_put_u64(uint8_t *buf, size_t pos, uint64_t v);
uint32_t gguf_get_u32(const uint8_t *buf, size_t pos);
uint64_t gguf_get_u64(const uint8_t *buf, size_t pos);

/* Byte offset of the GGUF string s (its u64 length) in buf; it must occur
 * exactly once. */
size_t gguf_str_pos(const uint8_t *buf, size_t size, const char *s);

/* Byte offset of a key's value type, and of its value. */
size_t gguf_kv_type_pos(const uint8_t *buf, size_t size, const char *key);
size_t gguf_kv_value_pos(const uint8_t *buf, size_t size, const char *key);

/* Byte offset of a tensor info's n_dims, and of its type and offset. */
size_t gguf_tensor_dims_pos(const uint8_t *buf, size_t size, const char *name);
size_t gguf_tensor_type_pos(const uint8_t *buf, size_t size, const char *name);
size_t gguf_tensor_offset_pos(const uint8_t *buf, size_t size, const char *name);

/* Byte offset in buf of a tensor's data, through the generic reader. */
size_t gguf_tensor_data_pos(const uint8_t *buf, size_t size, const char *name);

/* got is want; otherwise the test fails, printing both and the diagnostic. */
void gguf_want_status(enum assay_status got, enum assay_status want,
                      const struct assay_diag *diag);

/* The diagnostic's where field holds where_part, and its whole text each
 * non-NULL phrase. */
void gguf_want_diag(const struct assay_diag *diag, const char *where_part, const char *phrase1,
                    const char *phrase2);

/* Write bytes to a scratch file and load them as a model, resident and
 * mapped, which must each fail with status, where and phrases; the
 * diagnostic names the file. */
void gguf_want_load_fail(const uint8_t *buf, size_t size, enum assay_status status,
                         const char *where_part, const char *phrase1, const char *phrase2);

/* A saved mini model (seed 1): its file's bytes. */
uint8_t *gguf_mini_bytes(size_t *size);

/* A copy of buf's size bytes. */
uint8_t *gguf_copy_of(const uint8_t *buf, size_t size);

/* The u32 value of key in g is want. */
void gguf_want_u32(const struct assay_gguf *g, const char *key, uint32_t want);

#endif
