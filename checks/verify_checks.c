/*
 * verify_checks.c - the runners of the checks of `assay verify` (and the
 * property runners `assay compare` shares), registered in checks/plan.c:
 * each adapts a target (checks/check.h) and its plan item's parameters to a
 * family's check function (equivalence.h, fuzz.h, seeded.h,
 * distributional.h, property.h). They sit above the families, beside
 * audit_checks.c, because they reach the run's context (context.h: the
 * oracle memo, the item's seed, where reproducers go), which itself calls
 * into the families.
 */
#include "verify_checks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../adapters/adapter.h"
#include "../adapters/bundled.h"
#include "../adapters/spec.h"
#include "../engine/engine.h"
#include "boundary.h"
#include "context.h"
#include "distributional.h"
#include "equivalence.h"
#include "fuzz.h"
#include "property.h"
#include "seeded.h"

enum assay_status assay_verify_run_equivalence(struct assay_verify_ctx *ctx,
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
enum assay_status assay_verify_run_fuzz(struct assay_verify_ctx *ctx,
                                        const struct assay_plan_item *item,
                                        const struct assay_target *t,
                                        const struct assay_workload *w,
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

/* The boundary workload (checks/boundary.h), generated for the target's
 * shape, run through the watch that counts the boundaries reached:
 * judge=oracle, greedy tokens against the oracle (equivalence); judge=soak,
 * blocks after every step, the trace, and the tokens at concurrency 1
 * (property). The summary names the boundaries reached and those not. */
enum assay_status assay_verify_run_boundaries(struct assay_verify_ctx *ctx,
                                              const struct assay_plan_item *item,
                                              const struct assay_target *t,
                                              const struct assay_workload *w,
                                              struct assay_check_result *res)
{
    (void)w;
    struct assay_oracle_memo *memo = NULL;
    enum assay_status st = assay_verify_memo(ctx, t->model, &memo);
    if (st != ASSAY_OK) {
        return st;
    }
    /* The bundled engine's own parameters, defaults resolved; else what
     * the spec states. */
    struct assay_boundary_shape shape = assay_boundary_shape_of(t->spec);
    const struct assay_engine *engine = assay_bundled_engine(t->adapter);
    const struct assay_model *draft = NULL;
    if (engine != NULL) {
        const struct assay_engine_params *ep = assay_engine_params(engine);
        shape.block = ep->paged ? ep->block_size : 1;
        shape.blocks = ep->paged ? ep->n_blocks : 0;
        shape.chunk = ep->chunk;
        shape.spec = ep->spec_k;
        shape.batch = ep->max_batch;
        draft = ep->spec_k > 0 ? ep->draft : NULL;
    }
    /* The draft's own oracle, for the stops it proposes and the target
     * rejects: this check's alone (a few short sequences). */
    struct assay_oracle_memo *draft_memo = NULL;
    if (draft != NULL) {
        st = assay_oracle_memo_init(&draft_memo, draft, draft->cfg.n_ctx);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    struct assay_workload *bw = NULL;
    struct assay_boundary_expect expect;
    st = assay_boundary_workload(&shape, t->model->cfg.vocab, t->model->cfg.n_ctx, memo,
                                 draft_memo, assay_verify_seed(ctx, item->name), &bw, &expect);
    assay_oracle_memo_free(draft_memo);
    if (st != ASSAY_OK) {
        assay_check_error(res, "no boundary workload for this engine (%s): it needs a context of "
                          "at least 64 and a pool that holds one request",
                          assay_status_str(st));
        return assay_status_keep_nomem(st);
    }
    struct assay_boundary_watch *watch = NULL;
    struct assay_adapter wa;
    st = assay_boundary_watch_open(t->adapter, &watch, &wa);
    if (st == ASSAY_OK) {
        assay_boundary_watch_expect(watch, &expect);
        char judge[16];
        assay_plan_param(item->params, "judge", judge, sizeof judge);
        st = strcmp(judge, "oracle") == 0 ? assay_check_equivalence(&wa, bw, memo, NULL, res)
                                          : assay_check_soak(&wa, bw, NULL, res);
        char report[sizeof res->summary];
        assay_boundary_report(watch, report, sizeof report);
        snprintf(res->summary, sizeof res->summary, "%d requests; %.300s", (int)bw->n, report);
    }
    assay_boundary_watch_close(watch);
    assay_workload_free(bw);
    return assay_status_keep_nomem(st);
}

/* The seeded family's own checks: seeds drawn from the item's seed. */
enum assay_status assay_verify_run_seed_positions(struct assay_verify_ctx *ctx,
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

enum assay_status assay_verify_run_seed_unseeded(struct assay_verify_ctx *ctx,
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

enum assay_status assay_verify_run_seed_pairs(struct assay_verify_ctx *ctx,
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

enum assay_status assay_verify_run_seeded_sameness(struct assay_verify_ctx *ctx,
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

enum assay_status assay_verify_run_gof(struct assay_verify_ctx *ctx,
                                       const struct assay_plan_item *item,
                                       const struct assay_target *t, const struct assay_workload *w,
                                       struct assay_check_result *res)
{
    (void)w;
    return run_against_oracle(ctx, item, t, res, false);
}

enum assay_status assay_verify_run_pit(struct assay_verify_ctx *ctx,
                                       const struct assay_plan_item *item,
                                       const struct assay_target *t, const struct assay_workload *w,
                                       struct assay_check_result *res)
{
    (void)w;
    return run_against_oracle(ctx, item, t, res, true);
}

enum assay_status assay_verify_run_acceptance(struct assay_verify_ctx *ctx,
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
enum assay_status assay_verify_run_homogeneity(struct assay_verify_ctx *ctx,
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
    enum assay_status fn(struct assay_verify_ctx *ctx, const struct assay_plan_item *item,         \
                      const struct assay_target *t, const struct assay_workload *w,                \
                      struct assay_check_result *res)                                              \
    {                                                                                              \
        (void)ctx;                                                                                 \
        return run_property(item, t, w, res, check);                                               \
    }

PROPERTY_RUNNER(assay_verify_run_blocks, assay_check_blocks)
PROPERTY_RUNNER(assay_verify_run_trace, assay_check_trace)
PROPERTY_RUNNER(assay_verify_run_isolation, assay_check_isolation)
PROPERTY_RUNNER(assay_verify_run_blackbox, assay_check_isolation_blackbox)
PROPERTY_RUNNER(assay_verify_run_soak, assay_check_soak)
