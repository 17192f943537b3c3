/*
 * metrics.h - latency metrics of a load-generator run, their spread over
 * several runs, goodput against a stated SLO (bench/slo.h), and the JSON
 * that the report embeds.
 *
 * Definitions (per request of the measured phase, times from the records of
 * bench/loadgen.h; "scheduled" is the open loop's scheduled arrival, or the
 * hand-in for a closed loop):
 *   TTFT     first token - scheduled
 *   E2E      finish - scheduled
 *   TPOT     (E2E - TTFT) / (n - 1), for requests with n >= 2 tokens
 *   ITL      every gap between consecutive tokens of a request
 *   lateness hand-in - scheduled (the generator's own delay; open loop only)
 * Latency distributions (TTFT, TPOT, ITL, E2E) are taken over the requests
 * that finished normally (outcome OK); every other outcome is counted
 * beside them and counts against goodput. A request that finished normally
 * without delivering a token has an E2E but no TTFT, and is not good.
 * Lateness is taken over every request that was handed in (rejected ones
 * included).
 *
 * Percentiles are nearest-rank: the q-quantile of n sorted samples
 * x(1) <= ... <= x(n) is x(ceil(q n)), computed in integer arithmetic, so
 * it is always one of the samples (p50 of {1..10} is 5, p95 is 10). Every
 * summary reports p50, p90, p95, p99 and max; never a mean alone.
 *
 * Sufficiency (after MLPerf LoadGen's minimum query counts): a percentile
 * is *sufficient* when the sample holds a one-sided 99%-confidence upper
 * bound for it: the smallest order statistic k with
 * P(Binomial(n, q) <= k - 1) >= 0.99 satisfies k <= n (then
 * P(x(k) >= true q-quantile) >= 0.99). Otherwise the figure is a point
 * estimate the sample cannot bound. n_min, the smallest n for which it is
 * sufficient, is the smallest n with 1 - q^n >= 0.99: 7 for p50, 44 for
 * p90, 90 for p95, 459 for p99; the max never is.
 *
 * Rates: the measured phase runs from its start (open loop: its schedule's
 * time zero; closed: the first hand-in) to the last finish. Output tokens/s
 * counts the tokens of requests that finished normally; achieved
 * requests/s counts those requests. Goodput counts the requests that
 * finished normally and meet both SLO bounds (TTFT <= ttft_s and, when
 * TPOT is defined, TPOT <= tpot_s), as a fraction of every measured request
 * (rejected, failed and lost ones included) and as a rate.
 *
 * GSL: call gsl_set_error_handler_off() (or checks/stats.h's
 * assay_stats_init) once before using the sufficiency functions; their
 * arguments are checked so that GSL reports no error for valid input.
 */
#ifndef ASSAY_METRICS_H
#define ASSAY_METRICS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/status.h"
#include "../core/workload.h"
#include "loadgen.h"
#include "slo.h"

#define ASSAY_BENCH_SCHEMA_VERSION 1
#define ASSAY_SUFFICIENCY_CONFIDENCE 0.99

/* The reported percentiles, in order. */
enum assay_pctl {
    ASSAY_PCTL_P50 = 0,
    ASSAY_PCTL_P90 = 1,
    ASSAY_PCTL_P95 = 2,
    ASSAY_PCTL_P99 = 3,
    ASSAY_PCTL_MAX = 4,
    ASSAY_PCTL_COUNT = 5,
};

/* q of a percentile in basis points (5000, 9000, 9500, 9900, 10000). */
int32_t assay_pctl_bp(enum assay_pctl which);

/* "p50", "p90", "p95", "p99", "max". */
const char *assay_pctl_name(enum assay_pctl which);

/* The nearest-rank q-quantile (q in basis points, 1..10000) of n >= 1
 * sorted values: sorted[ceil(q n / 10000) - 1]. NaN when n < 1 or q is out
 * of range. */
double assay_percentile_nearest_rank(const double *sorted, int64_t n, int32_t q_bp);

/* Whether a sample of n bounds the q-quantile (see the header comment). */
struct assay_sufficiency {
    bool applicable;  /* false for the max (no sample bounds it) */
    int64_t n;        /* samples */
    int64_t k;        /* the order statistic giving the bound (1-based);
                         0 when no k <= n does */
    bool sufficient;  /* k >= 1 (so k <= n) */
    double upper;     /* x(k) when sufficient (filled by
                         assay_latency_summarize), else NaN */
    int64_t n_min;    /* the smallest sufficient n; 0 when not applicable */
};

/*
 * The sufficiency of n samples for the q-quantile at one-sided confidence
 * conf (both in (0, 1)), from gsl_cdf_binomial_P. upper is left NaN.
 * Returns ASSAY_ERR_INVALID for n < 0, n > UINT_MAX, q or conf outside
 * (0, 1); ASSAY_ERR_NUMERIC if GSL returns a non-finite value.
 */
enum assay_status assay_sufficiency_compute(int64_t n, double q, double conf,
                                            struct assay_sufficiency *out);

/* Points of a distribution's CDF: the nearest-rank quantiles at
 * 1%, 2%, ..., 100%, for plots. */
#define ASSAY_CDF_POINTS 100

/* A distribution in seconds: n samples, the five percentiles (NaN when
 * n == 0), the sufficiency of each, and the CDF points. */
struct assay_latency_summary {
    int64_t n;
    double v[ASSAY_PCTL_COUNT];
    struct assay_sufficiency suff[ASSAY_PCTL_COUNT];
    double cdf[ASSAY_CDF_POINTS]; /* cdf[i]: the (i+1)% quantile; NaN when n == 0 */
};

/*
 * Summarise n values (seconds), which are sorted in place. n may be 0.
 * Returns ASSAY_ERR_INVALID for a NaN value or n < 0, or the status of
 * assay_sufficiency_compute; out is fully written on ASSAY_OK only.
 */
enum assay_status assay_latency_summarize(double *values, int64_t n,
                                          struct assay_latency_summary *out);

/* Log-spaced histogram of the generator's lateness: bin 0 is [0, 1 us),
 * bins 1..28 are [1 us * 10^((j-1)/4), 1 us * 10^(j/4)) (four per decade up
 * to 10 s), bin 29 is [10 s, inf). Negative lateness (impossible with one
 * clock) falls in bin 0. */
#define ASSAY_LATENESS_BINS 30
struct assay_lateness_histogram {
    int64_t count[ASSAY_LATENESS_BINS];
};

/* Lower and upper edge of a lateness bin in seconds (0 and +inf at the
 * ends), and the bin a lateness in nanoseconds falls in. */
double assay_lateness_bin_lower(int32_t bin);
double assay_lateness_bin_upper(int32_t bin);
int32_t assay_lateness_bin(int64_t lateness_ns);

/* The figures of one run (its measured phase). */
struct assay_bench_summary {
    struct assay_loadgen_params params; /* as run (warm-up resolved) */
    int32_t n_requests;   /* measured requests (the workload minus warm-up) */
    int32_t n_warmup;     /* run first and left out of every figure */
    int32_t n_ok, n_error, n_rejected, n_aborted, n_lost, n_unsent;
    int64_t output_tokens;  /* of the requests that finished normally */
    double duration_s;      /* start of the measured phase to the last finish */
    bool has_offered_rate;  /* false for a closed loop */
    double offered_rate;    /* req/s; NaN when !has_offered_rate */
    double schedule_rate;   /* req/s of the schedule used; NaN for closed */
    double achieved_rate;   /* n_ok / duration_s */
    double tokens_per_s;    /* output_tokens / duration_s */
    bool has_slo;
    struct assay_slo slo;
    int32_t n_good;         /* OK and within the SLO (0 without one) */
    double goodput_fraction; /* n_good / n_requests (NaN without an SLO) */
    double goodput_rate;    /* n_good / duration_s (NaN without an SLO) */
    struct assay_latency_summary ttft, tpot, itl, e2e;
    struct assay_latency_summary lateness; /* n = 0 for a closed loop */
    struct assay_lateness_histogram lateness_hist;
    int32_t max_in_flight;
    int64_t n_steps;
    int64_t n_bad_events;
    bool timed_out;
    enum assay_status adapter_status;
};

/*
 * Compute the summary of a run against slo (NULL: no SLO; else both bounds
 * must be finite and > 0). Scratch memory is allocated and released here.
 * Returns ASSAY_ERR_INVALID (bad SLO, a record still IN_FLIGHT),
 * ASSAY_ERR_NOMEM, or a status of assay_latency_summarize; out is fully
 * written on ASSAY_OK only.
 */
enum assay_status assay_bench_summarize(const struct assay_loadgen_result *r,
                                        const struct assay_slo *slo,
                                        struct assay_bench_summary *out);

/* min / median / max of one figure over runs (median: the middle value, or
 * the mean of the two middle values for an even count; NaN values are left
 * out, and all three are NaN when every value is). */
struct assay_spread {
    double min, median, max;
};

/* The spread of the headline figures over several runs of one
 * configuration. */
struct assay_bench_spread {
    int32_t n_runs;
    struct assay_spread ttft[ASSAY_PCTL_COUNT];
    struct assay_spread tpot[ASSAY_PCTL_COUNT];
    struct assay_spread itl[ASSAY_PCTL_COUNT];
    struct assay_spread e2e[ASSAY_PCTL_COUNT];
    struct assay_spread lateness[ASSAY_PCTL_COUNT];
    struct assay_spread achieved_rate, tokens_per_s, goodput_fraction, goodput_rate;
    /* The median over runs of each CDF point, for plots. */
    double ttft_cdf[ASSAY_CDF_POINTS], tpot_cdf[ASSAY_CDF_POINTS];
    double itl_cdf[ASSAY_CDF_POINTS], e2e_cdf[ASSAY_CDF_POINTS];
};

/* The spread over n_runs >= 1 summaries. Never fails for valid pointers;
 * n_runs < 1 leaves every spread NaN. */
void assay_bench_spread_compute(const struct assay_bench_summary *runs, int32_t n_runs,
                                struct assay_bench_spread *out);

/* Runs of one configuration (assay_bench_run). */
#define ASSAY_BENCH_DEFAULT_RUNS 3
struct assay_bench_result {
    struct assay_loadgen_params params; /* as given */
    bool has_slo;
    struct assay_slo slo;
    int32_t n_runs;
    struct assay_bench_summary *runs;   /* (n_runs) */
    struct assay_bench_spread spread;
    enum assay_status status;           /* the first run's non-OK status */
};

/*
 * Run workload w n_runs times (>= 1; ASSAY_BENCH_DEFAULT_RUNS is the usual
 * choice) with generator p and summarise each run against slo (may be
 * NULL). Run r draws its schedule with seed p->seed + r, so the spread
 * covers the arrival process as well as the engine. One loadgen result is
 * allocated before the first run and reused. Release with
 * assay_bench_result_release.
 * Returns ASSAY_OK when every run completed; otherwise the first failing
 * run's status (ASSAY_ERR_TIMEOUT or an adapter error: out holds the runs
 * done so far, that one included, and out->n_runs says how many);
 * ASSAY_ERR_INVALID / ASSAY_ERR_NOMEM before any run (out then holds no
 * run).
 */
enum assay_status assay_bench_run(const struct assay_adapter *adapter,
                                  const struct assay_workload *w,
                                  const struct assay_loadgen_params *p,
                                  const struct assay_slo *slo, int32_t n_runs,
                                  struct assay_bench_result *out);

/* Release what assay_bench_run allocated and clear out; NULL-safe. */
void assay_bench_result_release(struct assay_bench_result *r);

/*
 * The JSON of a benchmark result, schema "assay-bench" version 1
 * (ASSAY_BENCH_SCHEMA_VERSION). The report embeds it as is. Times are in
 * seconds, rates per second; a figure that does not exist (a NaN: no
 * offered rate in a closed loop, a percentile of no samples) is null.
 *
 * {
 *   "format": "assay-bench", "version": 1,
 *   "percentile_definition": "nearest-rank: x(ceil(q n)) of the n sorted samples",
 *   "sufficiency_confidence": 0.99,
 *   "generator": {
 *     "kind": "open" | "closed",
 *     "arrival": "trace" | "poisson" | "gamma" | "constant" | null (closed),
 *     "rate": offered req/s set | null (trace, closed),
 *     "cv": gamma's coefficient of variation | null,
 *     "seed": base seed (run r uses seed + r) | null (trace, constant, closed),
 *     "workers": N | null (open),
 *     "warmup": requests run and discarded first in each run,
 *     "spin_us": busy-wait before each arrival, "timeout_s": 0 = none
 *   },
 *   "workload": {
 *     "name", "description",
 *     "lengths": the stated length distributions (workload.lengths),
 *     "arrivals": the stated arrival process (workload.arrivals),
 *     "n_requests": n,
 *     "prompt_len": {"min", "p50", "p90", "max"},   (of the workload itself)
 *     "output_len": {"min", "p50", "p90", "max"}    (max_tokens)
 *   },
 *   "slo": {"ttft_s", "tpot_s"} | null,
 *   "runs": [ run, ... ],
 *   "spread": {
 *     "n_runs",
 *     "ttft" | "tpot" | "itl" | "e2e" | "lateness":
 *         {"p50": {"min", "median", "max"}, "p90": ..., "p95": ..., "p99": ..., "max": ...},
 *     "achieved_rate" | "tokens_per_s" | "goodput_fraction" | "goodput_rate":
 *         {"min", "median", "max"}
 *   }
 * }
 * run = {
 *   "seed": the seed the run drew its schedule with | null,
 *   "n_requests", "n_warmup",
 *   "outcomes": {"ok", "error", "rejected", "aborted", "lost", "unsent"},
 *   "output_tokens", "duration_s",
 *   "has_offered_rate": false for a closed loop,
 *   "offered_rate" (null for closed; null also when infinite: a burst),
 *   "schedule_rate", "achieved_rate", "tokens_per_s",
 *   "goodput": {"n_good", "fraction", "rate"} | null (no SLO),
 *   "ttft" | "tpot" | "itl" | "e2e" | "lateness": dist,   (lateness: null for closed)
 *   "lateness_histogram": [{"lo_s", "hi_s" (null: +inf), "count"}, ...]
 *                         (the non-empty bins; null for closed),
 *   "max_in_flight", "steps", "bad_events", "timed_out",
 *   "adapter_status": "ok" or the status name of the first step() error
 * }
 * dist = {"n", "p50", "p90", "p95", "p99", "max",
 *         "sufficiency": {"p50" | "p90" | "p95" | "p99":
 *                          {"k" (null when none), "n", "sufficient",
 *                           "upper_bound" (x(k) | null), "n_min"}}}
 *
 * w may be NULL (then "workload" is null). On success *out owns a cJSON
 * object (free with cJSON_Delete); returns ASSAY_ERR_NOMEM (nothing is
 * leaked, *out is NULL).
 */
enum assay_status assay_bench_result_to_json(const struct assay_bench_result *r,
                                             const struct assay_workload *w, cJSON **out);

/* The "run" object above for one summary (the seed table uses it). Same
 * returns. */
enum assay_status assay_bench_summary_to_json(const struct assay_bench_summary *s, cJSON **out);

#endif
