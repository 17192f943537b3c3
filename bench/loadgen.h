/*
 * loadgen.h - the load generators: an open loop driven by a precomputed
 * arrival schedule, and a closed loop of N workers for contrast.
 *
 * Both take an adapter (adapters/adapter.h) and a workload (core/workload.h)
 * and nothing else, so the bundled engine, the null engine and an HTTP
 * server are measured by the same code. A run records, for every request of
 * the workload, when it was scheduled, handed in, answered with its first
 * token and finished, the time of every token and how it ended; the metrics
 * (bench/metrics.h) are computed from those records afterwards.
 *
 * Open loop (what the seed chapter calls the only honest generator): the
 * whole schedule is fixed before the run as absolute CLOCK_MONOTONIC times,
 * either the workload's own arrival_s or regenerated for an offered rate by
 * a seeded process (Poisson, gamma with a stated burstiness, constant). The
 * loop hands in every request whose time has come, steps the adapter while
 * it has work, and sleeps until the next arrival when it is idle
 * (assay_sleep_until_ns until spin_ns before it, then a spin on the clock:
 * see ASSAY_LOADGEN_SPIN_DEFAULT_NS). Latency is
 * measured from the *scheduled* arrival, so a request the generator could
 * not hand in on time (because a step was running) is charged for the wait:
 * the queue builds where it would build in front of a real server. The
 * generator's own lateness (handed in minus scheduled) is recorded per
 * request and reported next to the latencies.
 *
 * Closed loop: N requests are kept in flight; each finish hands in the next
 * request of the workload; arrival times are ignored. Its latencies are
 * measured from hand-in, and it has no offered rate (the result says so).
 *
 * Warm-up: the first W requests of the workload are run first, as a phase
 * of their own under the same generator, and the engine is drained before
 * the measured phase starts. Their records are kept and flagged, and every
 * metric leaves them out.
 *
 * Memory: assay_loadgen_result_init allocates everything a run can need
 * (records, the schedule, one pool of token times sized from the sum of the
 * workload's max_tokens); assay_loadgen_run allocates nothing, so the
 * measured loop allocates nothing. A result can be reused for many runs of
 * the same workload.
 *
 * Usage:
 *     struct assay_loadgen_params p = assay_loadgen_default_params();
 *     p.kind = ASSAY_LOADGEN_OPEN; p.arrival = ASSAY_ARRIVAL_POISSON; p.rate = 24; p.seed = 1;
 *     struct assay_loadgen_result *r;
 *     assay_loadgen_result_init(&r, workload);
 *     assay_loadgen_run(&adapter, workload, &p, r);   // then bench/metrics.h
 *     assay_loadgen_result_free(r);
 *
 * Not handled: the loop is single-threaded, so while step() runs nothing is
 * handed in; that delay is the lateness it reports (and latency includes it,
 * because it is measured from the schedule). The workload's arrival_step is
 * ignored (it is for stepwise harnesses).
 */
#ifndef ASSAY_LOADGEN_H
#define ASSAY_LOADGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/request.h"
#include "../core/status.h"
#include "../core/workload.h"

enum assay_loadgen_kind {
    ASSAY_LOADGEN_OPEN = 1,   /* a precomputed arrival schedule */
    ASSAY_LOADGEN_CLOSED = 2, /* n_workers requests in flight, no schedule */
};

/* Where an open loop's arrival times come from. */
enum assay_arrival_kind {
    ASSAY_ARRIVAL_TRACE = 0,    /* the workload's own arrival_s */
    ASSAY_ARRIVAL_POISSON = 1,  /* exponential gaps of mean 1/rate */
    ASSAY_ARRIVAL_GAMMA = 2,    /* gamma gaps: shape 1/cv^2, mean 1/rate */
    ASSAY_ARRIVAL_CONSTANT = 3, /* gaps of exactly 1/rate */
};

/* Default warm-up: ASSAY_LOADGEN_WARMUP_AUTO resolves to
 * min(ASSAY_LOADGEN_WARMUP_MAX, n / 10) requests (10% of the workload,
 * rounded down, at most 8; none for fewer than 10 requests). */
#define ASSAY_LOADGEN_WARMUP_AUTO (-1)
#define ASSAY_LOADGEN_WARMUP_MAX 8

/*
 * Progress of a benchmark made of several runs, for a person watching: fn
 * (NULL: none) is called after each run ends, on the thread that runs
 * them, with one line such as "run 2 of 3: 48 requests in 12.3 s, achieved
 * 3.9 req/s" (label first when set: "closed loop, 4 workers: run 2 of
 * 3: ..."). The library prints nothing itself; the line is borrowed for
 * the call.
 */
struct assay_bench_progress {
    void (*fn)(void *arg, const char *line);
    void *arg;
    const char *label; /* borrowed; NULL: none */
};

struct assay_loadgen_params {
    enum assay_loadgen_kind kind;
    /* Open loop. */
    enum assay_arrival_kind arrival;
    double rate;       /* offered requests/s (POISSON, GAMMA, CONSTANT); > 0 */
    double cv;         /* GAMMA: coefficient of variation of the gaps; > 0
                          (1 is Poisson, > 1 bursty, < 1 smoother) */
    uint64_t seed;     /* mt19937 seed for POISSON and GAMMA (gsl_rng_set);
                          GSL keeps its low 32 bits, which must not be 0
                          (GSL would silently use its default seed) */
    int64_t spin_ns;   /* wake this long before an arrival and spin on the
                          clock for the rest (0: sleep only); see
                          ASSAY_LOADGEN_SPIN_DEFAULT_NS */
    /* Closed loop. */
    int32_t n_workers; /* requests in flight; >= 1 */
    /* Both. */
    int32_t warmup;    /* requests run and discarded first; 0 <= warmup < n,
                          or ASSAY_LOADGEN_WARMUP_AUTO */
    double timeout_s;  /* the whole run; 0 = no limit. When it passes, live
                          requests are aborted and the adapter drained for at
                          most min(5 s, max(0.1 s, timeout_s)) more */
    /* Callers of several runs (assay_bench_run, the speed comparison) say
     * after each; assay_loadgen_run itself never calls it. */
    struct assay_bench_progress progress;
};

/* The default spin before an arrival. clock_nanosleep alone wakes some
 * 60-130 us late on Linux (50 us of timer slack plus scheduling), which
 * misses a 100 us p99 lateness; sleeping until 50 us before and spinning
 * the rest meets it (bench_loadgen prints both) at the price of at most
 * 50 us of CPU per idle gap. Longer spins do worse on a busy machine: the
 * spinning thread gets preempted. */
#define ASSAY_LOADGEN_SPIN_DEFAULT_NS 50000

/* Open loop, Poisson at 10 req/s, seed 1, spin ASSAY_LOADGEN_SPIN_DEFAULT_NS,
 * 4 workers (if switched to closed), warm-up ASSAY_LOADGEN_WARMUP_AUTO,
 * timeout 3600 s. */
struct assay_loadgen_params assay_loadgen_default_params(void);

/* How a request ended. */
enum assay_outcome {
    ASSAY_OUTCOME_UNSENT = 0,    /* never handed in: the run stopped first
                                    (timeout or a broken adapter) */
    ASSAY_OUTCOME_OK = 1,        /* FINISH with LENGTH or STOP */
    ASSAY_OUTCOME_ERROR = 2,     /* FINISH with ERROR */
    ASSAY_OUTCOME_REJECTED = 3,  /* add_request refused it (error says why) */
    ASSAY_OUTCOME_ABORTED = 4,   /* FINISH with ABORT: the workload's
                                    abort_after, or the timeout */
    ASSAY_OUTCOME_LOST = 5,      /* the adapter went idle, or the drain after
                                    a timeout ended, without its FINISH */
    ASSAY_OUTCOME_IN_FLIGHT = 6, /* only while a run is in progress */
};

const char *assay_outcome_str(enum assay_outcome outcome);

/* One request of a run. Times are CLOCK_MONOTONIC nanoseconds; 0 means
 * "did not happen". */
struct assay_bench_record {
    uint64_t workload_id;   /* the workload's id (the adapter sees the index) */
    int64_t scheduled_ns;   /* open: from the schedule; closed: = submitted_ns */
    int64_t submitted_ns;   /* just before add_request was called */
    int64_t first_token_ns; /* the first TOKEN event's t_ns */
    int64_t finish_ns;      /* the FINISH event's t_ns; for REJECTED the time
                               add_request returned; for LOST when it was
                               declared lost */
    int64_t *token_ns;      /* (max_tokens) time of each TOKEN, into the pool */
    int32_t prompt_len;
    int32_t max_tokens;
    int32_t n_tokens;       /* TOKEN events received (stored up to max_tokens) */
    enum assay_outcome outcome;
    enum assay_finish_reason reason; /* of the FINISH event, NONE without one */
    int32_t error;          /* enum assay_status: the rejection, or a FINISH
                               ERROR's error field */
    bool warmup;            /* run in the warm-up phase: left out of metrics */
};

/*
 * The records of one run, plain data. `records[i]` is workload request i.
 * The schedule fields describe the measured phase; `params` is a copy of
 * what the run was given, with the warm-up resolved.
 */
struct assay_loadgen_result {
    struct assay_loadgen_params params;
    int32_t n;                  /* requests (= workload n) */
    int32_t n_warmup;           /* the first n_warmup records are warm-up */
    struct assay_bench_record *records; /* (n) */
    double *arrival_s;          /* (n) the schedule relative to its phase's
                                   start (open loop), 0 for closed */
    int64_t *token_pool;        /* (pool_size) token times of all records */
    int64_t pool_size;          /* sum of the workload's max_tokens */
    /* Measured phase. */
    int64_t t_start_ns;         /* open: the measured phase's time zero;
                                   closed: the first hand-in */
    int64_t t_end_ns;           /* the last FINISH (or rejection) */
    bool has_offered_rate;      /* false for a closed loop */
    double offered_rate;        /* requests/s; NaN when !has_offered_rate;
                                   the set rate, or for TRACE the schedule's
                                   (n - 1) / span (+inf for a burst) */
    double schedule_rate;       /* open: (n - 1) / span of the measured
                                   schedule actually used; NaN otherwise */
    int32_t max_in_flight;      /* the most requests in flight at once */
    int64_t n_steps;            /* step() calls in the measured phase */
    int64_t n_bad_events;       /* events for an unknown or finished id,
                                   tokens out of order or beyond max_tokens,
                                   times before the hand-in */
    bool timed_out;
    enum assay_status adapter_status; /* the first step() error, or ASSAY_OK */
};

/*
 * Allocate a result able to hold any run of workload w (at least one
 * request; a request with max_tokens < 1 gets no token storage, and the
 * adapter will reject it). Free with assay_loadgen_result_free. Returns
 * ASSAY_ERR_INVALID for an empty workload, ASSAY_ERR_NOMEM; on failure
 * *out is NULL.
 */
enum assay_status assay_loadgen_result_init(struct assay_loadgen_result **out,
                                            const struct assay_workload *w);

/* Release a result; NULL is a no-op. */
void assay_loadgen_result_free(struct assay_loadgen_result *r);

/*
 * The relative arrival schedule of an open loop into arrival_s (n entries,
 * seconds, the first at 0, non-decreasing): TRACE copies the workload's
 * arrival_s minus the first one; CONSTANT gives i / rate; POISSON and GAMMA
 * draw n - 1 gaps with GSL's mt19937 seeded with p->seed (its state
 * allocated through core/alloc.h). The same parameters always give the
 * same schedule, and a schedule drawn for rate r is exactly the one for
 * rate 1 divided by r. Returns ASSAY_ERR_INVALID for a closed-loop p or a
 * bad parameter (rate or cv not finite and > 0, a seed whose low 32 bits
 * are 0, n < 1, a TRACE whose arrivals are negative, not finite or not
 * sorted, a schedule longer than 1e9 s), ASSAY_ERR_NOMEM. On failure
 * arrival_s is unspecified.
 */
enum assay_status assay_loadgen_schedule(const struct assay_workload *w,
                                         const struct assay_loadgen_params *p, double *arrival_s);

/*
 * Run workload w against the adapter with generator p, into r (made by
 * assay_loadgen_result_init for w; its previous contents are overwritten).
 * The adapter must be idle on entry and is idle on return. Request i is
 * handed in with id i, the workload's prompt, max_tokens, stop token and
 * sampling; when the workload sets abort_after, the request is aborted once
 * that many tokens arrived. SPEC_ROUND events are ignored.
 *
 * On return every record has a final outcome (none is IN_FLIGHT), whatever
 * the status. Returns
 *   ASSAY_OK             the run completed (some requests may still have
 *                        failed or been rejected: see the outcomes);
 *   ASSAY_ERR_TIMEOUT    p->timeout_s passed; r->timed_out is set, live
 *                        requests were aborted, the rest is UNSENT;
 *   the step() error     the adapter broke (r->adapter_status); no further
 *                        request was handed in (UNSENT), the adapter was
 *                        drained within the timeout;
 *   ASSAY_ERR_INVALID    bad parameters, an adapter that is busy on entry,
 *                        or r not made for w (nothing was run);
 *   ASSAY_ERR_NOMEM      drawing the schedule failed (nothing was run).
 */
enum assay_status assay_loadgen_run(const struct assay_adapter *adapter,
                                    const struct assay_workload *w,
                                    const struct assay_loadgen_params *p,
                                    struct assay_loadgen_result *r);

/* The number of warm-up requests p gives for a workload of n requests
 * (resolving ASSAY_LOADGEN_WARMUP_AUTO; never more than n - 1). */
int32_t assay_loadgen_warmup_count(const struct assay_loadgen_params *p, int32_t n);

/* Short names for JSON and tables: "open"/"closed";
 * "trace"/"poisson"/"gamma"/"constant". */
const char *assay_loadgen_kind_str(enum assay_loadgen_kind kind);
const char *assay_arrival_kind_str(enum assay_arrival_kind kind);

#endif
