/*
 * speedup.h - is the candidate really faster? Two engines on the same
 * workload, runs interleaved, every figure as a ratio with a confidence
 * interval.
 *
 * The design (seed chapter, rules 1-5 and 8):
 *  - Pairs. Run r of the baseline and run r of the candidate form pair r;
 *    both get the same open-loop schedule (Poisson and gamma draw it with
 *    seed + r, so the spread covers the arrival process as well). Pairs run
 *    one after the other and within a pair the order alternates, A B, B A,
 *    A B, ...: whatever drifts on the machine (another job, thermal state,
 *    the page cache) hits both engines alike, and a drift that is linear in
 *    time cancels over two pairs instead of favouring whoever runs second.
 *    Each run discards its warm-up requests (bench/loadgen.h).
 *  - Figures, per engine, pooled over its runs: TTFT and TPOT percentiles
 *    (p50, p90, p99, nearest rank over the pooled requests: metrics.h's
 *    definitions), output tokens/s (all tokens of the requests that finished
 *    normally over the summed measured durations) and goodput (requests
 *    within the SLO per second of the summed durations; only with an SLO).
 *  - The ratio candidate / baseline of each figure, with a bootstrap
 *    confidence interval. The bootstrap resamples *pairs of runs* (a
 *    cluster bootstrap), not requests: requests of one run are not
 *    independent (one slow step delays every request queued behind it, and
 *    a queue couples their latencies), so resampling requests would count
 *    correlated samples as independent and give intervals too narrow; and
 *    the run-to-run variation of a shared, noisy machine is part of what a
 *    verdict must survive, which only resampling runs includes. Keeping a
 *    pair's two runs together keeps what the interleaving bought: the
 *    drift they shared cancels in the ratio. Each replicate draws n_pairs
 *    pair indices with replacement (from a counter-based stream of the
 *    stated seed), pools each engine's requests of the drawn runs, and
 *    computes every figure and ratio. The interval is then made on the log
 *    of the ratio, from the replicates' standard deviation s and Student's
 *    t with (pairs - 1) degrees of freedom: ratio * exp(+-t s). With a
 *    handful of clusters the plain percentile interval is too narrow (under
 *    the null with 8 pairs and run-to-run noise it covered 1 about 88% of
 *    the time for a nominal 95%; test_compare prints the figures), and
 *    t(G - 1) critical values are the usual small-cluster correction. When
 *    a replicate's ratio is 0 or infinite (a goodput of 0) the percentile
 *    interval is used instead. 5 pairs or more are recommended.
 *  - Significance: the interval excludes 1. A regression: the candidate is
 *    significantly worse by more than the threshold, i.e. the whole
 *    interval lies beyond it: a latency ratio above 1 + threshold, a
 *    throughput or goodput ratio below 1 / (1 + threshold) (the same
 *    slowdown of the work per second). Noise alone then rarely fails a
 *    merge check, and a real slowdown past the threshold does.
 *
 * A ratio whose baseline figure is 0 (no request met the SLO) is +inf when
 * the candidate's is not, and NaN when both are 0; NaN figures are never
 * significant.
 *
 * Nothing here prints or exits; allocation goes through core/alloc.h.
 *
 * Usage:
 *     struct assay_speedup_params p = assay_speedup_default_params();
 *     p.slo = slo; p.has_slo = true;
 *     struct assay_speedup_result r;
 *     assay_speedup_run(&baseline, &candidate, w, &p, &r);
 *     ... r.fig[ASSAY_SPEEDUP_TTFT_P50].ratio, .lo, .hi ...
 *     assay_speedup_release(&r);
 */
#ifndef ASSAY_SPEEDUP_H
#define ASSAY_SPEEDUP_H

#include <stdbool.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../core/status.h"
#include "../core/workload.h"
#include "metrics.h"

#define ASSAY_SPEEDUP_DEFAULT_PAIRS 5
#define ASSAY_SPEEDUP_DEFAULT_BOOT 2000
#define ASSAY_SPEEDUP_DEFAULT_CONFIDENCE 0.95
#define ASSAY_SPEEDUP_DEFAULT_THRESHOLD 0.10

/* The figures compared, in report order. */
enum assay_speedup_metric {
    ASSAY_SPEEDUP_TTFT_P50 = 0,
    ASSAY_SPEEDUP_TTFT_P90,
    ASSAY_SPEEDUP_TTFT_P99,
    ASSAY_SPEEDUP_TPOT_P50,
    ASSAY_SPEEDUP_TPOT_P90,
    ASSAY_SPEEDUP_TPOT_P99,
    ASSAY_SPEEDUP_THROUGHPUT, /* output tokens/s */
    ASSAY_SPEEDUP_GOODPUT,    /* requests within the SLO per second */
    ASSAY_SPEEDUP_COUNT,
};

/* "ttft_p50", ..., "throughput", "goodput" (JSON names). */
const char *assay_speedup_metric_name(enum assay_speedup_metric m);
/* "TTFT p50", ..., "Throughput", "Goodput" (for people). */
const char *assay_speedup_metric_label(enum assay_speedup_metric m);
/* "s", "tokens/s" or "req/s". */
const char *assay_speedup_metric_unit(enum assay_speedup_metric m);
/* True for latencies (lower is better), false for rates. */
bool assay_speedup_lower_is_better(enum assay_speedup_metric m);

struct assay_speedup_params {
    struct assay_loadgen_params gen; /* the generator of every run (its seed:
                                        pair r uses seed + r when it draws) */
    int32_t n_pairs;      /* >= 2 */
    int32_t n_boot;       /* bootstrap replicates, >= 100 */
    double confidence;    /* of the intervals, in (0.5, 1) */
    double threshold;     /* slowdown fraction that is a regression, >= 0 */
    uint64_t boot_seed;   /* the bootstrap's stream */
    bool has_slo;
    struct assay_slo slo; /* for goodput; without it goodput is not compared */
    bool gate[ASSAY_SPEEDUP_COUNT]; /* figures whose regression counts (all) */
    enum assay_speedup_interval {
        ASSAY_SPEEDUP_INTERVAL_T = 0,          /* log ratio +- t(pairs - 1) s (default) */
        ASSAY_SPEEDUP_INTERVAL_PERCENTILE = 1, /* the replicates' quantiles */
    } interval;
};

/* Open loop with the workload's own arrival times (TRACE), warm-up auto,
 * timeout 600 s per run; ASSAY_SPEEDUP_DEFAULT_PAIRS pairs,
 * ASSAY_SPEEDUP_DEFAULT_BOOT replicates, confidence 0.95, threshold 0.10,
 * boot_seed 1, no SLO, every figure gated. */
struct assay_speedup_params assay_speedup_default_params(void);

/* How one figure changed. */
enum assay_speedup_change {
    ASSAY_SPEEDUP_SAME = 0,   /* no significant difference */
    ASSAY_SPEEDUP_BETTER = 1, /* significantly better */
    ASSAY_SPEEDUP_WORSE = 2,  /* significantly worse (within the threshold or not) */
};

struct assay_speedup_figure {
    double baseline, candidate; /* pooled over every run (seconds or per second) */
    double ratio;               /* candidate / baseline */
    double lo, hi;              /* the bootstrap interval of the ratio */
    int64_t n_baseline, n_candidate; /* samples behind the figure (requests) */
    bool compared;              /* false: not computed (goodput without an SLO) */
    enum assay_speedup_change change;
    bool regression;            /* worse beyond the threshold, and gated */
};

/* The overall speed verdict. */
enum assay_speedup_verdict {
    ASSAY_SPEEDUP_NO_DIFFERENCE = 0, /* no figure changed significantly */
    ASSAY_SPEEDUP_FASTER = 1,        /* some better, none worse */
    ASSAY_SPEEDUP_SLOWER = 2,        /* some worse (within the threshold), none better */
    ASSAY_SPEEDUP_MIXED = 3,         /* some better, some worse (within the threshold) */
    ASSAY_SPEEDUP_REGRESSION = 4,    /* a gated figure worse beyond the threshold */
    ASSAY_SPEEDUP_NOT_MEASURED = 5,  /* the runs could not complete */
};

/* A ratio for people, into buf: "227x lower" or "3.1x higher" beyond a
 * factor of 2, else "12.3% higher", "0.4% lower", "no change"; "up from 0"
 * for +inf, "n/a" for NaN. Returns buf. */
char *assay_speedup_describe(char *buf, size_t size, double ratio);

/* A ratio or an interval bound, 3 significant digits ("0.00441", "1.02",
 * "227"); "inf", "n/a". Returns buf. */
char *assay_speedup_ratio_text(char *buf, size_t size, double ratio);

/* "no significant difference", "faster", "slower", "mixed", "regression",
 * "not measured". */
const char *assay_speedup_verdict_str(enum assay_speedup_verdict v);

struct assay_speedup_result {
    struct assay_speedup_params params;
    int32_t n_pairs;                     /* pairs completed */
    struct assay_bench_result baseline;  /* its runs (run r is pair r) and spread */
    struct assay_bench_result candidate;
    bool *candidate_first;               /* (n_pairs) the candidate ran first in pair r */
    struct assay_speedup_figure fig[ASSAY_SPEEDUP_COUNT];
    enum assay_speedup_verdict verdict;
    enum assay_status status;            /* ASSAY_OK, or why the runs stopped */
    char error[256];                     /* when status is not ASSAY_OK */
};

/*
 * Run the pairs described above with baseline and candidate (both idle; each
 * is idle again on return) on workload w, then compute the figures, the
 * intervals and the verdict. Returns ASSAY_OK when every pair completed
 * (a request that failed or was rejected is counted in its run's outcomes
 * and weighs on throughput and goodput as in metrics.h); ASSAY_ERR_INVALID for
 * bad parameters (nothing run), ASSAY_ERR_NOMEM, or the status of the first
 * run that could not complete (a timeout, an adapter error): then out holds
 * the pairs completed before it, verdict NOT_MEASURED, and out->error says
 * which engine and pair. Release with assay_speedup_release in every case.
 */
enum assay_status assay_speedup_run(const struct assay_adapter *baseline,
                                    const struct assay_adapter *candidate,
                                    const struct assay_workload *w,
                                    const struct assay_speedup_params *p,
                                    struct assay_speedup_result *out);

/*
 * The figures, intervals and verdict from the per-request data of the
 * runs (assay_speedup_run calls it; exposed so that tests can feed runs of
 * a known difference). baseline[r] and candidate[r] (r < n_pairs) hold pair
 * r's TTFT and TPOT samples in seconds (any order), output tokens,
 * requests within the SLO and measured duration. fig gets
 * ASSAY_SPEEDUP_COUNT figures. Returns ASSAY_OK, ASSAY_ERR_INVALID
 * (n_pairs < 1, bad parameters), ASSAY_ERR_NOMEM.
 */
struct assay_speedup_run_data {
    const double *ttft;  /* (n_ttft) */
    int64_t n_ttft;
    const double *tpot;  /* (n_tpot) */
    int64_t n_tpot;
    int64_t output_tokens;
    int64_t n_good;
    double duration_s;
};
enum assay_status assay_speedup_analyse(const struct assay_speedup_run_data *baseline,
                                        const struct assay_speedup_run_data *candidate,
                                        int32_t n_pairs, const struct assay_speedup_params *p,
                                        struct assay_speedup_figure *fig,
                                        enum assay_speedup_verdict *verdict);

/* Release what assay_speedup_run allocated and clear r; NULL-safe. */
void assay_speedup_release(struct assay_speedup_result *r);

#endif
