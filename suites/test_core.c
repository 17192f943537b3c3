/* Unit tests of core/: status strings, diagnostics, the allocation hook,
 * the counter-based RNG, SHA-256 and seed derivation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/alloc.h"
#include "core/blas.h"
#include "core/rng.h"
#include "core/sha256.h"
#include "core/status.h"
#include "support.h"

static void test_status_strings(void **state)
{
    (void)state;
    for (int s = 0; s >= ASSAY_ERR_INTERNAL; s--) {
        const char *str = assay_status_str((enum assay_status)s);
        assert_non_null(str);
        assert_string_not_equal(str, "unknown status");
    }
    assert_string_equal(assay_status_str((enum assay_status)-99), "unknown status");
}

static void test_diag_format(void **state)
{
    (void)state;
    struct assay_diag d;
    char buf[512];
    assay_diag_clear(&d);
    assay_diag_set(&d, "w.json", "requests[3].prompt[7]", "a token id in 0..259", "%d", 300);
    assert_string_equal(assay_diag_format(&d, buf, sizeof buf),
                        "w.json: requests[3].prompt[7]: expected a token id in 0..259, got 300");
    assay_diag_clear(&d);
    assert_string_equal(assay_diag_format(&d, buf, sizeof buf), "");
}

/* Where a JSON text stops parsing is the byte that broke it: the one a
 * user must edit, also where cJSON points one byte past it (a member name
 * that is not a string, after '{' or ','). */
static void test_json_error_offset(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        char culprit; /* the first byte of this value after `after` */
        size_t after;
    } cases[] = {
        {"{\"a\": 1,}", '}', 0},           {"{\"a\": 1,}\n", '}', 0},
        {"{\"a\": 1, }]", '}', 0},          {"{1}", '1', 0},
        {"{'a': 1}", '\'', 0},              {"{\"a\": [1, 2x]}", 'x', 0},
        {"[1,]", ']', 0},                   {"[1,,2]", ',', 3},
        {"{\"a\": 1, \"b\" x}", 'x', 0},    {"{\"a\": {\"b\": 1,}}", '}', 0},
        {"{\"a,\": [{\"b\": 1}, 2x]}", 'x', 0}, {"{\"a\": 1,,}", ',', 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *text = cases[i].text;
        size_t len = strlen(text);
        const char *end = NULL;
        cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
        assert_null(root);
        size_t want = (size_t)(strchr(text + cases[i].after, cases[i].culprit) - text);
        size_t got = assay_json_error_offset(text, len, end);
        if (got != want) {
            fail_msg("%s: byte %zu, not %zu", text, got, want);
        }
    }
    assert_int_equal(assay_json_error_offset("{}", 2, NULL), 0);
}

static void test_failing_allocator(void **state)
{
    (void)state;
    assay_test_fail_alloc_at(2);
    void *a = assay_malloc(8);
    void *b = assay_malloc(8);
    void *c = assay_malloc(8);
    assert_non_null(a);
    assert_null(b);
    assert_non_null(c);
    assert_int_equal(assay_test_alloc_live(), 2);
    assay_free(a);
    assay_free(c);
    assert_int_equal(assay_test_alloc_live(), 0);
    assay_test_fail_alloc_off();
    assert_null(assay_calloc((size_t)-1, 16));
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    struct {
        const char *msg;
        const char *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (int portable = 0; portable < 2; portable++) {
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            struct assay_sha256 ctx;
            uint8_t d[32];
            char hex[65];
            assay_sha256_init(&ctx);
            ctx.portable = ctx.portable || portable;
            assay_sha256_update(&ctx, v[i].msg, strlen(v[i].msg));
            assay_sha256_final(&ctx, d);
            assay_sha256_hex(d, hex);
            assert_string_equal(hex, v[i].hex);
        }
    }
}

/* The SHA extensions' path gives the portable loop's digest for every
 * length around the block boundaries and for long inputs, fed whole and
 * in uneven pieces (which cross blocks at every offset). Without the
 * extensions both runs take the portable loop and the test says so. */
static void test_sha256_paths(void **state)
{
    (void)state;
    enum { N = 70000 };
    uint8_t *buf = assay_malloc(N);
    assert_non_null(buf);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    if (!assay_sha256_accelerated()) {
        print_message("no SHA extensions on this CPU: the portable loop only\n");
    }
    const size_t lens[] = {0, 1, 55, 56, 63, 64, 65, 127, 128, 129, 191, 1000, 4096, N - 3, N};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint8_t d[2][2][32];
        for (int portable = 0; portable < 2; portable++) {
            for (int pieces = 0; pieces < 2; pieces++) {
                struct assay_sha256 ctx;
                assay_sha256_init(&ctx);
                ctx.portable = ctx.portable || portable;
                if (pieces == 0) {
                    assay_sha256_update(&ctx, buf, lens[i]);
                } else {
                    for (size_t at = 0, step = 1; at < lens[i]; at += step, step = step * 3 % 257) {
                        assay_sha256_update(&ctx, buf + at, step < lens[i] - at ? step : lens[i] - at);
                    }
                }
                assay_sha256_final(&ctx, d[portable][pieces]);
            }
        }
        assert_memory_equal(d[0][0], d[1][0], 32);
        assert_memory_equal(d[0][0], d[0][1], 32);
        assert_memory_equal(d[1][0], d[1][1], 32);
    }
    assay_free(buf);
}

/* The counter-based draws must look uniform and independent: the mean,
 * the variance and the lag-1 correlation of 10^6 draws lie within 6
 * standard errors of their U(0,1) values, for consecutive counters and for
 * consecutive seeds alike. */
static void test_rng_moments(void **state)
{
    (void)state;
    const int n = 1000000;
    for (int mode = 0; mode < 2; mode++) {
        double sum = 0, sum2 = 0, lag = 0, prev = 0.5;
        for (int i = 0; i < n; i++) {
            double u = mode == 0 ? assay_rng_u01(42, (uint64_t)i, 3) : assay_rng_u01((uint64_t)i, 7, 3);
            assert_true(u >= 0.0 && u < 1.0);
            sum += u;
            sum2 += u * u;
            lag += (u - 0.5) * (prev - 0.5);
            prev = u;
        }
        double mean = sum / n, var = sum2 / n - mean * mean, corr = (lag / n) / (1.0 / 12.0);
        assert_true(fabs(mean - 0.5) < 6 * sqrt(1.0 / 12.0 / n));
        assert_true(fabs(var - 1.0 / 12.0) < 6 * sqrt(1.0 / 180.0 / n));
        assert_true(fabs(corr) < 6 / sqrt((double)n));
    }
    assert_true(assay_rng_u01(1, 2, 3) != assay_rng_u01(1, 2, 4));
}

static void test_seed_derive(void **state)
{
    (void)state;
    uint64_t a = assay_seed_derive(1, "chi2.first");
    assert_int_equal(a, assay_seed_derive(1, "chi2.first"));
    assert_true(a != assay_seed_derive(1, "chi2.second"));
    assert_true(a != assay_seed_derive(2, "chi2.first"));
    assert_true(a != 0);
}

/* The engine's products must run on OpenBLAS, not on a reference CBLAS that
 * happened to be linked first. */
static void test_sgemm_is_openblas(void **state)
{
    (void)state;
    struct assay_blas_info info;
    assay_blas_get_info(&info);
    printf("cblas_sgemm from %s, OpenBLAS core %s%s%s\n", info.sgemm_library, info.core,
           info.overridden ? ", OpenBLAS detected " : "", info.overridden ? info.detected : "");
    assert_true(info.sgemm_is_openblas);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_strings),  cmocka_unit_test(test_diag_format),
        cmocka_unit_test(test_json_error_offset),
        cmocka_unit_test(test_failing_allocator), cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_sha256_paths),
        cmocka_unit_test(test_rng_moments),     cmocka_unit_test(test_seed_derive),
        cmocka_unit_test(test_sgemm_is_openblas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
