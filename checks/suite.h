/*
 * suite.h - the verification plan: which checks run, on which engine
 * options, over which workloads.
 *
 * One table serves the `assay verify` command, the `verify` test label and
 * the `mutants` label, so all of them run exactly the same checks. Each
 * entry adds its engine options to a base spec ("bundled", or
 * "bundled:mutant=NAME" for a must-fail control) and names a fixture
 * workload.
 */
#ifndef ASSAY_SUITE_H
#define ASSAY_SUITE_H

#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"
#include "result.h"

struct assay_verify_ctx;
struct assay_plan_item;
struct assay_adapter;
struct assay_workload;

/*
 * A family's runner: judge the engine behind `a` on workload `w` (may be
 * NULL when the item names none) and fill res (verdict, figures, failure).
 * Returns ASSAY_OK when a verdict was reached; an error status when the
 * check could not run (res->verdict is then ERROR with the reason).
 */
typedef enum assay_status (*assay_check_fn)(struct assay_verify_ctx *ctx,
                                            const struct assay_plan_item *item,
                                            const struct assay_adapter *a,
                                            const struct assay_workload *w,
                                            struct assay_check_result *res);

struct assay_plan_item {
    const char *name;      /* "equiv.kv-cache" */
    enum assay_family family;
    const char *options;   /* engine options set over the base spec; those after a
                              ';' are defaults the base spec may override
                              ("kv=paged,block=4;blocks=24": a reproducer's
                              --engine '...,blocks=6' shrinks the pool) */
    const char *workload;  /* fixture path under fixtures/, or NULL */
    const char *about;     /* what it stresses */
    assay_check_fn run;
    const char *params;    /* check parameters ("t=0.7,top_k=40"), or NULL */
};

/* The plan, in the order it runs. */
const struct assay_plan_item *assay_verify_plan(size_t *n);

/* The plan item called name, or NULL. */
const struct assay_plan_item *assay_plan_find(const char *name);

/* Shared state of a verification run (oracle memos, seeds); one per thread.
 * Lifetime: assay_verify_ctx_init / assay_verify_ctx_free. */
struct assay_verify_ctx;

/* fixtures: the fixtures/ folder; master_seed: seeds of seeded checks.
 * Both are copied. */
enum assay_status assay_verify_ctx_init(struct assay_verify_ctx **out, const char *fixtures,
                                        uint64_t master_seed);
void assay_verify_ctx_free(struct assay_verify_ctx *ctx);

/*
 * Run one plan item on the engine base_spec + item->options, over
 * workload_override (a file path) or else the item's fixture. res always
 * gets a verdict: ERROR with the reason when the engine spec or the
 * workload is bad. Returns ASSAY_OK unless memory ran out.
 */
enum assay_status assay_run_plan_item(struct assay_verify_ctx *ctx,
                                      const struct assay_plan_item *item, const char *base_spec,
                                      const char *workload_override,
                                      struct assay_check_result *res);

/*
 * After a set of results: corrections that span a family (Holm's procedure
 * over the distributional p-values, which may turn a PASS into a FAIL).
 */
void assay_verify_finalize(struct assay_check_result *results, size_t n);

/* The command that reproducer lines start with ("assay" by default; the
 * CLI sets its own path, tests the path of the built binary). Copied. */
void assay_verify_set_program(struct assay_verify_ctx *ctx, const char *program);

/* The seed of the check called name under the run's master seed. */
uint64_t assay_verify_seed(const struct assay_verify_ctx *ctx, const char *name);

/* The fixtures folder of the run. */
const char *assay_verify_fixtures(const struct assay_verify_ctx *ctx);

/* The oracle memo for the weights of model (created on first use; the
 * oracle gets its own copy of the weights). Borrowed until ctx is freed. */
struct assay_model;
struct assay_oracle_memo;
enum assay_status assay_verify_memo(struct assay_verify_ctx *ctx, const struct assay_model *model,
                                    struct assay_oracle_memo **out);

/* The model the bundled engine behind a runs (NULL for other adapters). */
const struct assay_model *assay_verify_engine_model(const struct assay_adapter *a);

/* The engine spec a plan item runs on, into buf: the item's options over a
 * bundled base spec; any other base spec (openai:, plugin:) unchanged. */
char *assay_plan_engine_spec(const struct assay_plan_item *item, const char *base_spec, char *buf,
                             size_t size);

#endif
