/*
 * http_server.h - a small HTTP/1.1 server on 127.0.0.1 for the test tools
 * (suites/engine_server.c): one accept thread, one thread per connection,
 * keep-alive, and replies either whole (Content-Length) or streamed
 * (chunked transfer encoding, one chunk per write).
 *
 *     struct http_server_params p = http_server_default_params();
 *     p.handler = my_handler;      // called on the connection's thread
 *     p.ctx = my_state;
 *     struct http_server *s;
 *     char err[256];
 *     if (http_server_start(&p, &s, err, sizeof err) != 0) ... err says why
 *     ... http_server_port(s) ...
 *     http_server_stop(s);         // every connection closed, every thread joined
 *
 * A handler answers one request with http_reply, or with http_stream_begin,
 * any number of http_stream_write and http_stream_end (or with nothing,
 * once http_conn_wait said the client is gone). While it waits for
 * something of its own (a file descriptor another thread makes readable), it
 * calls http_conn_wait, which also says when the client has hung up, so
 * that the handler can give up the work the client no longer wants.
 *
 * What it does not do: request bodies in chunked encoding (answered 411),
 * pipelined requests are read only after the current reply, no TLS, and a
 * client that half-closes its side after sending a request is taken for one
 * that went away (POLLRDHUP). It uses libc and POSIX only (Linux's
 * POLLRDHUP), and allocates with malloc: a tool, not the library.
 */
#ifndef ASSAY_HTTP_SERVER_H
#define ASSAY_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

/* One request, borrowed by the handler for the call. */
struct http_request {
    char method[16];
    char path[256];      /* the request target without its query string */
    const char *body;    /* body_len bytes, NUL-terminated */
    size_t body_len;
};

struct http_server;
struct http_conn;

typedef void (*http_handler)(void *ctx, struct http_conn *conn, const struct http_request *rq);

struct http_server_params {
    int port;             /* 0: the kernel picks one */
    int max_conns;        /* connections served at once; more are answered 503 */
    size_t max_body;      /* larger request bodies are answered 413 */
    int idle_ms;          /* a kept-alive connection with no request for this long is closed */
    http_handler handler; /* required */
    void *ctx;
};

/* port 0, 1024 connections, 8 MiB bodies, 5 s idle (cpp-httplib's keep-alive). */
struct http_server_params http_server_default_params(void);

/* Listen on 127.0.0.1 and start accepting. Returns 0, or -1 with err
 * saying which call failed and why; *out is then NULL. Lifetime:
 * http_server_start / http_server_stop. */
int http_server_start(const struct http_server_params *p, struct http_server **out, char *err,
                      size_t err_size);

/* The port it listens on. */
int http_server_port(const struct http_server *s);

/* Stop accepting, shut down every open connection (a handler waiting in
 * http_conn_wait sees its client gone; one blocked in a write fails it),
 * and join every thread. NULL-safe. */
void http_server_stop(struct http_server *s);

/* A whole reply. extra_headers (may be NULL or "") are complete header
 * lines, each ending in "\r\n". Returns false when the client is gone. */
bool http_reply(struct http_conn *c, int status, const char *content_type,
                const char *extra_headers, const char *body, size_t len);

/* A streamed reply: the head of a 200 with chunked transfer encoding, then
 * one chunk per http_stream_write (len > 0), then the last chunk. Each
 * returns false when the client is gone; the connection is then closed
 * after the handler returns. */
bool http_stream_begin(struct http_conn *c, const char *content_type);
bool http_stream_write(struct http_conn *c, const char *data, size_t len);
bool http_stream_end(struct http_conn *c);

enum http_wait {
    HTTP_WAIT_WAKE = 0, /* wake_fd is readable */
    HTTP_WAIT_GONE = 1, /* the client hung up (or the server is stopping) */
};

/* Block until wake_fd is readable or the client hangs up. Data the client
 * sends meanwhile (a pipelined request) does not wake it. */
enum http_wait http_conn_wait(struct http_conn *c, int wake_fd);

/* The reason phrase of a status code ("Bad Request"), "" when unknown. */
const char *http_reason(int status);

#endif
