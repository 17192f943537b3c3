/*
 * seeded.h - the seeded-sampling sameness check (equivalence family): a
 * request's seed alone decides its sampled tokens.
 *
 * The same seeded, sampled workload runs on several engines (configurations
 * of one engine: alone or batched, with or without KV cache, paging,
 * prefix caching, chunked prefill, preemption) and every seeded request
 * must deliver exactly the same token stream on each. Sampled output is not
 * compared with an oracle here (the distributional family does that); what
 * is checked is that the per-request random stream does not depend on
 * what else is in the batch or on how the engine computes. Unseeded
 * requests take part (they share the steps) but are not compared: their
 * seeds are the engine's business.
 */
#ifndef ASSAY_SEEDED_H
#define ASSAY_SEEDED_H

#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/workload.h"
#include "result.h"

/*
 * Run w on each of adapters[0..n) (n >= 2; names[i] says what each is, for
 * the failure message; both borrowed for the call) and compare the seeded
 * requests' tokens with those of adapters[0]. Every run must also deliver
 * correctly (assay_check_delivery). res gets PASS or FAIL with the first
 * request, position and tokens that differ. Returns ASSAY_OK when a verdict
 * was reached; ASSAY_ERR_INVALID (res ERROR) when w holds no seeded sampled
 * request or n < 2; ASSAY_ERR_NOMEM.
 */
enum assay_status assay_check_seeded_sameness(const struct assay_adapter *const *adapters,
                                              const char *const *names, int32_t n,
                                              const struct assay_workload *w,
                                              struct assay_check_result *res);

/*
 * The same for the bundled engine behind a (engine spec `spec`) against
 * that spec changed to run one request at a time with a contiguous cache,
 * without any KV cache, and batched with a contiguous cache. The variants
 * are opened from the spec, so a must be the bundled engine.
 */
enum assay_status assay_check_seeded_configurations(const struct assay_adapter *a, const char *spec,
                                                    const struct assay_workload *w,
                                                    struct assay_check_result *res);

#endif
