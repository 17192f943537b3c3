/*
 * trace.h - trace consistency: the rules every trace that goes into an
 * engine and every record that comes out must keep, whatever the engine.
 *
 * In (a workload): every request has a prompt of at least one token, all in
 * the vocabulary, max_tokens >= 1, prompt + max_tokens within the context, a
 * stop token that is -1 or a token id, abort_after >= -1, a unique id, and
 * arrivals (seconds and steps) sorted. A workload file's declared
 * prompt_len is compared with its tokens when the file is read
 * (core/workload.h rejects the file, naming the request, if they differ);
 * in memory the length is the tokens.
 *
 * Out (a transcript of a run, checks/harness.h):
 *   the run completed (no failed step, no hook stop, no stall), and no event
 *   names a request that was never submitted;
 *   each request was accepted and finished exactly once, with a valid reason
 *   (length, stop or abort; abort only if it was aborted);
 *   a request whose abort was accepted receives no token from a later step
 *   (adapter.h: its FINISH follows; a request already ending may keep the
 *   end it had, but nothing more is generated for it);
 *   output positions arrive in order, each once: no token is delivered
 *   twice, before or after a preemption;
 *   the output count equals max_tokens unless the request stopped on its stop
 *   token (delivered last, never earlier) or was aborted (then at most
 *   max_tokens), and the FINISH event states the count delivered;
 *   every token id is in the vocabulary;
 *   times are ordered: submit <= first token <= ... <= last token <= finish.
 * The delivery rules are those of assay_check_delivery (equivalence.h); this
 * module adds the others.
 */
#ifndef ASSAY_TRACE_H
#define ASSAY_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"
#include "../core/workload.h"
#include "harness.h"

/*
 * Judge a workload before it is run. vocab and n_ctx may be 0 (unknown: the
 * rules that need them are skipped). Sets *bad to the index of the first
 * inconsistent request (msg says what is wrong) or -1. Returns
 * ASSAY_ERR_NOMEM (then *bad is -1 and msg empty) or ASSAY_OK.
 */
enum assay_status assay_trace_check_workload(const struct assay_workload *w, int32_t vocab,
                                             int32_t n_ctx, int32_t *bad, char *msg,
                                             size_t size);

/*
 * Judge the transcript t of a run of w. vocab may be 0 (unknown: token ids
 * are not range-checked). Returns true when every rule above holds; else
 * false, with the first broken rule, the request and the position in msg.
 */
bool assay_trace_check_transcript(const struct assay_workload *w, const struct assay_transcript *t,
                                  int32_t vocab, char *msg, size_t size);

#endif
