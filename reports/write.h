/*
 * write.h - writing a report (reports/report.h) and its renderings
 * (reports/html.h, reports/markdown.h) to files, safely.
 *
 * Files are written to a temporary name in the destination directory,
 * flushed to disk and renamed into place, so a reader never finds a
 * half-written report under the final name; on any failure the temporary
 * file is removed and whatever was there before is left untouched. A
 * report's JSON, HTML and Markdown are written as one: all go to temporary
 * files first, and none is renamed into place until all are complete. Not
 * handled: a rename that fails after an earlier one succeeded leaves the
 * earlier files new and the rest old.
 *
 * This module sits above the renderers: it calls them, and they read
 * report.h but never this header, so the includes run one way.
 *
 * Usage:
 *     struct assay_report_paths paths;
 *     struct assay_diag diag;
 *     if (assay_report_write_all(report, "out", "report", &paths, &diag) != ASSAY_OK) {
 *         // diag names the file and why
 *     }
 */
#ifndef ASSAY_WRITE_H
#define ASSAY_WRITE_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "../core/status.h"

/*
 * Write len bytes to path atomically: a temporary file in the same
 * directory (".NAME.XXXXXX"), fsync, rename over path. On failure the
 * temporary file is removed, path keeps its previous content (or stays
 * absent), and diag says which file and why (strerror: "Permission denied",
 * "No space left on device", ...). Returns ASSAY_ERR_IO.
 */
enum assay_status assay_report_write_file(const char *path, const char *data, size_t len,
                                          struct assay_diag *diag);

/* Where assay_report_write_all put its files. */
struct assay_report_paths {
    char json[1024];
    char html[1024];
    char md[1024];
};

/*
 * Write DIR/BASE.json, and BASE.html and BASE.md rendered from that JSON
 * text parsed back (so the renderings are exactly those that `assay report
 * DIR/BASE.json` makes), as one: all three go to temporary files first and
 * are renamed into place only once all are complete, so a failure leaves
 * the three destinations as they were (never a new JSON beside an old
 * HTML). The report is validated first (ASSAY_ERR_PARSE: nothing is
 * written). dir must exist. Returns ASSAY_OK, ASSAY_ERR_PARSE, ASSAY_ERR_IO
 * (diag: which file, why), ASSAY_ERR_NOMEM.
 */
enum assay_status assay_report_write_all(const cJSON *report, const char *dir, const char *base,
                                         struct assay_report_paths *paths, struct assay_diag *diag);

/*
 * Render DIR/BASE.html and DIR/BASE.md from a report (validated first)
 * without writing its JSON: what `assay report FILE.json` does. Same
 * returns; paths->json is left empty.
 */
enum assay_status assay_report_write_renderings(const cJSON *report, const char *dir,
                                                const char *base, struct assay_report_paths *paths,
                                                struct assay_diag *diag);

#endif
