/*
 * metrics.c - the figures of a load-generator run (metrics.h): nearest-rank
 * percentiles and whether n samples suffice for one, TTFT, TPOT, ITL, E2E
 * and lateness per run (assay_bench_summarize), their spread over runs,
 * goodput against an SLO, several runs of one configuration
 * (assay_bench_run) and the JSON the report embeds. `assay run`,
 * `assay bench`, the seed table and the side-by-side comparison call it.
 */
#include "metrics.h"

#include <gsl/gsl_cdf.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"

/* ---- percentiles ------------------------------------------------------- */

static const int32_t k_pctl_bp[ASSAY_PCTL_COUNT] = {5000, 9000, 9500, 9900, 10000};
static const char *const k_pctl_name[ASSAY_PCTL_COUNT] = {"p50", "p90", "p95", "p99", "max"};

int32_t assay_pctl_bp(enum assay_pctl which)
{
    return (int)which >= 0 && which < ASSAY_PCTL_COUNT ? k_pctl_bp[which] : 0;
}

const char *assay_pctl_name(enum assay_pctl which)
{
    return (int)which >= 0 && which < ASSAY_PCTL_COUNT ? k_pctl_name[which] : "unknown";
}

double assay_percentile_nearest_rank(const double *sorted, int64_t n, int32_t q_bp)
{
    if (n < 1 || q_bp < 1 || q_bp > 10000) {
        return NAN;
    }
    /* ceil(q n) in integers: 0.95 * 100 is not 95 in binary floating point. */
    int64_t rank = (n * q_bp + 9999) / 10000;
    return sorted[rank - 1];
}

static bool in_unit_interval(double x)
{
    return x > 0.0 && x < 1.0; /* false for NaN */
}

/* The smallest n with 1 - q^n >= conf: the first sample size at which the
 * largest order statistic bounds the q-quantile. */
static int64_t sufficient_n_min(double q, double conf)
{
    double guess = ceil(log1p(-conf) / log(q));
    int64_t n = guess < 1.0 ? 1 : guess > 1e15 ? (int64_t)1e15 : (int64_t)guess;
    while (n > 1 && 1.0 - pow(q, (double)(n - 1)) >= conf) {
        n--;
    }
    while (1.0 - pow(q, (double)n) < conf) {
        n++;
    }
    return n;
}

enum assay_status assay_sufficiency_compute(int64_t n, double q, double conf,
                                            struct assay_sufficiency *out)
{
    if (n < 0 || n > (int64_t)UINT_MAX || !in_unit_interval(q) || !in_unit_interval(conf)) {
        return ASSAY_ERR_INVALID;
    }
    struct assay_sufficiency s = {.applicable = true, .n = n, .upper = NAN};
    s.n_min = sufficient_n_min(q, conf);
    if (n >= 1) {
        /* F(j) = P(Binomial(n, q) <= j) is non-decreasing in j and F(n) = 1:
         * find the smallest k in 1..n with F(k - 1) >= conf. */
        double top = gsl_cdf_binomial_P((unsigned)(n - 1), q, (unsigned)n);
        if (!isfinite(top)) {
            return ASSAY_ERR_NUMERIC;
        }
        if (top >= conf) {
            int64_t lo = 1, hi = n;
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                double f = gsl_cdf_binomial_P((unsigned)(mid - 1), q, (unsigned)n);
                if (!isfinite(f)) {
                    return ASSAY_ERR_NUMERIC;
                }
                if (f >= conf) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            s.k = lo;
            s.sufficient = true;
        }
    }
    *out = s;
    return ASSAY_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum assay_status assay_latency_summarize(double *values, int64_t n,
                                          struct assay_latency_summary *out)
{
    if (n < 0 || (n > 0 && values == NULL)) {
        return ASSAY_ERR_INVALID;
    }
    for (int64_t i = 0; i < n; i++) {
        if (isnan(values[i])) {
            return ASSAY_ERR_INVALID;
        }
    }
    if (n > 1) {
        qsort(values, (size_t)n, sizeof(double), cmp_double);
    }
    struct assay_latency_summary s = {.n = n};
    for (int j = 0; j < ASSAY_PCTL_COUNT; j++) {
        s.v[j] = assay_percentile_nearest_rank(values, n, k_pctl_bp[j]);
        if (j == ASSAY_PCTL_MAX) {
            s.suff[j] = (struct assay_sufficiency){.applicable = false, .n = n, .upper = NAN};
            continue;
        }
        enum assay_status st = assay_sufficiency_compute(n, k_pctl_bp[j] / 10000.0,
                                                         ASSAY_SUFFICIENCY_CONFIDENCE, &s.suff[j]);
        if (st != ASSAY_OK) {
            return st;
        }
        if (s.suff[j].sufficient) {
            s.suff[j].upper = values[s.suff[j].k - 1];
        }
    }
    for (int32_t i = 0; i < ASSAY_CDF_POINTS; i++) {
        s.cdf[i] = assay_percentile_nearest_rank(values, n, (i + 1) * 10000 / ASSAY_CDF_POINTS);
    }
    *out = s;
    return ASSAY_OK;
}

/* ---- lateness histogram ------------------------------------------------ */

double assay_lateness_bin_lower(int32_t bin)
{
    if (bin <= 0) {
        return 0.0;
    }
    if (bin >= ASSAY_LATENESS_BINS) {
        return INFINITY;
    }
    return 1e-6 * pow(10.0, (bin - 1) / 4.0);
}

double assay_lateness_bin_upper(int32_t bin)
{
    if (bin >= ASSAY_LATENESS_BINS - 1) {
        return INFINITY;
    }
    return 1e-6 * pow(10.0, (bin < 0 ? 0 : bin) / 4.0);
}

int32_t assay_lateness_bin(int64_t lateness_ns)
{
    if (lateness_ns < 1000) {
        return 0;
    }
    double quarter_decades = floor(4.0 * log10((double)lateness_ns / 1000.0));
    int64_t bin = (int64_t)quarter_decades + 1;
    /* Guard the edges against rounding in log10. */
    while (bin > 1 && (double)lateness_ns * 1e-9 < assay_lateness_bin_lower((int32_t)bin)) {
        bin--;
    }
    while (bin < ASSAY_LATENESS_BINS - 1 &&
           (double)lateness_ns * 1e-9 >= assay_lateness_bin_upper((int32_t)bin)) {
        bin++;
    }
    return bin > ASSAY_LATENESS_BINS - 1 ? ASSAY_LATENESS_BINS - 1 : (int32_t)bin;
}

/* ---- one run ------------------------------------------------------------ */

static double ns_to_s(int64_t ns)
{
    return (double)ns * 1e-9;
}

static bool valid_slo(const struct assay_slo *slo)
{
    return isfinite(slo->ttft_s) && slo->ttft_s > 0.0 && isfinite(slo->tpot_s) && slo->tpot_s > 0.0;
}

/* Tokens whose times were stored (an adapter may deliver more than
 * max_tokens; the extra ones were counted as bad events). */
static int32_t stored_tokens(const struct assay_bench_record *rec)
{
    return rec->n_tokens < rec->max_tokens ? rec->n_tokens : rec->max_tokens;
}

enum assay_status assay_bench_summarize(const struct assay_loadgen_result *r,
                                        const struct assay_slo *slo,
                                        struct assay_bench_summary *out)
{
    if (r == NULL || out == NULL || (slo != NULL && !valid_slo(slo)) || r->n_warmup < 0 ||
        r->n_warmup > r->n) {
        return ASSAY_ERR_INVALID;
    }
    struct assay_bench_summary s;
    memset(&s, 0, sizeof s);
    s.params = r->params;
    s.n_warmup = r->n_warmup;
    s.n_requests = r->n - r->n_warmup;
    s.has_offered_rate = r->has_offered_rate;
    s.offered_rate = r->has_offered_rate ? r->offered_rate : NAN;
    s.schedule_rate = r->has_offered_rate ? r->schedule_rate : NAN;
    s.max_in_flight = r->max_in_flight;
    s.n_steps = r->n_steps;
    s.n_bad_events = r->n_bad_events;
    s.timed_out = r->timed_out;
    s.adapter_status = r->adapter_status;
    s.has_slo = slo != NULL;
    if (slo != NULL) {
        s.slo = *slo;
    }

    int64_t n_itl = 0;
    for (int32_t i = r->n_warmup; i < r->n; i++) {
        const struct assay_bench_record *rec = &r->records[i];
        switch (rec->outcome) {
        case ASSAY_OUTCOME_OK:
            s.n_ok++;
            s.output_tokens += rec->n_tokens;
            n_itl += stored_tokens(rec) > 1 ? stored_tokens(rec) - 1 : 0;
            break;
        case ASSAY_OUTCOME_ERROR: s.n_error++; break;
        case ASSAY_OUTCOME_REJECTED: s.n_rejected++; break;
        case ASSAY_OUTCOME_ABORTED: s.n_aborted++; break;
        case ASSAY_OUTCOME_LOST: s.n_lost++; break;
        case ASSAY_OUTCOME_UNSENT: s.n_unsent++; break;
        default: return ASSAY_ERR_INVALID;
        }
    }
    size_t n_rows = (size_t)(r->n - r->n_warmup);
    double *scratch = assay_calloc(4 * n_rows + (size_t)n_itl + 1, sizeof(double));
    if (scratch == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    double *ttft = scratch, *tpot = ttft + n_rows, *e2e = tpot + n_rows, *late = e2e + n_rows;
    double *itl = late + n_rows;
    int64_t n_ttft = 0, n_tpot = 0, n_e2e = 0, n_late = 0, k_itl = 0;
    bool open = r->params.kind == ASSAY_LOADGEN_OPEN;
    for (int32_t i = r->n_warmup; i < r->n; i++) {
        const struct assay_bench_record *rec = &r->records[i];
        if (open && rec->submitted_ns != 0) {
            int64_t lateness = rec->submitted_ns - rec->scheduled_ns;
            late[n_late++] = ns_to_s(lateness);
            s.lateness_hist.count[assay_lateness_bin(lateness)]++;
        }
        if (rec->outcome != ASSAY_OUTCOME_OK) {
            continue;
        }
        double e = ns_to_s(rec->finish_ns - rec->scheduled_ns);
        e2e[n_e2e++] = e;
        bool good = false;
        if (rec->n_tokens >= 1) {
            double t = ns_to_s(rec->first_token_ns - rec->scheduled_ns);
            ttft[n_ttft++] = t;
            good = slo != NULL && t <= slo->ttft_s;
            if (rec->n_tokens >= 2) {
                double per = (e - t) / (rec->n_tokens - 1);
                tpot[n_tpot++] = per;
                good = good && per <= slo->tpot_s;
            }
        }
        for (int32_t k = 1; k < stored_tokens(rec); k++) {
            itl[k_itl++] = ns_to_s(rec->token_ns[k] - rec->token_ns[k - 1]);
        }
        s.n_good += good ? 1 : 0;
    }
    enum assay_status st = assay_latency_summarize(ttft, n_ttft, &s.ttft);
    if (st == ASSAY_OK) {
        st = assay_latency_summarize(tpot, n_tpot, &s.tpot);
    }
    if (st == ASSAY_OK) {
        st = assay_latency_summarize(itl, k_itl, &s.itl);
    }
    if (st == ASSAY_OK) {
        st = assay_latency_summarize(e2e, n_e2e, &s.e2e);
    }
    if (st == ASSAY_OK) {
        st = assay_latency_summarize(late, n_late, &s.lateness);
    }
    assay_free(scratch);
    if (st != ASSAY_OK) {
        return st;
    }
    s.duration_s = r->t_start_ns != 0 && r->t_end_ns > r->t_start_ns
                       ? ns_to_s(r->t_end_ns - r->t_start_ns)
                       : NAN;
    s.achieved_rate = s.n_ok / s.duration_s;
    s.tokens_per_s = (double)s.output_tokens / s.duration_s;
    s.goodput_fraction = slo != NULL && s.n_requests > 0 ? (double)s.n_good / s.n_requests : NAN;
    s.goodput_rate = slo != NULL ? s.n_good / s.duration_s : NAN;
    *out = s;
    return ASSAY_OK;
}

/* ---- spread over runs --------------------------------------------------- */

static double figure_at(const struct assay_bench_summary *s, size_t offset)
{
    double v;
    memcpy(&v, (const char *)s + offset, sizeof v);
    return v;
}

/* The k-th smallest (0-based) of the non-NaN figures, by counting: runs are
 * few, and this needs no memory. */
static double kth_figure(const struct assay_bench_summary *runs, int32_t n_runs, size_t offset,
                         int32_t k)
{
    for (int32_t i = 0; i < n_runs; i++) {
        double x = figure_at(&runs[i], offset);
        if (isnan(x)) {
            continue;
        }
        int32_t lt = 0, le = 0;
        for (int32_t j = 0; j < n_runs; j++) {
            double y = figure_at(&runs[j], offset);
            lt += y < x;
            le += y <= x;
        }
        if (lt <= k && k < le) {
            return x;
        }
    }
    return NAN;
}

static struct assay_spread spread_of(const struct assay_bench_summary *runs, int32_t n_runs,
                                     size_t offset)
{
    int32_t m = 0;
    for (int32_t i = 0; i < n_runs; i++) {
        m += !isnan(figure_at(&runs[i], offset));
    }
    if (m == 0) {
        return (struct assay_spread){NAN, NAN, NAN};
    }
    struct assay_spread s;
    s.min = kth_figure(runs, n_runs, offset, 0);
    s.max = kth_figure(runs, n_runs, offset, m - 1);
    s.median = m % 2 == 1 ? kth_figure(runs, n_runs, offset, m / 2)
                          : 0.5 * (kth_figure(runs, n_runs, offset, m / 2 - 1) +
                                   kth_figure(runs, n_runs, offset, m / 2));
    return s;
}

static void spread_dist(const struct assay_bench_summary *runs, int32_t n_runs, size_t dist_offset,
                        struct assay_spread *out)
{
    for (int j = 0; j < ASSAY_PCTL_COUNT; j++) {
        size_t off = dist_offset + offsetof(struct assay_latency_summary, v) + (size_t)j * sizeof(double);
        out[j] = spread_of(runs, n_runs, off);
    }
}

static void spread_cdf(const struct assay_bench_summary *runs, int32_t n_runs, size_t dist_offset,
                       double *out)
{
    for (int32_t i = 0; i < ASSAY_CDF_POINTS; i++) {
        size_t off = dist_offset + offsetof(struct assay_latency_summary, cdf) + (size_t)i * sizeof(double);
        out[i] = spread_of(runs, n_runs, off).median;
    }
}

void assay_bench_spread_compute(const struct assay_bench_summary *runs, int32_t n_runs,
                                struct assay_bench_spread *out)
{
    if (n_runs < 1 || runs == NULL) {
        n_runs = 0;
    }
    out->n_runs = n_runs;
    spread_dist(runs, n_runs, offsetof(struct assay_bench_summary, ttft), out->ttft);
    spread_dist(runs, n_runs, offsetof(struct assay_bench_summary, tpot), out->tpot);
    spread_dist(runs, n_runs, offsetof(struct assay_bench_summary, itl), out->itl);
    spread_dist(runs, n_runs, offsetof(struct assay_bench_summary, e2e), out->e2e);
    spread_dist(runs, n_runs, offsetof(struct assay_bench_summary, lateness), out->lateness);
    out->achieved_rate = spread_of(runs, n_runs, offsetof(struct assay_bench_summary, achieved_rate));
    out->tokens_per_s = spread_of(runs, n_runs, offsetof(struct assay_bench_summary, tokens_per_s));
    out->goodput_fraction =
        spread_of(runs, n_runs, offsetof(struct assay_bench_summary, goodput_fraction));
    out->goodput_rate = spread_of(runs, n_runs, offsetof(struct assay_bench_summary, goodput_rate));
    spread_cdf(runs, n_runs, offsetof(struct assay_bench_summary, ttft), out->ttft_cdf);
    spread_cdf(runs, n_runs, offsetof(struct assay_bench_summary, tpot), out->tpot_cdf);
    spread_cdf(runs, n_runs, offsetof(struct assay_bench_summary, itl), out->itl_cdf);
    spread_cdf(runs, n_runs, offsetof(struct assay_bench_summary, e2e), out->e2e_cdf);
}

/* ---- several runs ------------------------------------------------------- */

static bool draws_seeded(const struct assay_loadgen_params *p)
{
    return p->kind == ASSAY_LOADGEN_OPEN &&
           (p->arrival == ASSAY_ARRIVAL_POISSON || p->arrival == ASSAY_ARRIVAL_GAMMA);
}

enum assay_status assay_bench_run(const struct assay_adapter *adapter,
                                  const struct assay_workload *w,
                                  const struct assay_loadgen_params *p,
                                  const struct assay_slo *slo, int32_t n_runs,
                                  struct assay_bench_result *out)
{
    memset(out, 0, sizeof *out);
    if (p == NULL || n_runs < 1 || (slo != NULL && !valid_slo(slo))) {
        return ASSAY_ERR_INVALID;
    }
    out->params = *p;
    out->has_slo = slo != NULL;
    if (slo != NULL) {
        out->slo = *slo;
    }
    if (draws_seeded(p)) {
        for (int32_t r = 0; r < n_runs; r++) {
            if (((p->seed + (uint64_t)r) & 0xffffffffu) == 0) {
                return ASSAY_ERR_INVALID;
            }
        }
    }
    struct assay_loadgen_result *lr = NULL;
    enum assay_status st = assay_loadgen_result_init(&lr, w);
    if (st != ASSAY_OK) {
        return st;
    }
    out->runs = assay_calloc((size_t)n_runs, sizeof *out->runs);
    if (out->runs == NULL) {
        assay_loadgen_result_free(lr);
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t r = 0; r < n_runs; r++) {
        struct assay_loadgen_params pr = *p;
        if (draws_seeded(p)) {
            pr.seed = p->seed + (uint64_t)r;
        }
        enum assay_status run_st = assay_loadgen_run(adapter, w, &pr, lr);
        if (run_st == ASSAY_ERR_INVALID || run_st == ASSAY_ERR_NOMEM) {
            st = run_st; /* nothing was run */
            break;
        }
        st = assay_bench_summarize(lr, slo, &out->runs[r]);
        if (st != ASSAY_OK) {
            break;
        }
        out->n_runs = r + 1;
        if (p->progress.fn != NULL) {
            const struct assay_bench_summary *sm = &out->runs[r];
            char line[256];
            snprintf(line, sizeof line, "%s%srun %d of %d: %d requests in %.1f s, achieved %.3g req/s%s",
                     p->progress.label != NULL ? p->progress.label : "",
                     p->progress.label != NULL ? ": " : "", (int)r + 1, (int)n_runs,
                     (int)sm->n_requests, sm->duration_s, sm->achieved_rate,
                     run_st != ASSAY_OK ? " (stopped early)" : "");
            p->progress.fn(p->progress.arg, line);
        }
        if (run_st != ASSAY_OK) {
            st = run_st;
            break;
        }
    }
    assay_loadgen_result_free(lr);
    out->status = st;
    assay_bench_spread_compute(out->runs, out->n_runs, &out->spread);
    if (out->n_runs == 0) {
        assay_free(out->runs);
        out->runs = NULL;
    }
    return st;
}

void assay_bench_result_release(struct assay_bench_result *r)
{
    if (r == NULL) {
        return;
    }
    assay_free(r->runs);
    memset(r, 0, sizeof *r);
}

/* ---- JSON --------------------------------------------------------------- */

/* cJSON reports failure by returning NULL; a builder collects it. */
struct builder {
    bool failed;
};

static cJSON *add_num(struct builder *b, cJSON *obj, const char *key, double v)
{
    cJSON *item = isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
    if (item == NULL || !cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        b->failed = true;
        return NULL;
    }
    return item;
}

static void add_int(struct builder *b, cJSON *obj, const char *key, int64_t v)
{
    add_num(b, obj, key, (double)v);
}

static void add_bool(struct builder *b, cJSON *obj, const char *key, bool v)
{
    if (cJSON_AddBoolToObject(obj, key, v) == NULL) {
        b->failed = true;
    }
}

static void add_str(struct builder *b, cJSON *obj, const char *key, const char *v)
{
    if (cJSON_AddStringToObject(obj, key, v != NULL ? v : "") == NULL) {
        b->failed = true;
    }
}

static void add_null(struct builder *b, cJSON *obj, const char *key)
{
    if (cJSON_AddNullToObject(obj, key) == NULL) {
        b->failed = true;
    }
}

static cJSON *add_obj(struct builder *b, cJSON *obj, const char *key)
{
    cJSON *o = cJSON_AddObjectToObject(obj, key);
    if (o == NULL) {
        b->failed = true;
    }
    return o;
}

static cJSON *add_arr(struct builder *b, cJSON *obj, const char *key)
{
    cJSON *a = cJSON_AddArrayToObject(obj, key);
    if (a == NULL) {
        b->failed = true;
    }
    return a;
}

/* "cdf": the quantiles at 1%..100% (null when there were no samples). */
static void add_cdf(struct builder *b, cJSON *obj, const double *cdf)
{
    if (isnan(cdf[0])) {
        add_null(b, obj, "cdf");
        return;
    }
    cJSON *a = add_arr(b, obj, "cdf");
    for (int32_t i = 0; i < ASSAY_CDF_POINTS && a != NULL; i++) {
        cJSON *x = cJSON_CreateNumber(cdf[i]);
        if (x == NULL || !cJSON_AddItemToArray(a, x)) {
            cJSON_Delete(x);
            b->failed = true;
            return;
        }
    }
}

static void add_dist(struct builder *b, cJSON *obj, const char *key,
                     const struct assay_latency_summary *d)
{
    cJSON *o = add_obj(b, obj, key);
    if (o == NULL) {
        return;
    }
    add_int(b, o, "n", d->n);
    for (int j = 0; j < ASSAY_PCTL_COUNT; j++) {
        add_num(b, o, k_pctl_name[j], d->v[j]);
    }
    cJSON *suff = add_obj(b, o, "sufficiency");
    if (suff == NULL) {
        return;
    }
    for (int j = 0; j < ASSAY_PCTL_COUNT; j++) {
        const struct assay_sufficiency *s = &d->suff[j];
        if (!s->applicable) {
            continue;
        }
        cJSON *e = add_obj(b, suff, k_pctl_name[j]);
        if (e == NULL) {
            return;
        }
        add_num(b, e, "k", s->sufficient ? (double)s->k : NAN);
        add_int(b, e, "n", s->n);
        add_bool(b, e, "sufficient", s->sufficient);
        add_num(b, e, "upper_bound", s->upper);
        add_int(b, e, "n_min", s->n_min);
    }
    add_cdf(b, o, d->cdf);
}

static void add_spread(struct builder *b, cJSON *obj, const char *key, const struct assay_spread *s)
{
    cJSON *o = add_obj(b, obj, key);
    if (o != NULL) {
        add_num(b, o, "min", s->min);
        add_num(b, o, "median", s->median);
        add_num(b, o, "max", s->max);
    }
}

static void add_spread_dist(struct builder *b, cJSON *obj, const char *key,
                            const struct assay_spread *s, const double *cdf)
{
    cJSON *o = add_obj(b, obj, key);
    for (int j = 0; j < ASSAY_PCTL_COUNT && o != NULL; j++) {
        add_spread(b, o, k_pctl_name[j], &s[j]);
    }
    if (o != NULL && cdf != NULL) {
        add_cdf(b, o, cdf);
    }
}

static void fill_summary(struct builder *b, cJSON *o, const struct assay_bench_summary *s)
{
    if (draws_seeded(&s->params)) {
        add_num(b, o, "seed", (double)s->params.seed);
    } else {
        add_null(b, o, "seed");
    }
    add_int(b, o, "n_requests", s->n_requests);
    add_int(b, o, "n_warmup", s->n_warmup);
    cJSON *oc = add_obj(b, o, "outcomes");
    if (oc != NULL) {
        add_int(b, oc, "ok", s->n_ok);
        add_int(b, oc, "error", s->n_error);
        add_int(b, oc, "rejected", s->n_rejected);
        add_int(b, oc, "aborted", s->n_aborted);
        add_int(b, oc, "lost", s->n_lost);
        add_int(b, oc, "unsent", s->n_unsent);
    }
    add_int(b, o, "output_tokens", s->output_tokens);
    add_num(b, o, "duration_s", s->duration_s);
    add_bool(b, o, "has_offered_rate", s->has_offered_rate);
    add_num(b, o, "offered_rate", s->has_offered_rate ? s->offered_rate : NAN);
    add_num(b, o, "schedule_rate", s->schedule_rate);
    add_num(b, o, "achieved_rate", s->achieved_rate);
    add_num(b, o, "tokens_per_s", s->tokens_per_s);
    if (s->has_slo) {
        cJSON *g = add_obj(b, o, "goodput");
        if (g != NULL) {
            add_int(b, g, "n_good", s->n_good);
            add_num(b, g, "fraction", s->goodput_fraction);
            add_num(b, g, "rate", s->goodput_rate);
        }
    } else {
        add_null(b, o, "goodput");
    }
    add_dist(b, o, "ttft", &s->ttft);
    add_dist(b, o, "tpot", &s->tpot);
    add_dist(b, o, "itl", &s->itl);
    add_dist(b, o, "e2e", &s->e2e);
    bool open = s->params.kind == ASSAY_LOADGEN_OPEN;
    if (open) {
        add_dist(b, o, "lateness", &s->lateness);
        cJSON *h = add_arr(b, o, "lateness_histogram");
        for (int32_t j = 0; j < ASSAY_LATENESS_BINS && h != NULL; j++) {
            if (s->lateness_hist.count[j] == 0) {
                continue;
            }
            cJSON *bin = cJSON_CreateObject();
            if (bin == NULL || !cJSON_AddItemToArray(h, bin)) {
                cJSON_Delete(bin);
                b->failed = true;
                break;
            }
            add_num(b, bin, "lo_s", assay_lateness_bin_lower(j));
            add_num(b, bin, "hi_s", assay_lateness_bin_upper(j));
            add_int(b, bin, "count", s->lateness_hist.count[j]);
        }
    } else {
        add_null(b, o, "lateness");
        add_null(b, o, "lateness_histogram");
    }
    add_int(b, o, "max_in_flight", s->max_in_flight);
    add_int(b, o, "steps", s->n_steps);
    add_int(b, o, "bad_events", s->n_bad_events);
    add_bool(b, o, "timed_out", s->timed_out);
    add_str(b, o, "adapter_status",
            s->adapter_status == ASSAY_OK ? "ok" : assay_status_str(s->adapter_status));
}

enum assay_status assay_bench_summary_to_json(const struct assay_bench_summary *s, cJSON **out)
{
    *out = NULL;
    struct builder b = {false};
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    fill_summary(&b, o, s);
    if (b.failed) {
        cJSON_Delete(o);
        return ASSAY_ERR_NOMEM;
    }
    *out = o;
    return ASSAY_OK;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* min / p50 / p90 / max (nearest rank) of n lengths, sorted in place. */
static void add_lengths(struct builder *b, cJSON *obj, const char *key, int32_t *v, int32_t n)
{
    cJSON *o = add_obj(b, obj, key);
    if (o == NULL || n < 1) {
        return;
    }
    qsort(v, (size_t)n, sizeof(int32_t), cmp_i32);
    add_int(b, o, "min", v[0]);
    add_int(b, o, "p50", v[((int64_t)n * 5000 + 9999) / 10000 - 1]);
    add_int(b, o, "p90", v[((int64_t)n * 9000 + 9999) / 10000 - 1]);
    add_int(b, o, "max", v[n - 1]);
}

static void add_workload(struct builder *b, cJSON *root, const struct assay_workload *w)
{
    if (w == NULL) {
        add_null(b, root, "workload");
        return;
    }
    cJSON *o = add_obj(b, root, "workload");
    if (o == NULL) {
        return;
    }
    add_str(b, o, "name", w->name);
    add_str(b, o, "description", w->description);
    add_str(b, o, "lengths", w->lengths);
    add_str(b, o, "arrivals", w->arrivals);
    add_int(b, o, "n_requests", w->n);
    int32_t n = w->n > 0 && w->reqs != NULL ? w->n : 0;
    int32_t *tmp = assay_calloc((size_t)n + 1, sizeof(int32_t));
    if (tmp == NULL) {
        b->failed = true;
        return;
    }
    for (int32_t i = 0; i < n; i++) {
        tmp[i] = w->reqs[i].prompt_len;
    }
    add_lengths(b, o, "prompt_len", tmp, n);
    for (int32_t i = 0; i < n; i++) {
        tmp[i] = w->reqs[i].max_tokens;
    }
    add_lengths(b, o, "output_len", tmp, n);
    assay_free(tmp);
}

static void add_generator(struct builder *b, cJSON *root, const struct assay_loadgen_params *p,
                          int32_t warmup)
{
    cJSON *g = add_obj(b, root, "generator");
    if (g == NULL) {
        return;
    }
    bool open = p->kind == ASSAY_LOADGEN_OPEN;
    add_str(b, g, "kind", assay_loadgen_kind_str(p->kind));
    if (open) {
        add_str(b, g, "arrival", assay_arrival_kind_str(p->arrival));
    } else {
        add_null(b, g, "arrival");
    }
    add_num(b, g, "rate", open && p->arrival != ASSAY_ARRIVAL_TRACE ? p->rate : NAN);
    add_num(b, g, "cv", open && p->arrival == ASSAY_ARRIVAL_GAMMA ? p->cv : NAN);
    add_num(b, g, "seed", draws_seeded(p) ? (double)p->seed : NAN);
    add_num(b, g, "workers", open ? NAN : p->n_workers);
    add_int(b, g, "warmup", warmup);
    add_num(b, g, "spin_us", open ? (double)p->spin_ns / 1e3 : NAN);
    add_num(b, g, "timeout_s", p->timeout_s);
}

enum assay_status assay_bench_result_to_json(const struct assay_bench_result *r,
                                             const struct assay_workload *w, cJSON **out)
{
    *out = NULL;
    struct builder b = {false};
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    add_str(&b, root, "format", "assay-bench");
    add_int(&b, root, "version", ASSAY_BENCH_SCHEMA_VERSION);
    add_str(&b, root, "percentile_definition",
            "nearest-rank: x(ceil(q n)) of the n sorted samples");
    add_num(&b, root, "sufficiency_confidence", ASSAY_SUFFICIENCY_CONFIDENCE);
    int32_t warmup = r->n_runs > 0 ? r->runs[0].n_warmup
                                   : assay_loadgen_warmup_count(&r->params, w != NULL ? w->n : 0);
    add_generator(&b, root, &r->params, warmup);
    add_workload(&b, root, w);
    if (r->has_slo) {
        cJSON *slo = add_obj(&b, root, "slo");
        if (slo != NULL) {
            add_num(&b, slo, "ttft_s", r->slo.ttft_s);
            add_num(&b, slo, "tpot_s", r->slo.tpot_s);
        }
    } else {
        add_null(&b, root, "slo");
    }
    cJSON *runs = add_arr(&b, root, "runs");
    for (int32_t i = 0; i < r->n_runs && runs != NULL && !b.failed; i++) {
        cJSON *o = cJSON_CreateObject();
        if (o == NULL || !cJSON_AddItemToArray(runs, o)) {
            cJSON_Delete(o);
            b.failed = true;
            break;
        }
        fill_summary(&b, o, &r->runs[i]);
    }
    cJSON *sp = add_obj(&b, root, "spread");
    if (sp != NULL) {
        add_int(&b, sp, "n_runs", r->spread.n_runs);
        add_spread_dist(&b, sp, "ttft", r->spread.ttft, r->spread.ttft_cdf);
        add_spread_dist(&b, sp, "tpot", r->spread.tpot, r->spread.tpot_cdf);
        add_spread_dist(&b, sp, "itl", r->spread.itl, r->spread.itl_cdf);
        add_spread_dist(&b, sp, "e2e", r->spread.e2e, r->spread.e2e_cdf);
        add_spread_dist(&b, sp, "lateness", r->spread.lateness, NULL);
        add_spread(&b, sp, "achieved_rate", &r->spread.achieved_rate);
        add_spread(&b, sp, "tokens_per_s", &r->spread.tokens_per_s);
        add_spread(&b, sp, "goodput_fraction", &r->spread.goodput_fraction);
        add_spread(&b, sp, "goodput_rate", &r->spread.goodput_rate);
    }
    if (b.failed) {
        cJSON_Delete(root);
        return ASSAY_ERR_NOMEM;
    }
    *out = root;
    return ASSAY_OK;
}
