/* assay run: verify with the full plan, benchmark the bundled engine, and
 * write the report (JSON, HTML, Markdown). */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/spec.h"
#include "bench_cli.h"
#include "checks/context.h"
#include "checks/plan.h"
#include "checks/shard.h"
#include "cli.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "reports/report.h"
#include "reports/schema.h"
#include "reports/stamp.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: assay run [--out DIR] [--engine SPEC] [--bench-engine SPEC]\n"
            "                 [--workload FILE] [--slo FILE] [--seed N] [--runs N] [--rate R]\n"
            "                 [--quick] [--check NAME]... [--family FAMILY] [--no-bench]\n"
            "                 [--no-shrink] [--timeout SECONDS] [--no-fork]\n"
            "                 [--require-checks N] [--json]\n"
            "\n"
            "Verify an engine with the whole plan, benchmark the bundled engine the way the\n"
            "seed chapter says benchmarks must be done, and write the report: DIR/report.json\n"
            "(the truth), report.html (one self-contained page with plots) and report.md.\n"
            "Prints the pass/fail table, the benchmark summary and the seed's table (the\n"
            "table of the book chapter the benchmark follows: one engine under an open and\n"
            "a closed load generator).\n"
            "\n"
            "  --out DIR           where to write the report (default assay-report)\n"
            "  --engine SPEC       base engine of the checks (default bundled)\n"
            "  --bench-engine SPEC engine to benchmark (default " ASSAY_CLI_BENCH_ENGINE ")\n"
            "  --workload FILE     benchmark workload (default fixtures/" ASSAY_CLI_BENCH_WORKLOAD ")\n"
            "  --slo FILE          service-level objective for goodput\n"
            "                      (default fixtures/" ASSAY_CLI_BENCH_SLO ")\n"
            "  --seed N            master seed of the checks and the benchmark's seed (default 1)\n"
            "  --runs N            runs per benchmark configuration (default 3; --quick 1)\n"
            "  --rate R            offered rate of the benchmark, req/s (default: half the\n"
            "                      highest rate at which the rate sweep kept goodput >= 99%%)\n"
            "  --quick             a short benchmark: one run per row, a shorter sweep\n"
            "  --check NAME        verify only this check (repeatable; see assay verify --list)\n"
            "  --family FAMILY     verify only equivalence, distributional, property or\n"
            "                      seeded checks\n"
            "  --no-bench          verification and report only\n"
            "  --no-shrink         a failed check's reproducer is the full failing case; by\n"
            "                      default it is shrunk (fewer requests, shorter prompts, a\n"
            "                      smaller pool) while it still fails, written into DIR and\n"
            "                      confirmed by a rerun\n"
            ASSAY_CLI_ISOLATION_HELP
            ASSAY_CLI_REQUIRE_HELP
            "  --json              print the report's JSON on stdout instead of the tables\n"
            "\n"
            "About 2 minutes on 2 idle cores, up to 5 on a busy machine; verification is\n"
            "about half of it, and --quick shortens the benchmark (one run per row).\n"
            "Exit status: 0 all passed, 1 a check failed, 2 usage or input error, or a part\n"
            "that could not run (the report says which), 4 fewer checks ran than\n"
            "--require-checks asks for.\n");
}

struct run_opts {
    const char *out, *engine, *bench_engine, *workload, *slo;
    const char *checks[64];
    size_t n_checks;
    const char *family;
    uint64_t seed;
    uint64_t runs;
    double rate;
    bool quick, no_bench, no_shrink, json;
    struct assay_isolation iso;
    struct assay_require require;
};

static int parse(int argc, char **argv, struct run_opts *o)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'},      {"engine", required_argument, NULL, 'e'},
        {"bench-engine", required_argument, NULL, 'b'}, {"workload", required_argument, NULL, 'w'},
        {"slo", required_argument, NULL, 'S'},      {"seed", required_argument, NULL, 's'},
        {"runs", required_argument, NULL, 'r'},     {"rate", required_argument, NULL, 'R'},
        {"quick", no_argument, NULL, 'q'},          {"check", required_argument, NULL, 'c'},
        {"family", required_argument, NULL, 'f'},   {"no-bench", no_argument, NULL, 'n'},
        {"no-shrink", no_argument, NULL, 'N'},      {"timeout", required_argument, NULL, 't'},
        {"no-fork", no_argument, NULL, 'F'},        {"require-checks", required_argument, NULL, 'Q'},
        {"json", no_argument, NULL, 'j'},           {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    assay_cli_options_begin();
    while ((c = getopt_long(argc, argv, ASSAY_CLI_OPTSTRING, opts, NULL)) != -1) {
        switch (c) {
        case 'o': o->out = optarg; break;
        case 'e': o->engine = optarg; break;
        case 'b': o->bench_engine = optarg; break;
        case 'w': o->workload = optarg; break;
        case 'S': o->slo = optarg; break;
        case 's':
            if (!assay_cli_parse_u64("--seed", optarg, &o->seed)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'r':
            if (!assay_cli_parse_u64("--runs", optarg, &o->runs) || o->runs < 1 || o->runs > 100) {
                fprintf(stderr, "assay run: --runs expects 1..100\n");
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'R': {
            char *end = NULL;
            o->rate = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(isfinite(o->rate) && o->rate > 0)) {
                fprintf(stderr, "assay run: --rate expects a positive number of requests/s, got '%s'\n",
                        optarg);
                return ASSAY_EXIT_USAGE;
            }
            break;
        }
        case 'q': o->quick = true; break;
        case 'c':
            if (o->n_checks == sizeof o->checks / sizeof o->checks[0]) {
                fprintf(stderr, "assay run: too many --check options\n");
                return ASSAY_EXIT_USAGE;
            }
            o->checks[o->n_checks++] = optarg;
            break;
        case 'f': o->family = optarg; break;
        case 'n': o->no_bench = true; break;
        case 'N': o->no_shrink = true; break;
        case 'j': o->json = true; break;
        case 't':
            if (!assay_cli_parse_timeout(optarg, &o->iso.timeout_s)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'F': o->iso.fork = false; break;
        case 'Q':
            if (!assay_cli_parse_require("run", optarg, &o->require)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return -1;
        default: return assay_cli_bad_option("run", c, argc, argv);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "assay run: unexpected argument '%s'\n", argv[optind]);
        return ASSAY_EXIT_USAGE;
    }
    enum assay_family fam;
    if (o->family != NULL && !assay_family_by_name(o->family, &fam)) {
        fprintf(stderr, "assay run: --family expects " ASSAY_FAMILY_NAMES ", got '%s'\n",
                o->family);
        return ASSAY_EXIT_USAGE;
    }
    for (size_t i = 0; i < o->n_checks; i++) {
        if (assay_plan_find(o->checks[i]) == NULL) {
            fprintf(stderr, "assay run: no check called '%s' (assay verify --list shows them)\n",
                    o->checks[i]);
            return ASSAY_EXIT_USAGE;
        }
    }
    const char *specs[2] = {o->engine, o->bench_engine};
    for (int i = 0; i < 2; i++) {
        struct assay_diag diag;
        assay_diag_clear(&diag);
        if (assay_spec_check(specs[i], &diag) != ASSAY_OK) {
            char why[800];
            fprintf(stderr, "assay run: %s: %s\n", i == 0 ? "--engine" : "--bench-engine",
                    assay_diag_format(&diag, why, sizeof why));
            return ASSAY_EXIT_USAGE;
        }
    }
    return ASSAY_EXIT_OK;
}

/* Run the selected checks; returns the number run into *n_out, or false
 * when memory ran out. */
static bool verify(const struct run_opts *o, struct assay_check_result **res_out, size_t *n_out)
{
    size_t n_plan;
    const struct assay_plan_item *plan = assay_verify_plan(&n_plan);
    struct assay_check_result *res = calloc(n_plan, sizeof *res);
    const struct assay_plan_item **sel = calloc(n_plan, sizeof *sel);
    struct assay_verify_ctx *ctx = NULL;
    if (res == NULL || sel == NULL ||
        assay_verify_ctx_init(&ctx, assay_cli_fixtures(), o->seed) != ASSAY_OK) {
        free(res);
        free(sel);
        return false;
    }
    size_t n = 0;
    for (size_t i = 0; i < n_plan; i++) {
        bool want = o->family == NULL || strcmp(assay_family_str(plan[i].family), o->family) == 0;
        if (o->n_checks > 0) {
            want = false;
            for (size_t j = 0; j < o->n_checks; j++) {
                want = want || strcmp(plan[i].name, o->checks[j]) == 0;
            }
        }
        if (want) {
            sel[n++] = &plan[i];
        }
    }
    assay_verify_set_program(ctx, assay_cli_program());
    assay_verify_set_repro_dir(ctx, o->out);
    assay_verify_set_isolation(ctx, &o->iso);
    assay_cli_mpi_set_check_timeout(o->iso.timeout_s);
    bool ok = assay_cli_run_items("run", ctx, sel, n, o->engine, NULL, res, &n);
    assay_verify_finalize(res, n);
    if (ok && !o->no_shrink && assay_shard_world_rank() == 0) {
        assay_cli_shrink_failures("run", ctx, sel, res, n, o->engine, NULL, o->out);
    }
    assay_verify_ctx_free(ctx);
    free(sel);
    *res_out = res;
    *n_out = n;
    return ok;
}

/* Everything the benchmark part produces, for the report and the tables. */
struct bench_part {
    struct assay_adapter adapter;
    struct assay_workload *w;
    struct assay_slo slo;
    struct assay_seedtable table;
    bool have_table;
    enum assay_status table_status;
    struct assay_bench_result bench;
    bool have_bench;
    struct assay_sweep_params sweep_params;
    struct assay_sweep_result sweep;
    bool have_sweep;
    enum assay_status sweep_status;
    double capacity;
    bool failed; /* a part could not run */
};

static void bench(const struct run_opts *o, struct bench_part *b, cJSON *report)
{
    int32_t runs = o->runs > 0 ? (int32_t)o->runs : o->quick ? 1 : ASSAY_BENCH_DEFAULT_RUNS;
    /* The seed's table: open loop above capacity, closed at 2, 4 and 8. */
    struct assay_seedtable_params tp = assay_seedtable_default_params();
    tp.seed = o->seed;
    tp.n_runs = runs;
    tp.timeout_s = 300;
    struct assay_cli_ticker *tick = assay_cli_ticker_start("run", "benchmark: the seed's table (open "
                                                                  "loop, closed loop at 2, 4, 8 "
                                                                  "workers)");
    tp.progress = (struct assay_bench_progress){assay_cli_ticker_progress, tick, NULL};
    b->table_status = assay_seedtable_run(&b->adapter, b->w, &tp, &b->slo, &b->table);
    assay_cli_ticker_stop(tick);
    b->have_table = b->table.n_rows > 0;
    b->capacity = b->table.capacity;
    if (b->table_status != ASSAY_OK) {
        b->failed = true;
        assay_report_add_note(report, "The seed's table stopped early: %s (%d of %d rows completed).",
                              assay_status_str(b->table_status), (int)b->table.n_rows,
                              1 + tp.n_closed);
    }
    if (!(isfinite(b->capacity) && b->capacity > 0)) {
        tick = assay_cli_ticker_start("run", "benchmark: measuring capacity");
        enum assay_status st = assay_bench_capacity(&b->adapter, b->w, ASSAY_LOADGEN_WARMUP_AUTO, 300, &b->capacity);
        assay_cli_ticker_stop(tick);
        if (st != ASSAY_OK) {
            b->failed = true;
            assay_report_add_note(report, "The engine's capacity could not be measured (%s): no "
                                          "benchmark or sweep.",
                                  assay_status_str(st));
            return;
        }
    }
    /* The sweep, bounded: a probe at rate r lasts about n / r seconds. */
    b->sweep_params = assay_sweep_default_params();
    b->sweep_params.start_rate = b->capacity;
    b->sweep_params.min_rate = b->capacity / (o->quick ? 4.0 : 8.0);
    b->sweep_params.max_rate = b->capacity * 8.0;
    b->sweep_params.max_probes = o->quick ? 4 : 6;
    b->sweep_params.rel_tol = 0.1;
    b->sweep_params.seed = o->seed;
    b->sweep_params.timeout_s = 300;
    tick = assay_cli_ticker_start("run", "benchmark: rate sweep");
    b->sweep_params.progress = (struct assay_bench_progress){assay_cli_ticker_progress, tick, NULL};
    b->sweep_status = assay_rate_sweep(&b->adapter, b->w, &b->sweep_params, &b->slo, &b->sweep);
    assay_cli_ticker_stop(tick);
    b->have_sweep = true;
    if (b->sweep_status != ASSAY_OK) {
        b->failed = true;
        assay_report_add_note(report, "The rate sweep stopped early: %s.",
                              assay_status_str(b->sweep_status));
    }
    /* The benchmark proper: an open loop at the stated rate, or else at half
     * the highest rate the sweep found to hold the SLO (a 48-request sweep
     * probe is one draw: at its edge, other seeds miss the SLO), or at half
     * the capacity when no rate held it. */
    struct assay_loadgen_params lp = assay_loadgen_default_params();
    lp.kind = ASSAY_LOADGEN_OPEN;
    lp.arrival = ASSAY_ARRIVAL_POISSON;
    lp.seed = o->seed;
    lp.timeout_s = 300;
    if (o->rate > 0) {
        lp.rate = o->rate;
    } else if (b->sweep.best_rate > 0) {
        /* Headroom under the SLO, which is not headroom in the engine: a
         * lenient SLO holds well above the rate at which requests start to
         * queue. Said from the one capacity figure the report has, as the
         * benchmark's section says it (reports/html_bench.c). */
        lp.rate = 0.5 * b->sweep.best_rate;
        char queue[200] = "";
        if (isfinite(b->capacity) && b->capacity > 0) {
            snprintf(queue, sizeof queue,
                     lp.rate > b->capacity
                         ? " It is above the %.4g req/s the engine served with the whole "
                           "workload at once, so requests queue at it."
                         : " It is below the %.4g req/s the engine served with the whole "
                           "workload at once.",
                     b->capacity);
        }
        assay_report_add_note(report,
                              "The benchmark's offered rate, %.4g req/s, is half the highest rate "
                              "at which the rate sweep kept goodput at %.0f%% or more (%.4g "
                              "req/s): headroom under the SLO.%s",
                              lp.rate, 100 * b->sweep_params.target, b->sweep.best_rate, queue);
    } else {
        lp.rate = 0.5 * b->capacity;
        assay_report_add_note(report,
                              "No rate the sweep probed kept goodput at %.0f%%; the benchmark "
                              "offers half the capacity measured with one burst of the workload "
                              "(%.4g of %.4g req/s).",
                              100 * b->sweep_params.target, lp.rate, b->capacity);
    }
    tick = assay_cli_ticker_start("run", "benchmark: open loop at the stated rate");
    lp.progress = (struct assay_bench_progress){assay_cli_ticker_progress, tick, NULL};
    enum assay_status st = assay_bench_run(&b->adapter, b->w, &lp, &b->slo, runs, &b->bench);
    assay_cli_ticker_stop(tick);
    b->have_bench = b->bench.n_runs > 0;
    if (st != ASSAY_OK) {
        b->failed = true;
        assay_report_add_note(report, "The benchmark stopped early: %s.", assay_status_str(st));
    }
}

static void bench_release(struct bench_part *b)
{
    assay_seedtable_release(&b->table);
    assay_bench_result_release(&b->bench);
    assay_workload_free(b->w);
    assay_adapter_close(&b->adapter);
}

/* Put the benchmark's parts into the report; false when memory ran out. */
static bool bench_to_report(const struct bench_part *b, cJSON *report, char *explanation,
                            size_t size)
{
    cJSON *j = NULL;
    explanation[0] = '\0';
    if (b->have_table) {
        if (assay_report_seedtable_json(&b->table, b->w, &j) != ASSAY_OK) {
            return false;
        }
        snprintf(explanation, size, "%s", assay_json_str(j, "explanation", ""));
        if (assay_report_set(report, "seed_table", j) != ASSAY_OK) {
            return false;
        }
    }
    if (b->have_bench) {
        if (assay_bench_result_to_json(&b->bench, b->w, &j) != ASSAY_OK ||
            assay_report_set(report, "benchmark", j) != ASSAY_OK) {
            return false;
        }
    }
    if (b->have_sweep) {
        if (assay_report_sweep_json(&b->sweep, &b->sweep_params, &b->slo, b->sweep_status, &j) !=
                ASSAY_OK ||
            assay_report_set(report, "rate_sweep", j) != ASSAY_OK) {
            return false;
        }
    }
    return true;
}

int assay_cmd_run(int argc, char **argv)
{
    struct run_opts o = {
        .out = "assay-report",
        .engine = "bundled",
        .bench_engine = ASSAY_CLI_BENCH_ENGINE,
        .workload = ASSAY_CLI_BENCH_WORKLOAD,
        .slo = ASSAY_CLI_BENCH_SLO,
        .seed = 1,
        .iso = {true, ASSAY_ISOLATION_TIMEOUT_S},
    };
    int rc = parse(argc, argv, &o);
    if (rc != ASSAY_EXIT_OK) {
        return rc < 0 ? ASSAY_EXIT_OK : rc;
    }
    int64_t t0 = assay_now_ns();
    if (assay_shard_world_rank() != 0) {
        /* Another rank of an MPI run: its share of the checks, once rank 0
         * has found the input good; rank 0 benchmarks and reports. */
        struct assay_check_result *res = NULL;
        size_t n = 0;
        bool ok = assay_cli_mpi_ready(true) && verify(&o, &res, &n);
        free(res);
        return ok ? ASSAY_EXIT_OK : ASSAY_EXIT_USAGE;
    }
    char command_line[2048];
    assay_cli_join_argv(argc, argv, command_line, sizeof command_line);
    struct bench_part b;
    memset(&b, 0, sizeof b);
    /* Everything that can be wrong with the input is checked before the
     * long part starts. */
    bool prepared = assay_cli_prepare_out_dir("run", o.out) &&
                    assay_cli_open_engine("run", o.no_bench ? o.engine : o.bench_engine,
                                          &b.adapter);
    prepared = prepared && (o.no_bench || (assay_cli_load_workload("run", o.workload, &b.adapter,
                                                                   &b.w) &&
                                           assay_cli_load_slo("run", o.slo, &b.slo)));
    cJSON *report = NULL;
    if (prepared && assay_report_create("run", command_line, &report) != ASSAY_OK) {
        fprintf(stderr, "assay run: out of memory\n");
        prepared = false;
    }
    if (!assay_cli_mpi_ready(prepared)) {
        cJSON_Delete(report);
        bench_release(&b);
        return ASSAY_EXIT_USAGE;
    }
    int status = ASSAY_EXIT_OK;
    struct assay_check_result *res = NULL;
    size_t n = 0;
    bool ok = verify(&o, &res, &n);
    if (!ok) {
        fprintf(stderr, "assay run: out of memory during verification\n");
        status = ASSAY_EXIT_USAGE;
    }
    if (!o.no_bench) {
        bench(&o, &b, report);
    }
    /* The report. */
    size_t n_plan;
    assay_verify_plan(&n_plan);
    cJSON *stamp = NULL, *verify_info = cJSON_CreateObject();
    struct assay_stamp_seed seeds[] = {
        {"master", o.seed}, {"bench", o.seed}, {"seed_table", o.seed}, {"sweep", o.seed}};
    ok = ok && verify_info != NULL &&
         cJSON_AddStringToObject(verify_info, "base_spec", o.engine) != NULL &&
         cJSON_AddNumberToObject(verify_info, "master_seed", (double)o.seed) != NULL &&
         cJSON_AddNumberToObject(verify_info, "plan_size", (double)n_plan) != NULL &&
         cJSON_AddNumberToObject(verify_info, "checks_run", (double)n) != NULL;
    if (ok) {
        ok = assay_report_set(report, "verify", verify_info) == ASSAY_OK;
        verify_info = NULL;
    }
    cJSON_Delete(verify_info);
    ok = ok && assay_stamp_create(&b.adapter, seeds, o.no_bench ? 1 : 4, &stamp) == ASSAY_OK &&
         assay_report_set(report, "stamp", stamp) == ASSAY_OK &&
         assay_report_add_checks(report, res, n) == ASSAY_OK;
    char explanation[4096] = "";
    ok = ok && bench_to_report(&b, report, explanation, sizeof explanation);
    if (ok && (o.n_checks > 0 || o.family != NULL)) {
        ok = assay_report_add_note(report, "Only %zu of the plan's %zu checks were run (--check or "
                                           "--family).",
                                   n, n_plan) == ASSAY_OK;
    }
    ok = ok && assay_report_set(report, "duration_s",
                                cJSON_CreateNumber((double)(assay_now_ns() - t0) / 1e9)) == ASSAY_OK;
    if (!ok) {
        fprintf(stderr, "assay run: out of memory while building the report\n");
        status = ASSAY_EXIT_USAGE;
    }
    /* The exit status, before the report that records it: a failed check
     * first, then a part that could not run, then too few checks run. */
    int verdict_status = assay_cli_exit_status("run", res, n, &o.require);
    if (verdict_status == ASSAY_EXIT_FAIL) {
        status = ASSAY_EXIT_FAIL;
    } else if (status == ASSAY_EXIT_OK && (verdict_status == ASSAY_EXIT_USAGE || b.failed)) {
        status = ASSAY_EXIT_USAGE;
    } else if (status == ASSAY_EXIT_OK) {
        status = verdict_status;
    }
    if (ok && assay_report_set_outcome(report, o.require.given ? o.require.text : NULL,
                                       assay_require_needed(&o.require, (int64_t)n),
                                       status) != ASSAY_OK) {
        fprintf(stderr, "assay run: out of memory while building the report\n");
        status = ASSAY_EXIT_USAGE;
        ok = false;
    }
    struct assay_report_paths paths;
    if (ok && !assay_cli_write_report("run", report, o.out, &paths)) {
        status = ASSAY_EXIT_USAGE;
        ok = false;
    }
    if (o.json && ok) {
        assay_cli_print_json(report);
    } else if (!o.json) {
        assay_cli_print_results(stdout, res, n);
        if (b.have_bench) {
            printf("\n");
            assay_cli_print_bench(stdout, &b.bench, b.w);
        }
        if (b.have_table) {
            printf("\n");
            assay_cli_print_paragraph(stdout, ASSAY_REPORT_SEED_TABLE_ABOUT);
            printf("\n");
            assay_cli_print_seedtable(stdout, &b.table, explanation);
        }
        if (b.have_sweep) {
            printf("\n");
            assay_cli_print_sweep(stdout, &b.sweep, &b.sweep_params);
        }
        if (ok) {
            printf("\nReport: %s\n        %s\n        %s\n", paths.json, paths.html, paths.md);
        }
        printf("(%.0f s)\n", (double)(assay_now_ns() - t0) / 1e9);
    }
    cJSON_Delete(report);
    free(res);
    bench_release(&b);
    return status;
}
