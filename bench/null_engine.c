/*
 * null_engine.c - an adapter that answers at once (null_engine.h): each
 * request yields all its tokens and its FINISH in the next step, within a
 * capacity fixed at assay_null_engine_open, refusing with ASSAY_ERR_FULL
 * beyond it. A timing device with no model, used by the tests and by
 * suites/bench_loadgen to measure the load generator itself.
 */
#include "null_engine.h"

#include <stdio.h>

#include "../core/alloc.h"
#include "../core/clock.h"

/* Pending requests live in `pending` (in hand-in order) and are found by id
 * through an open-addressing table of twice max_requests slots, which is
 * emptied whole at every step (every pending request finishes then). */
struct pending {
    uint64_t id;
    int32_t max_tokens;
    int32_t slot;   /* its place in table; slots never move between steps */
    bool aborted;
};

struct null_engine {
    struct assay_null_engine_params p;
    struct pending *pending;   /* (max_requests) */
    int32_t n_pending;
    int64_t n_pending_events;  /* sum of max_tokens + 1 over pending */
    int32_t *table;            /* (n_slots) index into pending, -1 = empty */
    int32_t n_slots;
    struct assay_event *events; /* (max_events) */
    char error[160];
};

static uint32_t slot_of(const struct null_engine *e, uint64_t id)
{
    uint64_t h = id * 0x9e3779b97f4a7c15ull;
    return (uint32_t)((h >> 32) % (uint64_t)e->n_slots);
}

/* The index into pending of id, or -1; *slot is where it is or would go. */
static int32_t find(const struct null_engine *e, uint64_t id, int32_t *slot)
{
    int32_t s = (int32_t)slot_of(e, id);
    while (e->table[s] >= 0) {
        if (e->pending[e->table[s]].id == id) {
            *slot = s;
            return e->table[s];
        }
        s = s + 1 == e->n_slots ? 0 : s + 1;
    }
    *slot = s;
    return -1;
}

static enum assay_status n_add(void *self, const struct assay_request *req)
{
    struct null_engine *e = self;
    e->error[0] = '\0';
    if (req == NULL || req->prompt == NULL || req->prompt_len < 1 || req->max_tokens < 1) {
        snprintf(e->error, sizeof e->error, "a request needs a prompt and max_tokens >= 1");
        return ASSAY_ERR_INVALID;
    }
    int32_t slot = 0;
    if (find(e, req->id, &slot) >= 0) {
        snprintf(e->error, sizeof e->error, "request %llu is already pending",
                 (unsigned long long)req->id);
        return ASSAY_ERR_DUPLICATE;
    }
    int64_t need = (int64_t)req->max_tokens + 1;
    if (e->n_pending >= e->p.max_requests || e->n_pending_events + need > e->p.max_events) {
        snprintf(e->error, sizeof e->error, "full: %d requests pending, %lld events queued",
                 (int)e->n_pending, (long long)e->n_pending_events);
        return ASSAY_ERR_FULL;
    }
    e->pending[e->n_pending] =
        (struct pending){.id = req->id, .max_tokens = req->max_tokens, .slot = slot};
    e->table[slot] = e->n_pending;
    e->n_pending++;
    e->n_pending_events += need;
    return ASSAY_OK;
}

static bool n_has_work(void *self)
{
    return ((struct null_engine *)self)->n_pending > 0;
}

static enum assay_status n_step(void *self, const struct assay_event **events, size_t *n_events)
{
    struct null_engine *e = self;
    size_t n = 0;
    for (int32_t i = 0; i < e->n_pending; i++) {
        const struct pending *q = &e->pending[i];
        int32_t n_tokens = q->aborted ? 0 : q->max_tokens;
        for (int32_t k = 0; k < n_tokens; k++) {
            e->events[n++] = (struct assay_event){
                .kind = ASSAY_EVENT_TOKEN,
                .request_id = q->id,
                .token = (int32_t)((q->id + (uint64_t)k) % 256u),
                .index = k,
            };
        }
        e->events[n++] = (struct assay_event){
            .kind = ASSAY_EVENT_FINISH,
            .request_id = q->id,
            .index = n_tokens,
            .reason = q->aborted ? ASSAY_FINISH_ABORT : ASSAY_FINISH_LENGTH,
        };
        e->table[q->slot] = -1;
    }
    /* Every pending request is emptied from the table at once, so no probe
     * chain is cut while it is still needed. */
    e->n_pending = 0;
    e->n_pending_events = 0;
    int64_t now = assay_now_ns();
    for (size_t i = 0; i < n; i++) {
        e->events[i].t_ns = now;
    }
    *events = e->events;
    *n_events = n;
    return ASSAY_OK;
}

static enum assay_status n_abort(void *self, uint64_t request_id)
{
    struct null_engine *e = self;
    int32_t slot = 0;
    int32_t i = find(e, request_id, &slot);
    if (i < 0 || e->pending[i].aborted) {
        snprintf(e->error, sizeof e->error, "abort: request %llu is not live",
                 (unsigned long long)request_id);
        return ASSAY_ERR_NOT_FOUND;
    }
    e->pending[i].aborted = true;
    return ASSAY_OK;
}

static void n_free(void *self)
{
    struct null_engine *e = self;
    if (e == NULL) {
        return;
    }
    assay_free(e->pending);
    assay_free(e->table);
    assay_free(e->events);
    assay_free(e);
}

static enum assay_status n_info(void *self, struct assay_adapter_info *out)
{
    (void)self;
    out->name = "null";
    out->spec = "null";
    out->model_name = "none";
    out->weights_sha256 = "";
    out->n_params = 0;
    out->vocab = 0;
    out->n_ctx = 0;
    out->batch_invariant = true;
    out->deterministic_seeds = true;
    out->sampling_order = ASSAY_SAMPLING_JOINT;
    return ASSAY_OK;
}

static const char *n_last_error(void *self)
{
    return ((struct null_engine *)self)->error;
}

static const struct assay_adapter_vtable k_null_vt = {
    .abi_version = ASSAY_ADAPTER_ABI_VERSION,
    .name = "null",
    .add_request = n_add,
    .has_work = n_has_work,
    .step = n_step,
    .abort = n_abort,
    .free = n_free,
    .info = n_info,
    .last_error = n_last_error,
};

struct assay_null_engine_params assay_null_engine_default_params(void)
{
    struct assay_null_engine_params p = {.max_requests = 1024, .max_events = 65536};
    return p;
}

enum assay_status assay_null_engine_open(const struct assay_null_engine_params *params,
                                         struct assay_adapter *out)
{
    out->vt = NULL;
    out->self = NULL;
    if (params == NULL || params->max_requests < 1 || params->max_requests > (1 << 29) ||
        params->max_events < 2) {
        return ASSAY_ERR_INVALID;
    }
    struct null_engine *e = assay_calloc(1, sizeof *e);
    if (e == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    e->p = *params;
    e->n_slots = 2 * params->max_requests;
    e->pending = assay_calloc((size_t)params->max_requests, sizeof *e->pending);
    e->table = assay_malloc(sizeof(int32_t) * (size_t)e->n_slots);
    e->events = assay_calloc((size_t)params->max_events, sizeof *e->events);
    if (e->pending == NULL || e->table == NULL || e->events == NULL) {
        n_free(e);
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t i = 0; i < e->n_slots; i++) {
        e->table[i] = -1;
    }
    out->vt = &k_null_vt;
    out->self = e;
    return ASSAY_OK;
}
