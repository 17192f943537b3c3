/*
 * common.c - what the subcommands share (cli.h): where the fixtures and the
 * program are, option parsing helpers and their errors, running the selected
 * checks with progress (assay_cli_run_items), shrinking the failures, the
 * results table, the exit status and writing the report. Called by the
 * cmd_*.c files behind `assay verify`, `audit`, `compare`, `run` and the rest.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "bench_cli.h"
#include "checks/shard.h"
#include "checks/shrink.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "reports/write.h"

#ifndef ASSAY_FIXTURES_DIR
#define ASSAY_FIXTURES_DIR "fixtures"
#endif
#ifndef ASSAY_FIXTURES_INSTALLED
#define ASSAY_FIXTURES_INSTALLED "../share/assay/fixtures"
#endif

/* $ASSAY_FIXTURES; else, for an installed command, the fixtures installed
 * beside it (ASSAY_FIXTURES_INSTALLED, relative to the folder of the
 * binary, so an install under any prefix works); else the source tree's. */
const char *assay_cli_fixtures(void)
{
    const char *env = getenv("ASSAY_FIXTURES");
    if (env != NULL && env[0] != '\0') {
        return env;
    }
    static char installed[PATH_MAX + 64];
    if (installed[0] == '\0') {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        char *slash = NULL;
        if (n > 0) {
            exe[n] = '\0';
            slash = strrchr(exe, '/');
        }
        if (slash != NULL) {
            *slash = '\0';
            snprintf(installed, sizeof installed, "%s/%s", exe, ASSAY_FIXTURES_INSTALLED);
        }
        if (slash == NULL || access(installed, R_OK | X_OK) != 0) {
            snprintf(installed, sizeof installed, "%s", ASSAY_FIXTURES_DIR);
        }
    }
    return installed;
}

const char *assay_cli_program(void)
{
    static char path[PATH_MAX];
    if (path[0] == '\0') {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        if (n <= 0) {
            snprintf(path, sizeof path, "assay");
        } else {
            path[n] = '\0';
        }
    }
    return path;
}

void assay_cli_options_begin(void)
{
    optind = 1;
    opterr = 0;
}

int assay_cli_bad_option(const char *cmd, int c, int argc, char **argv)
{
    /* getopt_long has moved optind past what it refused (for a short
     * option inside a group it may not have: optopt names it then). */
    const char *arg = optind >= 1 && optind - 1 < argc ? argv[optind - 1] : "";
    char shortopt[3] = {'-', (char)optopt, '\0'};
    if (optopt != 0 && strncmp(arg, "--", 2) != 0) {
        arg = shortopt;
    }
    char name[128];
    size_t n = strcspn(arg, "=");
    snprintf(name, sizeof name, "%.*s", (int)(n < 100 ? n : 100), arg);
    if (c == ':') {
        fprintf(stderr, "assay %s: option '%s' needs a value (assay %s --help)\n", cmd, name, cmd);
    } else if (strncmp(arg, "--", 2) == 0 && strchr(arg, '=') != NULL) {
        fprintf(stderr,
                "assay %s: unknown option '%s', or one that takes no value (assay %s --help "
                "lists the options)\n",
                cmd, name, cmd);
    } else {
        fprintf(stderr, "assay %s: unknown option '%s' (assay %s --help lists the options)\n", cmd,
                name, cmd);
    }
    return ASSAY_EXIT_USAGE;
}

bool assay_cli_parse_u64(const char *option, const char *text, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
        fprintf(stderr, "assay: %s expects a non-negative integer, got '%s'\n", option, text);
        return false;
    }
    *out = v;
    return true;
}

bool assay_cli_parse_timeout(const char *text, double *out)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(v) || v < 0) {
        fprintf(stderr, "assay: --timeout expects a number of seconds >= 0, got '%s'\n", text);
        return false;
    }
    *out = v;
    return true;
}

/* One check's lines of the table. */
static void print_result(FILE *out, const struct assay_check_result *r)
{
    fprintf(out, "%-30s %-15s %-7s %8.2f  %s\n", r->name, assay_family_str(r->family),
            assay_verdict_str(r->verdict), r->seconds, r->summary);
    if (r->verdict != ASSAY_VERDICT_PASS) {
        fprintf(out, "    %s: %s\n", r->verdict == ASSAY_VERDICT_SKIP ? "skipped" : "why",
                r->failure);
    }
    if (r->verdict == ASSAY_VERDICT_FAIL && r->family == ASSAY_FAMILY_DISTRIBUTIONAL) {
        fprintf(out, "    fired: %s\n",
                r->rule_fired || r->statistic_fired
                    ? assay_check_fired_str(r->rule_fired, r->statistic_fired)
                    : "neither the hard rule nor the statistic (see why)");
    }
    if (r->verdict == ASSAY_VERDICT_FAIL && r->repro[0] != '\0') {
        fprintf(out, "    reproduce: %s\n", r->repro);
    }
}

static bool same_skip(const struct assay_check_result *a, const struct assay_check_result *b)
{
    return a->verdict == ASSAY_VERDICT_SKIP && b->verdict == ASSAY_VERDICT_SKIP &&
           strcmp(a->failure, b->failure) == 0;
}

/* Failures first, then what could not run, what passed, and the SKIPs,
 * those with one reason together in one entry: a plan mostly skipped on an
 * engine must not bury its failures (the reports order their tables so,
 * reports/outcome.h). */
void assay_cli_print_results(FILE *out, const struct assay_check_result *r, size_t n)
{
    fprintf(out, "%-30s %-15s %-7s %8s  %s\n", "check", "family", "verdict", "seconds", "summary");
    static const enum assay_verdict order[] = {ASSAY_VERDICT_FAIL, ASSAY_VERDICT_ERROR,
                                               ASSAY_VERDICT_PASS};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        for (size_t i = 0; i < n; i++) {
            if (r[i].verdict == order[k]) {
                print_result(out, &r[i]);
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        bool first = r[i].verdict == ASSAY_VERDICT_SKIP;
        size_t n_same = 0;
        for (size_t j = 0; j < n && first; j++) {
            first = !(j < i && same_skip(&r[j], &r[i]));
            n_same += same_skip(&r[j], &r[i]);
        }
        if (!first) {
            continue;
        }
        if (n_same == 1) {
            print_result(out, &r[i]);
            continue;
        }
        char count[32];
        snprintf(count, sizeof count, "%zu checks, named below", n_same);
        fprintf(out, "%-30s %-15s %-7s %8s  skipped: %s\n", count, "", "SKIP", "", r[i].failure);
        size_t col = 0;
        for (size_t j = i; j < n; j++) {
            if (same_skip(&r[j], &r[i])) {
                size_t len = strlen(r[j].name);
                if (col > 0 && col + 2 + len > 96) {
                    fputc('\n', out);
                    col = 0;
                }
                col += (size_t)fprintf(out, "%s%s", col == 0 ? "    " : ", ", r[j].name);
            }
        }
        fputc('\n', out);
    }
    struct assay_counts c;
    assay_counts_of_results(r, n, &c);
    char line[256];
    fprintf(out, "\n%s\n", assay_counts_line(&c, line, sizeof line));
}

int assay_cli_exit_status(const char *cmd, const struct assay_check_result *r, size_t n,
                          const struct assay_require *rq)
{
    struct assay_counts c;
    assay_counts_of_results(r, n, &c);
    int status = assay_outcome_exit_status(&c, rq);
    if (status == ASSAY_EXIT_TOO_FEW) {
        fprintf(stderr,
                "assay %s: only %lld of the %lld checks ran (PASS or FAIL), fewer than the %lld "
                "that --require-checks %s asks for: exit status %d\n",
                cmd, (long long)assay_counts_ran(&c), (long long)c.checks,
                (long long)assay_require_needed(rq, c.checks), rq->text, ASSAY_EXIT_TOO_FEW);
    }
    return status;
}

bool assay_cli_parse_require(const char *cmd, const char *text, struct assay_require *out)
{
    if (assay_require_parse(text, out) != ASSAY_OK) {
        fprintf(stderr,
                "assay %s: --require-checks expects a number of checks >= 1 or a share such as "
                "50%%, got '%s'\n",
                cmd, text);
        return false;
    }
    return true;
}

void assay_cli_join_argv(int argc, char **argv, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "assay");
    for (int i = 0; i < argc && n < size; i++) {
        n += (size_t)snprintf(buf + n, size - n, " %s", argv[i]);
    }
}

bool assay_cli_write_report(const char *cmd, cJSON *report, const char *dir,
                            struct assay_report_paths *paths)
{
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_report_write_all(report, dir, "report", paths, &diag) != ASSAY_OK) {
        char why[1200];
        fprintf(stderr, "assay %s: writing the report: %s\n", cmd,
                assay_diag_format(&diag, why, sizeof why));
        return false;
    }
    return true;
}

void assay_cli_print_json(cJSON *report)
{
    char *text = NULL;
    size_t len = 0;
    if (assay_report_print(report, &text, &len) == ASSAY_OK) {
        fwrite(text, 1, len, stdout);
    }
    assay_free(text);
}

/* A check without a fixture that wrote its failing case to a file (the
 * differential fuzzing does) names it as its workload; its engine is the
 * case's. */
static bool generated_case(const struct assay_plan_item *item, const struct assay_check_result *r)
{
    size_t n = strlen(r->workload);
    return item->workload == NULL && n > 5 && strcmp(r->workload + n - 5, ".json") == 0 &&
           access(r->workload, R_OK) == 0;
}

bool assay_cli_shrink_failures(const char *cmd, struct assay_verify_ctx *ctx,
                               const struct assay_plan_item *const *items,
                               struct assay_check_result *res, size_t n, const char *base_spec,
                               const char *workload, const char *dir)
{
    size_t n_fail = 0;
    for (size_t i = 0; i < n; i++) {
        n_fail += res[i].verdict == ASSAY_VERDICT_FAIL &&
                  (items[i]->workload != NULL || workload != NULL || generated_case(items[i], &res[i]));
    }
    if (n_fail == 0) {
        return true;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "assay %s: cannot make %s for the reproducers: %s\n", cmd, dir,
                strerror(errno));
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        bool generated = workload == NULL && generated_case(items[i], &res[i]);
        if (res[i].verdict != ASSAY_VERDICT_FAIL ||
            (items[i]->workload == NULL && workload == NULL && !generated)) {
            continue;
        }
        if (res[i].timed_out) {
            /* Every rerun of a hanging case lasts the whole time limit. */
            fprintf(stderr, "assay %s: %s not shrunk (it was killed at its time limit, and each "
                            "rerun would be too); its reproducer is the full case\n",
                    cmd, res[i].name);
            continue;
        }
        fprintf(stderr, "assay %s: shrinking the failure of %s (at most %d reruns, about %.0f s)\n",
                cmd, res[i].name, ASSAY_SHRINK_MAX_RUNS, ASSAY_SHRINK_MAX_SECONDS);
        struct assay_shrink_opts o = {dir, NULL, 0, 0.0};
        struct assay_shrink_result *r = assay_calloc(1, sizeof *r);
        if (r == NULL) {
            return true; /* out of memory: the full command stays */
        }
        char case_spec[sizeof res[i].engine], case_file[sizeof res[i].workload];
        snprintf(case_spec, sizeof case_spec, "%s", res[i].engine);
        snprintf(case_file, sizeof case_file, "%s", res[i].workload);
        enum assay_status st = assay_shrink(ctx, items[i], generated ? case_spec : base_spec,
                                            generated ? case_file : workload, &o, r);
        char sizes[320];
        size_t len = strlen(r->command); /* a check's own repro: it fits */
        if (st == ASSAY_OK && r->reproduced && r->shrinkable && r->confirmed &&
            len < sizeof res[i].repro) {
            memcpy(res[i].repro, r->command, len + 1);
            fprintf(stderr, "assay %s: %s shrunk in %d runs, %.1f s%s: %s; it fails with: %s\n",
                    cmd, res[i].name, (int)r->n_runs, r->seconds,
                    r->budget_reached ? " (budget reached)" : "",
                    assay_shrink_format_sizes(r, sizes, sizeof sizes), r->failure);
        } else {
            fprintf(stderr, "assay %s: %s not shrunk (%s); its reproducer is the full case\n", cmd,
                    res[i].name,
                    st != ASSAY_OK          ? assay_status_str(st)
                    : !r->reproduced        ? "it passed when rerun"
                    : !r->shrinkable        ? "no workload to shrink"
                                            : "the shrunk case did not fail again");
        }
        assay_free(r);
    }
    return true;
}

void assay_cli_list_checks(const struct assay_plan_item *checks, size_t n,
                           const enum assay_family *only)
{
    printf("%-30s %-15s %-28s %s\n", "check", "family", "needs", "what it checks");
    for (size_t i = 0; i < n; i++) {
        char needs[160];
        if (only != NULL && checks[i].family != *only) {
            continue;
        }
        printf("%-30s %-15s %-28s %s%s\n", checks[i].name, assay_family_str(checks[i].family),
               assay_needs_str(checks[i].needs, needs, sizeof needs), checks[i].about,
               checks[i].after_bench ? " (after the benchmark)" : "");
    }
}

struct assay_cli_ticker *assay_cli_check_started(const char *cmd, size_t i, size_t n,
                                                 const char *name)
{
    if (assay_shard_world_rank() != 0 || !isatty(STDERR_FILENO)) {
        return NULL; /* without a terminal the verdict line is enough */
    }
    char label[160];
    snprintf(label, sizeof label, "[%zu/%zu] %s", i + 1, n, name);
    return assay_cli_ticker_start(cmd, label);
}

void assay_cli_shared_volume(char *buf, size_t size)
{
    buf[0] = '\0';
    if (assay_shard_last_shared()) {
        int64_t n_coll = 0, bytes = 0, bytes_in = 0;
        assay_shard_volume(&n_coll, &bytes, &bytes_in);
        snprintf(buf, size, " [%d ranks, %lld collectives, %.3g MB sent and %.3g MB received by "
                            "rank 0]",
                 (int)assay_shard_world_size(), (long long)n_coll, (double)bytes / 1e6,
                 (double)bytes_in / 1e6);
    }
}

void assay_cli_check_done(const char *cmd, struct assay_cli_ticker *t, size_t i, size_t n,
                          const struct assay_check_result *r, int64_t t0_ns)
{
    assay_cli_ticker_stop(t);
    if (assay_shard_world_rank() != 0) {
        return; /* rank 0 speaks for the run */
    }
    char shared[160];
    assay_cli_shared_volume(shared, sizeof shared);
    char where[160];
    snprintf(where, sizeof where, "[%zu/%zu] %s", i + 1, n, r->name);
    fprintf(stderr, "assay %s: %-40s %-5s %7.1f s (%.0f s in all)%s", cmd, where,
            assay_verdict_str(r->verdict), r->seconds, (double)(assay_now_ns() - t0_ns) / 1e9,
            shared);
    if (r->verdict != ASSAY_VERDICT_PASS) {
        fprintf(stderr, "  %s: %.160s%s", r->verdict == ASSAY_VERDICT_SKIP ? "skipped" : "why",
                r->failure, strlen(r->failure) > 160 ? "..." : "");
    }
    fputc('\n', stderr);
    fflush(stderr);
}

bool assay_cli_run_items(const char *cmd, struct assay_verify_ctx *ctx,
                         const struct assay_plan_item *const *sel, size_t n, const char *engine,
                         const char *workload, struct assay_check_result *res, size_t *n_done)
{
    int32_t rank = assay_shard_world_rank();
    int64_t t0_ns = assay_now_ns();
    bool ok = true;
    size_t i = 0;
    for (; i < n && ok; i++) {
        struct assay_cli_ticker *tick = assay_cli_check_started(cmd, i, n, sel[i]->name);
        if (assay_shard_check_begin(sel[i]->name, sel[i]->family, assay_plan_item_shared(sel[i]),
                                    &res[i]) &&
            assay_run_plan_item(ctx, sel[i], engine, workload, &res[i]) != ASSAY_OK) {
            fprintf(stderr, "assay %s: rank %d: out of memory\n", cmd, (int)rank);
            ok = false;
        }
        if (assay_shard_check_end(&res[i]) != ASSAY_OK) {
            fprintf(stderr, "assay %s: rank %d: the ranks could not bring %s's results together\n",
                    cmd, (int)rank, sel[i]->name);
            ok = false;
        }
        assay_cli_check_done(cmd, tick, i, n, &res[i], t0_ns);
    }
    *n_done = ok ? n : i - 1;
    return ok;
}
