/*
 * seedtable.c - the seed chapter's generator comparison and a rate sweep
 * (seedtable.h): assay_bench_capacity measures the engine's capacity,
 * assay_seedtable_run runs the open loop above it and the closed loop at 2,
 * 4 and 8 workers (one row each, median of several runs), and
 * assay_rate_sweep searches the highest offered rate whose goodput stays on
 * target. `assay bench` and `assay run` call them and print the rows.
 */
#include "seedtable.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/json_out.h"

struct assay_seedtable_params assay_seedtable_default_params(void)
{
    struct assay_seedtable_params p = {
        .open_rate = 0.0,
        .capacity_factor = 2.5,
        .arrival = ASSAY_ARRIVAL_POISSON,
        .cv = 1.0,
        .seed = 1,
        .n_closed = 3,
        .workers = {2, 4, 8},
        .n_runs = ASSAY_BENCH_DEFAULT_RUNS,
        .warmup = ASSAY_LOADGEN_WARMUP_AUTO,
        .timeout_s = 600.0,
    };
    return p;
}

static bool generated_arrival(enum assay_arrival_kind a)
{
    return a == ASSAY_ARRIVAL_POISSON || a == ASSAY_ARRIVAL_GAMMA || a == ASSAY_ARRIVAL_CONSTANT;
}

enum assay_status assay_bench_capacity(const struct assay_adapter *adapter,
                                       const struct assay_workload *w, int32_t warmup,
                                       double timeout_s, double *out)
{
    /* A constant schedule at an absurd rate: every request due at once. */
    struct assay_loadgen_params lp = assay_loadgen_default_params();
    lp.kind = ASSAY_LOADGEN_OPEN;
    lp.arrival = ASSAY_ARRIVAL_CONSTANT;
    lp.rate = 1e12;
    lp.warmup = warmup;
    lp.timeout_s = timeout_s;
    struct assay_bench_result r;
    enum assay_status st = assay_bench_run(adapter, w, &lp, NULL, 1, &r);
    if (st == ASSAY_OK) {
        *out = r.runs[0].achieved_rate;
        if (!(isfinite(*out) && *out > 0.0)) {
            st = ASSAY_ERR_NUMERIC;
        }
    }
    assay_bench_result_release(&r);
    return st;
}

static void fill_row(struct assay_seedtable_row *row)
{
    const struct assay_bench_spread *sp = &row->result.spread;
    row->ttft_p50 = sp->ttft[ASSAY_PCTL_P50].median;
    row->ttft_p95 = sp->ttft[ASSAY_PCTL_P95].median;
    row->ttft_p99 = sp->ttft[ASSAY_PCTL_P99].median;
    row->achieved_rate = sp->achieved_rate.median;
    row->has_offered_rate = row->kind == ASSAY_LOADGEN_OPEN;
    row->offered_rate = row->has_offered_rate ? row->rate : NAN;
}

enum assay_status assay_seedtable_run(const struct assay_adapter *adapter,
                                      const struct assay_workload *w,
                                      const struct assay_seedtable_params *p,
                                      const struct assay_slo *slo, struct assay_seedtable *out)
{
    memset(out, 0, sizeof *out);
    out->capacity = NAN;
    if (p == NULL || p->n_closed < 1 || p->n_closed > ASSAY_SEEDTABLE_MAX_CLOSED || p->n_runs < 1 ||
        !generated_arrival(p->arrival) || !isfinite(p->open_rate) ||
        (p->open_rate <= 0.0 && !(isfinite(p->capacity_factor) && p->capacity_factor > 1.0))) {
        return ASSAY_ERR_INVALID;
    }
    for (int32_t i = 0; i < p->n_closed; i++) {
        if (p->workers[i] < 1) {
            return ASSAY_ERR_INVALID;
        }
    }
    double rate = p->open_rate;
    if (rate <= 0.0) {
        enum assay_status st = assay_bench_capacity(adapter, w, p->warmup, p->timeout_s, &out->capacity);
        if (st != ASSAY_OK) {
            return st;
        }
        rate = p->capacity_factor * out->capacity;
        if (p->progress.fn != NULL) {
            char line[160];
            snprintf(line, sizeof line,
                     "capacity %.4g req/s (one burst of the workload); the open loop offers %.4g",
                     out->capacity, rate);
            p->progress.fn(p->progress.arg, line);
        }
    }
    for (int32_t i = 0; i < 1 + p->n_closed; i++) {
        struct assay_seedtable_row *row = &out->rows[i];
        struct assay_loadgen_params lp = assay_loadgen_default_params();
        lp.warmup = p->warmup;
        lp.timeout_s = p->timeout_s;
        if (i == 0) {
            lp.kind = ASSAY_LOADGEN_OPEN;
            lp.arrival = p->arrival;
            lp.rate = rate;
            lp.cv = p->cv;
            lp.seed = p->seed;
            row->kind = ASSAY_LOADGEN_OPEN;
            row->rate = rate;
        } else {
            lp.kind = ASSAY_LOADGEN_CLOSED;
            lp.n_workers = p->workers[i - 1];
            row->kind = ASSAY_LOADGEN_CLOSED;
            row->rate = NAN;
            row->n_workers = lp.n_workers;
        }
        char label[80];
        if (i == 0) {
            snprintf(label, sizeof label, "open loop at %.4g req/s", rate);
        } else {
            snprintf(label, sizeof label, "closed loop, %d workers", (int)lp.n_workers);
        }
        lp.progress = p->progress;
        lp.progress.label = label;
        enum assay_status st = assay_bench_run(adapter, w, &lp, slo, p->n_runs, &row->result);
        if (row->result.n_runs > 0) {
            fill_row(row);
            out->n_rows = i + 1;
        }
        if (st != ASSAY_OK) {
            return st;
        }
    }
    return ASSAY_OK;
}

void assay_seedtable_release(struct assay_seedtable *t)
{
    if (t == NULL) {
        return;
    }
    for (int32_t i = 0; i < 1 + ASSAY_SEEDTABLE_MAX_CLOSED; i++) {
        assay_bench_result_release(&t->rows[i].result);
    }
    t->n_rows = 0;
}

char *assay_seedtable_setting(const struct assay_seedtable_row *row, char *buf, size_t size)
{
    if (row->kind == ASSAY_LOADGEN_OPEN) {
        snprintf(buf, size, "%.1f req/s offered", row->rate);
    } else {
        snprintf(buf, size, "%d workers", (int)row->n_workers);
    }
    return buf;
}

static bool row_to_json(const struct assay_seedtable_row *row, const struct assay_workload *w,
                        cJSON *o)
{
    char setting[64];
    bool ok = cJSON_AddStringToObject(o, "generator", assay_loadgen_kind_str(row->kind)) != NULL &&
              cJSON_AddStringToObject(o, "setting",
                                      assay_seedtable_setting(row, setting, sizeof setting)) != NULL &&
              assay_json_add_num(o, "rate", row->rate) &&
              assay_json_add_num(o, "workers", row->n_workers > 0 ? row->n_workers : NAN) &&
              assay_json_add_num(o, "ttft_p50", row->ttft_p50) &&
              assay_json_add_num(o, "ttft_p95", row->ttft_p95) &&
              assay_json_add_num(o, "ttft_p99", row->ttft_p99) &&
              assay_json_add_num(o, "offered_rate", row->offered_rate) &&
              assay_json_add_num(o, "achieved_rate", row->achieved_rate);
    if (!ok) {
        return false;
    }
    cJSON *bench = NULL;
    if (assay_bench_result_to_json(&row->result, w, &bench) != ASSAY_OK) {
        return false;
    }
    if (!cJSON_AddItemToObject(o, "bench", bench)) {
        cJSON_Delete(bench);
        return false;
    }
    return true;
}

enum assay_status assay_seedtable_to_json(const struct assay_seedtable *t,
                                          const struct assay_workload *w, cJSON **out)
{
    *out = NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *rows = NULL;
    bool ok = root != NULL && cJSON_AddStringToObject(root, "format", "assay-seedtable") != NULL &&
              cJSON_AddNumberToObject(root, "version", 1) != NULL &&
              assay_json_add_num(root, "capacity", t->capacity) &&
              (rows = cJSON_AddArrayToObject(root, "rows")) != NULL;
    for (int32_t i = 0; ok && i < t->n_rows; i++) {
        cJSON *o = cJSON_CreateObject();
        if (o == NULL || !cJSON_AddItemToArray(rows, o)) {
            cJSON_Delete(o);
            ok = false;
            break;
        }
        ok = row_to_json(&t->rows[i], w, o);
    }
    if (!ok) {
        cJSON_Delete(root);
        return ASSAY_ERR_NOMEM;
    }
    *out = root;
    return ASSAY_OK;
}

/* ---- rate sweep --------------------------------------------------------- */

struct assay_sweep_params assay_sweep_default_params(void)
{
    struct assay_sweep_params p = {
        .start_rate = 1.0,
        .target = 0.99,
        .max_probes = 12,
        .rel_tol = 0.05,
        .max_rate = 1e6,
        .min_rate = 0.01,
        .arrival = ASSAY_ARRIVAL_POISSON,
        .cv = 1.0,
        .seed = 1,
        .warmup = ASSAY_LOADGEN_WARMUP_AUTO,
        .timeout_s = 600.0,
    };
    return p;
}

static enum assay_status probe(const struct assay_adapter *adapter, const struct assay_workload *w,
                               const struct assay_sweep_params *p, const struct assay_slo *slo,
                               double rate, struct assay_sweep_result *out, bool *pass)
{
    struct assay_loadgen_params lp = assay_loadgen_default_params();
    lp.kind = ASSAY_LOADGEN_OPEN;
    lp.arrival = p->arrival;
    lp.rate = rate;
    lp.cv = p->cv;
    lp.seed = p->seed;
    lp.warmup = p->warmup;
    lp.timeout_s = p->timeout_s;
    struct assay_bench_result r;
    enum assay_status st = assay_bench_run(adapter, w, &lp, slo, 1, &r);
    if (r.n_runs > 0) {
        struct assay_sweep_probe *pr = &out->probes[out->n_probes++];
        pr->rate = rate;
        pr->goodput_fraction = r.runs[0].goodput_fraction;
        pr->pass = pr->goodput_fraction >= p->target;
        pr->achieved_rate = r.runs[0].achieved_rate;
        pr->ttft_p50 = r.runs[0].ttft.v[ASSAY_PCTL_P50];
        pr->ttft_p99 = r.runs[0].ttft.v[ASSAY_PCTL_P99];
        pr->tpot_p99 = r.runs[0].tpot.v[ASSAY_PCTL_P99];
        pr->e2e_p99 = r.runs[0].e2e.v[ASSAY_PCTL_P99];
        *pass = pr->pass;
        if (p->progress.fn != NULL) {
            char line[160];
            snprintf(line, sizeof line, "probe %d (of at most %d): %.4g req/s, goodput %.1f%%: %s",
                     (int)out->n_probes, (int)p->max_probes, rate, 100 * pr->goodput_fraction,
                     pr->pass ? "pass" : "fail");
            p->progress.fn(p->progress.arg, line);
        }
        if (pr->pass && rate > out->best_rate) {
            out->best_rate = rate;
        }
        if (!pr->pass && rate < out->fail_rate) {
            out->fail_rate = rate;
        }
    }
    assay_bench_result_release(&r);
    return st;
}

enum assay_status assay_rate_sweep(const struct assay_adapter *adapter,
                                   const struct assay_workload *w,
                                   const struct assay_sweep_params *p,
                                   const struct assay_slo *slo, struct assay_sweep_result *out)
{
    memset(out, 0, sizeof *out);
    out->fail_rate = INFINITY;
    if (p == NULL || slo == NULL || !(isfinite(p->start_rate) && p->start_rate > 0.0) ||
        !(p->target > 0.0 && p->target <= 1.0) || p->max_probes < 2 ||
        p->max_probes > ASSAY_SWEEP_MAX_PROBES || !(isfinite(p->rel_tol) && p->rel_tol > 0.0) ||
        !(isfinite(p->max_rate) && p->max_rate > p->start_rate) ||
        !(isfinite(p->min_rate) && p->min_rate > 0.0 && p->min_rate <= p->start_rate) ||
        !generated_arrival(p->arrival)) {
        return ASSAY_ERR_INVALID;
    }
    double rate = p->start_rate;
    bool pass = false;
    enum assay_status st = probe(adapter, w, p, slo, rate, out, &pass);
    /* Bracket. */
    while (st == ASSAY_OK && out->n_probes < p->max_probes &&
           (out->best_rate == 0.0 || isinf(out->fail_rate))) {
        if (pass) {
            if (rate >= p->max_rate) {
                break; /* passes at the guard: report it, unbracketed */
            }
            rate = fmin(2.0 * rate, p->max_rate);
        } else {
            if (rate <= p->min_rate) {
                break; /* fails at the guard: nothing passes, unbracketed */
            }
            rate = fmax(0.5 * rate, p->min_rate);
        }
        st = probe(adapter, w, p, slo, rate, out, &pass);
    }
    /* Bisect. */
    while (st == ASSAY_OK && out->n_probes < p->max_probes && out->best_rate > 0.0 &&
           isfinite(out->fail_rate) && out->fail_rate / out->best_rate > 1.0 + p->rel_tol) {
        rate = sqrt(out->best_rate * out->fail_rate);
        st = probe(adapter, w, p, slo, rate, out, &pass);
    }
    out->bracketed = out->best_rate > 0.0 && isfinite(out->fail_rate) &&
                     out->fail_rate > out->best_rate &&
                     out->fail_rate / out->best_rate <= 1.0 + p->rel_tol;
    return st;
}
