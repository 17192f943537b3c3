/*
 * context.c - the state of a run and the one executor of a plan item
 * (context.h). assay_verify_ctx_init / _free hold the oracle memos by
 * weights, the seeds, the fixtures folder and the reproducer settings;
 * assay_run_plan_item opens the item's engine spec, loads its workload,
 * builds the target (assay_target_of), checks its needs and calls its runner,
 * in a child process unless isolation is off. `assay verify`, `assay compare`
 * and the shrinker run checks through it.
 */
#include "context.h"

#include <stdio.h>
#include <string.h>

#include "../adapters/bundled.h"
#include "../adapters/spec.h"
#include "../core/alloc.h"
#include "../core/mutant.h"
#include "../core/rng.h"
#include "../core/workload.h"
#include "../engine/engine.h"
#include "distributional.h"
#include "equivalence.h"
#include "isolate.h"

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
    struct assay_model_cache *models;      /* the models engines of this run share */
    const struct assay_plan_item *ran[64]; /* items run on a non-bundled engine */
    int32_t n_ran;
    /* What the command adds to every target (assay_verify_ctx_set_target). */
    void *owner;
    const struct assay_model *weights;
    char baseline[1024];
    struct assay_isolation iso; /* how each check runs (checks/isolate.h) */
    char repro_dir[1024];
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
    snprintf((*out)->fixtures, sizeof(*out)->fixtures, "%s", fixtures);
    snprintf((*out)->program, sizeof(*out)->program, "%s",
             assay_mutants_compiled() ? "assay-mutants" : "assay");
    (*out)->master_seed = master_seed;
    (*out)->iso = assay_isolation_default();
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
enum assay_status assay_verify_memo(struct assay_verify_ctx *ctx,
                                    const struct assay_model *engine_model,
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

struct assay_target assay_target_of(const struct assay_verify_ctx *ctx,
                                    const struct assay_adapter *a, const char *spec)
{
    struct assay_target t;
    memset(&t, 0, sizeof t);
    t.adapter = a;
    t.spec = spec;
    t.owner = ctx->owner;
    t.baseline = ctx->baseline[0] != '\0' ? ctx->baseline : NULL;
    struct assay_adapter_info info;
    assay_adapter_get_info(a, &info);
    t.order = info.sampling_order; /* what the engine says it does */
    /* The bundled engine's own weights, draft and sampling order. */
    struct assay_engine *e = assay_bundled_engine(a);
    if (e != NULL) {
        const struct assay_engine_params *p = assay_engine_params(e);
        t.model = p->model;
        t.draft = p->draft;
        t.order = p->sampling_order;
        t.can |= ASSAY_NEED_BUNDLED;
    }
    if (ctx->weights != NULL) {
        t.model = ctx->weights; /* the command's weights come first (compare --model) */
    }
    t.can |= t.model != NULL ? ASSAY_NEED_WEIGHTS : 0;
    t.can |= a->vt->set_logits_sink != NULL && info.vocab > 0 ? ASSAY_NEED_LOGITS : 0;
    t.can |= a->vt->block_audit != NULL ? ASSAY_NEED_BLOCKS : 0;
    t.can |= info.deterministic_seeds ? ASSAY_NEED_SEEDS : 0;
    t.can |= t.baseline != NULL ? ASSAY_NEED_BASELINE : 0;
    return t;
}

void assay_verify_ctx_set_target(struct assay_verify_ctx *ctx, void *owner,
                                 const struct assay_model *weights, const char *baseline)
{
    ctx->owner = owner;
    ctx->weights = weights;
    snprintf(ctx->baseline, sizeof ctx->baseline, "%s", baseline != NULL ? baseline : "");
}

char *assay_repro_line(char *buf, size_t size, const char *program, const char *command,
                       const char *target_args, const char *check, uint64_t seed, const char *tail)
{
    int n = snprintf(buf, size, "%s %s %s --check %s --seed %llu%s", program, command, target_args,
                     check, (unsigned long long)seed, tail != NULL ? tail : "");
    if (n < 0 || (size_t)n >= size) {
        buf[0] = '\0'; /* a line cut short would rerun something else: none */
    }
    return buf;
}

/* What a check's process runs: open the engine, load the workload, build
 * the target, and call the check's runner. */
struct item_run {
    struct assay_verify_ctx *ctx;
    const struct assay_plan_item *item;
    const char *workload_override;
    const char *path;
    int32_t memo_n[8]; /* each memo slot's size when the check began */
};

/* In the check's process: the oracle rows it added to the memos, by the
 * weights' hash. */
static enum assay_status send_memos(void *arg, FILE *f)
{
    const struct item_run *ir = arg;
    const struct assay_verify_ctx *ctx = ir->ctx;
    int32_t n = ctx->n_slots;
    if (fwrite(&n, sizeof n, 1, f) != 1) {
        return ASSAY_ERR_IO;
    }
    for (int32_t i = 0; i < n; i++) {
        /* A slot the check made itself has no rows the parent can place. */
        int32_t from = i < (int32_t)(sizeof ir->memo_n / sizeof ir->memo_n[0]) ? ir->memo_n[i] : 0;
        if (fwrite(ctx->slots[i].sha256, sizeof ctx->slots[i].sha256, 1, f) != 1) {
            return ASSAY_ERR_IO;
        }
        enum assay_status st = assay_oracle_memo_write(ctx->slots[i].memo, from, f);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    return ASSAY_OK;
}

/* In the parent: those rows, into its own memos. */
static enum assay_status receive_memos(void *arg, FILE *f)
{
    struct item_run *ir = arg;
    struct assay_verify_ctx *ctx = ir->ctx;
    int32_t n = 0;
    if (fread(&n, sizeof n, 1, f) != 1) {
        return ASSAY_ERR_IO;
    }
    for (int32_t i = 0; i < n; i++) {
        char sha[sizeof ctx->slots[0].sha256];
        if (fread(sha, sizeof sha, 1, f) != 1) {
            return ASSAY_ERR_IO;
        }
        sha[sizeof sha - 1] = '\0';
        struct memo_slot *slot = NULL;
        for (int32_t j = 0; j < ctx->n_slots; j++) {
            slot = strcmp(ctx->slots[j].sha256, sha) == 0 ? &ctx->slots[j] : slot;
        }
        if (slot == NULL) {
            return ASSAY_OK; /* weights the parent has no memo for: the rest is lost */
        }
        enum assay_status st = assay_oracle_memo_read(slot->memo, f);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    return ASSAY_OK;
}

/* What a workload may hold on adapter a: the bundled engine's own
 * vocabulary, context and request limits; another adapter's stated
 * vocabulary and context. */
static struct assay_workload_limits workload_limits(const struct assay_adapter *a)
{
    struct assay_engine *engine = assay_bundled_engine(a);
    struct assay_workload_limits lim = {1 << 30, 0, 0};
    if (engine != NULL) {
        const struct assay_engine_params *p = assay_engine_params(engine);
        lim = (struct assay_workload_limits){p->model->cfg.vocab, p->max_seq_len, p->max_requests};
    } else {
        struct assay_adapter_info info;
        assay_adapter_get_info(a, &info);
        lim.vocab = info.vocab > 0 ? info.vocab : lim.vocab;
        lim.max_seq_len = info.n_ctx;
    }
    return lim;
}

static enum assay_status run_item(void *arg, struct assay_check_result *res)
{
    const struct item_run *ir = arg;
    struct assay_verify_ctx *ctx = ir->ctx;
    const struct assay_plan_item *item = ir->item;
    const char *workload_override = ir->workload_override;
    const char *path = ir->path;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    char why[700];
    struct assay_adapter a;
    enum assay_status st = assay_adapter_open_spec_cached(res->engine, ctx->models, &a, &diag);
    if (st != ASSAY_OK) {
        assay_check_error(res, "engine: %s: %s", assay_status_str(st),
                          assay_diag_format(&diag, why, sizeof why));
        return assay_status_keep_nomem(st);
    }
    struct assay_workload_limits lim = workload_limits(&a);
    struct assay_workload *w = NULL;
    if (item->workload != NULL || workload_override != NULL) {
        st = assay_workload_load(path, &lim, &w, &diag);
    }
    if (st != ASSAY_OK) {
        assay_check_error(res, "workload: %s", assay_diag_format(&diag, why, sizeof why));
        assay_adapter_close(&a);
        return assay_status_keep_nomem(st);
    }
    struct assay_target t = assay_target_of(ctx, &a, res->engine);
    if (assay_target_meets(&t, item, res)) {
        st = item->run(ctx, item, &t, w, res);
    }
    assay_workload_free(w);
    assay_adapter_close(&a);
    return assay_status_keep_nomem(st);
}

enum assay_status assay_verify_check_workload(struct assay_verify_ctx *ctx,
                                              const struct assay_plan_item *item,
                                              const char *base_spec, const char *path,
                                              struct assay_diag *diag)
{
    assay_diag_clear(diag);
    char spec[sizeof ((struct assay_check_result *)NULL)->engine];
    assay_plan_engine_spec(item, base_spec, spec, sizeof spec);
    struct assay_adapter a;
    enum assay_status st = assay_adapter_open_spec_cached(spec, ctx->models, &a, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    struct assay_workload_limits lim = workload_limits(&a);
    struct assay_workload *w = NULL;
    st = assay_workload_load(path, &lim, &w, diag);
    assay_workload_free(w);
    assay_adapter_close(&a);
    return st;
}

enum assay_status assay_run_plan_item(struct assay_verify_ctx *ctx,
                                      const struct assay_plan_item *item, const char *base_spec,
                                      const char *workload_override, struct assay_check_result *res)
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
    char engine_arg[400], workload_arg[1420] = "";
    snprintf(engine_arg, sizeof engine_arg, "--engine '%.380s'", res->engine);
    if (path[0] != '\0') {
        snprintf(workload_arg, sizeof workload_arg, " --workload %s", path);
    }
    assay_repro_line(res->repro, sizeof res->repro, ctx->program, "verify", engine_arg, item->name,
                     ctx->master_seed, workload_arg);

    /* On another engine than the bundled one the items' engine options do
     * not apply (assay_plan_engine_spec), so items that differ only in
     * them are one check: the first runs, the others say which it was. */
    const struct assay_plan_item *same = bundled_base(base_spec) ? NULL : ran_before(ctx, item);
    if (same != NULL) {
        res->repro[0] = '\0';
        /* One reason for every such check (the report groups the SKIPs
         * that share one); which check it repeats, and its options, are in
         * the summary. */
        assay_check_skip(res, "not run again: on an engine other than the bundled one, its "
                              "options configure nothing, and its check and workload are "
                              "another's, which ran");
        snprintf(res->summary, sizeof res->summary,
                 "the same check as %s on this engine (its options %.200s configure the bundled "
                 "engine only)",
                 same->name, item->options);
        return ASSAY_OK;
    }
    if (!bundled_base(base_spec) && ctx->n_ran < (int32_t)(sizeof ctx->ran / sizeof ctx->ran[0])) {
        ctx->ran[ctx->n_ran++] = item;
    }

    /* The models, and the oracle's memo slot for them, are made here so
     * that the check's process finds them (what it adds to the memo is its
     * own). */
    struct assay_diag diag;
    assay_diag_clear(&diag);
    char why[700];
    const struct assay_model *model = NULL;
    enum assay_status st = assay_model_cache_warm(ctx->models, res->engine, &model, &diag);
    if (st != ASSAY_OK) {
        assay_check_error(res, "engine: %s: %s", assay_status_str(st),
                          assay_diag_format(&diag, why, sizeof why));
        return assay_status_keep_nomem(st);
    }
    struct assay_oracle_memo *memo = NULL;
    const struct assay_model *oracle_model = ctx->weights != NULL ? ctx->weights : model;
    if (oracle_model != NULL && assay_verify_memo(ctx, oracle_model, &memo) == ASSAY_ERR_NOMEM) {
        return ASSAY_ERR_NOMEM;
    }
    struct item_run ir = {ctx, item, workload_override, path, {0}};
    for (int32_t i = 0; i < ctx->n_slots; i++) {
        ir.memo_n[i] = assay_oracle_memo_count(ctx->slots[i].memo);
    }
    static const struct assay_isolated_work work = {run_item, send_memos, receive_memos};
    st = assay_isolate_run(&ctx->iso, &work, &ir, res);
    return assay_status_keep_nomem(st);
}

enum assay_status assay_verify_check_engine(struct assay_verify_ctx *ctx, const char *base_spec,
                                            struct assay_diag *diag)
{
    return assay_model_cache_load_files(ctx->models, base_spec, diag);
}

void assay_verify_set_isolation(struct assay_verify_ctx *ctx, const struct assay_isolation *iso)
{
    ctx->iso = *iso;
}

void assay_verify_set_program(struct assay_verify_ctx *ctx, const char *program)
{
    snprintf(ctx->program, sizeof ctx->program, "%s", program);
}

void assay_verify_set_master_seed(struct assay_verify_ctx *ctx, uint64_t master_seed)
{
    ctx->master_seed = master_seed;
}

uint64_t assay_verify_seed(const struct assay_verify_ctx *ctx, const char *name)
{
    return assay_seed_derive(ctx->master_seed, name);
}

const char *assay_verify_program(const struct assay_verify_ctx *ctx)
{
    return ctx->program;
}

void assay_verify_set_repro_dir(struct assay_verify_ctx *ctx, const char *dir)
{
    snprintf(ctx->repro_dir, sizeof ctx->repro_dir, "%s", dir);
}

const char *assay_verify_repro_dir(const struct assay_verify_ctx *ctx)
{
    return ctx->repro_dir[0] != '\0' ? ctx->repro_dir : "assay-repro";
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

const struct assay_model *assay_verify_engine_model(const struct assay_adapter *a)
{
    struct assay_engine *e = assay_bundled_engine(a);
    return e != NULL ? assay_engine_params(e)->model : NULL;
}
