/*
 * speedup.c - the speed half of `assay compare` (speedup.h):
 * assay_speedup_run runs the baseline and the candidate in interleaved pairs
 * of open-loop runs on the same schedules, and assay_speedup_analyse turns
 * them into per-figure ratios (TTFT and TPOT percentiles, throughput,
 * goodput) with cluster-bootstrap confidence intervals and a verdict.
 * cli/cmd_compare.c calls it and the report prints the ratios.
 */
#include "speedup.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "../core/alloc.h"
#include "../core/rng.h"

static const char *const k_name[ASSAY_SPEEDUP_COUNT] = {
    "ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "tpot_p90", "tpot_p99", "throughput", "goodput",
};
static const char *const k_label[ASSAY_SPEEDUP_COUNT] = {
    "TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50", "TPOT p90", "TPOT p99", "Throughput", "Goodput",
};
/* The percentile of each latency figure, in basis points. */
static const int32_t k_bp[6] = {5000, 9000, 9900, 5000, 9000, 9900};

const char *assay_speedup_metric_name(enum assay_speedup_metric m)
{
    return m >= 0 && m < ASSAY_SPEEDUP_COUNT ? k_name[m] : "?";
}

const char *assay_speedup_metric_label(enum assay_speedup_metric m)
{
    return m >= 0 && m < ASSAY_SPEEDUP_COUNT ? k_label[m] : "?";
}

const char *assay_speedup_metric_unit(enum assay_speedup_metric m)
{
    return m == ASSAY_SPEEDUP_THROUGHPUT ? "tokens/s" : m == ASSAY_SPEEDUP_GOODPUT ? "req/s" : "s";
}

bool assay_speedup_lower_is_better(enum assay_speedup_metric m)
{
    return m < ASSAY_SPEEDUP_THROUGHPUT;
}

const char *assay_speedup_verdict_str(enum assay_speedup_verdict v)
{
    switch (v) {
    case ASSAY_SPEEDUP_NO_DIFFERENCE: return "no significant difference";
    case ASSAY_SPEEDUP_FASTER: return "faster";
    case ASSAY_SPEEDUP_SLOWER: return "slower";
    case ASSAY_SPEEDUP_MIXED: return "mixed";
    case ASSAY_SPEEDUP_REGRESSION: return "regression";
    case ASSAY_SPEEDUP_NOT_MEASURED: return "not measured";
    }
    return "?";
}

char *assay_speedup_describe(char *buf, size_t size, double ratio)
{
    if (isnan(ratio)) {
        snprintf(buf, size, "n/a");
    } else if (isinf(ratio)) {
        snprintf(buf, size, "up from 0");
    } else if (ratio >= 2.0) {
        snprintf(buf, size, "%.3gx higher", ratio);
    } else if (ratio <= 0.0) {
        snprintf(buf, size, "down to 0");
    } else if (ratio <= 0.5) {
        snprintf(buf, size, "%.3gx lower", 1.0 / ratio);
    } else if (ratio == 1.0) {
        snprintf(buf, size, "no change");
    } else {
        double pct = fabs(ratio - 1.0) * 100.0;
        snprintf(buf, size, pct < 1.0 ? "%.2g%% %s" : "%.1f%% %s", pct,
                 ratio > 1.0 ? "higher" : "lower");
    }
    return buf;
}

char *assay_speedup_ratio_text(char *buf, size_t size, double ratio)
{
    if (isnan(ratio)) {
        snprintf(buf, size, "n/a");
    } else if (isinf(ratio)) {
        snprintf(buf, size, "inf");
    } else {
        snprintf(buf, size, "%.3g", ratio);
    }
    return buf;
}

struct assay_speedup_params assay_speedup_default_params(void)
{
    struct assay_speedup_params p;
    memset(&p, 0, sizeof p);
    p.gen = assay_loadgen_default_params();
    p.gen.kind = ASSAY_LOADGEN_OPEN;
    p.gen.arrival = ASSAY_ARRIVAL_TRACE;
    p.gen.timeout_s = 600;
    p.n_pairs = ASSAY_SPEEDUP_DEFAULT_PAIRS;
    p.n_boot = ASSAY_SPEEDUP_DEFAULT_BOOT;
    p.confidence = ASSAY_SPEEDUP_DEFAULT_CONFIDENCE;
    p.threshold = ASSAY_SPEEDUP_DEFAULT_THRESHOLD;
    p.boot_seed = 1;
    for (int m = 0; m < ASSAY_SPEEDUP_COUNT; m++) {
        p.gate[m] = true;
    }
    return p;
}

static bool valid_params(const struct assay_speedup_params *p)
{
    return p->n_pairs >= 1 && p->n_boot >= 100 && p->n_boot <= 1000000 &&
           p->confidence > 0.5 && p->confidence < 1.0 && isfinite(p->threshold) &&
           p->threshold >= 0.0 &&
           (!p->has_slo || (isfinite(p->slo.ttft_s) && p->slo.ttft_s > 0 &&
                            isfinite(p->slo.tpot_s) && p->slo.tpot_s > 0));
}

/* ---- analysis ------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Figures of one engine over the runs idx[0..k) (with repeats). */
struct pooled {
    double v[ASSAY_SPEEDUP_COUNT];
    int64_t n_ttft, n_tpot;
};

static void pool(const struct assay_speedup_run_data *runs, const int32_t *idx, int32_t k,
                 bool has_slo, double *scratch, struct pooled *out)
{
    for (int which = 0; which < 2; which++) {
        int64_t n = 0;
        for (int32_t j = 0; j < k; j++) {
            const struct assay_speedup_run_data *r = &runs[idx[j]];
            const double *src = which == 0 ? r->ttft : r->tpot;
            int64_t m = which == 0 ? r->n_ttft : r->n_tpot;
            if (m > 0) {
                memcpy(scratch + n, src, sizeof(double) * (size_t)m);
            }
            n += m;
        }
        qsort(scratch, (size_t)n, sizeof(double), cmp_double);
        for (int q = 0; q < 3; q++) {
            out->v[which * 3 + q] = n > 0 ? assay_percentile_nearest_rank(scratch, n, k_bp[which * 3 + q])
                                          : NAN;
        }
        if (which == 0) {
            out->n_ttft = n;
        } else {
            out->n_tpot = n;
        }
    }
    double tokens = 0, good = 0, dur = 0;
    for (int32_t j = 0; j < k; j++) {
        tokens += (double)runs[idx[j]].output_tokens;
        good += (double)runs[idx[j]].n_good;
        dur += runs[idx[j]].duration_s;
    }
    out->v[ASSAY_SPEEDUP_THROUGHPUT] = dur > 0 ? tokens / dur : NAN;
    out->v[ASSAY_SPEEDUP_GOODPUT] = has_slo && dur > 0 ? good / dur : NAN;
}

static double ratio_of(double cand, double base)
{
    if (isnan(cand) || isnan(base)) {
        return NAN;
    }
    if (base == 0.0) {
        return cand == 0.0 ? NAN : INFINITY;
    }
    return cand / base;
}

enum assay_status assay_speedup_analyse(const struct assay_speedup_run_data *baseline,
                                        const struct assay_speedup_run_data *candidate,
                                        int32_t n_pairs, const struct assay_speedup_params *p,
                                        struct assay_speedup_figure *fig,
                                        enum assay_speedup_verdict *verdict)
{
    *verdict = ASSAY_SPEEDUP_NOT_MEASURED;
    if (n_pairs < 1 || !valid_params(p)) {
        return ASSAY_ERR_INVALID;
    }
    int64_t most = 1;
    for (int32_t r = 0; r < n_pairs; r++) {
        const struct assay_speedup_run_data *runs[2] = {&baseline[r], &candidate[r]};
        for (int e = 0; e < 2; e++) {
            most = runs[e]->n_ttft > most ? runs[e]->n_ttft : most;
            most = runs[e]->n_tpot > most ? runs[e]->n_tpot : most;
        }
    }
    double *scratch = assay_malloc(sizeof(double) * (size_t)(most * n_pairs));
    int32_t *idx = assay_malloc(sizeof(int32_t) * (size_t)n_pairs);
    double *boot = assay_malloc(sizeof(double) * (size_t)p->n_boot * ASSAY_SPEEDUP_COUNT);
    if (scratch == NULL || idx == NULL || boot == NULL) {
        assay_free(scratch);
        assay_free(idx);
        assay_free(boot);
        return ASSAY_ERR_NOMEM;
    }
    /* The point estimates: every run once. */
    for (int32_t r = 0; r < n_pairs; r++) {
        idx[r] = r;
    }
    struct pooled base, cand;
    pool(baseline, idx, n_pairs, p->has_slo, scratch, &base);
    pool(candidate, idx, n_pairs, p->has_slo, scratch, &cand);
    for (int m = 0; m < ASSAY_SPEEDUP_COUNT; m++) {
        struct assay_speedup_figure *f = &fig[m];
        memset(f, 0, sizeof *f);
        f->baseline = base.v[m];
        f->candidate = cand.v[m];
        f->ratio = ratio_of(cand.v[m], base.v[m]);
        f->compared = m != ASSAY_SPEEDUP_GOODPUT || p->has_slo;
        f->n_baseline = m < 3 ? base.n_ttft : m < 6 ? base.n_tpot : 0;
        f->n_candidate = m < 3 ? cand.n_ttft : m < 6 ? cand.n_tpot : 0;
    }
    /* The cluster bootstrap: pairs drawn with replacement. */
    for (int32_t b = 0; b < p->n_boot; b++) {
        for (int32_t j = 0; j < n_pairs; j++) {
            double u = assay_rng_u01(p->boot_seed, (uint64_t)b * (uint64_t)n_pairs + (uint64_t)j,
                                     0x5eed);
            int32_t k = (int32_t)(u * n_pairs);
            idx[j] = k < n_pairs ? k : n_pairs - 1;
        }
        pool(baseline, idx, n_pairs, p->has_slo, scratch, &base);
        pool(candidate, idx, n_pairs, p->has_slo, scratch, &cand);
        for (int m = 0; m < ASSAY_SPEEDUP_COUNT; m++) {
            boot[(size_t)m * (size_t)p->n_boot + (size_t)b] = ratio_of(cand.v[m], base.v[m]);
        }
    }
    double tail = (1.0 - p->confidence) / 2.0;
    int32_t better = 0, worse = 0, regress = 0;
    for (int m = 0; m < ASSAY_SPEEDUP_COUNT; m++) {
        struct assay_speedup_figure *f = &fig[m];
        double *rs = boot + (size_t)m * (size_t)p->n_boot;
        bool any_nan = false;
        for (int32_t b = 0; b < p->n_boot; b++) {
            any_nan = any_nan || isnan(rs[b]);
        }
        if (!f->compared || any_nan || isnan(f->ratio)) {
            f->lo = f->hi = NAN;
            continue;
        }
        /* the log ratio's spread over the replicates */
        bool finite = f->ratio > 0 && isfinite(f->ratio);
        double sum = 0, sum2 = 0;
        for (int32_t b = 0; b < p->n_boot && finite; b++) {
            finite = rs[b] > 0 && isfinite(rs[b]);
            sum += finite ? log(rs[b]) : 0;
        }
        if (p->interval == ASSAY_SPEEDUP_INTERVAL_T && finite && n_pairs >= 2) {
            double mean = sum / p->n_boot;
            for (int32_t b = 0; b < p->n_boot; b++) {
                sum2 += (log(rs[b]) - mean) * (log(rs[b]) - mean);
            }
            double s = sqrt(sum2 / (p->n_boot - 1));
            double t = gsl_cdf_tdist_Pinv(1.0 - tail, (double)(n_pairs - 1));
            f->lo = f->ratio * exp(-t * s);
            f->hi = f->ratio * exp(t * s);
        } else {
            qsort(rs, (size_t)p->n_boot, sizeof(double), cmp_double);
            int32_t lo_ix = (int32_t)floor(tail * p->n_boot);
            int32_t hi_ix = (int32_t)ceil((1.0 - tail) * p->n_boot) - 1;
            lo_ix = lo_ix < 0 ? 0 : lo_ix;
            hi_ix = hi_ix >= p->n_boot ? p->n_boot - 1 : hi_ix;
            f->lo = rs[lo_ix];
            f->hi = rs[hi_ix];
        }
        bool lower = assay_speedup_lower_is_better((enum assay_speedup_metric)m);
        bool above = f->lo > 1.0, below = f->hi < 1.0;
        if (above || below) {
            f->change = (lower ? below : above) ? ASSAY_SPEEDUP_BETTER : ASSAY_SPEEDUP_WORSE;
        }
        if (f->change == ASSAY_SPEEDUP_WORSE && p->gate[m]) {
            f->regression = lower ? f->lo > 1.0 + p->threshold
                                  : f->hi < 1.0 / (1.0 + p->threshold);
        }
        better += f->change == ASSAY_SPEEDUP_BETTER;
        worse += f->change == ASSAY_SPEEDUP_WORSE;
        regress += f->regression;
    }
    *verdict = regress > 0              ? ASSAY_SPEEDUP_REGRESSION
               : better > 0 && worse > 0 ? ASSAY_SPEEDUP_MIXED
               : better > 0              ? ASSAY_SPEEDUP_FASTER
               : worse > 0               ? ASSAY_SPEEDUP_SLOWER
                                         : ASSAY_SPEEDUP_NO_DIFFERENCE;
    assay_free(scratch);
    assay_free(idx);
    assay_free(boot);
    return ASSAY_OK;
}

/* ---- the runs ------------------------------------------------------------- */

/* One run's per-request samples, as metrics.h defines them (requests of
 * the measured phase that finished normally). */
static void extract(const struct assay_loadgen_result *lr, const struct assay_bench_summary *s,
                    double *ttft, double *tpot, struct assay_speedup_run_data *out)
{
    int64_t n_ttft = 0, n_tpot = 0;
    for (int32_t i = lr->n_warmup; i < lr->n; i++) {
        const struct assay_bench_record *rec = &lr->records[i];
        if (rec->outcome != ASSAY_OUTCOME_OK || rec->n_tokens < 1) {
            continue;
        }
        double e = (double)(rec->finish_ns - rec->scheduled_ns) / 1e9;
        double t = (double)(rec->first_token_ns - rec->scheduled_ns) / 1e9;
        ttft[n_ttft++] = t;
        if (rec->n_tokens >= 2) {
            tpot[n_tpot++] = (e - t) / (rec->n_tokens - 1);
        }
    }
    out->ttft = ttft;
    out->n_ttft = n_ttft;
    out->tpot = tpot;
    out->n_tpot = n_tpot;
    out->output_tokens = s->output_tokens;
    out->n_good = s->n_good;
    out->duration_s = s->duration_s;
}

static bool draws_seeded(const struct assay_loadgen_params *p)
{
    return p->kind == ASSAY_LOADGEN_OPEN &&
           (p->arrival == ASSAY_ARRIVAL_POISSON || p->arrival == ASSAY_ARRIVAL_GAMMA);
}

static enum assay_status init_bench(struct assay_bench_result *b,
                                    const struct assay_speedup_params *p)
{
    memset(b, 0, sizeof *b);
    b->params = p->gen;
    b->has_slo = p->has_slo;
    b->slo = p->slo;
    b->runs = assay_calloc((size_t)p->n_pairs, sizeof *b->runs);
    return b->runs != NULL ? ASSAY_OK : ASSAY_ERR_NOMEM;
}

enum assay_status assay_speedup_run(const struct assay_adapter *baseline,
                                    const struct assay_adapter *candidate,
                                    const struct assay_workload *w,
                                    const struct assay_speedup_params *p,
                                    struct assay_speedup_result *out)
{
    memset(out, 0, sizeof *out);
    out->verdict = ASSAY_SPEEDUP_NOT_MEASURED;
    if (p == NULL || !valid_params(p) || p->n_pairs < 2 || w == NULL || w->n < 1) {
        out->status = ASSAY_ERR_INVALID;
        snprintf(out->error, sizeof out->error, "invalid parameters (pairs >= 2, bootstrap "
                 "replicates >= 100, confidence in (0.5, 1), threshold >= 0, a valid SLO)");
        return ASSAY_ERR_INVALID;
    }
    if (draws_seeded(&p->gen)) {
        for (int32_t r = 0; r < p->n_pairs; r++) {
            if (((p->gen.seed + (uint64_t)r) & 0xffffffffu) == 0) {
                out->status = ASSAY_ERR_INVALID;
                snprintf(out->error, sizeof out->error, "a pair's schedule seed has low 32 bits 0");
                return ASSAY_ERR_INVALID;
            }
        }
    }
    out->params = *p;
    const struct assay_slo *slo = p->has_slo ? &p->slo : NULL;
    struct assay_loadgen_result *lr = NULL;
    size_t n = (size_t)w->n, pairs = (size_t)p->n_pairs;
    enum assay_status st = assay_loadgen_result_init(&lr, w);
    double *samples = NULL;
    struct assay_speedup_run_data *data = NULL;
    if (st == ASSAY_OK) {
        st = init_bench(&out->baseline, p);
    }
    if (st == ASSAY_OK) {
        st = init_bench(&out->candidate, p);
    }
    if (st == ASSAY_OK) {
        /* (engine, pair, ttft|tpot, request) */
        samples = assay_malloc(sizeof(double) * 4 * pairs * n);
        data = assay_calloc(2 * pairs, sizeof *data);
        out->candidate_first = assay_calloc(pairs, sizeof *out->candidate_first);
        if (samples == NULL || data == NULL || out->candidate_first == NULL) {
            st = ASSAY_ERR_NOMEM;
        }
    }
    for (int32_t r = 0; r < p->n_pairs && st == ASSAY_OK; r++) {
        struct assay_loadgen_params pr = p->gen;
        if (draws_seeded(&p->gen)) {
            pr.seed = p->gen.seed + (uint64_t)r;
        }
        /* A B, B A, A B, ...: a linear drift cancels over two pairs. */
        out->candidate_first[r] = (r % 2) == 1;
        for (int k = 0; k < 2 && st == ASSAY_OK; k++) {
            int e = out->candidate_first[r] ? 1 - k : k; /* 0 baseline, 1 candidate */
            const struct assay_adapter *a = e == 0 ? baseline : candidate;
            struct assay_bench_result *b = e == 0 ? &out->baseline : &out->candidate;
            enum assay_status run_st = assay_loadgen_run(a, w, &pr, lr);
            if (run_st == ASSAY_ERR_INVALID || run_st == ASSAY_ERR_NOMEM) {
                st = run_st;
                snprintf(out->error, sizeof out->error, "the %s's run of pair %d could not start: %s",
                         e == 0 ? "baseline" : "candidate", (int)r + 1, assay_status_str(run_st));
                break;
            }
            st = assay_bench_summarize(lr, slo, &b->runs[r]);
            if (st != ASSAY_OK) {
                break;
            }
            double *base_ptr = samples + ((size_t)e * pairs + (size_t)r) * 2 * n;
            extract(lr, &b->runs[r], base_ptr, base_ptr + n, &data[(size_t)e * pairs + (size_t)r]);
            if (run_st != ASSAY_OK) {
                st = run_st;
                snprintf(out->error, sizeof out->error,
                         "the %s's run of pair %d did not complete: %s%s", e == 0 ? "baseline"
                         : "candidate", (int)r + 1, assay_status_str(run_st),
                         lr->timed_out ? " (the run's timeout passed)" : "");
            }
        }
        if (st == ASSAY_OK) {
            out->n_pairs = r + 1;
        }
        if (st == ASSAY_OK && p->gen.progress.fn != NULL) {
            char line[256];
            snprintf(line, sizeof line,
                     "%s%spair %d of %d: baseline %.1f s, candidate %.1f s (%s first)",
                     p->gen.progress.label != NULL ? p->gen.progress.label : "",
                     p->gen.progress.label != NULL ? ": " : "", (int)r + 1, (int)p->n_pairs,
                     out->baseline.runs[r].duration_s, out->candidate.runs[r].duration_s,
                     out->candidate_first[r] ? "candidate" : "baseline");
            p->gen.progress.fn(p->gen.progress.arg, line);
        }
    }
    assay_loadgen_result_free(lr);
    out->baseline.n_runs = out->n_pairs;
    out->candidate.n_runs = out->n_pairs;
    assay_bench_spread_compute(out->baseline.runs, out->n_pairs, &out->baseline.spread);
    assay_bench_spread_compute(out->candidate.runs, out->n_pairs, &out->candidate.spread);
    out->baseline.status = st;
    out->candidate.status = st;
    if (st == ASSAY_OK) {
        st = assay_speedup_analyse(data, data + pairs, out->n_pairs, p, out->fig, &out->verdict);
    }
    assay_free(samples);
    assay_free(data);
    out->status = st;
    if (st == ASSAY_ERR_NOMEM && out->error[0] == '\0') {
        snprintf(out->error, sizeof out->error, "out of memory");
    }
    if (st != ASSAY_OK) {
        out->verdict = ASSAY_SPEEDUP_NOT_MEASURED;
    }
    return st;
}

void assay_speedup_release(struct assay_speedup_result *r)
{
    if (r == NULL) {
        return;
    }
    assay_bench_result_release(&r->baseline);
    assay_bench_result_release(&r->candidate);
    assay_free(r->candidate_first);
    memset(r, 0, sizeof *r);
}
