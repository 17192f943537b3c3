/*
 * The portability label: every claim whose verdict rests on arithmetic,
 * under every kernel family this CPU can run.
 *
 *   test_portability                    every family, a table, exit 0 if all hold
 *   test_portability --mutant NAME      the same on bundled:mutant=NAME: exit 0
 *                                       only if some family's claims FAIL
 *   test_portability --child KIND NAME  (internal) one family: KIND blas or isa
 *   test_portability --probe            (internal) can OpenBLAS's kernel run here?
 *
 * OpenBLAS picks its kernels by CPU when it loads, and OPENBLAS_CORETYPE
 * forces any family: that is how one machine stands in for the machines
 * users have. For each family OpenBLAS knows, a child process first runs a
 * few products under it (the probe): a family whose kernels use
 * instructions this CPU lacks dies with SIGILL and is listed as not
 * executable here, and a name this OpenBLAS does not know (it then runs
 * another kernel, whose name it reports) as absent. The engine's own loops
 * come in variants per instruction set (engine/isa.h); each one the CPU
 * runs is a family too.
 *
 * Under each family a child checks:
 *  - gemm: the engine's own product (engine/gemm.h) gives every row the
 *    bits it has alone, at every row count 1..70 and at two offsets, added
 *    into C or stored, and whatever the cut of its panels;
 *  - invariant: with invariant=on, TinyGPT's logits for one request are
 *    bit-identical alone and among 12 neighbours, with one thread and two
 *    (suites/probe.h); their hash must be the same under every OpenBLAS
 *    family (the claim does not rest on OpenBLAS at all), and the same
 *    with isa=avx2 as with isa=avx512 (both fuse every multiply-add of the
 *    same chains and share the x86-64-v3 attention);
 *  - OpenBLAS path (invariant=off, blas_rows=1: every product through
 *    OpenBLAS): the same tokens alone and among neighbours and with one
 *    thread or two, logits within ASSAY_ISOLATION_LOGIT_TOL (the largest
 *    differences are reported: this path claims nothing bitwise);
 *  - the oracle margin: equivalence checks of the invariant path, the
 *    default path and the OpenBLAS path pass, and their largest
 *    |engine - oracle| logit is at most a tenth of the tie tolerance
 *    ASSAY_EQUIV_TIE_TOL (a margin of 10 or more; the figures are printed);
 *  - the isolation checks of the verify plan pass;
 *  - twins: on mini-twins (engine/model.h), whose output rows come in
 *    identical pairs, the engine's own product gives tokens 2i and 2i + 1
 *    logits of the same bits at every position, alone and among 12
 *    neighbours, with one thread and two (the distributional checks of
 *    exact ties rest on it); the OpenBLAS path's count of differing twins
 *    is printed, not claimed (its kernels may treat a column by its place).
 * The parent prints one row per family and fails if any claim fails
 * anywhere (or, with --mutant, passes only if one does: it runs the
 * instruction sets first and stops at the first family that catches it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cblas.h>

#include "checks/equivalence.h"
#include "checks/property.h"
#include "checks/context.h"
#include "checks/plan.h"
#include "core/blas.h"
#include "core/clock.h"
#include "core/mutant.h"
#include "engine/engine.h"
#include "engine/gemm.h"
#include "probe.h"
#include "support.h"

char *openblas_get_corename(void);

/* OpenBLAS 0.3.21's x86-64 kernel families (the names it accepts in
 * OPENBLAS_CORETYPE; older aliases such as Katmai or Athlon map onto
 * Prescott). SapphireRapids is listed for the OpenBLAS versions that have
 * it. */
static const char *const k_blas_families[] = {
    "Prescott",  "Core2",     "Penryn",      "Dunnington", "Nehalem",  "Atom",
    "Opteron",   "Opteron_SSE3", "Barcelona", "Nano",      "Sandybridge", "Bulldozer",
    "Piledriver", "Steamroller", "Excavator", "Haswell",   "Zen",      "SkylakeX",
    "Cooperlake", "SapphireRapids",
};

#define MAX_OUT 16384

static const char *g_mutant = ""; /* mutant name or "" */

/* ------------------------------------------------------------------ */
/* The child: one family's checks, printed as "FIG key value" and      */
/* "CLAIM name PASS|FAIL detail" lines for the parent.                 */
/* ------------------------------------------------------------------ */

static int g_failures;

static void claim(const char *name, bool ok, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    printf("CLAIM %s %s %s\n", name, ok ? "PASS" : "FAIL", detail);
    g_failures += !ok;
    fflush(stdout);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float uniform_pm1(uint64_t *s)
{
    return (float)((splitmix(s) >> 40) / (double)(1 << 24) * 2.0 - 1.0);
}

/*
 * The own product's invariance, directly: for shapes with a partial last
 * panel and a long k, each row's bits at every row count 1..70 and offset,
 * added or stored, and under every cut of its panels, equal those of the
 * row alone. Returns the number of rows that differ.
 */
static long gemm_sweep(enum assay_isa isa, int mutant, char *first, size_t size)
{
    const int32_t shapes[][2] = {{256, 260}, {1024, 256}, {64, 48}};
    const int32_t max_m = 70, offsets[] = {0, 3};
    long bad = 0;
    first[0] = '\0';
    uint64_t seed = 17;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int32_t k = shapes[si][0], n = shapes[si][1];
        int32_t panels = assay_gemm_panels(n);
        float *rows = malloc(sizeof(float) * (size_t)k * n);
        float *packed = aligned_alloc(64, sizeof(float) * (size_t)assay_gemm_packed_floats(k, n));
        float *a = malloc(sizeof(float) * (size_t)(max_m + 3) * k);
        float *alone = malloc(sizeof(float) * (size_t)(max_m + 3) * n);
        float *c = malloc(sizeof(float) * (size_t)(max_m + 3) * n);
        float *d = malloc(sizeof(float) * (size_t)(max_m + 3) * n);
        assert_true(rows && packed && a && alone && c && d);
        memset(packed, 0, sizeof(float) * (size_t)assay_gemm_packed_floats(k, n));
        for (int64_t i = 0; i < (int64_t)k * n; i++) {
            rows[i] = uniform_pm1(&seed);
        }
        assay_gemm_pack(packed, k, n, 0, n, rows);
        for (int64_t i = 0; i < (int64_t)(max_m + 3) * k; i++) {
            a[i] = uniform_pm1(&seed);
        }
        for (int64_t i = 0; i < (int64_t)(max_m + 3) * n; i++) {
            d[i] = uniform_pm1(&seed);
        }
        for (int32_t r = 0; r < max_m + 3; r++) {
            struct assay_gemm g = {a + (int64_t)r * k, k, 1, k, n, packed,
                                   alone + (int64_t)r * n, n, false, isa, mutant};
            assay_gemm_run(&g, 0, panels);
        }
        for (int acc = 0; acc < 2; acc++) {
            for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0]; oi++) {
                int32_t s = offsets[oi];
                for (int32_t m = 1; m <= max_m; m++) {
                    /* the whole product, then (for a few m) cut at every panel */
                    int32_t cuts = (m == 1 || m == 5 || m == 64) ? panels : 1;
                    for (int32_t cut = 0; cut < cuts; cut++) {
                        memcpy(c, d + (int64_t)s * n, sizeof(float) * (size_t)m * n);
                        struct assay_gemm g = {a + (int64_t)s * k, k, m, k, n, packed, c, n,
                                               acc == 1, isa, mutant};
                        assay_gemm_run(&g, 0, cut);
                        assay_gemm_run(&g, cut, panels);
                        for (int32_t r = 0; r < m; r++) {
                            for (int32_t j = 0; j < n; j++) {
                                float want = alone[(int64_t)(s + r) * n + j];
                                if (acc == 1) {
                                    want = d[(int64_t)(s + r) * n + j] + want;
                                }
                                float got = c[(int64_t)r * n + j];
                                if (memcmp(&want, &got, sizeof want) != 0) {
                                    if (first[0] == '\0') {
                                        snprintf(first, size,
                                                 "k=%d n=%d: row %d of %d (offset %d, %s, panels "
                                                 "cut at %d), column %d: %.9g alone, %.9g here",
                                                 (int)k, (int)n, (int)r, (int)m, (int)s,
                                                 acc ? "added" : "stored", (int)cut, (int)j,
                                                 (double)want, (double)got);
                                    }
                                    bad++;
                                    break;
                                }
                            }
                        }
                    }
                }
            }
        }
        free(rows);
        free(packed);
        free(a);
        free(alone);
        free(c);
        free(d);
    }
    return bad;
}

/* The probe (suites/probe.h) on TinyGPT with these products and threads. */
static void run_probe(const struct assay_model *m, bool invariant, int32_t blas_rows,
                      int32_t threads, enum assay_isa isa, int mutant, bool crowd,
                      struct assay_probe *c)
{
    struct assay_engine_params p = assay_engine_default_params(m);
    p.batch_invariant = invariant;
    p.blas_rows = blas_rows;
    p.threads = threads;
    p.isa = isa;
    p.mutant = mutant;
    assay_probe_run(&p, crowd, c);
}

/* "bundled" with the options that are not empty, and the planted bug. */
static void spec_with(char *buf, size_t size, const char *isa_opt, const char *extra)
{
    const char *parts[] = {isa_opt, extra, g_mutant[0] ? "mutant=" : ""};
    snprintf(buf, size, "bundled");
    const char *sep = ":";
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (parts[i][0] != '\0') {
            size_t len = strlen(buf);
            snprintf(buf + len, size - len, "%s%s%s", sep, parts[i], i == 2 ? g_mutant : "");
            sep = ",";
        }
    }
}

/* Run a plan item on base_spec; the result's verdict and figures. */
static void run_item(struct assay_verify_ctx *ctx, const char *name, const char *base,
                     struct assay_check_result *res)
{
    const struct assay_plan_item *item = assay_plan_find(name);
    assert_non_null(item);
    assert_int_equal(assay_run_plan_item(ctx, item, base, NULL, res), ASSAY_OK);
}

static int child_main(const char *kind, const char *name)
{
    alarm(900); /* a hung family ends its own run */
    bool is_isa = strcmp(kind, "isa") == 0;
    const char *core = openblas_get_corename();
    printf("FIG core %s\n", core != NULL ? core : "unknown");
    if (!is_isa && (core == NULL || strcasecmp(core, name) != 0)) {
        printf("ABSENT this OpenBLAS runs %s for it\n", core != NULL ? core : "unknown");
        return 3;
    }
    int mutant = 0;
    if (g_mutant[0] != '\0') {
        enum assay_mutant mm;
        assert_int_equal(assay_mutant_by_name(g_mutant, &mm), ASSAY_OK);
        mutant = (int)mm;
    }
    enum assay_isa isa = ASSAY_ISA_AUTO;
    if (is_isa) {
        assert_int_equal(assay_isa_by_name(name, &isa), ASSAY_OK);
    }
    enum assay_isa resolved = assay_isa_resolve(isa);
    printf("FIG isa %s\n", assay_isa_name(resolved));
    char isa_opt[32] = "";
    if (is_isa) {
        snprintf(isa_opt, sizeof isa_opt, "isa=%s", name);
    }

    /* gemm: the own product, row by row */
    char first[512];
    long bad = gemm_sweep(resolved, mutant, first, sizeof first);
    claim("gemm", bad == 0, "%ld rows differ from the row alone%s%s", bad, bad ? ": " : "", first);

    struct assay_model_config cfg = assay_model_config_tinygpt();
    struct assay_model *m;
    assert_int_equal(assay_model_init_random(&m, &cfg, 1), ASSAY_OK);
    static struct assay_probe runs[4];

    /* invariant=on: alone / crowd x threads 2 / 1, bit for bit */
    for (int i = 0; i < 4; i++) {
        run_probe(m, true, 0, i < 2 ? 2 : 1, isa, mutant, i % 2 == 1, &runs[i]);
    }
    int differ = 0;
    double inv_diff = 0.0;
    for (int i = 1; i < 4; i++) {
        differ += !assay_probe_same_bits(&runs[0], &runs[i]);
        double dd = assay_probe_max_diff(&runs[0], &runs[i], NULL);
        inv_diff = dd > inv_diff ? dd : inv_diff;
    }
    printf("FIG inv_hash %016llx\n", (unsigned long long)assay_probe_hash(&runs[0]));
    claim("invariant", differ == 0,
          "alone/among 12 neighbours x threads 2/1: %d of 3 runs differ from the first (largest "
          "difference %.3g)",
          differ, inv_diff);

    /* the OpenBLAS path: tokens equal, logits within the stated tolerance */
    run_probe(m, false, 1, 2, isa, mutant, false, &runs[0]);
    run_probe(m, false, 1, 2, isa, mutant, true, &runs[1]);
    run_probe(m, false, 1, 1, isa, mutant, false, &runs[2]);
    bool td1, td2;
    double batch_diff = assay_probe_max_diff(&runs[0], &runs[1], &td1);
    double thread_diff = assay_probe_max_diff(&runs[0], &runs[2], &td2);
    printf("FIG blas_batch_diff %.3g\nFIG blas_thread_diff %.3g\n", batch_diff, thread_diff);
    claim("openblas-path", !td1 && !td2 && batch_diff <= ASSAY_ISOLATION_LOGIT_TOL &&
                               thread_diff <= ASSAY_ISOLATION_LOGIT_TOL,
          "alone vs among neighbours %.3g, threads 2 vs 1 %.3g (tolerance %g)%s", batch_diff,
          thread_diff, ASSAY_ISOLATION_LOGIT_TOL, td1 || td2 ? "; a token differs" : "");
    assay_model_free(m);

    /* the tie model: twins exact on the own product; OpenBLAS's figure */
    struct assay_model_config tc = assay_model_config_mini_twins();
    assert_int_equal(assay_model_init_random(&m, &tc, 1), ASSAY_OK);
    int64_t twins_bad = 0;
    for (int i = 0; i < 4; i++) {
        run_probe(m, false, 0, i < 2 ? 2 : 1, isa, mutant, i % 2 == 1, &runs[0]);
        twins_bad += assay_probe_unequal_twins(&runs[0]);
    }
    run_probe(m, false, 1, 2, isa, mutant, true, &runs[1]);
    printf("FIG twins_blas %lld\n", (long long)assay_probe_unequal_twins(&runs[1]));
    claim("twins", twins_bad == 0,
          "mini-twins on the own product, alone/among 12 neighbours x threads 2/1: %lld twin "
          "logits of other bits",
          (long long)twins_bad);
    assay_model_free(m);

    /* the oracle margin, and the isolation checks of the plan */
    char fixtures[1024], base[256];
    assay_test_fixture("", fixtures, sizeof fixtures);
    struct assay_verify_ctx *ctx;
    assert_int_equal(assay_verify_ctx_init(&ctx, fixtures, 1), ASSAY_OK);
    struct {
        const char *fig, *item, *extra;
    } margins[] = {
        {"oracle_own", "equiv.batch-invariant", ""},
        {"oracle_default", "equiv.all-mixed", ""},
        {"oracle_blas", "equiv.all-mixed", "blas_rows=1"},
    };
    for (size_t i = 0; i < sizeof margins / sizeof margins[0]; i++) {
        struct assay_check_result res;
        spec_with(base, sizeof base, isa_opt, margins[i].extra);
        run_item(ctx, margins[i].item, base, &res);
        printf("FIG %s %.3g\n", margins[i].fig, res.max_logit_diff);
        bool ok = res.verdict == ASSAY_VERDICT_PASS && res.max_logit_diff * 10.0 <= res.tie_tol;
        claim(margins[i].fig, ok, "%s on %s: %s; largest |engine - oracle| %.3g, tie tolerance %g",
              margins[i].item, base, assay_verdict_str(res.verdict), res.max_logit_diff,
              res.tie_tol);
        if (res.verdict != ASSAY_VERDICT_PASS) {
            printf("    %s\n", res.failure);
        }
    }
    const char *isolation[] = {"prop.isolation", "prop.isolation-tolerance",
                               "prop.isolation-blackbox"};
    for (size_t i = 0; i < sizeof isolation / sizeof isolation[0]; i++) {
        struct assay_check_result res;
        spec_with(base, sizeof base, isa_opt, "");
        run_item(ctx, isolation[i], base, &res);
        claim(isolation[i], res.verdict == ASSAY_VERDICT_PASS, "%s: %s", assay_verdict_str(res.verdict),
              res.verdict == ASSAY_VERDICT_PASS ? res.summary : res.failure);
    }
    assay_verify_ctx_free(ctx);
    return g_failures == 0 ? 0 : 1;
}

/* ------------------------------------------------------------------ */
/* The probe: a few products under the forced kernel.                  */
/* ------------------------------------------------------------------ */

static int probe_main(void)
{
    const int shapes[][3] = {{1, 256, 1024}, {7, 256, 1024}, {64, 1024, 256}, {300, 256, 260}};
    float *a = calloc(300 * 1024, sizeof(float)), *b = calloc(1024 * 1024, sizeof(float));
    float *c = calloc(300 * 1024, sizeof(float));
    if (a == NULL || b == NULL || c == NULL) {
        return 2;
    }
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int m = shapes[i][0], k = shapes[i][1], n = shapes[i][2];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c,
                    n);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
    }
    const char *core = openblas_get_corename();
    printf("%s\n", core != NULL ? core : "unknown");
    free(a);
    free(b);
    free(c);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The parent.                                                         */
/* ------------------------------------------------------------------ */

struct family_run {
    char kind[8], name[32];
    char status[16]; /* "ran", "absent", "cannot run" */
    char note[160];
    char out[MAX_OUT];
    int exit_code;   /* -signal when killed */
    double seconds;
};

/* Run this program with args under OPENBLAS_CORETYPE=coretype (NULL: as
 * inherited), its output into r->out. */
static void spawn(const char *self, char *const args[], const char *coretype, struct family_run *r)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        close(fd[1]);
        if (coretype != NULL) {
            setenv("OPENBLAS_CORETYPE", coretype, 1);
            unsetenv("ASSAY_BLAS_DETECTED");
        }
        execv(self, args);
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0;
    ssize_t got;
    char buf[4096];
    while ((got = read(fd[0], buf, sizeof buf)) > 0 || (got < 0 && errno == EINTR)) {
        if (got > 0 && len + (size_t)got < sizeof r->out) {
            memcpy(r->out + len, buf, (size_t)got);
            len += (size_t)got;
        }
    }
    r->out[len] = '\0';
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

/* The value after "FIG key " in out, or "-". */
static const char *fig(const struct family_run *r, const char *key, char *buf, size_t size)
{
    char pat[64];
    snprintf(pat, sizeof pat, "FIG %s ", key);
    const char *p = strstr(r->out, pat);
    if (p == NULL) {
        snprintf(buf, size, "-");
        return buf;
    }
    p += strlen(pat);
    size_t n = strcspn(p, "\n");
    snprintf(buf, size, "%.*s", (int)(n < size - 1 ? n : size - 1), p);
    return buf;
}

static int64_t now_ms(void)
{
    return assay_now_ns() / 1000000;
}

static void test_every_family(void **state)
{
    (void)state;
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(sl > 0);
    self[sl] = '\0';
    size_t n_blas = sizeof k_blas_families / sizeof k_blas_families[0];
    size_t n_runs = n_blas + 3;
    struct family_run *runs = calloc(n_runs, sizeof *runs);
    assert_non_null(runs);
    const char *user_core = getenv("OPENBLAS_CORETYPE");
    printf("OpenBLAS kernel of this process: %s (OPENBLAS_CORETYPE %s)%s%s\n",
           openblas_get_corename(), user_core != NULL ? user_core : "unset",
           g_mutant[0] ? "; planted bug " : "", g_mutant);
    size_t n = 0;
    for (size_t i = 0; i < n_blas; i++, n++) {
        struct family_run *r = &runs[n];
        snprintf(r->kind, sizeof r->kind, "blas");
        snprintf(r->name, sizeof r->name, "%s", k_blas_families[i]);
        char *probe_args[] = {self, "--probe", NULL};
        spawn(self, probe_args, r->name, r);
        char core[64];
        snprintf(core, sizeof core, "%.*s", (int)strcspn(r->out, "\n"), r->out);
        if (r->exit_code == -SIGILL) {
            snprintf(r->status, sizeof r->status, "cannot run");
            snprintf(r->note, sizeof r->note, "its kernels use instructions this CPU lacks (SIGILL)");
            continue;
        }
        if (r->exit_code != 0) {
            snprintf(r->status, sizeof r->status, "FAILED");
            snprintf(r->note, sizeof r->note, "the probe exited with %d", r->exit_code);
            continue;
        }
        if (strcasecmp(core, r->name) != 0) {
            snprintf(r->status, sizeof r->status, "absent");
            snprintf(r->note, sizeof r->note, "not in this OpenBLAS (it runs %s instead)", core);
            continue;
        }
        snprintf(r->status, sizeof r->status, "ran");
    }
    const enum assay_isa isas[] = {ASSAY_ISA_GENERIC, ASSAY_ISA_AVX2, ASSAY_ISA_AVX512};
    for (size_t i = 0; i < 3; i++, n++) {
        struct family_run *r = &runs[n];
        snprintf(r->kind, sizeof r->kind, "isa");
        snprintf(r->name, sizeof r->name, "%s", assay_isa_name(isas[i]));
        if (!assay_isa_supported(isas[i])) {
            snprintf(r->status, sizeof r->status, "cannot run");
            snprintf(r->note, sizeof r->note, "this CPU lacks it");
        } else {
            snprintf(r->status, sizeof r->status, "ran");
        }
    }
    /* the families that run, one child each; with a planted bug, the
     * instruction sets first (the engine's own loops, where such bugs
     * live) and no family after the first that catches it: one catch is
     * the claim, and every family's child takes seconds to minutes. */
    bool caught = false;
    for (size_t k = 0; k < n; k++) {
        size_t i = k;
        if (g_mutant[0]) {
            i = k < 3 ? n - 3 + k : k - 3; /* the three isa rows are last */
        }
        struct family_run *r = &runs[i];
        if (strcmp(r->status, "ran") != 0) {
            continue;
        }
        if (caught) {
            snprintf(r->status, sizeof r->status, "not run");
            snprintf(r->note, sizeof r->note, "the planted bug was caught already");
            continue;
        }
        char *args[8];
        int a = 0;
        args[a++] = self;
        if (g_mutant[0]) {
            args[a++] = "--mutant";
            args[a++] = (char *)g_mutant;
        }
        args[a++] = "--child";
        args[a++] = r->kind;
        args[a++] = r->name;
        args[a] = NULL;
        int64_t t0 = now_ms();
        spawn(self, args, strcmp(r->kind, "blas") == 0 ? r->name : NULL, r);
        r->seconds = (now_ms() - t0) / 1000.0;
        if (r->exit_code != 0) {
            snprintf(r->status, sizeof r->status, r->exit_code == 3 ? "absent" : "FAILED");
        }
        printf("  %-4s %-15s %-7s %6.1f s\n", r->kind, r->name, r->status, r->seconds);
        fflush(stdout);
        caught = g_mutant[0] && r->exit_code != 0;
    }

    /* the table */
    printf("\n%-4s %-15s %-11s %-7s %-6s %-9s %-9s %-10s %-10s %-10s %-10s %-10s %-8s  %s\n",
           "kind", "family", "core", "isa", "gemm", "invariant", "isolation", "blas-batch",
           "blas-thread", "|e-o| own", "|e-o| dflt", "|e-o| blas", "twins", "verdict");
    int failed = 0, ran = 0;
    char ref_hash[32] = "", avx2_hash[32] = "", avx512_hash[32] = "";
    bool hash_differs = false;
    for (size_t i = 0; i < n; i++) {
        struct family_run *r = &runs[i];
        char core[40], isa[16], b1[16], b2[16], o1[16], o2[16], o3[16], hash[32], tb[16];
        char twins[32];
        if (strcmp(r->status, "ran") != 0 && strcmp(r->status, "FAILED") != 0) {
            printf("%-4s %-15s %s: %s\n", r->kind, r->name, r->status, r->note);
            continue;
        }
        ran++;
        bool ok = r->exit_code == 0;
        failed += !ok;
        const char *gemm = strstr(r->out, "CLAIM gemm PASS") ? "ok" : "FAIL";
        const char *inv = strstr(r->out, "CLAIM invariant PASS") ? "bitwise" : "FAIL";
        const char *iso = strstr(r->out, "CLAIM prop.isolation PASS") &&
                                  strstr(r->out, "CLAIM prop.isolation-tolerance PASS") &&
                                  strstr(r->out, "CLAIM prop.isolation-blackbox PASS")
                              ? "pass"
                              : "FAIL";
        snprintf(twins, sizeof twins, "%s/%s",
                 strstr(r->out, "CLAIM twins PASS") ? "exact" : "FAIL",
                 fig(r, "twins_blas", tb, sizeof tb));
        fig(r, "inv_hash", hash, sizeof hash);
        if (strcmp(r->kind, "isa") == 0 && strcmp(r->name, "avx2") == 0) {
            snprintf(avx2_hash, sizeof avx2_hash, "%s", hash);
        } else if (strcmp(r->kind, "isa") == 0 && strcmp(r->name, "avx512") == 0) {
            snprintf(avx512_hash, sizeof avx512_hash, "%s", hash);
        }
        if (strcmp(r->kind, "blas") == 0 && strcmp(hash, "-") != 0) {
            if (ref_hash[0] == '\0') {
                snprintf(ref_hash, sizeof ref_hash, "%s", hash);
            } else if (strcmp(ref_hash, hash) != 0) {
                hash_differs = true;
            }
        }
        printf("%-4s %-15s %-11s %-7s %-6s %-9s %-9s %-10s %-10s %-10s %-10s %-10s %-8s  %s\n",
               r->kind, r->name, fig(r, "core", core, sizeof core), fig(r, "isa", isa, sizeof isa),
               gemm, inv, iso, fig(r, "blas_batch_diff", b1, sizeof b1),
               fig(r, "blas_thread_diff", b2, sizeof b2), fig(r, "oracle_own", o1, sizeof o1),
               fig(r, "oracle_default", o2, sizeof o2), fig(r, "oracle_blas", o3, sizeof o3),
               twins, ok ? "PASS" : r->exit_code < 0 ? "CRASHED" : "FAIL");
    }
    printf("\ninvariant logits under every OpenBLAS family: %s\n",
           hash_differs ? "DIFFER (the invariant path depends on OpenBLAS)" : "the same bits");
    /* avx2 and avx512 fuse every multiply-add of the same chains and share
     * the x86-64-v3 attention: the same bits, so invariant results agree
     * between any two x86 machines with AVX2 and FMA, Intel or AMD. */
    bool isa_differs = avx2_hash[0] != '\0' && avx512_hash[0] != '\0' &&
                       strcmp(avx2_hash, avx512_hash) != 0;
    if (avx2_hash[0] != '\0' && avx512_hash[0] != '\0') {
        printf("invariant logits with isa=avx2 and isa=avx512: %s\n",
               isa_differs ? "DIFFER" : "the same bits");
    }
    hash_differs = hash_differs || isa_differs;
    printf("tie tolerance %g; a margin of 10 or more is required of every |engine - oracle| "
           "(|e-o|); blas-batch and blas-thread: the OpenBLAS path's largest logit difference "
           "alone vs among neighbours and threads 2 vs 1 (tolerance %g); twins: mini-twins' "
           "tied logits on the own product (claimed), then how many differ on the OpenBLAS "
           "path (printed)\n",
           ASSAY_EQUIV_TIE_TOL, ASSAY_ISOLATION_LOGIT_TOL);
    for (size_t i = 0; i < n; i++) {
        struct family_run *r = &runs[i];
        if (strcmp(r->status, "FAILED") != 0) {
            continue;
        }
        printf("\n%s %s failed (exit %d):\n", r->kind, r->name, r->exit_code);
        for (const char *p = r->out; *p != '\0';) {
            size_t len = strcspn(p, "\n");
            char line[1024];
            snprintf(line, sizeof line, "%.*s", (int)len, p);
            if (strncmp(line, "CLAIM ", 6) == 0 && strstr(line, " FAIL ") != NULL) {
                printf("  %.*s\n", (int)len, p);
            } else if (strncmp(p, "    ", 4) == 0) {
                printf("  %.*s\n", (int)len, p);
            }
            p += len + (p[len] == '\n');
        }
    }
    fflush(stdout);
    free(runs);
    /* The instruction-set children run under the kernel OpenBLAS picks by
     * itself (or the one the environment forces), so that kernel is always
     * tried; on a machine whose OpenBLAS forces no family (another
     * architecture, a build for one CPU) it is the only one. */
    assert_true(ran >= 1);
    if (g_mutant[0]) {
        if (failed == 0 && !hash_differs) {
            fail_msg("planted bug %s was not caught under any kernel family", g_mutant);
        }
        printf("planted bug %s CAUGHT under %d families\n", g_mutant, failed);
        return;
    }
    if (failed > 0 || hash_differs) {
        fail_msg("%d families broke a claim%s", failed,
                 hash_differs ? "; the invariant logits differ between families that must agree"
                              : "");
    }
}

int main(int argc, char **argv)
{
    int a = 1;
    if (a + 1 < argc && strcmp(argv[a], "--mutant") == 0) {
        g_mutant = argv[a + 1];
        a += 2;
    }
    if (a < argc && strcmp(argv[a], "--probe") == 0) {
        return probe_main();
    }
    if (a + 2 < argc && strcmp(argv[a], "--child") == 0) {
        return child_main(argv[a + 1], argv[a + 2]);
    }
    if (a != argc) {
        fprintf(stderr, "usage: test_portability [--mutant NAME]\n");
        return 2;
    }
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_family)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
