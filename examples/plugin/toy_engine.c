/*
 * toy_engine.c - an example assay plugin: a small engine of its own,
 * loaded by the assay command as
 *
 *     assay verify  --engine plugin:./libtoy_engine.so:cache=on
 *     assay compare plugin:./libtoy_engine.so:cache=off plugin:./libtoy_engine.so:cache=on
 *
 * It needs nothing from assay but its headers (pkg-config --cflags assay):
 * the vtable of <assay/adapters/adapter.h> and the one exported function of
 * <assay/adapters/plugin.h>.
 *
 * The model. Vocabulary 260, a context of `ctx` tokens. The logits for the
 * next token are a fixed pseudo-random function of a state folded over the
 * whole context, state = mix(state ^ token) token by token, with `work`
 * rounds of mixing per folded token standing in for a forward pass. Like a
 * transformer, every token depends on every earlier one, and the cost of a
 * token is the cost of the positions it must fold:
 *
 *   cache=off  fold the whole context again for every generated token
 *              (O(length) per token: a model without a KV cache);
 *   cache=on   keep each request's folded state and fold only the new
 *              token (O(1) per token: the "KV cache"). Same tokens, faster.
 *
 * Up to `batch` requests advance in each step (continuous batching: a
 * finished request's slot is refilled from the queue at the next step).
 * Sampling: greedy (the lowest id among equal logits) or temperature,
 * top-k and top-p in assay's JOINT order (core/request.h), from a
 * per-request random stream that is a pure function of (seed, position),
 * so seeded requests give the same tokens alone or batched.
 *
 * A planted bug for the examples of assay compare: bug=stale-state makes
 * cache=on keep the previous occupant's folded state in a slot that is
 * reused, as an engine that forgets to clear a reused KV slot would. A
 * request that lands in a reused slot then continues someone else's
 * context.
 *
 * Options ("key=value,..."): cache=on|off [on], batch=N [8], work=N [200],
 * ctx=N [1024], requests=N [1024] (live requests), seed=N [1] (the stream
 * of unseeded requests), bug=none|stale-state [none].
 *
 * Capabilities: info, set_logits_sink (the logits of every delivered
 * token, so assay's isolation check compares logits) and last_error. No
 * block accounting: the checks that need it report SKIP.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <assay/adapters/plugin.h>

#define TOY_VOCAB 260

struct toy_params {
    int cache;
    int batch;
    int work;
    int ctx;
    int max_requests;
    unsigned long long seed;
    int bug_stale_state;
};

struct toy_req {
    int live;           /* queued or running */
    int running;
    int aborted;        /* finish with ABORT at the next step */
    uint64_t id;
    int32_t *tokens;    /* (ctx) prompt then generated */
    int32_t prompt_len;
    int32_t n_out;
    int32_t max_tokens;
    int32_t stop_token;
    struct assay_sampling sampling;
    uint64_t seed;
    int slot;           /* running: its batch slot */
    uint64_t order;     /* queue order */
};

struct toy {
    struct toy_params p;
    struct toy_req *reqs;          /* (max_requests) */
    int32_t *token_store;          /* (max_requests, ctx) */
    uint64_t *slot_state;          /* (batch) folded state of the slot's request */
    int32_t *slot_folded;          /* (batch) tokens folded into slot_state */
    int *slot_req;                 /* (batch) request index, -1 free */
    float *logits;                 /* (TOY_VOCAB) */
    double *probs;                 /* (TOY_VOCAB) */
    int32_t *order;                /* (TOY_VOCAB) */
    struct assay_event *events;    /* (2 * max_requests) */
    uint64_t next_order;
    assay_logits_sink sink;
    void *sink_ctx;
    char error[256];
};

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Fold one token into the state: `work` rounds, the cost of a position. */
static uint64_t fold(uint64_t state, int32_t token, int work)
{
    uint64_t s = state ^ ((uint64_t)(uint32_t)token * 0x100000001b3ULL);
    for (int i = 0; i < work; i++) {
        s = mix64(s);
    }
    return s;
}

static void next_logits(uint64_t state, float *logits)
{
    for (int v = 0; v < TOY_VOCAB; v++) {
        uint64_t r = mix64(state ^ (0xd1b54a32d192ed03ULL * (uint64_t)(v + 1)));
        /* 0..8 in steps of 2^-20: a few likely tokens, a long tail */
        logits[v] = (float)((double)(r >> 44) / (double)(1u << 20) * 8.0);
    }
}

static double u01(uint64_t seed, int32_t position)
{
    return (double)(mix64(seed ^ mix64((uint64_t)position + 0x632be59bd9b4e019ULL)) >> 11) *
           0x1.0p-53;
}

/* Greedy, or JOINT temperature / top-k / top-p (core/request.h). */
static int32_t sample(struct toy *t, const float *logits, const struct assay_sampling *s,
                      uint64_t seed, int32_t position)
{
    if (s->temperature <= 0.0f) {
        int32_t best = 0;
        for (int32_t v = 1; v < TOY_VOCAB; v++) {
            if (logits[v] > logits[best]) {
                best = v;
            }
        }
        return best;
    }
    double mx = logits[0];
    for (int32_t v = 1; v < TOY_VOCAB; v++) {
        mx = logits[v] > mx ? logits[v] : mx;
    }
    double sum = 0.0;
    for (int32_t v = 0; v < TOY_VOCAB; v++) {
        t->probs[v] = exp(((double)logits[v] - mx) / s->temperature);
        sum += t->probs[v];
        t->order[v] = v;
    }
    /* descending probability, lower id first among equals (insertion sort
     * of 260 entries: fine for a toy) */
    for (int32_t i = 1; i < TOY_VOCAB; i++) {
        int32_t v = t->order[i];
        int32_t j = i - 1;
        while (j >= 0 && (t->probs[t->order[j]] < t->probs[v] ||
                          (t->probs[t->order[j]] == t->probs[v] && t->order[j] > v))) {
            t->order[j + 1] = t->order[j];
            j--;
        }
        t->order[j + 1] = v;
    }
    int32_t keep = TOY_VOCAB;
    if (s->top_k > 0 && s->top_k < keep) {
        keep = s->top_k;
    }
    if (s->top_p < 1.0f) {
        double mass = 0.0;
        for (int32_t i = 0; i < TOY_VOCAB; i++) {
            mass += t->probs[t->order[i]] / sum;
            if (mass >= s->top_p) {
                keep = i + 1 < keep ? i + 1 : keep;
                break;
            }
        }
    }
    double kept = 0.0;
    for (int32_t i = 0; i < keep; i++) {
        kept += t->probs[t->order[i]];
    }
    double u = u01(seed, position) * kept, acc = 0.0;
    for (int32_t i = 0; i < keep; i++) {
        acc += t->probs[t->order[i]];
        if (u < acc) {
            return t->order[i];
        }
    }
    return t->order[keep - 1];
}

/* ---- options -------------------------------------------------------------- */

static int parse_int(const char *v, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
        return -1;
    }
    *out = x;
    return 0;
}

static enum assay_status parse_options(const char *options, struct toy_params *p, char *err,
                                       size_t size)
{
    *p = (struct toy_params){.cache = 1, .batch = 8, .work = 200, .ctx = 1024,
                             .max_requests = 1024, .seed = 1, .bug_stale_state = 0};
    char buf[512];
    if (strlen(options) >= sizeof buf) {
        snprintf(err, size, "options longer than %zu characters", sizeof buf - 1);
        return ASSAY_ERR_INVALID;
    }
    snprintf(buf, sizeof buf, "%s", options);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        long x = 0;
        int bad = eq == NULL;
        if (!bad) {
            *eq = '\0';
            const char *v = eq + 1;
            if (strcmp(kv, "cache") == 0) {
                bad = strcmp(v, "on") != 0 && strcmp(v, "off") != 0;
                p->cache = strcmp(v, "on") == 0;
            } else if (strcmp(kv, "batch") == 0) {
                bad = parse_int(v, 1, 4096, &x) != 0;
                p->batch = (int)x;
            } else if (strcmp(kv, "work") == 0) {
                bad = parse_int(v, 1, 1000000, &x) != 0;
                p->work = (int)x;
            } else if (strcmp(kv, "ctx") == 0) {
                bad = parse_int(v, 2, 1 << 20, &x) != 0;
                p->ctx = (int)x;
            } else if (strcmp(kv, "requests") == 0) {
                bad = parse_int(v, 1, 1 << 20, &x) != 0;
                p->max_requests = (int)x;
            } else if (strcmp(kv, "seed") == 0) {
                bad = parse_int(v, 0, 0x7fffffffL, &x) != 0;
                p->seed = (unsigned long long)x;
            } else if (strcmp(kv, "bug") == 0) {
                bad = strcmp(v, "none") != 0 && strcmp(v, "stale-state") != 0;
                p->bug_stale_state = strcmp(v, "stale-state") == 0;
            } else {
                snprintf(err, size,
                         "unknown option '%s' (expected cache, batch, work, ctx, requests, seed "
                         "or bug)",
                         kv);
                return ASSAY_ERR_INVALID;
            }
        }
        if (bad) {
            snprintf(err, size, "bad option '%s%s%s'", kv, eq != NULL ? "=" : "",
                     eq != NULL ? eq + 1 : "");
            return ASSAY_ERR_INVALID;
        }
    }
    return ASSAY_OK;
}

/* ---- the vtable ------------------------------------------------------------- */

static enum assay_status toy_add(void *self, const struct assay_request *r)
{
    struct toy *t = self;
    if (r->prompt == NULL || r->prompt_len < 1 || r->max_tokens < 1 ||
        (int64_t)r->prompt_len + r->max_tokens > t->p.ctx) {
        snprintf(t->error, sizeof t->error, "request %llu: empty prompt, max_tokens < 1 or "
                 "longer than the context of %d", (unsigned long long)r->id, t->p.ctx);
        return ASSAY_ERR_INVALID;
    }
    for (int32_t i = 0; i < r->prompt_len; i++) {
        if (r->prompt[i] < 0 || r->prompt[i] >= TOY_VOCAB) {
            snprintf(t->error, sizeof t->error, "request %llu: token %d out of the vocabulary",
                     (unsigned long long)r->id, (int)r->prompt[i]);
            return ASSAY_ERR_INVALID;
        }
    }
    int free_ix = -1;
    for (int i = 0; i < t->p.max_requests; i++) {
        if (t->reqs[i].live && t->reqs[i].id == r->id) {
            snprintf(t->error, sizeof t->error, "request %llu is already live",
                     (unsigned long long)r->id);
            return ASSAY_ERR_DUPLICATE;
        }
        if (!t->reqs[i].live && free_ix < 0) {
            free_ix = i;
        }
    }
    if (free_ix < 0) {
        snprintf(t->error, sizeof t->error, "the queue holds %d requests", t->p.max_requests);
        return ASSAY_ERR_FULL;
    }
    struct toy_req *q = &t->reqs[free_ix];
    int32_t *tokens = q->tokens;
    memset(q, 0, sizeof *q);
    q->tokens = tokens;
    q->live = 1;
    q->id = r->id;
    memcpy(q->tokens, r->prompt, sizeof(int32_t) * (size_t)r->prompt_len);
    q->prompt_len = r->prompt_len;
    q->max_tokens = r->max_tokens;
    q->stop_token = r->stop_token;
    q->sampling = r->sampling;
    q->seed = r->sampling.seeded ? r->sampling.seed : mix64(t->p.seed ^ mix64(r->id));
    q->slot = -1;
    q->order = t->next_order++;
    return ASSAY_OK;
}

static bool toy_has_work(void *self)
{
    struct toy *t = self;
    for (int i = 0; i < t->p.max_requests; i++) {
        if (t->reqs[i].live) {
            return true;
        }
    }
    return false;
}

static void finish(struct toy *t, struct toy_req *q, enum assay_finish_reason why, int64_t now,
                   size_t *n)
{
    t->events[(*n)++] = (struct assay_event){.kind = ASSAY_EVENT_FINISH, .request_id = q->id,
                                             .t_ns = now, .index = q->n_out, .reason = why};
    if (q->running) {
        t->slot_req[q->slot] = -1;
    }
    q->live = 0;
    q->running = 0;
}

static enum assay_status toy_step(void *self, const struct assay_event **events, size_t *n_events)
{
    struct toy *t = self;
    size_t n = 0;
    int64_t now = now_ns();
    /* aborted requests finish first */
    for (int i = 0; i < t->p.max_requests; i++) {
        if (t->reqs[i].live && t->reqs[i].aborted) {
            finish(t, &t->reqs[i], ASSAY_FINISH_ABORT, now, &n);
        }
    }
    /* admit from the queue, oldest first, into free slots */
    for (int s = 0; s < t->p.batch; s++) {
        if (t->slot_req[s] >= 0) {
            continue;
        }
        int pick = -1;
        for (int i = 0; i < t->p.max_requests; i++) {
            const struct toy_req *q = &t->reqs[i];
            if (q->live && !q->running && (pick < 0 || q->order < t->reqs[pick].order)) {
                pick = i;
            }
        }
        if (pick < 0) {
            break;
        }
        t->reqs[pick].running = 1;
        t->reqs[pick].slot = s;
        t->slot_req[s] = pick;
        if (!t->p.bug_stale_state) {
            t->slot_state[s] = 0;
            t->slot_folded[s] = 0;
        } else if (t->slot_folded[s] > 0) {
            /* the planted bug: the previous occupant's state is kept and
             * only the count is reset, so nothing is folded twice */
            t->slot_folded[s] = 0;
        }
    }
    /* one token for every running request */
    for (int s = 0; s < t->p.batch; s++) {
        int i = t->slot_req[s];
        if (i < 0) {
            continue;
        }
        struct toy_req *q = &t->reqs[i];
        int32_t len = q->prompt_len + q->n_out;
        uint64_t state = 0;
        if (t->p.cache) {
            state = t->slot_state[s];
            for (int32_t k = t->slot_folded[s]; k < len; k++) {
                state = fold(state, q->tokens[k], t->p.work);
            }
            t->slot_state[s] = state;
            t->slot_folded[s] = len;
        } else {
            for (int32_t k = 0; k < len; k++) {
                state = fold(state, q->tokens[k], t->p.work);
            }
        }
        next_logits(state, t->logits);
        int32_t tok = sample(t, t->logits, &q->sampling, q->seed, q->n_out);
        if (t->sink != NULL) {
            t->sink(t->sink_ctx, q->id, q->n_out, t->logits, TOY_VOCAB);
        }
        now = now_ns();
        t->events[n++] = (struct assay_event){.kind = ASSAY_EVENT_TOKEN, .request_id = q->id,
                                              .t_ns = now, .token = tok, .index = q->n_out};
        q->tokens[len] = tok;
        q->n_out++;
        if (q->stop_token >= 0 && tok == q->stop_token) {
            finish(t, q, ASSAY_FINISH_STOP, now, &n);
        } else if (q->n_out == q->max_tokens) {
            finish(t, q, ASSAY_FINISH_LENGTH, now, &n);
        }
    }
    *events = t->events;
    *n_events = n;
    return ASSAY_OK;
}

static enum assay_status toy_abort(void *self, uint64_t id)
{
    struct toy *t = self;
    for (int i = 0; i < t->p.max_requests; i++) {
        if (t->reqs[i].live && !t->reqs[i].aborted && t->reqs[i].id == id) {
            t->reqs[i].aborted = 1;
            return ASSAY_OK;
        }
    }
    snprintf(t->error, sizeof t->error, "request %llu is not live", (unsigned long long)id);
    return ASSAY_ERR_NOT_FOUND;
}

static void toy_free(void *self)
{
    struct toy *t = self;
    if (t == NULL) {
        return;
    }
    free(t->reqs);
    free(t->token_store);
    free(t->slot_state);
    free(t->slot_folded);
    free(t->slot_req);
    free(t->logits);
    free(t->probs);
    free(t->order);
    free(t->events);
    free(t);
}

static enum assay_status toy_info(void *self, struct assay_adapter_info *out)
{
    struct toy *t = self;
    out->name = "toy";
    out->spec = "";
    out->model_name = "toy-fold";
    out->weights_sha256 = "";
    out->n_params = 0;
    out->vocab = TOY_VOCAB;
    out->n_ctx = t->p.ctx;
    out->batch_invariant = true; /* a request's logits never see its neighbours */
    out->deterministic_seeds = true;
    out->sampling_order = ASSAY_SAMPLING_JOINT;
    return ASSAY_OK;
}

static enum assay_status toy_set_sink(void *self, assay_logits_sink sink, void *ctx)
{
    struct toy *t = self;
    t->sink = sink;
    t->sink_ctx = ctx;
    return ASSAY_OK;
}

static const char *toy_last_error(void *self)
{
    return ((struct toy *)self)->error;
}

static const struct assay_adapter_vtable k_toy_vt = {
    .abi_version = ASSAY_ADAPTER_ABI_VERSION,
    .name = "toy",
    .add_request = toy_add,
    .has_work = toy_has_work,
    .step = toy_step,
    .abort = toy_abort,
    .free = toy_free,
    .info = toy_info,
    .block_stats = NULL,
    .block_audit = NULL,
    .set_logits_sink = toy_set_sink,
    .check_invariants = NULL,
    .last_error = toy_last_error,
};

/* The one exported function (adapters/plugin.h). */
enum assay_status assay_plugin_open(const char *options, struct assay_adapter *out, char *err,
                                    size_t err_size)
{
    out->vt = NULL;
    out->self = NULL;
    struct toy_params p;
    enum assay_status st = parse_options(options != NULL ? options : "", &p, err, err_size);
    if (st != ASSAY_OK) {
        return st;
    }
    struct toy *t = calloc(1, sizeof *t);
    if (t == NULL) {
        snprintf(err, err_size, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    t->p = p;
    size_t nr = (size_t)p.max_requests, nb = (size_t)p.batch;
    t->reqs = calloc(nr, sizeof *t->reqs);
    t->token_store = calloc(nr * (size_t)p.ctx, sizeof *t->token_store);
    t->slot_state = calloc(nb, sizeof *t->slot_state);
    t->slot_folded = calloc(nb, sizeof *t->slot_folded);
    t->slot_req = calloc(nb, sizeof *t->slot_req);
    t->logits = calloc(TOY_VOCAB, sizeof *t->logits);
    t->probs = calloc(TOY_VOCAB, sizeof *t->probs);
    t->order = calloc(TOY_VOCAB, sizeof *t->order);
    t->events = calloc(2 * nr, sizeof *t->events);
    if (t->reqs == NULL || t->token_store == NULL || t->slot_state == NULL ||
        t->slot_folded == NULL || t->slot_req == NULL || t->logits == NULL || t->probs == NULL ||
        t->order == NULL || t->events == NULL) {
        toy_free(t);
        snprintf(err, err_size, "out of memory for %d requests of %d tokens", p.max_requests,
                 p.ctx);
        return ASSAY_ERR_NOMEM;
    }
    for (size_t i = 0; i < nr; i++) {
        t->reqs[i].tokens = t->token_store + i * (size_t)p.ctx;
    }
    for (size_t s = 0; s < nb; s++) {
        t->slot_req[s] = -1;
    }
    out->vt = &k_toy_vt;
    out->self = t;
    return ASSAY_OK;
}
