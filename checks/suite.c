#include "suite.h"

#include <stdio.h>
#include <string.h>

#include "../adapters/bundled.h"
#include "../adapters/spec.h"
#include "../core/alloc.h"
#include "../core/mutant.h"
#include "../core/rng.h"
#include "../core/workload.h"
#include "equivalence.h"

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
     "kv=paged,block=8,blocks=24,prefix=off,batch=8,chunk=0", "workloads/equiv-pressure.json",
     "a pool too small for the batch: recompute-preemption", run_equivalence, NULL},
    {"equiv.prefix-cache", ASSAY_FAMILY_EQUIVALENCE, "kv=paged,block=16,prefix=on,batch=1,chunk=0",
     "workloads/equiv-shared-prefix.json",
     "prefix caching alone: shared system prompts, equal blocks after different histories", run_equivalence, NULL},
    {"equiv.chunked-prefill", ASSAY_FAMILY_EQUIVALENCE, "kv=contiguous,batch=1,chunk=16",
     "workloads/equiv-long-prompts.json", "chunked prefill alone: prompts of several chunks", run_equivalence, NULL},
    {"equiv.all", ASSAY_FAMILY_EQUIVALENCE, "kv=paged,block=16,blocks=40,prefix=on,chunk=32,batch=8",
     "workloads/equiv-shared-prefix.json",
     "every optimisation at once, with a pool small enough to preempt", run_equivalence, NULL},
    {"equiv.all-mixed", ASSAY_FAMILY_EQUIVALENCE, "kv=paged,block=8,blocks=48,prefix=on,chunk=24,batch=16",
     "workloads/equiv-mixed.json", "every optimisation at once over mixed lengths", run_equivalence, NULL},
    {"equiv.batch-invariant", ASSAY_FAMILY_EQUIVALENCE,
     "kv=paged,block=16,prefix=on,chunk=32,batch=16,invariant=on", "workloads/equiv-long-prompts.json",
     "every optimisation with batch-invariant products", run_equivalence, NULL},
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

char *assay_plan_engine_spec(const struct assay_plan_item *item, const char *base_spec, char *buf,
                             size_t size)
{
    snprintf(buf, size, "%s", base_spec);
    char opts[512];
    snprintf(opts, sizeof opts, "%s", item->options);
    char *save = NULL;
    for (char *kv = strtok_r(opts, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL) {
            continue;
        }
        *eq = '\0';
        char next[1024];
        assay_spec_with(buf, kv, eq + 1, next, sizeof next);
        snprintf(buf, size, "%s", next);
    }
    return buf;
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
    } else {
        snprintf(path, sizeof path, "%s/%s", ctx->fixtures, item->workload);
    }
    snprintf(res->workload, sizeof res->workload, "%s",
             workload_override != NULL ? workload_override : item->workload);
    int n = snprintf(res->repro, sizeof res->repro, "%s verify --engine '%s' --check %s --seed %llu",
                     ctx->program, res->engine, item->name, (unsigned long long)ctx->master_seed);
    if (n > 0 && (size_t)n < sizeof res->repro) {
        snprintf(res->repro + n, sizeof res->repro - (size_t)n, " --workload %.*s",
                 (int)(sizeof res->repro - (size_t)n - 13), path);
    }

    struct assay_diag diag;
    assay_diag_clear(&diag);
    char why[700];
    struct assay_adapter a;
    enum assay_status st = assay_adapter_open_spec_cached(res->engine, ctx->models, &a, &diag);
    if (st != ASSAY_OK) {
        res->verdict = ASSAY_VERDICT_ERROR;
        snprintf(res->failure, sizeof res->failure, "engine: %s: %s", assay_status_str(st),
                 assay_diag_format(&diag, why, sizeof why));
        return st == ASSAY_ERR_NOMEM ? st : ASSAY_OK;
    }
    struct assay_engine *engine = assay_bundled_engine(&a);
    const struct assay_engine_params *p = assay_engine_params(engine);
    struct assay_workload_limits lim = {p->model->cfg.vocab, p->max_seq_len, p->max_requests};
    struct assay_workload *w = NULL;
    if (item->workload != NULL || workload_override != NULL) {
        st = assay_workload_load(path, &lim, &w, &diag);
    }
    if (st != ASSAY_OK) {
        res->verdict = ASSAY_VERDICT_ERROR;
        snprintf(res->failure, sizeof res->failure, "workload: %s",
                 assay_diag_format(&diag, why, sizeof why));
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
        res->verdict = ASSAY_VERDICT_SKIP;
        snprintf(res->failure, sizeof res->failure, "%s",
                 model == NULL ? "needs the engine's weights for the oracle" : "needs a workload");
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
    (void)results;
    (void)n;
}
