/*
 * audit.h - auditing a third-party server (llama.cpp's llama-server, vLLM,
 * SGLang, TGI) that serves the weights assay's oracle runs: the checks of
 * `assay audit`, run through the OpenAI-compatible adapter.
 *
 * The server serves a GGUF file; the oracle loads the same file, and so
 * does a bundled engine (for the two-sample test and the side-by-side
 * benchmark, which bench/versus.h runs). The checks, in the order of the
 * plan:
 *
 *   equivalence
 *     audit.equiv.alone        greedy tokens against the oracle (the tie rule
 *                              of checks/equivalence.h), each request alone
 *                              (a gate with one request in flight)
 *     audit.equiv.concurrent   the same over workloads as given: requests
 *                              joining a running batch, more than the slots
 *     audit.equiv.logprobs     the server's top logprobs against the oracle's
 *                              log-softmax, within the logprob budget (below)
 *   distributional (the oracle's exact distributions, SEQUENTIAL order)
 *     audit.dist.gof.t1        first token at temperature 1: chi-squared
 *     audit.dist.gof.top-k-top-p   first token with top-k and top-p
 *     audit.dist.pit.t1        whole sequences at temperature 1: randomised
 *                              PIT, KS and chi-squared on u
 *     audit.dist.pit.top-k-top-p   the same with top-k and top-p
 *     audit.dist.homogeneity   2 x k chi-squared: the server's first token
 *                              against the bundled engine's (same weights,
 *                              same order and parameters, other seeds)
 *   property (black box)
 *     audit.prop.batch-invariance  greedy tokens equal at concurrency 1, 2,
 *                              the slots and twice the slots
 *     audit.prop.finish        each request finishes once with a correct
 *                              reason (checks/trace.h): stops at EOS and at
 *                              other tokens, lengths, aborts, sampled ones
 *     audit.prop.usage         the token counts the server reports equal
 *                              what was sent and received
 *     audit.prop.stream        streamed and non-streamed outputs identical
 *     audit.prop.idle-requests the server's request gauges (/metrics) back
 *                              to idle after the run
 *     audit.prop.idle-kv       its KV-cache gauge back to its idle level
 * The last two read the server's state after everything else, the
 * benchmark included: run them last (after_bench in the plan).
 *
 * The checks are registered in checks/plan.c (assay_plan_for(
 * ASSAY_COMMAND_AUDIT)) with their runners (checks/audit_checks.h);
 * assay_audit_run_check builds the target (the server, the weights it
 * serves, the bundled engine beside it) and runs one.
 *
 * End of generation: the oracle treats the server's EOS like any token.
 * Requests that must deliver exactly max_tokens (the distributional checks)
 * go through a gate (adapters/gate.h) that lets the server stop on EOS and
 * continues after it, so the server samples EOS with its true probability;
 * greedy workloads make EOS every request's stop token, so both sides stop
 * there; the logprobs check sends no stop token, so llama.cpp's ignore_eos
 * bans EOS, and where the oracle's argmax is EOS the server must take the
 * oracle's best other token (counted and reported as a finding).
 *
 * Every check fills a struct assay_check_result (checks/result.h): PASS,
 * FAIL with where and how to reproduce it, SKIP with what the server did
 * not provide (never PASS for what could not be checked), or ERROR.
 * Nothing here prints or exits; allocation goes through core/alloc.h.
 *
 * Lifetime: assay_audit_open / assay_audit_close.
 */
#ifndef ASSAY_AUDIT_H
#define ASSAY_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../adapters/adapter.h"
#include "../adapters/openai.h"
#include "../core/status.h"
#include "../engine/model.h"
#include "../engine/numerics.h"
#include "check.h"
#include "divergence.h"
#include "result.h"

/*
 * The numerics budget. A server computes in its own formats: llama.cpp
 * rounds a product's activations to the weights' vec_dot_type (F16, Q8_0,
 * Q8_K), keeps keys and values in an F16 cache and accumulates flash
 * attention in fp16 - by default. Its tokens and logprobs then differ from
 * the oracle's by more than float order can explain, and a fixed tolerance
 * either fails every correct server or hides real bugs. So the audit
 * measures how far a correct implementation of those same numerics lands
 * from the oracle: the reference, the bundled engine computing them
 * (engine/score.h: act GGML, the server's KV type and attention path),
 * teacher-forced through every position of the prompts of the logprobs
 * check's workload (drawn with its own seed), beside the oracle. Over the
 * oracle's top n_probs tokens at each position it takes the largest
 * |logprob - the oracle's| and the largest change of a logit difference
 * between two of them; the budgets are
 *   logprob budget = max(ASSAY_AUDIT_LOGPROB_TOL,
 *                        ASSAY_AUDIT_BUDGET_FACTOR x the largest |difference|)
 *   tie budget     = max(ASSAY_EQUIV_TIE_TOL,
 *                        ASSAY_AUDIT_BUDGET_FACTOR x the largest change of a gap)
 * ggml's CPU builds differ in one rounding that matters: a build for a CPU
 * with AVX512-FP16 accumulates its fp16 dot products (F16 weights with one
 * input row, an F16 KV cache's scores and values for heads of 128 or more,
 * or every value sum without flash attention) in fp16, where other builds
 * widen to fp32 (engine/numerics.h). The audit cannot see how the server
 * was built, so where that rounding applies the reference is measured
 * both ways and every figure is the larger of the two.
 * The logprobs check measures the reference on its own positions too (the
 * server's continuations, teacher-forced, where contexts are longer than
 * most of the prompts' positions) before it compares anything, and the
 * logprob budget is the factor times the larger of the two maxima: the
 * correct implementation's largest difference where the server is judged,
 * computed from the same tokens.
 * Every check uses the budgets where it used the fixed tolerances: a greedy
 * divergence is a tie when the oracle's gap is within the tie budget, a top
 * logprob may differ by the logprob budget, the distributional checks'
 * top-k/top-p boundaries take the tie budget. The factor allows for a
 * different, equally correct order of the same roundings (the server's
 * integer dot products, its threads and tiles); it is stated, never fitted
 * to a server. The reference's total-variation distance from the oracle
 * (temperature 1) is stated beside each distributional check's power: a
 * check that detects less than that floor can reject a correct server.
 * With an F32 file, an f32 KV cache and no flash attention the reference
 * is the engine's exact arithmetic and the budgets are the fixed
 * tolerances.
 */
#define ASSAY_AUDIT_BUDGET_FACTOR 2.0

/*
 * The mean-KLD rule of the logprobs check. The largest difference is
 * blind to a perturbation smaller than the formats' rounding error (on
 * Q4_K_M a layer scaled by 1.03), because the roundings of two correct
 * implementations are step functions that a different order of sums
 * crosses: their values differ as much as either differs from the oracle.
 * Their size does not. The reference reproduces the size of the formats'
 * error (its per-position KLD from the oracle, measured at the check's
 * own positions over the tokens the server listed), and a deterministic
 * perturbation adds its own divergence on top of it. So the check also
 * tests the null
 *   server's mean KLD <= ASSAY_AUDIT_KLD_FACTOR x the reference's
 * over the positions where both were measured, the reference the variant
 * (fp32 lanes or fp16 accumulation) farther from the oracle on average,
 * at level ASSAY_AUDIT_KLD_ALPHA: the check fails when the ratio of the
 * means, less the t quantile times its jackknife standard error (one
 * request left out at a time: positions within a request are not
 * independent), is still beyond the factor. The per-position KLD is
 * heavy-tailed (a few flat positions carry much of the mean), so the
 * ratio alone would fail a correct server on an unlucky workload: one of
 * ten master seeds on qwen2-hd64 Q4_K_M gave 1.55 with a standard error
 * of 0.37. The factor allows for another realization of the same
 * roundings at the same positions (correct servers measured at 0.15 to
 * 1.55 times the reference, every bound below 0.85: docs/numerics.md);
 * it is stated, never fitted to a server.
 * The rule judges only where the formats' divergence is measurable: the
 * factor times the reference's mean above a floor, the coarsened KLD's
 * own rounding (checks/divergence.h: up to n_top FLT_EPSILON from a
 * server's single-precision probabilities) plus what the fixed logprob
 * tolerance allows (log-probabilities within 2 ASSAY_AUDIT_LOGPROB_TOL of
 * each other after normalization: a KL of at most twice its square).
 * Exact arithmetic (an F32 file, an f32 KV cache, no flash attention) is
 * held to the fixed tolerance alone. It needs
 * ASSAY_AUDIT_KLD_MIN_POSITIONS positions.
 */
#define ASSAY_AUDIT_KLD_FACTOR 1.5
#define ASSAY_AUDIT_KLD_ALPHA 0.01
#define ASSAY_AUDIT_KLD_MIN_POSITIONS 50

/* A top logprob may differ from the oracle's log-softmax by this much at
 * least: the tie tolerance, far above fp32 attention (about 1.4e-5 with
 * llama.cpp's f32 KV cache) and below f16 attention (about 1e-2). */
#define ASSAY_AUDIT_LOGPROB_TOL 1e-3

#define ASSAY_AUDIT_EOS_FROM_MODEL (-2)

/* The shortest context a model must have to be audited: the oracle holds
 * sequences of up to this many tokens (prompt and output), and the checks'
 * workloads are made to fit it. assay_audit_open fails on a shorter
 * model; `assay audit` says so before it starts. */
#define ASSAY_AUDIT_MIN_CONTEXT 512

/* The fixture of the prompts on which the numerics budget is measured
 * (short ones: the tie budget is the largest change over these positions,
 * and more positions would widen it for nothing). */
#define ASSAY_AUDIT_BUDGET_WORKLOAD "workloads/audit-budget.json"

/*
 * What a server promises about one seed's tokens across runs, which the
 * seeded checks hold it to:
 *   ALONE    a lone repeat (nothing else running, its prompt not cached:
 *            the seeded checks send "cache_prompt": false) gives the same
 *            tokens bit for bit, as llama.cpp does; runs whose batch or
 *            cache differ may part where the numerics budget can move the
 *            draw (llama.cpp's batched products are not the lone ones')
 *   BITWISE  every run bit for bit: the server claims batch invariance
 *   BUDGET   every run up to the budget, lone repeats too
 * Any other difference, and every seed bug (a seed ignored, cut, shared,
 * restarted), fails.
 */
enum assay_seed_promise {
    ASSAY_SEED_PROMISE_ALONE = 0,
    ASSAY_SEED_PROMISE_BITWISE = 1,
    ASSAY_SEED_PROMISE_BUDGET = 2,
};

/*
 * How the audit holds the model's weights. RESIDENT: decoded to fp32 in
 * memory by the oracle, and again by the bundled engine (its copy and two
 * layouts) and the reference: about 20 bytes a parameter. MAPPED: the
 * matrices stay in the file (engine/model.h assay_model_load_gguf_mapped)
 * and the oracle and the reference decode a layer at a time, a few hundred
 * megabytes besides the LM head; the bundled engine cannot run then, so
 * the two-sample test and the benchmark are skipped (SKIP naming why).
 * AUTO: RESIDENT when that fits in 80% of the memory available at the
 * start (/proc/meminfo MemAvailable); else, when the oracle's and the
 * reference's copies (8 bytes a parameter) fit, resident without the
 * bundled engine (skipped as with MAPPED); else MAPPED. The report says
 * which ran.
 */
enum assay_audit_weights {
    ASSAY_AUDIT_WEIGHTS_AUTO,
    ASSAY_AUDIT_WEIGHTS_RESIDENT,
    ASSAY_AUDIT_WEIGHTS_MAPPED,
};

struct assay_audit_params {
    const char *url;          /* required: http(s)://host:port of the server */
    enum assay_openai_api api;
    const char *served_model; /* sent as "model" (vLLM needs it); NULL: none */
    const char *model_path;   /* required: the GGUF file the server serves */
    const char *bundled_spec; /* NULL: "bundled:model=<model_path>,order=<order>,
                                 batch=<slots>" */
    const char *fixtures;     /* the fixtures folder (equivalence workloads); NULL:
                                 "fixtures" */
    uint64_t seed;            /* master seed; each check's seed derives from it */
    bool quick;               /* smaller samples (stated in each summary) */
    int32_t eos_token;        /* the server's end-of-generation token; -1: none;
                                 ASSAY_AUDIT_EOS_FROM_MODEL (the default): the
                                 model file's tokenizer.ggml.eos_token_id, or
                                 none when it names none */
    int32_t slots;            /* the server's parallel slots (default 4) */
    int32_t n_probs;          /* top logprobs compared per token (default 5) */
    int32_t stall_ms;         /* the adapter's stall timeout (default 60000) */
    enum assay_sampling_order order; /* how the server combines temperature, top-k
                                 and top-p (core/request.h); the oracle and the
                                 bundled engine use it (default SEQUENTIAL:
                                 llama.cpp with the adapter's sampler list,
                                 vLLM) */
    const char *program;      /* starts reproducer lines (default "assay") */
    enum assay_kv_type kv_type; /* the server's KV cache (default F16: llama.cpp's) */
    bool flash_attn;          /* the server runs flash attention (default true:
                                 llama.cpp's "auto" turns it on on CPU) */
    enum assay_seed_promise seed_promise; /* what the seeded checks hold the
                                 server to (below; default ALONE) */
    enum assay_audit_weights weights; /* how the audit holds the weights
                                 (below; default AUTO) */
};

/* The defaults above, with url and model_path NULL. */
struct assay_audit_params assay_audit_default_params(void);

/* The bundled engine's spec keys for the server's numerics as p states
 * them ("act=ggml,kv_type=f16,fa=on"); static. */
const char *assay_audit_numerics_spec(const struct assay_audit_params *p);

struct assay_audit;

/* Whether the audit a holds its weights mapped (assay_audit_weights). */
bool assay_audit_mapped(const struct assay_audit *a);

/* Whether the audit a runs without the bundled engine (mapped weights, or
 * too little memory for its copies), and then why, in words (static until
 * a closes). */
bool assay_audit_engine_off(const struct assay_audit *a, const char **why);

/*
 * Prepare an audit: load the model from model_path (the oracle's copy),
 * open the adapters (the server streamed, non-streamed and with logprobs;
 * the bundled engine), read the server's /metrics once for its idle state,
 * and send one 1-token request, so that a server that cannot be reached or
 * refuses token-id prompts is reported now and not by every check.
 * ASSAY_ERR_INVALID (bad parameter or spec), ASSAY_ERR_IO / ASSAY_ERR_PARSE
 * (the model file), ASSAY_ERR_NET / ASSAY_ERR_TIMEOUT (the server did not
 * answer the probe) or ASSAY_ERR_NOMEM, with diag saying what and where;
 * *out is then NULL.
 */
enum assay_status assay_audit_open(const struct assay_audit_params *p, struct assay_audit **out,
                                   struct assay_diag *diag);

/*
 * Run one check of the plan into res (initialised here). Returns ASSAY_OK
 * when a verdict was reached (PASS, FAIL or SKIP); ASSAY_ERR_NOMEM, or
 * another status when the check could not run (res->verdict is then ERROR
 * with the reason).
 */
enum assay_status assay_audit_run_check(struct assay_audit *a, const struct assay_plan_item *c,
                                        struct assay_check_result *res);

/* After the checks: Holm's procedure across the distributional results
 * (checks/distributional.h). */
void assay_audit_finalize(struct assay_check_result *results, size_t n);

/* The adapters the audit opened, borrowed until assay_audit_close: the
 * server (streamed, no logprobs: what the benchmark measures) and the
 * bundled engine. */
const struct assay_adapter *assay_audit_server(const struct assay_audit *a);
const struct assay_adapter *assay_audit_bundled(const struct assay_audit *a);
const char *assay_audit_server_spec(const struct assay_audit *a);
const char *assay_audit_bundled_spec(const struct assay_audit *a);

/* The parameters the audit runs with (defaults resolved; the strings are
 * the audit's copies). */
const struct assay_audit_params *assay_audit_params(const struct assay_audit *a);

/* The numerics budget (above), measured once, when a check first needs it. */
struct assay_audit_budget {
    bool measured;          /* false: not needed yet, or not measured (why) */
    char why[400];          /* why it could not be measured ("" when it was) */
    char formats[240];      /* the numerics the reference computed, in words */
    int64_t n_positions;    /* teacher-forced positions */
    int32_t n_top;          /* the oracle's top tokens compared at each */
    double ref_max_abs;     /* the reference's largest |logprob - the oracle's| */
    double ref_max_gap;     /* its largest change of a logit difference */
    int64_t check_positions;   /* the logprobs check's positions it was also measured at */
    double check_ref_max_abs;  /* its largest |logprob - the oracle's| there */
    /* The reference computes the formats as ggml's CPU builds do: with
     * fp32 lanes (variant 0), and, where that differs for this model and
     * configuration, with the fp16 accumulation of builds for CPUs with
     * AVX512-FP16 (variant 1; engine/numerics.h). The figures above are
     * the larger of the variants'; these are each one's. */
    int32_t n_variants;                       /* 1 or 2 */
    double variant_max_abs[2];                /* largest |difference| on the prompts */
    double variant_check_max_abs[2];          /* and at the logprobs check's positions */
    double tv_mean, tv_max; /* its total-variation distance from the oracle (T 1) */
    double logprob;         /* the logprob budget */
    double gap;             /* the tie budget (logits) */
    struct assay_divergence_summary ref; /* the reference on those positions */
    double seconds;         /* the measurement's wall time */
};
const struct assay_audit_budget *assay_audit_budget(const struct assay_audit *a);

/* The mean-KLD rule (above) from one variant of the reference: srv[i]
 * and ref[i] the server's and the reference's KLD summed over count[i]
 * positions of request i (n_req requests), n_top top logprobs a position.
 * out->n is 0 when the rule does not judge (fewer than
 * ASSAY_AUDIT_KLD_MIN_POSITIONS positions, or the factor times the
 * reference's mean within the floor); else the means, their ratio, its
 * jackknife standard error over the requests with a position and the
 * ratio's one-sided lower confidence bound at 1 - ASSAY_AUDIT_KLD_ALPHA
 * (both NaN with fewer than two such requests), the budget (the factor
 * times the reference's mean), and whether the bound is beyond the
 * factor. */
struct assay_audit_kld {
    int64_t n;
    double server, reference, ratio, ratio_se, ratio_lower, budget;
    bool beyond;
};
void assay_audit_kld_rule(const double *srv, const double *ref, const int32_t *count,
                          int32_t n_req, int32_t n_top, struct assay_audit_kld *out);

/* The oracle's model (loaded from the GGUF file). */
const struct assay_model *assay_audit_model(const struct assay_audit *a);

/* What the audit saw the server do differently from the oracle, or could
 * not see, in sentences for the report, in the order found (borrowed). */
size_t assay_audit_n_findings(const struct assay_audit *a);
const char *assay_audit_finding(const struct assay_audit *a, size_t i);

/* A gauge of the server's /metrics the idle checks compared. */
struct assay_audit_gauge {
    char name[80];
    bool kv;          /* a KV-cache gauge (else requests running or waiting) */
    bool present;     /* exported by the server */
    double idle;      /* before the audit's first request */
    double after;     /* after the run (last reading) */
};

/* The gauges looked for (present or not) and why /metrics could not be read
 * ("" when it could). Borrowed. */
size_t assay_audit_gauges(const struct assay_audit *a, const struct assay_audit_gauge **out);
const char *assay_audit_metrics_status(const struct assay_audit *a);

void assay_audit_close(struct assay_audit *a);

#endif
