/* assay report: render a saved report's HTML and Markdown again from its
 * JSON alone. */
#include <getopt.h>
#include <limits.h>
#include <string.h>

#include "bench_cli.h"
#include "cli.h"
#include "core/alloc.h"
#include "reports/kill_matrix.h"
#include "reports/markdown.h"
#include "reports/report.h"
#include "reports/write.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: assay report FILE.json [--out DIR] [--markdown] [--json]\n"
            "\n"
            "Render FILE.html and FILE.md again from FILE.json alone (the JSON is the truth;\n"
            "the renderings are views of it). The JSON is checked against the report schema\n"
            "first: an error names the field, what was expected and what was found.\n"
            "\n"
            "  --out DIR     write the renderings into DIR (created if missing) instead of\n"
            "                beside FILE.json\n"
            "  --markdown    also print the Markdown on stdout (for a CI log or a comment)\n"
            "  --json        print the checked JSON on stdout instead of the file names\n"
            "\n"
            "Exit status: the one the command that wrote the report ended with, which the\n"
            "report records (0-4: a compare's regression is 3, too few checks run for\n"
            "--require-checks 4); for a report of an older assay, which records none, what\n"
            "its verdict implies (0 passed or no check run, 1 a check failed, 2 a check could\n"
            "not run). 2 also for a usage or input error.\n");
}

int assay_cmd_report(int argc, char **argv)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'}, {"markdown", no_argument, NULL, 'm'},
        {"json", no_argument, NULL, 'j'},      {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out_dir = NULL;
    bool markdown = false, json = false;
    int c;
    assay_cli_options_begin();
    while ((c = getopt_long(argc, argv, ASSAY_CLI_OPTSTRING, opts, NULL)) != -1) {
        switch (c) {
        case 'o': out_dir = optarg; break;
        case 'm': markdown = true; break;
        case 'j': json = true; break;
        case 'h': usage(stdout); return ASSAY_EXIT_OK;
        default: return assay_cli_bad_option("report", c, argc, argv);
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, optind >= argc ? "assay report: which report? (assay report FILE.json)\n"
                                       : "assay report: one report at a time\n");
        return ASSAY_EXIT_USAGE;
    }
    const char *path = argv[optind];
    /* FILE.json -> DIR/FILE.{html,md}; DIR defaults to FILE's own. */
    const char *slash = strrchr(path, '/');
    const char *name = slash != NULL ? slash + 1 : path;
    char dir[PATH_MAX], base[PATH_MAX];
    if (out_dir != NULL) {
        snprintf(dir, sizeof dir, "%s", out_dir);
    } else if (slash == NULL) {
        snprintf(dir, sizeof dir, ".");
    } else {
        snprintf(dir, sizeof dir, "%.*s", (int)(slash == path ? 1 : slash - path), path);
    }
    size_t n = strlen(name);
    if (n > 5 && strcmp(name + n - 5, ".json") == 0) {
        n -= 5;
    }
    snprintf(base, sizeof base, "%.*s", (int)n, name);
    if (base[0] == '\0') {
        fprintf(stderr, "assay report: '%s' names no file\n", path);
        return ASSAY_EXIT_USAGE;
    }
    if (out_dir != NULL && !assay_cli_prepare_out_dir("report", out_dir)) {
        return ASSAY_EXIT_USAGE;
    }
    cJSON *report = NULL;
    struct assay_diag diag;
    char why[900];
    /* A kill matrix (assay mutants --matrix --out) renders as its own page. */
    enum assay_status st = assay_kill_matrix_load(path, &report, &diag);
    if (st == ASSAY_OK) {
        st = assay_kill_matrix_write(report, dir, base, false, &diag);
        cJSON_Delete(report);
        if (st != ASSAY_OK) {
            fprintf(stderr, "assay report: %s\n",
                    st == ASSAY_ERR_NOMEM ? "out of memory"
                                          : assay_diag_format(&diag, why, sizeof why));
            return ASSAY_EXIT_USAGE;
        }
        printf("%s: a kill matrix\nwrote %s/%s.html\n      %s/%s.md\n", path, dir, base, dir, base);
        return ASSAY_EXIT_OK;
    }
    if (st != ASSAY_ERR_UNSUPPORTED) {
        fprintf(stderr, "assay report: %s\n",
                st == ASSAY_ERR_NOMEM ? "out of memory" : assay_diag_format(&diag, why, sizeof why));
        return ASSAY_EXIT_USAGE;
    }
    st = assay_report_load(path, &report, &diag);
    if (st != ASSAY_OK) {
        fprintf(stderr, "assay report: %s\n",
                st == ASSAY_ERR_NOMEM ? "out of memory" : assay_diag_format(&diag, why, sizeof why));
        return ASSAY_EXIT_USAGE;
    }
    struct assay_report_paths paths;
    st = assay_report_write_renderings(report, dir, base, &paths, &diag);
    if (st != ASSAY_OK) {
        fprintf(stderr, "assay report: %s\n",
                st == ASSAY_ERR_NOMEM ? "out of memory" : assay_diag_format(&diag, why, sizeof why));
        cJSON_Delete(report);
        return ASSAY_EXIT_USAGE;
    }
    if (json) {
        assay_cli_print_json(report);
    } else {
        if (markdown) {
            char *md = NULL;
            size_t len = 0;
            if (assay_report_render_markdown(report, &md, &len) == ASSAY_OK) {
                fwrite(md, 1, len, stdout);
                printf("\n");
            }
            assay_free(md);
        }
        char title[200];
        printf("%s: %s (exit status %d)\nwrote %s\n      %s\n", path,
               assay_report_title(report, title, sizeof title), assay_report_exit_status(report),
               paths.html, paths.md);
    }
    int status = assay_report_exit_status(report);
    cJSON_Delete(report);
    return status;
}
