/*
 * context.h - running a check: the shared state of a run (oracle memos by
 * weights, seeds, the fixtures folder, what reproducer lines start with),
 * the target a check is judged on, and the one executor that opens an
 * engine spec, loads the workload, builds the target, compares the check's
 * needs with it (SKIP with the reason when it falls short) and calls the
 * check's runner.
 *
 * `assay verify` and `assay compare` run their checks through
 * assay_run_plan_item; `assay audit` builds its target from the server it
 * opened (checks/audit.h). The checks are listed in checks/plan.h.
 */
#ifndef ASSAY_CONTEXT_H
#define ASSAY_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"
#include "check.h"
#include "result.h"

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
 * Whether the weights base_spec names can be loaded, before anything runs:
 * a bundled spec's model= or draft= file (a built-in model name needs no
 * loading here) is loaded into ctx's cache, where the checks find it.
 * ASSAY_OK, also for a spec of another kind; else why, diag saying which
 * file and what was expected.
 */
enum assay_status assay_verify_check_engine(struct assay_verify_ctx *ctx, const char *base_spec,
                                            struct assay_diag *diag);

/*
 * Whether the workload file at path is one plan item `item` can run on
 * base_spec + item->options, before anything runs: the engine is opened
 * (its model kept in ctx's cache for the check) and the file read within
 * that engine's vocabulary, context and request limits, exactly as the
 * check reads it. ASSAY_OK; else the engine's or the workload's status
 * with diag saying which file, where and what was expected (the engine
 * spec's error when the engine cannot be opened). Nothing is run.
 */
enum assay_status assay_verify_check_workload(struct assay_verify_ctx *ctx,
                                              const struct assay_plan_item *item,
                                              const char *base_spec, const char *path,
                                              struct assay_diag *diag);

/*
 * After a set of results: corrections that span a family (Holm's procedure
 * over the distributional p-values, which may turn a PASS into a FAIL).
 */
void assay_verify_finalize(struct assay_check_result *results, size_t n);

/* How each check of ctx runs (checks/isolate.h): by default in a child
 * process with a time limit, so a crash or a hang is that check's FAIL. */
struct assay_isolation;
void assay_verify_set_isolation(struct assay_verify_ctx *ctx, const struct assay_isolation *iso);

/* The command that reproducer lines start with ("assay" by default; the
 * CLI sets its own path, tests the path of the built binary). Copied. */
void assay_verify_set_program(struct assay_verify_ctx *ctx, const char *program);

/* Run the checks that follow under another master seed (the kill matrix
 * repeats equiv.fuzz under many); the memos are kept. */
void assay_verify_set_master_seed(struct assay_verify_ctx *ctx, uint64_t master_seed);

/* The seed of the check called name under the run's master seed. */
uint64_t assay_verify_seed(const struct assay_verify_ctx *ctx, const char *name);

/* The fixtures folder of the run. */
const char *assay_verify_fixtures(const struct assay_verify_ctx *ctx);

/* The command reproducer lines start with (assay_verify_set_program). */
const char *assay_verify_program(const struct assay_verify_ctx *ctx);

/* Where a check that generates its own cases writes a failing one (the
 * CLI's --repro-dir; by default "assay-repro"). Copied. */
void assay_verify_set_repro_dir(struct assay_verify_ctx *ctx, const char *dir);
const char *assay_verify_repro_dir(const struct assay_verify_ctx *ctx);

/* The oracle memo for the weights of model (created on first use; the
 * oracle gets its own copy of the weights). Borrowed until ctx is freed. */
struct assay_model;
struct assay_oracle_memo;
enum assay_status assay_verify_memo(struct assay_verify_ctx *ctx, const struct assay_model *model,
                                    struct assay_oracle_memo **out);

/*
 * What the command adds to every target built in ctx: its own state for its
 * runners (owner), the weights when the command knows them (compare
 * --model; NULL: the bundled engine's own), the baseline's engine spec
 * (NULL: none). Copied, except owner and weights, which must outlive ctx's
 * use.
 */
void assay_verify_ctx_set_target(struct assay_verify_ctx *ctx, void *owner,
                                 const struct assay_model *weights, const char *baseline);

/* The target of adapter a (engine spec `spec`, borrowed) in ctx: its
 * weights, draft and sampling order when it is the bundled engine, what it
 * can do, and what the command added. */
struct assay_target assay_target_of(const struct assay_verify_ctx *ctx,
                                    const struct assay_adapter *a, const char *spec);

/*
 * The one reproducer line: "PROGRAM COMMAND TARGET_ARGS --check CHECK
 * --seed SEED" then tail (the check's own options, each with its leading
 * space; may be NULL), into buf; "" when it does not fit (a line cut
 * short would rerun something else). Returns buf.
 */
char *assay_repro_line(char *buf, size_t size, const char *program, const char *command,
                       const char *target_args, const char *check, uint64_t seed, const char *tail);

/* The model the bundled engine behind a runs (NULL for other adapters). */
const struct assay_model *assay_verify_engine_model(const struct assay_adapter *a);

/* The engine spec a plan item runs on, into buf: the item's options over a
 * bundled base spec; any other base spec (openai:, plugin:) unchanged. */
char *assay_plan_engine_spec(const struct assay_plan_item *item, const char *base_spec, char *buf,
                             size_t size);

#endif
