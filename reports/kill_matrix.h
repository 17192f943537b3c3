/*
 * kill_matrix.h - the kill matrix: every planted bug against every check of
 * the verify plan, as JSON (the truth) and rendered as HTML and Markdown.
 *
 * `assay mutants --matrix --out DIR` builds it one row at a time and writes
 * DIR/kill-matrix.json, .html and .md after each row, so an interrupted run
 * of an hour keeps the rows it measured; `assay report kill-matrix.json`
 * renders the pages again from the JSON.
 *
 * The JSON (schema "assay-kill-matrix", version 1):
 *   checks: [{name, family}]              the columns: the checks that ran
 *   rows:   [{mutant, family, mechanism, modelled_on, in_plan,
 *             own, all, caught: [{check, family, own, by}],
 *             fuzz_seeds: {caught, of}}]
 * where `by` is how the check failed: "statistic" (a distributional
 * statistic fired), "rule" (the zero-probability rule alone), "died" (the
 * check's process was killed by a signal or its time limit), "exact" (a
 * comparison or an invariant); `own` marks a check of the bug's own family.
 * A row with in_plan false is a bug caught outside the verify plan (its
 * label names it) and has no cells. fuzz_seeds, in rows measured with
 * `--fuzz-seeds N`, is how many of the master seeds 1..N made equiv.fuzz
 * FAIL on the bug (a catch that rests on one seed's luck shows there).
 */
#ifndef ASSAY_KILL_MATRIX_H
#define ASSAY_KILL_MATRIX_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "../core/status.h"

#define ASSAY_KILL_MATRIX_SCHEMA "assay-kill-matrix"

/* One failing check of a row. */
struct assay_kill_cell {
    const char *check;
    const char *family;
    const char *by; /* "statistic", "rule", "died" or "exact" */
};

/* A matrix with these columns and no rows; NULL when out of memory. */
cJSON *assay_kill_matrix_new(const char *command_line, const char *const *checks,
                             const char *const *families, size_t n_checks);

/* Append a bug's row: its catalog entry and the checks that FAILed on it
 * (n_cells 0 and in_plan false for a bug caught outside the plan).
 * ASSAY_ERR_NOMEM. */
enum assay_status assay_kill_matrix_add_row(cJSON *m, const char *mutant, const char *family,
                                            const char *mechanism, const char *modelled_on,
                                            bool in_plan, const struct assay_kill_cell *cells,
                                            size_t n_cells);

/* Add to the last row the number of master seeds, of `of`, under which
 * equiv.fuzz caught its bug. ASSAY_ERR_INVALID when there is no row or
 * caught is not in 0..of, ASSAY_ERR_NOMEM. */
enum assay_status assay_kill_matrix_set_fuzz_seeds(cJSON *m, int caught, int of);

/* Check that m is a kill matrix: its fields and their types, every cell a
 * column of the matrix, each row's own and all equal to its cells. On
 * failure ASSAY_ERR_PARSE with diag naming the field. */
enum assay_status assay_kill_matrix_validate(const cJSON *m, struct assay_diag *diag);

/* Read and parse path. ASSAY_ERR_UNSUPPORTED when it is JSON but not a kill
 * matrix (another kind of report: *out NULL); ASSAY_ERR_IO, ASSAY_ERR_PARSE
 * (malformed, or a kill matrix that fails validation), ASSAY_ERR_NOMEM. */
enum assay_status assay_kill_matrix_load(const char *path, cJSON **out, struct assay_diag *diag);

/* The pages, into *out (assay_free) and *len. ASSAY_ERR_NOMEM. */
enum assay_status assay_kill_matrix_render_html(const cJSON *m, char **out, size_t *len);
enum assay_status assay_kill_matrix_render_markdown(const cJSON *m, char **out, size_t *len);

/* Write DIR/BASE.html and .md, and DIR/BASE.json when with_json,
 * atomically (reports/write.h), the pages rendered from the JSON text
 * parsed back. ASSAY_ERR_IO with diag, ASSAY_ERR_NOMEM. */
enum assay_status assay_kill_matrix_write(const cJSON *m, const char *dir, const char *base,
                                          bool with_json, struct assay_diag *diag);

#endif
