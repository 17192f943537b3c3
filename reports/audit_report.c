/*
 * audit_report.c - the "audit" member of an `assay audit` report
 * (audit_report.h): assay_report_audit_json builds it from the audit's
 * findings, assay_report_audit_validate checks it when a report is read,
 * and assay_report_audit_markdown / _html render its sections.
 * cli/cmd_audit.c builds it; the Markdown and HTML renderers draw it from
 * the JSON.
 */
#include "audit_report.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../checks/equivalence.h"
#include "../checks/divergence.h"
#include "plot.h"
#include "schema.h"
#include "../core/json_out.h"

/* ---- building --------------------------------------------------------------- */

enum assay_status assay_report_audit_json(const struct assay_audit *a, cJSON *comparison,
                                          cJSON **out)
{
    *out = NULL;
    const struct assay_model *m = assay_audit_model(a);
    const struct assay_audit_params *p = assay_audit_params(a);
    const char *spec = assay_audit_server_spec(a);
    bool v1 = p->api == ASSAY_OPENAI_API_V1;
    cJSON *o = cJSON_CreateObject();
    cJSON *server = NULL, *model = NULL, *findings = NULL, *metrics = NULL, *gauges = NULL;
    cJSON *nb = NULL;
    const struct assay_audit_budget *bud = assay_audit_budget(a);
    bool ok = o != NULL && cJSON_AddStringToObject(o, "format", "assay-audit") != NULL &&
              assay_json_add_num(o, "version", ASSAY_AUDIT_REPORT_VERSION) &&
              (server = cJSON_AddObjectToObject(o, "server")) != NULL &&
              cJSON_AddStringToObject(server, "url", p->url) != NULL &&
              cJSON_AddStringToObject(server, "api", v1 ? "v1" : "completion") != NULL &&
              cJSON_AddStringToObject(server, "spec", spec) != NULL &&
              (model = cJSON_AddObjectToObject(o, "model")) != NULL &&
              cJSON_AddStringToObject(model, "path", p->model_path) != NULL &&
              cJSON_AddStringToObject(model, "name", m->cfg.name) != NULL &&
              assay_json_add_num(model, "n_params", (double)m->n_floats) &&
              cJSON_AddStringToObject(model, "weights_sha256", m->sha256) != NULL &&
              cJSON_AddStringToObject(model, "arch", assay_arch_name(m->cfg.arch)) != NULL &&
              cJSON_AddStringToObject(model, "tensor_types", m->tensor_types) != NULL &&
              cJSON_AddBoolToObject(model, "tied", m->tied) != NULL &&
              cJSON_AddStringToObject(model, "weights",
                                      assay_audit_mapped(a) ? "mapped" : "resident") !=
                  NULL &&
              cJSON_AddStringToObject(o, "bundled_spec", assay_audit_bundled_spec(a)) != NULL &&
              cJSON_AddBoolToObject(o, "bundled_engine", !assay_audit_engine_off(a, NULL)) !=
                  NULL &&
              cJSON_AddBoolToObject(o, "quick", p->quick) != NULL &&
              assay_json_add_num(o, "seed", (double)p->seed) &&
              assay_json_add_num(o, "eos_token", p->eos_token >= 0 ? (double)p->eos_token : NAN) &&
              assay_json_add_num(o, "tie_tol", bud->gap) &&
              assay_json_add_num(o, "logprob_tol", bud->logprob) &&
              (nb = cJSON_AddObjectToObject(o, "numerics_budget")) != NULL &&
              cJSON_AddBoolToObject(nb, "measured", bud->measured) != NULL &&
              cJSON_AddStringToObject(nb, "why_not", bud->why) != NULL &&
              cJSON_AddStringToObject(nb, "formats", bud->formats) != NULL &&
              cJSON_AddStringToObject(nb, "kv_type", assay_numerics_kv_name(p->kv_type)) != NULL &&
              cJSON_AddBoolToObject(nb, "flash_attn", p->flash_attn) != NULL &&
              assay_json_add_num(nb, "factor", ASSAY_AUDIT_BUDGET_FACTOR) &&
              assay_json_add_num(nb, "n_positions", (double)bud->n_positions) &&
              assay_json_add_num(nb, "n_top", (double)bud->n_top) &&
              assay_json_add_num(nb, "reference_max_abs_diff", bud->ref_max_abs) &&
              assay_json_add_num(nb, "reference_max_gap_change", bud->ref_max_gap) &&
              cJSON_AddBoolToObject(nb, "f16_accumulation", bud->n_variants == 2) != NULL &&
              assay_json_add_num(nb, "reference_max_abs_diff_fp32_lanes",
                                 bud->variant_max_abs[0]) &&
              assay_json_add_num(nb, "reference_max_abs_diff_f16_accumulation",
                                 bud->n_variants == 2 ? bud->variant_max_abs[1] : NAN) &&
              assay_json_add_num(nb, "check_positions", (double)bud->check_positions) &&
              assay_json_add_num(nb, "check_reference_max_abs_diff", bud->check_ref_max_abs) &&
              assay_json_add_num(nb, "reference_kld_mean", bud->ref.kld.mean) &&
              assay_json_add_num(nb, "reference_tv_mean", bud->tv_mean) &&
              assay_json_add_num(nb, "reference_tv_max", bud->tv_max) &&
              assay_json_add_num(nb, "seconds", bud->seconds) &&
              cJSON_AddStringToObject(o, "sampling_order",
                                      p->order == ASSAY_SAMPLING_JOINT ? "joint" : "sequential") !=
                  NULL &&
              (findings = cJSON_AddArrayToObject(o, "findings")) != NULL &&
              (metrics = cJSON_AddObjectToObject(o, "metrics")) != NULL &&
              cJSON_AddStringToObject(metrics, "status", assay_audit_metrics_status(a)) != NULL &&
              (gauges = cJSON_AddArrayToObject(metrics, "gauges")) != NULL;
    for (size_t i = 0; ok && i < assay_audit_n_findings(a); i++) {
        cJSON *s = cJSON_CreateString(assay_audit_finding(a, i));
        ok = s != NULL && cJSON_AddItemToArray(findings, s);
        if (!ok) {
            cJSON_Delete(s);
        }
    }
    const struct assay_audit_gauge *g = NULL;
    size_t n_g = assay_audit_gauges(a, &g);
    for (size_t i = 0; ok && i < n_g; i++) {
        cJSON *go = cJSON_CreateObject();
        ok = go != NULL && cJSON_AddItemToArray(gauges, go);
        if (!ok) {
            cJSON_Delete(go);
            break;
        }
        ok = cJSON_AddStringToObject(go, "name", g[i].name) != NULL &&
             cJSON_AddStringToObject(go, "kind", g[i].kv ? "kv" : "requests") != NULL &&
             cJSON_AddBoolToObject(go, "present", g[i].present) != NULL &&
             assay_json_add_num(go, "idle", g[i].idle) && assay_json_add_num(go, "after", g[i].after);
    }
    if (ok && comparison != NULL) {
        ok = cJSON_AddItemToObject(o, "comparison", comparison);
        if (ok) {
            comparison = NULL;
        }
    } else if (ok) {
        ok = cJSON_AddNullToObject(o, "comparison") != NULL;
    }
    if (!ok) {
        cJSON_Delete(comparison);
        cJSON_Delete(o);
        return ASSAY_ERR_NOMEM;
    }
    *out = o;
    return ASSAY_OK;
}

/* ---- validation ---------------------------------------------------------------- */

enum { S = ASSAY_JSON_STRING, N = ASSAY_JSON_NUMBER, B = ASSAY_JSON_BOOL, O = ASSAY_JSON_OBJECT,
       A = ASSAY_JSON_ARRAY, Z = ASSAY_JSON_NULL };

enum assay_status assay_report_audit_validate(const cJSON *audit, struct assay_diag *diag)
{
    static const struct assay_json_field top[] = {
        {"format", S},        {"version", N},       {"server", O},      {"server.url", S},
        {"server.api", S},    {"server.spec", S},   {"model", O},       {"model.path", S},
        {"model.name", S},    {"model.weights_sha256", S}, {"bundled_spec", S},
        {"tie_tol", N | Z},   {"logprob_tol", N | Z}, {"findings", A},  {"metrics", O},
        {"numerics_budget", O}, {"numerics_budget.measured", B},
        {"numerics_budget.formats", S}, {"numerics_budget.factor", N},
        {"metrics.status", S}, {"metrics.gauges", A}, {"comparison", O | Z},
    };
    static const struct assay_json_field engine[] = {
        {"name", S}, {"spec", S}, {"figures", O}, {"status", O},
    };
    enum assay_status st =
        assay_json_require(audit, "audit", top, sizeof top / sizeof top[0], diag);
    if (st != ASSAY_OK) {
        return st;
    }
    if (strcmp(assay_json_str(audit, "format", ""), "assay-audit") != 0 ||
        assay_json_num(audit, "version") != ASSAY_AUDIT_REPORT_VERSION) {
        assay_diag_set(diag, NULL, "audit.format", "\"assay-audit\", version 1", "\"%.60s\"",
                       assay_json_str(audit, "format", ""));
        return ASSAY_ERR_PARSE;
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(audit, "comparison");
    if (cJSON_IsObject(c)) {
        if (strcmp(assay_json_str(c, "format", ""), "assay-versus") != 0) {
            assay_diag_set(diag, NULL, "audit.comparison.format", "\"assay-versus\"", "\"%.60s\"",
                           assay_json_str(c, "format", ""));
            return ASSAY_ERR_PARSE;
        }
        const cJSON *engines = cJSON_GetObjectItemCaseSensitive(c, "engines");
        if (!cJSON_IsArray(engines)) {
            assay_diag_set(diag, NULL, "audit.comparison.engines", "an array", "%s",
                           assay_json_item_kind(engines));
            return ASSAY_ERR_PARSE;
        }
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, engines)
        {
            char where[64];
            snprintf(where, sizeof where, "audit.comparison.engines[%d]", i++);
            st = assay_json_require(e, where, engine, sizeof engine / sizeof engine[0], diag);
            if (st != ASSAY_OK) {
                return st;
            }
        }
    }
    return ASSAY_OK;
}

/* ---- rendering ------------------------------------------------------------------ */

/* The checks of one verdict, as "`a`, `b`" (Markdown) or a list. */
static int count_verdict(const cJSON *checks, const char *v)
{
    int n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks)
    {
        n += strcmp(assay_json_str(c, "verdict", ""), v) == 0;
    }
    return n;
}

struct row_def {
    const char *label;
    const char *path; /* under figures */
    bool seconds;
};

static const struct row_def k_rows[] = {
    {"Single stream: output tokens/s (closed loop, 1 worker)", "single_tokens_per_s", false},
    {"Single stream: TTFT p50", "single_ttft_p50", true},
    {"Batched: output tokens/s (closed loop, one worker per slot)", "batched_tokens_per_s", false},
    {"Open loop: TTFT p50", "ttft_p50", true},
    {"Open loop: TTFT p90", "ttft_p90", true},
    {"Open loop: TTFT p99", "ttft_p99", true},
    {"Open loop: TPOT p50", "tpot_p50", true},
    {"Open loop: TPOT p99", "tpot_p99", true},
    {"Open loop: E2E p50", "e2e_p50", true},
    {"Open loop: E2E p99", "e2e_p99", true},
    {"Open loop: achieved req/s", "open_achieved_rate", false},
    {"Open loop: output tokens/s", "open_tokens_per_s", false},
};

static void fmt_figure(char *buf, size_t size, const cJSON *e, const struct row_def *d)
{
    char path[96];
    snprintf(path, sizeof path, "figures.%s", d->path);
    double v = assay_json_num(e, path);
    if (d->seconds) {
        assay_text_seconds(buf, size, v);
    } else {
        assay_text_num(buf, size, v, 4);
    }
}

/* ---- numerics ------------------------------------------------------------------- */

/* The first check whose figures hold numerics (the logprobs check), or NULL. */
static const cJSON *numerics_check(const cJSON *checks)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, checks)
    {
        if (cJSON_GetArraySize(assay_json_path(c, "figures.numerics")) > 0) {
            return c;
        }
    }
    return NULL;
}

/* The numerics table's cells after the series name, in order. */
static const struct {
    const char *label_md, *label_html;
    const char *path;
    int sig;
} k_numerics_cols[] = {
    {"Positions", "Positions", "n_positions", 12},
    {"Values", "Values", "n_values", 12},
    {"KLD mean", "KLD mean", "kld.mean", 3},
    {"KLD median", "KLD median", "kld.median", 3},
    {"KLD p99", "KLD p99", "kld.p99", 3},
    {"KLD max", "KLD max", "kld.max", 3},
    {"\\|Δ\\| median", "|&Delta;| median", "abs_diff.median", 3},
    {"\\|Δ\\| p99", "|&Delta;| p99", "abs_diff.p99", 3},
    {"\\|Δ\\| max", "|&Delta;| max", "abs_diff.max", 3},
    {"Top-1", "Top-1", "top1_agreement", 4},
};

#define N_NUMERICS_COLS (sizeof k_numerics_cols / sizeof k_numerics_cols[0])

/* The sentence above the table: what was measured, on which check and
 * which stored weights. */
static void numerics_intro(struct assay_text *t, const cJSON *au, const cJSON *c, bool html)
{
    void (*esc)(struct assay_text *, const char *) = html ? assay_text_html : assay_text_md;
    assay_text_puts(t, html ? "<p class=\"para\">" : "");
    assay_text_puts(t, "Every teacher-forced position of ");
    assay_text_puts(t, html ? "<code>" : "`");
    esc(t, assay_json_str(c, "name", ""));
    assay_text_puts(t, html ? "</code>" : "`");
    const char *types = assay_json_str(au, "model.tensor_types", NULL);
    if (types != NULL) {
        assay_text_puts(t, " (weights stored as ");
        esc(t, types);
        assay_text_puts(t, ")");
    }
    assay_text_puts(
        t, html ? ": the KL divergence (oracle &#8214; series) of the top logprobs returned, "
                  "coarsened to those tokens and the rest of the vocabulary (a lower bound "
                  "on the full KL), every |&Delta; logprob| of a returned value against the "
                  "oracle&rsquo;s log-softmax, and top-1, the share of positions whose greedy "
                  "token is the oracle&rsquo;s argmax. Logprobs in nats.</p>\n"
                : ": the KL divergence (oracle ‖ series) of the top logprobs returned, "
                  "coarsened to those tokens and the rest of the vocabulary (a lower bound on "
                  "the full KL), every |Δ logprob| of a returned value against the oracle's "
                  "log-softmax, and top-1, the share of positions whose greedy token is the "
                  "oracle's argmax. Logprobs in nats.\n\n");
}

static void numerics_markdown(struct assay_text *t, const cJSON *au, const cJSON *checks)
{
    const cJSON *c = numerics_check(checks);
    if (c == NULL) {
        return;
    }
    assay_text_puts(t, "### Numerics: top logprobs against the oracle\n\n");
    numerics_intro(t, au, c, false);
    assay_text_puts(t, "| Series |");
    for (size_t k = 0; k < N_NUMERICS_COLS; k++) {
        assay_text_printf(t, " %s |", k_numerics_cols[k].label_md);
    }
    assay_text_puts(t, "\n|---|");
    for (size_t k = 0; k < N_NUMERICS_COLS; k++) {
        assay_text_puts(t, "--:|");
    }
    assay_text_puts(t, "\n");
    const cJSON *sv;
    cJSON_ArrayForEach(sv, assay_json_path(c, "figures.numerics"))
    {
        assay_text_puts(t, "| ");
        assay_text_md(t, assay_json_str(sv, "name", ""));
        assay_text_puts(t, " |");
        for (size_t k = 0; k < N_NUMERICS_COLS; k++) {
            char b[32];
            assay_text_printf(t, " %s |",
                              assay_text_num(b, sizeof b,
                                             assay_json_num(sv, k_numerics_cols[k].path),
                                             k_numerics_cols[k].sig));
        }
        assay_text_puts(t, "\n");
    }
    assay_text_puts(t, "\n");
}

/* A CDF plot of one distribution ("kld" or "abs_diff") of every series,
 * drawn through its 101 quantiles. */
static void numerics_cdf_plot(struct assay_text *t, const cJSON *c, const char *dist,
                              const char *title, const char *x_label, const char *y_label,
                              const char *caption)
{
    enum { CDF = 101 };
    double x[ASSAY_DIVERGENCE_MAX_SERIES][CDF], y[CDF];
    struct assay_plot_series s[ASSAY_DIVERGENCE_MAX_SERIES];
    size_t n = 0;
    for (int k = 0; k < CDF; k++) {
        y[k] = k / 100.0;
    }
    const cJSON *sv;
    cJSON_ArrayForEach(sv, assay_json_path(c, "figures.numerics"))
    {
        if (n == ASSAY_DIVERGENCE_MAX_SERIES) {
            break;
        }
        char path[32];
        snprintf(path, sizeof path, "%s.cdf", dist);
        const cJSON *cdf = assay_json_path(sv, path);
        for (int k = 0; k < CDF; k++) {
            const cJSON *v = cJSON_GetArrayItem(cdf, k);
            x[n][k] = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        }
        s[n] = (struct assay_plot_series){.name = assay_json_str(sv, "name", ""),
                                          .x = x[n],
                                          .y = y,
                                          .n = CDF,
                                          .style = ASSAY_PLOT_LINE,
                                          .color = (int)n};
        n++;
    }
    struct assay_plot p = assay_plot_default();
    p.title = title;
    p.x_label = x_label;
    p.y_label = y_label;
    p.x_log = true;
    p.y_unit = ASSAY_PLOT_UNIT_PERCENT;
    p.y_min = 0.0;
    p.y_max = 1.0;
    p.series = s;
    p.n_series = n;
    p.caption = caption;
    assay_plot_svg(t, &p);
}

static void numerics_html(struct assay_text *t, const cJSON *au, const cJSON *checks)
{
    const cJSON *c = numerics_check(checks);
    if (c == NULL) {
        return;
    }
    assay_text_puts(t, "<h3>Numerics: top logprobs against the oracle</h3>\n");
    numerics_intro(t, au, c, true);
    assay_text_puts(t, "<table><tr><th>Series</th>");
    for (size_t k = 0; k < N_NUMERICS_COLS; k++) {
        assay_text_printf(t, "<th>%s</th>", k_numerics_cols[k].label_html);
    }
    assay_text_puts(t, "</tr>\n");
    const cJSON *sv;
    cJSON_ArrayForEach(sv, assay_json_path(c, "figures.numerics"))
    {
        assay_text_puts(t, "<tr><td>");
        assay_text_html(t, assay_json_str(sv, "name", ""));
        assay_text_puts(t, "</td>");
        for (size_t k = 0; k < N_NUMERICS_COLS; k++) {
            char b[32];
            assay_text_printf(t, "<td class=\"num\">%s</td>",
                              assay_text_num(b, sizeof b,
                                             assay_json_num(sv, k_numerics_cols[k].path),
                                             k_numerics_cols[k].sig));
        }
        assay_text_puts(t, "</tr>\n");
    }
    assay_text_puts(t, "</table>\n");
    numerics_cdf_plot(t, c, "kld", "Per-position KLD over the top logprobs returned (CDF)",
                      "KLD (nats)", "share of positions at or below",
                      "Drawn through the quantiles at 0%, 1%, ..., 100% of the positions; a "
                      "KLD of 0 (a log axis cannot show it) is left out.");
    numerics_cdf_plot(t, c, "abs_diff", "|Δ logprob| of each top logprob returned (CDF)",
                      "|Δ logprob| (nats)", "share of values at or below",
                      "Drawn through the quantiles at 0%, 1%, ..., 100% of the values; a "
                      "difference of 0 is left out.");
}

/* The numerics budget in one paragraph: what the reference computed, what
 * it measured, the budgets it gives (checks/audit.h). */
static void budget_sentence(struct assay_text *t, const cJSON *au, bool html)
{
    const cJSON *nb = assay_json_path(au, "numerics_budget");
    if (nb == NULL) {
        return;
    }
    assay_text_puts(t, html ? "<p>Numerics budget: " : "Numerics budget: ");
    if (!assay_json_bool(au, "numerics_budget.measured")) {
        const char *why = assay_json_str(au, "numerics_budget.why_not", "");
        assay_text_puts(t, "not measured");
        if (why[0] != '\0') {
            assay_text_puts(t, " (");
            html ? assay_text_html(t, why) : assay_text_md(t, why);
            assay_text_puts(t, ")");
        }
        assay_text_puts(t, "; the fixed tolerances of exact arithmetic hold.");
        assay_text_puts(t, html ? "</p>\n" : "\n\n");
        return;
    }
    assay_text_puts(t, "the reference (the bundled engine computing ");
    const char *formats = assay_json_str(au, "numerics_budget.formats", "");
    html ? assay_text_html(t, formats) : assay_text_md(t, formats);
    char n[32], k[32], mx[32], gap[32], kld[32], tv[32], tvm[32];
    assay_text_num(n, sizeof n, assay_json_num(au, "numerics_budget.n_positions"), 12);
    assay_text_num(k, sizeof k, assay_json_num(au, "numerics_budget.n_top"), 4);
    assay_text_num(mx, sizeof mx, assay_json_num(au, "numerics_budget.reference_max_abs_diff"), 3);
    assay_text_num(gap, sizeof gap,
                   assay_json_num(au, "numerics_budget.reference_max_gap_change"), 3);
    assay_text_num(kld, sizeof kld, assay_json_num(au, "numerics_budget.reference_kld_mean"), 3);
    assay_text_num(tv, sizeof tv, assay_json_num(au, "numerics_budget.reference_tv_mean"), 3);
    assay_text_num(tvm, sizeof tvm, assay_json_num(au, "numerics_budget.reference_tv_max"), 3);
    assay_text_printf(
        t,
        ") against the oracle over %s positions, the oracle's top %s tokens at each: "
        "largest |logprob difference| %s, largest change of a logit difference %s, mean "
        "KLD %s, total variation mean %s (max %s).",
        n, k, mx, gap, kld, tv, tvm);
    if (assay_json_bool(au, "numerics_budget.f16_accumulation")) {
        char m32[32], m16[32];
        const char *k32 = "numerics_budget.reference_max_abs_diff_fp32_lanes";
        const char *k16 = "numerics_budget.reference_max_abs_diff_f16_accumulation";
        assay_text_num(m32, sizeof m32, assay_json_num(au, k32), 3);
        assay_text_num(m16, sizeof m16, assay_json_num(au, k16), 3);
        assay_text_printf(t,
                          " These numerics were computed both as ggml builds with fp32 lanes "
                          "do (largest |logprob difference| %s) and as builds for CPUs with "
                          "AVX512-FP16 do, accumulating fp16 dot products in fp16 (%s); each "
                          "figure is the larger.",
                          m32, m16);
    }
    double check_n = assay_json_num(au, "numerics_budget.check_positions");
    if (check_n > 0) {
        char cn[32], cmx[32];
        assay_text_num(cn, sizeof cn, check_n, 12);
        assay_text_num(cmx, sizeof cmx,
                       assay_json_num(au, "numerics_budget.check_reference_max_abs_diff"), 3);
        assay_text_printf(t,
                          " At the logprobs check's own %s positions its largest |logprob "
                          "difference| was %s.",
                          cn, cmx);
    }
    assay_text_printf(t,
                      " Budgets: %g x the largest of these, at least the fixed tolerances.",
                      assay_json_num(au, "numerics_budget.factor"));
    assay_text_puts(t, html ? "</p>\n" : "\n\n");
}

void assay_report_audit_markdown(struct assay_text *t, const cJSON *r)
{
    const cJSON *au = cJSON_GetObjectItemCaseSensitive(r, "audit");
    if (!cJSON_IsObject(au)) {
        return;
    }
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
    assay_text_puts(t, "## Audit of the server\n\n");
    assay_text_puts(t, "The server at `");
    assay_text_md(t, assay_json_str(au, "server.url", ""));
    assay_text_printf(t, "` (API `%s`), serving `", assay_json_str(au, "server.api", ""));
    assay_text_md(t, assay_json_str(au, "model.path", ""));
    assay_text_puts(t, "` (");
    assay_text_md(t, assay_json_str(au, "model.name", ""));
    if (assay_json_str(au, "model.arch", NULL) != NULL) {
        assay_text_puts(t, ", ");
        assay_text_md(t, assay_json_str(au, "model.arch", ""));
        assay_text_puts(t, ", stored as ");
        assay_text_md(t, assay_json_str(au, "model.tensor_types", ""));
    }
    assay_text_printf(t, ", %.0f parameters, weights sha256 `%.16s…`), checked against the oracle "
                         "(the same weights in double precision) and against the bundled engine `",
                      assay_json_num(au, "model.n_params"),
                      assay_json_str(au, "model.weights_sha256", ""));
    assay_text_md(t, assay_json_str(au, "bundled_spec", ""));
    assay_text_printf(t, "`; tie budget %.3g logits, logprob budget %.3g.\n\n",
                      assay_json_num(au, "tie_tol"), assay_json_num(au, "logprob_tol"));
    budget_sentence(t, au, false);
    static const char *const verdicts[] = {"PASS", "FAIL", "ERROR", "SKIP"};
    static const char *const titles[] = {"Passed", "Failed", "Could not run",
                                         "Could not be checked"};
    for (int k = 0; k < 4; k++) {
        int n = count_verdict(checks, verdicts[k]);
        assay_text_printf(t, "**%s (%d)**%s", titles[k], n, n == 0 ? ": none.\n\n" : ":\n\n");
        if (n == 0) {
            continue;
        }
        const cJSON *c;
        cJSON_ArrayForEach(c, checks)
        {
            if (strcmp(assay_json_str(c, "verdict", ""), verdicts[k]) != 0) {
                continue;
            }
            assay_text_puts(t, "- `");
            assay_text_md(t, assay_json_str(c, "name", ""));
            assay_text_puts(t, "`: ");
            assay_text_md(t, k == 0 ? assay_json_str(c, "summary", "")
                                    : assay_json_str(c, "failure", ""));
            assay_text_puts(t, "\n");
        }
        assay_text_puts(t, "\n");
    }
    numerics_markdown(t, au, checks);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(au, "findings");
    if (cJSON_GetArraySize(f) > 0) {
        assay_text_puts(t, "### What the server did differently from the oracle\n\n");
        const cJSON *s;
        cJSON_ArrayForEach(s, f)
        {
            assay_text_puts(t, "- ");
            assay_text_md(t, cJSON_IsString(s) ? s->valuestring : "");
            assay_text_puts(t, "\n");
        }
        assay_text_puts(t, "\n");
    }
    const cJSON *cmp = cJSON_GetObjectItemCaseSensitive(au, "comparison");
    if (cJSON_IsObject(cmp)) {
        const cJSON *engines = cJSON_GetObjectItemCaseSensitive(cmp, "engines");
        char rate[32];
        assay_text_puts(t, "### Side by side, measured in this run\n\n");
        assay_text_md(t, assay_json_str(cmp, "order", ""));
        assay_text_printf(t, "; %g runs per configuration (medians shown); open loop %s at %s "
                             "req/s offered (",
                          assay_json_num(cmp, "runs"), assay_json_str(cmp, "arrival", ""),
                          assay_text_num(rate, sizeof rate, assay_json_num(cmp, "open_rate"), 4));
        assay_text_md(t, assay_json_str(cmp, "open_rate_rule", ""));
        assay_text_printf(t, "); batched = %g workers.\n\n| Figure |",
                          assay_json_num(cmp, "batch_workers"));
        const cJSON *e;
        cJSON_ArrayForEach(e, engines)
        {
            assay_text_puts(t, " ");
            assay_text_md(t, assay_json_str(e, "name", ""));
            assay_text_puts(t, " |");
        }
        assay_text_puts(t, "\n|---|");
        cJSON_ArrayForEach(e, engines)
        {
            assay_text_puts(t, "--:|");
        }
        assay_text_puts(t, "\n");
        for (size_t k = 0; k < sizeof k_rows / sizeof k_rows[0]; k++) {
            assay_text_printf(t, "| %s |", k_rows[k].label);
            cJSON_ArrayForEach(e, engines)
            {
                char b[32];
                fmt_figure(b, sizeof b, e, &k_rows[k]);
                assay_text_printf(t, " %s |", b);
            }
            assay_text_puts(t, "\n");
        }
        assay_text_puts(t, "\n");
        cJSON_ArrayForEach(e, engines)
        {
            assay_text_puts(t, "- `");
            assay_text_md(t, assay_json_str(e, "name", ""));
            assay_text_puts(t, "`: `");
            assay_text_md(t, assay_json_str(e, "spec", ""));
            assay_text_printf(t, "` (single %s, batched %s, open %s)\n",
                              assay_json_str(e, "status.single", "?"),
                              assay_json_str(e, "status.batched", "?"),
                              assay_json_str(e, "status.open", "?"));
        }
        assay_text_puts(t, "\n");
    }
    const cJSON *g = assay_json_path(au, "metrics.gauges");
    assay_text_puts(t, "### The server's metrics\n\n");
    const char *ms = assay_json_str(au, "metrics.status", "");
    if (ms[0] != '\0') {
        assay_text_md(t, ms);
        assay_text_puts(t, "\n\n");
    } else {
        assay_text_puts(t, "| Gauge | Kind | Before the audit | After the run |\n|---|---|--:|--:|\n");
        const cJSON *x;
        int shown = 0;
        cJSON_ArrayForEach(x, g)
        {
            if (assay_json_bool(x, "present") != 1) {
                continue;
            }
            char a[32], b[32];
            assay_text_puts(t, "| `");
            assay_text_md(t, assay_json_str(x, "name", ""));
            assay_text_printf(t, "` | %s | %s | %s |\n", assay_json_str(x, "kind", ""),
                              assay_text_num(a, sizeof a, assay_json_num(x, "idle"), 6),
                              assay_text_num(b, sizeof b, assay_json_num(x, "after"), 6));
            shown++;
        }
        if (shown == 0) {
            assay_text_puts(t, "| (none of the gauges assay knows) | | | |\n");
        }
        assay_text_puts(t, "\n");
    }
}

void assay_report_audit_html(struct assay_text *t, const cJSON *r)
{
    const cJSON *au = cJSON_GetObjectItemCaseSensitive(r, "audit");
    if (!cJSON_IsObject(au)) {
        return;
    }
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
    assay_text_puts(t, "<section id=\"audit\"><h2>Audit of the server</h2>\n<p>The server at <code>");
    assay_text_html(t, assay_json_str(au, "server.url", ""));
    assay_text_puts(t, "</code> (API <code>");
    assay_text_html(t, assay_json_str(au, "server.api", ""));
    assay_text_puts(t, "</code>), serving <code>");
    assay_text_html(t, assay_json_str(au, "model.path", ""));
    assay_text_puts(t, "</code> (");
    assay_text_html(t, assay_json_str(au, "model.name", ""));
    if (assay_json_str(au, "model.arch", NULL) != NULL) {
        assay_text_puts(t, ", ");
        assay_text_html(t, assay_json_str(au, "model.arch", ""));
        assay_text_puts(t, ", stored as ");
        assay_text_html(t, assay_json_str(au, "model.tensor_types", ""));
    }
    assay_text_printf(t, ", %.0f parameters, weights sha256 <code>", assay_json_num(au, "model.n_params"));
    assay_text_html(t, assay_json_str(au, "model.weights_sha256", ""));
    assay_text_puts(t, "</code>), checked against the oracle (the same weights in double "
                       "precision) and against the bundled engine <code>");
    assay_text_html(t, assay_json_str(au, "bundled_spec", ""));
    assay_text_printf(t, "</code>; tie budget %.3g logits, logprob budget %.3g.</p>\n",
                      assay_json_num(au, "tie_tol"), assay_json_num(au, "logprob_tol"));
    budget_sentence(t, au, true);
    static const char *const verdicts[] = {"PASS", "FAIL", "ERROR", "SKIP"};
    static const char *const titles[] = {"Passed", "Failed", "Could not run",
                                         "Could not be checked"};
    assay_text_puts(t, "<table><tr><th>Verdict</th><th>Checks</th></tr>\n");
    for (int k = 0; k < 4; k++) {
        int n = count_verdict(checks, verdicts[k]);
        assay_text_printf(t, "<tr><td><span class=\"v %s\">%s (%d)</span></td><td>", verdicts[k],
                          titles[k], n);
        if (n == 0) {
            assay_text_puts(t, "none");
        }
        const cJSON *c;
        cJSON_ArrayForEach(c, checks)
        {
            if (strcmp(assay_json_str(c, "verdict", ""), verdicts[k]) != 0) {
                continue;
            }
            assay_text_puts(t, "<code>");
            assay_text_html(t, assay_json_str(c, "name", ""));
            assay_text_puts(t, "</code>");
            if (k > 0) {
                assay_text_puts(t, ": ");
                assay_text_html(t, assay_json_str(c, "failure", ""));
            }
            assay_text_puts(t, "<br>");
        }
        assay_text_puts(t, "</td></tr>\n");
    }
    assay_text_puts(t, "</table>\n");
    numerics_html(t, au, checks);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(au, "findings");
    if (cJSON_GetArraySize(f) > 0) {
        assay_text_puts(t, "<h3>What the server did differently from the oracle</h3>\n<ul>\n");
        const cJSON *s;
        cJSON_ArrayForEach(s, f)
        {
            assay_text_puts(t, "<li>");
            assay_text_html(t, cJSON_IsString(s) ? s->valuestring : "");
            assay_text_puts(t, "</li>\n");
        }
        assay_text_puts(t, "</ul>\n");
    }
    const cJSON *cmp = cJSON_GetObjectItemCaseSensitive(au, "comparison");
    if (cJSON_IsObject(cmp)) {
        const cJSON *engines = cJSON_GetObjectItemCaseSensitive(cmp, "engines");
        char rate[32];
        assay_text_puts(t, "<h3>Side by side, measured in this run</h3>\n<p class=\"para\">");
        assay_text_html(t, assay_json_str(cmp, "order", ""));
        assay_text_printf(t, "; %g runs per configuration (medians shown); open loop ",
                          assay_json_num(cmp, "runs"));
        assay_text_html(t, assay_json_str(cmp, "arrival", ""));
        assay_text_printf(t, " at %s req/s offered (",
                          assay_text_num(rate, sizeof rate, assay_json_num(cmp, "open_rate"), 4));
        assay_text_html(t, assay_json_str(cmp, "open_rate_rule", ""));
        assay_text_printf(t, "); batched = %g workers.</p>\n<table><tr><th>Figure</th>",
                          assay_json_num(cmp, "batch_workers"));
        const cJSON *e;
        cJSON_ArrayForEach(e, engines)
        {
            assay_text_puts(t, "<th>");
            assay_text_html(t, assay_json_str(e, "name", ""));
            assay_text_puts(t, "<br><small><code>");
            assay_text_html(t, assay_json_str(e, "spec", ""));
            assay_text_puts(t, "</code></small></th>");
        }
        assay_text_puts(t, "</tr>\n");
        for (size_t k = 0; k < sizeof k_rows / sizeof k_rows[0]; k++) {
            assay_text_puts(t, "<tr><td>");
            assay_text_html(t, k_rows[k].label);
            assay_text_puts(t, "</td>");
            cJSON_ArrayForEach(e, engines)
            {
                char b[32];
                fmt_figure(b, sizeof b, e, &k_rows[k]);
                assay_text_printf(t, "<td class=\"num\">%s</td>", b);
            }
            assay_text_puts(t, "</tr>\n");
        }
        assay_text_puts(t, "</table>\n");
    }
    assay_text_puts(t, "<h3>The server&rsquo;s metrics</h3>\n");
    const char *ms = assay_json_str(au, "metrics.status", "");
    if (ms[0] != '\0') {
        assay_text_puts(t, "<p>");
        assay_text_html(t, ms);
        assay_text_puts(t, "</p>\n");
    } else {
        assay_text_puts(t, "<table><tr><th>Gauge</th><th>Kind</th><th>Before the audit</th>"
                           "<th>After the run</th></tr>\n");
        const cJSON *x;
        cJSON_ArrayForEach(x, assay_json_path(au, "metrics.gauges"))
        {
            if (assay_json_bool(x, "present") != 1) {
                continue;
            }
            char a[32], b[32];
            assay_text_puts(t, "<tr><td><code>");
            assay_text_html(t, assay_json_str(x, "name", ""));
            assay_text_puts(t, "</code></td><td>");
            assay_text_html(t, assay_json_str(x, "kind", ""));
            assay_text_printf(t, "</td><td class=\"num\">%s</td><td class=\"num\">%s</td></tr>\n",
                              assay_text_num(a, sizeof a, assay_json_num(x, "idle"), 6),
                              assay_text_num(b, sizeof b, assay_json_num(x, "after"), 6));
        }
        assay_text_puts(t, "</table>\n");
    }
    assay_text_puts(t, "</section>\n");
}
