/* assay bench: the benchmark alone - an open or closed loop, the seed's
 * table, or a rate sweep - with an optional report. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/spec.h"
#include "bench_cli.h"
#include "cli.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "reports/report.h"
#include "reports/schema.h"
#include "reports/stamp.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: assay bench [--mode open|closed|seedtable|sweep] [--engine SPEC]\n"
            "                   [--workload FILE] [--slo FILE] [--rate R]\n"
            "                   [--arrival poisson|gamma|constant|trace] [--cv X]\n"
            "                   [--workers N[,N...]] [--runs N] [--warmup N] [--seed N]\n"
            "                   [--timeout S] [--out DIR] [--json]\n"
            "\n"
            "Measure an engine's latency the way the seed chapter says it must be measured:\n"
            "percentiles (never means), offered next to achieved rate, goodput under a stated\n"
            "SLO, warm-up discarded, several runs and their spread, the workload's length\n"
            "distributions stated, the generator's own lateness reported.\n"
            "\n"
            "  --mode open       open loop (default): requests arrive on a schedule fixed before\n"
            "                    the run; latency is measured from the scheduled arrival\n"
            "        closed      closed loop: --workers requests in flight, no offered rate\n"
            "        seedtable   the seed's table: the open loop above the engine's capacity\n"
            "                    and the closed loop at 2, 4 and 8 workers, same workload\n"
            "        sweep       the highest offered rate whose goodput stays >= 99%%\n"
            "  --engine SPEC     the engine (default " ASSAY_CLI_BENCH_ENGINE ")\n"
            "  --workload FILE   default fixtures/" ASSAY_CLI_BENCH_WORKLOAD "\n"
            "  --slo FILE        default fixtures/" ASSAY_CLI_BENCH_SLO "\n"
            "  --rate R          offered req/s (open: default the workload's own arrival\n"
            "                    times; seedtable: default 2.5 x measured capacity; sweep: first\n"
            "                    probe, default the measured capacity)\n"
            "  --arrival KIND    the open loop's arrivals: trace (the workload's own times,\n"
            "                    the default without --rate), or with --rate poisson (the\n"
            "                    default with it), gamma or constant\n"
            "  --cv X            gamma's coefficient of variation (burstiness; default 2)\n"
            "  --workers N[,N]   closed: workers (default 4); seedtable: the closed rows\n"
            "                    (default 2,4,8)\n"
            "  --runs N          runs per configuration (default 3)\n"
            "  --warmup N        requests run first and discarded in each run (default: 10%% of\n"
            "                    the workload, at most 8)\n"
            "  --seed N          seed of the arrival schedule (run r uses N + r; default 1)\n"
            "  --timeout S       per run, seconds (default 600)\n"
            "  --out DIR         also write DIR/report.json, report.html and report.md\n"
            "  --json            print the report's JSON on stdout instead of the tables\n"
            "\n"
            "Exit status: 0 done, 2 usage or input error, or a run that could not complete.\n");
}

enum mode { MODE_OPEN, MODE_CLOSED, MODE_SEEDTABLE, MODE_SWEEP };

struct bench_opts {
    enum mode mode;
    const char *engine, *workload, *slo, *out;
    double rate, cv, timeout_s;
    enum assay_arrival_kind arrival;
    bool arrival_set;
    int32_t workers[ASSAY_SEEDTABLE_MAX_CLOSED];
    int32_t n_workers;
    uint64_t runs, seed;
    int32_t warmup;
    bool json;
};

static bool parse_double(const char *opt, const char *text, double *out)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !(isfinite(v) && v > 0)) {
        fprintf(stderr, "assay bench: %s expects a positive number, got '%s'\n", opt, text);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_workers(const char *text, struct bench_opts *o)
{
    const char *p = text;
    o->n_workers = 0;
    while (*p != '\0') {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 4096 || (*end != ',' && *end != '\0') ||
            o->n_workers == ASSAY_SEEDTABLE_MAX_CLOSED) {
            fprintf(stderr,
                    "assay bench: --workers expects up to %d positive integers separated by commas, "
                    "got '%s'\n",
                    ASSAY_SEEDTABLE_MAX_CLOSED, text);
            return false;
        }
        o->workers[o->n_workers++] = (int32_t)v;
        p = *end == ',' ? end + 1 : end;
    }
    return o->n_workers > 0;
}

static int parse(int argc, char **argv, struct bench_opts *o)
{
    static const struct option opts[] = {
        {"mode", required_argument, NULL, 'm'},    {"engine", required_argument, NULL, 'e'},
        {"workload", required_argument, NULL, 'w'}, {"slo", required_argument, NULL, 'S'},
        {"rate", required_argument, NULL, 'R'},    {"arrival", required_argument, NULL, 'a'},
        {"cv", required_argument, NULL, 'v'},      {"workers", required_argument, NULL, 'W'},
        {"runs", required_argument, NULL, 'r'},    {"warmup", required_argument, NULL, 'u'},
        {"seed", required_argument, NULL, 's'},    {"timeout", required_argument, NULL, 't'},
        {"out", required_argument, NULL, 'o'},     {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    int c;
    uint64_t u;
    assay_cli_options_begin();
    while ((c = getopt_long(argc, argv, ASSAY_CLI_OPTSTRING, opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (strcmp(optarg, "open") == 0) {
                o->mode = MODE_OPEN;
            } else if (strcmp(optarg, "closed") == 0) {
                o->mode = MODE_CLOSED;
            } else if (strcmp(optarg, "seedtable") == 0) {
                o->mode = MODE_SEEDTABLE;
            } else if (strcmp(optarg, "sweep") == 0) {
                o->mode = MODE_SWEEP;
            } else {
                fprintf(stderr, "assay bench: --mode expects open, closed, seedtable or sweep, got '%s'\n",
                        optarg);
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'e': o->engine = optarg; break;
        case 'w': o->workload = optarg; break;
        case 'S': o->slo = optarg; break;
        case 'R':
            if (!parse_double("--rate", optarg, &o->rate)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'a':
            o->arrival_set = true;
            if (!assay_cli_parse_arrival("bench", optarg, &o->arrival)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'v':
            if (!parse_double("--cv", optarg, &o->cv)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'W':
            if (!parse_workers(optarg, o)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'r':
            if (!assay_cli_parse_u64("--runs", optarg, &o->runs) || o->runs < 1 || o->runs > 100) {
                fprintf(stderr, "assay bench: --runs expects 1..100\n");
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'u':
            if (!assay_cli_parse_u64("--warmup", optarg, &u) || u > 1000000) {
                fprintf(stderr, "assay bench: --warmup expects 0..1000000\n");
                return ASSAY_EXIT_USAGE;
            }
            o->warmup = (int32_t)u;
            break;
        case 's':
            if (!assay_cli_parse_u64("--seed", optarg, &o->seed)) {
                return ASSAY_EXIT_USAGE;
            }
            if ((o->seed & 0xffffffffu) == 0) {
                fprintf(stderr, "assay bench: --seed: the low 32 bits must not all be 0 (GSL "
                                "would silently use its default seed)\n");
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 't':
            if (!parse_double("--timeout", optarg, &o->timeout_s)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'o': o->out = optarg; break;
        case 'j': o->json = true; break;
        case 'h': usage(stdout); return -1;
        default: return assay_cli_bad_option("bench", c, argc, argv);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "assay bench: unexpected argument '%s'\n", argv[optind]);
        return ASSAY_EXIT_USAGE;
    }
    if (o->mode != MODE_OPEN && o->arrival == ASSAY_ARRIVAL_TRACE && o->arrival_set) {
        fprintf(stderr, "assay bench: --arrival trace is for --mode open only\n");
        return ASSAY_EXIT_USAGE;
    }
    if (o->mode == MODE_OPEN &&
        !assay_cli_check_open_arrival("bench", o->arrival_set, o->arrival, o->rate)) {
        return ASSAY_EXIT_USAGE;
    }
    if (o->mode == MODE_CLOSED && o->n_workers > 1) {
        fprintf(stderr, "assay bench: --mode closed takes one --workers value\n");
        return ASSAY_EXIT_USAGE;
    }
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_spec_check(o->engine, &diag) != ASSAY_OK) {
        char why[800];
        fprintf(stderr, "assay bench: --engine: %s\n", assay_diag_format(&diag, why, sizeof why));
        return ASSAY_EXIT_USAGE;
    }
    return ASSAY_EXIT_OK;
}

static const char *mode_str(enum mode m)
{
    switch (m) {
    case MODE_OPEN: return "open loop";
    case MODE_CLOSED: return "closed loop";
    case MODE_SEEDTABLE: return "the seed's table";
    case MODE_SWEEP: return "rate sweep";
    }
    return "?";
}

/* What the phases of a benchmark share: the engine and its inputs, what the
 * mode's run measured, and the report being built. */
struct bench_run {
    struct assay_adapter a;
    struct assay_workload *w;
    struct assay_slo slo;
    cJSON *report;
    bool ok;              /* false once memory ran out for the report */
    enum assay_status st; /* how the mode's run ended */
    struct assay_bench_result br;
    struct assay_seedtable table;
    struct assay_sweep_params sp;
    struct assay_sweep_result sr;
    double capacity; /* the sweep's start when it was measured, else NAN */
};

/* Open the engine and load the workload and the SLO into r, and check that
 * --warmup leaves a request to measure; false with the reason on stderr,
 * what was opened closed again. */
static bool open_inputs(const struct bench_opts *o, struct bench_run *r)
{
    if (!assay_cli_open_engine("bench", o->engine, &r->a)) {
        return false;
    }
    if (!assay_cli_load_workload("bench", o->workload, &r->a, &r->w) ||
        !assay_cli_load_slo("bench", o->slo, &r->slo)) {
        assay_workload_free(r->w);
        assay_adapter_close(&r->a);
        return false;
    }
    if (o->warmup != ASSAY_LOADGEN_WARMUP_AUTO && o->warmup >= r->w->n) {
        fprintf(stderr,
                "assay bench: --warmup %d leaves no request of the workload's %d to measure\n",
                (int)o->warmup, (int)r->w->n);
        assay_workload_free(r->w);
        assay_adapter_close(&r->a);
        return false;
    }
    return true;
}

/* --mode open or closed: the runs into r->br, their figures the report's
 * "benchmark". */
static void run_loop(const struct bench_opts *o, struct bench_run *r,
                     struct assay_bench_progress progress)
{
    cJSON *part = NULL;
    struct assay_loadgen_params lp = assay_loadgen_default_params();
    lp.kind = o->mode == MODE_OPEN ? ASSAY_LOADGEN_OPEN : ASSAY_LOADGEN_CLOSED;
    lp.arrival = o->rate > 0
                     ? (o->arrival == ASSAY_ARRIVAL_TRACE ? ASSAY_ARRIVAL_POISSON : o->arrival)
                     : ASSAY_ARRIVAL_TRACE;
    if (o->arrival_set && o->arrival == ASSAY_ARRIVAL_TRACE) {
        lp.arrival = ASSAY_ARRIVAL_TRACE;
    }
    lp.rate = o->rate > 0 ? o->rate : 1.0;
    lp.cv = o->cv;
    lp.seed = o->seed;
    lp.n_workers = o->n_workers > 0 ? o->workers[0] : 4;
    lp.warmup = o->warmup;
    lp.timeout_s = o->timeout_s;
    lp.progress = progress;
    r->st = assay_bench_run(&r->a, r->w, &lp, &r->slo, (int32_t)o->runs, &r->br);
    r->ok = r->ok &&
            (r->br.n_runs == 0 || (assay_bench_result_to_json(&r->br, r->w, &part) == ASSAY_OK &&
                                   assay_report_set(r->report, "benchmark", part) == ASSAY_OK));
}

/* --mode seedtable: the seed's table into r->table, the report's
 * "seed_table". */
static void run_seedtable(const struct bench_opts *o, struct bench_run *r,
                          struct assay_bench_progress progress)
{
    cJSON *part = NULL;
    struct assay_seedtable_params tp = assay_seedtable_default_params();
    tp.open_rate = o->rate > 0 ? o->rate : 0.0;
    tp.arrival = o->arrival == ASSAY_ARRIVAL_TRACE ? ASSAY_ARRIVAL_POISSON : o->arrival;
    tp.cv = o->cv;
    tp.seed = o->seed;
    if (o->n_workers > 0) {
        tp.n_closed = o->n_workers;
        memcpy(tp.workers, o->workers, sizeof tp.workers);
    }
    tp.n_runs = (int32_t)o->runs;
    tp.warmup = o->warmup;
    tp.timeout_s = o->timeout_s;
    tp.progress = progress;
    r->st = assay_seedtable_run(&r->a, r->w, &tp, &r->slo, &r->table);
    r->ok = r->ok && (r->table.n_rows == 0 ||
                      (assay_report_seedtable_json(&r->table, r->w, &part) == ASSAY_OK &&
                       assay_report_set(r->report, "seed_table", part) == ASSAY_OK));
}

/* --mode sweep: from --rate, or else from the capacity one burst of the
 * workload measures, the rate sweep into r->sr, the report's "rate_sweep". */
static void run_sweep(const struct bench_opts *o, struct bench_run *r,
                      struct assay_bench_progress progress)
{
    cJSON *part = NULL;
    if (o->rate > 0) {
        r->sp.start_rate = o->rate;
    } else {
        r->st = assay_bench_capacity(&r->a, r->w, ASSAY_LOADGEN_WARMUP_AUTO, o->timeout_s,
                                     &r->capacity);
        r->sp.start_rate = r->capacity;
    }
    if (r->st != ASSAY_OK) {
        return;
    }
    r->sp.min_rate = r->sp.start_rate / 8.0;
    r->sp.max_rate = r->sp.start_rate * 16.0;
    r->sp.max_probes = 8;
    r->sp.rel_tol = 0.1;
    r->sp.arrival = o->arrival == ASSAY_ARRIVAL_TRACE ? ASSAY_ARRIVAL_POISSON : o->arrival;
    r->sp.cv = o->cv;
    r->sp.seed = o->seed;
    r->sp.warmup = o->warmup;
    r->sp.timeout_s = o->timeout_s;
    r->sp.progress = progress;
    r->st = assay_rate_sweep(&r->a, r->w, &r->sp, &r->slo, &r->sr);
    r->ok = r->ok && assay_report_sweep_json(&r->sr, &r->sp, &r->slo, r->st, &part) == ASSAY_OK &&
            assay_report_set(r->report, "rate_sweep", part) == ASSAY_OK;
}

/* Run the mode the options ask for, a ticker showing its progress. */
static void run_mode(const struct bench_opts *o, struct bench_run *r)
{
    r->st = ASSAY_OK;
    char label[128];
    snprintf(label, sizeof label, "benchmark: %s", mode_str(o->mode));
    struct assay_cli_ticker *tick = assay_cli_ticker_start("bench", label);
    struct assay_bench_progress progress = {assay_cli_ticker_progress, tick, NULL};
    r->sp = assay_sweep_default_params();
    r->capacity = NAN;
    if (o->mode == MODE_OPEN || o->mode == MODE_CLOSED) {
        run_loop(o, r, progress);
    } else if (o->mode == MODE_SEEDTABLE) {
        run_seedtable(o, r, progress);
    } else {
        run_sweep(o, r, progress);
    }
    assay_cli_ticker_stop(tick);
}

/* The rest of the report: the notes on how the run went, the stamp, the
 * duration and the outcome. The exit status: 2 for a run that stopped
 * early, which the report records for `assay report` to end with again, or
 * for a report that ran out of memory. */
static int finish_report(const struct bench_opts *o, struct bench_run *r, int64_t t0)
{
    if (r->st != ASSAY_OK) {
        r->ok = r->ok && assay_report_add_note(r->report, "The %s stopped early: %s.",
                                               mode_str(o->mode),
                                               assay_status_str(r->st)) == ASSAY_OK;
    }
    if (isfinite(r->capacity)) {
        r->ok = r->ok && assay_report_add_note(r->report,
                                               "The sweep started at the capacity measured with "
                                               "one burst of the workload: %.4g req/s.",
                                               r->capacity) == ASSAY_OK;
    }
    struct assay_stamp_seed seeds[] = {{"bench", o->seed}};
    cJSON *stamp = NULL;
    r->ok = r->ok && assay_stamp_create(&r->a, seeds, 1, &stamp) == ASSAY_OK &&
            assay_report_set(r->report, "stamp", stamp) == ASSAY_OK &&
            assay_report_set(r->report, "duration_s",
                             cJSON_CreateNumber((double)(assay_now_ns() - t0) / 1e9)) == ASSAY_OK;
    int status = r->st == ASSAY_OK ? ASSAY_EXIT_OK : ASSAY_EXIT_USAGE;
    r->ok = r->ok && assay_report_set_outcome(r->report, NULL, 0, status) == ASSAY_OK;
    if (!r->ok) {
        fprintf(stderr, "assay bench: out of memory while building the report\n");
        status = ASSAY_EXIT_USAGE;
    }
    return status;
}

/* The tables on a terminal: what the mode measured, where the report went
 * (paths, when written) and how long it all took. */
static void print_tables(const struct bench_opts *o, const struct bench_run *r,
                         const struct assay_report_paths *paths, int64_t t0)
{
    if (r->st != ASSAY_OK) {
        fprintf(stderr, "assay bench: the %s stopped early: %s\n", mode_str(o->mode),
                assay_status_str(r->st));
    }
    if (r->br.n_runs > 0) {
        assay_cli_print_bench(stdout, &r->br, r->w);
    }
    if (r->table.n_rows > 0) {
        assay_cli_print_paragraph(stdout, ASSAY_REPORT_SEED_TABLE_ABOUT);
        printf("\n");
        if (isfinite(r->table.capacity)) {
            printf("Engine capacity (one burst of the whole workload): %.4g req/s\n",
                   r->table.capacity);
        }
        assay_cli_print_seedtable(stdout, &r->table,
                                  assay_json_str(assay_json_path(r->report, "seed_table"),
                                                 "explanation", ""));
    }
    if (o->mode == MODE_SWEEP && r->sr.n_probes > 0) {
        assay_cli_print_sweep(stdout, &r->sr, &r->sp);
    }
    if (paths != NULL) {
        printf("\nReport: %s\n        %s\n        %s\n", paths->json, paths->html, paths->md);
    }
    printf("(%.0f s)\n", (double)(assay_now_ns() - t0) / 1e9);
}

int assay_cmd_bench(int argc, char **argv)
{
    struct bench_opts o = {
        .mode = MODE_OPEN,
        .engine = ASSAY_CLI_BENCH_ENGINE,
        .workload = ASSAY_CLI_BENCH_WORKLOAD,
        .slo = ASSAY_CLI_BENCH_SLO,
        .cv = 2.0,
        .timeout_s = 600,
        .arrival = ASSAY_ARRIVAL_POISSON,
        .runs = ASSAY_BENCH_DEFAULT_RUNS,
        .seed = 1,
        .warmup = ASSAY_LOADGEN_WARMUP_AUTO,
    };
    int rc = parse(argc, argv, &o);
    if (rc != ASSAY_EXIT_OK) {
        return rc < 0 ? ASSAY_EXIT_OK : rc;
    }
    int64_t t0 = assay_now_ns();
    char command_line[2048];
    size_t cl = (size_t)snprintf(command_line, sizeof command_line, "assay");
    for (int i = 0; i < argc && cl < sizeof command_line; i++) {
        cl += (size_t)snprintf(command_line + cl, sizeof command_line - cl, " %s", argv[i]);
    }
    if (o.out != NULL && !assay_cli_prepare_out_dir("bench", o.out)) {
        return ASSAY_EXIT_USAGE;
    }
    struct bench_run r;
    memset(&r, 0, sizeof r);
    if (!open_inputs(&o, &r)) {
        return ASSAY_EXIT_USAGE;
    }
    r.ok = assay_report_create("bench", command_line, &r.report) == ASSAY_OK;
    run_mode(&o, &r);
    int status = finish_report(&o, &r, t0);
    struct assay_report_paths paths;
    bool written = false;
    if (r.ok && o.out != NULL) {
        if (!assay_cli_write_report("bench", r.report, o.out, &paths)) {
            status = ASSAY_EXIT_USAGE;
        } else {
            written = true;
        }
    }
    if (o.json) {
        if (r.ok) {
            assay_cli_print_json(r.report);
        }
    } else {
        print_tables(&o, &r, written ? &paths : NULL, t0);
    }
    cJSON_Delete(r.report);
    assay_bench_result_release(&r.br);
    assay_seedtable_release(&r.table);
    assay_workload_free(r.w);
    assay_adapter_close(&r.a);
    return status;
}
