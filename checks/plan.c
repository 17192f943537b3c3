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
    {.name = "equiv.kv-cache",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "kv=contiguous,batch=1,chunk=0",
     .workload = "workloads/equiv-mixed.json",
     .about = "KV cache alone: one request at a time, contiguous buffers",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.batching",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .catches = "attn-neighbour-leak",
     .options = "kv=off,batch=8",
     .workload = "workloads/equiv-small.json",
     .about = "continuous batching alone: full recompute, requests joining a running batch",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.continuous-batching",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .catches = "attn-neighbour-leak batch-decode-foreign-position",
     .options = "kv=contiguous,batch=16,chunk=0",
     .workload = "workloads/equiv-mixed.json",
     .about = "batching with the KV cache: rows of many requests stacked",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.paged",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "kv=paged,block=16,prefix=off,batch=1,chunk=0",
     .workload = "workloads/equiv-mixed.json",
     .about = "paged KV and its block manager alone",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.preemption",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .catches = "preempt-redeliver batch-decode-foreign-position",
     .options = "kv=paged,block=8,prefix=off,batch=8,chunk=0;blocks=24",
     .workload = "workloads/equiv-pressure.json",
     .about = "a pool too small for the batch: recompute-preemption",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.prefix-cache",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .catches = "prefix-key-last-block",
     .options = "kv=paged,block=16,prefix=on,batch=1,chunk=0",
     .workload = "workloads/equiv-shared-prefix.json",
     .about = "prefix caching alone: shared system prompts, equal blocks after different histories",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.chunked-prefill",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .catches = "chunk-rope-off-by-one",
     .options = "kv=contiguous,batch=1,chunk=16",
     .workload = "workloads/equiv-long-prompts.json",
     .about = "chunked prefill alone: prompts of several chunks",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.all",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .catches = "block-reuse-while-shared chunk-rope-off-by-one prefix-key-last-block",
     .options = "kv=paged,block=16,prefix=on,chunk=32,batch=8;blocks=40",
     .workload = "workloads/equiv-shared-prefix.json",
     .about = "every optimisation at once, with a pool small enough to preempt",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.all-mixed",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .catches = "preempt-redeliver",
     .options = "kv=paged,block=8,prefix=on,chunk=24,batch=16;blocks=48",
     .workload = "workloads/equiv-mixed.json",
     .about = "every optimisation at once over mixed lengths",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.batch-invariant",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "kv=paged,block=16,prefix=on,chunk=32,batch=16,invariant=on",
     .workload = "workloads/equiv-long-prompts.json",
     .about = "every optimisation with batch-invariant products",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    /* Greedy speculative decoding is plain greedy, token for token (TinyGPT
     * with its draft). */
    {.name = "equiv.spec-k1",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "spec=1,kv=off,batch=8",
     .workload = "workloads/equiv-small.json",
     .about = "greedy speculative decoding, k = 1, full recompute",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.spec-k2",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "spec=2,kv=paged,block=16,prefix=off,chunk=0,batch=16",
     .workload = "workloads/equiv-mixed.json",
     .about = "greedy speculative decoding, k = 2, batched over paged KV",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.spec-k4",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "spec=4,kv=paged,block=8,blocks=24,prefix=off,chunk=0,batch=8",
     .workload = "workloads/equiv-pressure.json",
     .about = "greedy speculative decoding, k = 4, with preemption and rollback",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "equiv.spec-k8",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .catches = "block-reuse-while-shared",
     .options = "spec=8,kv=paged,block=16,prefix=on,chunk=32,batch=8",
     .workload = "workloads/equiv-shared-prefix.json",
     .about = "greedy speculative decoding, k = 8, with prefix caching and chunked prefill",
     .run = run_equivalence,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "seed.configurations",
     .family = ASSAY_FAMILY_SEEDED,
     .catches = "unseeded-steals-seeds seed-restart-after-preempt partial-prefill-advances-seed",
     .options = "model=mini,draft=mini-draft,kv=paged,block=8,blocks=40,prefix=on,chunk=16,"
                "batch=16",
     .workload = "workloads/seeded-sampling.json",
     .about = "the same seeds give the same sampled tokens alone, batched, without KV cache, "
              "paged, preempted",
     .run = run_seeded_sameness,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_BUNDLED | ASSAY_NEED_SEEDS},
    {.name = "seed.positions",
     .family = ASSAY_FAMILY_SEEDED,
     .catches = "unseeded-steals-seeds seed-zero-unseeded seed-low-32-bits "
                "seed-restart-after-preempt partial-prefill-advances-seed",
     .options = "model=mini,kv=paged,block=4,prefix=on,chunk=8,batch=8;blocks=40",
     .about = "seeds 0, 1, 2^31-1, 2^32-1, 2^32, 2^53, 2^63, 2^64-1: alone, alone again, twice in "
              "one batch, first, last, interleaved, joining a running batch, in a pool that "
              "preempts",
     .run = run_seed_positions,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_SEEDS},
    {.name = "seed.unseeded",
     .family = ASSAY_FAMILY_SEEDED,
     .catches = "unseeded-one-stream",
     .options = "model=mini,kv=paged,block=4,prefix=on,batch=8",
     .about = "unseeded requests with one prompt are not one stream",
     .run = run_seed_unseeded,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "seed.pairs",
     .family = ASSAY_FAMILY_SEEDED,
     .catches = "seed-low-32-bits",
     .options = "model=mini,batch=256,requests=8192",
     .about = "distinct seeds are independent streams: adjacent seeds and seeds apart only in bit "
              "32, a chi-squared test of independence of pairs",
     .run = run_seed_pairs,
     .params = "pairs=3000",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS | ASSAY_NEED_SEEDS},
    {.name = "equiv.fuzz",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "model=mini,draft=mini-draft",
     .about = "differential fuzzing: random configurations and workloads (block multiples, cached "
              "prompts, equal lengths together, aborts in every phase, pool pressure, "
              "speculation, edge seeds) against the oracle, every step audited",
     .run = run_fuzz,
     .params = "cases=150,seconds=60",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS | ASSAY_NEED_BUNDLED},
    /* Distributional: the mini config (model.h) and its draft mini-draft, so
     * that tens of thousands of samples fit in seconds; the sampling and
     * speculation code under test is the same. */
    {.name = "dist.gof.first",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .catches = "softmax-twice topk-renorm-then-topp temp-by-sharpness topp-drops-crossing",
     .options = "model=mini,draft=mini-draft,batch=256",
     .about = "chi-squared of the first sampled token against the oracle; top-p binding inside "
              "top-k (JOINT order)",
     .run = run_gof,
     .params = "n=70000,pos=1,len=1,prompt=3,t=0.7,top_k=40,top_p=0.6",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "tokens"},
    {.name = "dist.gof.sequential",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .catches = "softmax-twice temp-by-sharpness topp-drops-crossing",
     .options = "model=mini,draft=mini-draft,batch=256,order=sequential",
     .about = "the first sampled token in the SEQUENTIAL filter order (vLLM's); top-p binding "
              "inside top-k",
     .run = run_gof,
     .params = "n=70000,pos=1,len=1,prompt=3,t=0.8,top_k=30,top_p=0.8",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "tokens"},
    {.name = "dist.gof.spec-pair",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .catches = "spec-residual-from-p spec-accept-q-over-p spec-bonus-from-draft "
                "spec-ratio-at-t1 topk-renorm-then-topp spec-verify-greedy "
                "spec-verify-topk-renorm",
     .options = "model=mini,draft=mini-draft,batch=256,spec=1",
     .about = "chi-squared of the first two tokens (exact joint) under speculation k = 1: "
              "acceptance, residual, bonus and the next round; top-k binding",
     .run = run_gof,
     .params = "n=155000,pos=2,len=2,prompt=2,t=0.7,top_k=20,top_p=0.9",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "tokens"},
    /* Above temperature 1: a filter applied before the temperature (or top-p
     * measured on the untempered distribution) keeps fewer tokens than it
     * should here, where below 1 it only keeps more. */
    {.name = "dist.gof.hot-top-k",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "model=mini,draft=mini-draft,batch=256",
     .about = "the first sampled token at temperature 1.5; top-k binding (top-p 0.95 does not cut)",
     .run = run_gof,
     .params = "n=70000,pos=1,len=1,prompt=3,t=1.5,top_k=12,top_p=0.95",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "tokens"},
    {.name = "dist.gof.hot-top-p",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .catches = "topp-untempered",
     .options = "model=mini,draft=mini-draft,batch=256",
     .about = "the first sampled token at temperature 1.5; top-p binding inside top-k",
     .run = run_gof,
     .params = "n=70000,pos=1,len=1,prompt=3,t=1.5,top_k=120,top_p=0.6",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "tokens"},
    /* Ties on purpose: mini-twins (model.h) ties tokens 2i and 2i + 1
     * exactly; the engine's own product (blas_rows=0) keeps them bit-equal,
     * so the tie rule decides the cut (distributional.h, tie=). */
    {.name = "dist.gof.ties-top-k",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .catches = "topk-keeps-ties",
     .options = "model=mini-twins,batch=256,blas_rows=0",
     .about = "the first sampled token with an exact tie at top-k's k-th rank: the lower id kept, "
              "the higher removed",
     .run = run_gof,
     .params = "n=30000,pos=1,len=1,prompt=3,t=1.5,top_k=5,top_p=1,tie=k",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "tokens"},
    {.name = "dist.gof.ties-top-p",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .catches = "topp-keeps-ties topp-untempered",
     .options = "model=mini-twins,batch=256,blas_rows=0",
     .about = "the first sampled token with an exact tie at the token crossing top-p: the lower "
              "id kept, the higher removed",
     .run = run_gof,
     .params = "n=30000,pos=1,len=1,prompt=3,t=0.7,top_k=0,top_p=0.15,tie=p",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "tokens"},
    {.name = "dist.pit.plain",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "model=mini,draft=mini-draft,batch=256",
     .about = "randomised PIT of whole sampled sequences (batching, paging, prefix cache, "
              "chunking)",
     .run = run_pit,
     .params = "n=1750,len=32,prompt=4,prompts=16,t=0.9,top_k=50,top_p=0.95",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "sequences"},
    {.name = "dist.pit.hot",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "model=mini,draft=mini-draft,batch=256",
     .about = "randomised PIT of whole sequences at temperature 1.5; top-k and top-p each binding "
              "at about half the positions",
     .run = run_pit,
     .params = "n=1750,len=32,prompt=4,prompts=16,t=1.5,top_k=90,top_p=0.6",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "sequences"},
    {.name = "dist.pit.ties",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .catches = "topk-keeps-ties topp-keeps-ties",
     .options = "model=mini-twins,batch=256,blas_rows=0",
     .about = "randomised PIT of whole sequences on mini-twins: an exact tie at the top-k cut "
              "(odd k) or at the top-p crossing at many positions",
     .run = run_pit,
     .params = "n=1750,len=32,prompt=4,prompts=16,t=0.7,top_k=9,top_p=0.3,tie=any",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "sequences"},
    {.name = "dist.pit.spec",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .catches = "spec-residual-from-p spec-accept-q-over-p spec-bonus-from-draft "
                "spec-ratio-at-t1 spec-draft-ignores-top-p topk-zero-keeps-one "
                "spec-verify-greedy",
     .options = "model=mini,draft=near:0.05,batch=256,spec=2",
     .about = "randomised PIT of whole sequences under speculation k = 2 with a mostly accepted "
              "draft",
     .run = run_pit,
     .params = "n=1750,len=32,prompt=4,prompts=16,t=0.8,top_k=0,top_p=0.8",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "sequences"},
    {.name = "dist.spec.acceptance",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .catches = "spec-draft-ignores-top-p topk-zero-keeps-one",
     .options = "model=mini,draft=mini-draft,batch=256,spec=4",
     .about = "speculative acceptance against beta = sum min(p, q), per draft position",
     .run = run_acceptance,
     .params = "n=2800,len=16,prompt=4,prompts=16,t=1.0,top_k=0,top_p=0.9",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS | ASSAY_NEED_BUNDLED,
     .group = "sequences"},
    /* A draft derived from the target's own weights (draft=near:NOISE,
     * model.h) that accepts about 70% of proposals, where mini-draft
     * accepts 3%: acceptance, the residual after a late rejection and the
     * token after a wholly accepted round are each sampled thousands of
     * times (dist.pit.spec and the homogeneity check below run it too). */
    {.name = "dist.gof.spec-pair-near",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .catches = "spec-residual-reuses-accept-u",
     .options = "model=mini,draft=near:0.05,batch=256,spec=1",
     .about = "the first two tokens under speculation k = 1 with a mostly accepted draft: "
              "acceptance, the residual and the token after an accepted round; top-k binding",
     .run = run_gof,
     .params = "n=60000,pos=2,len=2,prompt=2,t=0.7,top_k=20,top_p=0.9",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS,
     .group = "tokens"},
    {.name = "dist.pit.spec-bonus",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "model=mini,draft=near:0.05,batch=256,spec=3",
     .about = "randomised PIT of the tokens drawn after every proposal of a round was accepted (k "
              "= 3, a mostly accepted draft), each against the target given its prefix",
     .run = run_pit,
     .params = "n=1750,len=32,prompt=4,prompts=16,t=0.9,top_k=50,top_p=0.95,only=bonus",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS | ASSAY_NEED_BUNDLED,
     .group = "sequences"},
    {.name = "dist.spec.acceptance-near",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "model=mini,draft=near:0.15,batch=256,spec=4",
     .about = "speculative acceptance against beta = sum min(p, q) with a mostly accepted draft, "
              "per draft position",
     .run = run_acceptance,
     .params = "n=1000,len=16,prompt=4,prompts=16,t=1.0,top_k=0,top_p=0.9",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_WEIGHTS | ASSAY_NEED_BUNDLED,
     .group = "sequences"},
    {.name = "dist.homogeneity.spec-vs-plain",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .catches = "spec-verify-topk-renorm spec-residual-reuses-accept-u",
     .options = "model=mini,draft=near:0.05,batch=256,spec=1",
     .about = "2 x k homogeneity of the first token: speculation k = 1 against plain sampling",
     .run = run_homogeneity,
     .params = "n=125000,pos=1,len=2,prompt=1,t=0.7,top_k=40,top_p=0.6,vs=spec=0",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_BUNDLED,
     .group = "tokens"},
    /* Property: the pool (blocks, after the ';') is a default a reproducer's
     * --engine may shrink; the block checks use the mini config, whose block
     * manager and scheduler are the same code. */
    {.name = "prop.blocks",
     .family = ASSAY_FAMILY_PROPERTY,
     .catches = "abort-double-free evictable-counted-free prefix-entry-dangling "
                "preempt-resets-boundary abort-leaks-blocks admit-ignores-promised bos-prepended "
                "preempt-pad-slot pool-dry-assert pool-dry-spin",
     .options = "model=mini,draft=mini-draft,kv=paged,block=4,prefix=on,chunk=0,batch=8;blocks=24",
     .workload = "workloads/prop-blocks.json",
     .about = "block conservation after every step against the block model: a small pool, prefix "
              "hits and eviction, preemption, aborts, whole prompts admitted together",
     .run = run_blocks,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_BLOCKS},
    {.name = "prop.blocks-spec",
     .family = ASSAY_FAMILY_PROPERTY,
     .catches = "abort-double-free evictable-counted-free prefix-entry-dangling "
                "preempt-resets-boundary abort-leaks-blocks admit-ignores-promised "
                "spec-rollback-leak bos-prepended preempt-pad-slot pool-dry-assert pool-dry-spin",
     .options = "model=mini,draft=mini-draft,kv=paged,block=4,prefix=on,chunk=8,batch=8,"
                "spec=3;blocks=32",
     .workload = "workloads/prop-blocks.json",
     .about = "block conservation with chunked prefill and speculative rounds rolled back",
     .run = run_blocks,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_BLOCKS},
    {.name = "prop.trace",
     .family = ASSAY_FAMILY_PROPERTY,
     .catches = "max-tokens-overshoot stop-at-limit-length preempt-pad-slot pool-dry-assert "
                "pool-dry-spin",
     .options = "model=mini,draft=mini-draft,kv=paged,block=4,prefix=on,chunk=8,batch=8,"
                "spec=2;blocks=20",
     .workload = "workloads/prop-trace.json",
     .about = "trace consistency in and out: stop tokens, aborts, preemption, several tokens a "
              "step",
     .run = run_trace,
     .command = ASSAY_COMMAND_VERIFY},
    /* The same with a draft that is mostly accepted: stop tokens accepted
     * among a round's proposals, not only drawn after them. */
    {.name = "prop.trace-spec-near",
     .family = ASSAY_FAMILY_PROPERTY,
     .catches = "spec-past-accepted-stop stop-at-limit-length",
     .options = "model=mini,draft=near:0.05,kv=paged,block=4,prefix=on,chunk=8,batch=8,"
                "spec=4;blocks=32",
     .workload = "workloads/prop-trace.json",
     .about = "trace consistency with a draft that is mostly accepted: stop tokens accepted "
              "within a speculative round",
     .run = run_trace,
     .command = ASSAY_COMMAND_VERIFY},
    {.name = "prop.isolation",
     .family = ASSAY_FAMILY_PROPERTY,
     .catches = "padding-row-nan full-hit-wrong-position preempt-pad-slot pool-dry-assert "
                "pool-dry-spin",
     .options = "kv=paged,block=8,prefix=on,chunk=16,batch=8,invariant=on;blocks=40",
     .workload = "workloads/prop-isolation.json",
     .about = "no cross-sequence attention: probes alone and among changed neighbours, logits bit "
              "for bit (batch invariant)",
     .run = run_isolation,
     .params = "probes=3",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_LOGITS},
    {.name = "prop.isolation-tolerance",
     .family = ASSAY_FAMILY_PROPERTY,
     .catches = "padding-row-nan full-hit-wrong-position preempt-pad-slot pool-dry-assert "
                "pool-dry-spin",
     .options = "kv=paged,block=8,prefix=on,chunk=16,batch=8,invariant=off,blas_rows=1;blocks=40",
     .workload = "workloads/prop-isolation.json",
     .about = "no cross-sequence attention without batch invariance (every product through "
              "OpenBLAS): logits within a stated tolerance",
     .run = run_isolation,
     .params = "probes=3",
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_LOGITS},
    {.name = "prop.isolation-blackbox",
     .family = ASSAY_FAMILY_PROPERTY,
     .options = "kv=paged,block=16,prefix=on,chunk=32,batch=8;blocks=40",
     .workload = "workloads/prop-isolation.json",
     .about = "no cross-sequence attention from tokens alone: concurrency 1 against all at once, "
              "one per step and as given",
     .run = run_blackbox,
     .command = ASSAY_COMMAND_VERIFY},
    {.name = "prop.soak",
     .family = ASSAY_FAMILY_PROPERTY,
     .catches = "max-tokens-overshoot preempt-pad-slot pool-dry-assert pool-dry-spin",
     .options = "model=mini,draft=mini-draft,kv=paged,block=4,prefix=on,chunk=16,batch=16,"
                "requests=4096;blocks=48",
     .workload = "workloads/prop-soak.json",
     .about = "the long randomised run: 2000 requests, random aborts, frequent preemption; blocks "
              "every step, trace, and tokens equal at concurrency 1",
     .run = run_soak,
     .command = ASSAY_COMMAND_VERIFY,
     .needs = ASSAY_NEED_BLOCKS},
    /* ---- assay audit: a server and the GGUF file it serves (checks/audit.h) ---- */
    {.name = "audit.equiv.alone",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "",
     .about = "greedy tokens against the oracle (tie rule), each request alone",
     .run = assay_audit_run_equiv_alone,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS},
    {.name = "audit.equiv.concurrent",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "",
     .about = "greedy tokens against the oracle, requests joining a running batch, more than the "
              "slots",
     .run = assay_audit_run_equiv_concurrent,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS},
    {.name = "audit.equiv.logprobs",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "",
     .workload = "workloads/audit-logprobs.json",
     .about = "top logprobs against the oracle's log-softmax, greedy, all requests at once",
     .run = assay_audit_run_logprobs,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS},
    {.name = "audit.dist.gof.t1",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "",
     .about = "the first sampled token at temperature 1 against the oracle (under a budget: its "
              "TV within the budget)",
     .run = assay_audit_run_gof_t1,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS},
    {.name = "audit.dist.gof.top-k-top-p",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "",
     .about = "the first sampled token with top-k and top-p (SEQUENTIAL order) against the oracle",
     .run = assay_audit_run_gof_filtered,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS},
    {.name = "audit.dist.pit.t1",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "",
     .about = "randomised PIT of whole sampled sequences at temperature 1 (under a budget: the "
              "PIT CDF within the budget)",
     .run = assay_audit_run_pit_t1,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS},
    {.name = "audit.dist.pit.top-k-top-p",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "",
     .about = "randomised PIT of whole sequences with top-k and top-p",
     .run = assay_audit_run_pit_filtered,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS},
    {.name = "audit.dist.homogeneity",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "",
     .about = "two samples: the server's first token against the bundled engine's",
     .run = assay_audit_run_homogeneity,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_BASELINE},
    {.name = "audit.prop.batch-invariance",
     .family = ASSAY_FAMILY_PROPERTY,
     .options = "",
     .workload = "workloads/audit-batch-invariance.json",
     .about = "greedy tokens identical at concurrency 1, 2, the slots and twice the slots",
     .run = assay_audit_run_batch_invariance,
     .params = "quick=12",
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS},
    {.name = "audit.prop.finish",
     .family = ASSAY_FAMILY_PROPERTY,
     .options = "",
     .workload = "workloads/audit-finish.json",
     .about = "each request finishes once with a correct reason: EOS, other stop tokens, length, "
              "abort",
     .run = assay_audit_run_finish,
     .params = "quick=24",
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER},
    {.name = "audit.prop.usage",
     .family = ASSAY_FAMILY_PROPERTY,
     .options = "",
     .workload = "workloads/audit-usage.json",
     .about = "the token counts the server reports equal what was sent and received",
     .run = assay_audit_run_usage,
     .params = "quick=16",
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER},
    {.name = "audit.prop.stream",
     .family = ASSAY_FAMILY_PROPERTY,
     .options = "",
     .workload = "workloads/audit-stream.json",
     .about = "streamed and non-streamed outputs identical",
     .run = assay_audit_run_stream,
     .params = "quick=8",
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER},
    {.name = "audit.seed.positions",
     .family = ASSAY_FAMILY_SEEDED,
     .options = "",
     .about = "the same seed gives the same sampled tokens alone, again (bit for bit), twice at "
              "once and among neighbours in any arrival order (up to the budget unless bitwise is "
              "promised); distinct seeds with one prompt are distinct streams",
     .run = assay_audit_run_seed_positions,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS},
    {.name = "audit.seed.unseeded",
     .family = ASSAY_FAMILY_SEEDED,
     .options = "",
     .about = "unseeded requests with one prompt are not one stream",
     .run = assay_audit_run_seed_unseeded,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS},
    {.name = "audit.seed.pairs",
     .family = ASSAY_FAMILY_SEEDED,
     .options = "",
     .about = "chi-squared test of independence of the first tokens of requests with adjacent "
              "seeds",
     .run = assay_audit_run_seed_pairs,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_WEIGHTS},
    {.name = "audit.prop.idle-requests",
     .family = ASSAY_FAMILY_PROPERTY,
     .options = "",
     .about = "the server's running and waiting requests (/metrics) back to idle after the run",
     .run = assay_audit_run_idle_requests,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_METRICS,
     .after_bench = true},
    {.name = "audit.prop.idle-kv",
     .family = ASSAY_FAMILY_PROPERTY,
     .options = "",
     .about = "the server's KV-cache usage (/metrics) back to its idle level after the run",
     .run = assay_audit_run_idle_kv,
     .command = ASSAY_COMMAND_AUDIT,
     .needs = ASSAY_NEED_SERVER | ASSAY_NEED_METRICS,
     .after_bench = true},
    /* ---- assay compare: a candidate against its baseline (checks/pairwise.h) ---- */
    {.name = "compare.greedy",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "",
     .workload = "workloads/equiv-mixed.json",
     .about = "greedy tokens of the candidate against the baseline's, token for token (a "
              "divergence is a floating-point tie only by the tie rule on the oracle's logits, "
              "where the weights are known)",
     .run = assay_pairwise_run_greedy,
     .command = ASSAY_COMMAND_COMPARE,
     .needs = ASSAY_NEED_BASELINE},
    {.name = "compare.oracle",
     .family = ASSAY_FAMILY_EQUIVALENCE,
     .options = "",
     .workload = "workloads/equiv-mixed.json",
     .about = "greedy tokens of the candidate against the oracle, with the tie rule",
     .run = assay_pairwise_run_oracle,
     .command = ASSAY_COMMAND_COMPARE,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "compare.homogeneity",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "",
     .about = "2 x k homogeneity of the first two sampled tokens: candidate against baseline",
     .run = assay_pairwise_run_homogeneity,
     .params = "pos=2,len=2,prompt=4,t=0.8,top_k=12,top_p=0.9",
     .command = ASSAY_COMMAND_COMPARE,
     .needs = ASSAY_NEED_BASELINE},
    {.name = "compare.gof",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "",
     .about = "chi-squared of the candidate's first sampled token against the oracle",
     .run = assay_pairwise_run_gof,
     .params = "pos=1,len=1,prompt=3,t=0.7,top_k=20,top_p=0.9",
     .command = ASSAY_COMMAND_COMPARE,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "compare.pit",
     .family = ASSAY_FAMILY_DISTRIBUTIONAL,
     .options = "",
     .about = "randomised PIT of the candidate's whole sampled sequences against the oracle",
     .run = assay_pairwise_run_pit,
     .params = "len=32,prompt=4,prompts=16,t=0.9,top_k=50,top_p=0.95",
     .command = ASSAY_COMMAND_COMPARE,
     .needs = ASSAY_NEED_WEIGHTS},
    {.name = "compare.trace",
     .family = ASSAY_FAMILY_PROPERTY,
     .options = "",
     .workload = "workloads/prop-trace.json",
     .about = "trace consistency of the candidate: stop tokens, aborts, arrivals at several steps",
     .run = run_trace,
     .command = ASSAY_COMMAND_COMPARE},
    {.name = "compare.isolation",
     .family = ASSAY_FAMILY_PROPERTY,
     .options = "",
     .workload = "workloads/prop-isolation.json",
     .about = "no cross-sequence attention in the candidate (logits when it exposes them, else "
              "tokens)",
     .run = assay_pairwise_run_isolation,
     .command = ASSAY_COMMAND_COMPARE},
    {.name = "compare.blocks",
     .family = ASSAY_FAMILY_PROPERTY,
     .options = "",
     .workload = "workloads/prop-blocks.json",
     .about = "block conservation of the candidate after every step (needs block_audit)",
     .run = run_blocks,
     .command = ASSAY_COMMAND_COMPARE,
     .needs = ASSAY_NEED_BLOCKS},
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
