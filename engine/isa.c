/*
 * isa.c - naming and choosing the instruction set of the engine's own loops
 * (isa.h): assay_isa_name / _by_name for specs and stamps,
 * assay_isa_supported (what this CPU and operating system run) and
 * assay_isa_resolve (ASSAY_ISA_AUTO to the widest supported). The forward
 * pass resolves its variant once at start-up.
 */
#include "isa.h"

#include <string.h>

static const char *const names[ASSAY_ISA_COUNT] = {"auto", "generic", "avx2", "avx512"};

const char *assay_isa_name(enum assay_isa isa)
{
    return (int)isa >= 0 && isa < ASSAY_ISA_COUNT ? names[isa] : "?";
}

enum assay_status assay_isa_by_name(const char *name, enum assay_isa *out)
{
    for (int i = 0; i < ASSAY_ISA_COUNT; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (enum assay_isa)i;
            return ASSAY_OK;
        }
    }
    return ASSAY_ERR_NOT_FOUND;
}

bool assay_isa_supported(enum assay_isa isa)
{
    switch (isa) {
    case ASSAY_ISA_AUTO:
    case ASSAY_ISA_GENERIC:
        return true;
#if defined(__x86_64__) && defined(__GNUC__)
    /* libgcc's CPU model reads CPUID and, for these, that the operating
     * system saves the wide registers (XGETBV). */
    case ASSAY_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case ASSAY_ISA_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma");
#endif
    default:
        return false;
    }
}

enum assay_isa assay_isa_resolve(enum assay_isa isa)
{
    if (isa != ASSAY_ISA_AUTO) {
        return isa;
    }
    if (assay_isa_supported(ASSAY_ISA_AVX512)) {
        return ASSAY_ISA_AVX512;
    }
    if (assay_isa_supported(ASSAY_ISA_AVX2)) {
        return ASSAY_ISA_AVX2;
    }
    return ASSAY_ISA_GENERIC;
}
