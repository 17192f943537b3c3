/*
 * trace.c - trace consistency (trace.h): assay_trace_check_workload judges
 * the requests going into an engine and assay_trace_check_transcript the
 * record coming out (accepted and finished once, positions in order, counts,
 * token ids, times). assay_check_trace (property.c) calls both, for the
 * trace checks of verify, compare and the audit.
 */
#include "trace.h"

#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/rng.h"
#include "equivalence.h"

/* Index of a request whose id another request already has, or -1. */
static enum assay_status find_duplicate_id(const struct assay_workload *w, int32_t *dup,
                                           int32_t *first)
{
    *dup = -1;
    *first = -1;
    int32_t size = 1;
    while (size < 2 * w->n + 2) {
        size *= 2;
    }
    int32_t *slot = assay_malloc(sizeof(int32_t) * (size_t)size);
    if (slot == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t i = 0; i < size; i++) {
        slot[i] = -1;
    }
    int32_t mask = size - 1;
    for (int32_t i = 0; i < w->n && *dup < 0; i++) {
        int32_t k = (int32_t)(assay_mix64(w->reqs[i].id) & (uint64_t)mask);
        while (slot[k] >= 0 && w->reqs[slot[k]].id != w->reqs[i].id) {
            k = (k + 1) & mask;
        }
        if (slot[k] >= 0) {
            *dup = i;
            *first = slot[k];
        } else {
            slot[k] = i;
        }
    }
    assay_free(slot);
    return ASSAY_OK;
}

enum assay_status assay_trace_check_workload(const struct assay_workload *w, int32_t vocab,
                                             int32_t n_ctx, int32_t *bad, char *msg, size_t size)
{
    *bad = -1;
    if (size > 0) {
        msg[0] = '\0';
    }
    for (int32_t i = 0; i < w->n && *bad < 0; i++) {
        const struct assay_workload_request *r = &w->reqs[i];
        unsigned long long id = (unsigned long long)r->id;
        *bad = i;
        if (r->prompt_len < 1 || r->prompt == NULL) {
            snprintf(msg, size, "trace in: request %llu has a prompt of %d tokens", id,
                     (int)r->prompt_len);
        } else if (r->max_tokens < 1) {
            snprintf(msg, size, "trace in: request %llu asks for max_tokens %d", id,
                     (int)r->max_tokens);
        } else if (n_ctx > 0 && (int64_t)r->prompt_len + r->max_tokens > n_ctx) {
            snprintf(msg, size, "trace in: request %llu: prompt %d + max_tokens %d exceeds the "
                                "context %d", id, (int)r->prompt_len, (int)r->max_tokens, (int)n_ctx);
        } else if (r->stop_token < -1 || (vocab > 0 && r->stop_token >= vocab)) {
            snprintf(msg, size, "trace in: request %llu has stop token %d", id, (int)r->stop_token);
        } else if (r->abort_after < -1) {
            snprintf(msg, size, "trace in: request %llu has abort_after %d", id, (int)r->abort_after);
        } else if (r->abort_step < -1) {
            snprintf(msg, size, "trace in: request %llu has abort_step %d", id, (int)r->abort_step);
        } else if (i > 0 && r->arrival_s < w->reqs[i - 1].arrival_s) {
            snprintf(msg, size, "trace in: request %llu arrives at %.9g s, before request %llu "
                                "(%.9g s): arrivals are not sorted", id, r->arrival_s,
                     (unsigned long long)w->reqs[i - 1].id, w->reqs[i - 1].arrival_s);
        } else if (i > 0 && r->arrival_step < w->reqs[i - 1].arrival_step) {
            snprintf(msg, size, "trace in: request %llu arrives at step %d, before request %llu "
                                "(step %d): arrivals are not sorted", id, (int)r->arrival_step,
                     (unsigned long long)w->reqs[i - 1].id, (int)w->reqs[i - 1].arrival_step);
        } else {
            *bad = -1;
            for (int32_t k = 0; vocab > 0 && k < r->prompt_len; k++) {
                if (r->prompt[k] < 0 || r->prompt[k] >= vocab) {
                    snprintf(msg, size, "trace in: request %llu: prompt[%d] = %d is outside the "
                                        "vocabulary 0..%d", id, (int)k, (int)r->prompt[k],
                             (int)vocab - 1);
                    *bad = i;
                    break;
                }
            }
        }
    }
    if (*bad >= 0) {
        return ASSAY_OK;
    }
    int32_t dup, first;
    if (find_duplicate_id(w, &dup, &first) != ASSAY_OK) {
        if (size > 0) {
            msg[0] = '\0';
        }
        return ASSAY_ERR_NOMEM;
    }
    if (dup >= 0) {
        *bad = dup;
        snprintf(msg, size, "trace in: requests[%d] and requests[%d] share the id %llu",
                 (int)first, (int)dup, (unsigned long long)w->reqs[dup].id);
    }
    return ASSAY_OK;
}

bool assay_trace_check_transcript(const struct assay_workload *w, const struct assay_transcript *t,
                                  int32_t vocab, char *msg, size_t size)
{
    if (t->status != ASSAY_OK) {
        snprintf(msg, size, "trace out: the run did not complete: %s", t->error);
        return false;
    }
    if (t->n_unknown_events > 0) {
        snprintf(msg, size, "trace out: %lld events name requests that were never submitted",
                 (long long)t->n_unknown_events);
        return false;
    }
    char why[512];
    if (assay_check_delivery(w, t, why, sizeof why) >= 0) {
        snprintf(msg, size, "trace out: %s", why);
        return false;
    }
    for (int32_t i = 0; i < w->n; i++) {
        const struct assay_workload_request *wr = &w->reqs[i];
        const struct assay_transcript_req *q = &t->reqs[i];
        unsigned long long id = (unsigned long long)wr->id;
        if (q->reason != ASSAY_FINISH_LENGTH && q->reason != ASSAY_FINISH_STOP &&
            q->reason != ASSAY_FINISH_ABORT) {
            snprintf(msg, size, "trace out: request %llu finished with reason %d (%s)", id,
                     (int)q->reason, assay_finish_reason_str(q->reason));
            return false;
        }
        if (q->aborted && q->n_at_abort >= 0 && q->n_events > q->n_at_abort) {
            snprintf(msg, size, "trace out: request %llu received %d tokens after its abort was "
                                "accepted (it had %d then)", id, (int)(q->n_events - q->n_at_abort),
                     (int)q->n_at_abort);
            return false;
        }
        if (q->n_events > q->cap) {
            snprintf(msg, size, "trace out: request %llu received %d tokens for max_tokens %d", id,
                     (int)q->n_events, (int)wr->max_tokens);
            return false;
        }
        int32_t n = q->n_events;
        for (int32_t j = 0; j < n; j++) {
            if (vocab > 0 && (q->tokens[j] < 0 || q->tokens[j] >= vocab)) {
                snprintf(msg, size, "trace out: request %llu, output position %d: token %d is "
                                    "outside the vocabulary 0..%d", id, (int)j, (int)q->tokens[j],
                         (int)vocab - 1);
                return false;
            }
        }
        if (!q->aborted && wr->stop_token >= 0 && q->reason != ASSAY_FINISH_STOP) {
            for (int32_t j = 0; j < n; j++) {
                if (q->tokens[j] == wr->stop_token) {
                    snprintf(msg, size, "trace out: request %llu generated its stop token %d at "
                                        "position %d and finished as %s after %d tokens", id,
                             (int)wr->stop_token, (int)j, assay_finish_reason_str(q->reason),
                             (int)n);
                    return false;
                }
            }
        }
        int64_t prev = q->t_submit_ns;
        const char *prev_what = "its submission";
        for (int32_t j = 0; j <= n; j++) {
            int64_t tj = j < n ? q->t_ns[j] : q->t_finish_ns;
            if (tj < prev) {
                char what[48] = "its FINISH";
                if (j < n) {
                    snprintf(what, sizeof what, "output position %d", (int)j);
                }
                snprintf(msg, size, "trace out: request %llu: %s is stamped %.3f ms before %s", id,
                         what, (double)(prev - tj) / 1e6, prev_what);
                return false;
            }
            prev = tj;
            prev_what = j == 0 ? "its first token" : "the token before";
        }
    }
    return true;
}
