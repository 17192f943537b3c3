/*
 * test_server_faults - the assay command against a misbehaving HTTP server,
 * end to end: failed requests are counted as failed in the report (through
 * the benchmark and through the checks), never dropped, nothing hangs, and
 * the API key never shows.
 *
 *   test_server_faults ASSAY_BINARY
 *
 * The server is suites/fake_server.c on 127.0.0.1, started and stopped by
 * this program; the first prompt token of each request chooses how it
 * misbehaves: HTTP 500 and 429, a connection closed mid-stream, malformed
 * server-sent events, a stall past the timeout, tokens after "[DONE]", an
 * error event that echoes the Authorization header. A port nobody listens
 * on stands for a server that refuses connections. Each `assay` runs as a
 * child process with ASSAY_API_KEY set; the test reads its exit status,
 * its output and the report it writes, and greps all of them for the key.
 * unit tests of the adapter itself are in test_openai.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_server.h"
#include "support.h"

static const char *g_assay = "assay";
static struct fake_server *g_srv;
static char g_dir[1024];
static const char k_key[] = "sk-assay-cli-7hQ2vXz9-secret";

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    if (len != NULL) {
        *len = got;
    }
    return buf;
}

/* Run `assay ARGS` with ASSAY_API_KEY set; its exit status (-1 for a
 * signal), its stdout+stderr in *out (free), its wall time in *seconds. */
static int run_assay(const char *args, char **out, double *seconds)
{
    char log[1200], cmd[4096];
    snprintf(log, sizeof log, "%s/output.txt", g_dir);
    snprintf(cmd, sizeof cmd, "cd '%s' && exec '%s' %s >'%s' 2>&1 </dev/null", g_dir, g_assay,
             args, log);
    setenv("ASSAY_API_KEY", k_key, 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = system(cmd);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    unsetenv("ASSAY_API_KEY");
    *seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    *out = slurp(log, NULL);
    assert_non_null(*out);
    printf("$ assay %s\n%s", args, *out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void assert_no_key(const char *what, const char *text)
{
    if (text != NULL && (strstr(text, k_key) != NULL || strstr(text, "7hQ2vXz9") != NULL)) {
        fail_msg("the API key appears in %s", what);
    }
}

/* Every file of the report directory: present, and without the key. */
static int check_report_files(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *text = slurp(path, NULL);
        assert_non_null(text);
        assert_no_key(path, text);
        free(text);
        n++;
    }
    closedir(d);
    return n;
}

/* A workload whose request i has first prompt token modes[i]. */
static void write_workload(const char *path, const int *modes, int n, int max_tokens)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"format\": \"assay-workload\", \"version\": 1, \"name\": \"misbehaving\", "
               "\"requests\": [");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s{\"id\": %d, \"arrival_step\": %d, \"prompt\": [%d, %d, 7, %d], "
                   "\"max_tokens\": %d}",
                i == 0 ? "" : ", ", i + 1, i, modes[i], 40 + i, 100 + i, max_tokens);
    }
    fprintf(f, "]}\n");
    assert_int_equal(fclose(f), 0);
}

static cJSON *load_json(const char *path)
{
    char *text = slurp(path, NULL);
    if (text == NULL) {
        fail_msg("no %s", path);
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    assert_non_null(j);
    return j;
}

static double num_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b != NULL) {
        x = cJSON_GetObjectItemCaseSensitive(x, b);
    }
    if (!cJSON_IsNumber(x)) {
        fail_msg("no number at %s%s%s", a, b != NULL ? "." : "", b != NULL ? b : "");
    }
    return x->valuedouble;
}

/* ------------------------------------------------------------------ */
/* The benchmark                                                       */
/* ------------------------------------------------------------------ */

/* Misbehaving requests between well-behaved ones, through assay bench:
 * the run completes, and the report's outcomes count every request, the
 * failed ones as errors. */
static void bench_case(const char *api, const int *modes, int n, int n_bad)
{
    char wl[1200], out_dir[1200], args[3000];
    snprintf(wl, sizeof wl, "%s/misbehaving-%s.json", g_dir, api);
    snprintf(out_dir, sizeof out_dir, "%s/bench-%s", g_dir, api);
    write_workload(wl, modes, n, 5);
    snprintf(args, sizeof args,
             "bench --engine 'openai:http://127.0.0.1:%d,api=%s,vocab=%d,ctx=256,stall_ms=400' "
             "--workload '%s' --slo slo/interactive.json --mode closed --workers 4 --runs 2 "
             "--warmup 0 --out '%s'",
             fake_server_port(g_srv), api, FAKE_VOCAB, wl, out_dir);
    char *out = NULL;
    double s;
    int rc = run_assay(args, &out, &s);
    assert_no_key("the output of assay bench", out);
    free(out);
    printf("# bench api=%s: %d requests (%d misbehaving) x 2 runs in %.1f s, exit %d\n", api, n,
           n_bad, s, rc);
    assert_int_equal(rc, 0);
    assert_true(s < 60.0);
    assert_int_equal(check_report_files(out_dir), 3);
    char path[1400];
    snprintf(path, sizeof path, "%s/report.json", out_dir);
    cJSON *r = load_json(path);
    const cJSON *runs =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "benchmark"), "runs");
    assert_int_equal(cJSON_GetArraySize(runs), 2);
    const cJSON *run;
    cJSON_ArrayForEach(run, runs)
    {
        double ok = num_at(run, "outcomes", "ok"), err = num_at(run, "outcomes", "error");
        double total = ok + err + num_at(run, "outcomes", "rejected") +
                       num_at(run, "outcomes", "aborted") + num_at(run, "outcomes", "lost") +
                       num_at(run, "outcomes", "unsent");
        printf("#   run: %.0f ok, %.0f error, %.0f in all\n", ok, err, total);
        assert_true(num_at(run, "n_requests", NULL) == n);
        assert_true(total == n);          /* every request accounted for */
        assert_true(err == n_bad);        /* the misbehaving ones as errors */
        assert_true(ok == n - n_bad);
    }
    cJSON_Delete(r);
}

static void test_bench_counts_failures(void **state)
{
    (void)state;
    const int completion[] = {FAKE_OK,       FAKE_HTTP_500, FAKE_OK,         FAKE_HTTP_429,
                              FAKE_OK,       FAKE_CLOSE_CHUNKED, FAKE_OK,    FAKE_BAD_SSE,
                              FAKE_OK,       FAKE_STALL,    FAKE_OK,         FAKE_ERROR_EVENT,
                              FAKE_OK,       FAKE_ECHO_AUTH, FAKE_OK,        FAKE_CLOSE_EOF,
                              FAKE_OK};
    bench_case("completion", completion, 17, 8);
    const int v1[] = {FAKE_OK, FAKE_AFTER_DONE, FAKE_OK, FAKE_NO_DONE, FAKE_OK, FAKE_HTTP_500,
                      FAKE_OK};
    bench_case("v1", v1, 7, 3);
}

/* Nobody listening: every request fails at once, and is counted. */
static int closed_port(void);

static void test_bench_connection_refused(void **state)
{
    (void)state;
    int port = closed_port();
    const int modes[] = {FAKE_OK, FAKE_OK, FAKE_OK, FAKE_OK, FAKE_OK};
    char wl[1200], out_dir[1200], args[3000];
    snprintf(wl, sizeof wl, "%s/refused.json", g_dir);
    snprintf(out_dir, sizeof out_dir, "%s/bench-refused", g_dir);
    write_workload(wl, modes, 5, 4);
    snprintf(args, sizeof args,
             "bench --engine 'openai:http://127.0.0.1:%d,vocab=260,ctx=256' --workload '%s' "
             "--mode closed --workers 2 --runs 1 --warmup 0 --out '%s'",
             port, wl, out_dir);
    char *out = NULL;
    double s;
    int rc = run_assay(args, &out, &s);
    assert_no_key("the output of assay bench", out);
    free(out);
    printf("# refused: exit %d in %.2f s\n", rc, s);
    assert_int_equal(rc, 0);
    assert_true(s < 20.0);
    assert_int_equal(check_report_files(out_dir), 3);
    char path[1400];
    snprintf(path, sizeof path, "%s/report.json", out_dir);
    cJSON *r = load_json(path);
    const cJSON *run = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "benchmark"), "runs"),
        0);
    assert_true(num_at(run, "outcomes", "error") == 5);
    assert_true(num_at(run, "outcomes", "ok") == 0);
    cJSON_Delete(r);
}

/* ------------------------------------------------------------------ */
/* The checks                                                          */
/* ------------------------------------------------------------------ */

/* A port on 127.0.0.1 that nobody listens on. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &alen), 0);
    close(fd);
    return ntohs(addr.sin_port);
}

/* Through assay verify (the trace check on the server's output) and assay
 * run (the same check into a report): the failed requests are counted and
 * fail the check, the run ends, and nothing shows the key. */
static void test_checks_count_failures(void **state)
{
    (void)state;
    const int modes[] = {FAKE_OK, FAKE_HTTP_500, FAKE_OK, FAKE_CLOSE_CHUNKED, FAKE_OK, FAKE_STALL,
                         FAKE_OK, FAKE_ERROR_EVENT, FAKE_OK};
    char wl[1200], out_dir[1200], args[3000];
    snprintf(wl, sizeof wl, "%s/check-trace.json", g_dir);
    snprintf(out_dir, sizeof out_dir, "%s/run-refused", g_dir);
    write_workload(wl, modes, 9, 5);
    char *out = NULL;
    double s;
    snprintf(args, sizeof args,
             "verify --engine 'openai:http://127.0.0.1:%d,vocab=260,ctx=256,stall_ms=400' "
             "--check prop.trace --workload '%s'",
             fake_server_port(g_srv), wl);
    int rc = run_assay(args, &out, &s);
    assert_no_key("the output of assay verify", out);
    printf("# verify prop.trace: exit %d in %.1f s\n", rc, s);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "9 requests in"));
    assert_non_null(strstr(out, "finished: 5 length, 0 stop, 0 abort, 4 error"));
    assert_non_null(strstr(out, "request 2 finished with an error"));
    free(out);
    assert_true(s < 60.0);
    /* A server that refuses every connection, through assay run and its
     * report: the check fails and says why, and the report holds it. */
    snprintf(args, sizeof args,
             "run --engine 'openai:http://127.0.0.1:%d,vocab=260,ctx=256' --check prop.trace "
             "--no-bench --out '%s'",
             closed_port(), out_dir);
    rc = run_assay(args, &out, &s);
    assert_no_key("the output of assay run", out);
    free(out);
    printf("# run --check prop.trace, connection refused: exit %d in %.1f s\n", rc, s);
    assert_int_equal(rc, 1);
    /* report.json, .html, .md and the failure's shrunk reproducer, none
     * with the key */
    assert_int_equal(check_report_files(out_dir), 4);
    char path[1400];
    snprintf(path, sizeof path, "%s/repro-prop.trace.json", out_dir);
    assert_int_equal(access(path, R_OK), 0);
    snprintf(path, sizeof path, "%s/report.json", out_dir);
    cJSON *r = load_json(path);
    const cJSON *check = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "checks"), 0);
    const char *verdict = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(check, "verdict"));
    const char *failure = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(check, "failure"));
    const char *summary = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(check, "summary"));
    assert_non_null(verdict);
    assert_non_null(failure);
    assert_non_null(summary);
    assert_string_equal(verdict, "FAIL");
    assert_non_null(strstr(failure, "could not connect"));
    /* request 17 is aborted before its first step, before any connection */
    assert_non_null(strstr(summary, "0 length, 0 stop, 1 abort, 16 error"));
    cJSON_Delete(r);
}

/* ------------------------------------------------------------------ */
/* Set-up                                                              */
/* ------------------------------------------------------------------ */

static int setup(void **state)
{
    (void)state;
    assay_test_scratch("server-faults", g_dir, sizeof g_dir);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", g_dir, g_dir);
    if (system(cmd) != 0) {
        return -1;
    }
    return fake_server_start(&g_srv) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    fake_server_stop(g_srv);
    return 0;
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc != 2) {
        fprintf(stderr, "usage: test_server_faults ASSAY_BINARY\n");
        return 2;
    }
    static char path[4096];
    if (realpath(argv[1], path) == NULL) {
        fprintf(stderr, "test_server_faults: %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    g_assay = path;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_counts_failures),
        cmocka_unit_test(test_bench_connection_refused),
        cmocka_unit_test(test_checks_count_failures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
