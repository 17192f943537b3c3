/* assay compare BASELINE CANDIDATE: is the candidate still right, and is it
 * really faster? The merge check of an optimisation (checks/pairwise.h,
 * bench/speedup.h, reports/compare_report.h). */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/spec.h"
#include "bench/speedup.h"
#include "bench_cli.h"
#include "checks/pairwise.h"
#include "checks/context.h"
#include "checks/isolate.h"
#include "checks/plan.h"
#include "checks/shard.h"
#include "cli.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/rng.h"
#include "reports/compare_report.h"
#include "reports/report.h"
#include "reports/schema.h"
#include "reports/stamp.h"
#include "reports/text.h"
#include "reports/write.h"

#define COMPARE_DEFAULT_WORKLOAD ASSAY_CLI_BENCH_WORKLOAD
#define COMPARE_MAX_CHECK_WORKLOADS 16

static void usage(FILE *out)
{
    fprintf(out,
            "usage: assay compare BASELINE CANDIDATE [--out DIR] [--workload FILE] [--slo FILE]\n"
            "                     [--pairs N] [--rate R] [--arrival KIND] [--threshold F]\n"
            "                     [--gate FIGURES] [--confidence C] [--bootstrap N] [--seed N]\n"
            "                     [--check NAME]... [--check-workload NAME=FILE]... [--model FILE]\n"
            "                     [--samples N] [--dist-params P] [--tie-tol X] [--no-bench]\n"
            "                     [--no-checks] [--no-shrink] [--shrink-seconds S] [--timeout S]\n"
            "                     [--no-fork] [--require-checks N] [--list] [--json]\n"
            "\n"
            "Validate an optimisation before merging: is CANDIDATE still right, and is it\n"
            "really faster than BASELINE? Both are engine specs (bundled:..., openai:URL,\n"
            "plugin:PATH[:OPTIONS]).\n"
            "\n"
            "Correctness: the candidate's greedy tokens against the baseline's (the oracle's\n"
            "tie rule where assay has the weights) and against the oracle, the two-sample\n"
            "test of sampled tokens, goodness of fit and PIT against the oracle, and the\n"
            "property checks on the candidate (--list). A failure is shrunk to a small\n"
            "reproducer with the one command that reruns it.\n"
            "Speed: the same workload on both, runs interleaved in pairs (order alternating),\n"
            "each figure (TTFT and TPOT p50/p90/p99, throughput, goodput under the SLO) as\n"
            "candidate / baseline with a bootstrap confidence interval over the pairs.\n"
            "\n"
            "  --out DIR             report.json, report.html, report.md, compare.md (for a\n"
            "                        pull request), junit.xml, reproducers (default assay-compare)\n"
            "  --workload FILE       speed workload (default fixtures/" COMPARE_DEFAULT_WORKLOAD ")\n"
            "  --slo FILE            SLO of goodput (default fixtures/" ASSAY_CLI_BENCH_SLO ")\n"
            "  --pairs N             interleaved pairs of runs, >= 2 (default %d)\n"
            "  --rate R              offered req/s (default: the workload's own arrival times)\n"
            "  --arrival KIND        the open loop's arrivals: trace (the workload's own times,\n"
            "                        the default without --rate), or with --rate poisson\n"
            "                        (the default with it), gamma (cv 2) or constant\n"
            "  --threshold F         a significant slowdown beyond F is a regression (default %g)\n"
            "  --gate FIGURES        figures whose regression fails the run, comma-separated\n"
            "                        (default all: ttft_p50,ttft_p90,ttft_p99,tpot_p50,tpot_p90,\n"
            "                        tpot_p99,throughput,goodput)\n"
            "  --confidence C        of the intervals (default %g)\n"
            "  --bootstrap N         bootstrap replicates (default %d)\n"
            "  --seed N              master seed: checks, schedules, bootstrap (default 1)\n"
            "  --check NAME          run only this correctness check (repeatable)\n"
            "  --check-workload NAME=FILE  that check's workload instead of its fixture\n"
            "  --model FILE.gguf     the weights both engines run, for the oracle (default: a\n"
            "                        bundled engine's own)\n"
            "  --samples N           distributional samples per engine (default %d)\n"
            "  --dist-params P       sampling of the distributional checks (t=0.8,top_k=20,...)\n"
            "  --tie-tol X           the tie rule's logit tolerance (default 0.001)\n"
            "  --no-bench            correctness only;   --no-checks  speed only\n"
            "  --no-shrink           report failures without shrinking them\n"
            "  --shrink-seconds S    shrinking budget per failure (default %g)\n"
            "  --timeout S           a check still running after S seconds is killed and\n"
            "                        FAILs (default " ASSAY_ISOLATION_TIMEOUT_TEXT "; 0: no limit)\n"
            "  --no-fork             run the checks in this process (for a debugger); by\n"
            "                        default each runs in a child process, so a crash, an\n"
            "                        abort or a hang of the candidate is that check's FAIL\n"
            "  --require-checks N    at least N correctness checks must run (PASS or FAIL; a\n"
            "                        SKIP checks nothing), or N%% of those selected; fewer is\n"
            "                        exit status 4\n"
            "  --list                list the correctness checks and exit\n"
            "  --json                print the report's JSON instead of the tables\n"
            "\n"
            "Exit status: 0 the candidate is correct and no gated figure is slower beyond\n"
            "the threshold; 1 a correctness check failed; 2 usage or input error, or a\n"
            "part could not run; 3 a significant performance regression; 4 fewer\n"
            "correctness checks ran than --require-checks asks for (1 and 2 outrank 4, which\n"
            "outranks 3).\n",
            ASSAY_SPEEDUP_DEFAULT_PAIRS, ASSAY_SPEEDUP_DEFAULT_THRESHOLD,
            ASSAY_SPEEDUP_DEFAULT_CONFIDENCE, ASSAY_SPEEDUP_DEFAULT_BOOT,
            ASSAY_PAIRWISE_DEFAULT_SAMPLES, ASSAY_SHRINK_MAX_SECONDS);
}

/* The index of compare check name in the registry's compare checks, or -1. */
static int32_t compare_index(const char *name)
{
    size_t n;
    const struct assay_plan_item *all = assay_plan_for(ASSAY_COMMAND_COMPARE, &n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(all[i].name, name) == 0) {
            return (int32_t)i;
        }
    }
    return -1;
}

struct check_workload {
    int32_t check;
    const char *path;
};

struct opts {
    const char *baseline, *candidate;
    const char *out, *workload, *slo, *model, *dist_params, *gate;
    uint64_t pairs, boot, seed, samples;
    double rate, threshold, confidence, tie_tol, shrink_seconds;
    enum assay_arrival_kind arrival;
    bool arrival_set;
    const char *checks[64];
    size_t n_checks;
    struct check_workload cw[COMPARE_MAX_CHECK_WORKLOADS];
    size_t n_cw;
    bool no_bench, no_checks, no_shrink, list, json, no_fork;
    double timeout_s;
    struct assay_require require;
};

static bool parse_double(const char *option, const char *text, double lo, double hi, double *out)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "assay compare: %s expects a number in [%g, %g], got '%s'\n", option, lo,
                hi, text);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_u64_range(const char *option, const char *text, uint64_t lo, uint64_t hi,
                            uint64_t *out)
{
    if (!assay_cli_parse_u64(option, text, out)) {
        return false;
    }
    if (*out < lo || *out > hi) {
        fprintf(stderr, "assay compare: %s expects %llu..%llu, got '%s'\n", option,
                (unsigned long long)lo, (unsigned long long)hi, text);
        return false;
    }
    return true;
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {
        {"out", required_argument, NULL, 'o'},        {"workload", required_argument, NULL, 'w'},
        {"slo", required_argument, NULL, 'S'},        {"pairs", required_argument, NULL, 'p'},
        {"rate", required_argument, NULL, 'R'},       {"arrival", required_argument, NULL, 'a'},
        {"threshold", required_argument, NULL, 't'},  {"gate", required_argument, NULL, 'g'},
        {"confidence", required_argument, NULL, 'C'}, {"bootstrap", required_argument, NULL, 'B'},
        {"seed", required_argument, NULL, 's'},       {"check", required_argument, NULL, 'c'},
        {"check-workload", required_argument, NULL, 'W'},
        {"model", required_argument, NULL, 'm'},      {"samples", required_argument, NULL, 'n'},
        {"dist-params", required_argument, NULL, 'd'}, {"tie-tol", required_argument, NULL, 'T'},
        {"no-bench", no_argument, NULL, 'N'},         {"no-checks", no_argument, NULL, 'K'},
        {"no-shrink", no_argument, NULL, 'X'},        {"shrink-seconds", required_argument, NULL, 'x'},
        {"list", no_argument, NULL, 'l'},             {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 'L'},    {"no-fork", no_argument, NULL, 'F'},
        {"require-checks", required_argument, NULL, 'Q'},
        {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0},
    };
    int c;
    assay_cli_options_begin();
    while ((c = getopt_long(argc, argv, ASSAY_CLI_OPTSTRING, lo, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case 'o': o->out = optarg; break;
        case 'w': o->workload = optarg; break;
        case 'S': o->slo = optarg; break;
        case 'p': ok = parse_u64_range("--pairs", optarg, 2, 1000, &o->pairs); break;
        case 'R': ok = parse_double("--rate", optarg, 1e-6, 1e9, &o->rate); break;
        case 'a':
            o->arrival_set = true;
            ok = assay_cli_parse_arrival("compare", optarg, &o->arrival);
            break;
        case 't': ok = parse_double("--threshold", optarg, 0, 1e6, &o->threshold); break;
        case 'g': o->gate = optarg; break;
        case 'C': ok = parse_double("--confidence", optarg, 0.5, 0.9999, &o->confidence); break;
        case 'B': ok = parse_u64_range("--bootstrap", optarg, 100, 1000000, &o->boot); break;
        case 's': ok = assay_cli_parse_u64("--seed", optarg, &o->seed); break;
        case 'c':
            if (o->n_checks == sizeof o->checks / sizeof o->checks[0]) {
                fprintf(stderr, "assay compare: too many --check options\n");
                ok = false;
            } else if (assay_plan_find_in(ASSAY_COMMAND_COMPARE, optarg) == NULL) {
                fprintf(stderr, "assay compare: no check called '%s' (assay compare --list)\n",
                        optarg);
                ok = false;
            } else {
                o->checks[o->n_checks++] = optarg;
            }
            break;
        case 'W': {
            const char *eq = strchr(optarg, '=');
            char name[96];
            int32_t k = -1;
            if (eq != NULL && (size_t)(eq - optarg) < sizeof name) {
                snprintf(name, sizeof name, "%.*s", (int)(eq - optarg), optarg);
                k = compare_index(name);
            }
            if (k < 0 || eq[1] == '\0' || o->n_cw == COMPARE_MAX_CHECK_WORKLOADS) {
                fprintf(stderr, "assay compare: --check-workload expects NAME=FILE with a check "
                                "of assay compare --list, got '%s'\n", optarg);
                ok = false;
            } else {
                o->cw[o->n_cw++] = (struct check_workload){k, eq + 1};
            }
            break;
        }
        case 'm': o->model = optarg; break;
        case 'n': ok = parse_u64_range("--samples", optarg, 100, 100000000, &o->samples); break;
        case 'd': o->dist_params = optarg; break;
        case 'T': ok = parse_double("--tie-tol", optarg, 1e-12, 100, &o->tie_tol); break;
        case 'N': o->no_bench = true; break;
        case 'K': o->no_checks = true; break;
        case 'X': o->no_shrink = true; break;
        case 'x': ok = parse_double("--shrink-seconds", optarg, 1, 86400, &o->shrink_seconds); break;
        case 'l': o->list = true; break;
        case 'j': o->json = true; break;
        case 'L': ok = assay_cli_parse_timeout(optarg, &o->timeout_s); break;
        case 'F': o->no_fork = true; break;
        case 'Q': ok = assay_cli_parse_require("compare", optarg, &o->require); break;
        case 'h': usage(stdout); return -1;
        default: return assay_cli_bad_option("compare", c, argc, argv);
        }
        if (!ok) {
            return ASSAY_EXIT_USAGE;
        }
    }
    if (o->list) {
        return ASSAY_EXIT_OK;
    }
    if (argc - optind != 2) {
        fprintf(stderr, "assay compare: expected BASELINE and CANDIDATE engine specs, got %d "
                        "argument%s (assay compare --help)\n",
                argc - optind, argc - optind == 1 ? "" : "s");
        return ASSAY_EXIT_USAGE;
    }
    o->baseline = argv[optind];
    o->candidate = argv[optind + 1];
    if (o->no_bench && o->no_checks) {
        fprintf(stderr, "assay compare: --no-bench and --no-checks leave nothing to do\n");
        return ASSAY_EXIT_USAGE;
    }
    if (!assay_cli_check_open_arrival("compare", o->arrival_set, o->arrival, o->rate)) {
        return ASSAY_EXIT_USAGE;
    }
    const char *specs[2] = {o->baseline, o->candidate};
    for (int i = 0; i < 2; i++) {
        struct assay_diag diag;
        assay_diag_clear(&diag);
        if (assay_spec_check(specs[i], &diag) != ASSAY_OK) {
            char why[900];
            fprintf(stderr, "assay compare: %s: %s\n", i == 0 ? "BASELINE" : "CANDIDATE",
                    assay_diag_format(&diag, why, sizeof why));
            return ASSAY_EXIT_USAGE;
        }
    }
    return ASSAY_EXIT_OK;
}

/* --gate: a comma-separated list of figure names. */
static bool parse_gate(const char *list, bool *gate)
{
    for (int m = 0; m < ASSAY_SPEEDUP_COUNT; m++) {
        gate[m] = list == NULL;
    }
    if (list == NULL) {
        return true;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *name = strtok_r(buf, ",", &save); name != NULL; name = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int m = 0; m < ASSAY_SPEEDUP_COUNT; m++) {
            if (strcmp(name, assay_speedup_metric_name((enum assay_speedup_metric)m)) == 0) {
                found = m;
            }
        }
        if (found < 0) {
            fprintf(stderr, "assay compare: --gate: no figure called '%s' (ttft_p50, ttft_p90, "
                            "ttft_p99, tpot_p50, tpot_p90, tpot_p99, throughput, goodput)\n", name);
            return false;
        }
        gate[found] = true;
    }
    return true;
}

static const char *check_workload(const struct opts *o, int32_t check)
{
    const char *path = NULL;
    for (size_t i = 0; i < o->n_cw; i++) {
        if (o->cw[i].check == check) {
            path = o->cw[i].path;
        }
    }
    return path;
}

/* The correctness half: run, finalise (Holm), shrink failures. */
struct correctness {
    struct assay_check_result *res;
    int32_t *index; /* (n) the pairwise check of res[i] */
    size_t n;
    struct assay_shrink_result *shrunk; /* (n) */
    struct assay_compare_repro *repros; /* (n) */
    size_t n_repros;
};

static bool run_checks(const struct opts *o, struct assay_pairwise *pw, struct correctness *k)
{
    size_t n_all;
    const struct assay_plan_item *all = assay_plan_for(ASSAY_COMMAND_COMPARE, &n_all);
    k->res = calloc(n_all, sizeof *k->res);
    k->index = calloc(n_all, sizeof *k->index);
    k->shrunk = calloc(n_all, sizeof *k->shrunk);
    k->repros = calloc(n_all, sizeof *k->repros);
    if (k->res == NULL || k->index == NULL || k->shrunk == NULL || k->repros == NULL) {
        return false;
    }
    for (size_t i = 0; i < n_all; i++) {
        bool want = o->n_checks == 0;
        for (size_t j = 0; j < o->n_checks; j++) {
            want = want || strcmp(o->checks[j], all[i].name) == 0;
        }
        if (want) {
            k->index[k->n++] = (int32_t)i;
        }
    }
    int64_t t0_ns = assay_now_ns();
    for (size_t i = 0; i < k->n; i++) {
        const struct assay_plan_item *item = &all[k->index[i]];
        struct assay_cli_ticker *tick = assay_cli_check_started("compare", i, k->n, item->name);
        /* Under mpirun (checks/shard.h): a distributional check on every
         * rank, any other on rank 0 alone. */
        enum assay_status st = ASSAY_OK;
        if (assay_shard_check_begin(item->name, item->family, assay_plan_item_shared(item),
                                    &k->res[i])) {
            st = assay_pairwise_run_check(pw, item, check_workload(o, k->index[i]), &k->res[i]);
        }
        if (assay_shard_check_end(&k->res[i]) != ASSAY_OK || st != ASSAY_OK) {
            assay_cli_ticker_stop(tick);
            k->n = i;
            return false;
        }
        assay_cli_check_done("compare", tick, i, k->n, &k->res[i], t0_ns);
    }
    assay_verify_finalize(k->res, k->n);
    if (o->no_shrink || assay_shard_world_rank() != 0) {
        return true;
    }
    for (size_t i = 0; i < k->n; i++) {
        if (k->res[i].verdict != ASSAY_VERDICT_FAIL) {
            continue;
        }
        char stem[128], label[160];
        snprintf(stem, sizeof stem, "repro-%s", k->res[i].name);
        snprintf(label, sizeof label, "shrinking the failure of %s", k->res[i].name);
        struct assay_shrink_opts so = {o->out, stem, 0, o->shrink_seconds};
        struct assay_cli_ticker *tick = assay_cli_ticker_start("compare", label);
        enum assay_status st = assay_pairwise_shrink(
            pw, &all[k->index[i]], check_workload(o, k->index[i]), &so, &k->shrunk[i]);
        assay_cli_ticker_stop(tick);
        if (st == ASSAY_ERR_NOMEM) {
            return false;
        }
        if (st == ASSAY_OK && k->shrunk[i].reproduced && k->shrunk[i].shrinkable) {
            k->repros[k->n_repros++] = (struct assay_compare_repro){k->res[i].name, &k->shrunk[i]};
        }
    }
    return true;
}

static void correctness_release(struct correctness *k)
{
    free(k->res);
    free(k->index);
    free(k->shrunk);
    free(k->repros);
}

/* The speed table on a terminal. */
static void print_speed(FILE *out, const struct assay_speedup_result *s)
{
    if (s->verdict == ASSAY_SPEEDUP_NOT_MEASURED) {
        fprintf(out, "speed: not measured: %s\n", s->error);
        return;
    }
    char ci_head[48];
    snprintf(ci_head, sizeof ci_head, "ratio [%.0f%% CI]", 100 * s->params.confidence);
    fprintf(out, "%-11s %11s %11s %14s  %-26s %s\n", "figure", "baseline", "candidate", "change",
            ci_head, "verdict");
    for (int m = 0; m < ASSAY_SPEEDUP_COUNT; m++) {
        const struct assay_speedup_figure *f = &s->fig[m];
        enum assay_speedup_metric mm = (enum assay_speedup_metric)m;
        char a[32], b[32], ch[48], r[32], lo[32], hi[32], ci[100];
        if (assay_speedup_lower_is_better(mm)) {
            assay_text_seconds(a, sizeof a, f->baseline);
            assay_text_seconds(b, sizeof b, f->candidate);
        } else {
            assay_text_num(a, sizeof a, f->baseline, 4);
            assay_text_num(b, sizeof b, f->candidate, 4);
        }
        snprintf(ci, sizeof ci, "%s [%s, %s]", assay_speedup_ratio_text(r, sizeof r, f->ratio),
                 assay_speedup_ratio_text(lo, sizeof lo, f->lo),
                 assay_speedup_ratio_text(hi, sizeof hi, f->hi));
        fprintf(out, "%-11s %11s %11s %14s  %-26s %s\n", assay_speedup_metric_label(mm), a, b,
                f->compared ? assay_speedup_describe(ch, sizeof ch, f->ratio) : "-",
                f->compared ? ci : "(no SLO)",
                !f->compared                        ? "-"
                : f->regression                     ? "REGRESSION"
                : f->change == ASSAY_SPEEDUP_BETTER ? "better"
                : f->change == ASSAY_SPEEDUP_WORSE  ? "worse"
                                                    : "same");
    }
    fprintf(out,
            "(%d pairs, runs interleaved with the order alternating; ratio = candidate / baseline "
            "over the pooled requests; %.0f%% interval from a bootstrap over pairs of runs "
            "(%d replicates, log ratio +- t(pairs - 1) sd); throughput in output tokens/s, "
            "goodput in requests/s within the SLO; a regression is worse by more than %g%% with the whole interval beyond it)\n",
            (int)s->n_pairs, 100 * s->params.confidence, (int)s->params.n_boot,
            100 * s->params.threshold);
}

static bool open_engine(const char *which, const char *spec, struct assay_model_cache *models,
                        struct assay_adapter *out)
{
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_adapter_open_spec_cached(spec, models, out, &diag) != ASSAY_OK) {
        char why[900];
        fprintf(stderr, "assay compare: %s '%s': %s\n", which, spec,
                assay_diag_format(&diag, why, sizeof why));
        return false;
    }
    return true;
}

/* The "verify" member: which spec the checks ran on, the seed, how many. */
static bool add_verify_info(cJSON *report, const struct opts *o, size_t n_run)
{
    size_t n_all;
    assay_plan_for(ASSAY_COMMAND_COMPARE, &n_all);
    cJSON *v = cJSON_CreateObject();
    bool ok = v != NULL && cJSON_AddStringToObject(v, "base_spec", o->candidate) != NULL &&
              cJSON_AddNumberToObject(v, "master_seed", (double)o->seed) != NULL &&
              cJSON_AddNumberToObject(v, "plan_size", (double)n_all) != NULL &&
              cJSON_AddNumberToObject(v, "checks_run", (double)n_run) != NULL;
    if (!ok) {
        cJSON_Delete(v);
        return false;
    }
    return assay_report_set(report, "verify", v) == ASSAY_OK; /* takes v, also on failure */
}

/* Write the pull-request summary and the JUnit XML next to the report. */
static bool write_summaries(const cJSON *report, const char *dir, char *md_path, char *junit_path,
                            size_t size)
{
    struct assay_diag diag;
    assay_diag_clear(&diag);
    char *text = NULL;
    size_t len = 0;
    snprintf(md_path, size, "%s/compare.md", dir);
    snprintf(junit_path, size, "%s/junit.xml", dir);
    enum assay_status st = assay_report_compare_summary(report, &text, &len);
    if (st == ASSAY_OK) {
        st = assay_report_write_file(md_path, text, len, &diag);
    }
    assay_free(text);
    text = NULL;
    if (st == ASSAY_OK) {
        st = assay_report_compare_junit(report, &text, &len);
    }
    if (st == ASSAY_OK) {
        st = assay_report_write_file(junit_path, text, len, &diag);
    }
    assay_free(text);
    if (st != ASSAY_OK) {
        char why[1200];
        fprintf(stderr, "assay compare: writing the summaries: %s\n",
                st == ASSAY_ERR_NOMEM ? "out of memory" : assay_diag_format(&diag, why, sizeof why));
        return false;
    }
    return true;
}

static void print_tables(const struct opts *o, const struct assay_pairwise *pw,
                         const struct correctness *k, const struct assay_speedup_result *speed,
                         const cJSON *cmp)
{
    printf("%s\n\n", assay_json_str(cmp, "verdict.headline", ""));
    if (!o->no_checks) {
        assay_cli_print_results(stdout, k->res, k->n);
        const char *weights = assay_pairwise_weights(pw);
        printf("oracle's weights: %s\n",
               weights[0] != '\0' ? weights : "none (the checks that need them were skipped)");
        for (size_t i = 0; i < k->n_repros; i++) {
            char sizes[300];
            const struct assay_shrink_result *sr = k->repros[i].shrunk;
            printf("shrunk %s: %s%s\n    %s\n", k->repros[i].check,
                   sr->shrinkable ? assay_shrink_format_sizes(sr, sizes, sizeof sizes)
                                  : "(no workload to shrink)",
                   sr->shrinkable && !sr->confirmed ? " (NOT confirmed on rerun)" : "",
                   sr->command);
        }
        printf("\n");
    }
    if (speed != NULL) {
        print_speed(stdout, speed);
        printf("\n");
    }
}

/* What the phases of a comparison share: the speed runs' parameters, the
 * engines and their inputs, what each half found, and the diagnostic of
 * the inputs' checks. */
struct compare_run {
    struct assay_speedup_params sp;
    struct assay_pairwise *pw;
    struct assay_model_cache *models;
    struct assay_adapter base, cand;
    struct assay_workload *w;
    struct correctness k;
    struct assay_speedup_result speed;
    bool have_speed;
    struct assay_diag diag;
};

/* The checks' pairing of the two engines from the options into r->pw;
 * false with the reason on stderr. */
static bool init_pairwise(const struct opts *o, struct compare_run *r)
{
    struct assay_pairwise_params pp = assay_pairwise_default_params();
    pp.baseline = o->baseline;
    pp.candidate = o->candidate;
    pp.model = o->model;
    pp.fixtures = assay_cli_fixtures();
    pp.seed = o->seed;
    pp.samples = (int64_t)o->samples;
    pp.dist_params = o->dist_params;
    pp.tie_tol = o->tie_tol;
    pp.no_fork = o->no_fork;
    pp.timeout_s = o->timeout_s;
    pp.program = assay_cli_program();
    assay_diag_clear(&r->diag);
    enum assay_status st = assay_pairwise_init(&r->pw, &pp, &r->diag);
    if (st != ASSAY_OK) {
        char why[1200];
        fprintf(stderr, "assay compare: %s\n",
                st == ASSAY_ERR_NOMEM ? "out of memory"
                                      : assay_diag_format(&r->diag, why, sizeof why));
        return false;
    }
    return true;
}

/* Open both engines; on rank 0, unless --no-bench, load the speed runs'
 * workload and SLO; read each --check-workload file. False with the reason
 * on stderr. */
static bool open_inputs(const struct opts *o, bool rank0, struct compare_run *r)
{
    /* The engines of the speed runs share their weights; the candidate's
     * is also the one the stamp describes. */
    bool ok = assay_model_cache_init(&r->models) == ASSAY_OK &&
              open_engine("BASELINE", o->baseline, r->models, &r->base) &&
              open_engine("CANDIDATE", o->candidate, r->models, &r->cand);
    if (ok && !o->no_bench && rank0) {
        ok = assay_cli_load_workload("compare", o->workload, &r->cand, &r->w) &&
             assay_cli_load_slo("compare", o->slo, &r->sp.slo);
        r->sp.has_slo = true;
    }
    for (size_t i = 0; ok && !o->no_checks && i < o->n_cw; i++) {
        /* A bad file is the user's to fix, not a check's ERROR row. */
        size_t n_all;
        const struct assay_plan_item *all = assay_plan_for(ASSAY_COMMAND_COMPARE, &n_all);
        const struct assay_plan_item *item = &all[o->cw[i].check];
        enum assay_status st = assay_pairwise_check_workload(r->pw, item, o->cw[i].path, &r->diag);
        if (st != ASSAY_OK) {
            char why[1200];
            fprintf(stderr, "assay compare: --check-workload %s=%s: %s\n", item->name,
                    o->cw[i].path,
                    st == ASSAY_ERR_NOMEM ? "out of memory"
                                          : assay_diag_format(&r->diag, why, sizeof why));
            ok = false;
        }
    }
    return ok;
}

/* The speed half: the interleaved pairs of runs of both engines into
 * r->speed, a ticker showing their progress. */
static void run_speed(const struct opts *o, struct compare_run *r)
{
    r->sp.n_pairs = (int32_t)o->pairs;
    r->sp.n_boot = (int32_t)o->boot;
    r->sp.confidence = o->confidence;
    r->sp.threshold = o->threshold;
    r->sp.boot_seed = assay_seed_derive(o->seed, "compare.bootstrap");
    r->sp.gen.seed = o->seed;
    if (o->rate > 0) {
        r->sp.gen.arrival = o->arrival;
        r->sp.gen.rate = o->rate;
        r->sp.gen.cv = 2.0;
    }
    char label[200];
    snprintf(label, sizeof label, "speed: %d interleaved pairs of runs", (int)r->sp.n_pairs);
    struct assay_cli_ticker *tick = assay_cli_ticker_start("compare", label);
    r->sp.gen.progress = (struct assay_bench_progress){assay_cli_ticker_progress, tick, NULL};
    assay_speedup_run(&r->base, &r->cand, r->w, &r->sp, &r->speed);
    assay_cli_ticker_stop(tick);
    r->have_speed = true;
}

/* The exit status: a correctness failure first, then a part that could
 * not run, then too few checks run, then a regression. */
static int exit_status(const struct opts *o, const struct compare_run *r)
{
    int verdict_status = assay_cli_exit_status("compare", r->k.res, r->k.n, &o->require);
    if (verdict_status == ASSAY_EXIT_FAIL) {
        return ASSAY_EXIT_FAIL;
    }
    if (verdict_status == ASSAY_EXIT_USAGE ||
        (r->have_speed && r->speed.verdict == ASSAY_SPEEDUP_NOT_MEASURED)) {
        return ASSAY_EXIT_USAGE;
    }
    if (verdict_status == ASSAY_EXIT_TOO_FEW) {
        return ASSAY_EXIT_TOO_FEW;
    }
    if (r->have_speed && r->speed.verdict == ASSAY_SPEEDUP_REGRESSION) {
        return ASSAY_EXIT_REGRESSION;
    }
    return ASSAY_EXIT_OK;
}

/* The report of both halves into *report (the caller deletes it), its
 * "compare" member also into *cmp; status is the exit status it records.
 * False when memory ran out. */
static bool build_report(const struct opts *o, const struct compare_run *r,
                         const char *command_line, int64_t t0, int status, cJSON **report,
                         cJSON **cmp)
{
    cJSON *stamp = NULL;
    struct assay_stamp_seed seeds[] = {
        {"master", o->seed}, {"schedule", r->sp.gen.seed}, {"bootstrap", r->sp.boot_seed}};
    bool ok = assay_report_create("compare", command_line, report) == ASSAY_OK &&
              assay_stamp_create(&r->cand, seeds, 3, &stamp) == ASSAY_OK &&
              assay_report_set(*report, "stamp", stamp) == ASSAY_OK &&
              assay_report_add_checks(*report, r->k.res, r->k.n) == ASSAY_OK &&
              add_verify_info(*report, o, r->k.n);
    struct assay_compare_facts facts = {
        .baseline_spec = o->baseline,
        .candidate_spec = o->candidate,
        .baseline = assay_pairwise_baseline_info(r->pw),
        .candidate = assay_pairwise_candidate_info(r->pw),
        .weights = assay_pairwise_weights(r->pw),
        .checks = r->k.res,
        .n_checks = r->k.n,
        .repros = r->k.repros,
        .n_repros = r->k.n_repros,
        .speed = r->have_speed ? &r->speed : NULL,
        .workload = r->w,
        .exit_status = status,
    };
    ok = ok && assay_report_compare_json(&facts, cmp) == ASSAY_OK &&
         assay_report_set(*report, "compare", *cmp) == ASSAY_OK;
    if (ok && o->n_checks > 0) {
        ok = assay_report_add_note(*report,
                                   "Only %zu of the correctness checks were run (--check).",
                                   r->k.n) == ASSAY_OK;
    }
    if (ok && o->no_checks) {
        ok = assay_report_add_note(*report, "No correctness check was run (--no-checks): this "
                                            "report says nothing about whether the candidate is "
                                            "right.") == ASSAY_OK;
    }
    ok = ok && assay_report_set(*report, "duration_s",
                                cJSON_CreateNumber((double)(assay_now_ns() - t0) / 1e9)) ==
                   ASSAY_OK;
    ok = ok && assay_report_set_outcome(*report, o->require.given ? o->require.text : NULL,
                                        assay_require_needed(&o->require, (int64_t)r->k.n),
                                        status) == ASSAY_OK;
    return ok;
}

/* Write the report and the summaries into --out when it was built (ok),
 * then print its JSON (--json) or the tables and where the files went. The
 * exit status: status, or 2 when a file could not be written. */
static int write_and_print(const struct opts *o, const struct compare_run *r, cJSON *report,
                           const cJSON *cmp, bool ok, int status, int64_t t0)
{
    struct assay_report_paths paths;
    char md_path[1100] = "", junit_path[1100] = "";
    if (ok && !assay_cli_write_report("compare", report, o->out, &paths)) {
        status = ASSAY_EXIT_USAGE;
        ok = false;
    }
    if (ok && !write_summaries(report, o->out, md_path, junit_path, sizeof md_path)) {
        status = ASSAY_EXIT_USAGE;
        ok = false;
    }
    if (o->json && ok) {
        assay_cli_print_json(report);
    } else if (!o->json) {
        print_tables(o, r->pw, &r->k, r->have_speed ? &r->speed : NULL, cmp);
        if (ok) {
            printf("Report: %s\n        %s\n        %s\nPull-request summary: %s\nJUnit: %s\n",
                   paths.json, paths.html, paths.md, md_path, junit_path);
        }
        printf("exit status %d (%.0f s)\n", status, (double)(assay_now_ns() - t0) / 1e9);
    }
    return status;
}

/* Rank 0's part once the inputs are in: the correctness half, the speed
 * half, then the report, written and printed. The exit status. */
static int run_and_report(const struct opts *o, struct compare_run *r, const char *command_line,
                          int64_t t0)
{
    /* Correctness. */
    if (!o->no_checks && !run_checks(o, r->pw, &r->k)) {
        fprintf(stderr, "assay compare: out of memory during the checks\n");
        return ASSAY_EXIT_USAGE;
    }
    /* Speed. */
    if (!o->no_bench) {
        run_speed(o, r);
    }
    int status = exit_status(o, r);
    cJSON *report = NULL, *cmp = NULL;
    bool ok = build_report(o, r, command_line, t0, status, &report, &cmp);
    if (!ok) {
        fprintf(stderr, "assay compare: out of memory while building the report\n");
        status = ASSAY_EXIT_USAGE;
    }
    status = write_and_print(o, r, report, cmp, ok, status, t0);
    cJSON_Delete(report);
    return status;
}

/* Free and close all that r holds. */
static void compare_run_release(struct compare_run *r)
{
    assay_speedup_release(&r->speed);
    correctness_release(&r->k);
    assay_workload_free(r->w);
    assay_adapter_close(&r->base);
    assay_adapter_close(&r->cand);
    assay_model_cache_free(r->models);
    assay_pairwise_free(r->pw);
}

int assay_cmd_compare(int argc, char **argv)
{
    struct opts o = {
        .out = "assay-compare",
        .workload = COMPARE_DEFAULT_WORKLOAD,
        .slo = ASSAY_CLI_BENCH_SLO,
        .pairs = ASSAY_SPEEDUP_DEFAULT_PAIRS,
        .boot = ASSAY_SPEEDUP_DEFAULT_BOOT,
        .seed = 1,
        .threshold = ASSAY_SPEEDUP_DEFAULT_THRESHOLD,
        .confidence = ASSAY_SPEEDUP_DEFAULT_CONFIDENCE,
        .shrink_seconds = ASSAY_SHRINK_MAX_SECONDS,
        .timeout_s = ASSAY_ISOLATION_TIMEOUT_S,
        .arrival = ASSAY_ARRIVAL_POISSON,
    };
    int rc = parse(argc, argv, &o);
    if (rc != ASSAY_EXIT_OK) {
        return rc < 0 ? ASSAY_EXIT_OK : rc;
    }
    if (o.list) {
        size_t n;
        const struct assay_plan_item *all = assay_plan_for(ASSAY_COMMAND_COMPARE, &n);
        assay_cli_list_checks(all, n, NULL);
        return ASSAY_EXIT_OK;
    }
    struct compare_run r;
    memset(&r, 0, sizeof r);
    r.sp = assay_speedup_default_params();
    if (!parse_gate(o.gate, r.sp.gate)) {
        return ASSAY_EXIT_USAGE;
    }
    int64_t t0 = assay_now_ns();
    char command_line[4096];
    assay_cli_join_argv(argc, argv, command_line, sizeof command_line);
    bool rank0 = assay_shard_world_rank() == 0; /* under mpirun, the one that reports */
    if (rank0 && !assay_cli_prepare_out_dir("compare", o.out)) {
        (void)assay_cli_mpi_ready(false);
        return ASSAY_EXIT_USAGE;
    }
    assay_cli_mpi_set_check_timeout(o.timeout_s);
    /* Everything that can be wrong with the input is found before the long
     * part: both engines open, the model, the workload and the SLO load. */
    if (!init_pairwise(&o, &r)) {
        (void)assay_cli_mpi_ready(false);
        return ASSAY_EXIT_USAGE;
    }
    int status = ASSAY_EXIT_OK;
    bool ok = open_inputs(&o, rank0, &r);
    if (!assay_cli_mpi_ready(ok)) {
        status = ASSAY_EXIT_USAGE;
    } else if (!rank0) {
        /* Another rank of an MPI run: its share of the distributional
         * checks; rank 0 runs the others, measures the speed and reports. */
        if (!o.no_checks && !run_checks(&o, r.pw, &r.k)) {
            status = ASSAY_EXIT_USAGE;
        }
    } else {
        status = run_and_report(&o, &r, command_line, t0);
    }
    compare_run_release(&r);
    return status;
}
