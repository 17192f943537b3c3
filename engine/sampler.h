/*
 * sampler.h - the engine's sampler: the processed next-token distribution
 * (temperature, top-k, top-p, in the order core/request.h documents) and a
 * draw from it with a given uniform.
 *
 * The engine computes the full processed distribution, not just a token,
 * because speculative decoding needs p and q as vectors. A draw is the
 * inverse CDF in token-id order: token x is returned for u in
 * [F(x-), F(x)). A sampler holds scratch for one vocabulary and is not
 * thread-safe. Lifetime: assay_sampler_init / assay_sampler_free.
 */
#ifndef ASSAY_SAMPLER_H
#define ASSAY_SAMPLER_H

#include <stdint.h>

#include "../core/request.h"
#include "../core/status.h"

struct assay_sampler;

/* Scratch for a vocabulary of `vocab` tokens. `mutant` selects a planted
 * bug in mutant builds (0 otherwise). */
enum assay_status assay_sampler_init(struct assay_sampler **out, int32_t vocab, int mutant);
void assay_sampler_free(struct assay_sampler *sampler);

/* Check sampling parameters: temperature finite and >= 0, top_k >= 0,
 * top_p in (0, 1]. */
bool assay_sampling_valid(const struct assay_sampling *s);

/*
 * The processed distribution of logits[vocab] under s, into p[vocab]
 * (sums to 1; removed tokens exactly 0). Temperature 0 gives the one-hot
 * distribution of the argmax (lower id on ties).
 */
void assay_sampler_distribution(struct assay_sampler *sampler, const float *logits,
                                const struct assay_sampling *s, enum assay_sampling_order order,
                                double *p);

/* The token whose CDF interval (in id order) holds u in [0, 1); a token of
 * probability 0 is never returned. */
int32_t assay_sampler_draw(const double *p, int32_t vocab, double u);

/* Index of the largest logit, lower id on ties. */
int32_t assay_sampler_argmax(const float *logits, int32_t vocab);

#endif
