/*
 * prom_http.h - fetching a server's metrics page (or any other page) over
 * HTTP, for prom.h to read. The audit reads a server's /metrics between its
 * runs this way (checks/audit.c).
 *
 * The GET goes to the server an openai adapter (openai.h) talks to, with
 * that adapter's rules: the base URL it was opened with, its API key, its
 * connection timeout, no redirect followed, no proxy from the environment,
 * only http and https. It is blocking: meant for between runs, never
 * inside a measured one.
 *
 *     char *body; size_t len; long code; char msg[300];
 *     if (assay_prom_http_get(&adapter, "/metrics", 1 << 20, &body, &len, &code,
 *                             msg, sizeof msg) == ASSAY_OK) {
 *         if (code == 200) assay_prom_sum(body, len, "vllm:num_requests_running", &v);
 *         assay_free(body);
 *     }
 */
#ifndef ASSAY_PROM_HTTP_H
#define ASSAY_PROM_HTTP_H

#include <stddef.h>

#include "../core/status.h"
#include "adapter.h"

/*
 * GET the server's `path` (e.g. "/metrics", which must start with '/'),
 * relative to the base URL of the openai adapter `adapter`, with the
 * adapter's rules (above) and its stall timeout as the limit of the whole
 * transfer. On ASSAY_OK *body (release with assay_free) holds the response
 * body, NUL-terminated, *len its length and *http_status the status (any
 * status: a 404 or 501 is the caller's to judge). Returns
 * ASSAY_ERR_INVALID (not an openai adapter, a bad path, max_bytes 0),
 * ASSAY_ERR_NET (no connection, a transfer error; msg says why),
 * ASSAY_ERR_TIMEOUT, ASSAY_ERR_PARSE (the body is longer than max_bytes)
 * or ASSAY_ERR_NOMEM; *body is then NULL. msg never shows the API key.
 */
enum assay_status assay_prom_http_get(const struct assay_adapter *adapter, const char *path,
                                      size_t max_bytes, char **body, size_t *len,
                                      long *http_status, char *msg, size_t msg_size);

#endif
