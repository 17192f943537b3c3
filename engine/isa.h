/*
 * isa.h - which instruction set the engine's own loops use.
 *
 * The engine's own arithmetic (its fixed-order matrix product, attention,
 * SwiGLU) comes in a few variants, one per instruction set: `generic`
 * (4-wide vectors anyone's compiler can make, separate multiply and add),
 * `avx2` (8-wide, fused multiply-add) and `avx512` (16-wide products, fused
 * multiply-add; its attention is avx2's). Each variant rounds differently
 * from the others, so an engine picks one at start-up, by the CPU
 * (ASSAY_ISA_AUTO: the widest the CPU and the operating system support) or
 * as asked, and every row of every step then takes that variant: which one
 * never depends on a batch's shape. The stamp names it, and the portability
 * label forces each variant the CPU can run.
 */
#ifndef ASSAY_ISA_H
#define ASSAY_ISA_H

#include <stdbool.h>

#include "../core/status.h"

enum assay_isa {
    ASSAY_ISA_AUTO = 0, /* the best the CPU runs (resolved at engine start-up) */
    ASSAY_ISA_GENERIC,
    ASSAY_ISA_AVX2,
    ASSAY_ISA_AVX512,
    ASSAY_ISA_COUNT
};

/* "auto", "generic", "avx2", "avx512"; "?" out of range. */
const char *assay_isa_name(enum assay_isa isa);

/* Look a name up; ASSAY_ERR_NOT_FOUND for an unknown one. */
enum assay_status assay_isa_by_name(const char *name, enum assay_isa *out);

/* Whether this CPU (and this build) can run the variant; AUTO always. */
bool assay_isa_supported(enum assay_isa isa);

/* AUTO resolved to the widest variant supported; any other value as is. */
enum assay_isa assay_isa_resolve(enum assay_isa isa);

#endif
