/*
 * probe.h - the batch-invariance probe that test_engine and
 * test_portability share: request 1 (a 40-token prompt, 24 greedy tokens)
 * on the bundled engine, alone or among 12 neighbours of other lengths
 * (10 to 76 prompt tokens, 30 tokens each) that join the same steps, its
 * tokens and the logits it was sampled from captured.
 */
#ifndef ASSAY_TEST_PROBE_H
#define ASSAY_TEST_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"

#define ASSAY_PROBE_TOKENS 24
#define ASSAY_PROBE_VOCAB 260

struct assay_probe {
    float logits[ASSAY_PROBE_TOKENS][ASSAY_PROBE_VOCAB];
    int32_t tokens[ASSAY_PROBE_TOKENS];
    bool seen[ASSAY_PROBE_TOKENS];
};

/* Run the probe on an engine made from p (max_seq_len is set to 256; the
 * rest as given), alone or in the crowd, into *out. Fails the running
 * cmocka test (or, outside one, exits) if the engine refuses anything or
 * a logit row is missing. */
void assay_probe_run(const struct assay_engine_params *p, bool crowd, struct assay_probe *out);

/* Largest |a - b| over the probes' logits (NaN if any differs as NaN);
 * *tokens_differ (may be NULL) when a token does. */
double assay_probe_max_diff(const struct assay_probe *a, const struct assay_probe *b,
                            bool *tokens_differ);

/* Whether the two probes' logits are the same bits. */
bool assay_probe_same_bits(const struct assay_probe *a, const struct assay_probe *b);

/* FNV-1a of the logits' bytes: the same bits give the same hash. */
uint64_t assay_probe_hash(const struct assay_probe *p);

/* On mini-twins (engine/model.h): how many of the probe's positions times
 * token pairs (2i, 2i + 1) have logits whose bits differ. */
int64_t assay_probe_unequal_twins(const struct assay_probe *p);

#endif
