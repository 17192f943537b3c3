/* The stamp (reports/stamp.h): every field present with its type, the
 * engine, model and library facts true to what ran, allocation failures
 * handled, and the build-time source hash (reports/source_hash.cmake)
 * following its documented definition and changing when, and only when, a
 * hashed source changes.
 *
 *   test_stamp CMAKE_COMMAND SOURCE_DIR   (CTest passes both) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <gsl/gsl_version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adapters/spec.h"
#include "bench/null_engine.h"
#include "core/alloc.h"
#include "core/sha256.h"
#include "engine/engine.h"
#include "engine/gemmq.h"
#include "engine/model.h"
#include "gguf_retype.h"
#include "reports/markdown.h"
#include "reports/report.h"
#include "reports/schema.h"
#include "reports/stamp.h"
#include "support.h"

static const char *g_cmake = "cmake";
static const char *g_source = ".";

static bool is_hex(const char *s, size_t n)
{
    if (strlen(s) != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return false;
        }
    }
    return true;
}

static const char *str_at(const cJSON *root, const char *path)
{
    const char *s = assay_json_str(root, path, NULL);
    if (s == NULL) {
        fail_msg("stamp: %s is not a string", path);
    }
    return s;
}

static void test_fields(void **state)
{
    (void)state;
    struct assay_adapter a;
    struct assay_diag diag;
    assert_int_equal(assay_adapter_open_spec("bundled:model=mini,batch=4", &a, &diag), ASSAY_OK);
    struct assay_stamp_seed seeds[] = {{"master", 7}, {"bench", 9}};
    cJSON *s = NULL;
    assert_int_equal(assay_stamp_create(&a, seeds, 2, &s), ASSAY_OK);
    assert_int_equal(assay_stamp_validate(s, "stamp", &diag), ASSAY_OK);

    struct assay_build_facts bf;
    assay_build_facts_get(&bf);
    assert_string_equal(str_at(s, "assay.version"), bf.version);
    assert_true(is_hex(str_at(s, "assay.source_sha256"), 64));
    assert_true(assay_json_num(s, "assay.source_files") > 20);
    const char *commit = str_at(s, "assay.git_commit");
    assert_true(strcmp(commit, "unknown") == 0 || is_hex(commit, 40));
    if (strcmp(commit, "unknown") == 0) {
        assert_true(cJSON_IsNull(assay_json_path(s, "assay.git_dirty")));
    } else {
        assert_int_not_equal(assay_json_bool(s, "assay.git_dirty"), -1);
    }
    /* The engine: name, the spec's options, every parameter, the model. */
    assert_string_equal(str_at(s, "engine.name"), "bundled");
    assert_string_equal(str_at(s, "engine.options.model"), "mini");
    assert_string_equal(str_at(s, "engine.options.batch"), "4");
    assert_true(assay_json_num(s, "engine.params.max_batch") == 4);
    assert_true(assay_json_num(s, "engine.params.max_seq_len") > 0);
    assert_string_equal(str_at(s, "engine.model.name"), "mini");
    assert_true(assay_json_num(s, "engine.model.n_params") > 1000);
    assert_true(assay_json_num(s, "engine.model.config.vocab") == 260);
    assert_true(assay_json_num(s, "engine.model.config.n_params") ==
                assay_json_num(s, "engine.model.n_params"));
    assert_true(is_hex(str_at(s, "engine.model.weights_sha256"), 64));
    assert_string_equal(str_at(s, "engine.model.weights_sha256"),
                        str_at(s, "engine.model.config.weights_sha256"));
    assert_true(cJSON_IsNull(assay_json_path(s, "engine.model.draft")));
    /* The machine and the libraries. */
    assert_true(strlen(str_at(s, "hardware.cpu_model")) > 0);
    assert_true(assay_json_num(s, "hardware.cores_online") >= 1);
    assert_true(assay_json_num(s, "hardware.cores_available") >= 1);
    assert_true(cJSON_IsArray(assay_json_path(s, "hardware.flags")));
    assert_string_equal(str_at(s, "libraries.gsl.build_version"), GSL_VERSION);
    assert_true(strlen(str_at(s, "libraries.gsl.version")) > 0);
    assert_true(strlen(str_at(s, "libraries.openblas.core")) > 0);
    assert_true(strlen(str_at(s, "libraries.openblas.config")) > 0);
    assert_true(assay_json_num(s, "libraries.openblas.threads") >= 1);
    assert_true(strlen(str_at(s, "libraries.openblas.note")) > 0);
    assert_string_equal(str_at(s, "libraries.cjson"), cJSON_Version());
    assert_non_null(strstr(str_at(s, "libraries.cmocka"), "test library"));
    assert_true(strncmp(str_at(s, "libraries.curl"), "libcurl", 7) == 0 ||
                strcmp(str_at(s, "libraries.curl"), "not linked") == 0);
    assert_true(strlen(str_at(s, "compiler.id")) > 0);
    assert_non_null(strstr(str_at(s, "compiler.flags"), "-std=c11"));
    assert_true(assay_json_num(s, "seeds.master") == 7);
    assert_true(assay_json_num(s, "seeds.bench") == 9);
    const char *when = str_at(s, "time_utc");
    assert_int_equal(strlen(when), 20);
    assert_true(when[4] == '-' && when[10] == 'T' && when[19] == 'Z');

    /* Every required field is required: take each away in turn. */
    static const char *const required[] = {
        "assay.version", "assay.git_commit", "assay.git_dirty", "assay.source_sha256",
        "assay.source_files", "engine.spec", "engine.options", "engine.model.weights_sha256",
        "engine.model.n_params", "hardware.cpu_model", "hardware.cores_online", "hardware.flags",
        "libraries.gsl.version", "libraries.openblas.core", "libraries.openblas.threads",
        "libraries.openblas.note", "libraries.cjson", "libraries.cmocka", "libraries.curl",
        "compiler.id", "compiler.version", "compiler.flags", "seeds", "time_utc",
    };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        cJSON *copy = cJSON_Duplicate(s, true);
        char parent[128];
        snprintf(parent, sizeof parent, "%s", required[i]);
        char *dot = strrchr(parent, '.');
        cJSON *holder = copy;
        const char *leaf = required[i];
        if (dot != NULL) {
            *dot = '\0';
            holder = (cJSON *)assay_json_path(copy, parent);
            leaf = dot + 1;
        }
        assert_non_null(holder);
        cJSON_DeleteItemFromObjectCaseSensitive(holder, leaf);
        assay_diag_clear(&diag);
        assert_int_equal(assay_stamp_validate(copy, "stamp", &diag), ASSAY_ERR_PARSE);
        char want[160];
        snprintf(want, sizeof want, "stamp.%s", required[i]);
        assert_string_equal(diag.where, want);
        cJSON_Delete(copy);
    }
    cJSON_Delete(s);
    assay_adapter_close(&a);
}

/* The stamp names the numerics: the OPENBLAS_* variables in force and the
 * path of the bundled engine's products, so that two reports made by other
 * kernels can be told apart. */
static void test_numerics(void **state)
{
    (void)state;
    /* OpenBLAS read its variables when it loaded; the stamp reports what
     * the environment holds now, which here is what this process was given
     * and one more. */
    assert_int_equal(setenv("OPENBLAS_TEST_MARKER", "on", 1), 0);
    const char *specs[] = {"bundled:model=mini,blas_rows=64", "bundled:model=mini,invariant=on",
                           "bundled:model=mini,blas_rows=1", "bundled:model=mini,isa=generic",
                           "bundled:model=mini,act=ggml,kv_type=f16,fa=on"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        struct assay_adapter a;
        struct assay_diag diag;
        assert_int_equal(assay_adapter_open_spec(specs[i], &a, &diag), ASSAY_OK);
        cJSON *s = NULL;
        assert_int_equal(assay_stamp_create(&a, NULL, 0, &s), ASSAY_OK);
        assert_int_equal(assay_stamp_validate(s, "stamp", &diag), ASSAY_OK);
        assert_string_equal(str_at(s, "libraries.openblas.env.OPENBLAS_TEST_MARKER"), "on");
        const char *ct = getenv("OPENBLAS_CORETYPE");
        if (ct != NULL) {
            assert_string_equal(str_at(s, "libraries.openblas.env.OPENBLAS_CORETYPE"), ct);
        }
        const char *products = str_at(s, "engine.numerics.products");
        const char *core = str_at(s, "libraries.openblas.core");
        printf("%-36s products: %s; attention %s\n", specs[i], products,
               str_at(s, "engine.numerics.attention"));
        switch (i) {
        case 0: /* own below blas_rows rows, OpenBLAS from there */
            assert_int_equal(assay_json_bool(s, "engine.numerics.batch_invariant"), 0);
            assert_true(assay_json_num(s, "engine.numerics.blas_rows") == 64);
            assert_string_equal(str_at(s, "engine.numerics.openblas_core"), core);
            assert_non_null(strstr(products, "assay-gemm"));
            assert_non_null(strstr(products, core));
            break;
        case 1: /* invariant: the own product alone, never OpenBLAS (as the default) */
            assert_int_equal(assay_json_bool(s, "engine.numerics.batch_invariant"), 1);
            assert_true(cJSON_IsNull(assay_json_path(s, "engine.numerics.blas_rows")));
            assert_true(cJSON_IsNull(assay_json_path(s, "engine.numerics.openblas_core")));
            assert_non_null(strstr(products, "every product"));
            assert_null(strstr(products, "OpenBLAS"));
            break;
        case 2: /* OpenBLAS alone */
            assert_true(cJSON_IsNull(assay_json_path(s, "engine.numerics.own_products")));
            assert_non_null(strstr(products, "OpenBLAS"));
            assert_null(strstr(products, "assay-gemm"));
            break;
        case 3: /* the generic instruction set, chosen by the spec */
            assert_string_equal(str_at(s, "engine.numerics.isa"), "generic");
            assert_string_equal(str_at(s, "engine.numerics.attention"), "generic");
            assert_string_equal(str_at(s, "engine.params.isa"), "generic");
            break;
        default: /* llama.cpp's CPU numerics, named in the spec and the stamp */
            assert_string_equal(str_at(s, "engine.numerics.act"), "ggml");
            assert_string_equal(str_at(s, "engine.numerics.kv_type"), "f16");
            assert_int_equal(assay_json_bool(s, "engine.numerics.flash_attn"), 1);
            assert_string_equal(str_at(s, "engine.params.act"), "ggml");
            assert_non_null(strstr(str_at(s, "engine.spec"), ",act=ggml,kv_type=f16,fa=on"));
            break;
        }
        if (i < 4) {
            assert_string_equal(str_at(s, "engine.numerics.act"), "exact");
            assert_string_equal(str_at(s, "engine.numerics.kv_type"), "f32");
            assert_int_equal(assay_json_bool(s, "engine.numerics.flash_attn"), 0);
        }
        /* a numerics of the wrong type is refused */
        cJSON_ReplaceItemInObjectCaseSensitive((cJSON *)assay_json_path(s, "engine"), "numerics",
                                               cJSON_CreateString("avx"));
        assert_int_equal(assay_stamp_validate(s, "stamp", &diag), ASSAY_ERR_PARSE);
        assert_string_equal(diag.where, "stamp.engine.numerics");
        cJSON_Delete(s);
        assay_adapter_close(&a);
    }
    unsetenv("OPENBLAS_TEST_MARKER");
    /* the numerics keys' values are checked, naming the key */
    const char *bad[] = {"bundled:model=mini,act=fast", "bundled:model=mini,kv_type=q8_0",
                         "bundled:model=mini,fa=maybe"};
    const char *keys[] = {"act", "kv_type", "fa"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct assay_adapter a;
        struct assay_diag diag;
        assay_diag_clear(&diag);
        assert_int_not_equal(assay_adapter_open_spec(bad[i], &a, &diag), ASSAY_OK);
        assert_non_null(strstr(diag.where, keys[i]));
    }
}

/* An engine on a file in an integer format says how many of its matrices
 * its products of few rows read in that format (engine/gemmq.h), in the
 * stamp and in the markdown's numerics line: all of them where the
 * instruction set has the kernel, none on the generic one, which keeps
 * the clause out of the markdown. */
static void test_integer_weights(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_tinygpt();
    struct assay_model *m;
    struct assay_diag diag;
    char path[512], spec[600];
    assert_int_equal(assay_model_init_random(&m, &cfg, 3), ASSAY_OK);
    assay_test_scratch("stamp-q8_0.gguf", path, sizeof path);
    assert_int_equal(assay_model_save_gguf(m, path, &diag), ASSAY_OK);
    const int32_t matrices = 4 * m->cfg.n_layer + 1;
    assay_model_free(m);
    gguf_retype_file_q8_0(path);
    for (int generic = 0; generic < 2; generic++) {
        snprintf(spec, sizeof spec, "bundled:model=%s%s", path, generic ? ",isa=generic" : "");
        struct assay_adapter a;
        assert_int_equal(assay_adapter_open_spec(spec, &a, &diag), ASSAY_OK);
        cJSON *s = NULL, *rep = NULL;
        assert_int_equal(assay_stamp_create(&a, NULL, 0, &s), ASSAY_OK);
        assert_int_equal(assay_stamp_validate(s, "stamp", &diag), ASSAY_OK);
        enum assay_isa isa;
        assert_int_equal(assay_isa_by_name(str_at(s, "engine.numerics.isa"), &isa), ASSAY_OK);
        double kept = assay_json_num(s, "engine.numerics.quantized_matrices");
        printf("%s: isa %s, %g of %g matrices read in Q8_0\n", generic ? "isa=generic" : "default",
               assay_isa_name(isa), kept, assay_json_num(s, "engine.numerics.matrices"));
        assert_true(assay_json_num(s, "engine.numerics.matrices") == matrices);
        assert_true(kept == (assay_gemmq_supported(isa) ? matrices : 0));
        assert_true(!generic || kept == 0);
        assert_int_equal(assay_report_create("run", "assay run", &rep), ASSAY_OK);
        assert_int_equal(assay_report_set(rep, "stamp", s), ASSAY_OK);
        char *md = NULL, clause[128];
        size_t len;
        assert_int_equal(assay_report_render_markdown(rep, &md, &len), ASSAY_OK);
        snprintf(clause, sizeof clause, "; %d of %d matrices read in the file's integer format",
                 matrices, matrices);
        assert_true((strstr(md, clause) != NULL) == (kept > 0));
        const bool said = strstr(md, "matrices read in the file's integer format") != NULL;
        assert_true(said == (kept > 0));
        assay_free(md);
        cJSON_Delete(rep);
        assay_adapter_close(&a);
    }
    remove(path);
}

static void test_no_engine_and_big_seed(void **state)
{
    (void)state;
    struct assay_stamp_seed seeds[] = {{"huge", UINT64_MAX}};
    cJSON *s = NULL;
    assert_int_equal(assay_stamp_create(NULL, seeds, 1, &s), ASSAY_OK);
    assert_true(cJSON_IsNull(assay_json_path(s, "engine")));
    assert_int_equal(assay_stamp_validate(s, NULL, NULL), ASSAY_OK);
    /* A seed beyond 2^53 would lose digits as a JSON number. */
    assert_string_equal(assay_json_str(s, "seeds.huge", ""), "18446744073709551615");
    cJSON_Delete(s);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    struct assay_adapter a;
    struct assay_null_engine_params np = assay_null_engine_default_params();
    assert_int_equal(assay_null_engine_open(&np, &a), ASSAY_OK);
    struct assay_stamp_seed seeds[] = {{"master", 1}};
    int failures = 0;
    for (long k = 1; k < 100000; k++) {
        cJSON *s = NULL;
        assay_test_fail_alloc_at(k);
        enum assay_status st = assay_stamp_create(&a, seeds, 1, &s);
        long live = assay_test_alloc_live();
        cJSON_Delete(s);
        assay_test_fail_alloc_off();
        if (st == ASSAY_OK) {
            break;
        }
        assert_int_equal(st, ASSAY_ERR_NOMEM);
        assert_null(s);
        assert_int_equal(live, 0);
        failures++;
    }
    assert_true(failures > 50);
    assay_adapter_close(&a);
}

/* ---- the source hash ------------------------------------------------------ */

static void write_file(const char *dir, const char *rel, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    /* mkdir -p the parents */
    for (char *p = path + strlen(dir) + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

struct file_list {
    char names[512][256];
    int n;
};

static bool hashed_name(const char *name)
{
    size_t n = strlen(name);
    return (n > 2 && (strcmp(name + n - 2, ".c") == 0 || strcmp(name + n - 2, ".h") == 0)) ||
           (n > 4 && strcmp(name + n - 4, ".def") == 0) ||
           (n > 6 && strcmp(name + n - 6, ".cmake") == 0);
}

static void walk(const char *root, const char *rel, struct file_list *out)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    DIR *d = opendir(path);
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char child[256], full[1024];
        if (snprintf(child, sizeof child, "%s/%s", rel, e->d_name) >= (int)sizeof child) {
            fail_msg("path too long under %s", rel);
        }
        snprintf(full, sizeof full, "%s/%s", root, child);
        struct stat st;
        if (stat(full, &st) != 0) {
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            walk(root, child, out);
        } else if (hashed_name(e->d_name) && out->n < 512) {
            snprintf(out->names[out->n++], sizeof out->names[0], "%s", child);
        }
    }
    closedir(d);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static void sha_file(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    struct assay_sha256 ctx;
    assay_sha256_init(&ctx);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        assay_sha256_update(&ctx, buf, n);
    }
    fclose(f);
    uint8_t d[32];
    assay_sha256_final(&ctx, d);
    assay_sha256_hex(d, hex);
}

/* The documented definition, computed independently of the CMake script:
 * SHA-256 of "SHA256  PATH\n" lines over the sorted hashed files. */
static void expected_hash(const char *root, char hex[65], int *n_files)
{
    static const char *const dirs[] = {"core", "engine", "oracles", "checks",
                                       "adapters", "bench", "reports", "cli"};
    static struct file_list list;
    list.n = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        walk(root, dirs[i], &list);
    }
    char top[1024];
    snprintf(top, sizeof top, "%s/CMakeLists.txt", root);
    if (access(top, F_OK) == 0) {
        snprintf(list.names[list.n++], sizeof list.names[0], "CMakeLists.txt");
    }
    qsort(list.names, (size_t)list.n, sizeof list.names[0], cmp_names);
    struct assay_sha256 ctx;
    assay_sha256_init(&ctx);
    for (int i = 0; i < list.n; i++) {
        char path[1024], h[65];
        snprintf(path, sizeof path, "%s/%s", root, list.names[i]);
        sha_file(path, h);
        assay_sha256_update(&ctx, h, 64);
        assay_sha256_update(&ctx, "  ", 2);
        assay_sha256_update(&ctx, list.names[i], strlen(list.names[i]));
        assay_sha256_update(&ctx, "\n", 1);
    }
    uint8_t d[32];
    assay_sha256_final(&ctx, d);
    assay_sha256_hex(d, hex);
    *n_files = list.n;
}

/* Run reports/source_hash.cmake on root; the hash and file count it wrote. */
static void script_hash(const char *root, const char *out_dir, char hex[65], int *n_files)
{
    char header[1024], cmd[4096];
    snprintf(header, sizeof header, "%s/assay_source_hash.h", out_dir);
    snprintf(cmd, sizeof cmd, "'%s' -DSOURCE_DIR='%s' -DOUT='%s' -P '%s/reports/source_hash.cmake'",
             g_cmake, root, header, g_source);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(header, "r");
    assert_non_null(f);
    char line[512];
    hex[0] = '\0';
    *n_files = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        sscanf(line, "#define ASSAY_SOURCE_SHA256 \"%64[0-9a-f]\"", hex);
        sscanf(line, "#define ASSAY_SOURCE_FILES %d", n_files);
    }
    fclose(f);
    assert_true(is_hex(hex, 64));
}

static void test_source_hash(void **state)
{
    (void)state;
    char root[512], out[512];
    assay_test_scratch("stamp-tree-XXXXXX", root, sizeof root);
    assert_non_null(mkdtemp(root));
    assay_test_scratch("stamp-out-XXXXXX", out, sizeof out);
    assert_non_null(mkdtemp(out));
    /* A small tree with hashed files, nested ones, and files that must not
     * count (tests, notes, fixtures, an editor's backup). */
    write_file(root, "CMakeLists.txt", "project(x)\n");
    write_file(root, "core/a.c", "int a;\n");
    write_file(root, "core/a.h", "extern int a;\n");
    write_file(root, "engine/deep/b.c", "int b;\n");
    write_file(root, "reports/x.cmake", "# script\n");
    write_file(root, "cli/main.c", "int main(void){return 0;}\n");
    write_file(root, "suites/test_a.c", "int t;\n");
    write_file(root, "core/notes.md", "notes\n");
    write_file(root, "fixtures/w.json", "{}\n");

    char h1[65], e1[65];
    int n1, m1;
    script_hash(root, out, h1, &n1);
    expected_hash(root, e1, &m1);
    assert_string_equal(h1, e1);
    assert_int_equal(n1, 6);
    assert_int_equal(m1, 6);

    char h[65], e[65];
    int n, m;
    /* Unchanged: the same hash. */
    script_hash(root, out, h, &n);
    assert_string_equal(h, h1);
    /* A hashed source changes: the hash changes. */
    write_file(root, "core/a.c", "int a = 1;\n");
    script_hash(root, out, h, &n);
    expected_hash(root, e, &m);
    assert_string_not_equal(h, h1);
    assert_string_equal(h, e);
    char h2[65];
    snprintf(h2, sizeof h2, "%s", h);
    /* Files outside the hashed set do not count. */
    write_file(root, "suites/test_a.c", "int t = 2;\n");
    write_file(root, "core/notes.md", "other notes\n");
    script_hash(root, out, h, &n);
    assert_string_equal(h, h2);
    /* A new file counts, and so does a rename (the path is hashed). */
    write_file(root, "bench/c.h", "\n");
    script_hash(root, out, h, &n);
    assert_string_not_equal(h, h2);
    assert_int_equal(n, 7);
    char p1[1024], p2[1024];
    snprintf(p1, sizeof p1, "%s/bench/c.h", root);
    snprintf(p2, sizeof p2, "%s/bench/d.h", root);
    char h3[65];
    snprintf(h3, sizeof h3, "%s", h);
    assert_int_equal(rename(p1, p2), 0);
    script_hash(root, out, h, &n);
    assert_string_not_equal(h, h3);
    /* Removing it restores the earlier hash. */
    assert_int_equal(unlink(p2), 0);
    script_hash(root, out, h, &n);
    assert_string_equal(h, h2);
    /* CMakeLists.txt counts. */
    write_file(root, "CMakeLists.txt", "project(y)\n");
    script_hash(root, out, h, &n);
    assert_string_not_equal(h, h2);

    /* Outside a git work tree of its own (a tarball, even one unpacked
     * inside another repository, as this scratch tree is inside the
     * checkout): commit "unknown", dirtiness unknown. */
    char header[1024], cmd0[4096], line[256];
    snprintf(header, sizeof header, "%s/assay_git_info.h", out);
    snprintf(cmd0, sizeof cmd0, "'%s' -DSOURCE_DIR='%s' -DOUT='%s' -P '%s/reports/git_info.cmake'",
             g_cmake, root, header, g_source);
    assert_int_equal(system(cmd0), 0);
    FILE *f = fopen(header, "r");
    assert_non_null(f);
    bool unknown = false, dirty_unknown = false;
    while (fgets(line, sizeof line, f) != NULL) {
        unknown = unknown || strcmp(line, "#define ASSAY_GIT_COMMIT \"unknown\"\n") == 0;
        dirty_unknown = dirty_unknown || strcmp(line, "#define ASSAY_GIT_DIRTY -1\n") == 0;
    }
    fclose(f);
    assert_true(unknown);
    assert_true(dirty_unknown);

    /* The real tree follows the same definition. */
    script_hash(g_source, out, h, &n);
    expected_hash(g_source, e, &m);
    assert_string_equal(h, e);
    assert_int_equal(n, m);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", root, out);
    assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc >= 3) {
        g_cmake = argv[1];
        g_source = argv[2];
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_numerics),
        cmocka_unit_test(test_integer_weights),
        cmocka_unit_test(test_no_engine_and_big_seed),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_source_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
