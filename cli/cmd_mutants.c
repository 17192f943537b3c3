/* assay mutants: the catalog of planted bugs. */
#include <string.h>

#include "cli.h"
#include "core/mutant.h"

int assay_cmd_mutants(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: assay mutants\n\nList the planted bugs (mutants) that prove every check can "
               "fail: name, the\nfamily expected to catch it, what it does wrong and the real bug "
               "it imitates.\nThey are compiled only into the test build's assay-mutants "
               "command; `ctest -L\nmutants` shows each one caught.\n");
        return ASSAY_EXIT_OK;
    }
    if (argc > 1) {
        fprintf(stderr, "assay mutants: unexpected argument '%s'\n", argv[1]);
        return ASSAY_EXIT_USAGE;
    }
    printf("planted bugs in this binary: %s\n\n", assay_mutants_compiled() ? "yes" : "none (see assay-mutants)");
    for (int i = 1; i < ASSAY_MUTANT_COUNT; i++) {
        const struct assay_mutant_info *m = assay_mutant_info((enum assay_mutant)i);
        printf("%-26s caught by %s\n    %s\n    modelled on: %s\n", m->name, m->caught_by,
               m->mechanism, m->modelled_on);
    }
    return ASSAY_EXIT_OK;
}
