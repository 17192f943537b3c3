/*
 * gguf_types.c - the names and sizes of GGUF's metadata value types and of
 * ggml's tensor types (gguf.h, gguf_internal.h). The reader consults them
 * for every value and tensor info it checks, the writer for every array it
 * writes; dequantization (dequant.c) and model loading (model_gguf.c) take
 * a tensor type's name and block size from them.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "gguf_internal.h"

static const char *const k_value_type_names[N_VALUE_TYPES] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

size_t assay_gguf_value_type_size(uint32_t type)
{
    static const size_t sizes[N_VALUE_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < N_VALUE_TYPES ? sizes[type] : 0;
}

const char *assay_gguf_type_name(uint32_t type)
{
    return type < N_VALUE_TYPES ? k_value_type_names[type] : "unknown";
}

/* ggml's tensor types, with the block layout of those whose size this
 * reader knows (block_elems 0 for the others). */
static const struct {
    const char *name;
    uint32_t block_elems;
    uint32_t block_bytes;
} k_ggml_types[N_GGML_TYPES] = {
    [0] = {"F32", 1, 4},
    [1] = {"F16", 1, 2},
    [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},
    [4] = {"Q4_2 (removed)", 0, 0},
    [5] = {"Q4_3 (removed)", 0, 0},
    [6] = {"Q5_0", 32, 22},
    [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},
    [9] = {"Q8_1", 32, 36},
    [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},
    [12] = {"Q4_K", 256, 144},
    [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},
    [15] = {"Q8_K", 256, 292},
    [16] = {"IQ2_XXS", 0, 0},
    [17] = {"IQ2_XS", 0, 0},
    [18] = {"IQ3_XXS", 0, 0},
    [19] = {"IQ1_S", 0, 0},
    [20] = {"IQ4_NL", 0, 0},
    [21] = {"IQ3_S", 0, 0},
    [22] = {"IQ2_S", 0, 0},
    [23] = {"IQ4_XS", 0, 0},
    [24] = {"I8", 1, 1},
    [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},
    [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 0, 0},
    [30] = {"BF16", 1, 2},
    [31] = {"Q4_0_4_4 (removed)", 0, 0},
    [32] = {"Q4_0_4_8 (removed)", 0, 0},
    [33] = {"Q4_0_8_8 (removed)", 0, 0},
    [34] = {"TQ1_0", 0, 0},
    [35] = {"TQ2_0", 0, 0},
    [36] = {"IQ4_NL_4_4 (removed)", 0, 0},
    [37] = {"IQ4_NL_4_8 (removed)", 0, 0},
    [38] = {"IQ4_NL_8_8 (removed)", 0, 0},
    [39] = {"MXFP4", 0, 0},
};

const char *assay_ggml_type_name(uint32_t type)
{
    return type < N_GGML_TYPES ? k_ggml_types[type].name : "unknown";
}

bool assay_ggml_type_size(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes)
{
    if (type >= N_GGML_TYPES || k_ggml_types[type].block_elems == 0) {
        return false;
    }
    *block_elems = k_ggml_types[type].block_elems;
    *block_bytes = k_ggml_types[type].block_bytes;
    return true;
}
