/*
 * model_internal.h - what the GGUF reader needs of model.c and nobody else.
 */
#ifndef ASSAY_MODEL_INTERNAL_H
#define ASSAY_MODEL_INTERNAL_H

#include "model.h"

/* A model for cfg with zeroed weights and the tensor pointers bound into
 * data in GGUF tensor order; when tied, data has no output block and output
 * is tok_embd. tensor_types is "F32". Free with assay_model_free. */
enum assay_status assay_model_alloc(struct assay_model **out, const struct assay_model_config *cfg,
                                    bool tied);

/* The same; when mapped, a mapped model (model.h): data holds the vectors
 * alone and the matrix pointers are NULL, for the loader to fill the
 * files. */
enum assay_status assay_model_alloc_as(struct assay_model **out,
                                       const struct assay_model_config *cfg, bool tied,
                                       bool mapped);

/* A tensor of a model: what it is, and its layer for a layer's. */
enum assay_weight_kind {
    ASSAY_WEIGHT_TOK_EMBD,
    ASSAY_WEIGHT_ATTN_NORM,
    ASSAY_WEIGHT_Q,
    ASSAY_WEIGHT_K,
    ASSAY_WEIGHT_V,
    ASSAY_WEIGHT_O,
    ASSAY_WEIGHT_FFN_NORM,
    ASSAY_WEIGHT_GATE,
    ASSAY_WEIGHT_UP,
    ASSAY_WEIGHT_DOWN,
    ASSAY_WEIGHT_Q_BIAS,
    ASSAY_WEIGHT_K_BIAS,
    ASSAY_WEIGHT_V_BIAS,
    ASSAY_WEIGHT_OUT_NORM,
    ASSAY_WEIGHT_OUTPUT,
    ASSAY_WEIGHT_ROPE_FREQS,
};

/*
 * Elements first..first+n of tensor (kind, layer) of the documented random
 * initialisation of cfg with params and seed (model.h): the same floats
 * assay_model_init_random_params puts there, computed without the rest of
 * the model, so a model larger than memory can be written a chunk at a
 * time. In a tied model TOK_EMBD is drawn as OUTPUT is.
 */
void assay_model_random_values(const struct assay_model_config *cfg,
                               struct assay_model_init_params params, uint64_t seed,
                               enum assay_weight_kind kind, int32_t layer, int64_t first,
                               int64_t n, float *out);

#endif
