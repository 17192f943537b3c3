/*
 * gate.c - a concurrency limit and end-of-generation continuation in front
 * of another adapter (see gate.h).
 *
 * Each request the caller adds owns a slot: its tokens (prompt, then what
 * was delivered), its counts and its state. A slot is QUEUED until the
 * gate hands it (or its next part) to the inner adapter, INNER while a part
 * runs there, ENDING when its FINISH must be emitted by the gate itself (an
 * abort while queued, a refusal by the inner adapter), RETIRED once its
 * FINISH went out; it is released at the start of the next step, so the
 * FINISH message (kept in the slot) lives until then.
 */
#include "gate.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/rng.h"

enum slot_state {
    G_FREE = 0,
    G_QUEUED,
    G_INNER,
    G_ENDING,
    G_RETIRED,
};

struct slot {
    enum slot_state state;
    uint64_t id;        /* the caller's */
    uint64_t inner_id;  /* of the running part */
    int64_t seq;        /* first come, first served */
    int32_t *tokens;    /* (prompt_len + max_tokens) prompt, then delivered tokens */
    int32_t prompt_len;
    int32_t max_tokens;
    int32_t stop_token; /* the caller's */
    bool continuing;    /* sent with continue_token as its stop token */
    int32_t n_out;      /* delivered so far, over all parts */
    int32_t part_start; /* n_out when the running part was handed in */
    int32_t n_parts;
    struct assay_sampling sampling;
    enum assay_finish_reason reason; /* ENDING */
    int32_t error;
    char message[360];
};

struct gate {
    struct assay_adapter inner;
    struct assay_adapter_vtable vt;
    struct assay_gate_params p;
    struct slot *slots;      /* (p.max_requests) */
    int32_t hwm;             /* slots[hwm..] have never been used */
    int32_t n_inner;         /* parts in the inner adapter */
    int64_t next_seq;
    uint64_t next_inner_id;
    struct assay_event *ev;  /* (ev_cap) this step's events */
    size_t n_ev, ev_cap;
    struct assay_gate_stats stats;
    char last_error[400];
};

static const char *k_gate_name = "gate";

/* ---- events ------------------------------------------------------------- */

static struct assay_event *push(struct gate *g)
{
    if (g->n_ev == g->ev_cap) {
        size_t cap = g->ev_cap > 0 ? 2 * g->ev_cap : 256;
        struct assay_event *ev = assay_realloc(g->ev, cap * sizeof *ev);
        if (ev == NULL) {
            return NULL;
        }
        g->ev = ev;
        g->ev_cap = cap;
    }
    struct assay_event *e = &g->ev[g->n_ev++];
    memset(e, 0, sizeof *e);
    return e;
}

/* Emit the FINISH of slot s with reason r and retire it. */
static enum assay_status finish(struct gate *g, struct slot *s, enum assay_finish_reason r,
                                int32_t error, int64_t t_ns)
{
    struct assay_event *e = push(g);
    if (e == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    e->kind = ASSAY_EVENT_FINISH;
    e->request_id = s->id;
    e->t_ns = t_ns;
    e->index = s->n_out;
    e->reason = r;
    e->error = error;
    e->message = r == ASSAY_FINISH_ERROR ? s->message : NULL;
    s->state = G_RETIRED;
    return ASSAY_OK;
}

/* ---- slots ---------------------------------------------------------------- */

static struct slot *find_live(struct gate *g, uint64_t id)
{
    for (int32_t i = 0; i < g->hwm; i++) {
        struct slot *s = &g->slots[i];
        if (s->state != G_FREE && s->state != G_RETIRED && s->id == id) {
            return s;
        }
    }
    return NULL;
}

static struct slot *find_inner(struct gate *g, uint64_t inner_id)
{
    for (int32_t i = 0; i < g->hwm; i++) {
        struct slot *s = &g->slots[i];
        if (s->state == G_INNER && s->inner_id == inner_id) {
            return s;
        }
    }
    return NULL;
}

static void release(struct slot *s)
{
    assay_free(s->tokens);
    memset(s, 0, sizeof *s);
}

/* The queued slot that came first, or NULL. */
static struct slot *first_queued(struct gate *g)
{
    struct slot *best = NULL;
    for (int32_t i = 0; i < g->hwm; i++) {
        struct slot *s = &g->slots[i];
        if (s->state == G_QUEUED && (best == NULL || s->seq < best->seq)) {
            best = s;
        }
    }
    return best;
}

/* Hand queued parts to the inner adapter while the limit allows. */
static void dispatch(struct gate *g)
{
    while (g->p.max_in_flight == 0 || g->n_inner < g->p.max_in_flight) {
        struct slot *s = first_queued(g);
        if (s == NULL) {
            return;
        }
        struct assay_request r;
        memset(&r, 0, sizeof r);
        r.id = g->next_inner_id++;
        r.prompt = s->tokens;
        r.prompt_len = s->prompt_len + s->n_out;
        r.max_tokens = s->max_tokens - s->n_out;
        r.stop_token = s->continuing ? g->p.continue_token : s->stop_token;
        r.sampling = s->sampling;
        if (s->n_parts > 0 && r.sampling.seeded) {
            /* A fresh stream for the continuation: reusing the seed would
             * replay the draws of the first part. */
            r.sampling.seed = assay_mix64(s->sampling.seed ^ assay_mix64((uint64_t)s->n_out));
        }
        enum assay_status st = g->inner.vt->add_request(g->inner.self, &r);
        if (st == ASSAY_ERR_FULL) {
            return; /* try again after the next step */
        }
        if (st != ASSAY_OK) {
            const char *why = g->inner.vt->last_error != NULL
                                  ? g->inner.vt->last_error(g->inner.self)
                                  : "";
            snprintf(s->message, sizeof s->message, "the engine refused %s: %s%s%.250s",
                     s->n_parts > 0 ? "a continuation" : "the request", assay_status_str(st),
                     why[0] != '\0' ? ": " : "", why);
            s->reason = ASSAY_FINISH_ERROR;
            s->error = st;
            s->state = G_ENDING;
            continue;
        }
        s->inner_id = r.id;
        s->part_start = s->n_out;
        s->state = G_INNER;
        s->n_parts++;
        g->n_inner++;
        g->stats.n_inner++;
        if (g->n_inner > g->stats.max_in_flight) {
            g->stats.max_in_flight = g->n_inner;
        }
    }
}

/* ---- the vtable ------------------------------------------------------------ */

static enum assay_status gate_add(void *self, const struct assay_request *req)
{
    struct gate *g = self;
    if (req->prompt == NULL || req->prompt_len <= 0 || req->max_tokens <= 0) {
        snprintf(g->last_error, sizeof g->last_error,
                 "request %" PRIu64 ": empty prompt or max_tokens <= 0", req->id);
        return ASSAY_ERR_INVALID;
    }
    if (find_live(g, req->id) != NULL) {
        snprintf(g->last_error, sizeof g->last_error, "request %" PRIu64 " is already live",
                 req->id);
        return ASSAY_ERR_DUPLICATE;
    }
    struct slot *s = NULL;
    for (int32_t i = 0; i < g->p.max_requests && s == NULL; i++) {
        if (g->slots[i].state == G_FREE) {
            s = &g->slots[i];
            if (i >= g->hwm) {
                g->hwm = i + 1;
            }
        }
    }
    if (s == NULL) {
        snprintf(g->last_error, sizeof g->last_error, "%d requests are live (max_requests)",
                 (int)g->p.max_requests);
        return ASSAY_ERR_FULL;
    }
    size_t n = (size_t)req->prompt_len + (size_t)req->max_tokens;
    int32_t *tokens = assay_malloc(n * sizeof *tokens);
    if (tokens == NULL) {
        snprintf(g->last_error, sizeof g->last_error, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    memcpy(tokens, req->prompt, (size_t)req->prompt_len * sizeof *tokens);
    memset(s, 0, sizeof *s);
    s->state = G_QUEUED;
    s->id = req->id;
    s->seq = g->next_seq++;
    s->tokens = tokens;
    s->prompt_len = req->prompt_len;
    s->max_tokens = req->max_tokens;
    s->stop_token = req->stop_token;
    s->continuing = g->p.continue_token >= 0 && req->stop_token < 0;
    s->sampling = req->sampling;
    g->stats.n_submitted++;
    return ASSAY_OK;
}

static bool gate_has_work(void *self)
{
    struct gate *g = self;
    for (int32_t i = 0; i < g->hwm; i++) {
        enum slot_state st = g->slots[i].state;
        if (st == G_QUEUED || st == G_INNER || st == G_ENDING) {
            return true;
        }
    }
    return false;
}

/* One event of the inner adapter, translated. */
static enum assay_status translate(struct gate *g, const struct assay_event *x)
{
    struct slot *s = find_inner(g, x->request_id);
    if (s == NULL) {
        return ASSAY_OK; /* not ours (or late): nothing the caller asked for */
    }
    if (x->kind == ASSAY_EVENT_TOKEN) {
        struct assay_event *e = push(g);
        if (e == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        *e = *x;
        e->request_id = s->id;
        e->index = s->part_start + x->index;
        if (e->index >= 0 && e->index < s->max_tokens) {
            s->tokens[s->prompt_len + e->index] = x->token;
        }
        s->n_out++;
        return ASSAY_OK;
    }
    if (x->kind == ASSAY_EVENT_SPEC_ROUND) {
        struct assay_event *e = push(g);
        if (e == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        *e = *x;
        e->request_id = s->id;
        e->index = s->part_start + x->index;
        return ASSAY_OK;
    }
    if (x->kind != ASSAY_EVENT_FINISH) {
        return ASSAY_OK;
    }
    g->n_inner--;
    bool on_token = s->n_out > 0 && s->n_out <= s->max_tokens &&
                    s->tokens[s->prompt_len + s->n_out - 1] == g->p.continue_token;
    if (x->reason == ASSAY_FINISH_STOP && s->continuing && on_token) {
        if (s->n_out < s->max_tokens) {
            s->state = G_QUEUED; /* keeps its place in the queue */
            g->stats.n_continued++;
            return ASSAY_OK;
        }
        return finish(g, s, ASSAY_FINISH_LENGTH, 0, x->t_ns);
    }
    if (x->reason == ASSAY_FINISH_ERROR) {
        snprintf(s->message, sizeof s->message, "%.340s",
                 x->message != NULL ? x->message : "an engine error");
    }
    return finish(g, s, x->reason, x->error, x->t_ns);
}

static enum assay_status gate_step(void *self, const struct assay_event **events, size_t *n_events)
{
    struct gate *g = self;
    g->n_ev = 0;
    *events = g->ev;
    *n_events = 0;
    for (int32_t i = 0; i < g->hwm; i++) {
        if (g->slots[i].state == G_RETIRED) {
            release(&g->slots[i]);
        }
    }
    while (g->hwm > 0 && g->slots[g->hwm - 1].state == G_FREE) {
        g->hwm--;
    }
    dispatch(g);
    enum assay_status st = ASSAY_OK;
    if (g->inner.vt->has_work(g->inner.self)) {
        const struct assay_event *ev = NULL;
        size_t n = 0;
        st = g->inner.vt->step(g->inner.self, &ev, &n);
        for (size_t k = 0; k < n; k++) {
            enum assay_status tst = translate(g, &ev[k]);
            if (tst != ASSAY_OK) {
                st = tst;
                break;
            }
        }
        if (st != ASSAY_OK) {
            const char *why = g->inner.vt->last_error != NULL
                                  ? g->inner.vt->last_error(g->inner.self)
                                  : "";
            snprintf(g->last_error, sizeof g->last_error, "the engine's step failed: %s%s%.300s",
                     assay_status_str(st), why[0] != '\0' ? ": " : "", why);
        }
    }
    int64_t now = assay_now_ns();
    for (int32_t i = 0; i < g->hwm; i++) {
        struct slot *s = &g->slots[i];
        if (s->state == G_ENDING) {
            enum assay_status fst = finish(g, s, s->reason, s->error, now);
            if (fst != ASSAY_OK && st == ASSAY_OK) {
                st = fst;
            }
        }
    }
    *events = g->ev;
    *n_events = g->n_ev;
    return st;
}

static enum assay_status gate_abort(void *self, uint64_t id)
{
    struct gate *g = self;
    struct slot *s = find_live(g, id);
    if (s == NULL) {
        snprintf(g->last_error, sizeof g->last_error, "request %" PRIu64 " is not live", id);
        return ASSAY_ERR_NOT_FOUND;
    }
    if (s->state == G_QUEUED) {
        s->reason = ASSAY_FINISH_ABORT;
        s->error = 0;
        s->state = G_ENDING;
    } else if (s->state == G_INNER) {
        enum assay_status st = g->inner.vt->abort(g->inner.self, s->inner_id);
        if (st != ASSAY_OK && st != ASSAY_ERR_NOT_FOUND) {
            return st;
        }
    }
    return ASSAY_OK;
}

static void gate_free(void *self)
{
    struct gate *g = self;
    if (g == NULL) {
        return;
    }
    /* Leave the inner adapter idle for its next user. */
    for (int32_t i = 0; i < g->hwm; i++) {
        if (g->slots[i].state == G_INNER) {
            g->inner.vt->abort(g->inner.self, g->slots[i].inner_id);
        }
    }
    int64_t t0 = assay_now_ns();
    while (g->inner.vt->has_work(g->inner.self) && assay_now_ns() - t0 < 10 * 1000000000LL) {
        const struct assay_event *ev = NULL;
        size_t n = 0;
        if (g->inner.vt->step(g->inner.self, &ev, &n) != ASSAY_OK) {
            break;
        }
    }
    for (int32_t i = 0; i < g->p.max_requests; i++) {
        assay_free(g->slots[i].tokens);
    }
    assay_free(g->slots);
    assay_free(g->ev);
    assay_free(g);
}

static enum assay_status gate_info(void *self, struct assay_adapter_info *out)
{
    struct gate *g = self;
    assay_adapter_get_info(&g->inner, out);
    return ASSAY_OK;
}

static const char *gate_last_error(void *self)
{
    struct gate *g = self;
    if (g->last_error[0] != '\0') {
        return g->last_error;
    }
    return g->inner.vt->last_error != NULL ? g->inner.vt->last_error(g->inner.self) : "";
}

/* ---- opening ------------------------------------------------------------------ */

struct assay_gate_params assay_gate_default_params(void)
{
    struct assay_gate_params p;
    memset(&p, 0, sizeof p);
    p.max_in_flight = 0;
    p.continue_token = -1;
    p.max_requests = 65536;
    return p;
}

enum assay_status assay_gate_open(const struct assay_adapter *inner,
                                  const struct assay_gate_params *params,
                                  struct assay_adapter *out)
{
    out->vt = NULL;
    out->self = NULL;
    if (inner == NULL || inner->vt == NULL || inner->vt->add_request == NULL ||
        inner->vt->has_work == NULL || inner->vt->step == NULL || inner->vt->abort == NULL ||
        params == NULL || params->max_in_flight < 0 || params->continue_token < -1 ||
        params->max_requests < 1 || params->max_requests > (1 << 24)) {
        return ASSAY_ERR_INVALID;
    }
    struct gate *g = assay_calloc(1, sizeof *g);
    if (g == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    g->slots = assay_calloc((size_t)params->max_requests, sizeof *g->slots);
    if (g->slots == NULL) {
        assay_free(g);
        return ASSAY_ERR_NOMEM;
    }
    g->inner = *inner;
    g->p = *params;
    g->next_inner_id = 1;
    memset(&g->vt, 0, sizeof g->vt);
    g->vt.abi_version = ASSAY_ADAPTER_ABI_VERSION;
    g->vt.name = k_gate_name;
    g->vt.add_request = gate_add;
    g->vt.has_work = gate_has_work;
    g->vt.step = gate_step;
    g->vt.abort = gate_abort;
    g->vt.free = gate_free;
    g->vt.info = gate_info;
    g->vt.last_error = gate_last_error;
    out->vt = &g->vt;
    out->self = g;
    return ASSAY_OK;
}

enum assay_status assay_gate_get_stats(const struct assay_adapter *gate,
                                       struct assay_gate_stats *out)
{
    if (gate == NULL || gate->vt == NULL || gate->vt->name != k_gate_name || gate->self == NULL) {
        return ASSAY_ERR_INVALID;
    }
    *out = ((const struct gate *)gate->self)->stats;
    return ASSAY_OK;
}
