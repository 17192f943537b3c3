/*
 * prom_http.c - a blocking GET of a server's page (its /metrics) with the
 * openai adapter's connection rules (see prom_http.h). libcurl was
 * initialised by the adapter's opening (openai.c), which every endpoint
 * comes from.
 */
#include "prom_http.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "openai.h"
#include "openai_chunks.h"

enum {
    URL_MAX = 1024, /* as openai.c: the longest base URL, and more */
};

struct get_buf {
    char *p;
    size_t len, cap, max;
    bool too_long, oom;
};

static size_t on_get_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct get_buf *b = userdata;
    size_t n = size * nmemb;
    if (b->len + n > b->max) {
        b->too_long = true;
        return 0;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap > 0 ? b->cap : 4096;
        while (cap < b->len + n + 1) {
            cap *= 2;
        }
        char *p = assay_realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return 0;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, ptr, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

enum assay_status assay_prom_http_get(const struct assay_adapter *adapter, const char *path,
                                      size_t max_bytes, char **body, size_t *len,
                                      long *http_status, char *msg, size_t msg_size)
{
    *body = NULL;
    *len = 0;
    *http_status = 0;
    if (msg_size > 0) {
        msg[0] = '\0';
    }
    struct assay_openai_endpoint ep;
    if (assay_openai_get_endpoint(adapter, &ep) != ASSAY_OK || path == NULL || path[0] != '/' ||
        max_bytes == 0 || strlen(path) > 256) {
        snprintf(msg, msg_size, "%s", "not an openai adapter, or a path not starting with '/'");
        return ASSAY_ERR_INVALID;
    }
    for (const char *c = path; *c != '\0'; c++) {
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f || *c == '#') {
            snprintf(msg, msg_size, "%s", "a path of printable ASCII without spaces");
            return ASSAY_ERR_INVALID;
        }
    }
    char url[URL_MAX + 300];
    snprintf(url, sizeof url, "%s%s", ep.base, path);
    CURL *easy = curl_easy_init();
    if (easy == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    struct curl_slist *headers = NULL;
    if (ep.key != NULL) {
        size_t n = ep.key_len + 32;
        char *line = assay_malloc(n);
        if (line == NULL) {
            curl_easy_cleanup(easy);
            return ASSAY_ERR_NOMEM;
        }
        snprintf(line, n, "Authorization: Bearer %s", ep.key);
        headers = curl_slist_append(NULL, line);
        assay_wipe(line, n);
        assay_free(line);
        if (headers == NULL) {
            curl_easy_cleanup(easy);
            return ASSAY_ERR_NOMEM;
        }
    }
    struct get_buf b = {NULL, 0, 0, max_bytes, false, false};
    char cerr[CURL_ERROR_SIZE] = "";
    CURLcode cc[12];
    int k = 0;
    cc[k++] = curl_easy_setopt(easy, CURLOPT_URL, url);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_get_write);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_WRITEDATA, &b);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, cerr);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)ep.connect_timeout_ms);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)ep.stall_timeout_ms);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_PROXY, "");
    cc[k++] = curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    cc[k++] = curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    cc[k++] = curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    enum assay_status st = ASSAY_OK;
    for (int i = 0; i < k; i++) {
        if (cc[i] != CURLE_OK) {
            snprintf(msg, msg_size, "libcurl refused an option: %s", curl_easy_strerror(cc[i]));
            st = cc[i] == CURLE_OUT_OF_MEMORY ? ASSAY_ERR_NOMEM : ASSAY_ERR_NET;
            break;
        }
    }
    if (st == ASSAY_OK) {
        CURLcode res = curl_easy_perform(easy);
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, http_status);
        if (b.oom || res == CURLE_OUT_OF_MEMORY) {
            st = ASSAY_ERR_NOMEM;
        } else if (b.too_long) {
            snprintf(msg, msg_size, "GET %s: the body is longer than %zu bytes", path, max_bytes);
            st = ASSAY_ERR_PARSE;
        } else if (res == CURLE_OPERATION_TIMEDOUT) {
            snprintf(msg, msg_size, "GET %s timed out", path);
            st = ASSAY_ERR_TIMEOUT;
        } else if (res != CURLE_OK) {
            char clean[CURL_ERROR_SIZE + 8];
            assay_openai_clean_text(clean, sizeof clean, cerr, strlen(cerr), false, ep.key,
                                    ep.key_len);
            snprintf(msg, msg_size, "GET %s%s failed: %s", ep.base, path,
                     clean[0] != '\0' ? clean : curl_easy_strerror(res));
            st = ASSAY_ERR_NET;
        }
    }
    curl_easy_cleanup(easy);
    for (struct curl_slist *h = headers; h != NULL; h = h->next) {
        assay_wipe(h->data, strlen(h->data));
    }
    curl_slist_free_all(headers);
    if (st != ASSAY_OK) {
        assay_free(b.p);
        return st;
    }
    if (b.p == NULL) {
        b.p = assay_malloc(1);
        if (b.p == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        b.p[0] = '\0';
    }
    *body = b.p;
    *len = b.len;
    return ASSAY_OK;
}
