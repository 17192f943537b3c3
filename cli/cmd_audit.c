/* assay audit: check a third-party server (llama-server, vLLM, SGLang, TGI)
 * serving a GGUF file against the oracle and the bundled engine, benchmark
 * both side by side, and write the report (JSON, HTML, Markdown). The
 * checks live in checks/audit.h, the comparison in bench/versus.h. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/versus.h"
#include "bench_cli.h"
#include "checks/audit.h"
#include "checks/plan.h"
#include "checks/shard.h"
#include "cli.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "engine/model.h"
#include "reports/audit_report.h"
#include "reports/report.h"
#include "reports/stamp.h"
#include "reports/text.h"

/* With --quick the benchmark takes the workload's first this many requests.
 * Chosen when the bundled engine decoded a few dozen tokens a second on a
 * 123M-parameter model (48 requests took 9 of a quick audit's 16 minutes);
 * reading the file's integer weights, 24 take 74 s of its 7.5 minutes
 * (docs/measurements/2026-12-07-memo-scan-matrix.md). */
#define QUICK_BENCH_REQUESTS 24
#define QUICK_BENCH_STR "24"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: assay audit --url URL --model FILE.gguf [--out DIR] [--api completion|v1]\n"
            "                   [--served-model NAME] [--quick] [--seed N] [--check NAME]...\n"
            "                   [--slots N] [--eos ID] [--order sequential|joint]\n"
            "                   [--kv-type f16|f32] [--flash-attn on|off]\n"
            "                   [--seed-promise alone|bitwise|budget]\n"
            "                   [--weights auto|resident|mapped]\n"
            "                   [--bundled SPEC] [--workload FILE]\n"
            "                   [--slo FILE] [--runs N] [--rate R] [--stall-ms N] [--no-bench]\n"
            "                   [--require-checks N] [--json] [--list]\n"
            "\n"
            "Audit an OpenAI-compatible server that serves FILE.gguf: greedy equivalence with\n"
            "the oracle alone and under concurrency, top logprobs, the distributional family\n"
            "(chi-squared, randomised PIT + KS, the two-sample test against the bundled engine),\n"
            "black-box properties (batch invariance, finish reasons, usage counts, streamed vs\n"
            "non-streamed, the server's /metrics back to idle), and a benchmark of the server\n"
            "and the bundled engine side by side in the same run. Writes DIR/report.json,\n"
            "report.html and report.md. README.md \"Auditing a server\" says what each check\n"
            "needs from the server.\n"
            "\n"
            "  --url URL           the server, http(s)://host:port (API key: ASSAY_API_KEY)\n"
            "  --model FILE.gguf   the weights the server serves; the oracle loads them too\n"
            "  --out DIR           where to write the report (default assay-audit)\n"
            "  --api API           completion (llama.cpp's /completion, default) or v1\n"
            "  --served-model NAME sent as \"model\" (vLLM, SGLang and TGI may need it)\n"
            "  --quick             smaller samples; 2 benchmark runs of the workload's first\n"
            "                      " QUICK_BENCH_STR " requests (1 minute on TinyGPT, 8 on a 123M model)\n"
            "  --seed N            master seed (default 1)\n"
            "  --check NAME        run only this check (repeatable; no benchmark then)\n"
            "  --slots N           the server's parallel slots (default 4)\n"
            "  --eos ID            the server's end-of-generation token (default: the file's\n"
            "                      tokenizer.ggml.eos_token_id; -1: none)\n"
            "  --order ORDER       how the server combines top-k and top-p: sequential\n"
            "                      (llama.cpp, vLLM; default) or joint (SGLang's FlashInfer)\n"
            "  --kv-type TYPE      the server's KV cache: f16 (llama.cpp's default) or f32\n"
            "  --flash-attn on|off whether the server runs flash attention (default on:\n"
            "                      llama.cpp's auto on CPU). With these and the file's types\n"
            "                      the audit measures its numerics budget: how far the\n"
            "                      bundled engine computing the same formats lands from the\n"
            "                      oracle (README \"Numerics budget\")\n"
            "  --seed-promise P    what the server promises of one seed's tokens: alone\n"
            "                      (default: a lone repeat with its prompt cache off is bit\n"
            "                      for bit, batched runs may part where the numerics budget\n"
            "                      can move the draw), bitwise (batch invariance: every run\n"
            "                      bit for bit) or budget (every run up to the budget)\n"
            "  --weights HOW       resident: decoded to fp32 (about 17.5 bytes a parameter:\n"
            "                      the oracle's, the bundled engine's and the reference's);\n"
            "                      mapped: left in the file, a layer decoded at a time by the\n"
            "                      oracle and the reference, and no bundled engine (no\n"
            "                      two-sample test, no benchmark); auto (default): resident\n"
            "                      when it fits in 80%% of the available memory, else the\n"
            "                      oracle's and the reference's copies alone (8 bytes a\n"
            "                      parameter, no bundled engine) when they fit, else mapped\n"
            "  --bundled SPEC      the bundled engine to compare with (default\n"
            "                      bundled:model=FILE.gguf,order=ORDER,batch=SLOTS and the\n"
            "                      server's numerics: act=ggml,kv_type=...,fa=...)\n"
            "  --workload FILE     benchmark workload (default fixtures/" ASSAY_CLI_BENCH_WORKLOAD
            ")\n"
            "  --slo FILE          SLO for goodput (default fixtures/" ASSAY_CLI_BENCH_SLO ")\n"
            "  --runs N            runs per benchmark configuration (default 3; --quick 2)\n"
            "  --rate R            open-loop rate, req/s (default: half the lower batched rate)\n"
            "  --stall-ms N        a request fails after N ms without a byte (default 60000;\n"
            "                      before its first byte, N ms without a byte to any request)\n"
            "  --no-bench          the checks only\n"
            ASSAY_CLI_REQUIRE_HELP
            "  --json              print the report's JSON instead of the tables\n"
            "  --list              list the checks and exit\n"
            "\n"
            "Exit status: 0 everything checked passed (skips are listed), 1 a check failed,\n"
            "2 usage or input error, the server could not be reached, or a part could not run,\n"
            "4 fewer checks ran than --require-checks asks for.\n");
}

struct audit_opts {
    const char *url, *model, *out, *served, *bundled, *workload, *slo;
    enum assay_openai_api api;
    enum assay_sampling_order order;
    const char *checks[64];
    size_t n_checks;
    uint64_t seed, runs, slots, stall_ms;
    long eos;
    double rate;
    bool quick, no_bench, json, list;
    enum assay_seed_promise seed_promise;
    enum assay_audit_weights weights;
    enum assay_kv_type kv_type;
    bool flash_attn;
    struct assay_require require;
};

/* The options into o; ASSAY_EXIT_OK, or the exit status of a usage error
 * (its message printed). Long because it is the option table and one case
 * per option, in --help's order. */
static int parse(int argc, char **argv, struct audit_opts *o)
{
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},      {"model", required_argument, NULL, 'm'},
        {"out", required_argument, NULL, 'o'},      {"api", required_argument, NULL, 'a'},
        {"served-model", required_argument, NULL, 'M'}, {"quick", no_argument, NULL, 'q'},
        {"seed", required_argument, NULL, 's'},     {"check", required_argument, NULL, 'c'},
        {"slots", required_argument, NULL, 'n'},    {"eos", required_argument, NULL, 'E'},
        {"bundled", required_argument, NULL, 'b'},  {"workload", required_argument, NULL, 'w'},
        {"slo", required_argument, NULL, 'S'},      {"runs", required_argument, NULL, 'r'},
        {"rate", required_argument, NULL, 'R'},     {"no-bench", no_argument, NULL, 'B'},
        {"json", no_argument, NULL, 'j'},           {"list", no_argument, NULL, 'l'},
        {"stall-ms", required_argument, NULL, 'T'}, {"order", required_argument, NULL, 'O'},
        {"kv-type", required_argument, NULL, 'K'},  {"flash-attn", required_argument, NULL, 'F'},
        {"seed-promise", required_argument, NULL, 'P'},
        {"weights", required_argument, NULL, 'W'},
        {"require-checks", required_argument, NULL, 'Q'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    int c;
    assay_cli_options_begin();
    while ((c = getopt_long(argc, argv, ASSAY_CLI_OPTSTRING, opts, NULL)) != -1) {
        switch (c) {
        case 'u': o->url = optarg; break;
        case 'm': o->model = optarg; break;
        case 'o': o->out = optarg; break;
        case 'M': o->served = optarg; break;
        case 'b': o->bundled = optarg; break;
        case 'w': o->workload = optarg; break;
        case 'S': o->slo = optarg; break;
        case 'q': o->quick = true; break;
        case 'B': o->no_bench = true; break;
        case 'j': o->json = true; break;
        case 'l': o->list = true; break;
        case 'Q':
            if (!assay_cli_parse_require("audit", optarg, &o->require)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'P':
            if (strcmp(optarg, "alone") == 0) {
                o->seed_promise = ASSAY_SEED_PROMISE_ALONE;
            } else if (strcmp(optarg, "bitwise") == 0) {
                o->seed_promise = ASSAY_SEED_PROMISE_BITWISE;
            } else if (strcmp(optarg, "budget") == 0) {
                o->seed_promise = ASSAY_SEED_PROMISE_BUDGET;
            } else {
                fprintf(stderr,
                        "assay audit: --seed-promise expects alone, bitwise or budget, got '%s'\n",
                        optarg);
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'W':
            if (strcmp(optarg, "auto") == 0) {
                o->weights = ASSAY_AUDIT_WEIGHTS_AUTO;
            } else if (strcmp(optarg, "resident") == 0) {
                o->weights = ASSAY_AUDIT_WEIGHTS_RESIDENT;
            } else if (strcmp(optarg, "mapped") == 0) {
                o->weights = ASSAY_AUDIT_WEIGHTS_MAPPED;
            } else {
                fprintf(stderr,
                        "assay audit: --weights expects auto, resident or mapped, got '%s'\n",
                        optarg);
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'a':
            if (strcmp(optarg, "completion") == 0) {
                o->api = ASSAY_OPENAI_API_COMPLETION;
            } else if (strcmp(optarg, "v1") == 0) {
                o->api = ASSAY_OPENAI_API_V1;
            } else {
                fprintf(stderr, "assay audit: --api expects completion or v1, got '%s'\n", optarg);
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'K':
            if (strcmp(optarg, "f16") == 0) {
                o->kv_type = ASSAY_KV_TYPE_F16;
            } else if (strcmp(optarg, "f32") == 0) {
                o->kv_type = ASSAY_KV_TYPE_F32;
            } else {
                fprintf(stderr, "assay audit: --kv-type expects f16 or f32, got '%s'\n", optarg);
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'F':
            if (strcmp(optarg, "on") == 0) {
                o->flash_attn = true;
            } else if (strcmp(optarg, "off") == 0) {
                o->flash_attn = false;
            } else {
                fprintf(stderr, "assay audit: --flash-attn expects on or off, got '%s'\n",
                        optarg);
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'O':
            if (strcmp(optarg, "sequential") == 0) {
                o->order = ASSAY_SAMPLING_SEQUENTIAL;
            } else if (strcmp(optarg, "joint") == 0) {
                o->order = ASSAY_SAMPLING_JOINT;
            } else {
                fprintf(stderr, "assay audit: --order expects sequential or joint, got '%s'\n",
                        optarg);
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 's':
            if (!assay_cli_parse_u64("--seed", optarg, &o->seed)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'r':
            if (!assay_cli_parse_u64("--runs", optarg, &o->runs) || o->runs < 1 || o->runs > 100) {
                fprintf(stderr, "assay audit: --runs expects 1..100\n");
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'T':
            if (!assay_cli_parse_u64("--stall-ms", optarg, &o->stall_ms) || o->stall_ms < 1 ||
                o->stall_ms > 86400000) {
                fprintf(stderr, "assay audit: --stall-ms expects 1..86400000\n");
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'n':
            if (!assay_cli_parse_u64("--slots", optarg, &o->slots) || o->slots < 1 ||
                o->slots > 256) {
                fprintf(stderr, "assay audit: --slots expects 1..256\n");
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'E': {
            char *end = NULL;
            o->eos = strtol(optarg, &end, 10);
            if (end == optarg || *end != '\0' || o->eos < -1 || o->eos > 1 << 24) {
                fprintf(stderr, "assay audit: --eos expects a token id or -1, got '%s'\n", optarg);
                return ASSAY_EXIT_USAGE;
            }
            break;
        }
        case 'R': {
            char *end = NULL;
            o->rate = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(isfinite(o->rate) && o->rate > 0)) {
                fprintf(stderr, "assay audit: --rate expects a positive number of requests/s, "
                                "got '%s'\n",
                        optarg);
                return ASSAY_EXIT_USAGE;
            }
            break;
        }
        case 'c':
            if (o->n_checks == sizeof o->checks / sizeof o->checks[0]) {
                fprintf(stderr, "assay audit: too many --check options\n");
                return ASSAY_EXIT_USAGE;
            }
            if (assay_plan_find_in(ASSAY_COMMAND_AUDIT, optarg) == NULL) {
                fprintf(stderr, "assay audit: no check called '%s' (assay audit --list shows "
                                "them)\n",
                        optarg);
                return ASSAY_EXIT_USAGE;
            }
            o->checks[o->n_checks++] = optarg;
            break;
        case 'h': usage(stdout); return -1;
        default: return assay_cli_bad_option("audit", c, argc, argv);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "assay audit: unexpected argument '%s'\n", argv[optind]);
        return ASSAY_EXIT_USAGE;
    }
    if (o->list) {
        return ASSAY_EXIT_OK;
    }
    if (o->url == NULL || o->model == NULL) {
        fprintf(stderr, "assay audit: --url and --model are required (assay audit --help)\n");
        return ASSAY_EXIT_USAGE;
    }
    return ASSAY_EXIT_OK;
}

/* Whether the file behind --model can be audited, read from its metadata
 * alone (no weight is loaded): a model assay reads, with a context the
 * audit's sequences fit in. False with the reason on stderr. */
static bool model_fits(const char *path, struct assay_diag *diag)
{
    struct assay_model_config cfg;
    assay_diag_clear(diag);
    enum assay_status st = assay_model_config_from_gguf(path, &cfg, diag);
    if (st != ASSAY_OK) {
        char why[1200];
        fprintf(stderr, "assay audit: --model: %s\n",
                st == ASSAY_ERR_NOMEM ? "out of memory" : assay_diag_format(diag, why, sizeof why));
        return false;
    }
    if (cfg.n_ctx < ASSAY_AUDIT_MIN_CONTEXT) {
        fprintf(stderr,
                "assay audit: --model: %s: %s.context_length: expected a context of at least %d "
                "tokens (the audit's oracle and workloads hold sequences of up to %d), got %d\n",
                path, assay_arch_name(cfg.arch), ASSAY_AUDIT_MIN_CONTEXT, ASSAY_AUDIT_MIN_CONTEXT,
                (int)cfg.n_ctx);
        return false;
    }
    return true;
}

static void list_checks(void)
{
    size_t n;
    const struct assay_plan_item *plan = assay_plan_for(ASSAY_COMMAND_AUDIT, &n);
    assay_cli_list_checks(plan, n, NULL);
}

/* The check is one of those the options select. */
static bool selected(const struct audit_opts *o, const struct assay_plan_item *c)
{
    bool want = o->n_checks == 0;
    for (size_t j = 0; j < o->n_checks; j++) {
        want = want || strcmp(c->name, o->checks[j]) == 0;
    }
    return want;
}

/* How many checks the options select, in both phases. */
static size_t n_selected(const struct audit_opts *o)
{
    size_t n_plan, n = 0;
    const struct assay_plan_item *plan = assay_plan_for(ASSAY_COMMAND_AUDIT, &n_plan);
    for (size_t i = 0; i < n_plan; i++) {
        n += selected(o, &plan[i]) ? 1 : 0;
    }
    return n;
}

/* Run the selected checks of one phase; false when memory ran out. Each
 * check is announced with its place among all selected ("[3/14]") and
 * ends in a line with its verdict, its time and the audit's so far; on a
 * terminal a ticker shows the running check's elapsed time. */
static bool run_checks(struct assay_audit *a, const struct audit_opts *o, bool after_bench,
                       int64_t t0_ns, struct assay_check_result *res, size_t *n_res)
{
    size_t n_plan;
    const struct assay_plan_item *plan = assay_plan_for(ASSAY_COMMAND_AUDIT, &n_plan);
    size_t total = n_selected(o);
    for (size_t i = 0; i < n_plan; i++) {
        if (plan[i].after_bench != after_bench || !selected(o, &plan[i])) {
            continue;
        }
        char label[96];
        snprintf(label, sizeof label, "[%zu/%zu] %s", *n_res + 1, total, plan[i].name);
        struct assay_check_result *r = &res[(*n_res)++];
        /* Under mpirun (checks/shard.h): a distributional check on every
         * rank, each sending its share of the requests; a shared
         * equivalence check on every rank, rank 0 sending the requests;
         * any other on rank 0 alone, which alone speaks. */
        bool speak = assay_shard_world_rank() == 0;
        if (speak) {
            fprintf(stderr, "assay audit: %-38s ...\n", label);
        }
        enum assay_status st = ASSAY_OK;
        if (assay_shard_check_begin(plan[i].name, plan[i].family, assay_plan_item_shared(&plan[i]),
                                    r)) {
            struct assay_cli_ticker *tick = speak ? assay_cli_ticker_start("audit", label) : NULL;
            st = assay_audit_run_check(a, &plan[i], r);
            assay_cli_ticker_stop(tick);
        }
        if (assay_shard_check_end(r) != ASSAY_OK) {
            fprintf(stderr, "assay audit: rank %d: the ranks could not bring %s's results "
                            "together\n", (int)assay_shard_world_rank(), plan[i].name);
            return false;
        }
        if (speak) {
            char shared[160];
            assay_cli_shared_volume(shared, sizeof shared);
            fprintf(stderr, "assay audit: %-38s %-5s %7.1f s (%.0f s in all)%s  %s\n", label,
                    assay_verdict_str(r->verdict), r->seconds,
                    (double)(assay_now_ns() - t0_ns) / 1e9, shared,
                    r->verdict == ASSAY_VERDICT_PASS ? r->summary : r->failure);
        }
        if (st == ASSAY_ERR_NOMEM) {
            return false;
        }
    }
    return true;
}

static void print_comparison(FILE *out, const struct assay_versus *c)
{
    char a[32], b[32];
    fprintf(out, "\nSide by side (this run; open loop at %s req/s):\n",
            assay_text_num(a, sizeof a, c->open_rate, 4));
    fprintf(out, "%-44s", "");
    for (int32_t k = 0; k < c->n_engines; k++) {
        fprintf(out, " %14s", c->name[k]);
    }
    fprintf(out, "\n");
    struct {
        const char *label;
        enum assay_versus_config config;
        const char *metric;
        enum assay_pctl which;
    } rows[] = {
        {"single stream, output tokens/s", ASSAY_VERSUS_SINGLE, NULL, ASSAY_PCTL_P50},
        {"single stream, TTFT p50", ASSAY_VERSUS_SINGLE, "ttft", ASSAY_PCTL_P50},
        {"batched, output tokens/s", ASSAY_VERSUS_BATCHED, NULL, ASSAY_PCTL_P50},
        {"open loop, TTFT p50", ASSAY_VERSUS_OPEN, "ttft", ASSAY_PCTL_P50},
        {"open loop, TTFT p90", ASSAY_VERSUS_OPEN, "ttft", ASSAY_PCTL_P90},
        {"open loop, TTFT p99", ASSAY_VERSUS_OPEN, "ttft", ASSAY_PCTL_P99},
        {"open loop, TPOT p50", ASSAY_VERSUS_OPEN, "tpot", ASSAY_PCTL_P50},
        {"open loop, E2E p99", ASSAY_VERSUS_OPEN, "e2e", ASSAY_PCTL_P99},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fprintf(out, "%-44s", rows[i].label);
        for (int32_t k = 0; k < c->n_engines; k++) {
            if (rows[i].metric == NULL) {
                fprintf(out, " %14s",
                        assay_text_num(b, sizeof b, assay_versus_tokens_per_s(c, k, rows[i].config), 4));
            } else {
                fprintf(out, " %14s",
                        assay_text_seconds(b, sizeof b,
                                           assay_versus_latency(c, k, rows[i].config,
                                                                 rows[i].metric, rows[i].which)));
            }
        }
        fprintf(out, "\n");
    }
}

/* What the phases of an audit on rank 0 share: the audit and the
 * benchmark's inputs, the checks' results, the comparison and the report. */
struct audit_run {
    struct assay_audit *a;
    bool bench_on;        /* neither --no-bench nor --check, and the bundled engine runs */
    bool bench_no_engine; /* the benchmark was asked for, but the bundled engine is off */
    struct assay_slo slo; /* with bench_on */
    struct assay_workload *w;
    int32_t bench_from; /* the workload's requests before --quick */
    struct assay_check_result *res;
    size_t n;
    struct assay_versus cmp;
    bool bench_failed;
    cJSON *report;
};

/* Check that the file behind --model can be audited, then load it and ask
 * the server for one token into *a; false with the reason on stderr, the
 * other ranks of an MPI run told. */
static bool open_audit(const struct audit_opts *o, struct assay_audit **a)
{
    struct assay_audit_params ap = assay_audit_default_params();
    ap.url = o->url;
    ap.api = o->api;
    ap.served_model = o->served;
    ap.model_path = o->model;
    ap.bundled_spec = o->bundled;
    ap.fixtures = assay_cli_fixtures();
    ap.seed = o->seed;
    ap.quick = o->quick;
    ap.eos_token = (int32_t)o->eos;
    ap.slots = (int32_t)o->slots;
    ap.kv_type = o->kv_type;
    ap.flash_attn = o->flash_attn;
    ap.seed_promise = o->seed_promise;
    ap.weights = o->weights;
    ap.stall_ms = (int32_t)o->stall_ms;
    ap.order = o->order;
    ap.program = assay_cli_program();
    struct assay_diag diag;
    if (!model_fits(o->model, &diag)) {
        (void)assay_cli_mpi_ready(false);
        return false;
    }
    if (assay_shard_world_rank() == 0) {
        fprintf(stderr, "assay audit: loading %s and asking %s for one token\n", o->model,
                o->url);
    }
    assay_diag_clear(&diag);
    enum assay_status st = assay_audit_open(&ap, a, &diag);
    if (st != ASSAY_OK) {
        char why[1200];
        assay_diag_format(&diag, why, sizeof why);
        fprintf(stderr, "assay audit: %s: %s\n", assay_status_str(st),
                why[0] != '\0' ? why : "the audit could not start, and gave no reason");
        (void)assay_cli_mpi_ready(false);
        return false;
    }
    return true;
}

/* Another rank of an MPI run: its share of the distributional checks;
 * rank 0 runs the others, benchmarks and reports. Closes a; the exit
 * status. */
static int run_other_rank(const struct audit_opts *o, struct assay_audit *a)
{
    size_t n_plan, n = 0;
    assay_plan_for(ASSAY_COMMAND_AUDIT, &n_plan);
    struct assay_check_result *res = calloc(n_plan, sizeof *res);
    int64_t t0_ns = assay_now_ns();
    bool ok = assay_cli_mpi_ready(res != NULL) && run_checks(a, o, false, t0_ns, res, &n) &&
              run_checks(a, o, true, t0_ns, res, &n);
    free(res);
    assay_audit_close(a);
    return ok ? ASSAY_EXIT_OK : ASSAY_EXIT_USAGE;
}

/* With the benchmark on, load its workload into r->w, cut to its first
 * QUICK_BENCH_REQUESTS with --quick; false with the reason on stderr,
 * nothing loaded left behind. */
static bool load_bench_workload(const struct audit_opts *o, struct audit_run *r)
{
    if (r->bench_on &&
        !assay_cli_load_workload("audit", o->workload, assay_audit_server(r->a), &r->w)) {
        (void)assay_cli_mpi_ready(false);
        return false;
    }
    r->bench_from = r->w != NULL ? r->w->n : 0;
    if (r->w != NULL && o->quick && r->w->n > QUICK_BENCH_REQUESTS) {
        uint8_t *keep = calloc((size_t)r->w->n, 1);
        struct assay_workload *first = NULL;
        for (int32_t i = 0; keep != NULL && i < QUICK_BENCH_REQUESTS; i++) {
            keep[i] = 1;
        }
        if (keep == NULL || assay_workload_subset(r->w, keep, &first) != ASSAY_OK) {
            fprintf(stderr, "assay audit: out of memory\n");
            free(keep);
            assay_workload_free(r->w);
            r->w = NULL;
            return false;
        }
        free(keep);
        assay_workload_free(r->w);
        r->w = first;
    }
    return true;
}

/* The benchmark: the server and the bundled engine, interleaved, into
 * r->cmp; a run that did not complete is noted in the report and sets
 * r->bench_failed. */
static void run_benchmark(const struct audit_opts *o, struct audit_run *r)
{
    struct assay_versus_engine engines[2] = {
        {"server", assay_audit_server_spec(r->a), assay_audit_server(r->a)},
        {"bundled", assay_audit_bundled_spec(r->a), assay_audit_bundled(r->a)},
    };
    struct assay_versus_params cp = assay_versus_default_params();
    cp.batch_workers = (int32_t)o->slots;
    cp.seed = o->seed;
    cp.n_runs = o->runs > 0 ? (int32_t)o->runs : o->quick ? 2 : 3;
    cp.open_rate = o->rate;
    fprintf(stderr, "assay audit: benchmark: server and bundled engine side by side "
                    "(single stream, %d workers, open loop), %d runs each ...\n",
            (int)cp.batch_workers, (int)cp.n_runs);
    struct assay_cli_ticker *tick = assay_cli_ticker_start("audit", "benchmark");
    enum assay_status st = assay_versus_run(engines, 2, r->w, &cp, &r->slo, &r->cmp);
    assay_cli_ticker_stop(tick);
    if (st != ASSAY_OK) {
        r->bench_failed = true;
        assay_report_add_note(r->report, "The side-by-side benchmark did not complete: %s (see "
                                         "each engine's status in audit.comparison).",
                              assay_status_str(st));
    }
}

/* The checks that come before the benchmark, the benchmark, then the
 * checks that come after it, into r; false when memory ran out (said on
 * stderr). */
static bool run_audit(const struct audit_opts *o, struct audit_run *r)
{
    int64_t t0_ns = assay_now_ns();
    bool ok = run_checks(r->a, o, false, t0_ns, r->res, &r->n);
    if (ok && r->bench_on) {
        run_benchmark(o, r);
    }
    ok = ok && run_checks(r->a, o, true, t0_ns, r->res, &r->n);
    assay_audit_finalize(r->res, r->n);
    if (!ok) {
        fprintf(stderr, "assay audit: out of memory during the checks\n");
    }
    return ok;
}

/* The report's parts: the stamp, the checks, the benchmark and the
 * comparison, the audit's findings, the notes and the duration; false when
 * memory ran out. */
static bool build_report(const struct audit_opts *o, struct audit_run *r, int64_t t0)
{
    struct assay_stamp_seed seeds[] = {{"master", o->seed}, {"bench", o->seed}};
    cJSON *stamp = NULL, *comparison = NULL, *audit = NULL, *bench = NULL;
    bool ok = assay_stamp_create(assay_audit_server(r->a), seeds, 2, &stamp) == ASSAY_OK &&
              assay_report_set(r->report, "stamp", stamp) == ASSAY_OK &&
              assay_report_add_checks(r->report, r->res, r->n) == ASSAY_OK;
    if (ok && r->cmp.n_engines > 0) {
        ok = assay_versus_to_json(&r->cmp, r->w, &comparison) == ASSAY_OK;
        if (ok && r->cmp.results[0][ASSAY_VERSUS_OPEN].n_runs > 0) {
            ok = assay_bench_result_to_json(&r->cmp.results[0][ASSAY_VERSUS_OPEN], r->w, &bench) ==
                     ASSAY_OK &&
                 assay_report_set(r->report, "benchmark", bench) == ASSAY_OK;
        }
    }
    ok = ok && assay_report_audit_json(r->a, comparison, &audit) == ASSAY_OK &&
         assay_report_set(r->report, "audit", audit) == ASSAY_OK;
    if (ok && r->bench_on && r->cmp.n_engines > 0) {
        ok = assay_report_add_note(r->report,
                                   "The benchmark section is the server's open loop; the audit "
                                   "section puts it beside the bundled engine, measured in the "
                                   "same run (%s).",
                                   "interleaved run by run") == ASSAY_OK;
    } else if (ok && !r->bench_on) {
        ok = assay_report_add_note(r->report, "%s",
                                   r->bench_no_engine ? "No benchmark: the bundled engine does not "
                                                        "run (see the findings)."
                                   : o->n_checks > 0 ? "Only the selected checks ran (--check); "
                                                       "no benchmark."
                                                     : "No benchmark (--no-bench).") == ASSAY_OK;
    }
    if (ok && o->quick) {
        ok = assay_report_add_note(r->report, "A quick audit (--quick): smaller samples, stated "
                                              "in each check's workload and figures.") == ASSAY_OK;
    }
    if (ok && r->w != NULL && r->w->n < r->bench_from) {
        ok = assay_report_add_note(r->report,
                                   "The benchmark ran the workload's first %d of its %d requests "
                                   "(--quick).",
                                   (int)r->w->n, (int)r->bench_from) == ASSAY_OK;
    }
    return ok && assay_report_set(r->report, "duration_s",
                                  cJSON_CreateNumber((double)(assay_now_ns() - t0) / 1e9)) ==
                     ASSAY_OK;
}

/* The exit status, before the report that records it: a failed check
 * first, then a part that could not run (ok false when one did not), then
 * too few checks run. */
static int exit_status(const struct audit_opts *o, const struct audit_run *r, bool ok)
{
    int status = ok ? ASSAY_EXIT_OK : ASSAY_EXIT_USAGE;
    int verdict_status = assay_cli_exit_status("audit", r->res, r->n, &o->require);
    if (verdict_status == ASSAY_EXIT_FAIL) {
        status = ASSAY_EXIT_FAIL;
    } else if (status == ASSAY_EXIT_OK &&
               (verdict_status == ASSAY_EXIT_USAGE || r->bench_failed)) {
        status = ASSAY_EXIT_USAGE;
    } else if (status == ASSAY_EXIT_OK) {
        status = verdict_status;
    }
    return status;
}

/* The tables on a terminal: the checks, what the server did differently,
 * the side-by-side figures, where the report went (ok: it was written)
 * and how long it all took. */
static void print_summary(const struct audit_run *r, bool ok,
                          const struct assay_report_paths *paths, int64_t t0)
{
    assay_cli_print_results(stdout, r->res, r->n);
    size_t nf = assay_audit_n_findings(r->a);
    if (nf > 0) {
        printf("\nWhat the server did differently from the oracle:\n");
        for (size_t i = 0; i < nf; i++) {
            printf("  - %s\n", assay_audit_finding(r->a, i));
        }
    }
    if (r->cmp.n_engines > 0) {
        print_comparison(stdout, &r->cmp);
    }
    if (ok) {
        printf("\nReport: %s\n        %s\n        %s\n", paths->json, paths->html, paths->md);
    }
    printf("(%.0f s)\n", (double)(assay_now_ns() - t0) / 1e9);
}

int assay_cmd_audit(int argc, char **argv)
{
    struct audit_opts o = {
        .out = "assay-audit",
        .workload = ASSAY_CLI_BENCH_WORKLOAD,
        .slo = ASSAY_CLI_BENCH_SLO,
        .api = ASSAY_OPENAI_API_COMPLETION,
        .order = ASSAY_SAMPLING_SEQUENTIAL,
        .kv_type = ASSAY_KV_TYPE_F16,
        .flash_attn = true,
        .seed = 1,
        .slots = 4,
        .eos = ASSAY_AUDIT_EOS_FROM_MODEL,
        .stall_ms = 60000,
    };
    int rc = parse(argc, argv, &o);
    if (rc != ASSAY_EXIT_OK) {
        return rc < 0 ? ASSAY_EXIT_OK : rc;
    }
    if (o.list) {
        list_checks();
        return ASSAY_EXIT_OK;
    }
    int64_t t0 = assay_now_ns();
    char command_line[2048];
    assay_cli_join_argv(argc, argv, command_line, sizeof command_line);
    if (!assay_cli_prepare_out_dir("audit", o.out)) {
        return ASSAY_EXIT_USAGE;
    }
    struct audit_run r;
    memset(&r, 0, sizeof r);
    r.bench_on = !o.no_bench && o.n_checks == 0;
    if (r.bench_on && !assay_cli_load_slo("audit", o.slo, &r.slo)) {
        return ASSAY_EXIT_USAGE;
    }
    if (!open_audit(&o, &r.a)) {
        return ASSAY_EXIT_USAGE;
    }
    /* A check of an audit has no time limit: nor has the wait for a rank
     * (ASSAY_RANK_TIMEOUT sets one). */
    assay_cli_mpi_set_check_timeout(0);
    if (assay_shard_world_rank() != 0) {
        return run_other_rank(&o, r.a);
    }
    if (r.bench_on && assay_audit_engine_off(r.a, NULL)) {
        r.bench_on = false;
        r.bench_no_engine = true;
    }
    if (!load_bench_workload(&o, &r)) {
        assay_audit_close(r.a);
        return ASSAY_EXIT_USAGE;
    }
    size_t n_plan;
    assay_plan_for(ASSAY_COMMAND_AUDIT, &n_plan);
    r.res = calloc(n_plan, sizeof *r.res);
    if (r.res == NULL || assay_report_create("audit", command_line, &r.report) != ASSAY_OK) {
        fprintf(stderr, "assay audit: out of memory\n");
        (void)assay_cli_mpi_ready(false);
        free(r.res);
        assay_workload_free(r.w);
        assay_audit_close(r.a);
        return ASSAY_EXIT_USAGE;
    }
    if (!assay_cli_mpi_ready(true)) {
        cJSON_Delete(r.report);
        free(r.res);
        assay_workload_free(r.w);
        assay_audit_close(r.a);
        return ASSAY_EXIT_USAGE;
    }
    bool ok = run_audit(&o, &r);
    ok = ok && build_report(&o, &r, t0);
    int status = exit_status(&o, &r, ok);
    ok = ok && assay_report_set_outcome(r.report, o.require.given ? o.require.text : NULL,
                                        assay_require_needed(&o.require, (int64_t)r.n),
                                        status) == ASSAY_OK;
    struct assay_report_paths paths;
    if (!ok) {
        fprintf(stderr, "assay audit: out of memory while building the report\n");
        status = ASSAY_EXIT_USAGE;
    } else if (!assay_cli_write_report("audit", r.report, o.out, &paths)) {
        status = ASSAY_EXIT_USAGE;
        ok = false;
    }
    if (o.json && ok) {
        assay_cli_print_json(r.report);
    } else if (!o.json) {
        print_summary(&r, ok, &paths, t0);
    }
    cJSON_Delete(r.report);
    assay_versus_release(&r.cmp);
    free(r.res);
    assay_workload_free(r.w);
    assay_audit_close(r.a);
    return status;
}
