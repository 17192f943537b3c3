/*
 * versus.h - several engines benchmarked side by side in one run, on one
 * workload, under the same generators: what `assay audit` reports for a
 * server next to the bundled engine.
 *
 * Three configurations, each with the same runs for every engine:
 *   single   closed loop, 1 worker: one request at a time (single-stream
 *            tokens/s, TTFT without queueing);
 *   batched  closed loop, batch_workers workers (the server's slots):
 *            batched tokens/s;
 *   open     open loop (Poisson by default) at one offered rate for every
 *            engine: open_rate, or else open_factor times the lowest
 *            batched achieved rate among the engines, so that every engine
 *            gets the same load with headroom; TTFT, TPOT, E2E percentiles
 *            from the scheduled arrival.
 * Order: for each configuration, for each run r, every engine in the
 * order given, back to back (interleaved run by run), so that a change in
 * the machine's load during the comparison reaches every engine alike; run
 * r of every engine uses seed + r, so the engines see the same arrival
 * schedules.
 */
#ifndef ASSAY_VERSUS_H
#define ASSAY_VERSUS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/workload.h"
#include "loadgen.h"
#include "metrics.h"

#define ASSAY_VERSUS_MAX_ENGINES 4
#define ASSAY_VERSUS_VERSION 1

enum assay_versus_config {
    ASSAY_VERSUS_SINGLE = 0,
    ASSAY_VERSUS_BATCHED = 1,
    ASSAY_VERSUS_OPEN = 2,
    ASSAY_VERSUS_N_CONFIGS = 3,
};

/* "single", "batched", "open". */
const char *assay_versus_config_str(enum assay_versus_config c);

/* One engine of the comparison (both borrowed for the call). */
struct assay_versus_engine {
    const char *name; /* "server", "bundled" */
    const char *spec; /* the engine spec, for the report */
    const struct assay_adapter *adapter;
};

struct assay_versus_params {
    int32_t batch_workers;           /* >= 1 */
    double open_rate;                /* > 0: offered req/s; else derived (above) */
    double open_factor;              /* in (0, 1]; used when open_rate <= 0 */
    enum assay_arrival_kind arrival; /* POISSON, GAMMA or CONSTANT */
    double cv;                       /* GAMMA */
    uint64_t seed;                   /* run r: seed + r */
    int32_t n_runs;                  /* >= 1 */
    int32_t warmup;                  /* as assay_loadgen_params.warmup */
    double timeout_s;                /* per run; 0 = none */
};

/* 4 workers, open rate derived with factor 0.5, Poisson, seed 1, 3 runs,
 * warm-up ASSAY_LOADGEN_WARMUP_AUTO, timeout 300 s. */
struct assay_versus_params assay_versus_default_params(void);

struct assay_versus {
    int32_t n_engines;
    char name[ASSAY_VERSUS_MAX_ENGINES][32];
    char spec[ASSAY_VERSUS_MAX_ENGINES][512];
    struct assay_versus_params params; /* as given */
    double open_rate;                   /* the rate the open loop offered (NaN: not run) */
    bool open_rate_derived;             /* from the batched rates */
    /* [engine][config]; a result with n_runs 0 did not run. */
    struct assay_bench_result results[ASSAY_VERSUS_MAX_ENGINES][ASSAY_VERSUS_N_CONFIGS];
    enum assay_status status[ASSAY_VERSUS_MAX_ENGINES][ASSAY_VERSUS_N_CONFIGS];
};

/*
 * Run the comparison of n engines (1..ASSAY_VERSUS_MAX_ENGINES) on
 * workload w with slo (may be NULL) for goodput. A configuration that
 * fails for one engine (timeout, a broken adapter) is recorded in its
 * status, and the others go on. Returns ASSAY_OK when every run of every
 * engine completed, ASSAY_ERR_INVALID for bad parameters (nothing run),
 * ASSAY_ERR_NOMEM, or the first failing run's status. Release with
 * assay_versus_release (also after a failure).
 */
enum assay_status assay_versus_run(const struct assay_versus_engine *engines, int32_t n,
                                    const struct assay_workload *w,
                                    const struct assay_versus_params *p,
                                    const struct assay_slo *slo, struct assay_versus *out);

/* Release every result; NULL-safe. */
void assay_versus_release(struct assay_versus *c);

/* The median over runs of a figure of one engine's configuration, NaN when
 * it did not run: tokens/s, achieved req/s, and TTFT / TPOT / E2E at a
 * percentile. */
double assay_versus_tokens_per_s(const struct assay_versus *c, int32_t engine,
                                  enum assay_versus_config config);
double assay_versus_latency(const struct assay_versus *c, int32_t engine,
                             enum assay_versus_config config, const char *metric,
                             enum assay_pctl which);

/*
 * The comparison as JSON (format "assay-versus", version 1):
 * {"format", "version", "order" (how the runs were interleaved, in words),
 *  "runs", "batch_workers", "open_rate" (req/s | null), "open_rate_rule"
 *  (how it was chosen), "arrival", "seed",
 *  "engines": [{"name", "spec",
 *     "figures": {"single_tokens_per_s", "batched_tokens_per_s",
 *                 "open_tokens_per_s", "single_ttft_p50", "ttft_p50",
 *                 "ttft_p90", "ttft_p99", "tpot_p50", "tpot_p99", "e2e_p50",
 *                 "e2e_p99", "open_achieved_rate"} (medians over runs;
 *                 null when not measured),
 *     "single" | "batched" | "open": an assay-bench object | null,
 *     "status": {"single" | "batched" | "open": "ok" or the status name}}]}
 * Times in seconds, rates per second. w may be NULL. *out owns the object;
 * ASSAY_ERR_NOMEM.
 */
enum assay_status assay_versus_to_json(const struct assay_versus *c,
                                        const struct assay_workload *w, cJSON **out);

#endif
