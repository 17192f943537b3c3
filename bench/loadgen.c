/*
 * loadgen.c - the load generators (loadgen.h): assay_loadgen_schedule fixes
 * an open loop's arrival times before the run (the workload's own, or
 * Poisson, gamma or constant at an offered rate from a seed), and
 * assay_loadgen_run drives any adapter open-loop or with N closed-loop
 * workers, recording for each request when it was scheduled, handed in,
 * answered and finished. metrics.c and speedup.c run it; the records
 * become the figures there.
 */
#include "loadgen.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/clock.h"

/* Schedules longer than this (seconds) are refused: their nanosecond times
 * would come near int64 limits and no benchmark runs for 30 years. */
#define MAX_SCHEDULE_S 1e9

struct assay_loadgen_params assay_loadgen_default_params(void)
{
    struct assay_loadgen_params p = {
        .kind = ASSAY_LOADGEN_OPEN,
        .arrival = ASSAY_ARRIVAL_POISSON,
        .rate = 10.0,
        .cv = 1.0,
        .seed = 1,
        .spin_ns = ASSAY_LOADGEN_SPIN_DEFAULT_NS,
        .n_workers = 4,
        .warmup = ASSAY_LOADGEN_WARMUP_AUTO,
        .timeout_s = 3600.0,
    };
    return p;
}

const char *assay_outcome_str(enum assay_outcome outcome)
{
    switch (outcome) {
    case ASSAY_OUTCOME_UNSENT: return "unsent";
    case ASSAY_OUTCOME_OK: return "ok";
    case ASSAY_OUTCOME_ERROR: return "error";
    case ASSAY_OUTCOME_REJECTED: return "rejected";
    case ASSAY_OUTCOME_ABORTED: return "aborted";
    case ASSAY_OUTCOME_LOST: return "lost";
    case ASSAY_OUTCOME_IN_FLIGHT: return "in_flight";
    }
    return "unknown";
}

const char *assay_loadgen_kind_str(enum assay_loadgen_kind kind)
{
    switch (kind) {
    case ASSAY_LOADGEN_OPEN: return "open";
    case ASSAY_LOADGEN_CLOSED: return "closed";
    }
    return "unknown";
}

const char *assay_arrival_kind_str(enum assay_arrival_kind kind)
{
    switch (kind) {
    case ASSAY_ARRIVAL_TRACE: return "trace";
    case ASSAY_ARRIVAL_POISSON: return "poisson";
    case ASSAY_ARRIVAL_GAMMA: return "gamma";
    case ASSAY_ARRIVAL_CONSTANT: return "constant";
    }
    return "unknown";
}

int32_t assay_loadgen_warmup_count(const struct assay_loadgen_params *p, int32_t n)
{
    if (n <= 1) {
        return 0;
    }
    int32_t w = p->warmup;
    if (w == ASSAY_LOADGEN_WARMUP_AUTO) {
        w = n / 10;
        if (w > ASSAY_LOADGEN_WARMUP_MAX) {
            w = ASSAY_LOADGEN_WARMUP_MAX;
        }
    }
    if (w < 0) {
        w = 0;
    }
    return w > n - 1 ? n - 1 : w;
}

static int64_t pool_size_of(const struct assay_workload *w)
{
    int64_t total = 0;
    for (int32_t i = 0; i < w->n; i++) {
        total += w->reqs[i].max_tokens > 0 ? w->reqs[i].max_tokens : 0;
    }
    return total;
}

enum assay_status assay_loadgen_result_init(struct assay_loadgen_result **out,
                                            const struct assay_workload *w)
{
    *out = NULL;
    if (w == NULL || w->n < 1 || w->reqs == NULL) {
        return ASSAY_ERR_INVALID;
    }
    struct assay_loadgen_result *r = assay_calloc(1, sizeof *r);
    if (r == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    r->n = w->n;
    r->pool_size = pool_size_of(w);
    r->records = assay_calloc((size_t)w->n, sizeof *r->records);
    r->arrival_s = assay_calloc((size_t)w->n, sizeof *r->arrival_s);
    r->token_pool = assay_calloc((size_t)r->pool_size, sizeof *r->token_pool);
    if (r->records == NULL || r->arrival_s == NULL || r->token_pool == NULL) {
        assay_loadgen_result_free(r);
        return ASSAY_ERR_NOMEM;
    }
    *out = r;
    return ASSAY_OK;
}

void assay_loadgen_result_free(struct assay_loadgen_result *r)
{
    if (r == NULL) {
        return;
    }
    assay_free(r->records);
    assay_free(r->arrival_s);
    assay_free(r->token_pool);
    assay_free(r);
}

static bool positive_finite(double x)
{
    return isfinite(x) && x > 0.0;
}

static enum assay_status check_params(const struct assay_loadgen_params *p, int32_t n)
{
    if (p->kind == ASSAY_LOADGEN_CLOSED) {
        if (p->n_workers < 1) {
            return ASSAY_ERR_INVALID;
        }
    } else if (p->kind == ASSAY_LOADGEN_OPEN) {
        switch (p->arrival) {
        case ASSAY_ARRIVAL_TRACE: break;
        case ASSAY_ARRIVAL_GAMMA:
            if (!positive_finite(p->cv)) {
                return ASSAY_ERR_INVALID;
            }
            /* fall through */
        case ASSAY_ARRIVAL_POISSON:
            if ((p->seed & 0xffffffffu) == 0) {
                return ASSAY_ERR_INVALID;
            }
            /* fall through */
        case ASSAY_ARRIVAL_CONSTANT:
            if (!positive_finite(p->rate)) {
                return ASSAY_ERR_INVALID;
            }
            break;
        default: return ASSAY_ERR_INVALID;
        }
        if (p->spin_ns < 0) {
            return ASSAY_ERR_INVALID;
        }
    } else {
        return ASSAY_ERR_INVALID;
    }
    if (p->warmup != ASSAY_LOADGEN_WARMUP_AUTO && (p->warmup < 0 || p->warmup >= n)) {
        return ASSAY_ERR_INVALID;
    }
    if (!(isfinite(p->timeout_s) && p->timeout_s >= 0.0)) {
        return ASSAY_ERR_INVALID;
    }
    return ASSAY_OK;
}

/* n - 1 gaps of mean 1 from the process, divided by the rate: so that one
 * seed gives the same shape at every rate (common random numbers across a
 * rate sweep). GSL's mt19937 keeps the low 32 bits of the seed. The state
 * goes through core/alloc.h, which gsl_rng_alloc would bypass. */
static enum assay_status draw_schedule(const struct assay_loadgen_params *p, int32_t n,
                                       double *arrival_s)
{
    arrival_s[0] = 0.0;
    if (p->arrival == ASSAY_ARRIVAL_CONSTANT) {
        for (int32_t i = 1; i < n; i++) {
            arrival_s[i] = (double)i / p->rate;
        }
        return ASSAY_OK;
    }
    void *state = assay_malloc(gsl_rng_mt19937->size);
    if (state == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    gsl_rng rng = {gsl_rng_mt19937, state};
    gsl_rng_set(&rng, (unsigned long)p->seed);
    double shape = p->arrival == ASSAY_ARRIVAL_GAMMA ? 1.0 / (p->cv * p->cv) : 1.0;
    double t = 0.0;
    for (int32_t i = 1; i < n; i++) {
        double gap = p->arrival == ASSAY_ARRIVAL_GAMMA ? gsl_ran_gamma(&rng, shape, 1.0 / shape)
                                                       : gsl_ran_exponential(&rng, 1.0);
        t += gap / p->rate;
        arrival_s[i] = t;
    }
    assay_free(state);
    return ASSAY_OK;
}

enum assay_status assay_loadgen_schedule(const struct assay_workload *w,
                                         const struct assay_loadgen_params *p, double *arrival_s)
{
    if (w == NULL || w->n < 1 || w->reqs == NULL || p->kind != ASSAY_LOADGEN_OPEN) {
        return ASSAY_ERR_INVALID;
    }
    enum assay_status st = check_params(p, w->n);
    if (st != ASSAY_OK) {
        return st;
    }
    if (p->arrival == ASSAY_ARRIVAL_TRACE) {
        double first = w->reqs[0].arrival_s;
        double prev = first;
        for (int32_t i = 0; i < w->n; i++) {
            double a = w->reqs[i].arrival_s;
            if (!isfinite(a) || a < 0.0 || a < prev) {
                return ASSAY_ERR_INVALID;
            }
            prev = a;
            arrival_s[i] = a - first;
        }
    } else {
        st = draw_schedule(p, w->n, arrival_s);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    if (!(arrival_s[w->n - 1] <= MAX_SCHEDULE_S)) {
        return ASSAY_ERR_INVALID;
    }
    return ASSAY_OK;
}

/* ---- the run ----------------------------------------------------------- */

struct run {
    const struct assay_adapter *a;
    const struct assay_workload *w;
    const struct assay_loadgen_params *p;
    struct assay_loadgen_result *r;
    int32_t in_flight;
    int64_t deadline_ns;    /* 0: none */
    bool stop;              /* hand nothing more in */
    enum assay_status status;
};

/* Hand request i in, scheduled at sched_ns (closed loop: now). */
static void submit(struct run *u, int32_t i, int64_t sched_ns, bool closed)
{
    const struct assay_workload_request *q = &u->w->reqs[i];
    struct assay_bench_record *rec = &u->r->records[i];
    struct assay_request req = {
        .id = (uint64_t)i,
        .prompt = q->prompt,
        .prompt_len = q->prompt_len,
        .max_tokens = q->max_tokens,
        .stop_token = q->stop_token,
        .sampling = q->sampling,
    };
    int64_t now = assay_now_ns();
    rec->scheduled_ns = closed ? now : sched_ns;
    rec->submitted_ns = now;
    enum assay_status st = u->a->vt->add_request(u->a->self, &req);
    if (st != ASSAY_OK) {
        rec->outcome = ASSAY_OUTCOME_REJECTED;
        rec->error = st;
        rec->finish_ns = assay_now_ns();
        return;
    }
    rec->outcome = ASSAY_OUTCOME_IN_FLIGHT;
    u->in_flight++;
    if (u->in_flight > u->r->max_in_flight) {
        u->r->max_in_flight = u->in_flight;
    }
    if (q->abort_after == 0) {
        (void)u->a->vt->abort(u->a->self, req.id);
    }
}

static void finish(struct run *u, struct assay_bench_record *rec, const struct assay_event *ev,
                   int64_t t)
{
    rec->finish_ns = t;
    rec->reason = ev->reason;
    switch (ev->reason) {
    case ASSAY_FINISH_LENGTH:
    case ASSAY_FINISH_STOP: rec->outcome = ASSAY_OUTCOME_OK; break;
    case ASSAY_FINISH_ABORT: rec->outcome = ASSAY_OUTCOME_ABORTED; break;
    case ASSAY_FINISH_ERROR:
        rec->outcome = ASSAY_OUTCOME_ERROR;
        rec->error = ev->error;
        break;
    default:
        /* A FINISH without a reason breaks the adapter contract: the request
         * did not end normally, so it is not counted as good. */
        rec->outcome = ASSAY_OUTCOME_ERROR;
        rec->error = ASSAY_ERR_INTERNAL;
        u->r->n_bad_events++;
        break;
    }
    u->in_flight--;
}

static void process(struct run *u, const struct assay_event *events, size_t n_events, int64_t t_after)
{
    struct assay_loadgen_result *r = u->r;
    for (size_t k = 0; k < n_events; k++) {
        const struct assay_event *ev = &events[k];
        if (ev->kind == ASSAY_EVENT_SPEC_ROUND) {
            continue;
        }
        if ((ev->kind != ASSAY_EVENT_TOKEN && ev->kind != ASSAY_EVENT_FINISH) ||
            ev->request_id >= (uint64_t)r->n) {
            r->n_bad_events++;
            continue;
        }
        int32_t i = (int32_t)ev->request_id;
        struct assay_bench_record *rec = &r->records[i];
        if (rec->outcome != ASSAY_OUTCOME_IN_FLIGHT) {
            r->n_bad_events++;
            continue;
        }
        int64_t t = ev->t_ns;
        if (t <= 0 || t < rec->submitted_ns) {
            /* The adapter's time cannot be trusted; ours can. */
            if (t > 0) {
                r->n_bad_events++;
            }
            t = t_after;
        }
        if (ev->kind == ASSAY_EVENT_FINISH) {
            finish(u, rec, ev, t);
            continue;
        }
        if (ev->index != rec->n_tokens) {
            r->n_bad_events++;
        }
        if (rec->n_tokens == 0) {
            rec->first_token_ns = t;
        }
        if (rec->n_tokens < rec->max_tokens) {
            rec->token_ns[rec->n_tokens] = t;
        } else {
            r->n_bad_events++;
        }
        rec->n_tokens++;
        int32_t abort_after = u->w->reqs[i].abort_after;
        if (abort_after > 0 && rec->n_tokens == abort_after) {
            (void)u->a->vt->abort(u->a->self, (uint64_t)i);
        }
    }
}

/* One step; false when the adapter had nothing to do. */
static bool step_once(struct run *u)
{
    if (!u->a->vt->has_work(u->a->self)) {
        return false;
    }
    const struct assay_event *events = NULL;
    size_t n_events = 0;
    enum assay_status st = u->a->vt->step(u->a->self, &events, &n_events);
    int64_t t_after = assay_now_ns();
    u->r->n_steps++;
    if (st != ASSAY_OK && u->r->adapter_status == ASSAY_OK) {
        u->r->adapter_status = st;
        u->status = st;
        u->stop = true;
    }
    if (events != NULL) {
        process(u, events, n_events, t_after);
    }
    return true;
}

/* The adapter says it is idle, yet these requests have no FINISH. */
static void declare_lost(struct run *u, int32_t first, int32_t last)
{
    int64_t now = assay_now_ns();
    for (int32_t i = first; i < last && u->in_flight > 0; i++) {
        struct assay_bench_record *rec = &u->r->records[i];
        if (rec->outcome == ASSAY_OUTCOME_IN_FLIGHT) {
            rec->outcome = ASSAY_OUTCOME_LOST;
            rec->finish_ns = now;
            u->in_flight--;
        }
    }
}

/* The deadline passed: abort what is live, drain for a grace period,
 * declare the rest lost. */
static void time_out(struct run *u, int32_t first, int32_t last)
{
    u->r->timed_out = true;
    u->stop = true;
    u->status = ASSAY_ERR_TIMEOUT;
    for (int32_t i = first; i < last; i++) {
        if (u->r->records[i].outcome == ASSAY_OUTCOME_IN_FLIGHT) {
            (void)u->a->vt->abort(u->a->self, (uint64_t)i);
        }
    }
    double grace_s = fmin(5.0, fmax(0.1, u->p->timeout_s));
    int64_t grace_end = assay_now_ns() + (int64_t)(grace_s * 1e9);
    while (u->in_flight > 0 && assay_now_ns() < grace_end && step_once(u)) {
    }
    declare_lost(u, first, last);
}

static bool past_deadline(const struct run *u)
{
    return u->deadline_ns != 0 && assay_now_ns() >= u->deadline_ns;
}

static void wait_until(const struct run *u, int64_t t_ns)
{
    if (u->deadline_ns != 0 && t_ns > u->deadline_ns) {
        t_ns = u->deadline_ns;
    }
    if (u->p->spin_ns <= 0) {
        assay_sleep_until_ns(t_ns);
        return;
    }
    if (t_ns - u->p->spin_ns > assay_now_ns()) {
        assay_sleep_until_ns(t_ns - u->p->spin_ns);
    }
    while (assay_now_ns() < t_ns) {
    }
}

/* Requests first..last-1 on their schedule, relative to base_ns. */
static void open_phase(struct run *u, int32_t first, int32_t last, int64_t base_ns)
{
    struct assay_bench_record *recs = u->r->records;
    for (int32_t i = first; i < last; i++) {
        recs[i].scheduled_ns = base_ns + llround(u->r->arrival_s[i] * 1e9);
    }
    int32_t next = first;
    for (;;) {
        if (past_deadline(u)) {
            time_out(u, first, next);
            return;
        }
        while (!u->stop && next < last && recs[next].scheduled_ns <= assay_now_ns()) {
            submit(u, next, recs[next].scheduled_ns, false);
            next++;
        }
        if (step_once(u)) {
            continue;
        }
        if (u->in_flight > 0) {
            declare_lost(u, first, next);
        }
        if (u->stop || next >= last) {
            return;
        }
        wait_until(u, recs[next].scheduled_ns);
    }
}

/* Requests first..last-1 with n_workers in flight. */
static void closed_phase(struct run *u, int32_t first, int32_t last)
{
    int32_t next = first;
    for (;;) {
        if (past_deadline(u)) {
            time_out(u, first, next);
            return;
        }
        while (!u->stop && u->in_flight < u->p->n_workers && next < last) {
            submit(u, next, 0, true);
            next++;
        }
        if (step_once(u)) {
            continue;
        }
        if (u->in_flight > 0) {
            declare_lost(u, first, next);
            continue; /* their workers are free: hand in the next ones */
        }
        if (u->stop || next >= last) {
            return;
        }
    }
}

static void reset_records(struct assay_loadgen_result *r, const struct assay_workload *w,
                          int32_t n_warmup)
{
    int64_t *pool = r->token_pool;
    for (int32_t i = 0; i < r->n; i++) {
        struct assay_bench_record *rec = &r->records[i];
        const struct assay_workload_request *q = &w->reqs[i];
        memset(rec, 0, sizeof *rec);
        rec->workload_id = q->id;
        rec->prompt_len = q->prompt_len;
        rec->max_tokens = q->max_tokens > 0 ? q->max_tokens : 0;
        rec->token_ns = pool;
        rec->outcome = ASSAY_OUTCOME_UNSENT;
        rec->reason = ASSAY_FINISH_NONE;
        rec->warmup = i < n_warmup;
        pool += rec->max_tokens;
    }
}

/* The offered rate of the measured schedule: (n - 1) / span. */
static double schedule_rate_of(const double *arrival_s, int32_t first, int32_t last)
{
    if (last - first < 2) {
        return NAN;
    }
    double span = arrival_s[last - 1] - arrival_s[first];
    return span > 0.0 ? (double)(last - first - 1) / span : INFINITY;
}

enum assay_status assay_loadgen_run(const struct assay_adapter *adapter,
                                    const struct assay_workload *w,
                                    const struct assay_loadgen_params *p,
                                    struct assay_loadgen_result *r)
{
    if (adapter == NULL || adapter->vt == NULL || w == NULL || p == NULL || r == NULL ||
        w->reqs == NULL || r->n != w->n || r->pool_size != pool_size_of(w)) {
        return ASSAY_ERR_INVALID;
    }
    enum assay_status st = check_params(p, w->n);
    if (st != ASSAY_OK) {
        return st;
    }
    if (adapter->vt->has_work(adapter->self)) {
        return ASSAY_ERR_INVALID;
    }
    bool open = p->kind == ASSAY_LOADGEN_OPEN;
    if (open) {
        st = assay_loadgen_schedule(w, p, r->arrival_s);
        if (st != ASSAY_OK) {
            return st;
        }
    } else {
        memset(r->arrival_s, 0, sizeof(double) * (size_t)w->n);
    }
    int32_t n_warmup = assay_loadgen_warmup_count(p, w->n);
    /* Each phase's schedule starts at its own time zero. */
    double shift = open ? r->arrival_s[n_warmup] : 0.0;
    for (int32_t i = n_warmup; i < w->n && open; i++) {
        r->arrival_s[i] -= shift;
    }
    r->params = *p;
    r->params.warmup = n_warmup;
    r->n_warmup = n_warmup;
    reset_records(r, w, n_warmup);
    r->t_start_ns = r->t_end_ns = 0;
    r->max_in_flight = 0;
    r->n_steps = 0;
    r->n_bad_events = 0;
    r->timed_out = false;
    r->adapter_status = ASSAY_OK;
    r->has_offered_rate = open;
    r->schedule_rate = open ? schedule_rate_of(r->arrival_s, n_warmup, w->n) : NAN;
    r->offered_rate = !open ? NAN : p->arrival == ASSAY_ARRIVAL_TRACE ? r->schedule_rate : p->rate;

    struct run u = {.a = adapter, .w = w, .p = p, .r = r, .status = ASSAY_OK};
    if (p->timeout_s > 0.0) {
        u.deadline_ns = assay_now_ns() + (int64_t)(p->timeout_s * 1e9);
    }
    if (n_warmup > 0) {
        if (open) {
            open_phase(&u, 0, n_warmup, assay_now_ns());
        } else {
            closed_phase(&u, 0, n_warmup);
        }
    }
    int64_t steps_warmup = r->n_steps;
    if (!u.stop) {
        if (open) {
            r->t_start_ns = assay_now_ns();
            open_phase(&u, n_warmup, w->n, r->t_start_ns);
        } else {
            closed_phase(&u, n_warmup, w->n);
        }
    }
    r->n_steps -= steps_warmup;
    for (int32_t i = n_warmup; i < w->n; i++) {
        const struct assay_bench_record *rec = &r->records[i];
        if (!open && rec->submitted_ns != 0 && (r->t_start_ns == 0 || rec->submitted_ns < r->t_start_ns)) {
            r->t_start_ns = rec->submitted_ns;
        }
        if (rec->finish_ns > r->t_end_ns) {
            r->t_end_ns = rec->finish_ns;
        }
    }
    return u.status;
}
