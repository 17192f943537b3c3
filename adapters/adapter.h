/*
 * adapter.h - the engine interface: everything assay checks or measures is
 * an adapter, and every check and load generator takes an adapter and
 * nothing else.
 *
 * Three operations drive an engine (as in the load generators of the seed
 * chapter): add_request, has_work and step; abort and free complete the
 * lifecycle. step() never blocks for long: it advances the engine by one
 * iteration (or, for a server, polls its connections) and returns the events
 * that became visible. Optional capabilities are function pointers that may
 * be NULL; a check that needs a missing one reports SKIP with the reason,
 * never PASS.
 *
 * Usage:
 *     struct assay_adapter a;
 *     assay_bundled_open(&params, &a);          // or openai / plugin
 *     a.vt->add_request(a.self, &req);
 *     while (a.vt->has_work(a.self)) {
 *         const struct assay_event *ev; size_t n;
 *         a.vt->step(a.self, &ev, &n);          // ev valid until the next call
 *     }
 *     assay_adapter_close(&a);
 */
#ifndef ASSAY_ADAPTER_H
#define ASSAY_ADAPTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/request.h"
#include "../core/status.h"

#define ASSAY_ADAPTER_ABI_VERSION 1

/* What an adapter says about itself, for stamps and for checks. Strings are
 * borrowed for the adapter's lifetime; any may be empty. */
struct assay_adapter_info {
    const char *name;           /* "bundled", "openai", a plugin's name */
    const char *spec;           /* the engine spec that recreates it */
    const char *model_name;     /* config name or served model */
    const char *weights_sha256; /* hex, when known */
    int64_t n_params;           /* 0 when unknown */
    int32_t vocab;              /* 0 when unknown */
    int32_t n_ctx;              /* 0 when unknown */
    bool batch_invariant;       /* claims bit-identical logits whatever the batch */
    bool deterministic_seeds;   /* the same seed gives the same tokens */
    enum assay_sampling_order sampling_order;
};

/* Called for the logits from which each delivered token was sampled. */
typedef void (*assay_logits_sink)(void *ctx, uint64_t request_id, int32_t index,
                                  const float *logits, int32_t vocab);

struct assay_adapter_vtable {
    uint32_t abi_version; /* ASSAY_ADAPTER_ABI_VERSION */
    const char *name;

    /* Required. Queue a request (the adapter copies what it keeps).
     * ASSAY_ERR_INVALID for a malformed request (empty prompt, token out of
     * the vocabulary, max_tokens <= 0, beyond the context, never fits),
     * ASSAY_ERR_DUPLICATE for a live id, ASSAY_ERR_FULL when the queue is
     * full. On any error the adapter is unchanged. */
    enum assay_status (*add_request)(void *self, const struct assay_request *req);

    /* Required. True while any request has not delivered its FINISH event. */
    bool (*has_work)(void *self);

    /* Required. One iteration. *events points to *n_events events, borrowed
     * until the next call on this adapter. An error status means the adapter
     * itself is broken (not one request): every live request is then
     * finished with ASSAY_FINISH_ERROR by the following steps or by free. */
    enum assay_status (*step)(void *self, const struct assay_event **events, size_t *n_events);

    /* Required. Abort a live request: no later step delivers a TOKEN for
     * it (events of a step already returned were made before the abort),
     * and its FINISH (ABORT) event comes from a later step (a request that
     * had already ended may keep the end it had). ASSAY_ERR_NOT_FOUND if
     * the id is not live. */
    enum assay_status (*abort)(void *self, uint64_t request_id);

    /* Required. Release everything; the adapter must not be used after. */
    void (*free)(void *self);

    /* May be NULL. Describe the adapter (see struct assay_adapter_info). */
    enum assay_status (*info)(void *self, struct assay_adapter_info *out);

    /* May be NULL. Block counts of a paged KV cache. */
    enum assay_status (*block_stats)(void *self, struct assay_block_stats *out);

    /* May be NULL. A full accounting snapshot, borrowed until the next call. */
    enum assay_status (*block_audit)(void *self, struct assay_block_audit *out);

    /* May be NULL. Install (or, with NULL, remove) a logits sink. */
    enum assay_status (*set_logits_sink)(void *self, assay_logits_sink sink, void *ctx);

    /* May be NULL. Run the engine's own internal consistency checks; on
     * failure returns ASSAY_ERR_INTERNAL with a reason in msg. */
    enum assay_status (*check_invariants)(void *self, char *msg, size_t size);

    /* May be NULL. Why the last failing call failed, or "" (borrowed until
     * the next call). */
    const char *(*last_error)(void *self);
};

struct assay_adapter {
    const struct assay_adapter_vtable *vt;
    void *self;
};

/* Free the adapter (NULL-safe) and clear the handle. */
void assay_adapter_close(struct assay_adapter *adapter);

/* Fill info from the adapter, or with "unknown" defaults when the slot is
 * NULL. Never fails. */
void assay_adapter_get_info(const struct assay_adapter *adapter, struct assay_adapter_info *out);

#endif
