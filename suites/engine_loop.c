/*
 * engine_loop.c - the thread that steps an engine for other threads (see
 * engine_loop.h).
 *
 * One mutex guards the queue, the slots, every job's bookkeeping and
 * output, and the statistics; the loop thread holds it while it admits,
 * aborts and files the events of a step, and releases it for the step
 * itself, so that connections can queue and cancel while the engine
 * computes. The adapter is touched by the loop thread only.
 *
 * Per step: the logits sink (called inside the step, on this thread)
 * copies the rows of the jobs that want logprobs into a scratch; then each
 * TOKEN event takes its row from there, and each FINISH ends its job. Most
 * steps deliver one token per running job, so a step's events are a few
 * and the lookups by id are scans of the slots.
 */
#include "engine_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"

/* A logits row the sink kept for one (request, position). */
struct pending_row {
    uint64_t id;
    int32_t index;
    size_t off; /* into rows */
};

struct engine_loop {
    struct assay_adapter *adapter;
    int32_t slots;
    int32_t vocab;
    bool logits;                 /* the sink is installed */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool quit;
    struct engine_job *head, *tail; /* the queue */
    int32_t n_queued;
    int32_t queued_cancels;      /* queued jobs cancelled since the last intake */
    struct engine_job **running; /* (slots) */
    int32_t n_running;
    uint64_t next_id;
    struct engine_loop_stats stats;
    /* The sink's scratch, this thread's only. */
    float *rows;                 /* (rows_cap) */
    size_t rows_cap, rows_used;
    struct pending_row *pend;    /* (pend_cap) */
    size_t pend_cap, n_pend;
    bool sink_oom;               /* a row could not be kept this step */
    bool said_step_error;
};

/* ------------------------------------------------------------------ */
/* Jobs                                                                */
/* ------------------------------------------------------------------ */

int engine_job_init(struct engine_job *job, const int32_t *prompt, int32_t prompt_len,
                    int32_t max_tokens, int32_t n_probs)
{
    memset(job, 0, sizeof *job);
    job->wake[0] = job->wake[1] = -1;
    job->slot = -1;
    job->stop_token = -1;
    job->sampling = assay_sampling_greedy();
    if (prompt_len < 0 || max_tokens < 1 || n_probs < 0) {
        errno = EINVAL;
        return -1;
    }
    size_t cap = (size_t)max_tokens;
    job->prompt = malloc((prompt_len > 0 ? (size_t)prompt_len : 1) * sizeof *job->prompt);
    job->tokens = malloc(cap * sizeof *job->tokens);
    if (n_probs > 0) {
        job->logprob = malloc(cap * sizeof *job->logprob);
        job->top = malloc(cap * (size_t)n_probs * sizeof *job->top);
    }
    bool ok = job->prompt != NULL && job->tokens != NULL &&
              (n_probs == 0 || (job->logprob != NULL && job->top != NULL));
    if (!ok) {
        engine_job_free(job);
        errno = ENOMEM;
        return -1;
    }
    if (pipe2(job->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        int e = errno;
        job->wake[0] = job->wake[1] = -1;
        engine_job_free(job);
        errno = e;
        return -1;
    }
    if (prompt_len > 0) {
        memcpy(job->prompt, prompt, (size_t)prompt_len * sizeof *prompt);
    }
    job->prompt_len = prompt_len;
    job->max_tokens = max_tokens;
    job->n_probs = n_probs;
    job->cap = max_tokens;
    return 0;
}

void engine_job_free(struct engine_job *job)
{
    if (job == NULL) {
        return;
    }
    free(job->prompt);
    free(job->tokens);
    free(job->logprob);
    free(job->top);
    if (job->wake[0] >= 0) {
        close(job->wake[0]);
        close(job->wake[1]);
    }
    memset(job, 0, sizeof *job);
    job->wake[0] = job->wake[1] = -1;
}

int engine_job_wake_fd(const struct engine_job *job)
{
    return job->wake[0];
}

/* Tell the owner there is news (under the mutex). */
static void wake(struct engine_job *job)
{
    if (!job->woken) {
        job->woken = true;
        ssize_t w;
        do {
            w = write(job->wake[1], "x", 1);
        } while (w < 0 && errno == EINTR);
    }
}

static void finish(struct engine_loop *L, struct engine_job *job, enum assay_finish_reason reason,
                   int32_t error, const char *message)
{
    job->state = ENGINE_JOB_DONE;
    job->reason = job->failed ? ASSAY_FINISH_ERROR : reason;
    if (!job->failed) {
        job->error = error;
        snprintf(job->message, sizeof job->message, "%s", message != NULL ? message : "");
    }
    job->t_done_ns = assay_now_ns();
    L->stats.n_finished++;
    wake(job);
}

/* Fail a running job from the loop's side (it is aborted in the engine
 * and finishes as ERROR with this message). */
static void fail_running(struct engine_loop *L, struct engine_job *job, const char *message)
{
    if (job->failed) {
        return;
    }
    job->failed = true;
    job->error = ASSAY_ERR_INTERNAL;
    snprintf(job->message, sizeof job->message, "%s", message);
    if (!job->abort_sent) {
        job->abort_sent = true;
        L->adapter->vt->abort(L->adapter->self, job->id);
    }
}

/* Room for one more token (the engine delivered more than max_tokens). */
static bool grow(struct engine_job *job)
{
    size_t cap = (size_t)job->cap * 2;
    int32_t *t = realloc(job->tokens, cap * sizeof *t);
    if (t == NULL) {
        return false;
    }
    job->tokens = t;
    if (job->n_probs > 0) {
        double *lp = realloc(job->logprob, cap * sizeof *lp);
        if (lp == NULL) {
            return false;
        }
        job->logprob = lp;
        struct engine_job_top *top = realloc(job->top, cap * (size_t)job->n_probs * sizeof *top);
        if (top == NULL) {
            return false;
        }
        job->top = top;
    }
    job->cap = (int32_t)cap;
    return true;
}

/* ------------------------------------------------------------------ */
/* Logits                                                              */
/* ------------------------------------------------------------------ */

static struct engine_job *running_by_id(const struct engine_loop *L, uint64_t id)
{
    for (int32_t s = 0; s < L->slots; s++) {
        if (L->running[s] != NULL && L->running[s]->id == id) {
            return L->running[s];
        }
    }
    return NULL;
}

/* The adapter's logits sink: keep the row of a job that wants logprobs.
 * Runs inside step() on the loop thread; the slots do not change then. */
static void keep_row(void *ctx, uint64_t id, int32_t index, const float *logits, int32_t vocab)
{
    struct engine_loop *L = ctx;
    const struct engine_job *job = running_by_id(L, id);
    if (job == NULL || job->n_probs == 0 || vocab != L->vocab) {
        return;
    }
    if (L->rows_used + (size_t)vocab > L->rows_cap) {
        size_t cap = L->rows_cap > 0 ? L->rows_cap * 2 : (size_t)vocab * 8;
        while (cap < L->rows_used + (size_t)vocab) {
            cap *= 2;
        }
        float *r = realloc(L->rows, cap * sizeof *r);
        if (r == NULL) {
            L->sink_oom = true;
            return;
        }
        L->rows = r;
        L->rows_cap = cap;
    }
    if (L->n_pend == L->pend_cap) {
        size_t cap = L->pend_cap > 0 ? L->pend_cap * 2 : 16;
        struct pending_row *p = realloc(L->pend, cap * sizeof *p);
        if (p == NULL) {
            L->sink_oom = true;
            return;
        }
        L->pend = p;
        L->pend_cap = cap;
    }
    memcpy(L->rows + L->rows_used, logits, (size_t)vocab * sizeof *logits);
    L->pend[L->n_pend++] = (struct pending_row){id, index, L->rows_used};
    L->rows_used += (size_t)vocab;
}

/*
 * The log-softmax of the raw logits l[0..v) at `token`, and its n largest
 * entries in descending order (the lower id first among equals), as
 * llama.cpp's server lists them. In double precision.
 */
static void log_softmax_top(const float *l, int32_t v, int32_t token, int32_t n, double *lp,
                            struct engine_job_top *top)
{
    double mx = -INFINITY;
    for (int32_t i = 0; i < v; i++) {
        mx = (double)l[i] > mx ? (double)l[i] : mx;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < v; i++) {
        sum += exp((double)l[i] - mx);
    }
    double lse = mx + log(sum);
    *lp = (double)l[token] - lse;
    int32_t k = 0;
    for (int32_t i = 0; i < v; i++) {
        double x = (double)l[i];
        if (k == n && !(x > top[n - 1].logprob)) {
            continue;
        }
        int32_t j = k < n ? k++ : n - 1;
        while (j > 0 && x > top[j - 1].logprob) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = (struct engine_job_top){i, x};
    }
    for (int32_t j = 0; j < k; j++) {
        top[j].logprob -= lse;
    }
    for (int32_t j = k; j < n; j++) {
        top[j] = (struct engine_job_top){-1, NAN}; /* vocabulary smaller than n */
    }
}

/* ------------------------------------------------------------------ */
/* The thread                                                          */
/* ------------------------------------------------------------------ */

/* Under the mutex: cancelled jobs out, queued jobs into free slots. */
static void intake(struct engine_loop *L)
{
    const struct assay_adapter_vtable *vt = L->adapter->vt;
    for (int32_t s = 0; s < L->slots; s++) {
        struct engine_job *job = L->running[s];
        if (job != NULL && job->cancel && !job->abort_sent) {
            job->abort_sent = true;
            vt->abort(L->adapter->self, job->id);
        }
    }
    if (L->queued_cancels > 0) {
        L->tail = NULL;
        for (struct engine_job **pp = &L->head; *pp != NULL;) {
            struct engine_job *job = *pp;
            if (job->cancel) {
                *pp = job->next;
                L->n_queued--;
                finish(L, job, ASSAY_FINISH_ABORT, 0, "");
                continue;
            }
            L->tail = job;
            pp = &job->next;
        }
        L->queued_cancels = 0;
    }
    while (L->n_running < L->slots && L->head != NULL) {
        struct engine_job *job = L->head;
        L->head = job->next;
        if (L->head == NULL) {
            L->tail = NULL;
        }
        L->n_queued--;
        job->next = NULL;
        int32_t slot = 0;
        while (L->running[slot] != NULL) {
            slot++;
        }
        struct assay_request req;
        memset(&req, 0, sizeof req);
        req.id = ++L->next_id;
        req.prompt = job->prompt;
        req.prompt_len = job->prompt_len;
        req.max_tokens = job->max_tokens;
        req.stop_token = job->stop_token;
        req.sampling = job->sampling;
        job->id = req.id;
        job->t_start_ns = assay_now_ns();
        enum assay_status st = vt->add_request(L->adapter->self, &req);
        if (st != ASSAY_OK) {
            const char *why = vt->last_error != NULL ? vt->last_error(L->adapter->self) : "";
            finish(L, job, ASSAY_FINISH_ERROR, st, why[0] != '\0' ? why : assay_status_str(st));
            continue;
        }
        job->state = ENGINE_JOB_RUNNING;
        job->slot = slot;
        L->running[slot] = job;
        L->n_running++;
        L->stats.prompt_tokens += job->prompt_len;
    }
}

/* Under the mutex: one TOKEN event. A token outside the vocabulary is
 * passed on as it came (without logprobs): the client judges the engine. */
static void take_token(struct engine_loop *L, const struct assay_event *ev)
{
    struct engine_job *job = running_by_id(L, ev->request_id);
    if (job == NULL || job->failed) {
        return;
    }
    if (job->n_out == job->cap && !grow(job)) {
        fail_running(L, job, "out of memory for a token beyond max_tokens");
        return;
    }
    int32_t i = job->n_out;
    job->tokens[i] = ev->token;
    if (job->n_probs > 0) {
        struct engine_job_top *top = &job->top[(size_t)i * (size_t)job->n_probs];
        const struct pending_row *row = NULL;
        for (size_t k = 0; k < L->n_pend && row == NULL; k++) {
            if (L->pend[k].id == ev->request_id && L->pend[k].index == ev->index) {
                row = &L->pend[k];
            }
        }
        if (ev->token < 0 || ev->token >= L->vocab) {
            job->logprob[i] = NAN;
            for (int32_t k = 0; k < job->n_probs; k++) {
                top[k] = (struct engine_job_top){-1, NAN};
            }
        } else if (row == NULL) {
            char msg[160];
            snprintf(msg, sizeof msg, "the engine gave no logits for token %d at position %d%s",
                     (int)ev->token, (int)ev->index,
                     L->sink_oom ? " (out of memory keeping them)" : "");
            fail_running(L, job, msg);
            return;
        } else {
            log_softmax_top(L->rows + row->off, L->vocab, ev->token, job->n_probs,
                            &job->logprob[i], top);
        }
    }
    job->n_out++;
    if (job->t_first_ns == 0) {
        job->t_first_ns = ev->t_ns > 0 ? ev->t_ns : assay_now_ns();
    }
    L->stats.tokens_predicted++;
    wake(job);
}

/* Under the mutex: one FINISH event. */
static void take_finish(struct engine_loop *L, const struct assay_event *ev)
{
    struct engine_job *job = running_by_id(L, ev->request_id);
    if (job == NULL) {
        return;
    }
    L->running[job->slot] = NULL;
    L->n_running--;
    finish(L, job, ev->reason, ev->error, ev->message);
}

/* Under the mutex: the KV gauge after a step. */
static void read_kv(struct engine_loop *L)
{
    const struct assay_adapter_vtable *vt = L->adapter->vt;
    struct assay_block_stats bs;
    if (vt->block_stats == NULL || vt->block_stats(L->adapter->self, &bs) != ASSAY_OK ||
        bs.total <= 0) {
        return;
    }
    int64_t used = (int64_t)bs.total - bs.free - bs.cached;
    L->stats.has_kv = true;
    L->stats.kv_tokens = used * bs.block_size;
    L->stats.kv_usage = (double)used / (double)bs.total;
}

static void *loop_main(void *arg)
{
    struct engine_loop *L = arg;
    const struct assay_adapter_vtable *vt = L->adapter->vt;
    pthread_mutex_lock(&L->mu);
    read_kv(L);
    for (;;) {
        intake(L);
        if (L->n_running == 0) {
            if (L->quit && L->head == NULL) {
                break;
            }
            pthread_cond_wait(&L->cv, &L->mu);
            continue;
        }
        pthread_mutex_unlock(&L->mu);
        L->rows_used = 0;
        L->n_pend = 0;
        L->sink_oom = false;
        const struct assay_event *ev = NULL;
        size_t n = 0;
        enum assay_status st = vt->step(L->adapter->self, &ev, &n);
        pthread_mutex_lock(&L->mu);
        L->stats.n_steps++;
        if (st != ASSAY_OK && !L->said_step_error) {
            L->said_step_error = true;
            const char *why = vt->last_error != NULL ? vt->last_error(L->adapter->self) : "";
            fprintf(stderr, "engine_server: the engine's step failed (%s)%s%s\n",
                    assay_status_str(st), why[0] != '\0' ? ": " : "", why);
        }
        for (size_t k = 0; k < n; k++) {
            if (ev[k].kind == ASSAY_EVENT_TOKEN) {
                take_token(L, &ev[k]);
            } else if (ev[k].kind == ASSAY_EVENT_FINISH) {
                take_finish(L, &ev[k]);
            }
        }
        read_kv(L);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* The interface                                                       */
/* ------------------------------------------------------------------ */

int engine_loop_start(struct assay_adapter *adapter, int32_t slots, struct engine_loop **out,
                      char *err, size_t err_size)
{
    *out = NULL;
    if (adapter == NULL || adapter->vt == NULL || slots < 1) {
        snprintf(err, err_size, "engine_loop_start: an adapter and at least one slot");
        return -1;
    }
    struct assay_adapter_info info;
    assay_adapter_get_info(adapter, &info);
    struct engine_loop *L = calloc(1, sizeof *L);
    struct engine_job **running = calloc((size_t)slots, sizeof *running);
    if (L == NULL || running == NULL) {
        free(L);
        free(running);
        snprintf(err, err_size, "engine_loop_start: out of memory for %d slots", (int)slots);
        return -1;
    }
    L->adapter = adapter;
    L->slots = slots;
    L->running = running;
    L->vocab = info.vocab;
    if (adapter->vt->set_logits_sink != NULL && info.vocab > 0) {
        L->logits = adapter->vt->set_logits_sink(adapter->self, keep_row, L) == ASSAY_OK;
    }
    int rc = pthread_mutex_init(&L->mu, NULL);
    if (rc == 0) {
        rc = pthread_cond_init(&L->cv, NULL);
        if (rc == 0) {
            rc = pthread_create(&L->th, NULL, loop_main, L);
            if (rc != 0) {
                pthread_cond_destroy(&L->cv);
            }
        }
        if (rc != 0) {
            pthread_mutex_destroy(&L->mu);
        }
    }
    if (rc != 0) {
        if (L->logits) {
            adapter->vt->set_logits_sink(adapter->self, NULL, NULL);
        }
        snprintf(err, err_size, "engine_loop_start: cannot start the engine thread: %s",
                 strerror(rc));
        free(L->running);
        free(L);
        return -1;
    }
    *out = L;
    return 0;
}

void engine_loop_stop(struct engine_loop *L)
{
    if (L == NULL) {
        return;
    }
    pthread_mutex_lock(&L->mu);
    L->quit = true;
    pthread_cond_signal(&L->cv);
    pthread_mutex_unlock(&L->mu);
    pthread_join(L->th, NULL);
    if (L->logits) {
        L->adapter->vt->set_logits_sink(L->adapter->self, NULL, NULL);
    }
    pthread_cond_destroy(&L->cv);
    pthread_mutex_destroy(&L->mu);
    free(L->running);
    free(L->rows);
    free(L->pend);
    free(L);
}

bool engine_loop_has_logits(const struct engine_loop *L)
{
    return L->logits;
}

bool engine_loop_submit(struct engine_loop *L, struct engine_job *job)
{
    pthread_mutex_lock(&L->mu);
    bool ok = !L->quit && job->state == ENGINE_JOB_NEW;
    if (ok) {
        job->state = ENGINE_JOB_QUEUED;
        job->t_submit_ns = assay_now_ns();
        job->next = NULL;
        if (L->tail != NULL) {
            L->tail->next = job;
        } else {
            L->head = job;
        }
        L->tail = job;
        L->n_queued++;
        pthread_cond_signal(&L->cv);
    }
    pthread_mutex_unlock(&L->mu);
    return ok;
}

void engine_loop_cancel(struct engine_loop *L, struct engine_job *job)
{
    pthread_mutex_lock(&L->mu);
    if ((job->state == ENGINE_JOB_QUEUED || job->state == ENGINE_JOB_RUNNING) && !job->cancel) {
        job->cancel = true;
        L->queued_cancels += job->state == ENGINE_JOB_QUEUED;
        pthread_cond_signal(&L->cv);
    }
    pthread_mutex_unlock(&L->mu);
}

void engine_loop_poll(struct engine_loop *L, struct engine_job *job, int32_t *n_out, bool *done)
{
    char drain[64];
    while (read(job->wake[0], drain, sizeof drain) > 0) {
    }
    pthread_mutex_lock(&L->mu);
    job->woken = false;
    *n_out = job->n_out;
    *done = job->state == ENGINE_JOB_DONE;
    pthread_mutex_unlock(&L->mu);
}

void engine_loop_read(struct engine_loop *L, const struct engine_job *job, int32_t i,
                      int32_t *token, double *logprob, struct engine_job_top *top)
{
    pthread_mutex_lock(&L->mu);
    *token = job->tokens[i];
    if (job->n_probs > 0) {
        *logprob = job->logprob[i];
        memcpy(top, &job->top[(size_t)i * (size_t)job->n_probs],
               (size_t)job->n_probs * sizeof *top);
    }
    pthread_mutex_unlock(&L->mu);
}

void engine_loop_get_stats(struct engine_loop *L, struct engine_loop_stats *out)
{
    pthread_mutex_lock(&L->mu);
    *out = L->stats;
    out->processing = L->n_running;
    out->deferred = L->n_queued;
    pthread_mutex_unlock(&L->mu);
}
