/*
 * gate.h - an adapter in front of another adapter, for auditing a server
 * the way the checks need it run:
 *
 *  - a concurrency limit: at most max_in_flight requests are handed to the
 *    inner adapter at once; the others wait in the gate, first come first
 *    served (so "each request alone" is max_in_flight 1, whatever the
 *    workload's arrivals say, and concurrency 2, 4, 8 are as many);
 *  - end-of-generation continuation: a server such as llama-server either
 *    stops on its end-of-generation token or, told to ignore it, never
 *    emits it (a -inf logit bias), while assay's oracle treats that token
 *    like any other. With continue_token set to the server's EOS, a request
 *    without a stop token of its own is sent with EOS as its stop token
 *    (so the server samples EOS with its true probability); when the
 *    server stops there before max_tokens, the gate sends a continuation:
 *    the prompt followed by every token so far (EOS included), the
 *    remaining max_tokens, and, for a seeded request, a seed derived from
 *    the original seed and the position. The caller sees one request that
 *    delivers exactly max_tokens tokens and finishes with LENGTH, its
 *    tokens drawn from the same conditionals the oracle computes.
 *
 * Ids: the gate gives the inner adapter ids of its own (one per part), and
 * translates every event back; TOKEN indices count over the parts.
 * Everything else of a request (prompt, max_tokens, stop token, sampling)
 * is passed through. A FINISH that the inner adapter reports is passed
 * through with the total count (STOP becomes LENGTH only for a continued
 * request that reached max_tokens exactly on the continuation token).
 *
 * Capabilities: info and last_error come from the inner adapter (info is
 * the inner's unchanged); block statistics, logits and invariant checks
 * are NULL (they would describe the inner engine, not what the gate shows).
 *
 * Allocation: add_request copies the prompt (with room for the output);
 * step() may grow the gate's event array.
 *
 * Lifetime: assay_gate_open / assay_adapter_close. The inner adapter is
 * borrowed: it must outlive the gate, and the gate must be its only user
 * while the gate lives. Closing the gate aborts what it still has in the
 * inner adapter and drains it, so the inner adapter can be used again.
 */
#ifndef ASSAY_GATE_H
#define ASSAY_GATE_H

#include <stdbool.h>
#include <stdint.h>

#include "adapter.h"

struct assay_gate_params {
    int32_t max_in_flight;  /* requests in the inner adapter at once; 0: no limit */
    int32_t continue_token; /* -1: off; else the token to continue after (see above) */
    int32_t max_requests;   /* live requests the gate accepts (default 65536) */
};

/* No limit, no continuation, 65536 requests. */
struct assay_gate_params assay_gate_default_params(void);

/*
 * Open a gate in front of inner. ASSAY_ERR_INVALID for a bad parameter or
 * an inner adapter without the required operations, ASSAY_ERR_NOMEM; on
 * failure *out is cleared.
 */
enum assay_status assay_gate_open(const struct assay_adapter *inner,
                                  const struct assay_gate_params *params,
                                  struct assay_adapter *out);

struct assay_gate_stats {
    int64_t n_submitted;    /* requests accepted by add_request */
    int64_t n_inner;        /* requests handed to the inner adapter (parts) */
    int64_t n_continued;    /* continuations sent after the continuation token */
    int32_t max_in_flight;  /* the most parts in the inner adapter at once */
};

/* Fill *out; ASSAY_ERR_INVALID when the adapter is not a gate. */
enum assay_status assay_gate_get_stats(const struct assay_adapter *gate,
                                       struct assay_gate_stats *out);

#endif
