/*
 * verify_checks.h - the runners of the checks of `assay verify`
 * (assay_check_fn, checks/check.h), registered in checks/plan.c; the
 * property runners also serve `assay compare`. Each reads its parameters
 * from item->params and its engine from t; what each check tests is in its
 * family's header (equivalence.h, fuzz.h, seeded.h, distributional.h,
 * property.h).
 */
#ifndef ASSAY_VERIFY_CHECKS_H
#define ASSAY_VERIFY_CHECKS_H

#include "check.h"

enum assay_status assay_verify_run_equivalence(struct assay_verify_ctx *ctx,
                                               const struct assay_plan_item *item,
                                               const struct assay_target *t,
                                               const struct assay_workload *w,
                                               struct assay_check_result *res);
enum assay_status assay_verify_run_fuzz(struct assay_verify_ctx *ctx,
                                        const struct assay_plan_item *item,
                                        const struct assay_target *t,
                                        const struct assay_workload *w,
                                        struct assay_check_result *res);
enum assay_status assay_verify_run_seed_positions(struct assay_verify_ctx *ctx,
                                                  const struct assay_plan_item *item,
                                                  const struct assay_target *t,
                                                  const struct assay_workload *w,
                                                  struct assay_check_result *res);
enum assay_status assay_verify_run_seed_unseeded(struct assay_verify_ctx *ctx,
                                                 const struct assay_plan_item *item,
                                                 const struct assay_target *t,
                                                 const struct assay_workload *w,
                                                 struct assay_check_result *res);
enum assay_status assay_verify_run_seed_pairs(struct assay_verify_ctx *ctx,
                                              const struct assay_plan_item *item,
                                              const struct assay_target *t,
                                              const struct assay_workload *w,
                                              struct assay_check_result *res);
enum assay_status assay_verify_run_seeded_sameness(struct assay_verify_ctx *ctx,
                                                   const struct assay_plan_item *item,
                                                   const struct assay_target *t,
                                                   const struct assay_workload *w,
                                                   struct assay_check_result *res);
enum assay_status assay_verify_run_gof(struct assay_verify_ctx *ctx,
                                       const struct assay_plan_item *item,
                                       const struct assay_target *t,
                                       const struct assay_workload *w,
                                       struct assay_check_result *res);
enum assay_status assay_verify_run_pit(struct assay_verify_ctx *ctx,
                                       const struct assay_plan_item *item,
                                       const struct assay_target *t,
                                       const struct assay_workload *w,
                                       struct assay_check_result *res);
enum assay_status assay_verify_run_acceptance(struct assay_verify_ctx *ctx,
                                              const struct assay_plan_item *item,
                                              const struct assay_target *t,
                                              const struct assay_workload *w,
                                              struct assay_check_result *res);
enum assay_status assay_verify_run_homogeneity(struct assay_verify_ctx *ctx,
                                               const struct assay_plan_item *item,
                                               const struct assay_target *t,
                                               const struct assay_workload *w,
                                               struct assay_check_result *res);
enum assay_status assay_verify_run_blocks(struct assay_verify_ctx *ctx,
                                          const struct assay_plan_item *item,
                                          const struct assay_target *t,
                                          const struct assay_workload *w,
                                          struct assay_check_result *res);
enum assay_status assay_verify_run_trace(struct assay_verify_ctx *ctx,
                                         const struct assay_plan_item *item,
                                         const struct assay_target *t,
                                         const struct assay_workload *w,
                                         struct assay_check_result *res);
enum assay_status assay_verify_run_isolation(struct assay_verify_ctx *ctx,
                                             const struct assay_plan_item *item,
                                             const struct assay_target *t,
                                             const struct assay_workload *w,
                                             struct assay_check_result *res);
enum assay_status assay_verify_run_blackbox(struct assay_verify_ctx *ctx,
                                            const struct assay_plan_item *item,
                                            const struct assay_target *t,
                                            const struct assay_workload *w,
                                            struct assay_check_result *res);
enum assay_status assay_verify_run_soak(struct assay_verify_ctx *ctx,
                                        const struct assay_plan_item *item,
                                        const struct assay_target *t,
                                        const struct assay_workload *w,
                                        struct assay_check_result *res);
enum assay_status assay_verify_run_boundaries(struct assay_verify_ctx *ctx,
                                              const struct assay_plan_item *item,
                                              const struct assay_target *t,
                                              const struct assay_workload *w,
                                              struct assay_check_result *res);

#endif
