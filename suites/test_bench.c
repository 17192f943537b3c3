/* Unit tests of bench/: metric definitions on hand-made records, the
 * arrival processes, and the generators against the null engine and
 * against test adapters that sleep, refuse, fail, get stuck or break;
 * several runs, the JSON result, the seed table and allocation failures.
 * Percentiles, the sufficiency bound, the lateness histogram, the spread
 * and the SLO reader are test_bench_stats.c's. Time-dependent assertions
 * compare the open loop with the closed loop on the same slow adapter, with
 * margins that a noisy machine does not erase; none asserts a speed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/loadgen.h"
#include "bench/metrics.h"
#include "bench/null_engine.h"
#include "bench/seedtable.h"
#include "bench/slo.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/status.h"
#include "support.h"

#define MS 1000000LL

/* ---- workloads built in code ------------------------------------------- */

/* n requests with 4-token prompts; max_tokens[i] (or mt for all when the
 * array is NULL); arrivals from arrival_s (or 0 when NULL). */
static struct assay_workload *make_workload(int32_t n, const int32_t *max_tokens, int32_t mt,
                                            const double *arrival_s)
{
    struct assay_workload *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->n = n;
    w->reqs = calloc((size_t)n, sizeof *w->reqs);
    w->n_tokens = 4 * (int64_t)n;
    w->token_store = calloc((size_t)w->n_tokens, sizeof(int32_t));
    assert_non_null(w->reqs);
    assert_non_null(w->token_store);
    snprintf(w->name, sizeof w->name, "test-%d", (int)n);
    snprintf(w->lengths, sizeof w->lengths, "prompt 4, output %d", (int)mt);
    snprintf(w->arrivals, sizeof w->arrivals, "as generated");
    for (int32_t i = 0; i < n; i++) {
        struct assay_workload_request *q = &w->reqs[i];
        q->id = 1000 + (uint64_t)i;
        q->arrival_s = arrival_s != NULL ? arrival_s[i] : 0.0;
        q->prompt = w->token_store + 4 * i;
        for (int k = 0; k < 4; k++) {
            q->prompt[k] = (int32_t)((i * 7 + k) % 256);
        }
        q->prompt_len = 4;
        q->max_tokens = max_tokens != NULL ? max_tokens[i] : mt;
        q->stop_token = -1;
        q->abort_after = -1;
        q->abort_step = -1;
        q->sampling = assay_sampling_greedy();
    }
    return w;
}

static void free_workload(struct assay_workload *w)
{
    if (w != NULL) {
        free(w->reqs);
        free(w->token_store);
        free(w);
    }
}

static struct assay_adapter open_null(int32_t max_requests, int64_t max_events)
{
    struct assay_null_engine_params np = assay_null_engine_default_params();
    np.max_requests = max_requests;
    np.max_events = max_events;
    struct assay_adapter a;
    assert_int_equal(assay_null_engine_open(&np, &a), ASSAY_OK);
    return a;
}

static struct assay_loadgen_params open_params(enum assay_arrival_kind arrival, double rate)
{
    struct assay_loadgen_params p = assay_loadgen_default_params();
    p.kind = ASSAY_LOADGEN_OPEN;
    p.arrival = arrival;
    p.rate = rate;
    p.seed = 7;
    p.warmup = 0;
    p.timeout_s = 30.0;
    return p;
}

static struct assay_loadgen_params closed_params(int32_t workers)
{
    struct assay_loadgen_params p = assay_loadgen_default_params();
    p.kind = ASSAY_LOADGEN_CLOSED;
    p.n_workers = workers;
    p.warmup = 0;
    p.timeout_s = 30.0;
    return p;
}

/* Every record has a final outcome, and the counts add up to n. */
static void assert_all_accounted(const struct assay_loadgen_result *r)
{
    int32_t counts[7] = {0};
    for (int32_t i = 0; i < r->n; i++) {
        assert_true(r->records[i].outcome != ASSAY_OUTCOME_IN_FLIGHT);
        counts[r->records[i].outcome]++;
    }
    int32_t total = 0;
    for (int k = 0; k < 7; k++) {
        total += counts[k];
    }
    assert_int_equal(total, r->n);
}

/* ---- a test adapter that wraps another ---------------------------------- */

#define WRAP_QUEUE 4096
#define WRAP_EVENTS (1 << 16)

/* Modes, combinable: sleep in every step; serve one request at a time
 * (queueing the rest, which makes the null engine a serial server of
 * service time sleep_ns); turn the FINISH of every third id into ERROR;
 * put a SPEC_ROUND before every TOKEN; break (return an error, then fail
 * every live request) at a given step. It counts live requests itself. */
struct wrap {
    struct assay_adapter inner;
    int64_t sleep_ns;
    bool serial;
    bool fail_every_third;
    bool spec_rounds;
    bool dup_tokens;       /* deliver every TOKEN twice */
    bool stray_events;     /* a TOKEN for an id nobody sent, every step */
    int64_t break_at_step; /* 0: never */
    int64_t n_steps;
    bool broken;
    struct {
        uint64_t id;
        int32_t prompt_len, max_tokens;
    } queue[WRAP_QUEUE];
    int32_t q_head, q_len;
    int32_t prompt[256];
    int32_t live, max_live;
    struct assay_event *events;
    /* Per request (the first WRAP_TRACKED handed in): its id, the
     * requests live once it was handed in (itself included), the step count
     * then, and the step count when its first token came out. */
    struct {
        uint64_t id;
        int32_t depth;
        int64_t step_in, step_first;
    } tracked[64];
    int32_t n_tracked;
};
#define WRAP_TRACKED 64

static enum assay_status w_add(void *self, const struct assay_request *req)
{
    struct wrap *w = self;
    enum assay_status st = ASSAY_OK;
    if (w->serial) {
        if (w->q_len == WRAP_QUEUE || req->prompt_len > 256) {
            return ASSAY_ERR_FULL;
        }
        int32_t k = (w->q_head + w->q_len) % WRAP_QUEUE;
        w->queue[k].id = req->id;
        w->queue[k].prompt_len = req->prompt_len;
        w->queue[k].max_tokens = req->max_tokens;
        w->q_len++;
    } else {
        st = w->inner.vt->add_request(w->inner.self, req);
    }
    if (st == ASSAY_OK) {
        w->live++;
        w->max_live = w->live > w->max_live ? w->live : w->max_live;
        if (w->n_tracked < WRAP_TRACKED) {
            w->tracked[w->n_tracked].id = req->id;
            w->tracked[w->n_tracked].depth = w->live;
            w->tracked[w->n_tracked].step_in = w->n_steps;
            w->tracked[w->n_tracked].step_first = -1;
            w->n_tracked++;
        }
    }
    return st;
}

static bool w_has_work(void *self)
{
    struct wrap *w = self;
    return w->q_len > 0 || w->inner.vt->has_work(w->inner.self);
}

static enum assay_status w_step(void *self, const struct assay_event **events, size_t *n_events)
{
    struct wrap *w = self;
    w->n_steps++;
    if (w->serial && w->q_len > 0 && !w->inner.vt->has_work(w->inner.self)) {
        struct assay_request req = {
            .id = w->queue[w->q_head].id,
            .prompt = w->prompt,
            .prompt_len = w->queue[w->q_head].prompt_len,
            .max_tokens = w->queue[w->q_head].max_tokens,
            .stop_token = -1,
            .sampling = assay_sampling_greedy(),
        };
        assert_int_equal(w->inner.vt->add_request(w->inner.self, &req), ASSAY_OK);
        w->q_head = (w->q_head + 1) % WRAP_QUEUE;
        w->q_len--;
    }
    if (w->sleep_ns > 0) {
        assay_sleep_until_ns(assay_now_ns() + w->sleep_ns);
    }
    const struct assay_event *in = NULL;
    size_t n_in = 0;
    assert_int_equal(w->inner.vt->step(w->inner.self, &in, &n_in), ASSAY_OK);
    enum assay_status st = ASSAY_OK;
    if (w->break_at_step > 0 && w->n_steps == w->break_at_step) {
        w->broken = true;
        st = ASSAY_ERR_INTERNAL;
    }
    size_t n = 0;
    for (size_t i = 0; i < n_in; i++) {
        struct assay_event ev = in[i];
        for (int32_t k = 0; ev.kind == ASSAY_EVENT_TOKEN && k < w->n_tracked; k++) {
            if (w->tracked[k].id == ev.request_id && w->tracked[k].step_first < 0) {
                w->tracked[k].step_first = w->n_steps;
            }
        }
        if (w->spec_rounds && ev.kind == ASSAY_EVENT_TOKEN) {
            w->events[n++] = (struct assay_event){.kind = ASSAY_EVENT_SPEC_ROUND,
                                                  .request_id = ev.request_id, .t_ns = ev.t_ns,
                                                  .index = ev.index, .n_drafted = 4,
                                                  .n_accepted = 1};
        }
        if (ev.kind == ASSAY_EVENT_FINISH) {
            w->live--;
            if (w->broken || (w->fail_every_third && ev.request_id % 3 == 0)) {
                ev.reason = ASSAY_FINISH_ERROR;
                ev.error = ASSAY_ERR_INTERNAL;
                ev.message = "planted by the test wrapper";
            }
        }
        assert_true(n + 2 < WRAP_EVENTS);
        w->events[n++] = ev;
        if (w->dup_tokens && ev.kind == ASSAY_EVENT_TOKEN) {
            w->events[n++] = ev;
        }
    }
    if (w->stray_events) {
        w->events[n++] = (struct assay_event){.kind = ASSAY_EVENT_TOKEN, .request_id = 999999,
                                              .t_ns = assay_now_ns()};
    }
    *events = w->events;
    *n_events = n;
    return st;
}

static enum assay_status w_abort(void *self, uint64_t id)
{
    struct wrap *w = self;
    return w->inner.vt->abort(w->inner.self, id);
}

static void w_free(void *self)
{
    struct wrap *w = self;
    assay_adapter_close(&w->inner);
    free(w->events);
    free(w);
}

static const struct assay_adapter_vtable k_wrap_vt = {
    .abi_version = ASSAY_ADAPTER_ABI_VERSION,
    .name = "test-wrap",
    .add_request = w_add,
    .has_work = w_has_work,
    .step = w_step,
    .abort = w_abort,
    .free = w_free,
};

/* A wrapper around a fresh null engine; *wp gives access to its counters. */
static struct assay_adapter open_wrap(struct wrap **wp)
{
    struct wrap *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->events = calloc(WRAP_EVENTS, sizeof *w->events);
    assert_non_null(w->events);
    w->inner = open_null(1024, 32768);
    *wp = w;
    return (struct assay_adapter){&k_wrap_vt, w};
}

/* ---- an adapter that accepts and never answers --------------------------- */

struct stuck {
    int32_t live;
};

static enum assay_status s_add(void *self, const struct assay_request *req)
{
    (void)req;
    ((struct stuck *)self)->live++;
    return ASSAY_OK;
}

static bool s_has_work(void *self)
{
    return ((struct stuck *)self)->live > 0;
}

static enum assay_status s_step(void *self, const struct assay_event **events, size_t *n_events)
{
    (void)self;
    *events = NULL;
    *n_events = 0;
    return ASSAY_OK;
}

static enum assay_status s_abort(void *self, uint64_t id)
{
    (void)self;
    (void)id;
    return ASSAY_OK; /* and still never finishes it */
}

static void s_free(void *self)
{
    free(self);
}

static const struct assay_adapter_vtable k_stuck_vt = {
    .abi_version = ASSAY_ADAPTER_ABI_VERSION,
    .name = "test-stuck",
    .add_request = s_add,
    .has_work = s_has_work,
    .step = s_step,
    .abort = s_abort,
    .free = s_free,
};

/* ---- metric definitions on hand-made records ---------------------------- */

static void test_metric_definitions(void **state)
{
    (void)state;
    const int32_t mt[3] = {3, 1, 2};
    struct assay_workload *w = make_workload(3, mt, 0, NULL);
    struct assay_loadgen_result *r = NULL;
    assert_int_equal(assay_loadgen_result_init(&r, w), ASSAY_OK);
    assert_int_equal(r->pool_size, 6);
    const int64_t B = 1000 * MS;
    r->params = open_params(ASSAY_ARRIVAL_POISSON, 5.0);
    r->n_warmup = 0;
    r->has_offered_rate = true;
    r->offered_rate = 5.0;
    r->schedule_rate = 4.0;
    r->t_start_ns = B;
    r->t_end_ns = B + 1700 * MS;
    int64_t *pool = r->token_pool;
    struct assay_bench_record *q = r->records;
    for (int i = 0; i < 3; i++) {
        q[i].max_tokens = mt[i];
        q[i].token_ns = pool;
        pool += mt[i];
    }
    /* r0: scheduled 0, handed in 1 ms late, tokens at 100, 150, 250 ms. */
    q[0].scheduled_ns = B;
    q[0].submitted_ns = B + 1 * MS;
    q[0].n_tokens = 3;
    q[0].token_ns[0] = q[0].first_token_ns = B + 100 * MS;
    q[0].token_ns[1] = B + 150 * MS;
    q[0].token_ns[2] = q[0].finish_ns = B + 250 * MS;
    q[0].outcome = ASSAY_OUTCOME_OK;
    q[0].reason = ASSAY_FINISH_LENGTH;
    /* r1: scheduled at 1 s, one token at 1.3 s. */
    q[1].scheduled_ns = q[1].submitted_ns = B + 1000 * MS;
    q[1].n_tokens = 1;
    q[1].token_ns[0] = q[1].first_token_ns = q[1].finish_ns = B + 1300 * MS;
    q[1].outcome = ASSAY_OUTCOME_OK;
    q[1].reason = ASSAY_FINISH_STOP;
    /* r2: failed after two tokens. */
    q[2].scheduled_ns = B + 1500 * MS;
    q[2].submitted_ns = B + 1502 * MS;
    q[2].n_tokens = 2;
    q[2].token_ns[0] = q[2].first_token_ns = B + 1600 * MS;
    q[2].token_ns[1] = q[2].finish_ns = B + 1700 * MS;
    q[2].outcome = ASSAY_OUTCOME_ERROR;
    q[2].reason = ASSAY_FINISH_ERROR;

    struct assay_slo slo = {.ttft_s = 0.2, .tpot_s = 0.08};
    struct assay_bench_summary s;
    assert_int_equal(assay_bench_summarize(r, &slo, &s), ASSAY_OK);
    const double eps = 1e-12;
    assert_int_equal(s.n_requests, 3);
    assert_int_equal(s.n_ok, 2);
    assert_int_equal(s.n_error, 1);
    assert_int_equal(s.output_tokens, 4);
    /* TTFT from the *scheduled* time: 0.100 for r0, not 0.099. */
    assert_int_equal(s.ttft.n, 2);
    assert_true(assay_test_close_to("ttft p50", s.ttft.v[ASSAY_PCTL_P50], 0.100, eps, 0));
    assert_true(assay_test_close_to("ttft p90", s.ttft.v[ASSAY_PCTL_P90], 0.300, eps, 0));
    assert_true(assay_test_close_to("ttft max", s.ttft.v[ASSAY_PCTL_MAX], 0.300, eps, 0));
    /* TPOT = (E2E - TTFT) / (n - 1) = (0.25 - 0.1) / 2, r0 only. */
    assert_int_equal(s.tpot.n, 1);
    assert_true(assay_test_close_to("tpot", s.tpot.v[ASSAY_PCTL_P50], 0.075, eps, 0));
    /* ITL: every gap of the OK requests: 0.05 and 0.10. */
    assert_int_equal(s.itl.n, 2);
    assert_true(assay_test_close_to("itl p50", s.itl.v[ASSAY_PCTL_P50], 0.05, eps, 0));
    assert_true(assay_test_close_to("itl max", s.itl.v[ASSAY_PCTL_MAX], 0.10, eps, 0));
    assert_int_equal(s.e2e.n, 2);
    assert_true(assay_test_close_to("e2e p50", s.e2e.v[ASSAY_PCTL_P50], 0.25, eps, 0));
    assert_true(assay_test_close_to("e2e max", s.e2e.v[ASSAY_PCTL_MAX], 0.30, eps, 0));
    /* Lateness over every request handed in: {0.001, 0, 0.002}. */
    assert_int_equal(s.lateness.n, 3);
    assert_true(assay_test_close_to("late p50", s.lateness.v[ASSAY_PCTL_P50], 0.001, eps, 0));
    assert_true(assay_test_close_to("late max", s.lateness.v[ASSAY_PCTL_MAX], 0.002, eps, 0));
    assert_int_equal(s.lateness_hist.count[0], 1);
    assert_int_equal(s.lateness_hist.count[13], 1);
    assert_int_equal(s.lateness_hist.count[14], 1);
    /* Rates over 1.7 s. */
    assert_true(assay_test_close_to("duration", s.duration_s, 1.7, eps, 0));
    assert_true(assay_test_close_to("achieved", s.achieved_rate, 2 / 1.7, eps, 0));
    assert_true(assay_test_close_to("tokens/s", s.tokens_per_s, 4 / 1.7, eps, 0));
    assert_true(s.has_offered_rate && s.offered_rate == 5.0 && s.schedule_rate == 4.0);
    /* Goodput: r0 meets both, r1's TTFT 0.3 > 0.2, r2 failed. */
    assert_int_equal(s.n_good, 1);
    assert_true(assay_test_close_to("goodput", s.goodput_fraction, 1.0 / 3.0, eps, 0));
    assert_true(assay_test_close_to("goodput rate", s.goodput_rate, 1 / 1.7, eps, 0));
    /* r0's TPOT 0.075 > 0.07 fails it; r1 has no TPOT and meets TTFT 0.35. */
    slo = (struct assay_slo){.ttft_s = 0.35, .tpot_s = 0.07};
    assert_int_equal(assay_bench_summarize(r, &slo, &s), ASSAY_OK);
    assert_int_equal(s.n_good, 1);
    slo.tpot_s = 0.08;
    assert_int_equal(assay_bench_summarize(r, &slo, &s), ASSAY_OK);
    assert_int_equal(s.n_good, 2);
    /* The bounds are inclusive: TTFT exactly at the bound passes. */
    slo = (struct assay_slo){.ttft_s = 0.1, .tpot_s = 0.075};
    assert_int_equal(assay_bench_summarize(r, &slo, &s), ASSAY_OK);
    assert_int_equal(s.n_good, 1);
    /* No SLO: no goodput. A closed loop: no offered rate, no lateness. */
    r->params.kind = ASSAY_LOADGEN_CLOSED;
    r->has_offered_rate = false;
    assert_int_equal(assay_bench_summarize(r, NULL, &s), ASSAY_OK);
    assert_true(isnan(s.goodput_fraction) && s.n_good == 0);
    assert_true(isnan(s.offered_rate) && !s.has_offered_rate);
    assert_int_equal(s.lateness.n, 0);
    /* A bad SLO, and a record still in flight, are refused. */
    slo.ttft_s = -1;
    assert_int_equal(assay_bench_summarize(r, &slo, &s), ASSAY_ERR_INVALID);
    q[1].outcome = ASSAY_OUTCOME_IN_FLIGHT;
    assert_int_equal(assay_bench_summarize(r, NULL, &s), ASSAY_ERR_INVALID);
    assay_loadgen_result_free(r);
    free_workload(w);
}

/* ---- arrival processes --------------------------------------------------- */

static void test_schedules(void **state)
{
    (void)state;
    const int32_t n = 20001;
    struct assay_workload *w = make_workload(n, NULL, 1, NULL);
    double *a = calloc((size_t)n, sizeof(double));
    double *b = calloc((size_t)n, sizeof(double));
    assert_non_null(a);
    assert_non_null(b);

    /* Constant: exactly i / rate. */
    struct assay_loadgen_params p = open_params(ASSAY_ARRIVAL_CONSTANT, 250.0);
    assert_int_equal(assay_loadgen_schedule(w, &p, a), ASSAY_OK);
    for (int32_t i = 0; i < n; i++) {
        assert_true(a[i] == i / 250.0);
    }

    /* Poisson: mean gap 1/rate and coefficient of variation 1, within
     * 6 standard errors (the seed is fixed, so this cannot flicker). */
    const double kinds_cv[2] = {1.0, 2.0};
    for (int kind = 0; kind < 2; kind++) {
        p = open_params(kind == 0 ? ASSAY_ARRIVAL_POISSON : ASSAY_ARRIVAL_GAMMA, 100.0);
        p.cv = kinds_cv[kind];
        assert_int_equal(assay_loadgen_schedule(w, &p, a), ASSAY_OK);
        assert_true(a[0] == 0.0);
        double sum = 0, sum2 = 0;
        for (int32_t i = 1; i < n; i++) {
            double g = a[i] - a[i - 1];
            assert_true(g >= 0.0);
            sum += g;
            sum2 += g * g;
        }
        double m = sum / (n - 1), sd = sqrt(sum2 / (n - 1) - m * m);
        double cv = sd / m;
        double se_mean = p.cv * 0.01 / sqrt(n - 1.0);
        assert_true(assay_test_close_to("mean gap", m, 0.01, 6 * se_mean, 0));
        assert_true(assay_test_close_to("gap cv", cv, p.cv, 0.06 * p.cv, 0));
        /* Same seed, same schedule; rate r is the rate-1 schedule over r
         * (division by 4 is exact in binary). */
        p.rate = 1.0;
        assert_int_equal(assay_loadgen_schedule(w, &p, b), ASSAY_OK);
        p.rate = 4.0;
        assert_int_equal(assay_loadgen_schedule(w, &p, a), ASSAY_OK);
        for (int32_t i = 0; i < n; i++) {
            assert_true(a[i] == b[i] / 4.0);
        }
        p.seed = 8;
        assert_int_equal(assay_loadgen_schedule(w, &p, a), ASSAY_OK);
        assert_true(a[1] != b[1] / 4.0);
    }

    /* Bad parameters. */
    p = open_params(ASSAY_ARRIVAL_POISSON, 100.0);
    p.seed = 0;
    assert_int_equal(assay_loadgen_schedule(w, &p, a), ASSAY_ERR_INVALID);
    p.seed = 1ull << 32; /* GSL would keep 0 of it */
    assert_int_equal(assay_loadgen_schedule(w, &p, a), ASSAY_ERR_INVALID);
    p.seed = 1;
    p.rate = 0.0;
    assert_int_equal(assay_loadgen_schedule(w, &p, a), ASSAY_ERR_INVALID);
    p = open_params(ASSAY_ARRIVAL_GAMMA, 100.0);
    p.cv = NAN;
    assert_int_equal(assay_loadgen_schedule(w, &p, a), ASSAY_ERR_INVALID);
    free_workload(w);

    /* A trace: copied relative to its first arrival; unsorted is refused. */
    double arr[4] = {2.0, 2.5, 2.5, 4.0};
    w = make_workload(4, NULL, 1, arr);
    p = open_params(ASSAY_ARRIVAL_TRACE, 0.0);
    assert_int_equal(assay_loadgen_schedule(w, &p, a), ASSAY_OK);
    assert_true(a[0] == 0.0 && a[1] == 0.5 && a[2] == 0.5 && a[3] == 2.0);
    w->reqs[2].arrival_s = 2.4;
    assert_int_equal(assay_loadgen_schedule(w, &p, a), ASSAY_ERR_INVALID);
    free_workload(w);
    free(a);
    free(b);
}

/* ---- the generators ------------------------------------------------------ */

static void test_open_loop_null_engine(void **state)
{
    (void)state;
    const int32_t n = 300;
    int32_t mt[300];
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        mt[i] = 1 + i % 16;
        total += mt[i];
    }
    struct assay_workload *w = make_workload(n, mt, 0, NULL);
    struct assay_adapter a = open_null(1024, 65536);
    struct assay_loadgen_result *r = NULL;
    assert_int_equal(assay_loadgen_result_init(&r, w), ASSAY_OK);
    struct assay_loadgen_params p = open_params(ASSAY_ARRIVAL_POISSON, 5000.0);
    p.warmup = 10;
    assert_int_equal(assay_loadgen_run(&a, w, &p, r), ASSAY_OK);
    assert_all_accounted(r);
    double *sched = calloc((size_t)n, sizeof(double));
    assert_non_null(sched);
    assert_int_equal(assay_loadgen_schedule(w, &p, sched), ASSAY_OK);
    for (int32_t i = 0; i < n; i++) {
        const struct assay_bench_record *q = &r->records[i];
        assert_int_equal(q->outcome, ASSAY_OUTCOME_OK);
        assert_int_equal(q->reason, ASSAY_FINISH_LENGTH);
        assert_int_equal(q->n_tokens, mt[i]);
        assert_int_equal(q->workload_id, 1000 + (uint64_t)i);
        assert_true(q->submitted_ns >= q->scheduled_ns);
        assert_true(q->first_token_ns >= q->submitted_ns);
        assert_true(q->finish_ns >= q->first_token_ns);
        assert_true(q->token_ns[0] == q->first_token_ns);
        for (int32_t k = 1; k < q->n_tokens; k++) {
            assert_true(q->token_ns[k] >= q->token_ns[k - 1]);
        }
        assert_true(q->warmup == (i < 10));
        /* The schedule is the precomputed one, to the nanosecond. */
        if (i > 10) {
            int64_t want = llround((sched[i] - sched[10]) * 1e9);
            int64_t got = q->scheduled_ns - r->records[10].scheduled_ns;
            assert_true(llabs(got - want) <= 1);
        }
    }
    assert_int_equal(r->n_bad_events, 0);
    assert_true(r->has_offered_rate && r->offered_rate == 5000.0);
    struct assay_bench_summary s;
    assert_int_equal(assay_bench_summarize(r, NULL, &s), ASSAY_OK);
    assert_int_equal(s.n_requests, n - 10);
    assert_int_equal(s.n_ok, n - 10);
    int64_t measured_tokens = 0;
    for (int32_t i = 10; i < n; i++) {
        measured_tokens += mt[i];
    }
    assert_int_equal(s.output_tokens, measured_tokens);
    assert_true(measured_tokens < total);
    assert_int_equal(s.lateness.n, n - 10);
    assert_int_equal(s.ttft.n, n - 10);
    /* Nothing but a sleep between arrivals: an unloaded generator is on
     * time to well within a second even on a busy machine. */
    assert_true(s.lateness.v[ASSAY_PCTL_P50] < 0.5);
    free(sched);
    assay_loadgen_result_free(r);
    assay_adapter_close(&a);
    free_workload(w);
}

static void test_open_loop_rejections(void **state)
{
    (void)state;
    struct assay_workload *w = make_workload(10, NULL, 3, NULL); /* all at 0 */
    struct assay_adapter a = open_null(4, 1000);
    struct assay_loadgen_result *r = NULL;
    assert_int_equal(assay_loadgen_result_init(&r, w), ASSAY_OK);
    struct assay_loadgen_params p = open_params(ASSAY_ARRIVAL_TRACE, 0.0);
    assert_int_equal(assay_loadgen_run(&a, w, &p, r), ASSAY_OK);
    assert_all_accounted(r);
    int32_t ok = 0, rejected = 0;
    for (int32_t i = 0; i < 10; i++) {
        const struct assay_bench_record *q = &r->records[i];
        if (q->outcome == ASSAY_OUTCOME_REJECTED) {
            rejected++;
            assert_int_equal(q->error, ASSAY_ERR_FULL);
            assert_true(q->finish_ns >= q->submitted_ns && q->submitted_ns != 0);
        } else {
            assert_int_equal(q->outcome, ASSAY_OUTCOME_OK);
            ok++;
        }
    }
    assert_int_equal(ok, 4);
    assert_int_equal(rejected, 6);
    assert_true(isinf(r->offered_rate)); /* a burst */
    struct assay_slo slo = {.ttft_s = 100, .tpot_s = 100};
    struct assay_bench_summary s;
    assert_int_equal(assay_bench_summarize(r, &slo, &s), ASSAY_OK);
    assert_int_equal(s.n_rejected, 6);
    assert_int_equal(s.n_ok, 4);
    assert_int_equal(s.n_good, 4);
    assert_true(assay_test_close_to("goodput", s.goodput_fraction, 0.4, 1e-15, 0));
    assert_int_equal(s.lateness.n, 10); /* the rejected were handed in */
    assay_loadgen_result_free(r);
    assay_adapter_close(&a);
    free_workload(w);
}

static void test_errors_and_spec_rounds(void **state)
{
    (void)state;
    const int32_t n = 30;
    struct assay_workload *w = make_workload(n, NULL, 5, NULL);
    struct wrap *wr = NULL;
    struct assay_adapter a = open_wrap(&wr);
    wr->fail_every_third = true;
    wr->spec_rounds = true;
    struct assay_loadgen_result *r = NULL;
    assert_int_equal(assay_loadgen_result_init(&r, w), ASSAY_OK);
    for (int kind = 0; kind < 2; kind++) {
        struct assay_loadgen_params p =
            kind == 0 ? open_params(ASSAY_ARRIVAL_CONSTANT, 3000.0) : closed_params(4);
        assert_int_equal(assay_loadgen_run(&a, w, &p, r), ASSAY_OK);
        assert_all_accounted(r);
        assert_int_equal(r->n_bad_events, 0);
        for (int32_t i = 0; i < n; i++) {
            const struct assay_bench_record *q = &r->records[i];
            assert_int_equal(q->n_tokens, 5); /* SPEC_ROUND events were not tokens */
            if (i % 3 == 0) {
                assert_int_equal(q->outcome, ASSAY_OUTCOME_ERROR);
                assert_int_equal(q->error, ASSAY_ERR_INTERNAL);
            } else {
                assert_int_equal(q->outcome, ASSAY_OUTCOME_OK);
            }
        }
        struct assay_slo slo = {.ttft_s = 100, .tpot_s = 100};
        struct assay_bench_summary s;
        assert_int_equal(assay_bench_summarize(r, &slo, &s), ASSAY_OK);
        assert_int_equal(s.n_error, 10);
        assert_int_equal(s.n_ok, 20);
        assert_int_equal(s.n_good, 20);
        assert_int_equal(s.ttft.n, 20);
        assert_int_equal(s.output_tokens, 100);
        assert_int_equal(s.itl.n, 20 * 4);
    }
    assay_loadgen_result_free(r);
    assay_adapter_close(&a);
    free_workload(w);
}

/* Protocol breaches are counted, not believed: a token delivered twice,
 * an event for an id never sent. */
static void test_bad_events(void **state)
{
    (void)state;
    const int32_t n = 10;
    struct assay_workload *w = make_workload(n, NULL, 3, NULL);
    struct assay_loadgen_result *r = NULL;
    assert_int_equal(assay_loadgen_result_init(&r, w), ASSAY_OK);
    for (int mode = 0; mode < 3; mode++) {
        struct wrap *wr = NULL;
        struct assay_adapter a = open_wrap(&wr);
        wr->dup_tokens = mode == 1;
        wr->stray_events = mode == 2;
        struct assay_loadgen_params p = closed_params(2);
        assert_int_equal(assay_loadgen_run(&a, w, &p, r), ASSAY_OK);
        assert_all_accounted(r);
        if (mode == 0) {
            assert_int_equal(r->n_bad_events, 0);
        } else if (mode == 1) {
            /* Per request: 6 TOKEN events for 3 tokens; the first is in
             * order, the 5 after it are out of order, and 3 of them do not
             * fit in max_tokens. */
            assert_int_equal(r->n_bad_events, n * (5 + 3));
            for (int32_t i = 0; i < n; i++) {
                assert_int_equal(r->records[i].n_tokens, 6);
                assert_int_equal(r->records[i].outcome, ASSAY_OUTCOME_OK);
            }
        } else {
            assert_int_equal(r->n_bad_events, r->n_steps);
        }
        assay_adapter_close(&a);
    }
    assay_loadgen_result_free(r);
    free_workload(w);
}

static double median_ttft(const struct assay_loadgen_result *r, int32_t first, int32_t last)
{
    double v[64];
    int32_t m = 0;
    for (int32_t i = first; i < last; i++) {
        v[m++] = (r->records[i].first_token_ns - r->records[i].scheduled_ns) * 1e-9;
    }
    struct assay_latency_summary s;
    assert_int_equal(assay_latency_summarize(v, m, &s), ASSAY_OK);
    return s.v[ASSAY_PCTL_P50];
}

/* The median of v[first..last). */
static double median_of(const double *v, int32_t first, int32_t last)
{
    double x[64];
    int32_t m = 0;
    for (int32_t i = first; i < last; i++) {
        x[m++] = v[i];
    }
    for (int32_t i = 1; i < m; i++) {
        for (int32_t j = i; j > 0 && x[j - 1] > x[j]; j--) {
            double t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    }
    return m % 2 == 1 ? x[m / 2] : 0.5 * (x[m / 2 - 1] + x[m / 2]);
}

/* For each request of the last run, in the order handed in: the queue it
 * joined (depth) and the server's steps it waited before its first token. */
static void queue_counts(const struct wrap *wr, int32_t n, double *depth, double *waited)
{
    assert_int_equal(wr->n_tracked, n);
    for (int32_t i = 0; i < n; i++) {
        assert_true(wr->tracked[i].step_first >= wr->tracked[i].step_in);
        depth[i] = wr->tracked[i].depth;
        waited[i] = (double)(wr->tracked[i].step_first - wr->tracked[i].step_in);
    }
}

/*
 * The heart of the chapter: on a serial server of service time S, an open
 * loop offering 2/S lets a queue grow and charges every request for it; a
 * closed loop of 2 workers never lets it grow. Same adapter, same
 * workload. Asserted by what the generators do, counted, not by how long
 * a busy machine made them take (a late wake-up there moves every time):
 *  - the open loop's queue grows along the run: the requests handed in
 *    last join a queue at least 4 deeper, and wait at least twice the
 *    server's steps, than the first (arrivals keep to the wall clock, so
 *    a slower machine only makes the queue grow faster); the closed loop
 *    never has more than its 2 requests in, nor a request waiting longer
 *    than the one ahead of it takes;
 *  - latency is measured from the schedule and charged with the queue:
 *    every open-loop TTFT is at least S for each step the request waited,
 *    as a step sleeps at least S, and at least its own lateness.
 * The times are printed, for the eye.
 */
static void test_open_vs_closed_queueing(void **state)
{
    (void)state;
    enum { N = 24 };
    const int32_t n = N;
    const int64_t S = 3 * MS;
    struct assay_workload *w = make_workload(n, NULL, 2, NULL);
    struct wrap *wr = NULL;
    struct assay_adapter a = open_wrap(&wr);
    wr->serial = true;
    wr->sleep_ns = S;
    struct assay_loadgen_result *r = NULL;
    assert_int_equal(assay_loadgen_result_init(&r, w), ASSAY_OK);
    double depth[N], waited[N];

    struct assay_loadgen_params p = open_params(ASSAY_ARRIVAL_CONSTANT, 2.0 / (S * 1e-9));
    assert_int_equal(assay_loadgen_run(&a, w, &p, r), ASSAY_OK);
    assert_all_accounted(r);
    queue_counts(wr, n, depth, waited);
    double open_first = median_ttft(r, 0, 6), open_last = median_ttft(r, n - 6, n);
    double depth_first = median_of(depth, 0, 6), depth_last = median_of(depth, n - 6, n);
    double wait_first = median_of(waited, 0, 6), wait_last = median_of(waited, n - 6, n);
    printf("  open loop at 2/S: queue joined (median) first 6 %.1f, last 6 %.1f; steps waited %.1f, "
           "%.1f; deepest %d\n",
           depth_first, depth_last, wait_first, wait_last, (int)wr->max_live);
    assert_true(wr->max_live > 4); /* a queue did form */
    assert_true(depth_last >= depth_first + 4);
    assert_true(wait_last >= 2 * wait_first && wait_last >= wait_first + 2);
    /* Latency is measured from the schedule: TTFT = first token -
     * scheduled, which includes the generator's lateness (arrivals that
     * fell inside a sleeping step were handed in late, and are charged for
     * it) and every step the request waited. */
    int64_t max_late = 0;
    for (int32_t i = 0; i < n; i++) {
        const struct assay_bench_record *q = &r->records[i];
        int64_t late = q->submitted_ns - q->scheduled_ns;
        max_late = late > max_late ? late : max_late;
        int64_t ttft = q->first_token_ns - q->scheduled_ns;
        assert_true(ttft >= late);
    }
    for (int32_t k = 0; k < n; k++) {
        /* tracked[k] is the k-th request handed in; find its record */
        for (int32_t i = 0; i < n; i++) {
            if (w->reqs[i].id == wr->tracked[k].id) {
                int64_t ttft = r->records[i].first_token_ns - r->records[i].scheduled_ns;
                assert_true(ttft >= (int64_t)waited[k] * S);
            }
        }
    }
    struct assay_bench_summary so;
    assert_int_equal(assay_bench_summarize(r, NULL, &so), ASSAY_OK);
    assert_true(max_late > S / 4);
    assert_true(so.lateness.v[ASSAY_PCTL_MAX] * 1e9 >= (double)max_late - 1);

    struct assay_loadgen_params c = closed_params(2);
    wr->max_live = 0;
    wr->n_tracked = 0;
    assert_int_equal(assay_loadgen_run(&a, w, &c, r), ASSAY_OK);
    assert_all_accounted(r);
    assert_int_equal(wr->max_live, 2);
    queue_counts(wr, n, depth, waited);
    double closed_first = median_ttft(r, 0, 6), closed_last = median_ttft(r, n - 6, n);
    double closed_wait_max = 0, closed_depth_max = 0;
    for (int32_t i = 0; i < n; i++) {
        closed_wait_max = fmax(closed_wait_max, waited[i]);
        closed_depth_max = fmax(closed_depth_max, depth[i]);
    }
    struct assay_bench_summary sc;
    assert_int_equal(assay_bench_summarize(r, NULL, &sc), ASSAY_OK);
    printf("  closed loop of 2: queue joined at most %.0f, steps waited at most %.0f\n",
           closed_depth_max, closed_wait_max);
    printf("  S = 3 ms: open TTFT median first 6 %.2f ms, last 6 %.2f ms, p99 %.2f ms;"
           " closed(2) %.2f ms, %.2f ms, p99 %.2f ms\n",
           open_first * 1e3, open_last * 1e3, so.ttft.v[ASSAY_PCTL_P99] * 1e3, closed_first * 1e3,
           closed_last * 1e3, sc.ttft.v[ASSAY_PCTL_P99] * 1e3);
    assert_true(closed_depth_max <= 2);
    /* One request ahead at most: it waits for that one alone, far less
     * than the open loop's last requests wait behind their queue. */
    assert_true(closed_wait_max < wait_last);
    assert_true(!sc.has_offered_rate && isnan(sc.offered_rate));
    assay_loadgen_result_free(r);
    assay_adapter_close(&a);
    free_workload(w);
}

static void test_closed_loop_concurrency(void **state)
{
    (void)state;
    const int32_t n = 40;
    struct assay_workload *w = make_workload(n, NULL, 3, NULL);
    struct assay_loadgen_result *r = NULL;
    assert_int_equal(assay_loadgen_result_init(&r, w), ASSAY_OK);
    const int32_t workers[4] = {1, 3, 8, 64};
    for (int k = 0; k < 4; k++) {
        struct wrap *wr = NULL;
        struct assay_adapter a = open_wrap(&wr);
        wr->sleep_ns = MS / 10;
        struct assay_loadgen_params p = closed_params(workers[k]);
        assert_int_equal(assay_loadgen_run(&a, w, &p, r), ASSAY_OK);
        assert_all_accounted(r);
        int32_t expect = workers[k] < n ? workers[k] : n;
        /* Counted by the adapter itself, not by the generator. */
        assert_int_equal(wr->max_live, expect);
        assert_int_equal(r->max_in_flight, expect);
        assert_false(r->has_offered_rate);
        for (int32_t i = 0; i < n; i++) {
            assert_int_equal(r->records[i].outcome, ASSAY_OUTCOME_OK);
            assert_true(r->records[i].scheduled_ns == r->records[i].submitted_ns);
        }
        assay_adapter_close(&a);
    }
    assay_loadgen_result_free(r);
    free_workload(w);
}

static void test_warmup_discarded(void **state)
{
    (void)state;
    const int32_t n = 20;
    int32_t mt[20];
    for (int32_t i = 0; i < n; i++) {
        mt[i] = i < 5 ? 100 : 2; /* the warm-up requests stand out */
    }
    struct assay_workload *w = make_workload(n, mt, 0, NULL);
    struct assay_adapter a = open_null(64, 4096);
    struct assay_loadgen_result *r = NULL;
    assert_int_equal(assay_loadgen_result_init(&r, w), ASSAY_OK);
    for (int kind = 0; kind < 2; kind++) {
        struct assay_loadgen_params p =
            kind == 0 ? open_params(ASSAY_ARRIVAL_POISSON, 2000.0) : closed_params(2);
        p.warmup = 5;
        assert_int_equal(assay_loadgen_run(&a, w, &p, r), ASSAY_OK);
        assert_int_equal(r->n_warmup, 5);
        for (int32_t i = 0; i < n; i++) {
            assert_true(r->records[i].warmup == (i < 5));
            assert_int_equal(r->records[i].outcome, ASSAY_OUTCOME_OK); /* they did run */
        }
        /* The measured phase starts after the warm-up drained. */
        for (int32_t i = 0; i < 5; i++) {
            assert_true(r->records[i].finish_ns <= r->t_start_ns);
        }
        struct assay_bench_summary s;
        assert_int_equal(assay_bench_summarize(r, NULL, &s), ASSAY_OK);
        assert_int_equal(s.n_warmup, 5);
        assert_int_equal(s.n_requests, 15);
        assert_int_equal(s.output_tokens, 30);
        assert_int_equal(s.ttft.n, 15);
        assert_int_equal(s.itl.n, 15);
    }
    struct assay_loadgen_params p = assay_loadgen_default_params();
    assert_int_equal(assay_loadgen_warmup_count(&p, 48), 4);
    assert_int_equal(assay_loadgen_warmup_count(&p, 200), 8);
    assert_int_equal(assay_loadgen_warmup_count(&p, 9), 0);
    p.warmup = 20;
    assert_int_equal(assay_loadgen_run(&a, w, &p, r), ASSAY_ERR_INVALID); /* nothing measured */
    assay_loadgen_result_free(r);
    assay_adapter_close(&a);
    free_workload(w);
}

static void test_abort_after(void **state)
{
    (void)state;
    struct assay_workload *w = make_workload(6, NULL, 4, NULL);
    w->reqs[1].abort_after = 0;
    w->reqs[4].abort_after = 0;
    struct assay_adapter a = open_null(64, 4096);
    struct assay_loadgen_result *r = NULL;
    assert_int_equal(assay_loadgen_result_init(&r, w), ASSAY_OK);
    struct assay_loadgen_params p = closed_params(2);
    assert_int_equal(assay_loadgen_run(&a, w, &p, r), ASSAY_OK);
    assert_all_accounted(r);
    assert_int_equal(r->records[1].outcome, ASSAY_OUTCOME_ABORTED);
    assert_int_equal(r->records[4].outcome, ASSAY_OUTCOME_ABORTED);
    struct assay_bench_summary s;
    struct assay_slo slo = {.ttft_s = 100, .tpot_s = 100};
    assert_int_equal(assay_bench_summarize(r, &slo, &s), ASSAY_OK);
    assert_int_equal(s.n_aborted, 2);
    assert_int_equal(s.n_good, 4);
    assay_loadgen_result_free(r);
    assay_adapter_close(&a);
    free_workload(w);
}

static void test_timeout_and_broken_adapter(void **state)
{
    (void)state;
    const int32_t n = 50;
    struct assay_workload *w = make_workload(n, NULL, 2, NULL);
    struct assay_loadgen_result *r = NULL;
    assert_int_equal(assay_loadgen_result_init(&r, w), ASSAY_OK);

    /* Stuck: accepts, never answers. The run ends at its deadline. */
    struct stuck *sk = calloc(1, sizeof *sk);
    assert_non_null(sk);
    struct assay_adapter a = {&k_stuck_vt, sk};
    struct assay_loadgen_params p = open_params(ASSAY_ARRIVAL_CONSTANT, 1000.0);
    p.timeout_s = 0.03;
    int64_t t0 = assay_now_ns();
    assert_int_equal(assay_loadgen_run(&a, w, &p, r), ASSAY_ERR_TIMEOUT);
    assert_true(assay_now_ns() - t0 < 3000 * MS);
    assert_true(r->timed_out);
    assert_all_accounted(r);
    struct assay_bench_summary s;
    assert_int_equal(assay_bench_summarize(r, NULL, &s), ASSAY_OK);
    assert_int_equal(s.n_ok, 0);
    /* How many went out before the deadline depends on scheduling (a loaded
     * machine may send none); that every one is lost or unsent does not. */
    assert_int_equal(s.n_lost + s.n_unsent, n);
    assay_adapter_close(&a);

    /* Broken at its 5th step: no request handed in after it, the rest
     * finish with ERROR, every one is accounted for. */
    for (int kind = 0; kind < 2; kind++) {
        struct wrap *wr = NULL;
        a = open_wrap(&wr);
        wr->break_at_step = 5;
        p = kind == 0 ? open_params(ASSAY_ARRIVAL_CONSTANT, 2000.0) : closed_params(3);
        assert_int_equal(assay_loadgen_run(&a, w, &p, r), ASSAY_ERR_INTERNAL);
        assert_int_equal(r->adapter_status, ASSAY_ERR_INTERNAL);
        assert_all_accounted(r);
        assert_int_equal(assay_bench_summarize(r, NULL, &s), ASSAY_OK);
        assert_true(s.n_unsent > 0);
        assert_true(s.n_ok > 0);
        assert_int_equal(s.n_ok + s.n_error + s.n_unsent, n);
        assert_false(a.vt->has_work(a.self));
        assay_adapter_close(&a);
    }
    assay_loadgen_result_free(r);
    free_workload(w);
}

/* ---- several runs, JSON, the seed table and the sweep -------------------- */

static void test_bench_run_json(void **state)
{
    (void)state;
    struct assay_workload *w = make_workload(60, NULL, 4, NULL);
    struct assay_adapter a = open_null(256, 4096);
    struct assay_slo slo = {.ttft_s = 1.0, .tpot_s = 1.0};
    for (int kind = 0; kind < 2; kind++) {
        struct assay_loadgen_params p =
            kind == 0 ? open_params(ASSAY_ARRIVAL_POISSON, 3000.0) : closed_params(4);
        p.warmup = ASSAY_LOADGEN_WARMUP_AUTO;
        struct assay_bench_result br;
        assert_int_equal(assay_bench_run(&a, w, &p, &slo, 3, &br), ASSAY_OK);
        assert_int_equal(br.n_runs, 3);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(br.runs[i].n_warmup, 6);
            assert_int_equal(br.runs[i].n_requests, 54);
            assert_int_equal(br.runs[i].n_ok, 54);
            assert_true(kind == 1 || br.runs[i].params.seed == 7 + (uint64_t)i);
        }
        const struct assay_spread *sp = &br.spread.ttft[ASSAY_PCTL_P99];
        assert_true(sp->min <= sp->median && sp->median <= sp->max);
        cJSON *j = NULL;
        assert_int_equal(assay_bench_result_to_json(&br, w, &j), ASSAY_OK);
        char *text = cJSON_PrintUnformatted(j);
        assert_non_null(text);
        cJSON *back = cJSON_Parse(text);
        assert_non_null(back);
        assert_string_equal(cJSON_GetObjectItem(back, "format")->valuestring, "assay-bench");
        assert_int_equal(cJSON_GetObjectItem(back, "version")->valueint, 1);
        const cJSON *gen = cJSON_GetObjectItem(back, "generator");
        const cJSON *runs = cJSON_GetObjectItem(back, "runs");
        assert_int_equal(cJSON_GetArraySize(runs), 3);
        const cJSON *run0 = cJSON_GetArrayItem(runs, 0);
        const cJSON *ttft = cJSON_GetObjectItem(run0, "ttft");
        /* cJSON prints 15 significant digits when they read back within an
         * ulp or so, so compare to 1e-14 relative. */
        assert_true(assay_test_close_to("json p99", cJSON_GetObjectItem(ttft, "p99")->valuedouble,
                                        br.runs[0].ttft.v[ASSAY_PCTL_P99], 0, 1e-14));
        assert_int_equal(cJSON_GetObjectItem(ttft, "n")->valueint, 54);
        const cJSON *suff = cJSON_GetObjectItem(cJSON_GetObjectItem(ttft, "sufficiency"), "p90");
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(suff, "sufficient")));
        assert_int_equal(cJSON_GetObjectItem(suff, "n_min")->valueint, 44);
        const cJSON *wl = cJSON_GetObjectItem(back, "workload");
        assert_string_equal(cJSON_GetObjectItem(wl, "lengths")->valuestring, "prompt 4, output 4");
        assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(wl, "output_len"), "p90")->valueint, 4);
        assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(back, "spread"), "ttft"));
        if (kind == 0) {
            assert_string_equal(cJSON_GetObjectItem(gen, "arrival")->valuestring, "poisson");
            assert_true(assay_test_close_to(
                "json rate", cJSON_GetObjectItem(run0, "offered_rate")->valuedouble, 3000.0, 0,
                1e-14));
            assert_true(cJSON_IsArray(cJSON_GetObjectItem(run0, "lateness_histogram")));
        } else {
            assert_string_equal(cJSON_GetObjectItem(gen, "kind")->valuestring, "closed");
            assert_int_equal(cJSON_GetObjectItem(gen, "workers")->valueint, 4);
            assert_true(cJSON_IsNull(cJSON_GetObjectItem(run0, "offered_rate")));
            assert_true(cJSON_IsFalse(cJSON_GetObjectItem(run0, "has_offered_rate")));
            assert_true(cJSON_IsNull(cJSON_GetObjectItem(run0, "lateness")));
        }
        cJSON_Delete(back);
        cJSON_free(text);
        cJSON_Delete(j);
        assay_bench_result_release(&br);
        assert_null(br.runs);
    }
    struct assay_bench_result br;
    struct assay_loadgen_params p = closed_params(4);
    assert_int_equal(assay_bench_run(&a, w, &p, &slo, 0, &br), ASSAY_ERR_INVALID);
    slo.ttft_s = 0;
    assert_int_equal(assay_bench_run(&a, w, &p, &slo, 1, &br), ASSAY_ERR_INVALID);
    assay_adapter_close(&a);
    free_workload(w);
}

static void test_seedtable_and_sweep(void **state)
{
    (void)state;
    const int32_t n = 30;
    struct assay_workload *w = make_workload(n, NULL, 2, NULL);
    struct wrap *wr = NULL;
    struct assay_adapter a = open_wrap(&wr);
    wr->serial = true;
    wr->sleep_ns = 1 * MS;
    struct assay_seedtable_params tp = assay_seedtable_default_params();
    tp.n_runs = 3; /* the rows are medians over 3 runs: robust to one hiccup */
    tp.capacity_factor = 4.0;
    tp.warmup = 0;
    tp.timeout_s = 30;
    struct assay_seedtable t;
    assert_int_equal(assay_seedtable_run(&a, w, &tp, NULL, &t), ASSAY_OK);
    assert_int_equal(t.n_rows, 4);
    /* A serial server of 1 ms per request cannot exceed ~1000 req/s. */
    assert_true(t.capacity > 10.0 && t.capacity < 1100.0);
    assert_true(t.rows[0].kind == ASSAY_LOADGEN_OPEN && t.rows[0].has_offered_rate);
    assert_true(
        assay_test_close_to("open rate", t.rows[0].offered_rate, 4.0 * t.capacity, 0, 1e-12));
    assert_int_equal(t.rows[0].result.n_runs, 3);
    assert_true(isnan(t.rows[1].offered_rate));
    /* Over capacity the open loop keeps sending while the server is busy,
     * so more requests are in flight than any closed loop allows itself;
     * a closed loop never has more than its workers. Counts, not times:
     * the tails (printed) depend on how busy the machine is. */
    int32_t open_most = 0;
    for (int32_t r = 0; r < t.rows[0].result.n_runs; r++) {
        int32_t m = t.rows[0].result.runs[r].max_in_flight;
        open_most = m > open_most ? m : open_most;
    }
    print_message("seed table: capacity %.0f req/s; open row: most in flight %d, TTFT p99 %.1f ms",
                  t.capacity, (int)open_most, 1e3 * t.rows[0].ttft_p99);
    for (int i = 1; i < 4; i++) {
        assert_true(t.rows[i].kind == ASSAY_LOADGEN_CLOSED && !t.rows[i].has_offered_rate);
        assert_int_equal(t.rows[i].n_workers, tp.workers[i - 1]);
        for (int32_t r = 0; r < t.rows[i].result.n_runs; r++) {
            assert_true(t.rows[i].result.runs[r].max_in_flight <= t.rows[i].n_workers);
        }
        print_message("; %d workers: TTFT p99 %.1f ms", (int)t.rows[i].n_workers,
                      1e3 * t.rows[i].ttft_p99);
        assert_true(open_most > t.rows[i].n_workers);
    }
    print_message("\n");
    cJSON *j = NULL;
    assert_int_equal(assay_seedtable_to_json(&t, w, &j), ASSAY_OK);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "rows")), 4);
    cJSON_Delete(j);
    assay_seedtable_release(&t);

    /* The sweep: SLO TTFT 8 ms on the 1 ms serial server. */
    struct assay_sweep_params sp = assay_sweep_default_params();
    sp.start_rate = 100.0;
    sp.max_probes = 8;
    sp.rel_tol = 0.1;
    sp.warmup = 0;
    sp.timeout_s = 30;
    struct assay_slo slo = {.ttft_s = 0.008, .tpot_s = 1.0};
    struct assay_sweep_result sr;
    assert_int_equal(assay_rate_sweep(&a, w, &sp, &slo, &sr), ASSAY_OK);
    printf("  sweep: best %.1f req/s, first failing %.1f req/s, %d probes\n", sr.best_rate,
           sr.fail_rate, (int)sr.n_probes);
    assert_true(sr.n_probes >= 2 && sr.n_probes <= 8);
    assert_true(sr.best_rate > 0.0 && sr.best_rate < sr.fail_rate);
    assert_true(sr.best_rate < 2000.0); /* over twice the capacity cannot pass */
    for (int32_t i = 0; i < sr.n_probes; i++) {
        assert_true(sr.probes[i].pass == (sr.probes[i].goodput_fraction >= 0.99));
    }
    /* An SLO nothing meets: the halving stops at min_rate, unbracketed. */
    struct assay_slo impossible = {.ttft_s = 1e-9, .tpot_s = 1.0};
    sp.min_rate = 30.0;
    assert_int_equal(assay_rate_sweep(&a, w, &sp, &impossible, &sr), ASSAY_OK);
    assert_true(sr.best_rate == 0.0 && !sr.bracketed);
    assert_int_equal(sr.n_probes, 3); /* 100, 50, 30 */
    assert_true(sr.probes[2].rate == 30.0 && sr.fail_rate == 30.0);
    sp.min_rate = 0.01;
    sp.max_probes = 1;
    assert_int_equal(assay_rate_sweep(&a, w, &sp, &slo, &sr), ASSAY_ERR_INVALID);
    assay_adapter_close(&a);
    free_workload(w);
}

/* ---- allocation failures -------------------------------------------------- */

static void test_allocation_failures(void **state)
{
    (void)state;
    struct assay_workload *w = make_workload(12, NULL, 3, NULL);
    char path[512];
    assay_test_scratch("slo-alloc.json", path, sizeof path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"format\": \"assay-slo\", \"version\": 1, \"ttft_s\": 1, \"tpot_s\": 1}", f);
    fclose(f);
    /* A result to serialise, made with the plain allocator. */
    struct assay_adapter na;
    assert_int_equal(assay_null_engine_open(&(struct assay_null_engine_params){64, 1024}, &na),
                     ASSAY_OK);
    struct assay_bench_result ready;
    struct assay_loadgen_params rp = open_params(ASSAY_ARRIVAL_POISSON, 5000.0);
    struct assay_slo slo1 = {1.0, 1.0};
    assert_int_equal(assay_bench_run(&na, w, &rp, &slo1, 2, &ready), ASSAY_OK);
    /* Fail the k-th allocation of each entry point in turn until it
     * succeeds; each failure must report NOMEM and leak nothing. */
    for (int which = 0; which < 5; which++) {
        bool done = false;
        for (long k = 1; k < 5000 && !done; k++) {
            assay_test_fail_alloc_at(k);
            enum assay_status st = ASSAY_OK;
            if (which == 0) {
                struct assay_loadgen_result *r = NULL;
                st = assay_loadgen_result_init(&r, w);
                assert_true(st == ASSAY_OK || r == NULL);
                assay_loadgen_result_free(r);
            } else if (which == 1) {
                struct assay_adapter a;
                st = assay_null_engine_open(&(struct assay_null_engine_params){16, 256}, &a);
                assay_adapter_close(&a);
            } else if (which == 2) {
                struct assay_slo slo;
                struct assay_diag d;
                st = assay_slo_load(path, &slo, &d);
            } else if (which == 3) {
                struct assay_bench_result br;
                st = assay_bench_run(&na, w, &rp, &slo1, 2, &br);
                assay_bench_result_release(&br);
            } else {
                cJSON *j = NULL;
                st = assay_bench_result_to_json(&ready, w, &j);
                assert_true(st == ASSAY_OK || j == NULL);
                cJSON_Delete(j);
            }
            long live = assay_test_alloc_live();
            assay_test_fail_alloc_off();
            if (st != ASSAY_OK && st != ASSAY_ERR_NOMEM) {
                printf("  entry %d, failing allocation %ld: %s\n", which, k, assay_status_str(st));
            }
            assert_true(st == ASSAY_OK || st == ASSAY_ERR_NOMEM);
            assert_int_equal(live, 0);
            done = st == ASSAY_OK;
        }
        if (!done) {
            printf("  entry %d never succeeded\n", which);
        }
        assert_true(done);
    }
    assay_bench_result_release(&ready);
    assay_adapter_close(&na);
    remove(path);
    free_workload(w);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    gsl_set_error_handler_off();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metric_definitions),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_open_loop_null_engine),
        cmocka_unit_test(test_open_loop_rejections),
        cmocka_unit_test(test_errors_and_spec_rounds),
        cmocka_unit_test(test_bad_events),
        cmocka_unit_test(test_open_vs_closed_queueing),
        cmocka_unit_test(test_closed_loop_concurrency),
        cmocka_unit_test(test_warmup_discarded),
        cmocka_unit_test(test_abort_after),
        cmocka_unit_test(test_timeout_and_broken_adapter),
        cmocka_unit_test(test_bench_run_json),
        cmocka_unit_test(test_seedtable_and_sweep),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
