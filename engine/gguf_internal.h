/*
 * gguf_internal.h - what the three files of the GGUF code share (not an
 * interface: include gguf.h). gguf.c reads a file, gguf_write.c writes one,
 * and gguf_types.c holds the tables of GGUF's value types and ggml's tensor
 * types that both consult.
 */
#ifndef ASSAY_GGUF_INTERNAL_H
#define ASSAY_GGUF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

enum {
    N_VALUE_TYPES = 13,
    N_GGML_TYPES = 40,
};

/* Bytes of a fixed-size value type; 0 for string and array and for a type
 * number past the last. */
size_t assay_gguf_value_type_size(uint32_t type);

#endif
