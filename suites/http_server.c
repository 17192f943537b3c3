/*
 * http_server.c - the small HTTP/1.1 server of the test tools (see
 * http_server.h).
 *
 * Threads: the accept thread waits on the listening socket and a stop pipe;
 * each accepted connection gets a slot (a finished connection's thread is
 * joined when its slot is taken again) and a thread that reads requests one
 * after another and calls the handler for each. A connection's socket is
 * closed by its own thread, under the server's mutex, so that
 * http_server_stop can shut down every socket still open without racing a
 * close (a closed descriptor's number may already belong to someone else).
 *
 * Per request: the head is read up to HEAD_MAX bytes, then the body up to
 * max_body; "Expect: 100-continue" is answered before the body is read, as
 * libcurl asks for it on larger POSTs and would otherwise wait a second.
 * Bytes beyond the request (a pipelined next one) stay in the connection's
 * buffer for the next round.
 */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

enum {
    HEAD_MAX = 16384,      /* request line and headers */
    SLOW_MS = 10000,       /* the longest wait for the rest of a started request */
    THREAD_STACK = 1 << 20,
};

struct http_conn {
    struct http_server *s;
    int fd;            /* -1 once closed; guarded by s->mu */
    pthread_t th;
    bool used;         /* th is a thread to join */
    bool finished;     /* the thread has returned; guarded by s->mu */
    bool keep_alive;   /* of the request being answered */
    bool replied;      /* a reply (or its head) was sent */
    bool broken;       /* a write failed or the reply was cut: close after it */
    char *buf;         /* (cap) bytes received and not yet used */
    size_t len, cap;
};

struct http_server {
    struct http_server_params p;
    int lfd;
    int port;
    int stop_pipe[2];
    pthread_t accept_th;
    pthread_mutex_t mu;
    bool stopping;           /* guarded by mu */
    struct http_conn *conns; /* (p.max_conns) */
};

struct http_server_params http_server_default_params(void)
{
    struct http_server_params p;
    memset(&p, 0, sizeof p);
    p.port = 0;
    p.max_conns = 1024;
    p.max_body = (size_t)8 << 20;
    p.idle_ms = 5000;
    return p;
}

const char *http_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "";
    }
}

/* ------------------------------------------------------------------ */
/* Writing                                                             */
/* ------------------------------------------------------------------ */

/* Send every byte of iov[0..n) (modified as it goes). False when the
 * client is gone; the connection is then marked broken. */
static bool send_iov(struct http_conn *c, struct iovec *iov, int n)
{
    while (n > 0 && !c->broken) {
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = iov;
        m.msg_iovlen = (size_t)n;
        ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            c->broken = true;
            return false;
        }
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return !c->broken;
}

bool http_reply(struct http_conn *c, int status, const char *content_type,
                const char *extra_headers, const char *body, size_t len)
{
    char head[1024];
    int h = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nServer: assay-engine-server\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n%sConnection: %s\r\n\r\n",
                     status, http_reason(status), content_type, len,
                     extra_headers != NULL ? extra_headers : "",
                     c->keep_alive ? "keep-alive" : "close");
    c->replied = true;
    if (h < 0 || (size_t)h >= sizeof head) {
        c->broken = true;
        return false;
    }
    struct iovec iov[2] = {{head, (size_t)h}, {(void *)(uintptr_t)body, len}};
    return send_iov(c, iov, len > 0 ? 2 : 1);
}

bool http_stream_begin(struct http_conn *c, const char *content_type)
{
    char head[512];
    int h = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nServer: assay-engine-server\r\nContent-Type: %s\r\n"
                     "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
                     "Connection: %s\r\n\r\n",
                     content_type, c->keep_alive ? "keep-alive" : "close");
    c->replied = true;
    if (h < 0 || (size_t)h >= sizeof head) {
        c->broken = true;
        return false;
    }
    struct iovec iov[1] = {{head, (size_t)h}};
    return send_iov(c, iov, 1);
}

bool http_stream_write(struct http_conn *c, const char *data, size_t len)
{
    if (len == 0) {
        return !c->broken; /* an empty chunk would end the body */
    }
    char size[32];
    int h = snprintf(size, sizeof size, "%zx\r\n", len);
    struct iovec iov[3] = {
        {size, (size_t)h}, {(void *)(uintptr_t)data, len}, {(void *)(uintptr_t)"\r\n", 2}};
    return send_iov(c, iov, 3);
}

bool http_stream_end(struct http_conn *c)
{
    struct iovec iov[1] = {{(void *)(uintptr_t)"0\r\n\r\n", 5}};
    return send_iov(c, iov, 1);
}

enum http_wait http_conn_wait(struct http_conn *c, int wake_fd)
{
    for (;;) {
        struct pollfd pfd[2] = {{c->fd, POLLRDHUP, 0}, {wake_fd, POLLIN, 0}};
        int r = poll(pfd, 2, -1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0 || (pfd[0].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) {
            c->broken = true;
            return HTTP_WAIT_GONE;
        }
        if ((pfd[1].revents & POLLIN) != 0) {
            return HTTP_WAIT_WAKE;
        }
    }
}

/* An error reply to a request that could not be read; the connection is
 * closed after it. */
static void refuse(struct http_conn *c, int status, const char *message)
{
    char body[512];
    int n = snprintf(body, sizeof body, "{\"error\":{\"code\":%d,\"message\":\"%s\","
                                        "\"type\":\"invalid_request_error\"}}",
                     status, message);
    c->keep_alive = false;
    http_reply(c, status, "application/json; charset=utf-8", NULL, body,
               n > 0 && (size_t)n < sizeof body ? (size_t)n : 0);
}

/* ------------------------------------------------------------------ */
/* Reading                                                             */
/* ------------------------------------------------------------------ */

static bool stopping(struct http_server *s)
{
    pthread_mutex_lock(&s->mu);
    bool stop = s->stopping;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

/* Receive more bytes into the buffer, waiting at most timeout_ms.
 * Returns the bytes read, 0 when the client closed, -1 on a timeout or an
 * error, -2 when the buffer cannot grow. */
static ssize_t fill(struct http_conn *c, size_t limit, int timeout_ms)
{
    if (c->len + 4096 + 1 > c->cap) {
        size_t cap = c->cap > 0 ? c->cap * 2 : 8192;
        while (cap < c->len + 4096 + 1) {
            cap *= 2;
        }
        if (cap > limit + 4096 + 1) {
            cap = limit + 4096 + 1;
        }
        if (cap <= c->len + 1) {
            return -2;
        }
        char *b = realloc(c->buf, cap);
        if (b == NULL) {
            return -2;
        }
        c->buf = b;
        c->cap = cap;
    }
    for (;;) {
        struct pollfd pfd = {c->fd, POLLIN, 0};
        int r = poll(&pfd, 1, timeout_ms);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return -1;
        }
        ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n > 0) {
            c->len += (size_t)n;
        }
        return n < 0 ? -1 : n;
    }
}

/* The value of header `name` in head[0..n) (lines after the request line),
 * copied into out; false when absent. */
static bool header(const char *head, size_t n, const char *name, char *out, size_t size)
{
    size_t nl = strlen(name);
    const char *end = head + n;
    const char *p = memchr(head, '\n', n);
    while (p != NULL && p + 1 < end) {
        const char *line = p + 1;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (eol == NULL) {
            break;
        }
        if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t')) {
                v++;
            }
            const char *ve = eol;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t')) {
                ve--;
            }
            size_t k = (size_t)(ve - v) < size - 1 ? (size_t)(ve - v) : size - 1;
            memcpy(out, v, k);
            out[k] = '\0';
            return true;
        }
        p = eol;
    }
    return false;
}

/* Whether a comma-separated header value lists token (case-insensitive). */
static bool lists(const char *value, const char *token)
{
    size_t tl = strlen(token);
    for (const char *p = value; *p != '\0';) {
        while (*p == ' ' || *p == ',') {
            p++;
        }
        size_t k = strcspn(p, ", ");
        if (k == tl && strncasecmp(p, token, tl) == 0) {
            return true;
        }
        p += k;
    }
    return false;
}

/*
 * Read the next request into rq (its body points into the buffer, which
 * ends with a NUL put after the body: *saved is the byte it replaced, to
 * put back). Returns true with *end the length of the request in the
 * buffer; false when the connection is to be closed (the client left, a
 * timeout, or a request refused with an error reply).
 */
static bool read_request(struct http_conn *c, struct http_request *rq, size_t *end, char *saved)
{
    const size_t max_body = c->s->p.max_body;
    size_t head_len = 0;
    for (;;) {
        if (c->len > 0) {
            c->buf[c->len] = '\0';
            char *e = strstr(c->buf, "\r\n\r\n");
            if (e != NULL) {
                head_len = (size_t)(e - c->buf) + 4;
                break;
            }
        }
        if (c->len >= HEAD_MAX) {
            refuse(c, 431, "the request head is longer than 16384 bytes");
            return false;
        }
        ssize_t n = fill(c, HEAD_MAX, c->len == 0 ? c->s->p.idle_ms : SLOW_MS);
        if (n == -2) {
            refuse(c, 500, "out of memory reading the request");
            return false;
        }
        if (n <= 0) {
            if (n < 0 && c->len > 0) {
                refuse(c, 408, "the request was not complete within 10 s");
            }
            return false;
        }
    }
    char version[16] = "";
    char target[1024] = "";
    memset(rq, 0, sizeof *rq);
    if (sscanf(c->buf, "%15s %1023s %15s", rq->method, target, version) != 3) {
        refuse(c, 400, "malformed request line");
        return false;
    }
    if (strcmp(version, "HTTP/1.1") != 0 && strcmp(version, "HTTP/1.0") != 0) {
        refuse(c, 505, "only HTTP/1.1 and HTTP/1.0 are served");
        return false;
    }
    target[strcspn(target, "?#")] = '\0';
    if (strlen(target) >= sizeof rq->path) {
        refuse(c, 414, "the request target is longer than 255 bytes");
        return false;
    }
    memcpy(rq->path, target, strlen(target) + 1);
    char v[256];
    bool http11 = strcmp(version, "HTTP/1.1") == 0;
    c->keep_alive = http11;
    if (header(c->buf, head_len, "Connection", v, sizeof v)) {
        if (lists(v, "close")) {
            c->keep_alive = false;
        } else if (lists(v, "keep-alive")) {
            c->keep_alive = true;
        }
    }
    if (header(c->buf, head_len, "Transfer-Encoding", v, sizeof v)) {
        refuse(c, 411, "request bodies must be sent with Content-Length, not chunked");
        return false;
    }
    size_t body_len = 0;
    if (header(c->buf, head_len, "Content-Length", v, sizeof v)) {
        char *e = NULL;
        errno = 0;
        unsigned long long cl = strtoull(v, &e, 10);
        if (v[0] < '0' || v[0] > '9' || *e != '\0' || errno != 0) {
            refuse(c, 400, "Content-Length is not a number");
            return false;
        }
        if (cl > max_body) {
            refuse(c, 413, "the request body is too large");
            return false;
        }
        body_len = (size_t)cl;
    }
    if (body_len > 0 && c->len < head_len + body_len &&
        header(c->buf, head_len, "Expect", v, sizeof v) && lists(v, "100-continue")) {
        struct iovec iov[1] = {{(void *)(uintptr_t)"HTTP/1.1 100 Continue\r\n\r\n", 25}};
        if (!send_iov(c, iov, 1)) {
            return false;
        }
    }
    while (c->len < head_len + body_len) {
        ssize_t n = fill(c, head_len + body_len, SLOW_MS);
        if (n == -2) {
            refuse(c, 500, "out of memory reading the request body");
            return false;
        }
        if (n <= 0) {
            if (n < 0) {
                refuse(c, 408, "the request body was not complete within 10 s");
            }
            return false;
        }
    }
    *end = head_len + body_len;
    *saved = c->buf[*end]; /* cap > len >= end: fill keeps a byte spare */
    c->buf[*end] = '\0';
    rq->body = c->buf + head_len;
    rq->body_len = body_len;
    return true;
}

static void *conn_main(void *arg)
{
    struct http_conn *c = arg;
    struct http_server *s = c->s;
    for (;;) {
        struct http_request rq;
        size_t end = 0;
        char saved = '\0';
        c->replied = false;
        c->broken = false;
        if (stopping(s) || !read_request(c, &rq, &end, &saved)) {
            break;
        }
        s->p.handler(s->p.ctx, c, &rq);
        if (!c->replied && !c->broken) {
            refuse(c, 500, "the handler gave no reply");
        }
        c->buf[end] = saved;
        if (c->broken || !c->keep_alive) {
            break;
        }
        memmove(c->buf, c->buf + end, c->len - end);
        c->len -= end;
    }
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
    pthread_mutex_lock(&s->mu);
    close(c->fd);
    c->fd = -1;
    c->finished = true;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Accepting                                                           */
/* ------------------------------------------------------------------ */

/* A free connection slot (joining a finished thread), or NULL. */
static struct http_conn *take_slot(struct http_server *s)
{
    for (int i = 0; i < s->p.max_conns; i++) {
        struct http_conn *c = &s->conns[i];
        pthread_mutex_lock(&s->mu);
        bool used = c->used, finished = c->finished;
        pthread_mutex_unlock(&s->mu);
        if (used && finished) {
            pthread_join(c->th, NULL);
            c->used = false;
        }
        if (!c->used) {
            return c;
        }
    }
    return NULL;
}

static void *accept_main(void *arg)
{
    struct http_server *s = arg;
    pthread_attr_t attr;
    bool attr_ok = pthread_attr_init(&attr) == 0;
    if (attr_ok) {
        pthread_attr_setstacksize(&attr, THREAD_STACK);
    }
    for (;;) {
        struct pollfd pfd[2] = {{s->lfd, POLLIN, 0}, {s->stop_pipe[0], POLLIN, 0}};
        int r = poll(pfd, 2, -1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0 || (pfd[1].revents & POLLIN) != 0) {
            break;
        }
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            continue; /* the client left before it was accepted, or EMFILE: try again */
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct http_conn *c = take_slot(s);
        if (c == NULL) {
            struct http_conn busy;
            memset(&busy, 0, sizeof busy);
            busy.fd = fd;
            refuse(&busy, 503, "too many connections");
            close(fd);
            continue;
        }
        memset(c, 0, sizeof *c);
        c->s = s;
        c->fd = fd;
        c->used = true;
        if (pthread_create(&c->th, attr_ok ? &attr : NULL, conn_main, c) != 0) {
            c->used = false;
            struct http_conn busy;
            memset(&busy, 0, sizeof busy);
            busy.fd = fd;
            refuse(&busy, 503, "no thread for the connection");
            close(fd);
        }
    }
    if (attr_ok) {
        pthread_attr_destroy(&attr);
    }
    return NULL;
}

int http_server_start(const struct http_server_params *p, struct http_server **out, char *err,
                      size_t err_size)
{
    *out = NULL;
    if (p->handler == NULL || p->max_conns < 1 || p->port < 0 || p->port > 65535) {
        snprintf(err, err_size, "http_server_start: a handler, max_conns >= 1, port 0-65535");
        errno = EINVAL;
        return -1;
    }
    struct http_server *s = calloc(1, sizeof *s);
    struct http_conn *conns = calloc((size_t)p->max_conns, sizeof *conns);
    if (s == NULL || conns == NULL) {
        free(s);
        free(conns);
        snprintf(err, err_size, "http_server_start: out of memory");
        return -1;
    }
    s->p = *p;
    s->conns = conns;
    s->lfd = -1;
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    const char *what = "socket";
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = s->lfd >= 0;
    if (ok) {
        int one = 1;
        setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in addr;
        memset(&addr, 0, sizeof addr);
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons((uint16_t)p->port);
        what = "bind";
        ok = bind(s->lfd, (struct sockaddr *)&addr, sizeof addr) == 0;
        if (ok) {
            what = "listen";
            ok = listen(s->lfd, 512) == 0;
        }
        socklen_t alen = sizeof addr;
        if (ok) {
            what = "getsockname";
            ok = getsockname(s->lfd, (struct sockaddr *)&addr, &alen) == 0;
        }
        s->port = ntohs(addr.sin_port);
    }
    if (ok) {
        what = "pipe";
        ok = pipe2(s->stop_pipe, O_CLOEXEC) == 0;
    }
    if (ok) {
        what = "pthread_mutex_init";
        ok = pthread_mutex_init(&s->mu, NULL) == 0;
        if (ok) {
            what = "pthread_create";
            ok = pthread_create(&s->accept_th, NULL, accept_main, s) == 0;
            if (!ok) {
                pthread_mutex_destroy(&s->mu);
            }
        }
    }
    if (!ok) {
        int e = errno;
        snprintf(err, err_size, "%s on 127.0.0.1:%d: %s", what, p->port, strerror(e));
        if (s->lfd >= 0) {
            close(s->lfd);
        }
        if (s->stop_pipe[0] >= 0) {
            close(s->stop_pipe[0]);
            close(s->stop_pipe[1]);
        }
        free(s->conns);
        free(s);
        errno = e;
        return -1;
    }
    *out = s;
    return 0;
}

int http_server_port(const struct http_server *s)
{
    return s->port;
}

void http_server_stop(struct http_server *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_mutex_unlock(&s->mu);
    ssize_t w;
    do {
        w = write(s->stop_pipe[1], "x", 1);
    } while (w < 0 && errno == EINTR);
    pthread_join(s->accept_th, NULL);
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->p.max_conns; i++) {
        if (s->conns[i].used && s->conns[i].fd >= 0) {
            shutdown(s->conns[i].fd, SHUT_RDWR);
        }
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->p.max_conns; i++) {
        if (s->conns[i].used) {
            pthread_join(s->conns[i].th, NULL);
        }
    }
    close(s->lfd);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    pthread_mutex_destroy(&s->mu);
    free(s->conns);
    free(s);
}
