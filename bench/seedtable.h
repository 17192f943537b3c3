/*
 * seedtable.h - the comparison of seed-ch28.txt in one call, and a rate
 * sweep for the highest offered rate a service sustains under its SLO.
 *
 * The seed table runs one engine on one workload under both generators:
 * the open loop at an offered rate above the engine's capacity, then the
 * closed loop at 2, 4 and 8 workers, and returns one row per generator
 * setting (TTFT p50/p95/p99, offered and achieved requests/s). Everything
 * but the generator is the same, so the rows isolate what the generator
 * does to the reported tail (coordinated omission: a closed loop cannot let
 * a queue grow, so it never measures one). Each row is several runs, with
 * the median reported and the spread kept.
 *
 * The sweep searches the offered rate (open loop) whose goodput fraction
 * under the SLO stays at or above a target (0.99 by default). See
 * assay_rate_sweep for the search and its budget.
 */
#ifndef ASSAY_SEEDTABLE_H
#define ASSAY_SEEDTABLE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/workload.h"
#include "loadgen.h"
#include "metrics.h"

#define ASSAY_SEEDTABLE_MAX_CLOSED 8

struct assay_seedtable_params {
    /* The open-loop row. open_rate > 0 is the offered rate; open_rate <= 0
     * measures the engine's capacity first (the achieved rate of one
     * open-loop burst: every request of the workload due at once, which
     * lets a batching engine run as full as it can) and offers
     * capacity_factor times that. */
    double open_rate;
    double capacity_factor;          /* > 1; used when open_rate <= 0 */
    enum assay_arrival_kind arrival; /* POISSON, GAMMA or CONSTANT */
    double cv;                       /* GAMMA */
    uint64_t seed;                   /* open loop's first run; run r: seed + r */
    /* The closed-loop rows. */
    int32_t n_closed;                /* 1..ASSAY_SEEDTABLE_MAX_CLOSED */
    int32_t workers[ASSAY_SEEDTABLE_MAX_CLOSED];
    /* Every row. */
    int32_t n_runs;                  /* runs per row, >= 1 */
    int32_t warmup;                  /* as assay_loadgen_params.warmup */
    double timeout_s;                /* per run; 0 = none */
    struct assay_bench_progress progress; /* after the capacity and each run, labelled
                                             with its row (fn NULL: none) */
};

/* Poisson, open_rate 0 (measure, factor 2.5), seed 1, closed at 2, 4 and 8
 * workers, 3 runs per row, warm-up ASSAY_LOADGEN_WARMUP_AUTO, timeout 600 s. */
struct assay_seedtable_params assay_seedtable_default_params(void);

/* One row of the table: the median over the row's runs of each figure,
 * and every run kept in `result`. */
struct assay_seedtable_row {
    enum assay_loadgen_kind kind;
    double rate;          /* open: the offered rate set; closed: NaN */
    int32_t n_workers;    /* closed: N; open: 0 */
    double ttft_p50, ttft_p95, ttft_p99; /* seconds, median over runs */
    bool has_offered_rate;
    double offered_rate;  /* req/s; NaN for closed */
    double achieved_rate; /* req/s, median over runs */
    struct assay_bench_result result; /* owned by the row */
};

struct assay_seedtable {
    double capacity;      /* req/s measured by the burst (NaN when open_rate
                             was given) */
    int32_t n_rows;       /* 1 + n_closed */
    struct assay_seedtable_row rows[1 + ASSAY_SEEDTABLE_MAX_CLOSED];
};

/*
 * Run the table: the open-loop row first, then the closed rows in the
 * order given, all against the same adapter and workload, with slo (may be
 * NULL) for goodput. Release with assay_seedtable_release (also after a
 * failure). Returns ASSAY_ERR_INVALID for bad params (nothing run),
 * ASSAY_ERR_NOMEM, or the first failing run's status (see assay_bench_run);
 * out->n_rows then counts the rows completed, the failing one included.
 */
enum assay_status assay_seedtable_run(const struct assay_adapter *adapter,
                                      const struct assay_workload *w,
                                      const struct assay_seedtable_params *p,
                                      const struct assay_slo *slo, struct assay_seedtable *out);

/* Release every row's runs (also after a failed assay_seedtable_run) and
 * set n_rows to 0; NULL-safe. */
void assay_seedtable_release(struct assay_seedtable *t);

/*
 * The table as JSON: {"format": "assay-seedtable", "version": 1,
 * "capacity": req/s | null, "rows": [{"generator": "open" | "closed",
 * "setting": "24.0 req/s offered" | "4 workers", "rate", "workers",
 * "ttft_p50", "ttft_p95", "ttft_p99", "offered_rate" (null for closed),
 * "achieved_rate", "bench": the assay-bench object of the row}]}.
 * w may be NULL. *out owns the object (cJSON_Delete); ASSAY_ERR_NOMEM.
 */
enum assay_status assay_seedtable_to_json(const struct assay_seedtable *t,
                                          const struct assay_workload *w, cJSON **out);

/* "24.0 req/s offered" or "4 workers" into buf; returns buf. */
char *assay_seedtable_setting(const struct assay_seedtable_row *row, char *buf, size_t size);

/*
 * The engine's capacity on w: the achieved rate of one burst (every request
 * due at once, after `warmup` requests run apart), so a batching engine
 * fills its batch. ASSAY_ERR_NUMERIC if no request finished.
 */
enum assay_status assay_bench_capacity(const struct assay_adapter *adapter,
                                       const struct assay_workload *w, int32_t warmup,
                                       double timeout_s, double *out);

/* ---- rate sweep --------------------------------------------------------- */

#define ASSAY_SWEEP_MAX_PROBES 32

struct assay_sweep_params {
    double start_rate;     /* first probe, req/s, > 0 */
    double target;         /* goodput fraction to sustain, in (0, 1] */
    int32_t max_probes;    /* runs in all, 2..ASSAY_SWEEP_MAX_PROBES */
    double rel_tol;        /* stop when fail / pass <= 1 + rel_tol; > 0 */
    double max_rate;       /* never probe above this (a guard), > start_rate */
    double min_rate;       /* never probe below this, in (0, start_rate]: a
                              probe at rate r lasts about n / r seconds */
    enum assay_arrival_kind arrival; /* POISSON, GAMMA or CONSTANT */
    double cv;
    uint64_t seed;         /* the same seed at every rate */
    int32_t warmup;
    double timeout_s;      /* per probe */
    struct assay_bench_progress progress; /* after each probe (fn NULL: none) */
};

/* start 1 req/s, target 0.99, 12 probes, rel_tol 0.05, max 1e6 req/s,
 * min 0.01 req/s, Poisson, seed 1, warm-up auto, timeout 600 s. */
struct assay_sweep_params assay_sweep_default_params(void);

struct assay_sweep_probe {
    double rate;
    double goodput_fraction;
    bool pass;             /* goodput_fraction >= target */
    double achieved_rate;  /* req/s */
    double ttft_p50, ttft_p99, tpot_p99, e2e_p99; /* seconds */
};

struct assay_sweep_result {
    double best_rate;      /* the highest passing rate probed; 0 if none */
    double fail_rate;      /* the lowest failing rate probed; +inf if none */
    bool bracketed;        /* both exist, best_rate < fail_rate and
                              fail_rate / best_rate <= 1 + rel_tol */
    int32_t n_probes;
    struct assay_sweep_probe probes[ASSAY_SWEEP_MAX_PROBES];
};

/*
 * Find the highest offered rate whose goodput under slo stays >= target,
 * with at most max_probes open-loop runs (one run per probed rate):
 *  1. probe start_rate;
 *  2. bracket: while the last probe passed, double the rate (up to
 *     max_rate); while it failed, halve it (down to min_rate); until one
 *     pass and one fail are known, or a guard is reached;
 *  3. bisect geometrically (probe sqrt(pass * fail)) until
 *     fail / pass <= 1 + rel_tol or the budget is spent.
 * Every probe uses the same seed, so its schedule is the same sequence of
 * gaps scaled by 1/rate (common random numbers: the comparison between
 * rates is not blurred by different draws). The search assumes goodput
 * falls as the rate rises; with noise, a non-monotone answer can stop it
 * at a local edge, which the probes (all reported) show.
 * Returns ASSAY_ERR_INVALID for bad params or SLO, ASSAY_ERR_NOMEM, or a
 * failing run's status (out holds the probes so far).
 */
enum assay_status assay_rate_sweep(const struct assay_adapter *adapter,
                                   const struct assay_workload *w,
                                   const struct assay_sweep_params *p,
                                   const struct assay_slo *slo, struct assay_sweep_result *out);

#endif
