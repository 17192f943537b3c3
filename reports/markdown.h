/*
 * markdown.h - the Markdown rendering of a report (reports/report.h), for
 * terminals, CI logs and pull-request comments: the verdict table, the
 * failures with their reproducers, a benchmark summary, the seed's table,
 * the rate sweep and a stamp summary. GitHub-flavoured tables; no HTML
 * but entities.
 */
#ifndef ASSAY_MARKDOWN_H
#define ASSAY_MARKDOWN_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "../core/status.h"

/*
 * Render a report (assumed valid: assay_report_validate) from its JSON
 * alone. On success *out (assay_free) holds len bytes of UTF-8 Markdown;
 * returns ASSAY_ERR_NOMEM (*out NULL).
 */
enum assay_status assay_report_render_markdown(const cJSON *report, char **out, size_t *len);

#endif
