/*
 * check.h - what a check is, whatever command runs it: its name, its
 * family, what it needs of its target, and its runner; and the target, the
 * one value that `assay verify` (the bundled engine, or any engine spec),
 * `assay audit` (a server) and `assay compare` (a candidate and its
 * baseline) each build and hand to the checks.
 *
 * The checks themselves are listed once, in checks/plan.c; a family's file
 * exports functions from (adapter, weights, parameters) to a result, and
 * the runners in the plan adapt a target to them. Before a runner is
 * called, the target's capabilities are compared with the check's needs:
 * a check whose needs the target lacks is SKIP with the reason, never PASS
 * (assay_target_meets).
 */
#ifndef ASSAY_CHECK_H
#define ASSAY_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "../adapters/adapter.h"
#include "../core/request.h"
#include "../core/status.h"
#include "../core/workload.h"
#include "../engine/model.h"
#include "result.h"

/* What a check may need of its target. */
enum assay_need {
    ASSAY_NEED_WEIGHTS = 1 << 0,  /* the weights the target runs: the oracle's input */
    ASSAY_NEED_LOGITS = 1 << 1,   /* the engine's logits (set_logits_sink) */
    ASSAY_NEED_BLOCKS = 1 << 2,   /* block snapshots (block_audit) */
    ASSAY_NEED_METRICS = 1 << 3,  /* the server's /metrics gauges */
    ASSAY_NEED_SEEDS = 1 << 4,    /* per-request seeds (reproducible sampling) */
    ASSAY_NEED_BASELINE = 1 << 5, /* a second engine that claims the same output */
    ASSAY_NEED_BUNDLED = 1 << 6,  /* the bundled engine itself: other configurations of
                                     it (a draft model, a second configuration) */
    ASSAY_NEED_SERVER = 1 << 7,   /* an OpenAI-compatible server: streamed and not,
                                     top logprobs, usage counts */
};
#define ASSAY_NEED_COUNT 8

/* The commands that run checks; a check belongs to one. */
enum assay_command {
    ASSAY_COMMAND_VERIFY = 0,
    ASSAY_COMMAND_AUDIT = 1,
    ASSAY_COMMAND_COMPARE = 2,
};

/* The thing under test, as the command that runs the checks built it. */
struct assay_target {
    const struct assay_adapter *adapter; /* the engine under test */
    const char *spec;                    /* its engine spec */
    const struct assay_model *model;     /* the weights it runs, or NULL when unknown */
    const struct assay_model *draft;     /* the bundled engine's draft model, or NULL */
    enum assay_sampling_order order;     /* how it combines temperature, top-k and top-p */
    const char *baseline;                /* the baseline's engine spec (compare), or NULL */
    unsigned can;                        /* the ASSAY_NEED_* it meets */
    void *owner;                         /* the command's own state (the audit, the
                                            comparison) for that command's runners */
};

struct assay_verify_ctx; /* checks/context.h */
struct assay_plan_item;

/*
 * A runner: judge target t on workload w (NULL when the check names none)
 * and fill res (verdict, figures, failure) through assay_check_fail/skip/
 * error. Returns ASSAY_OK when a verdict was reached (a SKIP included);
 * ASSAY_ERR_NOMEM, or another status when the check could not run (res is
 * then ERROR with the reason).
 */
typedef enum assay_status (*assay_check_fn)(struct assay_verify_ctx *ctx,
                                            const struct assay_plan_item *item,
                                            const struct assay_target *t,
                                            const struct assay_workload *w,
                                            struct assay_check_result *res);

/* One check. */
struct assay_plan_item {
    const char *name; /* "equiv.kv-cache", "audit.prop.usage", "compare.greedy" */
    enum assay_family family;
    const char *options;  /* verify: engine options set over the base spec; those after a
                             ';' are defaults the base spec may override
                             ("kv=paged,block=4;blocks=24": a reproducer's
                             --engine '...,blocks=6' shrinks the pool) */
    const char *workload; /* fixture path under fixtures/, or NULL */
    const char *about;    /* what it stresses */
    assay_check_fn run;
    const char *params; /* check parameters ("t=0.7,top_k=40"), or NULL */
    enum assay_command command;
    unsigned needs;   /* ASSAY_NEED_* */
    bool after_bench; /* audit: reads the server's state after everything else */
    /* verify: the part of its family's verify test that runs it, for a
     * family split in parts (distributional: "tokens" or "sequences", the
     * tests verify_distributional_tokens and _sequences); NULL: the
     * family's one test */
    const char *group;
    /* verify: the planted bugs (core/mutants.def names, space-separated)
     * this check must FAIL on, each of the check's own family; the
     * mutants label holds every row to its list (suites/test_mutants.c),
     * and test_plan every bug of a family to at least one row. A lower
     * bound (the kill matrix gives every catch). NULL: none. */
    const char *catches;
    /* equivalence: under MPI every rank runs it, rank 0 the engine alone,
     * and the ranks share the oracle's passes over rank 0's transcript
     * (assay_check_equivalence; checks/shard.h) */
    bool shared;
};

/* Whether item's work is shared among the ranks of an MPI run: the
 * distributional family's, and the equivalence checks marked shared. */
bool assay_plan_item_shared(const struct assay_plan_item *item);

/*
 * Whether t meets item's needs. If not, res becomes SKIP naming what is
 * missing and what would provide it, and false is returned.
 */
bool assay_target_meets(const struct assay_target *t, const struct assay_plan_item *item,
                        struct assay_check_result *res);

/* The value of key in a check's parameters ("k=v,k=v"; may be NULL), into
 * buf: "" when the key is absent. Returns buf. */
char *assay_plan_param(const char *params, const char *key, char *buf, size_t size);

/* The needs as words ("weights, logits"; "nothing" for none), into buf. */
char *assay_needs_str(unsigned needs, char *buf, size_t size);

#endif
