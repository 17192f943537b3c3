#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/blas.h"
#include "core/status.h"

const char *assay_test_fixture(const char *relative, char *buf, size_t size)
{
    const char *root = getenv("ASSAY_FIXTURES");
    snprintf(buf, size, "%s/%s", root != NULL ? root : "fixtures", relative);
    return buf;
}

/* ASSAY_BUILD is set by CTest; a program run by hand, from any directory,
 * falls back on the build tree it was built in (ASSAY_TEST_BUILD_DIR, from
 * suites/CMakeLists.txt), never on the current directory, which may be the
 * source tree. */
const char *assay_test_scratch(const char *name, char *buf, size_t size)
{
    const char *root = getenv("ASSAY_BUILD");
    snprintf(buf, size, "%s/scratch-%s", root != NULL ? root : ASSAY_TEST_BUILD_DIR, name);
    return buf;
}

bool assay_test_close_to(const char *what, double got, double ref, double atol, double rtol)
{
    double diff = fabs(got - ref);
    bool ok = diff <= atol + rtol * fabs(ref);
    if (!ok) {
        printf("  %s: got %.17g, expected %.17g, |diff| %.3g > %.3g + %.3g * |ref|\n", what, got,
               ref, diff, atol, rtol);
    }
    return ok;
}

static long g_fail_at = -1;
static long g_count;
static long g_live;

static void *failing_malloc(void *ctx, size_t size)
{
    (void)ctx;
    g_count++;
    if (g_count == g_fail_at) {
        return NULL;
    }
    void *p = malloc(size);
    if (p != NULL) {
        g_live++;
    }
    return p;
}

static void *failing_realloc(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    g_count++;
    if (g_count == g_fail_at) {
        return NULL;
    }
    void *p = realloc(ptr, size);
    if (p != NULL && ptr == NULL) {
        g_live++;
    }
    return p;
}

static void failing_free(void *ctx, void *ptr)
{
    (void)ctx;
    if (ptr != NULL) {
        g_live--;
        free(ptr);
    }
}

void assay_test_fail_alloc_at(long k)
{
    g_fail_at = k;
    g_count = 0;
    g_live = 0;
    struct assay_alloc_hooks hooks = {failing_malloc, failing_realloc, failing_free, NULL};
    assay_alloc_set_hooks(&hooks);
}

void assay_test_fail_alloc_off(void)
{
    assay_alloc_set_hooks(NULL);
    g_fail_at = -1;
}

long assay_test_alloc_count(void)
{
    return g_count;
}

long assay_test_alloc_live(void)
{
    return g_live;
}

long assay_test_each_alloc_failing(int (*attempt)(void *ctx), void *ctx)
{
    long failures = 0;
    for (long k = 1; k < 100000; k++) {
        assay_test_fail_alloc_at(k);
        int st = attempt(ctx);
        long live = assay_test_alloc_live();
        assay_test_fail_alloc_off();
        if (st == ASSAY_OK) {
            return failures;
        }
        if (st != ASSAY_ERR_NOMEM || live != 0) {
            fprintf(stderr, "allocation %ld failing: status %d, %ld allocations left behind\n", k,
                    st, live);
            return -1;
        }
        failures++;
    }
    return -1;
}

void assay_test_init(int argc, char **argv)
{
    (void)argc;
    assay_blas_select_core(argv);
}

bool assay_test_name_in(const char *name, const char *list)
{
    for (const char *p = list; *p != '\0';) {
        const char *end = strchr(p, '+');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (len > 0 && strncmp(name, p, len) == 0) {
            return true;
        }
        p += len + (end != NULL ? 1 : 0);
    }
    return false;
}
