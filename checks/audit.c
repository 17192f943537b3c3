/*
 * audit.c - an audit of a server (see audit.h): opening it (the server's
 * adapters, the oracle's copy of the weights, the bundled engine beside it,
 * the server's idle state), the target every audit check is judged on, and
 * running one check. The checks are in audit_checks.c.
 */
#include "audit.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../adapters/prom.h"
#include "../adapters/prom_http.h"
#include "../adapters/spec.h"
#include "../core/alloc.h"
#include "../core/clock.h"
#include "../oracles/oracle.h"
#include "distributional.h"
#include "equivalence.h"
#include "shard.h"
#include "stats.h"
#include "context.h"

#include "audit_internal.h"

/* The gauges the idle checks look for, by server. */
static const struct {
    const char *name;
    bool kv;
} k_gauges[] = {
    {"llamacpp:requests_processing", false},
    {"llamacpp:requests_deferred", false},
    {"vllm:num_requests_running", false},
    {"vllm:num_requests_waiting", false},
    {"sglang:num_running_reqs", false},
    {"sglang:num_queue_reqs", false},
    {"tgi_queue_size", false},
    {"tgi_batch_current_size", false},
    {"llamacpp:kv_cache_usage_ratio", true},
    {"llamacpp:kv_cache_tokens", true},
    {"vllm:gpu_cache_usage_perc", true},
    {"vllm:kv_cache_usage_perc", true},
    {"sglang:token_usage", true},
    {"sglang:num_used_tokens", true},
    {"tgi_batch_current_max_tokens", true},
};

/* ---- small helpers ------------------------------------------------------ */

void assay_audit_note(struct assay_audit *a, const char *fmt, ...)
{
    if (a->n_findings == MAX_FINDINGS) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->findings[a->n_findings], sizeof a->findings[0], fmt, ap);
    va_end(ap);
    /* The same sentence twice (a check run again) is said once. */
    for (size_t i = 0; i < a->n_findings; i++) {
        if (strcmp(a->findings[i], a->findings[a->n_findings]) == 0) {
            return;
        }
    }
    a->n_findings++;
}

static double since(int64_t t0)
{
    return (double)(assay_now_ns() - t0) / 1e9;
}

static enum assay_status open_server(const struct assay_audit *a, int32_t n_probs, bool stream,
                                     int cache_prompt, struct assay_adapter *out,
                                     struct assay_diag *diag)
{
    struct assay_openai_params op = assay_openai_default_params();
    op.url = a->url;
    op.model = a->served[0] != '\0' ? a->served : NULL;
    op.api = a->p.api;
    op.n_probs = n_probs;
    op.vocab = a->model->cfg.vocab;
    op.n_ctx = a->model->cfg.n_ctx;
    op.eos_token = a->p.eos_token;
    op.stall_timeout_ms = a->p.stall_ms;
    op.stream = stream;
    op.cache_prompt = cache_prompt;
    return assay_openai_open(&op, out, diag);
}

/* ---- the server's metrics ---------------------------------------------------------- */

/* Read /metrics into the gauges' `idle` (baseline) or `after` values.
 * Returns false with metrics_status set when the page cannot be read. */
bool assay_audit_read_metrics(struct assay_audit *a, bool baseline)
{
    char *body = NULL;
    size_t len = 0;
    long code = 0;
    char msg[300];
    enum assay_status st = assay_prom_http_get(&a->srv, "/metrics", METRICS_MAX_BYTES, &body,
                                               &len, &code, msg, sizeof msg);
    if (st != ASSAY_OK) {
        snprintf(a->metrics_status, sizeof a->metrics_status, "GET /metrics failed: %s", msg);
        return false;
    }
    if (code != 200) {
        snprintf(a->metrics_status, sizeof a->metrics_status,
                 "GET /metrics answered HTTP %ld%s", code,
                 code == 501 ? " (llama-server serves it only when started with --metrics)"
                 : code == 404
                     ? " (the server has no metrics page; vLLM, SGLang and TGI serve one by "
                       "default, llama-server with --metrics)"
                     : "");
        assay_free(body);
        return false;
    }
    for (size_t i = 0; i < a->n_gauges; i++) {
        struct assay_audit_gauge *g = &a->gauges[i];
        double v = 0.0;
        int32_t n = assay_prom_sum(body, len, g->name, &v);
        if (baseline) {
            g->present = n > 0;
            g->idle = n > 0 ? v : NAN;
        } else {
            g->after = n > 0 ? v : NAN;
        }
    }
    assay_free(body);
    a->metrics_status[0] = '\0';
    return true;
}

bool assay_audit_gauge_back(const struct assay_audit_gauge *g)
{
    if (!g->present) {
        return true;
    }
    if (!g->kv) {
        return g->after == 0.0;
    }
    return fabs(g->after - g->idle) <= 1e-9 + 1e-6 * fabs(g->idle);
}

/* Poll /metrics until every present gauge of the kind is back, for at most
 * IDLE_WAIT_NS. */
/* ---- opening and running ------------------------------------------------------------ */

struct assay_audit_params assay_audit_default_params(void)
{
    struct assay_audit_params p;
    memset(&p, 0, sizeof p);
    p.api = ASSAY_OPENAI_API_COMPLETION;
    p.seed = 1;
    p.eos_token = ASSAY_AUDIT_EOS_FROM_MODEL;
    p.slots = 4;
    p.n_probs = 5;
    p.stall_ms = 60000;
    p.order = ASSAY_SAMPLING_SEQUENTIAL;
    p.program = "assay";
    p.kv_type = ASSAY_KV_TYPE_F16;
    p.flash_attn = true;
    return p;
}

const char *assay_audit_numerics_spec(const struct assay_audit_params *p)
{
    if (p->kv_type == ASSAY_KV_TYPE_F16) {
        return p->flash_attn ? "act=ggml,kv_type=f16,fa=on" : "act=ggml,kv_type=f16,fa=off";
    }
    return "act=ggml,kv_type=f32,fa=off";
}

/* The memory available now in bytes: ASSAY_MEM_AVAILABLE when set (a
 * limit of the caller's), else /proc/meminfo's MemAvailable; -1 when
 * neither can be read. */
static int64_t mem_available(void)
{
    const char *env = getenv("ASSAY_MEM_AVAILABLE");
    if (env != NULL && *env != '\0') {
        char *end;
        long long v = strtoll(env, &end, 10);
        return *end == '\0' && v > 0 ? (int64_t)v : -1;
    }
    FILE *fp = fopen("/proc/meminfo", "r");
    if (fp == NULL) {
        return -1;
    }
    char line[256];
    long long kb = -1;
    while (kb < 0 && fgets(line, sizeof line, fp) != NULL) {
        if (sscanf(line, "MemAvailable: %lld kB", &kb) != 1) {
            kb = -1;
        }
    }
    fclose(fp);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

/* The fp32 copies of the weights a resident audit holds: the oracle's
 * (which the bundled engine reads too), the bundled engine's two layouts
 * (its own product's and OpenBLAS's), the reference's layout, and for a
 * file in integer formats the engine's integer layout (engine/gemmq.h: up
 * to 12 bits a weight, 0.375 of a copy); without the bundled engine, the
 * oracle's and the reference's. */
#define RESIDENT_COPIES 4.375
#define REFERENCE_COPIES 2

/* How the audit holds its weights (assay_audit_weights): set a->mapped and
 * a->engine_off, and then a->engine_off_why. A file whose configuration
 * cannot be read is left to the load, which says why. Under MPI a rank
 * counts its share of its machine's memory (divided among the ranks
 * there), and every rank the least share among the ranks, so that all
 * choose alike: a rank without the bundled engine would skip the two-sample
 * test the others share. */
static void choose_weights(struct assay_audit *a)
{
    if (a->p.weights == ASSAY_AUDIT_WEIGHTS_MAPPED) {
        a->mapped = a->engine_off = true;
        snprintf(a->engine_off_why, sizeof a->engine_off_why,
                 "the weights are mapped (--weights mapped)");
        return;
    }
    if (a->p.weights != ASSAY_AUDIT_WEIGHTS_AUTO) {
        return;
    }
    int64_t least = mem_available();
    least = least < 0 ? INT64_MAX : least / assay_shard_local_size(); /* unknown: no limit */
    if (assay_shard_world_min(&least) != ASSAY_OK) {
        least = INT64_MAX; /* the backend ends the run; resident meanwhile */
    }
    struct assay_model_config cfg;
    if (assay_model_config_from_gguf(a->model_path, &cfg, NULL) != ASSAY_OK) {
        return;
    }
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const double fp32 = (double)assay_model_config_n_params(&cfg) * sizeof(float);
    const double avail = least == INT64_MAX ? -1.0 : (double)least;
    if (avail <= 0.0 || RESIDENT_COPIES * fp32 <= 0.8 * avail) {
        return;
    }
    a->engine_off = true;
    a->mapped = REFERENCE_COPIES * fp32 > 0.8 * avail;
    snprintf(a->engine_off_why, sizeof a->engine_off_why,
             "%s: with the bundled engine's layouts the weights in fp32 would take "
             "about %.1f GiB, more than 80%% of the %.1f GiB available%s%s",
             a->mapped ? "the weights are mapped" : "too little memory",
             RESIDENT_COPIES * fp32 / gib, avail / gib,
             assay_shard_world_size() > 1 ? " to a rank (the least share among the ranks)" : "",
             a->mapped ? ", and the oracle's and the reference's copies alone more than that"
                       : "; the oracle and the reference hold them resident");
}

/* One greedy 1-token request: the server answers token-id prompts. */
static enum assay_status probe(struct assay_audit *a, struct assay_diag *diag)
{
    int32_t prompt[3] = {72, 105, 33};
    struct assay_request r;
    memset(&r, 0, sizeof r);
    r.id = 1;
    r.prompt = prompt;
    r.prompt_len = 3;
    r.max_tokens = 1;
    r.stop_token = -1;
    r.sampling = assay_sampling_greedy();
    enum assay_status st = a->srv.vt->add_request(a->srv.self, &r);
    if (st != ASSAY_OK) {
        assay_diag_set(diag, a->url, "probe", "a request the adapter accepts", "%s",
                       a->srv.vt->last_error(a->srv.self));
        return st;
    }
    char why[600] = "";
    enum assay_finish_reason reason = ASSAY_FINISH_NONE;
    int32_t err = 0;
    while (a->srv.vt->has_work(a->srv.self)) {
        const struct assay_event *ev = NULL;
        size_t n = 0;
        st = a->srv.vt->step(a->srv.self, &ev, &n);
        if (st != ASSAY_OK) {
            break;
        }
        for (size_t k = 0; k < n; k++) {
            if (ev[k].kind == ASSAY_EVENT_FINISH) {
                reason = ev[k].reason;
                err = ev[k].error;
                snprintf(why, sizeof why, "%s", ev[k].message != NULL ? ev[k].message : "");
            }
        }
    }
    if (st == ASSAY_OK && reason != ASSAY_FINISH_LENGTH) {
        st = err != 0 ? (enum assay_status)err : ASSAY_ERR_NET;
    }
    if (st != ASSAY_OK) {
        assay_diag_set(diag, a->url, "a 1-token request with a token-id prompt",
                       "an answer with the generated token id", "%s",
                       why[0] != '\0' ? why : assay_status_str(st));
    }
    return st;
}

enum assay_status assay_audit_open(const struct assay_audit_params *p, struct assay_audit **out,
                                   struct assay_diag *diag)
{
    *out = NULL;
    if (p == NULL || p->url == NULL || p->model_path == NULL || p->slots < 1 || p->slots > 256 ||
        p->n_probs < 1 || p->n_probs > ASSAY_OPENAI_MAX_TOP || p->stall_ms < 1 ||
        p->eos_token < ASSAY_AUDIT_EOS_FROM_MODEL ||
        (p->order != ASSAY_SAMPLING_JOINT && p->order != ASSAY_SAMPLING_SEQUENTIAL)) {
        assay_diag_set(diag, "audit", "parameters",
                       "url, model, 1-256 slots, 1-64 logprobs, a positive stall timeout", "%s",
                       "something else");
        return ASSAY_ERR_INVALID;
    }
    assay_stats_init();
    struct assay_audit *a = assay_calloc(1, sizeof *a);
    if (a == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    a->p = *p;
    snprintf(a->url, sizeof a->url, "%s", p->url);
    snprintf(a->model_path, sizeof a->model_path, "%s", p->model_path);
    snprintf(a->served, sizeof a->served, "%s", p->served_model != NULL ? p->served_model : "");
    snprintf(a->fixtures, sizeof a->fixtures, "%s", p->fixtures != NULL ? p->fixtures : "fixtures");
    snprintf(a->program, sizeof a->program, "%s", p->program != NULL ? p->program : "assay");
    a->p.url = a->url;
    a->p.model_path = a->model_path;
    a->p.served_model = a->served;
    a->p.fixtures = a->fixtures;
    a->p.program = a->program;
    a->bundled_default = p->bundled_spec == NULL;
    if (p->bundled_spec != NULL) {
        snprintf(a->bundled_spec, sizeof a->bundled_spec, "%s", p->bundled_spec);
    } else {
        /* The bundled engine computes the server's formats (the
         * reference's numerics: the two-sample test then compares like
         * with like). */
        snprintf(a->bundled_spec, sizeof a->bundled_spec,
                 "bundled:model=%s,order=%s,batch=%d,%s", a->model_path,
                 p->order == ASSAY_SAMPLING_JOINT ? "joint" : "sequential", (int)p->slots,
                 assay_audit_numerics_spec(p));
    }
    a->p.bundled_spec = a->bundled_spec;
    choose_weights(a);
    enum assay_status st = a->mapped
                               ? assay_model_load_gguf_mapped(&a->model, a->model_path, diag)
                               : assay_model_load_gguf(&a->model, a->model_path, diag);
    a->eos_given = p->eos_token != ASSAY_AUDIT_EOS_FROM_MODEL;
    if (st == ASSAY_OK && !a->eos_given) {
        a->p.eos_token = a->model->eos_token;
    }
    if (st == ASSAY_OK && a->p.eos_token >= a->model->cfg.vocab) {
        assay_diag_set(diag, "audit", "eos", "a token of the model's vocabulary", "%d",
                       (int)a->p.eos_token);
        st = ASSAY_ERR_INVALID;
    }
    if (st == ASSAY_OK) {
        st = assay_oracle_memo_init(&a->memo, a->model, MEMO_LEN);
    }
    if (st == ASSAY_OK) {
        /* The oracle computes while the server waits for the next check:
         * every core may serve it (the doubles do not depend on it). */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int32_t threads = cpus < 1                          ? 1
                          : cpus > ASSAY_ORACLE_MAX_THREADS ? ASSAY_ORACLE_MAX_THREADS
                                                            : (int32_t)cpus;
        st = assay_oracle_memo_set_threads(a->memo, threads);
    }
    if (st == ASSAY_OK) {
        st = open_server(a, a->p.api == ASSAY_OPENAI_API_V1 ? 1 : 0, true, -1, &a->srv, diag);
    }
    if (st == ASSAY_OK) {
        st = open_server(a, a->p.n_probs, true, -1, &a->srv_lp, diag);
    }
    if (st == ASSAY_OK) {
        st = open_server(a, a->p.api == ASSAY_OPENAI_API_V1 ? 1 : 0, false, -1, &a->srv_ns,
                         diag);
    }
    if (st == ASSAY_OK) {
        st = open_server(a, a->p.api == ASSAY_OPENAI_API_V1 ? 1 : 0, true,
                         a->p.seed_promise == ASSAY_SEED_PROMISE_BITWISE ? -1 : 0, &a->srv_det,
                         diag);
    }
    if (st == ASSAY_OK) {
        st = assay_model_cache_init(&a->models);
    }
    if (st == ASSAY_OK && !a->mapped) {
        /* the bundled engine reads the oracle's copy of the file's weights */
        st = assay_model_cache_lend(a->models, a->model_path, a->model);
    }
    if (st == ASSAY_OK && a->engine_off) {
        assay_audit_note(a,
                         "Bundled engine: not run (%s).%s The two-sample test and the benchmark, "
                         "which need it, do not run (--weights resident asks for them).",
                         a->engine_off_why,
                         a->mapped ? " The oracle and the reference decode the file a layer at a "
                                     "time."
                                   : "");
    } else if (st == ASSAY_OK) {
        st = assay_adapter_open_spec_cached(a->bundled_spec, a->models, &a->bundled, diag);
        if (st == ASSAY_ERR_UNSUPPORTED && a->bundled_default) {
            /* The engine cannot compute these formats (a fused product
             * whose parts round differently): it runs exactly, and the
             * budget's reference will say why it could not. */
            char numerics[300];
            assay_diag_format(diag, numerics, sizeof numerics);
            snprintf(a->bundled_spec, sizeof a->bundled_spec, "bundled:model=%s,order=%s,batch=%d",
                     a->model_path, p->order == ASSAY_SAMPLING_JOINT ? "joint" : "sequential",
                     (int)p->slots);
            assay_diag_clear(diag);
            st = assay_adapter_open_spec_cached(a->bundled_spec, a->models, &a->bundled, diag);
            if (st == ASSAY_OK) {
                assay_audit_note(a,
                                 "Bundled engine: it cannot compute the server's formats (%s); "
                                 "it runs in exact arithmetic, so the two-sample test compares "
                                 "unlike numerics.",
                                 numerics);
            }
        }
    }
    if (st == ASSAY_OK) {
        struct assay_adapter_info info;
        assay_adapter_get_info(&a->srv, &info);
        snprintf(a->srv_spec, sizeof a->srv_spec, "%s", info.spec);
        for (size_t i = 0; i < sizeof k_gauges / sizeof k_gauges[0] && i < MAX_GAUGES; i++) {
            struct assay_audit_gauge *g = &a->gauges[a->n_gauges++];
            snprintf(g->name, sizeof g->name, "%s", k_gauges[i].name);
            g->kv = k_gauges[i].kv;
            g->idle = NAN;
            g->after = NAN;
        }
        a->metrics_read = assay_audit_read_metrics(a, true);
        for (size_t i = 0; a->metrics_read && i < a->n_gauges; i++) {
            if (!a->gauges[i].kv && a->gauges[i].present && a->gauges[i].idle != 0.0) {
                a->baseline_busy = true;
            }
        }
        st = probe(a, diag);
    }
    if (st != ASSAY_OK) {
        assay_audit_close(a);
        return st;
    }
    if (!a->metrics_read) {
        assay_audit_note(
            a, "Metrics: %s, so whether the server returned to idle could not be checked.",
            a->metrics_status);
    }
    *out = a;
    return ASSAY_OK;
}
enum assay_status assay_audit_run_check(struct assay_audit *a, const struct assay_plan_item *c,
                                        struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    assay_check_result_init(res, c->name, c->family);
    snprintf(res->engine, sizeof res->engine, "%.319s", a->srv_spec);
    if ((c->needs & ASSAY_NEED_BASELINE) != 0) {
        snprintf(res->engine, sizeof res->engine, "%.150s vs %.160s", a->srv_spec, a->bundled_spec);
    }
    /* The target: the server, the weights it serves (the oracle's copy), the
     * bundled engine on the same file beside it. */
    struct assay_target t;
    memset(&t, 0, sizeof t);
    t.adapter = &a->srv;
    t.spec = a->srv_spec;
    t.model = a->model;
    t.order = a->p.order;
    t.baseline = a->bundled_spec;
    t.owner = a;
    t.can = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS | ASSAY_NEED_SEEDS;
    t.can |= a->engine_off ? 0 : ASSAY_NEED_BASELINE;
    t.can |= a->metrics_read ? ASSAY_NEED_METRICS : 0;
    /* The settings that change what the check does. */
    char target_args[600], extra[300] = "";
    snprintf(target_args, sizeof target_args, "--url %.200s --model %.250s", a->url, a->model_path);
    size_t l = 0;
    if (a->p.api == ASSAY_OPENAI_API_V1) {
        l += (size_t)snprintf(extra + l, sizeof extra - l, " --api v1");
    }
    if (a->p.quick && l < sizeof extra) {
        l += (size_t)snprintf(extra + l, sizeof extra - l, " --quick");
    }
    if (a->p.order == ASSAY_SAMPLING_JOINT && l < sizeof extra) {
        l += (size_t)snprintf(extra + l, sizeof extra - l, " --order joint");
    }
    if (a->served[0] != '\0' && l < sizeof extra) {
        l += (size_t)snprintf(extra + l, sizeof extra - l, " --served-model %.60s", a->served);
    }
    if (a->eos_given && l < sizeof extra) {
        l += (size_t)snprintf(extra + l, sizeof extra - l, " --eos %d", (int)a->p.eos_token);
    }
    if (a->p.slots != 4 && l < sizeof extra) {
        snprintf(extra + l, sizeof extra - l, " --slots %d", (int)a->p.slots);
    }
    assay_repro_line(res->repro, sizeof res->repro, a->program, "audit", target_args, c->name,
                     a->p.seed, extra);
    enum assay_status st = ASSAY_OK;
    if (assay_target_meets(&t, c, res)) {
        st = c->run(NULL, c, &t, NULL, res);
    } else if ((c->needs & ~t.can & ASSAY_NEED_METRICS) != 0 && a->metrics_status[0] != '\0') {
        size_t len = strlen(res->failure);
        snprintf(res->failure + len, sizeof res->failure - len, " (%s)", a->metrics_status);
    } else if ((c->needs & ~t.can & ASSAY_NEED_BASELINE) != 0 && a->engine_off) {
        size_t len = strlen(res->failure);
        snprintf(res->failure + len, sizeof res->failure - len,
                 " (the bundled engine does not run: %s)", a->engine_off_why);
    }
    if (res->verdict == ASSAY_VERDICT_PASS || res->verdict == ASSAY_VERDICT_SKIP) {
        res->repro[0] = '\0'; /* reproducers are for failures */
    }
    res->seconds = since(t0);
    return st;
}

void assay_audit_finalize(struct assay_check_result *results, size_t n)
{
    (void)assay_dist_finalize(results, n);
}

const struct assay_adapter *assay_audit_server(const struct assay_audit *a)
{
    return &a->srv;
}

bool assay_audit_mapped(const struct assay_audit *a)
{
    return a->mapped;
}

bool assay_audit_engine_off(const struct assay_audit *a, const char **why)
{
    if (why != NULL) {
        *why = a->engine_off_why;
    }
    return a->engine_off;
}

const struct assay_adapter *assay_audit_bundled(const struct assay_audit *a)
{
    return &a->bundled;
}

const char *assay_audit_server_spec(const struct assay_audit *a)
{
    return a->srv_spec;
}

const char *assay_audit_bundled_spec(const struct assay_audit *a)
{
    return a->bundled_spec;
}

const struct assay_audit_params *assay_audit_params(const struct assay_audit *a)
{
    return &a->p;
}

const struct assay_model *assay_audit_model(const struct assay_audit *a)
{
    return a->model;
}

size_t assay_audit_n_findings(const struct assay_audit *a)
{
    return a->n_findings;
}

const char *assay_audit_finding(const struct assay_audit *a, size_t i)
{
    return i < a->n_findings ? a->findings[i] : "";
}

size_t assay_audit_gauges(const struct assay_audit *a, const struct assay_audit_gauge **out)
{
    *out = a->gauges;
    return a->n_gauges;
}

const char *assay_audit_metrics_status(const struct assay_audit *a)
{
    return a->metrics_status;
}

void assay_audit_close(struct assay_audit *a)
{
    if (a == NULL) {
        return;
    }
    assay_adapter_close(&a->srv);
    assay_adapter_close(&a->srv_lp);
    assay_adapter_close(&a->srv_ns);
    assay_adapter_close(&a->srv_det);
    assay_adapter_close(&a->bundled);
    assay_model_cache_free(a->models);
    assay_oracle_memo_free(a->memo);
    assay_audit_reference_forget(a);
    assay_score_free(a->scorer);
    assay_model_free(a->model);
    assay_free(a);
}
