/*
 * mutant.c - the catalog of planted bugs (mutant.h): one table, k_catalog,
 * indexed by enum assay_mutant and made from mutants.def, with each bug's
 * name, what it does, the real bug it models and the check meant to catch
 * it. assay_mutant_info and assay_mutant_by_name look it up (the engine,
 * engine specs, cli/); assay_mutants_compiled says whether this build holds
 * the bugs.
 */
#include "mutant.h"

#include <string.h>

static const struct assay_mutant_info k_catalog[ASSAY_MUTANT_COUNT] = {
    {ASSAY_MUTANT_NONE, "none", "no planted bug", "", ""},
#define ASSAY_MUTANT_DEF(id, name, group, caught_by, mechanism, modelled_on)                      \
    {ASSAY_MUTANT_##id, name, mechanism, modelled_on, caught_by},
#include "mutants.def"
#undef ASSAY_MUTANT_DEF
};

const struct assay_mutant_info *assay_mutant_info(enum assay_mutant id)
{
    if ((int)id < 0 || id >= ASSAY_MUTANT_COUNT) {
        return NULL;
    }
    return &k_catalog[id];
}

enum assay_status assay_mutant_by_name(const char *name, enum assay_mutant *out)
{
    for (int i = 0; i < ASSAY_MUTANT_COUNT; i++) {
        if (name != NULL && strcmp(name, k_catalog[i].name) == 0) {
            *out = (enum assay_mutant)i;
            return ASSAY_OK;
        }
    }
    return ASSAY_ERR_NOT_FOUND;
}

bool assay_mutants_compiled(void)
{
#ifdef ASSAY_MUTANTS
    return true;
#else
    return false;
#endif
}
