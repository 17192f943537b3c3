/*
 * html_bench.c - the benchmark, the seed's table and the rate sweep
 * sections of the HTML report (html_parts.h): tables of the figures with
 * their spread over runs and the plots, from the report's JSON alone.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "html_parts.h"
#include "plot.h"
#include "report.h"
#include "schema.h"
#include "text.h"

/* The five reported percentiles, in the order of the bench module's JSON. */
static const char *const pctl[] = {"p50", "p90", "p95", "p99", "max"};
static const double pctl_q[] = {0.50, 0.90, 0.95, 0.99, 1.0};
#define N_PCTL 5

static const char *const metrics[] = {"ttft", "tpot", "itl", "e2e", "lateness"};
static const char *const metric_names[] = {"TTFT", "TPOT", "ITL", "E2E", "Generator lateness"};
#define N_METRICS 5


/* The CDF points of a distribution: its "cdf" array (the quantiles at
 * 1%..100%, medians over runs in a spread) when the report has it, else the
 * percentile points ({"p50": x, ...} or a spread {"p50": {"median": x}}). */
#define CDF_MAX 128
static size_t cdf_points(const cJSON *dist, bool spread, double *x, double *y)
{
    size_t n = 0;
    const cJSON *cdf = cJSON_GetObjectItemCaseSensitive(dist, "cdf");
    int n_cdf = assay_html_array_size(cdf);
    if (n_cdf > 0 && n_cdf <= CDF_MAX) {
        const cJSON *v;
        int i = 0;
        cJSON_ArrayForEach(v, cdf)
        {
            i++;
            /* The plots show the upper half, where the tail is. */
            if (2 * i >= n_cdf && cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
                v->valuedouble > 0) {
                x[n] = v->valuedouble;
                y[n] = (double)i / n_cdf;
                n++;
            }
        }
        return n;
    }
    for (int i = 0; i < N_PCTL; i++) {
        char path[32];
        snprintf(path, sizeof path, spread ? "%s.median" : "%s", pctl[i]);
        double v = assay_json_num(dist, path);
        if (isfinite(v) && v > 0) {
            x[n] = v;
            y[n] = pctl_q[i];
            n++;
        }
    }
    return n;
}


/* ---- benchmark ------------------------------------------------------------- */

static void describe_generator(struct assay_text *t, const cJSON *b)
{
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(b, "generator");
    const char *kind = assay_json_str(g, "kind", "");
    char x[32];
    if (strcmp(kind, "open") == 0) {
        const char *arrival = assay_json_str(g, "arrival", "?");
        assay_text_puts(t, "Open loop: ");
        assay_html_esc(t, arrival);
        double rate = assay_json_num(g, "rate");
        if (isfinite(rate)) {
            assay_text_printf(t, " arrivals at %s req/s offered", assay_text_num(x, sizeof x, rate, 4));
        } else {
            assay_text_puts(t, " arrivals (the workload's own schedule)");
        }
        if (isfinite(assay_json_num(g, "cv"))) {
            assay_text_printf(t, ", coefficient of variation %g", assay_json_num(g, "cv"));
        }
        if (isfinite(assay_json_num(g, "seed"))) {
            assay_text_printf(t, ", seed %g (run r draws with seed + r)", assay_json_num(g, "seed"));
        }
        assay_text_puts(t, "; latency measured from each request's scheduled arrival");
    } else {
        assay_text_printf(t,
                          "Closed loop: %g workers, each submitting its next request when the "
                          "last finished; no offered rate (a closed loop has no arrival process)",
                          assay_json_num(g, "workers"));
    }
    assay_text_printf(t, ". Warm-up: %g requests per run, run first and discarded. ",
                      assay_json_num(g, "warmup"));
    assay_text_printf(t, "%d run(s).", assay_html_array_size(cJSON_GetObjectItemCaseSensitive(b, "runs")));
}

static void describe_workload(struct assay_text *t, const cJSON *w)
{
    if (!cJSON_IsObject(w)) {
        assay_text_puts(t, "<p>Workload: not stated.</p>\n");
        return;
    }
    assay_text_puts(t, "<p><b>Workload</b> <code>");
    assay_html_esc(t, assay_json_str(w, "name", ""));
    assay_text_puts(t, "</code>: ");
    assay_html_esc(t, assay_json_str(w, "description", ""));
    assay_text_printf(t, " (%g requests)<br>Lengths: ", assay_json_num(w, "n_requests"));
    assay_html_esc(t, assay_json_str(w, "lengths", "not stated"));
    assay_text_puts(t, "<br>Arrivals: ");
    assay_html_esc(t, assay_json_str(w, "arrivals", "not stated"));
    assay_text_puts(t, "</p>\n<table><tr><th>Length (tokens)</th><th>min</th><th>p50</th>"
                       "<th>p90</th><th>max</th></tr>\n");
    static const char *const which[] = {"prompt_len", "output_len"};
    static const char *const names[] = {"prompt", "output (max_tokens)"};
    for (int i = 0; i < 2; i++) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(w, which[i]);
        assay_text_printf(t, "<tr><td>%s</td>", names[i]);
        assay_html_td_num(t, assay_json_num(d, "min"), 8);
        assay_html_td_num(t, assay_json_num(d, "p50"), 8);
        assay_html_td_num(t, assay_json_num(d, "p90"), 8);
        assay_html_td_num(t, assay_json_num(d, "max"), 8);
        assay_text_puts(t, "</tr>\n");
    }
    assay_text_puts(t, "</table>\n");
}

static void describe_slo(struct assay_text *t, const cJSON *slo)
{
    char a[32], b[32];
    if (cJSON_IsObject(slo)) {
        assay_text_printf(t,
                          "<p><b>SLO</b>: TTFT &le; %s and TPOT &le; %s. A request is good when it "
                          "finished normally within both; goodput counts good requests over all "
                          "measured requests.</p>\n",
                          assay_text_seconds(a, sizeof a, assay_json_num(slo, "ttft_s")),
                          assay_text_seconds(b, sizeof b, assay_json_num(slo, "tpot_s")));
    } else {
        assay_text_puts(t, "<p><b>SLO</b>: none stated, so no goodput.</p>\n");
    }
}

static void percentile_table(struct assay_text *t, const cJSON *b)
{
    const cJSON *spread = cJSON_GetObjectItemCaseSensitive(b, "spread");
    assay_text_printf(t,
                      "<h3>Latency percentiles</h3><p class=\"muted\">Median over %g runs, with the "
                      "smallest and largest run under it. Percentiles are %s.</p>\n",
                      assay_json_num(spread, "n_runs"),
                      assay_json_str(b, "percentile_definition", "nearest-rank"));
    assay_text_puts(t, "<table><tr><th>Metric</th>");
    for (int i = 0; i < N_PCTL; i++) {
        assay_text_printf(t, "<th>%s</th>", pctl[i]);
    }
    assay_text_puts(t, "</tr>\n");
    for (int m = 0; m < N_METRICS; m++) {
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(spread, metrics[m]);
        if (!cJSON_IsObject(ms)) {
            continue;
        }
        assay_text_printf(t, "<tr><td>%s</td>", metric_names[m]);
        for (int i = 0; i < N_PCTL; i++) {
            assay_html_td_spread_sec(t, cJSON_GetObjectItemCaseSensitive(ms, pctl[i]));
        }
        assay_text_puts(t, "</tr>\n");
    }
    assay_text_puts(t, "</table>\n");
}

/*
 * Whether the open loop's offered rate was more than the engine serves,
 * said from the one figure that can say it: the capacity the seed's table
 * measured (one burst of the workload) when the report has it. The
 * achieved rate alone cannot: over a finite workload it also counts the
 * time the last requests take to finish after the schedule ends, so it
 * falls short of the offered rate with room to spare too. (The run's note
 * on how its rate was chosen speaks of the SLO's headroom, not of this.)
 */
static void load_against_capacity(struct assay_text *t, const cJSON *r, const cJSON *b)
{
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(b, "runs");
    const cJSON *run0 = cJSON_GetArrayItem(runs, 0);
    double offered = assay_json_num(run0, "offered_rate");
    double achieved = assay_json_num(b, "spread.achieved_rate.median");
    double capacity = assay_json_num(r, "seed_table.capacity");
    if (!isfinite(offered) || assay_json_bool(run0, "has_offered_rate") != 1) {
        return;
    }
    if (isfinite(capacity) && capacity > 0) {
        if (offered > capacity) {
            assay_text_printf(t,
                              "<p class=\"load\"><b>Above capacity:</b> %.3g req/s offered, more than "
                              "the %.3g req/s the engine served when the whole workload arrived at "
                              "once (<a href=\"#seed-table\">the seed&rsquo;s table</a>), so requests "
                              "queued and every latency "
                              "above includes the queue.</p>\n",
                              offered, capacity);
        } else {
            assay_text_printf(t,
                              "<p class=\"load\"><b>Below capacity:</b> %.3g req/s offered, less "
                              "than the %.3g req/s the engine served when the whole workload "
                              "arrived at once (<a href=\"#seed-table\">the seed&rsquo;s "
                              "table</a>).</p>\n",
                              offered, capacity);
        }
    }
    if (isfinite(achieved) && achieved < 0.9 * offered) {
        assay_text_printf(t,
                          "<p class=\"load\">The achieved rate, %.3g req/s, is below the %.3g "
                          "offered: over %g requests it also counts the time the last of them "
                          "take to finish after the schedule ends, so it falls short of the "
                          "offered rate whether or not a queue built.</p>\n",
                          achieved, offered, assay_json_num(run0, "n_requests"));
    }
}

static void rates_table(struct assay_text *t, const cJSON *b)
{
    const cJSON *spread = cJSON_GetObjectItemCaseSensitive(b, "spread");
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(b, "runs");
    const cJSON *run0 = cJSON_GetArrayItem(runs, 0);
    double offered = assay_json_num(run0, "offered_rate");
    assay_text_puts(t, "<h3>Rates and goodput</h3><table><tr><th>Figure</th><th>median</th>"
                       "<th>min</th><th>max</th></tr>\n");
    char x[32];
    if (assay_json_bool(run0, "has_offered_rate") == 0) {
        assay_text_puts(t, "<tr><td>offered req/s</td><td colspan=\"3\">none: a closed loop has no "
                           "arrival process</td></tr>\n");
    } else {
        assay_text_printf(t, "<tr><td>offered req/s</td><td class=\"num\" colspan=\"3\">%s</td></tr>\n",
                          assay_text_num(x, sizeof x, offered, 4));
    }
    static const char *const keys[] = {"achieved_rate", "tokens_per_s", "goodput_fraction",
                                       "goodput_rate"};
    static const char *const names[] = {"achieved req/s", "output tokens/s", "goodput (share)",
                                        "goodput req/s"};
    for (int i = 0; i < 4; i++) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(spread, keys[i]);
        assay_text_printf(t, "<tr><td>%s</td>", names[i]);
        if (i == 2) {
            assay_html_td_pct(t, assay_json_num(s, "median"));
            assay_html_td_pct(t, assay_json_num(s, "min"));
            assay_html_td_pct(t, assay_json_num(s, "max"));
        } else {
            assay_html_td_rate(t, assay_json_num(s, "median"));
            assay_html_td_rate(t, assay_json_num(s, "min"));
            assay_html_td_rate(t, assay_json_num(s, "max"));
        }
        assay_text_puts(t, "</tr>\n");
    }
    assay_text_puts(t, "</table>\n");
}

static void runs_table(struct assay_text *t, const cJSON *b)
{
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(b, "runs");
    assay_text_puts(t, "<h3>Runs</h3><table><tr><th>#</th><th>seed</th><th>requests</th>"
                       "<th>outcomes (ok/error/rejected/aborted/lost/unsent)</th>"
                       "<th>offered req/s</th><th>schedule req/s</th><th>achieved req/s</th>"
                       "<th>tokens/s</th><th>goodput</th><th>TTFT p50</th><th>TTFT p99</th>"
                       "<th>E2E p99</th><th>max in flight</th><th>duration</th><th>status</th></tr>\n");
    int i = 0;
    const cJSON *run;
    cJSON_ArrayForEach(run, runs)
    {
        assay_text_printf(t, "<tr><td class=\"num\">%d</td>", ++i);
        assay_html_td_num(t, assay_json_num(run, "seed"), 20);
        assay_html_td_num(t, assay_json_num(run, "n_requests"), 10);
        assay_text_printf(t, "<td class=\"num\">%g/%g/%g/%g/%g/%g</td>",
                          assay_json_num(run, "outcomes.ok"), assay_json_num(run, "outcomes.error"),
                          assay_json_num(run, "outcomes.rejected"),
                          assay_json_num(run, "outcomes.aborted"),
                          assay_json_num(run, "outcomes.lost"), assay_json_num(run, "outcomes.unsent"));
        assay_html_td_rate(t, assay_json_num(run, "offered_rate"));
        assay_html_td_rate(t, assay_json_num(run, "schedule_rate"));
        assay_html_td_rate(t, assay_json_num(run, "achieved_rate"));
        assay_html_td_rate(t, assay_json_num(run, "tokens_per_s"));
        assay_html_td_pct(t, assay_json_num(run, "goodput.fraction"));
        assay_html_td_sec(t, assay_json_num(run, "ttft.p50"));
        assay_html_td_sec(t, assay_json_num(run, "ttft.p99"));
        assay_html_td_sec(t, assay_json_num(run, "e2e.p99"));
        assay_html_td_num(t, assay_json_num(run, "max_in_flight"), 10);
        assay_html_td_sec(t, assay_json_num(run, "duration_s"));
        const char *status = assay_json_str(run, "adapter_status", "ok");
        bool timed_out = assay_json_bool(run, "timed_out") == 1;
        assay_text_puts(t, "<td>");
        assay_html_esc(t, timed_out ? "timed out" : status);
        assay_text_puts(t, "</td></tr>\n");
    }
    assay_text_puts(t, "</table>\n");
}

static void sufficiency_table(struct assay_text *t, const cJSON *b)
{
    const cJSON *run0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(b, "runs"), 0);
    if (!cJSON_IsObject(run0)) {
        return;
    }
    assay_text_printf(t,
                      "<h3>Sufficiency</h3><p class=\"muted\">Whether one run holds enough samples "
                      "to bound each percentile from above at %g%% confidence (a LoadGen-style "
                      "binomial bound: the k-th smallest sample is an upper bound when "
                      "P(Binomial(n, q) &le; k&minus;1) &ge; %g). A figure marked &#10007; is a "
                      "point estimate the sample cannot bound; n<sub>min</sub> is the sample it "
                      "would need.</p>\n",
                      100 * assay_json_num(b, "sufficiency_confidence"),
                      assay_json_num(b, "sufficiency_confidence"));
    assay_text_puts(t, "<table><tr><th>Metric</th><th>n</th>");
    for (int i = 0; i < 4; i++) {
        assay_text_printf(t, "<th>%s</th>", pctl[i]);
    }
    assay_text_puts(t, "</tr>\n");
    for (int m = 0; m < 4; m++) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(run0, metrics[m]);
        if (!cJSON_IsObject(d)) {
            continue;
        }
        assay_text_printf(t, "<tr><td>%s</td>", metric_names[m]);
        assay_html_td_num(t, assay_json_num(d, "n"), 10);
        for (int i = 0; i < 4; i++) {
            char path[64], ub[32];
            snprintf(path, sizeof path, "sufficiency.%s", pctl[i]);
            const cJSON *s = assay_json_path(d, path);
            int ok = assay_json_bool(s, "sufficient");
            if (ok == 1) {
                assay_text_printf(t, "<td class=\"num\">&#10003; &le; %s</td>",
                                  assay_text_seconds(ub, sizeof ub, assay_json_num(s, "upper_bound")));
            } else {
                assay_text_printf(t, "<td class=\"num\">&#10007; n<sub>min</sub> %g</td>",
                                  assay_json_num(s, "n_min"));
            }
        }
        assay_text_puts(t, "</tr>\n");
    }
    assay_text_puts(t, "</table>\n");
}

/* The lateness histogram summed over runs (bins have fixed edges). */
static void lateness_plot(struct assay_text *t, const cJSON *b)
{
    enum { MAXB = 64 };
    double lo[MAXB], hi[MAXB], count[MAXB];
    size_t n = 0;
    const cJSON *run;
    cJSON_ArrayForEach(run, cJSON_GetObjectItemCaseSensitive(b, "runs"))
    {
        const cJSON *bin;
        cJSON_ArrayForEach(bin, cJSON_GetObjectItemCaseSensitive(run, "lateness_histogram"))
        {
            double l = assay_json_num(bin, "lo_s"), h = assay_json_num(bin, "hi_s");
            double c = assay_json_num(bin, "count");
            if (!isfinite(h)) {
                h = isfinite(l) && l > 0 ? l * 10.0 : NAN; /* the open-ended last bin */
            }
            size_t k = 0;
            while (k < n && lo[k] != l) {
                k++;
            }
            if (k == n) {
                if (n == MAXB) {
                    continue;
                }
                lo[n] = l;
                hi[n] = h;
                count[n] = 0;
                n++;
            }
            count[k] += isfinite(c) ? c : 0;
        }
    }
    if (n == 0) {
        return;
    }
    for (size_t k = 0; k < n; k++) {
        if (!(lo[k] > 0)) {
            lo[k] = hi[k] / 10.0; /* [0, 1 us): drawn from 0.1 us */
        }
    }
    struct assay_plot_series s = {.name = "requests", .x = lo, .x2 = hi, .y = count, .n = n,
                                  .style = ASSAY_PLOT_BARS, .color = 0};
    struct assay_plot p = assay_plot_default();
    p.title = "Generator lateness (hand-in minus scheduled), all runs";
    p.x_label = "lateness";
    p.y_label = "requests";
    p.x_log = true;
    p.x_unit = ASSAY_PLOT_UNIT_SECONDS;
    p.y_min = 0;
    p.series = &s;
    p.n_series = 1;
    p.caption = "How late the open-loop generator handed each request to the engine (log bins, "
                "four per decade). Latencies are measured from the schedule, so this delay is "
                "charged to the engine's figures as queueing would be; it is stated so that a "
                "slow generator cannot pass unseen.";
    assay_plot_svg(t, &p);
}

static void benchmark_cdf_plot(struct assay_text *t, const cJSON *b)
{
    const cJSON *spread = cJSON_GetObjectItemCaseSensitive(b, "spread");
    double x[4][CDF_MAX], y[4][CDF_MAX];
    struct assay_plot_series s[4];
    size_t n = 0;
    for (int m = 0; m < 4; m++) {
        size_t k = cdf_points(cJSON_GetObjectItemCaseSensitive(spread, metrics[m]), true, x[n], y[n]);
        if (k == 0) {
            continue;
        }
        s[n] = (struct assay_plot_series){.name = metric_names[m], .x = x[n], .y = y[n], .n = k,
                                          .style = k > 10 ? ASSAY_PLOT_LINE : ASSAY_PLOT_LINE_POINTS,
                                          .color = m};
        n++;
    }
    struct assay_plot p = assay_plot_default();
    p.title = "Latency CDF of the benchmark (median run)";
    p.x_label = "latency";
    p.y_label = "fraction of requests at or below";
    p.x_log = true;
    p.x_unit = ASSAY_PLOT_UNIT_SECONDS;
    p.y_unit = ASSAY_PLOT_UNIT_PERCENT;
    p.y_min = 0.5;
    p.y_max = 1.0;
    p.series = s;
    p.n_series = n;
    p.caption = "Drawn through the quantiles at 50%, 51%, ..., 100% (or, in older reports, the "
                "reported percentiles), the median over runs of each.";
    assay_plot_svg(t, &p);
}

bool assay_html_has_benchmark(const cJSON *r)
{
    return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "benchmark"));
}

void assay_html_benchmark(struct assay_text *t, const cJSON *r)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "benchmark");
    if (!cJSON_IsObject(b)) {
        return; /* no empty section: the nav leaves it out too */
    }
    assay_text_puts(t, "<section id=\"benchmark\"><h2>Benchmark</h2>\n");
    assay_text_puts(t, "<p>");
    describe_generator(t, b);
    assay_text_puts(t, "</p>\n");
    describe_workload(t, cJSON_GetObjectItemCaseSensitive(b, "workload"));
    describe_slo(t, cJSON_GetObjectItemCaseSensitive(b, "slo"));
    percentile_table(t, b);
    rates_table(t, b);
    load_against_capacity(t, r, b);
    runs_table(t, b);
    sufficiency_table(t, b);
    assay_text_puts(t, "<h3>Plots</h3>\n");
    benchmark_cdf_plot(t, b);
    lateness_plot(t, b);
    assay_text_puts(t, "</section>\n");
}

/* ---- the seed's table ----------------------------------------------------- */

static void conditions(struct assay_text *t, const cJSON *r, const cJSON *st)
{
    const cJSON *stamp = cJSON_GetObjectItemCaseSensitive(r, "stamp");
    const cJSON *row0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(st, "rows"), 0);
    const cJSON *bench = cJSON_GetObjectItemCaseSensitive(row0, "bench");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(bench, "workload");
    const cJSON *slo = cJSON_GetObjectItemCaseSensitive(bench, "slo");
    char a[32], b2[32];
    assay_text_puts(t, "<p class=\"para\"><b>Conditions:</b> ");
    assay_html_esc(t, assay_json_str(stamp, "engine.model.name", "?"));
    assay_text_printf(t, " (%.0f params), engine <code>", assay_json_num(stamp, "engine.model.n_params"));
    assay_html_esc(t, assay_json_str(stamp, "engine.spec", "?"));
    assay_text_printf(t, "</code>, %g &times; ", assay_json_num(stamp, "hardware.cores_available"));
    assay_html_esc(t, assay_json_str(stamp, "hardware.cpu_model", "?"));
    assay_text_puts(t, ", OpenBLAS ");
    assay_html_esc(t, assay_json_str(stamp, "libraries.openblas.core", "?"));
    assay_text_printf(t, " (%g threads), %g requests (", assay_json_num(stamp, "libraries.openblas.threads"),
                      assay_json_num(w, "n_requests"));
    assay_html_esc(t, assay_json_str(w, "lengths", "lengths not stated"));
    assay_text_printf(t,
                      "), the same workload under every generator, %g warm-up requests discarded "
                      "per run, %g run(s) per row (medians shown)",
                      assay_json_num(bench, "generator.warmup"), assay_json_num(bench, "spread.n_runs"));
    if (cJSON_IsObject(slo)) {
        assay_text_printf(t, ", SLO TTFT &le; %s and TPOT &le; %s",
                          assay_text_seconds(a, sizeof a, assay_json_num(slo, "ttft_s")),
                          assay_text_seconds(b2, sizeof b2, assay_json_num(slo, "tpot_s")));
    }
    assay_text_puts(t, ", measured ");
    assay_html_esc(t, assay_json_str(stamp, "time_utc", "?"));
    assay_text_puts(t, ".</p>\n");
}

static void seed_cdf_plot(struct assay_text *t, const cJSON *st, const char *metric,
                          const char *title)
{
    enum { MAXR = 16 };
    double x[MAXR][CDF_MAX], y[MAXR][CDF_MAX];
    char names[MAXR][80];
    struct assay_plot_series s[MAXR];
    size_t n = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(st, "rows"))
    {
        if (n == MAXR) {
            break;
        }
        char path[64];
        snprintf(path, sizeof path, "bench.spread.%s", metric);
        size_t k = cdf_points(assay_json_path(row, path), true, x[n], y[n]);
        bool open = strcmp(assay_json_str(row, "generator", ""), "open") == 0;
        snprintf(names[n], sizeof names[n], "%s: %s", open ? "open" : "closed",
                 assay_json_str(row, "setting", ""));
        s[n] = (struct assay_plot_series){.name = names[n], .x = x[n], .y = y[n], .n = k,
                                          .style = k > 10 ? ASSAY_PLOT_LINE : ASSAY_PLOT_LINE_POINTS,
                                          .color = (int)n, .dashed = !open};
        n++;
    }
    struct assay_plot p = assay_plot_default();
    p.title = title;
    p.x_label = "latency (log scale)";
    p.y_label = "fraction of requests at or below";
    p.x_log = true;
    p.x_unit = ASSAY_PLOT_UNIT_SECONDS;
    p.y_unit = ASSAY_PLOT_UNIT_PERCENT;
    p.y_min = 0.5;
    p.y_max = 1.0;
    p.series = s;
    p.n_series = n;
    p.caption = "One line per generator setting (closed loops dashed), drawn through the "
                "quantiles at 50%, 51%, ..., 100% (or the reported percentiles in older "
                "reports), medians over runs.";
    assay_plot_svg(t, &p);
}

bool assay_html_has_seed_table(const cJSON *r)
{
    return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "seed_table"));
}

void assay_html_seed_table(struct assay_text *t, const cJSON *r)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "seed_table");
    if (!cJSON_IsObject(st)) {
        return;
    }
    assay_text_puts(t, "<section id=\"seed-table\"><h2>The seed&rsquo;s table: one engine, two "
                       "load generators</h2>\n<p class=\"para about\">");
    assay_html_esc(t, ASSAY_REPORT_SEED_TABLE_ABOUT);
    assay_text_puts(t, "</p>\n");
    assay_text_puts(t, "<table><tr><th>Generator</th><th>Setting</th><th>TTFT p50</th>"
                       "<th>TTFT p95</th><th>TTFT p99</th><th>Offered req/s</th>"
                       "<th>Achieved req/s</th><th>Goodput</th><th>E2E p99</th></tr>\n");
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(st, "rows"))
    {
        bool open = strcmp(assay_json_str(row, "generator", ""), "open") == 0;
        assay_text_puts(t, "<tr>");
        assay_html_td_text(t, open ? "Open loop" : "Closed loop");
        assay_html_td_text(t, assay_json_str(row, "setting", ""));
        assay_html_td_sec(t, assay_json_num(row, "ttft_p50"));
        assay_html_td_sec(t, assay_json_num(row, "ttft_p95"));
        assay_html_td_sec(t, assay_json_num(row, "ttft_p99"));
        if (open) {
            assay_html_td_rate(t, assay_json_num(row, "offered_rate"));
        } else {
            assay_text_puts(t, "<td class=\"num\">none</td>");
        }
        assay_html_td_rate(t, assay_json_num(row, "achieved_rate"));
        assay_html_td_pct(t, assay_json_num(row, "bench.spread.goodput_fraction.median"));
        assay_html_td_sec(t, assay_json_num(row, "bench.spread.e2e.p99.median"));
        assay_text_puts(t, "</tr>\n");
    }
    assay_text_puts(t, "</table>\n");
    conditions(t, r, st);
    assay_text_puts(t, "<p class=\"para\">");
    assay_html_esc(t, assay_json_str(st, "explanation", ""));
    assay_text_puts(t, "</p>\n");
    seed_cdf_plot(t, st, "ttft", "TTFT CDF per generator");
    seed_cdf_plot(t, st, "e2e", "E2E latency CDF per generator");
    assay_text_puts(t, "</section>\n");
}

/* ---- rate sweep ------------------------------------------------------------ */

/* Open-loop points (offered rate, a figure) from the benchmark's runs and
 * the seed table's open rows; path is a run member ("ttft.p99"). */
static size_t open_points(const cJSON *r, const char *path, double *x, double *y, size_t cap)
{
    size_t n = 0;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "benchmark");
    const cJSON *run;
    cJSON_ArrayForEach(run, cJSON_GetObjectItemCaseSensitive(b, "runs"))
    {
        if (n < cap && assay_json_bool(run, "has_offered_rate") == 1) {
            x[n] = assay_json_num(run, "offered_rate");
            y[n] = assay_json_num(run, path);
            n++;
        }
    }
    const cJSON *row;
    cJSON_ArrayForEach(row, assay_json_path(r, "seed_table.rows"))
    {
        cJSON_ArrayForEach(run, assay_json_path(row, "bench.runs"))
        {
            if (n < cap && assay_json_bool(run, "has_offered_rate") == 1) {
                x[n] = assay_json_num(run, "offered_rate");
                y[n] = assay_json_num(run, path);
                n++;
            }
        }
    }
    return n;
}

static void sort_xy(double *x, double *y, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        for (size_t j = i; j > 0 && x[j - 1] > x[j]; j--) {
            double tx = x[j], ty = y[j];
            x[j] = x[j - 1];
            y[j] = y[j - 1];
            x[j - 1] = tx;
            y[j - 1] = ty;
        }
    }
}

bool assay_html_has_sweep(const cJSON *r)
{
    double x, y;
    return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "rate_sweep")) ||
           open_points(r, "goodput.fraction", &x, &y, 1) > 0;
}

void assay_html_sweep(struct assay_text *t, const cJSON *r)
{
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(r, "rate_sweep");
    if (!assay_html_has_sweep(r)) {
        return; /* neither a sweep nor an open-loop run to plot */
    }
    assay_text_puts(t, "<section id=\"sweep\"><h2>Rate sweep</h2>\n");
    enum { CAP = 128 };
    double px_[CAP], py_[CAP], bx[CAP], by[CAP], p50x[CAP], p50y[CAP], p99x[CAP], p99y[CAP];
    double sx[CAP], s50[CAP], s99[CAP], sx99[CAP];
    size_t np = 0, ns = 0;
    if (cJSON_IsObject(sw)) {
        assay_text_puts(t, "<p class=\"para\">");
        assay_html_esc(t, assay_json_str(sw, "explanation", ""));
        assay_text_puts(t, "</p>\n<table><tr><th>Probe</th><th>Offered req/s</th>"
                           "<th>Goodput</th><th>Result</th></tr>\n");
        int i = 0;
        const cJSON *pr;
        cJSON_ArrayForEach(pr, cJSON_GetObjectItemCaseSensitive(sw, "probes"))
        {
            assay_text_printf(t, "<tr><td class=\"num\">%d</td>", ++i);
            assay_html_td_rate(t, assay_json_num(pr, "rate"));
            assay_html_td_pct(t, assay_json_num(pr, "goodput_fraction"));
            assay_text_puts(t, "<td>");
            assay_html_verdict_span(t, assay_json_bool(pr, "pass") == 1 ? "PASS" : "FAIL");
            assay_text_puts(t, "</td></tr>\n");
            if (np < CAP) {
                px_[np] = assay_json_num(pr, "rate");
                py_[np] = assay_json_num(pr, "goodput_fraction");
                np++;
            }
            double ttft50 = assay_json_num(pr, "ttft_p50"), ttft99 = assay_json_num(pr, "ttft_p99");
            if (ns < CAP && isfinite(ttft50) && isfinite(ttft99)) {
                sx[ns] = assay_json_num(pr, "rate");
                s50[ns] = ttft50;
                s99[ns] = ttft99;
                ns++;
            }
        }
        assay_text_puts(t, "</table>\n");
        const char *status = assay_json_str(sw, "status", "ok");
        if (strcmp(status, "ok") != 0) {
            assay_text_puts(t, "<p><b>The sweep stopped early:</b> ");
            assay_html_esc(t, status);
            assay_text_puts(t, "</p>\n");
        }
    } else {
        assay_text_puts(t, "<p class=\"muted\">No sweep in this report; the plots below show the "
                           "open-loop runs it has.</p>\n");
    }
    sort_xy(px_, py_, np);
    size_t nb = open_points(r, "goodput.fraction", bx, by, CAP);
    size_t n50 = 0, n99 = 0;
    if (ns > 0) {
        /* The sweep probes: one run per offered rate, on one schedule. */
        memcpy(sx99, sx, sizeof(double) * ns);
        sort_xy(sx, s50, ns);
        sort_xy(sx99, s99, ns);
        memcpy(p50x, sx, sizeof(double) * ns);
        memcpy(p50y, s50, sizeof(double) * ns);
        memcpy(p99x, sx99, sizeof(double) * ns);
        memcpy(p99y, s99, sizeof(double) * ns);
        n50 = n99 = ns;
    } else {
        n50 = open_points(r, "ttft.p50", p50x, p50y, CAP);
        n99 = open_points(r, "ttft.p99", p99x, p99y, CAP);
        sort_xy(p50x, p50y, n50);
        sort_xy(p99x, p99y, n99);
    }

    struct assay_plot_series g[2] = {
        {.name = "sweep probes", .x = px_, .y = py_, .n = np, .style = ASSAY_PLOT_LINE_POINTS,
         .color = 0},
        {.name = "other open-loop runs", .x = bx, .y = by, .n = nb,
         .style = ASSAY_PLOT_POINTS, .color = 1},
    };
    struct assay_plot p = assay_plot_default();
    p.title = "Goodput against offered rate";
    p.x_label = "offered rate, req/s (log scale)";
    p.y_label = "goodput (share of requests within the SLO)";
    p.x_log = true;
    p.y_unit = ASSAY_PLOT_UNIT_PERCENT;
    p.y_min = 0.0;
    p.y_max = 1.0;
    double target = assay_json_num(sw, "target");
    p.y_ref = target;
    char ref_label[32];
    snprintf(ref_label, sizeof ref_label, "target %g%%", 100 * target);
    p.y_ref_label = ref_label;
    p.series = g;
    p.n_series = 2;
    p.caption = "Each point is one open-loop run at a stated offered rate; goodput counts requests "
                "that finished within both SLO bounds.";
    assay_plot_svg(t, &p);

    struct assay_plot_series l[2] = {
        {.name = "TTFT p50", .x = p50x, .y = p50y, .n = n50,
         .style = ns > 0 ? ASSAY_PLOT_LINE_POINTS : ASSAY_PLOT_POINTS, .color = 0},
        {.name = "TTFT p99", .x = p99x, .y = p99y, .n = n99,
         .style = ns > 0 ? ASSAY_PLOT_LINE_POINTS : ASSAY_PLOT_POINTS, .color = 1},
    };
    struct assay_plot q = assay_plot_default();
    q.title = "TTFT against offered rate";
    q.x_label = "offered rate, req/s (log scale)";
    q.y_label = "TTFT (log scale)";
    q.x_log = true;
    q.y_log = true;
    q.y_unit = ASSAY_PLOT_UNIT_SECONDS;
    q.series = l;
    q.n_series = 2;
    q.caption = ns > 0 ? "One point per sweep probe (one open-loop run per offered rate, the "
                         "same schedule scaled): past the engine's capacity the queue, and with it "
                         "the tail, grows without bound."
                       : "One point per open-loop run in this report (the benchmark's and the seed "
                         "table's open row): past the engine's capacity the queue, and with it the "
                         "tail, grows without bound.";
    assay_plot_svg(t, &q);
    assay_text_puts(t, "</section>\n");
}
