/*
 * engine_server - an engine spec served over HTTP on 127.0.0.1 as
 * llama.cpp's llama-server speaks, so that the audit (`assay audit --url`)
 * reaches an engine whose correctness is known, the bundled engine above
 * all, through exactly the adapter path a third-party server takes:
 *
 *   engine_server --engine SPEC [--port N] [--port-file PATH] [--slots N]
 *                 [--temperature-scale F]
 *
 *   --engine SPEC     any engine spec (adapters/spec.h), e.g.
 *                     bundled:model=tinygpt-s1.gguf,order=sequential; in a
 *                     build with the planted bugs, mutant=NAME too
 *   --port N          the port (default 0: the kernel picks one)
 *   --port-file PATH  write the port there once listening (a temporary
 *                     file renamed into place, so a reader never sees a
 *                     partial one); removed when the server stops
 *   --slots N         jobs in the engine at once (default 4); more wait in
 *                     a FIFO queue, as llama-server's -np slots
 *
 * It runs until SIGINT or SIGTERM, then stops: no new connection, every
 * open one closed (their requests aborted in the engine), every thread
 * joined, the engine freed; exit status 0. Bad arguments, or an engine
 * spec that cannot be opened: a message and exit status 2. The server
 * cannot listen or start a thread: exit status 1.
 *
 * What it serves (llama.cpp's routes, the subset adapters/openai.c and
 * checks/audit.c use):
 *   POST /completion    (and /completions) llama.cpp's native completion,
 *                       streamed as server-sent events or as one JSON body
 *                       (suites/completion_api.h says what a request may
 *                       ask and what is refused with HTTP 400)
 *   GET /health         200 {"status":"ok"} (the engine is loaded before
 *                       the server listens)
 *   GET /metrics        Prometheus text: llamacpp:requests_processing and
 *                       llamacpp:requests_deferred (the audit's idle
 *                       check), the counters llamacpp:prompt_tokens_total,
 *                       tokens_predicted_total and n_decode_total, and,
 *                       when the engine counts KV blocks (paged KV),
 *                       llamacpp:kv_cache_tokens and
 *                       llamacpp:kv_cache_usage_ratio (blocks neither free
 *                       nor cached for reuse), which llama.cpp's older
 *                       servers exported and the audit's KV idle check reads
 * Anything else is 404 (405 for a known path with another method).
 *
 * Threads: one engine thread owns the adapter (suites/engine_loop.h); one
 * thread per connection (suites/http_server.h) reads a request, queues it
 * as a job and streams the job's tokens as the engine thread files them;
 * the main thread waits for the signal. A client that hangs up has its
 * request cancelled: taken out of the queue, or aborted in the engine.
 * Nothing is global but the signal mask.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>

#include "adapters/bundled.h"
#include "adapters/spec.h"
#include "completion_api.h"
#include "engine_loop.h"
#include "http_server.h"

#define JSON_TYPE "application/json; charset=utf-8"

struct server {
    struct engine_loop *loop;
    struct completion_limits lim;
    char model[256];
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: engine_server --engine SPEC [--port N] [--port-file PATH] [--slots N]\n"
            "                     [--temperature-scale F]\n"
            "\n"
            "Serve the engine SPEC (e.g. bundled:model=FILE.gguf,order=sequential) on\n"
            "http://127.0.0.1:PORT as llama.cpp's llama-server: POST /completion, GET /health,\n"
            "GET /metrics. Runs until SIGINT or SIGTERM.\n"
            "\n"
            "  --engine SPEC     the engine (an engine spec; mutant=NAME in a build with the\n"
            "                    planted bugs)\n"
            "  --port N          port, 0 for one the kernel picks (default 0)\n"
            "  --port-file PATH  write the port to PATH once listening\n"
            "  --slots N         requests in the engine at once, 1-1024 (default 4); the\n"
            "                    rest wait in a FIFO queue\n"
            "  --temperature-scale F  sample every request at F times its temperature\n"
            "                    (default 1): a server moved from the oracle by a known\n"
            "                    bias, for calibrating the audit's power\n"
            "\n"
            "Exit status: 0 stopped by a signal, 1 could not serve, 2 bad arguments or an\n"
            "engine that could not be opened.\n");
}

/* ------------------------------------------------------------------ */
/* Replies                                                             */
/* ------------------------------------------------------------------ */

static void reply_error(struct http_conn *c, int status, const char *message)
{
    struct sbuf b = {NULL, 0, 0, false};
    completion_error(&b, status, message, false);
    if (b.oom) {
        http_reply(c, 500, "text/plain", NULL, "out of memory\n", 14);
    } else {
        http_reply(c, status, JSON_TYPE, NULL, b.p, b.len);
    }
    sbuf_free(&b);
}

static void serve_metrics(struct server *S, struct http_conn *c)
{
    struct engine_loop_stats st;
    engine_loop_get_stats(S->loop, &st);
    struct sbuf b = {NULL, 0, 0, false};
    const struct {
        const char *name, *type, *help;
        double value;
    } rows[] = {
        {"prompt_tokens_total", "counter", "Number of prompt tokens processed.",
         (double)st.prompt_tokens},
        {"tokens_predicted_total", "counter", "Number of generation tokens processed.",
         (double)st.tokens_predicted},
        {"n_decode_total", "counter", "Total number of engine steps.", (double)st.n_steps},
        {"requests_processing", "gauge", "Number of requests processing.",
         (double)st.processing},
        {"requests_deferred", "gauge", "Number of requests deferred.", (double)st.deferred},
        {"kv_cache_tokens", "gauge", "KV-cache positions held (blocks neither free nor cached).",
         (double)st.kv_tokens},
        {"kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.",
         st.kv_usage},
    };
    size_t n_rows = sizeof rows / sizeof rows[0] - (st.has_kv ? 0 : 2);
    for (size_t i = 0; i < n_rows; i++) {
        sbuf_printf(&b, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %.17g\n",
                    rows[i].name, rows[i].help, rows[i].name, rows[i].type, rows[i].name,
                    rows[i].value);
    }
    if (b.oom) {
        reply_error(c, 500, "out of memory writing the metrics");
    } else {
        http_reply(c, 200, "text/plain; version=0.0.4", NULL, b.p, b.len);
    }
    sbuf_free(&b);
}

/* ------------------------------------------------------------------ */
/* POST /completion                                                    */
/* ------------------------------------------------------------------ */

/* Wait until the job has news (the client is gone: no point asking it). */
static void wait_news(const struct engine_job *job)
{
    struct pollfd pfd = {engine_job_wake_fd(job), POLLIN, 0};
    while (poll(&pfd, 1, -1) < 0 && errno == EINTR) {
    }
}

/* How the finished job is described in its final chunk. */
static struct completion_outcome outcome(const struct server *S, const struct engine_job *job)
{
    struct completion_outcome o;
    o.model = S->model;
    o.slot = job->slot;
    o.n_predicted = job->n_out;
    o.stop_type = job->reason == ASSAY_FINISH_LENGTH ? "limit"
                  : job->reason == ASSAY_FINISH_STOP ? "eos"
                                                     : "none";
    int64_t first = job->t_first_ns > 0 ? job->t_first_ns : job->t_done_ns;
    o.prompt_ms = job->t_start_ns > 0 ? (double)(first - job->t_start_ns) / 1e6 : 0.0;
    o.predicted_ms = (double)(job->t_done_ns - first) / 1e6;
    return o;
}

/* The job ended without its tokens: why, as an HTTP status and message. */
static int job_failure(const struct engine_job *job, char *msg, size_t size)
{
    if (job->reason == ASSAY_FINISH_ERROR) {
        snprintf(msg, size, "the engine failed the request (%s): %s",
                 assay_status_str((enum assay_status)job->error),
                 job->message[0] != '\0' ? job->message : "no reason given");
        return job->error == ASSAY_ERR_INVALID ? 400 : 500;
    }
    snprintf(msg, size, "the request was aborted");
    return 500;
}

/* A non-streamed reply: every token at once, or the failure. */
static void reply_whole(struct server *S, struct http_conn *c, const struct completion_request *r,
                        const struct engine_job *job)
{
    char msg[480];
    if (job->reason != ASSAY_FINISH_LENGTH && job->reason != ASSAY_FINISH_STOP) {
        int status = job_failure(job, msg, sizeof msg);
        reply_error(c, status, msg);
        return;
    }
    size_t n = (size_t)job->n_out, k = (size_t)r->n_probs;
    int32_t *tokens = malloc((n > 0 ? n : 1) * sizeof *tokens);
    double *lp = k > 0 ? malloc((n > 0 ? n : 1) * sizeof *lp) : NULL;
    struct engine_job_top *top = k > 0 ? malloc((n > 0 ? n : 1) * k * sizeof *top) : NULL;
    struct sbuf b = {NULL, 0, 0, false};
    if (tokens != NULL && (k == 0 || (lp != NULL && top != NULL))) {
        for (size_t i = 0; i < n; i++) {
            engine_loop_read(S->loop, job, (int32_t)i, &tokens[i], k > 0 ? &lp[i] : NULL,
                             k > 0 ? &top[i * k] : NULL);
        }
        struct completion_outcome o = outcome(S, job);
        completion_final(&b, r, &o, tokens, lp, top, job->n_out);
    } else {
        b.oom = true;
    }
    if (b.oom) {
        reply_error(c, 500, "out of memory writing the response");
    } else {
        http_reply(c, 200, JSON_TYPE, NULL, b.p, b.len);
    }
    sbuf_free(&b);
    free(tokens);
    free(lp);
    free(top);
}

/* Stream the job's tokens as they come, then its final chunk (or its
 * failure); the client hanging up cancels the job. Returns when the job
 * is done. */
static void stream_job(struct server *S, struct http_conn *c, const struct completion_request *r,
                       struct engine_job *job, struct engine_job_top *top)
{
    struct sbuf b = {NULL, 0, 0, false};
    bool started = false, gone = false;
    int32_t sent = 0;
    for (;;) {
        int32_t n_out = 0;
        bool done = false;
        engine_loop_poll(S->loop, job, &n_out, &done);
        if (!gone && sent < n_out && !started) {
            started = true;
            gone = !http_stream_begin(c, "text/event-stream");
        }
        /* Tokens were seen under the loop's mutex, so the job's slot,
         * set when it entered the engine, may be read. */
        struct completion_outcome o = {S->model, sent < n_out ? job->slot : -1, 0, "none", 0.0,
                                       0.0};
        for (; !gone && sent < n_out; sent++) {
            int32_t token = 0;
            double lp = 0.0;
            engine_loop_read(S->loop, job, sent, &token, &lp, top);
            sbuf_reset(&b);
            completion_token_event(&b, r, &o, sent, token, lp, top);
            gone = b.oom || !http_stream_write(c, b.p, b.len);
        }
        if (done) {
            break;
        }
        if (gone) {
            engine_loop_cancel(S->loop, job);
            wait_news(job);
        } else if (http_conn_wait(c, engine_job_wake_fd(job)) == HTTP_WAIT_GONE) {
            gone = true;
            engine_loop_cancel(S->loop, job);
        }
    }
    if (!gone) {
        char msg[480];
        sbuf_reset(&b);
        bool ok = job->reason == ASSAY_FINISH_LENGTH || job->reason == ASSAY_FINISH_STOP;
        if (!started && !ok) {
            int status = job_failure(job, msg, sizeof msg);
            reply_error(c, status, msg);
        } else {
            if (ok) {
                struct completion_outcome o = outcome(S, job);
                completion_final(&b, r, &o, NULL, NULL, NULL, 0);
            } else {
                int status = job_failure(job, msg, sizeof msg);
                completion_error(&b, status, msg, true);
            }
            if (!started) {
                started = true;
                gone = !http_stream_begin(c, "text/event-stream");
            }
            if (!gone && !b.oom && http_stream_write(c, b.p, b.len)) {
                http_stream_end(c);
            }
        }
    }
    sbuf_free(&b);
}

static void serve_completion(struct server *S, struct http_conn *c, const struct http_request *rq)
{
    struct completion_request r;
    char msg[480];
    int status = completion_parse(rq->body, rq->body_len, &S->lim, &r, msg, sizeof msg);
    if (status != 0) {
        reply_error(c, status, msg);
        return;
    }
    struct engine_job job;
    struct engine_job_top *top = NULL;
    if (engine_job_init(&job, r.prompt, r.prompt_len, r.max_tokens, r.n_probs) != 0 ||
        (r.n_probs > 0 && (top = malloc((size_t)r.n_probs * sizeof *top)) == NULL)) {
        snprintf(msg, sizeof msg, "cannot take the request: %s", strerror(errno));
        reply_error(c, 500, msg);
        engine_job_free(&job);
        completion_request_free(&r);
        return;
    }
    job.stop_token = r.stop_token;
    job.sampling = r.sampling;
    if (!engine_loop_submit(S->loop, &job)) {
        reply_error(c, 503, "the server is stopping");
    } else if (r.stream) {
        stream_job(S, c, &r, &job, top);
    } else {
        for (;;) {
            int32_t n_out = 0;
            bool done = false;
            engine_loop_poll(S->loop, &job, &n_out, &done);
            if (done) {
                break;
            }
            if (http_conn_wait(c, engine_job_wake_fd(&job)) == HTTP_WAIT_GONE) {
                engine_loop_cancel(S->loop, &job);
                do {
                    wait_news(&job);
                    engine_loop_poll(S->loop, &job, &n_out, &done);
                } while (!done);
                break;
            }
        }
        if (!job.cancel) {
            reply_whole(S, c, &r, &job);
        }
    }
    free(top);
    engine_job_free(&job);
    completion_request_free(&r);
}

/* ------------------------------------------------------------------ */
/* Routes                                                              */
/* ------------------------------------------------------------------ */

static void handle(void *ctx, struct http_conn *c, const struct http_request *rq)
{
    struct server *S = ctx;
    const struct {
        const char *path, *method;
    } routes[] = {
        {"/health", "GET"}, {"/metrics", "GET"}, {"/completion", "POST"}, {"/completions", "POST"},
    };
    size_t k = 0;
    while (k < sizeof routes / sizeof routes[0] && strcmp(rq->path, routes[k].path) != 0) {
        k++;
    }
    if (k == sizeof routes / sizeof routes[0]) {
        reply_error(c, 404, "File Not Found");
        return;
    }
    if (strcmp(rq->method, routes[k].method) != 0) {
        char allow[64], message[320];
        snprintf(allow, sizeof allow, "Allow: %s\r\n", routes[k].method);
        snprintf(message, sizeof message, "%s %s: use %s", rq->method, rq->path, routes[k].method);
        struct sbuf b = {NULL, 0, 0, false};
        completion_error(&b, 405, message, false);
        http_reply(c, 405, JSON_TYPE, allow, b.oom ? "" : b.p, b.oom ? 0 : b.len);
        sbuf_free(&b);
        return;
    }
    if (k == 0) {
        static const char ok[] = "{\"status\":\"ok\"}";
        http_reply(c, 200, JSON_TYPE, NULL, ok, sizeof ok - 1);
    } else if (k == 1) {
        serve_metrics(S, c);
    } else {
        serve_completion(S, c, rq);
    }
}

/* ------------------------------------------------------------------ */
/* Start and stop                                                      */
/* ------------------------------------------------------------------ */

struct options {
    const char *engine;
    const char *port_file;
    long port;
    long slots;
    float temperature_scale;
};

/* A whole decimal number in [lo, hi]. */
static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi) {
        return false;
    }
    *out = v;
    return true;
}

/* Returns 0, or 2 after saying what is wrong. */
static int parse_args(int argc, char **argv, struct options *o)
{
    static const struct option opts[] = {
        {"engine", required_argument, NULL, 'e'},    {"port", required_argument, NULL, 'p'},
        {"port-file", required_argument, NULL, 'f'}, {"slots", required_argument, NULL, 's'},
        {"temperature-scale", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->slots = 4;
    o->temperature_scale = 1.0f;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (ch) {
        case 'e': o->engine = optarg; break;
        case 'f': o->port_file = optarg; break;
        case 'p':
            if (!parse_long(optarg, 0, 65535, &o->port)) {
                fprintf(stderr, "engine_server: --port: expected 0-65535, got \"%s\"\n", optarg);
                return 2;
            }
            break;
        case 's':
            if (!parse_long(optarg, 1, 1024, &o->slots)) {
                fprintf(stderr, "engine_server: --slots: expected 1-1024, got \"%s\"\n", optarg);
                return 2;
            }
            break;
        case 't': {
            char *end = NULL;
            errno = 0;
            double v = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || errno != 0 || !(v > 0.0 && v <= 10.0)) {
                fprintf(stderr,
                        "engine_server: --temperature-scale: expected a number in (0, 10], got "
                        "\"%s\"\n",
                        optarg);
                return 2;
            }
            o->temperature_scale = (float)v;
            break;
        }
        case 'h': usage(stdout); exit(0);
        case ':':
            fprintf(stderr, "engine_server: %s needs a value\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        default:
            fprintf(stderr, "engine_server: unknown argument \"%s\"\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "engine_server: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (o->engine == NULL || o->engine[0] == '\0') {
        fprintf(stderr, "engine_server: --engine SPEC is required\n");
        usage(stderr);
        return 2;
    }
    if (o->port_file != NULL && o->port_file[0] == '\0') {
        fprintf(stderr, "engine_server: --port-file: expected a path, got \"\"\n");
        return 2;
    }
    return 0;
}

/* Write the port to path through a temporary file renamed into place.
 * Returns 0, or -1 after saying what failed. */
static int write_port_file(const char *path, int port)
{
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp) {
        fprintf(stderr, "engine_server: --port-file %s: the path is too long\n", path);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        fprintf(stderr, "engine_server: --port-file: cannot create %s: %s\n", tmp,
                strerror(errno));
        return -1;
    }
    bool ok = fprintf(f, "%d\n", port) > 0;
    ok = fflush(f) == 0 && ok;
    ok = fsync(fileno(f)) == 0 && ok;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "engine_server: --port-file: cannot write %s: %s\n", path,
                strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        return rc;
    }
    /* The signals are taken by sigwait in this thread only; every thread
     * started from here on inherits the mask. */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    if (pthread_sigmask(SIG_BLOCK, &stop_set, NULL) != 0 || signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        fprintf(stderr, "engine_server: cannot set up signal handling\n");
        return 1;
    }
    struct assay_adapter adapter = {NULL, NULL};
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_adapter_open_spec(o.engine, &adapter, &diag);
    if (st != ASSAY_OK) {
        char why[600];
        fprintf(stderr, "engine_server: --engine %s: %s (%s)\n", o.engine,
                assay_diag_format(&diag, why, sizeof why), assay_status_str(st));
        return 2;
    }
    struct server S;
    memset(&S, 0, sizeof S);
    struct assay_adapter_info info;
    assay_adapter_get_info(&adapter, &info);
    const struct assay_engine *engine = assay_bundled_engine(&adapter);
    S.lim.vocab = info.vocab;
    S.lim.n_ctx = info.n_ctx;
    S.lim.eos_token = engine != NULL ? assay_engine_params(engine)->model->eos_token : -1;
    S.lim.order = info.sampling_order;
    S.lim.temperature_scale = o.temperature_scale;
    snprintf(S.model, sizeof S.model, "%s",
             info.model_name != NULL && info.model_name[0] != '\0' ? info.model_name : "engine");
    if (info.vocab <= 0) {
        fprintf(stderr, "engine_server: --engine %s: the engine does not say its vocabulary, "
                        "so token ids cannot be checked\n",
                o.engine);
        assay_adapter_close(&adapter);
        return 2;
    }
    char err[300];
    if (engine_loop_start(&adapter, (int32_t)o.slots, &S.loop, err, sizeof err) != 0) {
        fprintf(stderr, "engine_server: %s\n", err);
        assay_adapter_close(&adapter);
        return 1;
    }
    S.lim.logits = engine_loop_has_logits(S.loop);
    struct http_server_params hp = http_server_default_params();
    hp.port = (int)o.port;
    hp.handler = handle;
    hp.ctx = &S;
    struct http_server *http = NULL;
    if (http_server_start(&hp, &http, err, sizeof err) != 0) {
        fprintf(stderr, "engine_server: cannot listen: %s\n", err);
        engine_loop_stop(S.loop);
        assay_adapter_close(&adapter);
        return 1;
    }
    int port = http_server_port(http);
    rc = 0;
    if (o.port_file != NULL && write_port_file(o.port_file, port) != 0) {
        rc = 1;
    }
    if (rc == 0) {
        fprintf(stderr,
                "engine_server: serving %s on http://127.0.0.1:%d (%d slots, vocabulary %d, "
                "context %d, EOS %d, logprobs %s)\n",
                info.spec != NULL ? info.spec : o.engine, port, (int)o.slots, (int)info.vocab,
                (int)info.n_ctx, (int)S.lim.eos_token, S.lim.logits ? "yes" : "no");
        int sig = 0;
        while (sigwait(&stop_set, &sig) != 0) {
        }
        fprintf(stderr, "engine_server: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    http_server_stop(http);
    engine_loop_stop(S.loop);
    assay_adapter_close(&adapter);
    if (rc == 0 && o.port_file != NULL) {
        unlink(o.port_file);
    }
    if (rc == 0) {
        fprintf(stderr, "engine_server: stopped\n");
    }
    return rc;
}
