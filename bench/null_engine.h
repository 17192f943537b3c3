/*
 * null_engine.h - an adapter that answers instantly, to measure the load
 * generator itself.
 *
 * Every request handed in yields all of its max_tokens tokens and its
 * FINISH (reason LENGTH) in the next step, stamped with the time that step
 * ended; an aborted request yields only its FINISH (ABORT). The prompt's
 * content and the stop token are ignored: this is a timing device, not a
 * model. Token ids are (request id + index) mod 256.
 *
 * Capacity is fixed when it is opened, and nothing is allocated after:
 * add_request returns ASSAY_ERR_FULL when max_requests are already pending,
 * or when the next step's events (max_tokens + 1 per pending request) would
 * not fit in max_events. That makes it a convenient way to test what a load
 * generator does with a refusal.
 *
 * Lifetime: assay_null_engine_open allocates; assay_adapter_close (the
 * vtable's free) releases.
 */
#ifndef ASSAY_NULL_ENGINE_H
#define ASSAY_NULL_ENGINE_H

#include <stdint.h>

#include "../adapters/adapter.h"

struct assay_null_engine_params {
    int32_t max_requests; /* pending requests at once; >= 1 */
    int64_t max_events;   /* events one step can return; >= 2 */
};

/* max_requests 1024, max_events 65536. */
struct assay_null_engine_params assay_null_engine_default_params(void);

/*
 * Open a null engine as an adapter. Its add_request validates like any
 * adapter (ASSAY_ERR_INVALID for a NULL or empty prompt or max_tokens < 1,
 * ASSAY_ERR_DUPLICATE for a pending id, ASSAY_ERR_FULL as above); its
 * info() names it "null". Returns ASSAY_ERR_INVALID for bad params,
 * ASSAY_ERR_NOMEM; on failure *out is cleared.
 */
enum assay_status assay_null_engine_open(const struct assay_null_engine_params *params,
                                         struct assay_adapter *out);

#endif
