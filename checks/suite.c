#include "suite.h"

#include <stdio.h>
#include <string.h>

#include "../adapters/bundled.h"
#include "../adapters/spec.h"
#include "../core/alloc.h"
#include "../core/mutant.h"
#include "../core/rng.h"
#include "../core/workload.h"
#include "distributional.h"
#include "equivalence.h"
#include "property.h"
#include "seeded.h"

static enum assay_status run_equivalence(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_adapter *a,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res);


static const struct assay_plan_item k_plan[] = {
    {"equiv.kv-cache", ASSAY_FAMILY_EQUIVALENCE, "kv=contiguous,batch=1,chunk=0",
     "workloads/equiv-mixed.json", "KV cache alone: one request at a time, contiguous buffers", run_equivalence, NULL},
    {"equiv.batching", ASSAY_FAMILY_EQUIVALENCE, "kv=off,batch=8",
     "workloads/equiv-small.json",
     "continuous batching alone: full recompute, requests joining a running batch", run_equivalence, NULL},
    {"equiv.continuous-batching", ASSAY_FAMILY_EQUIVALENCE, "kv=contiguous,batch=16,chunk=0",
     "workloads/equiv-mixed.json", "batching with the KV cache: rows of many requests stacked", run_equivalence, NULL},
    {"equiv.paged", ASSAY_FAMILY_EQUIVALENCE, "kv=paged,block=16,prefix=off,batch=1,chunk=0",
     "workloads/equiv-mixed.json", "paged KV and its block manager alone", run_equivalence, NULL},
    {"equiv.preemption", ASSAY_FAMILY_EQUIVALENCE,
     "kv=paged,block=8,prefix=off,batch=8,chunk=0;blocks=24", "workloads/equiv-pressure.json",
     "a pool too small for the batch: recompute-preemption", run_equivalence, NULL},
    {"equiv.prefix-cache", ASSAY_FAMILY_EQUIVALENCE, "kv=paged,block=16,prefix=on,batch=1,chunk=0",
     "workloads/equiv-shared-prefix.json",
     "prefix caching alone: shared system prompts, equal blocks after different histories", run_equivalence, NULL},
    {"equiv.chunked-prefill", ASSAY_FAMILY_EQUIVALENCE, "kv=contiguous,batch=1,chunk=16",
     "workloads/equiv-long-prompts.json", "chunked prefill alone: prompts of several chunks", run_equivalence, NULL},
    {"equiv.all", ASSAY_FAMILY_EQUIVALENCE, "kv=paged,block=16,prefix=on,chunk=32,batch=8;blocks=40",
     "workloads/equiv-shared-prefix.json",
     "every optimisation at once, with a pool small enough to preempt", run_equivalence, NULL},
    {"equiv.all-mixed", ASSAY_FAMILY_EQUIVALENCE, "kv=paged,block=8,prefix=on,chunk=24,batch=16;blocks=48",
     "workloads/equiv-mixed.json", "every optimisation at once over mixed lengths", run_equivalence, NULL},
    {"equiv.batch-invariant", ASSAY_FAMILY_EQUIVALENCE,
     "kv=paged,block=16,prefix=on,chunk=32,batch=16,invariant=on", "workloads/equiv-long-prompts.json",
     "every optimisation with batch-invariant products", run_equivalence, NULL},
    /* Greedy speculative decoding is plain greedy, token for token (TinyGPT
     * with its draft). */
    {"equiv.spec-k1", ASSAY_FAMILY_EQUIVALENCE, "spec=1,kv=off,batch=8",
     "workloads/equiv-small.json", "greedy speculative decoding, k = 1, full recompute",
     run_equivalence, NULL},
    {"equiv.spec-k2", ASSAY_FAMILY_EQUIVALENCE,
     "spec=2,kv=paged,block=16,prefix=off,chunk=0,batch=16", "workloads/equiv-mixed.json",
     "greedy speculative decoding, k = 2, batched over paged KV", run_equivalence, NULL},
    {"equiv.spec-k4", ASSAY_FAMILY_EQUIVALENCE,
     "spec=4,kv=paged,block=8,blocks=24,prefix=off,chunk=0,batch=8", "workloads/equiv-pressure.json",
     "greedy speculative decoding, k = 4, with preemption and rollback", run_equivalence, NULL},
    {"equiv.spec-k8", ASSAY_FAMILY_EQUIVALENCE,
     "spec=8,kv=paged,block=16,prefix=on,chunk=32,batch=8", "workloads/equiv-shared-prefix.json",
     "greedy speculative decoding, k = 8, with prefix caching and chunked prefill",
     run_equivalence, NULL},
    {"equiv.seeded-sameness", ASSAY_FAMILY_EQUIVALENCE,
     "model=mini,kv=paged,block=8,blocks=40,prefix=on,chunk=16,batch=16",
     "workloads/seeded-sampling.json",
     "the same seeds give the same sampled tokens alone, batched, without KV cache, paged, "
     "preempted", assay_seeded_run_sameness, NULL},
    /* Distributional: the mini config (model.h) and its draft mini-draft, so
     * that tens of thousands of samples fit in seconds; the sampling and
     * speculation code under test is the same. */
    {"dist.gof.first", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,batch=256", NULL,
     "chi-squared of the first sampled token against the oracle; top-k binding",
     assay_dist_run_gof, "n=70000,pos=1,len=1,prompt=3,t=0.7,top_k=20,top_p=0.9"},
    {"dist.gof.sequential", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,batch=256,order=sequential",
     NULL, "the first sampled token in the SEQUENTIAL filter order (vLLM's)", assay_dist_run_gof,
     "n=70000,pos=1,len=1,prompt=3,t=0.8,top_k=30,top_p=0.8"},
    {"dist.gof.spec-pair", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,batch=256,spec=1", NULL,
     "chi-squared of the first two tokens (exact joint) under speculation k = 1: acceptance, "
     "residual, bonus and the next round",
     assay_dist_run_gof, "n=155000,pos=2,len=2,prompt=2,t=0.7,top_k=20,top_p=0.9"},
    {"dist.pit.plain", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,batch=256", NULL,
     "randomised PIT of whole sampled sequences (batching, paging, prefix cache, chunking)",
     assay_dist_run_pit, "n=1750,len=32,prompt=4,prompts=16,t=0.9,top_k=50,top_p=0.95"},
    {"dist.pit.spec", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,batch=256,spec=2", NULL,
     "randomised PIT of whole sequences under speculation k = 2",
     assay_dist_run_pit, "n=1750,len=32,prompt=4,prompts=16,t=0.8,top_k=0,top_p=0.8"},
    {"dist.spec.acceptance", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,batch=256,spec=4", NULL,
     "speculative acceptance against beta = sum min(p, q), per draft position",
     assay_dist_run_acceptance, "n=2800,len=16,prompt=4,prompts=16,t=1.0,top_k=0,top_p=0.9"},
    {"dist.homogeneity.spec-vs-plain", ASSAY_FAMILY_DISTRIBUTIONAL, "model=mini,batch=256,spec=1",
     NULL, "2 x k homogeneity of the first token: speculation k = 1 against plain sampling",
     assay_dist_run_homogeneity,
     "n=125000,pos=1,len=2,prompt=1,t=0.7,top_k=40,top_p=0.6,vs=spec=0"},
    /* Property: the pool (blocks, after the ';') is a default a reproducer's
     * --engine may shrink; the block checks use the mini config, whose block
     * manager and scheduler are the same code. */
    {"prop.blocks", ASSAY_FAMILY_PROPERTY,
     "model=mini,kv=paged,block=4,prefix=on,chunk=0,batch=8;blocks=24",
     "workloads/prop-blocks.json",
     "block conservation after every step against the block model: a small pool, prefix "
     "hits and eviction, preemption, aborts, whole prompts admitted together",
     assay_property_run_blocks, NULL},
    {"prop.blocks-spec", ASSAY_FAMILY_PROPERTY,
     "model=mini,kv=paged,block=4,prefix=on,chunk=8,batch=8,spec=3;blocks=32",
     "workloads/prop-blocks.json",
     "block conservation with chunked prefill and speculative rounds rolled back",
     assay_property_run_blocks, NULL},
    {"prop.trace", ASSAY_FAMILY_PROPERTY,
     "model=mini,kv=paged,block=4,prefix=on,chunk=8,batch=8,spec=2;blocks=20",
     "workloads/prop-trace.json",
     "trace consistency in and out: stop tokens, aborts, preemption, several tokens a step",
     assay_property_run_trace, NULL},
    {"prop.isolation", ASSAY_FAMILY_PROPERTY,
     "kv=paged,block=8,prefix=on,chunk=16,batch=8,invariant=on;blocks=40",
     "workloads/prop-isolation.json",
     "no cross-sequence attention: probes alone and among changed neighbours, logits bit for "
     "bit (batch invariant)",
     assay_property_run_isolation, "probes=3"},
    {"prop.isolation-tolerance", ASSAY_FAMILY_PROPERTY,
     "kv=paged,block=8,prefix=on,chunk=16,batch=8,invariant=off,blas_rows=1;blocks=40",
     "workloads/prop-isolation.json",
     "no cross-sequence attention without batch invariance (every product through OpenBLAS): "
     "logits within a stated tolerance",
     assay_property_run_isolation, "probes=3"},
    {"prop.isolation-blackbox", ASSAY_FAMILY_PROPERTY,
     "kv=paged,block=16,prefix=on,chunk=32,batch=8;blocks=40", "workloads/prop-isolation.json",
     "no cross-sequence attention from tokens alone: concurrency 1 against all at once, one "
     "per step and as given",
     assay_property_run_blackbox, NULL},
    {"prop.soak", ASSAY_FAMILY_PROPERTY,
     "model=mini,kv=paged,block=4,prefix=on,chunk=16,batch=16,requests=4096;blocks=48",
     "workloads/prop-soak.json",
     "the long randomised run: 2000 requests, random aborts, frequent preemption; blocks every "
     "step, trace, and tokens equal at concurrency 1",
     assay_property_run_soak, NULL},
};

const struct assay_plan_item *assay_verify_plan(size_t *n)
{
    *n = sizeof k_plan / sizeof k_plan[0];
    return k_plan;
}

const struct assay_plan_item *assay_plan_find(const char *name)
{
    for (size_t i = 0; i < sizeof k_plan / sizeof k_plan[0]; i++) {
        if (strcmp(k_plan[i].name, name) == 0) {
            return &k_plan[i];
        }
    }
    return NULL;
}

/* ---- context: one oracle (and its memo) per weights hash ---------------- */

struct memo_slot {
    char sha256[65];
    struct assay_model *model; /* the oracle's own copy of the weights */
    struct assay_oracle_memo *memo;
};

struct assay_verify_ctx {
    char fixtures[1024];
    char program[1024];
    uint64_t master_seed;
    struct memo_slot slots[8];
    int32_t n_slots;
    struct assay_model_cache *models; /* the models engines of this run share */
    const struct assay_plan_item *ran[64]; /* items run on a non-bundled engine */
    int32_t n_ran;
};

enum assay_status assay_verify_ctx_init(struct assay_verify_ctx **out, const char *fixtures,
                                        uint64_t master_seed)
{
    *out = assay_calloc(1, sizeof **out);
    if (*out == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    if (assay_model_cache_init(&(*out)->models) != ASSAY_OK) {
        assay_free(*out);
        *out = NULL;
        return ASSAY_ERR_NOMEM;
    }
    snprintf((*out)->fixtures, sizeof (*out)->fixtures, "%s", fixtures);
    snprintf((*out)->program, sizeof (*out)->program, "%s",
             assay_mutants_compiled() ? "assay-mutants" : "assay");
    (*out)->master_seed = master_seed;
    return ASSAY_OK;
}

void assay_verify_ctx_free(struct assay_verify_ctx *ctx)
{
    if (ctx == NULL) {
        return;
    }
    for (int32_t i = 0; i < ctx->n_slots; i++) {
        assay_oracle_memo_free(ctx->slots[i].memo);
        assay_model_free(ctx->slots[i].model);
    }
    assay_model_cache_free(ctx->models);
    assay_free(ctx);
}

/* The memo for the weights the engine runs. The oracle gets its own copy
 * of the weights, so nothing the engine does to its copy can reach it. */
enum assay_status assay_verify_memo(struct assay_verify_ctx *ctx, const struct assay_model *engine_model,
                                  struct assay_oracle_memo **out)
{
    for (int32_t i = 0; i < ctx->n_slots; i++) {
        if (strcmp(ctx->slots[i].sha256, engine_model->sha256) == 0) {
            *out = ctx->slots[i].memo;
            return ASSAY_OK;
        }
    }
    if (ctx->n_slots == (int32_t)(sizeof ctx->slots / sizeof ctx->slots[0])) {
        assay_oracle_memo_free(ctx->slots[0].memo);
        assay_model_free(ctx->slots[0].model);
        memmove(&ctx->slots[0], &ctx->slots[1], sizeof ctx->slots[0] * (size_t)(ctx->n_slots - 1));
        ctx->n_slots--;
    }
    struct memo_slot *s = &ctx->slots[ctx->n_slots];
    memset(s, 0, sizeof *s);
    enum assay_status st = assay_model_clone(engine_model, &s->model);
    if (st == ASSAY_OK) {
        st = assay_oracle_memo_init(&s->memo, s->model, engine_model->cfg.n_ctx);
    }
    if (st != ASSAY_OK) {
        assay_model_free(s->model);
        s->model = NULL;
        return st;
    }
    snprintf(s->sha256, sizeof s->sha256, "%s", engine_model->sha256);
    ctx->n_slots++;
    *out = s->memo;
    return ASSAY_OK;
}

/* Whether spec states key=... itself. */
static bool spec_states(const char *spec, const char *key)
{
    const char *p = strchr(spec, ':');
    size_t klen = strlen(key);
    while (p != NULL) {
        p++;
        if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
            return true;
        }
        p = strchr(p, ',');
    }
    return false;
}

char *assay_plan_engine_spec(const struct assay_plan_item *item, const char *base_spec, char *buf,
                             size_t size)
{
    snprintf(buf, size, "%s", base_spec);
    /* The options are the bundled engine's; any other engine (a server, a
     * plugin) runs as its spec says, and the check judges that. */
    if (strcmp(base_spec, "bundled") != 0 && strncmp(base_spec, "bundled:", 8) != 0) {
        return buf;
    }
    char opts[512];
    snprintf(opts, sizeof opts, "%s", item->options);
    /* Options after a ';' are defaults: applied only where the base spec
     * does not state the key (a reproducer's shrunk pool, say). */
    char *defaults = strchr(opts, ';');
    if (defaults != NULL) {
        *defaults++ = '\0';
    }
    for (int pass = 0; pass < 2; pass++) {
        char *list = pass == 0 ? defaults : opts;
        char *save = NULL;
        for (char *kv = list != NULL ? strtok_r(list, ",", &save) : NULL; kv != NULL;
             kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            if (eq == NULL) {
                continue;
            }
            *eq = '\0';
            if (pass == 0 && spec_states(base_spec, kv)) {
                continue;
            }
            char next[1024];
            assay_spec_with(buf, kv, eq + 1, next, sizeof next);
            snprintf(buf, size, "%s", next);
        }
    }
    return buf;
}

static bool bundled_base(const char *spec)
{
    return strcmp(spec, "bundled") == 0 || strncmp(spec, "bundled:", 8) == 0;
}

static bool same_text(const char *x, const char *y)
{
    return (x == NULL && y == NULL) || (x != NULL && y != NULL && strcmp(x, y) == 0);
}

/* An item already run in ctx with the same runner, workload and
 * parameters, or NULL. */
static const struct assay_plan_item *ran_before(const struct assay_verify_ctx *ctx,
                                                const struct assay_plan_item *item)
{
    for (int32_t i = 0; i < ctx->n_ran; i++) {
        const struct assay_plan_item *r = ctx->ran[i];
        if (r != item && r->run == item->run && same_text(r->workload, item->workload) &&
            same_text(r->params, item->params)) {
            return r;
        }
    }
    return NULL;
}

enum assay_status assay_run_plan_item(struct assay_verify_ctx *ctx,
                                      const struct assay_plan_item *item, const char *base_spec,
                                      const char *workload_override,
                                      struct assay_check_result *res)
{
    assay_check_result_init(res, item->name, item->family);
    assay_plan_engine_spec(item, base_spec, res->engine, sizeof res->engine);
    char path[1400];
    if (workload_override != NULL) {
        snprintf(path, sizeof path, "%s", workload_override);
    } else if (item->workload != NULL) {
        snprintf(path, sizeof path, "%s/%s", ctx->fixtures, item->workload);
    } else {
        path[0] = '\0'; /* the check generates its requests from item->params */
    }
    if (workload_override != NULL || item->workload != NULL) {
        snprintf(res->workload, sizeof res->workload, "%s",
                 workload_override != NULL ? workload_override : item->workload);
    } else {
        snprintf(res->workload, sizeof res->workload, "generated by the check: %s",
                 item->params != NULL ? item->params : "defaults");
    }
    int n = snprintf(res->repro, sizeof res->repro, "%s verify --engine '%s' --check %s --seed %llu",
                     ctx->program, res->engine, item->name, (unsigned long long)ctx->master_seed);
    if (n > 0 && (size_t)n < sizeof res->repro && path[0] != '\0') {
        snprintf(res->repro + n, sizeof res->repro - (size_t)n, " --workload %.*s",
                 (int)(sizeof res->repro - (size_t)n - 13), path);
    }

    /* On another engine than the bundled one the items' engine options do
     * not apply (assay_plan_engine_spec), so items that differ only in
     * them are one check: the first runs, the others say which it was. */
    const struct assay_plan_item *same = bundled_base(base_spec) ? NULL : ran_before(ctx, item);
    if (same != NULL) {
        res->repro[0] = '\0';
        assay_check_skip(res,
                         "the same check as %s on this engine: its options (%.200s) configure the "
                         "bundled engine only, and its check and workload are %s's",
                         same->name, item->options, same->name);
        snprintf(res->summary, sizeof res->summary, "not run again: the same check as %s",
                 same->name);
        return ASSAY_OK;
    }
    if (!bundled_base(base_spec) &&
        ctx->n_ran < (int32_t)(sizeof ctx->ran / sizeof ctx->ran[0])) {
        ctx->ran[ctx->n_ran++] = item;
    }

    struct assay_diag diag;
    assay_diag_clear(&diag);
    char why[700];
    struct assay_adapter a;
    enum assay_status st = assay_adapter_open_spec_cached(res->engine, ctx->models, &a, &diag);
    if (st != ASSAY_OK) {
        assay_check_error(res, "engine: %s: %s", assay_status_str(st),
                          assay_diag_format(&diag, why, sizeof why));
        return st == ASSAY_ERR_NOMEM ? st : ASSAY_OK;
    }
    struct assay_engine *engine = assay_bundled_engine(&a);
    struct assay_workload_limits lim = {1 << 30, 0, 0}; /* another adapter: what it states */
    if (engine != NULL) {
        const struct assay_engine_params *p = assay_engine_params(engine);
        lim = (struct assay_workload_limits){p->model->cfg.vocab, p->max_seq_len, p->max_requests};
    } else {
        struct assay_adapter_info info;
        assay_adapter_get_info(&a, &info);
        lim.vocab = info.vocab > 0 ? info.vocab : lim.vocab;
        lim.max_seq_len = info.n_ctx;
    }
    struct assay_workload *w = NULL;
    if (item->workload != NULL || workload_override != NULL) {
        st = assay_workload_load(path, &lim, &w, &diag);
    }
    if (st != ASSAY_OK) {
        assay_check_error(res, "workload: %s", assay_diag_format(&diag, why, sizeof why));
        assay_adapter_close(&a);
        return st == ASSAY_ERR_NOMEM ? st : ASSAY_OK;
    }
    st = item->run(ctx, item, &a, w, res);
    assay_workload_free(w);
    assay_adapter_close(&a);
    return st == ASSAY_ERR_NOMEM ? st : ASSAY_OK;
}

static enum assay_status run_equivalence(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_adapter *a,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res)
{
    (void)item;
    const struct assay_model *model = assay_verify_engine_model(a);
    if (model == NULL || w == NULL) {
        assay_check_skip(res, "%s",
                         model == NULL
                             ? "needs the engine's weights for the oracle (for a server serving a "
                               "GGUF file: assay audit --url URL --model FILE.gguf)"
                             : "needs a workload");
        return ASSAY_OK;
    }
    struct assay_oracle_memo *memo = NULL;
    enum assay_status st = assay_verify_memo(ctx, model, &memo);
    if (st != ASSAY_OK) {
        return st;
    }
    return assay_check_equivalence(a, w, memo, NULL, res);
}

const struct assay_model *assay_verify_engine_model(const struct assay_adapter *a)
{
    struct assay_engine *e = assay_bundled_engine(a);
    return e != NULL ? assay_engine_params(e)->model : NULL;
}

void assay_verify_set_program(struct assay_verify_ctx *ctx, const char *program)
{
    snprintf(ctx->program, sizeof ctx->program, "%s", program);
}

uint64_t assay_verify_seed(const struct assay_verify_ctx *ctx, const char *name)
{
    return assay_seed_derive(ctx->master_seed, name);
}

const char *assay_verify_fixtures(const struct assay_verify_ctx *ctx)
{
    return ctx->fixtures;
}

void assay_verify_finalize(struct assay_check_result *results, size_t n)
{
    /* Holm across the distributional family (checks/distributional.h). */
    (void)assay_dist_finalize(results, n);
}
