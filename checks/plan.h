/*
 * plan.h - the one registry of checks: every check of `assay verify`,
 * `assay audit` and `assay compare`, in the order each command runs them,
 * with its family, what it needs of its target (checks/check.h) and its
 * runner.
 *
 * One table serves the three commands, the `verify` test label and the
 * `mutants` label, so all of them run exactly the same checks. A verify
 * entry adds its engine options to a base spec ("bundled", or
 * "bundled:mutant=NAME" for a must-fail control) and names a fixture
 * workload; an audit entry runs on the server the audit opened; a compare
 * entry runs on the candidate, with the baseline beside it.
 *
 * How a check is added (README, "How a check is added"): write it as a
 * function of the family's file, from an adapter, weights and parameters to
 * a result; register it here with its needs and a runner; plant a bug it
 * must catch (core/mutant.h) and add it to the mutants catalog.
 */
#ifndef ASSAY_PLAN_H
#define ASSAY_PLAN_H

#include <stddef.h>

#include "check.h"

/* The checks of command c, in the order they run. */
const struct assay_plan_item *assay_plan_for(enum assay_command c, size_t *n);

/* The check of command c called name, or NULL. */
const struct assay_plan_item *assay_plan_find_in(enum assay_command c, const char *name);

/* The verify plan (assay_plan_for(ASSAY_COMMAND_VERIFY, n)). */
const struct assay_plan_item *assay_verify_plan(size_t *n);

/* The verify check called name, or NULL. */
const struct assay_plan_item *assay_plan_find(const char *name);

#endif
