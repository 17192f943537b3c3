/*
 * worker.c - one helper thread for work split in two (worker.h):
 * assay_worker_post hands it a task and assay_worker_wait waits for its
 * half, each side spinning briefly before sleeping on a condition variable,
 * so a hand-off costs microseconds and an idle engine no CPU.
 * assay_worker_init / _free start and join the thread. The forward pass
 * (forward.c) posts to it several times a step; score.c may own one too.
 */
#include "worker.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../core/alloc.h"
#include "../core/clock.h"

/* How long the worker spins for the next task before it sleeps: longer
 * than the gap between two products of a decode step, far shorter than an
 * idle engine's wait. */
#define SPIN_NS 200000

/* After this long, a spinning thread yields its core at each turn: when
 * more threads want the cores than there are (two such engines side by
 * side, a parallel test run), the thread it waits for may be the one
 * without a core. */
#define YIELD_AFTER_NS 20000

struct assay_worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_cond_t done_cv;    /* the caller sleeps on it in a long wait */
    _Atomic int waiting;       /* the caller sleeps on done_cv */
    _Atomic uint64_t posted;   /* generation of the last task posted */
    _Atomic uint64_t done;     /* generation of the last task finished */
    _Atomic int sleeping;
    _Atomic int stop;
    assay_worker_fn fn;        /* the task; written before posted is raised */
    void *arg;
};

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/*
 * One turn of waiting that began at t0: a pause for the first
 * YIELD_AFTER_NS, then the core yielded at each turn; false once `limit`
 * has passed (the caller then sleeps).
 */
static bool spin_turn(int64_t t0, int64_t limit)
{
    int64_t spun = assay_now_ns() - t0;
    if (spun >= limit) {
        return false;
    }
    if (spun < YIELD_AFTER_NS) {
        relax();
    } else {
        sched_yield();
    }
    return true;
}

static void *worker_main(void *p)
{
    struct assay_worker *w = p;
    uint64_t seen = 0;
    for (;;) {
        int64_t t0 = assay_now_ns();
        while (atomic_load(&w->posted) == seen && !atomic_load(&w->stop)) {
            if (spin_turn(t0, SPIN_NS)) {
                continue;
            }
            pthread_mutex_lock(&w->mu);
            atomic_store(&w->sleeping, 1);
            while (atomic_load(&w->posted) == seen && !atomic_load(&w->stop)) {
                pthread_cond_wait(&w->cv, &w->mu);
            }
            atomic_store(&w->sleeping, 0);
            pthread_mutex_unlock(&w->mu);
        }
        if (atomic_load(&w->stop)) {
            return NULL;
        }
        seen = atomic_load(&w->posted);
        w->fn(w->arg);
        atomic_store(&w->done, seen);
        /* Sequentially consistent, as in post: either the caller sees
         * done before it sleeps, or this sees it waiting and wakes it. */
        if (atomic_load(&w->waiting)) {
            pthread_mutex_lock(&w->mu);
            pthread_cond_signal(&w->done_cv);
            pthread_mutex_unlock(&w->mu);
        }
    }
}

enum assay_status assay_worker_init(struct assay_worker **out)
{
    *out = NULL;
    struct assay_worker *w = assay_calloc(1, sizeof *w);
    if (w == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        assay_free(w);
        return ASSAY_ERR_INTERNAL;
    }
    if (pthread_cond_init(&w->cv, NULL) != 0) {
        pthread_mutex_destroy(&w->mu);
        assay_free(w);
        return ASSAY_ERR_INTERNAL;
    }
    if (pthread_cond_init(&w->done_cv, NULL) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        assay_free(w);
        return ASSAY_ERR_INTERNAL;
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        pthread_cond_destroy(&w->done_cv);
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        assay_free(w);
        return ASSAY_ERR_INTERNAL;
    }
    *out = w;
    return ASSAY_OK;
}

void assay_worker_free(struct assay_worker *w)
{
    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->stop, 1);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->done_cv);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    assay_free(w);
}

void assay_worker_post(struct assay_worker *w, assay_worker_fn fn, void *arg)
{
    w->fn = fn;
    w->arg = arg;
    atomic_fetch_add(&w->posted, 1);
    /* Sequentially consistent: either the worker sees the new generation
     * before it sleeps, or this sees it sleeping and wakes it. */
    if (atomic_load(&w->sleeping)) {
        pthread_mutex_lock(&w->mu);
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

void assay_worker_wait(struct assay_worker *w)
{
    uint64_t target = atomic_load(&w->posted);
    int64_t t0 = assay_now_ns();
    while (atomic_load(&w->done) != target) {
        if (!spin_turn(t0, SPIN_NS)) {
            pthread_mutex_lock(&w->mu);
            atomic_store(&w->waiting, 1);
            while (atomic_load(&w->done) != target) {
                pthread_cond_wait(&w->done_cv, &w->mu);
            }
            atomic_store(&w->waiting, 0);
            pthread_mutex_unlock(&w->mu);
        }
    }
}
