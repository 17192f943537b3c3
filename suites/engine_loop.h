/*
 * engine_loop.h - one thread that owns an engine (any adapter) and steps
 * it, fed with jobs by other threads: the engine half of
 * suites/engine_server.c.
 *
 * A job is one request and the room for what it produces. Its owner (a
 * connection thread) fills the request, submits it, and then waits on the
 * job's wake descriptor; the loop thread writes one byte there whenever it
 * has news (tokens, the end). The owner reads the news with
 * engine_loop_poll, which says how many tokens are ready and whether the
 * job is done:
 *
 *     struct engine_job job;
 *     engine_job_init(&job, prompt, n, max_tokens, n_probs);   // the request's room
 *     job.sampling = ...; job.stop_token = ...;
 *     engine_loop_submit(loop, &job);
 *     for (int32_t sent = 0;;) {
 *         int32_t n_out; bool done;
 *         engine_loop_poll(loop, &job, &n_out, &done);
 *         for (; sent < n_out; sent++)
 *             engine_loop_read(loop, &job, sent, &token, &logprob, top);
 *         if (done) break;      // job.reason etc. are final and may be read
 *         poll(engine_job_wake_fd(&job)) ... or, the client gone:
 *             engine_loop_cancel(loop, &job) and go on polling until done
 *     }
 *     engine_job_free(&job);    // only once done (or never submitted)
 *
 * At most `slots` jobs are in the engine at once; the rest wait in a FIFO
 * queue, as llama-server's parallel slots (-np) do. A cancelled job leaves
 * the queue at once, or is aborted in the engine, and is done when the
 * engine says it finished. The loop thread sleeps on a condition variable
 * while no job is in the engine.
 *
 * Logits: when the adapter has the logits capability, jobs may ask for the
 * top n_probs logprobs of every position: the log-softmax of the raw
 * logits the engine sampled the token from (before temperature, top-k and
 * top-p), with the token's own logprob, as llama.cpp's server gives them.
 *
 * Allocation: engine_job_init allocates a job's room for max_tokens
 * tokens; the loop thread allocates nothing per token, but grows a job's
 * room when an engine delivers more tokens than max_tokens (so that such a
 * bug is passed on, not hidden) and the scratch of logits rows to the most
 * rows one step produced.
 */
#ifndef ASSAY_ENGINE_LOOP_H
#define ASSAY_ENGINE_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "adapters/adapter.h"

/* One of the top logprobs of a position. */
struct engine_job_top {
    int32_t token;
    double logprob;
};

enum engine_job_state {
    ENGINE_JOB_NEW = 0, /* not submitted */
    ENGINE_JOB_QUEUED,  /* waiting for a slot */
    ENGINE_JOB_RUNNING, /* in the engine */
    ENGINE_JOB_DONE,    /* finished; the loop no longer touches it */
};

struct engine_job {
    /* The request: set before engine_loop_submit, read-only after. */
    int32_t *prompt;              /* (prompt_len), owned */
    int32_t prompt_len;
    int32_t max_tokens;
    int32_t stop_token;           /* -1: none */
    struct assay_sampling sampling;
    int32_t n_probs;              /* top logprobs per position; 0: none */

    /* What it produced: read the tokens with engine_loop_read (the arrays
     * grow, and move, when an engine delivers more than max_tokens); the
     * other fields are final once engine_loop_poll says done. */
    int32_t *tokens;              /* (cap) */
    double *logprob;              /* (cap) each token's own logprob, when n_probs > 0 */
    struct engine_job_top *top;   /* (cap, n_probs) when n_probs > 0 */
    int32_t cap;
    int32_t n_out;
    enum engine_job_state state;
    enum assay_finish_reason reason;
    int32_t error;                /* FINISH with ERROR: an enum assay_status */
    char message[320];            /* FINISH with ERROR: why */
    int32_t slot;                 /* the slot it ran in; -1 before */
    int64_t t_submit_ns, t_start_ns, t_first_ns, t_done_ns; /* CLOCK_MONOTONIC; 0: not yet */

    /* The loop's bookkeeping, under its mutex. */
    uint64_t id;
    bool cancel;                  /* the owner gave up on it */
    bool abort_sent;
    bool failed;                  /* the loop failed it (message says why); finished as ERROR */
    bool woken;                   /* a byte is in the wake pipe */
    int wake[2];                  /* pipe: the loop writes [1], the owner polls [0] */
    struct engine_job *next;      /* in the queue */
};

/* Make room for a request of prompt_len tokens (copied) producing up to
 * max_tokens tokens with n_probs top logprobs each, and its wake pipe.
 * sampling is greedy, stop_token -1. Returns 0, or -1 with errno (ENOMEM,
 * or pipe's) and the job cleared. Pair with engine_job_free. */
int engine_job_init(struct engine_job *job, const int32_t *prompt, int32_t prompt_len,
                    int32_t max_tokens, int32_t n_probs);

/* Release a job that is done or was never submitted. NULL-safe. */
void engine_job_free(struct engine_job *job);

/* The descriptor that becomes readable when the job has news. */
int engine_job_wake_fd(const struct engine_job *job);

struct engine_loop;

/* Start the loop thread on adapter (borrowed; used only by that thread
 * until engine_loop_stop) with at most `slots` jobs in the engine, and
 * install the logits sink when the adapter has the capability. Returns 0,
 * or -1 with err saying why; *out is then NULL. */
int engine_loop_start(struct assay_adapter *adapter, int32_t slots, struct engine_loop **out,
                      char *err, size_t err_size);

/* Wait until no job is queued or running, stop the thread and free the
 * loop (the adapter is the caller's again). Every job must have been
 * cancelled or finished by then, or this waits for it. NULL-safe. */
void engine_loop_stop(struct engine_loop *loop);

/* Whether jobs may ask for logprobs (the adapter gives logits). */
bool engine_loop_has_logits(const struct engine_loop *loop);

/* Queue a job (state NEW). Returns false when the loop is stopping. */
bool engine_loop_submit(struct engine_loop *loop, struct engine_job *job);

/* Give up a submitted job: it leaves the queue, or is aborted in the
 * engine; it is done once the engine has finished it. */
void engine_loop_cancel(struct engine_loop *loop, struct engine_job *job);

/* Read the job's news (and empty its wake pipe): *n_out tokens are ready,
 * *done when it has finished. */
void engine_loop_poll(struct engine_loop *loop, struct engine_job *job, int32_t *n_out,
                      bool *done);

/* Token i < n_out (as engine_loop_poll said) of a job: its id, and when
 * the job asked for them its logprob and top n_probs logprobs (top has
 * room for n_probs; an entry of token -1 is none). */
void engine_loop_read(struct engine_loop *loop, const struct engine_job *job, int32_t i,
                      int32_t *token, double *logprob, struct engine_job_top *top);

/* What /metrics shows. */
struct engine_loop_stats {
    int32_t processing;        /* jobs in the engine */
    int32_t deferred;          /* jobs waiting for a slot */
    int64_t prompt_tokens;     /* of the jobs that entered the engine */
    int64_t tokens_predicted;  /* tokens delivered */
    int64_t n_steps;           /* engine steps */
    int64_t n_finished;        /* jobs done */
    bool has_kv;               /* the adapter counts its KV blocks */
    int64_t kv_tokens;         /* positions of the blocks not free nor cached */
    double kv_usage;           /* those blocks over all blocks */
};

void engine_loop_get_stats(struct engine_loop *loop, struct engine_loop_stats *out);

#endif
