/*
 * worker.h - one helper thread for work that splits in two.
 *
 * The forward pass splits its work in two and hands one half to this
 * worker: half the columns of each product (each half one single-threaded
 * OpenBLAS call), the attention rows (or one row's heads) and the SwiGLU
 * rows. A hand-off must cost far less than the task (a few microseconds in
 * single-stream decode), so the worker waits for the next task, and the
 * caller for the worker's half, spinning for a short while (pausing, then
 * yielding the core, which matters when more threads want the cores than
 * there are) before sleeping on a condition variable. An idle engine costs
 * no CPU.
 *
 * Lifetime: assay_worker_init / assay_worker_free (joins the thread). Only
 * one thread may post tasks.
 */
#ifndef ASSAY_WORKER_H
#define ASSAY_WORKER_H


#include "../core/status.h"

struct assay_worker;

typedef void (*assay_worker_fn)(void *arg);

/* Start the thread. ASSAY_ERR_NOMEM or ASSAY_ERR_INTERNAL (the thread could
 * not be created); *out is then NULL. */
enum assay_status assay_worker_init(struct assay_worker **out);

/* Stop and join the thread; NULL is a no-op. */
void assay_worker_free(struct assay_worker *w);

/* Run fn(arg) on the worker; returns at once. */
void assay_worker_post(struct assay_worker *w, assay_worker_fn fn, void *arg);

/* Wait until the last posted task has finished. */
void assay_worker_wait(struct assay_worker *w);

#endif
