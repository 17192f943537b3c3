/*
 * plan.c - the registry of checks (plan.h): k_plan, one table of every
 * check of `assay verify`, `assay audit` and `assay compare`, each command's
 * entries together and in order, and the runners that adapt a target and an
 * item's parameters to a family's check function. assay_plan_for,
 * assay_plan_find_in and assay_plan_find look entries up for cli/, the
 * executor (context.c) and the verify and mutants test labels.
 */
#include "plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../adapters/adapter.h"
#include "../adapters/spec.h"
#include "audit_checks.h"
#include "context.h"
#include "distributional.h"
#include "equivalence.h"
#include "fuzz.h"
#include "pairwise.h"
#include "property.h"
#include "seeded.h"

/* ---- the runners of the verify plan: a target and the item's parameters
 * to the family's functions --------------------------------------------- */

static enum assay_status run_equivalence(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res)
{
    (void)item;
    if (w == NULL) {
        assay_check_error(res, "needs a workload");
        return ASSAY_OK;
    }
    struct assay_oracle_memo *memo = NULL;
    enum assay_status st = assay_verify_memo(ctx, t->model, &memo);
    if (st != ASSAY_OK) {
        return st;
    }
    return assay_check_equivalence(t->adapter, w, memo, NULL, res);
}

/* Differential fuzzing (checks/fuzz.h): `cases` random cases, within
 * about `seconds`; with a workload (a failing case written by an earlier
 * run), that one case on the target as given. */
static enum assay_status run_fuzz(struct assay_verify_ctx *ctx, const struct assay_plan_item *item,
                                  const struct assay_target *t, const struct assay_workload *w,
                                  struct assay_check_result *res)
{
    struct assay_oracle_memo *memo = NULL;
    enum assay_status st = assay_verify_memo(ctx, t->model, &memo);
    if (st != ASSAY_OK) {
        return st;
    }
    if (w != NULL) {
        st = assay_fuzz_judge(t->spec, w, memo, res);
        snprintf(res->summary, sizeof res->summary,
                 "one case: %d requests, %lld tokens (greedy ones against the oracle, %d ties), "
                 "%lld steps audited",
                 (int)w->n, (long long)res->n_tokens, (int)res->n_ties, (long long)res->n_steps);
        return assay_status_keep_nomem(st);
    }
    char buf[32];
    long cases = atol(assay_plan_param(item->params, "cases", buf, sizeof buf));
    double seconds = atof(assay_plan_param(item->params, "seconds", buf, sizeof buf));
    uint64_t seed = assay_verify_seed(ctx, item->name);
    struct assay_fuzz_tally tally;
    struct assay_fuzz_case failed;
    st = assay_fuzz_run(t->spec, t->model->cfg.vocab, t->model->cfg.n_ctx, memo, seed, 0,
                        cases > 0 ? (int32_t)cases : 1, seconds, NULL, NULL, &tally, &failed,
                        res);
    if (failed.w != NULL) {
        /* The failing case as a file: the reproducer reruns it alone, and
         * the shrinker cuts it down. */
        const char *dir = assay_verify_repro_dir(ctx);
        char path[sizeof res->workload];
        int len = snprintf(path, sizeof path, "%s/fuzz-case-%d.json", dir, (int)failed.index);
        struct assay_diag diag;
        assay_diag_clear(&diag);
        if (len > 0 && (size_t)len < sizeof path && (mkdir(dir, 0777) == 0 || errno == EEXIST) &&
            assay_workload_save(failed.w, path, &diag) == ASSAY_OK) {
            snprintf(res->workload, sizeof res->workload, "%s", path);
            char engine_arg[400], tail[1300];
            snprintf(engine_arg, sizeof engine_arg, "--engine '%.380s'", res->engine);
            snprintf(tail, sizeof tail, " --workload %s", path);
            assay_repro_line(res->repro, sizeof res->repro, assay_verify_program(ctx), "verify",
                             engine_arg, item->name, 0, tail);
        }
        assay_fuzz_case_free(&failed);
    }
    snprintf(res->summary, sizeof res->summary,
             "%d cases (%d paged, %d with prefix caching, %d chunked, %d speculating, %d under "
             "pool pressure): %lld requests (%lld greedy against the oracle, %lld seeded, %lld "
             "aborted by step, %lld by tokens), %lld tokens, %d ties; every step audited",
             (int)tally.cases, (int)tally.paged, (int)tally.prefix, (int)tally.chunked,
             (int)tally.speculating, (int)tally.pressed, (long long)tally.requests,
             (long long)tally.greedy, (long long)tally.seeded, (long long)tally.aborted_by_step,
             (long long)tally.aborted_by_tokens, (long long)res->n_tokens, (int)res->n_ties);
    return assay_status_keep_nomem(st);
}

/* The seeded family's own checks: seeds drawn from the item's seed. */
static enum assay_status run_seed_positions(struct assay_verify_ctx *ctx,
                                            const struct assay_plan_item *item,
                                            const struct assay_target *t,
                                            const struct assay_workload *w,
                                            struct assay_check_result *res)
{
    (void)w;
    struct assay_adapter_info info;
    assay_adapter_get_info(t->adapter, &info);
    if (info.vocab <= 0 || info.n_ctx < 64) {
        assay_check_skip(res, "needs the engine's vocabulary and a context of at least 64");
        return ASSAY_OK;
    }
    struct assay_seeded_opts o = assay_seeded_opts_default();
    if (t->model != NULL) {
        o.chance = assay_seed_chance_oracle;
        o.chance_ctx = (void *)t->model;
    }
    return assay_check_seed_positions(t->adapter, info.vocab, info.n_ctx,
                                      assay_verify_seed(ctx, item->name), &o, res);
}

static enum assay_status run_seed_unseeded(struct assay_verify_ctx *ctx,
                                           const struct assay_plan_item *item,
                                           const struct assay_target *t,
                                           const struct assay_workload *w,
                                           struct assay_check_result *res)
{
    (void)w;
    struct assay_seeded_opts o = assay_seeded_opts_default();
    return assay_check_seed_unseeded(t->adapter, t->model, assay_verify_seed(ctx, item->name), &o,
                                     res);
}

static enum assay_status run_seed_pairs(struct assay_verify_ctx *ctx,
                                        const struct assay_plan_item *item,
                                        const struct assay_target *t,
                                        const struct assay_workload *w,
                                        struct assay_check_result *res)
{
    (void)w;
    char buf[32];
    long n = atol(assay_plan_param(item->params, "pairs", buf, sizeof buf));
    struct assay_seeded_opts o = assay_seeded_opts_default();
    return assay_check_seed_pairs(t->adapter, t->model, assay_verify_seed(ctx, item->name), &o,
                                  n > 0 ? n : 2000, 1e-6, 0.99, res);
}

static enum assay_status run_seeded_sameness(struct assay_verify_ctx *ctx,
                                             const struct assay_plan_item *item,
                                             const struct assay_target *t,
                                             const struct assay_workload *w,
                                             struct assay_check_result *res)
{
    (void)ctx;
    (void)item;
    if (w == NULL) {
        assay_check_error(res, "needs a workload");
        return ASSAY_OK;
    }
    return assay_check_seeded_configurations(t->adapter, t->spec, w, res);
}

/* The distributional parameters of an item: the defaults, the target's
 * sampling order, the item's own, and the item's seed. */
static bool dist_params(struct assay_verify_ctx *ctx, const struct assay_plan_item *item,
                        const struct assay_target *t, struct assay_dist_params *p,
                        struct assay_check_result *res)
{
    *p = assay_dist_default_params();
    p->order = t->order;
    char why[300];
    enum assay_status st = assay_dist_parse_params(item->params, p, why, sizeof why);
    if (st != ASSAY_OK) {
        assay_check_error(res, "%s (%s)", why, assay_status_str(st));
        return false;
    }
    p->seed = assay_verify_seed(ctx, item->name);
    return true;
}

/* A copy of m for the oracle: nothing the engine does to its copy can reach
 * it. */
static enum assay_status oracle_copy(const struct assay_model *m, struct assay_model **out,
                                     struct assay_check_result *res)
{
    enum assay_status st = assay_model_clone(m, out);
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not copy the weights for the oracle (%s)",
                          assay_status_str(st));
    }
    return st;
}

/* The first tokens' chi-squared (gof) or the whole sequences' PIT against
 * the oracle's exact distributions. */
static enum assay_status run_against_oracle(struct assay_verify_ctx *ctx,
                                            const struct assay_plan_item *item,
                                            const struct assay_target *t,
                                            struct assay_check_result *res, bool pit)
{
    struct assay_dist_params p;
    struct assay_model *model = NULL;
    if (!dist_params(ctx, item, t, &p, res)) {
        return ASSAY_OK;
    }
    enum assay_status st = oracle_copy(t->model, &model, res);
    if (st == ASSAY_OK) {
        st = pit ? assay_dist_pit(t->adapter, model, &p, res, NULL)
                 : assay_dist_gof(t->adapter, model, &p, res);
    }
    assay_model_free(model);
    return assay_status_keep_nomem(st);
}

static enum assay_status run_gof(struct assay_verify_ctx *ctx, const struct assay_plan_item *item,
                                 const struct assay_target *t, const struct assay_workload *w,
                                 struct assay_check_result *res)
{
    (void)w;
    return run_against_oracle(ctx, item, t, res, false);
}

static enum assay_status run_pit(struct assay_verify_ctx *ctx, const struct assay_plan_item *item,
                                 const struct assay_target *t, const struct assay_workload *w,
                                 struct assay_check_result *res)
{
    (void)w;
    return run_against_oracle(ctx, item, t, res, true);
}

static enum assay_status run_acceptance(struct assay_verify_ctx *ctx,
                                        const struct assay_plan_item *item,
                                        const struct assay_target *t,
                                        const struct assay_workload *w,
                                        struct assay_check_result *res)
{
    (void)w;
    if (t->draft == NULL) {
        assay_check_error(res, "the engine does not speculate (no draft model): add spec=K");
        return ASSAY_OK;
    }
    struct assay_dist_params p;
    struct assay_model *model = NULL, *draft = NULL;
    if (!dist_params(ctx, item, t, &p, res)) {
        return ASSAY_OK;
    }
    enum assay_status st = oracle_copy(t->model, &model, res);
    if (st == ASSAY_OK) {
        st = oracle_copy(t->draft, &draft, res);
    }
    if (st == ASSAY_OK) {
        st = assay_dist_acceptance(t->adapter, model, draft, &p, res, NULL);
    }
    assay_model_free(model);
    assay_model_free(draft);
    return assay_status_keep_nomem(st);
}

/* The target against a second configuration of the bundled engine: the
 * item's "vs" key lists the options that differ ("vs=spec=0;batch=64"). */
static enum assay_status run_homogeneity(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res)
{
    (void)w;
    struct assay_dist_params p;
    if (!dist_params(ctx, item, t, &p, res)) {
        return ASSAY_OK;
    }
    char vs[256], spec[1024], next[1024];
    assay_plan_param(item->params, "vs", vs, sizeof vs);
    if (vs[0] == '\0') {
        assay_check_error(res, "needs a second configuration (parameter vs=key=value;...)");
        return ASSAY_OK;
    }
    snprintf(spec, sizeof spec, "%s", t->spec);
    char *save = NULL;
    for (char *kv = strtok_r(vs, ";", &save); kv != NULL; kv = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL) {
            assay_check_error(res, "vs: expected key=value;...");
            return ASSAY_OK;
        }
        *eq = '\0';
        assay_spec_with(spec, kv, eq + 1, next, sizeof next);
        snprintf(spec, sizeof spec, "%s", next);
    }
    struct assay_adapter b;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_adapter_open_spec(spec, &b, &diag);
    if (st != ASSAY_OK) {
        char d[400];
        assay_check_error(res, "engine B %.120s: %.160s (%s)", spec,
                          assay_diag_format(&diag, d, sizeof d), assay_status_str(st));
        return assay_status_keep_nomem(st);
    }
    st = assay_dist_homogeneity(t->adapter, &b, &p, res);
    assay_adapter_close(&b);
    if (res->verdict == ASSAY_VERDICT_FAIL || res->verdict == ASSAY_VERDICT_ERROR) {
        size_t l = strlen(res->failure);
        snprintf(res->failure + l, sizeof res->failure - l, " (engine B: %s)", spec);
    }
    return st;
}

typedef enum assay_status (*property_check)(const struct assay_adapter *a,
                                            const struct assay_workload *w,
                                            const struct assay_property_opts *o,
                                            struct assay_check_result *res);

/* A property check with the options of item->params. */
static enum assay_status run_property(const struct assay_plan_item *item,
                                      const struct assay_target *t, const struct assay_workload *w,
                                      struct assay_check_result *res, property_check check)
{
    struct assay_property_opts o;
    if (!assay_property_parse_params(item->params, &o, res)) {
        return ASSAY_OK;
    }
    if (w == NULL) {
        assay_check_error(res, "the check needs a workload (the plan names none)");
        return ASSAY_OK;
    }
    enum assay_status st = check(t->adapter, w, &o, res);
    return assay_status_keep_nomem(st);
}

#define PROPERTY_RUNNER(fn, check)                                                                 \
    static enum assay_status fn(struct assay_verify_ctx *ctx, const struct assay_plan_item *item,  \
                                const struct assay_target *t, const struct assay_workload *w,      \
                                struct assay_check_result *res)                                    \
    {                                                                                              \
        (void)ctx;                                                                                 \
        return run_property(item, t, w, res, check);                                               \
    }

PROPERTY_RUNNER(run_blocks, assay_check_blocks)
PROPERTY_RUNNER(run_trace, assay_check_trace)
PROPERTY_RUNNER(run_isolation, assay_check_isolation)
PROPERTY_RUNNER(run_blackbox, assay_check_isolation_blackbox)
PROPERTY_RUNNER(run_soak, assay_check_soak)

/* ---- the registry ------------------------------------------------------ */

static const struct assay_plan_item k_plan[] = {
    /* ---- assay verify: the bundled engine, each check on its own options ---- */
    {"equiv.kv-cache", ASSAY_FAMILY_EQUIVALENCE, "kv=contiguous,batch=1,chunk=0",
     "workloads/equiv-mixed.json", "KV cache alone: one request at a time, contiguous buffers",
     run_equivalence, NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"equiv.batching", ASSAY_FAMILY_EQUIVALENCE, "kv=off,batch=8", "workloads/equiv-small.json",
     "continuous batching alone: full recompute, requests joining a running batch", run_equivalence,
     NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"equiv.continuous-batching", ASSAY_FAMILY_EQUIVALENCE, "kv=contiguous,batch=16,chunk=0",
     "workloads/equiv-mixed.json", "batching with the KV cache: rows of many requests stacked",
     run_equivalence, NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"equiv.paged", ASSAY_FAMILY_EQUIVALENCE, "kv=paged,block=16,prefix=off,batch=1,chunk=0",
     "workloads/equiv-mixed.json", "paged KV and its block manager alone", run_equivalence, NULL,
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"equiv.preemption", ASSAY_FAMILY_EQUIVALENCE,
     "kv=paged,block=8,prefix=off,batch=8,chunk=0;blocks=24", "workloads/equiv-pressure.json",
     "a pool too small for the batch: recompute-preemption", run_equivalence, NULL,
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"equiv.prefix-cache", ASSAY_FAMILY_EQUIVALENCE, "kv=paged,block=16,prefix=on,batch=1,chunk=0",
     "workloads/equiv-shared-prefix.json",
     "prefix caching alone: shared system prompts, equal blocks after different histories",
     run_equivalence, NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"equiv.chunked-prefill", ASSAY_FAMILY_EQUIVALENCE, "kv=contiguous,batch=1,chunk=16",
     "workloads/equiv-long-prompts.json", "chunked prefill alone: prompts of several chunks",
     run_equivalence, NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"equiv.all", ASSAY_FAMILY_EQUIVALENCE,
     "kv=paged,block=16,prefix=on,chunk=32,batch=8;blocks=40", "workloads/equiv-shared-prefix.json",
     "every optimisation at once, with a pool small enough to preempt", run_equivalence, NULL,
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"equiv.all-mixed", ASSAY_FAMILY_EQUIVALENCE,
     "kv=paged,block=8,prefix=on,chunk=24,batch=16;blocks=48", "workloads/equiv-mixed.json",
     "every optimisation at once over mixed lengths", run_equivalence, NULL, ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS, false},
    {"equiv.batch-invariant", ASSAY_FAMILY_EQUIVALENCE,
     "kv=paged,block=16,prefix=on,chunk=32,batch=16,invariant=on",
     "workloads/equiv-long-prompts.json", "every optimisation with batch-invariant products",
     run_equivalence, NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    /* Greedy speculative decoding is plain greedy, token for token (TinyGPT
     * with its draft). */
    {"equiv.spec-k1", ASSAY_FAMILY_EQUIVALENCE, "spec=1,kv=off,batch=8",
     "workloads/equiv-small.json", "greedy speculative decoding, k = 1, full recompute",
     run_equivalence, NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"equiv.spec-k2", ASSAY_FAMILY_EQUIVALENCE,
     "spec=2,kv=paged,block=16,prefix=off,chunk=0,batch=16", "workloads/equiv-mixed.json",
     "greedy speculative decoding, k = 2, batched over paged KV", run_equivalence, NULL,
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"equiv.spec-k4", ASSAY_FAMILY_EQUIVALENCE,
     "spec=4,kv=paged,block=8,blocks=24,prefix=off,chunk=0,batch=8",
     "workloads/equiv-pressure.json",
     "greedy speculative decoding, k = 4, with preemption and rollback", run_equivalence, NULL,
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"equiv.spec-k8", ASSAY_FAMILY_EQUIVALENCE,
     "spec=8,kv=paged,block=16,prefix=on,chunk=32,batch=8", "workloads/equiv-shared-prefix.json",
     "greedy speculative decoding, k = 8, with prefix caching and chunked prefill", run_equivalence,
     NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"seed.configurations", ASSAY_FAMILY_SEEDED,
     "model=mini,draft=mini-draft,kv=paged,block=8,blocks=40,prefix=on,chunk=16,batch=16",
     "workloads/seeded-sampling.json",
     "the same seeds give the same sampled tokens alone, batched, without KV cache, paged, "
     "preempted",
     run_seeded_sameness, NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_BUNDLED | ASSAY_NEED_SEEDS, false},
    {"seed.positions", ASSAY_FAMILY_SEEDED,
     "model=mini,kv=paged,block=4,prefix=on,chunk=8,batch=8;blocks=40", NULL,
     "seeds 0, 1, 2^31-1, 2^32-1, 2^32, 2^53, 2^63, 2^64-1: alone, alone again, twice in one "
     "batch, first, last, interleaved, joining a running batch, in a pool that preempts",
     run_seed_positions, NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_SEEDS, false},
    {"seed.unseeded", ASSAY_FAMILY_SEEDED, "model=mini,kv=paged,block=4,prefix=on,batch=8", NULL,
     "unseeded requests with one prompt are not one stream", run_seed_unseeded, NULL,
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"seed.pairs", ASSAY_FAMILY_SEEDED, "model=mini,batch=256,requests=8192", NULL,
     "distinct seeds are independent streams: adjacent seeds and seeds apart only in bit 32, "
     "a chi-squared test of independence of pairs",
     run_seed_pairs, "pairs=3000", ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS | ASSAY_NEED_SEEDS,
     false},
    {"equiv.fuzz", ASSAY_FAMILY_EQUIVALENCE, "model=mini,draft=mini-draft", NULL,
     "differential fuzzing: random configurations and workloads (block multiples, cached "
     "prompts, equal lengths together, aborts in every phase, pool pressure, speculation, edge "
     "seeds) against the oracle, every step audited",
     run_fuzz, "cases=150,seconds=60", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS | ASSAY_NEED_BUNDLED, false},
    /* Distributional: the mini config (model.h) and its draft mini-draft, so
     * that tens of thousands of samples fit in seconds; the sampling and
     * speculation code under test is the same. */
    {"dist.gof.first", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,draft=mini-draft,batch=256", NULL,
     "chi-squared of the first sampled token against the oracle; top-p binding inside top-k "
     "(JOINT order)",
     run_gof, "n=70000,pos=1,len=1,prompt=3,t=0.7,top_k=40,top_p=0.6", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS, false},
    {"dist.gof.sequential", ASSAY_FAMILY_DISTRIBUTIONAL,
     "model=mini,draft=mini-draft,batch=256,order=sequential", NULL,
     "the first sampled token in the SEQUENTIAL filter order (vLLM's); top-p binding inside "
     "top-k",
     run_gof,
     "n=70000,pos=1,len=1,prompt=3,t=0.8,top_k=30,top_p=0.8", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS, false},
    {"dist.gof.spec-pair", ASSAY_FAMILY_DISTRIBUTIONAL,
     "model=mini,draft=mini-draft,batch=256,spec=1", NULL,
     "chi-squared of the first two tokens (exact joint) under speculation k = 1: acceptance, "
     "residual, bonus and the next round; top-k binding",
     run_gof, "n=155000,pos=2,len=2,prompt=2,t=0.7,top_k=20,top_p=0.9", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS, false},
    /* Above temperature 1: a filter applied before the temperature (or top-p
     * measured on the untempered distribution) keeps fewer tokens than it
     * should here, where below 1 it only keeps more. */
    {"dist.gof.hot-top-k", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,draft=mini-draft,batch=256",
     NULL, "the first sampled token at temperature 1.5; top-k binding (top-p 0.95 does not cut)",
     run_gof, "n=70000,pos=1,len=1,prompt=3,t=1.5,top_k=12,top_p=0.95", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS, false},
    {"dist.gof.hot-top-p", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,draft=mini-draft,batch=256",
     NULL, "the first sampled token at temperature 1.5; top-p binding inside top-k", run_gof,
     "n=70000,pos=1,len=1,prompt=3,t=1.5,top_k=120,top_p=0.6", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS, false},
    /* Ties on purpose: mini-twins (model.h) ties tokens 2i and 2i + 1
     * exactly; the engine's own product (blas_rows=0) keeps them bit-equal,
     * so the tie rule decides the cut (distributional.h, tie=). */
    {"dist.gof.ties-top-k", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini-twins,batch=256,blas_rows=0",
     NULL,
     "the first sampled token with an exact tie at top-k's k-th rank: the lower id kept, the "
     "higher removed",
     run_gof, "n=30000,pos=1,len=1,prompt=3,t=1.5,top_k=5,top_p=1,tie=k", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS, false},
    {"dist.gof.ties-top-p", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini-twins,batch=256,blas_rows=0",
     NULL,
     "the first sampled token with an exact tie at the token crossing top-p: the lower id "
     "kept, the higher removed",
     run_gof, "n=30000,pos=1,len=1,prompt=3,t=0.7,top_k=0,top_p=0.15,tie=p",
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"dist.pit.plain", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,draft=mini-draft,batch=256", NULL,
     "randomised PIT of whole sampled sequences (batching, paging, prefix cache, chunking)",
     run_pit, "n=1750,len=32,prompt=4,prompts=16,t=0.9,top_k=50,top_p=0.95", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS, false},
    {"dist.pit.hot", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,draft=mini-draft,batch=256", NULL,
     "randomised PIT of whole sequences at temperature 1.5; top-k and top-p each binding at "
     "about half the positions",
     run_pit, "n=1750,len=32,prompt=4,prompts=16,t=1.5,top_k=90,top_p=0.6", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS, false},
    {"dist.pit.ties", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini-twins,batch=256,blas_rows=0",
     NULL,
     "randomised PIT of whole sequences on mini-twins: an exact tie at the top-k cut (odd k) "
     "or at the top-p crossing at many positions",
     run_pit, "n=1750,len=32,prompt=4,prompts=16,t=0.7,top_k=9,top_p=0.3,tie=any",
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS, false},
    {"dist.pit.spec", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,draft=near:0.05,batch=256,spec=2",
     NULL,
     "randomised PIT of whole sequences under speculation k = 2 with a mostly accepted draft",
     run_pit,
     "n=1750,len=32,prompt=4,prompts=16,t=0.8,top_k=0,top_p=0.8", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS, false},
    {"dist.spec.acceptance", ASSAY_FAMILY_DISTRIBUTIONAL,
     "model=mini,draft=mini-draft,batch=256,spec=4", NULL,
     "speculative acceptance against beta = sum min(p, q), per draft position", run_acceptance,
     "n=2800,len=16,prompt=4,prompts=16,t=1.0,top_k=0,top_p=0.9", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS | ASSAY_NEED_BUNDLED, false},
    /* A draft derived from the target's own weights (draft=near:NOISE,
     * model.h) that accepts about 70% of proposals, where mini-draft
     * accepts 3%: acceptance, the residual after a late rejection and the
     * token after a wholly accepted round are each sampled thousands of
     * times (dist.pit.spec and the homogeneity check below run it too). */
    {"dist.gof.spec-pair-near", ASSAY_FAMILY_DISTRIBUTIONAL,
     "model=mini,draft=near:0.05,batch=256,spec=1", NULL,
     "the first two tokens under speculation k = 1 with a mostly accepted draft: acceptance, "
     "the residual and the token after an accepted round; top-k binding",
     run_gof, "n=60000,pos=2,len=2,prompt=2,t=0.7,top_k=20,top_p=0.9", ASSAY_COMMAND_VERIFY,
     ASSAY_NEED_WEIGHTS, false},
    {"dist.pit.spec-bonus", ASSAY_FAMILY_DISTRIBUTIONAL,
     "model=mini,draft=near:0.05,batch=256,spec=3", NULL,
     "randomised PIT of the tokens drawn after every proposal of a round was accepted (k = 3, a "
     "mostly accepted draft), each against the target given its prefix",
     run_pit, "n=1750,len=32,prompt=4,prompts=16,t=0.9,top_k=50,top_p=0.95,only=bonus",
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS | ASSAY_NEED_BUNDLED, false},
    {"dist.spec.acceptance-near", ASSAY_FAMILY_DISTRIBUTIONAL,
     "model=mini,draft=near:0.15,batch=256,spec=4", NULL,
     "speculative acceptance against beta = sum min(p, q) with a mostly accepted draft, per "
     "draft position",
     run_acceptance, "n=1000,len=16,prompt=4,prompts=16,t=1.0,top_k=0,top_p=0.9",
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_WEIGHTS | ASSAY_NEED_BUNDLED, false},
    {"dist.homogeneity.spec-vs-plain", ASSAY_FAMILY_DISTRIBUTIONAL,
     "model=mini,draft=near:0.05,batch=256,spec=1", NULL,
     "2 x k homogeneity of the first token: speculation k = 1 against plain sampling",
     run_homogeneity, "n=125000,pos=1,len=2,prompt=1,t=0.7,top_k=40,top_p=0.6,vs=spec=0",
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_BUNDLED, false},
    /* Property: the pool (blocks, after the ';') is a default a reproducer's
     * --engine may shrink; the block checks use the mini config, whose block
     * manager and scheduler are the same code. */
    {"prop.blocks", ASSAY_FAMILY_PROPERTY,
     "model=mini,draft=mini-draft,kv=paged,block=4,prefix=on,chunk=0,batch=8;blocks=24",
     "workloads/prop-blocks.json",
     "block conservation after every step against the block model: a small pool, prefix "
     "hits and eviction, preemption, aborts, whole prompts admitted together",
     run_blocks, NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_BLOCKS, false},
    {"prop.blocks-spec", ASSAY_FAMILY_PROPERTY,
     "model=mini,draft=mini-draft,kv=paged,block=4,prefix=on,chunk=8,batch=8,spec=3;blocks=32",
     "workloads/prop-blocks.json",
     "block conservation with chunked prefill and speculative rounds rolled back", run_blocks, NULL,
     ASSAY_COMMAND_VERIFY, ASSAY_NEED_BLOCKS, false},
    {"prop.trace", ASSAY_FAMILY_PROPERTY,
     "model=mini,draft=mini-draft,kv=paged,block=4,prefix=on,chunk=8,batch=8,spec=2;blocks=20",
     "workloads/prop-trace.json",
     "trace consistency in and out: stop tokens, aborts, preemption, several tokens a step",
     run_trace, NULL, ASSAY_COMMAND_VERIFY, 0, false},
    {"prop.isolation", ASSAY_FAMILY_PROPERTY,
     "kv=paged,block=8,prefix=on,chunk=16,batch=8,invariant=on;blocks=40",
     "workloads/prop-isolation.json",
     "no cross-sequence attention: probes alone and among changed neighbours, logits bit for "
     "bit (batch invariant)",
     run_isolation, "probes=3", ASSAY_COMMAND_VERIFY, ASSAY_NEED_LOGITS, false},
    {"prop.isolation-tolerance", ASSAY_FAMILY_PROPERTY,
     "kv=paged,block=8,prefix=on,chunk=16,batch=8,invariant=off,blas_rows=1;blocks=40",
     "workloads/prop-isolation.json",
     "no cross-sequence attention without batch invariance (every product through OpenBLAS): "
     "logits within a stated tolerance",
     run_isolation, "probes=3", ASSAY_COMMAND_VERIFY, ASSAY_NEED_LOGITS, false},
    {"prop.isolation-blackbox", ASSAY_FAMILY_PROPERTY,
     "kv=paged,block=16,prefix=on,chunk=32,batch=8;blocks=40", "workloads/prop-isolation.json",
     "no cross-sequence attention from tokens alone: concurrency 1 against all at once, one "
     "per step and as given",
     run_blackbox, NULL, ASSAY_COMMAND_VERIFY, 0, false},
    {"prop.soak", ASSAY_FAMILY_PROPERTY,
     "model=mini,draft=mini-draft,kv=paged,block=4,prefix=on,chunk=16,batch=16,requests=4096;"
     "blocks=48",
     "workloads/prop-soak.json",
     "the long randomised run: 2000 requests, random aborts, frequent preemption; blocks every "
     "step, trace, and tokens equal at concurrency 1",
     run_soak, NULL, ASSAY_COMMAND_VERIFY, ASSAY_NEED_BLOCKS, false},

    /* ---- assay audit: a server and the GGUF file it serves (checks/audit.h) ---- */
    {"audit.equiv.alone", ASSAY_FAMILY_EQUIVALENCE, "", NULL,
     "greedy tokens against the oracle (tie rule), each request alone", assay_audit_run_equiv_alone,
     NULL, ASSAY_COMMAND_AUDIT, ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS, false},
    {"audit.equiv.concurrent", ASSAY_FAMILY_EQUIVALENCE, "", NULL,
     "greedy tokens against the oracle, requests joining a running batch, more than "
     "the slots",
     assay_audit_run_equiv_concurrent, NULL, ASSAY_COMMAND_AUDIT,
     ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS, false},
    {"audit.equiv.logprobs", ASSAY_FAMILY_EQUIVALENCE, "", "workloads/audit-logprobs.json",
     "top logprobs against the oracle's log-softmax, greedy, all requests at once",
     assay_audit_run_logprobs, NULL, ASSAY_COMMAND_AUDIT, ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS,
     false},
    {"audit.dist.gof.t1", ASSAY_FAMILY_DISTRIBUTIONAL, "", NULL,
     "the first sampled token at temperature 1 against the oracle (under a budget: its TV "
     "within the budget)",
     assay_audit_run_gof_t1, NULL, ASSAY_COMMAND_AUDIT, ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS,
     false},
    {"audit.dist.gof.top-k-top-p", ASSAY_FAMILY_DISTRIBUTIONAL, "", NULL,
     "the first sampled token with top-k and top-p (SEQUENTIAL order) against the oracle",
     assay_audit_run_gof_filtered, NULL, ASSAY_COMMAND_AUDIT,
     ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS, false},
    {"audit.dist.pit.t1", ASSAY_FAMILY_DISTRIBUTIONAL, "", NULL,
     "randomised PIT of whole sampled sequences at temperature 1 (under a budget: the PIT "
     "CDF within the budget)",
     assay_audit_run_pit_t1, NULL, ASSAY_COMMAND_AUDIT, ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS,
     false},
    {"audit.dist.pit.top-k-top-p", ASSAY_FAMILY_DISTRIBUTIONAL, "", NULL,
     "randomised PIT of whole sequences with top-k and top-p", assay_audit_run_pit_filtered, NULL,
     ASSAY_COMMAND_AUDIT, ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS, false},
    {"audit.dist.homogeneity", ASSAY_FAMILY_DISTRIBUTIONAL, "", NULL,
     "two samples: the server's first token against the bundled engine's",
     assay_audit_run_homogeneity, NULL, ASSAY_COMMAND_AUDIT,
     ASSAY_NEED_SERVER | ASSAY_NEED_BASELINE, false},
    {"audit.prop.batch-invariance", ASSAY_FAMILY_PROPERTY, "",
     "workloads/audit-batch-invariance.json",
     "greedy tokens identical at concurrency 1, 2, the slots and twice the slots",
     assay_audit_run_batch_invariance, "quick=12", ASSAY_COMMAND_AUDIT,
     ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS, false},
    {"audit.prop.finish", ASSAY_FAMILY_PROPERTY, "", "workloads/audit-finish.json",
     "each request finishes once with a correct reason: EOS, other stop tokens, "
     "length, abort",
     assay_audit_run_finish, "quick=24", ASSAY_COMMAND_AUDIT, ASSAY_NEED_SERVER, false},
    {"audit.prop.usage", ASSAY_FAMILY_PROPERTY, "", "workloads/audit-usage.json",
     "the token counts the server reports equal what was sent and received", assay_audit_run_usage,
     "quick=16", ASSAY_COMMAND_AUDIT, ASSAY_NEED_SERVER, false},
    {"audit.prop.stream", ASSAY_FAMILY_PROPERTY, "", "workloads/audit-stream.json",
     "streamed and non-streamed outputs identical", assay_audit_run_stream, "quick=8",
     ASSAY_COMMAND_AUDIT, ASSAY_NEED_SERVER, false},
    {"audit.seed.positions", ASSAY_FAMILY_SEEDED, "", NULL,
     "the same seed gives the same sampled tokens alone, again (bit for bit), twice at once "
     "and among neighbours in any arrival order (up to the budget unless bitwise is "
     "promised); distinct seeds with one prompt are distinct streams",
     assay_audit_run_seed_positions, NULL, ASSAY_COMMAND_AUDIT,
     ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS, false},
    {"audit.seed.unseeded", ASSAY_FAMILY_SEEDED, "", NULL,
     "unseeded requests with one prompt are not one stream", assay_audit_run_seed_unseeded, NULL,
     ASSAY_COMMAND_AUDIT, ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS, false},
    {"audit.seed.pairs", ASSAY_FAMILY_SEEDED, "", NULL,
     "chi-squared test of independence of the first tokens of requests with adjacent seeds",
     assay_audit_run_seed_pairs, NULL, ASSAY_COMMAND_AUDIT, ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS,
     false},
    {"audit.prop.idle-requests", ASSAY_FAMILY_PROPERTY, "", NULL,
     "the server's running and waiting requests (/metrics) back to idle after the run",
     assay_audit_run_idle_requests, NULL, ASSAY_COMMAND_AUDIT,
     ASSAY_NEED_SERVER | ASSAY_NEED_METRICS, true},
    {"audit.prop.idle-kv", ASSAY_FAMILY_PROPERTY, "", NULL,
     "the server's KV-cache usage (/metrics) back to its idle level after the run",
     assay_audit_run_idle_kv, NULL, ASSAY_COMMAND_AUDIT, ASSAY_NEED_SERVER | ASSAY_NEED_METRICS,
     true},
    /* ---- assay compare: a candidate against its baseline (checks/pairwise.h) ---- */
    {"compare.greedy", ASSAY_FAMILY_EQUIVALENCE, "", "workloads/equiv-mixed.json",
     "greedy tokens of the candidate against the baseline's, token for token (a "
     "divergence is a floating-point tie only by the tie rule on the oracle's logits, "
     "where the weights are known)",
     assay_pairwise_run_greedy, NULL, ASSAY_COMMAND_COMPARE, ASSAY_NEED_BASELINE, false},
    {"compare.oracle", ASSAY_FAMILY_EQUIVALENCE, "", "workloads/equiv-mixed.json",
     "greedy tokens of the candidate against the oracle, with the tie rule",
     assay_pairwise_run_oracle, NULL, ASSAY_COMMAND_COMPARE, ASSAY_NEED_WEIGHTS, false},
    {"compare.homogeneity", ASSAY_FAMILY_DISTRIBUTIONAL, "", NULL,
     "2 x k homogeneity of the first two sampled tokens: candidate against baseline",
     assay_pairwise_run_homogeneity, "pos=2,len=2,prompt=4,t=0.8,top_k=12,top_p=0.9",
     ASSAY_COMMAND_COMPARE, ASSAY_NEED_BASELINE, false},
    {"compare.gof", ASSAY_FAMILY_DISTRIBUTIONAL, "", NULL,
     "chi-squared of the candidate's first sampled token against the oracle",
     assay_pairwise_run_gof, "pos=1,len=1,prompt=3,t=0.7,top_k=20,top_p=0.9", ASSAY_COMMAND_COMPARE,
     ASSAY_NEED_WEIGHTS, false},
    {"compare.pit", ASSAY_FAMILY_DISTRIBUTIONAL, "", NULL,
     "randomised PIT of the candidate's whole sampled sequences against the oracle",
     assay_pairwise_run_pit, "len=32,prompt=4,prompts=16,t=0.9,top_k=50,top_p=0.95",
     ASSAY_COMMAND_COMPARE, ASSAY_NEED_WEIGHTS, false},
    {"compare.trace", ASSAY_FAMILY_PROPERTY, "", "workloads/prop-trace.json",
     "trace consistency of the candidate: stop tokens, aborts, arrivals at several "
     "steps",
     run_trace, NULL, ASSAY_COMMAND_COMPARE, 0, false},
    {"compare.isolation", ASSAY_FAMILY_PROPERTY, "", "workloads/prop-isolation.json",
     "no cross-sequence attention in the candidate (logits when it exposes them, else "
     "tokens)",
     assay_pairwise_run_isolation, NULL, ASSAY_COMMAND_COMPARE, 0, false},
    {"compare.blocks", ASSAY_FAMILY_PROPERTY, "", "workloads/prop-blocks.json",
     "block conservation of the candidate after every step (needs block_audit)", run_blocks, NULL,
     ASSAY_COMMAND_COMPARE, ASSAY_NEED_BLOCKS, false},
};

#define N_PLAN (sizeof k_plan / sizeof k_plan[0])

const struct assay_plan_item *assay_plan_for(enum assay_command c, size_t *n)
{
    /* The table holds each command's checks together, in its order. */
    size_t first = 0;
    while (first < N_PLAN && k_plan[first].command != c) {
        first++;
    }
    size_t last = first;
    while (last < N_PLAN && k_plan[last].command == c) {
        last++;
    }
    *n = last - first;
    return &k_plan[first];
}

const struct assay_plan_item *assay_plan_find_in(enum assay_command c, const char *name)
{
    for (size_t i = 0; i < N_PLAN; i++) {
        if (k_plan[i].command == c && strcmp(k_plan[i].name, name) == 0) {
            return &k_plan[i];
        }
    }
    return NULL;
}

const struct assay_plan_item *assay_verify_plan(size_t *n)
{
    return assay_plan_for(ASSAY_COMMAND_VERIFY, n);
}

const struct assay_plan_item *assay_plan_find(const char *name)
{
    return assay_plan_find_in(ASSAY_COMMAND_VERIFY, name);
}
