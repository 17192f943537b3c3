/*
 * shrink.h - minimal reproducers: when a check fails, shrink the failing case
 * while the same check still fails, write the shrunk workload next to the
 * report, and give the one command that reruns exactly that case.
 *
 * What is shrunk, in rounds until a round changes nothing or the budget is
 * spent: requests are dropped (delta debugging: halves, quarters, ... down
 * to single requests), arrivals are collapsed to step 0, aborts are dropped,
 * the pool (the engine spec's blocks) is bisected down to the smallest that
 * still fails (never below what the largest request needs, which the engine
 * would reject), each prompt is cut to its shortest failing prefix, and
 * each max_tokens to its smallest failing value. "Still fails" means: the
 * same plan item, run through assay_run_plan_item on the candidate engine
 * spec and a candidate workload file, gives FAIL.
 *
 * The budget bounds the work: at most max_runs runs of the check and about
 * max_seconds of wall time (a run in progress is finished), whichever comes
 * first; the result says whether it was reached. With the run bound alone
 * the outcome is deterministic; the time bound protects slow checks.
 *
 * The reproducer is written as <out_dir>/<stem>.json (an explicit trace,
 * core/workload.h), rerun from that file to confirm that it fails, and the
 * command is the one assay_run_plan_item states for that rerun:
 *     assay verify --engine 'SPEC' --check NAME --seed N --workload FILE
 * A check without a workload (it generates its own from its parameters)
 * cannot be shrunk; the result then carries the original command.
 *
 * A pool can be shrunk only when the plan item leaves blocks to the base
 * spec (its options state blocks after a ';', or not at all); an item that
 * fixes blocks keeps its pool (result: blocks unchanged).
 */
#ifndef ASSAY_SHRINK_H
#define ASSAY_SHRINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"
#include "result.h"
#include "context.h"

#define ASSAY_SHRINK_MAX_RUNS 150
#define ASSAY_SHRINK_MAX_SECONDS 45.0

struct assay_shrink_opts {
    const char *out_dir; /* an existing folder for the reproducer (required) */
    const char *stem;    /* file name without ".json"; NULL: "repro-<check name>" */
    int32_t max_runs;    /* 0: ASSAY_SHRINK_MAX_RUNS */
    double max_seconds;  /* 0: ASSAY_SHRINK_MAX_SECONDS */
};

/* The size of a case. */
struct assay_shrink_size {
    int32_t n_requests;
    int64_t prompt_tokens; /* summed over the requests */
    int64_t max_tokens;    /* summed over the requests */
    int32_t blocks;        /* the pool; 0 when the KV cache is not paged */
};

struct assay_shrink_result {
    bool reproduced;       /* the check failed on the original case */
    bool shrinkable;       /* the case has a workload to shrink */
    bool confirmed;        /* the written reproducer failed when rerun from its file */
    bool budget_reached;   /* shrinking stopped at the budget, not at a fixed point */
    bool pool_fixed;       /* the plan item fixes blocks: the pool was not shrunk */
    struct assay_shrink_size before, after;
    int32_t n_runs;        /* runs of the check, the confirmation included */
    double seconds;
    char engine[512];      /* the shrunk engine spec (what --engine gets) */
    char workload[1024];   /* the reproducer file ("" when not shrinkable) */
    char command[1400];    /* the one line that reruns the case */
    char failure[640];     /* what the final case fails with */
};

/*
 * Shrink the failure of item on base_spec over workload_override (a file; or
 * NULL: the item's fixture), as described above. Returns ASSAY_OK when out
 * is filled (check out->reproduced and out->confirmed), ASSAY_ERR_INVALID
 * for missing options, ASSAY_ERR_IO when the reproducer cannot be written,
 * ASSAY_ERR_NOMEM. The engine spec or the workload failing to load is
 * reported as not reproduced, with the reason in out->failure.
 */
enum assay_status assay_shrink(struct assay_verify_ctx *ctx, const struct assay_plan_item *item,
                               const char *base_spec, const char *workload_override,
                               const struct assay_shrink_opts *opts,
                               struct assay_shrink_result *out);

/* "requests 16 -> 1, prompt tokens 493 -> 3, max_tokens 256 -> 2, blocks
 * 24 -> 3" into buf. Returns buf. */
char *assay_shrink_format_sizes(const struct assay_shrink_result *r, char *buf, size_t size);

#endif
