/*
 * compare_report.c - the "compare" member of an `assay compare` report
 * (compare_report.h): assay_report_compare_json builds it from the verdicts
 * and the speed ratios, _validate checks it when a report is read, _markdown
 * and _html render its sections, _summary writes the short Markdown a CI job
 * posts on a pull request, and _junit the JUnit XML. cli/cmd_compare.c
 * builds and writes it; the renderers draw it from the JSON.
 */
#include "compare_report.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "schema.h"
#include "../core/json_out.h"

/* ---- building --------------------------------------------------------------- */

static bool add_engine(cJSON *o, const char *key, const char *spec,
                       const struct assay_adapter_info *info)
{
    cJSON *e = cJSON_AddObjectToObject(o, key);
    return e != NULL && assay_json_add_str(e, "spec", spec) &&
           assay_json_add_str(e, "name", info != NULL ? info->name : "") &&
           assay_json_add_str(e, "model_name", info != NULL ? info->model_name : "") &&
           assay_json_add_str(e, "weights_sha256", info != NULL ? info->weights_sha256 : "");
}

/* "0.00441 [0.001, 0.009]": a ratio and its interval. */
static char *ratio_ci_text(char *buf, size_t size, double ratio, double lo, double hi)
{
    char a[32], b[32], c[32];
    snprintf(buf, size, "%s [%s, %s]", assay_speedup_ratio_text(a, sizeof a, ratio),
             assay_speedup_ratio_text(b, sizeof b, lo), assay_speedup_ratio_text(c, sizeof c, hi));
    return buf;
}

static const char *change_word(const struct assay_speedup_figure *f)
{
    return f->change == ASSAY_SPEEDUP_BETTER ? "better"
           : f->change == ASSAY_SPEEDUP_WORSE ? "worse"
                                              : "same";
}

/* One figure for the headline: "TTFT p50 227x lower (ratio 0.0044 [0.001, 0.009])". */
static void figure_text(char *buf, size_t size, enum assay_speedup_metric m,
                        const struct assay_speedup_figure *f)
{
    char a[48], b[96];
    snprintf(buf, size, "%s %s (ratio %s)", assay_speedup_metric_label(m),
             assay_speedup_describe(a, sizeof a, f->ratio),
             ratio_ci_text(b, sizeof b, f->ratio, f->lo, f->hi));
}

static void headline(const struct assay_compare_facts *f, int n_error, char *buf, size_t size)
{
    int n = 0;
    const char *first_fail = NULL;
    for (size_t i = 0; i < f->n_checks; i++) {
        if (f->checks[i].verdict == ASSAY_VERDICT_FAIL) {
            first_fail = f->checks[i].name;
            break;
        }
    }
    if (first_fail != NULL) {
        int n_fail = 0;
        for (size_t i = 0; i < f->n_checks; i++) {
            n_fail += f->checks[i].verdict == ASSAY_VERDICT_FAIL;
        }
        n = n_fail > 1 ? snprintf(buf, size, "INCORRECT: %s failed (and %d more)", first_fail,
                                  n_fail - 1)
                       : snprintf(buf, size, "INCORRECT: %s failed", first_fail);
    } else if (n_error > 0) {
        n = snprintf(buf, size, "NOT CHECKED: %d correctness check%s could not run", n_error,
                     n_error > 1 ? "s" : "");
    } else if (f->n_checks == 0) {
        n = snprintf(buf, size, "CORRECTNESS NOT CHECKED");
    } else {
        n = snprintf(buf, size, "CORRECT");
    }
    if (n < 0 || (size_t)n >= size) {
        return;
    }
    const struct assay_speedup_result *s = f->speed;
    if (s == NULL) {
        snprintf(buf + n, size - (size_t)n, "; speed not measured");
        return;
    }
    if (s->verdict == ASSAY_SPEEDUP_NOT_MEASURED) {
        snprintf(buf + n, size - (size_t)n, "; speed not measured (%s)", s->error);
        return;
    }
    char upper[32];
    snprintf(upper, sizeof upper, "%s", assay_speedup_verdict_str(s->verdict));
    for (char *p = upper; *p != '\0'; p++) {
        *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
    }
    n += snprintf(buf + n, size - (size_t)n, ", %s", upper);
    /* The figures that moved, regressions first; or, with no difference,
     * the three headline figures. */
    int shown = 0;
    for (int pass = 0; pass < 3 && n > 0 && (size_t)n < size; pass++) {
        for (int m = 0; m < ASSAY_SPEEDUP_COUNT && shown < 3; m++) {
            const struct assay_speedup_figure *fg = &s->fig[m];
            bool want = pass == 0   ? fg->regression
                        : pass == 1 ? !fg->regression && fg->change != ASSAY_SPEEDUP_SAME
                                    : s->verdict == ASSAY_SPEEDUP_NO_DIFFERENCE &&
                                          (m == ASSAY_SPEEDUP_TTFT_P50 || m == ASSAY_SPEEDUP_TPOT_P50 ||
                                           m == ASSAY_SPEEDUP_THROUGHPUT);
            if (!want || !fg->compared) {
                continue;
            }
            char t[128];
            figure_text(t, sizeof t, (enum assay_speedup_metric)m, fg);
            n += snprintf(buf + n, size - (size_t)n, "%s%s", shown == 0 ? ": " : ", ", t);
            shown++;
            if (n < 0 || (size_t)n >= size) {
                return;
            }
        }
    }
    snprintf(buf + n, size - (size_t)n,
             "%s (candidate / baseline, %d interleaved pairs, %.0f%% CI%s)",
             shown == 3 ? ", ..." : "",
             (int)s->n_pairs, 100 * s->params.confidence,
             s->verdict == ASSAY_SPEEDUP_REGRESSION ? "; a regression is worse beyond the threshold"
                                                    : "");
}

static bool add_speed(cJSON *o, const struct assay_compare_facts *f)
{
    const struct assay_speedup_result *s = f->speed;
    if (s == NULL) {
        return cJSON_AddNullToObject(o, "speed") != NULL;
    }
    cJSON *sp = cJSON_AddObjectToObject(o, "speed");
    cJSON *cf = NULL, *boot = NULL, *metrics = NULL, *slo = NULL;
    char interval[600];
    if (s->params.interval == ASSAY_SPEEDUP_INTERVAL_T) {
        snprintf(interval, sizeof interval,
                 "bootstrap over pairs of runs (a cluster bootstrap: %d replicates, each drawing "
                 "the pairs with replacement and pooling their requests), the interval made on "
                 "the log ratio as +- t(%d) times the replicates' standard deviation (the "
                 "small-cluster correction; the percentile interval where a replicate's ratio is "
                 "0 or infinite); pairs, not requests, because the requests of one run share its "
                 "queue and its moment on the machine",
                 (int)s->params.n_boot, (int)s->n_pairs - 1);
    } else {
        snprintf(interval, sizeof interval,
                 "percentile bootstrap over pairs of runs (a cluster bootstrap: %d replicates, "
                 "each drawing the pairs with replacement and pooling their requests)",
                 (int)s->params.n_boot);
    }
    bool ok = sp != NULL && assay_json_add_num(sp, "pairs", s->n_pairs) &&
              assay_json_add_num(sp, "pairs_requested", s->params.n_pairs) &&
              (cf = cJSON_AddArrayToObject(sp, "candidate_first")) != NULL &&
              assay_json_add_str(sp, "order",
                      "pairs one after the other; within a pair the order alternates (baseline "
                      "first, then candidate first, ...), so a linear drift cancels") &&
              assay_json_add_num(sp, "confidence", s->params.confidence) &&
              assay_json_add_num(sp, "threshold", s->params.threshold) && assay_json_add_str(sp, "interval", interval) &&
              (boot = cJSON_AddObjectToObject(sp, "bootstrap")) != NULL &&
              assay_json_add_str(boot, "unit", "pair of runs") && assay_json_add_num(boot, "replicates", s->params.n_boot) &&
              assay_json_add_num(boot, "seed", (double)s->params.boot_seed) &&
              assay_json_add_str(sp, "verdict", assay_speedup_verdict_str(s->verdict)) &&
              assay_json_add_str(sp, "status", s->status == ASSAY_OK ? "ok" : s->error) &&
              assay_json_add_str(sp, "workload", f->workload != NULL ? f->workload->name : "");
    if (ok && s->params.has_slo) {
        ok = (slo = cJSON_AddObjectToObject(sp, "slo")) != NULL &&
             assay_json_add_num(slo, "ttft_s", s->params.slo.ttft_s) && assay_json_add_num(slo, "tpot_s", s->params.slo.tpot_s);
    } else if (ok) {
        ok = cJSON_AddNullToObject(sp, "slo") != NULL;
    }
    for (int32_t r = 0; ok && r < s->n_pairs; r++) {
        cJSON *b = cJSON_CreateBool(s->candidate_first[r]);
        ok = b != NULL && cJSON_AddItemToArray(cf, b);
        if (!ok) {
            cJSON_Delete(b);
        }
    }
    ok = ok && (metrics = cJSON_AddArrayToObject(sp, "metrics")) != NULL;
    for (int m = 0; ok && m < ASSAY_SPEEDUP_COUNT; m++) {
        const struct assay_speedup_figure *fg = &s->fig[m];
        bool measured = s->verdict != ASSAY_SPEEDUP_NOT_MEASURED;
        cJSON *e = cJSON_CreateObject();
        ok = e != NULL && cJSON_AddItemToArray(metrics, e);
        if (!ok) {
            cJSON_Delete(e);
            break;
        }
        enum assay_speedup_metric mm = (enum assay_speedup_metric)m;
        ok = assay_json_add_str(e, "name", assay_speedup_metric_name(mm)) &&
             assay_json_add_str(e, "label", assay_speedup_metric_label(mm)) &&
             assay_json_add_str(e, "unit", assay_speedup_metric_unit(mm)) &&
             assay_json_add_bool(e, "lower_is_better", assay_speedup_lower_is_better(mm)) &&
             assay_json_add_num(e, "baseline", measured ? fg->baseline : NAN) &&
             assay_json_add_num(e, "candidate", measured ? fg->candidate : NAN) &&
             assay_json_add_num(e, "ratio", measured ? fg->ratio : NAN) &&
             assay_json_add_num(e, "ci_low", measured ? fg->lo : NAN) &&
             assay_json_add_num(e, "ci_high", measured ? fg->hi : NAN) &&
             assay_json_add_num(e, "n_baseline", (double)fg->n_baseline) &&
             assay_json_add_num(e, "n_candidate", (double)fg->n_candidate) &&
             assay_json_add_bool(e, "compared", measured && fg->compared) &&
             assay_json_add_str(e, "change", change_word(fg)) &&
             assay_json_add_bool(e, "significant", fg->change != ASSAY_SPEEDUP_SAME) &&
             assay_json_add_bool(e, "regression", fg->regression) && assay_json_add_bool(e, "gated", s->params.gate[m]);
    }
    cJSON *bb = NULL, *cb = NULL;
    if (ok && s->baseline.n_runs > 0) {
        ok = assay_bench_result_to_json(&s->baseline, f->workload, &bb) == ASSAY_OK &&
             cJSON_AddItemToObject(sp, "baseline_bench", bb);
        if (!ok) {
            cJSON_Delete(bb);
        }
    } else if (ok) {
        ok = cJSON_AddNullToObject(sp, "baseline_bench") != NULL;
    }
    if (ok && s->candidate.n_runs > 0) {
        ok = assay_bench_result_to_json(&s->candidate, f->workload, &cb) == ASSAY_OK &&
             cJSON_AddItemToObject(sp, "candidate_bench", cb);
        if (!ok) {
            cJSON_Delete(cb);
        }
    } else if (ok) {
        ok = cJSON_AddNullToObject(sp, "candidate_bench") != NULL;
    }
    return ok;
}

enum assay_status assay_report_compare_json(const struct assay_compare_facts *f, cJSON **out)
{
    *out = NULL;
    int n_fail = 0, n_error = 0;
    for (size_t i = 0; i < f->n_checks; i++) {
        n_fail += f->checks[i].verdict == ASSAY_VERDICT_FAIL;
        n_error += f->checks[i].verdict == ASSAY_VERDICT_ERROR;
    }
    char head[1024];
    headline(f, n_error, head, sizeof head);
    cJSON *o = cJSON_CreateObject();
    cJSON *v = NULL, *failed = NULL, *repros = NULL;
    bool ok = o != NULL && assay_json_add_str(o, "format", "assay-compare") &&
              assay_json_add_num(o, "version", ASSAY_COMPARE_REPORT_VERSION) &&
              add_engine(o, "baseline", f->baseline_spec, f->baseline) &&
              add_engine(o, "candidate", f->candidate_spec, f->candidate);
    if (ok) {
        ok = f->weights != NULL && f->weights[0] != '\0' ? assay_json_add_str(o, "weights", f->weights)
                                                         : cJSON_AddNullToObject(o, "weights") != NULL;
    }
    ok = ok && (v = cJSON_AddObjectToObject(o, "verdict")) != NULL;
    if (ok) {
        ok = n_fail > 0                      ? assay_json_add_bool(v, "correct", false)
             : n_error > 0 || f->n_checks == 0 ? cJSON_AddNullToObject(v, "correct") != NULL
                                             : assay_json_add_bool(v, "correct", true);
    }
    ok = ok && (failed = cJSON_AddArrayToObject(v, "failed_checks")) != NULL;
    for (size_t i = 0; ok && i < f->n_checks; i++) {
        if (f->checks[i].verdict != ASSAY_VERDICT_FAIL) {
            continue;
        }
        cJSON *s = cJSON_CreateString(f->checks[i].name);
        ok = s != NULL && cJSON_AddItemToArray(failed, s);
        if (!ok) {
            cJSON_Delete(s);
        }
    }
    ok = ok &&
         assay_json_add_str(v, "speed",
                 f->speed != NULL ? assay_speedup_verdict_str(f->speed->verdict) : "not measured") &&
         assay_json_add_num(v, "exit_status", f->exit_status) && assay_json_add_str(v, "headline", head) &&
         (repros = cJSON_AddArrayToObject(o, "reproducers")) != NULL;
    for (size_t i = 0; ok && i < f->n_repros; i++) {
        const struct assay_shrink_result *sr = f->repros[i].shrunk;
        cJSON *e = cJSON_CreateObject();
        ok = e != NULL && cJSON_AddItemToArray(repros, e);
        if (!ok) {
            cJSON_Delete(e);
            break;
        }
        char sizes[300] = "";
        if (sr->shrinkable) {
            assay_shrink_format_sizes(sr, sizes, sizeof sizes);
        }
        ok = assay_json_add_str(e, "check", f->repros[i].check) && assay_json_add_str(e, "command", sr->command) &&
             (sr->workload[0] != '\0' ? assay_json_add_str(e, "workload", sr->workload)
                                      : cJSON_AddNullToObject(e, "workload") != NULL) &&
             assay_json_add_str(e, "shrunk", sizes) && assay_json_add_bool(e, "confirmed", sr->confirmed);
    }
    ok = ok && add_speed(o, f);
    if (!ok) {
        cJSON_Delete(o);
        return ASSAY_ERR_NOMEM;
    }
    *out = o;
    return ASSAY_OK;
}

/* ---- validation ---------------------------------------------------------------- */

enum { S = ASSAY_JSON_STRING, N = ASSAY_JSON_NUMBER, B = ASSAY_JSON_BOOL, O = ASSAY_JSON_OBJECT,
       A = ASSAY_JSON_ARRAY, Z = ASSAY_JSON_NULL };

enum assay_status assay_report_compare_validate(const cJSON *c, struct assay_diag *diag)
{
    static const struct assay_json_field top[] = {
        {"format", S},          {"version", N},
        {"baseline", O},        {"baseline.spec", S},
        {"candidate", O},       {"candidate.spec", S},
        {"weights", S | Z},     {"verdict", O},
        {"verdict.correct", B | Z}, {"verdict.failed_checks", A},
        {"verdict.speed", S},   {"verdict.exit_status", N},
        {"verdict.headline", S}, {"reproducers", A},
        {"speed", O | Z},
    };
    static const struct assay_json_field repro[] = {
        {"check", S}, {"command", S}, {"workload", S | Z}, {"shrunk", S}, {"confirmed", B},
    };
    static const struct assay_json_field speed[] = {
        {"pairs", N},      {"pairs_requested", N}, {"candidate_first", A}, {"confidence", N},
        {"threshold", N},  {"interval", S},        {"bootstrap", O},       {"verdict", S},
        {"status", S},     {"metrics", A},         {"slo", O | Z},
        {"baseline_bench", O | Z}, {"candidate_bench", O | Z},
    };
    static const struct assay_json_field metric[] = {
        {"name", S},        {"label", S},          {"unit", S},        {"lower_is_better", B},
        {"baseline", N | Z}, {"candidate", N | Z}, {"ratio", N | Z},   {"ci_low", N | Z},
        {"ci_high", N | Z}, {"compared", B},       {"change", S},      {"significant", B},
        {"regression", B},  {"gated", B},
    };
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
    enum assay_status st = assay_json_require(c, "compare", top, COUNT(top), diag);
    if (st != ASSAY_OK) {
        return st;
    }
    if (strcmp(assay_json_str(c, "format", ""), "assay-compare") != 0) {
        assay_diag_set(diag, NULL, "compare.format", "\"assay-compare\"", "\"%.100s\"",
                       assay_json_str(c, "format", ""));
        return ASSAY_ERR_PARSE;
    }
    if (assay_json_num(c, "version") != ASSAY_COMPARE_REPORT_VERSION) {
        assay_diag_set(diag, NULL, "compare.version", "1 (this assay's schema)", "%g",
                       assay_json_num(c, "version"));
        return ASSAY_ERR_PARSE;
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c, "reproducers"))
    {
        char where[64];
        snprintf(where, sizeof where, "compare.reproducers[%d]", i++);
        if ((st = assay_json_require(e, where, repro, COUNT(repro), diag)) != ASSAY_OK) {
            return st;
        }
    }
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(c, "speed");
    if (cJSON_IsObject(sp)) {
        if ((st = assay_json_require(sp, "compare.speed", speed, COUNT(speed), diag)) != ASSAY_OK) {
            return st;
        }
        i = 0;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(sp, "metrics"))
        {
            char where[64];
            snprintf(where, sizeof where, "compare.speed.metrics[%d]", i++);
            if ((st = assay_json_require(e, where, metric, COUNT(metric), diag)) != ASSAY_OK) {
                return st;
            }
            const char *ch = assay_json_str(e, "change", "");
            if (strcmp(ch, "better") != 0 && strcmp(ch, "worse") != 0 && strcmp(ch, "same") != 0) {
                char w2[80];
                snprintf(w2, sizeof w2, "%s.change", where);
                assay_diag_set(diag, NULL, w2, "\"better\", \"worse\" or \"same\"", "\"%.100s\"", ch);
                return ASSAY_ERR_PARSE;
            }
        }
        const char *benches[2] = {"baseline_bench", "candidate_bench"};
        for (int k = 0; k < 2; k++) {
            const cJSON *b = cJSON_GetObjectItemCaseSensitive(sp, benches[k]);
            if (cJSON_IsObject(b) && strcmp(assay_json_str(b, "format", ""), "assay-bench") != 0) {
                char where[64];
                snprintf(where, sizeof where, "compare.speed.%s.format", benches[k]);
                assay_diag_set(diag, NULL, where, "\"assay-bench\"", "\"%.100s\"",
                               assay_json_str(b, "format", ""));
                return ASSAY_ERR_PARSE;
            }
        }
    }
#undef COUNT
    return ASSAY_OK;
}

/* ---- rendering -------------------------------------------------------------- */

/* A figure's value for people: seconds with a unit, or a rate. */
static char *value_text(char *buf, size_t size, const cJSON *m, const char *key)
{
    double v = assay_json_num(m, key);
    const char *unit = assay_json_str(m, "unit", "");
    if (strcmp(unit, "s") == 0) {
        return assay_text_seconds(buf, size, v);
    }
    char num[32];
    snprintf(buf, size, "%s %s", assay_text_num(num, sizeof num, v, 4), unit);
    return buf;
}

static const char *metric_verdict(const cJSON *m)
{
    if (assay_json_bool(m, "compared") != 1) {
        return "not compared";
    }
    if (assay_json_bool(m, "regression") == 1) {
        return "REGRESSION";
    }
    return assay_json_str(m, "change", "same");
}

static void speed_table_md(struct assay_text *t, const cJSON *sp)
{
    char conf[16];
    snprintf(conf, sizeof conf, "%.0f%%", 100 * assay_json_num(sp, "confidence"));
    assay_text_printf(t, "| Figure | Baseline | Candidate | Change | Ratio [%s CI] | Verdict |\n"
                         "|---|--:|--:|--:|--:|---|\n", conf);
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(sp, "metrics"))
    {
        char a[48], b[48], c[48], ci[96];
        const char *verdict = metric_verdict(m);
        bool loud = strcmp(verdict, "REGRESSION") == 0;
        assay_text_printf(t, "| %s | %s | %s | %s | %s | %s%s%s |\n",
                          assay_json_str(m, "label", ""), value_text(a, sizeof a, m, "baseline"),
                          value_text(b, sizeof b, m, "candidate"),
                          assay_speedup_describe(c, sizeof c, assay_json_num(m, "ratio")),
                          ratio_ci_text(ci, sizeof ci, assay_json_num(m, "ratio"),
                                        assay_json_num(m, "ci_low"), assay_json_num(m, "ci_high")),
                          loud ? "**" : "", verdict, loud ? "**" : "");
    }
    assay_text_puts(t, "\n");
}

static void speed_method_md(struct assay_text *t, const cJSON *sp)
{
    char thr[32];
    snprintf(thr, sizeof thr, "%g%%", 100 * assay_json_num(sp, "threshold"));
    assay_text_printf(t,
                      "%g pairs of runs on workload `", assay_json_num(sp, "pairs"));
    assay_text_md(t, assay_json_str(sp, "workload", ""));
    assay_text_puts(t, "`, ");
    const cJSON *bb = cJSON_GetObjectItemCaseSensitive(sp, "baseline_bench");
    const char *kind = assay_json_str(bb, "generator.kind", "");
    const char *arrival = assay_json_str(bb, "generator.arrival", "");
    double rate = assay_json_num(bb, "generator.rate");
    if (strcmp(kind, "open") == 0) {
        assay_text_printf(t, "open loop (%s arrivals", arrival);
        if (isfinite(rate)) {
            assay_text_printf(t, " at %g req/s", rate);
        }
        assay_text_puts(t, "), latency from the scheduled arrival; ");
    } else if (kind[0] != '\0') {
        assay_text_printf(t, "closed loop of %g workers; ", assay_json_num(bb, "generator.workers"));
    }
    assay_text_puts(t, "runs interleaved, the order alternating in each pair. Ratio = candidate / "
                       "baseline over the pooled requests; the interval is a ");
    assay_text_md(t, assay_json_str(sp, "interval", ""));
    assay_text_printf(t, ". A regression is a gated figure worse by more than %s with the whole "
                         "interval beyond it.",
                      thr);
    const cJSON *slo = cJSON_GetObjectItemCaseSensitive(sp, "slo");
    if (cJSON_IsObject(slo)) {
        char a[32], b[32];
        assay_text_printf(t, " Goodput: requests within TTFT <= %s and TPOT <= %s, per second.",
                          assay_text_seconds(a, sizeof a, assay_json_num(slo, "ttft_s")),
                          assay_text_seconds(b, sizeof b, assay_json_num(slo, "tpot_s")));
    }
    const char *status = assay_json_str(sp, "status", "ok");
    if (strcmp(status, "ok") != 0) {
        assay_text_puts(t, " The runs stopped early: ");
        assay_text_md(t, status);
        assay_text_puts(t, ".");
    }
    assay_text_puts(t, "\n\n");
}

static void repros_md(struct assay_text *t, const cJSON *c)
{
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "reproducers");
    if (cJSON_GetArraySize(rs) == 0) {
        return;
    }
    assay_text_puts(t, "### Shrunk reproducers\n\n");
    const cJSON *e;
    cJSON_ArrayForEach(e, rs)
    {
        assay_text_puts(t, "`");
        assay_text_md(t, assay_json_str(e, "check", ""));
        assay_text_puts(t, "`");
        const char *sizes = assay_json_str(e, "shrunk", "");
        if (sizes[0] != '\0') {
            assay_text_puts(t, " (");
            assay_text_md(t, sizes);
            assay_text_puts(t, assay_json_bool(e, "confirmed") == 1 ? "; fails when rerun)"
                                                                   : "; NOT confirmed on rerun)");
        }
        assay_text_puts(t, ":\n\n```sh\n");
        assay_text_puts(t, assay_json_str(e, "command", ""));
        assay_text_puts(t, "\n```\n\n");
    }
}

void assay_report_compare_markdown(struct assay_text *t, const cJSON *r)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "compare");
    if (!cJSON_IsObject(c)) {
        return;
    }
    assay_text_puts(t, "## Comparison\n\n**");
    assay_text_md(t, assay_json_str(c, "verdict.headline", ""));
    assay_text_puts(t, "**\n\n- Baseline: `");
    assay_text_md(t, assay_json_str(c, "baseline.spec", ""));
    assay_text_puts(t, "`\n- Candidate: `");
    assay_text_md(t, assay_json_str(c, "candidate.spec", ""));
    assay_text_puts(t, "`\n- Oracle's weights: ");
    assay_text_md(t, assay_json_str(c, "weights", "none (the checks that need them were skipped)"));
    assay_text_printf(t, "\n- Exit status: %g\n\n", assay_json_num(c, "verdict.exit_status"));
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(c, "speed");
    if (cJSON_IsObject(sp)) {
        speed_table_md(t, sp);
        speed_method_md(t, sp);
    }
    repros_md(t, c);
}

enum assay_status assay_report_compare_summary(const cJSON *r, char **out, size_t *len)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "compare");
    struct assay_text t;
    assay_text_init(&t);
    int correct = assay_json_bool(c, "verdict.correct");
    assay_text_printf(&t, "## assay compare: %s, %s\n\n",
                      correct == 1 ? "correct" : correct == 0 ? "**INCORRECT**" : "**NOT CHECKED**",
                      strcmp(assay_json_str(c, "verdict.speed", ""), "regression") == 0
                          ? "**REGRESSION**"
                          : assay_json_str(c, "verdict.speed", ""));
    assay_text_puts(&t, "> ");
    assay_text_md(&t, assay_json_str(c, "verdict.headline", ""));
    assay_text_puts(&t, "\n\n`");
    assay_text_md(&t, assay_json_str(c, "baseline.spec", ""));
    assay_text_puts(&t, "` (baseline) vs `");
    assay_text_md(&t, assay_json_str(c, "candidate.spec", ""));
    assay_text_printf(&t, "` (candidate) · exit status %g\n\n",
                      assay_json_num(c, "verdict.exit_status"));
    /* correctness */
    assay_text_printf(&t, "### Correctness: %g checks, %g passed, %g failed, %g skipped, %g could "
                          "not run\n\n",
                      assay_json_num(r, "counts.checks"), assay_json_num(r, "counts.pass"),
                      assay_json_num(r, "counts.fail"), assay_json_num(r, "counts.skip"),
                      assay_json_num(r, "counts.error"));
    assay_text_puts(&t, "| Check | Verdict | Figures |\n|---|---|---|\n");
    const cJSON *ck;
    cJSON_ArrayForEach(ck, cJSON_GetObjectItemCaseSensitive(r, "checks"))
    {
        const char *v = assay_json_str(ck, "verdict", "");
        bool pass = strcmp(v, "PASS") == 0;
        assay_text_puts(&t, "| `");
        assay_text_md(&t, assay_json_str(ck, "name", ""));
        assay_text_printf(&t, "` | %s%s%s | ", pass ? "" : "**", v, pass ? "" : "**");
        if (pass) {
            assay_text_md(&t, assay_json_str(ck, "summary", ""));
        } else {
            assay_text_md(&t, assay_json_str(ck, "failure", ""));
        }
        assay_text_puts(&t, " |\n");
    }
    assay_text_puts(&t, "\nThe oracle's weights: ");
    assay_text_md(&t, assay_json_str(c, "weights", "none (the checks that need them were skipped)"));
    assay_text_puts(&t, ".\n\n");
    repros_md(&t, c);
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(c, "speed");
    if (cJSON_IsObject(sp)) {
        assay_text_printf(&t, "### Speed: %s\n\n", assay_json_str(sp, "verdict", ""));
        speed_table_md(&t, sp);
        speed_method_md(&t, sp);
    } else {
        assay_text_puts(&t, "### Speed: not measured\n\n");
    }
    const cJSON *stamp = cJSON_GetObjectItemCaseSensitive(r, "stamp");
    assay_text_printf(&t, "<sub>assay %s, commit %.12s, %s, %g cores · full report: report.html, "
                          "report.json</sub>\n",
                      assay_json_str(stamp, "assay.version", "?"),
                      assay_json_str(stamp, "assay.git_commit", "?"),
                      assay_json_str(stamp, "hardware.cpu_model", "?"),
                      assay_json_num(stamp, "hardware.cores_available"));
    return assay_text_take(&t, out, len);
}

/* ---- HTML ----------------------------------------------------------------- */

static void esc(struct assay_text *t, const char *s)
{
    assay_text_html(t, s != NULL ? s : "");
}

void assay_report_compare_html(struct assay_text *t, const cJSON *r)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "compare");
    if (!cJSON_IsObject(c)) {
        return;
    }
    assay_text_puts(t, "<section id=\"compare\"><h2>Comparison</h2>\n<p><strong>");
    esc(t, assay_json_str(c, "verdict.headline", ""));
    assay_text_puts(t, "</strong></p>\n<ul><li>Baseline: <code>");
    esc(t, assay_json_str(c, "baseline.spec", ""));
    assay_text_puts(t, "</code></li><li>Candidate: <code>");
    esc(t, assay_json_str(c, "candidate.spec", ""));
    assay_text_puts(t, "</code></li><li>Oracle&rsquo;s weights: ");
    esc(t, assay_json_str(c, "weights", "none (the checks that need them were skipped)"));
    assay_text_printf(t, "</li><li>Exit status: %g</li></ul>\n",
                      assay_json_num(c, "verdict.exit_status"));
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(c, "speed");
    if (cJSON_IsObject(sp)) {
        assay_text_printf(t, "<table><thead><tr><th>Figure</th><th>Baseline</th><th>Candidate</th>"
                             "<th>Change</th><th>Ratio [%.0f%% CI]</th><th>Verdict</th></tr></thead>"
                             "<tbody>\n",
                          100 * assay_json_num(sp, "confidence"));
        const cJSON *m;
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(sp, "metrics"))
        {
            char a[48], b[48], ch[48], ci[96];
            assay_text_puts(t, "<tr><td>");
            esc(t, assay_json_str(m, "label", ""));
            assay_text_puts(t, "</td><td class=\"num\">");
            esc(t, value_text(a, sizeof a, m, "baseline"));
            assay_text_puts(t, "</td><td class=\"num\">");
            esc(t, value_text(b, sizeof b, m, "candidate"));
            assay_text_printf(t, "</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td>",
                              assay_speedup_describe(ch, sizeof ch, assay_json_num(m, "ratio")),
                              ratio_ci_text(ci, sizeof ci, assay_json_num(m, "ratio"),
                                            assay_json_num(m, "ci_low"),
                                            assay_json_num(m, "ci_high")));
            esc(t, metric_verdict(m));
            assay_text_puts(t, "</td></tr>\n");
        }
        assay_text_puts(t, "</tbody></table>\n<p class=\"muted\">");
        struct assay_text md;
        assay_text_init(&md);
        speed_method_md(&md, sp);
        esc(t, md.data != NULL ? md.data : "");
        assay_text_release(&md);
        assay_text_puts(t, "</p>\n");
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c, "reproducers"))
    {
        assay_text_puts(t, "<p>Shrunk reproducer of <code>");
        esc(t, assay_json_str(e, "check", ""));
        assay_text_puts(t, "</code> (");
        esc(t, assay_json_str(e, "shrunk", ""));
        assay_text_puts(t, "):</p><pre>");
        esc(t, assay_json_str(e, "command", ""));
        assay_text_puts(t, "</pre>\n");
    }
    assay_text_puts(t, "</section>\n");
}

/* ---- JUnit XML ------------------------------------------------------------ */

enum assay_status assay_report_compare_junit(const cJSON *r, char **out, size_t *len)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "compare");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(c, "speed");
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(r, "checks");
    int n_c = 0, f_c = 0, e_c = 0, s_c = 0, n_s = 0, f_s = 0;
    double secs = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, checks)
    {
        const char *v = assay_json_str(x, "verdict", "");
        n_c++;
        f_c += strcmp(v, "FAIL") == 0;
        e_c += strcmp(v, "ERROR") == 0;
        s_c += strcmp(v, "SKIP") == 0;
        double s = assay_json_num(x, "seconds");
        secs += isfinite(s) ? s : 0;
    }
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(sp, "metrics"))
    {
        if (assay_json_bool(x, "compared") == 1) {
            n_s++;
            f_s += assay_json_bool(x, "regression") == 1;
        }
    }
    bool measured = cJSON_IsObject(sp) && strcmp(assay_json_str(sp, "status", ""), "ok") == 0;
    struct assay_text t;
    assay_text_init(&t);
    assay_text_printf(&t,
                      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"assay compare\" "
                      "tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n",
                      n_c + (cJSON_IsObject(sp) ? (measured ? n_s : 1) : 0), f_c + f_s,
                      e_c + (cJSON_IsObject(sp) && !measured ? 1 : 0), s_c, secs);
    assay_text_printf(&t,
                      "  <testsuite name=\"correctness\" tests=\"%d\" failures=\"%d\" errors=\"%d\" "
                      "skipped=\"%d\" time=\"%.3f\">\n",
                      n_c, f_c, e_c, s_c, secs);
    cJSON_ArrayForEach(x, checks)
    {
        const char *v = assay_json_str(x, "verdict", "");
        double s = assay_json_num(x, "seconds");
        assay_text_puts(&t, "    <testcase classname=\"assay.compare.");
        esc(&t, assay_json_str(x, "family", ""));
        assay_text_puts(&t, "\" name=\"");
        esc(&t, assay_json_str(x, "name", ""));
        assay_text_printf(&t, "\" time=\"%.3f\"", isfinite(s) ? s : 0.0);
        if (strcmp(v, "PASS") == 0) {
            assay_text_puts(&t, "><system-out>");
            esc(&t, assay_json_str(x, "summary", ""));
            assay_text_puts(&t, "</system-out></testcase>\n");
            continue;
        }
        const char *tag = strcmp(v, "FAIL") == 0 ? "failure" : strcmp(v, "SKIP") == 0 ? "skipped"
                                                                                      : "error";
        assay_text_printf(&t, ">\n      <%s message=\"", tag);
        esc(&t, assay_json_str(x, "failure", ""));
        assay_text_puts(&t, "\"");
        if (strcmp(v, "SKIP") == 0) {
            assay_text_puts(&t, "/>\n    </testcase>\n");
            continue;
        }
        assay_text_puts(&t, ">");
        esc(&t, assay_json_str(x, "failure", ""));
        /* the shrunk reproducer when there is one, else the plain one */
        const char *cmd = assay_json_str(x, "repro", "");
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c, "reproducers"))
        {
            if (strcmp(assay_json_str(e, "check", ""), assay_json_str(x, "name", "")) == 0) {
                cmd = assay_json_str(e, "command", cmd);
            }
        }
        if (cmd[0] != '\0') {
            assay_text_puts(&t, "\nReproduce: ");
            esc(&t, cmd);
        }
        assay_text_printf(&t, "</%s>\n    </testcase>\n", tag);
    }
    assay_text_puts(&t, "  </testsuite>\n");
    if (cJSON_IsObject(sp)) {
        assay_text_printf(&t, "  <testsuite name=\"speed\" tests=\"%d\" failures=\"%d\" errors=\"%d\" "
                              "skipped=\"0\" time=\"0\">\n",
                          measured ? n_s : 1, f_s, measured ? 0 : 1);
        if (!measured) {
            assay_text_puts(&t, "    <testcase classname=\"assay.compare.speed\" name=\"runs\" "
                                "time=\"0\">\n      <error message=\"");
            esc(&t, assay_json_str(sp, "status", ""));
            assay_text_puts(&t, "\"/>\n    </testcase>\n");
        }
        const cJSON *metrics = measured ? cJSON_GetObjectItemCaseSensitive(sp, "metrics") : NULL;
        cJSON_ArrayForEach(x, metrics)
        {
            if (assay_json_bool(x, "compared") != 1) {
                continue;
            }
            char ch[48], ci[96], line[320];
            snprintf(line, sizeof line, "%s %s: ratio candidate/baseline %s (%.0f%% CI): %s",
                     assay_json_str(x, "label", ""),
                     assay_speedup_describe(ch, sizeof ch, assay_json_num(x, "ratio")),
                     ratio_ci_text(ci, sizeof ci, assay_json_num(x, "ratio"),
                                   assay_json_num(x, "ci_low"), assay_json_num(x, "ci_high")),
                     100 * assay_json_num(sp, "confidence"), metric_verdict(x));
            assay_text_puts(&t, "    <testcase classname=\"assay.compare.speed\" name=\"");
            esc(&t, assay_json_str(x, "name", ""));
            assay_text_puts(&t, "\" time=\"0\">");
            if (assay_json_bool(x, "regression") == 1) {
                assay_text_printf(&t, "\n      <failure message=\"regression beyond %g%%\">",
                                  100 * assay_json_num(sp, "threshold"));
                esc(&t, line);
                assay_text_puts(&t, "</failure>\n    </testcase>\n");
            } else {
                assay_text_puts(&t, "<system-out>");
                esc(&t, line);
                assay_text_puts(&t, "</system-out></testcase>\n");
            }
        }
        assay_text_puts(&t, "  </testsuite>\n");
    }
    assay_text_puts(&t, "</testsuites>\n");
    return assay_text_take(&t, out, len);
}
