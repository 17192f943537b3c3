/*
 * audit_checks.h - the runners of the checks of `assay audit` on a server
 * (assay_check_fn, checks/check.h), registered in checks/plan.c. Each reads
 * the audit from t->owner (struct assay_audit, opened by assay_audit_open);
 * the checks themselves are described in audit.h.
 */
#ifndef ASSAY_AUDIT_CHECKS_H
#define ASSAY_AUDIT_CHECKS_H

#include "check.h"

enum assay_status assay_audit_run_equiv_alone(struct assay_verify_ctx *ctx,
                                              const struct assay_plan_item *item,
                                              const struct assay_target *t,
                                              const struct assay_workload *w,
                                              struct assay_check_result *res);
enum assay_status assay_audit_run_equiv_concurrent(struct assay_verify_ctx *ctx,
                                                   const struct assay_plan_item *item,
                                                   const struct assay_target *t,
                                                   const struct assay_workload *w,
                                                   struct assay_check_result *res);
enum assay_status assay_audit_run_logprobs(struct assay_verify_ctx *ctx,
                                           const struct assay_plan_item *item,
                                           const struct assay_target *t,
                                           const struct assay_workload *w,
                                           struct assay_check_result *res);
enum assay_status assay_audit_run_gof_t1(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res);
enum assay_status assay_audit_run_gof_filtered(struct assay_verify_ctx *ctx,
                                               const struct assay_plan_item *item,
                                               const struct assay_target *t,
                                               const struct assay_workload *w,
                                               struct assay_check_result *res);
enum assay_status assay_audit_run_pit_t1(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res);
enum assay_status assay_audit_run_pit_filtered(struct assay_verify_ctx *ctx,
                                               const struct assay_plan_item *item,
                                               const struct assay_target *t,
                                               const struct assay_workload *w,
                                               struct assay_check_result *res);
enum assay_status assay_audit_run_homogeneity(struct assay_verify_ctx *ctx,
                                              const struct assay_plan_item *item,
                                              const struct assay_target *t,
                                              const struct assay_workload *w,
                                              struct assay_check_result *res);
enum assay_status assay_audit_run_batch_invariance(struct assay_verify_ctx *ctx,
                                                   const struct assay_plan_item *item,
                                                   const struct assay_target *t,
                                                   const struct assay_workload *w,
                                                   struct assay_check_result *res);
enum assay_status assay_audit_run_finish(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res);
enum assay_status assay_audit_run_usage(struct assay_verify_ctx *ctx,
                                        const struct assay_plan_item *item,
                                        const struct assay_target *t,
                                        const struct assay_workload *w,
                                        struct assay_check_result *res);
enum assay_status assay_audit_run_stream(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res);
enum assay_status assay_audit_run_idle_requests(struct assay_verify_ctx *ctx,
                                                const struct assay_plan_item *item,
                                                const struct assay_target *t,
                                                const struct assay_workload *w,
                                                struct assay_check_result *res);
enum assay_status assay_audit_run_idle_kv(struct assay_verify_ctx *ctx,
                                          const struct assay_plan_item *item,
                                          const struct assay_target *t,
                                          const struct assay_workload *w,
                                          struct assay_check_result *res);

enum assay_status assay_audit_run_seed_positions(struct assay_verify_ctx *ctx,
                                                 const struct assay_plan_item *item,
                                                 const struct assay_target *t,
                                                 const struct assay_workload *w,
                                                 struct assay_check_result *res);
enum assay_status assay_audit_run_seed_unseeded(struct assay_verify_ctx *ctx,
                                                const struct assay_plan_item *item,
                                                const struct assay_target *t,
                                                const struct assay_workload *w,
                                                struct assay_check_result *res);
enum assay_status assay_audit_run_seed_pairs(struct assay_verify_ctx *ctx,
                                             const struct assay_plan_item *item,
                                             const struct assay_target *t,
                                             const struct assay_workload *w,
                                             struct assay_check_result *res);

#endif
