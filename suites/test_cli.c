/*
 * test_cli - the assay command's own behaviour, through the built binary:
 * what a user sees around the checks rather than the checks themselves.
 *
 *   test_cli ASSAY_BINARY PLUGIN_MODULE
 *
 * (PLUGIN_MODULE: suites/plugin_fixture.c built as a correct engine, which
 * offers none of the capabilities most checks need, so most of the plan
 * is skipped on it.) Each test runs the command through /bin/sh with its
 * stdout and stderr kept apart, and asserts what the user reads: one line
 * for a mistyped option, the version, the same --arrival kinds for bench
 * and compare, and so on. The messages themselves (exit status 2, which
 * file, which field) are the bad-input corpus's (test_bad_inputs); these
 * are the behaviours a single message cannot show.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reports/report.h"
#include "reports/schema.h"
#include "support.h"

static const char *g_assay = "assay";
static const char *g_plugin = "";

#define OUT_SIZE (1 << 20)

/* What a command did: its exit status (-1: killed, the signal in sig),
 * its stdout and its stderr. */
struct run {
    int status;
    int sig;
    char *out;
    char *err;
};

static char *slurp(const char *path)
{
    char *buf = calloc(1, OUT_SIZE);
    assert_non_null(buf);
    FILE *f = fopen(path, "rb");
    if (f != NULL) {
        size_t n = fread(buf, 1, OUT_SIZE - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/* Run `sh -c cmd` from dir (NULL: here), stdout and stderr kept apart. */
static struct run run_in(const char *dir, const char *cmd)
{
    char scratch[1024], out_path[1100], err_path[1100];
    assay_test_scratch("cli-output", scratch, sizeof scratch);
    mkdir(scratch, 0755);
    snprintf(out_path, sizeof out_path, "%s/stdout", scratch);
    snprintf(err_path, sizeof err_path, "%s/stderr", scratch);
    size_t size = strlen(cmd) + 3 * sizeof scratch;
    char *full = malloc(size);
    assert_non_null(full);
    snprintf(full, size, "%s%s%s(%s) >'%s' 2>'%s' </dev/null", dir != NULL ? "cd '" : "",
             dir != NULL ? dir : "", dir != NULL ? "' && " : "", cmd, out_path, err_path);
    printf("$ %s\n", cmd);
    int st = system(full);
    free(full);
    struct run r = {-1, 0, slurp(out_path), slurp(err_path)};
    if (WIFEXITED(st)) {
        r.status = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
        r.sig = WTERMSIG(st);
    }
    return r;
}

static struct run run(const char *cmd)
{
    return run_in(NULL, cmd);
}

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s != '\0'; s++) {
        n += *s == '\n';
    }
    return n;
}

static void expect_in(const char *where, const char *text, const char *want)
{
    if (strstr(text, want) == NULL) {
        fail_msg("%s does not say \"%s\"; it says:\n%s", where, want, text);
    }
}

/* A fresh scratch folder (its path in buf). */
static const char *fresh_dir(const char *name, char *buf, size_t size)
{
    assay_test_scratch(name, buf, size);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", buf, buf);
    assert_int_equal(system(cmd), 0);
    return buf;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* DIR/report.json, read and checked against the schema. */
static cJSON *load_report(const char *dir)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/report.json", dir);
    cJSON *r = NULL;
    struct assay_diag d;
    if (assay_report_load(path, &r, &d) != ASSAY_OK) {
        char why[900];
        fail_msg("%s: %s", path, assay_diag_format(&d, why, sizeof why));
    }
    return r;
}

/* ---- options ------------------------------------------------------------- */

/* A mistyped option gets one line on stderr that names it and points to
 * --help, not the whole usage; nothing on stdout. So does an option left
 * without its value, and an unknown command. */
static void test_unknown_option_one_line(void **state)
{
    (void)state;
    static const char *const commands[] = {"run", "verify", "bench", "report",
                                           "audit", "compare", "mutants"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char cmd[1200], want[200];
        snprintf(cmd, sizeof cmd, "'%s' %s --bogus-flag", g_assay, commands[i]);
        struct run r = run(cmd);
        assert_int_equal(r.status, 2);
        snprintf(want, sizeof want,
                 "assay %s: unknown option '--bogus-flag' (assay %s --help lists the options)\n",
                 commands[i], commands[i]);
        assert_string_equal(r.err, want);
        assert_string_equal(r.out, "");
        run_free(&r);
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' verify --engine", g_assay);
    struct run r = run(cmd);
    assert_int_equal(r.status, 2);
    assert_int_equal(count_lines(r.err), 1);
    expect_in("stderr", r.err, "option '--engine' needs a value (assay verify --help)");
    run_free(&r);
    snprintf(cmd, sizeof cmd, "'%s' frobnicate", g_assay);
    r = run(cmd);
    assert_int_equal(r.status, 2);
    assert_string_equal(r.err, "assay: unknown command 'frobnicate' (assay --help lists the commands)\n");
    run_free(&r);
}

/* The kill matrix's selections are refused before anything runs: a
 * selection without --matrix, a number of seeds out of range. */
static void test_mutants_matrix_options(void **state)
{
    (void)state;
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"--fuzz-seeds 3", "--fuzz-seeds and --out go with --matrix"},
        {"--check equiv.fuzz", "--check, --fuzz-seeds and --out go with --matrix"},
        {"--matrix --fuzz-seeds 0", "--fuzz-seeds expects a number of seeds in 1..1000, got '0'"},
        {"--matrix --fuzz-seeds 2x", "got '2x'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "'%s' mutants %s", g_assay, cases[i].args);
        struct run r = run(cmd);
        assert_int_equal(r.status, 2);
        expect_in("stderr", r.err, cases[i].want);
        assert_string_equal(r.out, "");
        run_free(&r);
    }
}

/* `assay --version` and `assay version`: the version and the content hash
 * of the sources, the same that the stamp of a report this binary writes
 * carries. */
static void test_version(void **state)
{
    (void)state;
    char dir[1024], cmd[2400];
    assay_test_scratch("cli-version", dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && '%s' bench --engine bundled:model=mini --workload "
             "workloads/compare-speed.json --runs 1 --out '%s'",
             dir, g_assay, dir);
    struct run b = run(cmd);
    assert_int_equal(b.status, 0);
    run_free(&b);
    cJSON *report = load_report(dir);
    static const char *const spellings[] = {"--version", "version"};
    for (int i = 0; i < 2; i++) {
        char want[200];
        snprintf(cmd, sizeof cmd, "'%s' %s", g_assay, spellings[i]);
        struct run r = run(cmd);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        snprintf(want, sizeof want, "assay %s\n", assay_json_str(report, "stamp.assay.version", "?"));
        assert_true(strncmp(r.out, want, strlen(want)) == 0);
        snprintf(want, sizeof want, "sources sha256 %s (%g files)\n",
                 assay_json_str(report, "stamp.assay.source_sha256", "?"),
                 assay_json_num(report, "stamp.assay.source_files"));
        expect_in("--version", r.out, want);
        snprintf(want, sizeof want, "\ncommit %s",
                 assay_json_str(report, "stamp.assay.git_commit", "?"));
        expect_in("--version", r.out, want);
        run_free(&r);
    }
    cJSON_Delete(report);
}

/* ---- bench and compare read --arrival alike ------------------------------ */

/* Every arrival kind bench takes, compare takes: both read it through one
 * parser, so a bad engine spec after it is what each complains about.
 * And compare runs a trace: the workload's own arrival times. */
/* `verify --list --family F` lists F's checks and no other; an unknown
 * family is a usage error. */
static void test_list_by_family(void **state)
{
    (void)state;
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "'%s' verify --list --family seeded", g_assay);
    struct run r = run(cmd);
    assert_int_equal(r.status, 0);
    int rows = 0;
    for (const char *p = strchr(r.out, '\n'); p != NULL && p[1] != '\0'; p = strchr(p + 1, '\n')) {
        char name[64], family[32];
        assert_int_equal(sscanf(p + 1, "%63s %31s", name, family), 2);
        if (strcmp(family, "seeded") != 0) {
            fail_msg("verify --list --family seeded listed %s (%s)", name, family);
        }
        rows++;
    }
    assert_true(rows >= 2);
    run_free(&r);
    snprintf(cmd, sizeof cmd, "'%s' verify --list --family nonsense", g_assay);
    r = run(cmd);
    assert_int_equal(r.status, 2);
    expect_in("stderr", r.err, "--family expects");
    run_free(&r);
}

/* Weights the engine spec names that cannot be loaded stop verify before
 * any check runs (a usage error naming the file), the model's and the
 * draft's alike, rather than a run of checks that each end in ERROR. */
static void test_missing_weights_stop_verify(void **state)
{
    (void)state;
    static const char *const specs[] = {"bundled:model=missing.gguf",
                                        "bundled:model=mini,draft=missing-draft.gguf"};
    for (int i = 0; i < 2; i++) {
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "'%s' verify --engine %s", g_assay, specs[i]);
        struct run r = run(cmd);
        assert_int_equal(r.status, 2);
        expect_in("stderr", r.err, "assay verify: --engine: missing");
        expect_in("stderr", r.err, "expected a readable file");
        assert_null(strstr(r.out, "PASS"));
        assert_null(strstr(r.err, "[1/"));
        run_free(&r);
    }
}

static void test_arrival_kinds(void **state)
{
    (void)state;
    static const char *const kinds[] = {"poisson", "gamma", "constant", "trace"};
    for (int i = 0; i < 4; i++) {
        const char *rate = strcmp(kinds[i], "trace") == 0 ? "" : " --rate 5";
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "'%s' bench --engine bundled:nope=1 --arrival %s%s", g_assay,
                 kinds[i], rate);
        struct run b = run(cmd);
        snprintf(cmd, sizeof cmd, "'%s' compare bundled:nope=1 bundled --arrival %s%s", g_assay,
                 kinds[i], rate);
        struct run c = run(cmd);
        assert_int_equal(b.status, 2);
        assert_int_equal(c.status, 2);
        expect_in("bench's stderr", b.err, "assay bench: --engine: engine spec: nope");
        expect_in("compare's stderr", c.err, "assay compare: BASELINE: engine spec: nope");
        run_free(&b);
        run_free(&c);
    }
    char dir[1024], cmd[2400];
    assay_test_scratch("cli-compare-trace", dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && '%s' compare bundled:model=mini bundled:model=mini --no-checks "
             "--workload workloads/compare-speed.json --arrival trace --pairs 2 --out '%s'",
             dir, g_assay, dir);
    struct run r = run(cmd);
    /* 0, or 3 when the noise of a busy machine reads as a regression
     * between the two identical engines: the speed verdict is not what
     * this test is about, the arrival each bench ran is. */
    if (r.status != 0 && r.status != 3) {
        print_message("compare exited %d: %s\n", r.status, r.err);
    }
    assert_true(r.status == 0 || r.status == 3);
    cJSON *report = load_report(dir);
    assert_string_equal(assay_json_str(report, "compare.speed.baseline_bench.generator.arrival", ""),
                        "trace");
    assert_string_equal(assay_json_str(report, "compare.speed.candidate_bench.generator.arrival", ""),
                        "trace");
    cJSON_Delete(report);
    run_free(&r);
}

/* ---- a run mostly skipped, and --require-checks ----------------------------- */

/* On the plugin engine the property family runs 2 of its 7 checks: the
 * counts line says so, and --require-checks N or P% turns too few into
 * exit status 4, with one line saying why; the report records it and
 * `assay report` ends with the same status. */
static void test_require_checks(void **state)
{
    (void)state;
    char cmd[2400];
    /* the property family's size, from the plan: the plugin runs 2 */
    snprintf(cmd, sizeof cmd, "'%s' verify --list --family property", g_assay);
    struct run r = run(cmd);
    assert_int_equal(r.status, 0);
    int n = -1; /* lines after the header */
    for (const char *p = r.out; *p != '\0'; p++) {
        n += *p == '\n';
    }
    run_free(&r);
    assert_true(n >= 3);
    snprintf(cmd, sizeof cmd, "'%s' verify --engine 'plugin:%s' --family property", g_assay,
             g_plugin);
    r = run(cmd);
    assert_int_equal(r.status, 0);
    char line[200];
    snprintf(line, sizeof line,
             "\n%d checks: 2 passed, 0 failed, %d skipped, 0 could not run; MOSTLY SKIPPED: only "
             "2 of the %d checks ran\n",
             n, n - 2, n);
    expect_in("stdout", r.out, line);
    run_free(&r);
    /* percentages that need 3 checks and 2 of the n: the largest p with
     * ceil(p n / 100) = 3, and with 2 */
    char p3[16], p2[16];
    snprintf(p3, sizeof p3, "%d%%", 300 / n);
    snprintf(p2, sizeof p2, "%d%%", 200 / n);
    const struct {
        const char *require;
        int status;
    } cases[] = {{"3", 4}, {"2", 0}, {p3, 4}, {p2, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' verify --engine 'plugin:%s' --family property "
                 "--require-checks %s", g_assay, g_plugin, cases[i].require);
        r = run(cmd);
        assert_int_equal(r.status, cases[i].status);
        if (cases[i].status == 4) {
            char want[200];
            snprintf(want, sizeof want,
                     "assay verify: only 2 of the %d checks ran (PASS or FAIL), fewer than the 3 "
                     "that --require-checks %s asks for: exit status 4\n",
                     n, cases[i].require);
            /* the last line on stderr, after each check's verdict */
            size_t n_err = strlen(r.err), n_want = strlen(want);
            assert_true(n_err >= n_want);
            assert_string_equal(r.err + n_err - n_want, want);
        }
        run_free(&r);
    }
    char dir[1024];
    fresh_dir("cli-require", dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "'%s' run --engine 'plugin:%s' --no-bench --family property "
             "--require-checks 3 --out '%s/out'", g_assay, g_plugin, dir);
    r = run(cmd);
    assert_int_equal(r.status, 4);
    run_free(&r);
    char out[1100];
    snprintf(out, sizeof out, "%s/out", dir);
    cJSON *report = load_report(out);
    assert_int_equal((int)assay_json_num(report, "exit_status"), 4);
    assert_int_equal(assay_json_bool(report, "require_checks.met"), 0);
    assert_int_equal((int)assay_json_num(report, "require_checks.needed"), 3);
    cJSON_Delete(report);
    snprintf(cmd, sizeof cmd, "'%s' report '%s/out/report.json' --out '%s/again'", g_assay, dir,
             dir);
    r = run(cmd);
    assert_int_equal(r.status, 4);
    expect_in("stdout", r.out, "PASS, TOO FEW CHECKS RAN (exit status 4)");
    run_free(&r);
    /* compare counts its correctness checks alike: one ran of two asked. */
    snprintf(cmd, sizeof cmd, "'%s' compare bundled:model=mini bundled:model=mini --no-bench "
             "--check compare.greedy --require-checks 2 --out '%s/compare'", g_assay, dir);
    r = run(cmd);
    assert_int_equal(r.status, 4);
    expect_in("stderr", r.err, "assay compare: only 1 of the 1 checks ran");
    run_free(&r);
}

/* A benchmark whose runs cannot complete (a 1 ms limit) ends with status
 * 2, writes its report all the same, and `assay report` of it ends with 2
 * again: the report records it. */
static void test_report_keeps_bench_status(void **state)
{
    (void)state;
    char dir[1024], cmd[2400];
    fresh_dir("cli-bench-status", dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "'%s' bench --engine bundled:model=mini --workload workloads/compare-speed.json "
             "--runs 1 --timeout 0.001 --out '%s/out'",
             g_assay, dir);
    struct run r = run(cmd);
    assert_int_equal(r.status, 2);
    run_free(&r);
    char out[1100];
    snprintf(out, sizeof out, "%s/out", dir);
    cJSON *report = load_report(out);
    assert_int_equal((int)assay_json_num(report, "exit_status"), 2);
    cJSON_Delete(report);
    snprintf(cmd, sizeof cmd, "'%s' report '%s/out/report.json' --out '%s/again'", g_assay, dir,
             dir);
    r = run(cmd);
    assert_int_equal(r.status, 2);
    run_free(&r);
}

/* The table on the terminal: the failure first, and the SKIPs that share a
 * reason in one entry, so that 36 skips do not bury it. */
static void test_failures_before_skips(void **state)
{
    (void)state;
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "'%s' verify --engine 'plugin:%s'", g_assay, g_plugin);
    struct run r = run(cmd);
    assert_int_equal(r.status, 1); /* seed.positions fails on the plugin's seeds */
    const char *fail = strstr(r.out, "\nseed.positions ");
    const char *skip = strstr(r.out, " SKIP ");
    assert_non_null(fail);
    assert_non_null(skip);
    assert_true(fail < skip);
    /* The skipped checks grouped by reason: a line "N checks, named
     * below" per reason, N counted from the plan, not written here. */
    expect_in("stdout", r.out, " checks, named below");
    int n_skipped_lines = 0;
    for (const char *p = strstr(r.out, "skipped: "); p != NULL; p = strstr(p + 1, "skipped: ")) {
        n_skipped_lines++;
    }
    snprintf(cmd, sizeof cmd, "'%s' verify --list", g_assay);
    struct run list = run(cmd);
    assert_int_equal(list.status, 0);
    int n_plan = 0;
    for (const char *p = list.out; *p != '\0'; p = strchr(p, '\n') + 1) {
        n_plan += islower((unsigned char)p[0]) && strchr(p, '.') < strchr(p, ' ');
        if (strchr(p, '\n') == NULL) {
            break;
        }
    }
    run_free(&list);
    printf("%d lines of reasons for %d skipped checks of %d\n", n_skipped_lines, n_plan - 3,
           n_plan);
    assert_true(n_plan > 3);
    assert_true(n_skipped_lines <= 8);
    char want[96];
    snprintf(want, sizeof want, "%d checks: 2 passed, 1 failed, %d skipped", n_plan, n_plan - 3);
    expect_in("stdout", r.out, want);
    snprintf(want, sizeof want, "MOSTLY SKIPPED: only 3 of the %d checks ran", n_plan);
    expect_in("stdout", r.out, want);
    run_free(&r);
}

/* ---- progress, without a terminal --------------------------------------------- */

/* Each verdict is on stderr as its check ends, terminal or not: the first
 * check's line is read while the second, prop.soak (2000 requests), is
 * still running (stopping the command then finds it alive), and at the end
 * there is one line per check, in order, with its verdict. */
static void test_verdicts_as_they_come(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        execl(g_assay, g_assay, "verify", "--check", "prop.trace", "--check", "prop.soak",
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *err = fdopen(fds[0], "r");
    assert_non_null(err);
    char line[512];
    assert_non_null(fgets(line, sizeof line, err));
    printf("first line: %s", line);
    assert_true(strncmp(line, "assay verify: [1/2] prop.trace ", 31) == 0);
    expect_in("the first line", line, " PASS ");
    /* The command is still at its second check: it stops, not exits. */
    assert_int_equal(kill(pid, SIGSTOP), 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
    assert_true(WIFSTOPPED(st));
    assert_int_equal(kill(pid, SIGCONT), 0);
    assert_non_null(fgets(line, sizeof line, err));
    printf("second line: %s", line);
    assert_true(strncmp(line, "assay verify: [2/2] prop.soak ", 30) == 0);
    assert_null(fgets(line, sizeof line, err)); /* nothing else on stderr */
    fclose(err);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* compare and bench say which pair or run of their speed measurement they
 * have done, terminal or not. */
static void test_pairs_and_runs_counted(void **state)
{
    (void)state;
    char dir[1024], cmd[2400];
    fresh_dir("cli-pairs", dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "'%s' compare bundled:model=mini 'bundled:model=mini,kv=off' --no-checks --workload "
             "workloads/compare-speed.json --pairs 3 --out '%s/compare'",
             g_assay, dir);
    struct run r = run(cmd);
    assert_true(r.status == 0 || r.status == 3);
    for (int i = 1; i <= 3; i++) {
        char want[80];
        snprintf(want, sizeof want, "assay compare: speed: 3 interleaved pairs of runs: pair %d of 3: ",
                 i);
        expect_in("compare's stderr", r.err, want);
    }
    run_free(&r);
    snprintf(cmd, sizeof cmd,
             "'%s' bench --engine bundled:model=mini --workload workloads/compare-speed.json "
             "--runs 2",
             g_assay);
    r = run(cmd);
    assert_int_equal(r.status, 0);
    expect_in("bench's stderr", r.err, "assay bench: benchmark: open loop: run 1 of 2: ");
    expect_in("bench's stderr", r.err, "assay bench: benchmark: open loop: run 2 of 2: ");
    run_free(&r);
}

/* ---- output folders ---------------------------------------------------------- */

/* A command that fails after making its output folder (here an audit whose
 * model is refused once --out exists) leaves no empty folder behind, nor
 * the parents it made; a folder that was there before stays. */
static void test_failed_run_leaves_no_folder(void **state)
{
    (void)state;
    char dir[1024], cmd[2400], path[1200];
    fresh_dir("cli-no-folder", dir, sizeof dir);
    snprintf(cmd, sizeof cmd,
             "'%s' audit --url http://127.0.0.1:9 --model /nonexistent/model.gguf; "
             "'%s' audit --url http://127.0.0.1:9 --model /nonexistent/model.gguf --out a/b/c",
             g_assay, g_assay);
    struct run r = run_in(dir, cmd);
    assert_int_equal(r.status, 2);
    expect_in("stderr", r.err, "assay audit: --model: /nonexistent/model.gguf");
    run_free(&r);
    snprintf(path, sizeof path, "%s/assay-audit", dir);
    assert_false(exists(path));
    snprintf(path, sizeof path, "%s/a", dir);
    assert_false(exists(path));
    snprintf(path, sizeof path, "%s/mine", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(cmd, sizeof cmd,
             "'%s' audit --url http://127.0.0.1:9 --model /nonexistent/model.gguf --out mine",
             g_assay);
    r = run_in(dir, cmd);
    assert_int_equal(r.status, 2);
    run_free(&r);
    assert_true(exists(path));
}

/* Whether text holds needle exactly n times. */
static void expect_count(const char *text, const char *needle, int n)
{
    int k = 0;
    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle)) {
        k++;
    }
    if (k != n) {
        fail_msg("'%s' %d times, not %d, in:\n%s", needle, k, n, text);
    }
}

/* Start `assay ARGS...` in a process group of its own, stdout to
 * /dev/null and stderr to err_path; wait until `ready` exists (a file, or
 * err_path holding the text ready_text), then a little more, and send
 * SIGINT to the group, as a terminal's Ctrl-C does. Returns the wait
 * status. */
static int interrupt_after(char *const args[], const char *err_path, const char *ready,
                           const char *ready_text)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        int devnull = open("/dev/null", O_WRONLY);
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(devnull, STDOUT_FILENO);
        dup2(err, STDERR_FILENO);
        execv(g_assay, args);
        _exit(127);
    }
    setpgid(pid, pid);
    bool started = false;
    for (int i = 0; i < 3000 && !started; i++) {
        usleep(10000);
        if (ready != NULL) {
            started = exists(ready);
        } else {
            char *text = slurp(err_path);
            started = strstr(text, ready_text) != NULL;
            free(text);
        }
    }
    assert_true(started);
    usleep(500000);
    assert_int_equal(kill(-pid, SIGINT), 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    printf("%s ended %s %d\n", args[1], WIFSIGNALED(st) ? "by signal" : "with status",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return st;
}

/* Ctrl-C in the middle of the checks (SIGINT to the command's process
 * group, as a terminal sends it): the command says, once, that it was
 * interrupted and that nothing of the run stands, dies of the signal, and
 * the output folder it made and had not written into is gone; a command
 * without an output folder says so too. */
static void test_interrupted_run_leaves_no_folder(void **state)
{
    (void)state;
    char dir[1024], out[1200], err[1200];
    fresh_dir("cli-interrupted", dir, sizeof dir);
    snprintf(out, sizeof out, "%s/report", dir);
    snprintf(err, sizeof err, "%s/stderr.txt", dir);
    char *run_args[] = {(char *)g_assay, "run",   "--no-bench", "--family",
                        "equivalence",   "--out", out,          NULL};
    int st = interrupt_after(run_args, err, out, NULL);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT);
    assert_false(exists(out));
    static const char said[] =
        "interrupted by SIGINT before it finished: no verdict and no report from this run\n";
    char *text = slurp(err);
    expect_count(text, "assay run: interrupted by SIGINT", 1);
    assert_non_null(strstr(text, said));
    free(text);

    char *verify_args[] = {(char *)g_assay, "verify", "--family", "equivalence", NULL};
    st = interrupt_after(verify_args, err, NULL, "[2/");
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT);
    text = slurp(err);
    expect_count(text, "assay verify: interrupted by SIGINT", 1);
    assert_non_null(strstr(text, said));
    free(text);
}

/* Every folder a command writes by default (the "(default assay-...)" of
 * --out and --repro-dir in each --help) is in .gitignore, so a run in a
 * clone leaves git status clean. */
static void test_default_folders_ignored(void **state)
{
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s/../.gitignore", getenv("ASSAY_FIXTURES"));
    char *ignore = slurp(path);
    assert_true(ignore[0] != '\0');
    static const char *const commands[] = {"run", "verify", "bench", "audit", "compare",
                                           "report", "mutants"};
    int n_found = 0;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "'%s' %s --help", g_assay, commands[i]);
        struct run r = run(cmd);
        assert_int_equal(r.status, 0);
        /* The help wraps its lines: read it as one line of words. */
        char *flat = r.out;
        size_t k = 0;
        for (size_t j = 0; flat[j] != '\0'; j++) {
            bool space = isspace((unsigned char)flat[j]);
            if (!space || (k > 0 && flat[k - 1] != ' ')) {
                flat[k++] = space ? ' ' : flat[j];
            }
        }
        flat[k] = '\0';
        for (const char *p = strstr(flat, "(default assay-"); p != NULL;
             p = strstr(p + 1, "(default assay-")) {
            char name[64], want[80];
            int len = (int)strcspn(p + 9, ") ,;");
            snprintf(name, sizeof name, "%.*s", len, p + 9);
            snprintf(want, sizeof want, "\n/%s/\n", name);
            printf("assay %s writes %s/ by default\n", commands[i], name);
            if (strstr(ignore, want) == NULL) {
                fail_msg(".gitignore has no line /%s/ (assay %s writes it by default)", name,
                         commands[i]);
            }
            n_found++;
        }
        run_free(&r);
    }
    assert_true(n_found >= 4); /* assay-report, -repro, -audit, -compare */
    free(ignore);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc < 3) {
        fprintf(stderr, "usage: test_cli ASSAY_BINARY PLUGIN_MODULE\n");
        return 2;
    }
    g_assay = argv[1];
    g_plugin = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_option_one_line),
        cmocka_unit_test(test_mutants_matrix_options),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_list_by_family),
        cmocka_unit_test(test_missing_weights_stop_verify),
        cmocka_unit_test(test_arrival_kinds),
        cmocka_unit_test(test_require_checks),
        cmocka_unit_test(test_failures_before_skips),
        cmocka_unit_test(test_report_keeps_bench_status),
        cmocka_unit_test(test_verdicts_as_they_come),
        cmocka_unit_test(test_pairs_and_runs_counted),
        cmocka_unit_test(test_failed_run_leaves_no_folder),
        cmocka_unit_test(test_interrupted_run_leaves_no_folder),
        cmocka_unit_test(test_default_folders_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
