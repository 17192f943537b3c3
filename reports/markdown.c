/*
 * markdown.c - the Markdown rendering of a report (markdown.h):
 * assay_report_render_markdown writes the verdict table, the failures with
 * their reproducers, the benchmark, the seed table, the rate sweep, the
 * audit and compare sections and a stamp summary from the report's JSON.
 * write.c calls it for every report written, and `assay report` prints it.
 */
#include "markdown.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "audit_report.h"
#include "compare_report.h"
#include "outcome.h"
#include "report.h"
#include "schema.h"
#include "text.h"

static const char *const pctl[] = {"p50", "p90", "p95", "p99", "max"};
static const char *const metrics[] = {"ttft", "tpot", "itl", "e2e", "lateness"};
static const char *const metric_names[] = {"TTFT", "TPOT", "ITL", "E2E", "Generator lateness"};

static void md(struct assay_text *t, const char *s)
{
    assay_text_md(t, s != NULL ? s : "");
}

static const char *sec(char *buf, size_t size, double v)
{
    return assay_text_seconds(buf, size, v);
}

static void pct(struct assay_text *t, double v)
{
    if (isfinite(v)) {
        assay_text_printf(t, "%.1f%%", 100 * v);
    } else {
        assay_text_puts(t, "\xe2\x80\x94");
    }
}

/* The title with the run's verdict in words (a compare's correctness and
 * speed; a run mostly skipped or short of --require-checks says so), the
 * counts, the exit status and what made the report. */
static void header(struct assay_text *t, const cJSON *r)
{
    const cJSON *stamp = cJSON_GetObjectItemCaseSensitive(r, "stamp");
    char title[200], line[256], req[256];
    int status = assay_report_exit_status(r);
    struct assay_counts c;
    assay_counts_of_report(r, &c);
    assay_text_printf(t, "# assay %s: %s\n\n", assay_json_str(r, "command", ""),
                      assay_report_title(r, title, sizeof title));
    if (c.checks > 0) {
        assay_text_printf(t, "**%s**\n\n", assay_counts_line(&c, line, sizeof line));
    } else if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "compare"))) {
        assay_text_puts(t, "**No correctness check was run.**\n\n");
    }
    if (c.checks > 0 && assay_counts_mostly_skipped(&c)) {
        assay_text_printf(t,
                          "> **Mostly skipped:** %lld of the %lld checks were skipped, which "
                          "checks nothing; only %lld ran.%s\n\n",
                          (long long)c.skip, (long long)c.checks, (long long)assay_counts_ran(&c),
                          cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "require_checks"))
                              ? ""
                              : " `--require-checks N` fails a run in which fewer than N checks "
                                "ran (exit status 4).");
    }
    assay_report_require_text(r, req, sizeof req);
    if (req[0] != '\0') {
        md(t, req);
        assay_text_puts(t, ".\n\n");
    }
    assay_text_printf(t, "Exit status %d: %s.\n\n", status, assay_exit_status_str(status));
    assay_text_puts(t, "`");
    md(t, assay_json_str(r, "command_line", ""));
    assay_text_puts(t, "` · ");
    md(t, assay_json_str(r, "created_utc", ""));
    double dur = assay_json_num(r, "duration_s");
    if (isfinite(dur)) {
        assay_text_printf(t, " · %.1f s", dur);
    }
    assay_text_puts(t, " · engine `");
    md(t, assay_json_str(stamp, "engine.spec", "(none)"));
    assay_text_puts(t, "`\n\n");
}

/* A check's line of the table (its verdict, what fired, its figures). */
static void verdict_row(struct assay_text *t, const cJSON *c)
{
    char fig[512], s[32];
    const char *v = assay_json_str(c, "verdict", "");
    assay_text_puts(t, "| `");
    md(t, assay_json_str(c, "name", ""));
    assay_text_puts(t, "` | ");
    md(t, assay_json_str(c, "family", ""));
    const char *fired = assay_report_check_fired(c);
    assay_text_printf(t, " | %s%s%s%s%s%s | ", strcmp(v, "PASS") == 0 ? "" : "**", v,
                      strcmp(v, "PASS") == 0 ? "" : "**", fired[0] != '\0' ? " (" : "", fired,
                      fired[0] != '\0' ? ")" : "");
    md(t, assay_report_check_figures(c, fig, sizeof fig));
    assay_text_printf(t, " | %s |\n", assay_text_num(s, sizeof s, assay_json_num(c, "seconds"), 3));
}

/* The names of a row's checks: `a`, `b`, `c`. */
static void row_names(struct assay_text *t, const cJSON *checks, const struct assay_check_row *row)
{
    int k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks)
    {
        if (assay_check_row_has(row, c)) {
            assay_text_puts(t, k++ > 0 ? ", `" : "`");
            md(t, assay_json_str(c, "name", ""));
            assay_text_puts(t, "`");
        }
    }
}

/* The verdict table, failures first; the SKIPs that share a reason in one
 * row ("29 checks skipped"), so that a mostly skipped plan does not bury
 * what failed. */
static void verdict_table(struct assay_text *t, const cJSON *r)
{
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
    int n_checks = cJSON_GetArraySize(checks);
    if (n_checks == 0) {
        return;
    }
    struct assay_check_row *rows = assay_calloc((size_t)n_checks, sizeof *rows);
    if (rows == NULL) {
        t->status = ASSAY_ERR_NOMEM; /* sticky, as a failed append's */
        return;
    }
    size_t n_rows = assay_report_check_rows(r, rows, (size_t)n_checks);
    assay_text_puts(t, "## Verdict\n\n| Check | Family | Verdict | Figures | s |\n"
                       "|---|---|---|---|--:|\n");
    for (size_t i = 0; i < n_rows; i++) {
        if (rows[i].n == 1) {
            verdict_row(t, rows[i].check);
            continue;
        }
        assay_text_printf(t, "| %d checks: ", (int)rows[i].n);
        row_names(t, checks, &rows[i]);
        assay_text_printf(t, " | %s | **SKIP** | skipped (below) | |\n",
                          assay_json_str(rows[i].check, "family", ""));
    }
    assay_text_puts(t, "\n");
    assay_free(rows);
}

static void failures(struct assay_text *t, const cJSON *r)
{
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
    int n_fail = 0, n_skip = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks)
    {
        const char *v = assay_json_str(c, "verdict", "");
        n_fail += strcmp(v, "FAIL") == 0 || strcmp(v, "ERROR") == 0;
        n_skip += strcmp(v, "SKIP") == 0;
    }
    if (n_fail > 0) {
        assay_text_puts(t, "## Failures\n\n");
        cJSON_ArrayForEach(c, checks)
        {
            const char *v = assay_json_str(c, "verdict", "");
            if (strcmp(v, "FAIL") != 0 && strcmp(v, "ERROR") != 0) {
                continue;
            }
            assay_text_printf(t, "### %s `", v);
            md(t, assay_json_str(c, "name", ""));
            assay_text_puts(t, "`\n\n");
            md(t, assay_json_str(c, "failure", ""));
            assay_text_puts(t, "\n\n");
            const char *repro = assay_json_str(c, "repro", "");
            if (repro[0] != '\0') {
                /* A fenced block shows the command verbatim; a fence
                 * inside it is impossible in a one-line command. */
                assay_text_puts(t, "Reproduce:\n\n```sh\n");
                assay_text_puts(t, repro);
                assay_text_puts(t, "\n```\n\n");
            }
        }
    }
    if (n_skip == 0) {
        return;
    }
    struct assay_check_row *rows = assay_calloc((size_t)cJSON_GetArraySize(checks), sizeof *rows);
    if (rows == NULL) {
        t->status = ASSAY_ERR_NOMEM;
        return;
    }
    size_t n_rows = assay_report_check_rows(r, rows, (size_t)cJSON_GetArraySize(checks));
    assay_text_puts(t, "## Skipped\n\n");
    for (size_t i = 0; i < n_rows; i++) {
        if (strcmp(assay_json_str(rows[i].check, "verdict", ""), "SKIP") != 0) {
            continue;
        }
        assay_text_puts(t, "- ");
        if (rows[i].n > 1) {
            assay_text_printf(t, "%d checks (", (int)rows[i].n);
            row_names(t, checks, &rows[i]);
            assay_text_puts(t, ")");
        } else {
            row_names(t, checks, &rows[i]);
        }
        assay_text_puts(t, ": ");
        md(t, assay_json_str(rows[i].check, "failure", ""));
        assay_text_puts(t, "\n");
    }
    assay_text_puts(t, "\n");
    assay_free(rows);
}

static void benchmark(struct assay_text *t, const cJSON *r)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "benchmark");
    if (!cJSON_IsObject(b)) {
        return;
    }
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(b, "generator");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(b, "workload");
    const cJSON *slo = cJSON_GetObjectItemCaseSensitive(b, "slo");
    const cJSON *spread = cJSON_GetObjectItemCaseSensitive(b, "spread");
    char a[32], c[32], d[32], e[32];
    assay_text_puts(t, "## Benchmark\n\n");
    if (strcmp(assay_json_str(g, "kind", ""), "open") == 0) {
        assay_text_printf(t, "- Generator: open loop, %s arrivals", assay_json_str(g, "arrival", "?"));
        if (isfinite(assay_json_num(g, "rate"))) {
            assay_text_printf(t, " at %s req/s offered",
                              assay_text_num(a, sizeof a, assay_json_num(g, "rate"), 4));
        }
        assay_text_puts(t, "; latency from the scheduled arrival\n");
    } else {
        assay_text_printf(t, "- Generator: closed loop, %g workers (no offered rate)\n",
                          assay_json_num(g, "workers"));
    }
    assay_text_printf(t, "- Runs: %g, each with %g warm-up requests discarded\n",
                      assay_json_num(spread, "n_runs"), assay_json_num(g, "warmup"));
    if (cJSON_IsObject(w)) {
        assay_text_puts(t, "- Workload: `");
        md(t, assay_json_str(w, "name", ""));
        assay_text_printf(t, "`, %g requests; ", assay_json_num(w, "n_requests"));
        md(t, assay_json_str(w, "lengths", "lengths not stated"));
        assay_text_printf(t, " (prompt p50 %g, p90 %g, max %g; output p50 %g, p90 %g, max %g)\n",
                          assay_json_num(w, "prompt_len.p50"), assay_json_num(w, "prompt_len.p90"),
                          assay_json_num(w, "prompt_len.max"), assay_json_num(w, "output_len.p50"),
                          assay_json_num(w, "output_len.p90"), assay_json_num(w, "output_len.max"));
    }
    if (cJSON_IsObject(slo)) {
        assay_text_printf(t, "- SLO: TTFT <= %s, TPOT <= %s\n",
                          sec(a, sizeof a, assay_json_num(slo, "ttft_s")),
                          sec(c, sizeof c, assay_json_num(slo, "tpot_s")));
    } else {
        assay_text_puts(t, "- SLO: none stated\n");
    }
    const cJSON *run0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(b, "runs"), 0);
    if (assay_json_bool(run0, "has_offered_rate") == 1) {
        assay_text_printf(t, "- Offered %s req/s; achieved %s req/s (min %s, max %s); ",
                          assay_text_num(a, sizeof a, assay_json_num(run0, "offered_rate"), 4),
                          assay_text_num(c, sizeof c, assay_json_num(spread, "achieved_rate.median"), 4),
                          assay_text_num(d, sizeof d, assay_json_num(spread, "achieved_rate.min"), 4),
                          assay_text_num(e, sizeof e, assay_json_num(spread, "achieved_rate.max"), 4));
    } else {
        assay_text_printf(t, "- No offered rate (closed loop); achieved %s req/s; ",
                          assay_text_num(c, sizeof c, assay_json_num(spread, "achieved_rate.median"), 4));
    }
    assay_text_puts(t, "goodput ");
    pct(t, assay_json_num(spread, "goodput_fraction.median"));
    assay_text_printf(t, " (%s req/s); %s output tokens/s\n\n",
                      assay_text_num(a, sizeof a, assay_json_num(spread, "goodput_rate.median"), 4),
                      assay_text_num(c, sizeof c, assay_json_num(spread, "tokens_per_s.median"), 4));
    assay_text_puts(t, "| Metric (median over runs) | p50 | p90 | p95 | p99 | max | p99 min–max |\n"
                       "|---|--:|--:|--:|--:|--:|--:|\n");
    for (int m = 0; m < 5; m++) {
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(spread, metrics[m]);
        if (!cJSON_IsObject(ms)) {
            continue;
        }
        assay_text_printf(t, "| %s |", metric_names[m]);
        for (int i = 0; i < 5; i++) {
            char path[32];
            snprintf(path, sizeof path, "%s.median", pctl[i]);
            assay_text_printf(t, " %s |", sec(a, sizeof a, assay_json_num(ms, path)));
        }
        assay_text_printf(t, " %s – %s |\n", sec(a, sizeof a, assay_json_num(ms, "p99.min")),
                          sec(c, sizeof c, assay_json_num(ms, "p99.max")));
    }
    const cJSON *ttft = cJSON_GetObjectItemCaseSensitive(run0, "ttft");
    if (cJSON_IsObject(ttft)) {
        assay_text_printf(t, "\nSufficiency (per run, %g TTFT samples):", assay_json_num(ttft, "n"));
        for (int i = 0; i < 4; i++) {
            char path[64];
            snprintf(path, sizeof path, "sufficiency.%s", pctl[i]);
            const cJSON *s = assay_json_path(ttft, path);
            assay_text_printf(t, " %s %s (n_min %g)%s", pctl[i],
                              assay_json_bool(s, "sufficient") == 1 ? "bounded" : "NOT bounded",
                              assay_json_num(s, "n_min"), i < 3 ? ";" : ".");
        }
        assay_text_puts(t, "\n");
    }
    assay_text_puts(t, "\n");
}

static void seed_table(struct assay_text *t, const cJSON *r)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "seed_table");
    if (!cJSON_IsObject(st)) {
        return;
    }
    assay_text_puts(t, "## The seed's table\n\n");
    md(t, ASSAY_REPORT_SEED_TABLE_ABOUT);
    assay_text_puts(t, "\n\n| Generator | Setting | TTFT p50 | TTFT p95 | TTFT p99 "
                       "| Offered req/s | Achieved req/s | Goodput |\n"
                       "|---|---|--:|--:|--:|--:|--:|--:|\n");
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(st, "rows"))
    {
        char a[32], b[32], c[32], d[32], e[32];
        bool open = strcmp(assay_json_str(row, "generator", ""), "open") == 0;
        assay_text_printf(t, "| %s | ", open ? "Open loop" : "Closed loop");
        md(t, assay_json_str(row, "setting", ""));
        assay_text_printf(t, " | %s | %s | %s | %s | %s | ",
                          sec(a, sizeof a, assay_json_num(row, "ttft_p50")),
                          sec(b, sizeof b, assay_json_num(row, "ttft_p95")),
                          sec(c, sizeof c, assay_json_num(row, "ttft_p99")),
                          open ? assay_text_num(d, sizeof d, assay_json_num(row, "offered_rate"), 4)
                               : "none",
                          assay_text_num(e, sizeof e, assay_json_num(row, "achieved_rate"), 4));
        pct(t, assay_json_num(row, "bench.spread.goodput_fraction.median"));
        assay_text_puts(t, " |\n");
    }
    assay_text_puts(t, "\n");
    md(t, assay_json_str(st, "explanation", ""));
    assay_text_puts(t, "\n\n");
}

static void sweep(struct assay_text *t, const cJSON *r)
{
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(r, "rate_sweep");
    if (!cJSON_IsObject(sw)) {
        return;
    }
    assay_text_puts(t, "## Rate sweep\n\n");
    md(t, assay_json_str(sw, "explanation", ""));
    assay_text_puts(t, "\n\n| Offered req/s | Goodput | Result |\n|--:|--:|---|\n");
    const cJSON *pr;
    cJSON_ArrayForEach(pr, cJSON_GetObjectItemCaseSensitive(sw, "probes"))
    {
        char a[32];
        assay_text_printf(t, "| %s | ", assay_text_num(a, sizeof a, assay_json_num(pr, "rate"), 4));
        pct(t, assay_json_num(pr, "goodput_fraction"));
        assay_text_printf(t, " | %s |\n", assay_json_bool(pr, "pass") == 1 ? "pass" : "fail");
    }
    assay_text_puts(t, "\n");
}

static void stamp_summary(struct assay_text *t, const cJSON *r)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "stamp");
    assay_text_puts(t, "## Stamp\n\n");
    int dirty = assay_json_bool(s, "assay.git_dirty");
    assay_text_printf(t, "- assay %s, commit `%s`%s, sources `%s` (%g files), %s build\n",
                      assay_json_str(s, "assay.version", "?"), assay_json_str(s, "assay.git_commit", "?"),
                      dirty == 1 ? " (dirty tree)" : dirty == 0 ? " (clean)" : "",
                      assay_json_str(s, "assay.source_sha256", "?"),
                      assay_json_num(s, "assay.source_files"), assay_json_str(s, "assay.build_type", "?"));
    if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(s, "engine"))) {
        assay_text_puts(t, "- Engine `");
        md(t, assay_json_str(s, "engine.spec", ""));
        assay_text_puts(t, "`; model ");
        md(t, assay_json_str(s, "engine.model.name", "?"));
        assay_text_printf(t, " (%.0f params, weights sha256 `%s`)\n",
                          assay_json_num(s, "engine.model.n_params"),
                          assay_json_str(s, "engine.model.weights_sha256", "?"));
        if (cJSON_IsObject(assay_json_path(s, "engine.numerics"))) {
            assay_text_puts(t, "- Numerics: products ");
            md(t, assay_json_str(s, "engine.numerics.products", "?"));
            assay_text_puts(t, "; attention and SwiGLU ");
            md(t, assay_json_str(s, "engine.numerics.attention", "?"));
            assay_text_puts(t, assay_json_bool(s, "engine.numerics.batch_invariant") == 1
                                   ? "; batch invariant"
                                   : "; not batch invariant");
            double q = assay_json_num(s, "engine.numerics.quantized_matrices");
            if (q > 0) {
                assay_text_printf(t, "; %.0f of %.0f matrices read in the file's integer format "
                                     "by products of few rows",
                                  q, assay_json_num(s, "engine.numerics.matrices"));
            }
            assay_text_puts(t, "\n");
        }
    }
    assay_text_puts(t, "- CPU: ");
    md(t, assay_json_str(s, "hardware.cpu_model", "?"));
    assay_text_printf(t, ", %g cores available (%g online), flags",
                      assay_json_num(s, "hardware.cores_available"),
                      assay_json_num(s, "hardware.cores_online"));
    const cJSON *f;
    int k = 0;
    cJSON_ArrayForEach(f, assay_json_path(s, "hardware.flags"))
    {
        assay_text_printf(t, "%s%s", k++ > 0 ? ", " : " ", cJSON_IsString(f) ? f->valuestring : "");
    }
    assay_text_puts(t, k == 0 ? " none listed\n" : "\n");
    assay_text_puts(t, "- Libraries: GSL ");
    md(t, assay_json_str(s, "libraries.gsl.version", "?"));
    assay_text_puts(t, "; ");
    md(t, assay_json_str(s, "libraries.openblas.config", "OpenBLAS ?"));
    assay_text_printf(t, ", core %s, %g threads (", assay_json_str(s, "libraries.openblas.core", "?"),
                      assay_json_num(s, "libraries.openblas.threads"));
    md(t, assay_json_str(s, "libraries.openblas.note", ""));
    const cJSON *env = assay_json_path(s, "libraries.openblas.env");
    const cJSON *var;
    cJSON_ArrayForEach(var, env)
    {
        assay_text_puts(t, "; ");
        md(t, var->string);
        assay_text_puts(t, "=");
        md(t, cJSON_IsString(var) ? var->valuestring : "?");
    }
    assay_text_puts(t, "); cJSON ");
    md(t, assay_json_str(s, "libraries.cjson", "?"));
    assay_text_puts(t, "; cmocka ");
    md(t, assay_json_str(s, "libraries.cmocka", "?"));
    assay_text_puts(t, "; curl ");
    md(t, assay_json_str(s, "libraries.curl", "?"));
    assay_text_puts(t, "\n- Compiler: ");
    md(t, assay_json_str(s, "compiler.id", "?"));
    assay_text_puts(t, " ");
    md(t, assay_json_str(s, "compiler.version", "?"));
    assay_text_puts(t, ", `");
    md(t, assay_json_str(s, "compiler.flags", ""));
    assay_text_puts(t, "`\n- Seeds:");
    const cJSON *seed;
    k = 0;
    cJSON_ArrayForEach(seed, cJSON_GetObjectItemCaseSensitive(s, "seeds"))
    {
        assay_text_printf(t, "%s %s ", k++ > 0 ? "," : "", seed->string != NULL ? seed->string : "");
        if (cJSON_IsNumber(seed)) {
            assay_text_printf(t, "%.17g", seed->valuedouble);
        } else if (cJSON_IsString(seed)) {
            md(t, seed->valuestring);
        }
    }
    assay_text_puts(t, k == 0 ? " none\n" : "\n");
    assay_text_printf(t, "- Stamped %s\n\n", assay_json_str(s, "time_utc", "?"));
}

static void notes(struct assay_text *t, const cJSON *r)
{
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(r, "notes");
    if (cJSON_GetArraySize(ns) == 0) {
        return;
    }
    assay_text_puts(t, "## Notes\n\n");
    const cJSON *n;
    cJSON_ArrayForEach(n, ns)
    {
        assay_text_puts(t, "- ");
        md(t, cJSON_IsString(n) ? n->valuestring : "");
        assay_text_puts(t, "\n");
    }
    assay_text_puts(t, "\n");
}

enum assay_status assay_report_render_markdown(const cJSON *r, char **out, size_t *len)
{
    struct assay_text t;
    assay_text_init(&t);
    header(&t, r);
    verdict_table(&t, r);
    failures(&t, r);
    assay_report_audit_markdown(&t, r);
    assay_report_compare_markdown(&t, r);
    benchmark(&t, r);
    seed_table(&t, r);
    sweep(&t, r);
    stamp_summary(&t, r);
    notes(&t, r);
    assay_text_printf(&t,
                      "_Rendered from the report's JSON (schema %s, version %g); `assay report "
                      "FILE.json` renders it again._\n",
                      assay_json_str(r, "schema", ""), assay_json_num(r, "version"));
    return assay_text_take(&t, out, len);
}
