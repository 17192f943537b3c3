/*
 * kill_matrix.c - the kill matrix of planted bugs against checks
 * (kill_matrix.h): assay_kill_matrix_new and _add_row build the JSON row by
 * row, _validate and _load read it back, _render_html and _render_markdown
 * draw it, and _write writes all three after each row. `assay mutants
 * --matrix` (cli/cmd_mutants.c) builds it; `assay report` renders it again.
 */
#include "kill_matrix.h"

#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/json_out.h"
#include "report.h"
#include "schema.h"
#include "text.h"
#include "write.h"

/* ---- building ------------------------------------------------------------ */

cJSON *assay_kill_matrix_new(const char *command_line, const char *const *checks,
                             const char *const *families, size_t n_checks)
{
    cJSON *m = cJSON_CreateObject();
    cJSON *cols = cJSON_CreateArray();
    cJSON *rows = cJSON_CreateArray();
    char when[32];
    bool ok = m != NULL && cols != NULL && rows != NULL &&
              assay_json_add_str(m, "schema", ASSAY_KILL_MATRIX_SCHEMA) &&
              assay_json_add_num(m, "version", 1) &&
              assay_json_add_str(m, "command_line", command_line) &&
              assay_json_add_str(m, "created_utc", assay_utc_iso8601(when, sizeof when));
    for (size_t i = 0; ok && i < n_checks; i++) {
        cJSON *c = cJSON_CreateObject();
        ok = c != NULL && assay_json_add_str(c, "name", checks[i]) &&
             assay_json_add_str(c, "family", families[i]) && cJSON_AddItemToArray(cols, c);
        if (!ok) {
            cJSON_Delete(c);
        }
    }
    if (ok && cJSON_AddItemToObject(m, "checks", cols)) {
        cols = NULL;
        ok = cJSON_AddItemToObject(m, "rows", rows);
        rows = ok ? NULL : rows;
    } else {
        ok = false;
    }
    cJSON_Delete(cols);
    cJSON_Delete(rows);
    if (!ok) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

enum assay_status assay_kill_matrix_add_row(cJSON *m, const char *mutant, const char *family,
                                            const char *mechanism, const char *modelled_on,
                                            bool in_plan, const struct assay_kill_cell *cells,
                                            size_t n_cells)
{
    cJSON *row = cJSON_CreateObject();
    cJSON *caught = cJSON_CreateArray();
    int n_own = 0;
    bool ok = row != NULL && caught != NULL;
    for (size_t i = 0; ok && i < n_cells; i++) {
        bool own = strcmp(cells[i].family, family) == 0;
        n_own += own;
        cJSON *c = cJSON_CreateObject();
        ok = c != NULL && assay_json_add_str(c, "check", cells[i].check) &&
             assay_json_add_str(c, "family", cells[i].family) && assay_json_add_bool(c, "own", own) &&
             assay_json_add_str(c, "by", cells[i].by);
        if (ok) {
            ok = cJSON_AddItemToArray(caught, c);
        }
        if (!ok) {
            cJSON_Delete(c);
        }
    }
    ok = ok && assay_json_add_str(row, "mutant", mutant) && assay_json_add_str(row, "family", family) &&
         assay_json_add_str(row, "mechanism", mechanism) &&
         assay_json_add_str(row, "modelled_on", modelled_on) &&
         assay_json_add_bool(row, "in_plan", in_plan) && assay_json_add_num(row, "own", n_own) &&
         assay_json_add_num(row, "all", (double)n_cells);
    if (ok && cJSON_AddItemToObject(row, "caught", caught)) {
        caught = NULL;
        ok = cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(m, "rows"), row);
    } else {
        ok = false;
    }
    cJSON_Delete(caught);
    if (!ok) {
        cJSON_Delete(row);
        return ASSAY_ERR_NOMEM;
    }
    return ASSAY_OK;
}

enum assay_status assay_kill_matrix_set_fuzz_seeds(cJSON *m, int caught, int of)
{
    cJSON *rows = cJSON_GetObjectItemCaseSensitive(m, "rows");
    int n = cJSON_GetArraySize(rows);
    if (n == 0 || of < 1 || caught < 0 || caught > of) {
        return ASSAY_ERR_INVALID;
    }
    cJSON *row = cJSON_GetArrayItem(rows, n - 1);
    cJSON_DeleteItemFromObjectCaseSensitive(row, "fuzz_seeds");
    cJSON *f = cJSON_CreateObject();
    bool ok = f != NULL && assay_json_add_num(f, "caught", caught) &&
              assay_json_add_num(f, "of", of);
    if (ok && cJSON_AddItemToObject(row, "fuzz_seeds", f)) {
        return ASSAY_OK;
    }
    cJSON_Delete(f);
    return ASSAY_ERR_NOMEM;
}

/* ---- reading ------------------------------------------------------------- */

/* A row's fuzz_seeds, when measured: true with *caught and *of. */
static bool fuzz_seeds(const cJSON *row, int *caught, int *of)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(row, "fuzz_seeds");
    if (f == NULL) {
        return false;
    }
    *caught = (int)assay_json_num(f, "caught");
    *of = (int)assay_json_num(f, "of");
    return true;
}

static bool known_by(const char *by)
{
    return strcmp(by, "statistic") == 0 || strcmp(by, "rule") == 0 || strcmp(by, "died") == 0 ||
           strcmp(by, "exact") == 0;
}

enum assay_status assay_kill_matrix_validate(const cJSON *m, struct assay_diag *diag)
{
    static const struct assay_json_field top[] = {
        {"schema", ASSAY_JSON_STRING},       {"version", ASSAY_JSON_NUMBER},
        {"command_line", ASSAY_JSON_STRING}, {"created_utc", ASSAY_JSON_STRING},
        {"checks", ASSAY_JSON_ARRAY},        {"rows", ASSAY_JSON_ARRAY}};
    static const struct assay_json_field col[] = {{"name", ASSAY_JSON_STRING},
                                                  {"family", ASSAY_JSON_STRING}};
    static const struct assay_json_field row_f[] = {
        {"mutant", ASSAY_JSON_STRING},    {"family", ASSAY_JSON_STRING},
        {"mechanism", ASSAY_JSON_STRING}, {"modelled_on", ASSAY_JSON_STRING},
        {"in_plan", ASSAY_JSON_BOOL},     {"own", ASSAY_JSON_NUMBER},
        {"all", ASSAY_JSON_NUMBER},       {"caught", ASSAY_JSON_ARRAY}};
    static const struct assay_json_field cell_f[] = {{"check", ASSAY_JSON_STRING},
                                                     {"family", ASSAY_JSON_STRING},
                                                     {"own", ASSAY_JSON_BOOL},
                                                     {"by", ASSAY_JSON_STRING}};
    enum assay_status st = assay_json_require(m, NULL, top, sizeof top / sizeof top[0], diag);
    if (st != ASSAY_OK) {
        return st;
    }
    if (strcmp(assay_json_str(m, "schema", ""), ASSAY_KILL_MATRIX_SCHEMA) != 0 ||
        assay_json_num(m, "version") != 1) {
        assay_diag_set(diag, NULL, "schema", ASSAY_KILL_MATRIX_SCHEMA " version 1", "%s version %g",
                       assay_json_str(m, "schema", ""), assay_json_num(m, "version"));
        return ASSAY_ERR_PARSE;
    }
    const cJSON *cols = cJSON_GetObjectItemCaseSensitive(m, "checks");
    char where[64];
    int i = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cols)
    {
        snprintf(where, sizeof where, "checks[%d]", i++);
        if ((st = assay_json_require(c, where, col, 2, diag)) != ASSAY_OK) {
            return st;
        }
    }
    i = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(m, "rows"))
    {
        snprintf(where, sizeof where, "rows[%d]", i);
        if ((st = assay_json_require(r, where, row_f, sizeof row_f / sizeof row_f[0], diag)) !=
            ASSAY_OK) {
            return st;
        }
        const char *family = assay_json_str(r, "family", "");
        int n_own = 0, n_all = 0, j = 0;
        const cJSON *cell;
        cJSON_ArrayForEach(cell, cJSON_GetObjectItemCaseSensitive(r, "caught"))
        {
            snprintf(where, sizeof where, "rows[%d].caught[%d]", i, j++);
            if ((st = assay_json_require(cell, where, cell_f, 4, diag)) != ASSAY_OK) {
                return st;
            }
            const char *name = assay_json_str(cell, "check", "");
            bool is_col = false;
            cJSON_ArrayForEach(c, cols)
            {
                is_col = is_col || (strcmp(assay_json_str(c, "name", ""), name) == 0 &&
                                    strcmp(assay_json_str(c, "family", ""),
                                           assay_json_str(cell, "family", "")) == 0);
            }
            bool own = strcmp(assay_json_str(cell, "family", ""), family) == 0;
            if (!is_col || !known_by(assay_json_str(cell, "by", "")) ||
                own != (assay_json_bool(cell, "own") == 1)) {
                assay_diag_set(diag, NULL, where,
                               "a column's check and family, own when of the row's family, by "
                               "statistic, rule, died or exact",
                               "%s (%s), own %d, by %s", name, assay_json_str(cell, "family", ""),
                               assay_json_bool(cell, "own"), assay_json_str(cell, "by", ""));
                return ASSAY_ERR_PARSE;
            }
            n_own += own;
            n_all++;
        }
        const cJSON *fz = cJSON_GetObjectItemCaseSensitive(r, "fuzz_seeds");
        if (fz != NULL) {
            static const struct assay_json_field fz_f[] = {{"caught", ASSAY_JSON_NUMBER},
                                                           {"of", ASSAY_JSON_NUMBER}};
            snprintf(where, sizeof where, "rows[%d].fuzz_seeds", i);
            if ((st = assay_json_require(fz, where, fz_f, 2, diag)) != ASSAY_OK) {
                return st;
            }
            double k = assay_json_num(fz, "caught"), of = assay_json_num(fz, "of");
            if (!(of >= 1 && k >= 0 && k <= of) || k != (double)(long)k ||
                of != (double)(long)of) {
                assay_diag_set(diag, NULL, where, "whole numbers, 0 <= caught <= of, of >= 1",
                               "caught %g of %g", k, of);
                return ASSAY_ERR_PARSE;
            }
        }
        if (assay_json_num(r, "own") != n_own || assay_json_num(r, "all") != n_all ||
            (n_all > 0 && assay_json_bool(r, "in_plan") != 1)) {
            snprintf(where, sizeof where, "rows[%d]", i);
            assay_diag_set(diag, NULL, where, "own and all equal to its cells, cells only in the plan",
                           "own %g all %g for %d and %d cells", assay_json_num(r, "own"),
                           assay_json_num(r, "all"), n_own, n_all);
            return ASSAY_ERR_PARSE;
        }
        i++;
    }
    return ASSAY_OK;
}

enum assay_status assay_kill_matrix_load(const char *path, cJSON **out, struct assay_diag *diag)
{
    *out = NULL;
    assay_diag_clear(diag);
    char *text = NULL;
    size_t len = 0;
    enum assay_status st = assay_report_read_text(path, &text, &len, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    cJSON *m = cJSON_ParseWithLength(text, len);
    assay_free(text);
    if (m == NULL) {
        /* Not JSON: the report reader says where it breaks. */
        return ASSAY_ERR_UNSUPPORTED;
    }
    if (strcmp(assay_json_str(m, "schema", ""), ASSAY_KILL_MATRIX_SCHEMA) != 0) {
        cJSON_Delete(m);
        return ASSAY_ERR_UNSUPPORTED;
    }
    st = assay_kill_matrix_validate(m, diag);
    if (st != ASSAY_OK) {
        if (diag != NULL) {
            snprintf(diag->file, sizeof diag->file, "%s", path);
        }
        cJSON_Delete(m);
        return st;
    }
    *out = m;
    return ASSAY_OK;
}

/* ---- rendering ----------------------------------------------------------- */

static const char css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1b1b1b;"
    "background:#fafafa;line-height:1.45}\n"
    "main{max-width:1500px;margin:0 auto;padding:1em 1.5em 3em}\n"
    "h1{font-size:1.7em;margin:.4em 0}\n"
    "table.kill{border-collapse:collapse;font-size:.85em;display:block;overflow-x:auto;"
    "max-width:100%}\n"
    "table.kill th,table.kill td{border:1px solid #d4d4d4;padding:.2em .35em;background:#fff}\n"
    "table.kill th.col{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;"
    "font-weight:500;background:#f0f0f0}\n"
    "table.kill th.bug{text-align:left;white-space:nowrap;font-weight:500}\n"
    "table.kill td.cell{text-align:center;min-width:1.2em}\n"
    "table.kill td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    "td.k.own{background:#1a7f37;color:#fff}td.k.own.rule{background:#9a6700;color:#fff}\n"
    "td.k.other{background:#b6e3c1}td.k.died{background:#cf222e;color:#fff}\n"
    "tr.thin th.bug,tr.thin td.num{background:#fff1e5}\n"
    "th.fam{background:#e8e8e8}\n"
    "code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.9em}\n"
    ".muted{color:#666}p.para{max-width:60em}\n";

/* The glyph and class of a cell: how the check caught the bug. */
static const char *cell_glyph(const char *by, bool own, const char **cls)
{
    if (strcmp(by, "died") == 0) {
        *cls = own ? "k own died" : "k other died";
        return "\xe2\x9c\x96"; /* heavy multiplication x */
    }
    if (strcmp(by, "rule") == 0) {
        *cls = own ? "k own rule" : "k other rule";
        return "\xe2\x97\x90"; /* circle, left half black */
    }
    *cls = own ? "k own" : "k other";
    return own ? "\xe2\x97\x8f" : "\xe2\x97\x8b"; /* black / white circle */
}

static const cJSON *find_cell(const cJSON *row, const char *check, const char *family)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(row, "caught"))
    {
        if (strcmp(assay_json_str(c, "check", ""), check) == 0 &&
            strcmp(assay_json_str(c, "family", ""), family) == 0) {
            return c;
        }
    }
    return NULL;
}

enum assay_status assay_kill_matrix_render_html(const cJSON *m, char **out, size_t *len)
{
    struct assay_text t;
    assay_text_init(&t);
    const cJSON *cols = cJSON_GetObjectItemCaseSensitive(m, "checks");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(m, "rows");
    int n_rows = 0, n_thin = 0, n_plan = 0, n_fuzz = 0, fk, fn;
    const cJSON *r, *c;
    cJSON_ArrayForEach(r, rows)
    {
        n_rows++;
        n_fuzz += fuzz_seeds(r, &fk, &fn);
        if (assay_json_bool(r, "in_plan") == 1) {
            n_plan++;
            n_thin += assay_json_num(r, "own") < 2;
        }
    }
    assay_text_puts(&t, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                        "<link rel=\"icon\" href=\"data:,\">\n<title>assay kill matrix</title>\n"
                        "<style>\n");
    assay_text_puts(&t, css);
    assay_text_puts(&t, "</style>\n</head>\n<body><main>\n<h1>The kill matrix</h1>\n<p class=\"para\">"
                        "Every planted bug (a row) against every check of the verify plan that "
                        "ran (a column), measured by <code>");
    assay_text_html(&t, assay_json_str(m, "command_line", ""));
    assay_text_puts(&t, "</code> at ");
    assay_text_html(&t, assay_json_str(m, "created_utc", ""));
    assay_text_printf(&t,
                      ". %d bugs, %d run on the plan; %d of those caught by fewer than two checks "
                      "of their own family (shaded).</p>\n",
                      n_rows, n_plan, n_thin);
    assay_text_puts(&t, "<p class=\"para\" id=\"legend\"><span class=\"muted\">A cell says the check "
                        "FAILed on the bug:</span> &#9679; its own family&rsquo;s check (a "
                        "statistic or an exact comparison), &#9680; its own family&rsquo;s check "
                        "by the zero-probability rule alone, &#9675; a check of another family, "
                        "&#10006; the check&rsquo;s process died or hung in the engine.</p>\n");
    assay_text_puts(&t, "<table class=\"kill\" id=\"kill-matrix\">\n<thead><tr><th class=\"fam\">"
                        "planted bug</th><th class=\"fam\">family</th><th class=\"fam\">own"
                        "</th><th class=\"fam\">all</th>");
    if (n_fuzz > 0) {
        assay_text_puts(&t, "<th class=\"fam\" title=\"master seeds under which equiv.fuzz "
                            "FAILs on the bug\">fuzz seeds</th>");
    }
    cJSON_ArrayForEach(c, cols)
    {
        assay_text_puts(&t, "<th class=\"col\" title=\"");
        assay_text_html(&t, assay_json_str(c, "family", ""));
        assay_text_puts(&t, "\">");
        assay_text_html(&t, assay_json_str(c, "name", ""));
        assay_text_puts(&t, "</th>");
    }
    assay_text_puts(&t, "</tr></thead>\n<tbody>\n");
    cJSON_ArrayForEach(r, rows)
    {
        bool in_plan = assay_json_bool(r, "in_plan") == 1;
        bool thin = in_plan && assay_json_num(r, "own") < 2;
        assay_text_printf(&t, "<tr class=\"%s\" data-mutant=\"", thin ? "thin" : "");
        assay_text_html(&t, assay_json_str(r, "mutant", ""));
        assay_text_puts(&t, "\"><th class=\"bug\" title=\"");
        assay_text_html(&t, assay_json_str(r, "modelled_on", ""));
        assay_text_puts(&t, "\"><code>");
        assay_text_html(&t, assay_json_str(r, "mutant", ""));
        assay_text_puts(&t, "</code></th><td>");
        assay_text_html(&t, assay_json_str(r, "family", ""));
        assay_text_puts(&t, "</td>");
        if (!in_plan) {
            assay_text_printf(&t, "<td class=\"num\">&ndash;</td><td class=\"num\">&ndash;</td>"
                                  "<td colspan=\"%d\" class=\"muted\">caught outside the verify "
                                  "plan: the ",
                              cJSON_GetArraySize(cols) + (n_fuzz > 0));
            assay_text_html(&t, assay_json_str(r, "family", ""));
            assay_text_puts(&t, " label</td></tr>\n");
            continue;
        }
        assay_text_printf(&t, "<td class=\"num\">%d</td><td class=\"num\">%d</td>",
                          (int)assay_json_num(r, "own"), (int)assay_json_num(r, "all"));
        if (n_fuzz > 0 && fuzz_seeds(r, &fk, &fn)) {
            assay_text_printf(&t, "<td class=\"num\" data-fuzz-seeds=\"%d/%d\">%d/%d</td>", fk,
                              fn, fk, fn);
        } else if (n_fuzz > 0) {
            assay_text_puts(&t, "<td class=\"num\"></td>");
        }
        cJSON_ArrayForEach(c, cols)
        {
            const char *name = assay_json_str(c, "name", "");
            const cJSON *cell = find_cell(r, name, assay_json_str(c, "family", ""));
            if (cell == NULL) {
                assay_text_puts(&t, "<td class=\"cell\"></td>");
                continue;
            }
            const char *cls;
            const char *glyph = cell_glyph(assay_json_str(cell, "by", ""),
                                           assay_json_bool(cell, "own") == 1, &cls);
            assay_text_printf(&t, "<td class=\"cell %s\" data-check=\"", cls);
            assay_text_html(&t, name);
            assay_text_puts(&t, "\" title=\"");
            assay_text_html(&t, name);
            assay_text_puts(&t, " FAILs (");
            assay_text_html(&t, assay_json_str(cell, "by", ""));
            assay_text_printf(&t, ")\">%s</td>", glyph);
        }
        assay_text_puts(&t, "</tr>\n");
    }
    assay_text_puts(&t, "</tbody>\n</table>\n<footer><p class=\"muted\">Rendered from the "
                        "matrix&rsquo;s JSON (schema <code>" ASSAY_KILL_MATRIX_SCHEMA
                        "</code>, version 1), which is the truth; <code>assay report "
                        "FILE.json</code> renders this page again from it.</p></footer>\n"
                        "</main></body>\n</html>\n");
    return assay_text_take(&t, out, len);
}

enum assay_status assay_kill_matrix_render_markdown(const cJSON *m, char **out, size_t *len)
{
    struct assay_text t;
    assay_text_init(&t);
    assay_text_puts(&t, "# The kill matrix\n\nMeasured by `");
    assay_text_puts(&t, assay_json_str(m, "command_line", ""));
    assay_text_puts(&t, "` at ");
    assay_text_md(&t, assay_json_str(m, "created_utc", ""));
    assay_text_puts(&t, ". Each planted bug with the checks that FAIL on it, its own family's "
                        "first (\"rule\": by the zero-probability rule alone; \"died\": the "
                        "check's process died or hung).\n\n| planted bug | family | own | all | "
                        "checks that catch it (its own family's \\| the others') |\n|---|---|--:|"
                        "--:|---|\n");
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(m, "rows"))
    {
        assay_text_puts(&t, "| ");
        assay_text_md(&t, assay_json_str(r, "mutant", ""));
        assay_text_puts(&t, " | ");
        assay_text_md(&t, assay_json_str(r, "family", ""));
        if (assay_json_bool(r, "in_plan") != 1) {
            assay_text_puts(&t, " | - | - | caught outside the verify plan |\n");
            continue;
        }
        assay_text_printf(&t, " | %d | %d | ", (int)assay_json_num(r, "own"),
                          (int)assay_json_num(r, "all"));
        for (int pass = 0; pass < 2; pass++) {
            int k = 0;
            const cJSON *cell;
            cJSON_ArrayForEach(cell, cJSON_GetObjectItemCaseSensitive(r, "caught"))
            {
                if ((assay_json_bool(cell, "own") == 1) != (pass == 0)) {
                    continue;
                }
                if (pass == 1 && k == 0 && assay_json_num(r, "own") > 0) {
                    assay_text_puts(&t, " \\| ");
                }
                assay_text_puts(&t, k++ > 0 ? ", " : "");
                assay_text_md(&t, assay_json_str(cell, "check", ""));
                const char *by = assay_json_str(cell, "by", "");
                if (strcmp(by, "rule") == 0 || strcmp(by, "died") == 0) {
                    assay_text_printf(&t, " (%s)", by);
                }
            }
        }
        int fk, fn;
        if (fuzz_seeds(r, &fk, &fn)) {
            assay_text_printf(&t, "; equiv.fuzz under %d of %d master seeds", fk, fn);
        }
        assay_text_puts(&t, " |\n");
    }
    return assay_text_take(&t, out, len);
}

enum assay_status assay_kill_matrix_write(const cJSON *m, const char *dir, const char *base,
                                          bool with_json, struct assay_diag *diag)
{
    assay_diag_clear(diag);
    char *json = cJSON_Print(m);
    if (json == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    cJSON *back = cJSON_Parse(json);
    char *html = NULL, *md = NULL;
    size_t html_len = 0, md_len = 0;
    enum assay_status st = back == NULL ? ASSAY_ERR_NOMEM : assay_kill_matrix_validate(back, diag);
    if (st == ASSAY_OK) {
        st = assay_kill_matrix_render_html(back, &html, &html_len);
    }
    if (st == ASSAY_OK) {
        st = assay_kill_matrix_render_markdown(back, &md, &md_len);
    }
    const char *ext[3] = {"json", "html", "md"};
    const char *data[3] = {json, html, md};
    size_t lens[3] = {strlen(json), html_len, md_len};
    for (int i = with_json ? 0 : 1; st == ASSAY_OK && i < 3; i++) {
        char path[4096];
        int w = snprintf(path, sizeof path, "%s/%s.%s", dir, base, ext[i]);
        if (w < 0 || (size_t)w >= sizeof path) {
            assay_diag_set(diag, dir, "", "a path shorter than 4096 bytes", "a longer one");
            st = ASSAY_ERR_IO;
            break;
        }
        st = assay_report_write_file(path, data[i], lens[i], diag);
    }
    cJSON_Delete(back);
    cJSON_free(json);
    assay_free(html);
    assay_free(md);
    return st;
}
