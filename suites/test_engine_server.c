/*
 * test_engine_server - suites/engine_server.c, the bundled engine served
 * over HTTP as llama.cpp's server speaks, driven through the real OpenAI
 * adapter (adapters/openai.h) and judged against the same engine in this
 * process:
 *
 *   test_engine_server ENGINE_SERVER EXPORT_GGUF
 *
 * It exports TinyGPT seed 1 to GGUF in its scratch folder (EXPORT_GGUF),
 * starts ENGINE_SERVER on it (a port the kernel picks, read from
 * --port-file), and checks:
 *   - greedy tokens over HTTP, four requests at once through the server's
 *     slots, equal the in-process engine's, and a request whose stop token
 *     is EOS stops there on both sides;
 *   - a seeded sampled request gives the in-process engine's tokens for
 *     the same seed and parameters;
 *   - every top logprob (n_probs 5) and the sampled token's logprob equal
 *     the in-process logits' log-softmax within 1e-5, the top ids in order;
 *   - an out-of-range prompt token is refused with HTTP 400, and so are
 *     fields the engine cannot honour (raw HTTP, the field named);
 *   - clients that close mid-stream (running, and waiting in the queue)
 *     have their requests aborted: /metrics goes back to 0 processing and
 *     0 deferred, the engine generated far fewer tokens than asked, and the
 *     next request is served correctly;
 *   - bad arguments exit 2 with a message; SIGTERM stops the server with
 *     status 0 and removes its port file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "adapters/openai.h"
#include "adapters/prom.h"
#include "adapters/prom_http.h"
#include "adapters/spec.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/rng.h"
#include "support.h"

extern char **environ;

enum {
    VOCAB = 260,
    EOS = 257,
    N_TOP = 5,
    MAX_REQ = 8,
    MAX_TOK = 64,
    LONG_TOKENS = 1500, /* a request that runs long enough to be cut */
};

#define LOGPROB_ATOL 1e-5
#define DRIVE_LIMIT_NS (120 * 1000000000LL)

static const char *g_server_bin;
static const char *g_export_bin;
static char g_dir[512];
static char g_gguf[600];
static char g_port_file[600];
static pid_t g_pid = -1;
static int g_port;

/* ------------------------------------------------------------------ */
/* Processes                                                           */
/* ------------------------------------------------------------------ */

/* Start argv with stdout and stderr into log; returns its pid or -1. */
static pid_t spawn(char *const argv[], const char *log)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

static int wait_exit(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void slurp(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        size_t n = fread(buf, 1, size - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
}

/* ------------------------------------------------------------------ */
/* Driving adapters                                                    */
/* ------------------------------------------------------------------ */

struct outcome {
    int32_t tok[MAX_TOK];
    int32_t n_tok;
    enum assay_finish_reason reason;
    int32_t error;
    char message[600];
};

/* The id of request i of a batch (ids start above 0). */
static uint64_t req_id(int i)
{
    return 100 + (uint64_t)i;
}

/* Add n requests and step until the adapter is idle (bounded in time). */
static void drive(const struct assay_adapter *a, const struct assay_request *reqs, int n,
                  struct outcome *out)
{
    memset(out, 0, sizeof(*out) * (size_t)n);
    for (int i = 0; i < n; i++) {
        enum assay_status st = a->vt->add_request(a->self, &reqs[i]);
        if (st != ASSAY_OK) {
            fail_msg("add_request %d: %s", i, assay_status_str(st));
        }
    }
    int64_t t0 = assay_now_ns();
    while (a->vt->has_work(a->self)) {
        assert_true(assay_now_ns() - t0 < DRIVE_LIMIT_NS);
        const struct assay_event *ev = NULL;
        size_t n_ev = 0;
        assert_int_equal(a->vt->step(a->self, &ev, &n_ev), ASSAY_OK);
        for (size_t k = 0; k < n_ev; k++) {
            int i = (int)(ev[k].request_id - req_id(0));
            assert_true(i >= 0 && i < n);
            struct outcome *o = &out[i];
            if (ev[k].kind == ASSAY_EVENT_TOKEN) {
                assert_int_equal(ev[k].index, o->n_tok);
                assert_true(o->n_tok < MAX_TOK);
                o->tok[o->n_tok++] = ev[k].token;
            } else if (ev[k].kind == ASSAY_EVENT_FINISH) {
                o->reason = ev[k].reason;
                o->error = ev[k].error;
                snprintf(o->message, sizeof o->message, "%s",
                         ev[k].message != NULL ? ev[k].message : "");
            }
        }
    }
}

static void open_spec(const char *spec, struct assay_adapter *a)
{
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_adapter_open_spec(spec, a, &diag);
    if (st != ASSAY_OK) {
        char why[600];
        fail_msg("%s: %s", spec, assay_diag_format(&diag, why, sizeof why));
    }
}

/* The server through the adapter; extra spec keys after the URL. */
static void open_server(const char *keys, struct assay_adapter *a)
{
    char spec[256];
    snprintf(spec, sizeof spec, "openai:http://127.0.0.1:%d%s%s", g_port, keys[0] ? "," : "",
             keys);
    open_spec(spec, a);
}

/* The same engine in this process. */
static void open_local(struct assay_adapter *a)
{
    char spec[700];
    snprintf(spec, sizeof spec, "bundled:model=%s,order=sequential", g_gguf);
    open_spec(spec, a);
}

/* A prompt of len tokens drawn from seed. */
static void make_prompt(uint64_t seed, int32_t len, int32_t *out)
{
    for (int32_t i = 0; i < len; i++) {
        out[i] = (int32_t)(assay_rng_u01(seed, (uint64_t)i, 7) * 256.0);
    }
}

static void request(struct assay_request *r, int i, const int32_t *prompt, int32_t len,
                    int32_t max_tokens)
{
    memset(r, 0, sizeof *r);
    r->id = req_id(i);
    r->prompt = prompt;
    r->prompt_len = len;
    r->max_tokens = max_tokens;
    r->stop_token = -1;
    r->sampling = assay_sampling_greedy();
}

static void assert_same_tokens(const struct outcome *http, const struct outcome *local, int i)
{
    if (http->reason != local->reason || http->n_tok != local->n_tok ||
        memcmp(http->tok, local->tok, (size_t)local->n_tok * sizeof local->tok[0]) != 0) {
        int at = 0;
        while (at < http->n_tok && at < local->n_tok && http->tok[at] == local->tok[at]) {
            at++;
        }
        fail_msg("request %d: over HTTP %d tokens (%s%s%s), in process %d (%s); first "
                 "difference at position %d: %d vs %d",
                 i, (int)http->n_tok, assay_finish_reason_str(http->reason),
                 http->message[0] ? ": " : "", http->message, (int)local->n_tok,
                 assay_finish_reason_str(local->reason), at,
                 at < http->n_tok ? (int)http->tok[at] : -1,
                 at < local->n_tok ? (int)local->tok[at] : -1);
    }
}

/* The value of a metric of the server's /metrics. */
static double metric(const struct assay_adapter *srv, const char *name)
{
    char *body = NULL;
    size_t len = 0;
    long code = 0;
    char msg[300];
    enum assay_status st =
        assay_prom_http_get(srv, "/metrics", 1 << 20, &body, &len, &code, msg, sizeof msg);
    if (st != ASSAY_OK || code != 200) {
        fail_msg("GET /metrics: %s (HTTP %ld)", msg, code);
    }
    double v = NAN;
    int32_t n = assay_prom_sum(body, len, name, &v);
    assay_free(body);
    if (n != 1) {
        fail_msg("/metrics has %d samples of %s", (int)n, name);
    }
    return v;
}

/* Poll /metrics until `name` equals want (at most 30 s); its last value. */
static double await_metric(const struct assay_adapter *srv, const char *name, double want)
{
    double v = metric(srv, name);
    for (int i = 0; i < 600 && v != want; i++) {
        sleep_ms(50);
        v = metric(srv, name);
    }
    return v;
}

/* ------------------------------------------------------------------ */
/* Raw HTTP, for what the adapter never sends                          */
/* ------------------------------------------------------------------ */

/* Send one request and read the whole response (the server closes after
 * it: "Connection: close"). Returns the status code. */
static int raw_http(const char *method, const char *path, const char *body, char *resp,
                    size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((uint16_t)g_port);
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    char head[512];
    size_t blen = body != NULL ? strlen(body) : 0;
    int h = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     method, path, blen);
    assert_int_equal(send(fd, head, (size_t)h, MSG_NOSIGNAL), h);
    if (blen > 0) {
        assert_int_equal(send(fd, body, blen, MSG_NOSIGNAL), (ssize_t)blen);
    }
    size_t len = 0;
    ssize_t n;
    while (len + 1 < size && (n = recv(fd, resp + len, size - 1 - len, 0)) > 0) {
        len += (size_t)n;
    }
    resp[len] = '\0';
    close(fd);
    int status = 0;
    assert_int_equal(sscanf(resp, "HTTP/1.1 %d", &status), 1);
    return status;
}

/* ------------------------------------------------------------------ */
/* Set-up: the model, the server                                       */
/* ------------------------------------------------------------------ */

static int group_setup(void **state)
{
    (void)state;
    assay_test_scratch("engine-server", g_dir, sizeof g_dir);
    mkdir(g_dir, 0755);
    snprintf(g_gguf, sizeof g_gguf, "%s/tinygpt-s1.gguf", g_dir);
    snprintf(g_port_file, sizeof g_port_file, "%s/port", g_dir);
    char log[600];
    snprintf(log, sizeof log, "%s/export.log", g_dir);
    char *ex[] = {(char *)g_export_bin, g_gguf, "tinygpt", "1", NULL};
    pid_t pid = spawn(ex, log);
    if (pid < 0 || wait_exit(pid) != 0) {
        fprintf(stderr, "export_gguf failed (see %s)\n", log);
        return -1;
    }
    unlink(g_port_file);
    char spec[700];
    snprintf(spec, sizeof spec, "bundled:model=%s,order=sequential", g_gguf);
    snprintf(log, sizeof log, "%s/server.log", g_dir);
    char *sv[] = {(char *)g_server_bin, "--engine", spec, "--port-file", g_port_file,
                  "--slots", "4", NULL};
    g_pid = spawn(sv, log);
    if (g_pid < 0) {
        fprintf(stderr, "cannot start %s: %s\n", g_server_bin, strerror(errno));
        return -1;
    }
    for (int i = 0; i < 1200; i++) {
        char text[32];
        slurp(g_port_file, text, sizeof text);
        if (sscanf(text, "%d", &g_port) == 1 && g_port > 0) {
            fprintf(stderr, "engine_server pid %d on port %d\n", (int)g_pid, g_port);
            return 0;
        }
        int st;
        if (waitpid(g_pid, &st, WNOHANG) == g_pid) {
            g_pid = -1;
            break;
        }
        sleep_ms(50);
    }
    char text[2048];
    slurp(log, text, sizeof text);
    fprintf(stderr, "engine_server did not start:\n%s\n", text);
    return -1;
}

static int group_teardown(void **state)
{
    (void)state;
    if (g_pid > 0) {
        kill(g_pid, SIGTERM);
        wait_exit(g_pid);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The tests                                                           */
/* ------------------------------------------------------------------ */

/* Greedy over HTTP, six requests through four slots at once, against the
 * engine in this process; then one that stops at EOS on both sides. */
static void test_greedy(void **state)
{
    (void)state;
    struct assay_adapter srv = {NULL, NULL}, loc = {NULL, NULL};
    open_server("vocab=260,ctx=2048", &srv);
    open_local(&loc);
    int32_t prompts[6][40];
    const int32_t lens[6] = {1, 3, 7, 16, 29, 40};
    struct assay_request reqs[6];
    for (int i = 0; i < 6; i++) {
        make_prompt(11 + (uint64_t)i, lens[i], prompts[i]);
        request(&reqs[i], i, prompts[i], lens[i], 12 + 4 * i);
    }
    struct outcome http[6], local[6];
    drive(&srv, reqs, 6, http);
    drive(&loc, reqs, 6, local);
    int n_tokens = 0;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(local[i].reason, ASSAY_FINISH_LENGTH);
        assert_same_tokens(&http[i], &local[i], i);
        n_tokens += http[i].n_tok;
    }
    /* EOS as the stop token: the adapter lets the server stop there
     * (ignore_eos false). Find a prompt whose greedy output reaches EOS. */
    struct assay_adapter srv_eos = {NULL, NULL};
    open_server("vocab=260,ctx=2048,eos=257", &srv_eos);
    int found = -1;
    int32_t p[MAX_REQ][24];
    struct assay_request eos_reqs[MAX_REQ];
    struct outcome lo_all[MAX_REQ];
    struct outcome lo, ho;
    for (int batch = 0; batch < 40 && found < 0; batch++) {
        for (int i = 0; i < MAX_REQ; i++) {
            make_prompt(1000 + (uint64_t)(batch * MAX_REQ + i), 24, p[i]);
            request(&eos_reqs[i], i, p[i], 24, 48);
            eos_reqs[i].stop_token = EOS;
        }
        drive(&loc, eos_reqs, MAX_REQ, lo_all);
        for (int i = 0; i < MAX_REQ && found < 0; i++) {
            if (lo_all[i].reason == ASSAY_FINISH_STOP) {
                found = batch * MAX_REQ + i;
                lo = lo_all[i];
            }
        }
    }
    assert_true(found >= 0);
    struct assay_request r = eos_reqs[found % MAX_REQ];
    r.id = req_id(0);
    drive(&srv_eos, &r, 1, &ho);
    assert_same_tokens(&ho, &lo, 0);
    assert_int_equal(ho.tok[ho.n_tok - 1], EOS);
    fprintf(stderr, "greedy: 6 requests, %d tokens equal; EOS stop after %d tokens (prompt %d)\n",
            n_tokens, (int)ho.n_tok, found);
    assay_adapter_close(&srv_eos);
    assay_adapter_close(&srv);
    assay_adapter_close(&loc);
}

/* A seeded sampled request: the same tokens as in process. */
static void test_seeded(void **state)
{
    (void)state;
    struct assay_adapter srv = {NULL, NULL}, loc = {NULL, NULL};
    open_server("vocab=260,ctx=2048", &srv);
    open_local(&loc);
    const uint64_t seeds[3] = {12345, 0, 4294967294u};
    const struct {
        float t;
        int32_t k;
        float p;
    } params[3] = {{0.9f, 40, 0.9f}, {1.0f, 0, 1.0f}, {1.3f, 7, 0.75f}};
    int32_t prompt[10];
    make_prompt(77, 10, prompt);
    struct outcome first = {{0}, 0, ASSAY_FINISH_NONE, 0, ""};
    for (int i = 0; i < 3; i++) {
        struct assay_request r;
        request(&r, 0, prompt, 10, 40);
        r.sampling.temperature = params[i].t;
        r.sampling.top_k = params[i].k;
        r.sampling.top_p = params[i].p;
        r.sampling.seeded = true;
        r.sampling.seed = seeds[i];
        struct outcome http, local;
        drive(&srv, &r, 1, &http);
        drive(&loc, &r, 1, &local);
        assert_same_tokens(&http, &local, i);
        if (i == 0) {
            first = http;
        }
    }
    /* Sampling did happen: another seed, other tokens (a control). */
    struct assay_request r;
    request(&r, 0, prompt, 10, 40);
    r.sampling.temperature = params[0].t;
    r.sampling.top_k = params[0].k;
    r.sampling.top_p = params[0].p;
    r.sampling.seeded = true;
    r.sampling.seed = seeds[0] + 1;
    struct outcome other;
    drive(&srv, &r, 1, &other);
    assert_true(memcmp(other.tok, first.tok, sizeof first.tok) != 0);
    fprintf(stderr, "seeded: 3 seeds x 40 sampled tokens equal; seed+1 differs\n");
    assay_adapter_close(&srv);
    assay_adapter_close(&loc);
}

/* What the logprobs sink and the logits sink saw. */
struct lp_seen {
    int32_t n;
    uint64_t id[MAX_REQ * MAX_TOK];
    int32_t index[MAX_REQ * MAX_TOK];
    int32_t token[MAX_REQ * MAX_TOK];
    double logprob[MAX_REQ * MAX_TOK];
    int32_t n_top[MAX_REQ * MAX_TOK];
    struct assay_openai_logprob top[MAX_REQ * MAX_TOK][N_TOP];
};

struct logits_seen {
    int32_t n;
    uint64_t id[MAX_REQ * MAX_TOK];
    int32_t index[MAX_REQ * MAX_TOK];
    double lsm[MAX_REQ * MAX_TOK][VOCAB]; /* log-softmax in double */
};

static void on_logprobs(void *ctx, uint64_t id, int32_t index, int32_t token, double logprob,
                        const struct assay_openai_logprob *top, int32_t n_top)
{
    struct lp_seen *s = ctx;
    if (s->n == MAX_REQ * MAX_TOK) {
        return;
    }
    int32_t k = s->n++;
    s->id[k] = id;
    s->index[k] = index;
    s->token[k] = token;
    s->logprob[k] = logprob;
    s->n_top[k] = n_top;
    for (int32_t j = 0; j < n_top && j < N_TOP; j++) {
        s->top[k][j] = top[j];
    }
}

static void on_logits(void *ctx, uint64_t id, int32_t index, const float *logits, int32_t vocab)
{
    struct logits_seen *s = ctx;
    if (s->n == MAX_REQ * MAX_TOK || vocab != VOCAB) {
        return;
    }
    int32_t k = s->n++;
    s->id[k] = id;
    s->index[k] = index;
    double mx = -INFINITY, sum = 0.0;
    for (int32_t i = 0; i < vocab; i++) {
        mx = fmax(mx, (double)logits[i]);
    }
    for (int32_t i = 0; i < vocab; i++) {
        sum += exp((double)logits[i] - mx);
    }
    for (int32_t i = 0; i < vocab; i++) {
        s->lsm[k][i] = (double)logits[i] - mx - log(sum);
    }
}

/* Top logprobs over HTTP against the in-process logits' log-softmax. */
static void test_logprobs(void **state)
{
    (void)state;
    struct assay_adapter srv = {NULL, NULL}, loc = {NULL, NULL};
    open_server("vocab=260,ctx=2048,logprobs=5", &srv);
    open_local(&loc);
    struct lp_seen *lp = calloc(1, sizeof *lp);
    struct logits_seen *lg = calloc(1, sizeof *lg);
    assert_non_null(lp);
    assert_non_null(lg);
    assert_int_equal(assay_openai_set_logprobs_sink(&srv, on_logprobs, lp), ASSAY_OK);
    assert_int_equal(loc.vt->set_logits_sink(loc.self, on_logits, lg), ASSAY_OK);
    int32_t prompts[4][20];
    struct assay_request reqs[4];
    for (int i = 0; i < 4; i++) {
        make_prompt(300 + (uint64_t)i, 5 + 5 * i, prompts[i]);
        request(&reqs[i], i, prompts[i], 5 + 5 * i, 16);
        if (i == 3) { /* one sampled: logprobs are of the raw logits all the same */
            reqs[i].sampling.temperature = 0.7f;
            reqs[i].sampling.top_k = 20;
            reqs[i].sampling.seeded = true;
            reqs[i].sampling.seed = 99;
        }
    }
    struct outcome http[4], local[4];
    drive(&srv, reqs, 4, http);
    drive(&loc, reqs, 4, local);
    for (int i = 0; i < 4; i++) {
        assert_same_tokens(&http[i], &local[i], i);
    }
    assert_int_equal(lp->n, 4 * 16);
    assert_int_equal(lg->n, 4 * 16);
    double worst = 0.0;
    int n_cmp = 0;
    for (int32_t k = 0; k < lp->n; k++) {
        int32_t m = 0;
        while (m < lg->n && !(lg->id[m] == lp->id[k] && lg->index[m] == lp->index[k])) {
            m++;
        }
        assert_true(m < lg->n);
        const double *ref = lg->lsm[m];
        assert_int_equal(lp->n_top[k], N_TOP);
        /* The token's own logprob, then the top five in order. */
        double d = fabs(lp->logprob[k] - ref[lp->token[k]]);
        worst = fmax(worst, d);
        n_cmp++;
        if (!(d <= LOGPROB_ATOL)) {
            fail_msg("request %llu position %d token %d: logprob %.9g, in process %.9g "
                     "(|diff| %.3g > %g)",
                     (unsigned long long)lp->id[k], (int)lp->index[k], (int)lp->token[k],
                     lp->logprob[k], ref[lp->token[k]], d, LOGPROB_ATOL);
        }
        bool used[VOCAB] = {false};
        for (int32_t j = 0; j < N_TOP; j++) {
            int32_t best = -1;
            for (int32_t t = 0; t < VOCAB; t++) {
                if (!used[t] && (best < 0 || ref[t] > ref[best])) {
                    best = t;
                }
            }
            used[best] = true;
            const struct assay_openai_logprob *e = &lp->top[k][j];
            d = fabs(e->logprob - ref[e->token]);
            worst = fmax(worst, d);
            n_cmp++;
            if (e->token != best || !(d <= LOGPROB_ATOL)) {
                fail_msg("request %llu position %d: top %d is token %d logprob %.9g; in "
                         "process token %d logprob %.9g (|diff| %.3g, tolerance %g)",
                         (unsigned long long)lp->id[k], (int)lp->index[k], (int)j,
                         (int)e->token, e->logprob, (int)best, ref[best], d, LOGPROB_ATOL);
            }
        }
    }
    fprintf(stderr, "logprobs: %d values, largest |HTTP - in process| %.3g (tolerance %g)\n",
            n_cmp, worst, LOGPROB_ATOL);
    free(lp);
    free(lg);
    assay_adapter_close(&srv);
    assay_adapter_close(&loc);
}

/* Requests the server must refuse, each naming why. */
static void test_refusals(void **state)
{
    (void)state;
    /* Through the adapter (which, not told the vocabulary, sends it). */
    struct assay_adapter srv = {NULL, NULL};
    open_server("", &srv);
    int32_t prompt[3] = {72, 999, 33};
    struct assay_request r;
    request(&r, 0, prompt, 3, 4);
    struct outcome o;
    drive(&srv, &r, 1, &o);
    assert_int_equal(o.reason, ASSAY_FINISH_ERROR);
    if (strstr(o.message, "HTTP 400") == NULL || strstr(o.message, "outside the vocabulary") ==
                                                     NULL) {
        fail_msg("an out-of-range token: %s", o.message);
    }
    fprintf(stderr, "out of range: %s\n", o.message);
    assay_adapter_close(&srv);
    /* Raw: fields the engine cannot honour, named in the error. */
    const struct {
        const char *body, *names; /* names: as it reads inside the JSON error */
        int status;
    } cases[] = {
        {"{\"prompt\":[1,2],\"n_predict\":2,\"min_p\":0.05}", "\\\"min_p\\\"", 400},
        {"{\"prompt\":[1,2],\"n_predict\":2,\"grammar\":\"root ::= x\"}", "\\\"grammar\\\"", 400},
        {"{\"prompt\":[1,2],\"n_predict\":2,\"stop\":[\"x\"]}", "\\\"stop\\\"", 400},
        {"{\"prompt\":[1,2],\"n_predict\":2,\"logit_bias\":[[5,-1]]}", "\\\"logit_bias\\\"", 400},
        {"{\"prompt\":\"hello\",\"n_predict\":2}", "\\\"prompt\\\"", 400},
        {"{\"prompt\":[1,2],\"n_predict\":2,\"samplers\":[\"top_k\"],\"temperature\":0.5}",
         "\\\"samplers\\\"", 400},
        {"{\"prompt\":[1,2],\"n_predict\":2048}", "\\\"n_predict\\\"", 400},
        {"{\"prompt\":[1,2],\"n_predict\":2,\"seed\":4294967296}", "\\\"seed\\\"", 400},
        {"[1,2]", "JSON object", 400},
        {"{\"prompt\":[1,2],\"n_predict\":2,\"temperature\":0,\"return_tokens\":true}",
         "\"stop\":true", 200},
    };
    char resp[8192];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = raw_http("POST", "/completion", cases[i].body, resp, sizeof resp);
        if (status != cases[i].status || strstr(resp, cases[i].names) == NULL) {
            fail_msg("%s: HTTP %d, expected %d naming %s:\n%s", cases[i].body, status,
                     cases[i].status, cases[i].names, resp);
        }
    }
    assert_int_equal(raw_http("GET", "/health", NULL, resp, sizeof resp), 200);
    assert_non_null(strstr(resp, "{\"status\":\"ok\"}"));
    assert_int_equal(raw_http("GET", "/slots", NULL, resp, sizeof resp), 404);
    assert_int_equal(raw_http("GET", "/completion", NULL, resp, sizeof resp), 405);
    fprintf(stderr, "refusals: %zu raw requests answered as expected\n",
            sizeof cases / sizeof cases[0] + 3);
}

/* Clients that close mid-stream: aborted in the engine (running) or taken
 * out of the queue (waiting); the server then idle and serving. */
static void test_client_gone(void **state)
{
    (void)state;
    struct assay_adapter srv = {NULL, NULL}, loc = {NULL, NULL};
    open_server("vocab=260,ctx=2048", &srv);
    open_local(&loc);
    assert_true(await_metric(&srv, "llamacpp:requests_processing", 0) == 0);
    double before = metric(&srv, "llamacpp:tokens_predicted_total");
    /* Five long requests through four slots: four run, one waits. */
    int32_t prompts[5][8];
    struct assay_request reqs[5];
    for (int i = 0; i < 5; i++) {
        make_prompt(500 + (uint64_t)i, 8, prompts[i]);
        request(&reqs[i], i, prompts[i], 8, LONG_TOKENS);
        assert_int_equal(srv.vt->add_request(srv.self, &reqs[i]), ASSAY_OK);
    }
    /* Until each running request has streamed a few tokens. */
    int32_t got[5] = {0};
    int64_t t0 = assay_now_ns();
    int running = 0;
    while (running < 4) {
        assert_true(assay_now_ns() - t0 < DRIVE_LIMIT_NS);
        const struct assay_event *ev = NULL;
        size_t n = 0;
        assert_int_equal(srv.vt->step(srv.self, &ev, &n), ASSAY_OK);
        for (size_t k = 0; k < n; k++) {
            assert_int_equal(ev[k].kind, ASSAY_EVENT_TOKEN);
            int i = (int)(ev[k].request_id - req_id(0));
            running += ++got[i] == 3;
        }
    }
    assert_int_equal(metric(&srv, "llamacpp:requests_processing"), 4);
    assert_int_equal(metric(&srv, "llamacpp:requests_deferred"), 1);
    /* The adapter's abort closes the stream: the client goes away. */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(srv.vt->abort(srv.self, req_id(i)), ASSAY_OK);
    }
    int n_abort = 0;
    while (srv.vt->has_work(srv.self)) {
        const struct assay_event *ev = NULL;
        size_t n = 0;
        assert_int_equal(srv.vt->step(srv.self, &ev, &n), ASSAY_OK);
        for (size_t k = 0; k < n; k++) {
            n_abort += ev[k].kind == ASSAY_EVENT_FINISH && ev[k].reason == ASSAY_FINISH_ABORT;
        }
    }
    assert_int_equal(n_abort, 5);
    double processing = await_metric(&srv, "llamacpp:requests_processing", 0);
    double deferred = await_metric(&srv, "llamacpp:requests_deferred", 0);
    double generated = metric(&srv, "llamacpp:tokens_predicted_total") - before;
    fprintf(stderr,
            "client gone: processing %g, deferred %g after the aborts; the engine generated %g "
            "of the %d tokens asked\n",
            processing, deferred, generated, 4 * LONG_TOKENS);
    assert_true(processing == 0);
    assert_true(deferred == 0);
    assert_true(generated < 4.0 * LONG_TOKENS / 2);
    assert_true(await_metric(&srv, "llamacpp:kv_cache_tokens", 0) == 0);
    /* The next request is served, and right. */
    struct assay_request r;
    request(&r, 0, prompts[4], 8, 20);
    struct outcome http, local;
    drive(&srv, &r, 1, &http);
    drive(&loc, &r, 1, &local);
    assert_same_tokens(&http, &local, 0);
    assay_adapter_close(&srv);
    assay_adapter_close(&loc);
}

/* Bad arguments: a message naming what is wrong, exit status 2. */
static void test_bad_args(void **state)
{
    (void)state;
    char log[600], text[4096], missing[700];
    snprintf(log, sizeof log, "%s/bad-args.log", g_dir);
    snprintf(missing, sizeof missing, "bundled:model=%s/missing.gguf", g_dir);
    const struct {
        const char *args[5];
        const char *says;
    } cases[] = {
        {{NULL}, "--engine SPEC is required"},
        {{"--engine", "bundled", "--slots", "0", NULL}, "--slots"},
        {{"--engine", "bundled", "--port", "70000", NULL}, "--port"},
        {{"--engine", "bundled:batch=x", NULL}, "batch"},
        {{"--engine", missing, NULL}, "missing.gguf"},
        {{"--engine", "bundled", "--bogus", NULL}, "unknown argument"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[8] = {(char *)g_server_bin};
        for (int k = 0; k < 5 && cases[i].args[k] != NULL; k++) {
            argv[k + 1] = (char *)cases[i].args[k];
        }
        pid_t pid = spawn(argv, log);
        assert_true(pid > 0);
        int rc = wait_exit(pid);
        slurp(log, text, sizeof text);
        if (rc != 2 || strstr(text, cases[i].says) == NULL) {
            fail_msg("case %zu: exit %d, expected 2 with \"%s\":\n%s", i, rc, cases[i].says,
                     text);
        }
    }
}

/* Last: SIGTERM stops the server cleanly (status 0, port file gone). */
static void test_stop(void **state)
{
    (void)state;
    assert_true(g_pid > 0);
    assert_int_equal(kill(g_pid, SIGTERM), 0);
    int rc = wait_exit(g_pid);
    g_pid = -1;
    char log[600], text[4096];
    snprintf(log, sizeof log, "%s/server.log", g_dir);
    slurp(log, text, sizeof text);
    if (rc != 0 || strstr(text, "engine_server: stopped") == NULL) {
        fail_msg("exit status %d:\n%s", rc, text);
    }
    assert_int_equal(access(g_port_file, F_OK), -1);
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc != 3) {
        fprintf(stderr, "usage: %s ENGINE_SERVER EXPORT_GGUF\n", argv[0]);
        return 2;
    }
    g_server_bin = argv[1];
    g_export_bin = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy),   cmocka_unit_test(test_seeded),
        cmocka_unit_test(test_logprobs), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_client_gone), cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_stop),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
