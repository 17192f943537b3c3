/*
 * harness.c - the one loop that drives an engine (harness.h):
 * assay_harness_run submits each request at its arrival step, aborts it after
 * abort_after tokens, steps the adapter and records every event as it came
 * in a transcript (assay_transcript_free releases it), ending with an error
 * when the engine stalls. Every check that runs a workload goes through it;
 * in a check's child process it also leaves breadcrumbs for isolate.c.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/rng.h"

/* Set only in a check's child process (assay_harness_set_crumb). */
static volatile struct assay_crumb *g_crumb;

void assay_harness_set_crumb(volatile struct assay_crumb *c)
{
    g_crumb = c;
}

static void crumb_engine(int32_t in_engine)
{
    if (g_crumb != NULL) {
        g_crumb->in_engine = in_engine;
    }
}

struct run {
    struct assay_transcript *t;
    const struct assay_workload *w;
    int32_t *map;     /* open addressing: request index, -1 empty */
    int32_t map_size;
    bool settle_aborts; /* an abort was accepted while this step's events were read */
};

static int32_t find_req(const struct run *r, uint64_t id)
{
    int32_t mask = r->map_size - 1;
    for (int32_t i = (int32_t)(assay_mix64(id) & (uint64_t)mask); r->map[i] >= 0; i = (i + 1) & mask) {
        if (r->w->reqs[r->map[i]].id == id) {
            return r->map[i];
        }
    }
    return -1;
}

static void on_logits(void *ctx, uint64_t id, int32_t index, const float *logits, int32_t vocab)
{
    struct run *r = ctx;
    int32_t i = find_req(r, id);
    if (i < 0 || vocab != r->t->vocab || index < 0 || index >= r->w->reqs[i].max_tokens) {
        return;
    }
    struct assay_transcript_req *q = &r->t->reqs[i];
    memcpy(q->logits + (int64_t)index * vocab, logits, sizeof(float) * (size_t)vocab);
    q->has_logits[index] = true;
}

void assay_transcript_free(struct assay_transcript *t)
{
    if (t == NULL) {
        return;
    }
    if (t->reqs != NULL && t->n > 0) {
        /* Arrays of every request live in pools owned by request 0. */
        assay_free(t->reqs[0].tokens);
        assay_free(t->reqs[0].index);
        assay_free(t->reqs[0].t_ns);
        assay_free(t->reqs[0].spec_accept_hist);
        assay_free(t->reqs[0].logits);
        assay_free(t->reqs[0].has_logits);
    }
    assay_free(t->reqs);
    assay_free(t);
}

static enum assay_status alloc_transcript(struct run *r, const struct assay_harness_opts *o,
                                          int32_t vocab)
{
    const struct assay_workload *w = r->w;
    struct assay_transcript *t = assay_calloc(1, sizeof *t);
    if (t == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    r->t = t;
    t->n = w->n;
    t->reqs = assay_calloc((size_t)(w->n > 0 ? w->n : 1), sizeof *t->reqs);
    if (t->reqs == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    int64_t cap_total = 0, out_total = 0;
    for (int32_t i = 0; i < w->n; i++) {
        /* Room for every token twice over, so a duplicating engine is seen. */
        t->reqs[i].cap = 2 * w->reqs[i].max_tokens + 16;
        cap_total += t->reqs[i].cap;
        out_total += w->reqs[i].max_tokens;
    }
    int32_t hist = o->spec_k > 0 ? o->spec_k + 2 : 0;
    int32_t *tokens = assay_calloc((size_t)cap_total + 1, sizeof(int32_t));
    int32_t *index = assay_calloc((size_t)cap_total + 1, sizeof(int32_t));
    int64_t *t_ns = assay_calloc((size_t)cap_total + 1, sizeof(int64_t));
    int32_t *hists = hist > 0 ? assay_calloc((size_t)w->n * (size_t)hist + 1, sizeof(int32_t)) : NULL;
    float *logits = vocab > 0 ? assay_calloc((size_t)out_total * (size_t)vocab + 1, sizeof(float)) : NULL;
    bool *has = vocab > 0 ? assay_calloc((size_t)out_total + 1, sizeof(bool)) : NULL;
    if (w->n > 0) {
        t->reqs[0].tokens = tokens;
        t->reqs[0].index = index;
        t->reqs[0].t_ns = t_ns;
        t->reqs[0].spec_accept_hist = hists;
        t->reqs[0].logits = logits;
        t->reqs[0].has_logits = has;
    } else {
        assay_free(tokens);
        assay_free(index);
        assay_free(t_ns);
        assay_free(hists);
        assay_free(logits);
        assay_free(has);
        return ASSAY_OK;
    }
    if (tokens == NULL || index == NULL || t_ns == NULL || (hist > 0 && hists == NULL) ||
        (vocab > 0 && (logits == NULL || has == NULL))) {
        return ASSAY_ERR_NOMEM;
    }
    int64_t off = 0, out_off = 0;
    for (int32_t i = 0; i < w->n; i++) {
        struct assay_transcript_req *q = &t->reqs[i];
        q->id = w->reqs[i].id;
        q->tokens = tokens + off;
        q->index = index + off;
        q->t_ns = t_ns + off;
        off += q->cap;
        if (hist > 0) {
            q->spec_accept_hist = hists + (int64_t)i * hist;
        }
        if (vocab > 0) {
            q->logits = logits + out_off * vocab;
            q->has_logits = has + out_off;
            out_off += w->reqs[i].max_tokens;
        }
        q->reason = ASSAY_FINISH_NONE;
        q->n_at_abort = -1;
    }
    if (vocab > 0) {
        for (int64_t i = 0; i < out_total * vocab; i++) {
            logits[i] = NAN;
        }
    }
    t->vocab = vocab;
    t->logits_captured = vocab > 0;
    return ASSAY_OK;
}

static void record(struct run *r, const struct assay_adapter *a, const struct assay_event *ev,
                   int32_t hist)
{
    int32_t i = find_req(r, ev->request_id);
    if (i < 0) {
        r->t->n_unknown_events++;
        return;
    }
    struct assay_transcript_req *q = &r->t->reqs[i];
    switch (ev->kind) {
    case ASSAY_EVENT_TOKEN:
        if (q->n_events < q->cap) {
            q->tokens[q->n_events] = ev->token;
            q->index[q->n_events] = ev->index;
            q->t_ns[q->n_events] = ev->t_ns;
        }
        q->n_events++;
        {
            int32_t abort_after = r->w->reqs[i].abort_after;
            if (abort_after >= 0 && q->n_events >= abort_after && !q->aborted && q->n_finish == 0) {
                /* Aborted only if the adapter took the abort: a request that
                 * finished in this same step is not live any more, and is
                 * then judged as one that ran to its end. */
                crumb_engine(1);
                q->aborted = a->vt->abort(a->self, q->id) == ASSAY_OK;
                crumb_engine(0);
                /* The step's later events for it were made before the
                 * abort: its count is settled when the step's events end. */
                r->settle_aborts |= q->aborted;
            }
        }
        break;
    case ASSAY_EVENT_FINISH:
        q->n_finish++;
        q->reason = ev->reason;
        q->finish_index = ev->index;
        q->error = ev->error;
        q->t_finish_ns = ev->t_ns;
        if (ev->message != NULL) {
            snprintf(q->message, sizeof q->message, "%s", ev->message);
        }
        break;
    case ASSAY_EVENT_SPEC_ROUND:
        q->spec_rounds++;
        q->spec_drafted += ev->n_drafted;
        q->spec_accepted += ev->n_accepted;
        if (hist > 0) {
            int32_t k = ev->n_accepted < hist - 1 ? ev->n_accepted : hist - 1;
            q->spec_accept_hist[k < 0 ? 0 : k]++;
        }
        break;
    }
}

/* Submit the requests from next on whose arrival step has come; returns
 * the index of the first one not submitted. */
static int32_t submit_arrivals(const struct assay_adapter *a, const struct assay_workload *w,
                               struct assay_transcript *t, int64_t step, int32_t next)
{
    while (next < w->n && w->reqs[next].arrival_step <= step) {
        const struct assay_workload_request *wr = &w->reqs[next];
        struct assay_request req = {wr->id,         wr->prompt,     wr->prompt_len,
                                    wr->max_tokens, wr->stop_token, wr->sampling};
        struct assay_transcript_req *q = &t->reqs[next];
        q->t_submit_ns = assay_now_ns();
        crumb_engine(1);
        q->submit_status = a->vt->add_request(a->self, &req);
        crumb_engine(0);
        q->submitted = true;
        q->submit_step = step;
        next++;
        if (g_crumb != NULL) {
            g_crumb->submitted = next;
        }
    }
    return next;
}

/* Abort each of the first n_submitted requests whose abort_step has come,
 * in whatever phase it is now (queued, prefilling, mid-chunk, decoding,
 * preempted), and note how many events it had then. */
static void abort_due(const struct assay_adapter *a, const struct assay_workload *w,
                      struct assay_transcript *t, int64_t step, int32_t n_submitted)
{
    for (int32_t i = 0; i < n_submitted; i++) {
        struct assay_transcript_req *q = &t->reqs[i];
        int32_t after = w->reqs[i].abort_step;
        if (after >= 0 && step - q->submit_step >= after && !q->aborted && q->n_finish == 0 &&
            q->submit_status == ASSAY_OK) {
            crumb_engine(1);
            q->aborted = a->vt->abort(a->self, q->id) == ASSAY_OK;
            crumb_engine(0);
            if (q->aborted) {
                q->n_at_abort = q->n_events;
            }
        }
    }
}

enum assay_status assay_harness_run(const struct assay_adapter *a, const struct assay_workload *w,
                                    const struct assay_harness_opts *opts,
                                    struct assay_transcript **out)
{
    *out = NULL;
    struct assay_harness_opts o;
    memset(&o, 0, sizeof o);
    if (opts != NULL) {
        o = *opts;
    }
    struct run r = {.t = NULL, .w = w, .map = NULL, .map_size = 1};
    while (r.map_size < 2 * w->n + 2) {
        r.map_size *= 2;
    }
    int32_t vocab = 0;
    if (o.capture_logits && a->vt->set_logits_sink != NULL) {
        struct assay_adapter_info info;
        assay_adapter_get_info(a, &info);
        vocab = info.vocab;
    }
    r.map = assay_calloc((size_t)r.map_size, sizeof(int32_t));
    enum assay_status st = r.map != NULL ? alloc_transcript(&r, &o, vocab) : ASSAY_ERR_NOMEM;
    if (st != ASSAY_OK) {
        assay_free(r.map);
        assay_transcript_free(r.t);
        return st;
    }
    for (int32_t i = 0; i < r.map_size; i++) {
        r.map[i] = -1;
    }
    int64_t work = 0;
    for (int32_t i = 0; i < w->n; i++) {
        int32_t mask = r.map_size - 1;
        int32_t j = (int32_t)(assay_mix64(w->reqs[i].id) & (uint64_t)mask);
        while (r.map[j] >= 0) {
            j = (j + 1) & mask;
        }
        r.map[j] = i;
        work += w->reqs[i].prompt_len + w->reqs[i].max_tokens;
    }
    int64_t max_steps = o.max_steps > 0 ? o.max_steps : 4 * work + 16LL * w->n + 1000;
    int64_t last_event_ns = assay_now_ns();
    if (vocab > 0) {
        a->vt->set_logits_sink(a->self, on_logits, &r);
    }
    struct assay_transcript *t = r.t;
    int32_t hist = o.spec_k > 0 ? o.spec_k + 2 : 0;
    int32_t next = 0;
    int64_t step = 0;
    bool by_step = false; /* some request is aborted after a number of steps */
    for (int32_t i = 0; i < w->n; i++) {
        by_step |= w->reqs[i].abort_step >= 0;
    }
    t->status = ASSAY_OK;
    if (g_crumb != NULL) {
        g_crumb->runs++;
        g_crumb->step = 0;
        g_crumb->n_requests = w->n;
        g_crumb->submitted = 0;
        g_crumb->finished = 0;
    }
    for (;;) {
        next = submit_arrivals(a, w, t, step, next);
        if (!a->vt->has_work(a->self)) {
            if (next >= w->n) {
                break;
            }
            step = w->reqs[next].arrival_step;
            continue;
        }
        if (by_step) {
            abort_due(a, w, t, step, next);
        }
        const struct assay_event *ev;
        size_t n_ev = 0;
        if (g_crumb != NULL) {
            g_crumb->step = step;
        }
        crumb_engine(1);
        enum assay_status sst = a->vt->step(a->self, &ev, &n_ev);
        crumb_engine(0);
        if (n_ev > 0) {
            last_event_ns = assay_now_ns();
        }
        for (size_t i = 0; i < n_ev; i++) {
            record(&r, a, &ev[i], hist);
            if (g_crumb != NULL && ev[i].kind == ASSAY_EVENT_FINISH) {
                g_crumb->finished++;
            }
        }
        if (r.settle_aborts) {
            for (int32_t i = 0; i < next; i++) {
                struct assay_transcript_req *q = &t->reqs[i];
                if (q->aborted && q->n_at_abort < 0) {
                    q->n_at_abort = q->n_events;
                }
            }
            r.settle_aborts = false;
        }
        if (sst != ASSAY_OK) {
            t->status = sst;
            const char *why = a->vt->last_error != NULL ? a->vt->last_error(a->self) : "";
            snprintf(t->error, sizeof t->error, "step %lld failed: %s%s%s", (long long)step,
                     assay_status_str(sst), why[0] != '\0' ? ": " : "", why);
            break;
        }
        step++;
        if (o.hook != NULL) {
            char msg[256] = "";
            enum assay_status hst = o.hook(o.hook_ctx, a, step, msg, sizeof msg);
            if (hst != ASSAY_OK) {
                t->status = hst;
                snprintf(t->error, sizeof t->error, "after step %lld: %s", (long long)step, msg);
                break;
            }
        }
        if (step > max_steps) {
            double silent_s = (double)(assay_now_ns() - last_event_ns) / 1e9;
            if (silent_s >= (o.silence_s > 0 ? o.silence_s : ASSAY_HARNESS_SILENCE_S) ||
                step > 64 * max_steps) {
                t->status = ASSAY_ERR_TIMEOUT;
                snprintf(t->error, sizeof t->error,
                         "no end after %lld steps (the workload needs far fewer), the last event "
                         "%.0f s ago: the engine is not making progress",
                         (long long)step, silent_s);
                break;
            }
        }
    }
    t->n_steps = step;
    if (vocab > 0) {
        a->vt->set_logits_sink(a->self, NULL, NULL);
    }
    assay_free(r.map);
    *out = t;
    return ASSAY_OK;
}
