#include <stdio.h>

#include "core/blas.h"

int main(int argc, char **argv)
{
    (void)argc;
    assay_blas_select_core(argv);
    fprintf(stderr, "assay: not yet built\n");
    return 2;
}
