/*
 * bundled.h - the bundled engine behind the adapter interface.
 *
 * The adapter owns the engine. Models are borrowed from the caller unless
 * handed over with assay_bundled_own_models, in which case the adapter frees
 * them with itself.
 */
#ifndef ASSAY_BUNDLED_H
#define ASSAY_BUNDLED_H

#include "../engine/engine.h"
#include "adapter.h"

/* Build an engine with params and wrap it. On failure *out is cleared and
 * diag says why (see assay_engine_init). */
enum assay_status assay_bundled_open(const struct assay_engine_params *params,
                                     struct assay_adapter *out, struct assay_diag *diag);

/* Hand ownership of the model (and draft, may be NULL) to an open bundled
 * adapter, to be freed when the adapter is. */
void assay_bundled_own_models(struct assay_adapter *adapter, struct assay_model *model,
                              struct assay_model *draft);

/* The engine inside a bundled adapter, or NULL for any other adapter. */
struct assay_engine *assay_bundled_engine(const struct assay_adapter *adapter);

#endif
