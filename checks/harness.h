/*
 * harness.h - run a workload through any adapter, step by step, and keep a
 * transcript of everything it delivered.
 *
 * Requests join when the step count reaches their arrival_step (so "joins
 * mid-batch" is reproducible), requests with abort_after are aborted once
 * that many tokens arrived, and every event is recorded as it came,
 * duplicates and out-of-order indices included, so that checks can judge
 * what the engine actually did. A run that makes no progress for too long
 * ends with an error instead of hanging.
 *
 * Lifetime: assay_harness_run allocates the transcript;
 * assay_transcript_free releases it.
 */
#ifndef ASSAY_HARNESS_H
#define ASSAY_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/workload.h"

struct assay_transcript_req {
    uint64_t id;
    bool submitted;
    int32_t submit_status;   /* enum assay_status of add_request */
    bool aborted;            /* the harness aborted it (abort_after, abort_step) and
                                the adapter accepted the abort */
    int32_t n_at_abort;      /* TOKEN events received by the end of the step in which
                                the abort was accepted (-1: not aborted); any later
                                one came after the abort */
    int64_t submit_step;     /* the engine step before which it was submitted */
    int32_t n_events;        /* TOKEN events received (all of them) */
    int32_t cap;             /* capacity of the arrays below */
    int32_t *tokens;         /* (cap) in arrival order */
    int32_t *index;          /* (cap) the index each event carried */
    int64_t *t_ns;           /* (cap) */
    int32_t n_finish;        /* FINISH events received (should be 1) */
    enum assay_finish_reason reason;
    int32_t finish_index;    /* output count the FINISH reported */
    int32_t error;           /* FINISH with ERROR */
    char message[200];       /* FINISH with ERROR: the adapter's reason */
    int64_t t_submit_ns;
    int64_t t_finish_ns;
    int32_t spec_rounds;
    int64_t spec_drafted;
    int64_t spec_accepted;
    int32_t *spec_accept_hist; /* (k + 2) rounds by accepted count, when speculating */
    float *logits;           /* (max_tokens, vocab) when captured; NaN where none came */
    bool *has_logits;        /* (max_tokens) */
};

struct assay_transcript {
    struct assay_transcript_req *reqs; /* parallel to the workload's requests */
    int32_t n;
    int64_t n_steps;
    int32_t vocab;           /* when logits were captured */
    bool logits_captured;
    int64_t n_unknown_events; /* events for ids the harness never submitted */
    enum assay_status status; /* ASSAY_OK, or why the run stopped early */
    char error[320];
};

/* Called after every step; a non-OK return stops the run with that status
 * (the message in msg is copied into the transcript). */
typedef enum assay_status (*assay_step_hook)(void *ctx, const struct assay_adapter *adapter,
                                             int64_t step, char *msg, size_t size);

/* Seconds without any event before a run past its step bound is judged
 * not to make progress. */
#define ASSAY_HARNESS_SILENCE_S 30

struct assay_harness_opts {
    bool capture_logits;     /* through set_logits_sink, when the adapter has it */
    assay_step_hook hook;    /* may be NULL */
    void *hook_ctx;
    int64_t max_steps;       /* 0: a bound from the workload's size. A run
                              * ends as not making progress past this many
                              * steps only once no event has come for
                              * ASSAY_HARNESS_SILENCE_S (a server's step is a
                              * 1 ms poll: steps are its wall time, which a
                              * busy machine stretches), or past 64 times
                              * it whatever comes (an engine that never
                              * ends) */
    double silence_s;        /* 0: ASSAY_HARNESS_SILENCE_S */
    int32_t spec_k;          /* size of the acceptance histograms (0: none) */
};

/*
 * Run w on adapter a. Returns ASSAY_OK when the transcript was produced
 * (even if the engine misbehaved: that is for checks to judge), or
 * ASSAY_ERR_NOMEM. *out is always set on ASSAY_OK; its status field says
 * whether the run completed (ASSAY_OK), the adapter failed a step, the hook
 * stopped it, or it timed out (ASSAY_ERR_TIMEOUT: no progress).
 */
enum assay_status assay_harness_run(const struct assay_adapter *a, const struct assay_workload *w,
                                    const struct assay_harness_opts *opts,
                                    struct assay_transcript **out);

void assay_transcript_free(struct assay_transcript *t);

/*
 * Breadcrumbs: where the harness is, written as it goes, so that a check
 * run in a child process (checks/isolate.h) that dies or hangs can say
 * where. runs counts the workload runs begun in this process; the others
 * describe the latest. in_engine is 1 while a call into the adapter
 * (add_request, step, abort) is under way.
 */
struct assay_crumb {
    int32_t runs;
    int64_t step;
    int32_t n_requests;
    int32_t submitted;
    int32_t finished;
    int32_t in_engine;
};

/* Where this process's harness leaves its breadcrumbs (NULL: nowhere, the
 * default). The one process-wide setting of the harness: the isolation
 * sets it in a check's child process only, before the check runs; c must
 * outlive every run after. */
void assay_harness_set_crumb(volatile struct assay_crumb *c);

#endif
