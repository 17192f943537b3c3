/*
 * The audit of a third-party server (checks/audit.h, `assay audit`) and
 * its parts.
 *
 *   test_audit unit       (label unit) the gate (adapters/gate.h), the
 *                         Prometheus reader (adapters/prom.h), the
 *                         side-by-side benchmark (bench/versus.h) and the
 *                         report's "audit" member (reports/audit_report.h),
 *                         with no server
 *   test_audit live ASSAY  (label audit) `assay audit --quick` against the
 *                         llama-server the audit fixtures started: every
 *                         check passes but the KV gauge, which this
 *                         llama.cpp does not export (SKIP with the reason);
 *                         the report holds both engines side by side
 *   test_audit mustfail ASSAY  (label audit) the must-fail controls: the
 *                         oracle given other weights (TinyGPT seed 2) than
 *                         the server serves, and a misbehaving server
 *                         (suites/fake_server.c); the audit must fail the
 *                         checks that see it
 *
 * The server is found through ASSAY_LLAMA_STATE (its state folder, holding
 * "url") and the file it serves through ASSAY_LLAMA_GGUF, as in
 * test_llama_audit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "adapters/gate.h"
#include "adapters/prom.h"
#include "adapters/spec.h"
#include "bench/null_engine.h"
#include "bench/versus.h"
#include "checks/audit.h"
#include "checks/equivalence.h"
#include "checks/plan.h"
#include "core/alloc.h"
#include "core/workload.h"
#include "engine/model.h"
#include "reports/audit_report.h"
#include "reports/html.h"
#include "reports/markdown.h"
#include "reports/report.h"
#include "reports/schema.h"
#include "reports/stamp.h"
#include "fake_server.h"
#include "gguf_retype.h"
#include "support.h"

static const char *g_assay;

/* ------------------------------------------------------------------ */
/* Driving an adapter                                                  */
/* ------------------------------------------------------------------ */

enum { MAX_REQ = 16, MAX_TOK = 64 };

struct outcome {
    int32_t tok[MAX_TOK];
    int32_t n_tok;
    int32_t n_finish;
    int32_t finish_index;
    enum assay_finish_reason reason;
    bool bad_index;
};

/* Add n requests (ids 1..n) and step until the adapter is idle. */
static void drive(const struct assay_adapter *a, const struct assay_request *reqs, int n,
                  struct outcome *out)
{
    memset(out, 0, sizeof(*out) * (size_t)n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(a->vt->add_request(a->self, &reqs[i]), ASSAY_OK);
    }
    for (int guard = 0; a->vt->has_work(a->self); guard++) {
        assert_true(guard < 1000000);
        const struct assay_event *ev;
        size_t k = 0;
        assert_int_equal(a->vt->step(a->self, &ev, &k), ASSAY_OK);
        for (size_t e = 0; e < k; e++) {
            int r = (int)ev[e].request_id - 1;
            assert_true(r >= 0 && r < n);
            struct outcome *o = &out[r];
            if (ev[e].kind == ASSAY_EVENT_TOKEN) {
                o->bad_index = o->bad_index || ev[e].index != o->n_tok;
                if (o->n_tok < MAX_TOK) {
                    o->tok[o->n_tok] = ev[e].token;
                }
                o->n_tok++;
            } else if (ev[e].kind == ASSAY_EVENT_FINISH) {
                o->n_finish++;
                o->finish_index = ev[e].index;
                o->reason = ev[e].reason;
            }
        }
    }
}

static void open_spec(const char *spec, struct assay_adapter *a)
{
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_adapter_open_spec(spec, a, &diag) != ASSAY_OK) {
        char msg[600];
        fail_msg("%s: %s", spec, assay_diag_format(&diag, msg, sizeof msg));
    }
}

/* ------------------------------------------------------------------ */
/* The gate                                                            */
/* ------------------------------------------------------------------ */

/* At most max_in_flight requests reach the inner engine; all finish. */
static void test_gate_limit(void **state)
{
    (void)state;
    struct assay_adapter inner, gate;
    struct assay_null_engine_params np = assay_null_engine_default_params();
    assert_int_equal(assay_null_engine_open(&np, &inner), ASSAY_OK);
    struct assay_gate_params gp = assay_gate_default_params();
    gp.max_in_flight = 2;
    assert_int_equal(assay_gate_open(&inner, &gp, &gate), ASSAY_OK);
    int32_t prompt[3] = {1, 2, 3};
    struct assay_request reqs[MAX_REQ];
    for (int i = 0; i < 7; i++) {
        reqs[i] = (struct assay_request){(uint64_t)i + 1, prompt, 3, 5 + i, -1,
                                         assay_sampling_greedy()};
    }
    struct outcome out[MAX_REQ];
    drive(&gate, reqs, 7, out);
    for (int i = 0; i < 7; i++) {
        assert_int_equal(out[i].n_finish, 1);
        assert_int_equal(out[i].reason, ASSAY_FINISH_LENGTH);
        assert_int_equal(out[i].n_tok, 5 + i);
        assert_int_equal(out[i].finish_index, 5 + i);
        assert_false(out[i].bad_index);
    }
    struct assay_gate_stats gs;
    assert_int_equal(assay_gate_get_stats(&gate, &gs), ASSAY_OK);
    assert_int_equal(gs.n_submitted, 7);
    assert_int_equal(gs.n_inner, 7);
    assert_int_equal(gs.max_in_flight, 2);
    assert_int_equal(gs.n_continued, 0);
    /* A duplicate live id is refused; a queued request can be aborted. */
    gp.max_in_flight = 1;
    struct assay_adapter gate1;
    assert_int_equal(assay_gate_open(&inner, &gp, &gate1), ASSAY_OK);
    assert_int_equal(gate1.vt->add_request(gate1.self, &reqs[0]), ASSAY_OK);
    assert_int_equal(gate1.vt->add_request(gate1.self, &reqs[0]), ASSAY_ERR_DUPLICATE);
    assert_int_equal(gate1.vt->add_request(gate1.self, &reqs[1]), ASSAY_OK);
    assert_int_equal(gate1.vt->abort(gate1.self, 2), ASSAY_OK);
    assert_int_equal(gate1.vt->abort(gate1.self, 9), ASSAY_ERR_NOT_FOUND);
    int n_abort = 0, n_len = 0, tok2 = 0;
    while (gate1.vt->has_work(gate1.self)) {
        const struct assay_event *ev;
        size_t k = 0;
        assert_int_equal(gate1.vt->step(gate1.self, &ev, &k), ASSAY_OK);
        for (size_t e = 0; e < k; e++) {
            tok2 += ev[e].kind == ASSAY_EVENT_TOKEN && ev[e].request_id == 2;
            n_abort += ev[e].kind == ASSAY_EVENT_FINISH && ev[e].reason == ASSAY_FINISH_ABORT;
            n_len += ev[e].kind == ASSAY_EVENT_FINISH && ev[e].reason == ASSAY_FINISH_LENGTH;
        }
    }
    assert_int_equal(n_abort, 1);
    assert_int_equal(n_len, 1);
    assert_int_equal(tok2, 0);
    assay_adapter_close(&gate1);
    assay_adapter_close(&gate);
    assay_adapter_close(&inner);
    /* Bad parameters. */
    gp.max_in_flight = -1;
    assert_int_equal(assay_gate_open(&inner, &gp, &gate), ASSAY_ERR_INVALID);
}

/* Continuation after a stop on the continuation token: a greedy request
 * through the gate delivers exactly the tokens it delivers without it. */
static void test_gate_continue(void **state)
{
    (void)state;
    struct assay_adapter engine, gate;
    open_spec("bundled:model=mini,batch=4", &engine);
    int32_t prompt[5] = {10, 200, 31, 7, 99};
    struct assay_request req = {1, prompt, 5, 40, -1, assay_sampling_greedy()};
    struct outcome plain;
    drive(&engine, &req, 1, &plain);
    assert_int_equal(plain.n_tok, 40);
    /* A token that recurs before the end: the engine stops on it, and the
     * gate continues after it (at least twice when it recurs). */
    int32_t cont = -1, uses = 0;
    for (int i = 0; i < 39 && cont < 0; i++) {
        int n = 0;
        for (int j = 0; j < 39; j++) {
            n += plain.tok[j] == plain.tok[i];
        }
        if (n >= 2) {
            cont = plain.tok[i];
            uses = n;
        }
    }
    if (cont < 0) {
        cont = plain.tok[10];
        uses = 1;
    }
    struct assay_gate_params gp = assay_gate_default_params();
    gp.continue_token = cont;
    assert_int_equal(assay_gate_open(&engine, &gp, &gate), ASSAY_OK);
    struct outcome got;
    drive(&gate, &req, 1, &got);
    assert_int_equal(got.n_finish, 1);
    assert_int_equal(got.reason, ASSAY_FINISH_LENGTH);
    assert_int_equal(got.n_tok, 40);
    assert_int_equal(got.finish_index, 40);
    assert_false(got.bad_index);
    assert_memory_equal(got.tok, plain.tok, sizeof(int32_t) * 40);
    struct assay_gate_stats gs;
    assay_gate_get_stats(&gate, &gs);
    assert_int_equal(gs.n_continued, uses);
    assert_int_equal(gs.n_inner, uses + 1);
    /* A request with a stop token of its own is passed through. */
    struct assay_request own = req;
    own.stop_token = cont;
    drive(&gate, &own, 1, &got);
    assert_int_equal(got.reason, ASSAY_FINISH_STOP);
    assert_int_equal(got.tok[got.n_tok - 1], cont);
    assay_adapter_close(&gate);
    assay_adapter_close(&engine);
}

/* ------------------------------------------------------------------ */
/* Prometheus text                                                      */
/* ------------------------------------------------------------------ */

static void test_prom(void **state)
{
    (void)state;
    static const char page[] =
        "# HELP llamacpp:requests_processing Number of requests processing\n"
        "# TYPE llamacpp:requests_processing gauge\n"
        "llamacpp:requests_processing 3\n"
        "llamacpp:requests_processing_total 99\n"
        "vllm:num_requests_running{model_name=\"a}b\",engine=\"0\"} 2.5\r\n"
        "vllm:num_requests_running{model_name=\"q\\\"x\"} 1 1700000000000\n"
        "  sglang:token_usage 0.25\n"
        "weird NaN\n"
        "inf_metric +Inf\n"
        "broken{label=\"unterminated 5\n"
        "bad_value abc\n"
        "# vllm:num_requests_running 100\n";
    double v = -1;
    size_t n = sizeof page - 1;
    assert_int_equal(assay_prom_sum(page, n, "llamacpp:requests_processing", &v), 1);
    assert_true(v == 3.0);
    assert_int_equal(assay_prom_sum(page, n, "vllm:num_requests_running", &v), 2);
    assert_true(fabs(v - 3.5) < 1e-12);
    assert_int_equal(assay_prom_sum(page, n, "sglang:token_usage", &v), 1);
    assert_true(fabs(v - 0.25) < 1e-12);
    assert_int_equal(assay_prom_sum(page, n, "weird", &v), 1);
    assert_true(isnan(v));
    assert_int_equal(assay_prom_sum(page, n, "inf_metric", &v), 1);
    assert_true(isinf(v) && v > 0);
    assert_int_equal(assay_prom_sum(page, n, "broken", &v), 0);
    assert_int_equal(assay_prom_sum(page, n, "bad_value", &v), 0);
    assert_int_equal(assay_prom_sum(page, n, "llamacpp:kv_cache_usage_ratio", &v), 0);
    assert_true(v == 0.0);
    assert_int_equal(assay_prom_sum(page, n, "llamacpp:requests", &v), 0);
    /* A page without a final newline. */
    assert_int_equal(assay_prom_sum("a 1\nb 2", 7, "b", &v), 1);
    assert_true(v == 2.0);
}

/* ------------------------------------------------------------------ */
/* Side by side                                                         */
/* ------------------------------------------------------------------ */

static struct assay_workload *small_workload(void)
{
    static const char json[] =
        "{\"format\":\"assay-workload\",\"version\":1,\"name\":\"tiny\",\"generate\":{\"seed\":3,"
        "\"n\":12,\"vocab\":256,\"arrival\":{\"process\":\"poisson\",\"rate\":50},"
        "\"prompt_len\":{\"dist\":\"uniform\",\"min\":2,\"max\":8},"
        "\"output_len\":{\"dist\":\"uniform\",\"min\":2,\"max\":6}}}";
    struct assay_workload_limits lim = {260, 2048, 0};
    struct assay_workload *w = NULL;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_workload_parse(json, sizeof json - 1, "tiny", &lim, &w, &diag),
                     ASSAY_OK);
    return w;
}

static void test_versus(void **state)
{
    (void)state;
    struct assay_adapter a, b;
    struct assay_null_engine_params np = assay_null_engine_default_params();
    assert_int_equal(assay_null_engine_open(&np, &a), ASSAY_OK);
    open_spec("bundled:model=mini,batch=2", &b);
    struct assay_workload *w = small_workload();
    struct assay_versus_engine e[2] = {{"null", "null", &a}, {"mini", "bundled:model=mini", &b}};
    struct assay_versus_params p = assay_versus_default_params();
    p.batch_workers = 2;
    p.n_runs = 2;
    p.warmup = 0;
    struct assay_versus v;
    assert_int_equal(assay_versus_run(e, 2, w, &p, NULL, &v), ASSAY_OK);
    assert_int_equal(v.n_engines, 2);
    assert_true(v.open_rate_derived);
    for (int k = 0; k < 2; k++) {
        for (int c = 0; c < ASSAY_VERSUS_N_CONFIGS; c++) {
            assert_int_equal(v.status[k][c], ASSAY_OK);
            assert_int_equal(v.results[k][c].n_runs, 2);
            assert_true(assay_versus_tokens_per_s(&v, k, (enum assay_versus_config)c) > 0);
        }
    }
    /* The open loop offers half the lower batched rate, to both. */
    double lo = fmin(v.results[0][ASSAY_VERSUS_BATCHED].spread.achieved_rate.median,
                     v.results[1][ASSAY_VERSUS_BATCHED].spread.achieved_rate.median);
    assert_true(fabs(v.open_rate - 0.5 * lo) <= 1e-9 * lo);
    assert_true(v.results[0][ASSAY_VERSUS_OPEN].params.rate == v.open_rate);
    assert_true(v.results[1][ASSAY_VERSUS_OPEN].params.rate == v.open_rate);
    cJSON *j = NULL;
    assert_int_equal(assay_versus_to_json(&v, w, &j), ASSAY_OK);
    assert_string_equal(assay_json_str(j, "format", ""), "assay-versus");
    const cJSON *engines = cJSON_GetObjectItemCaseSensitive(j, "engines");
    assert_int_equal(cJSON_GetArraySize(engines), 2);
    const cJSON *e1 = cJSON_GetArrayItem(engines, 1);
    assert_string_equal(assay_json_str(e1, "name", ""), "mini");
    assert_true(assay_json_num(e1, "figures.single_tokens_per_s") > 0);
    assert_true(assay_json_num(e1, "figures.ttft_p99") > 0);
    assert_string_equal(assay_json_str(e1, "status.open", ""), "ok");
    assert_string_equal(assay_json_str(e1, "open.format", ""), "assay-bench");
    cJSON_Delete(j);
    assay_versus_release(&v);
    /* Bad parameters run nothing. */
    p.n_runs = 0;
    assert_int_equal(assay_versus_run(e, 2, w, &p, NULL, &v), ASSAY_ERR_INVALID);
    assay_workload_free(w);
    assay_adapter_close(&a);
    assay_adapter_close(&b);
}

/* ------------------------------------------------------------------ */
/* The report's "audit" member                                          */
/* ------------------------------------------------------------------ */

static cJSON *audit_object(void)
{
    static const char json[] =
        "{\"format\":\"assay-audit\",\"version\":1,"
        "\"server\":{\"url\":\"http://127.0.0.1:1\",\"api\":\"completion\",\"spec\":\"openai:x\"},"
        "\"model\":{\"path\":\"m.gguf\",\"name\":\"tinygpt\",\"n_params\":5838080,"
        "\"weights_sha256\":\"ab\"},\"bundled_spec\":\"bundled:model=m.gguf\",\"quick\":true,"
        "\"seed\":1,\"eos_token\":257,\"tie_tol\":0.001,\"logprob_tol\":0.001,"
        "\"sampling_order\":\"sequential\",\"findings\":[\"f\"],"
        "\"numerics_budget\":{\"measured\":true,\"why_not\":\"\",\"formats\":\"weights F32\","
        "\"factor\":2,\"n_positions\":10,\"n_top\":5,\"reference_max_abs_diff\":0.01,"
        "\"reference_max_gap_change\":0.02,\"reference_kld_mean\":1e-5,"
        "\"reference_tv_mean\":0.001,\"reference_tv_max\":0.002},"
        "\"metrics\":{\"status\":\"\",\"gauges\":[{\"name\":\"g\",\"kind\":\"requests\","
        "\"present\":true,\"idle\":0,\"after\":0}]},"
        "\"comparison\":{\"format\":\"assay-versus\",\"version\":1,\"engines\":[{\"name\":\"server\","
        "\"spec\":\"s\",\"figures\":{\"single_tokens_per_s\":100},\"status\":{}}]}}";
    cJSON *o = cJSON_Parse(json);
    assert_non_null(o);
    return o;
}

static void test_audit_member(void **state)
{
    (void)state;
    struct assay_diag diag;
    cJSON *o = audit_object();
    assay_diag_clear(&diag);
    assert_int_equal(assay_report_audit_validate(o, &diag), ASSAY_OK);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "model");
    assert_int_equal(assay_report_audit_validate(o, &diag), ASSAY_ERR_PARSE);
    char msg[600];
    assert_non_null(strstr(assay_diag_format(&diag, msg, sizeof msg), "audit.model"));
    cJSON_Delete(o);
    o = audit_object();
    cJSON *cmp = cJSON_GetObjectItemCaseSensitive(o, "comparison");
    cJSON_ReplaceItemInObjectCaseSensitive(cmp, "format", cJSON_CreateString("other"));
    assert_int_equal(assay_report_audit_validate(o, &diag), ASSAY_ERR_PARSE);
    cJSON_Delete(o);
    /* In a report: rendered in both formats, and a broken one refused. */
    cJSON *r = NULL;
    assert_int_equal(assay_report_create("audit", "assay audit", &r), ASSAY_OK);
    cJSON *stamp = NULL;
    assert_int_equal(assay_stamp_create(NULL, NULL, 0, &stamp), ASSAY_OK);
    assert_int_equal(assay_report_set(r, "stamp", stamp), ASSAY_OK);
    assert_int_equal(assay_report_set(r, "audit", audit_object()), ASSAY_OK);
    assay_diag_clear(&diag);
    assert_int_equal(assay_report_validate(r, &diag), ASSAY_OK);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(assay_report_render_markdown(r, &text, &len), ASSAY_OK);
    assert_non_null(strstr(text, "## Audit of the server"));
    assert_non_null(strstr(text, "| Single stream: output tokens/s (closed loop, 1 worker) | 100 |"));
    assay_free(text);
    assert_int_equal(assay_report_render_html(r, &text, &len), ASSAY_OK);
    assert_non_null(strstr(text, "<section id=\"audit\">"));
    assay_free(text);
    assert_int_equal(assay_report_set(r, "audit", cJSON_CreateString("no")), ASSAY_OK);
    assert_int_equal(assay_report_validate(r, &diag), ASSAY_ERR_PARSE);
    cJSON_Delete(r);
}

/* ------------------------------------------------------------------ */
/* The numerics of the logprobs check                                   */
/* ------------------------------------------------------------------ */

/* figures.numerics of a logprobs check is consistent with its
 * figures.logprobs: a "server" series (and the reference's on the same
 * positions when the budget was measured), its values those compared, its
 * largest |difference| and top-1 agreement the same, every figure finite
 * and each CDF non-decreasing from its smallest value to its largest. */
static void assert_numerics_consistent(const cJSON *c)
{
    const cJSON *arr = assay_json_path(c, "figures.numerics");
    assert_true(cJSON_IsArray(arr));
    assert_true(cJSON_GetArraySize(arr) == 1 || cJSON_GetArraySize(arr) == 2);
    if (cJSON_GetArraySize(arr) == 2) {
        const cJSON *ref = cJSON_GetArrayItem(arr, 1);
        assert_string_equal(assay_json_str(ref, "name", ""), "reference");
        assert_true(assay_json_num(ref, "n_positions") ==
                    assay_json_num(cJSON_GetArrayItem(arr, 0), "n_positions"));
    }
    const cJSON *sv = cJSON_GetArrayItem(arr, 0);
    assert_string_equal(assay_json_str(sv, "name", ""), "server");
    double n_values = assay_json_num(sv, "n_values");
    assert_true(n_values > 0 && n_values == assay_json_num(c, "figures.logprobs.n"));
    assert_true(assay_json_num(sv, "abs_diff.n") == n_values);
    assert_true(assay_json_num(sv, "abs_diff.max") ==
                assay_json_num(c, "figures.logprobs.max_diff"));
    assert_true(assay_json_num(sv, "abs_diff.median") ==
                assay_json_num(c, "figures.logprobs.median_diff"));
    assert_true(assay_json_num(sv, "abs_diff.p99") ==
                assay_json_num(c, "figures.logprobs.p99_diff"));
    assert_true(assay_json_num(sv, "top1_agreement") ==
                assay_json_num(c, "figures.logprobs.top1_agreement"));
    double n_positions = assay_json_num(sv, "n_positions");
    double n_kld = assay_json_num(sv, "kld.n");
    assert_true(n_positions == assay_json_num(c, "figures.n_tokens"));
    assert_true(n_kld >= 1 && n_kld <= n_positions && n_kld <= n_values);
    static const char *const dists[] = {"kld", "abs_diff"};
    for (int d = 0; d < 2; d++) {
        char path[64];
        static const char *const figs[] = {"mean", "median", "p99", "max"};
        for (int k = 0; k < 4; k++) {
            snprintf(path, sizeof path, "%s.%s", dists[d], figs[k]);
            double x = assay_json_num(sv, path);
            assert_true(isfinite(x) && x >= 0);
        }
        snprintf(path, sizeof path, "%s.cdf", dists[d]);
        const cJSON *cdf = assay_json_path(sv, path);
        assert_int_equal(cJSON_GetArraySize(cdf), 101);
        double prev = -1.0;
        const cJSON *x;
        cJSON_ArrayForEach(x, cdf)
        {
            assert_true(cJSON_IsNumber(x) && isfinite(x->valuedouble));
            if (x->valuedouble < prev) {
                fail_msg("%s not non-decreasing: %.17g after %.17g", path, x->valuedouble, prev);
            }
            prev = x->valuedouble;
        }
        snprintf(path, sizeof path, "%s.median", dists[d]);
        assert_true(cJSON_GetArrayItem(cdf, 50)->valuedouble == assay_json_num(sv, path));
        snprintf(path, sizeof path, "%s.p99", dists[d]);
        assert_true(cJSON_GetArrayItem(cdf, 99)->valuedouble == assay_json_num(sv, path));
        snprintf(path, sizeof path, "%s.max", dists[d]);
        assert_true(cJSON_GetArrayItem(cdf, 100)->valuedouble == assay_json_num(sv, path));
    }
}

/* The logprobs check against the fake server, every request well-behaved
 * (fake_server_set_mode): it returns its own tokens with two top logprobs of
 * its own (-0.25 and -1.75), not the model's, so the check fails and the
 * numerics it measures are far from zero, consistent with the logprob
 * figures, valid in a report and shown in both renderings. */
/* The mean-KLD rule's arithmetic on sums worked out by hand: 4 requests
 * of 20 positions, the reference's KLD 1e-3 a position. */
static void test_kld_rule_arithmetic(void **state)
{
    (void)state;
    double ref[4] = {0.02, 0.02, 0.02, 0.02}, srv[4];
    int32_t count[4] = {20, 20, 20, 20};
    struct assay_audit_kld k;
    /* The server at 1.4 times the reference in every request: within the
     * budget (1.5e-3), ratio 1.4 exactly, every left-out ratio 1.4, so a
     * standard error of 0. */
    for (int i = 0; i < 4; i++) {
        srv[i] = 1.4 * ref[i];
    }
    assay_audit_kld_rule(srv, ref, count, 4, 5, &k);
    assert_int_equal(k.n, 80);
    assert_true(fabs(k.reference - 1e-3) < 1e-15 && fabs(k.server - 1.4e-3) < 1e-15);
    assert_true(fabs(k.ratio - 1.4) < 1e-12 && fabs(k.budget - 1.5e-3) < 1e-15);
    assert_true(k.ratio_se < 1e-12 && fabs(k.ratio_lower - 1.4) < 1e-12 && !k.beyond);
    /* At 1.6 times, with a standard error of 0: beyond. */
    for (int i = 0; i < 4; i++) {
        srv[i] = 1.6 * ref[i];
    }
    assay_audit_kld_rule(srv, ref, count, 4, 5, &k);
    assert_true(k.beyond && fabs(k.ratio - 1.6) < 1e-12);
    /* One request at 2, three at 1: ratio 5/4; left out in turn, 1 (once)
     * and 4/3 (three times), so the jackknife variance is 3/4 times the
     * sum of squared deviations from their mean 5/4: 3/4 (1/16 + 3/144),
     * s.e. 0.25. */
    srv[0] = 2.0 * ref[0];
    srv[1] = srv[2] = srv[3] = ref[1];
    assay_audit_kld_rule(srv, ref, count, 4, 5, &k);
    assert_true(fabs(k.ratio - 1.25) < 1e-12 && !k.beyond);
    assert_true(fabs(k.ratio_se - 0.25) < 1e-12);
    /* The lower bound is the ratio less the t quantile (3 degrees of
     * freedom, 1 - ASSAY_AUDIT_KLD_ALPHA) times it: 4.541 at 0.99. */
    assert_true(fabs(k.ratio_lower - (1.25 - 4.540703 * 0.25)) < 1e-5);
    /* Twice that server: ratio 2.5 beyond the factor, but with a standard
     * error of 0.5 its bound (0.23) is not: an unlucky workload of a
     * correct server is not failed for one heavy request. */
    for (int i = 0; i < 4; i++) {
        srv[i] *= 2.0;
    }
    assay_audit_kld_rule(srv, ref, count, 4, 5, &k);
    assert_true(fabs(k.ratio - 2.5) < 1e-12 && fabs(k.ratio_se - 0.5) < 1e-12 && !k.beyond);
    for (int i = 0; i < 4; i++) {
        srv[i] /= 2.0;
    }
    /* A request without positions is left out of the jackknife. */
    double srv5[5] = {srv[0], srv[1], srv[2], srv[3], 0.0};
    double ref5[5] = {ref[0], ref[1], ref[2], ref[3], 0.0};
    int32_t count5[5] = {20, 20, 20, 20, 0};
    struct assay_audit_kld k5;
    assay_audit_kld_rule(srv5, ref5, count5, 5, 5, &k5);
    assert_true(k5.n == 80 && fabs(k5.ratio_se - 0.25) < 1e-12);
    /* Not judged: 49 positions; a reference whose mean, times the factor,
     * is within the floor (5 FLT_EPSILON + 2e-6), whatever the server. */
    int32_t few[4] = {12, 12, 12, 13};
    assay_audit_kld_rule(srv, ref, few, 4, 5, &k);
    assert_true(k.n == 0 && isnan(k.ratio) && !k.beyond);
    double exact[4] = {4e-5, 4e-5, 4e-5, 4e-5}; /* 2e-6 a position: 3e-6 > 2.6e-6 */
    assay_audit_kld_rule(srv, exact, count, 4, 5, &k);
    assert_int_equal(k.n, 80);
    double exacter[4] = {3e-5, 3e-5, 3e-5, 3e-5}; /* 1.5e-6: 2.25e-6 within the floor */
    assay_audit_kld_rule(srv, exacter, count, 4, 5, &k);
    assert_true(k.n == 0 && !k.beyond);
}

/* A quick audit of the fake server (FAKE_OK) with TinyGPT seed 1 as the
 * model, saved to a scratch file of the given name (its matrices in Q8_0
 * when q8_0): p points into the struct's own strings. */
struct fake_audit {
    char gguf[1024], fixtures[1024], url[64];
    struct fake_server *fs;
    struct assay_audit_params p;
};

static void fake_audit_start(struct fake_audit *f, const char *name, bool q8_0)
{
    assay_test_scratch(name, f->gguf, sizeof f->gguf);
    assay_test_fixture(".", f->fixtures, sizeof f->fixtures);
    struct assay_model_config cfg = assay_model_config_tinygpt();
    struct assay_model *m = NULL;
    assert_int_equal(assay_model_init_random(&m, &cfg, 1), ASSAY_OK);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_model_save_gguf(m, f->gguf, &diag), ASSAY_OK);
    assay_model_free(m);
    if (q8_0) {
        gguf_retype_file_q8_0(f->gguf);
    }
    assert_int_equal(fake_server_start(&f->fs), 0);
    fake_server_set_mode(f->fs, FAKE_OK);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", fake_server_port(f->fs));
    f->p = assay_audit_default_params();
    f->p.url = f->url;
    f->p.model_path = f->gguf;
    f->p.fixtures = f->fixtures;
    f->p.quick = true;
    f->p.stall_ms = 5000;
}

static void test_numerics_fake_server(void **state)
{
    (void)state;
    struct fake_audit f;
    fake_audit_start(&f, "audit-numerics-tinygpt-s1.gguf", false);
    struct fake_server *fs = f.fs;
    struct assay_audit_params p = f.p;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    struct assay_audit *a = NULL;
    if (assay_audit_open(&p, &a, &diag) != ASSAY_OK) {
        char msg[600];
        fake_server_stop(fs);
        fail_msg("audit open: %s", assay_diag_format(&diag, msg, sizeof msg));
    }
    size_t n_plan;
    const struct assay_plan_item *plan = assay_plan_for(ASSAY_COMMAND_AUDIT, &n_plan);
    const struct assay_plan_item *item = NULL;
    for (size_t i = 0; i < n_plan; i++) {
        item = strcmp(plan[i].name, "audit.equiv.logprobs") == 0 ? &plan[i] : item;
    }
    assert_non_null(item);
    struct assay_check_result res;
    assert_int_equal(assay_audit_run_check(a, item, &res), ASSAY_OK);
    /* The numerics budget, measured by the first check that needs it: the
     * reference computed the audit's default formats (an F16 KV cache,
     * flash attention) on an F32 file, so it moved the logprobs by more
     * than exact arithmetic does, and by far less than the fake's own. */
    const struct assay_audit_budget *bud = assay_audit_budget(a);
    printf("# budget: %s; %lld positions, reference max |diff| %.3g, gap change %.3g, TV mean "
           "%.3g; at the check's %lld positions max |diff| %.3g; budgets %.3g (logprob), %.3g "
           "(tie)\n",
           bud->formats, (long long)bud->n_positions, bud->ref_max_abs, bud->ref_max_gap,
           bud->tv_mean, (long long)bud->check_positions, bud->check_ref_max_abs, bud->logprob,
           bud->gap);
    assert_true(bud->measured);
    assert_true(bud->n_positions > 100);
    assert_true(bud->ref_max_abs > 1e-5 && bud->ref_max_abs < 0.1);
    /* The logprobs check measured the reference on its own positions too
     * (every output token of its requests), and the logprob budget is the
     * factor times the larger maximum; the tie budget is the prompts'. */
    assert_int_equal(bud->check_positions, res.n_tokens);
    assert_true(bud->check_ref_max_abs > 1e-5 && bud->check_ref_max_abs < 0.1);
    assert_true(bud->gap >= ASSAY_EQUIV_TIE_TOL && bud->logprob >= ASSAY_AUDIT_LOGPROB_TOL);
    assert_true(bud->logprob ==
                fmax(ASSAY_AUDIT_LOGPROB_TOL,
                     ASSAY_AUDIT_BUDGET_FACTOR * fmax(bud->ref_max_abs, bud->check_ref_max_abs)));
    assert_true(bud->gap == fmax(ASSAY_EQUIV_TIE_TOL, ASSAY_AUDIT_BUDGET_FACTOR * bud->ref_max_gap));
    /* An F32 file with heads of 32 and flash attention meets no fp16 dot
     * product: one variant of the reference, whose figures they are. */
    assert_int_equal(bud->n_variants, 1);
    assert_true(bud->variant_max_abs[0] == bud->ref_max_abs);
    assert_non_null(strstr(bud->formats, "KV cache f16"));
    assay_audit_close(a);
    /* Told the server computes exactly (f32 KV, no flash attention) on an
     * F32 file, the reference is exact arithmetic: the budgets are the
     * fixed tolerances. */
    p.kv_type = ASSAY_KV_TYPE_F32;
    p.flash_attn = false;
    assert_int_equal(assay_audit_open(&p, &a, &diag), ASSAY_OK);
    struct assay_check_result res_exact;
    assert_int_equal(assay_audit_run_check(a, item, &res_exact), ASSAY_OK);
    bud = assay_audit_budget(a);
    printf("# exact: reference max |diff| %.3g; budgets %.3g, %.3g\n", bud->ref_max_abs,
           bud->logprob, bud->gap);
    assert_true(bud->measured);
    assert_true(bud->ref_max_abs < 1e-4);
    assert_true(bud->logprob == ASSAY_AUDIT_LOGPROB_TOL && bud->gap == ASSAY_EQUIV_TIE_TOL);
    assert_non_null(strstr(bud->formats, "KV cache f32"));
    assay_audit_close(a);
    /* An F16 cache without flash attention sums the values in an fp16 dot
     * product over the keys: the reference is measured with fp32 lanes and
     * with fp16 accumulation, the budgets take the larger, and the check
     * carries the second variant's series too. */
    p.kv_type = ASSAY_KV_TYPE_F16;
    assert_int_equal(assay_audit_open(&p, &a, &diag), ASSAY_OK);
    struct assay_check_result res_two;
    assert_int_equal(assay_audit_run_check(a, item, &res_two), ASSAY_OK);
    bud = assay_audit_budget(a);
    printf("# f16 kv, fa off: reference max |diff| %.3g (fp32 lanes), %.3g (fp16 accumulation); "
           "at the check %.3g, %.3g; budget %.3g\n",
           bud->variant_max_abs[0], bud->variant_max_abs[1], bud->variant_check_max_abs[0],
           bud->variant_check_max_abs[1], bud->logprob);
    assert_int_equal(bud->n_variants, 2);
    assert_true(bud->variant_max_abs[0] > 1e-5 && bud->variant_max_abs[1] > 1e-5);
    assert_true(bud->ref_max_abs == fmax(bud->variant_max_abs[0], bud->variant_max_abs[1]));
    assert_true(bud->check_ref_max_abs ==
                fmax(bud->variant_check_max_abs[0], bud->variant_check_max_abs[1]));
    assert_true(bud->logprob ==
                fmax(ASSAY_AUDIT_LOGPROB_TOL,
                     ASSAY_AUDIT_BUDGET_FACTOR * fmax(bud->ref_max_abs, bud->check_ref_max_abs)));
    assert_int_equal(res_two.n_numerics, 3);
    assert_string_equal(res_two.numerics[2].name, "reference-f16acc");
    assert_int_equal(res_two.numerics[2].n_positions, res_two.numerics[0].n_positions);
    assay_audit_close(a);
    fake_server_stop(fs);
    printf("# %s %s: %.200s\n", res.name, assay_verdict_str(res.verdict), res.failure);
    assert_int_equal(res.verdict, ASSAY_VERDICT_FAIL);
    /* The server's series and the reference's on the same positions. */
    assert_int_equal(res.n_numerics, 2);
    assert_string_equal(res.numerics[1].name, "reference");
    assert_int_equal(res.numerics[1].n_positions, res.numerics[0].n_positions);
    assert_true(res.numerics[1].abs_diff.max < 0.1);
    assert_true(res.numerics[1].abs_diff.max < res.numerics[0].abs_diff.median);
    const struct assay_divergence_summary *sv = &res.numerics[0];
    printf("# numerics: %lld positions, %lld values; KLD median %.3g max %.3g; |diff| median "
           "%.3g max %.3g; top-1 %.3g\n",
           (long long)sv->n_positions, (long long)sv->n_values, sv->kld.median, sv->kld.max,
           sv->abs_diff.median, sv->abs_diff.max, sv->top1_agreement);
    /* The fake's probabilities (e^-0.25 + e^-1.75 = 0.95) are not the
     * model's: every position's KLD and most |differences| are well above
     * rounding. */
    assert_true(sv->kld.cdf[0] > 1e-3);
    assert_true(sv->abs_diff.median > 1e-2);
    /* The reference of an F32 file moves the logprobs by so little that
     * the mean-KLD rule has nothing to measure against (audit.h: within
     * its floor); nor in exact arithmetic. */
    assert_int_equal(res.kld_positions, 0);
    assert_int_equal(res_exact.kld_positions, 0);
    cJSON *c = NULL;
    assert_int_equal(assay_report_check_json(&res, &c), ASSAY_OK);
    assert_numerics_consistent(c);
    assert_null(assay_json_path(c, "figures.logprobs.kld"));
    cJSON_Delete(c);
    /* In a report: valid, shown in both renderings; a CDF cut short is
     * refused. */
    cJSON *r = NULL;
    assert_int_equal(assay_report_create("audit", "assay audit", &r), ASSAY_OK);
    cJSON *stamp = NULL;
    assert_int_equal(assay_stamp_create(NULL, NULL, 0, &stamp), ASSAY_OK);
    assert_int_equal(assay_report_set(r, "stamp", stamp), ASSAY_OK);
    assert_int_equal(assay_report_set(r, "audit", audit_object()), ASSAY_OK);
    assert_int_equal(assay_report_add_checks(r, &res, 1), ASSAY_OK);
    assay_diag_clear(&diag);
    assert_int_equal(assay_report_validate(r, &diag), ASSAY_OK);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(assay_report_render_markdown(r, &text, &len), ASSAY_OK);
    assert_non_null(strstr(text, "### Numerics"));
    assert_non_null(strstr(text, "| server |"));
    assay_free(text);
    assert_int_equal(assay_report_render_html(r, &text, &len), ASSAY_OK);
    assert_non_null(strstr(text, "<h3>Numerics"));
    assert_non_null(strstr(text, "Per-position KLD"));
    assert_non_null(strstr(text, "|Δ logprob| of each top logprob"));
    assay_free(text);
    const cJSON *check0 = cJSON_GetArrayItem(assay_json_path(r, "checks"), 0);
    const cJSON *series0 = cJSON_GetArrayItem(assay_json_path(check0, "figures.numerics"), 0);
    cJSON *cdf =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(series0, "kld"), "cdf");
    assert_non_null(cdf);
    cJSON_DeleteItemFromArray(cdf, 0);
    assert_int_equal(assay_report_validate(r, &diag), ASSAY_ERR_PARSE);
    char msg[600];
    assert_non_null(strstr(assay_diag_format(&diag, msg, sizeof msg), "kld.cdf"));
    cJSON_Delete(r);
}

/* The mean-KLD rule (audit.h) where the formats' divergence is measurable:
 * TinyGPT stored as Q8_0, whose reference rounds the products' inputs to
 * Q8_0 blocks. The fake server's canned probabilities are far from the
 * model's, so its mean KLD is far beyond the factor times the
 * reference's; the figures agree with the series and reach the report. */
static void test_kld_rule(void **state)
{
    (void)state;
    struct fake_audit f;
    fake_audit_start(&f, "audit-kld-tinygpt-q8_0.gguf", true);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    struct assay_audit *a = NULL;
    assert_int_equal(assay_audit_open(&f.p, &a, &diag), ASSAY_OK);
    const struct assay_plan_item *item = assay_plan_find_in(ASSAY_COMMAND_AUDIT,
                                                            "audit.equiv.logprobs");
    assert_non_null(item);
    struct assay_check_result res;
    assert_int_equal(assay_audit_run_check(a, item, &res), ASSAY_OK);
    assay_audit_close(a);
    fake_server_stop(f.fs);
    printf("# mean KLD over %lld positions: server %.3g, reference %.3g, ratio %.3g (s.e. %.3g), "
           "budget %.3g\n",
           (long long)res.kld_positions, res.kld_server, res.kld_reference, res.kld_ratio,
           res.kld_ratio_se, res.kld_budget);
    assert_int_equal(res.verdict, ASSAY_VERDICT_FAIL);
    /* Every position was measured by both (the series hold the same
     * values), the reference's mean clears the floor, and the server's is
     * beyond the factor times it. */
    assert_int_equal(res.n_numerics, 2);
    const struct assay_divergence_summary *sv = &res.numerics[0], *rv = &res.numerics[1];
    assert_true(res.kld_positions >= ASSAY_AUDIT_KLD_MIN_POSITIONS);
    assert_int_equal(res.kld_positions, sv->kld.n);
    assert_int_equal(res.kld_positions, rv->kld.n);
    assert_true(fabs(res.kld_server - sv->kld.mean) <= 1e-9 * sv->kld.mean);
    assert_true(fabs(res.kld_reference - rv->kld.mean) <= 1e-9 * rv->kld.mean);
    assert_true(res.kld_reference * ASSAY_AUDIT_KLD_FACTOR >
                2.0 * ASSAY_AUDIT_LOGPROB_TOL * ASSAY_AUDIT_LOGPROB_TOL);
    assert_true(fabs(res.kld_ratio * res.kld_reference - res.kld_server) <= 1e-9 * res.kld_server);
    assert_true(res.kld_budget == ASSAY_AUDIT_KLD_FACTOR * res.kld_reference);
    assert_true(res.kld_server > res.kld_budget && res.kld_ratio_se > 0.0);
    assert_true(res.kld_ratio_lower > ASSAY_AUDIT_KLD_FACTOR);
    cJSON *c = NULL;
    assert_int_equal(assay_report_check_json(&res, &c), ASSAY_OK);
    assert_true(assay_json_num(c, "figures.logprobs.kld.n") == (double)res.kld_positions);
    assert_true(assay_json_num(c, "figures.logprobs.kld.ratio") == res.kld_ratio);
    assert_true(assay_json_num(c, "figures.logprobs.kld.budget") == res.kld_budget);
    assert_true(assay_json_num(c, "figures.logprobs.kld.ratio_lower") == res.kld_ratio_lower);
    cJSON_Delete(c);
    assert_non_null(strstr(res.summary, "times the reference's"));
}

/* ------------------------------------------------------------------ */
/* Against llama-server                                                 */
/* ------------------------------------------------------------------ */

static char g_url[512];
static char g_gguf[1024];

static int live_setup(void **state)
{
    (void)state;
    const char *dir = getenv("ASSAY_LLAMA_STATE");
    const char *gguf = getenv("ASSAY_LLAMA_GGUF");
    if (dir == NULL || gguf == NULL || g_assay == NULL) {
        fprintf(stderr, "test_audit: ASSAY_LLAMA_STATE and ASSAY_LLAMA_GGUF must be set and the "
                        "assay command given (run it through ctest -L audit)\n");
        return -1;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/url", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(g_url, sizeof g_url, f) == NULL) {
        fprintf(stderr, "test_audit: no server URL in %s: is llama-server running?\n", path);
        if (f != NULL) {
            fclose(f);
        }
        return -1;
    }
    fclose(f);
    g_url[strcspn(g_url, "\r\n")] = '\0';
    snprintf(g_gguf, sizeof g_gguf, "%s", gguf);
    return 0;
}

/* Run a command, echoing its output as it comes (ctest keeps it); returns
 * its exit status. */
static int run(const char *cmd)
{
    printf("# %s\n", cmd);
    fflush(stdout);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static cJSON *load_report(const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/report.json", dir);
    cJSON *r = NULL;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_report_load(path, &r, &diag) != ASSAY_OK) {
        char msg[800];
        fail_msg("%s", assay_diag_format(&diag, msg, sizeof msg));
    }
    return r;
}

static const cJSON *find_check(const cJSON *r, const char *name)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(r, "checks"))
    {
        if (strcmp(assay_json_str(c, "name", ""), name) == 0) {
            return c;
        }
    }
    fail_msg("no check %s in the report", name);
    return NULL;
}

static void test_live(void **state)
{
    (void)state;
    char out[1024], cmd[4096];
    assay_test_scratch("audit-live", out, sizeof out);
    /* The fixture's server computes exactly (ASSAY_LLAMA_SERVER_ARGS: an
     * f32 KV cache, no flash attention), and the audit is told so: its
     * budgets are then the fixed tolerances. */
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && '%s' audit --url '%s' --model '%s' --out '%s' --quick "
             "--kv-type f32 --flash-attn off",
             out, g_assay, g_url, g_gguf, out);
    int rc = run(cmd);
    cJSON *r = load_report(out);
    assert_string_equal(assay_json_str(r, "command", ""), "audit");
    size_t n_plan;
    const struct assay_plan_item *plan = assay_plan_for(ASSAY_COMMAND_AUDIT, &n_plan);
    assert_int_equal((size_t)assay_json_num(r, "counts.checks"), n_plan);
    for (size_t i = 0; i < n_plan; i++) {
        const cJSON *c = find_check(r, plan[i].name);
        const char *v = assay_json_str(c, "verdict", "");
        if (strcmp(plan[i].name, "audit.prop.idle-kv") == 0) {
            /* This llama.cpp exports no KV-cache gauge: could not be
             * checked, and the report says why. */
            assert_string_equal(v, "SKIP");
            assert_non_null(strstr(assay_json_str(c, "failure", ""), "KV-cache gauge"));
            continue;
        }
        if (strcmp(v, "PASS") != 0) {
            fail_msg("%s: %s: %s", plan[i].name, v, assay_json_str(c, "failure", ""));
        }
    }
    assert_int_equal(rc, 0);
    /* The numerics of the logprobs check: consistent, and small where
     * every value is within the logprob tolerance. */
    const cJSON *lp = find_check(r, "audit.equiv.logprobs");
    assert_numerics_consistent(lp);
    assert_true(assay_json_num(lp, "figures.logprobs.max_diff") <= 1e-3);
    assert_true(assay_json_num(r, "audit.logprob_tol") == ASSAY_AUDIT_LOGPROB_TOL);
    assert_true(assay_json_bool(r, "audit.numerics_budget.measured"));
    const cJSON *sv = cJSON_GetArrayItem(assay_json_path(lp, "figures.numerics"), 0);
    assert_true(assay_json_num(sv, "kld.max") < 1e-2);
    /* The distributional checks state their power. */
    const cJSON *gof = find_check(r, "audit.dist.gof.t1");
    assert_true(assay_json_num(gof, "figures.min_tv") > 0 &&
                assay_json_num(gof, "figures.min_tv") < 0.2);
    /* Both engines side by side, measured in this run. */
    const cJSON *engines = assay_json_path(r, "audit.comparison.engines");
    assert_int_equal(cJSON_GetArraySize(engines), 2);
    static const char *const figs[] = {"single_tokens_per_s", "batched_tokens_per_s", "ttft_p50",
                                       "ttft_p99"};
    const cJSON *e;
    cJSON_ArrayForEach(e, engines)
    {
        printf("# %-8s", assay_json_str(e, "name", ""));
        for (size_t k = 0; k < sizeof figs / sizeof figs[0]; k++) {
            char path[64];
            snprintf(path, sizeof path, "figures.%s", figs[k]);
            double x = assay_json_num(e, path);
            printf("  %s %.4g", figs[k], x);
            assert_true(isfinite(x) && x > 0);
        }
        printf("\n");
    }
    /* --quick: the benchmark ran the default workload's first 24 of its 48
     * requests, and a note says so. */
    assert_int_equal((int)assay_json_num(r, "benchmark.workload.n_requests"), 24);
    bool said = false;
    const cJSON *note;
    cJSON_ArrayForEach(note, assay_json_path(r, "notes"))
    {
        said = said || (cJSON_IsString(note) &&
                        strstr(note->valuestring, "first 24 of its 48 requests") != NULL);
    }
    assert_true(said);
    assert_string_equal(assay_json_str(r, "audit.server.url", ""), g_url);
    assert_true(cJSON_GetArraySize(assay_json_path(r, "audit.findings")) >= 1);
    char md[2600];
    snprintf(md, sizeof md, "grep -q '## Audit of the server' '%s/report.md' && grep -q "
                            "'id=\"audit\"' '%s/report.html'",
             out, out);
    assert_int_equal(run(md), 0);
    cJSON_Delete(r);
}

/* The must-fail controls. */
static void test_mustfail(void **state)
{
    (void)state;
    char out[1024], cmd[4096], other[1024];
    /* Other weights for the oracle: TinyGPT seed 2. */
    assay_test_scratch("audit-tinygpt-s2.gguf", other, sizeof other);
    struct assay_model_config cfg = assay_model_config_tinygpt();
    struct assay_model *m = NULL;
    assert_int_equal(assay_model_init_random(&m, &cfg, 2), ASSAY_OK);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_model_save_gguf(m, other, &diag), ASSAY_OK);
    assay_model_free(m);
    assay_test_scratch("audit-mustfail-weights", out, sizeof out);
    static const char *const seen[] = {"audit.equiv.alone", "audit.equiv.logprobs",
                                       "audit.dist.gof.t1", "audit.dist.homogeneity"};
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && '%s' audit --url '%s' --model '%s' --out '%s' --quick --check %s "
             "--check %s --check %s --check %s --kv-type f32 --flash-attn off",
             out, g_assay, g_url, other, out, seen[0], seen[1], seen[2], seen[3]);
    assert_int_equal(run(cmd), 1);
    cJSON *r = load_report(out);
    /* The equivalence and goodness-of-fit checks see the other weights; the
     * two-sample test compares the server with a bundled engine loading
     * those other weights, so it sees them too. */
    for (size_t i = 0; i < sizeof seen / sizeof seen[0]; i++) {
        const cJSON *c = find_check(r, seen[i]);
        assert_string_equal(assay_json_str(c, "verdict", ""), "FAIL");
        assert_non_null(strstr(assay_json_str(c, "repro", ""), "--check"));
        printf("# %s FAIL: %.160s\n", seen[i], assay_json_str(c, "failure", ""));
    }
    cJSON_Delete(r);

    /* The same other weights with the audit told the server's default
     * formats (an F16 KV cache, flash attention): the goodness of fit
     * tests "within twice the reference's distance", and other weights
     * are far beyond that. */
    assay_test_scratch("audit-mustfail-weights-f16", out, sizeof out);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && '%s' audit --url '%s' --model '%s' --out '%s' --quick --check "
             "audit.dist.gof.t1",
             out, g_assay, g_url, other, out);
    assert_int_equal(run(cmd), 1);
    r = load_report(out);
    const cJSON *gf = find_check(r, "audit.dist.gof.t1");
    assert_string_equal(assay_json_str(gf, "verdict", ""), "FAIL");
    assert_non_null(strstr(assay_json_str(gf, "summary", ""), "x the reference's TV"));
    assert_non_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(gf,
                                                                                      "figures"),
                                                     "tolerance"));
    assert_non_null(strstr(assay_json_str(gf, "failure", ""), "beyond the budget"));
    printf("# audit.dist.gof.t1 (default formats) FAIL: %.300s\n",
           assay_json_str(gf, "summary", ""));
    cJSON_Delete(r);

    /* A server that misbehaves on some requests (suites/fake_server.c: the
     * first prompt token picks the behaviour, and about one request in ten
     * of the audit's generated prompts picks a misbehaviour: too many
     * tokens, an HTTP error, a cut stream, a BOS counted, ...), and that
     * streams when asked not to: the checks that judge how requests end,
     * what the server counts and what a non-streamed answer holds must
     * fail. Its /metrics is a 404: the idle check cannot run (SKIP). */
    struct fake_server *fs = NULL;
    assert_int_equal(fake_server_start(&fs), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", fake_server_port(fs));
    assay_test_scratch("audit-mustfail-server", out, sizeof out);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && '%s' audit --url '%s' --model '%s' --out '%s' --quick --stall-ms 2000 "
             "--check audit.prop.finish --check audit.prop.usage --check audit.prop.stream "
             "--check audit.prop.idle-requests",
             out, g_assay, url, g_gguf, out);
    int rc = run(cmd);
    /* And a server that takes the seed but ignores it (every request of the
     * fake's well-behaved mode gets tokens that follow its prompt alone):
     * the seeded checks must fail - distinct seeds one stream, unseeded
     * requests one stream, the pairs' first tokens all in one bin. */
    fake_server_set_mode(fs, FAKE_OK);
    char seeds_out[1024], seeds_cmd[4096];
    assay_test_scratch("audit-mustfail-seeds", seeds_out, sizeof seeds_out);
    snprintf(seeds_cmd, sizeof seeds_cmd,
             "rm -rf '%s' && '%s' audit --url '%s' --model '%s' --out '%s' --quick --stall-ms 2000 "
             "--check audit.seed.positions --check audit.seed.unseeded --check audit.seed.pairs",
             seeds_out, g_assay, url, g_gguf, seeds_out);
    int seeds_rc = run(seeds_cmd);
    fake_server_stop(fs);
    assert_int_equal(seeds_rc, 1);
    r = load_report(seeds_out);
    static const char *const seeded[] = {"audit.seed.positions", "audit.seed.unseeded",
                                         "audit.seed.pairs"};
    static const char *const said[] = {"two seeds, one stream", "share one random stream",
                                       "does not reach the sampler"};
    for (size_t i = 0; i < sizeof seeded / sizeof seeded[0]; i++) {
        const cJSON *c = find_check(r, seeded[i]);
        assert_string_equal(assay_json_str(c, "verdict", ""), "FAIL");
        printf("# %s FAIL: %.160s\n", seeded[i], assay_json_str(c, "failure", ""));
        assert_non_null(strstr(assay_json_str(c, "failure", ""), said[i]));
    }
    cJSON_Delete(r);
    assert_int_equal(rc, 1);
    r = load_report(out);
    static const char *const fail[] = {"audit.prop.finish", "audit.prop.usage",
                                       "audit.prop.stream"};
    for (size_t i = 0; i < sizeof fail / sizeof fail[0]; i++) {
        const cJSON *c = find_check(r, fail[i]);
        assert_string_equal(assay_json_str(c, "verdict", ""), "FAIL");
        printf("# %s FAIL: %.160s\n", fail[i], assay_json_str(c, "failure", ""));
    }
    const cJSON *idle = find_check(r, "audit.prop.idle-requests");
    assert_string_equal(assay_json_str(idle, "verdict", ""), "SKIP");
    cJSON_Delete(r);
}

/* The audit's generated workloads are fixture files drawn with the audit's
 * seed: the same file and seed give the same requests, another seed other
 * prompts, quick=N that many requests; a file that lists its requests
 * cannot be drawn again. Every registered audit workload loads, and so does
 * the numerics budget's. */
static void test_audit_workloads(void **state)
{
    (void)state;
    char path[1200];
    struct assay_workload_limits lim = {1024, 512, 0};
    struct assay_diag diag;
    size_t n_plan;
    const struct assay_plan_item *plan = assay_plan_for(ASSAY_COMMAND_AUDIT, &n_plan);
    int32_t n_files = 0;
    for (size_t i = 0; i < n_plan; i++) {
        if (plan[i].workload == NULL || strncmp(plan[i].workload, "workloads/audit-", 16) != 0) {
            continue;
        }
        n_files++;
        assay_test_fixture(plan[i].workload, path, sizeof path);
        struct assay_workload *plain = NULL, *a = NULL, *b = NULL, *other = NULL, *quick = NULL;
        assert_int_equal(assay_workload_load(path, &lim, &plain, &diag), ASSAY_OK);
        struct assay_workload_draw d1 = {7, 0}, d2 = {8, 0}, dq = {7, 5};
        assert_int_equal(assay_workload_load_drawn(path, &lim, &d1, &a, &diag), ASSAY_OK);
        assert_int_equal(assay_workload_load_drawn(path, &lim, &d1, &b, &diag), ASSAY_OK);
        assert_int_equal(assay_workload_load_drawn(path, &lim, &d2, &other, &diag), ASSAY_OK);
        assert_int_equal(assay_workload_load_drawn(path, &lim, &dq, &quick, &diag), ASSAY_OK);
        assert_int_equal(a->n, plain->n);
        assert_int_equal(quick->n, 5);
        /* --quick draws fewer requests than the full audit, never more */
        char q[16] = "";
        assay_plan_param(plan[i].params, "quick", q, sizeof q);
        assert_true(q[0] == 0 || (strtol(q, NULL, 10) > 0 && strtol(q, NULL, 10) < plain->n));
        bool same = true, differs = false;
        for (int32_t r = 0; r < a->n; r++) {
            same = same && a->reqs[r].prompt_len == b->reqs[r].prompt_len &&
                   memcmp(a->reqs[r].prompt, b->reqs[r].prompt,
                          sizeof(int32_t) * (size_t)a->reqs[r].prompt_len) == 0;
            differs = differs || a->reqs[r].prompt_len != other->reqs[r].prompt_len ||
                      memcmp(a->reqs[r].prompt, other->reqs[r].prompt,
                             sizeof(int32_t) * (size_t)a->reqs[r].prompt_len) != 0;
        }
        assert_true(same);
        assert_true(differs);
        assay_workload_free(plain);
        assay_workload_free(a);
        assay_workload_free(b);
        assay_workload_free(other);
        assay_workload_free(quick);
    }
    assert_int_equal(n_files, 5);
    struct assay_workload *w = NULL;
    struct assay_workload_draw d = {7, 0};
    /* The logprobs check's positions reach the far end of the context the
     * audit requires, where a wrong RoPE has grown; the budget's prompts are
     * short, and every draw of them loads. */
    assay_test_fixture(assay_plan_find_in(ASSAY_COMMAND_AUDIT, "audit.equiv.logprobs")->workload,
                       path, sizeof path);
    assert_int_equal(assay_workload_load(path, &lim, &w, &diag), ASSAY_OK);
    int32_t longest = 0;
    for (int32_t r = 0; r < w->n; r++) {
        longest = w->reqs[r].prompt_len > longest ? w->reqs[r].prompt_len : longest;
    }
    assert_true(longest > ASSAY_AUDIT_MIN_CONTEXT * 3 / 4);
    assay_workload_free(w);
    /* ... and spread over their range: one prompt in each of n equal
     * parts, for the full draw and the quick one. */
    for (int32_t n = 12; n <= 48; n += 36) {
        struct assay_workload_draw ds = {9, n};
        assert_int_equal(assay_workload_load_drawn(path, &lim, &ds, &w, &diag), ASSAY_OK);
        int32_t len[48];
        for (int32_t r = 0; r < n; r++) {
            int32_t k = r;
            for (; k > 0 && len[k - 1] > w->reqs[r].prompt_len; k--) {
                len[k] = len[k - 1];
            }
            len[k] = w->reqs[r].prompt_len;
        }
        const double width = 470.0 / n;
        for (int32_t k = 0; k < n; k++) {
            assert_true(len[k] >= 1 + (int32_t)floor(k * width));
            assert_true(len[k] <= 1 + (int32_t)floor((k + 1) * width));
        }
        assay_workload_free(w);
    }
    /* Only the prompts' lengths are stratified. */
    const char *bad = "{\"format\":\"assay-workload\",\"version\":1,\"name\":\"s\","
                      "\"generate\":{\"seed\":1,\"n\":4,\"prompt_len\":{\"dist\":"
                      "\"stratified\",\"min\":1,\"max\":9},\"output_len\":{\"dist\":"
                      "\"stratified\",\"min\":1,\"max\":9}}}";
    w = NULL;
    assert_int_equal(assay_workload_parse(bad, strlen(bad), "s.json", &lim, &w, &diag),
                     ASSAY_ERR_PARSE);
    assert_string_equal(diag.where, "generate.output_len.dist");
    assay_test_fixture(ASSAY_AUDIT_BUDGET_WORKLOAD, path, sizeof path);
    assert_int_equal(assay_workload_load_drawn(path, &lim, &d, &w, &diag), ASSAY_OK);
    assert_true(w->n >= 8);
    for (int32_t r = 0; r < w->n; r++) {
        assert_true(w->reqs[r].prompt_len <= 96);
    }
    assay_workload_free(w);
    w = NULL;
    assay_test_fixture("workloads/prop-trace.json", path, sizeof path);
    assert_int_equal(assay_workload_load_drawn(path, &lim, &d, &w, &diag), ASSAY_ERR_PARSE);
    assert_null(w);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const char *mode = argc > 1 ? argv[1] : "";
    g_assay = argc > 2 ? argv[2] : NULL;
    if (strcmp(mode, "unit") == 0) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_gate_limit),
            cmocka_unit_test(test_gate_continue),
            cmocka_unit_test(test_prom),
            cmocka_unit_test(test_versus),
            cmocka_unit_test(test_audit_member),
            cmocka_unit_test(test_audit_workloads),
            cmocka_unit_test(test_numerics_fake_server),
            cmocka_unit_test(test_kld_rule),
            cmocka_unit_test(test_kld_rule_arithmetic),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
    }
    if (strcmp(mode, "live") == 0) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_live)};
        return cmocka_run_group_tests(tests, live_setup, NULL);
    }
    if (strcmp(mode, "mustfail") == 0) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_mustfail)};
        return cmocka_run_group_tests(tests, live_setup, NULL);
    }
    fprintf(stderr, "usage: %s unit | live ASSAY | mustfail ASSAY\n", argv[0]);
    return 2;
}
