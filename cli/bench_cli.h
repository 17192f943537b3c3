/*
 * bench_cli.h - what `assay run` and `assay bench` share: loading the
 * benchmark's inputs with clear errors, running the seed's table, the rate
 * sweep and a configuration with progress on a terminal, and printing their
 * figures. Only cli/ prints.
 */
#ifndef ASSAY_BENCH_CLI_H
#define ASSAY_BENCH_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "adapters/adapter.h"
#include "bench/metrics.h"
#include "bench/seedtable.h"
#include "bench/slo.h"
#include "core/workload.h"

/* The engine a benchmark runs by default: the bundled engine's defaults
 * with a batch of 8, so that requests beyond the batch wait in the engine's
 * queue before their first token, as in front of a busy server. */
#define ASSAY_CLI_BENCH_ENGINE "bundled:batch=8"
/* The default workload and SLO, relative to the fixtures folder. */
#define ASSAY_CLI_BENCH_WORKLOAD "workloads/bench-seed-ch28.json"
#define ASSAY_CLI_BENCH_SLO "slo/interactive.json"

/*
 * --arrival KIND, as bench and compare read it: poisson, gamma, constant or
 * trace (the workload's own arrival times). False and a message naming the
 * command otherwise.
 */
#define ASSAY_CLI_ARRIVAL_KINDS "poisson, gamma, constant or trace"
bool assay_cli_parse_arrival(const char *cmd, const char *text, enum assay_arrival_kind *out);

/* An open loop's --arrival against its --rate: poisson, gamma and constant
 * draw a schedule at the rate and need it; trace replays the workload's
 * own times and takes none. False and a message otherwise. */
bool assay_cli_check_open_arrival(const char *cmd, bool arrival_set, enum assay_arrival_kind kind,
                                  double rate);

/* Open the engine named by spec; false (and a message naming the command)
 * when it cannot be opened. */
bool assay_cli_open_engine(const char *cmd, const char *spec, struct assay_adapter *out);

/* Load a workload file within the limits of adapter a (its vocabulary and
 * context, as its info states them); false and a message on error. A
 * relative path that does not exist is also tried under the fixtures
 * folder. */
bool assay_cli_load_workload(const char *cmd, const char *path, const struct assay_adapter *a,
                             struct assay_workload **out);

/* Load an SLO file (also tried under the fixtures folder); false and a
 * message on error. */
bool assay_cli_load_slo(const char *cmd, const char *path, struct assay_slo *out);

/* Create dir (and its parents) if missing and check that a file can be
 * created in it, before any long run; false and a message otherwise. A
 * folder it made is removed again, if still empty, when the process exits
 * or is interrupted (SIGINT, SIGTERM, SIGHUP): a command that wrote nothing
 * leaves no empty folder behind. */
bool assay_cli_prepare_out_dir(const char *cmd, const char *dir);

/*
 * For the command's process: on SIGINT, SIGTERM or SIGHUP, say on stderr
 * "assay CMD: interrupted by SIGINT before it finished: LEFT" (LEFT what
 * stands of the run; NULL: "no verdict and no report from this run"),
 * remove the empty folders assay_cli_prepare_out_dir made, and die of the
 * signal (exit status 128 + its number in a shell). The children a check
 * runs in die silently. Once, before the command's work (cli/main.c).
 */
void assay_cli_catch_interrupts(const char *cmd, const char *left);

/*
 * A long phase's progress. On a terminal, a line that shows the phase's
 * elapsed time every half second, from a thread of its own; with or
 * without one, assay_cli_ticker_line prints a line of its own on stderr
 * ("assay CMD: LINE"), above the ticking one. start/stop pair (stop
 * clears the ticking line); cmd and label are copied. NULL (out of memory)
 * is accepted by every call.
 */
struct assay_cli_ticker;
struct assay_cli_ticker *assay_cli_ticker_start(const char *cmd, const char *label);
void assay_cli_ticker_line(struct assay_cli_ticker *t, const char *line);
void assay_cli_ticker_stop(struct assay_cli_ticker *t);

/* A benchmark's progress hook (bench/loadgen.h, struct assay_bench_progress)
 * for arg = a ticker: each run's line is printed, prefixed with the
 * ticker's label, and the ticking line says the last one. */
void assay_cli_ticker_progress(void *arg, const char *line);

/* Print one configuration's figures: percentiles (median over runs, with
 * the p99's spread), offered and achieved rate, goodput, sufficiency. */
void assay_cli_print_bench(FILE *out, const struct assay_bench_result *r,
                           const struct assay_workload *w);

/* Print a paragraph wrapped at 100 columns, and a newline. */
void assay_cli_print_paragraph(FILE *out, const char *text);

/* Print the seed's table (and its paragraph, from the report's JSON). */
void assay_cli_print_seedtable(FILE *out, const struct assay_seedtable *t,
                               const char *explanation);

/* Print a rate sweep's probes and result. */
void assay_cli_print_sweep(FILE *out, const struct assay_sweep_result *s,
                           const struct assay_sweep_params *p);

#endif
