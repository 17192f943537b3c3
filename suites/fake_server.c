#include "fake_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
    MAX_CONN = 64,
    MAX_HEADER = 16384,
    MAX_BODY = 1 << 20,
    MAX_PROMPT = 8192,
    BODY_KEEP = 4096,
};

struct conn {
    struct fake_server *s;
    int fd;
    pthread_t th;
    bool used;     /* th is a thread to join */
    bool finished; /* the thread has returned */
};

struct fake_server {
    int lfd;
    int port;
    pthread_t accept_th;
    pthread_mutex_t mu;
    bool stop;
    struct conn conns[MAX_CONN];
    int n_requests;
    int n_client_gone;
    char paths[256][64]; /* the first 256 paths served */
    int n_paths;
    char last_auth[512];
    char last_body[FAKE_N_MODES][BODY_KEEP];
    int forced_mode; /* 0: each request's first prompt token picks */
    int queue_ms;    /* FAKE_QUEUED's silence */
    int slow_gap_ms; /* after each FAKE_SLOW_TOKENS token */
    /* When each token of the last FAKE_SLOW_TOKENS reply was written
     * (CLOCK_MONOTONIC ns, taken just before the write). */
    int64_t slow_sent_ns[16];
    int n_slow_sent;
};

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

static bool stopping(struct fake_server *s)
{
    pthread_mutex_lock(&s->mu);
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int32_t fake_server_token(const int32_t *prompt, int32_t prompt_len, int32_t i)
{
    uint32_t sum = 0;
    for (int32_t k = 0; k < prompt_len; k++) {
        sum += (uint32_t)prompt[k];
    }
    return (int32_t)((31u * sum + 7u * (uint32_t)i + 3u) % 256u);
}

/* ------------------------------------------------------------------ */
/* The request                                                         */
/* ------------------------------------------------------------------ */

struct request {
    char path[64];
    char auth[512];
    char *body;
    size_t body_len;
    int32_t prompt[MAX_PROMPT];
    int32_t prompt_len;
    int32_t n_predict;
    int32_t n_probs;
    double temperature, top_p;
    int32_t top_k;
    bool ignore_eos;
    bool has_seed;
    long long seed;
    bool v1;
};

/* The text after "key": in body, or NULL. */
static const char *find_key(const char *body, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(body, pat);
    return p != NULL ? p + strlen(pat) : NULL;
}

static double num_key(const char *body, const char *key, double dflt)
{
    const char *p = find_key(body, key);
    return p != NULL ? strtod(p, NULL) : dflt;
}

static void parse_body(struct request *rq)
{
    const char *b = rq->body;
    const char *p = find_key(b, "prompt");
    rq->prompt_len = 0;
    if (p != NULL && *p == '[') {
        p++;
        while (*p != ']' && *p != '\0' && rq->prompt_len < MAX_PROMPT) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p) {
                break;
            }
            rq->prompt[rq->prompt_len++] = (int32_t)v;
            p = end;
            if (*p == ',') {
                p++;
            }
        }
    }
    rq->v1 = strcmp(rq->path, "/v1/completions") == 0;
    rq->n_predict = (int32_t)num_key(b, rq->v1 ? "max_tokens" : "n_predict", 16);
    rq->n_probs = (int32_t)num_key(b, rq->v1 ? "logprobs" : "n_probs", 0);
    rq->temperature = num_key(b, "temperature", 0.8);
    rq->top_p = num_key(b, "top_p", 0.95);
    rq->top_k = (int32_t)num_key(b, "top_k", 40);
    const char *ie = find_key(b, "ignore_eos");
    rq->ignore_eos = ie != NULL && strncmp(ie, "true", 4) == 0;
    const char *sd = find_key(b, "seed");
    rq->has_seed = sd != NULL;
    rq->seed = sd != NULL ? strtoll(sd, NULL, 10) : -1;
}

/* Read the request head and body (bounded; gives up after ~5 s). */
static bool read_request(struct fake_server *s, int fd, struct request *rq)
{
    char *buf = malloc(MAX_HEADER + MAX_BODY + 1);
    if (buf == NULL) {
        return false;
    }
    size_t len = 0, head_end = 0, need = 0;
    for (int waited = 0; waited < 5000 && !stopping(s);) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int pr = poll(&pfd, 1, 50);
        if (pr == 0) {
            waited += 50;
            continue;
        }
        ssize_t n = recv(fd, buf + len, MAX_HEADER + MAX_BODY - len, 0);
        if (n <= 0) {
            break;
        }
        len += (size_t)n;
        buf[len] = '\0';
        if (head_end == 0) {
            char *e = strstr(buf, "\r\n\r\n");
            if (e != NULL) {
                head_end = (size_t)(e - buf) + 4;
                const char *cl = strcasestr(buf, "\r\ncontent-length:");
                size_t body_len = cl != NULL ? (size_t)strtoul(cl + 17, NULL, 10) : 0;
                need = head_end + (body_len < MAX_BODY ? body_len : MAX_BODY);
            } else if (len >= MAX_HEADER) {
                break;
            }
        }
        if (head_end > 0 && len >= need) {
            /* Request line and Authorization. */
            sscanf(buf, "%*s %63s", rq->path);
            const char *a = strcasestr(buf, "\r\nauthorization:");
            if (a != NULL && a < buf + head_end) {
                a += 16;
                while (*a == ' ') {
                    a++;
                }
                size_t n_a = strcspn(a, "\r\n");
                snprintf(rq->auth, sizeof rq->auth, "%.*s", (int)n_a, a);
            }
            rq->body_len = need - head_end;
            rq->body = malloc(rq->body_len + 1);
            if (rq->body == NULL) {
                break;
            }
            memcpy(rq->body, buf + head_end, rq->body_len);
            rq->body[rq->body_len] = '\0';
            free(buf);
            return true;
        }
    }
    free(buf);
    return false;
}

/* ------------------------------------------------------------------ */
/* Writing                                                             */
/* ------------------------------------------------------------------ */

struct out {
    struct fake_server *s;
    int fd;
    bool chunked;
    bool fragmented;
    bool gone;
};

static void client_gone(struct out *o)
{
    if (!o->gone) {
        o->gone = true;
        pthread_mutex_lock(&o->s->mu);
        o->s->n_client_gone++;
        pthread_mutex_unlock(&o->s->mu);
    }
}

static void send_all(struct out *o, const char *p, size_t n)
{
    while (n > 0 && !o->gone) {
        ssize_t w = send(o->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            client_gone(o);
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Raw body bytes, in small pieces when fragmented. */
static void emit_raw(struct out *o, const char *p, size_t n)
{
    if (!o->fragmented) {
        send_all(o, p, n);
        return;
    }
    for (size_t i = 0, k = 0; i < n && !o->gone; k++) {
        size_t piece = 1 + k % 7;
        if (piece > n - i) {
            piece = n - i;
        }
        send_all(o, p + i, piece);
        i += piece;
        if (k % 16 == 0) {
            sleep_ms(1);
        }
    }
}

/* Body bytes with the chunked framing when it is on. */
static void emit(struct out *o, const char *p, size_t n)
{
    if (o->chunked) {
        char head[32];
        int h = snprintf(head, sizeof head, "%zx\r\n", n);
        emit_raw(o, head, (size_t)h);
        emit_raw(o, p, n);
        emit_raw(o, "\r\n", 2);
    } else {
        emit_raw(o, p, n);
    }
}

/* One "data:" event (CRLF line ends and a ping before it when fragmented). */
static void emit_event(struct out *o, const char *json)
{
    size_t n = strlen(json);
    char *buf = malloc(n + 32);
    if (buf == NULL) {
        return;
    }
    int len = o->fragmented ? snprintf(buf, n + 32, ": ping\r\n\r\ndata: %s\r\n\r\n", json)
                            : snprintf(buf, n + 32, "data: %s\n\n", json);
    emit(o, buf, (size_t)len);
    free(buf);
}

static void end_body(struct out *o)
{
    if (o->chunked) {
        emit_raw(o, "0\r\n\r\n", 5);
    }
}

static void send_simple(struct out *o, int status, const char *reason, const char *ctype,
                        const char *extra_headers, const char *body)
{
    char head[1024];
    int h = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                     "Connection: close\r\n\r\n",
                     status, reason, ctype, strlen(body), extra_headers);
    send_all(o, head, (size_t)h);
    send_all(o, body, strlen(body));
}

static void start_stream(struct out *o)
{
    const char *head = o->chunked ? "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                    "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                                  : "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                    "Connection: close\r\n\r\n";
    send_all(o, head, strlen(head));
}

/* Wait until the client closes the connection or the server stops. */
static void wait_for_client(struct out *o)
{
    char tmp[256];
    while (!o->gone && !stopping(o->s)) {
        struct pollfd pfd = {o->fd, POLLIN, 0};
        int pr = poll(&pfd, 1, 50);
        if (pr > 0) {
            ssize_t n = recv(o->fd, tmp, sizeof tmp, 0);
            if (n <= 0) {
                client_gone(o);
            }
        }
    }
}

/* Sleep ms, or less if the server stops or the client goes away. */
static void wait_ms(struct out *o, int ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char tmp[256];
    while (!o->gone && !stopping(o->s)) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t left = ms - ((int64_t)(now.tv_sec - t0.tv_sec) * 1000 +
                             (now.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0) {
            return;
        }
        struct pollfd pfd = {o->fd, POLLIN, 0};
        if (poll(&pfd, 1, left < 50 ? (int)left : 50) > 0) {
            ssize_t n = recv(o->fd, tmp, sizeof tmp, 0);
            if (n <= 0) {
                client_gone(o);
            }
        }
    }
}

/* ------------------------------------------------------------------ */
/* Replies                                                             */
/* ------------------------------------------------------------------ */

static void token_event(struct out *o, const struct request *rq, int32_t i, int32_t tok,
                        int mode)
{
    char json[2048];
    char lp[1024] = "";
    if (rq->v1 && mode == FAKE_LEGACY_IDS) {
        snprintf(json, sizeof json,
                 "{\"choices\":[{\"text\":\"x\",\"index\":0,\"logprobs\":{\"tokens\":"
                 "[\"token_id:%d\"],\"token_logprobs\":[-0.25],\"top_logprobs\":[{"
                 "\"token_id:%d\":-0.25,\"token_id:%d\":-1.75}],\"text_offset\":[%d]},"
                 "\"finish_reason\":null}],\"object\":\"text_completion\"}",
                 (int)tok, (int)tok, (int)((tok + 1) % 256), (int)i);
        emit_event(o, json);
        return;
    }
    if (rq->n_probs > 0 || rq->v1) {
        snprintf(lp, sizeof lp,
                 "{\"id\":%d,\"token\":\"x\",\"bytes\":[120],\"logprob\":-0.25,"
                 "\"top_logprobs\":[{\"id\":%d,\"token\":\"x\",\"bytes\":[],\"logprob\":-0.25},"
                 "{\"id\":%d,\"token\":\"y\",\"bytes\":[],\"logprob\":-1.75}]}",
                 (int)tok, (int)tok, (int)((tok + 1) % 256));
    }
    if (rq->v1) {
        snprintf(json, sizeof json,
                 "{\"choices\":[{\"text\":\"<0x%02X>\",\"index\":0,\"logprobs\":{\"content\":[%s]},"
                 "\"finish_reason\":null}],\"object\":\"text_completion\",\"model\":\"fake\"}",
                 (unsigned)(tok & 0xff), lp);
    } else {
        snprintf(json, sizeof json,
                 "{\"index\":0,\"content\":\"<0x%02X>\",\"tokens\":[%d],\"stop\":false,"
                 "\"id_slot\":0,\"tokens_predicted\":%d,\"tokens_evaluated\":%d%s%s%s}",
                 (unsigned)(tok & 0xff), (int)tok, (int)i + 1, (int)rq->prompt_len,
                 lp[0] != '\0' ? ",\"completion_probabilities\":[" : "", lp,
                 lp[0] != '\0' ? "]" : "");
    }
    emit_event(o, json);
}

static void final_event(struct out *o, const struct request *rq, int mode, int32_t n_sent,
                        const char *stop_type)
{
    char json[2048];
    int32_t evaluated = rq->prompt_len + (mode == FAKE_BOS ? 1 : 0);
    if (rq->v1) {
        snprintf(json, sizeof json,
                 "{\"choices\":[{\"text\":\"\",\"index\":0,\"logprobs\":null,"
                 "\"finish_reason\":\"%s\"}],\"object\":\"text_completion\",\"model\":\"fake\","
                 "\"usage\":{\"completion_tokens\":%d,\"prompt_tokens\":%d,\"total_tokens\":%d}}",
                 strcmp(stop_type, "limit") == 0 ? "length" : "stop", (int)n_sent,
                 (int)evaluated, (int)(n_sent + evaluated));
    } else {
        char seed[64] = "";
        if (rq->has_seed) {
            snprintf(seed, sizeof seed, ",\"seed\":%lld", rq->seed);
        }
        const char *samplers = mode == FAKE_IGNORE_ORDER
                                   ? "[\"penalties\",\"dry\",\"top_n_sigma\",\"top_k\","
                                     "\"typ_p\",\"top_p\",\"min_p\",\"xtc\",\"temperature\"]"
                                   : "[\"temperature\",\"top_k\",\"top_p\"]";
        snprintf(json, sizeof json,
                 "{\"index\":0,\"content\":\"\",\"tokens\":[],\"id_slot\":0,\"stop\":true,"
                 "\"model\":\"fake\",\"tokens_predicted\":%d,\"tokens_evaluated\":%d,"
                 "\"generation_settings\":{\"n_predict\":%d,\"temperature\":%.9g,\"top_k\":%d,"
                 "\"top_p\":%.9g,\"min_p\":0,\"typical_p\":1,\"repeat_penalty\":1,"
                 "\"ignore_eos\":%s,\"samplers\":%s%s},\"truncated\":false,"
                 "\"stop_type\":\"%s\",\"stopping_word\":\"\"}",
                 (int)n_sent, (int)evaluated, (int)rq->n_predict, rq->temperature, (int)rq->top_k,
                 rq->top_p, rq->ignore_eos ? "true" : "false", samplers, seed, stop_type);
    }
    emit_event(o, json);
}

static void reply_stream(struct out *o, const struct request *rq, int mode)
{
    o->chunked = mode != FAKE_CLOSE_EOF;
    o->fragmented = mode == FAKE_FRAGMENTED;
    if (mode == FAKE_SLOW_START) {
        sleep_ms(150);
    }
    if (mode == FAKE_QUEUED) {
        pthread_mutex_lock(&o->s->mu);
        int queue_ms = o->s->queue_ms;
        pthread_mutex_unlock(&o->s->mu);
        wait_ms(o, queue_ms);
        if (o->gone || stopping(o->s)) {
            return;
        }
    }
    start_stream(o);
    int32_t n = rq->n_predict + (mode == FAKE_TOO_MANY ? 3 : 0);
    for (int32_t i = 0; i < n && !o->gone; i++) {
        if (i == 2 && (mode == FAKE_CLOSE_CHUNKED || mode == FAKE_CLOSE_EOF)) {
            return; /* the caller closes the socket */
        }
        if (i == 2 && mode == FAKE_STALL) {
            wait_for_client(o);
            return;
        }
        if (i == 2 && mode == FAKE_SHORT_EOS) {
            final_event(o, rq, mode, 2, "eos");
            end_body(o);
            return;
        }
        if (i == 1 && mode == FAKE_BAD_JSON) {
            emit(o, "data: {\"tokens\": [1,\n\n", 22);
            end_body(o);
            return;
        }
        if (i == 1 && mode == FAKE_BAD_SSE) {
            const char *html = "<html><body>502 Bad Gateway</body></html>\n\n";
            emit(o, html, strlen(html));
            end_body(o);
            return;
        }
        if (i == 1 && mode == FAKE_HUGE_LINE) {
            size_t big = (size_t)2 << 20;
            char *line = malloc(big + 16);
            if (line != NULL) {
                memcpy(line, "data: ", 6);
                memset(line + 6, 'x', big);
                memcpy(line + 6 + big, "\n\n", 2);
                emit(o, line, big + 8);
                free(line);
            }
            end_body(o);
            return;
        }
        if (i == 1 && mode == FAKE_ERROR_EVENT) {
            char json[1024];
            snprintf(json, sizeof json,
                     "{\"error\":{\"code\":500,\"message\":\"slot 0 failed (request had %s)\","
                     "\"type\":\"server_error\"}}",
                     rq->auth);
            emit_event(o, json);
            end_body(o);
            return;
        }
        if (i == 1 && mode == FAKE_NO_IDS && rq->v1) {
            emit_event(o, "{\"choices\":[{\"text\":\"hello\",\"index\":0,\"logprobs\":null,"
                          "\"finish_reason\":null}]}");
            end_body(o);
            return;
        }
        int32_t tok = fake_server_token(rq->prompt, rq->prompt_len, i);
        if (i == 2 && mode == FAKE_OUT_OF_VOCAB) {
            tok = 999;
        }
        if (mode == FAKE_SLOW_TOKENS) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            pthread_mutex_lock(&o->s->mu);
            if (i == 0) {
                o->s->n_slow_sent = 0;
            }
            if (o->s->n_slow_sent < 16) {
                o->s->slow_sent_ns[o->s->n_slow_sent++] =
                    (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
            }
            pthread_mutex_unlock(&o->s->mu);
        }
        token_event(o, rq, i, tok, mode);
        if (mode == FAKE_SLOW_TOKENS) {
            pthread_mutex_lock(&o->s->mu);
            int gap_ms = o->s->slow_gap_ms;
            pthread_mutex_unlock(&o->s->mu);
            sleep_ms(gap_ms);
        }
    }
    if (o->gone) {
        return;
    }
    final_event(o, rq, mode, n, "limit");
    if (mode == FAKE_AFTER_END) {
        token_event(o, rq, n, 5, mode);
    }
    if (rq->v1 && mode != FAKE_NO_DONE) {
        emit(o, "data: [DONE]\n\n", 14);
        if (mode == FAKE_AFTER_DONE) {
            token_event(o, rq, n, 6, mode);
        }
    }
    end_body(o);
}

static void reply(struct fake_server *s, int fd, const struct request *rq, int forced_mode)
{
    struct out o = {s, fd, false, false, false};
    int mode = rq->prompt_len > 0 && rq->prompt[0] > 0 && rq->prompt[0] < FAKE_N_MODES
                   ? rq->prompt[0]
                   : FAKE_OK;
    mode = forced_mode > 0 ? forced_mode : mode;
    char body[1024];
    if (strcmp(rq->path, "/completion") != 0 && strcmp(rq->path, "/v1/completions") != 0) {
        send_simple(&o, 404, "Not Found", "application/json", "",
                    "{\"error\":{\"code\":404,\"message\":\"File Not Found\"}}");
        return;
    }
    switch (mode) {
    case FAKE_HTTP_500:
        send_simple(&o, 500, "Internal Server Error", "application/json", "",
                    "{\"error\":{\"code\":500,\"message\":\"boom: the model exploded\","
                    "\"type\":\"server_error\"}}");
        break;
    case FAKE_HTTP_429:
        send_simple(&o, 429, "Too Many Requests", "application/json", "Retry-After: 7\r\n",
                    "{\"error\":{\"code\":429,\"message\":\"slow down\",\"type\":\"rate_limit\"}}");
        break;
    case FAKE_REDIRECT: {
        char loc[128];
        snprintf(loc, sizeof loc, "Location: http://127.0.0.1:%d/stolen\r\n", s->port);
        send_simple(&o, 302, "Found", "text/plain", loc, "");
        break;
    }
    case FAKE_ECHO_AUTH:
        snprintf(body, sizeof body,
                 "{\"error\":{\"code\":401,\"message\":\"invalid key in Authorization: %s\"}}",
                 rq->auth);
        send_simple(&o, 401, "Unauthorized", "application/json", "", body);
        break;
    case FAKE_WRONG_TYPE:
        send_simple(&o, 200, "OK", "application/json", "", "{\"content\":\"hi\",\"tokens\":[1,2]}");
        break;
    case FAKE_NO_RESPONSE:
        break;
    case FAKE_SILENT:
        wait_for_client(&o);
        break;
    default:
        reply_stream(&o, rq, mode);
        break;
    }
}

/* ------------------------------------------------------------------ */
/* Threads                                                             */
/* ------------------------------------------------------------------ */

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct fake_server *s = c->s;
    struct request *rq = calloc(1, sizeof *rq);
    if (rq != NULL && read_request(s, c->fd, rq)) {
        parse_body(rq);
        pthread_mutex_lock(&s->mu);
        s->n_requests++;
        if (s->n_paths < 256) {
            snprintf(s->paths[s->n_paths++], sizeof s->paths[0], "%s", rq->path);
        }
        snprintf(s->last_auth, sizeof s->last_auth, "%s", rq->auth);
        int mode = rq->prompt_len > 0 ? rq->prompt[0] : 0;
        if (mode > 0 && mode < FAKE_N_MODES) {
            snprintf(s->last_body[mode], BODY_KEEP, "%s", rq->body);
        }
        int forced_mode = s->forced_mode;
        pthread_mutex_unlock(&s->mu);
        reply(s, c->fd, rq, forced_mode);
    }
    if (rq != NULL) {
        free(rq->body);
        free(rq);
    }
    shutdown(c->fd, SHUT_RDWR);
    close(c->fd);
    pthread_mutex_lock(&s->mu);
    c->finished = true;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* A free connection slot (joining a finished thread), or NULL. */
static struct conn *take_slot(struct fake_server *s)
{
    for (int i = 0; i < MAX_CONN; i++) {
        struct conn *c = &s->conns[i];
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
    struct fake_server *s = arg;
    while (!stopping(s)) {
        struct pollfd pfd = {s->lfd, POLLIN, 0};
        if (poll(&pfd, 1, 50) <= 0) {
            continue;
        }
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) {
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = take_slot(s);
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->s = s;
        c->fd = fd;
        c->finished = false;
        c->used = true;
        if (pthread_create(&c->th, NULL, conn_main, c) != 0) {
            c->used = false;
            close(fd);
        }
    }
    return NULL;
}

int fake_server_start(struct fake_server **out)
{
    *out = NULL;
    struct fake_server *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return -1;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->slow_gap_ms = 150;
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t alen = sizeof addr;
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(s->lfd, 128) != 0 || getsockname(s->lfd, (struct sockaddr *)&addr, &alen) != 0) {
        int e = errno;
        if (s->lfd >= 0) {
            close(s->lfd);
        }
        free(s);
        errno = e;
        return -1;
    }
    s->port = ntohs(addr.sin_port);
    if (pthread_create(&s->accept_th, NULL, accept_main, s) != 0) {
        close(s->lfd);
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void fake_server_stop(struct fake_server *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->accept_th, NULL);
    for (int i = 0; i < MAX_CONN; i++) {
        if (s->conns[i].used) {
            pthread_join(s->conns[i].th, NULL);
        }
    }
    close(s->lfd);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int fake_server_port(const struct fake_server *s)
{
    return s->port;
}

int fake_server_n_requests(struct fake_server *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n_requests;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int fake_server_slow_token_times(struct fake_server *s, int64_t *out, int max)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n_slow_sent < max ? s->n_slow_sent : max;
    for (int i = 0; i < n; i++) {
        out[i] = s->slow_sent_ns[i];
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

int fake_server_n_path(struct fake_server *s, const char *path)
{
    int n = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_paths; i++) {
        n += strcmp(s->paths[i], path) == 0;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

int fake_server_n_client_gone(struct fake_server *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n_client_gone;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void fake_server_last_auth(struct fake_server *s, char *buf, size_t size)
{
    pthread_mutex_lock(&s->mu);
    snprintf(buf, size, "%s", s->last_auth);
    pthread_mutex_unlock(&s->mu);
}

void fake_server_set_mode(struct fake_server *s, int mode)
{
    pthread_mutex_lock(&s->mu);
    s->forced_mode = mode > 0 && mode < FAKE_N_MODES ? mode : 0;
    pthread_mutex_unlock(&s->mu);
}

void fake_server_set_timing(struct fake_server *s, int queue_ms, int slow_gap_ms)
{
    pthread_mutex_lock(&s->mu);
    s->queue_ms = queue_ms;
    s->slow_gap_ms = slow_gap_ms;
    pthread_mutex_unlock(&s->mu);
}

void fake_server_last_body(struct fake_server *s, int mode, char *buf, size_t size)
{
    pthread_mutex_lock(&s->mu);
    snprintf(buf, size, "%s", mode > 0 && mode < FAKE_N_MODES ? s->last_body[mode] : "");
    pthread_mutex_unlock(&s->mu);
}
