/* assay mutants: the catalog of planted bugs, and which checks catch each. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cli.h"
#include "checks/context.h"
#include "checks/isolate.h"
#include "checks/plan.h"
#include "cli.h"
#include "core/mutant.h"
#include "reports/kill_matrix.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: assay mutants [--tsv | --matrix [--family FAMILY] [--mutant NAME]...\n"
            "                     [--check NAME]... [--fuzz-seeds N] [--timeout S] [--out DIR]]\n"
            "\n"
            "List the planted bugs (mutants) that prove every check can fail: name, the\n"
            "family expected to catch it, what it does wrong and the real bug it imitates.\n"
            "They are compiled only into the test build's assay-mutants command; `ctest -L\n"
            "mutants` shows each one caught.\n"
            "\n"
            "  --tsv            the catalog (core/mutants.def) as tab-separated lines: name,\n"
            "                   caught by, mechanism, modelled on; one line per bug\n"
            "  --matrix         the kill matrix: run the verify plan on every planted bug and\n"
            "                   print, for each, every check that catches it (FAIL), those\n"
            "                   of the bug's own family first; slow (the whole plan per bug)\n"
            "  --family FAMILY  only the bugs of this family, and only its checks\n"
            "  --mutant NAME    only this bug (repeatable)\n"
            "  --check NAME     only this check of the plan (repeatable)\n"
            "  --fuzz-seeds N   also run equiv.fuzz under the master seeds 1..N on each bug\n"
            "                   and give how many catch it: a catch that rests on one seed's\n"
            "                   luck shows there (a seed that misses costs up to the check's\n"
            "                   60 s); needs equiv.fuzz among the checks\n"
            "  --timeout S      each check's time limit in the matrix (default 120): a bug\n"
            "                   that hangs the engine costs it once per check\n"
            "  --out DIR        also write the matrix to DIR/kill-matrix.json and render it\n"
            "                   as kill-matrix.html and kill-matrix.md, after every row (an\n"
            "                   interrupted run keeps the rows it measured)\n");
}

/* How a failing check caught the bug, as the kill matrix's JSON says it. */
static const char *caught_by(const struct assay_check_result *r)
{
    if (r->died_signal != 0 || r->timed_out) {
        return "died";
    }
    if (r->statistic_fired) {
        return "statistic";
    }
    return r->rule_fired ? "rule" : "exact";
}

/* Under how many of the master seeds 1..n_seeds equiv.fuzz (fuzz, whose
 * verdict under seed 1 is first) catches the bug of spec; the seeds that
 * miss are listed in missed. -1 when memory ran out. */
static int fuzz_seed_rate(struct assay_verify_ctx *ctx, const struct assay_plan_item *fuzz,
                          const char *spec, const char *bug, enum assay_verdict first,
                          int n_seeds, char *missed, size_t missed_size)
{
    int caught = first == ASSAY_VERDICT_FAIL;
    missed[0] = '\0';
    if (!caught) {
        snprintf(missed, missed_size, "1");
    }
    for (int s = 2; s <= n_seeds; s++) {
        fprintf(stderr, "\rassay mutants: %-26s equiv.fuzz under master seed %d/%d   ", bug, s,
                n_seeds);
        struct assay_check_result r;
        assay_verify_set_master_seed(ctx, (uint64_t)s);
        enum assay_status st = assay_run_plan_item(ctx, fuzz, spec, NULL, &r);
        assay_verify_set_master_seed(ctx, 1);
        if (st != ASSAY_OK) {
            return -1;
        }
        if (r.verdict == ASSAY_VERDICT_FAIL) {
            caught++;
        } else {
            size_t l = strlen(missed);
            snprintf(missed + l, missed_size - l, "%s%d", l > 0 ? " " : "", s);
        }
    }
    fprintf(stderr, "\r%80s\r", "");
    return caught;
}

/* One row of the kill matrix: run the selected plan on mutant m, print the
 * row and add it to km (when not NULL); with n_seeds > 0 also equiv.fuzz's
 * rate over the master seeds 1..n_seeds. */
static int matrix_row(struct assay_verify_ctx *ctx, const struct assay_mutant_info *m,
                      const struct assay_plan_item *const *sel, size_t n,
                      struct assay_check_result *res, cJSON *km, int n_seeds)
{
    char spec[128];
    snprintf(spec, sizeof spec, "bundled:mutant=%s", m->name);
    char own[1200] = "", other[1200] = "";
    int n_own = 0, n_other = 0;
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, "\rassay mutants: %-26s %3zu/%zu %-30s", m->name, i + 1, n, sel[i]->name);
        if (assay_run_plan_item(ctx, sel[i], spec, NULL, &res[i]) != ASSAY_OK) {
            fprintf(stderr, "\nassay mutants: out of memory\n");
            return ASSAY_EXIT_USAGE;
        }
    }
    fprintf(stderr, "\r%80s\r", "");
    assay_verify_finalize(res, n);
    struct assay_kill_cell cells[256];
    size_t n_cells = 0;
    for (size_t i = 0; i < n; i++) {
        if (res[i].verdict != ASSAY_VERDICT_FAIL) {
            continue;
        }
        bool mine = strcmp(assay_family_str(sel[i]->family), m->caught_by) == 0;
        char *list = mine ? own : other;
        size_t l = strlen(list);
        snprintf(list + l, sizeof own - l, "%s%s", l > 0 ? " " : "", sel[i]->name);
        n_own += mine;
        n_other += !mine;
        if (n_cells < sizeof cells / sizeof cells[0]) {
            cells[n_cells++] = (struct assay_kill_cell){sel[i]->name,
                                                        assay_family_str(sel[i]->family),
                                                        caught_by(&res[i])};
        }
    }
    printf("%-26s %-15s %4d %4d  %s%s%s\n", m->name, m->caught_by, n_own, n_own + n_other, own,
           n_other > 0 ? (n_own > 0 ? " | " : "| ") : "", other);
    fflush(stdout);
    if (km != NULL && assay_kill_matrix_add_row(km, m->name, m->caught_by, m->mechanism,
                                                m->modelled_on, true, cells, n_cells) != ASSAY_OK) {
        fprintf(stderr, "assay mutants: out of memory\n");
        return ASSAY_EXIT_USAGE;
    }
    for (size_t i = 0; n_seeds > 0 && i < n; i++) {
        if (strcmp(sel[i]->name, "equiv.fuzz") != 0) {
            continue;
        }
        char missed[1024];
        int caught = fuzz_seed_rate(ctx, sel[i], spec, m->name, res[i].verdict, n_seeds, missed,
                                    sizeof missed);
        if (caught < 0 ||
            (km != NULL && assay_kill_matrix_set_fuzz_seeds(km, caught, n_seeds) != ASSAY_OK)) {
            fprintf(stderr, "assay mutants: out of memory\n");
            return ASSAY_EXIT_USAGE;
        }
        printf("%-26s equiv.fuzz catches it under %d of %d master seeds%s%s\n", "", caught,
               n_seeds, missed[0] != '\0' ? "; misses under " : "", missed);
        fflush(stdout);
    }
    return ASSAY_EXIT_OK;
}

/* Write the matrix so far to out_dir; false (said on stderr) when it fails. */
static bool write_matrix(const cJSON *km, const char *out_dir)
{
    struct assay_diag diag;
    char why[900];
    enum assay_status st = assay_kill_matrix_write(km, out_dir, "kill-matrix", true, &diag);
    if (st != ASSAY_OK) {
        fprintf(stderr, "assay mutants: %s\n",
                st == ASSAY_ERR_NOMEM ? "out of memory" : assay_diag_format(&diag, why, sizeof why));
        return false;
    }
    return true;
}

static int matrix(const char *family, char **names, int n_names, char **checks, int n_checks,
                  int n_seeds, double timeout_s, const char *out_dir, const char *command_line)
{
    if (!assay_mutants_compiled()) {
        fprintf(stderr, "assay mutants: this binary has no planted bugs; run the test build's "
                        "assay-mutants mutants --matrix\n");
        return ASSAY_EXIT_USAGE;
    }
    size_t n_plan;
    const struct assay_plan_item *plan = assay_verify_plan(&n_plan);
    const struct assay_plan_item **sel = calloc(n_plan, sizeof *sel);
    struct assay_check_result *res = calloc(n_plan, sizeof *res);
    struct assay_verify_ctx *ctx = NULL;
    if (sel == NULL || res == NULL || assay_verify_ctx_init(&ctx, assay_cli_fixtures(), 1) != ASSAY_OK) {
        fprintf(stderr, "assay mutants: out of memory\n");
        free(sel);
        free(res);
        return ASSAY_EXIT_USAGE;
    }
    size_t n = 0;
    bool has_fuzz = false;
    for (size_t i = 0; i < n_plan; i++) {
        bool want = n_checks == 0;
        for (int j = 0; j < n_checks; j++) {
            want = want || strcmp(checks[j], plan[i].name) == 0;
        }
        if (want && (family == NULL || strcmp(assay_family_str(plan[i].family), family) == 0)) {
            has_fuzz = has_fuzz || strcmp(plan[i].name, "equiv.fuzz") == 0;
            sel[n++] = &plan[i];
        }
    }
    const char *why = NULL;
    if (n == 0) {
        why = "no check of the plan matches --check and --family (assay verify --list)";
    } else if (n_seeds > 0 && !has_fuzz) {
        why = "--fuzz-seeds needs equiv.fuzz among the checks";
    }
    if (why != NULL) {
        fprintf(stderr, "assay mutants: %s\n", why);
        assay_verify_ctx_free(ctx);
        free(sel);
        free(res);
        return ASSAY_EXIT_USAGE;
    }
    cJSON *km = NULL;
    if (out_dir != NULL) {
        const char **col_names = calloc(n + 1, sizeof *col_names);
        const char **col_families = calloc(n + 1, sizeof *col_families);
        for (size_t i = 0; col_names != NULL && col_families != NULL && i < n; i++) {
            col_names[i] = sel[i]->name;
            col_families[i] = assay_family_str(sel[i]->family);
        }
        km = col_names != NULL && col_families != NULL
                 ? assay_kill_matrix_new(command_line, col_names, col_families, n)
                 : NULL;
        free(col_names);
        free(col_families);
        if (km == NULL) {
            fprintf(stderr, "assay mutants: out of memory\n");
            assay_verify_ctx_free(ctx);
            free(sel);
            free(res);
            return ASSAY_EXIT_USAGE;
        }
    }
    assay_verify_set_program(ctx, assay_cli_program());
    struct assay_isolation iso = {true, timeout_s};
    assay_verify_set_isolation(ctx, &iso);
    printf("%-26s %-15s %4s %4s  %s\n", "planted bug", "family", "own", "all",
           "checks that catch it (its own family's | the others')");
    int status = ASSAY_EXIT_OK;
    int rows = 0;
    for (int k = 1; k < ASSAY_MUTANT_COUNT && status == ASSAY_EXIT_OK; k++) {
        const struct assay_mutant_info *m = assay_mutant_info((enum assay_mutant)k);
        bool want = n_names == 0;
        for (int j = 0; j < n_names; j++) {
            want = want || strcmp(names[j], m->name) == 0;
        }
        if (!want || (family != NULL && strcmp(m->caught_by, family) != 0)) {
            continue;
        }
        enum assay_family own;
        if (!assay_family_by_name(m->caught_by, &own)) {
            printf("%-26s %-15s    -    -  (caught outside the verify plan: the %s label)\n",
                   m->name, m->caught_by, m->caught_by);
            if (km != NULL && assay_kill_matrix_add_row(km, m->name, m->caught_by, m->mechanism,
                                                        m->modelled_on, false, NULL,
                                                        0) != ASSAY_OK) {
                fprintf(stderr, "assay mutants: out of memory\n");
                status = ASSAY_EXIT_USAGE;
            }
        } else {
            status = matrix_row(ctx, m, sel, n, res, km, n_seeds);
        }
        rows++;
        if (status == ASSAY_EXIT_OK && km != NULL && !write_matrix(km, out_dir)) {
            status = ASSAY_EXIT_USAGE;
        }
    }
    if (status == ASSAY_EXIT_OK && km != NULL) {
        printf("wrote %s/kill-matrix.json, .html and .md\n", out_dir);
    }
    cJSON_Delete(km);
    if (status == ASSAY_EXIT_OK && rows == 0) {
        fprintf(stderr, "assay mutants: no planted bug matches\n");
        status = ASSAY_EXIT_USAGE;
    }
    assay_verify_ctx_free(ctx);
    free(sel);
    free(res);
    return status;
}

int assay_cmd_mutants(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},         {"matrix", no_argument, NULL, 'm'},
        {"family", required_argument, NULL, 'f'}, {"mutant", required_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, 't'}, {"out", required_argument, NULL, 'o'},
        {"tsv", no_argument, NULL, 'v'},          {"check", required_argument, NULL, 'c'},
        {"fuzz-seeds", required_argument, NULL, 's'}, {NULL, 0, NULL, 0}};
    bool want_matrix = false, want_tsv = false;
    const char *family = NULL;
    char *names[64], *checks[64];
    int n_names = 0, n_checks = 0, n_seeds = 0;
    double timeout_s = 120.0;
    const char *out_dir = NULL;
    assay_cli_options_begin();
    int c;
    while ((c = getopt_long(argc, argv, ASSAY_CLI_OPTSTRING, opts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return ASSAY_EXIT_OK;
        case 'm': want_matrix = true; break;
        case 'v': want_tsv = true; break;
        case 'f': family = optarg; break;
        case 'o': out_dir = optarg; break;
        case 'n':
            if (n_names == 64) {
                fprintf(stderr, "assay mutants: at most 64 --mutant\n");
                return ASSAY_EXIT_USAGE;
            }
            names[n_names++] = optarg;
            break;
        case 'c':
            if (n_checks == 64) {
                fprintf(stderr, "assay mutants: at most 64 --check\n");
                return ASSAY_EXIT_USAGE;
            }
            checks[n_checks++] = optarg;
            break;
        case 's': {
            uint64_t v = 0;
            if (!assay_cli_parse_u64("--fuzz-seeds", optarg, &v)) {
                return ASSAY_EXIT_USAGE;
            }
            if (v < 1 || v > 1000) {
                fprintf(stderr, "assay mutants: --fuzz-seeds expects a number of seeds in 1..1000, "
                                "got '%s'\n", optarg);
                return ASSAY_EXIT_USAGE;
            }
            n_seeds = (int)v;
            break;
        }
        case 't': {
            char *end = NULL;
            timeout_s = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(timeout_s > 0.0 && timeout_s <= 86400.0)) {
                fprintf(stderr, "assay mutants: --timeout expects seconds in (0, 86400], got '%s'\n",
                        optarg);
                return ASSAY_EXIT_USAGE;
            }
            break;
        }
        default: return assay_cli_bad_option("mutants", c, argc, argv);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "assay mutants: unexpected argument '%s'\n", argv[optind]);
        return ASSAY_EXIT_USAGE;
    }
    if (want_tsv && want_matrix) {
        fprintf(stderr, "assay mutants: --tsv and --matrix are two different outputs; pick one\n");
        return ASSAY_EXIT_USAGE;
    }
    if (!want_matrix &&
        (family != NULL || n_names > 0 || n_checks > 0 || n_seeds > 0 || out_dir != NULL)) {
        fprintf(stderr, "assay mutants: --family, --mutant, --check, --fuzz-seeds and --out go "
                        "with --matrix\n");
        return ASSAY_EXIT_USAGE;
    }
    enum assay_family fam;
    if (family != NULL && !assay_family_by_name(family, &fam)) {
        fprintf(stderr, "assay mutants: --family expects " ASSAY_FAMILY_NAMES ", got '%s'\n",
                family);
        return ASSAY_EXIT_USAGE;
    }
    if (want_matrix) {
        if (out_dir != NULL && !assay_cli_prepare_out_dir("mutants", out_dir)) {
            return ASSAY_EXIT_USAGE;
        }
        char joined[2048], command_line[2100];
        assay_cli_join_argv(argc, argv, joined, sizeof joined);
        /* The planted bugs run only in the test build's assay-mutants. */
        snprintf(command_line, sizeof command_line, "assay-mutants%s", joined + strlen("assay"));
        return matrix(family, names, n_names, checks, n_checks, n_seeds, timeout_s, out_dir,
                      command_line);
    }
    if (want_tsv) {
        for (int i = 1; i < ASSAY_MUTANT_COUNT; i++) {
            const struct assay_mutant_info *m = assay_mutant_info((enum assay_mutant)i);
            printf("%s\t%s\t%s\t%s\n", m->name, m->caught_by, m->mechanism, m->modelled_on);
        }
        return ASSAY_EXIT_OK;
    }
    printf("planted bugs in this binary: %s\n\n", assay_mutants_compiled() ? "yes" : "none (see assay-mutants)");
    for (int i = 1; i < ASSAY_MUTANT_COUNT; i++) {
        const struct assay_mutant_info *m = assay_mutant_info((enum assay_mutant)i);
        printf("%-26s caught by %s\n    %s\n    modelled on: %s\n", m->name, m->caught_by,
               m->mechanism, m->modelled_on);
    }
    return ASSAY_EXIT_OK;
}
