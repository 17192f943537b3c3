/*
 * blas.h - which OpenBLAS kernel runs, and choosing a better one when
 * OpenBLAS does not recognise the CPU.
 *
 * Debian 12's OpenBLAS 0.3.21 (DYNAMIC_ARCH) picks its kernel when the
 * library loads. On CPUs newer than it knows (for example Intel family 6
 * model 207) it falls back to the SSE3 "Prescott" kernel, 5-50x slower than
 * the AVX-512 one at TinyGPT's shapes. OpenBLAS reads OPENBLAS_CORETYPE only
 * at load time, so the one way to correct the choice from inside a program
 * is to set the variable and execute the program again, before it has done
 * anything. A user's own OPENBLAS_CORETYPE is always respected. What was
 * chosen, and why, is recorded in every stamp.
 */
#ifndef ASSAY_BLAS_H
#define ASSAY_BLAS_H

#include <stdbool.h>

struct assay_blas_info {
    char core[32];     /* the kernel in use, as OpenBLAS names it */
    char detected[32]; /* the kernel OpenBLAS chose on its own, if assay overrode it */
    char config[160];  /* openblas_get_config() */
    int threads;
    bool overridden;   /* assay set OPENBLAS_CORETYPE */
    bool user_set;     /* the user set OPENBLAS_CORETYPE */
    char sgemm_library[256]; /* the shared object that serves cblas_sgemm */
    bool sgemm_is_openblas;
};

void assay_blas_get_info(struct assay_blas_info *out);

/*
 * If OPENBLAS_CORETYPE is unset and OpenBLAS runs a generic x86 kernel on a
 * CPU with AVX-512 (SkylakeX kernel) or AVX2+FMA (Haswell kernel), set the
 * variable and re-execute /proc/self/exe with argv. Call first thing in
 * main(). Returns when nothing needs doing, or when re-executing failed (the
 * program then runs on, slower). Never prints.
 */
void assay_blas_select_core(char **argv);

/*
 * OpenBLAS on one thread from begin to end, for a caller that splits its
 * products over threads of its own (the engine's forward pass): OpenBLAS's
 * own threads would otherwise wait for work spinning on the same cores.
 * The setting is process-wide; callers are counted (nested or from several
 * threads) and the last end restores the count OpenBLAS had.
 */
void assay_blas_one_thread_begin(void);
void assay_blas_one_thread_end(void);

#endif
