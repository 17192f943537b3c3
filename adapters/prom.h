/*
 * prom.h - reading a server's metrics page in the Prometheus text
 * exposition format (what llama-server's /metrics, vLLM, SGLang and TGI
 * serve), as far as the audit needs it: the current value of a gauge.
 *
 * A page is lines: "# HELP ..." and "# TYPE ..." comments, blank lines,
 * and samples "name value [timestamp]" or "name{label="v",...} value
 * [timestamp]". Label values may hold escaped quotes, backslashes and
 * braces. A metric exported for several label sets (vLLM labels by model
 * name, SGLang by worker) is summed over them: for the gauges the audit
 * reads (requests running or waiting, KV cache in use) the sum is the
 * server's total.
 */
#ifndef ASSAY_PROM_H
#define ASSAY_PROM_H

#include <stddef.h>
#include <stdint.h>

/*
 * The sum of the values of every sample of metric `name` in text[0..len)
 * into *sum (0 when there is none). Returns the number of samples found
 * (0: the page does not export it). A sample whose value does not parse
 * as a number is skipped; "NaN", "+Inf" and "-Inf" are numbers.
 */
int32_t assay_prom_sum(const char *text, size_t len, const char *name, double *sum);

#endif
