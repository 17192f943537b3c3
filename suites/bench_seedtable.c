/* The table of seed-ch28.txt on the bundled engine: TinyGPT (random
 * weights, engine defaults), 48 requests with prompts of 32-128 tokens and
 * outputs of 16-64, under the open loop at an offered rate clearly above
 * the engine's measured capacity and under the closed loop at 2, 4 and 8
 * workers. Same engine, same workload; only the generator changes. Then a
 * rate sweep for the highest offered rate that keeps goodput >= 99% under
 * the SLO (when the tables left time for it). The tables are run twice: on
 * the engine's defaults, and with max_batch 8 so that a queue can form in
 * front of admission. Figures are printed, never asserted; what is asserted is that
 * every request of every run is accounted for and finished normally. The
 * table is also written as JSON to the build tree (scratch-seedtable.json).
 * Exit status 0 when all requests were accounted for, 1 otherwise. */
#include <gsl/gsl_errno.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapters/bundled.h"
#include "bench/loadgen.h"
#include "bench/metrics.h"
#include "bench/seedtable.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "engine/model.h"
#include "support.h"

#define N_REQUESTS 48
#define WORKLOAD_SEED 28

/* 48 requests: prompt length uniform on 32..128, output uniform on 16..64,
 * prompt tokens uniform bytes, all drawn from mt19937 seeded 28. */
static struct assay_workload *make_workload(void)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    struct assay_workload *w = calloc(1, sizeof *w);
    if (rng == NULL || w == NULL) {
        gsl_rng_free(rng);
        free(w);
        return NULL;
    }
    gsl_rng_set(rng, WORKLOAD_SEED);
    w->n = N_REQUESTS;
    w->reqs = calloc(N_REQUESTS, sizeof *w->reqs);
    w->token_store = calloc(N_REQUESTS * 128, sizeof(int32_t));
    if (w->reqs == NULL || w->token_store == NULL) {
        gsl_rng_free(rng);
        free(w->reqs);
        free(w->token_store);
        free(w);
        return NULL;
    }
    snprintf(w->name, sizeof w->name, "seed-ch28");
    snprintf(w->description, sizeof w->description,
             "the workload of the seed chapter's generator comparison");
    snprintf(w->lengths, sizeof w->lengths,
             "prompt_len uniform{32..128}, output (max_tokens) uniform{16..64}, "
             "prompt tokens uniform bytes; mt19937 seed %d",
             WORKLOAD_SEED);
    snprintf(w->arrivals, sizeof w->arrivals, "none in the trace: set by each generator");
    int32_t *tok = w->token_store;
    for (int32_t i = 0; i < N_REQUESTS; i++) {
        struct assay_workload_request *q = &w->reqs[i];
        q->id = (uint64_t)i + 1;
        q->prompt_len = 32 + (int32_t)gsl_rng_uniform_int(rng, 97);
        q->max_tokens = 16 + (int32_t)gsl_rng_uniform_int(rng, 49);
        q->prompt = tok;
        for (int32_t k = 0; k < q->prompt_len; k++) {
            q->prompt[k] = (int32_t)gsl_rng_uniform_int(rng, 256);
        }
        tok += q->prompt_len;
        w->n_tokens += q->prompt_len;
        q->stop_token = -1;
        q->abort_after = -1;
        q->abort_step = -1;
        q->sampling = assay_sampling_greedy();
    }
    gsl_rng_free(rng);
    return w;
}

static void free_workload(struct assay_workload *w)
{
    if (w != NULL) {
        free(w->reqs);
        free(w->token_store);
        free(w);
    }
}

static void cpu_name(char *buf, size_t size)
{
    snprintf(buf, size, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) {
        return;
    }
    char line[256];
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *colon = strchr(line, ':');
            if (colon != NULL) {
                snprintf(buf, size, "%s", colon + 2);
                buf[strcspn(buf, "\n")] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

/* Every run of the row finished every measured request normally. */
static bool row_accounted(const struct assay_seedtable_row *row)
{
    bool ok = row->result.n_runs > 0;
    for (int32_t i = 0; i < row->result.n_runs; i++) {
        const struct assay_bench_summary *s = &row->result.runs[i];
        ok = ok && s->n_ok == s->n_requests && s->n_bad_events == 0 && !s->timed_out;
        if (s->n_ok != s->n_requests) {
            printf("  run %d: %d of %d requests finished normally (error %d, rejected %d, lost %d)\n",
                   (int)i, (int)s->n_ok, (int)s->n_requests, (int)s->n_error, (int)s->n_rejected,
                   (int)s->n_lost);
        }
    }
    return ok;
}

static void print_table(const struct assay_seedtable *t)
{
    printf("\n%-12s %-22s %10s %10s %10s %14s %15s %9s\n", "Generator", "Setting", "TTFT p50",
           "TTFT p95", "TTFT p99", "Offered req/s", "Achieved req/s", "Goodput");
    for (int32_t i = 0; i < t->n_rows; i++) {
        const struct assay_seedtable_row *row = &t->rows[i];
        char setting[64], offered[32];
        assay_seedtable_setting(row, setting, sizeof setting);
        if (row->has_offered_rate) {
            snprintf(offered, sizeof offered, "%.2f", row->offered_rate);
        } else {
            snprintf(offered, sizeof offered, "none");
        }
        printf("%-12s %-22s %9.4fs %9.4fs %9.4fs %14s %15.3f %8.1f%%\n",
               row->kind == ASSAY_LOADGEN_OPEN ? "Open loop" : "Closed loop", setting, row->ttft_p50,
               row->ttft_p95, row->ttft_p99, offered, row->achieved_rate,
               100.0 * row->result.spread.goodput_fraction.median);
    }
    printf("\nSpread over runs (min / median / max):\n");
    for (int32_t i = 0; i < t->n_rows; i++) {
        const struct assay_seedtable_row *row = &t->rows[i];
        const struct assay_bench_spread *sp = &row->result.spread;
        char setting[64];
        assay_seedtable_setting(row, setting, sizeof setting);
        printf("  %-6s %-22s TTFT p99 %.4f / %.4f / %.4f s; TPOT p50 %.4f / %.4f / %.4f s; "
               "E2E p99 %.3f / %.3f / %.3f s; achieved %.3f / %.3f / %.3f req/s; "
               "%.0f / %.0f / %.0f tok/s\n",
               assay_loadgen_kind_str(row->kind), setting, sp->ttft[ASSAY_PCTL_P99].min,
               sp->ttft[ASSAY_PCTL_P99].median, sp->ttft[ASSAY_PCTL_P99].max,
               sp->tpot[ASSAY_PCTL_P50].min, sp->tpot[ASSAY_PCTL_P50].median,
               sp->tpot[ASSAY_PCTL_P50].max, sp->e2e[ASSAY_PCTL_P99].min,
               sp->e2e[ASSAY_PCTL_P99].median, sp->e2e[ASSAY_PCTL_P99].max, sp->achieved_rate.min,
               sp->achieved_rate.median, sp->achieved_rate.max, sp->tokens_per_s.min,
               sp->tokens_per_s.median, sp->tokens_per_s.max);
        if (row->kind == ASSAY_LOADGEN_OPEN) {
            printf("  %-6s %-22s generator lateness p50 %.1f us, p99 %.1f us, max %.1f us "
                   "(median over runs)\n",
                   "", "", sp->lateness[ASSAY_PCTL_P50].median * 1e6,
                   sp->lateness[ASSAY_PCTL_P99].median * 1e6, sp->lateness[ASSAY_PCTL_MAX].median * 1e6);
        }
    }
    const struct assay_latency_summary *ttft = &t->rows[0].result.runs[0].ttft;
    printf("\nSufficiency: each run has %lld TTFT samples; p50 is bounded at 99%% from n >= %lld "
           "(%s), p90 from %lld (%s), p95 from %lld (%s), p99 from %lld (%s).\n",
           (long long)ttft->n, (long long)ttft->suff[ASSAY_PCTL_P50].n_min,
           ttft->suff[ASSAY_PCTL_P50].sufficient ? "sufficient" : "NOT sufficient",
           (long long)ttft->suff[ASSAY_PCTL_P90].n_min,
           ttft->suff[ASSAY_PCTL_P90].sufficient ? "sufficient" : "NOT sufficient",
           (long long)ttft->suff[ASSAY_PCTL_P95].n_min,
           ttft->suff[ASSAY_PCTL_P95].sufficient ? "sufficient" : "NOT sufficient",
           (long long)ttft->suff[ASSAY_PCTL_P99].n_min,
           ttft->suff[ASSAY_PCTL_P99].sufficient ? "sufficient" : "NOT sufficient");
}

/* The seed table on one engine; prints it and writes its JSON. */
static bool run_table(const struct assay_adapter *a, const struct assay_workload *w,
                      const struct assay_slo *slo, const char *json_name, double *capacity)
{
    struct assay_adapter_info info;
    assay_adapter_get_info(a, &info);
    struct assay_seedtable_params tp = assay_seedtable_default_params();
    int64_t t0 = assay_now_ns();
    struct assay_seedtable t;
    enum assay_status st = assay_seedtable_run(a, w, &tp, slo, &t);
    double elapsed = (assay_now_ns() - t0) * 1e-9;
    bool ok = st == ASSAY_OK;
    printf("\n=== engine %s\n", info.spec);
    if (st != ASSAY_OK) {
        printf("seed table: %s\n", assay_status_str(st));
    }
    printf("Engine capacity (one burst of all %d requests): %.3f req/s; open loop offered "
           "%.1f x that = %.3f req/s (Poisson, seed %llu + run).\n",
           N_REQUESTS, t.capacity, tp.capacity_factor, tp.capacity_factor * t.capacity,
           (unsigned long long)tp.seed);
    if (t.n_rows > 0) {
        print_table(&t);
    }
    for (int32_t i = 0; i < t.n_rows; i++) {
        ok = row_accounted(&t.rows[i]) && ok;
    }
    ok = ok && t.n_rows == 4 && t.rows[0].has_offered_rate && !t.rows[1].has_offered_rate;
    int32_t warmup =
        t.n_rows > 0 && t.rows[0].result.n_runs > 0 ? t.rows[0].result.runs[0].n_warmup : -1;
    char cpu[128], when[32];
    cpu_name(cpu, sizeof cpu);
    printf("\nConditions: %s (random weights, seed 1) (%lld params), %s x %ld CPUs, "
           "%d requests (%s), same workload under every generator, %d warm-up requests "
           "discarded per run, %d runs per row (medians shown), SLO TTFT <= %.3f s and "
           "TPOT <= %.3f s, measured %s, table in %.1f s.\n",
           info.model_name, (long long)info.n_params, cpu, sysconf(_SC_NPROCESSORS_ONLN),
           N_REQUESTS, w->lengths, (int)warmup, (int)tp.n_runs, slo->ttft_s, slo->tpot_s,
           assay_utc_iso8601(when, sizeof when), elapsed);
    char path[512];
    cJSON *json = NULL;
    if (t.n_rows > 0 && assay_seedtable_to_json(&t, w, &json) == ASSAY_OK) {
        char *text = cJSON_Print(json);
        FILE *f = fopen(assay_test_scratch(json_name, path, sizeof path), "w");
        if (text != NULL && f != NULL) {
            fputs(text, f);
            printf("JSON: %s\n", path);
        }
        if (f != NULL) {
            fclose(f);
        }
        cJSON_free(text);
        cJSON_Delete(json);
    }
    *capacity = t.capacity;
    assay_seedtable_release(&t);
    return ok;
}

/* The highest offered rate with goodput >= 99%. */
static bool run_sweep(const struct assay_adapter *a, const struct assay_workload *w,
                      const struct assay_slo *slo, double capacity)
{
    struct assay_sweep_params sp = assay_sweep_default_params();
    sp.start_rate = capacity; /* lower rates take longer per probe */
    sp.min_rate = capacity / 8.0;
    sp.max_probes = 6;
    sp.rel_tol = 0.1;
    sp.timeout_s = 600;
    struct assay_sweep_result sr;
    int64_t t0 = assay_now_ns();
    enum assay_status st = assay_rate_sweep(a, w, &sp, slo, &sr);
    printf("\nRate sweep (goodput >= %.0f%% under the SLO; Poisson, seed %llu at every rate; "
           "at most %d runs: double or halve from %.2f req/s (not below %.2f) to bracket, "
           "then geometric bisection to within %.0f%%): %s in %.1f s\n",
           100 * sp.target, (unsigned long long)sp.seed, (int)sp.max_probes, sp.start_rate,
           sp.min_rate,
           100 * sp.rel_tol, assay_status_str(st), (assay_now_ns() - t0) * 1e-9);
    for (int32_t i = 0; i < sr.n_probes; i++) {
        printf("  probe %d: %8.3f req/s offered -> goodput %5.1f%% %s\n", (int)i + 1,
               sr.probes[i].rate, 100 * sr.probes[i].goodput_fraction,
               sr.probes[i].pass ? "pass" : "fail");
    }
    printf("  highest passing rate %.3f req/s; lowest failing %.3f req/s; %s\n", sr.best_rate,
           sr.fail_rate, sr.bracketed ? "bracketed" : "NOT bracketed within the budget");
    return st == ASSAY_OK;
}

/* The sweep runs only when the tables left time for it: on a loaded shared
 * machine the tables alone can take many minutes. */
#define SWEEP_BUDGET_S 300.0

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    gsl_set_error_handler_off();
    int64_t t_begin = assay_now_ns();
    struct assay_model_config cfg = assay_model_config_tinygpt();
    struct assay_model *model = NULL;
    if (assay_model_init_random(&model, &cfg, 1) != ASSAY_OK) {
        printf("model init failed\n");
        return 1;
    }
    struct assay_workload *w = make_workload();
    if (w == NULL) {
        printf("workload allocation failed\n");
        assay_model_free(model);
        return 1;
    }
    /* An interactive SLO: first token within 500 ms, then 25 ms a token. */
    const struct assay_slo slo = {.ttft_s = 0.5, .tpot_s = 0.025};
    /* 0: the engine's defaults (max_batch 64: the whole workload fits in one
     *    batch, so a request is admitted at once and queueing shows in TPOT
     *    and E2E). 1: the same engine with max_batch 8, where requests beyond
     *    the batch wait in the engine's queue before their first token. */
    const int32_t batches[2] = {0, 8};
    const char *json_names[2] = {"seedtable.json", "seedtable-batch8.json"};
    struct assay_adapter adapters[2] = {{NULL, NULL}, {NULL, NULL}};
    double capacity[2] = {NAN, NAN};
    bool ok = true;
    for (int k = 0; k < 2 && ok; k++) {
        struct assay_engine_params ep = assay_engine_default_params(model);
        if (batches[k] > 0) {
            ep.max_batch = batches[k];
        }
        struct assay_diag diag;
        if (assay_bundled_open(&ep, &adapters[k], &diag) != ASSAY_OK) {
            char buf[512];
            printf("engine init failed: %s\n", assay_diag_format(&diag, buf, sizeof buf));
            ok = false;
            break;
        }
        ok = run_table(&adapters[k], w, &slo, json_names[k], &capacity[k]);
    }
    double elapsed = (assay_now_ns() - t_begin) * 1e-9;
    if (ok && elapsed < SWEEP_BUDGET_S) {
        ok = run_sweep(&adapters[0], w, &slo, capacity[0]);
    } else if (ok) {
        printf("\nRate sweep skipped: the tables took %.0f s on this machine (budget %.0f s).\n",
               elapsed, SWEEP_BUDGET_S);
    }
    assay_adapter_close(&adapters[0]);
    assay_adapter_close(&adapters[1]);
    free_workload(w);
    assay_model_free(model);
    printf("total %.1f s; %s\n", (assay_now_ns() - t_begin) * 1e-9,
           ok ? "all requests accounted for" : "FAILED");
    return ok ? 0 : 1;
}
