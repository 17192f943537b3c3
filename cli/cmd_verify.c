/* assay verify: run the verification plan (or part of it) on an engine. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "adapters/spec.h"
#include "checks/context.h"
#include "checks/isolate.h"
#include "checks/plan.h"
#include "checks/shard.h"
#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: assay verify [--engine SPEC] [--check NAME]... [--family FAMILY]\n"
            "                    [--workload FILE] [--seed N] [--repro-dir DIR] [--no-shrink]\n"
            "                    [--timeout SECONDS] [--no-fork] [--require-checks N] [--list]\n"
            "\n"
            "Run the checks of the verification plan against an engine and print a\n"
            "pass/fail table; every failure comes with a command that reproduces it.\n"
            "\n"
            "  --engine SPEC    the engine (default: bundled), e.g.\n"
            "                   bundled:kv=paged,block=16,prefix=on,chunk=256,spec=4\n"
            "                   Each check sets the options it is about (verify --list);\n"
            "                   the other options of SPEC apply to every check.\n"
            "  --check NAME     run only this check (repeatable); see --list\n"
            "  --family FAMILY  run only equivalence, distributional, property or seeded checks\n"
            "  --workload FILE  run the selected check on this workload file instead of its\n"
            "                   fixture (a reproducer written by a failing run, for example)\n"
            "  --seed N         master seed of seeded checks (default 1)\n"
            "  --repro-dir DIR  where a failed check's shrunk reproducer is written (default\n"
            "                   assay-repro): the failing case is cut down (fewer requests,\n"
            "                   shorter prompts, a smaller pool) while it still fails, rerun\n"
            "                   once from the file, and its command printed; not with\n"
            "                   --workload, which reruns such a file\n"
            "  --no-shrink      print the full failing case's command instead\n"
            "  --timeout SECONDS  a check still running after this long is killed and FAILs\n"
            "                   (default " ASSAY_ISOLATION_TIMEOUT_TEXT "; 0: no limit)\n"
            "  --no-fork        run the checks in this process (for a debugger); by default\n"
            "                   each runs in a child process, so a crash, an abort or a hang\n"
            "                   of the engine is that check's FAIL and the others still run\n"
            ASSAY_CLI_REQUIRE_HELP
            "  --list           list the plan and exit\n"
            "\n"
            "Exit status: 0 all passed (skips are listed, not failed), 1 a check failed,\n"
            "2 usage or input error, or a check that could not run, 4 fewer checks ran than\n"
            "--require-checks asks for.\n");
}

struct verify_opts {
    const char *engine, *family, *workload, *repro_dir;
    bool shrink, list;
    struct assay_isolation iso;
    const char *checks[64];
    size_t n_checks;
    uint64_t seed;
    struct assay_require require;
};

/* The options into o; ASSAY_EXIT_OK, -1 after --help, or the exit status of
 * a usage error (its message printed). */
static int parse(int argc, char **argv, struct verify_opts *o)
{
    static const struct option opts[] = {
        {"engine", required_argument, NULL, 'e'}, {"check", required_argument, NULL, 'c'},
        {"family", required_argument, NULL, 'f'}, {"workload", required_argument, NULL, 'w'},
        {"seed", required_argument, NULL, 's'},   {"list", no_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},         {"repro-dir", required_argument, NULL, 'r'},
        {"no-shrink", no_argument, NULL, 'n'},    {"timeout", required_argument, NULL, 't'},
        {"no-fork", no_argument, NULL, 'F'},      {"require-checks", required_argument, NULL, 'Q'},
        {NULL, 0, NULL, 0},
    };
    int c;
    assay_cli_options_begin();
    while ((c = getopt_long(argc, argv, ASSAY_CLI_OPTSTRING, opts, NULL)) != -1) {
        switch (c) {
        case 'e': o->engine = optarg; break;
        case 'c':
            if (o->n_checks == sizeof o->checks / sizeof o->checks[0]) {
                fprintf(stderr, "assay verify: too many --check options\n");
                return ASSAY_EXIT_USAGE;
            }
            o->checks[o->n_checks++] = optarg;
            break;
        case 'f': o->family = optarg; break;
        case 'w': o->workload = optarg; break;
        case 's':
            if (!assay_cli_parse_u64("--seed", optarg, &o->seed)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'l': o->list = true; break;
        case 'r': o->repro_dir = optarg; break;
        case 'n': o->shrink = false; break;
        case 't':
            if (!assay_cli_parse_timeout(optarg, &o->iso.timeout_s)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'F': o->iso.fork = false; break;
        case 'Q':
            if (!assay_cli_parse_require("verify", optarg, &o->require)) {
                return ASSAY_EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return -1;
        default: return assay_cli_bad_option("verify", c, argc, argv);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "assay verify: unexpected argument '%s'\n", argv[optind]);
        return ASSAY_EXIT_USAGE;
    }
    return ASSAY_EXIT_OK;
}

/* What the options name, checked before anything is loaded: the family, the
 * checks, the engine's spec, the one check --workload needs; --list prints
 * the plan here. ASSAY_EXIT_OK, -1 after --list, or ASSAY_EXIT_USAGE with
 * the reason on stderr. */
static int check_options(const struct verify_opts *o, struct assay_diag *diag)
{
    size_t n_plan;
    const struct assay_plan_item *plan = assay_verify_plan(&n_plan);
    enum assay_family fam;
    if (o->family != NULL && !assay_family_by_name(o->family, &fam)) {
        fprintf(stderr, "assay verify: --family expects " ASSAY_FAMILY_NAMES ", got '%s'\n",
                o->family);
        return ASSAY_EXIT_USAGE;
    }
    if (o->list) {
        assay_cli_list_checks(plan, n_plan, o->family != NULL ? &fam : NULL);
        return -1;
    }
    for (size_t i = 0; i < o->n_checks; i++) {
        if (assay_plan_find(o->checks[i]) == NULL) {
            fprintf(stderr, "assay verify: no check called '%s' (assay verify --list shows them)\n",
                    o->checks[i]);
            return ASSAY_EXIT_USAGE;
        }
    }
    assay_diag_clear(diag);
    if (assay_spec_check(o->engine, diag) != ASSAY_OK) {
        char why[800];
        fprintf(stderr, "assay verify: --engine: %s\n", assay_diag_format(diag, why, sizeof why));
        return ASSAY_EXIT_USAGE;
    }
    if (o->workload != NULL && o->n_checks != 1) {
        fprintf(stderr, "assay verify: --workload needs exactly one --check\n");
        return ASSAY_EXIT_USAGE;
    }
    return ASSAY_EXIT_OK;
}

/* The checks of the plan the options select (--family, --check), in the
 * plan's order, into sel; how many. */
static size_t select_checks(const struct verify_opts *o, const struct assay_plan_item *plan,
                            size_t n_plan, const struct assay_plan_item **sel)
{
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
    return n;
}

/* Whether the engine's weights load and --workload's file reads, found
 * before any check runs; false with the reason on stderr, which rank 0 of
 * an MPI run alone prints. */
static bool check_inputs(struct assay_verify_ctx *ctx, const struct verify_opts *o,
                         const struct assay_plan_item **sel, struct assay_diag *diag)
{
    /* Weights the spec names that cannot be loaded are the user's to fix,
     * before any check runs (each would end in ERROR). */
    enum assay_status est = assay_verify_check_engine(ctx, o->engine, diag);
    if (est != ASSAY_OK) {
        if (assay_shard_world_rank() == 0) {
            char why[900];
            fprintf(stderr, "assay verify: --engine: %s\n",
                    est == ASSAY_ERR_NOMEM ? "out of memory"
                                           : assay_diag_format(diag, why, sizeof why));
        }
        return false;
    }
    if (o->workload != NULL) {
        /* A bad file is the user's to fix, not a check's ERROR row; every
         * rank of an MPI run finds it bad alike and stops, rank 0 says why. */
        enum assay_status st =
            assay_verify_check_workload(ctx, sel[0], o->engine, o->workload, diag);
        if (st != ASSAY_OK && assay_shard_world_rank() == 0) {
            char why[900];
            fprintf(stderr, "assay verify: --workload: %s\n",
                    st == ASSAY_ERR_NOMEM ? "out of memory"
                                          : assay_diag_format(diag, why, sizeof why));
        }
        if (st != ASSAY_OK) {
            return false;
        }
    }
    return true;
}

/* Run the n selected checks into res with the options' settings; then, on
 * rank 0 alone, shrink the failures, print the table and choose the exit
 * status. The exit status. */
static int run_selected(struct assay_verify_ctx *ctx, const struct verify_opts *o,
                        const struct assay_plan_item **sel, size_t n,
                        struct assay_check_result *res)
{
    assay_verify_set_program(ctx, assay_cli_program());
    assay_verify_set_repro_dir(ctx, o->repro_dir);
    assay_verify_set_isolation(ctx, &o->iso);
    assay_cli_mpi_set_check_timeout(o->iso.timeout_s);
    int status = ASSAY_EXIT_OK;
    if (!assay_cli_run_items("verify", ctx, sel, n, o->engine, o->workload, res, &n)) {
        status = ASSAY_EXIT_USAGE;
    }
    if (assay_shard_world_rank() != 0) {
        /* Rank 0 shrinks, prints and answers for the run. */
        return status;
    }
    assay_verify_finalize(res, n);
    if (status == ASSAY_EXIT_OK && o->shrink && o->workload == NULL) {
        assay_cli_shrink_failures("verify", ctx, sel, res, n, o->engine, NULL, o->repro_dir);
    }
    assay_cli_print_results(stdout, res, n);
    if (status == ASSAY_EXIT_OK) {
        status = assay_cli_exit_status("verify", res, n, &o->require);
    }
    return status;
}

int assay_cmd_verify(int argc, char **argv)
{
    struct verify_opts o = {
        .engine = "bundled",
        .repro_dir = "assay-repro",
        .shrink = true,
        .iso = assay_isolation_default(),
        .seed = 1,
    };
    int rc = parse(argc, argv, &o);
    if (rc != ASSAY_EXIT_OK) {
        return rc < 0 ? ASSAY_EXIT_OK : rc;
    }
    struct assay_diag diag;
    rc = check_options(&o, &diag);
    if (rc != ASSAY_EXIT_OK) {
        return rc < 0 ? ASSAY_EXIT_OK : rc;
    }
    size_t n_plan;
    const struct assay_plan_item *plan = assay_verify_plan(&n_plan);
    const struct assay_plan_item **sel = calloc(n_plan, sizeof *sel);
    struct assay_check_result *res = calloc(n_plan, sizeof *res);
    if (sel == NULL || res == NULL) {
        fprintf(stderr, "assay verify: out of memory\n");
        free(sel);
        free(res);
        return ASSAY_EXIT_USAGE;
    }
    size_t n = select_checks(&o, plan, n_plan, sel);
    struct assay_verify_ctx *ctx = NULL;
    if (assay_verify_ctx_init(&ctx, assay_cli_fixtures(), o.seed) != ASSAY_OK) {
        fprintf(stderr, "assay verify: out of memory\n");
        free(sel);
        free(res);
        return ASSAY_EXIT_USAGE;
    }
    int status = check_inputs(ctx, &o, sel, &diag) ? run_selected(ctx, &o, sel, n, res)
                                                    : ASSAY_EXIT_USAGE;
    assay_verify_ctx_free(ctx);
    free(sel);
    free(res);
    return status;
}
