/*
 * slo.h - the service-level objective a benchmark's goodput is measured
 * against (bench/metrics.h), and the file that states it.
 *
 * An SLO file is a JSON object
 *     {"format": "assay-slo", "version": 1, "ttft_s": 0.5, "tpot_s": 0.05}
 * with an optional "description" string and no other member. Read one with
 * assay_slo_load (a path) or assay_slo_parse (text in memory); the result
 * is plain data, nothing to free.
 */
#ifndef ASSAY_SLO_H
#define ASSAY_SLO_H

#include <stddef.h>

#include "../core/status.h"

#define ASSAY_SLO_VERSION 1

/* A service-level objective: bounds on TTFT and TPOT in seconds. */
struct assay_slo {
    double ttft_s;
    double tpot_s;
};

/*
 * Read an SLO file (the format above); both bounds finite and > 0. On
 * failure *out is untouched, diag says where (the field, or "byte N" for
 * malformed JSON) and what; returns ASSAY_ERR_IO (cannot read),
 * ASSAY_ERR_PARSE (malformed or invalid: wrong format, a version other than
 * 1 - regenerate the file in the format above -, a missing, mistyped,
 * non-positive or unknown field, a file over 1 MiB), ASSAY_ERR_NOMEM.
 */
enum assay_status assay_slo_load(const char *path, struct assay_slo *out, struct assay_diag *diag);

/* The same from memory; `file` names it in diagnostics (may be NULL). */
enum assay_status assay_slo_parse(const char *json, size_t len, const char *file,
                                  struct assay_slo *out, struct assay_diag *diag);

#endif
