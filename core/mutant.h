/*
 * mutant.h - the catalog of planted bugs ("mutants").
 *
 * A suite that cannot fail proves nothing: every check has a must-fail
 * control, a bug modelled on one that shipped in a real engine, planted in
 * the code and selected at run time. The code of the bugs exists only in the
 * library built with ASSAY_MUTANTS (the `assay_mutants` target); the release
 * library and the `assay` command contain none of it, and an engine asked
 * for a mutant there refuses with ASSAY_ERR_UNSUPPORTED. The catalog itself
 * is core/mutants.def.
 */
#ifndef ASSAY_MUTANT_H
#define ASSAY_MUTANT_H

#include <stdbool.h>

#include "status.h"

/* ASSAY_MUTANT_NONE, then one value per entry of mutants.def, in its order. */
enum assay_mutant {
    ASSAY_MUTANT_NONE = 0,
#define ASSAY_MUTANT_DEF(id, name, group, caught_by, mechanism, modelled_on) ASSAY_MUTANT_##id,
#include "mutants.def"
#undef ASSAY_MUTANT_DEF
    ASSAY_MUTANT_COUNT
};

struct assay_mutant_info {
    enum assay_mutant id;
    const char *name;        /* used on the command line: --mutant NAME */
    const char *mechanism;   /* what the planted code does wrong */
    const char *modelled_on; /* the real bug it imitates */
    const char *caught_by;   /* the check expected to catch it */
};

/* The catalog entry of a mutant, or NULL for an id out of range. */
const struct assay_mutant_info *assay_mutant_info(enum assay_mutant id);

/* Look a mutant up by name. ASSAY_ERR_NOT_FOUND for an unknown name. */
enum assay_status assay_mutant_by_name(const char *name, enum assay_mutant *out);

/* True in the library built with ASSAY_MUTANTS. */
bool assay_mutants_compiled(void);

/* Whether planted bug m is active given the selected mutant; always false
 * in builds without ASSAY_MUTANTS, where the compiler removes the bug. */
#ifdef ASSAY_MUTANTS
#define ASSAY_MUTANT_ON(selected, m) ((selected) == (m))
#else
#define ASSAY_MUTANT_ON(selected, m) ((void)(selected), 0)
#endif

#endif
