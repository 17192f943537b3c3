/*
 * cli.h - what the subcommands of the assay command share: exit codes,
 * where fixtures live, progress on a terminal, and the results table.
 * Only cli/ prints and exits.
 */
#ifndef ASSAY_CLI_H
#define ASSAY_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "checks/result.h"
#include "checks/context.h"
#include "checks/isolate.h"
#include "checks/plan.h"
#include "reports/outcome.h"
#include "reports/report.h"
#include "reports/write.h"

/* The exit statuses (enum assay_exit) are reports/outcome.h's: a report
 * records the one its command ended with. */

int assay_cmd_verify(int argc, char **argv);
int assay_cmd_mutants(int argc, char **argv);
/* assay run (cmd_run.c), assay bench (cmd_bench.c), assay report
 * (cmd_report.c). */
int assay_cmd_run(int argc, char **argv);
int assay_cmd_bench(int argc, char **argv);
int assay_cmd_report(int argc, char **argv);
/* assay audit (cmd_audit.c): a third-party server against the oracle and
 * the bundled engine. */
int assay_cmd_audit(int argc, char **argv);
/* assay compare (cmd_compare.c): a candidate engine against a baseline,
 * correctness and speed; exit 3 on a significant regression. */
int assay_cmd_compare(int argc, char **argv);

/* The fixtures folder: $ASSAY_FIXTURES, else the installed or source tree's. */
const char *assay_cli_fixtures(void);

/* The path of this program (for reproducer lines). */
const char *assay_cli_program(void);

/* The command line as typed ("assay" and argv[0..argc-1] joined by
 * spaces), for reports; cut at size. */
void assay_cli_join_argv(int argc, char **argv, char *buf, size_t size);

/* Write report as DIR/report.{json,html,md} (reports/write.h); on failure
 * print "assay CMD: writing the report: WHY" and return false. */
bool assay_cli_write_report(const char *cmd, cJSON *report, const char *dir,
                            struct assay_report_paths *paths);

/* Print report's JSON on stdout (--json). */
void assay_cli_print_json(cJSON *report);

/*
 * Shrink every failed check of res[0..n) that has a workload
 * (checks/shrink.h: fewer requests, shorter prompts, a smaller pool, within
 * ASSAY_SHRINK_MAX_RUNS reruns or ASSAY_SHRINK_MAX_SECONDS each), write
 * each reproducer into dir (created when missing) and, once a rerun from
 * that file has failed again, make its one-line command the check's repro
 * and print what was shrunk. items[i] is res[i]'s plan item; base_spec and
 * workload (NULL: the fixtures) are what the checks ran on. A check that
 * cannot be shrunk keeps its command. Returns false when dir cannot be
 * made (the commands are then left as they were).
 */
bool assay_cli_shrink_failures(const char *cmd, struct assay_verify_ctx *ctx,
                               const struct assay_plan_item *const *items,
                               struct assay_check_result *res, size_t n, const char *base_spec,
                               const char *workload, const char *dir);

/* Print checks[0..n) as a table: name, family, what it needs of its target,
 * what it checks (`assay verify --list`, `audit --list`, `compare --list`);
 * with only, the checks of that family alone (`verify --list --family`). */
void assay_cli_list_checks(const struct assay_plan_item *checks, size_t n,
                           const enum assay_family *only);

/*
 * The options of a subcommand are read with getopt_long(argc, argv,
 * ASSAY_CLI_OPTSTRING, ...) after assay_cli_options_begin(), which resets
 * getopt and stops it printing; a '?' or ':' it returns goes to
 * assay_cli_bad_option, which prints one line naming the option and
 * pointing to --help ("assay verify: unknown option '--bogus' (assay verify
 * --help lists the options)") and returns ASSAY_EXIT_USAGE.
 */
#define ASSAY_CLI_OPTSTRING ":"
void assay_cli_options_begin(void);
int assay_cli_bad_option(const char *cmd, int c, int argc, char **argv);

/* Parse an unsigned integer option; false (and a message) when malformed. */
bool assay_cli_parse_u64(const char *option, const char *text, uint64_t *out);

/* --timeout SECONDS of the commands that run checks in child processes
 * (checks/isolate.h): a non-negative number, 0 for no limit; false (and a
 * message) when malformed. */
bool assay_cli_parse_timeout(const char *text, double *out);

/* The lines of usage text about --no-fork and --timeout. */
#define ASSAY_CLI_ISOLATION_HELP                                                                   \
    "  --timeout SECONDS   a check still running after this long is killed and FAILs\n"            \
    "                      (default " ASSAY_ISOLATION_TIMEOUT_TEXT "; 0: no limit)\n"             \
    "  --no-fork           run the checks in this process (for a debugger); by default\n"          \
    "                      each runs in a child process, so a crash, an abort or a hang\n"         \
    "                      of the engine is that check's FAIL and the others still run\n"

/*
 * MPI (cli/mpi_shard.c). assay_cli_mpi_start, first in main: in a process
 * an MPI launcher started, joins the run's ranks and registers them for
 * the checks (checks/shard.h); otherwise does nothing. False (with the
 * reason on stderr) when it cannot: MPI failed, or this build has no MPI
 * but the launcher started more than one process. assay_cli_mpi_end, last:
 * leaves MPI. assay_cli_mpi_set_check_timeout: a check's time limit, from
 * which the longest wait for another rank follows.
 */
bool assay_cli_mpi_start(int *argc, char ***argv);
void assay_cli_mpi_set_check_timeout(double timeout_s);

/* Whether every rank is ready (each passes its own `ok`; true without
 * MPI when ok): called by every rank before the checks, so that a rank
 * whose input was bad ends the run at once instead of leaving the others
 * waiting for it. */
bool assay_cli_mpi_ready(bool ok);
void assay_cli_mpi_end(void);

/*
 * Run the plan items sel[0..n) on ctx into res, in order, each verdict
 * said as it comes (assay_cli_check_done), each check started together
 * on every rank of an MPI run
 * (a distributional check shared among them, any other run by rank 0
 * alone; checks/shard.h). *n_done becomes the number run. False when
 * memory ran out or the ranks could not communicate (the reason on
 * stderr, prefixed with cmd).
 */
bool assay_cli_run_items(const char *cmd, struct assay_verify_ctx *ctx,
                         const struct assay_plan_item *const *sel, size_t n, const char *engine,
                         const char *workload, struct assay_check_result *res, size_t *n_done);

/*
 * What the user reads while checks run: assay_cli_check_started before
 * check i of n (on a terminal, a ticking line with its elapsed time; NULL
 * otherwise, and on MPI ranks other than 0) and assay_cli_check_done after
 * it, which stops that line and prints one on stderr, with or without a
 * terminal, as each verdict comes: "assay verify: [3/33] equiv.paged PASS
 * 1.9 s (6 s in all)", with the reason of a SKIP, FAIL or ERROR (and what
 * sharing it among MPI ranks cost). t0_ns: when the checks began.
 */
struct assay_cli_ticker;
struct assay_cli_ticker *assay_cli_check_started(const char *cmd, size_t i, size_t n,
                                                 const char *name);
void assay_cli_check_done(const char *cmd, struct assay_cli_ticker *t, size_t i, size_t n,
                          const struct assay_check_result *r, int64_t t0_ns);

/* What sharing the last check among MPI ranks cost, as its line says it
 * (" [2 ranks, 5 collectives, 0.02 MB sent and 1.3 MB received by rank
 * 0]"), into buf; "" when it was not shared. */
void assay_cli_shared_volume(char *buf, size_t size);

/* The pass/fail table of results, one line each, with failures and their
 * reproducers under them. */
void assay_cli_print_results(FILE *out, const struct assay_check_result *results, size_t n);

/* The exit status for a set of results: FAIL if any failed, USAGE if any
 * could not run (ERROR), TOO_FEW if fewer ran (PASS or FAIL) than rq
 * requires (rq may be NULL: nothing required; the shortfall is then said on
 * stderr, prefixed with cmd), else OK: SKIPs do not fail a run, they are
 * listed, and the counts line says when most checks were skipped. */
int assay_cli_exit_status(const char *cmd, const struct assay_check_result *results, size_t n,
                          const struct assay_require *rq);

/* --require-checks N or P% (reports/outcome.h); false and a message when
 * it is neither. */
bool assay_cli_parse_require(const char *cmd, const char *text, struct assay_require *out);

/* The lines of usage text about --require-checks. */
#define ASSAY_CLI_REQUIRE_HELP                                                                     \
    "  --require-checks N  at least N checks must run (PASS or FAIL; a SKIP checks\n"            \
    "                      nothing), or N%% of the checks selected; fewer is exit\n"             \
    "                      status 4 (default: none required, but the counts line says\n"        \
    "                      when most checks were skipped)\n"

#endif
