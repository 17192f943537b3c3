/*
 * assay - is this inference engine fast and still right?
 *
 * Subcommands: run, verify, bench, report, audit, compare, mutants and
 * version, as docs/cli.md documents them. Exit status (reports/outcome.h):
 * 0 when everything checked passed, 1 when a check failed, 2 for a usage or
 * input error, 3 when compare finds a significant performance regression,
 * 4 when fewer checks ran than --require-checks asks for.
 */
#include <stdio.h>
#include <string.h>

#include "bench_cli.h"
#include "cli.h"
#include "core/blas.h"
#include "core/mutant.h"
#include "reports/stamp.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: assay COMMAND [OPTIONS]\n"
            "\n"
            "Verify that an LLM inference engine's optimised paths produce what a naive\n"
            "oracle produces, and measure its latency the way it must be measured.\n"
            "\n"
            "commands:\n"
            "  run        verify, benchmark and write the report (JSON, HTML, Markdown)\n"
            "  verify     run the verification plan (equivalence, distributional, property)\n"
            "  bench      benchmark alone: open or closed loop, the seed's table, rate sweep\n"
            "  report     render a saved report's HTML and Markdown again from its JSON\n"
            "  mutants    list the planted bugs that prove each check can fail\n"
            "  audit      check an OpenAI-compatible server serving a GGUF file against the\n"
            "             oracle, and benchmark it beside the bundled engine\n"
            "  compare    BASELINE CANDIDATE: is the candidate still right, and really faster?\n"
            "  version    this assay's version and the content hash of its sources (also\n"
            "             assay --version)\n"
            "\n"
            "`assay COMMAND --help` describes each command. Exit status: 0 all passed,\n"
            "1 a check failed, 2 usage or input error, 3 performance regression (compare),\n"
            "4 fewer checks ran than --require-checks asks for.\n");
}

/* `assay --version`: what the stamp of a report would say of the code. */
static void version(void)
{
    struct assay_build_facts bf;
    assay_build_facts_get(&bf);
    printf("assay %s\n", bf.version);
    printf("commit %s%s\n", bf.git_commit,
           bf.git_dirty == 1   ? " (dirty tree: sources differ from the commit)"
           : bf.git_dirty == 0 ? " (clean)"
                               : "");
    printf("sources sha256 %s (%d files)\n", bf.source_sha256, bf.source_files);
    printf("%s build; planted bugs: %s\n", bf.build_type,
           assay_mutants_compiled() ? "compiled in (this is assay-mutants)"
                                    : "none (the test build's assay-mutants has them)");
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return ASSAY_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return ASSAY_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
            printf("usage: assay version (or assay --version)\n\nPrint this assay's version, "
                   "its git commit, the content hash of the sources that built\nit (the one "
                   "every report's stamp carries) and whether the planted bugs are compiled in.\n");
            return ASSAY_EXIT_OK;
        }
        if (argc > 2) {
            fprintf(stderr, "assay %s: takes no argument, got '%s'\n", cmd, argv[2]);
            return ASSAY_EXIT_USAGE;
        }
        version();
        return ASSAY_EXIT_OK;
    }
    if (strcmp(cmd, "verify") == 0) {
        assay_cli_catch_interrupts(cmd, NULL);
        return assay_cmd_verify(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "mutants") == 0) {
        /* the kill matrix is written after every row (cmd_mutants.c) */
        assay_cli_catch_interrupts(cmd, "a kill matrix written with --out keeps the rows "
                                        "it finished");
        return assay_cmd_mutants(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "run") == 0) {
        assay_cli_catch_interrupts(cmd, NULL);
        return assay_cmd_run(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "bench") == 0) {
        assay_cli_catch_interrupts(cmd, NULL);
        return assay_cmd_bench(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "report") == 0) {
        assay_cli_catch_interrupts(cmd, NULL);
        return assay_cmd_report(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "audit") == 0) {
        assay_cli_catch_interrupts(cmd, NULL);
        return assay_cmd_audit(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "compare") == 0) {
        assay_cli_catch_interrupts(cmd, NULL);
        return assay_cmd_compare(argc - 1, argv + 1);
    }
    fprintf(stderr, "assay: unknown %s '%s' (assay --help lists the commands)\n",
            cmd[0] == '-' ? "option" : "command", cmd);
    return ASSAY_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    /* Before MPI: it may execute the program again. */
    assay_blas_select_core(argv);
    if (!assay_cli_mpi_start(&argc, &argv)) {
        return ASSAY_EXIT_USAGE;
    }
    int rc = dispatch(argc, argv);
    assay_cli_mpi_end();
    return rc;
}
