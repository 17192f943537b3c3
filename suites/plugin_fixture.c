/*
 * plugin_fixture.c - small plugins for the loader's tests (test_compare),
 * one source compiled into several shared modules, one per way a plugin
 * can be right or wrong (suites/CMakeLists.txt):
 *
 *   PLUGIN_OK        an echo engine: request R yields max_tokens copies of
 *                    its first prompt token, one per step; info, last_error
 *                    and nothing else of the optional slots
 *   PLUGIN_ABI       the same, built for the next adapter ABI version
 *   PLUGIN_NO_STEP   a vtable without its required step
 *   PLUGIN_NO_ENTRY  a library without assay_plugin_open
 *
 * Options: "" or "delay_us=N" (a busy wait per step, so that two instances
 * differ in speed); anything else is refused, with a message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adapters/plugin.h"

#ifndef PLUGIN_NO_ENTRY

#define MAX_LIVE 256

struct echo_req {
    uint64_t id;
    int32_t token, n_out, max_tokens;
    int aborted;
};

struct echo {
    struct echo_req live[MAX_LIVE];
    int n_live;
    struct assay_event events[2 * MAX_LIVE];
    long delay_us;
    char error[128];
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static enum assay_status e_add(void *self, const struct assay_request *r)
{
    struct echo *e = self;
    if (r->prompt_len < 1 || r->max_tokens < 1) {
        snprintf(e->error, sizeof e->error, "empty prompt or max_tokens < 1");
        return ASSAY_ERR_INVALID;
    }
    if (e->n_live == MAX_LIVE) {
        return ASSAY_ERR_FULL;
    }
    for (int i = 0; i < e->n_live; i++) {
        if (e->live[i].id == r->id) {
            return ASSAY_ERR_DUPLICATE;
        }
    }
    e->live[e->n_live++] = (struct echo_req){r->id, r->prompt[0], 0, r->max_tokens, 0};
    return ASSAY_OK;
}

static bool e_has_work(void *self)
{
    return ((struct echo *)self)->n_live > 0;
}

static enum assay_status e_step(void *self, const struct assay_event **events, size_t *n_events)
{
    struct echo *e = self;
    int64_t until = now_ns() + e->delay_us * 1000;
    while (e->delay_us > 0 && now_ns() < until) {
    }
    size_t n = 0;
    int64_t t = now_ns();
    for (int i = 0; i < e->n_live;) {
        struct echo_req *q = &e->live[i];
        if (!q->aborted) {
            e->events[n++] = (struct assay_event){.kind = ASSAY_EVENT_TOKEN, .request_id = q->id,
                                                  .t_ns = t, .token = q->token, .index = q->n_out};
            q->n_out++;
        }
        if (q->aborted || q->n_out == q->max_tokens) {
            e->events[n++] = (struct assay_event){
                .kind = ASSAY_EVENT_FINISH, .request_id = q->id, .t_ns = t, .index = q->n_out,
                .reason = q->aborted ? ASSAY_FINISH_ABORT : ASSAY_FINISH_LENGTH};
            e->live[i] = e->live[--e->n_live];
            continue;
        }
        i++;
    }
    *events = e->events;
    *n_events = n;
    return ASSAY_OK;
}

static enum assay_status e_abort(void *self, uint64_t id)
{
    struct echo *e = self;
    for (int i = 0; i < e->n_live; i++) {
        if (e->live[i].id == id && !e->live[i].aborted) {
            e->live[i].aborted = 1;
            return ASSAY_OK;
        }
    }
    return ASSAY_ERR_NOT_FOUND;
}

static void e_free(void *self)
{
    free(self);
}

static enum assay_status e_info(void *self, struct assay_adapter_info *out)
{
    (void)self;
    out->name = "echo";
    out->spec = "echo (the plugin cannot know its path)";
    out->model_name = "echo";
    out->weights_sha256 = "";
    out->vocab = 260;
    out->n_ctx = 4096;
    out->deterministic_seeds = true;
    return ASSAY_OK;
}

static const char *e_last_error(void *self)
{
    return ((struct echo *)self)->error;
}

static const struct assay_adapter_vtable k_vt = {
#ifdef PLUGIN_ABI
    .abi_version = ASSAY_ADAPTER_ABI_VERSION + 1,
#else
    .abi_version = ASSAY_ADAPTER_ABI_VERSION,
#endif
    .name = "echo",
    .add_request = e_add,
    .has_work = e_has_work,
#ifndef PLUGIN_NO_STEP
    .step = e_step,
#endif
    .abort = e_abort,
    .free = e_free,
    .info = e_info,
    .last_error = e_last_error,
};

enum assay_status assay_plugin_open(const char *options, struct assay_adapter *out, char *err,
                                    size_t err_size)
{
    out->vt = NULL;
    out->self = NULL;
#ifdef PLUGIN_NO_STEP
    (void)e_step; /* left out of the vtable on purpose */
#endif
    long delay = 0;
    if (options[0] != '\0' && sscanf(options, "delay_us=%ld", &delay) != 1) {
        snprintf(err, err_size, "expected delay_us=N, got '%s'", options);
        return ASSAY_ERR_INVALID;
    }
#ifdef PLUGIN_ABI
    /* assay refuses this plugin and, unable to trust a vtable of another
     * ABI to free it, deliberately leaves the engine allocated
     * (adapters/plugin.c); in static storage, that leaves nothing for
     * LeakSanitizer to report. */
    static struct echo e_static;
    memset(&e_static, 0, sizeof e_static);
    struct echo *e = &e_static;
#else
    struct echo *e = calloc(1, sizeof *e);
#endif
    if (e == NULL) {
        snprintf(err, err_size, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    e->delay_us = delay;
    out->vt = &k_vt;
    out->self = e;
    return ASSAY_OK;
}

#else

/* A library, but not a plugin. */
int assay_plugin_fixture_not_a_plugin(void);
int assay_plugin_fixture_not_a_plugin(void)
{
    return 42;
}

#endif
