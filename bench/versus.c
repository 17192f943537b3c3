/*
 * versus.c - several engines benchmarked side by side (versus.h):
 * assay_versus_run runs each engine in the single, batched and open
 * configurations, interleaved run by run on the same seeds, and
 * assay_versus_tokens_per_s, _latency and _to_json read the results.
 * `assay audit` (cli/cmd_audit.c) uses it to put a server beside the
 * bundled engine.
 */
#include "versus.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/json_out.h"

const char *assay_versus_config_str(enum assay_versus_config c)
{
    switch (c) {
    case ASSAY_VERSUS_SINGLE: return "single";
    case ASSAY_VERSUS_BATCHED: return "batched";
    case ASSAY_VERSUS_OPEN: return "open";
    default: return "?";
    }
}

struct assay_versus_params assay_versus_default_params(void)
{
    struct assay_versus_params p;
    memset(&p, 0, sizeof p);
    p.batch_workers = 4;
    p.open_rate = 0;
    p.open_factor = 0.5;
    p.arrival = ASSAY_ARRIVAL_POISSON;
    p.cv = 1.0;
    p.seed = 1;
    p.n_runs = 3;
    p.warmup = ASSAY_LOADGEN_WARMUP_AUTO;
    p.timeout_s = 300;
    return p;
}

static struct assay_loadgen_params generator(const struct assay_versus_params *p,
                                             enum assay_versus_config c, double rate)
{
    struct assay_loadgen_params lp = assay_loadgen_default_params();
    lp.seed = p->seed;
    lp.warmup = p->warmup;
    lp.timeout_s = p->timeout_s;
    if (c == ASSAY_VERSUS_OPEN) {
        lp.kind = ASSAY_LOADGEN_OPEN;
        lp.arrival = p->arrival;
        lp.cv = p->cv;
        lp.rate = rate;
    } else {
        lp.kind = ASSAY_LOADGEN_CLOSED;
        lp.n_workers = c == ASSAY_VERSUS_SINGLE ? 1 : p->batch_workers;
    }
    return lp;
}

/* Run configuration c for every engine, run by run, into out. */
static enum assay_status run_config(const struct assay_versus_engine *e, int32_t n,
                                    const struct assay_workload *w,
                                    const struct assay_versus_params *p,
                                    const struct assay_slo *slo, enum assay_versus_config c,
                                    double rate, struct assay_versus *out)
{
    enum assay_status first = ASSAY_OK;
    struct assay_loadgen_params base = generator(p, c, rate);
    for (int32_t k = 0; k < n; k++) {
        struct assay_bench_result *r = &out->results[k][c];
        memset(r, 0, sizeof *r);
        r->params = base;
        r->has_slo = slo != NULL;
        if (slo != NULL) {
            r->slo = *slo;
        }
        r->runs = assay_calloc((size_t)p->n_runs, sizeof *r->runs);
        if (r->runs == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        out->status[k][c] = ASSAY_OK;
    }
    for (int32_t run = 0; run < p->n_runs; run++) {
        for (int32_t k = 0; k < n; k++) {
            if (out->status[k][c] != ASSAY_OK) {
                continue; /* this engine already failed this configuration */
            }
            struct assay_loadgen_params lp = base;
            lp.seed = p->seed + (uint64_t)run;
            struct assay_bench_result one;
            enum assay_status st = assay_bench_run(e[k].adapter, w, &lp, slo, 1, &one);
            struct assay_bench_result *r = &out->results[k][c];
            if (one.n_runs > 0) {
                r->runs[r->n_runs++] = one.runs[0];
            }
            assay_bench_result_release(&one);
            if (st != ASSAY_OK) {
                out->status[k][c] = st;
                r->status = st;
                if (first == ASSAY_OK) {
                    first = st;
                }
                if (st == ASSAY_ERR_NOMEM || st == ASSAY_ERR_INVALID) {
                    return st;
                }
            }
        }
    }
    for (int32_t k = 0; k < n; k++) {
        struct assay_bench_result *r = &out->results[k][c];
        assay_bench_spread_compute(r->runs, r->n_runs, &r->spread);
    }
    return first;
}

enum assay_status assay_versus_run(const struct assay_versus_engine *engines, int32_t n,
                                    const struct assay_workload *w,
                                    const struct assay_versus_params *p,
                                    const struct assay_slo *slo, struct assay_versus *out)
{
    memset(out, 0, sizeof *out);
    out->open_rate = NAN;
    if (engines == NULL || n < 1 || n > ASSAY_VERSUS_MAX_ENGINES || w == NULL || p == NULL ||
        p->batch_workers < 1 || p->n_runs < 1 || p->n_runs > 100 ||
        (p->open_rate <= 0 && !(p->open_factor > 0 && p->open_factor <= 1))) {
        return ASSAY_ERR_INVALID;
    }
    for (int32_t k = 0; k < n; k++) {
        if (engines[k].adapter == NULL || engines[k].name == NULL) {
            return ASSAY_ERR_INVALID;
        }
    }
    out->n_engines = n;
    out->params = *p;
    for (int32_t k = 0; k < n; k++) {
        snprintf(out->name[k], sizeof out->name[k], "%s", engines[k].name);
        snprintf(out->spec[k], sizeof out->spec[k], "%s",
                 engines[k].spec != NULL ? engines[k].spec : "");
        for (int c = 0; c < ASSAY_VERSUS_N_CONFIGS; c++) {
            out->status[k][c] = ASSAY_ERR_INVALID; /* not run (yet) */
        }
    }
    enum assay_status first = ASSAY_OK;
    for (int c = ASSAY_VERSUS_SINGLE; c <= ASSAY_VERSUS_BATCHED; c++) {
        enum assay_status st = run_config(engines, n, w, p, slo, (enum assay_versus_config)c, 0, out);
        if (st == ASSAY_ERR_NOMEM) {
            return st;
        }
        first = first == ASSAY_OK ? st : first;
    }
    double rate = p->open_rate;
    if (!(rate > 0)) {
        double lowest = INFINITY;
        for (int32_t k = 0; k < n; k++) {
            double ach = out->results[k][ASSAY_VERSUS_BATCHED].spread.achieved_rate.median;
            if (out->status[k][ASSAY_VERSUS_BATCHED] == ASSAY_OK && isfinite(ach) && ach > 0 &&
                ach < lowest) {
                lowest = ach;
            }
        }
        if (!isfinite(lowest)) {
            return first != ASSAY_OK ? first : ASSAY_ERR_INVALID;
        }
        rate = p->open_factor * lowest;
        out->open_rate_derived = true;
    }
    out->open_rate = rate;
    enum assay_status st = run_config(engines, n, w, p, slo, ASSAY_VERSUS_OPEN, rate, out);
    return first != ASSAY_OK ? first : st;
}

void assay_versus_release(struct assay_versus *c)
{
    if (c == NULL) {
        return;
    }
    for (int32_t k = 0; k < ASSAY_VERSUS_MAX_ENGINES; k++) {
        for (int i = 0; i < ASSAY_VERSUS_N_CONFIGS; i++) {
            assay_bench_result_release(&c->results[k][i]);
        }
    }
    c->n_engines = 0;
}

static bool ran(const struct assay_versus *c, int32_t engine, enum assay_versus_config config)
{
    return c != NULL && engine >= 0 && engine < c->n_engines && config >= 0 &&
           config < ASSAY_VERSUS_N_CONFIGS && c->results[engine][config].n_runs > 0;
}

double assay_versus_tokens_per_s(const struct assay_versus *c, int32_t engine,
                                  enum assay_versus_config config)
{
    return ran(c, engine, config) ? c->results[engine][config].spread.tokens_per_s.median : NAN;
}

double assay_versus_latency(const struct assay_versus *c, int32_t engine,
                             enum assay_versus_config config, const char *metric,
                             enum assay_pctl which)
{
    if (!ran(c, engine, config) || which < 0 || which >= ASSAY_PCTL_COUNT) {
        return NAN;
    }
    const struct assay_bench_spread *s = &c->results[engine][config].spread;
    if (strcmp(metric, "ttft") == 0) {
        return s->ttft[which].median;
    }
    if (strcmp(metric, "tpot") == 0) {
        return s->tpot[which].median;
    }
    if (strcmp(metric, "e2e") == 0) {
        return s->e2e[which].median;
    }
    if (strcmp(metric, "itl") == 0) {
        return s->itl[which].median;
    }
    return NAN;
}

static bool add_engine(const struct assay_versus *c, int32_t k, const struct assay_workload *w,
                       cJSON *engines)
{
    cJSON *e = cJSON_CreateObject();
    if (e == NULL || !cJSON_AddItemToArray(engines, e)) {
        cJSON_Delete(e);
        return false;
    }
    cJSON *f = NULL, *status = NULL;
    bool ok = cJSON_AddStringToObject(e, "name", c->name[k]) != NULL &&
              cJSON_AddStringToObject(e, "spec", c->spec[k]) != NULL &&
              (f = cJSON_AddObjectToObject(e, "figures")) != NULL &&
              assay_json_add_num(f, "single_tokens_per_s", assay_versus_tokens_per_s(c, k, ASSAY_VERSUS_SINGLE)) &&
              assay_json_add_num(f, "batched_tokens_per_s",
                      assay_versus_tokens_per_s(c, k, ASSAY_VERSUS_BATCHED)) &&
              assay_json_add_num(f, "open_tokens_per_s", assay_versus_tokens_per_s(c, k, ASSAY_VERSUS_OPEN)) &&
              assay_json_add_num(f, "single_ttft_p50",
                      assay_versus_latency(c, k, ASSAY_VERSUS_SINGLE, "ttft", ASSAY_PCTL_P50)) &&
              assay_json_add_num(f, "ttft_p50", assay_versus_latency(c, k, ASSAY_VERSUS_OPEN, "ttft", ASSAY_PCTL_P50)) &&
              assay_json_add_num(f, "ttft_p90", assay_versus_latency(c, k, ASSAY_VERSUS_OPEN, "ttft", ASSAY_PCTL_P90)) &&
              assay_json_add_num(f, "ttft_p99", assay_versus_latency(c, k, ASSAY_VERSUS_OPEN, "ttft", ASSAY_PCTL_P99)) &&
              assay_json_add_num(f, "tpot_p50", assay_versus_latency(c, k, ASSAY_VERSUS_OPEN, "tpot", ASSAY_PCTL_P50)) &&
              assay_json_add_num(f, "tpot_p99", assay_versus_latency(c, k, ASSAY_VERSUS_OPEN, "tpot", ASSAY_PCTL_P99)) &&
              assay_json_add_num(f, "e2e_p50", assay_versus_latency(c, k, ASSAY_VERSUS_OPEN, "e2e", ASSAY_PCTL_P50)) &&
              assay_json_add_num(f, "e2e_p99", assay_versus_latency(c, k, ASSAY_VERSUS_OPEN, "e2e", ASSAY_PCTL_P99)) &&
              assay_json_add_num(f, "open_achieved_rate",
                      ran(c, k, ASSAY_VERSUS_OPEN)
                          ? c->results[k][ASSAY_VERSUS_OPEN].spread.achieved_rate.median
                          : NAN) &&
              (status = cJSON_AddObjectToObject(e, "status")) != NULL;
    for (int i = 0; ok && i < ASSAY_VERSUS_N_CONFIGS; i++) {
        const char *key = assay_versus_config_str((enum assay_versus_config)i);
        cJSON *b = NULL;
        if (ran(c, k, (enum assay_versus_config)i)) {
            ok = assay_bench_result_to_json(&c->results[k][i], w, &b) == ASSAY_OK;
        } else {
            b = cJSON_CreateNull();
            ok = b != NULL;
        }
        if (ok && !cJSON_AddItemToObject(e, key, b)) {
            cJSON_Delete(b);
            ok = false;
        }
        bool not_run = c->results[k][i].n_runs == 0;
        ok = ok && cJSON_AddStringToObject(status, key,
                                           c->status[k][i] == ASSAY_OK ? "ok"
                                           : not_run ? "not run"
                                                     : assay_status_str(c->status[k][i])) != NULL;
    }
    return ok;
}

enum assay_status assay_versus_to_json(const struct assay_versus *c,
                                        const struct assay_workload *w, cJSON **out)
{
    *out = NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON *engines = NULL;
    char order[512], rule[256];
    snprintf(order, sizeof order,
             "interleaved: configurations in the order single, batched, open; within each, run "
             "r (r = 1..%d) of every engine back to back (",
             (int)c->params.n_runs);
    for (int32_t k = 0; k < c->n_engines; k++) {
        size_t l = strlen(order);
        snprintf(order + l, sizeof order - l, "%s%s", k > 0 ? ", then " : "", c->name[k]);
    }
    size_t l = strlen(order);
    snprintf(order + l, sizeof order - l, "), run r of every engine with the same seed");
    if (c->open_rate_derived) {
        snprintf(rule, sizeof rule,
                 "%.2f times the lowest batched achieved rate among the engines: the same offered "
                 "load for every engine, with headroom",
                 c->params.open_factor);
    } else {
        snprintf(rule, sizeof rule, "as given");
    }
    bool ok = o != NULL && cJSON_AddStringToObject(o, "format", "assay-versus") != NULL &&
              assay_json_add_num(o, "version", ASSAY_VERSUS_VERSION) &&
              cJSON_AddStringToObject(o, "order", order) != NULL &&
              assay_json_add_num(o, "runs", c->params.n_runs) &&
              assay_json_add_num(o, "batch_workers", c->params.batch_workers) &&
              assay_json_add_num(o, "open_rate", c->open_rate) &&
              cJSON_AddStringToObject(o, "open_rate_rule", rule) != NULL &&
              cJSON_AddStringToObject(o, "arrival", assay_arrival_kind_str(c->params.arrival)) != NULL &&
              assay_json_add_num(o, "seed", (double)c->params.seed) &&
              (engines = cJSON_AddArrayToObject(o, "engines")) != NULL;
    for (int32_t k = 0; ok && k < c->n_engines; k++) {
        ok = add_engine(c, k, w, engines);
    }
    if (!ok) {
        cJSON_Delete(o);
        return ASSAY_ERR_NOMEM;
    }
    *out = o;
    return ASSAY_OK;
}
