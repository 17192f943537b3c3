/*
 * support.h - what every test program shares: fixture paths, a failing
 * allocator, and OpenBLAS core selection before any test runs.
 */
#ifndef ASSAY_TEST_SUPPORT_H
#define ASSAY_TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>

/* Path of a file under fixtures/ (ASSAY_FIXTURES, set by CTest) into buf. */
const char *assay_test_fixture(const char *relative, char *buf, size_t size);

/* Path of a scratch file in the build tree for this test into buf:
 * $ASSAY_BUILD/scratch-NAME, or the build tree's when ASSAY_BUILD is unset. */
const char *assay_test_scratch(const char *name, char *buf, size_t size);

/* Whether |got - ref| <= atol + rtol * |ref|; when not, prints what, both
 * values and the difference. */
bool assay_test_close_to(const char *what, double got, double ref, double atol, double rtol);

/*
 * The failing allocator: after assay_test_fail_alloc_at(k), the k-th
 * allocation from then on (1-based) returns NULL, and only that one.
 * assay_test_alloc_count() says how many allocations were made since the
 * call; assay_test_alloc_live() how many are still outstanding.
 * assay_test_fail_alloc_off() restores the plain allocator.
 */
void assay_test_fail_alloc_at(long k);
void assay_test_fail_alloc_off(void);
long assay_test_alloc_count(void);
long assay_test_alloc_live(void);

/*
 * Run attempt(ctx) with each allocation it makes failing in turn (the 1st,
 * the 2nd, ...) until a run succeeds. attempt returns an assay_status and
 * frees what it made (a failed init, then its free of the NULL it got). The
 * number of failed runs, or -1 when one returned anything but
 * ASSAY_ERR_NOMEM or left an allocation behind (printed).
 */
long assay_test_each_alloc_failing(int (*attempt)(void *ctx), void *ctx);

/* Whether name starts with one of the '+'-separated prefixes of list
 * ("dist.gof+dist.homogeneity"): how the verify label's programs select
 * their part of a family, and how test_plan checks the parts. */
bool assay_test_name_in(const char *name, const char *list);

/* Call first in main(): selects a suitable OpenBLAS kernel (see
 * core/blas.h) by re-executing the test once if needed. */
void assay_test_init(int argc, char **argv);

#endif
