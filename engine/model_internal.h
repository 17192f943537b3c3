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

#endif
