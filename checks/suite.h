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

#include "../core/status.h"
#include "result.h"

struct assay_plan_item {
    const char *name;      /* "equiv.kv-cache" */
    enum assay_family family;
    const char *options;   /* engine options added to the base spec */
    const char *workload;  /* fixture path under fixtures/ */
    const char *about;     /* what it stresses */
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

/* The engine spec a plan item runs on, into buf. */
char *assay_plan_engine_spec(const struct assay_plan_item *item, const char *base_spec, char *buf,
                             size_t size);

#endif
