/*
 * blas.c - OpenBLAS's kernel and threads (blas.h). assay_blas_select_core,
 * called first thing in main (cli/main.c, the test mains), sets
 * OPENBLAS_CORETYPE and executes the program again when OpenBLAS fell back
 * to a generic kernel on a CPU it does not know; assay_blas_get_info says
 * what runs for the stamp. assay_blas_one_thread_begin / _end hold OpenBLAS
 * at one thread, counted across concurrent users, around the forward pass.
 */
#include "blas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Declared by OpenBLAS's cblas.h in recent versions; repeated for older. */
char *openblas_get_corename(void);
char *openblas_get_config(void);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);

static pthread_mutex_t one_thread_mu = PTHREAD_MUTEX_INITIALIZER;
static int one_thread_users;
static int one_thread_saved;

void assay_blas_one_thread_begin(void)
{
    pthread_mutex_lock(&one_thread_mu);
    if (one_thread_users++ == 0) {
        one_thread_saved = openblas_get_num_threads();
        if (one_thread_saved > 1) {
            openblas_set_num_threads(1);
        }
    }
    pthread_mutex_unlock(&one_thread_mu);
}

void assay_blas_one_thread_end(void)
{
    pthread_mutex_lock(&one_thread_mu);
    if (one_thread_users > 0 && --one_thread_users == 0 && one_thread_saved > 1) {
        openblas_set_num_threads(one_thread_saved);
    }
    pthread_mutex_unlock(&one_thread_mu);
}

#define DETECTED_ENV "ASSAY_BLAS_DETECTED"

static bool is_generic_core(const char *core)
{
    static const char *const generic[] = {"prescott", "core2", "nehalem", "penryn", "dunnington",
                                          "atom", "katmai", "coppermine", "northwood", "banias"};
    for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++) {
        if (strcasecmp(core, generic[i]) == 0) {
            return true;
        }
    }
    return false;
}

static const char *better_core(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512cd")) {
        return "SkylakeX";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return "Haswell";
    }
#endif
    return NULL;
}

void assay_blas_get_info(struct assay_blas_info *out)
{
    memset(out, 0, sizeof *out);
    const char *core = openblas_get_corename();
    snprintf(out->core, sizeof out->core, "%s", core != NULL ? core : "unknown");
    const char *config = openblas_get_config();
    snprintf(out->config, sizeof out->config, "%s", config != NULL ? config : "unknown");
    out->threads = openblas_get_num_threads();
    /* Which library answers cblas_sgemm: a reference CBLAS linked first
     * (GSL's libgslcblas) would silently take every product. */
    Dl_info dl;
    if (dladdr((void *)cblas_sgemm, &dl) != 0 && dl.dli_fname != NULL) {
        snprintf(out->sgemm_library, sizeof out->sgemm_library, "%s", dl.dli_fname);
    } else {
        snprintf(out->sgemm_library, sizeof out->sgemm_library, "unknown");
    }
    out->sgemm_is_openblas = strstr(out->sgemm_library, "openblas") != NULL;
    const char *detected = getenv(DETECTED_ENV);
    if (detected != NULL && detected[0] != '\0') {
        out->overridden = true;
        snprintf(out->detected, sizeof out->detected, "%s", detected);
    } else {
        out->user_set = getenv("OPENBLAS_CORETYPE") != NULL;
    }
}

void assay_blas_select_core(char **argv)
{
    if (getenv("OPENBLAS_CORETYPE") != NULL || argv == NULL || argv[0] == NULL) {
        return;
    }
    const char *core = openblas_get_corename();
    const char *better = better_core();
    if (core == NULL || better == NULL || !is_generic_core(core)) {
        return;
    }
    if (setenv("OPENBLAS_CORETYPE", better, 1) != 0 || setenv(DETECTED_ENV, core, 1) != 0) {
        return;
    }
    execv("/proc/self/exe", argv);
    /* exec failed: run on with the kernel OpenBLAS chose, and say so. */
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(DETECTED_ENV);
}
