/*
 * html.h - the HTML rendering of a report (reports/report.h): one
 * self-contained page that opens from a file with no network - inline CSS,
 * plots as inline SVG (reports/plot.h), no script, no font, no image, no
 * link to anything outside the page.
 *
 * It shows the verdict (pass/fail per check with its family's figures,
 * skip reasons), the failures with their reproducer commands, the
 * benchmark (percentile tables with their spread over runs, offered against
 * achieved rate, goodput under the stated SLO, the workload's length
 * distributions, the runs, the sufficiency of each percentile, the
 * generator's lateness histogram), the seed's table with its paragraph,
 * the rate sweep, the plots (latency CDFs per generator, TTFT and goodput
 * against offered rate, lateness), and the stamp.
 */
#ifndef ASSAY_HTML_H
#define ASSAY_HTML_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "../core/status.h"

/*
 * Render a report (assumed valid: assay_report_validate) from its JSON
 * alone. Missing optional parts are rendered as absent, never guessed. On
 * success *out (assay_free) holds len bytes of UTF-8 HTML; returns
 * ASSAY_ERR_NOMEM (*out NULL).
 */
enum assay_status assay_report_render_html(const cJSON *report, char **out, size_t *len);

#endif
